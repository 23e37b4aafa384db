//! The SQL assignment transaction (HO-S4) under concurrency: the commit path of
//! `SqlStore::run_transaction` on SQLite (a file in a temp dir) and on PostgreSQL (a throwaway
//! cluster, started like the adapters' tests do), with 1, 8 and 32 concurrent workers over
//! 1,000 hosts. Each worker is a tokio task over one shared store (one pool); the workers pull
//! distinct hosts from a shared queue and run one handoff transaction each.
//!
//! Reported per store x workers: throughput (tx/s), p50 / p99 latency of one transaction
//! (pool acquire included), and, checked afterwards from the rows, lost and duplicated
//! migrations (every host must have moved exactly once). Every configuration starts from a
//! freshly seeded database.
//!
//! A plain `harness = false` main (criterion's per-iteration model does not fit N concurrent
//! workers): `cargo bench -p switchyard-benches --bench sql_handoff`.
//!
//! Environment: `SWITCHYARD_TEST_PG_URL` (an admin URL) uses that server instead of starting
//! one; `SWITCHYARD_TEST_PG_DURABLE=1` starts the cluster with PostgreSQL's durable defaults
//! (`fsync`, `synchronous_commit`, `full_page_writes` on) instead of the throwaway settings;
//! `SWITCHYARD_BENCH_STORES` (`sqlite`, `pg` or `sqlite,pg`, the default) selects the stores;
//! `SWITCHYARD_BENCH_WORKERS` (default `1,8,32`) the worker counts; `SWITCHYARD_BENCH_RESIDENTS`
//! (default 0) seeds that many more hosts on the target cell, which stay there (the cost of a
//! commit must not grow with the hosts a cell holds).
#![allow(clippy::print_stdout)] // A bench main: its report is the table on stdout.

#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::Row;
use switchyard_adapters::handoff::store::{SqlStore, StoreFailure, StoreOptions};
use switchyard_benches::handoff::{cell_row, measurement, store_config, SOURCE, TARGET};
use switchyard_core::handoff::store::TxnOutcome;
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::HostId;
use switchyard_core::MonoMs;

const HOSTS: u64 = 1_000;
const WORKERS: &str = "1,8,32";

/// A bench setting from the environment (`default` when unset); a value that does not parse
/// stops the bench with the variable's name.
fn setting<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_owned());
    text.split(',')
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}={text:?}: {v:?} is not a count"))
        })
        .collect()
}
const NOW: MonoMs = MonoMs(2_000);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "SQLite",
            Kind::Postgres => "PostgreSQL",
        }
    }
}

#[derive(Debug)]
struct Report {
    kind: Kind,
    workers: usize,
    committed: usize,
    other: usize,
    /// `Unavailable` answers retried (latency includes them).
    retries: u64,
    tx_per_s: f64,
    p50: Duration,
    p99: Duration,
    lost: u64,
    duplicated: u64,
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(run());
}

async fn run() {
    let stores = std::env::var("SWITCHYARD_BENCH_STORES").unwrap_or_else(|_| "sqlite,pg".into());
    let kinds: Vec<Kind> = stores
        .split(',')
        .filter_map(|s| match s.trim() {
            "sqlite" => Some(Kind::Sqlite),
            "pg" | "postgres" => Some(Kind::Postgres),
            _ => None,
        })
        .collect();
    let sqlite_dir = tempfile::Builder::new()
        .prefix("switchyard-bench-sqlite-")
        .tempdir()
        .expect("temp dir for the SQLite stores");
    let workers: Vec<usize> = setting("SWITCHYARD_BENCH_WORKERS", WORKERS);
    let residents = setting::<u64>("SWITCHYARD_BENCH_RESIDENTS", "0")
        .first()
        .copied()
        .unwrap_or(0);
    println!(
        "sql_handoff: {HOSTS} hosts, one committed handoff transaction per host, \
         {residents} hosts resident on the target, {} cores",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    if kinds.contains(&Kind::Postgres) {
        pg_settings().await;
    }
    let mut reports = Vec::new();
    for kind in kinds {
        for (n, workers) in workers.iter().copied().enumerate() {
            let url = match kind {
                Kind::Sqlite => format!(
                    "sqlite://{}",
                    sqlite_dir.path().join(format!("store-{n}.db")).display()
                ),
                Kind::Postgres => support_pg::fresh_db(&format!("bench{workers}")).await,
            };
            reports.push(configuration(kind, &url, workers, residents).await);
        }
    }
    println!();
    println!(
        "| store      | workers |   tx/s | p50 (ms) | p99 (ms) | committed | retried | lost | duplicated |"
    );
    println!(
        "|------------|--------:|-------:|---------:|---------:|----------:|--------:|-----:|-----------:|"
    );
    for r in &reports {
        println!(
            "| {:<10} | {:>7} | {:>6.0} | {:>8.2} | {:>8.2} | {:>9} | {:>7} | {:>4} | {:>10} |",
            r.kind.name(),
            r.workers,
            r.tx_per_s,
            ms(r.p50),
            ms(r.p99),
            r.committed,
            r.retries,
            r.lost,
            r.duplicated
        );
    }
    let bad: Vec<&Report> = reports
        .iter()
        .filter(|r| r.lost != 0 || r.duplicated != 0 || r.other != 0)
        .collect();
    assert!(
        bad.is_empty(),
        "lost, duplicated or refused migrations: {bad:?}"
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// The server settings that matter for commit latency, printed so the table says what it
/// measured.
async fn pg_settings() {
    let admin = support_pg::admin_url();
    let pool = sqlx::PgPool::connect(&admin)
        .await
        .expect("connect to the bench PostgreSQL");
    let mut line = String::from("PostgreSQL:");
    for name in [
        "server_version",
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "max_connections",
        "shared_buffers",
    ] {
        let value: String = sqlx::query_scalar(&format!("SHOW {name}"))
            .fetch_one(&pool)
            .await
            .expect("SHOW setting");
        line.push_str(&format!(" {name}={value}"));
    }
    println!("{line}");
    pool.close().await;
}

async fn configuration(kind: Kind, url: &str, workers: usize, residents: u64) -> Report {
    let opts = StoreOptions {
        max_connections: u32::try_from(workers).expect("worker count"),
        ..StoreOptions::default()
    };
    let store = SqlStore::connect(url, opts)
        .await
        .expect("connect the SQL store");
    let requests = seed(&store, residents).await;

    let queue = Arc::new(Mutex::new(
        requests.iter().copied().collect::<VecDeque<_>>(),
    ));
    let start = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let store = store.clone();
            let queue = Arc::clone(&queue);
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let next = queue.lock().expect("queue lock").pop_front();
                    let Some(request) = next else { break };
                    let t = Instant::now();
                    // `Unavailable` (nothing ran: SQLite's busy timeout, pool acquire) is
                    // retried with the same request, as a source would; the op id makes the
                    // retry idempotent. Anything else ends the bench.
                    let mut retries = 0u64;
                    let outcome = loop {
                        match store.run_transaction(NOW, &request).await {
                            Err(StoreFailure::Unavailable(_)) => retries += 1,
                            other => break other.expect("store answered"),
                        }
                    };
                    done.push((t.elapsed(), outcome, retries));
                }
                done
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(requests.len());
    let mut committed = 0;
    let mut other = 0;
    let mut retries = 0;
    for task in tasks {
        for (latency, outcome, r) in task.await.expect("worker task") {
            latencies.push(latency);
            retries += r;
            match outcome {
                TxnOutcome::Committed { target, .. } if target == TARGET => committed += 1,
                _ => other += 1,
            }
        }
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    let (lost, duplicated) = verify(url, &requests).await;
    // HO-S4: the limit shards count exactly the rows, and no token outran its room.
    if let Err(wrong) = store.audit_limits().await.expect("limit audit") {
        panic!("limit shards disagree with the rows: {wrong}");
    }
    store.close().await;
    let report = Report {
        kind,
        workers,
        committed,
        other,
        retries,
        tx_per_s: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 50),
        p99: percentile(&latencies, 99),
        lost,
        duplicated,
    };
    println!(
        "{:<10} {:>2} workers: {:>6.0} tx/s, p50 {:.2} ms, p99 {:.2} ms, {} committed, \
         {} other, {} unavailable-retried, {} lost, {} duplicated",
        kind.name(),
        workers,
        report.tx_per_s,
        ms(report.p50),
        ms(report.p99),
        committed,
        other,
        retries,
        lost,
        duplicated
    );
    report
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (sorted.len() * p).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Two capable cells with room for every host, limits that never throttle, `HOSTS` hosts on
/// the source cell and `residents` on the target; one request per source host (the authority
/// the store returned).
async fn seed(store: &SqlStore, residents: u64) -> Vec<HandoffRequest> {
    store
        .put_settings(&store_config(), true)
        .await
        .expect("settings");
    let capacity = u32::try_from(HOSTS * 2 + residents).expect("capacity");
    for cell in [SOURCE, TARGET] {
        store
            .upsert_cell(cell, cell_row(capacity))
            .await
            .expect("cell write")
            .expect("cell accepted");
    }
    let mut requests = Vec::with_capacity(HOSTS as usize);
    for h in 0..HOSTS {
        let authority = store
            .insert_host(HostId(h), SOURCE, true)
            .await
            .expect("host write")
            .expect("host accepted");
        requests.push(HandoffRequest::new(authority, TARGET, 100, measurement()));
    }
    for h in 0..residents {
        store
            .insert_host(HostId(HOSTS + h), TARGET, true)
            .await
            .expect("host write")
            .expect("host accepted");
    }
    requests
}

/// From the rows: `lost` = hosts that did not end on the target with exactly one epoch step,
/// or whose op id has no committed attempt row; `duplicated` = extra attempt rows per op id or
/// per host, and hosts moved more than once.
async fn verify(url: &str, requests: &[HandoffRequest]) -> (u64, u64) {
    let pool = sqlx::AnyPool::connect(url)
        .await
        .expect("connect for the row checks");
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            let row = sqlx::query(sql)
                .fetch_one(&pool)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            u64::try_from(row.try_get::<i64, _>(0).expect("count column")).expect("count")
        }
    };
    let hosts = u64::try_from(requests.len()).expect("host count");
    let attempts = count("SELECT COUNT(*) FROM ho_attempts").await;
    let distinct_ops = count("SELECT COUNT(DISTINCT op_id) FROM ho_attempts").await;
    let distinct_hosts = count("SELECT COUNT(DISTINCT host) FROM ho_attempts").await;
    let moved_once =
        count("SELECT COUNT(*) FROM ho_assignments WHERE cell = 2 AND epoch = 2").await;
    let moved_more = count("SELECT COUNT(*) FROM ho_assignments WHERE epoch > 2").await;
    let reservations = count("SELECT COUNT(*) FROM ho_reservations").await;
    let mut missing_ops = 0;
    for request in requests {
        let row = sqlx::query(
            "SELECT COUNT(*) FROM ho_attempts WHERE op_id = $1 AND outcome = 'committed' \
             AND target = $2",
        )
        .bind(request.op_id.0.hyphenated().to_string())
        .bind(i64::from(request.target.0))
        .fetch_one(&pool)
        .await
        .expect("attempt row check");
        if row.try_get::<i64, _>(0).expect("count column") != 1 {
            missing_ops += 1;
        }
    }
    pool.close().await;
    assert_eq!(
        reservations, moved_once,
        "one reservation per committed move"
    );
    let lost = hosts.saturating_sub(moved_once) + missing_ops;
    let duplicated = (attempts - distinct_ops) + (attempts - distinct_hosts) + moved_more;
    (lost, duplicated)
}
