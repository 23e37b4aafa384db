//! Differential test of the SQL assignment store (HO-S4, HO-A1, HO-A2, HO-A4..A6): generated
//! operation sequences run against the core reference `AssignmentStore`, the SQLite store and
//! the PostgreSQL store; after every step the outcomes and **all rows** must be identical.
//!
//! The checker's handoff witnesses are replayed the same way: the model steps through each trace
//! and every store call it makes runs on SQLite and PostgreSQL too.
//!
//! `SWITCHYARD_DIFF_CASES` scales the number of generated sequences (default 64, fixed seed).

mod support_pg;

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use sqlx::Executor;
use switchyard_adapters::handoff::store::{SqlStore, StoreFailure, StoreOptions};
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_core::MonoMs;
use switchyard_spec::handoff::{HandoffModel, HandoffParams, HoAction, HoProjection};
use switchyard_spec::store_calls::StoreCall;
use switchyard_spec::trace::Trace;
use tempfile::TempDir;

const CELLS: [(CellId, u32, bool); 4] = [
    (CellId(1), 10, true),
    (CellId(2), 10, true),
    // HO-C1: a cell without the capability.
    (CellId(3), 10, false),
    // Capacity 1: fills up.
    (CellId(4), 1, true),
];
const HOSTS: [HostId; 3] = [HostId(7), HostId(8), HostId(9)];

fn config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            // Shorter than the registration timeout, so MigrationPending is reachable.
            host_cooldown_ms: 20_000,
        },
        max_in_flight_migrations: 2,
        rate_window_ms: 60_000,
        max_commits_per_window: 2,
        registration_timeout_ms: 30_000,
        bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
    }
}

/// How a request's claimed authority deviates from the current one.
#[derive(Debug, Clone, Copy)]
enum Claim {
    Current,
    OlderEpoch,
    OlderGeneration,
    NewerIncarnation,
    OtherCell,
}

#[derive(Debug, Clone, Copy)]
enum Meas {
    Good,
    Stale,
    Weak,
    Future,
}

#[derive(Debug, Clone)]
enum Op {
    Txn {
        host: usize,
        target: u32,
        claim: Claim,
        meas: Meas,
        cohort: u8,
    },
    Reconcile {
        host: usize,
        target: u32,
        claim: Claim,
    },
    /// Re-run an earlier request (duplicate worker / lost response).
    Duplicate {
        k: usize,
        reconcile: bool,
    },
    Forged {
        host: usize,
    },
    Register {
        host: usize,
        cell: u32,
        inc: i8,
        capable: bool,
    },
    /// The desktop registers where it is assigned (completes a pending migration).
    RegisterAssigned {
        host: usize,
    },
    Drain {
        host: usize,
        claim: Claim,
    },
    Expire,
    Advance(u64),
    Enable(bool),
    Capacity {
        cell: u32,
        capacity: u32,
    },
    /// HO-L2: a cell process starts (refused while the cell's lease is live).
    StartCell {
        cell: u32,
    },
    /// HO-L2: the cell's current process (or, `stale`, the one before it) renews its lease or,
    /// `release`, ends it.
    Lease {
        cell: u32,
        stale: bool,
        release: bool,
    },
    /// HO-L4: remove at most `batch` ended attempt records older than the retention (`short`:
    /// a retention the store refuses: under the 1 h floor).
    Reap {
        batch: u32,
        short: bool,
    },
}

fn claim() -> impl Strategy<Value = Claim> {
    prop_oneof![
        6 => Just(Claim::Current),
        1 => Just(Claim::OlderEpoch),
        1 => Just(Claim::OlderGeneration),
        1 => Just(Claim::NewerIncarnation),
        1 => Just(Claim::OtherCell),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let host = 0..HOSTS.len();
    // Mostly the capable targets; 3 lacks the capability, 5 is unknown.
    let target = prop_oneof![4 => Just(2u32), 3 => Just(1u32), 2 => Just(4u32), 1 => Just(3u32),
                             1 => Just(5u32)];
    prop_oneof![
        16 => (host.clone(), target.clone(), claim(), prop_oneof![
                6 => Just(Meas::Good), 1 => Just(Meas::Stale), 1 => Just(Meas::Weak),
                1 => Just(Meas::Future)],
              prop_oneof![6 => Just(100u8), 1 => Just(0u8), 1 => Just(50u8), 1 => Just(101u8)])
            .prop_map(|(host, target, claim, meas, cohort)| Op::Txn { host, target, claim, meas, cohort }),
        3 => (host.clone(), target.clone(), claim())
            .prop_map(|(host, target, claim)| Op::Reconcile { host, target, claim }),
        3 => (0usize..64, any::<bool>()).prop_map(|(k, reconcile)| Op::Duplicate { k, reconcile }),
        1 => host.clone().prop_map(|host| Op::Forged { host }),
        4 => (host.clone(), 1u32..=5, -1i8..=1, any::<bool>())
            .prop_map(|(host, cell, inc, capable)| Op::Register { host, cell, inc, capable }),
        3 => host.clone().prop_map(|host| Op::RegisterAssigned { host }),
        2 => (host.clone(), claim()).prop_map(|(host, claim)| Op::Drain { host, claim }),
        2 => Just(Op::Expire),
        3 => prop_oneof![4 => Just(1_000u64), 2 => Just(21_000), 1 => Just(30_000),
                         1 => Just(61_000)]
            .prop_map(Op::Advance),
        1 => any::<bool>().prop_map(Op::Enable),
        1 => (1u32..=4, 0u32..=3).prop_map(|(cell, capacity)| Op::Capacity { cell, capacity }),
    ]
}

/// HO-L2: cell processes starting, renewing and releasing their leases, among registrations
/// (a start bumps the incarnation a registration is checked against) and handoffs.
fn lease_op() -> impl Strategy<Value = Op> {
    let host = 0..HOSTS.len();
    prop_oneof![
        4 => (1u32..=5).prop_map(|cell| Op::StartCell { cell }),
        4 => (1u32..=5, any::<bool>(), any::<bool>())
            .prop_map(|(cell, stale, release)| Op::Lease { cell, stale, release }),
        2 => (host.clone(), 1u32..=2, -1i8..=1, any::<bool>())
            .prop_map(|(host, cell, inc, capable)| Op::Register { host, cell, inc, capable }),
        2 => host.clone().prop_map(|host| Op::RegisterAssigned { host }),
        2 => host.clone().prop_map(|host| Op::Txn {
            host, target: 2, claim: Claim::Current, meas: Meas::Good, cohort: 100 }),
        3 => prop_oneof![Just(1_000u64), Just(21_000), Just(30_000)].prop_map(Op::Advance),
    ]
}

/// HO-L4: commits, registrations, expiries and fences among reaps, with hours passing (the
/// retention is the 1 h floor) as well as seconds.
fn reap_op() -> impl Strategy<Value = Op> {
    let host = 0..HOSTS.len();
    prop_oneof![
        6 => (host.clone(), prop_oneof![3 => Just(2u32), 1 => Just(1u32)], claim())
            .prop_map(|(host, target, claim)| Op::Txn {
                host, target, claim, meas: Meas::Good, cohort: 100 }),
        2 => (host.clone(), Just(2u32), claim())
            .prop_map(|(host, target, claim)| Op::Reconcile { host, target, claim }),
        2 => (0usize..64, any::<bool>()).prop_map(|(k, reconcile)| Op::Duplicate { k, reconcile }),
        3 => host.clone().prop_map(|host| Op::RegisterAssigned { host }),
        1 => (host.clone(), claim()).prop_map(|(host, claim)| Op::Drain { host, claim }),
        2 => Just(Op::Expire),
        4 => (1u32..=4, prop_oneof![6 => Just(false), 1 => Just(true)])
            .prop_map(|(batch, short)| Op::Reap { batch, short }),
        4 => prop_oneof![3 => Just(21_000u64), 2 => Just(61_000), 2 => Just(1_800_000),
                         2 => Just(3_600_000)]
            .prop_map(Op::Advance),
    ]
}

/// HO-L4: the retention of a generated reap (`short`: one the store refuses).
fn reap_retention(short: bool) -> u64 {
    if short {
        MIN_ATTEMPT_RETENTION_MS - 1
    } else {
        MIN_ATTEMPT_RETENTION_MS
    }
}

/// What one step returned, comparable across the three stores.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Txn(TxnOutcome),
    Reconcile(Option<TxnOutcome>),
    Register(Result<SourceAuthority, RegisterRefusal>),
    Drain(DrainWrite),
    Expired(Vec<OpId>),
    Setup(Result<(), StoreError>),
    Start(Result<Incarnation, StartRefusal>),
    /// The lease was renewed or released (`false`: the cell is no longer that process's).
    Lease(bool),
    /// HO-L4: records removed, or the retention refused.
    Reaped(Result<u32, RetentionError>),
    None,
}

struct World {
    now: MonoMs,
    reference: AssignmentStore,
    sent: Vec<HandoffRequest>,
}

impl World {
    fn claim(&self, host: HostId, claim: Claim) -> SourceAuthority {
        let cur = self.reference.authority(host).unwrap_or(SourceAuthority {
            cell: CellId(1),
            host,
            epoch: Epoch(1),
            incarnation: Incarnation(1),
            generation: Generation(1),
        });
        match claim {
            Claim::Current => cur,
            Claim::OlderEpoch => SourceAuthority {
                epoch: Epoch(cur.epoch.0.saturating_sub(1)),
                ..cur
            },
            Claim::OlderGeneration => SourceAuthority {
                generation: Generation(cur.generation.0.saturating_sub(1)),
                ..cur
            },
            Claim::NewerIncarnation => SourceAuthority {
                incarnation: Incarnation(cur.incarnation.0 + 1),
                ..cur
            },
            Claim::OtherCell => SourceAuthority {
                cell: CellId(if cur.cell == CellId(1) { 2 } else { 1 }),
                ..cur
            },
        }
    }

    fn measurement(&self, meas: Meas) -> Measurement {
        let (at, cur, tgt) = match meas {
            Meas::Good => (self.now, 120, 60),
            Meas::Stale => (MonoMs(self.now.0.saturating_sub(61_000)), 120, 60),
            Meas::Weak => (self.now, 100, 90),
            Meas::Future => (self.now.plus_ms(5), 120, 60),
        };
        Measurement {
            measured_at: at,
            current_rtt_ms: cur,
            target_rtt_ms: tgt,
        }
    }
}

/// One step against the reference; returns the answer and the request (if any) to run on SQL.
enum Sql {
    Txn(HandoffRequest),
    Reconcile(HandoffRequest),
    Register(HostId, CellId, Incarnation, bool),
    Drain(SourceAuthority),
    Expire,
    Enable(bool),
    Cell(CellId, CellRow),
    Start(CellId, CellRow),
    Lease {
        cell: CellId,
        incarnation: Incarnation,
        release: bool,
    },
    Reap {
        retention_ms: u64,
        batch: u32,
    },
    None,
}

fn step_reference(w: &mut World, op: &Op) -> (Answer, Sql) {
    match *op {
        Op::Txn {
            host,
            target,
            claim,
            meas,
            cohort,
        } => {
            let req = HandoffRequest::new(
                w.claim(HOSTS[host], claim),
                CellId(target),
                cohort,
                w.measurement(meas),
            );
            w.sent.push(req);
            let out = w.reference.run_transaction(w.now, &req);
            (Answer::Txn(out), Sql::Txn(req))
        }
        Op::Reconcile {
            host,
            target,
            claim,
        } => {
            let req = HandoffRequest::new(
                w.claim(HOSTS[host], claim),
                CellId(target),
                100,
                w.measurement(Meas::Good),
            );
            w.sent.push(req);
            let out = w.reference.reconcile(w.now, &req);
            (Answer::Reconcile(out), Sql::Reconcile(req))
        }
        Op::Duplicate { k, reconcile } => {
            if w.sent.is_empty() {
                return (Answer::None, Sql::None);
            }
            let req = w.sent[k % w.sent.len()];
            if reconcile {
                let out = w.reference.reconcile(w.now, &req);
                (Answer::Reconcile(out), Sql::Reconcile(req))
            } else {
                let out = w.reference.run_transaction(w.now, &req);
                (Answer::Txn(out), Sql::Txn(req))
            }
        }
        Op::Forged { host } => {
            let mut req = HandoffRequest::new(
                w.claim(HOSTS[host], Claim::Current),
                CellId(2),
                100,
                w.measurement(Meas::Good),
            );
            req.op_id = OpId(uuid::Uuid::from_u128(0xbad));
            let out = w.reference.run_transaction(w.now, &req);
            (Answer::Txn(out), Sql::Txn(req))
        }
        Op::Register {
            host,
            cell,
            inc,
            capable,
        } => {
            let cur = w
                .reference
                .cell(CellId(cell))
                .map_or(1, |c| c.incarnation.0);
            let inc = Incarnation(cur.saturating_add_signed(i64::from(inc)));
            let out = w
                .reference
                .register_control(w.now, HOSTS[host], CellId(cell), inc, capable);
            (
                Answer::Register(out),
                Sql::Register(HOSTS[host], CellId(cell), inc, capable),
            )
        }
        Op::RegisterAssigned { host } => {
            let Some(a) = w.reference.authority(HOSTS[host]) else {
                return (Answer::None, Sql::None);
            };
            let inc = w
                .reference
                .cell(a.cell)
                .map_or(a.incarnation, |c| c.incarnation);
            let out = w
                .reference
                .register_control(w.now, HOSTS[host], a.cell, inc, true);
            (
                Answer::Register(out),
                Sql::Register(HOSTS[host], a.cell, inc, true),
            )
        }
        Op::Drain { host, claim } => {
            let auth = w.claim(HOSTS[host], claim);
            let out = w.reference.emergency_drain(&auth);
            (Answer::Drain(out), Sql::Drain(auth))
        }
        Op::Expire => (
            Answer::Expired(w.reference.expire_migrations(w.now)),
            Sql::Expire,
        ),
        Op::Advance(ms) => {
            w.now = w.now.plus_ms(ms);
            (Answer::None, Sql::None)
        }
        Op::Enable(on) => {
            w.reference.set_enabled(on);
            (Answer::None, Sql::Enable(on))
        }
        Op::Capacity { cell, capacity } => {
            let Some(mut row) = w.reference.cell(CellId(cell)).copied() else {
                return (Answer::None, Sql::None);
            };
            row.capacity = capacity;
            let out = w.reference.upsert_cell(CellId(cell), row);
            (Answer::Setup(out), Sql::Cell(CellId(cell), row))
        }
        Op::StartCell { cell } => {
            // A restart keeps the cell's capacity and capability (an unknown cell gets some).
            let row = w.reference.cell(CellId(cell)).copied().unwrap_or(CellRow {
                capacity: 3,
                handoff_capable: true,
                incarnation: Incarnation(0),
            });
            let out = w.reference.start_cell(
                CellId(cell),
                row.capacity,
                row.handoff_capable,
                w.now,
                LEASE_MS,
            );
            let started = CellRow {
                incarnation: out.unwrap_or(row.incarnation),
                ..row
            };
            (Answer::Start(out), Sql::Start(CellId(cell), started))
        }
        Op::Lease {
            cell,
            stale,
            release,
        } => {
            let current = w
                .reference
                .cell(CellId(cell))
                .map_or(1, |c| c.incarnation.0);
            let incarnation = Incarnation(current.saturating_sub(u64::from(stale)));
            let out = if release {
                w.reference
                    .release_cell_lease(CellId(cell), incarnation)
                    .is_ok()
            } else {
                w.reference
                    .renew_cell_lease(CellId(cell), incarnation, w.now, LEASE_MS)
                    .is_ok()
            };
            (
                Answer::Lease(out),
                Sql::Lease {
                    cell: CellId(cell),
                    incarnation,
                    release,
                },
            )
        }
        Op::Reap { batch, short } => {
            let retention_ms = reap_retention(short);
            let out = w.reference.reap_attempts(w.now, retention_ms, batch);
            (
                Answer::Reaped(out),
                Sql::Reap {
                    retention_ms,
                    batch,
                },
            )
        }
    }
}

/// HO-L2: the cell lease of the generated cell starts (shorter than the longest time step, so
/// leases also run out).
const LEASE_MS: u64 = 25_000;

async fn step_sql(store: &SqlStore, now: MonoMs, sql: &Sql) -> Answer {
    let name = format!("{:?}", store.dialect());
    let fail = |e| -> Answer { panic!("{name} store failed: {e}") };
    match sql {
        Sql::Txn(req) => store
            .run_transaction(now, req)
            .await
            .map_or_else(fail, Answer::Txn),
        Sql::Reconcile(req) => store
            .reconcile(now, req)
            .await
            .map_or_else(fail, Answer::Reconcile),
        Sql::Register(h, c, inc, capable) => store
            .register_control(now, *h, *c, *inc, *capable)
            .await
            .map_or_else(fail, Answer::Register),
        Sql::Drain(auth) => store
            .emergency_drain(auth)
            .await
            .map_or_else(fail, Answer::Drain),
        Sql::Expire => store
            .expire_migrations(now)
            .await
            .map_or_else(fail, Answer::Expired),
        Sql::Enable(on) => {
            store
                .set_enabled(*on)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            Answer::None
        }
        Sql::Cell(c, row) => store
            .upsert_cell(*c, *row)
            .await
            .map_or_else(fail, Answer::Setup),
        Sql::Start(c, row) => store
            .start_cell(*c, row.capacity, row.handoff_capable, "", "", now, LEASE_MS)
            .await
            .map_or_else(fail, Answer::Start),
        Sql::Lease {
            cell,
            incarnation,
            release,
        } => {
            let out = if *release {
                store.release_cell_lease(*cell, *incarnation).await
            } else {
                store
                    .renew_cell_lease(*cell, *incarnation, now, LEASE_MS)
                    .await
            };
            out.map_or_else(fail, Answer::Lease)
        }
        Sql::Reap {
            retention_ms,
            batch,
        } => store
            .reap_attempts(now, *retention_ms, *batch)
            .await
            .map_or_else(fail, Answer::Reaped),
        Sql::None => Answer::None,
    }
}

/// Empty every table (the settings row is rewritten by the caller).
async fn wipe(url: &str) {
    let pool = sqlx::AnyPool::connect(url).await.expect("reset pool");
    for t in [
        "ho_reservations",
        "ho_attempts",
        "ho_cooldowns",
        "ho_assignments",
        "ho_cells",
        "ho_activity",
        "ho_measurements",
        "ho_cell_load",
    ] {
        pool.execute(format!("DELETE FROM {t}").as_str())
            .await
            .expect("reset");
    }
    pool.execute(
        "UPDATE ho_limit_shards SET window_start_ms = 0, commits = 0, in_flight = 0, \
         attempt_rows = 0, commit_tokens = 0, in_flight_tokens = 0, attempt_tokens = 0, \
         hosts = 0, host_tokens = 0",
    )
    .await
    .expect("reset limits");
    pool.close().await;
}

async fn reset(url: &str, store: &SqlStore) {
    wipe(url).await;
    store.put_settings(&config(), true).await.expect("settings");
    for (c, cap, capable) in CELLS {
        let row = CellRow {
            capacity: cap,
            handoff_capable: capable,
            incarnation: Incarnation(1),
        };
        store
            .upsert_cell(c, row)
            .await
            .expect("cell")
            .expect("cell");
    }
    for (k, h) in HOSTS.iter().enumerate() {
        let cell = if k == 2 { CellId(2) } else { CellId(1) };
        store
            .insert_host(*h, cell, true)
            .await
            .expect("host")
            .expect("host");
    }
}

fn fresh_reference() -> AssignmentStore {
    let mut r = AssignmentStore::new(config());
    for (c, cap, capable) in CELLS {
        r.upsert_cell(
            c,
            CellRow {
                capacity: cap,
                handoff_capable: capable,
                incarnation: Incarnation(1),
            },
        )
        .expect("cell");
    }
    for (k, h) in HOSTS.iter().enumerate() {
        let cell = if k == 2 { CellId(2) } else { CellId(1) };
        r.insert_host(*h, cell, true).expect("host");
    }
    r
}

struct Stats {
    steps: u64,
    committed: u64,
    outcomes: BTreeSet<String>,
    lease_answers: BTreeSet<String>,
    /// HO-L4: records reaped, and reaps refused.
    reaped: u64,
    reaps_refused: u64,
}

async fn run_case(
    stores: &[(&str, &SqlStore)],
    ops: &[Op],
    stats: &mut Stats,
) -> Result<(), TestCaseError> {
    for (url, store) in stores {
        reset(url, store).await;
    }
    let mut w = World {
        now: MonoMs(10_000_000),
        reference: fresh_reference(),
        sent: Vec::new(),
    };
    for (n, op) in ops.iter().enumerate() {
        let (expected, sql) = step_reference(&mut w, op);
        prop_assert_eq!(w.reference.check_invariants(), Ok(()));
        if let Answer::Txn(o) = &expected {
            if o.is_committed() {
                stats.committed += 1;
            }
            let tag = match o {
                TxnOutcome::RolledBack {
                    reason: AbortReason::Policy(_),
                } => "Policy".to_owned(),
                TxnOutcome::RolledBack { reason } => format!("{reason:?}"),
                other => format!("{other:?}"),
            };
            stats.outcomes.insert(
                tag.split([' ', '{', '('])
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
        let rows = w.reference.snapshot();
        match &expected {
            Answer::Start(out) => stats.lease_answers.insert(format!("start {}", out.is_ok())),
            Answer::Lease(out) => stats.lease_answers.insert(format!("lease {out}")),
            Answer::Reaped(Ok(n)) => {
                stats.reaped += u64::from(*n);
                false
            }
            Answer::Reaped(Err(_)) => {
                stats.reaps_refused += 1;
                false
            }
            _ => false,
        };
        for (_, store) in stores {
            let got = step_sql(store, w.now, &sql).await;
            prop_assert_eq!(
                &got,
                &expected,
                "{:?} answer differs at step {} ({:?})",
                store.dialect(),
                n,
                op
            );
            let got_rows = store.rows().await.expect("rows");
            prop_assert_eq!(
                &got_rows,
                &rows,
                "{:?} rows differ at step {} ({:?})",
                store.dialect(),
                n,
                op
            );
            // HO-S4: the limit shards count exactly these rows and no token outruns its room.
            let audit = store.audit_limits().await.expect("audit");
            prop_assert_eq!(
                audit,
                Ok(()),
                "{:?} limit shards at step {} ({:?})",
                store.dialect(),
                n,
                op
            );
        }
        stats.steps += 1;
    }
    Ok(())
}

/// A runtime, and an empty SQLite store (in the returned temp dir) and PostgreSQL store, each
/// with its URL.
fn open_stores(name: &str) -> (tokio::runtime::Runtime, TempDir, [(String, SqlStore); 2]) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tmp");
    let sqlite_url = format!(
        "sqlite://{}",
        dir.path().join(format!("{name}.db")).display()
    );
    let pg_url = rt.block_on(support_pg::fresh_db(name));
    let stores = rt.block_on(async {
        let opts = StoreOptions::default();
        let sqlite = SqlStore::connect(&sqlite_url, opts).await.expect("sqlite");
        let pg = SqlStore::connect(&pg_url, opts).await.expect("postgres");
        [(sqlite_url, sqlite), (pg_url, pg)]
    });
    (rt, dir, stores)
}

/// Run `cases` generated sequences of `op` (a fixed seed: the coverage assertions of the
/// callers must not depend on the luck of the draw) against the reference and both SQL stores.
fn run_generated(name: &str, op: impl Strategy<Value = Op>, cases: u32) -> Stats {
    let (rt, _dir, stores) = open_stores(name);
    let cases = std::env::var("SWITCHYARD_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            max_shrink_iters: 64,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let mut stats = Stats {
        steps: 0,
        committed: 0,
        outcomes: BTreeSet::new(),
        lease_answers: BTreeSet::new(),
        reaped: 0,
        reaps_refused: 0,
    };
    let stats_cell = std::cell::RefCell::new(&mut stats);
    let result = runner.run(&proptest::collection::vec(op, 10..40), |ops| {
        let stores = stores.each_ref().map(|(url, store)| (url.as_str(), store));
        let mut s = stats_cell.borrow_mut();
        rt.block_on(run_case(&stores, &ops, &mut s))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    stats
}

#[test]
fn ho_store_diff_reference_sqlite_postgres_identical_outcomes_and_rows() {
    let stats = run_generated("diff", op(), 64);
    eprintln!(
        "differential: {} steps, {} commits, outcome kinds {:?}",
        stats.steps, stats.committed, stats.outcomes
    );
    // The generator must reach the interesting paths, or the comparison proves little.
    assert!(stats.committed > 0, "no sequence committed");
    for kind in [
        "Committed",
        "AuthorityChanged",
        "Policy",
        "InvalidOpId",
        "Fenced",
        "ConcurrencyLimited",
        "RateLimited",
        "MigrationPending",
    ] {
        assert!(stats.outcomes.contains(kind), "no {kind} outcome generated");
    }
}

#[test]
fn ho_l2_store_diff_cell_leases_identical_answers_and_rows() {
    let stats = run_generated("diff_lease", lease_op(), 32);
    eprintln!(
        "differential (leases): {} steps, answers {:?}",
        stats.steps, stats.lease_answers
    );
    // Starts refused and taken, leases kept and lost.
    for answer in ["start true", "start false", "lease true", "lease false"] {
        assert!(
            stats.lease_answers.contains(answer),
            "no {answer} answer generated"
        );
    }
}

/// HO-L4: reaps among commits, registrations, expiries and fences remove the same rows from
/// the reference, SQLite and PostgreSQL (rows and the limit shards' audit compared after
/// every step), and refuse the same retention.
#[test]
fn ho_l4_store_diff_reaps_identical_answers_and_rows() {
    let stats = run_generated("diff_reap", reap_op(), 32);
    eprintln!(
        "differential (reaps): {} steps, {} commits, {} records reaped, {} reaps refused",
        stats.steps, stats.committed, stats.reaped, stats.reaps_refused
    );
    assert!(stats.reaped > 0, "no record reaped");
    assert!(stats.reaps_refused > 0, "no reap refused");
    assert!(stats.committed > 0, "no sequence committed");
}

async fn apply_call(store: &SqlStore, call: &StoreCall) -> Result<(), String> {
    let fail = |e: StoreFailure| format!("{call:?} failed: {e}");
    let differs = |got: &dyn std::fmt::Debug| format!("{call:?} answered {got:?}");
    macro_rules! expect {
        ($got:expr, $answer:expr) => {{
            let got = $got.await.map_err(fail)?;
            if got == *$answer {
                Ok(())
            } else {
                Err(differs(&got))
            }
        }};
    }
    match call {
        StoreCall::Configure { config } => store.put_settings(config, true).await.map_err(fail),
        StoreCall::SetEnabled { enabled } => store.set_enabled(*enabled).await.map_err(fail),
        StoreCall::UpsertCell { cell, row, answer } => {
            expect!(store.upsert_cell(*cell, *row), answer)
        }
        StoreCall::InsertHost {
            host,
            cell,
            desktop_capable,
            answer,
        } => expect!(store.insert_host(*host, *cell, *desktop_capable), answer),
        StoreCall::RunTransaction {
            now,
            request,
            answer,
        } => expect!(store.run_transaction(*now, request), answer),
        StoreCall::Reconcile {
            now,
            request,
            answer,
        } => expect!(store.reconcile(*now, request), answer),
        StoreCall::RegisterControl {
            now,
            host,
            cell,
            incarnation,
            desktop_capable,
            answer,
        } => expect!(
            store.register_control(*now, *host, *cell, *incarnation, *desktop_capable),
            answer
        ),
        StoreCall::EmergencyDrain { authority, answer } => {
            expect!(store.emergency_drain(authority), answer)
        }
        StoreCall::ExpireMigrations { now, answer } => {
            expect!(store.expire_migrations(*now), answer)
        }
        StoreCall::StartCell {
            cell,
            capacity,
            handoff_capable,
            now,
            lease_ms,
            answer,
        } => {
            // The SQL store refuses as the reference does (`StartRefusal`).
            expect!(
                store.start_cell(*cell, *capacity, *handoff_capable, "", "", *now, *lease_ms),
                answer
            )
        }
        StoreCall::RenewCellLease {
            cell,
            incarnation,
            now,
            lease_ms,
            answer,
        } => expect!(
            store.renew_cell_lease(*cell, *incarnation, *now, *lease_ms),
            &answer.is_ok()
        ),
        StoreCall::ReleaseCellLease {
            cell,
            incarnation,
            answer,
        } => expect!(
            store.release_cell_lease(*cell, *incarnation),
            &answer.is_ok()
        ),
    }
}

/// A short name for a call, for the coverage count.
fn call_kind(call: &StoreCall) -> String {
    let kind = format!("{call:?}");
    let kind = kind.split([' ', '{', '(']).next().unwrap_or_default();
    match call {
        StoreCall::RunTransaction { answer, .. } if answer.is_committed() => {
            format!("{kind}/committed")
        }
        StoreCall::RunTransaction {
            answer: TxnOutcome::RolledBack { .. },
            ..
        } => format!("{kind}/rolled-back"),
        StoreCall::RunTransaction { .. } => format!("{kind}/authority-changed"),
        StoreCall::Reconcile {
            answer: Some(TxnOutcome::RolledBack { .. }),
            ..
        } => format!("{kind}/fenced"),
        StoreCall::EmergencyDrain {
            answer: DrainWrite::Fenced { .. },
            ..
        } => format!("{kind}/fenced"),
        StoreCall::ExpireMigrations { answer, .. } if !answer.is_empty() => {
            format!("{kind}/expired")
        }
        StoreCall::StartCell { answer: Err(_), .. } => format!("{kind}/held"),
        _ => kind.to_owned(),
    }
}

/// HO-S4 / HO-A1 / HO-A2 / HO-A4 / HO-A5 / HO-A6 over the checker's witnesses: every handoff
/// trace (`checker/tests/traces/handoff.*.json`) is stepped through the model (the real core
/// and the reference store, projection checked against the trace), and every store call it
/// makes is applied to SQLite and PostgreSQL in the same order. After each trace step the
/// answers and all rows must equal the reference's.
#[test]
fn ho_store_diff_checker_traces_replayed_on_sqlite_and_postgres() {
    let (rt, _dir, stores) = open_stores("traces");
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../checker/tests/traces");
    let mut names: Vec<_> = std::fs::read_dir(&corpus)
        .expect("the checker's trace corpus")
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("handoff.") && n.ends_with(".json"))
        })
        .collect();
    names.sort();
    assert!(names.len() >= 20, "handoff traces found: {}", names.len());
    let mut kinds = std::collections::BTreeMap::<String, u64>::new();
    for path in &names {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let text = std::fs::read_to_string(path).expect("trace readable");
        let trace: Trace<HandoffParams, HoAction, HoProjection> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = HandoffModel::new(trace.params.clone());
        // The settings row is rewritten by `Configure`, the first call of every trace.
        for (url, _) in &stores {
            rt.block_on(wipe(url));
        }
        let mut journal = Vec::new();
        let mut state = model.init_state_journaled(&mut journal);
        assert_eq!(state.project(), trace.initial, "{name}: initial state");
        let actions = std::iter::once(None).chain(trace.steps.iter().map(Some));
        for (index, step) in actions.enumerate() {
            if let Some(step) = step {
                journal.clear();
                state = model.step_journaled(&state, step.action, &mut journal);
                assert_eq!(state.project(), step.after, "{name}: step {index} diverged");
            }
            let expected = state.store.snapshot();
            for (_, store) in &stores {
                let dialect = store.dialect();
                rt.block_on(async {
                    for call in &journal {
                        if let Err(e) = apply_call(store, call).await {
                            panic!("{name}: step {index}: {dialect:?}: {e}");
                        }
                    }
                    let rows = store.rows().await.expect("rows");
                    assert_eq!(
                        rows, expected,
                        "{name}: step {index}: {dialect:?} rows differ"
                    );
                });
            }
            for call in &journal {
                *kinds.entry(call_kind(call)).or_default() += 1;
            }
        }
    }
    eprintln!(
        "checker traces on SQLite and PostgreSQL: {} traces, calls {kinds:?}",
        names.len()
    );
    // The witnesses must exercise every store path, or the comparison proves little.
    for kind in [
        "Configure",
        "SetEnabled",
        "UpsertCell",
        "InsertHost",
        "RunTransaction/committed",
        "RunTransaction/rolled-back",
        "RunTransaction/authority-changed",
        "Reconcile",
        "Reconcile/fenced",
        "RegisterControl",
        "EmergencyDrain/fenced",
        "ExpireMigrations/expired",
        "StartCell",
        "StartCell/held",
        "RenewCellLease",
        "ReleaseCellLease",
    ] {
        assert!(
            kinds.contains_key(kind),
            "no {kind} call in the traces: {kinds:?}"
        );
    }
}
