//! The failover model at a small bound: every property holds, every witness is reached, and the
//! size of the state space is pinned so a silent change to it is noticed.

use stateright::{Checker, Model};
use switchyard_spec::failover::*;

fn small() -> FailoverParams {
    FailoverParams::small()
}

/// Every kind of input once, on the variants with probing.
fn wide() -> FailoverParams {
    FailoverParams {
        cycles: 1,
        max_host_events: 2,
        max_directory_updates: 1,
        max_channel_reports: 1,
        max_odd_time_steps: 1,
        max_transient_failures: 1,
        variants: vec![Variant::Production, Variant::ProbeJitter],
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

#[test]
fn fo_model_wide_environment_all_properties_hold_and_state_count_is_pinned() {
    let model = FailoverModel::new(wide());
    let checker = model.clone().checker().spawn_bfs().join();
    // Only the `always` properties: the cooldown-0 witness needs that variant, left out here.
    for property in model.properties() {
        if property.expectation == stateright::Expectation::Always {
            assert!(
                checker.discovery(property.name).is_none(),
                "{} violated",
                property.name
            );
        }
    }
    assert_eq!(checker.unique_state_count(), PINNED_WIDE_UNIQUE_STATES);
}

/// Every list a directory update can carry: the 16 ordered subsets of three URLs.
#[test]
fn fo_model_directory_updates_cover_every_ordered_subset() {
    let lists = FailoverParams::default().directory_lists();
    assert_eq!(lists.len(), 16);
    assert!(
        lists[0].is_empty(),
        "the empty list (rejected) is among them"
    );
    let mut unique = lists.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), lists.len());
}

const PINNED_UNIQUE_STATES: usize = 104_415;
const PINNED_WIDE_UNIQUE_STATES: usize = 395_288;

/// Scene 4 in the production topology, where host `a` really serves both of its URLs: host
/// `a` goes down and the chain goes straight to `b/1` (FO-X4: `a/2` is on the failing
/// channel's host, so it comes after the other host and is never opened); `a` comes back, `b`
/// goes down, and `a/2`, still clean, brings the client back without needing the exemption
/// (FO-D3: a clean candidate exists). The exemption itself is the checker's witness.
#[test]
fn fo_x4_model_scene_4_goes_to_the_other_host_first_and_back_without_an_exemption() {
    let model = FailoverModel::new(FailoverParams {
        variants: vec![Variant::Production],
        cycles: 2,
        ..FailoverParams::default()
    });
    let mut state = model.init_state(Variant::Production);
    let mut run = |action: FoAction| -> FoState {
        state = model.step(&state, action);
        state.clone()
    };
    run(FoAction::HostDown { host: 0 });
    let mut now = run(FoAction::Tick);
    // FO-X4's clock starts at the channel's reported loss (the tick's report).
    let dark_since = now.dark_since.expect("a's loss reported, b live and clean");
    while now.sup.open_in_flight().is_none() {
        now = run(FoAction::Tick);
    }
    assert_eq!(
        now.sup.open_in_flight().map(|o| o.url().as_str()),
        Some("wss://b/1"),
        "the other host before a/2"
    );
    now = run(FoAction::OpenSucceeds);
    assert_eq!(now.project().current.as_deref(), Some("wss://b/1"));
    assert_eq!(now.sup.counters().open_failed, 0);
    assert_eq!(now.dark_since, None, "on a live channel");
    assert!(now.now.since_ms(dark_since) <= model.dark_bound_ms(Variant::Production));
    run(FoAction::HostUp { host: 0 });
    run(FoAction::Tick);
    run(FoAction::HostDown { host: 1 });
    now = run(FoAction::Tick);
    while now.sup.open_in_flight().is_none() {
        now = run(FoAction::Tick);
    }
    assert_eq!(
        now.project().opening,
        Some(("wss://a/2".to_owned(), false)),
        "a clean open of a/2"
    );
    let after = run(FoAction::OpenSucceeds);
    assert!(!after.last.exempt_switch);
    assert_eq!(after.sup.counters().switches, 2);
    assert_eq!(after.sup.counters().exempt_switches, 0);
    assert_eq!(after.stall_ticks, 0);
    for property in model.properties() {
        if property.expectation == stateright::Expectation::Always {
            assert!((property.condition)(&model, &after), "{}", property.name);
        }
    }
}

/// The environment reaches finding 1 of the FO-D2a regression (a URL leaving the list and
/// coming back as first candidate inside its cycle), and the core holds it back (FO-D1).
#[test]
fn fo_d2a_model_reaches_a_cooling_url_that_left_the_list_and_came_back() {
    let params = FailoverParams {
        variants: vec![Variant::Production],
        ..FailoverParams::default()
    };
    let lists = params.directory_lists();
    let index = |list: &[u8]| lists.iter().position(|l| l == list).expect("a list") as u16;
    let model = FailoverModel::new(params.clone());
    let mut state = model.init_state(Variant::Production);
    let mut run = |action: FoAction| -> FoState {
        state = model.step(&state, action);
        for property in model.properties() {
            if property.expectation == stateright::Expectation::Always {
                assert!((property.condition)(&model, &state), "{}", property.name);
            }
        }
        state.clone()
    };
    run(FoAction::HostDown { host: 0 });
    let mut now = run(FoAction::Tick);
    while now.sup.open_in_flight().is_none() {
        now = run(FoAction::Tick);
    }
    now = run(FoAction::OpenSucceeds); // b/1 (FO-X4: before a/2); a/1 cools switched-away
    assert_eq!(now.project().current.as_deref(), Some("wss://b/1"));
    now = run(FoAction::Directory { list: index(&[2]) });
    assert!(now.last.unlisted_cooling_kept, "a1 left the list cooling");
    run(FoAction::Tick);
    now = run(FoAction::Directory {
        list: index(&[0, 2]),
    });
    assert!(now.last.directory_refused_by_cooldown);
    assert!(now.sup.open_in_flight().is_none(), "no flap back to a/1");
}

/// FO-X1 / FO-X2: the open caps of the production topology (three URLs): a tick's chain opens
/// each of the two other candidates once, one probe round over them, one directory open (5);
/// one instant sees at most two chains, one probe per URL and two directory opens (8).
#[test]
fn fo_x1_x2_open_caps_of_the_production_topology() {
    let model = FailoverModel::new(FailoverParams::default());
    assert_eq!(model.tick_open_cap(), 5);
    assert_eq!(model.instant_open_cap(), 8);
}

/// FO-X2a past one cooldown (issue #26): with two cycles in the horizon a chain outlasts a
/// cooldown, and a candidate it passed over after its open failed is opened again, clean, once
/// its cycle ended (the named witness, in the list only from two cycles on); every `always`
/// property, the FO-X2a ordering among them, holds on the way.
#[test]
fn fo_x2a_two_cycles_reach_a_failed_candidate_opened_again_after_its_cooldown() {
    const WITNESS: &str =
        "witness: a failed candidate whose cooldown expired is opened again (FO-X2a)";
    let params = FailoverParams {
        cycles: 2,
        variants: vec![Variant::Production],
        max_host_events: 1,
        max_directory_updates: 0,
        max_channel_reports: 0,
        max_odd_time_steps: 0,
        max_transient_failures: 2,
        max_late_ticks: 0,
        ..FailoverParams::default()
    };
    let one_cycle = FailoverModel::new(FailoverParams {
        cycles: 1,
        ..params.clone()
    });
    assert!(
        one_cycle.properties().iter().all(|p| p.name != WITNESS),
        "one cycle cannot reach it, so it is no witness there"
    );
    let model = FailoverModel::new(params);
    let checker = model.clone().checker().spawn_bfs().join();
    assert!(
        checker.discovery(WITNESS).is_some(),
        "FO-X2a's witness is reached with two cycles"
    );
    for property in model.properties() {
        if property.expectation == stateright::Expectation::Always {
            assert!(
                checker.discovery(property.name).is_none(),
                "{} violated",
                property.name
            );
        }
    }
}
