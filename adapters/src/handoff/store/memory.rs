//! The in-memory assignment store (issue #42, SIM-1): the core's reference store
//! ([`switchyard_core::handoff::store::AssignmentStore`]) behind a mutex, plus the tables the
//! reference does not keep (cell URLs, measurements, activity leases, the directors' cursors
//! and sweep leases) as plain maps. It answers every call the cells and the director make
//! with the answer the SQL stores give (the reads of [`super::reads`], [`super::registry`]
//! and [`super::shards`], over maps instead of tables).
//!
//! It decides nothing: every write is a reference method (the core's plans, run on the maps),
//! every read a lookup. Each call takes the lock once and never awaits while holding it, so
//! a call is one transaction, as in the reference. What it is not: durable (the tables live
//! as long as the process), shared between processes, or a place for the SQL stores' limit
//! shards (the reference always takes the exact path, which the escrow guarantees the token
//! path matches). Each handle ([`MemoryStore::connection`]) has the SQL stores' fault seams
//! for a cut-off connection and a lost commit answer (`test-hooks`); otherwise a call never
//! fails: every answer is `Ok`. The settings are given at creation; only the
//! operator's limits (`put_limits`) and the enable switch change them afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use switchyard_core::handoff::store::{
    authority_of, AssignmentStore, AttemptRow, DrainWrite, LimitSettings, RegisterRefusal,
    RetentionError, StartRefusal, StoreConfig, StoreError, StoreSnapshot, TxnOutcome,
};
use switchyard_core::handoff::{
    CandidateRow, CandidateView, CellId, Generation, HandoffRequest, HostId, Incarnation,
    Measurement, OpId, PageCursor, PageQuery, SourceAuthority, SweepLeaseRow, TargetView,
};
use switchyard_core::MonoMs;

use super::{CellInfo, Resolved, StoreFailure};
use crate::handoff::hooks::Faults;

/// The in-memory store. Cheap to clone (a handle: every clone sees the same tables).
#[derive(Debug, Clone)]
pub struct MemoryStore {
    tables: Arc<Mutex<Tables>>,
    txn_timeout: Duration,
    /// This handle's injected faults (`test-hooks`; SIM-1's store outage and lost commit
    /// answer): one process's connection, not the store's tables.
    faults: Arc<Faults>,
}

#[derive(Debug)]
struct Tables {
    store: AssignmentStore,
    /// Every host the store holds (an index: hosts are only ever added, by enrolment).
    hosts: BTreeSet<HostId>,
    /// (public, internal) URL of each cell a process started (`''`: set up without one).
    urls: BTreeMap<CellId, (String, String)>,
    measurements: BTreeMap<HostId, (CellId, Measurement)>,
    /// HO-10: (cell, generation, expires at) of each host's desktop activity lease.
    activity: BTreeMap<HostId, (CellId, Generation, MonoMs)>,
    cursors: BTreeMap<String, Option<HostId>>,
    sweep_leases: BTreeMap<String, (SweepLeaseRow, String)>,
}

impl MemoryStore {
    /// An empty store with these settings.
    #[must_use]
    pub fn new(config: StoreConfig) -> MemoryStore {
        MemoryStore {
            tables: Arc::new(Mutex::new(Tables {
                store: AssignmentStore::new(config),
                hosts: BTreeSet::new(),
                urls: BTreeMap::new(),
                measurements: BTreeMap::new(),
                activity: BTreeMap::new(),
                cursors: BTreeMap::new(),
                sweep_leases: BTreeMap::new(),
            })),
            txn_timeout: super::StoreOptions::default().txn_timeout,
            faults: Arc::default(),
        }
    }

    /// Another handle on the same tables with faults of its own (one process's connection:
    /// cutting it off leaves the other handles working).
    #[must_use]
    pub fn connection(&self) -> MemoryStore {
        MemoryStore {
            tables: self.tables.clone(),
            txn_timeout: self.txn_timeout,
            faults: Arc::default(),
        }
    }

    /// This handle's fault seams (armed only with `test-hooks`).
    #[must_use]
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Every call passes here first: a cut-off handle is unavailable, as a process cut off
    /// from the database is.
    pub(super) fn gate(&self) -> Result<&MemoryStore, StoreFailure> {
        if self.faults.is_cut_off() {
            return Err(StoreFailure::Unavailable(
                "injected: cut off from the store".into(),
            ));
        }
        Ok(self)
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bound a SQL store gives one transaction (the director sizes its page deadline by
    /// it); here nothing waits, so it only stands in for the SQL stores' default.
    #[must_use]
    pub fn txn_timeout(&self) -> Duration {
        self.txn_timeout
    }

    // ----- settings and setup -----

    pub fn settings(&self) -> Result<StoreConfig, StoreFailure> {
        Ok(*self.tables().store.config())
    }

    /// SCALE-1 / SCALE-4: the operator's limits (the SQL `put_limits`).
    pub fn put_limits(&self, limits: &LimitSettings) -> Result<(), StoreFailure> {
        limits
            .bounds
            .validate()
            .map_err(|e| StoreFailure::BadRow(format!("limits: {e}")))?;
        self.tables().store.set_limits(limits);
        Ok(())
    }

    /// HO-A5: the persistent enable switch.
    pub fn set_enabled(&self, enabled: bool) -> Result<(), StoreFailure> {
        self.tables().store.set_enabled(enabled);
        Ok(())
    }

    /// HO-L4: how many attempt records the history holds (a count, not a copy).
    pub fn attempt_rows(&self) -> usize {
        self.tables().store.attempts().count()
    }

    /// Every row (the reference's snapshot).
    pub fn rows(&self) -> Result<StoreSnapshot, StoreFailure> {
        Ok(self.tables().store.snapshot())
    }

    // ----- cells and their lease (HO-L2) -----

    /// HO-L2: the end of `cell`'s lease as the store holds it (`None`: no such cell; zero:
    /// never leased). The simulator's HO-L3 check reads it beside the assignments.
    pub fn cell_lease(&self, cell: CellId) -> Result<Option<MonoMs>, StoreFailure> {
        Ok(self.tables().store.lease_of(cell).map(|(_, until)| until))
    }

    /// A cell process starts (the reference's `start_cell`); its URLs are kept beside it.
    #[allow(clippy::too_many_arguments)]
    pub fn start_cell(
        &self,
        cell: CellId,
        capacity: u32,
        handoff_capable: bool,
        public_url: &str,
        internal_url: &str,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<Result<Incarnation, StartRefusal>, StoreFailure> {
        let mut t = self.tables();
        let started = t
            .store
            .start_cell(cell, capacity, handoff_capable, now, lease_ms);
        if started.is_ok() {
            t.urls
                .insert(cell, (public_url.to_owned(), internal_url.to_owned()));
        }
        Ok(started)
    }

    /// HO-L2: `false`: another process holds the cell.
    pub fn renew_cell_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<bool, StoreFailure> {
        Ok(self
            .tables()
            .store
            .renew_cell_lease(cell, incarnation, now, lease_ms)
            .is_ok())
    }

    /// HO-L2: `false`: the cell was no longer this process's.
    pub fn release_cell_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
    ) -> Result<bool, StoreFailure> {
        Ok(self
            .tables()
            .store
            .release_cell_lease(cell, incarnation)
            .is_ok())
    }

    /// A cell's row and URLs.
    pub fn cell_info(&self, cell: CellId) -> Result<Option<CellInfo>, StoreFailure> {
        let t = self.tables();
        Ok(t.store.cell(cell).map(|row| {
            let (public_url, internal_url) = t.urls.get(&cell).cloned().unwrap_or_default();
            CellInfo {
                cell,
                row: *row,
                public_url,
                internal_url,
            }
        }))
    }

    // ----- hosts -----

    /// Setup and enrolment (the reference's `insert_host`, its `EnrolPlan`).
    pub fn insert_host(
        &self,
        host: HostId,
        cell: CellId,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, StoreError>, StoreFailure> {
        let mut t = self.tables();
        let answer = t.store.insert_host(host, cell, desktop_capable);
        if t.store.assignment(host).is_some() {
            t.hosts.insert(host);
        }
        Ok(answer)
    }

    /// The current exact authority of a host.
    pub fn authority(&self, host: HostId) -> Result<Option<SourceAuthority>, StoreFailure> {
        Ok(self.tables().store.authority(host))
    }

    /// Resolve path: where a host is assigned and the public URL of that cell.
    pub fn resolve(&self, host: HostId) -> Result<Option<Resolved>, StoreFailure> {
        let t = self.tables();
        Ok(t.store.assignment(host).map(|row| Resolved {
            cell: row.cell,
            epoch: row.epoch,
            public_url: t
                .urls
                .get(&row.cell)
                .map(|(public, _)| public.clone())
                .unwrap_or_default(),
        }))
    }

    /// SCALE-6: hosts in the store.
    pub fn host_count(&self) -> Result<u64, StoreFailure> {
        Ok(u64::try_from(self.tables().hosts.len()).unwrap_or(u64::MAX))
    }

    // ----- the planned operations (the reference's, run on the maps) -----

    /// HO-S4 / HO-A1: the assignment transaction.
    pub fn run_transaction(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<TxnOutcome, StoreFailure> {
        let outcome = self.tables().store.run_transaction(now, req);
        if self.faults.take_lost_result() {
            // Committed (or refused) in the tables; the answer never reaches the caller.
            return Err(StoreFailure::CommitLost(format!(
                "injected: result of {outcome:?} lost"
            )));
        }
        Ok(outcome)
    }

    /// HO-A1 / HO-A2: the locked reconciliation.
    pub fn reconcile(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<Option<TxnOutcome>, StoreFailure> {
        Ok(self.tables().store.reconcile(now, req))
    }

    /// HO-A4 / HO-A6: a desktop control registers at `cell`.
    pub fn register_control(
        &self,
        now: MonoMs,
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, RegisterRefusal>, StoreFailure> {
        Ok(self
            .tables()
            .store
            .register_control(now, host, cell, incarnation, desktop_capable))
    }

    /// HO-A5: the emergency-drain fence.
    pub fn emergency_drain(&self, authority: &SourceAuthority) -> Result<DrainWrite, StoreFailure> {
        Ok(self.tables().store.emergency_drain(authority))
    }

    /// HO-A6 / HO-L4: at most `max` expired reservations released, in op-id order.
    pub fn expire_migrations_up_to(
        &self,
        now: MonoMs,
        max: usize,
    ) -> Result<Vec<OpId>, StoreFailure> {
        Ok(self.tables().store.expire_migrations_up_to(now, max))
    }

    /// HO-L4: at most `batch` ended records past the retention removed, oldest first.
    pub fn reap_attempts(
        &self,
        now: MonoMs,
        retention_ms: u64,
        batch: u32,
    ) -> Result<Result<u32, RetentionError>, StoreFailure> {
        Ok(self.tables().store.reap_attempts(now, retention_ms, batch))
    }

    /// HO-A1: the recorded attempt of an op id, read-only.
    pub fn recorded_attempt(&self, op: OpId) -> Result<Option<AttemptRow>, StoreFailure> {
        Ok(self.tables().store.attempt(op).copied())
    }

    // ----- measurements and activity -----

    /// HO-3: the desktop's latest measurement (one per host, replaced).
    pub fn put_measurement(
        &self,
        host: HostId,
        target: CellId,
        m: &Measurement,
    ) -> Result<(), StoreFailure> {
        self.tables().measurements.insert(host, (target, *m));
        Ok(())
    }

    /// HO-10: the desktop control's activity lease (bookkeeping only).
    pub fn renew_activity(
        &self,
        host: HostId,
        cell: CellId,
        generation: Generation,
        until: MonoMs,
    ) -> Result<(), StoreFailure> {
        self.tables()
            .activity
            .insert(host, (cell, generation, until));
        Ok(())
    }

    /// HO-S5: release the retired source's activity (only its own lease).
    pub fn release_activity(&self, host: HostId, cell: CellId) -> Result<(), StoreFailure> {
        let mut t = self.tables();
        if t.activity.get(&host).is_some_and(|(c, _, _)| *c == cell) {
            t.activity.remove(&host);
        }
        Ok(())
    }

    /// The activity lease of a host, if any.
    pub fn activity(&self, host: HostId) -> Result<Option<(CellId, MonoMs)>, StoreFailure> {
        Ok(self
            .tables()
            .activity
            .get(&host)
            .map(|(cell, _, until)| (*cell, *until)))
    }

    // ----- the director's reads and its cursor (SCALE-3, SCALE-6) -----

    /// HO-S1 / SCALE-3: one keyset page of candidates, `after < host <= through` in host
    /// order, at most `limit`, with what the SQL page joins: the source cell's capability, the
    /// host's measurement, its measured target's row, load and lease, its cooldown.
    pub fn candidate_page(&self, q: PageQuery) -> Result<Vec<CandidateRow>, StoreFailure> {
        let t = self.tables();
        let limit = usize::try_from(q.limit).unwrap_or(usize::MAX);
        let mut page = Vec::new();
        if let (Some(after), Some(through)) = (q.after, q.through) {
            if after >= through {
                return Ok(page);
            }
        }
        let lower = q.after.map_or(Bound::Unbounded, Bound::Excluded);
        let upper = q.through.map_or(Bound::Unbounded, Bound::Included);
        for host in t.hosts.range((lower, upper)).copied().take(limit) {
            let Some(row) = t.store.assignment(host) else {
                continue;
            };
            // The SQL page joins the source cell's row (every assignment names a cell).
            let Some(source) = t.store.cell(row.cell) else {
                continue;
            };
            let measurement = t.measurements.get(&host).copied();
            let target = measurement.and_then(|(cell, _)| {
                t.store.cell(cell).map(|c| TargetView {
                    cell,
                    capable: c.handoff_capable,
                    load: t.store.cell_load(cell),
                    capacity: c.capacity,
                    lease_until: t
                        .store
                        .lease_of(cell)
                        .map_or(MonoMs::ZERO, |(_, until)| until),
                })
            });
            page.push(CandidateRow {
                candidate: CandidateView {
                    authority: authority_of(host, row),
                    source_cell_capable: source.handoff_capable,
                    desktop_capable: row.desktop_capable,
                    measurement,
                    cooldown_until: t.store.cooldown_until(host),
                },
                target,
            });
        }
        Ok(page)
    }

    /// SCALE-3: the director's cursor (`None`: the start of the list).
    pub fn load_cursor(&self, director: &str) -> Result<PageCursor, StoreFailure> {
        Ok(PageCursor {
            after: self.tables().cursors.get(director).copied().flatten(),
        })
    }

    pub fn save_cursor(&self, director: &str, cursor: PageCursor) -> Result<(), StoreFailure> {
        self.tables()
            .cursors
            .insert(director.to_owned(), cursor.after);
        Ok(())
    }

    /// SCALE-6: the lease row of the sweep and its holder's name.
    pub fn load_sweep_lease(
        &self,
        sweep: &str,
    ) -> Result<Option<(SweepLeaseRow, String)>, StoreFailure> {
        Ok(self.tables().sweep_leases.get(sweep).cloned())
    }

    /// SCALE-6: write `new` only if the row is still `seen` (holder and epoch; `None`: only
    /// if there is no row). `true`: taken.
    pub fn claim_sweep_lease(
        &self,
        sweep: &str,
        seen: Option<SweepLeaseRow>,
        new: SweepLeaseRow,
        holder_name: &str,
    ) -> Result<bool, StoreFailure> {
        let mut t = self.tables();
        let current = t.sweep_leases.get(sweep).map(|(row, _)| *row);
        let matches = match (seen, current) {
            (None, None) => true,
            (Some(old), Some(now)) => old.holder == now.holder && old.epoch == now.epoch,
            _ => false,
        };
        if matches {
            t.sweep_leases
                .insert(sweep.to_owned(), (new, holder_name.to_owned()));
        }
        Ok(matches)
    }

    /// SCALE-6: save the cursor only while `lease` still holds the sweep `director` and has
    /// not lapsed at `now_ms`. `false`: nothing written.
    pub fn save_cursor_held(
        &self,
        director: &str,
        cursor: PageCursor,
        lease: SweepLeaseRow,
        now_ms: u64,
    ) -> Result<bool, StoreFailure> {
        let mut t = self.tables();
        let held = t.sweep_leases.get(director).is_some_and(|(row, _)| {
            row.holder == lease.holder && row.epoch == lease.epoch && row.until_ms > now_ms
        });
        if held {
            t.cursors.insert(director.to_owned(), cursor.after);
        }
        Ok(held)
    }
}
