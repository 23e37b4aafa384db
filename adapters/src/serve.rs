//! SEC-3: the listener loop of every server (the failover relay, the handoff cell's public and
//! internal endpoints): what a peer may hold, and for how long.
//!
//! - Connections: the core's [`ConnectionGate`] decides, per accepted socket, whether the
//!   server (`max_connections`) or the peer address (`max_connections_per_peer`) is full. A
//!   refused socket gets one `503` line naming the bound and is closed; nobody admitted is
//!   touched. The admission ticket lives inside the socket's IO object, so an upgraded
//!   WebSocket holds it until it is dropped.
//! - HTTP: hyper's header read timeout (a connection that sends no complete request head in
//!   time, slowloris included, is closed), a body size bound that answers `413` from
//!   `Content-Length` before reading anything (tower-http), and a deadline over the whole
//!   request, body included (`408`).
//! - WebSocket: frame and message size bounds in kilobytes, a bounded write buffer, read and
//!   write buffers of a few KiB ([`WsBuffers`], SCALE-5), and an idle timeout ([`Idle`]) with
//!   transport pings so a live peer is never taken for a dead one.
//!
//! Each refusal is counted in [`ServerStats`]; a change of the gate's pressure is logged once
//! (WARN when it starts refusing, INFO when it admits again).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::net::{TcpListener, TcpStream};
use axum::extract::ws::WebSocketUpgrade;
use axum::http::StatusCode;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::{Deserialize, Serialize};
use switchyard_core::peer_limits::{
    ConnectionBounds, ConnectionGate, ConnectionRefusal, ConnectionTicket, Pressure,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tracing::{debug, info, warn};

use crate::stop::StopListener;

/// What one server lets a peer hold. Every field is bounded and non-zero (see
/// [`ServerLimits::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    /// A connection must deliver each complete request head within this (also the keep-alive
    /// idle bound between requests).
    pub header_read_timeout: Duration,
    /// Whole request, body read and handler included (plain HTTP; an upgrade answers at once).
    pub request_timeout: Duration,
    pub max_body_bytes: usize,
    /// A WebSocket that sends nothing (not even a pong) for this long is closed.
    pub ws_idle_timeout: Duration,
    pub ws_max_message_bytes: usize,
    /// Bytes the server queues towards a peer that does not read before the socket fails.
    pub ws_max_write_buffer_bytes: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        DEFAULT_LIMITS
    }
}

/// The defaults of a server whose peers exchange small JSON messages (the handoff cell).
pub const DEFAULT_LIMITS: ServerLimits = ServerLimits {
    max_connections: 32_768,
    max_connections_per_peer: 256,
    header_read_timeout: Duration::from_secs(10),
    request_timeout: Duration::from_secs(15),
    max_body_bytes: 64 * 1024,
    ws_idle_timeout: Duration::from_secs(90),
    ws_max_message_bytes: 64 * 1024,
    ws_max_write_buffer_bytes: 1024 * 1024,
};

/// Largest values the configuration accepts: beyond them a "limit" no longer limits.
pub const MAX_CONNECTIONS_CEILING: usize = 1_000_000;
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3_600);
pub const MAX_MESSAGE_CEILING_BYTES: usize = 16 * 1024 * 1024;

impl ServerLimits {
    /// SEC-4: a named error for a value out of range (zero disables nothing here: it is
    /// refused).
    pub fn check(&self) -> Result<(), String> {
        let count = |name: &str, v: usize, max: usize| {
            if v == 0 || v > max {
                Err(format!("{name} must be 1..={max}, not {v}"))
            } else {
                Ok(())
            }
        };
        let time = |name: &str, v: Duration| {
            if v < Duration::from_millis(10) || v > MAX_TIMEOUT {
                Err(format!(
                    "{name} must be 10..={} ms, not {} ms",
                    MAX_TIMEOUT.as_millis(),
                    v.as_millis()
                ))
            } else {
                Ok(())
            }
        };
        count(
            "--max-connections",
            self.max_connections,
            MAX_CONNECTIONS_CEILING,
        )?;
        count(
            "--max-connections-per-peer",
            self.max_connections_per_peer,
            self.max_connections,
        )?;
        time("--header-timeout-ms", self.header_read_timeout)?;
        time("--http-request-timeout-ms", self.request_timeout)?;
        time("--ws-idle-timeout-ms", self.ws_idle_timeout)?;
        count(
            "--max-body-bytes",
            self.max_body_bytes,
            MAX_MESSAGE_CEILING_BYTES,
        )?;
        count(
            "--ws-max-message-bytes",
            self.ws_max_message_bytes,
            MAX_MESSAGE_CEILING_BYTES,
        )?;
        count(
            "--ws-max-write-buffer-bytes",
            self.ws_max_write_buffer_bytes,
            4 * MAX_MESSAGE_CEILING_BYTES,
        )
    }
}

/// The limits as command-line flags (flattened into `relay` and `cell`). A flag left out takes
/// the server's own default (`switchyard relay` and `switchyard handoff cell` differ: a relay
/// channel carries only heartbeats).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LimitArgs {
    /// SEC-3: connections the server holds at once; a newcomer over it gets 503 [default: 32768: a cell of a 1,000,000-host fleet over 100 cells holds 10,000 desktops and their clients].
    #[arg(long, env = "SWITCHYARD_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// SEC-3: connections one peer address holds at once [default: 256].
    #[arg(long, env = "SWITCHYARD_MAX_CONNECTIONS_PER_PEER")]
    pub max_connections_per_peer: Option<usize>,
    /// SEC-3: time to deliver a complete request head: the slowloris bound, and the keep-alive
    /// idle bound [default: 10000].
    #[arg(long, env = "SWITCHYARD_HEADER_TIMEOUT_MS")]
    pub header_timeout_ms: Option<u64>,
    /// SEC-3: deadline of a whole HTTP request, body included; past it the answer is 408
    /// [default: 15000].
    #[arg(long, env = "SWITCHYARD_HTTP_REQUEST_TIMEOUT_MS")]
    pub http_request_timeout_ms: Option<u64>,
    /// SEC-3: largest HTTP request body [default: relay 4096, cell 65536].
    #[arg(long, env = "SWITCHYARD_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// SEC-3: a WebSocket silent this long (no frame, no pong) is closed [default: relay 30000,
    /// cell 90000].
    #[arg(long, env = "SWITCHYARD_WS_IDLE_TIMEOUT_MS")]
    pub ws_idle_timeout_ms: Option<u64>,
    /// SEC-3: largest WebSocket message and frame [default: relay 4096, cell 65536].
    #[arg(long, env = "SWITCHYARD_WS_MAX_MESSAGE_BYTES")]
    pub ws_max_message_bytes: Option<usize>,
    /// SEC-3: bytes queued towards a peer that does not read [default: relay 65536, cell
    /// 1048576].
    #[arg(long, env = "SWITCHYARD_WS_MAX_WRITE_BUFFER_BYTES")]
    pub ws_max_write_buffer_bytes: Option<usize>,
}

impl LimitArgs {
    /// The flags over `defaults`, checked.
    pub fn limits(&self, defaults: ServerLimits) -> Result<ServerLimits, String> {
        let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
        let limits = ServerLimits {
            max_connections: self.max_connections.unwrap_or(defaults.max_connections),
            max_connections_per_peer: self
                .max_connections_per_peer
                .unwrap_or(defaults.max_connections_per_peer),
            header_read_timeout: ms(self.header_timeout_ms, defaults.header_read_timeout),
            request_timeout: ms(self.http_request_timeout_ms, defaults.request_timeout),
            max_body_bytes: self.max_body_bytes.unwrap_or(defaults.max_body_bytes),
            ws_idle_timeout: ms(self.ws_idle_timeout_ms, defaults.ws_idle_timeout),
            ws_max_message_bytes: self
                .ws_max_message_bytes
                .unwrap_or(defaults.ws_max_message_bytes),
            ws_max_write_buffer_bytes: self
                .ws_max_write_buffer_bytes
                .unwrap_or(defaults.ws_max_write_buffer_bytes),
        };
        limits.check()?;
        Ok(limits)
    }
}

/// Counters of one server (`/status` of a relay, `/internal/v1/stats` of a cell).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerStats {
    pub connections_open: u64,
    pub connections_admitted: u64,
    /// Refused: the server held `max_connections`.
    pub refused_server_full: u64,
    /// Refused: the peer address held `max_connections_per_peer`.
    pub refused_peer_full: u64,
    /// Connections hyper closed on an error: a request head not read in time, a malformed
    /// request, a reset.
    pub connection_errors: u64,
    /// WebSockets closed for silence.
    pub ws_idle_closed: u64,
    /// WebSockets closed for a frame or message over the size bound (or another protocol
    /// error).
    pub ws_protocol_closed: u64,
}

/// One server's limits and counters, shared by its listener loop and its handlers.
#[derive(Debug)]
pub struct Server {
    name: &'static str,
    limits: ServerLimits,
    gate: Mutex<ConnectionGate<IpAddr>>,
    connection_errors: AtomicU64,
    ws_idle_closed: AtomicU64,
    ws_protocol_closed: AtomicU64,
}

impl Server {
    /// `name` prefixes the log lines (`relay`, `cell`).
    #[must_use]
    pub fn new(name: &'static str, limits: ServerLimits) -> Arc<Server> {
        Arc::new(Server {
            name,
            limits,
            gate: Mutex::new(ConnectionGate::new(ConnectionBounds {
                total: limits.max_connections,
                per_peer: limits.max_connections_per_peer,
            })),
            connection_errors: AtomicU64::new(0),
            ws_idle_closed: AtomicU64::new(0),
            ws_protocol_closed: AtomicU64::new(0),
        })
    }

    #[must_use]
    pub fn limits(&self) -> &ServerLimits {
        &self.limits
    }

    #[must_use]
    pub fn stats(&self) -> ServerStats {
        let c = self.lock_gate().counts();
        ServerStats {
            connections_open: c.open,
            connections_admitted: c.admitted_total,
            refused_server_full: c.refused_server_full,
            refused_peer_full: c.refused_peer_full,
            connection_errors: self.connection_errors.load(Ordering::Relaxed),
            ws_idle_closed: self.ws_idle_closed.load(Ordering::Relaxed),
            ws_protocol_closed: self.ws_protocol_closed.load(Ordering::Relaxed),
        }
    }

    fn lock_gate(&self) -> std::sync::MutexGuard<'_, ConnectionGate<IpAddr>> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The HTTP limits as layers around `router` (outermost: the body bound, so an oversized
    /// `Content-Length` is answered before any deadline starts).
    pub fn layer(&self, router: Router) -> Router {
        router
            .layer(TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                self.limits.request_timeout,
            ))
            .layer(RequestBodyLimitLayer::new(self.limits.max_body_bytes))
    }

    /// The WebSocket size bounds and buffer sizes on an upgrade.
    pub fn ws(&self, upgrade: WebSocketUpgrade) -> WebSocketUpgrade {
        let buffers = WsBuffers::of(&self.limits);
        upgrade
            .max_message_size(self.limits.ws_max_message_bytes)
            .max_frame_size(self.limits.ws_max_message_bytes)
            .read_buffer_size(buffers.read)
            .write_buffer_size(buffers.write)
            .max_write_buffer_size(self.limits.ws_max_write_buffer_bytes)
    }

    /// A fresh idle timer for one WebSocket.
    #[must_use]
    pub fn idle(self: &Arc<Self>) -> Idle {
        Idle::new(self.clone(), self.limits.ws_idle_timeout)
    }

    /// A WebSocket ended on a receive error (oversized message, bad frame): counted.
    pub fn note_ws_error(&self, error: &axum::Error) {
        self.ws_protocol_closed.fetch_add(1, Ordering::Relaxed);
        debug!(server = self.name, %error, "websocket closed on a protocol error");
    }

    fn admit(&self, peer: IpAddr) -> Result<ConnectionTicket<IpAddr>, ConnectionRefusal> {
        let admission = self.lock_gate().admit(peer);
        match admission.pressure_changed_to {
            Some(Pressure::Refusing) => {
                let refusal = admission.outcome.as_ref().err().map(|r| r.name());
                warn!(server = self.name, %peer, refusal, max_connections = self.limits.max_connections,
                      max_connections_per_peer = self.limits.max_connections_per_peer,
                      "connection limit reached: refusing newcomers (503) until a connection is admitted again");
            }
            Some(Pressure::Normal) => {
                let s = self.stats();
                info!(
                    server = self.name,
                    refused_server_full = s.refused_server_full,
                    refused_peer_full = s.refused_peer_full,
                    "admitting connections again"
                );
            }
            None => {}
        }
        admission.outcome
    }

    /// Serve `app` on `listener` until `stop` says stop: then stop accepting and ask every
    /// open HTTP connection to finish its request and close (upgraded WebSockets are the
    /// application's to close).
    pub async fn run(self: Arc<Self>, listener: TcpListener, app: Router, stop: StopListener) {
        let mut stop_accepting = stop.clone();
        let mut accept_failing = false;
        loop {
            let accepted = tokio::select! {
                biased;
                () = stop_accepting.stopped() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(a) => {
                    if accept_failing {
                        info!(server = self.name, "accepting connections again");
                        accept_failing = false;
                    }
                    a
                }
                Err(error) => {
                    // Out of file descriptors and the like: say so once, back off a little so
                    // the loop does not spin, keep serving the connections already open.
                    if !accept_failing {
                        warn!(server = self.name, %error, "cannot accept connections");
                        accept_failing = true;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            match self.admit(peer.ip()) {
                Ok(ticket) => {
                    let io = Admitted {
                        stream,
                        ticket: Some(ticket),
                        server: self.clone(),
                    };
                    crate::machine::spawn(self.clone().connection(
                        io,
                        peer,
                        app.clone(),
                        stop.clone(),
                    ));
                }
                Err(refusal) => refuse(&stream, refusal),
            }
        }
    }

    async fn connection(
        self: Arc<Self>,
        io: Admitted,
        peer: SocketAddr,
        app: Router,
        mut stop: StopListener,
    ) {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout)
            .max_buf_size(self.limits.max_body_bytes.max(16 * 1024));
        // The peer address, for handlers that bound per peer (the cell's resolve path, SEC-3):
        // axum's `ConnectInfo`, as an extension of every request on this connection.
        let app = app.layer(axum::Extension(axum::extract::ConnectInfo(peer)));
        let conn = builder
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(app))
            .with_upgrades();
        tokio::pin!(conn);
        let ended = tokio::select! {
            biased;
            ended = conn.as_mut() => ended,
            () = stop.stopped() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(error) = ended {
            self.connection_errors.fetch_add(1, Ordering::Relaxed);
            debug!(server = self.name, %peer, %error, "connection closed on an error");
        }
    }
}

/// One line and close: the newcomer learns which bound it hit. Non-blocking: a refused peer
/// cannot make the accept loop wait.
fn refuse(stream: &TcpStream, refusal: ConnectionRefusal) {
    let body = refusal.name();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 1\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// SCALE-5: the most an idle WebSocket's read buffer (and write threshold) holds.
pub const WS_BUFFER_CHUNK_BYTES: usize = 4 * 1024;

/// SCALE-5: the buffer sizes of one WebSocket, derived from the limits (no flag of their own).
/// tungstenite's defaults are 128 KiB each, and the read buffer is allocated and zero-filled
/// (so resident) on the first read: ~135 KiB per idle connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsBuffers {
    /// Initial capacity of the read buffer and the most one read asks of the socket. A frame
    /// larger than it grows the buffer to the frame (up to `ws_max_message_bytes`), so a small
    /// chunk costs only more reads for large messages, which these servers rarely see.
    pub read: usize,
    /// Frames are written to the socket once this many bytes are queued (and on every flush,
    /// which each send does). tungstenite panics unless it is below
    /// `ws_max_write_buffer_bytes`.
    pub write: usize,
}

impl WsBuffers {
    #[must_use]
    pub fn of(limits: &ServerLimits) -> WsBuffers {
        let chunk = limits.ws_max_message_bytes.min(WS_BUFFER_CHUNK_BYTES);
        WsBuffers {
            read: chunk,
            write: chunk.min(limits.ws_max_write_buffer_bytes / 2),
        }
    }
}

/// An admitted socket: its connection ticket goes back to the gate when it is dropped, after
/// the HTTP exchange or after the WebSocket it was upgraded to.
struct Admitted {
    stream: TcpStream,
    ticket: Option<ConnectionTicket<IpAddr>>,
    server: Arc<Server>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.server.lock_gate().release(ticket);
        }
    }
}

impl AsyncRead for Admitted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// What an idle timer asks of its WebSocket loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleEvent {
    /// Send a transport ping (a live peer's WebSocket layer answers it).
    Ping,
    /// Nothing heard for the whole timeout: close.
    Expired,
}

/// SEC-3: the idle timeout of one WebSocket. The loop calls [`Idle::heard`] on every inbound
/// frame and selects on [`Idle::next`]; pings go out every third of the timeout of silence.
#[derive(Debug)]
pub struct Idle {
    server: Arc<Server>,
    timeout: Duration,
    last_heard: tokio::time::Instant,
    last_ping: tokio::time::Instant,
}

impl Idle {
    fn new(server: Arc<Server>, timeout: Duration) -> Idle {
        let now = tokio::time::Instant::now();
        Idle {
            server,
            timeout,
            last_heard: now,
            last_ping: now,
        }
    }

    pub fn heard(&mut self) {
        self.last_heard = tokio::time::Instant::now();
    }

    pub async fn next(&mut self) -> IdleEvent {
        let expire_at = self.last_heard + self.timeout;
        let ping_at = self.last_heard.max(self.last_ping) + self.timeout / 3;
        tokio::time::sleep_until(expire_at.min(ping_at)).await;
        let now = tokio::time::Instant::now();
        if now >= expire_at {
            self.server.ws_idle_closed.fetch_add(1, Ordering::Relaxed);
            debug!(server = self.server.name, "websocket closed for silence");
            IdleEvent::Expired
        } else {
            self.last_ping = now;
            IdleEvent::Ping
        }
    }
}

/// The close code and reason of an idle WebSocket.
pub const IDLE_CLOSE_CODE: u16 = 1001;
pub const IDLE_CLOSE_REASON: &str = "idle_timeout";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sec_4_limits_out_of_range_are_named() {
        assert_eq!(ServerLimits::default().check(), Ok(()));
        let zero = ServerLimits {
            max_connections: 0,
            ..ServerLimits::default()
        };
        assert!(zero.check().unwrap_err().contains("--max-connections"));
        let per_peer_over_total = ServerLimits {
            max_connections: 10,
            max_connections_per_peer: 11,
            ..ServerLimits::default()
        };
        assert!(per_peer_over_total
            .check()
            .unwrap_err()
            .contains("--max-connections-per-peer"));
        let no_timeout = ServerLimits {
            header_read_timeout: Duration::ZERO,
            ..ServerLimits::default()
        };
        assert!(no_timeout
            .check()
            .unwrap_err()
            .contains("--header-timeout-ms"));
        let huge = ServerLimits {
            ws_max_message_bytes: 64 * 1024 * 1024,
            ..ServerLimits::default()
        };
        assert!(huge.check().unwrap_err().contains("--ws-max-message-bytes"));
    }

    #[test]
    fn scale_5_ws_buffers_are_a_few_kib_and_below_the_write_bound() {
        let cell = WsBuffers::of(&DEFAULT_LIMITS);
        assert_eq!(
            cell,
            WsBuffers {
                read: 4096,
                write: 4096
            }
        );
        // A message bound under the chunk sizes the buffers to it.
        let small = ServerLimits {
            ws_max_message_bytes: 1_000,
            ..DEFAULT_LIMITS
        };
        assert_eq!(WsBuffers::of(&small).read, 1_000);
        // tungstenite's constraint holds for every accepted write bound, 1 included.
        for max_write in [1, 2, 3, 4096, 8191, 8192, 4 * MAX_MESSAGE_CEILING_BYTES] {
            let limits = ServerLimits {
                ws_max_write_buffer_bytes: max_write,
                ..DEFAULT_LIMITS
            };
            assert_eq!(limits.check(), Ok(()));
            let b = WsBuffers::of(&limits);
            assert!(b.write < max_write, "{b:?} at {max_write}");
            assert!(b.read >= 1 && b.read <= WS_BUFFER_CHUNK_BYTES, "{b:?}");
        }
    }
}
