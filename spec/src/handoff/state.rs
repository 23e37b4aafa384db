//! The model's state: the core's machines and store, and what the environment holds.

use super::*;

/// A relay client's progress at the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ClientPhase {
    Away,
    Accepting(Ticket),
    /// Attached, waiting for durable persistence (already a `ClientConn`).
    Attaching(Ticket),
    Attached(Ticket),
}

impl ClientPhase {
    pub(super) fn ticket(self) -> Option<Ticket> {
        match self {
            ClientPhase::Away => None,
            ClientPhase::Accepting(t) | ClientPhase::Attaching(t) | ClientPhase::Attached(t) => {
                Some(t)
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Client {
    pub phase: ClientPhase,
    pub visits_left: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum JobKind {
    Transaction,
    Reconcile,
}

/// Work the machine handed to the DB (`RunTransaction` / `Reconcile`), not yet run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Job {
    /// The machine instance that asked (a restart makes a new one).
    pub inst: u8,
    pub kind: JobKind,
    pub attempt: AttemptRef,
    pub request: HandoffRequest,
    /// Asked by the quarantine retry after a `StoreUnavailable` quarantine.
    pub after_quarantine: bool,
}

impl Job {
    pub(super) fn key(&self) -> (u8, JobKind, AttemptRef, bool) {
        (self.inst, self.kind, self.attempt, self.after_quarantine)
    }
}

/// Counted environment events left in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Budget {
    pub faults: u8,
    pub replacements: u8,
    pub restarts: u8,
    pub drains: u8,
    pub time_advances: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HoState {
    pub now: MonoMs,
    pub store: AssignmentStore,
    /// The source machine of the host at `SRC` (`None` once a restarted source found the host
    /// moved).
    pub src: Option<SourceHandoff>,
    /// Instance number of `src` (bumped by a restart).
    pub inst: u8,
    /// The previous process's machine (instance `inst - 1`) while it finishes its attempt after
    /// a rolling restart.
    /// Boxed: it is rarely there, and every explored state carries this field.
    pub old_src: Option<Box<SourceHandoff>>,
    pub clients: Vec<Client>,
    /// A replacement control's activation in flight.
    pub control: Option<Ticket>,
    /// The request the director is working on (forgotten on a final answer or a crash).
    pub dir_request: Option<HandoffRequest>,
    /// DB jobs not yet run, sorted.
    pub jobs: Vec<Job>,
    /// A drain fence the adapter has still to write.
    pub pending_fence: Option<SourceAuthority>,
    pub db_up: bool,
    pub disabled: bool,
    pub target_full: bool,
    pub budget: Budget,
    pub last: StepFacts,
}

impl HoState {
    /// Work the environment holds at the current source (independent of the core's counters).
    pub fn live_work(&self) -> u8 {
        let clients = self
            .clients
            .iter()
            .filter(|c| c.phase.ticket().is_some())
            .count();
        u8::try_from(clients).unwrap_or(u8::MAX) + u8::from(self.control.is_some())
    }

    pub fn moved(&self) -> bool {
        self.store.assignment(HOST).is_some_and(|r| r.cell != SRC)
    }

    /// The next deadline: a machine's timer or a registration expiry.
    pub fn next_deadline(&self) -> Option<MonoMs> {
        self.machines()
            .filter_map(|(_, m)| m.poll_timeout())
            .chain(self.store.reservations().map(|(_, r)| r.expires_at))
            .min()
    }

    /// The live source machines with their instance numbers (current first).
    pub fn machines(&self) -> impl Iterator<Item = (u8, &SourceHandoff)> {
        let old = self.inst.wrapping_sub(1);
        self.src
            .iter()
            .map(move |m| (self.inst, m))
            .chain(self.old_src.as_deref().map(move |m| (old, m)))
    }

    pub fn machine(&self, inst: u8) -> Option<&SourceHandoff> {
        if inst == self.inst {
            self.src.as_ref()
        } else if inst.wrapping_add(1) == self.inst {
            self.old_src.as_deref()
        } else {
            None
        }
    }

    pub(super) fn machine_mut(&mut self, inst: u8) -> Option<&mut SourceHandoff> {
        if inst == self.inst {
            self.src.as_mut()
        } else if inst.wrapping_add(1) == self.inst {
            self.old_src.as_deref_mut()
        } else {
            None
        }
    }

    /// The job belongs to the attempt in flight of the machine that asked for it.
    pub(super) fn is_current_job(&self, job: &Job) -> bool {
        self.machine(job.inst)
            .and_then(|m| m.attempt())
            .is_some_and(|a| a.attempt == job.attempt)
    }
}
