//! The supervisor driver: feeds the core's `Supervisor` with ticks (every `CHECK_MS`), channel
//! reports, open results and directory updates, and executes what it decides — `Open` bounded by
//! `UP_TIMEOUT_MS` (make-before-break), `Close` — and logs its events as the production lines.
//!
//! Counters are readable through [`ClientHandle::stats`] only: no network endpoint (FO-D11).

use std::collections::BTreeMap;
use std::time::Duration;

use switchyard_core::failover::{
    render, Action, Event, OpenFailure, Output, RelayUrl, Stats, Supervisor, Thresholds,
};
use switchyard_core::MonoMs;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::channel::{self, Channel, ChannelConfig, ChannelReport, OpenError, WsStream};
use super::directory::{run_directory, DirectoryConfig, DirectoryUpdate};

/// Lines kept for late subscribers of [`ClientHandle::subscribe_lines`].
const LINE_BUFFER: usize = 1024;
/// Channel reports and directory updates queued for the driver before senders wait.
const INPUT_QUEUE: usize = 64;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub thresholds: Thresholds,
    pub channel: ChannelConfig,
    pub directory: DirectoryConfig,
}

/// A rendered event, with the instant it was decided at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub at: MonoMs,
    pub line: String,
}

/// A running client: the supervisor, its channels and its directory feed.
#[derive(Debug)]
pub struct ClientHandle {
    stats: watch::Receiver<Stats>,
    lines: broadcast::Sender<LogLine>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    directory: JoinHandle<()>,
    origin: Instant,
}

impl ClientHandle {
    /// Starts the client. The monotonic clock's origin is now.
    pub fn start(config: ClientConfig) -> ClientHandle {
        let origin = Instant::now();
        let (stats_tx, stats) = watch::channel(Stats {
            counters: Default::default(),
            current: None,
            cooldown: Vec::new(),
        });
        let (lines, _) = broadcast::channel(LINE_BUFFER);
        let (stop, stop_rx) = watch::channel(false);
        let (directory_tx, directory_rx) = mpsc::channel(INPUT_QUEUE);
        let directory = tokio::spawn(run_directory(config.directory.clone(), directory_tx));
        let driver = Driver {
            supervisor: Supervisor::new(config.thresholds, MonoMs::ZERO),
            channel_config: config.channel,
            channels: BTreeMap::new(),
            opening: None,
            origin,
            stats: stats_tx,
            lines: lines.clone(),
        };
        let task = tokio::spawn(driver.run(directory_rx, stop_rx));
        ClientHandle {
            stats,
            lines,
            stop,
            task: Some(task),
            directory,
            origin,
        }
    }

    /// FO-D7: the counters, current URL and cooldown list, as of the last decision.
    pub fn stats(&self) -> Stats {
        self.stats.borrow().clone()
    }

    /// OPS-2: a receiver of every stats change (the probes read it).
    pub fn stats_watch(&self) -> watch::Receiver<Stats> {
        self.stats.clone()
    }

    /// Every rendered `[relay-switch]` / `[relay-skip]` / `[relay-attach]` line from now on.
    pub fn subscribe_lines(&self) -> broadcast::Receiver<LogLine> {
        self.lines.subscribe()
    }

    /// Waits for the next stats change.
    pub async fn changed(&mut self) -> bool {
        self.stats.changed().await.is_ok()
    }

    /// The client's clock: milliseconds since it started.
    pub fn now(&self) -> MonoMs {
        mono_since(self.origin)
    }

    /// Stops the client: closes its channels and its directory feed.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        self.directory.abort();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.directory.abort();
    }
}

fn mono_since(origin: Instant) -> MonoMs {
    MonoMs(u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX))
}

struct Driver {
    supervisor: Supervisor,
    channel_config: ChannelConfig,
    channels: BTreeMap<RelayUrl, Channel>,
    opening: Option<(RelayUrl, JoinHandle<Result<WsStream, OpenError>>)>,
    origin: Instant,
    stats: watch::Sender<Stats>,
    lines: broadcast::Sender<LogLine>,
}

impl Driver {
    fn now(&self) -> MonoMs {
        mono_since(self.origin)
    }

    async fn run(
        mut self,
        mut directory: mpsc::Receiver<DirectoryUpdate>,
        mut stop: watch::Receiver<bool>,
    ) {
        let (report_tx, mut reports) = mpsc::channel::<ChannelReport>(INPUT_QUEUE);
        let check = Duration::from_millis(self.supervisor.thresholds().check_ms);
        let mut ticks = tokio::time::interval_at(Instant::now() + check, check);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = super::stopped(&mut stop) => break,
                _ = ticks.tick(), if self.supervisor.thresholds().supervisor_enabled() => {
                    let now = self.now();
                    self.supervisor.set_probe_jitter_ms(self.probe_jitter_ms());
                    self.supervisor.handle_tick(now);
                }
                Some(report) = reports.recv() => {
                    let now = self.now();
                    self.supervisor.handle_channel_state(now, &report.url, report.state);
                }
                Some(update) = directory.recv() => {
                    let now = self.now();
                    self.supervisor.handle_directory(now, &update.relays, update.source);
                }
                result = wait_open(&mut self.opening), if self.opening.is_some() => {
                    let url = self.opening.take().map(|(url, _)| url).expect("guarded by is_some");
                    let now = self.now();
                    match result {
                        Ok(stream) => {
                            if self.supervisor.handle_open_succeeded(now, &url) {
                                let channel = Channel::spawn(url.clone(), stream, self.channel_config, report_tx.clone());
                                self.channels.insert(url, channel);
                            }
                        }
                        Err(error) => {
                            let failure = match error {
                                OpenError::TimedOut { .. } => OpenFailure::TimedOut,
                                OpenError::Failed(_) => OpenFailure::Failed,
                            };
                            tracing::debug!(url = %url, %error, "open failed");
                            self.supervisor.handle_open_failed(now, &url, failure);
                        }
                    }
                }
            }
            self.execute();
        }
        if let Some((_, task)) = self.opening.take() {
            task.abort();
        }
        for (_, channel) in std::mem::take(&mut self.channels) {
            channel.close();
        }
    }

    /// FO-X3: a random shortening of the next probe interval, uniform up to a quarter of it, so
    /// clients that lost their relays together do not probe in step. The core clamps it.
    fn probe_jitter_ms(&self) -> u64 {
        let thresholds = self.supervisor.thresholds();
        let rounds_failed = self.supervisor.probe_schedule().rounds_failed;
        let quarter_ms = thresholds.probe_interval_ms(rounds_failed) / 4;
        let mut bytes = [0u8; 8];
        // Without randomness the interval is simply not shortened.
        match getrandom::fill(&mut bytes) {
            Ok(()) => u64::from_le_bytes(bytes) % (quarter_ms + 1),
            Err(_) => 0,
        }
    }

    /// Executes every output of the last input, in order, then publishes the stats.
    fn execute(&mut self) {
        while let Some(output) = self.supervisor.poll_output() {
            match output {
                Output::Action(Action::Open {
                    url, timeout_ms, ..
                }) => {
                    let target = url.clone();
                    let task = tokio::spawn(async move {
                        channel::open(&target, Duration::from_millis(timeout_ms)).await
                    });
                    if let Some((stale_url, stale)) = self.opening.replace((url, task)) {
                        // The core allows one open in flight; a second would be a core bug.
                        stale.abort();
                        tracing::error!(url = %stale_url, "core asked for a second open while one was in flight");
                    }
                }
                Output::Action(Action::Close { url }) => {
                    if let Some(channel) = self.channels.remove(&url) {
                        channel.close();
                    }
                }
                Output::Event(event) => self.log(&event),
            }
        }
        let stats = self.supervisor.stats(self.now());
        self.stats.send_if_modified(|old| {
            let changed = *old != stats;
            *old = stats;
            changed
        });
    }

    fn log(&self, event: &Event) {
        let line = render(event);
        match event {
            Event::Switched(record) => tracing::info!(
                seq = record.seq,
                from = %record.from,
                to = %record.to,
                origin = record.origin.as_str(),
                exempt = record.exemption.is_some(),
                probe = record.probe,
                open_took_ms = record.open_took_ms,
                "{line}"
            ),
            Event::Attached { url, .. } => tracing::info!(url = %url, "{line}"),
            Event::Skipped(_) => tracing::warn!("{line}"),
        }
        let _ = self.lines.send(LogLine {
            at: self.now(),
            line,
        });
    }
}

async fn wait_open(
    opening: &mut Option<(RelayUrl, JoinHandle<Result<WsStream, OpenError>>)>,
) -> Result<WsStream, OpenError> {
    match opening {
        Some((_, task)) => match task.await {
            Ok(result) => result,
            Err(_) => Err(OpenError::TimedOut { timeout_ms: 0 }),
        },
        None => std::future::pending().await,
    }
}
