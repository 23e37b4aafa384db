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
//!   (tested in `core/tests/failover_requirements.rs` and the proptests), and each would only
//!   add states;
//! - lists longer than the universe, duplicates and more than 8192 URLs: the core deduplicates
//!   and rejects before any decision (unit-tested), so they reach the same states;
//! - a tick while an open is in flight: the core does nothing then (the open resolves first);
//! - threshold values: four variants scaled to ticks ([`Variant::thresholds`]), the rest is the
//!   proptests' job (`core/tests/failover_props.rs`, the oracle comparison);
//! - every budget is per run (`FailoverParams`): more of each kind are the simulation's and
//!   the proptests' job.

use std::collections::BTreeSet;
use std::fmt;
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
/// most 8 hosts × 255 names (`wss://<host letter><index>`), each leaked once.
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
}

impl Default for FailoverParams {
    /// The review bounds: the production topology over one cooldown cycle (and the open that
    /// may time out after it), every variant, every kind of input, two channel reports, two
    /// steps of time around a threshold and two transient failures per run. 21,451,669 states
    /// (12,074,564 with one channel report; 8,792,294 with one of each of the three, the bound
    /// before issue #15).
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

    pub fn horizon(&self) -> MonoMs {
        MonoMs(u64::from(self.cycles) * MODEL_COOLDOWN_MS)
    }

    /// `(url, host)` in directory order: host `a` serves `wss://a1`, `wss://a2`, ...
    pub fn urls(&self) -> Vec<(RelayUrl, usize)> {
        let mut urls = Vec::new();
        for (host, count) in self.urls_per_host.iter().enumerate() {
            let letter = char::from(b'a' + host as u8);
            for index in 1..=*count {
                let name = static_name(format!("wss://{letter}{index}"));
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

/// What the last step did, kept in the state so `always` properties can judge transitions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepFacts {
    pub opens_started: u8,
    pub open: Option<OpenFact>,
    pub closed_without_switch: bool,
    pub counters_regressed: bool,
    pub exempt_open_failed: bool,
    pub exempt_switch: bool,
    pub probe_switch: bool,
    pub probe_round_failed: bool,
    pub directory_switch: bool,
    pub directory_refused_by_cooldown: bool,
    pub unlisted_cooling_kept: bool,
    pub no_candidate_line: bool,
    /// FO-D2a: the core's cooling URLs differ from the spec's own record.
    pub cooldown_record_differs: bool,
    /// The core's current channel or open in flight is not the one the spec saw it open
    /// (make-before-break: only a result the environment gave ends an open, only a success
    /// changes the channel).
    pub record_differs: bool,
    /// FO-D7: a core counter differs from the spec's own tally.
    pub counters_differ: bool,
    /// FO-D6: a no-candidate `[relay-skip]` line within `GRACE_MS` of the previous one.
    pub skip_line_too_soon: bool,
    /// FO-H-1: the health path acted (opened, or logged the no-candidate line) where it may
    /// not: outside a tick or the continuation of its own failed open, or while the channel
    /// is healthy by the spec's own reading of FO-H-1.
    pub health_acted_out_of_turn: bool,
    /// FO-H-2: the health path opened something in this step.
    pub health_opened: bool,
    /// FO-ORACLE: the core decided or looks otherwise than the naive transcription.
    pub oracle_differs: bool,
    /// FO-R5a: the core adopted (switched or attached to) a URL that is not in the list the
    /// spec last fed it.
    pub adopted_unlisted: bool,
    /// FO-R5a witness: an open whose URL had left the list came up and was closed.
    pub unlisted_open_closed: bool,
    /// FO-H-1, the other direction: a tick found the channel due and unhealthy (the spec's own
    /// reading) with no open in flight, and the health path neither opened anything nor
    /// counted a no-candidate check.
    pub health_failed_to_act: bool,
    /// FO-S1: the freshness rule took a signed directory the spec's reading refuses, or
    /// refused one it takes.
    pub freshness_wrong: bool,
    /// FO-S1 witness: a signed directory that is not fresh was refused.
    pub stale_directory_refused: bool,
    /// FO-X3 interval growth: a failed probe round scheduled the next one after an interval
    /// other than the requirement's (`PROBE_MIN_MS` doubling per failed round, capped at
    /// `PROBE_MAX_MS`, less the adapter's jitter of at most a quarter).
    pub probe_interval_wrong: bool,
}

/// An open started by the last step, judged against the spec's own record of cooldown.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpenFact {
    pub origin: Origin,
    pub exempt: bool,
    pub probe: bool,
    pub listed: bool,
    pub target_was_cooling: bool,
    pub target_was_exempted_this_cycle: bool,
    pub clean_candidate_existed: bool,
    /// FO-D5, stated independently of the core: the exemptable candidate that should win.
    pub expected_exempt_target: bool,
    /// FO-D3 / FO-X2a: a clean open targets the first clean candidate in directory order.
    pub first_clean_in_directory_order: bool,
    /// FO-X3: time since the previous probe of the same URL, if any.
    pub since_previous_probe_ms: Option<u64>,
    /// FO-X3a: a probe of a URL whose open already failed in the same tick's chain.
    pub probe_of_url_failed_in_chain: bool,
}

/// The spec's own record of one URL's cooldown cycle, kept from what the spec itself saw: the
/// opens the core emitted (url, exempt, probe) and the results the environment gave them (a
/// failed non-probe open starts an open-failed cycle at the failure; a success starts a
/// switched-away cycle for the channel left and ends the target's). Never read from the core's
/// table or its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CycleRecord {
    pub kind: CooldownKind,
    pub until: MonoMs,
    /// FO-D4: the exemption of this cycle was used.
    pub exempted: bool,
}

/// An open the spec saw the core start (its `Open` action), until the environment answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpecOpen {
    /// Index into [`FailoverParams::urls`].
    pub url: u8,
    /// The spec's own reading: an open started by a directory update is the directory path's,
    /// any other the health path's.
    pub origin: Origin,
    pub exempt: bool,
    pub probe: bool,
}

/// FO-D7: the spec's own tallies, from the core's outputs and the environment's actions
/// (`u8`: a run is bounded; equal to the core's counters, so they add no states).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tally {
    /// Successful opens while a channel was current (each one `[relay-switch]` line).
    pub switches: u8,
    /// Those whose open was exempt.
    pub exempt_switches: u8,
    /// Opens that failed or timed out, probes included.
    pub open_failed: u8,
    /// Ticks that ran the health path (supervisor on, channel unhealthy, no open in flight)
    /// and started no open.
    pub no_candidate_checks: u8,
    /// Probe opens started.
    pub probe_opens: u8,
    /// Switches whose open was a probe.
    pub probe_switches: u8,
}

impl Tally {
    pub fn matches(&self, c: &Counters) -> bool {
        c.switches == u64::from(self.switches)
            && c.exempt_switches == u64::from(self.exempt_switches)
            && c.open_failed == u64::from(self.open_failed)
            && c.no_candidate_checks == u64::from(self.no_candidate_checks)
            && c.probe_opens == u64::from(self.probe_opens)
            && c.probe_switches == u64::from(self.probe_switches)
    }
}

/// Which hosts are up: a bit per host, and how many hosts there are. (A `Vec<bool>` was one
/// allocation per explored state.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostsUp {
    up_bits: u8,
    count: u8,
}

impl HostsUp {
    pub fn all(count: usize) -> HostsUp {
        assert!(count <= MAX_MODEL_HOSTS, "at most {MAX_MODEL_HOSTS} hosts");
        HostsUp {
            up_bits: (1u16 << count).wrapping_sub(1) as u8,
            count: count as u8,
        }
    }

    pub fn is_up(self, host: usize) -> bool {
        assert!(
            host < usize::from(self.count),
            "host {host} of {}",
            self.count
        );
        self.up_bits & (1 << host) != 0
    }

    pub fn set(&mut self, host: usize, up: bool) {
        assert!(
            host < usize::from(self.count),
            "host {host} of {}",
            self.count
        );
        if up {
            self.up_bits |= 1 << host;
        } else {
            self.up_bits &= !(1 << host);
        }
    }

    pub fn count(self) -> usize {
        usize::from(self.count)
    }

    pub fn to_vec(self) -> Vec<bool> {
        (0..self.count()).map(|host| self.is_up(host)).collect()
    }
}

/// What the environment may still do in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Budget {
    pub host_events: u8,
    pub directory_updates: u8,
    pub channel_reports: u8,
    pub odd_time_steps: u8,
    pub transient_failures: u8,
    pub late_ticks: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FoState {
    pub variant: Variant,
    pub sup: Supervisor,
    pub now: MonoMs,
    pub host_up: HostsUp,
    /// The attempts of the last report the spec fed about the current channel; 0: healthy.
    pub attempts: u32,
    /// FO-H-1, the spec's own record: since when the current channel has been in backoff (the
    /// report that took it out of healthy).
    pub backoff_since: Option<MonoMs>,
    pub switch_lines: u64,
    /// Ticks since the chain last ended while unhealthy with a live, eligible candidate.
    pub stall_ticks: u8,
    /// FO-X1/FO-X2: opens started since the last tick (its own included), and since time last
    /// advanced. Reset by the tick and by time, so they split few states.
    pub opens_this_tick: u8,
    pub opens_this_instant: u8,
    /// The environment acts at most once per tick (a host event, a directory update, a report,
    /// a transient failure): without time passing, cooldown 0 would otherwise let counters
    /// grow without bound.
    pub env_acted_this_tick: bool,
    pub budget: Budget,
    /// The spec's own record of the candidate list: the last non-empty list it fed, an index
    /// into [`FailoverParams::directory_lists`] (the empty list is rejected).
    pub list: u16,
    /// The spec's own record of the current URL (index into [`FailoverParams::urls`]): set when
    /// an open it saw start succeeds.
    pub current: u8,
    /// The open the spec saw start and the environment has not answered yet.
    pub opening: Option<SpecOpen>,
    /// FO-D7: the spec's own tallies.
    pub tally: Tally,
    /// FO-D6: when the spec last saw the no-candidate `[relay-skip]` line.
    pub skip_line_at: Option<MonoMs>,
    /// The spec's own cooldown record (FO-D1, FO-D2a, FO-D3, FO-D4, FO-D5), by URL index
    /// (into [`FailoverParams::urls`]; arrays, not maps: no allocation, no string compare).
    pub cycles: [Option<CycleRecord>; MAX_MODEL_URLS],
    /// FO-X3: when each URL was last probed, by URL index.
    pub last_probe_at: [Option<MonoMs>; MAX_MODEL_URLS],
    /// FO-X3: since when the client has been off a live channel while a listed relay is up.
    pub recovery_wait_since: Option<MonoMs>,
    /// FO-S1: the spec's own record of the sequence of the last accepted signed directory (its
    /// list is `list`).
    pub sequence: u8,
    /// FO-X3a: the URLs (a bit per index) whose open failed since the last tick: the failures
    /// of the tick's chain. Reset by every tick.
    pub chain_failed: u8,
    /// FO-ORACLE: the naive transcription of the rules, fed every input the core gets.
    pub oracle: FoOracle,
    pub last: StepFacts,
    /// A core invariant (or another panic) fired in the step that led here: its message
    /// (`crate::caught`). Nothing is explored from such a state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_panic: Option<String>,
}

/// One input, handed to the core and to the oracle alike.
enum Input<'a> {
    Tick,
    Directory(&'a [RelayUrl]),
    Channel(&'a RelayUrl, ChannelState),
    OpenSucceeded(&'a RelayUrl),
    OpenFailed(&'a RelayUrl, OpenFailure),
}

impl FoState {
    /// Feeds `input` at `self.now` to the core and the oracle; returns the core's outputs and
    /// records whether the two decided alike (FO-ORACLE).
    fn feed(&mut self, input: Input<'_>) -> Vec<Output> {
        let now = self.now;
        let oracle = match input {
            Input::Tick => {
                self.sup.handle_tick(now);
                self.oracle.tick(now)
            }
            Input::Directory(urls) => {
                self.sup
                    .handle_directory(now, urls, DirectorySource::Signed);
                self.oracle.directory(now, urls)
            }
            Input::Channel(url, report) => {
                self.sup.handle_channel_state(now, url, report);
                self.oracle.channel_state(now, url, report)
            }
            Input::OpenSucceeded(url) => {
                self.sup.handle_open_succeeded(now, url);
                self.oracle.open_succeeded(now, url)
            }
            Input::OpenFailed(url, failure) => {
                self.sup.handle_open_failed(now, url, failure);
                self.oracle.open_failed(now, url, failure)
            }
        };
        let mut outputs = Vec::new();
        while let Some(output) = self.sup.poll_output() {
            outputs.push(output);
        }
        if core_decisions(&outputs, &self.sup) != oracle
            || !core_view_agrees(&self.sup, &self.oracle, now)
        {
            self.last.oracle_differs = true;
        }
        outputs
    }
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

/// The spec's own reading of the configuration it gave the core (never the core's answer):
/// FO-H-2, the supervisor is off when `MIN_ATTEMPTS` is 0.
fn spec_supervisor_on(t: &Thresholds) -> bool {
    t.min_attempts != 0
}

/// FO-X3 / FO-D6-OFF: probing needs the exemption on and `PROBE_MAX_MS` other than 0.
fn spec_probing_on(t: &Thresholds) -> bool {
    t.exempt && t.probe_max_ms != 0
}

impl FailoverModel {
    pub fn new(params: FailoverParams) -> FailoverModel {
        assert!(!params.urls_per_host.is_empty() && params.urls_per_host.len() <= MAX_MODEL_HOSTS);
        let urls = params.urls();
        assert!(
            urls.len() <= MAX_MODEL_URLS,
            "at most {MAX_MODEL_URLS} URLs"
        );
        let indices = params.directory_lists();
        let whole: Vec<u8> = (0..urls.len() as u8).collect();
        let full_list = indices
            .iter()
            .position(|l| *l == whole)
            .expect("the whole universe is one of the lists") as u16;
        let lists = indices
            .iter()
            .map(|list| {
                list.iter()
                    .map(|i| urls[usize::from(*i)].0.clone())
                    .collect()
            })
            .collect();
        FailoverModel {
            params,
            urls,
            lists,
            list_ids: indices,
            halt: Halt::default(),
            full_list,
        }
    }

    /// The actions enabled in `state` (the model's `actions`, for walks outside the checker).
    pub fn enabled_actions(&self, state: &FoState) -> Vec<FoAction> {
        let mut actions = Vec::new();
        self.actions(state, &mut actions);
        actions
    }

    /// The URLs of list `list` of [`FailoverParams::directory_lists`].
    pub fn directory_list(&self, list: u16) -> &[RelayUrl] {
        &self.lists[usize::from(list)]
    }

    /// The spec's own record of the candidate list.
    pub fn spec_list(&self, state: &FoState) -> &[RelayUrl] {
        self.directory_list(state.list)
    }

    /// The spec's own record of the candidate list, as URL indices.
    fn spec_list_ids(&self, state: &FoState) -> &[u8] {
        &self.list_ids[usize::from(state.list)]
    }

    /// The spec's own record of the current URL.
    pub fn spec_current(&self, state: &FoState) -> &RelayUrl {
        &self.urls[usize::from(state.current)].0
    }

    fn url_index(&self, url: &RelayUrl) -> u8 {
        self.url_index_of(url)
            .expect("every model URL is in the universe")
    }

    /// The index of `url` in the universe, if it is one of its URLs. (The core hands back the
    /// `Arc`s it was given, so `==` is mostly a pointer compare.)
    fn url_index_of(&self, url: &RelayUrl) -> Option<u8> {
        self.urls
            .iter()
            .position(|(u, _)| u == url)
            .map(|i| i as u8)
    }

    fn is_live(&self, state: &FoState, url: &RelayUrl) -> bool {
        self.is_live_id(state, self.url_index(url))
    }

    fn is_live_id(&self, state: &FoState, url: u8) -> bool {
        state.host_up.is_up(self.urls[usize::from(url)].1)
    }

    /// FO-X2: a tick's chain opens each other candidate at most once (a clean or an exempt
    /// open: the failed one is passed over until the chain moves on, FO-D4 allows one
    /// exemption per cycle), plus at most one probe round over the other candidates (FO-X3:
    /// a URL at most once per interval; a round that ends schedules the next one at least
    /// `PROBE_MIN_MS` less jitter later), plus one directory-path open (the environment acts
    /// once per tick, and a directory update starts at most one open): `2 (N - 1) + 1` for a
    /// universe of `N` URLs (the current one is never opened).
    pub fn tick_open_cap(&self) -> u8 {
        let others = self.urls.len() as u8 - 1;
        2 * others + 1
    }

    /// FO-X1 / FO-X2 at one instant: at most two chains touch an instant (the one whose open
    /// fails or times out at it, and the tick at it: `CHECK_MS > 0`, so one tick per
    /// instant), each opening every other candidate at most once; one probe per URL (the probe
    /// interval is > 0); one directory-path open on each side of the tick. `3 (N - 1) + 2`.
    /// A chain stuck re-opening failed candidates at one instant exceeds it; the model stops
    /// there (`actions`) instead of searching without end.
    pub fn instant_open_cap(&self) -> u8 {
        let others = self.urls.len() as u8 - 1;
        3 * others + 2
    }

    /// FO-X2 counted per cooldown cycle: a chain whose opens time out can outlast a cooldown,
    /// and a URL whose cycle ended in it is a clean candidate again (FO-X2a), so the chain may
    /// open each candidate once more per cycle it spans. The cap of a chain that began at the
    /// last tick (the core's next tick less `CHECK_MS`) and has run `elapsed` ms is
    /// [`Self::tick_open_cap`] × (1 + `elapsed` / `COOLDOWN_MS`); with cooldown 0 (or the
    /// supervisor off) it is the tick's cap.
    pub fn chain_open_cap(&self, state: &FoState) -> u8 {
        let t = state.variant.thresholds();
        let cap = self.tick_open_cap();
        let Some(next_tick) = state.sup.poll_timeout() else {
            return cap;
        };
        if t.cooldown_ms == 0 {
            return cap;
        }
        let began = MonoMs(next_tick.as_ms().saturating_sub(t.check_ms));
        let cycles = 1 + state.now.since_ms(began) / t.cooldown_ms;
        u8::try_from(u64::from(cap).saturating_mul(cycles)).unwrap_or(u8::MAX)
    }

    fn over_open_caps(&self, state: &FoState) -> bool {
        state.opens_this_tick > self.chain_open_cap(state)
            || state.opens_this_instant > self.instant_open_cap()
    }

    /// The spec's record: is URL `url` (an index) cooling at `at`?
    fn spec_cooling(state: &FoState, url: u8, at: MonoMs) -> bool {
        state.cycles[usize::from(url)].is_some_and(|c| c.until > at)
    }

    /// FO-H-1 as the spec states it, from the reports it fed and the configuration it gave:
    /// unhealthy only in backoff, and only once `MIN_ATTEMPTS` attempts were made or the
    /// channel has been in backoff for `GRACE_MS` since it left healthy. FO-H-2: never with
    /// `MIN_ATTEMPTS=0`.
    pub fn spec_unhealthy(state: &FoState) -> bool {
        let t = state.variant.thresholds();
        spec_supervisor_on(&t)
            && state.attempts > 0
            && (state.attempts >= t.min_attempts
                || state
                    .backoff_since
                    .is_some_and(|since| state.now.since_ms(since) >= t.grace_ms))
    }

    /// A live candidate the health path may still use: clean, or exemptable. From the spec's
    /// own list, current URL and configuration.
    pub fn live_eligible_exists(&self, state: &FoState) -> bool {
        let exempt_on = state.variant.thresholds().exempt;
        self.spec_list_ids(state).iter().any(|&url| {
            if !self.is_live_id(state, url) || state.current == url {
                return false;
            }
            match state.cycles[usize::from(url)] {
                Some(cycle) if cycle.until > state.now => exempt_on && !cycle.exempted,
                _ => true,
            }
        })
    }

    /// FO-D5 as the spec states it, from its own record: among the listed, cooling,
    /// not-yet-exempted URLs other than the current one (and, within a tick's chain, other than
    /// those it already tried, a bit per URL index), switched-away before open-failed, then
    /// earliest `until`, then directory order. The URL index of the winner.
    fn expected_exempt_target(&self, state: &FoState, now: MonoMs, tried: u8) -> Option<u8> {
        let mut best: Option<((u8, MonoMs, usize), u8)> = None;
        for (index, &url) in self.spec_list_ids(state).iter().enumerate() {
            if state.current == url || tried & (1 << url) != 0 {
                continue;
            }
            let Some(cycle) = state.cycles[usize::from(url)] else {
                continue;
            };
            if cycle.until <= now || cycle.exempted {
                continue;
            }
            let rank = match cycle.kind {
                CooldownKind::SwitchedAway => 0,
                CooldownKind::OpenFailed => 1,
            };
            let key = (rank, cycle.until, index);
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, url));
            }
        }
        best.map(|(_, url)| url)
    }

    /// Time advances to `to` (or stays): the per-instant open count starts over.
    fn advance(state: &mut FoState, to: MonoMs) {
        if to != state.now {
            state.opens_this_instant = 0;
            state.now = to;
        }
    }

    /// The spec's record of the channel it reports about (FO-H-1): healthy, or in backoff
    /// since the report that took it out of healthy.
    fn note_report(state: &mut FoState, report: ChannelState) {
        match report {
            ChannelState::Healthy => {
                state.attempts = 0;
                state.backoff_since = None;
            }
            ChannelState::Backoff { attempts } => {
                if state.attempts == 0 {
                    state.backoff_since = Some(state.now);
                }
                state.attempts = attempts;
            }
        }
    }

    /// The step function: the real core, fed the action, outputs drained and judged.
    pub fn step(&self, before: &FoState, action: FoAction) -> FoState {
        let mut state = before.clone();
        state.last = StepFacts::default();
        let sup_before = &before.sup;
        // What a chain continuing after a failed open has already tried (a tick starts afresh):
        // the passed-over set of the spec's own transcription (FO-X2), not the core's.
        let mut tried = 0u8;
        let mut failed_origin = None;
        let mut transient = false;
        let mut outputs = Vec::new();
        // Who may open in this step, as the spec reads the rules: the directory path only on a
        // directory update; the health path only on a tick that finds the channel unhealthy
        // with no open in flight, or right after its own open failed while still unhealthy.
        let mut origin = Origin::Health;
        let mut health_may_act = false;
        let mut tick_ran_health = false;
        match action {
            FoAction::Tick | FoAction::LateTick => {
                // The environment's own need: when the core asked to be woken (or, a bounded
                // number of times per run, half a tick after that).
                let next = state
                    .sup
                    .poll_timeout()
                    .unwrap_or(state.now.plus_ms(MODEL_CHECK_MS));
                let lateness = if action == FoAction::LateTick {
                    state.budget.late_ticks -= 1;
                    MODEL_TICK_LATENESS_MS
                } else {
                    0
                };
                let to = next.plus_ms(lateness).max(state.now);
                Self::advance(&mut state, to);
                state.env_acted_this_tick = false;
                state.opens_this_tick = 0;
                state.chain_failed = 0;
                outputs.extend(self.report_channel(&mut state));
                self.expire_records(&mut state);
                tick_ran_health = state.opening.is_none() && Self::spec_unhealthy(&state);
                health_may_act = tick_ran_health;
                outputs.extend(state.feed(Input::Tick));
            }
            FoAction::HostDown { host } | FoAction::HostUp { host } => {
                state
                    .host_up
                    .set(usize::from(host), matches!(action, FoAction::HostUp { .. }));
                state.budget.host_events -= 1;
                state.env_acted_this_tick = true;
            }
            FoAction::OpenSucceeds => {
                // The environment answers the open the core has in flight.
                let url = state.sup.open_in_flight().expect("enabled").url.clone();
                let listed = self.spec_list(&state).contains(&url);
                let current_before = state.sup.current().cloned();
                outputs.extend(state.feed(Input::OpenSucceeded(&url)));
                // FO-R5a, judged from the spec's own list at the moment of adoption.
                let current_after = state.sup.current();
                state.last.adopted_unlisted = current_after != current_before.as_ref()
                    && current_after.is_some_and(|c| !self.spec_list(&state).contains(c));
                state.last.unlisted_open_closed =
                    !listed && current_after == current_before.as_ref();
                self.record_success(&mut state, &url);
            }
            FoAction::OpenFails | FoAction::OpenTimesOut => {
                let pending = state.sup.open_in_flight().expect("enabled").clone();
                if self.is_live(&state, &pending.url) {
                    transient = true;
                    state.budget.transient_failures -= 1;
                    state.env_acted_this_tick = true;
                }
                let failure = if action == FoAction::OpenTimesOut {
                    let at = pending
                        .started_at
                        .plus_ms(MODEL_UP_TIMEOUT_MS)
                        .max(state.now);
                    Self::advance(&mut state, at);
                    OpenFailure::TimedOut
                } else {
                    OpenFailure::Failed
                };
                self.expire_records(&mut state);
                tried = before
                    .oracle
                    .passed_over()
                    .iter()
                    .chain([&pending.url])
                    .filter_map(|url| self.url_index_of(url))
                    .fold(0, |bits, url| bits | 1 << url);
                if let Some(u) = self.url_index_of(&pending.url) {
                    state.chain_failed |= 1 << u;
                }
                outputs.extend(state.feed(Input::OpenFailed(&pending.url, failure)));
                let failed = self.record_failure(&mut state, &pending.url);
                failed_origin = failed.map(|open| open.origin);
                state.last.exempt_open_failed = failed.is_some_and(|open| open.exempt);
                health_may_act =
                    failed_origin == Some(Origin::Health) && Self::spec_unhealthy(&state);
            }
            FoAction::SignedDirectory { list, signing } => {
                // A refused update changes nothing but the step's facts: it spends no budget
                // (the environment still acts once per tick), so it adds a state per state,
                // not a copy of the run after it.
                state.env_acted_this_tick = true;
                origin = Origin::Directory;
                let urls = self.directory_list(list).to_vec();
                let now_unix_s = MODEL_EPOCH_UNIX_S + state.now.as_ms() / 1_000;
                let last = u64::from(state.sequence);
                let (sequence, expires_at_unix_s) = match signing {
                    Signing::SameSequence => (last, MODEL_FRESH_EXPIRY_UNIX_S),
                    Signing::Replayed => (last - 1, MODEL_FRESH_EXPIRY_UNIX_S + 3_600),
                    Signing::Expired => (last + 1, now_unix_s),
                };
                // FO-S1 as the spec reads it: an equal sequence only for the same list; a
                // lower one never, whatever its expiry; an expired one never.
                let spec_takes = signing == Signing::SameSequence && list == state.list;
                let taken = self.freshness_takes(&state, sequence, &urls, expires_at_unix_s);
                state.last.freshness_wrong = taken != spec_takes;
                state.last.stale_directory_refused = !taken && !spec_takes;
                if taken {
                    state.budget.directory_updates -= 1;
                    if !urls.is_empty() {
                        state.list = list;
                    }
                    state.sequence = u8::try_from(sequence).unwrap_or(u8::MAX);
                    outputs.extend(state.feed(Input::Directory(&urls)));
                }
            }
            FoAction::Directory { list } => {
                state.env_acted_this_tick = true;
                state.budget.directory_updates -= 1;
                origin = Origin::Directory;
                let urls = self.directory_list(list).to_vec();
                // FO-S1: the next sequence, unexpired: the spec takes it (the empty list is
                // refused by the list rule before freshness, as the adapter does).
                if !urls.is_empty() {
                    let sequence = u64::from(state.sequence) + 1;
                    let taken =
                        self.freshness_takes(&state, sequence, &urls, MODEL_FRESH_EXPIRY_UNIX_S);
                    state.last.freshness_wrong = !taken;
                    state.sequence = state.sequence.saturating_add(1);
                }
                // An empty list is rejected: the last list stays.
                if !urls.is_empty() {
                    state.list = list;
                }
                outputs.extend(state.feed(Input::Directory(&urls)));
                let given = &self.list_ids[usize::from(list)];
                state.last.unlisted_cooling_kept =
                    state.cycles.iter().zip(0u8..).any(|(cycle, url)| {
                        cycle.is_some_and(|c| c.until > state.now) && !given.contains(&url)
                    });
            }
            FoAction::ChannelReport { report } => {
                state.env_acted_this_tick = true;
                state.budget.channel_reports -= 1;
                let current = self.spec_current(&state).clone();
                let (report, _) = report.channel_state();
                Self::note_report(&mut state, report);
                outputs.extend(state.feed(Input::Channel(&current, report)));
            }
            FoAction::OddTime { offset_ms } => {
                state.budget.odd_time_steps -= 1;
                let at = self.odd_instant(&state, offset_ms).expect("enabled");
                Self::advance(&mut state, at);
                self.expire_records(&mut state);
            }
        }
        self.judge(
            sup_before,
            &mut state,
            outputs,
            Judged {
                origin,
                health_may_act,
                tick_ran_health,
            },
            tried,
        );
        self.update_stall(action, failed_origin, transient, &mut state);
        self.update_recovery(transient, &mut state);
        state
    }

    /// Whether a tick [`MODEL_TICK_LATENESS_MS`] late could decide otherwise than the tick on
    /// time: a threshold of the core lies in (due, due + lateness].
    fn late_tick_matters(&self, state: &FoState) -> bool {
        let Some(due) = state.sup.poll_timeout() else {
            return false;
        };
        let due = due.max(state.now);
        state
            .sup
            .next_change_at(due)
            .is_some_and(|at| at <= due.plus_ms(MODEL_TICK_LATENESS_MS))
    }

    /// FO-S1: whether the core's freshness rule takes a signed directory, given the last
    /// accepted one as the adapter keeps it (the spec's list and sequence).
    fn freshness_takes(
        &self,
        state: &FoState,
        sequence: u64,
        urls: &[RelayUrl],
        expires_at_unix_s: u64,
    ) -> bool {
        let accepted = AcceptedDirectory {
            sequence: u64::from(state.sequence),
            relays: self.spec_list(state).to_vec(),
            expires_at_unix_s: MODEL_FRESH_EXPIRY_UNIX_S,
        };
        let now_unix_s = MODEL_EPOCH_UNIX_S + state.now.as_ms() / 1_000;
        check_candidate_list(urls).is_ok()
            && check_freshness(
                Some(&accepted),
                sequence,
                urls,
                expires_at_unix_s,
                now_unix_s,
            )
            .is_ok()
    }

    /// A success the environment gave: the channel the spec saw current is left (a new
    /// switched-away cycle for it, one more switch), the target's cycle ends, and the target
    /// is current, on a fresh (healthy) channel.
    fn record_success(&self, state: &mut FoState, url: &RelayUrl) {
        let Some(open) = state.opening.take() else {
            state.last.record_differs = true;
            return;
        };
        if usize::from(open.url) >= self.urls.len() || &self.urls[usize::from(open.url)].0 != url {
            state.last.record_differs = true;
        }
        // FO-R5a, the spec's own reading: an open whose URL is not in the list the spec last
        // fed is closed when it comes up; the channel, the cycles and the tallies stay.
        if !self.spec_list_ids(state).contains(&open.url) {
            return;
        }
        let cooldown_ms = state.variant.thresholds().cooldown_ms;
        state.cycles[usize::from(state.current)] = Some(CycleRecord {
            kind: CooldownKind::SwitchedAway,
            until: state.now.plus_ms(cooldown_ms),
            exempted: false,
        });
        state.cycles[usize::from(open.url)] = None;
        state.current = open.url;
        let t = &mut state.tally;
        t.switches = t.switches.saturating_add(1);
        t.exempt_switches = t.exempt_switches.saturating_add(u8::from(open.exempt));
        t.probe_switches = t.probe_switches.saturating_add(u8::from(open.probe));
        Self::note_report(state, ChannelState::Healthy);
    }

    /// A failure the environment gave: one more failed open; a failed non-probe open starts an
    /// open-failed cycle at the failure instant (FO-D2), and a failed exempt open has spent
    /// the exemption of that new cycle (FO-D4: "the URL's cooldown restarts and it gets no
    /// further exemption in that cycle"); a failed probe changes no cycle (FO-X3).
    fn record_failure(&self, state: &mut FoState, url: &RelayUrl) -> Option<SpecOpen> {
        let Some(open) = state.opening.take() else {
            state.last.record_differs = true;
            return None;
        };
        if &self.urls[usize::from(open.url)].0 != url {
            state.last.record_differs = true;
        }
        state.tally.open_failed = state.tally.open_failed.saturating_add(1);
        if !open.probe {
            let cooldown_ms = state.variant.thresholds().cooldown_ms;
            state.cycles[usize::from(open.url)] = Some(CycleRecord {
                kind: CooldownKind::OpenFailed,
                until: state.now.plus_ms(cooldown_ms),
                exempted: open.exempt,
            });
        }
        Some(open)
    }

    /// The instant `offset_ms` around the core's next threshold, if it lies strictly between
    /// now and the next tick.
    fn odd_instant(&self, state: &FoState, offset_ms: i8) -> Option<MonoMs> {
        let threshold = state.sup.next_change_at(state.now)?;
        let at = MonoMs(threshold.as_ms().checked_add_signed(i64::from(offset_ms))?);
        let next_tick = state.sup.poll_timeout()?;
        (at > state.now && at < next_tick).then_some(at)
    }

    /// The channel's report before a tick, about the channel the spec saw current.
    fn report_channel(&self, state: &mut FoState) -> Vec<Output> {
        let current = self.spec_current(state).clone();
        if self.is_live_id(state, state.current) {
            if state.attempts > 0 {
                Self::note_report(state, ChannelState::Healthy);
                return state.feed(Input::Channel(&current, ChannelState::Healthy));
            }
            Vec::new()
        } else {
            // Attempts grow past MIN_ATTEMPTS by one, so "above" is explored too.
            let cap = state.variant.thresholds().min_attempts.max(1) + 1;
            let report = ChannelState::Backoff {
                attempts: (state.attempts + 1).min(cap),
            };
            Self::note_report(state, report);
            state.feed(Input::Channel(&current, report))
        }
    }

    /// A cycle ends when its cooldown does.
    fn expire_records(&self, state: &mut FoState) {
        let now = state.now;
        for cycle in &mut state.cycles {
            if cycle.is_some_and(|c| c.until <= now) {
                *cycle = None;
            }
        }
    }

    fn judge(
        &self,
        sup_before: &Supervisor,
        state: &mut FoState,
        outputs: Vec<Output>,
        judged: Judged,
        tried: u8,
    ) {
        let at = state.now;
        let t = state.variant.thresholds();
        let mut switched = false;
        for output in outputs {
            match output {
                Output::Action(Action::Open {
                    url, exempt, probe, ..
                }) => {
                    state.last.opens_started += 1;
                    state.opens_this_tick = state.opens_this_tick.saturating_add(1);
                    state.opens_this_instant = state.opens_this_instant.saturating_add(1);
                    if probe {
                        state.tally.probe_opens = state.tally.probe_opens.saturating_add(1);
                    }
                    let origin = judged.origin;
                    if origin == Origin::Health {
                        state.last.health_opened = true;
                        if !judged.health_may_act {
                            state.last.health_acted_out_of_turn = true;
                        }
                    }
                    let expected = self.expected_exempt_target(state, at, tried);
                    let first_clean = self
                        .spec_list_ids(state)
                        .iter()
                        .copied()
                        .find(|&u| state.current != u && !Self::spec_cooling(state, u, at));
                    // `None`: a URL outside the universe (FO-R5 and the record report it).
                    let url_id = self.url_index_of(&url);
                    let cycle = url_id.and_then(|u| state.cycles[usize::from(u)]);
                    let target_was_cooling = cycle.is_some_and(|c| c.until > at);
                    let listed = self.spec_list(state).contains(&url);
                    state.last.open = Some(OpenFact {
                        origin,
                        exempt,
                        probe,
                        listed,
                        target_was_cooling,
                        target_was_exempted_this_cycle: exempt && cycle.is_some_and(|c| c.exempted),
                        clean_candidate_existed: first_clean.is_some(),
                        expected_exempt_target: !exempt || (url_id.is_some() && expected == url_id),
                        first_clean_in_directory_order: exempt
                            || probe
                            || (url_id.is_some() && first_clean == url_id),
                        since_previous_probe_ms: if probe {
                            url_id
                                .and_then(|u| state.last_probe_at[usize::from(u)])
                                .map(|t| at.since_ms(t))
                        } else {
                            None
                        },
                        probe_of_url_failed_in_chain: probe
                            && url_id.is_some_and(|u| state.chain_failed & (1 << u) != 0),
                    });
                    if let Some(u) = url_id.map(usize::from) {
                        if probe {
                            state.last_probe_at[u] = Some(at);
                        }
                        if exempt {
                            if let Some(cycle) = &mut state.cycles[u] {
                                cycle.exempted = true;
                            }
                        }
                    }
                    if listed {
                        state.opening = Some(SpecOpen {
                            url: self.url_index(&url),
                            origin,
                            exempt,
                            probe,
                        });
                    } else {
                        // FO-R5 reports it; the record cannot name a URL outside the universe.
                        state.last.record_differs = true;
                    }
                }
                // FO-R5a: closing the unlisted channel that just came up is not a switch.
                Output::Action(Action::Close { url })
                    if state.last.unlisted_open_closed && !self.spec_list(state).contains(&url) => {
                }
                Output::Action(Action::Close { .. }) => switched = true,
                Output::Event(event) => {
                    match &event {
                        // Witnesses only: the spec's record follows the actions, not events.
                        Event::Switched(record) => {
                            state.last.exempt_switch = record.exemption.is_some();
                            state.last.probe_switch = record.probe;
                            state.last.directory_switch = record.origin == Origin::Directory;
                        }
                        Event::Skipped(Skip::StillCooling {
                            origin: Origin::Directory,
                            ..
                        }) => state.last.directory_refused_by_cooldown = true,
                        Event::Skipped(Skip::NoCandidate { .. }) => {
                            state.last.no_candidate_line = true;
                            // FO-D6: the line only on a no-candidate check of the health path,
                            // at most once per GRACE_MS.
                            if !judged.tick_ran_health {
                                state.last.health_acted_out_of_turn = true;
                            }
                            if state
                                .skip_line_at
                                .is_some_and(|last| at.since_ms(last) < t.grace_ms)
                            {
                                state.last.skip_line_too_soon = true;
                            }
                            state.skip_line_at = Some(at);
                        }
                        Event::Skipped(Skip::ProbeRoundFailed { interval_ms, .. }) => {
                            state.last.probe_round_failed = true;
                            // FO-X3: the interval grows from the requirement text, computed by
                            // the oracle (never by the core's helper); the oracle has counted
                            // this round already.
                            let base = state.oracle.text_interval_ms(state.oracle.rounds_failed());
                            let cut = if state.variant == Variant::ProbeJitter {
                                base / 4
                            } else {
                                0
                            };
                            if *interval_ms != base - cut {
                                state.last.probe_interval_wrong = true;
                            }
                        }
                        _ => {}
                    }
                    if renders_with_prefix(&event, SWITCH_PREFIX) {
                        state.switch_lines += 1;
                    }
                }
            }
        }
        // FO-D7: a tick that ran the health path and started no open is a no-candidate check.
        if judged.tick_ran_health && state.last.opens_started == 0 {
            state.tally.no_candidate_checks = state.tally.no_candidate_checks.saturating_add(1);
            // FO-H-1, the other direction: due and unhealthy, the tick must act (open, or
            // count the check).
            if state.sup.counters().no_candidate_checks == sup_before.counters().no_candidate_checks
            {
                state.last.health_failed_to_act = true;
            }
        }
        self.expire_records(state);
        // Only the probes of the last PROBE_MIN_MS matter to the storm bound.
        for probed_at in &mut state.last_probe_at {
            if probed_at.is_some_and(|t| at.since_ms(t) >= MODEL_PROBE_MIN_MS) {
                *probed_at = None;
            }
        }
        // The skip line's throttle matters for GRACE_MS only.
        if state
            .skip_line_at
            .is_some_and(|last| at.since_ms(last) >= t.grace_ms)
        {
            state.skip_line_at = None;
        }
        // FO-D2a / FO-D4: what cools in the core (kind, until, exemption spent) is exactly what
        // the spec's record says cools.
        // As sets of (url, kind, until, exempted): every cooling core row is one spec record
        // (a URL once), and there are as many records.
        let now = state.now;
        let mut matched = 0u8;
        let mut differs = false;
        for (url, e) in state.sup.cooldown_rows() {
            if !e.is_cooling(now) {
                continue;
            }
            let row = CycleRecord {
                kind: e.kind,
                until: e.until,
                exempted: e.exempted_this_cycle(),
            };
            match self.url_index_of(url) {
                Some(u) if matched & (1 << u) == 0 && state.cycles[usize::from(u)] == Some(row) => {
                    matched |= 1 << u;
                }
                _ => differs = true,
            }
        }
        let records = state.cycles.iter().filter(|c| c.is_some()).count();
        state.last.cooldown_record_differs = differs || records != matched.count_ones() as usize;
        // Make-before-break: the core's channel and open in flight are those the spec saw.
        let spec_open = state.opening.map(|o| {
            (
                &self.urls[usize::from(o.url)].0,
                o.origin,
                o.exempt,
                o.probe,
            )
        });
        let core_open = state
            .sup
            .open_in_flight()
            .map(|o| (&o.url, o.origin, o.exemption.is_some(), o.probe));
        if state.sup.current() != Some(self.spec_current(state)) || core_open != spec_open {
            state.last.record_differs = true;
        }
        let (b, a) = (sup_before.counters(), state.sup.counters());
        state.last.counters_differ = !state.tally.matches(&a);
        state.last.counters_regressed = a.switches < b.switches
            || a.exempt_switches < b.exempt_switches
            || a.open_failed < b.open_failed
            || a.no_candidate_checks < b.no_candidate_checks
            || a.probe_opens < b.probe_opens
            || a.probe_switches < b.probe_switches;
        state.last.closed_without_switch = switched && a.switches == b.switches;
    }

    /// FO-X1/FO-X2 bookkeeping: a tick whose chain (the tick plus the health-path opens it
    /// leads to) ends unhealthy, with no open in flight, while a live eligible candidate exists,
    /// is a stalled tick. Directory-path opens are not part of a tick's chain. A transient
    /// failure of a live relay restarts the count: that relay was not reachable. All from the
    /// spec's own records (health, open in flight, list, current).
    fn update_stall(
        &self,
        action: FoAction,
        failed_origin: Option<Origin>,
        transient: bool,
        state: &mut FoState,
    ) {
        let chain_step = match action {
            FoAction::Tick => true,
            FoAction::OpenFails | FoAction::OpenTimesOut => failed_origin == Some(Origin::Health),
            FoAction::OpenSucceeds => {
                state.stall_ticks = 0;
                return;
            }
            _ => false,
        };
        if transient {
            state.stall_ticks = 0;
            return;
        }
        if !chain_step || state.opening.is_some() {
            return;
        }
        if Self::spec_unhealthy(state) && self.live_eligible_exists(state) {
            if action == FoAction::Tick || state.stall_ticks == 0 {
                state.stall_ticks = state.stall_ticks.saturating_add(1);
            }
        } else {
            state.stall_ticks = 0;
        }
    }

    /// FO-X3 bookkeeping: the client is off a live channel while some listed relay is up.
    /// Measured only where probing is on and cooldown can drain the pool (the spec's own
    /// configuration, list and current URL).
    fn update_recovery(&self, transient: bool, state: &mut FoState) {
        let t = state.variant.thresholds();
        let on_live = self.is_live_id(state, state.current);
        let live_listed = self
            .spec_list_ids(state)
            .iter()
            .any(|&url| state.current != url && self.is_live_id(state, url));
        let waiting = spec_probing_on(&t)
            && spec_supervisor_on(&t)
            && t.cooldown_ms > 0
            && !on_live
            && live_listed;
        state.recovery_wait_since = match (waiting, state.recovery_wait_since) {
            (false, _) => None,
            (true, _) if transient => Some(state.now),
            (true, None) => Some(state.now),
            (true, Some(since)) => Some(since),
        };
    }

    /// FO-X3's bound in this model: the channel turning unhealthy (`GRACE_MS`), the exemption
    /// chain over the other candidates and each of the directory-path opens timing out, one
    /// probe interval at most (`PROBE_MAX_MS`) plus the tick that starts the round, and the
    /// probes of the dead candidates ahead of the live one timing out.
    pub fn recovery_bound_ms(&self) -> u64 {
        let others = self.urls.len() as u64 - 1;
        MODEL_GRACE_MS
            + MODEL_PROBE_MAX_MS
            + 2 * MODEL_CHECK_MS
            + u64::from(self.params.max_late_ticks) * MODEL_TICK_LATENESS_MS
            + (2 * others + u64::from(self.params.max_directory_updates)) * MODEL_UP_TIMEOUT_MS
    }

    pub fn init_state(&self, variant: Variant) -> FoState {
        let mut sup = Supervisor::new(variant.thresholds(), MonoMs::ZERO);
        let list: Vec<RelayUrl> = self.urls.iter().map(|(u, _)| u.clone()).collect();
        sup.handle_directory(MonoMs::ZERO, &list, DirectorySource::Signed);
        sup.handle_open_succeeded(MonoMs::ZERO, &list[0]);
        while sup.poll_output().is_some() {}
        let mut oracle = FoOracle::new(variant.thresholds(), MonoMs::ZERO);
        oracle.directory(MonoMs::ZERO, &list);
        oracle.open_succeeded(MonoMs::ZERO, &list[0]);
        if variant == Variant::ProbeJitter {
            sup.set_probe_jitter_ms(u64::MAX);
            oracle.set_probe_jitter_ms(u64::MAX);
        }
        let p = &self.params;
        FoState {
            variant,
            sup,
            now: MonoMs::ZERO,
            host_up: HostsUp::all(p.urls_per_host.len()),
            attempts: 0,
            backoff_since: None,
            switch_lines: 0,
            stall_ticks: 0,
            opens_this_tick: 0,
            opens_this_instant: 0,
            env_acted_this_tick: false,
            budget: Budget {
                host_events: p.max_host_events,
                directory_updates: p.max_directory_updates,
                channel_reports: p.max_channel_reports,
                odd_time_steps: p.max_odd_time_steps,
                transient_failures: p.max_transient_failures,
                late_ticks: p.max_late_ticks,
            },
            list: self.full_list,
            current: 0,
            opening: None,
            tally: Tally::default(),
            skip_line_at: None,
            cycles: [None; MAX_MODEL_URLS],
            last_probe_at: [None; MAX_MODEL_URLS],
            recovery_wait_since: None,
            chain_failed: 0,
            sequence: 1,
            oracle,
            last: StepFacts::default(),
            core_panic: None,
        }
    }

    /// [`Self::step`] under [`crate::caught::caught`]: a core invariant that fires in the step
    /// leads to the state before it with the message recorded, which the property
    /// [`crate::caught::CORE_INVARIANTS`] reports.
    pub fn caught_step(&self, state: &FoState, action: FoAction) -> FoState {
        crate::caught::caught(|| self.step(state, action)).unwrap_or_else(|message| {
            let mut next = state.clone();
            next.last = StepFacts::default();
            next.core_panic = Some(message);
            next
        })
    }
}

/// What `judge` needs to know about the step, as the spec reads the rules.
#[derive(Debug, Clone, Copy)]
struct Judged {
    /// The origin of any open this step starts.
    origin: Origin,
    /// The health path may act in this step (FO-H-1).
    health_may_act: bool,
    /// A tick ran the health path: if it opens nothing, that is a no-candidate check (FO-D7).
    tick_ran_health: bool,
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
            if self.is_live(state, &open.url) {
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
        failover_properties()
    }
}

fn open_ok(state: &FoState, check: fn(&OpenFact) -> bool) -> bool {
    state.last.open.as_ref().is_none_or(check)
}

/// The properties, each named by its requirement ID.
pub fn failover_properties() -> Vec<Property<FailoverModel>> {
    let mut properties = failover_properties_before_caught();
    properties.push(Property::always(
        crate::caught::CORE_INVARIANTS,
        |_, s: &FoState| s.core_panic.is_none(),
    ));
    properties
}

fn failover_properties_before_caught() -> Vec<Property<FailoverModel>> {
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
                let cooldown_ms = s.variant.thresholds().cooldown_ms;
                s.sup
                    .cooldown_rows()
                    .all(|(_, e)| e.until.since_ms(e.since) == cooldown_ms)
            },
        ),
        Property::always(
            "FO-D2a cooldown keyed by URL: what cools is the spec's record, list changes included",
            |_, s: &FoState| !s.last.cooldown_record_differs,
        ),
        Property::always(
            "FO-D3 no exemption while a clean candidate exists",
            |_, s: &FoState| open_ok(s, |o| !(o.exempt || o.probe) || !o.clean_candidate_existed),
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
            "FO-D6 only the health path exempts or probes, only a cooling URL",
            |_, s: &FoState| {
                open_ok(s, |o| {
                    (o.exempt || o.probe) == (o.origin == Origin::Health && o.target_was_cooling)
                        && !(o.exempt && o.probe)
                })
            },
        ),
        Property::always(
            "FO-D6-OFF no exempt open and no probe with EXEMPT=0",
            |_, s: &FoState| s.variant.thresholds().exempt || open_ok(s, |o| !o.exempt && !o.probe),
        ),
        Property::always(
            "FO-D6 no-candidate line at most once per GRACE_MS",
            |_, s: &FoState| !s.last.skip_line_too_soon,
        ),
        Property::always(
            "FO-D7 [relay-switch] lines == switches == tally; counters == tally, monotone",
            |_, s: &FoState| {
                s.switch_lines == s.sup.counters().switches
                    && s.switch_lines == u64::from(s.tally.switches)
                    && !s.last.counters_differ
                    && !s.last.counters_regressed
            },
        ),
        Property::always(
            "FO-H-1 the health path acts only when due and unhealthy",
            |_, s: &FoState| !s.last.health_acted_out_of_turn,
        ),
        Property::always(
            "FO-H-1 a tick acts when the channel is due and unhealthy",
            |_, s: &FoState| !s.last.health_failed_to_act,
        ),
        Property::always(
            "FO-R5a an open is adopted only while its URL is listed",
            |_, s: &FoState| !s.last.adopted_unlisted,
        ),
        Property::always(
            "FO-H-2 MIN_ATTEMPTS=0: the health path never acts",
            |_, s: &FoState| {
                s.variant.thresholds().min_attempts != 0
                    || (!s.last.health_opened
                        && !s.last.no_candidate_line
                        && s.tally.no_candidate_checks == 0
                        && s.sup.counters().no_candidate_checks == 0)
            },
        ),
        Property::always(
            "FO-X1 a live non-exempted candidate is reached within one tick of turning unhealthy",
            |_, s: &FoState| s.variant.thresholds().cooldown_ms == 0 || s.stall_ticks <= 1,
        ),
        Property::always(
            "FO-X1 at most 3(N-1)+2 opens at one instant",
            |m: &FailoverModel, s: &FoState| s.opens_this_instant <= m.instant_open_cap(),
        ),
        Property::always(
            "FO-X2 cooldown 0 never self-locks (same bound)",
            |_, s: &FoState| s.variant.thresholds().cooldown_ms != 0 || s.stall_ticks <= 1,
        ),
        Property::always(
            "FO-X2 at most 2(N-1)+1 opens per tick's chain and cooldown cycle",
            |m: &FailoverModel, s: &FoState| s.opens_this_tick <= m.chain_open_cap(s),
        ),
        Property::always(
            "FO-X2a with cooldown > 0 a clean open takes the first clean URL in directory order",
            |_, s: &FoState| {
                s.variant.thresholds().cooldown_ms == 0
                    || open_ok(s, |o| {
                        o.origin != Origin::Health || o.first_clean_in_directory_order
                    })
            },
        ),
        Property::always(
            "FO-X3 bounded recovery: on a live channel within the probe bound of a relay coming up",
            |m: &FailoverModel, s: &FoState| {
                s.recovery_wait_since
                    .is_none_or(|since| s.now.since_ms(since) <= m.recovery_bound_ms())
            },
        ),
        Property::always(
            "FO-X3 no probe storm: a URL is probed at most once per PROBE_MIN_MS (less jitter)",
            |_, s: &FoState| {
                open_ok(s, |o| {
                    o.since_previous_probe_ms
                        .is_none_or(|gap| gap >= MODEL_PROBE_MIN_MS - MODEL_PROBE_MIN_MS / 4)
                })
            },
        ),
        Property::always(
            "FO-S1 a signed directory is taken only when fresh: higher sequence, or equal with the same list; unexpired",
            |_, s: &FoState| !s.last.freshness_wrong,
        ),
        Property::always(
            "FO-X3a a probe never re-opens a URL that failed in the same tick's chain",
            |_, s: &FoState| open_ok(s, |o| !o.probe_of_url_failed_in_chain),
        ),
        Property::always(
            "FO-X3 the probe interval doubles from PROBE_MIN_MS up to PROBE_MAX_MS",
            |_, s: &FoState| !s.last.probe_interval_wrong,
        ),
        Property::always(
            "FO-ORACLE the core decides as the naive transcription of the FO rules",
            |_, s: &FoState| !s.last.oracle_differs,
        ),
        // Also: the core's channel and open in flight are the ones the spec saw (no switch, no
        // cancelled open, no open the spec did not see start).
        Property::always("one open in flight; make-before-break", |_, s: &FoState| {
            s.last.opens_started <= 1 && !s.last.closed_without_switch && !s.last.record_differs
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
        Property::sometimes(
            "witness: a URL left the list while cooling (FO-D2a)",
            |_, s: &FoState| s.last.unlisted_cooling_kept,
        ),
        Property::sometimes(
            "witness: a stale signed directory refused (FO-S1)",
            |_, s: &FoState| s.last.stale_directory_refused,
        ),
        Property::sometimes(
            "witness: an unlisted open closed, never adopted (FO-R5a)",
            |_, s: &FoState| s.last.unlisted_open_closed,
        ),
        Property::sometimes("witness: probe switch (FO-X3)", |_, s: &FoState| {
            s.last.probe_switch
        }),
        Property::sometimes("witness: failed probe round (FO-X3)", |_, s: &FoState| {
            s.last.probe_round_failed
        }),
        Property::sometimes("witness: cooldown-0 failover (FO-X2)", |_, s: &FoState| {
            s.variant == Variant::CooldownZero && s.tally.switches > 0
        }),
        Property::sometimes(
            "witness: second cooldown cycle reached",
            |m: &FailoverModel, s: &FoState| {
                s.now.as_ms() >= m.params.horizon().as_ms() && s.tally.switches >= 2
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
            host_up: self.host_up.to_vec(),
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
            FoAction::LateTick => write!(f, "a late tick ({MODEL_TICK_LATENESS_MS} ms late)"),
            FoAction::HostDown { host } => write!(f, "host {} goes down", host_name(*host)),
            FoAction::HostUp { host } => write!(f, "host {} comes back", host_name(*host)),
            FoAction::OpenSucceeds => write!(f, "the open succeeds"),
            FoAction::OpenFails => write!(f, "the open fails"),
            FoAction::OpenTimesOut => write!(f, "the open times out"),
            FoAction::Directory { list } => write!(f, "directory update with list #{list}"),
            FoAction::SignedDirectory { list, signing } => {
                let how = match signing {
                    Signing::SameSequence => "the same sequence",
                    Signing::Replayed => "a lower sequence and a later expiry",
                    Signing::Expired => "the next sequence, expired",
                };
                write!(f, "directory update with list #{list}, signed with {how}")
            }
            FoAction::ChannelReport { report } => match report {
                Report::Healthy => write!(f, "the channel reports healthy"),
                Report::Backoff { attempts } => {
                    write!(f, "the channel reports backoff, {attempts} attempts")
                }
            },
            FoAction::OddTime { offset_ms } => {
                write!(
                    f,
                    "time steps to {offset_ms:+} ms around the next threshold"
                )
            }
        }
    }
}

pub fn host_name(host: u8) -> char {
    char::from(b'a' + host)
}
