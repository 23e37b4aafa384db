//! Wire-level helpers for tests over the real binary: a recording TCP proxy (what an attacker
//! on the path captures), raw replays, the operator's drain command, a metric read.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::support_bin::{SECRET, WAIT};

/// A TCP proxy to `upstream` that records what each client connection sent.
pub struct Recorder {
    pub addr: String,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Recorder {
    pub fn start(upstream: String) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let addr = listener.local_addr().expect("addr").to_string();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let log = sent.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let Ok(mut server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let index = {
                    let mut log = log.lock().expect("log");
                    log.push(Vec::new());
                    log.len() - 1
                };
                let (mut client_r, mut server_w) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = client_r.read(&mut buf) {
                        if n == 0 || server_w.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        log.lock().expect("log")[index].extend_from_slice(&buf[..n]);
                    }
                    let _ = server_w.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server, &mut client);
                    let _ = client.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Recorder { addr, sent }
    }

    /// The bytes of the first recorded connection that began with `prefix`.
    pub fn captured(&self, prefix: &[u8]) -> Option<Vec<u8>> {
        self.sent
            .lock()
            .expect("log")
            .iter()
            .find(|c| c.starts_with(prefix))
            .cloned()
    }
}

/// Send raw request bytes; the status and the body of the answer.
pub fn replay(addr: &str, request: &[u8]) -> (u16, String) {
    replay_on(TcpStream::connect(addr).expect("connect"), request)
}

/// [`replay`] on a connected stream (one from another source address, say).
pub fn replay_on(mut s: TcpStream, request: &[u8]) -> (u16, String) {
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    s.write_all(request).expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).expect("read the answer");
        assert!(
            n > 0,
            "closed before answering: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let len = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        if body.len() >= len {
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .expect("status");
            return (status, body.to_owned());
        }
    }
}

/// `switchyard handoff drain` against `url` for cell `cell`; its exit code and stderr.
pub fn operator_drain(url: &str, cell: &str, host: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "handoff",
            "drain",
            "--cell-url",
            url,
            "--cell-id",
            cell,
            "--host",
            host,
        ])
        .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
        .stdin(Stdio::null())
        .output()
        .expect("run the operator command");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn free_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").to_string()
}

pub fn metric(addr: &str, name: &str) -> Option<u64> {
    let (status, body) = replay(
        addr,
        format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
}
