//! HA-1: which database node a store may use, and what its start-time checks conclude.
//!
//! A highly available PostgreSQL is several nodes, one of them accepting writes; the store's
//! URL names them all (libpq's multi-host form) with `target_session_attrs`. The SQL store
//! walks the nodes in the URL's order, probes each, and keeps the first that matches
//! ([`NodeWalk`]); after a failure that may mean the node changed role (a failover, a
//! switchover, a node kept read-only after promotion) it walks again, and when the walk ends
//! on another node (or on none) it stops using every connection it made before
//! ([`NodeWatch`]). The same module holds the two start-time checks HA-1 documents: the
//! connection budget ([`connection_budget`]) and the transaction timeout against the distance
//! to the primary ([`distance_rule`]).

use serde::{Deserialize, Serialize};

use super::plan::MAX_PLAN_STEPS;

/// libpq's `target_session_attrs`: which node a connection may be kept on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SessionAttrs {
    /// Any node that answers.
    Any,
    /// A node that accepts writes: `transaction_read_only` is off. `pg_is_in_recovery()`
    /// false is not enough: pg_auto_failover keeps a promoted node read-only for a while.
    ReadWrite,
    /// A node whose sessions are read-only.
    ReadOnly,
    /// A node not in recovery.
    Primary,
    /// A node in recovery.
    Standby,
    /// A standby if one answers, else any node (libpq: a second pass over the hosts).
    PreferStandby,
}

impl SessionAttrs {
    /// The value as libpq spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SessionAttrs::Any => "any",
            SessionAttrs::ReadWrite => "read-write",
            SessionAttrs::ReadOnly => "read-only",
            SessionAttrs::Primary => "primary",
            SessionAttrs::Standby => "standby",
            SessionAttrs::PreferStandby => "prefer-standby",
        }
    }

    /// Parse libpq's spelling; `None` names no value libpq knows.
    #[must_use]
    pub fn parse(s: &str) -> Option<SessionAttrs> {
        Some(match s {
            "any" => SessionAttrs::Any,
            "read-write" => SessionAttrs::ReadWrite,
            "read-only" => SessionAttrs::ReadOnly,
            "primary" => SessionAttrs::Primary,
            "standby" => SessionAttrs::Standby,
            "prefer-standby" => SessionAttrs::PreferStandby,
            _ => return None,
        })
    }

    /// Whether a node in `state` matches on the first pass over the hosts.
    #[must_use]
    pub fn accepts(self, state: NodeState) -> bool {
        match self {
            SessionAttrs::Any => true,
            SessionAttrs::ReadWrite => !state.read_only,
            SessionAttrs::ReadOnly => state.read_only,
            SessionAttrs::Primary => !state.in_recovery,
            SessionAttrs::Standby | SessionAttrs::PreferStandby => state.in_recovery,
        }
    }

    /// Whether a new pooled connection to the walked-to node may be kept: it still matches
    /// (prefer-standby keeps whatever the walk settled on).
    #[must_use]
    pub fn keeps(self, state: NodeState) -> bool {
        self == SessionAttrs::PreferStandby || self.accepts(state)
    }

    /// Whether a node needs probing at all (`any` keeps the first node that answers).
    #[must_use]
    pub fn needs_probe(self) -> bool {
        self != SessionAttrs::Any
    }
}

/// What a probe of a node read: `current_setting('transaction_read_only')` and
/// `pg_is_in_recovery()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeState {
    pub read_only: bool,
    pub in_recovery: bool,
}

impl NodeState {
    /// The reason a node does not match `attrs`, in words.
    #[must_use]
    pub fn mismatch(self, attrs: SessionAttrs) -> String {
        format!(
            "does not match target_session_attrs={} (transaction_read_only={}, in recovery={})",
            attrs.as_str(),
            if self.read_only { "on" } else { "off" },
            self.in_recovery
        )
    }
}

/// What happened when the walk tried one node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeProbe {
    /// The connection or the probe failed (the text says how).
    Failed(String),
    /// The node answered the probe.
    Answered(NodeState),
}

/// One walk over the nodes in the URL's order (libpq's): the executor connects to the node
/// [`NodeWalk::next`] names and hands back what it saw; the walk ends on the first node that
/// matches, or on none, with every node tried and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeWalk {
    attrs: SessionAttrs,
    nodes: usize,
    next: usize,
    /// PreferStandby's second pass: the first node that answered at all.
    first_answered: Option<usize>,
    tried: Vec<(usize, String)>,
}

/// Where a walk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkEnd {
    /// Use this node.
    Node(usize),
    /// No node matched: each node tried, in order, with the reason.
    NoNode(Vec<(usize, String)>),
}

impl NodeWalk {
    #[must_use]
    pub fn new(attrs: SessionAttrs, nodes: usize) -> NodeWalk {
        NodeWalk {
            attrs,
            nodes,
            next: 0,
            first_answered: None,
            tried: Vec::new(),
        }
    }

    /// The node to try next, or `None` when the walk is over (then [`NodeWalk::end`]).
    #[must_use]
    pub fn next(&self) -> Option<usize> {
        (self.next < self.nodes).then_some(self.next)
    }

    /// What the executor saw at the node [`NodeWalk::next`] named. Returns the end when the
    /// walk is decided.
    pub fn handle(&mut self, probe: NodeProbe) -> Option<WalkEnd> {
        let node = self.next;
        crate::invariant!(node < self.nodes, "a probe after the walk ended");
        self.next += 1;
        match probe {
            NodeProbe::Failed(why) => self.tried.push((node, why)),
            NodeProbe::Answered(state) if self.attrs.accepts(state) => {
                return Some(WalkEnd::Node(node));
            }
            NodeProbe::Answered(state) => {
                self.first_answered.get_or_insert(node);
                self.tried.push((node, state.mismatch(self.attrs)));
            }
        }
        (self.next >= self.nodes).then(|| self.end())
    }

    /// The end of a walk with no node left to try.
    #[must_use]
    pub fn end(&self) -> WalkEnd {
        match (self.attrs, self.first_answered) {
            (SessionAttrs::PreferStandby, Some(node)) => WalkEnd::Node(node),
            _ => WalkEnd::NoNode(self.tried.clone()),
        }
    }
}

/// What the store saw go wrong, as far as the node's role is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeSignal {
    /// No connection could be had, or one broke (refused, reset, shut down by the server,
    /// the client's bound fired): the node may be gone.
    Unreachable,
    /// The node refused a write as read-only (SQLSTATE 25006): it no longer matches
    /// `read-write`.
    ReadOnly,
    /// A statement failed for another reason (a lock timeout, a conflict): the node is fine.
    Statement,
}

/// What the store must do next about its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAction {
    /// Nothing.
    Keep,
    /// Walk the nodes again (in the background; transactions go on meanwhile).
    Walk,
    /// Use `node` for new connections, and drop every connection made before this instant
    /// (they are to another node, or to one that no longer matches).
    Switch { node: usize, drop_older: bool },
    /// No node matches: drop every connection, fail calls with the walk's reasons, and walk
    /// again after `retry_ms`.
    NoNode {
        tried: Vec<(usize, String)>,
        retry_ms: u64,
    },
}

/// The store's view of its node over time (HA-1): which node new connections go to, when to
/// walk again, when old connections must go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeWatch {
    node: usize,
    /// A walk is running (at most one at a time).
    walking: bool,
    /// When the last walk began: walks are spaced by `min_gap_ms` at least.
    last_walk_ms: Option<u64>,
    min_gap_ms: u64,
}

impl NodeWatch {
    /// `node`: where the start-time walk ended. `min_gap_ms`: the least time between two
    /// walks (each costs a connection to every node before the matching one).
    #[must_use]
    pub fn new(node: usize, min_gap_ms: u64) -> NodeWatch {
        NodeWatch {
            node,
            walking: false,
            last_walk_ms: None,
            min_gap_ms,
        }
    }

    /// The node new connections go to.
    #[must_use]
    pub fn node(&self) -> usize {
        self.node
    }

    /// A store call failed at `now_ms` with `signal`. A walk is asked for when the node may
    /// have changed role and no walk ran within the gap.
    pub fn on_failure(&mut self, now_ms: u64, signal: NodeSignal) -> NodeAction {
        if signal == NodeSignal::Statement || self.walking {
            return NodeAction::Keep;
        }
        if let Some(last) = self.last_walk_ms {
            if now_ms.saturating_sub(last) < self.min_gap_ms {
                return NodeAction::Keep;
            }
        }
        self.walking = true;
        self.last_walk_ms = Some(now_ms);
        NodeAction::Walk
    }

    /// A walk begun on request of the watch itself (after [`NodeAction::NoNode`]'s retry).
    pub fn retry(&mut self, now_ms: u64) -> bool {
        if self.walking {
            return false;
        }
        self.walking = true;
        self.last_walk_ms = Some(now_ms);
        true
    }

    /// A walk ended. Connections made before it are dropped whenever the node changed, and
    /// when a node that stopped matching was walked back to (it may have refused writes to
    /// them meanwhile).
    pub fn on_walk(&mut self, end: WalkEnd, signal: NodeSignal) -> NodeAction {
        crate::invariant!(self.walking, "a walk ended that never began");
        self.walking = false;
        match end {
            WalkEnd::Node(node) => {
                let changed = node != self.node;
                self.node = node;
                NodeAction::Switch {
                    node,
                    drop_older: changed || signal == NodeSignal::ReadOnly,
                }
            }
            WalkEnd::NoNode(tried) => NodeAction::NoNode {
                tried,
                retry_ms: self.min_gap_ms,
            },
        }
    }
}

/// The statements (round trips) a store transaction may send, registration's reservations
/// aside: `BEGIN` and `COMMIT` are among the plan's steps.
pub const MAX_TXN_ROUND_TRIPS: u64 = MAX_PLAN_STEPS as u64;

/// HA-1's distance rule: a transaction of [`MAX_TXN_ROUND_TRIPS`] round trips of `rtt_ms`
/// each must fit in half of `--db-txn-timeout-ms`; the other half is the server's work and
/// its lock waits. `Some(needed_ms)` when the timeout is too short for this distance.
#[must_use]
pub fn distance_rule(rtt_ms: u64, txn_timeout_ms: u64) -> Option<u64> {
    let needed = rtt_ms.saturating_mul(MAX_TXN_ROUND_TRIPS).saturating_mul(2);
    (needed > txn_timeout_ms).then_some(needed)
}

/// The farthest primary (round trip, ms) a transaction timeout serves under the rule.
#[must_use]
pub fn farthest_rtt_ms(txn_timeout_ms: u64) -> u64 {
    txn_timeout_ms / (MAX_TXN_ROUND_TRIPS * 2)
}

/// What the server told about its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServerConnections {
    /// `max_connections`.
    pub max: u64,
    /// `superuser_reserved_connections` (+ `reserved_connections` on 16+).
    pub reserved: u64,
    /// Client backends connected now, this process's own included.
    pub in_use: u64,
}

/// The connection budget (HA-1): how many processes with a pool of `pool` fit in the server,
/// and whether this one still fits beside the connections already in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Budget {
    /// `(max - reserved) / pool`: processes like this one the server holds at most.
    pub processes: u64,
    /// This pool can grow to its size beside what is in use.
    pub fits: bool,
}

/// HA-1: cells × pool size must stay under the server's `max_connections` less its reserved
/// slots. `in_use` counts this process's open connections too (`own`), which the pool's size
/// already covers.
#[must_use]
pub fn connection_budget(server: ServerConnections, pool: u64, own: u64) -> Budget {
    let usable = server.max.saturating_sub(server.reserved);
    let others = server.in_use.saturating_sub(own);
    Budget {
        processes: usable.checked_div(pool.max(1)).unwrap_or(0),
        fits: others.saturating_add(pool) <= usable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RW: NodeState = NodeState {
        read_only: false,
        in_recovery: false,
    };
    const PROMOTED_READ_ONLY: NodeState = NodeState {
        read_only: true,
        in_recovery: false,
    };
    const STANDBY: NodeState = NodeState {
        read_only: true,
        in_recovery: true,
    };

    #[test]
    fn ha_1_read_write_refuses_a_promoted_node_still_read_only() {
        assert!(SessionAttrs::ReadWrite.accepts(RW));
        assert!(!SessionAttrs::ReadWrite.accepts(PROMOTED_READ_ONLY));
        assert!(!SessionAttrs::ReadWrite.accepts(STANDBY));
        // `primary` is libpq's: not in recovery, read-only or not.
        assert!(SessionAttrs::Primary.accepts(PROMOTED_READ_ONLY));
        assert!(SessionAttrs::Any.accepts(STANDBY));
        for s in [
            "any",
            "read-write",
            "read-only",
            "primary",
            "standby",
            "prefer-standby",
        ] {
            assert_eq!(SessionAttrs::parse(s).map(SessionAttrs::as_str), Some(s));
        }
        assert_eq!(SessionAttrs::parse("master"), None);
    }

    #[test]
    fn ha_1_a_walk_keeps_the_first_matching_node_and_names_every_one_tried() {
        let mut w = NodeWalk::new(SessionAttrs::ReadWrite, 3);
        assert_eq!(w.next(), Some(0));
        assert_eq!(
            w.handle(NodeProbe::Failed("connection refused".into())),
            None
        );
        assert_eq!(w.next(), Some(1));
        assert_eq!(w.handle(NodeProbe::Answered(STANDBY)), None);
        assert_eq!(w.handle(NodeProbe::Answered(RW)), Some(WalkEnd::Node(2)));

        let mut w = NodeWalk::new(SessionAttrs::ReadWrite, 2);
        assert_eq!(w.handle(NodeProbe::Answered(PROMOTED_READ_ONLY)), None);
        let Some(WalkEnd::NoNode(tried)) = w.handle(NodeProbe::Failed("timed out".into())) else {
            panic!("no node matches");
        };
        assert_eq!(tried.len(), 2);
        assert!(tried[0].1.contains("transaction_read_only=on"), "{tried:?}");
        assert_eq!(tried[1], (1, "timed out".to_owned()));

        // prefer-standby falls back to the first node that answered.
        let mut w = NodeWalk::new(SessionAttrs::PreferStandby, 2);
        assert_eq!(w.handle(NodeProbe::Answered(RW)), None);
        assert_eq!(
            w.handle(NodeProbe::Failed("refused".into())),
            Some(WalkEnd::Node(0))
        );
    }

    #[test]
    fn ha_1_the_watch_walks_after_a_node_failure_once_per_gap() {
        let mut w = NodeWatch::new(0, 250);
        assert_eq!(w.on_failure(0, NodeSignal::Statement), NodeAction::Keep);
        assert_eq!(w.on_failure(10, NodeSignal::Unreachable), NodeAction::Walk);
        // One walk at a time.
        assert_eq!(w.on_failure(20, NodeSignal::ReadOnly), NodeAction::Keep);
        assert_eq!(
            w.on_walk(WalkEnd::Node(1), NodeSignal::Unreachable),
            NodeAction::Switch {
                node: 1,
                drop_older: true
            }
        );
        assert_eq!(w.node(), 1);
        // Within the gap: no second walk.
        assert_eq!(w.on_failure(200, NodeSignal::Unreachable), NodeAction::Keep);
        assert_eq!(w.on_failure(260, NodeSignal::ReadOnly), NodeAction::Walk);
        // Back on the same node after it refused a write: its old connections go too.
        assert_eq!(
            w.on_walk(WalkEnd::Node(1), NodeSignal::ReadOnly),
            NodeAction::Switch {
                node: 1,
                drop_older: true
            }
        );
        assert_eq!(w.on_failure(600, NodeSignal::Unreachable), NodeAction::Walk);
        assert_eq!(
            w.on_walk(WalkEnd::Node(1), NodeSignal::Unreachable),
            NodeAction::Switch {
                node: 1,
                drop_older: false
            }
        );
        assert!(w.retry(700));
        let tried = vec![(0, "refused".to_owned())];
        assert_eq!(
            w.on_walk(WalkEnd::NoNode(tried.clone()), NodeSignal::Unreachable),
            NodeAction::NoNode {
                tried,
                retry_ms: 250
            }
        );
    }

    #[test]
    fn ha_1_distance_rule_and_budget() {
        // The default timeout (3 s) serves a primary up to 93 ms away.
        assert_eq!(farthest_rtt_ms(3_000), 93);
        assert_eq!(distance_rule(93, 3_000), None);
        assert_eq!(distance_rule(200, 3_000), Some(6_400));
        let server = ServerConnections {
            max: 100,
            reserved: 3,
            in_use: 10,
        };
        // 97 usable, pools of 8: 12 processes.
        assert_eq!(
            connection_budget(server, 8, 2),
            Budget {
                processes: 12,
                fits: true
            }
        );
        let full = ServerConnections {
            in_use: 92,
            ..server
        };
        assert!(!connection_budget(full, 8, 1).fits);
        assert!(connection_budget(full, 8, 3).fits);
    }
}
