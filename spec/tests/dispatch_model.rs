//! The `DispatchModel` (HO-L3, SCALE-6, SCALE-3) at its review bound, checked exhaustively;
//! the seeded bug the checker must report; the limit of the shared failure budget; a
//! hand-picked run through the wrapped segment.

use stateright::{Checker, Expectation, Model};
use switchyard_core::handoff::CellFailure;
use switchyard_spec::dispatch::*;

/// Unique states at the review bound: a change is a change in the model or in the core's
/// pass or dispatcher, to be looked at.
const REVIEW_STATES: usize = 768_434;

/// HO-L3 / SCALE-6 / SCALE-3: every `always` property holds and every witness is reached at
/// the review bound; the state count is pinned.
#[test]
fn ho_l3_scale_6_dispatch_model_review_bound_holds_every_property() {
    let model = DispatchModel::new(DispatchParams::default());
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), REVIEW_STATES);
}

/// Every requirement of the model is a property name, and both kinds are there (beside the
/// property every model has: core invariants hold in every step).
#[test]
fn ho_l3_scale_6_dispatch_model_properties_are_named_by_requirement() {
    let properties = DispatchModel::new(DispatchParams::default()).properties();
    for p in &properties {
        assert!(
            p.name.starts_with("HO-L3 ")
                || p.name.starts_with("SCALE-3 ")
                || p.name.starts_with("SCALE-6 ")
                || p.name == switchyard_spec::caught::CORE_INVARIANTS,
            "{}",
            p.name
        );
        assert_eq!(
            p.name.contains(" witness: "),
            p.expectation == Expectation::Sometimes,
            "{}",
            p.name
        );
    }
    let always = properties
        .iter()
        .filter(|p| p.expectation == Expectation::Always)
        .count();
    assert_eq!((always, properties.len() - always), (7, 7));
}

/// Checks `params` and returns the names of the properties it found violated.
fn violated(params: DispatchParams) -> Vec<&'static str> {
    let model = DispatchModel::new(params);
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    model
        .properties()
        .iter()
        .filter(|p| p.expectation == Expectation::Always && checker.discovery(p.name).is_some())
        .map(|p| p.name)
        .collect()
}

/// SCALE-3: a director that saves its pass's cursor after every page it reads (as the
/// sequential director did), not the dispatcher's `poll_cursor()`, passes pages whose
/// requests are still in flight: the cursor property reports it, and only it.
#[test]
fn scale_3_dispatch_model_reports_a_cursor_saved_before_its_page_ended() {
    let found = violated(DispatchParams {
        bug: Some(DispatchBug::SaveAfterRead),
        ..DispatchParams::default()
    });
    assert_eq!(
        found,
        vec!["SCALE-3 the cursor passes a page only after its dispatches ended"]
    );
}

/// HO-L3, a limit of the design the model shows: the pass's failure budget
/// (`--max-failures`) is shared by every cell. Sized below what the unreachable cell fails in
/// one pass (here two: a failure and a failed probe), it is spent by that cell alone and the
/// live cell's hosts are held for the rest of the pass. The review bound's budget (8) is
/// above it, as the director's default (64) is above a few stuck cells' per-cell bound and
/// probes in one pass.
#[test]
fn ho_l3_dispatch_model_a_failure_budget_the_stuck_cell_spends_holds_the_live_one() {
    let found = violated(DispatchParams {
        max_failures: 1,
        ..DispatchParams::default()
    });
    assert_eq!(
        found,
        vec!["HO-L3 a live cell is never held up by a stuck one"]
    );
}

/// The cursor properties' ring: a cursor stands for the hosts from the pass's start through
/// it, wrapping past the end of the list.
#[test]
fn scale_3_dispatch_model_a_cursor_stands_for_the_ring_from_the_pass_start() {
    let model = DispatchModel::new(DispatchParams::default());
    let set = |ids: &[u64]| -> Hosts {
        ids.iter().fold(0, |a, id| {
            a | 1 << model.ids().iter().position(|h| h == id).expect("an id")
        })
    };
    assert_eq!(model.ring(None, Some(20), false), set(&[10, 20]));
    assert_eq!(model.ring(None, None, false), 0);
    assert_eq!(model.ring(None, None, true), set(&[10, 20, 30, 40]));
    assert_eq!(model.ring(Some(30), None, false), set(&[40]));
    assert_eq!(model.ring(Some(20), Some(40), false), set(&[30, 40]));
    assert_eq!(model.ring(Some(30), Some(20), false), set(&[40, 10, 20]));
    assert_eq!(model.ring(Some(30), Some(30), true), set(&[10, 20, 30, 40]));
}

fn run(model: &DispatchModel, init: usize, actions: &[DispatchAction]) -> Vec<DispatchState> {
    let mut states = vec![model.init_states_list()[init].clone()];
    for action in actions {
        let before = states.last().expect("a state");
        let mut offered = Vec::new();
        model.actions(before, &mut offered);
        assert!(
            offered.contains(action),
            "{action} not offered: {offered:?}"
        );
        let after = model.step(before, *action);
        assert!(after.core_panic.is_none(), "{:?}", after.core_panic);
        for p in model.properties() {
            if p.expectation == Expectation::Always {
                assert!((p.condition)(model, &after), "{} after {action}", p.name);
            }
        }
        states.push(after);
    }
    states
}

/// SCALE-3 / HO-L3 by hand, from the store's cursor at 30 (limits 2 in flight, 1 per cell):
/// the end of the list ([40]), then the wrapped segment ([10, 20], [30]); the unreachable
/// cell's request times out and its next host is held back; the cursor moves to the start of
/// the list only once the end's page ended, and to 30 once the wrapped pages ended.
#[test]
fn scale_3_ho_l3_dispatch_model_a_wrapped_pass_with_a_stuck_cell() {
    let model = DispatchModel::new(DispatchParams::default());
    use DispatchAction::*;
    let states = run(
        &model,
        1,
        &[
            NewPass,
            ReadPage { fails: false },
            ReadPage { fails: false },
            Ends {
                host: 40,
                end: End::Answered,
            },
            Settle { save_fails: false },
            Ends {
                host: 20,
                end: End::Failed(CellFailure::Timeout),
            },
            ReadPage { fails: false },
            Ends {
                host: 10,
                end: End::Answered,
            },
            Settle { save_fails: false },
        ],
    );
    // Two pages read: 40 and 20 in flight (10 waits: the live cell's one slot is 40's).
    let flying =
        |s: &DispatchState| -> Vec<u64> { s.project().in_flight.iter().map(|(h, _)| *h).collect() };
    assert_eq!(flying(&states[3]), vec![40, 20]);
    // 40 ended: 10 goes, the end's page is done, the cursor is the start of the list.
    assert_eq!(flying(&states[5]), vec![20, 10]);
    assert_eq!(states[5].saved, None);
    assert!(states[5]
        .pass
        .as_ref()
        .is_some_and(|p| p.phase == Phase::Waiting));
    // 20 timed out: its cell is backed off; 30, read next, is not sent.
    assert_eq!(states[6].dispatcher.backoffs().len(), 1);
    assert_eq!(states[7].rec.pages[2].pending, 0);
    assert_eq!(flying(&states[7]), vec![10]);
    // The wrapped pages ended: the cursor is the pass's start, the pass is over.
    assert_eq!(states[9].saved, Some(30));
    assert!(states[9].last.saved_in_wrap);
    assert!(states[9].pass.is_none());
}

/// The actions and params round-trip through JSON (the checker's traces).
#[test]
fn ho_l3_dispatch_model_actions_and_params_round_trip_through_json() {
    let params = DispatchParams::default();
    let json = serde_json::to_string(&params).expect("params");
    assert_eq!(
        serde_json::from_str::<DispatchParams>(&json).expect("params back"),
        params
    );
    let action = DispatchAction::Ends {
        host: 20,
        end: End::Failed(CellFailure::Unreachable),
    };
    let json = serde_json::to_string(&action).expect("action");
    assert_eq!(
        serde_json::from_str::<DispatchAction>(&json).expect("action back"),
        action
    );
}
