//! Reference assignment store: the bounded assignment transaction (HO-S4), locked
//! reconciliation by op id (HO-A1 / HO-A2), registration (HO-A4), the emergency-drain fence
//! (HO-A5) and bounded migration recovery (HO-A6).
//!
//! Each `&mut self` method is one transaction under the host lock: the in-memory store is
//! the serialisation point that SQL stores must match row for row. A method either writes all
//! of its rows or none (every check runs before the first write).
//!
//! Every decision is a pure function over the rows a store read under its locks, returning the
//! rows to write or the answer: the assignment transaction ([`recorded_outcome`],
//! [`claim_check`], [`commit_precheck`], [`decide_commit`], [`commit_writes`]), the locked
//! reconciliation ([`reconcile_precheck`], [`decide_reconcile`]), registration
//! ([`decide_register`]), setup ([`decide_upsert_cell`], [`decide_insert_host`]), the drain
//! fence ([`drain_fence`]) and the cell identity lease ([`cell_lease`], [`cell_lease_renewal`],
//! [`cell_lease_release`]). This store and the SQL stores call the same functions, so the check
//! order and the rows written are defined once.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::{AuthorityCheck, AuthorityField, CellId, Epoch, HostId, Incarnation, OpId};
use super::ids::{Generation, SourceAuthority};
use super::policy::{self, HandoffRequest, Ineligible, PolicyConfig};
use crate::MonoMs;

/// SCALE-1: the default bounds of a store, sized for a fleet of 1,000,000 hosts over 100 cells
/// with room to grow (`StoreBounds::FLEET`); the operator's flags replace them (`--max-hosts`,
/// `--max-cells`, `--max-attempt-rows`). Reaching one is a named refusal, never a panic.
pub const DEFAULT_MAX_HOSTS: u64 = 4_194_304;
pub const DEFAULT_MAX_CELLS: u64 = 1_024;
pub const DEFAULT_MAX_ATTEMPT_ROWS: u64 = 16_777_216;
/// SCALE-1: the largest value a bound may be set to (ids and counts stay far inside `i64`).
pub const MAX_BOUND: u64 = 1 << 40;
/// At most this many expired migrations are recovered per `expire_migrations` call.
pub const MAX_EXPIRED_PER_CALL: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoreConfig {
    /// HO-A5: the persistent enable switch (disabling stops new commits; reconciliation and
    /// registration still run).
    pub enabled: bool,
    pub policy: PolicyConfig,
    /// HO-S4: global concurrency limit (live migration reservations).
    pub max_in_flight_migrations: u32,
    /// HO-S4: global rate limit: at most `max_commits_per_window` commits per window.
    pub rate_window_ms: u64,
    pub max_commits_per_window: u32,
    /// HO-A6: a committed migration whose desktop has not registered at the target by then
    /// enters ordinary bounded recovery and its reservation is released.
    pub registration_timeout_ms: u64,
    /// SCALE-1: how many hosts, cells and attempt rows the store holds.
    pub bounds: StoreBounds,
}

/// SCALE-1: the store's size bounds, part of its settings (one value for the deployment, so
/// every process refuses at the same point, and a change revokes the tokens dealt under the
/// old value). Each is checked under the lock that guards the count it bounds, so it is never
/// overshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoreBounds {
    /// Hosts (assignment rows) in the store, all cells together.
    pub max_hosts: u64,
    /// Cells (a new cell id only: an existing one is never refused).
    pub max_cells: u64,
    /// Attempt rows (HO-A1's durable records: one per commit or fence).
    pub max_attempt_rows: u64,
}

/// SCALE-1 / SCALE-4: the limits an operator sets with a cell's flags, written into the
/// store's settings when the cell starts (the rest of the settings are left as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LimitSettings {
    pub max_in_flight_migrations: u32,
    pub rate_window_ms: u64,
    pub max_commits_per_window: u32,
    pub bounds: StoreBounds,
}

impl StoreConfig {
    /// These settings with `limits` in force.
    #[must_use]
    pub fn with_limits(self, limits: &LimitSettings) -> StoreConfig {
        StoreConfig {
            max_in_flight_migrations: limits.max_in_flight_migrations,
            rate_window_ms: limits.rate_window_ms,
            max_commits_per_window: limits.max_commits_per_window,
            bounds: limits.bounds,
            ..self
        }
    }
}

/// SCALE-1: a bound out of range (zero, or past [`MAX_BOUND`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, thiserror::Error)]
#[error("{name} must be between 1 and {max}, got {value}", max = MAX_BOUND)]
pub struct BoundOutOfRange {
    pub name: &'static str,
    pub value: u64,
}

impl StoreBounds {
    /// Sized for 1,000,000 hosts over 100 cells, with four times the hosts as headroom.
    pub const FLEET: StoreBounds = StoreBounds {
        max_hosts: DEFAULT_MAX_HOSTS,
        max_cells: DEFAULT_MAX_CELLS,
        max_attempt_rows: DEFAULT_MAX_ATTEMPT_ROWS,
    };

    /// SCALE-1: the one place the bounds are checked (flags, settings rows).
    pub fn validate(&self) -> Result<(), BoundOutOfRange> {
        for (name, value) in [
            ("max_hosts", self.max_hosts),
            ("max_cells", self.max_cells),
            ("max_attempt_rows", self.max_attempt_rows),
        ] {
            if value == 0 || value > MAX_BOUND {
                return Err(BoundOutOfRange { name, value });
            }
        }
        Ok(())
    }
}

impl Default for StoreBounds {
    fn default() -> Self {
        StoreBounds::FLEET
    }
}

/// Row: a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CellRow {
    pub capacity: u32,
    /// HO-C1: the cell advertises the idle-handoff capability.
    pub handoff_capable: bool,
    /// Current process incarnation of the cell (a restart bumps it).
    pub incarnation: Incarnation,
}

/// Row: the assignment of one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AssignmentRow {
    pub cell: CellId,
    pub epoch: Epoch,
    pub incarnation: Incarnation,
    pub generation: Generation,
    /// HO-C1: the desktop negotiated the idle-handoff capability at its last registration.
    pub desktop_capable: bool,
}

/// Row: a target capacity reservation of a committed, not yet registered migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReservationRow {
    pub host: HostId,
    pub cell: CellId,
    pub expires_at: MonoMs,
}

/// What happened to a committed migration after the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Registration {
    /// Reservation held until the desktop registers at the target.
    Pending,
    /// The desktop registered at the target; reservation released.
    Registered,
    /// HO-A6: registration did not happen in time: ordinary bounded recovery, reservation
    /// released, the assignment stays at the target (the source is never kept).
    RecoveryStarted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttemptOutcome {
    Committed {
        new_epoch: Epoch,
        registration: Registration,
    },
    /// HO-A1 / HO-A2: written by a locked reconciliation that found no attempt while the claimed
    /// authority was already stale (or, before HO-L1, whatever it was): a late original commit
    /// of this op id fails its re-check. The host's row was not touched.
    FencedAbort,
    /// HO-A1 / HO-A2 / HO-L1: written by a locked reconciliation that found no attempt while the
    /// claimed authority was exact; the same write renewed the host's authority to
    /// [`fenced_authority`] of the claim (generation bumped), so the director's next pick
    /// derives a new op id. Kept apart from `FencedAbort` because a drain fence or a
    /// registration also bumps the generation by one: only this record proves that the
    /// renewed authority is the fence's own.
    FencedRenewed,
}

/// Row: the durable record of an operation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttemptRow {
    pub source: SourceAuthority,
    pub target: CellId,
    pub outcome: AttemptOutcome,
    pub recorded_at: MonoMs,
}

/// Row: the global rate window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct RateRow {
    pub window_start: MonoMs,
    pub commits: u32,
}

impl RateRow {
    /// HO-S4: the window as of `now`: a window that ended (or starts in the future: a clock
    /// step back) is replaced by an empty one starting at `now`.
    #[must_use]
    pub fn effective(self, now: MonoMs, rate_window_ms: u64) -> RateRow {
        if now.since_ms(self.window_start) >= rate_window_ms || now < self.window_start {
            RateRow {
                window_start: now,
                commits: 0,
            }
        } else {
            self
        }
    }
}

/// Why a transaction rolled back while the exact source authority still held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AbortReason {
    /// The op id is not the UUIDv5 of the claimed authority and target.
    InvalidOpId,
    /// HO-A1: this op id was fenced by a locked reconciliation.
    Fenced,
    /// HO-3 / HO-C1 re-checked under the lock.
    Policy(Ineligible),
    /// HO-S4: global rate limit.
    RateLimited,
    /// HO-S4: global concurrency limit.
    ConcurrencyLimited,
    /// SCALE-1: `StoreBounds::max_attempt_rows` reached.
    StoreFull,
    /// An earlier committed move of this host still waits for its target registration.
    MigrationPending,
}

/// HO-S5 / HO-S6: the durable outcome of an operation, as a transaction or a locked
/// reconciliation establishes it. The three variants are the source's three terminal paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnOutcome {
    /// HO-S5: committed now, or earlier (a duplicate returns the recorded result: HO-A1).
    Committed { target: CellId, new_epoch: Epoch },
    /// HO-S6: explicitly not committed and the exact source authority is unchanged: the
    /// source reopens. Nothing was reserved.
    RolledBack { reason: AbortReason },
    /// HO-S6: not committed and the source authority changed (or the request is older:
    /// `Superseded`): retire the stale source.
    AuthorityChanged { check: AuthorityCheck },
}

impl TxnOutcome {
    #[must_use]
    pub fn is_committed(&self) -> bool {
        matches!(self, TxnOutcome::Committed { .. })
    }
}

/// Why a registration is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegisterRefusal {
    UnknownHost,
    UnknownCell,
    /// HO-A4: the host is assigned elsewhere (a committed handoff won): old ownership refused.
    NotAssignedHere {
        assigned: CellId,
    },
    /// HO-A4 / HO-A6: a process older than the cell's current incarnation.
    StaleIncarnation,
}

/// HO-A5: result of the emergency-drain write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DrainWrite {
    /// The source authority was current and is now fenced (generation bumped): a pending
    /// handoff transaction fails its re-check.
    Fenced { authority: SourceAuthority },
    /// A committed handoff already moved the host: it follows its result.
    AlreadyMoved { assigned: CellId },
    /// The claimed authority was already stale (nothing written).
    NotCurrent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StoreError {
    TooManyHosts,
    TooManyCells,
    UnknownCell,
    HostExists,
}

/// HO-L2: a starting process is refused its cell: another live process holds the cell's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, thiserror::Error)]
#[error("cell {} is held by a live process (incarnation {}, lease until {} ms): refusing to start a second process with the same cell id; it becomes free when that process stops or stops renewing its lease", cell.0, incarnation.0, until.as_ms())]
pub struct CellHeld {
    pub cell: CellId,
    pub incarnation: Incarnation,
    pub until: MonoMs,
}

/// Why the reference store does not start a cell process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StartRefusal {
    /// HO-L2: another live process holds the cell.
    Held(CellHeld),
    /// SCALE-1: `StoreBounds::max_cells` reached (a new cell id only).
    TooManyCells,
}

/// HO-L2: the cell's lease is no longer this process's: a newer incarnation took the cell
/// (`holder`), or its row is gone (`None`). Nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseLost {
    pub holder: Option<Incarnation>,
}

/// A broken store invariant (checked by tests and the model checker after every step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StoreViolation {
    ReservationWithoutPendingCommit(OpId),
    ReservationNotAtAssignedCell(OpId),
    PendingCommitWithoutReservation(OpId),
    TwoReservationsForHost(HostId),
    TooManyReservations,
    AssignmentToUnknownCell(HostId),
    CommitEpochAhead(OpId),
}

/// HO-S4: what the commit-time checks read about the request's own host, read under the host
/// lock. The assignment, cooldown and reservation of a host change only under its lock; the
/// cell rows are configuration (a commit never locks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostFacts {
    /// The host's current assignment row; the claimed authority was found exact against it.
    pub assignment: AssignmentRow,
    /// The claimed source cell advertises the capability (`false` when the cell is unknown).
    pub source_cell_capable: bool,
    /// The target cell's row (`None`: unknown target).
    pub target_cell: Option<CellRow>,
    pub cooldown_until: Option<MonoMs>,
    /// The host holds a reservation: an earlier move still waits for its registration.
    pub migration_pending: bool,
}

/// HO-S4: the values every commit changes, so two commits must not read them concurrently: a
/// SQL store reads them only after it took the global limits lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LimitFacts {
    /// Hosts assigned to the target cell (committed moves count at once).
    pub target_load: u32,
    /// Live reservations (all hosts).
    pub in_flight: u64,
    /// The stored rate window (not yet rolled over to `now`).
    pub rate: RateRow,
    /// Attempt rows recorded (bounded by `StoreBounds::max_attempt_rows`).
    pub attempt_rows: u64,
}

/// Everything the commit-time checks read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommitFacts {
    pub host: HostFacts,
    pub limits: LimitFacts,
}

/// HO-S4: every row a commit writes. The reference applies them to its maps; a SQL store
/// writes them as they are (plus its attempt-row counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommitWrites {
    /// The host's new assignment: the target, epoch + 1, the target's incarnation.
    pub assignment: AssignmentRow,
    pub reservation: ReservationRow,
    pub attempt: AttemptRow,
    pub cooldown_until: MonoMs,
    /// The rate window with this commit counted.
    pub rate: RateRow,
}

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

/// The reference assignment store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AssignmentStore {
    config: StoreConfig,
    cells: BTreeMap<CellId, CellRow>,
    assignments: BTreeMap<HostId, AssignmentRow>,
    reservations: BTreeMap<OpId, ReservationRow>,
    attempts: BTreeMap<OpId, AttemptRow>,
    cooldowns: BTreeMap<HostId, MonoMs>,
    rate: RateRow,
    /// HO-L2: the end of each started cell's identity lease (absent: never started).
    leases: BTreeMap<CellId, MonoMs>,
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

/// HO-L2: a graceful stop ends the lease (the new `until` is zero, so a successor may start at
/// once), only if the cell is still `mine`: a process never ends a successor's lease.
pub fn cell_lease_release(
    current: Option<(Incarnation, MonoMs)>,
    mine: Incarnation,
) -> Result<MonoMs, LeaseLost> {
    lease_holder_is(current, mine).map(|()| MonoMs::ZERO)
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

impl AssignmentStore {
    #[must_use]
    pub fn new(config: StoreConfig) -> AssignmentStore {
        AssignmentStore {
            config,
            cells: BTreeMap::new(),
            assignments: BTreeMap::new(),
            reservations: BTreeMap::new(),
            attempts: BTreeMap::new(),
            cooldowns: BTreeMap::new(),
            rate: RateRow::default(),
            leases: BTreeMap::new(),
        }
    }

    #[must_use]
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// HO-A5: the persistent disable switch.
    pub fn set_enabled(&mut self, enabled: bool) {
        self.config.enabled = enabled;
    }

    /// SCALE-1 / SCALE-4: the operator's limits take effect (a cell's start).
    pub fn set_limits(&mut self, limits: &LimitSettings) {
        self.config = self.config.with_limits(limits);
    }

    /// Setup: add or replace a cell row (its lease, if any, is kept: setup is not a process).
    pub fn upsert_cell(&mut self, cell: CellId, row: CellRow) -> Result<(), StoreError> {
        decide_upsert_cell(
            self.cells.contains_key(&cell),
            count(self.cells.len()),
            self.config.bounds.max_cells,
        )?;
        self.cells.insert(cell, row);
        Ok(())
    }

    /// HO-L2: a cell process starts: [`cell_lease`] over the cell's row and lease. Takes the
    /// cell (a new incarnation, the row refreshed, leased until `now + lease_ms`) unless another
    /// live process holds it (nothing written). A cell set up by `upsert_cell` alone has no
    /// lease: it is free.
    pub fn start_cell(
        &mut self,
        cell: CellId,
        capacity: u32,
        handoff_capable: bool,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<Incarnation, StartRefusal> {
        let (incarnation, until) = match cell_lease(self.lease_of(cell), now, lease_ms) {
            CellLease::Held { incarnation, until } => {
                return Err(StartRefusal::Held(CellHeld {
                    cell,
                    incarnation,
                    until,
                }));
            }
            CellLease::Take { incarnation, until } => (incarnation, until),
        };
        let row = CellRow {
            capacity,
            handoff_capable,
            incarnation,
        };
        self.upsert_cell(cell, row)
            .map_err(|_| StartRefusal::TooManyCells)?;
        self.leases.insert(cell, until);
        Ok(incarnation)
    }

    /// HO-L2: the running process `incarnation` keeps its cell for another `lease_ms`
    /// ([`cell_lease_renewal`]): the new end of the lease, or the cell is lost.
    pub fn renew_cell_lease(
        &mut self,
        cell: CellId,
        incarnation: Incarnation,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<MonoMs, LeaseLost> {
        let until = cell_lease_renewal(self.lease_of(cell), incarnation, now, lease_ms)?;
        self.leases.insert(cell, until);
        Ok(until)
    }

    /// HO-L2: a graceful stop ends the lease ([`cell_lease_release`]).
    pub fn release_cell_lease(
        &mut self,
        cell: CellId,
        incarnation: Incarnation,
    ) -> Result<(), LeaseLost> {
        let until = cell_lease_release(self.lease_of(cell), incarnation)?;
        self.leases.insert(cell, until);
        Ok(())
    }

    /// HO-L2: a cell's incarnation and the end of its lease (zero: never leased, as a SQL row
    /// defaults to), as a store reads them under the cell's lock.
    #[must_use]
    pub fn lease_of(&self, cell: CellId) -> Option<(Incarnation, MonoMs)> {
        self.cells.get(&cell).map(|row| {
            let until = self.leases.get(&cell).copied().unwrap_or(MonoMs::ZERO);
            (row.incarnation, until)
        })
    }

    /// Setup: assign a new host to `cell` ([`decide_insert_host`]).
    pub fn insert_host(
        &mut self,
        host: HostId,
        cell: CellId,
        desktop_capable: bool,
    ) -> Result<SourceAuthority, StoreError> {
        let row = decide_insert_host(
            self.cells.get(&cell).copied(),
            self.assignments.contains_key(&host),
            count(self.assignments.len()) < self.config.bounds.max_hosts,
            cell,
            desktop_capable,
        )?;
        self.assignments.insert(host, row);
        Ok(authority_of(host, &row))
    }

    #[must_use]
    pub fn cell(&self, cell: CellId) -> Option<&CellRow> {
        self.cells.get(&cell)
    }

    #[must_use]
    pub fn assignment(&self, host: HostId) -> Option<&AssignmentRow> {
        self.assignments.get(&host)
    }

    /// The current exact authority of a host.
    #[must_use]
    pub fn authority(&self, host: HostId) -> Option<SourceAuthority> {
        self.assignments.get(&host).map(|r| authority_of(host, r))
    }

    #[must_use]
    pub fn attempt(&self, op_id: OpId) -> Option<&AttemptRow> {
        self.attempts.get(&op_id)
    }

    #[must_use]
    pub fn reservation(&self, op_id: OpId) -> Option<&ReservationRow> {
        self.reservations.get(&op_id)
    }

    pub fn reservations(&self) -> impl Iterator<Item = (&OpId, &ReservationRow)> {
        self.reservations.iter()
    }

    pub fn attempts(&self) -> impl Iterator<Item = (&OpId, &AttemptRow)> {
        self.attempts.iter()
    }

    #[must_use]
    pub fn cooldown_until(&self, host: HostId) -> Option<MonoMs> {
        self.cooldowns.get(&host).copied()
    }

    #[must_use]
    pub fn rate(&self) -> RateRow {
        self.rate
    }

    /// Hosts assigned to `cell` (committed moves count at once: the target's slot is taken
    /// at commit).
    #[must_use]
    pub fn cell_load(&self, cell: CellId) -> u32 {
        let n = self.assignments.values().filter(|r| r.cell == cell).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The recorded outcome of an op id, with the authority check for fenced aborts.
    fn recorded_outcome(&self, req: &HandoffRequest, row: &AttemptRow) -> TxnOutcome {
        recorded_outcome(req, self.authority(req.source.host).as_ref(), row)
    }

    /// HO-S4: the bounded assignment transaction. Re-checks the op id, the exact authority and
    /// the director's policy; then, atomically, reserves the target, moves the assignment
    /// (epoch + 1), starts the host cooldown, counts the rate window and records the attempt.
    /// HO-A1: an op id already recorded returns the recorded result and never migrates twice.
    ///
    /// The steps are the ones a SQL store runs: the host's facts, [`commit_precheck`], the
    /// global [`LimitFacts`] (read last: a SQL store reads them under its global lock), then
    /// [`decide_commit`] and its rows.
    pub fn run_transaction(&mut self, now: MonoMs, req: &HandoffRequest) -> TxnOutcome {
        if !req.op_id_is_consistent() {
            return TxnOutcome::RolledBack {
                reason: AbortReason::InvalidOpId,
            };
        }
        if let Some(row) = self.attempts.get(&req.op_id) {
            return self.recorded_outcome(req, row);
        }
        let host = req.source.host;
        let current = self.authority(host);
        let check = claim_check(&req.source, current.as_ref());
        if check != AuthorityCheck::Exact {
            return TxnOutcome::AuthorityChanged { check };
        }
        let Some(assignment) = self.assignments.get(&host).copied() else {
            crate::invariant!(false, "authority check passed for an unknown host");
            return TxnOutcome::AuthorityChanged {
                check: AuthorityCheck::Mismatch(AuthorityField::Host),
            };
        };
        let host_facts = HostFacts {
            assignment,
            source_cell_capable: self
                .cells
                .get(&req.source.cell)
                .is_some_and(|c| c.handoff_capable),
            target_cell: self.cells.get(&req.target).copied(),
            cooldown_until: self.cooldowns.get(&host).copied(),
            migration_pending: self.reservations.values().any(|r| r.host == host),
        };
        if let Err(reason) = commit_precheck(now, req, &host_facts, &self.config) {
            return TxnOutcome::RolledBack { reason };
        }
        let facts = CommitFacts {
            host: host_facts,
            limits: LimitFacts {
                target_load: self.cell_load(req.target),
                in_flight: u64::try_from(self.reservations.len()).unwrap_or(u64::MAX),
                rate: self.rate,
                attempt_rows: count(self.attempts.len()),
            },
        };
        let writes = match decide_commit(now, req, &facts, &self.config) {
            Ok(writes) => writes,
            Err(reason) => return TxnOutcome::RolledBack { reason },
        };
        // All checks passed: write every row (nothing above wrote).
        self.assignments.insert(host, writes.assignment);
        self.reservations.insert(req.op_id, writes.reservation);
        self.attempts.insert(req.op_id, writes.attempt);
        self.cooldowns.insert(host, writes.cooldown_until);
        self.rate = writes.rate;
        crate::invariant_eq!(self.check_invariants(), Ok(()));
        TxnOutcome::Committed {
            target: req.target,
            new_epoch: writes.assignment.epoch,
        }
    }

    /// HO-A1 / HO-A2: locked reconciliation by op id ([`decide_reconcile`]). Returns the
    /// recorded outcome; if no attempt exists, writes a terminal fence record first, so that a
    /// late original commit of this op id fails its re-check. `None` means the fence could not
    /// be written (store full): the caller stays quarantined.
    pub fn reconcile(&mut self, now: MonoMs, req: &HandoffRequest) -> Option<TxnOutcome> {
        if !req.op_id_is_consistent() {
            // Nothing can ever commit under an inconsistent id: a definitive rollback.
            return Some(TxnOutcome::RolledBack {
                reason: AbortReason::InvalidOpId,
            });
        }
        let host = req.source.host;
        let decision = decide_reconcile(
            now,
            req,
            self.assignments.get(&host).copied(),
            self.attempts.get(&req.op_id),
            count(self.attempts.len()),
            self.config.bounds.max_attempt_rows,
        );
        match decision {
            ReconcileDecision::Answer(answer) => Some(answer),
            ReconcileDecision::StoreFull => None,
            ReconcileDecision::Fence { writes, answer } => {
                self.attempts.insert(req.op_id, writes.attempt);
                if let Some(row) = writes.assignment {
                    self.assignments.insert(host, row);
                }
                crate::invariant_eq!(self.check_invariants(), Ok(()));
                Some(answer)
            }
        }
    }

    /// HO-A4 / HO-A6: a desktop control registers at `cell` (replacement control, source
    /// restart, or arrival at the target), serialised with the handoff under the host lock
    /// ([`decide_register`]). Bumps the generation (a pending handoff of the old generation then
    /// fails its re-check) and completes a pending migration to this cell (its reservation is
    /// released).
    pub fn register_control(
        &mut self,
        now: MonoMs,
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        desktop_capable: bool,
    ) -> Result<SourceAuthority, RegisterRefusal> {
        let _ = now;
        let new_row = decide_register(
            self.assignments.get(&host).copied(),
            self.cells.get(&cell).copied(),
            cell,
            incarnation,
            desktop_capable,
        )?;
        if let Some(c) = self.cells.get_mut(&cell) {
            c.incarnation = new_row.incarnation;
        }
        self.assignments.insert(host, new_row);
        let done: Vec<OpId> = self
            .reservations
            .iter()
            .filter(|(_, r)| r.host == host && r.cell == cell)
            .map(|(op, _)| *op)
            .collect();
        for op in done {
            self.reservations.remove(&op);
            self.set_registration(op, Registration::Registered);
        }
        crate::invariant_eq!(self.check_invariants(), Ok(()));
        Ok(authority_of(host, &new_row))
    }

    fn set_registration(&mut self, op: OpId, registration: Registration) {
        if let Some(AttemptRow {
            outcome: AttemptOutcome::Committed {
                registration: r, ..
            },
            ..
        }) = self.attempts.get_mut(&op)
        {
            crate::invariant_eq!(*r, Registration::Pending);
            *r = registration;
        } else {
            crate::invariant!(false, "reservation without a committed attempt");
        }
    }

    /// HO-A5: emergency drain / auth enforcement joins the host-lock serialisation: if the
    /// claimed authority is current, bump the generation so any pending handoff of it fails.
    pub fn emergency_drain(&mut self, authority: &SourceAuthority) -> DrainWrite {
        match drain_fence(authority, self.assignments.get(&authority.host).copied()) {
            Ok(new_row) => {
                self.assignments.insert(authority.host, new_row);
                DrainWrite::Fenced {
                    authority: authority_of(authority.host, &new_row),
                }
            }
            Err(answer) => answer,
        }
    }

    /// HO-A6: ordinary bounded migration recovery: reservations whose desktop has not
    /// registered at the target by `expires_at` are released (at most
    /// `MAX_EXPIRED_PER_CALL` per call). The assignment stays at the target.
    pub fn expire_migrations(&mut self, now: MonoMs) -> Vec<OpId> {
        let expired: Vec<OpId> = self
            .reservations
            .iter()
            .filter(|(_, r)| r.expires_at <= now)
            .map(|(op, _)| *op)
            .take(MAX_EXPIRED_PER_CALL)
            .collect();
        for op in &expired {
            self.reservations.remove(op);
            self.set_registration(*op, Registration::RecoveryStarted);
        }
        crate::invariant_eq!(self.check_invariants(), Ok(()));
        expired
    }

    /// Store invariants: every reservation belongs to exactly one committed, unregistered
    /// migration at the host's assigned cell, and vice versa; bounds hold.
    pub fn check_invariants(&self) -> Result<(), StoreViolation> {
        let mut hosts_with_reservation = std::collections::BTreeSet::new();
        for (op, res) in &self.reservations {
            let Some(attempt) = self.attempts.get(op) else {
                return Err(StoreViolation::ReservationWithoutPendingCommit(*op));
            };
            let pending = matches!(
                attempt.outcome,
                AttemptOutcome::Committed {
                    registration: Registration::Pending,
                    ..
                }
            );
            if !pending || attempt.source.host != res.host || attempt.target != res.cell {
                return Err(StoreViolation::ReservationWithoutPendingCommit(*op));
            }
            if self.assignments.get(&res.host).map(|r| r.cell) != Some(res.cell) {
                return Err(StoreViolation::ReservationNotAtAssignedCell(*op));
            }
            if !hosts_with_reservation.insert(res.host) {
                return Err(StoreViolation::TwoReservationsForHost(res.host));
            }
        }
        let limit = usize::try_from(self.config.max_in_flight_migrations).unwrap_or(usize::MAX);
        if self.reservations.len() > limit {
            return Err(StoreViolation::TooManyReservations);
        }
        for (op, attempt) in &self.attempts {
            if let AttemptOutcome::Committed {
                new_epoch,
                registration,
            } = attempt.outcome
            {
                if registration == Registration::Pending && !self.reservations.contains_key(op) {
                    return Err(StoreViolation::PendingCommitWithoutReservation(*op));
                }
                let current = self.assignments.get(&attempt.source.host).map(|r| r.epoch);
                if current.is_none_or(|e| e < new_epoch) {
                    return Err(StoreViolation::CommitEpochAhead(*op));
                }
            }
        }
        for (host, row) in &self.assignments {
            if !self.cells.contains_key(&row.cell) {
                return Err(StoreViolation::AssignmentToUnknownCell(*host));
            }
        }
        Ok(())
    }
}

/// A map's length as the `u64` a SQL count is (saturating: a length never exceeds it).
fn count(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}
