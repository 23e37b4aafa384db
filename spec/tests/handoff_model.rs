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
    assert_eq!(checker.unique_state_count(), 98_527);
}

/// A hand-picked run: every action enabled where it is taken, no anomaly, no core invariant
/// fired.
fn run(model: &HandoffModel, actions: &[HoAction]) -> Vec<HoState> {
    run_in(model, actions)
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

/// HO-A5 / HO-L1: a drain closes the control and refuses the desktop's next registration; once
/// the drained work has closed, an operator's undrain forgets the host, the desktop's
/// reconnect gets a new machine and a handoff starts and commits again.
#[test]
fn ho_l1_model_drain_refuses_the_desktop_until_undrained_then_the_host_moves() {
    let model = HandoffModel::new(HandoffParams {
        reconnects: 2,
        ..HandoffParams::default()
    });
    let states = run(
        &model,
        &[
            HoAction::ClientArrives { client: 0 },
            HoAction::EmergencyDrain,
            HoAction::FenceWrites,
            HoAction::DesktopReconnects,
        ],
    );
    let drained = &states[4];
    assert!(drained.last.events.reconnect_refused_draining);
    assert_eq!(
        drained.cell.control(HOST),
        None,
        "the drain closed the control"
    );
    let source = drained.project().source.expect("the drained machine stays");
    assert_eq!(source.gate, GateKind::Drained);
    let (machine, _) = drained.cell.machine(HOST).expect("machine");

    // The undrain waits for the drained work (the accept) to close.
    let mut refused = model.step(drained, HoAction::Undrain);
    assert_eq!(refused.last.anomalies, Anomalies::default());
    assert!(
        refused.cell.machine(HOST).is_some(),
        "still closing: refused"
    );
    assert!(!refused.undrained);
    refused.last = drained.last;
    assert_eq!(&refused, drained, "a refused undrain changes nothing");

    let mut states = vec![drained.clone()];
    for action in [
        HoAction::ClientAttaches { client: 1 },
        HoAction::Undrain,
        HoAction::DesktopReconnects,
        HoAction::DirectorSends { lost: false },
        HoAction::DbRuns {
            job: 0,
            delivery: Delivery::Delivered,
        },
    ] {
        let before = states.last().expect("a state");
        let mut enabled = Vec::new();
        model.actions(before, &mut enabled);
        assert!(enabled.contains(&action), "{action} is not enabled");
        let after = model.step(before, action);
        assert_eq!(after.last.anomalies, Anomalies::default(), "{action}");
        states.push(after);
    }
    assert!(
        states[1].last.events.abandoned,
        "the drained accept abandons"
    );
    assert!(states[2].undrained && states[2].cell.machine(HOST).is_none());
    let (fresh, _) = states[3].cell.machine(HOST).expect("a new machine");
    assert_ne!(fresh, machine);
    assert_eq!(
        states[4].project().source.expect("source").gate,
        GateKind::Gated
    );
    assert!(states[5].last.events.committed);
    assert_eq!(states[5].project().assigned_cell, TGT.0);
}

/// HO-A4: a replacement control rebinds the live machine; the replaced session's late end is
/// ignored, and the new session's close reaches the machine.
#[test]
fn ho_a4_model_replacement_rebinds_and_the_old_session_end_is_ignored() {
    let model = HandoffModel::new(HandoffParams::default());
    let states = run(
        &model,
        &[
            HoAction::ControlActivates,
            HoAction::ControlRegisters,
            HoAction::ControlCloses,
        ],
    );
    let (machine, _) = states[0].cell.machine(HOST).expect("machine");
    let first = states[0].cell.control(HOST).expect("session");
    assert!(states[2].last.events.rebound);
    assert!(states[2].last.events.late_close_ignored);
    let second = states[2].cell.control(HOST).expect("the new session");
    assert_ne!(second, first);
    assert_eq!(
        states[2].cell.machine(HOST).map(|(id, _)| id),
        Some(machine)
    );
    assert_eq!(states[3].cell.control(HOST), None);
    assert!(!states[3].src().expect("machine").session_open());
}

/// HO-L1: an attempt whose transaction timed out is reconciled, and the locked reconciliation
/// fences its op id (the transaction had not run). The source reopens and still serves the
/// host; the director's next pass must pick a new op id that the source starts, without the
/// desktop reconnecting.
#[test]
fn ho_l1_model_a_fenced_attempt_is_retried_with_a_new_op_id() {
    let model = HandoffModel::new(HandoffParams::default());
    let states = run(
        &model,
        &[
            HoAction::DirectorSends { lost: false },
            HoAction::TimeAdvances,
            // Jobs are sorted: the transaction (0) before the reconciliation (1).
            HoAction::DbRuns {
                job: 1,
                delivery: Delivery::Delivered,
            },
        ],
    );
    let fenced = &states[3];
    assert!(fenced.last.events.fenced_abort);
    let source = fenced.project().source.expect("source");
    assert_eq!(source.gate, GateKind::Open);
    assert_eq!(source.last_outcome, Some(OutcomeKind::Fenced));
    let ended = fenced
        .src()
        .and_then(|m| m.last_result())
        .expect("the fenced result")
        .op_id;
    let retry = HandoffModel::pick(fenced).expect("the director picks the host again");
    assert_ne!(retry.op_id, ended, "HO-L1: a new op id, not the fenced one");
    assert!(!stranded(fenced));
    let mut enabled = Vec::new();
    model.actions(fenced, &mut enabled);
    assert!(enabled.contains(&HoAction::DirectorSends { lost: false }));
    // The director still holds the fenced request: re-sending it learns the recorded
    // outcome (the reply carrying it was lost), and its next pass picks the new op id.
    let learned = model.step(fenced, HoAction::DirectorSends { lost: false });
    assert!(learned.last.events.answered_recorded_result);
    assert_eq!(learned.dir_request, None);
    let retried = model.step(&learned, HoAction::DirectorSends { lost: false });
    assert_eq!(retried.last.anomalies, Anomalies::default());
    assert_eq!(
        retried.project().source.expect("source").gate,
        GateKind::Gated,
        "the retry starts"
    );
    assert_eq!(retried.dir_request.map(|r| r.op_id), Some(retry.op_id));
}

/// HO-L2: a second process with the source cell's id is refused while the holder lives and
/// changes nothing; when the holder dies, its successor is refused until the dead lease has
/// lapsed and then takes the cell with the next incarnation. A rolling restart releases the
/// lease, so its successor starts at once.
#[test]
fn ho_l2_model_one_live_process_per_cell_id() {
    let model = HandoffModel::new(HandoffParams::default());
    let init = model.init_state();
    let mut enabled = Vec::new();
    model.actions(&init, &mut enabled);
    assert!(enabled.contains(&HoAction::SecondProcessStarts));
    assert_eq!(
        model.step(&init, HoAction::SecondProcessStarts),
        init,
        "refused, nothing written"
    );

    let states = run(
        &model,
        &[
            HoAction::DirectorSends { lost: false },
            HoAction::SourceRestart { old_lingers: false },
        ],
    );
    let (before, after) = (&states[1], &states[2]);
    assert!(after.last.events.successor_after_lapse);
    assert_eq!(
        after.now,
        before.lease_until(),
        "the dead lease had to lapse"
    );
    assert_eq!(after.cell.incarnation().0, before.cell.incarnation().0 + 1);
    assert_eq!(
        after.lease().map(|(inc, _)| inc),
        Some(after.cell.incarnation())
    );
    assert!(after.lease_until() > after.now);

    let rolling = run(
        &model,
        &[
            HoAction::DirectorSends { lost: false },
            HoAction::SourceRestart { old_lingers: true },
        ],
    );
    assert_eq!(
        rolling[2].now, rolling[1].now,
        "a released lease is free at once"
    );
    assert!(
        rolling[2].old_cell.is_some(),
        "the old process finishes its attempt"
    );
}

/// HO-7: the work-kinds scenario (splices and a pending connection beside one client) at one
/// fault (its review bound has two: 439,205 states, the checker's job): every property holds,
/// every witness is reached; the count is pinned.
#[test]
fn ho_model_work_kinds_scenario_holds_every_property() {
    let one_fault = HandoffParams {
        max_faults: 1,
        ..HandoffParams::work_kinds()
    };
    let checker = HandoffModel::in_scenario(Scenario::WorkKinds, one_fault)
        .checker()
        .threads(2)
        .spawn_bfs()
        .join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), WORK_KINDS_STATES);
}

const WORK_KINDS_STATES: usize = 49_296;

/// HO-7 / HO-2: a pending connection alone makes the source busy (nothing held); an attached
/// client's relayed mutation is counted as a splice, released on the desktop's ack.
#[test]
fn ho_7_model_a_pending_connection_and_a_splice_are_counted() {
    let model = HandoffModel::new(HandoffParams::work_kinds());
    let states = run(
        &model,
        &[
            HoAction::PendingOpens,
            HoAction::DirectorSends { lost: false },
            HoAction::PendingEnds,
            HoAction::ClientArrives { client: 0 },
            HoAction::ClientAttaches { client: 0 },
            HoAction::ClientPersisted { client: 0 },
            HoAction::ClientRelays { client: 0 },
            HoAction::DesktopAcks { client: 0 },
        ],
    );
    let busy = &states[2];
    assert!(busy.last.events.busy);
    let source = busy.project().source.expect("source");
    assert_eq!(source.gate, GateKind::Open);
    assert_eq!(source.counters.pending_conns, 1);
    let relayed = states[7].project().source.expect("source").counters;
    assert_eq!((relayed.splices, relayed.client_conns), (1, 1));
    let acked = states[8].project().source.expect("source").counters;
    assert_eq!((acked.splices, acked.client_conns), (0, 1));
}

/// HO-7 / HO-A4: an accept taken before a replacement control rebinds the machine abandons at
/// its next re-check; the late second release of its ticket is reported `StaleGeneration` and
/// changes no counter.
#[test]
fn ho_7_model_a_late_release_of_an_old_generation_is_stale() {
    let model = HandoffModel::new(HandoffParams::default());
    let states = run(
        &model,
        &[
            HoAction::ClientArrives { client: 0 },
            HoAction::ControlActivates,
            HoAction::ControlRegisters,
            // Clients are kept sorted: the one that arrived sorts after the one away.
            HoAction::ClientAttaches { client: 1 },
        ],
    );
    assert!(states[3].last.events.rebound);
    let last = &states[4];
    assert!(last.last.events.abandoned && last.last.events.stale_release);
    assert_eq!(last.project().source.expect("source").counters.total(), 0);
}

/// HO-S1: the second host on the source cell reads the same epoch, incarnation and generation;
/// its pick carries another op id.
#[test]
fn ho_s1_model_two_hosts_on_one_cell_get_different_op_ids() {
    let model = HandoffModel::new(HandoffParams::default());
    let init = model.init_state();
    let one = HandoffModel::pick(&init).expect("a pick");
    let two = HandoffModel::pick_second_host(&init).expect("a pick for the second host");
    assert_eq!(
        (
            one.source.epoch,
            one.source.incarnation,
            one.source.generation
        ),
        (
            two.source.epoch,
            two.source.incarnation,
            two.source.generation
        )
    );
    assert_ne!(one.op_id, two.op_id);
}

/// HO-A5: a drain during an outage: the fence's write fails, the host refuses undrain while it
/// is unwritten, the machine's retry timer sends it out again once the DB is back, and it lands
/// (the generation bumped).
#[test]
fn ho_a5_model_a_failed_fence_write_is_retried_and_lands() {
    let model = HandoffModel::new(HandoffParams::default());
    let states = run(
        &model,
        &[
            HoAction::DirectorSends { lost: true },
            HoAction::EmergencyDrain,
            HoAction::DbOutage,
            HoAction::FenceFails,
        ],
    );
    let failed = states.last().expect("a state");
    assert!(failed.pending_fence.is_none(), "no write is out");
    let fence = *failed.src().and_then(|m| m.pending_fence()).expect("kept");
    assert_eq!(fence.failures(), 1);
    assert!(fence.retry_at().is_some());
    assert!(
        failed.next_deadline() <= fence.retry_at(),
        "a deadline of TimeAdvances"
    );
    let generation = failed.store.authority(HOST).expect("row").generation;
    let mut states = vec![failed.clone()];
    for action in [
        HoAction::DbRecovers,
        HoAction::TimeAdvances,
        HoAction::FenceWrites,
    ] {
        let before = states.last().expect("a state");
        let mut enabled = Vec::new();
        model.actions(before, &mut enabled);
        assert!(enabled.contains(&action), "{action} is not enabled");
        let after = model.step(before, action);
        assert_eq!(after.last.anomalies, Anomalies::default(), "{action}");
        states.push(after);
    }
    assert!(states[2].pending_fence.is_some(), "the retry sent it out");
    let landed = &states[3];
    assert!(landed.last.events.fence_retried_landed);
    assert!(landed.src().is_some_and(|m| m.pending_fence().is_none()));
    assert_eq!(
        landed.store.authority(HOST).expect("row").generation,
        generation.next()
    );
}

/// HO-7: a client's activity write fails: the accept is released (nothing counted) and the
/// client is away; the barrier may then install.
#[test]
fn ho_7_model_a_failed_persist_releases_the_accept() {
    let model = HandoffModel::new(HandoffParams::default());
    let states = run(
        &model,
        &[
            HoAction::ClientArrives { client: 0 },
            HoAction::ClientAttaches { client: 1 },
            HoAction::ClientPersistFails { client: 1 },
            HoAction::DirectorSends { lost: false },
        ],
    );
    assert_eq!(
        states[2].src().expect("source").gate().counters().accepts,
        1,
        "persisting counts as the accept"
    );
    assert!(states[3].last.events.persist_failed);
    assert!(states[3].src().expect("source").gate().counters().is_zero());
    assert_eq!(
        states[4].project().source.expect("source").gate,
        GateKind::Gated
    );
}

/// HO-A4 / HO-S4: the registrations scenario at a smaller bound (no client, one fault; its
/// review bound, one client and two faults, is the checker's job: 105,659 states): every
/// property holds, its witnesses are reached (a second registration refused under the
/// barrier, a fresh machine over a retired one, a commit on the escrow token path); pinned.
#[test]
fn ho_a4_model_registrations_scenario_holds_every_property() {
    let small = HandoffParams {
        clients: 0,
        max_faults: 1,
        ..Scenario::Registrations.params()
    };
    let checker = HandoffModel::in_scenario(Scenario::Registrations, small)
        .checker()
        .threads(2)
        .spawn_bfs()
        .join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), REGISTRATIONS_STATES);
}

const REGISTRATIONS_STATES: usize = 7_634;

fn run_in(model: &HandoffModel, actions: &[HoAction]) -> Vec<HoState> {
    let mut states = vec![model.init_state()];
    for action in actions {
        let before = states.last().expect("a state");
        let mut enabled = Vec::new();
        model.actions(before, &mut enabled);
        assert!(enabled.contains(action), "{action} is not enabled");
        states.push(model.caught_step(before, *action));
    }
    for state in &states {
        assert_eq!(state.last.anomalies, Anomalies::default(), "no anomaly");
        assert_eq!(state.core_panic, None);
    }
    states
}

/// HO-A4 / HO-S3: two activations of the desktop's control race. The second begins before
/// any machine (no ticket); the first registers and is installed; the director's request puts
/// up the barrier; then the second registers: the store renews the generation, and the cell
/// refuses the install (`ControlGated`) and keeps the attempt's machine and barrier. The
/// attempt then fails its re-check and the source retires stale; the desktop's reconnect
/// gets a fresh machine over the retired one.
#[test]
fn ho_a4_model_a_second_registration_under_the_barrier_is_refused_then_installs_over_the_retired_source(
) {
    let model =
        HandoffModel::in_scenario(Scenario::Registrations, Scenario::Registrations.params());
    let states = run_in(
        &model,
        &[
            HoAction::SecondControlActivates,
            HoAction::DesktopReconnects,
            HoAction::DirectorSends { lost: false },
            HoAction::SecondControlRegisters,
            HoAction::DbRuns {
                job: 0,
                delivery: Delivery::Delivered,
            },
            HoAction::DesktopReconnects,
        ],
    );
    assert!(states[1].control2.is_some_and(|c| c.held.is_none()));
    let gated = &states[4];
    assert!(gated.last.events.registration_gated);
    assert_eq!(
        gated.project().source.expect("source").gate,
        GateKind::Gated
    );
    assert!(states[5].last.events.stale_retired);
    assert!(states[6].last.events.over_retired);
    assert_eq!(
        states[6].project().source.expect("source").gate,
        GateKind::Open
    );
}

/// HO-S4: the escrow shadow. A fresh store's shards hold no tokens, so the first commit takes
/// the exact path and deals every limit's room left (after the commit: one reservation of
/// four, the target full); with the shards dealt at the start, the commit spends a token.
#[test]
fn ho_s4_model_the_escrow_shards_deal_the_room_left_and_the_token_path_spends_it() {
    let commit = [
        HoAction::DirectorSends { lost: false },
        HoAction::DbRuns {
            job: 0,
            delivery: Delivery::Delivered,
        },
    ];
    let fresh = run_in(&HandoffModel::new(HandoffParams::default()), &commit);
    let shadow = &fresh[2].escrow;
    assert!(!fresh[2].last.events.escrow_token_commit);
    let in_flight: u64 = shadow.shards.iter().map(|s| s.in_flight_tokens).sum();
    assert_eq!(in_flight, 3, "four in flight at most, one reserved");
    assert_eq!(
        shadow.target.iter().map(|t| t.1).sum::<u64>(),
        0,
        "target full"
    );
    assert_eq!(
        shadow.target[0].0, 1,
        "the exact path gathers the target's hosts on shard 0"
    );
    assert!(shadow.agrees_with(&fresh[2].store));

    let dealt = run_in(
        &HandoffModel::new(HandoffParams {
            escrow_dealt: true,
            ..HandoffParams::default()
        }),
        &commit,
    );
    assert!(dealt[2].last.events.escrow_token_commit);
    assert!(dealt[2].escrow.agrees_with(&dealt[2].store));
}

/// A core invariant that fires inside a model step is the step's counterexample, not a crash:
/// an impossible input (a shard row whose count is negative, which no store writes) makes the
/// core's `exact_limits` invariant fire when the shadow next reads the totals; the step
/// leads to the state before it with the message, and the property reports it.
#[test]
fn a_core_invariant_that_fires_in_a_model_step_is_reported_by_its_property() {
    let model = HandoffModel::new(HandoffParams::default());
    let mut state = model.init_state();
    state.escrow.shards[1].commits = -5;
    let sent = model.caught_step(&state, HoAction::DirectorSends { lost: false });
    assert_eq!(
        sent.core_panic, None,
        "the store did not change: nothing read"
    );
    let failed = model.caught_step(
        &sent,
        HoAction::DbRuns {
            job: 0,
            delivery: Delivery::Delivered,
        },
    );
    let message = failed.core_panic.clone().expect("the invariant fired");
    assert!(
        message.contains("a global count is never negative"),
        "{message}"
    );
    assert_eq!(failed.store, sent.store, "the half-done step is dropped");
    let property = model
        .properties()
        .into_iter()
        .find(|p| p.name == switchyard_spec::caught::CORE_INVARIANTS)
        .expect("the property");
    assert!(!(property.condition)(&model, &failed));
    assert!((property.condition)(&model, &sent));
    let mut next = Vec::new();
    model.actions(&failed, &mut next);
    assert!(next.is_empty(), "nothing is explored past it");
}
