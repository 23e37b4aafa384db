//! Journals (CONF-1): what a core was given and what it decided, as data.
//!
//! A binary asked for a journal (`--journal`) writes one [`JournalLine`] per input it gave its
//! core (with the instant), per output the core decided, and per effect its driver carried out
//! (a channel adopted, a client admitted). `switchyard-check conform` replays the inputs through
//! the spec and judges the outputs and effects against it. The types live here, beside the
//! machines whose inputs and outputs they name, so the writer (adapters) and the judge (spec)
//! read one definition; nothing in core writes a journal.

use serde::{Deserialize, Serialize};

use crate::failover::FailoverRecord;
use crate::handoff::{CellRecord, DirectorRecord};

/// One line of a journal (one JSON object per line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalLine {
    /// Whose journal: a client's name, a cell's `cell/<id>` or a director's `director/<id>`.
    /// `conform` judges each key on its own.
    pub key: String,
    /// Counts the lines the writer decided on for this key, written or dropped: a jump tells
    /// the judge how many it lost.
    pub seq: u64,
    /// The writer's monotonic clock (milliseconds since the process started): the `now` its
    /// core was given.
    pub at_ms: u64,
    pub rec: JournalRecord,
}

/// What a line records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalRecord {
    Failover(FailoverRecord),
    Cell(CellRecord),
    Director(DirectorRecord),
    /// The writer dropped `dropped` lines of this key here (its per-second bound was reached,
    /// or a write failed). The judge fills the gap by search, and says so.
    Gap {
        dropped: u64,
    },
}
