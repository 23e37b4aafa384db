//! SEC-2a over the real binary: a signed drain captured on the wire (the operator's own
//! `switchyard handoff drain`, through a recording proxy) and replayed to the restarted cell
//! inside the 30 s window is refused `wrong_incarnation` by the successor, counted, and the
//! operator's next drain (signed anew for the new process) still goes through. Red before:
//! the new process had forgotten the nonce and answered the replay 200.

mod support_bin;
mod support_wire;

use support_bin::{Process, WAIT};
use support_wire::{free_port, metric, operator_drain, replay, Recorder};

#[test]
fn sec_2a_a_drain_captured_before_a_restart_is_refused_by_the_successor_wrong_incarnation() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let addr = free_port();
    let args = [
        "cell",
        "--db",
        db.as_str(),
        "--cell-id",
        "5",
        "--listen",
        addr.as_str(),
    ];
    let mut first = Process::start(&args);
    let _ = first.value("url=");
    let proxy = Recorder::start(addr.clone());
    // The operator drains host 7 through the recording proxy: the cell serves no host 7, so
    // the answer is `unknown_host`, but the request was authenticated and answered 200.
    let (_, stderr) = operator_drain(&format!("http://{}", proxy.addr), "5", "7");
    assert!(stderr.contains("unknown_host"), "{stderr}");
    let captured = proxy
        .captured(b"POST /internal/v1/drain")
        .expect("the drain went through the proxy");

    // Restart: a graceful stop releases the lease; the next process is a new incarnation.
    first.signal("TERM");
    assert_eq!(first.exit_within(WAIT), Some(0), "{}", first.log());
    let second = Process::start(&args);
    let _ = second.value("url=");
    assert!(
        second.log().contains("incarnation=2"),
        "a new incarnation: {}",
        second.log()
    );

    // The captured drain, replayed within the window, byte for byte.
    let (status, body) = replay(&addr, &captured);
    assert_eq!(
        (status, body.as_str()),
        (401, r#"{"refused":"wrong_incarnation"}"#),
        "the replay to the successor"
    );
    assert_eq!(
        metric(&addr, "switchyard_cell_internal_wrong_incarnation_total"),
        Some(1)
    );
    // The operator's own drain, signed anew, reaches the new process.
    let (_, stderr) = operator_drain(&format!("http://{addr}"), "5", "7");
    assert!(stderr.contains("unknown_host"), "{stderr}");
    // And a URL that serves another cell than --cell-id is refused before anything is sent.
    let (code, stderr) = operator_drain(&format!("http://{addr}"), "6", "7");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("serves cell 5, not --cell-id 6"),
        "{stderr}"
    );
}
