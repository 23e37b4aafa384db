//! What a trace records (the projection) and how actions read.

use std::fmt;

use super::*;

/// The machine's terminal outcome, as a small enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    Committed,
    RolledBack,
    Fenced,
    AuthorityChanged,
}

impl OutcomeKind {
    pub fn of(outcome: &TxnOutcome) -> OutcomeKind {
        match outcome {
            TxnOutcome::Committed { .. } => OutcomeKind::Committed,
            TxnOutcome::RolledBack {
                reason: AbortReason::Fenced,
            } => OutcomeKind::Fenced,
            TxnOutcome::RolledBack { .. } => OutcomeKind::RolledBack,
            TxnOutcome::AuthorityChanged { .. } => OutcomeKind::AuthorityChanged,
        }
    }
}

/// The source's admission state, as a small enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateKind {
    Open,
    Gated,
    Retired,
    StaleRetired,
    Drained,
}

impl GateKind {
    pub fn of(state: GateState) -> GateKind {
        match state {
            GateState::Open => GateKind::Open,
            GateState::Gated(_) => GateKind::Gated,
            GateState::Closed(ClosedReason::Committed) => GateKind::Retired,
            GateState::Closed(ClosedReason::StaleAuthority) => GateKind::StaleRetired,
            GateState::Closed(ClosedReason::Drained) => GateKind::Drained,
        }
    }
}

/// What a trace records after each step, and what a replay must reproduce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoProjection {
    pub now_ms: u64,
    /// The store's assignment of the host: cell, epoch, incarnation, generation.
    pub assigned_cell: u32,
    pub epoch: u64,
    pub incarnation: u64,
    pub generation: u64,
    pub reservations: usize,
    pub committed_ops: usize,
    pub fenced_ops: usize,
    pub source: Option<SourceProjection>,
    /// The old process's machine after a rolling restart, while its attempt ends.
    pub old_source: Option<SourceProjection>,
    pub clients: Vec<ClientProjection>,
    /// Clients with a relayed mutation in flight (a `Splice` ticket).
    pub splices: usize,
    pub pending_conn: bool,
    pub control_op_in_flight: bool,
    pub director_holds_request: bool,
    pub db_jobs: Vec<(JobKind, bool)>,
    pub db_up: bool,
    pub pending_fence: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientProjection {
    Away,
    Accepting,
    Attaching,
    Attached,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseKind {
    InTransaction,
    Reconciling,
    Quarantined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceProjection {
    pub gate: GateKind,
    pub drained: bool,
    pub enabled: bool,
    pub counters: QuiescenceCounters,
    pub phase: Option<PhaseKind>,
    pub last_outcome: Option<OutcomeKind>,
}

impl SourceProjection {
    pub fn of(m: &SourceHandoff) -> SourceProjection {
        SourceProjection {
            gate: GateKind::of(m.gate().state()),
            drained: m.gate().is_drained(),
            enabled: m.is_enabled(),
            counters: m.gate().counters(),
            phase: m.attempt().map(|a| match a.phase() {
                Phase::InTransaction { .. } => PhaseKind::InTransaction,
                Phase::Reconciling { .. } => PhaseKind::Reconciling,
                Phase::Quarantined { .. } => PhaseKind::Quarantined,
            }),
            last_outcome: m.last_result().map(|r| OutcomeKind::of(&r.outcome)),
        }
    }
}

impl HoState {
    pub fn project(&self) -> HoProjection {
        let row = self.store.assignment(HOST);
        let count = |committed: bool| {
            self.store
                .attempts()
                .filter(|(_, r)| matches!(r.outcome, AttemptOutcome::Committed { .. }) == committed)
                .count()
        };
        HoProjection {
            now_ms: self.now.as_ms(),
            assigned_cell: row.map_or(0, |r| r.cell.0),
            epoch: row.map_or(0, |r| r.epoch.0),
            incarnation: row.map_or(0, |r| r.incarnation.0),
            generation: row.map_or(0, |r| r.generation.0),
            reservations: self.store.reservations().count(),
            committed_ops: count(true),
            fenced_ops: count(false),
            source: self.src().map(SourceProjection::of),
            old_source: self
                .old_cell
                .as_deref()
                .and_then(|c| c.machine(HOST))
                .map(|(_, m)| SourceProjection::of(m)),
            clients: self
                .clients
                .iter()
                .map(|c| match c.phase {
                    ClientPhase::Away => ClientProjection::Away,
                    ClientPhase::Accepting(_) => ClientProjection::Accepting,
                    ClientPhase::Attaching(_) => ClientProjection::Attaching,
                    ClientPhase::Attached(_) => ClientProjection::Attached,
                })
                .collect(),
            splices: self.clients.iter().filter(|c| c.splice.is_some()).count(),
            pending_conn: self.pending.is_some(),
            control_op_in_flight: self.control.is_some(),
            director_holds_request: self.dir_request.is_some(),
            db_jobs: self
                .jobs
                .iter()
                .map(|j| (j.kind, self.is_current_job(j)))
                .collect(),
            db_up: self.db_up,
            pending_fence: self.pending_fence.is_some(),
        }
    }
}

impl fmt::Display for HoAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoAction::DirectorSends { lost: false } => write!(f, "the director sends its request"),
            HoAction::DirectorSends { lost: true } => {
                write!(f, "the director sends its request; the answer is lost")
            }
            HoAction::DirectorCrashRestart => {
                write!(
                    f,
                    "the director crashes, restarts and recomputes its request"
                )
            }
            HoAction::ClientArrives { client } => {
                write!(f, "{} arrives (accept)", client_name(*client))
            }
            HoAction::ClientAttaches { client } => write!(
                f,
                "{} attaches (its activity write goes out, the accept still counted)",
                client_name(*client)
            ),
            HoAction::ClientPersisted { client } => {
                write!(f, "{}'s attach is persisted", client_name(*client))
            }
            HoAction::ClientLeaves { client } => write!(f, "{} leaves", client_name(*client)),
            HoAction::ClientRelays { client } => write!(
                f,
                "{} relays a mutation to the desktop (splice)",
                client_name(*client)
            ),
            HoAction::DesktopAcks { client } => {
                write!(f, "the desktop acks {}'s mutation", client_name(*client))
            }
            HoAction::PendingOpens => write!(f, "a pending connection opens"),
            HoAction::PendingEnds => write!(f, "the pending connection ends"),
            HoAction::ControlActivates => write!(f, "a replacement control activates"),
            HoAction::DesktopReconnects => write!(f, "the desktop reconnects its control"),
            HoAction::ControlRegisters => {
                write!(f, "the control registers in the store and is installed")
            }
            HoAction::ControlCloses => write!(f, "the desktop's control session closes"),

            HoAction::SourceRestart { old_lingers: false } => write!(
                f,
                "the source cell restarts (the old process dies; its lease lapses)"
            ),
            HoAction::SecondProcessStarts => {
                write!(f, "a second process starts with the source cell's id")
            }
            HoAction::SourceRestart { old_lingers: true } => write!(
                f,
                "the source cell restarts (the old process finishes its attempt)"
            ),
            HoAction::DbRuns { job, delivery } => {
                write!(
                    f,
                    "the DB runs job {job}; result {}",
                    delivery_name(*delivery)
                )
            }
            HoAction::LateCallback { job, delivery } => write!(
                f,
                "the DB runs old job {job}; late result {}",
                delivery_name(*delivery)
            ),
            HoAction::DbOutage => write!(f, "the DB goes down"),
            HoAction::DbRecovers => write!(f, "the DB recovers"),
            HoAction::FenceWrites => write!(f, "the drain fence is written"),
            HoAction::EmergencyDrain => write!(f, "emergency drain"),
            HoAction::Undrain => write!(f, "an operator undrains the host"),
            HoAction::Disable => write!(f, "the handoff correction is disabled"),
            HoAction::Enable => write!(f, "the handoff correction is enabled again"),
            HoAction::TargetCapacity { full: true } => write!(f, "the target fills up"),
            HoAction::TargetCapacity { full: false } => write!(f, "the target frees a slot"),
            HoAction::TargetRegisters => write!(f, "the desktop registers at the target"),
            HoAction::TimeAdvances => write!(f, "time advances to the next deadline"),
            HoAction::ClientPersistFails { client } => write!(
                f,
                "{}'s activity write fails (closed activity_not_persisted)",
                client_name(*client)
            ),
            HoAction::FenceFails => write!(f, "the drain fence's write fails (DB down)"),
            HoAction::SecondControlActivates => {
                write!(f, "a second control of the desktop activates")
            }
            HoAction::SecondControlRegisters => write!(
                f,
                "the second control registers in the store and is installed"
            ),
        }
    }
}

pub fn client_name(client: u8) -> &'static str {
    match client {
        0 => "phone",
        1 => "iPad",
        2 => "laptop",
        _ => "client",
    }
}

fn delivery_name(delivery: Delivery) -> &'static str {
    match delivery {
        Delivery::Delivered => "delivered",
        Delivery::Lost => "lost (ambiguous)",
        Delivery::Unavailable => "store unavailable",
    }
}
