//! SEC-2 / SEC-2a: the decisions about a signed internal request once its headers are parsed
//! and before (claim) and after (nonce) its MAC is checked. The MAC itself is computed by the
//! adapter (`adapters/src/handoff/auth.rs`); whether a request is for this cell process, inside
//! the window, and not a replay is decided here, with the time as an argument.
//!
//! - [`check_claim`]: the cell id and the incarnation the request was signed for must be this
//!   process's own (SEC-2: another cell's request is `wrong_cell`; SEC-2a: a request signed for
//!   a previous process of this cell, replayed after a restart, is `wrong_incarnation`), and the
//!   timestamp must be within the window around the cell's clock.
//! - [`ReplayCache`]: the nonces of verified requests whose timestamps are still inside the
//!   window; a nonce seen again is `replayed`, and a full cache refuses rather than forgets.
//!
//! Why the incarnation closes SEC-2a: the replay cache is per process and lives in memory, so
//! a restarted cell has forgotten the nonces of the last window. The store gives every start of
//! a cell a new, larger incarnation (HO-L2), and the cell knows its own; a request signed for
//! the old incarnation can never match the new one, whatever the new process remembers.

use std::collections::{BTreeMap, BTreeSet};

use super::ids::{CellId, Incarnation};

/// What a request claims about itself (from its signed headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub cell: CellId,
    pub incarnation: Incarnation,
    pub timestamp_ms: u64,
}

/// The process checking it: its cell id and its lease incarnation (HO-L2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub cell: CellId,
    pub incarnation: Incarnation,
}

/// Why a claim was refused (the adapter answers, logs and counts the stable name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimRefusal {
    /// Signed for another cell.
    WrongCell,
    /// Signed for another process of this cell (an older one, replayed after a restart; or a
    /// newer one than this process, which has then lost its lease).
    WrongIncarnation,
    /// The timestamp is outside the window around the cell's clock.
    Stale,
}

impl ClaimRefusal {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ClaimRefusal::WrongCell => "wrong_cell",
            ClaimRefusal::WrongIncarnation => "wrong_incarnation",
            ClaimRefusal::Stale => "stale_timestamp",
        }
    }
}

/// SEC-2 / SEC-2a: whether a request claiming `claim` is for `own` and timely at `now_ms`.
/// `Ok` gives the instant past which its timestamp is stale (its nonce can then be forgotten).
/// Cell first (another cell's request), then incarnation (another process's), then the window.
pub fn check_claim(
    claim: Claim,
    own: Identity,
    now_ms: u64,
    window_ms: u64,
) -> Result<u64, ClaimRefusal> {
    if claim.cell != own.cell {
        return Err(ClaimRefusal::WrongCell);
    }
    if claim.incarnation != own.incarnation {
        return Err(ClaimRefusal::WrongIncarnation);
    }
    if claim.timestamp_ms.abs_diff(now_ms) > window_ms {
        return Err(ClaimRefusal::Stale);
    }
    Ok(claim.timestamp_ms.saturating_add(window_ms))
}

/// Why a verified request's nonce was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonceRefusal {
    /// The nonce was seen inside the window.
    Replayed,
    /// The cache holds its bound of live nonces: refused rather than forget one.
    Full,
}

/// SEC-2: the nonces of verified requests whose timestamps are still inside the window.
///
/// Bounded: entries are dropped once their timestamp is stale (no request carrying them can be
/// accepted any more), and at most `cap` live entries are kept. When `cap` live nonces are held
/// a new request is refused rather than an entry forgotten early: forgetting would let that
/// request be replayed. Only requests whose signature verified are recorded (the adapter's
/// order), so only a holder of a valid key can fill it.
#[derive(Debug)]
pub struct ReplayCache {
    cap: usize,
    expiry: BTreeMap<u128, u64>,
    by_expiry: BTreeSet<(u64, u128)>,
}

impl ReplayCache {
    #[must_use]
    pub fn new(cap: usize) -> ReplayCache {
        ReplayCache {
            cap,
            expiry: BTreeMap::new(),
            by_expiry: BTreeSet::new(),
        }
    }

    /// Record `nonce` (live until `expires_ms`) at `now_ms`; a nonce still live is a replay.
    pub fn admit(&mut self, nonce: u128, expires_ms: u64, now_ms: u64) -> Result<(), NonceRefusal> {
        self.prune(now_ms);
        if self.expiry.contains_key(&nonce) {
            return Err(NonceRefusal::Replayed);
        }
        if self.expiry.len() >= self.cap {
            return Err(NonceRefusal::Full);
        }
        self.expiry.insert(nonce, expires_ms);
        self.by_expiry.insert((expires_ms, nonce));
        Ok(())
    }

    /// Forget nonces whose timestamps are stale at `now_ms` (accepted up to `expires_ms`).
    fn prune(&mut self, now_ms: u64) {
        while let Some(&(expires, nonce)) = self.by_expiry.first() {
            if expires >= now_ms {
                break;
            }
            self.by_expiry.pop_first();
            self.expiry.remove(&nonce);
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.expiry.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.expiry.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;
    const WINDOW: u64 = 30_000;
    const ME: Identity = Identity {
        cell: CellId(1),
        incarnation: Incarnation(4),
    };

    fn claim(cell: u32, incarnation: u64, timestamp_ms: u64) -> Claim {
        Claim {
            cell: CellId(cell),
            incarnation: Incarnation(incarnation),
            timestamp_ms,
        }
    }

    #[test]
    fn sec_2a_a_request_for_another_process_of_this_cell_is_wrong_incarnation() {
        assert_eq!(
            check_claim(claim(1, 4, NOW), ME, NOW, WINDOW),
            Ok(NOW + WINDOW)
        );
        // The previous process (before a restart) and a later one: both refused.
        for other in [3, 5, 0, u64::MAX] {
            assert_eq!(
                check_claim(claim(1, other, NOW), ME, NOW, WINDOW),
                Err(ClaimRefusal::WrongIncarnation),
                "{other}"
            );
        }
        // Another cell is refused as such, whatever its incarnation.
        assert_eq!(
            check_claim(claim(2, 4, NOW), ME, NOW, WINDOW),
            Err(ClaimRefusal::WrongCell)
        );
        assert_eq!(ClaimRefusal::WrongIncarnation.name(), "wrong_incarnation");
    }

    #[test]
    fn sec_2_the_window_is_inclusive_and_bounds_the_nonce_life() {
        for ts in [NOW - WINDOW - 1, NOW + WINDOW + 1] {
            assert_eq!(
                check_claim(claim(1, 4, ts), ME, NOW, WINDOW),
                Err(ClaimRefusal::Stale)
            );
        }
        for ts in [NOW - WINDOW, NOW + WINDOW] {
            assert_eq!(
                check_claim(claim(1, 4, ts), ME, NOW, WINDOW),
                Ok(ts + WINDOW)
            );
        }
    }

    #[test]
    fn sec_2_a_nonce_is_refused_while_its_timestamp_is_live_then_forgotten() {
        let mut c = ReplayCache::new(8);
        assert_eq!(c.admit(1, NOW + WINDOW, NOW), Ok(()));
        assert_eq!(
            c.admit(1, NOW + WINDOW, NOW + WINDOW),
            Err(NonceRefusal::Replayed)
        );
        // Once the timestamp is stale the entry goes (the window check refuses it by then).
        assert_eq!(c.admit(2, NOW + 3 * WINDOW, NOW + WINDOW + 1), Ok(()));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn sec_2_a_full_replay_cache_refuses_rather_than_forgets() {
        let mut c = ReplayCache::new(2);
        assert_eq!(c.admit(1, NOW + WINDOW, NOW), Ok(()));
        assert_eq!(c.admit(2, NOW + WINDOW, NOW), Ok(()));
        assert_eq!(c.admit(3, NOW + WINDOW, NOW), Err(NonceRefusal::Full));
        // Both live nonces are still refused as replays.
        assert_eq!(c.admit(1, NOW + WINDOW, NOW), Err(NonceRefusal::Replayed));
        assert_eq!(c.len(), 2);
        // Room again once they expire.
        assert_eq!(c.admit(3, NOW + 3 * WINDOW, NOW + WINDOW + 1), Ok(()));
    }
}
