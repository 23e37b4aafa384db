//! CONF-1 / CONF-2 over the real binary: `switchyard cell --journal FILE --conform` journals
//! its start under `cell/<id>/<incarnation>`, serves `/metrics` with the online judge behind
//! it, and the journal it leaves after SIGTERM reads and conforms.

mod support_bin;

use support_bin::{cell_args, http_get, Process, WAIT};
use switchyard_spec::conform::Conformance;

#[test]
fn conf_2_cell_journal_and_conform_flags_write_a_journal_that_conforms() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let journal = dir.path().join("cell.journal.jsonl");
    let journal_arg = journal.display().to_string();
    let args = cell_args(&db, "7", &["--journal", &journal_arg, "--conform"]);
    let mut cell = Process::start(&args);
    let url = cell.value("url=");
    let (status, body) = http_get(&url, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.contains("conformance_departures_total{"),
        "no departure: {body}"
    );
    cell.signal("TERM");
    assert_eq!(cell.exit_within(WAIT), Some(0), "{}", cell.log());
    let text = std::fs::read_to_string(&journal).expect("the journal is written");
    let first = text.lines().next().expect("a first line");
    assert!(
        first.starts_with("{\"key\":\"cell/7/") && first.contains("\"cell\":\"start\""),
        "the cell's start is journaled: {first}"
    );
    let mut conformance = Conformance::new();
    for (i, line) in text.lines().enumerate() {
        conformance
            .feed_text(i as u64 + 1, line)
            .expect("a journal line");
    }
    let verdicts = conformance.finish();
    assert!(!verdicts.is_empty());
    assert!(
        verdicts.iter().all(|(_, v)| v.departure().is_none()),
        "{verdicts:?}"
    );
}
