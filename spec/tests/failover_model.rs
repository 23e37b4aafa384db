//! The failover model at a small bound: every property holds, every witness is reached, and the
//! size of the state space is pinned so a silent change to it is noticed.

use stateright::{Checker, Model};
use switchyard_spec::failover::*;

fn small() -> FailoverParams {
    FailoverParams {
        cycles: 1,
        max_host_events: 3,
        ..FailoverParams::default()
    }
}

#[test]
fn fo_model_small_bound_all_properties_hold_and_state_count_is_pinned() {
    let checker = FailoverModel::new(small()).checker().spawn_bfs().join();
    checker.assert_properties();
    // If this changes, the state space changed: make sure that was meant, then update it.
    assert_eq!(checker.unique_state_count(), PINNED_UNIQUE_STATES);
}

const PINNED_UNIQUE_STATES: usize = 73_051;

#[test]
fn fo_model_scene_4_reaches_the_exempt_switch() {
    let model = FailoverModel::new(FailoverParams {
        variants: vec![Variant::Production],
        ..FailoverParams::default()
    });
    let mut state = model.init_state(Variant::Production);
    let mut run = |action: FoAction| -> FoState {
        state = model.step(&state, action);
        state.clone()
    };
    run(FoAction::HostDown { host: 0 });
    let mut now = run(FoAction::Tick);
    while now.sup.open_in_flight().is_none() {
        now = run(FoAction::Tick);
    }
    assert_eq!(
        now.sup.open_in_flight().map(|o| o.url.as_str()),
        Some("wss://a2")
    );
    run(FoAction::OpenFails);
    now = run(FoAction::OpenSucceeds);
    assert_eq!(now.project().current.as_deref(), Some("wss://b1"));
    run(FoAction::HostUp { host: 0 });
    run(FoAction::Tick);
    run(FoAction::HostDown { host: 1 });
    now = run(FoAction::Tick);
    while now.sup.open_in_flight().is_none() {
        now = run(FoAction::Tick);
    }
    assert_eq!(
        now.project().opening,
        Some(("wss://a1".to_owned(), true)),
        "exempt open of a1"
    );
    let after = run(FoAction::OpenSucceeds);
    assert!(after.last.exempt_switch);
    assert_eq!(after.sup.counters().exempt_switches, 1);
    assert_eq!(after.stall_ticks, 0);
    for property in model.properties() {
        if property.expectation == stateright::Expectation::Always {
            assert!((property.condition)(&model, &after), "{}", property.name);
        }
    }
}
