//! The store's pure decisions (HO-S4, HO-A1, HO-A2, HO-A4..A6, HO-L1, HO-L2, SCALE-1): each a
//! function over the rows a store read under its locks, returning the rows to write or the
//! answer. The plans ([`super::plan`]) call them in the one order every store runs.

use serde::{Deserialize, Serialize};

use super::rows::*;
use crate::handoff::ids::OpId;
use crate::handoff::ids::{AuthorityCheck, AuthorityField, CellId, Epoch, HostId, Incarnation};
use crate::handoff::ids::{Generation, SourceAuthority};
use crate::handoff::policy::{self, HandoffRequest, Ineligible};
use crate::MonoMs;

/// The authority check of a claim against the host's current authority (`None`: no such
/// host).
#[must_use]
pub fn claim_check(claim: &SourceAuthority, current: Option<&SourceAuthority>) -> AuthorityCheck {
    match current {
        Some(current) => {
            crate::invariant_eq!(current.host, claim.host, "authority of another host");
            claim.check_against(current)
        }
        None => AuthorityCheck::Mismatch(AuthorityField::Host),
    }
}

/// HO-L1: the authority a locked reconciliation leaves a host in when it fences an attempt whose
/// claimed authority was exact: the claim with its generation bumped. The store writes it with
/// the fence; the source that reads `RolledBack { Fenced }` for its own attempt adopts it.
#[must_use]
pub fn fenced_authority(claim: SourceAuthority) -> SourceAuthority {
    SourceAuthority {
        generation: claim.generation.next(),
        ..claim
    }
}

/// HO-A1: the answer to an op id that is already recorded: its commit; or (fenced) a rollback
/// if the authority is still the one the fence left (HO-L1: the renewed authority; for a
/// fence that renewed nothing, the claim itself), else the authority change.
#[must_use]
pub fn recorded_outcome(
    req: &HandoffRequest,
    current: Option<&SourceAuthority>,
    row: &AttemptRow,
) -> TxnOutcome {
    let fenced = TxnOutcome::RolledBack {
        reason: AbortReason::Fenced,
    };
    match row.outcome {
        AttemptOutcome::Committed { new_epoch, .. } => TxnOutcome::Committed {
            target: row.target,
            new_epoch,
        },
        AttemptOutcome::FencedAbort => match claim_check(&req.source, current) {
            AuthorityCheck::Exact => fenced,
            check => TxnOutcome::AuthorityChanged { check },
        },
        AttemptOutcome::FencedRenewed => {
            if current == Some(&fenced_authority(req.source)) {
                fenced
            } else {
                TxnOutcome::AuthorityChanged {
                    check: claim_check(&req.source, current),
                }
            }
        }
    }
}

/// HO-S4 / HO-3 / HO-C1: the leading commit-time checks, which read no [`LimitFacts`]. If
/// this fails, [`decide_commit`] fails with the same reason whatever the limits are, so a
/// store may answer without taking its global lock.
pub fn commit_precheck(
    now: MonoMs,
    req: &HandoffRequest,
    host: &HostFacts,
    config: &StoreConfig,
) -> Result<(), AbortReason> {
    let p = AbortReason::Policy;
    if !config.enabled {
        return Err(p(Ineligible::Disabled));
    }
    if req.target == req.source.cell {
        return Err(p(Ineligible::SameCell));
    }
    let Some(target) = host.target_cell else {
        return Err(p(Ineligible::UnknownTarget));
    };
    policy::check_capabilities(
        host.source_cell_capable,
        target.handoff_capable,
        host.assignment.desktop_capable,
    )
    .map_err(p)?;
    // HO-L3: the target's liveness, re-checked as the director's policy is.
    policy::check_target_live(now, host.target_lease_until).map_err(p)?;
    policy::check_cohort(req.source.host, req.cohort_percent).map_err(p)?;
    policy::check_freshness(now, &req.measurement, config.policy.freshness_window_ms).map_err(p)?;
    policy::check_improvement(
        req.measurement.current_rtt_ms,
        req.measurement.target_rtt_ms,
    )
    .map_err(p)?;
    policy::check_cooldown(now, host.cooldown_until).map_err(p)?;
    Ok(())
}

/// HO-S4 / HO-3 / HO-C1: every commit-time check, in the one order both stores apply, and on
/// success the rows to write. The caller has checked the op id and found the claimed
/// authority exact against `facts.host.assignment`, with no attempt recorded for the op id.
pub fn decide_commit(
    now: MonoMs,
    req: &HandoffRequest,
    facts: &CommitFacts,
    config: &StoreConfig,
) -> Result<CommitWrites, AbortReason> {
    crate::invariant!(req.op_id_is_consistent(), "op id checked by the caller");
    crate::invariant_eq!(
        req.source
            .check_against(&authority_of(req.source.host, &facts.host.assignment)),
        AuthorityCheck::Exact,
        "authority checked by the caller"
    );
    commit_precheck(now, req, &facts.host, config)?;
    let Some(target) = facts.host.target_cell else {
        // Unreachable: the precheck refused an unknown target.
        return Err(AbortReason::Policy(Ineligible::UnknownTarget));
    };
    let limits = facts.limits;
    policy::check_capacity(limits.target_load, target.capacity).map_err(AbortReason::Policy)?;
    if facts.host.migration_pending {
        return Err(AbortReason::MigrationPending);
    }
    if limits.in_flight >= u64::from(config.max_in_flight_migrations) {
        return Err(AbortReason::ConcurrencyLimited);
    }
    let rate = limits.rate.effective(now, config.rate_window_ms);
    if rate.commits >= config.max_commits_per_window {
        return Err(AbortReason::RateLimited);
    }
    if limits.attempt_rows >= config.bounds.max_attempt_rows {
        return Err(AbortReason::StoreFull);
    }
    // Every limit had room, so the commit below keeps each one (HO-S4 never overshoots).
    crate::invariant!(limits.target_load < target.capacity);
    crate::invariant!(limits.in_flight < u64::from(config.max_in_flight_migrations));
    crate::invariant!(rate.commits < config.max_commits_per_window);
    commit_writes(now, req, &facts.host, limits.rate, config)
        .ok_or(AbortReason::Policy(Ineligible::UnknownTarget))
}

/// HO-S4: the rows a commit of `req` writes. They depend on the host's facts and the stored
/// rate window, not on the counts, so a store may write them before [`decide_commit`] ran
/// (and roll back if it refuses). `None`: the target is unknown (the precheck refuses it).
#[must_use]
pub fn commit_writes(
    now: MonoMs,
    req: &HandoffRequest,
    host: &HostFacts,
    rate: RateRow,
    config: &StoreConfig,
) -> Option<CommitWrites> {
    let target = host.target_cell?;
    let current = host.assignment;
    let new_epoch = current.epoch.next();
    let rate = rate.effective(now, config.rate_window_ms);
    Some(CommitWrites {
        assignment: AssignmentRow {
            cell: req.target,
            epoch: new_epoch,
            incarnation: target.incarnation,
            ..current
        },
        reservation: ReservationRow {
            host: req.source.host,
            cell: req.target,
            expires_at: now.plus_ms(config.registration_timeout_ms),
        },
        attempt: AttemptRow {
            source: req.source,
            target: req.target,
            outcome: AttemptOutcome::Committed {
                new_epoch,
                registration: Registration::Pending,
            },
            recorded_at: now,
        },
        cooldown_until: now.plus_ms(config.policy.host_cooldown_ms),
        rate: RateRow {
            commits: rate.commits.saturating_add(1),
            ..rate
        },
    })
}

/// HO-A5: the drain fence's decision over the host's current row (read under its lock): the
/// row to write (generation bumped, so the old authority fails every re-check), or the answer
/// when nothing is written. Shared by the reference and the SQL stores.
pub fn drain_fence(
    authority: &SourceAuthority,
    current: Option<AssignmentRow>,
) -> Result<AssignmentRow, DrainWrite> {
    let Some(row) = current else {
        return Err(DrainWrite::NotCurrent);
    };
    if row.cell != authority.cell && row.epoch > authority.epoch {
        return Err(DrainWrite::AlreadyMoved { assigned: row.cell });
    }
    if authority.check_against(&authority_of(authority.host, &row)) != AuthorityCheck::Exact {
        return Err(DrainWrite::NotCurrent);
    }
    Ok(AssignmentRow {
        generation: row.generation.next(),
        ..row
    })
}

/// HO-L2: what a starting cell process may do with its cell's identity lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CellLease {
    /// Take the cell: a new incarnation, leased until `until`.
    Take {
        incarnation: Incarnation,
        until: MonoMs,
    },
    /// Another live process holds the cell: change nothing.
    Held {
        incarnation: Incarnation,
        until: MonoMs,
    },
}

/// HO-L2: one live process per cell id. `current` is the cell's row as read under its lock
/// (`None`: a cell never started): `(incarnation, lease held until)`. A lease that ends at or
/// before `now` has expired (its process stopped renewing, or released it on a graceful stop).
/// Shared by every store.
#[must_use]
pub fn cell_lease(current: Option<(Incarnation, MonoMs)>, now: MonoMs, lease_ms: u64) -> CellLease {
    match current {
        Some((incarnation, until)) if until > now => CellLease::Held { incarnation, until },
        Some((incarnation, _)) => CellLease::Take {
            incarnation: Incarnation(incarnation.0.saturating_add(1)),
            until: now.plus_ms(lease_ms),
        },
        None => CellLease::Take {
            incarnation: Incarnation(1),
            until: now.plus_ms(lease_ms),
        },
    }
}

/// HO-L2: a running process keeps its cell's lease. `current` is the cell's row as read under
/// its lock; the lease is renewed to `now + lease_ms` (the new `until`) while the cell's
/// incarnation is still `mine`, even if the lease ran out meanwhile: no successor took the cell
/// (it would have a newer incarnation), so this is still its one live process. Otherwise the
/// process lost the cell and must stop serving. Shared by every store.
pub fn cell_lease_renewal(
    current: Option<(Incarnation, MonoMs)>,
    mine: Incarnation,
    now: MonoMs,
    lease_ms: u64,
) -> Result<MonoMs, LeaseLost> {
    lease_holder_is(current, mine).map(|()| now.plus_ms(lease_ms))
}

/// HO-L2 / HO-L3: the lease end a graceful stop writes: long past (a successor may start at
/// once; a target in this state is not live), and not zero, which is a cell row no process
/// ever leased (a seeded store: not judged by `check_target_live`).
pub const RELEASED_LEASE_END: MonoMs = MonoMs(1);

/// HO-L2: a graceful stop ends the lease ([`RELEASED_LEASE_END`], so a successor may start at
/// once and no move targets the stopped cell), only if the cell is still `mine`: a process
/// never ends a successor's lease.
pub fn cell_lease_release(
    current: Option<(Incarnation, MonoMs)>,
    mine: Incarnation,
) -> Result<MonoMs, LeaseLost> {
    lease_holder_is(current, mine).map(|()| RELEASED_LEASE_END)
}

fn lease_holder_is(
    current: Option<(Incarnation, MonoMs)>,
    mine: Incarnation,
) -> Result<(), LeaseLost> {
    match current {
        Some((incarnation, _)) if incarnation == mine => Ok(()),
        Some((incarnation, _)) => Err(LeaseLost {
            holder: Some(incarnation),
        }),
        None => Err(LeaseLost { holder: None }),
    }
}

/// Setup: may a cell row be added or replaced? `exists`: the cell has a row; `cell_count`: the
/// cells stored (read under the lock every cell insert takes). Only a new cell counts against
/// `max_cells` (SCALE-1).
pub fn decide_upsert_cell(exists: bool, cell_count: u64, max_cells: u64) -> Result<(), StoreError> {
    if !exists && cell_count >= max_cells {
        return Err(StoreError::TooManyCells);
    }
    Ok(())
}

/// Setup (enrolment): the assignment row of a new host at `cell` (epoch 1, generation 1, the
/// cell's incarnation), from what a store read: the cell's row, whether the host has a row, and
/// whether the store has room for one more host (`room`: the host count is below
/// `StoreBounds::max_hosts`, read under the lock that guards the count — the reference's map,
/// or a SQL store's limit shard holding a host token, or every shard). Checked in this order;
/// the caller inserts the row. SCALE-1: a full store is `TooManyHosts`.
pub fn decide_insert_host(
    cell_row: Option<CellRow>,
    exists: bool,
    room: bool,
    cell: CellId,
    desktop_capable: bool,
) -> Result<AssignmentRow, StoreError> {
    let Some(cell_row) = cell_row else {
        return Err(StoreError::UnknownCell);
    };
    if exists {
        return Err(StoreError::HostExists);
    }
    if !room {
        return Err(StoreError::TooManyHosts);
    }
    Ok(AssignmentRow {
        cell,
        epoch: Epoch(1),
        incarnation: cell_row.incarnation,
        generation: Generation(1),
        desktop_capable,
    })
}

/// HO-A4 / HO-A6: a desktop control registers at `cell` with the process `incarnation`. Inputs
/// are the rows read under the host lock, then the cell's lock: the host's assignment (`None`:
/// unknown host; `cell_row` is then not looked at, so a store need not read it) and the cell's
/// row. Returns the host's new assignment row: same cell and epoch, the registering
/// incarnation, the generation bumped (a pending handoff of the old generation then fails its
/// re-check). The caller writes it, sets the cell's incarnation to `incarnation` (a restarted
/// process isolates its predecessor), and completes every reservation of (host, `cell`): the
/// reservation is released and its attempt's registration becomes `Registered`.
pub fn decide_register(
    current: Option<AssignmentRow>,
    cell_row: Option<CellRow>,
    cell: CellId,
    incarnation: Incarnation,
    desktop_capable: bool,
) -> Result<AssignmentRow, RegisterRefusal> {
    let Some(row) = current else {
        return Err(RegisterRefusal::UnknownHost);
    };
    let Some(cell_row) = cell_row else {
        return Err(RegisterRefusal::UnknownCell);
    };
    if row.cell != cell {
        return Err(RegisterRefusal::NotAssignedHere { assigned: row.cell });
    }
    if incarnation < cell_row.incarnation {
        return Err(RegisterRefusal::StaleIncarnation);
    }
    Ok(AssignmentRow {
        cell,
        epoch: row.epoch,
        incarnation,
        generation: row.generation.next(),
        desktop_capable,
    })
}

/// SCALE-2: how a registration locks its cell's row. Registrations of one cell must not queue
/// on that row one after another (a restarted cell re-registers every desktop at once), so
/// they share it; only a process start (which writes the incarnation under an exclusive lock)
/// excludes them. A registration that raises the cell's incarnation (a process newer than the
/// row) writes the row and takes the exclusive lock instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CellLock {
    Share,
    Exclusive,
}

/// SCALE-2: the lock a registration with `incarnation` takes, from the cell's row as read
/// before any lock (`seen`). Incarnations only grow, so a row seen at or above `incarnation`
/// stays so under the lock and the registration never writes it.
#[must_use]
pub fn register_cell_lock(seen: Option<CellRow>, incarnation: Incarnation) -> CellLock {
    match seen {
        Some(row) if row.incarnation >= incarnation => CellLock::Share,
        _ => CellLock::Exclusive,
    }
}

/// HO-A4: whether an accepted registration writes its cell's incarnation (it raises it).
#[must_use]
pub fn register_raises_cell(cell_row: &CellRow, registered: &AssignmentRow) -> bool {
    registered.incarnation > cell_row.incarnation
}

/// HO-A1 / HO-A2: what a locked reconciliation writes when the op id has no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FenceWrites {
    /// The terminal fence record of the op id (a late original commit answers from it).
    pub attempt: AttemptRow,
    /// The host's new assignment row, if the fence changes it.
    pub assignment: Option<AssignmentRow>,
}

/// HO-A1 / HO-A2: the decision of a locked reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReconcileDecision {
    /// The op id is recorded: its outcome (nothing written).
    Answer(TxnOutcome),
    /// Write these rows (and count the attempt row), then answer.
    Fence {
        writes: FenceWrites,
        answer: TxnOutcome,
    },
    /// `StoreBounds::max_attempt_rows` reached: the fence cannot be written, nothing is; the caller stays
    /// quarantined (never a rollback).
    StoreFull,
}

/// HO-A1: the part of a locked reconciliation that reads no global limit: the recorded outcome
/// of an op id that has a record (`current`: the host's authority under its lock). If this
/// answers, [`decide_reconcile`] answers the same whatever the attempt count is, so a store
/// may answer without taking its global lock.
#[must_use]
pub fn reconcile_precheck(
    req: &HandoffRequest,
    current: Option<&SourceAuthority>,
    recorded: Option<&AttemptRow>,
) -> Option<TxnOutcome> {
    recorded.map(|row| recorded_outcome(req, current, row))
}

/// HO-A1 / HO-A2: locked reconciliation by op id, over the rows read under the host lock (the
/// host's assignment, the op id's record) and, last, the attempt count under the global lock.
/// The recorded outcome if there is one; else a terminal fence record, so that a late original
/// commit of this op id fails its re-check, and the answer as if read from it. The caller has
/// checked the op id (an inconsistent one is a definitive rollback, nothing written).
///
/// HO-L1: if the claimed authority is exact, the fence also renews the host's authority
/// ([`fenced_authority`]: generation bumped, like the drain fence) in the same write. The
/// answer is `RolledBack { Fenced }`: the source reopens holding the renewed authority, and the
/// director's next pick derives a new op id, so the host is retried after the outage without
/// its desktop reconnecting. A late original commit then fails its re-check twice over (the
/// record, and the stale generation). A stale claim is fenced without touching the host.
#[must_use]
pub fn decide_reconcile(
    now: MonoMs,
    req: &HandoffRequest,
    current: Option<AssignmentRow>,
    recorded: Option<&AttemptRow>,
    attempt_rows: u64,
    max_attempt_rows: u64,
) -> ReconcileDecision {
    crate::invariant!(req.op_id_is_consistent(), "op id checked by the caller");
    let host = req.source.host;
    let authority = current.map(|row| authority_of(host, &row));
    if let Some(answer) = reconcile_precheck(req, authority.as_ref(), recorded) {
        return ReconcileDecision::Answer(answer);
    }
    if attempt_rows >= max_attempt_rows {
        return ReconcileDecision::StoreFull;
    }
    let exact = claim_check(&req.source, authority.as_ref()) == AuthorityCheck::Exact;
    let renewed = current.filter(|_| exact).map(|row| AssignmentRow {
        generation: fenced_authority(req.source).generation,
        ..row
    });
    let attempt = AttemptRow {
        source: req.source,
        target: req.target,
        outcome: if renewed.is_some() {
            AttemptOutcome::FencedRenewed
        } else {
            AttemptOutcome::FencedAbort
        },
        recorded_at: now,
    };
    // The answer as a later duplicate reads it from the rows written now.
    let after = renewed.map(|row| authority_of(host, &row)).or(authority);
    let answer = recorded_outcome(req, after.as_ref(), &attempt);
    crate::invariant_eq!(
        exact,
        answer
            == TxnOutcome::RolledBack {
                reason: AbortReason::Fenced
            },
        "an exact claim is fenced and renewed; a stale one reads the authority change"
    );
    ReconcileDecision::Fence {
        writes: FenceWrites {
            attempt,
            assignment: renewed,
        },
        answer,
    }
}

/// The source authority a host's assignment row stands for.
#[must_use]
pub fn authority_of(host: HostId, row: &AssignmentRow) -> SourceAuthority {
    SourceAuthority {
        cell: row.cell,
        host,
        epoch: row.epoch,
        incarnation: row.incarnation,
        generation: row.generation,
    }
}

// ----- HO-L4: history bounded by retention -----

/// HO-L4: an attempt record that has **ended**: a fence (`FencedAbort` or `FencedRenewed`),
/// or a commit whose registration is no longer pending (registered, or recovery started). A
/// pending commit is a migration still in flight (its reservation counts in `in_flight`): it
/// is never removed. An ended record never becomes pending again (a registration only moves
/// from pending), so "ended" read once stays true.
#[must_use]
pub fn attempt_ended(row: &AttemptRow) -> bool {
    !matches!(
        row.outcome,
        AttemptOutcome::Committed {
            registration: Registration::Pending,
            ..
        }
    )
}

/// HO-L4: the newest `recorded_at` a reap at `now` may remove: `now - retention_ms` (`None`:
/// the clock is not that far yet, nothing is old enough).
#[must_use]
pub fn reap_cutoff(now: MonoMs, retention_ms: u64) -> Option<MonoMs> {
    now.as_ms().checked_sub(retention_ms).map(MonoMs)
}

/// HO-L4: whether a reap with `cutoff` removes `row`: ended and recorded at or before the
/// cutoff.
#[must_use]
pub fn reapable(row: &AttemptRow, cutoff: MonoMs) -> bool {
    attempt_ended(row) && row.recorded_at <= cutoff
}

/// HO-L4: the records one reap removes: the [`reapable`] ones, oldest first (`recorded_at`,
/// then op id), at most `batch`. The SQL stores select the same rows with
/// `ORDER BY recorded_at_ms, op_id LIMIT batch`; the reference calls this.
///
/// Why removing them is safe (checked by `ho_l4_*` tests): after a **committed** record is
/// removed, a locked reconciliation of its op id finds no record and a claim that is no
/// longer exact (the commit moved the host: epoch + 1 at the target), so
/// [`decide_reconcile`] writes a `FencedAbort` record that renews nothing and answers
/// `AuthorityChanged` (with the store full it writes nothing and the caller stays
/// quarantined): never a rollback, never a fence of the host. After a **fenced** record
/// is removed, the original transaction cannot commit: its claim was stale when fenced
/// (`FencedAbort`) or the fence renewed the generation (`FencedRenewed`), and an authority
/// only moves forward (epoch and generation never decrease), so its re-check answers
/// `AuthorityChanged`.
#[must_use]
pub fn reap_selection<'a>(
    attempts: impl IntoIterator<Item = (&'a OpId, &'a AttemptRow)>,
    cutoff: MonoMs,
    batch: u32,
) -> Vec<OpId> {
    let mut old: Vec<(MonoMs, OpId)> = attempts
        .into_iter()
        .filter(|(_, row)| reapable(row, cutoff))
        .map(|(op, row)| (row.recorded_at, *op))
        .collect();
    old.sort_unstable();
    old.into_iter()
        .take(usize::try_from(batch).unwrap_or(usize::MAX))
        .map(|(_, op)| op)
        .collect()
}
