//! FO-S1 (directory freshness): whether a verified directory may replace the current list.
//!
//! Pure: the caller reads the wall clock and passes `now_unix_s`; the caller also keeps the last
//! accepted directory (in memory) and records it only when this returns `Ok`.

use serde::{Deserialize, Serialize};

use super::types::RelayUrl;

/// What FO-S1 remembers of the last accepted directory: its sequence, its relay list and its
/// expiry. Lists are ordered by sequence only; the expiry is kept for what the operator is
/// told, never to order two lists.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AcceptedDirectory {
    pub sequence: u64,
    pub relays: Vec<RelayUrl>,
    pub expires_at_unix_s: u64,
}

/// Why a correctly signed directory is refused as not fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FreshnessError {
    /// A list older than one already accepted: a replay (e.g. of a list naming a retired or
    /// compromised relay).
    #[error("sequence {sequence} is lower than the last accepted {last_accepted} (a replayed older list)")]
    Replayed { sequence: u64, last_accepted: u64 },
    /// The sequence of the last accepted list, signed over a different list: two lists that
    /// share a sequence could otherwise replace each other back and forth.
    #[error("sequence {sequence} was already accepted with a different relay list (sign the new list with a higher sequence)")]
    SequenceReused { sequence: u64 },
    /// The signer's validity window is over.
    #[error("expired at {expires_at_unix_s} (now {now_unix_s}, Unix seconds)")]
    Expired {
        expires_at_unix_s: u64,
        now_unix_s: u64,
    },
}

/// FO-S1: accepts a directory whose `sequence` is above the last accepted one, or equal to it
/// with the same relay list (the same list re-read at a refresh), and that has not expired.
/// An equal sequence with a different list is refused (`SequenceReused`).
///
/// `expires_at_unix_s` is the first second at which the list is no longer valid: it is fresh
/// while `now_unix_s < expires_at_unix_s`, so expiry exactly at `now` counts as **expired**.
///
/// A replay is reported before expiry: a lower sequence is refused whatever its expiry says.
pub fn check_freshness(
    last_accepted: Option<&AcceptedDirectory>,
    sequence: u64,
    relays: &[RelayUrl],
    expires_at_unix_s: u64,
    now_unix_s: u64,
) -> Result<(), FreshnessError> {
    if let Some(last) = last_accepted {
        if sequence < last.sequence {
            return Err(FreshnessError::Replayed {
                sequence,
                last_accepted: last.sequence,
            });
        }
        if sequence == last.sequence && relays != last.relays.as_slice() {
            return Err(FreshnessError::SequenceReused { sequence });
        }
    }
    if now_unix_s >= expires_at_unix_s {
        return Err(FreshnessError::Expired {
            expires_at_unix_s,
            now_unix_s,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn list() -> Vec<RelayUrl> {
        vec![RelayUrl::new("wss://a.example/relay")]
    }

    fn acc(sequence: u64) -> AcceptedDirectory {
        AcceptedDirectory {
            sequence,
            relays: list(),
            expires_at_unix_s: NOW + 60,
        }
    }

    #[test]
    fn fo_s1_first_directory_is_accepted_while_unexpired() {
        assert_eq!(check_freshness(None, 0, &list(), NOW + 1, NOW), Ok(()));
        assert_eq!(
            check_freshness(None, u64::MAX, &list(), u64::MAX, NOW),
            Ok(())
        );
    }

    #[test]
    fn fo_s1_higher_and_equal_sequences_are_accepted() {
        assert_eq!(
            check_freshness(Some(&acc(10)), 11, &list(), NOW + 60, NOW),
            Ok(())
        );
        // equal: the same list re-read at a refresh
        assert_eq!(
            check_freshness(Some(&acc(10)), 10, &list(), NOW + 60, NOW),
            Ok(())
        );
    }

    #[test]
    fn fo_s1_lower_sequence_is_replayed() {
        assert_eq!(
            check_freshness(Some(&acc(10)), 9, &list(), NOW + 60, NOW),
            Err(FreshnessError::Replayed {
                sequence: 9,
                last_accepted: 10
            })
        );
        assert_eq!(
            check_freshness(Some(&acc(u64::MAX)), 0, &list(), NOW + 60, NOW),
            Err(FreshnessError::Replayed {
                sequence: 0,
                last_accepted: u64::MAX
            })
        );
    }

    #[test]
    fn fo_s1_expiry_boundary_exactly_now_is_expired() {
        assert_eq!(check_freshness(None, 1, &list(), NOW + 1, NOW), Ok(()));
        assert_eq!(
            check_freshness(None, 1, &list(), NOW, NOW),
            Err(FreshnessError::Expired {
                expires_at_unix_s: NOW,
                now_unix_s: NOW
            })
        );
        assert!(matches!(
            check_freshness(Some(&acc(1)), 1, &list(), NOW - 1, NOW),
            Err(FreshnessError::Expired { .. })
        ));
        assert!(matches!(
            check_freshness(None, 1, &list(), 0, 0),
            Err(FreshnessError::Expired { .. })
        ));
    }

    #[test]
    fn fo_s1_a_replay_is_named_before_expiry() {
        assert_eq!(
            check_freshness(Some(&acc(5)), 4, &list(), NOW - 1, NOW),
            Err(FreshnessError::Replayed {
                sequence: 4,
                last_accepted: 5
            })
        );
    }

    #[test]
    fn fo_s1_errors_name_the_values() {
        let replayed = check_freshness(Some(&acc(10)), 9, &list(), NOW + 1, NOW).unwrap_err();
        assert!(replayed
            .to_string()
            .contains("sequence 9 is lower than the last accepted 10"));
        let expired = check_freshness(None, 1, &list(), NOW - 5, NOW).unwrap_err();
        assert!(expired
            .to_string()
            .contains(&format!("expired at {}", NOW - 5)));
    }

    /// Issue 26, bug 3: lists A and B signed with the same sequence replaced each other (A,
    /// then B, then A again). An equal sequence is accepted only for the same list.
    #[test]
    fn fo_s1_regression_an_equal_sequence_with_a_different_list_is_refused() {
        let a = list();
        let b = vec![RelayUrl::new("wss://b.example/relay")];
        let accepted_a = AcceptedDirectory {
            sequence: 7,
            relays: a.clone(),
            expires_at_unix_s: NOW + 60,
        };
        assert_eq!(
            check_freshness(Some(&accepted_a), 7, &b, NOW + 60, NOW),
            Err(FreshnessError::SequenceReused { sequence: 7 })
        );
        // The same list re-read at a refresh is still accepted.
        assert_eq!(
            check_freshness(Some(&accepted_a), 7, &a, NOW + 60, NOW),
            Ok(())
        );
        // Had B been accepted, A with the same sequence is refused too.
        let accepted_b = AcceptedDirectory {
            sequence: 7,
            relays: b,
            expires_at_unix_s: NOW + 60,
        };
        assert_eq!(
            check_freshness(Some(&accepted_b), 7, &a, NOW + 60, NOW),
            Err(FreshnessError::SequenceReused { sequence: 7 })
        );
        // Order matters too: the same URLs in another order are another list.
        let reordered = vec![a[0].clone(), RelayUrl::new("wss://c.example/relay")];
        let accepted = AcceptedDirectory {
            sequence: 8,
            relays: reordered.clone(),
            expires_at_unix_s: NOW + 60,
        };
        let swapped: Vec<RelayUrl> = reordered.iter().rev().cloned().collect();
        assert!(check_freshness(Some(&accepted), 8, &swapped, NOW + 60, NOW).is_err());
        let text = check_freshness(Some(&accepted), 8, &swapped, NOW + 60, NOW)
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("sequence 8 was already accepted with a different relay list"),
            "{text}"
        );
    }

    /// A reused sequence is named before expiry, a replay before both.
    #[test]
    fn fo_s1_a_reused_sequence_is_named_before_expiry() {
        let b = vec![RelayUrl::new("wss://b.example/relay")];
        assert_eq!(
            check_freshness(Some(&acc(3)), 3, &b, NOW - 1, NOW),
            Err(FreshnessError::SequenceReused { sequence: 3 })
        );
        assert!(matches!(
            check_freshness(Some(&acc(3)), 2, &b, NOW - 1, NOW),
            Err(FreshnessError::Replayed { .. })
        ));
    }
}
