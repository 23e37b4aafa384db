//! HO-L3 / SCALE-6 over real sockets: one unreachable source cell holds up only its own hosts.
//! Two source cells: cell 1 accepts connections and never answers, cell 2 answers `busy` at
//! once; hosts alternate between them. One director pass must deliver every one of cell 2's
//! requests well within one request timeout (not one timeout per cell-1 host before it), end
//! within about one request timeout, show cell 1 backed off, and save its cursor only past
//! pages whose dispatches all ended.

mod support_pg;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::Router;
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::director::{Director, DirectorConfig};
use switchyard_adapters::handoff::proto::{HandoffAnswer, HANDOFF_PATH};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::StoreConfig;
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::QuiescenceCounters;
use switchyard_core::handoff::{
    CellFailure, DirectorPolicy, DispatchLimits, PageCursor, ScanLimits,
};
use switchyard_core::handoff::{CellId, HostId};
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};

const DARK: CellId = CellId(1);
const LIVE: CellId = CellId(2);
const TGT: CellId = CellId(3);
const HOSTS: u64 = 12;
const TIMEOUT: Duration = Duration::from_millis(1_500);

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

/// A source cell that records when each request's host arrived and answers `busy`.
async fn busy_cell() -> (String, Arc<Mutex<Vec<(u64, Instant)>>>) {
    let seen: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let record = seen.clone();
    let app = Router::new().route(
        HANDOFF_PATH,
        post(move |body: axum::body::Bytes| {
            let record = record.clone();
            async move {
                let req: HandoffRequest = serde_json::from_slice(&body).expect("a request");
                record
                    .lock()
                    .expect("lock")
                    .push((req.source.host.0, Instant::now()));
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
    (url, seen)
}

/// A source cell that accepts every connection and never answers (a dark process).
async fn dark_cell() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    url
}

async fn sqlite() -> (SqlStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("ho.db").display());
    let opts = StoreOptions {
        txn_timeout: Duration::from_secs(10),
        ..StoreOptions::default()
    };
    (SqlStore::connect(&url, opts).await.expect("store"), dir)
}

/// Hosts 1..=HOSTS, odd ones on the dark cell, even ones on the live cell, each with a fresh
/// measurement towards the target.
async fn seed(store: &SqlStore, clock: &Clock, dark: &str, live: &str) {
    store
        .put_settings(&store_config(), true)
        .await
        .expect("settings");
    let now = clock.now();
    for (cell, url) in [(DARK, dark), (LIVE, live), (TGT, "http://127.0.0.1:9")] {
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
        let cell = if h % 2 == 1 { DARK } else { LIVE };
        store
            .insert_host(HostId(h), cell, true)
            .await
            .expect("host")
            .expect("host");
        store
            .put_measurement(HostId(h), TGT, &m)
            .await
            .expect("measurement");
    }
}

fn director(store: &SqlStore, clock: &Clock) -> Director {
    Director::new(
        DirectorConfig {
            id: "d-l3".into(),
            policy: DirectorPolicy {
                enabled: true,
                cohort_percent: 100,
                policy: store_config().policy,
            },
            limits: ScanLimits {
                page_size: 4,
                max_pages: 3,
                max_dispatch: 1_000,
            },
            max_failures: 100,
            request_timeout: TIMEOUT,
            retries: 0,
            secret: Secret::new(b"ho-l3-internal-secret-0123456789", "internal").expect("secret"),
            interval: Duration::from_secs(1),
            dispatch: DispatchLimits {
                max_in_flight: 8,
                max_in_flight_per_cell: 2,
                max_pages_ahead: 4,
                backoff_min_ms: 60_000,
                backoff_max_ms: 60_000,
            },
        },
        store.clone(),
        clock.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l3_scale_6_fleet_not_stalled_by_one_unreachable_cell() {
    let (store, _dir) = sqlite().await;
    let clock = Clock::default();
    let (live, seen) = busy_cell().await;
    let dark = dark_cell().await;
    seed(&store, &clock, &dark, &live).await;
    let d = director(&store, &clock);

    let began = Instant::now();
    let report = d.pass().await.expect("pass");
    let took = began.elapsed();
    let seen = seen.lock().expect("lock").clone();
    let mut hosts: Vec<u64> = seen.iter().map(|(h, _)| *h).collect();
    hosts.sort_unstable();
    assert_eq!(
        hosts,
        (2..=HOSTS).step_by(2).collect::<Vec<_>>(),
        "every host of the live cell was sent, once"
    );
    let last = seen
        .iter()
        .map(|(_, at)| at.duration_since(began))
        .max()
        .unwrap_or_default();
    assert!(
        last < TIMEOUT / 2,
        "the live cell's requests wait for no request to the dark cell: the last arrived \
         {last:?} after the pass began (one request timeout is {TIMEOUT:?})"
    );
    assert!(
        took < TIMEOUT * 2,
        "the pass ends within about one request timeout, not one per dark host: {took:?}"
    );
    // The dark cell: its first two requests (the per-cell bound) timed out, the rest of its
    // hosts were not sent; it shows as stuck, once, with its reason.
    assert_eq!(report.failed, 2, "{report:?}");
    assert_eq!(report.deferred, 6, "{report:?}");
    assert_eq!(report.cell_backed_off, 4, "{report:?}");
    assert_eq!(report.cells_stuck, vec![DARK.0], "{report:?}");
    let health = d.health().lock().expect("health").clone();
    assert_eq!(
        health.stuck.get(&DARK).map(|(why, _)| *why),
        Some(CellFailure::Timeout)
    );
    assert_eq!(health.failures.get(&(DARK, CellFailure::Timeout)), Some(&2));
    assert!(!health.stuck.contains_key(&LIVE));
    // Every page's dispatches ended: the cursor is past all three pages.
    assert_eq!(
        store.load_cursor("d-l3").await.expect("cursor"),
        PageCursor {
            after: Some(HostId(12))
        }
    );
    store.close().await;
}
