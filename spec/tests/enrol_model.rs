//! The `EnrolModel` (HO-A4, SCALE-1) checked exhaustively: every property holds, every
//! witness is reached, the state count is pinned; the seeded glue bugs are reported.

use stateright::{Checker, Expectation, Model};
use switchyard_core::handoff::{EnrolRefusal, Registered};
use switchyard_spec::enrol::*;

/// Unique states over the 12 initial worlds: a change is a change in the model or in the
/// core's enrolment decision, to be looked at.
const STATES: usize = 140;

#[test]
fn ho_a4_scale_1_enrol_model_holds_every_property_and_reaches_every_witness() {
    let model = EnrolModel::new(EnrolParams::default());
    assert_eq!(model.init_states().len(), 12);
    let checker = model.checker().threads(1).spawn_bfs().join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), STATES);
}

#[test]
fn ho_a4_scale_1_enrol_model_properties_are_named_by_requirement() {
    let properties = EnrolModel::new(EnrolParams::default()).properties();
    for p in &properties {
        assert!(
            p.name.starts_with("SCALE-1 ") || p.name.starts_with("HO-A4 "),
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
    assert_eq!((always, properties.len() - always), (6, 5));
}

fn violated(bug: SeededBug) -> Vec<&'static str> {
    let model = EnrolModel::new(EnrolParams { bug: Some(bug) });
    let checker = model.clone().checker().threads(1).spawn_bfs().join();
    model
        .properties()
        .iter()
        .filter(|p| p.expectation == Expectation::Always && checker.discovery(p.name).is_some())
        .map(|p| p.name)
        .collect()
}

/// SCALE-1: a cell that hands the core `true` whatever its flag says writes a row at a cell
/// that does not enrol.
#[test]
fn scale_1_enrol_model_reports_a_cell_that_ignores_its_flag() {
    let found = violated(SeededBug::IgnoresTheFlag);
    assert!(
        found.contains(&"SCALE-1 a cell that does not enrol never writes a row"),
        "{found:?}"
    );
}

/// SCALE-1: a cell that reports an insert that found the host as the bound reached turns the
/// second desktop away `too_many_hosts` while the host exists.
#[test]
fn scale_1_enrol_model_reports_an_existing_host_taken_for_a_full_store() {
    assert_eq!(
        violated(SeededBug::ExistingReportedFull),
        vec!["SCALE-1 a refused enrolment is named by its cause"]
    );
}

fn run(model: &EnrolModel, init: usize, steps: &[u8]) -> EnrolState {
    let mut state = model.init_states().swap_remove(init);
    for &d in steps {
        let mut enabled = Vec::new();
        model.actions(&state, &mut enabled);
        let action = EnrolAction::Step { desktop: d };
        assert!(enabled.contains(&action), "{action} is not enabled");
        state = model.step(&state, d);
    }
    state
}

fn layout_index(want: Layout) -> usize {
    EnrolModel::layouts()
        .iter()
        .position(|l| *l == want)
        .expect("a layout")
}

/// HO-A4 / SCALE-1: at one enrolling cell with room for one host, both desktops see the host
/// unknown; the first inserts it, the second's insert finds it (at the bound, which it does
/// not report) and both register, the second with the generation after the first's.
#[test]
fn ho_a4_enrol_model_two_desktops_at_one_cell_both_register_one_row() {
    let model = EnrolModel::new(EnrolParams::default());
    let init = layout_index(Layout {
        two_cells: false,
        enrol: [true, true],
        max_hosts: 2,
    });
    let s = run(&model, init, &[0, 1, 0, 1, 0, 1]);
    let ends: Vec<_> = s.desktops.iter().map(|d| d.end).collect();
    let gens: Vec<u64> = ends
        .iter()
        .map(|e| match e {
            Some(Registered::Yes(a)) => a.generation.0,
            other => panic!("not registered: {other:?}"),
        })
        .collect();
    assert_eq!(gens, vec![2, 3]);
    assert_eq!(s.project().rows, 2);
}

/// SCALE-1: at a cell that does not enrol, the unknown host's desktop is refused
/// `enrolment_disabled` after one store call, and nothing is written.
#[test]
fn scale_1_enrol_model_enrolment_off_refuses_after_one_call() {
    let model = EnrolModel::new(EnrolParams::default());
    let init = layout_index(Layout {
        two_cells: false,
        enrol: [false, false],
        max_hosts: 2,
    });
    let s = run(&model, init, &[0]);
    assert_eq!(
        s.desktops[0].end,
        Some(Registered::NotEnrolled(EnrolRefusal::Disabled))
    );
    assert_eq!(s.project().host_row, None);
}
