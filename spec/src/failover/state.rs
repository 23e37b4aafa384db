//! The model's state: what the spec records beside the core, and how an input is fed to the
//! core and the oracle alike.

use super::*;

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
    /// FO-D3 / FO-X2a / FO-X4: a clean open targets the first clean candidate in chain order
    /// (other hosts before the current channel's host and hosts whose open failed since the
    /// chain last moved; directory order within each).
    pub first_clean_in_chain_order: bool,
    /// FO-X4: a clean open on a suspect host while a clean URL on another host existed.
    pub suspect_host_before_other_host: bool,
    /// FO-X3: a probe of a URL whose exemption of this cycle is unspent (the spec's record).
    pub probe_of_unspent_exemption: bool,
    /// FO-D5 in the probe round: the probe takes the first probeable URL in exemption order.
    pub expected_probe_target: bool,
    /// FO-X3: time since the previous probe of the same URL, if any.
    pub since_previous_probe_ms: Option<u64>,
    /// FO-X3a: a probe of a URL whose open already failed in the same tick's chain.
    pub probe_of_url_failed_in_chain: bool,
    /// FO-X2a witness: with `COOLDOWN_MS > 0`, a clean open of a URL the chain had already
    /// passed over (its open failed earlier in this chain): only its cooldown having expired
    /// makes it a clean candidate again. A chain outlasts a cooldown only past the first cycle,
    /// so this is reached with `--cycles 2`, never at the one-cycle review bound.
    pub clean_reopen_after_expiry: bool,
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
    pub fn matches(&self, c: &FailoverCounters) -> bool {
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
    /// FO-X3a: the opens (of any kind) that timed out since `recovery_wait_since`: each adds
    /// one `UP_TIMEOUT_MS` to the bound (the k of the requirement).
    pub recovery_timeouts: u8,
    /// FO-X4: since when the current channel's host has been down, its loss reported, while a
    /// listed URL on another host is live and clean (`None`: not so).
    pub dark_since: Option<MonoMs>,
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
pub(super) enum Input<'a> {
    Tick,
    Directory(&'a [RelayUrl]),
    Channel(&'a RelayUrl, ChannelState),
    OpenSucceeded(&'a RelayUrl),
    OpenFailed(&'a RelayUrl, OpenFailure),
}

impl FoState {
    /// Feeds `input` at `self.now` to the core and the oracle; returns the core's outputs and
    /// records whether the two decided alike (FO-ORACLE).
    pub(super) fn feed(&mut self, input: Input<'_>) -> Vec<Output> {
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
        if core_decisions(&outputs, &self.sup, now) != oracle
            || !core_view_agrees(&self.sup, &self.oracle, now)
        {
            self.last.oracle_differs = true;
        }
        outputs
    }
}
