//! CONF-2: a binary judging its own journal as it is written (`--conform`).
//!
//! [`OnlineConformance::observer`] is a journal observer: it feeds every line the binary's
//! journal decides (written or dropped by the per-second bound) into the spec's
//! [`Conformance`], the same judge `switchyard-check conform` runs offline. A departure is logged
//! once (ERROR, with the requirement ID) and counted in
//! `switchyard_conformance_departures_total{requirement}`; a key that departed is not judged
//! further, so a broken client or host logs one line, not one per event.
//!
//! Line numbers in the log are the count of journal lines this process decided: the line of
//! the journal file when the process writes its own file and nothing was dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use switchyard_adapters::journal::JournalObserver;
use switchyard_adapters::probes::{self, Sample};
use switchyard_core::journal::JournalLine;
use switchyard_spec::conform::Conformance;

/// The metric's name (the encoder adds `switchyard_` and `_total`).
pub const DEPARTURES_METRIC: &str = "conformance_departures";

#[derive(Debug, Default)]
struct State {
    conformance: Conformance,
    lines: u64,
    departures: BTreeMap<String, u64>,
    /// Whether a refused line (too many keys) was logged: once.
    refused_logged: bool,
}

/// The online judge of one process; clones share it.
#[derive(Debug, Clone, Default)]
pub struct OnlineConformance {
    state: Arc<Mutex<State>>,
}

impl OnlineConformance {
    #[must_use]
    pub fn new() -> OnlineConformance {
        OnlineConformance::default()
    }

    /// The observer to give the journal.
    #[must_use]
    pub fn observer(&self) -> JournalObserver {
        let state = Arc::clone(&self.state);
        Box::new(move |line: &JournalLine| {
            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
            state.judge(line);
        })
    }

    /// Departures so far, by requirement ID.
    #[must_use]
    pub fn departures(&self) -> BTreeMap<String, u64> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .departures
            .clone()
    }

    /// `switchyard_conformance_departures_total{requirement="…"}`, one sample per requirement
    /// that departed (none: the family is absent, as Prometheus expects of a labelled counter
    /// never incremented).
    #[must_use]
    pub fn samples(&self) -> Vec<Sample> {
        self.departures()
            .into_iter()
            .map(|(requirement, n)| {
                probes::labelled_counter(
                    DEPARTURES_METRIC,
                    "journal events the spec does not allow (CONF-2), by the requirement they break; each client, host or director departs at most once",
                    vec![("requirement".to_owned(), requirement)],
                    n,
                )
            })
            .collect()
    }
}

impl State {
    fn judge(&mut self, line: &JournalLine) {
        self.lines += 1;
        match self.conformance.feed(self.lines, line) {
            Ok(None) => {}
            Ok(Some(d)) => {
                *self.departures.entry(d.requirement.to_owned()).or_default() += 1;
                tracing::error!(
                    requirement = d.requirement,
                    key = %line.key,
                    line = d.line,
                    "conformance: {} departs at line {}: {} breaks {}: the spec allowed {}",
                    line.key,
                    d.line,
                    d.event,
                    d.requirement,
                    d.allowed
                );
            }
            Err(error) => {
                if !self.refused_logged {
                    self.refused_logged = true;
                    tracing::error!(%error, "conformance: a journal line is not judged (logged once)");
                }
            }
        }
    }
}
