//! CONF-2: a process judging its own journal. The real `switchyard client` with `--conform` and
//! `--journal` on a live relay: its journal conforms offline too, and nothing departs online.
//! The online judge fed an edited journal: one ERROR-worthy departure per key, counted by
//! requirement in `switchyard_conformance_departures_total`.

mod support_bin;

use std::time::{Duration, Instant};

use support_bin::{http_get, Process};
use switchyard_adapters::failover::relay::{RelayConfig, RelayHandle};
use switchyard_adapters::probes;
use switchyard_spec::conform::generate::{
    edit_refusal_into_open, generated_thresholds, switched_then_directory, SimulatedClient,
};
use switchyard_spec::conform::{judge_text, Verdict};
use switchyard_tools::conform_online::OnlineConformance;

#[test]
fn conf_2_a_client_with_conform_on_a_live_relay_journals_a_conforming_run() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let relay = runtime
        .block_on(RelayHandle::start(RelayConfig::new(
            "127.0.0.1:0".parse().expect("loopback"),
            vec!["/r".into()],
        )))
        .expect("relay");
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("client.journal.jsonl");
    let url = format!("ws://{}/r", relay.local_addr());
    let journal_arg = journal.display().to_string();
    let mut client = Process::start(&[
        "client",
        "--url",
        &url,
        "--conform",
        "--journal",
        &journal_arg,
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = client.value("metrics_addr=");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !client.log().contains("[relay-attach]") {
        assert!(
            Instant::now() < deadline,
            "never attached:\n{}",
            client.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A few ticks on a healthy channel.
    std::thread::sleep(Duration::from_millis(2_500));
    let (_, metrics) = http_get(&addr, "/metrics");
    assert!(
        !metrics.contains("conformance_departures"),
        "no departure, so no family: {metrics}"
    );
    client.signal("TERM");
    assert_eq!(client.exit_within(Duration::from_secs(10)), Some(0));
    assert!(
        !client.log().contains("conformance:"),
        "the online judge logged:\n{}",
        client.log()
    );
    let text = std::fs::read_to_string(&journal).expect("the journal was written");
    let (lines, verdicts) = judge_text(&text).expect("every line reads");
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert!(
        matches!(verdicts[0].1, Verdict::Conforms { .. }),
        "{verdicts:?}"
    );
    // start, the pinned list, the open, its start, the success, the adoption, the attach, ticks.
    assert!(lines >= 7, "{lines} lines:\n{text}");
    runtime.block_on(relay.stop());
}

#[test]
fn conf_2_the_online_judge_counts_one_departure_per_key_by_requirement() {
    let mut client = SimulatedClient::new("client-7", 3, generated_thresholds());
    switched_then_directory(&mut client);
    let mut lines = client.take_lines();
    // The directory path's refusal of the cooling URL, edited into an open of it.
    edit_refusal_into_open(&mut lines);
    // Twice, as two keys would: the second key departs too; each key once.
    let online = OnlineConformance::new();
    let mut observe = online.observer();
    for line in &lines {
        observe(line);
    }
    let mut other = lines.clone();
    for line in &mut other {
        line.key = "client-8".to_owned();
    }
    for line in &other {
        observe(line);
    }
    // More lines of a departed key change nothing.
    observe(&lines[lines.len() - 1]);
    let departures = online.departures();
    assert_eq!(departures.get("FO-D1"), Some(&2), "{departures:?}");
    assert_eq!(departures.len(), 1, "{departures:?}");
    let text = probes::encode(&online.samples());
    assert!(
        text.contains("switchyard_conformance_departures_total{requirement=\"FO-D1\"} 2"),
        "{text}"
    );
}

#[test]
fn conf_1_a_json_log_with_journal_log_is_a_journal_conform_reads() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let relay = runtime
        .block_on(RelayHandle::start(RelayConfig::new(
            "127.0.0.1:0".parse().expect("loopback"),
            vec!["/r".into()],
        )))
        .expect("relay");
    let url = format!("ws://{}/r", relay.local_addr());
    let mut client = Process::start(&[
        "client",
        "--url",
        &url,
        "--journal-log",
        "--log-format",
        "json",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !client.log().contains("[relay-attach]") {
        assert!(
            Instant::now() < deadline,
            "never attached:\n{}",
            client.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    client.signal("TERM");
    assert_eq!(client.exit_within(Duration::from_secs(10)), Some(0));
    let log = client.log();
    let (lines, verdicts) = judge_text(&log).unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert_eq!(verdicts.len(), 1, "{verdicts:?}\n{log}");
    assert!(
        matches!(verdicts[0].1, Verdict::Conforms { .. }),
        "{verdicts:?}"
    );
    assert!(lines >= 7, "{lines} journal lines in:\n{log}");
    runtime.block_on(relay.stop());
}
