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
    // The table and the trace export, at the tiny bound (every witness reached): what this
    // checks is the command's output, not the model's coverage (the spec's tests pin that).
    // At `SMALL_FAILOVER` the run took 135 s in the test profile on a busy 2-core machine.
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let mut args = TINY_FAILOVER.to_vec();
    args.extend(["--traces", traces.to_str().unwrap()]);
    let (code, out, err) = check(&args);
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
    // Eight URLs: more than the model's records hold (and 109,601 directory lists).
    let (code, _, err) = check(&["failover", "--urls-per-host", "4,4"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--urls-per-host [4, 4]") && err.contains("at most 7"),
        "{err}"
    );
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
    // The tiny bound with one channel report: 120,561 states. Breadth-first reached 48 MiB
    // after 33,217 of them; the depth-first retry finished under 20 MiB (and not under
    // 12 MiB: it is no tiny search). Measured 2026-12-04 in the test profile; at
    // `SMALL_FAILOVER` with 400 MiB the same fallback took 212 s there (a busy machine).
    let mut args = TINY_FAILOVER.to_vec();
    let reports = args
        .iter()
        .position(|a| *a == "--channel-reports")
        .expect("a bound")
        + 1;
    args[reports] = "1";
    args.extend(["--bfs", "--memory-budget-mib", "48"]);
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

/// `check handoff --scenario work-kinds`, run once for the two tests that read its output (a
/// model run of 30 s in the test profile on a busy machine).
fn work_kinds() -> &'static (i32, String, String) {
    static RUN: std::sync::OnceLock<(i32, String, String)> = std::sync::OnceLock::new();
    RUN.get_or_init(|| check(&["handoff", "--scenario", "work-kinds"]))
}

#[test]
fn checker_runs_one_handoff_scenario_alone_and_names_it() {
    let (code, out, err) = work_kinds();
    assert_eq!(*code, 0, "{out}\n{err}");
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

#[test]
fn scale_3_checker_runs_the_sweep_model_alone_and_names_it() {
    let (code, out, err) = check(&["sweep"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("model sweep:"), "{out}");
    // The state count is pinned once, in spec/tests/sweep_model.rs.
    assert!(out.contains(", exhaustive"), "{out}");
    assert!(
        !out.contains("model failover") && !out.contains("model handoff"),
        "{out}"
    );
    for property in [
        "SCALE-3 every host examined once per sweep",
        "SCALE-3 a failed page resumes at its own start",
        "SCALE-3 no host twice in one pass",
        "HO-S2 busy never spends the budget",
        "HO-S2 busy hosts never starve idle ones",
    ] {
        assert!(out.contains(property), "{property}: {out}");
    }
    assert_eq!(
        out.lines().last().unwrap_or_default(),
        "exit 0: all 7 properties hold and all 5 witnesses are reached in sweep",
        "{out}"
    );
}

#[test]
fn ho_l3_scale_6_checker_runs_the_dispatch_model_alone_and_names_it() {
    let (code, out, err) = check(&["dispatch"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("model dispatch:"), "{out}");
    // The state count is pinned once, in spec/tests/dispatch_model.rs.
    assert!(out.contains(", exhaustive"), "{out}");
    assert!(
        !out.contains("model failover") && !out.contains("model sweep"),
        "{out}"
    );
    for property in [
        "HO-L3 a live cell is never held up by a stuck one",
        "SCALE-3 the cursor passes a page only after its dispatches ended",
        "SCALE-3 the wrapped sweep never jumps back to its start",
        "HO-L3 no request is sent into a target whose lease lapsed",
        "SCALE-6 witness: two requests in flight at once",
    ] {
        assert!(out.contains(property), "{property}: {out}");
    }
    assert_eq!(
        out.lines().last().unwrap_or_default(),
        "exit 0: all 7 properties hold and all 7 witnesses are reached in dispatch",
        "{out}"
    );
}

#[test]
fn ho_a4_scale_1_checker_runs_the_enrol_model_alone_and_names_it() {
    let (code, out, err) = check(&["enrol"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("model enrol:"), "{out}");
    // The state count is pinned once, in spec/tests/enrol_model.rs.
    assert!(out.contains(", exhaustive"), "{out}");
    assert!(
        !out.contains("model failover") && !out.contains("model sweep"),
        "{out}"
    );
    for property in [
        "SCALE-1 a cell that does not enrol never writes a row",
        "SCALE-1 the host bound is never exceeded",
        "SCALE-1 a refused enrolment is named by its cause",
        "HO-A4 one assignment row per host: an enrolment never replaces it",
    ] {
        assert!(out.contains(property), "{property}: {out}");
    }
    assert_eq!(
        out.lines().last().unwrap_or_default(),
        "exit 0: all 6 properties hold and all 5 witnesses are reached in enrol",
        "{out}"
    );
}

#[test]
fn ho_l5_checker_runs_the_lease_model_alone_and_names_it() {
    let (code, out, err) = check(&["lease"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("model lease:"), "{out}");
    // The state count is pinned once, in spec/tests/lease_model.rs.
    assert!(out.contains(", exhaustive"), "{out}");
    assert!(out.contains("HO-L5 a cell never serves while a successor holds its lease"));
    assert_eq!(
        out.lines().last().unwrap_or_default(),
        "exit 0: all 2 properties hold and all 3 witnesses are reached in lease",
        "{out}"
    );
}

/// Issue #40: the store's plans interleaved over row locks run alone as `check store`; the
/// table names every requirement the model judges.
#[test]
fn ho_a1_ho_s4_checker_runs_the_store_model_alone_and_names_it() {
    let (code, out, err) = check(&["store"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("model store:"), "{out}");
    // The state count is pinned once, in spec/tests/store_race_model.rs.
    assert!(out.contains(", exhaustive"), "{out}");
    for property in [
        "HO-A1 an op id is committed at most once",
        "HO-A2 a client reads its op id as committed only if it committed",
        "HO-A5 witness: a fence that failed seven times in a row lands",
    ] {
        assert!(out.contains(property), "{property}: {out}");
    }
    assert_eq!(
        out.lines().last().unwrap_or_default(),
        "exit 0: all 8 properties hold and all 7 witnesses are reached in store",
        "{out}"
    );
}

/// A failover bound every witness is reached at, in a fraction of a second.
const TINY_FAILOVER: [&str; 14] = [
    "failover",
    "--host-events",
    "2",
    "--directory-updates",
    "1",
    "--channel-reports",
    "0",
    "--odd-time-steps",
    "0",
    "--transient-failures",
    "0",
    "--late-ticks",
    "0",
    "--variants=production,cooldown-zero",
];

fn last_line(out: &str) -> &str {
    out.lines().last().unwrap_or_default()
}

#[test]
fn checker_exit_0_last_line_says_every_property_holds_and_every_witness_is_reached() {
    let (code, out, err) = check(&TINY_FAILOVER);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        last_line(&out),
        "exit 0: all 32 properties hold and all 12 witnesses are reached in failover",
        "{out}"
    );
}

#[test]
fn checker_exit_1_for_an_unreached_witness_names_it_on_the_last_line() {
    // No host events: nothing goes wrong, so the exemption and probe witnesses are unreachable.
    let (code, out, err) = check(&["failover", "--host-events", "0", "--variants=production"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let last = last_line(&out);
    assert!(
        last.starts_with(
            "exit 1: 7 witnesses never reached: \"witness: exempt switch (FO-D6)\" (failover), "
        ),
        "{out}"
    );
    assert!(!last.contains("violated"), "{last}");
}

#[test]
fn checker_exit_3_last_line_says_incomplete_and_names_the_model() {
    // At this bound even the depth-first retry outgrows 1 MiB (the tiny bound does not).
    let mut args = SMALL_FAILOVER.to_vec();
    args.extend(["--memory-budget-mib", "1"]);
    let (code, out, err) = check(&args);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        last_line(&out).starts_with("exit 3: INCOMPLETE: no violation found, but no verdict for failover (memory budget of 1 MiB reached)"),
        "{out}"
    );
}

#[test]
fn checker_exit_2_last_line_says_bad_arguments() {
    let (code, out, err) = check(&["failover", "--cycles", "0"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        last_line(&err).starts_with("exit 2: bad arguments"),
        "{err}"
    );
    let (code, _, err) = check(&["failover", "--explore", "10.1.2.3:3000"]);
    assert_eq!(code, 2);
    assert!(
        last_line(&err).starts_with("exit 2: bad arguments: --explore 10.1.2.3:3000"),
        "{err}"
    );
}

#[test]
fn checker_searches_depth_first_by_default_and_breadth_first_on_request_with_the_same_verdict() {
    let (code, out, err) = check(&TINY_FAILOVER);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("depth-first search"), "{out}");
    assert!(
        out.contains("shortest paths: one-thread breadth-first re-check"),
        "{out}"
    );
    let mut args = TINY_FAILOVER.to_vec();
    args.push("--bfs");
    let (code, bfs, err) = check(&args);
    assert_eq!(code, 0, "{bfs}\n{err}");
    assert!(bfs.contains("breadth-first search"), "{bfs}");
    // The same states and the same shortest paths, whichever search found them first.
    let unique = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("model failover"))
            .and_then(|l| l.split(" unique").next())
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_owned)
    };
    assert!(unique(&out).is_some(), "{out}");
    assert_eq!(unique(&out), unique(&bfs));
    let witnesses = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.contains("witnessed ("))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert!(!witnesses(&out).is_empty(), "{out}");
    assert_eq!(witnesses(&out), witnesses(&bfs));
}

#[test]
fn checker_table_gives_each_witness_its_step_count_and_says_it_is_the_shortest() {
    let (code, out, err) = check(&TINY_FAILOVER);
    assert_eq!(code, 0, "{out}\n{err}");
    // Shortest paths at this bound (an independent breadth-first search in
    // tests/shortest.rs checks the lengths themselves).
    assert!(
        out.contains("witness: directory switch (FO-D1)")
            && out.contains("witnessed (2 steps, shortest)")
            && out.contains("witnessed (7 steps, shortest)"),
        "{out}"
    );
    assert!(!out.contains("not the shortest"), "{out}");
}

#[test]
fn checker_explore_as_the_readme_writes_it_serves_the_failover_model_with_named_initial_states() {
    use std::io::{BufRead, BufReader};
    // Port 0: the Explorer binds any free port; only the announcement is read here.
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard-check"))
        .args(["check", "--explore", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run switchyard-check");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let announced = loop {
        match lines.next() {
            Some(Ok(line)) if line.starts_with("Explorer for") => break Some(line),
            Some(Ok(line)) => seen.push(line),
            _ => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let announced = announced.unwrap_or_else(|| panic!("no Explorer: {seen:?}"));
    assert!(
        announced.starts_with("Explorer for the failover model on http://127.0.0.1:0/"),
        "{announced}"
    );
    assert!(
        announced.contains("initial states: variant production, variant exempt-off, variant cooldown-zero, variant supervisor-off, variant probe-jitter"),
        "{announced}"
    );
    assert!(
        seen.iter().any(|l| l.contains("the failover model")),
        "the default is said: {seen:?}"
    );
}

/// OPS-2 (issue 27 point 11): output a log file can hold. When stderr is not a terminal the
/// progress is whole lines (no carriage returns), and every line of the table fits 120
/// columns, the handoff model's long property names included. Red before: the handoff table's
/// rows were up to 232 characters and the progress ended with `\r` padding.
#[test]
fn ops_2_checker_output_fits_120_columns_and_has_no_carriage_returns_off_a_terminal() {
    for (code, out, err) in [work_kinds().clone(), check(&TINY_FAILOVER)] {
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(!out.contains('\r') && !err.contains('\r'), "{err:?}");
        for line in out.lines() {
            assert!(
                line.chars().count() <= 120,
                "{} columns: {line}",
                line.chars().count()
            );
        }
    }
}
