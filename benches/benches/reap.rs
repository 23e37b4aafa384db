//! HO-L4 (issue #40: anything that touches a table gets a bench at N and 10·N): one reap batch
//! (`reap_attempts` with the director's default batch of 2,000) on a store holding N and 10·N
//! ended attempt records, every one old enough to go. On the SQL stores the pick reads the
//! index of migration 0008 (`recorded_at_ms, op_id`), so a batch should cost the same at both
//! sizes (PostgreSQL's plan, printed at each size, says where it does not: docs/PERFORMANCE.md,
//! "Reaping attempt history (HO-L4)"); the reference store (a `BTreeMap`, the model the SQL stores are diffed against) scans
//! and sorts every record on each reap, so its cost grows with the table by design.
//!
//! Each measured iteration is one reap at a fixed size: after it, outside the timing, the rows
//! it removed are put back as newer records (the SQL stores: a bulk `INSERT … SELECT`, the
//! limit shard's count raised to match; the reference: a fresh clone per iteration). On
//! PostgreSQL the removed rows' dead index entries sit at the front of the index the next pick
//! starts from; a `VACUUM ho_attempts` every 10 reaps (outside the timing) keeps that backlog
//! the same, at most 20,000 entries, at both sizes (autovacuum does that job in production).
//!
//! `cargo bench -p switchyard-benches --bench reap`
//!
//! Environment: `SWITCHYARD_BENCH_REAP_ROWS` (default `100000,1000000`) the table sizes;
//! `SWITCHYARD_BENCH_STORES` (`reference`, `sqlite`, `pg`, comma-separated; default all three);
//! `SWITCHYARD_TEST_PG_URL` (an admin URL) uses that PostgreSQL instead of starting a
//! throwaway cluster (as the adapters' tests do).
#![allow(clippy::print_stdout)] // The seeding times are printed beside criterion's lines.

#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_benches::handoff::{store_config, store_with_hosts, TARGET};
use switchyard_core::handoff::store::{AssignmentStore, StoreBounds, StoreConfig};
use switchyard_core::handoff::Incarnation;
use switchyard_core::MonoMs;

/// The director's default `--reap-batch`.
const BATCH: u32 = 2_000;
/// Records are recorded at 1, 2, … ms; a reap at `NOW` with `RETENTION_MS` may take any of them.
const RETENTION_MS: u64 = 3_600_000;
const NOW: MonoMs = MonoMs(1_000_000_000_000);
/// PostgreSQL: a `VACUUM ho_attempts` after this many reaps (see the module doc).
const VACUUM_EVERY: u32 = 10;

fn sizes() -> Vec<u64> {
    let text =
        std::env::var("SWITCHYARD_BENCH_REAP_ROWS").unwrap_or_else(|_| "100000,1000000".into());
    text.split(',')
        .map(|v| {
            v.trim().parse().unwrap_or_else(|_| {
                panic!("SWITCHYARD_BENCH_REAP_ROWS={text:?}: {v:?} is not a count")
            })
        })
        .collect()
}

fn selected(store: &str) -> bool {
    std::env::var("SWITCHYARD_BENCH_STORES")
        .map(|s| s.split(',').any(|k| k.trim() == store))
        .unwrap_or(true)
}

/// The bench stores' configuration with room for the largest table.
fn config() -> StoreConfig {
    let mut config = store_config();
    config.bounds = StoreBounds {
        max_attempt_rows: 16 * sizes().into_iter().max().unwrap_or(1),
        ..config.bounds
    };
    config
}

/// A reference store holding `rows` ended records (committed and registered), recorded at
/// 1..=`rows` ms. The store's fields are private: the records are written into its serialised
/// form, copied from one real committed-and-registered record.
fn reference_store(rows: u64) -> AssignmentStore {
    let (mut store, requests) = store_with_hosts(1);
    let out = store.run_transaction(MonoMs(2_000), &requests[0]);
    assert!(out.is_committed(), "{out:?}");
    store
        .register_control(
            MonoMs(2_000),
            requests[0].source.host,
            TARGET,
            Incarnation(1),
            true,
        )
        .expect("registers at the target");
    let mut json = serde_json::to_value(&store).expect("serialise the store");
    let attempts = json["attempts"].as_object_mut().expect("attempts map");
    let (_, template) = attempts.iter().next().expect("one attempt");
    let template = template.clone();
    attempts.clear();
    for r in 1..=rows {
        let mut row = template.clone();
        row["recorded_at"] = serde_json::json!(r);
        // An op id is a UUID (its text form is the map's key); these are distinct per record.
        attempts.insert(format!("{r:08x}-0000-5000-8000-{r:012x}"), row);
    }
    json["config"] = serde_json::to_value(config()).expect("config");
    let store: AssignmentStore = serde_json::from_value(json).expect("the seeded store");
    assert_eq!(store.attempts().count() as u64, rows);
    store
}

/// `INSERT … SELECT` of `count` ended records recorded at `first..first+count` ms, and the
/// limit shard 0's `attempt_rows` raised by as many (so the shards keep counting the rows).
async fn insert_rows(pool: &sqlx::AnyPool, postgres: bool, first: u64, count: u64) {
    let (first, last) = (first as i64, (first + count - 1) as i64);
    let rows = if postgres {
        "INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, src_incarnation, \
         src_generation, target, outcome, new_epoch, registration, recorded_at_ms) \
         SELECT md5(g::text)::uuid::text, g, 1, 1, 1, 1, 2, 'committed', 2, 'registered', g \
         FROM generate_series($1::bigint, $2::bigint) AS g"
    } else {
        "WITH RECURSIVE g(n) AS (SELECT $1 UNION ALL SELECT n + 1 FROM g WHERE n < $2) \
         INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, src_incarnation, \
         src_generation, target, outcome, new_epoch, registration, recorded_at_ms) \
         SELECT printf('%08x-0000-5000-8000-%012x', n, n), n, 1, 1, 1, 1, 2, 'committed', 2, \
         'registered', n FROM g"
    };
    let mut tx = pool.begin().await.expect("begin the seed");
    sqlx::query(rows)
        .bind(first)
        .bind(last)
        .execute(&mut *tx)
        .await
        .expect("seed the attempt rows");
    sqlx::query("UPDATE ho_limit_shards SET attempt_rows = attempt_rows + $1 WHERE shard = 0")
        .bind(last - first + 1)
        .execute(&mut *tx)
        .await
        .expect("count the seeded rows");
    tx.commit().await.expect("commit the seed");
}

/// A SQL store at `url` holding `rows` ended records, and a second pool on it for the seeding.
async fn sql_store(url: &str, postgres: bool, rows: u64) -> (SqlStore, sqlx::AnyPool) {
    let store = SqlStore::connect(url, StoreOptions::default())
        .await
        .expect("connect the SQL store");
    store.put_settings(&config(), true).await.expect("settings");
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.expect("seed pool");
    let start = Instant::now();
    let mut next = 1;
    while next <= rows {
        let count = (rows - next + 1).min(250_000);
        insert_rows(&pool, postgres, next, count).await;
        next += count;
    }
    if postgres {
        sqlx::query("VACUUM ANALYZE ho_attempts")
            .execute(&pool)
            .await
            .expect("vacuum");
    }
    println!(
        "reap: {} seeded with {rows} attempt rows in {:.1} s",
        if postgres { "PostgreSQL" } else { "SQLite" },
        start.elapsed().as_secs_f64()
    );
    if let Err(wrong) = store.audit_limits().await.expect("limit audit") {
        panic!("limit shards disagree with the seeded rows: {wrong}");
    }
    (store, pool)
}

/// PostgreSQL's plan for the reap's delete at this size (the statement of
/// `SqlStore::reap_attempts`, with its binds), printed beside the figures.
async fn print_plan(pool: &sqlx::AnyPool, rows: u64) {
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN DELETE FROM ho_attempts WHERE op_id IN (\
         SELECT op_id FROM ho_attempts WHERE recorded_at_ms <= $1 \
         AND (outcome <> 'committed' OR registration <> 'pending') \
         ORDER BY recorded_at_ms, op_id LIMIT $2) \
         AND (outcome <> 'committed' OR registration <> 'pending')",
    )
    .bind(i64::try_from(NOW.0 - RETENTION_MS).expect("cutoff"))
    .bind(i64::from(BATCH))
    .fetch_all(pool)
    .await
    .expect("explain");
    println!(
        "reap: PostgreSQL plan at {rows} rows:\n  {}",
        plan.join("\n  ")
    );
}

fn reap(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut group = c.benchmark_group("reap_batch_2000");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));

    if selected("reference") {
        for rows in sizes() {
            let store = reference_store(rows);
            group.bench_function(format!("reference_{rows}_rows"), |b| {
                b.iter_batched(
                    || store.clone(),
                    |mut s| {
                        let removed = s
                            .reap_attempts(black_box(NOW), RETENTION_MS, BATCH)
                            .expect("retention accepted");
                        assert_eq!(removed, BATCH);
                        s
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }

    let sqlite_dir = tempfile::Builder::new()
        .prefix("switchyard-bench-reap-")
        .tempdir()
        .expect("temp dir for the SQLite stores");
    for (name, postgres) in [("sqlite", false), ("pg", true)] {
        if !selected(name) {
            continue;
        }
        for rows in sizes() {
            let url = if postgres {
                rt.block_on(support_pg::fresh_db(&format!("reap{rows}")))
            } else {
                format!(
                    "sqlite://{}",
                    sqlite_dir.path().join(format!("reap-{rows}.db")).display()
                )
            };
            let (store, pool) = rt.block_on(sql_store(&url, postgres, rows));
            if postgres {
                rt.block_on(print_plan(&pool, rows));
            }
            let mut next = rows + 1;
            let mut reaps = 0u32;
            group.bench_function(format!("{name}_{rows}_rows"), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut took = Duration::ZERO;
                        for _ in 0..iters {
                            let start = Instant::now();
                            let removed = store
                                .reap_attempts(black_box(NOW), RETENTION_MS, BATCH)
                                .await
                                .expect("store answered")
                                .expect("retention accepted");
                            took += start.elapsed();
                            assert_eq!(removed, BATCH);
                            // The table back at `rows`, newer records than any left.
                            insert_rows(&pool, postgres, next, u64::from(BATCH)).await;
                            next += u64::from(BATCH);
                            reaps += 1;
                            if postgres && reaps % VACUUM_EVERY == 0 {
                                sqlx::query("VACUUM ho_attempts")
                                    .execute(&pool)
                                    .await
                                    .expect("vacuum");
                            }
                        }
                        took
                    })
                });
            });
            rt.block_on(async {
                let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ho_attempts")
                    .fetch_one(&pool)
                    .await
                    .expect("count");
                assert_eq!(left as u64, rows, "the table stayed at its size");
                if let Err(wrong) = store.audit_limits().await.expect("limit audit") {
                    panic!("limit shards disagree with the rows: {wrong}");
                }
                pool.close().await;
                store.close().await;
            });
        }
    }
    group.finish();
}

criterion_group!(benches, reap);
criterion_main!(benches);
