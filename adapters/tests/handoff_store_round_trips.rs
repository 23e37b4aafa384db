//! HO-S4: the statements (round trips, on PostgreSQL) the assignment transaction sends per
//! path, pinned: the early answers (read, decide, nothing written), the token path (one limit
//! shard) and the exact path (every shard), committed or refused. The transaction is a plan
//! decided in the core (`switchyard_core::handoff::store`); the SQL store only executes
//! its steps, so a change of the plan that adds a round trip shows here. Counted by the
//! store's statement counter (`SqlStore::statements`, live with the `test-hooks` feature).
//! The implicit ROLLBACK of a dropped transaction is not counted.

mod support_pg;

use switchyard_adapters::handoff::store::{Dialect, SqlStore, StoreOptions};
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_core::MonoMs;

const SRC: CellId = CellId(1);
const TGT: CellId = CellId(2);

fn config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 0,
        },
        max_in_flight_migrations: 64,
        rate_window_ms: 60_000,
        max_commits_per_window: 64,
        registration_timeout_ms: 600_000,
        bounds: StoreBounds::FLEET,
    }
}

fn request(authority: SourceAuthority, target: CellId, now: MonoMs) -> HandoffRequest {
    HandoffRequest::new(
        authority,
        target,
        100,
        Measurement {
            measured_at: now,
            current_rtt_ms: 200,
            target_rtt_ms: 20,
        },
    )
}

/// The statements each path sends, in the order the test runs them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    invalid_op_id: u64,
    exact_committed: u64,
    duplicate: u64,
    token_committed: u64,
    authority_changed: u64,
    precheck_refused: u64,
    exact_refused: u64,
}

async fn run(store: &SqlStore) -> Counts {
    let now = MonoMs(1_000_000);
    store.put_settings(&config(), true).await.expect("settings");
    for cell in [SRC, TGT] {
        let row = CellRow {
            capacity: 64,
            handoff_capable: true,
            incarnation: Incarnation(1),
        };
        store
            .upsert_cell(cell, row)
            .await
            .expect("cell")
            .expect("cell");
    }
    // Hosts on shard 0's hint (16 shards), so the token path finds the tokens dealt there.
    let hosts = [HostId(32), HostId(48), HostId(64)];
    let mut authority = Vec::new();
    for h in hosts {
        authority.push(
            store
                .insert_host(h, SRC, true)
                .await
                .expect("host")
                .expect("host"),
        );
    }
    let mut counts = Counts::default();
    let sent = |store: &SqlStore, before: u64| store.statements().count() - before;

    let mut forged = request(authority[0], TGT, now);
    forged.target = CellId(9);
    let b = store.statements().count();
    let out = store.run_transaction(now, &forged).await.expect("txn");
    assert!(matches!(
        out,
        TxnOutcome::RolledBack {
            reason: AbortReason::InvalidOpId
        }
    ));
    counts.invalid_op_id = sent(store, b);

    // The first commit finds no token (the settings write revoked them): exact path.
    let first = request(authority[0], TGT, now);
    let b = store.statements().count();
    assert!(store
        .run_transaction(now, &first)
        .await
        .expect("txn")
        .is_committed());
    counts.exact_committed = sent(store, b);

    let b = store.statements().count();
    assert!(store
        .run_transaction(now, &first)
        .await
        .expect("txn")
        .is_committed());
    counts.duplicate = sent(store, b);

    // The exact path dealt tokens out: the next commit spends one.
    let b = store.statements().count();
    let second = request(authority[1], TGT, now);
    assert!(store
        .run_transaction(now, &second)
        .await
        .expect("txn")
        .is_committed());
    counts.token_committed = sent(store, b);

    let stale = SourceAuthority {
        generation: Generation(0),
        ..authority[2]
    };
    let b = store.statements().count();
    let out = store
        .run_transaction(now, &request(stale, TGT, now))
        .await
        .expect("txn");
    assert!(
        matches!(out, TxnOutcome::AuthorityChanged { .. }),
        "{out:?}"
    );
    counts.authority_changed = sent(store, b);

    let b = store.statements().count();
    let out = store
        .run_transaction(now, &request(authority[2], SRC, now))
        .await
        .expect("txn");
    assert!(matches!(out, TxnOutcome::RolledBack { .. }), "{out:?}");
    counts.precheck_refused = sent(store, b);

    // Two in flight, the limit lowered to two (its tokens revoked): exact path, refused.
    store
        .put_limits(&LimitSettings {
            host_cooldown_ms: 0,
            max_in_flight_migrations: 2,
            rate_window_ms: 60_000,
            max_commits_per_window: 64,
            bounds: StoreBounds::FLEET,
        })
        .await
        .expect("limits");
    let b = store.statements().count();
    let out = store
        .run_transaction(now, &request(authority[2], TGT, now))
        .await
        .expect("txn");
    assert_eq!(
        out,
        TxnOutcome::RolledBack {
            reason: AbortReason::ConcurrencyLimited
        }
    );
    counts.exact_refused = sent(store, b);
    counts
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn ho_s4_commit_round_trips_per_path_postgres() {
    let rt = runtime();
    let counts = rt.block_on(async {
        let url = support_pg::fresh_db("round_trips").await;
        let store = SqlStore::connect(&url, StoreOptions::default())
            .await
            .expect("pg");
        assert_eq!(store.dialect(), Dialect::Postgres);
        run(&store).await
    });
    eprintln!("postgres statements per path: {counts:?}");
    assert_eq!(
        counts,
        Counts {
            invalid_op_id: 0,
            // BEGIN, host lock, facts, savepoint + one shard, back to the savepoint, every
            // shard, settings, target, the commit's one write, COMMIT.
            exact_committed: 10,
            // BEGIN, host lock, facts: answered.
            duplicate: 3,
            // BEGIN, host lock, facts, savepoint + one shard, the write, COMMIT.
            token_committed: 6,
            authority_changed: 3,
            precheck_refused: 3,
            // The exact path up to the decision, nothing written.
            exact_refused: 8,
        }
    );
}

#[test]
fn ho_s4_commit_statements_per_path_sqlite() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tmp");
    let counts = rt.block_on(async {
        let url = format!("sqlite://{}", dir.path().join("rt.db").display());
        let store = SqlStore::connect(&url, StoreOptions::default())
            .await
            .expect("sqlite");
        run(&store).await
    });
    eprintln!("sqlite statements per path: {counts:?}");
    assert_eq!(
        counts,
        Counts {
            invalid_op_id: 0,
            exact_committed: 17,
            duplicate: 3,
            token_committed: 14,
            authority_changed: 3,
            precheck_refused: 3,
            exact_refused: 9,
        }
    );
}
