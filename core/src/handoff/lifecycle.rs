//! HO-L2 / OPS-1 / OPS-2: what a process does about the store around its life: a cell's
//! identity-lease renewal (keep serving, say the store is failing, or stop because another
//! process holds the cell), and a director's retries of a store it cannot reach at start
//! (the delays, and when to give up). The adapters sleep and stop as told.

use serde::{Deserialize, Serialize};

use super::ids::Incarnation;
use super::store::LeaseLost;

/// What a lease renewal's store call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Renewal {
    Renewed,
    /// HO-L2: a newer incarnation holds the cell (or its row is gone).
    Lost(LeaseLost),
    /// The store could not be reached, or its answer is unknown.
    Unreachable,
}

/// What the cell does after a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LeaseStep {
    /// Keep serving; `recovered`: the renewals before this one failed (OPS-2: say once that
    /// the store answers again).
    Keep { recovered: bool },
    /// Keep serving, not ready, and renew again at the next period; `first`: the first
    /// failure of a run (OPS-2: log it once, not per retry). Every operation the cell makes
    /// re-checks its incarnation in the store, so serving on is safe.
    Failing { first: bool },
    /// HO-L2: another process holds the cell: stop gracefully (as on SIGTERM) and exit with
    /// the lease-lost status, so a supervisor notices. Final: every later renewal is ignored.
    Stop(LeaseLost),
}

/// HO-L2: the cell's lease keeper: one per process, fed every renewal's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct LeaseKeeper {
    failing: bool,
    lost: Option<LeaseLost>,
}

impl LeaseKeeper {
    #[must_use]
    pub fn new() -> LeaseKeeper {
        LeaseKeeper::default()
    }

    /// How often to renew a lease of `lease_ms`: every third of it (two renewals may fail
    /// before it runs out).
    #[must_use]
    pub fn period_ms(lease_ms: u64) -> u64 {
        (lease_ms / 3).max(1)
    }

    pub fn handle_renewal(&mut self, renewal: Renewal) -> LeaseStep {
        if let Some(lost) = self.lost {
            return LeaseStep::Stop(lost);
        }
        match renewal {
            Renewal::Renewed => {
                let recovered = self.failing;
                self.failing = false;
                LeaseStep::Keep { recovered }
            }
            Renewal::Unreachable => {
                let first = !self.failing;
                self.failing = true;
                LeaseStep::Failing { first }
            }
            Renewal::Lost(lost) => {
                self.lost = Some(lost);
                LeaseStep::Stop(lost)
            }
        }
    }

    /// OPS-2: the last renewal failed on the store (the cell is not ready).
    #[must_use]
    pub fn failing(&self) -> bool {
        self.failing
    }

    /// HO-L2: the cell was lost, and to which incarnation (`Some(None)`: its row is gone).
    #[must_use]
    pub fn lost(&self) -> Option<Option<Incarnation>> {
        self.lost.map(|l| l.holder)
    }
}

/// OPS-1: how a process retries a store it cannot reach at start: the first delay, doubled
/// after each failure up to `max_delay_ms`, and how many attempts at most (`None`: until the
/// store answers or the process is stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StartRetry {
    pub first_delay_ms: u64,
    pub max_delay_ms: u64,
    pub max_attempts: Option<u32>,
}

/// A director's default: a quarter of a second, doubling to 5 s, never giving up (a director
/// that waits moves the hosts fenced in the outage within seconds of the store's return).
pub const DIRECTOR_START_RETRY: StartRetry = StartRetry {
    first_delay_ms: 250,
    max_delay_ms: 5_000,
    max_attempts: None,
};

/// Why a start attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StartFailure {
    /// The store did not answer (refused connections, a timeout, a lost connection).
    Unreachable,
    /// The store answered and refused (a URL it cannot use, a schema it will not take):
    /// retrying cannot help.
    Refused,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RetryStep {
    /// Try again after `delay_ms`; `attempt` attempts have failed so far.
    RetryIn { attempt: u32, delay_ms: u64 },
    /// Stop trying (exit 1): refused, or `max_attempts` failed.
    GiveUp { attempts: u32 },
}

/// The attempts of one start, fed every failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StartAttempts {
    schedule: StartRetry,
    failed: u32,
}

impl StartAttempts {
    #[must_use]
    pub fn new(schedule: StartRetry) -> StartAttempts {
        StartAttempts {
            schedule,
            failed: 0,
        }
    }

    /// Attempts that failed so far.
    #[must_use]
    pub fn failed(&self) -> u32 {
        self.failed
    }

    pub fn handle_failure(&mut self, failure: StartFailure) -> RetryStep {
        self.failed = self.failed.saturating_add(1);
        let attempts = self.failed;
        let spent = self.schedule.max_attempts.is_some_and(|n| attempts >= n);
        if failure == StartFailure::Refused || spent {
            return RetryStep::GiveUp { attempts };
        }
        let doublings = (attempts - 1).min(63);
        let delay_ms = self
            .schedule
            .first_delay_ms
            .saturating_mul(1u64 << doublings)
            .min(self.schedule.max_delay_ms);
        RetryStep::RetryIn {
            attempt: attempts,
            delay_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ho_l2_a_lost_lease_stops_the_cell_and_stays_lost() {
        let mut k = LeaseKeeper::new();
        assert_eq!(
            k.handle_renewal(Renewal::Renewed),
            LeaseStep::Keep { recovered: false }
        );
        assert_eq!(
            k.handle_renewal(Renewal::Unreachable),
            LeaseStep::Failing { first: true }
        );
        assert_eq!(
            k.handle_renewal(Renewal::Unreachable),
            LeaseStep::Failing { first: false }
        );
        assert!(k.failing());
        assert_eq!(
            k.handle_renewal(Renewal::Renewed),
            LeaseStep::Keep { recovered: true }
        );
        let lost = LeaseLost {
            holder: Some(Incarnation(4)),
        };
        assert_eq!(k.handle_renewal(Renewal::Lost(lost)), LeaseStep::Stop(lost));
        assert_eq!(k.handle_renewal(Renewal::Renewed), LeaseStep::Stop(lost));
        assert_eq!(k.lost(), Some(Some(Incarnation(4))));
        assert_eq!(LeaseKeeper::period_ms(900), 300);
        assert_eq!(LeaseKeeper::period_ms(1), 1);
    }

    #[test]
    fn ops_1_start_retries_double_to_the_cap_and_give_up_only_when_told() {
        let mut a = StartAttempts::new(DIRECTOR_START_RETRY);
        let delays: Vec<u64> = (0..7)
            .map(|_| match a.handle_failure(StartFailure::Unreachable) {
                RetryStep::RetryIn { delay_ms, .. } => delay_ms,
                RetryStep::GiveUp { .. } => 0,
            })
            .collect();
        assert_eq!(delays, vec![250, 500, 1_000, 2_000, 4_000, 5_000, 5_000]);
        for _ in 0..100 {
            assert!(matches!(
                a.handle_failure(StartFailure::Unreachable),
                RetryStep::RetryIn {
                    delay_ms: 5_000,
                    ..
                }
            ));
        }
        let mut bounded = StartAttempts::new(StartRetry {
            max_attempts: Some(2),
            ..DIRECTOR_START_RETRY
        });
        assert_eq!(
            bounded.handle_failure(StartFailure::Unreachable),
            RetryStep::RetryIn {
                attempt: 1,
                delay_ms: 250
            }
        );
        assert_eq!(
            bounded.handle_failure(StartFailure::Unreachable),
            RetryStep::GiveUp { attempts: 2 }
        );
        let mut refused = StartAttempts::new(DIRECTOR_START_RETRY);
        assert_eq!(
            refused.handle_failure(StartFailure::Refused),
            RetryStep::GiveUp { attempts: 1 }
        );
    }
}
