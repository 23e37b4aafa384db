//! The manager's channel to one relay URL: heartbeat, reconnect with jittered exponential
//! backoff, and a report to the supervisor each time its state changes.
//!
//! The channel decides nothing about switching: it only says whether it is healthy and how many
//! reconnects have failed since it left healthy.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::{SinkExt, StreamExt};
use switchyard_core::failover::{ChannelState, RelayUrl};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::relay::{HEARTBEAT_PING, HEARTBEAT_PONG};
use crate::stop::{Stop, StopListener};

pub type WsStream = WebSocketStream<MaybeTlsStream<TcpStream>>;

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
            builder.with_jitter()
        } else {
            builder
        };
        builder.build()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelConfig {
    /// How often the channel sends a heartbeat.
    pub heartbeat: Duration,
    /// How long without any frame from the relay before the channel counts as dead.
    pub heartbeat_timeout: Duration,
    /// Bound of each reconnect attempt.
    pub connect_timeout: Duration,
    pub backoff: BackoffConfig,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            heartbeat: Duration::from_secs(10),
            heartbeat_timeout: Duration::from_secs(25),
            connect_timeout: Duration::from_secs(12),
            backoff: BackoffConfig::default(),
        }
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
    match tokio::time::timeout(timeout, tokio_tungstenite::connect_async(url.as_str())).await {
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
        let task = tokio::spawn(run(url.clone(), established, config, reports, stop_rx));
        Channel { url, stop, task }
    }

    pub fn url(&self) -> &RelayUrl {
        &self.url
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
            if !stay_connected(stream, &config, &mut stop).await {
                return; // closed on purpose
            }
            // OPS-2: the state change an operator needs to see, once per outage.
            tracing::warn!(url = %url, "relay channel lost; reconnecting in backoff");
            report(ChannelState::Backoff { attempts: 0 }).await;
        }
        let mut delays = config.backoff.delays();
        let mut attempts: u32 = 0;
        while socket.is_none() {
            let delay = delays.next().unwrap_or(config.backoff.max_delay);
            tokio::select! {
                () = stop.stopped() => return,
                () = tokio::time::sleep(delay) => {}
            }
            tokio::select! {
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

/// Heartbeats until the socket dies (returns `true`) or the channel is closed (`false`).
async fn stay_connected(
    mut stream: WsStream,
    config: &ChannelConfig,
    stop: &mut StopListener,
) -> bool {
    let mut heartbeat = tokio::time::interval(config.heartbeat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_heard = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = stop.stopped() => {
                let _ = stream.close(None).await;
                return false;
            }
            _ = heartbeat.tick() => {
                if last_heard.elapsed() > config.heartbeat_timeout {
                    return true; // silent relay: half-open connection
                }
                if stream.send(Message::Text(HEARTBEAT_PING.into())).await.is_err() {
                    return true;
                }
            }
            frame = stream.next() => match frame {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return true,
                Some(Ok(Message::Text(text))) if text.as_str() == HEARTBEAT_PONG => {
                    last_heard = tokio::time::Instant::now();
                }
                // Anything else proves the relay is alive but means nothing to the channel:
                // a garbage frame is ignored, never fatal.
                Some(Ok(_)) => last_heard = tokio::time::Instant::now(),
            },
        }
    }
}
