//! The SQL assignment store (HO-S4, HO-A1, HO-A2, HO-A4..A6): PostgreSQL in production, SQLite
//! in a file as the embedded default, through one sqlx `Any` code path; the statements are the
//! same on both backends except where one data-modifying statement (PostgreSQL) replaces a
//! statement per table (SQLite, which has no round trips to save).
//!
//! Every write method is one bounded transaction with the outcome and rows of the reference
//! `switchyard_core::handoff::store::AssignmentStore` method of the same name. The planned
//! operations (the assignment transaction, the locked reconciliation, registration, enrolment
//! and the drain fence) are executors of the core's plans (`switchyard_core::handoff::store::
//! plan`), the very plans the reference store runs: a loop that runs the step the plan asks
//! for (a lock, a read, the savepoint, the writes, COMMIT) and feeds the result back, so the
//! sequence and every decision on a row are defined once, in the core. A failure is
//! classified as the core's `StoreFault` ([`StoreFailure::fault`]); its reading is the core's.
//! The differential test (`tests/handoff_store_diff.rs`) replays generated sequences against
//! the reference, SQLite and PostgreSQL and compares outcomes and rows after every step; the
//! concurrency test (`tests/handoff_store_concurrency.rs`) queues PostgreSQL transactions on
//! the host lock and on the limits lock.
//!
//! Serialisation: PostgreSQL takes `SELECT … FOR UPDATE` on the host's `ho_assignments` row
//! first, then (where needed) the `ho_cells` row (`FOR NO KEY UPDATE`), then limit shards — one
//! free shard (`SKIP LOCKED`) on a commit's token path, every shard in shard order everywhere
//! else ([`shards`]) — one fixed order, so no deadlock; `statement_timeout`, `lock_timeout` and
//! `idle_in_transaction_session_timeout` bound the server side, a tokio timeout the client
//! side. SQLite uses `BEGIN IMMEDIATE` (the single writer lock) with a busy timeout. No network
//! call other than the transaction's own statements happens while a lock is held.
//!
//! HO-S4's global limits are held in escrow over the limit shards
//! (`switchyard_core::handoff::escrow`): a commit that finds a token of every limit on the one
//! shard it locked commits under that lock alone, so commits on different shards — and their
//! durable flushes — overlap; without a token it rolls back to a savepoint (keeping the host
//! lock) and decides on the exact sums with every shard locked, as the reference does.
//! Everything about the request's own host is read before, under the host lock alone; a request refused by those facts locks no shard. Values
//! that other transactions change are read only in a statement that started after the lock
//! that guards them was granted: under READ COMMITTED a statement that waited for a row lock
//! reads the rest of the database with the snapshot it started with. For the same reason the
//! facts are read in a statement of their own after the host lock (a duplicate of the op id
//! that held the host lock just before must be seen).
//!
//! Layout: this file holds the store handle, its options, errors, dialects and migrations and
//! the transaction helpers (`begin`, `bounded`, `commit`, the host lock); [`codec`] converts
//! values and decodes rows; [`commit`] is the assignment transaction and the locked
//! reconciliation; [`registry`] the settings, cells, cell lease, hosts, registration, drain
//! fence and expiry; [`shards`] the limit shards and their audit; [`reads`] the unlocked
//! queries; [`seed`] the scale bench's bulk seeding (PostgreSQL only). [`Store`] (`backend`)
//! is the interface the cells and the director call: this SQL store or the in-memory
//! [`MemoryStore`] (`memory`: the core's reference store behind a mutex, for tests and
//! simulations), by enum dispatch.

mod backend;
mod codec;
mod commit;
mod memory;
mod reads;
mod registry;
mod seed;
mod shards;

pub use backend::Store;
pub use memory::MemoryStore;
pub use seed::{BulkSeed, SeedError};

mod checks;
mod nodes;
pub use nodes::NodeUrl;

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::{AnyConnection, AnyPool, Executor};
use switchyard_core::handoff::store::{durable_result_of, AssignmentRow, CellRow, StoreFault};
use switchyard_core::handoff::DurableResult;
use switchyard_core::handoff::{CellId, Epoch, HostId};

use codec::assignment_of;

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

    /// Row-lock suffix of a shared locking read (SCALE-2: registrations of one cell share its
    /// row; a process start's exclusive lock waits for them and they for it).
    fn for_share(self) -> &'static str {
        match self {
            Dialect::Postgres => " FOR SHARE",
            Dialect::Sqlite => "",
        }
    }

    /// Row-lock suffix of a locking read whose transaction changes no key column. PostgreSQL:
    /// it does not conflict with the key-share locks that foreign-key checks take (a commit
    /// moving a host onto the cell), so a cell's lease renewal never waits for a handoff.
    fn for_no_key_update(self) -> &'static str {
        match self {
            Dialect::Postgres => " FOR NO KEY UPDATE",
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

/// Why a store call did not produce a durable answer: what the store saw happen, classified
/// as the core's [`StoreFault`]; HO-A2's reading of it is the core's ([`durable_result_of`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreFailure {
    /// Nothing ran (no connection, no transaction): durable access is unavailable.
    #[error("assignment store unavailable: {0}")]
    Unavailable(String),
    /// A statement inside the transaction failed (or touched an unexpected number of rows).
    #[error("assignment store outcome unknown (error inside the transaction): {0}")]
    InTransaction(String),
    /// The client-side bound of the whole call fired.
    #[error("assignment store outcome unknown (timeout): {0}")]
    TimedOut(String),
    /// COMMIT was sent and its answer lost.
    #[error("assignment store outcome unknown (commit result lost): {0}")]
    CommitLost(String),
    /// A row or value the store returned is out of range.
    #[error("assignment store returned an invalid row: {0}")]
    BadRow(String),
}

impl StoreFailure {
    /// What happened, as the core classifies it.
    #[must_use]
    pub fn fault(&self) -> StoreFault {
        match self {
            StoreFailure::Unavailable(_) => StoreFault::Unavailable,
            StoreFailure::InTransaction(_) => StoreFault::InTransaction,
            StoreFailure::TimedOut(_) => StoreFault::TimedOut,
            StoreFailure::CommitLost(_) => StoreFault::CommitLost,
            StoreFailure::BadRow(_) => StoreFault::BadRow,
        }
    }

    /// HO-A2: how the source machine must read this failure (the core's mapping). Never a
    /// rollback.
    #[must_use]
    pub fn durable_result(&self) -> DurableResult {
        durable_result_of(self.fault())
    }
}

/// Errors of setup and of the read-only queries.
#[derive(Debug, thiserror::Error)]
pub enum StoreSetupError {
    #[error("unsupported database URL {0:?}: expected postgres://… or sqlite:…")]
    UnsupportedUrl(String),
    #[error("cannot connect to {url}: {source}")]
    Connect { url: String, source: sqlx::Error },
    /// HA-1: a multi-host URL (or `target_session_attrs`) the store cannot use.
    #[error("database URL {url}: {why}")]
    BadUrl { url: String, why: String },
    /// HA-1: no node of the URL matches its `target_session_attrs` (each named, with why).
    #[error("{0}")]
    NoNode(String),
    /// HA-1: the URL reaches a transaction-pooling proxy.
    #[error("{0}")]
    Pooler(String),
    #[error("schema migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreFailure),
}

/// Every row of the store: the core's one snapshot type (the reference's
/// `AssignmentStore::snapshot`), for the differential tests and diagnostics.
pub use switchyard_core::handoff::store::StoreSnapshot;

/// HO-L2: the cell is held by another live process (the core's refusal, shared with the
/// reference store).
pub use switchyard_core::handoff::store::CellHeld;

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

/// An sqlx error inside a transaction body: the transaction did not commit, but the safe
/// reading is "unknown" (the source reconciles under the lock).
fn in_txn(e: sqlx::Error) -> StoreFailure {
    StoreFailure::InTransaction(error_text(&e))
}

fn begin_failed(e: sqlx::Error) -> StoreFailure {
    StoreFailure::Unavailable(error_text(&e))
}

/// An sqlx error with the server's SQLSTATE when there is one (HA-1 reads 25006, read-only;
/// an operator reads 53300, too many connections).
fn error_text(e: &sqlx::Error) -> String {
    match e.as_database_error().and_then(|d| d.code()) {
        Some(code) => format!("{e} (SQLSTATE {code})"),
        None => e.to_string(),
    }
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
                    include_str!("../../../migrations/postgres/0001_handoff.sql"),
                ),
                migration(
                    2,
                    "cell lease",
                    include_str!("../../../migrations/postgres/0002_cell_lease.sql"),
                ),
                migration(
                    3,
                    "fenced renewed",
                    include_str!("../../../migrations/postgres/0003_fenced_renewed.sql"),
                ),
                migration(
                    4,
                    "limit shards",
                    include_str!("../../../migrations/postgres/0004_limit_shards.sql"),
                ),
                migration(
                    5,
                    "fleet bounds",
                    include_str!("../../../migrations/postgres/0005_fleet_bounds.sql"),
                ),
                migration(
                    6,
                    "director keyset",
                    include_str!("../../../migrations/postgres/0006_director_keyset.sql"),
                ),
                migration(
                    7,
                    "sweep lease",
                    include_str!("../../../migrations/postgres/0007_sweep_lease.sql"),
                ),
                migration(
                    8,
                    "attempt retention",
                    include_str!("../../../migrations/postgres/0008_attempt_retention.sql"),
                ),
            ],
            Dialect::Sqlite => vec![
                migration(
                    1,
                    "handoff",
                    include_str!("../../../migrations/sqlite/0001_handoff.sql"),
                ),
                migration(
                    2,
                    "cell lease",
                    include_str!("../../../migrations/sqlite/0002_cell_lease.sql"),
                ),
                migration(
                    3,
                    "fenced renewed",
                    include_str!("../../../migrations/sqlite/0003_fenced_renewed.sql"),
                ),
                migration(
                    4,
                    "limit shards",
                    include_str!("../../../migrations/sqlite/0004_limit_shards.sql"),
                ),
                migration(
                    5,
                    "fleet bounds",
                    include_str!("../../../migrations/sqlite/0005_fleet_bounds.sql"),
                ),
                migration(
                    6,
                    "director keyset",
                    include_str!("../../../migrations/sqlite/0006_director_keyset.sql"),
                ),
                migration(
                    7,
                    "sweep lease",
                    include_str!("../../../migrations/sqlite/0007_sweep_lease.sql"),
                ),
                migration(
                    8,
                    "attempt retention",
                    include_str!("../../../migrations/sqlite/0008_attempt_retention.sql"),
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
    /// HO-S4: the number of limit shards (`ho_limit_shards` rows 0..n), read at connect.
    shards: u32,
    /// Statements sent by the planned operations (test seam: counts only with `test-hooks`).
    statements: Arc<Statements>,
    /// HA-1: the nodes of a multi-host URL and the watch over them.
    nodes: Option<Arc<nodes::Nodes>>,
}

/// HO-S4: how many statements (round trips on PostgreSQL) the planned operations sent: a
/// test pins the count per path. A zero-sized no-op without the `test-hooks` feature.
#[derive(Debug, Default)]
pub struct Statements {
    #[cfg(feature = "test-hooks")]
    sent: std::sync::atomic::AtomicU64,
}

impl Statements {
    #[inline]
    fn sent(&self, n: u64) {
        #[cfg(feature = "test-hooks")]
        self.sent.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
        #[cfg(not(feature = "test-hooks"))]
        let _ = n;
    }

    /// Statements sent so far (always 0 without `test-hooks`).
    #[must_use]
    pub fn count(&self) -> u64 {
        #[cfg(feature = "test-hooks")]
        return self.sent.load(std::sync::atomic::Ordering::SeqCst);
        #[cfg(not(feature = "test-hooks"))]
        0
    }
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
        let nodes = match dialect {
            Dialect::Postgres => match NodeUrl::parse(&url) {
                Ok(None) => None,
                Ok(Some(node_url)) => Some(Arc::new(
                    nodes::Nodes::connect(node_url, opts.acquire_timeout)
                        .await
                        .map_err(StoreSetupError::NoNode)?,
                )),
                Err(why) => {
                    return Err(StoreSetupError::BadUrl {
                        url: redact(&url),
                        why,
                    })
                }
            },
            Dialect::Sqlite => None,
        };
        let connect_opts = match &nodes {
            Some(n) => n.current(),
            None => {
                AnyConnectOptions::from_str(&url).map_err(|source| StoreSetupError::Connect {
                    url: redact(&url),
                    source,
                })?
            }
        };
        let stmt_ms = opts.txn_timeout.as_millis();
        let busy_ms = opts.sqlite_busy_timeout.as_millis();
        let on_connect = nodes.clone();
        let on_acquire = nodes.clone();
        let pool = AnyPoolOptions::new()
            .max_connections(opts.max_connections.max(1))
            .acquire_timeout(opts.acquire_timeout)
            .after_connect(move |conn: &mut AnyConnection, _meta| {
                let nodes = on_connect.clone();
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
                    conn.execute(setup.as_str()).await.map(|_| ())?;
                    // HA-1: a node that stopped matching gets no new connection.
                    if let Some(n) = nodes.filter(|n| n.attrs().needs_probe()) {
                        let state = nodes::probe_state(conn)
                            .await
                            .map_err(sqlx::Error::Protocol)?;
                        if !n.attrs().keeps(state) {
                            return Err(sqlx::Error::Protocol(state.mismatch(n.attrs())));
                        }
                    }
                    Ok(())
                })
            })
            .before_acquire(move |_conn, meta| {
                // HA-1: connections made before the node changed are retired.
                let keep = on_acquire.as_ref().is_none_or(|n| n.keeps(meta.age));
                Box::pin(async move { Ok(keep) })
            })
            .connect_with(connect_opts.clone())
            .await
            .map_err(|source| StoreSetupError::Connect {
                url: redact(&url),
                source,
            })?;
        if dialect == Dialect::Postgres {
            checks::refuse_transaction_pooling(&connect_opts).await?;
            checks::report_budget_and_distance(&pool, &opts).await;
        }
        let migrator = Migrator::new(Embedded(dialect)).await?;
        // PostgreSQL migrations take an advisory lock; SQLite's take none, so two processes
        // starting on one fresh file race (the loser's migration fails: "table … already
        // exists", rolled back whole). A few spaced re-runs then find the winner's rows in
        // `_sqlx_migrations` and apply nothing.
        let attempts = if dialect == Dialect::Sqlite { 5 } else { 1 };
        let policy = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_times(attempts - 1)
            .with_jitter()
            .with_jitter_seed(crate::machine::jitter_seed());
        backon::Retryable::retry(|| migrator.run(&pool), policy)
            .sleep(tokio::time::sleep)
            .notify(|e, d| tracing::debug!(error = %e, retry_in = ?d, "schema migration raced another process; re-running"))
            .await?;
        let shards = Self::count_shards(&pool)
            .await
            .map_err(StoreSetupError::Refused)?;
        Ok(SqlStore {
            pool,
            dialect,
            opts,
            faults: Arc::new(super::hooks::Faults::default()),
            shards,
            statements: Arc::new(Statements::default()),
            nodes,
        })
    }

    #[must_use]
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The bound of one store transaction (`--db-txn-timeout-ms`): a page read ends within it.
    #[must_use]
    pub fn txn_timeout(&self) -> Duration {
        self.opts.txn_timeout
    }

    /// The fault-injection seam (inert unless a test arms it).
    #[must_use]
    /// The fault seams (armable only with the `test-hooks` feature; inert otherwise).
    pub fn faults(&self) -> &super::hooks::Faults {
        &self.faults
    }

    /// The statement counter of the planned operations (commit, reconcile, register, enrol,
    /// fence).
    #[must_use]
    pub fn statements(&self) -> &Statements {
        &self.statements
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    async fn begin(&self) -> Result<Txn, StoreFailure> {
        if self.faults.is_cut_off() {
            return Err(StoreFailure::Unavailable(
                "injected: cut off from the store".into(),
            ));
        }
        match self.pool.begin_with(self.dialect.begin()).await {
            Ok(tx) => Ok(tx),
            Err(sqlx::Error::PoolTimedOut) => {
                Err(StoreFailure::Unavailable(self.why_no_connection().await))
            }
            Err(e) => Err(begin_failed(e)),
        }
    }

    /// The pool's "timed out" hides why no connection opened (it retries a refused connect
    /// or `too many connections` until its bound): one direct attempt names the cause (HA-1:
    /// a refused connection is a store failure an operator can read; a wrong port and a down
    /// server read differently).
    async fn why_no_connection(&self) -> String {
        let opts = self.pool.connect_options();
        let attempt = tokio::time::timeout(
            self.opts.acquire_timeout,
            <AnyConnection as sqlx::Connection>::connect_with(&opts),
        )
        .await;
        match attempt {
            Ok(Ok(conn)) => {
                let _ = sqlx::Connection::close(conn).await;
                "pool timed out while waiting for an open connection (every pooled connection \
                 was busy; a new one opens now)"
                    .to_owned()
            }
            Ok(Err(e)) => format!(
                "pool timed out while waiting for an open connection; a new connection fails: {}",
                error_text(&e)
            ),
            Err(_) => format!(
                "pool timed out while waiting for an open connection; a new connection got no \
                 answer within {} ms",
                self.opts.acquire_timeout.as_millis()
            ),
        }
    }

    /// Bound a whole transaction on the client side. A timeout is ambiguity, never a rollback
    /// (the dropped transaction may still commit on the server until its own timeout).
    async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, StoreFailure>>,
    ) -> Result<T, StoreFailure> {
        let result = match tokio::time::timeout(self.opts.txn_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(StoreFailure::TimedOut(format!(
                "transaction exceeded {:?}",
                self.opts.txn_timeout
            ))),
        };
        match (result, &self.nodes) {
            (Err(failure), Some(nodes)) => {
                // HA-1: the node may have changed role; while none matches, say why.
                nodes.failed(&self.pool, &failure);
                Err(match (failure, nodes.no_node()) {
                    (StoreFailure::Unavailable(m), Some(why)) => {
                        StoreFailure::Unavailable(format!("{m}; {why}"))
                    }
                    (failure, _) => failure,
                })
            }
            (result, _) => result,
        }
    }

    async fn commit(tx: Txn) -> Result<(), StoreFailure> {
        tx.commit()
            .await
            .map_err(|e| StoreFailure::CommitLost(e.to_string()))
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
