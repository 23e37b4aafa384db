//! The seed's failover drills, run locally: real relays on 127.0.0.1 (host A serving two
//! candidate URLs, host B one), a real client, real sockets, scaled thresholds.
//!
//! Every scene starts from a clean slate (new relays, new client): the seed's `all` broke scene
//! 4 by carrying state across scenes.
//!
//! The scale: every threshold is the production value divided by 10 (`CHECK_MS` 200,
//! `GRACE_MS` 1500, `UP_TIMEOUT_MS` 1200, `DEADLINE_MS` 3000, `COOLDOWN_MS` 30000), and the
//! channel heartbeat/backoff are scaled alike, and so are the probe intervals (`PROBE_MIN_MS`
//! 1500, `PROBE_MAX_MS` 6000). Scene 4b shortens the cooldown to 4000 so its expiry fits the
//! drill; scene ctrl sets it to 0; scene 5 runs twice, the second time with `PROBE_MAX_MS=0`.
//! Production defaults apply everywhere else.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use switchyard_core::failover::{RelayUrl, Thresholds, EXEMPT_MARKER, SKIP_PREFIX, SWITCH_PREFIX};
use switchyard_core::MonoMs;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::channel::{BackoffConfig, ChannelConfig};
use super::directory::{self, DirectoryConfig, DirectoryPayload};
use super::driver::{ClientConfig, ClientHandle, LogLine};
use super::relay::{RelayConfig, RelayHandle};

/// A drill scene, as named in the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scene {
    S1,
    S2,
    S3,
    S4,
    S4b,
    Ctrl,
    S5,
}

impl Scene {
    pub const ALL: [Scene; 7] = [
        Scene::S1,
        Scene::S2,
        Scene::S3,
        Scene::S4,
        Scene::S4b,
        Scene::Ctrl,
        Scene::S5,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scene::S1 => "1",
            Scene::S2 => "2",
            Scene::S3 => "3",
            Scene::S4 => "4",
            Scene::S4b => "4b",
            Scene::Ctrl => "ctrl",
            Scene::S5 => "5",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Scene::S1 => "kill the relay in use => switch to the other host within DEADLINE_MS",
            Scene::S2 => "kill both relays => no switch, the [relay-skip] discriminator, bounded exemption, no storm",
            Scene::S3 => "after a switch, restore the first host => no switch back inside the cooldown",
            Scene::S4 => "stop A => B; restore A; stop B => the exemption brings the client back to A within DEADLINE_MS",
            Scene::S4b => "scene 4 with EXEMPT=0 and a short cooldown => skip line, no switch until the cooldown ends, then an unmarked switch",
            Scene::Ctrl => "scene 1 with COOLDOWN_MS=0 => still fails over (FO-X2)",
            Scene::S5 => "everything down, then one relay back => on it within PROBE_MAX_MS + CHECK_MS + UP_TIMEOUT_MS (FO-X3); the same with probing off stalls until the cooldown ends",
        }
    }

    fn thresholds(self) -> Thresholds {
        let scaled = drill_thresholds();
        match self {
            Scene::S4b => Thresholds {
                exempt: false,
                cooldown_ms: 4_000,
                ..scaled
            },
            Scene::Ctrl => Thresholds {
                cooldown_ms: 0,
                ..scaled
            },
            _ => scaled,
        }
    }
}

/// The production thresholds divided by 10.
pub fn drill_thresholds() -> Thresholds {
    let production = Thresholds::default();
    Thresholds {
        cooldown_ms: production.cooldown_ms / 10,
        deadline_ms: production.deadline_ms / 10,
        grace_ms: production.grace_ms / 10,
        min_attempts: production.min_attempts,
        check_ms: production.check_ms / 10,
        up_timeout_ms: production.up_timeout_ms / 10,
        exempt: production.exempt,
        probe_min_ms: production.probe_min_ms / 10,
        probe_max_ms: production.probe_max_ms / 10,
    }
}

/// The channel settings of the drill, scaled like the thresholds.
pub fn drill_channel() -> ChannelConfig {
    ChannelConfig {
        heartbeat: Duration::from_millis(500),
        heartbeat_timeout: Duration::from_millis(1_500),
        connect_timeout: Duration::from_millis(1_200),
        backoff: BackoffConfig {
            min_delay: Duration::from_millis(400),
            max_delay: Duration::from_millis(2_000),
            factor: 1.6,
            jitter: true,
        },
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    Skip,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        }
    }
}

#[derive(Debug, Clone)]
pub struct StepResult {
    pub id: String,
    pub verdict: Verdict,
    pub detail: String,
}

/// A measured switch: from the fault to the `[relay-switch]` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchTiming {
    pub took_ms: u64,
    pub deadline_ms: u64,
    /// The earliest the rules allow: the channel must be unhealthy for `GRACE_MS` (or fail
    /// `MIN_ATTEMPTS` reconnects, which the drill's backoff makes slower than the grace).
    pub lower_bound_ms: u64,
}

#[derive(Debug, Clone)]
pub struct SceneReport {
    pub scene: Scene,
    pub steps: Vec<StepResult>,
    pub lines: Vec<String>,
    pub timings: Vec<SwitchTiming>,
}

#[derive(Debug, Clone, Default)]
pub struct DrillReport {
    pub scenes: Vec<SceneReport>,
}

impl DrillReport {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.scenes
            .iter()
            .flat_map(|s| &s.steps)
            .filter(|step| step.verdict == verdict)
            .count()
    }

    pub fn failed(&self) -> bool {
        self.count(Verdict::Fail) > 0
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let t = drill_thresholds();
        let _ = writeln!(
            out,
            "# drill thresholds (production / 10): CHECK_MS={} GRACE_MS={} MIN_ATTEMPTS={} UP_TIMEOUT_MS={} DEADLINE_MS={} COOLDOWN_MS={} EXEMPT={} PROBE_MIN_MS={} PROBE_MAX_MS={}",
            t.check_ms, t.grace_ms, t.min_attempts, t.up_timeout_ms, t.deadline_ms, t.cooldown_ms, u8::from(t.exempt), t.probe_min_ms, t.probe_max_ms
        );
        for scene in &self.scenes {
            let _ = writeln!(
                out,
                "\n== scene {}: {} ==",
                scene.scene.name(),
                scene.scene.title()
            );
            for step in &scene.steps {
                let _ = writeln!(out, "{} {} {}", step.verdict.as_str(), step.id, step.detail);
            }
            let _ = writeln!(out, "-- raw lines:");
            for line in &scene.lines {
                let _ = writeln!(out, "  {line}");
            }
        }
        let _ = writeln!(
            out,
            "\n# {} PASS / {} FAIL / {} SKIP",
            self.count(Verdict::Pass),
            self.count(Verdict::Fail),
            self.count(Verdict::Skip)
        );
        out
    }
}

/// Runs `scenes` one after another, each from a clean start.
pub async fn run(scenes: &[Scene]) -> DrillReport {
    let mut report = DrillReport::default();
    for scene in scenes {
        report.scenes.push(run_scene(*scene).await);
    }
    report
}

const HOST_A_PATHS: [&str; 2] = ["/dshs-relay", "/relay-direct"];
const HOST_B_PATH: &str = "/dshs-relay";

/// Relays, a signed directory and a client for one scene.
struct Stage {
    a: Option<RelayHandle>,
    b: Option<RelayHandle>,
    a_addr: SocketAddr,
    b_addr: SocketAddr,
    urls: [RelayUrl; 3],
    client: ClientHandle,
    lines: broadcast::Receiver<super::driver::LogLine>,
    seen: Vec<String>,
    _dir: tempfile::TempDir,
    steps: Vec<StepResult>,
    timings: Vec<SwitchTiming>,
    thresholds: Thresholds,
}

#[derive(Debug, thiserror::Error)]
enum StageError {
    #[error("{0}")]
    Relay(#[from] super::relay::RelayError),
    #[error("drill set-up: {0}")]
    Setup(String),
}

impl Stage {
    async fn new(thresholds: Thresholds, refresh_after_seconds: u64) -> Result<Stage, StageError> {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let a = RelayHandle::start(RelayConfig::new(
            loopback,
            HOST_A_PATHS.iter().map(|p| (*p).to_owned()).collect(),
        ))
        .await?;
        let b =
            RelayHandle::start(RelayConfig::new(loopback, vec![HOST_B_PATH.to_owned()])).await?;
        let (a_addr, b_addr) = (a.local_addr(), b.local_addr());
        let urls = [
            RelayUrl::new(format!("ws://{a_addr}{}", HOST_A_PATHS[0])),
            RelayUrl::new(format!("ws://{a_addr}{}", HOST_A_PATHS[1])),
            RelayUrl::new(format!("ws://{b_addr}{HOST_B_PATH}")),
        ];
        let dir = tempfile::tempdir().map_err(|e| StageError::Setup(e.to_string()))?;
        let (secret, public) =
            directory::generate_key_pair().map_err(|e| StageError::Setup(e.to_string()))?;
        let key = directory::parse_secret_key("drill key", &secret)
            .map_err(|e| StageError::Setup(e.to_string()))?;
        let signed = directory::sign(
            &key,
            &DirectoryPayload {
                relays: urls.iter().map(|u| u.to_string()).collect(),
                refresh_after_seconds,
                // FO-S1: one list per stage, valid well past any scene.
                sequence: 1,
                expires_at_unix_s: directory::wall_clock_unix_s()
                    .unwrap_or(0)
                    .saturating_add(24 * 3600),
            },
        );
        let path: PathBuf = dir.path().join("directory.json");
        let json = serde_json::to_vec(&signed).map_err(|e| StageError::Setup(e.to_string()))?;
        std::fs::write(&path, json).map_err(|e| StageError::Setup(e.to_string()))?;
        let public = directory::parse_public_key("drill key", &public)
            .map_err(|e| StageError::Setup(e.to_string()))?;
        let client = ClientHandle::start(ClientConfig {
            thresholds,
            channel: drill_channel(),
            directory: DirectoryConfig::Signed { path, key: public },
        });
        let lines = client.subscribe_lines();
        Ok(Stage {
            a: Some(a),
            b: Some(b),
            a_addr,
            b_addr,
            urls,
            client,
            lines,
            seen: Vec::new(),
            _dir: dir,
            steps: Vec::new(),
            timings: Vec::new(),
            thresholds,
        })
    }

    fn step(&mut self, id: &str, verdict: Verdict, detail: impl Into<String>) {
        self.steps.push(StepResult {
            id: id.to_owned(),
            verdict,
            detail: detail.into(),
        });
    }

    fn current(&self) -> Option<RelayUrl> {
        self.client.stats().current
    }

    /// Waits until the client is on `url` or `limit` passes.
    async fn wait_current(&mut self, url: &RelayUrl, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            self.collect();
            if self.current().as_ref() == Some(url) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    fn collect(&mut self) -> Vec<LogLine> {
        let mut fresh = Vec::new();
        loop {
            match self.lines.try_recv() {
                Ok(line) => {
                    self.seen.push(line.line.clone());
                    fresh.push(line);
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                Err(_) => break,
            }
        }
        fresh
    }

    /// Collects lines for `window`, returning those that arrived in it.
    async fn observe(&mut self, window: Duration) -> Vec<String> {
        let until = Instant::now() + window;
        let mut lines = Vec::new();
        while Instant::now() < until {
            lines.extend(self.collect().into_iter().map(|l| l.line));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        lines.extend(self.collect().into_iter().map(|l| l.line));
        lines
    }

    /// Waits for the next `[relay-switch]` line, up to `limit`; returns it, how long it took,
    /// and when (on the client's clock) it was decided.
    async fn wait_switch_at(&mut self, limit: Duration) -> Option<(String, u64, MonoMs)> {
        let started = Instant::now();
        while started.elapsed() < limit {
            for line in self.collect() {
                if line.line.starts_with(SWITCH_PREFIX) {
                    let took = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    return Some((line.line, took, line.at));
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        None
    }

    async fn wait_switch(&mut self, limit: Duration) -> Option<(String, u64)> {
        self.wait_switch_at(limit)
            .await
            .map(|(line, took, _)| (line, took))
    }

    async fn stop_a(&mut self) {
        if let Some(a) = self.a.take() {
            a.stop().await;
        }
    }

    async fn stop_b(&mut self) {
        if let Some(b) = self.b.take() {
            b.stop().await;
        }
    }

    async fn restore_a(&mut self) -> Result<(), StageError> {
        self.a = Some(
            RelayHandle::start(RelayConfig::new(
                self.a_addr,
                HOST_A_PATHS.iter().map(|p| (*p).to_owned()).collect(),
            ))
            .await?,
        );
        Ok(())
    }

    async fn restore_b(&mut self) -> Result<(), StageError> {
        self.b = Some(
            RelayHandle::start(RelayConfig::new(self.b_addr, vec![HOST_B_PATH.to_owned()])).await?,
        );
        Ok(())
    }

    /// Scene 5's fault: both hosts down until the exemption budget is spent (the no-candidate
    /// line), then host B back. Returns how long after B came back the client sat on B.
    async fn everything_down_then_b_back(&mut self) -> Result<Result<u64, String>, StageError> {
        self.stop_a().await;
        self.stop_b().await;
        let spent_limit = self.deadline() * 3;
        let until = Instant::now() + spent_limit;
        let mut spent = false;
        while Instant::now() < until && !spent {
            spent = self
                .collect()
                .iter()
                .any(|l| l.line.contains("no other candidate in the chain"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !spent {
            return Ok(Err(format!(
                "the exemption budget was not spent within {} ms",
                spent_limit.as_millis()
            )));
        }
        // Into the probe schedule, so B comes back between probe rounds.
        tokio::time::sleep(Duration::from_millis(2 * self.thresholds.check_ms)).await;
        self.restore_b().await?;
        let back = Instant::now();
        let b = self.urls[2].clone();
        let limit = Duration::from_millis(self.thresholds.cooldown_ms) + self.deadline() * 3;
        if !self.wait_current(&b, limit).await {
            return Ok(Err(format!(
                "not on B within {} ms of it coming back",
                limit.as_millis()
            )));
        }
        Ok(Ok(
            u64::try_from(back.elapsed().as_millis()).unwrap_or(u64::MAX)
        ))
    }

    fn deadline(&self) -> Duration {
        Duration::from_millis(self.thresholds.deadline_ms)
    }

    /// Kills host A and judges the switch to B against the deadline and the lower bound.
    async fn kill_a_expect_switch_to_b(&mut self, id: &str) -> bool {
        self.stop_a().await;
        let deadline_ms = self.thresholds.deadline_ms;
        let lower_bound_ms = self.thresholds.grace_ms;
        // Watch past the deadline so a late switch is measured rather than missed.
        match self.wait_switch(self.deadline() * 3).await {
            Some((line, took_ms)) => {
                let timing = SwitchTiming {
                    took_ms,
                    deadline_ms,
                    lower_bound_ms,
                };
                self.timings.push(timing);
                let on_b = self.current().as_ref() == Some(&self.urls[2]);
                let ok = on_b && took_ms <= deadline_ms;
                let detail = format!(
                    "switch to the other host: {took_ms} ms (deadline {deadline_ms} ms, lower bound {lower_bound_ms} ms, ratio {:.2}) target {}",
                    took_ms as f64 / lower_bound_ms.max(1) as f64,
                    self.current().map(|u| u.to_string()).unwrap_or_default()
                );
                self.step(id, if ok { Verdict::Pass } else { Verdict::Fail }, detail);
                self.step(&format!("{id}-line"), Verdict::Pass, line);
                ok
            }
            None => {
                let detail = format!("no [relay-switch] within {} ms", deadline_ms * 3);
                self.step(id, Verdict::Fail, detail);
                false
            }
        }
    }

    async fn finish(mut self, scene: Scene) -> SceneReport {
        self.collect();
        let Stage {
            client,
            seen,
            steps,
            timings,
            a,
            b,
            ..
        } = self;
        client.stop().await;
        for relay in [a, b].into_iter().flatten() {
            relay.stop().await;
        }
        SceneReport {
            scene,
            steps,
            lines: seen,
            timings,
        }
    }
}

fn switch_and_skip_lines(lines: &[String]) -> (usize, usize) {
    let switches = lines
        .iter()
        .filter(|l| l.starts_with(SWITCH_PREFIX))
        .count();
    let skips = lines.iter().filter(|l| l.starts_with(SKIP_PREFIX)).count();
    (switches, skips)
}

/// Runs one scene from a clean start.
pub async fn run_scene(scene: Scene) -> SceneReport {
    // Scene 3 refreshes the directory every second so the directory path is seen to be held
    // back by the cooldown (FO-D1); elsewhere a refresh never lands inside a scene.
    let refresh = if scene == Scene::S3 { 1 } else { 600 };
    let mut stage = match Stage::new(scene.thresholds(), refresh).await {
        Ok(stage) => stage,
        Err(error) => {
            return SceneReport {
                scene,
                steps: vec![StepResult {
                    id: format!("{}-setup", scene.name()),
                    verdict: Verdict::Fail,
                    detail: error.to_string(),
                }],
                lines: Vec::new(),
                timings: Vec::new(),
            }
        }
    };
    let id = |step: &str| format!("{}-{step}", scene.name());
    let first = stage.urls[0].clone();
    if !stage.wait_current(&first, Duration::from_secs(5)).await {
        stage.step(
            &id("0"),
            Verdict::Fail,
            format!("client never attached to {first}"),
        );
        return stage.finish(scene).await;
    }
    stage.step(&id("0"), Verdict::Pass, format!("attached to {first}"));
    if let Err(error) = script(scene, &mut stage, &id).await {
        stage.step(&id("error"), Verdict::Fail, error.to_string());
    }
    stage.finish(scene).await
}

async fn script(
    scene: Scene,
    stage: &mut Stage,
    id: &dyn Fn(&str) -> String,
) -> Result<(), StageError> {
    match scene {
        Scene::S1 | Scene::Ctrl => {
            let b_accepted = stage.b.as_ref().map_or(0, RelayHandle::accepted_total);
            stage.kill_a_expect_switch_to_b(&id("A")).await;
            let up = stage.current().is_some();
            stage.step(&id("B"), verdict(up), "client still up (a current channel)");
            let b = stage.b.as_ref();
            let untouched = b.is_some_and(|b| b.open_channels() == 1)
                && b.map_or(0, RelayHandle::accepted_total) == b_accepted + 1;
            stage.step(
                &id("C"),
                verdict(untouched),
                "the other relay untouched: still listening, exactly our one channel",
            );
        }
        Scene::S2 => {
            stage.stop_a().await;
            stage.stop_b().await;
            let window = Duration::from_millis(stage.thresholds.grace_ms * 4);
            let lines = stage.observe(window).await;
            let (switches, _) = switch_and_skip_lines(&lines);
            stage.step(
                &id("A"),
                verdict(switches == 0),
                format!(
                    "{switches} switches in {} ms with both relays down",
                    window.as_millis()
                ),
            );
            let discriminator = lines
                .iter()
                .any(|l| l.contains("no other candidate in the chain"));
            stage.step(
                &id("B"),
                verdict(discriminator),
                "the [relay-skip] no-candidate discriminator appeared",
            );
            let mut exempt_opens: BTreeMap<&str, usize> = BTreeMap::new();
            for line in &lines {
                if let Some(rest) = line.strip_prefix("[relay-skip] exempt open did not come up (")
                {
                    let url = rest.split(',').next().unwrap_or_default();
                    *exempt_opens.entry(url).or_default() += 1;
                }
            }
            let bounded = exempt_opens.values().all(|n| *n <= 1);
            let counters = stage.client.stats().counters;
            let others = stage.urls.len() as u64 - 1;
            // Clean and exempt opens: one of each per other URL. Probes (FO-X3): one per other
            // URL per round, rounds at least PROBE_MIN_MS less a quarter apart.
            let not_probes = counters.open_failed.saturating_sub(counters.probe_opens);
            let t = stage.thresholds;
            let min_round_gap_ms = (t.probe_min_ms - t.probe_min_ms / 4).max(1);
            let rounds =
                u64::try_from(window.as_millis()).unwrap_or(u64::MAX) / min_round_gap_ms + 1;
            let no_storm = not_probes <= 2 * others && counters.probe_opens <= rounds * others;
            stage.step(
                &id("C"),
                verdict(bounded && no_storm),
                format!(
                    "at most one exemption attempt per URL {exempt_opens:?}; {not_probes} failed clean/exempt opens (at most {}), {} probes (at most {}): no storm",
                    2 * others,
                    counters.probe_opens,
                    rounds * others
                ),
            );
        }
        Scene::S3 => {
            if !stage.kill_a_expect_switch_to_b(&id("A")).await {
                return Ok(());
            }
            stage.restore_a().await?;
            let window = Duration::from_millis(3_000);
            let lines = stage.observe(window).await;
            let (switches, _) = switch_and_skip_lines(&lines);
            stage.step(
                &id("B"),
                verdict(switches == 0),
                format!(
                    "{switches} switches back in {} ms with A restored (cooldown {} ms)",
                    window.as_millis(),
                    stage.thresholds.cooldown_ms
                ),
            );
            let held = lines
                .iter()
                .any(|l| l.contains("directory path") && l.contains("still cooling"));
            stage.step(
                &id("C"),
                verdict(held),
                "the directory refresh was held back by the cooldown (FO-D1)",
            );
        }
        Scene::S4 | Scene::S4b => {
            if !stage.kill_a_expect_switch_to_b(&id("A")).await {
                return Ok(());
            }
            stage.restore_a().await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            stage.stop_b().await;
            // When the first of A's URLs stops cooling, on the client's clock.
            let cooled_at = stage
                .client
                .stats()
                .cooldown
                .iter()
                .filter(|c| c.url != stage.urls[2])
                .map(|c| c.until)
                .min()
                .unwrap_or(MonoMs::ZERO);
            let cooldown_left_ms = cooled_at.since_ms(stage.client.now());
            let limit = if scene == Scene::S4 {
                stage.deadline() * 3
            } else {
                Duration::from_millis(cooldown_left_ms) + stage.deadline() * 3
            };
            let switched = stage.wait_switch_at(limit).await;
            let on_a = stage
                .current()
                .is_some_and(|u| u == stage.urls[0] || u == stage.urls[1]);
            let Some((line, took_ms, switched_at)) = switched else {
                stage.step(
                    &id("B"),
                    Verdict::Fail,
                    format!("no switch back to A within {} ms", limit.as_millis()),
                );
                return Ok(());
            };
            let marked = line.contains(EXEMPT_MARKER);
            let health = line.contains("current channel unhealthy");
            let deadline_ms = stage.thresholds.deadline_ms;
            if scene == Scene::S4 {
                stage.timings.push(SwitchTiming {
                    took_ms,
                    deadline_ms,
                    lower_bound_ms: stage.thresholds.grace_ms,
                });
                stage.step(
                    &id("B"),
                    verdict(on_a && marked && took_ms <= deadline_ms),
                    format!("the one-hop exemption brought the client back to A in {took_ms} ms (deadline {deadline_ms} ms), exemption marker={marked}"),
                );
                stage.step(
                    &id("C"),
                    verdict(health),
                    "reason from the health path (current channel unhealthy)",
                );
            } else {
                let skipped = stage.seen.iter().any(|l| {
                    l.contains("no other candidate in the chain") && l.contains("exemption off")
                });
                stage.step(
                    &id("B"),
                    verdict(skipped),
                    "the no-candidate skip line while A cooled (exemption off)",
                );
                stage.step(
                    &id("C"),
                    verdict(on_a && !marked && switched_at >= cooled_at),
                    format!("no switch until the cooldown ended (A cooled until {cooled_at}, {cooldown_left_ms} ms after the kill; switched at {switched_at}, {took_ms} ms after the kill), no exemption marker={}", !marked),
                );
            }
            stage.step(&id("line"), Verdict::Pass, line);
        }
        Scene::S5 => {
            let t = stage.thresholds;
            let bound_ms = t.probe_max_ms + t.check_ms + t.up_timeout_ms;
            let on = stage.everything_down_then_b_back().await?;
            let probe_switch = stage
                .seen
                .iter()
                .any(|l| l.starts_with(SWITCH_PREFIX) && l.contains("bounded-recovery probe"));
            match &on {
                Ok(ms) => stage.step(
                    &id("A"),
                    verdict(*ms <= bound_ms && probe_switch),
                    format!("probing on: on B {ms} ms after it came back (bound PROBE_MAX_MS + CHECK_MS + UP_TIMEOUT_MS = {bound_ms} ms), by a probe switch={probe_switch}"),
                ),
                Err(why) => stage.step(&id("A"), Verdict::Fail, why.clone()),
            }
            // The same fault with probing off: the seed's behaviour.
            let off_thresholds = Thresholds {
                probe_max_ms: 0,
                ..t
            };
            let mut off = Stage::new(off_thresholds, 600).await?;
            let first = off.urls[0].clone();
            let off_result = if off.wait_current(&first, Duration::from_secs(5)).await {
                off.everything_down_then_b_back().await?
            } else {
                Err(format!("probing off: never attached to {first}"))
            };
            let off_lines = std::mem::take(&mut off.seen);
            let off_report = off.finish(scene).await;
            stage
                .seen
                .extend(off_lines.into_iter().map(|l| format!("(probing off) {l}")));
            stage.steps.extend(off_report.steps);
            let stall_bound_ms = t.cooldown_ms + t.deadline_ms;
            match (&on, &off_result) {
                (Ok(on_ms), Ok(off_ms)) => {
                    stage.step(
                        &id("B"),
                        verdict(*off_ms > bound_ms && *off_ms <= stall_bound_ms),
                        format!("probing off (PROBE_MAX_MS=0, the seed): on B {off_ms} ms after it came back, bounded only by the cooldown ({} ms)", t.cooldown_ms),
                    );
                    stage.step(
                        &id("C"),
                        Verdict::Pass,
                        format!("recovery {on_ms} ms with probing against {off_ms} ms without (bound {bound_ms} ms)"),
                    );
                }
                (_, Err(why)) => stage.step(&id("B"), Verdict::Fail, why.clone()),
                (Err(_), Ok(off_ms)) => stage.step(
                    &id("B"),
                    Verdict::Pass,
                    format!("probing off: on B {off_ms} ms after it came back"),
                ),
            }
        }
    }
    Ok(())
}

fn verdict(ok: bool) -> Verdict {
    if ok {
        Verdict::Pass
    } else {
        Verdict::Fail
    }
}
