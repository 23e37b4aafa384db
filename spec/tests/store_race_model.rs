//! The `StoreRaceModel` (HO-A1, HO-A2, HO-A5, HO-S4, SCALE-2) checked exhaustively: the
//! core's store plans interleaved step by step over a lock table, two limit shards with
//! tokens, unique keys and injected faults. Every property holds, every witness is reached,
//! the state count is pinned.

use stateright::{Checker, Expectation, Model};
use switchyard_spec::store_race::*;

/// Unique states over the four scenarios: a change is a change in the model or in the core's
/// plans, to be looked at.
const STATES: usize = 48_752;

#[test]
fn ho_a1_ho_a2_ho_s4_store_race_model_holds_every_property_and_reaches_every_witness() {
    let model = StoreRaceModel::new(StoreRaceParams::default());
    assert_eq!(model.init_states().len(), Scenario::ALL.len());
    let checker = model.checker().threads(1).spawn_bfs().join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), STATES);
}

#[test]
fn store_race_model_properties_are_named_by_requirement() {
    let properties = StoreRaceModel::new(StoreRaceParams::default()).properties();
    for p in &properties {
        let id = p.name.split(' ').next().unwrap_or_default();
        assert!(
            ["HO-A1", "HO-A2", "HO-A5", "HO-A6", "HO-S4", "SCALE-2"].contains(&id),
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
