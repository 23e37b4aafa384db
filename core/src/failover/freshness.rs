//! FO-S1 (directory freshness): whether a verified directory may replace the current list.
//!
//! Pure: the caller reads the wall clock and passes `now_unix_s`; the caller also keeps the last
//! accepted sequence (in memory) and records `sequence` only when this returns `Ok`.

/// Why a correctly signed directory is refused as not fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FreshnessError {
    /// A list older than one already accepted: a replay (e.g. of a list naming a retired or
    /// compromised relay).
    #[error("sequence {sequence} is lower than the last accepted {last_accepted} (a replayed older list)")]
    Replayed { sequence: u64, last_accepted: u64 },
    /// The signer's validity window is over.
    #[error("expired at {expires_at_unix_s} (now {now_unix_s}, Unix seconds)")]
    Expired {
        expires_at_unix_s: u64,
        now_unix_s: u64,
    },
}

/// FO-S1: accepts a directory whose `sequence` is at least the last accepted one (equal is the
/// same list re-read at a refresh, so it is accepted) and that has not expired.
///
/// `expires_at_unix_s` is the first second at which the list is no longer valid: it is fresh
/// while `now_unix_s < expires_at_unix_s`, so expiry exactly at `now` counts as **expired**.
///
/// A replay is reported before expiry: a lower sequence is refused whatever its expiry says.
pub fn check_freshness(
    last_accepted_sequence: Option<u64>,
    sequence: u64,
    expires_at_unix_s: u64,
    now_unix_s: u64,
) -> Result<(), FreshnessError> {
    if let Some(last_accepted) = last_accepted_sequence {
        if sequence < last_accepted {
            return Err(FreshnessError::Replayed {
                sequence,
                last_accepted,
            });
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

    #[test]
    fn fo_s1_first_directory_is_accepted_while_unexpired() {
        assert_eq!(check_freshness(None, 0, NOW + 1, NOW), Ok(()));
        assert_eq!(check_freshness(None, u64::MAX, u64::MAX, NOW), Ok(()));
    }

    #[test]
    fn fo_s1_higher_and_equal_sequences_are_accepted() {
        assert_eq!(check_freshness(Some(10), 11, NOW + 60, NOW), Ok(()));
        // equal: the same list re-read at a refresh
        assert_eq!(check_freshness(Some(10), 10, NOW + 60, NOW), Ok(()));
    }

    #[test]
    fn fo_s1_lower_sequence_is_replayed() {
        assert_eq!(
            check_freshness(Some(10), 9, NOW + 60, NOW),
            Err(FreshnessError::Replayed {
                sequence: 9,
                last_accepted: 10
            })
        );
        assert_eq!(
            check_freshness(Some(u64::MAX), 0, NOW + 60, NOW),
            Err(FreshnessError::Replayed {
                sequence: 0,
                last_accepted: u64::MAX
            })
        );
    }

    #[test]
    fn fo_s1_expiry_boundary_exactly_now_is_expired() {
        assert_eq!(check_freshness(None, 1, NOW + 1, NOW), Ok(()));
        assert_eq!(
            check_freshness(None, 1, NOW, NOW),
            Err(FreshnessError::Expired {
                expires_at_unix_s: NOW,
                now_unix_s: NOW
            })
        );
        assert!(matches!(
            check_freshness(Some(1), 1, NOW - 1, NOW),
            Err(FreshnessError::Expired { .. })
        ));
        assert!(matches!(
            check_freshness(None, 1, 0, 0),
            Err(FreshnessError::Expired { .. })
        ));
    }

    #[test]
    fn fo_s1_a_replay_is_named_before_expiry() {
        assert_eq!(
            check_freshness(Some(5), 4, NOW - 1, NOW),
            Err(FreshnessError::Replayed {
                sequence: 4,
                last_accepted: 5
            })
        );
    }

    #[test]
    fn fo_s1_errors_name_the_values() {
        let replayed = check_freshness(Some(10), 9, NOW + 1, NOW).unwrap_err();
        assert!(replayed
            .to_string()
            .contains("sequence 9 is lower than the last accepted 10"));
        let expired = check_freshness(None, 1, NOW - 5, NOW).unwrap_err();
        assert!(expired
            .to_string()
            .contains(&format!("expired at {}", NOW - 5)));
    }
}
