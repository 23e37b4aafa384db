//! HO-S4: the escrowed limits (`switchyard_core::handoff::escrow`) against an oracle written
//! from the requirement: "global rate/concurrency limits, capacity reservation" — a commit is
//! allowed exactly when the target has fewer hosts than its capacity, fewer migrations are in
//! flight than the limit, fewer commits were made in the current rate window than the limit,
//! and the attempt table has room. The oracle keeps those four counts directly; the protocol
//! under test keeps only shard rows and decides with the core's escrow functions the way the
//! SQL store does (one shard's tokens, else every shard summed). Sequential: the SQL locks make
//! concurrent transactions behave as some sequence of these steps (one shard's lock for the
//! token path, all shards in order for the exact path).

use proptest::prelude::*;
use switchyard_core::handoff::escrow::{
    exact_limits, fast_commit, load_split, rebalance, spend_commit, window_current, ShardRow,
};
use switchyard_core::handoff::store::{LimitFacts, RateRow, StoreConfig};
use switchyard_core::handoff::PolicyConfig;
use switchyard_core::MonoMs;

const CELLS: usize = 2;

#[derive(Debug, Clone)]
enum Op {
    /// A commit to `target` (from the other cell) on shard `shard`.
    Commit {
        shard: usize,
        target: usize,
    },
    /// The oldest live reservation is released (registration or expiry).
    Release,
    InsertHost {
        cell: usize,
    },
    Capacity {
        cell: usize,
        capacity: u32,
    },
    Settings {
        max_in_flight: u32,
        max_commits: u32,
    },
    Advance {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..4, 0usize..CELLS).prop_map(|(shard, target)| Op::Commit { shard, target }),
        2 => Just(Op::Release),
        1 => (0usize..CELLS).prop_map(|cell| Op::InsertHost { cell }),
        1 => (0usize..CELLS, 0u32..8).prop_map(|(cell, capacity)| Op::Capacity { cell, capacity }),
        1 => (0u32..6, 0u32..6)
            .prop_map(|(max_in_flight, max_commits)| Op::Settings { max_in_flight, max_commits }),
        2 => (0u64..150).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// The requirement's counts, kept directly.
#[derive(Debug, Clone, Default)]
struct Oracle {
    hosts: [u32; CELLS],
    /// Live reservations, oldest first, with the shard that counted each.
    reservations: Vec<usize>,
    rate: RateRow,
    attempts: u64,
}

struct Escrow {
    shards: Vec<ShardRow>,
    /// Per cell, per shard: (hosts counted on the shard, host tokens).
    loads: [Vec<(i64, u64)>; CELLS],
}

fn sum_hosts(loads: &[(i64, u64)]) -> i64 {
    loads.iter().map(|l| l.0).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ho_s4_escrowed_limits_decide_as_the_exact_limits(
        n_shards in 1usize..5,
        initial_capacity in 0u32..6,
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let mut config = StoreConfig {
            enabled: true,
            policy: PolicyConfig { freshness_window_ms: 1_000, host_cooldown_ms: 0 },
            max_in_flight_migrations: 3,
            rate_window_ms: 100,
            max_commits_per_window: 4,
            registration_timeout_ms: 1_000,
            bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
        };
        let shards = u32::try_from(n_shards).unwrap();
        let mut capacity = [initial_capacity; CELLS];
        let mut now = MonoMs(0);
        let mut oracle = Oracle { hosts: [4, 0], ..Oracle::default() };
        let mut escrow = Escrow {
            shards: vec![ShardRow::default(); n_shards],
            loads: [vec![(0, 0); n_shards], vec![(0, 0); n_shards]],
        };
        escrow.loads[0][0].0 = 4;
        for op in ops {
            match op {
                Op::Commit { shard, target } => {
                    let shard = shard % n_shards;
                    let source = 1 - target;
                    if oracle.hosts[source] == 0 {
                        continue; // no host to move
                    }
                    let rate = oracle.rate.effective(now, config.rate_window_ms);
                    let allowed = oracle.hosts[target] < capacity[target]
                        && (oracle.reservations.len() as u64)
                            < u64::from(config.max_in_flight_migrations)
                        && rate.commits < config.max_commits_per_window
                        && oracle.attempts < switchyard_core::handoff::store::DEFAULT_MAX_ATTEMPT_ROWS;
                    let s = escrow.shards[shard];
                    let fast = fast_commit(now, &config, &s, escrow.loads[target][shard].1);
                    let committed = if fast {
                        prop_assert!(allowed, "a token stood for room that is not there");
                        escrow.shards[shard] = spend_commit(&s);
                        escrow.loads[target][shard].0 += 1;
                        escrow.loads[target][shard].1 -= 1;
                        escrow.loads[source][shard].0 -= 1;
                        true
                    } else {
                        // The exact path: the counts summed from every shard are the oracle's.
                        let facts = exact_limits(&escrow.shards, sum_hosts(&escrow.loads[target]));
                        prop_assert_eq!(facts.target_load, oracle.hosts[target]);
                        prop_assert_eq!(facts.in_flight, oracle.reservations.len() as u64);
                        prop_assert_eq!(facts.rate, oracle.rate);
                        prop_assert_eq!(facts.attempt_rows, oracle.attempts);
                        if allowed {
                            let after = LimitFacts {
                                target_load: facts.target_load + 1,
                                in_flight: facts.in_flight + 1,
                                rate: RateRow { commits: rate.commits + 1, ..rate },
                                attempt_rows: facts.attempt_rows + 1,
                            };
                            let r = rebalance(&config, &after, shards);
                            for (j, row) in escrow.shards.iter_mut().enumerate() {
                                *row = r.row(u32::try_from(j).unwrap(), row);
                            }
                            let split = load_split(capacity[target], after.target_load, shards);
                            let total = i64::from(after.target_load);
                            for (j, l) in escrow.loads[target].iter_mut().enumerate() {
                                *l = (if j == 0 { total } else { 0 }, split.share(u32::try_from(j).unwrap()));
                            }
                            escrow.loads[source][0].0 -= 1;
                        }
                        allowed
                    };
                    if committed {
                        oracle.hosts[target] += 1;
                        oracle.hosts[source] -= 1;
                        // The exact path counted the reservation on shard 0.
                        oracle.reservations.push(if fast { shard } else { 0 });
                        oracle.rate = RateRow { commits: rate.commits + 1, ..rate };
                        oracle.attempts += 1;
                    }
                }
                Op::Release => {
                    if !oracle.reservations.is_empty() {
                        let shard = oracle.reservations.remove(0);
                        escrow.shards[shard].in_flight -= 1;
                    }
                }
                Op::InsertHost { cell } => {
                    oracle.hosts[cell] += 1;
                    escrow.loads[cell][0].0 += 1;
                    for l in &mut escrow.loads[cell] {
                        l.1 = 0;
                    }
                }
                Op::Capacity { cell, capacity: c } => {
                    capacity[cell] = c;
                    for l in &mut escrow.loads[cell] {
                        l.1 = 0;
                    }
                }
                Op::Settings { max_in_flight, max_commits } => {
                    config.max_in_flight_migrations = max_in_flight;
                    config.max_commits_per_window = max_commits;
                    for s in &mut escrow.shards {
                        s.commit_tokens = 0;
                        s.in_flight_tokens = 0;
                    }
                }
                Op::Advance { ms } => now = now.plus_ms(ms),
            }
            // The escrow invariant, per limit: the tokens never exceed the room left.
            let tokens = |f: fn(&ShardRow) -> u64| escrow.shards.iter().map(f).sum::<u64>();
            let room = |limit: u64, count: u64| limit.saturating_sub(count);
            prop_assert!(tokens(|s| s.in_flight_tokens)
                <= room(u64::from(config.max_in_flight_migrations), oracle.reservations.len() as u64));
            prop_assert!(tokens(|s| s.attempt_tokens) <= room(switchyard_core::handoff::store::DEFAULT_MAX_ATTEMPT_ROWS, oracle.attempts));
            if window_current(now, oracle.rate.window_start, &config) {
                prop_assert!(tokens(|s| s.commit_tokens)
                    <= room(u64::from(config.max_commits_per_window), u64::from(oracle.rate.commits)));
            }
            for ((loads, hosts), cap) in escrow.loads.iter().zip(oracle.hosts).zip(capacity) {
                prop_assert_eq!(sum_hosts(loads), i64::from(hosts));
                let host_tokens: u64 = loads.iter().map(|l| l.1).sum();
                prop_assert!(host_tokens <= room(u64::from(cap), u64::from(hosts)));
            }
        }
    }
}
