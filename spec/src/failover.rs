//! `FailoverModel`: the real [`Supervisor`] in an environment of relay hosts that go down and
//! come back, a directory that reorders, opens that succeed (host up) or fail / time out (host
//! down), and time that advances one tick at a time up to a horizon of `cycles` cooldowns.
//!
//! Abstractions (each keeps the state space finite without changing a decision):
//! - thresholds are scaled to ticks ([`Variant::thresholds`]);
//! - an open in flight resolves before the next tick (ticks during an open do nothing anyway);
//! - reconnect attempts saturate at `MIN_ATTEMPTS` (beyond it they change no decision).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use switchyard_core::failover::*;
use switchyard_core::MonoMs;

/// One tick of model time, in ms. The other thresholds are small multiples of it.
pub const MODEL_CHECK_MS: u64 = 1_000;
pub const MODEL_GRACE_MS: u64 = 2_000;
pub const MODEL_UP_TIMEOUT_MS: u64 = 2_000;
pub const MODEL_COOLDOWN_MS: u64 = 6_000;
pub const MODEL_MIN_ATTEMPTS: u32 = 3;
pub const MODEL_PROBE_MIN_MS: u64 = 2_000;
pub const MODEL_PROBE_MAX_MS: u64 = 4_000;

/// A threshold set explored from its own initial state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// The production semantics (exemption on, cooldown on), scaled.
    Production,
    /// `RELAY_FAILOVER_EXEMPT=0` (FO-D6-OFF).
    ExemptOff,
    /// `RELAY_FAILOVER_COOLDOWN_MS=0` (FO-X2).
    CooldownZero,
    /// `RELAY_FAILOVER_MIN_ATTEMPTS=0` (FO-H-2).
    SupervisorOff,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant::Production,
        Variant::ExemptOff,
        Variant::CooldownZero,
        Variant::SupervisorOff,
    ];

    pub fn thresholds(self) -> Thresholds {
        let scaled = Thresholds {
            cooldown_ms: MODEL_COOLDOWN_MS,
            deadline_ms: 10 * MODEL_CHECK_MS,
            grace_ms: MODEL_GRACE_MS,
            min_attempts: MODEL_MIN_ATTEMPTS,
            check_ms: MODEL_CHECK_MS,
            up_timeout_ms: MODEL_UP_TIMEOUT_MS,
            exempt: true,
            probe_min_ms: MODEL_PROBE_MIN_MS,
            probe_max_ms: MODEL_PROBE_MAX_MS,
        };
        match self {
            Variant::Production => scaled,
            Variant::ExemptOff => Thresholds {
                exempt: false,
                ..scaled
            },
            Variant::CooldownZero => Thresholds {
                cooldown_ms: 0,
                ..scaled
            },
            Variant::SupervisorOff => Thresholds {
                min_attempts: 0,
                ..scaled
            },
        }
    }
}

/// The model's size knobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverParams {
    /// Candidate URLs served by each host, in directory order. Production: `[2, 1]`.
    pub urls_per_host: Vec<u8>,
    /// Time horizon, in cooldown periods.
    pub cycles: u32,
    pub variants: Vec<Variant>,
    /// Host down/up events in one run. Scene 4 needs three.
    pub max_host_events: u8,
}

impl Default for FailoverParams {
    /// The review bounds: the production topology over two cooldown cycles, every variant.
    fn default() -> Self {
        FailoverParams {
            urls_per_host: vec![2, 1],
            cycles: 2,
            variants: Variant::ALL.to_vec(),
            max_host_events: 4,
        }
    }
}

impl FailoverParams {
    pub fn horizon(&self) -> MonoMs {
        MonoMs(u64::from(self.cycles) * MODEL_COOLDOWN_MS)
    }

    /// `(url, host)` in directory order: host `a` serves `wss://a1`, `wss://a2`, ...
    pub fn urls(&self) -> Vec<(RelayUrl, usize)> {
        let mut urls = Vec::new();
        for (host, count) in self.urls_per_host.iter().enumerate() {
            let letter = char::from(b'a' + host as u8);
            for index in 1..=*count {
                urls.push((RelayUrl::new(format!("wss://{letter}{index}")), host));
            }
        }
        urls
    }
}

/// The environment's moves; every one is a core input or "time advances".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum FoAction {
    /// Time advances to the next tick; the channel reports its state; the tick runs.
    Tick,
    HostDown {
        host: u8,
    },
    HostUp {
        host: u8,
    },
    /// The open in flight comes up (its host is up).
    OpenSucceeds,
    /// The open in flight is refused at once (its host is down).
    OpenFails,
    /// The open in flight times out after `UP_TIMEOUT_MS` (its host is down).
    OpenTimesOut,
    /// A directory refresh with the list rotated left by `rotation`.
    DirectoryRefresh {
        rotation: u8,
    },
}

/// What the last step did, kept in the state so `always` properties can judge transitions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepFacts {
    pub opens_started: u8,
    pub open: Option<OpenFact>,
    pub closed_without_switch: bool,
    pub counters_regressed: bool,
    pub exempt_open_failed: bool,
    pub exempt_switch: bool,
    pub directory_switch: bool,
    pub directory_refused_by_cooldown: bool,
    pub no_candidate_line: bool,
}

/// An open started by the last step, judged against the state before it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpenFact {
    pub origin: Origin,
    pub exempt: bool,
    pub listed: bool,
    pub target_was_cooling: bool,
    pub target_was_exempted_this_cycle: bool,
    pub clean_candidate_existed: bool,
    /// FO-D5, stated independently of the core: the exemptable candidate that should win.
    pub expected_exempt_target: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FoState {
    pub variant: Variant,
    pub sup: Supervisor,
    pub now: MonoMs,
    pub host_up: Vec<bool>,
    pub attempts: u32,
    pub switch_lines: u64,
    /// Ticks since the chain last ended while unhealthy with a live, eligible candidate.
    pub stall_ticks: u8,
    /// The environment acts at most once per tick (a host event, a directory refresh): without
    /// time passing, cooldown 0 would otherwise let counters grow without bound.
    pub env_acted_this_tick: bool,
    /// Host events left in the whole run (`FailoverParams::max_host_events`).
    pub host_events_left: u8,
    /// The spec's own record for FO-D4: URLs that were given an exemption in their current
    /// cooldown cycle, where a failed exempt open does not start a new cycle.
    pub exempted_this_cycle: BTreeSet<RelayUrl>,
    pub last: StepFacts,
}

#[derive(Debug, Clone)]
pub struct FailoverModel {
    pub params: FailoverParams,
    urls: Vec<(RelayUrl, usize)>,
}

impl FailoverModel {
    pub fn new(params: FailoverParams) -> FailoverModel {
        assert!(!params.urls_per_host.is_empty() && params.urls_per_host.len() <= 8);
        let urls = params.urls();
        FailoverModel { params, urls }
    }

    fn host_of(&self, url: &RelayUrl) -> usize {
        self.urls
            .iter()
            .find(|(u, _)| u == url)
            .map(|(_, host)| *host)
            .expect("every model URL belongs to a host")
    }

    fn is_live(&self, state: &FoState, url: &RelayUrl) -> bool {
        state.host_up[self.host_of(url)]
    }

    fn rotated(&self, rotation: usize) -> Vec<RelayUrl> {
        let mut list: Vec<RelayUrl> = self.urls.iter().map(|(u, _)| u.clone()).collect();
        let len = list.len();
        list.rotate_left(rotation % len);
        list
    }

    /// A live candidate the health path may still use: clean, or exemptable.
    pub fn live_eligible_exists(&self, state: &FoState) -> bool {
        let sup = &state.sup;
        sup.candidates().iter().any(|url| {
            if !self.is_live(state, url) || sup.current() == Some(url) {
                return false;
            }
            if sup.is_clean(url, state.now) {
                return true;
            }
            sup.thresholds().exempt
                && sup
                    .cooldown_entry(url)
                    .is_some_and(|e| e.is_cooling(state.now) && !e.exempted_this_cycle())
        })
    }

    /// FO-D5 as the spec states it: among the listed, cooling, not-yet-exempted URLs other than
    /// the current one (and, within a tick's chain, other than those it already tried),
    /// switched-away before open-failed, then earliest `until`, then directory order.
    fn expected_exempt_target(
        sup: &Supervisor,
        now: MonoMs,
        tried: &BTreeSet<RelayUrl>,
    ) -> Option<RelayUrl> {
        let mut best: Option<((u8, MonoMs, usize), RelayUrl)> = None;
        for (index, url) in sup.candidates().iter().enumerate() {
            if sup.current() == Some(url) || tried.contains(url) {
                continue;
            }
            let Some(entry) = sup.cooldown_entry(url) else {
                continue;
            };
            if !entry.is_cooling(now) || entry.exempted_this_cycle() {
                continue;
            }
            let rank = match entry.kind {
                CooldownKind::SwitchedAway => 0,
                CooldownKind::OpenFailed => 1,
            };
            let key = (rank, entry.until, index);
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, url.clone()));
            }
        }
        best.map(|(_, url)| url)
    }

    /// The step function: the real core, fed the action, outputs drained and judged.
    pub fn step(&self, before: &FoState, action: FoAction) -> FoState {
        let mut state = before.clone();
        state.last = StepFacts::default();
        let sup_before = &before.sup;
        let mut judge_at = state.now;
        // What a chain continuing after a failed open has already tried (a tick starts afresh).
        let mut tried = BTreeSet::new();
        let mut failed_origin = None;
        match action {
            FoAction::Tick => {
                let next = state
                    .sup
                    .poll_timeout()
                    .unwrap_or(state.now.plus_ms(MODEL_CHECK_MS));
                state.now = next.max(state.now);
                judge_at = state.now;
                state.env_acted_this_tick = false;
                self.report_channel(&mut state);
                state.sup.handle_tick(state.now);
            }
            FoAction::HostDown { host } | FoAction::HostUp { host } => {
                state.host_up[usize::from(host)] = matches!(action, FoAction::HostUp { .. });
                state.host_events_left -= 1;
                state.env_acted_this_tick = true;
            }
            FoAction::OpenSucceeds => {
                let url = state.sup.open_in_flight().expect("enabled").url.clone();
                state.sup.handle_open_succeeded(state.now, &url);
                state.attempts = 0;
            }
            FoAction::OpenFails | FoAction::OpenTimesOut => {
                let pending = state.sup.open_in_flight().expect("enabled").clone();
                let failure = if action == FoAction::OpenTimesOut {
                    state.now = state.now.plus_ms(MODEL_UP_TIMEOUT_MS);
                    OpenFailure::TimedOut
                } else {
                    OpenFailure::Failed
                };
                judge_at = state.now;
                tried = sup_before.tried_since_last_move().clone();
                tried.insert(pending.url.clone());
                failed_origin = Some(pending.origin);
                state
                    .sup
                    .handle_open_failed(state.now, &pending.url, failure);
                state.last.exempt_open_failed = pending.exemption.is_some();
            }
            FoAction::DirectoryRefresh { rotation } => {
                state.env_acted_this_tick = true;
                let list = self.rotated(usize::from(rotation));
                state
                    .sup
                    .handle_directory(state.now, &list, DirectorySource::Signed);
            }
        }
        self.drain_and_judge(sup_before, &mut state, judge_at, &tried);
        self.update_stall(action, failed_origin, &mut state);
        state
    }

    fn report_channel(&self, state: &mut FoState) {
        let Some(current) = state.sup.current().cloned() else {
            return;
        };
        if self.is_live(state, &current) {
            if state.attempts > 0 {
                state.attempts = 0;
                state
                    .sup
                    .handle_channel_state(state.now, &current, ChannelState::Healthy);
            }
        } else {
            let cap = state.sup.thresholds().min_attempts.max(1);
            state.attempts = (state.attempts + 1).min(cap);
            let report = ChannelState::Backoff {
                attempts: state.attempts,
            };
            state.sup.handle_channel_state(state.now, &current, report);
        }
    }

    fn drain_and_judge(
        &self,
        sup_before: &Supervisor,
        state: &mut FoState,
        at: MonoMs,
        tried: &BTreeSet<RelayUrl>,
    ) {
        let mut switched = false;
        while let Some(output) = state.sup.poll_output() {
            match output {
                Output::Action(Action::Open { url, exempt, .. }) => {
                    state.last.opens_started += 1;
                    let before_entry = sup_before.cooldown_entry(&url);
                    let expected = Self::expected_exempt_target(sup_before, at, tried);
                    state.last.open = Some(OpenFact {
                        origin: state.sup.open_in_flight().expect("just opened").origin,
                        exempt,
                        listed: state.sup.candidates().contains(&url),
                        target_was_cooling: before_entry.is_some_and(|e| e.is_cooling(at)),
                        // Judged by the spec's own record, not by the core's `exempted_at`.
                        target_was_exempted_this_cycle: exempt
                            && !state.exempted_this_cycle.insert(url.clone()),
                        clean_candidate_existed: state
                            .sup
                            .candidates()
                            .iter()
                            .any(|u| state.sup.is_clean(u, at)),
                        expected_exempt_target: !exempt || expected.as_ref() == Some(&url),
                    });
                }
                Output::Action(Action::Close { .. }) => switched = true,
                Output::Event(event) => {
                    match &event {
                        Event::Switched(record) => {
                            state.last.exempt_switch = record.exemption.is_some();
                            state.last.directory_switch = record.origin == Origin::Directory;
                            // Leaving a URL starts a new (switched-away) cycle for it.
                            state.exempted_this_cycle.remove(&record.from);
                        }
                        // A failed normal open starts a new cycle; a failed exempt open does
                        // not give the URL a new exemption (FO-D4).
                        Event::Skipped(Skip::OpenFailed {
                            url, exempt: false, ..
                        }) => {
                            state.exempted_this_cycle.remove(url);
                        }
                        Event::Skipped(Skip::StillCooling {
                            origin: Origin::Directory,
                            ..
                        }) => state.last.directory_refused_by_cooldown = true,
                        Event::Skipped(Skip::NoCandidate { .. }) => {
                            state.last.no_candidate_line = true;
                        }
                        _ => {}
                    }
                    if render(&event).starts_with(SWITCH_PREFIX) {
                        state.switch_lines += 1;
                    }
                }
            }
        }
        // A cycle ends when the URL no longer cools (expired, or it is the current channel).
        let sup = &state.sup;
        state
            .exempted_this_cycle
            .retain(|url| sup.cooldown_entry(url).is_some_and(|e| e.is_cooling(at)));
        let (b, a) = (sup_before.counters(), state.sup.counters());
        state.last.counters_regressed = a.switches < b.switches
            || a.exempt_switches < b.exempt_switches
            || a.open_failed < b.open_failed
            || a.no_candidate_checks < b.no_candidate_checks;
        state.last.closed_without_switch = switched && a.switches == b.switches;
    }

    /// FO-X1/FO-X2 bookkeeping: a tick whose chain (the tick plus the health-path opens it
    /// leads to) ends unhealthy, with no open in flight, while a live eligible candidate exists,
    /// is a stalled tick. Directory-path opens are not part of a tick's chain.
    fn update_stall(&self, action: FoAction, failed_origin: Option<Origin>, state: &mut FoState) {
        let chain_step = match action {
            FoAction::Tick => true,
            FoAction::OpenFails | FoAction::OpenTimesOut => failed_origin == Some(Origin::Health),
            FoAction::OpenSucceeds => {
                state.stall_ticks = 0;
                return;
            }
            _ => false,
        };
        if !chain_step || state.sup.open_in_flight().is_some() {
            return;
        }
        if state.sup.is_unhealthy(state.now) && self.live_eligible_exists(state) {
            if action == FoAction::Tick || state.stall_ticks == 0 {
                state.stall_ticks = state.stall_ticks.saturating_add(1);
            }
        } else {
            state.stall_ticks = 0;
        }
    }

    pub fn init_state(&self, variant: Variant) -> FoState {
        let mut sup = Supervisor::new(variant.thresholds(), MonoMs::ZERO);
        let list = self.rotated(0);
        sup.handle_directory(MonoMs::ZERO, &list, DirectorySource::Signed);
        sup.handle_open_succeeded(MonoMs::ZERO, &list[0]);
        while sup.poll_output().is_some() {}
        FoState {
            variant,
            sup,
            now: MonoMs::ZERO,
            host_up: vec![true; self.params.urls_per_host.len()],
            attempts: 0,
            switch_lines: 0,
            stall_ticks: 0,
            env_acted_this_tick: false,
            host_events_left: self.params.max_host_events,
            exempted_this_cycle: BTreeSet::new(),
            last: StepFacts::default(),
        }
    }
}

impl Model for FailoverModel {
    type State = FoState;
    type Action = FoAction;

    fn init_states(&self) -> Vec<FoState> {
        self.params
            .variants
            .iter()
            .map(|v| self.init_state(*v))
            .collect()
    }

    fn actions(&self, state: &FoState, actions: &mut Vec<FoAction>) {
        if let Some(open) = state.sup.open_in_flight() {
            if self.is_live(state, &open.url) {
                actions.push(FoAction::OpenSucceeds);
            } else {
                actions.push(FoAction::OpenFails);
                actions.push(FoAction::OpenTimesOut);
            }
        } else if state.now < self.params.horizon() {
            actions.push(FoAction::Tick);
        }
        if state.env_acted_this_tick {
            return;
        }
        if state.host_events_left > 0 {
            for (host, up) in state.host_up.iter().enumerate() {
                let host = host as u8;
                actions.push(if *up {
                    FoAction::HostDown { host }
                } else {
                    FoAction::HostUp { host }
                });
            }
        }
        for rotation in 0..self.urls.len() as u8 {
            actions.push(FoAction::DirectoryRefresh { rotation });
        }
    }

    fn next_state(&self, state: &FoState, action: FoAction) -> Option<FoState> {
        Some(self.step(state, action))
    }

    fn within_boundary(&self, state: &FoState) -> bool {
        state.now <= self.params.horizon().plus_ms(MODEL_UP_TIMEOUT_MS)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        failover_properties()
    }
}

fn open_ok(state: &FoState, check: fn(&OpenFact) -> bool) -> bool {
    state.last.open.as_ref().is_none_or(check)
}

/// The properties, each named by its requirement ID.
pub fn failover_properties() -> Vec<Property<FailoverModel>> {
    vec![
        Property::always(
            "FO-D1 the directory path never opens a cooling URL",
            |_, s: &FoState| {
                open_ok(s, |o| {
                    o.origin != Origin::Directory || !o.target_was_cooling
                })
            },
        ),
        Property::always(
            "FO-R5 every open targets a URL of the current list",
            |_, s: &FoState| open_ok(s, |o| o.listed),
        ),
        Property::always(
            "FO-D2 one cooldown entry per URL, until = since + cooldown",
            |_, s: &FoState| {
                s.sup
                    .cooldown_table()
                    .values()
                    .all(|e| e.until.since_ms(e.since) == s.sup.thresholds().cooldown_ms)
            },
        ),
        Property::always(
            "FO-D3 no exemption while a clean candidate exists",
            |_, s: &FoState| open_ok(s, |o| !o.exempt || !o.clean_candidate_existed),
        ),
        Property::always(
            "FO-D4 at most one exemption per URL per cooldown cycle",
            |_, s: &FoState| open_ok(s, |o| !o.exempt || !o.target_was_exempted_this_cycle),
        ),
        Property::always(
            "FO-D5 exemption order: switched-away, then earliest until",
            |_, s: &FoState| open_ok(s, |o| o.expected_exempt_target),
        ),
        Property::always(
            "FO-D6 only the health path exempts, only a cooling URL",
            |_, s: &FoState| {
                open_ok(s, |o| {
                    o.exempt == (o.origin == Origin::Health && o.target_was_cooling)
                })
            },
        ),
        Property::always(
            "FO-D6-OFF no exempt open with EXEMPT=0",
            |_, s: &FoState| s.sup.thresholds().exempt || open_ok(s, |o| !o.exempt),
        ),
        Property::always(
            "FO-D7 [relay-switch] lines == switches; counters monotone",
            |_, s: &FoState| {
                s.switch_lines == s.sup.counters().switches && !s.last.counters_regressed
            },
        ),
        Property::always(
            "FO-H-2 MIN_ATTEMPTS=0: the health path never acts",
            |_, s: &FoState| {
                s.sup.thresholds().supervisor_enabled()
                    || (s.sup.counters().no_candidate_checks == 0
                        && open_ok(s, |o| o.origin == Origin::Directory))
            },
        ),
        Property::always(
            "FO-X1 a live non-exempted candidate is reached within one tick of turning unhealthy",
            |_, s: &FoState| s.sup.thresholds().cooldown_ms == 0 || s.stall_ticks <= 1,
        ),
        Property::always(
            "FO-X2 cooldown 0 never self-locks (same bound)",
            |_, s: &FoState| s.sup.thresholds().cooldown_ms != 0 || s.stall_ticks <= 1,
        ),
        Property::always("one open in flight; make-before-break", |_, s: &FoState| {
            s.last.opens_started <= 1 && !s.last.closed_without_switch
        }),
        Property::sometimes("witness: exempt switch (FO-D6)", |_, s: &FoState| {
            s.last.exempt_switch
        }),
        Property::sometimes("witness: failed exemption (FO-D4)", |_, s: &FoState| {
            s.last.exempt_open_failed
        }),
        Property::sometimes(
            "witness: no-candidate skip line (FO-D6)",
            |_, s: &FoState| s.last.no_candidate_line,
        ),
        Property::sometimes(
            "witness: directory refused by cooldown (FO-D1)",
            |_, s: &FoState| s.last.directory_refused_by_cooldown,
        ),
        Property::sometimes("witness: directory switch (FO-D1)", |_, s: &FoState| {
            s.last.directory_switch
        }),
        Property::sometimes("witness: cooldown-0 failover (FO-X2)", |_, s: &FoState| {
            s.variant == Variant::CooldownZero && s.sup.counters().switches > 0
        }),
        Property::sometimes(
            "witness: second cooldown cycle reached",
            |m: &FailoverModel, s: &FoState| {
                s.now.as_ms() >= m.params.horizon().as_ms() && s.sup.counters().switches >= 2
            },
        ),
    ]
}

/// What a trace records after each step, and what a replay must reproduce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoProjection {
    pub now_ms: u64,
    pub host_up: Vec<bool>,
    pub current: Option<String>,
    pub opening: Option<(String, bool)>,
    pub counters: Counters,
    pub cooldown: Vec<(String, CooldownKind, u64)>,
}

impl FoState {
    pub fn project(&self) -> FoProjection {
        FoProjection {
            now_ms: self.now.as_ms(),
            host_up: self.host_up.clone(),
            current: self.sup.current().map(|u| u.to_string()),
            opening: self
                .sup
                .open_in_flight()
                .map(|o| (o.url.to_string(), o.exemption.is_some())),
            counters: self.sup.counters(),
            cooldown: self
                .sup
                .stats(self.now)
                .cooldown
                .into_iter()
                .map(|c| (c.url.to_string(), c.kind, c.until.as_ms()))
                .collect(),
        }
    }
}

impl fmt::Display for FoAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoAction::Tick => write!(f, "tick"),
            FoAction::HostDown { host } => write!(f, "host {} goes down", host_name(*host)),
            FoAction::HostUp { host } => write!(f, "host {} comes back", host_name(*host)),
            FoAction::OpenSucceeds => write!(f, "the open succeeds"),
            FoAction::OpenFails => write!(f, "the open fails"),
            FoAction::OpenTimesOut => write!(f, "the open times out"),
            FoAction::DirectoryRefresh { rotation } => {
                write!(f, "directory refresh (rotated by {rotation})")
            }
        }
    }
}

pub fn host_name(host: u8) -> char {
    char::from(b'a' + host)
}
