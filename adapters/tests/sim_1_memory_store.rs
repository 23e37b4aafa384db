//! SIM-1 / issue #42: the in-memory store (`MemoryStore`) answers the cells' and the director's
//! calls as the SQL store does. The same calls go, through the `Store` interface, to a SQLite
//! store and to a memory store; every answer must be equal, and so must the rows at the end.
//! The planned writes are the reference's (checked against both SQL stores by
//! `handoff_store_diff.rs`); what this checks is the memory store's own reads: the keyset
//! candidate page (range, limit, source capability, measured target's row, load and lease, an
//! unknown target, cooldown), resolve, cell info, host count, activity, the sweep lease's
//! compare-and-set and the lease-guarded cursor.

use std::fmt::Debug;
use std::time::Duration;

use switchyard_adapters::handoff::store::{MemoryStore, SqlStore, Store, StoreOptions};
use switchyard_core::handoff::store::{StoreBounds, StoreConfig};
use switchyard_core::handoff::{
    CellId, Generation, HandoffRequest, HostId, Incarnation, Measurement, PageCursor, PageQuery,
    PolicyConfig, SweepLeaseRow,
};
use switchyard_core::MonoMs;

const T0: MonoMs = MonoMs(1_800_000_000_000);
const LEASE_MS: u64 = 60_000;

fn config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 3_600_000,
        },
        max_in_flight_migrations: 8,
        rate_window_ms: 60_000,
        max_commits_per_window: 50,
        registration_timeout_ms: 30_000,
        bounds: StoreBounds::FLEET,
    }
}

/// Both stores, SQL first.
struct Pair {
    stores: [Store; 2],
    _dir: tempfile::TempDir,
}

impl Pair {
    async fn new() -> Pair {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!("sqlite://{}", dir.path().join("ho.db").display());
        let opts = StoreOptions {
            txn_timeout: Duration::from_secs(10),
            ..StoreOptions::default()
        };
        let sql = SqlStore::connect(&url, opts).await.expect("store");
        sql.put_settings(&config(), true).await.expect("settings");
        Pair {
            stores: [sql.into(), MemoryStore::new(config()).into()],
            _dir: dir,
        }
    }

    /// Run `call` on both stores; the answers must be equal. Returns the SQL store's.
    async fn same<T, F, Fut>(&self, what: &str, call: F) -> T
    where
        T: PartialEq + Debug,
        F: Fn(Store) -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let sql = call(self.stores[0].clone()).await;
        let mem = call(self.stores[1].clone()).await;
        assert_eq!(sql, mem, "{what}: SQLite (left) and memory (right) differ");
        sql
    }
}

fn measured(current_rtt_ms: u32, target_rtt_ms: u32) -> Measurement {
    Measurement {
        measured_at: T0,
        current_rtt_ms,
        target_rtt_ms,
    }
}

#[tokio::test]
async fn sim_1_memory_store_answers_the_cells_and_the_director_as_sqlite() {
    let p = Pair::new().await;
    // Cells 1 and 2 started by processes (URLs, leases); 3 started then released; 4 never.
    for (cell, capable) in [(1, true), (2, true), (3, false)] {
        let url = format!("http://127.0.0.1:{}", 7_000 + cell);
        p.same("start_cell", |s| {
            let url = url.clone();
            async move {
                s.start_cell(CellId(cell), 10, capable, &url, &url, T0, LEASE_MS)
                    .await
                    .map_err(|e| e.to_string())
            }
        })
        .await
        .expect("answered")
        .expect("started");
    }
    p.same("release", |s| async move {
        s.release_cell_lease(CellId(3), Incarnation(1))
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .expect("released");
    p.same("renew another's", |s| async move {
        s.renew_cell_lease(CellId(1), Incarnation(9), T0, LEASE_MS)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .expect("answered");
    // Hosts 1..=7 over cells 1..=3 (odd ids not desktop-capable).
    for h in 1..=7u64 {
        let cell = CellId(u32::try_from(h % 3).expect("cell") + 1);
        p.same("insert_host", |s| async move {
            s.insert_host(HostId(h), cell, h % 2 == 0)
                .await
                .map_err(|e| e.to_string())
        })
        .await
        .expect("answered")
        .expect("inserted");
    }
    let _known = p
        .same("insert_host of a known host", |s| async move {
            s.insert_host(HostId(1), CellId(2), true)
                .await
                .map_err(|e| e.to_string())
        })
        .await
        .expect("answered");
    // Measurements: towards a live cell, a released one, one that does not exist; host 7 none.
    for (h, target) in [(1, 2), (2, 1), (3, 2), (4, 3), (5, 9), (6, 1)] {
        p.same("put_measurement", |s| async move {
            s.put_measurement(HostId(h), CellId(target), &measured(120, 40))
                .await
                .map_err(|e| e.to_string())
        })
        .await
        .expect("measured");
    }
    // A move of host 4 (cell 2 → 1): a cooldown, the loads change, a reservation.
    let auth = p
        .same("authority", |s| async move {
            s.authority(HostId(4)).await.map_err(|e| e.to_string())
        })
        .await
        .expect("read")
        .expect("host 4");
    let req = HandoffRequest::new(auth, CellId(1), 100, measured(120, 40));
    let out = p
        .same("run_transaction", |s| async move {
            s.run_transaction(T0, &req).await.map_err(|e| e.to_string())
        })
        .await
        .expect("answered");
    assert!(out.is_committed(), "{out:?}");

    // The director's page: whole, keyset slices, limits, a wrapped segment, an empty range.
    let queries = [
        (None, None, 100),
        (None, None, 3),
        (Some(2), None, 2),
        (Some(3), Some(6), 100),
        (None, Some(4), 100),
        (Some(6), Some(6), 10),
        (Some(6), Some(2), 10),
        (Some(7), None, 10),
        (None, None, 0),
    ];
    for (after, through, limit) in queries {
        let q = PageQuery {
            after: after.map(HostId),
            through: through.map(HostId),
            limit,
        };
        let page = p
            .same(&format!("candidate_page {q:?}"), |s| async move {
                s.candidate_page(q).await.map_err(|e| e.to_string())
            })
            .await
            .expect("page");
        if (after, through, limit) == (None, None, 100) {
            assert_eq!(page.len(), 7, "every host: {page:?}");
            assert!(
                page.iter()
                    .any(|r| r.candidate.measurement.is_some() && r.target.is_none()),
                "a target that is no cell is no target: {page:?}"
            );
            assert!(
                page.iter().any(|r| r.candidate.cooldown_until.is_some()),
                "the moved host cools down: {page:?}"
            );
        }
    }
    for h in [1, 2, 5, 8] {
        p.same("resolve", |s| async move {
            s.resolve(HostId(h)).await.map_err(|e| e.to_string())
        })
        .await
        .expect("resolved");
    }
    for c in [1, 3, 4] {
        p.same("cell_info", |s| async move {
            s.cell_info(CellId(c)).await.map_err(|e| e.to_string())
        })
        .await
        .expect("read");
    }
    p.same("host_count", |s| async move {
        s.host_count().await.map_err(|e| e.to_string())
    })
    .await
    .expect("counted");
    p.same("recorded_attempt", |s| async move {
        s.recorded_attempt(req.op_id)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .expect("read");

    // Activity: renewed, released only by its own cell.
    let until = T0.plus_ms(90_000);
    p.same("renew_activity", |s| async move {
        s.renew_activity(HostId(4), CellId(2), Generation(1), until)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .expect("renewed");
    for (cell, what) in [(1, "release by another cell"), (2, "release by its cell")] {
        p.same(what, |s| async move {
            s.release_activity(HostId(4), CellId(cell))
                .await
                .map_err(|e| e.to_string())?;
            s.activity(HostId(4)).await.map_err(|e| e.to_string())
        })
        .await
        .expect("read");
    }

    // The sweep lease's compare-and-set and the cursor it guards.
    let row = |holder: u64, until_ms: u64, epoch: u64| SweepLeaseRow {
        holder,
        until_ms,
        epoch,
    };
    let first = row(11, T0.0 + 30_000, 1);
    let second = row(22, T0.0 + 90_000, 2);
    let claims = [
        (None, first, true),
        (None, second, false),
        (Some(row(22, 0, 1)), second, false),
        (Some(row(11, 0, 1)), second, true),
    ];
    for (seen, new, won) in claims {
        let taken = p
            .same("claim_sweep_lease", |s| async move {
                s.claim_sweep_lease("d", seen, new, "director d")
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
            .expect("answered");
        assert_eq!(taken, won, "{seen:?} -> {new:?}");
        p.same("load_sweep_lease", |s| async move {
            s.load_sweep_lease("d").await.map_err(|e| e.to_string())
        })
        .await
        .expect("read");
    }
    let saves = [
        (first, T0.0, false),
        (second, T0.0 + 90_000, false),
        (second, T0.0 + 89_999, true),
        (row(22, 0, 3), T0.0, false),
    ];
    for (i, (lease, now_ms, saved)) in saves.into_iter().enumerate() {
        let cursor = PageCursor {
            after: Some(HostId(u64::try_from(i).expect("i") + 1)),
        };
        let done = p
            .same("save_cursor_held", |s| async move {
                s.save_cursor_held("d", cursor, lease, now_ms)
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
            .expect("answered");
        assert_eq!(done, saved, "{lease:?} at {now_ms}");
        p.same("load_cursor", |s| async move {
            s.load_cursor("d").await.map_err(|e| e.to_string())
        })
        .await
        .expect("read");
    }
    p.same("load_cursor of another", |s| async move {
        s.load_cursor("other").await.map_err(|e| e.to_string())
    })
    .await
    .expect("read");

    // The rows, last: the same tables.
    p.same("rows", |s| async move {
        s.rows().await.map_err(|e| e.to_string())
    })
    .await
    .expect("rows");
}

/// SIM-1: `Clock::on_tokio_time` reads its start, then moves with tokio's (paused) time: a
/// sleep of an hour moves it an hour, `sleep_until` wakes at the instant asked, `advance`
/// still steps it forward.
#[tokio::test(start_paused = true)]
async fn sim_1_a_clock_on_tokio_time_moves_with_paused_time() {
    use switchyard_adapters::handoff::clock::Clock;
    let clock = Clock::on_tokio_time(T0);
    let twin = clock.clone();
    assert_eq!(clock.now(), T0);
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    assert_eq!(twin.now(), T0.plus_ms(3_600_000), "a clone reads the same");
    let at = T0.plus_ms(2 * 3_600_000 + 5);
    clock.sleep_until(at).await;
    assert_eq!(clock.now(), at, "woken at the instant asked, not later");
    clock.advance(10);
    assert_eq!(twin.now(), at.plus_ms(10));
    // A wall clock is not moved by tokio's time.
    let wall = Clock::default();
    let before = wall.now();
    tokio::time::sleep(Duration::from_secs(86_400)).await;
    assert!(
        wall.now().since_ms(before) < 3_600_000,
        "the wall clock did not jump a day"
    );
}
