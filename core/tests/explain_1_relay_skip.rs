//! EXPLAIN-1: the `[relay-skip]` "no other candidate in the chain" line names, per listed URL
//! (the first eight in list order, then a count), the rule that excluded it. The rule is the
//! core's decision (`Skip::NoCandidate::exclusions`); the line only prints it.

mod fo_rig;

use fo_rig::*;
use switchyard_core::failover::*;
use switchyard_core::MonoMs;

/// The explanation of the no-candidate line the last input (a tick) emitted, asked of the core
/// right after it (as the driver does), and that line as logged.
fn last_no_candidate(rig: &Rig) -> (Vec<Exclusion>, usize, String) {
    let at = rig
        .events
        .iter()
        .rposition(|e| matches!(e, Event::Skipped(Skip::NoCandidate { .. })))
        .expect("a no-candidate line");
    assert_eq!(at, rig.events.len() - 1, "the last input emitted it");
    let Exclusions { named, more } = rig.sup.exclusions(rig.now);
    (named, more, rig.lines[at].clone())
}

fn left_ms(rig: &Rig, u: &str) -> u64 {
    rig.sup
        .cooldown_entry(&url(u))
        .expect("cooling")
        .until()
        .since_ms(rig.now)
}

fn excl(u: &str, rule: ExclusionRule) -> Exclusion {
    Exclusion { url: url(u), rule }
}

#[test]
fn explain_1_current_and_cooling_with_the_exemption_off() {
    let mut rig = drained_on_b(no_exempt());
    rig.advance(1_000);
    rig.current_dies();
    rig.tick();
    let (exclusions, more, line) = last_no_candidate(&rig);
    let a1 = left_ms(&rig, A1);
    let a2 = left_ms(&rig, A2);
    assert_eq!(
        exclusions,
        [
            excl(
                A1,
                ExclusionRule::Cooling {
                    kind: CooldownKind::SwitchedAway,
                    left_ms: a1
                }
            ),
            excl(
                A2,
                ExclusionRule::Cooling {
                    kind: CooldownKind::OpenFailed,
                    left_ms: a2
                }
            ),
            excl(B, ExclusionRule::Current),
        ]
    );
    assert_eq!(more, 0);
    assert!(line.starts_with(SKIP_PREFIX), "{line}");
    // The existing wording stays (operators and the drill grep it).
    assert!(
        line.contains("no other candidate in the chain (3 candidates, 3 excluded; exemption off)"),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "; excluded: {A1} (cooling: switched-away {a1} ms left, exemption off), {A2} (cooling: open-failed {a2} ms left, exemption off), {B} (current: the current channel)"
        )),
        "{line}"
    );
    assert!(!line.contains("more"), "{line}");
}

/// The rig of the exemption tests: on B, B dies, both A URLs are exempted and fail.
fn exemptions_spent(thresholds: Thresholds) -> Rig {
    let mut rig = drained_on_b(thresholds);
    rig.advance(1_000);
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(A1), "switched-away is exempted first");
    rig.open_fail(A1);
    assert_eq!(rig.opening(), Some(A2));
    rig.open_fail(A2);
    assert_eq!(rig.opening(), None);
    rig.advance(2_000);
    rig.tick();
    rig
}

#[test]
fn explain_1_exemption_spent_with_probing_off() {
    let rig = exemptions_spent(Thresholds {
        probe_max_ms: 0,
        ..thresholds()
    });
    let (exclusions, more, line) = last_no_candidate(&rig);
    let a1 = left_ms(&rig, A1);
    let a2 = left_ms(&rig, A2);
    assert_eq!(
        exclusions,
        [
            excl(
                A1,
                ExclusionRule::ExemptionSpent {
                    kind: CooldownKind::OpenFailed,
                    left_ms: a1
                }
            ),
            excl(
                A2,
                ExclusionRule::ExemptionSpent {
                    kind: CooldownKind::OpenFailed,
                    left_ms: a2
                }
            ),
            excl(B, ExclusionRule::Current),
        ]
    );
    assert_eq!(more, 0);
    assert!(
        line.contains(&format!(
            "{A1} (exemption-spent: open-failed {a1} ms left, exempted this cooldown cycle)"
        )),
        "{line}"
    );
}

#[test]
fn explain_1_probe_not_due_names_the_next_round() {
    let rig = exemptions_spent(thresholds());
    let (exclusions, _, line) = last_no_candidate(&rig);
    let due = rig
        .sup
        .probe_schedule()
        .next_round_at()
        .expect("a round is scheduled")
        .since_ms(rig.now);
    assert_eq!(due, thresholds().probe_min_ms);
    let a1 = left_ms(&rig, A1);
    assert_eq!(
        exclusions[0],
        excl(
            A1,
            ExclusionRule::ProbeNotDue {
                kind: CooldownKind::OpenFailed,
                left_ms: a1,
                next_round_in_ms: due
            }
        )
    );
    assert_eq!(exclusions[2], excl(B, ExclusionRule::Current));
    assert!(
        line.contains(&format!(
            "{A1} (probe-not-due: open-failed {a1} ms left, exemption spent, next probe round in {due} ms)"
        )),
        "{line}"
    );
}

/// Twelve URLs: the line names the first eight in list order and counts the other four; a list
/// of a hundred names eight too (the line does not grow with the list).
#[test]
fn explain_1_twelve_urls_give_eight_names_and_a_count_of_four() {
    for n in [12usize, 100] {
        let urls: Vec<String> = (0..n)
            .map(|i| format!("wss://r{i:03}.example/relay"))
            .collect();
        let list: Vec<&str> = urls.iter().map(String::as_str).collect();
        let mut rig = Rig::new(no_exempt());
        rig.directory(&list);
        rig.open_ok(list[0]);
        rig.advance(1_000);
        rig.current_dies();
        rig.tick();
        // The chain tries every other URL once, each fails and cools.
        while let Some(target) = rig.opening().map(str::to_owned) {
            rig.open_fail(&target);
        }
        rig.advance(2_000);
        rig.tick();
        let (exclusions, more, line) = last_no_candidate(&rig);
        assert_eq!(exclusions.len(), 8);
        assert_eq!(more, n - 8);
        let named: Vec<&str> = exclusions.iter().map(|e| e.url.as_str()).collect();
        assert_eq!(named, list[..8], "the first eight in list order");
        assert_eq!(exclusions[0].rule, ExclusionRule::Current);
        assert!(exclusions[1..].iter().all(|e| e.rule.name() == "cooling"));
        assert_eq!(line.matches("wss://").count(), 8, "{line}");
        assert!(line.ends_with(&format!(", and {} more", n - 8)), "{line}");
        assert!(line.contains(&format!("({n} candidates, {n} excluded;")));
    }
}

/// The prefix check the model checker uses agrees with the line; the explanation is appended
/// to the event's own rendering, never instead of it.
#[test]
fn explain_1_the_longer_line_keeps_its_prefix_and_wording() {
    let rig = exemptions_spent(thresholds());
    let event = rig.events.last().expect("the no-candidate event");
    assert!(matches!(event, Event::Skipped(Skip::NoCandidate { .. })));
    let line = rig.lines.last().expect("its line");
    assert!(renders_with_prefix(event, SKIP_PREFIX));
    assert!(!renders_with_prefix(event, SWITCH_PREFIX));
    let plain = render(event);
    assert!(line.starts_with(&plain), "{line}");
    assert!(line[plain.len()..].starts_with("; excluded: "), "{line}");
    assert!(renders_with_prefix(event, &plain));
    // Any other event renders as before.
    let mut rig = Rig::production(thresholds());
    rig.current_dies();
    rig.tick();
    let open_failed = rig.open_fail(A2);
    assert!(open_failed);
    for (event, line) in rig.events.iter().zip(&rig.lines) {
        assert_eq!(*line, render(event));
    }
}

/// Asked at any instant, not only after a no-candidate line: a URL the chain would open is not
/// excluded.
#[test]
fn explain_1_a_clean_url_is_not_excluded() {
    let mut rig = Rig::production(thresholds());
    let Exclusions { named, more } = rig.sup.exclusions(rig.now);
    assert_eq!(named, [excl(A1, ExclusionRule::Current)]);
    assert_eq!(more, 0);
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(A2));
    assert!(rig.skip_lines().is_empty());
}

/// A probe whose failure is reported after the channel recovered (which reset the probe
/// schedule) and died again marks nothing (issue #38: it used to leave A1 "probed this
/// round" with no round under way): both cooling URLs wait for the next round.
#[test]
fn explain_1_a_probe_answered_after_the_reset_leaves_both_waiting_for_the_round() {
    let mut rig = exemptions_spent(thresholds());
    rig.advance(thresholds().probe_min_ms);
    rig.tick();
    assert_eq!(rig.opening(), Some(A1), "the round's first probe");
    rig.state(ChannelState::Healthy);
    rig.current_dies();
    rig.open_fail(A1);
    rig.advance(2_000);
    rig.tick();
    let (exclusions, _, line) = last_no_candidate(&rig);
    let (a1, a2) = (left_ms(&rig, A1), left_ms(&rig, A2));
    let due = thresholds().probe_min_ms;
    let not_due = |left_ms| ExclusionRule::ProbeNotDue {
        kind: CooldownKind::OpenFailed,
        left_ms,
        next_round_in_ms: due,
    };
    assert_eq!(
        exclusions,
        [
            excl(A1, not_due(a1)),
            excl(A2, not_due(a2)),
            excl(B, ExclusionRule::Current),
        ]
    );
    assert!(!line.contains("probed-this-round"), "{line}");
}

/// Mid-round, between the chain that stopped and the next tick: the URL probed in the round
/// under way is "probed this round"; the one whose exemption failed in that same chain is not
/// excluded (the next tick probes it, FO-X3a).
#[test]
fn explain_1_probed_this_round_mid_round() {
    let t = thresholds();
    let mut rig = u1_spent_first_round_scheduled(t); // due at 21 s
    rig.now = MonoMs(19_000);
    rig.directory(&[U0, U1, U2]);
    rig.now = MonoMs(20_000);
    rig.tick();
    rig.open_fail(U2); // U2's clean open
    rig.now = MonoMs(22_000);
    rig.tick();
    assert!(rig
        .sup
        .open_in_flight()
        .is_some_and(|o| o.exemption().is_some()));
    rig.open_fail(U2); // U2's exemption, in this chain
    assert!(rig
        .sup
        .open_in_flight()
        .is_some_and(|o| o.probe() && o.url() == &url(U1)));
    rig.open_fail(U1); // U1's probe; U2 failed in this chain: left to the next tick
    assert_eq!(rig.opening(), None);
    let named = rig.sup.exclusions(rig.now).named;
    let rules: Vec<(&str, &str)> = named
        .iter()
        .map(|e| (e.url.as_str(), e.rule.name()))
        .collect();
    assert_eq!(rules, [(U0, "current"), (U1, "probed-this-round")]);
    rig.now = MonoMs(24_000);
    rig.tick();
    assert!(rig
        .sup
        .open_in_flight()
        .is_some_and(|o| o.probe() && o.url() == &url(U2)));
}
