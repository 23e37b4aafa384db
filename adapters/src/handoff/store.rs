//! The SQL assignment store (HO-S4, HO-A1, HO-A2, HO-A4..A6): PostgreSQL in production, SQLite
//! in a file as the embedded default, through one sqlx `Any` code path; the statements are the
//! same on both backends except where one data-modifying statement (PostgreSQL) replaces a
//! statement per table (SQLite, which has no round trips to save).
//!
//! Every write method is one bounded transaction with the outcome and rows of the reference
//! `switchyard_core::handoff::store::AssignmentStore` method of the same name. The assignment
//! transaction reads its facts and lets the core decide: `claim_check`, `recorded_outcome`,
//! `commit_precheck`, `decide_commit` and `commit_writes` are the very functions the reference
//! calls, so the check order and the rows written are defined once, in the core. The
//! differential test (`tests/handoff_store_diff.rs`) replays generated sequences against the
//! reference, SQLite and PostgreSQL and compares outcomes and rows after every step; the
//! concurrency test (`tests/handoff_store_concurrency.rs`) queues PostgreSQL transactions on
//! the host lock and on the limits lock.
//!
//! Serialisation: PostgreSQL takes `SELECT … FOR UPDATE` on the host's `ho_assignments` row
//! first, then (where needed) the `ho_cells` row, then the global `ho_limits` row — one fixed
//! order, so no deadlock; `statement_timeout`, `lock_timeout` and
//! `idle_in_transaction_session_timeout` bound the server side, a tokio timeout the client
//! side. SQLite uses `BEGIN IMMEDIATE` (the single writer lock) with a busy timeout. No network
//! call other than the transaction's own statements happens while a lock is held.
//!
//! A commit holds `ho_limits` (which every commit and fence takes, so commits serialise on it)
//! for three round trips only: the lock, one statement that writes the commit's rows and
//! counts the target's hosts and the live reservations, and COMMIT. Everything about the
//! request's own host is read before, under the host lock alone; a request refused by those
//! facts never takes the global lock. Values that other commits change are read only in a
//! statement that started after `ho_limits` was granted: under READ COMMITTED a statement that
//! waited for a row lock reads the rest of the database with the snapshot it started with.
//! For the same reason the facts are read in a statement of their own after the host lock (a
//! duplicate of the op id that held the host lock just before must be seen).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::{AnyConnection, AnyPool, Executor, Row};
use switchyard_core::handoff::attempt::{Ambiguity, DurableResult};
use switchyard_core::handoff::director::{CandidateRow, CandidateView, TargetView};
use switchyard_core::handoff::ids::{
    AuthorityCheck, AuthorityField, CellId, Epoch, Generation, HostId, Incarnation, OpId,
    SourceAuthority,
};
use switchyard_core::handoff::policy::{self, HandoffRequest, Measurement};
use switchyard_core::handoff::store::{
    authority_of, cell_lease, claim_check, commit_precheck, commit_writes, decide_commit,
    drain_fence, recorded_outcome, AbortReason, AssignmentRow, AssignmentStore, AttemptOutcome,
    AttemptRow, CellLease, CellRow, CommitFacts, CommitWrites, DrainWrite, HostFacts, LimitFacts,
    RateRow, RegisterRefusal, Registration, ReservationRow, StoreConfig,
    StoreError as SetupRefusal, TxnOutcome, MAX_ATTEMPT_ROWS, MAX_EXPIRED_PER_CALL,
    MAX_STORE_CELLS, MAX_STORE_HOSTS,
};
use switchyard_core::MonoMs;

/// Which SQL dialect the `Any` pool speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    Sqlite,
}

impl Dialect {
    fn of_url(url: &str) -> Option<Dialect> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Dialect::Postgres)
        } else if url.starts_with("sqlite:") {
            Some(Dialect::Sqlite)
        } else {
            None
        }
    }

    /// The statement that opens a write transaction.
    fn begin(self) -> &'static str {
        match self {
            Dialect::Postgres => "BEGIN",
            // HO-S4 on SQLite: take the write lock up front (a deferred BEGIN that reads first
            // can fail its upgrade with a busy-snapshot error no busy timeout waits out).
            Dialect::Sqlite => "BEGIN IMMEDIATE",
        }
    }

    /// Row-lock suffix of a locking read.
    fn for_update(self) -> &'static str {
        match self {
            Dialect::Postgres => " FOR UPDATE",
            Dialect::Sqlite => "",
        }
    }
}

/// Connection and timeout settings of a store.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// Client-side bound of one whole transaction (the server-side statement timeout is the
    /// same; the source's request timeout must be longer).
    pub txn_timeout: Duration,
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// SQLite: how long a writer waits for the lock.
    pub sqlite_busy_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            txn_timeout: Duration::from_secs(3),
            max_connections: 8,
            acquire_timeout: Duration::from_secs(2),
            sqlite_busy_timeout: Duration::from_secs(2),
        }
    }
}

/// Why a store call did not produce a durable answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreFailure {
    /// Nothing ran (no connection, no transaction): durable access is unavailable.
    #[error("assignment store unavailable: {0}")]
    Unavailable(String),
    /// The transaction may or may not have committed.
    #[error("assignment store outcome unknown ({kind:?}): {detail}")]
    Ambiguous { kind: Ambiguity, detail: String },
    /// A row or value the store returned is out of range: treated as unavailable (quarantine).
    #[error("assignment store returned an invalid row: {0}")]
    BadRow(String),
}

impl StoreFailure {
    /// HO-A2: how the source machine must read this failure. Never a rollback.
    #[must_use]
    pub fn durable_result(&self) -> DurableResult {
        match self {
            StoreFailure::Unavailable(_) | StoreFailure::BadRow(_) => {
                DurableResult::StoreUnavailable
            }
            StoreFailure::Ambiguous { kind, .. } => DurableResult::Ambiguous(*kind),
        }
    }
}

/// Errors of setup and of the read-only queries.
#[derive(Debug, thiserror::Error)]
pub enum StoreSetupError {
    #[error("unsupported database URL {0:?}: expected postgres://… or sqlite:…")]
    UnsupportedUrl(String),
    #[error("cannot connect to {url}: {source}")]
    Connect { url: String, source: sqlx::Error },
    #[error("schema migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreFailure),
}

/// Every row of the store, in the reference's shapes (for the differential test and for
/// diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    pub config: StoreConfig,
    pub cells: BTreeMap<CellId, CellRow>,
    pub assignments: BTreeMap<HostId, AssignmentRow>,
    pub reservations: BTreeMap<OpId, ReservationRow>,
    pub attempts: BTreeMap<OpId, AttemptRow>,
    pub cooldowns: BTreeMap<HostId, MonoMs>,
    pub rate: RateRow,
}

impl Rows {
    /// The rows of a reference store, for the cells and hosts a test created.
    #[must_use]
    pub fn of_reference(store: &AssignmentStore, cells: &[CellId], hosts: &[HostId]) -> Rows {
        Rows {
            config: *store.config(),
            cells: cells
                .iter()
                .filter_map(|c| store.cell(*c).map(|r| (*c, *r)))
                .collect(),
            assignments: hosts
                .iter()
                .filter_map(|h| store.assignment(*h).map(|r| (*h, *r)))
                .collect(),
            reservations: store.reservations().map(|(k, v)| (*k, *v)).collect(),
            attempts: store.attempts().map(|(k, v)| (*k, *v)).collect(),
            cooldowns: hosts
                .iter()
                .filter_map(|h| store.cooldown_until(*h).map(|u| (*h, u)))
                .collect(),
            rate: store.rate(),
        }
    }
}

/// HO-L2: the cell is held by another live process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cell {} is held by a live process (incarnation {}, lease until {} Unix ms): refusing to start a second process with the same cell id; it becomes free when that process stops or stops renewing its lease", cell.0, incarnation.0, until.as_ms())]
pub struct CellHeld {
    pub cell: CellId,
    pub incarnation: Incarnation,
    pub until: MonoMs,
}

/// Where a host is assigned, for the resolve path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub cell: CellId,
    pub epoch: Epoch,
    pub public_url: String,
}

/// A cell's row plus its URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellInfo {
    pub cell: CellId,
    pub row: CellRow,
    pub public_url: String,
    pub internal_url: String,
}

// ----- value conversions (DB rows are external input: never a panic) -----

fn i(v: u64, what: &str) -> Result<i64, StoreFailure> {
    i64::try_from(v).map_err(|_| StoreFailure::BadRow(format!("{what} {v} exceeds i64")))
}

fn u(v: i64, what: &str) -> Result<u64, StoreFailure> {
    u64::try_from(v).map_err(|_| StoreFailure::BadRow(format!("{what} {v} is negative")))
}

fn u32_of(v: i64, what: &str) -> Result<u32, StoreFailure> {
    u32::try_from(v).map_err(|_| StoreFailure::BadRow(format!("{what} {v} is not a u32")))
}

fn flag(v: i64, what: &str) -> Result<bool, StoreFailure> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(StoreFailure::BadRow(format!("{what} {v} is not 0/1"))),
    }
}

fn get<T>(row: &AnyRow, col: &str) -> Result<T, StoreFailure>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    row.try_get::<T, _>(col)
        .map_err(|e| StoreFailure::BadRow(format!("column {col}: {e}")))
}

fn op_text(op: OpId) -> String {
    op.0.hyphenated().to_string()
}

fn op_of(text: &str) -> Result<OpId, StoreFailure> {
    uuid::Uuid::from_str(text)
        .map(OpId)
        .map_err(|e| StoreFailure::BadRow(format!("op_id {text:?}: {e}")))
}

/// An sqlx error inside a transaction body: the transaction did not commit, but the safe
/// reading is "unknown" (the source reconciles under the lock).
fn in_txn(e: sqlx::Error) -> StoreFailure {
    StoreFailure::Ambiguous {
        kind: Ambiguity::TransportError,
        detail: e.to_string(),
    }
}

fn begin_failed(e: sqlx::Error) -> StoreFailure {
    StoreFailure::Unavailable(e.to_string())
}

/// Embedded migrations (compiled into the binary; nothing to install).
#[derive(Debug)]
struct Embedded(Dialect);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        let migration = |version: i64, name: &'static str, sql: &'static str| {
            Migration::new(
                version,
                Cow::Borrowed(name),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                false,
            )
        };
        let migrations = match self.0 {
            Dialect::Postgres => vec![
                migration(
                    1,
                    "handoff",
                    include_str!("../../migrations/postgres/0001_handoff.sql"),
                ),
                migration(
                    2,
                    "cell lease",
                    include_str!("../../migrations/postgres/0002_cell_lease.sql"),
                ),
            ],
            Dialect::Sqlite => vec![
                migration(
                    1,
                    "handoff",
                    include_str!("../../migrations/sqlite/0001_handoff.sql"),
                ),
                migration(
                    2,
                    "cell lease",
                    include_str!("../../migrations/sqlite/0002_cell_lease.sql"),
                ),
            ],
        };
        Box::pin(async move { Ok(migrations) })
    }
}

/// The SQL assignment store. Cheap to clone (a pool handle).
#[derive(Debug, Clone)]
pub struct SqlStore {
    pool: AnyPool,
    dialect: Dialect,
    opts: StoreOptions,
    faults: Arc<super::hooks::Faults>,
}

type Txn = sqlx::Transaction<'static, sqlx::Any>;

/// The locked host row.
#[derive(Debug, Clone, Copy)]
struct Locked {
    row: AssignmentRow,
}

impl SqlStore {
    /// Connect (creating a SQLite file if needed), run the embedded migrations.
    pub async fn connect(url: &str, opts: StoreOptions) -> Result<SqlStore, StoreSetupError> {
        sqlx::any::install_default_drivers();
        let dialect =
            Dialect::of_url(url).ok_or_else(|| StoreSetupError::UnsupportedUrl(url.to_owned()))?;
        let mut url = url.to_owned();
        if dialect == Dialect::Sqlite && !url.contains("mode=") && !url.contains(":memory:") {
            url.push_str(if url.contains('?') { "&" } else { "?" });
            url.push_str("mode=rwc");
        }
        let connect_opts =
            AnyConnectOptions::from_str(&url).map_err(|source| StoreSetupError::Connect {
                url: redact(&url),
                source,
            })?;
        let stmt_ms = opts.txn_timeout.as_millis();
        let busy_ms = opts.sqlite_busy_timeout.as_millis();
        let pool = AnyPoolOptions::new()
            .max_connections(opts.max_connections.max(1))
            .acquire_timeout(opts.acquire_timeout)
            .after_connect(move |conn: &mut AnyConnection, _meta| {
                Box::pin(async move {
                    let setup = match dialect {
                        // Server-side bounds: no statement, lock wait or idle transaction
                        // outlives the client's own transaction timeout.
                        Dialect::Postgres => format!(
                            "SET statement_timeout = {stmt_ms}; SET lock_timeout = {stmt_ms}; \
                             SET idle_in_transaction_session_timeout = {stmt_ms}"
                        ),
                        Dialect::Sqlite => format!(
                            "PRAGMA busy_timeout = {busy_ms}; PRAGMA journal_mode = WAL; \
                             PRAGMA foreign_keys = ON"
                        ),
                    };
                    conn.execute(setup.as_str()).await.map(|_| ())
                })
            })
            .connect_with(connect_opts)
            .await
            .map_err(|source| StoreSetupError::Connect {
                url: redact(&url),
                source,
            })?;
        let migrator = Migrator::new(Embedded(dialect)).await?;
        migrator.run(&pool).await?;
        Ok(SqlStore {
            pool,
            dialect,
            opts,
            faults: Arc::new(super::hooks::Faults::default()),
        })
    }

    #[must_use]
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The fault-injection seam (inert unless a test arms it).
    #[must_use]
    /// The fault seams (armable only with the `test-hooks` feature; inert otherwise).
    pub fn faults(&self) -> &super::hooks::Faults {
        &self.faults
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    async fn begin(&self) -> Result<Txn, StoreFailure> {
        self.pool
            .begin_with(self.dialect.begin())
            .await
            .map_err(begin_failed)
    }

    /// Bound a whole transaction on the client side. A timeout is ambiguity, never a rollback
    /// (the dropped transaction may still commit on the server until its own timeout).
    async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, StoreFailure>>,
    ) -> Result<T, StoreFailure> {
        match tokio::time::timeout(self.opts.txn_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(StoreFailure::Ambiguous {
                kind: Ambiguity::Timeout,
                detail: format!("transaction exceeded {:?}", self.opts.txn_timeout),
            }),
        }
    }

    async fn commit(tx: Txn) -> Result<(), StoreFailure> {
        tx.commit().await.map_err(|e| StoreFailure::Ambiguous {
            kind: Ambiguity::ResultLost,
            detail: e.to_string(),
        })
    }

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
        self.bounded(async { q.execute(&self.pool).await.map_err(in_txn).map(|_| ()) })
            .await
    }

    /// HO-A5: the persistent enable switch.
    pub async fn set_enabled(&self, enabled: bool) -> Result<(), StoreFailure> {
        let q = sqlx::query("UPDATE ho_settings SET enabled = $1 WHERE id = 1")
            .bind(i64::from(enabled));
        self.bounded(async { q.execute(&self.pool).await.map_err(in_txn).map(|_| ()) })
            .await
    }

    async fn settings_in(conn: &mut AnyConnection) -> Result<StoreConfig, StoreFailure> {
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

    /// Setup: add or replace a cell row (reference `upsert_cell`; URLs kept).
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
            if !exists {
                let n: i64 = get(
                    &sqlx::query("SELECT COUNT(*) AS n FROM ho_cells")
                        .fetch_one(&mut *tx)
                        .await
                        .map_err(in_txn)?,
                    "n",
                )?;
                if u(n, "cell count")? >= MAX_STORE_CELLS as u64 {
                    return Ok(Err(SetupRefusal::TooManyCells));
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
            Self::commit(tx).await?;
            Ok(Ok(()))
        })
        .await
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
            let sql = format!(
                "SELECT incarnation, lease_until FROM ho_cells WHERE cell = $1{}",
                self.dialect.for_update()
            );
            let current = match sqlx::query(&sql)
                .bind(i64::from(cell.0))
                .fetch_optional(&mut *tx)
                .await
                .map_err(in_txn)?
            {
                Some(r) => Some((
                    Incarnation(u(get(&r, "incarnation")?, "incarnation")?),
                    MonoMs(u(get(&r, "lease_until")?, "lease_until")?),
                )),
                None => None,
            };
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
            Self::commit(tx).await?;
            Ok(Ok(next))
        })
        .await
    }

    /// HO-L2: the running process keeps its cell for another `lease_ms`. `false`: another
    /// process has taken the cell (a newer incarnation); this one no longer owns it.
    pub async fn renew_cell_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<bool, StoreFailure> {
        self.set_lease(cell, incarnation, now.plus_ms(lease_ms))
            .await
    }

    /// HO-L2: a graceful stop ends the lease, so a successor may start at once.
    pub async fn release_cell_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
    ) -> Result<bool, StoreFailure> {
        self.set_lease(cell, incarnation, MonoMs::ZERO).await
    }

    async fn set_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
        until: MonoMs,
    ) -> Result<bool, StoreFailure> {
        self.bounded(async {
            let done = sqlx::query(
                "UPDATE ho_cells SET lease_until = $1 WHERE cell = $2 AND incarnation = $3",
            )
            .bind(i(until.as_ms(), "lease_until")?)
            .bind(i64::from(cell.0))
            .bind(i(incarnation.0, "incarnation")?)
            .execute(&self.pool)
            .await
            .map_err(|e| StoreFailure::Unavailable(e.to_string()))?;
            Ok(done.rows_affected() == 1)
        })
        .await
    }

    /// Setup: assign a new host (reference `insert_host`).
    pub async fn insert_host(
        &self,
        host: HostId,
        cell: CellId,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, SetupRefusal>, StoreFailure> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let Some(cell_row) = Self::cell_in(&mut tx, self.dialect, cell, false).await? else {
                return Ok(Err(SetupRefusal::UnknownCell));
            };
            if Self::lock_host(&mut tx, self.dialect, host)
                .await?
                .is_some()
            {
                return Ok(Err(SetupRefusal::HostExists));
            }
            let n: i64 = get(
                &sqlx::query("SELECT COUNT(*) AS n FROM ho_assignments")
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(in_txn)?,
                "n",
            )?;
            if u(n, "host count")? >= MAX_STORE_HOSTS as u64 {
                return Ok(Err(SetupRefusal::TooManyHosts));
            }
            let row = AssignmentRow {
                cell,
                epoch: Epoch(1),
                incarnation: cell_row.incarnation,
                generation: Generation(1),
                desktop_capable,
            };
            sqlx::query(
                "INSERT INTO ho_assignments (host, cell, epoch, incarnation, generation, \
                 desktop_capable) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(i(host.0, "host")?)
            .bind(i64::from(cell.0))
            .bind(i(row.epoch.0, "epoch")?)
            .bind(i(row.incarnation.0, "incarnation")?)
            .bind(i(row.generation.0, "generation")?)
            .bind(i64::from(desktop_capable))
            .execute(&mut *tx)
            .await
            .map_err(in_txn)?;
            Self::commit(tx).await?;
            Ok(Ok(authority_of(host, &row)))
        })
        .await
    }

    // ----- row access inside a transaction -----

    /// HO-S4 / HO-A1: the host lock (the first lock of every write transaction).
    async fn lock_host(
        tx: &mut Txn,
        dialect: Dialect,
        host: HostId,
    ) -> Result<Option<Locked>, StoreFailure> {
        let Ok(h) = i64::try_from(host.0) else {
            // No such row can exist: ids above i64::MAX are refused at insert.
            return Ok(None);
        };
        let sql = format!(
            "SELECT cell, epoch, incarnation, generation, desktop_capable FROM ho_assignments \
             WHERE host = $1{}",
            dialect.for_update()
        );
        let row = sqlx::query(&sql)
            .bind(h)
            .fetch_optional(&mut **tx)
            .await
            .map_err(in_txn)?;
        row.map(|r| assignment_of(&r).map(|row| Locked { row }))
            .transpose()
    }

    async fn cell_in(
        tx: &mut Txn,
        dialect: Dialect,
        cell: CellId,
        lock: bool,
    ) -> Result<Option<CellRow>, StoreFailure> {
        let sql = format!(
            "SELECT capacity, handoff_capable, incarnation FROM ho_cells WHERE cell = $1{}",
            if lock { dialect.for_update() } else { "" }
        );
        let row = sqlx::query(&sql)
            .bind(i64::from(cell.0))
            .fetch_optional(&mut **tx)
            .await
            .map_err(in_txn)?;
        row.map(|r| cell_row_of(&r)).transpose()
    }

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

    /// HO-A1: record an attempt and count it (`attempt_rows` is the new count): one statement
    /// on PostgreSQL, two on SQLite.
    async fn insert_attempt(
        tx: &mut Txn,
        dialect: Dialect,
        op: OpId,
        row: &AttemptRow,
        attempt_rows: u64,
    ) -> Result<(), StoreFailure> {
        let a = AttemptBinds::of(op, row)?;
        let n = i(attempt_rows, "attempt_rows")?;
        match dialect {
            Dialect::Postgres => {
                let q = sqlx::query(
                    "WITH recorded AS (INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, \
                     src_incarnation, src_generation, target, outcome, new_epoch, registration, \
                     recorded_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     RETURNING op_id) \
                     UPDATE ho_limits SET attempt_rows = $12 WHERE id = 1 \
                     AND EXISTS (SELECT 1 FROM recorded)",
                );
                let done = a.bind(q).bind(n).execute(&mut **tx).await.map_err(in_txn)?;
                one_row(done.rows_affected(), "attempt write")
            }
            Dialect::Sqlite => {
                let q = sqlx::query(
                    "INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, src_incarnation, \
                     src_generation, target, outcome, new_epoch, registration, recorded_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                );
                let done = a.bind(q).execute(&mut **tx).await.map_err(in_txn)?;
                one_row(done.rows_affected(), "attempt insert")?;
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

    /// Reference `reconcile`: under the host lock, the recorded outcome of the op id, or a
    /// written `FencedAbort` so a late original commit fails. `Ok(None)`: the fence could not
    /// be written (store full): stay quarantined.
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
            let locked = Self::lock_host(&mut tx, d, host).await?;
            let current = locked.map(|l| authority_of(host, &l.row));
            if let Some(row) = Self::attempt_in(&mut tx, req.op_id).await? {
                return Ok(Some(recorded_outcome(req, current.as_ref(), &row)));
            }
            let (_, attempt_rows) = Self::lock_limits(&mut tx, d).await?;
            if attempt_rows >= MAX_ATTEMPT_ROWS as u64 {
                return Ok(None);
            }
            let row = AttemptRow {
                source: req.source,
                target: req.target,
                outcome: AttemptOutcome::FencedAbort,
                recorded_at: now,
            };
            Self::insert_attempt(&mut tx, d, req.op_id, &row, attempt_rows.saturating_add(1))
                .await?;
            Self::commit(tx).await?;
            Ok(Some(recorded_outcome(req, current.as_ref(), &row)))
        })
        .await
    }

    // ----- HO-A4 / HO-A6: registration -----

    /// Reference `register_control`, under the host lock.
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
            let Some(locked) = Self::lock_host(&mut tx, d, host).await? else {
                return Ok(Err(RegisterRefusal::UnknownHost));
            };
            let Some(cell_row) = Self::cell_in(&mut tx, d, cell, true).await? else {
                return Ok(Err(RegisterRefusal::UnknownCell));
            };
            if locked.row.cell != cell {
                return Ok(Err(RegisterRefusal::NotAssignedHere {
                    assigned: locked.row.cell,
                }));
            }
            if incarnation < cell_row.incarnation {
                return Ok(Err(RegisterRefusal::StaleIncarnation));
            }
            let inc = i(incarnation.0, "incarnation")?;
            sqlx::query("UPDATE ho_cells SET incarnation = $1 WHERE cell = $2")
                .bind(inc)
                .bind(i64::from(cell.0))
                .execute(&mut *tx)
                .await
                .map_err(in_txn)?;
            let new_row = AssignmentRow {
                cell,
                epoch: locked.row.epoch,
                incarnation,
                generation: locked.row.generation.next(),
                desktop_capable,
            };
            let h = i(host.0, "host")?;
            sqlx::query(
                "UPDATE ho_assignments SET incarnation = $1, generation = $2, \
                 desktop_capable = $3 WHERE host = $4",
            )
            .bind(inc)
            .bind(i(new_row.generation.0, "generation")?)
            .bind(i64::from(desktop_capable))
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

    // ----- read-only queries (no lock) -----

    /// Every row (differential test, diagnostics).
    pub async fn rows(&self) -> Result<Rows, StoreFailure> {
        self.bounded(async {
            let mut conn = self.pool.acquire().await.map_err(begin_failed)?;
            let config = Self::settings_in(&mut conn).await?;
            let mut rows = Rows {
                config,
                cells: BTreeMap::new(),
                assignments: BTreeMap::new(),
                reservations: BTreeMap::new(),
                attempts: BTreeMap::new(),
                cooldowns: BTreeMap::new(),
                rate: RateRow::default(),
            };
            let q = |s: &'static str| sqlx::query(s);
            for r in q("SELECT cell, capacity, handoff_capable, incarnation FROM ho_cells")
                .fetch_all(&mut *conn)
                .await
                .map_err(in_txn)?
            {
                rows.cells
                    .insert(CellId(u32_of(get(&r, "cell")?, "cell")?), cell_row_of(&r)?);
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
            let r = q("SELECT window_start_ms, commits FROM ho_limits WHERE id = 1")
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

    pub async fn count_hosts(&self) -> Result<u64, StoreFailure> {
        self.bounded(async {
            let r = sqlx::query("SELECT COUNT(*) AS n FROM ho_assignments")
                .fetch_one(&self.pool)
                .await
                .map_err(begin_failed)?;
            u(get(&r, "n")?, "count")
        })
        .await
    }

    /// HO-S1: one read-only page of candidates, `ORDER BY host LIMIT limit OFFSET offset`.
    pub async fn candidate_page(
        &self,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<CandidateRow>, StoreFailure> {
        let q = sqlx::query(
            "SELECT a.host, a.cell, a.epoch, a.incarnation, a.generation, a.desktop_capable, \
             sc.handoff_capable AS src_capable, m.target AS m_target, m.measured_at_ms, \
             m.current_rtt_ms, m.target_rtt_ms, tc.handoff_capable AS tgt_capable, \
             tc.capacity AS tgt_capacity, \
             (SELECT COUNT(*) FROM ho_assignments x WHERE x.cell = m.target) AS tgt_load, \
             cd.until_ms \
             FROM ho_assignments a \
             JOIN ho_cells sc ON sc.cell = a.cell \
             LEFT JOIN ho_measurements m ON m.host = a.host \
             LEFT JOIN ho_cells tc ON tc.cell = m.target \
             LEFT JOIN ho_cooldowns cd ON cd.host = a.host \
             ORDER BY a.host LIMIT $1 OFFSET $2",
        )
        .bind(i64::from(limit))
        .bind(i(offset, "offset")?);
        self.bounded(async {
            let rows = q.fetch_all(&self.pool).await.map_err(begin_failed)?;
            rows.iter().map(candidate_of).collect()
        })
        .await
    }

    pub async fn load_cursor(&self, director: &str) -> Result<u64, StoreFailure> {
        let q = sqlx::query("SELECT page_offset FROM ho_director_cursors WHERE director = $1")
            .bind(director.to_owned());
        self.bounded(async {
            let row = q.fetch_optional(&self.pool).await.map_err(begin_failed)?;
            match row {
                Some(r) => u(get(&r, "page_offset")?, "page_offset"),
                None => Ok(0),
            }
        })
        .await
    }

    pub async fn save_cursor(&self, director: &str, offset: u64) -> Result<(), StoreFailure> {
        let q = sqlx::query(
            "INSERT INTO ho_director_cursors (director, page_offset) VALUES ($1, $2) \
             ON CONFLICT (director) DO UPDATE SET page_offset = excluded.page_offset",
        )
        .bind(director.to_owned())
        .bind(i(offset, "offset")?);
        self.bounded(async { q.execute(&self.pool).await.map_err(in_txn).map(|_| ()) })
            .await
    }
}

// ----- row decoding -----

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

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// The bind values of an attempt row, in `ho_attempts` column order (op id first).
#[derive(Debug, Clone)]
struct AttemptBinds {
    op: String,
    host: i64,
    src_cell: i64,
    src_epoch: i64,
    src_incarnation: i64,
    src_generation: i64,
    target: i64,
    outcome: &'static str,
    new_epoch: Option<i64>,
    registration: Option<&'static str>,
    recorded_at: i64,
}

impl AttemptBinds {
    fn of(op: OpId, row: &AttemptRow) -> Result<AttemptBinds, StoreFailure> {
        let (outcome, new_epoch, registration) = match row.outcome {
            AttemptOutcome::Committed {
                new_epoch,
                registration,
            } => (
                "committed",
                Some(i(new_epoch.0, "new_epoch")?),
                Some(registration_text(registration)),
            ),
            AttemptOutcome::FencedAbort => ("fenced", None, None),
        };
        Ok(AttemptBinds {
            op: op_text(op),
            host: i(row.source.host.0, "host")?,
            src_cell: i64::from(row.source.cell.0),
            src_epoch: i(row.source.epoch.0, "epoch")?,
            src_incarnation: i(row.source.incarnation.0, "incarnation")?,
            src_generation: i(row.source.generation.0, "generation")?,
            target: i64::from(row.target.0),
            outcome,
            new_epoch,
            registration,
            recorded_at: i(row.recorded_at.0, "recorded_at")?,
        })
    }

    /// Bind the eleven values as the next parameters of `q`.
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.op.clone())
            .bind(self.host)
            .bind(self.src_cell)
            .bind(self.src_epoch)
            .bind(self.src_incarnation)
            .bind(self.src_generation)
            .bind(self.target)
            .bind(self.outcome)
            .bind(self.new_epoch)
            .bind(self.registration)
            .bind(self.recorded_at)
    }
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

fn counts_of(row: &AnyRow) -> Result<(u32, u64), StoreFailure> {
    let load: i64 = get(row, "target_load")?;
    Ok((
        u32::try_from(u(load, "target_load")?).unwrap_or(u32::MAX),
        u(get(row, "in_flight")?, "in_flight")?,
    ))
}

fn no_settings() -> StoreFailure {
    StoreFailure::BadRow("ho_settings has no row (put_settings)".into())
}

fn config_of(row: &AnyRow) -> Result<StoreConfig, StoreFailure> {
    Ok(StoreConfig {
        enabled: flag(get(row, "enabled")?, "enabled")?,
        policy: policy::PolicyConfig {
            freshness_window_ms: u(get(row, "freshness_window_ms")?, "freshness")?,
            host_cooldown_ms: u(get(row, "host_cooldown_ms")?, "cooldown")?,
        },
        max_in_flight_migrations: u32_of(get(row, "max_in_flight_migrations")?, "in-flight")?,
        rate_window_ms: u(get(row, "rate_window_ms")?, "rate_window_ms")?,
        max_commits_per_window: u32_of(get(row, "max_commits_per_window")?, "commits")?,
        registration_timeout_ms: u(get(row, "registration_timeout_ms")?, "registration")?,
    })
}

fn registration_text(r: Registration) -> &'static str {
    match r {
        Registration::Pending => "pending",
        Registration::Registered => "registered",
        Registration::RecoveryStarted => "recovery",
    }
}

fn assignment_of(r: &AnyRow) -> Result<AssignmentRow, StoreFailure> {
    Ok(AssignmentRow {
        cell: CellId(u32_of(get(r, "cell")?, "cell")?),
        epoch: Epoch(u(get(r, "epoch")?, "epoch")?),
        incarnation: Incarnation(u(get(r, "incarnation")?, "incarnation")?),
        generation: Generation(u(get(r, "generation")?, "generation")?),
        desktop_capable: flag(get(r, "desktop_capable")?, "desktop_capable")?,
    })
}

fn cell_row_of(r: &AnyRow) -> Result<CellRow, StoreFailure> {
    Ok(CellRow {
        capacity: u32_of(get(r, "capacity")?, "capacity")?,
        handoff_capable: flag(get(r, "handoff_capable")?, "handoff_capable")?,
        incarnation: Incarnation(u(get(r, "incarnation")?, "incarnation")?),
    })
}

fn attempt_of(r: &AnyRow) -> Result<AttemptRow, StoreFailure> {
    let outcome: String = get(r, "outcome")?;
    let outcome = match outcome.as_str() {
        "committed" => {
            let new_epoch: Option<i64> = get(r, "new_epoch")?;
            let registration: Option<String> = get(r, "registration")?;
            let new_epoch = new_epoch.ok_or_else(|| {
                StoreFailure::BadRow("committed attempt without new_epoch".into())
            })?;
            let registration = match registration.as_deref() {
                Some("pending") => Registration::Pending,
                Some("registered") => Registration::Registered,
                Some("recovery") => Registration::RecoveryStarted,
                other => {
                    return Err(StoreFailure::BadRow(format!("registration {other:?}")));
                }
            };
            AttemptOutcome::Committed {
                new_epoch: Epoch(u(new_epoch, "new_epoch")?),
                registration,
            }
        }
        "fenced" => AttemptOutcome::FencedAbort,
        other => return Err(StoreFailure::BadRow(format!("outcome {other:?}"))),
    };
    Ok(AttemptRow {
        source: SourceAuthority {
            cell: CellId(u32_of(get(r, "src_cell")?, "src_cell")?),
            host: HostId(u(get(r, "host")?, "host")?),
            epoch: Epoch(u(get(r, "src_epoch")?, "src_epoch")?),
            incarnation: Incarnation(u(get(r, "src_incarnation")?, "src_incarnation")?),
            generation: Generation(u(get(r, "src_generation")?, "src_generation")?),
        },
        target: CellId(u32_of(get(r, "target")?, "target")?),
        outcome,
        recorded_at: MonoMs(u(get(r, "recorded_at_ms")?, "recorded_at")?),
    })
}

fn candidate_of(r: &AnyRow) -> Result<CandidateRow, StoreFailure> {
    let host = HostId(u(get(r, "host")?, "host")?);
    let authority = authority_of(host, &assignment_of(r)?);
    let m_target: Option<i64> = get(r, "m_target")?;
    let measurement = match m_target {
        None => None,
        Some(t) => {
            let at: i64 = get(r, "measured_at_ms")?;
            let cur: i64 = get(r, "current_rtt_ms")?;
            let tgt: i64 = get(r, "target_rtt_ms")?;
            Some((
                CellId(u32_of(t, "target")?),
                Measurement {
                    measured_at: MonoMs(u(at, "measured_at")?),
                    current_rtt_ms: u32_of(cur, "current_rtt_ms")?,
                    target_rtt_ms: u32_of(tgt, "target_rtt_ms")?,
                },
            ))
        }
    };
    let target = match (measurement, get::<Option<i64>>(r, "tgt_capable")?) {
        (Some((cell, _)), Some(capable)) => Some(TargetView {
            cell,
            capable: flag(capable, "tgt_capable")?,
            load: u32::try_from(get::<i64>(r, "tgt_load")?).unwrap_or(u32::MAX),
            capacity: u32_of(
                get::<Option<i64>>(r, "tgt_capacity")?.unwrap_or(0),
                "capacity",
            )?,
        }),
        _ => None,
    };
    let cooldown: Option<i64> = get(r, "until_ms")?;
    Ok(CandidateRow {
        candidate: CandidateView {
            authority,
            source_cell_capable: flag(get(r, "src_capable")?, "src_capable")?,
            desktop_capable: authority_desktop(r)?,
            measurement,
            cooldown_until: cooldown.map(|c| u(c, "until_ms")).transpose()?.map(MonoMs),
        },
        target,
    })
}

fn authority_desktop(r: &AnyRow) -> Result<bool, StoreFailure> {
    flag(get(r, "desktop_capable")?, "desktop_capable")
}

/// A URL without its password, for error messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redact_hides_the_password_only() {
        assert_eq!(
            redact("postgres://u:secret@h:5/db"),
            "postgres://u:***@h:5/db"
        );
        assert_eq!(redact("sqlite:/tmp/x.db"), "sqlite:/tmp/x.db");
    }
}
