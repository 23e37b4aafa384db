//! Shared deterministic rig for the HO tests: one reference store, one source machine, and
//! an adapter that routes the machine's actions to the store the way production would.
#![allow(dead_code)]

use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

pub const SRC: CellId = CellId(1);
pub const TGT: CellId = CellId(2);
/// A cell without the idle-handoff capability (HO-C1).
pub const OLD: CellId = CellId(3);
pub const HOST: HostId = HostId(7);

pub const FRESHNESS_MS: u64 = 60_000;
pub const COOLDOWN_MS: u64 = 600_000;
pub const REQUEST_TIMEOUT_MS: u64 = 5_000;
pub const RECONCILE_TIMEOUT_MS: u64 = 4_000;
pub const QUARANTINE_RETRY_MS: u64 = 10_000;
pub const REFUSAL_HOLD_MS: u64 = 10_000;
pub const REGISTRATION_TIMEOUT_MS: u64 = 30_000;

pub fn policy_config() -> PolicyConfig {
    PolicyConfig {
        freshness_window_ms: FRESHNESS_MS,
        host_cooldown_ms: COOLDOWN_MS,
    }
}

pub fn store_config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: policy_config(),
        max_in_flight_migrations: 4,
        rate_window_ms: 60_000,
        max_commits_per_window: 10,
        registration_timeout_ms: REGISTRATION_TIMEOUT_MS,
        bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
    }
}

pub fn source_config() -> SourceConfig {
    SourceConfig {
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        reconcile_timeout_ms: RECONCILE_TIMEOUT_MS,
        quarantine_retry_ms: QUARANTINE_RETRY_MS,
        cell_capable: true,
        refusal_hold_ms: REFUSAL_HOLD_MS,
    }
}

pub fn cell_row(capacity: u32, capable: bool) -> CellRow {
    CellRow {
        capacity,
        handoff_capable: capable,
        incarnation: Incarnation(1),
    }
}

pub fn good_measurement(now: MonoMs) -> Measurement {
    Measurement {
        measured_at: now,
        current_rtt_ms: 120,
        target_rtt_ms: 60,
    }
}

/// A store with SRC and TGT (capable, capacity 10) and OLD (not capable), `HOST` at SRC.
pub fn new_store() -> (AssignmentStore, SourceAuthority) {
    let mut store = AssignmentStore::new(store_config());
    store.upsert_cell(SRC, cell_row(10, true)).expect("cell");
    store.upsert_cell(TGT, cell_row(10, true)).expect("cell");
    store.upsert_cell(OLD, cell_row(10, false)).expect("cell");
    let auth = store.insert_host(HOST, SRC, true).expect("host");
    (store, auth)
}

/// Everything the adapter saw, by kind.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub txns: Vec<(AttemptRef, HandoffRequest)>,
    pub reconciles: Vec<(AttemptRef, HandoffRequest)>,
    pub quarantined: Vec<(AttemptRef, QuarantineCause)>,
    pub retired: Vec<RetireReason>,
    pub reopened: Vec<AttemptRef>,
    pub fences: Vec<(SourceAuthority, DrainReason)>,
    pub replies: Vec<HandoffReply>,
    /// Every action in order.
    pub log: Vec<HandoffAction>,
}

pub struct World {
    pub now: MonoMs,
    pub store: AssignmentStore,
    pub src: SourceHandoff,
    pub seen: Seen,
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

impl World {
    pub fn new() -> World {
        let (store, auth) = new_store();
        World {
            now: MonoMs(1_000_000),
            store,
            src: SourceHandoff::new(source_config(), auth, true),
            seen: Seen::default(),
        }
    }

    pub fn advance(&mut self, ms: u64) -> &mut Self {
        self.now = self.now.plus_ms(ms);
        self
    }

    /// The director's request for the source's current authority, to `target`.
    pub fn request_to(&self, target: CellId) -> HandoffRequest {
        HandoffRequest::new(
            self.src.authority(),
            target,
            100,
            good_measurement(self.now),
        )
    }

    pub fn request(&self) -> HandoffRequest {
        self.request_to(TGT)
    }

    /// Drain every queued action into `seen`.
    pub fn drain(&mut self) {
        while let Some(a) = self.src.poll_action() {
            self.seen.log.push(a);
            match a {
                HandoffAction::RunTransaction { attempt, request } => {
                    self.seen.txns.push((attempt, request));
                }
                HandoffAction::Reconcile { attempt, request } => {
                    self.seen.reconciles.push((attempt, request));
                }
                HandoffAction::Quarantined { attempt, cause } => {
                    self.seen.quarantined.push((attempt, cause));
                }
                HandoffAction::RetireSourceDraining { reason } => self.seen.retired.push(reason),
                HandoffAction::ReopenAdmission { attempt } => self.seen.reopened.push(attempt),
                HandoffAction::FenceAuthority { authority, reason } => {
                    self.seen.fences.push((authority, reason));
                }
                HandoffAction::Reply(r) => self.seen.replies.push(r),
                // A failed fence write's retry is scheduled (the rig writes fences itself).
                HandoffAction::FenceFailed { .. } => {}
            }
        }
    }

    pub fn begin(&mut self, req: &HandoffRequest) -> Begin {
        let b = self.src.handle_request(self.now, req);
        self.drain();
        b
    }

    /// Begin with the default request and expect a started attempt.
    pub fn start(&mut self) -> AttemptRef {
        let req = self.request();
        match self.begin(&req) {
            Begin::Started(a) => a,
            other => panic!("expected Started, got {other:?}"),
        }
    }

    /// The most recent transaction the machine asked for.
    pub fn last_txn(&self) -> (AttemptRef, HandoffRequest) {
        *self.seen.txns.last().expect("a RunTransaction action")
    }

    pub fn last_reconcile(&self) -> (AttemptRef, HandoffRequest) {
        *self.seen.reconciles.last().expect("a Reconcile action")
    }

    /// Run the last asked transaction on the store and deliver its result.
    pub fn run_txn(&mut self) -> TxnOutcome {
        let (a, req) = self.last_txn();
        let out = self.store.run_transaction(self.now, &req);
        self.src
            .handle_transaction_result(self.now, a, DurableResult::Done(out));
        self.drain();
        out
    }

    /// Run the last asked transaction on the store but lose its result.
    pub fn run_txn_lose_result(&mut self) -> TxnOutcome {
        let (a, req) = self.last_txn();
        let out = self.store.run_transaction(self.now, &req);
        self.src.handle_transaction_result(
            self.now,
            a,
            DurableResult::Ambiguous(Ambiguity::ResultLost),
        );
        self.drain();
        out
    }

    pub fn deliver_txn(&mut self, result: DurableResult) -> Disposition {
        let (a, _) = self.last_txn();
        let d = self.src.handle_transaction_result(self.now, a, result);
        self.drain();
        d
    }

    /// Run the last asked reconciliation on the store and deliver it.
    pub fn run_reconcile(&mut self) -> TxnOutcome {
        let (a, req) = self.last_reconcile();
        let out = self.store.reconcile(self.now, &req).expect("fence written");
        self.src
            .handle_reconcile_result(self.now, a, DurableResult::Done(out));
        self.drain();
        out
    }

    pub fn deliver_reconcile(&mut self, result: DurableResult) -> Disposition {
        let (a, _) = self.last_reconcile();
        let d = self.src.handle_reconcile_result(self.now, a, result);
        self.drain();
        d
    }

    pub fn timeout(&mut self) -> Disposition {
        let d = self.src.handle_timeout(self.now);
        self.drain();
        d
    }

    pub fn gated(&self) -> bool {
        self.src.gate().barrier().is_some()
    }

    pub fn open(&self) -> bool {
        self.src.gate().state() == GateState::Open
    }

    /// Apply the drain fence the machine asked for (the adapter's store write).
    pub fn apply_fences(&mut self) -> Vec<DrainWrite> {
        self.seen
            .fences
            .clone()
            .iter()
            .map(|(auth, _)| self.store.emergency_drain(auth))
            .collect()
    }

    /// The desktop registers at `cell` with that cell's current incarnation.
    pub fn register_at(&mut self, cell: CellId) -> Result<SourceAuthority, RegisterRefusal> {
        let inc = self.store.cell(cell).expect("cell").incarnation;
        self.store.register_control(self.now, HOST, cell, inc, true)
    }

    /// Replacement control at the source through a control ticket (HO-A4, local path).
    pub fn replace_control(&mut self) -> Result<SourceAuthority, String> {
        let t = self
            .src
            .handle_acquire(WorkKind::ControlOp)
            .map_err(|e| format!("{e:?}"))?;
        let auth = self.register_at(SRC).map_err(|e| format!("{e:?}"))?;
        let r = self.src.handle_rebind(self.now, t, auth, true);
        assert_eq!(self.src.handle_release(t), ReleaseReport::Released);
        r.map_err(|e| format!("{e:?}"))?;
        Ok(auth)
    }

    pub fn last_reply(&self) -> HandoffReply {
        *self.seen.replies.last().expect("a reply")
    }
}

/// A host whose cohort bucket is `>= percent` (outside) or `< percent` (inside).
pub fn host_with_bucket(pred: impl Fn(u8) -> bool) -> HostId {
    (0..10_000u64)
        .map(HostId)
        .find(|h| pred(cohort_bucket(*h)))
        .expect("some host has such a bucket")
}

pub fn director() -> DirectorPolicy {
    DirectorPolicy {
        enabled: true,
        cohort_percent: 100,
        policy: policy_config(),
    }
}

pub fn view(now: MonoMs) -> (CandidateView, TargetView) {
    let (_, auth) = new_store();
    (
        CandidateView {
            authority: auth,
            source_cell_capable: true,
            desktop_capable: true,
            measurement: Some((TGT, good_measurement(now))),
            cooldown_until: None,
        },
        TargetView {
            cell: TGT,
            capable: true,
            load: 3,
            capacity: 10,
            lease_until: MonoMs::ZERO,
        },
    )
}

pub fn eval(now: MonoMs, c: &CandidateView, t: &TargetView) -> Result<HandoffRequest, Ineligible> {
    evaluate(now, &director(), c, Some(t))
}

pub fn refused(w: &mut World, req: &HandoffRequest) -> HandoffRefusal {
    match w.begin(req) {
        Begin::Answered(HandoffReply::Refused { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

// ---- store decisions shared by the reference and the SQL stores ----------------------------------

pub fn row(cell: u32, epoch: u64, inc: u64, generation: u64) -> AssignmentRow {
    AssignmentRow {
        cell: CellId(cell),
        epoch: Epoch(epoch),
        incarnation: Incarnation(inc),
        generation: Generation(generation),
        desktop_capable: true,
    }
}

/// The attempt-row bound the reconciliation decisions are judged at.
pub const MAX_ROWS: u64 = 1 << 20;

pub fn request_for(current: &AssignmentRow) -> HandoffRequest {
    let m = Measurement {
        measured_at: MonoMs(1_000),
        current_rtt_ms: 120,
        target_rtt_ms: 60,
    };
    HandoffRequest::new(authority_of(HOST, current), CellId(2), 100, m)
}

pub const NOW: MonoMs = MonoMs(1_000_000);

pub fn cell() -> SourceCell {
    SourceCell::new(source_config(), SRC, Incarnation(1))
}

pub fn drain(cell: &mut SourceCell) -> Vec<CellAction> {
    std::iter::from_fn(|| cell.poll_action()).collect()
}

/// A store with the host registered at SRC, and a cell whose control for it is installed.
pub fn registered() -> (AssignmentStore, SourceCell, SourceAuthority, Installed) {
    let (mut store, _) = new_store();
    let auth = store
        .register_control(NOW, HOST, SRC, Incarnation(1), true)
        .expect("register");
    let mut cell = cell();
    let installed = cell
        .handle_install_control(NOW, auth, true, None)
        .expect("install");
    (store, cell, auth, installed)
}

pub fn request(auth: SourceAuthority) -> HandoffRequest {
    HandoffRequest::new(auth, TGT, 100, good_measurement(NOW))
}

pub fn txn_of(actions: &[CellAction]) -> (MachineId, switchyard_core::handoff::AttemptRef) {
    actions
        .iter()
        .find_map(|a| match a {
            CellAction::Machine {
                machine,
                action: HandoffAction::RunTransaction { attempt, .. },
                ..
            } => Some((*machine, *attempt)),
            _ => None,
        })
        .expect("a transaction to run")
}

pub const OTHER_HOST: switchyard_core::handoff::HostId = switchyard_core::handoff::HostId(99);
