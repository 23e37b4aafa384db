//! The reference assignment store: in-memory tables, the serialisation point the SQL stores
//! match row for row, and the store the model checker runs. Each `&mut self` method is one
//! transaction under the host lock; a method either writes all of its rows or none.
//!
//! The planned operations (commit, reconcile, register, enrol, fence) are executors of the
//! plans of [`super::plan`]: a loop that answers each step from the maps, the same sequence
//! the SQL stores run. The reference holds no limit shards: it answers the token path's
//! `LockAnyShard` with a shard that holds **no token**, so the plan always goes back to the
//! savepoint and takes the exact path, where `LockAllShards` is answered with one virtual
//! shard holding the exact totals of the maps (reservations, attempt rows, the rate window,
//! hosts). The answers are therefore the exact path's, which the escrow guarantees the SQL
//! stores' token path matches (`crate::handoff::escrow`); the token path itself is checked by
//! the SQL stores' differential tests and the plans' own tests. Setup, the cell lease and
//! expiry are plain methods (no plan: one row under one lock each).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decide::*;
use super::plan::*;
use super::rows::*;
use crate::handoff::escrow::ShardRow;
use crate::handoff::ids::{CellId, HostId, Incarnation, OpId, SourceAuthority};
use crate::handoff::policy::HandoffRequest;
use crate::MonoMs;

/// The reference assignment store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AssignmentStore {
    config: StoreConfig,
    cells: BTreeMap<CellId, CellRow>,
    assignments: BTreeMap<HostId, AssignmentRow>,
    reservations: BTreeMap<OpId, ReservationRow>,
    attempts: BTreeMap<OpId, AttemptRow>,
    cooldowns: BTreeMap<HostId, MonoMs>,
    rate: RateRow,
    /// HO-L2: the end of each started cell's identity lease (absent: never started).
    leases: BTreeMap<CellId, MonoMs>,
}

impl AssignmentStore {
    #[must_use]
    pub fn new(config: StoreConfig) -> AssignmentStore {
        AssignmentStore {
            config,
            cells: BTreeMap::new(),
            assignments: BTreeMap::new(),
            reservations: BTreeMap::new(),
            attempts: BTreeMap::new(),
            cooldowns: BTreeMap::new(),
            rate: RateRow::default(),
            leases: BTreeMap::new(),
        }
    }

    /// Every table, as the SQL stores' row dump returns them (the differential tests).
    #[must_use]
    pub fn snapshot(&self) -> StoreSnapshot {
        StoreSnapshot {
            config: self.config,
            cells: self.cells.clone(),
            assignments: self.assignments.clone(),
            reservations: self.reservations.clone(),
            attempts: self.attempts.clone(),
            cooldowns: self.cooldowns.clone(),
            rate: self.rate,
            leases: self
                .leases
                .iter()
                .filter(|(_, until)| **until > MonoMs::ZERO)
                .map(|(c, u)| (*c, *u))
                .collect(),
        }
    }

    #[must_use]
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// HO-A5: the persistent disable switch.
    pub fn set_enabled(&mut self, enabled: bool) {
        self.config.enabled = enabled;
    }

    /// SCALE-1 / SCALE-4: the operator's limits take effect (a cell's start).
    pub fn set_limits(&mut self, limits: &LimitSettings) {
        self.config = self.config.with_limits(limits);
    }

    /// Setup: add or replace a cell row (its lease, if any, is kept: setup is not a process).
    pub fn upsert_cell(&mut self, cell: CellId, row: CellRow) -> Result<(), StoreError> {
        decide_upsert_cell(
            self.cells.contains_key(&cell),
            count(self.cells.len()),
            self.config.bounds.max_cells,
        )?;
        self.cells.insert(cell, row);
        Ok(())
    }

    /// HO-L2: a cell process starts: [`cell_lease`] over the cell's row and lease. Takes the
    /// cell (a new incarnation, the row refreshed, leased until `now + lease_ms`) unless another
    /// live process holds it (nothing written). A cell set up by `upsert_cell` alone has no
    /// lease: it is free.
    pub fn start_cell(
        &mut self,
        cell: CellId,
        capacity: u32,
        handoff_capable: bool,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<Incarnation, StartRefusal> {
        let (incarnation, until) = match cell_lease(self.lease_of(cell), now, lease_ms) {
            CellLease::Held { incarnation, until } => {
                return Err(StartRefusal::Held(CellHeld {
                    cell,
                    incarnation,
                    until,
                }));
            }
            CellLease::Take { incarnation, until } => (incarnation, until),
        };
        let row = CellRow {
            capacity,
            handoff_capable,
            incarnation,
        };
        self.upsert_cell(cell, row)
            .map_err(|_| StartRefusal::TooManyCells)?;
        self.leases.insert(cell, until);
        Ok(incarnation)
    }

    /// HO-L2: the running process `incarnation` keeps its cell for another `lease_ms`
    /// ([`cell_lease_renewal`]): the new end of the lease, or the cell is lost.
    pub fn renew_cell_lease(
        &mut self,
        cell: CellId,
        incarnation: Incarnation,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<MonoMs, LeaseLost> {
        let until = cell_lease_renewal(self.lease_of(cell), incarnation, now, lease_ms)?;
        self.leases.insert(cell, until);
        Ok(until)
    }

    /// HO-L2: a graceful stop ends the lease ([`cell_lease_release`]).
    pub fn release_cell_lease(
        &mut self,
        cell: CellId,
        incarnation: Incarnation,
    ) -> Result<(), LeaseLost> {
        let until = cell_lease_release(self.lease_of(cell), incarnation)?;
        self.leases.insert(cell, until);
        Ok(())
    }

    /// HO-L2: a cell's incarnation and the end of its lease (zero: never leased, as a SQL row
    /// defaults to), as a store reads them under the cell's lock.
    #[must_use]
    pub fn lease_of(&self, cell: CellId) -> Option<(Incarnation, MonoMs)> {
        self.cells.get(&cell).map(|row| {
            let until = self.leases.get(&cell).copied().unwrap_or(MonoMs::ZERO);
            (row.incarnation, until)
        })
    }

    /// Setup and enrolment: assign a new host to `cell`, running the [`EnrolPlan`].
    pub fn insert_host(
        &mut self,
        host: HostId,
        cell: CellId,
        desktop_capable: bool,
    ) -> Result<SourceAuthority, StoreError> {
        let mut plan = EnrolPlan::new(host, cell, desktop_capable, 1);
        for _ in 0..MAX_PLAN_STEPS {
            let input = match plan.poll() {
                EnrolStep::Begin => EnrolInput::Begun,
                EnrolStep::ReadCell { cell } => EnrolInput::Cell(self.cells.get(&cell).copied()),
                EnrolStep::LockHost { host } => {
                    EnrolInput::Host(self.assignments.get(&host).copied())
                }
                // No shards: no token (see the module doc), so the exact path decides.
                EnrolStep::LockAnyShard { .. } | EnrolStep::LockShard { .. } => {
                    EnrolInput::Shard(Some((0, ShardRow::default())))
                }
                EnrolStep::ReadCellTokens { .. } => EnrolInput::CellTokens { own: 0, others: 0 },
                EnrolStep::ToSavepoint => EnrolInput::AtSavepoint,
                EnrolStep::LockAllShards => EnrolInput::Shards(vec![self.exact_shard()]),
                EnrolStep::ReadSettings => EnrolInput::Settings(self.config),
                EnrolStep::InsertHost { host, row } => {
                    let fresh = !self.assignments.contains_key(&host);
                    if fresh {
                        self.assignments.insert(host, row);
                    }
                    EnrolInput::Inserted(fresh)
                }
                // The counts are the maps themselves: nothing more to write.
                EnrolStep::SpendEnrolment { .. } | EnrolStep::WriteEnrolExact { .. } => {
                    EnrolInput::Written
                }
                EnrolStep::Commit => EnrolInput::Committed,
                EnrolStep::Done(answer) => return answer,
                EnrolStep::Failed(_) => break,
            };
            plan.handle(input);
        }
        crate::invariant!(false, "the enrolment plan ends within its steps");
        Err(StoreError::TooManyHosts)
    }

    #[must_use]
    pub fn cell(&self, cell: CellId) -> Option<&CellRow> {
        self.cells.get(&cell)
    }

    #[must_use]
    pub fn assignment(&self, host: HostId) -> Option<&AssignmentRow> {
        self.assignments.get(&host)
    }

    /// The current exact authority of a host.
    #[must_use]
    pub fn authority(&self, host: HostId) -> Option<SourceAuthority> {
        self.assignments.get(&host).map(|r| authority_of(host, r))
    }

    #[must_use]
    pub fn attempt(&self, op_id: OpId) -> Option<&AttemptRow> {
        self.attempts.get(&op_id)
    }

    #[must_use]
    pub fn reservation(&self, op_id: OpId) -> Option<&ReservationRow> {
        self.reservations.get(&op_id)
    }

    pub fn reservations(&self) -> impl Iterator<Item = (&OpId, &ReservationRow)> {
        self.reservations.iter()
    }

    pub fn attempts(&self) -> impl Iterator<Item = (&OpId, &AttemptRow)> {
        self.attempts.iter()
    }

    #[must_use]
    pub fn cooldown_until(&self, host: HostId) -> Option<MonoMs> {
        self.cooldowns.get(&host).copied()
    }

    #[must_use]
    pub fn rate(&self) -> RateRow {
        self.rate
    }

    /// Hosts assigned to `cell` (committed moves count at once: the target's slot is taken
    /// at commit).
    #[must_use]
    pub fn cell_load(&self, cell: CellId) -> u32 {
        let n = self.assignments.values().filter(|r| r.cell == cell).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The one virtual limit shard the reference answers the exact path with: the exact
    /// totals of its maps, no tokens.
    fn exact_shard(&self) -> ShardRow {
        let n = |len: usize| i64::try_from(len).unwrap_or(i64::MAX);
        ShardRow {
            window_start: self.rate.window_start,
            commits: i64::from(self.rate.commits),
            in_flight: n(self.reservations.len()),
            attempt_rows: n(self.attempts.len()),
            hosts: n(self.assignments.len()),
            ..ShardRow::default()
        }
    }

    /// HO-S4: the bounded assignment transaction, running the [`CommitPlan`]: re-checks the op
    /// id, the exact authority and the director's policy; then, atomically, reserves the
    /// target, moves the assignment (epoch + 1), starts the host cooldown, counts the rate
    /// window and records the attempt. HO-A1: an op id already recorded returns the recorded
    /// result and never migrates twice. The token path is answered "no token", so the exact
    /// path decides on the maps' totals.
    pub fn run_transaction(&mut self, now: MonoMs, req: &HandoffRequest) -> TxnOutcome {
        let mut plan = CommitPlan::new(now, req, 1);
        let host = req.source.host;
        for _ in 0..MAX_PLAN_STEPS {
            let input = match plan.poll() {
                CommitStep::Begin => CommitInput::Begun,
                CommitStep::LockHost { host } => {
                    CommitInput::Host(self.assignments.get(&host).copied())
                }
                CommitStep::ReadFacts => CommitInput::Facts(CommitRead {
                    recorded: self.attempts.get(&req.op_id).copied(),
                    config: self.config,
                    target_cell: self.cells.get(&req.target).copied(),
                    target_lease_until: self
                        .lease_of(req.target)
                        .map_or(MonoMs::ZERO, |(_, until)| until),
                    source_cell_capable: self
                        .cells
                        .get(&req.source.cell)
                        .is_some_and(|c| c.handoff_capable),
                    cooldown_until: self.cooldowns.get(&host).copied(),
                    migration_pending: self.reservations.values().any(|r| r.host == host),
                }),
                // No shards: no token (see the module doc), so the exact path decides.
                CommitStep::LockAnyShard { .. } | CommitStep::LockShard { .. } => {
                    CommitInput::Shard(Some((0, ShardRow::default())))
                }
                CommitStep::ToSavepoint => CommitInput::AtSavepoint,
                CommitStep::LockAllShards => CommitInput::Shards(vec![self.exact_shard()]),
                CommitStep::ReadSettings => CommitInput::Settings(self.config),
                CommitStep::ReadTarget { cell } => CommitInput::Target(
                    self.cells
                        .get(&cell)
                        .map(|row| (*row, i64::from(self.cell_load(cell)))),
                ),
                CommitStep::WriteCommit { writes, limits } => {
                    crate::invariant!(
                        matches!(limits, LimitWrites::Rebalance { .. }),
                        "the reference has no tokens to spend"
                    );
                    // All checks passed: write every row (nothing before wrote).
                    self.assignments.insert(host, writes.assignment);
                    self.reservations.insert(req.op_id, writes.reservation);
                    self.attempts.insert(req.op_id, writes.attempt);
                    self.cooldowns.insert(host, writes.cooldown_until);
                    self.rate = writes.rate;
                    CommitInput::Written { target_tokens: 0 }
                }
                CommitStep::Commit => {
                    crate::invariant_eq!(self.check_invariants(), Ok(()));
                    CommitInput::Committed
                }
                CommitStep::Done(outcome) => return outcome,
                CommitStep::Failed(_) => break,
            };
            plan.handle(input);
        }
        crate::invariant!(false, "the commit plan ends within its steps");
        TxnOutcome::RolledBack {
            reason: AbortReason::StoreFull,
        }
    }

    /// HO-A1 / HO-A2: locked reconciliation by op id, running the [`ReconcilePlan`]. Returns
    /// the recorded outcome; if no attempt exists, writes a terminal fence record first, so
    /// that a late original commit of this op id fails its re-check. `None` means the fence
    /// could not be written (store full): the caller stays quarantined.
    pub fn reconcile(&mut self, now: MonoMs, req: &HandoffRequest) -> Option<TxnOutcome> {
        let mut plan = ReconcilePlan::new(now, req, 1);
        let host = req.source.host;
        for _ in 0..MAX_PLAN_STEPS {
            let input = match plan.poll() {
                ReconcileStep::Begin => ReconcileInput::Begun,
                ReconcileStep::LockHost { host } => {
                    ReconcileInput::Host(self.assignments.get(&host).copied())
                }
                ReconcileStep::ReadAttempt { op } => {
                    ReconcileInput::Attempt(self.attempts.get(&op).copied())
                }
                ReconcileStep::LockAllShards => ReconcileInput::Shards(vec![self.exact_shard()]),
                ReconcileStep::ReadSettings => ReconcileInput::Settings(self.config),
                ReconcileStep::WriteFence { writes, .. } => {
                    self.attempts.insert(req.op_id, writes.attempt);
                    if let Some(row) = writes.assignment {
                        self.assignments.insert(host, row);
                    }
                    ReconcileInput::Written
                }
                ReconcileStep::Commit => {
                    crate::invariant_eq!(self.check_invariants(), Ok(()));
                    ReconcileInput::Committed
                }
                ReconcileStep::Done(answer) => return answer,
                ReconcileStep::Failed(_) => break,
            };
            plan.handle(input);
        }
        crate::invariant!(false, "the reconcile plan ends within its steps");
        None
    }

    /// HO-A4 / HO-A6: a desktop control registers at `cell` (replacement control, source
    /// restart, or arrival at the target), serialised with the handoff under the host lock,
    /// running the [`RegisterPlan`]. Bumps the generation (a pending handoff of the old
    /// generation then fails its re-check) and completes a pending migration to this cell
    /// (its reservation is released).
    pub fn register_control(
        &mut self,
        now: MonoMs,
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        desktop_capable: bool,
    ) -> Result<SourceAuthority, RegisterRefusal> {
        let _ = now;
        let mut plan = RegisterPlan::new(host, cell, incarnation, desktop_capable);
        // Each reservation of the host adds one step; a host holds at most one.
        let bound = MAX_PLAN_STEPS + self.reservations.len();
        for _ in 0..bound {
            let input = match plan.poll() {
                RegisterStep::Begin => RegisterInput::Begun,
                RegisterStep::LockHost { host } => {
                    RegisterInput::Host(self.assignments.get(&host).copied())
                }
                RegisterStep::ReadCell { cell } | RegisterStep::LockCell { cell, .. } => {
                    RegisterInput::Cell(self.cells.get(&cell).copied())
                }
                RegisterStep::WriteCellIncarnation { cell, incarnation } => {
                    if let Some(c) = self.cells.get_mut(&cell) {
                        c.incarnation = incarnation;
                    }
                    RegisterInput::Written
                }
                RegisterStep::WriteAssignment { host, row } => {
                    self.assignments.insert(host, row);
                    RegisterInput::Written
                }
                RegisterStep::ReadReservations { host, cell } => RegisterInput::Reservations(
                    self.reservations
                        .iter()
                        .filter(|(_, r)| r.host == host && r.cell == cell)
                        .map(|(op, _)| *op)
                        .collect(),
                ),
                RegisterStep::FinishReservation { op, registration } => {
                    self.reservations.remove(&op);
                    self.set_registration(op, registration);
                    RegisterInput::Written
                }
                RegisterStep::Commit => {
                    crate::invariant_eq!(self.check_invariants(), Ok(()));
                    RegisterInput::Committed
                }
                RegisterStep::Done(answer) => return answer,
                RegisterStep::Failed(_) => break,
            };
            plan.handle(input);
        }
        crate::invariant!(false, "the register plan ends within its steps");
        Err(RegisterRefusal::UnknownHost)
    }

    fn set_registration(&mut self, op: OpId, registration: Registration) {
        if let Some(AttemptRow {
            outcome: AttemptOutcome::Committed {
                registration: r, ..
            },
            ..
        }) = self.attempts.get_mut(&op)
        {
            crate::invariant_eq!(*r, Registration::Pending);
            *r = registration;
        } else {
            crate::invariant!(false, "reservation without a committed attempt");
        }
    }

    /// HO-A5: emergency drain / auth enforcement joins the host-lock serialisation, running
    /// the [`DrainPlan`]: if the claimed authority is current, bump the generation so any
    /// pending handoff of it fails.
    pub fn emergency_drain(&mut self, authority: &SourceAuthority) -> DrainWrite {
        let mut plan = DrainPlan::new(authority);
        for _ in 0..MAX_PLAN_STEPS {
            let input = match plan.poll() {
                DrainStep::Begin => DrainInput::Begun,
                DrainStep::LockHost { host } => {
                    DrainInput::Host(self.assignments.get(&host).copied())
                }
                DrainStep::WriteGeneration { host, generation } => {
                    if let Some(row) = self.assignments.get_mut(&host) {
                        row.generation = generation;
                    }
                    DrainInput::Written
                }
                DrainStep::Commit => DrainInput::Committed,
                DrainStep::Done(answer) => return answer,
                DrainStep::Failed(_) => break,
            };
            plan.handle(input);
        }
        crate::invariant!(false, "the drain plan ends within its steps");
        DrainWrite::NotCurrent
    }

    /// HO-A6: ordinary bounded migration recovery: reservations whose desktop has not
    /// registered at the target by `expires_at` are released (at most
    /// `MAX_EXPIRED_PER_CALL` per call). The assignment stays at the target.
    pub fn expire_migrations(&mut self, now: MonoMs) -> Vec<OpId> {
        self.expire_migrations_up_to(now, MAX_EXPIRED_PER_CALL)
    }

    /// HO-A6 / HO-L4: [`Self::expire_migrations`] with the bound given (the director's
    /// `--max-expired-per-pass`): at most `max` expired reservations, in op-id order.
    pub fn expire_migrations_up_to(&mut self, now: MonoMs, max: usize) -> Vec<OpId> {
        let expired: Vec<OpId> = self
            .reservations
            .iter()
            .filter(|(_, r)| r.expires_at <= now)
            .map(|(op, _)| *op)
            .take(max)
            .collect();
        for op in &expired {
            self.reservations.remove(op);
            self.set_registration(*op, Registration::RecoveryStarted);
        }
        crate::invariant_eq!(self.check_invariants(), Ok(()));
        expired
    }

    /// HO-L4: remove at most `batch` ended attempt records recorded at or before
    /// `now - retention_ms`, oldest first, running the [`ReapPlan`]: the number removed, or
    /// the retention refused (it must exceed the registration timeout in the settings and
    /// the 1 h floor: `check_retention`). Pending commits are never removed. The attempt
    /// count is the map itself, so it falls with the rows.
    pub fn reap_attempts(
        &mut self,
        now: MonoMs,
        retention_ms: u64,
        batch: u32,
    ) -> Result<u32, RetentionError> {
        let mut plan = ReapPlan::new(now, retention_ms, batch);
        for _ in 0..MAX_PLAN_STEPS {
            let input = match plan.poll() {
                ReapStep::Begin => ReapInput::Begun,
                ReapStep::ReadSettings => ReapInput::Settings(self.config),
                ReapStep::DeleteEnded { cutoff, batch } => {
                    let gone = reap_selection(&self.attempts, cutoff, batch);
                    for op in &gone {
                        self.attempts.remove(op);
                    }
                    ReapInput::Deleted(u32::try_from(gone.len()).unwrap_or(u32::MAX))
                }
                // No shards (see the module doc): the count is the map.
                ReapStep::LockAnyShard { .. } | ReapStep::LockShard { .. } => {
                    ReapInput::Shard(Some((0, self.exact_shard())))
                }
                ReapStep::WriteShard { .. } => ReapInput::Written,
                ReapStep::Commit => {
                    crate::invariant_eq!(self.check_invariants(), Ok(()));
                    ReapInput::Committed
                }
                ReapStep::Done(answer) => return answer,
                ReapStep::Failed(_) => break,
            };
            plan.handle(input);
        }
        crate::invariant!(false, "the reap plan ends within its steps");
        Ok(0)
    }

    /// Store invariants: every reservation belongs to exactly one committed, unregistered
    /// migration at the host's assigned cell, and vice versa; bounds hold.
    pub fn check_invariants(&self) -> Result<(), StoreViolation> {
        let mut hosts_with_reservation = std::collections::BTreeSet::new();
        for (op, res) in &self.reservations {
            let Some(attempt) = self.attempts.get(op) else {
                return Err(StoreViolation::ReservationWithoutPendingCommit(*op));
            };
            let pending = matches!(
                attempt.outcome,
                AttemptOutcome::Committed {
                    registration: Registration::Pending,
                    ..
                }
            );
            if !pending || attempt.source.host != res.host || attempt.target != res.cell {
                return Err(StoreViolation::ReservationWithoutPendingCommit(*op));
            }
            if self.assignments.get(&res.host).map(|r| r.cell) != Some(res.cell) {
                return Err(StoreViolation::ReservationNotAtAssignedCell(*op));
            }
            if !hosts_with_reservation.insert(res.host) {
                return Err(StoreViolation::TwoReservationsForHost(res.host));
            }
        }
        let limit = usize::try_from(self.config.max_in_flight_migrations).unwrap_or(usize::MAX);
        if self.reservations.len() > limit {
            return Err(StoreViolation::TooManyReservations);
        }
        for (op, attempt) in &self.attempts {
            if let AttemptOutcome::Committed {
                new_epoch,
                registration,
            } = attempt.outcome
            {
                if registration == Registration::Pending && !self.reservations.contains_key(op) {
                    return Err(StoreViolation::PendingCommitWithoutReservation(*op));
                }
                let current = self.assignments.get(&attempt.source.host).map(|r| r.epoch);
                if current.is_none_or(|e| e < new_epoch) {
                    return Err(StoreViolation::CommitEpochAhead(*op));
                }
            }
        }
        for (host, row) in &self.assignments {
            if !self.cells.contains_key(&row.cell) {
                return Err(StoreViolation::AssignmentToUnknownCell(*host));
            }
        }
        Ok(())
    }
}

/// A map's length as the `u64` a SQL count is (saturating: a length never exceeds it).
fn count(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}
