//! The checker's failover traces replayed against real relays and real sockets: hosts go down
//! and come back by stopping and restarting real relay servers, opens and reconnects are real
//! WebSocket connects, and the core decides. After every step the projection must equal the
//! model's (time is the trace's, scaled to model ticks).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchyard_adapters::failover::channel::{self, WsStream};
use switchyard_adapters::failover::relay::{
    RelayConfig, RelayHandle, HEARTBEAT_PING, HEARTBEAT_PONG,
};
use switchyard_core::failover::*;
use switchyard_core::MonoMs;
use switchyard_spec::failover::{
    FailoverParams, FoAction, FoProjection, Signing, MODEL_CHECK_MS, MODEL_TICK_LATENESS_MS,
    MODEL_UP_TIMEOUT_MS,
};
use switchyard_spec::trace::{replay, Replayer, Trace};
use tokio_tungstenite::tungstenite::Message;

/// Real connects to loopback: a refused connect is immediate, so a short bound suffices.
const REAL_OPEN_TIMEOUT: Duration = Duration::from_secs(2);

struct SocketReplayer {
    runtime: tokio::runtime::Runtime,
    params: FailoverParams,
    relays: Vec<Option<RelayHandle>>,
    addrs: Vec<SocketAddr>,
    /// model URL (`wss://a/1`) <-> real URL (`ws://127.0.0.2:port/a/1`)
    to_real: BTreeMap<String, RelayUrl>,
    to_model: BTreeMap<RelayUrl, String>,
    sup: Supervisor,
    now: MonoMs,
    channel: Option<WsStream>,
    attempts: u32,
}

impl SocketReplayer {
    fn host_paths(&self, host: usize) -> Vec<String> {
        self.params
            .urls()
            .iter()
            .filter(|(_, h)| *h == host)
            .map(|(u, _)| format!("/{}", &u.as_str()["wss://".len()..]))
            .collect()
    }

    fn start_relay(&mut self, host: usize) {
        let config = RelayConfig::new(self.addrs[host], self.host_paths(host));
        let relay = self
            .runtime
            .block_on(RelayHandle::start(config))
            .expect("relay restarts");
        self.relays[host] = Some(relay);
    }

    /// List `list` of the model's directory updates, as real URLs.
    fn directory_list(&self, list: u16) -> Vec<RelayUrl> {
        let urls = self.params.urls();
        self.params.directory_lists()[usize::from(list)]
            .iter()
            .map(|i| self.to_real[urls[usize::from(*i)].0.as_str()].clone())
            .collect()
    }

    fn host_is_up(&self, url: &RelayUrl) -> bool {
        let model = &self.to_model[url];
        let host = self
            .params
            .urls()
            .iter()
            .find(|(u, _)| u.as_str() == model)
            .map(|(_, host)| *host)
            .expect("a model URL");
        self.relays[host].is_some()
    }

    /// Is the current connection alive? A heartbeat that gets its answer says yes.
    fn channel_alive(&mut self) -> bool {
        let Some(stream) = self.channel.as_mut() else {
            return false;
        };
        self.runtime.block_on(async {
            if stream
                .send(Message::Text(HEARTBEAT_PING.into()))
                .await
                .is_err()
            {
                return false;
            }
            let answer = tokio::time::timeout(Duration::from_secs(1), async {
                while let Some(frame) = stream.next().await {
                    match frame {
                        Ok(Message::Text(t)) if t.as_str() == HEARTBEAT_PONG => return true,
                        Ok(Message::Close(_)) | Err(_) => return false,
                        Ok(_) => {}
                    }
                }
                false
            });
            answer.await.unwrap_or(false)
        })
    }

    fn open(&self, url: &RelayUrl) -> Option<WsStream> {
        self.runtime
            .block_on(channel::open(url, REAL_OPEN_TIMEOUT))
            .ok()
    }

    /// The channel's report before a tick, from a real heartbeat or a real reconnect.
    fn report_channel(&mut self) {
        let Some(current) = self.sup.current().cloned() else {
            return;
        };
        if self.channel_alive() {
            // A channel that reported a blip and is alive again reports healthy, as the
            // channel task does once its reconnect succeeds.
            if self.attempts > 0 {
                self.attempts = 0;
                self.sup
                    .handle_channel_state(self.now, &current, ChannelState::Healthy);
            }
            return;
        }
        self.channel = None;
        match self.open(&current) {
            Some(stream) => {
                self.channel = Some(stream);
                if self.attempts > 0 {
                    self.attempts = 0;
                    self.sup
                        .handle_channel_state(self.now, &current, ChannelState::Healthy);
                }
            }
            None => {
                let cap = self.sup.thresholds().min_attempts.max(1) + 1;
                self.attempts = (self.attempts + 1).min(cap);
                let state = ChannelState::Backoff {
                    attempts: self.attempts,
                };
                self.sup.handle_channel_state(self.now, &current, state);
            }
        }
    }

    fn resolve_open(&mut self, failure: OpenFailure) {
        let url = self
            .sup
            .open_in_flight()
            .expect("an open in flight")
            .url()
            .clone();
        if self.host_is_up(&url) && failure == OpenFailure::TimedOut {
            // A transient failure of a live relay: the model's input, handed to the core as the
            // adapter would after its connect gave up.
            self.sup.handle_open_failed(self.now, &url, failure);
            return;
        }
        match self.open(&url) {
            Some(stream) => {
                if self.sup.handle_open_succeeded(self.now, &url) {
                    self.channel = Some(stream); // the old one is closed by the Close action
                    self.attempts = 0;
                }
            }
            None => {
                self.sup.handle_open_failed(self.now, &url, failure);
            }
        }
    }

    fn drain(&mut self) {
        while let Some(output) = self.sup.poll_output() {
            if let Output::Action(ChannelAction::Close { .. }) = output {
                // Make-before-break: the new stream already replaced the old one, which is
                // dropped (closed) here.
            }
        }
    }
}

impl Replayer for SocketReplayer {
    type Params = FailoverParams;
    type Action = FoAction;
    type Projection = FoProjection;

    fn init(params: &FailoverParams, init: usize) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let hosts = params.urls_per_host.len();
        let variant = params.variants[init];
        let mut replayer = SocketReplayer {
            runtime,
            params: params.clone(),
            relays: (0..hosts).map(|_| None).collect(),
            // FO-X4: each model host at its own loopback address, so the core sees the
            // model's failure domains (a URL's host is its failure domain).
            addrs: (0..hosts)
                .map(|host| SocketAddr::from(([127, 0, 0, 2 + host as u8], 0)))
                .collect(),
            to_real: BTreeMap::new(),
            to_model: BTreeMap::new(),
            sup: Supervisor::new(variant.thresholds(), MonoMs::ZERO),
            now: MonoMs::ZERO,
            channel: None,
            attempts: 0,
        };
        for host in 0..hosts {
            replayer.start_relay(host);
            replayer.addrs[host] = replayer.relays[host]
                .as_ref()
                .map(RelayHandle::local_addr)
                .expect("started");
        }
        for (url, host) in params.urls() {
            let path = &url.as_str()["wss://".len()..];
            let real = RelayUrl::new(format!("ws://{}/{path}", replayer.addrs[host]));
            replayer.to_real.insert(url.to_string(), real.clone());
            replayer.to_model.insert(real, url.to_string());
        }
        // As the model's initial state: the directory, and the first channel up.
        let list: Vec<RelayUrl> = params
            .urls()
            .iter()
            .map(|(u, _)| replayer.to_real[u.as_str()].clone())
            .collect();
        replayer
            .sup
            .handle_directory(MonoMs::ZERO, &list, DirectorySource::Signed);
        replayer.resolve_open(OpenFailure::Failed);
        replayer.drain();
        replayer
    }

    fn step(&mut self, action: &FoAction) {
        match *action {
            FoAction::Tick | FoAction::LateTick => {
                let lateness = if *action == FoAction::LateTick {
                    MODEL_TICK_LATENESS_MS
                } else {
                    0
                };
                self.now = self
                    .sup
                    .poll_timeout()
                    .unwrap_or(self.now.plus_ms(MODEL_CHECK_MS))
                    .plus_ms(lateness)
                    .max(self.now);
                self.report_channel();
                self.sup.handle_tick(self.now);
            }
            FoAction::HostDown { host } => {
                if let Some(relay) = self.relays[usize::from(host)].take() {
                    self.runtime.block_on(relay.stop());
                }
            }
            FoAction::HostUp { host } => self.start_relay(usize::from(host)),
            FoAction::OpenSucceeds => self.resolve_open(OpenFailure::Failed),
            FoAction::OpenFails => {
                let url = self.sup.open_in_flight().expect("in flight").url().clone();
                if self.host_is_up(&url) {
                    // A transient refusal of a live relay: fed as the adapter would.
                    self.sup
                        .handle_open_failed(self.now, &url, OpenFailure::Failed);
                } else {
                    self.resolve_open(OpenFailure::Failed);
                }
            }
            FoAction::OpenTimesOut => {
                let started_at = self.sup.open_in_flight().expect("in flight").started_at();
                self.now = started_at.plus_ms(MODEL_UP_TIMEOUT_MS).max(self.now);
                self.resolve_open(OpenFailure::TimedOut);
            }
            FoAction::Directory { list } => {
                let list = self.directory_list(list);
                self.sup
                    .handle_directory(self.now, &list, DirectorySource::Signed);
            }
            // FO-S1: a signed update that is not fresh reaches the supervisor only when it is
            // the list already taken under the same sequence (a refresh).
            FoAction::SignedDirectory { list, signing } => {
                let list = self.directory_list(list);
                if signing == Signing::SameSequence && self.sup.candidates() == list.as_slice() {
                    self.sup
                        .handle_directory(self.now, &list, DirectorySource::Signed);
                }
            }
            FoAction::ChannelReport { report } => {
                let current = self.sup.current().expect("a channel").clone();
                let (state, attempts) = report.channel_state();
                self.attempts = attempts;
                self.sup.handle_channel_state(self.now, &current, state);
            }
            FoAction::OddTime { offset_ms } => {
                let threshold = self
                    .sup
                    .next_change_at(self.now)
                    .expect("a threshold ahead");
                self.now = MonoMs(
                    threshold
                        .as_ms()
                        .checked_add_signed(i64::from(offset_ms))
                        .expect("in range"),
                );
            }
        }
        self.drain();
    }

    fn project(&self) -> FoProjection {
        let model = |url: &RelayUrl| {
            self.to_model
                .get(url)
                .cloned()
                .unwrap_or_else(|| url.to_string())
        };
        let mut cooldown: Vec<_> = self
            .sup
            .stats(self.now)
            .cooldown
            .into_iter()
            .map(|c| (model(&c.url), c.kind, c.until.as_ms()))
            .collect();
        // The model lists cooldown rows by its URL names; real URLs sort differently.
        cooldown.sort();
        FoProjection {
            now_ms: self.now.as_ms(),
            host_up: self.relays.iter().map(Option::is_some).collect(),
            current: self.sup.current().map(model),
            opening: self
                .sup
                .open_in_flight()
                .map(|o| (model(o.url()), o.exemption().is_some())),
            counters: self.sup.counters(),
            cooldown,
        }
    }
}

#[test]
fn fo_replay_checker_traces_against_real_relays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../checker/tests/traces");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).expect("the trace corpus") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if !name.starts_with("failover.") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("trace");
        let trace: Trace<FailoverParams, FoAction, FoProjection> =
            serde_json::from_str(&text).expect("trace JSON");
        if let Err(divergence) = replay::<SocketReplayer>(&trace) {
            panic!(
                "{name}: real sockets diverged from the model at step {}:\n model {:?}\n real  {:?}",
                divergence.step, divergence.expected, divergence.actual
            );
        }
        replayed += 1;
    }
    assert!(replayed >= 7, "replayed {replayed} traces");
}

/// Random walks through the wide environment (every kind of input: directory updates with any
/// list, channel reports, transient failures of live relays, odd instants around thresholds),
/// recorded by the model and replayed over real relays: the inputs the committed corpus, at its
/// small bound, does not exercise.
#[test]
fn fo_replay_random_walks_of_the_wide_environment_against_real_relays() {
    const WALKS: usize = 24;
    use switchyard_spec::failover::{FailoverModel, Variant};
    use switchyard_spec::trace::{TraceKind, TraceStep};

    let params = FailoverParams {
        cycles: 1,
        max_host_events: 2,
        max_directory_updates: 2,
        max_channel_reports: 2,
        max_odd_time_steps: 2,
        max_transient_failures: 2,
        variants: vec![Variant::Production, Variant::ProbeJitter],
        ..FailoverParams::default()
    };
    let model = FailoverModel::new(params.clone());
    // A fixed linear congruential sequence: the walks are the same on every run.
    let mut seed: u64 = 0x5eed_f00d;
    let mut next = move |n: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as usize % n
    };
    let mut kinds = std::collections::BTreeSet::new();
    for walk in 0..WALKS {
        let init = walk % params.variants.len();
        let mut state = model.init_state(params.variants[init]);
        let initial = state.project();
        let mut steps = Vec::new();
        for _ in 0..40 {
            let actions = model.enabled_actions(&state);
            if actions.is_empty() {
                break;
            }
            let action = actions[next(actions.len())];
            let kind = format!("{action:?}");
            kinds.insert(kind.split([' ', '{']).next().unwrap_or_default().to_owned());
            state = model.step(&state, action);
            steps.push(TraceStep {
                action,
                after: state.project(),
            });
        }
        let trace = Trace {
            model: "failover".to_owned(),
            property: format!("random walk {walk}"),
            kind: TraceKind::Witness,
            params: params.clone(),
            init,
            initial,
            steps,
        };
        if let Err(divergence) = replay::<SocketReplayer>(&trace) {
            panic!(
                "walk {walk}: real sockets diverged from the model at step {}:\n model {:?}\n real  {:?}\n actions {:?}",
                divergence.step,
                divergence.expected,
                divergence.actual,
                trace.steps.iter().map(|s| s.action).collect::<Vec<_>>()
            );
        }
    }
    // Every kind of input was replayed at least once, the signed directory updates (FO-S1)
    // included; the late tick is offered only where a threshold falls within its lateness and
    // these walks may not meet one.
    kinds.remove("LateTick");
    assert_eq!(kinds.len(), 10, "{kinds:?}");
}
