//! OPS-2 over the real binary: logs are plain text without colour when not on a terminal, one
//! JSON object a line on request, and a `RUST_LOG` that does not parse is an error naming it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The first `n` stderr lines of `switchyard ARGS` (then it is stopped).
fn first_lines(args: &[&str], env: &[(&str, &str)], n: usize) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let lines = (0..n)
        .map_while(|_| rx.recv_timeout(Duration::from_secs(10)).ok())
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn ops_2_text_logs_have_no_colour_codes_when_not_on_a_terminal() {
    let lines = first_lines(&["relay", "--listen", "127.0.0.1:0"], &[], 1);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains("relay listening"), "{lines:?}");
    assert!(
        !lines[0].contains('\u{1b}'),
        "ANSI escape in {:?}",
        lines[0]
    );
}

#[test]
fn ops_2_log_format_json_writes_one_object_a_line() {
    for args in [
        vec!["--log-format", "json", "relay", "--listen", "127.0.0.1:0"],
        vec!["relay", "--listen", "127.0.0.1:0", "--log-format", "json"],
    ] {
        let lines = first_lines(&args, &[], 1);
        let v: serde_json::Value = serde_json::from_str(&lines[0]).expect("a JSON line");
        assert_eq!(v["message"], "relay listening", "{v}");
        assert_eq!(v["level"], "INFO");
    }
    let lines = first_lines(
        &["relay", "--listen", "127.0.0.1:0"],
        &[("SWITCHYARD_LOG_FORMAT", "json")],
        1,
    );
    assert!(lines[0].starts_with('{'), "{lines:?}");
}

#[test]
fn ops_2_a_bad_rust_log_is_an_error_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["relay", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info,[[[")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("RUST_LOG") && stderr.contains("[[["),
        "{stderr}"
    );
}

/// OPS-2: a mobile that cannot reach its resolver says why once (not per retry) and ends with
/// the cause, not only "did not finish".
#[test]
fn ops_2_a_failing_mobile_says_why_once_and_ends_with_the_cause() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "mobile",
            "--resolver",
            "http://127.0.0.1:9",
            "--host",
            "7",
            "--max-attempts",
            "3",
            "--desktop-secret",
            "ops-test-secret-0123456789abcdef",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("attempt failed").count(),
        1,
        "one WARN for one cause:\n{stderr}"
    );
    assert!(
        stderr.contains("mobile did not finish its mutations: resolve failed"),
        "{stderr}"
    );
}

/// OPS-2 (issue 27 point 10): with `--log-format json` a field is a JSON value, not Rust
/// `Debug` text: the relay's paths are an array. Red before: `"paths":"[\"/a\", \"/b\"]"`.
#[test]
fn ops_2_json_log_fields_are_json_values_not_debug_text() {
    let lines = first_lines(
        &[
            "--log-format",
            "json",
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--path",
            "/a",
            "--path",
            "/b",
        ],
        &[],
        1,
    );
    let v: serde_json::Value = serde_json::from_str(&lines[0]).expect("a JSON line");
    assert_eq!(v["message"], "relay listening", "{v}");
    assert_eq!(v["paths"], serde_json::json!(["/a", "/b"]), "{v}");
    assert!(v["timestamp"].is_string() && v["level"] == "INFO", "{v}");
}
