//! Value conversions and row decoding. Every value a row holds is external input: a value out
//! of range is a `StoreFailure::BadRow`, never a panic.

use std::str::FromStr;

use sqlx::any::AnyRow;
use sqlx::Row;
use switchyard_core::handoff::store::{
    authority_of, AssignmentRow, AttemptOutcome, AttemptRow, CellRow, Registration, StoreBounds,
    StoreConfig,
};
use switchyard_core::handoff::{CandidateRow, CandidateView, TargetView};
use switchyard_core::handoff::{
    CellId, Epoch, Generation, HostId, Incarnation, OpId, SourceAuthority,
};
use switchyard_core::handoff::{Measurement, PolicyConfig};
use switchyard_core::MonoMs;

use super::StoreFailure;

// ----- value conversions (DB rows are external input: never a panic) -----

pub(super) fn i(v: u64, what: &str) -> Result<i64, StoreFailure> {
    i64::try_from(v).map_err(|_| StoreFailure::BadRow(format!("{what} {v} exceeds i64")))
}

pub(super) fn u(v: i64, what: &str) -> Result<u64, StoreFailure> {
    u64::try_from(v).map_err(|_| StoreFailure::BadRow(format!("{what} {v} is negative")))
}

pub(super) fn u32_of(v: i64, what: &str) -> Result<u32, StoreFailure> {
    u32::try_from(v).map_err(|_| StoreFailure::BadRow(format!("{what} {v} is not a u32")))
}

pub(super) fn flag(v: i64, what: &str) -> Result<bool, StoreFailure> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(StoreFailure::BadRow(format!("{what} {v} is not 0/1"))),
    }
}

pub(super) fn get<T>(row: &AnyRow, col: &str) -> Result<T, StoreFailure>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    row.try_get::<T, _>(col)
        .map_err(|e| StoreFailure::BadRow(format!("column {col}: {e}")))
}

pub(super) fn op_text(op: OpId) -> String {
    op.0.hyphenated().to_string()
}

pub(super) fn op_of(text: &str) -> Result<OpId, StoreFailure> {
    uuid::Uuid::from_str(text)
        .map(OpId)
        .map_err(|e| StoreFailure::BadRow(format!("op_id {text:?}: {e}")))
}

pub(super) type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// The bind values of an attempt row, in `ho_attempts` column order (op id first).
#[derive(Debug, Clone)]
pub(super) struct AttemptBinds {
    op: String,
    host: i64,
    src_cell: i64,
    src_epoch: i64,
    src_incarnation: i64,
    src_generation: i64,
    target: i64,
    outcome: &'static str,
    new_epoch: Option<i64>,
    registration: Option<&'static str>,
    recorded_at: i64,
}

impl AttemptBinds {
    pub(super) fn of(op: OpId, row: &AttemptRow) -> Result<AttemptBinds, StoreFailure> {
        let (outcome, new_epoch, registration) = match row.outcome {
            AttemptOutcome::Committed {
                new_epoch,
                registration,
            } => (
                "committed",
                Some(i(new_epoch.0, "new_epoch")?),
                Some(registration_text(registration)),
            ),
            AttemptOutcome::FencedAbort => ("fenced", None, None),
            AttemptOutcome::FencedRenewed => ("fenced_renewed", None, None),
        };
        Ok(AttemptBinds {
            op: op_text(op),
            host: i(row.source.host.0, "host")?,
            src_cell: i64::from(row.source.cell.0),
            src_epoch: i(row.source.epoch.0, "epoch")?,
            src_incarnation: i(row.source.incarnation.0, "incarnation")?,
            src_generation: i(row.source.generation.0, "generation")?,
            target: i64::from(row.target.0),
            outcome,
            new_epoch,
            registration,
            recorded_at: i(row.recorded_at.0, "recorded_at")?,
        })
    }

    /// Bind the eleven values as the next parameters of `q`.
    pub(super) fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.op.clone())
            .bind(self.host)
            .bind(self.src_cell)
            .bind(self.src_epoch)
            .bind(self.src_incarnation)
            .bind(self.src_generation)
            .bind(self.target)
            .bind(self.outcome)
            .bind(self.new_epoch)
            .bind(self.registration)
            .bind(self.recorded_at)
    }
}

pub(super) fn no_settings() -> StoreFailure {
    StoreFailure::BadRow("ho_settings has no row (put_settings)".into())
}

pub(super) fn config_of(row: &AnyRow) -> Result<StoreConfig, StoreFailure> {
    Ok(StoreConfig {
        enabled: flag(get(row, "enabled")?, "enabled")?,
        policy: PolicyConfig {
            freshness_window_ms: u(get(row, "freshness_window_ms")?, "freshness")?,
            host_cooldown_ms: u(get(row, "host_cooldown_ms")?, "cooldown")?,
        },
        max_in_flight_migrations: u32_of(get(row, "max_in_flight_migrations")?, "in-flight")?,
        rate_window_ms: u(get(row, "rate_window_ms")?, "rate_window_ms")?,
        max_commits_per_window: u32_of(get(row, "max_commits_per_window")?, "commits")?,
        registration_timeout_ms: u(get(row, "registration_timeout_ms")?, "registration")?,
        bounds: bounds_of(row)?,
    })
}

/// SCALE-1: the bounds of a settings row, validated (a row is external input).
fn bounds_of(row: &AnyRow) -> Result<StoreBounds, StoreFailure> {
    let bounds = StoreBounds {
        max_hosts: u(get(row, "max_hosts")?, "max_hosts")?,
        max_cells: u(get(row, "max_cells")?, "max_cells")?,
        max_attempt_rows: u(get(row, "max_attempt_rows")?, "max_attempt_rows")?,
    };
    bounds
        .validate()
        .map_err(|e| StoreFailure::BadRow(format!("ho_settings: {e}")))?;
    Ok(bounds)
}

pub(super) fn registration_text(r: Registration) -> &'static str {
    match r {
        Registration::Pending => "pending",
        Registration::Registered => "registered",
        Registration::RecoveryStarted => "recovery",
    }
}

pub(super) fn assignment_of(r: &AnyRow) -> Result<AssignmentRow, StoreFailure> {
    Ok(AssignmentRow {
        cell: CellId(u32_of(get(r, "cell")?, "cell")?),
        epoch: Epoch(u(get(r, "epoch")?, "epoch")?),
        incarnation: Incarnation(u(get(r, "incarnation")?, "incarnation")?),
        generation: Generation(u(get(r, "generation")?, "generation")?),
        desktop_capable: flag(get(r, "desktop_capable")?, "desktop_capable")?,
    })
}

pub(super) fn cell_row_of(r: &AnyRow) -> Result<CellRow, StoreFailure> {
    Ok(CellRow {
        capacity: u32_of(get(r, "capacity")?, "capacity")?,
        handoff_capable: flag(get(r, "handoff_capable")?, "handoff_capable")?,
        incarnation: Incarnation(u(get(r, "incarnation")?, "incarnation")?),
    })
}

pub(super) fn attempt_of(r: &AnyRow) -> Result<AttemptRow, StoreFailure> {
    let outcome: String = get(r, "outcome")?;
    let outcome = match outcome.as_str() {
        "committed" => {
            let new_epoch: Option<i64> = get(r, "new_epoch")?;
            let registration: Option<String> = get(r, "registration")?;
            let new_epoch = new_epoch.ok_or_else(|| {
                StoreFailure::BadRow("committed attempt without new_epoch".into())
            })?;
            let registration = match registration.as_deref() {
                Some("pending") => Registration::Pending,
                Some("registered") => Registration::Registered,
                Some("recovery") => Registration::RecoveryStarted,
                other => {
                    return Err(StoreFailure::BadRow(format!("registration {other:?}")));
                }
            };
            AttemptOutcome::Committed {
                new_epoch: Epoch(u(new_epoch, "new_epoch")?),
                registration,
            }
        }
        "fenced" => AttemptOutcome::FencedAbort,
        "fenced_renewed" => AttemptOutcome::FencedRenewed,
        other => return Err(StoreFailure::BadRow(format!("outcome {other:?}"))),
    };
    Ok(AttemptRow {
        source: SourceAuthority {
            cell: CellId(u32_of(get(r, "src_cell")?, "src_cell")?),
            host: HostId(u(get(r, "host")?, "host")?),
            epoch: Epoch(u(get(r, "src_epoch")?, "src_epoch")?),
            incarnation: Incarnation(u(get(r, "src_incarnation")?, "src_incarnation")?),
            generation: Generation(u(get(r, "src_generation")?, "src_generation")?),
        },
        target: CellId(u32_of(get(r, "target")?, "target")?),
        outcome,
        recorded_at: MonoMs(u(get(r, "recorded_at_ms")?, "recorded_at")?),
    })
}

pub(super) fn candidate_of(r: &AnyRow) -> Result<CandidateRow, StoreFailure> {
    let host = HostId(u(get(r, "host")?, "host")?);
    let authority = authority_of(host, &assignment_of(r)?);
    let m_target: Option<i64> = get(r, "m_target")?;
    let measurement = match m_target {
        None => None,
        Some(t) => {
            let at: i64 = get(r, "measured_at_ms")?;
            let cur: i64 = get(r, "current_rtt_ms")?;
            let tgt: i64 = get(r, "target_rtt_ms")?;
            Some((
                CellId(u32_of(t, "target")?),
                Measurement {
                    measured_at: MonoMs(u(at, "measured_at")?),
                    current_rtt_ms: u32_of(cur, "current_rtt_ms")?,
                    target_rtt_ms: u32_of(tgt, "target_rtt_ms")?,
                },
            ))
        }
    };
    let target = match (measurement, get::<Option<i64>>(r, "tgt_capable")?) {
        (Some((cell, _)), Some(capable)) => Some(TargetView {
            cell,
            capable: flag(capable, "tgt_capable")?,
            load: u32::try_from(get::<i64>(r, "tgt_load")?).unwrap_or(u32::MAX),
            capacity: u32_of(
                get::<Option<i64>>(r, "tgt_capacity")?.unwrap_or(0),
                "capacity",
            )?,
            // HO-L3: the target's lease (zero: never leased).
            lease_until: MonoMs(u(
                get::<Option<i64>>(r, "tgt_lease_until")?.unwrap_or(0),
                "lease_until",
            )?),
        }),
        _ => None,
    };
    let cooldown: Option<i64> = get(r, "until_ms")?;
    Ok(CandidateRow {
        candidate: CandidateView {
            authority,
            source_cell_capable: flag(get(r, "src_capable")?, "src_capable")?,
            desktop_capable: authority_desktop(r)?,
            measurement,
            cooldown_until: cooldown.map(|c| u(c, "until_ms")).transpose()?.map(MonoMs),
        },
        target,
    })
}

pub(super) fn authority_desktop(r: &AnyRow) -> Result<bool, StoreFailure> {
    flag(get(r, "desktop_capable")?, "desktop_capable")
}
