//! HO requirement group "Idle (the quiescence predicate)" (`REQUIREMENTS.md` part HO): HO-7, HO-8,
//! HO-10: the five counters, what is not client work, what never proves idleness; the accept ->
//! persist -> attach machine (`Attach`); SEC-1's per-host client bound.
//! Each test name carries its requirement ID (`ho_s3_…` for HO-S3); shared setup is in
//! `handoff_rig`.

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

const NOW: MonoMs = MonoMs(1_000);

fn registered() -> (AssignmentStore, SourceCell) {
    let mut store = AssignmentStore::new(store_config());
    store.upsert_cell(SRC, cell_row(10, true)).expect("cell");
    store.upsert_cell(TGT, cell_row(10, true)).expect("cell");
    store.insert_host(HOST, SRC, true).expect("host");
    let auth = store
        .register_control(NOW, HOST, SRC, Incarnation(1), true)
        .expect("register");
    let mut cell = SourceCell::new(source_config(), SRC, Incarnation(1));
    cell.handle_install_control(NOW, auth, true, None)
        .expect("install");
    (store, cell)
}

fn counters(cell: &SourceCell) -> QuiescenceCounters {
    cell.machine(HOST).expect("machine").1.gate().counters()
}

fn accepted(cell: &mut SourceCell) -> Attach {
    Attach::new(cell.handle_acquire(HOST, WorkKind::Accept).expect("open"))
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

#[test]
fn ho_7_the_accept_counts_through_the_persist_and_becomes_the_connection() {
    let (store, mut cell) = registered();
    let mut attach = accepted(&mut cell);
    let step = attach.poll(&mut cell);
    assert!(
        matches!(step, AttachStep::Persist { authority } if Some(authority) == cell.authority(HOST))
    );
    assert_eq!(attach.poll(&mut cell), AttachStep::Wait, "the write is out");
    // HO-7 / HO-S3: the persisting client is an accept: the barrier cannot install over it.
    assert_eq!(counters(&cell).accepts, 1);
    let auth = store.authority(HOST).expect("auth");
    let req = HandoffRequest::new(auth, TGT, 100, good_measurement(NOW));
    assert!(matches!(cell.handle_request(NOW, &req), Begin::Answered(_)));
    assert!(attach.handle_persisted(Ok(())));
    let AttachStep::Attached(conn) = attach.poll(&mut cell) else {
        panic!("attached");
    };
    assert_eq!(conn.ticket.kind, WorkKind::ClientConn);
    assert_eq!(
        counters(&cell),
        QuiescenceCounters {
            client_conns: 1,
            ..QuiescenceCounters::default()
        }
    );
    assert_eq!(attach.ticket(), None, "the connection is the caller's now");
    assert_eq!(attach.handle_cancel(&mut cell), None);
}

#[test]
fn ho_7_a_failed_persist_releases_the_accept_and_closes_the_client_by_name() {
    let (_, mut cell) = registered();
    let mut attach = accepted(&mut cell);
    assert!(matches!(attach.poll(&mut cell), AttachStep::Persist { .. }));
    assert!(attach.handle_persisted(Err(PersistFailed)));
    assert_eq!(counters(&cell).accepts, 1, "counted until the close");
    let step = attach.poll(&mut cell);
    assert_eq!(step, AttachStep::Close(AttachClose::ActivityNotPersisted));
    assert_eq!(
        AttachClose::ActivityNotPersisted.name(),
        "activity_not_persisted"
    );
    assert_eq!(
        AttachClose::ActivityNotPersisted.close_code(),
        close_code::TRY_AGAIN
    );
    assert!(counters(&cell).is_zero(), "no ticket left counted");
    assert_eq!(attach.ticket(), None);
    assert!(!attach.handle_persisted(Ok(())), "nothing out any more");
}

#[test]
fn ho_s3_a_drain_during_the_persist_abandons_the_attach() {
    let (_, mut cell) = registered();
    let mut attach = accepted(&mut cell);
    assert!(matches!(attach.poll(&mut cell), AttachStep::Persist { .. }));
    let _ = cell.handle_emergency_drain(NOW, HOST, DrainReason::Emergency);
    assert!(attach.handle_persisted(Ok(())));
    let step = attach.poll(&mut cell);
    assert_eq!(step, AttachStep::Close(AttachClose::Abandoned));
    assert_eq!(AttachClose::Abandoned.close_code(), close_code::WRONG_CELL);
    assert!(counters(&cell).is_zero());
}

#[test]
fn ho_7_a_cancelled_attach_releases_its_ticket_once() {
    let (_, mut cell) = registered();
    let mut attach = accepted(&mut cell);
    assert!(matches!(attach.poll(&mut cell), AttachStep::Persist { .. }));
    assert!(attach.handle_cancel(&mut cell).is_some());
    assert!(counters(&cell).is_zero());
    assert_eq!(attach.handle_cancel(&mut cell), None, "once");
    assert_eq!(
        AttachClose::Refused(AdmissionRefusal::HostFull).name(),
        "too_many_clients"
    );
}
