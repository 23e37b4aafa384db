//! The store operations as sans-IO plans (HO-S4, HO-A1, HO-A2, HO-A4, HO-A5, SCALE-1,
//! SCALE-2), in the style of quinn-proto's connection: a plan asks for the IO it needs as data
//! ([`CommitPlan::poll`] returns a step), its executor runs that step (a statement, a lock, a
//! savepoint, or a map lookup in the reference store) and feeds the result back
//! ([`CommitPlan::handle`]); the plan decides with the pure functions of [`super::decide`] and
//! `crate::handoff::escrow`, and ends with `Done(answer)`. The sequence of reads, checks,
//! savepoint and writes of every planned operation exists here only: the reference store
//! ([`super::AssignmentStore`]) and both SQL stores run these plans.
//!
//! Every plan starts with `Begin` (or answers first, without opening a transaction: an
//! inconsistent op id), holds the host lock before it reads anything the decision depends on,
//! writes only after every check passed, and ends either in `Commit` then `Done`, or in `Done`
//! with nothing written since the last `ToSavepoint` (the executor drops the transaction: a
//! rollback). A failed step ([`StoreFault`]) ends the plan in `Failed`: nothing more is asked.
//! A plan finishes in a bounded number of steps (`MAX_PLAN_STEPS` plus, for a registration,
//! one per completed reservation).
//!
//! HO-S4's limits in escrow: the commit and the enrolment first lock **one** limit shard (a
//! savepoint before it, `LockAnyShard`); the plan decides from that shard's tokens whether the
//! token path may commit, and otherwise goes `ToSavepoint` and takes the exact path (every
//! shard locked, the exact totals). A store without shards (the reference) answers
//! `LockAnyShard` with a shard holding no token, so it always takes the exact path.

use serde::{Deserialize, Serialize};

use super::decide::*;
use super::result::StoreFault;
use super::rows::*;
use crate::handoff::escrow::{
    after_commit, after_fence, after_reap, enrol_exact, enrol_path, exact_limits, fast_commit,
    load_split, rebalance, shard_covers_commit, spend_commit, spend_enrolment, EnrolPath,
    Rebalance, ShardRow, Split,
};
use crate::handoff::ids::{AuthorityCheck, AuthorityField, CellId, HostId, Incarnation, OpId};
use crate::handoff::ids::{Generation, SourceAuthority};
use crate::handoff::policy::HandoffRequest;
use crate::MonoMs;

/// The most steps any plan asks for, registration's reservations aside (the commit's longest
/// path: begin, host, facts, shard, write, savepoint, shards, settings, target, write, commit).
pub const MAX_PLAN_STEPS: usize = 16;

/// The shard a host's token path tries first (spreads the writers over the shards).
#[must_use]
pub fn shard_hint(host: HostId, shards: u32) -> u32 {
    u32::try_from(host.0 % u64::from(shards.max(1))).unwrap_or(0)
}

/// HO-S4: how a commit counts against the global limits (`crate::handoff::escrow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LimitWrites {
    /// Token path: the locked shard's row after the commit ([`spend_commit`]); the executor
    /// also moves the host's count from the source's to the target's load row on that shard
    /// and spends the target's token there, and reports the target's tokens there as they
    /// were before (the plan decides with [`fast_commit`]).
    Spend { shard: u32, row: ShardRow },
    /// Exact path (every shard locked): every shard's row from the totals after the commit,
    /// and the target's hosts and tokens re-dealt over its load rows.
    Rebalance {
        rebalance: Rebalance,
        target_hosts: u32,
        target_tokens: Split,
    },
}

/// HO-S4 / HO-A1: what the commit reads under the host lock, in a statement that starts after
/// the lock was granted: the op id's record, the settings, the target cell, whether the source
/// cell is capable, the host's cooldown and whether it holds a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommitRead {
    pub recorded: Option<AttemptRow>,
    pub config: StoreConfig,
    pub target_cell: Option<CellRow>,
    /// HO-L3: the end of the target cell's lease (zero: never leased, or unknown target).
    #[serde(default)]
    pub target_lease_until: MonoMs,
    pub source_cell_capable: bool,
    pub cooldown_until: Option<MonoMs>,
    pub migration_pending: bool,
}

/// A step of [`CommitPlan`]: the IO it asks for next.
// The write step carries the commit's rows by value: a step is polled once per IO, and a box
// would allocate on every commit for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CommitStep {
    /// Open the transaction (→ [`CommitInput::Begun`]).
    Begin,
    /// Lock the host's assignment row and read it (→ [`CommitInput::Host`]).
    LockHost { host: HostId },
    /// The host's facts ([`CommitRead`]), read after the host lock (→ [`CommitInput::Facts`]).
    ReadFacts,
    /// Token path: set the savepoint and lock one free limit shard, `hint` first
    /// (→ [`CommitInput::Shard`]; `None`: every shard is locked by another writer).
    LockAnyShard { hint: u32 },
    /// Every shard was locked: wait for shard `shard` (→ [`CommitInput::Shard`]).
    LockShard { shard: u32 },
    /// Write every row of the commit and its count against the limits
    /// (→ [`CommitInput::Written`]).
    WriteCommit {
        writes: CommitWrites,
        limits: LimitWrites,
    },
    /// Back to the savepoint: the shard's lock and the token path's writes are undone, the
    /// host lock stays (→ [`CommitInput::AtSavepoint`]).
    ToSavepoint,
    /// Exact path: lock every shard in shard order (→ [`CommitInput::Shards`]).
    LockAllShards,
    /// The settings, read after every shard lock (→ [`CommitInput::Settings`]).
    ReadSettings,
    /// The target cell's row and its hosts summed over its load rows, read after every shard
    /// lock (→ [`CommitInput::Target`]).
    ReadTarget { cell: CellId },
    /// COMMIT (→ [`CommitInput::Committed`]).
    Commit,
    /// The answer; nothing more to do (a transaction still open is dropped: rolled back).
    Done(TxnOutcome),
    /// A step failed: nothing more to do (the transaction is dropped).
    Failed(StoreFault),
}

/// The result of a [`CommitStep`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CommitInput {
    Begun,
    Host(Option<AssignmentRow>),
    Facts(CommitRead),
    Shard(Option<(u32, ShardRow)>),
    /// The commit's rows are written. Token path: the target's host tokens on the locked shard
    /// before this write (`0`: none, or no load row); the exact path reports `0`.
    Written {
        target_tokens: u64,
    },
    AtSavepoint,
    Shards(Vec<ShardRow>),
    Settings(StoreConfig),
    Target(Option<(CellRow, i64)>),
    Committed,
    /// The step failed.
    Failed(StoreFault),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum CommitState {
    Start,
    Host,
    Facts {
        locked: Option<AssignmentRow>,
    },
    Shard {
        host: HostFacts,
        config: StoreConfig,
    },
    TokenWritten {
        host: HostFacts,
        config: StoreConfig,
        shard: ShardRow,
        writes: CommitWrites,
    },
    Savepoint {
        host: HostFacts,
    },
    Shards {
        host: HostFacts,
    },
    Settings {
        host: HostFacts,
        shards: Vec<ShardRow>,
    },
    Target {
        host: HostFacts,
        shards: Vec<ShardRow>,
        config: StoreConfig,
    },
    ExactWritten {
        writes: CommitWrites,
    },
    Committing {
        writes: CommitWrites,
    },
    End,
}

/// HO-S4 / HO-A1: the bounded assignment transaction as a plan. Re-checks the op id, the exact
/// authority and the director's policy under the host lock; then either spends one token of
/// every limit on one shard, or decides on the exact totals with every shard locked; then
/// writes every row at once and commits. An op id already recorded returns the recorded result
/// and never migrates twice. Every early answer writes nothing and locks no shard.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommitPlan {
    now: MonoMs,
    req: HandoffRequest,
    shards: u32,
    step: CommitStep,
    state: CommitState,
}

impl CommitPlan {
    /// A plan for `req` at `now` on a store of `shards` limit shards (the reference: 1).
    #[must_use]
    pub fn new(now: MonoMs, req: &HandoffRequest, shards: u32) -> CommitPlan {
        let mut plan = CommitPlan {
            now,
            req: *req,
            shards: shards.max(1),
            step: CommitStep::Begin,
            state: CommitState::Start,
        };
        if !req.op_id_is_consistent() {
            // Nothing can ever commit under an inconsistent id: no transaction needed.
            plan.done(TxnOutcome::RolledBack {
                reason: AbortReason::InvalidOpId,
            });
        }
        plan
    }

    /// The IO this plan asks for next (or its end).
    #[must_use]
    pub fn poll(&self) -> CommitStep {
        self.step
    }

    /// The answer, once the plan is done.
    #[must_use]
    pub fn answer(&self) -> Option<TxnOutcome> {
        match self.step {
            CommitStep::Done(answer) => Some(answer),
            _ => None,
        }
    }

    fn done(&mut self, answer: TxnOutcome) {
        self.step = CommitStep::Done(answer);
        self.state = CommitState::End;
    }

    fn ask(&mut self, step: CommitStep, state: CommitState) {
        self.step = step;
        self.state = state;
    }

    fn committed(&self, writes: &CommitWrites) -> TxnOutcome {
        TxnOutcome::Committed {
            target: self.req.target,
            new_epoch: writes.assignment.epoch,
        }
    }

    /// Feed the result of the step [`Self::poll`] returned.
    pub fn handle(&mut self, input: CommitInput) {
        if let CommitInput::Failed(fault) = input {
            if !matches!(self.step, CommitStep::Done(_) | CommitStep::Failed(_)) {
                self.step = CommitStep::Failed(fault);
                self.state = CommitState::End;
            }
            return;
        }
        let now = self.now;
        let req = self.req;
        let state = std::mem::replace(&mut self.state, CommitState::End);
        match (state, input) {
            (CommitState::Start, CommitInput::Begun) => self.ask(
                CommitStep::LockHost {
                    host: req.source.host,
                },
                CommitState::Host,
            ),
            (CommitState::Host, CommitInput::Host(locked)) => {
                self.ask(CommitStep::ReadFacts, CommitState::Facts { locked });
            }
            (CommitState::Facts { locked }, CommitInput::Facts(read)) => {
                self.on_facts(locked, &read);
            }
            (CommitState::Shard { host, config }, CommitInput::Shard(locked)) => {
                let Some((shard, row)) = locked else {
                    // Every shard is held by another writer: wait for the hint's.
                    let shard = shard_hint(req.source.host, self.shards);
                    self.ask(
                        CommitStep::LockShard { shard },
                        CommitState::Shard { host, config },
                    );
                    return;
                };
                self.on_shard(host, config, shard, row);
            }
            (
                CommitState::TokenWritten {
                    host,
                    config,
                    shard,
                    writes,
                },
                CommitInput::Written { target_tokens },
            ) => {
                if fast_commit(now, &config, &shard, target_tokens) {
                    self.ask(CommitStep::Commit, CommitState::Committing { writes });
                } else {
                    // No token of the target's room on this shard: undo and go exact.
                    self.ask(CommitStep::ToSavepoint, CommitState::Savepoint { host });
                }
            }
            (CommitState::Savepoint { host }, CommitInput::AtSavepoint) => {
                self.ask(CommitStep::LockAllShards, CommitState::Shards { host });
            }
            (CommitState::Shards { host }, CommitInput::Shards(shards)) => {
                // Read after every shard is locked: a settings change (which locks them all)
                // either committed before, or waits; the tokens dealt below follow it.
                self.ask(
                    CommitStep::ReadSettings,
                    CommitState::Settings { host, shards },
                );
            }
            (CommitState::Settings { host, shards }, CommitInput::Settings(config)) => {
                // The target as it is now, for the same reason: a cell write (a lowered
                // capacity) locks every shard after writing its row.
                self.ask(
                    CommitStep::ReadTarget { cell: req.target },
                    CommitState::Target {
                        host,
                        shards,
                        config,
                    },
                );
            }
            (
                CommitState::Target {
                    host,
                    shards,
                    config,
                },
                CommitInput::Target(target),
            ) => self.on_target(host, &shards, &config, target),
            (CommitState::ExactWritten { writes }, CommitInput::Written { .. }) => {
                self.ask(CommitStep::Commit, CommitState::Committing { writes });
            }
            (CommitState::Committing { writes }, CommitInput::Committed) => {
                let answer = self.committed(&writes);
                self.done(answer);
            }
            (state, input) => {
                crate::invariant!(false, "commit plan fed {input:?} in {state:?}");
                self.state = state;
            }
        }
    }

    fn on_facts(&mut self, locked: Option<AssignmentRow>, read: &CommitRead) {
        let req = self.req;
        let host = req.source.host;
        let current = locked.map(|row| authority_of(host, &row));
        // Every early answer below wrote nothing: the executor drops the transaction.
        if let Some(row) = read.recorded {
            return self.done(recorded_outcome(&req, current.as_ref(), &row));
        }
        let check = claim_check(&req.source, current.as_ref());
        if check != AuthorityCheck::Exact {
            return self.done(TxnOutcome::AuthorityChanged { check });
        }
        let Some(assignment) = locked else {
            crate::invariant!(false, "authority check passed for an unknown host");
            return self.done(TxnOutcome::AuthorityChanged {
                check: AuthorityCheck::Mismatch(AuthorityField::Host),
            });
        };
        let facts = HostFacts {
            assignment,
            source_cell_capable: read.source_cell_capable,
            target_cell: read.target_cell,
            target_lease_until: read.target_lease_until,
            cooldown_until: read.cooldown_until,
            migration_pending: read.migration_pending,
        };
        if let Err(reason) = commit_precheck(self.now, &req, &facts, &read.config) {
            return self.done(TxnOutcome::RolledBack { reason });
        }
        if facts.migration_pending {
            // Refused on the exact totals (`MigrationPending` after the capacity check): no
            // token path.
            self.ask(
                CommitStep::LockAllShards,
                CommitState::Shards { host: facts },
            );
        } else {
            self.ask(
                CommitStep::LockAnyShard {
                    hint: shard_hint(host, self.shards),
                },
                CommitState::Shard {
                    host: facts,
                    config: read.config,
                },
            );
        }
    }

    fn on_shard(&mut self, host: HostFacts, config: StoreConfig, shard: u32, row: ShardRow) {
        let now = self.now;
        if shard_covers_commit(now, &config, &row) {
            // The rows do not depend on the counts; the rate row of `writes` is the exact
            // path's (this path counts the commit on the shard instead).
            let window = RateRow {
                window_start: row.window_start,
                commits: 0,
            };
            if let Some(writes) = commit_writes(now, &self.req, &host, window, &config) {
                let limits = LimitWrites::Spend {
                    shard,
                    row: spend_commit(&row),
                };
                return self.ask(
                    CommitStep::WriteCommit { writes, limits },
                    CommitState::TokenWritten {
                        host,
                        config,
                        shard: row,
                        writes,
                    },
                );
            }
        }
        self.ask(CommitStep::ToSavepoint, CommitState::Savepoint { host });
    }

    fn on_target(
        &mut self,
        host: HostFacts,
        shards: &[ShardRow],
        config: &StoreConfig,
        target: Option<(CellRow, i64)>,
    ) {
        if shards.is_empty() {
            // A store has at least one shard; without any, nothing is known: refuse to write.
            return self.fail(StoreFault::BadRow);
        }
        let host = HostFacts {
            target_cell: target.map(|(row, _)| row),
            ..host
        };
        let limits = exact_limits(shards, target.map_or(0, |(_, hosts)| hosts));
        let facts = CommitFacts { host, limits };
        let writes = match decide_commit(self.now, &self.req, &facts, config) {
            Ok(writes) => writes,
            Err(reason) => return self.done(TxnOutcome::RolledBack { reason }),
        };
        let after = after_commit(&limits, &writes);
        let capacity = host.target_cell.map_or(0, |c| c.capacity);
        let limits = LimitWrites::Rebalance {
            rebalance: rebalance(config, &after, self.shards),
            target_hosts: after.target_load,
            target_tokens: load_split(capacity, after.target_load, self.shards),
        };
        self.ask(
            CommitStep::WriteCommit { writes, limits },
            CommitState::ExactWritten { writes },
        );
    }

    fn fail(&mut self, fault: StoreFault) {
        self.step = CommitStep::Failed(fault);
        self.state = CommitState::End;
    }
}

// ----- HO-A1 / HO-A2: the locked reconciliation -----

/// A step of [`ReconcilePlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReconcileStep {
    Begin,
    LockHost {
        host: HostId,
    },
    /// The op id's record, read after the host lock (→ [`ReconcileInput::Attempt`]).
    ReadAttempt {
        op: OpId,
    },
    LockAllShards,
    ReadSettings,
    /// Write the fence record (and the renewed assignment) and every shard's row after it.
    WriteFence {
        writes: FenceWrites,
        rebalance: Rebalance,
    },
    Commit,
    /// The answer (`None`: the fence could not be written, store full: stay quarantined).
    Done(Option<TxnOutcome>),
    Failed(StoreFault),
}

/// The result of a [`ReconcileStep`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReconcileInput {
    Begun,
    Host(Option<AssignmentRow>),
    Attempt(Option<AttemptRow>),
    Shards(Vec<ShardRow>),
    Settings(StoreConfig),
    Written,
    Committed,
    Failed(StoreFault),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum ReconcileState {
    Start,
    Host,
    Attempt {
        current: Option<AssignmentRow>,
    },
    Shards {
        current: Option<AssignmentRow>,
    },
    Settings {
        current: Option<AssignmentRow>,
        shards: Vec<ShardRow>,
    },
    Written {
        answer: TxnOutcome,
    },
    Committing {
        answer: TxnOutcome,
    },
    End,
}

/// HO-A1 / HO-A2: locked reconciliation by op id as a plan: under the host lock the op id's
/// record ([`reconcile_precheck`]: a recorded op id is answered without locking a limit shard),
/// then every limit shard and [`decide_reconcile`] on the exact attempt count, whose fence rows
/// are written with the shards' tokens dealt out again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReconcilePlan {
    now: MonoMs,
    req: HandoffRequest,
    shards: u32,
    step: ReconcileStep,
    state: ReconcileState,
}

impl ReconcilePlan {
    #[must_use]
    pub fn new(now: MonoMs, req: &HandoffRequest, shards: u32) -> ReconcilePlan {
        let mut plan = ReconcilePlan {
            now,
            req: *req,
            shards: shards.max(1),
            step: ReconcileStep::Begin,
            state: ReconcileState::Start,
        };
        if !req.op_id_is_consistent() {
            // Nothing can ever commit under an inconsistent id: a definitive rollback.
            plan.done(Some(TxnOutcome::RolledBack {
                reason: AbortReason::InvalidOpId,
            }));
        }
        plan
    }

    #[must_use]
    pub fn poll(&self) -> ReconcileStep {
        self.step
    }

    fn done(&mut self, answer: Option<TxnOutcome>) {
        self.step = ReconcileStep::Done(answer);
        self.state = ReconcileState::End;
    }

    fn ask(&mut self, step: ReconcileStep, state: ReconcileState) {
        self.step = step;
        self.state = state;
    }

    pub fn handle(&mut self, input: ReconcileInput) {
        if let ReconcileInput::Failed(fault) = input {
            if !matches!(self.step, ReconcileStep::Done(_) | ReconcileStep::Failed(_)) {
                self.step = ReconcileStep::Failed(fault);
                self.state = ReconcileState::End;
            }
            return;
        }
        let req = self.req;
        let host = req.source.host;
        let state = std::mem::replace(&mut self.state, ReconcileState::End);
        match (state, input) {
            (ReconcileState::Start, ReconcileInput::Begun) => {
                self.ask(ReconcileStep::LockHost { host }, ReconcileState::Host);
            }
            (ReconcileState::Host, ReconcileInput::Host(current)) => self.ask(
                ReconcileStep::ReadAttempt { op: req.op_id },
                ReconcileState::Attempt { current },
            ),
            (ReconcileState::Attempt { current }, ReconcileInput::Attempt(recorded)) => {
                let authority = current.map(|row| authority_of(host, &row));
                if let Some(answer) =
                    reconcile_precheck(&req, authority.as_ref(), recorded.as_ref())
                {
                    // Nothing written: the executor drops the transaction.
                    return self.done(Some(answer));
                }
                self.ask(
                    ReconcileStep::LockAllShards,
                    ReconcileState::Shards { current },
                );
            }
            (ReconcileState::Shards { current }, ReconcileInput::Shards(shards)) => {
                // After the shard locks, as in the exact path of a commit.
                self.ask(
                    ReconcileStep::ReadSettings,
                    ReconcileState::Settings { current, shards },
                );
            }
            (ReconcileState::Settings { current, shards }, ReconcileInput::Settings(config)) => {
                if shards.is_empty() {
                    self.step = ReconcileStep::Failed(StoreFault::BadRow);
                    return;
                }
                let limits = exact_limits(&shards, 0);
                // The record was read under the host lock and found absent.
                match decide_reconcile(
                    self.now,
                    &req,
                    current,
                    None,
                    limits.attempt_rows,
                    config.bounds.max_attempt_rows,
                ) {
                    ReconcileDecision::Answer(answer) => self.done(Some(answer)),
                    ReconcileDecision::StoreFull => self.done(None),
                    ReconcileDecision::Fence { writes, answer } => self.ask(
                        ReconcileStep::WriteFence {
                            writes,
                            rebalance: rebalance(&config, &after_fence(&limits), self.shards),
                        },
                        ReconcileState::Written { answer },
                    ),
                }
            }
            (ReconcileState::Written { answer }, ReconcileInput::Written) => {
                self.ask(ReconcileStep::Commit, ReconcileState::Committing { answer });
            }
            (ReconcileState::Committing { answer }, ReconcileInput::Committed) => {
                self.done(Some(answer));
            }
            (state, input) => {
                crate::invariant!(false, "reconcile plan fed {input:?} in {state:?}");
                self.state = state;
            }
        }
    }
}

// ----- HO-A4 / HO-A6: registration -----

/// A step of [`RegisterPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegisterStep {
    Begin,
    LockHost {
        host: HostId,
    },
    /// The cell's row, unlocked (→ [`RegisterInput::Cell`]): only to choose the lock.
    ReadCell {
        cell: CellId,
    },
    /// The cell's row under `lock` ([`register_cell_lock`]) (→ [`RegisterInput::Cell`]).
    LockCell {
        cell: CellId,
        lock: CellLock,
    },
    /// The registration raises the cell's incarnation (→ [`RegisterInput::Written`]).
    WriteCellIncarnation {
        cell: CellId,
        incarnation: Incarnation,
    },
    /// The host's new assignment row (→ [`RegisterInput::Written`]).
    WriteAssignment {
        host: HostId,
        row: AssignmentRow,
    },
    /// The op ids of the host's reservations at `cell`, in op-id order
    /// (→ [`RegisterInput::Reservations`]).
    ReadReservations {
        host: HostId,
        cell: CellId,
    },
    /// Release the reservation (on the shard that counted it) and set its attempt's
    /// registration (→ [`RegisterInput::Written`]).
    FinishReservation {
        op: OpId,
        registration: Registration,
    },
    Commit,
    Done(Result<SourceAuthority, RegisterRefusal>),
    Failed(StoreFault),
}

/// The result of a [`RegisterStep`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegisterInput {
    Begun,
    Host(Option<AssignmentRow>),
    Cell(Option<CellRow>),
    Written,
    Reservations(Vec<OpId>),
    Committed,
    Failed(StoreFault),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum RegisterState {
    Start,
    Host,
    Seen { current: AssignmentRow },
    Locked { current: AssignmentRow },
    CellWritten { row: AssignmentRow },
    RowWritten { row: AssignmentRow },
    Finishing { row: AssignmentRow, left: Vec<OpId> },
    Committing { row: AssignmentRow },
    End,
}

/// HO-A4 / HO-A6: a desktop control registers at a cell, as a plan: under the host lock, then
/// the cell's lock (SCALE-2: shared unless the registration raises the incarnation),
/// [`decide_register`] over the rows read; its row, the cell's incarnation (if it rises) and
/// the completed reservations of (host, cell) are written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RegisterPlan {
    host: HostId,
    cell: CellId,
    incarnation: Incarnation,
    desktop_capable: bool,
    step: RegisterStep,
    state: RegisterState,
}

impl RegisterPlan {
    #[must_use]
    pub fn new(
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        desktop_capable: bool,
    ) -> RegisterPlan {
        RegisterPlan {
            host,
            cell,
            incarnation,
            desktop_capable,
            step: RegisterStep::Begin,
            state: RegisterState::Start,
        }
    }

    #[must_use]
    pub fn poll(&self) -> RegisterStep {
        self.step
    }

    fn done(&mut self, answer: Result<SourceAuthority, RegisterRefusal>) {
        self.step = RegisterStep::Done(answer);
        self.state = RegisterState::End;
    }

    fn ask(&mut self, step: RegisterStep, state: RegisterState) {
        self.step = step;
        self.state = state;
    }

    fn next_reservation(&mut self, row: AssignmentRow, mut left: Vec<OpId>) {
        if left.is_empty() {
            self.ask(RegisterStep::Commit, RegisterState::Committing { row });
        } else {
            let op = left.remove(0);
            self.ask(
                RegisterStep::FinishReservation {
                    op,
                    registration: Registration::Registered,
                },
                RegisterState::Finishing { row, left },
            );
        }
    }

    pub fn handle(&mut self, input: RegisterInput) {
        if let RegisterInput::Failed(fault) = input {
            if !matches!(self.step, RegisterStep::Done(_) | RegisterStep::Failed(_)) {
                self.step = RegisterStep::Failed(fault);
                self.state = RegisterState::End;
            }
            return;
        }
        let (host, cell) = (self.host, self.cell);
        let state = std::mem::replace(&mut self.state, RegisterState::End);
        match (state, input) {
            (RegisterState::Start, RegisterInput::Begun) => {
                self.ask(RegisterStep::LockHost { host }, RegisterState::Host);
            }
            (RegisterState::Host, RegisterInput::Host(current)) => match current {
                // An unknown host is refused whatever the cell: its lock is not taken.
                None => self.done(Err(RegisterRefusal::UnknownHost)),
                Some(current) => {
                    self.ask(
                        RegisterStep::ReadCell { cell },
                        RegisterState::Seen { current },
                    );
                }
            },
            (RegisterState::Seen { current }, RegisterInput::Cell(seen)) => self.ask(
                RegisterStep::LockCell {
                    cell,
                    lock: register_cell_lock(seen, self.incarnation),
                },
                RegisterState::Locked { current },
            ),
            (RegisterState::Locked { current }, RegisterInput::Cell(cell_row)) => {
                let row = match decide_register(
                    Some(current),
                    cell_row,
                    cell,
                    self.incarnation,
                    self.desktop_capable,
                ) {
                    Ok(row) => row,
                    // Nothing written: the executor drops the transaction.
                    Err(refusal) => return self.done(Err(refusal)),
                };
                if cell_row.is_some_and(|c| register_raises_cell(&c, &row)) {
                    self.ask(
                        RegisterStep::WriteCellIncarnation {
                            cell,
                            incarnation: row.incarnation,
                        },
                        RegisterState::CellWritten { row },
                    );
                } else {
                    self.ask(
                        RegisterStep::WriteAssignment { host, row },
                        RegisterState::RowWritten { row },
                    );
                }
            }
            (RegisterState::CellWritten { row }, RegisterInput::Written) => self.ask(
                RegisterStep::WriteAssignment { host, row },
                RegisterState::RowWritten { row },
            ),
            (RegisterState::RowWritten { row }, RegisterInput::Written) => self.ask(
                RegisterStep::ReadReservations { host, cell },
                RegisterState::Finishing {
                    row,
                    left: Vec::new(),
                },
            ),
            (RegisterState::Finishing { row, left }, RegisterInput::Reservations(ops))
                if matches!(self.step, RegisterStep::ReadReservations { .. }) =>
            {
                crate::invariant!(left.is_empty());
                self.next_reservation(row, ops);
            }
            (RegisterState::Finishing { row, left }, RegisterInput::Written)
                if matches!(self.step, RegisterStep::FinishReservation { .. }) =>
            {
                self.next_reservation(row, left);
            }
            (RegisterState::Committing { row }, RegisterInput::Committed) => {
                self.done(Ok(authority_of(host, &row)));
            }
            (state, input) => {
                crate::invariant!(false, "register plan fed {input:?} in {state:?}");
                self.state = state;
            }
        }
    }
}

// ----- HO-A5: the emergency-drain fence -----

/// A step of [`DrainPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DrainStep {
    Begin,
    LockHost {
        host: HostId,
    },
    /// The host's generation bumped (→ [`DrainInput::Written`]).
    WriteGeneration {
        host: HostId,
        generation: Generation,
    },
    Commit,
    Done(DrainWrite),
    Failed(StoreFault),
}

/// The result of a [`DrainStep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DrainInput {
    Begun,
    Host(Option<AssignmentRow>),
    Written,
    Committed,
    Failed(StoreFault),
}

/// HO-A5: the drain fence as a plan: under the host lock, [`drain_fence`]; if the claimed
/// authority is current, its generation is bumped so any pending handoff of it fails.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DrainPlan {
    authority: SourceAuthority,
    step: DrainStep,
    fenced: Option<AssignmentRow>,
}

impl DrainPlan {
    #[must_use]
    pub fn new(authority: &SourceAuthority) -> DrainPlan {
        DrainPlan {
            authority: *authority,
            step: DrainStep::Begin,
            fenced: None,
        }
    }

    #[must_use]
    pub fn poll(&self) -> DrainStep {
        self.step
    }

    pub fn handle(&mut self, input: DrainInput) {
        let host = self.authority.host;
        self.step = match (self.step, input) {
            (DrainStep::Done(_) | DrainStep::Failed(_), _) => return,
            (_, DrainInput::Failed(fault)) => DrainStep::Failed(fault),
            (DrainStep::Begin, DrainInput::Begun) => DrainStep::LockHost { host },
            (DrainStep::LockHost { .. }, DrainInput::Host(current)) => {
                match drain_fence(&self.authority, current) {
                    Ok(row) => {
                        self.fenced = Some(row);
                        DrainStep::WriteGeneration {
                            host,
                            generation: row.generation,
                        }
                    }
                    // Nothing written: the executor drops the transaction.
                    Err(answer) => DrainStep::Done(answer),
                }
            }
            (DrainStep::WriteGeneration { .. }, DrainInput::Written) => DrainStep::Commit,
            (DrainStep::Commit, DrainInput::Committed) => match self.fenced {
                Some(row) => DrainStep::Done(DrainWrite::Fenced {
                    authority: authority_of(host, &row),
                }),
                None => DrainStep::Failed(StoreFault::BadRow),
            },
            (step, input) => {
                crate::invariant!(false, "drain plan fed {input:?} at {step:?}");
                step
            }
        };
    }
}

// ----- SCALE-1 / SCALE-2: enrolment -----

/// A step of [`EnrolPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EnrolStep {
    Begin,
    /// The cell's row, unlocked: only its existence and incarnation matter
    /// (→ [`EnrolInput::Cell`]).
    ReadCell {
        cell: CellId,
    },
    LockHost {
        host: HostId,
    },
    /// As [`CommitStep::LockAnyShard`] (→ [`EnrolInput::Shard`]).
    LockAnyShard {
        hint: u32,
    },
    LockShard {
        shard: u32,
    },
    /// The cell's host tokens on `shard` and on every other shard, summed, read after the
    /// shard's lock (→ [`EnrolInput::CellTokens`]).
    ReadCellTokens {
        cell: CellId,
        shard: u32,
    },
    /// Insert the host's row unless it has one (→ [`EnrolInput::Inserted`]).
    InsertHost {
        host: HostId,
        row: AssignmentRow,
    },
    /// Token path: the locked shard's row after the enrolment ([`spend_enrolment`]), and the
    /// host counted on the cell's load row there, spending its token if `spend_cell_token`
    /// (→ [`EnrolInput::Written`]).
    SpendEnrolment {
        shard: u32,
        row: ShardRow,
        cell: CellId,
        spend_cell_token: bool,
    },
    ToSavepoint,
    LockAllShards,
    ReadSettings,
    /// Exact path: the host counted on shard 0, the host tokens dealt out as `split`, the host
    /// counted on the cell's shard-0 load row and the cell's host tokens revoked
    /// (→ [`EnrolInput::Written`]).
    WriteEnrolExact {
        cell: CellId,
        split: Split,
    },
    Commit,
    Done(Result<SourceAuthority, StoreError>),
    Failed(StoreFault),
}

/// The result of an [`EnrolStep`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EnrolInput {
    Begun,
    Cell(Option<CellRow>),
    Host(Option<AssignmentRow>),
    Shard(Option<(u32, ShardRow)>),
    CellTokens {
        own: i64,
        others: i64,
    },
    /// `false`: the host has a row already (a concurrent enrolment won); nothing written.
    Inserted(bool),
    Written,
    AtSavepoint,
    Shards(Vec<ShardRow>),
    Settings(StoreConfig),
    Committed,
    Failed(StoreFault),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum EnrolState {
    Start,
    Cell,
    Host {
        cell_row: Option<CellRow>,
    },
    Shard {
        cell_row: Option<CellRow>,
        row: AssignmentRow,
    },
    Tokens {
        cell_row: Option<CellRow>,
        row: AssignmentRow,
        shard: u32,
        shard_row: ShardRow,
    },
    TokenInserted {
        row: AssignmentRow,
        shard: u32,
        shard_row: ShardRow,
        spend_cell_token: bool,
    },
    Savepoint {
        cell_row: Option<CellRow>,
    },
    Shards {
        cell_row: Option<CellRow>,
    },
    Settings {
        cell_row: Option<CellRow>,
        hosts: i64,
    },
    ExactInserted {
        row: AssignmentRow,
        split: Split,
    },
    Written {
        row: AssignmentRow,
    },
    Committing {
        row: AssignmentRow,
    },
    End,
}

/// Setup and enrolment (SCALE-1 / SCALE-2) as a plan: a constant number of statements whatever
/// the number of hosts and cells. Under the host lock, every answer that needs no count first
/// ([`decide_insert_host`]); then one free limit shard: with a host token ([`enrol_path`]) the
/// row is inserted and counted there; else back to the savepoint, every shard locked, the
/// store's host count summed ([`enrol_exact`]): `TooManyHosts` at the bound, else the row, the
/// host counted and the host tokens dealt out again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnrolPlan {
    host: HostId,
    cell: CellId,
    desktop_capable: bool,
    shards: u32,
    step: EnrolStep,
    state: EnrolState,
}

impl EnrolPlan {
    #[must_use]
    pub fn new(host: HostId, cell: CellId, desktop_capable: bool, shards: u32) -> EnrolPlan {
        EnrolPlan {
            host,
            cell,
            desktop_capable,
            shards: shards.max(1),
            step: EnrolStep::Begin,
            state: EnrolState::Start,
        }
    }

    #[must_use]
    pub fn poll(&self) -> EnrolStep {
        self.step
    }

    fn done(&mut self, answer: Result<SourceAuthority, StoreError>) {
        self.step = EnrolStep::Done(answer);
        self.state = EnrolState::End;
    }

    fn ask(&mut self, step: EnrolStep, state: EnrolState) {
        self.step = step;
        self.state = state;
    }

    pub fn handle(&mut self, input: EnrolInput) {
        if let EnrolInput::Failed(fault) = input {
            if !matches!(self.step, EnrolStep::Done(_) | EnrolStep::Failed(_)) {
                self.step = EnrolStep::Failed(fault);
                self.state = EnrolState::End;
            }
            return;
        }
        let (host, cell, capable) = (self.host, self.cell, self.desktop_capable);
        let state = std::mem::replace(&mut self.state, EnrolState::End);
        match (state, input) {
            (EnrolState::Start, EnrolInput::Begun) => {
                self.ask(EnrolStep::ReadCell { cell }, EnrolState::Cell);
            }
            (EnrolState::Cell, EnrolInput::Cell(cell_row)) => {
                self.ask(EnrolStep::LockHost { host }, EnrolState::Host { cell_row });
            }
            (EnrolState::Host { cell_row }, EnrolInput::Host(current)) => {
                // Every answer that needs no count first (the order the reference checks in).
                match decide_insert_host(cell_row, current.is_some(), true, cell, capable) {
                    Ok(row) => self.ask(
                        EnrolStep::LockAnyShard {
                            hint: shard_hint(host, self.shards),
                        },
                        EnrolState::Shard { cell_row, row },
                    ),
                    Err(refusal) => self.done(Err(refusal)),
                }
            }
            (EnrolState::Shard { cell_row, row }, EnrolInput::Shard(locked)) => match locked {
                None => {
                    let shard = shard_hint(host, self.shards);
                    self.ask(
                        EnrolStep::LockShard { shard },
                        EnrolState::Shard { cell_row, row },
                    );
                }
                Some((shard, shard_row)) => self.ask(
                    EnrolStep::ReadCellTokens { cell, shard },
                    EnrolState::Tokens {
                        cell_row,
                        row,
                        shard,
                        shard_row,
                    },
                ),
            },
            (
                EnrolState::Tokens {
                    cell_row,
                    row,
                    shard,
                    shard_row,
                },
                EnrolInput::CellTokens { own, others },
            ) => match enrol_path(&shard_row, own, others) {
                EnrolPath::Token { spend_cell_token } => self.ask(
                    EnrolStep::InsertHost { host, row },
                    EnrolState::TokenInserted {
                        row,
                        shard,
                        shard_row,
                        spend_cell_token,
                    },
                ),
                EnrolPath::Exact => {
                    self.ask(EnrolStep::ToSavepoint, EnrolState::Savepoint { cell_row });
                }
            },
            (
                EnrolState::TokenInserted {
                    row,
                    shard,
                    shard_row,
                    spend_cell_token,
                },
                EnrolInput::Inserted(inserted),
            ) => {
                if !inserted {
                    return self.done(Err(StoreError::HostExists));
                }
                self.ask(
                    EnrolStep::SpendEnrolment {
                        shard,
                        row: spend_enrolment(&shard_row),
                        cell,
                        spend_cell_token,
                    },
                    EnrolState::Written { row },
                );
            }
            (EnrolState::Savepoint { cell_row }, EnrolInput::AtSavepoint) => {
                self.ask(EnrolStep::LockAllShards, EnrolState::Shards { cell_row });
            }
            (EnrolState::Shards { cell_row }, EnrolInput::Shards(shards)) => {
                let hosts = shards
                    .iter()
                    .map(|s| s.hosts)
                    .fold(0i64, i64::saturating_add);
                self.ask(
                    EnrolStep::ReadSettings,
                    EnrolState::Settings { cell_row, hosts },
                );
            }
            (EnrolState::Settings { cell_row, hosts }, EnrolInput::Settings(config)) => {
                let split = enrol_exact(&config, hosts, self.shards);
                let row = match decide_insert_host(cell_row, false, split.is_some(), cell, capable)
                {
                    Ok(row) => row,
                    Err(refusal) => return self.done(Err(refusal)),
                };
                let Some(split) = split else {
                    return self.done(Err(StoreError::TooManyHosts));
                };
                self.ask(
                    EnrolStep::InsertHost { host, row },
                    EnrolState::ExactInserted { row, split },
                );
            }
            (EnrolState::ExactInserted { row, split }, EnrolInput::Inserted(inserted)) => {
                if !inserted {
                    return self.done(Err(StoreError::HostExists));
                }
                self.ask(
                    EnrolStep::WriteEnrolExact { cell, split },
                    EnrolState::Written { row },
                );
            }
            (EnrolState::Written { row }, EnrolInput::Written) => {
                self.ask(EnrolStep::Commit, EnrolState::Committing { row });
            }
            (EnrolState::Committing { row }, EnrolInput::Committed) => {
                self.done(Ok(authority_of(host, &row)));
            }
            (state, input) => {
                crate::invariant!(false, "enrol plan fed {input:?} in {state:?}");
                self.state = state;
            }
        }
    }
}

// ----- HO-L4: history bounded by retention -----

/// A step of [`ReapPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReapStep {
    Begin,
    /// The settings (→ [`ReapInput::Settings`]): the registration timeout the retention must
    /// exceed, as it is now.
    ReadSettings,
    /// Delete the attempt records [`reap_selection`] picks: ended ([`attempt_ended`]) and
    /// recorded at or before `cutoff`, oldest first (`recorded_at`, then op id), at most
    /// `batch`, the ended condition repeated in the delete itself (→ [`ReapInput::Deleted`]:
    /// how many were removed).
    DeleteEnded {
        cutoff: MonoMs,
        batch: u32,
    },
    /// Lock one free limit shard, `hint` first, no savepoint (→ [`ReapInput::Shard`]; `None`:
    /// every shard is locked by another writer).
    LockAnyShard {
        hint: u32,
    },
    /// Every shard was locked: wait for shard `shard` (→ [`ReapInput::Shard`]).
    LockShard {
        shard: u32,
    },
    /// The locked shard's row after the reap ([`after_reap`]: its attempt count lowered, its
    /// tokens untouched) (→ [`ReapInput::Written`]).
    WriteShard {
        shard: u32,
        row: ShardRow,
    },
    Commit,
    /// How many records were removed, or the retention refused (nothing written).
    Done(Result<u32, RetentionError>),
    Failed(StoreFault),
}

/// The result of a [`ReapStep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReapInput {
    Begun,
    Settings(StoreConfig),
    Deleted(u32),
    Shard(Option<(u32, ShardRow)>),
    Written,
    Committed,
    Failed(StoreFault),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum ReapState {
    Start,
    Settings,
    Deleting,
    Shard { removed: u32 },
    Written { removed: u32 },
    Committing { removed: u32 },
    End,
}

/// HO-L4: one reap as a plan, one short transaction: the settings (the retention must exceed
/// the registration timeout as it is now: [`check_retention`]); then at most `batch` ended
/// attempt records recorded at or before `now - retention_ms` deleted, oldest first; then one
/// limit shard locked and its `attempt_rows` lowered by the number removed (tokens untouched:
/// an event that raises the room leaves them alone), and COMMIT. Nothing old enough: nothing
/// written, no shard locked. Pending commits (migrations in flight) are never removed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReapPlan {
    now: MonoMs,
    retention_ms: u64,
    batch: u32,
    step: ReapStep,
    state: ReapState,
}

impl ReapPlan {
    /// A reap at `now` of records older than `retention_ms`, at most `batch` of them. A batch
    /// out of range (0, or past [`MAX_REAP_BATCH`]) is refused before anything runs.
    #[must_use]
    pub fn new(now: MonoMs, retention_ms: u64, batch: u32) -> ReapPlan {
        let mut plan = ReapPlan {
            now,
            retention_ms,
            batch,
            step: ReapStep::Begin,
            state: ReapState::Start,
        };
        if batch == 0 || batch > MAX_REAP_BATCH {
            plan.done(Err(RetentionError::ReapBatch { value: batch }));
        }
        plan
    }

    #[must_use]
    pub fn poll(&self) -> ReapStep {
        self.step
    }

    fn done(&mut self, answer: Result<u32, RetentionError>) {
        self.step = ReapStep::Done(answer);
        self.state = ReapState::End;
    }

    fn ask(&mut self, step: ReapStep, state: ReapState) {
        self.step = step;
        self.state = state;
    }

    pub fn handle(&mut self, input: ReapInput) {
        if let ReapInput::Failed(fault) = input {
            if !matches!(self.step, ReapStep::Done(_) | ReapStep::Failed(_)) {
                self.step = ReapStep::Failed(fault);
                self.state = ReapState::End;
            }
            return;
        }
        let state = std::mem::replace(&mut self.state, ReapState::End);
        match (state, input) {
            (ReapState::Start, ReapInput::Begun) => {
                self.ask(ReapStep::ReadSettings, ReapState::Settings);
            }
            (ReapState::Settings, ReapInput::Settings(config)) => {
                let windows = [(
                    RetentionWindow::RegistrationTimeout,
                    config.registration_timeout_ms,
                )];
                if let Err(refusal) = check_retention(self.retention_ms, &windows) {
                    // Nothing written: the executor drops the transaction.
                    return self.done(Err(refusal));
                }
                match reap_cutoff(self.now, self.retention_ms) {
                    None => self.done(Ok(0)),
                    Some(cutoff) => self.ask(
                        ReapStep::DeleteEnded {
                            cutoff,
                            batch: self.batch,
                        },
                        ReapState::Deleting,
                    ),
                }
            }
            (ReapState::Deleting, ReapInput::Deleted(removed)) => {
                if removed > self.batch {
                    self.step = ReapStep::Failed(StoreFault::BadRow);
                    return;
                }
                if removed == 0 {
                    // Nothing deleted, nothing to count: the transaction is dropped.
                    return self.done(Ok(0));
                }
                self.ask(
                    ReapStep::LockAnyShard { hint: 0 },
                    ReapState::Shard { removed },
                );
            }
            (ReapState::Shard { removed }, ReapInput::Shard(locked)) => match locked {
                None => self.ask(
                    ReapStep::LockShard { shard: 0 },
                    ReapState::Shard { removed },
                ),
                Some((shard, row)) => self.ask(
                    ReapStep::WriteShard {
                        shard,
                        row: after_reap(&row, removed),
                    },
                    ReapState::Written { removed },
                ),
            },
            (ReapState::Written { removed }, ReapInput::Written) => {
                self.ask(ReapStep::Commit, ReapState::Committing { removed });
            }
            (ReapState::Committing { removed }, ReapInput::Committed) => {
                self.done(Ok(removed));
            }
            (state, input) => {
                crate::invariant!(false, "reap plan fed {input:?} in {state:?}");
                self.state = state;
            }
        }
    }
}
