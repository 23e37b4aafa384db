//! The supervisor driver: feeds the core's `Supervisor` with ticks, channel reports, open results
//! and directory updates, and executes what it decides — `Open` bounded by `UP_TIMEOUT_MS`
//! (make-before-break), `Close` — and logs its events as the production lines.
//!
//! Ticks come when the core asks for them, as quinn's connection driver does: after every input
//! the driver re-arms one sleep at [`Supervisor::poll_timeout`] and ticks the core when it fires
//! (no timer of its own, no fixed `CHECK_MS` grid; `None` means no tick at all). A tick that
//! fires late is given the instant it actually ran at.
//!
//! Counters are readable through [`ClientHandle::stats`] only: no network endpoint (FO-D11).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use switchyard_core::failover::{
    render_explained, ChannelAction, ChannelState, Event, OpenFailure, Output, RelayUrl, Skip,
    Stats, Supervisor, Thresholds,
};
use switchyard_core::MonoMs;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::channel::{
    self, Channel, ChannelConfig, ChannelReport, HeartbeatStats, OpenError, ReconnectConfig,
    WsStream,
};
use super::directory::{run_directory, DirectoryConfig, DirectoryUpdate};
use crate::journal::Journal;
use crate::stop::{Stop, StopListener};
use switchyard_core::failover::{FailoverEffect, FailoverInput, FailoverRecord};
use switchyard_core::journal::JournalRecord;

/// Lines kept for late subscribers of [`ClientHandle::subscribe_lines`].
const LINE_BUFFER: usize = 1024;
/// Channel reports and directory updates queued for the driver before senders wait.
const INPUT_QUEUE: usize = 64;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The supervisor's thresholds; the channel's heartbeat and its timeout are two of them
    /// (FO-X4).
    pub thresholds: Thresholds,
    /// How a channel reconnects (its heartbeat comes from `thresholds`).
    pub reconnect: ReconnectConfig,
    pub directory: DirectoryConfig,
    /// CONF-1: where the client journals its supervisor's inputs, outputs and the driver's
    /// effects ([`Journal::off`] by default), and under which key.
    pub journal: ClientJournal,
}

/// A client's journal and the key its lines carry (the client's name: several clients may
/// share one journal, `conform` judges each key on its own).
#[derive(Debug, Clone, Default)]
pub struct ClientJournal {
    pub journal: Journal,
    pub key: String,
}

/// A rendered event, with the instant it was decided at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub at: MonoMs,
    pub line: String,
}

/// A report of the client's channel to `url`, with the instant the driver received it (the drill
/// draws live and backoff spans from these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelMark {
    pub at: MonoMs,
    pub url: RelayUrl,
    pub state: ChannelState,
}

/// Receivers subscribed before the client's first decision: nothing it logs is missed (the
/// drill lost `[relay-attach]` lines by subscribing after the start, issue #26).
#[derive(Debug)]
pub struct Observer {
    pub lines: broadcast::Receiver<LogLine>,
    pub channels: broadcast::Receiver<ChannelMark>,
}

/// FO-H-3: whether the client has a live channel and, when it has none, why and since when.
/// The client's `/readyz`, its service manager status and its `ready` gauge all read this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// The live channel's URL; `None`: not ready.
    pub live: Option<RelayUrl>,
    /// Why not ready (empty when ready).
    pub reason: String,
    /// Since when the client is in this state (ready, or not ready for any reason).
    pub since: Instant,
    /// The same instant on the wall clock, in milliseconds since the Unix epoch (0 if the
    /// clock is before 1970).
    pub since_unix_ms: u64,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.live.is_some()
    }

    /// `ready: on <url> since <UTC>` or `not ready: <reason> since <UTC> (<s> s ago)`: the text
    /// of `/readyz` and of the service manager's `STATUS=`.
    pub fn describe(&self) -> String {
        let since = format_utc_ms(self.since_unix_ms);
        let ago = self.since.elapsed().as_secs_f64();
        match &self.live {
            Some(url) => format!("ready: relay channel to {url} live since {since}"),
            None => format!("not ready: {} since {since} ({ago:.1} s ago)", self.reason),
        }
    }

    /// While not ready, the reason and since when without the `not ready:` prefix (the
    /// `/readyz` probe adds its own); `None` while ready.
    pub fn why_not_ready(&self) -> Option<String> {
        let since = format_utc_ms(self.since_unix_ms);
        let ago = self.since.elapsed().as_secs_f64();
        self.live
            .is_none()
            .then(|| format!("{} since {since} ({ago:.1} s ago)", self.reason))
    }

    /// Whole seconds the client has not been ready (0 while ready).
    pub fn not_ready_seconds(&self) -> u64 {
        if self.is_ready() {
            0
        } else {
            self.since.elapsed().as_secs()
        }
    }
}

/// Milliseconds since the Unix epoch on the wall clock (0 before 1970).
fn unix_ms_now() -> u64 {
    crate::machine::unix_ms()
}

/// `unix_ms` as an RFC 3339 UTC time with milliseconds (`2026-01-31T12:34:56.789Z`).
#[must_use]
pub fn format_utc_ms(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (no negative days here).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
        unix_ms % 1000
    )
}

/// A running client: the supervisor, its channels and its directory feed.
#[derive(Debug)]
pub struct ClientHandle {
    stats: watch::Receiver<Stats>,
    candidates: watch::Receiver<usize>,
    readiness: watch::Receiver<Readiness>,
    heartbeat: watch::Receiver<Option<Arc<HeartbeatStats>>>,
    lines: broadcast::Sender<LogLine>,
    stop: Stop,
    task: Option<JoinHandle<()>>,
    directory: JoinHandle<()>,
    origin: Instant,
}

impl ClientHandle {
    /// Starts the client. The monotonic clock's origin is now.
    pub fn start(config: ClientConfig) -> ClientHandle {
        ClientHandle::start_observed(config).0
    }

    /// Starts the client with receivers of its lines and channel reports subscribed before it
    /// can decide anything, so even a `[relay-attach]` in its first instant is seen.
    pub fn start_observed(config: ClientConfig) -> (ClientHandle, Observer) {
        let origin = Instant::now();
        let (driver, parts) = Driver::new(
            Supervisor::new(config.thresholds, MonoMs::ZERO),
            ChannelConfig::new(&config.thresholds, config.reconnect),
            origin,
            config.journal,
        );
        let stop = Stop::new();
        let stop_rx = stop.listener();
        let (directory_tx, directory_rx) = mpsc::channel(INPUT_QUEUE);
        let directory =
            crate::machine::spawn(run_directory(config.directory.clone(), directory_tx));
        let task = crate::machine::spawn(driver.run(directory_rx, stop_rx));
        let handle = ClientHandle {
            stats: parts.stats,
            candidates: parts.candidates,
            readiness: parts.readiness,
            heartbeat: parts.heartbeat,
            lines: parts.lines,
            stop,
            task: Some(task),
            directory,
            origin,
        };
        (handle, parts.observer)
    }

    /// FO-D7: the counters, current URL and cooldown list, as of the last decision.
    pub fn stats(&self) -> Stats {
        self.stats.borrow().clone()
    }

    /// OPS-2: a receiver of every stats change (the probes read it).
    pub fn stats_watch(&self) -> watch::Receiver<Stats> {
        self.stats.clone()
    }

    /// Issue #27 point 9: how many relays the list in use holds; 0 until the directory gave a
    /// usable list (the client waits meanwhile: /readyz says so).
    pub fn candidates_watch(&self) -> watch::Receiver<usize> {
        self.candidates.clone()
    }

    /// FO-H-3: whether the client has a live channel, and if not why and since when (changes
    /// within the input that lost it: a channel report, a failed open, a tick).
    pub fn readiness_watch(&self) -> watch::Receiver<Readiness> {
        self.readiness.clone()
    }

    /// FO-H-3 now.
    pub fn readiness(&self) -> Readiness {
        self.readiness.borrow().clone()
    }

    /// FO-X4 / OPS-2: the heartbeat measurements of the current channel (`None` without one).
    pub fn heartbeat_watch(&self) -> watch::Receiver<Option<Arc<HeartbeatStats>>> {
        self.heartbeat.clone()
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
        self.stop.stop();
        self.directory.abort();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        self.stop.stop();
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
    channel_marks: broadcast::Sender<ChannelMark>,
    candidates: watch::Sender<usize>,
    /// Whether "no usable relay list yet" was logged (once per process: a list, once accepted,
    /// is only ever replaced by another non-empty one).
    warned_no_list: bool,
    journal: ClientJournal,
    /// The last state each channel reported (FO-H-3: the current one is live only while its
    /// last report is `Healthy`).
    channel_states: BTreeMap<RelayUrl, ChannelState>,
    readiness: watch::Sender<Readiness>,
    heartbeat: watch::Sender<Option<Arc<HeartbeatStats>>>,
    /// OPS-2: URLs whose open failed since a channel was last adopted; a repeat is logged at
    /// DEBUG, not WARN (with `COOLDOWN_MS=0` and every relay down each tick re-opens them).
    failing_opens: BTreeSet<RelayUrl>,
    /// Failed opens logged at DEBUG since the last adoption (for the INFO that ends them).
    repeated_failures: u64,
}

/// What a new driver hands its owner.
struct DriverParts {
    stats: watch::Receiver<Stats>,
    candidates: watch::Receiver<usize>,
    readiness: watch::Receiver<Readiness>,
    heartbeat: watch::Receiver<Option<Arc<HeartbeatStats>>>,
    lines: broadcast::Sender<LogLine>,
    observer: Observer,
}

impl Driver {
    /// A driver for `supervisor`, whose clock reads milliseconds since `origin`.
    fn new(
        supervisor: Supervisor,
        channel_config: ChannelConfig,
        origin: Instant,
        journal: ClientJournal,
    ) -> (Driver, DriverParts) {
        let (stats_tx, stats) = watch::channel(supervisor.stats(MonoMs::ZERO));
        let (lines, lines_rx) = broadcast::channel(LINE_BUFFER);
        let (channel_marks, channels_rx) = broadcast::channel(LINE_BUFFER);
        let (candidates_tx, candidates) = watch::channel(supervisor.candidates().len());
        let (readiness_tx, readiness) = watch::channel(Readiness {
            live: None,
            reason: "starting: no relay channel yet".to_owned(),
            since: Instant::now(),
            since_unix_ms: unix_ms_now(),
        });
        let (heartbeat_tx, heartbeat) = watch::channel(None);
        let driver = Driver {
            supervisor,
            channel_config,
            channels: BTreeMap::new(),
            opening: None,
            origin,
            stats: stats_tx,
            lines: lines.clone(),
            channel_marks,
            candidates: candidates_tx,
            warned_no_list: false,
            journal,
            channel_states: BTreeMap::new(),
            readiness: readiness_tx,
            heartbeat: heartbeat_tx,
            failing_opens: BTreeSet::new(),
            repeated_failures: 0,
        };
        let thresholds = *driver.supervisor.thresholds();
        driver.record(MonoMs::ZERO, || FailoverRecord::Start { thresholds });
        let parts = DriverParts {
            stats,
            candidates,
            readiness,
            heartbeat,
            lines,
            observer: Observer {
                lines: lines_rx,
                channels: channels_rx,
            },
        };
        (driver, parts)
    }

    fn now(&self) -> MonoMs {
        mono_since(self.origin)
    }

    /// The instant of the core's next deadline, or `None` when it wants no tick (or the
    /// deadline lies past what the clock can hold).
    fn deadline(&self) -> Option<Instant> {
        let at = self.supervisor.poll_timeout()?;
        self.origin.checked_add(Duration::from_millis(at.0))
    }

    async fn run(mut self, mut directory: mpsc::Receiver<DirectoryUpdate>, mut stop: StopListener) {
        let (report_tx, mut reports) = mpsc::channel::<ChannelReport>(INPUT_QUEUE);
        // One sleep, re-armed after every input at the core's next deadline.
        let mut deadline = self.deadline();
        let sleep = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now));
        tokio::pin!(sleep);
        loop {
            // The instant of the input: the lines it leads to are stamped with it.
            let now = tokio::select! {
                biased;
                () = stop.stopped() => break,
                () = &mut sleep, if deadline.is_some() => {
                    let now = self.now();
                    let jitter_ms = self.probe_jitter_ms();
                    self.record(now, || FailoverRecord::Input(FailoverInput::Tick { jitter_ms }));
                    self.supervisor.set_probe_jitter_ms(jitter_ms);
                    self.supervisor.handle_tick(now);
                    self.warn_once_without_a_list();
                    now
                }
                Some(report) = reports.recv() => {
                    let now = self.now();
                    let _ = self.channel_marks.send(ChannelMark {
                        at: now,
                        url: report.url.clone(),
                        state: report.state,
                    });
                    self.record(now, || FailoverRecord::Input(FailoverInput::ChannelState {
                        url: report.url.clone(),
                        state: report.state,
                    }));
                    if self.channels.contains_key(&report.url) {
                        self.channel_states.insert(report.url.clone(), report.state);
                    }
                    self.supervisor.handle_channel_state(now, &report.url, report.state);
                    now
                }
                Some(update) = directory.recv() => {
                    let now = self.now();
                    self.record(now, || FailoverRecord::Input(FailoverInput::Directory {
                        urls: update.relays.clone(),
                        source: update.source,
                    }));
                    self.supervisor.handle_directory(now, &update.relays, update.source);
                    now
                }
                result = wait_open(&mut self.opening), if self.opening.is_some() => {
                    let url = self.opening.take().map(|(url, _)| url).expect("guarded by is_some");
                    let now = self.now();
                    match result {
                        Ok(stream) => {
                            self.record(now, || FailoverRecord::Input(FailoverInput::OpenSucceeded { url: url.clone() }));
                            if self.supervisor.handle_open_succeeded(now, &url) {
                                self.record(now, || FailoverRecord::Effect(FailoverEffect::Adopted { url: url.clone() }));
                                let channel = Channel::spawn(url.clone(), stream, self.channel_config, report_tx.clone());
                                // Opened just now: live until it reports otherwise.
                                self.channel_states.insert(url.clone(), ChannelState::Healthy);
                                self.channels.insert(url, channel);
                            }
                        }
                        Err(error) => {
                            if let OpenError::TaskEnded { .. } = error {
                                tracing::warn!(url = %url, %error, "open failed: its task ended without a result");
                            } else {
                                tracing::debug!(url = %url, %error, "open failed");
                            }
                            let failure = open_failure(&error);
                            self.record(now, || FailoverRecord::Input(FailoverInput::OpenFailed { url: url.clone(), failure }));
                            self.supervisor.handle_open_failed(now, &url, failure);
                        }
                    }
                    now
                }
            };
            self.execute(now);
            deadline = self.deadline();
            if let Some(at) = deadline {
                if at != sleep.deadline() {
                    sleep.as_mut().reset(at);
                }
            }
        }
        if let Some((_, task)) = self.opening.take() {
            task.abort();
        }
        for (_, channel) in std::mem::take(&mut self.channels) {
            channel.close();
        }
        self.journal.journal.flush();
    }

    /// CONF-1: journals what `record` builds (only when the journal is on).
    fn record(&self, at: MonoMs, record: impl FnOnce() -> FailoverRecord) {
        self.journal
            .journal
            .record(&self.journal.key, at, || JournalRecord::Failover(record()));
    }

    /// FO-X3: a random shortening of the next probe interval, uniform up to a quarter of it, so
    /// clients that lost their relays together do not probe in step. The core clamps it.
    fn probe_jitter_ms(&self) -> u64 {
        let thresholds = self.supervisor.thresholds();
        let rounds_failed = self.supervisor.probe_schedule().rounds_failed();
        let quarter_ms = thresholds.probe_interval_ms(rounds_failed) / 4;
        let mut bytes = [0u8; 8];
        // Without randomness the interval is simply not shortened.
        match crate::machine::fill_random(&mut bytes) {
            Ok(()) => u64::from_le_bytes(bytes) % (quarter_ms + 1),
            Err(_) => 0,
        }
    }

    /// Issue #27 point 9: a client whose directory has given no usable list (unreadable,
    /// refused) stays up and waits for one; the operator is told so once, at WARN.
    fn warn_once_without_a_list(&mut self) {
        if self.warned_no_list || !self.supervisor.candidates().is_empty() {
            return;
        }
        self.warned_no_list = true;
        tracing::warn!(
            "no usable relay list yet: the client waits for the directory to give one (no channel until then; /readyz answers 503)"
        );
    }

    /// Executes every output of the input made at `now`, in order, then publishes the stats.
    fn execute(&mut self, now: MonoMs) {
        while let Some(output) = self.supervisor.poll_output() {
            self.record(now, || FailoverRecord::Output(output.clone()));
            match output {
                Output::Action(ChannelAction::Open {
                    url, timeout_ms, ..
                }) => {
                    let target = url.clone();
                    self.record(now, || {
                        FailoverRecord::Effect(FailoverEffect::OpenStarted { url: url.clone() })
                    });
                    let task = crate::machine::spawn(async move {
                        channel::open(&target, Duration::from_millis(timeout_ms)).await
                    });
                    if let Some((stale_url, stale)) = self.opening.replace((url, task)) {
                        // The core allows one open in flight; a second would be a core bug.
                        stale.abort();
                        tracing::error!(url = %stale_url, "core asked for a second open while one was in flight");
                    }
                }
                Output::Action(ChannelAction::Close { url }) => {
                    self.channel_states.remove(&url);
                    if let Some(channel) = self.channels.remove(&url) {
                        self.record(now, || {
                            FailoverRecord::Effect(FailoverEffect::Closed { url: url.clone() })
                        });
                        channel.close();
                    }
                }
                Output::Event(event) => self.log(now, &event),
            }
        }
        let candidates = self.supervisor.candidates().len();
        self.candidates
            .send_if_modified(|old| std::mem::replace(old, candidates) != candidates);
        let stats = self.supervisor.stats(self.now());
        self.stats.send_if_modified(|old| {
            let changed = *old != stats;
            *old = stats;
            changed
        });
        self.publish_readiness();
    }

    /// FO-H-3: ready exactly while the current channel is live (its last report `Healthy`);
    /// otherwise the reason. `since` moves only when readiness flips, not when only the reason
    /// changes (a reconnect attempt failing again is the same outage).
    fn publish_readiness(&mut self) {
        let current = self.supervisor.current().cloned();
        let current_state = current
            .as_ref()
            .filter(|url| self.channels.contains_key(*url))
            .and_then(|url| self.channel_states.get(url).copied());
        let (live, reason) = match (&current, current_state) {
            (Some(url), Some(ChannelState::Healthy)) => (Some(url.clone()), String::new()),
            (Some(url), Some(ChannelState::Backoff { attempts })) => (
                None,
                format!(
                    "relay channel to {url} lost (reconnecting, attempt {})",
                    attempts.saturating_add(1)
                ),
            ),
            _ if self.supervisor.candidates().is_empty() => (
                None,
                "no relay list: the directory has given no usable signed list yet (the client waits and retries; the log names why)".to_owned(),
            ),
            _ => match &self.opening {
                Some((url, _)) => (
                    None,
                    format!("no relay channel: opening {url}"),
                ),
                None => (
                    None,
                    format!(
                        "no relay channel: none of the {} listed relays could be opened (every relay down or cooling)",
                        self.supervisor.candidates().len()
                    ),
                ),
            },
        };
        let heartbeat = live
            .as_ref()
            .and_then(|url| self.channels.get(url))
            .map(Channel::heartbeat);
        self.heartbeat.send_if_modified(|old| {
            let same = match (old.as_ref(), heartbeat.as_ref()) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same {
                old.clone_from(&heartbeat);
            }
            !same
        });
        self.readiness.send_if_modified(|old| {
            if old.live == live && old.reason == reason {
                return false;
            }
            if old.is_ready() != live.is_some() || old.live != live {
                old.since = Instant::now();
                old.since_unix_ms = unix_ms_now();
            }
            // The cause was logged at WARN where it happened (the channel, the open, the
            // directory): the readiness flip itself is INFO.
            if old.is_ready() && live.is_none() {
                tracing::info!("not ready: {reason}");
            } else if !old.is_ready() && live.is_some() {
                if let Some(url) = &live {
                    tracing::info!(url = %url, "ready: relay channel to {url} live");
                }
            }
            old.live = live;
            old.reason = reason;
            true
        });
    }

    fn log(&mut self, now: MonoMs, event: &Event) {
        // EXPLAIN-1: drained right after the input made at `now`, so the core's explanation of
        // a no-candidate line is of the state that decided it.
        let line = render_explained(event, &self.supervisor, now);
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
            // OPS-2: once per state change. The first failed open of a URL is a WARN; the same
            // URL failing again with no channel adopted in between is a DEBUG (with
            // `COOLDOWN_MS=0` and every relay down, each tick re-opens every URL).
            Event::Skipped(Skip::OpenFailed { url, .. }) => {
                if self.failing_opens.insert(url.clone()) {
                    tracing::warn!(url = %url, "{line}");
                } else {
                    self.repeated_failures = self.repeated_failures.saturating_add(1);
                    tracing::debug!(url = %url, "{line}");
                }
            }
            Event::Skipped(_) => tracing::warn!("{line}"),
        }
        if matches!(event, Event::Switched(_) | Event::Attached { .. }) {
            let failing = std::mem::take(&mut self.failing_opens);
            // The end of a state whose repeats were kept at DEBUG, said once. (One failed open
            // followed by a switch needs no more: the switch line says it.)
            if self.repeated_failures > 0 {
                tracing::info!(
                    urls = failing.len(),
                    repeated = self.repeated_failures,
                    "a relay channel is up again after failed opens of {} URLs ({} repeats logged at DEBUG)",
                    failing.len(),
                    self.repeated_failures
                );
                self.repeated_failures = 0;
            }
        }
        self.send_line(now, line);
    }

    fn send_line(&self, at: MonoMs, line: String) {
        let _ = self.lines.send(LogLine { at, line });
    }
}

/// The core's kind of an open failure: only a timeout is `TimedOut`; a refusal, a reset, a
/// rejected handshake and an open task that ended without a result (it panicked or was
/// cancelled) all failed before the timeout, so they are `Failed`.
fn open_failure(error: &OpenError) -> OpenFailure {
    match error {
        OpenError::TimedOut { .. } => OpenFailure::TimedOut,
        OpenError::Failed(_) | OpenError::TaskEnded { .. } => OpenFailure::Failed,
    }
}

async fn wait_open(
    opening: &mut Option<(RelayUrl, JoinHandle<Result<WsStream, OpenError>>)>,
) -> Result<WsStream, OpenError> {
    match opening {
        Some((_, task)) => match task.await {
            Ok(result) => result,
            // What happened, not a timeout that never was (issue #26).
            Err(join) => Err(OpenError::TaskEnded {
                reason: if join.is_panic() {
                    "panicked"
                } else {
                    "was cancelled"
                },
            }),
        },
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver with no directory whose core started `core_now` into the driver's clock: every
    /// tick finds no channel and no candidate, so each tick shows in the counters (and the
    /// first in a `[relay-skip]` line).
    fn driver_started_at(
        thresholds: Thresholds,
        core_now: MonoMs,
    ) -> (DriverParts, Stop, mpsc::Sender<DirectoryUpdate>, Instant) {
        let supervisor = Supervisor::new(thresholds, core_now);
        let origin = Instant::now();
        let (driver, parts) = Driver::new(
            supervisor,
            ChannelConfig::default(),
            origin,
            ClientJournal::default(),
        );
        let stop = Stop::new();
        let stop_rx = stop.listener();
        let (directory_tx, directory_rx) = mpsc::channel(INPUT_QUEUE);
        crate::machine::spawn(driver.run(directory_rx, stop_rx));
        (parts, stop, directory_tx, origin)
    }

    /// Issue #26: the driver ticked on its own `CHECK_MS` interval and ignored the core's
    /// `poll_timeout()`. A sleep never ends early, so every tick must come at or after the
    /// deadline the core gave; on a fixed grid the first tick came at 100 ms, before it.
    #[tokio::test]
    async fn fo_x3a_the_driver_ticks_at_the_cores_deadline_not_on_a_check_ms_grid() {
        let thresholds = Thresholds {
            check_ms: 100,
            grace_ms: 1,
            ..Thresholds::default()
        };
        // The core's first deadline is 70 ms off the CHECK_MS grid of the driver's clock.
        assert_eq!(
            Supervisor::new(thresholds, MonoMs(70)).poll_timeout(),
            Some(MonoMs(170))
        );
        let (mut parts, stop, _directory, _origin) = driver_started_at(thresholds, MonoMs(70));
        let first = parts.observer.lines.recv().await.expect("a line");
        assert!(
            first.line.starts_with("[relay-skip] no channel"),
            "{first:?}"
        );
        assert!(
            first.at >= MonoMs(170),
            "the first tick came at {}, before the core's deadline 170",
            first.at
        );
        // Each later tick is where the core put it after the one before: CHECK_MS later. (A
        // line carries the instant of the tick that decided it; GRACE_MS=1 logs every tick.)
        let mut last = first.at;
        for _ in 0..3 {
            let next = parts.observer.lines.recv().await.expect("a line");
            assert!(
                next.at >= last.plus_ms(100),
                "a tick at {}, the core's deadline was {}",
                next.at,
                last.plus_ms(100)
            );
            last = next.at;
        }
        assert!(parts.stats.borrow().counters.no_candidate_checks >= 4);
        stop.stop();
    }

    #[tokio::test]
    async fn fo_h_2_the_driver_does_not_tick_when_the_core_wants_no_tick() {
        // MIN_ATTEMPTS=0: the supervisor is off and poll_timeout() is None.
        let thresholds = Thresholds {
            min_attempts: 0,
            check_ms: 10,
            ..Thresholds::default()
        };
        assert_eq!(
            Supervisor::new(thresholds, MonoMs::ZERO).poll_timeout(),
            None
        );
        let (mut parts, stop, _directory, _origin) = driver_started_at(thresholds, MonoMs::ZERO);
        // A hundred CHECK_MS later: not one tick.
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(parts.stats.borrow().counters.no_candidate_checks, 0);
        assert!(parts.observer.lines.try_recv().is_err());
        stop.stop();
    }

    #[tokio::test]
    async fn fo_d7_an_open_task_that_ends_without_a_result_is_failed_not_timed_out() {
        let cancelled =
            crate::machine::spawn(std::future::pending::<Result<WsStream, OpenError>>());
        cancelled.abort();
        let mut opening = Some((RelayUrl::new("ws://127.0.0.1:9/r"), cancelled));
        let error = wait_open(&mut opening).await.expect_err("no stream");
        assert_eq!(
            error.to_string(),
            "the open task was cancelled before it had a result"
        );
        assert_eq!(open_failure(&error), OpenFailure::Failed);

        fn open_that_panics() -> Result<WsStream, OpenError> {
            panic!("this open task panics on purpose")
        }
        let panicked = crate::machine::spawn(async { open_that_panics() });
        let mut opening = Some((RelayUrl::new("ws://127.0.0.1:9/r"), panicked));
        let error = wait_open(&mut opening).await.expect_err("no stream");
        assert_eq!(
            error.to_string(),
            "the open task panicked before it had a result"
        );
        assert_eq!(open_failure(&error), OpenFailure::Failed);

        // Only a real timeout is one.
        let timed_out = OpenError::TimedOut { timeout_ms: 5 };
        assert_eq!(open_failure(&timed_out), OpenFailure::TimedOut);
    }

    #[tokio::test]
    async fn fo_d7_a_refused_open_is_failed() {
        // Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
        let error = channel::open(&RelayUrl::new("ws://127.0.0.1:9/r"), Duration::from_secs(5))
            .await
            .expect_err("refused");
        assert!(matches!(error, OpenError::Failed(_)), "{error}");
        assert_eq!(open_failure(&error), OpenFailure::Failed);
    }
}
