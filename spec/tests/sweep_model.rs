//! The `SweepModel` (SCALE-3, HO-S2) at its review bound, checked exhaustively; the seeded
//! bugs the checker must report; hand-picked runs.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use stateright::{Checker, Expectation, Model};
use switchyard_core::handoff::HostId;
use switchyard_core::handoff::{DispatchClass, PageQuery};
use switchyard_spec::sweep::*;

/// Unique states at the review bound: a change is a change in the model or in the core's
/// pass, to be looked at.
const REVIEW_STATES: usize = 197_080;
/// The longest wait (passes begun) of an idle eligible host anywhere in the review bound's
/// space. The derived bound (8, `SweepParams::starvation_bound`) is a sum of worst cases:
/// here the two list changes and two faults of one run cannot all fall on one wait at their
/// worst.
const REVIEW_LONGEST_WAIT: u8 = 6;

/// SCALE-3 / HO-S2: every `always` property holds and every witness is reached at the review
/// bound; the state count and the longest wait are pinned.
#[test]
fn scale_3_ho_s2_sweep_model_review_bound_holds_every_property() {
    let model = SweepModel::new(SweepParams::default());
    let longest = Arc::new(AtomicU8::new(0));
    let seen = longest.clone();
    let checker = model
        .clone()
        .checker()
        .threads(2)
        .visitor(move |path: stateright::Path<SweepState, SweepAction>| {
            let state = path.last_state();
            let wait = state.rec.waiting.iter().flatten().max().copied();
            seen.fetch_max(wait.unwrap_or(0), Ordering::Relaxed);
        })
        .spawn_bfs()
        .join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), REVIEW_STATES);
    let longest = longest.load(Ordering::Relaxed);
    assert_eq!(longest, REVIEW_LONGEST_WAIT);
    assert!(u32::from(longest) <= model.starvation_bound());
}

/// Every requirement of the model is a property name, and both kinds are there (beside the
/// property every model has: core invariants hold in every step).
#[test]
fn scale_3_ho_s2_sweep_model_properties_are_named_by_requirement() {
    let properties = SweepModel::new(SweepParams::default()).properties();
    for p in &properties {
        assert!(
            p.name.starts_with("SCALE-3 ")
                || p.name.starts_with("HO-S2 ")
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
    assert_eq!((always, properties.len() - always), (7, 5));
}

/// HO-S2: the bound, derived from the review bound's hosts (four eligible at most: three and
/// an enrolment; one ineligible), pages (two of two: a pass that sends nothing examines two
/// rows) and faults (two: a failed save and a restart cost three passes).
#[test]
fn ho_s2_sweep_model_starvation_bound_of_the_review_bound() {
    let review = SweepParams::default();
    assert_eq!(review.max_eligible_and_ineligible(), (4, 1));
    // round 3 + 1 + 1, faults 2, one (failed save, restart) pair.
    assert_eq!(review.starvation_bound(), 8);
    let no_faults = SweepParams {
        max_faults: 0,
        ..SweepParams::default()
    };
    assert_eq!(no_faults.starvation_bound(), 5);
    let one_page = SweepParams {
        max_pages: 1,
        ..no_faults.clone()
    };
    assert_eq!(one_page.starvation_bound(), 3 + 1 + 1 + 1);
}

/// Checks `params` and returns the names of the properties it found violated.
fn violated(params: SweepParams) -> Vec<&'static str> {
    let model = SweepModel::new(params);
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    model
        .properties()
        .iter()
        .filter(|p| p.expectation == Expectation::Always && checker.discovery(p.name).is_some())
        .map(|p| p.name)
        .collect()
}

fn seeded(bug: SeededBug) -> SweepParams {
    SweepParams {
        bug: Some(bug),
        ..SweepParams::default()
    }
}

/// SCALE-3: a director that restarts a failed pass from the pass's own start (one line of its
/// glue) is reported by the resume property. Where the failed page was the one after the end
/// of the list, the resumed pass reads the end again and completes a sweep that examined
/// nothing, in the same step: the sweep property reports it too.
#[test]
fn scale_3_sweep_model_reports_a_failed_pass_resumed_from_its_start() {
    let resume = "SCALE-3 a failed page resumes at its own start";
    let sweep = "SCALE-3 every host examined once per sweep";
    let found = violated(seeded(SeededBug::ResumeFromPassStart));
    assert!(found.contains(&resume), "{found:?}");
    assert!(
        found.iter().all(|p| [resume, sweep].contains(p)),
        "{found:?}"
    );
}

/// HO-S2: a director that records a busy answer as a transport failure is reported.
#[test]
fn ho_s2_sweep_model_reports_busy_spending_the_budget() {
    assert_eq!(
        violated(seeded(SeededBug::BusySpendsBudget)),
        vec!["HO-S2 busy never spends the budget"]
    );
}

/// HO-S2: a director whose rotation does not move past busy hosts starves the idle one, and
/// the starvation property reports it.
#[test]
fn ho_s2_sweep_model_reports_a_cursor_held_at_busy_hosts() {
    let found = violated(seeded(SeededBug::BusyHoldsTheCursor));
    assert!(
        found.contains(&"HO-S2 busy hosts never starve idle ones"),
        "{found:?}"
    );
}

fn run(model: &SweepModel, actions: &[SweepAction]) -> Vec<SweepState> {
    let mut states = vec![model.init_state()];
    for action in actions {
        let before = states.last().expect("a state");
        let mut enabled = Vec::new();
        model.actions(before, &mut enabled);
        assert!(enabled.contains(action), "{action} is not enabled");
        let after = model.step(before, *action);
        for p in model.properties() {
            if p.expectation == Expectation::Always {
                assert!((p.condition)(model, &after), "{action}: {}", p.name);
            }
        }
        states.push(after);
    }
    states
}

const SERVED: SweepAction = SweepAction::ReadPage {
    read: PageRead::Served,
};
const SAVED: SweepAction = SweepAction::SaveCursor { fails: false };

fn query(state: &SweepState) -> Option<(Option<u64>, Option<u64>, u32)> {
    state
        .pass
        .as_ref()
        .and_then(|p| p.sel.poll_query())
        .map(|q| (q.after.map(|h| h.0), q.through.map(|h| h.0), q.limit))
}

/// SCALE-3 / HO-S2: the first pass dispatches the busy host at the front and stops; the next
/// one starts after it (keyset: `after = 10`), passes the ineligible host and dispatches the
/// idle one from the next page.
#[test]
fn ho_s2_sweep_model_busy_then_idle_across_a_page_boundary() {
    let model = SweepModel::new(SweepParams::default());
    let states = run(
        &model,
        &[
            SweepAction::NewPass,
            SERVED,
            SweepAction::Answers {
                answer: Answer::Busy,
            },
            SAVED,
            SweepAction::NewPass,
            SERVED,
            SweepAction::Answers {
                answer: Answer::Result,
            },
            SAVED,
        ],
    );
    assert_eq!(query(&states[1]), Some((None, None, 2)));
    // Host 10 (busy) is sent; the dispatch budget stops the page before 20.
    assert_eq!(states[2].pass.as_ref().map(|p| p.outbox.len()), Some(1));
    assert_eq!(states[2].rec.sweep_examined.count_ones(), 1);
    assert_eq!(states[3].last.busy_class, Some(DispatchClass::Deferred));
    assert!(
        states[4].pass.is_none(),
        "the dispatch budget ends the pass"
    );
    assert_eq!(states[4].saved, Some(10));
    assert_eq!(query(&states[5]), Some((Some(10), None, 2)));
    // The page after 10 is 20 (ineligible) and 30 (idle): 30 is sent.
    let (before, rows) = states[6].last.page.expect("a page");
    assert_eq!((before, rows.count_ones()), (0, 2));
    assert!(states[6].last.idle_after_busy_across_pages);
    let slot = model.universe().iter().position(|h| *h == 30).expect("30");
    assert_eq!(states[5].rec.waiting[slot], Some(2));
    assert_eq!(states[6].rec.waiting[slot], None);
    assert!(states[8].pass.is_none());
    assert_eq!(states[8].saved, Some(30));
}

/// SCALE-3: the environment is the store: it answers a keyset query from its own list
/// (`after < host <= through`, in host order, `LIMIT`), whatever keys are in the list.
#[test]
fn scale_3_sweep_model_the_store_answers_a_keyset_query_from_its_list() {
    let model = SweepModel::new(SweepParams::default());
    let present = model.init_state().present;
    let page = |after: Option<u64>, through: Option<u64>, limit: u32| -> Vec<u64> {
        let query = PageQuery {
            after: after.map(HostId),
            through: through.map(HostId),
            limit,
        };
        model
            .serve(present, &query)
            .into_iter()
            .map(|slot| model.universe()[slot])
            .collect()
    };
    assert_eq!(page(None, None, 2), vec![10, 20]);
    assert_eq!(page(Some(20), None, 2), vec![30, 40]);
    // A key that is not in the list (removed, or never there) is a position all the same.
    assert_eq!(page(Some(25), None, 2), vec![30, 40]);
    assert_eq!(page(Some(40), None, 2), Vec::<u64>::new());
    assert_eq!(page(None, Some(20), 5), vec![10, 20]);
    assert_eq!(page(Some(10), Some(30), 1), vec![20]);
}

/// SCALE-3: with the last host removed, a pass starting after 30 reads the empty page at the
/// end of the list (the sweep ends: every host present throughout it was examined), saves the
/// start of the list, and goes on from the start through its own starting cursor.
#[test]
fn scale_3_sweep_model_a_pass_wraps_past_the_end_of_the_list() {
    let model = SweepModel::new(SweepParams::default());
    let states = run(
        &model,
        &[
            SweepAction::NewPass,
            SERVED,
            SweepAction::Answers {
                answer: Answer::Busy,
            },
            SAVED,
            SweepAction::NewPass,
            SERVED,
            SweepAction::Answers {
                answer: Answer::Result,
            },
            SAVED,
            SweepAction::Remove { host: 40 },
            SweepAction::NewPass,
            SERVED,
            SAVED,
            SERVED,
        ],
    );
    assert_eq!(query(&states[10]), Some((Some(30), None, 2)));
    let end = &states[11];
    let (start, examined) = end.last.sweep_end.expect("the end of the list");
    assert_eq!(start.count_ones(), 4, "10, 20, 30, 40 at the sweep's start");
    assert_eq!(examined.count_ones(), 3, "10, 20, 30 (40 was removed)");
    assert_eq!(end.last.sweeps_counted, Some((1, true)));
    assert_eq!(end.rec.sweep_examined, 0, "a new sweep");
    assert_eq!(states[12].saved, None, "the start of the list");
    assert_eq!(query(&states[12]), Some((None, Some(30), 2)));
    assert!(states[13].last.wrapped_in_pass);
}

/// SCALE-3: a failed cursor save ends the pass; the director's restart reloads the cursor
/// saved before it and reads that page again, and the sweep's record goes back with it.
#[test]
fn scale_3_sweep_model_a_restart_behind_a_failed_save_reads_the_page_again() {
    let model = SweepModel::new(SweepParams::default());
    let states = run(
        &model,
        &[
            SweepAction::NewPass,
            SERVED,
            SweepAction::Answers {
                answer: Answer::Busy,
            },
            SweepAction::SaveCursor { fails: true },
            SweepAction::Restart,
            SweepAction::NewPass,
            SERVED,
        ],
    );
    assert_eq!(states[4].cursor, Some(10), "the director's own cursor");
    assert_eq!(states[4].saved, None, "the store's");
    assert_eq!(states[5].cursor, None);
    assert_eq!(states[5].rec.sweep_examined, 0);
    assert_eq!(states[7].last.first_page, Some((None, None)));
    assert!(states[7].last.resumed_behind_failed_save);
}

/// SCALE-3: a failed page ends the pass with its cursor unchanged; the next pass starts with
/// that page.
#[test]
fn scale_3_sweep_model_a_failed_page_is_read_first_by_the_next_pass() {
    let model = SweepModel::new(SweepParams::default());
    let states = run(
        &model,
        &[
            SweepAction::NewPass,
            SERVED,
            SweepAction::Answers {
                answer: Answer::Busy,
            },
            SAVED,
            SweepAction::NewPass,
            SweepAction::ReadPage {
                read: PageRead::Fails,
            },
            SweepAction::NewPass,
            SERVED,
        ],
    );
    assert!(states[6].pass.is_none());
    assert_eq!(states[6].rec.expected_start, Some(10));
    assert_eq!(states[8].last.first_page, Some((Some(10), Some(10))));
}

/// SCALE-3: a host enrolled between pages, ahead of the cursor, is examined in the same
/// sweep.
#[test]
fn scale_3_sweep_model_a_host_enrolled_ahead_of_the_cursor_is_examined_in_the_same_sweep() {
    let model = SweepModel::new(SweepParams::default());
    let states = run(
        &model,
        &[
            SweepAction::NewPass,
            SERVED,
            SweepAction::Answers {
                answer: Answer::Busy,
            },
            SAVED,
            SweepAction::Enrol { host: 25 },
            SweepAction::NewPass,
            SERVED,
        ],
    );
    let slot = model.universe().iter().position(|h| *h == 25).expect("25");
    assert_eq!(states[5].rec.enrolled, Some((slot as u8, 0)));
    assert!(states[7].last.enrolled_examined);
    assert_eq!(
        states[7]
            .pass
            .as_ref()
            .and_then(|p| p.outbox.first())
            .map(|o| o.0),
        Some(slot as u8),
        "the enrolled idle host is sent"
    );
}

/// Traces carry actions, projections and parameters as JSON.
#[test]
fn scale_3_sweep_model_actions_projection_and_params_round_trip_through_json() {
    let model = SweepModel::new(SweepParams::default());
    let state = model.step(&model.init_state(), SweepAction::NewPass);
    let action = SweepAction::Answers {
        answer: Answer::TransportFailed,
    };
    let json = serde_json::to_string(&action).expect("json");
    assert_eq!(
        serde_json::from_str::<SweepAction>(&json).expect("action"),
        action
    );
    let projection = state.project();
    assert_eq!(projection.next_query, Some((None, None, 2)));
    let json = serde_json::to_string(&projection).expect("json");
    assert_eq!(
        serde_json::from_str::<SweepProjection>(&json).expect("projection"),
        projection
    );
    let params = serde_json::to_string(&seeded(SeededBug::BusySpendsBudget)).expect("json");
    assert_eq!(
        serde_json::from_str::<SweepParams>(&params).expect("params"),
        seeded(SeededBug::BusySpendsBudget)
    );
}
