//! Seed tests 4, 5 and 7 (`ho_t4_*`, `ho_t5_*`, `ho_t7_*`) and the internal endpoint's
//! authentication, over real sockets, each on the SQLite and the PostgreSQL store. Every
//! injected fault is counted in the rig's ledger (printed per test).

mod handoff_rig;

use std::time::Duration;

use handoff_rig::*;
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::director::{Director, DirectorConfig, PassReport};
use switchyard_core::handoff::store::{AbortReason, AttemptOutcome, Registration, TxnOutcome};
use switchyard_core::handoff::{AuthorityField, HostId};
use switchyard_core::handoff::{ClosedReason, GateState};
use switchyard_core::handoff::{DirectorPolicy, ScanLimits};
use switchyard_core::handoff::{HandoffReply, Phase};

// ---- 4 ----------------------------------------------------------------------------------------

async fn t4_lost_db_response_reconciles_to_the_commit(backend: Backend, tag: &str) {
    let (rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    rig.store.faults().lose_next_commit_result();
    fault_injected();
    let req = rig.request(7, TGT).await;
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert!(
        committed(&ans),
        "the locked reconciliation established the commit: {ans:?}"
    );
    assert!(rig.cell(SRC).stats().reconciliations_run >= 1);
    assert_eq!(
        rig.cell(SRC).stats().reopened,
        0,
        "never reopened on a lost result"
    );
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop at target");
    assert_eq!(rig.attempts_for(req.op_id).await, 1);
    fault_survived();
    ledger(tag, 0);
    desk.stop().await;
}
both_stores!(
    ho_t4_lost_db_response_reconciles_to_the_commit,
    t4_lost_db_response_reconciles_to_the_commit
);

async fn t4_lost_http_response_duplicates_and_director_restart(backend: Backend, tag: &str) {
    let (rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let held = rig.store.faults().arm_pause_after_lock();
    let req = rig.request(7, TGT).await;
    // The director's request times out: its response is lost (HO-A3).
    let (lost, again) = tokio::join!(rig.send(SRC, &req, Duration::from_millis(200)), async {
        held.reached.await.expect("in transaction");
        tokio::time::sleep(Duration::from_millis(300)).await;
        // A restarted director reads the host while the first transaction is still open (read
        // after it commits, the host has moved and no director picks it again): it derives the
        // same request (UUIDv5 of the exact authority).
        let again = rig.request(7, TGT).await;
        let _ = held.resume.send(());
        again
    });
    assert!(lost.is_err(), "the first response was lost");
    fault_injected();
    assert_eq!(again.op_id, req.op_id);
    let ans = rig.send(SRC, &again, WAIT).await.expect("answer");
    assert!(
        committed(&ans),
        "retry sees the same, completed operation: {ans:?}"
    );
    // Duplicate workers: more re-deliveries never migrate twice.
    for _ in 0..3 {
        assert!(committed(
            &rig.send(SRC, &again, WAIT).await.expect("answer")
        ));
    }
    assert_eq!(rig.attempts_for(req.op_id).await, 1);
    assert_eq!(
        rig.cell(SRC).stats().transactions_run,
        1,
        "one transaction only"
    );
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop at target");
    // Even at the retired source, a duplicate answers the durable result.
    assert!(committed(
        &rig.send(SRC, &again, WAIT).await.expect("answer")
    ));
    fault_survived();
    ledger(tag, 0);
    desk.stop().await;
}
both_stores!(
    ho_t4_lost_http_response_duplicates_and_director_restart,
    t4_lost_http_response_duplicates_and_director_restart
);

async fn t4_timeout_during_transaction_never_reopens_alone(backend: Backend, tag: &str) {
    let (rig, desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let held = rig.store.faults().arm_pause_after_lock();
    fault_injected();
    let req = rig.request(7, TGT).await;
    let started = tokio::time::Instant::now();
    let (ans, ()) = tokio::join!(rig.send(SRC, &req, WAIT), async {
        held.reached.await.expect("in transaction");
        // The transaction hangs under the lock until its own timeout (1 s) abandons it: the
        // source stays gated the whole time.
        for _ in 0..9 {
            assert!(rig.gated(SRC, 7), "no timer reopens admission");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eventually("reconciled", WAIT, || !rig.gated(SRC, 7)).await;
        drop(held.resume);
    });
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(rig.cell(SRC).stats().reconciliations_run >= 1);
    assert_eq!(
        outcome(&ans.expect("answer")),
        Some(TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }),
        "the outcome came from the locked reconciliation's fence"
    );
    assert!(
        rig.open(SRC, 7),
        "reopened by the reconciliation, not by the timeout"
    );
    // The original transaction, replayed late, fails its re-check on the fence.
    let late = rig
        .store
        .run_transaction(rig.clock.now(), &req)
        .await
        .expect("late");
    assert_eq!(
        late,
        TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        }
    );
    assert_eq!(rig.assigned(7).await, SRC);
    fault_survived();
    ledger(tag, 0);
    desk.stop().await;
}
both_stores!(
    ho_t4_timeout_during_transaction_never_reopens_alone,
    t4_timeout_during_transaction_never_reopens_alone
);

/// HO-L1: a host whose attempt ended fenced (the transaction timed out under the lock, the
/// locked reconciliation fenced its op id) is retried: the fence renewed the host's authority,
/// the reopened source holds the renewed one, and the director's next pick derives a new op
/// id that commits; the desktop stayed connected at the source until the commit moved it.
async fn l1_a_fenced_host_is_retried_with_a_new_op_id(backend: Backend, tag: &str) {
    let (rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let held = rig.store.faults().arm_pause_after_lock();
    fault_injected();
    let req = rig.request(7, TGT).await;
    let (ans, ()) = tokio::join!(rig.send(SRC, &req, WAIT), async {
        held.reached.await.expect("in transaction");
        // The transaction hangs under the lock until its own timeout abandons it.
        eventually("reconciled", WAIT, || !rig.gated(SRC, 7)).await;
        drop(held.resume);
    });
    assert_eq!(
        outcome(&ans.expect("answer")),
        Some(TxnOutcome::RolledBack {
            reason: AbortReason::Fenced
        })
    );
    let registrations = desk.state().registrations.len();
    let renewed = rig
        .store
        .authority(HostId(7))
        .await
        .expect("store")
        .expect("host");
    assert_eq!(renewed.generation, req.source.generation.next());
    let view = rig.view(SRC, 7).expect("host");
    assert_eq!(
        view.authority, renewed,
        "the source adopted the renewed authority"
    );
    assert_eq!(view.gate, GateState::Open);
    assert!(
        view.control_connected,
        "the desktop did not have to reconnect"
    );
    // HO-L3: on SQLite the paused transaction held the one writer, so the target's lease
    // renewals (every 100 ms of a 300 ms lease) waited behind it and its lease may have
    // lapsed meanwhile; a lapsed target is refused (`target_not_live`) until its next renewal.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let rows = rig.store.rows().await.expect("rows");
        if rows
            .leases
            .get(&TGT)
            .is_some_and(|until| *until > rig.clock.now())
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the target's lease is renewed after the pause"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The director's next pick: a new op id, started and committed by the source.
    let pick = rig.request(7, TGT).await;
    assert_ne!(pick.op_id, req.op_id);
    let ans = rig.send(SRC, &pick, WAIT).await.expect("answer");
    assert!(committed(&ans), "{ans:?}");
    assert_eq!(rig.assigned(7).await, TGT);
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop follows the commit");
    assert_eq!(
        desk.state().registrations[..registrations]
            .last()
            .map(|r| r.0),
        Some(SRC.0),
        "no registration between the fence and the commit"
    );
    assert_eq!(
        desk.state().registrations.len(),
        registrations + 1,
        "the only new registration is the one at the target"
    );
    // The old op id never commits.
    let late = rig
        .store
        .run_transaction(rig.clock.now(), &req)
        .await
        .expect("late");
    assert!(
        matches!(late, TxnOutcome::AuthorityChanged { .. }),
        "{late:?}"
    );
    assert_eq!(rig.attempts_for(req.op_id).await, 1);
    fault_survived();
    ledger(tag, 0);
    desk.stop().await;
}
both_stores!(
    ho_l1_a_fenced_host_is_retried_with_a_new_op_id,
    l1_a_fenced_host_is_retried_with_a_new_op_id
);

async fn t4_db_outage_mid_transaction_quarantines_then_reconciles(backend: Backend, tag: &str) {
    let (rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let held = rig.store.faults().arm_pause_after_lock();
    if backend == Backend::Sqlite {
        // An embedded file cannot be taken away: lose the commit's result, then refuse access.
        rig.store.faults().lose_next_commit_result();
    }
    let req = rig.request(7, TGT).await;
    let send = rig.send(SRC, &req, Duration::from_millis(500));
    let (first, ()) = tokio::join!(send, async {
        held.reached.await.expect("in transaction");
        match backend {
            Backend::Postgres => {
                // Real outage: no new connections, every backend (ours holds the lock) killed.
                support_pg::outage_begin(&rig.url).await;
            }
            Backend::Sqlite => rig.store.faults().fail_next_begins(u32::MAX),
        }
        fault_injected();
        let _ = held.resume.send(());
    });
    assert!(first.is_err() || first.is_ok_and(|a| a.status == "in_progress"));
    eventually("quarantined", WAIT, || {
        matches!(
            rig.view(SRC, 7).and_then(|v| v.phase),
            Some(Phase::Quarantined { .. })
        )
    })
    .await;
    // The outage lasts: the barrier holds through several quarantine retries.
    let (_, arrival) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    assert_eq!(arrival, Arrival::Closed(Some(4409)));
    for _ in 0..10 {
        assert!(
            rig.gated(SRC, 7),
            "never reopened while durable access is unavailable"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        rig.cell(SRC).stats().quarantined >= 2,
        "retried reconciliation"
    );
    match backend {
        Backend::Postgres => support_pg::outage_end(&rig.url).await,
        Backend::Sqlite => rig.store.faults().fail_next_begins(0),
    }
    eventually("reconciled after recovery", WAIT, || !rig.gated(SRC, 7)).await;
    let moved = rig.assigned(7).await == TGT;
    let view = rig.view(SRC, 7).expect("host");
    if moved {
        assert!(matches!(
            view.gate,
            GateState::Closed(ClosedReason::Committed)
        ));
        desk.wait_registered(TGT.0, WAIT)
            .await
            .expect("desktop follows the commit");
    } else {
        assert_eq!(view.gate, GateState::Open);
        assert_eq!(
            view.last_result.map(|r| r.outcome),
            Some(TxnOutcome::RolledBack {
                reason: AbortReason::Fenced
            })
        );
    }
    // Either way the durable record and the source agree, and one attempt row exists.
    assert_eq!(rig.attempts_for(req.op_id).await, 1);
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert_eq!(
        committed(&ans),
        moved,
        "the duplicate answers the durable result"
    );
    fault_survived();
    ledger(tag, 0);
    desk.stop().await;
}
both_stores!(
    ho_t4_db_outage_mid_transaction_quarantines_then_reconciles,
    t4_db_outage_mid_transaction_quarantines_then_reconciles
);

async fn t4_commit_wins_race_with_replacement_control(backend: Backend, tag: &str) {
    let (rig, first) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let held = rig.store.faults().arm_pause_after_lock();
    let req = rig.request(7, TGT).await;
    let (ans, mut second) = tokio::join!(rig.send(SRC, &req, WAIT), async {
        held.reached.await.expect("in transaction");
        // A replacement control arrives while the transaction holds the host lock: refused
        // (retryable) at the gated source; it retries and ends at the target.
        let second = rig.desktop(7);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let _ = held.resume.send(());
        second
    });
    assert!(committed(&ans.expect("answer")));
    second
        .wait_registered(TGT.0, WAIT)
        .await
        .expect("replacement lands at the target");
    assert!(matches!(
        rig.view(SRC, 7).expect("host").gate,
        GateState::Closed(ClosedReason::Committed)
    ));
    // The old ownership is refused by the store.
    let refused = rig
        .store
        .register_control(
            rig.clock.now(),
            HostId(7),
            SRC,
            rig.cell(SRC).incarnation,
            true,
        )
        .await
        .expect("store");
    assert!(refused.is_err());
    first.stop().await;
    second.stop().await;
}
both_stores!(
    ho_t4_commit_wins_race_with_replacement_control,
    t4_commit_wins_race_with_replacement_control
);

async fn t4_replacement_wins_and_the_old_transaction_fails_its_recheck(
    backend: Backend,
    tag: &str,
) {
    let (rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let before = rig.view(SRC, 7).expect("host").authority;
    let held = rig.store.faults().before_begin.arm();
    let req = rig.request(7, TGT).await;
    let (ans, ()) = tokio::join!(rig.send(SRC, &req, WAIT), async {
        held.reached
            .await
            .expect("barrier up, transaction not begun");
        // The replacement control registers first (under the host lock in the store).
        let newer = rig
            .store
            .register_control(rig.clock.now(), HostId(7), SRC, before.incarnation, true)
            .await
            .expect("store")
            .expect("replacement registered");
        assert!(newer.generation > before.generation);
        let _ = held.resume.send(());
    });
    assert!(matches!(
        outcome(&ans.expect("answer")),
        Some(TxnOutcome::AuthorityChanged { .. })
    ));
    assert_eq!(rig.assigned(7).await, SRC, "no move");
    assert!(rig
        .store
        .rows()
        .await
        .expect("rows")
        .reservations
        .is_empty());
    assert_eq!(
        rig.cell(SRC).stats().reopened,
        0,
        "a stale source is retired, not reopened"
    );
    // The desktop follows the DRAINING path and registers again at the source.
    eventually("desktop drained", WAIT, || {
        !desk.state().drainings.is_empty()
    })
    .await;
    desk.wait_registered(SRC.0, WAIT)
        .await
        .expect("re-registered");
    eventually("fresh source machine", WAIT, || rig.open(SRC, 7)).await;
    desk.stop().await;
}
both_stores!(
    ho_t4_replacement_wins_and_the_old_transaction_fails_its_recheck,
    t4_replacement_wins_and_the_old_transaction_fails_its_recheck
);

async fn t4_source_restart_and_stale_authority(backend: Backend, tag: &str) {
    let (mut rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let held = rig.store.faults().before_begin.arm();
    let req = rig.request(7, TGT).await;
    let (_lost, ()) = tokio::join!(rig.send(SRC, &req, Duration::from_millis(300)), async {
        held.reached.await.expect("barrier up");
    });
    // The source process dies with its attempt; a new process (incarnation + 1) starts.
    fault_injected();
    let old_inc = rig.cell(SRC).incarnation;
    rig.kill(SRC);
    rig.start(SRC).await;
    assert!(rig.cell(SRC).incarnation > old_inc);
    desk.wait_registered(SRC.0, WAIT)
        .await
        .expect("desktop re-registers at the new process");
    // The old process's transaction runs late: it fails the incarnation/generation re-check.
    let _ = held.resume.send(());
    let late = rig
        .store
        .run_transaction(rig.clock.now(), &req)
        .await
        .expect("late");
    assert!(
        matches!(late, TxnOutcome::AuthorityChanged { .. }),
        "{late:?}"
    );
    assert_eq!(rig.assigned(7).await, SRC);
    // The stale request is superseded at the new process; a fresh one commits.
    let ans = rig.send(SRC, &req, WAIT).await.expect("answer");
    assert!(
        matches!(
            ans.reply,
            HandoffReply::Superseded {
                field: AuthorityField::Incarnation | AuthorityField::Generation,
                ..
            }
        ),
        "{ans:?}"
    );
    let fresh = rig.request(7, TGT).await;
    assert_ne!(fresh.op_id, req.op_id);
    assert!(committed(
        &rig.send(SRC, &fresh, WAIT).await.expect("answer")
    ));
    fault_survived();
    ledger(tag, 0);
    desk.stop().await;
}
both_stores!(
    ho_t4_source_restart_and_stale_authority,
    t4_source_restart_and_stale_authority
);

// ---- HO-L1: no stranded host after a store outage ----------------------------------------------

async fn l1_hosts_fenced_by_an_outage_are_moved_later_without_reconnecting(
    backend: Backend,
    tag: &str,
) {
    const HOSTS: [u64; 4] = [11, 12, 13, 14];
    let rig = Rig::two_cells(backend, tag).await;
    let mut desks = Vec::new();
    for h in HOSTS {
        desks.push((h, rig.desktop_at(h, SRC).await));
    }
    // Measurements are written asynchronously after registration.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut reqs = Vec::new();
    for h in HOSTS {
        reqs.push(rig.request(h, TGT).await);
    }
    // The first handoff is caught inside its transaction, holding its host lock, when the
    // store goes away; the others start while it is away, concurrently.
    let held = rig.store.faults().arm_pause_after_lock();
    if backend == Backend::Sqlite {
        // An embedded file cannot be taken away: the first commits and its result is lost.
        rig.store.faults().lose_next_commit_result();
    }
    let outage = async {
        held.reached.await.expect("in transaction");
        match backend {
            Backend::Postgres => support_pg::outage_begin(&rig.url).await,
            Backend::Sqlite => rig.store.faults().fail_next_begins(u32::MAX),
        }
        fault_injected();
        let short = Duration::from_millis(500);
        let others = reqs[1..].iter().map(|r| rig.send(SRC, r, short));
        let _ = held.resume.send(());
        let _ = futures_util::future::join_all(others).await;
    };
    let _ = tokio::join!(rig.send(SRC, &reqs[0], Duration::from_millis(500)), outage);
    eventually("every attempt quarantined by the outage", WAIT, || {
        HOSTS.iter().all(|h| {
            matches!(
                rig.view(SRC, *h).and_then(|v| v.phase),
                Some(Phase::Quarantined { .. })
            )
        })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    match backend {
        Backend::Postgres => support_pg::outage_end(&rig.url).await,
        Backend::Sqlite => rig.store.faults().fail_next_begins(0),
    }
    eventually("every attempt reconciled after the outage", WAIT, || {
        HOSTS.iter().all(|h| !rig.gated(SRC, *h))
    })
    .await;
    let fenced: Vec<u64> = HOSTS
        .iter()
        .copied()
        .filter(|h| {
            rig.view(SRC, *h)
                .and_then(|v| v.last_result)
                .map(|r| r.outcome)
                == Some(TxnOutcome::RolledBack {
                    reason: AbortReason::Fenced,
                })
        })
        .collect();
    assert!(
        fenced.len() >= HOSTS.len() - 1,
        "the attempts started during the outage end fenced: {fenced:?}"
    );

    // HO-L1: later passes of the director move every fenced host (a new attempt under a new
    // op id: the fence renewed the authority), within a bounded number of passes.
    let director = Director::new(
        DirectorConfig {
            id: format!("d-{tag}"),
            policy: DirectorPolicy {
                enabled: true,
                cohort_percent: 100,
                policy: store_config().policy,
            },
            limits: ScanLimits {
                page_size: 16,
                max_pages: 1,
                max_dispatch: 16,
            },
            max_failures: 4,
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
    let mut reports: Vec<PassReport> = Vec::new();
    let mut stranded = fenced.clone();
    for _ in 0..4 {
        reports.push(director.pass().await.expect("a pass after the outage"));
        stranded.clear();
        for h in &fenced {
            if rig.assigned(*h).await != TGT {
                stranded.push(*h);
            }
        }
        if stranded.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let answers: Vec<&Vec<String>> = reports.iter().map(|r| &r.answers).collect();
    assert!(
        stranded.is_empty(),
        "fenced hosts {stranded:?} are still at the source after {} director passes \
         (answers per pass: {answers:?})",
        reports.len()
    );
    // No desktop had to reconnect at the source: each registered there once, and every one
    // followed its host to the target.
    for (h, desk) in &mut desks {
        desk.wait_registered(TGT.0, WAIT)
            .await
            .unwrap_or_else(|e| panic!("host {h}: {e}"));
        let at_source = desk
            .state()
            .registrations
            .iter()
            .filter(|(c, _)| *c == SRC.0)
            .count();
        assert_eq!(
            at_source, 1,
            "host {h}'s desktop registered at the source again"
        );
    }
    fault_survived();
    ledger(tag, 0);
    for (_, d) in desks {
        d.stop().await;
    }
}
both_stores!(
    ho_l1_hosts_fenced_by_an_outage_are_moved_later_without_reconnecting,
    l1_hosts_fenced_by_an_outage_are_moved_later_without_reconnecting
);

// ---- 5 ----------------------------------------------------------------------------------------

async fn t5_target_failure_before_and_after_registration(backend: Backend, tag: &str) {
    let (mut rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    // The target dies before the desktop can register there.
    rig.kill(TGT);
    fault_injected();
    let req = rig.request(7, TGT).await;
    assert!(committed(&rig.send(SRC, &req, WAIT).await.expect("answer")));
    // The source released its empty control even though nothing could register.
    eventually("source control released", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| !v.control_connected)
    })
    .await;
    let mut released = false;
    for _ in 0..100 {
        if rig
            .store
            .activity(HostId(7))
            .await
            .expect("activity")
            .is_none()
        {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(released, "the source's activity was released");
    // Ordinary bounded recovery: the reservation expires; the source is not kept.
    rig.clock.advance(31_000);
    let expired = rig
        .store
        .expire_migrations(rig.clock.now())
        .await
        .expect("expire");
    assert_eq!(expired, vec![req.op_id]);
    let rows = rig.store.rows().await.expect("rows");
    assert!(matches!(
        rows.attempts[&req.op_id].outcome,
        AttemptOutcome::Committed {
            registration: Registration::RecoveryStarted,
            ..
        }
    ));
    assert_eq!(rig.assigned(7).await, TGT, "assignment stays at the target");
    let (_, arrival) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    assert_eq!(
        arrival,
        Arrival::Closed(Some(4409)),
        "the source never reopens"
    );
    // The target comes back (new incarnation); the desktop registers; clients attach there.
    rig.start(TGT).await;
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("registered at the restarted target");
    let (client, arrival) = RawClient::dial(&rig.cell(TGT).url, 7).await;
    assert_eq!(arrival, Arrival::Attached(TGT.0));
    let mut client = client.expect("client");
    client
        .mutate("at-target")
        .await
        .expect("relayed at the target");
    // The target fails again after clients attached: they lose it, the source stays retired.
    fault_injected();
    rig.kill(TGT);
    assert!(client.mutate("after-failure").await.is_err());
    assert!(!rig.open(SRC, 7));
    assert_eq!(rig.assigned(7).await, TGT);
    fault_survived();
    fault_survived();
    ledger(tag, 0);
    desk.stop().await;
}
both_stores!(
    ho_t5_target_failure_before_and_after_registration,
    t5_target_failure_before_and_after_registration
);

// ---- 7 ----------------------------------------------------------------------------------------

async fn t7_emergency_drain_before_the_transaction_fences_it(backend: Backend, tag: &str) {
    let (rig, desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let (client, _) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    let client = client.expect("client");
    // Busy first (the client), so drain a host with an attempt: let the client leave.
    client.leave().await;
    eventually("idle", WAIT, || {
        rig.view(SRC, 7).is_some_and(|v| v.counters.is_zero())
    })
    .await;
    let held = rig.store.faults().before_begin.arm();
    let req = rig.request(7, TGT).await;
    let (ans, ()) = tokio::join!(rig.send(SRC, &req, WAIT), async {
        held.reached.await.expect("barrier up");
        let d = rig.drain(SRC, 7).await;
        assert!(d.applied);
        // The fence joins the host-lock serialisation before the transaction.
        eventually("fence written", WAIT, || {
            rig.cell(SRC).stats().fences_written == 1
        })
        .await;
        let _ = held.resume.send(());
    });
    assert!(matches!(
        outcome(&ans.expect("answer")),
        Some(TxnOutcome::AuthorityChanged { .. })
    ));
    assert_eq!(rig.assigned(7).await, SRC);
    let view = rig.view(SRC, 7).expect("host");
    assert!(
        matches!(view.gate, GateState::Closed(ClosedReason::Drained)),
        "{view:?}"
    );
    assert_eq!(
        rig.cell(SRC).stats().reopened,
        0,
        "a drained source never reopens"
    );
    let (_, arrival) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    assert_eq!(arrival, Arrival::Closed(Some(1012)), "hard drain unchanged");
    desk.stop().await;
}
both_stores!(
    ho_t7_emergency_drain_before_the_transaction_fences_it,
    t7_emergency_drain_before_the_transaction_fences_it
);

async fn t7_drain_during_a_committing_transaction_follows_the_commit(backend: Backend, tag: &str) {
    let (rig, mut desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let held = rig.store.faults().arm_pause_after_lock();
    let req = rig.request(7, TGT).await;
    let (ans, ()) = tokio::join!(rig.send(SRC, &req, WAIT), async {
        held.reached.await.expect("in transaction");
        assert!(rig.drain(SRC, 7).await.applied);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = held.resume.send(());
    });
    assert!(
        committed(&ans.expect("answer")),
        "the committed handoff follows its result"
    );
    assert!(matches!(
        rig.view(SRC, 7).expect("host").gate,
        GateState::Closed(_)
    ));
    assert_eq!(rig.cell(SRC).stats().reopened, 0);
    desk.wait_registered(TGT.0, WAIT)
        .await
        .expect("desktop at target");
    desk.stop().await;
}
both_stores!(
    ho_t7_drain_during_a_committing_transaction_follows_the_commit,
    t7_drain_during_a_committing_transaction_follows_the_commit
);

// ---- internal endpoint authentication ------------------------------------------------------------

async fn internal_endpoint_refuses_unauthenticated_and_malformed(backend: Backend, tag: &str) {
    let (rig, desk) = Rig::two_cells_and_desktop(backend, tag, 7).await;
    let before = rig.store.rows().await.expect("rows");
    let req = rig.request(7, TGT).await;
    let body = serde_json::to_vec(&req).expect("json");
    use switchyard_adapters::handoff::proto::{DRAIN_PATH, HANDOFF_PATH};
    let refusals: [(&str, Vec<u8>, bool, u16); 3] = [
        (HANDOFF_PATH, body, false, 401),
        (DRAIN_PATH, b"{\"host\":7}".to_vec(), false, 401),
        (HANDOFF_PATH, b"{not json".to_vec(), true, 400),
    ];
    for (path, body, authenticated, status) in refusals {
        let r = rig
            .post(SRC, path, body, authenticated, WAIT)
            .await
            .expect("answered");
        assert_eq!(
            r.status.as_u16(),
            status,
            "{path}, authenticated: {authenticated}"
        );
    }
    // A forged op id is refused by the core (nothing held).
    let mut forged = req;
    forged.op_id = switchyard_core::handoff::OpId(uuid::Uuid::from_u128(7));
    let ans = rig.send(SRC, &forged, WAIT).await.expect("answer");
    assert_eq!(ans.status, "refused");
    // The cells' lease renewals run on their own timer (every third of the lease): a loaded
    // machine may renew one in the meantime. Everything else must be as it was.
    let mut after = rig.store.rows().await.expect("rows");
    after.leases.clone_from(&before.leases);
    assert_eq!(after, before, "nothing changed");
    assert!(rig.open(SRC, 7));
    desk.stop().await;
}
both_stores!(
    internal_endpoint_refuses_unauthenticated_and_malformed,
    internal_endpoint_refuses_unauthenticated_and_malformed
);
