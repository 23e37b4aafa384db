//! The manager's channel to one relay URL: heartbeat, reconnect with jittered exponential
//! backoff, and a report to the supervisor each time its state changes.
//!
//! The channel decides nothing about switching: it only says whether it is healthy and how many
//! reconnects have failed since it left healthy.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::{SinkExt, StreamExt};
use switchyard_core::failover::{ChannelState, RelayUrl, Thresholds};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::relay::{HEARTBEAT_PING, HEARTBEAT_PONG};
use crate::stop::{Stop, StopListener};

pub type WsStream = WebSocketStream<crate::net::TcpStream>;

/// Reconnect delays in the manner of gRPC's connection backoff: exponential from `min_delay`
/// by `factor` up to `max_delay`, with jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    pub min_delay: Duration,
    pub max_delay: Duration,
    pub factor: f32,
    pub jitter: bool,
}

impl Default for BackoffConfig {
    /// gRPC's defaults, less the 20 s minimum connect timeout (ours is `connect_timeout`).
    fn default() -> Self {
        BackoffConfig {
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(120),
            factor: 1.6,
            jitter: true,
        }
    }
}

impl BackoffConfig {
    fn delays(&self) -> impl Iterator<Item = Duration> {
        let builder = ExponentialBuilder::new()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(self.factor)
            .without_max_times();
        let builder = if self.jitter {
            // Seeded from the machine (a simulation's generator decides it too).
            builder
                .with_jitter()
                .with_jitter_seed(crate::machine::jitter_seed())
        } else {
            builder
        };
        builder.build()
    }
}

/// How a channel reconnects: what the thresholds do not set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReconnectConfig {
    /// Bound of each reconnect attempt.
    pub connect_timeout: Duration,
    pub backoff: BackoffConfig,
}

impl Default for ReconnectConfig {
    fn default() -> Self {
        ReconnectConfig {
            connect_timeout: Duration::from_secs(12),
            backoff: BackoffConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelConfig {
    /// How often the channel sends a heartbeat ping (`RELAY_FAILOVER_HEARTBEAT_MS`).
    pub heartbeat: Duration,
    /// FO-X4: how long after the last pong answering one of our pings the channel counts as
    /// lost (`RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS`). Nothing else the relay sends counts.
    pub heartbeat_timeout: Duration,
    /// Bound of each reconnect attempt.
    pub connect_timeout: Duration,
    pub backoff: BackoffConfig,
}

impl ChannelConfig {
    /// FO-X4: the heartbeat and its timeout from the thresholds, the rest from `reconnect`.
    #[must_use]
    pub fn new(thresholds: &Thresholds, reconnect: ReconnectConfig) -> ChannelConfig {
        ChannelConfig {
            heartbeat: Duration::from_millis(thresholds.heartbeat_ms.max(1)),
            heartbeat_timeout: Duration::from_millis(thresholds.heartbeat_timeout_ms.max(1)),
            connect_timeout: reconnect.connect_timeout,
            backoff: reconnect.backoff,
        }
    }

    /// FO-X4 / OPS-2: a heartbeat round trip at least this long marks the channel degraded
    /// (logged once, shown on `/metrics`): a quarter of the heartbeat interval.
    #[must_use]
    pub fn slow_round_trip(&self) -> Duration {
        self.heartbeat / 4
    }
}

impl Default for ChannelConfig {
    /// The production heartbeat (`Thresholds::default()`) and reconnect settings.
    fn default() -> Self {
        ChannelConfig::new(&Thresholds::default(), ReconnectConfig::default())
    }
}

/// FO-X4 / OPS-2: what a channel's heartbeat measured, readable while it runs (the client's
/// `/metrics` and the drill read it). Round trips are from a ping to the pong answering it.
#[derive(Debug, Default)]
pub struct HeartbeatStats {
    last_rtt_ms: AtomicU64,
    max_rtt_ms: AtomicU64,
    pongs: AtomicU64,
    slow: AtomicBool,
}

impl HeartbeatStats {
    /// The last round trip (0 before the first pong).
    pub fn last_rtt_ms(&self) -> u64 {
        self.last_rtt_ms.load(Ordering::Relaxed)
    }

    /// The longest round trip on this channel.
    pub fn max_rtt_ms(&self) -> u64 {
        self.max_rtt_ms.load(Ordering::Relaxed)
    }

    /// Pongs that answered our pings.
    pub fn pongs(&self) -> u64 {
        self.pongs.load(Ordering::Relaxed)
    }

    /// Whether the channel is degraded now: its round trips reached
    /// [`ChannelConfig::slow_round_trip`] (and have not fallen below half of it since).
    pub fn slow(&self) -> bool {
        self.slow.load(Ordering::Relaxed)
    }

    fn pong(&self, rtt: Duration) {
        let ms = u64::try_from(rtt.as_millis()).unwrap_or(u64::MAX);
        self.last_rtt_ms.store(ms, Ordering::Relaxed);
        self.max_rtt_ms.fetch_max(ms, Ordering::Relaxed);
        self.pongs.fetch_add(1, Ordering::Relaxed);
    }
}

/// A state change of one channel, for the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelReport {
    pub url: RelayUrl,
    pub state: ChannelState,
}

/// Why an open or reconnect failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("no WebSocket within {timeout_ms} ms")]
    TimedOut { timeout_ms: u64 },
    #[error("{0}")]
    Failed(#[from] tokio_tungstenite::tungstenite::Error),
    /// The task running the open ended without a result: it panicked or was cancelled.
    #[error("the open task {reason} before it had a result")]
    TaskEnded { reason: &'static str },
}

/// Opens a WebSocket to `url`, bounded by `timeout` (handshake included: a relay that accepts
/// TCP but never answers the upgrade times out rather than hanging).
pub async fn open(url: &RelayUrl, timeout: Duration) -> Result<WsStream, OpenError> {
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    match tokio::time::timeout(timeout, crate::net::ws_connect(url.as_str(), None)).await {
        Ok(Ok((stream, _response))) => Ok(stream),
        Ok(Err(error)) => Err(OpenError::Failed(error)),
        Err(_) => Err(OpenError::TimedOut { timeout_ms }),
    }
}

/// A running channel. Dropping it (or [`Channel::close`]) closes the socket and stops
/// reconnecting.
#[derive(Debug)]
pub struct Channel {
    url: RelayUrl,
    stop: Stop,
    task: JoinHandle<()>,
    heartbeat: Arc<HeartbeatStats>,
}

impl Channel {
    /// Takes over an already open socket (make-before-break) and keeps it alive.
    pub fn spawn(
        url: RelayUrl,
        established: WsStream,
        config: ChannelConfig,
        reports: mpsc::Sender<ChannelReport>,
    ) -> Channel {
        let stop = Stop::new();
        let stop_rx = stop.listener();
        let heartbeat = Arc::new(HeartbeatStats::default());
        let task = crate::machine::spawn(run(
            url.clone(),
            established,
            config,
            reports,
            stop_rx,
            heartbeat.clone(),
        ));
        Channel {
            url,
            stop,
            task,
            heartbeat,
        }
    }

    pub fn url(&self) -> &RelayUrl {
        &self.url
    }

    /// What the channel's heartbeat measured (round trips, whether it is degraded).
    pub fn heartbeat(&self) -> Arc<HeartbeatStats> {
        self.heartbeat.clone()
    }

    /// Closes the socket (with a close frame) and stops reconnecting.
    pub fn close(self) {
        self.stop.stop();
    }

    /// Whether the channel's task has ended (it was closed).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // The task sees the stop signal at its next await and ends by itself.
        self.stop.stop();
    }
}

async fn run(
    url: RelayUrl,
    established: WsStream,
    config: ChannelConfig,
    reports: mpsc::Sender<ChannelReport>,
    mut stop: StopListener,
    heartbeat: Arc<HeartbeatStats>,
) {
    let report = |state| {
        let reports = reports.clone();
        let url = url.clone();
        async move {
            // The supervisor may be gone during shutdown: nothing left to tell.
            let _ = reports.send(ChannelReport { url, state }).await;
        }
    };
    let mut socket = Some(established);
    loop {
        if let Some(stream) = socket.take() {
            report(ChannelState::Healthy).await;
            let lost = match stay_connected(stream, &config, &mut stop, &url, &heartbeat).await {
                Some(lost) => lost,
                None => return, // closed on purpose
            };
            // OPS-2: the state change an operator needs to see, once per outage, with its cause.
            tracing::warn!(url = %url, cause = %lost, "relay channel lost; reconnecting in backoff");
            report(ChannelState::Backoff { attempts: 0 }).await;
        }
        let mut delays = config.backoff.delays();
        let mut attempts: u32 = 0;
        while socket.is_none() {
            let delay = delays.next().unwrap_or(config.backoff.max_delay);
            tokio::select! {
                biased;
                () = stop.stopped() => return,
                () = tokio::time::sleep(delay) => {}
            }
            tokio::select! {
                biased;
                () = stop.stopped() => return,
                result = open(&url, config.connect_timeout) => match result {
                    Ok(stream) => {
                        if attempts > 0 {
                            tracing::info!(url = %url, attempts, "relay channel reconnected");
                        }
                        socket = Some(stream);
                    }
                    Err(error) => {
                        attempts = attempts.saturating_add(1);
                        // The first failure says why (once per outage); the rest are debug.
                        if attempts == 1 {
                            tracing::warn!(url = %url, %error, "relay reconnect failed; retrying with backoff");
                        } else {
                            tracing::debug!(url = %url, attempts, %error, "reconnect failed");
                        }
                        report(ChannelState::Backoff { attempts }).await;
                    }
                },
            }
        }
    }
}

/// Why a channel counts as lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// FO-X4: no pong answering one of our pings for the whole heartbeat timeout (a relay that
    /// went dark, both ways or one way).
    NoPong { timeout_ms: u64 },
    /// The relay closed the socket, or it failed (reset, protocol error).
    Closed,
    /// A ping could not be written.
    SendFailed,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::NoPong { timeout_ms } => write!(
                f,
                "no pong answering our heartbeat for {timeout_ms} ms (RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS)"
            ),
            Lost::Closed => f.write_str("the relay closed the socket or it failed"),
            Lost::SendFailed => f.write_str("a heartbeat could not be written"),
        }
    }
}

/// Pings not answered yet that a channel remembers (older ones cannot be answered in time
/// anyway: the timeout is a few heartbeats).
const MAX_OUTSTANDING_PINGS: usize = 64;

/// Heartbeats until the relay counts as lost (`Some(why)`) or the channel is closed (`None`).
///
/// FO-X4: the relay counts as alive only on a pong answering one of our own pings: its own
/// pings, its other frames and an unsolicited pong prove that bytes reach us, not that ours
/// reach it (with client-to-relay packets dropped, the relay's pings kept a channel "alive"
/// until the relay's idle close, 65 s). The channel is lost exactly
/// `heartbeat_timeout` after the last pong (after the start before the first): a deadline
/// timer, not a check at the next heartbeat tick; a ping that cannot be written in that time
/// does not hold it off.
async fn stay_connected(
    mut stream: WsStream,
    config: &ChannelConfig,
    stop: &mut StopListener,
    url: &RelayUrl,
    stats: &HeartbeatStats,
) -> Option<Lost> {
    use tokio::time::Instant;
    let mut heartbeat = tokio::time::interval(config.heartbeat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let timeout_ms = u64::try_from(config.heartbeat_timeout.as_millis()).unwrap_or(u64::MAX);
    let mut lost_at = Instant::now() + config.heartbeat_timeout;
    // When each unanswered ping was sent, oldest first: the relay answers in order.
    let mut outstanding: VecDeque<Instant> = VecDeque::new();
    let slow = config.slow_round_trip();
    loop {
        tokio::select! {
            biased;
            () = stop.stopped() => {
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.close(None)).await;
                return None;
            }
            () = tokio::time::sleep_until(lost_at) => return Some(Lost::NoPong { timeout_ms }),
            _ = heartbeat.tick() => {
                match tokio::time::timeout_at(lost_at, stream.send(Message::Text(HEARTBEAT_PING.into()))).await {
                    Ok(Ok(())) => {
                        if outstanding.len() == MAX_OUTSTANDING_PINGS {
                            outstanding.pop_front();
                        }
                        outstanding.push_back(Instant::now());
                    }
                    Ok(Err(_)) => return Some(Lost::SendFailed),
                    Err(_) => return Some(Lost::NoPong { timeout_ms }),
                }
            }
            frame = stream.next() => match frame {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return Some(Lost::Closed),
                Some(Ok(Message::Text(text))) if text.as_str() == HEARTBEAT_PONG => {
                    // A pong with no ping of ours outstanding answers nothing we sent.
                    if let Some(sent) = outstanding.pop_front() {
                        let now = Instant::now();
                        lost_at = now + config.heartbeat_timeout;
                        let rtt = now.saturating_duration_since(sent);
                        stats.pong(rtt);
                        note_round_trip(url, stats, rtt, slow);
                    }
                }
                // The relay's transport pings (the WebSocket layer answers them) and any other
                // frame say nothing about our pings reaching the relay; a garbage frame is
                // ignored, never fatal.
                Some(Ok(_)) => {}
            },
        }
    }
}

/// OPS-2: a degraded channel (slow heartbeat round trips: delay, loss that TCP hides by
/// retransmitting) is logged once when it starts (WARN) and once when it ends (INFO).
fn note_round_trip(url: &RelayUrl, stats: &HeartbeatStats, rtt: Duration, slow: Duration) {
    let rtt_ms = u64::try_from(rtt.as_millis()).unwrap_or(u64::MAX);
    let slow_ms = u64::try_from(slow.as_millis()).unwrap_or(u64::MAX);
    if rtt >= slow && !stats.slow.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            url = %url,
            rtt_ms,
            slow_ms,
            "relay channel degraded: heartbeat round trip {rtt_ms} ms (slow from {slow_ms} ms, a quarter of RELAY_FAILOVER_HEARTBEAT_MS); the channel is kept while it answers"
        );
    } else if rtt < slow / 2 && stats.slow.swap(false, Ordering::Relaxed) {
        tracing::info!(url = %url, rtt_ms, "relay channel no longer degraded: heartbeat round trip {rtt_ms} ms");
    }
}
