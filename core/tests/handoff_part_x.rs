//! Part X of the requirements for handoff: HO-L1 (no stranded host after a store outage) and
//! HO-L2 (one live process per cell id); and the pure store decisions that the reference store
//! and the SQL stores share (the SQL side is held to them by `adapters/tests/handoff_store_diff.rs`).

mod handoff_rig;

use handoff_rig::{World, HOST, QUARANTINE_RETRY_MS, TGT};
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::GateState;
use switchyard_core::handoff::*;
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_core::MonoMs;

const LEASE_MS: u64 = 15_000;

// ---- HO-L1 ------------------------------------------------------------------------------------

/// The director's pick for `HOST`, read from the store (as `CandidateView` is): the op id is
/// the UUIDv5 of the store's current authority and the target (HO-S1).
fn director_pick(w: &World) -> HandoffRequest {
    let authority = w.store.authority(HOST).expect("host");
    HandoffRequest::new(authority, TGT, 100, handoff_rig::good_measurement(w.now))
}

/// A store outage: the transaction cannot run; the source quarantines and, after the retry
/// delay, reconciles under the lock, which fences the op id.
fn outage_then_fence(w: &mut World) -> HandoffRequest {
    w.start();
    let (_, original) = w.last_txn();
    w.deliver_txn(DurableResult::StoreUnavailable);
    assert!(w.gated());
    w.advance(QUARANTINE_RETRY_MS);
    w.timeout();
    assert_eq!(
        w.run_reconcile(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    original
}

#[test]
fn ho_l1_fenced_abort_renews_the_authority_and_a_new_op_id_commits() {
    let mut w = World::new();
    let claimed = w.src.authority();
    let original = outage_then_fence(&mut w);
    assert_eq!(original.source, claimed);
    // The fence renewed the host's authority in the same write, and the reopened source holds
    // the renewed one: store and source agree.
    let renewed = w.store.authority(HOST).expect("host");
    assert_eq!(
        renewed,
        SourceAuthority {
            generation: claimed.generation.next(),
            ..claimed
        }
    );
    assert_eq!(w.src.authority(), renewed);
    assert_eq!(w.src.gate().state(), GateState::Open);
    assert_eq!(w.src.gate().generation(), renewed.generation);
    assert_eq!(w.seen.reopened.len(), 1);
    // The old op id still answers the fence, and never commits.
    let fenced = TxnOutcome::RolledBack {
        reason: AbortReason::Fenced,
    };
    assert_eq!(w.store.run_transaction(w.now, &original), fenced);
    assert_eq!(w.store.reconcile(w.now, &original), Some(fenced));
    // The director's next pick derives a new op id, which the source starts and the store
    // commits: the host is not stranded, and its desktop never reconnected.
    let pick = director_pick(&w);
    assert_ne!(pick.op_id, original.op_id);
    let attempt = match w.begin(&pick) {
        Begin::Started(a) => a,
        other => panic!("the new pick must start, got {other:?}"),
    };
    assert_eq!(attempt.op_id, pick.op_id);
    assert_eq!(
        w.run_txn(),
        TxnOutcome::Committed {
            target: TGT,
            new_epoch: claimed.epoch.next()
        }
    );
    assert_eq!(w.store.assignment(HOST).map(|a| a.cell), Some(TGT));
    // Afterwards the old op id reads the authority change, and still never commits.
    let late = w.store.run_transaction(w.now, &original);
    assert!(
        matches!(late, TxnOutcome::AuthorityChanged { .. }),
        "{late:?}"
    );
    assert_eq!(w.store.check_invariants(), Ok(()));
}

#[test]
fn ho_l1_the_late_original_transaction_after_the_fence_does_not_commit() {
    let mut w = World::new();
    w.start();
    let (_, original) = w.last_txn();
    // The transaction's result is lost before it ran (a timeout); reconciliation fences it.
    w.deliver_txn(DurableResult::Ambiguous(Ambiguity::Timeout));
    let before = w.store.assignment(HOST).copied().expect("host");
    assert_eq!(
        w.run_reconcile(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    // Twice over: the op id is recorded as fenced, and the claimed authority is stale.
    assert_eq!(
        claim_check(&original.source, w.store.authority(HOST).as_ref()),
        AuthorityCheck::Superseded(AuthorityField::Generation)
    );
    let rows = w.store.clone();
    assert_eq!(
        w.store.run_transaction(w.now, &original),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    assert_eq!(w.store, rows, "the late transaction wrote nothing");
    let after = w.store.assignment(HOST).copied().expect("host");
    assert_eq!((after.cell, after.epoch), (before.cell, before.epoch));
    assert_eq!(w.store.reservations().count(), 0);
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
    assert_eq!(cell_lease_release(held, mine), Ok(MonoMs::ZERO));
    assert_eq!(
        cell_lease_release(taken, mine),
        Err(LeaseLost {
            holder: Some(Incarnation(5))
        }),
        "a process never ends its successor's lease"
    );
}

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

#[test]
fn ho_l1_an_explicit_rollback_answered_after_reconciliation_started_waits_for_the_fence() {
    // The transaction times out (the source turns to reconciliation) but still runs, slowly:
    // an explicit rollback, nothing written. Its answer arrives after the reconciliation was
    // asked for; that reconciliation lands afterwards and fences (renewing the authority).
    // Reopening on the transaction's answer would leave the source holding the authority the
    // fence replaced: the director's picks (the store's authority) would be refused, stranded.
    let mut w = World::new();
    w.store.set_enabled(false);
    w.start();
    let (attempt, original) = w.last_txn();
    w.advance(handoff_rig::REQUEST_TIMEOUT_MS);
    w.timeout();
    assert_eq!(w.seen.reconciles.len(), 1);
    let slow = w.store.run_transaction(w.now, &original);
    assert!(matches!(
        slow,
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(_)
        }
    ));
    assert_eq!(
        w.src
            .handle_transaction_result(w.now, attempt, DurableResult::Done(slow)),
        Disposition::Ignored(Ignored::AwaitingReconciliation)
    );
    assert!(w.gated(), "only the reconciliation ends the attempt");
    assert_eq!(
        w.run_reconcile(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    assert!(w.open());
    assert_eq!(Some(w.src.authority()), w.store.authority(HOST));
    // A commit reported by the transaction is final whoever reports it: nothing to wait for.
    let mut w = World::new();
    w.start();
    let (attempt, original) = w.last_txn();
    w.advance(handoff_rig::REQUEST_TIMEOUT_MS);
    w.timeout();
    let committed = w.store.run_transaction(w.now, &original);
    assert!(committed.is_committed());
    assert_eq!(
        w.src
            .handle_transaction_result(w.now, attempt, DurableResult::Done(committed)),
        Disposition::Applied
    );
    w.drain();
    assert_eq!(w.seen.retired.len(), 1);
}

#[test]
fn ho_l1_a_drained_source_keeps_its_authority_and_stays_closed() {
    let mut w = World::new();
    let claimed = w.src.authority();
    w.start();
    w.deliver_txn(DurableResult::StoreUnavailable);
    w.src.handle_emergency_drain(w.now, DrainReason::Emergency);
    w.drain();
    w.advance(QUARANTINE_RETRY_MS);
    w.timeout();
    // The reconciliation lands before the drain fence: it renews; the drain fence finds the
    // claimed authority stale and writes nothing (the op id is fenced anyway).
    assert_eq!(
        w.run_reconcile(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    assert_eq!(w.apply_fences(), vec![DrainWrite::NotCurrent]);
    assert_eq!(
        w.src.authority(),
        claimed,
        "a drained source adopts nothing"
    );
    assert!(matches!(w.src.gate().state(), GateState::Closed(_)));
    assert!(w.seen.reopened.is_empty());
    assert_eq!(w.store.authority(HOST), Some(fenced_authority(claimed)));
}

#[test]
fn ho_l1_the_control_session_that_registered_still_closes_after_a_renewal() {
    let mut w = World::new();
    let registered = w.src.authority().generation;
    outage_then_fence(&mut w);
    assert_eq!(w.src.authority().generation, registered.next());
    // The adapter reports the close by the generation the session registered with.
    assert_eq!(
        w.src.handle_session_closed(w.now, registered),
        Disposition::Applied
    );
    assert!(!w.src.session_open());
    let pick = director_pick(&w);
    assert_eq!(
        w.begin(&pick),
        Begin::Answered(HandoffReply::Refused {
            op_id: pick.op_id,
            reason: HandoffRefusal::NoSession
        })
    );
}

#[test]
fn ho_l1_fenced_authority_bumps_the_generation_only() {
    let claim = authority_of(HOST, &row(1, 3, 2, 5));
    assert_eq!(
        fenced_authority(claim),
        authority_of(HOST, &row(1, 3, 2, 6))
    );
}

#[test]
fn ho_l1_a_renewing_fence_answers_rolled_back_only_under_the_renewed_authority() {
    let claimed = row(1, 1, 1, 1);
    let req = request_for(&claimed);
    let claim = req.source;
    let renewed_row = AttemptRow {
        source: claim,
        target: req.target,
        outcome: AttemptOutcome::FencedRenewed,
        recorded_at: MonoMs(9),
    };
    let fenced = TxnOutcome::RolledBack {
        reason: AbortReason::Fenced,
    };
    let renewed = fenced_authority(claim);
    assert_eq!(recorded_outcome(&req, Some(&renewed), &renewed_row), fenced);
    // A later registration (or drain fence) replaced the renewed authority.
    let later = fenced_authority(renewed);
    assert_eq!(
        recorded_outcome(&req, Some(&later), &renewed_row),
        TxnOutcome::AuthorityChanged {
            check: AuthorityCheck::Superseded(AuthorityField::Generation)
        }
    );
    assert_eq!(
        recorded_outcome(&req, None, &renewed_row),
        TxnOutcome::AuthorityChanged {
            check: AuthorityCheck::Mismatch(AuthorityField::Host)
        }
    );
    // A fence that renewed nothing (a stale claim, or a row from before HO-L1): the claim
    // itself must still hold. A drain fence that bumped the generation by one since is an
    // authority change, not the fence's own renewal.
    let plain_row = AttemptRow {
        outcome: AttemptOutcome::FencedAbort,
        ..renewed_row
    };
    assert_eq!(recorded_outcome(&req, Some(&claim), &plain_row), fenced);
    assert_eq!(
        recorded_outcome(&req, Some(&renewed), &plain_row),
        TxnOutcome::AuthorityChanged {
            check: AuthorityCheck::Superseded(AuthorityField::Generation)
        }
    );
}

#[test]
fn ho_l1_decide_reconcile_renews_an_exact_claim_in_the_fence_write() {
    let current = row(1, 1, 1, 1);
    let req = request_for(&current);
    assert_eq!(
        decide_reconcile(MonoMs(9), &req, Some(current), None, MAX_ROWS, MAX_ROWS),
        ReconcileDecision::StoreFull,
        "a fence that cannot be recorded renews nothing either"
    );
    assert_eq!(
        decide_reconcile(MonoMs(9), &req, Some(current), None, 0, MAX_ROWS),
        ReconcileDecision::Fence {
            writes: FenceWrites {
                attempt: AttemptRow {
                    source: req.source,
                    target: req.target,
                    outcome: AttemptOutcome::FencedRenewed,
                    recorded_at: MonoMs(9),
                },
                assignment: Some(row(1, 1, 1, 2)),
            },
            answer: TxnOutcome::RolledBack {
                reason: AbortReason::Fenced
            },
        }
    );
    // An unknown host: fenced, nothing to renew.
    assert!(matches!(
        decide_reconcile(MonoMs(9), &req, None, None, 0, MAX_ROWS),
        ReconcileDecision::Fence {
            writes: FenceWrites {
                assignment: None,
                ..
            },
            answer: TxnOutcome::AuthorityChanged { .. },
        }
    ));
}

// ---- store decisions shared by the reference and the SQL stores ----------------------------------

fn row(cell: u32, epoch: u64, inc: u64, generation: u64) -> AssignmentRow {
    AssignmentRow {
        cell: CellId(cell),
        epoch: Epoch(epoch),
        incarnation: Incarnation(inc),
        generation: Generation(generation),
        desktop_capable: true,
    }
}

fn cell_row_of(inc: u64) -> CellRow {
    CellRow {
        capacity: 10,
        handoff_capable: true,
        incarnation: Incarnation(inc),
    }
}

/// The attempt-row bound the reconciliation decisions are judged at.
const MAX_ROWS: u64 = 1 << 20;

#[test]
fn scale_1_decide_upsert_cell_bounds_new_cells_only() {
    let max = 1_024;
    assert_eq!(decide_upsert_cell(false, max - 1, max), Ok(()));
    assert_eq!(
        decide_upsert_cell(false, max, max),
        Err(StoreError::TooManyCells)
    );
    assert_eq!(decide_upsert_cell(true, max, max), Ok(()));
}

#[test]
fn scale_1_decide_insert_host_checks_cell_then_host_then_room() {
    assert_eq!(
        decide_insert_host(None, true, false, CellId(1), true),
        Err(StoreError::UnknownCell)
    );
    assert_eq!(
        decide_insert_host(Some(cell_row_of(3)), true, false, CellId(1), true),
        Err(StoreError::HostExists)
    );
    assert_eq!(
        decide_insert_host(Some(cell_row_of(3)), false, false, CellId(1), true),
        Err(StoreError::TooManyHosts)
    );
    assert_eq!(
        decide_insert_host(Some(cell_row_of(3)), false, true, CellId(1), false),
        Ok(AssignmentRow {
            desktop_capable: false,
            ..row(1, 1, 3, 1)
        })
    );
}

#[test]
fn decide_register_bumps_the_generation_at_the_assigned_cell_only() {
    let current = row(1, 4, 2, 9);
    let reg = |current, cell_row, cell, inc| {
        decide_register(current, cell_row, CellId(cell), Incarnation(inc), false)
    };
    // An unknown host is refused before the cell is looked at.
    assert_eq!(reg(None, None, 1, 2), Err(RegisterRefusal::UnknownHost));
    assert_eq!(
        reg(Some(current), None, 1, 2),
        Err(RegisterRefusal::UnknownCell)
    );
    assert_eq!(
        reg(Some(current), Some(cell_row_of(2)), 2, 2),
        Err(RegisterRefusal::NotAssignedHere {
            assigned: CellId(1)
        })
    );
    assert_eq!(
        reg(Some(current), Some(cell_row_of(3)), 1, 2),
        Err(RegisterRefusal::StaleIncarnation)
    );
    assert_eq!(
        reg(Some(current), Some(cell_row_of(2)), 1, 2),
        Ok(AssignmentRow {
            desktop_capable: false,
            ..row(1, 4, 2, 10)
        })
    );
    // A restarted process registers with a newer incarnation than the cell's.
    assert_eq!(
        reg(Some(current), Some(cell_row_of(2)), 1, 5),
        Ok(AssignmentRow {
            desktop_capable: false,
            ..row(1, 4, 5, 10)
        })
    );
}

fn request_for(current: &AssignmentRow) -> HandoffRequest {
    let m = Measurement {
        measured_at: MonoMs(1_000),
        current_rtt_ms: 120,
        target_rtt_ms: 60,
    };
    HandoffRequest::new(authority_of(HOST, current), CellId(2), 100, m)
}

#[test]
fn decide_reconcile_answers_a_record_without_the_limits() {
    let current = row(1, 1, 1, 1);
    let req = request_for(&current);
    let committed = AttemptRow {
        source: req.source,
        target: req.target,
        outcome: AttemptOutcome::Committed {
            new_epoch: Epoch(2),
            registration: Registration::Pending,
        },
        recorded_at: MonoMs(5),
    };
    let moved = row(2, 2, 1, 1);
    let expected = TxnOutcome::Committed {
        target: CellId(2),
        new_epoch: Epoch(2),
    };
    let auth = authority_of(HOST, &moved);
    assert_eq!(
        reconcile_precheck(&req, Some(&auth), Some(&committed)),
        Some(expected)
    );
    // Whatever the attempt count: a record is answered, never "store full".
    for attempt_rows in [0, MAX_ROWS] {
        assert_eq!(
            decide_reconcile(
                MonoMs(9),
                &req,
                Some(moved),
                Some(&committed),
                attempt_rows,
                MAX_ROWS
            ),
            ReconcileDecision::Answer(expected)
        );
    }
    assert_eq!(reconcile_precheck(&req, Some(&auth), None), None);
}

#[test]
fn decide_reconcile_fences_a_stale_claim_without_touching_the_host() {
    let claimed = row(1, 1, 1, 1);
    let req = request_for(&claimed);
    // A replacement control registered meanwhile (generation 2).
    let current = row(1, 1, 1, 2);
    assert_eq!(
        decide_reconcile(MonoMs(9), &req, Some(current), None, MAX_ROWS, MAX_ROWS),
        ReconcileDecision::StoreFull
    );
    assert_eq!(
        decide_reconcile(MonoMs(9), &req, Some(current), None, 0, MAX_ROWS),
        ReconcileDecision::Fence {
            writes: FenceWrites {
                attempt: AttemptRow {
                    source: req.source,
                    target: req.target,
                    outcome: AttemptOutcome::FencedAbort,
                    recorded_at: MonoMs(9),
                },
                assignment: None,
            },
            answer: TxnOutcome::AuthorityChanged {
                check: AuthorityCheck::Superseded(AuthorityField::Generation)
            },
        }
    );
}

/// SEC-1 / SEC-3: a host holds at most `MAX_CLIENTS_PER_HOST` clients (accepts in flight,
/// attaches waiting for persistence and attached clients together). The next client is told
/// "too many clients" (its own close code, not 4409: the host is here, only full); a client
/// already counted still converts (accept -> connection), control work and splices of
/// attached clients still get in, and a client leaving frees a place.
#[test]
fn sec_1_a_full_host_refuses_clients_with_too_many_clients_not_wrong_cell() {
    use switchyard_core::handoff::{admission_refusal_name, client_close_code, close_code};
    use switchyard_core::handoff::{
        AdmissionGate, AdmissionRefusal, WorkKind, MAX_CLIENTS_PER_HOST,
    };
    let mut gate = AdmissionGate::new(HOST, Generation(1));
    let mut tickets = Vec::new();
    for i in 0..MAX_CLIENTS_PER_HOST {
        let kind = match i % 3 {
            0 => WorkKind::Accept,
            1 => WorkKind::ClientConn,
            _ => WorkKind::PendingConn,
        };
        tickets.push(gate.handle_acquire(kind).expect("below the client bound"));
    }
    assert_eq!(
        gate.handle_acquire(WorkKind::Accept),
        Err(AdmissionRefusal::HostFull)
    );
    let accept = tickets.remove(0);
    let converted = gate
        .handle_acquire(WorkKind::ClientConn)
        .expect("a counted client converts");
    gate.handle_release(accept);
    tickets.push(converted);
    assert_eq!(gate.clients(), MAX_CLIENTS_PER_HOST);
    assert_eq!(
        gate.handle_acquire(WorkKind::Accept),
        Err(AdmissionRefusal::HostFull)
    );
    assert_eq!(
        client_close_code(AdmissionRefusal::HostFull),
        close_code::TOO_MANY_CLIENTS
    );
    assert_ne!(close_code::TOO_MANY_CLIENTS, close_code::WRONG_CELL);
    assert_ne!(close_code::TOO_MANY_CLIENTS, close_code::NOT_AUTHENTICATED);
    assert_eq!(
        admission_refusal_name(AdmissionRefusal::HostFull),
        "too_many_clients"
    );
    // Work of clients already here is not client admission.
    assert!(gate.handle_acquire(WorkKind::Splice).is_ok());
    assert!(gate.handle_acquire(WorkKind::ControlOp).is_ok());
    gate.handle_release(tickets.pop().expect("one"));
    assert!(gate.handle_acquire(WorkKind::Accept).is_ok());
}
