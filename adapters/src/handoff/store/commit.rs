//! HO-S4: the bounded assignment transaction, and HO-A1 / HO-A2: the locked reconciliation:
//! executors of the core's `CommitPlan` and `ReconcilePlan`
//! (`switchyard_core::handoff::store`). Each is a loop that runs the step the plan asks
//! for (the statements below) and feeds the result back; which rows are read, checked and
//! written, and when, is the plan's.

use std::sync::LazyLock;

use switchyard_core::handoff::escrow::{Rebalance, ShardRow};
use switchyard_core::handoff::store::{
    AssignmentRow, AttemptRow, CommitInput, CommitPlan, CommitRead, CommitStep, CommitWrites,
    FenceWrites, LimitWrites, ReconcileInput, ReconcilePlan, ReconcileStep, StoreFault, TxnOutcome,
};
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::{CellId, OpId};
use switchyard_core::MonoMs;

use super::codec::{
    attempt_of, cell_row_of, config_of, flag, get, i, no_settings, op_text, u, AnyQuery,
    AttemptBinds,
};
use super::shards::{bind_rebalance, bind_split, load_rebalance_set, rebalance_set};
use super::{in_txn, Dialect, SqlStore, StoreFailure, Txn};

/// A write that must touch exactly one row. Anything else fails the transaction (it is dropped,
/// so rolled back; reported as ambiguous like every error inside a transaction).
fn one_row(rows: u64, what: &str) -> Result<(), StoreFailure> {
    if rows == 1 {
        Ok(())
    } else {
        Err(StoreFailure::InTransaction(format!(
            "{what} touched {rows} rows, expected 1"
        )))
    }
}

impl SqlStore {
    async fn attempt_in(tx: &mut Txn, op: OpId) -> Result<Option<AttemptRow>, StoreFailure> {
        let row = sqlx::query(
            "SELECT host, src_cell, src_epoch, src_incarnation, src_generation, target, outcome, \
             new_epoch, registration, recorded_at_ms FROM ho_attempts WHERE op_id = $1",
        )
        .bind(op_text(op))
        .fetch_optional(&mut **tx)
        .await
        .map_err(in_txn)?;
        row.map(|r| attempt_of(&r)).transpose()
    }

    /// HO-S4 / HO-A1: everything `run_transaction` reads under the host lock, in one statement
    /// that starts after the lock was granted (so it sees every transaction that held the lock
    /// before): the attempt recorded for the op id, the settings, the target and source cells,
    /// the host's cooldown and its pending reservation. `host` is `None` for an id no row can
    /// have.
    async fn txn_facts_in(
        tx: &mut Txn,
        req: &HandoffRequest,
        host: Option<i64>,
    ) -> Result<CommitRead, StoreFailure> {
        let row = sqlx::query(
            "SELECT s.enabled, s.freshness_window_ms, s.host_cooldown_ms, \
             s.max_in_flight_migrations, s.rate_window_ms, s.max_commits_per_window, \
             s.registration_timeout_ms, s.max_hosts, s.max_cells, s.max_attempt_rows, \
             t.op_id AS attempt_op, t.host, t.src_cell, t.src_epoch, t.src_incarnation, \
             t.src_generation, t.target, t.outcome, t.new_epoch, t.registration, \
             t.recorded_at_ms, \
             tc.capacity, tc.handoff_capable, tc.incarnation, tc.lease_until AS tgt_lease_until, \
             sc.handoff_capable AS src_capable, cd.until_ms, r.op_id AS pending_op \
             FROM ho_settings s \
             LEFT JOIN ho_attempts t ON t.op_id = $1 \
             LEFT JOIN ho_cells tc ON tc.cell = $2 \
             LEFT JOIN ho_cells sc ON sc.cell = $3 \
             LEFT JOIN ho_cooldowns cd ON cd.host = $4 \
             LEFT JOIN ho_reservations r ON r.host = $4 \
             WHERE s.id = 1",
        )
        .bind(op_text(req.op_id))
        .bind(i64::from(req.target.0))
        .bind(i64::from(req.source.cell.0))
        .bind(host)
        .fetch_optional(&mut **tx)
        .await
        .map_err(in_txn)?
        .ok_or_else(no_settings)?;
        let recorded = match get::<Option<String>>(&row, "attempt_op")? {
            Some(_) => Some(attempt_of(&row)?),
            None => None,
        };
        let target_cell = match get::<Option<i64>>(&row, "capacity")? {
            Some(_) => Some(cell_row_of(&row)?),
            None => None,
        };
        // HO-L3: the target's lease, read with its row (zero: never leased, or unknown).
        let target_lease_until = match get::<Option<i64>>(&row, "tgt_lease_until")? {
            Some(v) => MonoMs(u(v, "lease_until")?),
            None => MonoMs::ZERO,
        };
        let source_cell_capable = match get::<Option<i64>>(&row, "src_capable")? {
            Some(v) => flag(v, "src_capable")?,
            None => false,
        };
        let cooldown_until = get::<Option<i64>>(&row, "until_ms")?
            .map(|v| u(v, "until_ms").map(MonoMs))
            .transpose()?;
        Ok(CommitRead {
            recorded,
            config: config_of(&row)?,
            target_cell,
            target_lease_until,
            source_cell_capable,
            cooldown_until,
            migration_pending: get::<Option<String>>(&row, "pending_op")?.is_some(),
        })
    }

    /// HO-A1 / HO-A2: write a reconciliation's fence ([`FenceWrites`]: the attempt record and,
    /// if the fence changes it, the host's assignment) and the shards' rows after it (`r`:
    /// every shard is locked): one statement on PostgreSQL, a statement per table on SQLite.
    async fn write_fence(
        &self,
        tx: &mut Txn,
        op: OpId,
        w: &FenceWrites,
        r: &Rebalance,
    ) -> Result<(), StoreFailure> {
        let a = AttemptBinds::of(op, &w.attempt)?;
        let host = i(w.attempt.source.host.0, "host")?;
        let assignment = |q: AnyQuery<'static>, row: &AssignmentRow| {
            Ok::<_, StoreFailure>(
                q.bind(i64::from(row.cell.0))
                    .bind(i(row.epoch.0, "epoch")?)
                    .bind(i(row.incarnation.0, "incarnation")?)
                    .bind(i(row.generation.0, "generation")?)
                    .bind(i64::from(row.desktop_capable)),
            )
        };
        let shards = u64::from(self.shards);
        match (self.dialect, &w.assignment) {
            (Dialect::Postgres, None) => {
                self.statements.sent(1);
                let q = bind_rebalance(a.bind(sqlx::query(PG_FENCE.as_str())), r)?;
                let done = q.execute(&mut **tx).await.map_err(in_txn)?;
                rows_are(done.rows_affected(), shards, "fence write")
            }
            (Dialect::Postgres, Some(row)) => {
                self.statements.sent(1);
                let q = assignment(a.bind(sqlx::query(PG_FENCE_RENEWED.as_str())), row)?;
                let done = bind_rebalance(q, r)?
                    .execute(&mut **tx)
                    .await
                    .map_err(in_txn)?;
                rows_are(done.rows_affected(), shards, "fence write")
            }
            (Dialect::Sqlite, _) => {
                self.statements
                    .sent(if w.assignment.is_some() { 3 } else { 2 });
                let q = sqlx::query(
                    "INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, src_incarnation, \
                     src_generation, target, outcome, new_epoch, registration, recorded_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                );
                let done = a.bind(q).execute(&mut **tx).await.map_err(in_txn)?;
                one_row(done.rows_affected(), "fence insert")?;
                if let Some(row) = &w.assignment {
                    let q = sqlx::query(
                        "UPDATE ho_assignments SET cell = $1, epoch = $2, incarnation = $3, \
                         generation = $4, desktop_capable = $5 WHERE host = $6",
                    );
                    let q = assignment(q, row)?.bind(host);
                    let done = q.execute(&mut **tx).await.map_err(in_txn)?;
                    one_row(done.rows_affected(), "fence assignment")?;
                }
                let done = bind_rebalance(sqlx::query(SQLITE_REBALANCE.as_str()), r)?
                    .execute(&mut **tx)
                    .await
                    .map_err(in_txn)?;
                rows_are(done.rows_affected(), shards, "limit shards")
            }
        }
    }

    /// HO-S4: write every row of a commit (`commit_writes`) and its count against the limits
    /// (`limits`). Token path: returns the host tokens the target cell had on the locked shard
    /// before this write (read in the same statement on PostgreSQL, whose snapshot started
    /// after the shard lock; `0` if it has no row): the caller decides with `fast_commit` and
    /// drops the transaction (rolls the writes back) if there was none. PostgreSQL: one
    /// data-modifying statement. SQLite: a statement per table (embedded: no round trips).
    async fn write_commit(
        &self,
        tx: &mut Txn,
        op: OpId,
        w: &CommitWrites,
        source: CellId,
        limits: &LimitWrites,
    ) -> Result<u64, StoreFailure> {
        let host = i(w.reservation.host.0, "host")?;
        let target = i64::from(w.assignment.cell.0);
        let source = i64::from(source.0);
        let a = AttemptBinds::of(op, &w.attempt)?;
        let counted_on = match limits {
            LimitWrites::Spend { shard, .. } => i64::from(*shard),
            LimitWrites::Rebalance { .. } => 0,
        };
        let assignment = |q: AnyQuery<'static>| -> Result<AnyQuery<'static>, StoreFailure> {
            Ok(q.bind(target)
                .bind(i(w.assignment.epoch.0, "epoch")?)
                .bind(i(w.assignment.incarnation.0, "incarnation")?)
                .bind(i(w.assignment.generation.0, "generation")?)
                .bind(i64::from(w.assignment.desktop_capable))
                .bind(host))
        };
        let reservation = |q: AnyQuery<'static>| -> Result<AnyQuery<'static>, StoreFailure> {
            Ok(q.bind(op_text(op))
                .bind(host)
                .bind(i64::from(w.reservation.cell.0))
                .bind(i(w.reservation.expires_at.0, "expires_at")?)
                .bind(counted_on))
        };
        let cooldown = i(w.cooldown_until.0, "cooldown")?;
        let spent =
            |q: AnyQuery<'static>, row: &ShardRow| -> Result<AnyQuery<'static>, StoreFailure> {
                Ok(q.bind(row.commits)
                    .bind(row.in_flight)
                    .bind(row.attempt_rows)
                    .bind(i(row.commit_tokens, "commit_tokens")?)
                    .bind(i(row.in_flight_tokens, "in_flight_tokens")?)
                    .bind(i(row.attempt_tokens, "attempt_tokens")?))
            };
        let shards = i64::from(self.shards);
        match self.dialect {
            Dialect::Postgres => {
                let (sql, expected) = match limits {
                    LimitWrites::Spend { .. } => (PG_COMMIT_SPEND.as_str(), 7),
                    LimitWrites::Rebalance { .. } => (PG_COMMIT_REBALANCE.as_str(), 5 + 2 * shards),
                };
                let q = a.bind(reservation(assignment(sqlx::query(sql))?)?);
                let q = q.bind(host).bind(cooldown);
                let q = match limits {
                    LimitWrites::Spend { shard, row } => spent(q.bind(i64::from(*shard)), row)?
                        .bind(target)
                        .bind(source),
                    LimitWrites::Rebalance {
                        rebalance,
                        target_hosts,
                        target_tokens,
                    } => {
                        let q = bind_rebalance(q, rebalance)?
                            .bind(target)
                            .bind(i64::from(*target_hosts));
                        bind_split(q, *target_tokens)?.bind(source)
                    }
                };
                self.statements.sent(1);
                let row = q.fetch_one(&mut **tx).await.map_err(in_txn)?;
                let tokens = get::<Option<i64>>(&row, "target_tokens")?;
                if matches!(limits, LimitWrites::Spend { .. }) && tokens.unwrap_or(0) <= 0 {
                    // No token: the caller rolls this back before looking at what it wrote.
                    return Ok(0);
                }
                let written: i64 = get(&row, "written")?;
                if written != expected {
                    return Err(StoreFailure::InTransaction(format!(
                        "commit wrote {written} of {expected} rows"
                    )));
                }
                Ok(tokens.map_or(0, |t| u64::try_from(t).unwrap_or(0)))
            }
            Dialect::Sqlite => {
                let mut tokens = 0;
                if let LimitWrites::Spend { shard, .. } = limits {
                    self.statements.sent(1);
                    let row = sqlx::query(
                        "SELECT tokens FROM ho_cell_load WHERE cell = $1 AND shard = $2",
                    )
                    .bind(target)
                    .bind(i64::from(*shard))
                    .fetch_optional(&mut **tx)
                    .await
                    .map_err(in_txn)?;
                    tokens = match row {
                        Some(r) => u64::try_from(get::<i64>(&r, "tokens")?).unwrap_or(0),
                        None => 0,
                    };
                    if tokens == 0 {
                        return Ok(0);
                    }
                }
                let mut statements: Vec<(&str, AnyQuery<'static>, i64)> = vec![
                    (
                        "assignment update",
                        assignment(sqlx::query(
                            "UPDATE ho_assignments SET cell = $1, epoch = $2, incarnation = $3, \
                             generation = $4, desktop_capable = $5 WHERE host = $6",
                        ))?,
                        1,
                    ),
                    (
                        "reservation insert",
                        reservation(sqlx::query(
                            "INSERT INTO ho_reservations (op_id, host, cell, expires_at_ms, shard) \
                             VALUES ($1, $2, $3, $4, $5)",
                        ))?,
                        1,
                    ),
                    (
                        "attempt insert",
                        a.bind(sqlx::query(
                            "INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, \
                             src_incarnation, src_generation, target, outcome, new_epoch, \
                             registration, recorded_at_ms) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                        )),
                        1,
                    ),
                    (
                        "cooldown upsert",
                        sqlx::query(
                            "INSERT INTO ho_cooldowns (host, until_ms) VALUES ($1, $2) \
                             ON CONFLICT (host) DO UPDATE SET until_ms = excluded.until_ms",
                        )
                        .bind(host)
                        .bind(cooldown),
                        1,
                    ),
                    (
                        "source load",
                        sqlx::query(
                            "UPDATE ho_cell_load SET hosts = hosts - 1 WHERE cell = $1 \
                             AND shard = $2",
                        )
                        .bind(source)
                        .bind(counted_on),
                        1,
                    ),
                ];
                match limits {
                    LimitWrites::Spend { shard, row } => {
                        statements.push((
                            "limit shard",
                            spent(
                                sqlx::query(
                                    "UPDATE ho_limit_shards SET commits = $1, in_flight = $2, \
                                     attempt_rows = $3, commit_tokens = $4, \
                                     in_flight_tokens = $5, attempt_tokens = $6 WHERE shard = $7",
                                ),
                                row,
                            )?
                            .bind(i64::from(*shard)),
                            1,
                        ));
                        statements.push((
                            "target load",
                            sqlx::query(
                                "UPDATE ho_cell_load SET hosts = hosts + 1, tokens = tokens - 1 \
                                 WHERE cell = $1 AND shard = $2",
                            )
                            .bind(target)
                            .bind(i64::from(*shard)),
                            1,
                        ));
                    }
                    LimitWrites::Rebalance {
                        rebalance,
                        target_hosts,
                        target_tokens,
                    } => {
                        statements.push((
                            "limit shards",
                            bind_rebalance(sqlx::query(SQLITE_REBALANCE.as_str()), rebalance)?,
                            shards,
                        ));
                        let q = sqlx::query(SQLITE_LOAD_REBALANCE.as_str())
                            .bind(target)
                            .bind(i64::from(*target_hosts));
                        statements.push(("target load", bind_split(q, *target_tokens)?, shards));
                    }
                }
                for (what, q, expected) in statements {
                    self.statements.sent(1);
                    let done = q.execute(&mut **tx).await.map_err(in_txn)?;
                    rows_are(
                        done.rows_affected(),
                        u64::try_from(expected).unwrap_or(0),
                        what,
                    )?;
                }
                Ok(tokens)
            }
        }
    }

    // ----- HO-S4: the bounded assignment transaction -----

    /// HO-S4 / HO-A1: reference `run_transaction`, as one bounded SQL transaction: this
    /// executes the core's [`CommitPlan`] step by step (the order, the checks and the token
    /// or exact path are the plan's). One round trip per step on PostgreSQL (the savepoint and
    /// the shard lock share one; the commit's rows are one data-modifying statement); SQLite
    /// runs a statement per table where PostgreSQL has one (embedded: no round trips).
    pub async fn run_transaction(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<TxnOutcome, StoreFailure> {
        let plan = CommitPlan::new(now, req, self.shards);
        if let CommitStep::Done(answer) = plan.poll() {
            // Answered before any transaction (an inconsistent op id).
            return Ok(answer);
        }
        self.faults.before_begin.reached().await;
        if self.faults.take_begin_failure() {
            return Err(StoreFailure::Unavailable("injected: begin failed".into()));
        }
        let lose = self.faults.take_lost_result();
        let result = self.bounded(self.execute_commit(plan, req)).await;
        match result {
            Ok(outcome) if lose => Err(StoreFailure::CommitLost(format!(
                "injected: result of {outcome:?} lost"
            ))),
            other => other,
        }
    }

    /// The executor of a [`CommitPlan`]: run each step, feed its result back.
    async fn execute_commit(
        &self,
        mut plan: CommitPlan,
        req: &HandoffRequest,
    ) -> Result<TxnOutcome, StoreFailure> {
        let d = self.dialect;
        let sent = |n: u64| self.statements.sent(n);
        let mut tx: Option<Txn> = None;
        loop {
            let input = match plan.poll() {
                CommitStep::Begin => {
                    sent(1);
                    tx = Some(self.begin().await?);
                    CommitInput::Begun
                }
                CommitStep::LockHost { host } => {
                    sent(1);
                    let locked = Self::lock_host(open(&mut tx)?, d, host).await?;
                    if let Some((reached, resume)) = self.faults.take_pause() {
                        let _ = reached.send(());
                        // Held under the lock until the test lets go (or the timeout fires).
                        let _ = resume.await;
                    }
                    CommitInput::Host(locked.map(|l| l.row))
                }
                CommitStep::ReadFacts => {
                    sent(1);
                    let host = i64::try_from(req.source.host.0).ok();
                    CommitInput::Facts(Self::txn_facts_in(open(&mut tx)?, req, host).await?)
                }
                CommitStep::LockAnyShard { hint } => {
                    sent(if d == Dialect::Postgres { 1 } else { 2 });
                    CommitInput::Shard(Self::lock_free_shard(open(&mut tx)?, d, hint).await?)
                }
                CommitStep::LockShard { shard } => {
                    sent(1);
                    CommitInput::Shard(Some(Self::lock_shard(open(&mut tx)?, d, shard).await?))
                }
                CommitStep::WriteCommit { writes, limits } => {
                    let target_tokens = self
                        .write_commit(open(&mut tx)?, req.op_id, &writes, req.source.cell, &limits)
                        .await?;
                    CommitInput::Written { target_tokens }
                }
                CommitStep::ToSavepoint => {
                    sent(1);
                    Self::leave_token_path(open(&mut tx)?).await?;
                    CommitInput::AtSavepoint
                }
                CommitStep::LockAllShards => {
                    sent(1);
                    CommitInput::Shards(self.lock_all_shards(open(&mut tx)?).await?)
                }
                CommitStep::ReadSettings => {
                    sent(1);
                    CommitInput::Settings(Self::settings_in(open(&mut tx)?).await?)
                }
                CommitStep::ReadTarget { cell } => {
                    sent(1);
                    CommitInput::Target(self.cell_now_in(open(&mut tx)?, cell).await?)
                }
                CommitStep::Commit => {
                    sent(1);
                    Self::commit(take(&mut tx)?).await?;
                    CommitInput::Committed
                }
                // Dropping an open transaction rolls it back: an early answer wrote nothing.
                CommitStep::Done(answer) => return Ok(answer),
                CommitStep::Failed(fault) => return Err(failed(fault)),
            };
            plan.handle(input);
        }
    }

    // ----- HO-A1 / HO-A2: locked reconciliation -----

    /// Reference `reconcile`: executes the core's [`ReconcilePlan`] under the host lock.
    /// `Ok(None)`: the fence could not be written (store full): stay quarantined.
    pub async fn reconcile(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<Option<TxnOutcome>, StoreFailure> {
        let mut plan = ReconcilePlan::new(now, req, self.shards);
        if let ReconcileStep::Done(answer) = plan.poll() {
            return Ok(answer);
        }
        if self.faults.take_begin_failure() {
            return Err(StoreFailure::Unavailable("injected: begin failed".into()));
        }
        self.bounded(async {
            let d = self.dialect;
            let sent = |n: u64| self.statements.sent(n);
            let mut tx: Option<Txn> = None;
            loop {
                let input = match plan.poll() {
                    ReconcileStep::Begin => {
                        sent(1);
                        tx = Some(self.begin().await?);
                        ReconcileInput::Begun
                    }
                    ReconcileStep::LockHost { host } => {
                        sent(1);
                        let locked = Self::lock_host(open(&mut tx)?, d, host).await?;
                        ReconcileInput::Host(locked.map(|l| l.row))
                    }
                    ReconcileStep::ReadAttempt { op } => {
                        sent(1);
                        ReconcileInput::Attempt(Self::attempt_in(open(&mut tx)?, op).await?)
                    }
                    ReconcileStep::LockAllShards => {
                        sent(1);
                        ReconcileInput::Shards(self.lock_all_shards(open(&mut tx)?).await?)
                    }
                    ReconcileStep::ReadSettings => {
                        sent(1);
                        ReconcileInput::Settings(Self::settings_in(open(&mut tx)?).await?)
                    }
                    ReconcileStep::WriteFence { writes, rebalance } => {
                        self.write_fence(open(&mut tx)?, req.op_id, &writes, &rebalance)
                            .await?;
                        ReconcileInput::Written
                    }
                    ReconcileStep::Commit => {
                        sent(1);
                        Self::commit(take(&mut tx)?).await?;
                        ReconcileInput::Committed
                    }
                    ReconcileStep::Done(answer) => return Ok(answer),
                    ReconcileStep::Failed(fault) => return Err(failed(fault)),
                };
                plan.handle(input);
            }
        })
        .await
    }
}

/// The open transaction of an executor (a plan asks for IO only after `Begin`).
pub(super) fn open(tx: &mut Option<Txn>) -> Result<&mut Txn, StoreFailure> {
    tx.as_mut()
        .ok_or_else(|| StoreFailure::InTransaction("plan step before BEGIN".into()))
}

/// The transaction to commit (the last step that uses it).
pub(super) fn take(tx: &mut Option<Txn>) -> Result<Txn, StoreFailure> {
    tx.take()
        .ok_or_else(|| StoreFailure::InTransaction("COMMIT without a transaction".into()))
}

/// A plan that ended in `Failed` (it refused what a step returned).
pub(super) fn failed(fault: StoreFault) -> StoreFailure {
    let detail = "the plan refused a step's result".to_owned();
    match fault {
        StoreFault::Unavailable => StoreFailure::Unavailable(detail),
        StoreFault::InTransaction => StoreFailure::InTransaction(detail),
        StoreFault::TimedOut => StoreFailure::TimedOut(detail),
        StoreFault::CommitLost => StoreFailure::CommitLost(detail),
        StoreFault::BadRow => StoreFailure::BadRow(detail),
    }
}

/// A write that must touch exactly `expected` rows.
fn rows_are(rows: u64, expected: u64, what: &str) -> Result<(), StoreFailure> {
    if rows == expected {
        Ok(())
    } else {
        Err(StoreFailure::InTransaction(format!(
            "{what} touched {rows} rows, expected {expected}"
        )))
    }
}

static SQLITE_REBALANCE: LazyLock<String> = LazyLock::new(|| rebalance_set(1));
static SQLITE_LOAD_REBALANCE: LazyLock<String> = LazyLock::new(|| load_rebalance_set(1));

const PG_COMMIT_ROWS: &str = "WITH moved AS (UPDATE ho_assignments SET cell = $1, epoch = $2, \
     incarnation = $3, generation = $4, desktop_capable = $5 WHERE host = $6 RETURNING host), \
     reserved AS (INSERT INTO ho_reservations (op_id, host, cell, expires_at_ms, shard) \
     VALUES ($7, $8, $9, $10, $11) RETURNING op_id), \
     recorded AS (INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, src_incarnation, \
     src_generation, target, outcome, new_epoch, registration, recorded_at_ms) \
     VALUES ($12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22) RETURNING op_id), \
     cooled AS (INSERT INTO ho_cooldowns (host, until_ms) VALUES ($23, $24) \
     ON CONFLICT (host) DO UPDATE SET until_ms = excluded.until_ms RETURNING host), ";

const PG_COMMIT_WRITTEN: &str = "(SELECT COUNT(*) FROM moved) + (SELECT COUNT(*) FROM reserved) \
     + (SELECT COUNT(*) FROM recorded) + (SELECT COUNT(*) FROM cooled) \
     + (SELECT COUNT(*) FROM counted) + (SELECT COUNT(*) FROM arrived) \
     + (SELECT COUNT(*) FROM departed) AS written";

/// HO-S4 token path, PostgreSQL: the commit's rows, the locked shard's row after the commit
/// ($25 the shard, $26..$31 its counts and tokens), the target's ($32) and the source's ($33)
/// load rows on that shard; and the target's tokens there as they were before.
static PG_COMMIT_SPEND: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{PG_COMMIT_ROWS}counted AS (UPDATE ho_limit_shards SET commits = $26, in_flight = $27, \
         attempt_rows = $28, commit_tokens = $29, in_flight_tokens = $30, attempt_tokens = $31 \
         WHERE shard = $25 RETURNING shard), \
         arrived AS (UPDATE ho_cell_load SET hosts = hosts + 1, tokens = tokens - 1 \
         WHERE cell = $32 AND shard = $25 RETURNING cell), \
         departed AS (UPDATE ho_cell_load SET hosts = hosts - 1 WHERE cell = $33 AND shard = $25 \
         RETURNING cell) \
         SELECT (SELECT tokens FROM ho_cell_load WHERE cell = $32 AND shard = $25) \
         AS target_tokens, {PG_COMMIT_WRITTEN}"
    )
});

/// HO-S4 exact path, PostgreSQL: the commit's rows, every shard rebalanced ($25..$34), the
/// target's load rows re-dealt ($35..$38) and the source's host subtracted on shard 0 ($39).
static PG_COMMIT_REBALANCE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{PG_COMMIT_ROWS}counted AS ({} RETURNING shard), arrived AS ({} RETURNING cell), \
         departed AS (UPDATE ho_cell_load SET hosts = hosts - 1 WHERE cell = $39 AND shard = 0 \
         RETURNING cell) \
         SELECT CAST(NULL AS BIGINT) AS target_tokens, {PG_COMMIT_WRITTEN}",
        rebalance_set(25),
        load_rebalance_set(35)
    )
});

const PG_FENCE_RECORD: &str = "WITH recorded AS (INSERT INTO ho_attempts (op_id, host, \
     src_cell, src_epoch, src_incarnation, src_generation, target, outcome, new_epoch, \
     registration, recorded_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     RETURNING op_id)";

/// HO-A1 / HO-A2, PostgreSQL: the fence record and every shard rebalanced ($12..$21).
static PG_FENCE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{PG_FENCE_RECORD} {} WHERE EXISTS (SELECT 1 FROM recorded)",
        rebalance_set(12)
    )
});

/// HO-L1, PostgreSQL: the fence record, the renewed assignment ($12..$16) and every shard
/// rebalanced ($17..$26). Data-modifying CTEs always run to completion; the EXISTS tests make
/// the rows the statement reports mean that every one of them wrote its row.
static PG_FENCE_RENEWED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{PG_FENCE_RECORD}, renewed AS (UPDATE ho_assignments SET cell = $12, epoch = $13, \
         incarnation = $14, generation = $15, desktop_capable = $16 WHERE host = $2 \
         RETURNING host) {} WHERE EXISTS (SELECT 1 FROM recorded) \
         AND EXISTS (SELECT 1 FROM renewed)",
        rebalance_set(17)
    )
});
