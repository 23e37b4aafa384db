//! Conformance (CONF-1, CONF-2, CONF-3): a journal a running binary wrote, judged by the spec.
//!
//! The lines are grouped by key (a client, a host of a cell, a director); each key has its own
//! judge, which replays the key's inputs through the spec's side (for failover the naive
//! [`FoOracle`](crate::failover_oracle::FoOracle), which owes the core nothing, and the
//! failover properties on the spec's own record, `fo_properties`; for handoff the spec's record
//! of the barrier and the counters, judged by the handoff properties) and checks every output
//! and effect the journal holds against what the spec allows there. The first line no behaviour of the spec
//! allows is the key's departure: its line, the event, the requirement it breaks and what the
//! spec allowed instead. A key that departed is not judged further (one departure per key).
//!
//! Streaming: [`Conformance::feed_text`] takes one line at a time; memory is one judge per key
//! (a few hundred bytes plus the candidate list for a client), bounded by
//! [`MAX_KEYS`] (a key beyond it is refused with a named error, CONF-3).

pub mod failover;
pub mod fo_properties;
pub mod generate;
pub mod handoff;

use std::collections::BTreeMap;

use serde::Serialize;
use switchyard_core::journal::{JournalLine, JournalRecord};

/// Keys judged at once (CONF-3): 1,000,000 hosts fit; a key's judge is a few hundred bytes.
pub const MAX_KEYS: usize = 2_000_000;
/// The longest line read (a directory of 8,192 URLs is about 600 KB).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The first line of a key that no behaviour of the spec allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Departure {
    /// The line of the input (1-based), in the file named by `file` (the caller's numbering).
    pub line: u64,
    /// The journal line's event, in short.
    pub event: String,
    /// The requirement the event breaks.
    pub requirement: &'static str,
    /// What the spec allowed instead.
    pub allowed: String,
}

impl Departure {
    /// A departure at `line`: `event` breaks `requirement`; the spec allowed `allowed`.
    #[must_use]
    pub fn new(
        line: u64,
        requirement: &'static str,
        event: impl Into<String>,
        allowed: impl Into<String>,
    ) -> Departure {
        Departure {
            line,
            event: event.into(),
            requirement,
            allowed: allowed.into(),
        }
    }
}

/// A judge's answer to one line.
pub type Judged = Result<(), Departure>;

/// What a key's judge does with its lines. `line` is the line's number in its file.
pub trait Judge {
    fn judge(&mut self, line: u64, journal: &JournalLine) -> Judged;
    /// The end of the journal: anything the spec still owed (an output decided but not in the
    /// journal) is a departure at `line`, the last line.
    fn finish(&mut self, line: u64) -> Judged;
    /// How many gaps the judge had to fill by search.
    fn gaps_searched(&self) -> u64;
}

/// Why a line could not be read (exit 2 at the command line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("line {line}: not a journal line: {why}")]
    NotAJournalLine { line: u64, why: String },
    #[error("line {line}: longer than {MAX_LINE_BYTES} bytes")]
    TooLong { line: u64 },
    #[error("line {line}: key {key:?} would be key number {MAX_KEYS} + 1: at most {MAX_KEYS} keys are judged at once")]
    TooManyKeys { line: u64, key: String },
}

/// One key's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    Conforms {
        lines: u64,
        /// Gaps in the journal the judge filled by search (0: none).
        gaps_searched: u64,
    },
    Departs {
        lines: u64,
        gaps_searched: u64,
        #[serde(flatten)]
        departure: Departure,
    },
}

impl Verdict {
    #[must_use]
    pub fn departure(&self) -> Option<&Departure> {
        match self {
            Verdict::Conforms { .. } => None,
            Verdict::Departs { departure, .. } => Some(departure),
        }
    }
}

struct Keyed {
    judge: Box<dyn Judge + Send>,
    lines: u64,
    last_line: u64,
    departure: Option<Departure>,
}

/// The judges of every key seen so far.
#[derive(Default)]
pub struct Conformance {
    keys: BTreeMap<String, Keyed>,
    lines: u64,
}

impl std::fmt::Debug for Conformance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conformance")
            .field("keys", &self.keys.len())
            .field("lines", &self.lines)
            .finish()
    }
}

/// Reads one line of text: a [`JournalLine`] as the writer wrote it, or a JSON log line
/// (`--journal-log`) whose `journal` field holds one (as an object, as `--log-format json`
/// writes it, or as its text). `Ok(None)`: a log line without a journal
/// (other log lines in the same file), or a blank line.
pub fn parse_line(line_no: u64, text: &str) -> Result<Option<JournalLine>, ReadError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if text.len() > MAX_LINE_BYTES {
        return Err(ReadError::TooLong { line: line_no });
    }
    let not = |why: String| ReadError::NotAJournalLine { line: line_no, why };
    if text.starts_with("{\"key\"") {
        return serde_json::from_str(text)
            .map(Some)
            .map_err(|e| not(e.to_string()));
    }
    if !text.starts_with('{') && (text.contains("[relay-switch]") || text.contains("[relay-skip]"))
    {
        return Err(not(
            "a [relay-switch] / [relay-skip] log line, not a journal: give --seed-format (with --candidates) to judge such lines".to_owned(),
        ));
    }
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| not(e.to_string()))?;
    match value.get("journal") {
        Some(serde_json::Value::String(inner)) => serde_json::from_str(inner)
            .map(Some)
            .map_err(|e| not(format!("its `journal` field: {e}"))),
        // The JSON log writes a field that reads as JSON as that JSON (docs/OPERATIONS.md).
        Some(inner @ serde_json::Value::Object(_)) => serde_json::from_value(inner.clone())
            .map(Some)
            .map_err(|e| not(format!("its `journal` field: {e}"))),
        Some(_) => Err(not(
            "its `journal` field is neither a journal line nor its text".to_owned(),
        )),
        None if value.get("key").is_some() => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| not(e.to_string())),
        None => Ok(None),
    }
}

impl Conformance {
    #[must_use]
    pub fn new() -> Conformance {
        Conformance::default()
    }

    /// Reads and judges one line of text. `Ok(Some(d))`: this line is its key's departure
    /// (reported once per key).
    pub fn feed_text(&mut self, line_no: u64, text: &str) -> Result<Option<Departure>, ReadError> {
        match parse_line(line_no, text)? {
            None => Ok(None),
            Some(line) => self.feed(line_no, &line),
        }
    }

    /// Judges one journal line. `Ok(Some(d))`: this line is its key's departure.
    pub fn feed(
        &mut self,
        line_no: u64,
        line: &JournalLine,
    ) -> Result<Option<Departure>, ReadError> {
        self.lines += 1;
        if !self.keys.contains_key(&line.key) {
            if self.keys.len() >= MAX_KEYS {
                return Err(ReadError::TooManyKeys {
                    line: line_no,
                    key: line.key.clone(),
                });
            }
            let Some(judge) = judge_for(&line.rec) else {
                return Err(ReadError::NotAJournalLine {
                    line: line_no,
                    why: format!(
                        "key {:?} starts with a gap: nothing to judge it by",
                        line.key
                    ),
                });
            };
            self.keys.insert(
                line.key.clone(),
                Keyed {
                    judge,
                    lines: 0,
                    last_line: line_no,
                    departure: None,
                },
            );
        }
        let Some(keyed) = self.keys.get_mut(&line.key) else {
            return Ok(None);
        };
        keyed.lines += 1;
        keyed.last_line = line_no;
        if keyed.departure.is_some() {
            return Ok(None);
        }
        match keyed.judge.judge(line_no, line) {
            Ok(()) => Ok(None),
            Err(departure) => {
                keyed.departure = Some(departure.clone());
                Ok(Some(departure))
            }
        }
    }

    /// The end of the input: every key's verdict, in key order.
    pub fn finish(mut self) -> Vec<(String, Verdict)> {
        let mut verdicts = Vec::with_capacity(self.keys.len());
        for (key, mut keyed) in std::mem::take(&mut self.keys) {
            if keyed.departure.is_none() {
                if let Err(d) = keyed.judge.finish(keyed.last_line) {
                    keyed.departure = Some(d);
                }
            }
            let gaps_searched = keyed.judge.gaps_searched();
            let verdict = match keyed.departure {
                None => Verdict::Conforms {
                    lines: keyed.lines,
                    gaps_searched,
                },
                Some(departure) => Verdict::Departs {
                    lines: keyed.lines,
                    gaps_searched,
                    departure,
                },
            };
            verdicts.push((key, verdict));
        }
        verdicts
    }

    /// Lines judged so far.
    #[must_use]
    pub fn lines(&self) -> u64 {
        self.lines
    }
}

/// Judges a whole journal held as text (a test's or the drill's, read back after the run):
/// the lines judged and every key's verdict. The first unreadable line is the error.
pub fn judge_text(text: &str) -> Result<(u64, Vec<(String, Verdict)>), ReadError> {
    let mut conformance = Conformance::new();
    for (i, line) in text.lines().enumerate() {
        conformance.feed_text(i as u64 + 1, line)?;
    }
    let lines = conformance.lines();
    Ok((lines, conformance.finish()))
}

/// The judge a key's first line asks for.
fn judge_for(rec: &JournalRecord) -> Option<Box<dyn Judge + Send>> {
    match rec {
        JournalRecord::Failover(_) => Some(Box::new(failover::FailoverJudge::new())),
        JournalRecord::Cell(_) => Some(Box::new(handoff::CellJudge::new())),
        JournalRecord::Director(_) => Some(Box::new(handoff::DirectorJudge::new())),
        JournalRecord::Gap { .. } => None,
    }
}
