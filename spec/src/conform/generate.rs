//! Generated failover journals (CONF-3's figure, and the conformance tests' material): the
//! core's [`Supervisor`] driven by a seeded pseudo-random environment, journaled exactly as the
//! driver journals it (`adapters/src/failover/driver.rs`): the input, the effect "adopted" right
//! after a successful open the core took, then each output in `poll_output` order, each followed
//! by the effect that carries it out (an open started, a channel closed).

use std::collections::BTreeSet;

use switchyard_core::failover::{
    ChannelAction, ChannelState, DirectorySource, FailoverEffect, FailoverInput, FailoverRecord,
    OpenFailure, Output, RelayUrl, Supervisor, Thresholds,
};
use switchyard_core::journal::{JournalLine, JournalRecord};
use switchyard_core::MonoMs;

/// A small deterministic generator (SplitMix64): the same seed gives the same journal.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The thresholds of generated journals: short, so a few hundred events see every path
/// (cooldowns expiring, exemptions, probes).
#[must_use]
pub fn generated_thresholds() -> Thresholds {
    Thresholds {
        cooldown_ms: 20_000,
        deadline_ms: 30_000,
        grace_ms: 3_000,
        min_attempts: 3,
        check_ms: 1_000,
        up_timeout_ms: 2_000,
        exempt: true,
        probe_min_ms: 4_000,
        probe_max_ms: 16_000,
        ..Thresholds::default()
    }
}

/// One simulated client writing its journal under `key`.
#[derive(Debug)]
pub struct SimulatedClient {
    key: String,
    sup: Supervisor,
    rng: Rng,
    now: MonoMs,
    seq: u64,
    urls: Vec<RelayUrl>,
    list: Vec<RelayUrl>,
    /// The channels the simulated driver holds (adopted, not yet closed).
    channels: BTreeSet<RelayUrl>,
    pending: Vec<JournalLine>,
}

impl SimulatedClient {
    /// A client with `thresholds`, a list of four URLs, seeded by `seed`. Its first lines are
    /// the start and the first directory update.
    #[must_use]
    pub fn new(key: &str, seed: u64, thresholds: Thresholds) -> SimulatedClient {
        let urls: Vec<RelayUrl> = ["wss://a/r", "wss://b/r", "wss://c/r", "wss://d/r"]
            .iter()
            .map(RelayUrl::new)
            .collect();
        let mut client = SimulatedClient {
            key: key.to_owned(),
            sup: Supervisor::new(thresholds, MonoMs::ZERO),
            rng: Rng(seed),
            now: MonoMs::ZERO,
            seq: 0,
            list: urls[..3].to_vec(),
            urls,
            channels: BTreeSet::new(),
            pending: Vec::new(),
        };
        client.push(FailoverRecord::Start { thresholds });
        let list = client.list.clone();
        client.input(FailoverInput::Directory {
            urls: list,
            source: DirectorySource::Cache,
        });
        client
    }

    fn push(&mut self, record: FailoverRecord) {
        self.pending.push(JournalLine {
            key: self.key.clone(),
            seq: self.seq,
            at_ms: self.now.0,
            rec: JournalRecord::Failover(record),
        });
        self.seq += 1;
    }

    /// Gives the core one input and journals it, its outputs and the effects, as the driver does.
    fn input(&mut self, input: FailoverInput) {
        let now = self.now;
        self.push(FailoverRecord::Input(input.clone()));
        match &input {
            FailoverInput::Tick { jitter_ms } => {
                self.sup.set_probe_jitter_ms(*jitter_ms);
                self.sup.handle_tick(now);
            }
            FailoverInput::Directory { urls, source } => {
                self.sup.handle_directory(now, urls, *source);
            }
            FailoverInput::ChannelState { url, state } => {
                self.sup.handle_channel_state(now, url, *state);
            }
            FailoverInput::OpenSucceeded { url } => {
                if self.sup.handle_open_succeeded(now, url) {
                    self.push(FailoverRecord::Effect(FailoverEffect::Adopted {
                        url: url.clone(),
                    }));
                    self.channels.insert(url.clone());
                }
            }
            FailoverInput::OpenFailed { url, failure } => {
                self.sup.handle_open_failed(now, url, *failure);
            }
        }
        while let Some(output) = self.sup.poll_output() {
            self.push(FailoverRecord::Output(output.clone()));
            match output {
                Output::Action(ChannelAction::Open { url, .. }) => {
                    self.push(FailoverRecord::Effect(FailoverEffect::OpenStarted { url }));
                }
                Output::Action(ChannelAction::Close { url }) => {
                    if self.channels.remove(&url) {
                        self.push(FailoverRecord::Effect(FailoverEffect::Closed { url }));
                    }
                }
                Output::Event(_) => {}
            }
        }
    }

    /// One step of the environment: time passes, then one input chosen at random among those
    /// a real client can see now.
    pub fn step(&mut self) {
        self.now = self.now.plus_ms(1 + self.rng.below(1_500));
        let open = self.sup.open_in_flight().map(|p| p.url().clone());
        let choice = self.rng.below(100);
        let input = match (choice, open, self.sup.current().cloned()) {
            (0..=29, Some(url), _) => match self.rng.below(3) {
                0 => FailoverInput::OpenSucceeded { url },
                1 => FailoverInput::OpenFailed {
                    url,
                    failure: OpenFailure::Failed,
                },
                _ => FailoverInput::OpenFailed {
                    url,
                    failure: OpenFailure::TimedOut,
                },
            },
            (30..=59, _, Some(current)) => FailoverInput::ChannelState {
                url: current,
                state: if self.rng.below(3) == 0 {
                    ChannelState::Healthy
                } else {
                    ChannelState::Backoff {
                        attempts: u32::try_from(self.rng.below(6)).unwrap_or(0),
                    }
                },
            },
            (60..=63, _, _) => {
                // A new list: rotated, sometimes with the fourth URL in place of one.
                let mut list = self.urls.clone();
                let rotate = usize::try_from(self.rng.below(4)).unwrap_or(0);
                list.rotate_left(rotate);
                list.truncate(3);
                self.list.clone_from(&list);
                FailoverInput::Directory {
                    urls: list,
                    source: DirectorySource::Cache,
                }
            }
            _ => FailoverInput::Tick {
                jitter_ms: self.rng.below(1_000),
            },
        };
        self.input(input);
    }

    /// A scripted input at `now` (not before the last one), journaled as the driver does.
    pub fn give(&mut self, now: MonoMs, input: FailoverInput) {
        self.now = self.now.max(now);
        self.input(input);
    }

    /// The lines journaled since the last call.
    pub fn take_lines(&mut self) -> Vec<JournalLine> {
        std::mem::take(&mut self.pending)
    }
}

/// The FO-D1 scene the conformance tests edit: attached to `wss://a/r`, a turns unhealthy, the
/// tick switches to `wss://b/r` (a cools), then a directory update listing a first asks to go
/// back to a, which the directory path refuses while a cools.
pub fn switched_then_directory(client: &mut SimulatedClient) {
    let a = RelayUrl::new("wss://a/r");
    let b = RelayUrl::new("wss://b/r");
    client.give(MonoMs(100), FailoverInput::OpenSucceeded { url: a.clone() });
    let unhealthy = ChannelState::Backoff { attempts: 3 };
    client.give(
        MonoMs(1_000),
        FailoverInput::ChannelState {
            url: a.clone(),
            state: unhealthy,
        },
    );
    client.give(MonoMs(5_000), FailoverInput::Tick { jitter_ms: 0 });
    client.give(
        MonoMs(5_100),
        FailoverInput::OpenSucceeded { url: b.clone() },
    );
    let urls = vec![a, b, RelayUrl::new("wss://c/r")];
    let source = DirectorySource::Cache;
    client.give(MonoMs(6_000), FailoverInput::Directory { urls, source });
}

/// [`switched_then_directory`]'s journal with its one hand-put bug: the directory path's
/// refusal of the cooling `wss://a/r` edited into an open of it. Returns the edited index.
///
/// # Panics
/// If `lines` holds no still-cooling refusal (the scene was not the one above).
pub fn edit_refusal_into_open(lines: &mut [JournalLine]) -> usize {
    let at = lines
        .iter()
        .position(|l| {
            matches!(&l.rec, JournalRecord::Failover(FailoverRecord::Output(Output::Event(e)))
                if format!("{e:?}").contains("StillCooling"))
        })
        .expect("the scene's journal holds the directory path's refusal");
    let open = ChannelAction::Open {
        url: RelayUrl::new("wss://a/r"),
        timeout_ms: 2_000,
        exempt: false,
        probe: false,
    };
    lines[at].rec = JournalRecord::Failover(FailoverRecord::Output(Output::Action(open)));
    at
}

/// A journal of about `lines` lines from `clients` simulated clients, interleaved, seeded by
/// `seed`; `out` receives each line in order.
pub fn generate(lines: u64, clients: u32, seed: u64, mut out: impl FnMut(&JournalLine)) {
    let mut all: Vec<SimulatedClient> = (0..clients.max(1))
        .map(|i| {
            SimulatedClient::new(
                &format!("client-{i}"),
                seed ^ u64::from(i).wrapping_mul(0x2545_F491_4F6C_DD1D),
                generated_thresholds(),
            )
        })
        .collect();
    let mut written = 0u64;
    let mut rng = Rng(seed);
    while written < lines {
        let i = usize::try_from(rng.below(all.len() as u64)).unwrap_or(0);
        let client = &mut all[i];
        if client.pending.is_empty() {
            client.step();
        }
        for line in client.take_lines() {
            out(&line);
            written += 1;
        }
    }
}
