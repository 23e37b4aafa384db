//! The failover tick hot path at 3, 16, 256 and 4096 candidates with about half of them
//! cooling: nothing to do (healthy), a clean switch (the clean candidate last), the one-hop
//! exemption (everything cooling).

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use std::hint::black_box;
use switchyard_benches::{tick_and_drain, tick_fixture};

fn tick(c: &mut Criterion) {
    let mut group = c.benchmark_group("failover_tick");
    for n in [3usize, 16, 256, 4096] {
        let fixture = tick_fixture(n);
        group.bench_with_input(BenchmarkId::new("no_switch", n), &fixture, |b, f| {
            let mut sup = f.healthy.clone();
            b.iter(|| tick_and_drain(black_box(&mut sup), black_box(f.now)));
        });
        group.bench_with_input(BenchmarkId::new("clean_switch", n), &fixture, |b, f| {
            b.iter_batched_ref(
                || f.clean_switch.clone(),
                |sup| tick_and_drain(black_box(sup), black_box(f.now)),
                BatchSize::LargeInput,
            );
        });
        group.bench_with_input(BenchmarkId::new("exemption", n), &fixture, |b, f| {
            b.iter_batched_ref(
                || f.exemption.clone(),
                |sup| tick_and_drain(black_box(sup), black_box(f.now)),
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, tick);
criterion_main!(benches);
