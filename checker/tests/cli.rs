//! The `switchyard-check` command as a reviewer runs it.

use std::process::Command;

fn check(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_switchyard-check"))
        .arg("check")
        .args(args)
        .output()
        .expect("run switchyard-check");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn checker_small_failover_run_passes_and_prints_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let (code, out, err) = check(&[
        "failover",
        "--cycles",
        "1",
        "--host-events",
        "2",
        "--variants",
        "production,cooldown-zero",
        "--traces",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("model failover:"), "{out}");
    assert!(out.contains("exhaustive"), "{out}");
    assert!(out.contains("FO-D4 at most one exemption per URL per cooldown cycle"));
    assert!(!out.contains("VIOLATED"), "{out}");
    let written = std::fs::read_dir(&traces).unwrap().count();
    assert!(written >= 5, "witness traces written: {written}");
}

#[test]
fn checker_rejects_bad_arguments_with_a_clear_error() {
    let (code, _, err) = check(&["failover", "--explore", "10.1.2.3:3000"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--explore 10.1.2.3:3000") && err.contains("loopback"),
        "{err}"
    );
    let (code, _, err) = check(&["failover", "--cycles", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--cycles"), "{err}");
    let (code, _, err) = check(&["failover", "--urls-per-host", "2,x"]);
    assert_eq!(code, 2);
    assert!(err.contains("--urls-per-host"), "{err}");
}

#[test]
fn checker_a_vacuous_run_fails() {
    // With no host events nothing ever goes wrong: the exemption witnesses are unreachable, and
    // the checker must say so and exit 1 rather than pass a vacuous model.
    let (code, out, _) = check(&["failover", "--cycles", "1", "--host-events", "0"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("NOT REACHED"), "{out}");
}

const SMALL_FAILOVER: [&str; 6] = [
    "failover",
    "--cycles",
    "1",
    "--host-events",
    "2",
    "--variants=production,cooldown-zero",
];

#[test]
fn checker_memory_budget_reached_by_bfs_falls_back_to_dfs_and_still_judges_every_property() {
    // Breadth-first needs about 1 GiB here; depth-first holds a path, about 50 MiB.
    let mut args = SMALL_FAILOVER.to_vec();
    args.extend(["--memory-budget-mib", "400"]);
    let (code, out, err) = check(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("breadth-first search reached the memory budget"),
        "{out}"
    );
    assert!(out.contains("depth-first search"), "{out}");
    assert!(out.contains(", exhaustive"), "{out}");
    assert!(
        !out.contains("not judged") && !out.contains("VIOLATED"),
        "{out}"
    );
}

#[test]
fn checker_memory_budget_reached_by_both_searches_is_an_incomplete_verdict_exit_3() {
    let mut args = SMALL_FAILOVER.to_vec();
    args.extend(["--memory-budget-mib", "1"]);
    let (code, out, err) = check(&args);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        out.contains("INCOMPLETE: memory budget of 1 MiB reached"),
        "{out}"
    );
    assert!(out.contains("not judged"), "{out}");
    assert!(out.contains("no verdict for model failover"), "{out}");
    assert!(!out.contains("VIOLATED"), "{out}");
}

#[test]
fn checker_runs_one_handoff_scenario_alone_and_names_it() {
    let (code, out, err) = check(&["handoff", "--scenario", "work-kinds"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("model handoff-work-kinds:"), "{out}");
    assert!(!out.contains("model handoff-review:"), "{out}");
    assert!(
        out.contains("HO-7 witness: a pending connection alone makes the source busy"),
        "{out}"
    );
    assert!(out.contains("HO-7 bounded: live tickets <= 10"), "{out}");
    assert!(
        !out.contains("VIOLATED") && !out.contains("NOT REACHED"),
        "{out}"
    );
}
