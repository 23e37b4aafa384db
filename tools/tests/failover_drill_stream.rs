//! `switchyard drill` as an operator sees it (issue #14): each scene streams while it runs, its
//! lines carry times relative to the scene's fault, and `--timeline` draws the scenes as SVG,
//! refusing a path it cannot write before any scene runs.
//!
//! Two runs of scene 1 (about 3 s each) over the real binary: one plain, shared by the tests
//! that read the stream, one with `--timeline`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use switchyard_tools::failover::drill::Scene;

/// A run of scene 1: each stdout line with when it was read, the exit code, and the timeline
/// file when one was asked for.
struct Run {
    lines: Vec<(Duration, String)>,
    code: Option<i32>,
    svg: Option<Result<String, String>>,
    _dir: tempfile::TempDir,
}

fn scene_1_run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| run_scene_1(false))
}

fn scene_1_run_with_timeline() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| run_scene_1(true))
}

fn run_scene_1(timeline: bool) -> Run {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let svg_path: PathBuf = dir.path().join("timeline.svg");
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.args(["drill", "--scene", "1"]);
    if timeline {
        command.arg("--timeline").arg(&svg_path);
    }
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn switchyard");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = Vec::new();
    // Each line is stamped when it reaches us: a drill that prints only at the end shows
    // every line at the same instant.
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        lines.push((started.elapsed(), line));
    }
    let code = child.wait().expect("wait for switchyard").code();
    let svg = timeline.then(|| std::fs::read_to_string(&svg_path).map_err(|e| e.to_string()));
    Run {
        lines,
        code,
        svg,
        _dir: dir,
    }
}

fn dump(run: &Run) -> String {
    run.lines
        .iter()
        .map(|(at, line)| format!("{:>6} ms | {line}\n", at.as_millis()))
        .collect()
}

fn read_at(run: &Run, what: &str, pick: impl Fn(&str) -> bool) -> Duration {
    run.lines
        .iter()
        .find(|(_, line)| pick(line))
        .map(|(at, _)| *at)
        .unwrap_or_else(|| panic!("no {what} line:\n{}", dump(run)))
}

/// The `+N ms` / `-N ms` column a streamed scene line starts with.
fn relative_ms(line: &str) -> Option<i64> {
    let (number, _) = line.trim_start().split_once(" ms")?;
    number.parse().ok()
}

#[test]
fn drill_streams_the_scene_header_and_lines_before_the_scene_ends() {
    let run = scene_1_run();
    assert_eq!(run.code, Some(0), "{}", dump(run));
    let header = read_at(run, "scene header", |l| l.starts_with("== scene 1:"));
    let attach = read_at(run, "[relay-attach]", |l| l.contains("[relay-attach]"));
    let switch = read_at(run, "[relay-switch]", |l| l.contains("[relay-switch]"));
    let verdict = read_at(run, "scene verdict", |l| l.starts_with("== scene 1 PASS"));
    let summary = read_at(run, "summary", |l| {
        l.starts_with("# ") && l.contains("PASS /")
    });
    // The switch comes GRACE_MS (1,500 ms) after the fault: the header and the attach line
    // must be on screen well before the scene is judged.
    assert!(
        verdict >= header + Duration::from_millis(1_000),
        "header read at {header:?}, verdict at {verdict:?}:\n{}",
        dump(run)
    );
    assert!(
        verdict >= attach + Duration::from_millis(1_000),
        "attach read at {attach:?}, verdict at {verdict:?}:\n{}",
        dump(run)
    );
    assert!(switch <= verdict && verdict <= summary, "{}", dump(run));
}

#[test]
fn drill_lines_carry_times_relative_to_the_fault() {
    let run = scene_1_run();
    let text = dump(run);
    let scene: Vec<&str> = run
        .lines
        .iter()
        .map(|(_, l)| l.as_str())
        .skip_while(|l| !l.starts_with("== scene 1:"))
        .skip(1)
        .take_while(|l| !l.starts_with("== scene 1 "))
        .collect();
    assert!(!scene.is_empty(), "{text}");
    for line in &scene {
        assert!(
            relative_ms(line).is_some(),
            "no +N ms column: {line:?}\n{text}"
        );
    }
    let at = |what: &str| {
        scene
            .iter()
            .find(|l| l.contains(what))
            .and_then(|l| relative_ms(l))
            .unwrap_or_else(|| panic!("no {what} line:\n{text}"))
    };
    assert_eq!(at("-- fault: host A down"), 0, "{text}");
    assert!(
        at("[relay-attach]") < 0,
        "the attach precedes the fault:\n{text}"
    );
    // The switch is timed from the fault: at least GRACE_MS, within DEADLINE_MS, and the same
    // figure (to a few ms) the judged step measured.
    let switch_ms = at("[relay-switch]");
    assert!((1_500..=3_000).contains(&switch_ms), "{text}");
    let step = scene
        .iter()
        .find(|l| l.contains("PASS 1-A switch to the other host:"))
        .unwrap_or_else(|| panic!("no 1-A step:\n{text}"));
    let took_ms: i64 = step
        .split("switch to the other host: ")
        .nth(1)
        .and_then(|rest| rest.split(" ms").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {step:?}"));
    assert!(
        (switch_ms - took_ms).abs() <= 25,
        "switch line at +{switch_ms} ms, step measured {took_ms} ms:\n{text}"
    );
}

#[test]
fn drill_timeline_writes_one_svg_panel_per_scene_run() {
    let run = scene_1_run_with_timeline();
    assert_eq!(run.code, Some(0), "{}", dump(run));
    let svg = match &run.svg {
        Some(Ok(svg)) => svg,
        other => panic!("{other:?}\n{}", dump(run)),
    };
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    let title = Scene::S1.title().replace('>', "&gt;");
    // Issue #26: the panel's caption carries its verdict.
    assert_eq!(svg.matches(&format!("scene 1 PASS: {title}")).count(), 1);
    for other in ["scene 2 ", "scene 3 ", "scene 5 "] {
        assert!(!svg.contains(other), "{other} was not run");
    }
    for mark in ["fault", "deadline", "host A", "host B"] {
        assert!(svg.contains(mark), "no {mark:?} in the timeline");
    }
}

#[test]
fn drill_timeline_refuses_an_unwritable_path_by_name_before_running() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let missing = dir.path().join("no-such-folder").join("timeline.svg");
    let folder = dir.path().to_path_buf();
    for path in [missing, folder] {
        let started = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["drill", "--scene", "1", "--timeline"])
            .arg(&path)
            .stdin(Stdio::null())
            .output()
            .expect("run switchyard");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(2), "{path:?}: {stderr}");
        assert!(
            stderr.contains(&format!("--timeline {}:", path.display())),
            "{path:?}: {stderr}"
        );
        assert!(!stdout.contains("== scene"), "a scene ran: {stdout}");
        assert!(started.elapsed() < Duration::from_secs(2), "{path:?}");
    }
}
