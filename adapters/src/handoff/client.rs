//! Small desktop and mobile clients (tests, demos): they resolve their host's cell through any
//! cell's resolve path, dial it, and follow the ordinary DRAINING / WRONG_CELL (4409) paths.
//!
//! - The desktop keeps one control socket, registers, reports a measurement, applies relayed
//!   mutations to an append-only log and acks them; on DRAINING it resolves and reconnects.
//! - The mobile attaches, sends its mutations one at a time and waits for each ack; a mutation
//!   whose ack was lost with the connection is reported `unknown` and **never replayed**
//!   (no mutation is sent twice). 4409 and failures are retried with paced, jittered backoff;
//!   same-address retries are never tighter than the minimum pacing.
//! - OPS-2: what follows a close or a refused upgrade (resolve, retry, or stop because no
//!   retry can help: a refused credential, a drained host) is the core's
//!   `switchyard_core::handoff` (`core/src/handoff/reconnect.rs`); each client names the close it stopped on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hyper::Method;
use serde::{Deserialize, Serialize};
use switchyard_core::handoff::close_code;
use switchyard_core::handoff::{after_close, after_refused_upgrade, AfterClose, StopWhy};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tracing::{debug, info, warn};

use super::http;
use super::proto::*;
use crate::stop::{Stop, StopListener};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Paced exponential backoff with jitter (bounded; reset on success).
#[derive(Debug, Clone)]
struct Pacing {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Pacing {
    fn new(min: Duration, max: Duration) -> Pacing {
        Pacing {
            min,
            max: max.max(min),
            next: min,
        }
    }

    fn reset(&mut self) {
        self.next = self.min;
    }

    /// The delay to wait now: `next` plus up to 25 % jitter; doubles `next`.
    fn delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let jitter_ms = u64::try_from(base.as_millis() / 4).unwrap_or(0);
        let jitter = if jitter_ms == 0 {
            0
        } else {
            fastrand_u64() % jitter_ms
        };
        base + Duration::from_millis(jitter)
    }
}

/// A little randomness for jitter (the machine's, or a simulation's seeded generator).
fn fastrand_u64() -> u64 {
    let mut bytes = [0u8; 8];
    if crate::machine::fill_random(&mut bytes).is_err() {
        // No entropy: the clock still spreads the retries of several processes.
        return crate::machine::unix_ms().wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    u64::from_le_bytes(bytes)
}

/// Resolve a host through the first resolver that answers. `Ok(None)`: the store does not
/// know the host (a desktop then enrols at its first resolver).
pub async fn resolve(resolvers: &[String], host: u64) -> Result<Option<ResolveAnswer>, String> {
    let mut last = String::from("no resolver configured");
    for r in resolvers {
        let path = format!("{RESOLVE_PATH}?host={host}");
        match http::request(Method::GET, r, &path, &[], Vec::new(), CONNECT_TIMEOUT).await {
            Ok(resp) if resp.status.is_success() => {
                return serde_json::from_slice(&resp.body)
                    .map(Some)
                    .map_err(|e| format!("malformed resolve answer from {r}: {e}"));
            }
            Ok(resp) if resp.status == hyper::StatusCode::NOT_FOUND => return Ok(None),
            Ok(resp) => last = format!("{r}: HTTP {}", resp.status),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

fn ws_url(http_url: &str, path: &str) -> String {
    let base = http_url.trim_end_matches('/');
    let base = base
        .strip_prefix("http://")
        .map(|b| format!("ws://{b}"))
        .unwrap_or_else(|| base.to_owned());
    format!("{base}{path}")
}

/// A WebSocket request to `url` carrying `Authorization: Bearer <token>`.
fn bearer_request(
    url: &str,
    token: &str,
) -> Result<tokio_tungstenite::tungstenite::handshake::client::Request, String> {
    let mut request = url
        .into_client_request()
        .map_err(|e| format!("bad cell URL {url:?}: {e}"))?;
    let value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| "the token is not a valid header value".to_owned())?;
    request.headers_mut().insert("authorization", value);
    Ok(request)
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
}

// ----- desktop -----

#[derive(Debug, Clone)]
pub struct DesktopConfig {
    pub resolvers: Vec<String>,
    pub host: u64,
    /// `Authorization: Bearer <token>` of the control socket.
    pub token: String,
    /// HO-C1: negotiate the idle-handoff capability.
    pub capable: bool,
    /// HO-3: measurement to report after each registration: (target cell, current, target).
    pub measure: Option<(u32, u32, u32)>,
    pub pace_min: Duration,
    pub pace_max: Duration,
    pub ping_every: Duration,
}

/// What a test or the CLI can ask a running desktop to do.
#[derive(Debug, Clone)]
pub enum DesktopCmd {
    Credential(u64),
    Measure(u32, u32, u32),
}

/// Observable state of a desktop.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct DesktopState {
    /// Applied mutation ids, in order (append-once evidence: each at most once).
    pub applied: Vec<String>,
    /// (cell, generation) of every successful registration.
    pub registrations: Vec<(u32, u64)>,
    pub drainings: Vec<String>,
    pub wrong_cell: u32,
    pub retries: Vec<String>,
    pub credentials_done: Vec<u64>,
    pub connect_failures: u32,
    /// OPS-2: why the desktop stopped by itself (a refusal no retry can fix), e.g.
    /// `credential_refused: HTTP 401 Unauthorized: bad desktop token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

#[derive(Debug)]
pub struct DesktopHandle {
    state: Arc<Mutex<DesktopState>>,
    registered: watch::Receiver<Option<(u32, u64)>>,
    cmds: mpsc::Sender<DesktopCmd>,
    stop: Stop,
    /// Set when the desktop stopped by itself ([`DesktopState::stopped`]).
    gave_up: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl DesktopHandle {
    #[must_use]
    pub fn state(&self) -> DesktopState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Wait (bounded) until the desktop is registered at `cell`.
    pub async fn wait_registered(&mut self, cell: u32, within: Duration) -> Result<u64, String> {
        let registered = &mut self.registered;
        let r = tokio::time::timeout(within, async move {
            registered
                .wait_for(|r| r.is_some_and(|(c, _)| c == cell))
                .await
                .map(|v| v.map_or(0, |(_, g)| g))
        })
        .await;
        match r {
            Ok(Ok(g)) => Ok(g),
            _ => Err(format!(
                "desktop not registered at cell {cell} within {within:?}: {:?}",
                self.state()
            )),
        }
    }

    pub async fn send(&self, cmd: DesktopCmd) -> Result<(), String> {
        self.cmds
            .send_timeout(cmd, Duration::from_secs(2))
            .await
            .map_err(|e| e.to_string())
    }

    /// Resolves once the desktop stopped by itself (a refusal no retry can fix); never
    /// otherwise.
    pub async fn gave_up(&self) {
        let mut rx = self.gave_up.clone();
        if rx.wait_for(|g| *g).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    pub async fn stop(self) {
        self.stop.stop();
        let _ = tokio::time::timeout(Duration::from_secs(3), self.task).await;
    }
}

pub fn spawn_desktop(cfg: DesktopConfig) -> DesktopHandle {
    let state = Arc::new(Mutex::new(DesktopState::default()));
    let (reg_tx, registered) = watch::channel(None);
    let (cmds, cmd_rx) = mpsc::channel(16);
    let stop = Stop::new();
    let stop_rx = stop.listener();
    let (gave_up_tx, gave_up) = watch::channel(false);
    let desktop = run_desktop(cfg, state.clone(), reg_tx, cmd_rx, stop_rx);
    // The task keeps a `Stop` of its own: a dropped handle leaves the desktop running (it
    // stops on `DesktopHandle::stop` only).
    let keep = stop.clone();
    let task = crate::machine::spawn(async move {
        let _keep = keep;
        if desktop.await.is_some() {
            let _ = gave_up_tx.send(true);
        }
    });
    DesktopHandle {
        state,
        registered,
        cmds,
        stop,
        gave_up,
        task,
    }
}

/// The refused upgrade's status and body (bounded), if `e` is one.
fn refused_upgrade(e: &tokio_tungstenite::tungstenite::Error) -> Option<(u16, String)> {
    let tokio_tungstenite::tungstenite::Error::Http(resp) = e else {
        return None;
    };
    let body = resp
        .body()
        .as_deref()
        .map(|b| {
            String::from_utf8_lossy(b)
                .chars()
                .take(200)
                .collect::<String>()
        })
        .unwrap_or_default();
    Some((resp.status().as_u16(), body.trim().to_owned()))
}

/// Runs until stopped (`None`) or until a refusal no retry can fix (`Some(why)`, also in
/// the state's `stopped`).
async fn run_desktop(
    cfg: DesktopConfig,
    state: Arc<Mutex<DesktopState>>,
    registered: watch::Sender<Option<(u32, u64)>>,
    mut cmds: mpsc::Receiver<DesktopCmd>,
    mut stop: StopListener,
) -> Option<String> {
    let st = |f: &mut dyn FnMut(&mut DesktopState)| {
        let mut g = state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g);
    };
    let mut pacing = Pacing::new(cfg.pace_min, cfg.pace_max);
    let caps = if cfg.capable {
        IDLE_HANDOFF_CAPABILITY
    } else {
        ""
    };
    loop {
        if stop.is_stopped() {
            return None;
        }
        let target_url = match resolve(&cfg.resolvers, cfg.host).await {
            Ok(Some(t)) => t.url,
            Ok(None) => match cfg.resolvers.first() {
                Some(first) => first.clone(),
                None => return None,
            },
            Err(e) => {
                debug!(host = cfg.host, error = %e, "desktop resolve failed");
                st(&mut |s| s.connect_failures += 1);
                sleep_or_stop(pacing.delay(), &mut stop).await;
                continue;
            }
        };
        let url = ws_url(
            &target_url,
            &format!("{DESKTOP_PATH}?host={}&caps={caps}", cfg.host),
        );
        let request = match bearer_request(&url, &cfg.token) {
            Ok(r) => r,
            Err(e) => {
                debug!(error = %e, "desktop request not built");
                sleep_or_stop(pacing.delay(), &mut stop).await;
                continue;
            }
        };
        let connected = tokio::time::timeout(
            CONNECT_TIMEOUT,
            crate::net::ws_connect(request, Some(ws_config())),
        )
        .await;
        let mut ws = match connected {
            Ok(Ok((ws, _))) => ws,
            other => {
                let refused = match &other {
                    Ok(Err(e)) => refused_upgrade(e),
                    _ => None,
                };
                if let Some((status, body)) = refused {
                    if let AfterClose::Stop(why) = after_refused_upgrade(status) {
                        let stopped = format!("{}: HTTP {status}: {body}", why.name());
                        warn!(host = cfg.host, %url, refusal = why.name(), status, cause = %body,
                            "desktop: the cell refused the control token; stopping (a retry is refused the same way)");
                        st(&mut |s| s.stopped = Some(stopped.clone()));
                        return Some(stopped);
                    }
                }
                debug!(%url, ?other, "desktop connect failed");
                st(&mut |s| s.connect_failures += 1);
                sleep_or_stop(pacing.delay(), &mut stop).await;
                continue;
            }
        };
        let mut ping = tokio::time::interval(cfg.ping_every);
        ping.tick().await;
        let mut reconnect_now = false;
        loop {
            tokio::select! {
                biased;
                () = stop.stopped() => {
                    let _ = ws.close(None).await;
                    return None;
                }
                cmd = cmds.recv() => {
                    let frame = match cmd {
                        Some(DesktopCmd::Credential(seq)) => DesktopFrame::Credential { seq },
                        Some(DesktopCmd::Measure(target, cur, tgt)) => DesktopFrame::Measure { target, current_rtt_ms: cur, target_rtt_ms: tgt },
                        None => continue,
                    };
                    if send_frame(&mut ws, &frame).await.is_err() { break; }
                }
                _ = ping.tick() => {
                    // HO-8: heartbeats keep the control socket; they are never client work.
                    if ws.send(Message::Ping(Vec::new().into())).await.is_err() { break; }
                }
                msg = ws.next() => {
                    let Some(Ok(msg)) = msg else { break };
                    match msg {
                        Message::Text(t) => {
                            let Ok(frame) = serde_json::from_str::<CellToDesktop>(&t) else {
                                continue;
                            };
                            match frame {
                                CellToDesktop::Registered { cell, generation, .. } => {
                                    pacing.reset();
                                    st(&mut |s| s.registrations.push((cell, generation)));
                                    let _ = registered.send(Some((cell, generation)));
                                    info!(host = cfg.host, cell, generation, "desktop registered");
                                    if let Some((target, cur, tgt)) = cfg.measure {
                                        let m = DesktopFrame::Measure { target, current_rtt_ms: cur, target_rtt_ms: tgt };
                                        if send_frame(&mut ws, &m).await.is_err() { break; }
                                    }
                                }
                                CellToDesktop::Relay { conn, id, body: _ } => {
                                    st(&mut |s| s.applied.push(id.clone()));
                                    if send_frame(&mut ws, &DesktopFrame::Ack { conn, id }).await.is_err() { break; }
                                }
                                CellToDesktop::CredentialDone { seq } => st(&mut |s| s.credentials_done.push(seq)),
                                CellToDesktop::Retry { what, seq, reason } => {
                                    // `what [seq]: reason`, e.g. `credential 2: control_gated`.
                                    let what = match seq { Some(n) => format!("{what} {n}: {reason}"), None => format!("{what}: {reason}") };
                                    st(&mut |s| s.retries.push(what.clone()));
                                }
                                CellToDesktop::Draining { reason } => {
                                    // The ordinary DRAINING / resolve path: reconnect at once.
                                    st(&mut |s| s.drainings.push(reason.clone()));
                                    let _ = registered.send(None);
                                    reconnect_now = true;
                                }
                            }
                        }
                        Message::Close(frame) => {
                            if frame.is_some_and(|f| u16::from(f.code) == 4409) {
                                st(&mut |s| s.wrong_cell += 1);
                            }
                            break;
                        }
                        _ => {}
                    }
                }
            }
        }
        let _ = registered.send(None);
        if !reconnect_now {
            sleep_or_stop(pacing.delay(), &mut stop).await;
        }
    }
}

async fn send_frame<S, T>(ws: &mut S, v: &T) -> Result<(), ()>
where
    S: SinkExt<Message> + Unpin,
    T: Serialize,
{
    let text = serde_json::to_string(v).map_err(|_| ())?;
    tokio::time::timeout(Duration::from_secs(5), ws.send(Message::text(text)))
        .await
        .map_err(|_| ())?
        .map_err(|_| ())
}

async fn sleep_or_stop(d: Duration, stop: &mut StopListener) {
    tokio::select! {
        biased;
        _ = tokio::time::sleep(d) => {}
        () = stop.stopped() => {}
    }
}

// ----- mobile -----

#[derive(Debug, Clone)]
pub struct MobileConfig {
    pub resolvers: Vec<String>,
    pub host: u64,
    /// SEC-1: the credential the host's desktop issued (`client_auth::mint_client_token`).
    pub token: String,
    /// Mutation ids to send, in order (each exactly once at most).
    pub mutations: Vec<String>,
    /// Stay attached this long after the last ack (a persistent client).
    pub hold: Duration,
    /// HO-S3: a current mobile re-resolves on 4409 at once; an old one retries the same
    /// address (paced) up to `old_same_address_tries` times before resolving again.
    pub old_client: bool,
    pub old_same_address_tries: u32,
    pub pace_min: Duration,
    pub pace_max: Duration,
    /// Bound on connection attempts.
    pub max_attempts: u32,
    pub ack_timeout: Duration,
}

impl MobileConfig {
    #[must_use]
    pub fn new(
        resolvers: Vec<String>,
        host: u64,
        token: String,
        mutations: Vec<String>,
    ) -> MobileConfig {
        MobileConfig {
            resolvers,
            host,
            token,
            mutations,
            hold: Duration::ZERO,
            old_client: false,
            old_same_address_tries: 3,
            pace_min: Duration::from_millis(100),
            pace_max: Duration::from_secs(2),
            max_attempts: 60,
            ack_timeout: Duration::from_secs(5),
        }
    }
}

/// What a mobile run did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MobileReport {
    pub attempts: u32,
    pub attached: u32,
    /// Cells it attached at, in order.
    pub cells: Vec<u32>,
    pub wrong_cell: u32,
    pub resolves: u32,
    pub acked: Vec<String>,
    /// Sent, ack lost with the connection: never replayed.
    pub unknown: Vec<String>,
    /// Explicitly not delivered (no desktop): may be sent again.
    pub undelivered: u32,
    /// Smallest gap between two dials of the same address (ms), if any.
    pub min_same_address_gap_ms: Option<u64>,
    /// Every mutation id put on the wire, in order (each must appear once).
    pub sent: Vec<String>,
    pub done: bool,
    /// SEC-1: a cell refused the credential (4401): the mobile stopped, a retry cannot help.
    #[serde(default)]
    pub not_authenticated: bool,
    /// OPS-2: why the last attempt failed, if it did (resolve error, unknown host, a cell
    /// that could not be reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    /// OPS-2: the last close the cell sent, `<code> <reason>` (e.g. `1012 source_draining`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<String>,
    /// OPS-2: why the mobile stopped before its attempts ran out: a refusal no retry can fix
    /// (`credential_refused`, `host_drained`; the core's `reconnect::StopWhy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

impl MobileReport {
    /// OPS-2: log a failure when its cause changes (not at every retry).
    fn failed(&mut self, host: u64, cause: String) {
        if self.last_failure.as_deref() != Some(cause.as_str()) {
            tracing::warn!(host, cause = %cause, "mobile: attempt failed; retrying (paced)");
        }
        self.last_failure = Some(cause);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SessionEnd {
    /// The cell closed the session (`code: None`: the connection broke without a close).
    Closed {
        code: Option<u16>,
        reason: String,
    },
    /// The upgrade was answered with an HTTP status.
    Refused {
        status: u16,
        body: String,
    },
    /// No session: cannot connect, or a mutation went undelivered.
    Failed,
    Done,
    Stopped,
}

impl SessionEnd {
    fn broken() -> SessionEnd {
        SessionEnd::Closed {
            code: None,
            reason: String::new(),
        }
    }
}

/// Run a mobile until its mutations are acked (and held), or `max_attempts` is spent, or
/// `stop` says stop (or its `Stop` is gone: the caller keeps it while the mobile runs).
pub async fn run_mobile(cfg: MobileConfig, mut stop: StopListener) -> MobileReport {
    let mut report = MobileReport::default();
    let mut pending: Vec<String> = cfg.mutations.iter().rev().cloned().collect();
    let mut pacing = Pacing::new(cfg.pace_min, cfg.pace_max);
    let mut cached: Option<String> = None;
    let mut same_address_failures = 0u32;
    let mut last_dial: BTreeMap<String, tokio::time::Instant> = BTreeMap::new();
    while report.attempts < cfg.max_attempts && !stop.is_stopped() {
        report.attempts += 1;
        let url = match (&cached, cfg.old_client) {
            (Some(u), true) if same_address_failures < cfg.old_same_address_tries => u.clone(),
            _ => {
                report.resolves += 1;
                match resolve(&cfg.resolvers, cfg.host).await {
                    Ok(Some(r)) => r.url,
                    Ok(None) => {
                        report.failed(
                            cfg.host,
                            "the resolver does not know the host (no desktop registered yet)"
                                .to_owned(),
                        );
                        sleep_or_stop(pacing.delay(), &mut stop).await;
                        continue;
                    }
                    Err(e) => {
                        report.failed(cfg.host, format!("resolve failed: {e}"));
                        sleep_or_stop(pacing.delay(), &mut stop).await;
                        continue;
                    }
                }
            }
        };
        if cached.as_deref() != Some(url.as_str()) {
            same_address_failures = 0;
        }
        cached = Some(url.clone());
        // Same-address pacing: never dial one address again sooner than `pace_min`.
        if let Some(prev) = last_dial.get(&url) {
            let since = prev.elapsed();
            if since < cfg.pace_min {
                sleep_or_stop(cfg.pace_min - since, &mut stop).await;
            }
            let gap = u64::try_from(prev.elapsed().as_millis()).unwrap_or(u64::MAX);
            report.min_same_address_gap_ms =
                Some(report.min_same_address_gap_ms.map_or(gap, |g| g.min(gap)));
        }
        last_dial.insert(url.clone(), tokio::time::Instant::now());
        let end = mobile_session(&cfg, &url, &mut pending, &mut report, &mut stop).await;
        let next = match &end {
            SessionEnd::Done => {
                report.done = true;
                return report;
            }
            SessionEnd::Stopped => break,
            SessionEnd::Failed => AfterClose::Retry,
            SessionEnd::Refused { status, .. } => after_refused_upgrade(*status),
            SessionEnd::Closed { code, reason } => {
                if code.is_some() {
                    report.closed_by = Some(close_name(*code, reason));
                }
                after_close(*code, reason)
            }
        };
        let what = match &end {
            SessionEnd::Closed {
                code: Some(code),
                reason,
            } => format!("the cell at {url} closed the session: {code} {reason}"),
            SessionEnd::Refused { status, body } => {
                format!("the cell at {url} refused the connection: HTTP {status} {body}")
            }
            _ => format!("the session at {url} failed (cannot connect, or closed before the acks)"),
        };
        match next {
            AfterClose::Stop(why) => {
                report.stopped = Some(why.name().to_owned());
                report.not_authenticated = why == StopWhy::CredentialRefused;
                tracing::warn!(host = cfg.host, stopped = why.name(), cause = %what,
                    "mobile: stopping: a retry cannot help");
                report.last_failure = Some(format!("{what} ({}: a retry cannot help)", why.name()));
                break;
            }
            AfterClose::Resolve => {
                let wrong_cell = matches!(
                    end,
                    SessionEnd::Closed {
                        code: Some(close_code::WRONG_CELL),
                        ..
                    }
                );
                if wrong_cell {
                    report.wrong_cell += 1;
                }
                if wrong_cell && cfg.old_client {
                    same_address_failures += 1;
                } else {
                    // Current mobiles re-resolve on 4409 at once, every mobile on a drain or
                    // a stopping cell (the resolve is paced below).
                    same_address_failures = cfg.old_same_address_tries;
                }
                sleep_or_stop(pacing.delay(), &mut stop).await;
            }
            AfterClose::Retry => {
                report.failed(cfg.host, what);
                same_address_failures += 1;
                sleep_or_stop(pacing.delay(), &mut stop).await;
            }
        }
    }
    // OPS-2: success is every mutation acked, whether or not the hold after them ran its
    // full length (a drain or a stop may cut it short).
    report.done = all_acked(&cfg, &report);
    report
}

fn all_acked(cfg: &MobileConfig, report: &MobileReport) -> bool {
    cfg.mutations.iter().all(|m| report.acked.contains(m))
}

/// `1012 source_draining`, or the code alone when the reason is empty.
fn close_name(code: Option<u16>, reason: &str) -> String {
    match (code, reason.is_empty()) {
        (Some(c), false) => format!("{c} {reason}"),
        (Some(c), true) => c.to_string(),
        (None, _) => "no close frame".to_owned(),
    }
}

async fn mobile_session(
    cfg: &MobileConfig,
    base: &str,
    pending: &mut Vec<String>,
    report: &mut MobileReport,
    stop: &mut StopListener,
) -> SessionEnd {
    let url = ws_url(base, &format!("{CLIENT_PATH}?host={}", cfg.host));
    let request = match bearer_request(&url, &cfg.token) {
        Ok(r) => r,
        Err(e) => {
            return SessionEnd::Refused {
                status: 401,
                body: e,
            }
        }
    };
    let connected = tokio::time::timeout(
        CONNECT_TIMEOUT,
        crate::net::ws_connect(request, Some(ws_config())),
    )
    .await;
    let mut ws = match connected {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            return match refused_upgrade(&e) {
                Some((status, body)) => SessionEnd::Refused { status, body },
                None => SessionEnd::Failed,
            }
        }
        Err(_) => return SessionEnd::Failed,
    };
    let mut in_flight: Option<String> = None;
    let mut hold_until: Option<tokio::time::Instant> = None;
    let mut attached = false;
    loop {
        if attached && in_flight.is_none() {
            match pending.pop() {
                Some(id) => {
                    let frame = ClientFrame::Mutation {
                        id: id.clone(),
                        body: format!("mutation {id}"),
                    };
                    report.sent.push(id.clone());
                    in_flight = Some(id);
                    if send_frame(&mut ws, &frame).await.is_err() {
                        report.unknown.extend(in_flight.take());
                        return SessionEnd::broken();
                    }
                }
                None if hold_until.is_none() => {
                    hold_until = Some(tokio::time::Instant::now() + cfg.hold);
                }
                None => {}
            }
        }
        let hold = async {
            match hold_until {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = stop.stopped() => {
                report.unknown.extend(in_flight.take());
                let _ = ws.close(None).await;
                return SessionEnd::Stopped;
            }
            _ = hold => {
                let _ = ws.close(None).await;
                return SessionEnd::Done;
            }
            msg = tokio::time::timeout(cfg.ack_timeout.max(cfg.hold) + Duration::from_secs(1), ws.next()) => {
                let Ok(msg) = msg else {
                    report.unknown.extend(in_flight.take());
                    return SessionEnd::broken();
                };
                let Some(Ok(msg)) = msg else {
                    report.unknown.extend(in_flight.take());
                    return SessionEnd::broken();
                };
                match msg {
                    Message::Text(t) => match serde_json::from_str::<CellToClient>(&t) {
                        Ok(CellToClient::Attached { cell }) => {
                            attached = true;
                            report.attached += 1;
                            report.cells.push(cell);
                        }
                        Ok(CellToClient::Ack { id }) => {
                            if in_flight.as_deref() == Some(id.as_str()) {
                                in_flight = None;
                                report.acked.push(id);
                                if pending.is_empty() {
                                    info!(host = cfg.host, acked = report.acked.len(), hold_ms = u64::try_from(cfg.hold.as_millis()).unwrap_or(u64::MAX),
                                        "mobile: every mutation acked; holding the session");
                                }
                            }
                        }
                        Ok(CellToClient::Undelivered { id, why }) => {
                            debug!(%id, %why, "mutation not delivered");
                            report.undelivered += 1;
                            if in_flight.as_deref() == Some(id.as_str()) {
                                // Explicitly not delivered: it may go again later.
                                pending.extend(in_flight.take());
                                let _ = ws.close(None).await;
                                return SessionEnd::Failed;
                            }
                        }
                        Err(_) => {}
                    },
                    Message::Close(frame) => {
                        report.unknown.extend(in_flight.take());
                        return match frame {
                            Some(f) => SessionEnd::Closed {
                                code: Some(u16::from(f.code)),
                                reason: f.reason.chars().take(123).collect(),
                            },
                            None => SessionEnd::broken(),
                        };
                    }
                    _ => {}
                }
            }
        }
    }
}
