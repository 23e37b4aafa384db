//! A failover client's journal judged (CONF-1): its inputs replayed through the naive
//! [`FoOracle`] (the spec's transcription of the FO rules, which owes the core nothing), its
//! outputs and the driver's effects checked against the oracle's decisions; and, beside the
//! oracle, the model's properties judged on the spec's own record rebuilt from the same lines
//! ([`FoProperties`], `fo_properties.rs`).
//!
//! After each input the oracle decides a list of [`Decision`]s; the journal's outputs that
//! follow the input must be exactly those, in order, and every effect of the driver must be one
//! of them carried out: an open started is an open decided, a channel adopted is a switch or an
//! attach decided, a channel closed is a close decided. The first line that is none of these is
//! the departure, named by the rule it breaks (FO-D1, FO-R5, FO-R5a, FO-D3..FO-D6-OFF, FO-H-1,
//! FO-H-2, FO-X3, FO-D7), or FO-ORACLE when no narrower rule names it.
//!
//! Gaps. A [`JournalRecord::Gap`] means lines were dropped: the state after it is not known.
//! The judge then searches: from every state it held, it applies up to
//! [`GAP_SEARCH_INPUTS`] unknown inputs (a tick, a channel report of the current URL, a
//! result of the open in flight, the last list again) at the instant of the line after the
//! gap, keeps every distinct state reached (at most [`GAP_SEARCH_STATES`]) and judges the
//! following lines against all of them, dropping each state a line contradicts. The key
//! departs when none is left. The verdict counts the gaps searched.

use std::collections::BTreeSet;

use switchyard_core::failover::{
    ChannelAction, ChannelState, Event, FailoverEffect, FailoverInput, FailoverRecord, OpenFailure,
    Origin, Output, RelayUrl, Skip, Thresholds,
};
use switchyard_core::journal::{JournalLine, JournalRecord};
use switchyard_core::MonoMs;

use super::fo_properties::FoProperties;
use super::{Departure, Judge, Judged};
use crate::failover_oracle::{Decision, FoOracle, OpenKind, SkipKind};

/// Unknown inputs tried in a row to fill one gap.
pub const GAP_SEARCH_INPUTS: usize = 3;
/// Distinct states kept while a gap is unresolved.
pub const GAP_SEARCH_STATES: usize = 4096;

/// One possible state of the client: the oracle and what it still owes from the last input.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Possible {
    oracle: FoOracle,
    /// Every decision of the last input (an effect must be one of them).
    decided: Vec<Decision>,
    /// How many of them the journal has shown: the rest are owed, in order.
    shown: usize,
}

impl Possible {
    /// The decisions of the last input the journal has not shown yet.
    fn owed(&self) -> &[Decision] {
        &self.decided[self.shown.min(self.decided.len())..]
    }
}

/// One client key's judge.
#[derive(Debug, Default)]
pub struct FailoverJudge {
    thresholds: Option<Thresholds>,
    /// Normally one; more only after a gap, until lines tell them apart.
    possible: Vec<Possible>,
    /// The last input: its line and what it was (for a departure that names missing output).
    last_input: Option<(u64, FailoverInput)>,
    /// The last list given (a gap search re-applies it).
    last_list: Vec<RelayUrl>,
    /// A gap was read; the search runs at the next line's instant.
    gap_open: bool,
    gaps: u64,
    /// The properties judged on the spec's own record, beside the oracle.
    properties: FoProperties,
}

impl FailoverJudge {
    #[must_use]
    pub fn new() -> FailoverJudge {
        FailoverJudge::default()
    }

    fn start(&mut self, at: MonoMs, thresholds: Thresholds) {
        self.thresholds = Some(thresholds);
        self.possible = vec![Possible {
            oracle: FoOracle::new(thresholds, at),
            decided: Vec::new(),
            shown: 0,
        }];
        self.last_input = None;
        self.last_list.clear();
        self.gap_open = false;
    }

    /// The departure when every possible state still owes the journal a decision of the last
    /// input: the journal went on (or ended) without it.
    fn owed_everywhere(&self, line: u64) -> Option<Departure> {
        if !self.possible.iter().all(|p| !p.owed().is_empty()) {
            return None;
        }
        let p = &self.possible[0];
        let (input_line, what) = self
            .last_input
            .as_ref()
            .map_or((line, String::new()), |(l, i)| (*l, describe_input(i)));
        Some(Departure::new(
            input_line,
            missing_requirement(&p.owed()[0]),
            format!("{what} with no `{}` after it", describe(&p.owed()[0])),
            describe_all(&p.decided),
        ))
    }

    fn input(&mut self, line: u64, at: MonoMs, input: &FailoverInput) -> Judged {
        // Whatever the last input decided must have been shown before the next input.
        if let Some(missing) = self.owed_everywhere(line) {
            return Err(missing);
        }
        self.possible.retain(|p| p.owed().is_empty());
        if let FailoverInput::Directory { urls, .. } = input {
            self.last_list.clone_from(urls);
        }
        for p in &mut self.possible {
            p.decided = apply(&mut p.oracle, at, input);
            p.shown = 0;
        }
        dedup(&mut self.possible);
        self.last_input = Some((line, input.clone()));
        Ok(())
    }

    fn output(&mut self, line: u64, at: MonoMs, output: &Output) -> Judged {
        let owed_next = |p: &Possible| {
            p.owed()
                .first()
                .is_some_and(|d| matches(output, d, &p.oracle))
        };
        if !self.possible.iter().any(owed_next) {
            let p = &self.possible[0];
            return Err(Departure::new(
                line,
                classify_output(output, p, self.last_input.as_ref(), at),
                describe_output(output),
                describe_owed(p),
            ));
        }
        if self.possible.len() > 1 {
            self.possible.retain(owed_next);
        }
        for p in &mut self.possible {
            p.shown += 1;
        }
        Ok(())
    }

    fn effect(&mut self, line: u64, effect: &FailoverEffect) -> Judged {
        let allowed = |p: &Possible| p.decided.iter().any(|d| carries_out(effect, d));
        if !self.possible.iter().any(allowed) {
            let p = &self.possible[0];
            let requirement = match effect {
                FailoverEffect::Adopted { url } if !p.oracle.list().contains(url) => "FO-R5a",
                FailoverEffect::Adopted { url }
                    if p.decided
                        .iter()
                        .any(|d| matches!(d, Decision::Close { url: closed } if closed == url)) =>
                {
                    "FO-R5a"
                }
                FailoverEffect::OpenStarted { url } if !p.oracle.list().contains(url) => "FO-R5",
                _ => "FO-ORACLE",
            };
            return Err(Departure::new(
                line,
                requirement,
                describe_effect(effect),
                format!(
                    "only what the last input decided: {}",
                    describe_all(&p.decided)
                ),
            ));
        }
        if self.possible.len() > 1 {
            self.possible.retain(allowed);
        }
        Ok(())
    }

    /// Fills a gap: every state reachable by up to [`GAP_SEARCH_INPUTS`] unknown inputs at `at`.
    fn search_gap(&mut self, at: MonoMs) {
        self.gap_open = false;
        self.gaps += 1;
        // Whatever was owed may have been among the dropped lines.
        let mut frontier: Vec<Possible> = self
            .possible
            .drain(..)
            .map(|mut p| {
                p.shown = p.decided.len();
                p
            })
            .collect();
        dedup(&mut frontier);
        let mut seen: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut all: Vec<Possible> = Vec::new();
        for p in &frontier {
            if seen.insert(fingerprint(p)) {
                all.push(p.clone());
            }
        }
        for _ in 0..GAP_SEARCH_INPUTS {
            let mut next = Vec::new();
            for p in &frontier {
                for input in self.unknown_inputs(&p.oracle) {
                    let mut q = p.clone();
                    let decided = apply(&mut q.oracle, at, &input);
                    q.shown = decided.len();
                    q.decided = decided;
                    if all.len() >= GAP_SEARCH_STATES {
                        break;
                    }
                    if seen.insert(fingerprint(&q)) {
                        all.push(q.clone());
                        next.push(q);
                    }
                }
            }
            frontier = next;
        }
        self.possible = all;
    }

    fn unknown_inputs(&self, oracle: &FoOracle) -> Vec<FailoverInput> {
        let mut inputs = vec![FailoverInput::Tick { jitter_ms: 0 }];
        let view_now = oracle.view(MonoMs::ZERO);
        if let Some(current) = &view_now.current {
            inputs.push(FailoverInput::ChannelState {
                url: current.clone(),
                state: ChannelState::Healthy,
            });
            let attempts = self.thresholds.map_or(1, |t| t.min_attempts.max(1));
            inputs.push(FailoverInput::ChannelState {
                url: current.clone(),
                state: ChannelState::Backoff { attempts },
            });
        }
        if let Some((url, _, _)) = &view_now.opening {
            inputs.push(FailoverInput::OpenSucceeded { url: url.clone() });
            for failure in [OpenFailure::Failed, OpenFailure::TimedOut] {
                inputs.push(FailoverInput::OpenFailed {
                    url: url.clone(),
                    failure,
                });
            }
        }
        if !self.last_list.is_empty() {
            inputs.push(FailoverInput::Directory {
                urls: self.last_list.clone(),
                source: switchyard_core::failover::DirectorySource::Cache,
            });
        }
        inputs
    }
}

impl Judge for FailoverJudge {
    /// The oracle's replay, then the properties on the spec's own record ([`FoProperties`]):
    /// a line the oracle allows still departs if it breaks a property.
    fn judge(&mut self, line: u64, journal: &JournalLine) -> Judged {
        self.replay(line, journal)?;
        match &journal.rec {
            JournalRecord::Failover(record) => {
                self.properties.judge(line, MonoMs(journal.at_ms), record)
            }
            JournalRecord::Gap { .. } => {
                self.properties.gap();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn finish(&mut self, line: u64) -> Judged {
        if self.gap_open || self.possible.is_empty() {
            return Ok(());
        }
        if let Some(missing) = self.owed_everywhere(line) {
            return Err(missing);
        }
        Ok(())
    }

    fn gaps_searched(&self) -> u64 {
        self.gaps
    }
}

impl FailoverJudge {
    /// The oracle's side of [`Judge::judge`].
    fn replay(&mut self, line: u64, journal: &JournalLine) -> Judged {
        let at = MonoMs(journal.at_ms);
        let record = match &journal.rec {
            JournalRecord::Failover(record) => record,
            JournalRecord::Gap { .. } => {
                self.gap_open = true;
                return Ok(());
            }
            other => return Err(super::handoff::mixed(line, other)),
        };
        if let FailoverRecord::Start { thresholds } = record {
            self.start(at, *thresholds);
            return Ok(());
        }
        if self.thresholds.is_none() {
            return Err(Departure::new(
                line,
                "CONF-1",
                "a record before the journal's start",
                "a `start` record (with the thresholds) first",
            ));
        }
        if self.gap_open {
            self.search_gap(at);
        }
        match record {
            FailoverRecord::Start { .. } => Ok(()),
            FailoverRecord::Input(input) => self.input(line, at, input),
            FailoverRecord::Output(output) => self.output(line, at, output),
            FailoverRecord::Effect(effect) => self.effect(line, effect),
        }
    }
}

fn apply(oracle: &mut FoOracle, at: MonoMs, input: &FailoverInput) -> Vec<Decision> {
    match input {
        FailoverInput::Tick { jitter_ms } => {
            oracle.set_probe_jitter_ms(*jitter_ms);
            oracle.tick(at)
        }
        FailoverInput::Directory { urls, .. } => oracle.directory(at, urls),
        FailoverInput::ChannelState { url, state } => oracle.channel_state(at, url, *state),
        FailoverInput::OpenSucceeded { url } => oracle.open_succeeded(at, url),
        FailoverInput::OpenFailed { url, failure } => oracle.open_failed(at, url, *failure),
    }
}

fn dedup(possible: &mut Vec<Possible>) {
    if possible.len() > 1 {
        let mut seen = BTreeSet::new();
        possible.retain(|p| seen.insert(fingerprint(p)));
    }
}

/// A state's identity for the search (the oracle is `Hash` + `Eq` but not `Ord`).
fn fingerprint(p: &Possible) -> Vec<u8> {
    format!("{:?}|{:?}", p.oracle, p.owed()).into_bytes()
}

fn kind_of(exempt: bool, probe: bool) -> OpenKind {
    match (exempt, probe) {
        (true, _) => OpenKind::Exempt,
        (false, true) => OpenKind::Probe,
        (false, false) => OpenKind::Clean,
    }
}

/// Whether the journal's output is the decision the oracle owes next.
fn matches(output: &Output, decision: &Decision, oracle: &FoOracle) -> bool {
    match (output, decision) {
        (
            Output::Action(ChannelAction::Open {
                url, exempt, probe, ..
            }),
            Decision::Open { url: u, kind, .. },
        ) => url == u && kind_of(*exempt, *probe) == *kind,
        (Output::Action(ChannelAction::Close { url }), Decision::Close { url: u }) => url == u,
        (
            Output::Event(Event::Switched(rec)),
            Decision::Switched {
                from,
                to,
                origin,
                exempt,
                probe,
            },
        ) => {
            rec.from == *from
                && rec.to == *to
                && rec.origin == *origin
                && rec.exemption.is_some() == *exempt
                && rec.probe == *probe
                // FO-D7: the line's `#n` is the switch count.
                && rec.seq == oracle.view(MonoMs::ZERO).counters.switches
        }
        (
            Output::Event(Event::Attached { url, origin }),
            Decision::Attached { url: u, origin: o },
        ) => url == u && origin == o,
        (Output::Event(Event::Skipped(skip)), Decision::Skip(kind)) => skip_matches(skip, kind),
        _ => false,
    }
}

fn skip_matches(skip: &Skip, kind: &SkipKind) -> bool {
    match (skip, kind) {
        (Skip::StillCooling { url, origin, .. }, SkipKind::StillCooling { url: u, origin: o }) => {
            url == u && origin == o
        }
        (Skip::NoCandidate { .. }, SkipKind::NoCandidate { .. }) => true,
        (
            Skip::OpenFailed {
                url, exempt, probe, ..
            },
            SkipKind::OpenFailed {
                url: u,
                exempt: e,
                probe: p,
            },
        ) => url == u && exempt == e && probe == p,
        (Skip::ProbeRoundFailed { .. }, SkipKind::ProbeRoundFailed)
        | (Skip::OpenInFlight { .. }, SkipKind::OpenInFlight)
        | (Skip::NotInList { .. }, SkipKind::NotInList)
        | (Skip::DirectoryRejected { .. }, SkipKind::DirectoryRejected) => true,
        _ => false,
    }
}

fn carries_out(effect: &FailoverEffect, decision: &Decision) -> bool {
    match (effect, decision) {
        (FailoverEffect::OpenStarted { url }, Decision::Open { url: u, .. })
        | (FailoverEffect::Adopted { url }, Decision::Switched { to: u, .. })
        | (FailoverEffect::Adopted { url }, Decision::Attached { url: u, .. })
        | (FailoverEffect::Closed { url }, Decision::Close { url: u }) => url == u,
        _ => false,
    }
}

/// The rule an output the oracle did not owe breaks.
fn classify_output(
    output: &Output,
    p: &Possible,
    last_input: Option<&(u64, FailoverInput)>,
    at: MonoMs,
) -> &'static str {
    let oracle = &p.oracle;
    let view = oracle.view(at);
    let cooling = |url: &RelayUrl| view.cooldown.iter().any(|row| &row.0 == url);
    let directory_input =
        last_input.is_some_and(|(_, i)| matches!(i, FailoverInput::Directory { .. }));
    let tick_input = last_input.is_some_and(|(_, i)| matches!(i, FailoverInput::Tick { .. }));
    let owed_open = p.owed().iter().find_map(|d| match d {
        Decision::Open { kind, .. } => Some(*kind),
        _ => None,
    });
    match output {
        Output::Action(ChannelAction::Open {
            url, exempt, probe, ..
        }) => {
            let thresholds = oracle.thresholds();
            if !oracle.list().contains(url) {
                "FO-R5"
            } else if directory_input && cooling(url) {
                "FO-D1"
            } else if *exempt && !thresholds.exempt {
                "FO-D6-OFF"
            } else if *exempt && owed_open == Some(OpenKind::Clean) {
                "FO-D3"
            } else if *exempt && view.cooldown.iter().any(|row| &row.0 == url && row.4) {
                "FO-D4"
            } else if *exempt && owed_open == Some(OpenKind::Exempt) {
                "FO-D5"
            } else if *probe || owed_open == Some(OpenKind::Probe) {
                "FO-X3"
            } else if tick_input && thresholds.min_attempts == 0 {
                "FO-H-2"
            } else if tick_input && p.owed().is_empty() {
                "FO-H-1"
            } else {
                "FO-ORACLE"
            }
        }
        Output::Event(Event::Switched(rec)) => {
            if !oracle.list().contains(&rec.to) {
                "FO-R5a"
            } else if p
                .owed()
                .iter()
                .any(|d| matches!(d, Decision::Switched { .. }))
            {
                "FO-D7"
            } else {
                "FO-ORACLE"
            }
        }
        _ => "FO-ORACLE",
    }
}

fn missing_requirement(decision: &Decision) -> &'static str {
    match decision {
        // FO-D7: every switch emits one line; the skips are the `[relay-skip]` lines.
        Decision::Switched { .. } | Decision::Skip(_) => "FO-D7",
        Decision::Close { .. } => "FO-R5a",
        Decision::Open {
            origin: Origin::Directory,
            ..
        } => "FO-D1",
        _ => "FO-ORACLE",
    }
}

fn describe_owed(p: &Possible) -> String {
    if p.owed().is_empty() {
        format!(
            "nothing more after the last input (it decided: {})",
            describe_all(&p.decided)
        )
    } else {
        describe_all(p.owed().iter())
    }
}

fn describe_all<'a>(decisions: impl IntoIterator<Item = &'a Decision>) -> String {
    let all: Vec<String> = decisions.into_iter().map(describe).collect();
    if all.is_empty() {
        "nothing".to_owned()
    } else {
        all.join(", then ")
    }
}

fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Open { url, origin, kind } => {
            let kind = match kind {
                OpenKind::Clean => "",
                OpenKind::Exempt => "exempt ",
                OpenKind::Probe => "probe ",
            };
            format!("{kind}open {url} ({} path)", origin.as_str())
        }
        Decision::Close { url } => format!("close {url}"),
        Decision::Switched {
            from, to, exempt, ..
        } => format!(
            "[relay-switch] {from} -> {to}{}",
            if *exempt { " (exempt)" } else { "" }
        ),
        Decision::Attached { url, .. } => format!("[relay-attach] {url}"),
        Decision::Skip(kind) => match kind {
            SkipKind::StillCooling { url, origin } => {
                format!(
                    "[relay-skip] {url} still cooling ({} path)",
                    origin.as_str()
                )
            }
            SkipKind::NoCandidate { .. } => "[relay-skip] no other candidate".to_owned(),
            SkipKind::OpenFailed { url, .. } => format!("[relay-skip] {url} did not come up"),
            SkipKind::OpenInFlight => "[relay-skip] an open is in flight".to_owned(),
            SkipKind::NotInList => "[relay-skip] left the list while opening".to_owned(),
            SkipKind::DirectoryRejected => "[relay-skip] directory rejected".to_owned(),
            SkipKind::ProbeRoundFailed => "[relay-skip] probe round failed".to_owned(),
        },
    }
}

fn describe_input(input: &FailoverInput) -> String {
    match input {
        FailoverInput::Tick { .. } => "tick".to_owned(),
        FailoverInput::Directory { urls, .. } => format!(
            "directory update ({} URLs, first {})",
            urls.len(),
            urls.first().map_or("none", RelayUrl::as_str)
        ),
        FailoverInput::ChannelState { url, state } => format!("channel {url} {state:?}"),
        FailoverInput::OpenSucceeded { url } => format!("open of {url} succeeded"),
        FailoverInput::OpenFailed { url, failure } => format!("open of {url} {failure:?}"),
    }
}

fn describe_output(output: &Output) -> String {
    match output {
        Output::Action(ChannelAction::Open {
            url, exempt, probe, ..
        }) => format!(
            "{}open {url}",
            match (exempt, probe) {
                (true, _) => "exempt ",
                (false, true) => "probe ",
                _ => "",
            }
        ),
        Output::Action(ChannelAction::Close { url }) => format!("close {url}"),
        Output::Event(event) => switchyard_core::failover::render(event),
    }
}

fn describe_effect(effect: &FailoverEffect) -> String {
    match effect {
        FailoverEffect::OpenStarted { url } => format!("the driver started an open of {url}"),
        FailoverEffect::Adopted { url } => format!("the driver adopted the channel to {url}"),
        FailoverEffect::Closed { url } => format!("the driver closed the channel to {url}"),
    }
}
