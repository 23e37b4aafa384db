//! SEC-3 (issue #27 point 4) over the real binary: the unauthenticated `/v1/resolve` is bounded
//! per peer address (a token bucket decided in the core): past its burst a peer is answered
//! 429 `too_many_requests_from_peer` without a store query, the refusals are counted in
//! `/metrics` and logged once (one WARN when refusing starts, not one per request), and another
//! peer address is still answered. Red before: no bound (and no such flags).

mod support_bin;
mod support_wire;

use support_bin::Process;
use support_wire::{free_port, metric, replay, replay_on};

const RESOLVE: &[u8] =
    b"GET /v1/resolve?host=424242 HTTP/1.1\r\nhost: cell\r\nconnection: close\r\n\r\n";
const REFUSED: &str = r#"{"refused":"too_many_requests_from_peer"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_3_resolve_is_bounded_per_peer_with_429_counted_and_logged_once() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let addr = free_port();
    let cell = Process::start(&[
        "cell",
        "--db",
        &db,
        "--cell-id",
        "1",
        "--listen",
        &addr,
        "--resolve-rate-per-peer",
        "1",
        "--resolve-burst-per-peer",
        "3",
    ]);
    let _ = cell.value("url=");
    let answers: Vec<(u16, String)> =
        tokio::task::block_in_place(|| (0..30).map(|_| replay(&addr, RESOLVE)).collect());
    // The burst: answered by the store (the host is unknown).
    for (status, body) in &answers[..3] {
        assert_eq!(*status, 404, "{body}");
    }
    // Then refused, by name, until a token refills (one a second).
    let refused: Vec<_> = answers.iter().filter(|(s, _)| *s == 429).collect();
    assert!(refused.len() >= 10, "{answers:?}");
    assert!(
        refused.iter().all(|(_, body)| body == REFUSED),
        "{refused:?}"
    );
    let counted = tokio::task::block_in_place(|| {
        metric(&addr, "switchyard_cell_resolve_refused_peer_rate_total")
    });
    assert_eq!(counted, Some(refused.len() as u64));
    // Another peer address (127.0.0.2, loopback too) is still answered.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.2:0".parse().expect("addr"))
        .expect("bind 127.0.0.2");
    let other = socket
        .connect(addr.parse().expect("addr"))
        .await
        .expect("connect")
        .into_std()
        .expect("std");
    other.set_nonblocking(false).expect("blocking");
    let (status, body) = tokio::task::block_in_place(|| replay_on(other, RESOLVE));
    assert_eq!(status, 404, "{body}");
    // One WARN for the whole flood, naming the flags.
    let log = cell.log();
    let warned: Vec<_> = log
        .lines()
        .filter(|l| l.contains("resolve rate limit reached"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(
        warned[0].contains("WARN") && warned[0].contains("--resolve-rate-per-peer"),
        "{}",
        warned[0]
    );
}
