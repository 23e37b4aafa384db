//! Where one-idea bugs slipped past the model (issue #25): two registrations of one host
//! racing (a second control activation of the desktop, the registrations scenario), and late
//! releases that name a *live* ticket with another generation.

use super::step::admission_kind;
use super::*;

impl HandoffModel {
    /// HO-A4: a second control activation (`control_refusal`, `handle_begin_control`), held across
    /// its registration's await. Where there is no live machine it holds no ticket, so a
    /// first registration may install a machine, and a barrier may stand, before it registers.
    pub(super) fn second_control_activates(state: &mut HoState) {
        state.budget.registrations -= 1;
        let gate = admission_kind(state.src());
        let refusal = state.cell.control_refusal(HOST);
        state.last.anomalies.control_refusal_wrong =
            refusal.is_some() != (gate == Some(GateKind::Drained));
        if refusal.is_some() {
            return;
        }
        let kind = if state.cell.control(HOST).is_some() {
            ControlKind::Replacement
        } else {
            ControlKind::Reconnect
        };
        match state.cell.handle_begin_control(HOST) {
            Ok(work) => {
                state.control2 = Some(ControlOp {
                    kind,
                    held: work.map(Held::of),
                });
            }
            Err(r) => {
                state.last.events.control_gated = r == AdmissionRefusal::ControlGated;
                state.last.anomalies.gated_refusal_wrong =
                    gate == Some(GateKind::Gated) && r != AdmissionRefusal::ControlGated;
            }
        }
    }

    /// The second activation registers (`register_control`) and `handle_install_control` decides
    /// with its ticket, whatever the first did meanwhile. Over a barrier (HO-S3 / HO-A4) the
    /// install must be refused `ControlGated` and leave the attempt's machine and barrier as
    /// they were (the registration renewed the generation, so the attempt in flight fails its
    /// re-check and the source retires stale; the desktop's retry installs over it).
    pub(super) fn second_control_registers<J: StoreJournal>(state: &mut HoState, journal: &mut J) {
        let Some(op) = state.control2.take() else {
            return;
        };
        let work = op.held.map(Held::work);
        let moved = state.moved();
        let machine_before = state.cell.machine(HOST).map(|(id, m)| (id, m.clone()));
        let inc = state.cell.incarnation();
        let now = state.now;
        let registered = Self::register(&mut state.store.make_mut(), now, SRC, inc, journal);
        match registered {
            Ok(auth) => {
                state.last.anomalies.registered_over_move = moved;
                let installed = state.cell.handle_install_control(now, auth, true, work);
                let gated = machine_before
                    .as_ref()
                    .and_then(|(id, m)| m.gate().barrier().map(|b| (*id, b)));
                match gated {
                    Some((id, barrier)) => {
                        let kept = state.cell.machine(HOST).is_some_and(|(now_id, m)| {
                            now_id == id && m.gate().barrier() == Some(barrier)
                        });
                        let refused = installed
                            == Err(InstallRefusal::Admission(AdmissionRefusal::ControlGated));
                        state.last.anomalies.installed_under_barrier = !(refused && kept);
                        state.last.events.registration_gated = refused && kept;
                    }
                    None => Self::judge_install(state, op, machine_before.as_ref(), installed),
                }
                if let Some(held) = op.held {
                    Self::judge_late_release(state, held);
                }
            }
            Err(_) => {
                if let Some(held) = op.held {
                    Self::release_work(state, held);
                }
            }
        }
        let inst = state.inst;
        let out = Self::execute(state, inst, false);
        Self::judge_replaced_session(state, &out);
    }

    /// HO-7: at every step, a late release names each *live* ticket of the current machine
    /// with another generation (one older, one newer than the ticket's: an old session's or
    /// an old process's guard reusing the id). Each must be reported `StaleGeneration` and
    /// change no counter and no live ticket. Fed to the state itself: a core that releases
    /// the ticket leaves the state wrong (the counters property fails too).
    pub(super) fn judge_live_stale_releases(state: &mut HoState) {
        let Some((machine, m)) = state.cell.machine(HOST) else {
            return;
        };
        let gate = m.gate();
        if gate.counters().is_zero() && gate.live_tickets().next().is_none() {
            return;
        }
        let live: Vec<Ticket> = gate.live_tickets().collect();
        let before = (gate.counters(), live.clone());
        let mut wrong = false;
        for ticket in &live {
            let g = ticket.generation;
            let older = g.0.checked_sub(1).map(Generation);
            let newer = g.0.checked_add(1).map(Generation);
            for generation in older.into_iter().chain(newer) {
                let work = CellWork {
                    host: HOST,
                    machine,
                    ticket: Ticket {
                        generation,
                        ..*ticket
                    },
                };
                wrong |= state.cell.handle_release(&work) != Some(ReleaseReport::StaleGeneration);
            }
        }
        let after = state.cell.machine(HOST).map(|(_, m)| {
            let g = m.gate();
            (g.counters(), g.live_tickets().collect::<Vec<_>>())
        });
        wrong |= after.as_ref() != Some(&before);
        state.last.anomalies.live_release_counted = wrong;
    }
}
