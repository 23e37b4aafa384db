//! A relay cell: client and desktop-control WebSockets, the resolve path, and the internal
//! endpoint for idle-handoff requests and emergency drain, all on one axum listener.
//!
//! Per host the cell keeps one core `SourceHandoff` (admission gate + attempt machine) behind a
//! std mutex, never held across an await. Every unit of relay work takes its ticket in the
//! synchronous part of its handler, before the first await (HO-7), inside a [`Work`] guard
//! that releases it on every exit path, errors and cancellation included. The machine's
//! actions are executed by [`pump`]: transactions and reconciliations against the SQL store
//! (results fed back with the same `AttemptRef`), retirement through the DRAINING path,
//! drain fences, replies to waiting directors, and the machine's own deadlines.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use backon::{ExponentialBuilder, Retryable};
use serde::{Deserialize, Serialize};
use switchyard_core::handoff::admission::{
    AdmissionRefusal, GateState, Heartbeat, ReleaseReport, Revalidation, Ticket, WorkKind,
};
use switchyard_core::handoff::attempt::{
    Action, Begin, DurableResult, HandoffReply, HandoffResult, Phase, Refusal, SourceConfig,
    SourceHandoff,
};
use switchyard_core::handoff::ids::{CellId, HostId, Incarnation, OpId, SourceAuthority};
use switchyard_core::handoff::policy::{HandoffRequest, Measurement};
use switchyard_core::handoff::store::{
    AttemptOutcome, RegisterRefusal, StoreError as SetupRefusal, TxnOutcome,
};
use switchyard_core::handoff::WRONG_CELL_CLOSE_CODE;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, error, info, warn};

use super::auth::{Secret, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use super::clock::Clock;
use super::hooks::PausePoint;
use super::proto::*;
use super::store::SqlStore;

/// Bounds.
const MAX_WAITERS: usize = 4096;
const MAX_WAITERS_PER_OP: usize = 16;
const CLIENT_QUEUE: usize = 64;
const CONTROL_QUEUE: usize = 256;
const MAX_SPLICES_PER_CLIENT: usize = 64;
const MAX_CLIENTS_PER_HOST: usize = 1024;

#[derive(Debug, Clone)]
pub struct CellConfig {
    pub cell: CellId,
    pub listen: SocketAddr,
    /// What clients and desktops dial (default `http://<bound address>`).
    pub public_url: Option<String>,
    pub capacity: u32,
    /// HO-C1: advertise (and take part in) idle handoff.
    pub handoff_capable: bool,
    pub internal_secret: Secret,
    pub desktop_secret: Secret,
    /// Timings of the source machine (its `cell_capable` is `handoff_capable`).
    pub request_timeout: Duration,
    pub reconcile_timeout: Duration,
    pub quarantine_retry: Duration,
    /// How long the internal endpoint waits for the durable result before `in_progress`.
    pub result_wait: Duration,
    /// Accepted clock skew of signed internal requests.
    pub auth_window: Duration,
    pub activity_lease: Duration,
    /// Hard-drain deadline for closing a drained host's clients.
    pub hard_drain_deadline: Duration,
    /// A desktop of an unknown host is enrolled here on its first registration.
    pub enroll_unknown_hosts: bool,
    /// HO-L2: how long the cell's identity lease lasts; renewed every third of it. A second
    /// process with the same cell id is refused while it lasts.
    pub cell_lease: Duration,
}

impl CellConfig {
    /// Production-ish defaults around the given identity and secrets.
    #[must_use]
    pub fn new(cell: CellId, listen: SocketAddr, internal: Secret, desktop: Secret) -> Self {
        CellConfig {
            cell,
            listen,
            public_url: None,
            capacity: 1_000,
            handoff_capable: true,
            internal_secret: internal,
            desktop_secret: desktop,
            request_timeout: Duration::from_secs(5),
            reconcile_timeout: Duration::from_secs(4),
            quarantine_retry: Duration::from_secs(5),
            result_wait: Duration::from_secs(3),
            auth_window: Duration::from_secs(30),
            activity_lease: Duration::from_secs(90),
            hard_drain_deadline: Duration::from_secs(2),
            enroll_unknown_hosts: true,
            cell_lease: Duration::from_secs(15),
        }
    }

    fn source_config(&self) -> SourceConfig {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        SourceConfig {
            request_timeout_ms: ms(self.request_timeout),
            reconcile_timeout_ms: ms(self.reconcile_timeout),
            quarantine_retry_ms: ms(self.quarantine_retry),
            cell_capable: self.handoff_capable,
        }
    }
}

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
    pub replies_delivered: u64,
    pub replies_unheard: u64,
    pub control_registrations: u64,
    pub control_refused: u64,
    pub relayed: u64,
    pub late_results_ignored: u64,
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

/// Test seams (inert unless armed).
#[derive(Debug, Default)]
pub struct CellHooks {
    /// An accepted client stops before persisting its activity (holding its Accept ticket).
    pub accept_persist: PausePoint,
    /// A credential installation stops before persisting (holding its ControlOp ticket).
    pub credential_persist: PausePoint,
}

enum ControlCmd {
    Frame(CellToDesktop),
    /// Send this frame, then close the control socket.
    Close(CellToDesktop, u16),
}

struct ControlLink {
    session: u64,
    tx: mpsc::Sender<ControlCmd>,
}

struct HostEntry {
    machine_id: u64,
    machine: SourceHandoff,
    control: Option<ControlLink>,
    clients: HashMap<u64, mpsc::Sender<CellToClient>>,
    drain: watch::Sender<bool>,
    timer: Option<tokio::task::AbortHandle>,
}

struct Shared {
    cfg: CellConfig,
    incarnation: Incarnation,
    store: SqlStore,
    clock: Clock,
    hosts: Mutex<HashMap<HostId, HostEntry>>,
    waiters: Mutex<HashMap<OpId, Vec<oneshot::Sender<HandoffReply>>>>,
    ids: AtomicU64,
    alive: AtomicBool,
    shutdown: watch::Sender<bool>,
    stats: Counters,
    hooks: CellHooks,
}

impl Shared {
    fn hosts(&self) -> MutexGuard<'_, HashMap<HostId, HostEntry>> {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::SeqCst)
    }

    fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
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
    pub authority: SourceAuthority,
    pub gate: GateState,
    pub counters: switchyard_core::handoff::Counters,
    pub phase: Option<Phase>,
    pub control_connected: bool,
    pub clients: usize,
    pub last_result: Option<HandoffResult>,
}

impl CellHandle {
    #[must_use]
    pub fn stats(&self) -> CellStats {
        self.shared.stats.get()
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
        let hosts = self.shared.hosts();
        hosts.get(&host).map(|e| HostView {
            authority: e.machine.authority(),
            gate: e.machine.gate().state(),
            counters: e.machine.gate().counters(),
            phase: e.machine.attempt().map(|a| a.phase),
            control_connected: e.control.is_some(),
            clients: e.clients.len(),
            last_result: e.machine.last_result(),
        })
    }

    /// Stop on purpose: as [`CellHandle::kill`], then end the cell's identity lease so a
    /// successor may start at once (HO-L2).
    pub async fn stop(&self) {
        self.kill();
        let sh = &self.shared;
        match sh
            .store
            .release_cell_lease(sh.cfg.cell, sh.incarnation)
            .await
        {
            Ok(_) => info!(cell = sh.cfg.cell.0, "cell stopped; its lease is released"),
            Err(e) => {
                warn!(cell = sh.cfg.cell.0, error = %e, "cell stopped; its lease could not be released and runs out by itself")
            }
        }
    }

    /// Stop as a crashed process would: sockets dropped without close frames, timers and
    /// pending work abandoned (a transaction already sent may still commit on the server).
    pub fn kill(&self) {
        self.shared.alive.store(false, Ordering::SeqCst);
        let _ = self.shared.shutdown.send(true);
        self.server.abort();
        // A crashed process renews nothing: its lease runs out (HO-L2).
        self.renewal.abort();
        let mut hosts = self.shared.hosts();
        for e in hosts.values_mut() {
            if let Some(t) = e.timer.take() {
                t.abort();
            }
        }
        hosts.clear();
    }
}

impl Drop for CellHandle {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Start a cell: bump its incarnation in the store, bind, serve.
pub async fn start_cell(
    cfg: CellConfig,
    store: SqlStore,
    clock: Clock,
) -> Result<CellHandle, CellError> {
    let listener = tokio::net::TcpListener::bind(cfg.listen)
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
    let lease_ms = u64::try_from(cfg.cell_lease.as_millis()).unwrap_or(u64::MAX);
    let incarnation = store
        .start_cell(
            cfg.cell,
            cfg.capacity,
            cfg.handoff_capable,
            &url,
            &url,
            clock.now(),
            lease_ms,
        )
        .await??;
    let (shutdown, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        cfg,
        incarnation,
        store,
        clock,
        hosts: Mutex::new(HashMap::new()),
        waiters: Mutex::new(HashMap::new()),
        ids: AtomicU64::new(1),
        alive: AtomicBool::new(true),
        shutdown,
        stats: Counters::default(),
        hooks: CellHooks::default(),
    });
    let app = Router::new()
        .route(CLIENT_PATH, get(client_ws))
        .route(DESKTOP_PATH, get(desktop_ws))
        .route(RESOLVE_PATH, get(resolve))
        .route(CAPABILITIES_PATH, get(capabilities))
        .route(HANDOFF_PATH, post(handoff))
        .route(DRAIN_PATH, post(drain))
        .route(STATS_PATH, get(stats))
        .layer(DefaultBodyLimit::max(MAX_FRAME_BYTES))
        .with_state(shared.clone());
    let mut stop = shared.shutdown.subscribe();
    let server = tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        });
        if let Err(e) = serve.await {
            warn!(error = %e, "cell server stopped");
        }
    });
    let renewal = tokio::spawn(renew_lease(shared.clone(), lease_ms));
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

/// HO-L2: keeps the cell's identity lease alive. A newer incarnation in the store means another
/// process took the cell (this one's lease lapsed): this process stops serving, since every
/// store operation it makes now fails its incarnation re-check anyway.
async fn renew_lease(sh: Arc<Shared>, lease_ms: u64) {
    let every = Duration::from_millis((lease_ms / 3).max(1));
    let mut failing = false;
    loop {
        tokio::time::sleep(every).await;
        let renewed = sh
            .store
            .renew_cell_lease(sh.cfg.cell, sh.incarnation, sh.clock.now(), lease_ms)
            .await;
        match renewed {
            Ok(true) => {
                if failing {
                    info!(cell = sh.cfg.cell.0, "cell lease renewed again");
                }
                failing = false;
            }
            Ok(false) => {
                error!(
                    cell = sh.cfg.cell.0,
                    incarnation = sh.incarnation.0,
                    "another process took this cell id (a newer incarnation): stopping"
                );
                sh.alive.store(false, Ordering::SeqCst);
                let _ = sh.shutdown.send(true);
                return;
            }
            Err(e) => {
                if !failing {
                    warn!(cell = sh.cfg.cell.0, error = %e, "cannot renew the cell lease; retrying");
                }
                failing = true;
            }
        }
    }
}

// ----- work tickets (HO-7) -----

/// RAII ownership of one ticket of one machine; released on drop (every exit path).
struct Work {
    sh: Arc<Shared>,
    host: HostId,
    machine_id: u64,
    ticket: Option<Ticket>,
}

impl Work {
    /// Take a ticket in the caller's synchronous section (before its first await).
    fn acquire(sh: &Arc<Shared>, host: HostId, kind: WorkKind) -> Result<Work, AdmissionRefusal> {
        let mut hosts = sh.hosts();
        let Some(e) = hosts.get_mut(&host) else {
            // No source session for this host here: for a client that is the wrong cell.
            return Err(if kind.is_client_work() {
                AdmissionRefusal::WrongCell
            } else {
                AdmissionRefusal::SourceRetired
            });
        };
        let ticket = e.machine.acquire(kind)?;
        Ok(Work {
            sh: sh.clone(),
            host,
            machine_id: e.machine_id,
            ticket: Some(ticket),
        })
    }

    /// HO-S3: re-check after an await. `false`: abandoned (the gate released the ticket).
    fn revalidate(&mut self) -> bool {
        let Some(t) = self.ticket else {
            return false;
        };
        let mut hosts = self.sh.hosts();
        let verdict = match hosts.get_mut(&self.host) {
            Some(e) if e.machine_id == self.machine_id => e.machine.revalidate(t),
            // The machine this ticket belonged to is gone (retired and replaced).
            _ => {
                self.ticket = None;
                return false;
            }
        };
        match verdict {
            Revalidation::Continue => true,
            Revalidation::Abandon { reason, .. } => {
                debug!(host = self.host.0, ?reason, "continuation abandoned");
                self.ticket = None;
                false
            }
        }
    }

    /// Swap this ticket for one of another kind in one synchronous step (no idle instant).
    fn convert(&mut self, kind: WorkKind) -> Result<(), AdmissionRefusal> {
        let Some(old) = self.ticket else {
            return Err(AdmissionRefusal::SourceRetired);
        };
        let mut hosts = self.sh.hosts();
        let Some(e) = hosts
            .get_mut(&self.host)
            .filter(|e| e.machine_id == self.machine_id)
        else {
            self.ticket = None;
            return Err(AdmissionRefusal::SourceRetired);
        };
        let new = e.machine.acquire(kind)?;
        let _ = e.machine.release(old);
        self.ticket = Some(new);
        Ok(())
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        let Some(t) = self.ticket.take() else {
            return;
        };
        let mut hosts = self.sh.hosts();
        if let Some(e) = hosts
            .get_mut(&self.host)
            .filter(|e| e.machine_id == self.machine_id)
        {
            let report = e.machine.release(t);
            if report != ReleaseReport::Released {
                debug!(host = self.host.0, ?report, "release was a no-op");
            }
        }
    }
}

// ----- executing the machine's actions -----

/// Feed one input to the machine `machine_id` of `host` (ignored if it was replaced), then
/// execute whatever it decided.
fn feed(sh: &Arc<Shared>, host: HostId, machine_id: u64, f: impl FnOnce(&mut SourceHandoff)) {
    if !sh.alive() {
        return;
    }
    {
        let mut hosts = sh.hosts();
        match hosts.get_mut(&host) {
            Some(e) if e.machine_id == machine_id => f(&mut e.machine),
            _ => {
                sh.stats.bump(|s| s.late_results_ignored += 1);
                return;
            }
        }
    }
    pump(sh, host);
}

/// Drain the machine's actions and execute them; re-arm its deadline timer.
fn pump(sh: &Arc<Shared>, host: HostId) {
    if !sh.alive() {
        return;
    }
    let mut actions = Vec::new();
    let machine_id;
    {
        let mut hosts = sh.hosts();
        let Some(e) = hosts.get_mut(&host) else {
            return;
        };
        machine_id = e.machine_id;
        while let Some(a) = e.machine.poll_action() {
            if let Action::RetireSourceDraining { reason } = a {
                // HO-S5 / HO-A6: close the empty control through the DRAINING path, whether
                // or not the reply can be delivered. Dropping the sender ends the session even
                // if the frame does not fit the queue.
                if let Some(link) = e.control.take() {
                    let frame = CellToDesktop::Draining {
                        reason: format!("{reason:?}"),
                    };
                    let _ = link.tx.try_send(ControlCmd::Close(frame, CLOSE_NORMAL));
                }
            }
            actions.push(a);
        }
        rearm_timer(sh, host, e);
    }
    for a in actions {
        execute(sh, host, machine_id, a);
    }
}

fn rearm_timer(sh: &Arc<Shared>, host: HostId, e: &mut HostEntry) {
    if let Some(t) = e.timer.take() {
        t.abort();
    }
    let Some(deadline) = e.machine.poll_timeout() else {
        return;
    };
    let delay = Duration::from_millis(deadline.since_ms(sh.clock.now()));
    let sh2 = sh.clone();
    let machine_id = e.machine_id;
    let task = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let now = sh2.clock.now();
        // HO-A2 / HO-S3: a deadline only (re)starts reconciliation; the core keeps the barrier.
        feed(&sh2, host, machine_id, |m| {
            let _ = m.handle_timeout(now);
        });
    });
    e.timer = Some(task.abort_handle());
}

fn execute(sh: &Arc<Shared>, host: HostId, machine_id: u64, action: Action) {
    match action {
        Action::RunTransaction { attempt, request } => {
            sh.stats.bump(|s| s.transactions_run += 1);
            let sh = sh.clone();
            tokio::spawn(async move {
                if !sh.alive() {
                    return;
                }
                let result = match sh.store.run_transaction(sh.clock.now(), &request).await {
                    Ok(outcome) => DurableResult::Done(outcome),
                    Err(failure) => {
                        warn!(host = host.0, op = %request.op_id, %failure, "assignment transaction");
                        sh.stats.bump(|s| s.store_failures += 1);
                        failure.durable_result()
                    }
                };
                let now = sh.clock.now();
                feed(&sh, host, machine_id, |m| {
                    let _ = m.handle_transaction_result(now, attempt, result);
                });
            });
        }
        Action::Reconcile { attempt, request } => {
            sh.stats.bump(|s| s.reconciliations_run += 1);
            let sh = sh.clone();
            tokio::spawn(async move {
                if !sh.alive() {
                    return;
                }
                let result = match sh.store.reconcile(sh.clock.now(), &request).await {
                    Ok(Some(outcome)) => DurableResult::Done(outcome),
                    // The fence could not be written: stay quarantined.
                    Ok(None) => DurableResult::StoreUnavailable,
                    Err(failure) => {
                        warn!(host = host.0, op = %request.op_id, %failure, "reconciliation");
                        sh.stats.bump(|s| s.store_failures += 1);
                        failure.durable_result()
                    }
                };
                let now = sh.clock.now();
                feed(&sh, host, machine_id, |m| {
                    let _ = m.handle_reconcile_result(now, attempt, result);
                });
            });
        }
        Action::Quarantined { attempt, cause } => {
            sh.stats.bump(|s| s.quarantined += 1);
            warn!(host = host.0, op = %attempt.op_id, ?cause,
                "handoff quarantined: source stays gated until a locked reconciliation succeeds");
        }
        Action::RetireSourceDraining { reason } => {
            sh.stats.bump(|s| match reason {
                switchyard_core::handoff::attempt::RetireReason::Committed { .. } => {
                    s.retired_committed += 1;
                }
                switchyard_core::handoff::attempt::RetireReason::StaleAuthority { .. } => {
                    s.retired_stale += 1;
                }
            });
            info!(host = host.0, ?reason, "source retired through DRAINING");
            let sh = sh.clone();
            tokio::spawn(async move {
                let cell = sh.cfg.cell;
                let r = (|| sh.store.release_activity(host, cell))
                    .retry(backoff(3))
                    .sleep(tokio::time::sleep)
                    .await;
                if let Err(e) = r {
                    warn!(host = host.0, %e, "activity not released (expires on its own)");
                }
            });
        }
        Action::ReopenAdmission { attempt } => {
            sh.stats.bump(|s| s.reopened += 1);
            info!(host = host.0, op = %attempt.op_id, "handoff not committed: admission reopened");
        }
        Action::FenceAuthority { authority, reason } => {
            let sh = sh.clone();
            tokio::spawn(async move {
                let r = (|| sh.store.emergency_drain(&authority))
                    .retry(backoff(5))
                    .sleep(tokio::time::sleep)
                    .await;
                match r {
                    Ok(w) => {
                        sh.stats.bump(|s| s.fences_written += 1);
                        info!(host = host.0, ?reason, write = ?w, "drain fence");
                    }
                    Err(e) => warn!(host = host.0, %e, "drain fence not written"),
                }
            });
        }
        Action::Reply(reply) => deliver(sh, reply),
    }
}

fn backoff(times: usize) -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(times)
        .with_jitter()
}

fn reply_op(reply: &HandoffReply) -> OpId {
    match reply {
        HandoffReply::Busy { op_id, .. }
        | HandoffReply::InProgress { op_id }
        | HandoffReply::Superseded { op_id, .. }
        | HandoffReply::Refused { op_id, .. } => *op_id,
        HandoffReply::Result(r) => r.op_id,
    }
}

/// HO-A3: hand the reply to whoever still waits; nobody waiting changes nothing.
fn deliver(sh: &Arc<Shared>, reply: HandoffReply) {
    let waiters = sh
        .waiters
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&reply_op(&reply))
        .unwrap_or_default();
    if waiters.is_empty() {
        sh.stats.bump(|s| s.replies_unheard += 1);
    }
    for w in waiters {
        if w.send(reply).is_ok() {
            sh.stats.bump(|s| s.replies_delivered += 1);
        }
    }
}

fn wait_for(sh: &Shared, op: OpId) -> Option<oneshot::Receiver<HandoffReply>> {
    let mut w = sh.waiters.lock().unwrap_or_else(|e| e.into_inner());
    let total: usize = w.values().map(Vec::len).sum();
    let list = w.entry(op).or_default();
    if total >= MAX_WAITERS || list.len() >= MAX_WAITERS_PER_OP {
        return None;
    }
    let (tx, rx) = oneshot::channel();
    list.push(tx);
    Some(rx)
}

// ----- internal endpoint -----

/// `Some(refusal)` unless the request is authenticated (nothing else happens then).
fn authenticate(sh: &Shared, headers: &HeaderMap, body: &[u8]) -> Option<Response> {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
    let window = u64::try_from(sh.cfg.auth_window.as_millis()).unwrap_or(u64::MAX);
    let verdict = sh.cfg.internal_secret.verify_request(
        h("authorization"),
        h(TIMESTAMP_HEADER),
        h(SIGNATURE_HEADER),
        body,
        sh.clock.now().0,
        window,
    );
    match verdict {
        Ok(()) => None,
        Err(e) => {
            debug!(error = %e, "internal request refused");
            Some((StatusCode::UNAUTHORIZED, e.to_string()).into_response())
        }
    }
}

fn bad_request(what: &str, e: impl std::fmt::Display) -> Response {
    (StatusCode::BAD_REQUEST, format!("malformed {what}: {e}")).into_response()
}

/// HO-S1 / HO-S2: an idle-handoff request. Answers the durable result, `busy`,
/// `superseded`, `refused`, or `in_progress` if the result is not there within `result_wait`.
async fn handoff(State(sh): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = authenticate(&sh, &headers, &body) {
        return refused;
    }
    let req: HandoffRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("handoff request", e),
    };
    let host = req.source.host;
    let now = sh.clock.now();
    let (immediate, waiter) = {
        let mut hosts = sh.hosts();
        match hosts.get_mut(&host) {
            None => (
                Some(HandoffReply::Refused {
                    op_id: req.op_id,
                    reason: Refusal::NoSession,
                }),
                None,
            ),
            Some(e) => match e.machine.begin_handoff(now, &req) {
                Begin::Started(a) => {
                    sh.stats.bump(|s| s.attempts_started += 1);
                    debug!(host = host.0, op = %a.op_id, "barrier installed");
                    (None, wait_for(&sh, req.op_id))
                }
                Begin::Answered(HandoffReply::InProgress { op_id }) => (None, wait_for(&sh, op_id)),
                Begin::Answered(r) => {
                    if matches!(r, HandoffReply::Busy { .. }) {
                        sh.stats.bump(|s| s.busy_answers += 1);
                    }
                    (Some(r), None)
                }
            },
        }
    };
    pump(&sh, host);
    let mut reply = match (immediate, waiter) {
        (Some(r), _) => r,
        (None, Some(rx)) => match tokio::time::timeout(sh.cfg.result_wait, rx).await {
            Ok(Ok(r)) => r,
            _ => HandoffReply::InProgress { op_id: req.op_id },
        },
        (None, None) => HandoffReply::InProgress { op_id: req.op_id },
    };
    // HO-A1: a duplicate that reaches a source whose machine no longer holds the attempt
    // (retired, restarted) answers the durable record, read-only.
    let unheld = matches!(
        reply,
        HandoffReply::Superseded { .. }
            | HandoffReply::Refused {
                reason: Refusal::NoSession | Refusal::SourceRetired | Refusal::NotOwner(_),
                ..
            }
    );
    if unheld {
        if let Ok(Some(row)) = sh.store.recorded_attempt(req.op_id).await {
            if let AttemptOutcome::Committed { new_epoch, .. } = row.outcome {
                reply = HandoffReply::Result(HandoffResult {
                    op_id: req.op_id,
                    outcome: TxnOutcome::Committed {
                        target: row.target,
                        new_epoch,
                    },
                });
            }
        }
    }
    Json(HandoffAnswer::of(reply)).into_response()
}

/// HO-A5: emergency drain / auth enforcement of one host at this cell.
async fn drain(State(sh): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = authenticate(&sh, &headers, &body) {
        return refused;
    }
    let req: DrainRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("drain request", e),
    };
    let host = HostId(req.host);
    let now = sh.clock.now();
    let answer = {
        let mut hosts = sh.hosts();
        match hosts.get_mut(&host) {
            None => DrainAnswer {
                applied: false,
                closed_clients: 0,
            },
            Some(e) => {
                let applied = matches!(
                    e.machine.handle_emergency_drain(now, req.reason),
                    switchyard_core::handoff::attempt::Disposition::Applied
                );
                // The hard drain itself, unchanged: every client of the host and its control
                // are closed (within the hard-drain deadline, see the client loop).
                let _ = e.drain.send(true);
                if let Some(link) = e.control.take() {
                    let frame = CellToDesktop::Draining {
                        reason: format!("{:?}", req.reason),
                    };
                    let _ = link.tx.try_send(ControlCmd::Close(frame, CLOSE_NORMAL));
                }
                DrainAnswer {
                    applied,
                    closed_clients: u32::try_from(e.clients.len()).unwrap_or(u32::MAX),
                }
            }
        }
    };
    if answer.applied {
        sh.stats.bump(|s| s.drains += 1);
    }
    pump(&sh, host);
    Json(answer).into_response()
}

async fn stats(State(sh): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(refused) = authenticate(&sh, &headers, b"") {
        return refused;
    }
    Json(sh.stats.get()).into_response()
}

// ----- public endpoints -----

#[derive(Debug, Deserialize)]
struct HostQuery {
    host: u64,
    #[serde(default)]
    caps: String,
}

async fn resolve(State(sh): State<Arc<Shared>>, Query(q): Query<HostQuery>) -> Response {
    match sh.store.resolve(HostId(q.host)).await {
        Ok(Some(r)) => Json(ResolveAnswer {
            host: q.host,
            cell: r.cell.0,
            epoch: r.epoch.0,
            url: r.public_url,
        })
        .into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "unknown host").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

async fn capabilities(State(sh): State<Arc<Shared>>) -> Response {
    let mut caps = Vec::new();
    if sh.cfg.handoff_capable {
        caps.push(IDLE_HANDOFF_CAPABILITY.to_owned());
    }
    Json(Capabilities {
        cell: sh.cfg.cell.0,
        incarnation: sh.incarnation.0,
        capabilities: caps,
    })
    .into_response()
}

// ----- client WebSocket -----

async fn close_ws(mut socket: WebSocket, code: u16, reason: &str) {
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

fn refusal_code(r: AdmissionRefusal) -> u16 {
    r.close_code().unwrap_or(match r {
        AdmissionRefusal::SourceDraining => CLOSE_DRAINING,
        _ => CLOSE_TRY_AGAIN,
    })
}

async fn client_ws(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<HostQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    let host = HostId(q.host);
    // HO-7: ownership before the first await that could admit this host.
    let work = Work::acquire(&sh, host, WorkKind::Accept);
    let ws = ws.max_message_size(MAX_FRAME_BYTES);
    match work {
        Err(refusal) => {
            if refusal == AdmissionRefusal::WrongCell {
                sh.stats.bump(|s| s.wrong_cell_closes += 1);
            }
            ws.on_upgrade(move |socket| close_ws(socket, refusal_code(refusal), "refused"))
        }
        // If the upgrade never completes, the callback (and the guard in it) is dropped.
        Ok(work) => ws.on_upgrade(move |socket| client_session(sh, host, work, socket)),
    }
}

async fn client_session(sh: Arc<Shared>, host: HostId, mut work: Work, socket: WebSocket) {
    let wrong_cell = |sh: &Shared| sh.stats.bump(|s| s.wrong_cell_closes += 1);
    if !work.revalidate() {
        wrong_cell(&sh);
        return close_ws(socket, WRONG_CELL_CLOSE_CODE, "wrong cell").await;
    }
    sh.hooks.accept_persist.reached().await;
    // The accept persists the host's activity while its Accept ticket still counts.
    let generation = sh
        .hosts()
        .get(&host)
        .map(|e| e.machine.authority().generation);
    if let Some(generation) = generation {
        let until = sh.clock.now().plus_ms(ms(sh.cfg.activity_lease));
        if let Err(e) = sh
            .store
            .renew_activity(host, sh.cfg.cell, generation, until)
            .await
        {
            debug!(host = host.0, %e, "client activity not persisted");
            return close_ws(socket, CLOSE_TRY_AGAIN, "try again").await;
        }
    }
    if !work.revalidate() {
        wrong_cell(&sh);
        return close_ws(socket, WRONG_CELL_CLOSE_CODE, "wrong cell").await;
    }
    // Attach: the accept becomes a client connection in one synchronous step.
    let conn = sh.next_id();
    let (tx, rx) = mpsc::channel(CLIENT_QUEUE);
    let attached = {
        let r = work.convert(WorkKind::ClientConn);
        let mut hosts = sh.hosts();
        match (r, hosts.get_mut(&host)) {
            (Ok(()), Some(e)) if e.clients.len() < MAX_CLIENTS_PER_HOST => {
                e.clients.insert(conn, tx);
                Some(e.drain.subscribe())
            }
            _ => None,
        }
    };
    let Some(drain_rx) = attached else {
        wrong_cell(&sh);
        drop(work);
        return close_ws(socket, WRONG_CELL_CLOSE_CODE, "wrong cell").await;
    };
    sh.stats.bump(|s| s.clients_attached += 1);
    client_loop(&sh, host, conn, socket, rx, drain_rx).await;
    sh.hosts().get_mut(&host).map(|e| e.clients.remove(&conn));
    drop(work);
}

async fn client_loop(
    sh: &Arc<Shared>,
    host: HostId,
    conn: u64,
    mut socket: WebSocket,
    mut rx: mpsc::Receiver<CellToClient>,
    mut drain_rx: watch::Receiver<bool>,
) {
    let mut stop = sh.shutdown.subscribe();
    let mut splices: HashMap<String, Work> = HashMap::new();
    let hello = CellToClient::Attached {
        cell: sh.cfg.cell.0,
    };
    if send_json(&mut socket, &hello).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            msg = socket.recv() => {
                let Some(Ok(msg)) = msg else { break };
                match msg {
                    Message::Text(t) => {
                        let answer = match serde_json::from_str::<ClientFrame>(&t) {
                            Ok(ClientFrame::Mutation { id, body }) => {
                                relay_mutation(sh, host, conn, id, body, &mut splices)
                            }
                            Err(e) => {
                                debug!(host = host.0, %e, "malformed client frame");
                                Some(CellToClient::Undelivered { id: String::new(), why: "malformed".into() })
                            }
                        };
                        if let Some(a) = answer {
                            if send_json(&mut socket, &a).await.is_err() { break; }
                        }
                    }
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            out = rx.recv() => {
                let Some(out) = out else { break };
                if let CellToClient::Ack { id } = &out {
                    splices.remove(id);
                }
                if send_json(&mut socket, &out).await.is_err() { break; }
            }
            drained = async { drain_rx.wait_for(|d| *d).await.is_ok() } => {
                if drained {
                    // Hard drain, unchanged by the handoff: close within its deadline.
                    let _ = tokio::time::timeout(sh.cfg.hard_drain_deadline, close_ws(socket, CLOSE_DRAINING, "draining")).await;
                    return;
                }
            }
            _ = async { stop.wait_for(|s| *s).await.map(|_| ()) } => return,
        }
    }
}

/// A mutation travels to the desktop under a Splice ticket held until its ack.
fn relay_mutation(
    sh: &Arc<Shared>,
    host: HostId,
    conn: u64,
    id: String,
    body: String,
    splices: &mut HashMap<String, Work>,
) -> Option<CellToClient> {
    let undelivered = |id: String, why: &str| {
        Some(CellToClient::Undelivered {
            id,
            why: why.to_owned(),
        })
    };
    if id.is_empty() || id.len() > 256 || splices.contains_key(&id) {
        return undelivered(id, "bad or duplicate id");
    }
    if splices.len() >= MAX_SPLICES_PER_CLIENT {
        return undelivered(id, "too many in flight");
    }
    let splice = match Work::acquire(sh, host, WorkKind::Splice) {
        Ok(w) => w,
        Err(r) => return undelivered(id, &format!("{r:?}")),
    };
    let sent = {
        let hosts = sh.hosts();
        hosts
            .get(&host)
            .and_then(|e| e.control.as_ref())
            .is_some_and(|c| {
                c.tx.try_send(ControlCmd::Frame(CellToDesktop::Relay {
                    conn,
                    id: id.clone(),
                    body,
                }))
                .is_ok()
            })
    };
    if !sent {
        drop(splice);
        return undelivered(id, "desktop not connected");
    }
    sh.stats.bump(|s| s.relayed += 1);
    splices.insert(id, splice);
    None
}

async fn send_json<T: Serialize>(socket: &mut WebSocket, v: &T) -> Result<(), ()> {
    let text = serde_json::to_string(v).map_err(|_| ())?;
    tokio::time::timeout(
        Duration::from_secs(5),
        socket.send(Message::Text(text.into())),
    )
    .await
    .map_err(|_| ())?
    .map_err(|_| ())
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

// ----- desktop control WebSocket -----

async fn desktop_ws(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<HostQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
    if let Err(e) = sh.cfg.desktop_secret.verify_desktop(q.host, auth) {
        sh.stats.bump(|s| s.control_refused += 1);
        return (StatusCode::UNAUTHORIZED, e.to_string()).into_response();
    }
    let host = HostId(q.host);
    let capable = q
        .caps
        .split(',')
        .any(|c| c.trim() == IDLE_HANDOFF_CAPABILITY);
    // HO-S3 / HO-A4: a control activation at an existing source is a counted control
    // operation, owned before the first await; refused (retryable) under a barrier or drain.
    let existing = {
        let hosts = sh.hosts();
        hosts.get(&host).map(|e| {
            matches!(e.machine.gate().state(), GateState::Closed(_))
                && !e.machine.gate().is_drained()
        })
    };
    let op = match existing {
        Some(false) => match Work::acquire(&sh, host, WorkKind::ControlOp) {
            Ok(w) => Some(w),
            Err(r) => {
                sh.stats.bump(|s| s.control_refused += 1);
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("control refused: {r:?}"),
                )
                    .into_response();
            }
        },
        _ => None,
    };
    ws.max_message_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| desktop_session(sh, host, capable, op, socket))
}

/// Register in the store (HO-A4: under the host lock there), enrolling an unknown host.
async fn register(
    sh: &Shared,
    host: HostId,
    capable: bool,
) -> Result<Result<SourceAuthority, RegisterRefusal>, String> {
    let cell = sh.cfg.cell;
    let now = sh.clock.now();
    let first = sh
        .store
        .register_control(now, host, cell, sh.incarnation, capable)
        .await
        .map_err(|e| e.to_string())?;
    if first == Err(RegisterRefusal::UnknownHost) && sh.cfg.enroll_unknown_hosts {
        match sh.store.insert_host(host, cell, capable).await {
            Ok(Ok(_)) | Ok(Err(SetupRefusal::HostExists)) => {}
            Ok(Err(e)) => return Err(format!("enrolment refused: {e:?}")),
            Err(e) => return Err(e.to_string()),
        }
        return sh
            .store
            .register_control(now, host, cell, sh.incarnation, capable)
            .await
            .map_err(|e| e.to_string());
    }
    Ok(first)
}

async fn desktop_session(
    sh: Arc<Shared>,
    host: HostId,
    capable: bool,
    op: Option<Work>,
    mut socket: WebSocket,
) {
    sh.stats.bump(|s| s.control_registrations += 1);
    let authority = match register(&sh, host, capable).await {
        Ok(Ok(a)) => a,
        Ok(Err(RegisterRefusal::NotAssignedHere { assigned })) => {
            // HO-A4: a committed handoff won: the old ownership is refused; resolve again.
            let frame = CellToDesktop::Draining {
                reason: format!("assigned to cell {}", assigned.0),
            };
            let _ = send_json(&mut socket, &frame).await;
            drop(op);
            return close_ws(socket, WRONG_CELL_CLOSE_CODE, "assigned elsewhere").await;
        }
        Ok(Err(refusal)) => {
            drop(op);
            return close_ws(socket, WRONG_CELL_CLOSE_CODE, &format!("{refusal:?}")).await;
        }
        Err(e) => {
            warn!(host = host.0, error = %e, "control registration failed");
            drop(op);
            let _ = send_json(
                &mut socket,
                &CellToDesktop::Retry {
                    what: "register".into(),
                },
            )
            .await;
            return close_ws(socket, CLOSE_TRY_AGAIN, "store unavailable").await;
        }
    };
    let session = sh.next_id();
    let (tx, rx) = mpsc::channel(CONTROL_QUEUE);
    let now = sh.clock.now();
    let installed = {
        let mut hosts = sh.hosts();
        install_control(
            &sh,
            &mut hosts,
            host,
            authority,
            capable,
            op.as_ref(),
            session,
            tx,
            now,
        )
    };
    drop(op);
    let (machine_id, old) = match installed {
        Ok(v) => v,
        Err(why) => {
            sh.stats.bump(|s| s.control_refused += 1);
            let _ = send_json(&mut socket, &CellToDesktop::Retry { what: why.clone() }).await;
            return close_ws(socket, CLOSE_TRY_AGAIN, &why).await;
        }
    };
    if let Some(old) = old {
        let frame = CellToDesktop::Draining {
            reason: "replaced".into(),
        };
        let _ = old.tx.try_send(ControlCmd::Close(frame, CLOSE_NORMAL));
    }
    let until = now.plus_ms(ms(sh.cfg.activity_lease));
    let _ = sh
        .store
        .renew_activity(host, sh.cfg.cell, authority.generation, until)
        .await;
    let hello = CellToDesktop::Registered {
        cell: authority.cell.0,
        epoch: authority.epoch.0,
        incarnation: authority.incarnation.0,
        generation: authority.generation.0,
        capable,
    };
    if send_json(&mut socket, &hello).await.is_ok() {
        control_loop(&sh, host, authority, socket, rx).await;
    }
    // The session ended: tell the machine (a late close of a replaced session is ignored).
    let now = sh.clock.now();
    let mut ours = false;
    {
        let mut hosts = sh.hosts();
        if let Some(e) = hosts.get_mut(&host).filter(|e| e.machine_id == machine_id) {
            if e.control.as_ref().is_some_and(|c| c.session == session) {
                e.control = None;
            }
            ours = true;
            let _ = e.machine.handle_session_closed(now, authority.generation);
        }
    }
    if ours {
        pump(&sh, host);
    }
}

type Installed = Result<(u64, Option<ControlLink>), String>;

#[allow(clippy::too_many_arguments)]
fn install_control(
    sh: &Arc<Shared>,
    hosts: &mut HashMap<HostId, HostEntry>,
    host: HostId,
    authority: SourceAuthority,
    capable: bool,
    op: Option<&Work>,
    session: u64,
    tx: mpsc::Sender<ControlCmd>,
    now: switchyard_core::MonoMs,
) -> Installed {
    let link = ControlLink { session, tx };
    let fresh = |sh: &Arc<Shared>| SourceHandoff::new(sh.cfg.source_config(), authority, capable);
    match hosts.get_mut(&host) {
        None => {
            let machine_id = sh.next_id();
            let (drain, _) = watch::channel(false);
            hosts.insert(
                host,
                HostEntry {
                    machine_id,
                    machine: fresh(sh),
                    control: Some(link),
                    clients: HashMap::new(),
                    drain,
                    timer: None,
                },
            );
            Ok((machine_id, None))
        }
        Some(e) if e.machine.gate().is_drained() => Err("source draining".into()),
        Some(e) if matches!(e.machine.gate().state(), GateState::Closed(_)) => {
            // A retired source gets a new machine; a barrier only ever closed over zero
            // tickets, so no live work is orphaned.
            if let Some(t) = e.timer.take() {
                t.abort();
            }
            e.machine_id = sh.next_id();
            e.machine = fresh(sh);
            let old = e.control.replace(link);
            Ok((e.machine_id, old))
        }
        Some(e) => {
            // HO-A4: rebind the live machine through a control ticket (ours if we took one
            // before the await, else one taken now); refused while a barrier stands.
            let own = op
                .filter(|w| w.machine_id == e.machine_id)
                .and_then(|w| w.ticket);
            let (ticket, temporary) = match own {
                Some(t) => (t, false),
                None => (
                    e.machine
                        .acquire(WorkKind::ControlOp)
                        .map_err(|r| format!("{r:?}"))?,
                    true,
                ),
            };
            let r = e.machine.handle_rebind(now, ticket, authority, capable);
            if temporary {
                let _ = e.machine.release(ticket);
            }
            r.map_err(|r| format!("rebind refused: {r:?}"))?;
            let old = e.control.replace(link);
            Ok((e.machine_id, old))
        }
    }
}

async fn control_loop(
    sh: &Arc<Shared>,
    host: HostId,
    authority: SourceAuthority,
    mut socket: WebSocket,
    mut rx: mpsc::Receiver<ControlCmd>,
) {
    let mut stop = sh.shutdown.subscribe();
    loop {
        tokio::select! {
            msg = socket.recv() => {
                let Some(Ok(msg)) = msg else { return };
                match msg {
                    Message::Text(t) => match serde_json::from_str::<DesktopFrame>(&t) {
                        Ok(f) => {
                            if let Some(reply) = on_desktop_frame(sh, host, authority, f).await {
                                if send_json(&mut socket, &reply).await.is_err() { return; }
                            }
                        }
                        Err(e) => debug!(host = host.0, %e, "malformed desktop frame"),
                    },
                    Message::Ping(_) | Message::Pong(_) => {
                        // HO-8: heartbeats are not client work (the core's `&self` input).
                        if let Some(e) = sh.hosts().get(&host) {
                            let _ = e.machine.note_heartbeat(Heartbeat::Ping);
                        }
                    }
                    Message::Close(_) => return,
                    Message::Binary(_) => {}
                }
            }
            cmd = rx.recv() => match cmd {
                Some(ControlCmd::Frame(f)) => {
                    if send_json(&mut socket, &f).await.is_err() { return; }
                }
                Some(ControlCmd::Close(f, code)) => {
                    let _ = send_json(&mut socket, &f).await;
                    return close_ws(socket, code, "draining").await;
                }
                None => return close_ws(socket, CLOSE_NORMAL, "closed").await,
            },
            _ = async { stop.wait_for(|s| *s).await.map(|_| ()) } => return,
        }
    }
}

async fn on_desktop_frame(
    sh: &Arc<Shared>,
    host: HostId,
    authority: SourceAuthority,
    frame: DesktopFrame,
) -> Option<CellToDesktop> {
    match frame {
        DesktopFrame::Measure {
            target,
            current_rtt_ms,
            target_rtt_ms,
        } => {
            let m = Measurement {
                measured_at: sh.clock.now(),
                current_rtt_ms,
                target_rtt_ms,
            };
            if let Err(e) = sh.store.put_measurement(host, CellId(target), &m).await {
                debug!(host = host.0, %e, "measurement not stored");
            }
            None
        }
        DesktopFrame::Activity => {
            if let Some(e) = sh.hosts().get(&host) {
                let _ = e.machine.note_heartbeat(Heartbeat::ActivityRenewal);
            }
            let until = sh.clock.now().plus_ms(ms(sh.cfg.activity_lease));
            let _ = sh
                .store
                .renew_activity(host, sh.cfg.cell, authority.generation, until)
                .await;
            None
        }
        DesktopFrame::Credential { seq } => {
            // A counted control operation: refused (retryable) under a barrier.
            let mut work = match Work::acquire(sh, host, WorkKind::ControlOp) {
                Ok(w) => w,
                Err(r) => {
                    return Some(CellToDesktop::Retry {
                        what: format!("credential {seq}: {r:?}"),
                    })
                }
            };
            sh.hooks.credential_persist.reached().await;
            let until = sh.clock.now().plus_ms(ms(sh.cfg.activity_lease));
            let persisted = sh
                .store
                .renew_activity(host, sh.cfg.cell, authority.generation, until)
                .await;
            if persisted.is_err() || !work.revalidate() {
                return Some(CellToDesktop::Retry {
                    what: format!("credential {seq}"),
                });
            }
            drop(work);
            Some(CellToDesktop::CredentialDone { seq })
        }
        DesktopFrame::Ack { conn, id } => {
            let hosts = sh.hosts();
            if let Some(c) = hosts.get(&host).and_then(|e| e.clients.get(&conn)) {
                let _ = c.try_send(CellToClient::Ack { id });
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::handoff::attempt::DrainReason;

    #[test]
    fn refusals_map_to_close_codes() {
        assert_eq!(refusal_code(AdmissionRefusal::WrongCell), 4409);
        assert_eq!(
            refusal_code(AdmissionRefusal::SourceDraining),
            CLOSE_DRAINING
        );
        assert_eq!(
            refusal_code(AdmissionRefusal::ControlGated),
            CLOSE_TRY_AGAIN
        );
    }

    #[test]
    fn drain_reason_is_wire_stable() {
        let r = DrainRequest {
            host: 7,
            reason: DrainReason::Emergency,
        };
        let text = serde_json::to_string(&r).expect("json");
        assert_eq!(serde_json::from_str::<DrainRequest>(&text).ok(), Some(r));
    }
}
