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
/// At most this many expired migrations are recovered per `expire_migrations` call (the
/// reference's call without a bound of its own; the director passes its
/// [`Retention::max_expired_per_pass`]).
pub const MAX_EXPIRED_PER_CALL: usize = 256;

/// HO-L4: the default attempt retention (`--attempt-retention-ms`): 24 h. At the default
/// maximum rate of 100 moves a second (6,000 per minute, `--max-commits-per-window`) a day
/// leaves 100 × 86,400 = 8,640,000 attempt rows, about half of
/// [`DEFAULT_MAX_ATTEMPT_ROWS`] (16,777,216): the bound is never reached at the default rate,
/// with room for the fences a store outage adds.
pub const DEFAULT_ATTEMPT_RETENTION_MS: u64 = 86_400_000;
/// HO-L4: the shortest retention allowed whatever the settings: 1 h. It exceeds every window
/// in which a reconciliation or a late transaction of an op id may still run against the
/// store (a store transaction is bounded by `--db-txn-timeout-ms`, at most 10 minutes; a
/// cell's request and reconcile timeouts and a director's request timeout are seconds); the
/// registration timeout is checked on top (see [`check_retention`]).
pub const MIN_ATTEMPT_RETENTION_MS: u64 = 3_600_000;
/// HO-L4: the longest retention (366 days): past it the history is no longer bounded in
/// any useful sense.
pub const MAX_ATTEMPT_RETENTION_MS: u64 = 366 * 86_400_000;
/// HO-L4: attempt records removed per pass by default (`--reap-batch`): more than a pass can
/// add at the default maximum rate (100 moves a second × the 10 s default interval = 1,000),
/// so the history shrinks back to the retention window after a burst.
pub const DEFAULT_REAP_BATCH: u32 = 2_000;
/// HO-L4: the largest batch: one short transaction (a few hundred ms of deletes on
/// PostgreSQL at most), well inside the default 3 s transaction timeout.
pub const MAX_REAP_BATCH: u32 = 50_000;
/// HO-L4: expired migrations recovered per pass by default (`--max-expired-per-pass`): as many
/// as a pass can fill at the default rate (1,000), twice over, so in-flight slots are freed at
/// least at the rate they fill.
pub const DEFAULT_MAX_EXPIRED_PER_PASS: u32 = 2_000;
/// HO-L4: the largest `--max-expired-per-pass` (each is one short transaction of its own).
pub const MAX_EXPIRED_PER_PASS: u32 = 100_000;

/// HO-L4: what the director removes and frees once per pass: attempt records older than
/// `attempt_retention_ms` that no reconciliation can still need, at most `reap_batch` of them
/// in one transaction, and at most `max_expired_per_pass` expired migrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Retention {
    pub attempt_retention_ms: u64,
    pub reap_batch: u32,
    pub max_expired_per_pass: u32,
}

/// HO-L4: a window in which a reconciliation or a late transaction of an op id may still need
/// its attempt record: the retention must exceed each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RetentionWindow {
    /// [`MIN_ATTEMPT_RETENTION_MS`]: above every store transaction and request timeout.
    Floor,
    /// The store's `registration_timeout_ms` (HO-A6).
    RegistrationTimeout,
    /// A director's re-sends of one request: `--request-timeout-ms` × (`--retries` + 1).
    DirectorRequests,
    /// One store transaction: `--db-txn-timeout-ms`.
    StoreTransaction,
}

impl std::fmt::Display for RetentionWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RetentionWindow::Floor => "the 1 h floor",
            RetentionWindow::RegistrationTimeout => "the store's registration timeout",
            RetentionWindow::DirectorRequests => {
                "the director's request window (--request-timeout-ms x (--retries + 1))"
            }
            RetentionWindow::StoreTransaction => "--db-txn-timeout-ms",
        })
    }
}

/// HO-L4: a retention or batch the director refuses (a named refusal, at start or at a reap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, thiserror::Error)]
pub enum RetentionError {
    /// The retention does not exceed a window in which a reconciliation or a late
    /// transaction may still need an attempt record.
    #[error("attempt retention {retention_ms} ms is shorter than {window} ({required_ms} ms): a reconciliation or a late transaction could still need a record it removes; set --attempt-retention-ms / SWITCHYARD_ATTEMPT_RETENTION_MS to at least {required_ms}")]
    TooShort {
        retention_ms: u64,
        required_ms: u64,
        window: RetentionWindow,
    },
    #[error("attempt retention {retention_ms} ms is longer than {max} ms (366 days)", max = MAX_ATTEMPT_RETENTION_MS)]
    TooLong { retention_ms: u64 },
    #[error("--reap-batch / SWITCHYARD_REAP_BATCH must be between 1 and {max}, got {value}", max = MAX_REAP_BATCH)]
    ReapBatch { value: u32 },
    #[error("--max-expired-per-pass / SWITCHYARD_MAX_EXPIRED_PER_PASS must be between 1 and {max}, got {value}", max = MAX_EXPIRED_PER_PASS)]
    MaxExpired { value: u32 },
}

/// HO-L4: the rule a retention must meet: at least the longest of [`MIN_ATTEMPT_RETENTION_MS`]
/// (1 h, above every transaction and request timeout) and every other window named in
/// `windows` (the store's `registration_timeout_ms`: a committed record stays pending, and
/// is never removed, until then; a director adds its own request window), and at most
/// [`MAX_ATTEMPT_RETENTION_MS`]. The refusal names the window that binds.
pub fn check_retention(
    retention_ms: u64,
    windows: &[(RetentionWindow, u64)],
) -> Result<(), RetentionError> {
    let (window, required_ms) = windows.iter().fold(
        (RetentionWindow::Floor, MIN_ATTEMPT_RETENTION_MS),
        |(w, r), &(name, ms)| if ms > r { (name, ms) } else { (w, r) },
    );
    if retention_ms < required_ms {
        return Err(RetentionError::TooShort {
            retention_ms,
            required_ms,
            window,
        });
    }
    if retention_ms > MAX_ATTEMPT_RETENTION_MS {
        return Err(RetentionError::TooLong { retention_ms });
    }
    Ok(())
}

impl Retention {
    /// The director's defaults: 24 h, 2,000 records a pass, 2,000 expired migrations a pass.
    pub const DEFAULT: Retention = Retention {
        attempt_retention_ms: DEFAULT_ATTEMPT_RETENTION_MS,
        reap_batch: DEFAULT_REAP_BATCH,
        max_expired_per_pass: DEFAULT_MAX_EXPIRED_PER_PASS,
    };

    /// The checks a director makes at start (`windows`: what it knows of, e.g. its own
    /// request window); the store's registration timeout is checked again at every reap.
    pub fn validate(&self, windows: &[(RetentionWindow, u64)]) -> Result<(), RetentionError> {
        check_retention(self.attempt_retention_ms, windows)?;
        if self.reap_batch == 0 || self.reap_batch > MAX_REAP_BATCH {
            return Err(RetentionError::ReapBatch {
                value: self.reap_batch,
            });
        }
        if self.max_expired_per_pass == 0 || self.max_expired_per_pass > MAX_EXPIRED_PER_PASS {
            return Err(RetentionError::MaxExpired {
                value: self.max_expired_per_pass,
            });
        }
        Ok(())
    }
}

impl Default for Retention {
    fn default() -> Self {
        Retention::DEFAULT
    }
}

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
