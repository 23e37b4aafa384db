//! `FailoverModel`: the real [`Supervisor`] in an environment as wide as what the adapter can
//! hand it, at small bounds.
//!
//! Real inputs and how the environment covers them:
//! - ticks: at `poll_timeout()`, each preceded by the channel's report (attempts grow past
//!   `MIN_ATTEMPTS` by one, so below, at and above are all reached); and a bounded number of
//!   late ticks, [`MODEL_TICK_LATENESS_MS`] after it, where a threshold falls in that lateness;
//! - directory updates: any ordered subset of the URL universe, the empty list included
//!   (rejected), so a URL leaves the list and comes back; a pinned URL (`--url`) is a one-URL
//!   list, which is among them (its source changes only the log text). Each is signed (FO-S1):
//!   the next sequence, or (refused unless the same list) the same sequence, a lower one with
//!   a later expiry, an expired one, all through the core's `check_freshness`;
//! - channel reports at any instant: healthy (while its relay is up), backoff with 1,
//!   `MIN-1`, `MIN`, `MIN+1` attempts, a blip on a live channel included;
//! - open results: success (relay up), failure and timeout (relay down, or a transient failure
//!   of a live relay), the timeout `UP_TIMEOUT_MS` after the open started;
//! - time: ticks, and steps to 1 ms before, at and after the next instant at which the core
//!   could decide differently (a cooldown ending, the grace ending, a probe round due), so
//!   inputs land on and around each threshold;
//! - the adapter's probe jitter: none, or the largest (`Variant::ProbeJitter`).
//!
//! Left out, and why:
//! - results for an open not in flight and reports about another URL: the core ignores them
//!   (tested in `core/tests/fo_h_health.rs` and the proptests), and each would only
//!   add states;
//! - lists longer than the universe, duplicates and more than 8192 URLs: the core deduplicates
//!   and rejects before any decision (unit-tested), so they reach the same states;
//! - a tick while an open is in flight: the core does nothing then (the open resolves first);
//! - threshold values: four variants scaled to ticks ([`Variant::thresholds`]), the rest is the
//!   proptests' job (`core/tests/fo_props.rs`, the oracle comparison);
//! - every budget is per run (`FailoverParams`): more of each kind are the simulation's and
//!   the proptests' job;
//! - at the review bound, two directory updates under the largest probe jitter: the
//!   probe-jitter variant makes one (`max_jitter_directory_updates`), the production variant
//!   two without jitter. Jitter only moves when a probe round is due; the second update under
//!   it was 10.5 M of 28.7 M states (the review check ran 73–78 s against its 60 s).
//!   `--jitter-directory-updates 2` explores it; the oracle proptests
//!   (`spec/tests/failover_oracle.rs`) mix jitter and any number of updates at random.

mod projection;
mod properties;
mod state;
mod step;

pub use projection::*;
pub use properties::*;
pub use state::*;

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock, PoisonError};

use serde::{Deserialize, Serialize};
use stateright::{Model, Property};

use crate::failover_oracle::{core_decisions, core_view_agrees, FoOracle};
use crate::halt::Halt;
use switchyard_core::failover::*;
use switchyard_core::MonoMs;

/// The largest URL universe the model takes (its records are arrays indexed by URL, its
/// bitmasks `u8`); the directory lists of 8 URLs (109,601) would not fit a `u16` list index.
pub const MAX_MODEL_URLS: usize = 7;
/// The most hosts the model takes (a bit each in [`HostsUp`]).
pub const MAX_MODEL_HOSTS: usize = 8;

/// One tick of model time, in ms. The other thresholds are small multiples of it.
pub const MODEL_CHECK_MS: u64 = 1_000;
pub const MODEL_GRACE_MS: u64 = 2_000;
pub const MODEL_UP_TIMEOUT_MS: u64 = 2_000;
pub const MODEL_COOLDOWN_MS: u64 = 6_000;
pub const MODEL_MIN_ATTEMPTS: u32 = 3;
pub const MODEL_PROBE_MIN_MS: u64 = 2_000;
pub const MODEL_PROBE_MAX_MS: u64 = 4_000;

/// How late a late tick comes after `poll_timeout()` ([`FoAction::LateTick`]): half a tick.
/// The adapter's driver sleeps until `poll_timeout()`; a loaded runtime wakes it later. The
/// model explores ticks on time and this late, a bounded number per run.
pub const MODEL_TICK_LATENESS_MS: u64 = MODEL_CHECK_MS / 2;

/// FO-S1: the wall clock of the model's signed directories, in Unix seconds at model time 0
/// (model time in ms is added to it). The signer's clock, not the core's.
pub const MODEL_EPOCH_UNIX_S: u64 = 1_767_225_600;
/// FO-S1: the expiry every fresh signed list carries (one hour after the model's epoch, far
/// beyond any horizon: a constant, so it splits no states).
pub const MODEL_FRESH_EXPIRY_UNIX_S: u64 = MODEL_EPOCH_UNIX_S + 3_600;

/// FO-S1: a signed directory update that the freshness rule must refuse (a fresh one is
/// [`FoAction::Directory`]: the next sequence, unexpired).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signing {
    /// The sequence of the last accepted list: taken only if the list is that same list.
    SameSequence,
    /// A lower sequence than the last accepted one (a replay), with a *later* expiry than the
    /// accepted list's: ordering by expiry instead of sequence would take it.
    Replayed,
    /// The next sequence, but expired: its expiry is the model's wall clock now.
    Expired,
}

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
    /// Production with the largest probe jitter the adapter can add (FO-X3).
    ProbeJitter,
}

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::Production,
        Variant::ExemptOff,
        Variant::CooldownZero,
        Variant::SupervisorOff,
        Variant::ProbeJitter,
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
            ..Thresholds::default()
        };
        match self {
            Variant::Production | Variant::ProbeJitter => scaled,
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

/// A model URL's name, kept for the life of the process: a `'static` URL clones without a
/// reference count, and the checker's threads clone the universe's few URLs in every state
/// (as `Arc`s their shared counts were a third of the failover CPU time on two threads). At
/// most 8 hosts × 255 names (`wss://<host letter>/<index>`), each leaked once.
fn static_name(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

/// The model's size knobs. Every environment move beyond ticks and host events has a budget per
/// run, so the wide environment stays finite while each kind of input is still explored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverParams {
    /// Candidate URLs served by each host, in directory order. Production: `[2, 1]`. The URL
    /// universe of the directory updates.
    pub urls_per_host: Vec<u8>,
    /// Time horizon, in cooldown periods.
    pub cycles: u32,
    pub variants: Vec<Variant>,
    /// Host down/up events in one run. Scene 4 needs three.
    pub max_host_events: u8,
    /// Directory updates in one run, each with any ordered subset of the URL universe (the
    /// empty list included: rejected).
    pub max_directory_updates: u8,
    /// Channel reports in one run besides the one before each tick: a blip on a live channel,
    /// a recovery, attempts below, at and above `MIN_ATTEMPTS`, at any instant.
    pub max_channel_reports: u8,
    /// Steps of time to 1 ms before, at and after the next threshold instant between ticks.
    pub max_odd_time_steps: u8,
    /// Opens of a live relay that fail or time out all the same.
    pub max_transient_failures: u8,
    /// Ticks that come [`MODEL_TICK_LATENESS_MS`] after `poll_timeout()` instead of at it.
    #[serde(default)]
    pub max_late_ticks: u8,
    /// Directory updates in one run of the [`Variant::ProbeJitter`] variant (at most
    /// `max_directory_updates`). The largest jitter moves only when a probe round is due; two
    /// directory updates under it cost 10.5 M of the review bound's 28.7 M states while the
    /// production variant explores two updates without jitter, so the review bound gives the
    /// jittered variant one (`--jitter-directory-updates 2` restores the wider run).
    /// (Left out of a trace's params at its default, so traces written before it read the same.)
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub max_jitter_directory_updates: u8,
}

fn one() -> u8 {
    1
}

fn is_one(n: &u8) -> bool {
    *n == 1
}

impl Default for FailoverParams {
    /// The review bounds: the production topology over one cooldown cycle (and the open that
    /// may time out after it), every variant, every kind of input, two channel reports, two
    /// steps of time around a threshold, two transient failures and one late tick per run, one
    /// directory update for the probe-jitter variant. 18,168,463 states (28,708,416 with two
    /// updates for the probe-jitter variant too; 21,451,669 before issue #26's late ticks and
    /// signed updates; 8,792,294 the bound before issue #15).
    fn default() -> Self {
        FailoverParams {
            urls_per_host: vec![2, 1],
            cycles: 1,
            variants: Variant::ALL.to_vec(),
            max_host_events: 4,
            max_directory_updates: 2,
            max_channel_reports: 2,
            max_odd_time_steps: 2,
            max_transient_failures: 2,
            max_late_ticks: 1,
            max_jitter_directory_updates: 1,
        }
    }
}

impl FailoverParams {
    /// The small bound of the committed trace corpus, the pinned spec test and the checker
    /// bench: every variant, one cooldown cycle, three host events, one directory update, no
    /// odd inputs (about 99 k states; every witness is reached).
    pub fn small() -> FailoverParams {
        FailoverParams {
            cycles: 1,
            max_host_events: 3,
            max_directory_updates: 1,
            max_channel_reports: 0,
            max_odd_time_steps: 0,
            max_transient_failures: 0,
            max_late_ticks: 0,
            ..FailoverParams::default()
        }
    }

    /// The directory updates a run of `variant` may make.
    pub fn directory_updates(&self, variant: Variant) -> u8 {
        match variant {
            Variant::ProbeJitter => self
                .max_directory_updates
                .min(self.max_jitter_directory_updates),
            _ => self.max_directory_updates,
        }
    }

    pub fn horizon(&self) -> MonoMs {
        MonoMs(u64::from(self.cycles) * MODEL_COOLDOWN_MS)
    }

    /// `(url, host)` in directory order: host `a` serves `wss://a/1`, `wss://a/2`, ... (the
    /// host is the URL's authority: the core's failure domain, FO-X4).
    pub fn urls(&self) -> Vec<(RelayUrl, usize)> {
        let mut urls = Vec::new();
        for (host, count) in self.urls_per_host.iter().enumerate() {
            let letter = char::from(b'a' + host as u8);
            for index in 1..=*count {
                let name = static_name(format!("wss://{letter}/{index}"));
                urls.push((RelayUrl::from_static(name), host));
            }
        }
        urls
    }

    /// Every list a directory update can carry: each ordered subset of the URL universe, as
    /// indices into [`FailoverParams::urls`], the empty list first. `FoAction::Directory`
    /// names one by its position here.
    pub fn directory_lists(&self) -> Vec<Vec<u8>> {
        fn extend(prefix: &mut Vec<u8>, n: u8, out: &mut Vec<Vec<u8>>) {
            out.push(prefix.clone());
            for next in 0..n {
                if !prefix.contains(&next) {
                    prefix.push(next);
                    extend(prefix, n, out);
                    prefix.pop();
                }
            }
        }
        let n = self.urls().len() as u8;
        let mut out = Vec::new();
        extend(&mut Vec::new(), n, &mut out);
        out
    }
}

/// A channel report the environment can make at any instant (FO-H-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "kebab-case")]
pub enum Report {
    /// Only while the current relay is up.
    Healthy,
    Backoff {
        attempts: u32,
    },
}

impl Report {
    /// The state handed to the core, and the attempts the channel has made so far.
    pub fn channel_state(self) -> (ChannelState, u32) {
        match self {
            Report::Healthy => (ChannelState::Healthy, 0),
            Report::Backoff { attempts } => (ChannelState::Backoff { attempts }, attempts),
        }
    }
}

/// The environment's moves; every one is a core input or "time advances".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum FoAction {
    /// Time advances to the next tick; the channel reports its state; the tick runs.
    Tick,
    /// The same, [`MODEL_TICK_LATENESS_MS`] after `poll_timeout()` (a late wake-up).
    LateTick,
    HostDown {
        host: u8,
    },
    HostUp {
        host: u8,
    },
    /// The open in flight comes up (its host is up).
    OpenSucceeds,
    /// The open in flight is refused at once (its host is down, or a transient failure).
    OpenFails,
    /// The open in flight times out `UP_TIMEOUT_MS` after it started.
    OpenTimesOut,
    /// A signed directory update carrying list `list` of [`FailoverParams::directory_lists`],
    /// with the next sequence and unexpired (FO-S1: fresh).
    Directory {
        list: u16,
    },
    /// FO-S1: a signed directory update with list `list` that is not fresh (`signing`): the
    /// freshness rule (the core's `check_freshness`, as the adapter calls it) decides whether
    /// the supervisor sees it.
    SignedDirectory {
        list: u16,
        signing: Signing,
    },
    /// The current channel reports a state of its own, outside the report before a tick.
    ChannelReport {
        report: Report,
    },
    /// Time steps to `offset_ms` (-1, 0 or +1) around the next instant at which the core
    /// could decide differently, before the next tick.
    OddTime {
        offset_ms: i8,
    },
}

#[derive(Debug, Clone)]
pub struct FailoverModel {
    pub params: FailoverParams,
    urls: Vec<(RelayUrl, usize)>,
    lists: Vec<Vec<RelayUrl>>,
    /// The same lists as indices into `urls`.
    list_ids: Vec<Vec<u8>>,
    /// Raised by the checker when its memory budget is reached.
    pub halt: Halt,
    /// The index of the whole universe in directory order: the list the run starts from.
    full_list: u16,
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
        // FO-X1 / FO-X2: a state over an open cap is judged (the property reports it) but not
        // explored further: an unbounded chain is a violation, not an endless search.
        // (`within_boundary` would drop the state unjudged.)
        if self.halt.is_raised() || self.over_open_caps(state) || state.core_panic.is_some() {
            return;
        }
        let budget = state.budget;
        let env_may_act = !state.env_acted_this_tick;
        // The environment's own need, not a judged decision: it answers the open the core has
        // in flight (the spec's record of it is compared in `judge`).
        if let Some(open) = state.sup.open_in_flight() {
            if self.is_live(state, open.url()) {
                actions.push(FoAction::OpenSucceeds);
                if env_may_act && budget.transient_failures > 0 {
                    actions.push(FoAction::OpenFails);
                    actions.push(FoAction::OpenTimesOut);
                }
            } else {
                actions.push(FoAction::OpenFails);
                actions.push(FoAction::OpenTimesOut);
            }
        } else if state.now < self.params.horizon() {
            actions.push(FoAction::Tick);
            // A late tick is offered where its lateness can change a decision: a threshold
            // of the core (the grace ending, a cooldown ending, a probe round falling due, the
            // skip line's throttle ending) lies after the due instant and no later than the
            // late one. Elsewhere it decides as the tick on time and only shifts the clock.
            if budget.late_ticks > 0 && self.late_tick_matters(state) {
                actions.push(FoAction::LateTick);
            }
        }
        if budget.odd_time_steps > 0 {
            for offset_ms in [-1, 0, 1] {
                if self.odd_instant(state, offset_ms).is_some() {
                    actions.push(FoAction::OddTime { offset_ms });
                }
            }
        }
        if !env_may_act {
            return;
        }
        if budget.host_events > 0 {
            for host in 0..state.host_up.count() {
                let up = state.host_up.is_up(host);
                let host = host as u8;
                actions.push(if up {
                    FoAction::HostDown { host }
                } else {
                    FoAction::HostUp { host }
                });
            }
        }
        if budget.directory_updates > 0 {
            for list in 0..self.lists.len() as u16 {
                actions.push(FoAction::Directory { list });
            }
            // FO-S1: an equal sequence with every non-empty list (the same one is taken, any
            // other refused); a replay and an expired list of the first one-URL list (refused
            // whatever the list: one suffices, and each leads to the same state).
            for list in 1..self.lists.len() as u16 {
                actions.push(FoAction::SignedDirectory {
                    list,
                    signing: Signing::SameSequence,
                });
            }
            for signing in [Signing::Replayed, Signing::Expired] {
                actions.push(FoAction::SignedDirectory { list: 1, signing });
            }
        }
        if budget.channel_reports > 0 {
            if self.is_live_id(state, state.current) {
                actions.push(FoAction::ChannelReport {
                    report: Report::Healthy,
                });
            }
            let min = state.variant.thresholds().min_attempts.max(1);
            for attempts in [1, min - 1, min, min + 1] {
                if attempts > 0 {
                    actions.push(FoAction::ChannelReport {
                        report: Report::Backoff { attempts },
                    });
                }
            }
            actions.dedup();
        }
    }

    fn next_state(&self, state: &FoState, action: FoAction) -> Option<FoState> {
        Some(self.caught_step(state, action))
    }

    fn within_boundary(&self, state: &FoState) -> bool {
        if self.halt.is_raised() {
            return false;
        }
        state.now <= self.params.horizon().plus_ms(MODEL_UP_TIMEOUT_MS)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = failover_properties();
        if self.params.cycles >= 2 {
            // Before the last entry (core invariants), with the other witnesses.
            let at = properties.len() - 1;
            properties.insert(at, properties::fo_x2a_expired_failed_candidate_witness());
        }
        properties
    }
}
