//! HO-L4 (runs for months) on both SQL stores: the history is bounded by retention, not by a cap
//! that stops the fleet.
//!
//! - a store whose attempt bound is reached refuses every commit `StoreFull`; once its records
//!   are older than the retention a reap removes them and a new commit succeeds;
//! - a pending registration (a migration in flight) and a record inside the window are never
//!   removed, and one reap removes at most its batch;
//! - a reconciliation of a reaped committed op id answers `AuthorityChanged` (not fenced, not
//!   rolled back);
//! - the director reaps once per pass after the expiry, both bounded by its flags, and reports
//!   `attempts_reaped` (summed into `switchyard_director_attempts_reaped_total` by `run`); a
//!   retention the store refuses is named in the report.

mod support_pg;

use std::time::Duration;

use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::director::{Director, DirectorConfig};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::{CellId, HostId, Incarnation, OpId};
use switchyard_core::handoff::{DirectorPolicy, DispatchLimits, ScanLimits};
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_core::MonoMs;

const SRC: CellId = CellId(1);
const TGT: CellId = CellId(2);
const HOUR: u64 = 3_600_000;
const REGISTRATION_TIMEOUT_MS: u64 = 30_000;

#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

fn store_config(max_attempt_rows: u64) -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 1_000,
        },
        max_in_flight_migrations: 100,
        rate_window_ms: 60_000,
        max_commits_per_window: 1_000,
        registration_timeout_ms: REGISTRATION_TIMEOUT_MS,
        bounds: StoreBounds {
            max_attempt_rows,
            ..StoreBounds::FLEET
        },
    }
}

/// A store with cells 1 and 2 (never leased: not judged by HO-L3's liveness check, so hours
/// may pass) and hosts 1..=`hosts` at cell 1.
async fn open(
    backend: Backend,
    tag: &str,
    config: &StoreConfig,
    hosts: u64,
) -> (SqlStore, Option<tempfile::TempDir>) {
    let opts = StoreOptions {
        txn_timeout: Duration::from_secs(10),
        ..StoreOptions::default()
    };
    let (store, dir) = match backend {
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
    };
    store.put_settings(config, true).await.expect("settings");
    for cell in [SRC, TGT] {
        let row = CellRow {
            capacity: 1_000,
            handoff_capable: true,
            incarnation: Incarnation(1),
        };
        store
            .upsert_cell(cell, row)
            .await
            .expect("cell")
            .expect("cell");
    }
    for h in 1..=hosts {
        store
            .insert_host(HostId(h), SRC, true)
            .await
            .expect("host")
            .expect("host");
    }
    (store, dir)
}

async fn authority(store: &SqlStore, host: HostId) -> switchyard_core::handoff::SourceAuthority {
    let rows = store.rows().await.expect("rows");
    let row = rows.assignments.get(&host).expect("host");
    authority_of(host, row)
}

/// A request moving `host` from where it is to the other cell, measured at `now`.
async fn request(store: &SqlStore, host: HostId, now: MonoMs) -> HandoffRequest {
    let source = authority(store, host).await;
    let target = if source.cell == SRC { TGT } else { SRC };
    HandoffRequest::new(
        source,
        target,
        100,
        Measurement {
            measured_at: now,
            current_rtt_ms: 120,
            target_rtt_ms: 60,
        },
    )
}

/// Commit a move of `host` at `now`; `register`: its desktop then registers at the target
/// (the record has ended), else the migration stays in flight.
async fn commit(store: &SqlStore, host: HostId, now: MonoMs, register: bool) -> HandoffRequest {
    let req = request(store, host, now).await;
    let out = store.run_transaction(now, &req).await.expect("txn");
    assert!(out.is_committed(), "host {} moves: {out:?}", host.0);
    if register {
        store
            .register_control(now, host, req.target, Incarnation(1), true)
            .await
            .expect("register")
            .expect("registers at the target");
    }
    req
}

async fn reap(store: &SqlStore, now: MonoMs, batch: u32) -> u32 {
    store
        .reap_attempts(now, HOUR, batch)
        .await
        .expect("reap")
        .expect("retention accepted")
}

async fn audit(store: &SqlStore) {
    assert_eq!(
        store.audit_limits().await.expect("audit"),
        Ok(()),
        "the limit shards count exactly the rows left"
    );
}

async fn attempts(store: &SqlStore) -> Vec<OpId> {
    let rows = store.rows().await.expect("rows");
    rows.attempts.keys().copied().collect()
}

// ---- (a) a full store commits again once its old records are reaped -------------------------

async fn full_store_commits_again_after_a_reap(backend: Backend, tag: &str) {
    let (store, _dir) = open(backend, tag, &store_config(3), 4).await;
    let t0 = MonoMs(10 * HOUR);
    for h in 1..=3 {
        commit(&store, HostId(h), t0, true).await;
    }
    let req = request(&store, HostId(4), t0).await;
    assert_eq!(
        store.run_transaction(t0, &req).await.expect("txn"),
        TxnOutcome::RolledBack {
            reason: AbortReason::StoreFull
        },
        "{backend:?}: the bound is reached"
    );
    // Inside the window: nothing is removed, the store stays full.
    assert_eq!(reap(&store, t0.plus_ms(HOUR - 1), 10).await, 0);
    let later = t0.plus_ms(HOUR);
    assert_eq!(reap(&store, later, 10).await, 3, "{backend:?}");
    audit(&store).await;
    let req = request(&store, HostId(4), later).await;
    assert!(
        store
            .run_transaction(later, &req)
            .await
            .expect("txn")
            .is_committed(),
        "{backend:?}: a new commit succeeds once the history is reaped"
    );
    audit(&store).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l4_full_store_commits_again_after_a_reap_sqlite() {
    full_store_commits_again_after_a_reap(Backend::Sqlite, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l4_full_store_commits_again_after_a_reap_postgres() {
    full_store_commits_again_after_a_reap(Backend::Postgres, "ho_l4_full").await;
}

// ---- (b) never a pending or a recent record; the batch bound holds ---------------------------

async fn pending_and_recent_records_are_kept(backend: Backend, tag: &str) {
    let (store, _dir) = open(backend, tag, &store_config(1_000), 5).await;
    let t0 = MonoMs(10 * HOUR);
    let pending = commit(&store, HostId(1), t0, false).await;
    let mut ended = Vec::new();
    for h in 2..=4 {
        ended.push(commit(&store, HostId(h), t0, true).await.op_id);
    }
    let recent = commit(&store, HostId(5), t0.plus_ms(HOUR / 2), true).await;
    let now = t0.plus_ms(HOUR + 1);
    // The batch bound: 2, then the last old one, then nothing more.
    assert_eq!(reap(&store, now, 2).await, 2, "{backend:?}");
    audit(&store).await;
    assert_eq!(reap(&store, now, 2).await, 1, "{backend:?}");
    assert_eq!(reap(&store, now, 2).await, 0, "{backend:?}");
    audit(&store).await;
    let left = attempts(&store).await;
    let mut kept = vec![pending.op_id, recent.op_id];
    kept.sort();
    assert_eq!(
        left, kept,
        "{backend:?}: the migration in flight and the record inside the window stay"
    );
    // Oldest first: the two of the first batch were the smallest op ids of the same time.
    ended.sort();
    let rows = store.rows().await.expect("rows");
    assert!(ended.iter().all(|op| !rows.attempts.contains_key(op)));
    assert!(
        rows.reservations.contains_key(&pending.op_id),
        "still in flight"
    );
    // Much later, still pending (no expiry ran): still kept.
    assert_eq!(reap(&store, t0.plus_ms(100 * HOUR), 10).await, 1);
    assert_eq!(attempts(&store).await, vec![pending.op_id]);
    // Once its recovery starts it has ended, and the next reap removes it.
    let expired = store
        .expire_migrations_up_to(t0.plus_ms(100 * HOUR), 10)
        .await
        .expect("expire");
    assert_eq!(expired, vec![pending.op_id]);
    assert_eq!(reap(&store, t0.plus_ms(100 * HOUR), 10).await, 1);
    assert!(attempts(&store).await.is_empty());
    audit(&store).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l4_pending_and_recent_records_are_kept_batch_bounded_sqlite() {
    pending_and_recent_records_are_kept(Backend::Sqlite, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l4_pending_and_recent_records_are_kept_batch_bounded_postgres() {
    pending_and_recent_records_are_kept(Backend::Postgres, "ho_l4_kept").await;
}

// ---- (c) a reaped commit reconciles as AuthorityChanged --------------------------------------

async fn reaped_commit_reconciles_as_authority_changed(backend: Backend, tag: &str) {
    let (store, _dir) = open(backend, tag, &store_config(1_000), 1).await;
    let t0 = MonoMs(10 * HOUR);
    let req = commit(&store, HostId(1), t0, true).await;
    let later = t0.plus_ms(2 * HOUR);
    assert_eq!(reap(&store, later, 10).await, 1);
    let before = authority(&store, HostId(1)).await;
    let answer = store.reconcile(later, &req).await.expect("reconcile");
    assert!(
        matches!(answer, Some(TxnOutcome::AuthorityChanged { .. })),
        "{backend:?}: not fenced, not rolled back: {answer:?}"
    );
    assert_eq!(
        authority(&store, HostId(1)).await,
        before,
        "{backend:?}: the host's authority is not renewed"
    );
    let rows = store.rows().await.expect("rows");
    assert_eq!(
        rows.attempts.get(&req.op_id).map(|r| r.outcome),
        Some(AttemptOutcome::FencedAbort),
        "{backend:?}: the fence record renews nothing"
    );
    assert!(matches!(
        store.run_transaction(later, &req).await.expect("txn"),
        TxnOutcome::AuthorityChanged { .. }
    ));
    audit(&store).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l4_reaped_commit_reconciles_as_authority_changed_sqlite() {
    reaped_commit_reconciles_as_authority_changed(Backend::Sqlite, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l4_reaped_commit_reconciles_as_authority_changed_postgres() {
    reaped_commit_reconciles_as_authority_changed(Backend::Postgres, "ho_l4_reconcile").await;
}

// ---- the director: once per pass, bounded, reported, counted ---------------------------------

fn director(store: &SqlStore, clock: &Clock, retention: Retention) -> Director {
    Director::new(
        DirectorConfig {
            id: "d-l4".into(),
            policy: DirectorPolicy {
                enabled: true,
                cohort_percent: 100,
                policy: store_config(1).policy,
            },
            limits: ScanLimits {
                page_size: 10,
                max_pages: 1,
                max_dispatch: 10,
            },
            max_failures: 1,
            request_timeout: Duration::from_secs(5),
            retries: 0,
            secret: Secret::new(b"ho-l4-internal-secret-0123456789", "internal").expect("secret"),
            interval: Duration::from_secs(1),
            dispatch: DispatchLimits::SEQUENTIAL,
        },
        store.clone(),
        clock.clone(),
    )
    .with_retention(retention)
}

async fn director_reaps_once_per_pass(backend: Backend, tag: &str) {
    let (store, _dir) = open(backend, tag, &store_config(1_000), 5).await;
    let clock = Clock::default();
    let retention = Retention {
        attempt_retention_ms: HOUR,
        reap_batch: 2,
        max_expired_per_pass: 1,
    };
    let d = director(&store, &clock, retention);
    for h in 1..=3 {
        commit(&store, HostId(h), clock.now(), true).await;
    }
    // Two moves whose desktops never register: their slots are freed one a pass.
    for h in 4..=5 {
        commit(&store, HostId(h), clock.now(), false).await;
    }
    let r = d.pass().await.expect("pass");
    assert_eq!((r.attempts_reaped, r.expired_migrations), (0, 0), "{r:?}");
    clock.advance(HOUR + 1);
    let r = d.pass().await.expect("pass");
    assert_eq!(
        (r.attempts_reaped, r.expired_migrations),
        (2, 1),
        "{backend:?}: one batch and the expiry bound per pass: {r:?}"
    );
    assert_eq!(r.reap_refused, None);
    let r = d.pass().await.expect("pass");
    // The one expired at the pass before has ended: it goes with the last registered one.
    assert_eq!((r.attempts_reaped, r.expired_migrations), (2, 1), "{r:?}");
    let r = d.pass().await.expect("pass");
    assert_eq!((r.attempts_reaped, r.expired_migrations), (1, 0), "{r:?}");
    let r = d.pass().await.expect("pass");
    assert_eq!(r.attempts_reaped, 0, "{r:?}");
    assert!(attempts(&store).await.is_empty());
    audit(&store).await;

    // A registration timeout longer than the retention: the store refuses the reap, by name.
    let long = StoreConfig {
        registration_timeout_ms: 2 * HOUR,
        ..store_config(1_000)
    };
    store.put_settings(&long, true).await.expect("settings");
    let r = d.pass().await.expect("pass");
    let why = r.reap_refused.clone().unwrap_or_default();
    assert!(
        why.contains("registration timeout") && why.contains("--attempt-retention-ms"),
        "{backend:?}: {r:?}"
    );
    assert_eq!(r.attempts_reaped, 0);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l4_director_reaps_and_expires_once_per_pass_bounded_sqlite() {
    director_reaps_once_per_pass(Backend::Sqlite, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l4_director_reaps_and_expires_once_per_pass_bounded_postgres() {
    director_reaps_once_per_pass(Backend::Postgres, "ho_l4_director").await;
}
