//! HO-S4 at scale: the global limits held in escrow across limit shards.
//!
//! A SQL store that serialises every commit on one global row cannot overlap the durable
//! flushes of two commits (a row lock is released only after the commit's WAL flush). Instead
//! the store keeps `n` limit shards. Each shard row holds its part of every global count (the
//! commits of the rate window, the live reservations, the attempt rows; and per cell, the hosts)
//! and **tokens**: room under a global limit that this shard may spend without looking at any
//! other shard. The invariant, per limit:
//!
//! > the tokens of all shards together never exceed the room left under the limit
//! > (`Σ tokens ≤ limit − Σ count`, the room taken as 0 when the count has reached the limit).
//!
//! So a commit that finds a token of every limit on the one shard it locked stays under every
//! global limit, whatever the other shards do at the same time ([`fast_commit`]). Only
//! [`rebalance`] creates tokens, and only from exact totals read with every shard locked. Events
//! that lower the room without a commit (a host inserted, a capacity or a setting changed)
//! revoke the tokens they could invalidate (set them to 0); events that raise it (a reservation
//! released, a host moved away) leave the tokens alone, so the room they free is handed out by
//! the next rebalance.
//!
//! A commit without a token takes the exact path: every shard locked in shard order, the exact
//! [`LimitFacts`] summed from the shards ([`exact_limits`]), [`super::store::decide_commit`] as
//! in the reference store, then the tokens dealt out again from the totals after the commit.
//! The answer therefore equals the reference store's for every request: a token only ever
//! stands for room that exists, and without one the exact check decides. Nothing here reads
//! a clock or a row; the SQL store applies what these functions return.

use serde::{Deserialize, Serialize};

use super::store::{CommitWrites, LimitFacts, RateRow, StoreConfig};
use crate::MonoMs;

/// Upper bound of limit shards a store may be created with (the shard count is fixed by the
/// schema; more shards than concurrent writers buys nothing).
pub const MAX_LIMIT_SHARDS: u32 = 256;

/// One limit shard's row. The counts are this shard's contributions to the global counts: a
/// release is counted on the shard that counted its reservation, and a rebalance gathers every
/// count onto shard 0, so one shard's count may be negative; only the sum means anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ShardRow {
    /// The start of the global rate window (the same on every shard: only a rebalance, which
    /// writes every shard, moves it).
    pub window_start: MonoMs,
    pub commits: i64,
    pub in_flight: i64,
    pub attempt_rows: i64,
    pub commit_tokens: u64,
    pub in_flight_tokens: u64,
    pub attempt_tokens: u64,
    /// SCALE-1 / SCALE-2: the hosts this shard counted (enrolments only add; the sum is the
    /// store's host count) and the room under `max_hosts` it may spend alone. Untouched by
    /// [`rebalance`]: only an enrolment's exact path ([`enrol_exact`]) deals host tokens.
    pub hosts: i64,
    pub host_tokens: u64,
}

/// The shard's window is the global window as of `now` (neither ended nor in the future).
#[must_use]
pub fn window_current(now: MonoMs, window_start: MonoMs, config: &StoreConfig) -> bool {
    now >= window_start && now.since_ms(window_start) < config.rate_window_ms
}

/// HO-S4, fast path: the locked shard holds a token of every global limit a commit counts
/// against, in the current window. The target cell's hosts are checked separately
/// ([`fast_commit`]): a store reads the target's tokens only after it holds the shard.
#[must_use]
pub fn shard_covers_commit(now: MonoMs, config: &StoreConfig, shard: &ShardRow) -> bool {
    window_current(now, shard.window_start, config)
        && shard.commit_tokens > 0
        && shard.in_flight_tokens > 0
        && shard.attempt_tokens > 0
}

/// HO-S4, fast path: a commit may spend one token of each limit on this shard (the shard's and
/// the target cell's tokens on this shard, as read under the shard's lock). `false`: take the
/// exact path. The caller has run `commit_precheck` and found no pending migration of the host.
#[must_use]
pub fn fast_commit(
    now: MonoMs,
    config: &StoreConfig,
    shard: &ShardRow,
    target_tokens: u64,
) -> bool {
    shard_covers_commit(now, config, shard) && target_tokens > 0
}

/// The shard row after a fast commit: each count one more, each token one less.
#[must_use]
pub fn spend_commit(shard: &ShardRow) -> ShardRow {
    crate::invariant!(
        shard.commit_tokens > 0 && shard.in_flight_tokens > 0 && shard.attempt_tokens > 0
    );
    ShardRow {
        commits: shard.commits.saturating_add(1),
        in_flight: shard.in_flight.saturating_add(1),
        attempt_rows: shard.attempt_rows.saturating_add(1),
        commit_tokens: shard.commit_tokens.saturating_sub(1),
        in_flight_tokens: shard.in_flight_tokens.saturating_sub(1),
        attempt_tokens: shard.attempt_tokens.saturating_sub(1),
        ..*shard
    }
}

fn clamp_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// HO-S4, exact path: the global [`LimitFacts`] from every shard (all locked) and the sum of
/// the target cell's per-shard host counts.
#[must_use]
pub fn exact_limits(shards: &[ShardRow], target_hosts: i64) -> LimitFacts {
    crate::invariant!(!shards.is_empty(), "a store has at least one limit shard");
    crate::invariant!(
        shards
            .windows(2)
            .all(|w| w[0].window_start == w[1].window_start),
        "every shard carries the one global window"
    );
    let sum = |f: fn(&ShardRow) -> i64| shards.iter().map(f).fold(0i64, i64::saturating_add);
    let commits = sum(|s| s.commits);
    crate::invariant!(
        commits >= 0 && target_hosts >= 0,
        "a global count is never negative"
    );
    LimitFacts {
        target_load: u32::try_from(clamp_u64(target_hosts)).unwrap_or(u32::MAX),
        in_flight: clamp_u64(sum(|s| s.in_flight)),
        rate: RateRow {
            window_start: shards.first().map_or(MonoMs::ZERO, |s| s.window_start),
            commits: u32::try_from(clamp_u64(commits)).unwrap_or(u32::MAX),
        },
        attempt_rows: clamp_u64(sum(|s| s.attempt_rows)),
    }
}

/// `free` tokens dealt out evenly over the shards: shard `j` gets `base`, plus one if
/// `j < extra_below`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Split {
    pub base: u64,
    pub extra_below: u32,
}

impl Split {
    #[must_use]
    pub fn even(free: u64, shards: u32) -> Split {
        let n = u64::from(shards.max(1));
        Split {
            base: free / n,
            extra_below: u32::try_from(free % n).unwrap_or(0),
        }
    }

    /// Shard `shard`'s tokens.
    #[must_use]
    pub fn share(self, shard: u32) -> u64 {
        self.base + u64::from(shard < self.extra_below)
    }
}

/// What the exact path writes to every shard: the totals gathered onto shard 0 (the other
/// shards' counts become 0) and every limit's tokens dealt out again from the room left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rebalance {
    pub window_start: MonoMs,
    pub commits: i64,
    pub in_flight: i64,
    pub attempt_rows: i64,
    pub commit_tokens: Split,
    pub in_flight_tokens: Split,
    pub attempt_tokens: Split,
}

impl Rebalance {
    /// Shard `shard`'s row after the rebalance (`before`: its row as locked; the enrolment's
    /// host count and tokens are not the commit's to deal and stay as they were).
    #[must_use]
    pub fn row(&self, shard: u32, before: &ShardRow) -> ShardRow {
        let gathered = |total: i64| if shard == 0 { total } else { 0 };
        ShardRow {
            window_start: self.window_start,
            commits: gathered(self.commits),
            in_flight: gathered(self.in_flight),
            attempt_rows: gathered(self.attempt_rows),
            commit_tokens: self.commit_tokens.share(shard),
            in_flight_tokens: self.in_flight_tokens.share(shard),
            attempt_tokens: self.attempt_tokens.share(shard),
            hosts: before.hosts,
            host_tokens: before.host_tokens,
        }
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// HO-S4, exact path: the shards' rows from the global totals as they are after the exact
/// path's own write (`after`: a commit counted, or a fence's attempt row). The tokens of each
/// limit add up to exactly the room left under it.
#[must_use]
pub fn rebalance(config: &StoreConfig, after: &LimitFacts, shards: u32) -> Rebalance {
    let room = |limit: u64, count: u64| limit.saturating_sub(count);
    let r = Rebalance {
        window_start: after.rate.window_start,
        commits: i64::from(after.rate.commits),
        in_flight: to_i64(after.in_flight),
        attempt_rows: to_i64(after.attempt_rows),
        commit_tokens: Split::even(
            room(
                u64::from(config.max_commits_per_window),
                u64::from(after.rate.commits),
            ),
            shards,
        ),
        in_flight_tokens: Split::even(
            room(u64::from(config.max_in_flight_migrations), after.in_flight),
            shards,
        ),
        attempt_tokens: Split::even(
            room(config.bounds.max_attempt_rows, after.attempt_rows),
            shards,
        ),
    };
    crate::invariant_eq!(
        (0..shards.max(1))
            .map(|j| r.in_flight_tokens.share(j))
            .sum::<u64>(),
        room(u64::from(config.max_in_flight_migrations), after.in_flight),
        "the tokens add up to the room left"
    );
    r
}

/// HO-S4, exact path: the global totals after a commit decided on `before` wrote `writes` (the
/// host moved onto the target, one more reservation and attempt row, the rate window counted).
#[must_use]
pub fn after_commit(before: &LimitFacts, writes: &CommitWrites) -> LimitFacts {
    LimitFacts {
        target_load: before.target_load.saturating_add(1),
        in_flight: before.in_flight.saturating_add(1),
        rate: writes.rate,
        attempt_rows: before.attempt_rows.saturating_add(1),
    }
}

/// HO-S4, exact path: the global totals after a locked reconciliation wrote its fence record.
#[must_use]
pub fn after_fence(before: &LimitFacts) -> LimitFacts {
    LimitFacts {
        attempt_rows: before.attempt_rows.saturating_add(1),
        ..*before
    }
}

/// HO-L4: one shard's row after a reap removed `removed` attempt rows: its count lowered by
/// them (it may go negative: only the sum over the shards counts), its tokens untouched (a
/// removal raises the room under `max_attempt_rows`, which the next rebalance deals out).
#[must_use]
pub fn after_reap(shard: &ShardRow, removed: u32) -> ShardRow {
    ShardRow {
        attempt_rows: shard.attempt_rows.saturating_sub(i64::from(removed)),
        ..*shard
    }
}

/// HO-S4, exact path: the target cell's host tokens per shard after the exact path moved
/// `hosts_after` hosts onto it (its capacity as read under the host lock).
#[must_use]
pub fn load_split(capacity: u32, hosts_after: u32, shards: u32) -> Split {
    Split::even(u64::from(capacity.saturating_sub(hosts_after)), shards)
}

/// SCALE-2: how an enrolment counts its host, decided under the one limit shard it locked.
///
/// The host count is escrowed like the commit limits: a shard holding a host token may count
/// one more host alone (the tokens of all shards never exceed the room left under
/// `max_hosts`). The enrolled host also raises its cell's load, so the cell's host tokens
/// (room under its capacity, dealt by a commit's exact path) must shrink by one: the locked
/// shard's own token is spent if it has one; if the cell holds none on any shard, none is
/// owed. A token on another shard only ever decreases while this shard is held (tokens are
/// dealt only with every shard locked), so the read of the others is safe without their locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EnrolPath {
    /// Count the host on the locked shard; spend one of its host tokens and, if
    /// `spend_cell_token`, one of the cell's tokens on this shard.
    Token { spend_cell_token: bool },
    /// Back to the savepoint; every shard locked, the exact count decides ([`enrol_exact`]).
    Exact,
}

/// SCALE-2: the path of an enrolment under the locked `shard`, given the cell's host tokens on
/// that shard (`own_cell_tokens`) and on every other shard (`other_cell_tokens`, their sum).
#[must_use]
pub fn enrol_path(shard: &ShardRow, own_cell_tokens: i64, other_cell_tokens: i64) -> EnrolPath {
    if shard.host_tokens == 0 {
        return EnrolPath::Exact;
    }
    if own_cell_tokens > 0 {
        EnrolPath::Token {
            spend_cell_token: true,
        }
    } else if other_cell_tokens <= 0 {
        EnrolPath::Token {
            spend_cell_token: false,
        }
    } else {
        EnrolPath::Exact
    }
}

/// SCALE-1 / SCALE-2: the exact path of an enrolment (every shard locked): whether the store
/// has room for the host (`hosts`: the sum of every shard's count), and the host tokens dealt
/// out again from the room left after it (`None`: no room, nothing written). The cell's host
/// tokens are revoked on this path (set to 0 on every shard).
#[must_use]
pub fn enrol_exact(config: &StoreConfig, hosts: i64, shards: u32) -> Option<Split> {
    let hosts = clamp_u64(hosts);
    if hosts >= config.bounds.max_hosts {
        return None;
    }
    Some(Split::even(
        config.bounds.max_hosts.saturating_sub(hosts + 1),
        shards,
    ))
}

/// The shard row after a token enrolment: one more host, one host token less.
#[must_use]
pub fn spend_enrolment(shard: &ShardRow) -> ShardRow {
    crate::invariant!(shard.host_tokens > 0, "the token path holds a host token");
    ShardRow {
        hosts: shard.hosts.saturating_add(1),
        host_tokens: shard.host_tokens.saturating_sub(1),
        ..*shard
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::policy::PolicyConfig;

    fn config(max_in_flight: u32, max_commits: u32, window_ms: u64) -> StoreConfig {
        StoreConfig {
            enabled: true,
            policy: PolicyConfig {
                freshness_window_ms: 1_000,
                host_cooldown_ms: 0,
            },
            max_in_flight_migrations: max_in_flight,
            rate_window_ms: window_ms,
            max_commits_per_window: max_commits,
            registration_timeout_ms: 1_000,
            bounds: crate::handoff::store::StoreBounds::FLEET,
        }
    }

    #[test]
    fn ho_s4_split_deals_out_exactly_the_room() {
        for shards in [1, 2, 3, 16] {
            for free in [0, 1, 2, 15, 16, 17, 1_000_001] {
                let s = Split::even(free, shards);
                let dealt: u64 = (0..shards).map(|j| s.share(j)).sum();
                assert_eq!(dealt, free, "free {free} over {shards} shards");
                let max = (0..shards).map(|j| s.share(j)).max().unwrap_or(0);
                let min = (0..shards).map(|j| s.share(j)).min().unwrap_or(0);
                assert!(max - min <= 1, "even: {min}..{max}");
            }
        }
    }

    #[test]
    fn ho_s4_a_shard_outside_the_window_never_covers_a_commit() {
        let c = config(10, 10, 100);
        let shard = ShardRow {
            window_start: MonoMs(1_000),
            commit_tokens: 5,
            in_flight_tokens: 5,
            attempt_tokens: 5,
            ..ShardRow::default()
        };
        assert!(shard_covers_commit(MonoMs(1_000), &c, &shard));
        assert!(shard_covers_commit(MonoMs(1_099), &c, &shard));
        assert!(
            !shard_covers_commit(MonoMs(1_100), &c, &shard),
            "window ended"
        );
        assert!(
            !shard_covers_commit(MonoMs(999), &c, &shard),
            "clock stepped back"
        );
        assert!(!fast_commit(MonoMs(1_000), &c, &shard, 0), "no host token");
        assert!(
            fast_commit(MonoMs(1_000), &c, &shard, 1),
            "a token of every limit: the token path (never the exact path for nothing)"
        );
        for empty in [
            ShardRow {
                commit_tokens: 0,
                ..shard
            },
            ShardRow {
                in_flight_tokens: 0,
                ..shard
            },
            ShardRow {
                attempt_tokens: 0,
                ..shard
            },
        ] {
            assert!(!shard_covers_commit(MonoMs(1_000), &c, &empty));
        }
    }

    /// Three hosts on the target, four reservations, five commits in the window that started at
    /// 50 ms, nine attempt rows.
    fn facts() -> LimitFacts {
        LimitFacts {
            target_load: 3,
            in_flight: 4,
            rate: RateRow {
                window_start: MonoMs(50),
                commits: 5,
            },
            attempt_rows: 9,
        }
    }

    #[test]
    fn ho_s4_rebalance_gathers_the_counts_and_keeps_the_window() {
        let c = config(10, 7, 100);
        let after = facts();
        let r = rebalance(&c, &after, 4);
        let rows: Vec<ShardRow> = (0..4).map(|j| r.row(j, &ShardRow::default())).collect();
        assert_eq!(exact_limits(&rows, 3), after);
        assert_eq!(rows.iter().map(|s| s.in_flight_tokens).sum::<u64>(), 6);
        assert_eq!(rows.iter().map(|s| s.commit_tokens).sum::<u64>(), 2);
        assert!(rows.iter().all(|s| s.window_start == MonoMs(50)));
        // Over the limit (a lowered setting): no tokens, never a negative room.
        let over = LimitFacts {
            in_flight: 12,
            ..after
        };
        let r = rebalance(&c, &over, 4);
        assert_eq!(
            (0..4)
                .map(|j| r.row(j, &ShardRow::default()).in_flight_tokens)
                .sum::<u64>(),
            0
        );
        assert_eq!(load_split(5, 9, 4), Split::even(0, 4));
    }

    #[test]
    fn ho_s4_a_fence_counts_one_attempt_row_and_nothing_else() {
        let before = facts();
        assert_eq!(
            after_fence(&before),
            LimitFacts {
                attempt_rows: 10,
                ..before
            }
        );
    }

    #[test]
    fn scale_2_an_enrolment_spends_a_host_token_or_takes_the_exact_path() {
        let with_tokens = ShardRow {
            host_tokens: 3,
            hosts: 7,
            ..ShardRow::default()
        };
        // No host token on the locked shard: exact path, whatever the cell's tokens.
        assert_eq!(enrol_path(&ShardRow::default(), 5, 0), EnrolPath::Exact);
        // The cell's own token on this shard is spent with the host token.
        assert_eq!(
            enrol_path(&with_tokens, 1, 9),
            EnrolPath::Token {
                spend_cell_token: true
            }
        );
        // The cell holds no tokens anywhere: none is owed.
        assert_eq!(
            enrol_path(&with_tokens, 0, 0),
            EnrolPath::Token {
                spend_cell_token: false
            }
        );
        // Tokens only on other shards stand for room the new host takes: revoke them (exact).
        assert_eq!(enrol_path(&with_tokens, 0, 2), EnrolPath::Exact);
        let after = spend_enrolment(&with_tokens);
        assert_eq!((after.hosts, after.host_tokens), (8, 2));
    }

    #[test]
    fn scale_1_the_exact_enrolment_refuses_at_the_bound_and_deals_the_room_left() {
        let mut c = config(10, 10, 100);
        c.bounds.max_hosts = 20;
        assert_eq!(enrol_exact(&c, 20, 4), None, "at the bound");
        assert_eq!(enrol_exact(&c, 25, 4), None, "over a lowered bound");
        let split = enrol_exact(&c, 10, 4).expect("room");
        // Room after this host: 20 - 11 = 9 tokens over 4 shards.
        assert_eq!((0..4).map(|j| split.share(j)).sum::<u64>(), 9);
        assert_eq!(
            enrol_exact(&c, 19, 4),
            Some(Split::even(0, 4)),
            "the last host"
        );
        assert_eq!(
            enrol_exact(&c, -3, 4).map(|s| s.share(0)),
            Some(5),
            "a count is never negative"
        );
    }
}
