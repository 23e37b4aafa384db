//! HO-L4 (`REQUIREMENTS.md` part X): a move the store refused for a reason that clears (a
//! limit, a full store, a pending migration, a policy) is not parked behind its recorded answer:
//! after the cell's refusal hold, the director's next request of the same op id is a new
//! attempt. A fenced op id stays answered for good (HO-A1). Shared setup is in `handoff_rig`.

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;

fn refused(reason: AbortReason) -> DurableResult {
    DurableResult::Done(TxnOutcome::RolledBack { reason })
}

/// The source ends its attempt with `reason`; the reply names it.
fn end_refused(w: &mut World, reason: AbortReason) -> HandoffRequest {
    let req = w.request();
    w.start();
    assert_eq!(w.deliver_txn(refused(reason)), Disposition::Applied);
    assert!(w.open(), "a rolled-back attempt reopens admission");
    assert_eq!(
        reply_reason(&w.last_reply()),
        Some(reason.name()),
        "the director's result names the refusal"
    );
    req
}

#[test]
fn ho_l4_a_refused_op_id_is_tried_anew_after_the_hold() {
    for reason in [
        AbortReason::RateLimited,
        AbortReason::ConcurrencyLimited,
        AbortReason::StoreFull,
        AbortReason::MigrationPending,
        AbortReason::Policy(Ineligible::TargetAtCapacity),
    ] {
        let mut w = World::new();
        let req = end_refused(&mut w, reason);
        let first = w.last_txn().0;
        // Inside the hold: a redelivery is answered from the recorded result, nothing runs.
        w.advance(REFUSAL_HOLD_MS - 1);
        assert_eq!(
            w.begin(&req),
            Begin::Answered(HandoffReply::Result(HandoffResult {
                op_id: req.op_id,
                outcome: TxnOutcome::RolledBack { reason }
            })),
            "{reason:?}"
        );
        // After it: a new attempt of the same op id, a barrier and a transaction.
        w.advance(1);
        match w.begin(&req) {
            Begin::Started(again) => {
                assert_eq!(again.op_id, req.op_id);
                assert!(again.seq > first.seq, "{reason:?}: a new attempt");
            }
            other => panic!("{reason:?}: {other:?}"),
        }
        assert!(w.gated());
        // The store has room now: the move commits, once.
        assert!(w.run_txn().is_committed(), "{reason:?}");
        assert_eq!(
            w.last_reply(),
            HandoffReply::Result(w.src.last_result().expect("result"))
        );
        assert!(w.src.refusal_hold_until().is_none(), "a commit is final");
    }
}

#[test]
fn ho_l4_ho_a1_a_fenced_or_invalid_op_id_is_answered_for_good() {
    for reason in [AbortReason::Fenced, AbortReason::InvalidOpId] {
        assert!(!reason.clears());
        let mut w = World::new();
        let req = w.request();
        w.start();
        w.deliver_txn(refused(reason));
        w.advance(REFUSAL_HOLD_MS * 100);
        assert!(
            matches!(w.begin(&req), Begin::Answered(HandoffReply::Result(_))),
            "{reason:?}: never a second attempt"
        );
        assert_eq!(w.src.refusal_hold_until(), None);
    }
}

#[test]
fn ho_l4_a_late_result_of_the_refused_attempt_changes_nothing() {
    let mut w = World::new();
    let req = end_refused(&mut w, AbortReason::RateLimited);
    let first = w.last_txn().0;
    w.advance(REFUSAL_HOLD_MS);
    assert!(matches!(w.begin(&req), Begin::Started(_)));
    // HO-A4: the first attempt's duplicate result (same op id, older seq) is ignored.
    assert_eq!(
        w.src.handle_transaction_result(
            w.now,
            first,
            DurableResult::Done(TxnOutcome::RolledBack {
                reason: AbortReason::RateLimited
            })
        ),
        Disposition::Ignored(Ignored::OtherAttempt)
    );
    assert!(w.gated(), "the new attempt's barrier stands");
}

#[test]
fn ho_l4_refusal_names_are_stable() {
    let names: Vec<&str> = [
        AbortReason::RateLimited,
        AbortReason::ConcurrencyLimited,
        AbortReason::StoreFull,
        AbortReason::MigrationPending,
        AbortReason::Fenced,
        AbortReason::InvalidOpId,
        AbortReason::Policy(Ineligible::TargetAtCapacity),
    ]
    .into_iter()
    .map(AbortReason::name)
    .collect();
    assert_eq!(
        names,
        [
            "rate_limited",
            "concurrency_limited",
            "store_full",
            "migration_pending",
            "fenced",
            "invalid_op_id",
            Ineligible::TargetAtCapacity.name()
        ]
    );
}
