//! HO-L4 (runs for months): the store's history is bounded by retention, not by a cap that stops
//! the fleet. The decision (`attempt_ended`, `reap_cutoff`, `reap_selection`, `check_retention`,
//! `ReapPlan`) and the reference store's reap, and the safety argument: a record removed is
//! one no reconciliation or late transaction needs (a reaped commit reconciles as
//! `AuthorityChanged`, a reaped fence still keeps its original transaction from committing).

use switchyard_core::handoff::escrow::{after_reap, ShardRow};
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

const SRC: CellId = CellId(1);
const TGT: CellId = CellId(2);
const REGISTRATION_TIMEOUT_MS: u64 = 30_000;
const HOUR: u64 = 3_600_000;

fn config(max_attempt_rows: u64) -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 1_000,
        },
        max_in_flight_migrations: 64,
        rate_window_ms: 60_000,
        max_commits_per_window: 1_000,
        registration_timeout_ms: REGISTRATION_TIMEOUT_MS,
        bounds: StoreBounds {
            max_attempt_rows,
            ..StoreBounds::FLEET
        },
    }
}

/// A store with cells 1 and 2 and `hosts` hosts (7, 8, …) at cell 1.
fn store(max_attempt_rows: u64, hosts: u64) -> AssignmentStore {
    let mut s = AssignmentStore::new(config(max_attempt_rows));
    for c in [SRC, TGT] {
        s.upsert_cell(
            c,
            CellRow {
                capacity: 100,
                handoff_capable: true,
                incarnation: Incarnation(1),
            },
        )
        .expect("cell");
    }
    for h in 0..hosts {
        s.insert_host(HostId(7 + h), SRC, true).expect("host");
    }
    s
}

/// A request moving `host` from where it is to the other cell, measured at `now`.
fn request(s: &AssignmentStore, host: HostId, now: MonoMs) -> HandoffRequest {
    let source = s.authority(host).expect("host");
    let target = if source.cell == SRC { TGT } else { SRC };
    HandoffRequest::new(
        source,
        target,
        100,
        Measurement {
            measured_at: now,
            current_rtt_ms: 120,
            target_rtt_ms: 60,
        },
    )
}

/// Commit a move of `host` and register its desktop at the target (the record ends).
fn move_and_register(s: &mut AssignmentStore, host: HostId, now: MonoMs) -> HandoffRequest {
    let req = request(s, host, now);
    assert!(
        s.run_transaction(now, &req).is_committed(),
        "{host:?} moves"
    );
    s.register_control(now, host, req.target, Incarnation(1), true)
        .expect("registers at the target");
    req
}

fn committed(registration: Registration, at: u64) -> AttemptRow {
    AttemptRow {
        source: SourceAuthority {
            cell: SRC,
            host: HostId(7),
            epoch: Epoch(1),
            incarnation: Incarnation(1),
            generation: Generation(1),
        },
        target: TGT,
        outcome: AttemptOutcome::Committed {
            new_epoch: Epoch(2),
            registration,
        },
        recorded_at: MonoMs(at),
    }
}

#[test]
fn ho_l4_default_retention_at_the_default_rate_stays_under_the_attempt_bound() {
    // 100 moves a second (6,000 per 60 s window, the store's defaults) for the default
    // retention of 24 h: 8,640,000 rows, under the 16,777,216 bound.
    let moves_per_second = 100u64;
    let kept = moves_per_second * DEFAULT_ATTEMPT_RETENTION_MS / 1_000;
    assert_eq!(kept, 8_640_000);
    assert!(
        kept < DEFAULT_MAX_ATTEMPT_ROWS,
        "{kept} rows reach the bound"
    );
    // A pass (10 s by default) adds at most 1,000 rows; the default batch removes more.
    let per_pass = moves_per_second * 10;
    assert!(u64::from(DEFAULT_REAP_BATCH) > per_pass);
    assert!(u64::from(DEFAULT_MAX_EXPIRED_PER_PASS) > per_pass);
    assert_eq!(Retention::DEFAULT.validate(&[]), Ok(()));
}

#[test]
fn ho_l4_ended_records_are_fences_and_commits_no_longer_pending() {
    assert!(!attempt_ended(&committed(Registration::Pending, 0)));
    assert!(attempt_ended(&committed(Registration::Registered, 0)));
    assert!(attempt_ended(&committed(Registration::RecoveryStarted, 0)));
    for outcome in [AttemptOutcome::FencedAbort, AttemptOutcome::FencedRenewed] {
        let row = AttemptRow {
            outcome,
            ..committed(Registration::Pending, 0)
        };
        assert!(attempt_ended(&row), "{outcome:?}");
    }
}

#[test]
fn ho_l4_cutoff_is_now_minus_retention_and_inclusive() {
    assert_eq!(
        reap_cutoff(MonoMs(10), 20),
        None,
        "the clock is not that far"
    );
    assert_eq!(reap_cutoff(MonoMs(5 * HOUR), HOUR), Some(MonoMs(4 * HOUR)));
    let cutoff = MonoMs(4 * HOUR);
    assert!(reapable(
        &committed(Registration::Registered, 4 * HOUR),
        cutoff
    ));
    assert!(!reapable(
        &committed(Registration::Registered, 4 * HOUR + 1),
        cutoff
    ));
    assert!(!reapable(&committed(Registration::Pending, 0), cutoff));
}

#[test]
fn ho_l4_selection_is_oldest_first_then_op_id_and_bounded() {
    let op = |n: u128| OpId(uuid::Uuid::from_u128(n));
    let rows = [
        (op(5), committed(Registration::Registered, 300)),
        (op(1), committed(Registration::Registered, 200)),
        (op(9), committed(Registration::Pending, 100)),
        (op(3), committed(Registration::RecoveryStarted, 200)),
        (op(2), committed(Registration::Registered, 900)),
    ];
    let all = reap_selection(rows.iter().map(|(o, r)| (o, r)), MonoMs(500), 10);
    assert_eq!(all, vec![op(1), op(3), op(5)], "pending and too new kept");
    let two = reap_selection(rows.iter().map(|(o, r)| (o, r)), MonoMs(500), 2);
    assert_eq!(two, vec![op(1), op(3)]);
}

#[test]
fn ho_l4_retention_rule_names_the_binding_window() {
    assert_eq!(check_retention(HOUR, &[]), Ok(()));
    assert_eq!(
        check_retention(HOUR - 1, &[]),
        Err(RetentionError::TooShort {
            retention_ms: HOUR - 1,
            required_ms: HOUR,
            window: RetentionWindow::Floor
        })
    );
    let err = check_retention(
        2 * HOUR,
        &[(RetentionWindow::RegistrationTimeout, 3 * HOUR)],
    )
    .expect_err("shorter than the registration timeout");
    assert_eq!(
        err,
        RetentionError::TooShort {
            retention_ms: 2 * HOUR,
            required_ms: 3 * HOUR,
            window: RetentionWindow::RegistrationTimeout
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("registration timeout") && text.contains("--attempt-retention-ms"),
        "{text}"
    );
    assert!(matches!(
        check_retention(MAX_ATTEMPT_RETENTION_MS + 1, &[]),
        Err(RetentionError::TooLong { .. })
    ));
    let bad_batch = Retention {
        reap_batch: 0,
        ..Retention::DEFAULT
    };
    assert_eq!(
        bad_batch.validate(&[]),
        Err(RetentionError::ReapBatch { value: 0 })
    );
    let bad_expired = Retention {
        max_expired_per_pass: MAX_EXPIRED_PER_PASS + 1,
        ..Retention::DEFAULT
    };
    assert!(matches!(
        bad_expired.validate(&[]),
        Err(RetentionError::MaxExpired { .. })
    ));
}

#[test]
fn ho_l4_reap_lowers_one_shard_count_and_leaves_its_tokens() {
    let row = ShardRow {
        attempt_rows: 2,
        attempt_tokens: 7,
        commit_tokens: 3,
        ..ShardRow::default()
    };
    let after = after_reap(&row, 5);
    assert_eq!(after.attempt_rows, -3, "a shard's count may go negative");
    assert_eq!(
        (after.attempt_tokens, after.commit_tokens),
        (7, 3),
        "tokens untouched"
    );
}

#[test]
fn ho_l4_plan_steps_delete_then_one_shard_then_commit() {
    let now = MonoMs(10 * HOUR);
    let mut plan = ReapPlan::new(now, HOUR, 50);
    assert_eq!(plan.poll(), ReapStep::Begin);
    plan.handle(ReapInput::Begun);
    assert_eq!(plan.poll(), ReapStep::ReadSettings);
    plan.handle(ReapInput::Settings(config(10)));
    assert_eq!(
        plan.poll(),
        ReapStep::DeleteEnded {
            cutoff: MonoMs(9 * HOUR),
            batch: 50
        }
    );
    plan.handle(ReapInput::Deleted(4));
    assert_eq!(plan.poll(), ReapStep::LockAnyShard { hint: 0 });
    plan.handle(ReapInput::Shard(None));
    assert_eq!(plan.poll(), ReapStep::LockShard { shard: 0 });
    let row = ShardRow {
        attempt_rows: 10,
        attempt_tokens: 2,
        ..ShardRow::default()
    };
    plan.handle(ReapInput::Shard(Some((0, row))));
    assert_eq!(
        plan.poll(),
        ReapStep::WriteShard {
            shard: 0,
            row: ShardRow {
                attempt_rows: 6,
                ..row
            }
        }
    );
    plan.handle(ReapInput::Written);
    assert_eq!(plan.poll(), ReapStep::Commit);
    plan.handle(ReapInput::Committed);
    assert_eq!(plan.poll(), ReapStep::Done(Ok(4)));

    // Nothing old enough: nothing written, no shard locked.
    let mut idle = ReapPlan::new(now, HOUR, 50);
    idle.handle(ReapInput::Begun);
    idle.handle(ReapInput::Settings(config(10)));
    idle.handle(ReapInput::Deleted(0));
    assert_eq!(idle.poll(), ReapStep::Done(Ok(0)));

    // More removed than asked: a bad row, not an answer.
    let mut wrong = ReapPlan::new(now, HOUR, 2);
    wrong.handle(ReapInput::Begun);
    wrong.handle(ReapInput::Settings(config(10)));
    wrong.handle(ReapInput::Deleted(3));
    assert_eq!(wrong.poll(), ReapStep::Failed(StoreFault::BadRow));

    // The registration timeout in the settings binds: refused before any delete.
    let long = StoreConfig {
        registration_timeout_ms: 2 * HOUR,
        ..config(10)
    };
    let mut refused = ReapPlan::new(now, HOUR, 50);
    refused.handle(ReapInput::Begun);
    refused.handle(ReapInput::Settings(long));
    assert!(matches!(
        refused.poll(),
        ReapStep::Done(Err(RetentionError::TooShort {
            window: RetentionWindow::RegistrationTimeout,
            ..
        }))
    ));
    // A batch out of range is refused before the transaction.
    assert_eq!(
        ReapPlan::new(now, HOUR, 0).poll(),
        ReapStep::Done(Err(RetentionError::ReapBatch { value: 0 }))
    );
}

#[test]
fn ho_l4_a_full_store_commits_again_once_old_records_are_reaped() {
    let mut s = store(3, 4);
    let t0 = MonoMs(10 * HOUR);
    for h in 0..3 {
        move_and_register(&mut s, HostId(7 + h), t0);
    }
    let req = request(&s, HostId(10), t0);
    assert_eq!(
        s.run_transaction(t0, &req),
        TxnOutcome::RolledBack {
            reason: AbortReason::StoreFull
        }
    );
    // Inside the window nothing goes.
    assert_eq!(s.reap_attempts(t0.plus_ms(HOUR - 1), HOUR, 10), Ok(0));
    let later = t0.plus_ms(HOUR);
    assert_eq!(
        s.reap_attempts(later, HOUR, 2),
        Ok(2),
        "the batch bounds it"
    );
    assert_eq!(s.attempts().count(), 1);
    let req = request(&s, HostId(10), later);
    assert!(s.run_transaction(later, &req).is_committed());
    assert_eq!(s.check_invariants(), Ok(()));
}

#[test]
fn ho_l4_a_pending_commit_is_never_reaped() {
    let mut s = store(100, 2);
    let t0 = MonoMs(10 * HOUR);
    let pending = request(&s, HostId(7), t0);
    assert!(s.run_transaction(t0, &pending).is_committed());
    let ended = move_and_register(&mut s, HostId(8), t0);
    let much_later = t0.plus_ms(100 * HOUR);
    // The registration timeout has long passed, but without an expiry it is still pending.
    assert_eq!(s.reap_attempts(much_later, HOUR, 100), Ok(1));
    assert!(s.attempt(pending.op_id).is_some(), "in flight: kept");
    assert!(s.attempt(ended.op_id).is_none());
    assert!(s.reservation(pending.op_id).is_some());
    assert_eq!(s.check_invariants(), Ok(()));
    // Once recovery starts it has ended, and goes at the next reap.
    assert_eq!(
        s.expire_migrations_up_to(much_later, 10),
        vec![pending.op_id]
    );
    assert_eq!(s.reap_attempts(much_later, HOUR, 100), Ok(1));
    assert!(s.attempt(pending.op_id).is_none());
}

#[test]
fn ho_l4_reconciling_a_reaped_commit_answers_authority_changed() {
    let mut s = store(100, 1);
    let t0 = MonoMs(10 * HOUR);
    let req = move_and_register(&mut s, HostId(7), t0);
    let later = t0.plus_ms(2 * HOUR);
    assert_eq!(s.reap_attempts(later, HOUR, 10), Ok(1));
    assert!(s.attempt(req.op_id).is_none());
    let before = s.authority(HostId(7)).expect("host");
    let answer = s.reconcile(later, &req);
    assert!(
        matches!(answer, Some(TxnOutcome::AuthorityChanged { .. })),
        "not fenced, not rolled back: {answer:?}"
    );
    assert_eq!(
        s.authority(HostId(7)),
        Some(before),
        "the host's authority is not renewed"
    );
    assert_eq!(
        s.attempt(req.op_id).map(|r| r.outcome),
        Some(AttemptOutcome::FencedAbort),
        "the fence record renews nothing"
    );
    // A late duplicate of the original transaction reads the same.
    assert!(matches!(
        s.run_transaction(later, &req),
        TxnOutcome::AuthorityChanged { .. }
    ));
    assert_eq!(s.check_invariants(), Ok(()));
}

#[test]
fn ho_l4_a_reaped_fence_still_keeps_the_original_transaction_from_committing() {
    let mut s = store(100, 1);
    let t0 = MonoMs(10 * HOUR);
    // An ambiguous attempt reconciled before its transaction ran: fenced, authority renewed.
    let req = request(&s, HostId(7), t0);
    assert_eq!(
        s.reconcile(t0, &req),
        Some(TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        })
    );
    assert_eq!(
        s.attempt(req.op_id).map(|r| r.outcome),
        Some(AttemptOutcome::FencedRenewed)
    );
    let later = t0.plus_ms(2 * HOUR);
    assert_eq!(s.reap_attempts(later, HOUR, 10), Ok(1));
    assert!(s.attempt(req.op_id).is_none());
    // The late original transaction: the fence renewed the generation, so it cannot commit.
    let late = HandoffRequest {
        measurement: Measurement {
            measured_at: later,
            ..req.measurement
        },
        ..req
    };
    assert!(matches!(
        s.run_transaction(later, &late),
        TxnOutcome::AuthorityChanged { .. }
    ));
    assert_eq!(s.assignment(HostId(7)).map(|r| r.cell), Some(SRC));
    assert_eq!(s.check_invariants(), Ok(()));
}
