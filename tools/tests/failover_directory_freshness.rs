//! FO-S1 and SEC-4 over the real `switchyard` binary: a replayed (lower-sequence) or expired
//! directory is refused with a named error while the last good list stays, `sign-directory`
//! writes and validates sequence and expiry, and reading the directory is bounded for devices
//! and FIFOs (no memory growth, no hang on shutdown). Loopback only; every wait is bounded.

mod support_directory;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support_directory::sign_raw;
use switchyard_adapters::failover::directory::{self, SignedDirectory};
use switchyard_adapters::failover::relay::{RelayConfig, RelayHandle};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const EXE: &str = env!("CARGO_BIN_EXE_switchyard");
/// RSS above this means the client is reading without a bound.
const RSS_LIMIT_KB: u64 = 200 * 1024;

fn now_unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

fn keys() -> (ed25519_dalek::SigningKey, String) {
    let (secret, public) = directory::generate_key_pair().expect("randomness");
    (
        directory::parse_secret_key("test", &secret).expect("secret key"),
        public,
    )
}

fn payload(relays: &[&str], sequence: u64, expires_at_unix_s: u64) -> String {
    serde_json::json!({
        "relays": relays,
        "refresh_after_seconds": 1,
        "sequence": sequence,
        "expires_at_unix_s": expires_at_unix_s,
    })
    .to_string()
}

/// Replaces the file in one step, so the client never reads half a document.
fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).expect("write directory");
    std::fs::rename(&tmp, path).expect("rename directory");
}

async fn relay() -> RelayHandle {
    RelayHandle::start(RelayConfig::new(
        "127.0.0.1:0".parse().expect("loopback"),
        vec!["/r".into()],
    ))
    .await
    .expect("relay")
}

/// A `switchyard client` process and everything it wrote to stderr so far.
struct ClientProcess {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl ClientProcess {
    fn spawn(directory: &Path, public_key: &str) -> ClientProcess {
        let mut child = Command::new(EXE)
            .args(["client", "--directory"])
            .arg(directory)
            .args(["--public-key", public_key])
            .args(["--check-ms", "200", "--grace-ms", "1500"])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn switchyard client");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut log = sink.lock().expect("log lock");
                log.push_str(&line);
                log.push('\n');
            }
        });
        ClientProcess { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Resident memory in kB (Linux), if the process is still there.
    fn rss_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Waits until the log satisfies `done` (true) or `within` passes (false). Fails at once if
    /// the process grows past `RSS_LIMIT_KB` (it is killed on drop).
    async fn wait_for(&self, within: Duration, done: impl Fn(&str) -> bool) -> bool {
        let until = tokio::time::Instant::now() + within;
        loop {
            if done(&self.log()) {
                return true;
            }
            if let Some(rss) = self.rss_kb() {
                assert!(
                    rss < RSS_LIMIT_KB,
                    "client RSS {rss} kB: unbounded read?\n{}",
                    self.log()
                );
            }
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGINT (the operator's Ctrl-C); the client must exit 0 within `within`.
    async fn interrupt(mut self, within: Duration) {
        let sent = std::process::Command::new("kill")
            .args(["-INT", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success());
        let status = tokio::time::timeout(within, self.child.wait()).await;
        let log = self.log();
        match status {
            Ok(Ok(status)) => assert!(status.success(), "exit {status}\n{log}"),
            Ok(Err(error)) => panic!("wait: {error}\n{log}"),
            Err(_) => panic!("the client did not stop within {within:?} of SIGINT\n{log}"),
        }
    }
}

/// Two relays A and B; a client whose directory, sequence 10, lists A only, attached to A.
struct AttachedToA {
    a: RelayHandle,
    b: RelayHandle,
    url_a: String,
    url_b: String,
    secret: ed25519_dalek::SigningKey,
    /// Holds the directory file's folder for the test's life.
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    expires: u64,
    client: ClientProcess,
}

impl AttachedToA {
    async fn start() -> AttachedToA {
        let (a, b) = (relay().await, relay().await);
        let url_a = format!("ws://{}/r", a.local_addr());
        let url_b = format!("ws://{}/r", b.local_addr());
        let (secret, public) = keys();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("directory.json");
        let expires = now_unix_s() + 3600;
        write_atomically(&path, &sign_raw(&secret, &payload(&[&url_a], 10, expires)));
        let client = ClientProcess::spawn(&path, &public);
        let attach = format!("[relay-attach] {url_a}");
        assert!(
            client
                .wait_for(Duration::from_secs(10), |log| log.contains(&attach))
                .await,
            "never attached to A\n{}",
            client.log()
        );
        AttachedToA {
            a,
            b,
            url_a,
            url_b,
            secret,
            _dir: dir,
            path,
            expires,
            client,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_s1_lower_sequence_is_refused_and_the_last_good_list_stays() {
    let AttachedToA {
        a,
        b,
        url_a: _,
        url_b,
        secret,
        _dir,
        path,
        expires,
        client,
    } = AttachedToA::start().await;

    // A validly signed but older list naming B: replayed, refused by name, A stays.
    write_atomically(&path, &sign_raw(&secret, &payload(&[&url_b], 9, expires)));
    let refused = "sequence 9 is lower than the last accepted 10";
    assert!(
        client
            .wait_for(Duration::from_secs(5), |log| log.contains(refused))
            .await,
        "the replayed list was not refused by name\n{}",
        client.log()
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let log = client.log();
    assert!(!log.contains("[relay-switch]"), "{log}");
    assert_eq!(
        b.accepted_total(),
        0,
        "nothing of the old list was opened\n{log}"
    );
    assert_eq!(a.open_channels(), 1, "{log}");

    // The same sequence re-read is the same list: accepted, no error; a higher one moves on.
    write_atomically(&path, &sign_raw(&secret, &payload(&[&url_b], 11, expires)));
    let switched = format!("-> {url_b}");
    assert!(
        client
            .wait_for(Duration::from_secs(5), |log| log.contains("[relay-switch]")
                && log.contains(&switched))
            .await,
        "a higher sequence was not taken\n{}",
        client.log()
    );
    client.interrupt(Duration::from_secs(5)).await;
    a.stop().await;
    b.stop().await;
}

/// Issue 26, bug 3: lists A and B signed with the same sequence were both accepted (and A
/// again after B). An equal sequence is accepted only for the same list; another list under
/// the same sequence is refused by name and the last good list stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_s1_regression_equal_sequence_with_a_different_list_is_refused() {
    let AttachedToA {
        a,
        b,
        url_a,
        url_b,
        secret,
        _dir,
        path,
        expires,
        client,
    } = AttachedToA::start().await;

    // B under A's sequence: refused by name, A stays, B is never opened.
    write_atomically(&path, &sign_raw(&secret, &payload(&[&url_b], 10, expires)));
    let refused = "sequence 10 was already accepted with a different relay list";
    assert!(
        client
            .wait_for(Duration::from_secs(5), |log| log.contains(refused))
            .await,
        "the list under a reused sequence was not refused by name\n{}",
        client.log()
    );
    // A again under the same sequence: the same list re-read, accepted again.
    write_atomically(&path, &sign_raw(&secret, &payload(&[&url_a], 10, expires)));
    assert!(
        client
            .wait_for(Duration::from_secs(5), |log| log
                .contains("directory accepted again"))
            .await,
        "the same list under the same sequence was not accepted\n{}",
        client.log()
    );
    let log = client.log();
    assert!(!log.contains("[relay-switch]"), "{log}");
    assert_eq!(b.accepted_total(), 0, "B was opened\n{log}");
    assert_eq!(a.open_channels(), 1, "{log}");
    client.interrupt(Duration::from_secs(5)).await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_s1_expired_directory_is_refused_with_its_named_error() {
    let a = relay().await;
    let url_a = format!("ws://{}/r", a.local_addr());
    let (secret, public) = keys();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("directory.json");
    let expired_at = now_unix_s() - 60;
    write_atomically(
        &path,
        &sign_raw(&secret, &payload(&[&url_a], 1, expired_at)),
    );
    let client = ClientProcess::spawn(&path, &public);
    let named = format!("expired at {expired_at}");
    assert!(
        client
            .wait_for(Duration::from_secs(5), |log| log.contains(&named))
            .await,
        "the expired list was not refused by name\n{}",
        client.log()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = client.log();
    assert!(!log.contains("[relay-attach]"), "{log}");
    assert_eq!(a.accepted_total(), 0, "{log}");
    client.interrupt(Duration::from_secs(5)).await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_4_directory_dev_zero_is_refused_quickly_without_memory_growth() {
    let (_, public) = keys();
    let client = ClientProcess::spawn(Path::new("/dev/zero"), &public);
    assert!(
        client
            .wait_for(Duration::from_secs(3), |log| log.contains(
                "directory /dev/zero: cannot read: is a character device"
            ))
            .await,
        "/dev/zero was not refused by name\n{}",
        client.log()
    );
    // It keeps retrying (nothing good to use yet) and stays small while doing so.
    assert!(
        !client
            .wait_for(Duration::from_millis(1_500), |_| false)
            .await
    );
    client.interrupt(Duration::from_secs(3)).await;
}

/// A named pipe with no writer, in `dir`.
fn make_fifo(dir: &std::path::Path) -> std::path::PathBuf {
    let fifo = dir.join("directory.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    fifo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_4_directory_fifo_without_writer_does_not_hang_the_client() {
    let (_, public) = keys();
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = make_fifo(dir.path());
    let client = ClientProcess::spawn(&fifo, &public);
    let named = format!("directory {}: cannot read", fifo.display());
    assert!(
        client
            .wait_for(Duration::from_secs(6), |log| log.contains(&named))
            .await,
        "the writerless FIFO was not refused by name\n{}",
        client.log()
    );
    client.interrupt(Duration::from_secs(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_4_directory_fifo_interrupted_while_waiting_stops_promptly() {
    let (_, public) = keys();
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = make_fifo(dir.path());
    let client = ClientProcess::spawn(&fifo, &public);
    tokio::time::sleep(Duration::from_millis(700)).await;
    client.interrupt(Duration::from_secs(3)).await;
}

/// Runs `switchyard ARGS`; returns (exit code, stderr).
fn run(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(EXE)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run switchyard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn fo_s1_sign_directory_writes_sequence_and_expiry_and_refuses_bad_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("directory.key");
    let key_arg = key.to_str().expect("utf-8 path");
    let (code, err) = run(&["keygen", "--secret-key", key_arg]);
    assert_eq!(code, 0, "{err}");
    let out = dir.path().join("directory.json");
    let out_arg = out.to_str().expect("utf-8 path");
    let sign = |extra: &[&str]| {
        let mut args = vec![
            "sign-directory",
            "--secret-key",
            key_arg,
            "--relay",
            "wss://a.example/r",
            "--out",
            out_arg,
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let read_payload = || -> serde_json::Value {
        let doc: SignedDirectory =
            serde_json::from_slice(&std::fs::read(&out).expect("read out")).expect("document");
        serde_json::from_str(&doc.payload).expect("payload")
    };

    // Explicit values are signed as given.
    let before = now_unix_s();
    let (code, err) = sign(&["--sequence", "42", "--expires-in-seconds", "60"]);
    assert_eq!(code, 0, "{err}");
    let p = read_payload();
    assert_eq!(p["sequence"], 42);
    let expires = p["expires_at_unix_s"].as_u64().expect("expiry");
    assert!((before + 60..=now_unix_s() + 60).contains(&expires), "{p}");
    let (code, err) = sign(&["--expires-at-unix-s", &(before + 1000).to_string()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read_payload()["expires_at_unix_s"], before + 1000);

    // Defaults: sequence = now in Unix milliseconds (above the 42 in the file), expiry = 7 days.
    let before = now_unix_s();
    let (code, err) = sign(&[]);
    assert_eq!(code, 0, "{err}");
    let p = read_payload();
    let after = now_unix_s();
    let sequence = p["sequence"].as_u64().expect("sequence");
    assert!(
        (before * 1000..=(after + 1) * 1000).contains(&sequence),
        "{p}"
    );
    let expires = p["expires_at_unix_s"].as_u64().expect("expiry");
    assert!(
        (before + 7 * 24 * 3600..=after + 7 * 24 * 3600).contains(&expires),
        "{p}"
    );

    // Bad values: named, exit 2, nothing panics.
    for (args, named) in [
        (&["--expires-in-seconds", "0"][..], "--expires-in-seconds 0"),
        (
            &["--expires-in-seconds", "18446744073709551615"][..],
            "--expires-in-seconds 18446744073709551615",
        ),
        (&["--expires-at-unix-s", "5"][..], "--expires-at-unix-s 5"),
        (&["--sequence", "-1"][..], "--sequence"),
        (&["--expires-in-seconds", "-5"][..], "--expires-in-seconds"),
        (&["--sequence", "99999999999999999999"][..], "--sequence"),
        (
            &[
                "--expires-in-seconds",
                "60",
                "--expires-at-unix-s",
                "99999999999",
            ][..],
            "--expires-at-unix-s",
        ),
    ] {
        let (code, err) = sign(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
