//! OPS-2 / SEC-1 / HO-L1 / SEC-4 over the real binary (issue 27 points 6, 7, 8): a client that
//! a cell refused in a way no retry can fix says so and stops; a mobile whose mutations were
//! all acked reports success; a second undrain names `not_drained`; an `https://` cell URL is
//! refused naming TLS. Red before: the desktop ran on silently (exit 0 at its end), the mobile
//! retried a drained host until its attempts ran out and exited 1 even with every mutation
//! acked, the second undrain said `unknown_host`, the https URL said `bad URL`.

mod support_bin;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support_bin::{cell_args, Process, SECRET, WAIT};

/// The exit status documented for a refused credential (docs/OPERATIONS.md).
const CREDENTIAL_REFUSED_EXIT: i32 = 4;

/// A cell on an SQLite store in `dir`; its URL.
fn cell(dir: &tempfile::TempDir) -> (Process, String) {
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let cell = Process::start(&cell_args(&db, "1", &[]));
    let url = cell.value("url=");
    (cell, url)
}

/// A desktop of host 7, registered at the cell.
fn desktop(url: &str) -> Process {
    let desktop = Process::start(&["desktop", "--resolver", url, "--host", "7"]);
    let _ = desktop.value("desktop registered");
    desktop
}

fn operator(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("handoff")
        .args(args)
        .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
        .stdin(Stdio::null())
        .output()
        .expect("run switchyard handoff")
}

fn drain(url: &str) {
    let out = operator(&["drain", "--cell-url", url, "--cell-id", "1", "--host", "7"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `switchyard mobile`: its stderr lines as they come, its report at the end.
struct Mobile {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    log: String,
}

impl Mobile {
    fn start(url: &str, extra: &[&str]) -> Mobile {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args([
                "mobile",
                "--resolver",
                url,
                "--host",
                "7",
                "--prefix",
                "phone",
            ])
            .args(extra)
            .env("RUST_LOG", "info")
            .env("SWITCHYARD_DESKTOP_SECRET", SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn switchyard mobile");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Mobile {
            child,
            lines,
            log: String::new(),
        }
    }

    /// Wait (bounded) for a stderr line holding `text`.
    fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + WAIT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                break;
            };
            self.log.push_str(&line);
            self.log.push('\n');
            if line.contains(text) {
                return;
            }
        }
        panic!("the mobile never logged {text:?}:\n{}", self.log);
    }

    /// Its exit code, report and whole stderr, waiting at most [`WAIT`].
    fn finish(mut self) -> (Option<i32>, Value, String) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if started.elapsed() > WAIT {
                let _ = self.child.kill();
                let _ = self.child.wait();
                while let Ok(l) = self.lines.try_recv() {
                    self.log.push_str(&l);
                    self.log.push('\n');
                }
                panic!("the mobile still ran after {WAIT:?}:\n{}", self.log);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            let _ = out.read_to_string(&mut stdout);
        }
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.log.push_str(&l);
            self.log.push('\n');
        }
        let report: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("mobile report {stdout:?}: {e}\n{}", self.log));
        (status.code(), report, std::mem::take(&mut self.log))
    }
}

impl Drop for Mobile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ops_2_sec_1_a_desktop_whose_token_is_refused_warns_and_exits_4() {
    let dir = tempfile::tempdir().expect("dir");
    let (_cell, url) = cell(&dir);
    let mut desktop = Process::start(&[
        "desktop",
        "--resolver",
        url.as_str(),
        "--host",
        "7",
        "--token",
        "deadbeef",
    ]);
    let code = desktop.exit_within(WAIT);
    let log = desktop.log();
    assert_eq!(code, Some(CREDENTIAL_REFUSED_EXIT), "{log}");
    let warn = log
        .lines()
        .find(|l| l.contains("WARN"))
        .unwrap_or_else(|| panic!("a WARN line:\n{log}"));
    assert!(
        warn.contains("credential_refused") && warn.contains("401"),
        "names the refusal: {warn}"
    );
    assert!(
        log.contains("switchyard: the cell refused the desktop's token"),
        "{log}"
    );
}

#[test]
fn ops_2_ho_a5_a_mobile_at_a_drained_host_names_the_close_and_stops_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let (_cell, url) = cell(&dir);
    let _desktop = desktop(&url);
    drain(&url);
    let mobile = Mobile::start(&url, &["--mutations", "1", "--max-attempts", "5"]);
    let (code, report, log) = mobile.finish();
    assert_eq!(code, Some(1), "{report}\n{log}");
    assert_eq!(report["closed_by"], "1012 source_draining", "{report}");
    assert_eq!(report["stopped"], "host_drained", "{report}");
    assert_eq!(
        report["attempts"], 1,
        "no retry at a drained host: {report}"
    );
    assert_eq!(report["done"], false, "{report}");
    let warn = log
        .lines()
        .find(|l| l.contains("WARN"))
        .unwrap_or_else(|| panic!("a WARN line:\n{log}"));
    assert!(warn.contains("source_draining"), "{warn}");
    assert!(
        log.contains("1012 source_draining") && log.contains("switchyard: mobile did not finish"),
        "{log}"
    );
}

#[test]
fn ops_2_a_mobile_whose_mutations_were_all_acked_exits_0_when_a_drain_cuts_its_hold() {
    let dir = tempfile::tempdir().expect("dir");
    let (_cell, url) = cell(&dir);
    let _desktop = desktop(&url);
    let mut mobile = Mobile::start(
        &url,
        &[
            "--mutations",
            "2",
            "--hold-ms",
            "60000",
            "--max-attempts",
            "5",
        ],
    );
    mobile.wait_for("every mutation acked");
    drain(&url);
    let (code, report, log) = mobile.finish();
    assert_eq!(code, Some(0), "{report}\n{log}");
    assert_eq!(report["done"], true, "{report}");
    assert_eq!(
        report["acked"],
        serde_json::json!(["phone-0", "phone-1"]),
        "{report}"
    );
    assert_eq!(report["unknown"], serde_json::json!([]), "{report}");
    assert_eq!(report["stopped"], "host_drained", "{report}");
}

#[test]
fn ho_l1_a_second_undrain_is_refused_not_drained() {
    let dir = tempfile::tempdir().expect("dir");
    let (_cell, url) = cell(&dir);
    let desktop = desktop(&url);
    drain(&url);
    // The desktop stays away, so the host gets no fresh machine between the two undrains.
    drop(desktop);
    let undrain = || {
        operator(&[
            "undrain",
            "--cell-url",
            &url,
            "--cell-id",
            "1",
            "--host",
            "7",
        ])
    };
    let deadline = Instant::now() + WAIT;
    loop {
        let out = undrain();
        if out.status.success() {
            break;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        // The drained work closes and the fence is written within moments.
        assert!(
            (err.contains("still_closing") || err.contains("fence_unwritten"))
                && Instant::now() < deadline,
            "{err}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = undrain();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("undrain of host 7 refused: not_drained"),
        "{err}"
    );
    // A host the cell never had is still unknown.
    let out = operator(&[
        "undrain",
        "--cell-url",
        &url,
        "--cell-id",
        "1",
        "--host",
        "8",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused: unknown_host"), "{err}");
}

#[test]
fn sec_4_an_https_cell_url_is_refused_naming_tls() {
    for command in ["drain", "undrain"] {
        let out = operator(&[
            command,
            "--cell-url",
            "https://cell1.example:7401",
            "--cell-id",
            "1",
            "--host",
            "7",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("--cell-url")
                && err.contains("https://cell1.example:7401")
                && err.contains("does not speak TLS")
                && err.contains("reverse proxy"),
            "{err}"
        );
    }
}
