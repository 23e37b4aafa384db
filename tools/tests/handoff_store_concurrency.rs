//! HO-S4 under real concurrency on PostgreSQL: the global limits (target capacity, in-flight
//! reservations, the rate window) hold when commits queue on the limit shards and when they
//! race on the token path.
//!
//! The differential test (`handoff_store_diff.rs`) runs one call at a time, so it cannot see
//! what a commit reads while it waits for a lock. Here a plain connection holds every limit
//! shard while several store transactions queue behind it; once it lets go they commit one
//! after the other, and each one that waited must count the commits it waited for (under READ
//! COMMITTED a statement that waited for a row lock reads everything else with the snapshot it
//! started with: counting in that statement would miss them). Then nothing is held and 60
//! hosts race on the token path for room for 20. The outcomes and rows must equal the
//! reference store running the same requests in the order they committed.

#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use std::time::Duration;

use sqlx::{Connection, Executor, PgConnection};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::{
    AbortReason, AssignmentStore, CellRow, StoreConfig, TxnOutcome,
};
use switchyard_core::handoff::{CellId, HostId, Incarnation};
use switchyard_core::handoff::{HandoffRequest, Ineligible, Measurement, PolicyConfig};
use switchyard_core::MonoMs;

const SOURCE: CellId = CellId(1);
const TARGET: CellId = CellId(2);
const NOW: MonoMs = MonoMs(10_000);

fn config(max_in_flight: u32, max_commits: u32) -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 20_000,
        },
        max_in_flight_migrations: max_in_flight,
        rate_window_ms: 60_000,
        max_commits_per_window: max_commits,
        registration_timeout_ms: 30_000,
        bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
    }
}

fn cell(capacity: u32) -> CellRow {
    CellRow {
        capacity,
        handoff_capable: true,
        incarnation: Incarnation(1),
    }
}

/// Which row the plain connection holds while the store transactions queue.
#[derive(Debug, Clone, Copy)]
enum Hold {
    /// Every limit shard (what the exact path takes): every host asks once; they queue on
    /// the shards.
    Limits,
    /// Nothing held: every host asks once, all at once (the token path runs concurrently once
    /// a first exact path dealt the tokens out).
    Nothing,
    /// The row of host 0: the same request `n` times (duplicate workers); they queue on the
    /// host lock.
    Host0Duplicates(usize),
}

/// `hosts` hosts on the source ask to move to the target (capacity `capacity`) while a plain
/// connection holds a lock (`hold`); all of them queue on that lock, then race.
async fn race(
    tag: &str,
    config: StoreConfig,
    capacity: u32,
    hosts: u64,
    hold: Hold,
) -> (Vec<(HandoffRequest, TxnOutcome)>, AssignmentStore) {
    let url = support_pg::fresh_db(tag).await;
    let opts = StoreOptions {
        max_connections: 8,
        txn_timeout: Duration::from_secs(20),
        ..StoreOptions::default()
    };
    let store = SqlStore::connect(&url, opts).await.expect("store");
    store.put_settings(&config, true).await.expect("settings");
    let mut reference = AssignmentStore::new(config);
    for (c, cap) in [(SOURCE, hosts * 2), (TARGET, u64::from(capacity))] {
        let row = cell(u32::try_from(cap).expect("capacity"));
        store
            .upsert_cell(c, row)
            .await
            .expect("cell")
            .expect("cell");
        reference.upsert_cell(c, row).expect("cell");
    }
    let measurement = Measurement {
        measured_at: MonoMs(9_000),
        current_rtt_ms: 120,
        target_rtt_ms: 60,
    };
    let mut requests = Vec::new();
    for h in 0..hosts {
        let authority = store
            .insert_host(HostId(h), SOURCE, true)
            .await
            .expect("host")
            .expect("host");
        reference
            .insert_host(HostId(h), SOURCE, true)
            .expect("host");
        requests.push(HandoffRequest::new(authority, TARGET, 100, measurement));
    }

    let (lock, requests) = match hold {
        Hold::Limits => ("SELECT 1 FROM ho_limit_shards FOR UPDATE", requests),
        Hold::Nothing => ("SELECT 1", requests),
        Hold::Host0Duplicates(n) => (
            "SELECT 1 FROM ho_assignments WHERE host = 0 FOR UPDATE",
            vec![requests[0]; n],
        ),
    };
    let waiters = if matches!(hold, Hold::Nothing) {
        0
    } else {
        requests.len()
    };
    // Nothing held: one commit first, alone; its exact path deals the tokens out, so the race
    // below runs on the token path until they run short.
    let mut first = None;
    let requests = if matches!(hold, Hold::Nothing) {
        let out = store.run_transaction(NOW, &requests[0]).await;
        first = Some((requests[0], out, tokio::time::Instant::now()));
        requests[1..].to_vec()
    } else {
        requests
    };
    let mut holder = PgConnection::connect(&url).await.expect("holder");
    holder.execute("BEGIN").await.expect("begin");
    holder.execute(lock).await.expect("hold the lock");
    let tasks: Vec<_> = requests
        .iter()
        .map(|req| {
            let store = store.clone();
            let req = *req;
            tokio::spawn(async move {
                let out = store.run_transaction(NOW, &req).await;
                (req, out, tokio::time::Instant::now())
            })
        })
        .collect();
    // Every transaction waits for the held lock (ho_limits: each passed its host lock and its
    // precheck).
    if waiters > 0 {
        wait_for_lock_waiters(&url, waiters).await;
    }
    holder.execute("COMMIT").await.expect("release");
    holder.close().await.expect("close");

    let mut results = Vec::new();
    if let Some((req, out, done)) = first {
        results.push((req, out.expect("store answered"), done));
    }
    for t in tasks {
        let (req, out, done) = t.await.expect("task");
        results.push((req, out.expect("store answered"), done));
    }
    // The reference runs the winners first (in the order they finished), then the others:
    // the serial order the database chose.
    results.sort_by_key(|(_, out, done)| (!out.is_committed(), *done));
    let results: Vec<_> = results.into_iter().map(|(r, o, _)| (r, o)).collect();
    for (req, out) in &results {
        assert_eq!(
            reference.run_transaction(NOW, req),
            *out,
            "reference outcome of {req:?}"
        );
    }
    assert_eq!(
        store.rows().await.expect("rows"),
        reference.snapshot(),
        "rows equal the reference run in commit order"
    );
    assert_eq!(reference.check_invariants(), Ok(()));
    assert_eq!(store.audit_limits().await.expect("audit"), Ok(()));
    store.close().await;
    (results, reference)
}

fn count(results: &[(HandoffRequest, TxnOutcome)], want: fn(&TxnOutcome) -> bool) -> usize {
    results.iter().filter(|(_, o)| want(o)).count()
}

/// Until `waiters` backends of the database of `url` wait for a lock (seen from a connection
/// of its own: inside a holder's transaction the statistics are a snapshot); 15 s at most.
async fn wait_for_lock_waiters(url: &str, waiters: usize) {
    let mut monitor = PgConnection::connect(url).await.expect("monitor");
    let db = url.rsplit('/').next().expect("db name").to_owned();
    let want = i64::try_from(waiters).expect("waiters");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 \
             AND wait_event_type = 'Lock'",
        )
        .bind(&db)
        .fetch_one(&mut monitor)
        .await
        .expect("pg_stat_activity");
        if waiting == want {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {waiting} of {waiters} transactions queued on a lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    monitor.close().await.expect("close");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn ho_s4_capacity_holds_for_commits_queued_on_the_limits_lock() {
    let (results, reference) =
        runtime().block_on(race("capacity", config(100, 100), 2, 5, Hold::Limits));
    assert_eq!(count(&results, TxnOutcome::is_committed), 2);
    assert_eq!(
        count(&results, |o| *o
            == TxnOutcome::RolledBack {
                reason: AbortReason::Policy(Ineligible::TargetAtCapacity)
            }),
        3
    );
    assert_eq!(reference.cell_load(TARGET), 2);
}

#[test]
fn ho_s4_in_flight_limit_holds_for_commits_queued_on_the_limits_lock() {
    let (results, _) = runtime().block_on(race("inflight", config(2, 100), 100, 5, Hold::Limits));
    assert_eq!(count(&results, TxnOutcome::is_committed), 2);
    assert_eq!(
        count(&results, |o| *o
            == TxnOutcome::RolledBack {
                reason: AbortReason::ConcurrencyLimited
            }),
        3
    );
}

#[test]
fn ho_s4_rate_limit_holds_for_commits_queued_on_the_limits_lock() {
    let (results, _) = runtime().block_on(race("rate", config(100, 3), 100, 5, Hold::Limits));
    assert_eq!(count(&results, TxnOutcome::is_committed), 3);
    assert_eq!(
        count(&results, |o| *o
            == TxnOutcome::RolledBack {
                reason: AbortReason::RateLimited
            }),
        2
    );
}

/// HO-S4 with the limits in escrow: 60 hosts race for a target with room for 20 (8 pool
/// connections, nothing held; a first commit deals the tokens out, later ones spend them on
/// whichever shard is free, then the exact path decides). Exactly 20 commit: no token stands for room that is not there, and
/// no refusal happens while there is room.
#[test]
fn ho_s4_capacity_is_exact_for_commits_racing_on_the_limit_shards() {
    let (results, reference) =
        runtime().block_on(race("racecap", config(100, 100), 20, 60, Hold::Nothing));
    assert_eq!(count(&results, TxnOutcome::is_committed), 20, "{results:?}");
    assert_eq!(
        count(&results, |o| *o
            == TxnOutcome::RolledBack {
                reason: AbortReason::Policy(Ineligible::TargetAtCapacity)
            }),
        40
    );
    assert_eq!(reference.cell_load(TARGET), 20);
}

#[test]
fn ho_s4_in_flight_and_rate_limits_are_exact_for_commits_racing_on_the_limit_shards() {
    let (results, _) =
        runtime().block_on(race("raceflight", config(20, 100), 100, 60, Hold::Nothing));
    assert_eq!(count(&results, TxnOutcome::is_committed), 20, "{results:?}");
    let (results, _) =
        runtime().block_on(race("racerate", config(100, 20), 100, 60, Hold::Nothing));
    assert_eq!(count(&results, TxnOutcome::is_committed), 20, "{results:?}");
    assert_eq!(
        count(&results, |o| *o
            == TxnOutcome::RolledBack {
                reason: AbortReason::RateLimited
            }),
        40
    );
}

/// HO-S4 / HO-A4, lock order: registrations at the target (each locks the target's cell row,
/// then the limit shard of the reservation it completes) race commits onto the same target
/// (each holds a limit shard, then its move's foreign-key check takes a key-share lock on the
/// target's cell row). With the registration's cell lock `FOR UPDATE` the two wait for each
/// other and PostgreSQL aborts one as a deadlock; every call here must answer.
#[test]
fn ho_s4_registrations_racing_commits_onto_their_cell_never_deadlock() {
    runtime().block_on(async {
        let url = support_pg::fresh_db("regrace").await;
        let opts = StoreOptions {
            max_connections: 16,
            ..StoreOptions::default()
        };
        let store = SqlStore::connect(&url, opts).await.expect("store");
        store
            .put_settings(&config(1_000, 1_000), true)
            .await
            .expect("settings");
        for c in [SOURCE, TARGET] {
            store
                .upsert_cell(c, cell(1_000))
                .await
                .expect("cell")
                .expect("cell");
        }
        let measurement = Measurement {
            measured_at: MonoMs(9_000),
            current_rtt_ms: 120,
            target_rtt_ms: 60,
        };
        let mut requests = Vec::new();
        for h in 0..80 {
            let authority = store
                .insert_host(HostId(h), SOURCE, true)
                .await
                .expect("host")
                .expect("host");
            requests.push(HandoffRequest::new(authority, TARGET, 100, measurement));
        }
        // The first half moves now; their desktops register at the target while the second
        // half commits.
        for req in &requests[..40] {
            let out = store.run_transaction(NOW, req).await.expect("commit");
            assert!(out.is_committed(), "{out:?}");
        }
        let mut tasks = Vec::new();
        for (k, req) in requests.iter().enumerate() {
            let store = store.clone();
            let req = *req;
            tasks.push(tokio::spawn(async move {
                if k < 40 {
                    store
                        .register_control(NOW, req.source.host, TARGET, Incarnation(1), true)
                        .await
                        .map(|r| format!("{r:?}"))
                } else {
                    store
                        .run_transaction(NOW, &req)
                        .await
                        .map(|o| format!("{o:?}"))
                }
            }));
        }
        for t in tasks {
            let answer = t.await.expect("task");
            assert!(answer.is_ok(), "a store call failed: {answer:?}");
        }
        assert_eq!(store.audit_limits().await.expect("audit"), Ok(()));
        let rows = store.rows().await.expect("rows");
        assert!(
            rows.reservations.len() == 40,
            "{:?}",
            rows.reservations.len()
        );
        store.close().await;
    });
}

/// HO-A1: duplicate workers of one op id queue on the host lock; the first commits, and each
/// later one must read the attempt row the one before it committed (a read in a statement that
/// started before that commit would miss it and answer `AuthorityChanged`).
#[test]
fn ho_a1_duplicates_queued_on_the_host_lock_answer_the_recorded_commit() {
    let (results, _) = runtime().block_on(race(
        "duplicates",
        config(100, 100),
        100,
        1,
        Hold::Host0Duplicates(4),
    ));
    let first = results[0].1;
    assert!(first.is_committed(), "{results:?}");
    assert!(
        results.iter().all(|(_, o)| *o == first),
        "every duplicate answers the one commit: {results:?}"
    );
}

/// Found running the quick start: processes started at once on one fresh SQLite file raced
/// the schema migration (SQLite migrations take no lock) and the losers stopped with "table …
/// already exists" (exit 1). All now start: a loser re-runs and finds the migrations applied.
/// Processes, not tasks: within one process the race did not show.
#[test]
fn ho_l2_processes_starting_at_once_on_one_fresh_sqlite_file_all_migrate() {
    for round in 0..4 {
        let dir = tempfile::tempdir().expect("dir");
        let db = format!("sqlite://{}", dir.path().join("fresh.db").display());
        let children: Vec<_> = (0..4)
            .map(|_| {
                std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
                    .args(["director", "--once", "--db", &db])
                    .env("SWITCHYARD_HANDOFF_SECRET", "race-test-secret-0123456789")
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().expect("wait");
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// HO-A1 / HO-A2 (issue #40): a locked reconciliation queued behind the op id's own commit on
/// the host lock reads the op id's record only once it holds that lock, so it answers the
/// commit. One that read the record before taking the lock (a bug the store model's
/// `HO-A1 no plan fails on a row another plan wrote` reports) misses it, then fails on the
/// attempt's key. PostgreSQL: the reconciliation is seen waiting on the host row. SQLite: it
/// waits for the one writer lock at BEGIN, where the order cannot go wrong; run for parity.
async fn reconcile_queued_behind_its_commit(url: &str, postgres: bool) {
    let opts = StoreOptions {
        max_connections: 4,
        txn_timeout: Duration::from_secs(20),
        ..StoreOptions::default()
    };
    let store = SqlStore::connect(url, opts).await.expect("store");
    let config = config(100, 100);
    store.put_settings(&config, true).await.expect("settings");
    for (c, cap) in [(SOURCE, 4), (TARGET, 4)] {
        store
            .upsert_cell(c, cell(cap))
            .await
            .expect("cell")
            .expect("cell");
    }
    let authority = store
        .insert_host(HostId(0), SOURCE, true)
        .await
        .expect("host")
        .expect("host");
    let measurement = Measurement {
        measured_at: MonoMs(9_000),
        current_rtt_ms: 120,
        target_rtt_ms: 60,
    };
    let req = HandoffRequest::new(authority, TARGET, 100, measurement);
    let paused = store.faults().arm_pause_after_lock();
    let commit = {
        let store = store.clone();
        tokio::spawn(async move { store.run_transaction(NOW, &req).await })
    };
    paused
        .reached
        .await
        .expect("the commit holds the host lock");
    let reconcile = {
        let store = store.clone();
        tokio::spawn(async move { store.reconcile(NOW, &req).await })
    };
    if postgres {
        wait_for_lock_waiters(url, 1).await;
    } else {
        // Time for the reconciliation to reach BEGIN and wait for the writer lock (if it
        // has not yet, it runs after the commit: the answer must be the same).
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = paused.resume.send(());
    let committed = commit.await.expect("task").expect("the commit answers");
    assert!(committed.is_committed(), "{committed:?}");
    let reconciled = reconcile
        .await
        .expect("task")
        .expect("the reconciliation answers, without failing on the attempt's key");
    assert_eq!(reconciled, Some(committed));
    store.close().await;
}

#[test]
fn ho_a1_a_reconciliation_queued_behind_its_commit_answers_it_postgres() {
    runtime().block_on(async {
        let url = support_pg::fresh_db("reconcile_behind_commit").await;
        reconcile_queued_behind_its_commit(&url, true).await;
    });
}

#[test]
fn ho_a1_a_reconciliation_queued_behind_its_commit_answers_it_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    runtime().block_on(reconcile_queued_behind_its_commit(&url, false));
}

/// SCALE-2 (issue #40): a registration that keeps its cell's incarnation takes the cell's row
/// shared, so it runs while another registration of that cell holds the row (a restarted
/// cell's desktops register at once). A plain connection holds the row as such a
/// registration does (`FOR SHARE`); the registration must answer while it still holds it.
/// Taking the row exclusively (a bug the store model's `SCALE-2 two registrations that keep a
/// cell's incarnation never wait for each other's lock on it` reports) waits out the holder
/// and fails at the transaction's bound. PostgreSQL only: SQLite has no row locks (its one
/// writer lock serialises every registration, as `ho_s4_registrations_racing_…` runs).
#[test]
fn scale_2_a_registration_keeping_the_incarnation_shares_the_cell_row_postgres() {
    runtime().block_on(async {
        let url = support_pg::fresh_db("registration_shares_cell").await;
        let opts = StoreOptions {
            max_connections: 2,
            txn_timeout: Duration::from_secs(3),
            ..StoreOptions::default()
        };
        let store = SqlStore::connect(&url, opts).await.expect("store");
        store
            .put_settings(&config(100, 100), true)
            .await
            .expect("settings");
        store
            .upsert_cell(SOURCE, cell(4))
            .await
            .expect("cell")
            .expect("cell");
        let host = HostId(0);
        store
            .insert_host(host, SOURCE, true)
            .await
            .expect("host")
            .expect("host");
        let mut holder = PgConnection::connect(&url).await.expect("holder");
        holder.execute("BEGIN").await.expect("begin");
        holder
            .execute("SELECT 1 FROM ho_cells WHERE cell = 1 FOR SHARE")
            .await
            .expect("share the cell row");
        let registered = store
            .register_control(NOW, host, SOURCE, Incarnation(1), true)
            .await;
        holder.execute("COMMIT").await.expect("release");
        holder.close().await.expect("close");
        let authority = registered
            .expect("the registration answers while the row is shared")
            .expect("registered");
        assert_eq!(authority.cell, SOURCE);
        store.close().await;
    });
}
