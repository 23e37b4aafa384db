//! SCALE-1 / SCALE-2 on the SQL stores: the store's bounds are settings, checked under the lock
//! that guards the count (never overshot by racing enrolments, refused by name), an enrolment
//! locks one limit shard (not all of them) and counts no table, and the registrations of one
//! cell share its row instead of queueing on it.
//!
//! Each lock test holds, from a plain connection, the lock that the old store needed, and
//! checks that the store's call still completes: under the old code the call waited for the
//! held lock until its transaction timeout (an ambiguous failure).

mod support_pg;

use std::collections::BTreeSet;
use std::time::Duration;

use sqlx::{Connection, Executor, PgConnection};
use switchyard_adapters::handoff::store::{BulkSeed, SeedError, SqlStore, StoreOptions};
use switchyard_core::handoff::store::{
    CellRow, LimitSettings, StartRefusal, StoreBounds, StoreConfig, StoreError,
};
use switchyard_core::handoff::PolicyConfig;
use switchyard_core::handoff::{CellId, HostId, Incarnation};
use switchyard_core::MonoMs;

const CELL: CellId = CellId(1);

fn config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 20_000,
        },
        max_in_flight_migrations: 16,
        rate_window_ms: 60_000,
        max_commits_per_window: 30,
        registration_timeout_ms: 30_000,
        bounds: StoreBounds::FLEET,
    }
}

fn limits(max_hosts: u64, max_cells: u64) -> LimitSettings {
    LimitSettings {
        host_cooldown_ms: config().policy.host_cooldown_ms,
        max_in_flight_migrations: 16,
        rate_window_ms: 60_000,
        max_commits_per_window: 30,
        bounds: StoreBounds {
            max_hosts,
            max_cells,
            ..StoreBounds::FLEET
        },
    }
}

async fn store(url: &str, txn_timeout: Duration) -> SqlStore {
    let opts = StoreOptions {
        max_connections: 16,
        txn_timeout,
        ..StoreOptions::default()
    };
    let store = SqlStore::connect(url, opts).await.expect("store");
    store.put_settings(&config(), true).await.expect("settings");
    store
        .upsert_cell(
            CELL,
            CellRow {
                capacity: 100_000,
                handoff_capable: true,
                incarnation: Incarnation(1),
            },
        )
        .await
        .expect("cell")
        .expect("cell");
    store
}

async fn sqlite_url(tag: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join(format!("{tag}.db")).display());
    (dir, url)
}

/// SCALE-1: 40 enrolments racing for room for 25 hosts: exactly 25 are taken, the other 15
/// are refused `TooManyHosts` (never a store failure), and the shards count what the table
/// holds. The old store counted the table before it took any lock, so racing enrolments all
/// saw room (65,540 rows in a store bounded at 65,536).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scale_1_racing_enrolments_never_overshoot_the_host_bound() {
    let url = support_pg::fresh_db("scale1_race").await;
    let sql = store(&url, Duration::from_secs(20)).await;
    sql.put_limits(&limits(25, 8)).await.expect("limits");
    let mut tasks = Vec::new();
    for h in 0..40u64 {
        let sql = sql.clone();
        tasks.push(tokio::spawn(async move {
            sql.insert_host(HostId(1_000 + h), CELL, true).await
        }));
    }
    let (mut taken, mut refused) = (0, 0);
    for t in tasks {
        match t.await.expect("task").expect("no store failure") {
            Ok(_) => taken += 1,
            Err(StoreError::TooManyHosts) => refused += 1,
            Err(other) => panic!("unexpected refusal {other:?}"),
        }
    }
    assert_eq!((taken, refused), (25, 15));
    assert_eq!(sql.rows().await.expect("rows").assignments.len(), 25);
    assert_eq!(sql.audit_limits().await.expect("audit"), Ok(()));
    // Raising the bound gives room again; lowering it below the hosts stored refuses.
    sql.put_limits(&limits(26, 8)).await.expect("limits");
    assert!(sql
        .insert_host(HostId(5), CELL, true)
        .await
        .expect("store")
        .is_ok());
    sql.put_limits(&limits(10, 8)).await.expect("limits");
    assert_eq!(
        sql.insert_host(HostId(6), CELL, true).await.expect("store"),
        Err(StoreError::TooManyHosts)
    );
    assert_eq!(sql.audit_limits().await.expect("audit"), Ok(()));
}

/// SCALE-1: the same bound on SQLite (one writer), and an existing host is answered before the
/// bound: `HostExists`, as the reference checks.
#[tokio::test]
async fn scale_1_sqlite_refuses_past_the_bound_by_name() {
    let (_dir, url) = sqlite_url("scale1").await;
    let sql = store(&url, Duration::from_secs(5)).await;
    sql.put_limits(&limits(3, 8)).await.expect("limits");
    for h in 0..3 {
        sql.insert_host(HostId(h), CELL, true)
            .await
            .expect("store")
            .expect("room");
    }
    assert_eq!(
        sql.insert_host(HostId(9), CELL, true).await.expect("store"),
        Err(StoreError::TooManyHosts)
    );
    assert_eq!(
        sql.insert_host(HostId(1), CELL, true).await.expect("store"),
        Err(StoreError::HostExists)
    );
    assert_eq!(sql.audit_limits().await.expect("audit"), Ok(()));
}

/// HO-L4 / HO-3: the store's host cooldown is one of the operator's limits (a cell's
/// `--host-cooldown-ms`), not fixed when the store is created.
#[tokio::test]
async fn ho_l4_the_host_cooldown_is_a_store_limit_set_by_the_cells_flag() {
    let (_dir, url) = sqlite_url("cooldown").await;
    let sql = store(&url, Duration::from_secs(5)).await;
    assert_eq!(
        sql.settings()
            .await
            .expect("settings")
            .policy
            .host_cooldown_ms,
        config().policy.host_cooldown_ms
    );
    sql.put_limits(&LimitSettings {
        host_cooldown_ms: 5_000,
        ..limits(100, 8)
    })
    .await
    .expect("limits");
    let after = sql.settings().await.expect("settings");
    assert_eq!(after.policy.host_cooldown_ms, 5_000);
    assert_eq!(
        after.policy.freshness_window_ms,
        config().policy.freshness_window_ms,
        "only the limits change"
    );
}

/// SCALE-1: a new cell id past `max_cells` is refused by name, at its start and at setup; the
/// cells already stored start as before.
#[tokio::test]
async fn scale_1_a_new_cell_past_the_bound_is_refused_too_many_cells() {
    let url = support_pg::fresh_db("scale1_cells").await;
    let sql = store(&url, Duration::from_secs(5)).await;
    sql.put_limits(&limits(100, 2)).await.expect("limits");
    let start = |cell: u32| {
        let sql = sql.clone();
        async move {
            sql.start_cell(CellId(cell), 10, true, "", "", MonoMs(1), 1_000)
                .await
                .expect("store")
        }
    };
    assert!(start(2).await.is_ok());
    assert_eq!(start(3).await, Err(StartRefusal::TooManyCells));
    assert!(start(1).await.is_ok(), "an existing cell is never refused");
    let row = CellRow {
        capacity: 1,
        handoff_capable: true,
        incarnation: Incarnation(1),
    };
    assert_eq!(
        sql.upsert_cell(CellId(4), row).await.expect("store"),
        Err(StoreError::TooManyCells)
    );
}

/// SCALE-2: with every limit shard but one held by another transaction, enrolments still go
/// through (each locks one free shard); the old store locked every shard for each one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_2_enrolment_locks_one_limit_shard_not_all() {
    let url = support_pg::fresh_db("scale2_one_shard").await;
    let sql = store(&url, Duration::from_secs(2)).await;
    // The first enrolment deals the host tokens out (its exact path).
    sql.insert_host(HostId(1), CELL, true)
        .await
        .expect("store")
        .expect("room");
    let mut holder = PgConnection::connect(&url).await.expect("connect");
    holder.execute("BEGIN").await.expect("begin");
    holder
        .execute("SELECT 1 FROM ho_limit_shards WHERE shard < 15 FOR UPDATE")
        .await
        .expect("hold 15 shards");
    for h in 2..12 {
        sql.insert_host(HostId(h), CELL, true)
            .await
            .expect("enrolled while 15 of 16 shards are held")
            .expect("room");
    }
    holder.execute("ROLLBACK").await.expect("rollback");
    assert_eq!(sql.rows().await.expect("rows").assignments.len(), 11);
    assert_eq!(sql.audit_limits().await.expect("audit"), Ok(()));
}

/// SCALE-2: registrations of one cell share its row: with the row held shared by another
/// transaction (as a registration in flight holds it), registrations still complete; a process
/// start (an exclusive lock) still waits for them. The old store locked the row exclusively for
/// each registration, one after another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_2_registrations_of_one_cell_share_its_row() {
    let url = support_pg::fresh_db("scale2_share").await;
    let sql = store(&url, Duration::from_secs(2)).await;
    let inc = sql
        .start_cell(CELL, 100_000, true, "", "", MonoMs(1), 60_000)
        .await
        .expect("store")
        .expect("start");
    let hosts: BTreeSet<u64> = (1..=20).collect();
    for h in &hosts {
        sql.insert_host(HostId(*h), CELL, true)
            .await
            .expect("store")
            .expect("room");
    }
    let mut holder = PgConnection::connect(&url).await.expect("connect");
    holder.execute("BEGIN").await.expect("begin");
    holder
        .execute("SELECT 1 FROM ho_cells WHERE cell = 1 FOR SHARE")
        .await
        .expect("share the cell row");
    let mut tasks = Vec::new();
    for h in hosts.clone() {
        let sql = sql.clone();
        tasks.push(tokio::spawn(async move {
            sql.register_control(MonoMs(2), HostId(h), CELL, inc, true)
                .await
        }));
    }
    for t in tasks {
        t.await
            .expect("task")
            .expect("registered while the cell row is shared")
            .expect("accepted");
    }
    // A process start takes the row exclusively: it waits for the shared holder.
    let waiting = sql.start_cell(CellId(1), 100_000, true, "", "", MonoMs(70_000), 60_000);
    let res = tokio::time::timeout(Duration::from_millis(500), waiting).await;
    assert!(
        res.is_err(),
        "a start must wait for a shared holder of the row"
    );
    holder.execute("ROLLBACK").await.expect("rollback");
}

fn refused_not_empty(got: Result<(), SeedError>, cells: u64, hosts: bool, says: &str) {
    match got {
        Err(SeedError::NotEmpty { cells: c, hosts: h }) if (c, h) == (cells, hosts) => {
            let e = SeedError::NotEmpty { cells, hosts };
            assert!(e.to_string().contains(says), "{e}");
        }
        other => panic!("want NotEmpty {{ cells: {cells}, hosts: {hosts} }}, got {other:?}"),
    }
}

/// SCALE-1: a bulk seed writes only into an empty store, and its refusal names what it found:
/// the cells counted (at most `max_cells` rows), the hosts probed (one row, not a count of a
/// million: the refusal's cost is the same at every N, `benches/benches/scale.rs`). A refused
/// seed writes nothing.
#[tokio::test]
async fn scale_1_a_bulk_seed_into_a_store_that_holds_cells_or_hosts_is_refused_not_empty() {
    let seed = BulkSeed {
        cells: 3,
        hosts: 40,
        dense_hosts: 10,
        capacity: 1_000,
        measured_every: 0,
        measured_at: MonoMs(0),
        timeout: Duration::from_secs(60),
    };
    // A cell and no host.
    let url = support_pg::fresh_db("seed_cells_only").await;
    let sql = store(&url, Duration::from_secs(20)).await;
    refused_not_empty(
        sql.seed_bulk(&seed).await,
        1,
        false,
        "found 1 cells, no hosts",
    );
    assert!(sql.rows().await.expect("rows").assignments.is_empty());

    // An empty store is seeded; a second seed finds its cells and hosts.
    let url = support_pg::fresh_db("seed_twice").await;
    let sql = SqlStore::connect(&url, StoreOptions::default())
        .await
        .expect("store");
    sql.put_settings(&config(), true).await.expect("settings");
    sql.seed_bulk(&seed).await.expect("the first seed");
    refused_not_empty(
        sql.seed_bulk(&seed).await,
        3,
        true,
        "found 3 cells and hosts",
    );
    assert_eq!(sql.rows().await.expect("rows").assignments.len(), 40);
    assert_eq!(sql.audit_limits().await.expect("audit"), Ok(()));
}
