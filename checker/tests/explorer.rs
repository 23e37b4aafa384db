//! What stateright's Explorer shows (`switchyard-check check … --explore ADDR`): short state
//! summaries and named initial states.

use stateright::Model;
use switchyard_checker::explorer::{Explorable, ShownAction};
use switchyard_spec::failover::{FailoverModel, FailoverParams};
use switchyard_spec::handoff::{HandoffModel, Scenario};

/// The Explorer prints a state with `{:#?}`: that is what an operator reads.
fn shown<S: std::fmt::Debug>(state: &S) -> String {
    format!("{state:#?}")
}

#[test]
fn explorer_starts_at_the_failover_variants_by_name() {
    let explorable =
        Explorable::new(vec![FailoverModel::new(FailoverParams::default())]).expect("one model");
    let start = explorable.init_states();
    assert_eq!(start.len(), 1);
    let mut actions = Vec::new();
    explorable.actions(&start[0], &mut actions);
    let names: Vec<String> = actions
        .iter()
        .map(|a| explorable.format_action(a))
        .collect();
    assert_eq!(
        names,
        [
            "variant production",
            "variant exempt-off",
            "variant cooldown-zero",
            "variant supervisor-off",
            "variant probe-jitter"
        ]
    );
}

#[test]
fn explorer_failover_states_are_six_lines_at_most_where_the_debug_dump_is_sixty() {
    let model = FailoverModel::new(FailoverParams::default());
    let init = model.init_states().remove(0);
    assert!(
        shown(&init).lines().count() > 60,
        "the dump this replaces: {}",
        shown(&init)
    );
    let explorable = Explorable::new(vec![model]).expect("one model");
    // A walk of a few steps from each variant: every state on it is short.
    let mut frontier = vec![explorable.init_states().remove(0)];
    for _ in 0..4 {
        let mut next = Vec::new();
        for state in &frontier {
            let text = shown(state);
            assert!(text.lines().count() <= 6, "{text}");
            assert!(text.lines().all(|l| l.len() <= 120), "{text}");
            let mut actions = Vec::new();
            explorable.actions(state, &mut actions);
            next.extend(
                actions
                    .into_iter()
                    .take(3)
                    .filter_map(|a| explorable.next_state(state, a)),
            );
        }
        frontier = next;
    }
    let first = explorable
        .next_state(&explorable.init_states()[0], ShownAction::Begin(0))
        .expect("the production variant");
    assert!(
        shown(&first).starts_with("production at t=0ms"),
        "{}",
        shown(&first)
    );
}

#[test]
fn explorer_starts_at_the_handoff_scenarios_by_name_and_states_are_short() {
    let models = Scenario::ALL
        .iter()
        .map(|s| HandoffModel::in_scenario(*s, s.params()))
        .collect();
    let explorable = Explorable::new(models).expect("three scenarios");
    assert_eq!(
        explorable.entry_names(),
        [
            "scenario review",
            "scenario work-kinds",
            "scenario registrations"
        ]
    );
    let start = &explorable.init_states()[0];
    let mut actions = Vec::new();
    explorable.actions(start, &mut actions);
    for action in actions {
        let state = explorable.next_state(start, action).expect("a scenario");
        let text = shown(&state);
        assert!(text.lines().count() <= 6, "{text}");
    }
}

#[test]
fn scale_3_explorer_sweep_states_are_short_cards() {
    use switchyard_spec::sweep::{SweepModel, SweepParams};
    let explorable =
        Explorable::new(vec![SweepModel::new(SweepParams::default())]).expect("one model");
    assert_eq!(explorable.entry_names(), ["sweep"]);
    // A walk of a few steps: every state on it is at most three lines.
    let mut frontier = vec![explorable.init_states().remove(0)];
    for _ in 0..6 {
        let mut next = Vec::new();
        for state in &frontier {
            let text = shown(state);
            assert!(text.lines().count() <= 3, "{text}");
            let mut actions = Vec::new();
            explorable.actions(state, &mut actions);
            next.extend(
                actions
                    .into_iter()
                    .take(2)
                    .filter_map(|a| explorable.next_state(state, a)),
            );
        }
        frontier = next;
    }
    let first = explorable
        .next_state(&explorable.init_states()[0], ShownAction::Begin(0))
        .expect("the sweep");
    assert!(
        shown(&first).starts_with("hosts [10, 20, 30, 40] (busy [10, 40]), saved cursor None"),
        "{}",
        shown(&first)
    );
}
