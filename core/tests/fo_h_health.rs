//! FO-H: health (FO-H-1: unhealthy only in backoff, after the attempts or the grace counted from
//! leaving healthy; FO-H-2: `MIN_ATTEMPTS=0` never switches), with the open results that keep
//! the old channel (OPS-2). Each name carries its ID.

mod fo_rig;

use fo_rig::*;
use switchyard_core::failover::*;

#[test]
fn fo_h_1_healthy_channel_is_never_unhealthy() {
    let mut rig = Rig::production(thresholds());
    rig.advance(10_000_000).tick();
    assert!(!rig.sup.is_unhealthy(rig.now));
    assert!(rig.actions.is_empty());
}

#[test]
fn fo_h_1_backoff_is_unhealthy_after_min_attempts() {
    let mut rig = Rig::production(thresholds());
    rig.backoff(2);
    assert!(!rig.sup.is_unhealthy(rig.now));
    rig.tick();
    assert_eq!(rig.opening(), None);
    rig.backoff(3);
    assert!(rig.sup.is_unhealthy(rig.now));
}

#[test]
fn fo_h_1_grace_clock_starts_when_the_channel_left_healthy() {
    let mut rig = Rig::production(thresholds());
    rig.advance(100_000); // a long healthy life must not count
    rig.backoff(0);
    let left_at = rig.now;
    rig.advance(14_999).backoff(1); // further backoff reports keep the original start
    assert!(!rig.sup.is_unhealthy(rig.now));
    rig.tick();
    assert_eq!(rig.opening(), None);
    rig.advance(1);
    assert_eq!(rig.now.since_ms(left_at), 15_000);
    assert!(rig.sup.is_unhealthy(rig.now));
    rig.tick();
    assert_eq!(rig.opening(), Some(A2));
}

#[test]
fn fo_h_1_recovery_resets_the_clock() {
    let mut rig = Rig::production(thresholds());
    rig.backoff(1);
    rig.advance(10_000).state(ChannelState::Healthy);
    rig.advance(1_000).backoff(1);
    rig.advance(10_000);
    assert!(
        !rig.sup.is_unhealthy(rig.now),
        "clock restarted at the second backoff"
    );
    rig.advance(5_000);
    assert!(rig.sup.is_unhealthy(rig.now));
}

#[test]
fn fo_h_1_reports_about_another_url_are_ignored() {
    let mut rig = Rig::production(thresholds());
    rig.sup
        .handle_channel_state(rig.now, &url(B), ChannelState::Backoff { attempts: 9 });
    assert!(!rig.sup.is_unhealthy(rig.now));
}

#[test]
fn fo_h_2_min_attempts_zero_never_switches() {
    let mut rig = Rig::production(Thresholds {
        min_attempts: 0,
        ..thresholds()
    });
    rig.backoff(1_000);
    for _ in 0..100 {
        rig.advance(2_000).tick();
    }
    assert!(rig.actions.is_empty());
    assert_eq!(rig.counters(), FailoverCounters::default());
    assert_eq!(rig.sup.poll_timeout(), None);
}

// One open in flight / make-before-break / stale results.
#[test]
fn fo_h_1_failed_open_keeps_the_old_channel_and_stale_results_are_ignored() {
    let mut rig = Rig::production(thresholds());
    rig.current_dies();
    rig.tick();
    assert!(
        !rig.open_ok(B),
        "a result for an open not in flight is stale"
    );
    assert_eq!(rig.opening(), Some(A2));
    rig.sup
        .handle_open_failed(rig.now, &url(A2), OpenFailure::TimedOut);
    assert_eq!(
        rig.current(),
        Some(A1),
        "make-before-break: old channel kept"
    );
    assert!(!rig
        .sup
        .handle_open_failed(rig.now, &url(A2), OpenFailure::Failed));
}

// Found by mutation testing (docs/ASSURANCE.md).
/// OPS-2: a failed open says "keeping the old channel" only when there is one. At start (the
/// first open of the first directory) there is none: the line says so instead of implying a
/// working channel.
#[test]
fn ops_2_a_failed_first_open_does_not_claim_an_old_channel() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&["a", "b"]);
    assert_eq!(rig.opening(), Some("a"));
    assert!(rig.open_fail("a"));
    let line = rig
        .skip_lines()
        .last()
        .map(|l| l.to_string())
        .unwrap_or_default();
    assert!(line.contains("did not come up"), "{line}");
    assert!(!line.contains("keeping the old channel"), "{line}");
    assert!(line.contains("no channel yet"), "{line}");
    // With a channel, the line keeps saying it is kept.
    let mut rig = Rig::new(thresholds());
    rig.directory(&["a", "b"]);
    assert!(rig.open_ok("a"));
    rig.current_dies();
    rig.advance(60_000).tick();
    if let Some(target) = rig.opening().map(str::to_owned) {
        assert!(rig.open_fail(&target));
        let line = rig
            .skip_lines()
            .last()
            .map(|l| l.to_string())
            .unwrap_or_default();
        assert!(line.contains("keeping the old channel"), "{line}");
    }
}
