//! `StoreRaceModel`: the store's plans as production runs them (HO-A1, HO-A2, HO-A5, HO-S4,
//! SCALE-2). The handoff model runs each store operation as one atomic call into the reference
//! store, which never takes the token path. Here the core's plans ([`CommitPlan`],
//! [`ReconcilePlan`], [`RegisterPlan`], [`DrainPlan`]) run **step by step, interleaved**, over
//! an executor that does what the SQL stores do at each step:
//!
//! - a **lock table**: the host's row (exclusive), the cell's row (shared or exclusive, as the
//!   plan asks), the limit shards (exclusive; `LockAnyShard` skips a locked shard as `SKIP
//!   LOCKED` does, from the hint on; `LockAllShards` takes them one by one in shard order and
//!   keeps what it took while it waits); a registration's release of a reservation updates the
//!   shard that counted it, so it takes that shard's lock. A step whose lock another
//!   transaction holds waits (its action is not offered).
//! - **READ COMMITTED**: a transaction reads the committed tables with its own writes on top; its
//!   writes reach the others at COMMIT; a savepoint undoes the writes and the locks after it.
//! - **two limit shards holding tokens**, dealt by the core's escrow, and the cells' load rows
//!   per shard, so a commit takes the token path where the shard and the target hold tokens.
//! - **unique keys**: an attempt or reservation inserted for an op id that has one fails the
//!   statement (the transaction is dropped), as the SQL stores' primary keys do.
//! - **faults** (a budget per run): BEGIN refused; a statement failing inside the transaction;
//!   the client's bound firing (the transaction is left to the server: it holds its locks and
//!   either commits, if COMMIT was sent, or is rolled back); a COMMIT whose answer is lost. The
//!   client reads a failed call with the core's [`durable_result_of`] and, where that says
//!   "unknown", runs the core's locked reconciliation.
//! - the drain fence's writes fail up to eight times in a row (past the core's alert at six),
//!   and the fence is retried on the core's timer ([`SourceHandoff::handle_fence_result`]).
//!
//! The properties judge from the model's own record (which transactions committed which op id,
//! what each client concluded, who waits for whom), never from the core's answers.
//!
//! Left out, and why: the foreign-key share locks a commit takes on its cells (they conflict
//! only with a cell's key change, which no operation makes); the cells' load rows as locks of
//! their own (they are written only under their shard's lock); enrolment and reaping (their own
//! models and the differential tests cover them; they lock in the same order); server-side
//! timeouts of a waiting lock (a wait ends when the holder ends; every holder ends).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use switchyard_core::handoff::escrow::{load_split, rebalance, Rebalance, ShardRow};
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::{
    CellId, DrainReason, DurableResult, FenceResult, FenceRetry, Generation, HandoffAction,
    HandoffRequest, HostId, Incarnation, Measurement, OpId, PolicyConfig, SourceAuthority,
    SourceConfig, SourceHandoff,
};
use switchyard_core::MonoMs;

use crate::halt::Halt;

pub const SRC: CellId = CellId(1);
pub const TGT: CellId = CellId(2);
/// Host 1's token path tries shard 1 first, host 2's shard 0 (`shard_hint`).
pub const H1: HostId = HostId(1);
pub const H2: HostId = HostId(2);
pub const SHARDS: u32 = 2;
const NOW: MonoMs = MonoMs(10_000_000);
const LEASE_UNTIL: MonoMs = MonoMs(90_000_000);

/// What runs at once in one run of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// A commit of host 1 whose call may fail (and is then reconciled), racing the host's
    /// desktop registering again at the source.
    Ambiguous,
    /// Two hosts' commits onto a target with room for one (one shard holds its token), and the
    /// first mover's desktop arriving at the target.
    Capacity,
    /// Three registrations at one cell: two keep its incarnation, one raises it.
    Registrations,
    /// An emergency drain of host 1 whose fence write fails again and again, racing a commit.
    Fence,
}

impl Scenario {
    pub const ALL: [Scenario; 4] = [
        Scenario::Ambiguous,
        Scenario::Capacity,
        Scenario::Registrations,
        Scenario::Fence,
    ];

    fn target_capacity(self) -> u32 {
        match self {
            Scenario::Capacity => 1,
            _ => 2,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoreRaceParams {
    pub scenarios: Vec<Scenario>,
    /// Faults injected into the commits, reconciliations and registrations of one run.
    pub faults: u8,
    /// Failed writes of the drain fence in one run (the core alerts after six).
    pub fence_failures: u8,
    /// Reconciliations a client runs after calls it cannot read.
    pub reconciles: u8,
}

impl Default for StoreRaceParams {
    fn default() -> StoreRaceParams {
        StoreRaceParams {
            scenarios: Scenario::ALL.to_vec(),
            faults: 3,
            fence_failures: 8,
            reconciles: 3,
        }
    }
}

/// A row lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Lock {
    Host(HostId),
    Cell(CellId),
    Shard(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    Share,
    Exclusive,
}

/// A cell's hosts and host tokens on one shard (`ho_cell_load`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Load {
    pub hosts: i64,
    pub tokens: i64,
}

/// The store's tables as the SQL stores hold them (limit shards and load rows included).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tables {
    pub config: StoreConfig,
    pub cells: BTreeMap<CellId, CellRow>,
    pub leases: BTreeMap<CellId, MonoMs>,
    pub assignments: BTreeMap<HostId, AssignmentRow>,
    pub attempts: BTreeMap<OpId, AttemptRow>,
    /// A reservation and the shard that counted it.
    pub reservations: BTreeMap<OpId, (ReservationRow, u32)>,
    pub cooldowns: BTreeMap<HostId, MonoMs>,
    pub shards: Vec<ShardRow>,
    pub load: BTreeMap<(CellId, u32), Load>,
}

/// A write a plan step asks for, kept in its transaction until COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Write {
    Commit {
        op: OpId,
        writes: CommitWrites,
        limits: LimitWrites,
        source: CellId,
    },
    Fence {
        op: OpId,
        writes: FenceWrites,
        rebalance: Rebalance,
    },
    CellIncarnation {
        cell: CellId,
        incarnation: Incarnation,
    },
    Assignment {
        host: HostId,
        row: AssignmentRow,
    },
    FinishReservation {
        op: OpId,
        registration: Registration,
    },
    Generation {
        host: HostId,
        generation: Generation,
    },
}

/// A statement found a key taken or a row missing (a unique violation; a count of rows other
/// than asked for): the SQL store fails the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Conflict;

impl Tables {
    fn update_assignment(&mut self, host: HostId, row: AssignmentRow) -> Result<(), Conflict> {
        let slot = self.assignments.get_mut(&host).ok_or(Conflict)?;
        *slot = row;
        Ok(())
    }

    fn insert_attempt(&mut self, op: OpId, row: AttemptRow) -> Result<(), Conflict> {
        if self.attempts.contains_key(&op) {
            return Err(Conflict);
        }
        self.attempts.insert(op, row);
        Ok(())
    }

    fn load_mut(&mut self, cell: CellId, shard: u32) -> Result<&mut Load, Conflict> {
        self.load.get_mut(&(cell, shard)).ok_or(Conflict)
    }

    fn rebalance(&mut self, r: &Rebalance) {
        for (j, row) in (0u32..).zip(self.shards.iter_mut()) {
            *row = r.row(j, row);
        }
    }

    fn apply(&mut self, write: &Write) -> Result<(), Conflict> {
        match *write {
            Write::Commit {
                op,
                writes,
                limits,
                source,
            } => {
                let host = writes.reservation.host;
                let target = writes.assignment.cell;
                self.update_assignment(host, writes.assignment)?;
                if self.reservations.contains_key(&op) {
                    return Err(Conflict);
                }
                let counted_on = match limits {
                    LimitWrites::Spend { shard, .. } => shard,
                    LimitWrites::Rebalance { .. } => 0,
                };
                self.reservations
                    .insert(op, (writes.reservation, counted_on));
                self.insert_attempt(op, writes.attempt)?;
                self.cooldowns.insert(host, writes.cooldown_until);
                match limits {
                    LimitWrites::Spend { shard, row } => {
                        *self.shards.get_mut(shard as usize).ok_or(Conflict)? = row;
                        let t = self.load_mut(target, shard)?;
                        t.hosts += 1;
                        t.tokens -= 1;
                        self.load_mut(source, shard)?.hosts -= 1;
                    }
                    LimitWrites::Rebalance {
                        rebalance,
                        target_hosts,
                        target_tokens,
                    } => {
                        self.rebalance(&rebalance);
                        for j in 0..SHARDS {
                            let t = self.load_mut(target, j)?;
                            t.hosts = if j == 0 { i64::from(target_hosts) } else { 0 };
                            t.tokens = i64::try_from(target_tokens.share(j)).unwrap_or(i64::MAX);
                        }
                        self.load_mut(source, 0)?.hosts -= 1;
                    }
                }
                Ok(())
            }
            Write::Fence {
                op,
                writes,
                rebalance,
            } => {
                self.insert_attempt(op, writes.attempt)?;
                if let Some(row) = writes.assignment {
                    self.update_assignment(writes.attempt.source.host, row)?;
                }
                self.rebalance(&rebalance);
                Ok(())
            }
            Write::CellIncarnation { cell, incarnation } => {
                self.cells.get_mut(&cell).ok_or(Conflict)?.incarnation = incarnation;
                Ok(())
            }
            Write::Assignment { host, row } => self.update_assignment(host, row),
            Write::FinishReservation { op, registration } => {
                let (_, shard) = self.reservations.remove(&op).ok_or(Conflict)?;
                self.shards
                    .get_mut(shard as usize)
                    .ok_or(Conflict)?
                    .in_flight -= 1;
                match self.attempts.get_mut(&op).map(|a| &mut a.outcome) {
                    Some(AttemptOutcome::Committed {
                        registration: r, ..
                    }) => {
                        *r = registration;
                        Ok(())
                    }
                    _ => Err(Conflict),
                }
            }
            Write::Generation { host, generation } => {
                let row = self.assignments.get_mut(&host).ok_or(Conflict)?;
                row.generation = generation;
                Ok(())
            }
        }
    }

    /// A cell's hosts over its load rows (what the exact path reads).
    pub fn cell_hosts(&self, cell: CellId) -> i64 {
        (0..SHARDS)
            .filter_map(|j| self.load.get(&(cell, j)))
            .map(|l| l.hosts)
            .sum()
    }

    /// HO-S4's escrow, judged on the rows: the hosts assigned to each cell never exceed its
    /// capacity, the live reservations never exceed the limit, and each limit's tokens never
    /// exceed the room left under it.
    pub fn limits_hold(&self) -> bool {
        let cfg = &self.config;
        for (cell, row) in &self.cells {
            let assigned = self
                .assignments
                .values()
                .filter(|a| a.cell == *cell)
                .count();
            let assigned = i64::try_from(assigned).unwrap_or(i64::MAX);
            let tokens: i64 = (0..SHARDS)
                .filter_map(|j| self.load.get(&(*cell, j)))
                .map(|l| l.tokens.max(0))
                .sum();
            if assigned > i64::from(row.capacity) || tokens > i64::from(row.capacity) - assigned {
                return false;
            }
        }
        let reservations = u64::try_from(self.reservations.len()).unwrap_or(u64::MAX);
        let attempts = u64::try_from(self.attempts.len()).unwrap_or(u64::MAX);
        let room = |limit: u64, count: u64| limit.saturating_sub(count);
        let sum = |f: fn(&ShardRow) -> u64| self.shards.iter().map(f).sum::<u64>();
        reservations <= u64::from(cfg.max_in_flight_migrations)
            && sum(|s| s.in_flight_tokens)
                <= room(u64::from(cfg.max_in_flight_migrations), reservations)
            && sum(|s| s.attempt_tokens) <= room(cfg.bounds.max_attempt_rows, attempts)
    }
}

/// One open transaction: its writes (applied at COMMIT), its locks, its savepoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Txn {
    pub writes: Vec<Write>,
    pub held: Vec<(Lock, Mode)>,
    /// `LockAllShards`: the shards taken so far (in order).
    pub all_taken: u32,
    /// The savepoint of the token path: (writes, locks) before it.
    pub savepoint: Option<(usize, usize)>,
}

impl Txn {
    fn new() -> Txn {
        Txn {
            writes: Vec::new(),
            held: Vec::new(),
            all_taken: 0,
            savepoint: None,
        }
    }

    fn holds(&self, lock: Lock, mode: Mode) -> bool {
        self.held
            .iter()
            .any(|(l, m)| *l == lock && (*m == Mode::Exclusive || mode == Mode::Share))
    }
}

/// A core plan in flight (by value: a state is cloned per step either way, and the few
/// plans of a state are hashed with it).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Plan {
    Commit(CommitPlan),
    Reconcile(ReconcilePlan),
    Register(RegisterPlan),
    Drain(DrainPlan),
}

/// What an actor is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    /// A source cell's assignment transaction for `req`, reconciled where its call failed.
    Mover { req: HandoffRequest },
    /// A desktop's control registering at `cell` as process `incarnation`.
    Desktop {
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        /// The model's own reading: the registration keeps the cell's incarnation (the cell's
        /// row as set up), so the shared lock is enough.
        keeps: bool,
    },
    /// A source cell's machine after an emergency drain, writing the fence.
    Drainer { source: Box<SourceHandoff> },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actor {
    pub role: Role,
    pub plan: Option<Plan>,
    pub txn: Option<Txn>,
    pub reconciles_left: u8,
}

/// A transaction its client gave up on: the server holds its locks until it ends (committing
/// it only if COMMIT was sent).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Orphan {
    pub txn: Txn,
    pub commit_sent: bool,
}

/// The model's own record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Record {
    /// Committed transactions that wrote a commit of the op id.
    pub commits: BTreeMap<OpId, u8>,
    /// What a client concluded of its op id: committed or not.
    pub said: BTreeMap<OpId, bool>,
    /// A statement failed on a row another transaction wrote, with no fault injected.
    pub conflict: bool,
    /// The drain fence's writes: failed so far, and whether one completed.
    pub fence_failed: u8,
    pub fence_written: bool,
}

/// What the last step showed (witnesses).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Facts {
    pub token_commit: bool,
    pub exact_after_savepoint: bool,
    pub lost_commit_reconciled: bool,
    pub fenced_by_reconcile: bool,
    pub shared_cell: bool,
    pub reservation_finished: bool,
    pub fence_landed_after: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RaceState {
    pub scenario: Scenario,
    pub now: MonoMs,
    pub tables: Tables,
    pub actors: Vec<Actor>,
    pub orphans: Vec<Orphan>,
    pub faults_left: u8,
    pub fence_faults_left: u8,
    pub record: Record,
    pub last: Facts,
}

/// A fault injected into one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Fault {
    /// BEGIN refused.
    Unavailable,
    /// A statement failed: the transaction is dropped.
    InTransaction,
    /// The client's bound fired: the transaction is left to the server.
    TimedOut,
    /// COMMIT ran; its answer was lost.
    CommitLost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RaceAction {
    Step { actor: u8, fault: Option<Fault> },
    OrphanEnds { orphan: u8, commits: bool },
}

impl fmt::Display for RaceAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RaceAction::Step { actor, fault: None } => write!(f, "actor {actor} takes a step"),
            RaceAction::Step {
                actor,
                fault: Some(x),
            } => write!(f, "actor {actor} takes a step: {x:?}"),
            RaceAction::OrphanEnds { orphan, commits } => write!(
                f,
                "the server ends abandoned transaction {orphan}: {}",
                if *commits { "committed" } else { "rolled back" }
            ),
        }
    }
}

/// The step a plan asks for, as the executor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Begin,
    /// A lock (then a read or a write under it).
    Lock(Lock, Mode),
    LockAny(u32),
    LockAll,
    /// A read, a write or a savepoint: no lock of its own.
    Plain,
    /// A registration's release of a reservation: the shard that counted it.
    Release(OpId),
    Commit,
    End,
}

fn ask(plan: &Plan) -> Ask {
    match plan {
        Plan::Commit(p) => match p.poll() {
            CommitStep::Begin => Ask::Begin,
            CommitStep::LockHost { host } => Ask::Lock(Lock::Host(host), Mode::Exclusive),
            CommitStep::LockAnyShard { hint } => Ask::LockAny(hint),
            CommitStep::LockShard { shard } => Ask::Lock(Lock::Shard(shard), Mode::Exclusive),
            CommitStep::LockAllShards => Ask::LockAll,
            CommitStep::Commit => Ask::Commit,
            CommitStep::Done(_) | CommitStep::Failed(_) => Ask::End,
            _ => Ask::Plain,
        },
        Plan::Reconcile(p) => match p.poll() {
            ReconcileStep::Begin => Ask::Begin,
            ReconcileStep::LockHost { host } => Ask::Lock(Lock::Host(host), Mode::Exclusive),
            ReconcileStep::LockAllShards => Ask::LockAll,
            ReconcileStep::Commit => Ask::Commit,
            ReconcileStep::Done(_) | ReconcileStep::Failed(_) => Ask::End,
            _ => Ask::Plain,
        },
        Plan::Register(p) => match p.poll() {
            RegisterStep::Begin => Ask::Begin,
            RegisterStep::LockHost { host } => Ask::Lock(Lock::Host(host), Mode::Exclusive),
            RegisterStep::LockCell { cell, lock } => Ask::Lock(
                Lock::Cell(cell),
                match lock {
                    CellLock::Share => Mode::Share,
                    CellLock::Exclusive => Mode::Exclusive,
                },
            ),
            RegisterStep::FinishReservation { op, .. } => Ask::Release(op),
            RegisterStep::Commit => Ask::Commit,
            RegisterStep::Done(_) | RegisterStep::Failed(_) => Ask::End,
            _ => Ask::Plain,
        },
        Plan::Drain(p) => match p.poll() {
            DrainStep::Begin => Ask::Begin,
            DrainStep::LockHost { host } => Ask::Lock(Lock::Host(host), Mode::Exclusive),
            DrainStep::Commit => Ask::Commit,
            DrainStep::Done(_) | DrainStep::Failed(_) => Ask::End,
            _ => Ask::Plain,
        },
    }
}

/// What a step's fault may be, by where the plan is.
fn faults_at(a: Ask) -> &'static [Fault] {
    match a {
        Ask::Begin => &[Fault::Unavailable],
        Ask::Commit => &[Fault::TimedOut, Fault::CommitLost],
        Ask::End => &[],
        _ => &[Fault::InTransaction, Fault::TimedOut],
    }
}

impl RaceState {
    /// Who holds `lock` against `mode` (an actor's index; `None` for an orphan), if anyone.
    fn holder(&self, me: usize, lock: Lock, mode: Mode) -> Option<Option<usize>> {
        let conflicts = |t: &Txn| {
            t.held
                .iter()
                .any(|(l, m)| *l == lock && (mode == Mode::Exclusive || *m == Mode::Exclusive))
        };
        for (i, a) in self.actors.iter().enumerate() {
            if i != me && a.txn.as_ref().is_some_and(conflicts) {
                return Some(Some(i));
            }
        }
        self.orphans
            .iter()
            .any(|o| conflicts(&o.txn))
            .then_some(None)
    }

    fn grantable(&self, me: usize, lock: Lock, mode: Mode) -> bool {
        self.holder(me, lock, mode).is_none()
    }

    /// The committed tables with `txn`'s writes on top (what its next statement reads).
    fn view(&self, txn: Option<&Txn>) -> Tables {
        let mut t = self.tables.clone();
        for w in txn.map(|t| t.writes.as_slice()).unwrap_or(&[]) {
            // Each write was checked when it was made; on top of the committed rows it holds
            // the same locks, so it applies again.
            let _ = t.apply(w);
        }
        t
    }

    /// Whether actor `i` can take its next step now (not waiting for a lock).
    pub fn can_step(&self, i: usize) -> bool {
        let a = &self.actors[i];
        let Some(plan) = &a.plan else {
            return false;
        };
        let held = |l: Lock, m: Mode| a.txn.as_ref().is_some_and(|t| t.holds(l, m));
        match ask(plan) {
            Ask::Lock(l, m) => held(l, m) || self.grantable(i, l, m),
            Ask::LockAll => {
                let from = a.txn.as_ref().map_or(0, |t| t.all_taken);
                (from..SHARDS).next().is_none_or(|j| {
                    held(Lock::Shard(j), Mode::Exclusive)
                        || self.grantable(i, Lock::Shard(j), Mode::Exclusive)
                })
            }
            Ask::Release(op) => {
                let view = self.view(a.txn.as_ref());
                match view.reservations.get(&op) {
                    Some((_, j)) => {
                        held(Lock::Shard(*j), Mode::Exclusive)
                            || self.grantable(i, Lock::Shard(*j), Mode::Exclusive)
                    }
                    None => true,
                }
            }
            _ => true,
        }
    }

    /// The actor waiting for a lock, the lock, and who holds it.
    pub fn waits(&self) -> Vec<(usize, Lock, Option<usize>)> {
        let mut out = Vec::new();
        for (i, a) in self.actors.iter().enumerate() {
            let Some(plan) = &a.plan else { continue };
            if self.can_step(i) {
                continue;
            }
            let lock = match ask(plan) {
                Ask::Lock(l, m) => Some((l, m)),
                Ask::LockAll => Some((
                    Lock::Shard(a.txn.as_ref().map_or(0, |t| t.all_taken)),
                    Mode::Exclusive,
                )),
                Ask::Release(op) => self
                    .view(a.txn.as_ref())
                    .reservations
                    .get(&op)
                    .map(|(_, j)| (Lock::Shard(*j), Mode::Exclusive)),
                _ => None,
            };
            if let Some((l, m)) = lock {
                if let Some(h) = self.holder(i, l, m) {
                    out.push((i, l, h));
                }
            }
        }
        out
    }

    pub fn project(&self) -> RaceProjection {
        RaceProjection {
            scenario: self.scenario,
            now_ms: self.now.as_ms(),
            actors: self
                .actors
                .iter()
                .map(|a| {
                    let step = match &a.plan {
                        None => "idle".to_owned(),
                        Some(Plan::Commit(p)) => format!("commit {:?}", p.poll()),
                        Some(Plan::Reconcile(p)) => format!("reconcile {:?}", p.poll()),
                        Some(Plan::Register(p)) => format!("register {:?}", p.poll()),
                        Some(Plan::Drain(p)) => format!("drain {:?}", p.poll()),
                    };
                    let locks = a.txn.as_ref().map(|t| t.held.clone()).unwrap_or_default();
                    format!("{step}; holds {locks:?}")
                })
                .collect(),
            orphans: self.orphans.len(),
            hosts_at_target: self
                .tables
                .assignments
                .values()
                .filter(|a| a.cell == TGT)
                .count(),
            commits: self.record.commits.iter().map(|(o, n)| (*o, *n)).collect(),
            said: self.record.said.iter().map(|(o, c)| (*o, *c)).collect(),
            fence_failed: self.record.fence_failed,
        }
    }

    pub fn summary(&self) -> String {
        let mut s = format!("{:?}:", self.scenario);
        for (i, a) in self.actors.iter().enumerate() {
            let step = match &a.plan {
                None => "idle".to_owned(),
                Some(Plan::Commit(p)) => format!("commit {:?}", p.poll()),
                Some(Plan::Reconcile(p)) => format!("reconcile {:?}", p.poll()),
                Some(Plan::Register(p)) => format!("register {:?}", p.poll()),
                Some(Plan::Drain(p)) => format!("drain {:?}", p.poll()),
            };
            let locks = a.txn.as_ref().map(|t| t.held.clone()).unwrap_or_default();
            s.push_str(&format!(" [{i}: {step}; holds {locks:?}]"));
        }
        s.push_str(&format!(
            " orphans {} commits {:?} said {:?} hosts@tgt {}",
            self.orphans.len(),
            self.record.commits.values().collect::<Vec<_>>(),
            self.record.said.values().collect::<Vec<_>>(),
            self.tables
                .assignments
                .values()
                .filter(|a| a.cell == TGT)
                .count()
        ));
        s
    }
}

/// What a trace shows of a state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RaceProjection {
    pub scenario: Scenario,
    pub now_ms: u64,
    /// Each actor's next step and the locks it holds.
    pub actors: Vec<String>,
    /// Transactions left to the server.
    pub orphans: usize,
    pub hosts_at_target: usize,
    /// Committed transactions that wrote each op id's commit.
    pub commits: Vec<(OpId, u8)>,
    /// What each client concluded: committed or not.
    pub said: Vec<(OpId, bool)>,
    pub fence_failed: u8,
}

#[derive(Debug, Clone)]
pub struct StoreRaceModel {
    pub params: StoreRaceParams,
    pub halt: Halt,
}

fn config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 3_600_000,
        },
        max_in_flight_migrations: 4,
        rate_window_ms: 60_000,
        max_commits_per_window: 10,
        registration_timeout_ms: 120_000,
        bounds: StoreBounds::FLEET,
    }
}

fn request(authority: SourceAuthority) -> HandoffRequest {
    HandoffRequest::new(
        authority,
        TGT,
        100,
        Measurement {
            measured_at: NOW,
            current_rtt_ms: 120,
            target_rtt_ms: 60,
        },
    )
}

fn source_config() -> SourceConfig {
    SourceConfig {
        request_timeout_ms: 5_000,
        reconcile_timeout_ms: 5_000,
        quarantine_retry_ms: 5_000,
        cell_capable: true,
        refusal_hold_ms: 10_000,
    }
}

impl StoreRaceModel {
    pub fn new(params: StoreRaceParams) -> StoreRaceModel {
        StoreRaceModel {
            params,
            halt: Halt::default(),
        }
    }

    /// The tables of `scenario`: two cells, hosts 1 and 2 at the source, the limits' tokens
    /// dealt over two shards from the exact totals (as a rebalance leaves them).
    fn tables(scenario: Scenario) -> Tables {
        let config = config();
        let mut store = AssignmentStore::new(config);
        for (cell, capacity) in [(SRC, 4), (TGT, scenario.target_capacity())] {
            let started = store.start_cell(cell, capacity, true, NOW, LEASE_UNTIL.as_ms());
            assert!(started.is_ok(), "model setup: {started:?}");
        }
        for host in [H1, H2] {
            let inserted = store.insert_host(host, SRC, true);
            assert!(inserted.is_ok(), "model setup: {inserted:?}");
        }
        let snap = store.snapshot();
        let facts = LimitFacts {
            target_load: 0,
            in_flight: 0,
            rate: RateRow {
                window_start: NOW,
                commits: 0,
            },
            attempt_rows: 0,
        };
        let r = rebalance(&config, &facts, SHARDS);
        let shards = (0..SHARDS)
            .map(|j| ShardRow {
                hosts: if j == 0 { 2 } else { 0 },
                ..r.row(j, &ShardRow::default())
            })
            .collect();
        let mut load = BTreeMap::new();
        for (cell, row) in &snap.cells {
            let hosts = snap
                .assignments
                .values()
                .filter(|a| a.cell == *cell)
                .count();
            let hosts = u32::try_from(hosts).unwrap_or(u32::MAX);
            let split = load_split(row.capacity, hosts, SHARDS);
            for j in 0..SHARDS {
                load.insert(
                    (*cell, j),
                    Load {
                        hosts: if j == 0 { i64::from(hosts) } else { 0 },
                        tokens: i64::try_from(split.share(j)).unwrap_or(0),
                    },
                );
            }
        }
        Tables {
            config,
            cells: snap.cells,
            leases: snap.leases,
            assignments: snap.assignments,
            attempts: BTreeMap::new(),
            reservations: BTreeMap::new(),
            cooldowns: BTreeMap::new(),
            shards,
            load,
        }
    }

    fn actor(role: Role, reconciles: u8) -> Actor {
        let plan = match &role {
            Role::Mover { req } => Some(Plan::Commit(CommitPlan::new(NOW, req, SHARDS))),
            Role::Desktop {
                host,
                cell,
                incarnation,
                ..
            } => Some(Plan::Register(RegisterPlan::new(
                *host,
                *cell,
                *incarnation,
                true,
            ))),
            Role::Drainer { source } => Some(Plan::Drain(DrainPlan::new(&source.authority()))),
        };
        Actor {
            role,
            plan,
            txn: None,
            reconciles_left: reconciles,
        }
    }

    pub fn init_state(&self, scenario: Scenario) -> RaceState {
        let tables = Self::tables(scenario);
        let authority = |host: HostId| {
            let row = tables.assignments[&host];
            SourceAuthority {
                host,
                cell: row.cell,
                epoch: row.epoch,
                incarnation: row.incarnation,
                generation: row.generation,
            }
        };
        let r = self.params.reconciles;
        let desktop = |host, cell, incarnation: Incarnation| Role::Desktop {
            host,
            cell,
            incarnation,
            keeps: tables
                .cells
                .get(&cell)
                .is_some_and(|c| c.incarnation >= incarnation),
        };
        let (actors, faults, fence_faults) = match scenario {
            Scenario::Ambiguous => (
                vec![
                    Self::actor(
                        Role::Mover {
                            req: request(authority(H1)),
                        },
                        r,
                    ),
                    Self::actor(desktop(H1, SRC, Incarnation(1)), 0),
                    // The same request again at once (a source process past its lease that
                    // still runs, or a retry): HO-A1's duplicate under the host lock.
                    Self::actor(
                        Role::Mover {
                            req: request(authority(H1)),
                        },
                        0,
                    ),
                ],
                self.params.faults,
                0,
            ),
            Scenario::Capacity => (
                vec![
                    Self::actor(
                        Role::Mover {
                            req: request(authority(H1)),
                        },
                        r,
                    ),
                    Self::actor(
                        Role::Mover {
                            req: request(authority(H2)),
                        },
                        r,
                    ),
                    Self::actor(desktop(H2, TGT, Incarnation(1)), 0),
                ],
                self.params.faults,
                0,
            ),
            Scenario::Registrations => (
                vec![
                    Self::actor(desktop(H1, SRC, Incarnation(1)), 0),
                    Self::actor(desktop(H2, SRC, Incarnation(1)), 0),
                    Self::actor(desktop(H2, SRC, Incarnation(2)), 0),
                ],
                self.params.faults,
                0,
            ),
            Scenario::Fence => {
                let mut source = SourceHandoff::new(source_config(), authority(H1), true);
                let _ = source.handle_emergency_drain(NOW, DrainReason::Emergency);
                // The drain's own actions (the fence write is the actor's plan).
                while source.poll_action().is_some() {}
                (
                    vec![
                        Self::actor(
                            Role::Drainer {
                                source: Box::new(source),
                            },
                            0,
                        ),
                        Self::actor(
                            Role::Mover {
                                req: request(authority(H1)),
                            },
                            0,
                        ),
                    ],
                    0,
                    self.params.fence_failures,
                )
            }
        };
        RaceState {
            scenario,
            now: NOW,
            tables,
            actors,
            orphans: Vec::new(),
            faults_left: faults,
            fence_faults_left: fence_faults,
            record: Record::default(),
            last: Facts::default(),
        }
    }

    /// Take the lock (the caller checked it is free or held).
    fn take(txn: &mut Txn, lock: Lock, mode: Mode) {
        if !txn.holds(lock, mode) {
            txn.held.push((lock, mode));
        }
    }

    /// Run actor `i`'s next step (its lock is free: `can_step`), with `fault` injected.
    fn step_actor(&self, s: &mut RaceState, i: usize, fault: Option<Fault>) {
        let Some(plan) = s.actors[i].plan.clone() else {
            return;
        };
        let a = ask(&plan);
        if let Some(fault) = fault {
            if matches!(s.actors[i].role, Role::Drainer { .. }) {
                s.fence_faults_left -= 1;
            } else {
                s.faults_left -= 1;
            }
            return self.fail(s, i, a, fault);
        }
        // Locks first (the step's read or write runs under them).
        match a {
            Ask::Begin => s.actors[i].txn = Some(Txn::new()),
            Ask::Lock(l, m) => {
                if let Some(t) = s.actors[i].txn.as_mut() {
                    Self::take(t, l, m);
                }
            }
            Ask::LockAll => {
                // One at a time in shard order, keeping each (the caller checked the next).
                loop {
                    let grant = {
                        let t = s.actors[i].txn.as_ref();
                        let from = t.map_or(SHARDS, |t| t.all_taken);
                        (from < SHARDS).then_some(from).filter(|j| {
                            t.is_some_and(|t| t.holds(Lock::Shard(*j), Mode::Exclusive))
                                || s.grantable(i, Lock::Shard(*j), Mode::Exclusive)
                        })
                    };
                    let Some(j) = grant else { break };
                    if let Some(t) = s.actors[i].txn.as_mut() {
                        Self::take(t, Lock::Shard(j), Mode::Exclusive);
                        t.all_taken = j + 1;
                    }
                }
                if s.actors[i]
                    .txn
                    .as_ref()
                    .is_some_and(|t| t.all_taken < SHARDS)
                {
                    return; // waits for the next shard
                }
            }
            Ask::Release(op) => {
                let shard = s
                    .view(s.actors[i].txn.as_ref())
                    .reservations
                    .get(&op)
                    .map(|(_, j)| *j);
                if let (Some(j), Some(t)) = (shard, s.actors[i].txn.as_mut()) {
                    Self::take(t, Lock::Shard(j), Mode::Exclusive);
                }
            }
            _ => {}
        }
        let mut plan = plan;
        match &mut plan {
            Plan::Commit(p) => self.exec_commit(s, i, p),
            Plan::Reconcile(p) => self.exec_reconcile(s, i, p),
            Plan::Register(p) => self.exec_register(s, i, p),
            Plan::Drain(p) => self.exec_drain(s, i, p),
        }
        s.actors[i].plan = Some(plan);
        self.settle(s, i);
    }

    /// A write under `i`'s transaction: checked against what it reads, kept until COMMIT.
    fn write(s: &mut RaceState, i: usize, w: Write) -> bool {
        let mut view = s.view(s.actors[i].txn.as_ref());
        if view.apply(&w).is_err() {
            s.record.conflict = true;
            return false;
        }
        if let Some(t) = s.actors[i].txn.as_mut() {
            t.writes.push(w);
        }
        true
    }

    /// COMMIT of `txn`: its writes reach the tables; the record counts the commits in it.
    fn commit_txn(s: &mut RaceState, txn: &Txn) {
        for w in &txn.writes {
            if s.tables.apply(w).is_err() {
                s.record.conflict = true;
            }
            if let Write::Commit { op, .. } = w {
                *s.record.commits.entry(*op).or_default() += 1;
            }
        }
    }

    fn exec_commit(&self, s: &mut RaceState, i: usize, p: &mut CommitPlan) {
        let req = match &s.actors[i].role {
            Role::Mover { req } => *req,
            _ => return,
        };
        let view = s.view(s.actors[i].txn.as_ref());
        let input = match p.poll() {
            CommitStep::Begin => CommitInput::Begun,
            CommitStep::LockHost { host } => {
                CommitInput::Host(view.assignments.get(&host).copied())
            }
            CommitStep::ReadFacts => CommitInput::Facts(CommitRead {
                recorded: view.attempts.get(&req.op_id).copied(),
                config: view.config,
                target_cell: view.cells.get(&req.target).copied(),
                target_lease_until: view.leases.get(&req.target).copied().unwrap_or_default(),
                source_cell_capable: view
                    .cells
                    .get(&req.source.cell)
                    .is_some_and(|c| c.handoff_capable),
                cooldown_until: view.cooldowns.get(&req.source.host).copied(),
                migration_pending: view
                    .reservations
                    .values()
                    .any(|(r, _)| r.host == req.source.host),
            }),
            CommitStep::LockAnyShard { hint } => {
                let me = s.actors[i].txn.as_ref();
                let marks = me.map(|t| (t.writes.len(), t.held.len()));
                let mut order = (hint..SHARDS).chain(0..hint.min(SHARDS));
                let free = order.find(|j| s.grantable(i, Lock::Shard(*j), Mode::Exclusive));
                if let Some(t) = s.actors[i].txn.as_mut() {
                    t.savepoint = marks;
                    if let Some(j) = free {
                        Self::take(t, Lock::Shard(j), Mode::Exclusive);
                    }
                }
                CommitInput::Shard(free.map(|j| (j, view.shards[j as usize])))
            }
            CommitStep::LockShard { shard } => {
                CommitInput::Shard(Some((shard, view.shards[shard as usize])))
            }
            CommitStep::WriteCommit { writes, limits } => {
                let before = match limits {
                    LimitWrites::Spend { shard, .. } => view
                        .load
                        .get(&(req.target, shard))
                        .map_or(0, |l| u64::try_from(l.tokens).unwrap_or(0)),
                    LimitWrites::Rebalance { .. } => 0,
                };
                let w = Write::Commit {
                    op: req.op_id,
                    writes,
                    limits,
                    source: req.source.cell,
                };
                if Self::write(s, i, w) {
                    CommitInput::Written {
                        target_tokens: before,
                    }
                } else {
                    CommitInput::Failed(StoreFault::InTransaction)
                }
            }
            CommitStep::ToSavepoint => {
                if let Some(t) = s.actors[i].txn.as_mut() {
                    if let Some((w, l)) = t.savepoint.take() {
                        t.writes.truncate(w);
                        t.held.truncate(l);
                    }
                }
                s.last.exact_after_savepoint = true;
                CommitInput::AtSavepoint
            }
            CommitStep::LockAllShards => CommitInput::Shards(view.shards.clone()),
            CommitStep::ReadSettings => CommitInput::Settings(view.config),
            CommitStep::ReadTarget { cell } => CommitInput::Target(
                view.cells
                    .get(&cell)
                    .map(|row| (*row, view.cell_hosts(cell))),
            ),
            CommitStep::Commit => {
                if let Some(t) = s.actors[i].txn.take() {
                    if t.writes.iter().any(|w| {
                        matches!(
                            w,
                            Write::Commit {
                                limits: LimitWrites::Spend { .. },
                                ..
                            }
                        )
                    }) {
                        s.last.token_commit = true;
                    }
                    Self::commit_txn(s, &t);
                }
                CommitInput::Committed
            }
            CommitStep::Done(_) | CommitStep::Failed(_) => return,
        };
        p.handle(input);
    }

    fn exec_reconcile(&self, s: &mut RaceState, i: usize, p: &mut ReconcilePlan) {
        let req = match &s.actors[i].role {
            Role::Mover { req } => *req,
            _ => return,
        };
        let view = s.view(s.actors[i].txn.as_ref());
        let input = match p.poll() {
            ReconcileStep::Begin => ReconcileInput::Begun,
            ReconcileStep::LockHost { host } => {
                ReconcileInput::Host(view.assignments.get(&host).copied())
            }
            ReconcileStep::ReadAttempt { op } => {
                ReconcileInput::Attempt(view.attempts.get(&op).copied())
            }
            ReconcileStep::LockAllShards => ReconcileInput::Shards(view.shards.clone()),
            ReconcileStep::ReadSettings => ReconcileInput::Settings(view.config),
            ReconcileStep::WriteFence { writes, rebalance } => {
                let w = Write::Fence {
                    op: req.op_id,
                    writes,
                    rebalance,
                };
                if Self::write(s, i, w) {
                    ReconcileInput::Written
                } else {
                    ReconcileInput::Failed(StoreFault::InTransaction)
                }
            }
            ReconcileStep::Commit => {
                if let Some(t) = s.actors[i].txn.take() {
                    if t.writes.iter().any(|w| matches!(w, Write::Fence { .. })) {
                        s.last.fenced_by_reconcile = true;
                    }
                    Self::commit_txn(s, &t);
                }
                ReconcileInput::Committed
            }
            ReconcileStep::Done(_) | ReconcileStep::Failed(_) => return,
        };
        p.handle(input);
    }

    fn exec_register(&self, s: &mut RaceState, i: usize, p: &mut RegisterPlan) {
        let view = s.view(s.actors[i].txn.as_ref());
        let input = match p.poll() {
            RegisterStep::Begin => RegisterInput::Begun,
            RegisterStep::LockHost { host } => {
                RegisterInput::Host(view.assignments.get(&host).copied())
            }
            RegisterStep::ReadCell { cell } => RegisterInput::Cell(view.cells.get(&cell).copied()),
            RegisterStep::LockCell { cell, .. } => {
                let lock = Lock::Cell(cell);
                let sharing = s.actors.iter().enumerate().any(|(j, a)| {
                    j != i
                        && a.txn
                            .as_ref()
                            .is_some_and(|t| t.held.contains(&(lock, Mode::Share)))
                });
                let mine = s.actors[i]
                    .txn
                    .as_ref()
                    .is_some_and(|t| t.held.contains(&(lock, Mode::Share)));
                s.last.shared_cell = sharing && mine;
                RegisterInput::Cell(view.cells.get(&cell).copied())
            }
            RegisterStep::WriteCellIncarnation { cell, incarnation } => {
                if Self::write(s, i, Write::CellIncarnation { cell, incarnation }) {
                    RegisterInput::Written
                } else {
                    RegisterInput::Failed(StoreFault::InTransaction)
                }
            }
            RegisterStep::WriteAssignment { host, row } => {
                if Self::write(s, i, Write::Assignment { host, row }) {
                    RegisterInput::Written
                } else {
                    RegisterInput::Failed(StoreFault::InTransaction)
                }
            }
            RegisterStep::ReadReservations { host, cell } => RegisterInput::Reservations(
                view.reservations
                    .iter()
                    .filter(|(_, (r, _))| r.host == host && r.cell == cell)
                    .map(|(op, _)| *op)
                    .collect(),
            ),
            RegisterStep::FinishReservation { op, registration } => {
                if Self::write(s, i, Write::FinishReservation { op, registration }) {
                    RegisterInput::Written
                } else {
                    RegisterInput::Failed(StoreFault::InTransaction)
                }
            }
            RegisterStep::Commit => {
                if let Some(t) = s.actors[i].txn.take() {
                    if t.writes
                        .iter()
                        .any(|w| matches!(w, Write::FinishReservation { .. }))
                    {
                        s.last.reservation_finished = true;
                    }
                    Self::commit_txn(s, &t);
                }
                RegisterInput::Committed
            }
            RegisterStep::Done(_) | RegisterStep::Failed(_) => return,
        };
        p.handle(input);
    }

    fn exec_drain(&self, s: &mut RaceState, i: usize, p: &mut DrainPlan) {
        let view = s.view(s.actors[i].txn.as_ref());
        let input = match p.poll() {
            DrainStep::Begin => DrainInput::Begun,
            DrainStep::LockHost { host } => DrainInput::Host(view.assignments.get(&host).copied()),
            DrainStep::WriteGeneration { host, generation } => {
                if Self::write(s, i, Write::Generation { host, generation }) {
                    DrainInput::Written
                } else {
                    DrainInput::Failed(StoreFault::InTransaction)
                }
            }
            DrainStep::Commit => {
                if let Some(t) = s.actors[i].txn.take() {
                    Self::commit_txn(s, &t);
                }
                DrainInput::Committed
            }
            DrainStep::Done(_) | DrainStep::Failed(_) => return,
        };
        p.handle(input);
    }

    /// A fault at actor `i`'s step `a`: the transaction is dropped, or left to the server, or
    /// committed with its answer lost; the client reads the failure as the core says.
    fn fail(&self, s: &mut RaceState, i: usize, a: Ask, fault: Fault) {
        let txn = s.actors[i].txn.take();
        let store_fault = match fault {
            Fault::Unavailable => StoreFault::Unavailable,
            Fault::InTransaction => StoreFault::InTransaction,
            Fault::TimedOut => {
                if let Some(txn) = txn {
                    s.orphans.push(Orphan {
                        txn,
                        commit_sent: a == Ask::Commit,
                    });
                }
                StoreFault::TimedOut
            }
            Fault::CommitLost => {
                if let Some(txn) = &txn {
                    Self::commit_txn(s, txn);
                }
                StoreFault::CommitLost
            }
        };
        self.conclude(s, i, Reading::Failed(store_fault));
    }

    /// After a step: a plan that ended gives its answer to the client.
    fn settle(&self, s: &mut RaceState, i: usize) {
        let reading = match &s.actors[i].plan {
            Some(Plan::Commit(p)) => match p.poll() {
                CommitStep::Done(outcome) => Reading::Commit(outcome),
                CommitStep::Failed(f) => Reading::Failed(f),
                _ => return,
            },
            Some(Plan::Reconcile(p)) => match p.poll() {
                ReconcileStep::Done(answer) => Reading::Reconcile(answer),
                ReconcileStep::Failed(f) => Reading::Failed(f),
                _ => return,
            },
            Some(Plan::Register(p)) => match p.poll() {
                RegisterStep::Done(_) => Reading::Other,
                RegisterStep::Failed(f) => Reading::Failed(f),
                _ => return,
            },
            Some(Plan::Drain(p)) => match p.poll() {
                DrainStep::Done(w) => Reading::Drain(w),
                DrainStep::Failed(f) => Reading::Failed(f),
                _ => return,
            },
            None => return,
        };
        // Dropping an open transaction rolls it back (an early answer wrote nothing).
        s.actors[i].txn = None;
        self.conclude(s, i, reading);
    }

    fn conclude(&self, s: &mut RaceState, i: usize, reading: Reading) {
        s.actors[i].plan = None;
        let now = s.now;
        match s.actors[i].role.clone() {
            Role::Mover { req } => {
                let durable = match reading {
                    Reading::Commit(outcome) => DurableResult::Done(outcome),
                    Reading::Reconcile(answer) => reconcile_result(answer),
                    // HO-A2: the core reads a failed call.
                    Reading::Failed(fault) => durable_result_of(fault),
                    Reading::Drain(_) | Reading::Other => return,
                };
                match durable {
                    DurableResult::Done(outcome) => {
                        let committed = matches!(outcome, TxnOutcome::Committed { .. });
                        s.record.said.insert(req.op_id, committed);
                        if committed
                            && matches!(reading, Reading::Reconcile(_))
                            && s.record.commits.get(&req.op_id).is_some_and(|n| *n > 0)
                        {
                            s.last.lost_commit_reconciled = true;
                        }
                    }
                    DurableResult::StoreUnavailable | DurableResult::Ambiguous(_) => {
                        if s.actors[i].reconciles_left > 0 {
                            s.actors[i].reconciles_left -= 1;
                            s.actors[i].plan =
                                Some(Plan::Reconcile(ReconcilePlan::new(now, &req, SHARDS)));
                        }
                    }
                }
            }
            Role::Desktop { .. } => {}
            Role::Drainer { mut source } => {
                let result = match reading {
                    Reading::Drain(w) => FenceResult::Written(w),
                    _ => FenceResult::Failed,
                };
                let retry = FenceRetry::default();
                let _ = source.handle_fence_result(now, result, &retry);
                match result {
                    FenceResult::Written(_) => {
                        s.record.fence_written = true;
                        s.last.fence_landed_after = s.record.fence_failed;
                    }
                    FenceResult::Failed => {
                        s.record.fence_failed = s.record.fence_failed.saturating_add(1);
                        // The core's timer: the next write goes out at its time.
                        if let Some(at) = source.poll_timeout() {
                            s.now = s.now.max(at);
                            let _ = source.handle_timeout(s.now);
                        }
                    }
                }
                let mut next = None;
                while let Some(action) = source.poll_action() {
                    if let HandoffAction::FenceAuthority { authority, .. } = action {
                        next = Some(DrainPlan::new(&authority));
                    }
                }
                s.actors[i].plan = next.map(Plan::Drain);
                s.actors[i].role = Role::Drainer { source };
            }
        }
    }

    pub fn step(&self, before: &RaceState, action: RaceAction) -> RaceState {
        let mut s = before.clone();
        s.last = Facts::default();
        match action {
            RaceAction::Step { actor, fault } => self.step_actor(&mut s, usize::from(actor), fault),
            RaceAction::OrphanEnds { orphan, commits } => {
                let o = s.orphans.remove(usize::from(orphan));
                if commits {
                    Self::commit_txn(&mut s, &o.txn);
                }
            }
        }
        s
    }
}

/// What a client learns when its plan ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    Commit(TxnOutcome),
    Reconcile(Option<TxnOutcome>),
    Drain(DrainWrite),
    Failed(StoreFault),
    Other,
}

const HO_A1_ONCE: &str = "HO-A1 an op id is committed at most once";
const HO_A1_NO_CONFLICT: &str =
    "HO-A1 no plan fails on a row another plan wrote (a key taken, a row gone) unless a fault was injected";
const HO_A2_NOT_COMMITTED: &str =
    "HO-A2 a client reads its op id as not committed only if it never commits";
const HO_A2_COMMITTED: &str = "HO-A2 a client reads its op id as committed only if it committed";
const HO_S4_LIMITS: &str =
    "HO-S4 a cell never holds more hosts than its capacity, and no limit's tokens exceed the room left";
const SCALE_2_SHARED: &str =
    "SCALE-2 two registrations that keep a cell's incarnation never wait for each other's lock on it";
const HO_S4_NO_DEADLOCK: &str =
    "HO-S4 the plans' lock order never deadlocks: while a plan is unfinished, one can take a step";
const HO_A5_FENCE_KEPT: &str =
    "HO-A5 a drain fence is given up only once a write of it is known to have happened";

impl Model for StoreRaceModel {
    type State = RaceState;
    type Action = RaceAction;

    fn init_states(&self) -> Vec<RaceState> {
        self.params
            .scenarios
            .iter()
            .map(|s| self.init_state(*s))
            .collect()
    }

    fn actions(&self, s: &RaceState, actions: &mut Vec<RaceAction>) {
        if self.halt.is_raised() {
            return;
        }
        for i in 0..s.actors.len() {
            if !s.can_step(i) {
                continue;
            }
            let actor = u8::try_from(i).unwrap_or(u8::MAX);
            actions.push(RaceAction::Step { actor, fault: None });
            let budget = if matches!(s.actors[i].role, Role::Drainer { .. }) {
                s.fence_faults_left
            } else {
                s.faults_left
            };
            if budget == 0 {
                continue;
            }
            let Some(plan) = &s.actors[i].plan else {
                continue;
            };
            let a = ask(plan);
            let faults: &[Fault] = if matches!(s.actors[i].role, Role::Drainer { .. }) {
                // The fence's failures: the store unreachable at BEGIN.
                if a == Ask::Begin {
                    &[Fault::Unavailable]
                } else {
                    &[]
                }
            } else {
                faults_at(a)
            };
            for f in faults {
                actions.push(RaceAction::Step {
                    actor,
                    fault: Some(*f),
                });
            }
        }
        for (o, orphan) in s.orphans.iter().enumerate() {
            let orphan_id = u8::try_from(o).unwrap_or(u8::MAX);
            actions.push(RaceAction::OrphanEnds {
                orphan: orphan_id,
                commits: false,
            });
            if orphan.commit_sent {
                actions.push(RaceAction::OrphanEnds {
                    orphan: orphan_id,
                    commits: true,
                });
            }
        }
    }

    fn next_state(&self, s: &RaceState, action: RaceAction) -> Option<RaceState> {
        Some(self.step(s, action))
    }

    fn within_boundary(&self, _: &RaceState) -> bool {
        !self.halt.is_raised()
    }

    fn format_action(&self, action: &RaceAction) -> String {
        action.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(HO_A1_ONCE, |_, s: &RaceState| {
                s.record.commits.values().all(|n| *n <= 1)
            }),
            Property::always(HO_A1_NO_CONFLICT, |_, s: &RaceState| !s.record.conflict),
            Property::always(HO_A2_NOT_COMMITTED, |_, s: &RaceState| {
                s.record
                    .said
                    .iter()
                    .all(|(op, c)| *c || s.record.commits.get(op).is_none_or(|n| *n == 0))
            }),
            Property::always(HO_A2_COMMITTED, |_, s: &RaceState| {
                s.record
                    .said
                    .iter()
                    .all(|(op, c)| !*c || s.record.commits.get(op).is_some_and(|n| *n > 0))
            }),
            Property::always(HO_S4_LIMITS, |_, s: &RaceState| s.tables.limits_hold()),
            Property::always(SCALE_2_SHARED, |_, s: &RaceState| {
                s.waits().iter().all(|(i, lock, holder)| {
                    let keeps = |k: usize| {
                        matches!(s.actors[k].role, Role::Desktop { keeps: true, .. })
                    };
                    !(matches!(lock, Lock::Cell(_))
                        && keeps(*i)
                        && holder.is_some_and(keeps))
                })
            }),
            Property::always(HO_S4_NO_DEADLOCK, |m: &StoreRaceModel, s: &RaceState| {
                let busy = s.actors.iter().any(|a| a.plan.is_some());
                let mut next = Vec::new();
                m.actions(s, &mut next);
                !busy || !next.is_empty() || m.halt.is_raised()
            }),
            Property::always(HO_A5_FENCE_KEPT, |_, s: &RaceState| {
                s.actors.iter().all(|a| match &a.role {
                    Role::Drainer { source } => {
                        source.pending_fence().is_some() || s.record.fence_written
                    }
                    _ => true,
                })
            }),
            Property::sometimes(
                "HO-S4 witness: a commit spends the tokens of the one shard it locked",
                |_, s: &RaceState| s.last.token_commit,
            ),
            Property::sometimes(
                "HO-S4 witness: a commit without the target's token goes back to its savepoint for the exact path",
                |_, s: &RaceState| s.last.exact_after_savepoint,
            ),
            Property::sometimes(
                "HO-A2 witness: a commit whose answer was lost is reconciled as committed",
                |_, s: &RaceState| s.last.lost_commit_reconciled,
            ),
            Property::sometimes(
                "HO-A1 witness: a reconciliation finds no record and fences the op id",
                |_, s: &RaceState| s.last.fenced_by_reconcile,
            ),
            Property::sometimes(
                "SCALE-2 witness: two registrations hold one cell's row at once",
                |_, s: &RaceState| s.last.shared_cell,
            ),
            Property::sometimes(
                "HO-A6 witness: a desktop arriving at the target completes the pending migration",
                |_, s: &RaceState| s.last.reservation_finished,
            ),
            Property::sometimes(
                "HO-A5 witness: a fence that failed seven times in a row lands",
                |_, s: &RaceState| s.last.fence_landed_after >= 7,
            ),
        ]
    }
}
