//! Seed tests 1, 2, 3 (`ho_t1_*`, `ho_t2_*`, `ho_t3_*`) over real TCP WebSockets on
//! 127.0.0.1, each on the SQLite and the PostgreSQL store.

mod handoff_rig;

use std::time::Duration;

use handoff_rig::*;
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::client::DesktopCmd;
use switchyard_adapters::handoff::director::{Director, DirectorConfig};
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::HostId;
use switchyard_core::handoff::WorkKind;
use switchyard_core::handoff::{DirectorPolicy, ScanLimits};
use switchyard_core::MonoMs;

fn busy_kinds(a: &switchyard_adapters::handoff::proto::HandoffAnswer) -> Vec<WorkKind> {
    match a.reply {
        HandoffReply::Busy { counters, .. } => counters.busy_kinds(),
        other => panic!("expected busy, got {other:?}"),
    }
}

// ---- 1 ----------------------------------------------------------------------------------------

async fn t1_phone_stays_ipad_leaves_then_both_leave(backend: Backend, tag: &str) {
    let (rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let (phone, a) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    let (ipad, b) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    assert_eq!((a, b), (Arrival::Attached(1), Arrival::Attached(1)));
    let mut phone = phone.expect("phone");
    phone.mutate("phone-1").await.expect("relayed");
    ipad.expect("ipad").leave().await;
    eventually("ipad released", WAIT, || {
        rig.view(SRC, 7)
            .is_some_and(|v| v.counters.client_conns == 1)
    })
    .await;
    let req = rig.request(7, TGT).await;
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert_eq!(
        busy_kinds(&ans),
        vec![WorkKind::ClientConn],
        "phone stays: busy"
    );
    assert_eq!(rig.assigned(7).await, SRC, "no move");
    assert!(rig.open(SRC, 7), "busy holds no barrier");
    phone
        .mutate("phone-2")
        .await
        .expect("established client not interrupted");
    phone.leave().await;
    eventually("phone released", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| v.counters.is_zero())
    })
    .await;
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert!(committed(&ans), "both left: moved ({ans:?})");
    assert_eq!(rig.assigned(7).await, TGT);
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop follows");
    assert_eq!(desk.state().applied, vec!["phone-1", "phone-2"]);
    desk.stop().await;
}
both_stores!(
    ho_t1_phone_stays_ipad_leaves_then_both_leave,
    t1_phone_stays_ipad_leaves_then_both_leave
);

async fn t1_quiet_socket_and_expired_lease_still_block(backend: Backend, tag: &str) {
    let (rig, desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let (quiet, _) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    // HO-10: the DB activity lease is expired, then missing: neither proves idleness.
    let gen = rig.view(SRC, 7).expect("host").authority.generation;
    rig.store
        .renew_activity(HostId(7), SRC, gen, MonoMs(1))
        .await
        .expect("lease");
    tokio::time::sleep(Duration::from_millis(300)).await; // quiet
    let req = rig.request(7, TGT).await;
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert_eq!(busy_kinds(&ans), vec![WorkKind::ClientConn]);
    rig.store
        .release_activity(HostId(7), SRC)
        .await
        .expect("release");
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert_eq!(busy_kinds(&ans), vec![WorkKind::ClientConn]);
    assert_eq!(rig.assigned(7).await, SRC);
    quiet.expect("quiet client").leave().await;
    desk.stop().await;
}
both_stores!(
    ho_t1_quiet_socket_and_expired_lease_still_block,
    t1_quiet_socket_and_expired_lease_still_block
);

// ---- 2 ----------------------------------------------------------------------------------------

async fn t2_accept_waiting_for_activity_persistence_blocks(backend: Backend, tag: &str) {
    let (rig, desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let pause = rig.cell(SRC).hooks().accept_persist.arm();
    let url = rig.cell(SRC).url.clone();
    let dial = tokio::spawn(async move { RawClient::dial(&url, 7).await });
    pause
        .reached
        .await
        .expect("accept is waiting for persistence");
    let req = rig.request(7, TGT).await;
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert_eq!(
        busy_kinds(&ans),
        vec![WorkKind::Accept],
        "owned before the first await"
    );
    let _ = pause.resume.send(());
    let (client, arrival) = dial.await.expect("dial task");
    assert_eq!(
        arrival,
        Arrival::Attached(1),
        "the busy answer closed nothing"
    );
    client.expect("client").leave().await;
    eventually("released", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| v.counters.is_zero())
    })
    .await;
    assert!(committed(&rig.send(SRC, &req, WAIT).await.expect("answer")));
    desk.stop().await;
}
both_stores!(
    ho_t2_accept_waiting_for_activity_persistence_blocks,
    t2_accept_waiting_for_activity_persistence_blocks
);

async fn t2_accept_after_barrier_gets_4409_and_leaks_nothing(backend: Backend, tag: &str) {
    let (rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let held = rig.store.faults().arm_pause_after_lock();
    let req = rig.request(7, TGT).await;
    let (ans, ()) = tokio::join!(rig.send(SRC, &req, WAIT), async {
        held.reached.await.expect("transaction holds the host lock");
        assert!(
            rig.gated(SRC, 7),
            "barrier before the first await of the handoff"
        );
        let (_, arrival) = RawClient::dial(&rig.cell(SRC).url, 7).await;
        assert_eq!(
            arrival,
            Arrival::Closed(Some(4409)),
            "WRONG_CELL under the barrier"
        );
        let v = rig.view(SRC, 7).expect("host");
        assert!(
            v.counters.is_zero(),
            "refused accept leaked nothing: {:?}",
            v.counters
        );
        let _ = held.resume.send(());
    });
    assert!(committed(&ans.expect("answer")));
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop at target");
    let mut ok = false;
    for _ in 0..100 {
        if rig
            .store
            .rows()
            .await
            .expect("rows")
            .reservations
            .is_empty()
        {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(ok, "no leaked reservation after registration at the target");
    assert!(rig.cell(SRC).stats().wrong_cell_closes >= 1);
    desk.stop().await;
}
both_stores!(
    ho_t2_accept_after_barrier_gets_4409_and_leaks_nothing,
    t2_accept_after_barrier_gets_4409_and_leaks_nothing
);

async fn t2_credential_change_across_the_barrier(backend: Backend, tag: &str) {
    let (rig, desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let pause = rig.cell(SRC).hooks().credential_persist.arm();
    desk.send(DesktopCmd::Credential(1)).await.expect("cmd");
    pause.reached.await.expect("credential persisting");
    let req = rig.request(7, TGT).await;
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert_eq!(
        busy_kinds(&ans),
        vec![WorkKind::ControlOp],
        "control op counted"
    );
    let _ = pause.resume.send(());
    eventually("credential 1 done", WAIT, || {
        desk.state().credentials_done == vec![1]
    })
    .await;
    let held = rig.store.faults().arm_pause_after_lock();
    let (ans, ()) = tokio::join!(rig.send(SRC, &req, WAIT), async {
        held.reached.await.expect("in transaction");
        desk.send(DesktopCmd::Credential(2)).await.expect("cmd");
        eventually("credential 2 refused (retryable)", WAIT, || {
            desk.state()
                .retries
                .iter()
                .any(|r| r == "credential 2: control_gated")
        })
        .await;
        let _ = held.resume.send(());
    });
    assert!(committed(&ans.expect("answer")));
    assert_eq!(
        desk.state().credentials_done,
        vec![1],
        "no late credential install"
    );
    desk.stop().await;
}
both_stores!(
    ho_t2_credential_change_across_the_barrier,
    t2_credential_change_across_the_barrier
);

async fn t2_attach_waiting_for_persistence_abandons_after_replacement(backend: Backend, tag: &str) {
    let (rig, first) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let gen1 = rig.view(SRC, 7).expect("host").authority.generation;
    let pause = rig.cell(SRC).hooks().accept_persist.arm();
    let url = rig.cell(SRC).url.clone();
    let dial = tokio::spawn(async move { RawClient::dial(&url, 7).await });
    pause.reached.await.expect("attach waiting");
    // A replacement control registers while the attach waits (HO-A4).
    let second = rig.desktop_at(7, SRC).await;
    eventually("rebound", WAIT, || {
        rig.view(SRC, 7)
            .is_some_and(|v| v.authority.generation > gen1)
    })
    .await;
    let _ = pause.resume.send(());
    let (_, arrival) = dial.await.expect("dial");
    assert_eq!(
        arrival,
        Arrival::Closed(Some(4409)),
        "no late attach to the old basis"
    );
    eventually("nothing leaked", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| v.counters.is_zero())
    })
    .await;
    first.stop().await;
    second.stop().await;
}
both_stores!(
    ho_t2_attach_waiting_for_persistence_abandons_after_replacement,
    t2_attach_waiting_for_persistence_abandons_after_replacement
);

// ---- 3 ----------------------------------------------------------------------------------------

async fn t3_busy_hosts_neither_starve_idle_ones_nor_spend_the_budget(backend: Backend, tag: &str) {
    let rig = Rig::two_cells(backend, tag).await;
    // Hosts 1..=4 stay busy (a client each); 5 is idle and sorts last (a page boundary away).
    let mut desks = Vec::new();
    let mut clients = Vec::new();
    for h in 1..=5u64 {
        desks.push(rig.desktop_at(h, SRC).await);
    }
    for h in 1..=4u64 {
        let (c, a) = RawClient::dial(&rig.cell(SRC).url, h).await;
        assert_eq!(a, Arrival::Attached(1));
        clients.push(c.expect("client"));
    }
    // Measurements are written asynchronously after registration.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let director = Director::new(
        DirectorConfig {
            id: format!("d-{tag}"),
            policy: DirectorPolicy {
                enabled: true,
                cohort_percent: 100,
                policy: store_config().policy,
            },
            limits: ScanLimits {
                page_size: 2,
                max_pages: 1,
                max_dispatch: 2,
            },
            max_failures: 1,
            request_timeout: WAIT,
            retries: 1,
            secret: Secret::new(INTERNAL_SECRET, "internal").expect("secret"),
            interval: Duration::from_secs(1),
            dispatch: switchyard_core::handoff::DispatchLimits::DEFAULT,
        },
        rig.store.clone(),
        rig.clock.clone(),
    )
    .with_journal(rig.journal.clone());
    let mut moved_after = None;
    for pass in 1..=4 {
        let r = director.pass().await.expect("pass");
        assert_eq!(r.failed, 0, "busy is never a dispatch failure: {r:?}");
        assert!(!r.budget_exhausted);
        if r.committed > 0 {
            moved_after = Some(pass);
            break;
        }
        assert!(r.deferred > 0, "busy hosts were deferred: {r:?}");
    }
    assert_eq!(
        moved_after,
        Some(3),
        "rotation reached the idle host on the third pass"
    );
    assert_eq!(rig.assigned(5).await, TGT);
    for h in 1..=4u64 {
        assert_eq!(rig.assigned(h).await, SRC, "busy host {h} stays");
    }
    for (n, c) in clients.iter_mut().enumerate() {
        c.mutate(&format!("still-{n}"))
            .await
            .expect("busy hosts keep admission");
    }
    for d in desks {
        d.stop().await;
    }
}
both_stores!(
    ho_t3_busy_hosts_neither_starve_idle_ones_nor_spend_the_budget,
    t3_busy_hosts_neither_starve_idle_ones_nor_spend_the_budget
);
