//! HO-A4 / SCALE-1 over the real binary: enrolment of an unknown host is the core's decision
//! behind the cell's `--enrol-unknown-hosts` flag (`SWITCHYARD_ENROL_UNKNOWN_HOSTS`). Off: the
//! desktop of an unknown host is turned away by name (`enrol: enrolment_disabled`, a paced
//! retry), no assignment row is written, the refusal is counted and logged once. On: the host
//! is enrolled at this cell and its desktop registers. Red before the flag: the cell refused
//! the unknown argument (exit 2), so neither cell started.

mod support_bin;

use std::time::{Duration, Instant};

use support_bin::{cell_args, Process, SECRET, WAIT};
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::client::{spawn_desktop, DesktopConfig, DesktopHandle};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::{CellId, HostId};

fn desktop(url: &str, host: u64) -> DesktopHandle {
    let desktop_secret = Secret::new(SECRET.as_bytes(), "desktop").expect("secret");
    spawn_desktop(DesktopConfig {
        resolvers: vec![url.to_owned()],
        host,
        token: desktop_secret.desktop_token(host),
        capable: true,
        measure: None,
        pace_min: Duration::from_millis(50),
        pace_max: Duration::from_millis(200),
        ping_every: Duration::from_secs(1),
    })
}

/// `GET path` → the body (the cell's probes).
fn get(url: &str, path: &str) -> String {
    support_bin::http_get(url, path).1
}

fn cell(db: &str, enrol: &str) -> Process {
    Process::start(&cell_args(db, "1", &["--enrol-unknown-hosts", enrol]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_a4_enrolment_off_refuses_an_unknown_desktop_by_name_and_writes_no_row() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let cell = cell(&db, "false");
    let url = cell.value("url=");
    let desk = desktop(&url, 7);
    // Two refusals: the second is counted but not logged again.
    let deadline = Instant::now() + WAIT;
    let retries = loop {
        let retries = desk.state().retries;
        if retries.len() >= 2 || Instant::now() > deadline {
            break retries;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    desk.stop().await;
    assert!(
        retries.len() >= 2 && retries.iter().all(|r| r == "enrol: enrolment_disabled"),
        "the desktop is refused by name: {retries:?}"
    );
    assert!(desk_never_registered(&retries));
    let store = SqlStore::connect(&db, StoreOptions::default())
        .await
        .expect("open the store");
    assert_eq!(
        store.authority(HostId(7)).await.expect("read"),
        None,
        "no assignment row is written"
    );
    let metrics = get(&url, "/metrics");
    let refused = metrics
        .lines()
        .find_map(|l| l.strip_prefix("switchyard_cell_enrolments_refused_total "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(
        refused.is_some_and(|n| n >= 2),
        "counted: {refused:?}\n{metrics}"
    );
    let log = cell.log();
    let logged = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("enrolment_disabled"))
        .count();
    assert_eq!(logged, 1, "logged once at WARN:\n{log}");
}

fn desk_never_registered(retries: &[String]) -> bool {
    !retries.iter().any(|r| r.contains("store_unavailable"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_a4_enrolment_on_enrols_an_unknown_host_at_this_cell() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let cell = cell(&db, "true");
    let url = cell.value("url=");
    let mut desk = desktop(&url, 8);
    desk.wait_registered(1, WAIT)
        .await
        .expect("the unknown host is enrolled and registers");
    desk.stop().await;
    let store = SqlStore::connect(&db, StoreOptions::default())
        .await
        .expect("open the store");
    let authority = store
        .authority(HostId(8))
        .await
        .expect("read")
        .expect("a row for the enrolled host");
    assert_eq!(authority.cell, CellId(1));
    assert!(
        cell.log().contains("enrol_unknown_hosts=true"),
        "{}",
        cell.log()
    );
}
