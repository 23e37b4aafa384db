//! FO-X4 (a relay host that goes dark: its URLs must not each cost a full `UP_TIMEOUT_MS`
//! before another host is tried) and the FO-X3 probe defects issue #38 found. Each
//! `*_regression_*` test was red on the core before its fix.

mod fo_rig;

use fo_rig::*;
use switchyard_core::failover::*;
use switchyard_core::MonoMs;

/// The seed's production topology with host A's two URLs really on one host (the rig's `A1`
/// and `A2` are two host names, so two failure domains).
const DARK_A1: &str = "wss://a.example/relay";
const DARK_A2: &str = "wss://a.example:8443/relay";
const DARK_B: &str = "wss://b.example/relay";
const DARK_C: &str = "wss://c.example/relay";

fn timed_out(rig: &mut Rig, u: &str) {
    let up_timeout_ms = rig.sup.thresholds().up_timeout_ms;
    rig.advance(up_timeout_ms);
    let now = rig.now;
    rig.sup
        .handle_open_failed(now, &url(u), OpenFailure::TimedOut);
    while rig.sup.poll_output().is_some() {}
}

/// Attached to `first` of `list`, then the channel dies without a word: it is noticed as a
/// backoff with no attempt made (reconnects to a dark host hang) and turns unhealthy only
/// when `GRACE_MS` has passed.
fn dark_after_attach(list: &[&str], first: &str) -> Rig {
    let mut rig = Rig::new(thresholds());
    rig.directory(list);
    if rig.opening() != Some(first) {
        rig.sup.handle_open_failed(
            rig.now,
            &url(rig.opening().expect("an open").to_owned().as_str()),
            OpenFailure::Failed,
        );
    }
    rig.open_ok(first);
    rig.clear();
    rig.backoff(0);
    let grace_ms = rig.sup.thresholds().grace_ms;
    rig.advance(grace_ms);
    rig
}

#[test]
fn fo_x4_regression_a_dark_hosts_other_url_is_tried_after_the_other_host() {
    let mut rig = dark_after_attach(&[DARK_A1, DARK_A2, DARK_B], DARK_A1);
    rig.tick();
    assert_eq!(
        rig.opens(),
        vec![(DARK_B.to_owned(), false)],
        "the current channel's host is the chain's first suspect: B before A's other URL"
    );
    // B is live: one open, no UP_TIMEOUT_MS burnt on A.
    assert!(rig.open_ok(DARK_B));
    assert_eq!(rig.current(), Some(DARK_B));
    assert_eq!(rig.counters().open_failed, 0);
}

#[test]
fn fo_x4_regression_a_host_whose_open_timed_out_is_tried_after_the_other_hosts() {
    // C is in use and dies; A (two URLs, first in the list) is dark, B is live.
    let mut rig = dark_after_attach(&[DARK_C, DARK_A1, DARK_A2, DARK_B], DARK_C);
    rig.tick();
    assert_eq!(rig.opening(), Some(DARK_A1), "A1 is the first clean URL");
    timed_out(&mut rig, DARK_A1);
    assert_eq!(
        rig.opening(),
        Some(DARK_B),
        "A1 timed out: A is a suspect host, so B comes before A2"
    );
    assert!(rig.open_ok(DARK_B));
    assert_eq!(
        rig.counters().open_failed,
        1,
        "one timeout for the dark host, not two"
    );
}

#[test]
fn fo_x4_a_suspect_hosts_url_is_opened_when_no_other_host_is_clean() {
    let mut rig = dark_after_attach(&[DARK_A1, DARK_A2, DARK_B], DARK_A1);
    rig.tick();
    assert_eq!(rig.opening(), Some(DARK_B));
    rig.open_fail(DARK_B);
    assert_eq!(
        rig.opening(),
        Some(DARK_A2),
        "B failed: A's other URL is the only clean candidate left (FO-D3: no exemption)"
    );
    assert!(rig
        .sup
        .open_in_flight()
        .is_some_and(|o| o.exemption().is_none()));
}

#[test]
fn fo_x4_a_new_round_starts_off_the_current_channels_host() {
    // Everything clean failed in one chain; at the next tick (a new round) B is tried again
    // before A2 (both clean with cooldown 0: FO-X2 passes failed ones over only in a round).
    let t = Thresholds {
        cooldown_ms: 0,
        ..thresholds()
    };
    let mut rig = Rig::new(t);
    rig.directory(&[DARK_A1, DARK_A2, DARK_B]);
    rig.open_ok(DARK_A1);
    rig.clear();
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(DARK_B));
    rig.open_fail(DARK_B);
    assert_eq!(rig.opening(), Some(DARK_A2));
    rig.open_fail(DARK_A2);
    assert_eq!(rig.opening(), None, "each URL once per chain");
    rig.advance(t.check_ms);
    rig.tick();
    assert_eq!(
        rig.opening(),
        Some(DARK_B),
        "a new round: other hosts first again"
    );
}

#[test]
fn fo_x4_hosts_in_one_domain_keep_directory_order() {
    // Every URL on one host (a loopback drill): the order is the directory's, as before.
    let (a, b, c) = (
        "ws://127.0.0.1:4001/a1",
        "ws://127.0.0.1:4002/a2",
        "ws://127.0.0.1:4003/b",
    );
    let mut rig = Rig::new(thresholds());
    rig.directory(&[a, b, c]);
    rig.open_ok(a);
    rig.clear();
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(b));
}

#[test]
fn fo_d1_the_directory_path_ignores_hosts_and_never_bypasses_cooldown() {
    let mut rig = dark_after_attach(&[DARK_A1, DARK_A2, DARK_B], DARK_A1);
    rig.tick();
    assert!(rig.open_ok(DARK_B));
    rig.clear();
    // The directory puts A1 (cooling, switched away) first: refused, still cooling.
    assert_eq!(
        rig.directory(&[DARK_A1, DARK_A2, DARK_B]),
        DirectoryOutcome::Refused
    );
    assert!(rig.opens().is_empty());
}

/// FO-X3: "a dead URL can get a clean open, a probe and then its exemption within 4 s". With
/// `PROBE_MIN_MS` = `CHECK_MS` the first round is due at the tick after the one that spent
/// the first exemption: U2, whose clean open failed a tick earlier and whose exemption is
/// unspent, was probed by the in-tick continuation instead of exempted.
#[test]
fn fo_x3_regression_no_probe_of_a_url_whose_exemption_is_unspent() {
    let t = Thresholds {
        probe_min_ms: thresholds().check_ms,
        ..thresholds()
    };
    let mut rig = Rig::new(t);
    rig.directory(&[U0, U1, U2]);
    rig.open_ok(U0);
    rig.clear();
    rig.current_dies();
    rig.tick();
    rig.open_fail(U1);
    rig.open_fail(U2);
    assert_eq!(rig.opening(), None);
    assert_eq!(
        rig.opens(),
        vec![(U1.to_owned(), false), (U2.to_owned(), false)]
    );
    rig.clear();
    rig.advance(t.check_ms);
    rig.tick();
    assert_eq!(
        rig.opens(),
        vec![(U1.to_owned(), true)],
        "U1's exemption first (FO-D5)"
    );
    rig.open_fail(U1);
    assert!(
        rig.sup.open_in_flight().is_some_and(|o| !o.probe()),
        "U2's exemption is spent before any probe: {:?}",
        rig.sup.open_in_flight()
    );
    assert_eq!(rig.opens()[1], (U2.to_owned(), true));
    assert_eq!(rig.counters().probe_opens, 0);
}

/// FO-X3: a probe answered after the schedule was reset (the channel recovered while it was
/// in flight) left a "probed" mark with no round under way: the next outage's round opened
/// nothing, logged `probe round failed (1 … probed)` and doubled the interval.
#[test]
fn fo_x3_regression_a_probe_answered_after_the_schedule_reset_marks_nothing() {
    let t = thresholds();
    let mut rig = u1_spent_first_round_scheduled(t);
    let due = rig.sup.probe_schedule().next_round_at().expect("scheduled");
    rig.now = due;
    rig.tick();
    assert!(rig.sup.open_in_flight().is_some_and(|o| o.probe()));
    // The current channel recovers while the probe is in flight: the schedule resets.
    rig.state(ChannelState::Healthy);
    assert_eq!(rig.sup.probe_schedule().next_round_at(), None);
    rig.open_fail(U1);
    let stale = rig
        .sup
        .exclusions(rig.now)
        .named
        .iter()
        .any(|e| matches!(e.rule, ExclusionRule::ProbedThisRound { .. }));
    assert!(!stale, "no round is under way, so nothing is probed in it");
    // The next outage: its first round probes U1 instead of failing an empty round.
    rig.clear();
    rig.current_dies();
    rig.advance(t.check_ms);
    rig.tick();
    let due = rig.sup.probe_schedule().next_round_at().expect("scheduled");
    rig.now = due;
    rig.tick();
    assert!(
        rig.sup
            .open_in_flight()
            .is_some_and(|o| o.probe() && o.url() == &url(U1)),
        "{:?}",
        rig.lines
    );
    assert!(!rig.lines.iter().any(|l| l.contains("probe round failed")));
}

/// FO-D5 in the probe round: the probeable URL whose cycle ends first goes first, whatever
/// the directory order. (The kind priority of FO-D5 cannot separate two probeable URLs: a
/// probe needs the cycle's exemption spent, and a spent exemption that failed restarts the
/// cycle as `open-failed`; a `switched-away` cycle always has its exemption unspent.)
#[test]
fn fo_d5_the_probe_round_goes_in_exemption_order() {
    let t = Thresholds {
        probe_min_ms: 30_000,
        probe_max_ms: 60_000,
        ..thresholds()
    };
    let mut rig = Rig::new(t);
    rig.directory(&[U0, U1, U2]);
    rig.open_ok(U0);
    rig.current_dies();
    rig.now = MonoMs(2_000);
    rig.tick();
    rig.open_fail(U1);
    rig.open_fail(U2);
    rig.now = MonoMs(4_000);
    rig.tick();
    // Exempt U1 then (in-tick) U2: U2's exemption fails last, so U2's cycle ends last.
    rig.open_fail(U1);
    rig.now = MonoMs(5_000);
    let opening = rig.opening().map(str::to_owned);
    assert_eq!(opening.as_deref(), Some(U2));
    rig.open_fail(U2);
    // Reorder the list so directory order disagrees with the cycles' ends.
    rig.directory(&[U0, U2, U1]);
    rig.now = MonoMs(6_000);
    rig.tick();
    let due = rig.sup.probe_schedule().next_round_at().expect("scheduled");
    rig.now = due;
    rig.clear();
    rig.tick();
    assert!(
        rig.sup
            .open_in_flight()
            .is_some_and(|o| o.probe() && o.url() == &url(U1)),
        "U1's cycle ends first: probed first though U2 is listed first: {:?}",
        rig.sup.open_in_flight()
    );
    rig.open_fail(U1);
    assert!(rig
        .sup
        .open_in_flight()
        .is_some_and(|o| o.probe() && o.url() == &url(U2)));
}
