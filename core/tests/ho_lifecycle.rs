//! HO requirement group "Cell lifecycle" (`REQUIREMENTS.md` part HO): HO-L2: one live process per
//! cell id (the identity lease).
//! Each test name carries its requirement ID (`ho_s3_…` for HO-S3); shared setup is in
//! `handoff_rig`.

mod handoff_rig;

use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

const LEASE_MS: u64 = 15_000;

fn lease_store() -> AssignmentStore {
    AssignmentStore::new(StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 20_000,
        },
        max_in_flight_migrations: 4,
        rate_window_ms: 1_000,
        max_commits_per_window: 4,
        registration_timeout_ms: 30_000,
        bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
    })
}

#[test]
fn ho_l2_a_cell_never_started_is_taken_as_incarnation_one() {
    assert_eq!(
        cell_lease(None, MonoMs(1_000), LEASE_MS),
        CellLease::Take {
            incarnation: Incarnation(1),
            until: MonoMs(16_000)
        }
    );
}

#[test]
fn ho_l2_a_live_lease_refuses_a_second_process() {
    let held = Some((Incarnation(4), MonoMs(20_000)));
    assert_eq!(
        cell_lease(held, MonoMs(19_999), LEASE_MS),
        CellLease::Held {
            incarnation: Incarnation(4),
            until: MonoMs(20_000)
        }
    );
}

#[test]
fn ho_l2_an_expired_lease_lets_a_successor_take_over_with_a_new_incarnation() {
    let held = Some((Incarnation(4), MonoMs(20_000)));
    // At the instant the lease ends it has expired.
    assert_eq!(
        cell_lease(held, MonoMs(20_000), LEASE_MS),
        CellLease::Take {
            incarnation: Incarnation(5),
            until: MonoMs(35_000)
        }
    );
    assert_eq!(
        cell_lease(
            Some((Incarnation(u64::MAX), MonoMs(0))),
            MonoMs(1),
            LEASE_MS
        ),
        CellLease::Take {
            incarnation: Incarnation(u64::MAX),
            until: MonoMs(15_001)
        },
        "saturates instead of wrapping"
    );
}

#[test]
fn ho_l2_renewal_keeps_the_lease_only_for_its_own_incarnation() {
    let mine = Incarnation(4);
    let held = Some((mine, MonoMs(20_000)));
    assert_eq!(
        cell_lease_renewal(held, mine, MonoMs(19_000), LEASE_MS),
        Ok(MonoMs(34_000))
    );
    // Ran out, but no successor took the cell: still its one live process.
    assert_eq!(
        cell_lease_renewal(held, mine, MonoMs(25_000), LEASE_MS),
        Ok(MonoMs(40_000))
    );
    let taken = Some((Incarnation(5), MonoMs(40_000)));
    assert_eq!(
        cell_lease_renewal(taken, mine, MonoMs(25_000), LEASE_MS),
        Err(LeaseLost {
            holder: Some(Incarnation(5))
        })
    );
    assert_eq!(
        cell_lease_renewal(None, mine, MonoMs(25_000), LEASE_MS),
        Err(LeaseLost { holder: None })
    );
    assert_eq!(cell_lease_release(held, mine), Ok(RELEASED_LEASE_END));
    assert_eq!(
        cell_lease_release(taken, mine),
        Err(LeaseLost {
            holder: Some(Incarnation(5))
        }),
        "a process never ends its successor's lease"
    );
}

#[test]
fn ho_l2_reference_store_holds_one_live_process_per_cell() {
    let mut store = lease_store();
    let cell = CellId(2);
    let first = store
        .start_cell(cell, 10, true, MonoMs(1_000), LEASE_MS)
        .expect("free cell");
    assert_eq!(first, Incarnation(1));
    let before = store.clone();
    assert_eq!(
        store.start_cell(cell, 99, false, MonoMs(2_000), LEASE_MS),
        Err(StartRefusal::Held(CellHeld {
            cell,
            incarnation: first,
            until: MonoMs(16_000)
        }))
    );
    assert_eq!(store, before, "a refused start writes nothing");
    assert_eq!(
        store.renew_cell_lease(cell, first, MonoMs(10_000), LEASE_MS),
        Ok(MonoMs(25_000))
    );
    // The first process dies: its lease runs out and a successor takes over.
    let second = store
        .start_cell(cell, 10, true, MonoMs(25_000), LEASE_MS)
        .expect("expired lease");
    assert_eq!(second, Incarnation(2));
    assert_eq!(store.cell(cell).map(|c| c.incarnation), Some(second));
    assert_eq!(
        store.renew_cell_lease(cell, first, MonoMs(25_001), LEASE_MS),
        Err(LeaseLost {
            holder: Some(second)
        })
    );
    assert!(store.release_cell_lease(cell, first).is_err());
    // A graceful stop frees the cell at once.
    assert_eq!(store.release_cell_lease(cell, second), Ok(()));
    assert_eq!(
        store.start_cell(cell, 10, true, MonoMs(25_002), LEASE_MS),
        Ok(Incarnation(3))
    );
}

#[test]
fn ho_l2_a_cell_set_up_without_a_process_is_free() {
    let mut store = lease_store();
    let cell = CellId(3);
    let row = CellRow {
        capacity: 5,
        handoff_capable: true,
        incarnation: Incarnation(7),
    };
    store.upsert_cell(cell, row).expect("cell");
    assert_eq!(store.lease_of(cell), Some((Incarnation(7), MonoMs::ZERO)));
    assert_eq!(
        store.start_cell(cell, 5, true, MonoMs(1), LEASE_MS),
        Ok(Incarnation(8))
    );
    // `upsert_cell` (setup) keeps the lease of a running process.
    store.upsert_cell(cell, row).expect("cell");
    assert_eq!(store.lease_of(cell), Some((Incarnation(7), MonoMs(15_001))));
}

/// HO-L3 / HO-L2: a cell stopped gracefully is not a live target (its released lease end is in
/// the past and not zero, which stays "never leased": a seeded store's rows are not judged).
#[test]
fn ho_l3_a_gracefully_stopped_cell_is_not_a_live_target() {
    let mine = Incarnation(3);
    let held = Some((mine, MonoMs(40_000)));
    let released = cell_lease_release(held, mine).expect("mine");
    assert_ne!(released, MonoMs::ZERO, "zero would read as never leased");
    assert_eq!(
        check_target_live(MonoMs(30_000), released),
        Err(Ineligible::TargetNotLive)
    );
    assert_eq!(check_target_live(MonoMs(30_000), MonoMs::ZERO), Ok(()));
    assert_eq!(check_target_live(MonoMs(30_000), MonoMs(40_000)), Ok(()));
    // A successor may take the cell at once.
    assert!(matches!(
        cell_lease(Some((mine, released)), MonoMs(30_000), 15_000),
        CellLease::Take { .. }
    ));
}
