//! The tick that has nothing to switch makes no heap allocation (counted by a global allocator).

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use switchyard_benches::{tick_and_drain, tick_fixture};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// One test function on purpose: the allocator is global, so a second test running on another
/// thread would be counted too.
#[test]
fn no_switch_tick_makes_no_heap_allocation() {
    for n in [3, 16, 256, 4096] {
        let fixture = tick_fixture(n);
        let mut sup = fixture.healthy.clone();
        let mut now = fixture.now;
        tick_and_drain(&mut sup, now); // warm-up: any lazily sized buffer is sized now
        let region = Region::new(GLOBAL);
        for _ in 0..1_000 {
            now = now.plus_ms(2_000);
            assert_eq!(tick_and_drain(&mut sup, now), 0);
        }
        let change = region.change();
        assert_eq!(change.allocations, 0, "{n} candidates: {change:?}");
        assert_eq!(change.reallocations, 0, "{n} candidates: {change:?}");
    }
    // Guard against a vacuous pass: a switching tick does allocate (the open's URL and event).
    let fixture = tick_fixture(16);
    let mut sup = fixture.clean_switch.clone();
    let region = Region::new(GLOBAL);
    assert!(tick_and_drain(&mut sup, fixture.now) > 0);
    assert!(region.change().allocations > 0);
}
