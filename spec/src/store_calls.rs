//! The handoff model's calls into the reference assignment store, with the answers it gave.
//!
//! A handoff trace drives the whole world around the store (clients, timers, directors). To
//! replay it against another store (the SQL stores in `adapters/`), the model is stepped through
//! the trace with a [`StoreJournal`] that records every store call it made; each recorded call
//! is then applied to the other store, whose answer and rows must equal the reference's. The
//! model checker steps with `()`, which records nothing and costs nothing.

use serde::{Deserialize, Serialize};
use switchyard_core::handoff::store::{
    CellRow, DrainWrite, LeaseLost, RegisterRefusal, StartRefusal, StoreConfig, StoreError,
    TxnOutcome,
};
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::{CellId, HostId, Incarnation, OpId, SourceAuthority};
use switchyard_core::MonoMs;

/// One call into `AssignmentStore` (method of the same name) and the reference's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoreCall {
    /// `AssignmentStore::new`: the settings the store starts with.
    Configure {
        config: StoreConfig,
    },
    SetEnabled {
        enabled: bool,
    },
    UpsertCell {
        cell: CellId,
        row: CellRow,
        answer: Result<(), StoreError>,
    },
    InsertHost {
        host: HostId,
        cell: CellId,
        desktop_capable: bool,
        answer: Result<SourceAuthority, StoreError>,
    },
    RunTransaction {
        now: MonoMs,
        request: HandoffRequest,
        answer: TxnOutcome,
    },
    Reconcile {
        now: MonoMs,
        request: HandoffRequest,
        answer: Option<TxnOutcome>,
    },
    RegisterControl {
        now: MonoMs,
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        desktop_capable: bool,
        answer: Result<SourceAuthority, RegisterRefusal>,
    },
    EmergencyDrain {
        authority: SourceAuthority,
        answer: DrainWrite,
    },
    ExpireMigrations {
        now: MonoMs,
        answer: Vec<OpId>,
    },
    /// HO-L2: a cell process starts (refused while another process's lease is live).
    StartCell {
        cell: CellId,
        capacity: u32,
        handoff_capable: bool,
        now: MonoMs,
        lease_ms: u64,
        answer: Result<Incarnation, StartRefusal>,
    },
    /// HO-L2: the running process keeps its cell.
    RenewCellLease {
        cell: CellId,
        incarnation: Incarnation,
        now: MonoMs,
        lease_ms: u64,
        answer: Result<MonoMs, LeaseLost>,
    },
    /// HO-L2: a graceful stop ends the lease.
    ReleaseCellLease {
        cell: CellId,
        incarnation: Incarnation,
        answer: Result<(), LeaseLost>,
    },
}

/// Where the model's store calls go.
pub trait StoreJournal {
    /// `false` lets the model skip building the record at all.
    const RECORDS: bool;
    fn record(&mut self, call: StoreCall);
}

/// The checker's journal: records nothing.
impl StoreJournal for () {
    const RECORDS: bool = false;
    #[inline]
    fn record(&mut self, _call: StoreCall) {}
}

/// A replay's journal: every call, in order.
impl StoreJournal for Vec<StoreCall> {
    const RECORDS: bool = true;
    fn record(&mut self, call: StoreCall) {
        self.push(call);
    }
}
