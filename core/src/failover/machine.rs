//! The failover supervisor: one channel, a candidate list, a cooldown table, one open in flight.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::config::Thresholds;
use super::types::*;
use crate::MonoMs;

/// The largest candidate list the machine accepts; a larger directory is rejected whole.
pub const MAX_CANDIDATES: usize = 8192;
/// Every input pushes at most a handful of outputs; the caller drains them after each input.
pub const MAX_PENDING_OUTPUTS: usize = 16;
/// FO-D2a: the cooldown table (and the passed-over set) hold at most this many URLs: every
/// listed one, plus URLs that left the list while cooling. When full, the unlisted entry that
/// expires first is dropped to make room.
pub const MAX_TRACKED_URLS: usize = 2 * MAX_CANDIDATES;
/// How many unlisted entries a full table drops at once, earliest-expiring first.
const EVICTION_BATCH: usize = MAX_TRACKED_URLS / 16;

/// An open the machine is waiting on. At most one exists.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PendingOpen {
    pub url: RelayUrl,
    pub origin: Origin,
    pub reason: SwitchReason,
    pub exemption: Option<Exemption>,
    /// FO-X3: a probe; its failure changes only the probe schedule.
    pub probe: bool,
    pub started_at: MonoMs,
}

/// FO-X3: the probe schedule once the exemption budget is spent and the channel is still dead.
/// A round probes each cooling candidate once, one at a time, in FO-D5 order; when every one
/// failed, the next round is due after an interval that doubles from `PROBE_MIN_MS` to
/// `PROBE_MAX_MS`. Reset whenever the chain moves or the channel recovers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProbeSchedule {
    /// Rounds that ended with every probe failed since the last reset (the doubling exponent).
    pub rounds_failed: u32,
    /// When the next round is due; a round is under way while this is `<= now`.
    pub next_round_at: Option<MonoMs>,
    /// Candidates probed in the round under way.
    pub probed: BTreeSet<RelayUrl>,
}

/// The relay-failover state machine (sans-IO).
///
/// Inputs: [`handle_tick`](Self::handle_tick), [`handle_directory`](Self::handle_directory),
/// [`handle_channel_state`](Self::handle_channel_state),
/// [`handle_open_succeeded`](Self::handle_open_succeeded),
/// [`handle_open_failed`](Self::handle_open_failed). Outputs: [`poll_output`](Self::poll_output),
/// [`poll_timeout`](Self::poll_timeout), [`stats`](Self::stats).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Supervisor {
    thresholds: Thresholds,
    /// Shared, because it changes only on a directory update while the machine is cloned for
    /// every state the model checker explores.
    candidates: Arc<[RelayUrl]>,
    current: Option<RelayUrl>,
    channel: ChannelState,
    /// When the current channel left `Healthy` (FO-H-1); `None` while healthy.
    left_healthy_at: Option<MonoMs>,
    /// FO-D2 / FO-D10: keyed by URL, in memory only.
    cooling: BTreeMap<RelayUrl, CooldownEntry>,
    /// The earliest `until` in `cooling`: a tick prunes only when something expired, so a tick
    /// with nothing to do stays O(1). Always exactly derived from `cooling`.
    cooling_expiry_bound: Option<MonoMs>,
    /// FO-X2: candidates whose open failed since the chain last moved. Orders the clean
    /// candidates (untried first) so the chain moves on even with cooldown 0; never excludes.
    /// FO-X2a: with cooldown > 0 a URL leaves this set when its cooldown expires, so an expired
    /// URL is an ordinary clean candidate again.
    passed_over: BTreeSet<RelayUrl>,
    probe: ProbeSchedule,
    /// FO-X3: the adapter's random shortening of the next probe interval (at most a quarter).
    probe_jitter_ms: u64,
    open_in_flight: Option<PendingOpen>,
    last_skip_logged_at: Option<MonoMs>,
    next_tick_at: MonoMs,
    counters: Counters,
    outputs: VecDeque<Output>,
}

impl Supervisor {
    pub fn new(thresholds: Thresholds, now: MonoMs) -> Supervisor {
        Supervisor {
            thresholds,
            candidates: Arc::from(Vec::new()),
            current: None,
            channel: ChannelState::Healthy,
            left_healthy_at: None,
            cooling: BTreeMap::new(),
            cooling_expiry_bound: None,
            passed_over: BTreeSet::new(),
            probe: ProbeSchedule::default(),
            probe_jitter_ms: 0,
            open_in_flight: None,
            last_skip_logged_at: None,
            next_tick_at: now.plus_ms(thresholds.check_ms),
            counters: Counters::default(),
            outputs: VecDeque::new(),
        }
    }

    // ---- inputs -------------------------------------------------------------------------

    /// The periodic health check (every `CHECK_MS`).
    ///
    /// While an open is in flight the tick does nothing: that open is already bounded by
    /// `UP_TIMEOUT_MS`, and a second one would break "one open in flight".
    pub fn handle_tick(&mut self, now: MonoMs) {
        self.next_tick_at = now.plus_ms(self.thresholds.check_ms);
        // FO-H-2: MIN_ATTEMPTS=0 switches the supervisor off.
        if !self.thresholds.supervisor_enabled() || self.open_in_flight.is_some() {
            return;
        }
        self.prune_expired(now);
        if !self.is_unhealthy(now) {
            return;
        }
        if self.health_step(now, true) {
            return;
        }
        // FO-X3: the budget is spent and the channel still dead: the first round is due one
        // interval from now.
        if self.thresholds.probing_enabled() && self.probe.next_round_at.is_none() {
            self.probe.next_round_at = Some(self.probe_due_after(now));
        }
        self.counters.no_candidate_checks += 1;
        let throttled = self
            .last_skip_logged_at
            .is_some_and(|at| now.since_ms(at) < self.thresholds.grace_ms);
        if !throttled {
            self.last_skip_logged_at = Some(now);
            let excluded = self
                .candidates
                .iter()
                .filter(|url| !self.is_clean(url, now))
                .count();
            self.emit(Event::Skipped(Skip::NoCandidate {
                health: self.health_snapshot(now),
                candidates: self.candidates.len(),
                excluded,
                exempt_enabled: self.thresholds.exempt,
                next_probe_in_ms: self.probe.next_round_at.map(|at| at.since_ms(now)),
            }));
        }
    }

    /// A directory refresh: the ordered candidate list and where it came from.
    ///
    /// The list replaces the previous one; if its first URL is not the current one, the
    /// directory path asks for a switch to it (FO-D1: never through cooldown).
    pub fn handle_directory(
        &mut self,
        now: MonoMs,
        urls: &[RelayUrl],
        source: DirectorySource,
    ) -> DirectoryOutcome {
        if urls.is_empty() || urls.len() > MAX_CANDIDATES {
            let why = if urls.is_empty() {
                DirectoryRejection::Empty
            } else {
                DirectoryRejection::TooMany {
                    count: urls.len(),
                    max: MAX_CANDIDATES,
                }
            };
            self.emit(Event::Skipped(Skip::DirectoryRejected { why }));
            return DirectoryOutcome::Rejected;
        }
        let mut candidates: Vec<RelayUrl> = Vec::with_capacity(urls.len());
        let mut seen = BTreeSet::new();
        for url in urls {
            // A duplicate keeps its first position.
            if seen.insert(url) {
                candidates.push(url.clone());
            }
        }
        self.candidates = Arc::from(candidates);
        // FO-D2a: the cooldown table and the passed-over set are keyed by URL, not by list
        // membership: a URL that leaves the list keeps its entry (and its exemption budget)
        // until it expires. Both stay bounded where they grow (`cool`, `pass_over`).

        let first = self.candidates[0].clone();
        if self.current.as_ref() == Some(&first) {
            return DirectoryOutcome::Unchanged;
        }
        if self
            .open_in_flight
            .as_ref()
            .is_some_and(|open| open.url == first)
        {
            return DirectoryOutcome::Unchanged;
        }
        let reason = SwitchReason::DirectoryChanged { source };
        if self.replace(now, first, reason, Origin::Directory) {
            DirectoryOutcome::Opening
        } else {
            DirectoryOutcome::Refused
        }
    }

    /// The current channel's state. Reports about any other URL are stale and ignored.
    pub fn handle_channel_state(&mut self, now: MonoMs, url: &RelayUrl, state: ChannelState) {
        if self.current.as_ref() != Some(url) {
            return;
        }
        match (self.channel, state) {
            // FO-H-1: the unhealthy clock starts when the channel leaves healthy, not earlier.
            (ChannelState::Healthy, ChannelState::Backoff { .. }) => {
                self.left_healthy_at = Some(now);
            }
            (_, ChannelState::Healthy) => {
                self.left_healthy_at = None;
                // FO-X3: the channel recovered by itself; a later outage starts a new schedule.
                self.probe = ProbeSchedule::default();
            }
            (ChannelState::Backoff { .. }, ChannelState::Backoff { .. }) => {}
        }
        self.channel = state;
    }

    /// The open of `url` succeeded: switch to it (make-before-break: close the old one now).
    pub fn handle_open_succeeded(&mut self, now: MonoMs, url: &RelayUrl) -> bool {
        let Some(open) = self.take_pending(url) else {
            return false;
        };
        let old = self.current.replace(open.url.clone());
        self.channel = ChannelState::Healthy;
        self.left_healthy_at = None;
        if self.cooling.remove(&open.url).is_some() {
            self.cooling_expiry_bound = self.cooling.values().map(|e| e.until).min();
        }
        self.passed_over.clear();
        self.probe = ProbeSchedule::default();
        match old {
            None => self.emit(Event::Attached {
                url: open.url,
                origin: open.origin,
            }),
            Some(old) => {
                self.cool(
                    old.clone(),
                    CooldownEntry {
                        kind: CooldownKind::SwitchedAway,
                        since: now,
                        until: now.plus_ms(self.thresholds.cooldown_ms),
                        exempted_at: None,
                    },
                );
                self.counters.switches += 1;
                if open.exemption.is_some() {
                    self.counters.exempt_switches += 1;
                }
                if open.probe {
                    self.counters.probe_switches += 1;
                }
                self.emit(Output::Action(Action::Close { url: old.clone() }));
                self.emit(Event::Switched(SwitchRecord {
                    seq: self.counters.switches,
                    from: old,
                    to: open.url,
                    origin: open.origin,
                    reason: open.reason,
                    cooldown_ms: self.thresholds.cooldown_ms,
                    exemption: open.exemption,
                    probe: open.probe,
                    open_took_ms: now.since_ms(open.started_at),
                }));
            }
        }
        true
    }

    /// The open of `url` failed or timed out: keep the old channel, cool the target.
    ///
    /// On the health path the chain continues at once with the next untried candidate, so a
    /// dead first candidate costs one open, not one tick (FO-X1).
    pub fn handle_open_failed(
        &mut self,
        now: MonoMs,
        url: &RelayUrl,
        failure: OpenFailure,
    ) -> bool {
        let Some(open) = self.take_pending(url) else {
            return false;
        };
        let exempt = open.exemption.is_some();
        self.counters.open_failed += 1;
        if open.probe {
            // FO-X3: a failed probe changes only the probe schedule.
            self.probe.probed.insert(open.url.clone());
        } else {
            // FO-D4: a failed exempt open restarts the cycle and spends its exemption.
            self.cool(
                open.url.clone(),
                CooldownEntry {
                    kind: CooldownKind::OpenFailed,
                    since: now,
                    until: now.plus_ms(self.thresholds.cooldown_ms),
                    exempted_at: exempt.then_some(now),
                },
            );
            // FO-X2: with cooldown 0 the entry above cools nothing; this moves the chain on.
            self.pass_over(open.url.clone());
        }
        self.emit(Event::Skipped(Skip::OpenFailed {
            url: open.url,
            failure,
            exempt,
            probe: open.probe,
            cooldown_ms: self.thresholds.cooldown_ms,
        }));
        if open.origin == Origin::Health
            && self.thresholds.supervisor_enabled()
            && self.is_unhealthy(now)
        {
            // Time may have passed while the open was in flight (a timeout).
            self.prune_expired(now);
            self.health_step(now, false);
        }
        true
    }

    // ---- outputs ------------------------------------------------------------------------

    /// The next action or event, in the order they were decided.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the next tick is due; `None` while the supervisor is off (FO-H-2).
    pub fn poll_timeout(&self) -> Option<MonoMs> {
        self.thresholds
            .supervisor_enabled()
            .then_some(self.next_tick_at)
    }

    /// The earliest instant after `now` at which a tick could decide differently than a tick at
    /// `now`: the channel turning unhealthy, a cooldown ending, the skip-line throttle ending.
    /// The model checker advances abstract time to these instants.
    pub fn next_change_at(&self, now: MonoMs) -> Option<MonoMs> {
        let mut earliest: Option<MonoMs> = None;
        let mut consider = |at: MonoMs| {
            if at > now && earliest.is_none_or(|e| at < e) {
                earliest = Some(at);
            }
        };
        if let (Some(left), ChannelState::Backoff { .. }) = (self.left_healthy_at, self.channel) {
            consider(left.plus_ms(self.thresholds.grace_ms));
        }
        for entry in self.cooling.values() {
            consider(entry.until);
        }
        if let Some(at) = self.last_skip_logged_at {
            consider(at.plus_ms(self.thresholds.grace_ms));
        }
        if let Some(at) = self.probe.next_round_at {
            consider(at);
        }
        earliest
    }

    /// FO-D7: counters, the current URL and the cooldown list (entries still cooling at `now`).
    pub fn stats(&self, now: MonoMs) -> Stats {
        Stats {
            counters: self.counters,
            current: self.current.clone(),
            cooldown: self
                .cooling
                .iter()
                .filter(|(_, entry)| entry.is_cooling(now))
                .map(|(url, entry)| CooldownView {
                    url: url.clone(),
                    kind: entry.kind,
                    until: entry.until,
                    left_ms: entry.until.since_ms(now),
                    exempted_this_cycle: entry.exempted_this_cycle(),
                })
                .collect(),
        }
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    pub fn current(&self) -> Option<&RelayUrl> {
        self.current.as_ref()
    }

    pub fn candidates(&self) -> &[RelayUrl] {
        &self.candidates
    }

    pub fn open_in_flight(&self) -> Option<&PendingOpen> {
        self.open_in_flight.as_ref()
    }

    pub fn cooldown_entry(&self, url: &RelayUrl) -> Option<&CooldownEntry> {
        self.cooling.get(url)
    }

    /// FO-X3: the probe schedule.
    pub fn probe_schedule(&self) -> &ProbeSchedule {
        &self.probe
    }

    /// FO-X3: the adapter's jitter for the next probe interval it schedules: the interval is
    /// shortened by this, at most by a quarter, so `PROBE_MAX_MS` stays a bound.
    pub fn set_probe_jitter_ms(&mut self, jitter_ms: u64) {
        self.probe_jitter_ms = jitter_ms;
    }

    /// FO-X2: URLs whose open failed since the chain last moved (the `passed_over` set).
    pub fn tried_since_last_move(&self) -> &BTreeSet<RelayUrl> {
        &self.passed_over
    }

    pub fn cooldown_table(&self) -> &BTreeMap<RelayUrl, CooldownEntry> {
        &self.cooling
    }

    pub fn channel_state(&self) -> Option<ChannelState> {
        self.current.as_ref().map(|_| self.channel)
    }

    /// FO-H-1 / FO-H-2: unhealthy only in backoff, and only once it has made `MIN_ATTEMPTS`
    /// failed attempts or been in backoff for `GRACE_MS` since it left healthy. No channel at
    /// all counts as unhealthy.
    pub fn is_unhealthy(&self, now: MonoMs) -> bool {
        if !self.thresholds.supervisor_enabled() {
            return false;
        }
        if self.current.is_none() {
            return true;
        }
        match self.channel {
            ChannelState::Healthy => false,
            ChannelState::Backoff { attempts } => {
                attempts >= self.thresholds.min_attempts
                    || self.unhealthy_for_ms(now) >= self.thresholds.grace_ms
            }
        }
    }

    /// FO-D3: a clean candidate is listed, not current, not cooling.
    pub fn is_clean(&self, url: &RelayUrl, now: MonoMs) -> bool {
        self.current.as_ref() != Some(url) && !self.is_cooling(url, now)
    }

    pub fn is_cooling(&self, url: &RelayUrl, now: MonoMs) -> bool {
        self.cooling.get(url).is_some_and(|e| e.is_cooling(now))
    }

    // ---- decisions ----------------------------------------------------------------------

    /// The health path: first clean candidate (untried first), else the one-hop exemption,
    /// else (FO-X3) a probe when a round is due. Returns whether an open was started.
    /// `new_round` lets a tick start a new round over candidates that all failed since the
    /// chain last moved; the in-tick continuation after a failed open may not, so one tick
    /// tries each candidate at most once.
    fn health_step(&mut self, now: MonoMs, new_round: bool) -> bool {
        debug_assert!(self.open_in_flight.is_none());
        let reason = SwitchReason::Unhealthy {
            health: self.health_snapshot(now),
        };
        match self.pick_clean(now, new_round) {
            CleanPick::Target(target) => self.replace(now, target, reason, Origin::Health),
            // FO-D3: while a clean candidate exists the exemption branch is never entered.
            CleanPick::AllTriedThisRound => false,
            CleanPick::None => match self.pick_exempt_target(now, new_round) {
                Some(target) => self.replace(now, target, reason, Origin::Health),
                None => self.probe_step(now, reason),
            },
        }
    }

    /// FO-X3: when a round is due, probe the next cooling candidate not yet probed in it, in
    /// FO-D5 order. A round with every candidate probed ends here and schedules the next one.
    fn probe_step(&mut self, now: MonoMs, reason: SwitchReason) -> bool {
        if !self.thresholds.probing_enabled() || self.probe.next_round_at.is_none_or(|at| at > now)
        {
            return false;
        }
        let target = self
            .cooling_in_exemption_order(now)
            .find(|url| !self.probe.probed.contains(*url))
            .cloned();
        if let Some(target) = target {
            self.counters.probe_opens += 1;
            return self.start_open(now, target, reason, Origin::Health, None, true);
        }
        if !self.probe.probed.is_empty() {
            self.probe.rounds_failed = self.probe.rounds_failed.saturating_add(1);
            let next_round_at = self.probe_due_after(now);
            self.probe.next_round_at = Some(next_round_at);
            self.emit(Event::Skipped(Skip::ProbeRoundFailed {
                probed: self.probe.probed.len(),
                next_round_at,
                interval_ms: next_round_at.since_ms(now),
            }));
            self.probe.probed.clear();
        }
        false
    }

    /// FO-X3: `now` + the interval for the next round, less the adapter's jitter (at most a
    /// quarter of the interval).
    fn probe_due_after(&self, now: MonoMs) -> MonoMs {
        let interval_ms = self.thresholds.probe_interval_ms(self.probe.rounds_failed);
        now.plus_ms(interval_ms - self.probe_jitter_ms.min(interval_ms / 4))
    }

    fn pick_clean(&mut self, now: MonoMs, new_round: bool) -> CleanPick {
        let untried = self
            .candidates
            .iter()
            .find(|url| self.is_clean(url, now) && !self.passed_over.contains(*url));
        if let Some(url) = untried {
            return CleanPick::Target(url.clone());
        }
        let Some(any_clean) = self.candidates.iter().find(|url| self.is_clean(url, now)) else {
            return CleanPick::None;
        };
        if !new_round {
            return CleanPick::AllTriedThisRound;
        }
        let url = any_clean.clone();
        self.passed_over.clear();
        CleanPick::Target(url)
    }

    /// FO-D6 / FO-D5: the single place that chooses an exemption. Listed, cooling, not current,
    /// not yet exempted this cycle; `switched-away` before `open-failed`, then earliest `until`,
    /// then directory order. The in-tick continuation skips URLs that already failed since the
    /// chain last moved: a URL is never reopened in the same tick it just failed in.
    fn pick_exempt_target(&self, now: MonoMs, new_round: bool) -> Option<RelayUrl> {
        if !self.thresholds.exempt {
            return None; // FO-D6-OFF
        }
        self.cooling_in_exemption_order(now)
            .filter(|url| new_round || !self.passed_over.contains(*url))
            .find(|url| {
                self.cooling
                    .get(*url)
                    .is_some_and(|entry| !entry.exempted_this_cycle())
            })
            .cloned()
    }

    /// FO-D5: the listed, cooling URLs other than the current one, `switched-away` before
    /// `open-failed`, then earliest `until`, then directory order.
    fn cooling_in_exemption_order(&self, now: MonoMs) -> impl Iterator<Item = &RelayUrl> {
        let mut ranked: Vec<_> = self
            .candidates
            .iter()
            .enumerate()
            .filter(|(_, url)| self.current.as_ref() != Some(*url))
            .filter_map(|(index, url)| {
                let entry = self.cooling.get(url)?;
                entry
                    .is_cooling(now)
                    .then_some(((entry.kind, entry.until, index), url))
            })
            .collect();
        ranked.sort_unstable_by_key(|(key, _)| *key);
        ranked.into_iter().map(|(_, url)| url)
    }

    /// The one way to change the channel. Returns whether an open was started.
    ///
    /// FO-R5: only listed targets. FO-D1: a cooling target is refused on the directory path;
    /// on the health path it is an exemption and must be eligible for one.
    fn replace(
        &mut self,
        now: MonoMs,
        target: RelayUrl,
        reason: SwitchReason,
        origin: Origin,
    ) -> bool {
        if let Some(open) = &self.open_in_flight {
            let in_flight = open.url.clone();
            self.emit(Event::Skipped(Skip::OpenInFlight {
                requested: target,
                in_flight,
            }));
            return false;
        }
        if !self.candidates.contains(&target) {
            self.emit(Event::Skipped(Skip::NotInList {
                url: target,
                origin,
            }));
            return false;
        }
        assert!(
            self.current.as_ref() != Some(&target),
            "replace() is never asked to switch to the current channel"
        );
        let mut exemption = None;
        if let Some(entry) = self.cooling.get_mut(&target) {
            if entry.is_cooling(now) {
                let eligible = origin == Origin::Health
                    && self.thresholds.exempt
                    && !entry.exempted_this_cycle();
                if !eligible {
                    let skip = Skip::StillCooling {
                        url: target,
                        origin,
                        left_ms: entry.until.since_ms(now),
                        of_ms: entry.until.since_ms(entry.since),
                    };
                    self.emit(Event::Skipped(skip));
                    return false;
                }
                entry.exempted_at = Some(now);
                exemption = Some(Exemption {
                    kind: entry.kind,
                    remaining_ms: entry.until.since_ms(now),
                });
            }
        }
        self.start_open(now, target, reason, origin, exemption, false)
    }

    fn start_open(
        &mut self,
        now: MonoMs,
        target: RelayUrl,
        reason: SwitchReason,
        origin: Origin,
        exemption: Option<Exemption>,
        probe: bool,
    ) -> bool {
        // FO-R5 holds for every open, the probe's included.
        assert!(self.candidates.contains(&target) && self.current.as_ref() != Some(&target));
        assert!(self.open_in_flight.is_none(), "one open in flight");
        self.emit(Output::Action(Action::Open {
            url: target.clone(),
            timeout_ms: self.thresholds.up_timeout_ms,
            exempt: exemption.is_some(),
            probe,
        }));
        self.open_in_flight = Some(PendingOpen {
            url: target,
            origin,
            reason,
            exemption,
            probe,
            started_at: now,
        });
        true
    }

    fn cool(&mut self, url: RelayUrl, entry: CooldownEntry) {
        if self.cooling.len() >= MAX_TRACKED_URLS && !self.cooling.contains_key(&url) {
            self.evict_earliest_unlisted();
        }
        match self.cooling.insert(url, entry) {
            // The replaced entry may have been the earliest.
            Some(_) => self.cooling_expiry_bound = self.cooling.values().map(|e| e.until).min(),
            None => {
                let bound = self
                    .cooling_expiry_bound
                    .map_or(entry.until, |b| b.min(entry.until));
                self.cooling_expiry_bound = Some(bound);
            }
        }
        debug_assert_eq!(
            self.cooling_expiry_bound,
            self.cooling.values().map(|e| e.until).min()
        );
    }

    /// FO-D2a: the table is full; drop the unlisted entries that expire first: a batch of
    /// `EVICTION_BATCH`, so a full table costs one sort per batch, not one per insert. Listed
    /// URLs and the current one never number more than `MAX_CANDIDATES + 1`, so the batch
    /// always finds unlisted entries.
    fn evict_earliest_unlisted(&mut self) {
        let listed: BTreeSet<&RelayUrl> = self.candidates.iter().chain(&self.current).collect();
        let mut unlisted: Vec<(MonoMs, RelayUrl)> = self
            .cooling
            .iter()
            .filter(|(url, _)| !listed.contains(url))
            .map(|(url, entry)| (entry.until, url.clone()))
            .collect();
        assert!(
            !unlisted.is_empty(),
            "a full cooldown table holds unlisted URLs"
        );
        unlisted.sort_unstable();
        for (_, victim) in unlisted.into_iter().take(EVICTION_BATCH) {
            self.cooling.remove(&victim);
            self.passed_over.remove(&victim);
        }
        self.cooling_expiry_bound = self.cooling.values().map(|e| e.until).min();
    }

    /// FO-X2: remember a failed candidate until the chain moves on, within the table's bound.
    fn pass_over(&mut self, url: RelayUrl) {
        self.passed_over.insert(url);
        if self.passed_over.len() > MAX_TRACKED_URLS {
            let candidates = &self.candidates;
            self.passed_over.retain(|url| candidates.contains(url));
        }
    }

    /// Drops the entries that no longer cool anything, once one has expired. FO-X2a: a URL
    /// whose cooldown (> 0) expired is no longer passed over either.
    fn prune_expired(&mut self, now: MonoMs) {
        if self.cooling_expiry_bound.is_some_and(|bound| bound <= now) {
            let cooldown_on = self.thresholds.cooldown_ms > 0;
            let passed_over = &mut self.passed_over;
            self.cooling.retain(|url, entry| {
                let keep = entry.is_cooling(now);
                if !keep && cooldown_on {
                    passed_over.remove(url);
                }
                keep
            });
            self.cooling_expiry_bound = self.cooling.values().map(|e| e.until).min();
        }
    }

    fn take_pending(&mut self, url: &RelayUrl) -> Option<PendingOpen> {
        if self.open_in_flight.as_ref().map(|open| &open.url) != Some(url) {
            return None; // a result for an open we are not waiting on: stale, ignored
        }
        self.open_in_flight.take()
    }

    fn unhealthy_for_ms(&self, now: MonoMs) -> u64 {
        self.left_healthy_at.map_or(0, |at| now.since_ms(at))
    }

    fn health_snapshot(&self, now: MonoMs) -> HealthSnapshot {
        HealthSnapshot {
            state: self.current.as_ref().map(|_| self.channel),
            unhealthy_for_ms: self.unhealthy_for_ms(now),
            min_attempts: self.thresholds.min_attempts,
            grace_ms: self.thresholds.grace_ms,
        }
    }

    fn emit(&mut self, output: impl Into<Output>) {
        assert!(
            self.outputs.len() < MAX_PENDING_OUTPUTS,
            "outputs not drained: the caller must poll_output() after every input"
        );
        self.outputs.push_back(output.into());
    }
}

enum CleanPick {
    Target(RelayUrl),
    AllTriedThisRound,
    None,
}

impl From<Event> for Output {
    fn from(event: Event) -> Output {
        Output::Event(event)
    }
}
