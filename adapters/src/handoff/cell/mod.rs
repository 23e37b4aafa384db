//! A relay cell: client and desktop-control WebSockets, the resolve path, and the signed
//! internal endpoints (idle-handoff requests, emergency drain and undrain, stats), all on one
//! axum listener.
//!
//! Every decision about a host is made by the core's sans-IO endpoint
//! [`SourceCell`](switchyard_core::handoff::SourceCell): the per-host machine table and
//! its identities, which machine a control registration gets, fencing of late work and late
//! results, which control sessions close and why, the hard drain and its recovery path, and
//! what a refused client or control is told. This module runs it: sockets, timers, spawning.
//!
//! - [`work`]: the RAII guard of one ticket (HO-7), released through the `SourceCell` on every
//!   exit path, errors and cancellation included.
//! - [`pump`]: the `SourceCell` and the adapter's per-host state behind one mutex (the
//!   [`pump::LockedCell`]); executing the `SourceCell`'s `CellAction`s (transactions and reconciliations against the SQL store with
//!   their results fed back naming the machine, control closes, the hard drain), the per-host
//!   deadline timers, and the replies to waiting directors.
//! - [`internal`]: the signed internal endpoints (handoff, drain, undrain, stats).
//! - [`clients`]: the mobile client WebSocket, resolve and capabilities.
//! - [`desktop`]: the desktop control WebSocket.
//!
//! # Locks
//!
//! `Shared::locked` (a std mutex over the `SourceCell` and the adapter's per-host state, the
//! [`pump::LockedCell`]) is never held across an await. Each input takes it once, then drains
//! and executes every decision before letting go ([`Shared::input`]), so decisions run in the
//! order they were made. Lock order: the cell lock, then `waiters`, then the stats counters;
//! the last two are leaves (nothing else is locked while either is held). A [`work::Work`]
//! guard takes the cell lock when it drops, so no guard is ever dropped while the cell is
//! locked.

mod clients;
mod desktop;
mod internal;
mod pump;
mod work;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use switchyard_core::handoff::store::{LeaseLost, StartRefusal, TxnOutcome};
use switchyard_core::handoff::GateState;
use switchyard_core::handoff::{CellId, HostId, Incarnation, OpId, SourceAuthority};
use switchyard_core::handoff::{
    FenceRetry, HandoffReply, HandoffResult, Phase, SourceConfig, FENCE_RETRY_MAX_MS,
};
use switchyard_core::handoff::{LeaseKeeper, LeaseStep, LeaseTiming, Renewal};
use switchyard_core::handoff::{MachineId, SourceCell};
use switchyard_core::handoff::{StoreRefusalChange, StoreRefusals};
use switchyard_core::peer_limits::{PeerRateGate, RateBounds};
use switchyard_core::MonoMs;
use tokio::sync::{oneshot, watch};
use tracing::{error, info, warn};

use super::auth::{InternalGuard, KeyRing, Secret, DEFAULT_REPLAY_CACHE_CAP};
use super::clock::Clock;
use super::hooks::PausePoint;
use super::proto::*;
use super::store::Store;
use crate::journal::Journal;
use crate::probes::{self, server_samples, Probe, Sample};
use crate::serve::{Server, ServerLimits, ServerStats, DEFAULT_LIMITS};
use crate::stop::Stop;
pub use pump::host_key;
use pump::LockedCell;
use switchyard_core::handoff::CellRecord;
use switchyard_core::journal::JournalRecord;

#[derive(Debug, Clone)]
pub struct CellConfig {
    pub cell: CellId,
    pub listen: SocketAddr,
    /// What clients and desktops dial (default `http://<bound address>`).
    pub public_url: Option<String>,
    pub capacity: u32,
    /// HO-C1: advertise (and take part in) idle handoff.
    pub handoff_capable: bool,
    /// SEC-2: the keys signed internal requests are verified with, and the replay cache.
    /// Clones share both (a cell restarted in-process with the same config keeps its replay
    /// memory); [`CellHandle::set_internal_keys`] rolls the keys while the cell runs.
    pub internal_auth: InternalGuard,
    pub desktop_secret: Secret,
    /// Timings of the source machine (its `cell_capable` is `handoff_capable`).
    pub request_timeout: Duration,
    pub reconcile_timeout: Duration,
    pub quarantine_retry: Duration,
    /// HO-L4: how long a move the store refused for a reason that clears is answered from its
    /// result; the director's next request of it after that is a new attempt.
    pub refusal_hold: Duration,
    /// How long the internal endpoint waits for the durable result before `in_progress`.
    pub result_wait: Duration,
    /// Accepted clock skew of signed internal requests.
    pub auth_window: Duration,
    pub activity_lease: Duration,
    /// Hard-drain deadline for closing a drained host's clients.
    pub hard_drain_deadline: Duration,
    /// HO-A4 / SCALE-1: a desktop of a host the store does not know is enrolled here on its
    /// first registration (`--enrol-unknown-hosts`); else it is refused `enrolment_disabled`
    /// and nothing is written (`switchyard_core::handoff::enrol` decides).
    pub enroll_unknown_hosts: bool,
    /// HO-L2: how long the cell's identity lease lasts; renewed every third of it. A second
    /// process with the same cell id is refused while it lasts.
    pub cell_lease: Duration,
    /// HO-L5: the clock drift allowed between this cell's host and a successor's: with no
    /// renewal confirmed, the cell stops serving this long before its lease's end (below a
    /// third of `cell_lease`).
    pub lease_drift: Duration,
    /// SEC-3: what a peer may hold on the cell's listener (public and internal endpoints).
    pub limits: ServerLimits,
    /// SEC-1: a client credential expiring further ahead than this is refused.
    pub client_token_max_lifetime: Duration,
    /// HO-A5: the longest wait between two writes of a drain fence the store did not take
    /// (the core's backoff doubles from `FENCE_RETRY_MIN_MS` up to this).
    pub fence_retry_max: Duration,
    /// SEC-3 (issue #27): the unauthenticated `/v1/resolve` per peer address: a token bucket
    /// (`per_second`, `burst`) over at most `max_peers` tracked addresses (the core's
    /// `PeerRateGate`); over it: 429.
    pub resolve_rate: RateBounds,
    /// CONF-1: the journal (`--journal`; off by default): per host, under
    /// `cell/<cell>/host/<host>`, every input of the core, every action and the client effects.
    pub journal: Journal,
    /// CONF-2: samples the binary adds to the cell's `/metrics` (the online judge's
    /// `switchyard_conformance_departures_total{requirement}` with `--conform`).
    pub extra_samples: ExtraSamples,
}

/// Samples a binary adds to a cell's `/metrics` (CONF-2), read at every scrape.
#[derive(Clone, Default)]
pub struct ExtraSamples(pub Option<Arc<dyn Fn() -> Vec<Sample> + Send + Sync>>);

impl std::fmt::Debug for ExtraSamples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ExtraSamples")
            .field(&self.0.is_some())
            .finish()
    }
}

/// SEC-3: the default resolve bound per peer address: 50 a second after a burst of 200 (a
/// carrier-NAT address with many clients reconnecting at once fits; one address cannot make
/// the store answer more than 50 lookups a second), over at most 65,536 tracked addresses
/// (≈ 10 MB at the bound; a cell serves ≈ 10,000 hosts at 1M hosts / 100 cells).
pub const DEFAULT_RESOLVE_RATE: RateBounds = RateBounds {
    per_second: 50,
    burst: 200,
    max_peers: 65_536,
};

impl CellConfig {
    /// Production-ish defaults around the given identity, internal keys and desktop secret.
    #[must_use]
    pub fn new(cell: CellId, listen: SocketAddr, internal: KeyRing, desktop: Secret) -> Self {
        CellConfig {
            cell,
            listen,
            public_url: None,
            capacity: 1_000,
            handoff_capable: true,
            internal_auth: InternalGuard::new(internal, DEFAULT_REPLAY_CACHE_CAP),
            desktop_secret: desktop,
            request_timeout: Duration::from_secs(5),
            reconcile_timeout: Duration::from_secs(4),
            quarantine_retry: Duration::from_secs(5),
            refusal_hold: Duration::from_millis(switchyard_core::handoff::DEFAULT_REFUSAL_HOLD_MS),
            result_wait: Duration::from_secs(3),
            auth_window: Duration::from_millis(switchyard_core::handoff::INTERNAL_AUTH_WINDOW_MS),
            activity_lease: Duration::from_secs(90),
            hard_drain_deadline: Duration::from_secs(2),
            enroll_unknown_hosts: true,
            cell_lease: Duration::from_secs(15),
            lease_drift: Duration::from_millis(switchyard_core::handoff::DEFAULT_LEASE_DRIFT_MS),
            limits: DEFAULT_LIMITS,
            client_token_max_lifetime: DEFAULT_CLIENT_TOKEN_MAX_LIFETIME,
            fence_retry_max: Duration::from_millis(FENCE_RETRY_MAX_MS),
            resolve_rate: DEFAULT_RESOLVE_RATE,
            journal: Journal::off(),
            extra_samples: ExtraSamples::default(),
        }
    }

    fn fence_retry(&self) -> FenceRetry {
        FenceRetry {
            max_ms: ms(self.fence_retry_max),
            ..FenceRetry::default()
        }
    }

    fn source_config(&self) -> SourceConfig {
        SourceConfig {
            request_timeout_ms: ms(self.request_timeout),
            reconcile_timeout_ms: ms(self.reconcile_timeout),
            quarantine_retry_ms: ms(self.quarantine_retry),
            cell_capable: self.handoff_capable,
            refusal_hold_ms: ms(self.refusal_hold),
        }
    }
}

/// OPS-1: how long a graceful stop waits for its sessions to close (each close is bounded by
/// 1 s itself).
const SESSIONS_CLOSE_BOUND: Duration = Duration::from_millis(1500);

/// SEC-1: a week: a paired client gets a new credential from its desktop at least that often.
pub const DEFAULT_CLIENT_TOKEN_MAX_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum CellError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot register the cell in the store: {0}")]
    Store(#[from] super::store::StoreFailure),
    /// HO-L2: another live process holds this cell id; nothing was changed.
    #[error("{0}")]
    Held(#[from] super::store::CellHeld),
    /// SCALE-1: the store holds `max_cells` cells and this cell id is new; nothing was changed.
    #[error("too_many_cells: the store already holds its maximum of cells (the max_cells setting, --max-cells); this cell id is new and is refused")]
    TooManyCells,
    /// SEC-4: a limit out of range; nothing was started.
    #[error("cell limits: {0}")]
    BadLimits(String),
}

/// Counters of what the cell did (tests and `/internal/v1/stats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellStats {
    pub clients_attached: u64,
    /// HO-S3: clients closed with 4409 WRONG_CELL.
    pub wrong_cell_closes: u64,
    pub busy_answers: u64,
    pub attempts_started: u64,
    pub transactions_run: u64,
    pub reconciliations_run: u64,
    pub store_failures: u64,
    pub quarantined: u64,
    pub reopened: u64,
    pub retired_committed: u64,
    pub retired_stale: u64,
    pub fences_written: u64,
    pub drains: u64,
    /// HO-L1: drained hosts returned to service.
    #[serde(default)]
    pub undrains: u64,
    pub replies_delivered: u64,
    pub replies_unheard: u64,
    pub control_registrations: u64,
    pub control_refused: u64,
    /// SCALE-1: desktops of unknown hosts not enrolled (every cause).
    #[serde(default)]
    pub enrolments_refused: u64,
    /// HO-A4: of those, refused because this cell does not enrol (`enrolment_disabled`).
    #[serde(default)]
    pub enrolments_disabled: u64,
    /// SCALE-1: of those, refused by the store (`too_many_hosts`, a bound reached).
    #[serde(default)]
    pub enrolments_full: u64,
    pub relayed: u64,
    pub late_results_ignored: u64,
    /// SEC-1: clients closed with 4401 (no, a malformed, an expired or another host's
    /// credential). They never took an admission ticket.
    #[serde(default)]
    pub clients_unauthenticated: u64,
    /// SEC-1: clients closed with 4429 (the host held `MAX_CLIENTS_PER_HOST`).
    #[serde(default)]
    pub clients_host_full: u64,
    /// SEC-3: the listener's connections, refusals and closed sockets.
    #[serde(default)]
    pub server: ServerStats,
    /// SEC-2: internal requests refused (every reason), and the reasons worth an alert.
    #[serde(default)]
    pub internal_refused: u64,
    #[serde(default)]
    pub internal_replayed: u64,
    #[serde(default)]
    pub internal_wrong_cell: u64,
    /// SEC-2a: signed for another process of this cell (a request replayed across a restart).
    #[serde(default)]
    pub internal_wrong_incarnation: u64,
    #[serde(default)]
    pub internal_stale: u64,
    #[serde(default)]
    pub internal_bad_signature: u64,
    #[serde(default)]
    pub internal_replay_cache_full: u64,
    /// HO-A5: drain-fence writes that failed (each is retried by the core's backoff).
    #[serde(default)]
    pub fence_failures: u64,
    /// HO-7: accepted clients closed `activity_not_persisted` (their accept released).
    #[serde(default)]
    pub clients_persist_failed: u64,
    /// SEC-3 (issue #27): `/v1/resolve` requests refused 429 `too_many_requests_from_peer`.
    #[serde(default)]
    pub resolve_refused_peer_rate: u64,
    /// SEC-3: `/v1/resolve` requests refused 429 `too_many_peers` (the tracked-peer bound).
    #[serde(default)]
    pub resolve_refused_too_many_peers: u64,
    /// What the core holds now (gauges, read at each scrape).
    #[serde(default)]
    pub now: CellGauges,
}

/// Gauges of the core endpoint (`/metrics`: `switchyard_cell_<name>`, no `_total`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellGauges {
    /// HO-A5: drained hosts whose fence is not yet written (alert when it stays above 0).
    pub fences_unwritten: u64,
    /// HO-A2 / OPS-2: hosts whose attempt is quarantined now (gated until a locked
    /// reconciliation succeeds: the store is unreachable or the outcome unknown).
    #[serde(default)]
    pub hosts_quarantined: u64,
    /// HO-7: live accept tickets (clients between accept and attached) of every host.
    pub accepts_live: u64,
    /// HO-7: live client connections of every host.
    pub client_conns_live: u64,
}

#[derive(Debug, Default)]
struct Counters {
    c: Mutex<CellStats>,
}

impl Counters {
    fn bump(&self, f: impl FnOnce(&mut CellStats)) {
        let mut g = self.c.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g);
    }
    fn get(&self) -> CellStats {
        *self.c.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// HO-L4: the store's refusals of this cell's moves: a count by reason (`AbortReason::name`)
/// and the episodes the core tells apart (logged when one begins and when it clears).
#[derive(Debug, Default)]
struct Refusals {
    by_reason: BTreeMap<&'static str, u64>,
    episodes: StoreRefusals,
}

/// Test seams (inert unless armed).
#[derive(Debug, Default)]
pub struct CellHooks {
    /// An accepted client stops before persisting its activity (holding its Accept ticket).
    pub accept_persist: PausePoint,
    /// A credential installation stops before persisting (holding its ControlOp ticket).
    pub credential_persist: PausePoint,
    /// SEC-1: a client whose credential was refused stops there, before its upgrade answer
    /// and its 4401 close: what it holds meanwhile (nothing) can be looked at.
    pub client_refused: PausePoint,
}

struct Shared {
    cfg: CellConfig,
    incarnation: Incarnation,
    store: Store,
    clock: Clock,
    /// The core `SourceCell` and the adapter's per-host state (see the module doc for the order).
    locked: Mutex<LockedCell>,
    waiters: Mutex<BTreeMap<OpId, Vec<oneshot::Sender<HandoffReply>>>>,
    /// Client connection ids (adapter-local: they name a socket, never a decision).
    ids: AtomicU64,
    alive: AtomicBool,
    /// OPS-2: the last lease renewal failed (the store is unreachable): not ready.
    lease_failing: AtomicBool,
    /// OPS-1: a graceful stop is under way: sessions close with a reason instead of being
    /// dropped as a crash drops them.
    graceful: AtomicBool,
    shutdown: Stop,
    /// HO-L2: set once the lease renewal found another process holding the cell (HO-L5: or
    /// the lease may lapse: then `lease_lapsed` is set too and the holder is `None`).
    lease_lost: watch::Sender<Option<LeaseLost>>,
    lease_lapsed: AtomicBool,
    /// SEC-3: the resolve path's per-peer rate (a leaf lock, never held across an await).
    resolve_gate: Mutex<PeerRateGate<std::net::IpAddr>>,
    stats: Counters,
    /// HO-L4: a leaf lock, never held across an await.
    refusals: Mutex<Refusals>,
    hooks: CellHooks,
    /// SEC-3: the listener's limits and counters.
    server: Arc<Server>,
}

impl Shared {
    fn moves_refused(&self) -> BTreeMap<String, u64> {
        let r = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        r.by_reason
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect()
    }

    /// HO-L4 / OPS-2: a move of `host` ended with `outcome`: count a refusal by its reason and
    /// log the store's refusals once when an episode begins and once when it clears.
    fn note_move_result(&self, now: MonoMs, host: HostId, outcome: &TxnOutcome) {
        let changes = {
            let mut r = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(reason) = outcome.refusal() {
                *r.by_reason.entry(reason.name()).or_default() += 1;
            }
            r.episodes.handle_result(now, outcome)
        };
        for change in changes {
            match change {
                StoreRefusalChange::Refusing { reason } => warn!(
                    host = host.0,
                    reason,
                    "the store refuses moves ({reason}); each refused host is tried again after \
                     the refusal hold (switchyard_cell_moves_refused_total)"
                ),
                StoreRefusalChange::Cleared { reason, refused } => info!(
                    reason,
                    refused, "the store no longer refuses moves ({reason}): a move committed"
                ),
            }
        }
    }

    fn locked(&self) -> MutexGuard<'_, LockedCell> {
        self.locked.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::SeqCst)
    }

    fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    fn graceful(&self) -> bool {
        self.graceful.load(Ordering::SeqCst)
    }

    fn stats(&self) -> CellStats {
        // LockedCell first, then the counters (the module's lock order).
        let now = {
            let ep = self.locked();
            let live = ep.cell.live_work();
            CellGauges {
                fences_unwritten: ep.cell.fences_unwritten() as u64,
                hosts_quarantined: ep.cell.quarantined() as u64,
                accepts_live: u64::from(live.accepts),
                client_conns_live: u64::from(live.client_conns),
            }
        };
        CellStats {
            server: self.server.stats(),
            now,
            ..self.stats.get()
        }
    }
}

/// A running cell.
pub struct CellHandle {
    shared: Arc<Shared>,
    pub addr: SocketAddr,
    pub url: String,
    pub incarnation: Incarnation,
    server: tokio::task::JoinHandle<()>,
    renewal: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for CellHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellHandle")
            .field("cell", &self.shared.cfg.cell)
            .field("url", &self.url)
            .finish()
    }
}

/// A read-only view of one host's source machine (tests, diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostView {
    /// The machine's identity in this process (a new one after retire or undrain).
    pub machine: MachineId,
    pub authority: SourceAuthority,
    pub gate: GateState,
    pub counters: switchyard_core::handoff::QuiescenceCounters,
    pub phase: Option<Phase>,
    pub control_connected: bool,
    pub clients: usize,
    pub last_result: Option<HandoffResult>,
}

impl CellHandle {
    #[must_use]
    pub fn stats(&self) -> CellStats {
        self.shared.stats()
    }

    /// HO-L4: the moves the store refused, by reason (`switchyard_cell_moves_refused_total`).
    #[must_use]
    pub fn moves_refused(&self) -> BTreeMap<String, u64> {
        self.shared.moves_refused()
    }

    #[must_use]
    pub fn hooks(&self) -> &CellHooks {
        &self.shared.hooks
    }

    #[must_use]
    pub fn cell(&self) -> CellId {
        self.shared.cfg.cell
    }

    #[must_use]
    pub fn host(&self, host: HostId) -> Option<HostView> {
        let ep = self.shared.locked();
        let (machine, m) = ep.cell.machine(host)?;
        Some(HostView {
            machine,
            authority: m.authority(),
            gate: m.gate().state(),
            counters: m.gate().counters(),
            phase: m.attempt().map(|a| a.phase()),
            control_connected: ep.cell.control(host).is_some(),
            clients: ep.clients(host),
            last_result: m.last_result(),
        })
    }

    /// SEC-2: roll the internal keys without a restart (the keys file re-read on SIGHUP, tests).
    /// Requests in flight finish under the keys they were checked with; nonces already seen
    /// stay seen.
    pub fn set_internal_keys(&self, keys: KeyRing) {
        let ids = keys.ids();
        self.shared.cfg.internal_auth.set_keys(keys);
        info!(cell = self.shared.cfg.cell.0, keys = ?ids, "internal keys replaced");
    }

    /// HO-L5: the cell stopped serving because its lease may have lapsed (no renewal confirmed
    /// in time), not because another process took it.
    #[must_use]
    pub fn lease_lapsed(&self) -> bool {
        self.shared.lease_lapsed.load(Ordering::SeqCst)
    }

    /// HO-L2: resolves once the cell lost its identity lease to another process (its graceful
    /// stop has begun); pending forever otherwise. The process then finishes the stop
    /// ([`CellHandle::shutdown`]) and exits with [`LEASE_LOST_EXIT_CODE`].
    pub async fn lease_lost(&self) -> LeaseLost {
        let mut rx = self.shared.lease_lost.subscribe();
        loop {
            if let Some(lost) = *rx.borrow_and_update() {
                return lost;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Stop on purpose: stop serving (as a crash would), then end the cell's identity lease so
    /// a successor may start at once (HO-L2).
    pub async fn stop(&self) {
        self.abort();
        let sh = &self.shared;
        match sh
            .store
            .release_cell_lease(sh.cfg.cell, sh.incarnation)
            .await
        {
            Ok(true) => info!(cell = sh.cfg.cell.0, "cell stopped; its lease is released"),
            // HO-L2: a process never ends a successor's lease.
            Ok(false) => info!(
                cell = sh.cfg.cell.0,
                "cell stopped; its lease was no longer this process's (another process holds the cell)"
            ),
            Err(e) => {
                warn!(cell = sh.cfg.cell.0, error = %e, "cell stopped; its lease could not be released and runs out by itself")
            }
        }
    }

    /// OPS-1: stop gracefully. Stop accepting; close every client (1001 `cell_stopping`) and
    /// desktop control (`draining` `cell_stopping`, then 1001) with a reason; let attempts in
    /// flight finish their transactions and reconciliations for up to `attempts_bound`; then
    /// stop and release the identity lease (a successor may start at once). Returns the final
    /// counters.
    pub async fn shutdown(&self, attempts_bound: Duration) -> CellStats {
        let sh = &self.shared;
        begin_graceful_stop(sh);
        let deadline = tokio::time::Instant::now() + attempts_bound;
        let mut in_flight = sh.locked().cell.attempts_in_flight();
        while in_flight > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            in_flight = sh.locked().cell.attempts_in_flight();
        }
        if in_flight > 0 {
            warn!(
                cell = sh.cfg.cell.0,
                attempts = in_flight,
                "stopping with handoff attempts in flight: the director re-sends them and the next start reconciles"
            );
        }
        // Every session closes with its reason before the cell's state is cleared (clearing
        // drops the sessions the way a crash does).
        let closing = tokio::time::Instant::now() + SESSIONS_CLOSE_BOUND;
        while sh.locked().open_sessions() > 0 && tokio::time::Instant::now() < closing {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stats = sh.stats();
        self.stop().await;
        stats
    }

    /// Test seam: stop as a crashed process would (see `abort`). Only with `test-hooks`: a
    /// release binary stops through `stop` (or drop), never by simulating a crash.
    #[cfg(feature = "test-hooks")]
    pub fn kill(&self) {
        self.abort();
    }

    /// Sockets dropped without close frames, timers and pending work abandoned (a transaction
    /// already sent may still commit on the server); the identity lease is left to run out.
    fn abort(&self) {
        self.shared.alive.store(false, Ordering::SeqCst);
        self.shared.shutdown.stop();
        self.server.abort();
        // A crashed process renews nothing: its lease runs out (HO-L2).
        self.renewal.abort();
        self.shared.locked().clear();
    }
}

impl Drop for CellHandle {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Start a cell: take its identity lease and a new incarnation in the store, bind, serve.
pub async fn start_cell(
    cfg: CellConfig,
    store: impl Into<Store>,
    clock: Clock,
) -> Result<CellHandle, CellError> {
    let store: Store = store.into();
    cfg.limits.check().map_err(CellError::BadLimits)?;
    let timing = LeaseTiming {
        lease_ms: ms(cfg.cell_lease),
        drift_ms: ms(cfg.lease_drift),
    };
    timing
        .validate()
        .map_err(|e| CellError::BadLimits(format!("--lease-drift-ms / --cell-lease-ms: {e}")))?;
    let listener = crate::net::bind(cfg.listen)
        .await
        .map_err(|source| CellError::Bind {
            addr: cfg.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| CellError::Bind {
        addr: cfg.listen,
        source,
    })?;
    let url = cfg
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    let lease_ms = ms(cfg.cell_lease);
    let taken_at = clock.now();
    let incarnation = store
        .start_cell(
            cfg.cell,
            cfg.capacity,
            cfg.handoff_capable,
            &url,
            &url,
            taken_at,
            lease_ms,
        )
        .await?
        .map_err(|refused| match refused {
            StartRefusal::Held(held) => CellError::Held(held),
            StartRefusal::TooManyCells => CellError::TooManyCells,
        })?;
    let shutdown = Stop::new();
    let server = Server::new("cell", cfg.limits);
    cfg.journal.record(
        &format!("cell/{}/{}", cfg.cell.0, incarnation.0),
        clock.now(),
        || JournalRecord::Cell(CellRecord::Start),
    );
    let locked = LockedCell::new(
        SourceCell::new(cfg.source_config(), cfg.cell, incarnation)
            .with_fence_retry(cfg.fence_retry()),
        cfg.journal.clone(),
        clock.clone(),
    );
    let resolve_gate = Mutex::new(PeerRateGate::new(cfg.resolve_rate));
    let refusals = Mutex::new(Refusals {
        by_reason: BTreeMap::new(),
        episodes: StoreRefusals::new(ms(cfg.refusal_hold)),
    });
    let shared = Arc::new(Shared {
        cfg,
        incarnation,
        store,
        clock,
        locked: Mutex::new(locked),
        waiters: Mutex::new(BTreeMap::new()),
        ids: AtomicU64::new(1),
        alive: AtomicBool::new(true),
        graceful: AtomicBool::new(false),
        lease_failing: AtomicBool::new(false),
        shutdown,
        lease_lost: watch::channel(None).0,
        lease_lapsed: AtomicBool::new(false),
        resolve_gate,
        stats: Counters::default(),
        refusals,
        hooks: CellHooks::default(),
        server: server.clone(),
    });
    // HO-L3: the internal answers carry this cell's clock as their `Date`.
    let internal_routes = Router::new()
        .route(HANDOFF_PATH, post(internal::handoff))
        .route(DRAIN_PATH, post(internal::drain))
        .route(UNDRAIN_PATH, post(internal::undrain))
        .route(STATS_PATH, get(internal::stats))
        .layer(axum::middleware::map_response_with_state(
            shared.clone(),
            internal::own_date,
        ));
    let app = Router::new()
        .route(CLIENT_PATH, get(clients::client_ws))
        .route(DESKTOP_PATH, get(desktop::desktop_ws))
        .route(RESOLVE_PATH, get(clients::resolve))
        .route(CAPABILITIES_PATH, get(clients::capabilities))
        .merge(internal_routes)
        .layer(DefaultBodyLimit::max(shared.cfg.limits.max_body_bytes))
        .with_state(shared.clone())
        .merge(probes::routes(Arc::new(CellProbe(shared.clone()))));
    let app = server.layer(app);
    let server = crate::machine::spawn(server.run(listener, app, shared.shutdown.listener()));
    let renewal = crate::machine::spawn(renew_lease(
        shared.clone(),
        LeaseKeeper::with_timing(timing, taken_at),
        lease_ms,
    ));
    info!(cell = shared.cfg.cell.0, %url, incarnation = incarnation.0, "cell listening");
    Ok(CellHandle {
        shared,
        addr,
        url,
        incarnation,
        server,
        renewal,
    })
}

/// HO-L2: keeps the cell's identity lease alive, every third of it; the core's `LeaseKeeper`
/// decides from each answer. A newer incarnation in the store means another process took the
/// cell (this one's lease lapsed): every store operation this process makes now fails its
/// incarnation re-check, so it stops as on SIGTERM (the graceful stop begins here; the process
/// finishes it and exits with the lease-lost status: [`CellHandle::lease_lost`]).
///
/// HO-L5: the keeper also says when no renewal has been confirmed for so long that the lease
/// may lapse (`Lapsing`): the cell then stops serving at once (the same graceful stop: every
/// desktop and client is told `cell_stopping` and closed with 1001, a retry code), before a
/// successor can take the lease, even while a renewal call still hangs on a dark store.
async fn renew_lease(sh: Arc<Shared>, mut keeper: LeaseKeeper, lease_ms: u64) {
    loop {
        let every = Duration::from_millis(keeper.next_renewal_ms(lease_ms));
        let renewal = async {
            tokio::time::sleep(every).await;
            let sent_at = sh.clock.now();
            let answer = sh
                .store
                .renew_cell_lease(sh.cfg.cell, sh.incarnation, sh.clock.now(), lease_ms)
                .await;
            (sent_at, answer)
        };
        let deadline = keeper.poll_timeout();
        let lapse = async {
            match deadline {
                Some(at) => sh.clock.sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let (sent_at, renewed) = tokio::select! {
            biased;
            r = renewal => r,
            () = lapse => {
                if let Some(LeaseStep::Lapsing { unconfirmed_ms }) =
                    keeper.handle_timeout(sh.clock.now())
                {
                    stop_serving_lapsing(&sh, unconfirmed_ms, lease_ms);
                    return;
                }
                continue;
            }
        };
        let renewal = match &renewed {
            Ok(true) => Renewal::Renewed,
            // The holder is read for the log and the exit line; the store said the cell is lost.
            Ok(false) => Renewal::Lost(LeaseLost {
                holder: match sh.store.cell_info(sh.cfg.cell).await {
                    Ok(Some(info)) => Some(info.row.incarnation),
                    _ => None,
                },
            }),
            Err(_) => Renewal::Unreachable,
        };
        let step = keeper.handle_renewal_at(sent_at, renewal);
        sh.lease_failing.store(keeper.failing(), Ordering::SeqCst);
        match step {
            LeaseStep::Keep { recovered } => {
                if recovered {
                    info!(cell = sh.cfg.cell.0, "cell lease renewed again");
                }
            }
            LeaseStep::Failing { first } => {
                if first {
                    if let Err(e) = &renewed {
                        warn!(cell = sh.cfg.cell.0, error = %e, "cannot renew the cell lease; retrying");
                    }
                }
            }
            LeaseStep::Stop(lost) => {
                error!(
                    cell = sh.cfg.cell.0,
                    incarnation = sh.incarnation.0,
                    holder = %holder_name(lost),
                    exit_code = LEASE_LOST_EXIT_CODE,
                    "cell lease lost: another process holds this cell id (a newer incarnation); stopping gracefully, then exiting with the lease-lost status"
                );
                begin_graceful_stop(&sh);
                sh.lease_lost.send_replace(Some(lost));
                return;
            }
            LeaseStep::Lapsing { unconfirmed_ms } => {
                stop_serving_lapsing(&sh, unconfirmed_ms, lease_ms);
                return;
            }
        }
    }
}

/// HO-L5: the lease may lapse before a renewal can be confirmed: stop serving (the graceful
/// stop's path) and end as a lost lease does, so the supervisor restarts the process once the
/// store answers (it takes the cell again with a new incarnation).
fn stop_serving_lapsing(sh: &Shared, unconfirmed_ms: u64, lease_ms: u64) {
    error!(
        cell = sh.cfg.cell.0,
        incarnation = sh.incarnation.0,
        unconfirmed_ms,
        lease_ms,
        drift_ms = ms(sh.cfg.lease_drift),
        exit_code = LEASE_LOST_EXIT_CODE,
        "cell lease may lapse: no renewal confirmed for {unconfirmed_ms} ms of a {lease_ms} ms lease; \
         stopping serving before a successor can take the cell (desktops and clients retry elsewhere), \
         then exiting with the lease-lost status"
    );
    sh.lease_lapsed.store(true, Ordering::SeqCst);
    begin_graceful_stop(sh);
    sh.lease_lost.send_replace(Some(LeaseLost { holder: None }));
}

/// The incarnation holding the cell now, for logs (`none`: its row is gone).
pub fn holder_name(lost: LeaseLost) -> String {
    lost.holder
        .map_or_else(|| "none".to_owned(), |i| i.0.to_string())
}

/// HO-L2 / OPS-1: the exit status of a cell process that stopped because it lost its identity
/// lease (docs/OPERATIONS.md, docs/HANDOFF.md): distinct from 1 (a failure) so a supervisor
/// and an operator can tell "another process took this cell id" at a glance.
pub const LEASE_LOST_EXIT_CODE: u8 = 3;

/// OPS-1: the first half of a graceful stop: stop accepting, and let every session close with
/// its reason (SIGTERM's path, and a lost lease's).
fn begin_graceful_stop(sh: &Shared) {
    sh.graceful.store(true, Ordering::SeqCst);
    sh.shutdown.stop();
}

/// OPS-2: the cell's probes.
struct CellProbe(Arc<Shared>);

impl Probe for CellProbe {
    fn ready(&self) -> Result<(), String> {
        let sh = &self.0;
        if !sh.alive() || sh.graceful() {
            return Err("the cell is stopping".to_owned());
        }
        if sh.lease_failing.load(Ordering::SeqCst) {
            return Err("the cell cannot renew its lease (store unreachable)".to_owned());
        }
        Ok(())
    }

    fn samples(&self) -> Vec<Sample> {
        let stats = self.0.stats();
        let mut samples = probes::counters_of("cell", "cell counter", &stats);
        samples.extend(server_samples(&stats.server));
        let g = stats.now;
        samples.extend([
            probes::gauge(
                "cell_fences_unwritten",
                "HO-A5: drained hosts whose store fence is not yet written",
                g.fences_unwritten,
            ),
            probes::gauge(
                "cell_hosts_quarantined",
                "HO-A2: hosts whose attempt is quarantined now (gated until a locked reconciliation succeeds)",
                g.hosts_quarantined,
            ),
            probes::gauge(
                "cell_accepts_live",
                "HO-7: clients between accept and attached",
                g.accepts_live,
            ),
            probes::gauge(
                "cell_client_conns_live",
                "HO-7: attached client connections",
                g.client_conns_live,
            ),
        ]);
        samples.extend(self.0.moves_refused().into_iter().map(|(reason, n)| {
            probes::labelled_counter(
                "cell_moves_refused",
                "HO-L4: moves the store refused, by reason (each tried again after the hold)",
                vec![("reason".to_owned(), reason)],
                n,
            )
        }));
        if let Some(extra) = &self.0.cfg.extra_samples.0 {
            samples.extend(extra());
        }
        samples
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Send one JSON text frame (bounded: a stuck peer cannot hold the task).
async fn send_json<T: Serialize>(
    socket: &mut axum::extract::ws::WebSocket,
    v: &T,
) -> Result<(), ()> {
    use axum::extract::ws::Message;
    let text = serde_json::to_string(v).map_err(|_| ())?;
    tokio::time::timeout(
        Duration::from_secs(5),
        socket.send(Message::Text(text.into())),
    )
    .await
    .map_err(|_| ())?
    .map_err(|_| ())
}

/// Close with `code`; `reason` is a stable name (never `Debug` text).
async fn close_ws(mut socket: axum::extract::ws::WebSocket, code: u16, reason: &str) {
    use axum::extract::ws::{CloseFrame, Message};
    let frame = CloseFrame {
        code,
        reason: reason.to_owned().into(),
    };
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        socket.send(Message::Close(Some(frame))),
    )
    .await;
}
