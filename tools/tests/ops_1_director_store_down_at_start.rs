//! OPS-1 / OPS-2 / HO-L1 over the real binary: a director started while its PostgreSQL refuses
//! connections does not exit: it retries with a bounded backoff, says so at WARN (with the
//! next delay), answers `/readyz` "not ready: store unreachable" meanwhile, and once the
//! database is back it runs its passes. Red before: it exited 1 at once.

mod support_bin;
use support_bin::http_get;
#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use support_bin::Process;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_1_a_director_started_with_the_store_down_retries_then_runs_its_passes() {
    let url = support_pg::fresh_db("director_down").await;
    // The schema exists (a cell ran before); then the database refuses every connection.
    drop(
        switchyard_adapters::handoff::store::SqlStore::connect(&url, Default::default())
            .await
            .expect("schema"),
    );
    support_pg::outage_begin(&url).await;
    let mut director = Process::start(&[
        "director",
        "--db",
        url.as_str(),
        "--interval-ms",
        "200",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = director.value("metrics_addr=");
    // Two failed attempts, each naming the next delay, the first at WARN (OPS-2: once per
    // cause, the retries of the same cause at INFO); the process stays up.
    let first = director.value("store_unreachable_attempt=");
    let second = director.value("store_unreachable_attempt=");
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("1", "2"),
        "{}",
        director.log()
    );
    let log = director.log();
    let retries = log
        .lines()
        .filter(|l| l.contains("store_unreachable_attempt="))
        .collect::<Vec<_>>();
    assert!(retries.iter().all(|l| l.contains("retry_in_ms=")), "{log}");
    assert!(retries[0].contains("WARN"), "{log}");
    let (status, body) = http_get(&addr, "/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("store unreachable"), "{body}");
    assert_eq!(http_get(&addr, "/healthz").0, 200);
    support_pg::outage_end(&url).await;
    // Back: passes run.
    let examined = director.value("examined=");
    assert_eq!(examined, "0", "{}", director.log());
    assert!(
        director.log().contains("store reachable"),
        "{}",
        director.log()
    );
    let (status, _) = http_get(&addr, "/readyz");
    assert_eq!(status, 200);
    director.signal("TERM");
    let code = tokio::task::block_in_place(|| director.exit_within(support_bin::WAIT));
    assert_eq!(code, Some(0), "{}", director.log());
}

/// OPS-1: `--store-attempts` bounds the retries: after that many failures the director gives up
/// saying so, exit 1 (a store it cannot reach).
#[test]
fn ops_1_a_director_gives_up_after_its_store_attempts_with_exit_1() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!(
        "sqlite://{}",
        dir.path().join("no-such-dir").join("d.db").display()
    );
    let mut director = Process::start(&[
        "director",
        "--db",
        db.as_str(),
        "--metrics-listen",
        "127.0.0.1:0",
        "--store-attempts",
        "2",
    ]);
    assert_eq!(
        director.exit_within(support_bin::WAIT),
        Some(1),
        "{}",
        director.log()
    );
    let log = director.log();
    assert_eq!(
        log.matches("store_unreachable_attempt=").count(),
        1,
        "one retry between two attempts:\n{log}"
    );
    assert!(log.contains("gave up after 2 attempts"), "{log}");
}
