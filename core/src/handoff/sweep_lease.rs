//! SCALE-6 / HO-S2: one active director per sweep, and how long a sweep takes.
//!
//! Directors that share a sweep name (`--id`) share its cursor; a lease row in the store says
//! which one runs passes. Every director asks [`decide`] before each pass: it claims a free or
//! lapsed lease (a new epoch), renews its own (the same epoch), or stands by while another
//! holds it. The store writes a claim only if the row is still the one the director read (a
//! compare-and-set on holder and epoch), so two claims of one lapsed lease cannot both win;
//! a cursor save names the holder and epoch and is refused once another director took over
//! (the old holder's pass then ends). [`SweepLease`] is the holder's view during a pass: it reads
//! a page only while the lease outlasts the page's store bound, and renews at half the lease.
//!
//! Takeover bound: a holder that stops (crash, partition from the store) stops renewing; its
//! lease lapses at most `lease_ms` after its last renewal, and a standby checks every pass
//! interval, so another director runs passes within `lease_ms + interval` (plus the clock
//! offset between the two directors: the lease's times are the writers' Unix milliseconds).
//!
//! Sweep period: a pass reads at most `page_size * max_pages` hosts, one pass every interval,
//! so a sweep of `hosts` takes at least `ceil(hosts / (page_size * max_pages)) * interval`
//! ([`sweep_period_ms`]). HO-3's freshness window agrees with it when the period is at most
//! the window: a measurement is then examined at least once while it is fresh.

use serde::{Deserialize, Serialize};

use super::director::ScanLimits;

/// The longest accepted sweep lease (one hour).
pub const MAX_SWEEP_LEASE_MS: u64 = 3_600_000;

/// A sweep's lease row as the store holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SweepLeaseRow {
    /// The holding process (a random id each director process draws at start).
    pub holder: u64,
    /// The lease ends at this Unix millisecond unless renewed.
    pub until_ms: u64,
    /// Grows by one at each change of holder: a cursor save names it.
    pub epoch: u64,
}

/// What a director does before a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LeaseDecision {
    /// Write `new` if the row is still `seen` (`None`: no row yet); `takeover`: another
    /// director held it and its lease lapsed.
    Claim {
        seen: Option<SweepLeaseRow>,
        new: SweepLeaseRow,
        takeover: bool,
    },
    /// Another director holds the sweep until `until_ms`: no pass now.
    Standby { holder: u64, until_ms: u64 },
}

/// Decide on the lease row `seen` (read just now) for the director `me` at `now_ms`.
#[must_use]
pub fn decide(me: u64, now_ms: u64, seen: Option<SweepLeaseRow>, lease_ms: u64) -> LeaseDecision {
    let until_ms = now_ms.saturating_add(lease_ms);
    match seen {
        None => LeaseDecision::Claim {
            seen,
            new: SweepLeaseRow {
                holder: me,
                until_ms,
                epoch: 1,
            },
            takeover: false,
        },
        Some(row) if row.holder == me => LeaseDecision::Claim {
            seen,
            new: SweepLeaseRow {
                holder: me,
                // A renewal never shortens the lease (a clock that stepped back).
                until_ms: until_ms.max(row.until_ms),
                epoch: row.epoch,
            },
            takeover: false,
        },
        Some(row) if row.until_ms <= now_ms => LeaseDecision::Claim {
            seen,
            new: SweepLeaseRow {
                holder: me,
                until_ms,
                epoch: row.epoch.saturating_add(1),
            },
            takeover: true,
        },
        Some(row) => LeaseDecision::Standby {
            holder: row.holder,
            until_ms: row.until_ms,
        },
    }
}

/// Why a lease configuration is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SweepLeaseError {
    /// The lease must outlast two page reads (each bounded by the store's transaction bound),
    /// so a pass can read a page and renew before it lapses; at most [`MAX_SWEEP_LEASE_MS`].
    LeaseTooShort {
        lease_ms: u64,
        needed_ms: u64,
    },
    LeaseTooLong {
        lease_ms: u64,
    },
}

impl std::fmt::Display for SweepLeaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SweepLeaseError::LeaseTooShort {
                lease_ms,
                needed_ms,
            } => write!(
                f,
                "a lease of {lease_ms} ms is shorter than two page reads ({needed_ms} ms needed)"
            ),
            SweepLeaseError::LeaseTooLong { lease_ms } => write!(
                f,
                "a lease of {lease_ms} ms is longer than {MAX_SWEEP_LEASE_MS} ms"
            ),
        }
    }
}

/// Check a lease of `lease_ms` against the store's bound on one page read (`page_bound_ms`).
pub fn validate(lease_ms: u64, page_bound_ms: u64) -> Result<(), SweepLeaseError> {
    let needed_ms = page_bound_ms.saturating_mul(2).saturating_add(1);
    if lease_ms < needed_ms {
        return Err(SweepLeaseError::LeaseTooShort {
            lease_ms,
            needed_ms,
        });
    }
    if lease_ms > MAX_SWEEP_LEASE_MS {
        return Err(SweepLeaseError::LeaseTooLong { lease_ms });
    }
    Ok(())
}

/// The holder's lease during a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SweepLease {
    row: SweepLeaseRow,
    lease_ms: u64,
    page_bound_ms: u64,
}

/// What the pass does at a page boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PageGate {
    /// Read the next page.
    Read,
    /// Renew first (less than half the lease is left), then ask again.
    Renew,
    /// The lease could end during the next read: read no more pages.
    Stop,
}

impl SweepLease {
    /// The lease as claimed (the store took `row`).
    #[must_use]
    pub fn held(row: SweepLeaseRow, lease_ms: u64, page_bound_ms: u64) -> SweepLease {
        SweepLease {
            row,
            lease_ms,
            page_bound_ms,
        }
    }

    #[must_use]
    pub fn row(&self) -> SweepLeaseRow {
        self.row
    }

    /// Whether the pass may read a page at `now_ms`: only if the lease outlasts the read's
    /// bound (a page started is finished by the holder); renewed once half of it is gone.
    #[must_use]
    pub fn gate(&self, now_ms: u64) -> PageGate {
        let left = self.row.until_ms.saturating_sub(now_ms);
        if left * 2 < self.lease_ms {
            if left > self.page_bound_ms {
                return PageGate::Renew;
            }
            return PageGate::Stop;
        }
        PageGate::Read
    }

    /// The renewal to write at `now_ms` (the same holder and epoch).
    #[must_use]
    pub fn renewal(&self, now_ms: u64) -> SweepLeaseRow {
        SweepLeaseRow {
            until_ms: now_ms.saturating_add(self.lease_ms).max(self.row.until_ms),
            ..self.row
        }
    }

    /// The store took the renewal.
    pub fn handle_renewed(&mut self, row: SweepLeaseRow) {
        debug_assert_eq!((row.holder, row.epoch), (self.row.holder, self.row.epoch));
        self.row = row;
    }
}

/// The shortest time one director takes to examine `hosts` hosts: a pass reads at most
/// `page_size * max_pages` of them and one pass starts every `interval_ms` (a pass cut short
/// by its dispatch budget makes the sweep longer; one that takes longer than the interval
/// does too).
#[must_use]
pub fn sweep_period_ms(hosts: u64, limits: &ScanLimits, interval_ms: u64) -> u64 {
    let per_pass = u64::from(limits.page_size) * u64::from(limits.max_pages);
    if per_pass == 0 {
        return u64::MAX;
    }
    hosts.div_ceil(per_pass).max(1).saturating_mul(interval_ms)
}

/// HO-3 / SCALE-6: whether a sweep of `hosts` at these limits examines every measurement while
/// it is fresh (the period is at most the freshness window). `Err`: the period.
pub fn check_sweep_period(
    hosts: u64,
    limits: &ScanLimits,
    interval_ms: u64,
    freshness_window_ms: u64,
) -> Result<u64, u64> {
    let period = sweep_period_ms(hosts, limits, interval_ms);
    if period <= freshness_window_ms {
        Ok(period)
    } else {
        Err(period)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: u64 = 30_000;

    fn row(holder: u64, until_ms: u64, epoch: u64) -> SweepLeaseRow {
        SweepLeaseRow {
            holder,
            until_ms,
            epoch,
        }
    }

    #[test]
    fn scale_6_a_free_lease_is_claimed_at_epoch_one() {
        assert_eq!(
            decide(7, 1_000, None, LEASE),
            LeaseDecision::Claim {
                seen: None,
                new: row(7, 31_000, 1),
                takeover: false
            }
        );
    }

    #[test]
    fn scale_6_a_held_lease_makes_the_other_director_stand_by() {
        let seen = Some(row(1, 31_000, 4));
        assert_eq!(
            decide(2, 30_999, seen, LEASE),
            LeaseDecision::Standby {
                holder: 1,
                until_ms: 31_000
            }
        );
        // The holder renews in the same epoch.
        assert_eq!(
            decide(1, 20_000, seen, LEASE),
            LeaseDecision::Claim {
                seen,
                new: row(1, 50_000, 4),
                takeover: false
            }
        );
    }

    #[test]
    fn scale_6_a_lapsed_lease_is_taken_over_in_a_new_epoch() {
        let seen = Some(row(1, 31_000, 4));
        assert_eq!(
            decide(2, 31_000, seen, LEASE),
            LeaseDecision::Claim {
                seen,
                new: row(2, 61_000, 5),
                takeover: true
            }
        );
    }

    #[test]
    fn scale_6_a_renewal_never_shortens_the_lease() {
        let seen = Some(row(1, 90_000, 4));
        let LeaseDecision::Claim { new, .. } = decide(1, 10_000, seen, LEASE) else {
            panic!("the holder renews");
        };
        assert_eq!(new.until_ms, 90_000);
    }

    #[test]
    fn scale_6_pages_are_read_only_while_the_lease_outlasts_them() {
        let mut lease = SweepLease::held(row(1, 31_000, 1), LEASE, 3_000);
        assert_eq!(lease.gate(1_000), PageGate::Read);
        assert_eq!(lease.gate(16_000), PageGate::Read);
        assert_eq!(lease.gate(16_001), PageGate::Renew);
        assert_eq!(lease.gate(27_999), PageGate::Renew);
        assert_eq!(lease.gate(28_000), PageGate::Stop);
        assert_eq!(lease.gate(40_000), PageGate::Stop);
        let renewed = lease.renewal(20_000);
        assert_eq!(renewed, row(1, 50_000, 1));
        lease.handle_renewed(renewed);
        assert_eq!(lease.gate(20_000), PageGate::Read);
    }

    #[test]
    fn scale_6_lease_validated_against_the_page_bound() {
        assert_eq!(
            validate(6_000, 3_000),
            Err(SweepLeaseError::LeaseTooShort {
                lease_ms: 6_000,
                needed_ms: 6_001
            })
        );
        assert_eq!(validate(30_000, 3_000), Ok(()));
        assert_eq!(
            validate(MAX_SWEEP_LEASE_MS + 1, 3_000),
            Err(SweepLeaseError::LeaseTooLong {
                lease_ms: MAX_SWEEP_LEASE_MS + 1
            })
        );
    }

    #[test]
    fn scale_6_sweep_period_against_the_freshness_window() {
        let defaults = ScanLimits {
            page_size: 1_000,
            max_pages: 20,
            max_dispatch: 2_000,
        };
        // 1,000,000 hosts: 50 passes of 20,000, one every 10 s: 500 s, within 600 s.
        assert_eq!(sweep_period_ms(1_000_000, &defaults, 10_000), 500_000);
        assert_eq!(
            check_sweep_period(1_000_000, &defaults, 10_000, 600_000),
            Ok(500_000)
        );
        // The old defaults (100 x 10 per pass): 10,000 passes, about 28 h.
        let old = ScanLimits {
            page_size: 100,
            max_pages: 10,
            max_dispatch: 50,
        };
        assert_eq!(
            check_sweep_period(1_000_000, &old, 10_000, 600_000),
            Err(10_000_000)
        );
        assert_eq!(sweep_period_ms(0, &defaults, 10_000), 10_000);
        assert_eq!(sweep_period_ms(20_001, &defaults, 10_000), 20_000);
    }
}
