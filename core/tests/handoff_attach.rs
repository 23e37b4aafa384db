//! HO-7 / HO-S3: the accept -> persist -> attach machine (`core::handoff::attach`), driven the
//! way the cell adapter drives it, store failure included.

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::AssignmentStore;
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::Incarnation;
use switchyard_core::handoff::QuiescenceCounters;
use switchyard_core::handoff::{close_code, SourceCell};
use switchyard_core::handoff::{AdmissionRefusal, WorkKind};
use switchyard_core::handoff::{Attach, AttachClose, AttachStep, PersistFailed};
use switchyard_core::handoff::{Begin, DrainReason};
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
