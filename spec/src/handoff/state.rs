//! The model's state: the source cell processes (real [`SourceCell`] endpoints), the reference
//! store, and what the environment holds (client and control work, the director's request,
//! the DB's queue, the fence to write, the budget of faults).

use super::*;

/// A ticket of one machine, as a unit of work holds it ([`CellWork`] without the host: there is
/// one). Kept apart from `CellWork` so that clients can be sorted (symmetry reduction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Held {
    pub machine: MachineId,
    pub ticket: Ticket,
}

impl Held {
    pub fn of(work: CellWork) -> Held {
        Held {
            machine: work.machine,
            ticket: work.ticket,
        }
    }

    pub fn work(self) -> CellWork {
        CellWork {
            host: HOST,
            machine: self.machine,
            ticket: self.ticket,
        }
    }
}

/// A relay client's progress at the source. Between accept and attached the core's
/// [`Attach`] machine holds the client's `Accept` ticket (the adapter's `clients.rs` drives the
/// same machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ClientPhase {
    Away,
    /// Accepted (`acquire(Accept)`), before the socket upgrade's await.
    Accepting(Attach),
    /// The activity write is out (HO-7: an attach waiting for durable persistence, counted as
    /// its accept).
    Attaching(Attach),
    Attached(Held),
}

impl ClientPhase {
    pub fn held(self) -> Option<Held> {
        match self {
            ClientPhase::Away => None,
            ClientPhase::Accepting(a) | ClientPhase::Attaching(a) => a.ticket().map(Held::of),
            ClientPhase::Attached(h) => Some(h),
        }
    }
}

/// HO-A5: a drain fence write the adapter holds (one `FenceAuthority`), with the process and
/// machine its result is fed back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FenceJob {
    pub inst: u8,
    pub machine: MachineId,
    pub authority: SourceAuthority,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Client {
    pub phase: ClientPhase,
    pub visits_left: u8,
    /// HO-7: the `Splice` ticket of a mutation relayed to the desktop, held until its ack (the
    /// adapter's `relay_mutation`): only while attached.
    pub splice: Option<Held>,
}

/// Why a desktop control activation is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ControlKind {
    /// A second control while the first is open (HO-A4: the live machine is rebound).
    Replacement,
    /// The desktop comes back after its control closed, or after the cell retired or drained
    /// its source (a new machine, a fresh one over a retired one, a rebind, or refused).
    Reconnect,
}

/// A control activation between `handle_begin_control` and `handle_install_control` (the store
/// registration is the await in between).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ControlOp {
    pub kind: ControlKind,
    /// The counted `ControlOp` ticket `handle_begin_control` took at a live machine; `None` where
    /// there was none (no machine, retired, drained): `handle_install_control` decides.
    pub held: Option<Held>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum JobKind {
    Transaction,
    Reconcile,
}

/// CellWork a machine handed to the DB (`RunTransaction` / `Reconcile`, from a
/// `CellAction::Machine`), not yet run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Job {
    /// The process that asked (`HoState::inst` numbering: a restart makes a new one).
    pub inst: u8,
    /// The machine that asked: its result is fed back naming it.
    pub machine: MachineId,
    pub kind: JobKind,
    pub attempt: AttemptRef,
    pub request: HandoffRequest,
    /// Asked by the quarantine retry after a `StoreUnavailable` quarantine.
    pub after_quarantine: bool,
}

impl Job {
    pub(super) fn key(&self) -> (u8, MachineId, JobKind, AttemptRef, bool) {
        (
            self.inst,
            self.machine,
            self.kind,
            self.attempt,
            self.after_quarantine,
        )
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
    pub reconnects: u8,
    pub undrains: u8,
    /// Mutations relayed (`Splice` tickets) left in this run.
    pub splices: u8,
    /// Pending connections (`PendingConn` tickets) left in this run.
    pub pending_conns: u8,
    /// Second control activations left in this run (the registrations scenario).
    pub registrations: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HoState {
    pub now: MonoMs,
    pub store: SharedPart<AssignmentStore>,
    /// The source cell process holding `SRC` now (process number `inst`). It has no machine
    /// for the host when a restarted process found the host moved, after an undrain, or
    /// before the desktop's registration was installed.
    pub cell: SourceCell,
    /// Process number of `cell` (bumped by a restart).
    pub inst: u8,
    /// The previous process (number `inst - 1`) while it finishes its attempt after a rolling
    /// restart. Boxed: it is rarely there, and every explored state carries this field.
    pub old_cell: Option<Box<SourceCell>>,
    pub clients: Vec<Client>,
    /// HO-7: a pending connection's `PendingConn` ticket, between its acquire and its end.
    pub pending: Option<Held>,
    /// A desktop control activation in flight at `cell`.
    pub control: Option<ControlOp>,
    /// The request the director is working on (forgotten on a final answer or a crash).
    pub dir_request: Option<HandoffRequest>,
    /// DB jobs not yet run, sorted.
    pub jobs: Vec<Job>,
    /// A drain fence write the adapter has out (its result not yet fed back).
    pub pending_fence: Option<FenceJob>,
    pub db_up: bool,
    pub disabled: bool,
    pub target_full: bool,
    /// HO-L1: an operator undrained the host in this process (the drain's recovery path).
    pub undrained: bool,
    pub budget: Budget,
    pub last: StepFacts,
    /// A core invariant (or another panic) fired in the step that led here: its message
    /// (`crate::caught`). Nothing is explored from such a state; `None` in a correct run.
    pub core_panic: Option<String>,
    /// HO-A4: a second control activation of the desktop racing the first (the registrations
    /// scenario): between its `handle_begin_control` and its registration.
    pub control2: Option<ControlOp>,
    /// HO-S4: the SQL store's escrowed limit shards, kept beside the reference store as the
    /// SQL store would write them ([`EscrowShadow`]).
    pub escrow: EscrowShadow,
    /// HO-L4: the op id whose attempt the store last rolled back for a reason that clears
    /// (anything but `Fenced` and `InvalidOpId`, by the spec's own list), delivered to the
    /// machine that held it, and when: the spec's record of the refusal's hold.
    pub refused: Option<(OpId, MonoMs)>,
}

impl HoState {
    /// CellWork the environment holds at the current source (independent of the core's counters).
    pub fn live_work(&self) -> u8 {
        let held = self.held_work();
        u8::try_from(held.total()).unwrap_or(u8::MAX)
    }

    /// HO-7: the work the environment holds at the current source, by the kind it asked for
    /// (not the kind the core's ticket names): what the gate's counters must equal.
    pub fn held_work(&self) -> QuiescenceCounters {
        let mut held = QuiescenceCounters::default();
        for c in &self.clients {
            match c.phase {
                ClientPhase::Away => {}
                ClientPhase::Accepting(_) | ClientPhase::Attaching(_) => held.accepts += 1,
                ClientPhase::Attached(_) => held.client_conns += 1,
            }
            held.splices += u32::from(c.splice.is_some());
        }
        held.pending_conns = u32::from(self.pending.is_some());
        held.control_ops = u32::from(self.control.is_some_and(|c| c.held.is_some()))
            + u32::from(self.control2.is_some_and(|c| c.held.is_some()));
        held
    }

    /// HO-L2: the source cell's row as a starting process reads it under the cell's lock:
    /// (incarnation, lease end).
    pub fn lease(&self) -> Option<(Incarnation, MonoMs)> {
        self.store.lease_of(SRC)
    }

    /// HO-L2: the end of the source cell's identity lease.
    pub fn lease_until(&self) -> MonoMs {
        self.lease().map_or(MonoMs::ZERO, |(_, until)| until)
    }

    pub fn moved(&self) -> bool {
        self.store.assignment(HOST).is_some_and(|r| r.cell != SRC)
    }

    /// The current process's machine for the host.
    pub fn src(&self) -> Option<&SourceHandoff> {
        self.cell.machine(HOST).map(|(_, m)| m)
    }

    /// The next deadline: a machine's timer or a registration expiry.
    pub fn next_deadline(&self) -> Option<MonoMs> {
        self.machines()
            .filter_map(|(_, _, m)| m.poll_timeout())
            // HO-L4: the end of a refusal's hold is when the director's next request of that
            // op id starts a new attempt (no timer fires: it only changes the next answer).
            .chain(
                self.machines()
                    .filter_map(|(_, _, m)| m.refusal_hold_until())
                    .filter(|until| *until > self.now),
            )
            .chain(self.store.reservations().map(|(_, r)| r.expires_at))
            .min()
    }

    /// The live processes with their numbers (current first).
    pub fn cells(&self) -> impl Iterator<Item = (u8, &SourceCell)> {
        let old = self.inst.wrapping_sub(1);
        std::iter::once((self.inst, &self.cell))
            .chain(self.old_cell.as_deref().map(move |c| (old, c)))
    }

    /// The live machines of the host with their process numbers and ids (current first).
    pub fn machines(&self) -> impl Iterator<Item = (u8, MachineId, &SourceHandoff)> {
        self.cells()
            .filter_map(|(inst, c)| c.machine(HOST).map(|(id, m)| (inst, id, m)))
    }

    /// Process `inst`, if it lives.
    pub fn cell_of(&self, inst: u8) -> Option<&SourceCell> {
        if inst == self.inst {
            Some(&self.cell)
        } else if inst.wrapping_add(1) == self.inst {
            self.old_cell.as_deref()
        } else {
            None
        }
    }

    pub(super) fn cell_of_mut(&mut self, inst: u8) -> Option<&mut SourceCell> {
        if inst == self.inst {
            Some(&mut self.cell)
        } else if inst.wrapping_add(1) == self.inst {
            self.old_cell.as_deref_mut()
        } else {
            None
        }
    }

    /// The job belongs to the attempt in flight of the machine that asked for it.
    pub fn is_current_job(&self, job: &Job) -> bool {
        self.cell_of(job.inst)
            .and_then(|c| c.machine(HOST))
            .is_some_and(|(id, m)| {
                id == job.machine && m.attempt().is_some_and(|a| a.attempt() == job.attempt)
            })
    }
}
