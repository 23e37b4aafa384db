//! `HandoffModel`: the real HO core ([`SourceHandoff`] at the source cell, the reference
//! [`AssignmentStore`], the director's real [`evaluate`]) in an environment of one host, a
//! source cell and a target cell, where
//!
//! - a director picks read-only from the store and sends the handoff request, re-delivers it
//!   (duplicates), loses the answer and retries, or crashes and restarts (recomputing the request
//!   from the store);
//! - clients (phone, iPad) arrive (`Accept` ticket), attach (`ClientConn` ticket waiting for
//!   durable persistence), persist and leave, racing the barrier;
//! - the desktop's control closes, or is replaced (a `ControlOp` ticket, then
//!   `register_control` and `handle_rebind`); the source cell process restarts
//!   (`register_control` with incarnation + 1 and a fresh machine): the old process either dies
//!   (its DB work may still land, and its results reach the new machine late) or, in a rolling
//!   restart, lives on until its attempt in flight has ended;
//! - the DB runs each transaction / reconciliation a machine asked for and the result is
//!   delivered, lost (ambiguous), or `StoreUnavailable` during an outage; the outage recovers;
//! - an emergency drain (and its store fence write, racing the transaction), the disable switch
//!   (store and source), the target filling up (the explicit, authority-unchanged abort), the
//!   desktop registering at the target, and time advancing to the next deadline (request
//!   timeout, reconciliation timeout, quarantine retry, registration expiry).
//!
//! Every step drives the core, drains its actions into the environment (DB jobs, the fence to
//! write) and records [`StepFacts`]; the properties ([`handoff_properties`]) judge them and the
//! state. Property names start with the requirement ID; the `sometimes` ones are named
//! `<ID> witness: ...`.
//!
//! Abstractions (each keeps the state space finite without changing a decision):
//! - one host, one target; every participant has the HO-C1 capability;
//! - the machine's asynchronous `Reply(Result)` is always lost on its way to the director: the
//!   director learns outcomes only by re-sending (HO-A3 / HO-A6: nothing at the source depends on
//!   delivering it). A second director is the same as a restarted one re-sending the same id;
//! - the director does not re-pick an op the source has already answered (a kept request,
//!   after a lost answer or a crash, re-sends it: the same duplicate);
//! - clients are interchangeable: the state keeps them sorted (symmetry reduction; action
//!   `client` indices refer to that order);
//! - a DB job executes and its result is delivered (or lost) in one step; a reconciliation's
//!   result is not lost (to the source that is its timeout: both quarantine as
//!   `ReconcileAmbiguous`, and the timeout leaves the job to land later); a job that never runs
//!   is the same as one lost before reaching the DB (its request timeout still fires);
//! - faults are offered only where they can matter: a director crash needs an attempt in
//!   flight, a drain an attempt or live work, a restart an attempt or a moved host, a DB outage
//!   queued DB work, the target filling up a queued transaction;
//! - at most `max_faults` faults per run, each counted kind at most its budget, and time moves
//!   only to the next deadline, `time_advances` times ([`HandoffParams`]).
//!
//! Requirements that are not properties here (and where they are covered, `core/tests/`):
//! - HO-3 (policy arithmetic: 25 ms and 20 %, freshness, cohort, capacity, cooldown): the
//!   director calls the real `evaluate`, but the arithmetic is pure and exercised by
//!   `handoff_requirements.rs::ho_3_*`;
//! - HO-C1 (capability negotiation): every participant here is capable;
//!   `handoff_requirements.rs::ho_c1_participant_without_the_capability_is_skipped`;
//! - HO-S2's page rotation and dispatch budget (one host here):
//!   `handoff_requirements.rs::{ho_s2_rotating_offset_moves_past_busy_hosts,
//!   ho_s2_busy_is_a_deferral_not_a_dispatch_failure}`,
//!   `handoff_props.rs::ho_s2_props_rotating_pages_never_starve_idle_hosts`,
//!   `handoff_seed_tests.rs::ho_t3_*`;
//! - HO-A6's target-side recovery beyond the store (clients kept at the target) and the seed's
//!   tests 5, 6 and 8 need the target cell and real transport (adapters).

use std::fmt;

use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use switchyard_core::handoff::admission::{
    ActivityLease, AdmissionRefusal, ClosedReason, Counters, GateState, Heartbeat, NotCounted,
    Revalidation, Ticket, WorkKind, WRONG_CELL_CLOSE_CODE,
};
use switchyard_core::handoff::attempt::{
    Action, Ambiguity, AttemptRef, Begin, DrainReason, DurableResult, HandoffReply, Phase,
    QuarantineCause, Refusal, RetireReason, SourceConfig, SourceHandoff,
};
use switchyard_core::handoff::director::{evaluate, CandidateView, DirectorPolicy, TargetView};
use switchyard_core::handoff::ids::{CellId, HostId, Incarnation, OpId, SourceAuthority};
use switchyard_core::handoff::policy::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_core::handoff::store::{
    fenced_authority, AbortReason, AssignmentStore, AttemptOutcome, CellRow, DrainWrite,
    RegisterRefusal, StoreConfig, TxnOutcome,
};
use switchyard_core::MonoMs;

use crate::store_calls::{StoreCall, StoreJournal};

/// The source cell, the target cell and the host.
pub const SRC: CellId = CellId(1);
pub const TGT: CellId = CellId(2);
pub const HOST: HostId = HostId(7);

/// Model time starts here (the measurement was taken at 0: fresh for the whole run).
pub const MODEL_START_MS: u64 = 1_000;
pub const MODEL_REQUEST_TIMEOUT_MS: u64 = 5_000;
pub const MODEL_RECONCILE_TIMEOUT_MS: u64 = 4_000;
pub const MODEL_QUARANTINE_RETRY_MS: u64 = 10_000;
pub const MODEL_REGISTRATION_TIMEOUT_MS: u64 = 30_000;
pub const MODEL_FRESHNESS_MS: u64 = 3_600_000;
pub const MODEL_COOLDOWN_MS: u64 = 600_000;

/// The model's size knobs. `max_faults` bounds the faults of one run (a replacement, a restart,
/// a drain, a director crash, a DB outage, the target filling up, the disable switch, the
/// control closing); the counted kinds (`replacements`, `restarts`, `drains`) also have their
/// own budget, and the switches enable or disable a kind. Director sends, lost answers, DB
/// results and client moves are not faults: they are bounded by the state they change.
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
    /// The correction may be disabled.
    pub disable: bool,
    /// The desktop's control session may close (a replacement reopens it).
    pub control_closes: bool,
}

impl Default for HandoffParams {
    /// The review bounds: two clients (phone and iPad), one replacement, one restart, one
    /// drain, every DB outcome (commit, explicit abort, ambiguous, unavailable then recovery),
    /// any two faults in one run, one time advance.
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

/// The environment's moves; every one is a core input or "time advances".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum HoAction {
    /// The director (re-)delivers its request (picking one read-only from the store if it has
    /// none); `lost`: the immediate answer never reaches it, so it keeps the request.
    DirectorSends {
        lost: bool,
    },
    /// The director crashes, restarts and recomputes its request from the store.
    DirectorCrashRestart,
    /// A client reaches the source: `acquire(Accept)`.
    ClientArrives {
        client: u8,
    },
    /// After the accept's await: `revalidate`, `acquire(ClientConn)` (the attach now waits for
    /// durable persistence), `release(Accept)`.
    ClientAttaches {
        client: u8,
    },
    /// Persistence done: `revalidate` the attach.
    ClientPersisted {
        client: u8,
    },
    /// The client leaves: `release`.
    ClientLeaves {
        client: u8,
    },
    /// A replacement control's activation: `acquire(ControlOp)`.
    ControlActivates,
    /// After its await: `revalidate`, `register_control` (same incarnation), `handle_rebind`,
    /// `release`.
    ControlRebinds,
    /// The desktop's control session closes: `handle_session_closed`.
    ControlCloses,
    /// The source cell process restarts: `register_control` with incarnation + 1 and a fresh
    /// machine (the old process's clients and control op are gone). `old_lingers`: a rolling
    /// restart, where the old process lives on until its attempt in flight ends (its results
    /// reach it); otherwise its results reach the new machine late.
    SourceRestart {
        old_lingers: bool,
    },
    /// The DB runs queued job `job` (index into `HoState::jobs`) of an attempt in flight; its
    /// result goes to the machine that asked.
    DbRuns {
        job: u8,
        delivery: Delivery,
    },
    /// The DB runs a job whose attempt has ended, or whose process has died: its result goes to
    /// the machine that asked if it still lives, else to the current (replacement) one.
    LateCallback {
        job: u8,
        delivery: Delivery,
    },
    /// The DB goes down: results become `StoreUnavailable`, registrations and fences wait.
    DbOutage,
    DbRecovers,
    /// The adapter writes the drain fence the machine asked for.
    FenceWrites,
    /// `handle_emergency_drain` at the current source.
    EmergencyDrain,
    /// The persistent switch (store) and the source's switch go off; the director lags.
    Disable,
    /// Another host takes (`full`) or frees the target's last slot (the model only fills it).
    TargetCapacity {
        full: bool,
    },
    /// The desktop registers at the target after a commit.
    TargetRegisters,
    /// The clock advances to the next deadline: `handle_timeout` and `expire_migrations`.
    TimeAdvances,
}

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
    fn ticket(self) -> Option<Ticket> {
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
    fn key(&self) -> (u8, JobKind, AttemptRef, bool) {
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

/// What the last step did, kept in the state so `always` properties can judge transitions.
///
/// Two kinds of record. [`Anomalies`] are judged by the `always` properties: each field is what
/// a step must never do, named after what it did, and stays `false` in a correct run (so it
/// adds no states). [`Events`] are what the `sometimes` witnesses look for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepFacts {
    pub anomalies: Anomalies,
    pub events: Events,
}

/// Transition facts a correct core never produces (grouped by the property that judges them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Anomalies {
    /// HO-1: the store moved the host while the committing source was not gated by that op
    /// over zero tickets, or while the environment held client / control work there.
    pub moved_over_work: bool,
    /// HO-1: a retire was queued while the source held live tickets.
    pub retired_over_tickets: bool,
    /// HO-2: `Busy` with no live work, or `Started` with live work.
    pub idleness_misjudged: bool,
    /// HO-7: a barrier was installed while a counter or the environment's work was non-zero.
    pub barrier_over_work: bool,
    /// HO-8: a heartbeat / activity renewal changed a counter or the idleness.
    pub heartbeat_counted: bool,
    /// HO-10: a missing or expired DB lease changed a counter or the idleness.
    pub lease_counted: bool,
    /// HO-S1: a sent op id is not the UUIDv5 of its authority and target, a fresh pick is not
    /// at the store's current authority, or a recomputed id differs for the same authority.
    pub op_id_inconsistent: bool,
    /// HO-S1 / HO-A3: a director step wrote the store (no prepare state).
    pub director_wrote_store: bool,
    /// HO-S2: an answer other than `Started` changed the source machine.
    pub answer_changed_machine: bool,
    /// HO-S2: a `Busy` named counters other than the gate's non-zero ones.
    pub busy_counters_wrong: bool,
    /// HO-S3: new work was admitted while a barrier stood.
    pub admitted_under_barrier: bool,
    /// HO-S3: a client refused at a gated (undrained) source did not get 4409 WRONG_CELL, or a
    /// control activation there was not refused as `ControlGated`.
    pub gated_refusal_wrong: bool,
    /// HO-S4: a commit moved something other than the exact authority it re-checked, or not to
    /// its target with epoch + 1 and its own reservation.
    pub commit_not_exact: bool,
    /// HO-S5: a committed outcome did not close the source as retired-by-commit with a
    /// `RetireSourceDraining { Committed }`, or reopened it.
    pub commit_not_retired: bool,
    /// HO-S6: an explicit rollback (authority unchanged, not drained) did not reopen the
    /// barrier with `ReopenAdmission`, kept a reservation, or came with a changed authority.
    pub rollback_not_reopened: bool,
    /// HO-S6: an authority-changed outcome reopened, or did not retire the stale source.
    pub stale_not_retired: bool,
    /// HO-A1: an op id that already had a durable record committed (a second migration).
    pub second_migration: bool,
    /// HO-A2: the barrier went away without a definitive rollback of that attempt in the step.
    pub reopened_without_rollback: bool,
    /// HO-A4: a late callback changed the machine it reached.
    pub late_callback_changed_machine: bool,
    /// HO-A4: a registration at the source succeeded although the host had moved.
    pub registered_over_move: bool,
    /// HO-A4: a replacement control that registered in the store (holding a live, revalidated
    /// control ticket) was refused by the source machine, which keeps the old authority.
    pub registered_not_rebound: bool,
    /// HO-A5: an attempt started at a disabled source.
    pub started_while_disabled: bool,
    /// HO-A5: a drained source ended its attempt open.
    pub drained_reopened: bool,
    /// HO-A6: the reply was queued before the retire (or not at all).
    pub reply_before_retire: bool,
}

/// Events worth witnessing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Events {
    pub busy: bool,
    pub answered_recorded_result: bool,
    pub answered_in_progress: bool,
    pub refused_disabled: bool,
    pub committed: bool,
    pub committed_after_ambiguity: bool,
    pub explicit_abort_reopened: bool,
    pub fenced_abort: bool,
    pub stale_retired: bool,
    pub recovered_after_quarantine: bool,
    pub drained_during_attempt: bool,
    pub finished_drained: bool,
    pub fence_landed_first: bool,
    pub finished_disabled: bool,
    pub finished_without_session: bool,
    pub stale_txn_rejected: bool,
    pub late_from_old_machine: bool,
    pub rebound: bool,
    pub restart_refused_moved: bool,
    pub abandoned: bool,
    pub crash_during_attempt: bool,
    pub wrong_cell_at_barrier: bool,
    pub control_gated: bool,
    pub target_registered: bool,
    pub registration_recovered: bool,
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

    fn machine_mut(&mut self, inst: u8) -> Option<&mut SourceHandoff> {
        if inst == self.inst {
            self.src.as_mut()
        } else if inst.wrapping_add(1) == self.inst {
            self.old_src.as_deref_mut()
        } else {
            None
        }
    }

    /// The job belongs to the attempt in flight of the machine that asked for it.
    fn is_current_job(&self, job: &Job) -> bool {
        self.machine(job.inst)
            .and_then(|m| m.attempt())
            .is_some_and(|a| a.attempt == job.attempt)
    }
}

/// What draining the machine's actions produced.
#[derive(Debug, Default)]
struct Drained {
    retire: Option<(RetireReason, usize)>,
    reopen: bool,
    reply: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct HandoffModel {
    pub params: HandoffParams,
}

impl HandoffModel {
    pub fn new(params: HandoffParams) -> HandoffModel {
        assert!(params.clients <= 4, "at most four clients");
        HandoffModel { params }
    }

    pub fn source_config() -> SourceConfig {
        SourceConfig {
            request_timeout_ms: MODEL_REQUEST_TIMEOUT_MS,
            reconcile_timeout_ms: MODEL_RECONCILE_TIMEOUT_MS,
            quarantine_retry_ms: MODEL_QUARANTINE_RETRY_MS,
            cell_capable: true,
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

    fn cell_row(capacity: u32, incarnation: Incarnation) -> CellRow {
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
        };
        journal.record(StoreCall::Configure { config });
        let mut store = AssignmentStore::new(config);
        for (cell, capacity) in [(SRC, 10), (TGT, 1)] {
            let row = Self::cell_row(capacity, Incarnation(1));
            let answer = store.upsert_cell(cell, row);
            journal.record(StoreCall::UpsertCell { cell, row, answer });
            answer.expect("model cell");
        }
        let answer = store.insert_host(HOST, SRC, true);
        journal.record(StoreCall::InsertHost {
            host: HOST,
            cell: SRC,
            desktop_capable: true,
            answer,
        });
        let auth = answer.expect("host");
        let p = &self.params;
        HoState {
            now: MonoMs(MODEL_START_MS),
            store,
            src: Some(SourceHandoff::new(Self::source_config(), auth, true)),
            inst: 0,
            old_src: None,
            clients: vec![
                Client {
                    phase: ClientPhase::Away,
                    visits_left: p.client_visits,
                };
                usize::from(p.clients)
            ],
            control: None,
            dir_request: None,
            jobs: Vec::new(),
            pending_fence: None,
            db_up: true,
            disabled: false,
            target_full: false,
            budget: Budget {
                faults: p.max_faults,
                replacements: p.replacements,
                restarts: p.restarts,
                drains: p.drains,
                time_advances: p.time_advances,
            },
            last: StepFacts::default(),
        }
    }

    /// The director's read-only pick: the real `evaluate` over what it reads from the store.
    fn pick(state: &HoState) -> Option<HandoffRequest> {
        let store = &state.store;
        let authority = store.authority(HOST)?;
        let row = store.assignment(HOST)?;
        let source_cell = store.cell(authority.cell)?;
        let target = store.cell(TGT)?;
        let candidate = CandidateView {
            authority,
            source_cell_capable: source_cell.handoff_capable,
            desktop_capable: row.desktop_capable,
            measurement: Some((TGT, Self::measurement())),
            cooldown_until: store.cooldown_until(HOST),
        };
        let target = TargetView {
            cell: TGT,
            capable: target.handoff_capable,
            load: store.cell_load(TGT),
            capacity: target.capacity,
        };
        evaluate(
            state.now,
            &Self::director_policy(),
            &candidate,
            Some(&target),
        )
        .ok()
    }

    /// Drain machine `inst`'s actions into the environment (DB jobs, the fence to write).
    fn drain(state: &mut HoState, inst: u8, after_quarantine: bool) -> Drained {
        let mut out = Drained::default();
        let mut actions = Vec::new();
        if let Some(m) = state.machine_mut(inst) {
            while let Some(action) = m.poll_action() {
                actions.push(action);
            }
        }
        for (index, action) in actions.into_iter().enumerate() {
            match action {
                Action::RunTransaction { attempt, request } => state.jobs.push(Job {
                    inst,
                    kind: JobKind::Transaction,
                    attempt,
                    request,
                    after_quarantine: false,
                }),
                Action::Reconcile { attempt, request } => state.jobs.push(Job {
                    inst,
                    kind: JobKind::Reconcile,
                    attempt,
                    request,
                    after_quarantine,
                }),
                Action::Quarantined { .. } => {}
                Action::RetireSourceDraining { reason } => out.retire = Some((reason, index)),
                Action::ReopenAdmission { .. } => out.reopen = true,
                Action::FenceAuthority { authority, .. } => state.pending_fence = Some(authority),
                // The asynchronous reply is lost on its way (see the module doc).
                Action::Reply(_) => out.reply = Some(index),
            }
        }
        state.jobs.sort_by_key(Job::key);
        out
    }

    /// The step function: the real core, fed the action, outputs drained and judged.
    pub fn step(&self, before: &HoState, action: HoAction) -> HoState {
        self.step_journaled(before, action, &mut ())
    }

    /// [`Self::step`], recording every call into the store and its answer (trace replay
    /// against another store).
    pub fn step_journaled<J: StoreJournal>(
        &self,
        before: &HoState,
        action: HoAction,
        journal: &mut J,
    ) -> HoState {
        let mut state = before.clone();
        state.last = StepFacts::default();
        match action {
            HoAction::DirectorSends { lost } => Self::director_sends(&mut state, lost),
            HoAction::DirectorCrashRestart => {
                state.budget.faults -= 1;
                let old = state.dir_request.take();
                state.last.events.crash_during_attempt =
                    state.src.as_ref().is_some_and(|m| m.attempt().is_some());
                let new = Self::pick(&state);
                if let (Some(old), Some(new)) = (old, new) {
                    state.last.anomalies.op_id_inconsistent =
                        (old.source == new.source) != (old.op_id == new.op_id);
                }
                state.dir_request = new;
            }
            HoAction::ClientArrives { client } => Self::client_arrives(&mut state, client),
            HoAction::ClientAttaches { client } => Self::client_attaches(&mut state, client),
            HoAction::ClientPersisted { client } => Self::client_persisted(&mut state, client),
            HoAction::ClientLeaves { client } => {
                let c = &mut state.clients[usize::from(client)];
                if let (ClientPhase::Attached(t), Some(src)) = (c.phase, state.src.as_mut()) {
                    let _ = src.release(t);
                }
                c.phase = ClientPhase::Away;
            }
            HoAction::ControlActivates => {
                state.budget.faults -= 1;
                state.budget.replacements -= 1;
                if let Some(src) = state.src.as_mut() {
                    let gate = admission_kind(src);
                    match src.acquire(WorkKind::ControlOp) {
                        Ok(t) => state.control = Some(t),
                        Err(r) => {
                            state.last.events.control_gated = r == AdmissionRefusal::ControlGated;
                            state.last.anomalies.gated_refusal_wrong =
                                gate == GateKind::Gated && r != AdmissionRefusal::ControlGated;
                        }
                    }
                }
            }
            HoAction::ControlRebinds => Self::control_rebinds(&mut state, journal),
            HoAction::ControlCloses => {
                state.budget.faults -= 1;
                if let Some(src) = state.src.as_mut() {
                    let generation = src.authority().generation;
                    let _ = src.handle_session_closed(state.now, generation);
                }
            }
            HoAction::SourceRestart { old_lingers } => {
                Self::source_restart(&mut state, old_lingers, journal)
            }
            HoAction::DbRuns { job, delivery } | HoAction::LateCallback { job, delivery } => {
                Self::db_runs(&mut state, usize::from(job), delivery, journal);
            }
            HoAction::DbOutage => {
                state.budget.faults -= 1;
                state.db_up = false;
            }
            HoAction::DbRecovers => state.db_up = true,
            HoAction::FenceWrites => {
                if let Some(authority) = state.pending_fence.take() {
                    let answer = state.store.emergency_drain(&authority);
                    journal.record(StoreCall::EmergencyDrain { authority, answer });
                    state.last.events.fence_landed_first =
                        matches!(answer, DrainWrite::Fenced { .. });
                }
            }
            HoAction::EmergencyDrain => {
                state.budget.faults -= 1;
                state.budget.drains -= 1;
                if let Some(src) = state.src.as_mut() {
                    state.last.events.drained_during_attempt = src.attempt().is_some();
                    let _ = src.handle_emergency_drain(state.now, DrainReason::Emergency);
                }
                let inst = state.inst;
                let _ = Self::drain(&mut state, inst, false);
            }
            HoAction::Disable => {
                state.budget.faults -= 1;
                state.disabled = true;
                state.store.set_enabled(false);
                journal.record(StoreCall::SetEnabled { enabled: false });
                if let Some(src) = state.src.as_mut() {
                    let _ = src.handle_set_enabled(state.now, false);
                }
            }
            HoAction::TargetCapacity { full } => {
                state.budget.faults -= 1;
                state.target_full = full;
                let inc = state
                    .store
                    .cell(TGT)
                    .map_or(Incarnation(1), |c| c.incarnation);
                let row = Self::cell_row(u32::from(!full), inc);
                let answer = state.store.upsert_cell(TGT, row);
                journal.record(StoreCall::UpsertCell {
                    cell: TGT,
                    row,
                    answer,
                });
                answer.expect("known cell");
            }
            HoAction::TargetRegisters => {
                let inc = state
                    .store
                    .cell(TGT)
                    .map_or(Incarnation(1), |c| c.incarnation);
                state.last.events.target_registered =
                    Self::register(&mut state.store, state.now, TGT, inc, journal).is_ok();
            }
            HoAction::TimeAdvances => {
                state.budget.time_advances -= 1;
                if let Some(at) = state.next_deadline() {
                    state.now = state.now.max(at);
                }
                let now = state.now;
                let insts: Vec<u8> = state.machines().map(|(i, _)| i).collect();
                for inst in insts {
                    let Some(m) = state.machine_mut(inst) else {
                        continue;
                    };
                    let from_quarantine = m.attempt().is_some_and(|a| {
                        matches!(
                            a.phase,
                            Phase::Quarantined {
                                cause: QuarantineCause::StoreUnavailable,
                                ..
                            }
                        )
                    });
                    let _ = m.handle_timeout(now);
                    let _ = Self::drain(&mut state, inst, from_quarantine);
                }
                let expired = state.store.expire_migrations(state.now);
                state.last.events.registration_recovered = !expired.is_empty();
                if J::RECORDS {
                    journal.record(StoreCall::ExpireMigrations {
                        now: state.now,
                        answer: expired,
                    });
                }
            }
        }
        Self::judge_transition(before, &mut state, action);
        // Symmetry reduction: clients are interchangeable (nothing in the core knows which
        // connection is the phone), so the state keeps them sorted.
        state.clients.sort_unstable();
        state
    }

    fn director_sends(state: &mut HoState, lost: bool) {
        let store_before = state.store.clone();
        let fresh_pick = state.dir_request.is_none();
        let Some(req) = state.dir_request.or_else(|| Self::pick(state)) else {
            return;
        };
        state.dir_request = Some(req);
        let live_work = state.live_work();
        let anomalies = &mut state.last.anomalies;
        anomalies.op_id_inconsistent = req.op_id != OpId::derive(&req.source, req.target)
            || (fresh_pick && state.store.authority(HOST) != Some(req.source));
        // Without a session for the host here (a restarted source found it moved), the
        // request is answered by the adapter: the director drops it.
        let mut answer = None;
        if let Some(src) = state.src.as_mut() {
            // HO-8 / HO-10: the open control's heartbeats and a stale DB lease at the same
            // instant (`&self` methods: they cannot count).
            let (counters, idle) = (src.gate().counters(), src.gate().is_idle());
            let unchanged =
                |m: &SourceHandoff| m.gate().counters() == counters && m.gate().is_idle() == idle;
            anomalies.heartbeat_counted = src.note_heartbeat(Heartbeat::Ping)
                != NotCounted::NotClientWork
                || src.note_heartbeat(Heartbeat::Pong) != NotCounted::NotClientWork
                || src.note_heartbeat(Heartbeat::ActivityRenewal) != NotCounted::NotClientWork
                || !unchanged(src);
            anomalies.lease_counted = src.note_activity_lease(ActivityLease::Missing)
                != NotCounted::NotIdlenessEvidence
                || src.note_activity_lease(ActivityLease::Expired {
                    expired_at: MonoMs::ZERO,
                }) != NotCounted::NotIdlenessEvidence
                || !unchanged(src);
            let machine_before = src.clone();
            let begin = src.begin_handoff(state.now, &req);
            let events = &mut state.last.events;
            match begin {
                Begin::Started(_) => {
                    anomalies.idleness_misjudged = live_work > 0;
                }
                Begin::Answered(reply) => {
                    anomalies.answer_changed_machine = *src != machine_before;
                    match reply {
                        HandoffReply::Busy {
                            counters: named, ..
                        } => {
                            events.busy = true;
                            anomalies.idleness_misjudged = live_work == 0;
                            anomalies.busy_counters_wrong =
                                named != counters || named == Counters::default();
                        }
                        HandoffReply::InProgress { .. } => {
                            events.answered_in_progress = !fresh_pick;
                        }
                        HandoffReply::Result(_) => events.answered_recorded_result = !fresh_pick,
                        HandoffReply::Refused {
                            reason: Refusal::Disabled,
                            ..
                        } => events.refused_disabled = true,
                        HandoffReply::Superseded { .. } | HandoffReply::Refused { .. } => {}
                    }
                }
            }
            answer = Some(begin);
        }
        let inst = state.inst;
        let _ = Self::drain(state, inst, false);
        // A final answer that arrives ends the director's work on this request.
        let keep = lost
            || matches!(
                answer,
                Some(Begin::Started(_) | Begin::Answered(HandoffReply::InProgress { .. }))
            );
        if !keep {
            state.dir_request = None;
        }
        state.last.anomalies.director_wrote_store = state.store != store_before;
    }

    fn client_refused(state: &mut HoState, refusal: AdmissionRefusal, gate: GateKind) {
        let wrong_cell = refusal == AdmissionRefusal::WrongCell
            && refusal.close_code() == Some(WRONG_CELL_CLOSE_CODE);
        state.last.events.wrong_cell_at_barrier = gate == GateKind::Gated && wrong_cell;
        state.last.anomalies.gated_refusal_wrong = gate == GateKind::Gated && !wrong_cell;
    }

    fn client_arrives(state: &mut HoState, client: u8) {
        let c = &mut state.clients[usize::from(client)];
        c.visits_left -= 1;
        let Some(src) = state.src.as_mut() else {
            return;
        };
        let gate = admission_kind(src);
        match src.acquire(WorkKind::Accept) {
            Ok(t) => c.phase = ClientPhase::Accepting(t),
            Err(r) => Self::client_refused(state, r, gate),
        }
    }

    fn client_attaches(state: &mut HoState, client: u8) {
        let c = &mut state.clients[usize::from(client)];
        let (ClientPhase::Accepting(accept), Some(src)) = (c.phase, state.src.as_mut()) else {
            c.phase = ClientPhase::Away;
            return;
        };
        if let Revalidation::Abandon { .. } = src.revalidate(accept) {
            state.last.events.abandoned = true;
            c.phase = ClientPhase::Away;
            return;
        }
        let gate = admission_kind(src);
        let attach = src.acquire(WorkKind::ClientConn);
        let _ = src.release(accept);
        match attach {
            Ok(conn) => c.phase = ClientPhase::Attaching(conn),
            Err(r) => {
                c.phase = ClientPhase::Away;
                Self::client_refused(state, r, gate);
            }
        }
    }

    fn client_persisted(state: &mut HoState, client: u8) {
        let c = &mut state.clients[usize::from(client)];
        let (ClientPhase::Attaching(conn), Some(src)) = (c.phase, state.src.as_mut()) else {
            c.phase = ClientPhase::Away;
            return;
        };
        match src.revalidate(conn) {
            Revalidation::Continue => c.phase = ClientPhase::Attached(conn),
            Revalidation::Abandon { .. } => {
                state.last.events.abandoned = true;
                c.phase = ClientPhase::Away;
            }
        }
    }

    fn control_rebinds<J: StoreJournal>(state: &mut HoState, journal: &mut J) {
        let Some(ticket) = state.control.take() else {
            return;
        };
        let moved = state.moved();
        let Some(src) = state.src.as_mut() else {
            return;
        };
        if let Revalidation::Abandon { .. } = src.revalidate(ticket) {
            state.last.events.abandoned = true;
            return;
        }
        let inc = src.authority().incarnation;
        match Self::register(&mut state.store, state.now, SRC, inc, journal) {
            Ok(auth) => {
                state.last.anomalies.registered_over_move = moved;
                let rebound = src.handle_rebind(state.now, ticket, auth, true).is_ok();
                state.last.events.rebound = rebound;
                state.last.anomalies.registered_not_rebound = !rebound;
            }
            Err(RegisterRefusal::NotAssignedHere { .. }) => {
                state.last.events.restart_refused_moved = true;
            }
            Err(_) => {}
        }
        let _ = src.release(ticket);
    }

    /// The desktop's control registers at `cell` (journaled).
    fn register<J: StoreJournal>(
        store: &mut AssignmentStore,
        now: MonoMs,
        cell: CellId,
        incarnation: Incarnation,
        journal: &mut J,
    ) -> Result<SourceAuthority, RegisterRefusal> {
        let answer = store.register_control(now, HOST, cell, incarnation, true);
        journal.record(StoreCall::RegisterControl {
            now,
            host: HOST,
            cell,
            incarnation,
            desktop_capable: true,
            answer,
        });
        answer
    }

    fn source_restart<J: StoreJournal>(state: &mut HoState, old_lingers: bool, journal: &mut J) {
        state.budget.faults -= 1;
        state.budget.restarts -= 1;
        let moved = state.moved();
        let inc = state
            .store
            .cell(SRC)
            .map_or(Incarnation(1), |c| Incarnation(c.incarnation.0 + 1));
        // The old process is gone: its clients' connections and its control op with it.
        for c in &mut state.clients {
            c.phase = ClientPhase::Away;
        }
        state.control = None;
        state.old_src = if old_lingers {
            state.src.take().map(Box::new)
        } else {
            None
        };
        state.inst += 1;
        match Self::register(&mut state.store, state.now, SRC, inc, journal) {
            Ok(auth) => {
                state.last.anomalies.registered_over_move = moved;
                let mut src = SourceHandoff::new(Self::source_config(), auth, true);
                if state.disabled {
                    let _ = src.handle_set_enabled(state.now, false);
                }
                state.src = Some(src);
            }
            Err(refusal) => {
                state.last.events.restart_refused_moved =
                    matches!(refusal, RegisterRefusal::NotAssignedHere { .. });
                state.src = None;
            }
        }
    }

    fn db_runs<J: StoreJournal>(
        state: &mut HoState,
        index: usize,
        delivery: Delivery,
        journal: &mut J,
    ) {
        let job = state.jobs.remove(index);
        let late = !state.is_current_job(&job);
        let auth_before = state.store.authority(HOST);
        let recorded_before = state.store.attempt(job.request.op_id).is_some();
        let result = match delivery {
            Delivery::Unavailable => DurableResult::StoreUnavailable,
            Delivery::Delivered | Delivery::Lost => {
                let (now, request) = (state.now, job.request);
                let outcome = match job.kind {
                    JobKind::Transaction => {
                        let answer = state.store.run_transaction(now, &request);
                        journal.record(StoreCall::RunTransaction {
                            now,
                            request,
                            answer,
                        });
                        Some(answer)
                    }
                    JobKind::Reconcile => {
                        let answer = state.store.reconcile(now, &request);
                        journal.record(StoreCall::Reconcile {
                            now,
                            request,
                            answer,
                        });
                        answer
                    }
                };
                state.last.events.stale_txn_rejected = job.inst != state.inst
                    && job.kind == JobKind::Transaction
                    && matches!(outcome, Some(TxnOutcome::AuthorityChanged { .. }));
                match (outcome, delivery) {
                    (None, _) => DurableResult::StoreUnavailable,
                    (Some(_), Delivery::Lost) => DurableResult::Ambiguous(Ambiguity::ResultLost),
                    (Some(o), _) => DurableResult::Done(o),
                }
            }
        };
        let auth_after = state.store.authority(HOST);
        if auth_after.map(|a| a.epoch) != auth_before.map(|a| a.epoch) {
            Self::judge_commit(state, &job, auth_before, auth_after, recorded_before);
        }
        // The machine that asked, if it still lives; else the current one (a late callback).
        let to = if state.machine(job.inst).is_some() {
            job.inst
        } else {
            state.inst
        };
        let now = state.now;
        let Some(m) = state.machine_mut(to) else {
            return;
        };
        let machine_before = m.clone();
        let in_flight = m.attempt().is_some();
        let _ = match job.kind {
            JobKind::Transaction => m.handle_transaction_result(now, job.attempt, result),
            JobKind::Reconcile => m.handle_reconcile_result(now, job.attempt, result),
        };
        let changed = *m != machine_before;
        let finished = in_flight && m.attempt().is_none();
        let reopened =
            machine_before.gate().barrier().is_some() && m.gate().state() == GateState::Open;
        let explicit_rollback =
            !late && matches!(result, DurableResult::Done(TxnOutcome::RolledBack { .. }));
        if late {
            state.last.events.late_from_old_machine = job.inst != to;
            state.last.anomalies.late_callback_changed_machine = changed;
        }
        state.last.anomalies.reopened_without_rollback = reopened && !explicit_rollback;
        let drained = Self::drain(state, to, false);
        if finished {
            Self::judge_finish(state, to, &job, &drained);
            if to != state.inst {
                // The old process exits once its attempt has ended.
                state.old_src = None;
            }
        }
    }

    /// HO-1 / HO-S4 / HO-A1: the store moved the host in this step.
    fn judge_commit(
        state: &mut HoState,
        job: &Job,
        before: Option<SourceAuthority>,
        after: Option<SourceAuthority>,
        recorded_before: bool,
    ) {
        let req = &job.request;
        let env_quiet = job.inst != state.inst || state.live_work() == 0;
        let quiet = env_quiet
            && state.machine(job.inst).is_some_and(|m| {
                m.gate().barrier().is_some_and(|b| b.op_id == req.op_id)
                    && m.gate().counters().is_zero()
            });
        let exact = before == Some(req.source)
            && after.is_some_and(|a| {
                a.cell == req.target && before.is_some_and(|b| a.epoch == b.epoch.next())
            })
            && state
                .store
                .reservation(req.op_id)
                .is_some_and(|r| r.cell == req.target);
        let anomalies = &mut state.last.anomalies;
        anomalies.moved_over_work = !quiet;
        anomalies.commit_not_exact = !exact;
        anomalies.second_migration = recorded_before;
    }

    /// HO-S5 / HO-S6 / HO-A5 / HO-A6: the attempt in flight reached its terminal outcome.
    fn judge_finish(state: &mut HoState, inst: u8, job: &Job, drained: &Drained) {
        let Some(src) = state.machine(inst).cloned() else {
            return;
        };
        let Some(result) = src.last_result() else {
            return;
        };
        let outcome = OutcomeKind::of(&result.outcome);
        let gate = GateKind::of(src.gate().state());
        let is_drained = src.gate().is_drained();
        let retire = drained.retire.map(|(reason, _)| reason);
        let reservation_kept = state.store.reservation(result.op_id).is_some();
        let current = state.store.authority(HOST);
        // HO-S6 / HO-L1: "unchanged" is the authority the attempt left the host in. A fence
        // that found the claim exact renewed it in the same write (`FencedRenewed`): the store
        // must hold the renewed authority, and an undrained source must have adopted it (a
        // drained one never reopens and keeps its own). Otherwise the store and the source
        // both still hold the claim.
        let authority_unchanged = match state.store.attempt(result.op_id).map(|r| r.outcome) {
            Some(AttemptOutcome::FencedRenewed) if outcome == OutcomeKind::Fenced => {
                current == Some(fenced_authority(job.request.source))
                    && (is_drained || current == Some(src.authority()))
            }
            _ => current == Some(src.authority()),
        };
        let a = &mut state.last.anomalies;
        a.retired_over_tickets = retire.is_some() && !src.gate().counters().is_zero();
        a.reply_before_retire = match (drained.retire, drained.reply) {
            (Some((_, r)), Some(p)) => r > p,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        a.drained_reopened = is_drained && (gate == GateKind::Open || drained.reopen);
        match outcome {
            OutcomeKind::Committed => {
                a.commit_not_retired = gate != GateKind::Retired
                    || !matches!(retire, Some(RetireReason::Committed { .. }))
                    || drained.reopen;
            }
            OutcomeKind::RolledBack | OutcomeKind::Fenced => {
                let reopened = gate == GateKind::Open && drained.reopen;
                a.rollback_not_reopened = reservation_kept
                    || !authority_unchanged
                    || (!is_drained && !reopened)
                    || retire.is_some();
            }
            OutcomeKind::AuthorityChanged => {
                let retired_stale = gate == GateKind::StaleRetired
                    && matches!(retire, Some(RetireReason::StaleAuthority { .. }));
                let drained_closed = is_drained && gate == GateKind::Drained;
                a.stale_not_retired = drained.reopen || !(retired_stale || drained_closed);
            }
        }
        let e = &mut state.last.events;
        e.committed = outcome == OutcomeKind::Committed && job.kind == JobKind::Transaction;
        e.committed_after_ambiguity =
            outcome == OutcomeKind::Committed && job.kind == JobKind::Reconcile;
        e.explicit_abort_reopened = outcome == OutcomeKind::RolledBack && drained.reopen;
        e.fenced_abort = outcome == OutcomeKind::Fenced;
        e.stale_retired = matches!(retire, Some(RetireReason::StaleAuthority { .. }));
        e.recovered_after_quarantine = job.after_quarantine;
        e.finished_drained = is_drained;
        e.finished_disabled = !src.is_enabled();
        e.finished_without_session = !src.session_open();
    }

    /// Facts every step shares: the gate's transitions on the same machine.
    fn judge_transition(before: &HoState, state: &mut HoState, action: HoAction) {
        let (Some(b), Some(a)) = (before.src.as_ref(), state.src.as_ref()) else {
            return;
        };
        if before.inst != state.inst {
            return;
        }
        let was_gated = b.gate().barrier().is_some();
        let admitted = a.gate().counters().total() > b.gate().counters().total()
            || state.live_work() > before.live_work();
        let installed = !was_gated && a.gate().barrier().is_some();
        let reopened = was_gated && a.gate().state() == GateState::Open;
        let db_step = matches!(
            action,
            HoAction::DbRuns { .. } | HoAction::LateCallback { .. }
        );
        let anomalies = &mut state.last.anomalies;
        if installed {
            anomalies.barrier_over_work = !b.gate().counters().is_zero() || before.live_work() > 0;
            anomalies.started_while_disabled = !b.is_enabled();
        }
        anomalies.admitted_under_barrier = was_gated && admitted;
        // Only a DB result may take a barrier away (judged in `db_runs`); any other step that
        // does (a timeout, a drain, a request) reopens without a terminal outcome.
        if reopened && !db_step {
            anomalies.reopened_without_rollback = true;
        }
    }
}

impl Model for HandoffModel {
    type State = HoState;
    type Action = HoAction;

    fn init_states(&self) -> Vec<HoState> {
        vec![self.init_state()]
    }

    fn actions(&self, state: &HoState, actions: &mut Vec<HoAction>) {
        let (b, p) = (&state.budget, &self.params);
        // Faults that only matter to an attempt in flight are offered only then (elsewhere
        // they would only multiply states that the properties judge the same way).
        let in_flight = state.src.as_ref().is_some_and(|m| m.attempt().is_some());
        let fault = b.faults > 0;
        // A fresh pick whose op the source has already answered is a duplicate, which a kept
        // request (lost answer, crash) already exercises; a pick that finds nothing sends
        // nothing.
        let worth_sending = state.dir_request.is_some()
            || Self::pick(state).is_some_and(|r| {
                state
                    .src
                    .as_ref()
                    .and_then(SourceHandoff::last_result)
                    .is_none_or(|last| last.op_id != r.op_id)
            });
        if worth_sending {
            actions.push(HoAction::DirectorSends { lost: false });
            actions.push(HoAction::DirectorSends { lost: true });
        }
        if fault && p.director_crash && state.dir_request.is_some() && in_flight {
            actions.push(HoAction::DirectorCrashRestart);
        }
        if let Some(src) = state.src.as_ref() {
            for (i, c) in state.clients.iter().enumerate() {
                let client = u8::try_from(i).unwrap_or(u8::MAX);
                actions.push(match c.phase {
                    ClientPhase::Away if c.visits_left > 0 => HoAction::ClientArrives { client },
                    ClientPhase::Away => continue,
                    ClientPhase::Accepting(_) => HoAction::ClientAttaches { client },
                    ClientPhase::Attaching(_) => HoAction::ClientPersisted { client },
                    ClientPhase::Attached(_) => HoAction::ClientLeaves { client },
                });
            }
            let admitting_or_gated = !src.gate().is_drained()
                && matches!(src.gate().state(), GateState::Open | GateState::Gated(_));
            match state.control {
                None if fault && b.replacements > 0 && admitting_or_gated => {
                    actions.push(HoAction::ControlActivates);
                }
                Some(_) if state.db_up => actions.push(HoAction::ControlRebinds),
                _ => {}
            }
            if fault && p.control_closes && src.session_open() {
                actions.push(HoAction::ControlCloses);
            }
            if fault
                && b.drains > 0
                && !src.gate().is_drained()
                && (in_flight || state.live_work() > 0)
            {
                actions.push(HoAction::EmergencyDrain);
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
        if state.db_up && state.pending_fence.is_some() {
            actions.push(HoAction::FenceWrites);
        }
        if fault && p.disable && !state.disabled && state.src.is_some() {
            actions.push(HoAction::Disable);
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
    }

    fn next_state(&self, state: &HoState, action: HoAction) -> Option<HoState> {
        Some(self.step(state, action))
    }

    fn within_boundary(&self, state: &HoState) -> bool {
        // Every environment event is budgeted; this states the resulting bounds.
        let horizon =
            MODEL_START_MS + u64::from(self.params.time_advances) * MODEL_REGISTRATION_TIMEOUT_MS;
        state.now.as_ms() <= horizon && state.jobs.len() <= 16
    }

    fn properties(&self) -> Vec<Property<Self>> {
        handoff_properties()
    }
}

/// The source's admission as a client sees it: a drained source is `Drained` whatever its
/// barrier (the hard-drain path answers it, HO-A5).
fn admission_kind(m: &SourceHandoff) -> GateKind {
    if m.gate().is_drained() {
        GateKind::Drained
    } else {
        GateKind::of(m.gate().state())
    }
}

fn committed_rows(s: &HoState) -> u64 {
    s.store
        .attempts()
        .filter(|(_, r)| matches!(r.outcome, AttemptOutcome::Committed { .. }))
        .count() as u64
}

/// The properties, each named by its requirement ID: the `always` properties first, then the
/// `sometimes` witnesses (named `<ID> witness: ...`).
pub fn handoff_properties() -> Vec<Property<HandoffModel>> {
    vec![
        // ---- always -------------------------------------------------------------------------
        Property::always(
            "HO-1 never moves with a client attached; a retire closes no client",
            |_, s: &HoState| !s.last.anomalies.moved_over_work && !s.last.anomalies.retired_over_tickets,
        ),
        Property::always(
            "HO-2 busy iff live work at that instant; the open control is no reason to wait",
            |_, s: &HoState| !s.last.anomalies.idleness_misjudged,
        ),
        Property::always(
            "HO-7 barrier only installed when every counter is zero; counters equal the live work",
            |_, s: &HoState| {
                !s.last.anomalies.barrier_over_work
                    && s.src
                        .as_ref()
                        .is_none_or(|m| m.gate().counters().total() == u64::from(s.live_work()))
            },
        ),
        Property::always("HO-8 heartbeats never change counters", |_, s: &HoState| {
            !s.last.anomalies.heartbeat_counted
        }),
        Property::always(
            "HO-10 a missing or expired DB lease never proves idleness",
            |_, s: &HoState| !s.last.anomalies.lease_counted,
        ),
        Property::always(
            "HO-S1 duplicate/retried request reuses the same op id; the pick is read-only",
            |_, s: &HoState| {
                !s.last.anomalies.op_id_inconsistent
                    && !s.last.anomalies.director_wrote_store
                    && s
                        .store
                        .attempts()
                        .all(|(op, r)| *op == OpId::derive(&r.source, r.target))
            },
        ),
        Property::always(
            "HO-S2 busy holds no barrier, closes nothing, names the non-zero counters",
            |_, s: &HoState| {
                !s.last.anomalies.answer_changed_machine && !s.last.anomalies.busy_counters_wrong
            },
        ),
        Property::always(
            "HO-S3 no admission under a barrier; a refused client gets 4409 WRONG_CELL",
            |_, s: &HoState| {
                let gated_is_empty = s
                    .machines()
                    .all(|(_, m)| m.gate().barrier().is_none() || m.gate().counters().is_zero());
                !s.last.anomalies.admitted_under_barrier
                    && !s.last.anomalies.gated_refusal_wrong
                    && gated_is_empty
            },
        ),
        Property::always(
            "HO-S4 a commit moves exactly the re-checked authority; store invariants hold (no reservation leak)",
            |_, s: &HoState| {
                !s.last.anomalies.commit_not_exact && s.store.check_invariants().is_ok()
            },
        ),
        Property::always(
            "HO-S5 committed => source retired via draining, never reopened",
            |_, s: &HoState| {
                let moved_source_closed =
                    !s.moved() || s.machines().all(|(_, m)| m.gate().state() != GateState::Open);
                !s.last.anomalies.commit_not_retired && moved_source_closed
            },
        ),
        Property::always(
            "HO-S6 explicit abort with unchanged authority => reopened, no reservation kept; authority changed => retired",
            |_, s: &HoState| {
                !s.last.anomalies.rollback_not_reopened && !s.last.anomalies.stale_not_retired
            },
        ),
        Property::always("HO-A1 at most one migration per op id", |_, s: &HoState| {
            let epoch = s.store.assignment(HOST).map_or(0, |r| r.epoch.0);
            !s.last.anomalies.second_migration && epoch == 1 + committed_rows(s)
        }),
        Property::always(
            "HO-A2 never reopened without a terminal outcome (no reopen on timeout alone); the barrier stands while an attempt is in flight",
            |_, s: &HoState| {
                let barrier_held = s.machines().all(|(_, m)| match m.attempt() {
                    None => true,
                    Some(a) => m.gate().barrier().is_some_and(|b| {
                        b.op_id == a.attempt.op_id && b.seq == a.attempt.seq
                    }),
                });
                !s.last.anomalies.reopened_without_rollback && barrier_held
            },
        ),
        Property::always(
            "HO-A3 director crash strands nothing: an attempt in flight always has a DB job or a timer",
            |_, s: &HoState| {
                s.machines().all(|(inst, m)| {
                    let Some(a) = m.attempt() else {
                        return true;
                    };
                    let has_job = |kind: JobKind| {
                        s.jobs
                            .iter()
                            .any(|j| j.inst == inst && j.kind == kind && j.attempt == a.attempt)
                    };
                    m.poll_timeout().is_some()
                        && match a.phase {
                            Phase::InTransaction { .. } => has_job(JobKind::Transaction),
                            Phase::Reconciling { .. } => has_job(JobKind::Reconcile),
                            Phase::Quarantined { .. } => true,
                        }
                })
            },
        ),
        Property::always(
            "HO-A4 a late callback never changes (nor reopens) the replacement; a commit refuses old ownership",
            |_, s: &HoState| {
                !s.last.anomalies.late_callback_changed_machine
                    && !s.last.anomalies.registered_over_move
                    && !s.last.anomalies.registered_not_rebound
            },
        ),
        Property::always(
            "HO-A5 a drained source never reopens; disabled => no new attempt starts",
            |_, s: &HoState| {
                !s.last.anomalies.started_while_disabled
                    && !s.last.anomalies.drained_reopened
                    && s.machines().all(|(_, m)| {
                        !m.gate().is_drained() || m.gate().state() != GateState::Open
                    })
            },
        ),
        Property::always(
            "HO-A6 retire is queued before the reply; an expired registration is recovered",
            |_, s: &HoState| {
                !s.last.anomalies.reply_before_retire
                    && s.store.reservations().all(|(_, r)| r.expires_at > s.now)
            },
        ),
        // ---- sometimes ----------------------------------------------------------------------
        Property::sometimes("HO-S5 witness: commit retires the source", |_, s: &HoState| {
            s.last.events.committed
        }),
        Property::sometimes(
            "HO-S6 witness: explicit abort reopens admission",
            |_, s: &HoState| s.last.events.explicit_abort_reopened,
        ),
        Property::sometimes(
            "HO-S6 witness: authority changed retires the stale source",
            |_, s: &HoState| s.last.events.stale_retired,
        ),
        Property::sometimes("HO-A2 witness: ambiguous then commit", |_, s: &HoState| {
            s.last.events.committed_after_ambiguity
        }),
        Property::sometimes(
            "HO-A1 witness: ambiguous then fenced abort",
            |_, s: &HoState| s.last.events.fenced_abort,
        ),
        Property::sometimes("HO-S2 witness: busy", |_, s: &HoState| s.last.events.busy),
        Property::sometimes(
            "HO-7 witness: a control activation in flight makes the source busy",
            |_, s: &HoState| s.control.is_some() && s.last.events.busy,
        ),
        Property::sometimes(
            "HO-7 witness: an attach waiting for persistence makes the source busy",
            |_, s: &HoState| {
                s.last.events.busy
                    && s.clients
                        .iter()
                        .any(|c| matches!(c.phase, ClientPhase::Attaching(_)))
            },
        ),
        Property::sometimes(
            "HO-A2 witness: quarantined (store unavailable)",
            |_, s: &HoState| {
                s.machines().any(|(_, m)| {
                    m.attempt().is_some_and(|a| {
                        matches!(
                            a.phase,
                            Phase::Quarantined {
                                cause: QuarantineCause::StoreUnavailable,
                                ..
                            }
                        )
                    })
                })
            },
        ),
        Property::sometimes(
            "HO-A2 witness: quarantine (store unavailable) then recovery",
            |_, s: &HoState| s.last.events.recovered_after_quarantine,
        ),
        Property::sometimes("HO-A5 witness: drain during an attempt", |_, s: &HoState| {
            s.last.events.drained_during_attempt
        }),
        Property::sometimes(
            "HO-A5 witness: a drained source's attempt ends closed",
            |_, s: &HoState| s.last.events.finished_drained,
        ),
        Property::sometimes(
            "HO-A5 witness: the drain fence lands before the transaction",
            |_, s: &HoState| s.last.events.fence_landed_first,
        ),
        Property::sometimes(
            "HO-A5 witness: disabled, the attempt in flight still ends",
            |_, s: &HoState| s.last.events.finished_disabled,
        ),
        Property::sometimes(
            "HO-A5 witness: a disabled source refuses a new attempt",
            |_, s: &HoState| s.last.events.refused_disabled,
        ),
        Property::sometimes(
            "HO-A4 witness: after a restart the old transaction fails its re-check",
            |_, s: &HoState| s.last.events.stale_txn_rejected,
        ),
        Property::sometimes(
            "HO-A4 witness: a late callback reaches the restarted source",
            |_, s: &HoState| s.last.events.late_from_old_machine,
        ),
        Property::sometimes(
            "HO-A4 witness: a replacement control rebinds",
            |_, s: &HoState| s.last.events.rebound,
        ),
        Property::sometimes(
            "HO-A4 witness: the commit wins over the restart",
            |_, s: &HoState| s.last.events.restart_refused_moved,
        ),
        Property::sometimes(
            "HO-A4 witness: a late continuation abandons after a replacement or drain",
            |_, s: &HoState| s.last.events.abandoned,
        ),
        Property::sometimes(
            "HO-A1 witness: duplicate answered with the recorded result",
            |_, s: &HoState| s.last.events.answered_recorded_result,
        ),
        Property::sometimes(
            "HO-A1 witness: duplicate answered in progress",
            |_, s: &HoState| s.last.events.answered_in_progress,
        ),
        Property::sometimes(
            "HO-A3 witness: the attempt ends after its control session closed",
            |_, s: &HoState| s.last.events.finished_without_session,
        ),
        Property::sometimes(
            "HO-A3 witness: the director crashes during an attempt",
            |_, s: &HoState| s.last.events.crash_during_attempt,
        ),
        Property::sometimes(
            "HO-S3 witness: a client refused with 4409 WRONG_CELL at a gated source",
            |_, s: &HoState| s.last.events.wrong_cell_at_barrier,
        ),
        Property::sometimes(
            "HO-S3 witness: a control activation refused at a gated source",
            |_, s: &HoState| s.last.events.control_gated,
        ),
        Property::sometimes(
            "HO-A6 witness: the desktop registers at the target",
            |_, s: &HoState| s.last.events.target_registered,
        ),
        Property::sometimes(
            "HO-A6 witness: registration expiry starts bounded recovery",
            |_, s: &HoState| s.last.events.registration_recovered,
        ),
    ]
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
    pub counters: Counters,
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
            phase: m.attempt().map(|a| match a.phase {
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
            source: self.src.as_ref().map(SourceProjection::of),
            old_source: self.old_src.as_deref().map(SourceProjection::of),
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
                "{} attaches (waiting for persistence)",
                client_name(*client)
            ),
            HoAction::ClientPersisted { client } => {
                write!(f, "{}'s attach is persisted", client_name(*client))
            }
            HoAction::ClientLeaves { client } => write!(f, "{} leaves", client_name(*client)),
            HoAction::ControlActivates => write!(f, "a replacement control activates"),
            HoAction::ControlRebinds => write!(f, "the replacement control registers and rebinds"),
            HoAction::ControlCloses => write!(f, "the desktop's control session closes"),
            HoAction::SourceRestart { old_lingers: false } => {
                write!(f, "the source cell restarts (the old process dies)")
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
            HoAction::Disable => write!(f, "the handoff correction is disabled"),
            HoAction::TargetCapacity { full: true } => write!(f, "the target fills up"),
            HoAction::TargetCapacity { full: false } => write!(f, "the target frees a slot"),
            HoAction::TargetRegisters => write!(f, "the desktop registers at the target"),
            HoAction::TimeAdvances => write!(f, "time advances to the next deadline"),
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
