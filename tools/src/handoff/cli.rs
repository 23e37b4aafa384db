//! The handoff subcommands of `switchyard`: `cell`, `director`, `desktop`, `mobile`,
//! `desktop-token`, and the operator commands `handoff drain` / `handoff undrain` against a
//! running cell and `handoff cell-key` (SEC-2). All take flags or env; all start on an SQLite file with no set-up
//! (`--db postgres://…` for production).

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use hyper::Method;
use switchyard_core::handoff::store::{
    LimitSettings, Retention, RetentionWindow, StoreBounds, StoreConfig,
    DEFAULT_ATTEMPT_RETENTION_MS, DEFAULT_MAX_ATTEMPT_ROWS, DEFAULT_MAX_CELLS,
    DEFAULT_MAX_EXPIRED_PER_PASS, DEFAULT_MAX_HOSTS, DEFAULT_REAP_BATCH, MAX_BOUND,
};
use switchyard_core::handoff::validate_sweep_lease;
use switchyard_core::handoff::DrainReason;
use switchyard_core::handoff::PolicyConfig;
use switchyard_core::handoff::{explain_line, DirectorPolicy, DispatchLimits, ScanLimits};
use switchyard_core::handoff::{CellId, Incarnation};
use switchyard_core::handoff::{StartFailure, StartRetry, DIRECTOR_START_RETRY};
use switchyard_core::peer_limits::RateBounds;
use tracing::{info, warn};

use switchyard_adapters::handoff::auth::{self, KeyRing, Secret};
use switchyard_adapters::handoff::cell::{
    holder_name, start_cell, CellConfig, CellHandle, DEFAULT_RESOLVE_RATE, LEASE_LOST_EXIT_CODE,
};
use switchyard_adapters::handoff::client::{
    run_mobile, spawn_desktop, DesktopConfig, MobileConfig,
};
use switchyard_adapters::handoff::client_auth::mint_client_token;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::director::{
    open_store_with_retry, CellHealth, Director, DirectorConfig, DirectorTotals, StoreStart,
    DEFAULT_SWEEP_LEASE_MS,
};
use switchyard_adapters::handoff::http;
use switchyard_adapters::handoff::proto::{
    Capabilities, DrainAnswer, DrainRequest, DrainState, RefusedAnswer, UndrainAnswer,
    UndrainRequest, CAPABILITIES_PATH, DRAIN_PATH, UNDRAIN_PATH,
};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_adapters::lifecycle;
use switchyard_adapters::probes::{self, Probe, Sample};
use switchyard_adapters::serve::{LimitArgs, DEFAULT_LIMITS};
use switchyard_adapters::stop::Stop;

const DEFAULT_DB: &str = "sqlite://switchyard-handoff.db";

#[derive(Subcommand, Debug)]
pub enum HandoffCommand {
    /// Run a relay cell (client and desktop WebSockets, internal handoff endpoint).
    ///
    /// Exit status: 0 stopped by SIGTERM / SIGINT; 1 failed (a store it cannot reach, its
    /// cell id held by a live process); 2 a value refused before starting; 3 it lost its
    /// identity lease to another process with the same --cell-id and stopped gracefully.
    Cell(Box<CellArgs>),
    /// Run the idle-handoff director (read-only selection, signed requests).
    ///
    /// A store it cannot reach at start is retried (250 ms, doubling to
    /// --store-retry-max-ms), not ready meanwhile; --store-attempts bounds the attempts.
    Director(DirectorArgs),
    /// Run a small desktop host (control socket; applies relayed mutations).
    Desktop(DesktopArgs),
    /// Run a small mobile client (sends mutations; prints a JSON report).
    Mobile(MobileArgs),
    /// Print the control-socket token of a desktop host.
    DesktopToken(TokenArgs),
    /// Mint a client credential for one host, as its desktop does when it pairs a client
    /// (SEC-1). Prints the token; a client sends it as `Authorization: Bearer <token>`.
    ClientToken(ClientTokenArgs),
}

/// `switchyard handoff …`: operator commands against a running cell's signed internal
/// endpoint (the same secret the cell and the director use).
#[derive(Subcommand, Debug)]
pub enum OperatorCommand {
    /// Emergency-drain one host at a cell (HO-A5).
    ///
    /// Its clients are closed (1012), its desktop control is closed and refused until an
    /// undrain, and no handoff of it starts. Prints the cell's JSON answer; exits 0 if the
    /// host is drained (now or already), 1 with one line saying why otherwise.
    Drain(DrainArgs),
    /// Return a drained host to service, without restarting the cell (HO-L1).
    ///
    /// The desktop's next registration gets a fresh source machine. Refused while the drained
    /// attempt still reconciles (`attempt_in_flight`) or drained work is still closing
    /// (`still_closing`: retry in a moment) or while its store fence is not yet written
    /// (`fence_unwritten`: the cell retries it). Prints the cell's JSON answer; exits 0 when
    /// undrained, 1 with the refusal's name otherwise.
    Undrain(UndrainArgs),
    /// Print the internal-request key of one cell, derived from the master secret (SEC-2).
    ///
    /// Give a cell only its own key (`switchyard cell --keys-file FILE`) and it cannot sign for
    /// any other cell. Prints a comment line with the cell and key id, then the key: the output
    /// is a keys file as it stands (append a second key during a roll).
    CellKey(CellKeyArgs),
}

#[derive(Args, Debug)]
pub struct CellKeyArgs {
    /// The cell id.
    #[arg(long)]
    cell: u32,
    /// The master secret (>= 16 bytes), as the director's --secret.
    #[arg(long, env = "SWITCHYARD_HANDOFF_SECRET", hide_env_values = true)]
    secret: String,
}

#[derive(Args, Debug)]
pub struct OperatorArgs {
    /// The cell's URL (its internal endpoint listens there), e.g. http://cell1.example:7401.
    /// Plain http:// only: this build does not speak TLS (it terminates at a reverse proxy in
    /// front of the cell; the internal endpoint is reached on the cell's own address).
    #[arg(long, env = "SWITCHYARD_CELL_URL", value_parser = parse_cell_url)]
    cell_url: String,
    /// The cell's id (its --cell-id): the request is signed for this cell alone (SEC-2).
    #[arg(long, env = "SWITCHYARD_CELL_ID")]
    cell_id: u32,
    /// The host id.
    #[arg(long, value_parser = parse_host_id)]
    host: u64,
    /// The master secret of internal requests (the director's --secret, >= 16 bytes); the
    /// request is signed with the cell's key derived from it.
    #[arg(long, env = "SWITCHYARD_HANDOFF_SECRET", hide_env_values = true)]
    secret: String,
    /// Bound of the whole request.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
}

#[derive(Args, Debug)]
pub struct DrainArgs {
    #[command(flatten)]
    target: OperatorArgs,
    /// Why: an operator's emergency drain, or an enforced authentication refusal.
    #[arg(long, value_enum, default_value_t = DrainWhy::Emergency)]
    reason: DrainWhy,
}

#[derive(Args, Debug)]
pub struct UndrainArgs {
    #[command(flatten)]
    target: OperatorArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainWhy {
    Emergency,
    AuthRefused,
}

impl From<DrainWhy> for DrainReason {
    fn from(w: DrainWhy) -> DrainReason {
        match w {
            DrainWhy::Emergency => DrainReason::Emergency,
            DrainWhy::AuthRefused => DrainReason::AuthRefused,
        }
    }
}

#[derive(Args, Debug)]
pub struct DbArgs {
    /// Assignment store: `sqlite://FILE` (embedded default) or `postgres://…` (production;
    /// several cells and directors share one).
    #[arg(long, env = "SWITCHYARD_DB", default_value = DEFAULT_DB)]
    db: String,
    /// Client-side bound of one store transaction (also the server statement timeout).
    /// SEC-4: 1 ms ..= 10 minutes (`MAX_DB_TXN_TIMEOUT_MS`): a larger value is refused at
    /// start rather than failing every transaction later with "pool timed out".
    #[arg(long, env = "SWITCHYARD_DB_TXN_TIMEOUT_MS", default_value_t = 3_000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_DB_TXN_TIMEOUT_MS))]
    db_txn_timeout_ms: u64,
    /// SCALE-1: connections this process holds to the store (the transactions it runs at
    /// once). 100 cells at the default hold 800: PostgreSQL's `max_connections` must cover
    /// every process's pool (docs/HANDOFF.md, "Sizing").
    #[arg(long, env = "SWITCHYARD_DB_MAX_CONNECTIONS", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    db_max_connections: u32,
}

/// SCALE-1 / SCALE-4: the store's deployment-wide limits, written into its settings row when a
/// cell starts (set them alike on every cell: the last cell started wins). Their memory and disk
/// cost and the moves per hour they allow are in docs/HANDOFF.md, "Sizing".
#[derive(Args, Debug, Clone, Copy)]
pub struct StoreLimitArgs {
    /// HO-S4: committed moves whose desktop has not yet registered at its target, across the
    /// deployment.
    #[arg(long, env = "SWITCHYARD_MAX_IN_FLIGHT_MIGRATIONS",
          default_value_t = DEFAULT_MAX_IN_FLIGHT_MIGRATIONS,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_in_flight_migrations: u32,
    /// HO-S4: the global rate window, in milliseconds.
    #[arg(long, env = "SWITCHYARD_RATE_WINDOW_MS", default_value_t = DEFAULT_RATE_WINDOW_MS,
          value_parser = clap::value_parser!(u64).range(1_000..=86_400_000))]
    rate_window_ms: u64,
    /// HO-S4: committed moves per rate window, across the deployment.
    #[arg(long, env = "SWITCHYARD_MAX_COMMITS_PER_WINDOW",
          default_value_t = DEFAULT_MAX_COMMITS_PER_WINDOW,
          value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
    max_commits_per_window: u32,
    /// SCALE-1: hosts the store holds, all cells together (a desktop past it is refused
    /// `too_many_hosts`).
    #[arg(long, env = "SWITCHYARD_MAX_HOSTS", default_value_t = DEFAULT_MAX_HOSTS,
          value_parser = clap::value_parser!(u64).range(1..=MAX_BOUND))]
    max_hosts: u64,
    /// SCALE-1: cells the store holds (a new cell id past it is refused `too_many_cells`).
    #[arg(long, env = "SWITCHYARD_MAX_CELLS", default_value_t = DEFAULT_MAX_CELLS,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_cells: u64,
    /// SCALE-1: attempt rows (one per committed move or fence) the store keeps; at the bound
    /// a commit rolls back `store_full`.
    #[arg(long, env = "SWITCHYARD_MAX_ATTEMPT_ROWS", default_value_t = DEFAULT_MAX_ATTEMPT_ROWS,
          value_parser = clap::value_parser!(u64).range(1..=MAX_BOUND))]
    max_attempt_rows: u64,
    /// HO-3: how long a host that moved is not moved again, as the store re-checks it in the
    /// move's transaction (0 ..= 30 days). Set the director's --host-cooldown-ms alike (the
    /// same variable): the director skips cooling hosts with its own value.
    #[arg(long, env = "SWITCHYARD_HOST_COOLDOWN_MS", default_value_t = 3_600_000,
          value_parser = clap::value_parser!(u64).range(0..=2_592_000_000))]
    host_cooldown_ms: u64,
}

impl StoreLimitArgs {
    fn settings(&self) -> LimitSettings {
        LimitSettings {
            host_cooldown_ms: self.host_cooldown_ms,
            max_in_flight_migrations: self.max_in_flight_migrations,
            rate_window_ms: self.rate_window_ms,
            max_commits_per_window: self.max_commits_per_window,
            bounds: StoreBounds {
                max_hosts: self.max_hosts,
                max_cells: self.max_cells,
                max_attempt_rows: self.max_attempt_rows,
            },
        }
    }
}

/// SCALE-4 defaults: 100 moves a second for the whole deployment (6,000 per minute: 360,000 an
/// hour, a full pass over 1,000,000 hosts in under 3 hours), about 5% of the durable commits one
/// PostgreSQL sustains here, and 1,024 moves awaiting their desktop's registration (ten seconds
/// of registrations at the full rate). Why: docs/HANDOFF.md, "Sizing".
pub const DEFAULT_MAX_IN_FLIGHT_MIGRATIONS: u32 = 1_024;
pub const DEFAULT_RATE_WINDOW_MS: u64 = 60_000;
pub const DEFAULT_MAX_COMMITS_PER_WINDOW: u32 = 6_000;

#[derive(Args, Debug)]
pub struct CellArgs {
    #[command(flatten)]
    db: DbArgs,
    /// This cell's id (one live process per id: HO-L2).
    #[arg(long, env = "SWITCHYARD_CELL_ID")]
    cell_id: u32,
    /// Address of the cell's listener: client and desktop WebSockets, resolve, the signed
    /// internal endpoints and the probes.
    #[arg(long, env = "SWITCHYARD_LISTEN", default_value = "127.0.0.1:7400")]
    listen: SocketAddr,
    /// What clients and desktops dial (default http://<listen address>).
    #[arg(long, env = "SWITCHYARD_PUBLIC_URL", value_parser = parse_public_url)]
    public_url: Option<String>,
    /// Hosts assigned to this cell beyond which it takes none by handoff (HO-S4: a target at
    /// capacity is refused). SCALE-1: sized for 10,000 hosts a cell (1,000,000 over 100) with
    /// room for the moves a rebalance brings.
    #[arg(long, env = "SWITCHYARD_CAPACITY", default_value_t = 16_384)]
    capacity: u32,
    /// HO-C1: do not advertise (or take part in) idle handoff.
    #[arg(long)]
    no_handoff_capability: bool,
    /// The master secret of internal requests (>= 16 bytes): the cell verifies with its own key
    /// derived from it. Or give --keys-file (not both).
    #[arg(long, env = "SWITCHYARD_HANDOFF_SECRET", hide_env_values = true)]
    secret: Option<String>,
    /// SEC-2: during a roll, the master secret being retired: requests signed with either are
    /// accepted. Only with --secret.
    #[arg(
        long,
        env = "SWITCHYARD_HANDOFF_PREVIOUS_SECRET",
        hide_env_values = true
    )]
    previous_secret: Option<String>,
    /// SEC-2: a file with this cell's key(s) alone (`switchyard handoff cell-key` output; one
    /// or two keys, one per line), instead of the master secret. Re-read on SIGHUP: a roll
    /// without a restart; a file that does not validate then is logged and the keys stay.
    #[arg(long, env = "SWITCHYARD_HANDOFF_KEYS_FILE")]
    keys_file: Option<PathBuf>,
    /// Secret desktop tokens derive from (>= 16 bytes).
    #[arg(long, env = "SWITCHYARD_DESKTOP_SECRET", hide_env_values = true)]
    desktop_secret: String,
    /// Bound of one assignment transaction of a handoff attempt; past it the outcome is
    /// ambiguous and the cell reconciles (HO-A2).
    #[arg(long, env = "SWITCHYARD_REQUEST_TIMEOUT_MS", default_value_t = 5_000)]
    request_timeout_ms: u64,
    /// Bound of one reconciliation read; past it the host is quarantined (HO-A2).
    #[arg(long, env = "SWITCHYARD_RECONCILE_TIMEOUT_MS", default_value_t = 4_000)]
    reconcile_timeout_ms: u64,
    /// How long a quarantined host waits before reconciling again (HO-L1).
    #[arg(long, env = "SWITCHYARD_QUARANTINE_RETRY_MS", default_value_t = 5_000)]
    quarantine_retry_ms: u64,
    /// HO-L4: how long a move the store refused for a reason that clears (rate_limited,
    /// concurrency_limited, store_full, migration_pending, a policy) is answered from its
    /// result; the director's next request of it after that is a new attempt.
    #[arg(long, env = "SWITCHYARD_REFUSAL_HOLD_MS", default_value_t = switchyard_core::handoff::DEFAULT_REFUSAL_HOLD_MS,
          value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    refusal_hold_ms: u64,
    /// HO-L2: the cell id's lease (renewed every third of it). A second process with the same
    /// --cell-id is refused while it lasts; after a crash a successor may start once it ends.
    #[arg(long, env = "SWITCHYARD_CELL_LEASE_MS", default_value_t = 15_000,
          value_parser = clap::value_parser!(u64).range(30..=3_600_000))]
    cell_lease_ms: u64,
    /// HO-L5: the clock drift allowed between this cell's host and a successor's. With no
    /// renewal of the lease confirmed, the cell stops serving this long before the lease's
    /// end (closing desktops and clients with a retry code) and exits 3. Below a third of
    /// --cell-lease-ms.
    #[arg(long, env = "SWITCHYARD_LEASE_DRIFT_MS", default_value_t = switchyard_core::handoff::DEFAULT_LEASE_DRIFT_MS,
          value_parser = clap::value_parser!(u64).range(0..=1_200_000))]
    lease_drift_ms: u64,
    /// SEC-1: a client credential expiring further ahead than this is refused (4401).
    #[arg(long, env = "SWITCHYARD_CLIENT_TOKEN_MAX_LIFETIME_MS", default_value_t = 604_800_000,
          value_parser = clap::value_parser!(u64).range(1_000..=31_536_000_000))]
    client_token_max_lifetime_ms: u64,
    /// SEC-3: `/v1/resolve` requests one peer address may make per second once its burst is
    /// spent (429 `too_many_requests_from_peer` over it).
    #[arg(long, env = "SWITCHYARD_RESOLVE_RATE_PER_PEER", default_value_t = DEFAULT_RESOLVE_RATE.per_second,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    resolve_rate_per_peer: u32,
    /// SEC-3: `/v1/resolve` requests one peer address may make at once (its bucket).
    #[arg(long, env = "SWITCHYARD_RESOLVE_BURST_PER_PEER", default_value_t = DEFAULT_RESOLVE_RATE.burst,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    resolve_burst_per_peer: u32,
    /// SEC-3: peer addresses whose resolve rate is tracked at once (≈ 150 bytes each); a new
    /// address while all are busy is refused 429 `too_many_peers`.
    #[arg(long, env = "SWITCHYARD_RESOLVE_MAX_PEERS", default_value_t = DEFAULT_RESOLVE_RATE.max_peers as u64,
          value_parser = clap::value_parser!(u64).range(1..=16_777_216))]
    resolve_max_peers: u64,
    /// HO-A4 / SCALE-1: a desktop of a host the store does not know is enrolled at this cell
    /// on its first registration (`true`), or refused `enrolment_disabled` with nothing
    /// written (`false`: hosts are provisioned ahead, so a stray or misconfigured desktop
    /// cannot create one). Default `true`: the embedded quick start and a fleet that grows by
    /// desktops registering need no provisioning step.
    #[arg(long, env = "SWITCHYARD_ENROL_UNKNOWN_HOSTS", default_value_t = true,
          action = clap::ArgAction::Set, value_parser = clap::value_parser!(bool))]
    enrol_unknown_hosts: bool,
    /// HO-A5: the longest wait between two writes of a drain fence the store did not take (the
    /// wait doubles from 500 ms up to this; the fence is never given up).
    #[arg(long, env = "SWITCHYARD_FENCE_RETRY_MAX_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    fence_retry_max_ms: u64,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    store_limits: StoreLimitArgs,
    #[command(flatten)]
    journal: switchyard_adapters::journal::JournalArgs,
}

#[derive(Args, Debug)]
pub struct DirectorArgs {
    #[command(flatten)]
    db: DbArgs,
    /// The sweep's name: its cursor and its lease are kept under it in the store. Directors
    /// started with the same name share one sweep: one runs the passes, the others stand by
    /// (SCALE-6).
    #[arg(long, env = "SWITCHYARD_DIRECTOR_ID", default_value = "director",
          value_parser = parse_director_id)]
    id: String,
    /// SCALE-6: the sweep's lease. The holder renews it while it runs passes; a standby takes
    /// over within this plus one --interval-ms of the holder's last renewal (a crash, a
    /// partition from the store). At least twice --db-txn-timeout-ms, at most 1 hour.
    #[arg(long, env = "SWITCHYARD_SWEEP_LEASE_MS", default_value_t = DEFAULT_SWEEP_LEASE_MS)]
    sweep_lease_ms: u64,
    /// The master secret of internal requests (>= 16 bytes): each request is signed with the
    /// target cell's key derived from it (SEC-2).
    #[arg(long, env = "SWITCHYARD_HANDOFF_SECRET", hide_env_values = true)]
    secret: String,
    /// Time between two passes. SEC-4: 100 ms ..= 1 day; 0 would run passes back to back
    /// against the shared store.
    #[arg(long, env = "SWITCHYARD_INTERVAL_MS", default_value_t = DEFAULT_INTERVAL_MS,
          value_parser = clap::value_parser!(u64).range(MIN_INTERVAL_MS..=86_400_000))]
    interval_ms: u64,
    /// HO-3: cohort percentage (0..=100), carried in every request.
    #[arg(long, env = "SWITCHYARD_COHORT_PERCENT", default_value_t = 100)]
    cohort_percent: u8,
    /// HO-A5: stop new attempts (in-flight ones still reconcile at the cells).
    #[arg(long, env = "SWITCHYARD_DISABLED")]
    disabled: bool,
    /// HO-3: a measurement older than this is not evidence for a move.
    #[arg(
        long,
        env = "SWITCHYARD_FRESHNESS_WINDOW_MS",
        default_value_t = 600_000
    )]
    freshness_window_ms: u64,
    /// HO-3: a host that moved is not moved again for this long.
    #[arg(long, env = "SWITCHYARD_HOST_COOLDOWN_MS", default_value_t = 3_600_000)]
    host_cooldown_ms: u64,
    /// HO-S2: hosts read per page of a pass (1..=1000).
    #[arg(long, env = "SWITCHYARD_PAGE_SIZE", default_value_t = 1_000)]
    page_size: u32,
    /// HO-S2 / SCALE-6: pages read per pass at most (1..=1000). At the defaults a pass reads
    /// 20,000 hosts: 1,000,000 are swept in 50 passes, 500 s, within the 600 s freshness
    /// window (the director logs its sweep period at start, WARN if it is longer).
    #[arg(long, env = "SWITCHYARD_MAX_PAGES", default_value_t = 20)]
    max_pages: u32,
    /// HO-S2 / SCALE-6: requests sent per pass at most (1..=10000). 2,000 per 10 s is twice the
    /// store's default rate (6,000 moves a minute), so the store's limit binds, not this.
    #[arg(long, env = "SWITCHYARD_MAX_DISPATCH", default_value_t = 2_000)]
    max_dispatch: u32,
    /// HO-S2: a pass stops dispatching after this many transport failures, all cells
    /// together (HO-L3: a cell that fails is backed off on its own first, so one dark cell
    /// spends at most its --max-in-flight-per-cell of it).
    #[arg(long, env = "SWITCHYARD_MAX_FAILURES", default_value_t = 64)]
    max_failures: u32,
    /// SCALE-6: requests in flight at once, all source cells together (1..=10000).
    #[arg(long, env = "SWITCHYARD_DIRECTOR_MAX_IN_FLIGHT", default_value_t = 64)]
    max_in_flight: u32,
    /// HO-L3 / SCALE-6: requests in flight at once to one source cell (1..=10000): what one
    /// unreachable cell can hold of --max-in-flight.
    #[arg(
        long,
        env = "SWITCHYARD_DIRECTOR_MAX_IN_FLIGHT_PER_CELL",
        default_value_t = 4
    )]
    max_in_flight_per_cell: u32,
    /// SCALE-6: pages read ahead while earlier pages still have requests in flight
    /// (1..=1000); the cursor moves past a page only once all of its requests ended.
    #[arg(long, env = "SWITCHYARD_DIRECTOR_MAX_PAGES_AHEAD", default_value_t = 4)]
    max_pages_ahead: u32,
    /// HO-L3: how long a source cell that timed out or refused gets no request (then one
    /// probe); each failed probe doubles it up to --cell-backoff-max-ms.
    #[arg(
        long,
        env = "SWITCHYARD_DIRECTOR_CELL_BACKOFF_MIN_MS",
        default_value_t = 1_000
    )]
    cell_backoff_min_ms: u64,
    /// HO-L3: the longest backoff of a source cell (at most one day).
    #[arg(
        long,
        env = "SWITCHYARD_DIRECTOR_CELL_BACKOFF_MAX_MS",
        default_value_t = 60_000
    )]
    cell_backoff_max_ms: u64,
    /// Bound of one request to a cell (connect, answer and body).
    #[arg(
        long,
        env = "SWITCHYARD_DIRECTOR_REQUEST_TIMEOUT_MS",
        default_value_t = 8_000
    )]
    request_timeout_ms: u64,
    /// Re-sends of a request whose answer was lost (same op id, fresh signature).
    #[arg(long, env = "SWITCHYARD_RETRIES", default_value_t = 2)]
    retries: usize,
    /// HO-L4: ended attempt records (fences, and commits whose desktop registered or whose
    /// recovery started) older than this are removed, a batch per pass. At least 1 hour and
    /// the store's registration timeout (the store re-checks it at every reap), and the
    /// director's request window; at most 366 days. 24 h at 100 moves a second keeps
    /// 8,640,000 rows, under the default --max-attempt-rows (docs/HANDOFF.md, "Sizing").
    #[arg(long, env = "SWITCHYARD_ATTEMPT_RETENTION_MS",
          default_value_t = DEFAULT_ATTEMPT_RETENTION_MS)]
    attempt_retention_ms: u64,
    /// HO-L4: attempt records removed per pass at most, in one transaction (1..=50000). The
    /// default removes more than a pass adds at the store's default rate (1,000 per 10 s).
    #[arg(long, env = "SWITCHYARD_REAP_BATCH", default_value_t = DEFAULT_REAP_BATCH)]
    reap_batch: u32,
    /// HO-L4 / HO-A6: expired migrations (moves whose desktop never registered at the target)
    /// recovered per pass at most, one short transaction each (1..=100000): in-flight slots
    /// are freed at least at the rate they fill (1,000 per pass at the defaults).
    #[arg(long, env = "SWITCHYARD_MAX_EXPIRED_PER_PASS",
          default_value_t = DEFAULT_MAX_EXPIRED_PER_PASS)]
    max_expired_per_pass: u32,
    /// Run one pass, print its JSON report, exit.
    #[arg(long)]
    once: bool,
    /// EXPLAIN-1 (with --once): before the report, print one line per host examined:
    /// `[handoff-explain] host=<id> ineligible rule=<name> <numbers>` (HO-3's improvement in ms
    /// against 25 and in % against 20, cohort bucket against the percent, the target's capacity
    /// used/limit, the cooldown's end, the measurement's age against the freshness window; the
    /// cells of an HO-C1 refusal), or `... eligible target_cell=<cell> <numbers>`.
    #[arg(long, requires = "once")]
    explain: bool,
    /// OPS-2: where /healthz, /readyz and /metrics listen (not with --once).
    #[arg(
        long,
        env = "SWITCHYARD_METRICS_LISTEN",
        default_value = "127.0.0.1:9464"
    )]
    metrics_listen: SocketAddr,
    /// OPS-1: attempts to reach the store at start before giving up (exit 1). Unset: retry
    /// until it answers or the director is stopped (with --once: one attempt).
    #[arg(long, env = "SWITCHYARD_DIRECTOR_STORE_ATTEMPTS",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    store_attempts: Option<u32>,
    /// OPS-1: the longest wait between two attempts to reach the store at start (the first
    /// waits 250 ms, each next one twice as long up to this).
    #[arg(long, env = "SWITCHYARD_DIRECTOR_STORE_RETRY_MAX_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(250..=300_000))]
    store_retry_max_ms: u64,
    #[command(flatten)]
    journal: switchyard_adapters::journal::JournalArgs,
}

#[derive(Args, Debug)]
pub struct DesktopArgs {
    /// Any cell's URL (repeatable): used to resolve where the host is assigned.
    #[arg(
        long = "resolver",
        env = "SWITCHYARD_RESOLVERS",
        value_delimiter = ',',
        required = true,
        value_parser = parse_cell_url
    )]
    resolvers: Vec<String>,
    /// The desktop's host id.
    #[arg(long, env = "SWITCHYARD_HOST", value_parser = parse_host_id)]
    host: u64,
    /// The control token; or give `--desktop-secret` to derive it.
    #[arg(long, env = "SWITCHYARD_DESKTOP_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Or the cells' desktop secret, to derive the token here (tests and demos).
    #[arg(long, env = "SWITCHYARD_DESKTOP_SECRET", hide_env_values = true)]
    desktop_secret: Option<String>,
    /// HO-C1: an old desktop without the idle-handoff capability.
    #[arg(long, env = "SWITCHYARD_NO_CAPABILITY")]
    no_capability: bool,
    /// HO-3: report `TARGET:CURRENT_RTT_MS:TARGET_RTT_MS` after registering.
    #[arg(long, env = "SWITCHYARD_MEASURE")]
    measure: Option<String>,
    /// Stop after this long (default: until SIGTERM or Ctrl-C); then print the JSON state.
    #[arg(long, env = "SWITCHYARD_FOR_MS")]
    for_ms: Option<u64>,
}

#[derive(Args, Debug)]
pub struct MobileArgs {
    /// Any cell's URL (repeatable, or comma-separated): where the host is resolved.
    #[arg(
        long = "resolver",
        env = "SWITCHYARD_RESOLVERS",
        value_delimiter = ',',
        required = true,
        value_parser = parse_cell_url
    )]
    resolvers: Vec<String>,
    /// The host to reach.
    #[arg(long, env = "SWITCHYARD_HOST", value_parser = parse_host_id)]
    host: u64,
    #[command(flatten)]
    credential: ClientCredentialArgs,
    /// Mutations to send (each acked by the desktop before the next).
    #[arg(long, env = "SWITCHYARD_MUTATIONS", default_value_t = 3)]
    mutations: u32,
    /// Mutation ids are `<prefix>-<n>` (make it unique per client).
    #[arg(long, env = "SWITCHYARD_PREFIX", default_value = "m")]
    prefix: String,
    /// Stay attached this long after the last ack.
    #[arg(long, env = "SWITCHYARD_HOLD_MS", default_value_t = 0)]
    hold_ms: u64,
    /// Behave like an old mobile: retry the same address (paced) before re-resolving.
    #[arg(long, env = "SWITCHYARD_OLD_CLIENT")]
    old_client: bool,
    /// Connection attempts at most (paced 0.1-2 s apart); then exit 1 with the last cause.
    #[arg(long, env = "SWITCHYARD_MAX_ATTEMPTS", default_value_t = 60)]
    max_attempts: u32,
}

/// SEC-1: where a client's credential comes from.
#[derive(Args, Debug)]
pub struct ClientCredentialArgs {
    /// The client credential its desktop issued (`switchyard client-token`).
    #[arg(
        long = "client-token",
        env = "SWITCHYARD_CLIENT_TOKEN",
        hide_env_values = true
    )]
    client_token: Option<String>,
    /// Or mint one here from the cells' desktop secret (tests and drills), valid one hour.
    #[arg(long, env = "SWITCHYARD_DESKTOP_SECRET", hide_env_values = true)]
    desktop_secret: Option<String>,
}

#[derive(Args, Debug)]
pub struct ClientTokenArgs {
    /// The host the credential lets its client reach.
    #[arg(long, value_parser = parse_host_id)]
    host: u64,
    /// The host's desktop token (what the desktop holds) ...
    #[arg(long, env = "SWITCHYARD_DESKTOP_TOKEN", hide_env_values = true)]
    desktop_token: Option<String>,
    /// ... or the cells' desktop secret it derives from.
    #[arg(long, env = "SWITCHYARD_DESKTOP_SECRET", hide_env_values = true)]
    desktop_secret: Option<String>,
    /// How long the credential is valid (cells refuse more than their
    /// --client-token-max-lifetime-ms, a week by default).
    #[arg(long, default_value_t = 86_400_000,
          value_parser = clap::value_parser!(u64).range(1_000..=31_536_000_000))]
    ttl_ms: u64,
}

impl ClientTokenArgs {
    fn mint(&self) -> Result<String, String> {
        let desktop_token = match (&self.desktop_token, &self.desktop_secret) {
            (Some(t), _) => check_desktop_token(t)?,
            (None, Some(s)) => secret(s, "--desktop-secret")?.desktop_token(self.host),
            (None, None) => return Err("give --desktop-token or --desktop-secret".into()),
        };
        let expires_ms = Clock::default().now().0.saturating_add(self.ttl_ms);
        Ok(mint_client_token(&desktop_token, self.host, expires_ms))
    }
}

#[derive(Args, Debug)]
pub struct TokenArgs {
    /// The desktop's host id.
    #[arg(long, value_parser = parse_host_id)]
    host: u64,
    /// The cells' desktop secret the token derives from.
    #[arg(long, env = "SWITCHYARD_DESKTOP_SECRET", hide_env_values = true)]
    desktop_secret: String,
}

/// The settings a fresh store starts with (an existing row is never overwritten).
#[must_use]
pub fn default_store_config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 3_600_000,
        },
        max_in_flight_migrations: DEFAULT_MAX_IN_FLIGHT_MIGRATIONS,
        rate_window_ms: DEFAULT_RATE_WINDOW_MS,
        max_commits_per_window: DEFAULT_MAX_COMMITS_PER_WINDOW,
        registration_timeout_ms: 120_000,
        bounds: StoreBounds::FLEET,
    }
}

async fn open_store(db: &DbArgs) -> Result<SqlStore, String> {
    open_store_classified(db).await.map_err(|(_, e)| e)
}

/// OPS-1: [`open_store`] for a start that retries: whether a failure is the store not
/// answering (retried) or refusing what it was given (a URL it cannot use: retrying cannot
/// help).
async fn open_store_classified(db: &DbArgs) -> Result<SqlStore, (StartFailure, String)> {
    use switchyard_adapters::handoff::store::StoreSetupError;
    let opts = StoreOptions {
        txn_timeout: Duration::from_millis(db.db_txn_timeout_ms),
        max_connections: db.db_max_connections,
        ..StoreOptions::default()
    };
    let store = SqlStore::connect(&db.db, opts).await.map_err(|e| {
        let failure = match &e {
            StoreSetupError::UnsupportedUrl(_)
            | StoreSetupError::BadUrl { .. }
            | StoreSetupError::Pooler(_)
            | StoreSetupError::Connect {
                source: sqlx::Error::Configuration(_),
                ..
            } => StartFailure::Refused,
            _ => StartFailure::Unreachable,
        };
        (failure, e.to_string())
    })?;
    store
        .put_settings(&default_store_config(), false)
        .await
        .map_err(|e| (StartFailure::Unreachable, e.to_string()))?;
    Ok(store)
}

fn secret(value: &str, what: &str) -> Result<Secret, String> {
    Secret::new(value.as_bytes(), what).map_err(|e| e.to_string())
}

/// Largest keys file read (two keys and comments fit many times over).
const MAX_KEYS_FILE_BYTES: u64 = 64 * 1024;

/// SEC-2 / SEC-4: a cell's keys file, validated: a regular file (a FIFO or device is refused,
/// never waited on), at most `MAX_KEYS_FILE_BYTES`, one or two well-formed keys.
fn read_keys_file(path: &Path, cell: CellId) -> Result<KeyRing, String> {
    let what = format!("--keys-file {}", path.display());
    let bytes = switchyard_adapters::files::read_small_regular(path, &what, MAX_KEYS_FILE_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{what}: not UTF-8 text"))?;
    // SEC-2a / SEC-4: only this cell's keys; a file of another cell's keys is refused.
    KeyRing::parse_for(&text, &what, cell).map_err(|e| e.to_string())
}

/// SEC-2: the keys a cell verifies internal requests with, from exactly one source: the master
/// secret (and a previous one during a roll) or a keys file. Validated before anything starts.
fn cell_keys(a: &CellArgs) -> Result<KeyRing, String> {
    let cell = CellId(a.cell_id);
    match (&a.secret, &a.keys_file) {
        (Some(current), None) => {
            let current = secret(current, "--secret / SWITCHYARD_HANDOFF_SECRET")?;
            let previous = a
                .previous_secret
                .as_deref()
                .map(|p| secret(p, "--previous-secret / SWITCHYARD_HANDOFF_PREVIOUS_SECRET"))
                .transpose()?;
            Ok(KeyRing::from_secrets(cell, &current, previous.as_ref()))
        }
        (None, Some(path)) => {
            if a.previous_secret.is_some() {
                return Err(
                    "--previous-secret goes with --secret: a keys file lists the \
                            previous key itself"
                        .into(),
                );
            }
            read_keys_file(path, cell)
        }
        // Refused rather than picking one: a cell given its own keys should not also hold
        // the master secret (which signs for every cell).
        (Some(_), Some(_)) => Err("give --secret / SWITCHYARD_HANDOFF_SECRET or --keys-file, \
                                   not both (unset SWITCHYARD_HANDOFF_SECRET where a cell has \
                                   a keys file)"
            .into()),
        (None, None) => Err(
            "give --secret / SWITCHYARD_HANDOFF_SECRET or --keys-file / \
             SWITCHYARD_HANDOFF_KEYS_FILE"
                .into(),
        ),
    }
}

fn print_line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
}

fn print_json<T: serde::Serialize>(v: &T) {
    if let Ok(text) = serde_json::to_string(v) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
    }
}

/// Why a handoff command ended unsuccessfully: a value it refused before starting (exit 2, as
/// clap's own usage errors), or a failure while it ran (exit 1). See the exit-code table in
/// `docs/OPERATIONS.md`.
#[derive(Debug)]
enum Failure {
    Refused(String),
    Failed(String),
    /// HO-L2: a cell lost its identity lease to another process and stopped gracefully.
    LeaseLost(String),
    /// SEC-1 / OPS-2: a cell refused the credential a `desktop` or `mobile` holds; a retry is
    /// refused the same way ([`CREDENTIAL_REFUSED_EXIT_CODE`]).
    CredentialRefused(String),
}

/// The exit status of a `desktop` or `mobile` whose credential a cell refused (desktop token:
/// HTTP 401 at the upgrade; client credential: close 4401). Documented in docs/OPERATIONS.md.
pub const CREDENTIAL_REFUSED_EXIT_CODE: u8 = 4;

/// Anything not marked refused is a failure while running.
impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Failed(s)
    }
}

/// A value refused before anything started.
fn refused(s: String) -> Failure {
    Failure::Refused(s)
}

pub async fn run(command: HandoffCommand) -> ExitCode {
    let result = match command {
        HandoffCommand::Cell(a) => run_cell(*a).await,
        HandoffCommand::Director(a) => run_director(a).await,
        HandoffCommand::Desktop(a) => run_desktop(a).await,
        HandoffCommand::Mobile(a) => run_mobile_cmd(a).await,
        HandoffCommand::DesktopToken(a) => secret(&a.desktop_secret, "--desktop-secret")
            .map(|s| print_json(&s.desktop_token(a.host)))
            .map_err(refused),
        // Raw, not JSON: `TOKEN=$(switchyard client-token …)` is how it is used.
        HandoffCommand::ClientToken(a) => a.mint().map(|token| print_line(&token)).map_err(refused),
    };
    let (line, code) = match result {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Failure::Refused(e)) => (e, 2),
        Err(Failure::Failed(e)) => (e, 1),
        Err(Failure::LeaseLost(e)) => (e, LEASE_LOST_EXIT_CODE),
        Err(Failure::CredentialRefused(e)) => (e, CREDENTIAL_REFUSED_EXIT_CODE),
    };
    // One error format for every command: `switchyard: <why>` on stderr.
    let line = line.replace(['\n', '\r'], " ");
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "switchyard: {line}");
    ExitCode::from(code)
}

/// Run an operator command. Exit 0 on success; otherwise 1 and one line on stderr saying why.
pub async fn run_operator(command: OperatorCommand) -> ExitCode {
    let result = match command {
        OperatorCommand::Drain(a) => drain(a).await,
        OperatorCommand::Undrain(a) => undrain(a).await,
        OperatorCommand::CellKey(a) => print_cell_key(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, whatever the cell sent.
            let line = e.replace(['\n', '\r'], " ");
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "switchyard: {line}");
            ExitCode::from(1)
        }
    }
}

/// POST a signed JSON body to the cell; the status and the body (bounded).
async fn post_signed(
    target: &OperatorArgs,
    path: &str,
    body: Vec<u8>,
) -> Result<http::HttpResponse, String> {
    let secret = secret(&target.secret, "--secret / SWITCHYARD_HANDOFF_SECRET")?;
    let incarnation = cell_incarnation(target).await?;
    let headers = auth::sign_request(
        &secret,
        Method::POST.as_str(),
        path,
        CellId(target.cell_id),
        incarnation,
        Clock::default().now().0,
        &body,
    )?;
    http::request(
        Method::POST,
        &target.cell_url,
        path,
        &headers,
        body,
        Duration::from_millis(target.timeout_ms),
    )
    .await
    .map_err(|e| e.to_string())
}

/// SEC-2a: the incarnation of the process serving `--cell-url` now, read from its public
/// `GET /v1/capabilities` just before signing: the request is then valid for that process only,
/// so a copy replayed after the cell restarts is refused `wrong_incarnation`. The cell id is
/// still `--cell-id`'s, never the answer's: a URL that serves another cell is refused here and
/// nothing is sent.
async fn cell_incarnation(target: &OperatorArgs) -> Result<Incarnation, String> {
    let resp = http::request(
        Method::GET,
        &target.cell_url,
        CAPABILITIES_PATH,
        &[],
        Vec::new(),
        Duration::from_millis(target.timeout_ms),
    )
    .await
    .map_err(|e| e.to_string())?;
    if !resp.status.is_success() {
        return Err(format!(
            "reading the cell's incarnation ({CAPABILITIES_PATH}): {}",
            unexpected(&resp)
        ));
    }
    let caps: Capabilities = serde_json::from_slice(&resp.body).map_err(|_| {
        format!(
            "reading the cell's incarnation ({CAPABILITIES_PATH}): {}",
            unexpected(&resp)
        )
    })?;
    if caps.cell != target.cell_id {
        return Err(format!(
            "--cell-url {} serves cell {}, not --cell-id {}: nothing was sent",
            target.cell_url, caps.cell, target.cell_id
        ));
    }
    Ok(Incarnation(caps.incarnation))
}

/// `switchyard handoff cell-key`: a keys file for one cell, on stdout.
fn print_cell_key(a: &CellKeyArgs) -> Result<(), String> {
    let master = secret(&a.secret, "--secret / SWITCHYARD_HANDOFF_SECRET")?;
    let key = master.cell_key(CellId(a.cell));
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "# switchyard cell key: cell {}, key id {}\n{}",
        a.cell,
        key.id(),
        key.to_hex()
    )
    .map_err(|e| format!("stdout: {e}"))
}

fn unexpected(resp: &http::HttpResponse) -> String {
    let body = String::from_utf8_lossy(&resp.body);
    let body = body.trim();
    let shown: String = body.chars().take(200).collect();
    format!("the cell answered HTTP {}: {shown}", resp.status)
}

async fn drain(a: DrainArgs) -> Result<(), String> {
    let host = a.target.host;
    let body =
        serde_json::to_vec(&DrainRequest::new(host, a.reason.into())).map_err(|e| e.to_string())?;
    let resp = post_signed(&a.target, DRAIN_PATH, body).await?;
    if !resp.status.is_success() {
        return Err(unexpected(&resp));
    }
    let answer: DrainAnswer = serde_json::from_slice(&resp.body).map_err(|_| unexpected(&resp))?;
    match answer.state {
        DrainState::Drained | DrainState::AlreadyDrained => {
            print_json(&answer);
            Ok(())
        }
        DrainState::UnknownHost => Err(format!(
            "drain of host {host} refused: {} (the cell serves no such host)",
            answer.state.name()
        )),
    }
}

async fn undrain(a: UndrainArgs) -> Result<(), String> {
    let host = a.target.host;
    let body = serde_json::to_vec(&UndrainRequest { host }).map_err(|e| e.to_string())?;
    let resp = post_signed(&a.target, UNDRAIN_PATH, body).await?;
    if resp.status.is_success() {
        let answer: UndrainAnswer =
            serde_json::from_slice(&resp.body).map_err(|_| unexpected(&resp))?;
        print_json(&answer);
        return Ok(());
    }
    match serde_json::from_slice::<RefusedAnswer>(&resp.body) {
        Ok(refused) if resp.status == hyper::StatusCode::CONFLICT => Err(format!(
            "undrain of host {host} refused: {}",
            refused.refused
        )),
        _ => Err(unexpected(&resp)),
    }
}

async fn run_cell(a: CellArgs) -> Result<(), Failure> {
    // OPS-1: registered first, so a signal during start-up is a graceful stop too.
    let signals = lifecycle::Signals::listen();
    let internal = cell_keys(&a).map_err(refused)?;
    let desktop = secret(
        &a.desktop_secret,
        "--desktop-secret / SWITCHYARD_DESKTOP_SECRET",
    )
    .map_err(refused)?;
    let store = open_store(&a.db).await?;
    let store_limits = a.store_limits.settings();
    store
        .put_limits(&store_limits)
        .await
        .map_err(|e| format!("writing the store limits: {e}"))?;
    info!(
        max_hosts = store_limits.bounds.max_hosts,
        max_cells = store_limits.bounds.max_cells,
        max_attempt_rows = store_limits.bounds.max_attempt_rows,
        max_in_flight_migrations = store_limits.max_in_flight_migrations,
        max_commits_per_window = store_limits.max_commits_per_window,
        rate_window_ms = store_limits.rate_window_ms,
        "store limits in force"
    );
    let mut cfg = CellConfig::new(CellId(a.cell_id), a.listen, internal, desktop);
    let (journal, online) = open_journal(&a.journal)?;
    cfg.journal = journal.clone();
    if let Some(online) = online {
        cfg.extra_samples =
            switchyard_adapters::handoff::cell::ExtraSamples(Some(Arc::new(move || {
                online.samples()
            })));
    }
    cfg.public_url = a.public_url;
    cfg.capacity = a.capacity;
    cfg.handoff_capable = !a.no_handoff_capability;
    cfg.request_timeout = Duration::from_millis(a.request_timeout_ms);
    cfg.reconcile_timeout = Duration::from_millis(a.reconcile_timeout_ms);
    cfg.quarantine_retry = Duration::from_millis(a.quarantine_retry_ms);
    cfg.refusal_hold = Duration::from_millis(a.refusal_hold_ms);
    cfg.cell_lease = Duration::from_millis(a.cell_lease_ms);
    cfg.lease_drift = Duration::from_millis(a.lease_drift_ms);
    cfg.client_token_max_lifetime = Duration::from_millis(a.client_token_max_lifetime_ms);
    cfg.fence_retry_max = Duration::from_millis(a.fence_retry_max_ms);
    cfg.limits = a.limits.limits(DEFAULT_LIMITS).map_err(refused)?;
    cfg.enroll_unknown_hosts = a.enrol_unknown_hosts;
    cfg.resolve_rate = RateBounds {
        per_second: a.resolve_rate_per_peer,
        burst: a.resolve_burst_per_peer,
        max_peers: usize::try_from(a.resolve_max_peers).map_err(|_| {
            refused(format!(
                "--resolve-max-peers {}: too large",
                a.resolve_max_peers
            ))
        })?,
    };
    info!(
        enrol_unknown_hosts = a.enrol_unknown_hosts,
        "enrolment of unknown hosts at this cell"
    );
    let cell = start_cell(cfg, store, Clock::default())
        .await
        .map_err(|e| e.to_string())?;
    info!(url = %cell.url, incarnation = cell.incarnation.0, "cell running; SIGTERM or Ctrl-C stops it");
    // OPS-1 under systemd: ready once it holds its lease and listens.
    switchyard_adapters::sd_notify::ready("cell listening");
    let _ = switchyard_adapters::sd_notify::spawn_watchdog();
    // OPS-1 / HO-L2: a signal, or the lease lost to another process: the same graceful stop.
    let lost = tokio::select! {
        _ = signals.stopped() => None,
        () = reload_keys_on_sighup(&cell, CellId(a.cell_id), a.keys_file.as_deref()) => None,
        lost = cell.lease_lost() => Some(lost),
    };
    let lapsed = cell.lease_lapsed();
    // Attempts in flight get most of the bound; the rest is for closing and the lease.
    let attempts_bound = lifecycle::STOP_BOUND.saturating_sub(Duration::from_secs(2));
    let mut stats = None;
    lifecycle::bounded_stop("the cell", async {
        stats = Some(cell.shutdown(attempts_bound).await);
    })
    .await?;
    journal.flush();
    if let Some(s) = stats {
        info!(
            cell = a.cell_id,
            clients_attached = s.clients_attached,
            attempts_started = s.attempts_started,
            transactions_run = s.transactions_run,
            retired_committed = s.retired_committed,
            busy_answers = s.busy_answers,
            drains = s.drains,
            relayed = s.relayed,
            clients_unauthenticated = s.clients_unauthenticated,
            internal_refused = s.internal_refused,
            connections_admitted = s.server.connections_admitted,
            "cell stopped"
        );
    }
    match lost {
        // HO-L5: no renewal confirmed in time (the store unreachable): stopped before a
        // successor could take the cell.
        Some(_) if lapsed => Err(Failure::LeaseLost(format!(
            "cell {} stopped serving: no renewal of its identity lease was confirmed in time (the store is unreachable), so it stopped before a successor could take the cell (exit {LEASE_LOST_EXIT_CODE}); it takes the cell again when started while the store answers",
            a.cell_id
        ))),
        Some(lost) => Err(Failure::LeaseLost(format!(
            "cell {} lost its identity lease to another process (incarnation {}) and stopped (exit {LEASE_LOST_EXIT_CODE})",
            a.cell_id,
            holder_name(lost)
        ))),
        None => Ok(()),
    }
}

/// SEC-2: re-read the keys file on every SIGHUP and roll the cell's keys; a file that does not
/// validate is logged and the cell keeps the keys it has. Never returns (without a keys file it
/// only waits, and SIGHUP keeps its default action).
async fn reload_keys_on_sighup(cell: &CellHandle, id: CellId, keys_file: Option<&Path>) {
    #[cfg(unix)]
    if let Some(path) = keys_file {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::hangup()) {
            Ok(mut hup) => {
                while hup.recv().await.is_some() {
                    match read_keys_file(path, id) {
                        Ok(keys) => cell.set_internal_keys(keys),
                        Err(e) => {
                            warn!(error = %e, "keys file not reloaded; the cell keeps its keys")
                        }
                    }
                }
            }
            Err(e) => warn!(error = %e, "no SIGHUP handler: the keys file is read at start only"),
        }
    }
    #[cfg(not(unix))]
    let _ = (cell, keys_file);
    std::future::pending::<()>().await;
}

async fn run_director(a: DirectorArgs) -> Result<(), Failure> {
    let secret = secret(&a.secret, "--secret / SWITCHYARD_HANDOFF_SECRET").map_err(refused)?;
    let limits = ScanLimits {
        page_size: a.page_size,
        max_pages: a.max_pages,
        max_dispatch: a.max_dispatch,
    };
    limits.validate().map_err(|e| {
        refused(format!(
            "invalid scan limits ({e:?}): --page-size/--max-pages/--max-dispatch"
        ))
    })?;
    if a.cohort_percent > 100 {
        return Err(refused("--cohort-percent must be 0..=100".into()));
    }
    let dispatch = DispatchLimits {
        max_in_flight: a.max_in_flight,
        max_in_flight_per_cell: a.max_in_flight_per_cell,
        max_pages_ahead: a.max_pages_ahead,
        backoff_min_ms: a.cell_backoff_min_ms,
        backoff_max_ms: a.cell_backoff_max_ms,
    };
    dispatch.validate().map_err(|e| {
        refused(format!(
            "invalid dispatch limits ({e:?}): --max-in-flight/--max-in-flight-per-cell (1..=10000), \
             --max-pages-ahead (1..=1000), --cell-backoff-min-ms (>= 1) <= --cell-backoff-max-ms (<= 1 day)"
        ))
    })?;
    validate_sweep_lease(a.sweep_lease_ms, a.db.db_txn_timeout_ms).map_err(|e| {
        refused(format!(
            "--sweep-lease-ms / SWITCHYARD_SWEEP_LEASE_MS: {e} (at least twice \
             --db-txn-timeout-ms plus 1, at most 3600000)"
        ))
    })?;
    let retention = Retention {
        attempt_retention_ms: a.attempt_retention_ms,
        reap_batch: a.reap_batch,
        max_expired_per_pass: a.max_expired_per_pass,
    };
    retention
        .validate(&retention_windows(&a))
        .map_err(|e| refused(e.to_string()))?;
    let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned());
    let schedule = StartRetry {
        max_delay_ms: a.store_retry_max_ms,
        max_attempts: a.store_attempts.or(a.once.then_some(1)),
        ..DIRECTOR_START_RETRY
    };
    let cfg = DirectorConfig {
        id: a.id,
        policy: DirectorPolicy {
            enabled: !a.disabled,
            cohort_percent: a.cohort_percent,
            policy: PolicyConfig {
                freshness_window_ms: a.freshness_window_ms,
                host_cooldown_ms: a.host_cooldown_ms,
            },
        },
        limits,
        max_failures: a.max_failures,
        request_timeout: Duration::from_millis(a.request_timeout_ms),
        retries: a.retries,
        secret,
        interval: Duration::from_millis(a.interval_ms),
        dispatch,
    };
    let (journal, online) = open_journal(&a.journal)?;
    let start = StoreStart::default();
    if a.once {
        let store =
            open_store_with_retry(schedule, &start, || open_store_classified(&a.db)).await?;
        let director = Director::new(cfg, store, Clock::default())
            .with_sweep_lease_ms(a.sweep_lease_ms)
            .with_retention(retention)
            .named_holder(host_name.as_deref())
            .with_journal(journal);
        if a.explain {
            // EXPLAIN-1: the core decided and explained each host; this only prints. A pass
            // that failed still shows the hosts it examined.
            let mut examined = Vec::new();
            let pass = director.pass_explained(&mut examined).await;
            director.release_lease().await;
            // HO-L3: a host whose send failed says how (a refusal with the cell's word).
            let failed = pass
                .as_ref()
                .map(|r| r.send_failed.clone())
                .unwrap_or_default();
            // HO-L4: a host whose move the store refused says why (`moved=no why=store_full`).
            let refused = pass
                .as_ref()
                .map(|r| r.refused_hosts.clone())
                .unwrap_or_default();
            for decision in &examined {
                let host = decision.host.0;
                match failed.get(&host).or_else(|| refused.get(&host)) {
                    Some(how) => print_line(&format!("{} {how}", explain_line(decision))),
                    None => print_line(&explain_line(decision)),
                }
            }
            print_json(&pass.map_err(|e| e.to_string())?);
            return Ok(());
        }
        let report = director.pass().await;
        // SCALE-6: a running director takes the sweep back at its next pass.
        director.release_lease().await;
        let report = report.map_err(|e| e.to_string())?;
        director.flush_journal();
        print_json(&report);
        return Ok(());
    }
    // OPS-1: registered before the store is reached (`--once` keeps the default: Ctrl-C ends
    // it); OPS-2: the probes answer meanwhile ("store unreachable").
    let signals = lifecycle::Signals::listen();
    let stopped = signals.stopped();
    tokio::pin!(stopped);
    let stop = Stop::new();
    let stop_rx = stop.listener();
    let probe = Arc::new(DirectorProbe {
        start: Arc::new(start),
        online: online.clone(),
        totals: std::sync::OnceLock::new(),
        health: std::sync::OnceLock::new(),
    });
    probes::serve_alone("director", a.metrics_listen, probe.clone(), stop_rx.clone()).await?;
    // OPS-1 under systemd: ready once its probes listen (/readyz then says whether the store
    // is reached).
    switchyard_adapters::sd_notify::ready("director probes listening");
    let _ = switchyard_adapters::sd_notify::spawn_watchdog();
    let store = tokio::select! {
        store = open_store_with_retry(schedule, &probe.start, || open_store_classified(&a.db)) => store?,
        _ = &mut stopped => {
            stop.stop();
            info!(failed_attempts = probe.start.failed(), "director stopped before the store was reached");
            return Ok(());
        }
    };
    let director = Director::new(cfg, store, Clock::default())
        .with_sweep_lease_ms(a.sweep_lease_ms)
        .with_retention(retention)
        .named_holder(host_name.as_deref())
        .with_journal(journal);
    let _ = probe.totals.set(director.totals());
    let _ = probe.health.set(director.health());
    let mut task = tokio::spawn(director.run(stop_rx));
    let totals = tokio::select! {
        _ = &mut stopped => {
            // A pass in flight finishes (its requests are idempotent by op id anyway).
            stop.stop();
            let mut totals = None;
            lifecycle::bounded_stop("the director", async {
                totals = (&mut task).await.ok();
            })
            .await?;
            totals
        }
        ended = &mut task => ended.ok(),
    };
    if let Some(t) = totals {
        info!(
            passes = t.passes,
            failed_passes = t.failed_passes,
            dispatched = t.dispatched,
            committed = t.committed,
            failed = t.failed,
            "director stopped"
        );
    }
    Ok(())
}

/// OPS-2: the director is ready once it reached the store, unless its last pass failed on it.
struct DirectorProbe {
    start: Arc<StoreStart>,
    /// CONF-2: the online judge (`--conform`).
    online: Option<crate::conform_online::OnlineConformance>,
    /// Set once the store is reached and the director runs.
    totals: std::sync::OnceLock<Arc<std::sync::Mutex<DirectorTotals>>>,
    /// HO-L3: the source cells' health (set with `totals`).
    health: std::sync::OnceLock<Arc<std::sync::Mutex<CellHealth>>>,
}

impl DirectorProbe {
    fn totals(&self) -> DirectorTotals {
        self.totals
            .get()
            .map(|t| *t.lock().unwrap_or_else(|e| e.into_inner()))
            .unwrap_or_default()
    }

    fn health(&self) -> CellHealth {
        self.health
            .get()
            .map(|h| h.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .unwrap_or_default()
    }
}

impl Probe for DirectorProbe {
    fn ready(&self) -> Result<(), String> {
        match (self.start.reached(), self.start.failed()) {
            (true, _) => {}
            (false, 0) => return Err("connecting to the store".to_owned()),
            (false, failed) => {
                return Err(format!(
                    "store unreachable: {failed} attempts to reach it at start failed; retrying"
                ))
            }
        }
        if self.totals().last_pass_failed {
            return Err("the last pass failed: the store is unreachable".to_owned());
        }
        // HO-L3: a stuck source cell shows here within one request timeout.
        let stuck = self.health().stuck;
        if !stuck.is_empty() {
            let cells: Vec<String> = stuck
                .iter()
                .map(|(c, (why, n))| format!("cell {} ({}, {n} failures)", c.0, why.label()))
                .collect();
            return Err(format!(
                "source cells backed off (their hosts wait, the others go on): {}",
                cells.join(", ")
            ));
        }
        Ok(())
    }

    fn samples(&self) -> Vec<Sample> {
        let totals = self.totals();
        let mut samples = probes::counters_of("director", "director total", &totals);
        samples.push(probes::gauge(
            "director_active",
            "1 if this director held the sweep's lease at its last pass, 0 while it stands by (SCALE-6)",
            u64::from(totals.active),
        ));
        samples.push(probes::gauge(
            "director_last_pass_failed",
            "1 if the last pass failed on the store",
            u64::from(totals.last_pass_failed),
        ));
        let health = self.health();
        samples.push(probes::gauge(
            "director_cells_backed_off",
            "source cells backed off after a timeout or a refusal (HO-L3)",
            u64::try_from(health.stuck.len()).unwrap_or(u64::MAX),
        ));
        for (reason, n) in &health.refused {
            samples.push(probes::labelled_counter(
                "director_moves_refused",
                "moves the store refused, by reason; each host is tried again at a later pass (HO-L4)",
                vec![("reason".to_owned(), (*reason).to_owned())],
                *n,
            ));
        }
        for reason in health.refusals.refusing() {
            samples.push(probes::labelled_gauge(
                "director_store_refusing",
                "1 while the store refuses moves for this reason: from the first refusal to a commit a pass later (HO-L4)",
                vec![("reason".to_owned(), reason.to_owned())],
                1,
            ));
        }
        for ((cell, reason), n) in &health.failures {
            samples.push(probes::labelled_counter(
                "director_dispatch_failures",
                "requests to a source cell that failed, by cell and reason (HO-L3)",
                vec![
                    ("cell".to_owned(), cell.0.to_string()),
                    ("reason".to_owned(), reason.name().to_owned()),
                ],
                *n,
            ));
        }
        for ((cell, reason), n) in &health.failures {
            if let Some(why) = reason.refusal() {
                samples.push(probes::labelled_counter(
                    "director_refusals",
                    "requests a source cell refused, by cell and the cell's reason (HO-L3, SEC-2)",
                    vec![
                        ("cell".to_owned(), cell.0.to_string()),
                        ("why".to_owned(), why.name().to_owned()),
                    ],
                    *n,
                ));
            }
        }
        for (cell, (offset_ms, skewed)) in &health.clock_offsets {
            let cell = vec![("cell".to_owned(), cell.0.to_string())];
            samples.push(probes::labelled_gauge(
                "director_cell_clock_offset_ms",
                "a source cell's clock minus the director's, from its answers' Date (ms, +-0.5 s) (HO-L3)",
                cell.clone(),
                *offset_ms,
            ));
            samples.push(probes::labelled_gauge(
                "director_cell_clock_skewed",
                "1 while a source cell's clock is off by more than half its timestamp window (HO-L3)",
                cell,
                i64::from(*skewed),
            ));
        }
        samples.push(probes::gauge(
            "director_store_unreachable_at_start",
            "1 while the director has not yet reached its store",
            u64::from(!self.start.reached()),
        ));
        samples.push(probes::counter(
            "director_store_start_failures",
            "attempts to reach the store at start that failed",
            u64::from(self.start.failed()),
        ));
        if let Some(online) = &self.online {
            samples.extend(online.samples());
        }
        samples
    }
}

fn parse_measure(m: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = m.split(':').collect();
    let bad = || format!("--measure {m:?}: expected TARGET:CURRENT_RTT_MS:TARGET_RTT_MS");
    match parts.as_slice() {
        [t, c, g] => Ok((
            t.parse().map_err(|_| bad())?,
            c.parse().map_err(|_| bad())?,
            g.parse().map_err(|_| bad())?,
        )),
        _ => Err(bad()),
    }
}

async fn run_desktop(a: DesktopArgs) -> Result<(), Failure> {
    // OPS-1: registered first, so a signal during start-up is a graceful stop too.
    let signals = lifecycle::Signals::listen();
    let token = match (a.token, a.desktop_secret) {
        (Some(t), _) => t,
        (None, Some(s)) => secret(&s, "--desktop-secret")
            .map_err(refused)?
            .desktop_token(a.host),
        (None, None) => return Err(refused("give --token or --desktop-secret".into())),
    };
    let measure = a
        .measure
        .as_deref()
        .map(parse_measure)
        .transpose()
        .map_err(refused)?;
    let handle = spawn_desktop(DesktopConfig {
        resolvers: a.resolvers,
        host: a.host,
        token,
        capable: !a.no_capability,
        measure,
        pace_min: Duration::from_millis(100),
        pace_max: Duration::from_secs(5),
        ping_every: Duration::from_secs(15),
    });
    // OPS-2: a refusal no retry can fix (its credential) ends the desktop by itself.
    tokio::select! {
        _ = signals.stopped_or(a.for_ms.map(Duration::from_millis)) => {}
        () = handle.gave_up() => {}
    }
    let state = handle.state();
    lifecycle::bounded_stop("the desktop", handle.stop()).await?;
    print_json(&state);
    match state.stopped {
        Some(why) => Err(Failure::CredentialRefused(format!(
            "the cell refused the desktop's token ({why}): check --token / SWITCHYARD_DESKTOP_TOKEN against the cells' desktop secret"
        ))),
        None => Ok(()),
    }
}

async fn run_mobile_cmd(a: MobileArgs) -> Result<(), Failure> {
    // OPS-1: registered first, so a signal during start-up is a graceful stop too.
    let signals = lifecycle::Signals::listen();
    let mutations = (0..a.mutations)
        .map(|n| format!("{}-{n}", a.prefix))
        .collect();
    let token = match (a.credential.client_token, a.credential.desktop_secret) {
        (Some(t), _) => t,
        (None, Some(s)) => ClientTokenArgs {
            host: a.host,
            desktop_token: None,
            desktop_secret: Some(s),
            ttl_ms: 3_600_000,
        }
        .mint()
        .map_err(refused)?,
        (None, None) => {
            return Err(refused("give --client-token or --desktop-secret".into()));
        }
    };
    let mut cfg = MobileConfig::new(a.resolvers, a.host, token, mutations);
    cfg.hold = Duration::from_millis(a.hold_ms);
    cfg.old_client = a.old_client;
    cfg.max_attempts = a.max_attempts;
    let stop = Stop::new();
    let stop_rx = stop.listener();
    // OPS-1: a signal stops the mobile between frames; it still prints its report.
    let signalled = tokio::spawn(async move {
        signals.stopped().await;
        stop.stop();
    });
    let report = run_mobile(cfg, stop_rx).await;
    signalled.abort();
    let done = report.done;
    let refused = report.not_authenticated;
    let last_failure = report.last_failure.clone();
    print_json(&report);
    if done {
        Ok(())
    } else if refused {
        Err(Failure::CredentialRefused(format!(
            "the cell refused the client credential ({}): mint a new one with `switchyard client-token`",
            last_failure.as_deref().unwrap_or("close 4401")
        )))
    } else {
        Err(Failure::Failed(format!(
            "mobile did not finish its mutations: {}",
            last_failure.as_deref().unwrap_or("stopped before it could")
        )))
    }
}

/// SEC-4: host ids are stored as SQL `BIGINT`: 0 ..= 2^63 - 1.
/// SCALE-6: a sweep's name is a store key and a log field: 1..=128 visible characters.
fn parse_director_id(value: &str) -> Result<String, String> {
    let n = value.chars().count();
    if n == 0 || n > 128 {
        return Err(format!("expected 1..=128 characters, got {n}"));
    }
    if value.chars().any(char::is_control) {
        return Err("control characters are not allowed".to_owned());
    }
    Ok(value.to_owned())
}

fn parse_host_id(value: &str) -> Result<u64, String> {
    let id: u64 = value
        .parse()
        .map_err(|_| format!("{value:?} is not a host id (digits, 0 to {})", i64::MAX))?;
    if i64::try_from(id).is_err() {
        return Err(format!(
            "{value} is past the largest host id the store holds ({})",
            i64::MAX
        ));
    }
    Ok(id)
}

/// SEC-4: the shortest `director --interval-ms` (the floor the director always kept).
const MIN_INTERVAL_MS: u64 = 100;
/// The director's default time between two passes (`--interval-ms`).
const DEFAULT_INTERVAL_MS: u64 = 10_000;

/// HO-L4: the windows a director knows in which an op id's record may still be needed: its
/// own re-sends of a request (every try within one request timeout) and one store
/// transaction. `check_retention` adds the 1 h floor; the store adds its registration timeout.
fn retention_windows(a: &DirectorArgs) -> [(RetentionWindow, u64); 2] {
    let tries = u64::try_from(a.retries)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    [
        (
            RetentionWindow::DirectorRequests,
            a.request_timeout_ms.saturating_mul(tries),
        ),
        (RetentionWindow::StoreTransaction, a.db.db_txn_timeout_ms),
    ]
}
/// SEC-4: the longest `--db-txn-timeout-ms` (10 minutes): past it the store's pool and
/// statement timeouts stop meaning anything (a larger value failed later, "pool timed out").
const MAX_DB_TXN_TIMEOUT_MS: u64 = 600_000;

/// SEC-4: a `--desktop-token` is what `desktop-token` prints: 64 lowercase hex digits. An
/// empty or mistyped one is refused rather than a credential minted from it.
fn check_desktop_token(token: &str) -> Result<String, String> {
    let token = token.trim();
    if token.len() != 64 || !auth::is_lower_hex(token) {
        // The value itself is not echoed (it may be most of a real token): its length is.
        return Err(format!(
            "--desktop-token / SWITCHYARD_DESKTOP_TOKEN ({} characters) is not a desktop token (64 lowercase hex digits, as `switchyard desktop-token` prints)",
            token.chars().count()
        ));
    }
    Ok(token.to_owned())
}

/// SEC-4: an operator command's `--cell-url`, or a desktop's or mobile's `--resolver`: an absolute `http://` URL with a host. An
/// `https://` one is refused naming TLS: this build does not speak it (docs/SECURITY.md: TLS
/// terminates at a reverse proxy in front of the cell).
fn parse_cell_url(value: &str) -> Result<String, String> {
    let url = url::Url::parse(value).map_err(|e| format!("{value:?} is not a URL: {e}"))?;
    match url.scheme() {
        "https" => Err(format!(
            "{value:?}: this build does not speak TLS; TLS terminates at a reverse proxy in front of the cell: give the cell's own plain http:// address"
        )),
        "http" if url.has_host() => Ok(value.to_owned()),
        _ => Err(format!("{value:?} must be an http:// URL with a host")),
    }
}

/// SEC-4: what clients and desktops are told to dial must be an absolute http(s) or ws(s) URL
/// with a host.
fn parse_public_url(value: &str) -> Result<String, String> {
    let url = url::Url::parse(value).map_err(|e| format!("{value:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https" | "ws" | "wss") || !url.has_host() {
        return Err(format!(
            "{value:?} must be an http://, https://, ws:// or wss:// URL with a host"
        ));
    }
    Ok(value.to_owned())
}

/// CONF-1: the journal `--journal` / `--journal-log` ask for (off when neither); CONF-2: with
/// `--conform`, the online judge as its observer (returned, for the metrics).
fn open_journal(
    args: &switchyard_adapters::journal::JournalArgs,
) -> Result<
    (
        switchyard_adapters::journal::Journal,
        Option<crate::conform_online::OnlineConformance>,
    ),
    Failure,
> {
    let online = args
        .conform
        .then(crate::conform_online::OnlineConformance::new);
    let observers = online
        .iter()
        .map(crate::conform_online::OnlineConformance::observer)
        .collect();
    let journal = switchyard_adapters::journal::Journal::open(&args.config(), observers)
        .map_err(|e| refused(e.to_string()))?;
    Ok((journal, online))
}

#[cfg(test)]
mod tests {
    use super::parse_measure;
    use super::{
        DEFAULT_INTERVAL_MS, DEFAULT_MAX_COMMITS_PER_WINDOW, DEFAULT_RATE_WINDOW_MS,
        MAX_DB_TXN_TIMEOUT_MS,
    };
    use switchyard_core::handoff::store::{
        DEFAULT_ATTEMPT_RETENTION_MS, DEFAULT_MAX_ATTEMPT_ROWS, DEFAULT_MAX_EXPIRED_PER_PASS,
        DEFAULT_REAP_BATCH, MIN_ATTEMPT_RETENTION_MS,
    };

    /// HO-L4: the sizing in docs/HANDOFF.md, recomputed from the defaults: at the store's
    /// default maximum rate the default retention keeps fewer rows than the default bound, a
    /// pass reaps and expires more than it can add, and the 1 h floor exceeds the longest
    /// store transaction.
    #[test]
    fn ho_l4_default_retention_never_reaches_the_attempt_bound() {
        let per_second = u64::from(DEFAULT_MAX_COMMITS_PER_WINDOW) * 1_000 / DEFAULT_RATE_WINDOW_MS;
        assert_eq!(per_second, 100);
        let kept = per_second * DEFAULT_ATTEMPT_RETENTION_MS / 1_000;
        assert_eq!(kept, 8_640_000);
        assert!(kept < DEFAULT_MAX_ATTEMPT_ROWS, "{kept} >= the bound");
        let per_pass = per_second * DEFAULT_INTERVAL_MS / 1_000;
        assert_eq!(per_pass, 1_000);
        assert!(u64::from(DEFAULT_REAP_BATCH) > per_pass);
        assert!(u64::from(DEFAULT_MAX_EXPIRED_PER_PASS) > per_pass);
        let longest_txn_ms = MAX_DB_TXN_TIMEOUT_MS;
        assert!(MIN_ATTEMPT_RETENTION_MS > longest_txn_ms);
    }

    #[test]
    fn measure_flag_is_validated() {
        assert_eq!(parse_measure("2:120:60"), Ok((2, 120, 60)));
        assert!(parse_measure("2:120").is_err());
        assert!(parse_measure("x:1:2").is_err());
    }
}
