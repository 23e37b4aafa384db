//! The source cell endpoint (`SourceCell`): which machine a control gets, machine fencing of
//! late work, the sessions it closes, the drain and its recovery path (HO-A4, HO-A5, HO-L1),
//! and the durable answer to a duplicate (HO-A1).

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::{AssignmentStore, AttemptOutcome, TxnOutcome};
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::*;
use switchyard_core::handoff::{AdmissionRefusal, GateState, WorkKind};
use switchyard_core::handoff::{
    Begin, Disposition, DrainReason, DurableResult, FenceResult, FenceRetry, HandoffAction,
    HandoffRefusal, HandoffReply, RebindRefusal, RetireReason,
};
use switchyard_core::handoff::{Incarnation, SourceAuthority};
use switchyard_core::MonoMs;

const NOW: MonoMs = MonoMs(1_000_000);

fn cell() -> SourceCell {
    SourceCell::new(source_config(), SRC, Incarnation(1))
}

fn drain(cell: &mut SourceCell) -> Vec<CellAction> {
    std::iter::from_fn(|| cell.poll_action()).collect()
}

/// A store with the host registered at SRC, and a cell whose control for it is installed.
fn registered() -> (AssignmentStore, SourceCell, SourceAuthority, Installed) {
    let (mut store, _) = new_store();
    let auth = store
        .register_control(NOW, HOST, SRC, Incarnation(1), true)
        .expect("register");
    let mut cell = cell();
    let installed = cell
        .handle_install_control(NOW, auth, true, None)
        .expect("install");
    (store, cell, auth, installed)
}

fn request(auth: SourceAuthority) -> HandoffRequest {
    HandoffRequest::new(auth, TGT, 100, good_measurement(NOW))
}

fn txn_of(actions: &[CellAction]) -> (MachineId, switchyard_core::handoff::AttemptRef) {
    actions
        .iter()
        .find_map(|a| match a {
            CellAction::Machine {
                machine,
                action: HandoffAction::RunTransaction { attempt, .. },
                ..
            } => Some((*machine, *attempt)),
            _ => None,
        })
        .expect("a transaction to run")
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
fn ho_a5_drain_closes_clients_and_control_fences_and_refuses_a_new_control_until_undrained() {
    let (mut store, mut cell, auth, first) = registered();
    let client = cell
        .handle_acquire(HOST, WorkKind::ClientConn)
        .expect("client");
    assert_eq!(
        cell.handle_emergency_drain(NOW, HOST, DrainReason::Emergency),
        Some(true)
    );
    let actions = drain(&mut cell);
    assert!(actions.contains(&CellAction::HardDrain { host: HOST }));
    assert!(actions.contains(&CellAction::CloseControl {
        host: HOST,
        session: first.session,
        reason: CloseReason::Drained(DrainReason::Emergency)
    }));
    assert!(actions.iter().any(|a| matches!(
        a,
        CellAction::Machine {
            action: HandoffAction::FenceAuthority { authority, .. },
            ..
        } if *authority == auth
    )));
    let again = store
        .register_control(NOW, HOST, SRC, Incarnation(1), true)
        .expect("register");
    assert_eq!(
        cell.handle_install_control(NOW, again, true, None),
        Err(InstallRefusal::SourceDraining)
    );
    // HO-L1: the recovery path waits for the drained work to close, then forgets the host.
    assert_eq!(cell.handle_undrain(HOST), Err(UndrainRefusal::StillClosing));
    assert_eq!(
        cell.handle_release(&client),
        Some(switchyard_core::handoff::ReleaseReport::Released)
    );
    // HO-A5: and for its fence to be written.
    assert_eq!(
        cell.handle_undrain(HOST),
        Err(UndrainRefusal::FenceUnwritten)
    );
    write_fence(&mut store, &mut cell, first.machine, auth);
    assert_eq!(cell.handle_undrain(HOST), Ok(()));
    assert_eq!(drain(&mut cell), vec![CellAction::Forget { host: HOST }]);
    let fresh = cell
        .handle_install_control(NOW, again, true, None)
        .expect("a fresh machine after the undrain");
    assert_eq!(fresh.how, InstallKind::NewMachine);
    assert_ne!(fresh.machine, first.machine);
    assert_eq!(cell.handle_undrain(HOST), Err(UndrainRefusal::NotDrained));
    assert_eq!(
        cell.handle_undrain(OTHER_HOST),
        Err(UndrainRefusal::UnknownHost)
    );
}

const OTHER_HOST: switchyard_core::handoff::HostId = switchyard_core::handoff::HostId(99);

#[test]
fn ho_l1_an_undrain_waits_for_the_drained_attempt_to_end() {
    let (mut store, mut cell, auth, _) = registered();
    let req = request(auth);
    assert!(matches!(cell.handle_request(NOW, &req), Begin::Started(_)));
    let (machine, attempt) = txn_of(&drain(&mut cell));
    let _ = cell.handle_emergency_drain(NOW, HOST, DrainReason::Emergency);
    assert_eq!(
        cell.handle_undrain(HOST),
        Err(UndrainRefusal::AttemptInFlight)
    );
    write_fence(&mut store, &mut cell, machine, auth);
    let outcome = store.run_transaction(NOW, &req);
    let _ =
        cell.handle_transaction_result(NOW, HOST, machine, attempt, DurableResult::Done(outcome));
    assert_eq!(cell.handle_undrain(HOST), Ok(()));
}

/// HO-L1 (issue 27 point 8): an undrain run twice, before the desktop registers again, is
/// refused `not_drained` the second time (the host is served here and not drained), not
/// `unknown_host`; a host this cell never had is still `unknown_host`.
#[test]
fn ho_l1_a_second_undrain_before_the_desktop_returns_is_refused_not_drained() {
    let (mut store, mut cell, auth, first) = registered();
    let _ = cell.handle_emergency_drain(NOW, HOST, DrainReason::Emergency);
    write_fence(&mut store, &mut cell, first.machine, auth);
    assert_eq!(cell.handle_undrain(HOST), Ok(()));
    assert_eq!(cell.handle_undrain(HOST), Err(UndrainRefusal::NotDrained));
    assert_eq!(
        cell.handle_undrain(OTHER_HOST),
        Err(UndrainRefusal::UnknownHost)
    );
    assert_eq!(
        UndrainRefusal::NotDrained.name(),
        "not_drained",
        "the name the operator reads"
    );
}

/// HO-A5: the adapter writes the drain fence and feeds the store's answer back.
fn write_fence(
    store: &mut AssignmentStore,
    cell: &mut SourceCell,
    machine: MachineId,
    auth: SourceAuthority,
) {
    let written = FenceResult::Written(store.emergency_drain(&auth));
    assert!(matches!(
        cell.handle_fence_result(NOW, HOST, machine, written),
        Fed::Applied(_)
    ));
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

#[test]
fn ho_a5_a_disabled_cell_makes_every_machine_refuse_new_attempts() {
    let (_, mut cell, auth, _) = registered();
    cell.handle_set_enabled(NOW, false);
    match cell.handle_request(NOW, &request(auth)) {
        Begin::Answered(HandoffReply::Refused {
            reason: HandoffRefusal::Disabled,
            ..
        }) => {}
        other => panic!("expected disabled, got {other:?}"),
    }
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

fn snake(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[test]
fn ho_a5_a_drained_host_refuses_a_control_before_the_store_is_written() {
    let (mut store, mut cell, auth, first) = registered();
    assert_eq!(
        cell.control_refusal(HOST),
        None,
        "a live host decides later"
    );
    assert_eq!(
        cell.control_refusal(OTHER_HOST),
        None,
        "an unknown host too"
    );
    let _ = cell.handle_emergency_drain(NOW, HOST, DrainReason::Emergency);
    let _ = drain(&mut cell);
    assert_eq!(
        cell.control_refusal(HOST),
        Some(InstallRefusal::SourceDraining)
    );
    write_fence(&mut store, &mut cell, first.machine, auth);
    assert_eq!(cell.handle_undrain(HOST), Ok(()));
    assert_eq!(
        cell.control_refusal(HOST),
        None,
        "undrained: back to service"
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

// ---- HO-A5: the drain fence's result is an input; the retries are the core's ----------------

fn fence_actions(actions: &[CellAction]) -> Vec<HandoffAction> {
    actions
        .iter()
        .filter_map(|a| match a {
            CellAction::Machine { action, .. }
                if matches!(
                    action,
                    HandoffAction::FenceAuthority { .. } | HandoffAction::FenceFailed { .. }
                ) =>
            {
                Some(*action)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn ho_a5_a_failed_fence_write_is_retried_with_capped_backoff_until_written() {
    let (mut store, cell, auth, first) = registered();
    let retry = FenceRetry {
        min_ms: 100,
        max_ms: 400,
        alert_after: 3,
    };
    let mut cell = cell.with_fence_retry(retry);
    let _ = cell.handle_emergency_drain(NOW, HOST, DrainReason::Emergency);
    let reason = DrainReason::Emergency;
    assert_eq!(
        fence_actions(&drain(&mut cell)),
        vec![HandoffAction::FenceAuthority {
            authority: auth,
            reason
        }]
    );
    assert_eq!(cell.poll_timeout(HOST), None, "a write is out: no timer");
    let mut now = NOW;
    let mut waits = Vec::new();
    for failures in 1..=5u32 {
        let fed = cell.handle_fence_result(now, HOST, first.machine, FenceResult::Failed);
        assert!(matches!(fed, Fed::Applied(_)));
        let (machine, at) = cell.poll_timeout(HOST).expect("a retry timer");
        assert_eq!(machine, first.machine);
        assert_eq!(
            fence_actions(&drain(&mut cell)),
            vec![HandoffAction::FenceFailed {
                authority: auth,
                failures,
                retry_at: at,
                overdue: failures >= 3,
            }]
        );
        assert_eq!(cell.fences_unwritten(), 1);
        assert_eq!(
            cell.handle_undrain(HOST),
            Err(UndrainRefusal::FenceUnwritten)
        );
        // Early: nothing; due: the fence goes out again.
        assert!(matches!(
            cell.handle_timeout(MonoMs(at.as_ms() - 1), HOST, machine),
            Fed::Applied(_)
        ));
        assert!(fence_actions(&drain(&mut cell)).is_empty());
        waits.push(at.since_ms(now));
        now = at;
        let _ = cell.handle_timeout(now, HOST, machine);
        assert_eq!(
            fence_actions(&drain(&mut cell)),
            vec![HandoffAction::FenceAuthority {
                authority: auth,
                reason
            }]
        );
        // A duplicate timer changes nothing while the write is out.
        let _ = cell.handle_timeout(now, HOST, machine);
        assert!(fence_actions(&drain(&mut cell)).is_empty());
    }
    assert_eq!(waits, vec![100, 200, 400, 400, 400], "doubling, capped");
    let written = FenceResult::Written(store.emergency_drain(&auth));
    let _ = cell.handle_fence_result(now, HOST, first.machine, written);
    assert_eq!(cell.fences_unwritten(), 0);
    assert_eq!(cell.poll_timeout(HOST), None, "nothing left to retry");
    assert!(fence_actions(&drain(&mut cell)).is_empty());
    // A late second answer is ignored.
    assert!(matches!(
        cell.handle_fence_result(now, HOST, first.machine, FenceResult::Failed),
        Fed::Applied(Disposition::Ignored(_))
    ));
    assert_eq!(cell.poll_timeout(HOST), None);
    assert_eq!(cell.handle_undrain(HOST), Ok(()));
    assert_eq!(
        cell.handle_fence_result(now, HOST, first.machine, FenceResult::Failed),
        Fed::Late
    );
}

#[test]
fn ho_a5_the_fence_retry_and_the_attempt_deadline_share_the_host_timer() {
    let (_, mut cell, auth, _) = registered();
    let req = request(auth);
    assert!(matches!(cell.handle_request(NOW, &req), Begin::Started(_)));
    let (machine, _) = txn_of(&drain(&mut cell));
    let (_, txn_deadline) = cell.poll_timeout(HOST).expect("the attempt's deadline");
    let _ = cell.handle_emergency_drain(NOW, HOST, DrainReason::Emergency);
    let _ = drain(&mut cell);
    let _ = cell.handle_fence_result(NOW, HOST, machine, FenceResult::Failed);
    let _ = drain(&mut cell);
    let (_, at) = cell.poll_timeout(HOST).expect("a timer");
    assert!(at < txn_deadline, "the earlier of the two: {at:?}");
    let _ = cell.handle_timeout(at, HOST, machine);
    assert_eq!(fence_actions(&drain(&mut cell)).len(), 1, "the fence again");
    assert_eq!(cell.poll_timeout(HOST), Some((machine, txn_deadline)));
}
