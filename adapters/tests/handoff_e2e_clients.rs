//! Seed tests 6 and 8 (`ho_t6_*`, `ho_t8_*`): mobiles reconnecting across a handoff with
//! pacing and no replay, and two real client processes (`switchyard mobile`) over real TCP
//! WebSockets with append-once mutation evidence, on both stores.

mod handoff_rig;

use std::collections::BTreeSet;
use std::time::Duration;

use handoff_rig::*;
use switchyard_adapters::handoff::client::{run_mobile, MobileConfig, MobileReport};
use switchyard_core::handoff::store::{AbortReason, TxnOutcome};
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::Ineligible;
use tokio::sync::watch;

fn outcome(a: &switchyard_adapters::handoff::proto::HandoffAnswer) -> Option<TxnOutcome> {
    match a.reply {
        HandoffReply::Result(r) => Some(r.outcome),
        _ => None,
    }
}

fn assert_append_once(applied: &[String], reports: &[&MobileReport]) {
    let unique: BTreeSet<&String> = applied.iter().collect();
    assert_eq!(
        unique.len(),
        applied.len(),
        "a mutation was applied twice: {applied:?}"
    );
    let mut acked = BTreeSet::new();
    for r in reports {
        let sent: BTreeSet<&String> = r.sent.iter().collect();
        assert_eq!(sent.len(), r.sent.len(), "a mutation was sent twice: {r:?}");
        assert!(
            r.unknown.is_empty(),
            "no ambiguous mutation expected: {r:?}"
        );
        assert_eq!(r.acked, r.sent, "every sent mutation acked once, in order");
        acked.extend(r.acked.iter());
    }
    assert_eq!(
        unique, acked,
        "applied at the desktop == acked at the clients"
    );
}

// ---- 6 ----------------------------------------------------------------------------------------

async fn t6_mobiles_reconnect_across_the_commit_with_pacing(backend: Backend, tag: &str) {
    let mut rig = Rig::new(backend, tag).await;
    rig.start(SRC).await;
    rig.start(TGT).await;
    let mut desk = rig.desktop_at(7, SRC).await;
    let held = rig.store.faults().arm_pause_after_lock();
    let req = rig.request(7, TGT).await;
    let (_stop, stop_rx) = watch::channel(false);
    let mut current = MobileConfig::new(
        rig.resolvers(),
        7,
        client_token(7),
        vec!["cur-1".into(), "cur-2".into()],
    );
    current.pace_min = Duration::from_millis(100);
    current.pace_max = Duration::from_millis(400);
    let mut old = MobileConfig::new(rig.resolvers(), 7, client_token(7), vec!["old-1".into()]);
    old.old_client = true;
    old.pace_min = Duration::from_millis(100);
    old.pace_max = Duration::from_millis(400);
    let mobiles = async move {
        held.reached.await.expect("barrier up");
        // Mobiles arrive during the handoff: 4409, paced retries, no tight loop.
        let cur = tokio::spawn(run_mobile(current, stop_rx.clone()));
        let old = tokio::spawn(run_mobile(old, stop_rx.clone()));
        tokio::time::sleep(Duration::from_millis(700)).await;
        let _ = held.resume.send(());
        (
            cur.await.expect("mobile task"),
            old.await.expect("mobile task"),
        )
    };
    let (ans, (cur_report, old_report)) = tokio::join!(rig.send(SRC, &req, WAIT), mobiles);
    assert!(
        matches!(outcome(&ans.expect("answer")), Some(o) if o.is_committed()),
        "the handoff committed"
    );
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop at target");
    for r in [&cur_report, &old_report] {
        assert!(r.done, "mobile finished: {r:?}");
        assert!(r.wrong_cell >= 1, "it met the barrier: {r:?}");
        assert_eq!(r.cells, vec![TGT.0], "attached only at the target: {r:?}");
        assert!(
            r.min_same_address_gap_ms.is_some_and(|g| g >= 100),
            "same-address retries are paced: {r:?}"
        );
    }
    assert!(
        old_report.resolves < old_report.attempts,
        "the old client reused its address"
    );
    assert_append_once(&desk.state().applied, &[&cur_report, &old_report]);
    desk.stop().await;
}
both_stores!(
    ho_t6_mobiles_reconnect_across_the_commit_with_pacing,
    t6_mobiles_reconnect_across_the_commit_with_pacing
);

// ---- 8 ----------------------------------------------------------------------------------------

/// Run `switchyard mobile` as its own process; returns its pid and report.
async fn mobile_process(
    rig: &Rig,
    prefix: &str,
    n: u32,
    hold_ms: u64,
) -> tokio::task::JoinHandle<(u32, MobileReport)> {
    let exe = env!("CARGO_BIN_EXE_switchyard");
    let child = tokio::process::Command::new(exe)
        .args(["mobile", "--host", "7", "--prefix", prefix])
        .args([
            "--mutations",
            &n.to_string(),
            "--hold-ms",
            &hold_ms.to_string(),
        ])
        .args(["--resolver", &rig.resolvers().join(",")])
        // SEC-1: the credential the host's desktop issued.
        .env("SWITCHYARD_CLIENT_TOKEN", client_token(7))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn switchyard mobile");
    let pid = child.id().unwrap_or(0);
    tokio::spawn(async move {
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("mobile process finished in time")
            .expect("mobile process output");
        let text = String::from_utf8_lossy(&out.stdout);
        let report: MobileReport = serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("mobile report {text:?}: {e}"));
        (pid, report)
    })
}

async fn t8_two_client_processes_admission_races_and_failed_handoffs(backend: Backend, tag: &str) {
    let mut rig = Rig::new(backend, tag).await;
    rig.start(SRC).await;
    rig.start(TGT).await;
    let mut desk = rig.desktop_at(7, SRC).await;
    let mut reports = Vec::new();
    let mut pids = BTreeSet::new();

    // Round 1: two processes attach and hold; the handoff meets them: busy, nothing closed.
    let a = mobile_process(&rig, "a", 3, 1_500).await;
    let b = mobile_process(&rig, "b", 3, 1_500).await;
    eventually("both attached", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| v.clients == 2)
    })
    .await;
    let req = rig.request(7, TGT).await;
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert_eq!(ans.status, "busy");
    for h in [a, b] {
        let (pid, r) = h.await.expect("process");
        assert!(r.done && r.cells == vec![SRC.0], "{r:?}");
        pids.insert(pid);
        reports.push(r);
    }

    // Round 2: a failed handoff (target full): explicit rollback, admission reopens.
    eventually("idle", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| v.counters.is_zero())
    })
    .await;
    let mut full = rig.store.rows().await.expect("rows").cells[&TGT];
    full.capacity = 0;
    rig.store
        .upsert_cell(TGT, full)
        .await
        .expect("store")
        .expect("cell");
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert_eq!(
        outcome(&ans),
        Some(TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::TargetAtCapacity)
        })
    );
    let c = mobile_process(&rig, "c", 2, 0).await;
    let d = mobile_process(&rig, "d", 2, 0).await;
    for h in [c, d] {
        let (pid, r) = h.await.expect("process");
        assert!(
            r.done && r.cells == vec![SRC.0],
            "reopened source admits: {r:?}"
        );
        pids.insert(pid);
        reports.push(r);
    }

    // Round 3: room again; a new attempt (new op id after the rollback) commits; two more
    // processes race the move and end at the target.
    full.capacity = 10;
    rig.store
        .upsert_cell(TGT, full)
        .await
        .expect("store")
        .expect("cell");
    eventually("idle", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| v.counters.is_zero())
    })
    .await;
    let retry = rig.request(7, TGT).await;
    let e = mobile_process(&rig, "e", 2, 0).await;
    let ans = rig.send(SRC, &retry, WAIT).await.expect("answer");
    let f = mobile_process(&rig, "f", 2, 0).await;
    for h in [e, f] {
        let (pid, r) = h.await.expect("process");
        assert!(r.done, "{r:?}");
        pids.insert(pid);
        reports.push(r);
    }
    let moved = matches!(outcome(&ans), Some(o) if o.is_committed());
    if moved {
        desk.wait_registered(TGT.0, WAIT)
            .await
            .expect("desktop at target");
    }
    assert_eq!(pids.len(), 6, "independent process identities");
    let refs: Vec<&MobileReport> = reports.iter().collect();
    assert_append_once(&desk.state().applied, &refs);
    assert_eq!(desk.state().applied.len(), 14);
    desk.stop().await;
}
both_stores!(
    ho_t8_two_client_processes_admission_races_and_failed_handoffs,
    t8_two_client_processes_admission_races_and_failed_handoffs
);
