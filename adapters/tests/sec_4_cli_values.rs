//! SEC-4: the `switchyard` binary refuses bad command-line values up front, with a named error
//! and a non-zero exit, never a panic (exit 101) and never by starting with a value it should
//! have refused.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
