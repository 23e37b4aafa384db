//! SEC-3: which TCP connections a server takes. A peer address may hold at most
//! `per_peer` connections and the server at most `total`; a newcomer over either bound is
//! refused with the bound's name, and everyone already admitted keeps being served.
//!
//! The adapter asks [`ConnectionGate::admit`] once per accepted socket and hands the ticket
//! back through [`ConnectionGate::release`] when the socket (upgraded WebSocket included) is
//! dropped. Each answer says whether the gate's [`Pressure`] changed, so the adapter logs once
//! per state change, not once per refused socket.
//!
//! The peer key is a generic `Ord` value (an IP address in the adapter), so the table is a
//! `BTreeMap` and nothing here depends on hashing order.

use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
