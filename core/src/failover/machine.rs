//! The failover supervisor: one channel, a candidate list, a cooldown table, one open in flight.
//!
//! Representation. A tick may look at every candidate, so a tick never compares, hashes or
//! copies a URL string: the list is interned once per directory update (a URL's id is its
//! position, the string is kept once), and the cooldown entry, passed-over and probed flags of
//! the listed URLs sit in a dense array indexed by that id. URLs that left the list keep theirs
//! by URL (FO-D2a) in a map that is empty unless the list changed under a cooling URL. Outputs
//! carry the shared URL strings (a reference count, never a copy of the text).
//!
//! The representation is canonical: two machines that hold the same facts are equal and hash
//! alike however they got there. The model checker dedups states by hash, so its state count
//! does not depend on the representation.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use super::config::Thresholds;
use super::interned::{Candidates, UrlState};
use super::outputs::Outputs;
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

/// The directory rule, decided in this one place: a candidate list is usable when it is not
/// empty and holds at most [`MAX_CANDIDATES`] URLs. [`Supervisor::handle_directory`] applies it
/// (a refused list keeps the last good one); the adapter calls it to refuse a signed file by
/// name before it reaches the supervisor.
pub fn check_candidate_list(urls: &[RelayUrl]) -> Result<(), DirectoryRejection> {
    if urls.is_empty() {
        return Err(DirectoryRejection::Empty);
    }
    if urls.len() > MAX_CANDIDATES {
        return Err(DirectoryRejection::TooMany {
            count: urls.len(),
            max: MAX_CANDIDATES,
        });
    }
    Ok(())
}

/// An open the machine is waiting on. At most one exists.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PendingOpen {
    url: RelayUrl,
    origin: Origin,
    reason: SwitchReason,
    exemption: Option<Exemption>,
    /// FO-X3: a probe; its failure changes only the probe schedule.
    probe: bool,
    started_at: MonoMs,
}

impl PendingOpen {
    pub fn url(&self) -> &RelayUrl {
        &self.url
    }

    pub fn origin(&self) -> Origin {
        self.origin
    }

    pub fn reason(&self) -> SwitchReason {
        self.reason
    }

    /// The exemption the open uses (FO-D6), if any.
    pub fn exemption(&self) -> Option<Exemption> {
        self.exemption
    }

    /// FO-X3: a probe; its failure changes only the probe schedule.
    pub fn probe(&self) -> bool {
        self.probe
    }

    pub fn started_at(&self) -> MonoMs {
        self.started_at
    }
}

/// FO-X3: the probe schedule once the exemption budget is spent and the channel is still dead.
/// A round probes each cooling candidate once, one at a time, in FO-D5 order; when every one
/// failed, the next round is due after an interval that doubles from `PROBE_MIN_MS` to
/// `PROBE_MAX_MS`. Reset whenever the chain moves or the channel recovers. (Which candidates
/// the round under way has probed is kept per URL, beside their cooldown entries.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProbeSchedule {
    /// Rounds that ended with every probe failed since the last reset (the doubling exponent).
    rounds_failed: u32,
    /// When the next round is due; a round is under way while this is `<= now`.
    next_round_at: Option<MonoMs>,
}

impl ProbeSchedule {
    /// Rounds that ended with every probe failed since the last reset (the doubling exponent).
    pub fn rounds_failed(&self) -> u32 {
        self.rounds_failed
    }

    /// When the next round is due; a round is under way while this is `<= now`.
    pub fn next_round_at(&self) -> Option<MonoMs> {
        self.next_round_at
    }
}

/// Facts kept only to avoid recomputing them; each is a function of the other fields
/// (`Supervisor::derived_is_exact` checks it after every input in debug builds). Equality and
/// hashing ignore them, which agrees with the machine's equality because they are derived.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Derived {
    /// The id of `current`, if listed.
    current_id: Option<u16>,
    /// FO-X4: the representative id of the current channel's host, if a listed URL is on it
    /// (listed or not, the current URL's host is the first suspect of the health chain).
    current_host: Option<u16>,
    /// The id of the open in flight's URL, if listed.
    open_id: Option<u16>,
    /// The earliest `until` in the cooldown table: a tick prunes only once something expired,
    /// so a tick with nothing to do stays O(1).
    cooling_expiry_bound: Option<MonoMs>,
    /// Rows of the cooldown table (FO-D2a bound).
    cooldown_rows: usize,
    /// URLs passed over (FO-X2).
    passed_over: usize,
    /// URLs probed in the round under way (FO-X3).
    probed: usize,
    /// A tick before this instant has nothing to do but schedule the next one: the supervisor
    /// is off, an open is in flight, or the channel is healthy and nothing in the cooldown
    /// table expires before it. Lets the common tick return after one comparison.
    quiet_until: MonoMs,
}

impl PartialEq for Derived {
    fn eq(&self, _: &Derived) -> bool {
        true
    }
}

impl Eq for Derived {}

impl Hash for Derived {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

/// The relay-failover state machine (sans-IO).
///
/// Inputs: [`handle_tick`](Self::handle_tick), [`handle_directory`](Self::handle_directory),
/// [`handle_channel_state`](Self::handle_channel_state),
/// [`handle_open_succeeded`](Self::handle_open_succeeded),
/// [`handle_open_failed`](Self::handle_open_failed); a setting:
/// [`set_probe_jitter_ms`](Self::set_probe_jitter_ms). Outputs: [`poll_output`](Self::poll_output),
/// [`poll_timeout`](Self::poll_timeout). The rest reads (the module doc says why this face).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Supervisor {
    thresholds: Thresholds,
    /// The interned list: a listed URL's id is its position.
    candidates: Candidates,
    /// FO-D2 / FO-X2 / FO-X3 for the listed URLs, indexed by id.
    listed: Vec<UrlState>,
    /// FO-D2a: the same for URLs not in the list (they left it while cooling, passed over or
    /// probed), keyed by URL: the cooldown table is keyed by URL, not by list membership, so an
    /// entry survives directory updates until it expires. Never holds an empty state.
    unlisted: BTreeMap<RelayUrl, UrlState>,
    current: Option<RelayUrl>,
    channel: ChannelState,
    /// When the current channel left `Healthy` (FO-H-1); `None` while healthy.
    left_healthy_at: Option<MonoMs>,
    probe: ProbeSchedule,
    /// FO-X3: the adapter's random shortening of the next probe interval (at most a quarter).
    probe_jitter_ms: u64,
    open_in_flight: Option<PendingOpen>,
    /// FO-X3a: the instant of the tick whose health chain runs (or ran last): an open that
    /// failed at or after it failed in that chain.
    chain_started_at: MonoMs,
    last_skip_logged_at: Option<MonoMs>,
    next_tick_at: MonoMs,
    counters: FailoverCounters,
    outputs: Outputs,
    derived: Derived,
}

impl Supervisor {
    pub fn new(thresholds: Thresholds, now: MonoMs) -> Supervisor {
        let mut sup = Supervisor {
            thresholds,
            candidates: Candidates::empty(),
            listed: Vec::new(),
            unlisted: BTreeMap::new(),
            current: None,
            channel: ChannelState::Healthy,
            left_healthy_at: None,
            probe: ProbeSchedule::default(),
            probe_jitter_ms: 0,
            open_in_flight: None,
            chain_started_at: now,
            last_skip_logged_at: None,
            next_tick_at: now.plus_ms(thresholds.check_ms),
            counters: FailoverCounters::default(),
            outputs: Outputs::default(),
            derived: Derived::default(),
        };
        sup.settle();
        sup
    }

    // ---- inputs -------------------------------------------------------------------------

    /// The periodic health check (every `CHECK_MS`).
    ///
    /// While an open is in flight the tick does nothing: that open is already bounded by
    /// `UP_TIMEOUT_MS`, and a second one would break "one open in flight".
    #[inline]
    pub fn handle_tick(&mut self, now: MonoMs) {
        self.next_tick_at = now.plus_ms(self.thresholds.check_ms);
        // The common tick, decided here without a call: nothing to do (a healthy channel with
        // nothing in the cooldown table expired, an open in flight, or the supervisor off).
        if now < self.derived.quiet_until {
            return;
        }
        self.tick_decide(now);
        self.settle();
    }

    /// The rest of a tick: prune, then the health path if the channel is unhealthy.
    #[inline(never)]
    fn tick_decide(&mut self, now: MonoMs) {
        // FO-H-2: MIN_ATTEMPTS=0 switches the supervisor off.
        if !self.thresholds.supervisor_enabled() || self.open_in_flight.is_some() {
            return;
        }
        self.prune_expired(now);
        if !self.is_unhealthy(now) {
            return;
        }
        self.chain_started_at = now;
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
            let excluded = (0..self.listed.len())
                .filter(|id| !self.is_clean_id(*id, now))
                .count();
            // EXPLAIN-1: the per-URL explanation is not in the event: building it would put a
            // heap allocation on a tick (no tick allocates, benches/tests/no_alloc.rs) or grow
            // every `Output` held inline. `exclusions(now)` answers it from this very state
            // while the caller drains this tick's outputs (`render_explained`).
            self.emit(Event::Skipped(Skip::NoCandidate {
                health: self.health_snapshot(now),
                candidates: self.listed.len(),
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
        let outcome = self.directory_decide(now, urls, source);
        self.settle();
        outcome
    }

    fn directory_decide(
        &mut self,
        now: MonoMs,
        urls: &[RelayUrl],
        source: DirectorySource,
    ) -> DirectoryOutcome {
        if let Err(why) = check_candidate_list(urls) {
            self.emit(Event::Skipped(Skip::DirectoryRejected { why }));
            return DirectoryOutcome::Rejected;
        }
        // A refresh that re-reads the same list keeps the interned one (and every id).
        if self.candidates.urls() != urls {
            self.adopt(Candidates::intern(urls));
        }
        // FO-D2a: the cooldown table and the passed-over set are keyed by URL, not by list
        // membership: a URL that leaves the list keeps its entry (and its exemption budget)
        // until it expires. Both stay bounded where they grow (`cool`, `pass_over`).

        // The first candidate has id 0.
        if self.derived.current_id == Some(0) || self.derived.open_id == Some(0) {
            return DirectoryOutcome::Unchanged;
        }
        let reason = SwitchReason::DirectoryChanged { source };
        if self.replace(now, 0, reason, Origin::Directory) {
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
                self.reset_probe_schedule();
            }
            (ChannelState::Backoff { .. }, ChannelState::Backoff { .. }) => {}
        }
        self.channel = state;
        self.settle();
    }

    /// The open of `url` succeeded: switch to it (make-before-break: close the old one now).
    /// Returns whether the new channel was adopted (the caller keeps it only then).
    ///
    /// FO-R5a: FO-R5 holds when a channel is adopted, not only when its open starts. An open
    /// whose URL left the list while it was in flight never becomes the channel: it is closed,
    /// the current channel stays, no cooldown entry or counter changes, and the next decision
    /// (a tick, a directory refresh) chooses among the listed URLs.
    pub fn handle_open_succeeded(&mut self, now: MonoMs, url: &RelayUrl) -> bool {
        let Some((open, open_id)) = self.take_pending(url) else {
            return false;
        };
        if open_id.is_none() {
            self.emit(Output::Action(ChannelAction::Close {
                url: open.url.clone(),
            }));
            self.emit(Event::Skipped(Skip::NotInList {
                url: open.url,
                origin: open.origin,
            }));
            self.settle();
            return false;
        }
        let old = self.current.replace(open.url.clone());
        let old_id = std::mem::replace(&mut self.derived.current_id, open_id);
        self.derived.current_host = open_id.map(|id| self.candidates.host(usize::from(id)));
        self.channel = ChannelState::Healthy;
        self.left_healthy_at = None;
        self.update(open_id, &open.url, |state| state.cooldown = None);
        self.clear_passed_over();
        self.reset_probe_schedule();
        match old {
            None => self.emit(Event::Attached {
                url: open.url,
                origin: open.origin,
            }),
            Some(old) => {
                self.cool(
                    old_id,
                    &old,
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
                self.emit(Output::Action(ChannelAction::Close { url: old.clone() }));
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
        self.settle();
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
        let Some((open, open_id)) = self.take_pending(url) else {
            return false;
        };
        let exempt = open.exemption.is_some();
        self.counters.open_failed += 1;
        if open.probe {
            // FO-X3: a failed probe changes only the probe schedule, and only the round it was
            // started in: an answer that comes after the schedule was reset (the channel
            // recovered, the chain moved) marks nothing.
            if self
                .probe
                .next_round_at
                .is_some_and(|at| at <= open.started_at)
            {
                self.update(open_id, &open.url, |state| state.probed = true);
            }
        } else {
            // FO-D4: a failed exempt open restarts the cycle and spends its exemption.
            self.cool(
                open_id,
                &open.url,
                CooldownEntry {
                    kind: CooldownKind::OpenFailed,
                    since: now,
                    until: now.plus_ms(self.thresholds.cooldown_ms),
                    exempted_at: exempt.then_some(now),
                },
            );
            // FO-X2: with cooldown 0 the entry above cools nothing; this moves the chain on.
            self.pass_over(open_id, &open.url);
        }
        let kept_channel = self.current.is_some();
        self.emit(Event::Skipped(Skip::OpenFailed {
            url: open.url,
            failure,
            exempt,
            kept_channel,
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
        self.settle();
        true
    }

    // ---- outputs ------------------------------------------------------------------------

    /// The next action or event, in the order they were decided.
    #[inline]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop()
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
        for entry in self.cooldown_entries() {
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

    /// FO-D7: counters, the current URL and the cooldown list (entries still cooling at `now`),
    /// in URL order.
    pub fn stats(&self, now: MonoMs) -> Stats {
        let mut cooldown: Vec<CooldownView> = self
            .url_states()
            .filter_map(|(url, state)| {
                let entry = state.cooldown.filter(|entry| entry.is_cooling(now))?;
                Some(CooldownView {
                    url: url.clone(),
                    kind: entry.kind,
                    until: entry.until,
                    left_ms: entry.until.since_ms(now),
                    exempted_this_cycle: entry.exempted_this_cycle(),
                })
            })
            .collect();
        cooldown.sort_unstable_by(|a, b| a.url.cmp(&b.url));
        Stats {
            counters: self.counters,
            current: self.current.clone(),
            cooldown,
        }
    }

    pub fn counters(&self) -> FailoverCounters {
        self.counters
    }

    pub fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    pub fn current(&self) -> Option<&RelayUrl> {
        self.current.as_ref()
    }

    pub fn candidates(&self) -> &[RelayUrl] {
        self.candidates.urls()
    }

    pub fn open_in_flight(&self) -> Option<&PendingOpen> {
        self.open_in_flight.as_ref()
    }

    pub fn cooldown_entry(&self, url: &RelayUrl) -> Option<&CooldownEntry> {
        self.state_of(url)?.cooldown.as_ref()
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

    /// EXPLAIN-1: why the listed URLs are not candidates of the health chain at `now`: the
    /// first [`MAX_EXPLAINED_EXCLUSIONS`] excluded ones in list order with the rule that
    /// excludes each, and a count of the rest. Asked right after a tick that emitted
    /// `Skip::NoCandidate` (before the next input: nothing changed since), it explains that
    /// line: there every listed URL is excluded. One pass over the list; it allocates (the
    /// caller asks once per no-candidate line, at most once per `GRACE_MS`), the tick never.
    pub fn exclusions(&self, now: MonoMs) -> Exclusions {
        let mut out = Exclusions::default();
        for id in 0..self.listed.len() {
            let Some(rule) = self.exclusion_rule(id, now) else {
                continue;
            };
            if out.named.len() < MAX_EXPLAINED_EXCLUSIONS {
                out.named.push(Exclusion {
                    url: self.candidates.url(id).clone(),
                    rule,
                });
            } else {
                out.more += 1;
            }
        }
        out
    }

    /// FO-X2: URLs whose open failed since the chain last moved (the passed-over set).
    pub fn tried_since_last_move(&self) -> BTreeSet<RelayUrl> {
        self.url_states()
            .filter(|(_, state)| state.passed_over)
            .map(|(url, _)| url.clone())
            .collect()
    }

    /// FO-D2: the cooldown table, keyed by URL (expired rows included until a tick prunes them).
    pub fn cooldown_table(&self) -> BTreeMap<RelayUrl, CooldownEntry> {
        self.url_states()
            .filter_map(|(url, state)| Some((url.clone(), state.cooldown?)))
            .collect()
    }

    /// FO-D2: the rows of the cooldown table without building a map: the listed URLs in
    /// directory order, then those that left the list in URL order.
    pub fn cooldown_rows(&self) -> impl Iterator<Item = (&RelayUrl, &CooldownEntry)> {
        self.url_states()
            .filter_map(|(url, state)| Some((url, state.cooldown.as_ref()?)))
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
        self.state_of(url)
            .is_some_and(|state| state.is_cooling(now))
    }

    // ---- decisions ----------------------------------------------------------------------

    /// The health path: first clean candidate (untried first), else the one-hop exemption,
    /// else (FO-X3) a probe when a round is due. Returns whether an open was started.
    /// `new_round` lets a tick start a new round over candidates that all failed since the
    /// chain last moved; the in-tick continuation after a failed open may not, so one tick
    /// tries each candidate at most once.
    #[inline(always)]
    fn health_step(&mut self, now: MonoMs, new_round: bool) -> bool {
        crate::invariant!(self.open_in_flight.is_none());
        let reason = SwitchReason::Unhealthy {
            health: self.health_snapshot(now),
        };
        match self.pick_clean(now, new_round) {
            CleanPick::Target(target) => self.replace(now, target, reason, Origin::Health),
            // FO-D3: while a clean candidate exists the exemption branch is never entered.
            CleanPick::AllTriedThisRound => false,
            CleanPick::None => match self.pick_exempt_target(now, new_round) {
                Some(target) => self.replace(now, target, reason, Origin::Health),
                None => self.probe_step(now, reason, new_round),
            },
        }
    }

    /// FO-X3: when a round is due, probe the next cooling candidate not yet probed in it, in
    /// FO-D5 order. A round with every candidate probed ends here and schedules the next one.
    ///
    /// FO-X3a: the in-tick continuation (`new_round == false`) never probes a URL whose open
    /// failed in the same tick's chain (an open-failed cycle that began at or after the tick
    /// that started the chain). Such a URL, not yet probed, keeps the round open for the next
    /// tick, where it is eligible again.
    fn probe_step(&mut self, now: MonoMs, reason: SwitchReason, new_round: bool) -> bool {
        if !self.thresholds.probing_enabled() || self.probe.next_round_at.is_none_or(|at| at > now)
        {
            return false;
        }
        let chain_started_at = self.chain_started_at;
        // FO-X3: only a URL whose exemption of this cycle is spent is probed (a URL with an
        // unspent one is the exemption step's); FO-X3a: not one that failed in this chain.
        let probeable = |state: &UrlState| {
            !state.probed
                && state
                    .cooldown
                    .is_some_and(|entry| entry.exempted_this_cycle())
        };
        if let Some(target) = self.first_cooling_in_exemption_order(now, |state| {
            probeable(state) && (new_round || !state.failed_since(chain_started_at))
        }) {
            self.counters.probe_opens += 1;
            return self.start_open(now, target, reason, Origin::Health, None, true);
        }
        if !new_round
            && self
                .first_cooling_in_exemption_order(now, probeable)
                .is_some()
        {
            return false; // FO-X3a: left to the next tick
        }
        if self.derived.probed > 0 {
            self.probe.rounds_failed = self.probe.rounds_failed.saturating_add(1);
            let next_round_at = self.probe_due_after(now);
            self.probe.next_round_at = Some(next_round_at);
            self.emit(Event::Skipped(Skip::ProbeRoundFailed {
                probed: self.derived.probed,
                next_round_at,
                interval_ms: next_round_at.since_ms(now),
            }));
            self.clear_probed();
        }
        false
    }

    /// FO-X3: `now` + the interval for the next round, less the adapter's jitter (at most a
    /// quarter of the interval).
    fn probe_due_after(&self, now: MonoMs) -> MonoMs {
        let interval_ms = self.thresholds.probe_interval_ms(self.probe.rounds_failed);
        now.plus_ms(interval_ms - self.probe_jitter_ms.min(interval_ms / 4))
    }

    /// FO-D3 / FO-X2 / FO-X4: the clean candidate the chain opens, in chain order: the first
    /// clean candidate not passed over on a host that is not suspect (the current channel's
    /// host, or a host with a URL passed over since the chain last moved), else the first
    /// clean one not passed over (on a suspect host), else (starting a new round, which forgets
    /// who was passed over) the first clean one off the current channel's host, else the first
    /// clean one. Directory order within each. One pass over the list, no allocation.
    #[inline(always)]
    fn pick_clean(&mut self, now: MonoMs, new_round: bool) -> CleanPick {
        let current_host = self.derived.current_host;
        let mut fresh_on_suspect_host = None;
        let mut first_clean_off_current_host = None;
        let mut first_clean = None;
        for (id, state) in self.listed.iter().enumerate() {
            if self.is_current(id) || state.is_cooling(now) {
                continue;
            }
            let host = self.candidates.host(id);
            let on_current_host = current_host == Some(host);
            if !state.passed_over {
                if !on_current_host && !self.listed[usize::from(host)].host_failed {
                    return CleanPick::Target(id);
                }
                fresh_on_suspect_host.get_or_insert(id);
            }
            if !on_current_host {
                first_clean_off_current_host.get_or_insert(id);
            }
            first_clean.get_or_insert(id);
        }
        if let Some(id) = fresh_on_suspect_host {
            return CleanPick::Target(id);
        }
        let Some(id) = first_clean_off_current_host.or(first_clean) else {
            return CleanPick::None;
        };
        if !new_round {
            return CleanPick::AllTriedThisRound;
        }
        self.clear_passed_over();
        CleanPick::Target(id)
    }

    /// FO-D6 / FO-D5: the single place that chooses an exemption. Listed, cooling, not current,
    /// not yet exempted this cycle; `switched-away` before `open-failed`, then earliest `until`,
    /// then directory order. The in-tick continuation skips URLs whose open failed in this
    /// tick's chain (FO-X3a: never reopened in the chain it just failed in), the same rule as
    /// the probe step's; an exemption left unspent by an earlier tick is spent in this chain.
    fn pick_exempt_target(&self, now: MonoMs, new_round: bool) -> Option<usize> {
        if !self.thresholds.exempt {
            return None; // FO-D6-OFF
        }
        let chain_started_at = self.chain_started_at;
        self.first_cooling_in_exemption_order(now, |state| {
            (new_round || !state.failed_since(chain_started_at))
                && state
                    .cooldown
                    .is_some_and(|entry| !entry.exempted_this_cycle())
        })
    }

    /// FO-D5: among the listed, cooling URLs other than the current one that `eligible`
    /// accepts, the first in exemption order: `switched-away` before `open-failed`, then
    /// earliest `until`, then directory order. One pass, no sorting, no allocation.
    fn first_cooling_in_exemption_order(
        &self,
        now: MonoMs,
        eligible: impl Fn(&UrlState) -> bool,
    ) -> Option<usize> {
        let mut best: Option<(CooldownKind, MonoMs, usize)> = None;
        for (id, state) in self.listed.iter().enumerate() {
            let Some(entry) = state.cooldown else {
                continue;
            };
            if !entry.is_cooling(now) || self.is_current(id) || !eligible(state) {
                continue;
            }
            // Ids grow, so on equal (kind, until) the earlier one stays: directory order.
            if best.is_none_or(|(kind, until, _)| (entry.kind, entry.until) < (kind, until)) {
                best = Some((entry.kind, entry.until, id));
            }
        }
        best.map(|(_, _, id)| id)
    }

    /// The one way to change the channel. Returns whether an open was started.
    ///
    /// FO-R5: only listed targets (`target` is an id in the current list). FO-D1: a cooling
    /// target is refused on the directory path; on the health path it is an exemption and must
    /// be eligible for one.
    #[inline(always)]
    fn replace(
        &mut self,
        now: MonoMs,
        target: usize,
        reason: SwitchReason,
        origin: Origin,
    ) -> bool {
        if let Some(open) = &self.open_in_flight {
            let in_flight = open.url.clone();
            self.emit(Event::Skipped(Skip::OpenInFlight {
                requested: self.candidates.url(target).clone(),
                in_flight,
            }));
            return false;
        }
        assert!(
            !self.is_current(target),
            "replace() is never asked to switch to the current channel"
        );
        let mut exemption = None;
        if let Some(entry) = self.listed[target].cooldown.filter(|e| e.is_cooling(now)) {
            let eligible =
                origin == Origin::Health && self.thresholds.exempt && !entry.exempted_this_cycle();
            if !eligible {
                let skip = Skip::StillCooling {
                    url: self.candidates.url(target).clone(),
                    origin,
                    left_ms: entry.until.since_ms(now),
                    of_ms: entry.until.since_ms(entry.since),
                };
                self.emit(Event::Skipped(skip));
                return false;
            }
            // Only `exempted_at` changes: the counts and the table's earliest expiry stay.
            if let Some(cooling) = &mut self.listed[target].cooldown {
                cooling.exempted_at = Some(now);
            }
            exemption = Some(Exemption {
                kind: entry.kind,
                remaining_ms: entry.until.since_ms(now),
            });
        }
        self.start_open(now, target, reason, origin, exemption, false)
    }

    #[inline(always)]
    fn start_open(
        &mut self,
        now: MonoMs,
        target: usize,
        reason: SwitchReason,
        origin: Origin,
        exemption: Option<Exemption>,
        probe: bool,
    ) -> bool {
        // FO-R5 holds for every open, the probe's included: an id is a listed URL.
        assert!(target < self.listed.len() && !self.is_current(target));
        assert!(self.open_in_flight.is_none(), "one open in flight");
        // Both are built in place (the slots are known to be empty): an `Output` is 112 bytes,
        // and staging it on the stack cost more than the rest of a small tick.
        let url = self.candidates.url(target);
        self.open_in_flight.get_or_insert_with(|| PendingOpen {
            url: url.clone(),
            origin,
            reason,
            exemption,
            probe,
            started_at: now,
        });
        let timeout_ms = self.thresholds.up_timeout_ms;
        assert!(
            self.outputs.len() < MAX_PENDING_OUTPUTS,
            "outputs not drained: the caller must poll_output() after every input"
        );
        self.outputs.push_with(|| {
            Output::Action(ChannelAction::Open {
                url: url.clone(),
                timeout_ms,
                exempt: exemption.is_some(),
                probe,
            })
        });
        self.derived.open_id = Some(target as u16);
        true
    }

    /// FO-D2: puts `entry` in the table for `url` (id `id` if listed).
    fn cool(&mut self, id: Option<u16>, url: &RelayUrl, entry: CooldownEntry) {
        let new_row = self
            .state(id, url)
            .is_none_or(|state| state.cooldown.is_none());
        if new_row && self.derived.cooldown_rows >= MAX_TRACKED_URLS {
            self.evict_earliest_unlisted();
        }
        self.update(id, url, |state| state.cooldown = Some(entry));
    }

    /// FO-D2a: the table is full; drop the unlisted entries that expire first: a batch of
    /// `EVICTION_BATCH`, so a full table costs one sort per batch, not one per insert. Listed
    /// URLs and the current one never number more than `MAX_CANDIDATES + 1`, so the batch
    /// always finds unlisted entries.
    fn evict_earliest_unlisted(&mut self) {
        let current = self.current.as_ref();
        let mut unlisted: Vec<(MonoMs, RelayUrl)> = self
            .unlisted
            .iter()
            .filter(|(url, _)| Some(*url) != current)
            .filter_map(|(url, state)| Some((state.cooldown?.until, url.clone())))
            .collect();
        assert!(
            !unlisted.is_empty(),
            "a full cooldown table holds unlisted URLs"
        );
        unlisted.sort_unstable();
        for (_, victim) in unlisted.into_iter().take(EVICTION_BATCH) {
            if let Some(state) = self.unlisted.get_mut(&victim) {
                state.cooldown = None;
                state.passed_over = false;
                if state.is_empty() {
                    self.unlisted.remove(&victim);
                }
            }
        }
        // Once per batch, not once per victim.
        self.recount();
    }

    /// FO-X2: remember a failed candidate until the chain moves on, within the table's bound.
    fn pass_over(&mut self, id: Option<u16>, url: &RelayUrl) {
        self.update(id, url, |state| state.passed_over = true);
        // FO-X4: its host is a suspect of the chain until the chain moves on.
        if let Some(id) = id {
            let host = usize::from(self.candidates.host(usize::from(id)));
            self.listed[host].host_failed = true;
        }
        if self.derived.passed_over > MAX_TRACKED_URLS {
            // Only URLs that left the list are dropped.
            let before = self.unlisted.values().filter(|s| s.passed_over).count();
            self.unlisted.retain(|_, state| {
                state.passed_over = false;
                !state.is_empty()
            });
            self.derived.passed_over -= before;
        }
    }

    /// Whether a tick must prune: an entry of the cooldown table has expired.
    #[inline]
    fn expiry_due(&self, now: MonoMs) -> bool {
        self.derived
            .cooling_expiry_bound
            .is_some_and(|bound| bound <= now)
    }

    /// Drops the entries that no longer cool anything, once one has expired. FO-X2a: a URL
    /// whose cooldown (> 0) expired is no longer passed over either.
    fn prune_expired(&mut self, now: MonoMs) {
        if !self.expiry_due(now) {
            return;
        }
        let cooldown_on = self.thresholds.cooldown_ms > 0;
        let prune = |state: &mut UrlState| {
            if state.cooldown.is_some_and(|entry| !entry.is_cooling(now)) {
                state.cooldown = None;
                if cooldown_on {
                    state.passed_over = false;
                }
            }
        };
        self.listed.iter_mut().for_each(prune);
        self.unlisted.retain(|_, state| {
            prune(state);
            !state.is_empty()
        });
        if cooldown_on {
            self.recompute_host_failed();
        }
        self.recount();
    }

    /// FO-X4: the host flags from the passed-over flags of the listed URLs. O(n).
    fn recompute_host_failed(&mut self) {
        self.listed
            .iter_mut()
            .for_each(|state| state.host_failed = false);
        for id in 0..self.listed.len() {
            if self.listed[id].passed_over {
                let host = usize::from(self.candidates.host(id));
                self.listed[host].host_failed = true;
            }
        }
    }

    /// FO-X2: the chain moved: nobody is passed over.
    fn clear_passed_over(&mut self) {
        if self.derived.passed_over == 0 {
            return;
        }
        self.listed.iter_mut().for_each(|state| {
            state.passed_over = false;
            state.host_failed = false;
        });
        self.unlisted.retain(|_, state| {
            state.passed_over = false;
            !state.is_empty()
        });
        self.derived.passed_over = 0;
    }

    /// FO-X3: a new round: nobody has been probed in it.
    fn clear_probed(&mut self) {
        if self.derived.probed == 0 {
            return;
        }
        self.listed
            .iter_mut()
            .for_each(|state| state.probed = false);
        self.unlisted.retain(|_, state| {
            state.probed = false;
            !state.is_empty()
        });
        self.derived.probed = 0;
    }

    /// FO-X3: the schedule starts over (the chain moved, or the channel recovered).
    fn reset_probe_schedule(&mut self) {
        self.probe = ProbeSchedule::default();
        self.clear_probed();
    }

    fn take_pending(&mut self, url: &RelayUrl) -> Option<(PendingOpen, Option<u16>)> {
        if self.open_in_flight.as_ref().map(|open| &open.url) != Some(url) {
            return None; // a result for an open we are not waiting on: stale, ignored
        }
        let open = self.open_in_flight.take()?;
        Some((open, self.derived.open_id.take()))
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
        self.outputs.push(output.into());
    }

    // ---- the per-URL state ---------------------------------------------------------------

    #[inline]
    fn is_current(&self, id: usize) -> bool {
        self.derived.current_id.map(usize::from) == Some(id)
    }

    /// EXPLAIN-1: the rule that keeps listed URL `id` out of the health chain at `now`, or
    /// `None` when nothing does (a clean URL, or a cooling one whose exemption or due probe is
    /// still to be had: a tick's chain would open it, so a no-candidate line never meets one).
    /// The last bar the URL meets, in the health path's order: FO-D3, FO-D4/FO-D6, FO-X3.
    fn exclusion_rule(&self, id: usize, now: MonoMs) -> Option<ExclusionRule> {
        if self.is_current(id) {
            return Some(ExclusionRule::Current);
        }
        let state = &self.listed[id];
        let entry = state.cooldown.filter(|entry| entry.is_cooling(now))?;
        let (kind, left_ms) = (entry.kind, entry.until.since_ms(now));
        if !self.thresholds.exempt {
            return Some(ExclusionRule::Cooling { kind, left_ms });
        }
        if !entry.exempted_this_cycle() {
            return None;
        }
        if !self.thresholds.probing_enabled() {
            return Some(ExclusionRule::ExemptionSpent { kind, left_ms });
        }
        if state.probed {
            return Some(ExclusionRule::ProbedThisRound { kind, left_ms });
        }
        match self.probe.next_round_at {
            Some(at) if at > now => Some(ExclusionRule::ProbeNotDue {
                kind,
                left_ms,
                next_round_in_ms: at.since_ms(now),
            }),
            _ => None,
        }
    }

    /// FO-D3 by id: not current, not cooling.
    fn is_clean_id(&self, id: usize, now: MonoMs) -> bool {
        !self.is_current(id) && !self.listed[id].is_cooling(now)
    }

    /// What is known about `url`, listed or not.
    fn state_of(&self, url: &RelayUrl) -> Option<&UrlState> {
        self.state(self.candidates.id_of(url), url)
    }

    /// What is known about `url`, whose id is `id` if it is listed.
    fn state(&self, id: Option<u16>, url: &RelayUrl) -> Option<&UrlState> {
        match id {
            Some(id) => self.listed.get(usize::from(id)),
            None => self.unlisted.get(url),
        }
    }

    /// Every URL with state: the listed ones, then the unlisted ones.
    fn url_states(&self) -> impl Iterator<Item = (&RelayUrl, &UrlState)> {
        self.candidates
            .urls()
            .iter()
            .zip(&self.listed)
            .chain(&self.unlisted)
    }

    fn cooldown_entries(&self) -> impl Iterator<Item = &CooldownEntry> {
        self.listed
            .iter()
            .chain(self.unlisted.values())
            .filter_map(|state| state.cooldown.as_ref())
    }

    /// Changes the state of `url` (id `id` if listed) and keeps `derived` exact: an unlisted
    /// URL with nothing left to know is dropped, the counts follow, and the earliest expiry is
    /// recomputed only when an entry went away or was replaced.
    fn update(&mut self, id: Option<u16>, url: &RelayUrl, change: impl FnOnce(&mut UrlState)) {
        let (before, after) = match id {
            Some(id) => {
                let state = &mut self.listed[usize::from(id)];
                let before = *state;
                change(state);
                (before, *state)
            }
            None => {
                let before = self.unlisted.get(url).copied().unwrap_or_default();
                let mut after = before;
                change(&mut after);
                if after.is_empty() {
                    self.unlisted.remove(url);
                } else if after != before {
                    self.unlisted.insert(url.clone(), after);
                }
                (before, after)
            }
        };
        let derived = &mut self.derived;
        let count = |was: bool, is: bool, n: &mut usize| match (was, is) {
            (false, true) => *n += 1,
            (true, false) => *n -= 1,
            _ => {}
        };
        count(
            before.cooldown.is_some(),
            after.cooldown.is_some(),
            &mut derived.cooldown_rows,
        );
        count(
            before.passed_over,
            after.passed_over,
            &mut derived.passed_over,
        );
        count(before.probed, after.probed, &mut derived.probed);
        let recompute_bound = match (before.cooldown, after.cooldown) {
            (None, Some(new)) => {
                let bound = derived
                    .cooling_expiry_bound
                    .map_or(new.until, |b| b.min(new.until));
                derived.cooling_expiry_bound = Some(bound);
                false
            }
            // An entry went away or its `until` changed: it may have been the earliest.
            (Some(old), new) => new.map(|e| e.until) != Some(old.until),
            (None, None) => false,
        };
        if recompute_bound {
            self.derived.cooling_expiry_bound = self.cooldown_entries().map(|e| e.until).min();
        }
    }

    /// Recomputes the counts and the earliest expiry from the per-URL state.
    fn recount(&mut self) {
        let counted = self.counted();
        self.derived = Derived {
            current_id: self.derived.current_id,
            current_host: self.derived.current_host,
            open_id: self.derived.open_id,
            quiet_until: self.derived.quiet_until,
            ..counted
        };
    }

    /// The end of every input: the quiet-tick bound follows what the input changed.
    fn settle(&mut self) {
        self.derived.quiet_until = self.quiet_until();
        crate::invariant!(self.derived_is_exact());
    }

    /// See `Derived::quiet_until`.
    fn quiet_until(&self) -> MonoMs {
        let never = MonoMs(u64::MAX);
        if !self.thresholds.supervisor_enabled() || self.open_in_flight.is_some() {
            never
        } else if self.current.is_some() && self.channel == ChannelState::Healthy {
            self.derived.cooling_expiry_bound.unwrap_or(never)
        } else {
            MonoMs::ZERO
        }
    }

    /// `derived`, computed from scratch (no allocation: it also runs in debug checks on the
    /// tick path).
    fn counted(&self) -> Derived {
        let mut derived = Derived {
            current_id: self
                .current
                .as_ref()
                .and_then(|url| self.candidates.id_of(url)),
            open_id: self
                .open_in_flight
                .as_ref()
                .and_then(|open| self.candidates.id_of(&open.url)),
            ..Derived::default()
        };
        derived.current_host = match derived.current_id {
            Some(id) => Some(self.candidates.host(usize::from(id))),
            None => self
                .current
                .as_ref()
                .and_then(|url| self.candidates.host_of_url(url)),
        };
        for state in self.listed.iter().chain(self.unlisted.values()) {
            if let Some(entry) = state.cooldown {
                derived.cooldown_rows += 1;
                derived.cooling_expiry_bound = Some(
                    derived
                        .cooling_expiry_bound
                        .map_or(entry.until, |b| b.min(entry.until)),
                );
            }
            derived.passed_over += usize::from(state.passed_over);
            derived.probed += usize::from(state.probed);
        }
        derived
    }

    /// A new list: every URL keeps its state, moving between the dense array (listed) and the
    /// map (unlisted) as it enters or leaves the list; the ids are renumbered.
    fn adopt(&mut self, candidates: Candidates) {
        let old = std::mem::replace(&mut self.candidates, candidates);
        let old_listed = std::mem::take(&mut self.listed);
        let mut listed = vec![UrlState::default(); self.candidates.len()];
        for (old_id, state) in old_listed.into_iter().enumerate() {
            if state.is_empty() {
                continue;
            }
            let url = old.url(old_id);
            match self.candidates.id_of(url) {
                Some(id) => listed[usize::from(id)] = state,
                None => {
                    // FO-X4: host flags belong to the list; recomputed below.
                    let state = UrlState {
                        host_failed: false,
                        ..state
                    };
                    if !state.is_empty() {
                        self.unlisted.insert(url.clone(), state);
                    }
                }
            }
        }
        if !self.unlisted.is_empty() {
            for (id, url) in self.candidates.urls().iter().enumerate() {
                if let Some(state) = self.unlisted.remove(url) {
                    listed[id] = state;
                }
            }
        }
        self.listed = listed;
        self.recompute_host_failed();
        let counted = self.counted();
        self.derived.current_id = counted.current_id;
        self.derived.current_host = counted.current_host;
        self.derived.open_id = counted.open_id;
    }

    /// Debug check: `derived` is what it claims to be and the per-URL state is canonical.
    fn derived_is_exact(&self) -> bool {
        let (kept, exact) = (&self.derived, self.counted());
        kept.current_id == exact.current_id
            && kept.current_host == exact.current_host
            && self.host_flags_are_exact()
            && kept.open_id == exact.open_id
            && kept.cooling_expiry_bound == exact.cooling_expiry_bound
            && kept.cooldown_rows == exact.cooldown_rows
            && kept.passed_over == exact.passed_over
            && kept.probed == exact.probed
            && kept.quiet_until == self.quiet_until()
            && self.listed.len() == self.candidates.len()
            && self
                .unlisted
                .iter()
                .all(|(url, state)| !state.is_empty() && self.candidates.id_of(url).is_none())
    }
}

impl Supervisor {
    /// Debug check (FO-X4): the host flags are what they claim. Without allocation: every
    /// passed-over listed URL's host is flagged, and every flagged host has a passed-over URL
    /// (a scan from the flagged representative; flags are as rare as failures).
    fn host_flags_are_exact(&self) -> bool {
        let hosts = &self.candidates;
        let flagged_have_cause = (0..self.listed.len())
            .filter(|&rep| self.listed[rep].host_failed)
            .all(|rep| {
                usize::from(hosts.host(rep)) == rep
                    && (rep..self.listed.len())
                        .any(|id| usize::from(hosts.host(id)) == rep && self.listed[id].passed_over)
            });
        let causes_flagged = (0..self.listed.len())
            .filter(|&id| self.listed[id].passed_over)
            .all(|id| self.listed[usize::from(hosts.host(id))].host_failed);
        flagged_have_cause
            && causes_flagged
            && self.unlisted.values().all(|state| !state.host_failed)
    }
}

enum CleanPick {
    Target(usize),
    AllTriedThisRound,
    None,
}

impl From<Event> for Output {
    fn from(event: Event) -> Output {
        Output::Event(event)
    }
}
