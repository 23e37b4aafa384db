//! Every drill scene over real loopback sockets (FO-X1, FO-X2, FO-X3, FO-D1, FO-D4, FO-D6,
//! FO-D6-OFF), and FO-X4's scenes at the production thresholds behind forwarders that make a
//! host fail without a word (about 30 s each; they run in parallel with the others).

use std::sync::{Arc, Mutex, PoisonError};

use switchyard_core::failover::{ATTACH_PREFIX, SWITCH_PREFIX};
use switchyard_tools::failover::drill::{self, Scene, Verdict};

async fn scene_passes(scene: Scene) {
    let printed = Arc::new(Mutex::new(Vec::<String>::new()));
    let kept = Arc::clone(&printed);
    let sink: drill::Sink = Arc::new(move |line: &str| {
        kept.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line.to_owned());
    });
    let report = drill::run_streaming(&[scene], sink).await;
    let printed = std::mem::take(&mut *printed.lock().unwrap_or_else(PoisonError::into_inner));
    let text = report.render();
    assert!(!report.failed(), "{text}");
    // Issue #26: every run of the scene prints its attach line (scene 5 runs twice), and its
    // timeline has it, so the channel before the fault is drawn.
    let timelines = report.timelines();
    let attach_lines = printed.iter().filter(|l| l.contains(ATTACH_PREFIX)).count();
    assert_eq!(attach_lines, timelines.len(), "{}", printed.join("\n"));
    for timeline in &timelines {
        assert!(
            timeline
                .lines
                .iter()
                .any(|l| l.line.starts_with(ATTACH_PREFIX)),
            "{timeline:?}"
        );
        // The run goes on past its last move, so the channel it ends on has a bar.
        let last_move = timeline
            .lines
            .iter()
            .filter(|l| l.line.starts_with(ATTACH_PREFIX) || l.line.starts_with(SWITCH_PREFIX))
            .map(|l| l.at_ms)
            .max()
            .expect("a move");
        assert!(timeline.end_ms > last_move, "{timeline:?}");
        assert!(timeline.verdict == Some(Verdict::Pass), "{timeline:?}");
    }
    assert!(report.count(Verdict::Pass) >= 4, "{text}");
    for timing in report.scenes.iter().flat_map(|s| &s.timings) {
        assert!(timing.took_ms <= timing.deadline_ms, "{text}");
        assert!(
            timing.took_ms >= timing.lower_bound_ms,
            "faster than the rules allow: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_x1_drill_scene_1_kill_the_relay_in_use() {
    scene_passes(Scene::S1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_d4_drill_scene_2_both_down_no_switch_no_storm() {
    scene_passes(Scene::S2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_d1_drill_scene_3_no_switch_back_inside_cooldown() {
    scene_passes(Scene::S3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_d6_drill_scene_4_exemption_brings_the_client_back() {
    scene_passes(Scene::S4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_d6_off_drill_scene_4b_waits_for_the_cooldown() {
    scene_passes(Scene::S4b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_x2_drill_scene_ctrl_cooldown_zero_still_fails_over() {
    scene_passes(Scene::Ctrl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_x3_drill_scene_5_everything_down_then_one_relay_back() {
    scene_passes(Scene::S5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_x4_drill_dark_host_a_then_live_on_host_b_within_the_deadline() {
    scene_passes(Scene::Dark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_x4_drill_one_way_host_a_then_live_on_host_b_within_the_deadline() {
    scene_passes(Scene::OneWay).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_x4_fo_h_1_drill_lossy_host_a_no_switch_storm_and_the_degradation_visible() {
    scene_passes(Scene::Lossy).await;
}
