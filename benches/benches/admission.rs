//! Admission at the source cell: a ticket taken and released, and `handle_request` (the one
//! synchronous check-and-install) with every counter at zero and with one client attached;
//! the pure reference assignment transaction.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;
use switchyard_benches::handoff::{source, store_with_hosts};
use switchyard_core::handoff::WorkKind;
use switchyard_core::peer_limits::{PeerRateGate, RateBounds};
use switchyard_core::MonoMs;

fn admission(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission");
    let (mut open, _) = source(false);
    group.bench_function("ticket_take_release", |b| {
        b.iter(|| {
            let ticket = open
                .handle_acquire(black_box(WorkKind::Accept))
                .expect("open gate");
            open.handle_release(black_box(ticket))
        });
    });
    let (idle, request) = source(false);
    group.bench_function("begin_handoff_idle", |b| {
        b.iter_batched_ref(
            || idle.clone(),
            |s| s.handle_request(black_box(MonoMs(2_000)), black_box(&request)),
            BatchSize::SmallInput,
        );
    });
    let (mut busy, request) = source(true);
    group.bench_function("begin_handoff_busy", |b| {
        // Busy holds nothing, so the same machine answers every iteration.
        b.iter(|| busy.handle_request(black_box(MonoMs(2_000)), black_box(&request)));
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

/// SEC-3 (issue #27): one resolve request through the per-peer rate gate with N and 10·N peers
/// tracked (6,553 and the default bound 65,536): the cost must grow with log N at most.
fn resolve_rate(c: &mut Criterion) {
    let mut group = c.benchmark_group("resolve_rate_gate");
    for peers in [6_553_u32, 65_536] {
        let mut gate = PeerRateGate::new(RateBounds {
            per_second: 50,
            burst: 200,
            max_peers: 65_536,
        });
        for p in 0..peers {
            assert!(gate.check(p, 0).outcome.is_ok());
        }
        // The clock advances 1 ms a request and wraps below the 4 s refill time: buckets refill
        // and move in the idle order (the work of a real request), yet no peer is ever idle long
        // enough to be forgotten, so the table stays at `peers` for the whole run.
        let mut now_ms = 0_u64;
        let mut next = 0_u32;
        group.bench_function(format!("check_tracked_peer_{peers}_peers"), |b| {
            b.iter(|| {
                now_ms = (now_ms + 1) % 3_000;
                next = (next + 7_919) % peers;
                black_box(gate.check(black_box(next), now_ms))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, admission, transaction, resolve_rate);
criterion_main!(benches);
