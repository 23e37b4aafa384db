//! OPS-2 over the real binary: /healthz, /readyz and Prometheus /metrics on the relay, the cell
//! and the director; the failover client only behind --metrics-listen (FO-D11).

mod support_bin;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use support_bin::{cell_args, http_get, Process};

#[test]
fn ops_2_the_relay_serves_health_readiness_and_metrics() {
    let relay = Process::start(&["relay", "--listen", "127.0.0.1:0", "--path", "/r"]);
    let addr = relay.value("local_addr=");
    assert_eq!(http_get(&addr, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(http_get(&addr, "/readyz").0, 200);
    let (status, metrics) = http_get(&addr, "/metrics");
    assert_eq!(status, 200);
    for name in [
        "switchyard_relay_channels_open ",
        "switchyard_relay_channels_accepted_total 0",
        "switchyard_server_connections_admitted_total ",
        "switchyard_server_refused_peer_full_total 0",
    ] {
        assert!(metrics.contains(name), "{name} missing:\n{metrics}");
    }
}

#[test]
fn ops_2_a_relay_path_may_not_shadow_a_probe() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["relay", "--listen", "127.0.0.1:0", "--path", "/metrics"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("probes"));
}

#[test]
fn ops_2_the_cell_serves_probes_and_its_counters() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("c.db").display());
    let cell = Process::start(&cell_args(&db, "4", &[]));
    let url = cell.value("url=");
    assert_eq!(http_get(&url, "/healthz").0, 200);
    assert_eq!(http_get(&url, "/readyz"), (200, "ready\n".to_owned()));
    let (_, metrics) = http_get(&url, "/metrics");
    for name in [
        "switchyard_cell_clients_attached_total 0",
        "switchyard_cell_clients_unauthenticated_total 0",
        "switchyard_cell_internal_refused_total 0",
        "switchyard_server_connections_open ",
    ] {
        assert!(metrics.contains(name), "{name} missing:\n{metrics}");
    }
}

#[test]
fn ops_2_the_director_serves_probes_and_the_client_only_when_asked() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("d.db").display());
    let director = Process::start(&[
        "director",
        "--db",
        &db,
        "--interval-ms",
        "100",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = director.value("metrics_addr=");
    // The probes answer from the start; ready once the store is reached and a pass ran.
    let _ = director.value("examined=");
    assert_eq!(http_get(&addr, "/readyz").0, 200);
    let (_, metrics) = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("switchyard_director_passes_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("switchyard_director_last_pass_failed 0"),
        "{metrics}"
    );

    // FO-D11: nothing listens unless asked.
    let quiet = Process::start(&["client", "--url", "ws://127.0.0.1:9/r"]);
    let _ = quiet.value("client starting");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!quiet.log().contains("probes listening"), "{}", quiet.log());
    let asked = Process::start(&[
        "client",
        "--url",
        "ws://127.0.0.1:9/r",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = asked.value("metrics_addr=");
    let (status, body) = http_get(&addr, "/readyz");
    assert_eq!(status, 503, "no relay is reachable: {body}");
    assert!(body.contains("no relay channel"), "{body}");
    let (_, metrics) = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("switchyard_client_switches_total 0"),
        "{metrics}"
    );
}

/// `GET /metrics` with `accept` → (content type, body).
fn metrics_as(addr: &str, accept: Option<&str>) -> (String, String) {
    let addr: SocketAddr = addr.trim_start_matches("http://").parse().expect("addr");
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let accept = accept
        .map(|a| format!("accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nhost: x\r\n{accept}connection: close\r\n\r\n"
    )
    .expect("write");
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let content_type = head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    (content_type, body.to_owned())
}

/// OPS-2 (issue 27 point 10): `/metrics` is the Prometheus text format (0.0.4) the docs name,
/// and OpenMetrics when the `Accept` header asks for it (as a Prometheus server does). Red
/// before: OpenMetrics whatever was asked.
#[test]
fn ops_2_metrics_serve_prometheus_text_or_openmetrics_as_accept_asks() {
    let relay = Process::start(&["relay", "--listen", "127.0.0.1:0", "--path", "/r"]);
    let addr = relay.value("local_addr=");
    for accept in [None, Some("*/*"), Some("text/plain")] {
        let (content_type, body) = metrics_as(&addr, accept);
        assert!(
            content_type.starts_with("text/plain; version=0.0.4"),
            "{accept:?}: {content_type}"
        );
        assert!(
            body.contains("switchyard_relay_channels_accepted_total 0"),
            "{body}"
        );
        assert!(!body.contains("# EOF"), "{accept:?}: {body}");
    }
    let prometheus_server =
        "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    let (content_type, body) = metrics_as(&addr, Some(prometheus_server));
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
}
