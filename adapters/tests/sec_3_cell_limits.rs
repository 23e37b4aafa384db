//! SEC-3 / SEC-4 abuse suite against a real cell on loopback (SQLite store): a huge announced
//! body is refused before anything is read, a body that never finishes is cut at the request
//! deadline, host ids past the store's range are refused by name, and the cell keeps serving.

mod handoff_rig;

use std::time::{Duration, Instant};

use handoff_rig::*;
use switchyard_adapters::handoff::proto::{DRAIN_PATH, RESOLVE_PATH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Send `head` (and no more), read the answer head (and what came with it) until the cell
/// closes or `within` passes.
async fn exchange(addr: std::net::SocketAddr, head: &str, within: Duration) -> String {
    exchange_until(addr, head, within, "\r\n\r\n").await
}

/// As `exchange`, reading until the answer holds `marker`.
async fn exchange_until(
    addr: std::net::SocketAddr,
    head: &str,
    within: Duration,
    marker: &str,
) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                got.extend_from_slice(&buf[..n]);
                if String::from_utf8_lossy(&got).contains(marker) {
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_3_a_ten_gigabyte_content_length_is_refused_at_once_and_a_stalled_body_is_cut() {
    let mut rig = Rig::new(Backend::Sqlite, "sec_3_body").await;
    let mut cfg = rig.cell_config(SRC, true);
    cfg.limits.request_timeout = Duration::from_millis(700);
    rig.start_with(cfg).await;
    let addr = rig.cell(SRC).addr;
    let started = Instant::now();
    let answer = exchange(
        addr,
        &format!("POST {DRAIN_PATH} HTTP/1.1\r\nhost: x\r\ncontent-length: 10000000000\r\n\r\n"),
        Duration::from_secs(5),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A body announced small but never sent: cut at the request deadline with 408.
    let answer = exchange(
        addr,
        &format!("POST {DRAIN_PATH} HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{{\"ho"),
        Duration::from_secs(5),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // The cell still answers.
    let answer = exchange(
        addr,
        &format!("GET {RESOLVE_PATH}?host=7 HTTP/1.1\r\nhost: x\r\n\r\n"),
        Duration::from_secs(5),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404"), "unknown host: {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_4_host_ids_past_the_stores_range_are_refused_by_name() {
    let mut rig = Rig::new(Backend::Sqlite, "sec_4_host").await;
    rig.start(SRC).await;
    let addr = rig.cell(SRC).addr;
    let upgrade = "connection: upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\n\
                   sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    for (path, headers) in [
        (format!("{RESOLVE_PATH}?host=9223372036854775808"), ""),
        ("/v1/client?host=18446744073709551615".to_owned(), upgrade),
        ("/v1/desktop?host=9223372036854775808".to_owned(), upgrade),
    ] {
        let answer = exchange_until(
            addr,
            &format!("GET {path} HTTP/1.1\r\nhost: x\r\n{headers}\r\n"),
            Duration::from_secs(5),
            "largest host id",
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 400") && answer.contains("past the largest host id"),
            "{path}: {answer}"
        );
    }
}
