//! CONF-1 (seed format): the reader of the TypeScript system's lines and the bounded search that
//! judges them against the naive FO oracle. Fixtures: `checker/tests/seed_lines/`.

use switchyard_core::failover::{CooldownKind, Origin, RelayUrl, Thresholds};
use switchyard_spec::seed_lines::*;

const PROD: [&str; 3] = [
    "wss://alotbuy.com/dshs-relay",
    "wss://relay-direct.alotbuy.com/dshs-relay",
    "wss://106.54.21.172/dshs-relay",
];

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../checker/tests/seed_lines/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn cfg(thresholds: Thresholds, excerpt: bool) -> SeedConfig {
    SeedConfig {
        thresholds,
        candidates: PROD.iter().map(RelayUrl::new).collect(),
        current: None,
        max_inputs: 8,
        max_states: 100_000,
        max_frontier: 64,
        excerpt,
    }
}

fn prod() -> Thresholds {
    Thresholds {
        probe_max_ms: 0,
        ..Thresholds::default()
    }
}

fn run(text: &str, cfg: &SeedConfig) -> Verdict {
    let parsed = parse(text).expect("readable");
    let started = std::time::Instant::now();
    let v = judge(cfg, &parsed).expect("thresholds match");
    eprintln!(
        "{}{} ms",
        render_text("fixture", &parsed, &v, true),
        started.elapsed().as_millis()
    );
    v
}

// ----- the reader -----

#[test]
fn conf_1_seed_reads_a_health_switch_with_exemption_and_emphasis() {
    let line = "  [relay-switch] #2 wss://106.54.21.172/dshs-relay -> wss://alotbuy.com/dshs-relay （原因：当前通道不健康（state=backoff attempts=2 unhealthyForMs=17557 ≥ 阈值 minAttempts=3/graceMs=15000）；**D6 现场：候选池已被冷却耗干 ⇒ 动用一跳豁免（每 url 每冷却周期一次，D4）**；冷却 wss://106.54.21.172/dshs-relay 至 +300000ms）**｜豁免 kind=switched-away 剩 269991ms**";
    let o = parse_line(line, 7).unwrap().unwrap();
    assert_eq!(o.line_no, 7);
    assert_eq!(o.second, None);
    let ObsKind::Switch(s) = o.kind else {
        panic!("not a switch")
    };
    assert_eq!(s.seq, 2);
    assert_eq!(s.from, PROD[2]);
    assert_eq!(s.to, PROD[0]);
    assert!(s.d6_note);
    assert_eq!(s.marker, Some((CooldownKind::SwitchedAway, 269_991)));
    assert_eq!(s.cooled, Some((PROD[2].to_owned(), 300_000)));
    assert_eq!(
        s.reason,
        Some(ReasonObs::Health(HealthObs {
            attempts: Some(2),
            unhealthy_for_ms: Some(17_557),
            min_attempts: Some(3),
            grace_ms: Some(15_000),
        }))
    );
}

#[test]
fn conf_1_seed_reads_a_directory_switch_and_an_abbreviated_one() {
    let o = parse_line("[relay-switch] #5 wss://a/x -> wss://b/x （原因：目录地址变更（source=cache）；冷却 wss://a/x 至 +300000ms）", 1).unwrap().unwrap();
    let ObsKind::Switch(s) = o.kind else { panic!() };
    assert_eq!(
        s.reason,
        Some(ReasonObs::Directory {
            source: "cache".to_owned()
        })
    );
    assert!(!s.exempt());
    let o = parse_line("[relay-switch] #2 wss://106.54.21.172/dshs-relay -> wss://relay-direct.alotbuy.com/dshs-relay", 1).unwrap().unwrap();
    let ObsKind::Switch(s) = o.kind else { panic!() };
    assert_eq!((s.seq, s.reason, s.cooled, s.marker), (2, None, None, None));
}

#[test]
fn conf_1_seed_reads_every_skip_form() {
    let no = parse_line("[relay-skip] ⚠ 当前通道不健康（state=backoff attempts=0 unhealthyForMs=15061）但**链里无其他候选**（候选 3 条，排除 3 条）⇒ 保持原地退避（⛔ 不切到空、不静默回退默认机）", 1).unwrap().unwrap();
    assert_eq!(
        no.kind,
        ObsKind::NoCandidate {
            health: HealthObs {
                attempts: Some(0),
                unhealthy_for_ms: Some(15_061),
                min_attempts: None,
                grace_ms: None
            },
            candidates: Some(3),
            excluded: Some(3)
        }
    );
    let failed = parse_line("[relay-skip] ⛔ 新通道起不来（wss://relay-direct.alotbuy.com/dshs-relay）⇒ **保持原通道**（不做半途替换）；该候选进冷却 0ms（否则它会把链堵死）", 1).unwrap().unwrap();
    assert_eq!(
        failed.kind,
        ObsKind::OpenFailed {
            url: PROD[1].to_owned(),
            exempt: false,
            cooldown_ms: Some(0)
        }
    );
    let exempt = parse_line("[relay-skip] ⛔ 豁免尝试也起不来（wss://alotbuy.com/dshs-relay）⇒ **保持原通道**；重置该候选冷却 300000ms 且**本周期不再豁免**（D4 防重试风暴）", 1).unwrap().unwrap();
    assert_eq!(
        exempt.kind,
        ObsKind::OpenFailed {
            url: PROD[0].to_owned(),
            exempt: true,
            cooldown_ms: Some(300_000)
        }
    );
    let cooling = parse_line("[relay-skip] wss://alotbuy.com/dshs-relay 仍在冷却（剩 59201ms / 共 300000ms）⇒ 不切换（原因本为：目录地址变更（source=cache））", 1).unwrap().unwrap();
    assert_eq!(
        cooling.kind,
        ObsKind::StillCooling {
            url: Some(PROD[0].to_owned()),
            left_ms: Some(59_201),
            of_ms: Some(300_000),
            origin: Some(Origin::Directory)
        }
    );
    let bare = parse_line("[relay-skip] 仍在冷却（剩 59201ms / 共 300000ms）", 1)
        .unwrap()
        .unwrap();
    assert!(matches!(
        bare.kind,
        ObsKind::StillCooling {
            url: None,
            origin: None,
            ..
        }
    ));
}

#[test]
fn conf_1_seed_reads_both_journalctl_prefixes() {
    let short = parse_line("Sep 17 11:43:26 bt-server dshs[2841]: [relay-skip] ⛔ 新通道起不来（wss://a/x）⇒ 保持原通道；该候选进冷却 300000ms", 1).unwrap().unwrap();
    let short2 = parse_line(
        "Sep 18 00:00:00 bt-server dshs[2841]: [relay-skip] ⛔ 新通道起不来（wss://a/x）",
        1,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        short2.second.unwrap() - short.second.unwrap(),
        12 * 3600 + 16 * 60 + 34
    );
    let iso0 = parse_line(
        "2026-09-17T11:43:26+0800 bt-server dshs[2841]: [relay-skip] ⛔ 新通道起不来（wss://a/x）",
        1,
    )
    .unwrap()
    .unwrap();
    let iso = parse_line("2026-09-17T05:43:27+0200 bt-server dshs[2841]: [relay-skip] ⛔ 新通道起不来（wss://a/x）⇒ 保持原通道；该候选进冷却 300000ms", 2).unwrap().unwrap();
    let padded = parse_line(
        "Sep  7 00:00:01 h u: [relay-skip] ⛔ 新通道起不来（wss://a/x）",
        3,
    )
    .unwrap()
    .unwrap();
    assert!(short.text.starts_with("[relay-skip]") && iso.text.starts_with("[relay-skip]"));
    let (a, b) = (iso0.second.unwrap(), iso.second.unwrap());
    assert_eq!(b - a, 1, "short-iso carries its zone");
    assert!(padded.second.is_some());
    // Not a switch/skip line after the prefix: ignored.
    assert_eq!(
        parse_line("Sep 17 11:43:26 bt-server dshs[2841]: started", 1).unwrap(),
        None
    );
    assert_eq!(
        parse_line("# [relay-switch] in a comment", 1).unwrap(),
        None
    );
}

#[test]
fn conf_1_seed_an_unreadable_line_names_its_number_and_the_form() {
    let text =
        "hello\n[relay-switch] #1 wss://a/x -> wss://b/x\n[relay-switch] wss://a/x to wss://b/x\n";
    let err = parse(text).unwrap_err();
    assert_eq!(err.line_no, 3);
    assert!(err.expected.contains("#N FROM -> TO"), "{}", err.expected);
    let err = parse("[relay-skip] something else entirely").unwrap_err();
    assert_eq!(err.line_no, 1);
    assert!(err.to_string().contains("链里无其他候选"), "{err}");
    let err = parse("[relay-switch] #3 wss://a -> wss://b （原因：心情不好）").unwrap_err();
    assert!(err.expected.contains("目录地址变更"), "{}", err.expected);
}

// ----- the search -----

#[test]
fn conf_1_seed_the_11_43_26_reconstruction_departs_with_fo_d1_at_the_directory_line() {
    let v = run(&fixture("reconstruction_11_43_26.log"), &cfg(prod(), false));
    let d = v.departure.expect("departs");
    assert_eq!(d.requirement, "FO-D1");
    assert!(d.text.contains("目录地址变更"), "{}", d.text);
    assert_eq!(v.explained.len(), 2);
    assert!(
        d.allowed.iter().any(|a| a.contains("still cooling")),
        "{:?}",
        d.allowed
    );
}

#[test]
fn conf_1_seed_drill_8_5_conforms_as_an_excerpt() {
    let v = run(&fixture("drill_8_5.log"), &cfg(prod(), true));
    assert!(v.departure.is_none(), "{:?}", v.departure);
    assert_eq!(v.explained.len(), 2);
}

#[test]
fn conf_1_seed_drill_8_5_departs_when_judged_complete() {
    // The open failure of relay-direct before #1 is not in the drill's transcript.
    let v = run(&fixture("drill_8_5.log"), &cfg(prod(), false));
    let d = v.departure.expect("departs");
    assert!(d.text.contains("#1"), "{}", d.text);
}

#[test]
fn conf_1_seed_drill_8_6_conforms_as_an_excerpt() {
    let t = Thresholds {
        exempt: false,
        cooldown_ms: 90_000,
        ..prod()
    };
    let v = run(&fixture("drill_8_6.log"), &cfg(t, true));
    assert!(v.departure.is_none(), "{:?}", v.departure);
    assert_eq!(v.explained.len(), 3);
}

#[test]
fn conf_1_seed_drill_8_6_cooldown_0_departs_with_fo_x2() {
    let t = Thresholds {
        cooldown_ms: 0,
        ..prod()
    };
    let v = run(&fixture("drill_8_6_cooldown0.log"), &cfg(t, false));
    let d = v.departure.expect("departs");
    assert_eq!(d.requirement, "FO-X2");
    assert_eq!(v.explained.len(), 1);
}

fn edited_8_5(from: &str, to: &str) -> String {
    let text = fixture("drill_8_5.log");
    assert!(text.contains(from));
    text.replacen(from, to, 1)
}

#[test]
fn conf_1_seed_drill_8_5_with_seq_3_departs_with_fo_d7() {
    let text = edited_8_5("[relay-switch] #2", "[relay-switch] #3");
    let d = run(&text, &cfg(prod(), true)).departure.expect("departs");
    assert_eq!(d.requirement, "FO-D7");
    assert!(d.text.contains("#3"));
}

#[test]
fn conf_1_seed_drill_8_5_exempting_open_failed_first_departs_with_fo_d5() {
    let text = edited_8_5(
        "-> wss://alotbuy.com/dshs-relay （原因：当前通道不健康（state=backoff attempts=2",
        "-> wss://relay-direct.alotbuy.com/dshs-relay （原因：当前通道不健康（state=backoff attempts=2",
    )
    .replace("kind=switched-away 剩 269991ms", "kind=open-failed 剩 269991ms");
    // Judged complete, so the relay-direct failure before #1 is written in; an excerpt would
    // be explained (alotbuy.com's exempt open failing, unlogged, then relay-direct's).
    let text = text.replacen(
        "  [relay-switch] #1",
        "[relay-skip] ⛔ 新通道起不来（wss://relay-direct.alotbuy.com/dshs-relay）⇒ 保持原通道（不做半途替换）；该候选进冷却 300000ms（否则它会把链堵死）\n[relay-switch] #1",
        1,
    );
    let d = run(&text, &cfg(prod(), false)).departure.expect("departs");
    assert!(d.text.contains("#2"), "{}", d.text);
    assert_eq!(d.requirement, "FO-D5");
}

#[test]
fn conf_1_seed_drill_8_5_with_the_exemption_off_departs_with_fo_d6_off() {
    let t = Thresholds {
        exempt: false,
        ..prod()
    };
    let d = run(&fixture("drill_8_5.log"), &cfg(t, true))
        .departure
        .expect("departs");
    assert_eq!(d.requirement, "FO-D6-OFF");
    assert!(d.text.contains("#2"));
}

#[test]
fn conf_1_seed_a_switch_to_an_unlisted_url_departs_with_fo_r5() {
    let text = edited_8_5(
        "-> wss://106.54.21.172/dshs-relay （原因",
        "-> wss://evil.example/dshs-relay （原因",
    );
    let d = run(&text, &cfg(prod(), true)).departure.expect("departs");
    assert_eq!(d.requirement, "FO-R5");
}

#[test]
fn conf_1_seed_a_health_switch_the_numbers_say_was_healthy_departs_with_fo_h_1() {
    let text = edited_8_5(
        "attempts=2 unhealthyForMs=17557",
        "attempts=2 unhealthyForMs=7557",
    );
    let d = run(&text, &cfg(prod(), true)).departure.expect("departs");
    assert_eq!(d.requirement, "FO-H-1");
}

#[test]
fn conf_1_seed_thresholds_that_disagree_with_the_lines_are_an_argument_error() {
    let parsed = parse(&fixture("drill_8_5.log")).unwrap();
    let t = Thresholds {
        grace_ms: 20_000,
        ..prod()
    };
    let err = judge(&cfg(t, true), &parsed).unwrap_err();
    assert!(err.to_string().contains("graceMs=15000"), "{err}");
}

#[test]
fn conf_1_seed_an_exemption_while_a_clean_candidate_exists_departs_with_fo_d3() {
    // Complete: at the start nothing cools, so relay-direct and 106 are clean.
    let text = "[relay-switch] #1 wss://alotbuy.com/dshs-relay -> wss://106.54.21.172/dshs-relay （原因：当前通道不健康（state=backoff attempts=3 unhealthyForMs=20000 ≥ 阈值 minAttempts=3/graceMs=15000）；D6 现场：候选池已被冷却耗干 ⇒ 动用一跳豁免；冷却 wss://alotbuy.com/dshs-relay 至 +300000ms）｜豁免 kind=switched-away 剩 100000ms\n";
    let d = run(text, &cfg(prod(), false)).departure.expect("departs");
    assert_eq!(d.requirement, "FO-D3");
}

#[test]
fn conf_1_seed_a_second_exemption_in_one_cycle_departs_with_fo_d4() {
    // alotbuy.com's exempt open fails at 12:00:20 (its cycle restarts, exemption spent); 20 s
    // later the lines claim a second exemption of it, long before that cycle could end.
    let text = "\
Sep 17 12:00:00 h dshs[1]: [relay-switch] #1 wss://alotbuy.com/dshs-relay -> wss://106.54.21.172/dshs-relay （原因：当前通道不健康（state=backoff attempts=5 unhealthyForMs=30130 ≥ 阈值 minAttempts=3/graceMs=15000）；冷却 wss://alotbuy.com/dshs-relay 至 +300000ms）
Sep 17 12:00:20 h dshs[1]: [relay-skip] ⛔ 豁免尝试也起不来（wss://alotbuy.com/dshs-relay）⇒ 保持原通道；重置该候选冷却 300000ms 且本周期不再豁免（D4 防重试风暴）
Sep 17 12:00:40 h dshs[1]: [relay-switch] #2 wss://106.54.21.172/dshs-relay -> wss://alotbuy.com/dshs-relay （原因：当前通道不健康（state=backoff attempts=5 unhealthyForMs=40000 ≥ 阈值 minAttempts=3/graceMs=15000）；D6 现场：候选池已被冷却耗干 ⇒ 动用一跳豁免；冷却 wss://106.54.21.172/dshs-relay 至 +300000ms）｜豁免 kind=open-failed 剩 280000ms
";
    let v = run(text, &cfg(prod(), true));
    let d = v.departure.expect("departs");
    assert_eq!(v.explained.len(), 2);
    assert_eq!(d.requirement, "FO-D4");
}
