//! A small driver for the failover machine in tests: feeds inputs, drains outputs, keeps the
//! rendered lines.
#![allow(dead_code)]

use switchyard_core::failover::*;
use switchyard_core::MonoMs;

pub const A1: &str = "wss://a.example/relay";
pub const A2: &str = "wss://a-direct.example/relay";
pub const B: &str = "wss://b.example/relay";
/// Three more URLs, for lists other than the production topology.
pub const U0: &str = "wss://u0.example/relay";
pub const U1: &str = "wss://u1.example/relay";
pub const U2: &str = "wss://u2.example/relay";

pub fn url(s: &str) -> RelayUrl {
    RelayUrl::new(s)
}

pub struct Rig {
    pub sup: Supervisor,
    pub now: MonoMs,
    pub lines: Vec<String>,
    pub actions: Vec<ChannelAction>,
    pub events: Vec<Event>,
}

impl Rig {
    pub fn new(thresholds: Thresholds) -> Rig {
        Rig {
            sup: Supervisor::new(thresholds, MonoMs::ZERO),
            now: MonoMs::ZERO,
            lines: Vec::new(),
            actions: Vec::new(),
            events: Vec::new(),
        }
    }

    /// The production topology: A1 and A2 on host A, B on host B, attached to A1.
    pub fn production(thresholds: Thresholds) -> Rig {
        let mut rig = Rig::new(thresholds);
        rig.directory(&[A1, A2, B]);
        rig.open_ok(A1);
        rig.clear();
        rig
    }

    pub fn clear(&mut self) {
        self.lines.clear();
        self.actions.clear();
        self.events.clear();
    }

    fn drain(&mut self) {
        while let Some(output) = self.sup.poll_output() {
            match output {
                Output::Action(action) => self.actions.push(action),
                Output::Event(event) => {
                    self.lines
                        .push(render_explained(&event, &self.sup, self.now));
                    self.events.push(event);
                }
            }
        }
    }

    pub fn advance(&mut self, ms: u64) -> &mut Rig {
        self.now = self.now.plus_ms(ms);
        self
    }

    pub fn directory(&mut self, urls: &[&str]) -> DirectoryOutcome {
        let urls: Vec<RelayUrl> = urls.iter().map(|u| url(u)).collect();
        let outcome = self
            .sup
            .handle_directory(self.now, &urls, DirectorySource::Signed);
        self.drain();
        outcome
    }

    pub fn state(&mut self, state: ChannelState) {
        let current = self.sup.current().cloned().expect("a current channel");
        self.sup.handle_channel_state(self.now, &current, state);
        self.drain();
    }

    pub fn backoff(&mut self, attempts: u32) {
        self.state(ChannelState::Backoff { attempts });
    }

    pub fn tick(&mut self) {
        self.sup.handle_tick(self.now);
        self.drain();
    }

    pub fn open_ok(&mut self, u: &str) -> bool {
        let accepted = self.sup.handle_open_succeeded(self.now, &url(u));
        self.drain();
        accepted
    }

    pub fn open_fail(&mut self, u: &str) -> bool {
        let accepted = self
            .sup
            .handle_open_failed(self.now, &url(u), OpenFailure::Failed);
        self.drain();
        accepted
    }

    /// The URL of the open in flight, if any.
    pub fn opening(&self) -> Option<&str> {
        self.sup.open_in_flight().map(|open| open.url().as_str())
    }

    pub fn opens(&self) -> Vec<(String, bool)> {
        self.actions
            .iter()
            .filter_map(|action| match action {
                ChannelAction::Open { url, exempt, .. } => Some((url.to_string(), *exempt)),
                ChannelAction::Close { .. } => None,
            })
            .collect()
    }

    pub fn switch_lines(&self) -> usize {
        self.lines
            .iter()
            .filter(|line| line.starts_with(SWITCH_PREFIX))
            .count()
    }

    pub fn skip_lines(&self) -> Vec<&String> {
        self.lines
            .iter()
            .filter(|line| line.starts_with(SKIP_PREFIX))
            .collect()
    }

    pub fn counters(&self) -> FailoverCounters {
        self.sup.counters()
    }

    pub fn current(&self) -> Option<&str> {
        self.sup.current().map(|u| u.as_str())
    }

    /// Kill the current channel hard: backoff with MIN_ATTEMPTS attempts.
    pub fn current_dies(&mut self) {
        let attempts = self.sup.thresholds().min_attempts;
        self.backoff(attempts);
    }
}

pub fn thresholds() -> Thresholds {
    Thresholds::default()
}

pub fn no_exempt() -> Thresholds {
    Thresholds {
        exempt: false,
        ..Thresholds::default()
    }
}

/// Scene 4 up to "A stopped, switched to B, both A URLs cooling": the pool-drain setup.
pub fn drained_on_b(thresholds: Thresholds) -> Rig {
    let mut rig = Rig::production(thresholds);
    rig.current_dies(); // host A down: A1 and A2 dead
    rig.tick();
    assert_eq!(rig.opening(), Some(A2));
    rig.open_fail(A2); // continuation goes straight on to B
    assert_eq!(rig.opening(), Some(B));
    rig.open_ok(B);
    assert_eq!(rig.current(), Some(B));
    rig.clear();
    rig
}

/// `[U0, U1]`, attached to U0, which dies: U1's clean open fails at 2 s, its exemption at 4 s,
/// and the tick at 6 s schedules the first probe round (`PROBE_MIN_MS` later).
pub fn u1_spent_first_round_scheduled(thresholds: Thresholds) -> Rig {
    let mut rig = Rig::new(thresholds);
    rig.directory(&[U0, U1]);
    rig.open_ok(U0);
    rig.current_dies();
    rig.now = MonoMs(2_000);
    rig.tick();
    rig.open_fail(U1); // clean
    rig.now = MonoMs(4_000);
    rig.tick();
    rig.open_fail(U1); // exemption spent
    rig.now = MonoMs(6_000);
    rig.tick();
    rig
}

/// A variable lookup over fixed pairs (the caller's `std::env::var` in production).
pub fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}
