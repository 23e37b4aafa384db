//! SCALE-5 over the real binary: an idle WebSocket costs a relay and a cell at most 32 KiB.
//!
//! Each test opens a few warm-up connections (one-time costs: allocator arenas, lazy state),
//! reads the server's VmRSS from `/proc/<pid>/status`, opens N more idle connections, each
//! proven served (a relay answers a heartbeat, a cell says `attached`), reads VmRSS again once
//! it has settled and divides the growth by N. Memory only: nothing here is timed. Run with
//! `-- --nocapture` to see the measured bytes per connection.

mod support_bin;

use std::future::Future;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use support_bin::{cell_args, Process, SECRET, WAIT};
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::client::{spawn_desktop, DesktopConfig};
use switchyard_adapters::handoff::client_auth::mint_client_token;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::proto::{CellToClient, ClientFrame, CLIENT_PATH};
use switchyard_adapters::serve::WS_BUFFER_CHUNK_BYTES;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// SCALE-5: the memory one idle WebSocket may cost its server.
const BUDGET_BYTES: u64 = 32 * 1024;
const WARM_UP: usize = 32;
/// Enough that the growth (megabytes) dwarfs the allocator's granularity, and below the cell's
/// clients per host (1024) with the warm-up.
const N: usize = 500;
/// Connections dialled at once.
const BATCH: usize = 25;
/// Every connection here comes from 127.0.0.1 (the default per-peer bound is 256), and the held
/// sockets are never polled, so they would not answer the server's pings: an idle timeout far
/// past the test.
const ROOM: [&str; 4] = [
    "--max-connections-per-peer",
    "2048",
    "--ws-idle-timeout-ms",
    "600000",
];
const HOST: u64 = 7;

type Ws = WebSocketStream<TcpStream>;

fn vm_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"));
    kib * 1024
}

/// The RSS once two samples 250 ms apart agree within 64 KiB (the last sample after 10 s).
async fn settled_rss(pid: u32) -> u64 {
    let mut last = vm_rss_bytes(pid);
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = vm_rss_bytes(pid);
        if now.abs_diff(last) <= 64 * 1024 {
            return now;
        }
        last = now;
    }
    last
}

/// A WebSocket to `addr`; the test's own end reads in small chunks (its memory is not measured,
/// but 532 default 128 KiB buffers are needless).
async fn dial<R>(request: R, addr: &str) -> Ws
where
    R: IntoClientRequest + Unpin,
{
    let tcp = tokio::time::timeout(WAIT, TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .expect("connect");
    let config = WebSocketConfig::default().read_buffer_size(4 * 1024);
    let (ws, _) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::client_async_with_config(request, tcp, Some(config)),
    )
    .await
    .expect("handshake in time")
    .expect("handshake");
    ws
}

/// The next text message (transport pings and pongs skipped).
async fn next_text(ws: &mut Ws) -> String {
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("an answer in time")
        {
            Some(Ok(Message::Text(t))) => return t.as_str().to_owned(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("expected a text message, got {other:?}"),
        }
    }
}

struct Measured {
    before: u64,
    after: u64,
    per_connection: u64,
}

/// Open `WARM_UP`, read the RSS, open `N` more, read it again; all are handed back open.
async fn measure<F, Fut>(what: &str, pid: u32, open: F) -> (Measured, Vec<Ws>)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Ws>,
{
    let mut held = Vec::with_capacity(WARM_UP + N);
    for _ in 0..WARM_UP {
        held.push(open().await);
    }
    let before = settled_rss(pid).await;
    while held.len() < WARM_UP + N {
        let batch = BATCH.min(WARM_UP + N - held.len());
        held.extend(futures_util::future::join_all((0..batch).map(|_| open())).await);
    }
    let after = settled_rss(pid).await;
    assert_eq!(held.len(), WARM_UP + N);
    let per_connection = after.saturating_sub(before) / N as u64;
    eprintln!(
        "SCALE-5 {what}: {N} idle WebSockets: VmRSS {} KiB -> {} KiB: {per_connection} bytes \
         ({:.1} KiB) per connection (budget {} KiB)",
        before / 1024,
        after / 1024,
        per_connection as f64 / 1024.0,
        BUDGET_BYTES / 1024
    );
    let measured = Measured {
        before,
        after,
        per_connection,
    };
    (measured, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_5_an_idle_websocket_costs_a_relay_at_most_32_kib() {
    let mut args = vec!["relay", "--listen", "127.0.0.1:0", "--path", "/r"];
    args.extend(ROOM);
    let relay = Process::start(&args);
    let addr = relay.value("local_addr=");
    let url = format!("ws://{addr}/r");
    let (url, addr_ref) = (url.as_str(), addr.as_str());
    let (m, _held) = measure("relay", relay.pid(), move || async move {
        let mut ws = dial(url, addr_ref).await;
        // A heartbeat answered: the relay serves this channel (and has read from it).
        ws.send(Message::text("ping")).await.expect("heartbeat");
        assert_eq!(next_text(&mut ws).await, "pong");
        ws
    })
    .await;
    assert!(
        m.per_connection <= BUDGET_BYTES,
        "an idle relay channel costs {} bytes (VmRSS {} -> {} over {N}), over {BUDGET_BYTES}",
        m.per_connection,
        m.before,
        m.after
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_5_an_idle_websocket_costs_a_cell_at_most_32_kib() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let mut args = cell_args(&db, "1", &[]);
    args.extend(ROOM);
    let cell = Process::start(&args);
    let url = cell.value("url=");
    let addr = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("an http url: {url}"))
        .to_owned();
    // The host's desktop registers it here, so its clients attach (and stay).
    let desktop_secret = Secret::new(SECRET.as_bytes(), "desktop").expect("secret");
    let mut desktop = spawn_desktop(DesktopConfig {
        resolvers: vec![url.clone()],
        host: HOST,
        token: desktop_secret.desktop_token(HOST),
        capable: true,
        measure: None,
        pace_min: Duration::from_millis(50),
        pace_max: Duration::from_millis(400),
        ping_every: Duration::from_secs(1),
    });
    desktop
        .wait_registered(1, WAIT)
        .await
        .expect("the desktop registers");
    let expires_ms = Clock::default().now().0 + 24 * 3_600_000;
    let token = mint_client_token(&desktop_secret.desktop_token(HOST), HOST, expires_ms);
    let authorization = format!("Bearer {token}");
    let ws_url = format!("ws://{addr}{CLIENT_PATH}?host={HOST}");
    let (ws_url, addr_ref, authorization) = (ws_url.as_str(), addr.as_str(), &authorization);
    let (m, mut held) = measure("cell", cell.pid(), move || async move {
        let mut request = ws_url.into_client_request().expect("request");
        request.headers_mut().insert(
            "authorization",
            authorization.parse().expect("header value"),
        );
        let mut ws = dial(request, addr_ref).await;
        // `attached`: the cell holds this client's session.
        let first = next_text(&mut ws).await;
        assert!(
            matches!(
                serde_json::from_str::<CellToClient>(&first),
                Ok(CellToClient::Attached { cell: 1 })
            ),
            "{first}"
        );
        ws
    })
    .await;
    assert!(
        m.per_connection <= BUDGET_BYTES,
        "an idle cell client costs {} bytes (VmRSS {} -> {} over {N}), over {BUDGET_BYTES}",
        m.per_connection,
        m.before,
        m.after
    );
    // A message ten read chunks long (under the cell's 64 KiB bound) still arrives: the read
    // buffer grows to the frame.
    let ws = held.last_mut().expect("a held client");
    let mutation = ClientFrame::Mutation {
        id: "large".to_owned(),
        body: "x".repeat(10 * WS_BUFFER_CHUNK_BYTES),
    };
    let frame = serde_json::to_string(&mutation).expect("json");
    ws.send(Message::text(frame)).await.expect("send");
    loop {
        let answer = next_text(ws).await;
        match serde_json::from_str::<CellToClient>(&answer) {
            Ok(CellToClient::Ack { id }) if id == "large" => break,
            Ok(CellToClient::Undelivered { why, .. }) => panic!("undelivered: {why}"),
            _ => {}
        }
    }
    desktop.stop().await;
}
