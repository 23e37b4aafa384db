//! SEC-1 abuse suite against a real cell on loopback (SQLite store): clients without a valid
//! credential of the host are closed with 4401 before they count, never reach the desktop and
//! cannot keep the host busy; a full host answers 4429 "too many clients", not 4409.

mod handoff_rig;

use handoff_rig::*;
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::client_auth::mint_client_token;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_core::handoff::close_code;
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::{WorkKind, MAX_CLIENTS_PER_HOST};

const HOST: u64 = 7;

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_1_an_anonymous_or_wrong_client_is_closed_4401_and_its_mutation_never_reaches_the_desktop(
) {
    let mut rig = Rig::new(Backend::Sqlite, "sec_1_anonymous").await;
    rig.start(SRC).await;
    let desk = rig.desktop_at(HOST, SRC).await;
    let url = rig.cell(SRC).url.clone();
    let desktop = Secret::new(DESKTOP_SECRET, "desktop").expect("secret");
    let now = Clock::default().now().0;
    let other_host = mint_client_token(&desktop.desktop_token(8), 8, now + 3_600_000);
    let expired = mint_client_token(&desktop.desktop_token(HOST), HOST, now - 1);
    let forever = mint_client_token(&desktop.desktop_token(HOST), HOST, now + 365 * 86_400_000);
    let wrong_secret = Secret::new(b"not-the-cells-desktop-secret!!", "x").expect("secret");
    let forged = mint_client_token(&wrong_secret.desktop_token(HOST), HOST, now + 3_600_000);
    let attempts: [(Option<String>, &str); 7] = [
        (None, "no credential"),
        (Some("Bearer".into()), "empty bearer"),
        (Some(bearer("v1.1.abc")), "malformed"),
        (Some(bearer(&other_host)), "another host's token"),
        (Some(bearer(&expired)), "expired"),
        (Some(bearer(&forever)), "longer than a week"),
        (Some(bearer(&forged)), "minted from another secret"),
    ];
    for (header, what) in &attempts {
        let (_, arrival) = RawClient::dial_with(&url, HOST, header.as_deref()).await;
        assert_eq!(
            arrival,
            Arrival::Closed(Some(close_code::NOT_AUTHENTICATED)),
            "{what}"
        );
    }
    let stats = rig.cell(SRC).stats();
    assert_eq!(stats.clients_unauthenticated, attempts.len() as u64);
    assert_eq!(stats.clients_attached, 0);
    assert_eq!(stats.relayed, 0, "nothing reached the desktop");
    let view = rig.view(SRC, HOST).expect("host");
    assert!(view.counters.is_zero(), "no ticket held: {view:?}");
    // The host's own client gets in and its mutation is applied.
    let (client, arrival) = RawClient::dial(&url, HOST).await;
    assert_eq!(arrival, Arrival::Attached(SRC.0));
    let mut client = client.expect("client");
    client.mutate("legit-1").await.expect("acked");
    assert_eq!(desk.state().applied, vec!["legit-1"]);
    client.leave().await;
    desk.stop().await;
}

/// SEC-1 / HO-7: the credential is checked before the accept ticket is taken. Seen while the
/// refused client's 4401 close is still pending (a test seam stops it there), not by timing:
/// the host holds no ticket and the cell no live accept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_1_no_accept_ticket_is_held_while_a_refused_clients_4401_close_is_pending() {
    let mut rig = Rig::new(Backend::Sqlite, "sec_1_pending").await;
    rig.start(SRC).await;
    let desk = rig.desktop_at(HOST, SRC).await;
    let url = rig.cell(SRC).url.clone();
    let pause = rig.cell(SRC).hooks().client_refused.arm();
    let dial = tokio::spawn(async move { RawClient::dial_with(&url, HOST, None).await.1 });
    pause
        .reached
        .await
        .expect("the refused client stops before its close");
    let view = rig.view(SRC, HOST).expect("host");
    assert!(
        view.counters.is_zero(),
        "no ticket while refusing: {view:?}"
    );
    let stats = rig.cell(SRC).stats();
    assert_eq!(stats.now.accepts_live, 0, "{stats:?}");
    assert_eq!(stats.now.client_conns_live, 0, "{stats:?}");
    let _ = pause.resume.send(());
    assert_eq!(
        dial.await.expect("dial"),
        Arrival::Closed(Some(close_code::NOT_AUTHENTICATED))
    );
    assert_eq!(rig.cell(SRC).stats().clients_unauthenticated, 1);
    desk.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_1_anonymous_sockets_cannot_keep_a_host_busy_and_it_still_moves() {
    let mut rig = Rig::new(Backend::Sqlite, "sec_1_busy").await;
    rig.start(SRC).await;
    rig.start(TGT).await;
    let mut desk = rig.desktop_at(HOST, SRC).await;
    let url = rig.cell(SRC).url.clone();
    // Many anonymous sockets at once; each is closed without ever counting.
    let dials = (0..64).map(|_| {
        let url = url.clone();
        tokio::spawn(async move { RawClient::dial_with(&url, HOST, None).await.1 })
    });
    for dial in dials {
        assert_eq!(
            dial.await.expect("dial"),
            Arrival::Closed(Some(close_code::NOT_AUTHENTICATED))
        );
    }
    let view = rig.view(SRC, HOST).expect("host");
    assert!(view.counters.is_zero(), "{view:?}");
    // Idle: the handoff goes through (with the old code the anonymous clients held it busy).
    let req = rig.request(HOST, TGT).await;
    let answer = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert!(
        matches!(answer.reply, HandoffReply::Result(r) if r.outcome.is_committed()),
        "{answer:?}"
    );
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop follows");
    desk.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_1_a_full_host_answers_4429_too_many_clients_and_admits_again_when_one_leaves() {
    let mut rig = Rig::new(Backend::Sqlite, "sec_1_full").await;
    let mut cfg = rig.cell_config(SRC, true);
    // All clients come from 127.0.0.1: the per-peer connection bound must not stop them first.
    cfg.limits.max_connections_per_peer = 2 * MAX_CLIENTS_PER_HOST;
    rig.start_with(cfg).await;
    let desk = rig.desktop_at(HOST, SRC).await;
    let url = rig.cell(SRC).url.clone();
    let mut clients = Vec::with_capacity(MAX_CLIENTS_PER_HOST);
    // In batches of 16, so the test's own dials stay bounded and the SQLite rig's single
    // writer queues few attaches' persists under its 1 s transaction bound (in one CI run a
    // batch of 64 got a 1013 try-again close, which that bound's timeout gives; it did not
    // come back in 7 runs alone or beside a checker).
    // A 1013 is the cell's "try again" when the store is slow to persist an attach (a loaded
    // machine): a real client redials after it, so the test does too (a few times).
    for _ in 0..MAX_CLIENTS_PER_HOST / 16 {
        let batch: Vec<_> = (0..16)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move {
                    let mut dialed = RawClient::dial(&url, HOST).await;
                    for _ in 0..5 {
                        if dialed.1 != Arrival::Closed(Some(close_code::TRY_AGAIN)) {
                            break;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                        dialed = RawClient::dial(&url, HOST).await;
                    }
                    dialed
                })
            })
            .collect();
        for dial in batch {
            let (client, arrival) = dial.await.expect("dial");
            assert_eq!(arrival, Arrival::Attached(SRC.0));
            clients.push(client.expect("client"));
        }
    }
    let (_, arrival) = RawClient::dial(&url, HOST).await;
    assert_eq!(
        arrival,
        Arrival::Closed(Some(close_code::TOO_MANY_CLIENTS)),
        "a full host is not a wrong cell"
    );
    assert_eq!(rig.cell(SRC).stats().clients_host_full, 1);
    assert_eq!(rig.cell(SRC).stats().wrong_cell_closes, 0);
    let view = rig.view(SRC, HOST).expect("host");
    assert_eq!(
        view.counters.get(WorkKind::ClientConn) as usize,
        MAX_CLIENTS_PER_HOST
    );
    clients.pop().expect("one").leave().await;
    eventually("a place is free", WAIT, || {
        rig.view(SRC, HOST)
            .is_some_and(|v| (v.counters.get(WorkKind::ClientConn) as usize) < MAX_CLIENTS_PER_HOST)
    })
    .await;
    let (client, arrival) = RawClient::dial(&url, HOST).await;
    assert_eq!(arrival, Arrival::Attached(SRC.0));
    client.expect("client").leave().await;
    for c in clients {
        c.leave().await;
    }
    desk.stop().await;
}
