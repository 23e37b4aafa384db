//! Checker throughput: unique states per second, the failover model at one cooldown cycle
//! (the review bound is two; `switchyard-check` prints its own rate for that run).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stateright::{Checker, Model};
use switchyard_spec::failover::{FailoverModel, FailoverParams};

fn checker(c: &mut Criterion) {
    let params = FailoverParams {
        cycles: 1,
        ..FailoverParams::default()
    };
    let unique = FailoverModel::new(params.clone())
        .checker()
        .spawn_bfs()
        .join()
        .unique_state_count();
    let mut group = c.benchmark_group("checker");
    group.sample_size(10);
    group.throughput(Throughput::Elements(unique as u64));
    for threads in [1usize, 2] {
        group.bench_function(format!("failover_bfs_1_cycle_{threads}_threads"), |b| {
            b.iter(|| {
                let checker = FailoverModel::new(params.clone())
                    .checker()
                    .threads(threads)
                    .spawn_bfs()
                    .join();
                assert_eq!(checker.unique_state_count(), unique);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, checker);
criterion_main!(benches);
