//! Bulk seeding for the scale bench (`benches/benches/scale.rs`): a fleet of cells and hosts
//! written by a few `generate_series` statements instead of one enrolment per host, so that a
//! million hosts take seconds. PostgreSQL only; SQLite is refused by name.
//!
//! The rows are those the ordinary path would write (a cell as `upsert_cell` writes it, with
//! one `ho_cell_load` row per limit shard; a host as `insert_host` writes it; a measurement as
//! `put_measurement` writes it), the store's bounds (SCALE-1: `max_hosts`, `max_cells` of its
//! settings) are checked under the locks that guard the counts, and every counter is kept
//! consistent: the hosts are counted on limit shard 0 and each cell's on its load row of shard
//! 0 (the exact path of `insert_host` counts them there), no host tokens are dealt, so
//! [`SqlStore::audit_limits`] holds after a seed. Every limit shard is locked first (as every
//! write that changes a host count does), and the store must be empty of cells and hosts.

use std::time::Duration;

use switchyard_core::MonoMs;

use sqlx::Executor;

use super::codec::{get, i, u};
use super::{begin_failed, in_txn, Dialect, SqlStore, StoreFailure};

/// What [`SqlStore::seed_bulk`] writes.
///
/// Cells `1..=cells`, every one capable, incarnation 1, with `capacity` and the public URL
/// `ws://cell-<id>.invalid`. Hosts `0..hosts`, epoch 1, generation 1, incarnation 1, desktop
/// capable: the first `dense_hosts` on cell 1, the others dealt round robin over the cells
/// after it (over every cell when `dense_hosts` is 0), so one cell can hold a restart's worth
/// of desktops at any fleet size. Every `measured_every`-th host (0: none) has a measurement
/// taken at `measured_at` of the next cell that is no better than its own (current 40 ms,
/// target 60 ms): a director examines it in full and finds it not improved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkSeed {
    pub cells: u32,
    pub hosts: u64,
    pub dense_hosts: u64,
    pub capacity: u32,
    pub measured_every: u64,
    pub measured_at: MonoMs,
    /// The bound of the whole seed (client side, and the server's statement timeout inside
    /// it: the store's own transaction timeout is far too short for a million rows).
    pub timeout: Duration,
}

/// Why a bulk seed wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error("bulk seeding uses generate_series: PostgreSQL only, not {0:?}")]
    Unsupported(Dialect),
    #[error(
        "bulk seeding needs a store without cells or hosts; found {cells} cells{}",
        if *hosts { " and hosts" } else { ", no hosts" }
    )]
    NotEmpty { cells: u64, hosts: bool },
    #[error("too_many_hosts: {hosts} hosts asked, the store holds at most {max}")]
    TooManyHosts { hosts: u64, max: u64 },
    #[error("too_many_cells: {cells} cells asked, the store holds at most {max}")]
    TooManyCells { cells: u64, max: u64 },
    #[error("bad seed layout: {0}")]
    Layout(String),
    #[error(transparent)]
    Store(#[from] StoreFailure),
}

impl BulkSeed {
    /// The cell host `h` is seeded on (the same rule as the SQL below).
    #[must_use]
    pub fn cell_of(&self, h: u64) -> u32 {
        if h < self.dense_hosts {
            return 1;
        }
        let (first, spread) = self.spread();
        let offset = (h - self.dense_hosts) % u64::from(spread);
        first + u32::try_from(offset).unwrap_or(0)
    }

    /// The first cell of the round robin and how many cells it deals over.
    fn spread(&self) -> (u32, u32) {
        if self.dense_hosts == 0 || self.cells == 1 {
            (1, self.cells.max(1))
        } else {
            (2, self.cells - 1)
        }
    }

    fn check(&self) -> Result<(), SeedError> {
        if self.cells == 0 {
            return Err(SeedError::Layout("no cells".into()));
        }
        if self.dense_hosts > self.hosts {
            return Err(SeedError::Layout(format!(
                "{} dense hosts of {}",
                self.dense_hosts, self.hosts
            )));
        }
        Ok(())
    }
}

impl SqlStore {
    /// Write the fleet `seed` describes in one transaction (see [`BulkSeed`]); then vacuum and
    /// analyse the tables written.
    pub async fn seed_bulk(&self, seed: &BulkSeed) -> Result<(), SeedError> {
        if self.dialect != Dialect::Postgres {
            return Err(SeedError::Unsupported(self.dialect));
        }
        seed.check()?;
        let work = async {
            let mut tx = self.begin().await?;
            let ms = seed.timeout.as_millis();
            sqlx::query(&format!("SET LOCAL statement_timeout = {ms}"))
                .execute(&mut *tx)
                .await
                .map_err(in_txn)?;
            sqlx::query(&format!("SET LOCAL lock_timeout = {ms}"))
                .execute(&mut *tx)
                .await
                .map_err(in_txn)?;
            // Every host count is guarded by the limit shards: all of them, in shard order.
            self.lock_all_shards(&mut tx).await?;
            // The cells are at most `max_cells` rows; the hosts may be a million, so they are
            // probed (one row read), not counted: a refusal costs the same on any store.
            let row = sqlx::query(
                "SELECT (SELECT COUNT(*) FROM ho_cells) AS cells, \
                 EXISTS (SELECT 1 FROM ho_assignments) AS hosts",
            )
            .fetch_one(&mut *tx)
            .await
            .map_err(in_txn)?;
            let cells = u(get(&row, "cells")?, "cells")?;
            let hosts: bool = get(&row, "hosts")?;
            if cells != 0 || hosts {
                return Ok(Err(SeedError::NotEmpty { cells, hosts }));
            }
            // SCALE-1: the bounds of the settings, read under every shard's lock (as the exact
            // path of an enrolment reads them).
            let bounds = Self::settings_in(&mut tx).await?.bounds;
            if u64::from(seed.cells) > bounds.max_cells {
                return Ok(Err(SeedError::TooManyCells {
                    cells: u64::from(seed.cells),
                    max: bounds.max_cells,
                }));
            }
            if seed.hosts > bounds.max_hosts {
                return Ok(Err(SeedError::TooManyHosts {
                    hosts: seed.hosts,
                    max: bounds.max_hosts,
                }));
            }
            let n_cells = i64::from(seed.cells);
            sqlx::query(
                "INSERT INTO ho_cells (cell, capacity, handoff_capable, incarnation, public_url, \
                 internal_url, lease_until) \
                 SELECT g, $1, 1, 1, 'ws://cell-' || g || '.invalid', '', 0 \
                 FROM generate_series(1, $2::BIGINT) AS g",
            )
            .bind(i64::from(seed.capacity))
            .bind(n_cells)
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            let (first, spread) = seed.spread();
            let dense = i(seed.dense_hosts, "dense_hosts")?;
            // The cell of host h: the SQL form of `BulkSeed::cell_of`.
            let cell_of =
                format!("CASE WHEN h < {dense} THEN 1 ELSE {first} + (h - {dense}) % {spread} END");
            if seed.hosts > 0 {
                let last = i(seed.hosts - 1, "hosts")?;
                sqlx::query(&format!(
                    "INSERT INTO ho_assignments (host, cell, epoch, incarnation, generation, \
                     desktop_capable) SELECT h, {cell_of}, 1, 1, 1, 1 \
                     FROM generate_series(0, $1::BIGINT) AS h"
                ))
                .bind(last)
                .execute(&mut *tx)
                .await
                .map_err(in_txn)?;
                if seed.measured_every > 0 && seed.cells > 1 {
                    // The next cell (wrapping), never the host's own.
                    sqlx::query(&format!(
                        "INSERT INTO ho_measurements (host, target, measured_at_ms, \
                         current_rtt_ms, target_rtt_ms) \
                         SELECT h, ({cell_of}) % $2 + 1, $3, 40, 60 \
                         FROM generate_series(0, $1::BIGINT) AS h WHERE h % $4 = 0"
                    ))
                    .bind(last)
                    .bind(n_cells)
                    .bind(i(seed.measured_at.0, "measured_at")?)
                    .bind(i(seed.measured_every, "measured_every")?)
                    .execute(&mut *tx)
                    .await
                    .map_err(in_txn)?;
                }
            }
            // One load row per cell and shard; a cell's hosts counted on its shard 0 (as
            // `insert_host` counts them), no host tokens.
            sqlx::query(
                "INSERT INTO ho_cell_load (cell, shard, hosts, tokens) \
                 SELECT c.cell, s.shard, \
                 CASE WHEN s.shard = 0 THEN COALESCE(n.hosts, 0) ELSE 0 END, 0 \
                 FROM ho_cells c CROSS JOIN ho_limit_shards s \
                 LEFT JOIN (SELECT cell, COUNT(*) AS hosts FROM ho_assignments GROUP BY cell) n \
                 ON n.cell = c.cell",
            )
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            // SCALE-2: the store's host count, escrowed over the limit shards: every host on
            // shard 0, every host token revoked (the next enrolment's exact path deals them).
            sqlx::query(
                "UPDATE ho_limit_shards SET hosts = CASE WHEN shard = 0 THEN $1 ELSE 0 END, \
                 host_tokens = 0",
            )
            .bind(i(seed.hosts, "hosts")?)
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            Self::commit(tx).await?;
            Ok::<Result<(), SeedError>, StoreFailure>(Ok(()))
        };
        let timed_out = |what: &str| {
            SeedError::Store(StoreFailure::TimedOut(format!(
                "{what} exceeded {:?}",
                seed.timeout
            )))
        };
        tokio::time::timeout(seed.timeout, work)
            .await
            .map_err(|_| timed_out("bulk seed"))???;
        // As a running store's autovacuum would have: the visibility map set (index-only
        // scans) and the planner's statistics of the new rows. Not in a transaction (VACUUM
        // runs in none), on one connection whose statement timeout is lifted and restored.
        let settle = async {
            let mut conn = self.pool.acquire().await.map_err(begin_failed)?;
            let ms = seed.timeout.as_millis();
            let store_ms = self.opts.txn_timeout.as_millis();
            for sql in [
                format!("SET statement_timeout = {ms}"),
                "VACUUM (ANALYZE) ho_cells, ho_assignments, ho_measurements, ho_cell_load".into(),
                format!("SET statement_timeout = {store_ms}"),
            ] {
                (&mut *conn).execute(sql.as_str()).await.map_err(in_txn)?;
            }
            Ok::<(), StoreFailure>(())
        };
        tokio::time::timeout(seed.timeout, settle)
            .await
            .map_err(|_| timed_out("VACUUM after the bulk seed"))??;
        Ok(())
    }
}
