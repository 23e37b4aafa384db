//! The failover properties judged on a client's journal (CONF-1), beside the oracle's replay:
//! the predicates of `spec/src/failover/properties.rs` that read the spec's own record and the
//! step that led to it, over a record rebuilt from the journal's lines alone. It owes the core
//! and the oracle nothing: it reads no decision of either, only the inputs the journal gave and
//! the outputs it shows, as the model's `judge` (`spec/src/failover/step.rs`) reads the core's.
//!
//! The record, as the model keeps it (`FoState`): the list (the last non-empty directory input,
//! without repeats), the current URL (an open the record saw start and succeed while listed),
//! the open in flight (an `open` output until its result), the cooldown cycles by URL (a
//! success starts a `switched-away` cycle for the channel left and ends the target's; a failed
//! open that is not a probe starts an `open-failed` cycle, its exemption spent if the open was
//! exempt; an exempt open spends its cycle's exemption), the channel's health (FO-H-1: the
//! current channel's reports; no channel is unhealthy), the URLs whose open failed since the
//! last tick (FO-X3a), each URL's last probe (FO-X3) and the last no-candidate line (FO-D6).
//!
//! Who may open after an input, as the spec reads the rules: the directory path only after a
//! directory input; the health path only after a tick that found the channel unhealthy with no
//! open in flight, or after its own open failed while the channel is still unhealthy.
//!
//! Judged at each `open` output: FO-R5 (listed), FO-H-1 / FO-H-2 (the health path acts only when
//! due and unhealthy, never with `MIN_ATTEMPTS=0`), FO-D1 (the directory path never opens a
//! cooling URL), FO-D6 (exempt or probe exactly when the health path opens a cooling URL, never
//! both), FO-D6-OFF, FO-D3 (no exemption or probe while a clean candidate exists), FO-D4 (one
//! exemption per URL per cycle), FO-X2a / FO-X4 (with a cooldown, a clean open takes the first clean URL
//! in chain order: other hosts before a failing one, then directory order), FO-X3 (a URL probed at most once per `PROBE_MIN_MS` less a quarter of
//! jitter), FO-X3a (never a probe of a URL that failed since the tick) and make-before-break
//! (one open in flight). At each adoption: FO-R5a. At each `close`: make-before-break (only the
//! channel a success left, or an open whose URL left the list). Switch lines: FO-D7 (one
//! `[relay-switch]` per success while a channel was current, none otherwise). No-candidate
//! lines: FO-D6 (only on a tick that ran the health path, at most once per `GRACE_MS`).
//!
//! Left to the oracle (not judged here, with why): FO-D5's order (it needs the chain's
//! passed-over set, whose rounds are the oracle's transcription of FO-X2); FO-D2 / FO-D2a and
//! FO-D7's counters (the core's table and counters are not in a journal); FO-X1 / FO-X2 stalls
//! and FO-X3's recovery bound (they need which relays were up, which no journal knows); FO-S1
//! (a directory's freshness is decided before it becomes an input). After a gap the record is
//! unknown: the property judge waits for the next `start` (the oracle's search goes on).

use std::collections::{BTreeMap, BTreeSet};

use switchyard_core::failover::{
    ChannelAction, ChannelState, CooldownKind, Event, FailoverEffect, FailoverInput,
    FailoverRecord, Origin, Output, RelayUrl, Skip, Thresholds,
};
use switchyard_core::MonoMs;

use super::{Departure, Judged};
use crate::failover_oracle::naive_host;

/// One URL's cooldown cycle in the spec's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cycle {
    kind: CooldownKind,
    until: MonoMs,
    exempted: bool,
}

/// The open the record saw start.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Opening {
    url: RelayUrl,
    origin: Origin,
    exempt: bool,
    probe: bool,
}

/// What the last input allows its outputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Step {
    /// The path an open of this step belongs to (`None`: nothing may open).
    origin: Option<Origin>,
    /// The health path may act (a tick that found the channel unhealthy, or its own open
    /// failed while the channel is still unhealthy).
    health_may_act: bool,
    /// A tick that ran the health path (the only place a no-candidate line may come from).
    tick_ran_health: bool,
    /// FO-D7: a success while a channel was current owes one `[relay-switch]` line.
    switch_owed: bool,
    /// Make-before-break: the URLs this step may close (the channel a success left, an open
    /// whose URL left the list).
    closable: Vec<RelayUrl>,
}

/// One client's record and the properties judged on it.
#[derive(Debug, Default)]
pub struct FoProperties {
    thresholds: Option<Thresholds>,
    /// After a gap: unknown until the next `start`.
    suspended: bool,
    list: Vec<RelayUrl>,
    current: Option<RelayUrl>,
    opening: Option<Opening>,
    cycles: BTreeMap<RelayUrl, Cycle>,
    /// FO-H-1: the current channel's last report (healthy when adopted; `None`: no channel).
    channel: Option<ChannelState>,
    left_healthy_at: Option<MonoMs>,
    /// FO-X3a: URLs whose open failed since the last tick.
    chain_failed: BTreeSet<RelayUrl>,
    /// FO-X4: URLs whose open failed since a channel was last adopted (the chain last moved):
    /// while one still cools, its host is a suspect of the chain.
    failed_since_move: BTreeSet<RelayUrl>,
    /// FO-X3: the last probe of each URL.
    last_probe_at: BTreeMap<RelayUrl, MonoMs>,
    /// FO-D6: the last no-candidate line.
    skip_line_at: Option<MonoMs>,
    step: Step,
}

impl FoProperties {
    #[must_use]
    pub fn new() -> FoProperties {
        FoProperties::default()
    }

    /// A gap: the record is unknown until the next `start`.
    pub fn gap(&mut self) {
        self.suspended = true;
    }

    /// Judges one failover record at `at` (its line `line`).
    pub fn judge(&mut self, line: u64, at: MonoMs, rec: &FailoverRecord) -> Judged {
        if let FailoverRecord::Start { thresholds } = rec {
            *self = FoProperties {
                thresholds: Some(*thresholds),
                ..FoProperties::default()
            };
            return Ok(());
        }
        let Some(t) = self.thresholds else {
            return Ok(());
        };
        if self.suspended {
            return Ok(());
        }
        let depart = |requirement: &'static str, event: String, allowed: String| {
            Err(Departure::new(line, requirement, event, allowed))
        };
        match rec {
            FailoverRecord::Start { .. } => Ok(()),
            FailoverRecord::Input(input) => {
                if self.step.switch_owed {
                    return depart(
                        "FO-D7",
                        format!("{input:?} after a switch that logged no [relay-switch] line"),
                        "one [relay-switch] line for every switch".to_owned(),
                    );
                }
                self.input(t, at, input);
                Ok(())
            }
            FailoverRecord::Output(Output::Action(ChannelAction::Open {
                url,
                exempt,
                probe,
                ..
            })) => self.open(line, t, at, url, *exempt, *probe),
            FailoverRecord::Output(Output::Action(ChannelAction::Close { url })) => {
                match self.step.closable.iter().position(|u| u == url) {
                    Some(i) => {
                        self.step.closable.remove(i);
                        Ok(())
                    }
                    None => depart(
                        "make-before-break",
                        format!("close {url}"),
                        "a close only of the channel a success left, or of an open whose URL left the list".to_owned(),
                    ),
                }
            }
            FailoverRecord::Output(Output::Event(Event::Switched(rec))) => {
                if !self.step.switch_owed {
                    return depart(
                        "FO-D7",
                        format!("[relay-switch] #{} {} -> {}", rec.seq, rec.from, rec.to),
                        "a [relay-switch] line only for a success while a channel was current"
                            .to_owned(),
                    );
                }
                self.step.switch_owed = false;
                Ok(())
            }
            FailoverRecord::Output(Output::Event(Event::Skipped(Skip::NoCandidate { .. }))) => {
                if !self.step.tick_ran_health {
                    return depart(
                        "FO-D6",
                        "[relay-skip] no candidate".to_owned(),
                        "the no-candidate line only on a tick that ran the health path".to_owned(),
                    );
                }
                if self
                    .skip_line_at
                    .is_some_and(|last| at.since_ms(last) < t.grace_ms)
                {
                    return depart(
                        "FO-D6",
                        "[relay-skip] no candidate".to_owned(),
                        format!(
                            "the no-candidate line at most once per GRACE_MS ({} ms)",
                            t.grace_ms
                        ),
                    );
                }
                self.skip_line_at = Some(at);
                Ok(())
            }
            FailoverRecord::Output(Output::Event(_)) => Ok(()),
            FailoverRecord::Effect(FailoverEffect::Adopted { url }) => {
                if self.list.contains(url) {
                    Ok(())
                } else {
                    depart(
                        "FO-R5a",
                        format!("the driver adopted the channel to {url}"),
                        "a channel adopted only while its URL is listed".to_owned(),
                    )
                }
            }
            FailoverRecord::Effect(_) => Ok(()),
        }
    }

    /// FO-H-1 as the requirement states it: the supervisor on, and no channel, or one in
    /// backoff with `MIN_ATTEMPTS` attempts or for `GRACE_MS` since it left healthy.
    fn unhealthy(&self, t: Thresholds, now: MonoMs) -> bool {
        if t.min_attempts == 0 {
            return false;
        }
        if self.current.is_none() {
            return true;
        }
        match self.channel {
            None | Some(ChannelState::Healthy) => false,
            Some(ChannelState::Backoff { attempts }) => {
                attempts >= t.min_attempts
                    || self
                        .left_healthy_at
                        .is_some_and(|at| now.since_ms(at) >= t.grace_ms)
            }
        }
    }

    fn cooling(&self, url: &RelayUrl, at: MonoMs) -> bool {
        self.cycles.get(url).is_some_and(|c| c.until > at)
    }

    fn input(&mut self, t: Thresholds, at: MonoMs, input: &FailoverInput) {
        self.cycles.retain(|_, c| c.until > at);
        let mut step = Step::default();
        match input {
            FailoverInput::Tick { .. } => {
                self.chain_failed.clear();
                step.tick_ran_health = self.opening.is_none() && self.unhealthy(t, at);
                step.health_may_act = step.tick_ran_health;
                step.origin = Some(Origin::Health);
            }
            FailoverInput::Directory { urls, .. } => {
                if !urls.is_empty() {
                    let mut list: Vec<RelayUrl> = Vec::with_capacity(urls.len());
                    for url in urls {
                        if !list.contains(url) {
                            list.push(url.clone());
                        }
                    }
                    self.list = list;
                }
                step.origin = Some(Origin::Directory);
            }
            FailoverInput::ChannelState { url, state } => {
                if self.current.as_ref() == Some(url) {
                    if matches!(state, ChannelState::Backoff { .. })
                        && self.channel == Some(ChannelState::Healthy)
                    {
                        self.left_healthy_at = Some(at);
                    }
                    if *state == ChannelState::Healthy {
                        self.left_healthy_at = None;
                    }
                    self.channel = Some(*state);
                }
            }
            FailoverInput::OpenSucceeded { url } => {
                if let Some(open) = self.opening.take_if(|o| &o.url == url) {
                    if self.list.contains(url) {
                        if let Some(old) = self.current.replace(url.clone()) {
                            self.cycles.insert(
                                old.clone(),
                                Cycle {
                                    kind: CooldownKind::SwitchedAway,
                                    until: at.plus_ms(t.cooldown_ms),
                                    exempted: false,
                                },
                            );
                            step.switch_owed = true;
                            step.closable.push(old);
                        }
                        self.cycles.remove(url);
                        self.channel = Some(ChannelState::Healthy);
                        self.left_healthy_at = None;
                        self.failed_since_move.clear();
                    } else {
                        // FO-R5a: closed, never adopted; nothing else changes.
                        step.closable.push(open.url);
                    }
                }
            }
            FailoverInput::OpenFailed { url, .. } => {
                if let Some(open) = self.opening.take_if(|o| &o.url == url) {
                    self.chain_failed.insert(url.clone());
                    if !open.probe {
                        self.failed_since_move.insert(url.clone());
                        self.cycles.insert(
                            url.clone(),
                            Cycle {
                                kind: CooldownKind::OpenFailed,
                                until: at.plus_ms(t.cooldown_ms),
                                exempted: open.exempt,
                            },
                        );
                    }
                    step.origin = Some(Origin::Health);
                    step.health_may_act = open.origin == Origin::Health && self.unhealthy(t, at);
                }
            }
        }
        self.step = step;
    }

    fn open(
        &mut self,
        line: u64,
        t: Thresholds,
        at: MonoMs,
        url: &RelayUrl,
        exempt: bool,
        probe: bool,
    ) -> Judged {
        let event = format!(
            "open {url}{}{}",
            if exempt { " (exempt)" } else { "" },
            if probe { " (probe)" } else { "" }
        );
        let depart = |requirement: &'static str, allowed: String| {
            Err(Departure::new(line, requirement, event.clone(), allowed))
        };
        if let Some(o) = &self.opening {
            return depart(
                "make-before-break",
                format!("one open in flight: {} is still opening", o.url),
            );
        }
        let Some(origin) = self.step.origin else {
            return depart(
                "FO-H-1",
                "no open after this input: only a tick, a directory input or the health path's own failed open leads to one".to_owned(),
            );
        };
        if !self.list.contains(url) {
            return depart("FO-R5", "an open of a URL of the current list".to_owned());
        }
        if origin == Origin::Health && t.min_attempts == 0 {
            return depart(
                "FO-H-2",
                "with MIN_ATTEMPTS=0 the health path never acts".to_owned(),
            );
        }
        if origin == Origin::Health && !self.step.health_may_act {
            return depart(
                "FO-H-1",
                "the health path opens only on a tick that finds the channel unhealthy, or after its own open failed while it still is".to_owned(),
            );
        }
        let cycle = self.cycles.get(url).copied();
        let cooling = cycle.is_some_and(|c| c.until > at);
        if origin == Origin::Directory && cooling {
            return depart(
                "FO-D1",
                format!(
                    "the directory path never opens a cooling URL ({url} cools until {} ms)",
                    cycle.map_or(0, |c| c.until.as_ms())
                ),
            );
        }
        if (exempt || probe) && !t.exempt {
            return depart(
                "FO-D6-OFF",
                "with EXEMPT=0 no exempt open and no probe".to_owned(),
            );
        }
        if (exempt || probe) != (origin == Origin::Health && cooling) || (exempt && probe) {
            return depart(
                "FO-D6",
                "exempt or probe exactly when the health path opens a cooling URL, never both"
                    .to_owned(),
            );
        }
        let first_clean = self
            .list
            .iter()
            .find(|u| self.current.as_ref() != Some(*u) && !self.cooling(u, at));
        if let (true, Some(clean)) = (exempt || probe, first_clean) {
            return depart(
                "FO-D3",
                format!("no exemption and no probe while a clean candidate exists ({clean})"),
            );
        }
        if exempt && cycle.is_some_and(|c| c.exempted) {
            return depart(
                "FO-D4",
                format!("at most one exemption per URL per cooldown cycle ({url}'s is spent)"),
            );
        }
        if t.cooldown_ms > 0 && origin == Origin::Health && !exempt && !probe {
            // FO-X4: the chain's order puts a suspect host (the current channel's, or one
            // whose open failed since the chain last moved and still cools) after the others.
            let suspect = |u: &RelayUrl| {
                let host = naive_host(u);
                self.current.as_ref().is_some_and(|c| naive_host(c) == host)
                    || self.list.iter().any(|v| {
                        self.failed_since_move.contains(v)
                            && self.cooling(v, at)
                            && naive_host(v) == host
                    })
            };
            let other_host_clean = self
                .list
                .iter()
                .find(|u| self.current.as_ref() != Some(*u) && !self.cooling(u, at) && !suspect(u));
            if let Some(clean) = other_host_clean.filter(|c| *c != url) {
                let requirement = if suspect(url) { "FO-X4" } else { "FO-X2a" };
                return depart(
                    requirement,
                    format!(
                        "a clean open takes the first clean URL in chain order, other hosts before a failing one ({clean})"
                    ),
                );
            }
            if let Some(clean) = first_clean.filter(|c| other_host_clean.is_none() && *c != url) {
                return depart(
                    "FO-X2a",
                    format!("a clean open takes the first clean URL in chain order ({clean})"),
                );
            }
        }
        if probe {
            if self.chain_failed.contains(url) {
                return depart(
                    "FO-X3a",
                    "a probe never re-opens a URL that failed in the same tick's chain".to_owned(),
                );
            }
            let floor = t.probe_min_ms - t.probe_min_ms / 4;
            if let Some(last) = self.last_probe_at.get(url) {
                if at.since_ms(*last) < floor {
                    return depart(
                        "FO-X3",
                        format!(
                            "a URL probed at most once per PROBE_MIN_MS less jitter ({floor} ms; the last probe was {} ms ago)",
                            at.since_ms(*last)
                        ),
                    );
                }
            }
            self.last_probe_at.insert(url.clone(), at);
        }
        if exempt {
            if let Some(c) = self.cycles.get_mut(url) {
                c.exempted = true;
            }
        }
        self.opening = Some(Opening {
            url: url.clone(),
            origin,
            exempt,
            probe,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conform::generate::{
        edit_refusal_into_open, generate, generated_thresholds, switched_then_directory,
        SimulatedClient,
    };
    use switchyard_core::failover::{DirectorySource, OpenFailure};
    use switchyard_core::journal::{JournalLine, JournalRecord};

    /// The property judge alone (no oracle): the first departure of each key.
    fn judge_alone(lines: &[JournalLine]) -> Option<Departure> {
        let mut judges: BTreeMap<String, FoProperties> = BTreeMap::new();
        let mut first: Option<Departure> = None;
        for (i, l) in lines.iter().enumerate() {
            let judge = judges.entry(l.key.clone()).or_default();
            let verdict = match &l.rec {
                JournalRecord::Failover(rec) => judge.judge(i as u64 + 1, MonoMs(l.at_ms), rec),
                JournalRecord::Gap { .. } => {
                    judge.gap();
                    Ok(())
                }
                _ => Ok(()),
            };
            if let (Err(d), None) = (verdict, &first) {
                first = Some(d);
            }
        }
        first
    }

    fn u(s: &str) -> RelayUrl {
        RelayUrl::new(s)
    }

    /// A hand-written journal: `(at_ms, record)` lines of one client.
    fn journal(recs: Vec<(u64, FailoverRecord)>) -> Vec<JournalLine> {
        recs.into_iter()
            .enumerate()
            .map(|(seq, (at_ms, rec))| JournalLine {
                key: "client".to_owned(),
                seq: seq as u64,
                at_ms,
                rec: JournalRecord::Failover(rec),
            })
            .collect()
    }

    fn input(i: FailoverInput) -> FailoverRecord {
        FailoverRecord::Input(i)
    }

    fn open(url: &str, exempt: bool, probe: bool) -> FailoverRecord {
        FailoverRecord::Output(Output::Action(ChannelAction::Open {
            url: u(url),
            timeout_ms: 2_000,
            exempt,
            probe,
        }))
    }

    fn tick() -> FailoverRecord {
        input(FailoverInput::Tick { jitter_ms: 0 })
    }

    fn failed(url: &str) -> FailoverRecord {
        input(FailoverInput::OpenFailed {
            url: u(url),
            failure: OpenFailure::Failed,
        })
    }

    /// Attached to a, listing [a, b], a unhealthy (3 attempts) at 1,000 ms.
    fn attached_unhealthy() -> Vec<(u64, FailoverRecord)> {
        vec![
            (
                0,
                FailoverRecord::Start {
                    thresholds: generated_thresholds(),
                },
            ),
            (
                0,
                input(FailoverInput::Directory {
                    urls: vec![u("wss://a/r"), u("wss://b/r")],
                    source: DirectorySource::Cache,
                }),
            ),
            (0, open("wss://a/r", false, false)),
            (
                100,
                input(FailoverInput::OpenSucceeded {
                    url: u("wss://a/r"),
                }),
            ),
            (
                1_000,
                input(FailoverInput::ChannelState {
                    url: u("wss://a/r"),
                    state: ChannelState::Backoff { attempts: 3 },
                }),
            ),
        ]
    }

    /// Then b fails clean, fails exempt (its exemption spent), and the next tick comes (line 11).
    fn b_exemption_spent() -> Vec<(u64, FailoverRecord)> {
        let mut j = attached_unhealthy();
        j.extend([
            (2_000, tick()),
            (2_000, open("wss://b/r", false, false)),
            (2_100, failed("wss://b/r")),
            (2_100, open("wss://b/r", true, false)),
            (2_200, failed("wss://b/r")),
            (7_000, tick()),
        ]);
        j
    }

    /// ... and that tick probes b (line 12).
    fn to_first_probe() -> Vec<(u64, FailoverRecord)> {
        let mut j = b_exemption_spent();
        j.push((7_000, open("wss://b/r", false, true)));
        j
    }

    #[test]
    fn conf_1_the_properties_hold_on_generated_journals_of_the_core_and_a_faithful_driver() {
        for seed in 0..8u64 {
            let mut lines = Vec::new();
            generate(20_000, 16, seed, |l| lines.push(l.clone()));
            assert_eq!(judge_alone(&lines), None, "seed {seed}");
        }
        assert_eq!(judge_alone(&journal(to_first_probe())), None);
    }

    #[test]
    fn conf_1_fo_d1_the_properties_alone_see_an_open_of_a_cooling_url_on_the_directory_path() {
        let mut client = SimulatedClient::new("client", 7, generated_thresholds());
        switched_then_directory(&mut client);
        let mut lines = client.take_lines();
        assert_eq!(judge_alone(&lines), None);
        let at = edit_refusal_into_open(&mut lines);
        let d = judge_alone(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 1, "FO-D1"), "{d:?}");
    }

    #[test]
    fn conf_1_fo_d3_fo_d4_fo_d6_exemptions_judged_on_the_record() {
        // FO-D3: an exempt open of b on the first tick, while b is clean.
        let mut j = attached_unhealthy();
        j.extend([(2_000, tick()), (2_000, open("wss://b/r", true, false))]);
        let d = judge_alone(&journal(j)).expect("departs");
        // b is not cooling: an exemption of a clean URL breaks FO-D6 before FO-D3.
        assert_eq!(d.requirement, "FO-D6", "{d:?}");
        // FO-D4: b's exemption spent, exempted again in the same cycle.
        let mut j = b_exemption_spent();
        j.push((7_000, open("wss://b/r", true, false)));
        let d = judge_alone(&journal(j)).expect("departs");
        assert_eq!((d.line, d.requirement), (12, "FO-D4"), "{d:?}");
        // FO-D3: with a third URL clean, an exemption of cooling b.
        let mut j = attached_unhealthy();
        j.extend([
            (
                1_500,
                input(FailoverInput::Directory {
                    urls: vec![u("wss://a/r"), u("wss://b/r"), u("wss://c/r")],
                    source: DirectorySource::Cache,
                }),
            ),
            (2_000, tick()),
            (2_000, open("wss://b/r", false, false)),
            (2_100, failed("wss://b/r")),
            (2_100, open("wss://b/r", true, false)),
        ]);
        let d = judge_alone(&journal(j)).expect("departs");
        assert_eq!((d.line, d.requirement), (10, "FO-D3"), "{d:?}");
    }

    /// FO-X4: host a serves two URLs; its channel dies and the chain opens a's other URL
    /// while b's is clean: departs at that open with FO-X4. Opening b conforms.
    #[test]
    fn conf_4_fo_x4_a_failing_hosts_other_url_before_the_other_host_departs() {
        let (a1, a2, b) = ("wss://a:1/r", "wss://a:2/r", "wss://b/r");
        let head = |first: &str| {
            vec![
                (
                    0,
                    FailoverRecord::Start {
                        thresholds: generated_thresholds(),
                    },
                ),
                (
                    0,
                    input(FailoverInput::Directory {
                        urls: vec![u(a1), u(a2), u(b)],
                        source: DirectorySource::Cache,
                    }),
                ),
                (0, open(a1, false, false)),
                (100, input(FailoverInput::OpenSucceeded { url: u(a1) })),
                (
                    1_000,
                    input(FailoverInput::ChannelState {
                        url: u(a1),
                        state: ChannelState::Backoff { attempts: 3 },
                    }),
                ),
                (2_000, tick()),
                (2_000, open(first, false, false)),
            ]
        };
        let d = judge_alone(&journal(head(a2))).expect("departs");
        assert_eq!((d.line, d.requirement), (7, "FO-X4"), "{d:?}");
        assert_eq!(judge_alone(&journal(head(b))), None);
        // b failed: a's other URL is then the first clean one.
        let mut j = head(b);
        j.extend([(2_100, failed(b)), (2_100, open(a2, false, false))]);
        assert_eq!(judge_alone(&journal(j)), None);
    }

    #[test]
    fn conf_1_fo_x3_fo_x3a_probes_judged_on_the_record() {
        // FO-X3a: the probe fails and the same chain probes b again.
        let mut j = to_first_probe();
        j.extend([
            (7_100, failed("wss://b/r")),
            (7_100, open("wss://b/r", false, true)),
        ]);
        let d = judge_alone(&journal(j)).expect("departs");
        assert_eq!(d.requirement, "FO-X3a", "{d:?}");
        // FO-X3: the next tick, 1 s later, probes b again (PROBE_MIN_MS 4 s less a quarter).
        let mut j = to_first_probe();
        j.extend([
            (7_100, failed("wss://b/r")),
            (8_000, tick()),
            (8_000, open("wss://b/r", false, true)),
        ]);
        let d = judge_alone(&journal(j)).expect("departs");
        assert_eq!(d.requirement, "FO-X3", "{d:?}");
    }

    #[test]
    fn conf_1_fo_h_1_make_before_break_fo_d7_fo_r5a_judged_on_the_record() {
        // FO-H-1: the health path opens after a channel report (no tick).
        let mut j = attached_unhealthy();
        j.push((1_000, open("wss://b/r", false, false)));
        let d = judge_alone(&journal(j)).expect("departs");
        assert_eq!((d.line, d.requirement), (6, "FO-H-1"), "{d:?}");
        // Make-before-break: a second open while b is opening.
        let mut j = attached_unhealthy();
        j.extend([
            (2_000, tick()),
            (2_000, open("wss://b/r", false, false)),
            (2_000, open("wss://a/r", false, false)),
        ]);
        let d = judge_alone(&journal(j)).expect("departs");
        assert_eq!(d.requirement, "make-before-break", "{d:?}");
        // FO-D7: b comes up (a switch) and the next input comes with no switch line.
        let mut j = attached_unhealthy();
        j.extend([
            (2_000, tick()),
            (2_000, open("wss://b/r", false, false)),
            (
                2_100,
                input(FailoverInput::OpenSucceeded {
                    url: u("wss://b/r"),
                }),
            ),
            (
                2_100,
                FailoverRecord::Output(Output::Action(ChannelAction::Close {
                    url: u("wss://a/r"),
                })),
            ),
            (3_000, tick()),
        ]);
        let d = judge_alone(&journal(j)).expect("departs");
        assert_eq!((d.line, d.requirement), (10, "FO-D7"), "{d:?}");
        // FO-R5a: b leaves the list while opening and the driver adopts it.
        let mut j = attached_unhealthy();
        j.extend([
            (2_000, tick()),
            (2_000, open("wss://b/r", false, false)),
            (
                2_050,
                input(FailoverInput::Directory {
                    urls: vec![u("wss://a/r")],
                    source: DirectorySource::Cache,
                }),
            ),
            (
                2_100,
                input(FailoverInput::OpenSucceeded {
                    url: u("wss://b/r"),
                }),
            ),
            (
                2_100,
                FailoverRecord::Effect(FailoverEffect::Adopted {
                    url: u("wss://b/r"),
                }),
            ),
        ]);
        let d = judge_alone(&journal(j)).expect("departs");
        assert_eq!((d.line, d.requirement), (10, "FO-R5a"), "{d:?}");
    }
}
