//! Row types, settings and bounds, errors and answers of the assignment store (HO-S4, HO-A1,
//! HO-A2, HO-A4..A6, HO-L2, SCALE-1): the shapes every store reads and writes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::handoff::ids::{AuthorityCheck, CellId, Epoch, HostId, Incarnation, OpId};
use crate::handoff::ids::{Generation, SourceAuthority};
use crate::handoff::policy::{Ineligible, PolicyConfig};
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
    /// HO-3 / HO-L4: how long a host that moved is not moved again, as the store re-checks it
    /// under the host lock (the director's `--host-cooldown-ms` is its own read-only check).
    pub host_cooldown_ms: u64,
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
            policy: PolicyConfig {
                host_cooldown_ms: limits.host_cooldown_ms,
                ..self.policy
            },
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

impl AbortReason {
    /// HO-L4: the stable name operators and dashboards see (a metric label, a log field, the
    /// `reason` of a director's result): never the `Debug` text.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            AbortReason::InvalidOpId => "invalid_op_id",
            AbortReason::Fenced => "fenced",
            AbortReason::Policy(why) => why.name(),
            AbortReason::RateLimited => "rate_limited",
            AbortReason::ConcurrencyLimited => "concurrency_limited",
            AbortReason::StoreFull => "store_full",
            AbortReason::MigrationPending => "migration_pending",
        }
    }

    /// HO-L4: a refusal that a later attempt of the same op id may not meet: a limit, a bound
    /// or a policy re-checked under the lock, each of which clears with time. Nothing was
    /// recorded for such an op id, so a new attempt of it is not a second migration (HO-A1).
    /// `Fenced` (the op id is recorded, it can never commit) and `InvalidOpId` never clear.
    #[must_use]
    pub fn clears(self) -> bool {
        match self {
            AbortReason::InvalidOpId | AbortReason::Fenced => false,
            AbortReason::Policy(_)
            | AbortReason::RateLimited
            | AbortReason::ConcurrencyLimited
            | AbortReason::StoreFull
            | AbortReason::MigrationPending => true,
        }
    }
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

    /// HO-L4: the refusal of a store that rolled the move back for a reason that clears
    /// ([`AbortReason::clears`]): the move is tried again, with a new attempt.
    #[must_use]
    pub fn refusal(&self) -> Option<AbortReason> {
        match self {
            TxnOutcome::RolledBack { reason } if reason.clears() => Some(*reason),
            _ => None,
        }
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
    /// HO-L3: the end of the target cell's lease (zero: never leased, or unknown).
    #[serde(default)]
    pub target_lease_until: MonoMs,
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

/// Every table of an assignment store, in the reference's shapes: the one dump the reference
/// ([`super::AssignmentStore::snapshot`]) and the SQL stores (their row dump) both produce, so
/// the differential tests compare them row for row. `leases` holds the cells whose identity
/// lease ends after zero (a released lease, or a cell never started, has none).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoreSnapshot {
    pub config: StoreConfig,
    pub cells: BTreeMap<CellId, CellRow>,
    pub assignments: BTreeMap<HostId, AssignmentRow>,
    pub reservations: BTreeMap<OpId, ReservationRow>,
    pub attempts: BTreeMap<OpId, AttemptRow>,
    pub cooldowns: BTreeMap<HostId, MonoMs>,
    pub rate: RateRow,
    pub leases: BTreeMap<CellId, MonoMs>,
}
