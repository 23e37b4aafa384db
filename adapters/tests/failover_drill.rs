//! Every drill scene over real loopback sockets (FO-X1, FO-X2, FO-X3, FO-D1, FO-D4, FO-D6,
//! FO-D6-OFF).

use switchyard_adapters::failover::drill::{self, Scene, Verdict};

async fn scene_passes(scene: Scene) {
    let report = drill::run(&[scene]).await;
    let text = report.render();
    assert!(!report.failed(), "{text}");
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
