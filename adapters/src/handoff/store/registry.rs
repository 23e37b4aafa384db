//! Settings, cells and their identity lease (HO-L2), hosts, registration (HO-A4 / HO-A6), the
//! emergency-drain fence (HO-A5) and bounded migration recovery (HO-A6).

use sqlx::AnyConnection;
use switchyard_core::handoff::ids::{CellId, HostId, Incarnation, OpId, SourceAuthority};
use switchyard_core::handoff::store::{
    authority_of, cell_lease, cell_lease_release, cell_lease_renewal, decide_insert_host,
    decide_register, decide_upsert_cell, drain_fence, CellHeld, CellLease, CellRow, DrainWrite,
    LeaseLost, RegisterRefusal, Registration, StoreConfig, StoreError as SetupRefusal,
    MAX_EXPIRED_PER_CALL,
};
use switchyard_core::MonoMs;

use super::codec::{cell_row_of, config_of, get, i, no_settings, op_of, registration_text, u};
use super::{begin_failed, in_txn, Dialect, SqlStore, StoreFailure, Txn};

impl SqlStore {
    // ----- settings and setup -----

    /// Write the settings row (`overwrite = false`: only if none exists yet).
    pub async fn put_settings(
        &self,
        config: &StoreConfig,
        overwrite: bool,
    ) -> Result<(), StoreFailure> {
        let conflict = if overwrite {
            "ON CONFLICT (id) DO UPDATE SET enabled = excluded.enabled, \
             freshness_window_ms = excluded.freshness_window_ms, \
             host_cooldown_ms = excluded.host_cooldown_ms, \
             max_in_flight_migrations = excluded.max_in_flight_migrations, \
             rate_window_ms = excluded.rate_window_ms, \
             max_commits_per_window = excluded.max_commits_per_window, \
             registration_timeout_ms = excluded.registration_timeout_ms"
        } else {
            "ON CONFLICT (id) DO NOTHING"
        };
        let sql = format!(
            "INSERT INTO ho_settings (id, enabled, freshness_window_ms, host_cooldown_ms, \
             max_in_flight_migrations, rate_window_ms, max_commits_per_window, \
             registration_timeout_ms) VALUES (1, $1, $2, $3, $4, $5, $6, $7) {conflict}"
        );
        let q = sqlx::query(&sql)
            .bind(i64::from(config.enabled))
            .bind(i(config.policy.freshness_window_ms, "freshness_window_ms")?)
            .bind(i(config.policy.host_cooldown_ms, "host_cooldown_ms")?)
            .bind(i64::from(config.max_in_flight_migrations))
            .bind(i(config.rate_window_ms, "rate_window_ms")?)
            .bind(i64::from(config.max_commits_per_window))
            .bind(i(
                config.registration_timeout_ms,
                "registration_timeout_ms",
            )?);
        self.bounded(async {
            let mut tx = self.begin().await?;
            // HO-S4: a limit may have been lowered: revoke the rate and concurrency tokens
            // (the next commit deals them out again under the new settings).
            self.lock_all_shards(&mut tx).await?;
            q.execute(&mut *tx).await.map_err(in_txn)?;
            sqlx::query("UPDATE ho_limit_shards SET commit_tokens = 0, in_flight_tokens = 0")
                .execute(&mut *tx)
                .await
                .map_err(in_txn)?;
            Self::commit(tx).await
        })
        .await
    }

    /// HO-A5: the persistent enable switch.
    pub async fn set_enabled(&self, enabled: bool) -> Result<(), StoreFailure> {
        let q = sqlx::query("UPDATE ho_settings SET enabled = $1 WHERE id = 1")
            .bind(i64::from(enabled));
        self.bounded(async { q.execute(&self.pool).await.map_err(in_txn).map(|_| ()) })
            .await
    }

    pub(super) async fn settings_in(conn: &mut AnyConnection) -> Result<StoreConfig, StoreFailure> {
        let row = sqlx::query(
            "SELECT enabled, freshness_window_ms, host_cooldown_ms, max_in_flight_migrations, \
             rate_window_ms, max_commits_per_window, registration_timeout_ms \
             FROM ho_settings WHERE id = 1",
        )
        .fetch_optional(&mut *conn)
        .await
        .map_err(in_txn)?
        .ok_or_else(no_settings)?;
        config_of(&row)
    }

    pub async fn settings(&self) -> Result<StoreConfig, StoreFailure> {
        self.bounded(async {
            let mut conn = self.pool.acquire().await.map_err(begin_failed)?;
            Self::settings_in(&mut conn).await
        })
        .await
    }

    /// Setup: add or replace a cell row (reference `upsert_cell`, [`decide_upsert_cell`]; URLs
    /// and lease kept).
    pub async fn upsert_cell(
        &self,
        cell: CellId,
        row: CellRow,
    ) -> Result<Result<(), SetupRefusal>, StoreFailure> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let exists = sqlx::query("SELECT cell FROM ho_cells WHERE cell = $1")
                .bind(i64::from(cell.0))
                .fetch_optional(&mut *tx)
                .await
                .map_err(in_txn)?
                .is_some();
            // The count only matters for a new cell: an existing one is never refused.
            let cell_count = if exists {
                0
            } else {
                Self::count_in(&mut tx, "SELECT COUNT(*) AS n FROM ho_cells").await?
            };
            if let Err(refusal) = decide_upsert_cell(exists, cell_count) {
                return Ok(Err(refusal));
            }
            sqlx::query(
                "INSERT INTO ho_cells (cell, capacity, handoff_capable, incarnation) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (cell) DO UPDATE SET \
                 capacity = excluded.capacity, handoff_capable = excluded.handoff_capable, \
                 incarnation = excluded.incarnation",
            )
            .bind(i64::from(cell.0))
            .bind(i64::from(row.capacity))
            .bind(i64::from(row.handoff_capable))
            .bind(i(row.incarnation.0, "incarnation")?)
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            self.cell_changed(&mut tx, cell).await?;
            Self::commit(tx).await?;
            Ok(Ok(()))
        })
        .await
    }

    /// HO-S4: after a cell row was written (under its lock): the cell has its load rows, and
    /// its host tokens are revoked (its capacity may have been lowered). Every shard locked
    /// first, so no token commit is between reading and spending one.
    async fn cell_changed(&self, tx: &mut Txn, cell: CellId) -> Result<(), StoreFailure> {
        self.lock_all_shards(tx).await?;
        Self::create_load_rows(tx, cell).await?;
        Self::revoke_cell_tokens(tx, cell).await
    }

    /// A `SELECT COUNT(*) AS n` inside a transaction.
    async fn count_in(tx: &mut Txn, sql: &'static str) -> Result<u64, StoreFailure> {
        let row = sqlx::query(sql)
            .fetch_one(&mut **tx)
            .await
            .map_err(in_txn)?;
        u(get(&row, "n")?, "count")
    }

    /// HO-L2: the cell's incarnation and lease end, read under the cell row's lock (its
    /// callers change no key column).
    async fn lease_in(
        tx: &mut Txn,
        dialect: Dialect,
        cell: CellId,
    ) -> Result<Option<(Incarnation, MonoMs)>, StoreFailure> {
        let sql = format!(
            "SELECT incarnation, lease_until FROM ho_cells WHERE cell = $1{}",
            dialect.for_no_key_update()
        );
        let row = sqlx::query(&sql)
            .bind(i64::from(cell.0))
            .fetch_optional(&mut **tx)
            .await
            .map_err(in_txn)?;
        row.map(|r| {
            Ok((
                Incarnation(u(get(&r, "incarnation")?, "incarnation")?),
                MonoMs(u(get(&r, "lease_until")?, "lease_until")?),
            ))
        })
        .transpose()
    }

    /// A cell process starts (HO-L2): under the cell row's lock, [`cell_lease`] decides. A cell
    /// whose lease is still live belongs to another process: nothing is written and the holder
    /// is returned. Otherwise the incarnation becomes one more than the last one recorded (a
    /// restart isolates everything the old process held), the row is refreshed and leased.
    #[allow(clippy::too_many_arguments)]
    pub async fn start_cell(
        &self,
        cell: CellId,
        capacity: u32,
        handoff_capable: bool,
        public_url: &str,
        internal_url: &str,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<Result<Incarnation, CellHeld>, StoreFailure> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let current = Self::lease_in(&mut tx, self.dialect, cell).await?;
            let (next, until) = match cell_lease(current, now, lease_ms) {
                CellLease::Held { incarnation, until } => {
                    return Ok(Err(CellHeld {
                        cell,
                        incarnation,
                        until,
                    }));
                }
                CellLease::Take { incarnation, until } => (incarnation, until),
            };
            sqlx::query(
                "INSERT INTO ho_cells (cell, capacity, handoff_capable, incarnation, public_url, \
                 internal_url, lease_until) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (cell) DO UPDATE SET \
                 capacity = excluded.capacity, handoff_capable = excluded.handoff_capable, \
                 incarnation = excluded.incarnation, public_url = excluded.public_url, \
                 internal_url = excluded.internal_url, lease_until = excluded.lease_until",
            )
            .bind(i64::from(cell.0))
            .bind(i64::from(capacity))
            .bind(i64::from(handoff_capable))
            .bind(i(next.0, "incarnation")?)
            .bind(public_url.to_owned())
            .bind(internal_url.to_owned())
            .bind(i(until.as_ms(), "lease_until")?)
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            self.cell_changed(&mut tx, cell).await?;
            Self::commit(tx).await?;
            Ok(Ok(next))
        })
        .await
    }

    /// HO-L2: the running process keeps its cell for another `lease_ms`
    /// ([`cell_lease_renewal`]). `false`: another process has taken the cell (a newer
    /// incarnation); this one no longer owns it.
    pub async fn renew_cell_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<bool, StoreFailure> {
        self.write_lease(cell, |current| {
            cell_lease_renewal(current, incarnation, now, lease_ms)
        })
        .await
    }

    /// HO-L2: a graceful stop ends the lease, so a successor may start at once
    /// ([`cell_lease_release`]). `false`: the cell was no longer this process's.
    pub async fn release_cell_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
    ) -> Result<bool, StoreFailure> {
        self.write_lease(cell, |current| cell_lease_release(current, incarnation))
            .await
    }

    /// HO-L2: under the cell row's lock, `decide` maps the lease read to its new end (written)
    /// or to the loss of the cell (nothing written, `false`).
    async fn write_lease(
        &self,
        cell: CellId,
        decide: impl FnOnce(Option<(Incarnation, MonoMs)>) -> Result<MonoMs, LeaseLost>,
    ) -> Result<bool, StoreFailure> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let current = Self::lease_in(&mut tx, self.dialect, cell).await?;
            let Ok(until) = decide(current) else {
                return Ok(false);
            };
            let done = sqlx::query("UPDATE ho_cells SET lease_until = $1 WHERE cell = $2")
                .bind(i(until.as_ms(), "lease_until")?)
                .bind(i64::from(cell.0))
                .execute(&mut *tx)
                .await
                .map_err(in_txn)?;
            if done.rows_affected() != 1 {
                return Err(StoreFailure::BadRow(format!(
                    "lease update of cell {} touched {} rows",
                    cell.0,
                    done.rows_affected()
                )));
            }
            Self::commit(tx).await?;
            Ok(true)
        })
        .await
    }

    /// Setup: assign a new host (reference `insert_host`, [`decide_insert_host`]).
    pub async fn insert_host(
        &self,
        host: HostId,
        cell: CellId,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, SetupRefusal>, StoreFailure> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let cell_row = Self::cell_in(&mut tx, self.dialect, cell, false).await?;
            let exists = Self::lock_host(&mut tx, self.dialect, host)
                .await?
                .is_some();
            let host_count =
                Self::count_in(&mut tx, "SELECT COUNT(*) AS n FROM ho_assignments").await?;
            let row = match decide_insert_host(cell_row, exists, host_count, cell, desktop_capable)
            {
                Ok(row) => row,
                Err(refusal) => return Ok(Err(refusal)),
            };
            sqlx::query(
                "INSERT INTO ho_assignments (host, cell, epoch, incarnation, generation, \
                 desktop_capable) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(i(host.0, "host")?)
            .bind(i64::from(row.cell.0))
            .bind(i(row.epoch.0, "epoch")?)
            .bind(i(row.incarnation.0, "incarnation")?)
            .bind(i(row.generation.0, "generation")?)
            .bind(i64::from(row.desktop_capable))
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            // HO-S4: the host counts on the cell, and the cell's host tokens are revoked (the
            // room they stood for is one host smaller). Every shard locked first.
            self.lock_all_shards(&mut tx).await?;
            let done = sqlx::query(
                "UPDATE ho_cell_load SET tokens = 0, \
                 hosts = hosts + CASE WHEN shard = 0 THEN 1 ELSE 0 END WHERE cell = $1",
            )
            .bind(i64::from(row.cell.0))
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            if done.rows_affected() != u64::from(self.shards) {
                return Err(StoreFailure::BadRow(format!(
                    "cell {} has {} load rows, expected one per shard ({})",
                    row.cell.0,
                    done.rows_affected(),
                    self.shards
                )));
            }
            Self::commit(tx).await?;
            Ok(Ok(authority_of(host, &row)))
        })
        .await
    }

    async fn cell_in(
        tx: &mut Txn,
        dialect: Dialect,
        cell: CellId,
        lock: bool,
    ) -> Result<Option<CellRow>, StoreFailure> {
        let sql = format!(
            "SELECT capacity, handoff_capable, incarnation FROM ho_cells WHERE cell = $1{}",
            // No key column changes under this lock, and it must not conflict with the key
            // share that a commit's foreign-key check takes on its target's row: a commit holds
            // a limit shard then, and a registration takes a shard after this lock (a
            // release); `FOR UPDATE` here would close that cycle.
            if lock {
                dialect.for_no_key_update()
            } else {
                ""
            }
        );
        let row = sqlx::query(&sql)
            .bind(i64::from(cell.0))
            .fetch_optional(&mut **tx)
            .await
            .map_err(in_txn)?;
        row.map(|r| cell_row_of(&r)).transpose()
    }

    // ----- HO-A4 / HO-A6: registration -----

    /// Reference `register_control`: under the host lock, then the cell's lock,
    /// [`decide_register`] over the rows read; its row, the cell's incarnation and the
    /// completed reservations of (host, cell) are written.
    pub async fn register_control(
        &self,
        now: MonoMs,
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, RegisterRefusal>, StoreFailure> {
        let _ = now;
        self.bounded(async {
            let d = self.dialect;
            let mut tx = self.begin().await?;
            let current = Self::lock_host(&mut tx, d, host).await?.map(|l| l.row);
            // An unknown host is refused whatever the cell: its lock is not taken.
            let cell_row = match current {
                Some(_) => Self::cell_in(&mut tx, d, cell, true).await?,
                None => None,
            };
            let new_row =
                match decide_register(current, cell_row, cell, incarnation, desktop_capable) {
                    Ok(row) => row,
                    // Nothing written: dropping the transaction rolls it back.
                    Err(refusal) => return Ok(Err(refusal)),
                };
            sqlx::query("UPDATE ho_cells SET incarnation = $1 WHERE cell = $2")
                .bind(i(new_row.incarnation.0, "incarnation")?)
                .bind(i64::from(cell.0))
                .execute(&mut *tx)
                .await
                .map_err(in_txn)?;
            let h = i(host.0, "host")?;
            sqlx::query(
                "UPDATE ho_assignments SET cell = $1, epoch = $2, incarnation = $3, \
                 generation = $4, desktop_capable = $5 WHERE host = $6",
            )
            .bind(i64::from(new_row.cell.0))
            .bind(i(new_row.epoch.0, "epoch")?)
            .bind(i(new_row.incarnation.0, "incarnation")?)
            .bind(i(new_row.generation.0, "generation")?)
            .bind(i64::from(new_row.desktop_capable))
            .bind(h)
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            let done = sqlx::query(
                "SELECT op_id FROM ho_reservations WHERE host = $1 AND cell = $2 ORDER BY op_id",
            )
            .bind(h)
            .bind(i64::from(cell.0))
            .fetch_all(&mut *tx)
            .await
            .map_err(in_txn)?;
            for r in done {
                let op: String = get(&r, "op_id")?;
                Self::finish_reservation(&mut tx, &op, Registration::Registered).await?;
            }
            Self::commit(tx).await?;
            Ok(Ok(authority_of(host, &new_row)))
        })
        .await
    }

    async fn finish_reservation(
        tx: &mut Txn,
        op: &str,
        registration: Registration,
    ) -> Result<(), StoreFailure> {
        // HO-S4: the release is subtracted on the shard that counted the reservation (its
        // tokens stay: the room it frees is dealt out by the next exact path).
        sqlx::query(
            "UPDATE ho_limit_shards SET in_flight = in_flight - 1 \
             WHERE shard = (SELECT shard FROM ho_reservations WHERE op_id = $1)",
        )
        .bind(op.to_owned())
        .execute(&mut **tx)
        .await
        .map_err(in_txn)?;
        sqlx::query("DELETE FROM ho_reservations WHERE op_id = $1")
            .bind(op.to_owned())
            .execute(&mut **tx)
            .await
            .map_err(in_txn)?;
        sqlx::query(
            "UPDATE ho_attempts SET registration = $1 WHERE op_id = $2 \
             AND outcome = 'committed' AND registration = 'pending'",
        )
        .bind(registration_text(registration))
        .bind(op.to_owned())
        .execute(&mut **tx)
        .await
        .map_err(in_txn)?;
        Ok(())
    }

    // ----- HO-A5: the emergency-drain fence -----

    /// Reference `emergency_drain`, under the host lock.
    pub async fn emergency_drain(
        &self,
        authority: &SourceAuthority,
    ) -> Result<DrainWrite, StoreFailure> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let locked = Self::lock_host(&mut tx, self.dialect, authority.host).await?;
            let new_row = match drain_fence(authority, locked.map(|l| l.row)) {
                Ok(new_row) => new_row,
                // Nothing written: dropping the transaction rolls it back.
                Err(answer) => return Ok(answer),
            };
            sqlx::query("UPDATE ho_assignments SET generation = $1 WHERE host = $2")
                .bind(i(new_row.generation.0, "generation")?)
                .bind(i(authority.host.0, "host")?)
                .execute(&mut *tx)
                .await
                .map_err(in_txn)?;
            Self::commit(tx).await?;
            Ok(DrainWrite::Fenced {
                authority: authority_of(authority.host, &new_row),
            })
        })
        .await
    }

    // ----- HO-A6: bounded migration recovery -----

    /// Reference `expire_migrations`: at most `MAX_EXPIRED_PER_CALL` expired reservations, in
    /// op-id order, each released under its host lock (one short transaction each).
    pub async fn expire_migrations(&self, now: MonoMs) -> Result<Vec<OpId>, StoreFailure> {
        let limit = i64::try_from(MAX_EXPIRED_PER_CALL).unwrap_or(i64::MAX);
        let n = i(now.0, "now")?;
        let rows = self
            .bounded(async {
                sqlx::query(
                    "SELECT op_id, host FROM ho_reservations WHERE expires_at_ms <= $1 \
                     ORDER BY op_id LIMIT $2",
                )
                .bind(n)
                .bind(limit)
                .fetch_all(&self.pool)
                .await
                .map_err(begin_failed)
            })
            .await?;
        let mut expired = Vec::new();
        for r in rows {
            let op: String = get(&r, "op_id")?;
            let host = HostId(u(get(&r, "host")?, "host")?);
            let released = self
                .bounded(async {
                    let mut tx = self.begin().await?;
                    let _ = Self::lock_host(&mut tx, self.dialect, host).await?;
                    let still = sqlx::query(
                        "SELECT op_id FROM ho_reservations WHERE op_id = $1 AND expires_at_ms <= $2",
                    )
                    .bind(op.clone())
                    .bind(n)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(in_txn)?;
                    if still.is_none() {
                        return Ok(false);
                    }
                    Self::finish_reservation(&mut tx, &op, Registration::RecoveryStarted).await?;
                    Self::commit(tx).await?;
                    Ok(true)
                })
                .await?;
            if released {
                expired.push(op_of(&op)?);
            }
        }
        Ok(expired)
    }
}
