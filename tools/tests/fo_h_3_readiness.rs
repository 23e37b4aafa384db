//! FO-H-3 over the real binary: a failover client's `/readyz` says the truth. While it has no
//! live channel (its relay killed, reconnecting) it answers 503 with the reason and since when,
//! and its `ready` gauge is 0; once the relay is back and the channel live, 200 and 1.
//!
//! Red before: `/readyz` only checked that a current channel existed, which stays set while the
//! channel reconnects: it answered 200 with every relay down.

mod support_bin;

use std::time::{Duration, Instant};

use support_bin::{http_get, Process, WAIT};

/// Polls `/readyz` until its status is `status` (within [`WAIT`]); the body then.
fn readyz_until(metrics: &str, status: u16, client: &Process) -> String {
    let until = Instant::now() + WAIT;
    loop {
        let (now, body) = http_get(metrics, "/readyz");
        if now == status {
            return body;
        }
        assert!(
            Instant::now() < until,
            "/readyz never answered {status} (last {now} {body:?}); log:\n{}",
            client.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn relay(listen: &str) -> (Process, String) {
    let relay = Process::start(&["relay", "--listen", listen, "--path", "/r"]);
    let addr = relay.value("local_addr=");
    (relay, addr)
}

#[test]
fn fo_h_3_readyz_is_503_with_the_reason_while_the_relay_is_down_and_200_once_it_is_back() {
    let (relay_a, addr) = relay("127.0.0.1:0");
    let url = format!("ws://{addr}/r");
    let client = Process::start(&[
        "client",
        "--url",
        &url,
        "--metrics-listen",
        "127.0.0.1:0",
        "--check-ms",
        "200",
        "--grace-ms",
        "1500",
    ]);
    let metrics = client.value("metrics_addr=");
    readyz_until(&metrics, 200, &client);
    let (_, scraped) = http_get(&metrics, "/metrics");
    assert!(scraped.contains("switchyard_client_ready 1"), "{scraped}");
    assert!(
        scraped.contains("switchyard_client_not_ready_seconds 0"),
        "{scraped}"
    );

    // The relay dies: the channel is lost and reconnects; the client is not ready.
    drop(relay_a);
    let body = readyz_until(&metrics, 503, &client);
    assert!(
        body.starts_with(&format!(
            "not ready: relay channel to {url} lost (reconnecting"
        )),
        "one prefix, then the reason: {body}"
    );
    // Since when: the wall-clock instant (RFC 3339, UTC) and how long ago.
    assert!(body.contains(" since 20") && body.contains("Z ("), "{body}");
    assert!(body.contains(" s ago)"), "{body}");
    let (_, scraped) = http_get(&metrics, "/metrics");
    assert!(scraped.contains("switchyard_client_ready 0"), "{scraped}");
    // Still a current channel (it is reconnecting): the old probe's answer was 200.
    assert!(
        scraped.contains("switchyard_client_on_channel 1"),
        "{scraped}"
    );

    // Back on the same address: live again, ready again.
    let (_relay_back, _) = relay(&addr);
    readyz_until(&metrics, 200, &client);
    let (_, scraped) = http_get(&metrics, "/metrics");
    assert!(scraped.contains("switchyard_client_ready 1"), "{scraped}");
}
