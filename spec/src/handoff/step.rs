//! The step function: each action fed to the core, its outputs drained into the environment.

use super::*;

/// What draining the machine's actions produced.
#[derive(Debug, Default)]
pub(super) struct Drained {
    pub(super) retire: Option<(RetireReason, usize)>,
    pub(super) reopen: bool,
    pub(super) reply: Option<usize>,
}

impl HandoffModel {
    /// Drain machine `inst`'s actions into the environment (DB jobs, the fence to write).
    fn drain(state: &mut HoState, inst: u8, after_quarantine: bool) -> Drained {
        let mut out = Drained::default();
        let mut actions = Vec::new();
        if let Some(m) = state.machine_mut(inst) {
            while let Some(action) = m.poll_action() {
                actions.push(action);
            }
        }
        for (index, action) in actions.into_iter().enumerate() {
            match action {
                Action::RunTransaction { attempt, request } => state.jobs.push(Job {
                    inst,
                    kind: JobKind::Transaction,
                    attempt,
                    request,
                    after_quarantine: false,
                }),
                Action::Reconcile { attempt, request } => state.jobs.push(Job {
                    inst,
                    kind: JobKind::Reconcile,
                    attempt,
                    request,
                    after_quarantine,
                }),
                Action::Quarantined { .. } => {}
                Action::RetireSourceDraining { reason } => out.retire = Some((reason, index)),
                Action::ReopenAdmission { .. } => out.reopen = true,
                Action::FenceAuthority { authority, .. } => state.pending_fence = Some(authority),
                // The asynchronous reply is lost on its way (see the module doc).
                Action::Reply(_) => out.reply = Some(index),
            }
        }
        state.jobs.sort_by_key(Job::key);
        out
    }

    /// The step function: the real core, fed the action, outputs drained and judged.
    pub fn step(&self, before: &HoState, action: HoAction) -> HoState {
        self.step_journaled(before, action, &mut ())
    }

    /// [`Self::step`], recording every call into the store and its answer (trace replay
    /// against another store).
    pub fn step_journaled<J: StoreJournal>(
        &self,
        before: &HoState,
        action: HoAction,
        journal: &mut J,
    ) -> HoState {
        let mut state = before.clone();
        state.last = StepFacts::default();
        match action {
            HoAction::DirectorSends { lost } => Self::director_sends(&mut state, lost),
            HoAction::DirectorCrashRestart => {
                state.budget.faults -= 1;
                let old = state.dir_request.take();
                state.last.events.crash_during_attempt =
                    state.src.as_ref().is_some_and(|m| m.attempt().is_some());
                let new = Self::pick(&state);
                if let (Some(old), Some(new)) = (old, new) {
                    state.last.anomalies.op_id_inconsistent =
                        (old.source == new.source) != (old.op_id == new.op_id);
                }
                state.dir_request = new;
            }
            HoAction::ClientArrives { client } => Self::client_arrives(&mut state, client),
            HoAction::ClientAttaches { client } => Self::client_attaches(&mut state, client),
            HoAction::ClientPersisted { client } => Self::client_persisted(&mut state, client),
            HoAction::ClientLeaves { client } => {
                let c = &mut state.clients[usize::from(client)];
                if let (ClientPhase::Attached(t), Some(src)) = (c.phase, state.src.as_mut()) {
                    let _ = src.release(t);
                }
                c.phase = ClientPhase::Away;
            }
            HoAction::ControlActivates => {
                state.budget.faults -= 1;
                state.budget.replacements -= 1;
                if let Some(src) = state.src.as_mut() {
                    let gate = admission_kind(src);
                    match src.acquire(WorkKind::ControlOp) {
                        Ok(t) => state.control = Some(t),
                        Err(r) => {
                            state.last.events.control_gated = r == AdmissionRefusal::ControlGated;
                            state.last.anomalies.gated_refusal_wrong =
                                gate == GateKind::Gated && r != AdmissionRefusal::ControlGated;
                        }
                    }
                }
            }
            HoAction::ControlRebinds => Self::control_rebinds(&mut state, journal),
            HoAction::ControlCloses => {
                state.budget.faults -= 1;
                if let Some(src) = state.src.as_mut() {
                    let generation = src.authority().generation;
                    let _ = src.handle_session_closed(state.now, generation);
                }
            }
            HoAction::SourceRestart { old_lingers } => {
                Self::source_restart(&mut state, old_lingers, journal)
            }
            HoAction::DbRuns { job, delivery } | HoAction::LateCallback { job, delivery } => {
                Self::db_runs(&mut state, usize::from(job), delivery, journal);
            }
            HoAction::DbOutage => {
                state.budget.faults -= 1;
                state.db_up = false;
            }
            HoAction::DbRecovers => state.db_up = true,
            HoAction::FenceWrites => {
                if let Some(authority) = state.pending_fence.take() {
                    let answer = state.store.emergency_drain(&authority);
                    journal.record(StoreCall::EmergencyDrain { authority, answer });
                    state.last.events.fence_landed_first =
                        matches!(answer, DrainWrite::Fenced { .. });
                }
            }
            HoAction::EmergencyDrain => {
                state.budget.faults -= 1;
                state.budget.drains -= 1;
                if let Some(src) = state.src.as_mut() {
                    state.last.events.drained_during_attempt = src.attempt().is_some();
                    let _ = src.handle_emergency_drain(state.now, DrainReason::Emergency);
                }
                let inst = state.inst;
                let _ = Self::drain(&mut state, inst, false);
            }
            HoAction::Disable => {
                state.budget.faults -= 1;
                state.disabled = true;
                state.store.set_enabled(false);
                journal.record(StoreCall::SetEnabled { enabled: false });
                if let Some(src) = state.src.as_mut() {
                    let _ = src.handle_set_enabled(state.now, false);
                }
            }
            HoAction::TargetCapacity { full } => {
                state.budget.faults -= 1;
                state.target_full = full;
                let inc = state
                    .store
                    .cell(TGT)
                    .map_or(Incarnation(1), |c| c.incarnation);
                let row = Self::cell_row(u32::from(!full), inc);
                let answer = state.store.upsert_cell(TGT, row);
                journal.record(StoreCall::UpsertCell {
                    cell: TGT,
                    row,
                    answer,
                });
                answer.expect("known cell");
            }
            HoAction::TargetRegisters => {
                let inc = state
                    .store
                    .cell(TGT)
                    .map_or(Incarnation(1), |c| c.incarnation);
                state.last.events.target_registered =
                    Self::register(&mut state.store, state.now, TGT, inc, journal).is_ok();
            }
            HoAction::TimeAdvances => {
                state.budget.time_advances -= 1;
                if let Some(at) = state.next_deadline() {
                    state.now = state.now.max(at);
                }
                let now = state.now;
                let insts: Vec<u8> = state.machines().map(|(i, _)| i).collect();
                for inst in insts {
                    let Some(m) = state.machine_mut(inst) else {
                        continue;
                    };
                    let from_quarantine = m.attempt().is_some_and(|a| {
                        matches!(
                            a.phase,
                            Phase::Quarantined {
                                cause: QuarantineCause::StoreUnavailable,
                                ..
                            }
                        )
                    });
                    let _ = m.handle_timeout(now);
                    let _ = Self::drain(&mut state, inst, from_quarantine);
                }
                let expired = state.store.expire_migrations(state.now);
                state.last.events.registration_recovered = !expired.is_empty();
                if J::RECORDS {
                    journal.record(StoreCall::ExpireMigrations {
                        now: state.now,
                        answer: expired,
                    });
                }
            }
        }
        Self::judge_transition(before, &mut state, action);
        // Symmetry reduction: clients are interchangeable (nothing in the core knows which
        // connection is the phone), so the state keeps them sorted.
        state.clients.sort_unstable();
        state
    }

    fn director_sends(state: &mut HoState, lost: bool) {
        let store_before = state.store.clone();
        let fresh_pick = state.dir_request.is_none();
        let Some(req) = state.dir_request.or_else(|| Self::pick(state)) else {
            return;
        };
        state.dir_request = Some(req);
        let live_work = state.live_work();
        let anomalies = &mut state.last.anomalies;
        anomalies.op_id_inconsistent = req.op_id != OpId::derive(&req.source, req.target)
            || (fresh_pick && state.store.authority(HOST) != Some(req.source));
        // Without a session for the host here (a restarted source found it moved), the
        // request is answered by the adapter: the director drops it.
        let mut answer = None;
        if let Some(src) = state.src.as_mut() {
            // HO-8 / HO-10: the open control's heartbeats and a stale DB lease at the same
            // instant (`&self` methods: they cannot count).
            let (counters, idle) = (src.gate().counters(), src.gate().is_idle());
            let unchanged =
                |m: &SourceHandoff| m.gate().counters() == counters && m.gate().is_idle() == idle;
            anomalies.heartbeat_counted = src.note_heartbeat(Heartbeat::Ping)
                != NotCounted::NotClientWork
                || src.note_heartbeat(Heartbeat::Pong) != NotCounted::NotClientWork
                || src.note_heartbeat(Heartbeat::ActivityRenewal) != NotCounted::NotClientWork
                || !unchanged(src);
            anomalies.lease_counted = src.note_activity_lease(ActivityLease::Missing)
                != NotCounted::NotIdlenessEvidence
                || src.note_activity_lease(ActivityLease::Expired {
                    expired_at: MonoMs::ZERO,
                }) != NotCounted::NotIdlenessEvidence
                || !unchanged(src);
            let machine_before = src.clone();
            let begin = src.begin_handoff(state.now, &req);
            let events = &mut state.last.events;
            match begin {
                Begin::Started(_) => {
                    anomalies.idleness_misjudged = live_work > 0;
                }
                Begin::Answered(reply) => {
                    anomalies.answer_changed_machine = *src != machine_before;
                    match reply {
                        HandoffReply::Busy {
                            counters: named, ..
                        } => {
                            events.busy = true;
                            anomalies.idleness_misjudged = live_work == 0;
                            anomalies.busy_counters_wrong =
                                named != counters || named == Counters::default();
                        }
                        HandoffReply::InProgress { .. } => {
                            events.answered_in_progress = !fresh_pick;
                        }
                        HandoffReply::Result(_) => events.answered_recorded_result = !fresh_pick,
                        HandoffReply::Refused {
                            reason: Refusal::Disabled,
                            ..
                        } => events.refused_disabled = true,
                        HandoffReply::Superseded { .. } | HandoffReply::Refused { .. } => {}
                    }
                }
            }
            answer = Some(begin);
        }
        let inst = state.inst;
        let _ = Self::drain(state, inst, false);
        // A final answer that arrives ends the director's work on this request.
        let keep = lost
            || matches!(
                answer,
                Some(Begin::Started(_) | Begin::Answered(HandoffReply::InProgress { .. }))
            );
        if !keep {
            state.dir_request = None;
        }
        state.last.anomalies.director_wrote_store = state.store != store_before;
    }

    fn client_refused(state: &mut HoState, refusal: AdmissionRefusal, gate: GateKind) {
        let wrong_cell = refusal == AdmissionRefusal::WrongCell
            && refusal.close_code() == Some(WRONG_CELL_CLOSE_CODE);
        state.last.events.wrong_cell_at_barrier = gate == GateKind::Gated && wrong_cell;
        state.last.anomalies.gated_refusal_wrong = gate == GateKind::Gated && !wrong_cell;
    }

    fn client_arrives(state: &mut HoState, client: u8) {
        let c = &mut state.clients[usize::from(client)];
        c.visits_left -= 1;
        let Some(src) = state.src.as_mut() else {
            return;
        };
        let gate = admission_kind(src);
        match src.acquire(WorkKind::Accept) {
            Ok(t) => c.phase = ClientPhase::Accepting(t),
            Err(r) => Self::client_refused(state, r, gate),
        }
    }

    fn client_attaches(state: &mut HoState, client: u8) {
        let c = &mut state.clients[usize::from(client)];
        let (ClientPhase::Accepting(accept), Some(src)) = (c.phase, state.src.as_mut()) else {
            c.phase = ClientPhase::Away;
            return;
        };
        if let Revalidation::Abandon { .. } = src.revalidate(accept) {
            state.last.events.abandoned = true;
            c.phase = ClientPhase::Away;
            return;
        }
        let gate = admission_kind(src);
        let attach = src.acquire(WorkKind::ClientConn);
        let _ = src.release(accept);
        match attach {
            Ok(conn) => c.phase = ClientPhase::Attaching(conn),
            Err(r) => {
                c.phase = ClientPhase::Away;
                Self::client_refused(state, r, gate);
            }
        }
    }

    fn client_persisted(state: &mut HoState, client: u8) {
        let c = &mut state.clients[usize::from(client)];
        let (ClientPhase::Attaching(conn), Some(src)) = (c.phase, state.src.as_mut()) else {
            c.phase = ClientPhase::Away;
            return;
        };
        match src.revalidate(conn) {
            Revalidation::Continue => c.phase = ClientPhase::Attached(conn),
            Revalidation::Abandon { .. } => {
                state.last.events.abandoned = true;
                c.phase = ClientPhase::Away;
            }
        }
    }

    fn control_rebinds<J: StoreJournal>(state: &mut HoState, journal: &mut J) {
        let Some(ticket) = state.control.take() else {
            return;
        };
        let moved = state.moved();
        let Some(src) = state.src.as_mut() else {
            return;
        };
        if let Revalidation::Abandon { .. } = src.revalidate(ticket) {
            state.last.events.abandoned = true;
            return;
        }
        let inc = src.authority().incarnation;
        match Self::register(&mut state.store, state.now, SRC, inc, journal) {
            Ok(auth) => {
                state.last.anomalies.registered_over_move = moved;
                let rebound = src.handle_rebind(state.now, ticket, auth, true).is_ok();
                state.last.events.rebound = rebound;
                state.last.anomalies.registered_not_rebound = !rebound;
            }
            Err(RegisterRefusal::NotAssignedHere { .. }) => {
                state.last.events.restart_refused_moved = true;
            }
            Err(_) => {}
        }
        let _ = src.release(ticket);
    }

    /// The desktop's control registers at `cell` (journaled).
    fn register<J: StoreJournal>(
        store: &mut AssignmentStore,
        now: MonoMs,
        cell: CellId,
        incarnation: Incarnation,
        journal: &mut J,
    ) -> Result<SourceAuthority, RegisterRefusal> {
        let answer = store.register_control(now, HOST, cell, incarnation, true);
        journal.record(StoreCall::RegisterControl {
            now,
            host: HOST,
            cell,
            incarnation,
            desktop_capable: true,
            answer,
        });
        answer
    }

    fn source_restart<J: StoreJournal>(state: &mut HoState, old_lingers: bool, journal: &mut J) {
        state.budget.faults -= 1;
        state.budget.restarts -= 1;
        let moved = state.moved();
        let inc = state
            .store
            .cell(SRC)
            .map_or(Incarnation(1), |c| Incarnation(c.incarnation.0 + 1));
        // The old process is gone: its clients' connections and its control op with it.
        for c in &mut state.clients {
            c.phase = ClientPhase::Away;
        }
        state.control = None;
        state.old_src = if old_lingers {
            state.src.take().map(Box::new)
        } else {
            None
        };
        state.inst += 1;
        match Self::register(&mut state.store, state.now, SRC, inc, journal) {
            Ok(auth) => {
                state.last.anomalies.registered_over_move = moved;
                let mut src = SourceHandoff::new(Self::source_config(), auth, true);
                if state.disabled {
                    let _ = src.handle_set_enabled(state.now, false);
                }
                state.src = Some(src);
            }
            Err(refusal) => {
                state.last.events.restart_refused_moved =
                    matches!(refusal, RegisterRefusal::NotAssignedHere { .. });
                state.src = None;
            }
        }
    }

    fn db_runs<J: StoreJournal>(
        state: &mut HoState,
        index: usize,
        delivery: Delivery,
        journal: &mut J,
    ) {
        let job = state.jobs.remove(index);
        let late = !state.is_current_job(&job);
        let auth_before = state.store.authority(HOST);
        let recorded_before = state.store.attempt(job.request.op_id).is_some();
        let result = match delivery {
            Delivery::Unavailable => DurableResult::StoreUnavailable,
            Delivery::Delivered | Delivery::Lost => {
                let (now, request) = (state.now, job.request);
                let outcome = match job.kind {
                    JobKind::Transaction => {
                        let answer = state.store.run_transaction(now, &request);
                        journal.record(StoreCall::RunTransaction {
                            now,
                            request,
                            answer,
                        });
                        Some(answer)
                    }
                    JobKind::Reconcile => {
                        let answer = state.store.reconcile(now, &request);
                        journal.record(StoreCall::Reconcile {
                            now,
                            request,
                            answer,
                        });
                        answer
                    }
                };
                state.last.events.stale_txn_rejected = job.inst != state.inst
                    && job.kind == JobKind::Transaction
                    && matches!(outcome, Some(TxnOutcome::AuthorityChanged { .. }));
                match (outcome, delivery) {
                    (None, _) => DurableResult::StoreUnavailable,
                    (Some(_), Delivery::Lost) => DurableResult::Ambiguous(Ambiguity::ResultLost),
                    (Some(o), _) => DurableResult::Done(o),
                }
            }
        };
        let auth_after = state.store.authority(HOST);
        if auth_after.map(|a| a.epoch) != auth_before.map(|a| a.epoch) {
            Self::judge_commit(state, &job, auth_before, auth_after, recorded_before);
        }
        // The machine that asked, if it still lives; else the current one (a late callback).
        let to = if state.machine(job.inst).is_some() {
            job.inst
        } else {
            state.inst
        };
        let now = state.now;
        let Some(m) = state.machine_mut(to) else {
            return;
        };
        let machine_before = m.clone();
        let in_flight = m.attempt().is_some();
        let _ = match job.kind {
            JobKind::Transaction => m.handle_transaction_result(now, job.attempt, result),
            JobKind::Reconcile => m.handle_reconcile_result(now, job.attempt, result),
        };
        let changed = *m != machine_before;
        let finished = in_flight && m.attempt().is_none();
        let reopened =
            machine_before.gate().barrier().is_some() && m.gate().state() == GateState::Open;
        let explicit_rollback =
            !late && matches!(result, DurableResult::Done(TxnOutcome::RolledBack { .. }));
        if late {
            state.last.events.late_from_old_machine = job.inst != to;
            state.last.anomalies.late_callback_changed_machine = changed;
        }
        state.last.anomalies.reopened_without_rollback = reopened && !explicit_rollback;
        let drained = Self::drain(state, to, false);
        if finished {
            Self::judge_finish(state, to, &job, &drained);
            if to != state.inst {
                // The old process exits once its attempt has ended.
                state.old_src = None;
            }
        }
    }
}

/// The source's admission as a client sees it: a drained source is `Drained` whatever its
/// barrier (the hard-drain path answers it, HO-A5).
pub(super) fn admission_kind(m: &SourceHandoff) -> GateKind {
    if m.gate().is_drained() {
        GateKind::Drained
    } else {
        GateKind::of(m.gate().state())
    }
}
