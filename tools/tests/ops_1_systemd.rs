//! OPS-1 / OPS-2 under systemd (issue 27 point 13): the unit files in `adapters/systemd/` pass
//! `systemd-analyze verify` (where the tool exists) with the hardening and notify settings the
//! docs promise, and the real binary speaks the notification protocol: `READY=1` on the
//! socket `NOTIFY_SOCKET` names (a path or an `@abstract` name) once the relay or cell
//! listens, the client has its first channel, the director's probes listen; `WATCHDOG=1` at
//! half of `WATCHDOG_USEC`; `STOPPING=1` at SIGTERM. Red before: no unit files, no datagram.

mod support_bin;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support_bin::{cell_args, SECRET, WAIT};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters/systemd")
}

const UNITS: [&str; 4] = [
    "switchyard-relay.service",
    "switchyard-client.service",
    "switchyard-cell@.service",
    "switchyard-director.service",
];

#[test]
fn ops_1_systemd_units_are_notify_services_with_a_watchdog_hardening_and_an_environment_file() {
    for unit in UNITS {
        let text = std::fs::read_to_string(deploy_dir().join(unit)).expect(unit);
        for line in [
            "Type=notify",
            "NotifyAccess=main",
            "WatchdogSec=",
            "EnvironmentFile=/etc/switchyard/",
            "ExecStart=/usr/local/bin/switchyard ",
            "KillSignal=SIGTERM",
            "Restart=on-failure",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "PrivateTmp=yes",
            "DynamicUser=yes",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(line)),
                "{unit} lacks {line}"
            );
        }
    }
    let dropin =
        std::fs::read_to_string(deploy_dir().join("switchyard-cell@.service.d/capacity.conf"))
            .expect("the drop-in example");
    assert!(dropin.contains("[Service]") && dropin.contains("Environment=SWITCHYARD_CAPACITY="));
}

#[test]
fn ops_1_systemd_units_pass_systemd_analyze_verify() {
    let tool = Path::new("/usr/bin/systemd-analyze");
    if !tool.exists() {
        eprintln!("no systemd-analyze here: not verified");
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let exe = env!("CARGO_BIN_EXE_switchyard");
    let mut paths = Vec::new();
    for unit in UNITS {
        let text = std::fs::read_to_string(deploy_dir().join(unit))
            .expect(unit)
            .replace("/usr/local/bin/switchyard", exe);
        // A template is verified as one instance of it.
        let name = unit.replace("@.", "@1.");
        let path = dir.path().join(&name);
        std::fs::write(&path, text).expect("write unit");
        paths.push(path);
    }
    let dropin = dir.path().join("switchyard-cell@.service.d");
    std::fs::create_dir(&dropin).expect("dir");
    std::fs::copy(
        deploy_dir().join("switchyard-cell@.service.d/capacity.conf"),
        dropin.join("capacity.conf"),
    )
    .expect("copy the drop-in");
    let out = Command::new(tool)
        .args(["verify", "--man=no"])
        .args(&paths)
        .current_dir(dir.path())
        .output()
        .expect("run systemd-analyze");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.trim().is_empty(), "warnings: {err}");
}

/// A socket the test binds, as systemd does, and the datagrams the process sends it.
struct NotifySocket {
    socket: UnixDatagram,
    /// What to put in `NOTIFY_SOCKET`.
    name: String,
    _dir: Option<tempfile::TempDir>,
}

impl NotifySocket {
    fn path() -> NotifySocket {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind");
        NotifySocket {
            socket,
            name: path.display().to_string(),
            _dir: Some(dir),
        }
    }

    fn abstract_name() -> NotifySocket {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("switchyard-test-{}-{}", std::process::id(), fastrand_name());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .expect("abstract address");
        let socket = UnixDatagram::bind_addr(&addr).expect("bind abstract");
        NotifySocket {
            socket,
            name: format!("@{name}"),
            _dir: None,
        }
    }

    /// The next datagram holding `line` (within [`WAIT`]); every datagram seen on the way.
    fn wait_for(&self, line: &str, child: &mut Child) -> Vec<String> {
        self.socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.socket.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                let found = text.lines().any(|l| l == line);
                seen.push(text);
                if found {
                    return seen;
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the process ended ({status}) before {line:?}; datagrams: {seen:?}");
            }
        }
        panic!("no {line:?} within {WAIT:?}; datagrams: {seen:?}");
    }
}

impl NotifySocket {
    /// The next datagram with a line starting with `prefix` (within [`WAIT`]); that line.
    fn wait_for_prefix(&self, prefix: &str, child: &mut Child) -> String {
        self.socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.socket.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                if let Some(line) = text.lines().find(|l| l.starts_with(prefix)) {
                    return line.to_owned();
                }
                seen.push(text);
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the process ended ({status}) before {prefix:?}; datagrams: {seen:?}");
            }
        }
        panic!("no {prefix:?} within {WAIT:?}; datagrams: {seen:?}");
    }
}

fn fastrand_name() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// `switchyard ARGS` under a pretend systemd; its stderr collected to a string on a thread.
fn start(args: &[&str], notify: &NotifySocket, watchdog_usec: Option<u64>) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command
        .args(args)
        .env("RUST_LOG", "info")
        .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
        .env("SWITCHYARD_DESKTOP_SECRET", SECRET)
        .env("NOTIFY_SOCKET", &notify.name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(usec) = watchdog_usec {
        command.env("WATCHDOG_USEC", usec.to_string());
    }
    let mut child = command.spawn().expect("spawn switchyard");
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  | {line}");
        }
    });
    child
}

fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn ops_1_relay_says_ready_feeds_the_watchdog_and_says_stopping() {
    let notify = NotifySocket::path();
    let mut relay = Reaped(start(
        &["relay", "--listen", "127.0.0.1:0"],
        &notify,
        Some(200_000),
    ));
    let seen = notify.wait_for("READY=1", &mut relay.0);
    assert!(
        seen.iter().all(|d| !d.contains("WATCHDOG=1")),
        "ready comes first: {seen:?}"
    );
    // Half of 200 ms: several within WAIT whatever the machine's load.
    notify.wait_for("WATCHDOG=1", &mut relay.0);
    notify.wait_for("WATCHDOG=1", &mut relay.0);
    terminate(&mut relay.0);
    notify.wait_for("STOPPING=1", &mut relay.0);
    let status = relay.0.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn ops_1_cell_says_ready_on_an_abstract_notify_socket() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let notify = NotifySocket::abstract_name();
    let mut cell = Reaped(start(&cell_args(&db, "3", &[]), &notify, None));
    let seen = notify.wait_for("READY=1", &mut cell.0);
    assert!(
        seen.iter().any(|d| d.contains("STATUS=")),
        "a status line: {seen:?}"
    );
}

#[test]
fn ops_1_director_says_ready_once_its_probes_listen() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let notify = NotifySocket::path();
    let mut director = Reaped(start(
        &["director", "--db", &db, "--metrics-listen", "127.0.0.1:0"],
        &notify,
        None,
    ));
    notify.wait_for("READY=1", &mut director.0);
}

#[test]
fn ops_1_client_says_ready_once_its_first_channel_is_up() {
    // A relay on a port the test picks, and a client pinned to it.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let relay_notify = NotifySocket::path();
    let listen = format!("127.0.0.1:{port}");
    let mut relay = Reaped(start(
        &["relay", "--listen", &listen, "--path", "/a"],
        &relay_notify,
        None,
    ));
    relay_notify.wait_for("READY=1", &mut relay.0);
    let notify = NotifySocket::path();
    let url = format!("ws://127.0.0.1:{port}/a");
    let mut client = Reaped(start(&["client", "--url", &url], &notify, None));
    let seen = notify.wait_for("READY=1", &mut client.0);
    assert!(
        seen.iter().any(|d| d.contains("STATUS=")),
        "a status line: {seen:?}"
    );
}

/// FO-H-3 under systemd: after READY=1 the client's STATUS= line follows its readiness: not
/// ready with the reason and since when while its relay is down, ready again once it is back.
/// Red before: the status was set once, at READY=1, and never changed.
#[test]
fn fo_h_3_client_status_line_says_not_ready_while_its_relay_is_down() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let listen = format!("127.0.0.1:{port}");
    let relay_notify = NotifySocket::path();
    let mut relay = Reaped(start(
        &["relay", "--listen", &listen, "--path", "/a"],
        &relay_notify,
        None,
    ));
    relay_notify.wait_for("READY=1", &mut relay.0);
    let notify = NotifySocket::path();
    let url = format!("ws://127.0.0.1:{port}/a");
    let mut client = Reaped(start(
        &[
            "client",
            "--url",
            &url,
            "--check-ms",
            "200",
            "--grace-ms",
            "1500",
        ],
        &notify,
        None,
    ));
    notify.wait_for("READY=1", &mut client.0);
    drop(relay);
    let down = notify.wait_for_prefix("STATUS=not ready:", &mut client.0);
    assert!(
        down.starts_with(&format!(
            "STATUS=not ready: relay channel to {url} lost (reconnecting"
        )),
        "{down}"
    );
    assert!(
        down.contains(" since 20") && down.contains(" s ago)"),
        "{down}"
    );
    let relay_notify = NotifySocket::path();
    let mut relay = Reaped(start(
        &["relay", "--listen", &listen, "--path", "/a"],
        &relay_notify,
        None,
    ));
    relay_notify.wait_for("READY=1", &mut relay.0);
    let up = notify.wait_for_prefix("STATUS=ready:", &mut client.0);
    assert!(up.contains(&url), "{up}");
}
