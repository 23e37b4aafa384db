//! HO-L3 / OPS-2 over the real binary: a director whose source cell never answers shows the
//! stuck cell on `/readyz` and `/metrics` within about one request timeout, and logs it once
//! at WARN (not once per request or per pass).

mod support_bin;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use support_bin::{http_get, Process};
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::{StoreBounds, StoreConfig};
use switchyard_core::handoff::{CellId, HostId, Measurement, PolicyConfig};

const DARK: CellId = CellId(1);
const TGT: CellId = CellId(2);
const TIMEOUT_MS: u64 = 1_000;

/// A store with one host on a source cell whose internal URL accepts and never answers.
fn seed(db: &str, dark_url: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
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
        let now = Clock::default().now();
        for (cell, url) in [(DARK, dark_url), (TGT, "http://127.0.0.1:9")] {
            store
                .start_cell(cell, 1_000, true, url, url, now, 3_600_000)
                .await
                .expect("cell")
                .expect("lease");
        }
        store
            .insert_host(HostId(1), DARK, true)
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

#[test]
fn ho_l3_ops_2_a_stuck_cell_shows_on_readyz_and_metrics_within_one_request_timeout() {
    let dark = TcpListener::bind("127.0.0.1:0").expect("bind");
    let dark_url = format!("http://{}", dark.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for sock in dark.incoming().map_while(Result::ok) {
            held.push(sock);
        }
    });
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("d.db").display());
    seed(&db, &dark_url);
    let timeout = TIMEOUT_MS.to_string();
    let director = Process::start(&[
        "director",
        "--db",
        &db,
        "--interval-ms",
        "100",
        "--request-timeout-ms",
        &timeout,
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = director.value("metrics_addr=");
    let began = Instant::now();
    let shown = loop {
        let (status, body) = http_get(&addr, "/readyz");
        if status == 503 && body.contains("cell 1 (timeout") {
            break began.elapsed();
        }
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "never shown: {status} {body}\n{}",
            director.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        shown < Duration::from_millis(TIMEOUT_MS * 2),
        "the stuck cell showed {shown:?} after the probes listened (request timeout {TIMEOUT_MS} ms)"
    );
    let (_, metrics) = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("switchyard_director_cells_backed_off 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("switchyard_director_dispatch_failures_total{cell=\"1\",reason=\"timeout\"}"),
        "{metrics}"
    );
    // Its probes keep failing (1 s, then 2 s of backoff): still one WARN for the episode.
    std::thread::sleep(Duration::from_millis(3_500));
    let log = director.log();
    assert_eq!(
        log.matches("handoff source cell stuck").count(),
        1,
        "one WARN per change of state (OPS-2):\n{log}"
    );
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("handoff request failed")),
        "no per-request WARN:\n{log}"
    );
}
