//! SEC-2 (issue #13): a signed internal request binds the method, the path, the target cell id,
//! the timestamp and a nonce. Abuse over real cells: a drain signed for cell 1 replayed to
//! cell 2, the same drain replayed at cell 1, a stale request, a drain's signature sent to
//! /undrain and the old bearer form are each refused (401 with a stable reason word) and change
//! nothing; a cell's keys roll without a restart (in-process, and over the real binary with a
//! keys file re-read on SIGHUP); bad key values stop the binary by name before it starts.

#[path = "../../adapters/tests/handoff_rig/mod.rs"]
mod handoff_rig;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handoff_rig::*;
use switchyard_adapters::handoff::auth::{sign_request, KeyRing, Secret};
use switchyard_adapters::handoff::client::DesktopHandle;
use switchyard_adapters::handoff::http::HttpResponse;
use switchyard_adapters::handoff::proto::{
    DrainAnswer, DrainRequest, DrainState, RefusedAnswer, DRAIN_PATH, UNDRAIN_PATH,
};
use switchyard_core::handoff::CellId;
use switchyard_core::handoff::DrainReason;
use switchyard_core::handoff::{ClosedReason, GateState};

/// Host 8 at cell 2 (TGT), host 7 at cell 1 (SRC).
async fn two_cells(backend: Backend, tag: &str) -> (Rig, DesktopHandle, DesktopHandle) {
    let mut rig = Rig::new(backend, tag).await;
    // Cell 2 alone first, so host 8 enrolls there; then cell 1 for host 7.
    rig.start(TGT).await;
    let at_tgt = rig.desktop_at(8, TGT).await;
    rig.start(SRC).await;
    let at_src = rig.desktop_at(7, SRC).await;
    (rig, at_src, at_tgt)
}

fn drain_body(host: u64) -> Vec<u8> {
    serde_json::to_vec(&DrainRequest::new(host, DrainReason::Emergency)).expect("json")
}

/// The refusal's reason word (the whole body when it is not a `{"refused":…}` answer).
fn reason(resp: &HttpResponse) -> String {
    serde_json::from_slice::<RefusedAnswer>(&resp.body)
        .map(|r| r.refused)
        .unwrap_or_else(|_| String::from_utf8_lossy(&resp.body).into_owned())
}

fn drain_answer(resp: &HttpResponse) -> DrainAnswer {
    assert_eq!(resp.status.as_u16(), 200, "{}", reason(resp));
    serde_json::from_slice(&resp.body).expect("drain answer")
}

fn drained(rig: &Rig, cell: CellId, host: u64) -> bool {
    rig.view(cell, host)
        .is_some_and(|v| v.gate == GateState::Closed(ClosedReason::Drained))
}

async fn a_drain_for_cell_1_replayed_to_cell_2_is_refused_and_changes_nothing(
    backend: Backend,
    tag: &str,
) {
    let (rig, d7, d8) = two_cells(backend, tag).await;
    let before = rig.store.rows().await.expect("rows");
    // An operator drains host 8 at cell 1, which does not serve it: harmless there.
    let body = drain_body(8);
    let headers = rig.signed_headers(SRC, "POST", DRAIN_PATH, rig.clock.now().0, &body);
    let genuine = rig.post_raw(SRC, DRAIN_PATH, &headers, body.clone()).await;
    assert_eq!(drain_answer(&genuine).state, DrainState::UnknownHost);
    // The same bytes replayed to cell 2, where host 8 lives, inside the window.
    let replayed = rig.post_raw(TGT, DRAIN_PATH, &headers, body).await;
    assert_eq!(replayed.status.as_u16(), 401, "{}", reason(&replayed));
    assert_eq!(reason(&replayed), "wrong_cell");
    assert!(rig.open(TGT, 8), "host 8 still open at cell 2");
    assert!(!drained(&rig, TGT, 8));
    let stats = rig.cell(TGT).stats();
    assert_eq!(stats.drains, 0);
    assert_eq!((stats.internal_refused, stats.internal_wrong_cell), (1, 1));
    assert_eq!(
        rig.store.rows().await.expect("rows"),
        before,
        "nothing changed"
    );
    d7.stop().await;
    d8.stop().await;
}
both_stores!(
    sec_2_a_drain_for_cell_1_replayed_to_cell_2_is_refused_and_changes_nothing,
    a_drain_for_cell_1_replayed_to_cell_2_is_refused_and_changes_nothing
);

async fn a_replayed_drain_at_the_same_cell_is_refused(backend: Backend, tag: &str) {
    let (rig, d7, d8) = two_cells(backend, tag).await;
    let body = drain_body(7);
    let headers = rig.signed_headers(SRC, "POST", DRAIN_PATH, rig.clock.now().0, &body);
    let genuine = rig.post_raw(SRC, DRAIN_PATH, &headers, body.clone()).await;
    assert!(drain_answer(&genuine).applied);
    // The operator undrains (a fresh signed request, retried while the drain still closes).
    let undrain = serde_json::to_vec(&serde_json::json!({ "host": 7 })).expect("json");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let h = rig.signed_headers(SRC, "POST", UNDRAIN_PATH, rig.clock.now().0, &undrain);
        let r = rig.post_raw(SRC, UNDRAIN_PATH, &h, undrain.clone()).await;
        if r.status.as_u16() == 200 {
            break;
        }
        // HO-A5: the fence write, racing the undrain, may still be out.
        assert!(["still_closing", "fence_unwritten"].contains(&reason(&r).as_str()));
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The captured drain, replayed at the same cell inside the window: refused, host undrained.
    let replayed = rig.post_raw(SRC, DRAIN_PATH, &headers, body).await;
    assert_eq!(replayed.status.as_u16(), 401, "{}", reason(&replayed));
    assert_eq!(reason(&replayed), "replayed");
    assert!(!drained(&rig, SRC, 7));
    let stats = rig.cell(SRC).stats();
    assert_eq!((stats.drains, stats.undrains), (1, 1));
    assert_eq!((stats.internal_refused, stats.internal_replayed), (1, 1));
    d7.stop().await;
    d8.stop().await;
}
both_stores!(
    sec_2_a_replayed_drain_at_the_same_cell_is_refused,
    a_replayed_drain_at_the_same_cell_is_refused
);

async fn a_stale_or_future_request_is_refused(backend: Backend, tag: &str) {
    let (rig, d7, d8) = two_cells(backend, tag).await;
    // The cell accepts ±30 s (CellConfig::new's auth_window).
    let now = rig.clock.now().0;
    for ts in [now - 31_000, now + 31_000] {
        let body = drain_body(7);
        let headers = rig.signed_headers(SRC, "POST", DRAIN_PATH, ts, &body);
        let r = rig.post_raw(SRC, DRAIN_PATH, &headers, body).await;
        assert_eq!(r.status.as_u16(), 401, "{}", reason(&r));
        assert_eq!(reason(&r), "stale_timestamp");
    }
    assert!(rig.open(SRC, 7));
    let stats = rig.cell(SRC).stats();
    assert_eq!((stats.drains, stats.internal_stale), (0, 2));
    d7.stop().await;
    d8.stop().await;
}
both_stores!(
    sec_2_a_stale_or_future_request_is_refused,
    a_stale_or_future_request_is_refused
);

async fn a_drain_signature_sent_to_undrain_is_refused(backend: Backend, tag: &str) {
    let (rig, d7, d8) = two_cells(backend, tag).await;
    assert!(rig.drain(SRC, 7).await.applied);
    // Past the hard-drain deadline, so a genuine undrain would be accepted now.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // `{"host":7}` is a valid body for both paths; the signature says /drain.
    let body = serde_json::to_vec(&serde_json::json!({ "host": 7 })).expect("json");
    let headers = rig.signed_headers(SRC, "POST", DRAIN_PATH, rig.clock.now().0, &body);
    let r = rig.post_raw(SRC, UNDRAIN_PATH, &headers, body).await;
    assert_eq!(r.status.as_u16(), 401, "{}", reason(&r));
    assert_eq!(reason(&r), "bad_signature");
    assert!(drained(&rig, SRC, 7), "the host stays drained");
    assert_eq!(rig.cell(SRC).stats().undrains, 0);
    d7.stop().await;
    d8.stop().await;
}
both_stores!(
    sec_2_a_drain_signature_sent_to_undrain_is_refused,
    a_drain_signature_sent_to_undrain_is_refused
);

async fn the_bearer_secret_is_refused(backend: Backend, tag: &str) {
    let (rig, d7, d8) = two_cells(backend, tag).await;
    let bearer = format!("Bearer {}", String::from_utf8_lossy(INTERNAL_SECRET));
    let r = rig
        .post_raw(SRC, DRAIN_PATH, &[("authorization", bearer)], drain_body(7))
        .await;
    assert_eq!(r.status.as_u16(), 401, "{}", reason(&r));
    assert_eq!(reason(&r), "missing_credentials");
    assert!(rig.open(SRC, 7));
    d7.stop().await;
    d8.stop().await;
}
both_stores!(
    sec_2_the_bearer_secret_is_refused,
    the_bearer_secret_is_refused
);

/// A drain of host 99 (served by no cell: harmless) signed with `master`'s key for cell 1.
async fn drain_99_signed_by(rig: &Rig, master: &Secret) -> HttpResponse {
    let body = drain_body(99);
    let headers = sign_request(
        master,
        "POST",
        DRAIN_PATH,
        SRC,
        rig.incarnation_of(SRC),
        rig.clock.now().0,
        &body,
    )
    .expect("signed");
    rig.post_raw(SRC, DRAIN_PATH, &headers, body).await
}

async fn a_cell_s_keys_roll_without_a_restart(backend: Backend, tag: &str) {
    let (rig, d7, d8) = two_cells(backend, tag).await;
    let old = Rig::internal_secret();
    let new = Secret::new(b"the-next-master-secret-0123456789", "new").expect("secret");
    let incarnation = rig.cell(SRC).incarnation;
    let accepted = |r: &HttpResponse| r.status.as_u16() == 200;
    // Before the roll the cell knows only the old key.
    let r = drain_99_signed_by(&rig, &new).await;
    assert_eq!(reason(&r), "unknown_key");
    // 1. The cell takes the new key and keeps the old one: both signers are accepted.
    rig.cell(SRC)
        .set_internal_keys(KeyRing::from_secrets(SRC, &new, Some(&old)));
    assert!(accepted(&drain_99_signed_by(&rig, &new).await));
    assert!(accepted(&drain_99_signed_by(&rig, &old).await));
    // 2. (Director and operators move to the new master.) 3. The old key is dropped.
    rig.cell(SRC)
        .set_internal_keys(KeyRing::from_secrets(SRC, &new, None));
    assert_eq!(reason(&drain_99_signed_by(&rig, &old).await), "unknown_key");
    assert!(accepted(&drain_99_signed_by(&rig, &new).await));
    // Served throughout: same process, the desktop still attached.
    assert_eq!(rig.cell(SRC).incarnation, incarnation);
    assert!(rig.open(SRC, 7));
    assert_eq!(rig.cell(SRC).stats().internal_bad_signature, 2);
    d7.stop().await;
    d8.stop().await;
}
both_stores!(
    sec_2_a_cell_s_keys_roll_without_a_restart,
    a_cell_s_keys_roll_without_a_restart
);

// ---- the real binary: key values, the cell-key command, a keys file rolled on SIGHUP ---------

const DESKTOP: &str = "desktop-secret-for-the-binary-0123";
const MASTER: &str = "master-secret-for-the-binary-0123";

fn switchyard() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    for var in [
        "SWITCHYARD_HANDOFF_SECRET",
        "SWITCHYARD_HANDOFF_PREVIOUS_SECRET",
        "SWITCHYARD_HANDOFF_KEYS_FILE",
        "SWITCHYARD_CELL_ID",
        "SWITCHYARD_DB",
    ] {
        c.env_remove(var);
    }
    c.env("NO_COLOR", "1").stdin(Stdio::null());
    c
}

/// Runs `switchyard ARGS` that must refuse to start: its exit code and stderr (a process still
/// running after a few seconds accepted the values and is stopped).
fn refused(args: &[&str]) -> (i32, String) {
    let mut child = switchyard()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            return (status.code().unwrap_or(-1), stderr);
        }
        if started.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} was accepted: the cell started");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cell_key_file(master: &str, cell: u32) -> String {
    let out = switchyard()
        .args(["handoff", "cell-key", "--cell", &cell.to_string()])
        .env("SWITCHYARD_HANDOFF_SECRET", master)
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn sec_2_the_cell_key_command_prints_a_keys_file_for_one_cell() {
    let text = cell_key_file(MASTER, 1);
    let want = Secret::new(MASTER.as_bytes(), "m")
        .expect("secret")
        .cell_key(CellId(1));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with('#') && lines[0].contains(want.id()),
        "{text}"
    );
    assert_eq!(lines[1], want.to_hex());
    assert_ne!(cell_key_file(MASTER, 2), text, "another cell, another key");
    let (code, err) = refused(&["handoff", "cell-key", "--cell", "1", "--secret", "short"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--secret") && err.contains("at least 16 bytes"),
        "{err}"
    );
}

#[test]
fn sec_2_bad_key_values_stop_the_cell_by_name_before_it_starts() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("c.db").display());
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p.display().to_string()
    };
    let k1 = cell_key_file(MASTER, 1);
    let three = format!(
        "{k1}{}{}",
        cell_key_file("another-master-0123456789", 1),
        cell_key_file("a-third-master-0123456789", 1)
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--secret".into(), "short".into()], "at least 16 bytes"),
        (
            vec![
                "--secret".into(),
                MASTER.into(),
                "--previous-secret".into(),
                "short".into(),
            ],
            "--previous-secret",
        ),
        (vec![], "give --secret"),
        (
            vec![
                "--secret".into(),
                MASTER.into(),
                "--keys-file".into(),
                file("k1", &k1),
            ],
            "not both",
        ),
        (
            vec!["--keys-file".into(), file("empty", "# nothing\n")],
            "holds no key",
        ),
        (
            vec!["--keys-file".into(), file("bad", "not-a-key\n")],
            "not a cell key",
        ),
        (
            vec!["--keys-file".into(), file("three", &three)],
            "more than 2 keys",
        ),
        (
            vec!["--keys-file".into(), "/dev/null".into()],
            "not a regular file",
        ),
        (
            vec![
                "--keys-file".into(),
                dir.path().join("missing").display().to_string(),
            ],
            "--keys-file",
        ),
    ];
    for (extra, expected) in cases {
        let mut args: Vec<String> = [
            "cell",
            "--db",
            &db,
            "--cell-id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--desktop-secret",
            DESKTOP,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, err) = refused(&args);
        assert_ne!(code, 0, "{args:?}");
        assert_ne!(code, 101, "a panic: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// `switchyard handoff drain` of host 99 at cell 1 signed with `master`: the cell's refusal
/// word, or `unknown_host` when it accepted the signature (no cell serves host 99).
fn operator_drain_99(url: &str, master: &str) -> String {
    let out = switchyard()
        .args(["handoff", "drain", "--cell-url", url, "--cell-id", "1"])
        .args(["--host", "99"])
        .env("SWITCHYARD_HANDOFF_SECRET", master)
        .output()
        .expect("run");
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn sec_2_a_keys_file_rolls_on_sighup_without_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("c.db").display());
    let keys = dir.path().join("keys");
    let next = "the-next-master-for-the-binary-0123";
    std::fs::write(&keys, cell_key_file(MASTER, 1)).expect("write");
    let mut cell = switchyard()
        .args([
            "cell",
            "--db",
            &db,
            "--cell-id",
            "1",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--desktop-secret", DESKTOP, "--cell-lease-ms", "1000"])
        .args(["--lease-drift-ms", "100"])
        .arg("--keys-file")
        .arg(&keys)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stop = |cell: &mut std::process::Child| {
        let _ = cell.kill();
        let _ = cell.wait();
    };
    // The cell logs its URL once listening; afterwards stderr is drained in the background.
    let mut lines = BufReader::new(cell.stderr.take().expect("stderr")).lines();
    let url = loop {
        let Some(Ok(line)) = lines.next() else {
            stop(&mut cell);
            panic!("the cell stopped before listening");
        };
        if line.contains("cell listening") {
            let url = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("url="))
                .expect("url in the log line")
                .to_owned();
            break url;
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let hup = |pid: u32| {
        let ok = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok);
    };
    let eventually = |what: &str, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let result = std::panic::catch_unwind(|| {
        assert!(operator_drain_99(&url, MASTER).contains("unknown_host"));
        assert!(operator_drain_99(&url, next).contains("unknown_key"));
        // During the roll: the new key and the old one.
        let both = format!("{}{}", cell_key_file(next, 1), cell_key_file(MASTER, 1));
        std::fs::write(&keys, both).expect("write");
        hup(cell.id());
        eventually("the new key accepted", &|| {
            operator_drain_99(&url, next).contains("unknown_host")
        });
        assert!(operator_drain_99(&url, MASTER).contains("unknown_host"));
        // A broken file on SIGHUP is logged; the cell keeps its keys (and keeps running).
        std::fs::write(&keys, "garbage\n").expect("write");
        hup(cell.id());
        std::thread::sleep(Duration::from_millis(300));
        assert!(operator_drain_99(&url, MASTER).contains("unknown_host"));
        // After the roll: the old key is gone.
        std::fs::write(&keys, cell_key_file(next, 1)).expect("write");
        hup(cell.id());
        eventually("the old key refused", &|| {
            operator_drain_99(&url, MASTER).contains("unknown_key")
        });
        assert!(operator_drain_99(&url, next).contains("unknown_host"));
    });
    let still_running = matches!(cell.try_wait(), Ok(None));
    stop(&mut cell);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
    assert!(still_running, "the cell served through the roll");
}
