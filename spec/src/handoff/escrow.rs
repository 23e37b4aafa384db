//! HO-S4 at scale: the SQL store's escrowed limit shards ([`switchyard_core::handoff::escrow`])
//! kept beside the reference store. The model's store is the reference (every commit takes its
//! exact path); the shadow holds the two shard rows and the target cell's load rows the SQL
//! store would hold after the same writes, through the same core functions the SQL store
//! calls: a commit on the token path where the locked shard covers it (`fast_commit`,
//! `spend_commit`), else the exact path (`exact_limits`, `rebalance`, `load_split`); a fence
//! record's rebalance (`after_fence`); a release subtracted on the shard that counted the
//! reservation; the target's tokens revoked when its row changes. The property
//! "HO-S4 the escrowed limit shards decide as the store does" judges, after every store
//! write, that no limit has more tokens out than the room left under it in the store and
//! that the shards' counts add up to the store's rows (so the exact path reads the store's
//! totals), and at every transaction that a commit the token path would make is one the
//! store's exact check makes.

use super::*;
use switchyard_core::handoff::escrow::{
    after_fence, exact_limits, fast_commit, load_split, rebalance, spend_commit, ShardRow,
};
use switchyard_core::handoff::store::{LimitFacts, RateRow};

/// Limit shards of the shadow: two, so a token dealt to one shard and spent on the other
/// differ (and the exact path gathers the counts onto shard 0).
pub const MODEL_LIMIT_SHARDS: u32 = 2;

/// The SQL store's limit rows beside the reference store (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EscrowShadow {
    pub shards: [ShardRow; 2],
    /// The target cell's load rows, per shard: (hosts counted, host tokens).
    pub target: [(i64, u64); 2],
    /// The shard that counted each live reservation (a release subtracts there).
    pub counted: Vec<(OpId, u8)>,
}

/// The shards a commit of `host` may lock, in the SQL store's order: its hint
/// (`host % shards`) first, then the others (another writer may hold the hint's).
fn shard_order(host: HostId) -> [usize; 2] {
    let hint = usize::try_from(host.0 % u64::from(MODEL_LIMIT_SHARDS)).unwrap_or(0);
    [hint, 1 - hint]
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl EscrowShadow {
    /// The shadow of a SQL store whose earlier traffic dealt every limit's tokens from the
    /// store's totals (an exact path: `rebalance`, and `load_split` for the target).
    pub fn dealt(store: &AssignmentStore) -> EscrowShadow {
        let mut shadow = EscrowShadow::default();
        let facts = LimitFacts {
            target_load: store.cell_load(TGT),
            in_flight: count(store.reservations().count()),
            rate: store.rate(),
            attempt_rows: count(store.attempts().count()),
        };
        shadow.rebalance(store.config(), &facts);
        shadow.shards[0].commits = i64::from(facts.rate.commits);
        let capacity = store.cell(TGT).map_or(0, |c| c.capacity);
        let split = load_split(capacity, facts.target_load, MODEL_LIMIT_SHARDS);
        for (k, row) in shadow.target.iter_mut().enumerate() {
            row.1 = split.share(u32::try_from(k).unwrap_or(0));
        }
        shadow.target[0].0 = i64::from(facts.target_load);
        shadow
    }

    /// The shard on which the token path would commit `HOST`'s transaction now, if any: no
    /// pending migration of the host (else the SQL store takes the exact path) and a token of
    /// every limit on the shard (the first in the SQL store's order).
    pub fn token_path(&self, store: &AssignmentStore, now: MonoMs) -> Option<usize> {
        if store.reservations().any(|(_, r)| r.host == HOST) {
            return None;
        }
        shard_order(HOST)
            .into_iter()
            .find(|j| fast_commit(now, store.config(), &self.shards[*j], self.target[*j].1))
    }

    /// A commit of `op` recorded by the store (`before` -> `after`); `true`: on the token path.
    fn commit(
        &mut self,
        before: &AssignmentStore,
        after: &AssignmentStore,
        now: MonoMs,
        op: OpId,
    ) -> bool {
        if let Some(j) = self.token_path(before, now) {
            self.shards[j] = spend_commit(&self.shards[j]);
            self.target[j].0 += 1;
            self.target[j].1 -= 1;
            self.counted.push((op, u8::try_from(j).unwrap_or(0)));
            return true;
        }
        let limits = self.exact();
        let after_limits = LimitFacts {
            target_load: limits.target_load.saturating_add(1),
            in_flight: limits.in_flight.saturating_add(1),
            rate: after.rate(),
            attempt_rows: limits.attempt_rows.saturating_add(1),
        };
        let capacity = after.cell(TGT).map_or(0, |c| c.capacity);
        self.rebalance(after.config(), &after_limits);
        let split = load_split(capacity, after_limits.target_load, MODEL_LIMIT_SHARDS);
        for (k, row) in self.target.iter_mut().enumerate() {
            let k32 = u32::try_from(k).unwrap_or(0);
            row.0 = if k == 0 {
                i64::from(after_limits.target_load)
            } else {
                0
            };
            row.1 = split.share(k32);
        }
        self.counted.push((op, 0));
        false
    }

    /// The exact totals: every shard's counts summed (what the SQL store's exact path reads).
    fn exact(&self) -> LimitFacts {
        exact_limits(&self.shards, self.target.iter().map(|t| t.0).sum())
    }

    fn rebalance(&mut self, config: &StoreConfig, after: &LimitFacts) {
        let r = rebalance(config, after, MODEL_LIMIT_SHARDS);
        for (k, row) in self.shards.iter_mut().enumerate() {
            *row = r.row(u32::try_from(k).unwrap_or(0), row);
        }
    }

    /// A fence record written by a locked reconciliation: its exact path deals every limit's
    /// tokens again.
    fn fence(&mut self, config: &StoreConfig) {
        let limits = exact_limits(&self.shards, 0);
        self.rebalance(config, &after_fence(&limits));
    }

    /// A reservation released (the desktop registered at the target, or expiry): subtracted on
    /// the shard that counted it; tokens stay (the room it frees waits for a rebalance).
    /// `false`: no shard counted it.
    fn release(&mut self, op: OpId) -> bool {
        let Some(at) = self.counted.iter().position(|(o, _)| *o == op) else {
            return false;
        };
        let (_, shard) = self.counted.remove(at);
        let row = &mut self.shards[usize::from(shard)];
        row.in_flight = row.in_flight.saturating_sub(1);
        true
    }

    /// The escrow invariant against the store's rows: per limit, the tokens of both shards
    /// never exceed the room left (`limit - count`, 0 at or past the limit), and the shards'
    /// counts add up to the store's (the rate window's commits, live reservations, attempt
    /// rows, the target's hosts).
    pub fn agrees_with(&self, store: &AssignmentStore) -> bool {
        let config = store.config();
        let room = |limit: u64, count: u64| limit.saturating_sub(count);
        let tokens = |f: fn(&ShardRow) -> u64| self.shards.iter().map(f).sum::<u64>();
        let rate: RateRow = store.rate();
        let in_flight = count(store.reservations().count());
        let attempt_rows = count(store.attempts().count());
        let target_load = store.cell_load(TGT);
        let capacity = store.cell(TGT).map_or(0, |c| c.capacity);
        let target_tokens: u64 = self.target.iter().map(|t| t.1).sum();
        let exact = self.exact();
        let within = tokens(|s| s.commit_tokens)
            <= room(
                u64::from(config.max_commits_per_window),
                u64::from(rate.commits),
            )
            && tokens(|s| s.in_flight_tokens)
                <= room(u64::from(config.max_in_flight_migrations), in_flight)
            && tokens(|s| s.attempt_tokens) <= room(config.bounds.max_attempt_rows, attempt_rows)
            && target_tokens <= room(u64::from(capacity), u64::from(target_load));
        let counted = exact.in_flight == in_flight
            && exact.attempt_rows == attempt_rows
            && exact.rate.commits == rate.commits
            && exact.target_load == target_load;
        within && counted
    }
}

/// A rollback the token path would not have made: the store's exact check refused a limit
/// (the token path never reads the totals, so it commits there).
fn limit_refusal(outcome: &TxnOutcome) -> bool {
    matches!(
        outcome,
        TxnOutcome::RolledBack {
            reason: AbortReason::RateLimited
                | AbortReason::ConcurrencyLimited
                | AbortReason::StoreFull
                | AbortReason::Policy(switchyard_core::handoff::Ineligible::TargetAtCapacity)
        }
    )
}

/// HO-S4: the escrowed limit shards decide as the store does (`escrow_disagrees`, recorded by
/// the two judges below: at every transaction, and after every step that wrote the store).
pub(super) fn ho_s4_escrow_agrees() -> Property<HandoffModel> {
    Property::always(
        "HO-S4 the escrowed limit shards decide as the store does: tokens within the room left, counts the store's, a token-path commit only where the store commits",
        |_, s: &HoState| !s.last.anomalies.escrow_disagrees,
    )
}

impl HandoffModel {
    /// HO-S4: a transaction the store answered `answer`; the shadow as it was before it. The
    /// token path commits wherever it applies, so it must apply only where the store commits.
    pub(super) fn judge_escrow_decision(
        state: &mut HoState,
        token_path: Option<usize>,
        answer: &TxnOutcome,
    ) {
        state.last.anomalies.escrow_disagrees |= token_path.is_some() && limit_refusal(answer);
    }

    /// HO-S4: after every step, the shadow follows the store's writes of the step (commits,
    /// fence records, releases, the target's row) and is judged against the store.
    pub(super) fn follow_escrow(before: &HoState, state: &mut HoState, _action: HoAction) {
        if state.store == before.store {
            return;
        }
        let (b, a) = (&*before.store, &*state.store);
        let mut shadow = state.escrow.clone();
        let mut agrees = true;
        for (op, row) in a.attempts() {
            if b.attempt(*op).is_some() {
                continue;
            }
            match row.outcome {
                AttemptOutcome::Committed { .. } => {
                    // The registrations scenario's HO-S4 witness (a token-path commit).
                    state.last.events.escrow_token_commit = shadow.commit(b, a, state.now, *op);
                }
                _ => shadow.fence(a.config()),
            }
        }
        for (op, _) in b.reservations() {
            if a.reservation(*op).is_none() {
                agrees &= shadow.release(*op);
            }
        }
        if b.cell(TGT).map(|c| c.capacity) != a.cell(TGT).map(|c| c.capacity) {
            // A capacity may have been lowered: the SQL store revokes the cell's tokens.
            for row in &mut shadow.target {
                row.1 = 0;
            }
        }
        agrees &= shadow.agrees_with(a);
        state.escrow = shadow;
        state.last.anomalies.escrow_disagrees |= !agrees;
    }
}
