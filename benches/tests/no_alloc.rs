//! No tick makes a heap allocation: nothing to do, a clean switch, the one-hop exemption, the
//! no-candidate line, the probe rounds (counted by a global allocator).

use stats_alloc::{Region, Stats, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use switchyard_benches::{tick_and_drain, tick_fixture};
use switchyard_core::failover::{ChannelAction, OpenFailure, Output, Supervisor};
use switchyard_core::MonoMs;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// One tick and its drain, with the allocations made in between.
fn counted_tick(sup: &mut Supervisor, now: MonoMs) -> (usize, Stats) {
    let region = Region::new(GLOBAL);
    let outputs = tick_and_drain(sup, now);
    (outputs, region.change())
}

fn assert_none(change: &Stats, what: &str) {
    assert_eq!(change.allocations, 0, "{what}: {change:?}");
    assert_eq!(change.reallocations, 0, "{what}: {change:?}");
}

/// Run without libtest (`harness = false` in Cargo.toml): the allocator is global, so anything
/// on another thread is counted too, and libtest's own threads (its reporter and timers) were
/// seen to allocate during a tick on a loaded machine (4 allocations in 1 run of 5 under load).
/// Only this thread runs here.
///
/// The long outage at 4,096 candidates is cut to [`LARGE_OUTAGE_TICKS`] ticks (the whole
/// `3 * n + 200` took most of the test's 150 s in the test profile): its later ticks take the
/// same paths as the first 400 (exemptions, clean chains, probe rounds, the no-candidate line:
/// each is counted and asserted below at every size). The whole outage at every size:
/// `SWITCHYARD_NO_ALLOC_FULL=1 cargo test --workspace --offline --test no_alloc`.
fn main() {
    let full = std::env::var_os("SWITCHYARD_NO_ALLOC_FULL").is_some_and(|v| v == "1");
    no_tick_makes_a_heap_allocation(full);
    // The closing line CI reads (the plain form: this is no libtest run).
    let mut out = std::io::stderr().lock();
    let _ = std::io::Write::write_all(&mut out, b"no_alloc: 1 passed, 0 failed\n");
}

/// Past 256 candidates the outage runs this many ticks (unless `SWITCHYARD_NO_ALLOC_FULL=1`):
/// more than two cooldowns (150 ticks each at the default 300 s and a tick every 2 s).
const LARGE_OUTAGE_TICKS: usize = 400;

fn no_tick_makes_a_heap_allocation(full: bool) {
    for n in [3, 16, 256, 4096] {
        let fixture = tick_fixture(n);

        // Nothing to do, on a long-lived machine.
        let mut sup = fixture.healthy.clone();
        let mut now = fixture.now;
        for _ in 0..1_000 {
            now = now.plus_ms(2_000);
            let (outputs, change) = counted_tick(&mut sup, now);
            assert_eq!(outputs, 0);
            assert_none(&change, &format!("{n} candidates, no switch"));
        }

        // The switching ticks, each on a machine just cloned (as the bench runs them): the open
        // is queued inline, so even a fresh clone's empty queue needs no memory.
        for (path, start, exempt) in [
            ("clean switch", &fixture.clean_switch, false),
            ("exemption", &fixture.exemption, true),
        ] {
            for _ in 0..10 {
                let mut sup = start.clone();
                let (outputs, change) = counted_tick(&mut sup, fixture.now);
                assert_none(&change, &format!("{n} candidates, {path}"));
                assert_eq!(outputs, 1, "{n} candidates, {path}: the open");
                let open = sup.open_in_flight().expect("an open was started");
                assert_eq!(open.exemption().is_some(), exempt, "{n} candidates, {path}");
            }
        }

        // A long outage from the exemption state: every open fails, so the ticks go through
        // the exemptions, the clean chains of expired cooldowns, the no-candidate line and the
        // probe rounds (FO-X3), at every size. (Seen on 2026-12-04: at 4096 candidates the
        // first 400 ticks made 75,757 opens, 10,237 of them exempt and 57,330 probes, and 379
        // idle ticks.)
        let mut sup = fixture.exemption.clone();
        let mut now = fixture.now;
        let (mut opens, mut exempt_opens, mut probes, mut no_candidate_ticks) = (0, 0, 0, 0);
        let ticks = if full || n <= 256 {
            3 * n + 200
        } else {
            LARGE_OUTAGE_TICKS
        };
        for _ in 0..ticks {
            let (_, change) = counted_tick(&mut sup, now);
            assert_none(&change, &format!("{n} candidates, outage tick at {now}"));
            if sup.open_in_flight().is_none() {
                no_candidate_ticks += 1;
            }
            while let Some(open) = sup.open_in_flight().cloned() {
                opens += 1;
                exempt_opens += usize::from(open.exemption().is_some());
                probes += usize::from(open.probe());
                sup.handle_open_failed(now, open.url(), OpenFailure::Failed);
                while let Some(output) = sup.poll_output() {
                    assert!(!matches!(
                        output,
                        Output::Action(ChannelAction::Close { .. })
                    ));
                }
            }
            now = now.plus_ms(2_000);
        }
        let seen = format!(
            "{n}: {ticks} ticks, {opens} opens ({exempt_opens} exempt), {probes} probes, \
             {no_candidate_ticks} idle ticks"
        );
        // Every path at every size: exemptions, clean opens of expired cooldowns, probes and
        // the no-candidate line.
        assert!(exempt_opens > 0 && opens > exempt_opens + probes, "{seen}");
        assert!(probes > 0 && no_candidate_ticks > 0, "{seen}");
    }
    // Guard against a vacuous pass: the counter does see allocations (cloning a machine copies
    // its per-candidate array).
    let fixture = tick_fixture(16);
    let region = Region::new(GLOBAL);
    let copy = fixture.exemption.clone();
    assert!(region.change().allocations > 0);
    drop(copy);
}
