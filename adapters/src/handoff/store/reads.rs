//! Read-only queries (no lock): rows, authority, resolve, cells, measurements, activity, the
//! director's candidate pages and cursor.

use std::collections::BTreeMap;

use switchyard_core::handoff::store::{authority_of, AttemptRow, RateRow, ReservationRow};
use switchyard_core::handoff::Measurement;
use switchyard_core::handoff::{CandidateRow, PageCursor, PageQuery, SweepLeaseRow};
use switchyard_core::handoff::{CellId, Epoch, Generation, HostId, OpId, SourceAuthority};
use switchyard_core::MonoMs;

use super::codec::{
    assignment_of, attempt_of, candidate_of, cell_row_of, get, i, op_of, op_text, u, u32_of,
    AnyQuery,
};
use super::{
    begin_failed, in_txn, CellInfo, Dialect, Resolved, SqlStore, StoreFailure, StoreSnapshot,
};

impl SqlStore {
    // ----- read-only queries (no lock) -----

    /// Every row (differential test, diagnostics).
    pub async fn rows(&self) -> Result<StoreSnapshot, StoreFailure> {
        self.bounded(async {
            let mut conn = self.pool.acquire().await.map_err(begin_failed)?;
            let config = Self::settings_in(&mut conn).await?;
            let mut rows = StoreSnapshot {
                config,
                leases: BTreeMap::new(),
                cells: BTreeMap::new(),
                assignments: BTreeMap::new(),
                reservations: BTreeMap::new(),
                attempts: BTreeMap::new(),
                cooldowns: BTreeMap::new(),
                rate: RateRow::default(),
            };
            let q = |s: &'static str| sqlx::query(s);
            for r in q(
                "SELECT cell, capacity, handoff_capable, incarnation, lease_until FROM ho_cells",
            )
            .fetch_all(&mut *conn)
            .await
            .map_err(in_txn)?
            {
                let cell = CellId(u32_of(get(&r, "cell")?, "cell")?);
                rows.cells.insert(cell, cell_row_of(&r)?);
                let until = MonoMs(u(get(&r, "lease_until")?, "lease_until")?);
                if until > MonoMs::ZERO {
                    rows.leases.insert(cell, until);
                }
            }
            for r in q(
                "SELECT host, cell, epoch, incarnation, generation, desktop_capable \
                        FROM ho_assignments",
            )
            .fetch_all(&mut *conn)
            .await
            .map_err(in_txn)?
            {
                rows.assignments
                    .insert(HostId(u(get(&r, "host")?, "host")?), assignment_of(&r)?);
            }
            for r in q("SELECT op_id, host, cell, expires_at_ms FROM ho_reservations")
                .fetch_all(&mut *conn)
                .await
                .map_err(in_txn)?
            {
                rows.reservations.insert(
                    op_of(&get::<String>(&r, "op_id")?)?,
                    ReservationRow {
                        host: HostId(u(get(&r, "host")?, "host")?),
                        cell: CellId(u32_of(get(&r, "cell")?, "cell")?),
                        expires_at: MonoMs(u(get(&r, "expires_at_ms")?, "expires_at")?),
                    },
                );
            }
            for r in q(
                "SELECT op_id, host, src_cell, src_epoch, src_incarnation, src_generation, \
                        target, outcome, new_epoch, registration, recorded_at_ms FROM ho_attempts",
            )
            .fetch_all(&mut *conn)
            .await
            .map_err(in_txn)?
            {
                rows.attempts
                    .insert(op_of(&get::<String>(&r, "op_id")?)?, attempt_of(&r)?);
            }
            for r in q("SELECT host, until_ms FROM ho_cooldowns")
                .fetch_all(&mut *conn)
                .await
                .map_err(in_txn)?
            {
                rows.cooldowns.insert(
                    HostId(u(get(&r, "host")?, "host")?),
                    MonoMs(u(get(&r, "until_ms")?, "until_ms")?),
                );
            }
            // HO-S4: the one window every shard carries, and the commits of all shards.
            let r = q("SELECT MIN(window_start_ms) AS window_start_ms, \
                       CAST(SUM(commits) AS BIGINT) AS commits FROM ho_limit_shards")
            .fetch_one(&mut *conn)
            .await
            .map_err(in_txn)?;
            rows.rate = RateRow {
                window_start: MonoMs(u(get(&r, "window_start_ms")?, "window_start")?),
                commits: u32_of(get(&r, "commits")?, "commits")?,
            };
            Ok(rows)
        })
        .await
    }

    /// The current exact authority of a host (unlocked read).
    pub async fn authority(&self, host: HostId) -> Result<Option<SourceAuthority>, StoreFailure> {
        let Ok(h) = i64::try_from(host.0) else {
            return Ok(None);
        };
        self.bounded(async {
            let row = sqlx::query(
                "SELECT cell, epoch, incarnation, generation, desktop_capable FROM ho_assignments \
                 WHERE host = $1",
            )
            .bind(h)
            .fetch_optional(&self.pool)
            .await
            .map_err(begin_failed)?;
            row.map(|r| assignment_of(&r).map(|a| authority_of(host, &a)))
                .transpose()
        })
        .await
    }

    /// HO-A1: the recorded attempt of an op id, read-only (answers a duplicate request that
    /// reaches a source whose machine is gone). Never writes a fence.
    pub async fn recorded_attempt(&self, op: OpId) -> Result<Option<AttemptRow>, StoreFailure> {
        self.bounded(async {
            let row = sqlx::query(
                "SELECT host, src_cell, src_epoch, src_incarnation, src_generation, target, \
                 outcome, new_epoch, registration, recorded_at_ms FROM ho_attempts \
                 WHERE op_id = $1",
            )
            .bind(op_text(op))
            .fetch_optional(&self.pool)
            .await
            .map_err(begin_failed)?;
            row.map(|r| attempt_of(&r)).transpose()
        })
        .await
    }

    /// Resolve path: where a host is assigned and the public URL of that cell.
    pub async fn resolve(&self, host: HostId) -> Result<Option<Resolved>, StoreFailure> {
        let Ok(h) = i64::try_from(host.0) else {
            return Ok(None);
        };
        self.bounded(async {
            let row = sqlx::query(
                "SELECT a.cell, a.epoch, c.public_url FROM ho_assignments a \
                 JOIN ho_cells c ON c.cell = a.cell WHERE a.host = $1",
            )
            .bind(h)
            .fetch_optional(&self.pool)
            .await
            .map_err(begin_failed)?;
            row.map(|r| {
                Ok(Resolved {
                    cell: CellId(u32_of(get(&r, "cell")?, "cell")?),
                    epoch: Epoch(u(get(&r, "epoch")?, "epoch")?),
                    public_url: get(&r, "public_url")?,
                })
            })
            .transpose()
        })
        .await
    }

    /// A cell's row and URLs.
    pub async fn cell_info(&self, cell: CellId) -> Result<Option<CellInfo>, StoreFailure> {
        self.bounded(async {
            let row = sqlx::query(
                "SELECT capacity, handoff_capable, incarnation, public_url, internal_url \
                 FROM ho_cells WHERE cell = $1",
            )
            .bind(i64::from(cell.0))
            .fetch_optional(&self.pool)
            .await
            .map_err(begin_failed)?;
            row.map(|r| {
                Ok(CellInfo {
                    cell,
                    row: cell_row_of(&r)?,
                    public_url: get(&r, "public_url")?,
                    internal_url: get(&r, "internal_url")?,
                })
            })
            .transpose()
        })
        .await
    }

    /// HO-3: the desktop's latest measurement (written by its source cell).
    pub async fn put_measurement(
        &self,
        host: HostId,
        target: CellId,
        m: &Measurement,
    ) -> Result<(), StoreFailure> {
        let q = sqlx::query(
            "INSERT INTO ho_measurements (host, target, measured_at_ms, current_rtt_ms, \
             target_rtt_ms) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (host) DO UPDATE SET \
             target = excluded.target, measured_at_ms = excluded.measured_at_ms, \
             current_rtt_ms = excluded.current_rtt_ms, target_rtt_ms = excluded.target_rtt_ms",
        )
        .bind(i(host.0, "host")?)
        .bind(i64::from(target.0))
        .bind(i(m.measured_at.0, "measured_at")?)
        .bind(i64::from(m.current_rtt_ms))
        .bind(i64::from(m.target_rtt_ms));
        self.bounded(async { q.execute(&self.pool).await.map_err(in_txn).map(|_| ()) })
            .await
    }

    /// Desktop control activity lease (HO-10: bookkeeping only, never idleness evidence).
    pub async fn renew_activity(
        &self,
        host: HostId,
        cell: CellId,
        generation: Generation,
        until: MonoMs,
    ) -> Result<(), StoreFailure> {
        let q = sqlx::query(
            "INSERT INTO ho_activity (host, cell, generation, expires_at_ms) VALUES ($1, $2, $3, \
             $4) ON CONFLICT (host) DO UPDATE SET cell = excluded.cell, \
             generation = excluded.generation, expires_at_ms = excluded.expires_at_ms",
        )
        .bind(i(host.0, "host")?)
        .bind(i64::from(cell.0))
        .bind(i(generation.0, "generation")?)
        .bind(i(until.0, "until")?);
        self.bounded(async { q.execute(&self.pool).await.map_err(in_txn).map(|_| ()) })
            .await
    }

    /// HO-S5: release the retired source's activity (only its own lease).
    pub async fn release_activity(&self, host: HostId, cell: CellId) -> Result<(), StoreFailure> {
        let q = sqlx::query("DELETE FROM ho_activity WHERE host = $1 AND cell = $2")
            .bind(i(host.0, "host")?)
            .bind(i64::from(cell.0));
        self.bounded(async { q.execute(&self.pool).await.map_err(in_txn).map(|_| ()) })
            .await
    }

    /// The activity lease of a host, if any.
    pub async fn activity(&self, host: HostId) -> Result<Option<(CellId, MonoMs)>, StoreFailure> {
        let q = sqlx::query("SELECT cell, expires_at_ms FROM ho_activity WHERE host = $1")
            .bind(i(host.0, "host")?);
        self.bounded(async {
            let row = q.fetch_optional(&self.pool).await.map_err(begin_failed)?;
            row.map(|r| {
                Ok((
                    CellId(u32_of(get(&r, "cell")?, "cell")?),
                    MonoMs(u(get(&r, "expires_at_ms")?, "expires_at")?),
                ))
            })
            .transpose()
        })
        .await
    }

    /// HO-S1 / SCALE-3: one read-only keyset page of candidates: `after < host <= through`,
    /// `ORDER BY host LIMIT limit`. The index on `host` seeks to `after`, so a late page costs
    /// what the first one does; each target's load is one grouped read of `ho_cell_load` for
    /// the page's targets (the counts the commits keep), never a count over `ho_assignments`.
    pub async fn candidate_page(&self, q: PageQuery) -> Result<Vec<CandidateRow>, StoreFailure> {
        if self.faults.take_page_read_failure() {
            return Err(StoreFailure::Unavailable(
                "injected page read failure".into(),
            ));
        }
        let query = bind_page(sqlx::query(CANDIDATE_PAGE), q);
        self.bounded(async {
            let rows = query.fetch_all(&self.pool).await.map_err(begin_failed)?;
            rows.iter().map(candidate_of).collect()
        })
        .await
    }

    /// SCALE-3: the plan the database picks for [`Self::candidate_page`] with these binds, one
    /// line per row: PostgreSQL's `EXPLAIN` (with `analyze`: run, with actual rows and
    /// buffers; the query is read-only), SQLite's `EXPLAIN QUERY PLAN`. For diagnostics and
    /// the plan test.
    pub async fn explain_candidate_page(
        &self,
        q: PageQuery,
        analyze: bool,
    ) -> Result<Vec<String>, StoreFailure> {
        let (sql, column) = match (self.dialect, analyze) {
            (Dialect::Postgres, false) => (format!("EXPLAIN {CANDIDATE_PAGE}"), "QUERY PLAN"),
            (Dialect::Postgres, true) => (
                format!("EXPLAIN (ANALYZE, BUFFERS) {CANDIDATE_PAGE}"),
                "QUERY PLAN",
            ),
            (Dialect::Sqlite, _) => (format!("EXPLAIN QUERY PLAN {CANDIDATE_PAGE}"), "detail"),
        };
        self.bounded(async {
            let rows = bind_page(sqlx::query(&sql), q)
                .fetch_all(&self.pool)
                .await
                .map_err(begin_failed)?;
            rows.iter().map(|r| get::<String>(r, column)).collect()
        })
        .await
    }

    /// SCALE-3: the director's cursor (`None`: the start of the list; so is a cursor saved as
    /// an offset before migration 6).
    pub async fn load_cursor(&self, director: &str) -> Result<PageCursor, StoreFailure> {
        let q = sqlx::query("SELECT after_host FROM ho_director_cursors WHERE director = $1")
            .bind(director.to_owned());
        self.bounded(async {
            let row = q.fetch_optional(&self.pool).await.map_err(begin_failed)?;
            let after = match row {
                Some(r) => get::<Option<i64>>(&r, "after_host")?
                    .map(|h| u(h, "after_host").map(HostId))
                    .transpose()?,
                None => None,
            };
            Ok(PageCursor { after })
        })
        .await
    }

    pub async fn save_cursor(
        &self,
        director: &str,
        cursor: PageCursor,
    ) -> Result<(), StoreFailure> {
        let after = cursor.after.map(|h| i(h.0, "after_host")).transpose()?;
        // page_offset is the pre-SCALE-3 column (NOT NULL): kept at 0 for an older director
        // that still reads it (it restarts from the top, as an old cursor does here).
        let q = sqlx::query(
            "INSERT INTO ho_director_cursors (director, page_offset, after_host) \
             VALUES ($1, 0, $2) \
             ON CONFLICT (director) DO UPDATE SET page_offset = 0, after_host = excluded.after_host",
        )
        .bind(director.to_owned())
        .bind(after);
        self.bounded(async { q.execute(&self.pool).await.map_err(in_txn).map(|_| ()) })
            .await
    }

    /// SCALE-6: the lease row of the sweep `sweep` and its holder's name (`None`: no director
    /// claimed it yet).
    pub async fn load_sweep_lease(
        &self,
        sweep: &str,
    ) -> Result<Option<(SweepLeaseRow, String)>, StoreFailure> {
        let q = sqlx::query(
            "SELECT holder, holder_name, until_ms, epoch FROM ho_sweep_leases WHERE sweep = $1",
        )
        .bind(sweep.to_owned());
        self.bounded(async {
            let Some(r) = q.fetch_optional(&self.pool).await.map_err(begin_failed)? else {
                return Ok(None);
            };
            let row = SweepLeaseRow {
                holder: u(get(&r, "holder")?, "holder")?,
                until_ms: u(get(&r, "until_ms")?, "until_ms")?,
                epoch: u(get(&r, "epoch")?, "epoch")?,
            };
            Ok(Some((row, get::<String>(&r, "holder_name")?)))
        })
        .await
    }

    /// SCALE-6: write the core's claim `new` only if the row is still `seen` (a
    /// compare-and-set on holder and epoch; `None`: only if there is no row). `true`: taken.
    pub async fn claim_sweep_lease(
        &self,
        sweep: &str,
        seen: Option<SweepLeaseRow>,
        new: SweepLeaseRow,
        holder_name: &str,
    ) -> Result<bool, StoreFailure> {
        let holder = i(new.holder, "holder")?;
        let until = i(new.until_ms, "until_ms")?;
        let epoch = i(new.epoch, "epoch")?;
        let q = match seen {
            None => sqlx::query(
                "INSERT INTO ho_sweep_leases (sweep, holder, holder_name, until_ms, epoch) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sweep) DO NOTHING",
            )
            .bind(sweep.to_owned())
            .bind(holder)
            .bind(holder_name.to_owned())
            .bind(until)
            .bind(epoch),
            Some(old) => sqlx::query(
                "UPDATE ho_sweep_leases SET holder = $2, holder_name = $3, until_ms = $4, \
                 epoch = $5 WHERE sweep = $1 AND holder = $6 AND epoch = $7",
            )
            .bind(sweep.to_owned())
            .bind(holder)
            .bind(holder_name.to_owned())
            .bind(until)
            .bind(epoch)
            .bind(i(old.holder, "holder")?)
            .bind(i(old.epoch, "epoch")?),
        };
        self.bounded(async {
            let done = q.execute(&self.pool).await.map_err(in_txn)?;
            Ok(done.rows_affected() == 1)
        })
        .await
    }

    /// SCALE-6: [`save_cursor`](Self::save_cursor) only while `lease` (holder and epoch) still
    /// holds the sweep named `director` and has not lapsed at `now_ms`. `false`: another
    /// director took it over (nothing written).
    pub async fn save_cursor_held(
        &self,
        director: &str,
        cursor: PageCursor,
        lease: SweepLeaseRow,
        now_ms: u64,
    ) -> Result<bool, StoreFailure> {
        let after = cursor.after.map(|h| i(h.0, "after_host")).transpose()?;
        // `WHERE` on the SELECT also keeps SQLite's parser from reading ON CONFLICT as a join.
        let q = sqlx::query(
            "INSERT INTO ho_director_cursors (director, page_offset, after_host) \
             SELECT $1, 0, $2 WHERE EXISTS (SELECT 1 FROM ho_sweep_leases \
             WHERE sweep = $1 AND holder = $3 AND epoch = $4 AND until_ms > $5) \
             ON CONFLICT (director) DO UPDATE SET page_offset = 0, after_host = excluded.after_host",
        )
        .bind(director.to_owned())
        .bind(after)
        .bind(i(lease.holder, "holder")?)
        .bind(i(lease.epoch, "epoch")?)
        .bind(i(now_ms, "now_ms")?);
        self.bounded(async {
            let done = q.execute(&self.pool).await.map_err(in_txn)?;
            Ok(done.rows_affected() == 1)
        })
        .await
    }

    /// SCALE-6: hosts in the store (the director's start check of its sweep period). A full
    /// count, run once per director process at start, never per pass or page: it is bounded by
    /// the transaction timeout, and if it fails the check is only skipped (logged at DEBUG).
    pub async fn host_count(&self) -> Result<u64, StoreFailure> {
        let q = sqlx::query("SELECT COUNT(*) AS n FROM ho_assignments");
        self.bounded(async {
            let r = q.fetch_one(&self.pool).await.map_err(begin_failed)?;
            u(get(&r, "n")?, "host count")
        })
        .await
    }
}

/// SCALE-3: the page. `keys` is the keyset slice of `ho_assignments` (`$1`/`$2`: the
/// exclusive lower and inclusive upper host bound, `$3` the limit); every other per-host
/// table is read only between `$1` and the slice's last host. Without those bounds in the
/// joins PostgreSQL may read `ho_measurements` and `ho_cooldowns` from their first row on (a
/// merge join: it derives no range from `m.host = a.host`; measured 1 ms at the start, 99 ms
/// half-way through 1,000,000 hosts), or whole (a hash join: `$1`/`$2` alone span the whole
/// table on the first page). Then the load of each of the page's targets, summed over its
/// `ho_cell_load` shard rows for the page's targets only. No OFFSET and no subquery per row
/// over `ho_assignments` (the plan test checks both).
const CANDIDATE_PAGE: &str = "WITH keys AS (\
     SELECT host, cell, epoch, incarnation, generation, desktop_capable FROM ho_assignments \
     WHERE host > $1 AND host <= $2 ORDER BY host LIMIT $3), \
     page AS (\
     SELECT a.host, a.cell, a.epoch, a.incarnation, a.generation, a.desktop_capable, \
     sc.handoff_capable AS src_capable, m.target AS m_target, m.measured_at_ms, \
     m.current_rtt_ms, m.target_rtt_ms, tc.handoff_capable AS tgt_capable, \
     tc.capacity AS tgt_capacity, tc.lease_until AS tgt_lease_until, cd.until_ms \
     FROM keys a \
     JOIN ho_cells sc ON sc.cell = a.cell \
     LEFT JOIN ho_measurements m ON m.host = a.host \
     AND m.host > $1 AND m.host <= (SELECT MAX(host) FROM keys) \
     LEFT JOIN ho_cells tc ON tc.cell = m.target \
     LEFT JOIN ho_cooldowns cd ON cd.host = a.host \
     AND cd.host > $1 AND cd.host <= (SELECT MAX(host) FROM keys)) \
     SELECT p.host, p.cell, p.epoch, p.incarnation, p.generation, p.desktop_capable, \
     p.src_capable, p.m_target, p.measured_at_ms, p.current_rtt_ms, p.target_rtt_ms, \
     p.tgt_capable, p.tgt_capacity, p.tgt_lease_until, p.until_ms, \
     CAST(COALESCE(ld.hosts, 0) AS BIGINT) AS tgt_load \
     FROM page p \
     LEFT JOIN (SELECT l.cell, SUM(l.hosts) AS hosts FROM ho_cell_load l \
     WHERE l.cell IN (SELECT m_target FROM page) GROUP BY l.cell) ld ON ld.cell = p.m_target \
     ORDER BY p.host";

/// The binds of [`CANDIDATE_PAGE`]. Host ids are `0..=i64::MAX` in the store: an unbounded side
/// binds past that range, a bound beyond it saturates (nothing lies there).
fn bind_page(query: AnyQuery<'_>, q: PageQuery) -> AnyQuery<'_> {
    let key = |h: HostId| i64::try_from(h.0).unwrap_or(i64::MAX);
    query
        .bind(q.after.map_or(-1, key))
        .bind(q.through.map_or(i64::MAX, key))
        .bind(i64::from(q.limit))
}
