//! CONF-1: failover journals judged by the spec. A journal the core and a faithful driver wrote
//! conforms; the same journal with one event edited departs at that line with the requirement
//! the edit breaks; a gap is filled by search.

use switchyard_core::failover::{
    ChannelAction, ChannelState, DirectorySource, FailoverEffect, FailoverInput, FailoverRecord,
    Output, RelayUrl,
};
use switchyard_core::journal::{JournalLine, JournalRecord};
use switchyard_core::MonoMs;
use switchyard_spec::conform::generate::{
    edit_refusal_into_open, generate, generated_thresholds, switched_then_directory,
    SimulatedClient,
};
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
    let at = edit_refusal_into_open(&mut lines);
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

mod sec_4 {
    //! SEC-4: a journal is external input: no line, however odd, panics the judge.
    use super::*;
    use proptest::prelude::*;
    use switchyard_core::failover::{Event, OpenFailure, Origin, Skip, SwitchReason, Thresholds};

    fn any_url() -> impl Strategy<Value = RelayUrl> {
        prop_oneof![Just("wss://a/r"), Just("wss://b/r"), Just("wss://z/r")].prop_map(RelayUrl::new)
    }

    fn any_thresholds() -> impl Strategy<Value = Thresholds> {
        (
            prop_oneof![Just(0u64), Just(1), Just(20_000), Just(u64::MAX)],
            prop_oneof![Just(0u64), Just(3_000), Just(u64::MAX)],
            0u32..4,
            prop_oneof![Just(0u64), Just(1_000), Just(u64::MAX)],
            any::<bool>(),
            prop_oneof![Just(0u64), Just(4_000), Just(u64::MAX)],
            prop_oneof![Just(0u64), Just(16_000), Just(u64::MAX)],
        )
            .prop_map(
                |(
                    cooldown_ms,
                    grace_ms,
                    min_attempts,
                    check_ms,
                    exempt,
                    probe_min_ms,
                    probe_max_ms,
                )| Thresholds {
                    cooldown_ms,
                    deadline_ms: 30_000,
                    grace_ms,
                    min_attempts,
                    check_ms,
                    up_timeout_ms: check_ms,
                    exempt,
                    probe_min_ms,
                    probe_max_ms,
                    ..Thresholds::default()
                },
            )
    }

    fn any_record() -> impl Strategy<Value = FailoverRecord> {
        prop_oneof![
            any_thresholds().prop_map(|thresholds| FailoverRecord::Start { thresholds }),
            any::<u64>()
                .prop_map(|jitter_ms| FailoverRecord::Input(FailoverInput::Tick { jitter_ms })),
            proptest::collection::vec(any_url(), 0..4).prop_map(|urls| FailoverRecord::Input(
                FailoverInput::Directory {
                    urls,
                    source: DirectorySource::Cache
                }
            )),
            (any_url(), 0u32..5).prop_map(|(url, attempts)| FailoverRecord::Input(
                FailoverInput::ChannelState {
                    url,
                    state: ChannelState::Backoff { attempts }
                }
            )),
            any_url().prop_map(|url| FailoverRecord::Input(FailoverInput::OpenSucceeded { url })),
            any_url().prop_map(|url| FailoverRecord::Input(FailoverInput::OpenFailed {
                url,
                failure: OpenFailure::TimedOut
            })),
            (any_url(), any::<bool>(), any::<bool>()).prop_map(|(url, exempt, probe)| {
                FailoverRecord::Output(Output::Action(ChannelAction::Open {
                    url,
                    timeout_ms: 1,
                    exempt,
                    probe,
                }))
            }),
            any_url().prop_map(|url| FailoverRecord::Output(Output::Event(Event::Skipped(
                Skip::StillCooling {
                    url,
                    origin: Origin::Directory,
                    left_ms: 1,
                    of_ms: 2
                }
            )))),
            any_url().prop_map(|url| FailoverRecord::Output(Output::Event(Event::Attached {
                url,
                origin: Origin::Health
            }))),
            (any_url(), any_url()).prop_map(|(from, to)| FailoverRecord::Output(Output::Event(
                Event::Switched(switchyard_core::failover::SwitchRecord {
                    seq: 1,
                    from,
                    to,
                    origin: Origin::Health,
                    reason: SwitchReason::DirectoryChanged {
                        source: DirectorySource::Cache
                    },
                    cooldown_ms: 1,
                    exemption: None,
                    probe: false,
                    open_took_ms: 0,
                })
            ))),
            any_url().prop_map(|url| FailoverRecord::Effect(FailoverEffect::Adopted { url })),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn sec_4_conf_1_no_journal_panics_the_judge(
            thresholds in any_thresholds(),
            records in proptest::collection::vec((any_record(), 0u64..100_000, any::<bool>()), 1..60),
            text in "\\PC{0,200}",
        ) {
            let mut c = Conformance::new();
            let _ = c.feed_text(1, &text);
            // A start first, so the judge runs past the first line (one departure per key ends it).
            let start = JournalLine {
                key: "k".to_owned(),
                seq: 0,
                at_ms: 0,
                rec: JournalRecord::Failover(FailoverRecord::Start { thresholds }),
            };
            let _ = c.feed(1, &start);
            for (i, (record, at_ms, gap)) in records.into_iter().enumerate() {
                let rec = if gap && i % 7 == 3 {
                    JournalRecord::Gap { dropped: 2 }
                } else {
                    JournalRecord::Failover(record)
                };
                let line = JournalLine { key: "k".to_owned(), seq: i as u64, at_ms, rec };
                let _ = c.feed(i as u64 + 2, &line);
            }
            let _ = c.finish();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn sec_4_conf_1_an_edited_or_gapped_real_journal_never_panics_the_judge(
            seed in any::<u64>(),
            thresholds in any_thresholds(),
            edits in proptest::collection::vec((0usize..400, any_record(), any::<bool>()), 0..4),
            extreme in any::<bool>(),
        ) {
            let mut lines = Vec::new();
            generate(400, 2, seed, |l| lines.push(l.clone()));
            if extreme {
                for l in &mut lines {
                    if let JournalRecord::Failover(FailoverRecord::Start { thresholds: t }) = &mut l.rec {
                        *t = thresholds;
                    }
                }
            }
            for (at, record, gap) in edits {
                let at = at % lines.len();
                lines[at].rec = if gap {
                    JournalRecord::Gap { dropped: 3 }
                } else {
                    JournalRecord::Failover(record)
                };
            }
            let mut c = Conformance::new();
            for (i, line) in lines.iter().enumerate() {
                let _ = c.feed(i as u64 + 1, line);
            }
            let _ = c.finish();
        }
    }
}
