//! Part X of the requirements for handoff: HO-L2 (one live process per cell id).

use switchyard_core::handoff::ids::Incarnation;
use switchyard_core::handoff::store::{cell_lease, CellLease};
use switchyard_core::MonoMs;

const LEASE_MS: u64 = 15_000;

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
