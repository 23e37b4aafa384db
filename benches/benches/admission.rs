//! Admission at the source cell: a ticket taken and released, and `begin_handoff` (the one
//! synchronous check-and-install) with every counter at zero and with one client attached;
//! the pure reference assignment transaction.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;
use switchyard_benches::handoff::{source, store_with_hosts};
use switchyard_core::handoff::admission::WorkKind;
use switchyard_core::MonoMs;

fn admission(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission");
    let (mut open, _) = source(false);
    group.bench_function("ticket_take_release", |b| {
        b.iter(|| {
            let ticket = open
                .acquire(black_box(WorkKind::Accept))
                .expect("open gate");
            open.release(black_box(ticket))
        });
    });
    let (idle, request) = source(false);
    group.bench_function("begin_handoff_idle", |b| {
        b.iter_batched_ref(
            || idle.clone(),
            |s| s.begin_handoff(black_box(MonoMs(2_000)), black_box(&request)),
            BatchSize::SmallInput,
        );
    });
    let (mut busy, request) = source(true);
    group.bench_function("begin_handoff_busy", |b| {
        // Busy holds nothing, so the same machine answers every iteration.
        b.iter(|| busy.begin_handoff(black_box(MonoMs(2_000)), black_box(&request)));
    });
    group.finish();
}

fn transaction(c: &mut Criterion) {
    let mut group = c.benchmark_group("assignment_transaction");
    let (store, requests) = store_with_hosts(1_000);
    group.bench_function("reference_commit_1000_hosts", |b| {
        b.iter_batched_ref(
            || store.clone(),
            |s| s.run_transaction(black_box(MonoMs(2_000)), black_box(&requests[500])),
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

criterion_group!(benches, admission, transaction);
criterion_main!(benches);
