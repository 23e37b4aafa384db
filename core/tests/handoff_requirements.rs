//! One or more tests per HO requirement; each name carries its ID (`ho_s3_…` for HO-S3).

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

fn director() -> DirectorPolicy {
    DirectorPolicy {
        enabled: true,
        cohort_percent: 100,
        policy: policy_config(),
    }
}

fn view(now: MonoMs) -> (CandidateView, TargetView) {
    let (_, auth) = new_store();
    (
        CandidateView {
            authority: auth,
            source_cell_capable: true,
            desktop_capable: true,
            measurement: Some((TGT, good_measurement(now))),
            cooldown_until: None,
        },
        TargetView {
            cell: TGT,
            capable: true,
            load: 3,
            capacity: 10,
        },
    )
}

fn eval(now: MonoMs, c: &CandidateView, t: &TargetView) -> Result<HandoffRequest, Ineligible> {
    evaluate(now, &director(), c, Some(t))
}

fn refused(w: &mut World, req: &HandoffRequest) -> HandoffRefusal {
    match w.begin(req) {
        Begin::Answered(HandoffReply::Refused { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

// ---- HO-1 -----------------------------------------------------------------------------------

#[test]
fn ho_1_a_persistent_client_defers_the_move_forever() {
    let mut w = World::new();
    let _client = w.src.handle_acquire(WorkKind::ClientConn).expect("client");
    for _ in 0..200 {
        w.advance(3_600_000);
        let req = w.request();
        assert!(matches!(
            w.begin(&req),
            Begin::Answered(HandoffReply::Busy { .. })
        ));
    }
    assert!(w.open());
    assert!(
        w.seen.log.is_empty(),
        "no action: nothing closed, nothing run"
    );
}

#[test]
fn ho_1_retire_only_happens_over_zero_tickets() {
    // The only closing output follows a barrier, which only stands over zero tickets.
    let mut w = World::new();
    let t = w.src.handle_acquire(WorkKind::Splice).expect("splice");
    let req = w.request();
    let _ = w.begin(&req);
    assert!(w.seen.retired.is_empty());
    assert_eq!(w.src.handle_release(t), ReleaseReport::Released);
    w.start();
    assert_eq!(w.src.gate().counters().total(), 0);
    w.run_txn();
    assert_eq!(w.seen.retired.len(), 1);
}

// ---- HO-2 -----------------------------------------------------------------------------------

#[test]
fn ho_2_open_desktop_control_is_no_reason_to_wait() {
    let mut w = World::new();
    assert!(w.src.session_open(), "desktop control stays open");
    let last = w.src.handle_acquire(WorkKind::ClientConn).expect("phone");
    let _ = w.src.handle_heartbeat(Heartbeat::Ping);
    assert_eq!(w.src.handle_release(last), ReleaseReport::Released);
    // 1 ms after the last client left (no 30 s background grace): the move may start.
    w.advance(1);
    assert!(matches!(w.begin(&w.request()), Begin::Started(_)));
}

#[test]
fn ho_2_idleness_is_the_real_connection_state_at_the_same_instant() {
    let mut w = World::new();
    let c = w.src.handle_acquire(WorkKind::ClientConn).expect("client");
    assert!(!w.src.gate().is_idle());
    assert_eq!(w.src.handle_release(c), ReleaseReport::Released);
    assert!(
        w.src.gate().is_idle(),
        "no timer between release and idleness"
    );
}

// ---- HO-3 -----------------------------------------------------------------------------------

#[test]
fn ho_3_improvement_needs_25_ms_and_20_percent() {
    assert_eq!(
        check_improvement(125, 100),
        Ok(()),
        "25 ms and exactly 20 %"
    );
    assert_eq!(
        check_improvement(120, 96),
        Err(Ineligible::ImprovementBelowMs)
    );
    assert_eq!(
        check_improvement(200, 170),
        Err(Ineligible::ImprovementBelowPercent),
        "30 ms but 15 %"
    );
    assert_eq!(
        check_improvement(126, 101),
        Err(Ineligible::ImprovementBelowPercent)
    );
    assert_eq!(
        check_improvement(60, 120),
        Err(Ineligible::ImprovementBelowMs)
    );
    let now = MonoMs(10_000);
    let (mut c, t) = view(now);
    c.measurement = Some((
        TGT,
        Measurement {
            measured_at: now,
            current_rtt_ms: 200,
            target_rtt_ms: 170,
        },
    ));
    assert_eq!(eval(now, &c, &t), Err(Ineligible::ImprovementBelowPercent));
}

#[test]
fn ho_3_measurement_must_be_fresh() {
    let now = MonoMs(1_000_000);
    let (mut c, t) = view(now);
    c.measurement = Some((
        TGT,
        Measurement {
            measured_at: MonoMs(now.0 - FRESHNESS_MS),
            ..good_measurement(now)
        },
    ));
    assert!(eval(now, &c, &t).is_ok(), "exactly at the window is fresh");
    c.measurement = Some((
        TGT,
        Measurement {
            measured_at: MonoMs(now.0 - FRESHNESS_MS - 1),
            ..good_measurement(now)
        },
    ));
    assert_eq!(eval(now, &c, &t), Err(Ineligible::StaleMeasurement));
    c.measurement = None;
    assert_eq!(eval(now, &c, &t), Err(Ineligible::NoMeasurement));
}

#[test]
fn ho_3_cohort_bucket_and_percentage_from_the_command() {
    let inside = host_with_bucket(|b| b < 50);
    let outside = host_with_bucket(|b| b >= 50);
    assert_eq!(check_cohort(inside, 50), Ok(()));
    assert_eq!(check_cohort(outside, 50), Err(Ineligible::NotInCohort));
    assert_eq!(check_cohort(inside, 0), Err(Ineligible::NotInCohort));
    assert_eq!(check_cohort(outside, 100), Ok(()));
    assert_eq!(
        check_cohort(inside, 101),
        Err(Ineligible::InvalidCohortPercent)
    );
    // Buckets are deterministic and spread over 0..100.
    let buckets: std::collections::BTreeSet<u8> =
        (0..2_000).map(|h| cohort_bucket(HostId(h))).collect();
    assert_eq!(buckets.len(), 100);
    assert_eq!(cohort_bucket(HostId(42)), cohort_bucket(HostId(42)));
    // The store transaction re-checks with the percentage carried in the command.
    let mut w = World::new();
    let pct = cohort_bucket(HOST); // HOST's bucket is not < its own value
    let req = HandoffRequest::new(w.src.authority(), TGT, pct, good_measurement(w.now));
    w.begin(&req);
    assert_eq!(
        w.run_txn(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::NotInCohort)
        }
    );
}

#[test]
fn ho_3_switch_capacity_cooldown_each_name_their_reason() {
    let now = MonoMs(1_000_000);
    let (c, t) = view(now);
    assert!(eval(now, &c, &t).is_ok());
    let off = DirectorPolicy {
        enabled: false,
        ..director()
    };
    assert_eq!(evaluate(now, &off, &c, Some(&t)), Err(Ineligible::Disabled));
    let full = TargetView { load: 10, ..t };
    assert_eq!(eval(now, &c, &full), Err(Ineligible::TargetAtCapacity));
    let cooling = CandidateView {
        cooldown_until: Some(now.plus_ms(1)),
        ..c
    };
    assert_eq!(eval(now, &cooling, &t), Err(Ineligible::CoolingDown));
    let cooled = CandidateView {
        cooldown_until: Some(now),
        ..c
    };
    assert!(eval(now, &cooled, &t).is_ok());
    let same = CandidateView {
        measurement: Some((SRC, good_measurement(now))),
        ..c
    };
    assert_eq!(eval(now, &same, &t), Err(Ineligible::SameCell));
    assert_eq!(
        evaluate(now, &director(), &c, None),
        Err(Ineligible::UnknownTarget)
    );
}

#[test]
fn ho_3_store_transaction_rechecks_the_policy() {
    let mut w = World::new();
    let mut req = w.request();
    req.measurement.measured_at = MonoMs(w.now.0 - FRESHNESS_MS - 1);
    w.begin(&req);
    assert_eq!(
        w.run_txn(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::StaleMeasurement)
        }
    );
    assert!(w.open());
}

// ---- HO-7 -----------------------------------------------------------------------------------

#[test]
fn ho_7_each_of_the_five_counters_blocks_the_barrier() {
    for kind in WorkKind::ALL {
        let mut w = World::new();
        let t = w.src.handle_acquire(kind).expect("ticket");
        let req = w.request();
        match w.begin(&req) {
            Begin::Answered(HandoffReply::Busy { counters, .. }) => {
                assert_eq!(counters.busy_kinds(), vec![kind]);
                assert_eq!(counters.get(kind), 1);
            }
            other => panic!("{kind:?}: expected Busy, got {other:?}"),
        }
        assert_eq!(w.src.handle_release(t), ReleaseReport::Released);
        assert!(matches!(w.begin(&req), Begin::Started(_)), "{kind:?}");
    }
}

#[test]
fn ho_7_double_unknown_and_stale_releases_are_reported_noops() {
    let mut w = World::new();
    let a = w.src.handle_acquire(WorkKind::Accept).expect("a");
    let b = w.src.handle_acquire(WorkKind::Accept).expect("b");
    assert_eq!(w.src.handle_release(a), ReleaseReport::Released);
    assert_eq!(w.src.handle_release(a), ReleaseReport::DoubleRelease);
    let forged = Ticket {
        id: TicketId(999),
        ..b
    };
    assert_eq!(w.src.handle_release(forged), ReleaseReport::UnknownTicket);
    let stale = Ticket {
        generation: Generation(0),
        ..b
    };
    assert_eq!(w.src.handle_release(stale), ReleaseReport::StaleGeneration);
    let wrong_kind = Ticket {
        kind: WorkKind::Splice,
        ..b
    };
    assert_eq!(
        w.src.handle_release(wrong_kind),
        ReleaseReport::UnknownTicket
    );
    // b is still owned and counted once.
    assert_eq!(w.src.gate().counters().accepts, 1);
    assert_eq!(w.src.handle_release(b), ReleaseReport::Released);
    assert_eq!(w.src.gate().counters(), QuiescenceCounters::default());
    assert_eq!(w.src.handle_release(b), ReleaseReport::DoubleRelease);
    assert_eq!(
        w.src.gate().counters(),
        QuiescenceCounters::default(),
        "never negative"
    );
}

#[test]
fn ho_7_old_generation_work_still_counts_until_released() {
    let mut w = World::new();
    let old = w.src.handle_acquire(WorkKind::Splice).expect("splice");
    w.replace_control().expect("replacement");
    // A real splice of the old session is still work at this source.
    let req = w.request();
    assert!(matches!(
        w.begin(&req),
        Begin::Answered(HandoffReply::Busy { .. })
    ));
    assert_eq!(w.src.handle_release(old), ReleaseReport::Released);
    assert!(matches!(w.begin(&req), Begin::Started(_)));
}

// ---- HO-8 / HO-10 -----------------------------------------------------------------------------

#[test]
fn ho_8_heartbeats_and_activity_renewals_never_count() {
    let mut w = World::new();
    for hb in [Heartbeat::Ping, Heartbeat::Pong, Heartbeat::ActivityRenewal] {
        for _ in 0..100 {
            assert_eq!(w.src.handle_heartbeat(hb), NotCounted::NotClientWork);
        }
    }
    assert_eq!(w.src.gate().counters(), QuiescenceCounters::default());
    assert!(matches!(w.begin(&w.request()), Begin::Started(_)));
    // Under the barrier, heartbeats keep flowing and change nothing.
    let before = w.src.clone();
    let _ = w.src.handle_heartbeat(Heartbeat::Ping);
    assert_eq!(w.src, before);
}

#[test]
fn ho_10_db_activity_lease_never_proves_idleness() {
    let mut w = World::new();
    let splice = w.src.handle_acquire(WorkKind::Splice).expect("splice");
    for lease in [
        ActivityLease::Missing,
        ActivityLease::Expired {
            expired_at: MonoMs(1),
        },
    ] {
        assert_eq!(
            w.src.handle_activity_lease(lease),
            NotCounted::NotIdlenessEvidence
        );
        let req = w.request();
        assert!(matches!(
            w.begin(&req),
            Begin::Answered(HandoffReply::Busy { .. })
        ));
    }
    assert_eq!(w.src.handle_release(splice), ReleaseReport::Released);
    // Nor does a live lease (a healthy control lease) make an idle source busy.
    let _ = w.src.handle_activity_lease(ActivityLease::Live {
        until: w.now.plus_ms(60_000),
    });
    assert!(matches!(w.begin(&w.request()), Begin::Started(_)));
}

// ---- HO-S1 ------------------------------------------------------------------------------------

#[test]
fn ho_s1_op_id_is_uuidv5_of_exact_authority_and_target() {
    let auth = new_store().1;
    let id = OpId::derive(&auth, TGT);
    assert_eq!(id.0.get_version_num(), 5);
    assert_eq!(
        id,
        OpId::derive(&auth, TGT),
        "director retries/restarts reuse it"
    );
    let variants = [
        SourceAuthority {
            cell: CellId(9),
            ..auth
        },
        SourceAuthority {
            host: HostId(8),
            ..auth
        },
        SourceAuthority {
            epoch: Epoch(2),
            ..auth
        },
        SourceAuthority {
            incarnation: Incarnation(2),
            ..auth
        },
        SourceAuthority {
            generation: Generation(2),
            ..auth
        },
    ];
    for v in variants {
        assert_ne!(OpId::derive(&v, TGT), id, "{v:?}");
    }
    assert_ne!(OpId::derive(&auth, OLD), id);
    // Pinned: a change of namespace or layout would break cross-version retries.
    assert_eq!(
        OpId::derive(&auth, TGT),
        OpId(uuid::Uuid::new_v5(
            &OP_ID_NAMESPACE,
            &[
                1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2
            ]
        ))
    );
}

#[test]
fn ho_s1_selection_is_read_only_and_redelivery_reuses_the_id() {
    let mut w = World::new();
    let before = w.store.clone();
    let now = w.now;
    let (c, t) = view(now);
    let first = eval(now, &c, &t).expect("eligible");
    let again = eval(now.plus_ms(10), &c, &t).expect("eligible");
    assert_eq!(first.op_id, again.op_id);
    assert_eq!(
        first.source,
        w.src.authority(),
        "expected exact authority carried"
    );
    assert_eq!(w.store, before, "selection reserves and changes nothing");
    // The request is accepted by the source as is.
    assert!(matches!(w.begin(&first), Begin::Started(_)));
    // A later legitimate move (after a commit) gets a new id.
    w.run_txn();
    let moved = w.store.authority(HOST).expect("host");
    assert_ne!(OpId::derive(&moved, SRC), first.op_id);
}

#[test]
fn ho_s1_older_epoch_is_superseded_not_a_duplicate() {
    let mut w = World::new();
    w.start();
    w.run_txn(); // committed: epoch 2 at TGT
    let mut target_src = SourceHandoff::new(
        source_config(),
        w.register_at(TGT).expect("registered at target"),
        true,
    );
    // A director still holding epoch 1 asks the new source for another move.
    let stale = HandoffRequest::new(
        SourceAuthority {
            cell: TGT,
            epoch: Epoch(1),
            ..target_src.authority()
        },
        OLD,
        100,
        good_measurement(w.now),
    );
    assert_eq!(
        target_src.handle_request(w.now, &stale),
        Begin::Answered(HandoffReply::Superseded {
            op_id: stale.op_id,
            field: AuthorityField::Epoch
        })
    );
}

#[test]
fn ho_s1_forged_op_id_is_refused() {
    let mut w = World::new();
    let mut req = w.request();
    req.op_id = OpId::derive(&req.source, OLD);
    assert_eq!(refused(&mut w, &req), HandoffRefusal::InvalidOpId);
    assert_eq!(
        w.store.run_transaction(w.now, &req),
        TxnOutcome::RolledBack {
            reason: AbortReason::InvalidOpId
        }
    );
}

// ---- HO-S2 ------------------------------------------------------------------------------------

#[test]
fn ho_s2_busy_names_the_nonzero_counters_and_holds_nothing() {
    let mut w = World::new();
    let _a = w.src.handle_acquire(WorkKind::Accept).expect("a");
    let _p = w.src.handle_acquire(WorkKind::PendingConn).expect("p");
    let _p2 = w.src.handle_acquire(WorkKind::PendingConn).expect("p2");
    let req = w.request();
    let before = w.src.gate().clone();
    match w.begin(&req) {
        Begin::Answered(HandoffReply::Busy { op_id, counters }) => {
            assert_eq!(op_id, req.op_id);
            assert_eq!(
                counters.busy_kinds(),
                vec![WorkKind::Accept, WorkKind::PendingConn]
            );
            assert_eq!(counters.pending_conns, 2);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.src.gate(), &before, "busy changed nothing");
    assert_eq!(w.src.pending_actions(), 0);
}

#[test]
fn ho_s2_begin_installs_the_barrier_in_one_step() {
    let mut w = World::new();
    let a = w.start();
    let barrier = w.src.gate().barrier().expect("barrier");
    assert_eq!((barrier.op_id, barrier.seq), (a.op_id, a.seq));
    assert_eq!(barrier.generation, w.src.authority().generation);
    assert_eq!(
        w.seen.txns.len(),
        1,
        "the transaction is asked in the same step"
    );
    assert_eq!(
        w.src.handle_acquire(WorkKind::Accept),
        Err(AdmissionRefusal::WrongCell)
    );
}

/// Candidate rows for hosts `0..n`, each otherwise the same eligible view.
fn rows_for_hosts(now: MonoMs, n: u64) -> Vec<CandidateRow> {
    let (c, t) = view(now);
    (0..n)
        .map(|h| CandidateRow {
            candidate: CandidateView {
                authority: SourceAuthority {
                    host: HostId(h),
                    ..c.authority
                },
                ..c
            },
            target: Some(t),
        })
        .collect()
}

/// The rows a store answers for a keyset page query, from `rows` sorted by host.
fn page_of(rows: &[CandidateRow], q: PageQuery) -> Vec<CandidateRow> {
    rows.iter()
        .filter(|r| q.contains(r.candidate.authority.host))
        .take(usize::try_from(q.limit).expect("limit"))
        .copied()
        .collect()
}

#[test]
fn ho_s2_rotating_cursor_moves_past_busy_hosts() {
    let now = MonoMs(5_000);
    let rows = rows_for_hosts(now, 4);
    let limits = ScanLimits {
        page_size: 4,
        max_pages: 1,
        max_dispatch: 1,
    };
    let mut cursor = PageCursor::default();
    let mut order = Vec::new();
    for _ in 0..5 {
        let mut p = SelectionPass::begin(cursor, limits).expect("limits");
        let q = p.poll_query().expect("query");
        assert_eq!(
            q.after, cursor.after,
            "each pass starts at the saved cursor"
        );
        for d in p.handle_page(now, &director(), &page_of(&rows, q)) {
            if d.verdict.is_ok() {
                order.push(d.host.0);
            }
        }
        cursor = p.cursor();
    }
    assert_eq!(
        order,
        vec![0, 1, 2, 3, 0],
        "each pass starts after the last dispatch"
    );
}

#[test]
fn ho_s2_busy_is_a_deferral_not_a_dispatch_failure() {
    let mut budget = DispatchBudget::new(1);
    let op_id = OpId::derive(&new_store().1, TGT);
    let busy = DispatchOutcome::Answered(HandoffReply::Busy {
        op_id,
        counters: QuiescenceCounters {
            splices: 1,
            ..QuiescenceCounters::default()
        },
    });
    for _ in 0..10 {
        assert_eq!(budget.handle_outcome(&busy), DispatchClass::Deferred);
    }
    assert_eq!(budget.failures_left(), 1);
    assert_eq!(
        budget.handle_outcome(&DispatchOutcome::TransportFailed),
        DispatchClass::Failed
    );
    assert!(budget.exhausted());
}

// ---- HO-S3 ------------------------------------------------------------------------------------

#[test]
fn ho_s3_new_client_under_barrier_gets_wrong_cell() {
    let mut w = World::new();
    w.start();
    for kind in [
        WorkKind::Accept,
        WorkKind::ClientConn,
        WorkKind::Splice,
        WorkKind::PendingConn,
    ] {
        let r = w.src.handle_acquire(kind).expect_err("gated");
        assert_eq!(r, AdmissionRefusal::WrongCell);
        assert_eq!(r.close_code(), Some(WRONG_CELL_CLOSE_CODE));
    }
    assert_eq!(WRONG_CELL_CLOSE_CODE, 4409);
}

#[test]
fn ho_s3_control_activation_and_rebind_refused_under_barrier() {
    let mut w = World::new();
    let held = w.src.handle_acquire(WorkKind::ControlOp).expect("before");
    assert_eq!(w.src.handle_release(held), ReleaseReport::Released);
    w.start();
    assert_eq!(
        w.src.handle_acquire(WorkKind::ControlOp),
        Err(AdmissionRefusal::ControlGated)
    );
    let newer = SourceAuthority {
        generation: Generation(5),
        ..w.src.authority()
    };
    assert_eq!(
        w.src.handle_rebind(w.now, held, newer, true),
        Err(RebindRefusal::Gated)
    );
    assert_eq!(w.src.authority().generation, Generation(1));
}

#[test]
fn ho_s3_no_timer_reopens_admission() {
    let mut w = World::new();
    w.start();
    let mut t = w.now;
    for step in 0..50u64 {
        t = t.plus_ms(1_000 * step);
        let _ = w.src.handle_timeout(t);
        w.drain();
        assert!(w.gated(), "step {step}");
    }
    assert!(w.seen.reopened.is_empty());
    assert!(w.seen.replies.is_empty());
}

#[test]
fn ho_s3_late_continuation_rechecks_and_releases_what_it_abandons() {
    let mut w = World::new();
    let pending = w
        .src
        .handle_acquire(WorkKind::PendingConn)
        .expect("pending");
    assert_eq!(w.src.handle_revalidate(pending), Revalidation::Continue);
    w.replace_control().expect("replacement");
    assert_eq!(
        w.src.handle_revalidate(pending),
        Revalidation::Abandon {
            reason: AbandonReason::SessionReplaced,
            release: ReleaseReport::Released
        }
    );
    assert_eq!(w.src.gate().counters(), QuiescenceCounters::default());
    // Asking again is harmless.
    assert!(matches!(
        w.src.handle_revalidate(pending),
        Revalidation::Abandon {
            reason: AbandonReason::TicketNotLive,
            ..
        }
    ));
}

// ---- HO-S4 ------------------------------------------------------------------------------------

#[test]
fn ho_s4_commit_reserves_moves_and_records_atomically() {
    let mut w = World::new();
    w.start();
    let (_, req) = w.last_txn();
    let out = w.run_txn();
    assert_eq!(
        out,
        TxnOutcome::Committed {
            target: TGT,
            new_epoch: Epoch(2)
        }
    );
    let row = w.store.assignment(HOST).expect("row");
    assert_eq!((row.cell, row.epoch), (TGT, Epoch(2)));
    let res = w.store.reservation(req.op_id).expect("reservation");
    assert_eq!((res.host, res.cell), (HOST, TGT));
    let attempt = w.store.attempt(req.op_id).expect("attempt");
    assert_eq!(attempt.source, req.source);
    assert!(matches!(attempt.outcome, AttemptOutcome::Committed { .. }));
    assert_eq!(
        w.store.cooldown_until(HOST),
        Some(w.now.plus_ms(COOLDOWN_MS))
    );
    assert_eq!(w.store.rate().commits, 1);
    assert_eq!(w.store.check_invariants(), Ok(()));
}

#[test]
fn ho_s4_exact_authority_is_rechecked_and_a_miss_writes_nothing() {
    let (store, auth) = new_store();
    let now = MonoMs(1_000);
    for claim in [
        SourceAuthority { cell: TGT, ..auth },
        SourceAuthority {
            epoch: Epoch(2),
            ..auth
        },
        SourceAuthority {
            incarnation: Incarnation(0),
            ..auth
        },
        SourceAuthority {
            generation: Generation(2),
            ..auth
        },
    ] {
        let mut s = store.clone();
        let req = HandoffRequest::new(claim, OLD, 100, good_measurement(now));
        assert!(matches!(
            s.run_transaction(now, &req),
            TxnOutcome::AuthorityChanged { .. }
        ));
        assert_eq!(s, store, "{claim:?}: nothing written");
    }
}

#[test]
fn ho_s4_limits_roll_back_without_writes() {
    let now = MonoMs(1_000_000);
    let (base, auth) = new_store();
    let req = HandoffRequest::new(auth, TGT, 100, good_measurement(now));
    // capacity
    let mut s = base.clone();
    s.upsert_cell(TGT, cell_row(0, true)).expect("cell");
    let snapshot = s.clone();
    assert_eq!(
        s.run_transaction(now, &req),
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::TargetAtCapacity)
        }
    );
    assert_eq!(s, snapshot);
    // concurrency: 4 other hosts mid-migration
    let mut s = base.clone();
    for h in 100..104 {
        let a = s.insert_host(HostId(h), SRC, true).expect("host");
        let r = HandoffRequest::new(a, TGT, 100, good_measurement(now));
        assert!(s.run_transaction(now, &r).is_committed());
    }
    let snapshot = s.clone();
    assert_eq!(
        s.run_transaction(now, &req),
        TxnOutcome::RolledBack {
            reason: AbortReason::ConcurrencyLimited
        }
    );
    assert_eq!(s, snapshot);
    // rate: registrations free the concurrency slots, the window still counts the commits
    let mut cfg = store_config();
    cfg.max_commits_per_window = 2;
    let mut s = AssignmentStore::new(cfg);
    s.upsert_cell(SRC, cell_row(10, true)).expect("cell");
    s.upsert_cell(TGT, cell_row(10, true)).expect("cell");
    let auth = s.insert_host(HOST, SRC, true).expect("host");
    for h in 100..102 {
        let a = s.insert_host(HostId(h), SRC, true).expect("host");
        let r = HandoffRequest::new(a, TGT, 100, good_measurement(now));
        assert!(s.run_transaction(now, &r).is_committed());
    }
    let req = HandoffRequest::new(auth, TGT, 100, good_measurement(now));
    assert_eq!(
        s.run_transaction(now, &req),
        TxnOutcome::RolledBack {
            reason: AbortReason::RateLimited
        }
    );
    let later = now.plus_ms(60_000);
    let req = HandoffRequest::new(auth, TGT, 100, good_measurement(later));
    assert!(s.run_transaction(later, &req).is_committed(), "next window");
}

#[test]
fn ho_s4_cooldown_blocks_the_next_move_of_the_host() {
    let mut w = World::new();
    w.start();
    w.run_txn();
    let at_target = w.register_at(TGT).expect("registered");
    let req = HandoffRequest::new(at_target, SRC, 100, good_measurement(w.now));
    assert_eq!(
        w.store.run_transaction(w.now, &req),
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::CoolingDown)
        }
    );
    let later = w.now.plus_ms(COOLDOWN_MS);
    let req = HandoffRequest::new(at_target, SRC, 100, good_measurement(later));
    assert!(w.store.run_transaction(later, &req).is_committed());
}

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
        w.src.attempt().map(|a| a.phase),
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

// ---- HO-A5 ------------------------------------------------------------------------------------

#[test]
fn ho_a5_drained_source_never_reopens_even_on_explicit_rollback() {
    let mut w = World::new();
    w.start();
    w.src.handle_emergency_drain(w.now, DrainReason::Emergency);
    w.drain();
    // The transaction rolls back for its own reason before the fence lands.
    w.store.upsert_cell(TGT, cell_row(0, true)).expect("full");
    assert!(matches!(w.run_txn(), TxnOutcome::RolledBack { .. }));
    assert!(w.seen.reopened.is_empty());
    assert_eq!(
        w.src.gate().state(),
        GateState::Closed(ClosedReason::Drained)
    );
}

#[test]
fn ho_a5_committed_handoff_follows_its_result_after_drain() {
    let mut w = World::new();
    let a = w.start();
    w.src
        .handle_emergency_drain(w.now, DrainReason::AuthRefused);
    w.drain();
    assert!(
        w.run_txn().is_committed(),
        "commit reached the DB before the fence"
    );
    assert!(matches!(
        w.apply_fences().as_slice(),
        [DrainWrite::AlreadyMoved { .. }]
    ));
    assert_eq!(
        w.seen.retired,
        vec![RetireReason::Committed {
            op_id: a.op_id,
            target: TGT
        }]
    );
    assert!(w.seen.reopened.is_empty());
}

#[test]
fn ho_a5_disabling_stops_new_attempts_in_flight_ones_still_reconcile() {
    let mut w = World::new();
    w.start();
    w.src.handle_set_enabled(w.now, false);
    w.store.set_enabled(false);
    w.run_txn_lose_result(); // disabled store: rolled back, result lost
    assert!(w.gated());
    assert!(matches!(
        w.run_reconcile(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    ));
    assert!(w.open(), "in-flight attempt reconciled to its end");
    // New attempts are refused while disabled.
    let other = w.request_to(OLD);
    assert_eq!(refused(&mut w, &other), HandoffRefusal::Disabled);
    let director = DirectorPolicy {
        enabled: false,
        ..DirectorPolicy {
            enabled: true,
            cohort_percent: 100,
            policy: policy_config(),
        }
    };
    let (c, t) = view(w.now);
    assert_eq!(
        evaluate(w.now, &director, &c, Some(&t)),
        Err(Ineligible::Disabled)
    );
}

#[test]
fn ho_a5_drain_fence_makes_a_pending_transaction_fail() {
    let mut w = World::new();
    w.start();
    w.src.handle_emergency_drain(w.now, DrainReason::Emergency);
    w.drain();
    let fenced = w.apply_fences();
    assert!(matches!(fenced.as_slice(), [DrainWrite::Fenced { .. }]));
    assert!(matches!(w.run_txn(), TxnOutcome::AuthorityChanged { .. }));
    assert_eq!(w.store.assignment(HOST).map(|r| r.cell), Some(SRC));
    assert!(
        w.seen.retired.is_empty(),
        "the hard drain retires; no second path"
    );
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

// ---- HO-C1 ------------------------------------------------------------------------------------

#[test]
fn ho_c1_participant_without_the_capability_is_skipped() {
    let now = MonoMs(1_000_000);
    let (c, t) = view(now);
    let no_src = CandidateView {
        source_cell_capable: false,
        ..c
    };
    assert_eq!(
        eval(now, &no_src, &t),
        Err(Ineligible::SourceCellNotCapable)
    );
    let no_desk = CandidateView {
        desktop_capable: false,
        ..c
    };
    assert_eq!(eval(now, &no_desk, &t), Err(Ineligible::DesktopNotCapable));
    let no_tgt = TargetView {
        capable: false,
        ..t
    };
    assert_eq!(
        eval(now, &c, &no_tgt),
        Err(Ineligible::TargetCellNotCapable)
    );
    // The source refuses without its own or the desktop's capability.
    let (_, auth) = new_store();
    let mut src = SourceHandoff::new(source_config(), auth, false);
    let req = HandoffRequest::new(auth, TGT, 100, good_measurement(now));
    assert_eq!(
        src.handle_request(now, &req),
        Begin::Answered(HandoffReply::Refused {
            op_id: req.op_id,
            reason: HandoffRefusal::CapabilityMissing(Ineligible::DesktopNotCapable)
        })
    );
    let cfg = SourceConfig {
        cell_capable: false,
        ..source_config()
    };
    let mut src = SourceHandoff::new(cfg, auth, true);
    assert!(matches!(
        src.handle_request(now, &req),
        Begin::Answered(HandoffReply::Refused {
            reason: HandoffRefusal::CapabilityMissing(Ineligible::SourceCellNotCapable),
            ..
        })
    ));
    // The store transaction re-checks the target's capability.
    let mut w = World::new();
    let req = w.request_to(OLD);
    w.begin(&req);
    assert_eq!(
        w.run_txn(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::TargetCellNotCapable)
        }
    );
}

// ---- state types are data (model checker / trace replayer) ------------------------------------

#[test]
fn ho_s4_state_and_rows_round_trip_through_serde() {
    let mut w = World::new();
    let _t = w.src.handle_acquire(WorkKind::Splice).expect("splice");
    let req = w.request();
    let _ = w.begin(&req);
    let mut w2 = World::new();
    w2.start();
    w2.run_txn();
    let src: SourceHandoff =
        serde_json::from_str(&serde_json::to_string(&w.src).expect("ser")).expect("de");
    assert_eq!(src, w.src);
    let store: AssignmentStore =
        serde_json::from_str(&serde_json::to_string(&w2.store).expect("ser")).expect("de");
    assert_eq!(store, w2.store);
    let log: Vec<HandoffAction> =
        serde_json::from_str(&serde_json::to_string(&w2.seen.log).expect("ser")).expect("de");
    assert_eq!(log, w2.seen.log);
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
    assert_eq!(w.src.attempt().map(|a| a.attempt), Some(attempt));
    assert!(w.gated());
    // The same while the reconciliation of a lost result runs, and in quarantine.
    w.run_txn_lose_result();
    assert!(matches!(
        w.src.attempt().map(|a| a.phase),
        Some(Phase::Reconciling { .. })
    ));
    assert_eq!(w.timeout(), Disposition::Ignored(Ignored::NotAwaited));
    assert!(matches!(
        w.src.attempt().map(|a| a.phase),
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
fn ho_s2_scan_limits_accept_their_maxima_and_refuse_zero_and_beyond() {
    let max = ScanLimits {
        page_size: MAX_PAGE_SIZE,
        max_pages: MAX_PAGES_PER_PASS,
        max_dispatch: MAX_DISPATCH_PER_PASS,
    };
    assert_eq!(max.validate(), Ok(()));
    for (limits, error) in [
        (
            ScanLimits {
                page_size: 0,
                ..max
            },
            ScanLimitsError::PageSize,
        ),
        (
            ScanLimits {
                page_size: MAX_PAGE_SIZE + 1,
                ..max
            },
            ScanLimitsError::PageSize,
        ),
        (
            ScanLimits {
                max_pages: 0,
                ..max
            },
            ScanLimitsError::MaxPages,
        ),
        (
            ScanLimits {
                max_pages: MAX_PAGES_PER_PASS + 1,
                ..max
            },
            ScanLimitsError::MaxPages,
        ),
        (
            ScanLimits {
                max_dispatch: 0,
                ..max
            },
            ScanLimitsError::MaxDispatch,
        ),
        (
            ScanLimits {
                max_dispatch: MAX_DISPATCH_PER_PASS + 1,
                ..max
            },
            ScanLimitsError::MaxDispatch,
        ),
    ] {
        assert_eq!(limits.validate(), Err(error), "{limits:?}");
    }
}

/// SEC-3: the reference store holds at most `StoreBounds::max_cells` cells (SCALE-1); replacing a row at the
/// bound is still allowed.
#[test]
fn sec_3_the_store_refuses_a_cell_beyond_its_bound_and_still_replaces_rows() {
    let (mut store, _) = new_store();
    let mut id = 10_000;
    while store.upsert_cell(CellId(id), cell_row(10, true)).is_ok() {
        id += 1;
        assert!(
            id < 10_000 + 2 * switchyard_core::handoff::store::DEFAULT_MAX_CELLS as u32,
            "no bound"
        );
    }
    assert_eq!(
        store.upsert_cell(CellId(id), cell_row(10, true)),
        Err(StoreError::TooManyCells)
    );
    assert_eq!(
        store.upsert_cell(CellId(id - 1), cell_row(20, true)),
        Ok(())
    );
}

/// HO-S2 / SCALE-3: a page shorter than asked is the end of the list: a pass that began at the
/// start of the list has seen it all and ends there, and the next one starts from the top.
#[test]
fn ho_s2_a_short_page_ends_the_pass_and_the_next_starts_from_the_top() {
    let now = MonoMs(5_000);
    let rows = rows_for_hosts(now, 2);
    let limits = ScanLimits {
        page_size: 4,
        max_pages: 3,
        max_dispatch: 10,
    };
    let mut pass = SelectionPass::begin(PageCursor::default(), limits).expect("limits");
    let query = pass.poll_query().expect("a first page");
    assert_eq!(
        query,
        PageQuery {
            after: None,
            through: None,
            limit: 4
        }
    );
    assert_eq!(pass.handle_page(now, &director(), &rows).len(), 2);
    assert_eq!(pass.poll_query(), None, "the list has two hosts");
    assert_eq!(pass.sweeps_completed(), 1);
    assert_eq!(pass.cursor(), PageCursor { after: None });
    assert_eq!(pass.finish(), pass.cursor());
}

/// HO-3: the cohort bucket is a contract with the SQL stores (they re-check it): splitmix64's
/// first output for the host id as seed, mod 100. 0xE220A8397B1DCDAF and 0x910A2DEC89025CC1 are
/// splitmix64's published first outputs for seeds 0 and 1.
#[test]
fn ho_3_cohort_bucket_is_splitmix64_of_the_host_id_mod_100() {
    assert_eq!(
        cohort_bucket(HostId(0)),
        (0xE220_A839_7B1D_CDAF_u64 % 100) as u8
    );
    assert_eq!(
        cohort_bucket(HostId(1)),
        (0x910A_2DEC_8902_5CC1_u64 % 100) as u8
    );
}

/// The op id is shown and sent as the UUID's hyphenated text.
#[test]
fn ho_s1_op_id_displays_as_its_uuid() {
    let op_id = OpId::derive(&new_store().1, TGT);
    let text = op_id.to_string();
    assert_eq!(text.len(), 36, "{text}");
    assert_eq!(text.matches('-').count(), 4, "{text}");
    assert_eq!(text, op_id.0.to_string());
}
