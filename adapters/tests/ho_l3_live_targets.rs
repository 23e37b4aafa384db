//! HO-L3 (live targets only): the source's assignment transaction re-checks the target's
//! lease in the store, as it re-checks the director's policy (HO-S4), on both SQL stores: a
//! move into a cell whose lease has lapsed is refused with a named reason and writes nothing;
//! the same move while the lease is live commits.

mod support_pg;

use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_core::MonoMs;

const SRC: CellId = CellId(1);
const TGT: CellId = CellId(2);
const LEASE_MS: u64 = 15_000;

fn config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 0,
        },
        max_in_flight_migrations: 64,
        rate_window_ms: 60_000,
        max_commits_per_window: 64,
        registration_timeout_ms: 600_000,
        bounds: StoreBounds::FLEET,
    }
}

fn request(authority: SourceAuthority, now: MonoMs) -> HandoffRequest {
    HandoffRequest::new(
        authority,
        TGT,
        100,
        Measurement {
            measured_at: now,
            current_rtt_ms: 200,
            target_rtt_ms: 20,
        },
    )
}

async fn lapsed_target_refused(store: &SqlStore) {
    let started = MonoMs(1_000_000);
    store.put_settings(&config(), true).await.expect("settings");
    let src = CellRow {
        capacity: 64,
        handoff_capable: true,
        incarnation: Incarnation(1),
    };
    store
        .upsert_cell(SRC, src)
        .await
        .expect("cell")
        .expect("cell");
    // The target is a process that took its lease at `started` and then stopped renewing it
    // (cut off from the store, or dead).
    store
        .start_cell(TGT, 64, true, "", "", started, LEASE_MS)
        .await
        .expect("start")
        .expect("free");
    let live = store
        .insert_host(HostId(7), SRC, true)
        .await
        .expect("host")
        .expect("host");
    let lapsing = store
        .insert_host(HostId(8), SRC, true)
        .await
        .expect("host")
        .expect("host");

    // While the lease runs: the move commits.
    let now = started.plus_ms(LEASE_MS - 1);
    let out = store
        .run_transaction(now, &request(live, now))
        .await
        .expect("txn");
    assert!(out.is_committed(), "a live target takes the move: {out:?}");

    // The lease ended at `started + LEASE_MS`: refused, by name, nothing written.
    let now = started.plus_ms(LEASE_MS);
    let before = store.rows().await.expect("rows");
    let out = store
        .run_transaction(now, &request(lapsing, now))
        .await
        .expect("txn");
    assert_eq!(
        out,
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::TargetNotLive)
        },
        "a move into a cell whose lease lapsed is refused"
    );
    assert_eq!(
        Ineligible::TargetNotLive.name(),
        "target_not_live",
        "the reason's stable name"
    );
    let after = store.rows().await.expect("rows");
    assert_eq!(before, after, "a refused move writes nothing");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn ho_l3_move_into_lapsed_cell_refused_postgres() {
    let rt = runtime();
    rt.block_on(async {
        let url = support_pg::fresh_db("ho_l3_lapsed").await;
        let store = SqlStore::connect(&url, StoreOptions::default())
            .await
            .expect("pg");
        lapsed_target_refused(&store).await;
    });
}

#[test]
fn ho_l3_move_into_lapsed_cell_refused_sqlite() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tmp");
    rt.block_on(async {
        let url = format!("sqlite://{}", dir.path().join("l3.db").display());
        let store = SqlStore::connect(&url, StoreOptions::default())
            .await
            .expect("sqlite");
        lapsed_target_refused(&store).await;
    });
}
