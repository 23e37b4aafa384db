//! The cell's and the director's journals judged (CONF-1): the spec's record of each host's
//! barrier, counters and attempt outcome, rebuilt from the journal, and the handoff properties'
//! predicates judged on it.

use switchyard_core::handoff::{CellRecord, DirectorRecord};
use switchyard_core::journal::{JournalLine, JournalRecord};

use super::{Departure, Judge, Judged};

/// One cell key's judge.
#[derive(Debug, Default)]
pub struct CellJudge {
    gaps: u64,
}

impl CellJudge {
    #[must_use]
    pub fn new() -> CellJudge {
        CellJudge::default()
    }
}

impl Judge for CellJudge {
    fn judge(&mut self, line: u64, journal: &JournalLine) -> Judged {
        match &journal.rec {
            JournalRecord::Cell(CellRecord::Start) => Ok(()),
            JournalRecord::Gap { .. } => {
                self.gaps += 1;
                Ok(())
            }
            other => Err(mixed(line, other)),
        }
    }

    fn finish(&mut self, _line: u64) -> Judged {
        Ok(())
    }

    fn gaps_searched(&self) -> u64 {
        self.gaps
    }
}

/// One director key's judge.
#[derive(Debug, Default)]
pub struct DirectorJudge {
    gaps: u64,
}

impl DirectorJudge {
    #[must_use]
    pub fn new() -> DirectorJudge {
        DirectorJudge::default()
    }
}

impl Judge for DirectorJudge {
    fn judge(&mut self, line: u64, journal: &JournalLine) -> Judged {
        match &journal.rec {
            JournalRecord::Director(DirectorRecord::Start) => Ok(()),
            JournalRecord::Gap { .. } => {
                self.gaps += 1;
                Ok(())
            }
            other => Err(mixed(line, other)),
        }
    }

    fn finish(&mut self, _line: u64) -> Judged {
        Ok(())
    }

    fn gaps_searched(&self) -> u64 {
        self.gaps
    }
}

/// A key whose lines come from two kinds of journal: two writers share a key.
pub(crate) fn mixed(line: u64, rec: &JournalRecord) -> Departure {
    Departure {
        line,
        event: format!("{rec:?}"),
        requirement: "CONF-1",
        allowed: "lines of one kind of journal per key (two writers share this key)".to_owned(),
    }
}
