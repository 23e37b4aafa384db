//! HO-L3 / OPS-2 / SEC-2 over real sockets: a director refused by a real cell says why (the
//! cell's word, in its health, its report and its log), measures each cell's clock offset from
//! the answers' `Date` and names it once before the cell refuses; and OPS-1: a stop asked in
//! the middle of a long pass ends it at a page boundary within about one request timeout.

mod handoff_rig;
mod support_log;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::Router;
use handoff_rig::{Backend, Rig, SRC, TGT};
use support_log::Log;
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::director::{Director, DirectorConfig};
use switchyard_adapters::handoff::proto::{HandoffAnswer, HANDOFF_PATH};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_adapters::stop::Stop;
use switchyard_core::handoff::{
    CellFailure, DirectorPolicy, DispatchLimits, HandoffReply, HandoffRequest, HostId, Measurement,
    QuiescenceCounters, RefusalReason, ScanLimits,
};

const TIMEOUT: Duration = Duration::from_millis(1_500);

fn config(
    id: &str,
    secret: Secret,
    limits: ScanLimits,
    dispatch: DispatchLimits,
) -> DirectorConfig {
    DirectorConfig {
        id: id.into(),
        policy: DirectorPolicy {
            enabled: true,
            cohort_percent: 100,
            policy: handoff_rig::store_config().policy,
        },
        limits,
        max_failures: 100,
        request_timeout: TIMEOUT,
        retries: 0,
        secret,
        interval: Duration::from_secs(1),
        dispatch,
    }
}

fn one_page() -> ScanLimits {
    ScanLimits {
        page_size: 10,
        max_pages: 1,
        max_dispatch: 100,
    }
}

/// A rig with the real source and target cells, their clock `ahead_ms` ahead of the
/// director's (set before they start: their leases and answers follow it), and host 1 on the
/// source with a fresh measurement (stamped by the director's clock) towards the target.
async fn rig_with_a_host(tag: &str, ahead_ms: u64) -> Rig {
    let mut rig = Rig::new(Backend::Sqlite, tag).await;
    rig.clock.advance(ahead_ms);
    rig.start(SRC).await;
    rig.start(TGT).await;
    rig.store
        .insert_host(HostId(1), SRC, true)
        .await
        .expect("host")
        .expect("host");
    let m = Measurement {
        measured_at: Clock::default().now(),
        current_rtt_ms: 120,
        target_rtt_ms: 20,
    };
    rig.store
        .put_measurement(HostId(1), TGT, &m)
        .await
        .expect("measurement");
    rig
}

#[tokio::test]
async fn ho_l3_sec_2_a_wrong_secret_is_named_by_the_cells_word_in_health_report_and_log() {
    let (log, _guard) = Log::capture();
    let rig = rig_with_a_host("reasons-secret", 0).await;
    let wrong = Secret::new(b"not-the-cells-secret-0123456789", "internal").expect("secret");
    let d = Director::new(
        config("d-secret", wrong, one_page(), DispatchLimits::DEFAULT),
        rig.store.clone(),
        Clock::default(),
    );
    let report = d.pass().await.expect("pass");
    let why = RefusalReason::UnknownKey;
    assert_eq!(
        report.send_failed.get(&1).map(String::as_str),
        Some("send=refused why=unknown_key"),
        "{report:?}"
    );
    let health = d.health().lock().expect("health").clone();
    assert_eq!(
        health.stuck.get(&SRC).map(|(f, _)| *f),
        Some(CellFailure::Refused(why))
    );
    assert_eq!(
        health.failures.get(&(SRC, CellFailure::Refused(why))),
        Some(&1)
    );
    // The refusal's `Date` was measured too: the same machine, no skew.
    let (offset, skewed) = health.clock_offsets[&SRC];
    assert!(offset.abs() < 2_000 && !skewed, "{offset} {skewed}");
    let log = log.text();
    let stuck: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("handoff source cell stuck"))
        .collect();
    assert_eq!(stuck.len(), 1, "{log}");
    assert!(
        stuck[0].contains("WARN") && stuck[0].contains("why=\"unknown_key\""),
        "{log}"
    );
    assert!(
        stuck[0].contains("--secret"),
        "the hint names the flag: {log}"
    );
    rig.store.close().await;
}

#[tokio::test]
async fn ho_l3_a_director_clock_60_s_off_is_named_stale_timestamp_with_its_measured_offset() {
    let (log, _guard) = Log::capture();
    // The cells' clock 60 s ahead of the director's (their window is 30 s).
    let rig = rig_with_a_host("reasons-stale", 60_000).await;
    let clock = Clock::default();
    let d = Director::new(
        config(
            "d-stale",
            Rig::internal_secret(),
            one_page(),
            DispatchLimits::DEFAULT,
        ),
        rig.store.clone(),
        clock,
    );
    let report = d.pass().await.expect("pass");
    assert_eq!(
        report.send_failed.get(&1).map(String::as_str),
        Some("send=refused why=stale_timestamp"),
        "{report:?}"
    );
    let health = d.health().lock().expect("health").clone();
    assert_eq!(
        health.stuck.get(&SRC).map(|(f, _)| *f),
        Some(CellFailure::Refused(RefusalReason::StaleTimestamp))
    );
    // The cell's clock minus the director's: 60 s, to the Date's second.
    let (offset, skewed) = health.clock_offsets[&SRC];
    assert!(
        (58_500..=61_500).contains(&offset) && skewed,
        "{offset} {skewed}"
    );
    let log = log.text();
    assert_eq!(
        log.matches("the cell's clock is off the director's")
            .count(),
        1,
        "{log}"
    );
    assert!(log.contains("measurement_from_future"), "{log}");
    assert!(log.contains("why=\"stale_timestamp\""), "{log}");
    rig.store.close().await;
}

#[tokio::test]
async fn ho_l3_ops_2_a_clock_20_s_off_is_named_once_before_any_refusal_and_once_back() {
    let (log, _guard) = Log::capture();
    // 20 s: inside the cells' 30 s window (accepted), past half of it (named).
    let rig = rig_with_a_host("reasons-early", 20_000).await;
    let clock = Clock::default();
    let d = Director::new(
        config(
            "d-early",
            Rig::internal_secret(),
            one_page(),
            DispatchLimits::DEFAULT,
        ),
        rig.store.clone(),
        clock.clone(),
    );
    for _ in 0..3 {
        let report = d.pass().await.expect("pass");
        assert!(report.send_failed.is_empty(), "accepted: {report:?}");
        assert_eq!(report.dispatched, 1, "{report:?}");
    }
    let health = d.health().lock().expect("health").clone();
    assert!(health.stuck.is_empty());
    let (offset, skewed) = health.clock_offsets[&SRC];
    assert!(
        (18_500..=21_500).contains(&offset) && skewed,
        "{offset} {skewed}"
    );
    let text = log.text();
    let warned: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("the cell's clock is off the director's"))
        .collect();
    assert_eq!(warned.len(), 1, "once, not per request:\n{text}");
    assert!(
        warned[0].contains("WARN") && warned[0].contains("cell=1"),
        "{text}"
    );
    assert!(!text.contains("agrees with the director's again"), "{text}");
    // The director's clock set right: one INFO, the gauge's flag back to 0.
    clock.advance(20_000);
    for _ in 0..2 {
        let report = d.pass().await.expect("pass");
        assert!(report.send_failed.is_empty(), "accepted: {report:?}");
    }
    let (offset, skewed) = d.health().lock().expect("health").clock_offsets[&SRC];
    assert!(offset.abs() < 1_500 && !skewed, "{offset} {skewed}");
    let text = log.text();
    assert_eq!(
        text.matches("agrees with the director's again").count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.matches("the cell's clock is off the director's")
            .count(),
        1,
        "{text}"
    );
    rig.store.close().await;
}

/// A source cell that answers `busy` after `delay`, and tells `seen` each host it received
/// and `answered` each host it answered.
async fn slow_cell(
    delay: Duration,
) -> (
    String,
    Arc<Mutex<Vec<u64>>>,
    tokio::sync::mpsc::UnboundedReceiver<u64>,
) {
    let answered: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (seen_tx, seen) = tokio::sync::mpsc::unbounded_channel();
    let record = answered.clone();
    let app = Router::new().route(
        HANDOFF_PATH,
        post(move |body: axum::body::Bytes| {
            let record = record.clone();
            let seen_tx = seen_tx.clone();
            async move {
                let req: HandoffRequest = serde_json::from_slice(&body).expect("a request");
                let _ = seen_tx.send(req.source.host.0);
                tokio::time::sleep(delay).await;
                record.lock().expect("lock").push(req.source.host.0);
                let reply = HandoffReply::Busy {
                    op_id: req.op_id,
                    counters: QuiescenceCounters {
                        client_conns: 1,
                        ..QuiescenceCounters::default()
                    },
                };
                axum::Json(HandoffAnswer::of(reply))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, answered, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l3_ops_1_a_stop_mid_pass_ends_at_a_page_boundary_within_one_request_timeout() {
    const PAGE: u64 = 4;
    const HOSTS: u64 = 40;
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("ho.db").display());
    let store = SqlStore::connect(&url, StoreOptions::default())
        .await
        .expect("store");
    store
        .put_settings(&handoff_rig::store_config(), true)
        .await
        .expect("settings");
    let clock = Clock::default();
    // Each answer takes half a request timeout: the pass would take ~10 s to the end.
    let (slow, answered, mut seen) = slow_cell(TIMEOUT / 2).await;
    let now = clock.now();
    for (cell, url) in [(SRC, slow.as_str()), (TGT, "http://127.0.0.1:9")] {
        store
            .start_cell(cell, 1_000, true, url, url, now, 3_600_000)
            .await
            .expect("cell")
            .expect("lease");
    }
    let m = Measurement {
        measured_at: now,
        current_rtt_ms: 120,
        target_rtt_ms: 20,
    };
    for h in 1..=HOSTS {
        store
            .insert_host(HostId(h), SRC, true)
            .await
            .expect("host")
            .expect("host");
        store
            .put_measurement(HostId(h), TGT, &m)
            .await
            .expect("measurement");
    }
    let d = Director::new(
        config(
            "d-stop",
            Rig::internal_secret(),
            ScanLimits {
                page_size: u32::try_from(PAGE).expect("page"),
                max_pages: 100,
                max_dispatch: 1_000,
            },
            DispatchLimits {
                max_in_flight: 3,
                max_in_flight_per_cell: 3,
                max_pages_ahead: 2,
                ..DispatchLimits::DEFAULT
            },
        ),
        store.clone(),
        clock,
    );
    let stop = Stop::new();
    let listener = stop.listener();
    let pass = tokio::spawn(async move { d.pass_until(&listener).await });
    // Stop once the sixth request has reached the cell (in the middle of page 2).
    for _ in 0..6 {
        seen.recv().await.expect("a request");
    }
    let asked = Instant::now();
    stop.stop();
    let report = pass.await.expect("task").expect("pass");
    let took = asked.elapsed();
    assert!(
        took < TIMEOUT * 2,
        "the pass ended {took:?} after the stop (one request timeout is {TIMEOUT:?})"
    );
    assert!(report.stopped, "{report:?}");
    assert!(report.dropped_at_stop > 0, "{report:?}");
    assert!(report.pages < 10, "no page read after the stop: {report:?}");
    let mut done = answered.lock().expect("lock").clone();
    done.sort_unstable();
    // Every request sent was answered (the sends in flight ended), none after the stop.
    assert_eq!(
        u64::try_from(done.len()).expect("n"),
        u64::from(report.dispatched)
    );
    // The cursor: at a page boundary, past pages whose every host was sent and answered,
    // and not past a host that was not.
    let cursor = store.load_cursor("d-stop").await.expect("cursor").after;
    let at = cursor.map_or(0, |h| h.0);
    assert_eq!(at % PAGE, 0, "a page boundary: {cursor:?} {report:?}");
    assert!(at >= PAGE, "past the first page at least: {cursor:?}");
    assert_eq!(
        done.iter()
            .copied()
            .filter(|h| *h <= at)
            .collect::<Vec<_>>(),
        (1..=at).collect::<Vec<_>>(),
        "every host up to the cursor was answered"
    );
    assert!(
        done.last().is_some_and(|last| *last < HOSTS),
        "the pass did not run to its end: {done:?}"
    );
    store.close().await;
}

#[tokio::test]
async fn ops_2_passes_failing_on_the_store_warn_once_not_per_pass() {
    let (log, _guard) = Log::capture();
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("ho.db").display());
    let store = SqlStore::connect(&url, StoreOptions::default())
        .await
        .expect("store");
    store
        .put_settings(&handoff_rig::store_config(), true)
        .await
        .expect("settings");
    let mut cfg = config(
        "d-ops2",
        Rig::internal_secret(),
        one_page(),
        DispatchLimits::DEFAULT,
    );
    cfg.interval = Duration::from_millis(100);
    let d = Director::new(cfg, store.clone(), Clock::default());
    let totals = d.totals();
    let stop = Stop::new();
    let run = tokio::spawn(d.run(stop.listener()));
    // One good pass, then the store goes away: every later pass fails with the same cause.
    let passes = |min: u64| {
        let totals = totals.clone();
        async move {
            while totals.lock().expect("totals").passes < min {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    passes(1).await;
    store.close().await;
    passes(5).await;
    stop.stop();
    let t = run.await.expect("run");
    assert!(t.failed_passes >= 3, "{t:?}");
    let text = log.text();
    let warned: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("director pass failed"))
        .collect();
    assert_eq!(
        u64::try_from(warned.len()).expect("n"),
        t.failed_passes,
        "one line per failed pass:\n{text}"
    );
    assert_eq!(
        warned.iter().filter(|l| l.contains("WARN")).count(),
        1,
        "WARN once, when the passes start failing:\n{text}"
    );
    assert!(
        warned[1..]
            .iter()
            .all(|l| l.contains("INFO") && l.contains("same cause")),
        "{text}"
    );
}
