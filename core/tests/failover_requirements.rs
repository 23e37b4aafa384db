//! One or more tests per FO requirement; each name carries its ID. The seed's cases F6, F9 and
//! F12–F17 are named too.

mod fo_rig;

use fo_rig::*;
use switchyard_core::failover::*;
use switchyard_core::MonoMs;

/// Scene 4 up to "A stopped, switched to B, both A URLs cooling": the pool-drain setup.
fn drained_on_b(thresholds: Thresholds) -> Rig {
    let mut rig = Rig::production(thresholds);
    rig.current_dies(); // host A down: A1 and A2 dead
    rig.tick();
    assert_eq!(rig.opening(), Some(A2));
    rig.open_fail(A2); // continuation goes straight on to B
    assert_eq!(rig.opening(), Some(B));
    rig.open_ok(B);
    assert_eq!(rig.current(), Some(B));
    rig.clear();
    rig
}

// ---- FO-CFG-1 / FO-CFG-2 ------------------------------------------------------------------

fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

#[test]
fn fo_cfg_1_unset_variables_keep_the_production_defaults() {
    let t = Thresholds::from_lookup(|_| None).unwrap();
    assert_eq!(t.cooldown_ms, 300_000);
    assert_eq!(t.deadline_ms, 30_000);
    assert_eq!(t.grace_ms, 15_000);
    assert_eq!(t.min_attempts, 3);
    assert_eq!(t.check_ms, 2_000);
    assert_eq!(t.up_timeout_ms, 12_000);
    assert!(t.exempt);
}

#[test]
fn fo_cfg_1_digits_are_taken() {
    let t = Thresholds::from_lookup(lookup(&[
        (VAR_COOLDOWN_MS, "20000"),
        (VAR_MIN_ATTEMPTS, "5"),
        (VAR_EXEMPT, "0"),
        (VAR_CHECK_MS, "0250"),
    ]))
    .unwrap();
    assert_eq!(t.cooldown_ms, 20_000);
    assert_eq!(t.min_attempts, 5);
    assert!(!t.exempt);
    assert_eq!(t.check_ms, 250);
}

#[test]
fn fo_cfg_1_bad_values_are_rejected_naming_variable_and_value() {
    let bad = [
        "20000 (drill)",
        "-1",
        "1e4",
        "",
        " ",
        " 20000",
        "20000 ",
        "99999999999999999999",
        "+5",
        "0x10",
        "12.5",
        "２０００", // full-width digits are not ASCII digits
    ];
    for value in bad {
        for var in ALL_VARS {
            let errors = Thresholds::from_lookup(lookup(&[(var, value)])).unwrap_err();
            assert_eq!(errors.len(), 1, "{var}={value:?}");
            assert_eq!(errors[0].var(), var);
            let message = errors[0].to_string();
            assert!(message.contains(var), "{message}");
            assert!(message.contains(&format!("{value:?}")), "{message}");
        }
    }
}

#[test]
fn fo_cfg_1_semantic_checks_reject_busy_loop_and_impossible_values() {
    for (var, value) in [
        (VAR_CHECK_MS, "0"),
        (VAR_UP_TIMEOUT_MS, "0"),
        (VAR_DEADLINE_MS, "0"),
        (VAR_EXEMPT, "2"),
        (VAR_MIN_ATTEMPTS, "4294967296"),
        (VAR_COOLDOWN_MS, "1000000000001"),
    ] {
        let errors = Thresholds::from_lookup(lookup(&[(var, value)])).unwrap_err();
        assert_eq!(errors[0].var(), var, "{var}={value}");
    }
}

#[test]
fn fo_cfg_1_every_bad_variable_is_reported_at_once() {
    let errors =
        Thresholds::from_lookup(lookup(&[(VAR_GRACE_MS, "15s"), (VAR_CHECK_MS, "0")])).unwrap_err();
    let vars: Vec<_> = errors.iter().map(ConfigError::var).collect();
    assert_eq!(vars, vec![VAR_GRACE_MS, VAR_CHECK_MS]);
}

#[test]
fn fo_cfg_2_exempt_off_and_supervisor_off_are_different_switches() {
    let exempt_off = Thresholds::from_lookup(lookup(&[(VAR_EXEMPT, "0")])).unwrap();
    assert!(exempt_off.supervisor_enabled());
    assert!(!exempt_off.exempt);
    let supervisor_off = Thresholds::from_lookup(lookup(&[(VAR_MIN_ATTEMPTS, "0")])).unwrap();
    assert!(!supervisor_off.supervisor_enabled());
    assert!(supervisor_off.exempt);

    // EXEMPT=0 still switches to a clean candidate; MIN_ATTEMPTS=0 switches nothing.
    let mut rig = Rig::production(exempt_off);
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(A2));
    let mut rig = Rig::production(supervisor_off);
    rig.backoff(100);
    rig.advance(1_000_000).tick();
    assert_eq!(rig.opening(), None);
}

#[test]
fn fo_x2_cooldown_zero_is_legal() {
    let t = Thresholds::from_lookup(lookup(&[(VAR_COOLDOWN_MS, "0")])).unwrap();
    assert_eq!(t.cooldown_ms, 0);
}

// ---- FO-H-1 / FO-H-2 --------------------------------------------------------------------

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
    assert_eq!(rig.counters(), Counters::default());
    assert_eq!(rig.sup.poll_timeout(), None);
}

// ---- FO-D1 / FO-R5 ----------------------------------------------------------------------

#[test]
fn fo_d1_f12_directory_path_never_switches_into_cooldown() {
    let mut rig = drained_on_b(thresholds()); // A1 switched-away, A2 open-failed
    rig.advance(60_000);
    // The refresh keeps asking for A1 (first candidate) while it cools: refused every time.
    for _ in 0..3 {
        assert_eq!(rig.directory(&[A1, A2, B]), DirectoryOutcome::Refused);
        rig.advance(10_000);
    }
    assert_eq!(rig.current(), Some(B));
    assert_eq!(rig.counters().switches, 1);
    assert!(rig.opens().is_empty());
    let line = &rig.skip_lines()[0];
    assert!(line.contains("directory path"), "{line}");
    assert!(
        line.contains(&format!("{A1} still cooling, 240000 ms left of 300000 ms")),
        "{line}"
    );
    let entry = rig.sup.cooldown_entry(&url(A1)).unwrap();
    assert_eq!(entry.kind, CooldownKind::SwitchedAway);
    assert!(
        !entry.exempted_this_cycle(),
        "the directory path spends no exemption"
    );
}

#[test]
fn fo_d1_directory_path_switches_once_the_cooldown_is_over() {
    let mut rig = drained_on_b(thresholds());
    rig.advance(300_000);
    assert_eq!(rig.directory(&[A1, A2, B]), DirectoryOutcome::Opening);
    assert_eq!(rig.opens(), vec![(A1.to_owned(), false)]);
    rig.open_ok(A1);
    assert_eq!(rig.current(), Some(A1));
    assert!(rig
        .lines
        .last()
        .unwrap()
        .contains("directory address changed (source=signed)"));
}

#[test]
fn fo_d1_directory_path_has_no_exemption_even_when_current_is_dead() {
    let mut rig = drained_on_b(thresholds());
    rig.current_dies(); // B dead too, A cooling
    assert_eq!(rig.directory(&[A1, A2, B]), DirectoryOutcome::Refused);
    assert!(rig.opens().is_empty());
}

#[test]
fn fo_r5_targets_come_only_from_the_current_list() {
    let mut rig = drained_on_b(thresholds());
    // A new list without A1: the exemption must not reach A1 any more.
    rig.directory(&[A2, B]);
    rig.clear();
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opens(), vec![(A2.to_owned(), true)]);
    rig.open_fail(A2);
    rig.advance(2_000).tick();
    assert!(rig.opens().iter().all(|(u, _)| u != A1));
    assert_eq!(rig.sup.candidates(), &[url(A2), url(B)]);
}

#[test]
fn fo_r5_env_pinned_single_candidate_never_leaves_it() {
    let mut rig = Rig::new(thresholds());
    rig.sup
        .handle_directory(rig.now, &[url(B)], DirectorySource::Env);
    while rig.sup.poll_output().is_some() {}
    rig.open_ok(B);
    rig.current_dies();
    for _ in 0..10 {
        rig.advance(2_000).tick();
    }
    assert!(rig.opens().is_empty());
    assert!(rig.counters().no_candidate_checks >= 10);
}

// ---- FO-D2 / FO-D10 ---------------------------------------------------------------------

#[test]
fn fo_d2_cooldown_is_keyed_by_url_and_kind_is_a_field() {
    let mut rig = drained_on_b(thresholds());
    let a1 = rig.sup.cooldown_entry(&url(A1)).copied().unwrap();
    assert_eq!(a1.kind, CooldownKind::SwitchedAway);
    assert_eq!(a1.until.since_ms(a1.since), 300_000);
    assert_eq!(
        rig.sup.cooldown_entry(&url(A2)).unwrap().kind,
        CooldownKind::OpenFailed
    );
    // A1 is now exempted and fails: the same single entry changes kind, no second row.
    rig.current_dies();
    rig.advance(1_000).tick();
    assert_eq!(rig.opens(), vec![(A1.to_owned(), true)]);
    rig.open_fail(A1);
    let table = rig.sup.cooldown_table();
    assert_eq!(table.keys().filter(|u| u.as_str() == A1).count(), 1);
    assert_eq!(table[&url(A1)].kind, CooldownKind::OpenFailed);
    let stats = rig.sup.stats(rig.now);
    assert_eq!(stats.cooldown.len(), 2);
    assert!(stats.cooldown.iter().any(|v| v.url.as_str() == A1
        && v.kind == CooldownKind::OpenFailed
        && v.left_ms == 300_000));
}

#[test]
fn fo_d10_a_restart_clears_the_cooldown_table() {
    let rig = drained_on_b(thresholds());
    assert!(!rig.sup.cooldown_table().is_empty());
    let restarted = Supervisor::new(*rig.sup.thresholds(), rig.now);
    assert!(restarted.cooldown_table().is_empty());
    assert_eq!(restarted.counters(), Counters::default());
}

// ---- FO-D3..D6 (the seed's F12–F17) ---------------------------------------------------

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
        Some(&Action::Close { url: url(B) }),
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
        rig.sup.open_in_flight().unwrap().exemption.unwrap().kind,
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
    // every URL failed in this chain: none is reopened in the same tick
    assert_eq!(rig.opening(), None);
    rig.advance(1_000).tick();
    assert_eq!(rig.opens(), vec![(A1.to_owned(), true)]);
    rig.open_fail(A1);
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

// ---- FO-D7 / FO-D11 ---------------------------------------------------------------------

#[test]
fn fo_d7_switch_lines_equal_switches_and_counters_are_reported() {
    let mut rig = drained_on_b(thresholds());
    rig.current_dies();
    rig.tick();
    rig.open_ok(A1); // exempt
    let all_lines = rig.lines.clone();
    let c = rig.counters();
    assert_eq!(c.switches, 2);
    assert_eq!(c.exempt_switches, 1);
    assert_eq!(c.open_failed, 1);
    // the lines of this rig only cover the last switch; count them across the whole run instead
    assert_eq!(rig.switch_lines(), 1);
    assert!(
        all_lines
            .iter()
            .filter(|l| l.contains(EXEMPT_MARKER))
            .count()
            == 1
    );
    let stats = rig.sup.stats(rig.now);
    assert_eq!(stats.counters, c);
    assert_eq!(stats.current, Some(url(A1)));
    let kinds: Vec<_> = stats
        .cooldown
        .iter()
        .map(|v| (v.url.to_string(), v.kind))
        .collect();
    assert!(kinds.contains(&(B.to_owned(), CooldownKind::SwitchedAway)));
}

#[test]
fn fo_d7_rendered_switch_lines_always_equal_the_switch_counter() {
    let mut rig = Rig::new(Thresholds {
        cooldown_ms: 20_000,
        ..thresholds()
    });
    rig.directory(&[A1, A2, B]);
    rig.open_ok(A1);
    let mut dead = [false, false, false];
    for step in 0..400u32 {
        rig.advance(1_000 + u64::from(step % 7) * 1_000);
        // a fixed pseudo-random schedule of hosts going down and up
        if step % 13 == 0 {
            dead[(step as usize / 13) % 3] ^= true;
        }
        if let Some(cur) = rig.current() {
            let i = [A1, A2, B].iter().position(|u| *u == cur).unwrap();
            if dead[i] {
                rig.backoff(3);
            } else {
                rig.state(ChannelState::Healthy);
            }
        }
        rig.tick();
        while let Some(target) = rig.opening().map(str::to_owned) {
            let i = [A1, A2, B].iter().position(|u| *u == target).unwrap();
            if dead[i] {
                rig.open_fail(&target);
            } else {
                rig.open_ok(&target);
            }
        }
    }
    assert!(
        rig.counters().switches > 3,
        "the schedule must switch a few times: {:?}",
        rig.counters()
    );
    assert_eq!(rig.switch_lines() as u64, rig.counters().switches);
}

#[test]
fn fo_d11_core_has_no_endpoint_network_or_clock_dependency() {
    // Counters are read through `stats()` only: the core crate has no IO dependency at all, so
    // it cannot open an endpoint. Keep this list short and deliberate.
    let manifest = include_str!("../Cargo.toml");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    let names: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    // `sha1`: pure hashing for the UUIDv5 op id (no IO; it only reads the CPU's features).
    assert_eq!(names, vec!["serde", "thiserror", "uuid", "sha1"]);
}

// ---- FO-X1 / FO-X2 ----------------------------------------------------------------------

#[test]
fn fo_x1_dead_first_candidate_costs_one_open_not_one_tick() {
    let mut rig = Rig::production(thresholds());
    rig.current_dies();
    rig.tick();
    let decided_at = rig.now;
    rig.open_fail(A2);
    rig.open_ok(B);
    assert_eq!(rig.now, decided_at, "within the same tick");
    assert_eq!(rig.current(), Some(B));
}

#[test]
fn fo_x1_exemption_returns_within_one_tick_of_turning_unhealthy() {
    // Scene 4: the old code stayed ~300 s on the dead channel here.
    let mut rig = drained_on_b(thresholds());
    rig.advance(30_000);
    rig.backoff(1);
    let mut ticks = 0;
    while rig.opening().is_none() {
        rig.advance(2_000).tick();
        ticks += 1;
        assert!(ticks < 100);
    }
    assert!(rig.sup.is_unhealthy(rig.now));
    rig.open_ok(A1);
    // unhealthy at 15 s of backoff: the very first tick at/after it switches
    assert_eq!(ticks, 8); // 16 s after the backoff started, 2 s ticks
    assert_eq!(rig.current(), Some(A1));
}

#[test]
fn fo_x2_cooldown_zero_still_fails_over_to_the_live_host() {
    // Scene ctrl: the old code kept retrying the first failing candidate for 121 s.
    let mut rig = Rig::production(Thresholds {
        cooldown_ms: 0,
        ..thresholds()
    });
    rig.current_dies();
    for _ in 0..3 {
        rig.tick();
        if rig.opening() == Some(A2) {
            rig.open_fail(A2);
        }
        if rig.opening() == Some(B) {
            rig.open_ok(B);
        }
        rig.advance(2_000);
    }
    assert_eq!(rig.current(), Some(B));
    assert_eq!(rig.opens().iter().filter(|(u, _)| u == A2).count(), 1);
}

#[test]
fn fo_x2_cooldown_zero_keeps_cycling_through_failed_candidates_one_round_per_tick() {
    let mut rig = Rig::production(Thresholds {
        cooldown_ms: 0,
        ..thresholds()
    });
    rig.current_dies();
    for _ in 0..4 {
        rig.tick();
        while let Some(target) = rig.opening().map(str::to_owned) {
            rig.open_fail(&target);
        }
        rig.advance(2_000);
    }
    let opened: Vec<_> = rig.opens().into_iter().map(|(u, _)| u).collect();
    assert_eq!(opened.len(), 8, "one round (A2, B) per tick: {opened:?}");
    assert!(opened.chunks(2).all(|round| round == [A2, B]));
}

// ---- one open in flight / make-before-break / stale results ------------------------------

#[test]
fn fo_d1_a_directory_switch_while_an_open_is_in_flight_is_refused() {
    let mut rig = Rig::production(thresholds());
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(A2));
    rig.clear();
    assert_eq!(rig.directory(&[B, A1, A2]), DirectoryOutcome::Refused);
    assert!(rig.opens().is_empty());
    assert!(rig.lines[0].contains("refused: an open of wss://a-direct.example/relay is in flight"));
    // the tick while in flight does nothing either
    rig.advance(2_000).tick();
    assert!(rig.opens().is_empty());
    assert_eq!(rig.opening(), Some(A2));
}

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

#[test]
fn fo_d7_first_channel_is_an_attach_not_a_switch() {
    let mut rig = Rig::new(thresholds());
    assert_eq!(rig.directory(&[A1, A2, B]), DirectoryOutcome::Opening);
    rig.open_ok(A1);
    assert_eq!(rig.counters().switches, 0);
    assert!(rig.lines[0].starts_with(ATTACH_PREFIX));
    assert_eq!(rig.sup.poll_timeout(), Some(MonoMs(2_000)));
}

#[test]
fn fo_r5_empty_directory_keeps_the_last_good_list() {
    let mut rig = Rig::production(thresholds());
    assert_eq!(rig.directory(&[]), DirectoryOutcome::Rejected);
    assert_eq!(rig.sup.candidates().len(), 3);
    assert!(rig.lines[0].contains("empty list"));
}

// ---- found by mutation testing (docs/ASSURANCE.md) -------------------------------------------

#[test]
fn fo_r5_a_directory_of_exactly_max_candidates_is_taken_and_one_more_is_rejected() {
    let urls: Vec<String> = (0..=MAX_CANDIDATES)
        .map(|i| format!("wss://r{i}.example/relay"))
        .collect();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut rig = Rig::new(thresholds());
    assert_eq!(
        rig.directory(&refs),
        DirectoryOutcome::Rejected,
        "one too many"
    );
    assert_ne!(
        rig.directory(&refs[..MAX_CANDIDATES]),
        DirectoryOutcome::Rejected,
        "the maximum itself"
    );
    assert_eq!(rig.sup.candidates().len(), MAX_CANDIDATES);
}

#[test]
fn fo_x2_the_passed_over_set_names_the_failed_candidates_until_the_chain_moves() {
    let mut rig = Rig::production(thresholds());
    rig.backoff(3);
    rig.tick();
    assert_eq!(
        rig.opening(),
        Some(A2),
        "the health path opens the next candidate"
    );
    assert!(rig.sup.tried_since_last_move().is_empty());
    rig.open_fail(A2);
    let tried = rig.sup.tried_since_last_move();
    assert!(tried.contains(&url(A2)), "{tried:?}");
    assert_eq!(rig.opening(), Some(B), "the chain moved on");
    rig.open_ok(B);
    assert!(
        rig.sup.tried_since_last_move().is_empty(),
        "the chain moved"
    );
}

#[test]
fn fo_d2_a_supervisor_equals_its_clone_whatever_its_caches_hold() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&["wss://a.example/relay", "wss://b.example/relay"]);
    let first = rig.opening().expect("opening").to_owned();
    rig.open_ok(&first);
    let copy = rig.sup.clone();
    assert_eq!(copy, rig.sup);
    // Outputs not yet drained are part of the state: a copy with one pending differs.
    let mut pending = rig.sup.clone();
    pending.handle_directory(
        rig.now,
        &[url("wss://c.example/relay")],
        DirectorySource::Signed,
    );
    let mut drained = pending.clone();
    while drained.poll_output().is_some() {}
    assert_ne!(pending, drained);
    let hash = |sup: &Supervisor| {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        sup.hash(&mut hasher);
        hasher.finish()
    };
    assert_ne!(hash(&pending), hash(&drained));
}

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
