//! FO thresholds, read through an injected variable lookup (FO-CFG-1, FO-CFG-2).
//!
//! The core never touches `std::env`: the caller hands in a lookup (`|name| std::env::var(name).ok()`
//! in production, a map in tests).

use serde::{Deserialize, Serialize};

pub const VAR_COOLDOWN_MS: &str = "RELAY_FAILOVER_COOLDOWN_MS";
pub const VAR_DEADLINE_MS: &str = "RELAY_FAILOVER_DEADLINE_MS";
pub const VAR_GRACE_MS: &str = "RELAY_FAILOVER_GRACE_MS";
pub const VAR_MIN_ATTEMPTS: &str = "RELAY_FAILOVER_MIN_ATTEMPTS";
pub const VAR_CHECK_MS: &str = "RELAY_FAILOVER_CHECK_MS";
pub const VAR_UP_TIMEOUT_MS: &str = "RELAY_FAILOVER_UP_TIMEOUT_MS";
pub const VAR_EXEMPT: &str = "RELAY_FAILOVER_EXEMPT";
pub const VAR_PROBE_MIN_MS: &str = "RELAY_FAILOVER_PROBE_MIN_MS";
pub const VAR_PROBE_MAX_MS: &str = "RELAY_FAILOVER_PROBE_MAX_MS";
pub const VAR_HEARTBEAT_MS: &str = "RELAY_FAILOVER_HEARTBEAT_MS";
pub const VAR_HEARTBEAT_TIMEOUT_MS: &str = "RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS";

/// Every variable the failover supervisor reads, in documentation order.
pub const ALL_VARS: [&str; 11] = [
    VAR_COOLDOWN_MS,
    VAR_DEADLINE_MS,
    VAR_GRACE_MS,
    VAR_MIN_ATTEMPTS,
    VAR_CHECK_MS,
    VAR_UP_TIMEOUT_MS,
    VAR_EXEMPT,
    VAR_PROBE_MIN_MS,
    VAR_PROBE_MAX_MS,
    VAR_HEARTBEAT_MS,
    VAR_HEARTBEAT_TIMEOUT_MS,
];

/// The failover thresholds. Defaults are the production values of the requirements table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Thresholds {
    /// How long a URL stays in cooldown. `0` is legal: anti-flap off, chain still moves (FO-X2).
    pub cooldown_ms: u64,
    /// The bound a failover must meet; drills assert it, the machine only reports it.
    pub deadline_ms: u64,
    /// How long a channel must be in backoff to count as unhealthy; also the skip-line throttle.
    pub grace_ms: u64,
    /// Failed reconnect attempts that make a channel unhealthy. `0` switches the supervisor off
    /// (FO-H-2). A different switch from `exempt` (FO-CFG-2).
    pub min_attempts: u32,
    /// Tick interval.
    pub check_ms: u64,
    /// How long opening a new channel may take.
    pub up_timeout_ms: u64,
    /// The one-hop exemption (FO-D6). `false` restores the pre-exemption behaviour (FO-D6-OFF).
    pub exempt: bool,
    /// FO-X3: the first interval between probe rounds once the exemption budget is spent.
    pub probe_min_ms: u64,
    /// FO-X3: the interval doubles up to this. `0` switches probing off (the seed's behaviour).
    pub probe_max_ms: u64,
    /// FO-X4: how often the channel sends its heartbeat ping. Read by the adapter's channel,
    /// not by the machine. Defaulted when absent so journals written before it still parse.
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// FO-X4: how long after the last pong answering its own ping the channel counts as lost
    /// (dead-peer detection). At least twice `heartbeat_ms`; with `GRACE_MS + CHECK_MS` it must
    /// fit in `DEADLINE_MS` ([`Thresholds::check_dark_host_deadline`]).
    #[serde(default = "default_heartbeat_timeout_ms")]
    pub heartbeat_timeout_ms: u64,
}

/// FO-X4: the default heartbeat interval.
pub const DEFAULT_HEARTBEAT_MS: u64 = 3_000;
/// FO-X4: the default dead-peer timeout: three heartbeats.
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: u64 = 9_000;

fn default_heartbeat_ms() -> u64 {
    DEFAULT_HEARTBEAT_MS
}

fn default_heartbeat_timeout_ms() -> u64 {
    DEFAULT_HEARTBEAT_TIMEOUT_MS
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            cooldown_ms: 300_000,
            deadline_ms: 30_000,
            grace_ms: 15_000,
            min_attempts: 3,
            check_ms: 2_000,
            up_timeout_ms: 12_000,
            exempt: true,
            probe_min_ms: 15_000,
            probe_max_ms: 60_000,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            heartbeat_timeout_ms: DEFAULT_HEARTBEAT_TIMEOUT_MS,
        }
    }
}

/// Why a threshold variable was rejected. Every variant names the variable and the raw value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{var}={value:?}: not a decimal number (only the digits 0-9 are allowed, no sign, unit, exponent, spaces or comment)")]
    NotDigits { var: &'static str, value: String },
    #[error("{var}={value:?}: too large (at most {max})")]
    TooLarge {
        var: &'static str,
        value: String,
        max: u64,
    },
    #[error("{var}={value:?}: {why}")]
    Invalid {
        var: &'static str,
        value: String,
        why: &'static str,
    },
    /// FO-X4: the thresholds cannot meet the deadline for a relay host that goes dark.
    #[error("RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS ({heartbeat_timeout_ms}) + RELAY_FAILOVER_GRACE_MS ({grace_ms}) + RELAY_FAILOVER_CHECK_MS ({check_ms}) = {sum_ms} ms exceeds RELAY_FAILOVER_DEADLINE_MS ({deadline_ms}): a relay host that goes dark could not be left within the deadline")]
    DarkHostDeadline {
        heartbeat_timeout_ms: u64,
        grace_ms: u64,
        check_ms: u64,
        sum_ms: u64,
        deadline_ms: u64,
    },
}

impl ConfigError {
    /// The variable the error is about.
    pub fn var(&self) -> &'static str {
        match self {
            ConfigError::NotDigits { var, .. }
            | ConfigError::TooLarge { var, .. }
            | ConfigError::Invalid { var, .. } => var,
            // The sum is over four variables; the one it is refused against is the deadline.
            ConfigError::DarkHostDeadline { .. } => VAR_DEADLINE_MS,
        }
    }
}

/// FO-CFG-1: accept exactly `^[0-9]+$` that fits in `max`; anything else is an error naming `var`.
pub fn parse_digits(var: &'static str, value: &str, max: u64) -> Result<u64, ConfigError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ConfigError::NotDigits {
            var,
            value: value.to_owned(),
        });
    }
    // Digits only, so the one way `parse` can fail is overflow.
    match value.parse::<u64>() {
        Ok(parsed) if parsed <= max => Ok(parsed),
        _ => Err(ConfigError::TooLarge {
            var,
            value: value.to_owned(),
            max,
        }),
    }
}

impl Thresholds {
    /// Reads every variable through `lookup`; an unset variable keeps its default.
    ///
    /// Returns every bad variable, not just the first, so an operator fixes them in one go.
    pub fn from_lookup<F>(lookup: F) -> Result<Thresholds, Vec<ConfigError>>
    where
        F: Fn(&str) -> Option<String>,
    {
        let thresholds = Thresholds::read_lookup(lookup)?;
        let errors = thresholds.check_together();
        if errors.is_empty() {
            Ok(thresholds)
        } else {
            Err(errors)
        }
    }

    /// Reads every variable through `lookup` like [`Thresholds::from_lookup`] (each one by
    /// FO-CFG-1) but leaves the checks that relate several variables
    /// ([`Thresholds::check_together`]) to the caller: a command line applies its flags on top
    /// first, then checks the result once.
    pub fn read_lookup<F>(lookup: F) -> Result<Thresholds, Vec<ConfigError>>
    where
        F: Fn(&str) -> Option<String>,
    {
        let mut thresholds = Thresholds::default();
        let mut errors = Vec::new();
        for var in ALL_VARS {
            if let Some(value) = lookup(var) {
                if let Err(error) = thresholds.set(var, &value) {
                    errors.push(error);
                }
            }
        }
        if errors.is_empty() {
            Ok(thresholds)
        } else {
            Err(errors)
        }
    }

    /// Sets one variable from its raw text, with the same rules as [`Thresholds::from_lookup`].
    /// Command-line flags use this too, so a flag and a variable can't disagree on what is valid.
    pub fn set(&mut self, var: &str, value: &str) -> Result<(), ConfigError> {
        let Some(var) = ALL_VARS.iter().copied().find(|known| *known == var) else {
            return Err(ConfigError::Invalid {
                var: "(unknown variable)",
                value: format!("{var}={value}"),
                why: "not a failover threshold",
            });
        };
        let invalid = |why| ConfigError::Invalid {
            var,
            value: value.to_owned(),
            why,
        };
        match var {
            VAR_COOLDOWN_MS => self.cooldown_ms = parse_digits(var, value, MAX_DURATION_MS)?,
            VAR_DEADLINE_MS => {
                self.deadline_ms = parse_digits(var, value, MAX_DURATION_MS)?;
                if self.deadline_ms == 0 {
                    return Err(invalid(
                        "must be at least 1: a zero deadline can never be met",
                    ));
                }
            }
            VAR_GRACE_MS => self.grace_ms = parse_digits(var, value, MAX_DURATION_MS)?,
            VAR_MIN_ATTEMPTS => {
                self.min_attempts = parse_digits(var, value, u64::from(u32::MAX))? as u32;
            }
            VAR_CHECK_MS => {
                self.check_ms = parse_digits(var, value, MAX_DURATION_MS)?;
                if self.check_ms == 0 {
                    return Err(invalid(
                        "must be at least 1: a zero tick interval is a busy loop",
                    ));
                }
            }
            VAR_UP_TIMEOUT_MS => {
                self.up_timeout_ms = parse_digits(var, value, MAX_DURATION_MS)?;
                if self.up_timeout_ms == 0 {
                    return Err(invalid(
                        "must be at least 1: a zero open timeout always fails",
                    ));
                }
            }
            VAR_EXEMPT => match parse_digits(var, value, u64::MAX)? {
                0 => self.exempt = false,
                1 => self.exempt = true,
                _ => return Err(invalid("must be 0 (exemption off) or 1 (on)")),
            },
            VAR_PROBE_MIN_MS => {
                self.probe_min_ms = parse_digits(var, value, MAX_DURATION_MS)?;
                if self.probe_min_ms == 0 {
                    return Err(invalid(
                        "must be at least 1: a zero probe interval is a retry storm (switch probing off with RELAY_FAILOVER_PROBE_MAX_MS=0)",
                    ));
                }
            }
            VAR_PROBE_MAX_MS => self.probe_max_ms = parse_digits(var, value, MAX_DURATION_MS)?,
            VAR_HEARTBEAT_MS => {
                self.heartbeat_ms = parse_digits(var, value, MAX_DURATION_MS)?;
                if self.heartbeat_ms == 0 {
                    return Err(invalid(
                        "must be at least 1: a zero heartbeat interval is a busy loop",
                    ));
                }
            }
            VAR_HEARTBEAT_TIMEOUT_MS => {
                self.heartbeat_timeout_ms = parse_digits(var, value, MAX_DURATION_MS)?;
                if self.heartbeat_timeout_ms == 0 {
                    return Err(invalid(
                        "must be at least 1: a zero dead-peer timeout declares every channel lost",
                    ));
                }
            }
            _ => unreachable!("var was matched against ALL_VARS"),
        }
        Ok(())
    }

    /// FO-X3: with probing on, `PROBE_MIN_MS <= PROBE_MAX_MS`. Checked once every variable is
    /// read, since either may be set alone; names both variables and values.
    pub fn check_probe_schedule(&self) -> Result<(), ConfigError> {
        if self.probe_max_ms > 0 && self.probe_min_ms > self.probe_max_ms {
            return Err(ConfigError::Invalid {
                var: VAR_PROBE_MIN_MS,
                value: format!(
                    "{} (with {VAR_PROBE_MAX_MS}={})",
                    self.probe_min_ms, self.probe_max_ms
                ),
                why: "must not exceed RELAY_FAILOVER_PROBE_MAX_MS (or set that to 0 to switch probing off)",
            });
        }
        Ok(())
    }

    /// The checks that relate several variables, run once every variable is read (by
    /// [`Thresholds::from_lookup`], and again by a caller that applied flags on top): the probe
    /// schedule (FO-X3), the heartbeat pair and the dark-host deadline (FO-X4). Every failing
    /// check is returned.
    pub fn check_together(&self) -> Vec<ConfigError> {
        [
            self.check_probe_schedule(),
            self.check_heartbeat(),
            self.check_dark_host_deadline(),
        ]
        .into_iter()
        .filter_map(Result::err)
        .collect()
    }

    /// FO-X4: `HEARTBEAT_TIMEOUT_MS >= 2 x HEARTBEAT_MS`, so one late pong does not count as a
    /// dead peer. Names both variables and values.
    pub fn check_heartbeat(&self) -> Result<(), ConfigError> {
        if self.heartbeat_timeout_ms < self.heartbeat_ms.saturating_mul(2) {
            return Err(ConfigError::Invalid {
                var: VAR_HEARTBEAT_TIMEOUT_MS,
                value: format!(
                    "{} (with {VAR_HEARTBEAT_MS}={})",
                    self.heartbeat_timeout_ms, self.heartbeat_ms
                ),
                why: "must be at least twice RELAY_FAILOVER_HEARTBEAT_MS: one late pong must not count as a dead relay",
            });
        }
        Ok(())
    }

    /// FO-X4: the time a relay host that goes dark costs before the switch to another host is
    /// decided: the channel notices after `HEARTBEAT_TIMEOUT_MS` (no pong), it must then be
    /// unhealthy for `GRACE_MS`, and the tick that switches comes up to `CHECK_MS` later.
    pub fn dark_host_sum_ms(&self) -> u64 {
        self.heartbeat_timeout_ms
            .saturating_add(self.grace_ms)
            .saturating_add(self.check_ms)
    }

    /// FO-X4: refuses a set of thresholds that cannot meet `DEADLINE_MS` for a dark host:
    /// `HEARTBEAT_TIMEOUT_MS + GRACE_MS + CHECK_MS <= DEADLINE_MS`. The error names the sum.
    /// What is left (`DEADLINE_MS` minus the sum) is the margin for the open of the channel to
    /// the live relay.
    pub fn check_dark_host_deadline(&self) -> Result<(), ConfigError> {
        let sum = self.dark_host_sum_ms();
        if sum > self.deadline_ms {
            return Err(ConfigError::DarkHostDeadline {
                heartbeat_timeout_ms: self.heartbeat_timeout_ms,
                grace_ms: self.grace_ms,
                check_ms: self.check_ms,
                sum_ms: sum,
                deadline_ms: self.deadline_ms,
            });
        }
        Ok(())
    }

    /// FO-X3: probing continues the exemption once its budget is spent, so it needs the
    /// exemption on (FO-D6-OFF stays exactly the pre-exemption behaviour) and `PROBE_MAX_MS > 0`
    /// (`0` restores the seed's behaviour exactly).
    pub fn probing_enabled(&self) -> bool {
        self.exempt && self.probe_max_ms > 0
    }

    /// FO-X3: the interval before probe round `round` (0-based): `PROBE_MIN_MS` doubling up to
    /// `PROBE_MAX_MS`.
    pub fn probe_interval_ms(&self, round: u32) -> u64 {
        self.probe_min_ms
            .saturating_mul(2u64.saturating_pow(round))
            .min(self.probe_max_ms)
    }

    /// FO-H-2 / FO-CFG-2: the supervisor (health path) is on unless `MIN_ATTEMPTS=0`.
    pub fn supervisor_enabled(&self) -> bool {
        self.min_attempts > 0
    }
}

/// Durations are capped well below `u64::MAX` (about 31 years) so that `now + duration` can never
/// wrap and a typo with extra digits is rejected instead of meaning "forever".
pub const MAX_DURATION_MS: u64 = 1_000_000_000_000;
