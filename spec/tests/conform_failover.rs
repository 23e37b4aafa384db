//! CONF-1: failover journals judged by the spec. A journal the core and a faithful driver wrote
//! conforms; the same journal with one event edited departs at that line with the requirement
//! the edit breaks; a gap is filled by search.

use switchyard_core::failover::{
    ChannelAction, ChannelState, DirectorySource, FailoverEffect, FailoverInput, FailoverRecord,
    Output, RelayUrl,
};
use switchyard_core::journal::{JournalLine, JournalRecord};
use switchyard_core::MonoMs;
use switchyard_spec::conform::generate::{generate, generated_thresholds, SimulatedClient};
use switchyard_spec::conform::{Conformance, Departure, Verdict};

fn judge(lines: &[JournalLine]) -> Vec<(String, Verdict)> {
    let mut c = Conformance::new();
    for (i, line) in lines.iter().enumerate() {
        // Through the text form, as `conform` reads a file.
        let text = serde_json::to_string(line).expect("a line serialises");
        c.feed_text(i as u64 + 1, &text).expect("a readable line");
    }
    c.finish()
}

fn departure(lines: &[JournalLine]) -> Option<Departure> {
    judge(lines)
        .into_iter()
        .find_map(|(_, v)| v.departure().cloned())
}

fn url(s: &str) -> RelayUrl {
    RelayUrl::new(s)
}

fn list() -> Vec<RelayUrl> {
    vec![url("wss://a/r"), url("wss://b/r"), url("wss://c/r")]
}

/// Attached to a, a turns unhealthy, the tick switches to b (a cools), then a directory update
/// with a first asks to go back to a: FO-D1 refuses (a is cooling).
fn switched_then_directory(client: &mut SimulatedClient) {
    client.give(
        MonoMs(100),
        FailoverInput::OpenSucceeded {
            url: url("wss://a/r"),
        },
    );
    client.give(
        MonoMs(1_000),
        FailoverInput::ChannelState {
            url: url("wss://a/r"),
            state: ChannelState::Backoff { attempts: 3 },
        },
    );
    client.give(MonoMs(5_000), FailoverInput::Tick { jitter_ms: 0 });
    client.give(
        MonoMs(5_100),
        FailoverInput::OpenSucceeded {
            url: url("wss://b/r"),
        },
    );
    client.give(
        MonoMs(6_000),
        FailoverInput::Directory {
            urls: list(),
            source: DirectorySource::Cache,
        },
    );
}

fn scripted(script: impl FnOnce(&mut SimulatedClient)) -> Vec<JournalLine> {
    let mut client = SimulatedClient::new("client", 7, generated_thresholds());
    script(&mut client);
    client.take_lines()
}

fn position(lines: &[JournalLine], pred: impl Fn(&FailoverRecord) -> bool) -> usize {
    lines
        .iter()
        .position(|l| matches!(&l.rec, JournalRecord::Failover(r) if pred(r)))
        .expect("the scripted journal holds the line")
}

#[test]
fn conf_1_a_journal_of_the_core_and_a_faithful_driver_conforms() {
    let lines = scripted(switched_then_directory);
    let verdicts = judge(&lines);
    assert_eq!(verdicts.len(), 1);
    assert!(
        matches!(
            verdicts[0].1,
            Verdict::Conforms {
                gaps_searched: 0,
                ..
            }
        ),
        "{verdicts:?}"
    );
}

#[test]
fn conf_1_fo_d1_an_open_of_a_cooling_url_on_the_directory_path_departs_at_that_line() {
    let mut lines = scripted(switched_then_directory);
    // The directory update's refusal, edited into an open of the cooling URL.
    let at = position(
        &lines,
        |r| matches!(r, FailoverRecord::Output(Output::Event(e)) if format!("{e:?}").contains("StillCooling")),
    );
    lines[at].rec = JournalRecord::Failover(FailoverRecord::Output(Output::Action(
        ChannelAction::Open {
            url: url("wss://a/r"),
            timeout_ms: 2_000,
            exempt: false,
            probe: false,
        },
    )));
    let d = departure(&lines).expect("the edited journal departs");
    assert_eq!(d.requirement, "FO-D1", "{d:?}");
    assert_eq!(d.line, at as u64 + 1, "{d:?}");
    assert!(d.allowed.contains("still cooling"), "{d:?}");
}

#[test]
fn conf_1_fo_r5a_a_driver_adopting_an_open_whose_url_left_the_list_departs() {
    let script = |client: &mut SimulatedClient| {
        client.give(
            MonoMs(100),
            FailoverInput::OpenSucceeded {
                url: url("wss://a/r"),
            },
        );
        client.give(
            MonoMs(1_000),
            FailoverInput::ChannelState {
                url: url("wss://a/r"),
                state: ChannelState::Backoff { attempts: 3 },
            },
        );
        client.give(MonoMs(5_000), FailoverInput::Tick { jitter_ms: 0 });
        // b's open is in flight; the list drops b.
        client.give(
            MonoMs(5_050),
            FailoverInput::Directory {
                urls: vec![url("wss://a/r"), url("wss://c/r")],
                source: DirectorySource::Cache,
            },
        );
        client.give(
            MonoMs(5_100),
            FailoverInput::OpenSucceeded {
                url: url("wss://b/r"),
            },
        );
    };
    let faithful = scripted(script);
    assert!(departure(&faithful).is_none(), "{:?}", judge(&faithful));
    // The driver bug: it keeps the channel the core closed (it ignored `false`).
    let mut buggy = faithful.clone();
    let at = position(
        &buggy,
        |r| matches!(r, FailoverRecord::Input(FailoverInput::OpenSucceeded { url }) if url.as_str() == "wss://b/r"),
    ) + 1;
    let mut adopted = buggy[at - 1].clone();
    adopted.rec = JournalRecord::Failover(FailoverRecord::Effect(FailoverEffect::Adopted {
        url: url("wss://b/r"),
    }));
    buggy.insert(at, adopted);
    let d = departure(&buggy).expect("adopting the unlisted open departs");
    assert_eq!(d.requirement, "FO-R5a", "{d:?}");
    assert_eq!(d.line, at as u64 + 1, "{d:?}");
}

#[test]
fn conf_1_fo_d7_a_missing_switch_line_departs_at_its_input() {
    let mut lines = scripted(switched_then_directory);
    let at = position(
        &lines,
        |r| matches!(r, FailoverRecord::Output(Output::Event(e)) if format!("{e:?}").starts_with("Switched")),
    );
    lines.remove(at);
    let d = departure(&lines).expect("a switch without its line departs");
    assert_eq!(d.requirement, "FO-D7", "{d:?}");
}

#[test]
fn conf_1_a_gap_is_filled_by_search_and_the_verdict_says_so() {
    // a recovers (a report the journal then loses), so the tick at 5 s decides nothing.
    let script = |client: &mut SimulatedClient| {
        client.give(
            MonoMs(100),
            FailoverInput::OpenSucceeded {
                url: url("wss://a/r"),
            },
        );
        client.give(
            MonoMs(1_000),
            FailoverInput::ChannelState {
                url: url("wss://a/r"),
                state: ChannelState::Backoff { attempts: 3 },
            },
        );
        client.give(
            MonoMs(4_000),
            FailoverInput::ChannelState {
                url: url("wss://a/r"),
                state: ChannelState::Healthy,
            },
        );
        client.give(MonoMs(5_000), FailoverInput::Tick { jitter_ms: 0 });
    };
    let mut lines = scripted(script);
    let at = position(&lines, |r| {
        matches!(
            r,
            FailoverRecord::Input(FailoverInput::ChannelState {
                state: ChannelState::Healthy,
                ..
            })
        )
    });
    // Without the report and without a gap mark, the tick's silence departs (the spec owed a switch).
    let mut lost = lines.clone();
    lost.remove(at);
    assert!(departure(&lost).is_some(), "{:?}", judge(&lost));
    // With the writer's gap mark, the search finds the report.
    lines[at].rec = JournalRecord::Gap { dropped: 1 };
    let verdicts = judge(&lines);
    assert!(
        matches!(
            verdicts[0].1,
            Verdict::Conforms {
                gaps_searched: 1,
                ..
            }
        ),
        "{verdicts:?}"
    );
}

#[test]
fn conf_1_generated_journals_of_many_clients_conform() {
    for seed in 0..8u64 {
        let mut lines = Vec::new();
        generate(20_000, 16, seed, |l| lines.push(l.clone()));
        let verdicts = judge(&lines);
        assert_eq!(verdicts.len(), 16);
        for (key, v) in &verdicts {
            assert!(
                matches!(v, Verdict::Conforms { .. }),
                "seed {seed}, {key}: {v:?}"
            );
        }
    }
}

#[test]
fn conf_1_a_key_whose_first_line_is_not_a_start_departs() {
    let lines = scripted(switched_then_directory);
    let d = departure(&lines[1..]).expect("no start record");
    assert_eq!(d.requirement, "CONF-1");
    assert_eq!(d.line, 1);
}
