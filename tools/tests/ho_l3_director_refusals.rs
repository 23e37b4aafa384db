//! HO-L3 / OPS-2 / EXPLAIN-1 over the real binaries: a director whose secret is not the
//! cell's is refused by a real cell process, and says why with the cell's word (`unknown_key`):
//! on `/readyz`, in `switchyard_director_refusals_total{cell,why}`, once in its WARN line, and
//! on the host's `director --once --explain` line; it also measures the cell's clock offset
//! (`switchyard_director_cell_clock_offset_ms{cell}`) from the refusals' `Date`.

mod support_bin;

use std::process::Command;
use std::time::{Duration, Instant};

use support_bin::{cell_args, http_get, Process};
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::{StoreBounds, StoreConfig};
use switchyard_core::handoff::{CellId, HostId, Measurement, PolicyConfig};

const SRC: CellId = CellId(1);
const TGT: CellId = CellId(2);
const WRONG_SECRET: &str = "not-the-cells-secret-0123456789";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn settings(db: &str) {
    runtime().block_on(async {
        let store = SqlStore::connect(db, StoreOptions::default())
            .await
            .expect("store");
        let config = StoreConfig {
            enabled: true,
            policy: PolicyConfig {
                freshness_window_ms: 3_600_000,
                host_cooldown_ms: 60_000,
            },
            max_in_flight_migrations: 100,
            rate_window_ms: 60_000,
            max_commits_per_window: 100,
            registration_timeout_ms: 30_000,
            bounds: StoreBounds::FLEET,
        };
        store.put_settings(&config, true).await.expect("settings");
        store.close().await;
    });
}

/// Host 1 on the (running) source cell, a target cell row, a fresh measurement.
fn seed_host(db: &str) {
    runtime().block_on(async {
        let store = SqlStore::connect(db, StoreOptions::default())
            .await
            .expect("store");
        let now = Clock::default().now();
        let url = "http://127.0.0.1:9";
        store
            .start_cell(TGT, 1_000, true, url, url, now, 3_600_000)
            .await
            .expect("cell")
            .expect("lease");
        store
            .insert_host(HostId(1), SRC, true)
            .await
            .expect("host")
            .expect("host");
        let m = Measurement {
            measured_at: now,
            current_rtt_ms: 120,
            target_rtt_ms: 20,
        };
        store
            .put_measurement(HostId(1), TGT, &m)
            .await
            .expect("measurement");
        store.close().await;
    });
}

/// A running source cell (the test secret) and host 1 on it.
fn cell_and_host(dir: &tempfile::TempDir) -> (String, Process) {
    let db = format!("sqlite://{}", dir.path().join("d.db").display());
    settings(&db);
    let cell = Process::start(&cell_args(&db, "1", &[]));
    let _ = cell.value("url=");
    seed_host(&db);
    (db, cell)
}

#[test]
fn ho_l3_ops_2_a_refusal_shows_the_cells_word_on_readyz_metrics_and_once_in_the_log() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, _cell) = cell_and_host(&dir);
    let director = Process::start(&[
        "director",
        "--db",
        &db,
        "--secret",
        WRONG_SECRET,
        "--interval-ms",
        "100",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = director.value("metrics_addr=");
    let began = Instant::now();
    loop {
        let (status, body) = http_get(&addr, "/readyz");
        if status == 503 && body.contains("cell 1 (refused: unknown_key") {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "never shown: {status} {body}\n{}",
            director.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, metrics) = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("switchyard_director_refusals_total{cell=\"1\",why=\"unknown_key\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("switchyard_director_cell_clock_offset_ms{cell=\"1\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("switchyard_director_cell_clock_skewed{cell=\"1\"} 0"),
        "{metrics}"
    );
    // Its probes keep being refused (1 s, then 2 s of backoff): still one WARN.
    std::thread::sleep(Duration::from_millis(3_500));
    let log = director.log();
    let stuck: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("handoff source cell stuck"))
        .collect();
    assert_eq!(
        stuck.len(),
        1,
        "one WARN per change of state (OPS-2):\n{log}"
    );
    assert!(
        stuck[0].contains("WARN") && stuck[0].contains("why=\"unknown_key\""),
        "{log}"
    );
}

#[test]
fn ho_l3_explain_1_the_explain_line_of_a_refused_host_says_why() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, _cell) = cell_and_host(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "director",
            "--db",
            &db,
            "--secret",
            WRONG_SECRET,
            "--once",
            "--explain",
        ])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("[handoff-explain] host=1 "))
        .unwrap_or_else(|| panic!("no line for host 1:\n{stdout}"));
    assert!(
        line.contains("eligible") && line.ends_with(" send=refused why=unknown_key"),
        "{line}"
    );
}
