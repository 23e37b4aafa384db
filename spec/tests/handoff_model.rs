//! The `HandoffModel` (HO) at a reduced bound, checked exhaustively, and hand-picked runs.

use stateright::{Checker, Model};
use switchyard_spec::handoff::*;

/// HO: every `always` property holds and every `sometimes` witness is reached at the small
/// bound; the number of unique states is pinned (a change in it is a change in the model or in
/// the core's state, to be looked at).
#[test]
fn ho_model_small_bound_holds_every_property() {
    let checker = HandoffModel::new(HandoffParams::small())
        .checker()
        .threads(2)
        .spawn_bfs()
        .join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 45_857);
}

fn run(model: &HandoffModel, actions: &[HoAction]) -> Vec<HoState> {
    let mut states = vec![model.init_state()];
    for action in actions {
        let before = states.last().expect("a state");
        let mut enabled = Vec::new();
        model.actions(before, &mut enabled);
        assert!(enabled.contains(action), "{action} is not enabled");
        states.push(model.step(before, *action));
    }
    for state in &states {
        assert_eq!(state.last.anomalies, Anomalies::default(), "no anomaly");
    }
    states
}

/// HO-S5: the director sends, the source installs its barrier, the transaction commits and its
/// result arrives: the host is at the target and the source is retired.
#[test]
fn ho_model_send_then_commit_retires_the_source() {
    let model = HandoffModel::new(HandoffParams::default());
    let states = run(
        &model,
        &[
            HoAction::DirectorSends { lost: false },
            HoAction::DbRuns {
                job: 0,
                delivery: Delivery::Delivered,
            },
        ],
    );
    let gated = states[1].project();
    let source = gated.source.as_ref().expect("source machine");
    assert_eq!(source.gate, GateKind::Gated);
    assert_eq!(source.phase, Some(PhaseKind::InTransaction));
    assert_eq!(gated.db_jobs, vec![(JobKind::Transaction, true)]);

    let done = states[2].project();
    assert_eq!(done.assigned_cell, TGT.0);
    assert_eq!(done.epoch, 2);
    assert_eq!(done.reservations, 1);
    assert_eq!(done.committed_ops, 1);
    let source = done.source.expect("source machine");
    assert_eq!(source.gate, GateKind::Retired);
    assert_eq!(source.phase, None);
    assert_eq!(source.last_outcome, Some(OutcomeKind::Committed));
    assert!(states[2].last.events.committed);
    assert!(done.db_jobs.is_empty());
}

/// HO-1 / HO-S2 / HO-S3: an attached phone makes the source busy (nothing held); once it has
/// left, the barrier stands and the iPad is refused with 4409.
#[test]
fn ho_model_attached_client_defers_then_wrong_cell_under_the_barrier() {
    let model = HandoffModel::new(HandoffParams::default());
    let states = run(
        &model,
        &[
            HoAction::ClientArrives { client: 0 },
            // Clients are kept sorted: the one that arrived sorts after the one away.
            HoAction::ClientAttaches { client: 1 },
            HoAction::ClientPersisted { client: 1 },
            HoAction::DirectorSends { lost: false },
            HoAction::ClientLeaves { client: 1 },
            HoAction::DirectorSends { lost: false },
            // Clients are kept sorted: the phone, gone, now sorts first.
            HoAction::ClientArrives { client: 1 },
        ],
    );
    let busy = &states[4];
    assert!(busy.last.events.busy);
    assert_eq!(busy.project().source.expect("source").gate, GateKind::Open);
    let gated = &states[6];
    assert_eq!(
        gated.project().source.expect("source").gate,
        GateKind::Gated
    );
    assert!(states[7].last.events.wrong_cell_at_barrier);
    assert_eq!(
        states[7].project().source.expect("source").counters.total(),
        0
    );
}

/// Traces carry actions and projections as JSON.
#[test]
fn ho_model_actions_and_projection_round_trip_through_json() {
    let model = HandoffModel::new(HandoffParams::default());
    let state = model.step(&model.init_state(), HoAction::DirectorSends { lost: true });
    let action = HoAction::LateCallback {
        job: 1,
        delivery: Delivery::Lost,
    };
    let json = serde_json::to_string(&action).expect("json");
    assert_eq!(
        serde_json::from_str::<HoAction>(&json).expect("action"),
        action
    );
    let projection = state.project();
    let json = serde_json::to_string(&projection).expect("json");
    assert_eq!(
        serde_json::from_str::<HoProjection>(&json).expect("projection"),
        projection
    );
    let params = serde_json::to_string(&HandoffParams::default()).expect("json");
    assert_eq!(
        serde_json::from_str::<HandoffParams>(&params).expect("params"),
        HandoffParams::default()
    );
}
