//! SCALE-1 over the real binary: a cell started with `--max-hosts 1` enrols the first desktop
//! of an unknown host and refuses the second by name: `too_many_hosts` (retried where it is),
//! never `store_unavailable`, and the store keeps one host. Red before the named refusal: the
//! second desktop was told `register: store_unavailable`.

mod support_bin;

use std::time::{Duration, Instant};

use support_bin::{cell_args, Process, SECRET, WAIT};
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::client::{spawn_desktop, DesktopConfig, DesktopHandle};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_1_a_desktop_past_max_hosts_is_refused_too_many_hosts() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let cell = Process::start(&cell_args(&db, "1", &["--max-hosts", "1"]));
    let url = cell.value("url=");
    let mut first = desktop(&url, 7);
    first
        .wait_registered(1, WAIT)
        .await
        .expect("the first host is enrolled and registers");
    let second = desktop(&url, 8);
    let deadline = Instant::now() + WAIT;
    let retries = loop {
        let retries = second.state().retries;
        if !retries.is_empty() || Instant::now() > deadline {
            break retries;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        retries.iter().any(|r| r == "enrol: too_many_hosts"),
        "the second desktop is refused by name: {retries:?}"
    );
    assert!(
        !retries.iter().any(|r| r.contains("store_unavailable")),
        "never store_unavailable: {retries:?}"
    );
    assert!(second.state().registrations.is_empty());
    second.stop().await;
    first.stop().await;
}
