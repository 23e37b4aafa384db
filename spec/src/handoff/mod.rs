//! `HandoffModel`: the real HO core in an environment of one host, a source cell and a target
//! cell. Each source cell process is a real [`SourceCell`] (the sans-IO endpoint the production
//! cell adapter runs on: machine table, machine and session identities, control installation,
//! fencing of late work, drain and undrain), beside the reference [`AssignmentStore`] and the
//! director's real [`evaluate`]. Every model action is the same `SourceCell` / store call
//! sequence the adapter makes, and every `CellAction` the cell emits is executed by the
//! environment (DB jobs naming the machine that asked, the fence to write, the sessions to
//! close, the hard drain). In this environment
//!
//! - a director picks read-only from the store and sends the handoff request, re-delivers it
//!   (duplicates), loses the answer and retries, or crashes and restarts (recomputing the request
//!   from the store); a reply that may hide a durable result is answered from the store's record
//!   (`answer_from_record`, HO-A1), as the adapter does;
//! - clients (phone, iPad) arrive (`acquire(Accept)`), then the core's attach machine
//!   ([`Attach`], which the adapter's `clients.rs` drives too) takes them on: `revalidate` and
//!   the activity write goes out while the accept still counts; the write lands
//!   (`revalidate`, `convert(.., ClientConn)`) or fails (the accept released, the client
//!   closed `activity_not_persisted`); attached clients leave (`release`), racing the barrier;
//! - HO-7's other kinds (the work-kinds [`Scenario`]): an attached client relays a mutation
//!   (`acquire(Splice)`, released on the desktop's ack, at once if the desktop is not connected,
//!   or before the connection when the client leaves: the adapter's `relay_mutation` and client
//!   loop), and a pending connection comes and goes (`acquire(PendingConn)`, `revalidate`,
//!   `release`; no adapter takes this kind yet, so the model gives it the contract every ticket
//!   has);
//! - every ended unit of work's release arrives once more, late (an old session's guard): the
//!   core must answer `StaleGeneration` (older generation) or `DoubleRelease` and change no
//!   counter; after a rebind, every ended ticket id of the old generation is released late the
//!   same way; and at every step each *live* ticket is released late with another generation
//!   (one older, one newer than its own), which must be `StaleGeneration` and change nothing;
//! - two registrations of one host racing (the registrations [`Scenario`]): a second control
//!   activation of the desktop begins (`control_refusal`, `handle_begin_control`: without a ticket
//!   where there is no machine yet) and registers (`register_control`, `handle_install_control`)
//!   after the first was installed, after a barrier went up (it must be refused
//!   `ControlGated`, the attempt's machine and barrier kept), or after the source retired
//!   stale (a fresh machine over the retired one: `InstallKind::OverRetired`);
//! - the SQL store's escrowed limit shards beside the reference store ([`EscrowShadow`]: two
//!   shard rows and the target's load rows, written through the core's `escrow` functions as
//!   the SQL store writes them: token path or exact path per commit, a rebalance per fence
//!   record, a release on its reservation's shard, the target's tokens revoked when its row
//!   changes), judged after every store write against the store's rows;
//! - every step runs under `crate::caught`: a core invariant (`invariant!`, on in the
//!   checker's build) that fires is that step's counterexample, with its message;
//! - a second host (`HOST2`) on the source cell, with the epoch, incarnation and generation the
//!   first had before its first registration: the director's pick for it (from a copy of the
//!   store with its row, [`HandoffModel::pick_second_host`]) is judged beside every request
//!   (HO-S1: at the first request only the host tells the two op ids apart);
//! - the desktop's control: a replacement while it is open (`control_refusal`,
//!   `handle_begin_control`, the store's `register_control`, `handle_install_control(.., Some(op))`: a
//!   rebind), its close (`control_closed`), its reconnect after the close or after the cell
//!   drained its source (the same calls; a rebind, a new machine after an undrain, or the
//!   `SourceDraining` refusal before the store is written), and the late end of a session the
//!   cell itself closed (`control_closed` with the old session id);
//! - the source cell process restarts (HO-L2: one live process per cell id, a lease beside the
//!   cell's incarnation in the store: `start_cell`, `renew_cell_lease` at every clock jump,
//!   `release_cell_lease` on a graceful stop): the successor takes the cell with the next
//!   incarnation once the old process's lease is gone, then a new `SourceCell`, the store's
//!   `register_control`, `handle_install_control(.., None)`. The old process either dies (the
//!   successor started at once is refused while the dead lease runs and takes the cell when it
//!   has lapsed; the dead process's DB work may still land, and its results are delivered to
//!   the new process under the machine id they name, which must fence or ignore them) or, in a
//!   rolling restart, releases its lease on the stop signal and lives on until its attempt in
//!   flight has ended (its results reach it; its control socket closes). A second process
//!   started with the cell's id while the holder lives is refused and writes nothing;
//! - the DB runs each transaction / reconciliation a machine asked for and the result is
//!   delivered, lost (ambiguous), or `StoreUnavailable` during an outage; the outage recovers;
//! - an emergency drain (`emergency_drain`: hard drain, control closed, the store fence write
//!   racing the transaction) and its recovery, an operator's `undrain` (HO-L1, refused while
//!   the fence is unwritten). The fence write's result is fed back
//!   (`handle_fence_result`): written when the DB is up, failed whenever it is down, and the
//!   machine's retry timer (among the deadlines of "time advances") sends it out again. A
//!   fence write of a process that died reaches the store but no process; the disable
//!   switch (store and every process) and its re-enable; the target filling up (the explicit,
//!   authority-unchanged abort); the desktop registering at the target; and time advancing to
//!   the next deadline (each machine's timer from `poll_timeout`, fed with the machine id it
//!   names; the timers of replaced machines firing late; registration expiry).
//!
//! Every step drives the core, drains its actions into the environment and records
//! [`StepFacts`]; the properties ([`handoff_properties`]) judge them and the state. Property
//! names start with the requirement ID; the `sometimes` ones are named `<ID> witness: ...`.
//!
//! Abstractions (each keeps the state space finite without changing a decision):
//! - one host that moves, one target; every participant has the HO-C1 capability. The second
//!   host is only read by the director (a second host's attempt is the same machine with
//!   another key in the cell's table). A second move of the same host needs the target to run a
//!   source machine for it, which the model does not have; a core that derives the op id
//!   without the epoch is caught by the HO-S1 judge that varies each authority field of every
//!   request, not by a second move: the generation alone already differs between any two
//!   authorities of a host at the same cell (every registration and fence bumps it, and a
//!   commit changes the cell), so no reachable pair of moves differs in the epoch only;
//! - the machine's asynchronous `Reply(Result)` is always lost on its way to the director: the
//!   director learns outcomes only by re-sending (HO-A3 / HO-A6: nothing at the source depends on
//!   delivering it). A second director is the same as a restarted one re-sending the same id;
//! - the director does not re-pick an op the source has already answered (a kept request,
//!   after a lost answer or a crash, re-sends it: the same duplicate). The HO-L1 property reads
//!   the fresh pick itself, so this pruning hides no stranded host;
//! - clients are interchangeable: the state keeps them sorted (symmetry reduction; action
//!   `client` indices refer to that order). The hard drain's client closes are the clients'
//!   own later steps (their continuations abandon, an attached client leaves and releases):
//!   every order of the adapter's closes is among them;
//! - a DB job executes and its result is delivered (or lost) in one step; a reconciliation's
//!   result is not lost (to the source that is its timeout: both quarantine as
//!   `ReconcileAmbiguous`, and the timeout leaves the job to land later); a job that never runs
//!   is the same as one lost before reaching the DB (its request timeout still fires);
//! - faults are offered only where they can matter: a director crash needs an attempt in
//!   flight, a drain an attempt or live work, a restart an attempt or a moved host, a DB outage
//!   queued DB work, the target filling up a queued transaction; the desktop reconnects only
//!   where it has no open control and its host is still assigned here (else it registers at
//!   the target);
//! - at most `max_faults` faults per run, each counted kind at most its budget, reconnects and
//!   undrains their own budget, splices and pending connections theirs, and time moves only to
//!   the next deadline, `time_advances` times ([`HandoffParams`]); an undrain the cell refuses
//!   changes nothing and costs nothing;
//! - everything else that can grow (live tickets, DB jobs, reservations, attempt records,
//!   machine and session ids) has a cap that is a property (`... bounded: ...`): a core that
//!   leaks one per request is reported when it passes the cap, and `actions` explores nothing
//!   from a state past a cap, nor from a step a property judged wrong (a counterexample
//!   already), so a leak ends the run instead of exhausting memory.
//!
//! What the model leaves out, and why:
//! - in the review and work-kinds scenarios, `InstallKind::OverRetired` (a registration over a
//!   retired machine of the same process): a stale retire at the current process needs an
//!   authority change the cell did not install, which only a second registration racing the
//!   first makes (the registrations scenario reaches it; with one target the host never comes
//!   back after a commit); `core/tests/ho_ambiguity_restarts.rs::
//!   ho_a4_a_retired_source_gets_a_fresh_machine_and_late_results_of_the_old_one_are_fenced`
//!   covers it as well;
//! - the registrations scenario has no restart, drain or undrain (the review scenario covers
//!   them; a second activation is only the current process's), and more than two
//!   activations at once (a third races as the second does);
//! - the escrow shadow: the enrolment's host tokens (`enrol_path`, `enrol_exact`: the model
//!   creates its hosts at the start; the enrolment model, `spec/src/enrol.rs`), a settings
//!   change (never made here), and concurrent writers (one transaction at a time: the locked
//!   shard is the hint's, or the first other one with every token, as a writer holding the
//!   hint's would leave it). With one host that moves once, a commit either deals the tokens
//!   (a fresh store, the review scenario) or spends them (`escrow_dealt`: the registrations
//!   scenario); the limits themselves never bind here, so the property judges the escrow
//!   invariant (tokens within the room left, counts the store's) at every write, which is
//!   what makes the two paths decide alike at any size;
//! - the desktop's credential change (a `ControlOp` ticket taken with `acquire`, revalidated
//!   and released): the same gate calls as the pending connection, counted as the modelled
//!   activation's kind (`core/tests/ho_idle.rs` counts every kind); splices and
//!   pending connections only in the smaller work-kinds scenario (one client, one fault, no
//!   restart, reconnect or undrain), as
//!   one world with them at the review budgets would be about 18 times the review scenario;
//! - HO-A5's fence backoff arithmetic (doubling, the cap, the overdue alert) and a failed write
//!   while the DB is up (a timeout: the same input as the DB being down; offering it too adds
//!   15 % states): the model fails a write only during an outage, so the retry's witness needs
//!   two faults (drain, outage) and is not asked at one; its one clock jump reaches one retry;
//!   `core/tests/ho_drain.rs::ho_a5_*` covers the rest. A client whose socket task ends
//!   between accept and attached (`Attach::handle_cancel`): `core/tests/ho_idle.rs`;
//! - `DrainReason::AuthRefused`: the same path as `Emergency` with another close reason name;
//!   a second drain of a drained host (the hard drain runs again; `ho_drain.rs`);
//! - the refusals `WrongAuthority` (a registration of another process: the store refuses an
//!   older incarnation first) and `TooManyHosts` (one host here);
//! - SEC-1: a client without a valid credential (the adapter closes it with 4401 before any
//!   core input, so it is no input here), and `AdmissionRefusal::HostFull` (1,024 clients of
//!   one host, past the model's two; refused only at an open gate, so it never changes what
//!   `judge_client_refused` requires at a gated or unknown source). Both are tested in
//!   `core/tests/ho_idle.rs` and `adapters/tests/sec_1_client_auth.rs`;
//! - a dead process's sockets: after a restart its clients, control activation and closed
//!   sessions are gone with it; the old process of a rolling restart serves no new work;
//! - HO-L2: a lease that lapses while its holder lives (a DB outage longer than a lease: the
//!   model's outages are shorter, and a live holder renews at every clock jump); the adapter
//!   stops a process whose renewal finds a newer incarnation
//!   (`tools/tests/handoff_cell_identity.rs`); the target cell's own process and lease (its
//!   row is set up once);
//! - the control session's heartbeats and the DB activity lease are checked at each director
//!   request on the live machine (`handle_heartbeat`, `handle_activity_lease`, HO-8 / HO-10), not
//!   as separate steps: they are `&self` calls and change nothing.
//!
//! Requirements that are not properties here (and where they are covered, `core/tests/`):
//! - HO-3 (policy arithmetic: 25 ms and 20 %, freshness, cohort, capacity, cooldown): the
//!   director calls the real `evaluate`, but the arithmetic is pure and exercised by
//!   `ho_when.rs::ho_3_*`;
//! - HO-C1 (capability negotiation): every participant here is capable;
//!   `ho_request_and_barrier.rs::ho_c1_participant_without_the_capability_is_skipped`;
//! - HO-S2's page rotation and dispatch budget (one host here; the sweep model runs the real
//!   `SelectionPass` and `DispatchBudget` over four hosts and three pages):
//!   `ho_request_and_barrier.rs::{ho_s2_rotating_cursor_moves_past_busy_hosts,
//!   ho_s2_busy_is_a_deferral_not_a_dispatch_failure}`,
//!   `ho_props.rs::ho_s2_props_rotating_pages_never_starve_idle_hosts`,
//!   `ho_seed_minimum_tests.rs::ho_t3_*`, and at any N with a changing host list, failed pages
//!   and restarts (SCALE-3): `scale_3_sweep.rs::scale_3_props_*`;
//! - HO-A6's target-side recovery beyond the store (clients kept at the target) and the seed's
//!   tests 5, 6 and 8 need the target cell and real transport (adapters).

mod projection;
mod properties;
mod state;
mod step;

pub use projection::*;
pub use properties::*;
pub use state::*;

mod escrow;
mod races;
pub use escrow::*;

use crate::halt::Halt;
use crate::share::SharedPart;
use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use switchyard_core::handoff::store::{
    fenced_authority, AbortReason, AssignmentStore, AttemptOutcome, CellRow, DrainWrite,
    RegisterRefusal, StartRefusal, StoreConfig, TxnOutcome,
};
use switchyard_core::handoff::{
    answer_from_record, client_close_code, needs_durable_record, CellAction, CellWork, CloseReason,
    Fed, InstallKind, InstallRefusal, Installed, MachineId, SessionId, SourceCell, UndrainRefusal,
};
use switchyard_core::handoff::{evaluate, CandidateView, DirectorPolicy, TargetView};
use switchyard_core::handoff::{
    ActivityLease, AdmissionRefusal, ClosedReason, GateState, Heartbeat, NotCounted,
    QuiescenceCounters, ReleaseReport, Ticket, TicketId, WorkKind, WRONG_CELL_CLOSE_CODE,
};
use switchyard_core::handoff::{
    Ambiguity, AttemptRef, Begin, Disposition, DrainReason, DurableResult, FenceResult,
    HandoffAction, HandoffRefusal, HandoffReply, PendingFence, Phase, QuarantineCause,
    RetireReason, SourceConfig, SourceHandoff,
};
use switchyard_core::handoff::{Attach, AttachClose, AttachStep, PersistFailed};
use switchyard_core::handoff::{CellId, Generation, HostId, Incarnation, OpId, SourceAuthority};
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_core::MonoMs;

use crate::store_calls::{StoreCall, StoreJournal};

/// The source cell, the target cell and the host.
pub const SRC: CellId = CellId(1);
pub const TGT: CellId = CellId(2);
pub const HOST: HostId = HostId(7);
/// HO-S1: a second host on the source cell (no desktop, no clients): the director's pick for it
/// is judged beside every request for `HOST` (at the first request the two picks read the same
/// cell, epoch, incarnation and generation, so only the host tells their op ids apart).
pub const HOST2: HostId = HostId(8);
/// The source cell's room (the target has one slot, which the model may fill).
pub const SRC_CAPACITY: u32 = 10;

/// Model time starts here (the measurement was taken at 0: fresh for the whole run).
pub const MODEL_START_MS: u64 = 1_000;
pub const MODEL_REQUEST_TIMEOUT_MS: u64 = 5_000;
pub const MODEL_RECONCILE_TIMEOUT_MS: u64 = 4_000;
pub const MODEL_QUARANTINE_RETRY_MS: u64 = 10_000;
/// HO-L4: a refused op id is answered from its result this long, then tried anew.
pub const MODEL_REFUSAL_HOLD_MS: u64 = 10_000;
pub const MODEL_REGISTRATION_TIMEOUT_MS: u64 = 30_000;
pub const MODEL_FRESHNESS_MS: u64 = 3_600_000;
pub const MODEL_COOLDOWN_MS: u64 = 600_000;
/// HO-L2: a cell process's identity lease (the adapter renews every third of it).
pub const MODEL_CELL_LEASE_MS: u64 = 15_000;

/// The model's size knobs. `max_faults` bounds the faults of one run (a replacement, a restart,
/// a drain, a director crash, a DB outage, the target filling up, the disable switch, the
/// control closing); the counted kinds (`replacements`, `restarts`, `drains`) also have their
/// own budget, and the switches enable or disable a kind. The desktop's reconnects and the
/// operator's undrains are not faults (they are how a host recovers from one) but have their
/// own budget. Director sends, lost answers, DB results, client moves, the late end of a
/// closed session and re-enabling are not faults either: they are bounded by the state they
/// change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffParams {
    /// Relay clients (0: phone, 1: iPad).
    pub clients: u8,
    /// Arrivals per client.
    pub client_visits: u8,
    /// Desktop control replacements at the source (local rebind).
    pub replacements: u8,
    /// Source cell process restarts.
    pub restarts: u8,
    /// Emergency drains.
    pub drains: u8,
    /// Times the clock may advance to the next deadline.
    pub time_advances: u8,
    /// At most this many faults in one run: every combination of that many kinds, in every
    /// order and at every point they can matter.
    pub max_faults: u8,
    /// The director may crash and restart (recomputing its request) while it holds one.
    pub director_crash: bool,
    /// The DB may go down (and recover) while work is queued for it.
    pub db_outage: bool,
    /// The target may fill up while a transaction is queued (the explicit abort).
    pub target_fills: bool,
    /// The correction may be disabled (and enabled again).
    pub disable: bool,
    /// The desktop's control session may close.
    pub control_closes: bool,
    /// The desktop reconnects after its control closed or its source retired or drained.
    pub reconnects: u8,
    /// An operator undrains a drained host (HO-L1).
    pub undrains: u8,
    /// HO-L2: a second process may be started with the source cell's id while its holder
    /// lives (refused; it changes nothing, so it costs no state).
    pub second_process: bool,
    /// HO-7: mutations an attached client relays to the desktop (`Splice` tickets, held until
    /// the desktop's ack), per run.
    pub splices: u8,
    /// HO-7: pending connections (`PendingConn` tickets), per run.
    pub pending_conns: u8,
    /// HO-A4: a second control activation of the desktop, racing the first, per run (the
    /// registrations scenario). With any, a run starts before the desktop's first
    /// registration (no machine yet), so both activations can begin without a ticket.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub registrations: u8,
    /// HO-S4: the SQL store's limit shards (the model's [`EscrowShadow`]) start with every
    /// limit's tokens dealt from the store's totals, as earlier traffic leaves them, so a
    /// commit takes the token path; otherwise they start empty (a fresh store), and the
    /// commit takes the exact path and deals them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escrow_dealt: bool,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

impl Default for HandoffParams {
    /// The review bounds: two clients (phone and iPad), one replacement, one restart, one
    /// drain, one reconnect, one undrain, every DB outcome (commit, explicit abort, ambiguous,
    /// unavailable then recovery), any two faults in one run, one time advance.
    fn default() -> Self {
        HandoffParams {
            clients: 2,
            client_visits: 1,
            replacements: 1,
            restarts: 1,
            drains: 1,
            time_advances: 1,
            max_faults: 2,
            director_crash: true,
            db_outage: true,
            target_fills: true,
            disable: true,
            control_closes: true,
            reconnects: 1,
            undrains: 1,
            second_process: true,
            splices: 0,
            pending_conns: 0,
            registrations: 0,
            escrow_dealt: false,
        }
    }
}

/// A handoff configuration the checker runs at the review bound. One world with every work
/// kind at the review budgets would be about 18 times the review scenario (splices alone
/// multiply it by 2.3, a pending connection by 6), so the kinds that the review scenario
/// leaves out get their own, smaller world (`docs/PERFORMANCE.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Two clients (accepts, attaches), the desktop's control operations, any two faults.
    Review,
    /// HO-7's other kinds: an attached client relays a mutation (`Splice`) and a pending
    /// connection comes and goes (`PendingConn`), beside one client, at most two faults, no
    /// restart, reconnect or undrain. It asks only for HO-7's witnesses (the review scenario
    /// reaches the others); every `always` property is judged.
    WorkKinds,
    /// HO-A4: two registrations of one host racing. The run starts before the desktop's
    /// first registration; a second control activation begins (without a ticket: no machine
    /// yet) and registers after the first one installed, after a barrier went up, or after the
    /// source retired stale; the desktop reconnects twice; one client, at most two faults (a
    /// DB outage, the control closing), no restart, drain or undrain; the limit shards start
    /// with their tokens dealt (`escrow_dealt`). It asks only for its own witnesses (the second
    /// registration refused under the barrier, a fresh machine over a retired one, a commit on
    /// the escrow token path); every `always` property is judged.
    Registrations,
}

impl Scenario {
    pub const ALL: [Scenario; 3] = [
        Scenario::Review,
        Scenario::WorkKinds,
        Scenario::Registrations,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Review => "review",
            Scenario::WorkKinds => "work-kinds",
            Scenario::Registrations => "registrations",
        }
    }

    /// The scenario's bounds at the review bound.
    pub fn params(self) -> HandoffParams {
        match self {
            Scenario::Review => HandoffParams::default(),
            // No restarts, reconnects or undrains: the review scenario covers them, and here
            // they would multiply the states by ten (4,016,562 with them, 416,493 without; with
            // one fault, the bound before issue #15: 45,123).
            Scenario::WorkKinds => HandoffParams {
                clients: 1,
                max_faults: 2,
                restarts: 0,
                reconnects: 0,
                undrains: 0,
                splices: 1,
                pending_conns: 1,
                ..HandoffParams::default()
            },
            Scenario::Registrations => HandoffParams {
                clients: 1,
                max_faults: 2,
                replacements: 0,
                restarts: 0,
                drains: 0,
                undrains: 0,
                reconnects: 2,
                registrations: 1,
                escrow_dealt: true,
                director_crash: false,
                target_fills: false,
                disable: false,
                second_process: false,
                ..HandoffParams::default()
            },
        }
    }
}

impl HandoffParams {
    /// A smaller bound for the default test profile: the same two clients and fault kinds, but
    /// at most one fault per run.
    pub fn small() -> Self {
        HandoffParams {
            max_faults: 1,
            ..HandoffParams::default()
        }
    }

    /// The work-kinds scenario at its (only) bound.
    pub fn work_kinds() -> Self {
        Scenario::WorkKinds.params()
    }
}

/// How a DB job's result reaches the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Delivery {
    /// The store ran it and the definitive result arrives.
    Delivered,
    /// The store ran it (it may have committed) and the result is lost: ambiguous.
    Lost,
    /// The DB is down: `StoreUnavailable`, nothing ran.
    Unavailable,
}

/// The environment's moves; every one is a sequence of core inputs (the adapter's calls) or
/// "time advances".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum HoAction {
    /// The director (re-)delivers its request (picking one read-only from the store if it has
    /// none): `handle_request`, answered from the store's record where the reply may hide one;
    /// `lost`: the immediate answer never reaches it, so it keeps the request.
    DirectorSends {
        lost: bool,
    },
    /// The director crashes, restarts and recomputes its request from the store.
    DirectorCrashRestart,
    /// A client reaches the source: `acquire(Accept)`.
    ClientArrives {
        client: u8,
    },
    /// After the accept's await: the client's [`Attach`] machine `poll`s (`revalidate`, then
    /// the activity write goes out, the accept still counted).
    ClientAttaches {
        client: u8,
    },
    /// The activity write is durable: `handle_persisted(Ok)`, `poll` (`revalidate`,
    /// `convert(.., ClientConn)`).
    ClientPersisted {
        client: u8,
    },
    /// The client leaves: `release` of its splice (the adapter's client loop drops its
    /// splices when it ends), then of its connection.
    ClientLeaves {
        client: u8,
    },
    /// An attached client relays a mutation: `acquire(Splice)` (refused: undelivered); if the
    /// desktop's control is not open, the splice is released at once (the adapter's
    /// `relay_mutation`).
    ClientRelays {
        client: u8,
    },
    /// The desktop acks the client's mutation: `release` of its splice.
    DesktopAcks {
        client: u8,
    },
    /// A pending connection: `acquire(PendingConn)` before its first await.
    PendingOpens,
    /// The pending connection's continuation: `revalidate`, then `release` when it ends (an
    /// abandoned continuation's ticket is already released by the gate).
    PendingEnds,
    /// A replacement control's activation while the desktop's control is open:
    /// `control_refusal`, then `handle_begin_control`.
    ControlActivates,
    /// The desktop reconnects (its control closed, or the cell retired or drained its source):
    /// `control_refusal` (a drained host is refused before the store is written), then
    /// `handle_begin_control`; where that takes no ticket (no live machine), the registration and
    /// `handle_install_control(.., None)` follow in the same step.
    DesktopReconnects,
    /// After the activation's await: the store's `register_control` (same incarnation), then
    /// `handle_install_control` with the activation's ticket.
    ControlRegisters,
    /// The desktop's control session closes: `control_closed` with its session.
    ControlCloses,
    /// The source cell process restarts (HO-L2): the successor takes the cell once the old
    /// process's lease is gone (`start_cell`: a new incarnation), then a new `SourceCell` with
    /// it, `register_control`, `handle_install_control(.., None)` (the old process's clients and
    /// control activation are gone). `old_lingers`: a rolling restart, where the old process
    /// releases its lease on the stop signal and lives on until its attempt in flight ends (its
    /// results reach it); otherwise it dies: the successor started at once is refused while the
    /// dead process's lease runs, and takes the cell when it has lapsed (the clock moves to its
    /// end); the dead process's results reach the new process late, naming the old machine.
    SourceRestart {
        old_lingers: bool,
    },
    /// HO-L2: a second process is started with the source cell's id while the holder lives:
    /// the store's `start_cell` refuses it and writes nothing. The state after it is the state before
    /// it (its step facts included), so it adds no state; a wrong answer is judged. Offered
    /// right after each step that changed what the decision reads (the first start, a
    /// restart, a renewal at a clock jump): every distinct case.
    SecondProcessStarts,
    /// The DB runs queued job `job` (index into `HoState::jobs`) of an attempt in flight; its
    /// result goes to the machine that asked.
    DbRuns {
        job: u8,
        delivery: Delivery,
    },
    /// The DB runs a job whose attempt has ended, or whose process has died: its result goes to
    /// the process that asked if it still lives, else to the current one, naming the machine
    /// that asked.
    LateCallback {
        job: u8,
        delivery: Delivery,
    },
    /// The DB goes down: results become `StoreUnavailable`, registrations and fences wait.
    DbOutage,
    DbRecovers,
    /// The adapter writes the drain fence the machine asked for (the DB is up) and feeds the
    /// store's answer back (`handle_fence_result(Written)`).
    FenceWrites,
    /// `emergency_drain` at the current process.
    EmergencyDrain,
    /// HO-L1: an operator undrains the host: `undrain` (refused while the drained attempt still
    /// reconciles or drained work is still closing).
    Undrain,
    /// The persistent switch (store) and every process's switch go off; the director lags.
    Disable,
    /// The switches go on again.
    Enable,
    /// Another host takes (`full`) or frees the target's last slot (the model only fills it).
    TargetCapacity {
        full: bool,
    },
    /// The desktop registers at the target after a commit.
    TargetRegisters,
    /// The clock advances to the next deadline: `handle_timeout` of each due machine, the
    /// timers of replaced machines, and `expire_migrations`.
    TimeAdvances,
    /// HO-7: the activity write fails (store unreachable, timeout): `handle_persisted(Err)`,
    /// `poll` (the accept is released, the client closed `activity_not_persisted`).
    ClientPersistFails {
        client: u8,
    },
    /// HO-A5: the drain fence's write fails (the DB is down, or the write timed out):
    /// `handle_fence_result(Failed)`; the machine schedules its retry (a deadline of
    /// `TimeAdvances`).
    FenceFails,
    /// HO-A4: a second control activation of the desktop while another may be in flight (two
    /// sockets of one desktop racing): `control_refusal`, then `handle_begin_control` (its ticket, or
    /// none where there is no live machine), held across the registration's await.
    SecondControlActivates,
    /// After that activation's await: the store's `register_control`, then `handle_install_control`
    /// with its ticket, whatever happened in between (a first registration installed, a
    /// barrier stands).
    SecondControlRegisters,
}

#[derive(Debug, Clone)]
pub struct HandoffModel {
    pub params: HandoffParams,
    /// Raised by the checker when its memory budget is reached.
    pub halt: Halt,
    /// The scenario these bounds belong to, if the checker runs one (it names the report).
    pub scenario: Option<Scenario>,
}

impl HandoffModel {
    pub fn new(params: HandoffParams) -> HandoffModel {
        assert!(params.clients <= 4, "at most four clients");
        // Every install takes at most two ids (machine, session) of its process's counter; the
        // late-input judge feeds every id below MAX_MODEL_ID.
        let installs = 1 + u64::from(params.replacements) + u64::from(params.reconnects);
        assert!(2 * installs < MAX_MODEL_ID, "too many installs per process");
        HandoffModel {
            params,
            halt: Halt::default(),
            scenario: None,
        }
    }

    /// `scenario`'s world, with `params` (its bounds, possibly changed by the caller).
    pub fn in_scenario(scenario: Scenario, params: HandoffParams) -> HandoffModel {
        HandoffModel {
            scenario: Some(scenario),
            ..HandoffModel::new(params)
        }
    }

    pub fn source_config() -> SourceConfig {
        SourceConfig {
            request_timeout_ms: MODEL_REQUEST_TIMEOUT_MS,
            reconcile_timeout_ms: MODEL_RECONCILE_TIMEOUT_MS,
            quarantine_retry_ms: MODEL_QUARANTINE_RETRY_MS,
            cell_capable: true,
            refusal_hold_ms: MODEL_REFUSAL_HOLD_MS,
        }
    }

    fn policy_config() -> PolicyConfig {
        PolicyConfig {
            freshness_window_ms: MODEL_FRESHNESS_MS,
            host_cooldown_ms: MODEL_COOLDOWN_MS,
        }
    }

    fn director_policy() -> DirectorPolicy {
        // The director lags behind the disable switch: it keeps sending (HO-A5 is the
        // source's and the store's job).
        DirectorPolicy {
            enabled: true,
            cohort_percent: 100,
            policy: Self::policy_config(),
        }
    }

    fn measurement() -> Measurement {
        Measurement {
            measured_at: MonoMs::ZERO,
            current_rtt_ms: 120,
            target_rtt_ms: 60,
        }
    }

    pub(super) fn cell_row(capacity: u32, incarnation: Incarnation) -> CellRow {
        CellRow {
            capacity,
            handoff_capable: true,
            incarnation,
        }
    }

    pub fn init_state(&self) -> HoState {
        self.init_state_journaled(&mut ())
    }

    /// [`Self::init_state`], recording the store calls that set the store up.
    pub fn init_state_journaled<J: StoreJournal>(&self, journal: &mut J) -> HoState {
        let config = StoreConfig {
            enabled: true,
            policy: Self::policy_config(),
            max_in_flight_migrations: 4,
            rate_window_ms: 60_000,
            max_commits_per_window: 10,
            registration_timeout_ms: MODEL_REGISTRATION_TIMEOUT_MS,
            bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
        };
        journal.record(StoreCall::Configure { config });
        let mut store = AssignmentStore::new(config);
        let now = MonoMs(MODEL_START_MS);
        // HO-L2: the first source process takes SRC (never started: incarnation 1) and its
        // lease; the target cell is set up (its process is not modelled).
        let first = Self::start_cell(&mut store, now, journal).expect("a new cell is free");
        let row = Self::cell_row(1, Incarnation(1));
        let answer = store.upsert_cell(TGT, row);
        journal.record(StoreCall::UpsertCell {
            cell: TGT,
            row,
            answer,
        });
        answer.expect("model cell");
        let answer = store.insert_host(HOST, SRC, true);
        journal.record(StoreCall::InsertHost {
            host: HOST,
            cell: SRC,
            desktop_capable: true,
            answer,
        });
        let auth = answer.expect("host");
        debug_assert_eq!(first, auth.incarnation);
        // The first process holds SRC as incarnation 1 and the desktop's control is installed.
        let mut cell = SourceCell::new(Self::source_config(), SRC, auth.incarnation);
        // With concurrent registrations to race, the run starts before the desktop's first.
        if self.params.registrations == 0 {
            let installed = cell.handle_install_control(now, auth, true, None);
            debug_assert!(installed.is_ok_and(|i| i.how == InstallKind::NewMachine));
        }
        let p = &self.params;
        let escrow = if p.escrow_dealt {
            EscrowShadow::dealt(&store)
        } else {
            EscrowShadow::default()
        };
        HoState {
            now,
            store: SharedPart::new(store),
            cell,
            inst: 0,
            old_cell: None,
            clients: vec![
                Client {
                    phase: ClientPhase::Away,
                    visits_left: p.client_visits,
                    splice: None,
                };
                usize::from(p.clients)
            ],
            pending: None,
            control: None,
            dir_request: None,
            jobs: Vec::new(),
            pending_fence: None,
            refused: None,
            db_up: true,
            disabled: false,
            target_full: false,
            undrained: false,
            budget: Budget {
                faults: p.max_faults,
                replacements: p.replacements,
                restarts: p.restarts,
                drains: p.drains,
                time_advances: p.time_advances,
                reconnects: p.reconnects,
                undrains: p.undrains,
                splices: p.splices,
                pending_conns: p.pending_conns,
                registrations: p.registrations,
            },
            // The first process has just taken the cell.
            last: StepFacts {
                events: Events {
                    lease_taken_or_renewed: true,
                    ..Events::default()
                },
                ..StepFacts::default()
            },
            core_panic: None,
            control2: None,
            escrow,
        }
    }

    /// HO-L2: a source cell process starts (journaled): the store's `start_cell`, which takes
    /// the cell with the next incarnation unless another process's lease is live.
    pub(super) fn start_cell<J: StoreJournal>(
        store: &mut AssignmentStore,
        now: MonoMs,
        journal: &mut J,
    ) -> Result<Incarnation, StartRefusal> {
        let answer = store.start_cell(SRC, SRC_CAPACITY, true, now, MODEL_CELL_LEASE_MS);
        journal.record(StoreCall::StartCell {
            cell: SRC,
            capacity: SRC_CAPACITY,
            handoff_capable: true,
            now,
            lease_ms: MODEL_CELL_LEASE_MS,
            answer,
        });
        answer
    }

    /// The director's read-only pick: the real `evaluate` over what it reads from the store.
    pub fn pick(state: &HoState) -> Option<HandoffRequest> {
        Self::pick_for(state, HOST)
    }

    /// The director's read-only pick for `host`.
    pub fn pick_for(state: &HoState, host: HostId) -> Option<HandoffRequest> {
        Self::pick_from(&state.store, state.now, host)
    }

    /// HO-S1: the director's pick for the second host: it is added to a copy of the store at
    /// the source cell (epoch 1, generation 1, the cell's incarnation: what the first host had
    /// before its first registration). It never changes, so it is kept out of the explored
    /// state (every state would carry and hash its row).
    pub fn pick_second_host(state: &HoState) -> Option<HandoffRequest> {
        let mut store = AssignmentStore::clone(&state.store);
        store.insert_host(HOST2, SRC, true).ok()?;
        Self::pick_from(&store, state.now, HOST2)
    }

    fn pick_from(store: &AssignmentStore, now: MonoMs, host: HostId) -> Option<HandoffRequest> {
        let authority = store.authority(host)?;
        let row = store.assignment(host)?;
        let source_cell = store.cell(authority.cell)?;
        let target = store.cell(TGT)?;
        let candidate = CandidateView {
            authority,
            source_cell_capable: source_cell.handoff_capable,
            desktop_capable: row.desktop_capable,
            measurement: Some((TGT, Self::measurement())),
            cooldown_until: store.cooldown_until(host),
        };
        let target = TargetView {
            cell: TGT,
            capable: target.handoff_capable,
            load: store.cell_load(TGT),
            capacity: target.capacity,
            lease_until: MonoMs::ZERO,
        };
        evaluate(now, &Self::director_policy(), &candidate, Some(&target)).ok()
    }
}

impl Model for HandoffModel {
    type State = HoState;
    type Action = HoAction;

    fn init_states(&self) -> Vec<HoState> {
        vec![self.init_state()]
    }

    fn actions(&self, state: &HoState, actions: &mut Vec<HoAction>) {
        // A state past a cap is judged (its `bounded` property fails) and explored no further;
        // so is a step a property judged wrong (it is a counterexample already: what follows
        // it adds nothing but states). Neither happens with a correct core.
        if self.halt.is_raised()
            || self.over_cap(state).is_some()
            || state.last.anomalies != Anomalies::default()
            || state.core_panic.is_some()
        {
            return;
        }
        let (b, p) = (&state.budget, &self.params);
        let src = state.src();
        // Faults that only matter to an attempt in flight are offered only then (elsewhere
        // they would only multiply states that the properties judge the same way).
        let in_flight = src.is_some_and(|m| m.attempt().is_some());
        let fault = b.faults > 0;
        // A fresh pick whose op the source has already answered is a duplicate, which a kept
        // request (lost answer, crash) already exercises; a pick that finds nothing sends
        // nothing.
        let worth_sending = state.dir_request.is_some()
            || Self::pick(state).is_some_and(|r| {
                src.and_then(SourceHandoff::last_result)
                    .is_none_or(|last| last.op_id != r.op_id)
            });
        if worth_sending {
            actions.push(HoAction::DirectorSends { lost: false });
            actions.push(HoAction::DirectorSends { lost: true });
        }
        if fault && p.director_crash && state.dir_request.is_some() && in_flight {
            actions.push(HoAction::DirectorCrashRestart);
        }
        // Clients reach whatever process holds the cell, with or without a machine for the
        // host (refused as the wrong cell then).
        let open_control = state.cell.control(HOST).is_some();
        for (i, c) in state.clients.iter().enumerate() {
            let client = u8::try_from(i).unwrap_or(u8::MAX);
            actions.push(match c.phase {
                ClientPhase::Away if c.visits_left > 0 => HoAction::ClientArrives { client },
                ClientPhase::Away => continue,
                ClientPhase::Accepting(_) => HoAction::ClientAttaches { client },
                ClientPhase::Attaching(_) => HoAction::ClientPersisted { client },
                ClientPhase::Attached(_) => HoAction::ClientLeaves { client },
            });
            if matches!(c.phase, ClientPhase::Attaching(_)) {
                actions.push(HoAction::ClientPersistFails { client });
            }
            if matches!(c.phase, ClientPhase::Attached(_)) {
                // The ack comes over the desktop's open control.
                if c.splice.is_some() && open_control {
                    actions.push(HoAction::DesktopAcks { client });
                } else if b.splices > 0 {
                    actions.push(HoAction::ClientRelays { client });
                }
            }
        }
        match state.pending {
            Some(_) => actions.push(HoAction::PendingEnds),
            None if b.pending_conns > 0 => actions.push(HoAction::PendingOpens),
            None => {}
        }
        let open = state.cell.control(HOST).is_some();
        match state.control {
            None if open => {
                let admitting_or_gated = src.is_some_and(|m| {
                    !m.gate().is_drained()
                        && matches!(m.gate().state(), GateState::Open | GateState::Gated(_))
                });
                if fault && b.replacements > 0 && admitting_or_gated {
                    actions.push(HoAction::ControlActivates);
                }
            }
            None if b.reconnects > 0 && !state.moved() => {
                actions.push(HoAction::DesktopReconnects);
            }
            Some(_) if state.db_up => actions.push(HoAction::ControlRegisters),
            _ => {}
        }
        if fault && p.control_closes && open {
            actions.push(HoAction::ControlCloses);
        }
        if let Some(src) = src {
            if fault
                && b.drains > 0
                && !src.gate().is_drained()
                && (in_flight || state.live_work() > 0)
            {
                actions.push(HoAction::EmergencyDrain);
            }
            if b.undrains > 0 && src.gate().is_drained() {
                actions.push(HoAction::Undrain);
            }
        }
        if fault && b.restarts > 0 && state.db_up && (in_flight || state.moved()) {
            actions.push(HoAction::SourceRestart { old_lingers: false });
            if in_flight {
                actions.push(HoAction::SourceRestart { old_lingers: true });
            }
        }
        for (i, job) in state.jobs.iter().enumerate() {
            let job_index = u8::try_from(i).unwrap_or(u8::MAX);
            let current = state.is_current_job(job);
            let deliveries: &[Delivery] = if !state.db_up {
                &[Delivery::Unavailable]
            } else if job.kind == JobKind::Transaction {
                &[Delivery::Delivered, Delivery::Lost]
            } else {
                &[Delivery::Delivered]
            };
            for delivery in deliveries {
                actions.push(if current {
                    HoAction::DbRuns {
                        job: job_index,
                        delivery: *delivery,
                    }
                } else {
                    HoAction::LateCallback {
                        job: job_index,
                        delivery: *delivery,
                    }
                });
            }
        }
        if fault && p.db_outage && state.db_up && !state.jobs.is_empty() {
            actions.push(HoAction::DbOutage);
        }
        if !state.db_up {
            actions.push(HoAction::DbRecovers);
        }
        if state.pending_fence.is_some() {
            // HO-A5: the write lands while the DB is up and fails while it is down. (Failing it
            // while the DB is up too, a timeout, is the same input and would add 15 % states.)
            actions.push(if state.db_up {
                HoAction::FenceWrites
            } else {
                HoAction::FenceFails
            });
        }
        if p.disable {
            // The persistent switch is a store write: not while the DB is down.
            if fault && !state.disabled && src.is_some() && state.db_up {
                actions.push(HoAction::Disable);
            }
            if state.disabled && state.db_up {
                actions.push(HoAction::Enable);
            }
        }
        let txn_queued = state.jobs.iter().any(|j| j.kind == JobKind::Transaction);
        if fault && p.target_fills && !state.target_full && txn_queued {
            actions.push(HoAction::TargetCapacity { full: true });
        }
        if state.db_up && state.store.reservations().next().is_some() {
            actions.push(HoAction::TargetRegisters);
        }
        if b.time_advances > 0 && state.next_deadline().is_some() {
            actions.push(HoAction::TimeAdvances);
        }
        match state.control2 {
            None if b.registrations > 0 => actions.push(HoAction::SecondControlActivates),
            Some(_) if state.db_up => actions.push(HoAction::SecondControlRegisters),
            _ => {}
        }
        // The refusal reads only the cell's row (holder, lease end) and the clock, so it is
        // offered right after each step that changed them: every distinct case, once.
        if p.second_process && state.last.events.lease_taken_or_renewed {
            actions.push(HoAction::SecondProcessStarts);
        }
    }

    fn next_state(&self, state: &HoState, action: HoAction) -> Option<HoState> {
        Some(self.caught_step(state, action))
    }

    fn within_boundary(&self, state: &HoState) -> bool {
        if self.halt.is_raised() {
            return false;
        }
        // Every environment event is budgeted; this states the resulting bounds.
        // A restart whose old process died waits for its lease to lapse.
        let horizon = MODEL_START_MS
            + u64::from(self.params.time_advances) * MODEL_REGISTRATION_TIMEOUT_MS
            + u64::from(self.params.restarts) * MODEL_CELL_LEASE_MS;
        // Everything else that can grow has a cap, judged as a property (`bounded`): a state
        // past one is kept so that its property fails, and `actions` explores nothing from it.
        state.now.as_ms() <= horizon
    }

    fn properties(&self) -> Vec<Property<Self>> {
        handoff_properties(&self.params, self.scenario)
    }
}

impl HandoffModel {
    /// [`Self::step`] under [`crate::caught::caught`]: a core invariant that fires in the step
    /// leads to the state before it with the message recorded (`core_panic`), which the
    /// property [`crate::caught::CORE_INVARIANTS`] reports.
    pub fn caught_step(&self, state: &HoState, action: HoAction) -> HoState {
        match crate::caught::caught(|| self.step(state, action)) {
            Ok(next) => next,
            Err(message) => {
                let mut next = state.clone();
                next.last = StepFacts::default();
                next.core_panic = Some(format!("{action}: {message}"));
                next
            }
        }
    }
}
