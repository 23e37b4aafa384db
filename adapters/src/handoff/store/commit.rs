//! HO-S4: the bounded assignment transaction, and HO-A1 / HO-A2: the locked reconciliation.

use std::sync::LazyLock;

use switchyard_core::handoff::attempt::Ambiguity;
use switchyard_core::handoff::escrow::{
    after_commit, after_fence, exact_limits, fast_commit, load_split, rebalance,
    shard_covers_commit, spend_commit, Rebalance, ShardRow, Split,
};
use switchyard_core::handoff::ids::{AuthorityCheck, AuthorityField, CellId, OpId};
use switchyard_core::handoff::policy::HandoffRequest;
use switchyard_core::handoff::store::{
    authority_of, claim_check, commit_precheck, commit_writes, decide_commit, decide_reconcile,
    reconcile_precheck, recorded_outcome, AbortReason, AssignmentRow, AttemptRow, CellRow,
    CommitFacts, CommitWrites, FenceWrites, HostFacts, RateRow, ReconcileDecision, StoreConfig,
    TxnOutcome,
};
use switchyard_core::MonoMs;

use super::codec::{
    attempt_of, cell_row_of, config_of, flag, get, i, no_settings, op_text, u, AnyQuery,
    AttemptBinds,
};
use super::shards::{bind_rebalance, bind_split, load_rebalance_set, rebalance_set};
use super::{in_txn, Dialect, SqlStore, StoreFailure, Txn};

/// What `run_transaction` read in its facts statement.
#[derive(Debug, Clone, Copy)]
struct TxnFacts {
    recorded: Option<AttemptRow>,
    config: StoreConfig,
    target_cell: Option<CellRow>,
    source_cell_capable: bool,
    cooldown_until: Option<MonoMs>,
    migration_pending: bool,
}

/// A write that must touch exactly one row. Anything else fails the transaction (it is dropped,
/// so rolled back; reported as ambiguous like every error inside a transaction).
fn one_row(rows: u64, what: &str) -> Result<(), StoreFailure> {
    if rows == 1 {
        Ok(())
    } else {
        Err(StoreFailure::Ambiguous {
            kind: Ambiguity::TransportError,
            detail: format!("{what} touched {rows} rows, expected 1"),
        })
    }
}

/// HO-S4: how a commit counts against the global limits (`switchyard_core::handoff::escrow`).
#[derive(Debug, Clone, Copy)]
enum LimitWrites {
    /// Token path: the locked shard's row after the commit (`spend_commit`).
    Spend { shard: u32, row: ShardRow },
    /// Exact path (every shard locked): every shard's row from the totals after the commit,
    /// and the target's hosts and tokens re-dealt over its load rows.
    Rebalance {
        rebalance: Rebalance,
        target_hosts: u32,
        target_tokens: Split,
    },
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
    ) -> Result<TxnFacts, StoreFailure> {
        let row = sqlx::query(
            "SELECT s.enabled, s.freshness_window_ms, s.host_cooldown_ms, \
             s.max_in_flight_migrations, s.rate_window_ms, s.max_commits_per_window, \
             s.registration_timeout_ms, s.max_hosts, s.max_cells, s.max_attempt_rows, \
             t.op_id AS attempt_op, t.host, t.src_cell, t.src_epoch, t.src_incarnation, \
             t.src_generation, t.target, t.outcome, t.new_epoch, t.registration, \
             t.recorded_at_ms, \
             tc.capacity, tc.handoff_capable, tc.incarnation, \
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
        let source_cell_capable = match get::<Option<i64>>(&row, "src_capable")? {
            Some(v) => flag(v, "src_capable")?,
            None => false,
        };
        let cooldown_until = get::<Option<i64>>(&row, "until_ms")?
            .map(|v| u(v, "until_ms").map(MonoMs))
            .transpose()?;
        Ok(TxnFacts {
            recorded,
            config: config_of(&row)?,
            target_cell,
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
                let q = bind_rebalance(a.bind(sqlx::query(PG_FENCE.as_str())), r)?;
                let done = q.execute(&mut **tx).await.map_err(in_txn)?;
                rows_are(done.rows_affected(), shards, "fence write")
            }
            (Dialect::Postgres, Some(row)) => {
                let q = assignment(a.bind(sqlx::query(PG_FENCE_RENEWED.as_str())), row)?;
                let done = bind_rebalance(q, r)?
                    .execute(&mut **tx)
                    .await
                    .map_err(in_txn)?;
                rows_are(done.rows_affected(), shards, "fence write")
            }
            (Dialect::Sqlite, _) => {
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
                    return Err(StoreFailure::Ambiguous {
                        kind: Ambiguity::TransportError,
                        detail: format!("commit wrote {written} of {expected} rows"),
                    });
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

    /// HO-S4 / HO-A1: reference `run_transaction`, as one bounded SQL transaction.
    pub async fn run_transaction(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<TxnOutcome, StoreFailure> {
        if !req.op_id_is_consistent() {
            return Ok(TxnOutcome::RolledBack {
                reason: AbortReason::InvalidOpId,
            });
        }
        self.faults.before_begin.reached().await;
        if self.faults.take_begin_failure() {
            return Err(StoreFailure::Unavailable("injected: begin failed".into()));
        }
        let lose = self.faults.take_lost_result();
        let result = self.bounded(self.transaction_body(now, req)).await;
        match result {
            Ok(outcome) if lose => Err(StoreFailure::Ambiguous {
                kind: Ambiguity::ResultLost,
                detail: format!("injected: result of {outcome:?} lost"),
            }),
            other => other,
        }
    }

    /// The assignment transaction, one round trip per statement on PostgreSQL:
    ///
    /// 1. BEGIN;
    /// 2. lock the host row (the first lock; alone in its statement);
    /// 3. the host's facts ([`Self::txn_facts_in`]) in a statement that starts after the host
    ///    lock. A recorded op id, a changed authority or a failed `commit_precheck` is answered
    ///    here: nothing written, no limit shard locked;
    /// 4. token path: a savepoint and one free limit shard locked, in one round trip
    ///    ([`Self::lock_any_shard`]); without a token of every global limit on it
    ///    (`shard_covers_commit`), back to the savepoint and on to the exact path. Else
    /// 5. write the commit's rows and spend the tokens, reading the target cell's host token on
    ///    that shard as it was before (`fast_commit`; none: back to the savepoint, exact path);
    /// 6. COMMIT.
    ///
    /// Exact path (and any host with a pending migration), still under the host lock: every
    /// shard locked in order; the settings, the target cell and its hosts summed, read after
    /// the locks; `decide_commit` on the exact totals (`exact_limits`) as in the reference; the
    /// rows written and the tokens dealt out again (`rebalance`, `load_split`); COMMIT.
    async fn transaction_body(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<TxnOutcome, StoreFailure> {
        let d = self.dialect;
        let n = |k: u64| self.statements.sent(k);
        n(2);
        let mut tx = self.begin().await?;
        let host = req.source.host;
        let locked = Self::lock_host(&mut tx, d, host).await?;
        if let Some((reached, resume)) = self.faults.take_pause() {
            let _ = reached.send(());
            // Held under the lock until the test lets go (or the transaction timeout fires).
            let _ = resume.await;
        }
        n(1);
        let facts = Self::txn_facts_in(&mut tx, req, i64::try_from(host.0).ok()).await?;
        let current = locked.map(|l| authority_of(host, &l.row));
        // Every early answer below wrote nothing: dropping the transaction rolls it back.
        if let Some(row) = facts.recorded {
            return Ok(recorded_outcome(req, current.as_ref(), &row));
        }
        let check = claim_check(&req.source, current.as_ref());
        if check != AuthorityCheck::Exact {
            return Ok(TxnOutcome::AuthorityChanged { check });
        }
        let Some(locked) = locked else {
            return Ok(TxnOutcome::AuthorityChanged {
                check: AuthorityCheck::Mismatch(AuthorityField::Host),
            });
        };
        let host_facts = HostFacts {
            assignment: locked.row,
            source_cell_capable: facts.source_cell_capable,
            target_cell: facts.target_cell,
            cooldown_until: facts.cooldown_until,
            migration_pending: facts.migration_pending,
        };
        let config = facts.config;
        if let Err(reason) = commit_precheck(now, req, &host_facts, &config) {
            return Ok(TxnOutcome::RolledBack { reason });
        }
        let committed = |writes: &CommitWrites| TxnOutcome::Committed {
            target: req.target,
            new_epoch: writes.assignment.epoch,
        };
        if !host_facts.migration_pending {
            let hint = u32::try_from(host.0 % u64::from(self.shards)).unwrap_or(0);
            n(if d == Dialect::Postgres { 1 } else { 2 });
            let (shard, row) = Self::lock_any_shard(&mut tx, d, hint).await?;
            if shard_covers_commit(now, &config, &row) {
                // The rows do not depend on the counts; the rate row of `writes` is the exact
                // path's (this path counts the commit on the shard instead).
                let window = RateRow {
                    window_start: row.window_start,
                    commits: 0,
                };
                if let Some(writes) = commit_writes(now, req, &host_facts, window, &config) {
                    let spend = LimitWrites::Spend {
                        shard,
                        row: spend_commit(&row),
                    };
                    let target_tokens = self
                        .write_commit(&mut tx, req.op_id, &writes, req.source.cell, &spend)
                        .await?;
                    if fast_commit(now, &config, &row, target_tokens) {
                        n(1);
                        Self::commit(tx).await?;
                        return Ok(committed(&writes));
                    }
                }
            }
            n(1);
            Self::leave_token_path(&mut tx).await?;
        }
        n(3);
        let shards = self.lock_all_shards(&mut tx).await?;
        // Read after every shard is locked: a settings change (which locks them all) either
        // committed before, or waits for this transaction; the tokens dealt out below must
        // follow the settings in force.
        let config = Self::settings_in(&mut tx).await?;
        // The target as it is now, for the same reason: a cell write (a lowered capacity)
        // locks every shard after writing its row.
        let target_now = self.cell_now_in(&mut tx, req.target).await?;
        let host_facts = HostFacts {
            target_cell: target_now.map(|(row, _)| row),
            ..host_facts
        };
        let limits = exact_limits(&shards, target_now.map_or(0, |(_, hosts)| hosts));
        let commit_facts = CommitFacts {
            host: host_facts,
            limits,
        };
        let writes = match decide_commit(now, req, &commit_facts, &config) {
            Ok(writes) => writes,
            Err(reason) => return Ok(TxnOutcome::RolledBack { reason }),
        };
        let after = after_commit(&limits, &writes);
        let capacity = host_facts.target_cell.map_or(0, |c| c.capacity);
        let rebalanced = LimitWrites::Rebalance {
            rebalance: rebalance(&config, &after, self.shards),
            target_hosts: after.target_load,
            target_tokens: load_split(capacity, after.target_load, self.shards),
        };
        self.write_commit(&mut tx, req.op_id, &writes, req.source.cell, &rebalanced)
            .await?;
        n(1);
        Self::commit(tx).await?;
        Ok(committed(&writes))
    }

    // ----- HO-A1 / HO-A2: locked reconciliation -----

    /// Reference `reconcile`, under the host lock: the rows read, then `reconcile_precheck`
    /// (a recorded op id is answered without locking a limit shard), then every limit shard
    /// and `decide_reconcile` on the exact attempt count, whose fence rows are written (with
    /// the shards' tokens dealt out again). `Ok(None)`: the fence could not be written (store
    /// full): stay quarantined.
    pub async fn reconcile(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<Option<TxnOutcome>, StoreFailure> {
        if !req.op_id_is_consistent() {
            return Ok(Some(TxnOutcome::RolledBack {
                reason: AbortReason::InvalidOpId,
            }));
        }
        if self.faults.take_begin_failure() {
            return Err(StoreFailure::Unavailable("injected: begin failed".into()));
        }
        self.bounded(async {
            let d = self.dialect;
            let mut tx = self.begin().await?;
            let host = req.source.host;
            let current = Self::lock_host(&mut tx, d, host).await?.map(|l| l.row);
            let authority = current.map(|row| authority_of(host, &row));
            let recorded = Self::attempt_in(&mut tx, req.op_id).await?;
            // Every early answer below wrote nothing: dropping the transaction rolls it back.
            if let Some(answer) = reconcile_precheck(req, authority.as_ref(), recorded.as_ref()) {
                return Ok(Some(answer));
            }
            let shards = self.lock_all_shards(&mut tx).await?;
            // After the shard locks, as in the exact path of a commit.
            let config = Self::settings_in(&mut tx).await?;
            let limits = exact_limits(&shards, 0);
            match decide_reconcile(
                now,
                req,
                current,
                recorded.as_ref(),
                limits.attempt_rows,
                config.bounds.max_attempt_rows,
            ) {
                ReconcileDecision::Answer(answer) => Ok(Some(answer)),
                ReconcileDecision::StoreFull => Ok(None),
                ReconcileDecision::Fence { writes, answer } => {
                    let r = rebalance(&config, &after_fence(&limits), self.shards);
                    self.write_fence(&mut tx, req.op_id, &writes, &r).await?;
                    Self::commit(tx).await?;
                    Ok(Some(answer))
                }
            }
        })
        .await
    }
}

/// A write that must touch exactly `expected` rows.
fn rows_are(rows: u64, expected: u64, what: &str) -> Result<(), StoreFailure> {
    if rows == expected {
        Ok(())
    } else {
        Err(StoreFailure::Ambiguous {
            kind: Ambiguity::TransportError,
            detail: format!("{what} touched {rows} rows, expected {expected}"),
        })
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
