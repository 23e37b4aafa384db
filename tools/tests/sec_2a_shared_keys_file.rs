//! SEC-2a over the real binary: one keys file loaded by two cells (it holds both cells' keys,
//! as `switchyard handoff cell-key` prints them) does not let a request for one cell be
//! accepted by the other: a drain for cell 9 captured on the wire and sent to cell 10 is
//! refused `wrong_cell`, and a request claiming cell 10 but signed with cell 9's key (what the
//! holder of cell 9's key could forge) is refused `unknown_key`: each cell verifies with the
//! key marked for it only.

mod support_bin;
mod support_wire;

use std::process::{Command, Stdio};

use hyper::Method;
use support_bin::{Process, SECRET, WAIT};
use support_wire::{free_port, operator_drain, replay, Recorder};
use switchyard_adapters::handoff::auth::{fresh_nonce, CellKey, SignedParts};
use switchyard_adapters::handoff::http;
use switchyard_adapters::handoff::proto::DRAIN_PATH;
use switchyard_core::handoff::{CellId, Incarnation};

fn cell_key_file(cell: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["handoff", "cell-key", "--cell", cell])
        .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
        .stdin(Stdio::null())
        .output()
        .expect("cell-key");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_2a_a_keys_file_shared_by_two_cells_does_not_let_one_cells_request_reach_the_other() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cells.db").display());
    let (nine, ten) = (cell_key_file("9"), cell_key_file("10"));
    let keys = dir.path().join("shared.keys");
    std::fs::write(&keys, format!("{nine}{ten}")).expect("keys file");
    let keys = keys.display().to_string();
    let (addr9, addr10) = (free_port(), free_port());
    let start = |id: &'static str, addr: &str| {
        let p = Process::start_without(
            &[
                "cell",
                "--db",
                &db,
                "--cell-id",
                id,
                "--listen",
                addr,
                "--keys-file",
                &keys,
            ],
            &["SWITCHYARD_HANDOFF_SECRET"],
        );
        let _ = p.value("url=");
        p
    };
    let _cell9 = start("9", &addr9);
    let _cell10 = start("10", &addr10);

    // A drain for cell 9, captured on its way, is accepted there ...
    let proxy = Recorder::start(addr9.clone());
    let (_, stderr) = operator_drain(&format!("http://{}", proxy.addr), "9", "7");
    assert!(stderr.contains("unknown_host"), "{stderr}");
    let captured = proxy
        .captured(b"POST /internal/v1/drain")
        .expect("the drain went through the proxy");
    // ... and refused by cell 10, which holds the same file.
    let (status, body) = tokio::task::block_in_place(|| replay(&addr10, &captured));
    assert_eq!(
        (status, body.as_str()),
        (401, r#"{"refused":"wrong_cell"}"#)
    );

    // Cell 9's key (from the shared file) signing a request that claims cell 10: cell 10 does
    // not verify with a key marked for cell 9.
    let key9 = nine
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .expect("a key line");
    let key9 = CellKey::from_hex(key9.trim(), "cell 9's key").expect("key");
    let body = br#"{"host":7,"reason":"emergency"}"#.to_vec();
    let nonce = fresh_nonce().expect("nonce");
    let now_ms = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    let forged = key9.signed_headers(&SignedParts {
        method: "POST",
        path: DRAIN_PATH,
        cell: CellId(10),
        incarnation: Incarnation(1),
        timestamp_ms: now_ms,
        nonce: &nonce,
        body: &body,
    });
    let resp = http::request(
        Method::POST,
        &format!("http://{addr10}"),
        DRAIN_PATH,
        &forged,
        body,
        WAIT,
    )
    .await
    .expect("answered");
    assert_eq!(resp.status.as_u16(), 401);
    assert_eq!(&resp.body[..], br#"{"refused":"unknown_key"}"#);

    // Each cell still takes the operator's requests signed for it.
    for (addr, id) in [(&addr9, "9"), (&addr10, "10")] {
        let (_, stderr) = operator_drain(&format!("http://{addr}"), id, "7");
        assert!(stderr.contains("unknown_host"), "cell {id}: {stderr}");
    }
}
