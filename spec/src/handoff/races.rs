//! Where one-idea bugs slipped past the model (issue #25): two registrations of one host
//! racing (a second control activation of the desktop, the registrations scenario), and late
//! releases that name a *live* ticket with another generation.

use super::step::{admission_kind, Registration};
use super::*;

/// HO-A4: a control the second activation registered while a barrier stood is refused
/// `ControlGated`, and the attempt's machine and barrier stay (`installed_under_barrier`,
/// recorded by `second_control_registers` below).
pub(super) fn ho_a4_control_gated_under_barrier() -> Property<HandoffModel> {
    Property::always(
        "HO-A4 a control registered while a barrier stands is refused (ControlGated); the attempt's machine and barrier stay",
        |_, s: &HoState| !s.last.anomalies.installed_under_barrier,
    )
}

impl HandoffModel {
    /// HO-A4: a second control activation (`control_refusal`, `handle_begin_control`), held across
    /// its registration's await. Where there is no live machine it holds no ticket, so a
    /// first registration may install a machine, and a barrier may stand, before it registers.
    pub(super) fn second_control_activates(state: &mut HoState) {
        state.budget.registrations -= 1;
        let gate = admission_kind(state.src());
        let refusal = state.cell.control_refusal(HOST);
        // HO-A5: refused before the registration exactly when drained here.
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
                // HO-S3 and its witness: an activation at a gated source is refused ControlGated.
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
        match Self::register_and_install(state, op, journal) {
            Ok(Registration {
                machine_before,
                installed,
            }) => {
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
                        // HO-A4 (installed under a barrier) and its registrations witness.
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
}

/// HO-7: a late release naming a live ticket with another generation is reported
/// `StaleGeneration` and changes nothing (`live_release_counted`, recorded by
/// `judge_live_stale_releases` below at every step).
pub(super) fn ho_7_live_release_reported_stale() -> Property<HandoffModel> {
    Property::always(
        "HO-7 a release naming a live ticket with another generation is reported stale and changes no counter",
        |_, s: &HoState| !s.last.anomalies.live_release_counted,
    )
}

impl HandoffModel {
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
        // HO-7: a live ticket named with another generation.
        state.last.anomalies.live_release_counted = wrong;
    }
}
