//! HO-L3 / OPS-2 / SEC-2: what the director tells an operator about its cells and its passes,
//! as pure decisions (the adapter measures, logs and counts what these say).
//!
//! - [`RefusalReason`]: why a cell refused a request, from the cell's own word (its
//!   `{"refused": word}` answer) or the HTTP status, bounded to known words (anything else is
//!   `other`): a label that is safe in a log line and a metric.
//! - [`CellClocks`]: the offset of each cell's clock from the director's, measured from the
//!   cell's `Date` header (one-second resolution, so an interval), and one change when it
//!   passes half of the cell's timestamp window (before the cell refuses the director's
//!   requests as `stale_timestamp`) and one when it is back inside.
//! - [`PassHealth`]: one change when passes start failing (or fail with another cause), one
//!   when they succeed again (OPS-2: once per state change, not per pass).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::CellId;
use super::store::{StoreFault, TxnOutcome};
use crate::MonoMs;

/// SEC-2: the window the cell accepts a signed request's timestamp in, around its own clock
/// (the cell's `auth_window`).
pub const INTERNAL_AUTH_WINDOW_MS: u64 = 30_000;

/// Why a cell refused an internal request (a bounded label: known words only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RefusalReason {
    /// SEC-2: the timestamp is outside the cell's window (the clocks differ too much).
    StaleTimestamp,
    /// SEC-2: no key of the cell has the request's key id (another secret).
    UnknownKey,
    /// SEC-2: the signature does not verify (another secret, or altered in transit).
    BadSignature,
    /// SEC-2: signed for another cell (the store names another cell at that address).
    WrongCell,
    /// SEC-2a: signed for another process of the cell (it restarted since the store was read).
    WrongIncarnation,
    /// SEC-2: the nonce was seen inside the window.
    Replayed,
    /// SEC-2: the cell's replay cache is full (an overload: retry later).
    ReplayCacheFull,
    /// A signature header is absent.
    MissingCredentials,
    /// A signature header is malformed.
    MalformedCredentials,
    /// HTTP 400: the cell could not read the request.
    MalformedRequest,
    /// HTTP 408: the cell's own request deadline fired.
    CellTimeout,
    /// HTTP 413: the request is over the cell's body bound.
    TooLarge,
    /// HTTP 503 without a known word: the cell is overloaded or not ready.
    Unavailable,
    /// Any other refusal.
    Other,
}

impl RefusalReason {
    pub const ALL: [RefusalReason; 14] = [
        RefusalReason::StaleTimestamp,
        RefusalReason::UnknownKey,
        RefusalReason::BadSignature,
        RefusalReason::WrongCell,
        RefusalReason::WrongIncarnation,
        RefusalReason::Replayed,
        RefusalReason::ReplayCacheFull,
        RefusalReason::MissingCredentials,
        RefusalReason::MalformedCredentials,
        RefusalReason::MalformedRequest,
        RefusalReason::CellTimeout,
        RefusalReason::TooLarge,
        RefusalReason::Unavailable,
        RefusalReason::Other,
    ];

    /// Stable snake_case name (the cell's own word where it has one; metric labels, logs).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            RefusalReason::StaleTimestamp => "stale_timestamp",
            RefusalReason::UnknownKey => "unknown_key",
            RefusalReason::BadSignature => "bad_signature",
            RefusalReason::WrongCell => "wrong_cell",
            RefusalReason::WrongIncarnation => "wrong_incarnation",
            RefusalReason::Replayed => "replayed",
            RefusalReason::ReplayCacheFull => "replay_cache_full",
            RefusalReason::MissingCredentials => "missing_credentials",
            RefusalReason::MalformedCredentials => "malformed_credentials",
            RefusalReason::MalformedRequest => "malformed_request",
            RefusalReason::CellTimeout => "cell_timeout",
            RefusalReason::TooLarge => "too_large",
            RefusalReason::Unavailable => "unavailable",
            RefusalReason::Other => "other",
        }
    }

    /// The reason a cell's word names; any word not known here is `Other` (the label stays
    /// bounded whatever a peer answers).
    #[must_use]
    pub fn from_word(word: &str) -> RefusalReason {
        RefusalReason::ALL
            .into_iter()
            .find(|r| *r != RefusalReason::Other && r.name() == word)
            .unwrap_or(RefusalReason::Other)
    }

    /// The reason of a refusal answered with HTTP `status` and, when the cell gave one, its
    /// word: the word if known, else what the status says.
    #[must_use]
    pub fn of_answer(status: u16, word: Option<&str>) -> RefusalReason {
        match word.map(RefusalReason::from_word) {
            Some(r) if r != RefusalReason::Other => r,
            _ => match status {
                400 => RefusalReason::MalformedRequest,
                408 => RefusalReason::CellTimeout,
                413 => RefusalReason::TooLarge,
                503 => RefusalReason::Unavailable,
                _ => RefusalReason::Other,
            },
        }
    }

    /// What an operator checks (the log line's `hint`).
    #[must_use]
    pub fn hint(self) -> &'static str {
        match self {
            RefusalReason::StaleTimestamp => {
                "the director's and the cell's clocks differ by more than the cell's window: check their time sync"
            }
            RefusalReason::UnknownKey | RefusalReason::BadSignature => {
                "the director's --secret does not match the cell's key"
            }
            RefusalReason::WrongCell => "the store's address of the cell reaches another cell",
            RefusalReason::WrongIncarnation => {
                "the cell restarted after the store was read: the next pass reads it again"
            }
            RefusalReason::Replayed => {
                "the cell saw this nonce already: something between resent the request"
            }
            RefusalReason::ReplayCacheFull => {
                "the cell's replay cache is full (an overload): tried again after the backoff"
            }
            RefusalReason::MissingCredentials | RefusalReason::MalformedCredentials => {
                "the request's signature headers did not reach the cell intact (a proxy?)"
            }
            RefusalReason::MalformedRequest
            | RefusalReason::CellTimeout
            | RefusalReason::TooLarge
            | RefusalReason::Unavailable
            | RefusalReason::Other => "see the cell's log",
        }
    }
}

/// One answered request, as the director timed it: its local clock (Unix ms) when it sent
/// the request and when the answer came, and the answer's `Date` (Unix seconds, the cell's
/// clock truncated to the second).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClockSample {
    pub sent_ms: u64,
    pub received_ms: u64,
    pub date_s: u64,
}

/// The cell's clock minus the director's, as an interval (ms): the cell's clock read
/// somewhere in `[date, date + 1 s)` while the director's read somewhere in `[sent, received]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClockOffset {
    pub min_ms: i64,
    pub max_ms: i64,
}

impl ClockOffset {
    /// `None` for a sample that cannot be (answered before sent: the local clock stepped back;
    /// a date out of range).
    #[must_use]
    pub fn of(s: ClockSample) -> Option<ClockOffset> {
        if s.received_ms < s.sent_ms {
            return None;
        }
        let cell_min = i64::try_from(s.date_s.checked_mul(1_000)?).ok()?;
        let cell_max = cell_min.checked_add(999)?;
        let sent = i64::try_from(s.sent_ms).ok()?;
        let received = i64::try_from(s.received_ms).ok()?;
        Some(ClockOffset {
            min_ms: cell_min.checked_sub(received)?,
            max_ms: cell_max.checked_sub(sent)?,
        })
    }

    /// The middle of the interval (the gauge's value).
    #[must_use]
    pub fn estimate_ms(self) -> i64 {
        self.min_ms + (self.max_ms - self.min_ms) / 2
    }

    /// Surely beyond `bound_ms` either way (the whole interval is).
    #[must_use]
    pub fn surely_beyond(self, bound_ms: u64) -> bool {
        let bound = i64::try_from(bound_ms).unwrap_or(i64::MAX);
        self.min_ms > bound || self.max_ms < -bound
    }

    /// Surely within `bound_ms` either way (the whole interval is).
    #[must_use]
    pub fn surely_within(self, bound_ms: u64) -> bool {
        let bound = i64::try_from(bound_ms).unwrap_or(i64::MAX);
        self.min_ms >= -bound && self.max_ms <= bound
    }
}

/// A change of what the director knows of a cell's clock (OPS-2: each reported once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClockChange {
    /// The cell's clock is surely more than `warn_ms` off the director's: at `window_ms` the
    /// cell refuses the director's requests (`stale_timestamp`); a cell ahead also stamps
    /// measurements the director reads as from the future (`measurement_from_future`).
    Skewed {
        cell: CellId,
        offset: ClockOffset,
        warn_ms: u64,
        window_ms: u64,
    },
    /// Back surely within `warn_ms`.
    Agrees { cell: CellId, offset: ClockOffset },
}

/// HO-L3 / OPS-2: the measured clock offset of each cell, and whether it is skewed. Skewed
/// once the whole interval is past half the window; back once the whole interval is within it
/// (an interval that straddles the bound changes nothing: no flapping at the bound).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellClocks {
    window_ms: u64,
    warn_ms: u64,
    cells: BTreeMap<CellId, (ClockOffset, bool)>,
}

impl CellClocks {
    /// Against cells that accept timestamps within `window_ms` of their clocks.
    #[must_use]
    pub fn new(window_ms: u64) -> CellClocks {
        CellClocks {
            window_ms,
            warn_ms: window_ms / 2,
            cells: BTreeMap::new(),
        }
    }

    /// The offset past which a cell's clock is reported (half the window).
    #[must_use]
    pub fn warn_ms(&self) -> u64 {
        self.warn_ms
    }

    /// A cell answered (any status) with a `Date`: its offset now, and its change, if any.
    pub fn handle_answer(&mut self, cell: CellId, sample: ClockSample) -> Option<ClockChange> {
        let offset = ClockOffset::of(sample)?;
        let was = self.cells.get(&cell).is_some_and(|(_, skewed)| *skewed);
        let skewed = if was {
            !offset.surely_within(self.warn_ms)
        } else {
            offset.surely_beyond(self.warn_ms)
        };
        self.cells.insert(cell, (offset, skewed));
        match (was, skewed) {
            (false, true) => Some(ClockChange::Skewed {
                cell,
                offset,
                warn_ms: self.warn_ms,
                window_ms: self.window_ms,
            }),
            (true, false) => Some(ClockChange::Agrees { cell, offset }),
            _ => None,
        }
    }

    /// The last offset measured to each cell, and whether it is skewed.
    #[must_use]
    pub fn offsets(&self) -> &BTreeMap<CellId, (ClockOffset, bool)> {
        &self.cells
    }
}

/// A change of the director's passes (OPS-2: each reported once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PassChange {
    /// A pass failed on the store: the first since passes succeeded (`failed_before` 0), or one
    /// with another cause than the failure before it.
    Failing {
        cause: StoreFault,
        failed_before: u64,
    },
    /// A pass succeeded after `failed_passes` failed in a row.
    Recovered { failed_passes: u64 },
}

/// OPS-2: whether the director's passes fail, and since how many passes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassHealth {
    failing: Option<(StoreFault, u64)>,
}

impl PassHealth {
    /// A pass ended: `Ok`, or failed with the store's fault. The change to report, if any
    /// (a further failure with the same cause is none).
    pub fn handle_pass(&mut self, result: Result<(), StoreFault>) -> Option<PassChange> {
        match (result, self.failing) {
            (Ok(()), None) => None,
            (Ok(()), Some((_, failed))) => {
                self.failing = None;
                Some(PassChange::Recovered {
                    failed_passes: failed,
                })
            }
            (Err(cause), None) => {
                self.failing = Some((cause, 1));
                Some(PassChange::Failing {
                    cause,
                    failed_before: 0,
                })
            }
            (Err(cause), Some((was, failed))) => {
                self.failing = Some((cause, failed.saturating_add(1)));
                (cause != was).then_some(PassChange::Failing {
                    cause,
                    failed_before: failed,
                })
            }
        }
    }

    /// Passes failed in a row so far (0: the last succeeded).
    #[must_use]
    pub fn failed(&self) -> u64 {
        self.failing.map_or(0, |(_, n)| n)
    }
}

/// HO-L4 / OPS-2: a change in the store's refusals of moves, to log once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreRefusalChange {
    /// The store began refusing moves for this reason (`AbortReason::name`).
    Refusing { reason: &'static str },
    /// A move committed with no refusal of this reason for the quiet time: it cleared after
    /// `refused` refusals.
    Cleared { reason: &'static str, refused: u64 },
}

/// HO-L4 / OPS-2: the reasons the store refuses moves for now (a rate or concurrency limit, a
/// full store, a pending migration, a policy re-checked under the lock), from the results of
/// moves as they end, so that each episode is logged twice (when it begins and when it clears),
/// not once per refused move. A reason clears at the first commit that comes `quiet_ms` or more
/// after its last refusal: a rate limit that lets some moves through in each window stays one
/// episode. Bounded by the number of reasons (`AbortReason` and `Ineligible` are enums).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreRefusals {
    quiet_ms: u64,
    /// Reason → (refusals in this episode, the last one's time).
    refusing: BTreeMap<&'static str, (u64, MonoMs)>,
}

impl StoreRefusals {
    #[must_use]
    pub fn new(quiet_ms: u64) -> StoreRefusals {
        StoreRefusals {
            quiet_ms,
            refusing: BTreeMap::new(),
        }
    }

    /// A move ended with `outcome` at `now`: the changes to log (none for most results).
    pub fn handle_result(&mut self, now: MonoMs, outcome: &TxnOutcome) -> Vec<StoreRefusalChange> {
        if let Some(reason) = outcome.refusal() {
            let reason = reason.name();
            let entry = self.refusing.entry(reason).or_insert((0, now));
            entry.0 = entry.0.saturating_add(1);
            entry.1 = entry.1.max(now);
            return if entry.0 == 1 {
                vec![StoreRefusalChange::Refusing { reason }]
            } else {
                Vec::new()
            };
        }
        if !outcome.is_committed() {
            return Vec::new();
        }
        let quiet = self.quiet_ms;
        let cleared: Vec<StoreRefusalChange> = self
            .refusing
            .iter()
            .filter(|(_, (_, last))| now.since_ms(*last) >= quiet)
            .map(|(reason, (refused, _))| StoreRefusalChange::Cleared {
                reason,
                refused: *refused,
            })
            .collect();
        for c in &cleared {
            if let StoreRefusalChange::Cleared { reason, .. } = c {
                self.refusing.remove(reason);
            }
        }
        cleared
    }

    /// The reasons of the episodes going on (for a gauge and a readiness reason).
    pub fn refusing(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.refusing.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ho_l4_a_refusal_episode_is_logged_when_it_begins_and_when_it_clears() {
        use crate::handoff::ids::{CellId, Epoch};
        use crate::handoff::store::AbortReason;
        let full = TxnOutcome::RolledBack {
            reason: AbortReason::StoreFull,
        };
        let limited = TxnOutcome::RolledBack {
            reason: AbortReason::RateLimited,
        };
        let fenced = TxnOutcome::RolledBack {
            reason: AbortReason::Fenced,
        };
        let commit = TxnOutcome::Committed {
            target: CellId(2),
            new_epoch: Epoch(2),
        };
        let mut r = StoreRefusals::new(1_000);
        assert_eq!(
            r.handle_result(MonoMs(10), &full),
            [StoreRefusalChange::Refusing {
                reason: "store_full"
            }]
        );
        for t in 11..200 {
            assert!(
                r.handle_result(MonoMs(t), &full).is_empty(),
                "one line a state"
            );
        }
        assert_eq!(
            r.handle_result(MonoMs(300), &limited),
            [StoreRefusalChange::Refusing {
                reason: "rate_limited"
            }]
        );
        assert!(
            r.handle_result(MonoMs(301), &fenced).is_empty(),
            "not a refusal"
        );
        assert_eq!(
            r.refusing().collect::<Vec<_>>(),
            ["rate_limited", "store_full"]
        );
        // A commit inside the quiet time of the last refusal clears nothing.
        assert!(r.handle_result(MonoMs(1_000), &commit).is_empty());
        assert_eq!(
            r.handle_result(MonoMs(1_199), &commit),
            [StoreRefusalChange::Cleared {
                reason: "store_full",
                refused: 190
            }]
        );
        assert_eq!(
            r.handle_result(MonoMs(1_300), &commit),
            [StoreRefusalChange::Cleared {
                reason: "rate_limited",
                refused: 1
            }]
        );
        assert_eq!(r.refusing().count(), 0);
        assert!(r.handle_result(MonoMs(5_000), &commit).is_empty());
    }

    #[test]
    fn ho_l3_refusal_words_round_trip_and_unknown_words_are_other() {
        for r in RefusalReason::ALL {
            assert_eq!(RefusalReason::from_word(r.name()), r, "{r:?}");
        }
        for w in [
            "",
            "STALE_TIMESTAMP",
            "stale_timestamp ",
            "x\ny",
            "🙂",
            "other2",
        ] {
            assert_eq!(RefusalReason::from_word(w), RefusalReason::Other, "{w:?}");
        }
        assert_eq!(
            RefusalReason::of_answer(401, Some("unknown_key")),
            RefusalReason::UnknownKey
        );
        assert_eq!(
            RefusalReason::of_answer(401, Some("made_up")),
            RefusalReason::Other
        );
        assert_eq!(
            RefusalReason::of_answer(503, Some("replay_cache_full")),
            RefusalReason::ReplayCacheFull
        );
        assert_eq!(
            RefusalReason::of_answer(503, None),
            RefusalReason::Unavailable
        );
        assert_eq!(
            RefusalReason::of_answer(400, None),
            RefusalReason::MalformedRequest
        );
        assert_eq!(RefusalReason::of_answer(500, None), RefusalReason::Other);
    }

    const T: u64 = 1_700_000_000_000;

    fn sample(offset_ms: i64, rtt_ms: u64) -> ClockSample {
        let cell_ms = T.saturating_add_signed(offset_ms);
        ClockSample {
            sent_ms: T,
            received_ms: T + rtt_ms,
            date_s: cell_ms / 1_000,
        }
    }

    #[test]
    fn ho_l3_the_offset_interval_holds_the_true_offset() {
        for offset in [-60_000, -15_001, -1, 0, 1, 999, 14_000, 60_000] {
            for rtt in [0, 5, 800] {
                let o = ClockOffset::of(sample(offset, rtt)).expect("offset");
                assert!(
                    o.min_ms <= offset && offset <= o.max_ms,
                    "{offset} {rtt} {o:?}"
                );
                assert!(o.max_ms - o.min_ms <= 999 + i64::try_from(rtt).expect("rtt"));
            }
        }
        // Answered before sent (the local clock stepped back), or a date out of range.
        let mut s = sample(0, 0);
        s.received_ms = s.sent_ms - 1;
        assert_eq!(ClockOffset::of(s), None);
        s = sample(0, 0);
        s.date_s = u64::MAX;
        assert_eq!(ClockOffset::of(s), None);
    }

    #[test]
    fn ho_l3_ops_2_a_skewed_cell_clock_is_reported_once_before_refusals_then_once_back() {
        let mut c = CellClocks::new(INTERNAL_AUTH_WINDOW_MS);
        assert_eq!(c.warn_ms(), 15_000);
        let cell = CellId(7);
        assert_eq!(c.handle_answer(cell, sample(2_000, 10)), None);
        // 20 s behind the cell: inside the 30 s window (accepted), past half of it (reported).
        let change = c.handle_answer(cell, sample(20_000, 10));
        assert!(
            matches!(change, Some(ClockChange::Skewed { cell: CellId(7), warn_ms: 15_000, window_ms: 30_000, offset }) if offset.min_ms > 15_000),
            "{change:?}"
        );
        assert_eq!(c.handle_answer(cell, sample(20_000, 10)), None);
        assert_eq!(c.handle_answer(cell, sample(60_000, 10)), None);
        // Straddling the bound: no change either way.
        assert_eq!(c.handle_answer(cell, sample(15_000, 10)), None);
        assert!(c.offsets()[&cell].1);
        let back = c.handle_answer(cell, sample(-1_000, 10));
        assert!(
            matches!(
                back,
                Some(ClockChange::Agrees {
                    cell: CellId(7),
                    ..
                })
            ),
            "{back:?}"
        );
        assert_eq!(c.handle_answer(cell, sample(-1_000, 10)), None);
        // Behind (negative) counts the same; another cell is apart.
        assert!(matches!(
            c.handle_answer(CellId(8), sample(-16_500, 10)),
            Some(ClockChange::Skewed { .. })
        ));
        assert!(!c.offsets()[&cell].1);
    }

    #[test]
    fn ops_2_pass_failures_are_reported_once_per_change_and_recovery_once() {
        let mut h = PassHealth::default();
        assert_eq!(h.handle_pass(Ok(())), None);
        assert_eq!(
            h.handle_pass(Err(StoreFault::Unavailable)),
            Some(PassChange::Failing {
                cause: StoreFault::Unavailable,
                failed_before: 0
            })
        );
        assert_eq!(h.handle_pass(Err(StoreFault::Unavailable)), None);
        assert_eq!(h.handle_pass(Err(StoreFault::Unavailable)), None);
        assert_eq!(h.failed(), 3);
        assert_eq!(
            h.handle_pass(Err(StoreFault::TimedOut)),
            Some(PassChange::Failing {
                cause: StoreFault::TimedOut,
                failed_before: 3
            })
        );
        assert_eq!(
            h.handle_pass(Ok(())),
            Some(PassChange::Recovered { failed_passes: 4 })
        );
        assert_eq!(h.handle_pass(Ok(())), None);
        assert_eq!(h.failed(), 0);
    }
}
