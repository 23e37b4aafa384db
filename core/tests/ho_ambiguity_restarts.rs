//! HO requirement group "Ambiguity, restarts, faults" (`REQUIREMENTS.md` part HO): HO-A1..HO-A4:
//! duplicates, quarantine and reconciliation, lost responses, restarts and replacement controls.
//! Each test name carries its requirement ID (`ho_s3_…` for HO-S3); shared setup is in
//! `handoff_rig`.

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;

// ---- HO-A1 ------------------------------------------------------------------------------------

#[test]
fn ho_a1_duplicate_returns_recorded_result() {
    let mut w = World::new();
    let req = w.request();
    w.start();
    let out = w.run_txn();
    assert_eq!(
        w.begin(&req),
        Begin::Answered(HandoffReply::Result(HandoffResult {
            op_id: req.op_id,
            outcome: out
        }))
    );
    assert_eq!(w.store.run_transaction(w.now, &req), out);
    assert_eq!(w.store.reconcile(w.now, &req), Some(out));
    assert_eq!(w.store.assignment(HOST).map(|r| r.epoch), Some(Epoch(2)));
}

#[test]
fn ho_a1_duplicate_while_in_flight_answers_in_progress() {
    let mut w = World::new();
    let req = w.request();
    w.start();
    assert_eq!(
        w.begin(&req),
        Begin::Answered(HandoffReply::InProgress { op_id: req.op_id })
    );
    assert_eq!(w.seen.txns.len(), 1);
}

#[test]
fn ho_a1_locked_reconciliation_fences_a_late_original_commit() {
    let mut w = World::new();
    w.start();
    let (_, req) = w.last_txn();
    w.deliver_txn(DurableResult::Ambiguous(Ambiguity::Timeout));
    // No attempt row yet: the reconciliation writes the abort record under the lock.
    assert_eq!(
        w.run_reconcile(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    // HO-L1: the claim was exact, so the fence also renewed the host's authority.
    assert!(matches!(
        w.store.attempt(req.op_id).map(|a| a.outcome),
        Some(AttemptOutcome::FencedRenewed)
    ));
    // The original transaction reaches the DB late: it fails its op-id re-check.
    assert_eq!(
        w.store.run_transaction(w.now, &req),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    assert_eq!(w.store.assignment(HOST).map(|r| r.cell), Some(SRC));
    assert_eq!(w.store.reservations().count(), 0);
}

// ---- HO-A2 ------------------------------------------------------------------------------------

#[test]
fn ho_a2_store_unavailable_quarantines_and_never_reopens_on_timeout() {
    let mut w = World::new();
    let a = w.start();
    w.deliver_txn(DurableResult::StoreUnavailable);
    assert_eq!(
        w.seen.quarantined,
        vec![(a, QuarantineCause::StoreUnavailable)]
    );
    for _ in 0..20 {
        w.advance(QUARANTINE_RETRY_MS);
        w.timeout();
        w.advance(RECONCILE_TIMEOUT_MS);
        w.timeout(); // reconcile timed out: back to quarantine
        assert!(w.gated());
    }
    assert!(w.seen.reopened.is_empty());
    assert!(w.seen.reconciles.len() >= 20, "reconciliation retried");
}

#[test]
fn ho_a2_ambiguous_commit_is_established_by_reconciliation() {
    let mut w = World::new();
    w.start();
    w.run_txn_lose_result();
    assert!(w.gated());
    assert_eq!(
        w.src.poll_timeout(),
        Some(w.now.plus_ms(RECONCILE_TIMEOUT_MS))
    );
    assert!(w.run_reconcile().is_committed());
    assert_eq!(w.seen.retired.len(), 1);
}

#[test]
fn ho_a2_a_full_store_cannot_fence_and_the_source_stays_quarantined() {
    // `reconcile` answers None only when it cannot write the fence: the adapter reports
    // StoreUnavailable, never a rollback.
    let mut w = World::new();
    w.start();
    w.deliver_txn(DurableResult::Ambiguous(Ambiguity::Timeout));
    w.deliver_reconcile(DurableResult::StoreUnavailable);
    assert!(matches!(
        w.src.attempt().map(|a| a.phase()),
        Some(Phase::Quarantined {
            cause: QuarantineCause::StoreUnavailable,
            ..
        })
    ));
    assert!(w.gated());
}

// ---- HO-A3 ------------------------------------------------------------------------------------

#[test]
fn ho_a3_lost_director_response_does_not_interrupt_completion() {
    let mut w = World::new();
    let req = w.request();
    w.start();
    // The director's HTTP request is gone; the source completes alone.
    w.run_txn();
    assert!(matches!(w.last_reply(), HandoffReply::Result(_)));
    // Any director retrying sees the same operation's result.
    let retry = HandoffRequest::new(req.source, req.target, 100, req.measurement);
    assert!(matches!(
        w.begin(&retry),
        Begin::Answered(HandoffReply::Result(r)) if r.op_id == req.op_id
    ));
}

#[test]
fn ho_a3_no_prepare_state_to_strand() {
    let mut w = World::new();
    let before = w.store.clone();
    w.start();
    w.deliver_txn(DurableResult::Ambiguous(Ambiguity::TransportError));
    assert_eq!(
        w.store, before,
        "nothing durable exists before the transaction"
    );
}

// ---- HO-A4 ------------------------------------------------------------------------------------

#[test]
fn ho_a4_late_callback_never_reopens_the_replacement() {
    let mut w = World::new();
    let old = w.start();
    w.deliver_txn(DurableResult::Ambiguous(Ambiguity::ResultLost));
    // The source restarts; the replacement starts its own attempt.
    let fresh = w
        .store
        .register_control(w.now, HOST, SRC, Incarnation(2), true)
        .expect("restart");
    w.src = SourceHandoff::new(source_config(), fresh, true);
    let new = w.start();
    assert_ne!(new.op_id, old.op_id);
    // Late results of the closed session arrive at the replacement.
    let late = TxnOutcome::RolledBack {
        reason: AbortReason::Fenced,
    };
    for result in [DurableResult::Done(late), DurableResult::StoreUnavailable] {
        assert_eq!(
            w.src.handle_transaction_result(w.now, old, result),
            Disposition::Ignored(Ignored::OtherAttempt)
        );
        assert_eq!(
            w.src.handle_reconcile_result(w.now, old, result),
            Disposition::Ignored(Ignored::OtherAttempt)
        );
    }
    w.drain();
    assert!(w.gated(), "the replacement's barrier stands");
    assert!(w.seen.reopened.is_empty());
}

#[test]
fn ho_a4_a_retry_of_the_same_op_ignores_the_previous_try_s_late_result() {
    let mut w = World::new();
    let first = w.start();
    w.store.upsert_cell(TGT, cell_row(0, true)).expect("full");
    w.run_txn(); // explicit rollback: reopened
                 // A duplicate of the finished op answers its recorded result ...
    let req = w.request();
    assert!(matches!(
        w.begin(&req),
        Begin::Answered(HandoffReply::Result(_))
    ));
    // ... until another op finished here; then a retry of the first op is a new try.
    let other = w.request_to(OLD);
    assert!(matches!(w.begin(&other), Begin::Started(_)));
    w.run_txn();
    w.store.upsert_cell(TGT, cell_row(10, true)).expect("room");
    let second = w.start();
    assert_eq!(first.op_id, second.op_id);
    assert_ne!(first.seq, second.seq);
    let stale = DurableResult::Done(TxnOutcome::RolledBack {
        reason: AbortReason::Policy(Ineligible::TargetAtCapacity),
    });
    assert_eq!(
        w.src.handle_transaction_result(w.now, first, stale),
        Disposition::Ignored(Ignored::OtherAttempt)
    );
    assert!(w.gated());
}

#[test]
fn ho_a4_commit_and_replacement_serialise_under_the_host_lock() {
    // Commit first: the replacement is refused.
    let mut w = World::new();
    w.start();
    w.run_txn();
    assert!(matches!(
        w.register_at(SRC),
        Err(RegisterRefusal::NotAssignedHere { .. })
    ));
    // Replacement first: the commit fails its generation re-check.
    let mut w = World::new();
    w.start();
    w.register_at(SRC).expect("replacement");
    assert_eq!(
        w.run_txn(),
        TxnOutcome::AuthorityChanged {
            check: AuthorityCheck::Superseded(AuthorityField::Generation)
        }
    );
}

#[test]
fn ho_a4_rebind_needs_a_live_control_ticket_and_a_newer_generation() {
    let mut w = World::new();
    let newer = w.register_at(SRC).expect("registered");
    let accept = w.src.handle_acquire(WorkKind::Accept).expect("accept");
    assert_eq!(
        w.src.handle_rebind(w.now, accept, newer, true),
        Err(RebindRefusal::NoControlTicket)
    );
    let ctl = w.src.handle_acquire(WorkKind::ControlOp).expect("ctl");
    let same = w.src.authority();
    assert_eq!(
        w.src.handle_rebind(w.now, ctl, same, true),
        Err(RebindRefusal::NotNewer)
    );
    assert_eq!(w.src.handle_rebind(w.now, ctl, newer, true), Ok(()));
    assert_eq!(w.src.authority(), newer);
    assert_eq!(w.src.gate().generation(), newer.generation);
}

// ---- found by mutation testing (docs/ASSURANCE.md) -------------------------------------------

#[test]
fn ho_a2_a_timer_fed_before_its_deadline_changes_nothing() {
    let mut w = World::new();
    w.start();
    // The adapter's timer may wake early; only the deadline itself moves the attempt on.
    assert_eq!(
        w.timeout(),
        Disposition::Ignored(Ignored::NotAwaited),
        "in transaction, before the deadline"
    );
    let (attempt, _) = w.last_txn();
    assert_eq!(w.src.attempt().map(|a| a.attempt()), Some(attempt));
    assert!(w.gated());
    // The same while the reconciliation of a lost result runs, and in quarantine.
    w.run_txn_lose_result();
    assert!(matches!(
        w.src.attempt().map(|a| a.phase()),
        Some(Phase::Reconciling { .. })
    ));
    assert_eq!(w.timeout(), Disposition::Ignored(Ignored::NotAwaited));
    assert!(matches!(
        w.src.attempt().map(|a| a.phase()),
        Some(Phase::Reconciling { .. })
    ));
}

#[test]
fn ho_a4_rebind_from_an_older_incarnation_is_refused_even_with_a_newer_generation() {
    let mut w = World::new();
    let current = w.src.authority();
    let ctl = w.src.handle_acquire(WorkKind::ControlOp).expect("ctl");
    let older_process = SourceAuthority {
        incarnation: Incarnation(current.incarnation.0 - 1),
        generation: current.generation.next(),
        ..current
    };
    assert_eq!(
        w.src.handle_rebind(w.now, ctl, older_process, true),
        Err(RebindRefusal::NotNewer)
    );
    assert_eq!(w.src.authority(), current);
    assert_eq!(w.src.gate().host(), current.host);
}

#[test]
fn ho_a4_a_stale_session_close_leaves_the_open_session_open() {
    let mut w = World::new();
    let registered = w.src.authority().generation;
    let stale = Generation(registered.0 - 1);
    assert_eq!(
        w.src.handle_session_closed(w.now, stale),
        Disposition::Ignored(Ignored::StaleSession)
    );
    assert!(w.src.session_open());
    assert_eq!(
        w.src.handle_session_closed(w.now, registered),
        Disposition::Applied
    );
    assert!(!w.src.session_open());
    assert_eq!(
        w.src.handle_session_closed(w.now, registered),
        Disposition::Ignored(Ignored::StaleSession),
        "closed once"
    );
}

#[test]
fn ho_a4_a_replacement_control_rebinds_the_live_machine_and_closes_the_old_session() {
    let (mut store, mut cell, _, first) = registered();
    assert_eq!(first.how, InstallKind::NewMachine);
    let op = cell
        .handle_begin_control(HOST)
        .expect("ticket")
        .expect("live");
    let newer = store
        .register_control(NOW, HOST, SRC, Incarnation(1), true)
        .expect("register");
    let second = cell
        .handle_install_control(NOW, newer, true, Some(op))
        .expect("rebind");
    assert_eq!(second.how, InstallKind::Rebound);
    assert_eq!(second.machine, first.machine, "same machine, rebound");
    assert_eq!(cell.authority(HOST), Some(newer));
    assert_eq!(cell.control(HOST), Some(second.session));
    assert_eq!(
        drain(&mut cell),
        vec![CellAction::CloseControl {
            host: HOST,
            session: first.session,
            reason: CloseReason::Replaced
        }]
    );
    let (_, m) = cell.machine(HOST).expect("machine");
    assert!(
        m.gate().counters().is_zero(),
        "the activation's ticket was released"
    );
    // The first session's late close changes nothing.
    assert!(!cell.handle_control_closed(NOW, HOST, first.session));
    assert!(cell.machine(HOST).is_some_and(|(_, m)| m.session_open()));
}

#[test]
fn ho_a4_a_retired_source_gets_a_fresh_machine_and_late_results_of_the_old_one_are_fenced() {
    let (mut store, mut cell, auth, first) = registered();
    let req = request(auth);
    assert!(matches!(cell.handle_request(NOW, &req), Begin::Started(_)));
    let (machine, attempt) = txn_of(&drain(&mut cell));
    assert_eq!(machine, first.machine);
    let outcome = store.run_transaction(NOW, &req);
    assert!(outcome.is_committed());
    let fed =
        cell.handle_transaction_result(NOW, HOST, machine, attempt, DurableResult::Done(outcome));
    assert!(matches!(fed, Fed::Applied(_)));
    let actions = drain(&mut cell);
    // HO-S5: the control closes before the retirement executes; the reply goes last.
    let close = actions
        .iter()
        .position(|a| {
            matches!(
                a,
                CellAction::CloseControl {
                    reason: CloseReason::Retired(RetireReason::Committed { .. }),
                    ..
                }
            )
        })
        .expect("control closed");
    let retire = actions
        .iter()
        .position(|a| {
            matches!(
                a,
                CellAction::Machine {
                    action: HandoffAction::RetireSourceDraining { .. },
                    ..
                }
            )
        })
        .expect("retired");
    assert!(close < retire);
    assert_eq!(cell.control(HOST), None);
    // The host comes back here later (a second move back, or a stale retire): fresh machine.
    let back = SourceAuthority {
        generation: auth.generation.next(),
        ..auth
    };
    let second = cell
        .handle_install_control(NOW, back, true, None)
        .expect("fresh");
    assert_eq!(second.how, InstallKind::OverRetired);
    assert_ne!(second.machine, first.machine);
    // A late result for the old machine is fenced off.
    assert_eq!(
        cell.handle_transaction_result(NOW, HOST, machine, attempt, DurableResult::Done(outcome)),
        Fed::Late
    );
    assert_eq!(cell.handle_timeout(NOW, HOST, machine), Fed::Late);
    // And a ticket of the old machine neither revalidates nor releases anything.
    let work = CellWork {
        host: HOST,
        machine,
        ticket: cell
            .handle_acquire(HOST, WorkKind::Accept)
            .expect("open")
            .ticket,
    };
    assert!(!cell.handle_revalidate(&work));
    assert_eq!(cell.handle_release(&work), None);
}

#[test]
fn ho_a4_an_install_for_another_cell_or_process_is_refused() {
    let (_, mut cell, auth, _) = registered();
    let other_process = SourceAuthority {
        incarnation: Incarnation(2),
        ..auth
    };
    assert_eq!(
        cell.handle_install_control(NOW, other_process, true, None),
        Err(InstallRefusal::WrongAuthority)
    );
    let older = SourceAuthority {
        generation: switchyard_core::handoff::Generation(0),
        ..auth
    };
    assert_eq!(
        cell.handle_install_control(NOW, older, true, None),
        Err(InstallRefusal::Rebind(RebindRefusal::NotNewer))
    );
}

#[test]
fn ho_a1_a_duplicate_at_a_source_without_the_attempt_answers_the_committed_record() {
    let (mut store, _, auth, _) = registered();
    let req = request(auth);
    assert!(store.run_transaction(NOW, &req).is_committed());
    let row = store.attempt(req.op_id).copied();
    let refused = HandoffReply::Refused {
        op_id: req.op_id,
        reason: HandoffRefusal::NoSession,
    };
    assert!(needs_durable_record(&refused));
    match answer_from_record(refused, row.as_ref()) {
        HandoffReply::Result(r) => {
            assert_eq!(r.op_id, req.op_id);
            assert!(matches!(r.outcome, TxnOutcome::Committed { target, .. } if target == TGT));
        }
        other => panic!("expected the committed result, got {other:?}"),
    }
    // Busy, in progress and a fenced record are answered as they are.
    let busy = HandoffReply::InProgress { op_id: req.op_id };
    assert!(!needs_durable_record(&busy));
    assert_eq!(answer_from_record(busy, row.as_ref()), busy);
    let fenced = row.map(|r| switchyard_core::handoff::store::AttemptRow {
        outcome: AttemptOutcome::FencedAbort,
        ..r
    });
    assert_eq!(answer_from_record(refused, fenced.as_ref()), refused);
    assert_eq!(answer_from_record(refused, None), refused);
}

/// HO-A4: a desktop's control activation at a retired machine takes no ticket (the gate is
/// closed for good): `handle_install_control` decides, as at a host with no machine.
#[test]
fn ho_a4_begin_control_at_a_retired_machine_takes_no_ticket_and_counts_are_kept() {
    let (mut store, mut cell, auth, _) = registered();
    assert_eq!(cell.host_count(), 1);
    let Ok(Some(work)) = cell.handle_begin_control(HOST) else {
        panic!("live: a ticket")
    };
    assert!(cell.handle_release(&work).is_some());
    let req = request(auth);
    assert!(matches!(cell.handle_request(NOW, &req), Begin::Started(_)));
    assert!(
        cell.pending_actions() > 0,
        "the transaction waits to be drained"
    );
    let (machine, attempt) = txn_of(&drain(&mut cell));
    assert_eq!(cell.pending_actions(), 0);
    let outcome = store.run_transaction(NOW, &req);
    let _ =
        cell.handle_transaction_result(NOW, HOST, machine, attempt, DurableResult::Done(outcome));
    drain(&mut cell);
    assert_eq!(
        cell.handle_begin_control(HOST),
        Ok(None),
        "retired: no ticket"
    );
}
