//! The `LeaseModel` (HO-L5, HO-L2) checked exhaustively: every property holds, every witness
//! is reached, the state count is pinned; the seeded glue bugs are reported.

use stateright::{Checker, Expectation, Model};
use switchyard_spec::lease::*;

/// Unique states over the three successor clocks: a change is a change in the model or in the
/// core's lease keeper, to be looked at.
const STATES: usize = 345_932;

#[test]
fn ho_l5_lease_model_holds_every_property_and_reaches_every_witness() {
    let model = LeaseModel::new(LeaseParams::default());
    assert_eq!(model.init_states().len(), 3);
    let checker = model.checker().threads(1).spawn_bfs().join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), STATES);
}

#[test]
fn ho_l5_lease_model_properties_are_named_by_requirement() {
    let properties = LeaseModel::new(LeaseParams::default()).properties();
    for p in &properties {
        assert!(
            p.name.starts_with("HO-L5 ") || p.name.starts_with("HO-L2 "),
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
}

fn violated(bug: SeededBug) -> Vec<&'static str> {
    let model = LeaseModel::new(LeaseParams {
        bug: Some(bug),
        ..LeaseParams::default()
    });
    let checker = model.clone().checker().threads(1).spawn_bfs().join();
    model
        .properties()
        .iter()
        .filter(|p| p.expectation == Expectation::Always && checker.discovery(p.name).is_some())
        .map(|p| p.name)
        .collect()
}

/// HO-L5: a keeper told of no drift stops serving at the lease's end by its own clock, which a
/// successor whose clock runs ahead has already passed.
#[test]
fn ho_l5_lease_model_reports_a_keeper_given_no_drift() {
    assert_eq!(
        violated(SeededBug::NoDrift),
        ["HO-L5 a cell never serves while a successor holds its lease"]
    );
}

/// HO-L5: a stop that waits for the renewal call to end is held back by a call hanging on a
/// dark store.
#[test]
fn ho_l5_lease_model_reports_a_stop_that_waits_for_the_renewal_call() {
    assert_eq!(
        violated(SeededBug::TimerWaitsForTheCall),
        ["HO-L5 a cell never serves while a successor holds its lease"]
    );
}
