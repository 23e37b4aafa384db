//! OPS-2 over the real binary: with `RELAY_FAILOVER_COOLDOWN_MS=0` and every relay down, each
//! tick re-opens every URL. A failure is logged once per state change: the first failed open of
//! a URL at WARN, its repeats (no channel up in between) at DEBUG, and one INFO when a channel
//! is up again.
//!
//! Red before: one WARN per failed open per tick (84 lines in 10 s at drill scale).

mod support_bin;

use std::time::{Duration, Instant};

use support_bin::{Process, WAIT};

/// The `[relay-skip]` line of a failed open.
const OPEN_FAILED: &str = "did not come up";

fn warn_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("WARN") && l.contains(OPEN_FAILED))
        .collect()
}

#[test]
fn ops_2_cooldown_zero_with_every_relay_down_warns_once_per_url_not_once_per_tick() {
    // A port nobody listens on (yet): every open is refused at once.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let listen = format!("127.0.0.1:{port}");
    let url = format!("ws://{listen}/r");
    let client = Process::start(&[
        "client",
        "--url",
        &url,
        "--cooldown-ms",
        "0",
        "--check-ms",
        "50",
        "--grace-ms",
        "1500",
    ]);
    // Held for 40 ticks: the client opened the URL again and again.
    let until = Instant::now() + WAIT;
    while client.log().matches(OPEN_FAILED).count() < 1 {
        assert!(
            Instant::now() < until,
            "no failed open; log:\n{}",
            client.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(40 * 50));
    let log = client.log();
    let warned = warn_lines(&log);
    assert_eq!(warned.len(), 1, "one WARN for one URL's outage:\n{log}");
    assert!(warned[0].contains(&url), "{}", warned[0]);

    // A relay comes up: one INFO says the channel is up again, and a later failure of the
    // same URL would be a new state change (a WARN again).
    let relay = Process::start(&["relay", "--listen", &listen, "--path", "/r"]);
    let _ = relay.value("local_addr=");
    let until = Instant::now() + WAIT;
    while !client
        .log()
        .contains("a relay channel is up again after failed opens")
    {
        assert!(
            Instant::now() < until,
            "no INFO when the channel came up; log:\n{}",
            client.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = client.log();
    let up = log
        .lines()
        .find(|l| l.contains("a relay channel is up again"))
        .expect("the line");
    assert!(up.contains("INFO"), "{up}");
    assert_eq!(warn_lines(&log).len(), 1, "{log}");
}
