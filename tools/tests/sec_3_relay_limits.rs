//! SEC-3 abuse suite against the real `switchyard relay` binary on loopback: connection floods,
//! slowloris, fragmented-message floods and silent sockets are cut off at the configured
//! limits, each refusal is counted (`/status`) and logged once per state change, and a
//! legitimate client on another loopback address keeps its channel and its heartbeats
//! throughout. Every loop here is bounded in count and time.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchyard_adapters::failover::relay::RelayStatus;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(10);

/// A relay process, its address and everything it logged.
struct Relay {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Relay {
    fn start(extra: &[&str]) -> Relay {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["relay", "--listen", "127.0.0.1:0", "--path", "/r"])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn switchyard relay");
        let log = Arc::new(Mutex::new(String::new()));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line
                    .split("local_addr=")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                {
                    let _ = addr_tx.send(addr);
                }
                let mut log = sink.lock().expect("log");
                log.push_str(&line);
                log.push('\n');
            }
        });
        let addr = addr_rx
            .recv_timeout(WAIT)
            .expect("the relay says where it listens");
        Relay { child, addr, log }
    }

    async fn status(&self) -> RelayStatus {
        let mut s = TcpStream::connect(self.addr).await.expect("connect");
        s.write_all(b"GET /status HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut raw = Vec::new();
        tokio::time::timeout(WAIT, s.read_to_end(&mut raw))
            .await
            .expect("status in time")
            .expect("read");
        let text = String::from_utf8_lossy(&raw);
        let body = text.split("\r\n\r\n").nth(1).expect("a body");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("status {body:?}: {e}"))
    }

    fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP connection from another loopback address than the attacker's 127.0.0.1.
async fn connect_from(source: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::from((source, 0)))
        .expect("bind a loopback source");
    socket.connect(to).await.expect("connect")
}

type Channel = tokio_tungstenite::WebSocketStream<TcpStream>;

/// A legitimate client's channel, from 127.0.0.2.
async fn legit_channel(relay: &Relay) -> Channel {
    let tcp = connect_from([127, 0, 0, 2], relay.addr).await;
    let url = format!("ws://{}/r", relay.addr);
    let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::client_async(url, tcp))
        .await
        .expect("handshake in time")
        .expect("handshake");
    ws
}

/// One heartbeat round trip on a channel.
async fn heartbeat(ws: &mut Channel) -> Result<(), String> {
    ws.send(Message::text("ping"))
        .await
        .map_err(|e| e.to_string())?;
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) if t.as_str() == "pong" => return Ok(()),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            other => return Err(format!("{other:?}")),
        }
    }
}

/// Read until the peer closes (EOF or reset); what was read. Panics if it stays open.
async fn read_until_closed(s: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("still open after {within:?}; read {got:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_3_slowloris_is_cut_at_the_header_timeout_and_per_peer_bound_while_a_client_keeps_working(
) {
    let relay = Relay::start(&[
        "--max-connections-per-peer",
        "8",
        "--header-timeout-ms",
        "500",
    ]);
    let mut legit = legit_channel(&relay).await;
    heartbeat(&mut legit).await.expect("heartbeat before");
    // 24 half-sent requests from one address: 8 are admitted and held until the header
    // timeout, the other 16 are refused at once with the bound's name.
    let mut attackers = Vec::new();
    for _ in 0..24 {
        let mut s = TcpStream::connect(relay.addr).await.expect("connect");
        let _ = s.write_all(b"GET /r HTTP/1.1\r\nhost: x\r\nx-slow: ").await;
        attackers.push(s);
    }
    // Meanwhile the legitimate client is served.
    heartbeat(&mut legit)
        .await
        .expect("heartbeat during the attack");
    let mut refused = 0;
    let mut cut = 0;
    for mut s in attackers {
        let answer = read_until_closed(&mut s, Duration::from_secs(5)).await;
        let answer = String::from_utf8_lossy(&answer);
        if answer.contains("503") && answer.contains("too_many_connections_from_peer") {
            refused += 1;
        } else {
            cut += 1;
        }
    }
    assert_eq!(
        (refused, cut),
        (16, 8),
        "16 refused at once, 8 cut by the timeout"
    );
    heartbeat(&mut legit)
        .await
        .expect("heartbeat after the attack");
    let status = relay.status().await;
    assert_eq!(status.server.refused_peer_full, 16, "{status:?}");
    assert!(status.server.connection_errors >= 8, "{status:?}");
    // One WARN when refusing started, one INFO when admission resumed: not one per socket.
    let log = relay.log();
    assert_eq!(log.matches("connection limit reached").count(), 1, "{log}");
    assert!(log.contains("too_many_connections_from_peer"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_3_connections_over_the_server_bound_get_503_too_many_connections() {
    let relay = Relay::start(&["--max-connections", "4", "--max-connections-per-peer", "4"]);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(relay.addr).await.expect("connect"));
    }
    // The gate counts the accepted socket before any byte is read: wait until all four are in.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fifth = connect_from([127, 0, 0, 3], relay.addr).await;
    let answer = read_until_closed(&mut fifth, WAIT).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 503") && answer.ends_with("too_many_connections"),
        "{answer}"
    );
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(held);
    let status = relay.status().await;
    assert_eq!(status.server.refused_server_full, 1, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_3_a_fragmented_message_flood_is_cut_at_the_message_bound_while_a_client_keeps_working()
{
    let relay = Relay::start(&["--ws-max-message-bytes", "4096"]);
    let mut legit = legit_channel(&relay).await;
    // Three attackers each start a fragmented text message and never finish it: a 1 KiB first
    // fragment and 1 KiB continuations, up to 60 MB each if nobody stopped them.
    let mut flooded = Vec::new();
    for _ in 0..3 {
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/r", relay.addr))
            .await
            .expect("attacker connects");
        let first = Frame::message(vec![b'a'; 1024], OpCode::Data(Data::Text), false);
        ws.send(Message::Frame(first))
            .await
            .expect("first fragment");
        let mut sent: usize = 1024;
        while sent < 60_000_000 {
            let more = Frame::message(vec![b'a'; 1024], OpCode::Data(Data::Continue), false);
            if ws.send(Message::Frame(more)).await.is_err() {
                break;
            }
            sent += 1024;
            // The relay's close arrives as soon as the bound is passed.
            if let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(1), ws.next()).await {
                break;
            }
        }
        assert!(
            sent <= 64 * 1024,
            "the relay took {sent} bytes of one message"
        );
        flooded.push(sent);
    }
    heartbeat(&mut legit)
        .await
        .expect("heartbeat after the flood");
    let status = relay.status().await;
    assert_eq!(
        status.server.ws_protocol_closed, 3,
        "{status:?} after {flooded:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_3_a_silent_websocket_is_closed_at_the_idle_timeout_and_a_heartbeating_one_is_not() {
    let relay = Relay::start(&["--ws-idle-timeout-ms", "600"]);
    let mut legit = legit_channel(&relay).await;
    // A peer that completes the upgrade and then reads nothing and answers no ping.
    let mut silent = TcpStream::connect(relay.addr).await.expect("connect");
    silent
        .write_all(
            b"GET /r HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: upgrade\r\n\
              sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        .await
        .expect("upgrade request");
    let mut head = [0u8; 12];
    silent.read_exact(&mut head).await.expect("answer");
    assert_eq!(&head, b"HTTP/1.1 101");
    // The heartbeating client outlives several idle timeouts.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        heartbeat(&mut legit).await.expect("a live channel stays");
    }
    let _ = read_until_closed(&mut silent, Duration::from_secs(5)).await;
    let status = relay.status().await;
    assert_eq!(status.server.ws_idle_closed, 1, "{status:?}");
    assert_eq!(status.open_channels, 1, "{status:?}");
}

#[test]
fn sec_4_relay_limits_out_of_range_are_refused_by_name() {
    for (flag, value) in [
        ("--max-connections", "0"),
        ("--max-connections-per-peer", "0"),
        ("--header-timeout-ms", "0"),
        ("--ws-max-message-bytes", "999999999"),
        ("--max-connections", "many"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["relay", "--listen", "127.0.0.1:0", flag, value])
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        assert!(
            matches!(code, Some(1 | 2)),
            "{flag} {value}: exit {code:?}: {stderr}"
        );
        assert!(stderr.contains(flag), "{flag} {value}: {stderr}");
    }
}
