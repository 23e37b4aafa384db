//! HO-3 / HO-C1: pure eligibility checks, shared by the director (candidate selection) and the
//! reference assignment transaction (which re-checks the director's policy under the lock).

use serde::{Deserialize, Serialize};

use super::ids::{CellId, HostId, OpId, SourceAuthority};
use crate::MonoMs;

/// HO-3: minimum absolute improvement of the desktop's measured RTT.
pub(crate) const MIN_IMPROVEMENT_MS: u32 = 25;
/// HO-3: minimum relative improvement, in percent of the current region's RTT.
pub(crate) const MIN_IMPROVEMENT_PERCENT: u32 = 20;
/// Cohort percentages are `0..=100`.
pub(crate) const MAX_COHORT_PERCENT: u8 = 100;
/// Number of cohort buckets (one per percent).
pub(crate) const COHORT_BUCKETS: u64 = 100;

/// Tunables that both the director and the store transaction apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicyConfig {
    /// HO-3: a desktop measurement older than this is stale.
    pub freshness_window_ms: u64,
    /// HO-3: after a committed move the host is not moved again for this long.
    pub host_cooldown_ms: u64,
}

/// One desktop measurement of the current region and of one candidate target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Measurement {
    pub measured_at: MonoMs,
    pub current_rtt_ms: u32,
    pub target_rtt_ms: u32,
}

/// HO-S1: the authenticated director -> source command. Re-delivery carries the same `op_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HandoffRequest {
    pub op_id: OpId,
    /// Expected exact source authority (epoch / incarnation / generation included).
    pub source: SourceAuthority,
    pub target: CellId,
    /// The director's configured cohort percentage, carried in the command (the cell never
    /// uses a default of its own).
    pub cohort_percent: u8,
    pub measurement: Measurement,
}

impl HandoffRequest {
    /// Build a request; the op id is derived, never chosen.
    #[must_use]
    pub fn new(
        source: SourceAuthority,
        target: CellId,
        cohort_percent: u8,
        measurement: Measurement,
    ) -> HandoffRequest {
        HandoffRequest {
            op_id: OpId::derive(&source, target),
            source,
            target,
            cohort_percent,
            measurement,
        }
    }

    /// The op id must be the UUIDv5 of the authority and target it claims (external input).
    #[must_use]
    pub fn op_id_is_consistent(&self) -> bool {
        self.op_id == OpId::derive(&self.source, self.target)
    }
}

/// Why a host is not eligible (each refusal names its reason). HO-3, HO-C1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Ineligible {
    /// HO-A5 / HO-3: the correction is switched off.
    Disabled,
    /// HO-C1: the source cell does not advertise the idle-handoff capability.
    SourceCellNotCapable,
    /// HO-C1: the target cell does not advertise the idle-handoff capability.
    TargetCellNotCapable,
    /// HO-C1: the desktop did not negotiate the idle-handoff capability.
    DesktopNotCapable,
    /// The configured cohort percentage is outside `0..=100` (external input).
    InvalidCohortPercent,
    /// HO-3: the host's cohort bucket is outside the configured percentage.
    NotInCohort,
    /// HO-3: no desktop measurement at all.
    NoMeasurement,
    /// HO-3: the measurement is older than the freshness window.
    StaleMeasurement,
    /// The measurement claims to come from the future.
    MeasurementFromFuture,
    /// Target equals the current cell.
    SameCell,
    /// The target cell is unknown.
    UnknownTarget,
    /// HO-3: improvement below `MIN_IMPROVEMENT_MS`.
    ImprovementBelowMs,
    /// HO-3: improvement below `MIN_IMPROVEMENT_PERCENT`.
    ImprovementBelowPercent,
    /// HO-3: the target has no free capacity.
    TargetAtCapacity,
    /// HO-3: the host moved recently.
    CoolingDown,
    /// HO-L3: the target cell's lease in the store has lapsed (its process stopped renewing
    /// it: dead, or cut off from the store); it is not live to serve the host.
    TargetNotLive,
}

impl Ineligible {
    /// Every reason, for tests that pin the names.
    pub const ALL: [Ineligible; 16] = [
        Ineligible::Disabled,
        Ineligible::SourceCellNotCapable,
        Ineligible::TargetCellNotCapable,
        Ineligible::DesktopNotCapable,
        Ineligible::InvalidCohortPercent,
        Ineligible::NotInCohort,
        Ineligible::NoMeasurement,
        Ineligible::StaleMeasurement,
        Ineligible::MeasurementFromFuture,
        Ineligible::SameCell,
        Ineligible::UnknownTarget,
        Ineligible::ImprovementBelowMs,
        Ineligible::ImprovementBelowPercent,
        Ineligible::TargetAtCapacity,
        Ineligible::CoolingDown,
        Ineligible::TargetNotLive,
    ];

    /// Stable snake_case name for reports, metrics keys and the wire. Never derived from the
    /// `Debug` text: renaming a variant must not rename what operators and dashboards see.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Ineligible::Disabled => "disabled",
            Ineligible::SourceCellNotCapable => "source_cell_not_capable",
            Ineligible::TargetCellNotCapable => "target_cell_not_capable",
            Ineligible::DesktopNotCapable => "desktop_not_capable",
            Ineligible::InvalidCohortPercent => "invalid_cohort_percent",
            Ineligible::NotInCohort => "not_in_cohort",
            Ineligible::NoMeasurement => "no_measurement",
            Ineligible::StaleMeasurement => "stale_measurement",
            Ineligible::MeasurementFromFuture => "measurement_from_future",
            Ineligible::SameCell => "same_cell",
            Ineligible::UnknownTarget => "unknown_target",
            Ineligible::ImprovementBelowMs => "improvement_below_ms",
            Ineligible::ImprovementBelowPercent => "improvement_below_percent",
            Ineligible::TargetAtCapacity => "target_at_capacity",
            Ineligible::CoolingDown => "cooling_down",
            Ineligible::TargetNotLive => "target_not_live",
        }
    }
}

/// HO-3: deterministic cohort bucket `0..100` of a host (splitmix64 finaliser of the id, mod
/// 100). SQL stores that re-check the cohort must compute exactly this.
#[must_use]
pub fn cohort_bucket(host: HostId) -> u8 {
    let mut z = host.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let bucket = z % COHORT_BUCKETS;
    crate::invariant!(bucket < COHORT_BUCKETS);
    u8::try_from(bucket).unwrap_or(u8::MAX)
}

/// HO-3: the host is in the cohort iff its bucket is below the configured percentage.
pub fn check_cohort(host: HostId, cohort_percent: u8) -> Result<(), Ineligible> {
    if cohort_percent > MAX_COHORT_PERCENT {
        return Err(Ineligible::InvalidCohortPercent);
    }
    if cohort_bucket(host) < cohort_percent {
        Ok(())
    } else {
        Err(Ineligible::NotInCohort)
    }
}

/// HO-3: the measurement must be fresh (age `<= freshness_window_ms`) and not from the future.
pub fn check_freshness(
    now: MonoMs,
    measurement: &Measurement,
    freshness_window_ms: u64,
) -> Result<(), Ineligible> {
    if measurement.measured_at > now {
        return Err(Ineligible::MeasurementFromFuture);
    }
    if now.since_ms(measurement.measured_at) > freshness_window_ms {
        return Err(Ineligible::StaleMeasurement);
    }
    Ok(())
}

/// HO-3: improvement of at least 25 ms **and** at least 20 % of the current RTT.
pub fn check_improvement(current_rtt_ms: u32, target_rtt_ms: u32) -> Result<(), Ineligible> {
    let gain_ms = u64::from(current_rtt_ms).saturating_sub(u64::from(target_rtt_ms));
    if gain_ms < u64::from(MIN_IMPROVEMENT_MS) {
        return Err(Ineligible::ImprovementBelowMs);
    }
    // Integer form of gain / current >= 20 / 100 (u64: no overflow from u32 inputs).
    if gain_ms * 100 < u64::from(MIN_IMPROVEMENT_PERCENT) * u64::from(current_rtt_ms) {
        return Err(Ineligible::ImprovementBelowPercent);
    }
    Ok(())
}

/// HO-3: a host in cooldown (`now < until`) is not moved.
pub(crate) fn check_cooldown(
    now: MonoMs,
    cooldown_until: Option<MonoMs>,
) -> Result<(), Ineligible> {
    match cooldown_until {
        Some(until) if now < until => Err(Ineligible::CoolingDown),
        _ => Ok(()),
    }
}

/// HO-3: capacity: the target must have room for one more host.
pub(crate) fn check_capacity(load: u32, capacity: u32) -> Result<(), Ineligible> {
    if load < capacity {
        Ok(())
    } else {
        Err(Ineligible::TargetAtCapacity)
    }
}

/// HO-L3: the target is live iff its lease in the store ends after `now`. A lease end of zero
/// is a cell row no process ever leased (a setup row: the seeded store, tests that run no
/// cell process) and is not judged here; a lease that a process took and stopped renewing
/// ends at or before `now`.
pub fn check_target_live(now: MonoMs, lease_until: MonoMs) -> Result<(), Ineligible> {
    if lease_until == MonoMs::ZERO || lease_until > now {
        Ok(())
    } else {
        Err(Ineligible::TargetNotLive)
    }
}

/// HO-C1: both cells and the desktop must advertise the idle-handoff capability.
pub(crate) fn check_capabilities(
    source_cell_capable: bool,
    target_cell_capable: bool,
    desktop_capable: bool,
) -> Result<(), Ineligible> {
    if !source_cell_capable {
        return Err(Ineligible::SourceCellNotCapable);
    }
    if !target_cell_capable {
        return Err(Ineligible::TargetCellNotCapable);
    }
    if !desktop_capable {
        return Err(Ineligible::DesktopNotCapable);
    }
    Ok(())
}
