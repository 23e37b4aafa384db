//! SCALE-3: the director's page query costs the same at any position in the sweep. On
//! PostgreSQL, over 20,000 hosts seeded with `generate_series`, `EXPLAIN (ANALYZE, BUFFERS)`
//! of the first, a middle and a late page: no `SubPlan` (no subquery per row), no scan of a
//! per-host table that reads more than about a page of rows (an `OFFSET`, or a join reading a
//! table from its first row up to the cursor, would read thousands), and a late page touches
//! about the buffers the first one does. On SQLite: the host list is searched by its key,
//! never scanned, and no correlated subquery. Work is counted (rows, buffers), never timed.

mod support_pg;

use std::time::Duration;

use sqlx::{Connection, Executor, PgConnection};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::StoreConfig;
use switchyard_core::handoff::HostId;
use switchyard_core::handoff::PageQuery;
use switchyard_core::handoff::PolicyConfig;

const HOSTS: u64 = 20_000;
const LIMIT: u32 = 100;
/// The tables with a row per host: a page may read about a page of each, never more.
const PER_HOST: [&str; 3] = ["ho_assignments", "ho_measurements", "ho_cooldowns"];

fn page(after: Option<u64>) -> PageQuery {
    PageQuery {
        after: after.map(HostId),
        through: None,
        limit: LIMIT,
    }
}

/// `rows × loops` of an `EXPLAIN ANALYZE` node line, if it has actual figures.
fn rows_read(line: &str) -> Option<u64> {
    let actual = &line[line.find("(actual ")?..];
    let num = |key: &str| -> Option<u64> {
        let tail = &actual[actual.find(key)? + key.len()..];
        tail.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Some(num("rows=")? * num("loops=")?)
}

/// The top node's `shared hit` (+ `read`) buffers.
fn buffers(plan: &[String]) -> u64 {
    let line = plan
        .iter()
        .find(|l| l.trim_start().starts_with("Buffers:"))
        .unwrap_or_else(|| panic!("no Buffers line in {plan:#?}"));
    ["hit=", "read="]
        .iter()
        .filter_map(|k| {
            let tail = &line[line.find(k)? + k.len()..];
            tail.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

fn check_plan(plan: &[String], what: &str) {
    let text = plan.join("\n");
    assert!(
        !text.contains("SubPlan"),
        "{what}: a subquery per row:\n{text}"
    );
    let mut scans = 0;
    for (n, line) in plan.iter().enumerate() {
        if !line.contains(" Scan ") || !PER_HOST.iter().any(|t| line.contains(&format!(" on {t}")))
        {
            continue;
        }
        scans += 1;
        let read = rows_read(line).unwrap_or_else(|| panic!("{what}: no actual rows in {line}"));
        assert!(
            read <= 2 * u64::from(LIMIT),
            "{what}: line {n} reads {read} rows for a page of {LIMIT}:\n{text}"
        );
    }
    assert!(
        scans >= PER_HOST.len(),
        "{what}: every per-host table is read:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_3_a_late_page_reads_what_the_first_one_does_no_subplan_no_offset_postgres() {
    let url = support_pg::fresh_db("scale3plan").await;
    let opts = StoreOptions {
        txn_timeout: Duration::from_secs(30),
        ..StoreOptions::default()
    };
    let store = SqlStore::connect(&url, opts).await.expect("store");
    let config = StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 60_000,
        },
        max_in_flight_migrations: 100,
        rate_window_ms: 60_000,
        max_commits_per_window: 100,
        registration_timeout_ms: 30_000,
        bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
    };
    store.put_settings(&config, true).await.expect("settings");
    // 20 cells, their load rows on every shard, 20,000 hosts with a measurement each and one
    // in ten cooling down; then fresh statistics, as a live store has.
    let mut conn = PgConnection::connect(&url).await.expect("connect");
    conn.execute(
        format!(
            "INSERT INTO ho_cells (cell, capacity, handoff_capable, incarnation) \
             SELECT c, 1000000, 1, 1 FROM generate_series(1, 20) c; \
             INSERT INTO ho_cell_load (cell, shard, hosts, tokens) \
             SELECT c, s.shard, 0, 0 FROM generate_series(1, 20) c, ho_limit_shards s; \
             INSERT INTO ho_assignments (host, cell, epoch, incarnation, generation, \
             desktop_capable) SELECT h, h % 20 + 1, 1, 1, 1, 1 \
             FROM generate_series(0, {last}) h; \
             UPDATE ho_cell_load l SET hosts = x.n FROM (SELECT cell, COUNT(*) AS n \
             FROM ho_assignments GROUP BY cell) x WHERE l.cell = x.cell AND l.shard = 0; \
             UPDATE ho_limit_shards SET hosts = (SELECT COUNT(*) FROM ho_assignments) \
             WHERE shard = 0; \
             INSERT INTO ho_measurements (host, target, measured_at_ms, current_rtt_ms, \
             target_rtt_ms) SELECT h, (h + 7) % 20 + 1, 1000, 120, 20 \
             FROM generate_series(0, {last}) h; \
             INSERT INTO ho_cooldowns (host, until_ms) SELECT h, 5000 \
             FROM generate_series(0, {last}, 10) h; \
             ANALYZE",
            last = HOSTS - 1
        )
        .as_str(),
    )
    .await
    .expect("seed");
    assert_eq!(store.audit_limits().await.expect("audit"), Ok(()));

    let first = store
        .explain_candidate_page(page(None), true)
        .await
        .expect("explain");
    check_plan(&first, "the first page");
    for after in [HOSTS / 2, HOSTS - u64::from(LIMIT) - 50] {
        // Twice: the second run plans the way a reused prepared statement may.
        for _ in 0..2 {
            let late = store
                .explain_candidate_page(page(Some(after)), true)
                .await
                .expect("explain");
            check_plan(&late, &format!("the page after host {after}"));
            assert!(
                buffers(&late) <= 2 * buffers(&first) + 16,
                "the page after host {after} touches {} buffers, the first {}:\n{}",
                buffers(&late),
                buffers(&first),
                late.join("\n")
            );
        }
    }
    // The rows are the page asked for, with the target's maintained load.
    let rows = store
        .candidate_page(page(Some(HOSTS - 3)))
        .await
        .expect("page");
    let hosts: Vec<u64> = rows.iter().map(|r| r.candidate.authority.host.0).collect();
    assert_eq!(hosts, vec![HOSTS - 2, HOSTS - 1]);
    let load = rows[0].target.expect("a known target").load;
    assert_eq!(
        u64::from(load),
        HOSTS / 20,
        "the target's load is its host count"
    );
    conn.close().await.expect("close");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_3_the_page_query_searches_the_host_key_and_has_no_correlated_subquery_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("ho.db").display());
    let store = SqlStore::connect(&url, StoreOptions::default())
        .await
        .expect("store");
    let plan = store
        .explain_candidate_page(page(Some(10)), false)
        .await
        .expect("explain");
    let text = plan.join("\n");
    assert!(!text.contains("CORRELATED"), "a subquery per row:\n{text}");
    for table in PER_HOST {
        assert!(
            !plan.iter().any(|l| l.starts_with(&format!("SCAN {table}"))),
            "{table} scanned whole:\n{text}"
        );
    }
    assert!(
        plan.iter().any(|l| l.starts_with("SEARCH ho_assignments")),
        "the host list is searched by its key:\n{text}"
    );
    store.close().await;
}
