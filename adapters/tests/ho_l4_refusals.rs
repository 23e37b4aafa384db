//! HO-L4 over real sockets, on both SQL stores: a move the store refuses (here `store_full`,
//! the attempt-row bound) is named in the director's result and its `--explain` line, counted
//! by reason at the director and at the cell, logged once when the refusals begin and once
//! when they clear, and the host moves once room returns, without its desktop reconnecting.

mod handoff_rig;
mod support_log;

use std::time::Duration;

use handoff_rig::{Backend, Rig, SRC, TGT};
use support_log::Log;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::director::{Director, DirectorConfig};
use switchyard_core::handoff::store::{
    LimitSettings, Retention, StoreBounds, MIN_ATTEMPT_RETENTION_MS,
};
use switchyard_core::handoff::{DirectorPolicy, DispatchLimits, HostId, Measurement, ScanLimits};

const HOLD: Duration = Duration::from_millis(300);
const INTERVAL: Duration = Duration::from_millis(600);

fn director(rig: &Rig) -> Director {
    Director::new(director_config(), rig.store.clone(), Clock::default())
}

fn director_config() -> DirectorConfig {
    DirectorConfig {
        id: "d-l4".into(),
        policy: DirectorPolicy {
            enabled: true,
            cohort_percent: 100,
            policy: handoff_rig::store_config().policy,
        },
        limits: ScanLimits {
            page_size: 10,
            max_pages: 1,
            max_dispatch: 100,
        },
        max_failures: 100,
        request_timeout: Duration::from_secs(5),
        retries: 0,
        secret: Rig::internal_secret(),
        interval: INTERVAL,
        dispatch: DispatchLimits::DEFAULT,
    }
}

/// Fresh measurements of `hosts` towards the target, stamped by the rig's clock.
async fn measure(rig: &Rig, hosts: &[u64]) {
    for host in hosts {
        let m = Measurement {
            measured_at: rig.clock.now(),
            current_rtt_ms: 120,
            target_rtt_ms: 20,
        };
        rig.store
            .put_measurement(HostId(*host), TGT, &m)
            .await
            .expect("measurement");
    }
}

fn limits(max_attempt_rows: u64) -> LimitSettings {
    let c = handoff_rig::store_config();
    LimitSettings {
        host_cooldown_ms: c.policy.host_cooldown_ms,
        max_in_flight_migrations: c.max_in_flight_migrations,
        rate_window_ms: c.rate_window_ms,
        max_commits_per_window: c.max_commits_per_window,
        bounds: StoreBounds {
            max_attempt_rows,
            ..c.bounds
        },
    }
}

async fn a_full_store_refuses_by_name_and_the_host_moves_once_room_returns(backend: Backend) {
    let (log, _guard) = Log::capture();
    let mut rig = Rig::new(backend, "l4-full").await;
    for cell in [SRC, TGT] {
        let mut cfg = rig.cell_config(cell, true);
        cfg.refusal_hold = HOLD;
        rig.start_with(cfg).await;
    }
    let _d1 = rig.desktop_at(1, SRC).await;
    let _d2 = rig.desktop_at(2, SRC).await;
    // Both hosts measured now (their desktops' own reports may come later).
    for host in [1, 2] {
        let m = Measurement {
            measured_at: Clock::default().now(),
            current_rtt_ms: 120,
            target_rtt_ms: 20,
        };
        rig.store
            .put_measurement(HostId(host), TGT, &m)
            .await
            .expect("measurement");
    }
    // Room for one attempt record: of the two moves, one commits and one is refused.
    rig.store.put_limits(&limits(1)).await.expect("limits");
    let d = director(&rig);
    let first = d.pass().await.expect("pass");
    assert_eq!(first.committed, 1, "{first:?}");
    assert_eq!(
        first.refused.get("store_full"),
        Some(&1),
        "the refusal is named in the result: {first:?}"
    );
    let (&refused_host, why) = first.refused_hosts.iter().next().expect("a refused host");
    assert_eq!(why, "moved=no why=store_full", "the --explain annotation");
    let health = d.health().lock().expect("health").clone();
    assert_eq!(health.refused.get("store_full"), Some(&1));
    assert_eq!(
        health.refusals.refusing().collect::<Vec<_>>(),
        ["store_full"]
    );
    assert_eq!(
        rig.cell(SRC).moves_refused().get("store_full"),
        Some(&1),
        "the source cell counts it by reason too"
    );
    // Inside the hold a second pass is answered from the recorded refusal: nothing runs.
    let again = d.pass().await.expect("pass");
    assert_eq!(again.committed, 0, "{again:?}");
    assert_eq!(
        rig.cell(SRC).moves_refused().get("store_full"),
        Some(&1),
        "no second transaction inside the hold"
    );
    // Room returns; after the hold (and a pass's quiet time) the same op id is tried anew.
    rig.store.put_limits(&limits(10)).await.expect("limits");
    tokio::time::sleep(INTERVAL + HOLD).await;
    let moved = d.pass().await.expect("pass");
    assert_eq!(moved.committed, 1, "the refused host moved: {moved:?}");
    assert!(moved.refused.is_empty(), "{moved:?}");
    assert_eq!(rig.assigned(refused_host).await, TGT);
    // OPS-2: one line when the refusals began, one when they cleared (director and cell).
    let began = log.lines_with("the store refuses moves (store_full)");
    assert_eq!(began.len(), 2, "director + cell: {began:?}");
    assert!(began.iter().all(|l| l.contains("WARN")), "{began:?}");
    let cleared = log.lines_with("the store no longer refuses moves (store_full)");
    assert_eq!(cleared.len(), 2, "director + cell: {cleared:?}");
    assert_eq!(
        d.health()
            .lock()
            .expect("health")
            .refusals
            .refusing()
            .count(),
        0
    );
}

#[tokio::test]
async fn ho_l4_a_full_store_refuses_by_name_and_the_host_moves_once_room_returns_sqlite() {
    a_full_store_refuses_by_name_and_the_host_moves_once_room_returns(Backend::Sqlite).await;
}

#[tokio::test]
async fn ho_l4_a_full_store_refuses_by_name_and_the_host_moves_once_room_returns_postgres() {
    a_full_store_refuses_by_name_and_the_host_moves_once_room_returns(Backend::Postgres).await;
}

/// HO-L4 with a short retention: the attempt record that filled the store ends (its desktop
/// registered at the target), an hour passes (the cells' and the director's clock), and the
/// director's next pass removes it and moves the refused host in the same pass.
async fn a_reap_makes_room_and_the_refused_host_moves(backend: Backend) {
    let mut rig = Rig::new(backend, "l4-reap").await;
    for cell in [SRC, TGT] {
        let mut cfg = rig.cell_config(cell, true);
        cfg.refusal_hold = HOLD;
        // The clock jumps an hour below: leases that outlast the jump keep both cells live
        // and serving (HO-L5 would stop a cell whose lease its own clock saw end).
        cfg.cell_lease = Duration::from_secs(3 * 3_600);
        rig.start_with(cfg).await;
    }
    let mut desks = vec![rig.desktop_at(1, SRC).await, rig.desktop_at(2, SRC).await];
    measure(&rig, &[1, 2]).await;
    rig.store.put_limits(&limits(1)).await.expect("limits");
    let d = Director::new(director_config(), rig.store.clone(), rig.clock.clone()).with_retention(
        Retention {
            attempt_retention_ms: MIN_ATTEMPT_RETENTION_MS,
            ..Retention::DEFAULT
        },
    );
    let first = d.pass().await.expect("pass");
    assert_eq!(
        (first.committed, first.refused.get("store_full")),
        (1, Some(&1)),
        "{first:?}"
    );
    let refused_host = *first.refused_hosts.keys().next().expect("a refused host");
    let moved = if refused_host == 1 { 2 } else { 1 };
    desks[usize::try_from(moved - 1).expect("index")]
        .wait_registered(TGT.0, Duration::from_secs(10))
        .await
        .expect("the moved desktop registers at the target");
    // Its registration there ends the record (no longer pending).
    let mut ended = false;
    for _ in 0..50 {
        if rig
            .store
            .rows()
            .await
            .expect("rows")
            .reservations
            .is_empty()
        {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ended, "the moved host's registration ended its record");
    // Nothing is old enough yet: the store stays full.
    let early = d.pass().await.expect("pass");
    assert_eq!(early.attempts_reaped, 0, "{early:?}");
    // An hour later the record is past the retention.
    rig.clock.advance(MIN_ATTEMPT_RETENTION_MS + 1_000);
    measure(&rig, &[refused_host]).await;
    let later = d.pass().await.expect("pass");
    assert_eq!(later.attempts_reaped, 1, "{later:?}");
    assert_eq!(
        later.committed, 1,
        "room returned in the same pass: {later:?}"
    );
    assert!(later.refused.is_empty(), "{later:?}");
    assert_eq!(rig.assigned(refused_host).await, TGT);
    for desk in desks {
        desk.stop().await;
    }
}

#[tokio::test]
async fn ho_l4_a_reap_makes_room_and_the_refused_host_moves_sqlite() {
    a_reap_makes_room_and_the_refused_host_moves(Backend::Sqlite).await;
}

#[tokio::test]
async fn ho_l4_a_reap_makes_room_and_the_refused_host_moves_postgres() {
    a_reap_makes_room_and_the_refused_host_moves(Backend::Postgres).await;
}
