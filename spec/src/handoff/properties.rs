//! The properties, each named by its requirement ID, read as predicates: [`handoff_properties`]
//! lists them in the order the checker reports them, and each `always` property below is one
//! function holding its name and its predicate, with the judges that record its facts beside
//! it. A predicate reads the state, or a fact only a transition shows ([`StepFacts`]): the step
//! function (`step.rs`) calls a judge at the point where the fact is known and the judge
//! records it (each recording names its property). A judge that records for several properties
//! sits with the first of them; the others name it. The `sometimes` witnesses are one-line
//! predicates over the recorded events, listed at the end of the table.

use super::escrow::ho_s4_escrow_agrees;
use super::races::{ho_7_live_release_reported_stale, ho_a4_control_gated_under_barrier};
use super::step::Outputs;
use super::*;

/// Declares a struct of `bool` facts whose `Hash` is one word, a bit per fact, instead of a
/// write per field: the checker hashes every state it generates, and these two structs are 66
/// of a handoff state's fields. The packing is one-to-one (at most 64 facts each, checked when
/// compiled), so equal facts hash alike and different facts are different words.
macro_rules! bool_facts {
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[$field_meta:meta])* pub $field:ident: bool,)*
    }) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: bool,)*
        }

        const _: () = assert!([$(stringify!($field)),*].len() <= 64, "at most 64 facts");

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                let mut bits = 0u64;
                let mut bit = 0u32;
                $(
                    bits |= u64::from(self.$field) << bit;
                    bit += 1;
                )*
                let _ = bit;
                state.write_u64(bits);
            }
        }
    };
}

/// What the last step did, kept in the state so `always` properties can judge transitions.
///
/// Two kinds of record. [`Anomalies`] are judged by the `always` properties: each field is what
/// a step must never do, named after what it did, and stays `false` in a correct run (so it
/// adds no states). [`Events`] are what the `sometimes` witnesses look for.
///
/// Measured: the events multiply the unique states by about 2.7 (hashing only the anomalies,
/// review bound: 2,123,410 -> 773,420; small bound: 75,099 -> 29,559, both before the late
/// releases, the second host and the work-kinds scenario, which made them 2,154,186 and 75,837;
/// before the `SourceCell` rewrite 454,500 -> 164,637). But without them a witness whose step leaves the rest of the
/// state as it was (a duplicate answered in progress) is never reached, and which of two
/// equal states is kept first depends on the checker's thread interleaving (the generated
/// count then varies from run to run), so a witness could come and go between runs. They stay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepFacts {
    pub anomalies: Anomalies,
    pub events: Events,
}

bool_facts! {
/// Transition facts a correct core never produces (grouped by the property that judges them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomalies {
    /// HO-1: the store moved the host while the committing source was not gated by that op
    /// over zero tickets, or while the environment held client / control work there.
    pub moved_over_work: bool,
    /// HO-1: a retire was queued while the source held live tickets.
    pub retired_over_tickets: bool,
    /// HO-2: `Busy` with no live work, or `Started` with live work.
    pub idleness_misjudged: bool,
    /// HO-7: a barrier was installed while a counter or the environment's work was non-zero.
    pub barrier_over_work: bool,
    /// HO-7: a late release of ended work (released, abandoned, or consumed by the core) was
    /// not reported as a no-op (`StaleGeneration` for a ticket of an older generation,
    /// `DoubleRelease` otherwise, nothing for a replaced machine), or changed a counter or the
    /// live tickets; after a rebind, a release naming an ended ticket of the old generation was
    /// not reported `StaleGeneration` (or `UnknownTicket`), or changed them.
    pub late_release_counted: bool,
    /// HO-8: a heartbeat / activity renewal changed a counter or the idleness.
    pub heartbeat_counted: bool,
    /// HO-10: a missing or expired DB lease changed a counter or the idleness.
    pub lease_counted: bool,
    /// HO-S1: a sent op id is not the UUIDv5 of its authority and target, a fresh pick is not
    /// at the store's current authority, or a recomputed id differs for the same authority.
    pub op_id_inconsistent: bool,
    /// HO-S1: an op id is shared by two moves: the request's id equals the id of the same
    /// authority with another host, epoch, incarnation, generation, source cell or target, or
    /// the pick for the second host, or a recorded attempt of another (source, target).
    pub op_id_shared: bool,
    /// HO-S1 / HO-A3: a director step wrote the store (no prepare state).
    pub director_wrote_store: bool,
    /// HO-S2: an answer other than `Started` changed the source machine.
    pub answer_changed_machine: bool,
    /// HO-S2: a `Busy` named counters other than the gate's non-zero ones.
    pub busy_counters_wrong: bool,
    /// HO-S3: new work was admitted while a barrier stood.
    pub admitted_under_barrier: bool,
    /// HO-S3: a client refused at a gated (undrained) source, or at a cell without the host,
    /// did not get 4409 WRONG_CELL, or a control activation at a gated source was not refused
    /// as `ControlGated`.
    pub gated_refusal_wrong: bool,
    /// HO-S4: a commit moved something other than the exact authority it re-checked, or not to
    /// its target with epoch + 1 and its own reservation.
    pub commit_not_exact: bool,
    /// HO-S5: a committed outcome did not close the source as retired-by-commit with a
    /// `RetireSourceDraining { Committed }`, or reopened it.
    pub commit_not_retired: bool,
    /// HO-S6: an explicit rollback (authority unchanged, not drained) did not reopen the
    /// barrier with `ReopenAdmission`, kept a reservation, or came with a changed authority.
    pub rollback_not_reopened: bool,
    /// HO-S6: an authority-changed outcome reopened, or did not retire the stale source.
    pub stale_not_retired: bool,
    /// HO-A1: an op id that already had a durable record committed (a second migration).
    pub second_migration: bool,
    /// HO-A2: the barrier went away without a definitive rollback of that attempt in the step.
    pub reopened_without_rollback: bool,
    /// HO-A3: the close of the desktop's open control session did not reach its machine.
    pub open_session_close_ignored: bool,
    /// HO-A4: a late result (its attempt ended, its machine replaced, its process dead) was
    /// applied, or changed the machine it reached.
    pub late_callback_changed_machine: bool,
    /// HO-A4: a timer of a replaced machine was not fenced off (`Fed::Late`).
    pub stale_timer_applied: bool,
    /// HO-A4: the late end of a session the cell had closed (or of a closed desktop) was taken
    /// for the open one.
    pub late_close_changed_cell: bool,
    /// HO-A4: a registration at the source succeeded although the host had moved.
    pub registered_over_move: bool,
    /// HO-A4: a control that registered in the store (with the activation's control ticket,
    /// or where there was no live machine) was not installed, though the host was not
    /// drained; or a restarted process's registration did not get a new machine.
    pub registered_not_installed: bool,
    /// HO-A5: an attempt started at a disabled source.
    pub started_while_disabled: bool,
    /// HO-A5: a drained source ended its attempt open.
    pub drained_reopened: bool,
    /// HO-A5: an emergency drain did not hard-drain the host, left its control open, or did
    /// not close it through the DRAINING path.
    pub drain_incomplete: bool,
    /// HO-A5: a control was refused before its registration although the host is not
    /// drained here, or a drained host's control was not.
    pub control_refusal_wrong: bool,
    /// HO-A6: the reply was queued before the retire (or not at all).
    pub reply_before_retire: bool,
    /// HO-A6: a retirement left the control open, or closed it after the retire.
    pub control_kept_on_retire: bool,
    /// HO-L1: a registration installed a machine over a drained one (before any undrain).
    pub drained_got_machine: bool,
    /// HO-L1: an undrain was refused without its reason, or accepted while the drained
    /// attempt was in flight or drained work still held tickets, or did not forget the host.
    pub undrain_misjudged: bool,
    /// HO-L2: a process started with the cell's id while its holder's lease was live was not
    /// refused, or a successor was refused a released or lapsed lease.
    pub second_process_started: bool,
    /// HO-A5: a fence write's result was not taken as it must be: a failure that did not keep
    /// the fence with a retry timer and report it (`FenceFailed`), or a written fence kept.
    pub fence_mishandled: bool,
    /// HO-7: the attach machine stepped wrong: a failed persist that did not close the client
    /// `activity_not_persisted` with its accept released (still live in the gate), or a step
    /// out of its order.
    pub attach_misjudged: bool,
    /// HO-7: a release naming a live ticket with another generation was not reported
    /// `StaleGeneration`, or changed a counter or the live tickets.
    pub live_release_counted: bool,
    /// HO-A4: a control registered while a barrier stood was installed (or its refusal was
    /// not `ControlGated`, or the attempt's machine or barrier changed).
    pub installed_under_barrier: bool,
    /// HO-S4: the escrowed limit shards disagree with the store (see `escrow.rs`).
    pub escrow_disagrees: bool,
    /// HO-L4: a request of an op id refused for a reason that clears was answered from that
    /// refusal after its hold (parked), or started a new attempt inside it.
    pub refusal_misheld: bool,
}
}

bool_facts! {
/// Events worth witnessing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Events {
    /// HO-L4: a request of a refused op id started a new attempt after its hold.
    pub refused_tried_anew: bool,
    pub busy: bool,
    pub answered_recorded_result: bool,
    pub answered_in_progress: bool,
    pub refused_disabled: bool,
    pub committed: bool,
    pub committed_after_ambiguity: bool,
    pub explicit_abort_reopened: bool,
    pub fenced_abort: bool,
    pub stale_retired: bool,
    pub recovered_after_quarantine: bool,
    pub drained_during_attempt: bool,
    pub finished_drained: bool,
    pub fence_landed_first: bool,
    pub finished_disabled: bool,
    pub finished_without_session: bool,
    pub stale_txn_rejected: bool,
    pub late_from_old_machine: bool,
    pub late_fenced: bool,
    pub late_close_ignored: bool,
    pub rebound: bool,
    pub reconnect_refused_draining: bool,
    pub restart_refused_moved: bool,
    pub abandoned: bool,
    /// HO-7: a late release of an old generation's work was reported `StaleGeneration`.
    pub stale_release: bool,
    pub crash_during_attempt: bool,
    pub wrong_cell_at_barrier: bool,
    pub control_gated: bool,
    pub target_registered: bool,
    pub registration_recovered: bool,
    pub successor_after_lapse: bool,
    /// HO-L2: the step changed what a starting process's lease decision reads (the holder or
    /// the clock): the first start, a restart, a renewal at a clock jump.
    pub lease_taken_or_renewed: bool,
    /// HO-A5: a fence write that had failed landed (its retry).
    pub fence_retried_landed: bool,
    /// HO-7: a failed persist closed its client `activity_not_persisted`.
    pub persist_failed: bool,
    /// HO-A4: a second registration was refused under the barrier, the attempt kept.
    pub registration_gated: bool,
    /// HO-A4: a registration installed a fresh machine over a retired one.
    pub over_retired: bool,
    /// HO-S4: a commit took the escrow token path.
    pub escrow_token_commit: bool,
}
}

/// The properties, each named by its requirement ID: the `always` properties first, then the
/// `sometimes` witnesses (named `<ID> witness: ...`).
/// Witnesses of a work kind the parameters do not offer are left out; the work-kinds scenario
/// judges every `always` property but asks only for HO-7's witnesses (what it adds: the review
/// scenario reaches the others).
pub fn handoff_properties(
    params: &HandoffParams,
    scenario: Option<Scenario>,
) -> Vec<Property<HandoffModel>> {
    let mut properties = all_properties();
    let sometimes =
        |p: &Property<HandoffModel>| p.expectation == stateright::Expectation::Sometimes;
    properties.retain(|p| {
        (params.pending_conns > 0 || p.name != PENDING_WITNESS)
            && (params.splices > 0 || p.name != SPLICE_WITNESS)
            && (params.max_faults >= 2 || p.name != FENCE_RETRY_WITNESS)
            && (scenario != Some(Scenario::WorkKinds)
                || !sometimes(p)
                || p.name.starts_with("HO-7 witness"))
    });
    properties.extend(widened_properties());
    // The registrations scenario asks only for its own witnesses (the others' scenarios reach
    // the rest), and only it asks for them.
    let registrations = scenario == Some(Scenario::Registrations);
    properties
        .retain(|p| !sometimes(p) || registrations == REGISTRATIONS_WITNESSES.contains(&p.name));
    properties
}

const REGISTRATIONS_WITNESSES: [&str; 3] = [
    "HO-A4 witness: a second registration is refused under the barrier, the attempt kept",
    "HO-A4 witness: a registration installs a fresh machine over a retired one",
    "HO-S4 witness: a commit on the escrow token path",
];

/// The properties of issue #25's widening (`races.rs`, `escrow.rs`, `crate::caught`).
fn widened_properties() -> Vec<Property<HandoffModel>> {
    vec![
        ho_7_live_release_reported_stale(),
        ho_a4_control_gated_under_barrier(),
        ho_s4_escrow_agrees(),
        Property::always(crate::caught::CORE_INVARIANTS, |_, s: &HoState| {
            s.core_panic.is_none()
        }),
        Property::sometimes(REGISTRATIONS_WITNESSES[0], |_, s: &HoState| {
            s.last.events.registration_gated
        }),
        Property::sometimes(REGISTRATIONS_WITNESSES[1], |_, s: &HoState| {
            s.last.events.over_retired
        }),
        Property::sometimes(REGISTRATIONS_WITNESSES[2], |_, s: &HoState| {
            s.last.events.escrow_token_commit
        }),
    ]
}

const PENDING_WITNESS: &str = "HO-7 witness: a pending connection alone makes the source busy";
const SPLICE_WITNESS: &str = "HO-7 witness: a relayed mutation in flight (splice) is counted";
/// HO-A5: a fence write fails only while the DB is down: a drain and an outage, two faults.
const FENCE_RETRY_WITNESS: &str = "HO-A5 witness: a failed fence write is retried and lands";

fn all_properties() -> Vec<Property<HandoffModel>> {
    vec![
        // ---- always (each a function below, in this order) ---------------------------------
        ho_1_never_moves_over_work(),
        ho_2_busy_iff_live_work(),
        ho_7_counters_are_the_live_work(),
        ho_7_late_release_changes_nothing(),
        ho_8_heartbeats_not_counted(),
        ho_10_lease_not_idleness(),
        ho_s1_same_op_id_read_only_pick(),
        ho_s1_op_id_names_one_move(),
        ho_s2_busy_changes_nothing(),
        ho_s3_no_admission_under_barrier(),
        ho_s4_commit_exact(),
        ho_s5_committed_retires(),
        ho_s6_abort_reopens_stale_retires(),
        ho_a1_one_migration_per_op_id(),
        ho_a2_no_reopen_without_outcome(),
        ho_a3_crash_strands_nothing(),
        ho_a4_late_callback_changes_nothing(),
        ho_a5_drained_never_reopens(),
        ho_a6_retire_before_reply(),
        ho_l1_drained_host_waits_for_undrain(),
        ho_l1_no_stranded_host(),
        ho_l2_one_live_process(),
        ho_l4_refusal_never_parks(),
        ho_a5_fence_never_dropped(),
        ho_7_failed_persist_releases(),
        ho_s3_no_barrier_over_half_attached(),
        // ---- bounded: every cap of the model is a property (see `HandoffModel::over_cap`) -----
        ho_7_bounded_tickets(),
        ho_a3_bounded_jobs(),
        ho_s4_bounded_reservations(),
        ho_a1_bounded_attempts(),
        ho_a4_bounded_ids(),
        // ---- sometimes ----------------------------------------------------------------------
        Property::sometimes(
            "HO-S5 witness: commit retires the source",
            |_, s: &HoState| s.last.events.committed,
        ),
        Property::sometimes(
            "HO-S6 witness: explicit abort reopens admission",
            |_, s: &HoState| s.last.events.explicit_abort_reopened,
        ),
        Property::sometimes(
            "HO-S6 witness: authority changed retires the stale source",
            |_, s: &HoState| s.last.events.stale_retired,
        ),
        Property::sometimes("HO-A2 witness: ambiguous then commit", |_, s: &HoState| {
            s.last.events.committed_after_ambiguity
        }),
        Property::sometimes(
            "HO-A1 witness: ambiguous then fenced abort",
            |_, s: &HoState| s.last.events.fenced_abort,
        ),
        Property::sometimes("HO-S2 witness: busy", |_, s: &HoState| s.last.events.busy),
        Property::sometimes(
            "HO-7 witness: a control activation in flight makes the source busy",
            |_, s: &HoState| s.control.is_some_and(|c| c.held.is_some()) && s.last.events.busy,
        ),
        Property::sometimes(
            "HO-7 witness: an attach waiting for persistence makes the source busy",
            |_, s: &HoState| {
                s.last.events.busy
                    && s.clients
                        .iter()
                        .any(|c| matches!(c.phase, ClientPhase::Attaching(_)))
            },
        ),
        Property::sometimes(
            "HO-A2 witness: quarantined (store unavailable)",
            |_, s: &HoState| {
                s.machines().any(|(_, _, m)| {
                    m.attempt().is_some_and(|a| {
                        matches!(
                            a.phase(),
                            Phase::Quarantined {
                                cause: QuarantineCause::StoreUnavailable,
                                ..
                            }
                        )
                    })
                })
            },
        ),
        Property::sometimes(
            "HO-A2 witness: quarantine (store unavailable) then recovery",
            |_, s: &HoState| s.last.events.recovered_after_quarantine,
        ),
        Property::sometimes(
            "HO-A5 witness: drain during an attempt",
            |_, s: &HoState| s.last.events.drained_during_attempt,
        ),
        Property::sometimes(
            "HO-A5 witness: a drained source's attempt ends closed",
            |_, s: &HoState| s.last.events.finished_drained,
        ),
        Property::sometimes(
            "HO-A5 witness: the drain fence lands before the transaction",
            |_, s: &HoState| s.last.events.fence_landed_first,
        ),
        Property::sometimes(
            "HO-A5 witness: disabled, the attempt in flight still ends",
            |_, s: &HoState| s.last.events.finished_disabled,
        ),
        Property::sometimes(
            "HO-A5 witness: a disabled source refuses a new attempt",
            |_, s: &HoState| s.last.events.refused_disabled,
        ),
        Property::sometimes(
            "HO-A5 witness: a drained source refuses the desktop's new registration",
            |_, s: &HoState| s.last.events.reconnect_refused_draining,
        ),
        Property::sometimes(
            "HO-A4 witness: after a restart the old transaction fails its re-check",
            |_, s: &HoState| s.last.events.stale_txn_rejected,
        ),
        Property::sometimes(
            "HO-A4 witness: a late callback reaches the restarted source",
            |_, s: &HoState| s.last.events.late_from_old_machine,
        ),
        Property::sometimes(
            "HO-A4 witness: a late result for a replaced machine is fenced off",
            |_, s: &HoState| s.last.events.late_fenced,
        ),
        Property::sometimes(
            "HO-A4 witness: the late end of a replaced session is ignored",
            |_, s: &HoState| s.last.events.late_close_ignored,
        ),
        Property::sometimes(
            "HO-A4 witness: a replacement control rebinds",
            |_, s: &HoState| s.last.events.rebound,
        ),
        Property::sometimes(
            "HO-A4 witness: the commit wins over the restart",
            |_, s: &HoState| s.last.events.restart_refused_moved,
        ),
        Property::sometimes(
            "HO-7 witness: a late release of an old session's work is reported stale",
            |_, s: &HoState| s.last.events.stale_release,
        ),
        Property::sometimes(PENDING_WITNESS, |_, s: &HoState| {
            s.last.events.busy && s.pending.is_some() && s.live_work() == 1
        }),
        Property::sometimes(SPLICE_WITNESS, |_, s: &HoState| {
            s.clients.iter().any(|c| c.splice.is_some())
        }),
        Property::sometimes(
            "HO-A4 witness: a late continuation abandons after a replacement or drain",
            |_, s: &HoState| s.last.events.abandoned,
        ),
        Property::sometimes(
            "HO-A1 witness: duplicate answered with the recorded result",
            |_, s: &HoState| s.last.events.answered_recorded_result,
        ),
        Property::sometimes(
            "HO-L4 witness: a refused op id is tried anew after its hold",
            |_, s: &HoState| s.last.events.refused_tried_anew,
        ),
        Property::sometimes(
            "HO-A1 witness: duplicate answered in progress",
            |_, s: &HoState| s.last.events.answered_in_progress,
        ),
        Property::sometimes(
            "HO-A3 witness: the attempt ends after its control session closed",
            |_, s: &HoState| s.last.events.finished_without_session,
        ),
        Property::sometimes(
            "HO-A3 witness: the director crashes during an attempt",
            |_, s: &HoState| s.last.events.crash_during_attempt,
        ),
        Property::sometimes(
            "HO-S3 witness: a client refused with 4409 WRONG_CELL at a gated source",
            |_, s: &HoState| s.last.events.wrong_cell_at_barrier,
        ),
        Property::sometimes(
            "HO-S3 witness: a control activation refused at a gated source",
            |_, s: &HoState| s.last.events.control_gated,
        ),
        Property::sometimes(
            "HO-A6 witness: the desktop registers at the target",
            |_, s: &HoState| s.last.events.target_registered,
        ),
        Property::sometimes(
            "HO-A6 witness: registration expiry starts bounded recovery",
            |_, s: &HoState| s.last.events.registration_recovered,
        ),
        Property::sometimes("HO-L1 witness: undrained host moves", |_, s: &HoState| {
            s.undrained && s.last.events.committed
        }),
        Property::sometimes(
            "HO-L2 witness: a successor takes the cell once the dead process's lease has lapsed",
            |_, s: &HoState| s.last.events.successor_after_lapse,
        ),
        Property::sometimes(FENCE_RETRY_WITNESS, |_, s: &HoState| {
            s.last.events.fence_retried_landed
        }),
        Property::sometimes(
            "HO-7 witness: a failed activity persist closes its client",
            |_, s: &HoState| s.last.events.persist_failed,
        ),
    ]
}

// ---- HO-1: no move over work --------------------------------------------------------------------

/// HO-1: the store moves the host only while the committing source is gated by that op over
/// zero tickets and the environment holds no client or control work there (`moved_over_work`,
/// [`HandoffModel::judge_commit`] below); a retirement is queued only over zero live tickets
/// (`retired_over_tickets`, [`HandoffModel::judge_finish`] at HO-S5).
fn ho_1_never_moves_over_work() -> Property<HandoffModel> {
    Property::always(
        "HO-1 never moves with a client attached; a retire closes no client",
        |_, s: &HoState| {
            !s.last.anomalies.moved_over_work && !s.last.anomalies.retired_over_tickets
        },
    )
}

impl HandoffModel {
    /// HO-1 / HO-S4 / HO-A1: the store moved the host in this step.
    pub(super) fn judge_commit(
        state: &mut HoState,
        job: &Job,
        before: Option<SourceAuthority>,
        after: Option<SourceAuthority>,
        recorded_before: bool,
    ) {
        let req = &job.request;
        let env_quiet = job.inst != state.inst || state.live_work() == 0;
        let quiet = env_quiet
            && state
                .cell_of(job.inst)
                .and_then(|c| c.machine(HOST))
                .is_some_and(|(id, m)| {
                    id == job.machine
                        && m.gate().barrier().is_some_and(|b| b.op_id() == req.op_id)
                        && m.gate().counters().is_zero()
                });
        let exact = before == Some(req.source)
            && after.is_some_and(|a| {
                a.cell == req.target && before.is_some_and(|b| a.epoch == b.epoch.next())
            })
            && state
                .store
                .reservation(req.op_id)
                .is_some_and(|r| r.cell == req.target);
        let anomalies = &mut state.last.anomalies;
        anomalies.moved_over_work = !quiet; // HO-1
        anomalies.commit_not_exact = !exact; // HO-S4
        anomalies.second_migration = recorded_before; // HO-A1
    }
}

// ---- HO-2: busy iff live work -------------------------------------------------------------------

/// HO-2: the source answers `Busy` exactly when live work is held, `Started` only when none is
/// (`idleness_misjudged`, [`HandoffModel::judge_begin`] below, which also records HO-S2's facts
/// and the answers' witnesses).
fn ho_2_busy_iff_live_work() -> Property<HandoffModel> {
    Property::always(
        "HO-2 busy iff live work at that instant; the open control is no reason to wait",
        |_, s: &HoState| !s.last.anomalies.idleness_misjudged,
    )
}

impl HandoffModel {
    pub(super) fn judge_begin(
        state: &mut HoState,
        begin: Begin,
        machine_before: Option<(MachineId, SourceHandoff)>,
        live_work: u8,
        fresh_pick: bool,
    ) {
        let counters = machine_before
            .as_ref()
            .map(|(_, m)| m.gate().counters())
            .unwrap_or_default();
        let after = state.cell.machine(HOST);
        let anomalies = &mut state.last.anomalies;
        let events = &mut state.last.events;
        match begin {
            // HO-2 here and at `Busy`; HO-S2 and its witness at `Busy`; HO-A1's and HO-A5's
            // witnesses at the other answers.
            Begin::Started(_) => anomalies.idleness_misjudged = live_work > 0,
            Begin::Answered(reply) => {
                anomalies.answer_changed_machine =
                    machine_before.as_ref().map(|(id, m)| (*id, m)) != after;
                match reply {
                    HandoffReply::Busy {
                        counters: named, ..
                    } => {
                        events.busy = true;
                        anomalies.idleness_misjudged = live_work == 0;
                        anomalies.busy_counters_wrong =
                            named != counters || named == QuiescenceCounters::default();
                    }
                    HandoffReply::InProgress { .. } => events.answered_in_progress = !fresh_pick,
                    HandoffReply::Result(_) => events.answered_recorded_result = !fresh_pick,
                    HandoffReply::Refused {
                        reason: HandoffRefusal::Disabled,
                        ..
                    } => events.refused_disabled = true,
                    HandoffReply::Superseded { .. } | HandoffReply::Refused { .. } => {}
                }
            }
        }
    }
}

// ---- HO-7: the counters are the live work -------------------------------------------------------

/// HO-7: in every state each gate counter equals the live work of its kind; a barrier is
/// installed only over zero counters and no work in the environment (`barrier_over_work`,
/// [`HandoffModel::judge_transition`] below, which judges every step's gate transition and
/// also records HO-S3's, HO-A2's and HO-A5's facts).
fn ho_7_counters_are_the_live_work() -> Property<HandoffModel> {
    Property::always(
        "HO-7 barrier only installed when every counter is zero; each counter equals the live work of its kind",
        |_, s: &HoState| {
            !s.last.anomalies.barrier_over_work
                && s.src().is_none_or(|m| m.gate().counters() == s.held_work())
        },
    )
}

impl HandoffModel {
    /// Facts every step shares: the gate's transitions on the same machine.
    pub(super) fn judge_transition(before: &HoState, state: &mut HoState, action: HoAction) {
        let (Some((bid, b)), Some((aid, a))) =
            (before.cell.machine(HOST), state.cell.machine(HOST))
        else {
            return;
        };
        if before.inst != state.inst || bid != aid {
            return;
        }
        let was_gated = b.gate().barrier().is_some();
        let admitted = a.gate().counters().total() > b.gate().counters().total()
            || state.live_work() > before.live_work();
        let installed = !was_gated && a.gate().barrier().is_some();
        let reopened = was_gated && a.gate().state() == GateState::Open;
        let db_step = matches!(
            action,
            HoAction::DbRuns { .. } | HoAction::LateCallback { .. }
        );
        let anomalies = &mut state.last.anomalies;
        if installed {
            // HO-7 and HO-A5.
            anomalies.barrier_over_work = !b.gate().counters().is_zero() || before.live_work() > 0;
            anomalies.started_while_disabled = !b.is_enabled();
        }
        // HO-S3.
        anomalies.admitted_under_barrier = was_gated && admitted;
        // HO-A2: only a DB result may take a barrier away (judged in `db_runs`); any other step
        // that does (a timeout, a drain, a request) reopens without a terminal outcome.
        if reopened && !db_step {
            anomalies.reopened_without_rollback = true;
        }
    }
}

// ---- HO-7: late releases ------------------------------------------------------------------------

/// HO-7: a late release of ended work, or of an old generation's work after a rebind, is a
/// no-op reported as such (`late_release_counted`, recorded by the two judges below).
fn ho_7_late_release_changes_nothing() -> Property<HandoffModel> {
    Property::always(
        "HO-7 a late release (ended work, an old generation's after a rebind) is reported stale or double and changes no counter",
        |_, s: &HoState| !s.last.anomalies.late_release_counted,
    )
}

impl HandoffModel {
    /// HO-7: a unit of work has ended (its ticket released, abandoned by `revalidate`, or
    /// consumed by `handle_install_control`); a late duplicate of its release (an old session's guard
    /// firing again) arrives. The core must answer it as a no-op, `StaleGeneration` if the
    /// ticket is of an older generation than the gate's (after a rebind), `DoubleRelease`
    /// otherwise (nothing for a replaced machine), and change no counter. The answer depends
    /// only on the gate's generation and the ticket, neither of which comes back, so the
    /// moment it ends covers every later one but a rebind, which `judge_rebind_releases` covers.
    pub(super) fn judge_late_release(state: &mut HoState, held: Held) {
        let view = |s: &HoState| {
            s.cell.machine(HOST).map(|(id, m)| {
                let g = m.gate();
                (id, g.generation(), g.counters(), g.live_tickets().count())
            })
        };
        let before = view(state);
        let report = state.cell.handle_release(&held.work());
        let expected = before
            .filter(|(id, ..)| *id == held.machine)
            .map(|(_, generation, ..)| {
                if held.ticket.generation < generation {
                    ReleaseReport::StaleGeneration
                } else {
                    ReleaseReport::DoubleRelease
                }
            });
        state.last.anomalies.late_release_counted |= report != expected || view(state) != before;
        state.last.events.stale_release |= report == Some(ReleaseReport::StaleGeneration);
    }

    /// HO-7 / HO-A4: right after a rebind, the guards of the old generation's ended work
    /// release late: every ticket id of the machine that is not live, named with the old
    /// generation and any kind, is `StaleGeneration` (or `UnknownTicket`, an id never given
    /// out), and changes no counter.
    pub(super) fn judge_rebind_releases(state: &mut HoState, old: Generation) {
        let Some((machine, m)) = state.cell.machine(HOST) else {
            return;
        };
        let gate = m.gate();
        let before = (gate.counters(), gate.live_tickets().collect::<Vec<_>>());
        let mut wrong = false;
        for id in 0..MAX_MODEL_TICKET_ID {
            if before.1.iter().any(|t| t.id.0 == id) {
                continue;
            }
            for kind in WorkKind::ALL {
                let work = CellWork {
                    host: HOST,
                    machine,
                    ticket: Ticket {
                        id: TicketId(id),
                        generation: old,
                        kind,
                    },
                };
                let report = state.cell.handle_release(&work);
                wrong |= !matches!(
                    report,
                    Some(ReleaseReport::StaleGeneration | ReleaseReport::UnknownTicket)
                );
            }
        }
        let after = state.cell.machine(HOST).map(|(_, m)| {
            let g = m.gate();
            (g.counters(), g.live_tickets().collect::<Vec<_>>())
        });
        state.last.anomalies.late_release_counted |= wrong || after.as_ref() != Some(&before);
    }
}

// ---- HO-8 / HO-10: control traffic is not client work -------------------------------------------

/// HO-8: the open control's heartbeats and activity renewals change no counter and not the
/// idleness (`heartbeat_counted`, [`HandoffModel::judge_control_traffic`] below).
fn ho_8_heartbeats_not_counted() -> Property<HandoffModel> {
    Property::always("HO-8 heartbeats never change counters", |_, s: &HoState| {
        !s.last.anomalies.heartbeat_counted
    })
}

/// HO-10: a missing or expired DB lease changes no counter and not the idleness
/// (`lease_counted`, [`HandoffModel::judge_control_traffic`] below).
fn ho_10_lease_not_idleness() -> Property<HandoffModel> {
    Property::always(
        "HO-10 a missing or expired DB lease never proves idleness",
        |_, s: &HoState| !s.last.anomalies.lease_counted,
    )
}

impl HandoffModel {
    /// The open control's heartbeats and a stale DB lease at the same instant (`&self` calls:
    /// they cannot count, and must not).
    pub(super) fn judge_control_traffic(state: &mut HoState) {
        let cell = &state.cell;
        let Some((_, m)) = cell.machine(HOST) else {
            return;
        };
        let (counters, idle) = (m.gate().counters(), m.gate().is_idle());
        let unchanged = || {
            cell.machine(HOST)
                .is_some_and(|(_, m)| m.gate().counters() == counters && m.gate().is_idle() == idle)
        };
        let not_client = Some(NotCounted::NotClientWork);
        let not_evidence = Some(NotCounted::NotIdlenessEvidence);
        let heartbeat_counted = [Heartbeat::Ping, Heartbeat::Pong, Heartbeat::ActivityRenewal]
            .into_iter()
            .any(|h| cell.handle_heartbeat(HOST, h) != not_client)
            || !unchanged();
        let lease_counted = [
            ActivityLease::Missing,
            ActivityLease::Expired {
                expired_at: MonoMs::ZERO,
            },
        ]
        .into_iter()
        .any(|l| cell.handle_activity_lease(HOST, l) != not_evidence)
            || !unchanged();
        state.last.anomalies.heartbeat_counted = heartbeat_counted;
        state.last.anomalies.lease_counted = lease_counted;
    }
}

// ---- HO-S1: the op id ---------------------------------------------------------------------------

/// HO-S1: every recorded attempt's op id is the UUIDv5 of its authority and target; a sent op
/// id is too, and a fresh pick is at the store's current authority (`op_id_inconsistent`,
/// [`HandoffModel::judge_request`] below and `step.rs`'s `director_crash_restart`); the
/// director writes no store (`director_wrote_store`, `step.rs`'s `director_sends`).
fn ho_s1_same_op_id_read_only_pick() -> Property<HandoffModel> {
    Property::always(
        "HO-S1 duplicate/retried request reuses the same op id; the pick is read-only",
        |_, s: &HoState| {
            !s.last.anomalies.op_id_inconsistent
                && !s.last.anomalies.director_wrote_store
                && s.store
                    .attempts()
                    .all(|(op, r)| *op == derived_op_id(&r.source, r.target))
        },
    )
}

/// HO-S1: no op id is shared by two moves (`op_id_shared`,
/// [`HandoffModel::op_id_shared`] below, recorded by [`HandoffModel::judge_request`]).
fn ho_s1_op_id_names_one_move() -> Property<HandoffModel> {
    Property::always(
        "HO-S1 an op id names one move: another host, epoch, incarnation, generation, source or target gives another id",
        |_, s: &HoState| !s.last.anomalies.op_id_shared,
    )
}

impl HandoffModel {
    pub(super) fn judge_request(state: &mut HoState, req: &HandoffRequest, fresh_pick: bool) {
        state.last.anomalies.op_id_inconsistent = req.op_id
            != derived_op_id(&req.source, req.target)
            || (fresh_pick && state.store.authority(HOST) != Some(req.source));
        state.last.anomalies.op_id_shared = Self::op_id_shared(state, req, fresh_pick);
    }

    /// HO-S1: the op id names exactly one move. The same authority with any one field changed
    /// (the host, the epoch of a later move, the incarnation, the generation, the source cell)
    /// or another target derives another id; so does the director's pick for the second host at
    /// the same cell (same epoch, incarnation and generation); and no recorded attempt of
    /// another move carries this id. The derivations are judged when the director computes the
    /// request (`fresh`: a re-sent request is the same request); the records at every send.
    pub(super) fn op_id_shared(state: &HoState, req: &HandoffRequest, fresh: bool) -> bool {
        let recorded = state
            .store
            .attempt(req.op_id)
            .is_some_and(|r| (r.source, r.target) != (req.source, req.target));
        if !fresh {
            return recorded;
        }
        let a = req.source;
        // A cell that is neither the source nor the target.
        let other_cell = CellId(SRC.0.max(TGT.0) + 1);
        let variants = [
            (SourceAuthority { host: HOST2, ..a }, req.target),
            (
                SourceAuthority {
                    epoch: a.epoch.next(),
                    ..a
                },
                req.target,
            ),
            (
                SourceAuthority {
                    incarnation: Incarnation(a.incarnation.0 + 1),
                    ..a
                },
                req.target,
            ),
            (
                SourceAuthority {
                    generation: a.generation.next(),
                    ..a
                },
                req.target,
            ),
            (
                SourceAuthority {
                    cell: other_cell,
                    ..a
                },
                req.target,
            ),
            (a, other_cell),
        ];
        let by_field = variants
            .iter()
            .any(|(source, target)| derived_op_id(source, *target) == req.op_id);
        let other_host =
            Self::pick_second_host(state).is_some_and(|other| other.op_id == req.op_id);
        by_field || other_host || recorded
    }
}

/// `OpId::derive`, remembered per thread. The derivation is a pure function of its inputs (a
/// SHA-1 over them); the model asks it for every recorded attempt at every state and for six
/// variants at every fresh pick, over a few dozen distinct inputs, so a lookup replaces the
/// hash. The core's own derivations (in the cell and the store) are untouched.
pub(super) fn derived_op_id(source: &SourceAuthority, target: CellId) -> OpId {
    use std::cell::RefCell;
    use std::collections::HashMap;
    // foldhash, not SipHash: the lookup runs at every state; the keys are the model's own.
    type Derived = HashMap<(SourceAuthority, CellId), OpId, foldhash::fast::FixedState>;
    thread_local! {
        static DERIVED: RefCell<Derived> = RefCell::new(Derived::default());
    }
    DERIVED.with(|derived| {
        let mut derived = derived.borrow_mut();
        // Bounded: the review bounds reach far fewer inputs, a wider run may not.
        if derived.len() >= 4096 {
            derived.clear();
        }
        *derived
            .entry((*source, target))
            .or_insert_with(|| OpId::derive(source, target))
    })
}

// ---- HO-S2: busy --------------------------------------------------------------------------------

/// HO-S2: an answer other than `Started` leaves the source machine as it was
/// (`answer_changed_machine`), and a `Busy` names the gate's non-zero counters
/// (`busy_counters_wrong`), both recorded by [`HandoffModel::judge_begin`] at HO-2.
fn ho_s2_busy_changes_nothing() -> Property<HandoffModel> {
    Property::always(
        "HO-S2 busy holds no barrier, closes nothing, names the non-zero counters",
        |_, s: &HoState| {
            !s.last.anomalies.answer_changed_machine && !s.last.anomalies.busy_counters_wrong
        },
    )
}

// ---- HO-S3: no admission under a barrier --------------------------------------------------------

/// HO-S3: a gated machine holds no work; no step admits work while a barrier stands
/// (`admitted_under_barrier`, [`HandoffModel::judge_transition`] at HO-7); a refused client
/// gets 4409 WRONG_CELL and a control activation at a gated source is refused `ControlGated`
/// (`gated_refusal_wrong`, [`HandoffModel::judge_client_refused`] below and the control
/// activations in `step.rs` and `races.rs`).
fn ho_s3_no_admission_under_barrier() -> Property<HandoffModel> {
    Property::always(
        "HO-S3 no admission under a barrier; a refused client gets 4409 WRONG_CELL",
        |_, s: &HoState| {
            let gated_is_empty = s
                .machines()
                .all(|(_, _, m)| m.gate().barrier().is_none() || m.gate().counters().is_zero());
            !s.last.anomalies.admitted_under_barrier
                && !s.last.anomalies.gated_refusal_wrong
                && gated_is_empty
        },
    )
}

impl HandoffModel {
    /// A client refused: at a gated source, or at a cell without the host, it is told 4409
    /// WRONG_CELL (mobiles re-resolve on it).
    pub(super) fn judge_client_refused(
        state: &mut HoState,
        refusal: AdmissionRefusal,
        gate: Option<GateKind>,
    ) {
        let wrong_cell = refusal == AdmissionRefusal::WrongCell
            && client_close_code(refusal) == WRONG_CELL_CLOSE_CODE;
        let must_be_wrong_cell = matches!(gate, None | Some(GateKind::Gated));
        state.last.events.wrong_cell_at_barrier = gate == Some(GateKind::Gated) && wrong_cell;
        state.last.anomalies.gated_refusal_wrong = must_be_wrong_cell && !wrong_cell;
    }
}

// ---- HO-S4: the exact commit --------------------------------------------------------------------

/// HO-S4: a commit moves exactly the authority it re-checked, to its target with epoch + 1 and
/// its own reservation (`commit_not_exact`, [`HandoffModel::judge_commit`] at HO-1); the
/// store's invariants hold in every state.
fn ho_s4_commit_exact() -> Property<HandoffModel> {
    Property::always(
        "HO-S4 a commit moves exactly the re-checked authority; store invariants hold (no reservation leak)",
        |_, s: &HoState| {
            !s.last.anomalies.commit_not_exact && s.store.check_invariants().is_ok()
        },
    )
}

// ---- HO-S5 / HO-S6: the attempt's end -----------------------------------------------------------

/// HO-S5: a committed outcome closes the source as retired-by-commit and never reopens it
/// (`commit_not_retired`, [`HandoffModel::judge_finish`] below, which judges every attempt's
/// end and also records HO-1's, HO-S6's, HO-A5's and HO-A6's facts); once the host moved, no
/// machine of it is open.
fn ho_s5_committed_retires() -> Property<HandoffModel> {
    Property::always(
        "HO-S5 committed => source retired via draining, never reopened",
        |_, s: &HoState| {
            let moved_source_closed = !s.moved()
                || s.machines()
                    .all(|(_, _, m)| m.gate().state() != GateState::Open);
            !s.last.anomalies.commit_not_retired && moved_source_closed
        },
    )
}

/// HO-S6: an explicit rollback with the authority unchanged reopens the barrier and keeps no
/// reservation (`rollback_not_reopened`); an authority-changed outcome retires the stale
/// source (`stale_not_retired`), both recorded by [`HandoffModel::judge_finish`] below.
fn ho_s6_abort_reopens_stale_retires() -> Property<HandoffModel> {
    Property::always(
        "HO-S6 explicit abort with unchanged authority => reopened, no reservation kept; authority changed => retired",
        |_, s: &HoState| {
            !s.last.anomalies.rollback_not_reopened && !s.last.anomalies.stale_not_retired
        },
    )
}

impl HandoffModel {
    /// HO-S5 / HO-S6 / HO-A5 / HO-A6: the attempt in flight reached its terminal outcome.
    pub(super) fn judge_finish(state: &mut HoState, inst: u8, job: &Job, out: &Outputs) {
        let Some(cell) = state.cell_of(inst) else {
            return;
        };
        let control_open = cell.control(HOST).is_some();
        let Some((_, src)) = cell.machine(HOST) else {
            return;
        };
        let src = src.clone();
        let Some(result) = src.last_result() else {
            return;
        };
        let outcome = OutcomeKind::of(&result.outcome);
        let gate = GateKind::of(src.gate().state());
        let is_drained = src.gate().is_drained();
        let retire = out.retire.map(|(reason, _)| reason);
        let reservation_kept = state.store.reservation(result.op_id).is_some();
        let current = state.store.authority(HOST);
        // HO-S6 / HO-L1: "unchanged" is the authority the attempt left the host in. A fence
        // that found the claim exact renewed it in the same write (`FencedRenewed`): the store
        // must hold the renewed authority, and an undrained source must have adopted it (a
        // drained one never reopens and keeps its own). Otherwise the store and the source
        // both still hold the claim.
        let authority_unchanged = match state.store.attempt(result.op_id).map(|r| r.outcome) {
            Some(AttemptOutcome::FencedRenewed) if outcome == OutcomeKind::Fenced => {
                current == Some(fenced_authority(job.request.source))
                    && (is_drained || current == Some(src.authority()))
            }
            _ => current == Some(src.authority()),
        };
        let a = &mut state.last.anomalies;
        // HO-1.
        a.retired_over_tickets = retire.is_some() && !src.gate().counters().is_zero();
        // HO-A6.
        a.reply_before_retire = match (out.retire, out.reply) {
            (Some((_, r)), Some(p)) => r > p,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        // HO-S5 / HO-A6: the empty control is released with the retirement, before it.
        a.control_kept_on_retire = out
            .retire
            .is_some_and(|(_, r)| control_open || out.close_retired.is_some_and(|close| close > r));
        a.drained_reopened = is_drained && (gate == GateKind::Open || out.reopen); // HO-A5
        match outcome {
            // HO-S5.
            OutcomeKind::Committed => {
                a.commit_not_retired = gate != GateKind::Retired
                    || !matches!(retire, Some(RetireReason::Committed { .. }))
                    || out.reopen;
            }
            // HO-S6, both arms.
            OutcomeKind::RolledBack | OutcomeKind::Fenced => {
                let reopened = gate == GateKind::Open && out.reopen;
                a.rollback_not_reopened = reservation_kept
                    || !authority_unchanged
                    || (!is_drained && !reopened)
                    || retire.is_some();
            }
            OutcomeKind::AuthorityChanged => {
                let retired_stale = gate == GateKind::StaleRetired
                    && matches!(retire, Some(RetireReason::StaleAuthority { .. }));
                let drained_closed = is_drained && gate == GateKind::Drained;
                a.stale_not_retired = out.reopen || !(retired_stale || drained_closed);
            }
        }
        // The witnesses of HO-S5 (and HO-L1), HO-A2, HO-S6, HO-A1, HO-A5 and HO-A3.
        let e = &mut state.last.events;
        e.committed = outcome == OutcomeKind::Committed && job.kind == JobKind::Transaction;
        e.committed_after_ambiguity =
            outcome == OutcomeKind::Committed && job.kind == JobKind::Reconcile;
        e.explicit_abort_reopened = outcome == OutcomeKind::RolledBack && out.reopen;
        e.fenced_abort = outcome == OutcomeKind::Fenced;
        e.stale_retired = matches!(retire, Some(RetireReason::StaleAuthority { .. }));
        e.recovered_after_quarantine = job.after_quarantine;
        e.finished_drained = is_drained;
        e.finished_disabled = !src.is_enabled();
        e.finished_without_session = !src.session_open();
    }
}

// ---- HO-A1: one migration per op id -------------------------------------------------------------

/// HO-A1: no op id that already had a durable record commits again (`second_migration`,
/// [`HandoffModel::judge_commit`] at HO-1); the host's epoch counts exactly the committed
/// attempts.
fn ho_a1_one_migration_per_op_id() -> Property<HandoffModel> {
    Property::always("HO-A1 at most one migration per op id", |_, s: &HoState| {
        let epoch = s.store.assignment(HOST).map_or(0, |r| r.epoch.0);
        !s.last.anomalies.second_migration && epoch == 1 + committed_rows(s)
    })
}

fn committed_rows(s: &HoState) -> u64 {
    s.store
        .attempts()
        .filter(|(_, r)| matches!(r.outcome, AttemptOutcome::Committed { .. }))
        .count() as u64
}

// ---- HO-L4: a refusal that clears never parks its host -----------------------------------------

/// HO-L4: a move the store refused for a reason that clears is answered from its result only
/// for the hold; the director's request after it is a new attempt (`refusal_misheld`, judged
/// at each request against the spec's record of when the refusal ended).
fn ho_l4_refusal_never_parks() -> Property<HandoffModel> {
    Property::always(
        "HO-L4 a move refused for a reason that clears is tried anew after its hold, never parked behind its answer",
        |_, s: &HoState| !s.last.anomalies.refusal_misheld,
    )
}

// ---- HO-A2: no reopen without a terminal outcome ------------------------------------------------

/// HO-A2: a barrier goes away only with a definitive rollback of its attempt in the step
/// (`reopened_without_rollback`, [`HandoffModel::judge_transition`] at HO-7 and `step.rs`'s
/// DB results); while an attempt is in flight its barrier stands.
fn ho_a2_no_reopen_without_outcome() -> Property<HandoffModel> {
    Property::always(
        "HO-A2 never reopened without a terminal outcome (no reopen on timeout alone); the barrier stands while an attempt is in flight",
        |_, s: &HoState| {
            let barrier_held = s.machines().all(|(_, _, m)| match m.attempt() {
                None => true,
                Some(a) => m.gate().barrier().is_some_and(|b| {
                    b.op_id() == a.attempt().op_id && b.seq() == a.attempt().seq
                }),
            });
            !s.last.anomalies.reopened_without_rollback && barrier_held
        },
    )
}

// ---- HO-A3: a director crash strands nothing ----------------------------------------------------

/// HO-A3: every attempt in flight has its DB job queued (or is quarantined) and a timer; the
/// close of the desktop's open control session reaches its machine
/// (`open_session_close_ignored`, `step.rs`'s `ControlCloses`).
fn ho_a3_crash_strands_nothing() -> Property<HandoffModel> {
    Property::always(
        "HO-A3 director crash strands nothing: an attempt in flight always has a DB job or a timer",
        |_, s: &HoState| {
            !s.last.anomalies.open_session_close_ignored
                && s.machines().all(|(inst, id, m)| {
                    let Some(a) = m.attempt() else {
                        return true;
                    };
                    let has_job = |kind: JobKind| {
                        s.jobs.iter().any(|j| {
                            j.inst == inst
                                && j.machine == id
                                && j.kind == kind
                                && j.attempt == a.attempt()
                        })
                    };
                    m.poll_timeout().is_some()
                        && match a.phase() {
                            Phase::InTransaction { .. } => has_job(JobKind::Transaction),
                            Phase::Reconciling { .. } => has_job(JobKind::Reconcile),
                            Phase::Quarantined { .. } => true,
                        }
                })
        },
    )
}

// ---- HO-A4: late work, sessions and registrations -----------------------------------------------

/// HO-A4: late results, timers and session ends change nothing (`late_callback_changed_machine`,
/// `stale_timer_applied`, `late_close_changed_cell`: the judges below); a registration at the
/// source fails once the host moved (`registered_over_move`, `step.rs`'s
/// `register_and_install`); a registered control is installed unless the host is drained
/// (`registered_not_installed`, [`HandoffModel::judge_install`] below and `step.rs`'s restarts).
fn ho_a4_late_callback_changes_nothing() -> Property<HandoffModel> {
    Property::always(
        "HO-A4 a late callback never changes (nor reopens) the replacement; a commit refuses old ownership",
        |_, s: &HoState| {
            let a = &s.last.anomalies;
            !a.late_callback_changed_machine
                && !a.stale_timer_applied
                && !a.late_close_changed_cell
                && !a.registered_over_move
                && !a.registered_not_installed
        },
    )
}

impl HandoffModel {
    /// A result for an attempt that is no longer the one in flight of the machine that asked:
    /// fenced off by the cell (`Fed::Late`), or ignored by the machine it reached.
    pub(super) fn judge_late_result(
        state: &mut HoState,
        job: &Job,
        to: u8,
        fed: Fed,
        changed: bool,
    ) {
        state.last.events.late_from_old_machine = job.inst != to;
        state.last.events.late_fenced = fed == Fed::Late;
        state.last.anomalies.late_callback_changed_machine =
            changed || fed == Fed::Applied(Disposition::Applied);
    }

    /// Late inputs that name something the cell replaced, at every step: the adapter's timer
    /// of a replaced machine fires (`handle_timeout` naming it), and the socket of a session
    /// the cell closed (replaced, retired, drained) or a closed desktop ends
    /// (`control_closed` naming it). Both must be fenced off whatever the cell's state, and
    /// what they may do depends only on the host's current machine and control, so feeding
    /// every old id in every state covers every moment they can arrive (ids are never reused
    /// in a process, and the model's processes give out fewer than [`MAX_MODEL_ID`]). A
    /// correct cell changes nothing here; a wrong one is judged at once.
    pub(super) fn judge_late_inputs(state: &mut HoState) {
        let now = state.now;
        let mut timer_applied = false;
        let mut close_taken = false;
        let insts: Vec<u8> = state.cells().map(|(i, _)| i).collect();
        for inst in insts {
            let Some(cell) = state.cell_of_mut(inst) else {
                continue;
            };
            let machine = cell.machine(HOST).map(|(id, _)| id);
            let session = cell.control(HOST);
            for id in 1..=MAX_MODEL_ID {
                if Some(MachineId(id)) != machine {
                    timer_applied |= cell.handle_timeout(now, HOST, MachineId(id)) != Fed::Late;
                }
                if Some(SessionId(id)) != session {
                    close_taken |= cell.handle_control_closed(now, HOST, SessionId(id));
                }
            }
            // Ids at or past MAX_MODEL_ID fail the `HO-A4 bounded` property.
        }
        state.last.anomalies.stale_timer_applied = timer_applied;
        state.last.anomalies.late_close_changed_cell = close_taken;
    }

    /// HO-A4: the replaced session's end arrives right after the newer control was installed
    /// (the moment it could be mistaken for the open one).
    pub(super) fn judge_replaced_session(state: &mut HoState, out: &Outputs) {
        if let Some(old) = out.replaced {
            let taken = state.cell.handle_control_closed(state.now, HOST, old);
            state.last.anomalies.late_close_changed_cell |= taken;
            state.last.events.late_close_ignored = !taken;
        }
    }

    /// A control the store registered, installed (or not) by the cell.
    pub(super) fn judge_install(
        state: &mut HoState,
        op: ControlOp,
        before: Option<&(MachineId, SourceHandoff)>,
        installed: Result<Installed, InstallRefusal>,
    ) {
        let drained_before = before.is_some_and(|(_, m)| m.gate().is_drained());
        let a = &mut state.last.anomalies;
        let e = &mut state.last.events;
        match installed {
            Ok(i) => {
                e.rebound = op.kind == ControlKind::Replacement && i.how == InstallKind::Rebound;
                e.over_retired = i.how == InstallKind::OverRetired;
                // HO-L1: nothing but an undrain (which forgets the host) gives a drained host a
                // machine again.
                a.drained_got_machine = drained_before;
                if i.how == InstallKind::Rebound {
                    if let Some((_, m)) = before {
                        Self::judge_rebind_releases(state, m.gate().generation());
                    }
                }
            }
            Err(InstallRefusal::SourceDraining) => {
                e.reconnect_refused_draining = true;
                a.registered_not_installed = !drained_before;
            }
            Err(_) => a.registered_not_installed = true,
        }
    }
}

// ---- HO-A5: drain and disable -------------------------------------------------------------------

/// HO-A5: no attempt starts at a disabled source (`started_while_disabled`,
/// [`HandoffModel::judge_transition`] at HO-7); a drained source never reopens
/// (`drained_reopened`, [`HandoffModel::judge_finish`] at HO-S5, and in every state below); an
/// emergency drain is complete (`drain_incomplete`, [`HandoffModel::judge_drain`] below); a
/// control is refused before its registration exactly when the host is drained here
/// (`control_refusal_wrong`, the control activations in `step.rs` and `races.rs`).
fn ho_a5_drained_never_reopens() -> Property<HandoffModel> {
    Property::always(
        "HO-A5 a drained source never reopens; disabled => no new attempt starts",
        |_, s: &HoState| {
            !s.last.anomalies.started_while_disabled
                && !s.last.anomalies.drained_reopened
                && !s.last.anomalies.drain_incomplete
                && !s.last.anomalies.control_refusal_wrong
                && s.machines()
                    .all(|(_, _, m)| !m.gate().is_drained() || m.gate().state() != GateState::Open)
        },
    )
}

impl HandoffModel {
    pub(super) fn judge_drain(
        state: &mut HoState,
        drained: Option<bool>,
        open_before: bool,
        out: &Outputs,
    ) {
        state.last.anomalies.drain_incomplete = drained.is_none()
            || !out.hard_drain
            || (open_before && !out.close_drained)
            || state.cell.control(HOST).is_some();
    }
}

// ---- HO-A6: retire before the reply -------------------------------------------------------------

/// HO-A6: the retire is queued before the reply (`reply_before_retire`) and a retirement
/// releases the control with it, before it (`control_kept_on_retire`), both recorded by
/// [`HandoffModel::judge_finish`] at HO-S5; no reservation outlives its expiry.
fn ho_a6_retire_before_reply() -> Property<HandoffModel> {
    Property::always(
        "HO-A6 retire is queued before the reply; an expired registration is recovered",
        |_, s: &HoState| {
            !s.last.anomalies.reply_before_retire
                && !s.last.anomalies.control_kept_on_retire
                && s.store.reservations().all(|(_, r)| r.expires_at > s.now)
        },
    )
}

// ---- HO-L1: undrain, and no stranded host -------------------------------------------------------

/// HO-L1: a drained host gets no machine before an undrain (`drained_got_machine`,
/// [`HandoffModel::judge_install`] at HO-A4); an undrain is refused with its reason while the
/// drained attempt, work or fence is outstanding, and forgets the host when accepted
/// (`undrain_misjudged`, [`HandoffModel::judge_undrain`] below).
fn ho_l1_drained_host_waits_for_undrain() -> Property<HandoffModel> {
    Property::always(
        "HO-L1 a drained host gets no machine in its process before an undrain; an undrain waits for the drained work and its fence",
        |_, s: &HoState| {
            !s.last.anomalies.drained_got_machine && !s.last.anomalies.undrain_misjudged
        },
    )
}

impl HandoffModel {
    pub(super) fn judge_undrain(
        state: &mut HoState,
        before: Option<&SourceHandoff>,
        result: Result<(), UndrainRefusal>,
        out: &Outputs,
    ) {
        let in_flight = before.is_some_and(|m| m.attempt().is_some());
        let closing = before.is_some_and(|m| !m.gate().counters().is_zero());
        let unfenced = before.is_some_and(|m| m.pending_fence().is_some());
        state.last.anomalies.undrain_misjudged = match result {
            Ok(()) => {
                in_flight
                    || closing
                    || unfenced
                    || !out.forget
                    || state.cell.machine(HOST).is_some()
            }
            Err(UndrainRefusal::AttemptInFlight) => !in_flight,
            Err(UndrainRefusal::StillClosing) => in_flight || !closing,
            Err(UndrainRefusal::FenceUnwritten) => in_flight || closing || !unfenced,
            Err(UndrainRefusal::NotDrained | UndrainRefusal::UnknownHost) => true,
        };
    }
}

/// HO-L1: no state is [`stranded`] (below).
fn ho_l1_no_stranded_host() -> Property<HandoffModel> {
    Property::always(
        "HO-L1 no stranded host: after a fenced attempt at a source still serving the host, the director's fresh pick is a new op id the source starts (or defers as busy)",
        |_, s: &HoState| !stranded(s),
    )
}

/// HO-L1: the current process's source still serves the host (assigned here, undrained, open,
/// enabled, its control open, the DB reachable, the target with room) and its last attempt
/// ended fenced (the end HO-L1 names: a quarantine or a store outage ends in a fence or a
/// commit), yet the director's fresh pick is not a new op id that the source would start (or
/// defer as busy): only a desktop reconnect could move the host again.
///
/// An explicit policy rollback (the correction disabled, the target full) is not judged here:
/// it renews no authority, so once its reason clears (re-enabled; a freed slot, which the model
/// does not offer) the pick is the same op id and the source answers its recorded rollback
/// until the desktop re-registers. The model reaches that after `Disable`, an attempt, `Enable`;
/// it is an open question for the requirement, not what HO-L1 says.
pub fn stranded(s: &HoState) -> bool {
    let Some(m) = s.src() else {
        return false;
    };
    let Some(last) = m.last_result() else {
        return false;
    };
    let ended_back = OutcomeKind::of(&last.outcome) == OutcomeKind::Fenced;
    let serving = ended_back
        && m.attempt().is_none()
        && !m.gate().is_drained()
        && m.gate().state() == GateState::Open
        && m.is_enabled()
        && m.session_open()
        && !s.moved()
        && s.db_up
        && !s.target_full;
    if !serving {
        return false;
    }
    let Some(req) = HandoffModel::pick(s) else {
        return true;
    };
    if req.op_id == last.op_id {
        return true;
    }
    let mut cell = s.cell.clone();
    !matches!(
        cell.handle_request(s.now, &req),
        Begin::Started(_) | Begin::Answered(HandoffReply::Busy { .. })
    )
}

// ---- HO-L2: one live process per cell id --------------------------------------------------------

/// HO-L2: the current process holds a live lease in every state; a second process started
/// while it is live is refused and writes nothing, a successor is not refused a released or
/// lapsed lease (`second_process_started`, `step.rs`'s process starts).
fn ho_l2_one_live_process() -> Property<HandoffModel> {
    Property::always(
        "HO-L2 one live process per cell id: a process started while the holder's lease is live is refused and writes nothing; a successor takes the cell once that lease has lapsed or been released",
        |_, s: &HoState| {
            // The live holder is the current process, with a live lease.
            let held = s
                .lease()
                .is_some_and(|(inc, until)| inc == s.cell.incarnation() && until > s.now);
            !s.last.anomalies.second_process_started && held
        },
    )
}

// ---- HO-A5: the drain fence ---------------------------------------------------------------------

/// HO-A5: a fence write's result is taken as it must be (`fence_mishandled`,
/// [`HandoffModel::judge_fence_result`] below), and every unwritten fence is held
/// ([`fences_held`], below).
fn ho_a5_fence_never_dropped() -> Property<HandoffModel> {
    Property::always(
        "HO-A5 a drain fence is never dropped: until written it is out (one write) or waits on its retry timer; a failed write is retried",
        |_, s: &HoState| !s.last.anomalies.fence_mishandled && fences_held(s),
    )
}

impl HandoffModel {
    /// HO-A5: what a fence write's result did to the machine's fence (`before` / `after`: its
    /// pending fence, `None` where the machine is not the one that asked).
    pub(super) fn judge_fence_result(
        state: &mut HoState,
        before: Option<PendingFence>,
        after: Option<PendingFence>,
        result: FenceResult,
        out: &Outputs,
    ) {
        let Some(before) = before else {
            return;
        };
        state.last.anomalies.fence_mishandled = match result {
            FenceResult::Written(_) => after.is_some(),
            FenceResult::Failed => {
                !after.is_some_and(|f| {
                    f.failures() == before.failures() + 1
                        && f.retry_at().is_some_and(|t| t > state.now)
                }) || !out.fence_failed
            }
        };
        state.last.events.fence_retried_landed =
            matches!(result, FenceResult::Written(_)) && before.failures() > 0 && after.is_none();
    }
}

/// HO-A5: every live machine's unwritten fence is held: a write is out for it (the one the
/// environment holds, naming its process and machine), or it waits on its retry timer (its
/// machine's `poll_timeout`, which `TimeAdvances` reaches).
pub fn fences_held(s: &HoState) -> bool {
    s.cells().all(|(inst, c)| {
        c.machine(HOST)
            .is_none_or(|(id, m)| match m.pending_fence() {
                None => true,
                Some(f) => match f.retry_at() {
                    None => s
                        .pending_fence
                        .is_some_and(|j| j.inst == inst && j.machine == id),
                    Some(at) => m.poll_timeout().is_some_and(|t| t <= at),
                },
            })
    })
}

// ---- HO-7: the attach machine -------------------------------------------------------------------

/// HO-7: a failed persist releases its accept and closes the client `activity_not_persisted`,
/// and the attach machine steps in its order (`attach_misjudged`,
/// [`HandoffModel::judge_persist_failed`] below and `step.rs`'s attach steps).
fn ho_7_failed_persist_releases() -> Property<HandoffModel> {
    Property::always(
        "HO-7 a failed activity persist releases the accept and closes the client activity_not_persisted; the attach machine keeps its order",
        |_, s: &HoState| !s.last.anomalies.attach_misjudged,
    )
}

impl HandoffModel {
    /// HO-7: a failed persist closed its client by name; its accept must be released (no
    /// longer live in the gate of its machine).
    pub(super) fn judge_persist_failed(state: &mut HoState, held: Held, close: AttachClose) {
        let still_live = state.cell.machine(HOST).is_some_and(|(id, m)| {
            id == held.machine && m.gate().live_tickets().any(|t| t == held.ticket)
        });
        state.last.anomalies.attach_misjudged |= still_live
            || close.name() != "activity_not_persisted"
            || close.close_code() != switchyard_core::handoff::close_code::TRY_AGAIN;
        state.last.events.persist_failed = true;
    }
}

// ---- HO-S3: no barrier over a half-attached client ----------------------------------------------

/// HO-S3: no state is [`half_attached_under_barrier`] (below).
fn ho_s3_no_barrier_over_half_attached() -> Property<HandoffModel> {
    Property::always(
        "HO-S3 no barrier while a client is between accept and attached",
        |_, s: &HoState| !half_attached_under_barrier(s),
    )
}

/// HO-S3: a client between accept and attached whose accept is live at the current machine
/// while that machine's barrier stands.
pub fn half_attached_under_barrier(s: &HoState) -> bool {
    let Some((id, m)) = s.cell.machine(HOST) else {
        return false;
    };
    m.gate().barrier().is_some()
        && s.clients.iter().any(|c| match c.phase {
            ClientPhase::Accepting(a) | ClientPhase::Attaching(a) => a
                .ticket()
                .is_some_and(|w| w.machine == id && m.gate().live_tickets().any(|t| t == w.ticket)),
            ClientPhase::Away | ClientPhase::Attached(_) => false,
        })
}

// ---- bounded: the model's caps ------------------------------------------------------------------

fn ho_7_bounded_tickets() -> Property<HandoffModel> {
    Property::always(
        "HO-7 bounded: live tickets <= 10 (no ticket leaks)",
        |_, s: &HoState| s.live_tickets() <= CAP_TICKETS,
    )
}

fn ho_a3_bounded_jobs() -> Property<HandoffModel> {
    Property::always("HO-A3 bounded: queued DB jobs <= 8", |_, s: &HoState| {
        s.jobs.len() <= CAP_JOBS
    })
}

fn ho_s4_bounded_reservations() -> Property<HandoffModel> {
    Property::always(
        "HO-S4 bounded: target reservations <= 2",
        |_, s: &HoState| s.store.reservations().count() <= CAP_RESERVATIONS,
    )
}

fn ho_a1_bounded_attempts() -> Property<HandoffModel> {
    Property::always(
        "HO-A1 bounded: attempt records (committed and fenced ops) <= 8",
        |_, s: &HoState| s.store.attempts().count() <= CAP_ATTEMPTS,
    )
}

fn ho_a4_bounded_ids() -> Property<HandoffModel> {
    Property::always(
        "HO-A4 bounded: machine and session ids < 16",
        |_, s: &HoState| s.max_model_id() < MAX_MODEL_ID,
    )
}

/// Above every machine and session id a model process gives out (one counter for both: an
/// install takes at most two, and a run has at most a handful of installs per process).
pub const MAX_MODEL_ID: u64 = 16;
/// Above every ticket id a machine gives out in the model (the late-release judge names every
/// id below it).
pub const MAX_MODEL_TICKET_ID: u64 = 24;

/// Caps on what the model lets grow (each a `bounded` property; the names carry the numbers).
/// A correct core stays far below them at every budget the CLI allows; a core that leaks one
/// per request reaches them, is reported, and the state past the cap is explored no further.
pub const CAP_TICKETS: u64 = 10;
pub const CAP_JOBS: usize = 8;
pub const CAP_RESERVATIONS: usize = 2;
pub const CAP_ATTEMPTS: usize = 8;

impl HoState {
    /// Live tickets of every machine of every live process (the larger of the gate's counters
    /// and its ticket table, so a leak in either shows).
    pub fn live_tickets(&self) -> u64 {
        self.machines()
            .map(|(_, _, m)| {
                let gate = m.gate();
                gate.counters()
                    .total()
                    .max(gate.live_tickets().count() as u64)
            })
            .sum()
    }

    /// The largest machine or session id of a live process.
    pub fn max_model_id(&self) -> u64 {
        self.cells()
            .flat_map(|(_, c)| {
                let machine = c.machine(HOST).map(|(id, _)| id.0);
                let session = c.control(HOST).map(|s| s.0);
                machine.into_iter().chain(session)
            })
            .max()
            .unwrap_or(0)
    }
}

impl HandoffModel {
    /// The first cap the state is past, if any (`actions` explores nothing from it).
    pub fn over_cap(&self, s: &HoState) -> Option<&'static str> {
        if s.live_tickets() > CAP_TICKETS {
            Some("live tickets")
        } else if s.jobs.len() > CAP_JOBS {
            Some("DB jobs")
        } else if s.store.reservations().count() > CAP_RESERVATIONS {
            Some("reservations")
        } else if s.store.attempts().count() > CAP_ATTEMPTS {
            Some("attempt records")
        } else if s.max_model_id() >= MAX_MODEL_ID {
            Some("machine and session ids")
        } else {
            None
        }
    }
}
