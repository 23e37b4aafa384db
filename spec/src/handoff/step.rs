//! The step function: each action is the adapter's sequence of `SourceCell` and store calls,
//! and every `CellAction` the cell emits is executed by the environment (DB jobs, the fence to
//! write, the sessions to close). The judges it calls live beside their properties
//! (`properties.rs`).

use super::*;

/// What executing one process's `CellAction`s produced (indices are positions in that batch).
#[derive(Debug, Default)]
pub(super) struct Outputs {
    pub(super) retire: Option<(RetireReason, usize)>,
    /// A `CloseControl` for a retirement (HO-S5: before the retire).
    pub(super) close_retired: Option<usize>,
    pub(super) close_drained: bool,
    pub(super) reopen: bool,
    pub(super) reply: Option<usize>,
    pub(super) hard_drain: bool,
    pub(super) forget: bool,
    /// The session a newer control replaced (HO-A4).
    pub(super) replaced: Option<SessionId>,
    /// HO-A5: a failed fence write was reported (`FenceFailed`).
    pub(super) fence_failed: bool,
}

/// A registered control and what `install_control` made of it ([`HandoffModel::register_and_install`]).
#[derive(Debug)]
pub(super) struct Registration {
    /// The host's machine before the registration.
    pub(super) machine_before: Option<(MachineId, SourceHandoff)>,
    pub(super) installed: Result<Installed, InstallRefusal>,
}

impl HandoffModel {
    /// Execute process `inst`'s queued `CellAction`s: DB jobs (naming the machine that asked),
    /// the fence to write, the sessions to close.
    pub(super) fn execute(state: &mut HoState, inst: u8, after_quarantine: bool) -> Outputs {
        let mut out = Outputs::default();
        let mut actions = Vec::new();
        if let Some(cell) = state.cell_of_mut(inst) {
            while let Some(action) = cell.poll_action() {
                actions.push(action);
            }
        }
        for (index, action) in actions.into_iter().enumerate() {
            match action {
                CellAction::Machine {
                    machine, action, ..
                } => match action {
                    HandoffAction::RunTransaction { attempt, request } => state.jobs.push(Job {
                        inst,
                        machine,
                        kind: JobKind::Transaction,
                        attempt,
                        request,
                        after_quarantine: false,
                    }),
                    HandoffAction::Reconcile { attempt, request } => state.jobs.push(Job {
                        inst,
                        machine,
                        kind: JobKind::Reconcile,
                        attempt,
                        request,
                        after_quarantine,
                    }),
                    HandoffAction::Quarantined { .. } => {}
                    HandoffAction::RetireSourceDraining { reason } => {
                        out.retire = Some((reason, index))
                    }
                    HandoffAction::ReopenAdmission { .. } => out.reopen = true,
                    HandoffAction::FenceAuthority { authority, .. } => {
                        state.pending_fence = Some(FenceJob {
                            inst,
                            machine,
                            authority,
                        });
                    }
                    HandoffAction::FenceFailed { .. } => out.fence_failed = true,
                    // The asynchronous reply is lost on its way (see the module doc).
                    HandoffAction::Reply(_) => out.reply = Some(index),
                },
                // The DRAINING frame goes out; the socket's end reaches the cell later, at any
                // step (`judge_late_inputs`).
                CellAction::CloseControl {
                    session, reason, ..
                } => match reason {
                    CloseReason::Retired(_) => out.close_retired = Some(index),
                    CloseReason::Drained(_) => out.close_drained = true,
                    CloseReason::Replaced => out.replaced = Some(session),
                },
                // The clients' own steps close them (module doc).
                CellAction::HardDrain { .. } => out.hard_drain = true,
                CellAction::Forget { .. } => out.forget = true,
            }
        }
        state.jobs.sort_by_key(Job::key);
        out
    }

    /// The step function: the real core, fed the action, outputs executed and judged.
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
        if action == HoAction::SecondProcessStarts {
            return Self::second_process_starts(before, journal);
        }
        let mut state = before.clone();
        state.last = StepFacts::default();
        match action {
            HoAction::DirectorSends { lost } => Self::director_sends(&mut state, lost),
            HoAction::DirectorCrashRestart => Self::director_crash_restart(&mut state),
            HoAction::ClientArrives { client } => Self::client_arrives(&mut state, client),
            HoAction::ClientAttaches { client } => Self::client_attaches(&mut state, client),
            HoAction::ClientPersisted { client } => {
                Self::client_persisted(&mut state, client, false);
            }
            HoAction::ClientPersistFails { client } => {
                Self::client_persisted(&mut state, client, true);
            }
            HoAction::ClientLeaves { client } => {
                let c = &mut state.clients[usize::from(client)];
                let (phase, splice) = (c.phase, c.splice.take());
                c.phase = ClientPhase::Away;
                // The client loop's splices go first, then the connection's guard.
                if let Some(splice) = splice {
                    Self::release_work(&mut state, splice);
                }
                if let ClientPhase::Attached(held) = phase {
                    Self::release_work(&mut state, held);
                }
            }
            HoAction::ClientRelays { client } => Self::client_relays(&mut state, client),
            HoAction::DesktopAcks { client } => {
                if let Some(splice) = state.clients[usize::from(client)].splice.take() {
                    Self::release_work(&mut state, splice);
                }
            }
            HoAction::PendingOpens => {
                state.budget.pending_conns -= 1;
                let gate = admission_kind(state.src());
                match state.cell.handle_acquire(HOST, WorkKind::PendingConn) {
                    Ok(work) => state.pending = Some(Held::of(work)),
                    Err(r) => Self::judge_client_refused(&mut state, r, gate),
                }
            }
            HoAction::PendingEnds => {
                if let Some(held) = state.pending.take() {
                    if state.cell.handle_revalidate(&held.work()) {
                        Self::release_work(&mut state, held);
                    } else {
                        // HO-A4 witness: a late continuation abandons.
                        state.last.events.abandoned = true;
                        Self::judge_late_release(&mut state, held);
                    }
                }
            }
            HoAction::ControlActivates => {
                state.budget.faults -= 1;
                state.budget.replacements -= 1;
                Self::control_activates(&mut state, ControlKind::Replacement, journal);
            }
            HoAction::DesktopReconnects => {
                state.budget.reconnects -= 1;
                Self::control_activates(&mut state, ControlKind::Reconnect, journal);
            }
            HoAction::ControlRegisters => Self::control_registers(&mut state, journal),
            HoAction::ControlCloses => {
                state.budget.faults -= 1;
                if let Some(session) = state.cell.control(HOST) {
                    let told = state.cell.handle_control_closed(state.now, HOST, session);
                    // HO-A3: the close of the open control session reaches its machine.
                    state.last.anomalies.open_session_close_ignored =
                        !told || state.src().is_some_and(SourceHandoff::session_open);
                }
                let inst = state.inst;
                let _ = Self::execute(&mut state, inst, false);
            }
            HoAction::SourceRestart { old_lingers } => {
                Self::source_restart(&mut state, old_lingers, journal);
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
                if let Some(job) = state.pending_fence.take() {
                    let authority = job.authority;
                    let answer = state.store.make_mut().emergency_drain(&authority);
                    journal.record(StoreCall::EmergencyDrain { authority, answer });
                    // HO-A5 witness: the drain fence lands before the transaction.
                    state.last.events.fence_landed_first =
                        matches!(answer, DrainWrite::Fenced { .. });
                    Self::fence_result(&mut state, job, FenceResult::Written(answer));
                }
            }
            HoAction::FenceFails => {
                if let Some(job) = state.pending_fence.take() {
                    Self::fence_result(&mut state, job, FenceResult::Failed);
                }
            }
            HoAction::EmergencyDrain => Self::emergency_drain(&mut state),
            HoAction::Undrain => Self::undrain(&mut state),
            HoAction::Disable | HoAction::Enable => {
                let enabled = action == HoAction::Enable;
                if !enabled {
                    state.budget.faults -= 1;
                }
                state.disabled = !enabled;
                state.store.make_mut().set_enabled(enabled);
                journal.record(StoreCall::SetEnabled { enabled });
                let now = state.now;
                state.cell.handle_set_enabled(now, enabled);
                if let Some(old) = state.old_cell.as_deref_mut() {
                    old.handle_set_enabled(now, enabled);
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
                let answer = state.store.make_mut().upsert_cell(TGT, row);
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
                // HO-A6 witness: the desktop registers at the target.
                state.last.events.target_registered =
                    Self::register(&mut state.store.make_mut(), state.now, TGT, inc, journal)
                        .is_ok();
            }
            HoAction::TimeAdvances => Self::time_advances(&mut state, journal),
            HoAction::SecondProcessStarts => {}
            HoAction::SecondControlActivates => Self::second_control_activates(&mut state),
            HoAction::SecondControlRegisters => {
                Self::second_control_registers(&mut state, journal);
            }
        }
        Self::judge_live_stale_releases(&mut state);
        Self::follow_escrow(before, &mut state, action);
        Self::judge_transition(before, &mut state, action);
        Self::judge_late_inputs(&mut state);
        // Symmetry reduction: clients are interchangeable (nothing in the core knows which
        // connection is the phone), so the state keeps them sorted.
        state.clients.sort_unstable();
        debug_assert!(
            state.store.digest_is_exact(),
            "the store's digest is its own"
        );
        state
    }

    fn director_sends(state: &mut HoState, lost: bool) {
        let store_before = state.store.clone();
        let fresh_pick = state.dir_request.is_none();
        let Some(req) = state.dir_request.or_else(|| Self::pick(state)) else {
            return;
        };
        state.dir_request = Some(req);
        Self::judge_request(state, &req, fresh_pick);
        let live_work = state.live_work();
        let machine_before = state.cell.machine(HOST).map(|(id, m)| (id, m.clone()));
        if machine_before.is_some() {
            Self::judge_control_traffic(state);
        }
        let begin = match state.cell.handle_request(state.now, &req) {
            // HO-A1: the adapter reads the op's durable record (read-only) when the machine
            // that held the attempt is no longer there to answer.
            Begin::Answered(reply) if state.db_up && needs_durable_record(&reply) => {
                Begin::Answered(answer_from_record(reply, state.store.attempt(req.op_id)))
            }
            begin => begin,
        };
        Self::judge_refusal_hold(state, &req, begin, machine_before.as_ref());
        Self::judge_begin(state, begin, machine_before, live_work, fresh_pick);
        let inst = state.inst;
        let _ = Self::execute(state, inst, false);
        // A final answer that arrives ends the director's work on this request.
        let keep = lost
            || matches!(
                begin,
                Begin::Started(_) | Begin::Answered(HandoffReply::InProgress { .. })
            );
        if !keep {
            state.dir_request = None;
        }
        // HO-S1: the pick is read-only.
        state.last.anomalies.director_wrote_store = state.store != store_before;
    }

    /// HO-L4: a request of an op id the store refused for a reason that clears is answered
    /// from that result only inside the hold (by the spec's record of when it ended); after
    /// it, by the machine that held the attempt, it starts a new attempt.
    fn judge_refusal_hold(
        state: &mut HoState,
        req: &HandoffRequest,
        begin: Begin,
        machine_before: Option<&(MachineId, SourceHandoff)>,
    ) {
        let Some((op, at)) = state.refused else {
            return;
        };
        if op != req.op_id {
            return;
        }
        let same_machine = machine_before
            .and_then(|(_, m)| m.last_result())
            .is_some_and(|r| r.op_id == op);
        let hold_over = state.now >= at.plus_ms(MODEL_REFUSAL_HOLD_MS);
        match begin {
            Begin::Started(_) => {
                state.last.events.refused_tried_anew = true;
                state.last.anomalies.refusal_misheld = !hold_over;
                state.refused = None;
            }
            Begin::Answered(HandoffReply::Result(_)) => {
                state.last.anomalies.refusal_misheld = hold_over && same_machine;
            }
            Begin::Answered(_) => {}
        }
    }

    fn director_crash_restart(state: &mut HoState) {
        state.budget.faults -= 1;
        let old = state.dir_request.take();
        // HO-A3 witness: the director crashes during an attempt.
        state.last.events.crash_during_attempt = state.src().is_some_and(|m| m.attempt().is_some());
        let new = Self::pick(state);
        if let (Some(old), Some(new)) = (old, new) {
            // HO-S1: a re-pick reuses the op id exactly when the authority is the same.
            state.last.anomalies.op_id_inconsistent =
                (old.source == new.source) != (old.op_id == new.op_id);
        }
        if let Some(new) = &new {
            // HO-S1: an op id names one move.
            state.last.anomalies.op_id_shared = Self::op_id_shared(state, new, true);
        }
        state.dir_request = new;
    }

    fn client_arrives(state: &mut HoState, client: u8) {
        state.clients[usize::from(client)].visits_left -= 1;
        let gate = admission_kind(state.src());
        match state.cell.handle_acquire(HOST, WorkKind::Accept) {
            Ok(work) => {
                state.clients[usize::from(client)].phase =
                    ClientPhase::Accepting(Attach::new(work));
            }
            Err(r) => Self::judge_client_refused(state, r, gate),
        }
    }

    /// After the upgrade's await: the attach machine re-checks and sends the activity write
    /// out (the adapter's `client_session`).
    fn client_attaches(state: &mut HoState, client: u8) {
        let c = usize::from(client);
        let ClientPhase::Accepting(mut attach) = state.clients[c].phase else {
            state.clients[c].phase = ClientPhase::Away;
            return;
        };
        state.clients[c].phase = ClientPhase::Away;
        let held = attach.ticket().map(Held::of);
        match attach.poll(&mut state.cell) {
            AttachStep::Persist { .. } => state.clients[c].phase = ClientPhase::Attaching(attach),
            AttachStep::Close(AttachClose::Abandoned) => {
                // HO-A4 witness: a late continuation abandons.
                state.last.events.abandoned = true;
                if let Some(held) = held {
                    Self::judge_late_release(state, held);
                }
            }
            // HO-7: the attach machine keeps its order.
            _ => state.last.anomalies.attach_misjudged = true,
        }
    }

    /// The activity write's result (`failed`: the store did not take it), then the attach
    /// machine's next step: attached, abandoned, refused, or closed `activity_not_persisted`.
    fn client_persisted(state: &mut HoState, client: u8, failed: bool) {
        let c = usize::from(client);
        let ClientPhase::Attaching(mut attach) = state.clients[c].phase else {
            state.clients[c].phase = ClientPhase::Away;
            return;
        };
        state.clients[c].phase = ClientPhase::Away;
        let Some(held) = attach.ticket().map(Held::of) else {
            // HO-7: the attach machine keeps its order.
            state.last.anomalies.attach_misjudged = true;
            return;
        };
        let gate = admission_kind(state.src());
        let taken = attach.handle_persisted(if failed { Err(PersistFailed) } else { Ok(()) });
        let step = attach.poll(&mut state.cell);
        // HO-7: the attach machine keeps its order.
        state.last.anomalies.attach_misjudged = !taken
            || (failed && step != AttachStep::Close(AttachClose::ActivityNotPersisted))
            || attach.ticket().is_some();
        match step {
            AttachStep::Attached(conn) => {
                state.clients[c].phase = ClientPhase::Attached(Held::of(conn));
            }
            AttachStep::Close(close) => {
                match close {
                    // HO-A4 witness: a late continuation abandons.
                    AttachClose::Abandoned => state.last.events.abandoned = true,
                    AttachClose::Refused(r) => Self::judge_client_refused(state, r, gate),
                    AttachClose::ActivityNotPersisted => {
                        Self::judge_persist_failed(state, held, close);
                    }
                }
                Self::judge_late_release(state, held);
            }
            AttachStep::Persist { .. } | AttachStep::Wait => {
                // HO-7: the attach machine keeps its order.
                state.last.anomalies.attach_misjudged = true;
            }
        }
    }

    /// HO-A5: a fence write's result, fed to the process and machine that asked (a dead
    /// process hears nothing).
    fn fence_result(state: &mut HoState, job: FenceJob, result: FenceResult) {
        let now = state.now;
        let Some(cell) = state.cell_of_mut(job.inst) else {
            return;
        };
        let before = cell
            .machine(HOST)
            .filter(|(id, _)| *id == job.machine)
            .and_then(|(_, m)| m.pending_fence().copied());
        let _ = cell.handle_fence_result(now, HOST, job.machine, result);
        let after = cell
            .machine(HOST)
            .filter(|(id, _)| *id == job.machine)
            .and_then(|(_, m)| m.pending_fence().copied());
        let out = Self::execute(state, job.inst, false);
        Self::judge_fence_result(state, before, after, result, &out);
    }

    /// The environment's work ends: its guard releases the ticket (then a late duplicate of
    /// that release is judged).
    pub(super) fn release_work(state: &mut HoState, held: Held) {
        let _ = state.cell.handle_release(&held.work());
        Self::judge_late_release(state, held);
    }

    /// An attached client relays a mutation (the adapter's `relay_mutation`).
    fn client_relays(state: &mut HoState, client: u8) {
        state.budget.splices -= 1;
        // Refused (drained, retired): the mutation is answered undelivered, nothing held.
        let Ok(work) = state.cell.handle_acquire(HOST, WorkKind::Splice) else {
            return;
        };
        let held = Held::of(work);
        if state.cell.control(HOST).is_some() {
            state.clients[usize::from(client)].splice = Some(held);
        } else {
            // The desktop is not connected: the splice is dropped at once.
            Self::release_work(state, held);
        }
    }

    fn control_activates<J: StoreJournal>(state: &mut HoState, kind: ControlKind, journal: &mut J) {
        let gate = admission_kind(state.src());
        // HO-A5: a drained host is refused before the store is written (each registration
        // would renew the generation); elsewhere `handle_install_control` decides after it.
        let refusal = state.cell.control_refusal(HOST);
        state.last.anomalies.control_refusal_wrong =
            refusal.is_some() != (gate == Some(GateKind::Drained));
        if let Some(refusal) = refusal {
            // HO-A5 witness: a drained source refuses the new registration.
            state.last.events.reconnect_refused_draining =
                refusal == InstallRefusal::SourceDraining;
            return;
        }
        match state.cell.handle_begin_control(HOST) {
            Ok(work) => {
                state.control = Some(ControlOp {
                    kind,
                    held: work.map(Held::of),
                });
                if work.is_none() {
                    // No live machine: nothing is held across the registration's await, and
                    // none can become live in between in this process (a retired or drained
                    // machine stays so; an undrain leaves none), so the install follows at
                    // once: every state it could follow in is a state this step runs from.
                    Self::control_registers(state, journal);
                }
            }
            Err(r) => {
                // HO-S3 and its witness: an activation at a gated source is refused ControlGated.
                state.last.events.control_gated = r == AdmissionRefusal::ControlGated;
                state.last.anomalies.gated_refusal_wrong =
                    gate == Some(GateKind::Gated) && r != AdmissionRefusal::ControlGated;
            }
        }
    }

    fn control_registers<J: StoreJournal>(state: &mut HoState, journal: &mut J) {
        let Some(op) = state.control.take() else {
            return;
        };
        match Self::register_and_install(state, op, journal) {
            Ok(registration) => {
                Self::judge_install(
                    state,
                    op,
                    registration.machine_before.as_ref(),
                    registration.installed,
                );
                // `handle_install_control` consumed the activation's ticket.
                if let Some(held) = op.held {
                    Self::judge_late_release(state, held);
                }
            }
            Err(refusal) => {
                // HO-A4 witness: the commit wins over the restart.
                state.last.events.restart_refused_moved =
                    matches!(refusal, RegisterRefusal::NotAssignedHere { .. });
                // The activation's guard releases its ticket on this exit path.
                if let Some(held) = op.held {
                    Self::release_work(state, held);
                }
            }
        }
        let inst = state.inst;
        let out = Self::execute(state, inst, false);
        Self::judge_replaced_session(state, &out);
    }

    /// An activation's registration, the part the first and the second activation share
    /// (`control_registers`, `races.rs`'s `second_control_registers`): the store registers
    /// the control (journaled), then `install_control` decides with the activation's ticket.
    /// The adapter registers without re-checking the ticket: `install_control` decides with it
    /// (a drain in between: refused; a ticket of a replaced machine: a no-op). Records HO-A4's
    /// `registered_over_move`; the caller judges the install and releases the ticket.
    pub(super) fn register_and_install<J: StoreJournal>(
        state: &mut HoState,
        op: ControlOp,
        journal: &mut J,
    ) -> Result<Registration, RegisterRefusal> {
        let work = op.held.map(Held::work);
        let moved = state.moved();
        let machine_before = state.cell.machine(HOST).map(|(id, m)| (id, m.clone()));
        let inc = state.cell.incarnation();
        let now = state.now;
        let auth = Self::register(&mut state.store.make_mut(), now, SRC, inc, journal)?;
        // HO-A4: a registration at the source succeeded although the host had moved.
        state.last.anomalies.registered_over_move = moved;
        let installed = state.cell.handle_install_control(now, auth, true, work);
        Ok(Registration {
            machine_before,
            installed,
        })
    }

    /// The desktop's control registers at `cell` (journaled).
    pub(super) fn register<J: StoreJournal>(
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

    /// HO-L2: a second process with the source cell's id, while the holder's lease is live:
    /// refused, and no row written. A correct store leaves the state as it was (step facts
    /// included: the step adds no state); a wrong one is judged.
    fn second_process_starts<J: StoreJournal>(before: &HoState, journal: &mut J) -> HoState {
        let mut state = before.clone();
        let answer = Self::start_cell(&mut state.store.make_mut(), state.now, journal);
        if !matches!(answer, Err(StartRefusal::Held(_))) || state.store != before.store {
            state.last = StepFacts::default();
            // HO-L2: one live process per cell id.
            state.last.anomalies.second_process_started = true;
        }
        state
    }

    fn source_restart<J: StoreJournal>(state: &mut HoState, old_lingers: bool, journal: &mut J) {
        state.budget.faults -= 1;
        state.budget.restarts -= 1;
        let moved = state.moved();
        let holder = state.cell.incarnation();
        if old_lingers {
            // The stop signal: the old process releases its lease (a successor may start at
            // once) and finishes its attempt in flight without it.
            let answer = state.store.make_mut().release_cell_lease(SRC, holder);
            journal.record(StoreCall::ReleaseCellLease {
                cell: SRC,
                incarnation: holder,
                answer,
            });
            // HO-L2: one live process per cell id.
            state.last.anomalies.second_process_started = answer.is_err();
        } else {
            // The successor, started as the old process dies, is refused while the dead
            // process's lease runs (no row written); it takes the cell once the lease has
            // lapsed.
            let store_before = state.store.clone();
            let early = Self::start_cell(&mut state.store.make_mut(), state.now, journal);
            // HO-L2: one live process per cell id.
            state.last.anomalies.second_process_started =
                !matches!(early, Err(StartRefusal::Held(_))) || state.store != store_before;
            state.now = state.now.max(state.lease_until());
            // HO-L2 witness: a successor after the lease lapsed.
            state.last.events.successor_after_lapse = true;
            // Nothing of the dead process has a timer; the store's expiry runs as time passes.
            Self::expire_registrations(state, journal);
        }
        let now = state.now;
        // The successor's start writes its cell row with the next incarnation and its lease,
        // before its first registration.
        let Ok(inc) = Self::start_cell(&mut state.store.make_mut(), now, journal) else {
            // Judged (HO-L2): a released or lapsed lease must be free.
            state.last.anomalies.second_process_started = true;
            return;
        };
        // HO-L2: one live process per cell id (and the lease's holder changed, an event).
        state.last.anomalies.second_process_started |= inc.0 != holder.0 + 1;
        state.last.events.lease_taken_or_renewed = true;
        // The old process's clients, pending connection, control activation and closing
        // sessions go with it.
        for c in &mut state.clients {
            c.phase = ClientPhase::Away;
            c.splice = None;
        }
        state.pending = None;
        state.control = None;
        state.control2 = None;
        state.undrained = false;
        let mut fresh = SourceCell::new(Self::source_config(), SRC, inc);
        if state.disabled {
            fresh.handle_set_enabled(now, false);
        }
        let mut old = std::mem::replace(&mut state.cell, fresh);
        state.old_cell = if old_lingers {
            // The desktop is at the new process: its socket to the old one ends (the attempt
            // in flight still completes there, HO-A3).
            if let Some(session) = old.control(HOST) {
                let _ = old.handle_control_closed(now, HOST, session);
            }
            Some(Box::new(old))
        } else {
            None
        };
        state.inst += 1;
        if old_lingers {
            let old = state.inst - 1;
            let _ = Self::execute(state, old, false);
        }
        let registered = Self::register(&mut state.store.make_mut(), now, SRC, inc, journal);
        match registered {
            Ok(auth) => {
                // HO-A4: a registration at the source succeeded although the host had moved.
                state.last.anomalies.registered_over_move = moved;
                let installed = state.cell.handle_install_control(now, auth, true, None);
                // HO-A4: a restarted process's registration gets a new machine.
                state.last.anomalies.registered_not_installed =
                    !installed.is_ok_and(|i| i.how == InstallKind::NewMachine);
            }
            Err(refusal) => {
                // HO-A4 witness: the commit wins over the restart.
                state.last.events.restart_refused_moved =
                    matches!(refusal, RegisterRefusal::NotAssignedHere { .. });
            }
        }
        let inst = state.inst;
        let _ = Self::execute(state, inst, false);
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
                        let token_path = state.escrow.token_path(&state.store, now);
                        let answer = state.store.make_mut().run_transaction(now, &request);
                        Self::judge_escrow_decision(state, token_path, &answer);
                        journal.record(StoreCall::RunTransaction {
                            now,
                            request,
                            answer,
                        });
                        Some(answer)
                    }
                    JobKind::Reconcile => {
                        let answer = state.store.make_mut().reconcile(now, &request);
                        journal.record(StoreCall::Reconcile {
                            now,
                            request,
                            answer,
                        });
                        answer
                    }
                };
                // HO-A4 witness: the old transaction fails its re-check.
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
        // The process that asked, if it still lives; else the current one (a dead process's
        // result cannot reach anyone: delivering it to its successor under the machine id it
        // names is the harshest late callback, since machine ids restart in every process).
        let to = if state.cell_of(job.inst).is_some() {
            job.inst
        } else {
            state.inst
        };
        let now = state.now;
        let Some(cell) = state.cell_of_mut(to) else {
            return;
        };
        let machine_before = cell.machine(HOST).map(|(id, m)| (id, m.clone()));
        let fed = match job.kind {
            JobKind::Transaction => {
                cell.handle_transaction_result(now, HOST, job.machine, job.attempt, result)
            }
            JobKind::Reconcile => {
                cell.handle_reconcile_result(now, HOST, job.machine, job.attempt, result)
            }
        };
        let after = cell.machine(HOST);
        let same_machine = machine_before
            .as_ref()
            .zip(after)
            .is_some_and(|((b, _), (a, _))| *b == a);
        let changed = machine_before.as_ref().map(|(id, m)| (*id, m)) != after;
        let finished = same_machine
            && machine_before
                .as_ref()
                .is_some_and(|(_, m)| m.attempt().is_some())
            && after.is_some_and(|(_, m)| m.attempt().is_none());
        let reopened = same_machine
            && machine_before
                .as_ref()
                .is_some_and(|(_, m)| m.gate().barrier().is_some())
            && after.is_some_and(|(_, m)| m.gate().state() == GateState::Open);
        let explicit_rollback =
            !late && matches!(result, DurableResult::Done(TxnOutcome::RolledBack { .. }));
        if late {
            Self::judge_late_result(state, &job, to, fed, changed);
        }
        // HO-A2: only a definitive rollback reopens.
        state.last.anomalies.reopened_without_rollback = reopened && !explicit_rollback;
        // HO-L4: the spec's record of a refusal that clears, and when its hold began.
        if let DurableResult::Done(TxnOutcome::RolledBack { reason }) = result {
            let clears = !matches!(reason, AbortReason::Fenced | AbortReason::InvalidOpId);
            if finished && reopened && clears && !late {
                state.refused = Some((job.request.op_id, now));
            }
        }
        let out = Self::execute(state, to, false);
        if finished {
            Self::judge_finish(state, to, &job, &out);
            if to != state.inst {
                // The old process exits once its attempt has ended.
                state.old_cell = None;
            }
        }
    }

    fn emergency_drain(state: &mut HoState) {
        state.budget.faults -= 1;
        state.budget.drains -= 1;
        // HO-A5 witness: a drain during an attempt.
        state.last.events.drained_during_attempt =
            state.src().is_some_and(|m| m.attempt().is_some());
        let open_before = state.cell.control(HOST).is_some();
        let drained = state
            .cell
            .handle_emergency_drain(state.now, HOST, DrainReason::Emergency);
        let inst = state.inst;
        let out = Self::execute(state, inst, false);
        Self::judge_drain(state, drained, open_before, &out);
    }

    fn undrain(state: &mut HoState) {
        let before = state.src().cloned();
        let result = state.cell.handle_undrain(HOST);
        if result.is_ok() {
            // A refused undrain changed nothing: the operator retries, at no cost.
            state.budget.undrains -= 1;
            state.undrained = true;
        }
        let inst = state.inst;
        let out = Self::execute(state, inst, false);
        Self::judge_undrain(state, before.as_ref(), result, &out);
    }

    fn time_advances<J: StoreJournal>(state: &mut HoState, journal: &mut J) {
        state.budget.time_advances -= 1;
        if let Some(at) = state.next_deadline() {
            state.now = state.now.max(at);
        }
        let now = state.now;
        // HO-L2: the live holder renews its lease every third of it, so across a jump of the
        // clock its lease still runs (the model's DB outages are shorter than a lease).
        let holder = state.cell.incarnation();
        let answer = state
            .store
            .make_mut()
            .renew_cell_lease(SRC, holder, now, MODEL_CELL_LEASE_MS);
        journal.record(StoreCall::RenewCellLease {
            cell: SRC,
            incarnation: holder,
            now,
            lease_ms: MODEL_CELL_LEASE_MS,
            answer,
        });
        // HO-L2: one live process per cell id (and the lease was taken, an event).
        state.last.anomalies.second_process_started = answer.is_err();
        state.last.events.lease_taken_or_renewed = true;
        let insts: Vec<u8> = state.cells().map(|(i, _)| i).collect();
        for inst in insts {
            let Some(cell) = state.cell_of_mut(inst) else {
                continue;
            };
            // The adapter's timer for the deadline `poll_timeout` named, fed to that machine.
            if let Some((machine, at)) = cell.poll_timeout(HOST) {
                if at <= now {
                    let from_quarantine = cell
                        .machine(HOST)
                        .and_then(|(_, m)| m.attempt())
                        .is_some_and(|a| {
                            matches!(
                                a.phase(),
                                Phase::Quarantined {
                                    cause: QuarantineCause::StoreUnavailable,
                                    ..
                                }
                            )
                        });
                    let _ = cell.handle_timeout(now, HOST, machine);
                    let _ = Self::execute(state, inst, from_quarantine);
                }
            }
        }
        Self::expire_registrations(state, journal);
    }

    /// HO-A6: the store's periodic expiry of migrations whose desktop did not register at the
    /// target, as the clock has moved.
    fn expire_registrations<J: StoreJournal>(state: &mut HoState, journal: &mut J) {
        let expired = state.store.make_mut().expire_migrations(state.now);
        // HO-A6 witness: registration expiry starts bounded recovery.
        state.last.events.registration_recovered = !expired.is_empty();
        if J::RECORDS {
            journal.record(StoreCall::ExpireMigrations {
                now: state.now,
                answer: expired,
            });
        }
    }
}

/// The source's admission as a client sees it: a drained source is `Drained` whatever its
/// barrier (the hard-drain path answers it, HO-A5); `None`: no machine for the host here.
pub(super) fn admission_kind(m: Option<&SourceHandoff>) -> Option<GateKind> {
    m.map(|m| {
        if m.gate().is_drained() {
            GateKind::Drained
        } else {
            GateKind::of(m.gate().state())
        }
    })
}
