//! HO-S4: the bounded assignment transaction, and HO-A1 / HO-A2: the locked reconciliation.

use switchyard_core::handoff::attempt::Ambiguity;
use switchyard_core::handoff::ids::{AuthorityCheck, AuthorityField, CellId, OpId};
use switchyard_core::handoff::policy::HandoffRequest;
use switchyard_core::handoff::store::{
    authority_of, claim_check, commit_precheck, commit_writes, decide_commit, decide_reconcile,
    reconcile_precheck, recorded_outcome, AbortReason, AssignmentRow, AttemptRow, CellRow,
    CommitFacts, CommitWrites, FenceWrites, HostFacts, LimitFacts, RateRow, ReconcileDecision,
    StoreConfig, TxnOutcome,
};
use switchyard_core::MonoMs;

use super::codec::{
    attempt_of, cell_row_of, config_of, counts_of, flag, get, i, no_settings, op_text, u, u32_of,
    AnyQuery, AttemptBinds,
};
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

impl SqlStore {
    /// HO-S4: the global limits lock, the last lock of a commit or a fence. Returns the row
    /// as locked (PostgreSQL returns the newest version of a row it waited for).
    async fn lock_limits(tx: &mut Txn, dialect: Dialect) -> Result<(RateRow, u64), StoreFailure> {
        let sql = format!(
            "SELECT window_start_ms, commits, attempt_rows FROM ho_limits WHERE id = 1{}",
            dialect.for_update()
        );
        let row = sqlx::query(&sql)
            .fetch_one(&mut **tx)
            .await
            .map_err(in_txn)?;
        Ok((
            RateRow {
                window_start: MonoMs(u(get(&row, "window_start_ms")?, "window_start_ms")?),
                commits: u32_of(get(&row, "commits")?, "commits")?,
            },
            u(get(&row, "attempt_rows")?, "attempt_rows")?,
        ))
    }

    /// HO-S4: the counts every commit changes (hosts on the target, live reservations). Only
    /// under the limits lock, in a statement that started after the lock was granted: under
    /// READ COMMITTED a statement that waited for a row lock reads everything but that row
    /// with the snapshot it started with, so counting in the locking statement would miss the
    /// commit it waited for.
    async fn limit_counts_in(tx: &mut Txn, target: CellId) -> Result<(u32, u64), StoreFailure> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM ho_assignments WHERE cell = $1) AS target_load, \
             (SELECT COUNT(*) FROM ho_reservations) AS in_flight",
        )
        .bind(i64::from(target.0))
        .fetch_one(&mut **tx)
        .await
        .map_err(in_txn)?;
        counts_of(&row)
    }

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
             s.registration_timeout_ms, \
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
    /// if the fence changes it, the host's assignment) and count the record (`attempt_rows` is
    /// the new count): one statement on PostgreSQL, a statement per table on SQLite. Under the
    /// host lock and the limits lock.
    async fn write_fence(
        tx: &mut Txn,
        dialect: Dialect,
        op: OpId,
        w: &FenceWrites,
        attempt_rows: u64,
    ) -> Result<(), StoreFailure> {
        let a = AttemptBinds::of(op, &w.attempt)?;
        let n = i(attempt_rows, "attempt_rows")?;
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
        match (dialect, &w.assignment) {
            (Dialect::Postgres, None) => {
                let q = sqlx::query(
                    "WITH recorded AS (INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, \
                     src_incarnation, src_generation, target, outcome, new_epoch, registration, \
                     recorded_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     RETURNING op_id) \
                     UPDATE ho_limits SET attempt_rows = $12 WHERE id = 1 \
                     AND EXISTS (SELECT 1 FROM recorded)",
                );
                let done = a.bind(q).bind(n).execute(&mut **tx).await.map_err(in_txn)?;
                one_row(done.rows_affected(), "fence write")
            }
            (Dialect::Postgres, Some(row)) => {
                // Data-modifying CTEs always run to completion; the EXISTS tests make the one
                // row the statement reports mean that every one of them wrote its row.
                let q = sqlx::query(
                    "WITH recorded AS (INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, \
                     src_incarnation, src_generation, target, outcome, new_epoch, registration, \
                     recorded_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     RETURNING op_id), \
                     renewed AS (UPDATE ho_assignments SET cell = $13, epoch = $14, \
                     incarnation = $15, generation = $16, desktop_capable = $17 WHERE host = $2 \
                     RETURNING host) \
                     UPDATE ho_limits SET attempt_rows = $12 WHERE id = 1 \
                     AND EXISTS (SELECT 1 FROM recorded) AND EXISTS (SELECT 1 FROM renewed)",
                );
                let q = assignment(a.bind(q).bind(n), row)?;
                let done = q.execute(&mut **tx).await.map_err(in_txn)?;
                one_row(done.rows_affected(), "fence write")
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
                let done = sqlx::query("UPDATE ho_limits SET attempt_rows = $1 WHERE id = 1")
                    .bind(n)
                    .execute(&mut **tx)
                    .await
                    .map_err(in_txn)?;
                one_row(done.rows_affected(), "attempt count")
            }
        }
    }

    /// HO-S4: write every row of a commit (`commit_writes`) and the attempt count, and return
    /// the counts of [`Self::limit_counts_in`] as they were before these writes. PostgreSQL:
    /// one data-modifying statement (the host and limits rows are locked already; its counting
    /// subqueries share the statement's snapshot, which started after the limits lock and does
    /// not see the statement's own writes). SQLite: the counts, then a statement per table
    /// (embedded: no round trips). Only under the limits lock; the caller decides afterwards
    /// and drops the transaction (rolls the writes back) if `decide_commit` refuses.
    async fn write_commit(
        tx: &mut Txn,
        dialect: Dialect,
        op: OpId,
        w: &CommitWrites,
        attempt_rows: u64,
    ) -> Result<(u32, u64), StoreFailure> {
        let host = i(w.reservation.host.0, "host")?;
        let a = AttemptBinds::of(op, &w.attempt)?;
        let assignment = |q: AnyQuery<'static>| -> Result<AnyQuery<'static>, StoreFailure> {
            Ok(q.bind(i64::from(w.assignment.cell.0))
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
                .bind(i(w.reservation.expires_at.0, "expires_at")?))
        };
        let cooldown = i(w.cooldown_until.0, "cooldown")?;
        let limits = |q: AnyQuery<'static>| -> Result<AnyQuery<'static>, StoreFailure> {
            Ok(q.bind(i(w.rate.window_start.0, "window_start")?)
                .bind(i64::from(w.rate.commits))
                .bind(i(attempt_rows, "attempt_rows")?))
        };
        match dialect {
            Dialect::Postgres => {
                let q = sqlx::query(
                    "WITH moved AS (UPDATE ho_assignments SET cell = $1, epoch = $2, \
                     incarnation = $3, generation = $4, desktop_capable = $5 WHERE host = $6 \
                     RETURNING host), \
                     reserved AS (INSERT INTO ho_reservations (op_id, host, cell, expires_at_ms) \
                     VALUES ($7, $8, $9, $10) RETURNING op_id), \
                     recorded AS (INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, \
                     src_incarnation, src_generation, target, outcome, new_epoch, registration, \
                     recorded_at_ms) VALUES ($11, $12, $13, $14, $15, $16, $17, $18, $19, $20, \
                     $21) RETURNING op_id), \
                     cooled AS (INSERT INTO ho_cooldowns (host, until_ms) VALUES ($22, $23) \
                     ON CONFLICT (host) DO UPDATE SET until_ms = excluded.until_ms \
                     RETURNING host), \
                     limited AS (UPDATE ho_limits SET window_start_ms = $24, commits = $25, \
                     attempt_rows = $26 WHERE id = 1 RETURNING id) \
                     SELECT (SELECT COUNT(*) FROM ho_assignments WHERE cell = $27) AS target_load, \
                     (SELECT COUNT(*) FROM ho_reservations) AS in_flight, \
                     (SELECT COUNT(*) FROM moved) + (SELECT COUNT(*) FROM reserved) \
                     + (SELECT COUNT(*) FROM recorded) + (SELECT COUNT(*) FROM cooled) \
                     + (SELECT COUNT(*) FROM limited) AS written",
                );
                let q = a.bind(reservation(assignment(q)?)?);
                let q = limits(q.bind(host).bind(cooldown))?.bind(i64::from(w.assignment.cell.0));
                let row = q.fetch_one(&mut **tx).await.map_err(in_txn)?;
                let written: i64 = get(&row, "written")?;
                if written != 5 {
                    return Err(StoreFailure::Ambiguous {
                        kind: Ambiguity::TransportError,
                        detail: format!("commit wrote {written} of 5 rows"),
                    });
                }
                counts_of(&row)
            }
            Dialect::Sqlite => {
                let counts = Self::limit_counts_in(tx, w.assignment.cell).await?;
                let statements: [(&str, AnyQuery<'static>); 5] = [
                    (
                        "assignment update",
                        assignment(sqlx::query(
                            "UPDATE ho_assignments SET cell = $1, epoch = $2, incarnation = $3, \
                             generation = $4, desktop_capable = $5 WHERE host = $6",
                        ))?,
                    ),
                    (
                        "reservation insert",
                        reservation(sqlx::query(
                            "INSERT INTO ho_reservations (op_id, host, cell, expires_at_ms) \
                             VALUES ($1, $2, $3, $4)",
                        ))?,
                    ),
                    (
                        "attempt insert",
                        a.bind(sqlx::query(
                            "INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, \
                             src_incarnation, src_generation, target, outcome, new_epoch, \
                             registration, recorded_at_ms) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                        )),
                    ),
                    (
                        "cooldown upsert",
                        sqlx::query(
                            "INSERT INTO ho_cooldowns (host, until_ms) VALUES ($1, $2) \
                             ON CONFLICT (host) DO UPDATE SET until_ms = excluded.until_ms",
                        )
                        .bind(host)
                        .bind(cooldown),
                    ),
                    (
                        "limits update",
                        limits(sqlx::query(
                            "UPDATE ho_limits SET window_start_ms = $1, commits = $2, \
                             attempt_rows = $3 WHERE id = 1",
                        ))?,
                    ),
                ];
                for (what, q) in statements {
                    let done = q.execute(&mut **tx).await.map_err(in_txn)?;
                    one_row(done.rows_affected(), what)?;
                }
                Ok(counts)
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

    /// The statements of one assignment transaction, one round trip each on PostgreSQL:
    ///
    /// 1. BEGIN;
    /// 2. lock the host row (the first lock; alone in its statement);
    /// 3. the host's facts ([`Self::txn_facts_in`]) in a statement that starts after the host
    ///    lock. A recorded op id, a changed authority or a failed `commit_precheck` is answered
    ///    here: nothing written, the global lock never taken;
    /// 4. lock `ho_limits` (the rate window and the attempt count, newest version);
    /// 5. write the commit's rows and read the counts as they were before them
    ///    ([`Self::write_commit`]); `decide_commit` over all facts; a refusal drops the
    ///    transaction (its writes roll back);
    /// 6. COMMIT.
    ///
    /// Under the global lock: 4, 5 and 6.
    async fn transaction_body(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<TxnOutcome, StoreFailure> {
        let d = self.dialect;
        let mut tx = self.begin().await?;
        let host = req.source.host;
        let locked = Self::lock_host(&mut tx, d, host).await?;
        if let Some((reached, resume)) = self.faults.take_pause() {
            let _ = reached.send(());
            // Held under the lock until the test lets go (or the transaction timeout fires).
            let _ = resume.await;
        }
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
        if let Err(reason) = commit_precheck(now, req, &host_facts, &facts.config) {
            return Ok(TxnOutcome::RolledBack { reason });
        }
        let (rate, attempt_rows) = Self::lock_limits(&mut tx, d).await?;
        // The commit's rows do not depend on the counts: write them in the statement that
        // reads the counts (as they were before these writes), then decide. A refusal drops
        // the transaction, so what it wrote is rolled back and never seen. With a pending
        // migration the reservation cannot be written (one per host) and the decision is a
        // refusal anyway (the capacity check or the pending move): only count.
        let written = commit_writes(now, req, &host_facts, rate, &facts.config)
            .filter(|_| !host_facts.migration_pending);
        let (target_load, in_flight) = match &written {
            Some(w) => {
                Self::write_commit(&mut tx, d, req.op_id, w, attempt_rows.saturating_add(1)).await?
            }
            None => Self::limit_counts_in(&mut tx, req.target).await?,
        };
        let commit_facts = CommitFacts {
            host: host_facts,
            limits: LimitFacts {
                target_load,
                in_flight,
                rate,
                attempt_rows,
            },
        };
        let writes = match decide_commit(now, req, &commit_facts, &facts.config) {
            Ok(writes) => writes,
            Err(reason) => return Ok(TxnOutcome::RolledBack { reason }),
        };
        if written != Some(writes) {
            // Unreachable: `decide_commit` returns `commit_writes` of the same facts.
            return Err(StoreFailure::Ambiguous {
                kind: Ambiguity::TransportError,
                detail: "commit decided other rows than were written".into(),
            });
        }
        Self::commit(tx).await?;
        Ok(TxnOutcome::Committed {
            target: req.target,
            new_epoch: writes.assignment.epoch,
        })
    }

    // ----- HO-A1 / HO-A2: locked reconciliation -----

    /// Reference `reconcile`, under the host lock: the rows read, then `reconcile_precheck`
    /// (a recorded op id is answered without the limits lock), then the limits lock and
    /// `decide_reconcile`, whose fence rows are written. `Ok(None)`: the fence could not be
    /// written (store full): stay quarantined.
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
            let (_, attempt_rows) = Self::lock_limits(&mut tx, d).await?;
            match decide_reconcile(now, req, current, recorded.as_ref(), attempt_rows) {
                ReconcileDecision::Answer(answer) => Ok(Some(answer)),
                ReconcileDecision::StoreFull => Ok(None),
                ReconcileDecision::Fence { writes, answer } => {
                    let counted = attempt_rows.saturating_add(1);
                    Self::write_fence(&mut tx, d, req.op_id, &writes, counted).await?;
                    Self::commit(tx).await?;
                    Ok(Some(answer))
                }
            }
        })
        .await
    }
}
