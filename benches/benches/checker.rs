//! Checker throughput: unique states per second, the failover model at its small bound
//! (`FailoverParams::small`, the corpus bound; `switchyard-check` prints its own rate for the
//! review bound).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stateright::{Checker, Model};
use switchyard_spec::failover::{FailoverModel, FailoverParams};

fn checker(c: &mut Criterion) {
    let params = FailoverParams::small();
    let unique = FailoverModel::new(params.clone())
        .checker()
        .spawn_bfs()
        .join()
        .unique_state_count();
    let mut group = c.benchmark_group("checker");
    group.sample_size(10);
    group.throughput(Throughput::Elements(unique as u64));
    for threads in [1usize, 2] {
        group.bench_function(format!("failover_bfs_small_bound_{threads}_threads"), |b| {
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
