//! The reference assignment store: in-memory tables, the serialisation point the SQL stores
//! match row for row, and the store the model checker runs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decide::*;
use super::rows::*;
use crate::handoff::ids::{
    AuthorityCheck, AuthorityField, CellId, HostId, Incarnation, OpId, SourceAuthority,
};
use crate::handoff::policy::HandoffRequest;
use crate::MonoMs;

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
