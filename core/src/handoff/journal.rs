//! The cell's and the director's journal records (CONF-1).
//!
//! A cell journals per host, under the key `cell/<cell-id>/host/<host-id>` (and its own start
//! under `cell/<cell-id>`): every input its [`SourceCell`](super::SourceCell) is given for the
//! host (with the instant, the line's `at_ms`) and what the core answered, every action it polled
//! for the host (as executed), and the driver's effects the properties read (a client admitted,
//! a client refused). A work record carries the gate's counters after the input, so the judge
//! both re-derives them (HO-7) and re-synchronises on them after a gap.
//!
//! A director journals under `director/<id>`: every host examined with its verdict, every request
//! sent and every answer with the class the budget gave it.

use serde::{Deserialize, Serialize};

use super::admission::{AdmissionRefusal, QuiescenceCounters, WorkKind};
use super::attempt::{AttemptRef, Begin, DrainReason, DurableResult, FenceResult};
use super::cell::{CellAction, Fed, InstallRefusal, Installed, MachineId, SessionId};
use super::director::{DispatchClass, DispatchOutcome};
use super::ids::{CellId, HostId, OpId, SourceAuthority};
use super::policy::HandoffRequest;
use super::store::{StoreFault, TxnOutcome};

/// One source cell journal record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellRecord {
    /// The cell started (a second one is a restart).
    Start,
    /// HO-7: a work input (`handle_acquire`, `handle_begin_control`, `handle_revalidate`,
    /// `handle_convert`, `handle_release`, an attach machine's step) and its answer.
    /// `after`: the counters of the host's machine after the input (`None`: no machine).
    Work {
        op: WorkOp,
        kind: WorkKind,
        machine: Option<MachineId>,
        /// `false`: refused, abandoned or nothing released.
        ok: bool,
        refused: Option<AdmissionRefusal>,
        after: Option<QuiescenceCounters>,
    },
    /// HO-A4: `handle_install_control` and its answer (the activation's ticket is released in
    /// it); `after` as in [`CellRecord::Work`].
    Install {
        result: Result<Installed, InstallRefusal>,
        after: Option<QuiescenceCounters>,
    },
    /// HO-A3: `handle_control_closed`; `told`: the machine learnt it.
    ControlClosed { session: SessionId, told: bool },
    /// HO-S2: `handle_request` and its immediate answer.
    Request {
        request: HandoffRequest,
        begin: Begin,
    },
    /// HO-A2 effect: what a store call answered, as the driver got it and before it read it
    /// (written just before the [`CellRecord::TransactionResult`] or
    /// [`CellRecord::ReconcileResult`] that feeds its reading to the machine), so a driver that
    /// reads a timeout as an abort is seen.
    StoreAnswered {
        call: StoreCall,
        answer: StoreAnswer,
    },
    /// HO-S4..S6: `handle_transaction_result`.
    TransactionResult {
        machine: MachineId,
        attempt: AttemptRef,
        result: DurableResult,
        fed: Fed,
    },
    /// HO-A2: `handle_reconcile_result`.
    ReconcileResult {
        machine: MachineId,
        attempt: AttemptRef,
        result: DurableResult,
        fed: Fed,
    },
    /// HO-A5: `handle_fence_result`.
    FenceResult {
        machine: MachineId,
        result: FenceResult,
        fed: Fed,
    },
    /// HO-A2: `handle_timeout`.
    Timeout { machine: MachineId, fed: Fed },
    /// HO-A5: `handle_set_enabled`.
    SetEnabled { enabled: bool },
    /// HO-A5: `handle_emergency_drain`; `applied`: `None` when the host is not here.
    EmergencyDrain {
        reason: DrainReason,
        applied: Option<bool>,
    },
    /// HO-L1: `handle_undrain`; `refused` names the refusal.
    Undrain { refused: Option<String> },
    /// An action polled from the core for this host, executed as it is written.
    Action(CellAction),
    /// HO-S3 effect: the driver spliced a client in (its socket attached to the host).
    ClientAdmitted { conn: u64 },
    /// HO-1 effect: a spliced client's session ended (the driver detached its socket).
    ClientLeft { conn: u64 },
    /// HO-S3 effect: the driver closed a client's socket with `code` before admitting it.
    ClientRefused { code: u16, reason: String },
}

/// The store call a [`CellRecord::StoreAnswered`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreCall {
    /// The assignment transaction (`RunTransaction`).
    Transaction,
    /// The locked reconciliation by op id (`Reconcile`).
    Reconcile,
}

/// What a store call answered, unread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreAnswer {
    /// A durable outcome.
    Outcome(TxnOutcome),
    /// A reconciliation that could not write its fence (the store is full).
    NoFence,
    /// No answer: what happened, as the executor classified it.
    Fault(StoreFault),
}

/// Which work input a [`CellRecord::Work`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkOp {
    /// A new ticket of `kind`.
    Acquire,
    /// A re-check after an await (`ok: false`: abandoned, the ticket released by the core).
    Revalidate,
    /// The ticket of `kind` swapped for one of `to`.
    Convert { to: WorkKind },
    /// The ticket of `kind` released (`ok`: the core released a live ticket).
    Release,
}

/// One director journal record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirectorRecord {
    /// The director started.
    Start,
    /// A pass began.
    Pass,
    /// EXPLAIN-1 / HO-3: a host examined and the verdict: dispatch, or the rule that made it
    /// ineligible (its stable name), or held (the failure budget is spent).
    Examined { host: HostId, decision: Examined },
    /// HO-S1: a request sent (its retries inside one send carry the same body).
    Sent {
        op_id: OpId,
        source: SourceAuthority,
        target: CellId,
    },
    /// HO-S2: the answer to a sent request and the class the dispatch budget gave it.
    Answer {
        op_id: OpId,
        outcome: DispatchOutcome,
        class: DispatchClass,
    },
}

/// A director's verdict on one examined host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Examined {
    Dispatch,
    Ineligible { rule: String },
    Held,
}
