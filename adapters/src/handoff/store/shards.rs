//! HO-S4 at scale: the limit shards (`ho_limit_shards`, `ho_cell_load`), the store side of
//! `switchyard_core::handoff::escrow`. The core decides (which path, which rows); this module
//! locks, reads and writes.
//!
//! Locks: a token commit locks **one** shard row (`FOR UPDATE SKIP LOCKED`: any free shard) and
//! writes only that shard's rows (its `ho_limit_shards` row and the `ho_cell_load` rows of
//! (target, shard) and (source, shard)); a release subtracts on its reservation's shard row.
//! Every other writer of these tables (the exact path of a commit, a fence, a host insert, a
//! cell or settings change) first locks **every** shard row in shard order. Neither kind waits
//! for anything while holding a shard except the shards after it in that order, so no cycle.

use sqlx::Executor;
use switchyard_core::handoff::escrow::{Rebalance, ShardRow, Split, MAX_LIMIT_SHARDS};
use switchyard_core::handoff::store::CellRow;
use switchyard_core::handoff::CellId;
use switchyard_core::MonoMs;

use super::codec::{cell_row_of, get, i, u, AnyQuery};
use super::{in_txn, Dialect, SqlStore, StoreFailure, Txn};

/// The savepoint before a commit's token path.
const TOKEN_PATH: &str = "token_path";

const SHARD_COLUMNS: &str = "shard, window_start_ms, commits, in_flight, attempt_rows, \
     commit_tokens, in_flight_tokens, attempt_tokens, hosts, host_tokens";

fn shard_of(row: &sqlx::any::AnyRow) -> Result<(u32, ShardRow), StoreFailure> {
    let shard = u(get(row, "shard")?, "shard")?;
    let shard = u32::try_from(shard)
        .ok()
        .filter(|s| *s < MAX_LIMIT_SHARDS)
        .ok_or_else(|| StoreFailure::BadRow(format!("limit shard {shard} out of range")))?;
    Ok((
        shard,
        ShardRow {
            window_start: MonoMs(u(get(row, "window_start_ms")?, "window_start_ms")?),
            commits: get(row, "commits")?,
            in_flight: get(row, "in_flight")?,
            attempt_rows: get(row, "attempt_rows")?,
            commit_tokens: u(get(row, "commit_tokens")?, "commit_tokens")?,
            in_flight_tokens: u(get(row, "in_flight_tokens")?, "in_flight_tokens")?,
            attempt_tokens: u(get(row, "attempt_tokens")?, "attempt_tokens")?,
            hosts: get(row, "hosts")?,
            host_tokens: u(get(row, "host_tokens")?, "host_tokens")?,
        },
    ))
}

/// A split's binds: `base` and `extra_below`.
pub(super) fn bind_split(
    q: AnyQuery<'static>,
    s: Split,
) -> Result<AnyQuery<'static>, StoreFailure> {
    Ok(q.bind(i(s.base, "tokens")?).bind(i64::from(s.extra_below)))
}

/// The rebalance's binds, in the order of [`REBALANCE_SET`].
pub(super) fn bind_rebalance(
    q: AnyQuery<'static>,
    r: &Rebalance,
) -> Result<AnyQuery<'static>, StoreFailure> {
    let q = q
        .bind(i(r.window_start.0, "window_start")?)
        .bind(r.commits)
        .bind(r.in_flight)
        .bind(r.attempt_rows);
    let q = bind_split(q, r.commit_tokens)?;
    let q = bind_split(q, r.in_flight_tokens)?;
    bind_split(q, r.attempt_tokens)
}

/// `UPDATE ho_limit_shards SET` … for [`Rebalance::row`] of every shard, binds `$k`..`$k+9`.
pub(super) fn rebalance_set(k: usize) -> String {
    let p = |n: usize| format!("${}", k + n);
    format!(
        "UPDATE ho_limit_shards SET window_start_ms = {}, \
         commits = CASE WHEN shard = 0 THEN {} ELSE 0 END, \
         in_flight = CASE WHEN shard = 0 THEN {} ELSE 0 END, \
         attempt_rows = CASE WHEN shard = 0 THEN {} ELSE 0 END, \
         commit_tokens = {} + CASE WHEN shard < {} THEN 1 ELSE 0 END, \
         in_flight_tokens = {} + CASE WHEN shard < {} THEN 1 ELSE 0 END, \
         attempt_tokens = {} + CASE WHEN shard < {} THEN 1 ELSE 0 END",
        p(0),
        p(1),
        p(2),
        p(3),
        p(4),
        p(5),
        p(6),
        p(7),
        p(8),
        p(9)
    )
}

/// `UPDATE ho_cell_load SET` … every shard row of one cell: its hosts gathered onto shard 0,
/// its tokens dealt out; binds `$k` (cell), `$k+1` (hosts), `$k+2`, `$k+3` (the split).
pub(super) fn load_rebalance_set(k: usize) -> String {
    format!(
        "UPDATE ho_cell_load SET hosts = CASE WHEN shard = 0 THEN ${} ELSE 0 END, \
         tokens = ${} + CASE WHEN shard < ${} THEN 1 ELSE 0 END WHERE cell = ${}",
        k + 1,
        k + 2,
        k + 3,
        k
    )
}

impl SqlStore {
    /// The number of limit shards, checked at connect: rows 0..n, n within bounds.
    pub(super) async fn count_shards(pool: &sqlx::AnyPool) -> Result<u32, String> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, COALESCE(MAX(shard), -1) AS top FROM ho_limit_shards",
        )
        .fetch_one(pool)
        .await
        .map_err(|e| format!("reading ho_limit_shards: {e}"))?;
        let n: i64 = sqlx::Row::try_get(&row, "n").map_err(|e| e.to_string())?;
        let top: i64 = sqlx::Row::try_get(&row, "top").map_err(|e| e.to_string())?;
        match u32::try_from(n) {
            Ok(n) if (1..=MAX_LIMIT_SHARDS).contains(&n) && top == i64::from(n) - 1 => Ok(n),
            _ => Err(format!(
                "ho_limit_shards must hold shards 0..n with 1 <= n <= {MAX_LIMIT_SHARDS}; \
                 found {n} rows, highest shard {top}"
            )),
        }
    }

    /// Token path: set the savepoint [`TOKEN_PATH`] and lock one free shard, preferring
    /// `hint` and the shards after it (spreads the writers). `None`: every shard is locked (an
    /// exact path holds them all; the plan then waits for one, [`Self::lock_shard`]). SQLite
    /// has one writer, so `hint`'s shard is free. Rolling back to the savepoint
    /// ([`Self::leave_token_path`]) releases the shard and undoes whatever the token path
    /// wrote, while the host lock taken before stays.
    pub(super) async fn lock_free_shard(
        tx: &mut Txn,
        dialect: Dialect,
        hint: u32,
    ) -> Result<Option<(u32, ShardRow)>, StoreFailure> {
        if dialect == Dialect::Postgres {
            // One round trip for both (a simple query: the hint is an integer of ours).
            let sql = format!(
                "SAVEPOINT {TOKEN_PATH}; SELECT {SHARD_COLUMNS} FROM ho_limit_shards \
                 ORDER BY shard >= {hint} DESC, shard FOR UPDATE SKIP LOCKED LIMIT 1"
            );
            // A plain string runs as a simple query, which may hold two statements. All rows of
            // both are read: `fetch_optional` would stop at the savepoint's empty result and
            // drop the row the SELECT locked (a shard held without knowing it).
            let free = (&mut **tx).fetch_all(sql.as_str()).await.map_err(in_txn)?;
            if free.len() > 1 {
                return Err(StoreFailure::BadRow(format!(
                    "locking one free limit shard returned {} rows",
                    free.len()
                )));
            }
            return free.first().map(shard_of).transpose();
        }
        (&mut **tx)
            .execute(format!("SAVEPOINT {TOKEN_PATH}").as_str())
            .await
            .map_err(in_txn)?;
        Self::lock_shard(tx, dialect, hint).await.map(Some)
    }

    /// HO-L4: lock one free shard without a savepoint (a reap lowers one shard's count):
    /// as [`Self::lock_free_shard`], `hint` and the shards after it first; `None`: every
    /// shard is locked. SQLite has one writer, so `hint`'s shard is free.
    pub(super) async fn lock_any_shard(
        tx: &mut Txn,
        dialect: Dialect,
        hint: u32,
    ) -> Result<Option<(u32, ShardRow)>, StoreFailure> {
        if dialect == Dialect::Postgres {
            let row = sqlx::query(&format!(
                "SELECT {SHARD_COLUMNS} FROM ho_limit_shards \
                 ORDER BY shard >= $1 DESC, shard FOR UPDATE SKIP LOCKED LIMIT 1"
            ))
            .bind(i64::from(hint))
            .fetch_optional(&mut **tx)
            .await
            .map_err(in_txn)?;
            return row.as_ref().map(shard_of).transpose();
        }
        Self::lock_shard(tx, dialect, hint).await.map(Some)
    }

    /// HO-L4: a shard's `attempt_rows` as the plan computed it under the shard's lock.
    pub(super) async fn write_shard_attempt_rows(
        tx: &mut Txn,
        shard: u32,
        row: &ShardRow,
    ) -> Result<(), StoreFailure> {
        let done = sqlx::query("UPDATE ho_limit_shards SET attempt_rows = $1 WHERE shard = $2")
            .bind(row.attempt_rows)
            .bind(i64::from(shard))
            .execute(&mut **tx)
            .await
            .map_err(in_txn)?;
        if done.rows_affected() != 1 {
            return Err(StoreFailure::BadRow(format!("limit shard {shard} missing")));
        }
        Ok(())
    }

    /// Lock shard `shard` (waiting for it) and read its row.
    pub(super) async fn lock_shard(
        tx: &mut Txn,
        dialect: Dialect,
        shard: u32,
    ) -> Result<(u32, ShardRow), StoreFailure> {
        let row = sqlx::query(&format!(
            "SELECT {SHARD_COLUMNS} FROM ho_limit_shards WHERE shard = $1{}",
            dialect.for_update()
        ))
        .bind(i64::from(shard))
        .fetch_optional(&mut **tx)
        .await
        .map_err(in_txn)?
        .ok_or_else(|| StoreFailure::BadRow(format!("limit shard {shard} missing")))?;
        shard_of(&row)
    }

    /// The token path found no token: back to [`TOKEN_PATH`] (the shard's lock and anything
    /// written since are gone; the host lock stays), for the exact path in the same
    /// transaction.
    pub(super) async fn leave_token_path(tx: &mut Txn) -> Result<(), StoreFailure> {
        (&mut **tx)
            .execute(format!("ROLLBACK TO SAVEPOINT {TOKEN_PATH}").as_str())
            .await
            .map_err(in_txn)?;
        Ok(())
    }

    /// Exact path: lock every shard row, in shard order. Returns them in that order.
    pub(super) async fn lock_all_shards(
        &self,
        tx: &mut Txn,
    ) -> Result<Vec<ShardRow>, StoreFailure> {
        let rows = sqlx::query(&format!(
            "SELECT {SHARD_COLUMNS} FROM ho_limit_shards ORDER BY shard{}",
            self.dialect.for_update()
        ))
        .fetch_all(&mut **tx)
        .await
        .map_err(in_txn)?;
        let mut shards = Vec::with_capacity(rows.len());
        for (expected, row) in rows.iter().enumerate() {
            let (shard, s) = shard_of(row)?;
            if usize::try_from(shard).ok() != Some(expected) {
                return Err(StoreFailure::BadRow(format!(
                    "limit shards are not 0..n: found {shard} at position {expected}"
                )));
            }
            shards.push(s);
        }
        if u32::try_from(shards.len()).ok() != Some(self.shards) {
            return Err(StoreFailure::BadRow(format!(
                "{} limit shards, {} at connect",
                shards.len(),
                self.shards
            )));
        }
        Ok(shards)
    }

    /// Exact path: a cell's row and its hosts, summed over its shard rows (all shards locked;
    /// a statement that started after the locks, so a cell write — which locks every shard
    /// after writing the row — is either seen here or waits for this transaction). `None`:
    /// no such cell.
    pub(super) async fn cell_now_in(
        &self,
        tx: &mut Txn,
        cell: CellId,
    ) -> Result<Option<(CellRow, i64)>, StoreFailure> {
        let row = sqlx::query(
            "SELECT c.capacity, c.handoff_capable, c.incarnation, \
             (SELECT CAST(COALESCE(SUM(l.hosts), 0) AS BIGINT) FROM ho_cell_load l \
              WHERE l.cell = c.cell) AS hosts, \
             (SELECT COUNT(*) FROM ho_cell_load l WHERE l.cell = c.cell) AS n \
             FROM ho_cells c WHERE c.cell = $1",
        )
        .bind(i64::from(cell.0))
        .fetch_optional(&mut **tx)
        .await
        .map_err(in_txn)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let rows: i64 = get(&row, "n")?;
        if rows != i64::from(self.shards) {
            return Err(StoreFailure::BadRow(format!(
                "cell {} has {rows} load rows, expected one per shard ({})",
                cell.0, self.shards
            )));
        }
        Ok(Some((cell_row_of(&row)?, get(&row, "hosts")?)))
    }

    /// A new cell's load rows (one per shard, no hosts, no tokens); an existing cell's are kept.
    pub(super) async fn create_load_rows(tx: &mut Txn, cell: CellId) -> Result<(), StoreFailure> {
        sqlx::query(
            "INSERT INTO ho_cell_load (cell, shard, hosts, tokens) \
             SELECT $1, shard, 0, 0 FROM ho_limit_shards WHERE true \
             ON CONFLICT (cell, shard) DO NOTHING",
        )
        .bind(i64::from(cell.0))
        .execute(&mut **tx)
        .await
        .map_err(in_txn)?;
        Ok(())
    }

    /// Revoke a cell's host tokens (its capacity may have changed, or a host was inserted).
    /// Every shard locked.
    pub(super) async fn revoke_cell_tokens(tx: &mut Txn, cell: CellId) -> Result<(), StoreFailure> {
        sqlx::query("UPDATE ho_cell_load SET tokens = 0 WHERE cell = $1")
            .bind(i64::from(cell.0))
            .execute(&mut **tx)
            .await
            .map_err(in_txn)?;
        Ok(())
    }
}

impl SqlStore {
    /// HO-S4: check the limit shards against the rows they count (tests, the SQL bench,
    /// diagnostics): every count equals the rows (reservations, attempt rows, hosts per
    /// cell), every cell has one load row per shard, every shard carries the same window, and
    /// no limit has more tokens out than the room left under it (the escrow invariant).
    /// `Err` lists every discrepancy.
    pub async fn audit_limits(&self) -> Result<Result<(), String>, StoreFailure> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let shards = self.lock_all_shards(&mut tx).await?;
            let config = Self::settings_in(&mut tx).await?;
            let count = |sql: &'static str| sqlx::query(sql);
            let mut wrong = Vec::new();
            let limits = switchyard_core::handoff::escrow::exact_limits(&shards, 0);
            let row = count(
                "SELECT (SELECT COUNT(*) FROM ho_reservations) AS reservations, \
                 (SELECT COUNT(*) FROM ho_attempts) AS attempts",
            )
            .fetch_one(&mut *tx)
            .await
            .map_err(in_txn)?;
            let reservations = u(get(&row, "reservations")?, "reservations")?;
            let attempts = u(get(&row, "attempts")?, "attempts")?;
            if limits.in_flight != reservations {
                wrong.push(format!(
                    "in_flight {} != {reservations} reservations",
                    limits.in_flight
                ));
            }
            if limits.attempt_rows != attempts {
                wrong.push(format!(
                    "attempt_rows {} != {attempts} attempts",
                    limits.attempt_rows
                ));
            }
            if shards
                .windows(2)
                .any(|w| w[0].window_start != w[1].window_start)
            {
                wrong.push("the shards carry different windows".into());
            }
            let tokens = |f: fn(&ShardRow) -> u64| shards.iter().map(f).sum::<u64>();
            let room = |limit: u64, n: u64| limit.saturating_sub(n);
            let in_flight_room = room(u64::from(config.max_in_flight_migrations), reservations);
            if tokens(|s| s.in_flight_tokens) > in_flight_room {
                wrong.push(format!("in-flight tokens exceed the room {in_flight_room}"));
            }
            let attempt_room = room(config.bounds.max_attempt_rows, attempts);
            if tokens(|s| s.attempt_tokens) > attempt_room {
                wrong.push(format!("attempt tokens exceed the room {attempt_room}"));
            }
            // SCALE-1 / SCALE-2: the host count escrowed over the shards.
            let row = count("SELECT COUNT(*) AS n FROM ho_assignments")
                .fetch_one(&mut *tx)
                .await
                .map_err(in_txn)?;
            let hosts = u(get(&row, "n")?, "hosts")?;
            let counted = shards
                .iter()
                .map(|s| s.hosts)
                .fold(0i64, i64::saturating_add);
            if u64::try_from(counted).ok() != Some(hosts) {
                wrong.push(format!(
                    "hosts counted on the shards {counted} != {hosts} hosts"
                ));
            }
            let host_room = room(config.bounds.max_hosts, hosts);
            if tokens(|s| s.host_tokens) > host_room {
                wrong.push(format!("host tokens exceed the room {host_room}"));
            }
            let commit_room = room(
                u64::from(config.max_commits_per_window),
                u64::from(limits.rate.commits),
            );
            if tokens(|s| s.commit_tokens) > commit_room {
                wrong.push(format!("commit tokens exceed the room {commit_room}"));
            }
            let cells = count(
                "SELECT c.cell, c.capacity, \
                 (SELECT COUNT(*) FROM ho_assignments a WHERE a.cell = c.cell) AS assigned, \
                 (SELECT CAST(COALESCE(SUM(l.hosts), 0) AS BIGINT) FROM ho_cell_load l \
                  WHERE l.cell = c.cell) AS counted, \
                 (SELECT CAST(COALESCE(SUM(l.tokens), 0) AS BIGINT) FROM ho_cell_load l \
                  WHERE l.cell = c.cell) AS tokens, \
                 (SELECT COUNT(*) FROM ho_cell_load l WHERE l.cell = c.cell) AS load_rows \
                 FROM ho_cells c ORDER BY c.cell",
            )
            .fetch_all(&mut *tx)
            .await
            .map_err(in_txn)?;
            for r in cells {
                let cell: i64 = get(&r, "cell")?;
                let capacity = u(get(&r, "capacity")?, "capacity")?;
                let assigned = u(get(&r, "assigned")?, "assigned")?;
                let counted: i64 = get(&r, "counted")?;
                let cell_tokens: i64 = get(&r, "tokens")?;
                let load_rows: i64 = get(&r, "load_rows")?;
                if load_rows != i64::from(self.shards) {
                    wrong.push(format!("cell {cell}: {load_rows} load rows"));
                }
                if u64::try_from(counted).ok() != Some(assigned) {
                    wrong.push(format!(
                        "cell {cell}: {counted} hosts counted, {assigned} assigned"
                    ));
                }
                if u64::try_from(cell_tokens).map_or(true, |t| t > room(capacity, assigned)) {
                    wrong.push(format!(
                        "cell {cell}: {cell_tokens} host tokens, room {}",
                        room(capacity, assigned)
                    ));
                }
            }
            Ok(if wrong.is_empty() {
                Ok(())
            } else {
                Err(wrong.join("; "))
            })
        })
        .await
    }
}
