//! A `switchyard` process for tests over the real binary: its stderr collected line by line
//! (searchable while it runs), signals by name, a bounded wait for its exit. Killed on drop.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub const WAIT: Duration = Duration::from_secs(15);
/// The secrets every process here gets from its environment.
pub const SECRET: &str = "ops-test-secret-0123456789abcdef";

/// `switchyard cell` on the store `db` as cell `id`, listening on 127.0.0.1 at a port the
/// system picks, followed by `extra` (the flags a test is about).
pub fn cell_args<'a>(db: &'a str, id: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "cell",
        "--db",
        db,
        "--cell-id",
        id,
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    args
}

pub struct Process {
    child: Child,
    log: Arc<Mutex<String>>,
    lines: mpsc::Receiver<String>,
}

impl Process {
    /// `switchyard ARGS` with `RUST_LOG=info` and the test secrets in its environment.
    pub fn start(args: &[&str]) -> Process {
        Process::start_without(args, &[])
    }

    /// [`Process::start`] with the environment variables `unset` removed (a cell given a keys
    /// file must not also get the master secret).
    pub fn start_without(args: &[&str], unset: &[&str]) -> Process {
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
        command
            .args(args)
            .env("RUST_LOG", "info")
            .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
            .env("SWITCHYARD_DESKTOP_SECRET", SECRET);
        for name in unset {
            command.env_remove(name);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn switchyard");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                {
                    let mut log = sink.lock().expect("log");
                    log.push_str(&line);
                    log.push('\n');
                }
                let _ = tx.send(line);
            }
        });
        Process { child, log, lines }
    }

    /// The word after `key` in the next line that holds it (within [`WAIT`]).
    pub fn value(&self, key: &str) -> String {
        let deadline = Instant::now() + WAIT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                break;
            };
            if let Some(v) = line
                .split(key)
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
            {
                return v.to_owned();
            }
        }
        panic!("never logged {key:?}; log:\n{}", self.log())
    }

    /// Its process id (SCALE-5 reads its memory from `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Its exit code, waiting at most `within`; `None` when a signal ended it.
    pub fn exit_within(&mut self, within: Duration) -> Option<i32> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            assert!(
                started.elapsed() < within,
                "still running after {within:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` from a probe server at `addr` (`host:port`, with or without `http://`) →
/// (status, body); status 0 when the answer has none. One request per connection, 5 s bounds.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let addr: std::net::SocketAddr = addr.trim_start_matches("http://").parse().expect("addr");
    let mut s =
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .expect("write");
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}
