//! The source cell as a sans-IO endpoint (the shape of quinn-proto's `Endpoint`): the table of
//! per-host handoff machines of one cell process, their identities, and the control session
//! each one serves.
//!
//! The adapter keeps sockets, timers, the mutex and the spawning; every choice about a host is
//! made here, where the model checker drives it (`switchyard-spec`):
//! - which machine a control registration gets: a new one, a fresh one over a retired one, or a
//!   rebind of the live one through the caller's own or a temporary control ticket (HO-A4);
//! - machine fencing: every ticket and every store result names the [`MachineId`] it belongs
//!   to, and anything for a replaced machine is ignored ([`Fed::Late`]);
//! - what a refused client or control is told (WrongCell / SourceRetired, and the close code);
//! - which control sessions to close and when (retire, drain, replacement), and the hard drain;
//! - the emergency drain and its recovery path, [`SourceCell::handle_undrain`] (HO-L1);
//! - how a duplicate that reaches a source no longer holding the attempt is answered from the
//!   durable record ([`answer_from_record`], HO-A1).
//!
//! The face (see `super`'s "One face per machine"): every input is a `handle_*` call, the
//! time first where the decision reads it:
//! - work (HO-7, HO-S3): [`SourceCell::handle_acquire`], [`SourceCell::handle_revalidate`],
//!   [`SourceCell::handle_convert`], [`SourceCell::handle_release`], and the traffic that is no
//!   work, [`SourceCell::handle_heartbeat`] and [`SourceCell::handle_activity_lease`];
//! - control sessions (HO-A4): [`SourceCell::handle_begin_control`],
//!   [`SourceCell::handle_install_control`], [`SourceCell::handle_control_closed`];
//! - the director and the store (HO-S2, HO-A2): [`SourceCell::handle_request`],
//!   [`SourceCell::handle_transaction_result`], [`SourceCell::handle_reconcile_result`],
//!   [`SourceCell::handle_fence_result`], [`SourceCell::handle_timeout`];
//! - the operator (HO-A5, HO-L1): [`SourceCell::handle_set_enabled`],
//!   [`SourceCell::handle_emergency_drain`], [`SourceCell::handle_undrain`].
//!
//! Outputs are [`CellAction`]s drained with [`SourceCell::poll_action`] after every input, and
//! [`SourceCell::poll_timeout`] gives a host's next deadline. Everything else is a read-only
//! accessor.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::admission::{
    ActivityLease, AdmissionRefusal, GateState, Heartbeat, NotCounted, QuiescenceCounters,
    ReleaseReport, Revalidation, Ticket, WorkKind, WRONG_CELL_CLOSE_CODE,
};
use super::attempt::{
    AttemptRef, Begin, Disposition, DrainReason, DurableResult, FenceResult, FenceRetry,
    HandoffAction, HandoffRefusal, HandoffReply, HandoffResult, Phase, RebindRefusal, RetireReason,
    SourceConfig, SourceHandoff,
};
use super::ids::{AuthorityField, HostId, SourceAuthority};
use super::policy::HandoffRequest;
use super::store::{AttemptOutcome, AttemptRow, RegisterRefusal, StoreError, TxnOutcome};
use crate::MonoMs;

/// Hosts one cell process serves at once; a registration beyond it is refused.
pub(crate) const MAX_CELL_HOSTS: usize = 65_536;
/// Bound on undrained endpoint actions: the adapter drains after every input, and one input
/// queues at most one machine's actions plus two session commands.
pub(crate) const MAX_CELL_ACTIONS: usize = super::attempt::MAX_PENDING_ACTIONS + 4;

/// WebSocket close codes the cell's decisions use.
pub mod close_code {
    /// An ordinary close (a retired or replaced control, after its DRAINING frame).
    pub const NORMAL: u16 = 1000;
    /// Hard drain of a client (reconnect elsewhere).
    pub const DRAINING: u16 = 1012;
    /// Ordinary retryable error (try again later).
    pub const TRY_AGAIN: u16 = 1013;
    /// HO-S3: the host is not (or no longer) served here: resolve again.
    pub const WRONG_CELL: u16 = super::WRONG_CELL_CLOSE_CODE;
    /// SEC-1: the client's credential is missing, malformed, expired or not this host's.
    /// Retrying with the same credential is pointless: get a new one from the desktop.
    pub const NOT_AUTHENTICATED: u16 = 4401;
    /// SEC-1: the host holds as many clients as one host may: try again later, same cell.
    pub const TOO_MANY_CLIENTS: u16 = 4429;
}

/// Identity of one machine of one host in this process. A machine replaced (retired and
/// re-registered, or undrained) never comes back, so late work naming it is fenced off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MachineId(pub u64);

/// Identity of one control session (one desktop socket) in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(pub u64);

/// One unit of work's ownership of a ticket of one machine (the adapter wraps it in a guard
/// that releases it on every exit path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CellWork {
    pub host: HostId,
    pub machine: MachineId,
    pub ticket: Ticket,
}

/// A registered control, installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Installed {
    pub machine: MachineId,
    pub session: SessionId,
    /// How the machine was chosen.
    pub how: InstallKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InstallKind {
    /// The host had no machine here.
    NewMachine,
    /// The host's machine was retired (committed or stale): a fresh one replaces it. Its
    /// barrier only ever closed over zero tickets, so no live work is orphaned.
    OverRetired,
    /// HO-A4: the live machine was rebound to the newer registration.
    Rebound,
}

/// Why a registered control was not installed (retryable for the desktop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InstallRefusal {
    /// HO-A5: the host is drained here until an operator undrains it.
    SourceDraining,
    /// HO-S3 / HO-A4: no rebind while a barrier stands (or a ticket could not be taken).
    Admission(AdmissionRefusal),
    Rebind(RebindRefusal),
    /// The registration is for another cell or an older process.
    WrongAuthority,
    TooManyHosts,
}

/// What a result or deadline fed to a named machine did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Fed {
    Applied(Disposition),
    /// HO-A4: the machine it was meant for is gone (replaced, undrained): ignored.
    Late,
}

/// Why a control session is closed through the DRAINING path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CloseReason {
    /// HO-S5 / HO-S6: the source retired.
    Retired(RetireReason),
    /// HO-A5.
    Drained(DrainReason),
    /// HO-A4: a newer control of the same host took over.
    Replaced,
}

impl CloseReason {
    /// Stable name for the wire and for logs.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            CloseReason::Retired(RetireReason::Committed { .. }) => "committed",
            CloseReason::Retired(RetireReason::StaleAuthority { .. }) => "stale_authority",
            CloseReason::Drained(DrainReason::Emergency) => "emergency_drain",
            CloseReason::Drained(DrainReason::AuthRefused) => "auth_refused",
            CloseReason::Replaced => "replaced",
        }
    }
}

/// The endpoint's decisions, for the adapter to execute in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CellAction {
    /// Execute a machine's action; feed its result back naming `machine`.
    Machine {
        host: HostId,
        machine: MachineId,
        action: HandoffAction,
    },
    /// Send the DRAINING frame on this control session, then close it. Sent before the
    /// machine's own `RetireSourceDraining`.
    CloseControl {
        host: HostId,
        session: SessionId,
        reason: CloseReason,
    },
    /// HO-A5: close every client of the host within the hard-drain deadline.
    HardDrain { host: HostId },
    /// The host's machine is gone (undrained): drop the adapter's per-host state.
    Forget { host: HostId },
}

/// Why an undrain is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UndrainRefusal {
    UnknownHost,
    NotDrained,
    /// The drained attempt still reconciles: it must end first (HO-A5).
    AttemptInFlight,
    /// Drained work is still closing (tickets live): retry in a moment.
    StillClosing,
    /// HO-A5: the drain fence is not yet written (the store was unreachable); the cell retries
    /// it. Undraining now would let the desktop's next registration race an old transaction
    /// that the fence is there to fail: retry once the fence is written.
    FenceUnwritten,
}

impl UndrainRefusal {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            UndrainRefusal::UnknownHost => "unknown_host",
            UndrainRefusal::NotDrained => "not_drained",
            UndrainRefusal::AttemptInFlight => "attempt_in_flight",
            UndrainRefusal::StillClosing => "still_closing",
            UndrainRefusal::FenceUnwritten => "fence_unwritten",
        }
    }
}

impl InstallRefusal {
    /// Stable name for the wire and for logs.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            InstallRefusal::SourceDraining => "source_draining",
            InstallRefusal::Admission(r) => admission_refusal_name(r),
            InstallRefusal::Rebind(RebindRefusal::Gated) => "gated",
            InstallRefusal::Rebind(RebindRefusal::SourceRetired) => "source_retired",
            InstallRefusal::Rebind(RebindRefusal::SourceDraining) => "source_draining",
            InstallRefusal::Rebind(RebindRefusal::NoControlTicket) => "no_control_ticket",
            InstallRefusal::Rebind(RebindRefusal::WrongAuthority)
            | InstallRefusal::WrongAuthority => "wrong_authority",
            InstallRefusal::Rebind(RebindRefusal::NotNewer) => "not_newer",
            InstallRefusal::TooManyHosts => "too_many_hosts",
        }
    }
}

/// Stable name of an admission refusal (wire and logs; never `{:?}` text).
#[must_use]
pub fn admission_refusal_name(refusal: AdmissionRefusal) -> &'static str {
    match refusal {
        AdmissionRefusal::WrongCell => "wrong_cell",
        AdmissionRefusal::ControlGated => "control_gated",
        AdmissionRefusal::SourceRetired => "source_retired",
        AdmissionRefusal::SourceDraining => "source_draining",
        AdmissionRefusal::TooManyTickets => "too_many_tickets",
        AdmissionRefusal::HostFull => "too_many_clients",
    }
}

/// HO-S3 / HO-A5: the close code for a client refused admission.
#[must_use]
pub fn client_close_code(refusal: AdmissionRefusal) -> u16 {
    match refusal {
        AdmissionRefusal::WrongCell => WRONG_CELL_CLOSE_CODE,
        AdmissionRefusal::SourceDraining => close_code::DRAINING,
        AdmissionRefusal::HostFull => close_code::TOO_MANY_CLIENTS,
        AdmissionRefusal::ControlGated
        | AdmissionRefusal::SourceRetired
        | AdmissionRefusal::TooManyTickets => close_code::TRY_AGAIN,
    }
}

/// Stable name of a handoff refusal (the director's report and the wire; never `{:?}` text).
/// A missing capability is named by the capability (HO-C1), an ownership mismatch by its
/// field.
#[must_use]
pub fn refusal_name(refusal: HandoffRefusal) -> &'static str {
    match refusal {
        HandoffRefusal::InvalidOpId => "invalid_op_id",
        HandoffRefusal::NotOwner(AuthorityField::Host) => "not_owner_host",
        HandoffRefusal::NotOwner(AuthorityField::Cell) => "not_owner_cell",
        HandoffRefusal::NotOwner(AuthorityField::Epoch) => "not_owner_epoch",
        HandoffRefusal::NotOwner(AuthorityField::Incarnation) => "not_owner_incarnation",
        HandoffRefusal::NotOwner(AuthorityField::Generation) => "not_owner_generation",
        HandoffRefusal::Disabled => "disabled",
        HandoffRefusal::NoSession => "no_session",
        HandoffRefusal::CapabilityMissing(missing) => missing.name(),
        HandoffRefusal::SameCell => "same_cell",
        HandoffRefusal::AttemptInFlight => "attempt_in_flight",
        HandoffRefusal::SourceRetired => "source_retired",
        HandoffRefusal::SourceDraining => "source_draining",
        HandoffRefusal::Backlogged => "backlogged",
    }
}

/// Stable name of an authority field (what a superseded request was older in).
#[must_use]
pub(crate) fn authority_field_name(field: AuthorityField) -> &'static str {
    match field {
        AuthorityField::Host => "host",
        AuthorityField::Cell => "cell",
        AuthorityField::Epoch => "epoch",
        AuthorityField::Incarnation => "incarnation",
        AuthorityField::Generation => "generation",
    }
}

/// The stable reason word of a reply: the refusal, or the field a
/// superseded request was older in; HO-L4: a result the store rolled back, by its reason
/// (`rate_limited`, `store_full`, ...). `None` for busy, in progress and other results.
#[must_use]
pub fn reply_reason(reply: &HandoffReply) -> Option<&'static str> {
    match reply {
        HandoffReply::Refused { reason, .. } => Some(refusal_name(*reason)),
        HandoffReply::Superseded { field, .. } => Some(authority_field_name(*field)),
        HandoffReply::Result(HandoffResult {
            outcome: TxnOutcome::RolledBack { reason },
            ..
        }) => Some(reason.name()),
        HandoffReply::Busy { .. } | HandoffReply::InProgress { .. } | HandoffReply::Result(_) => {
            None
        }
    }
}

/// Stable name of a refused control registration.
#[must_use]
pub(crate) fn register_refusal_name(refusal: RegisterRefusal) -> &'static str {
    match refusal {
        RegisterRefusal::UnknownHost => "unknown_host",
        RegisterRefusal::UnknownCell => "unknown_cell",
        RegisterRefusal::NotAssignedHere { .. } => "assigned_elsewhere",
        RegisterRefusal::StaleIncarnation => "stale_incarnation",
    }
}

/// The frame a turned-away control gets before its socket closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TurnAwayFrame {
    /// The ordinary DRAINING / resolve path: the desktop resolves and reconnects at once.
    Draining,
    /// An ordinary retryable error: the desktop retries (paced) where it is.
    Retry,
    /// Nothing: the close code says it all.
    None,
}

/// How a control that cannot be installed is turned away: the frame, then the close code;
/// `name` is the stable reason on both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TurnAway {
    pub name: &'static str,
    pub frame: TurnAwayFrame,
    pub close_code: u16,
}

/// HO-A4: a control the store refused to register. A committed handoff moved the host: the
/// old ownership is refused and the desktop follows the DRAINING path to the new cell. Any
/// other refusal (unknown host, stale process) only closes with 4409: resolving again is the
/// desktop's move, and a DRAINING frame would make it reconnect here at once, in a loop.
#[must_use]
pub fn register_turn_away(refusal: RegisterRefusal) -> TurnAway {
    TurnAway {
        name: register_refusal_name(refusal),
        frame: match refusal {
            RegisterRefusal::NotAssignedHere { .. } => TurnAwayFrame::Draining,
            RegisterRefusal::UnknownHost
            | RegisterRefusal::UnknownCell
            | RegisterRefusal::StaleIncarnation => TurnAwayFrame::None,
        },
        close_code: close_code::WRONG_CELL,
    }
}

/// HO-A4 / HO-A5: a registered control [`SourceCell::handle_install_control`] refused (barrier,
/// drain, not newer): retryable where it is.
#[must_use]
pub fn install_turn_away(refusal: InstallRefusal) -> TurnAway {
    TurnAway {
        name: refusal.name(),
        frame: TurnAwayFrame::Retry,
        close_code: close_code::TRY_AGAIN,
    }
}

/// SCALE-1: a desktop's enrolment the store refused, by its stable name: a full store is
/// `too_many_hosts` (never `store_unavailable`: the database is fine, the bound is reached),
/// retried where it is, paced, like any refusal that may clear (an operator raises the bound).
/// A host that exists already (another registration enrolled it first) is not a refusal: the
/// caller registers it.
#[must_use]
pub(crate) fn enrol_turn_away(refusal: StoreError) -> TurnAway {
    TurnAway {
        name: match refusal {
            StoreError::TooManyHosts => "too_many_hosts",
            StoreError::TooManyCells => "too_many_cells",
            StoreError::UnknownCell => "unknown_cell",
            StoreError::HostExists => "host_exists",
        },
        frame: TurnAwayFrame::Retry,
        close_code: close_code::TRY_AGAIN,
    }
}

/// The store could not be reached to register the control: retryable where it is.
pub const STORE_UNAVAILABLE_TURN_AWAY: TurnAway = TurnAway {
    name: "store_unavailable",
    frame: TurnAwayFrame::Retry,
    close_code: close_code::TRY_AGAIN,
};

/// HO-A1: a reply that may hide a durable result, because the machine that held the attempt is
/// no longer there to answer it (retired, restarted, replaced).
#[must_use]
pub fn needs_durable_record(reply: &HandoffReply) -> bool {
    matches!(
        reply,
        HandoffReply::Superseded { .. }
            | HandoffReply::Refused {
                reason: HandoffRefusal::NoSession
                    | HandoffRefusal::SourceRetired
                    | HandoffRefusal::NotOwner(_),
                ..
            }
    )
}

/// HO-A1: the answer to a duplicate once the durable record of its op id was read (read-only).
/// A committed record is the result; anything else leaves the reply as it was.
#[must_use]
pub fn answer_from_record(reply: HandoffReply, record: Option<&AttemptRow>) -> HandoffReply {
    if !needs_durable_record(&reply) {
        return reply;
    }
    match record {
        Some(row) => match row.outcome {
            AttemptOutcome::Committed { new_epoch, .. } => HandoffReply::Result(HandoffResult {
                op_id: reply.op_id(),
                outcome: TxnOutcome::Committed {
                    target: row.target,
                    new_epoch,
                },
            }),
            AttemptOutcome::FencedAbort | AttemptOutcome::FencedRenewed => reply,
        },
        None => reply,
    }
}

impl HandoffReply {
    /// The op id this reply answers.
    #[must_use]
    pub fn op_id(&self) -> super::ids::OpId {
        match self {
            HandoffReply::Busy { op_id, .. }
            | HandoffReply::InProgress { op_id }
            | HandoffReply::Superseded { op_id, .. }
            | HandoffReply::Refused { op_id, .. } => *op_id,
            HandoffReply::Result(r) => r.op_id,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct HostSlot {
    machine_id: MachineId,
    machine: SourceHandoff,
    control: Option<SessionId>,
}

/// The handoff endpoint of one source cell process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceCell {
    config: SourceConfig,
    authority_cell: super::ids::CellId,
    incarnation: super::ids::Incarnation,
    enabled: bool,
    /// Boxed slots: a B-tree node holds room for eleven entries, and a slot (the machine with
    /// its gate) is a few hundred bytes, so an unboxed map of one host costs a node of ≈ 4.5 KB
    /// on every clone (the model checker clones the cell with every explored state). `Box` is
    /// transparent to `Eq`, `Hash`, `Debug` and serde.
    hosts: BTreeMap<HostId, Box<HostSlot>>,
    /// HO-L1: hosts undrained here whose desktop has not registered again: a second undrain
    /// is refused `not_drained` (the host is served here, and not drained), not
    /// `unknown_host`. At most [`MAX_CELL_HOSTS`] entries; a host leaves at its next
    /// registration.
    #[serde(default)]
    undrained: BTreeSet<HostId>,
    next_id: u64,
    actions: VecDeque<CellAction>,
    /// HO-A5: the backoff of failed drain-fence writes.
    fence_retry: FenceRetry,
}

impl SourceCell {
    /// The endpoint of the process that holds `cell` as `incarnation` (HO-L2).
    #[must_use]
    pub fn new(
        config: SourceConfig,
        cell: super::ids::CellId,
        incarnation: super::ids::Incarnation,
    ) -> SourceCell {
        SourceCell {
            config,
            authority_cell: cell,
            incarnation,
            enabled: true,
            hosts: BTreeMap::new(),
            undrained: BTreeSet::new(),
            next_id: 1,
            actions: VecDeque::new(),
            fence_retry: FenceRetry::default(),
        }
    }

    /// HO-A5: this endpoint with another backoff of failed fence writes (the cell's flags).
    #[must_use]
    pub fn with_fence_retry(mut self, retry: FenceRetry) -> SourceCell {
        self.fence_retry = retry;
        self
    }

    #[must_use]
    pub fn fence_retry(&self) -> FenceRetry {
        self.fence_retry
    }

    // ----- queries -----

    #[must_use]
    pub fn config(&self) -> &SourceConfig {
        &self.config
    }

    /// The cell id this process holds (HO-L2).
    #[must_use]
    pub fn cell_id(&self) -> super::ids::CellId {
        self.authority_cell
    }

    /// The incarnation this process holds its cell as (HO-L2): what its control registrations
    /// are written under.
    #[must_use]
    pub fn incarnation(&self) -> super::ids::Incarnation {
        self.incarnation
    }

    /// HO-A5: whether the disable switch is on for this process (machines made later inherit it).
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    #[must_use]
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// The host's machine and its identity.
    #[must_use]
    pub fn machine(&self, host: HostId) -> Option<(MachineId, &SourceHandoff)> {
        self.hosts.get(&host).map(|s| (s.machine_id, &s.machine))
    }

    /// OPS-1: machines with an attempt in flight (a graceful stop waits for them to end).
    #[must_use]
    pub fn attempts_in_flight(&self) -> usize {
        self.hosts
            .values()
            .filter(|s| s.machine.attempt().is_some())
            .count()
    }

    /// HO-A2 / OPS-2: hosts whose attempt is quarantined now (a gauge: what is stuck while
    /// the store is unreachable).
    #[must_use]
    pub fn quarantined(&self) -> usize {
        self.hosts
            .values()
            .filter(|s| {
                s.machine
                    .attempt()
                    .is_some_and(|a| matches!(a.phase(), Phase::Quarantined { .. }))
            })
            .count()
    }

    /// HO-A5: drained hosts whose fence is not yet written (at most one each: an alert gauge).
    #[must_use]
    pub fn fences_unwritten(&self) -> usize {
        self.hosts
            .values()
            .filter(|s| s.machine.pending_fence().is_some())
            .count()
    }

    /// HO-7: the live work of every host here, by kind (a gauge: what keeps hosts busy).
    #[must_use]
    pub fn live_work(&self) -> QuiescenceCounters {
        let mut sum = QuiescenceCounters::default();
        for slot in self.hosts.values() {
            let c = slot.machine.gate().counters();
            sum.client_conns += c.client_conns;
            sum.splices += c.splices;
            sum.pending_conns += c.pending_conns;
            sum.accepts += c.accepts;
            sum.control_ops += c.control_ops;
        }
        sum
    }

    /// The host's open control session, if any.
    #[must_use]
    pub fn control(&self, host: HostId) -> Option<SessionId> {
        self.hosts.get(&host).and_then(|s| s.control)
    }

    /// The authority the host's machine serves (what activity renewals are written under).
    #[must_use]
    pub fn authority(&self, host: HostId) -> Option<SourceAuthority> {
        self.hosts.get(&host).map(|s| s.machine.authority())
    }

    #[must_use]
    pub fn pending_actions(&self) -> usize {
        self.actions.len()
    }

    /// Next decision for the adapter.
    pub fn poll_action(&mut self) -> Option<CellAction> {
        self.actions.pop_front()
    }

    /// The host's next deadline, naming the machine to feed it to.
    #[must_use]
    pub fn poll_timeout(&self, host: HostId) -> Option<(MachineId, MonoMs)> {
        let slot = self.hosts.get(&host)?;
        slot.machine.poll_timeout().map(|at| (slot.machine_id, at))
    }

    // ----- admission (HO-7, HO-S3) -----

    /// HO-7: a ticket for new work, taken before the work's first await. A host without a
    /// machine here refuses client work as the wrong cell and control work as retired.
    pub fn handle_acquire(
        &mut self,
        host: HostId,
        kind: WorkKind,
    ) -> Result<CellWork, AdmissionRefusal> {
        let Some(slot) = self.hosts.get_mut(&host) else {
            return Err(if kind.is_client_work() {
                AdmissionRefusal::WrongCell
            } else {
                AdmissionRefusal::SourceRetired
            });
        };
        let ticket = slot.machine.handle_acquire(kind)?;
        Ok(CellWork {
            host,
            machine: slot.machine_id,
            ticket,
        })
    }

    /// HO-S3: re-check after an await. `false`: abandon (the ticket is already released, or
    /// its machine is gone).
    pub fn handle_revalidate(&mut self, work: &CellWork) -> bool {
        match self.slot_of(work) {
            Some(slot) => matches!(
                slot.machine.handle_revalidate(work.ticket),
                Revalidation::Continue
            ),
            None => false,
        }
    }

    /// Swap `work`'s ticket for one of `kind` in one step (no idle instant in between).
    pub fn handle_convert(
        &mut self,
        work: &CellWork,
        kind: WorkKind,
    ) -> Result<CellWork, AdmissionRefusal> {
        let Some(slot) = self.slot_of(work) else {
            return Err(AdmissionRefusal::SourceRetired);
        };
        let ticket = slot.machine.handle_acquire(kind)?;
        let _ = slot.machine.handle_release(work.ticket);
        Ok(CellWork { ticket, ..*work })
    }

    /// HO-7: release exactly once. `None`: the machine is gone (nothing to release).
    pub fn handle_release(&mut self, work: &CellWork) -> Option<ReleaseReport> {
        self.slot_of(work)
            .map(|s| s.machine.handle_release(work.ticket))
    }

    /// HO-8: control traffic that is not client work.
    #[must_use]
    pub fn handle_heartbeat(&self, host: HostId, heartbeat: Heartbeat) -> Option<NotCounted> {
        self.hosts
            .get(&host)
            .map(|s| s.machine.handle_heartbeat(heartbeat))
    }

    /// HO-10: a missing or expired DB activity lease is no idleness evidence.
    #[must_use]
    pub fn handle_activity_lease(&self, host: HostId, lease: ActivityLease) -> Option<NotCounted> {
        self.hosts
            .get(&host)
            .map(|s| s.machine.handle_activity_lease(lease))
    }

    fn slot_of(&mut self, work: &CellWork) -> Option<&mut HostSlot> {
        self.hosts
            .get_mut(&work.host)
            .map(|s| &mut **s)
            .filter(|s| s.machine_id == work.machine)
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    // ----- control sessions (HO-A4) -----

    /// HO-S3 / HO-A4: a desktop's control activation, before its first await. At a live
    /// machine it is a counted control operation (refused, retryable, under a barrier); where
    /// there is no live machine (none, retired, drained) [`Self::handle_install_control`] decides.
    pub fn handle_begin_control(
        &mut self,
        host: HostId,
    ) -> Result<Option<CellWork>, AdmissionRefusal> {
        let live = self.hosts.get(&host).is_some_and(|s| {
            !s.machine.gate().is_drained()
                && !matches!(s.machine.gate().state(), GateState::Closed(_))
        });
        if live {
            self.handle_acquire(host, WorkKind::ControlOp).map(Some)
        } else {
            Ok(None)
        }
    }

    /// HO-A5: a control registration [`Self::handle_install_control`] would refuse whatever the
    /// store answers (the host is drained here until an operator undrains it). Asked before
    /// the registration is written, so a drained host's retrying desktop spends no store
    /// writes (each registration renews the generation). `handle_install_control` still decides: a
    /// drain may come between the two.
    #[must_use]
    pub fn control_refusal(&self, host: HostId) -> Option<InstallRefusal> {
        self.hosts
            .get(&host)
            .filter(|s| s.machine.gate().is_drained())
            .map(|_| InstallRefusal::SourceDraining)
    }

    /// HO-A4: install a control the store registered (`authority` from `register_control`),
    /// consuming the activation's ticket `op` (released whatever happens). The old control of
    /// the host, if any, is closed as replaced.
    pub fn handle_install_control(
        &mut self,
        now: MonoMs,
        authority: SourceAuthority,
        desktop_capable: bool,
        op: Option<CellWork>,
    ) -> Result<Installed, InstallRefusal> {
        let host = authority.host;
        let result = self.install(now, authority, desktop_capable, op);
        if let Some(op) = op {
            // Released here on every path; a ticket of a replaced machine is a no-op.
            let _ = self.handle_release(&op);
        }
        crate::invariant!(self.actions.len() <= MAX_CELL_ACTIONS);
        crate::invariant!(result.is_err() || self.control(host).is_some());
        result
    }

    fn install(
        &mut self,
        now: MonoMs,
        authority: SourceAuthority,
        desktop_capable: bool,
        op: Option<CellWork>,
    ) -> Result<Installed, InstallRefusal> {
        let host = authority.host;
        if authority.cell != self.authority_cell || authority.incarnation != self.incarnation {
            return Err(InstallRefusal::WrongAuthority);
        }
        let Some(slot) = self.hosts.get(&host) else {
            if self.hosts.len() >= MAX_CELL_HOSTS {
                return Err(InstallRefusal::TooManyHosts);
            }
            let machine = MachineId(self.fresh_id());
            let session = SessionId(self.fresh_id());
            let slot = HostSlot {
                machine_id: machine,
                machine: self.fresh_machine(now, authority, desktop_capable),
                control: Some(session),
            };
            self.hosts.insert(host, Box::new(slot));
            self.undrained.remove(&host);
            return Ok(Installed {
                machine,
                session,
                how: InstallKind::NewMachine,
            });
        };
        let gate = slot.machine.gate();
        if gate.is_drained() {
            return Err(InstallRefusal::SourceDraining);
        }
        let (machine, how) = if matches!(gate.state(), GateState::Closed(_)) {
            // A retired gate closed over zero tickets and admits nothing since.
            crate::invariant!(gate.counters().is_zero() && slot.machine.attempt().is_none());
            let machine = MachineId(self.fresh_id());
            let fresh = self.fresh_machine(now, authority, desktop_capable);
            let Some(slot) = self.hosts.get_mut(&host) else {
                return Err(InstallRefusal::WrongAuthority);
            };
            slot.machine_id = machine;
            slot.machine = fresh;
            (machine, InstallKind::OverRetired)
        } else {
            let Some(slot) = self.hosts.get_mut(&host) else {
                return Err(InstallRefusal::WrongAuthority);
            };
            // Rebind through our own ticket if it is of this machine, else a temporary one.
            let own = op
                .filter(|w| w.machine == slot.machine_id)
                .map(|w| w.ticket);
            let (ticket, temporary) = match own {
                Some(t) => (t, false),
                None => (
                    slot.machine
                        .handle_acquire(WorkKind::ControlOp)
                        .map_err(InstallRefusal::Admission)?,
                    true,
                ),
            };
            let rebound = slot
                .machine
                .handle_rebind(now, ticket, authority, desktop_capable);
            if temporary {
                let _ = slot.machine.handle_release(ticket);
            }
            rebound.map_err(InstallRefusal::Rebind)?;
            (slot.machine_id, InstallKind::Rebound)
        };
        let session = SessionId(self.fresh_id());
        let Some(slot) = self.hosts.get_mut(&host) else {
            return Err(InstallRefusal::WrongAuthority);
        };
        if let Some(old) = slot.control.replace(session) {
            self.actions.push_back(CellAction::CloseControl {
                host,
                session: old,
                reason: CloseReason::Replaced,
            });
        }
        Ok(Installed {
            machine,
            session,
            how,
        })
    }

    fn fresh_machine(
        &self,
        now: MonoMs,
        authority: SourceAuthority,
        desktop_capable: bool,
    ) -> SourceHandoff {
        let mut m = SourceHandoff::new(self.config, authority, desktop_capable);
        if !self.enabled {
            let _ = m.handle_set_enabled(now, false);
        }
        m
    }

    /// The control session `session` of `host` ended. A session already replaced or closed by
    /// a decision is ignored; otherwise the machine learns it (an attempt in flight still
    /// completes, HO-A3). `true`: the machine was told.
    pub fn handle_control_closed(&mut self, now: MonoMs, host: HostId, session: SessionId) -> bool {
        let Some(slot) = self.hosts.get_mut(&host) else {
            return false;
        };
        if slot.control != Some(session) {
            return false;
        }
        slot.control = None;
        let generation = slot.machine.session_generation();
        let _ = slot.machine.handle_session_closed(now, generation);
        self.collect(host);
        true
    }

    // ----- the director's requests (HO-S1, HO-S2, HO-A1) -----

    /// HO-S2: a handoff request. A host without a machine here has no session.
    pub fn handle_request(&mut self, now: MonoMs, request: &HandoffRequest) -> Begin {
        let host = request.source.host;
        let Some(slot) = self.hosts.get_mut(&host) else {
            return Begin::Answered(HandoffReply::Refused {
                op_id: request.op_id,
                reason: HandoffRefusal::NoSession,
            });
        };
        let begin = slot.machine.handle_request(now, request);
        self.collect(host);
        begin
    }

    /// HO-S4..S6 / HO-A2: the result of `RunTransaction`, for the machine that asked.
    pub fn handle_transaction_result(
        &mut self,
        now: MonoMs,
        host: HostId,
        machine: MachineId,
        attempt: AttemptRef,
        result: DurableResult,
    ) -> Fed {
        self.feed(host, machine, |m| {
            m.handle_transaction_result(now, attempt, result)
        })
    }

    /// HO-A2: the result of `Reconcile`, for the machine that asked.
    pub fn handle_reconcile_result(
        &mut self,
        now: MonoMs,
        host: HostId,
        machine: MachineId,
        attempt: AttemptRef,
        result: DurableResult,
    ) -> Fed {
        self.feed(host, machine, |m| {
            m.handle_reconcile_result(now, attempt, result)
        })
    }

    /// HO-A5: the result of `FenceAuthority`, for the machine that asked. A failure schedules
    /// the machine's retry (its next [`Self::poll_timeout`]); a replaced machine's is `Late`.
    pub fn handle_fence_result(
        &mut self,
        now: MonoMs,
        host: HostId,
        machine: MachineId,
        result: FenceResult,
    ) -> Fed {
        let retry = self.fence_retry;
        self.feed(host, machine, |m| {
            m.handle_fence_result(now, result, &retry)
        })
    }

    /// HO-A2: a deadline of `machine` (from [`Self::poll_timeout`]) passed.
    pub fn handle_timeout(&mut self, now: MonoMs, host: HostId, machine: MachineId) -> Fed {
        self.feed(host, machine, |m| m.handle_timeout(now))
    }

    fn feed(
        &mut self,
        host: HostId,
        machine: MachineId,
        f: impl FnOnce(&mut SourceHandoff) -> Disposition,
    ) -> Fed {
        let Some(slot) = self
            .hosts
            .get_mut(&host)
            .filter(|s| s.machine_id == machine)
        else {
            return Fed::Late;
        };
        let disposition = f(&mut slot.machine);
        self.collect(host);
        Fed::Applied(disposition)
    }

    /// HO-A5: the disable switch, for every machine now and every machine made later.
    pub fn handle_set_enabled(&mut self, now: MonoMs, enabled: bool) {
        self.enabled = enabled;
        for slot in self.hosts.values_mut() {
            let _ = slot.machine.handle_set_enabled(now, enabled);
        }
    }

    // ----- operator (HO-A5, HO-L1) -----

    /// HO-A5: emergency drain / auth enforcement of one host. The hard drain runs unchanged
    /// (every client and the control close), whether or not the machine was already drained.
    /// `None`: no such host here.
    pub fn handle_emergency_drain(
        &mut self,
        now: MonoMs,
        host: HostId,
        reason: DrainReason,
    ) -> Option<bool> {
        let slot = self.hosts.get_mut(&host)?;
        let applied = matches!(
            slot.machine.handle_emergency_drain(now, reason),
            Disposition::Applied
        );
        let control = slot.control.take();
        self.actions.push_back(CellAction::HardDrain { host });
        if let Some(session) = control {
            self.actions.push_back(CellAction::CloseControl {
                host,
                session,
                reason: CloseReason::Drained(reason),
            });
        }
        self.collect(host);
        Some(applied)
    }

    /// HO-L1: the drain's recovery path. A drained host whose attempt has ended, whose work
    /// has closed and whose fence is written (HO-A5) is forgotten here, so the desktop's next registration gets a fresh machine
    /// (its store fence already bumped the generation: nothing old can commit).
    pub fn handle_undrain(&mut self, host: HostId) -> Result<(), UndrainRefusal> {
        let Some(slot) = self.hosts.get(&host) else {
            // HO-L1: undrained already (its desktop has not registered again): not drained.
            return Err(if self.undrained.contains(&host) {
                UndrainRefusal::NotDrained
            } else {
                UndrainRefusal::UnknownHost
            });
        };
        let gate = slot.machine.gate();
        if !gate.is_drained() {
            return Err(UndrainRefusal::NotDrained);
        }
        if slot.machine.attempt().is_some() {
            return Err(UndrainRefusal::AttemptInFlight);
        }
        if !gate.counters().is_zero() {
            return Err(UndrainRefusal::StillClosing);
        }
        if slot.machine.pending_fence().is_some() {
            return Err(UndrainRefusal::FenceUnwritten);
        }
        crate::invariant!(slot.control.is_none(), "a drain closes the control");
        self.hosts.remove(&host);
        if self.undrained.len() < MAX_CELL_HOSTS {
            self.undrained.insert(host);
        }
        self.actions.push_back(CellAction::Forget { host });
        Ok(())
    }

    /// Move the host's machine actions to the endpoint's queue, closing its control before
    /// a retirement (HO-S5 / HO-A6: whether or not the reply can be delivered).
    fn collect(&mut self, host: HostId) {
        let Some(slot) = self.hosts.get_mut(&host) else {
            return;
        };
        while let Some(action) = slot.machine.poll_action() {
            if let HandoffAction::RetireSourceDraining { reason } = action {
                if let Some(session) = slot.control.take() {
                    self.actions.push_back(CellAction::CloseControl {
                        host,
                        session,
                        reason: CloseReason::Retired(reason),
                    });
                }
            }
            self.actions.push_back(CellAction::Machine {
                host,
                machine: slot.machine_id,
                action,
            });
        }
        crate::invariant!(self.actions.len() <= MAX_CELL_ACTIONS);
    }
}
