//! The seed's minimum tests 1, 2, 3, 4 and 7 (seed 003), as deterministic component tests
//! over the reference store and the source machine. Names carry `ho_t<N>`.

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

fn busy_kinds(b: Begin) -> Vec<WorkKind> {
    match b {
        Begin::Answered(HandoffReply::Busy { counters, .. }) => counters.busy_kinds(),
        other => panic!("expected Busy, got {other:?}"),
    }
}

// ---- 1. phone / iPad ------------------------------------------------------------------------

#[test]
fn ho_t1_phone_stays_while_ipad_leaves_no_move() {
    let mut w = World::new();
    let phone = w.src.handle_acquire(WorkKind::ClientConn).expect("phone");
    let ipad = w.src.handle_acquire(WorkKind::ClientConn).expect("ipad");
    assert_eq!(w.src.handle_release(ipad), ReleaseReport::Released);
    let req = w.request();
    assert_eq!(busy_kinds(w.begin(&req)), vec![WorkKind::ClientConn]);
    assert!(w.open(), "busy holds no barrier");
    assert!(
        w.seen.txns.is_empty(),
        "no transaction while the phone stays"
    );
    assert_eq!(w.store.authority(HOST), Some(w.src.authority()), "no move");
    let _ = phone;
}

#[test]
fn ho_t1_both_leave_may_move() {
    let mut w = World::new();
    let phone = w.src.handle_acquire(WorkKind::ClientConn).expect("phone");
    let ipad = w.src.handle_acquire(WorkKind::ClientConn).expect("ipad");
    assert_eq!(w.src.handle_release(ipad), ReleaseReport::Released);
    assert_eq!(w.src.handle_release(phone), ReleaseReport::Released);
    w.start();
    assert!(w.run_txn().is_committed());
    assert_eq!(w.store.assignment(HOST).map(|r| r.cell), Some(TGT));
}

#[test]
fn ho_t1_quiet_established_socket_still_blocks() {
    let mut w = World::new();
    let _quiet = w.src.handle_acquire(WorkKind::ClientConn).expect("client");
    // Hours of silence: no traffic input exists that could expire a connection.
    w.advance(6 * 3_600_000);
    let _ = w.src.handle_heartbeat(Heartbeat::Ping);
    let req = w.request();
    assert_eq!(busy_kinds(w.begin(&req)), vec![WorkKind::ClientConn]);
}

#[test]
fn ho_t1_expired_db_splice_lease_still_blocks() {
    let mut w = World::new();
    let _splice = w.src.handle_acquire(WorkKind::Splice).expect("splice");
    let expired = ActivityLease::Expired {
        expired_at: MonoMs(5),
    };
    assert_eq!(
        w.src.handle_activity_lease(expired),
        NotCounted::NotIdlenessEvidence
    );
    let _ = w.src.handle_activity_lease(ActivityLease::Missing);
    let req = w.request();
    assert_eq!(busy_kinds(w.begin(&req)), vec![WorkKind::Splice]);
}

// ---- 2. accepts, attaches, credential changes around the barrier -----------------------------

#[test]
fn ho_t2_accept_before_barrier_blocks_it() {
    let mut w = World::new();
    // Ownership is taken before the accept's first await.
    let accept = w.src.handle_acquire(WorkKind::Accept).expect("accept");
    let req = w.request();
    assert_eq!(busy_kinds(w.begin(&req)), vec![WorkKind::Accept]);
    // The accept completes into a client connection: still not idle.
    let client = w.src.handle_acquire(WorkKind::ClientConn).expect("client");
    assert_eq!(w.src.handle_release(accept), ReleaseReport::Released);
    assert_eq!(busy_kinds(w.begin(&req)), vec![WorkKind::ClientConn]);
    assert_eq!(w.src.handle_release(client), ReleaseReport::Released);
    assert!(matches!(w.begin(&req), Begin::Started(_)));
}

#[test]
fn ho_t2_accept_after_barrier_is_refused_with_wrong_cell() {
    let mut w = World::new();
    w.start();
    let refusal = w.src.handle_acquire(WorkKind::Accept).expect_err("gated");
    assert_eq!(refusal, AdmissionRefusal::WrongCell);
    assert_eq!(refusal.close_code(), Some(4409));
    assert_eq!(
        w.src.gate().counters(),
        QuiescenceCounters::default(),
        "nothing leaked"
    );
}

#[test]
fn ho_t2_accept_waiting_for_activity_persistence_blocks() {
    let mut w = World::new();
    let accept = w.src.handle_acquire(WorkKind::Accept).expect("accept");
    // ... awaiting activity persistence: the director asks now.
    let req = w.request();
    assert_eq!(busy_kinds(w.begin(&req)), vec![WorkKind::Accept]);
    // Persistence done: the continuation re-checks and may go on (nothing changed).
    assert_eq!(w.src.handle_revalidate(accept), Revalidation::Continue);
}

#[test]
fn ho_t2_attach_waiting_for_basis_persistence_blocks_and_abandons_after_replacement() {
    let mut w = World::new();
    let attach = w.src.handle_acquire(WorkKind::ClientConn).expect("attach");
    let req = w.request();
    assert_eq!(busy_kinds(w.begin(&req)), vec![WorkKind::ClientConn]);
    // While the attach awaits basis persistence, the control is replaced.
    w.replace_control().expect("replacement");
    // The late continuation must not attach to the old basis, and releases its ownership.
    assert_eq!(
        w.src.handle_revalidate(attach),
        Revalidation::Abandon {
            reason: AbandonReason::SessionReplaced,
            release: ReleaseReport::Released
        }
    );
    assert_eq!(
        w.src.gate().counters(),
        QuiescenceCounters::default(),
        "no leaked ticket"
    );
    // The RAII guard's own drop is then a reported no-op, never a negative counter.
    assert_eq!(w.src.handle_release(attach), ReleaseReport::StaleGeneration);
    assert_eq!(w.src.gate().counters(), QuiescenceCounters::default());
}

#[test]
fn ho_t2_credential_change_across_the_barrier() {
    let mut w = World::new();
    let cred = w
        .src
        .handle_acquire(WorkKind::ControlOp)
        .expect("credential change");
    let req = w.request();
    assert_eq!(busy_kinds(w.begin(&req)), vec![WorkKind::ControlOp]);
    assert_eq!(w.src.handle_release(cred), ReleaseReport::Released);
    w.start();
    // A credential change that arrives after the barrier is refused (retryable).
    assert_eq!(
        w.src.handle_acquire(WorkKind::ControlOp),
        Err(AdmissionRefusal::ControlGated)
    );
    // The attempt aborts (capacity): admission reopens and the change can run.
    let full = CellRow {
        capacity: 0,
        ..cell_row(0, true)
    };
    w.store.upsert_cell(TGT, full).expect("cell");
    assert!(matches!(w.run_txn(), TxnOutcome::RolledBack { .. }));
    assert!(w.open());
    assert!(w.src.handle_acquire(WorkKind::ControlOp).is_ok());
}

#[test]
fn ho_t2_no_leaked_reservation_and_no_interrupted_client() {
    let mut w = World::new();
    let client = w.src.handle_acquire(WorkKind::ClientConn).expect("client");
    let req = w.request();
    let _ = w.begin(&req);
    // Busy closed nothing: the client's ticket is still live and valid.
    assert_eq!(w.src.handle_revalidate(client), Revalidation::Continue);
    assert!(w.seen.log.is_empty(), "no action at all for a busy answer");
    assert_eq!(w.src.handle_release(client), ReleaseReport::Released);
    // An attempt that rolls back keeps no reservation.
    w.start();
    w.store.set_enabled(false);
    assert!(matches!(w.run_txn(), TxnOutcome::RolledBack { .. }));
    assert_eq!(w.store.reservations().count(), 0);
    assert_eq!(w.store.reservation(req.op_id), None);
}

// ---- 3. busy is a deferral -------------------------------------------------------------------

#[test]
fn ho_t3_busy_attempt_keeps_source_admission_open() {
    let mut w = World::new();
    let _c = w
        .src
        .handle_acquire(WorkKind::PendingConn)
        .expect("pending");
    let req = w.request();
    let _ = w.begin(&req);
    assert!(w.open());
    assert!(
        w.src.handle_acquire(WorkKind::Accept).is_ok(),
        "new clients still admitted"
    );
    assert!(w.src.handle_acquire(WorkKind::ControlOp).is_ok());
}

fn candidate(host: u64, now: MonoMs) -> CandidateRow {
    CandidateRow {
        candidate: CandidateView {
            authority: SourceAuthority {
                cell: SRC,
                host: HostId(host),
                epoch: Epoch(1),
                incarnation: Incarnation(1),
                generation: Generation(1),
            },
            source_cell_capable: true,
            desktop_capable: true,
            measurement: Some((TGT, good_measurement(now))),
            cooldown_until: None,
        },
        target: Some(TargetView {
            cell: TGT,
            capable: true,
            load: 0,
            capacity: 1_000,
            lease_until: MonoMs::ZERO,
        }),
    }
}

/// One director pass over `hosts` (sorted), returning the hosts dispatched.
fn pass(
    cursor: &mut PageCursor,
    hosts: &[u64],
    limits: ScanLimits,
    director: &DirectorPolicy,
    now: MonoMs,
) -> Vec<u64> {
    let mut p = SelectionPass::begin(*cursor, limits).expect("limits");
    let mut out = Vec::new();
    while let Some(q) = p.poll_query() {
        let rows: Vec<CandidateRow> = hosts
            .iter()
            .filter(|h| q.contains(HostId(**h)))
            .take(usize::try_from(q.limit).expect("limit"))
            .map(|h| candidate(*h, now))
            .collect();
        for d in p.handle_page(now, director, &rows) {
            if d.verdict.is_ok() {
                out.push(d.host.0);
            }
        }
    }
    *cursor = p.cursor();
    out
}

#[test]
fn ho_t3_busy_hosts_do_not_starve_idle_candidates_across_page_boundaries() {
    let director = DirectorPolicy {
        enabled: true,
        cohort_percent: 100,
        policy: policy_config(),
    };
    let now = MonoMs(1_000);
    // 7 hosts, pages of 3 (boundaries at 3 and 6), 2 dispatches per pass. Hosts 0..=4 answer
    // busy forever; 5 and 6 are idle and sit behind a page boundary and at the list's end.
    let hosts: Vec<u64> = (0..7).collect();
    let limits = ScanLimits {
        page_size: 3,
        max_pages: 2,
        max_dispatch: 2,
    };
    let mut cursor = PageCursor::default();
    let mut budget = DispatchBudget::new(3);
    let mut reached = Vec::new();
    for _ in 0..5 {
        for h in pass(&mut cursor, &hosts, limits, &director, now) {
            if h <= 4 {
                let busy = HandoffReply::Busy {
                    op_id: OpId::derive(&candidate(h, now).candidate.authority, TGT),
                    counters: QuiescenceCounters {
                        client_conns: 1,
                        ..QuiescenceCounters::default()
                    },
                };
                assert_eq!(
                    budget.handle_outcome(&DispatchOutcome::Answered(busy)),
                    DispatchClass::Deferred
                );
            } else {
                reached.push(h);
            }
        }
    }
    reached.sort_unstable();
    reached.dedup();
    assert_eq!(
        reached,
        vec![5, 6],
        "idle hosts reached despite busy ones ahead"
    );
    assert_eq!(
        budget.failures_left(),
        3,
        "busy never spends the failure budget"
    );
}

#[test]
fn ho_t3_busy_does_not_consume_the_dispatch_failure_budget() {
    let mut budget = DispatchBudget::new(2);
    let busy = HandoffReply::Busy {
        op_id: OpId::derive(&World::new().src.authority(), TGT),
        counters: QuiescenceCounters {
            accepts: 1,
            ..QuiescenceCounters::default()
        },
    };
    for _ in 0..100 {
        budget.handle_outcome(&DispatchOutcome::Answered(busy));
    }
    assert!(!budget.exhausted());
    assert_eq!(
        budget.handle_outcome(&DispatchOutcome::TransportFailed),
        DispatchClass::Failed
    );
    assert_eq!(
        budget.failures_left(),
        1,
        "a transport failure does spend it"
    );
}

// ---- 4. races, lost responses, timeouts, restarts, outages -----------------------------------

#[test]
fn ho_t4_commit_wins_race_with_replacement_control() {
    let mut w = World::new();
    w.start();
    assert!(w.run_txn().is_committed());
    // The replacement control arrives after the commit: old ownership refused.
    assert_eq!(
        w.register_at(SRC),
        Err(RegisterRefusal::NotAssignedHere { assigned: TGT })
    );
    assert!(!w.open());
}

#[test]
fn ho_t4_replacement_wins_race_and_old_transaction_fails_its_recheck() {
    let mut w = World::new();
    w.start();
    // The desktop's replacement control registered first (e.g. through a restarted process).
    let newer = w.register_at(SRC).expect("registration wins");
    let out = w.run_txn();
    assert_eq!(
        out,
        TxnOutcome::AuthorityChanged {
            check: AuthorityCheck::Superseded(AuthorityField::Generation)
        }
    );
    assert_eq!(w.store.authority(HOST), Some(newer), "assignment unchanged");
    assert_eq!(w.store.reservations().count(), 0);
    assert!(!w.open(), "the stale source is retired, not reopened");
    assert!(w.seen.reopened.is_empty());
}

#[test]
fn ho_t4_lost_db_response_reconciles_to_the_commit() {
    let mut w = World::new();
    w.start();
    assert!(w.run_txn_lose_result().is_committed());
    assert!(w.gated(), "a lost result keeps the barrier");
    assert!(w.run_reconcile().is_committed());
    assert!(matches!(
        w.seen.retired.as_slice(),
        [RetireReason::Committed { target: TGT, .. }]
    ));
    assert!(w.seen.reopened.is_empty());
}

#[test]
fn ho_t4_lost_http_response_retry_from_another_director_sees_the_same_operation() {
    let mut w = World::new();
    let req = w.request();
    w.start();
    // Director A's connection dies; director B (restarted) derives the same request.
    let again = HandoffRequest::new(req.source, TGT, 100, req.measurement);
    assert_eq!(again.op_id, req.op_id);
    assert_eq!(
        w.begin(&again),
        Begin::Answered(HandoffReply::InProgress { op_id: req.op_id })
    );
    w.run_txn();
    let Begin::Answered(HandoffReply::Result(r)) = w.begin(&again) else {
        panic!("recorded result expected");
    };
    assert!(r.outcome.is_committed());
    assert_eq!(w.seen.txns.len(), 1, "one transaction only");
}

#[test]
fn ho_t4_timeout_during_transaction_never_reopens_alone() {
    let mut w = World::new();
    w.start();
    for _ in 0..10 {
        w.advance(REQUEST_TIMEOUT_MS + RECONCILE_TIMEOUT_MS + QUARANTINE_RETRY_MS);
        let _ = w.timeout();
        assert!(w.gated(), "no timer reopens admission");
    }
    assert!(w.seen.reopened.is_empty());
    assert!(
        !w.seen.reconciles.is_empty(),
        "timeouts start reconciliation"
    );
    // The original transaction was never run: the reconciliation fences it.
    assert_eq!(
        w.run_reconcile(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    assert!(w.open());
    // A late original commit now fails its re-check.
    let (_, req) = w.last_txn();
    assert!(!w.store.run_transaction(w.now, &req).is_committed());
    assert_eq!(w.store.authority(HOST), Some(w.src.authority()));
}

#[test]
fn ho_t4_duplicate_workers_make_one_migration() {
    let mut w = World::new();
    w.start();
    let (_, req) = w.last_txn();
    let first = w.store.run_transaction(w.now, &req);
    let second = w.store.run_transaction(w.now, &req);
    assert!(first.is_committed());
    assert_eq!(first, second, "the duplicate returns the recorded result");
    assert_eq!(w.store.assignment(HOST).map(|r| r.epoch), Some(Epoch(2)));
    assert_eq!(w.store.reservations().count(), 1);
}

#[test]
fn ho_t4_director_crash_strands_nothing() {
    let mut w = World::new();
    let before = w.store.clone();
    w.start();
    // The director is gone. Nothing was prepared in the store by the request.
    assert_eq!(w.store, before, "no prepare state");
    w.run_txn();
    assert!(matches!(
        w.seen.replies.as_slice(),
        [HandoffReply::Result(_)]
    ));
    assert!(
        w.src.attempt().is_none(),
        "completed without any director input"
    );
}

#[test]
fn ho_t4_source_restart_fences_the_old_transaction() {
    let mut w = World::new();
    w.start();
    let (old_attempt, old_req) = w.last_txn();
    // The source process restarts (new incarnation) before its transaction ran.
    let mut cell = *w.store.cell(SRC).expect("cell");
    cell.incarnation = Incarnation(2);
    let fresh = w
        .store
        .register_control(w.now, HOST, SRC, cell.incarnation, true)
        .expect("restart registers");
    w.src = SourceHandoff::new(source_config(), fresh, true);
    // The old process's transaction runs late: it fails the incarnation re-check.
    let late = w.store.run_transaction(w.now, &old_req);
    assert!(matches!(late, TxnOutcome::AuthorityChanged { .. }));
    // A late callback routed to the new machine changes nothing.
    let d = w
        .src
        .handle_transaction_result(w.now, old_attempt, DurableResult::Done(late));
    assert_eq!(d, Disposition::Ignored(Ignored::NoAttempt));
    assert!(w.open());
    // An old-process registration is refused.
    assert_eq!(
        w.store
            .register_control(w.now, HOST, SRC, Incarnation(1), true),
        Err(RegisterRefusal::StaleIncarnation)
    );
}

#[test]
fn ho_t4_stale_epoch_or_incarnation_is_superseded() {
    let mut w = World::new();
    let cur = w.src.authority();
    w.replace_control().expect("generation 2");
    for (stale, field) in [
        (
            SourceAuthority {
                epoch: Epoch(0),
                ..w.src.authority()
            },
            AuthorityField::Epoch,
        ),
        (
            SourceAuthority {
                incarnation: Incarnation(0),
                ..w.src.authority()
            },
            AuthorityField::Incarnation,
        ),
        (cur, AuthorityField::Generation),
    ] {
        let req = HandoffRequest::new(stale, TGT, 100, good_measurement(w.now));
        assert_eq!(
            w.begin(&req),
            Begin::Answered(HandoffReply::Superseded {
                op_id: req.op_id,
                field
            })
        );
        assert!(matches!(
            w.store.run_transaction(w.now, &req),
            TxnOutcome::AuthorityChanged {
                check: AuthorityCheck::Superseded(_)
            }
        ));
    }
    assert!(w.open());
}

#[test]
fn ho_t4_db_outage_and_recovery() {
    let mut w = World::new();
    w.start();
    w.deliver_txn(DurableResult::StoreUnavailable);
    assert!(matches!(
        w.src.attempt().map(|a| a.phase()),
        Some(Phase::Quarantined { .. })
    ));
    assert_eq!(w.seen.quarantined.len(), 1);
    // Outage goes on: retries reconcile, stay gated.
    for _ in 0..3 {
        w.advance(QUARANTINE_RETRY_MS);
        w.timeout();
        w.deliver_reconcile(DurableResult::StoreUnavailable);
        assert!(w.gated());
    }
    // Recovery: the reconciliation runs under the lock.
    w.advance(QUARANTINE_RETRY_MS);
    w.timeout();
    let out = w.run_reconcile();
    assert_eq!(
        out,
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    assert!(w.open());
    assert_eq!(w.seen.reopened.len(), 1);
}

// ---- 7. emergency drain / auth refusal during the handoff --------------------------------------

#[test]
fn ho_t7_emergency_drain_during_handoff_never_reopens() {
    let mut w = World::new();
    w.start();
    w.src.handle_emergency_drain(w.now, DrainReason::Emergency);
    w.drain();
    // The drain fence joins the host-lock serialisation before the transaction runs.
    assert!(matches!(
        w.apply_fences().as_slice(),
        [DrainWrite::Fenced { .. }]
    ));
    assert!(matches!(w.run_txn(), TxnOutcome::AuthorityChanged { .. }));
    assert!(!w.open());
    assert!(w.seen.reopened.is_empty());
    assert_eq!(
        w.src.handle_acquire(WorkKind::Accept),
        Err(AdmissionRefusal::SourceDraining)
    );
}

#[test]
fn ho_t7_auth_refusal_after_commit_follows_the_commit() {
    let mut w = World::new();
    w.start();
    let (_, req) = w.last_txn();
    // The transaction commits in the store, the result is not back yet.
    assert!(w.store.run_transaction(w.now, &req).is_committed());
    w.src
        .handle_emergency_drain(w.now, DrainReason::AuthRefused);
    w.drain();
    assert!(matches!(
        w.apply_fences().as_slice(),
        [DrainWrite::AlreadyMoved { assigned: TGT }]
    ));
    w.deliver_txn(DurableResult::Ambiguous(Ambiguity::TransportError));
    assert!(w.run_reconcile().is_committed());
    assert!(matches!(
        w.seen.retired.as_slice(),
        [RetireReason::Committed { .. }]
    ));
    assert!(w.seen.reopened.is_empty());
    assert!(!w.open());
}

#[test]
fn ho_t7_hard_drain_behaviour_is_unchanged() {
    let mut w = World::new();
    let client = w.src.handle_acquire(WorkKind::ClientConn).expect("client");
    w.src.handle_emergency_drain(w.now, DrainReason::Emergency);
    w.drain();
    // The core only closes admission and fences; it closes no client (the adapter's hard
    // drain does, with its own deadlines) and starts no retire of its own.
    assert_eq!(w.seen.fences.len(), 1);
    assert!(w.seen.retired.is_empty() && w.seen.reopened.is_empty());
    assert_eq!(w.src.gate().counters().client_conns, 1);
    assert_eq!(
        w.src.handle_revalidate(client),
        Revalidation::Abandon {
            reason: AbandonReason::SourceDraining,
            release: ReleaseReport::Released
        }
    );
    let req = w.request();
    assert_eq!(
        w.begin(&req),
        Begin::Answered(HandoffReply::Refused {
            op_id: req.op_id,
            reason: HandoffRefusal::SourceDraining
        })
    );
}
