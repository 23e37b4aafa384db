//! FO-D3..FO-D6, FO-D6-OFF: the one-hop exemption on the health path (the seed's F6, F9 and
//! F12–F17 are named too). Each name carries its ID.

mod fo_rig;

use fo_rig::*;
use switchyard_core::failover::*;

#[test]
fn fo_d6_f13_exemption_switches_when_the_pool_is_drained() {
    let mut rig = drained_on_b(thresholds());
    rig.advance(30_000);
    rig.current_dies(); // stop B; A restored but both A URLs still cool
    rig.tick();
    assert_eq!(rig.opens(), vec![(A1.to_owned(), true)]);
    rig.advance(500);
    rig.open_ok(A1);
    assert_eq!(rig.current(), Some(A1));
    let c = rig.counters();
    assert_eq!(
        (c.switches, c.exempt_switches, c.no_candidate_checks),
        (2, 1, 0)
    );
    let line = rig.lines.last().unwrap();
    assert!(line.starts_with("[relay-switch] #2 wss://b.example/relay -> wss://a.example/relay"));
    assert!(
        line.contains("current channel unhealthy"),
        "health path: {line}"
    );
    assert!(
        line.ends_with("｜豁免 kind=switched-away 剩 270000ms"),
        "{line}"
    );
    assert_eq!(
        rig.actions.last(),
        Some(&ChannelAction::Close { url: url(B) }),
        "make-before-break: B closed only after A1 is up"
    );
}

#[test]
fn fo_d5_f14_switched_away_is_exempted_before_open_failed() {
    // A2 open-failed cools *earlier* than A1 switched-away: kind still wins over `until`.
    let mut rig = Rig::production(thresholds());
    rig.current_dies();
    rig.tick();
    rig.open_fail(A2); // A2 open-failed until 300000
    rig.advance(10_000);
    rig.open_ok(B); // A1 switched-away until 310000
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(A1));
    assert_eq!(
        rig.sup.open_in_flight().unwrap().exemption().unwrap().kind,
        CooldownKind::SwitchedAway
    );
}

#[test]
fn fo_d5_within_a_kind_the_earliest_until_is_exempted_first() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&[A1, A2, B]);
    rig.open_fail(A1); // no channel yet: A1 open-failed until 300000
    rig.advance(1_000).tick();
    rig.open_fail(A2); // until 301000
    rig.advance(1_000);
    // continuation already went to B; fail it too: until 302000
    assert_eq!(rig.opening(), Some(B));
    rig.clear();
    rig.open_fail(B);
    // FO-X3a: A1 failed before this tick's chain, so its exemption is spent in this chain
    // (never a tick per unspent exemption); A2 and B failed in it: not reopened in it.
    assert_eq!(rig.opens(), vec![(A1.to_owned(), true)]);
    rig.open_fail(A1);
    assert_eq!(rig.opening(), None);
    rig.advance(1_000).tick();
    assert_eq!(rig.opening(), Some(A2), "next earliest until, same kind");
}

#[test]
fn fo_d3_f15_clean_candidate_means_no_exemption() {
    let mut rig = drained_on_b(thresholds());
    rig.directory(&[A1, A2, B, "wss://d.example/relay"]);
    rig.current_dies();
    rig.tick();
    assert_eq!(
        rig.opens(),
        vec![("wss://d.example/relay".to_owned(), false)]
    );
    rig.open_ok("wss://d.example/relay");
    assert_eq!(rig.counters().exempt_switches, 0);
    assert!(rig.lines.iter().all(|l| !l.contains(EXEMPT_MARKER)));
}

#[test]
fn fo_d3_clean_candidates_all_tried_this_round_still_no_exemption() {
    // Cooldown 0: A2 fails and is passed over, B fails too: the continuation stops instead of
    // exempting, because clean candidates still exist.
    let mut rig = Rig::production(Thresholds {
        cooldown_ms: 0,
        ..thresholds()
    });
    rig.current_dies();
    rig.tick();
    rig.open_fail(A2);
    rig.open_fail(B);
    assert_eq!(rig.opening(), None);
    assert!(rig.opens().iter().all(|(_, exempt)| !exempt));
}

#[test]
fn fo_d4_f16_one_exemption_per_url_per_cycle() {
    // The seed's behaviour: probing off (FO-X3 changes only what happens once the budget is spent).
    let mut rig = drained_on_b(Thresholds {
        probe_max_ms: 0,
        ..thresholds()
    });
    rig.advance(2_000);
    rig.current_dies(); // both relays down now
    rig.tick();
    rig.open_fail(A1); // exempt A1 fails ...
    rig.open_fail(A2); // ... the chain continues with the exempt A2, which fails too
    let tried: Vec<_> = rig.opens();
    assert_eq!(tried, vec![(A1.to_owned(), true), (A2.to_owned(), true)]);
    let failed_before = rig.counters().open_failed;
    for _ in 0..50 {
        rig.advance(2_000).tick(); // 100 s, same cycle
    }
    assert_eq!(
        rig.opens().len(),
        2,
        "no further exemption in this cycle: no retry storm"
    );
    assert_eq!(rig.counters().open_failed, failed_before);
    assert_eq!(rig.counters().switches, 1);
    assert_eq!(rig.counters().no_candidate_checks, 50);
    for u in [A1, A2] {
        assert!(rig
            .sup
            .cooldown_entry(&url(u))
            .unwrap()
            .exempted_this_cycle());
    }
    assert!(rig
        .skip_lines()
        .iter()
        .any(|l| l.contains("gets no further exemption this cycle")));
}

#[test]
fn fo_d4_a_new_cycle_brings_a_new_exemption() {
    let mut rig = drained_on_b(thresholds());
    rig.current_dies();
    rig.tick();
    rig.open_fail(A1);
    rig.open_fail(A2);
    rig.advance(300_000).tick(); // cooldowns over: both clean again
    assert_eq!(rig.opens().last(), Some(&(A1.to_owned(), false)));
    rig.open_fail(A1); // a fresh open-failed cycle for A1 ...
    rig.open_fail(A2);
    rig.advance(2_000).tick(); // ... so it may be exempted once more
    assert_eq!(rig.opens().last(), Some(&(A1.to_owned(), true)));
}

#[test]
fn fo_d6_no_candidate_line_is_throttled_to_once_per_grace() {
    let mut rig = drained_on_b(no_exempt());
    rig.current_dies();
    for _ in 0..15 {
        rig.tick();
        rig.advance(2_000);
    } // 30 s of ticks
    assert_eq!(rig.counters().no_candidate_checks, 15);
    let lines = rig.skip_lines();
    assert_eq!(lines.len(), 2, "one line per 15 s grace: {lines:?}");
    assert!(lines[0]
        .contains("no other candidate in the chain (3 candidates, 3 excluded; exemption off)"));
}

#[test]
fn fo_d6_off_f17_exempt_zero_is_the_pre_exemption_behaviour() {
    let mut rig = drained_on_b(no_exempt());
    rig.advance(30_000);
    rig.current_dies();
    for _ in 0..10 {
        rig.tick();
        rig.advance(2_000);
    }
    assert!(rig.opens().is_empty());
    assert_eq!(rig.counters().exempt_switches, 0);
    assert_eq!(rig.counters().no_candidate_checks, 10);
    assert!(rig.lines.iter().all(|l| !l.contains(EXEMPT_MARKER)));
}

#[test]
fn fo_d6_off_f6_restored_host_inside_cooldown_is_not_switched_back_to() {
    // Seed F6: A came back but is still cooling and B is failing: with the exemption off we stay.
    let mut rig = drained_on_b(no_exempt());
    rig.advance(60_000);
    rig.current_dies();
    rig.tick();
    assert!(rig.opens().is_empty());
    assert_eq!(rig.current(), Some(B));
}

#[test]
fn fo_d6_off_f9_no_bounce_back_until_the_cooldown_expires() {
    // Seed F9: no switch back inside the cooldown; once it expires, a switch without the marker.
    let mut rig = drained_on_b(no_exempt());
    rig.current_dies();
    let mut t = 0;
    while t < 298_000 {
        rig.advance(2_000).tick();
        t += 2_000;
        assert!(rig.opens().is_empty(), "switch inside cooldown at +{t} ms");
    }
    rig.advance(2_000).tick();
    assert_eq!(rig.opens(), vec![(A1.to_owned(), false)]);
    rig.open_ok(A1);
    assert!(!rig.lines.last().unwrap().contains(EXEMPT_MARKER));
}
