//! The quick starts in `docs/OPERATIONS.md` (failover) and `docs/HANDOFF.md` (handoff) run as
//! written: each block marked `<!-- quickstart: NAME -->` is extracted and run with bash in an
//! empty directory, `switchyard` (this build) on the PATH. A doc edit that breaks a command
//! breaks this test. Fixed loopback ports (as in the docs): 8081, 8082, 7401, 7402.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The shell block after `<!-- quickstart: name -->` in `doc`.
fn block(doc: &str, name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(doc);
    let text = std::fs::read_to_string(&path).expect("read the doc");
    let marker = format!("<!-- quickstart: {name} -->");
    let after = text
        .split(&marker)
        .nth(1)
        .unwrap_or_else(|| panic!("{doc} has no {marker}"));
    let body = after
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .unwrap_or_else(|| panic!("{doc}: no ```sh block after {marker}"));
    body.to_owned()
}

/// Run `script` with `bash -e`; background jobs are killed whatever happens. (stdout, stderr).
fn run(script: &str, within: Duration) -> (bool, String, String) {
    let dir = tempfile::tempdir().expect("dir");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_switchyard"))
        .parent()
        .expect("bin dir")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The test's own guard, not part of the doc: no process outlives a failed run.
    let guarded = format!("trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}\n");
    let mut child = Command::new("bash")
        .args(["-e", "-c", &guarded])
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("SWITCHYARD_DB")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > within {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ops_quick_start_failover_runs_as_written() {
    let (ok, stdout, stderr) = run(&block("OPERATIONS.md", "failover"), Duration::from_secs(60));
    assert!(ok, "the failover quick start failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("[relay-switch] #1")
            && stdout.contains("-> ws://127.0.0.1:8082/dshs-relay"),
        "no switch to the second relay:\n{stdout}\n{stderr}"
    );
}

#[test]
fn ops_quick_start_handoff_runs_as_written() {
    let (ok, stdout, stderr) = run(&block("HANDOFF.md", "handoff"), Duration::from_secs(60));
    assert!(ok, "the handoff quick start failed:\n{stdout}\n{stderr}");
    for expected in [
        r#""cells":[1]"#,
        r#""committed":1"#,
        r#""cells":[2]"#,
        "ready",
        r#""registrations":[[1,2],[2,3]]"#,
    ] {
        assert!(
            stdout.contains(expected),
            "{expected} missing:\n{stdout}\n{stderr}"
        );
    }
}
