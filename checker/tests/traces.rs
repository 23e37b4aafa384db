//! The generated tests: the committed trace corpus (`tests/traces/`) is what the checker
//! produces at the corpus bounds (drift fails), and the core replays every trace step for step.
//!
//! To re-bless after an intended change: `SWITCHYARD_BLESS=1 cargo test -p switchyard-checker --test traces`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use switchyard_checker::*;
use switchyard_spec::failover::{FailoverModel, FailoverParams, FoAction, FoProjection};
use switchyard_spec::trace::{replay, Trace, TraceKind};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces")
}

fn read_dir(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("corpus folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            files.insert(name, std::fs::read_to_string(&path).expect("trace file"));
        }
    }
    files
}

fn generate(dir: &Path) {
    let model = FailoverModel::new(corpus_failover_params());
    let report = run(model.clone(), &corpus_options());
    assert!(!report.failed(), "{}", render_table(&report));
    write_traces(&model, &report, dir, true).expect("write traces");
}

#[test]
fn trace_corpus_matches_what_the_checker_generates() {
    let fresh = tempfile::tempdir().expect("temp dir");
    generate(fresh.path());
    if std::env::var_os("SWITCHYARD_BLESS").is_some() {
        for (name, _) in read_dir(&corpus_dir()) {
            if name.starts_with("failover.") {
                std::fs::remove_file(corpus_dir().join(name)).expect("remove stale trace");
            }
        }
        generate(&corpus_dir());
    }
    let committed: BTreeMap<_, _> = read_dir(&corpus_dir())
        .into_iter()
        .filter(|(name, _)| name.starts_with("failover."))
        .collect();
    let generated = read_dir(fresh.path());
    assert_eq!(
        committed.keys().collect::<Vec<_>>(),
        generated.keys().collect::<Vec<_>>(),
        "the set of traces drifted; re-bless with SWITCHYARD_BLESS=1 if the change is intended"
    );
    for (name, text) in &generated {
        assert_eq!(
            &committed[name], text,
            "{name} drifted; re-bless if intended"
        );
    }
    assert!(
        generated.len() >= 7,
        "every failover witness is in the corpus"
    );
}

#[test]
fn trace_corpus_replays_against_the_core() {
    let traces = read_dir(&corpus_dir());
    let mut replayed = 0;
    for (name, text) in traces.iter().filter(|(n, _)| n.starts_with("failover.")) {
        let trace: Trace<FailoverParams, FoAction, FoProjection> =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            trace.kind,
            TraceKind::Witness,
            "{name}: the corpus holds no violation"
        );
        assert!(!trace.steps.is_empty());
        if let Err(divergence) = replay::<FailoverCoreReplayer>(&trace) {
            panic!(
                "{name}: the core diverged at step {}:\n expected {:?}\n actual   {:?}",
                divergence.step, divergence.expected, divergence.actual
            );
        }
        replayed += 1;
    }
    assert!(replayed >= 7);
}

#[test]
fn replay_notices_a_changed_projection() {
    let traces = read_dir(&corpus_dir());
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
