//! Settings, cells and their identity lease (HO-L2), hosts, registration (HO-A4 / HO-A6), the
//! emergency-drain fence (HO-A5) and bounded migration recovery (HO-A6). Enrolment,
//! registration and the drain fence execute the core's `EnrolPlan`, `RegisterPlan` and
//! `DrainPlan` step by step.

use sqlx::AnyConnection;
use switchyard_core::handoff::store::{
    cell_lease, cell_lease_release, cell_lease_renewal, decide_upsert_cell, AssignmentRow,
    CellHeld, CellLease, CellLock, CellRow, DrainInput, DrainPlan, DrainStep, DrainWrite,
    EnrolInput, EnrolPlan, EnrolStep, LeaseLost, LimitSettings, ReapInput, ReapPlan, ReapStep,
    RegisterInput, RegisterPlan, RegisterRefusal, RegisterStep, Registration, RetentionError,
    StartRefusal, StoreConfig, StoreError as SetupRefusal, MAX_EXPIRED_PER_CALL,
};
use switchyard_core::handoff::{CellId, HostId, Incarnation, OpId, SourceAuthority};
use switchyard_core::MonoMs;

use super::codec::{
    cell_row_of, config_of, get, i, no_settings, op_of, op_text, registration_text, u,
};
use super::commit::{failed, open, take};
use super::{begin_failed, in_txn, Dialect, SqlStore, StoreFailure, Txn};

/// How a statement locks the row it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowLock {
    None,
    /// Shared with other registrations of the cell; excludes a process start's write.
    Share,
    NoKeyUpdate,
}

/// A write that must touch exactly `expected` rows (anything else fails the transaction).
fn expect_rows(rows: u64, expected: u64, what: &str) -> Result<(), StoreFailure> {
    if rows == expected {
        Ok(())
    } else {
        Err(StoreFailure::BadRow(format!(
            "{what}: {rows} rows, expected {expected}"
        )))
    }
}

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
             registration_timeout_ms = excluded.registration_timeout_ms, \
             max_hosts = excluded.max_hosts, max_cells = excluded.max_cells, \
             max_attempt_rows = excluded.max_attempt_rows"
        } else {
            "ON CONFLICT (id) DO NOTHING"
        };
        let sql = format!(
            "INSERT INTO ho_settings (id, enabled, freshness_window_ms, host_cooldown_ms, \
             max_in_flight_migrations, rate_window_ms, max_commits_per_window, \
             registration_timeout_ms, max_hosts, max_cells, max_attempt_rows) \
             VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10) {conflict}"
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
            )?)
            .bind(i(config.bounds.max_hosts, "max_hosts")?)
            .bind(i(config.bounds.max_cells, "max_cells")?)
            .bind(i(config.bounds.max_attempt_rows, "max_attempt_rows")?);
        self.bounded(async {
            let mut tx = self.begin().await?;
            // HO-S4: a limit may have been lowered: revoke the rate and concurrency tokens
            // (the next commit deals them out again under the new settings).
            self.lock_all_shards(&mut tx).await?;
            q.execute(&mut *tx).await.map_err(in_txn)?;
            // SCALE-1: so may a bound: its tokens too.
            Self::revoke_limit_tokens(&mut tx).await?;
            Self::commit(tx).await
        })
        .await
    }

    /// SCALE-1 / SCALE-4: the operator's limits (a cell's flags) into the settings row, which
    /// must exist (`put_settings` first); every other setting is left as it is. The tokens
    /// dealt under the old values are revoked, every shard locked.
    pub async fn put_limits(&self, limits: &LimitSettings) -> Result<(), StoreFailure> {
        limits
            .bounds
            .validate()
            .map_err(|e| StoreFailure::BadRow(format!("limits: {e}")))?;
        let q = sqlx::query(
            "UPDATE ho_settings SET max_in_flight_migrations = $1, rate_window_ms = $2, \
             max_commits_per_window = $3, max_hosts = $4, max_cells = $5, \
             max_attempt_rows = $6, host_cooldown_ms = $7 WHERE id = 1",
        )
        .bind(i64::from(limits.max_in_flight_migrations))
        .bind(i(limits.rate_window_ms, "rate_window_ms")?)
        .bind(i64::from(limits.max_commits_per_window))
        .bind(i(limits.bounds.max_hosts, "max_hosts")?)
        .bind(i(limits.bounds.max_cells, "max_cells")?)
        .bind(i(limits.bounds.max_attempt_rows, "max_attempt_rows")?)
        .bind(i(limits.host_cooldown_ms, "host_cooldown_ms")?);
        self.bounded(async {
            let mut tx = self.begin().await?;
            self.lock_all_shards(&mut tx).await?;
            let done = q.execute(&mut *tx).await.map_err(in_txn)?;
            if done.rows_affected() != 1 {
                return Err(no_settings());
            }
            Self::revoke_limit_tokens(&mut tx).await?;
            Self::commit(tx).await
        })
        .await
    }

    /// Every token of the global limits and of the host bound, on every shard (all locked):
    /// dealt again from the settings in force by the next exact path.
    async fn revoke_limit_tokens(tx: &mut Txn) -> Result<(), StoreFailure> {
        sqlx::query(
            "UPDATE ho_limit_shards SET commit_tokens = 0, in_flight_tokens = 0, \
             attempt_tokens = 0, host_tokens = 0",
        )
        .execute(&mut **tx)
        .await
        .map_err(in_txn)?;
        Ok(())
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
             rate_window_ms, max_commits_per_window, registration_timeout_ms, max_hosts, \
             max_cells, max_attempt_rows FROM ho_settings WHERE id = 1",
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
            if !exists {
                if let Err(refusal) = self.new_cell_room(&mut tx).await? {
                    return Ok(Err(refusal));
                }
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

    /// SCALE-1: may a new cell be added? Every shard locked first (as every cell write locks
    /// them, after its row), so two new cells are counted one after the other and the bound is
    /// never overshot; the settings and the count read after the locks. The count is over
    /// `ho_cells`, at most `max_cells` rows.
    async fn new_cell_room(&self, tx: &mut Txn) -> Result<Result<(), SetupRefusal>, StoreFailure> {
        self.lock_all_shards(tx).await?;
        let config = Self::settings_in(tx).await?;
        let cells = Self::count_in(tx, "SELECT COUNT(*) AS n FROM ho_cells").await?;
        Ok(decide_upsert_cell(false, cells, config.bounds.max_cells))
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
    ) -> Result<Result<Incarnation, StartRefusal>, StoreFailure> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let current = Self::lease_in(&mut tx, self.dialect, cell).await?;
            let (next, until) = match cell_lease(current, now, lease_ms) {
                CellLease::Held { incarnation, until } => {
                    return Ok(Err(StartRefusal::Held(CellHeld {
                        cell,
                        incarnation,
                        until,
                    })));
                }
                CellLease::Take { incarnation, until } => (incarnation, until),
            };
            // SCALE-1: a new cell id counts against `max_cells` (the reference's check).
            if current.is_none() && self.new_cell_room(&mut tx).await?.is_err() {
                return Ok(Err(StartRefusal::TooManyCells));
            }
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

    /// Setup and enrolment: assign a new host (reference `insert_host`): executes the core's
    /// [`EnrolPlan`]. SCALE-1 / SCALE-2: a constant number of statements whatever the number
    /// of hosts and cells, no count over a table, no lock on every shard on the ordinary
    /// (token) path; the plan's exact path locks every shard and sums the host count.
    pub async fn insert_host(
        &self,
        host: HostId,
        cell: CellId,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, SetupRefusal>, StoreFailure> {
        let mut plan = EnrolPlan::new(host, cell, desktop_capable, self.shards);
        self.bounded(async {
            let d = self.dialect;
            let sent = |n: u64| self.statements.sent(n);
            let mut tx: Option<Txn> = None;
            loop {
                let input = match plan.poll() {
                    EnrolStep::Begin => {
                        sent(1);
                        tx = Some(self.begin().await?);
                        EnrolInput::Begun
                    }
                    EnrolStep::ReadCell { cell } => {
                        sent(1);
                        EnrolInput::Cell(Self::cell_in(open(&mut tx)?, d, cell, RowLock::None).await?)
                    }
                    EnrolStep::LockHost { host } => {
                        sent(1);
                        let locked = Self::lock_host(open(&mut tx)?, d, host).await?;
                        EnrolInput::Host(locked.map(|l| l.row))
                    }
                    EnrolStep::LockAnyShard { hint } => {
                        sent(if d == Dialect::Postgres { 1 } else { 2 });
                        EnrolInput::Shard(Self::lock_free_shard(open(&mut tx)?, d, hint).await?)
                    }
                    EnrolStep::LockShard { shard } => {
                        sent(1);
                        EnrolInput::Shard(Some(Self::lock_shard(open(&mut tx)?, d, shard).await?))
                    }
                    EnrolStep::ReadCellTokens { cell, shard } => {
                        sent(1);
                        let (own, others) = self.cell_tokens_in(open(&mut tx)?, cell, shard).await?;
                        EnrolInput::CellTokens { own, others }
                    }
                    EnrolStep::InsertHost { host, row } => {
                        sent(1);
                        EnrolInput::Inserted(Self::insert_row(open(&mut tx)?, host, &row).await?)
                    }
                    EnrolStep::SpendEnrolment {
                        shard,
                        row,
                        cell,
                        spend_cell_token,
                    } => {
                        sent(2);
                        let tx = open(&mut tx)?;
                        let done = sqlx::query(
                            "UPDATE ho_limit_shards SET hosts = $1, host_tokens = $2 WHERE shard = $3",
                        )
                        .bind(row.hosts)
                        .bind(i(row.host_tokens, "host_tokens")?)
                        .bind(i64::from(shard))
                        .execute(&mut **tx)
                        .await
                        .map_err(in_txn)?;
                        expect_rows(done.rows_affected(), 1, "limit shard")?;
                        let done = sqlx::query(
                            "UPDATE ho_cell_load SET hosts = hosts + 1, tokens = tokens - $1 \
                             WHERE cell = $2 AND shard = $3",
                        )
                        .bind(i64::from(spend_cell_token))
                        .bind(i64::from(cell.0))
                        .bind(i64::from(shard))
                        .execute(&mut **tx)
                        .await
                        .map_err(in_txn)?;
                        expect_rows(done.rows_affected(), 1, "cell load")?;
                        EnrolInput::Written
                    }
                    EnrolStep::ToSavepoint => {
                        sent(1);
                        Self::leave_token_path(open(&mut tx)?).await?;
                        EnrolInput::AtSavepoint
                    }
                    EnrolStep::LockAllShards => {
                        sent(1);
                        EnrolInput::Shards(self.lock_all_shards(open(&mut tx)?).await?)
                    }
                    EnrolStep::ReadSettings => {
                        sent(1);
                        EnrolInput::Settings(Self::settings_in(open(&mut tx)?).await?)
                    }
                    EnrolStep::WriteEnrolExact { cell, split } => {
                        sent(2);
                        let tx = open(&mut tx)?;
                        let done = sqlx::query(
                            "UPDATE ho_limit_shards SET hosts = hosts + CASE WHEN shard = 0 THEN 1 ELSE 0 END, \
                             host_tokens = $1 + CASE WHEN shard < $2 THEN 1 ELSE 0 END",
                        )
                        .bind(i(split.base, "host_tokens")?)
                        .bind(i64::from(split.extra_below))
                        .execute(&mut **tx)
                        .await
                        .map_err(in_txn)?;
                        expect_rows(done.rows_affected(), u64::from(self.shards), "limit shards")?;
                        // HO-S4: the host counts on the cell, and the cell's host tokens are
                        // revoked (the room they stood for is one host smaller).
                        let done = sqlx::query(
                            "UPDATE ho_cell_load SET tokens = 0, \
                             hosts = hosts + CASE WHEN shard = 0 THEN 1 ELSE 0 END WHERE cell = $1",
                        )
                        .bind(i64::from(cell.0))
                        .execute(&mut **tx)
                        .await
                        .map_err(in_txn)?;
                        expect_rows(
                            done.rows_affected(),
                            u64::from(self.shards),
                            "cell load rows",
                        )?;
                        EnrolInput::Written
                    }
                    EnrolStep::Commit => {
                        sent(1);
                        Self::commit(take(&mut tx)?).await?;
                        EnrolInput::Committed
                    }
                    // Dropping an open transaction rolls it back: nothing was written.
                    EnrolStep::Done(answer) => return Ok(answer),
                    EnrolStep::Failed(fault) => return Err(failed(fault)),
                };
                plan.handle(input);
            }
        })
        .await
    }

    /// The new host's row; `false`: the host has one already (a concurrent enrolment won).
    async fn insert_row(
        tx: &mut Txn,
        host: HostId,
        row: &AssignmentRow,
    ) -> Result<bool, StoreFailure> {
        let done = sqlx::query(
            "INSERT INTO ho_assignments (host, cell, epoch, incarnation, generation, \
             desktop_capable) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (host) DO NOTHING",
        )
        .bind(i(host.0, "host")?)
        .bind(i64::from(row.cell.0))
        .bind(i(row.epoch.0, "epoch")?)
        .bind(i(row.incarnation.0, "incarnation")?)
        .bind(i(row.generation.0, "generation")?)
        .bind(i64::from(row.desktop_capable))
        .execute(&mut **tx)
        .await
        .map_err(in_txn)?;
        Ok(done.rows_affected() == 1)
    }

    /// SCALE-2: a cell's host tokens on `shard` and on every other shard (summed), read in a
    /// statement after `shard`'s lock. A cell has one load row per shard.
    async fn cell_tokens_in(
        &self,
        tx: &mut Txn,
        cell: CellId,
        shard: u32,
    ) -> Result<(i64, i64), StoreFailure> {
        let rows = sqlx::query("SELECT shard, tokens FROM ho_cell_load WHERE cell = $1")
            .bind(i64::from(cell.0))
            .fetch_all(&mut **tx)
            .await
            .map_err(in_txn)?;
        expect_rows(
            u64::try_from(rows.len()).unwrap_or(u64::MAX),
            u64::from(self.shards),
            "cell load rows",
        )?;
        let (mut own, mut others) = (0i64, 0i64);
        for r in &rows {
            let tokens: i64 = get(r, "tokens")?;
            if get::<i64>(r, "shard")? == i64::from(shard) {
                own = tokens;
            } else {
                others = others.saturating_add(tokens);
            }
        }
        Ok((own, others))
    }

    async fn cell_in(
        tx: &mut Txn,
        dialect: Dialect,
        cell: CellId,
        lock: RowLock,
    ) -> Result<Option<CellRow>, StoreFailure> {
        let sql = format!(
            "SELECT capacity, handoff_capable, incarnation FROM ho_cells WHERE cell = $1{}",
            // No key column changes under these locks, and neither may conflict with the key
            // share that a commit's foreign-key check takes on its target's row: a commit holds
            // a limit shard then, and a registration takes a shard after this lock (a
            // release); `FOR UPDATE` here would close that cycle.
            match lock {
                RowLock::None => "",
                RowLock::Share => dialect.for_share(),
                RowLock::NoKeyUpdate => dialect.for_no_key_update(),
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

    /// Reference `register_control`: executes the core's [`RegisterPlan`] (under the host
    /// lock, then the cell's lock; SCALE-2: shared, `register_cell_lock`, so the
    /// registrations of one cell run side by side).
    pub async fn register_control(
        &self,
        now: MonoMs,
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, RegisterRefusal>, StoreFailure> {
        let _ = now;
        let mut plan = RegisterPlan::new(host, cell, incarnation, desktop_capable);
        self.bounded(async {
            let d = self.dialect;
            let sent = |n: u64| self.statements.sent(n);
            let mut tx: Option<Txn> = None;
            loop {
                let input = match plan.poll() {
                    RegisterStep::Begin => {
                        sent(1);
                        tx = Some(self.begin().await?);
                        RegisterInput::Begun
                    }
                    RegisterStep::LockHost { host } => {
                        sent(1);
                        let locked = Self::lock_host(open(&mut tx)?, d, host).await?;
                        RegisterInput::Host(locked.map(|l| l.row))
                    }
                    RegisterStep::ReadCell { cell } => {
                        sent(1);
                        RegisterInput::Cell(
                            Self::cell_in(open(&mut tx)?, d, cell, RowLock::None).await?,
                        )
                    }
                    RegisterStep::LockCell { cell, lock } => {
                        sent(1);
                        let lock = match lock {
                            CellLock::Share => RowLock::Share,
                            CellLock::Exclusive => RowLock::NoKeyUpdate,
                        };
                        RegisterInput::Cell(Self::cell_in(open(&mut tx)?, d, cell, lock).await?)
                    }
                    RegisterStep::WriteCellIncarnation { cell, incarnation } => {
                        sent(1);
                        sqlx::query("UPDATE ho_cells SET incarnation = $1 WHERE cell = $2")
                            .bind(i(incarnation.0, "incarnation")?)
                            .bind(i64::from(cell.0))
                            .execute(&mut **open(&mut tx)?)
                            .await
                            .map_err(in_txn)?;
                        RegisterInput::Written
                    }
                    RegisterStep::WriteAssignment { host, row } => {
                        sent(1);
                        sqlx::query(
                            "UPDATE ho_assignments SET cell = $1, epoch = $2, incarnation = $3, \
                             generation = $4, desktop_capable = $5 WHERE host = $6",
                        )
                        .bind(i64::from(row.cell.0))
                        .bind(i(row.epoch.0, "epoch")?)
                        .bind(i(row.incarnation.0, "incarnation")?)
                        .bind(i(row.generation.0, "generation")?)
                        .bind(i64::from(row.desktop_capable))
                        .bind(i(host.0, "host")?)
                        .execute(&mut **open(&mut tx)?)
                        .await
                        .map_err(in_txn)?;
                        RegisterInput::Written
                    }
                    RegisterStep::ReadReservations { host, cell } => {
                        sent(1);
                        let rows = sqlx::query(
                            "SELECT op_id FROM ho_reservations WHERE host = $1 AND cell = $2 \
                             ORDER BY op_id",
                        )
                        .bind(i(host.0, "host")?)
                        .bind(i64::from(cell.0))
                        .fetch_all(&mut **open(&mut tx)?)
                        .await
                        .map_err(in_txn)?;
                        let ops = rows
                            .iter()
                            .map(|r| op_of(&get::<String>(r, "op_id")?))
                            .collect::<Result<Vec<_>, _>>()?;
                        RegisterInput::Reservations(ops)
                    }
                    RegisterStep::FinishReservation { op, registration } => {
                        sent(3);
                        Self::finish_reservation(open(&mut tx)?, &op_text(op), registration)
                            .await?;
                        RegisterInput::Written
                    }
                    RegisterStep::Commit => {
                        sent(1);
                        Self::commit(take(&mut tx)?).await?;
                        RegisterInput::Committed
                    }
                    // Dropping an open transaction rolls it back: a refusal wrote nothing.
                    RegisterStep::Done(answer) => return Ok(answer),
                    RegisterStep::Failed(fault) => return Err(failed(fault)),
                };
                plan.handle(input);
            }
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

    /// Reference `emergency_drain`: executes the core's [`DrainPlan`] under the host lock.
    pub async fn emergency_drain(
        &self,
        authority: &SourceAuthority,
    ) -> Result<DrainWrite, StoreFailure> {
        let mut plan = DrainPlan::new(authority);
        self.bounded(async {
            let sent = |n: u64| self.statements.sent(n);
            let mut tx: Option<Txn> = None;
            loop {
                let input = match plan.poll() {
                    DrainStep::Begin => {
                        sent(1);
                        tx = Some(self.begin().await?);
                        DrainInput::Begun
                    }
                    DrainStep::LockHost { host } => {
                        sent(1);
                        let locked = Self::lock_host(open(&mut tx)?, self.dialect, host).await?;
                        DrainInput::Host(locked.map(|l| l.row))
                    }
                    DrainStep::WriteGeneration { host, generation } => {
                        sent(1);
                        sqlx::query("UPDATE ho_assignments SET generation = $1 WHERE host = $2")
                            .bind(i(generation.0, "generation")?)
                            .bind(i(host.0, "host")?)
                            .execute(&mut **open(&mut tx)?)
                            .await
                            .map_err(in_txn)?;
                        DrainInput::Written
                    }
                    DrainStep::Commit => {
                        sent(1);
                        Self::commit(take(&mut tx)?).await?;
                        DrainInput::Committed
                    }
                    // Dropping an open transaction rolls it back: nothing was written.
                    DrainStep::Done(answer) => return Ok(answer),
                    DrainStep::Failed(fault) => return Err(failed(fault)),
                };
                plan.handle(input);
            }
        })
        .await
    }

    // ----- HO-A6: bounded migration recovery -----

    /// Reference `expire_migrations`: at most `MAX_EXPIRED_PER_CALL` expired reservations, in
    /// op-id order, each released under its host lock (one short transaction each).
    pub async fn expire_migrations(&self, now: MonoMs) -> Result<Vec<OpId>, StoreFailure> {
        self.expire_migrations_up_to(now, MAX_EXPIRED_PER_CALL)
            .await
    }

    /// Reference `expire_migrations_up_to` (HO-L4: the director's `--max-expired-per-pass`):
    /// at most `max` expired reservations, as [`Self::expire_migrations`].
    pub async fn expire_migrations_up_to(
        &self,
        now: MonoMs,
        max: usize,
    ) -> Result<Vec<OpId>, StoreFailure> {
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
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

    // ----- HO-L4: history bounded by retention -----

    /// Reference `reap_attempts`: executes the core's [`ReapPlan`] in one short transaction:
    /// at most `batch` ended attempt records recorded at or before `now - retention_ms`
    /// deleted, oldest first (`recorded_at_ms`, then `op_id`: the index of migration 8), and
    /// one limit shard's `attempt_rows` lowered by as many. `Ok(Err(_))`: the retention is
    /// refused (nothing written).
    pub async fn reap_attempts(
        &self,
        now: MonoMs,
        retention_ms: u64,
        batch: u32,
    ) -> Result<Result<u32, RetentionError>, StoreFailure> {
        let mut plan = ReapPlan::new(now, retention_ms, batch);
        let d = self.dialect;
        self.bounded(async {
            let sent = |n: u64| self.statements.sent(n);
            let mut tx: Option<Txn> = None;
            loop {
                let input = match plan.poll() {
                    ReapStep::Begin => {
                        sent(1);
                        tx = Some(self.begin().await?);
                        ReapInput::Begun
                    }
                    ReapStep::ReadSettings => {
                        sent(1);
                        ReapInput::Settings(Self::settings_in(open(&mut tx)?).await?)
                    }
                    ReapStep::DeleteEnded { cutoff, batch } => {
                        sent(1);
                        // The ended condition twice: in the pick, and re-checked on the row
                        // deleted (an ended record never becomes pending again anyway).
                        let done = sqlx::query(
                            "DELETE FROM ho_attempts WHERE op_id IN (\
                             SELECT op_id FROM ho_attempts WHERE recorded_at_ms <= $1 \
                             AND (outcome <> 'committed' OR registration <> 'pending') \
                             ORDER BY recorded_at_ms, op_id LIMIT $2) \
                             AND (outcome <> 'committed' OR registration <> 'pending')",
                        )
                        .bind(i(cutoff.0, "cutoff")?)
                        .bind(i64::from(batch))
                        .execute(&mut **open(&mut tx)?)
                        .await
                        .map_err(in_txn)?;
                        let removed = u32::try_from(done.rows_affected()).map_err(|_| {
                            StoreFailure::BadRow(format!(
                                "reap removed {} rows",
                                done.rows_affected()
                            ))
                        })?;
                        ReapInput::Deleted(removed)
                    }
                    ReapStep::LockAnyShard { hint } => {
                        sent(1);
                        ReapInput::Shard(Self::lock_any_shard(open(&mut tx)?, d, hint).await?)
                    }
                    ReapStep::LockShard { shard } => {
                        sent(1);
                        ReapInput::Shard(Some(Self::lock_shard(open(&mut tx)?, d, shard).await?))
                    }
                    ReapStep::WriteShard { shard, row } => {
                        sent(1);
                        Self::write_shard_attempt_rows(open(&mut tx)?, shard, &row).await?;
                        ReapInput::Written
                    }
                    ReapStep::Commit => {
                        sent(1);
                        Self::commit(take(&mut tx)?).await?;
                        ReapInput::Committed
                    }
                    // Dropping an open transaction rolls it back: nothing was written.
                    ReapStep::Done(answer) => return Ok(answer),
                    ReapStep::Failed(fault) => return Err(failed(fault)),
                };
                plan.handle(input);
            }
        })
        .await
    }
}
