//! CONF-2 / CONF-3: what a journal and its judge cost per line.
//!
//! - `conform/journal_record`: one failover record serialised and written by the bounded
//!   writer (`adapters/src/journal.rs`) to a file (`/dev/null`): the cost `--journal` adds per
//!   line a client journals.
//! - `conform/judge_line/<keys>`: one journal line judged by `Conformance` (the online judge's
//!   cost per line with `--conform`; offline `conform`'s minus reading and parsing), with lines
//!   spread over 1,000 and 10,000 keys (N and 10·N: the judge keeps one state per key).
//! - `conform/parse_and_judge_line`: the same from the line's text (what `conform FILE` does).
//! - `conform/tick_no_switch`: for scale, the core's tick that decides nothing (a quiet client
//!   journals one line per tick: the input).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use switchyard_adapters::journal::{Journal, JournalConfig, MAX_LINES_PER_SECOND};
use switchyard_benches::{tick_and_drain, tick_fixture};
use switchyard_core::failover::{FailoverInput, FailoverRecord};
use switchyard_core::journal::{JournalLine, JournalRecord};
use switchyard_core::MonoMs;
use switchyard_spec::conform::generate::generate;
use switchyard_spec::conform::Conformance;

fn lines(n: u64, keys: u32) -> Vec<JournalLine> {
    let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    generate(n, keys, 1, |l| out.push(l.clone()));
    out
}

fn conform(c: &mut Criterion) {
    let mut group = c.benchmark_group("conform");
    group.throughput(Throughput::Elements(1));

    let journal = Journal::open(
        &JournalConfig {
            path: Some("/dev/null".into()),
            to_log: false,
            max_lines_per_second: MAX_LINES_PER_SECOND,
        },
        Vec::new(),
    )
    .expect("/dev/null opens");
    group.bench_function("journal_record", |b| {
        let mut at = 0u64;
        b.iter(|| {
            at += 1;
            journal.record(black_box("client"), MonoMs(at), || {
                JournalRecord::Failover(FailoverRecord::Input(FailoverInput::Tick { jitter_ms: 0 }))
            });
        });
    });

    for keys in [1_000u32, 10_000] {
        // Enough lines that every key is past its start; judged in a cycle, each pass a
        // fresh judge (a pass's first lines start each key's judge: part of the cost).
        let all = lines(u64::from(keys) * 40, keys);
        group.bench_with_input(BenchmarkId::new("judge_line", keys), &all, |b, all| {
            let mut conformance = Conformance::new();
            let mut i = 0usize;
            b.iter(|| {
                if i == all.len() {
                    i = 0;
                    conformance = Conformance::new();
                }
                let r = conformance.feed(i as u64 + 1, black_box(&all[i]));
                i += 1;
                black_box(r.is_ok())
            });
        });
    }

    let texts: Vec<String> = lines(40_000, 1_000)
        .iter()
        .map(|l| serde_json::to_string(l).expect("serialises"))
        .collect();
    group.bench_function("parse_and_judge_line", |b| {
        let mut conformance = Conformance::new();
        let mut i = 0usize;
        b.iter(|| {
            if i == texts.len() {
                i = 0;
                conformance = Conformance::new();
            }
            let r = conformance.feed_text(i as u64 + 1, black_box(&texts[i]));
            i += 1;
            black_box(r.is_ok())
        });
    });

    let fixture = tick_fixture(3);
    group.bench_function("tick_no_switch", |b| {
        let mut sup = fixture.healthy.clone();
        b.iter(|| tick_and_drain(black_box(&mut sup), black_box(fixture.now)));
    });
    group.finish();
}

criterion_group!(benches, conform);
criterion_main!(benches);
