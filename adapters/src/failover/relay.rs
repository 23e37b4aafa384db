//! A relay server: WebSocket channels on several URL paths of one listener (two candidate URLs
//! on one host, as in production), heartbeat answers, and a small `/status` endpoint.
//!
//! Stopping a relay drops every channel and stops listening, as a crashed host would; starting
//! it again on the same address brings it back.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::net::TcpListener;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::probes::{
    self, counter, gauge, server_samples, Probe, Sample, HEALTHZ_PATH, METRICS_PATH, READYZ_PATH,
};
use crate::serve::{
    IdleEvent, Server, ServerLimits, ServerStats, DEFAULT_LIMITS, IDLE_CLOSE_CODE,
    IDLE_CLOSE_REASON,
};
use crate::stop::{Stop, StopListener};

/// The text frame a client sends as an application heartbeat, and the answer.
pub const HEARTBEAT_PING: &str = "ping";
pub const HEARTBEAT_PONG: &str = "pong";
/// Frames a channel accepts before the relay closes it, so a peer cannot hold a task forever
/// with an unbounded stream; a heartbeat every second takes over a day to reach it.
pub const MAX_FRAMES_PER_CHANNEL: u64 = 100_000_000;
/// OPS-1: the close of a channel when the relay stops on purpose.
pub const RELAY_STOPPING_CODE: u16 = 1001;
pub const RELAY_STOPPING: &str = "relay_stopping";
/// How long `RelayHandle::stop` waits for its channels to drop their sockets.
pub const STOP_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub listen: SocketAddr,
    /// URL paths that accept channels, e.g. `/dshs-relay`.
    pub paths: Vec<String>,
    /// SEC-3: what a peer may hold (connections, timeouts, frame sizes).
    pub limits: ServerLimits,
}

impl RelayConfig {
    /// A relay with the default limits.
    #[must_use]
    pub fn new(listen: SocketAddr, paths: Vec<String>) -> RelayConfig {
        RelayConfig {
            listen,
            paths,
            limits: RELAY_LIMITS,
        }
    }
}

/// SEC-3: a relay channel carries heartbeats (a few bytes a second): its messages are bounded at
/// 4 KiB, and a channel silent for 30 s (three missed heartbeat windows and three transport
/// pings) is closed.
pub const RELAY_LIMITS: ServerLimits = ServerLimits {
    max_body_bytes: 4 * 1024,
    ws_idle_timeout: Duration::from_secs(30),
    ws_max_message_bytes: 4 * 1024,
    ws_max_write_buffer_bytes: 64 * 1024,
    ..DEFAULT_LIMITS
};

/// What `GET /status` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayStatus {
    pub listen: String,
    pub paths: Vec<String>,
    pub open_channels: u64,
    pub accepted_total: u64,
    /// SEC-3: connections held and refused, idle and oversized sockets closed.
    #[serde(default)]
    pub server: ServerStats,
}

#[derive(Debug, Default)]
struct Counters {
    open: AtomicU64,
    accepted: AtomicU64,
    /// Woken each time a channel task ends (`stop` waits for `open` to reach 0).
    channel_ended: Notify,
    /// OPS-1: the stop is graceful: channels are closed with 1001 `relay_stopping`, not
    /// dropped as a crash drops them.
    graceful: std::sync::atomic::AtomicBool,
}

#[derive(Clone)]
struct Shared {
    config: Arc<RelayConfig>,
    server: Arc<Server>,
    counters: Arc<Counters>,
    stop: StopListener,
}

/// A running relay. Dropping the handle stops it too.
#[derive(Debug)]
pub struct RelayHandle {
    local_addr: SocketAddr,
    stop: Stop,
    server: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
    limits: Arc<Server>,
}

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("relay: cannot listen on {listen}: {source}")]
    Listen {
        listen: SocketAddr,
        source: std::io::Error,
    },
    #[error("relay: --path {path:?}: {why}")]
    BadPath { path: String, why: &'static str },
    #[error("relay: {0}")]
    BadLimits(String),
}

/// Longest relay path accepted (a URL path of a candidate in a signed directory).
pub const MAX_RELAY_PATH_BYTES: usize = 256;

/// SEC-4: each path is a literal URL path: `/` and segments of unreserved characters (RFC 3986:
/// letters, digits, `-._~`), no empty segment, not `/status`, each path once. Router syntax
/// (`/:x`, `/{x}`, `/*x`) would turn one path into a pattern matching many, and a duplicate
/// would make the router panic.
pub fn check_paths(paths: &[String]) -> Result<(), RelayError> {
    let bad = |path: &String, why| {
        Err(RelayError::BadPath {
            path: path.clone(),
            why,
        })
    };
    for (index, path) in paths.iter().enumerate() {
        let Some(rest) = path.strip_prefix('/') else {
            return bad(path, "must start with '/'");
        };
        if path.len() > MAX_RELAY_PATH_BYTES {
            return bad(path, "longer than 256 bytes");
        }
        if path == "/status" {
            return bad(path, "/status is the relay's own status page");
        }
        if [HEALTHZ_PATH, READYZ_PATH, METRICS_PATH].contains(&path.as_str()) {
            return bad(
                path,
                "/healthz, /readyz and /metrics are the relay's own probes",
            );
        }
        let literal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~');
        if !rest.is_empty() && rest.split('/').any(|segment| segment.is_empty()) {
            return bad(path, "has an empty segment ('//' or a trailing '/')");
        }
        if !rest.chars().all(|c| c == '/' || literal(c)) {
            return bad(
                path,
                "may hold only letters, digits, '-', '.', '_', '~' and '/' (no route patterns such as ':x', '{x}' or '*x')",
            );
        }
        if paths[..index].contains(path) {
            return bad(path, "given twice");
        }
    }
    Ok(())
}

impl RelayHandle {
    /// Binds and serves. Returns once the relay accepts connections.
    pub async fn start(config: RelayConfig) -> Result<RelayHandle, RelayError> {
        check_paths(&config.paths)?;
        config.limits.check().map_err(RelayError::BadLimits)?;
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| RelayError::Listen {
                    listen: config.listen,
                    source,
                })?;
        let local_addr = listener.local_addr().map_err(|source| RelayError::Listen {
            listen: config.listen,
            source,
        })?;
        let stop_tx = Stop::new();
        let stop_rx = stop_tx.listener();
        let counters = Arc::new(Counters::default());
        let server = Server::new("relay", config.limits);
        let shared = Shared {
            config: Arc::new(RelayConfig {
                listen: local_addr,
                ..config.clone()
            }),
            server: server.clone(),
            counters: counters.clone(),
            stop: stop_rx.clone(),
        };
        let mut router = Router::new().route("/status", get(status));
        for path in &config.paths {
            router = router.route(path, get(accept));
        }
        let probes = probes::routes(Arc::new(shared.clone()));
        let router = server.layer(router.with_state(shared).merge(probes));
        let limits = server.clone();
        let server = crate::machine::spawn(server.run(listener, router, stop_rx));
        tracing::info!(%local_addr, paths = ?config.paths, "relay listening");
        Ok(RelayHandle {
            local_addr,
            stop: stop_tx,
            server: Some(server),
            counters,
            limits,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Channels open right now.
    pub fn open_channels(&self) -> u64 {
        self.counters.open.load(Ordering::Relaxed)
    }

    /// Channels accepted since start.
    pub fn accepted_total(&self) -> u64 {
        self.counters.accepted.load(Ordering::Relaxed)
    }

    /// SEC-3: the listener's counters.
    pub fn server_stats(&self) -> ServerStats {
        self.limits.stats()
    }

    /// OPS-1: stop on purpose: stop listening, close every channel with 1001
    /// `relay_stopping` (clients fail over at once instead of waiting for their health check),
    /// and return the final counters.
    pub async fn shutdown(self) -> RelayStatus {
        self.counters.graceful.store(true, Ordering::SeqCst);
        let counters = self.counters.clone();
        let limits = self.limits.clone();
        let local_addr = self.local_addr;
        let open_at_stop = counters.open.load(Ordering::SeqCst);
        self.stop().await;
        RelayStatus {
            listen: local_addr.to_string(),
            paths: Vec::new(),
            // The channels the stop closed.
            open_channels: open_at_stop,
            accepted_total: counters.accepted.load(Ordering::SeqCst),
            server: limits.stats(),
        }
    }

    /// Drops every channel and stops listening; returns once the listener is closed and every
    /// channel's socket is dropped (bounded by `STOP_DRAIN_TIMEOUT`), so that nothing is
    /// answered after it returns, as after a crash.
    pub async fn stop(mut self) {
        self.stop_now();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        let counters = &self.counters;
        let drained = tokio::time::timeout(STOP_DRAIN_TIMEOUT, async {
            loop {
                // Created before the check, so an end between the two still wakes it.
                let ended = counters.channel_ended.notified();
                if counters.open.load(Ordering::SeqCst) == 0 {
                    break;
                }
                ended.await;
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                local_addr = %self.local_addr,
                open_channels = counters.open.load(Ordering::SeqCst),
                "relay stopped with channels still closing"
            );
        }
        tracing::info!(local_addr = %self.local_addr, "relay listener and channels closed");
    }

    fn stop_now(&self) {
        self.stop.stop();
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// OPS-2: ready while it serves; not while it stops.
impl Probe for Shared {
    fn ready(&self) -> Result<(), String> {
        if self.stop.is_stopped() || self.counters.graceful.load(Ordering::SeqCst) {
            return Err("the relay is stopping".to_owned());
        }
        Ok(())
    }

    fn samples(&self) -> Vec<Sample> {
        let mut samples = vec![
            gauge(
                "relay_channels_open",
                "relay channels open now",
                self.counters.open.load(Ordering::Relaxed),
            ),
            counter(
                "relay_channels_accepted",
                "relay channels accepted since start",
                self.counters.accepted.load(Ordering::Relaxed),
            ),
        ];
        samples.extend(server_samples(&self.server.stats()));
        samples
    }
}

async fn status(State(shared): State<Shared>) -> Json<RelayStatus> {
    Json(RelayStatus {
        listen: shared.config.listen.to_string(),
        paths: shared.config.paths.clone(),
        open_channels: shared.counters.open.load(Ordering::Relaxed),
        accepted_total: shared.counters.accepted.load(Ordering::Relaxed),
        server: shared.server.stats(),
    })
}

async fn accept(
    State(shared): State<Shared>,
    upgrade: WebSocketUpgrade,
) -> axum::response::Response {
    shared.server.ws(upgrade).on_upgrade({
        let here = crate::machine::Here::now();
        move |socket| here.run(serve_channel(shared, socket))
    })
}

async fn serve_channel(shared: Shared, mut socket: WebSocket) {
    let mut stop = shared.stop.clone();
    if stop.is_stopped() {
        return;
    }
    shared.counters.accepted.fetch_add(1, Ordering::Relaxed);
    shared.counters.open.fetch_add(1, Ordering::Relaxed);
    let mut frames: u64 = 0;
    let mut idle = shared.server.idle();
    loop {
        tokio::select! {
            // Stop first: once `stop()` has returned, a frame that is already waiting must not
            // be answered (an unbiased select picks at random, and a stopped relay answered a
            // heartbeat now and then).
            biased;
            // A stopped relay drops the socket without a close frame, as a crashed host would.
            () = stop.stopped() => {
                if shared.counters.graceful.load(Ordering::SeqCst) {
                    let close = CloseFrame { code: RELAY_STOPPING_CODE, reason: RELAY_STOPPING.into() };
                    let _ = tokio::time::timeout(Duration::from_secs(1), socket.send(Message::Close(Some(close)))).await;
                }
                break;
            }
            event = idle.next() => match event {
                IdleEvent::Ping => {
                    if socket.send(Message::Ping(Default::default())).await.is_err() {
                        break;
                    }
                }
                IdleEvent::Expired => {
                    let close = CloseFrame { code: IDLE_CLOSE_CODE, reason: IDLE_CLOSE_REASON.into() };
                    let _ = tokio::time::timeout(Duration::from_secs(1), socket.send(Message::Close(Some(close)))).await;
                    break;
                }
            },
            frame = socket.recv() => {
                frames += 1;
                idle.heard();
                match frame {
                    Some(Ok(Message::Text(text))) if text.as_str() == HEARTBEAT_PING => {
                        if socket.send(Message::Text(HEARTBEAT_PONG.into())).await.is_err() {
                            break;
                        }
                    }
                    // Transport pings are answered by the WebSocket layer; other frames carry
                    // no meaning for a relay channel in this implementation.
                    Some(Ok(Message::Close(_))) | None => break,
                    Some(Err(error)) => {
                        shared.server.note_ws_error(&error);
                        break;
                    }
                    Some(Ok(_)) => {}
                }
                if frames >= MAX_FRAMES_PER_CHANNEL {
                    break;
                }
            }
        }
    }
    shared.counters.open.fetch_sub(1, Ordering::SeqCst);
    shared.counters.channel_ended.notify_waiters();
}
