//! The generated tests: the committed trace corpus (`tests/traces/`) is what the checker
//! produces at the corpus bounds (drift fails), and the core replays every trace step for step.
//!
//! To re-bless after an intended change: `SWITCHYARD_BLESS=1 cargo test -p switchyard-checker --test traces`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use switchyard_checker::*;
use switchyard_core::handoff::store::AssignmentStore;
use switchyard_spec::failover::FailoverModel;
use switchyard_spec::handoff::{HandoffModel, HandoffParams, HoAction, HoProjection};
use switchyard_spec::store_calls::StoreCall;
use switchyard_spec::sweep::SweepModel;
use switchyard_spec::trace::{replay, Replayer, Trace, TraceKind};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces")
}

fn read_dir(dir: &Path, model: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("corpus folder") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        if name.starts_with(&format!("{model}.")) && name.ends_with(".json") {
            files.insert(name, std::fs::read_to_string(&path).expect("trace file"));
        }
    }
    files
}

fn generate<M>(model: M, dir: &Path)
where
    M: CheckedModel + Clone,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + Eq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + serde::Serialize + 'static,
{
    let report = run(model.clone(), &corpus_options());
    assert!(!report.failed(), "{}", render_table(&report));
    write_traces(&model, &report, dir, true).expect("write traces");
}

fn check_corpus<M>(model: M, minimum: usize)
where
    M: CheckedModel + Clone,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + Eq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + serde::Serialize + 'static,
{
    let fresh = tempfile::tempdir().expect("temp dir");
    generate(model.clone(), fresh.path());
    if std::env::var_os("SWITCHYARD_BLESS").is_some() {
        for name in read_dir(&corpus_dir(), M::NAME).keys() {
            std::fs::remove_file(corpus_dir().join(name)).expect("remove stale trace");
        }
        generate(model, &corpus_dir());
    }
    let committed = read_dir(&corpus_dir(), M::NAME);
    let generated = read_dir(fresh.path(), M::NAME);
    assert_eq!(
        committed.keys().collect::<Vec<_>>(),
        generated.keys().collect::<Vec<_>>(),
        "the set of {} traces drifted; re-bless with SWITCHYARD_BLESS=1 if the change is intended",
        M::NAME
    );
    for (name, text) in &generated {
        assert_eq!(
            &committed[name], text,
            "{name} drifted; re-bless if intended"
        );
    }
    assert!(
        generated.len() >= minimum,
        "every {} witness is in the corpus",
        M::NAME
    );
}

fn replay_corpus<R>(model: &str, minimum: usize)
where
    R: Replayer,
    R::Params: DeserializeOwned,
    R::Action: DeserializeOwned,
    R::Projection: DeserializeOwned + Clone,
{
    let mut replayed = 0;
    for (name, text) in read_dir(&corpus_dir(), model) {
        let trace: Trace<R::Params, R::Action, R::Projection> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            trace.kind,
            TraceKind::Witness,
            "{name}: the corpus holds no violation"
        );
        assert!(!trace.steps.is_empty());
        if let Err(divergence) = replay::<R>(&trace) {
            panic!(
                "{name}: the core diverged at step {}:\n expected {:?}\n actual   {:?}",
                divergence.step, divergence.expected, divergence.actual
            );
        }
        replayed += 1;
    }
    assert!(replayed >= minimum, "{model}: replayed {replayed}");
}

#[test]
fn trace_corpus_failover_matches_what_the_checker_generates() {
    check_corpus(FailoverModel::new(corpus_failover_params()), 7);
}

#[test]
fn trace_corpus_handoff_matches_what_the_checker_generates() {
    check_corpus(HandoffModel::new(corpus_handoff_params()), 20);
}

#[test]
fn trace_corpus_sweep_matches_what_the_checker_generates() {
    check_corpus(SweepModel::new(corpus_sweep_params()), 5);
}

#[test]
fn trace_corpus_failover_replays_against_the_core() {
    replay_corpus::<FailoverCoreReplayer>("failover", 7);
}

#[test]
fn trace_corpus_handoff_replays_against_the_core() {
    replay_corpus::<HandoffCoreReplayer>("handoff", 20);
}

/// SCALE-3 / HO-S2: the sweep traces replay against the real `SelectionPass`.
#[test]
fn scale_3_trace_corpus_sweep_replays_against_the_core() {
    replay_corpus::<SweepCoreReplayer>("sweep", 5);
}

/// Apply one journaled call to `store`; `Err` names the call whose answer differs.
fn apply_to_reference(store: &mut Option<AssignmentStore>, call: &StoreCall) -> Result<(), String> {
    if let StoreCall::Configure { config } = call {
        *store = Some(AssignmentStore::new(*config));
        return Ok(());
    }
    let Some(store) = store.as_mut() else {
        return Err(format!("{call:?} before Configure"));
    };
    let same = match call {
        StoreCall::Configure { .. } => true,
        StoreCall::SetEnabled { enabled } => {
            store.set_enabled(*enabled);
            true
        }
        StoreCall::UpsertCell { cell, row, answer } => store.upsert_cell(*cell, *row) == *answer,
        StoreCall::InsertHost {
            host,
            cell,
            desktop_capable,
            answer,
        } => store.insert_host(*host, *cell, *desktop_capable) == *answer,
        StoreCall::RunTransaction {
            now,
            request,
            answer,
        } => store.run_transaction(*now, request) == *answer,
        StoreCall::Reconcile {
            now,
            request,
            answer,
        } => store.reconcile(*now, request) == *answer,
        StoreCall::RegisterControl {
            now,
            host,
            cell,
            incarnation,
            desktop_capable,
            answer,
        } => store.register_control(*now, *host, *cell, *incarnation, *desktop_capable) == *answer,
        StoreCall::EmergencyDrain { authority, answer } => {
            store.emergency_drain(authority) == *answer
        }
        StoreCall::ExpireMigrations { now, answer } => store.expire_migrations(*now) == *answer,
        StoreCall::StartCell {
            cell,
            capacity,
            handoff_capable,
            now,
            lease_ms,
            answer,
        } => store.start_cell(*cell, *capacity, *handoff_capable, *now, *lease_ms) == *answer,
        StoreCall::RenewCellLease {
            cell,
            incarnation,
            now,
            lease_ms,
            answer,
        } => store.renew_cell_lease(*cell, *incarnation, *now, *lease_ms) == *answer,
        StoreCall::ReleaseCellLease {
            cell,
            incarnation,
            answer,
        } => store.release_cell_lease(*cell, *incarnation) == *answer,
    };
    if same {
        Ok(())
    } else {
        Err(format!("answer differs for {call:?}"))
    }
}

/// The store journal is complete: re-applying only the journaled calls to a fresh reference
/// store rebuilds the model's store exactly, after every step of every handoff trace. (The SQL
/// stores are replayed from the same journal in `adapters/tests/handoff_store_diff.rs`; a store
/// write the model made without journaling it would be missed there, and is caught here.)
#[test]
fn ho_store_journal_rebuilds_the_model_store_on_every_handoff_trace() {
    let mut calls = 0;
    let traces = read_dir(&corpus_dir(), "handoff");
    assert!(traces.len() >= 20, "handoff corpus: {}", traces.len());
    for (name, text) in traces {
        let trace: Trace<HandoffParams, HoAction, HoProjection> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = HandoffModel::new(trace.params.clone());
        let mut journal = Vec::new();
        let mut state = model.init_state_journaled(&mut journal);
        let mut rebuilt = None;
        for (index, step) in std::iter::once(None)
            .chain(trace.steps.iter().map(Some))
            .enumerate()
        {
            if let Some(step) = step {
                journal.clear();
                state = model.step_journaled(&state, step.action, &mut journal);
                assert_eq!(state.project(), step.after, "{name}: step {index} diverged");
            }
            for call in &journal {
                apply_to_reference(&mut rebuilt, call)
                    .unwrap_or_else(|e| panic!("{name}: step {index}: {e}"));
                calls += 1;
            }
            assert_eq!(
                rebuilt.as_ref(),
                Some(&*state.store),
                "{name}: the journal misses a store write at step {index}"
            );
        }
    }
    assert!(calls > 0);
}

#[test]
fn replay_notices_a_changed_projection() {
    use switchyard_spec::failover::{FailoverParams, FoAction, FoProjection};
    let traces = read_dir(&corpus_dir(), "failover");
    let (_, text) = traces
        .iter()
        .find(|(n, _)| n.contains("exempt-switch"))
        .expect("the exempt-switch witness");
    let mut trace: Trace<FailoverParams, FoAction, FoProjection> =
        serde_json::from_str(text).expect("trace");
    let last = trace.steps.last_mut().expect("steps");
    last.after.counters.exempt_switches += 1;
    let divergence = replay::<FailoverCoreReplayer>(&trace).expect_err("must diverge");
    assert_eq!(divergence.step, trace.steps.len());
}
