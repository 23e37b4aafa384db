//! SCALE-6 / SCALE-3 (the director's sweep at fleet size) on both stores:
//!
//! - two directors sharing a sweep never sweep the same hosts twice: one holds the sweep's
//!   lease and runs passes, the other stands by; when the holder stops renewing (a crash) the
//!   standby takes over after the lease lapses and goes on from the shared cursor; a holder
//!   that stops gracefully hands over at once; a holder whose lease was taken over cannot
//!   move the cursor;
//! - the wrapped sweep goes on from its cursor at the next pass, never back at its start;
//! - the cursor is not saved past a page while one of its requests is still in flight.
//!
//! The source cell is a stand-in that records the host of every request and answers `busy`
//! (every host stays eligible), so what reaches it is exactly what the directors examined.

mod support_pg;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::director::{Director, DirectorConfig, PassReport};
use switchyard_adapters::handoff::proto::{HandoffAnswer, HANDOFF_PATH};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::StoreConfig;
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::QuiescenceCounters;
use switchyard_core::handoff::{CellId, HostId};
use switchyard_core::handoff::{DirectorPolicy, DispatchLimits, PageCursor, ScanLimits};
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use tokio::sync::Semaphore;

const SRC: CellId = CellId(1);
const TGT: CellId = CellId(2);
/// Not a multiple of the page: the list's end is a short page, then the pass wraps.
const HOSTS: u64 = 18;
const PAGE: u32 = 4;
const PAGES: u32 = 2;
const LEASE_MS: u64 = 30_000;

#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

fn store_config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 3_600_000,
            host_cooldown_ms: 60_000,
        },
        max_in_flight_migrations: 100,
        rate_window_ms: 60_000,
        max_commits_per_window: 100,
        registration_timeout_ms: 30_000,
        bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
    }
}

/// A source cell that records each request's host and answers `busy`; a request for `hold`
/// waits for a permit of the returned semaphore first.
async fn busy_cell(hold: Option<u64>) -> (String, Arc<Mutex<Vec<u64>>>, Arc<Semaphore>) {
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let gate = Arc::new(Semaphore::new(0));
    let record = seen.clone();
    let wait = gate.clone();
    let app = Router::new().route(
        HANDOFF_PATH,
        post(move |body: axum::body::Bytes| {
            let record = record.clone();
            let wait = wait.clone();
            async move {
                let req: HandoffRequest = serde_json::from_slice(&body).expect("a request");
                record.lock().expect("lock").push(req.source.host.0);
                if Some(req.source.host.0) == hold {
                    let _permit = wait.acquire().await.expect("gate");
                }
                let reply = HandoffReply::Busy {
                    op_id: req.op_id,
                    counters: QuiescenceCounters {
                        client_conns: 1,
                        ..QuiescenceCounters::default()
                    },
                };
                axum::Json(HandoffAnswer::of(reply))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen, gate)
}

async fn open(backend: Backend, tag: &str) -> (SqlStore, Option<tempfile::TempDir>) {
    let opts = StoreOptions {
        txn_timeout: Duration::from_secs(10),
        ..StoreOptions::default()
    };
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("dir");
            let url = format!("sqlite://{}", dir.path().join("ho.db").display());
            (
                SqlStore::connect(&url, opts).await.expect("store"),
                Some(dir),
            )
        }
        Backend::Postgres => {
            let url = support_pg::fresh_db(tag).await;
            (SqlStore::connect(&url, opts).await.expect("store"), None)
        }
    }
}

/// Hosts 1..=HOSTS on the source, each with a fresh measurement towards the target.
async fn seed(store: &SqlStore, clock: &Clock, cell_url: &str) {
    store
        .put_settings(&store_config(), true)
        .await
        .expect("settings");
    let now = clock.now();
    for (cell, url) in [(SRC, cell_url), (TGT, "http://127.0.0.1:9")] {
        store
            .start_cell(cell, 1_000, true, url, url, now, 3_600_000)
            .await
            .expect("cell")
            .expect("lease");
    }
    let m = Measurement {
        measured_at: now,
        current_rtt_ms: 120,
        target_rtt_ms: 20,
    };
    for h in 1..=HOSTS {
        store
            .insert_host(HostId(h), SRC, true)
            .await
            .expect("host")
            .expect("host");
        store
            .put_measurement(HostId(h), TGT, &m)
            .await
            .expect("measurement");
    }
}

/// A director process of the sweep `sweep` (each call: a new process, its own holder id).
fn director(store: &SqlStore, clock: &Clock, sweep: &str, dispatch: DispatchLimits) -> Director {
    Director::new(
        DirectorConfig {
            id: sweep.to_owned(),
            policy: DirectorPolicy {
                enabled: true,
                cohort_percent: 100,
                policy: store_config().policy,
            },
            limits: ScanLimits {
                page_size: PAGE,
                max_pages: PAGES,
                max_dispatch: 1_000,
            },
            max_failures: 1,
            request_timeout: Duration::from_secs(20),
            retries: 0,
            secret: Secret::new(b"scale-6-internal-secret-0123456789", "internal").expect("secret"),
            interval: Duration::from_secs(1),
            dispatch,
        },
        store.clone(),
        clock.clone(),
    )
    .with_sweep_lease_ms(LEASE_MS)
}

fn drain(seen: &Arc<Mutex<Vec<u64>>>) -> Vec<u64> {
    std::mem::take(&mut *seen.lock().expect("lock"))
}

fn ran(r: &PassReport) -> bool {
    r.standby.is_none() && r.pages > 0
}

async fn two_directors_never_sweep_twice(backend: Backend, tag: &str) {
    let (store, _dir) = open(backend, tag).await;
    let clock = Clock::default();
    let (url, seen, _gate) = busy_cell(None).await;
    seed(&store, &clock, &url).await;
    let a = director(&store, &clock, "sweep", DispatchLimits::SEQUENTIAL);
    let b = director(&store, &clock, "sweep", DispatchLimits::SEQUENTIAL);

    // Both run passes, interleaved, for one sweep's worth of passes (18 hosts, 8 a pass):
    // only one of them reads pages; every host reaches the cell once.
    let mut sent = Vec::new();
    let mut standbys = 0;
    for _ in 0..3 {
        for d in [&a, &b] {
            let r = d.pass().await.expect("pass");
            if r.standby.is_some() {
                standbys += 1;
                assert_eq!(r.pages, 0, "a standby reads nothing: {r:?}");
            }
            sent.extend(drain(&seen));
        }
    }
    assert_eq!(standbys, 3, "one of the two stood by at every round");
    assert_eq!(
        sent,
        (1..=HOSTS).chain(1..=4).collect::<Vec<_>>(),
        "one sweep: every host once, in order, then the next sweep begins (no host twice)"
    );

    // The holder crashes (stops renewing). Until its lease lapses the other stands by; then
    // it takes over from the shared cursor (host 4), not from its own start.
    let holder = if a.pass().await.expect("pass").standby.is_none() {
        &a
    } else {
        &b
    };
    let other = if std::ptr::eq(holder, &a) { &b } else { &a };
    drain(&seen);
    let cursor = store.load_cursor("sweep").await.expect("cursor");
    let r = other.pass().await.expect("pass");
    assert!(r.standby.is_some(), "the lease has not lapsed: {r:?}");
    clock.advance(LEASE_MS + 1);
    let r = other.pass().await.expect("pass");
    assert!(
        ran(&r),
        "the standby took over once the lease lapsed: {r:?}"
    );
    let after = cursor.after.map_or(0, |h| h.0);
    assert_eq!(
        drain(&seen).first().copied(),
        Some(after % HOSTS + 1),
        "the takeover goes on from the shared cursor"
    );
    let epoch = r.lease_epoch.expect("epoch");

    // The old holder comes back: it stands by (the new holder's lease is live) and never
    // moves the cursor.
    let before = store.load_cursor("sweep").await.expect("cursor");
    let r = holder.pass().await.expect("pass");
    assert!(r.standby.is_some(), "the old holder stands by: {r:?}");
    assert_eq!(store.load_cursor("sweep").await.expect("cursor"), before);
    assert!(drain(&seen).is_empty());

    // A graceful stop hands the sweep over at once (no wait for the lease).
    other.release_lease().await;
    let r = holder.pass().await.expect("pass");
    assert!(
        ran(&r),
        "the released lease is taken at the next pass: {r:?}"
    );
    assert_eq!(r.lease_epoch, Some(epoch + 1));
    store.close().await;
}

async fn wrapped_sweep_goes_on_from_its_cursor(backend: Backend, tag: &str) {
    let (store, _dir) = open(backend, tag).await;
    let clock = Clock::default();
    let (url, seen, _gate) = busy_cell(None).await;
    seed(&store, &clock, &url).await;
    let d = director(&store, &clock, "wrap", DispatchLimits::SEQUENTIAL);
    // 8 hosts a pass: 1..=8, 9..=16, then 17, 18 (the short page: the end) and the wrap 1..=4.
    for _ in 0..2 {
        d.pass().await.expect("pass");
    }
    drain(&seen);
    let r = d.pass().await.expect("the wrapping pass");
    assert_eq!(drain(&seen), vec![17, 18, 1, 2, 3, 4]);
    assert_eq!((r.sweeps_completed, r.cursor), (1, Some(4)));
    // The next pass goes on after 4, not back at 1.
    d.pass().await.expect("pass");
    assert_eq!(
        drain(&seen),
        (5..=12).collect::<Vec<_>>(),
        "the wrapped sweep goes on from its cursor"
    );
    store.close().await;
}

async fn cursor_waits_for_its_page(backend: Backend, tag: &str) {
    let (store, _dir) = open(backend, tag).await;
    let clock = Clock::default();
    // Host 2's request is held by the cell until the test lets it go.
    let (url, seen, gate) = busy_cell(Some(2)).await;
    seed(&store, &clock, &url).await;
    let concurrent = DispatchLimits {
        max_in_flight: 8,
        max_in_flight_per_cell: 8,
        max_pages_ahead: 2,
        ..DispatchLimits::DEFAULT
    };
    let d = director(&store, &clock, "page", concurrent);
    let pass = tokio::spawn({
        let d = d.clone();
        async move { d.pass().await }
    });
    // Both pages' requests went out (1..=8); only host 2's is still in flight.
    for _ in 0..200 {
        if seen.lock().expect("lock").len() == 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(seen.lock().expect("lock").len(), 8, "both pages dispatched");
    // Give the director every chance to save a cursor it must not save yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.load_cursor("page").await.expect("cursor"),
        PageCursor { after: None },
        "no cursor past the first page while its request for host 2 is in flight"
    );
    gate.add_permits(1);
    let r = pass.await.expect("task").expect("pass");
    assert_eq!(r.cursor, Some(8), "{r:?}");
    assert_eq!(
        store.load_cursor("page").await.expect("cursor"),
        PageCursor {
            after: Some(HostId(8))
        }
    );
    store.close().await;
}

macro_rules! both_stores {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $body(Backend::Sqlite, stringify!($name)).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $body(Backend::Postgres, stringify!($name)).await;
            }
        }
    };
}

both_stores!(
    scale_6_two_directors_never_sweep_the_same_hosts_twice,
    two_directors_never_sweep_twice
);
both_stores!(
    scale_3_the_wrapped_sweep_goes_on_from_its_cursor,
    wrapped_sweep_goes_on_from_its_cursor
);
both_stores!(
    ho_l3_scale_3_cursor_not_saved_before_its_page_ends,
    cursor_waits_for_its_page
);
