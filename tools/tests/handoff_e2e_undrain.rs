//! HO-L1 / HO-A5: the emergency drain's recovery path, without restarting the cell. A drained
//! host's clients are hard-drained (1012), its desktop's re-registration is refused while the
//! drain lasts; `POST /internal/v1/undrain` (and `switchyard handoff undrain`) returns the host
//! to service: the desktop's next registration gets a fresh machine and a new handoff commits.

#[path = "../../adapters/tests/handoff_rig/mod.rs"]
mod handoff_rig;

use std::time::Duration;

use handoff_rig::*;
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::{ClosedReason, GateState};

const UNDRAIN: &str = "/internal/v1/undrain";

/// The undrain answer: HTTP status and body.
async fn undrain(rig: &Rig, host: u64) -> (u16, serde_json::Value) {
    let body = serde_json::to_vec(&serde_json::json!({ "host": host })).expect("json");
    let resp = rig
        .post(SRC, UNDRAIN, body, true, WAIT)
        .await
        .expect("undrain answered");
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "undrain answer is not JSON ({e}): HTTP {} {text:?}",
            resp.status
        )
    });
    (resp.status.as_u16(), value)
}

/// Undrain, retrying while the drained work is still closing (bounded).
async fn undrain_when_closed(rig: &Rig, host: u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, body) = undrain(rig, host).await;
        if status == 200 {
            assert_eq!(body, serde_json::json!({ "undrained": true }));
            return;
        }
        assert_eq!(status, 409, "{body}");
        // HO-A5: the fence write, racing the undrain, may still be out.
        assert!(
            body == serde_json::json!({ "refused": "still_closing" })
                || body == serde_json::json!({ "refused": "fence_unwritten" }),
            "only closing work or the fence may delay an undrain: {body}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "drained work never closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn registrations_at(
    desk: &switchyard_adapters::handoff::client::DesktopHandle,
    cell: u32,
) -> usize {
    desk.state()
        .registrations
        .iter()
        .filter(|(c, _)| *c == cell)
        .count()
}

async fn drained_host_returns_to_service_without_a_restart(backend: Backend, tag: &str) {
    let mut rig = Rig::new(backend, tag).await;
    rig.start(SRC).await;
    rig.start(TGT).await;
    let incarnation = rig.cell(SRC).incarnation;
    let mut desk = rig.desktop_at(7, SRC).await;
    let before = rig.view(SRC, 7).expect("host");
    let (client, arrival) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    assert_eq!(arrival, Arrival::Attached(SRC.0));
    let client = client.expect("client");

    // The drain: the client is hard-drained, the control closed through DRAINING.
    let drained = rig.drain(SRC, 7).await;
    assert!(drained.applied);
    assert_eq!(
        client.closed(WAIT).await,
        Some(1012),
        "hard drain unchanged"
    );
    eventually("desktop told to drain", WAIT, || {
        desk.state()
            .drainings
            .iter()
            .any(|r| r == "emergency_drain")
    })
    .await;
    // While drained, the desktop keeps trying and is refused every time; no client attaches.
    let refused_before = rig.cell(SRC).stats().control_refused;
    eventually("re-registration refused", WAIT, || {
        rig.cell(SRC).stats().control_refused >= refused_before + 2
    })
    .await;
    assert_eq!(
        registrations_at(&desk, SRC.0),
        1,
        "no registration while drained"
    );
    assert!(matches!(
        rig.view(SRC, 7).expect("host").gate,
        GateState::Closed(ClosedReason::Drained)
    ));
    let (_, arrival) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    assert_eq!(arrival, Arrival::Closed(Some(1012)));
    // A handoff of the drained host is refused (never reopened).
    let stale = rig.request(7, TGT).await;
    let ans = rig.send(SRC, &stale, WAIT).await.expect("answer");
    assert!(
        !matches!(ans.reply, HandoffReply::Result(r) if r.outcome.is_committed()),
        "{ans:?}"
    );

    // The recovery path: the operator undrains; the desktop's next registration is accepted
    // with a fresh machine (open gate, a newer generation), in the same process.
    undrain_when_closed(&rig, 7).await;
    let (status, again) = undrain(&rig, 7).await;
    assert_eq!(status, 409, "{again}");
    assert!(
        again == serde_json::json!({ "refused": "unknown_host" })
            || again == serde_json::json!({ "refused": "not_drained" }),
        "{again}"
    );
    eventually("registered again at the source", WAIT, || {
        registrations_at(&desk, SRC.0) == 2
    })
    .await;
    desk.wait_registered(SRC.0, WAIT).await.expect("registered");
    eventually("a fresh open machine", WAIT, || rig.open(SRC, 7)).await;
    let after = rig.view(SRC, 7).expect("host");
    assert_ne!(
        after.machine, before.machine,
        "a fresh machine, not the drained one"
    );
    assert!(after.authority.generation > before.authority.generation);
    assert!(after.control_connected);
    assert_eq!(
        rig.cell(SRC).incarnation,
        incarnation,
        "the cell never restarted"
    );
    let (client, arrival) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    assert_eq!(
        arrival,
        Arrival::Attached(SRC.0),
        "clients are admitted again"
    );
    client.expect("client").leave().await;
    eventually("idle", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| v.counters.is_zero())
    })
    .await;

    // And a new handoff commits.
    let req = rig.request(7, TGT).await;
    assert_ne!(req.op_id, stale.op_id);
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert!(
        matches!(ans.reply, HandoffReply::Result(r) if r.outcome.is_committed()),
        "{ans:?}"
    );
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop at the target");
    assert_eq!(rig.assigned(7).await, TGT);
    desk.stop().await;
}
both_stores!(
    ho_l1_a_drained_host_returns_to_service_without_a_restart,
    drained_host_returns_to_service_without_a_restart
);

// ---- the operator commands over the real binary --------------------------------------------------

async fn switchyard(args: &[&str], secret: &[u8]) -> (bool, String, String) {
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(args)
            .env(
                "SWITCHYARD_HANDOFF_SECRET",
                String::from_utf8_lossy(secret).as_ref(),
            )
            // SEC-2: every request is signed for the cell it targets (the rig's cell 1).
            .env("SWITCHYARD_CELL_ID", "1")
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the command ends by itself")
    .expect("run switchyard");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l1_switchyard_handoff_drain_and_undrain_over_the_real_binary() {
    let mut rig = Rig::new(Backend::Sqlite, "cli").await;
    rig.start(SRC).await;
    let url = rig.cell(SRC).url.clone();
    let mut desk = rig.desktop_at(7, SRC).await;
    let (client, _) = RawClient::dial(&url, 7).await;
    let client = client.expect("client");

    // A wrong secret is refused by the cell: non-zero, one line saying so, nothing drained.
    let (ok, _, err) = switchyard(
        &["handoff", "drain", "--cell-url", &url, "--host", "7"],
        b"not-the-cell-secret-0123456789",
    )
    .await;
    assert!(!ok, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("401"), "{err}");
    assert!(rig.open(SRC, 7));

    let (ok, out, err) = switchyard(
        &["handoff", "drain", "--cell-url", &url, "--host", "7"],
        INTERNAL_SECRET,
    )
    .await;
    assert!(ok, "drain failed: {out}{err}");
    assert!(out.contains("\"applied\":true"), "{out}");
    assert_eq!(client.closed(WAIT).await, Some(1012));

    // An unknown host cannot be drained: non-zero with its reason.
    let (ok, _, err) = switchyard(
        &["handoff", "drain", "--cell-url", &url, "--host", "99"],
        INTERNAL_SECRET,
    )
    .await;
    assert!(!ok);
    assert!(err.contains("unknown_host"), "{err}");

    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (ok, out, err) = switchyard(
            &["handoff", "undrain", "--cell-url", &url, "--host", "7"],
            INTERNAL_SECRET,
        )
        .await;
        if ok {
            assert!(out.contains("\"undrained\":true"), "{out}");
            break;
        }
        assert!(
            err.contains("still_closing") || err.contains("fence_unwritten"),
            "{err}"
        );
        assert!(tokio::time::Instant::now() < deadline, "{err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (ok, _, err) = switchyard(
        &["handoff", "undrain", "--cell-url", &url, "--host", "7"],
        INTERNAL_SECRET,
    )
    .await;
    assert!(!ok, "a second undrain is refused");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("unknown_host") || err.contains("not_drained"),
        "{err}"
    );
    eventually("registered again", WAIT, || {
        registrations_at(&desk, SRC.0) == 2
    })
    .await;
    desk.wait_registered(SRC.0, WAIT).await.expect("registered");
    eventually("back in service", WAIT, || rig.open(SRC, 7)).await;
    desk.stop().await;
}
