//! CONF-1 (seed format): `switchyard-check conform --seed-format` as a newcomer runs it, on the
//! fixtures in `tests/seed_lines/`.

mod support_conform;

use support_conform::conform;

const PROD: &str = "wss://alotbuy.com/dshs-relay,wss://relay-direct.alotbuy.com/dshs-relay,wss://106.54.21.172/dshs-relay";

fn fixture(name: &str) -> String {
    format!("{}/tests/seed_lines/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn conf_1_seed_cli_the_reconstruction_departs_with_fo_d1_exit_1() {
    let f = fixture("reconstruction_11_43_26.log");
    let (code, out, err) = conform(&["--seed-format", "--candidates", PROD, &f], None);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("departs at line 34"), "{out}");
    assert!(out.contains("breaks FO-D1"), "{out}");
    assert!(out.contains("still cooling"), "{out}");
    assert!(out.contains("not explained within the bound"), "{out}");
}

#[test]
fn conf_1_seed_cli_the_drill_excerpts_conform_exit_0() {
    let (code, out, err) = conform(
        &[
            "--seed-format",
            "--excerpt",
            "--candidates",
            PROD,
            &fixture("drill_8_5.log"),
        ],
        None,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("conforms"), "{out}");
    let (code, out, err) = conform(
        &[
            "--seed-format",
            "--excerpt",
            "--exempt",
            "0",
            "--cooldown-ms",
            "90000",
            "--candidates",
            PROD,
            &fixture("drill_8_6.log"),
        ],
        None,
    );
    assert_eq!(code, 0, "{out}\n{err}");
}

#[test]
fn conf_1_seed_cli_reads_stdin_and_writes_json() {
    let text = std::fs::read_to_string(fixture("drill_8_6_cooldown0.log")).unwrap();
    let (code, out, err) = conform(
        &[
            "--seed-format",
            "--cooldown-ms",
            "0",
            "--format",
            "json",
            "--candidates",
            PROD,
            "-",
        ],
        Some(&text),
    );
    assert_eq!(code, 1, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["depart"], 1);
    assert_eq!(v["files"][0]["file"], "-");
    assert_eq!(v["files"][0]["verdict"], "departs");
    assert_eq!(v["files"][0]["departure"]["requirement"], "FO-X2");
    assert_eq!(v["files"][0]["departure"]["line"], 21);
}

#[test]
fn conf_1_seed_cli_unreadable_input_and_bad_arguments_exit_2() {
    let (code, _, err) = conform(
        &["--seed-format", "--candidates", PROD, "-"],
        Some("ok\n[relay-switch] #1 wss://a to wss://b\n"),
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("-: line 2") && err.contains("#N FROM -> TO"),
        "{err}"
    );
    let (code, _, err) = conform(&["--seed-format", "-"], Some(""));
    assert_eq!(code, 2);
    assert!(err.contains("--candidates"), "{err}");
    let (code, _, err) = conform(
        &["--seed-format", "--candidates", PROD, "--exempt", "2", "-"],
        Some(""),
    );
    assert_eq!(code, 2);
    assert!(err.contains("--exempt"), "{err}");
    let (code, _, err) = conform(
        &["--seed-format", "--candidates", PROD, "/nonexistent/x.log"],
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/x.log"), "{err}");
    // Thresholds that disagree with the lines: an argument error naming the line.
    let (code, _, err) = conform(
        &[
            "--seed-format",
            "--excerpt",
            "--grace-ms",
            "20000",
            "--candidates",
            PROD,
            &fixture("drill_8_5.log"),
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("line 27") && err.contains("graceMs=15000"),
        "{err}"
    );
    let (code, _, err) = conform(&[&fixture("drill_8_5.log")], None);
    assert_eq!(code, 2);
    // Without --seed-format the file is read as a journal: its first line is named.
    assert!(err.contains("line 1: not a journal line"), "{err}");
    let (code, _, err) = conform(
        &["-"],
        Some("Sep 17 11:43:26 h node[1]: [relay-switch] #1 a -> b\n"),
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("-: line 1") && err.contains("give --seed-format"),
        "{err}"
    );
}
