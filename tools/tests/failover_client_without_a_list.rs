//! Issue #27 point 9 over the real binary (OPS-2): a failover client whose `--directory` cannot
//! be read (`/dev/zero`, a FIFO nobody writes) stays up and waits for a list; /readyz says it
//! has no list (503 with the reason), the log says so once at WARN, and SIGTERM still stops it.

mod support_bin;

use std::path::Path;
use std::time::{Duration, Instant};

use support_bin::{http_get, Process, WAIT};
use switchyard_adapters::failover::directory;

const NO_LIST_WARNING: &str = "no usable relay list yet: the client waits";

/// Waits (within [`WAIT`]) until the log holds `text` `times` times.
fn wait_logged(client: &Process, text: &str, times: usize) {
    let until = Instant::now() + WAIT;
    while client.log().matches(text).count() < times {
        assert!(
            Instant::now() < until,
            "{text:?} not logged {times} times; log:\n{}",
            client.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn client_waits_without_a_list(directory: &Path) {
    let (_secret, public) = directory::generate_key_pair().expect("randomness");
    let mut client = Process::start(&[
        "client",
        "--directory",
        directory.to_str().expect("utf-8 path"),
        "--public-key",
        &public,
        "--check-ms",
        "50",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = client.value("metrics_addr=");
    wait_logged(&client, NO_LIST_WARNING, 1);
    let (status, body) = http_get(&addr, "/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("no relay list"), "{body}");
    let (_, metrics) = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("switchyard_client_listed_relays 0"),
        "{metrics}"
    );
    // Still waiting 25 ticks later: still up, and the warning was not repeated.
    std::thread::sleep(Duration::from_millis(25 * 50));
    let log = client.log();
    assert_eq!(
        log.matches(NO_LIST_WARNING).count(),
        1,
        "logged once: {log}"
    );
    let warning = log
        .lines()
        .find(|l| l.contains(NO_LIST_WARNING))
        .expect("warning");
    assert!(warning.contains("WARN"), "{warning}");
    assert_eq!(http_get(&addr, "/readyz").0, 503);
    client.signal("TERM");
    assert_eq!(client.exit_within(WAIT), Some(0), "{}", client.log());
}

#[test]
fn ops_2_a_client_whose_directory_is_dev_zero_waits_and_says_it_has_no_list() {
    client_waits_without_a_list(Path::new("/dev/zero"));
}

#[test]
fn ops_2_a_client_whose_directory_is_a_silent_fifo_waits_and_says_it_has_no_list() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("directory.fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    client_waits_without_a_list(&fifo);
}
