//! HO requirement group "The attempt: commit, rollback, recovery" (`REQUIREMENTS.md` part HO):
//! HO-S5, HO-S6, HO-A6: what a committed, a rolled-back and an authority-changed attempt do, and
//! the recovery after commit.
//! Each test name carries its requirement ID (`ho_s3_…` for HO-S3); shared setup is in
//! `handoff_rig`.

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;

// ---- HO-S5 / HO-S6 ----------------------------------------------------------------------------

#[test]
fn ho_s5_commit_retires_the_source_and_replies_the_durable_result() {
    let mut w = World::new();
    let a = w.start();
    let out = w.run_txn();
    assert_eq!(
        w.seen.retired,
        vec![RetireReason::Committed {
            op_id: a.op_id,
            target: TGT
        }]
    );
    assert_eq!(
        w.last_reply(),
        HandoffReply::Result(HandoffResult {
            op_id: a.op_id,
            outcome: out
        })
    );
    assert_eq!(
        w.src.gate().state(),
        GateState::Closed(ClosedReason::Committed)
    );
    assert_eq!(
        w.src.handle_acquire(WorkKind::Accept),
        Err(AdmissionRefusal::WrongCell)
    );
    assert!(w.seen.reopened.is_empty());
}

#[test]
fn ho_s6_explicit_abort_with_unchanged_authority_reopens() {
    let mut w = World::new();
    let a = w.start();
    w.store.upsert_cell(TGT, cell_row(0, true)).expect("cell");
    assert!(matches!(w.run_txn(), TxnOutcome::RolledBack { .. }));
    assert_eq!(w.seen.reopened, vec![a]);
    assert!(w.open());
    assert!(w.seen.retired.is_empty());
    assert!(
        w.src.handle_acquire(WorkKind::Accept).is_ok(),
        "original control goes on"
    );
}

#[test]
fn ho_s6_rolled_back_transaction_keeps_no_reservation() {
    let mut w = World::new();
    w.start();
    let (_, req) = w.last_txn();
    w.store.set_enabled(false);
    w.run_txn();
    assert_eq!(w.store.reservation(req.op_id), None);
    assert_eq!(
        w.store.attempt(req.op_id),
        None,
        "a rollback records nothing"
    );
    assert_eq!(w.store.check_invariants(), Ok(()));
}

#[test]
fn ho_s6_authority_changed_retires_the_stale_source() {
    let mut w = World::new();
    let a = w.start();
    w.register_at(SRC).expect("replacement elsewhere wins");
    assert!(matches!(w.run_txn(), TxnOutcome::AuthorityChanged { .. }));
    assert_eq!(
        w.seen.retired,
        vec![RetireReason::StaleAuthority { op_id: a.op_id }]
    );
    assert_eq!(
        w.src.gate().state(),
        GateState::Closed(ClosedReason::StaleAuthority)
    );
}

#[test]
fn ho_s6_timeout_or_transport_error_is_not_a_rollback() {
    for amb in [
        Ambiguity::Timeout,
        Ambiguity::TransportError,
        Ambiguity::ResultLost,
    ] {
        let mut w = World::new();
        w.start();
        w.deliver_txn(DurableResult::Ambiguous(amb));
        assert!(w.gated(), "{amb:?}");
        assert!(w.seen.reopened.is_empty());
        assert_eq!(w.seen.reconciles.len(), 1, "{amb:?} reconciles by op id");
    }
}

// ---- HO-A6 ------------------------------------------------------------------------------------

#[test]
fn ho_a6_retire_is_queued_before_the_reply_and_needs_no_delivery() {
    let mut w = World::new();
    w.start();
    w.run_txn();
    let retire = w
        .seen
        .log
        .iter()
        .position(|a| matches!(a, HandoffAction::RetireSourceDraining { .. }))
        .expect("retire");
    let reply = w
        .seen
        .log
        .iter()
        .position(|a| matches!(a, HandoffAction::Reply(_)))
        .expect("reply");
    assert!(
        retire < reply,
        "the old control is released even if the reply fails"
    );
}

#[test]
fn ho_a6_target_registration_failure_uses_bounded_recovery() {
    let mut w = World::new();
    w.start();
    let (_, req) = w.last_txn();
    w.run_txn();
    assert_eq!(w.store.expire_migrations(w.now), vec![], "not yet");
    w.advance(REGISTRATION_TIMEOUT_MS);
    assert_eq!(w.store.expire_migrations(w.now), vec![req.op_id]);
    assert_eq!(w.store.reservation(req.op_id), None, "reservation released");
    assert!(matches!(
        w.store.attempt(req.op_id).map(|a| a.outcome),
        Some(AttemptOutcome::Committed {
            registration: Registration::RecoveryStarted,
            ..
        })
    ));
    // Recovery never keeps the source.
    assert_eq!(w.store.assignment(HOST).map(|r| r.cell), Some(TGT));
    assert!(matches!(
        w.register_at(SRC),
        Err(RegisterRefusal::NotAssignedHere { .. })
    ));
    assert!(
        w.register_at(TGT).is_ok(),
        "late registration at the target works"
    );
    assert_eq!(w.store.check_invariants(), Ok(()));
}

#[test]
fn ho_a6_target_registration_completes_the_migration() {
    let mut w = World::new();
    w.start();
    let (_, req) = w.last_txn();
    w.run_txn();
    let at_target = w.register_at(TGT).expect("registered");
    assert_eq!(at_target.cell, TGT);
    assert_eq!(w.store.reservation(req.op_id), None);
    assert!(matches!(
        w.store.attempt(req.op_id).map(|a| a.outcome),
        Some(AttemptOutcome::Committed {
            registration: Registration::Registered,
            ..
        })
    ));
    // Clients attaching at the target are governed by the target's own machine.
    let mut target = SourceHandoff::new(source_config(), at_target, true);
    assert!(target.handle_acquire(WorkKind::ClientConn).is_ok());
}
