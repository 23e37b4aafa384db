//! An independent, deliberately naive transcription of the FO rules (part FO and the part X rows
//! FO-D2a, FO-X2a, FO-X3, FO-X3a, FO-R5a of `REQUIREMENTS.md`, plus the product decisions the
//! team settled), written from the requirement text without reading the core's machine. It
//! owes the core nothing: every threshold rule (supervisor on, probing on, the probe interval)
//! is computed here from the text, never asked of the core's `Thresholds` helpers.
//!
//! The point is redundancy by construction: `tests/failover_oracle.rs` drives the core's
//! [`Supervisor`] and this [`FoOracle`] with the same random scripts and asserts that what is
//! observable ([`Decision`]s and [`OracleView`]) is equal after every step. A misreading in one of
//! them shows up as a difference.
//!
//! Deliberately naive: `Vec`s of structs, linear scans, no caches, no derived fields. Clarity
//! over speed; each rule carries its requirement ID.
//!
//! Known limitation: the capacity rule of FO-D2a (a full table of `2 * 8192` entries drops the
//! earliest-expiring unlisted entry) is not transcribed; the scripts use a handful of URLs.

use serde::{Deserialize, Serialize};
pub use switchyard_core::failover::RelayUrl;
use switchyard_core::failover::{
    ChannelAction, ChannelState, CooldownKind, Event, Exclusion, ExclusionRule, FailoverCounters,
    OpenFailure, Origin, Output, Skip, Supervisor, Thresholds,
};
use switchyard_core::MonoMs;

/// FO-D1 / FO-R5: a directory with more URLs than this is rejected whole.
pub const ORACLE_MAX_LIST: usize = 8192;

/// FO-X4, from the requirement text: a URL's host (its failure domain) is what stands between
/// `scheme://` and the path, less any `user@` and `:port`, in lower case; an IPv6 literal keeps
/// its brackets. Written here from the text, not asked of the core.
pub fn naive_host(url: &RelayUrl) -> String {
    let text = url.as_str();
    let after_scheme = match text.find("://") {
        Some(at) => &text[at + 3..],
        None => return text.to_ascii_lowercase(),
    };
    let mut authority = String::new();
    for c in after_scheme.chars() {
        if c == '/' || c == '?' || c == '#' {
            break;
        }
        authority.push(c);
    }
    if let Some(at) = authority.rfind('@') {
        authority = authority[at + 1..].to_string();
    }
    let mut host = String::new();
    let mut in_brackets = false;
    for c in authority.chars() {
        if c == '[' {
            in_brackets = true;
        }
        if c == ']' {
            in_brackets = false;
        }
        if c == ':' && !in_brackets {
            break;
        }
        host.push(c);
    }
    host.to_ascii_lowercase()
}

/// What kind of open a switch attempt is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OpenKind {
    /// A clean candidate (not cooling).
    Clean,
    /// FO-D6: the one-hop exemption of a cooling candidate.
    Exempt,
    /// FO-X3: a probe of a cooling candidate after the exemption budget is spent.
    Probe,
}

/// Why something that could have happened did not (the `[relay-skip]` lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipKind {
    StillCooling {
        url: RelayUrl,
        origin: Origin,
    },
    /// EXPLAIN-1: the first eight excluded listed URLs with their rules, and how many more.
    NoCandidate {
        exclusions: Vec<Exclusion>,
        more: usize,
    },
    OpenFailed {
        url: RelayUrl,
        exempt: bool,
        probe: bool,
    },
    OpenInFlight,
    NotInList,
    DirectoryRejected,
    ProbeRoundFailed,
}

/// What an input observably led to, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Open {
        url: RelayUrl,
        origin: Origin,
        kind: OpenKind,
    },
    Close {
        url: RelayUrl,
    },
    Switched {
        from: RelayUrl,
        to: RelayUrl,
        origin: Origin,
        exempt: bool,
        probe: bool,
    },
    Attached {
        url: RelayUrl,
        origin: Origin,
    },
    Skip(SkipKind),
}

/// One row of the view's cooldown list: `(url, kind, since, until, exempted_this_cycle)`.
pub type CooldownRow = (RelayUrl, CooldownKind, MonoMs, MonoMs, bool);

/// The observable state at an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OracleView {
    pub current: Option<RelayUrl>,
    pub opening: Option<(RelayUrl, Origin, OpenKind)>,
    /// Entries still cooling at `now`, sorted by URL.
    pub cooldown: Vec<CooldownRow>,
    pub counters: FailoverCounters,
}

/// One cooldown entry (FO-D2): one per URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Entry {
    url: RelayUrl,
    kind: CooldownKind,
    since: MonoMs,
    until: MonoMs,
    /// FO-D4: the exemption was used in the cycle that started at `since`.
    exempted_this_cycle: bool,
}

/// The open in flight (at most one).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Opening {
    url: RelayUrl,
    origin: Origin,
    kind: OpenKind,
    /// FO-X3: a probe's failure counts in the round it was started in only.
    started_at: MonoMs,
}

/// The naive FO supervisor.
/// Hashable and serialisable so the model checker can carry it beside the core (`FO-ORACLE`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FoOracle {
    thresholds: Thresholds,
    /// The current candidate list, duplicates removed, in directory order.
    list: Vec<RelayUrl>,
    current: Option<RelayUrl>,
    /// The current channel's last reported state (`None` iff no current channel).
    channel: Option<ChannelState>,
    /// FO-H-1: when the channel last went Healthy -> Backoff.
    left_healthy_at: Option<MonoMs>,
    opening: Option<Opening>,
    cooldown: Vec<Entry>,
    /// FO-X2: URLs whose non-probe open failed since the chain last moved.
    passed_over: Vec<RelayUrl>,
    /// FO-X3: the probe schedule.
    rounds_failed: u32,
    next_round_at: Option<MonoMs>,
    probed: Vec<RelayUrl>,
    /// FO-X3a: when the tick that started the running health chain ran.
    chain_started_at: MonoMs,
    jitter_ms: u64,
    /// FO-D6: when the last no-candidate line was emitted (throttle).
    last_no_candidate_at: Option<MonoMs>,
    counters: FailoverCounters,
}

impl FoOracle {
    pub fn new(thresholds: Thresholds, _now: MonoMs) -> FoOracle {
        FoOracle {
            thresholds,
            list: Vec::new(),
            current: None,
            channel: None,
            left_healthy_at: None,
            opening: None,
            cooldown: Vec::new(),
            passed_over: Vec::new(),
            rounds_failed: 0,
            next_round_at: None,
            probed: Vec::new(),
            chain_started_at: MonoMs::ZERO,
            jitter_ms: 0,
            last_no_candidate_at: None,
            counters: FailoverCounters::default(),
        }
    }

    // ----- small naive helpers -----

    /// FO-H-2: `MIN_ATTEMPTS=0` switches the supervisor (health path) off.
    fn supervisor_on(&self) -> bool {
        self.thresholds.min_attempts > 0
    }

    fn entry_of(&self, url: &RelayUrl) -> Option<&Entry> {
        self.cooldown.iter().find(|e| &e.url == url)
    }

    /// FO-D2: cooling iff the URL has an entry whose `until` is after `now`.
    fn is_cooling(&self, url: &RelayUrl, now: MonoMs) -> bool {
        match self.entry_of(url) {
            Some(e) => e.until > now,
            None => false,
        }
    }

    fn is_current(&self, url: &RelayUrl) -> bool {
        self.current.as_ref() == Some(url)
    }

    fn position_in_list(&self, url: &RelayUrl) -> usize {
        let mut i = 0;
        while i < self.list.len() {
            if &self.list[i] == url {
                return i;
            }
            i += 1;
        }
        usize::MAX
    }

    /// FO-D2: a new cycle for `url` (replaces any old entry).
    fn start_cycle(&mut self, url: &RelayUrl, kind: CooldownKind, now: MonoMs, exempted: bool) {
        self.cooldown.retain(|e| &e.url != url);
        self.cooldown.push(Entry {
            url: url.clone(),
            kind,
            since: now,
            until: now.plus_ms(self.thresholds.cooldown_ms),
            exempted_this_cycle: exempted,
        });
    }

    /// FO-D2a: entries are dropped when they expire (never because of the list).
    /// FO-X2a: with `COOLDOWN_MS > 0` a URL leaves the passed-over set when its entry expires.
    fn drop_expired(&mut self, now: MonoMs) {
        let mut kept = Vec::new();
        let mut expired = Vec::new();
        for e in &self.cooldown {
            if e.until > now {
                kept.push(e.clone());
            } else {
                expired.push(e.url.clone());
            }
        }
        self.cooldown = kept;
        if self.thresholds.cooldown_ms > 0 {
            self.passed_over.retain(|u| !expired.contains(u));
        }
    }

    /// FO-H-1 / FO-H-2.
    fn is_unhealthy(&self, now: MonoMs) -> bool {
        if !self.supervisor_on() {
            return false;
        }
        match self.channel {
            None => true,
            Some(ChannelState::Healthy) => false,
            Some(ChannelState::Backoff { attempts }) => {
                if attempts >= self.thresholds.min_attempts {
                    return true;
                }
                match self.left_healthy_at {
                    Some(at) => now.since_ms(at) >= self.thresholds.grace_ms,
                    None => false,
                }
            }
        }
    }

    /// FO-X3 / FO-D6-OFF, read from the requirement text (never from the core's helpers):
    /// `RELAY_FAILOVER_PROBE_MAX_MS=0` switches probing off, and with `EXEMPT=0` the behaviour
    /// is exactly the pre-exemption one, so probing (which continues the spent exemption
    /// budget) is off too.
    fn probing_on(&self) -> bool {
        self.thresholds.exempt && self.thresholds.probe_max_ms != 0
    }

    /// FO-X3, from the requirement text: the interval before round `round` (0-based) grows by
    /// doubling from `PROBE_MIN_MS` and never beyond `PROBE_MAX_MS`. Naive: double `round`
    /// times, stopping at the maximum.
    pub fn text_interval_ms(&self, round: u32) -> u64 {
        let max = self.thresholds.probe_max_ms;
        let mut interval = self.thresholds.probe_min_ms;
        let mut doubled = 0;
        while doubled < round && interval < max {
            interval = interval.saturating_mul(2);
            doubled += 1;
        }
        if interval > max {
            max
        } else {
            interval
        }
    }

    /// FO-X3: rounds that failed since the schedule last reset (the doubling exponent).
    pub fn rounds_failed(&self) -> u32 {
        self.rounds_failed
    }

    /// FO-X3: interval before round `round`, shortened by the jitter, at most by a quarter.
    fn interval(&self, round: u32) -> u64 {
        let base = self.text_interval_ms(round);
        let cut = if self.jitter_ms < base / 4 {
            self.jitter_ms
        } else {
            base / 4
        };
        base - cut
    }

    /// FO-X3a: `url`'s open failed in the running chain (its open-failed cycle began at or
    /// after the tick that started it).
    fn failed_in_chain(&self, url: &RelayUrl) -> bool {
        match self.entry_of(url) {
            Some(e) => e.kind == CooldownKind::OpenFailed && e.since >= self.chain_started_at,
            None => false,
        }
    }

    /// FO-X3: the schedule resets when the chain moves or the channel recovers.
    fn reset_probe_schedule(&mut self) {
        self.rounds_failed = 0;
        self.next_round_at = None;
        self.probed.clear();
    }

    /// FO-D5: `switched-away` before `open-failed`, then earliest `until`, then directory order.
    /// Returns the best of `urls` (all of which have an entry).
    fn best_in_fo_d5_order(&self, urls: &[RelayUrl]) -> Option<RelayUrl> {
        let mut best: Option<(u8, MonoMs, usize, RelayUrl)> = None;
        for url in urls {
            let Some(e) = self.entry_of(url) else {
                continue;
            };
            let kind_rank = match e.kind {
                CooldownKind::SwitchedAway => 0,
                CooldownKind::OpenFailed => 1,
            };
            let key = (kind_rank, e.until, self.position_in_list(url), url.clone());
            let better = match &best {
                None => true,
                Some(b) => (key.0, key.1, key.2) < (b.0, b.1, b.2),
            };
            if better {
                best = Some(key);
            }
        }
        best.map(|b| b.3)
    }

    fn start_open(
        &mut self,
        url: RelayUrl,
        origin: Origin,
        kind: OpenKind,
        now: MonoMs,
        out: &mut Vec<Decision>,
    ) {
        self.opening = Some(Opening {
            url: url.clone(),
            origin,
            kind,
            started_at: now,
        });
        out.push(Decision::Open { url, origin, kind });
    }

    /// The health chain. `at_tick`: a tick (a new round of the passed-over set is allowed);
    /// otherwise a continuation after a failed open. Returns whether it opened something.
    fn health_chain(&mut self, now: MonoMs, at_tick: bool, out: &mut Vec<Decision>) -> bool {
        // Candidates: the current list minus the current URL, in directory order.
        let mut candidates = Vec::new();
        for url in &self.list {
            if !self.is_current(url) {
                candidates.push(url.clone());
            }
        }
        // Clean = not cooling (FO-D3).
        let mut clean = Vec::new();
        for url in &candidates {
            if !self.is_cooling(url, now) {
                clean.push(url.clone());
            }
        }
        // FO-X4: suspect hosts: the current channel's, and every host with a listed URL that
        // is passed over (its open failed since the chain last moved).
        let mut suspect_hosts: Vec<String> = Vec::new();
        if let Some(current) = &self.current {
            suspect_hosts.push(naive_host(current));
        }
        for url in &self.list {
            if self.passed_over.contains(url) {
                suspect_hosts.push(naive_host(url));
            }
        }
        // (1) FO-X2 / FO-X4: the first clean candidate not passed over on a host that is not
        // suspect, in directory order; then the first clean one not passed over.
        for url in &clean {
            if !self.passed_over.contains(url) && !suspect_hosts.contains(&naive_host(url)) {
                self.start_open(url.clone(), Origin::Health, OpenKind::Clean, now, out);
                return true;
            }
        }
        for url in &clean {
            if !self.passed_over.contains(url) {
                self.start_open(url.clone(), Origin::Health, OpenKind::Clean, now, out);
                return true;
            }
        }
        // (2) FO-D3: a clean candidate exists: never exempt. A tick starts a new round, in
        // which only the current channel's host is suspect (FO-X4).
        if !clean.is_empty() {
            if at_tick {
                self.passed_over.clear();
                let current_host = self.current.as_ref().map(naive_host);
                let mut target = clean[0].clone();
                for url in &clean {
                    if Some(naive_host(url)) != current_host {
                        target = url.clone();
                        break;
                    }
                }
                self.start_open(target, Origin::Health, OpenKind::Clean, now, out);
                return true;
            }
            return false;
        }
        // (3) FO-D4/5/6: the one-hop exemption, only with EXEMPT=1 (FO-D6-OFF).
        if self.thresholds.exempt {
            let mut eligible = Vec::new();
            for url in &candidates {
                if !self.is_cooling(url, now) {
                    continue;
                }
                let exempted = match self.entry_of(url) {
                    Some(e) => e.exempted_this_cycle,
                    None => false,
                };
                if exempted {
                    continue;
                }
                // FO-X3a: not reopened in the chain it failed in (an open-failed cycle that
                // began at or after the tick that started the chain).
                if !at_tick && self.failed_in_chain(url) {
                    continue;
                }
                eligible.push(url.clone());
            }
            if let Some(url) = self.best_in_fo_d5_order(&eligible) {
                // FO-D4: the exemption of this cycle is spent now.
                for e in self.cooldown.iter_mut() {
                    if e.url == url {
                        e.exempted_this_cycle = true;
                    }
                }
                self.start_open(url, Origin::Health, OpenKind::Exempt, now, out);
                return true;
            }
        }
        // (4) FO-X3: probing, once a round is due.
        if self.probing_on() {
            let due = match self.next_round_at {
                Some(at) => at <= now,
                None => false,
            };
            if due {
                // FO-X3: probing comes after the exemption budget: only a cooling candidate
                // whose exemption of this cycle is spent, not yet probed in this round.
                let mut unprobed = Vec::new();
                for url in &candidates {
                    let spent = match self.entry_of(url) {
                        Some(e) => e.exempted_this_cycle,
                        None => false,
                    };
                    if self.is_cooling(url, now) && spent && !self.probed.contains(url) {
                        unprobed.push(url.clone());
                    }
                }
                // FO-X3a: a probe never re-opens a URL whose open already failed in the same
                // tick's chain: a failure at or after the tick that started it.
                let mut eligible = Vec::new();
                for url in &unprobed {
                    if at_tick || !self.failed_in_chain(url) {
                        eligible.push(url.clone());
                    }
                }
                if let Some(url) = self.best_in_fo_d5_order(&eligible) {
                    self.counters.probe_opens += 1;
                    self.start_open(url, Origin::Health, OpenKind::Probe, now, out);
                    return true;
                }
                if !unprobed.is_empty() {
                    // Not yet probed but failed in this chain: the round is not over; the
                    // next tick probes it.
                    return false;
                }
                if !self.probed.is_empty() {
                    // Every cooling candidate was probed in this round, and at least one URL
                    // was (it may have left the list since): the round failed.
                    self.rounds_failed += 1;
                    self.next_round_at = Some(now.plus_ms(self.interval(self.rounds_failed)));
                    self.probed.clear();
                    out.push(Decision::Skip(SkipKind::ProbeRoundFailed));
                }
            }
        }
        false
    }

    /// EXPLAIN-1, from the rules above and this oracle's own state: why each listed URL is
    /// not opened by the health chain. The rule named is the last bar the URL meets in the
    /// chain's order: the current URL (never a candidate); cooling with the exemption off
    /// (FO-D6-OFF); cooling with this cycle's exemption used (FO-D4) and probing off; with
    /// probing on, probed in the round under way, or the next round not yet due (FO-X3). A
    /// URL the chain could still open (clean, passed over or not: a tick starts a new round;
    /// an unspent exemption; a due probe) is not excluded. The first eight in list order are
    /// named, the rest counted.
    fn explain_exclusions(&self, now: MonoMs) -> (Vec<Exclusion>, usize) {
        let mut named = Vec::new();
        let mut more = 0;
        for url in &self.list {
            let rule = if self.is_current(url) {
                Some(ExclusionRule::Current)
            } else {
                match self.entry_of(url) {
                    Some(e) if e.until > now => {
                        let kind = e.kind;
                        let left_ms = e.until.since_ms(now);
                        if !self.thresholds.exempt {
                            Some(ExclusionRule::Cooling { kind, left_ms })
                        } else if !e.exempted_this_cycle {
                            None
                        } else if !self.probing_on() {
                            Some(ExclusionRule::ExemptionSpent { kind, left_ms })
                        } else if self.probed.contains(url) {
                            Some(ExclusionRule::ProbedThisRound { kind, left_ms })
                        } else {
                            match self.next_round_at {
                                Some(at) if at > now => Some(ExclusionRule::ProbeNotDue {
                                    kind,
                                    left_ms,
                                    next_round_in_ms: at.since_ms(now),
                                }),
                                _ => None,
                            }
                        }
                    }
                    _ => None,
                }
            };
            if let Some(rule) = rule {
                if named.len() < 8 {
                    named.push(Exclusion {
                        url: url.clone(),
                        rule,
                    });
                } else {
                    more += 1;
                }
            }
        }
        (named, more)
    }

    // ----- the inputs -----

    /// FO-X3: the adapter's jitter for the probe intervals.
    pub fn set_probe_jitter_ms(&mut self, ms: u64) -> Vec<Decision> {
        self.jitter_ms = ms;
        Vec::new()
    }

    /// The periodic tick (every `CHECK_MS`).
    pub fn tick(&mut self, now: MonoMs) -> Vec<Decision> {
        let mut out = Vec::new();
        // FO-H-2, one open in flight.
        if !self.supervisor_on() || self.opening.is_some() {
            return out;
        }
        self.drop_expired(now);
        if !self.is_unhealthy(now) {
            return out;
        }
        self.chain_started_at = now;
        let opened = self.health_chain(now, true, &mut out);
        if opened {
            return out;
        }
        // FO-X3: the first probe round is scheduled once the chain finds nothing.
        if self.probing_on() && self.next_round_at.is_none() {
            self.next_round_at = Some(now.plus_ms(self.interval(0)));
        }
        // FO-D6: count every check, log at most once per GRACE_MS.
        self.counters.no_candidate_checks += 1;
        let emit = match self.last_no_candidate_at {
            None => true,
            Some(at) => now.since_ms(at) >= self.thresholds.grace_ms,
        };
        if emit {
            self.last_no_candidate_at = Some(now);
            let (exclusions, more) = self.explain_exclusions(now);
            out.push(Decision::Skip(SkipKind::NoCandidate { exclusions, more }));
        }
        out
    }

    /// A directory update (FO-D1, FO-R5, FO-D2a).
    pub fn directory(&mut self, now: MonoMs, urls: &[RelayUrl]) -> Vec<Decision> {
        let mut out = Vec::new();
        if urls.is_empty() || urls.len() > ORACLE_MAX_LIST {
            out.push(Decision::Skip(SkipKind::DirectoryRejected));
            return out;
        }
        let mut list: Vec<RelayUrl> = Vec::new();
        for url in urls {
            if !list.contains(url) {
                list.push(url.clone());
            }
        }
        // FO-D2a: the cooldown table is untouched.
        self.list = list;
        let first = self.list[0].clone();
        if self.is_current(&first) {
            return out;
        }
        if let Some(op) = &self.opening {
            if op.url == first {
                return out;
            }
            out.push(Decision::Skip(SkipKind::OpenInFlight));
            return out;
        }
        // FO-D1: the directory path never opens a cooling URL: no exemption, ever.
        if self.is_cooling(&first, now) {
            out.push(Decision::Skip(SkipKind::StillCooling {
                url: first,
                origin: Origin::Directory,
            }));
            return out;
        }
        self.start_open(first, Origin::Directory, OpenKind::Clean, now, &mut out);
        out
    }

    /// The current channel's state; about any other URL: stale, ignored.
    pub fn channel_state(
        &mut self,
        now: MonoMs,
        url: &RelayUrl,
        state: ChannelState,
    ) -> Vec<Decision> {
        if !self.is_current(url) {
            return Vec::new();
        }
        match state {
            ChannelState::Healthy => {
                self.channel = Some(ChannelState::Healthy);
                self.left_healthy_at = None;
                // FO-X3: the channel recovered.
                self.reset_probe_schedule();
            }
            ChannelState::Backoff { .. } => {
                // FO-H-1: the clock starts when the channel leaves Healthy, not before.
                if self.channel == Some(ChannelState::Healthy) {
                    self.left_healthy_at = Some(now);
                }
                self.channel = Some(state);
            }
        }
        Vec::new()
    }

    /// The open in flight succeeded (make-before-break).
    pub fn open_succeeded(&mut self, now: MonoMs, url: &RelayUrl) -> Vec<Decision> {
        let mut out = Vec::new();
        let op = match &self.opening {
            Some(op) if &op.url == url => op.clone(),
            _ => return out,
        };
        self.opening = None;
        // FO-R5a: FO-R5 holds when the channel is adopted: an open whose URL left the list
        // while in flight is closed; nothing else changes (no cooldown entry, no counter).
        if !self.list.contains(url) {
            out.push(Decision::Close { url: url.clone() });
            out.push(Decision::Skip(SkipKind::NotInList));
            return out;
        }
        let old = self.current.replace(url.clone());
        self.channel = Some(ChannelState::Healthy);
        self.left_healthy_at = None;
        self.cooldown.retain(|e| &e.url != url);
        self.passed_over.clear();
        self.reset_probe_schedule();
        match old {
            None => out.push(Decision::Attached {
                url: url.clone(),
                origin: op.origin,
            }),
            Some(old) => {
                self.start_cycle(&old, CooldownKind::SwitchedAway, now, false);
                self.counters.switches += 1;
                if op.kind == OpenKind::Exempt {
                    self.counters.exempt_switches += 1;
                }
                if op.kind == OpenKind::Probe {
                    self.counters.probe_switches += 1;
                }
                out.push(Decision::Close { url: old.clone() });
                out.push(Decision::Switched {
                    from: old,
                    to: url.clone(),
                    origin: op.origin,
                    exempt: op.kind == OpenKind::Exempt,
                    probe: op.kind == OpenKind::Probe,
                });
            }
        }
        out
    }

    /// The open in flight failed or timed out: keep the old channel.
    pub fn open_failed(
        &mut self,
        now: MonoMs,
        url: &RelayUrl,
        _failure: OpenFailure,
    ) -> Vec<Decision> {
        let mut out = Vec::new();
        let op = match &self.opening {
            Some(op) if &op.url == url => op.clone(),
            _ => return out,
        };
        self.opening = None;
        self.counters.open_failed += 1;
        if op.kind == OpenKind::Probe {
            // FO-X3: a failed probe changes only the probe schedule, and only in the round it
            // was started in: after a reset (no round, or a later one) it counts for nothing.
            let same_round = match self.next_round_at {
                Some(at) => at <= op.started_at,
                None => false,
            };
            if same_round && !self.probed.contains(url) {
                self.probed.push(url.clone());
            }
        } else {
            // FO-D4: a failed exempt open restarts the cycle with its exemption spent.
            self.start_cycle(
                url,
                CooldownKind::OpenFailed,
                now,
                op.kind == OpenKind::Exempt,
            );
            // FO-X2: passed over until the chain moves.
            if !self.passed_over.contains(url) {
                self.passed_over.push(url.clone());
            }
        }
        out.push(Decision::Skip(SkipKind::OpenFailed {
            url: url.clone(),
            exempt: op.kind == OpenKind::Exempt,
            probe: op.kind == OpenKind::Probe,
        }));
        // FO-X1: on the health path the chain continues at once (no new round).
        if op.origin == Origin::Health && self.supervisor_on() && self.is_unhealthy(now) {
            self.drop_expired(now);
            self.health_chain(now, false, &mut out);
        }
        out
    }

    /// FO-X3: the URLs probed (and failed) in the round under way.
    pub fn probed(&self) -> &[RelayUrl] {
        &self.probed
    }

    /// The current candidate list (the conformance judge asks whether a URL is listed).
    pub fn list(&self) -> &[RelayUrl] {
        &self.list
    }

    /// The thresholds the oracle was made with.
    pub fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    /// What is observable at `now`.
    /// FO-X2: the URLs passed over (their non-probe open failed since the chain last moved),
    /// the spec's own record the model judges a chain's exemption order against (FO-D5).
    pub fn passed_over(&self) -> &[RelayUrl] {
        &self.passed_over
    }

    pub fn view(&self, now: MonoMs) -> OracleView {
        let mut cooldown: Vec<CooldownRow> = Vec::new();
        for e in &self.cooldown {
            if e.until > now {
                cooldown.push((
                    e.url.clone(),
                    e.kind,
                    e.since,
                    e.until,
                    e.exempted_this_cycle,
                ));
            }
        }
        cooldown.sort_by(|a, b| a.0.cmp(&b.0));
        OracleView {
            current: self.current.clone(),
            opening: self
                .opening
                .as_ref()
                .map(|op| (op.url.clone(), op.origin, op.kind)),
            cooldown,
            counters: self.counters,
        }
    }
}

// ----- the mapping from the core -----

fn open_kind(exempt: bool, probe: bool) -> OpenKind {
    match (exempt, probe) {
        (false, false) => OpenKind::Clean,
        (true, false) => OpenKind::Exempt,
        (false, true) => OpenKind::Probe,
        (true, true) => panic!("the core marked an open both exempt and probe"),
    }
}

/// The core's outputs of one input, as decisions. `ChannelAction::Open` carries no origin: it is
/// taken from the core's open in flight after the input (`sup.open_in_flight()`), which must be
/// that open (an open always ends the handling of an input); without a matching open in flight the
/// origin is reported as `Health` and the views differ anyway. EXPLAIN-1: a no-candidate line
/// carries what the core's `exclusions(now)` says after the input made at `now` (what its log
/// line prints, `render_explained`).
pub fn core_decisions(outputs: &[Output], sup: &Supervisor, now: MonoMs) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for output in outputs {
        let decision = match output {
            Output::Action(ChannelAction::Open {
                url, exempt, probe, ..
            }) => {
                let origin = match sup.open_in_flight() {
                    Some(p) if p.url() == url => p.origin(),
                    _ => Origin::Health,
                };
                Decision::Open {
                    url: url.clone(),
                    origin,
                    kind: open_kind(*exempt, *probe),
                }
            }
            Output::Action(ChannelAction::Close { url }) => Decision::Close { url: url.clone() },
            Output::Event(Event::Switched(rec)) => Decision::Switched {
                from: rec.from.clone(),
                to: rec.to.clone(),
                origin: rec.origin,
                exempt: rec.exemption.is_some(),
                probe: rec.probe,
            },
            Output::Event(Event::Attached { url, origin }) => Decision::Attached {
                url: url.clone(),
                origin: *origin,
            },
            Output::Event(Event::Skipped(skip)) => Decision::Skip(match skip {
                Skip::StillCooling { url, origin, .. } => SkipKind::StillCooling {
                    url: url.clone(),
                    origin: *origin,
                },
                Skip::NoCandidate { .. } => {
                    let explained = sup.exclusions(now);
                    SkipKind::NoCandidate {
                        exclusions: explained.named,
                        more: explained.more,
                    }
                }
                Skip::OpenFailed {
                    url, exempt, probe, ..
                } => SkipKind::OpenFailed {
                    url: url.clone(),
                    exempt: *exempt,
                    probe: *probe,
                },
                Skip::ProbeRoundFailed { .. } => SkipKind::ProbeRoundFailed,
                Skip::OpenInFlight { .. } => SkipKind::OpenInFlight,
                Skip::NotInList { .. } => SkipKind::NotInList,
                Skip::DirectoryRejected { .. } => SkipKind::DirectoryRejected,
            }),
        };
        decisions.push(decision);
    }
    decisions
}

/// The core's observable state at `now`, through its public accessors only.
pub fn core_view(sup: &Supervisor, now: MonoMs) -> OracleView {
    let mut cooldown: Vec<CooldownRow> = Vec::new();
    for (url, e) in sup.cooldown_rows() {
        if e.is_cooling(now) {
            cooldown.push((
                url.clone(),
                e.kind(),
                e.since(),
                e.until(),
                e.exempted_this_cycle(),
            ));
        }
    }
    cooldown.sort_by(|a, b| a.0.cmp(&b.0));
    OracleView {
        current: sup.current().cloned(),
        opening: sup.open_in_flight().map(|p| {
            (
                p.url().clone(),
                p.origin(),
                open_kind(p.exemption().is_some(), p.probe()),
            )
        }),
        cooldown,
        counters: sup.counters(),
    }
}

/// `core_view(sup, now) == oracle.view(now)`, decided on borrowed rows: the same comparison,
/// field by field and row by row in the same (stable, by URL) order, without building either
/// view. The step asks it after every input, and the two views cost a clone of every URL in
/// them (a reference count shared by the checker's threads) and two vectors each time.
pub fn core_view_agrees(sup: &Supervisor, oracle: &FoOracle, now: MonoMs) -> bool {
    if sup.current() != oracle.current.as_ref() {
        return false;
    }
    let core_open = sup.open_in_flight().map(|p| {
        (
            p.url(),
            p.origin(),
            open_kind(p.exemption().is_some(), p.probe()),
        )
    });
    let oracle_open = oracle
        .opening
        .as_ref()
        .map(|op| (&op.url, op.origin, op.kind));
    if core_open != oracle_open {
        return false;
    }
    let mut core_rows: Vec<(&RelayUrl, CooldownKind, MonoMs, MonoMs, bool)> = Vec::new();
    for (url, e) in sup.cooldown_rows() {
        if e.is_cooling(now) {
            core_rows.push((url, e.kind(), e.since(), e.until(), e.exempted_this_cycle()));
        }
    }
    let mut oracle_rows: Vec<(&RelayUrl, CooldownKind, MonoMs, MonoMs, bool)> = Vec::new();
    for e in &oracle.cooldown {
        if e.until > now {
            oracle_rows.push((&e.url, e.kind, e.since, e.until, e.exempted_this_cycle));
        }
    }
    if core_rows.len() != oracle_rows.len() {
        return false;
    }
    core_rows.sort_by(|a, b| a.0.cmp(b.0));
    oracle_rows.sort_by(|a, b| a.0.cmp(b.0));
    core_rows == oracle_rows && sup.counters() == oracle.counters
}
