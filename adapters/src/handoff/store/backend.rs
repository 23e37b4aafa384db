//! The store interface of the cells and the director (issue #42, SIM-1): [`Store`], either the
//! SQL store ([`SqlStore`], production: PostgreSQL or SQLite) or the in-memory store
//! ([`MemoryStore`], the core's reference store behind a mutex: tests and simulations). An enum,
//! not a trait object: every call is a `match` on two variants, so the production path stays
//! the SQL store's own code with no dynamic dispatch, and each method has the SQL store's
//! signature and answers. The `switchyard` binary opens only SQL URLs; the memory store is a
//! library type (the long-horizon test, `tests/ho_l4_long_horizon.rs`, runs on it).

use std::time::Duration;

use switchyard_core::handoff::store::{
    AttemptRow, DrainWrite, LimitSettings, RegisterRefusal, RetentionError, StartRefusal,
    StoreConfig, StoreError, StoreSnapshot, TxnOutcome,
};
use switchyard_core::handoff::{
    CandidateRow, CellId, Generation, HandoffRequest, HostId, Incarnation, Measurement, OpId,
    PageCursor, PageQuery, SourceAuthority, SweepLeaseRow,
};
use switchyard_core::MonoMs;

use super::{CellInfo, MemoryStore, Resolved, SqlStore, StoreFailure};

/// The assignment store a cell or a director runs against. Cheap to clone (a handle).
#[derive(Debug, Clone)]
pub enum Store {
    Sql(SqlStore),
    Memory(MemoryStore),
}

impl From<SqlStore> for Store {
    fn from(s: SqlStore) -> Store {
        Store::Sql(s)
    }
}

impl From<MemoryStore> for Store {
    fn from(m: MemoryStore) -> Store {
        Store::Memory(m)
    }
}

impl Store {
    /// The bound of one store transaction (the director's page deadline is sized by it).
    #[must_use]
    pub fn txn_timeout(&self) -> Duration {
        match self {
            Store::Sql(sql) => sql.txn_timeout(),
            Store::Memory(mem) => mem.txn_timeout(),
        }
    }

    /// The settings row.
    pub async fn settings(&self) -> Result<StoreConfig, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.settings().await,
            Store::Memory(mem) => mem.gate()?.settings(),
        }
    }

    /// SCALE-1 / SCALE-4: the operator's limits into the settings.
    pub async fn put_limits(&self, limits: &LimitSettings) -> Result<(), StoreFailure> {
        match self {
            Store::Sql(sql) => sql.put_limits(limits).await,
            Store::Memory(mem) => mem.gate()?.put_limits(limits),
        }
    }

    /// HO-A5: the persistent enable switch.
    pub async fn set_enabled(&self, enabled: bool) -> Result<(), StoreFailure> {
        match self {
            Store::Sql(sql) => sql.set_enabled(enabled).await,
            Store::Memory(mem) => mem.gate()?.set_enabled(enabled),
        }
    }

    /// Every row (tests, diagnostics).
    pub async fn rows(&self) -> Result<StoreSnapshot, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.rows().await,
            Store::Memory(mem) => mem.gate()?.rows(),
        }
    }

    /// HO-L2: a cell process starts: its lease and a new incarnation, or the refusal.
    #[allow(clippy::too_many_arguments)]
    pub async fn start_cell(
        &self,
        cell: CellId,
        capacity: u32,
        handoff_capable: bool,
        public_url: &str,
        internal_url: &str,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<Result<Incarnation, StartRefusal>, StoreFailure> {
        match self {
            Store::Sql(sql) => {
                sql.start_cell(
                    cell,
                    capacity,
                    handoff_capable,
                    public_url,
                    internal_url,
                    now,
                    lease_ms,
                )
                .await
            }
            Store::Memory(mem) => mem.gate()?.start_cell(
                cell,
                capacity,
                handoff_capable,
                public_url,
                internal_url,
                now,
                lease_ms,
            ),
        }
    }

    /// HO-L2: renew the lease (`false`: the cell is another process's).
    pub async fn renew_cell_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
        now: MonoMs,
        lease_ms: u64,
    ) -> Result<bool, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.renew_cell_lease(cell, incarnation, now, lease_ms).await,
            Store::Memory(mem) => mem
                .gate()?
                .renew_cell_lease(cell, incarnation, now, lease_ms),
        }
    }

    /// HO-L2: end the lease at a graceful stop (`false`: no longer this process's).
    pub async fn release_cell_lease(
        &self,
        cell: CellId,
        incarnation: Incarnation,
    ) -> Result<bool, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.release_cell_lease(cell, incarnation).await,
            Store::Memory(mem) => mem.gate()?.release_cell_lease(cell, incarnation),
        }
    }

    /// A cell's row and URLs.
    pub async fn cell_info(&self, cell: CellId) -> Result<Option<CellInfo>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.cell_info(cell).await,
            Store::Memory(mem) => mem.gate()?.cell_info(cell),
        }
    }

    /// Setup and enrolment: assign a new host.
    pub async fn insert_host(
        &self,
        host: HostId,
        cell: CellId,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, StoreError>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.insert_host(host, cell, desktop_capable).await,
            Store::Memory(mem) => mem.gate()?.insert_host(host, cell, desktop_capable),
        }
    }

    /// The current exact authority of a host.
    pub async fn authority(&self, host: HostId) -> Result<Option<SourceAuthority>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.authority(host).await,
            Store::Memory(mem) => mem.gate()?.authority(host),
        }
    }

    /// Resolve path: where a host is assigned and that cell's public URL.
    pub async fn resolve(&self, host: HostId) -> Result<Option<Resolved>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.resolve(host).await,
            Store::Memory(mem) => mem.gate()?.resolve(host),
        }
    }

    /// SCALE-6: hosts in the store (once per director process).
    pub async fn host_count(&self) -> Result<u64, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.host_count().await,
            Store::Memory(mem) => mem.gate()?.host_count(),
        }
    }

    /// HO-S4 / HO-A1: the bounded assignment transaction.
    pub async fn run_transaction(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<TxnOutcome, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.run_transaction(now, req).await,
            Store::Memory(mem) => mem.gate()?.run_transaction(now, req),
        }
    }

    /// HO-A1 / HO-A2: the locked reconciliation (`None`: the fence could not be written).
    pub async fn reconcile(
        &self,
        now: MonoMs,
        req: &HandoffRequest,
    ) -> Result<Option<TxnOutcome>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.reconcile(now, req).await,
            Store::Memory(mem) => mem.gate()?.reconcile(now, req),
        }
    }

    /// HO-A4 / HO-A6: a desktop control registers at `cell`.
    pub async fn register_control(
        &self,
        now: MonoMs,
        host: HostId,
        cell: CellId,
        incarnation: Incarnation,
        desktop_capable: bool,
    ) -> Result<Result<SourceAuthority, RegisterRefusal>, StoreFailure> {
        match self {
            Store::Sql(sql) => {
                sql.register_control(now, host, cell, incarnation, desktop_capable)
                    .await
            }
            Store::Memory(mem) => {
                mem.gate()?
                    .register_control(now, host, cell, incarnation, desktop_capable)
            }
        }
    }

    /// HO-A5: the emergency-drain fence.
    pub async fn emergency_drain(
        &self,
        authority: &SourceAuthority,
    ) -> Result<DrainWrite, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.emergency_drain(authority).await,
            Store::Memory(mem) => mem.gate()?.emergency_drain(authority),
        }
    }

    /// HO-A6 / HO-L4: at most `max` expired reservations released.
    pub async fn expire_migrations_up_to(
        &self,
        now: MonoMs,
        max: usize,
    ) -> Result<Vec<OpId>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.expire_migrations_up_to(now, max).await,
            Store::Memory(mem) => mem.gate()?.expire_migrations_up_to(now, max),
        }
    }

    /// HO-L4: at most `batch` ended records past the retention removed.
    pub async fn reap_attempts(
        &self,
        now: MonoMs,
        retention_ms: u64,
        batch: u32,
    ) -> Result<Result<u32, RetentionError>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.reap_attempts(now, retention_ms, batch).await,
            Store::Memory(mem) => mem.gate()?.reap_attempts(now, retention_ms, batch),
        }
    }

    /// HO-A1: the recorded attempt of an op id, read-only.
    pub async fn recorded_attempt(&self, op: OpId) -> Result<Option<AttemptRow>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.recorded_attempt(op).await,
            Store::Memory(mem) => mem.gate()?.recorded_attempt(op),
        }
    }

    /// HO-3: the desktop's latest measurement.
    pub async fn put_measurement(
        &self,
        host: HostId,
        target: CellId,
        m: &Measurement,
    ) -> Result<(), StoreFailure> {
        match self {
            Store::Sql(sql) => sql.put_measurement(host, target, m).await,
            Store::Memory(mem) => mem.gate()?.put_measurement(host, target, m),
        }
    }

    /// HO-10: the desktop control's activity lease.
    pub async fn renew_activity(
        &self,
        host: HostId,
        cell: CellId,
        generation: Generation,
        until: MonoMs,
    ) -> Result<(), StoreFailure> {
        match self {
            Store::Sql(sql) => sql.renew_activity(host, cell, generation, until).await,
            Store::Memory(mem) => mem.gate()?.renew_activity(host, cell, generation, until),
        }
    }

    /// HO-S5: release the retired source's activity.
    pub async fn release_activity(&self, host: HostId, cell: CellId) -> Result<(), StoreFailure> {
        match self {
            Store::Sql(sql) => sql.release_activity(host, cell).await,
            Store::Memory(mem) => mem.gate()?.release_activity(host, cell),
        }
    }

    /// The activity lease of a host, if any.
    pub async fn activity(&self, host: HostId) -> Result<Option<(CellId, MonoMs)>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.activity(host).await,
            Store::Memory(mem) => mem.gate()?.activity(host),
        }
    }

    /// HO-S1 / SCALE-3: one read-only keyset page of candidates.
    pub async fn candidate_page(&self, q: PageQuery) -> Result<Vec<CandidateRow>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.candidate_page(q).await,
            Store::Memory(mem) => mem.gate()?.candidate_page(q),
        }
    }

    /// SCALE-3: the director's cursor.
    pub async fn load_cursor(&self, director: &str) -> Result<PageCursor, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.load_cursor(director).await,
            Store::Memory(mem) => mem.gate()?.load_cursor(director),
        }
    }

    /// SCALE-3: save the director's cursor.
    pub async fn save_cursor(
        &self,
        director: &str,
        cursor: PageCursor,
    ) -> Result<(), StoreFailure> {
        match self {
            Store::Sql(sql) => sql.save_cursor(director, cursor).await,
            Store::Memory(mem) => mem.gate()?.save_cursor(director, cursor),
        }
    }

    /// SCALE-6: the sweep's lease row and its holder's name.
    pub async fn load_sweep_lease(
        &self,
        sweep: &str,
    ) -> Result<Option<(SweepLeaseRow, String)>, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.load_sweep_lease(sweep).await,
            Store::Memory(mem) => mem.gate()?.load_sweep_lease(sweep),
        }
    }

    /// SCALE-6: a compare-and-set claim of the sweep's lease (`true`: taken).
    pub async fn claim_sweep_lease(
        &self,
        sweep: &str,
        seen: Option<SweepLeaseRow>,
        new: SweepLeaseRow,
        holder_name: &str,
    ) -> Result<bool, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.claim_sweep_lease(sweep, seen, new, holder_name).await,
            Store::Memory(mem) => mem.gate()?.claim_sweep_lease(sweep, seen, new, holder_name),
        }
    }

    /// SCALE-6: save the cursor only while `lease` holds the sweep (`false`: nothing written).
    pub async fn save_cursor_held(
        &self,
        director: &str,
        cursor: PageCursor,
        lease: SweepLeaseRow,
        now_ms: u64,
    ) -> Result<bool, StoreFailure> {
        match self {
            Store::Sql(sql) => sql.save_cursor_held(director, cursor, lease, now_ms).await,
            Store::Memory(mem) => mem
                .gate()?
                .save_cursor_held(director, cursor, lease, now_ms),
        }
    }
}
