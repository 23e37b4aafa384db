//! HO requirement group "The attempt: request, barrier, admission" (`REQUIREMENTS.md` part HO):
//! HO-S1, HO-S2, HO-S3, HO-C1: the read-only selection and the op id, the barrier in one step, busy
//! as a deferral, admission under the barrier; the stable names of refusals.
//! Each test name carries its requirement ID (`ho_s3_…` for HO-S3); shared setup is in
//! `handoff_rig`.

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

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

fn snake(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
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
    assert_eq!((barrier.op_id(), barrier.seq()), (a.op_id, a.seq));
    assert_eq!(barrier.generation(), w.src.authority().generation);
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

/// The op id is shown and sent as the UUID's hyphenated text.
#[test]
fn ho_s1_op_id_displays_as_its_uuid() {
    let op_id = OpId::derive(&new_store().1, TGT);
    let text = op_id.to_string();
    assert_eq!(text.len(), 36, "{text}");
    assert_eq!(text.matches('-').count(), 4, "{text}");
    assert_eq!(text, op_id.0.to_string());
}

#[test]
fn ho_s3_a_host_without_a_machine_refuses_clients_as_wrong_cell_and_control_work_as_retired() {
    let mut cell = cell();
    assert_eq!(
        cell.handle_acquire(HOST, WorkKind::Accept),
        Err(AdmissionRefusal::WrongCell)
    );
    assert_eq!(
        cell.handle_acquire(HOST, WorkKind::ControlOp),
        Err(AdmissionRefusal::SourceRetired)
    );
    assert_eq!(
        client_close_code(AdmissionRefusal::WrongCell),
        4409,
        "HO-S3 wrong cell"
    );
    assert_eq!(
        client_close_code(AdmissionRefusal::SourceDraining),
        close_code::DRAINING
    );
    assert_eq!(
        client_close_code(AdmissionRefusal::ControlGated),
        close_code::TRY_AGAIN
    );
    match cell.handle_request(NOW, &request(new_store().1)) {
        Begin::Answered(HandoffReply::Refused {
            reason: HandoffRefusal::NoSession,
            ..
        }) => {}
        other => panic!("expected no session, got {other:?}"),
    }
}

#[test]
fn ho_s3_no_rebind_and_no_control_activation_under_a_barrier() {
    let (mut store, mut cell, auth, _) = registered();
    assert!(matches!(
        cell.handle_request(NOW, &request(auth)),
        Begin::Started(_)
    ));
    assert_eq!(
        cell.handle_begin_control(HOST),
        Err(AdmissionRefusal::ControlGated)
    );
    let newer = store
        .register_control(NOW, HOST, SRC, Incarnation(1), true)
        .expect("register");
    assert_eq!(
        cell.handle_install_control(NOW, newer, true, None),
        Err(InstallRefusal::Admission(AdmissionRefusal::ControlGated))
    );
    let (_, m) = cell.machine(HOST).expect("machine");
    assert!(matches!(m.gate().state(), GateState::Gated(_)));
    assert!(m.gate().counters().is_zero(), "no ticket left behind");
}

#[test]
fn stable_names_never_use_debug_text() {
    for r in [
        AdmissionRefusal::WrongCell,
        AdmissionRefusal::ControlGated,
        AdmissionRefusal::SourceRetired,
        AdmissionRefusal::SourceDraining,
        AdmissionRefusal::TooManyTickets,
    ] {
        let name = admission_refusal_name(r);
        assert!(
            name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{name}"
        );
        assert_eq!(
            InstallRefusal::Admission(r).name(),
            name,
            "an install refused by admission says why"
        );
    }
    assert_eq!(CloseReason::Replaced.name(), "replaced");
    assert_eq!(UndrainRefusal::StillClosing.name(), "still_closing");
}

#[test]
fn queries_name_the_process_and_never_count_control_traffic() {
    use switchyard_core::handoff::{ActivityLease, Heartbeat, NotCounted};
    let (_, mut cell, _, _) = registered();
    assert_eq!(cell.cell_id(), SRC);
    assert_eq!(cell.incarnation(), Incarnation(1));
    assert!(cell.is_enabled());
    cell.handle_set_enabled(NOW, false);
    assert!(!cell.is_enabled());
    assert_eq!(
        cell.handle_heartbeat(HOST, Heartbeat::Ping),
        Some(NotCounted::NotClientWork)
    );
    assert_eq!(
        cell.handle_activity_lease(HOST, ActivityLease::Missing),
        Some(NotCounted::NotIdlenessEvidence)
    );
    assert_eq!(
        cell.handle_activity_lease(OTHER_HOST, ActivityLease::Missing),
        None
    );
}

#[test]
fn ineligible_reasons_have_distinct_stable_names() {
    use switchyard_core::handoff::Ineligible;
    let names: std::collections::BTreeSet<&str> =
        Ineligible::ALL.iter().map(|i| i.name()).collect();
    assert_eq!(names.len(), Ineligible::ALL.len(), "{names:?}");
    assert!(names.iter().all(|n| snake(n)), "{names:?}");
    assert_eq!(Ineligible::CoolingDown.name(), "cooling_down");
    assert_eq!(Ineligible::DesktopNotCapable.name(), "desktop_not_capable");
    assert_eq!(Ineligible::StaleMeasurement.name(), "stale_measurement");
}

#[test]
fn refusals_and_turn_aways_have_stable_names_and_codes() {
    use switchyard_core::handoff::store::RegisterRefusal;
    use switchyard_core::handoff::Ineligible;
    use switchyard_core::handoff::{AuthorityField, CellId, OpId};
    let refusals = [
        HandoffRefusal::InvalidOpId,
        HandoffRefusal::NotOwner(AuthorityField::Host),
        HandoffRefusal::NotOwner(AuthorityField::Cell),
        HandoffRefusal::NotOwner(AuthorityField::Epoch),
        HandoffRefusal::NotOwner(AuthorityField::Incarnation),
        HandoffRefusal::NotOwner(AuthorityField::Generation),
        HandoffRefusal::Disabled,
        HandoffRefusal::NoSession,
        HandoffRefusal::CapabilityMissing(Ineligible::SourceCellNotCapable),
        HandoffRefusal::CapabilityMissing(Ineligible::DesktopNotCapable),
        HandoffRefusal::SameCell,
        HandoffRefusal::AttemptInFlight,
        HandoffRefusal::SourceRetired,
        HandoffRefusal::SourceDraining,
        HandoffRefusal::Backlogged,
    ];
    let names: std::collections::BTreeSet<&str> =
        refusals.iter().map(|r| refusal_name(*r)).collect();
    assert_eq!(names.len(), refusals.len(), "{names:?}");
    assert!(names.iter().all(|n| snake(n)), "{names:?}");
    assert_eq!(refusal_name(HandoffRefusal::NoSession), "no_session");
    let op_id = OpId(uuid::Uuid::nil());
    assert_eq!(
        reply_reason(&HandoffReply::Refused {
            op_id,
            reason: HandoffRefusal::CapabilityMissing(Ineligible::DesktopNotCapable)
        }),
        Some("desktop_not_capable")
    );
    assert_eq!(
        reply_reason(&HandoffReply::Superseded {
            op_id,
            field: AuthorityField::Generation
        }),
        Some("generation")
    );
    assert_eq!(reply_reason(&HandoffReply::InProgress { op_id }), None);

    // A moved host's old control follows the DRAINING path; other refusals only close 4409
    // (a DRAINING frame would bring the desktop straight back).
    let moved = register_turn_away(RegisterRefusal::NotAssignedHere {
        assigned: CellId(2),
    });
    assert_eq!(
        (moved.name, moved.frame, moved.close_code),
        ("assigned_elsewhere", TurnAwayFrame::Draining, 4409)
    );
    for r in [
        RegisterRefusal::UnknownHost,
        RegisterRefusal::UnknownCell,
        RegisterRefusal::StaleIncarnation,
    ] {
        let t = register_turn_away(r);
        assert_eq!((t.frame, t.close_code), (TurnAwayFrame::None, 4409));
        assert!(snake(t.name));
    }
    let gated = install_turn_away(InstallRefusal::Admission(AdmissionRefusal::ControlGated));
    assert_eq!(
        (gated.name, gated.frame, gated.close_code),
        ("control_gated", TurnAwayFrame::Retry, close_code::TRY_AGAIN)
    );
    assert_eq!(
        install_turn_away(InstallRefusal::SourceDraining).name,
        "source_draining"
    );
    assert_eq!(STORE_UNAVAILABLE_TURN_AWAY.name, "store_unavailable");
    for r in [
        CloseReason::Replaced,
        CloseReason::Drained(DrainReason::Emergency),
        CloseReason::Drained(DrainReason::AuthRefused),
    ] {
        assert!(snake(r.name()));
    }
    for r in [
        UndrainRefusal::UnknownHost,
        UndrainRefusal::NotDrained,
        UndrainRefusal::AttemptInFlight,
        UndrainRefusal::StillClosing,
    ] {
        assert!(snake(r.name()));
    }
}
