//! EXPLAIN-1 on the real binary: `switchyard director --once --explain` against a seeded store
//! (a throwaway PostgreSQL, and SQLite) prints one `[handoff-explain]` line per host examined,
//! each naming the rule that decided and its numbers, then the JSON report.

#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use std::process::Command;
use std::time::Duration;

use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::{StoreBounds, StoreConfig};
use switchyard_core::handoff::{CellId, HostId, Measurement, PolicyConfig};

const SECRET: &str = "explain-test-secret-0123456789";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Cells: 1 the source (its internal URL refuses connections), 2 a capable target with room,
/// 3 a capable target that is full (capacity 1, host 9 on it), 4 a target without the
/// capability. Hosts 1..=9, each in the situation its expected rule names.
async fn seed(store: &SqlStore) {
    let config = StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 3_600_000,
        },
        max_in_flight_migrations: 100,
        rate_window_ms: 60_000,
        max_commits_per_window: 100,
        registration_timeout_ms: 30_000,
        bounds: StoreBounds::FLEET,
    };
    store.put_settings(&config, true).await.expect("settings");
    let now = Clock::default().now();
    let refusing = "http://127.0.0.1:9";
    for (cell, capacity, capable) in [
        (1, 1_000, true),
        (2, 1_000, true),
        (3, 1, true),
        (4, 1_000, false),
    ] {
        store
            .start_cell(
                CellId(cell),
                capacity,
                capable,
                refusing,
                refusing,
                now,
                3_600_000,
            )
            .await
            .expect("cell")
            .expect("lease");
    }
    let hosts: [(u64, u32, bool); 9] = [
        (1, 1, true),
        (2, 1, true),
        (3, 1, true),
        (4, 1, true),
        (5, 1, true),
        (6, 1, true),
        (7, 1, true),
        (8, 1, false),
        (9, 3, true),
    ];
    for (host, cell, desktop_capable) in hosts {
        store
            .insert_host(HostId(host), CellId(cell), desktop_capable)
            .await
            .expect("host")
            .expect("host");
    }
    let m = |measured_at, current_rtt_ms, target_rtt_ms| Measurement {
        measured_at,
        current_rtt_ms,
        target_rtt_ms,
    };
    let two_hours_ago = switchyard_core::MonoMs(now.as_ms() - 7_200_000);
    let measurements = [
        (1, 2, m(now, 120, 20)),
        (2, 2, m(now, 120, 100)),
        (3, 2, m(now, 200, 170)),
        (5, 3, m(now, 120, 20)),
        (6, 2, m(two_hours_ago, 120, 20)),
        (7, 4, m(now, 120, 20)),
        (8, 2, m(now, 120, 20)),
    ];
    for (host, target, measurement) in measurements {
        store
            .put_measurement(HostId(host), CellId(target), &measurement)
            .await
            .expect("measurement");
    }
}

fn explain_pass(db: &str) -> (Vec<String>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "director",
            "--once",
            "--explain",
            "--db",
            db,
            "--retries",
            "0",
            "--request-timeout-ms",
            "2000",
        ])
        .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
        .output()
        .expect("run the director");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "director --once --explain failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<String> = stdout.lines().map(str::to_owned).collect();
    let report = lines.pop().expect("the JSON report last");
    (lines, report)
}

fn check(lines: &[String], report: &str) {
    let expected: [(u64, &str); 9] = [
        (1, "eligible target_cell=2 current_rtt_ms=120 target_rtt_ms=20 improvement_ms=100>=25 improvement_percent=83>=20"),
        (2, "ineligible rule=improvement_below_ms current_rtt_ms=120 target_rtt_ms=100 improvement_ms=20<25 improvement_percent=16<20"),
        (3, "ineligible rule=improvement_below_percent current_rtt_ms=200 target_rtt_ms=170 improvement_ms=30>=25 improvement_percent=15<20"),
        (4, "ineligible rule=no_measurement"),
        (5, "ineligible rule=target_at_capacity target_cell=3 capacity_used=1/1"),
        (6, "ineligible rule=stale_measurement age_ms="),
        (7, "ineligible rule=target_cell_not_capable source_cell=1 target_cell=4"),
        (8, "ineligible rule=desktop_not_capable"),
        (9, "ineligible rule=no_measurement"),
    ];
    assert_eq!(
        lines.len(),
        expected.len(),
        "one line per host examined: {lines:#?}"
    );
    for (line, (host, tail)) in lines.iter().zip(expected) {
        let head = format!("[handoff-explain] host={host} {tail}");
        assert!(line.starts_with(&head), "expected {head:?}\n got {line:?}");
    }
    assert!(
        lines[5].ends_with(">freshness_window_ms=600000"),
        "{}",
        lines[5]
    );
    let report: serde_json::Value = serde_json::from_str(report).expect("the JSON report");
    assert_eq!(report["examined"], 9, "{report}");
    assert_eq!(report["ineligible"]["no_measurement"], 2, "{report}");
}

#[test]
fn explain_1_director_once_explain_prints_one_line_per_host_on_postgres() {
    let rt = runtime();
    let db = rt.block_on(async {
        let url = support_pg::fresh_db("explain_1").await;
        let store = SqlStore::connect(
            &url,
            StoreOptions {
                txn_timeout: Duration::from_secs(10),
                ..StoreOptions::default()
            },
        )
        .await
        .expect("store");
        seed(&store).await;
        store.close().await;
        url
    });
    let (lines, report) = explain_pass(&db);
    check(&lines, &report);
}

#[test]
fn explain_1_director_once_explain_prints_one_line_per_host_on_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("explain.db").display());
    runtime().block_on(async {
        let store = SqlStore::connect(&db, StoreOptions::default())
            .await
            .expect("store");
        seed(&store).await;
        store.close().await;
    });
    let (lines, report) = explain_pass(&db);
    check(&lines, &report);
}

/// Without `--explain` the output is the report alone (what scripts parse today).
#[test]
fn explain_1_without_the_flag_the_director_prints_only_the_report() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("plain.db").display());
    runtime().block_on(async {
        let store = SqlStore::connect(&db, StoreOptions::default())
            .await
            .expect("store");
        seed(&store).await;
        store.close().await;
    });
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["director", "--once", "--db", &db, "--retries", "0"])
        .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
        .output()
        .expect("run the director");
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(!stdout.contains("[handoff-explain]"));
    // --explain needs --once.
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["director", "--explain", "--db", &db])
        .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
        .output()
        .expect("run the director");
    assert_eq!(out.status.code(), Some(2), "a usage error");
}
