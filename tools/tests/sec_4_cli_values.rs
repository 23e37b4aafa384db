//! SEC-4: the `switchyard` binary refuses bad command-line values up front, with a named error
//! and a non-zero exit, never a panic (exit 101) and never by starting with a value it should
//! have refused.

mod support_bin;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support_bin::cell_args;

/// Runs `switchyard ARGS`; a process still running after a few seconds accepted the values
/// and is stopped.
fn run(args: &[&str]) -> Result<(i32, String), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                use std::io::Read;
                let _ = pipe.read_to_string(&mut stderr);
            }
            return Ok((status.code().unwrap_or(-1), stderr));
        }
        if started.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{args:?} was accepted: the relay started"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sec_4_relay_refuses_duplicate_and_pattern_paths_by_name_without_panicking() {
    for (path_args, expected) in [
        (vec!["--path", "/a", "--path", "/a"], "given twice"),
        (vec!["--path", "/:x"], "route patterns"),
        (vec!["--path", "/{x}"], "route patterns"),
        (vec!["--path", "/*x"], "route patterns"),
        (vec!["--path", "relay"], "must start with '/'"),
        (vec!["--path", "/a//b"], "empty segment"),
        (vec!["--path", "/status"], "status page"),
    ] {
        let mut args = vec!["relay", "--listen", "127.0.0.1:0"];
        args.extend(path_args.iter().copied());
        let (code, stderr) = run(&args).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(code, 101, "{args:?} panicked: {stderr}");
        assert_ne!(code, 0, "{args:?}: {stderr}");
        assert!(
            stderr.contains("--path") && stderr.contains(expected),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn sec_4_relay_still_takes_several_literal_paths() {
    let err = run(&[
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--path",
        "/dshs-relay",
        "--path",
        "/dshs-relay-2.v1_~x",
    ])
    .expect_err("a relay with good paths keeps running");
    assert!(err.contains("accepted"), "{err}");
}

#[test]
fn sec_4_handoff_commands_refuse_a_host_id_past_the_store_and_a_public_url_that_is_not_one() {
    let secret = "0123456789abcdef0";
    let huge = "9223372036854775808"; // 2^63: past SQL BIGINT
    let cell_with_public_url = |url| {
        vec![
            "cell",
            "--cell-id",
            "1",
            "--secret",
            secret,
            "--desktop-secret",
            secret,
            "--public-url",
            url,
        ]
    };
    for (args, flag, expected) in [
        (
            vec![
                "handoff",
                "drain",
                "--cell-url",
                "http://127.0.0.1:1",
                "--host",
                huge,
                "--secret",
                secret,
            ],
            "--host",
            "past the largest host id",
        ),
        (
            vec![
                "handoff",
                "undrain",
                "--cell-url",
                "http://127.0.0.1:1",
                "--host=x7",
                "--secret",
                secret,
            ],
            "--host",
            "not a host id",
        ),
        (
            cell_with_public_url("not a url"),
            "--public-url",
            "not a URL",
        ),
        (
            cell_with_public_url("ftp://cell.example"),
            "--public-url",
            "must be an http://",
        ),
    ] {
        let (code, stderr) = run(&args).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(expected),
            "{args:?}: {stderr}"
        );
    }
}

/// SEC-4: every command's flags are consistent (clap checks its definitions when a command is
/// built: a flag defined twice panics the binary before it reads any value).
#[test]
fn sec_4_every_command_builds_its_flags_without_panicking() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("--help")
        .output()
        .expect("run");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 8, "{help}");
    for command in commands {
        let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args([command, "--help"])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "switchyard {command} --help: exit {:?}: {stderr}",
            out.status.code()
        );
    }
}

/// SEC-4 / OPS-2: a handoff command that refuses a value before starting exits 2 (as a usage
/// error), naming the flag; a failure while running is 1 (a store it cannot reach).
#[test]
fn sec_4_handoff_values_refused_before_start_exit_2_failures_while_running_exit_1() {
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let secret = "a-long-enough-secret-0123456789";
    let (code, err) = run(
        &["cell", "--cell-id", "1", "--listen", "127.0.0.1:0"],
        &[
            ("SWITCHYARD_HANDOFF_SECRET", secret),
            ("SWITCHYARD_DESKTOP_SECRET", "short"),
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with("switchyard: ") && err.contains("--desktop-secret"),
        "{err}"
    );
    let (code, err) = run(
        &["director", "--once", "--cohort-percent", "101"],
        &[("SWITCHYARD_HANDOFF_SECRET", secret)],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--cohort-percent"), "{err}");
    let (code, err) = run(
        &[
            "director",
            "--once",
            "--db",
            "postgres://nobody@127.0.0.1:1/none",
        ],
        &[("SWITCHYARD_HANDOFF_SECRET", secret)],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.starts_with("switchyard: "), "{err}");
}

/// SCALE-1 / SCALE-4: the store's bounds and global limits are refused out of range by name,
/// before anything starts (exit 2, as clap's usage errors).
#[test]
fn scale_4_cell_store_limit_flags_out_of_range_are_refused_by_name() {
    for (flag, value) in [
        ("--max-hosts", "0"),
        ("--max-hosts", "1099511627777"),
        ("--max-cells", "0"),
        ("--max-cells", "65537"),
        ("--max-attempt-rows", "0"),
        ("--max-in-flight-migrations", "0"),
        ("--max-commits-per-window", "0"),
        ("--rate-window-ms", "999"),
        ("--max-hosts", "lots"),
    ] {
        let args = [
            "cell",
            "--cell-id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--desktop-secret",
            "0123456789abcdef0123",
            "--secret",
            "0123456789abcdef0123",
            flag,
            value,
        ];
        let (code, stderr) = run(&args).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 2, "{flag} {value}: {stderr}");
        assert!(stderr.contains(flag), "{flag} {value}: {stderr}");
    }
}

/// Issue #27 point 3 (SEC-4): values that used to start a process which then busy-looped,
/// minted from nothing, refused every signed request, exited 0 or failed later are refused at
/// start: exit 2, naming the flag (and the value where it is not a secret).
#[test]
fn sec_4_values_that_started_a_broken_process_are_refused_at_start_exit_2() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("s.db").display());
    let secret = "0123456789abcdef0123";
    let refused = |args: &[&str], names: &[&str]| {
        let (code, stderr) = run(args).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        for name in names {
            assert!(stderr.contains(name), "{args:?} names {name:?}: {stderr}");
        }
    };
    // The director ran passes back to back against the shared store.
    refused(
        &[
            "director",
            "--db",
            &db,
            "--secret",
            secret,
            "--interval-ms",
            "0",
        ],
        &["--interval-ms", "0"],
    );
    // A credential minted from an empty (or mistyped) desktop token.
    for token in ["", "deadbeef"] {
        refused(
            &["client-token", "--host", "1", "--desktop-token", token],
            &["--desktop-token"],
        );
    }
    // A desktop with a resolver that is not a URL exited 0.
    refused(
        &[
            "desktop",
            "--resolver",
            "notaurl",
            "--host",
            "1",
            "--desktop-secret",
            secret,
        ],
        &["--resolver", "notaurl"],
    );
    // A transaction bound past any use failed every transaction later ("pool timed out").
    refused(
        &cell_args(
            &db,
            "1",
            &[
                "--secret",
                secret,
                "--desktop-secret",
                secret,
                "--db-txn-timeout-ms",
                "9999999999",
            ],
        ),
        &["--db-txn-timeout-ms", "9999999999", "600000"],
    );
    // A cell given another cell's keys file started, then refused every signed request
    // `unknown_key`.
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["handoff", "cell-key", "--cell", "9", "--secret", secret])
        .output()
        .expect("cell-key");
    assert!(out.status.success(), "{out:?}");
    let keys = dir.path().join("cell9.keys");
    std::fs::write(&keys, &out.stdout).expect("keys");
    let keys = keys.display().to_string();
    refused(
        &cell_args(
            &db,
            "10",
            &["--keys-file", &keys, "--desktop-secret", secret],
        ),
        &["--keys-file", "no key of cell 10", "cell 9"],
    );
}

/// HO-L4: the director's retention flags are validated at start: a retention under the 1 h
/// floor or under the director's own request window, and a batch or an expiry bound out of
/// range, exit 2 naming the flag and the window that binds.
#[test]
fn ho_l4_director_retention_flags_out_of_range_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("s.db").display());
    let secret = "0123456789abcdef0123";
    let refused = |extra: &[&str], names: &[&str]| {
        let mut args = vec!["director", "--db", &db, "--secret", secret];
        args.extend_from_slice(extra);
        let (code, stderr) = run(&args).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        for name in names {
            assert!(stderr.contains(name), "{args:?} names {name:?}: {stderr}");
        }
    };
    refused(
        &["--attempt-retention-ms", "60000"],
        &["--attempt-retention-ms", "60000", "1 h floor", "3600000"],
    );
    refused(
        &[
            "--attempt-retention-ms",
            "3600000",
            "--request-timeout-ms",
            "2000000",
        ],
        &["--attempt-retention-ms", "request window", "6000000"],
    );
    refused(&["--reap-batch", "0"], &["--reap-batch", "got 0"]);
    refused(&["--reap-batch", "50001"], &["--reap-batch", "50000"]);
    refused(
        &["--max-expired-per-pass", "0"],
        &["--max-expired-per-pass", "got 0"],
    );
}

/// Issue #27 point 2 (SEC-4): `keygen --public-of` reads a small regular file only: a device
/// that never ends (`/dev/zero`, read up to 2 GB before) and a FIFO nobody writes (waited on
/// forever before) are refused at once, exit 2, naming the flag and the path.
#[test]
fn sec_4_keygen_public_of_a_device_or_a_fifo_is_refused_without_reading_or_waiting() {
    let dir = tempfile::tempdir().expect("dir");
    let fifo = dir.path().join("key.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let fifo = fifo.display().to_string();
    for path in ["/dev/zero", fifo.as_str()] {
        let (code, stderr) =
            run(&["keygen", "--public-of", path]).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(code, 2, "{path}: {stderr}");
        assert!(
            stderr.contains(&format!("--public-of {path}"))
                && stderr.contains("not a regular file"),
            "{path}: {stderr}"
        );
    }
    // A real secret key still works.
    let key = dir.path().join("dir.key");
    let key = key.display().to_string();
    let (code, stderr) = run(&["keygen", "--secret-key", &key]).expect("keygen");
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = run(&["keygen", "--public-of", &key]).expect("public-of");
    assert_eq!(code, 0, "{stderr}");
}
