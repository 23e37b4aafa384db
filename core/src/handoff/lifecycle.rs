//! HO-L2 / OPS-1 / OPS-2: what a process does about the store around its life: a cell's
//! identity-lease renewal (keep serving, say the store is failing, or stop because another
//! process holds the cell), and a director's retries of a store it cannot reach at start
//! (the delays, and when to give up). The adapters sleep and stop as told.

use serde::{Deserialize, Serialize};

use super::ids::Incarnation;
use super::store::LeaseLost;
use crate::MonoMs;

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
    /// HO-L5: no renewal has been confirmed for so long that the lease may lapse before the
    /// next one (within the clock drift allowed): stop serving now, closing every socket with
    /// a retry code, so that no successor that takes the lease finds desktops still here.
    /// `unconfirmed_ms`: since the send of the last confirmed renewal. Final, as `Stop`.
    Lapsing { unconfirmed_ms: u64 },
}

/// HO-L5: the lease's length and the clock drift between two cells' hosts that the cell
/// allows for. A successor judges the lease lapsed by its own clock against the end this cell
/// wrote by its clock, so this cell stops serving `drift_ms` before that end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseTiming {
    pub lease_ms: u64,
    pub drift_ms: u64,
}

/// HO-L5: the default clock drift a cell allows for between its host and a successor's (NTP
/// keeps hosts within tens of milliseconds; a second leaves room for a step).
pub const DEFAULT_LEASE_DRIFT_MS: u64 = 1_000;

impl LeaseTiming {
    /// HO-L5: the drift must leave room for two renewals before the cell stops serving (a
    /// renewal every third of the lease): `drift_ms < lease_ms / 3`.
    pub fn validate(&self) -> Result<(), String> {
        if self.drift_ms >= self.lease_ms / 3 {
            return Err(format!(
                "lease drift {} ms must be below a third of the cell lease ({} ms): the cell \
                 would stop serving before its second renewal could confirm the lease",
                self.drift_ms, self.lease_ms
            ));
        }
        Ok(())
    }

    /// Until when a renewal sent at `sent_at` (the time the store wrote the lease from) lets
    /// the cell serve: a millisecond before a successor whose clock is `drift_ms` ahead sees
    /// the lease end (the lease model found the tie: at the very millisecond both may act).
    #[must_use]
    pub fn serving_until(&self, sent_at: MonoMs) -> MonoMs {
        sent_at.plus_ms(
            self.lease_ms
                .saturating_sub(self.drift_ms)
                .saturating_sub(1),
        )
    }
}

/// HO-L2 / HO-L5: the cell's lease keeper: one per process, fed every renewal's answer and
/// the clock (`handle_timeout` at [`LeaseKeeper::poll_timeout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct LeaseKeeper {
    failing: bool,
    lost: Option<LeaseLost>,
    /// HO-L5: the lease's timing and until when the last confirmed renewal lets the cell
    /// serve (and when that renewal was sent); `None`: not tracked (a keeper without timing).
    timing: Option<LeaseTiming>,
    serving: Option<(MonoMs, MonoMs)>,
    lapsed: Option<u64>,
}

impl LeaseKeeper {
    #[must_use]
    pub fn new() -> LeaseKeeper {
        LeaseKeeper::default()
    }

    /// HO-L5: a keeper for a lease taken at `taken_at` (the `now` the store wrote it from).
    #[must_use]
    pub fn with_timing(timing: LeaseTiming, taken_at: MonoMs) -> LeaseKeeper {
        LeaseKeeper {
            timing: Some(timing),
            serving: Some((taken_at, timing.serving_until(taken_at))),
            ..LeaseKeeper::default()
        }
    }

    /// HO-L5: when to call [`LeaseKeeper::handle_timeout`]: the end of serving on the last
    /// confirmed renewal (`None` once stopped, or without timing).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<MonoMs> {
        if self.lost.is_some() || self.lapsed.is_some() {
            return None;
        }
        self.serving.map(|(_, until)| until)
    }

    /// HO-L5: the clock reached `now`: `Some(Lapsing)` once it is past the end of serving.
    pub fn handle_timeout(&mut self, now: MonoMs) -> Option<LeaseStep> {
        let (sent, until) = self.serving?;
        if self.lost.is_some() || self.lapsed.is_some() || now < until {
            return None;
        }
        let unconfirmed_ms = now.since_ms(sent);
        self.lapsed = Some(unconfirmed_ms);
        Some(LeaseStep::Lapsing { unconfirmed_ms })
    }

    /// HO-L5: [`LeaseKeeper::handle_renewal`] of a renewal sent at `sent_at`: a confirmed one
    /// moves the end of serving on; after the keeper stopped, nothing changes.
    pub fn handle_renewal_at(&mut self, sent_at: MonoMs, renewal: Renewal) -> LeaseStep {
        if let Some(unconfirmed_ms) = self.lapsed {
            return LeaseStep::Lapsing { unconfirmed_ms };
        }
        let step = self.handle_renewal(renewal);
        if let (Renewal::Renewed, Some(timing)) = (renewal, self.timing) {
            let until = timing.serving_until(sent_at);
            if self.serving.is_none_or(|(_, was)| until > was) {
                self.serving = Some((sent_at, until));
            }
        }
        step
    }

    /// How often to renew a lease of `lease_ms`: every third of it (two renewals may fail
    /// before it runs out).
    #[must_use]
    pub fn period_ms(lease_ms: u64) -> u64 {
        (lease_ms / 3).max(1)
    }

    /// HO-L5 / HA-1: how long to wait before the next renewal: a third of the lease while
    /// renewals succeed; a fifteenth after one failed (the store may be failing over), so a
    /// cell rides through any store outage shorter than its lease less the drift and one
    /// retry, however its faults fall against the renewal period.
    #[must_use]
    pub fn next_renewal_ms(&self, lease_ms: u64) -> u64 {
        let period = Self::period_ms(lease_ms);
        if self.failing {
            (lease_ms / 15).clamp(1, period)
        } else {
            period
        }
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

    /// HO-L5: with a 15 s lease renewed every 5 s and 1 s of drift allowed, a cell whose
    /// renewals stop being confirmed stops serving 1 ms short of 14 s after the send of the
    /// last confirmed one: after two failed renewals (at 5 s and 10 s), before a successor whose clock runs
    /// up to 1 s ahead can see the lease lapse (15 s by the old cell's clock).
    #[test]
    fn ho_l5_a_cell_whose_renewals_fail_stops_serving_before_its_lease_can_lapse() {
        let timing = LeaseTiming {
            lease_ms: 15_000,
            drift_ms: 1_000,
        };
        assert!(timing.validate().is_ok());
        let mut k = LeaseKeeper::with_timing(timing, MonoMs(100_000));
        assert_eq!(k.poll_timeout(), Some(MonoMs(113_999)));
        // Confirmed at 105 s (sent then): serving runs to just before 119 s.
        assert_eq!(
            k.handle_renewal_at(MonoMs(105_000), Renewal::Renewed),
            LeaseStep::Keep { recovered: false }
        );
        assert_eq!(k.poll_timeout(), Some(MonoMs(118_999)));
        assert_eq!(
            k.handle_renewal_at(MonoMs(110_000), Renewal::Unreachable),
            LeaseStep::Failing { first: true }
        );
        assert_eq!(
            k.handle_renewal_at(MonoMs(115_000), Renewal::Unreachable),
            LeaseStep::Failing { first: false }
        );
        assert_eq!(k.handle_timeout(MonoMs(118_998)), None);
        assert_eq!(
            k.handle_timeout(MonoMs(118_999)),
            Some(LeaseStep::Lapsing {
                unconfirmed_ms: 13_999
            })
        );
        // Final: a late confirmation (the store is back) does not reopen a stopped cell.
        assert_eq!(
            k.handle_renewal_at(MonoMs(120_000), Renewal::Renewed),
            LeaseStep::Lapsing {
                unconfirmed_ms: 13_999
            }
        );
        assert_eq!(k.poll_timeout(), None);
        assert_eq!(k.handle_timeout(MonoMs(200_000)), None, "said once");
        // An older confirmation never moves the end back.
        let mut k = LeaseKeeper::with_timing(timing, MonoMs(0));
        k.handle_renewal_at(MonoMs(10_000), Renewal::Renewed);
        k.handle_renewal_at(MonoMs(5_000), Renewal::Renewed);
        assert_eq!(k.poll_timeout(), Some(MonoMs(23_999)));
    }

    /// HA-1: after a failed renewal the next comes within a fifteenth of the lease, not a
    /// third, so two faults a renewal period apart (a frozen standby, then the primary's
    /// crash) do not use up the lease between them; once confirmed, the period returns.
    #[test]
    fn ha_1_ho_l5_a_failed_renewal_is_retried_within_a_fifteenth_of_the_lease() {
        let timing = LeaseTiming {
            lease_ms: 15_000,
            drift_ms: 100,
        };
        let mut k = LeaseKeeper::with_timing(timing, MonoMs(0));
        assert_eq!(k.next_renewal_ms(15_000), 5_000);
        k.handle_renewal_at(MonoMs(5_000), Renewal::Unreachable);
        assert_eq!(k.next_renewal_ms(15_000), 1_000);
        k.handle_renewal_at(MonoMs(6_000), Renewal::Renewed);
        assert_eq!(k.next_renewal_ms(15_000), 5_000);
        // A tiny lease still waits at least a millisecond and never past its period.
        k.handle_renewal_at(MonoMs(7_000), Renewal::Unreachable);
        assert_eq!(k.next_renewal_ms(10), 1);
        assert_eq!(k.next_renewal_ms(30), 2);
    }

    #[test]
    fn ho_l5_the_drift_must_leave_two_renewals_before_the_stop() {
        let ok = LeaseTiming {
            lease_ms: 300,
            drift_ms: 99,
        };
        assert!(ok.validate().is_ok());
        let err = LeaseTiming {
            lease_ms: 300,
            drift_ms: 100,
        }
        .validate()
        .expect_err("refused");
        assert!(err.contains("lease drift 100 ms"), "{err}");
    }

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
