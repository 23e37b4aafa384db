//! SCALE-3 (director sweep) on both stores: a director pass over more hosts than one pass
//! covers, with a page read failing midway, resumes on the next pass after the last page it
//! completed (never from the start of the failed pass), and the sweep examines every host.
//!
//! The source cell is a stand-in that records the host of every request it receives and
//! answers `busy`: every host is eligible and stays eligible, so what reaches the stand-in is
//! exactly what the director examined, and busy answers must never spend the failure budget
//! (HO-S2).

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
use switchyard_core::handoff::{DirectorPolicy, PageCursor, ScanLimits};
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};

const SRC: CellId = CellId(1);
const TGT: CellId = CellId(2);
const HOSTS: u64 = 30;
const PAGE: u32 = 4;
const PAGES: u32 = 3;

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

/// A source cell that records each request's host and answers `busy`.
async fn busy_cell() -> (String, Arc<Mutex<Vec<u64>>>) {
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let record = seen.clone();
    let app = Router::new().route(
        HANDOFF_PATH,
        post(move |body: axum::body::Bytes| {
            let record = record.clone();
            async move {
                let req: HandoffRequest = serde_json::from_slice(&body).expect("a request");
                record.lock().expect("lock").push(req.source.host.0);
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

fn director(store: &SqlStore, clock: &Clock, tag: &str) -> Director {
    Director::new(
        DirectorConfig {
            id: format!("d-{tag}"),
            policy: DirectorPolicy {
                enabled: true,
                cohort_percent: 100,
                policy: store_config().policy,
            },
            limits: ScanLimits {
                page_size: PAGE,
                max_pages: PAGES,
                // Never the binding budget here: pages are.
                max_dispatch: 1_000,
            },
            max_failures: 1,
            request_timeout: Duration::from_secs(5),
            retries: 0,
            secret: Secret::new(b"scale-3-internal-secret-0123456789", "internal").expect("secret"),
            interval: Duration::from_secs(1),
            dispatch: switchyard_core::handoff::DispatchLimits::SEQUENTIAL,
        },
        store.clone(),
        clock.clone(),
    )
}

/// The hosts the stand-in cell received since the last call.
fn drain(seen: &Arc<Mutex<Vec<u64>>>) -> Vec<u64> {
    std::mem::take(&mut *seen.lock().expect("lock"))
}

fn cursor(after: u64) -> PageCursor {
    PageCursor {
        after: Some(HostId(after)),
    }
}

fn busy_only(r: &PassReport) {
    assert_eq!(r.failed, 0, "busy is never a dispatch failure: {r:?}");
    assert!(!r.budget_exhausted, "{r:?}");
    assert_eq!(r.deferred, r.dispatched, "every answer was busy: {r:?}");
}

async fn failed_page_resumes_after_the_last_completed_page(backend: Backend, tag: &str) {
    let (store, _dir) = open(backend, tag).await;
    let clock = Clock::default();
    let (url, seen) = busy_cell().await;
    seed(&store, &clock, &url).await;
    let d = director(&store, &clock, tag);

    // Pass 1: three full pages, hosts 1..=12.
    let r = d.pass().await.expect("pass 1");
    busy_only(&r);
    assert_eq!(drain(&seen), (1..=12).collect::<Vec<_>>());
    assert_eq!((r.pages, r.cursor, r.sweeps_completed), (3, Some(12), 0));
    let id = format!("d-{tag}");
    assert_eq!(store.load_cursor(&id).await.expect("cursor"), cursor(12));

    // Pass 2: its first page (13..=16) completes, its second page read fails.
    store.faults().fail_nth_page_read(2);
    assert!(d.pass().await.is_err(), "the failed page fails the pass");
    assert_eq!(store.faults().injected(), 1);
    assert_eq!(drain(&seen), (13..=16).collect::<Vec<_>>());
    assert_eq!(
        store.load_cursor(&id).await.expect("cursor"),
        cursor(16),
        "saved after the page that completed"
    );

    // Pass 3 starts with the very page that failed (17..), not with pass 2's start (13..).
    busy_only(&d.pass().await.expect("pass 3"));
    let third = drain(&seen);
    assert_eq!(
        third,
        (17..=28).collect::<Vec<_>>(),
        "the pass after a failed page resumes after the last completed page"
    );

    // Pass 4 reaches the end (29, 30: a short page), wraps, and goes on from the start; no
    // host twice in one pass. Then the sweep goes on until it is back where it began.
    let r = d.pass().await.expect("pass 4");
    busy_only(&r);
    let fourth = drain(&seen);
    assert_eq!(fourth, vec![29, 30, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!((r.pages, r.cursor, r.sweeps_completed), (3, Some(8), 1));
    let mut examined: Vec<u64> = third.iter().chain(&fourth).copied().collect();
    for n in 5..=6 {
        busy_only(&d.pass().await.expect("a later pass"));
        let this = drain(&seen);
        let mut sorted = this.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), this.len(), "pass {n} examined a host twice");
        examined.extend(this);
    }
    examined.sort_unstable();
    examined.dedup();
    assert_eq!(
        examined,
        (1..=HOSTS).collect::<Vec<_>>(),
        "a sweep from the failed page on examines every host"
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
    scale_3_a_failed_page_resumes_after_the_last_completed_page_and_the_sweep_covers_every_host,
    failed_page_resumes_after_the_last_completed_page
);
