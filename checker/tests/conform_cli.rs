//! CONF-1 / CONF-3: `switchyard-check conform` as an operator runs it: files and `-`, the text
//! and JSON reports, exit 0 / 1 / 2, an unreadable line named.

mod support_conform;

use support_conform::conform;

use switchyard_core::failover::{ChannelAction, FailoverRecord, Output};
use switchyard_core::journal::{JournalLine, JournalRecord};
use switchyard_spec::conform::generate::generate;

fn journal(lines: u64, clients: u32) -> Vec<JournalLine> {
    let mut out = Vec::new();
    generate(lines, clients, 11, |l| out.push(l.clone()));
    out
}

fn text(lines: &[JournalLine]) -> String {
    lines
        .iter()
        .map(|l| serde_json::to_string(l).expect("serialises") + "\n")
        .collect()
}

#[test]
fn conf_1_a_conforming_journal_exits_0_with_a_verdict_per_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("j.jsonl");
    std::fs::write(&path, text(&journal(3_000, 3))).expect("write");
    let (code, out, err) = conform(&[path.to_str().expect("utf-8")], None);
    assert_eq!(code, 0, "{out}{err}");
    for key in ["client-0", "client-1", "client-2"] {
        assert!(out.contains(&format!("{key}: conforms (")), "{out}");
    }
    assert!(
        out.contains("conform: 3 keys, 3 conform, 0 depart; 3000 lines"),
        "{out}"
    );
}

#[test]
fn conf_1_an_edited_journal_from_stdin_exits_1_naming_the_line_and_the_id() {
    let mut lines = journal(3_000, 2);
    // The first open a tick decided, turned into an exempt open: the oracle owed a clean one
    // (FO-D3) or nothing at all.
    let at = lines
        .iter()
        .position(|l| {
            matches!(
                &l.rec,
                JournalRecord::Failover(FailoverRecord::Output(Output::Action(
                    ChannelAction::Open {
                        exempt: false,
                        probe: false,
                        ..
                    }
                )))
            )
        })
        .expect("an open");
    if let JournalRecord::Failover(FailoverRecord::Output(Output::Action(ChannelAction::Open {
        exempt,
        ..
    }))) = &mut lines[at].rec
    {
        *exempt = true;
    }
    let key = lines[at].key.clone();
    let (code, out, err) = conform(&["-"], Some(&text(&lines)));
    assert_eq!(code, 1, "{out}{err}");
    let expected = format!("{key}: departs at line {}: exempt open ", at + 1);
    assert!(out.contains(&expected), "{expected:?} in {out}");
    assert!(out.contains("the spec allowed"), "{out}");
    assert!(out.contains("1 depart"), "{out}");
}

#[test]
fn conf_1_json_report_parses_and_carries_the_departure() {
    let mut lines = journal(500, 1);
    // The first output goes missing: the spec owed it.
    let first_output = lines
        .iter()
        .position(|l| matches!(&l.rec, JournalRecord::Failover(FailoverRecord::Output(_))))
        .expect("an output");
    lines.remove(first_output);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("j.jsonl");
    std::fs::write(&path, text(&lines)).expect("write");
    let (code, out, _) = conform(&["--format", "json", path.to_str().expect("utf-8")], None);
    assert_eq!(code, 1, "{out}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(report["summary"]["depart"], 1, "{report}");
    let key = &report["keys"][0];
    assert_eq!(key["verdict"], "departs", "{report}");
    assert!(key["line"].as_u64().is_some(), "{report}");
    assert!(key["requirement"].as_str().is_some(), "{report}");
}

#[test]
fn conf_1_an_unreadable_line_exits_2_naming_the_file_and_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("j.jsonl");
    let mut body = text(&journal(20, 1));
    body.push_str(
        "{\"key\":\"client-0\",\"seq\":99,\"at_ms\":1,\"rec\":{\"failover\":{\"nonsense\":1}}}\n",
    );
    std::fs::write(&path, body).expect("write");
    let (code, out, err) = conform(&[path.to_str().expect("utf-8")], None);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("line 21"), "{err}");
    assert!(err.contains("j.jsonl"), "{err}");
    let (code, _, err) = conform(&["/nonexistent/journal.jsonl"], None);
    assert_eq!(code, 2);
    assert!(
        err.contains("/nonexistent/journal.jsonl: cannot open"),
        "{err}"
    );
}

#[test]
fn conf_1_a_json_log_with_journal_fields_and_other_lines_is_read() {
    let lines = journal(200, 1);
    let mut log =
        String::from("{\"timestamp\":\"t\",\"level\":\"INFO\",\"message\":\"client starting\"}\n");
    for l in &lines {
        let inner = serde_json::to_string(l).expect("serialises");
        let outer =
            serde_json::json!({"timestamp": "t", "level": "INFO", "message": "", "journal": inner});
        log.push_str(&outer.to_string());
        log.push('\n');
    }
    let (code, out, err) = conform(&["-"], Some(&log));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("client-0: conforms (200 lines)"), "{out}");
}
