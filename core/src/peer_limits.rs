//! SEC-3: which TCP connections a server takes. A peer address may hold at most
//! `per_peer` connections and the server at most `total`; a newcomer over either bound is
//! refused with the bound's name, and everyone already admitted keeps being served.
//!
//! The adapter asks [`ConnectionGate::admit`] once per accepted socket and hands the ticket
//! back through [`ConnectionGate::release`] when the socket (upgraded WebSocket included) is
//! dropped. Each answer says whether the gate's [`Pressure`] changed, so the adapter logs once
//! per state change, not once per refused socket.
//!
//! [`PeerRateGate`] bounds the request rate of one peer on an unauthenticated path (the cell's
//! `/v1/resolve`, issue #27): a token bucket per peer with the time as input.
//!
//! The peer key is a generic `Ord` value (an IP address in the adapter), so the table is a
//! `BTreeMap` and nothing here depends on hashing order.

use std::collections::{BTreeMap, BTreeSet};

/// Bounds of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionBounds {
    pub total: usize,
    pub per_peer: usize,
}

/// Why a connection was refused (stable names for logs, counters and the 503 body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConnectionRefusal {
    /// The server holds `total` connections.
    ServerFull,
    /// This peer address holds `per_peer` connections.
    PeerFull,
}

impl ConnectionRefusal {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ConnectionRefusal::ServerFull => "too_many_connections",
            ConnectionRefusal::PeerFull => "too_many_connections_from_peer",
        }
    }
}

/// Whether the gate is refusing anyone. `Refusing` starts at the first refusal and ends when a
/// connection is admitted again, so a flood is one WARN line and its end one INFO line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pressure {
    Normal,
    Refusing,
}

/// An admitted connection; give it back exactly once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a ticket not released holds its slot forever"]
pub struct ConnectionTicket<P> {
    peer: P,
}

/// The answer to one `admit` or `release`: what happened, and the pressure if it changed.
#[derive(Debug, PartialEq, Eq)]
pub struct Admission<P> {
    pub outcome: Result<ConnectionTicket<P>, ConnectionRefusal>,
    pub pressure_changed_to: Option<Pressure>,
}

/// Counters of one gate (exported as metrics by the adapter).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionCounts {
    pub open: u64,
    pub admitted_total: u64,
    pub refused_server_full: u64,
    pub refused_peer_full: u64,
}

#[derive(Debug)]
pub struct ConnectionGate<P> {
    bounds: ConnectionBounds,
    per_peer: BTreeMap<P, usize>,
    open: usize,
    pressure: Pressure,
    counts: ConnectionCounts,
}

impl<P: Ord + Clone> ConnectionGate<P> {
    /// Bounds of zero would refuse everyone: they are raised to one.
    #[must_use]
    pub fn new(bounds: ConnectionBounds) -> Self {
        ConnectionGate {
            bounds: ConnectionBounds {
                total: bounds.total.max(1),
                per_peer: bounds.per_peer.max(1),
            },
            per_peer: BTreeMap::new(),
            open: 0,
            pressure: Pressure::Normal,
            counts: ConnectionCounts::default(),
        }
    }

    #[must_use]
    pub fn counts(&self) -> ConnectionCounts {
        self.counts
    }

    #[must_use]
    pub fn pressure(&self) -> Pressure {
        self.pressure
    }

    /// Connections `peer` holds now.
    #[must_use]
    pub fn held_by(&self, peer: &P) -> usize {
        self.per_peer.get(peer).copied().unwrap_or(0)
    }

    pub fn admit(&mut self, peer: P) -> Admission<P> {
        let refusal = if self.open >= self.bounds.total {
            Some(ConnectionRefusal::ServerFull)
        } else if self.held_by(&peer) >= self.bounds.per_peer {
            Some(ConnectionRefusal::PeerFull)
        } else {
            None
        };
        let outcome = match refusal {
            Some(r) => {
                match r {
                    ConnectionRefusal::ServerFull => self.counts.refused_server_full += 1,
                    ConnectionRefusal::PeerFull => self.counts.refused_peer_full += 1,
                }
                Err(r)
            }
            None => {
                *self.per_peer.entry(peer.clone()).or_insert(0) += 1;
                self.open += 1;
                self.counts.admitted_total += 1;
                Ok(ConnectionTicket { peer })
            }
        };
        let now = if outcome.is_ok() {
            Pressure::Normal
        } else {
            Pressure::Refusing
        };
        let pressure_changed_to = self.set_pressure(now);
        self.sync_and_check();
        Admission {
            outcome,
            pressure_changed_to,
        }
    }

    /// A connection ended. A ticket of another gate (an unknown peer) changes nothing.
    pub fn release(&mut self, ticket: ConnectionTicket<P>) {
        if let Some(held) = self.per_peer.get_mut(&ticket.peer) {
            *held -= 1;
            if *held == 0 {
                // Peers with nothing open take no memory: the table is bounded by `total`.
                self.per_peer.remove(&ticket.peer);
            }
            self.open -= 1;
        }
        self.sync_and_check();
    }

    fn set_pressure(&mut self, now: Pressure) -> Option<Pressure> {
        (self.pressure != now).then(|| {
            self.pressure = now;
            now
        })
    }

    fn sync_and_check(&mut self) {
        self.counts.open = self.open as u64;
        assert!(
            self.open <= self.bounds.total,
            "more connections than the bound"
        );
        crate::invariant_eq!(self.per_peer.values().sum::<usize>(), self.open);
        crate::invariant!(self.per_peer.len() <= self.open);
        crate::invariant!(self
            .per_peer
            .values()
            .all(|&n| 0 < n && n <= self.bounds.per_peer));
    }
}

/// SEC-3 (issue #27): bounds of a per-peer request rate (the cell's unauthenticated resolve
/// path): each peer has a token bucket of `burst` requests refilled at `per_second`; at most
/// `max_peers` peers are tracked at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateBounds {
    pub per_second: u32,
    pub burst: u32,
    pub max_peers: usize,
}

/// Why a request was refused by a [`PeerRateGate`] (stable names for logs, counters, bodies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RateRefusal {
    /// This peer spent its burst and its refill.
    PeerRate,
    /// `max_peers` peers are tracked, none idle long enough to forget: a new peer is refused
    /// rather than the table grown (or a busy peer's bucket forgotten, which would refill it).
    TooManyPeers,
}

impl RateRefusal {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            RateRefusal::PeerRate => "too_many_requests_from_peer",
            RateRefusal::TooManyPeers => "too_many_peers",
        }
    }
}

/// The answer to one [`PeerRateGate::check`]: admitted or why not, and the pressure if it
/// changed (log once per change, not per refusal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateVerdict {
    pub outcome: Result<(), RateRefusal>,
    pub pressure_changed_to: Option<Pressure>,
}

/// Counters of one [`PeerRateGate`] (exported as metrics by the adapter).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RateCounts {
    pub admitted: u64,
    pub refused_peer_rate: u64,
    pub refused_too_many_peers: u64,
    /// Peers tracked now (a gauge).
    pub peers: u64,
}

/// How long without a refusal before the pressure is back to `Normal`: one abusive peer among
/// many polite ones must not turn every admitted request into a state change.
pub const RATE_QUIET_MS: u64 = 10_000;

/// One token is this many milli-tokens: the refill of `per_second` tokens a second is then
/// exactly `per_second` milli-tokens a millisecond (integers only).
const MILLI: u64 = 1_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    milli: u64,
    last_ms: u64,
}

/// SEC-3: a token bucket per peer, decided here with the time as input (the adapter passes its
/// clock), so the refusals are deterministic and testable. Memory is bounded by `max_peers`: a
/// peer whose bucket has refilled completely is indistinguishable from a new one and is
/// forgotten (oldest first, `O(log n)` each); a new peer while `max_peers` busy ones are
/// tracked is refused `too_many_peers`.
#[derive(Debug)]
pub struct PeerRateGate<P> {
    bounds: RateBounds,
    peers: BTreeMap<P, Bucket>,
    /// `(last_ms, peer)` of every tracked peer: the idle ones are at the front.
    by_last: BTreeSet<(u64, P)>,
    pressure: Pressure,
    last_refusal_ms: u64,
    counts: RateCounts,
}

impl<P: Ord + Clone> PeerRateGate<P> {
    /// Bounds of zero would refuse everyone: they are raised to one.
    #[must_use]
    pub fn new(bounds: RateBounds) -> Self {
        PeerRateGate {
            bounds: RateBounds {
                per_second: bounds.per_second.max(1),
                burst: bounds.burst.max(1),
                max_peers: bounds.max_peers.max(1),
            },
            peers: BTreeMap::new(),
            by_last: BTreeSet::new(),
            pressure: Pressure::Normal,
            last_refusal_ms: 0,
            counts: RateCounts::default(),
        }
    }

    #[must_use]
    pub fn bounds(&self) -> RateBounds {
        self.bounds
    }

    #[must_use]
    pub fn counts(&self) -> RateCounts {
        RateCounts {
            peers: self.peers.len() as u64,
            ..self.counts
        }
    }

    fn capacity_milli(&self) -> u64 {
        u64::from(self.bounds.burst) * MILLI
    }

    /// Milliseconds after which an untouched bucket is full again.
    fn refill_ms(&self) -> u64 {
        self.capacity_milli()
            .div_ceil(u64::from(self.bounds.per_second))
    }

    /// One request of `peer` at `now_ms`: admitted (a token spent) or refused.
    pub fn check(&mut self, peer: P, now_ms: u64) -> RateVerdict {
        self.forget_idle(now_ms);
        let outcome = self.spend(peer, now_ms);
        let changed = match outcome {
            Ok(()) => {
                self.counts.admitted += 1;
                let quiet = now_ms.saturating_sub(self.last_refusal_ms) >= RATE_QUIET_MS;
                if quiet {
                    self.set_pressure(Pressure::Normal)
                } else {
                    None
                }
            }
            Err(r) => {
                match r {
                    RateRefusal::PeerRate => self.counts.refused_peer_rate += 1,
                    RateRefusal::TooManyPeers => self.counts.refused_too_many_peers += 1,
                }
                self.last_refusal_ms = now_ms;
                self.set_pressure(Pressure::Refusing)
            }
        };
        crate::invariant!(self.peers.len() <= self.bounds.max_peers);
        crate::invariant_eq!(self.peers.len(), self.by_last.len());
        RateVerdict {
            outcome,
            pressure_changed_to: changed,
        }
    }

    fn spend(&mut self, peer: P, now_ms: u64) -> Result<(), RateRefusal> {
        let cap = self.capacity_milli();
        let rate = u64::from(self.bounds.per_second);
        if let Some(b) = self.peers.get_mut(&peer) {
            let old_last = b.last_ms;
            let now = now_ms.max(old_last);
            let refill = (now - old_last).saturating_mul(rate);
            b.milli = b.milli.saturating_add(refill).min(cap);
            b.last_ms = now;
            let verdict = if b.milli >= MILLI {
                b.milli -= MILLI;
                Ok(())
            } else {
                Err(RateRefusal::PeerRate)
            };
            if now != old_last {
                self.by_last.remove(&(old_last, peer.clone()));
                self.by_last.insert((now, peer));
            }
            return verdict;
        }
        if self.peers.len() >= self.bounds.max_peers {
            return Err(RateRefusal::TooManyPeers);
        }
        self.peers.insert(
            peer.clone(),
            Bucket {
                milli: cap - MILLI,
                last_ms: now_ms,
            },
        );
        self.by_last.insert((now_ms, peer));
        Ok(())
    }

    /// Forget peers whose buckets are full again at `now_ms` (a fresh bucket is the same).
    fn forget_idle(&mut self, now_ms: u64) {
        let refill_ms = self.refill_ms();
        while let Some((last, peer)) = self.by_last.first().cloned() {
            if last.saturating_add(refill_ms) > now_ms {
                break;
            }
            self.by_last.pop_first();
            self.peers.remove(&peer);
        }
    }

    fn set_pressure(&mut self, now: Pressure) -> Option<Pressure> {
        (self.pressure != now).then(|| {
            self.pressure = now;
            now
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rate(per_second: u32, burst: u32, max_peers: usize) -> PeerRateGate<u8> {
        PeerRateGate::new(RateBounds {
            per_second,
            burst,
            max_peers,
        })
    }

    #[test]
    fn sec_3_resolve_a_peer_gets_its_burst_then_its_rate_and_others_are_untouched() {
        let mut g = rate(2, 3, 8);
        for _ in 0..3 {
            assert_eq!(g.check(1, 0).outcome, Ok(()));
        }
        let refused = g.check(1, 0);
        assert_eq!(refused.outcome, Err(RateRefusal::PeerRate));
        assert_eq!(refused.pressure_changed_to, Some(Pressure::Refusing));
        // Another peer still gets in, and that is no state change (not quiet yet).
        assert_eq!(
            g.check(2, 1),
            RateVerdict {
                outcome: Ok(()),
                pressure_changed_to: None
            }
        );
        // 2 a second: one token every 500 ms.
        assert_eq!(g.check(1, 499).outcome, Err(RateRefusal::PeerRate));
        assert_eq!(g.check(1, 500).outcome, Ok(()));
        assert_eq!(g.check(1, 500).outcome, Err(RateRefusal::PeerRate));
        let c = g.counts();
        assert_eq!((c.admitted, c.refused_peer_rate, c.peers), (5, 3, 2));
        assert_eq!(RateRefusal::PeerRate.name(), "too_many_requests_from_peer");
        // Quiet for RATE_QUIET_MS: the next admitted request ends the pressure, once.
        let later = 500 + RATE_QUIET_MS;
        assert_eq!(
            g.check(2, later).pressure_changed_to,
            Some(Pressure::Normal)
        );
        assert_eq!(g.check(2, later).pressure_changed_to, None);
    }

    #[test]
    fn sec_3_resolve_the_peer_table_is_bounded_and_forgets_only_full_buckets() {
        // burst 2 at 1 a second: a bucket is full again 2 s after its last use.
        let mut g = rate(1, 2, 2);
        assert_eq!(g.check(1, 0).outcome, Ok(()));
        assert_eq!(g.check(2, 1_000).outcome, Ok(()));
        assert_eq!(g.check(3, 1_999).outcome, Err(RateRefusal::TooManyPeers));
        assert_eq!(g.counts().peers, 2);
        // Peer 1's bucket is full at 2,000 ms: forgotten, room for peer 3; peer 2 (used at
        // 1,000 ms) is still tracked.
        assert_eq!(g.check(3, 2_000).outcome, Ok(()));
        assert_eq!(g.counts().peers, 2);
        assert_eq!(g.counts().refused_too_many_peers, 1);
        assert_eq!(RateRefusal::TooManyPeers.name(), "too_many_peers");
    }

    proptest! {
        /// SEC-3 against an oracle written from the definition: a peer is admitted iff its
        /// bucket (burst, refilled per_second, starting full) holds a token; the table never
        /// exceeds max_peers (peers are spread thin enough here never to hit it).
        #[test]
        fn sec_3_resolve_rate_gate_matches_a_token_bucket_oracle(
            per_second in 1u32..5, burst in 1u32..4,
            steps in prop::collection::vec((0u8..3, 0u64..700), 0..64),
        ) {
            let mut g = rate(per_second, burst, 3);
            let mut oracle: BTreeMap<u8, (f64, u64)> = BTreeMap::new();
            let mut now = 0u64;
            for (peer, dt) in steps {
                now += dt;
                let cap = f64::from(burst);
                let (tokens, last) = oracle.get(&peer).copied().unwrap_or((cap, now));
                let tokens = (tokens + (now - last) as f64 * f64::from(per_second) / 1000.0).min(cap);
                let expect = tokens >= 1.0 - 1e-9;
                oracle.insert(peer, (if expect { tokens - 1.0 } else { tokens }, now));
                prop_assert_eq!(g.check(peer, now).outcome.is_ok(), expect);
                prop_assert!(g.counts().peers <= 3);
            }
        }
    }

    fn gate(total: usize, per_peer: usize) -> ConnectionGate<u8> {
        ConnectionGate::new(ConnectionBounds { total, per_peer })
    }

    #[test]
    fn sec_3_a_peer_over_its_bound_is_refused_and_others_still_get_in() {
        let mut g = gate(10, 2);
        let a1 = g.admit(1).outcome.expect("first");
        let _a2 = g.admit(1).outcome.expect("second");
        let refused = g.admit(1);
        assert_eq!(refused.outcome, Err(ConnectionRefusal::PeerFull));
        assert_eq!(refused.pressure_changed_to, Some(Pressure::Refusing));
        // Refusing again is no new state: nothing to log.
        assert_eq!(g.admit(1).pressure_changed_to, None);
        let other = g.admit(2);
        assert!(other.outcome.is_ok());
        assert_eq!(other.pressure_changed_to, Some(Pressure::Normal));
        g.release(a1);
        assert!(g.admit(1).outcome.is_ok());
        assert_eq!(g.counts().refused_peer_full, 2);
        assert_eq!(g.counts().open, 3);
    }

    #[test]
    fn sec_3_the_server_bound_holds_across_peers() {
        let mut g = gate(2, 5);
        let t1 = g.admit(1).outcome.expect("1");
        let _t2 = g.admit(2).outcome.expect("2");
        assert_eq!(g.admit(3).outcome, Err(ConnectionRefusal::ServerFull));
        g.release(t1);
        assert!(g.admit(3).outcome.is_ok());
        assert_eq!(g.counts().refused_server_full, 1);
        assert_eq!(ConnectionRefusal::ServerFull.name(), "too_many_connections");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Admit(u8),
        Release(usize),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![
                (0u8..4).prop_map(Op::Admit),
                (0usize..16).prop_map(Op::Release)
            ],
            0..64,
        )
    }

    proptest! {
        /// SEC-3 against an oracle written from the requirement: a newcomer is admitted iff
        /// fewer than `total` connections are open and its peer holds fewer than `per_peer`.
        #[test]
        fn sec_3_connection_gate_matches_the_oracle(total in 1usize..6, per_peer in 1usize..4, ops in ops()) {
            let mut g = gate(total, per_peer);
            let mut open: Vec<(u8, ConnectionTicket<u8>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Admit(peer) => {
                        let held = open.iter().filter(|(p, _)| *p == peer).count();
                        let expect_ok = open.len() < total && held < per_peer;
                        let got = g.admit(peer).outcome;
                        prop_assert_eq!(got.is_ok(), expect_ok);
                        if let Ok(t) = got {
                            open.push((peer, t));
                        }
                    }
                    Op::Release(i) => {
                        if !open.is_empty() {
                            let (_, t) = open.remove(i % open.len());
                            g.release(t);
                        }
                    }
                }
                prop_assert_eq!(g.counts().open as usize, open.len());
            }
        }
    }
}
