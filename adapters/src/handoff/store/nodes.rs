//! HA-1: libpq's multi-host URL over a driver that takes one host (sqlx: launchbadge/sqlx#2290).
//!
//! `postgres://u@h1:p1,h2:p2/db?target_session_attrs=read-write` becomes one single-host URL per
//! node. At connect the store walks them in order and keeps the first node that matches
//! (core's `NodeWalk`: a connection and `SELECT current_setting('transaction_read_only'),
//! pg_is_in_recovery()` per node); the pool's connect options point at it. Every new pooled
//! connection is probed again (a node that stopped matching refuses it). A store call that
//! fails for a reason that may mean the node changed role starts a walk in the background
//! (core's `NodeWatch` decides when); a walk that ends on another node moves new connections
//! there and retires every connection made before it (checked when the pool hands one out).
//! While no node matches, calls fail naming every node and why, and the walk repeats.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, AnyPool, Connection};
use switchyard_core::handoff::store::{
    NodeAction, NodeProbe, NodeSignal, NodeState, NodeWalk, NodeWatch, SessionAttrs, WalkEnd,
};

use super::StoreFailure;

/// The least time between two walks, and the pace of the walk while no node matches.
const WALK_GAP: Duration = Duration::from_millis(250);

/// A PostgreSQL URL naming its nodes: the libpq multi-host form, or one host with
/// `target_session_attrs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeUrl {
    /// `host:port` of each node, as written (for messages).
    pub hosts: Vec<String>,
    /// One single-host URL per node, without `target_session_attrs`.
    pub urls: Vec<String>,
    pub attrs: SessionAttrs,
}

impl NodeUrl {
    /// `Ok(None)`: a plain one-host URL (the driver takes it as it is).
    pub fn parse(url: &str) -> Result<Option<NodeUrl>, String> {
        let scheme_end = url
            .find("://")
            .map(|i| i + 3)
            .ok_or_else(|| "no scheme".to_owned())?;
        let rest = &url[scheme_end..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        let tail = &rest[authority_end..];
        let (userinfo, hostlist) = match authority.rfind('@') {
            Some(at) => (&authority[..=at], &authority[at + 1..]),
            None => ("", authority),
        };
        let (path, query) = match tail.find('?') {
            Some(q) => (&tail[..q], &tail[q + 1..]),
            None => (tail, ""),
        };
        let mut attrs = None;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", v)) => {
                    attrs = Some(SessionAttrs::parse(v).ok_or_else(|| {
                        format!(
                            "target_session_attrs={v:?} is not one of any, read-write, \
                             read-only, primary, standby, prefer-standby"
                        )
                    })?);
                }
                _ => kept.push(pair),
            }
        }
        let hosts: Vec<&str> = hostlist.split(',').collect();
        if hosts.len() == 1 && attrs.is_none() {
            return Ok(None);
        }
        let mut written = Vec::with_capacity(hosts.len());
        let mut urls = Vec::with_capacity(hosts.len());
        for h in hosts {
            let (host, port) = split_host(h)?;
            let node = format!("{host}:{port}");
            let query = if kept.is_empty() {
                String::new()
            } else {
                format!("?{}", kept.join("&"))
            };
            urls.push(format!(
                "{}{userinfo}{node}{path}{query}",
                &url[..scheme_end]
            ));
            written.push(node);
        }
        Ok(Some(NodeUrl {
            hosts: written,
            urls,
            attrs: attrs.unwrap_or(SessionAttrs::Any),
        }))
    }
}

/// `host[:port]` or `[v6][:port]`; libpq's default port.
fn split_host(h: &str) -> Result<(&str, u16), String> {
    let (host, port) = if let Some(v6) = h.strip_prefix('[') {
        let close = v6
            .find(']')
            .ok_or_else(|| format!("host {h:?}: no closing ']'"))?;
        let after = &v6[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("host {h:?}: text after ']'")),
        };
        (&h[..close + 2], port)
    } else {
        match h.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (h, None),
        }
    };
    if host.is_empty() {
        return Err(format!("an empty host in {h:?}"));
    }
    let port = match port {
        None => 5432,
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("host {h:?}: invalid port number {p:?}"))?,
    };
    Ok((host, port))
}

/// The nodes of a store and its watch over them.
#[derive(Debug)]
pub struct Nodes {
    url: NodeUrl,
    options: Vec<AnyConnectOptions>,
    /// How long one node may take to connect and answer the probe.
    probe_timeout: Duration,
    watch: Mutex<NodeWatch>,
    base: Instant,
    /// Connections made before `base` + this many ms are retired.
    retire_before_ms: AtomicU64,
    /// While no node matches: what the last walk saw.
    no_node: Mutex<Option<String>>,
}

impl Nodes {
    /// Walk the nodes once (at start). Errors name every node tried and why.
    pub async fn connect(url: NodeUrl, probe_timeout: Duration) -> Result<Nodes, String> {
        let options = url
            .urls
            .iter()
            .map(|u| {
                u.parse::<AnyConnectOptions>()
                    .map_err(|e| format!("{}: {e}", super::redact(u)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut nodes = Nodes {
            url,
            options,
            probe_timeout,
            watch: Mutex::new(NodeWatch::new(0, millis(WALK_GAP))),
            base: Instant::now(),
            retire_before_ms: AtomicU64::new(0),
            no_node: Mutex::new(None),
        };
        match nodes.walk().await {
            WalkEnd::Node(node) => {
                nodes.watch = Mutex::new(NodeWatch::new(node, millis(WALK_GAP)));
                tracing::info!(
                    node = %nodes.url.hosts[node],
                    target_session_attrs = nodes.url.attrs.as_str(),
                    nodes = nodes.url.hosts.len(),
                    "store node chosen"
                );
                Ok(nodes)
            }
            WalkEnd::NoNode(tried) => Err(nodes.describe(&tried)),
        }
    }

    /// The options of the node new connections go to.
    pub fn current(&self) -> AnyConnectOptions {
        let node = self.watch.lock().map_or(0, |w| w.node());
        self.options[node].clone()
    }

    pub fn attrs(&self) -> SessionAttrs {
        self.url.attrs
    }

    /// Whether a pooled connection made `age` ago may still be used.
    pub fn keeps(&self, age: Duration) -> bool {
        let made = Instant::now().checked_sub(age).unwrap_or(self.base);
        let made_ms = millis(made.saturating_duration_since(self.base));
        made_ms >= self.retire_before_ms.load(Ordering::SeqCst)
    }

    /// While no node matches, why (every node and its reason).
    pub fn no_node(&self) -> Option<String> {
        self.no_node.lock().ok().and_then(|g| g.clone())
    }

    /// A store call failed: walk again in the background when the watch says so.
    pub fn failed(self: &Arc<Self>, pool: &AnyPool, failure: &StoreFailure) {
        let signal = signal_of(failure);
        let action = match self.watch.lock() {
            Ok(mut w) => w.on_failure(self.now_ms(), signal),
            Err(_) => return,
        };
        if action == NodeAction::Walk {
            let nodes = Arc::clone(self);
            let pool = pool.clone();
            tokio::spawn(async move { nodes.rewalk(pool, signal).await });
        }
    }

    /// Walk until a node matches (spaced by the watch's gap while none does).
    async fn rewalk(self: Arc<Self>, pool: AnyPool, signal: NodeSignal) {
        loop {
            let end = self.walk().await;
            let action = match self.watch.lock() {
                Ok(mut w) => w.on_walk(end, signal),
                Err(_) => return,
            };
            match action {
                NodeAction::Switch { node, drop_older } => {
                    pool.set_connect_options(self.options[node].clone());
                    if drop_older {
                        self.retire_before_ms.store(self.now_ms(), Ordering::SeqCst);
                        tracing::warn!(
                            node = %self.url.hosts[node],
                            target_session_attrs = self.url.attrs.as_str(),
                            "store node changed: new connections go to it; older ones are retired"
                        );
                    }
                    if let Ok(mut g) = self.no_node.lock() {
                        if g.take().is_some() {
                            tracing::info!(node = %self.url.hosts[node], "a store node matches again");
                        }
                    }
                    return;
                }
                NodeAction::NoNode { tried, retry_ms } => {
                    self.retire_before_ms.store(self.now_ms(), Ordering::SeqCst);
                    let text = self.describe(&tried);
                    if let Ok(mut g) = self.no_node.lock() {
                        if g.is_none() {
                            tracing::warn!(why = %text, "no store node matches; walking the nodes again until one does");
                        }
                        *g = Some(text);
                    }
                    tokio::time::sleep(Duration::from_millis(retry_ms)).await;
                    let again = self.watch.lock().is_ok_and(|mut w| w.retry(self.now_ms()));
                    if !again {
                        return;
                    }
                }
                NodeAction::Keep | NodeAction::Walk => return,
            }
        }
    }

    /// One walk over the nodes, in order.
    async fn walk(&self) -> WalkEnd {
        let mut walk = NodeWalk::new(self.url.attrs, self.options.len());
        while let Some(node) = walk.next() {
            let probe = self.probe(node).await;
            if let Some(end) = walk.handle(probe) {
                return end;
            }
        }
        walk.end()
    }

    async fn probe(&self, node: usize) -> NodeProbe {
        let opts = &self.options[node];
        let attempt = async {
            let mut conn = AnyConnection::connect_with(opts)
                .await
                .map_err(|e| e.to_string())?;
            let state = if self.url.attrs.needs_probe() {
                probe_state(&mut conn).await
            } else {
                // `any`: the first node that answers.
                Ok(NodeState {
                    read_only: false,
                    in_recovery: false,
                })
            };
            let _ = conn.close().await;
            state
        };
        match tokio::time::timeout(self.probe_timeout, attempt).await {
            Ok(Ok(state)) => NodeProbe::Answered(state),
            Ok(Err(e)) => NodeProbe::Failed(e),
            Err(_) => NodeProbe::Failed(format!(
                "no answer within {} ms",
                self.probe_timeout.as_millis()
            )),
        }
    }

    fn describe(&self, tried: &[(usize, String)]) -> String {
        let each: Vec<String> = tried
            .iter()
            .map(|(i, why)| format!("{}: {why}", self.url.hosts[*i]))
            .collect();
        format!(
            "no node of {} matches target_session_attrs={} ({})",
            self.url.hosts.join(","),
            self.url.attrs.as_str(),
            each.join("; ")
        )
    }

    fn now_ms(&self) -> u64 {
        millis(self.base.elapsed())
    }
}

/// What a node says of itself.
pub async fn probe_state(conn: &mut AnyConnection) -> Result<NodeState, String> {
    let (read_only, in_recovery): (String, bool) =
        sqlx::query_as("SELECT current_setting('transaction_read_only'), pg_is_in_recovery()")
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| format!("probe failed: {e}"))?;
    Ok(NodeState {
        read_only: read_only == "on",
        in_recovery,
    })
}

/// How a failed store call bears on the node (SQLSTATE 25006: read-only).
fn signal_of(f: &StoreFailure) -> NodeSignal {
    match f {
        StoreFailure::BadRow(_) => NodeSignal::Statement,
        StoreFailure::InTransaction(m) if m.contains("SQLSTATE 25006") => NodeSignal::ReadOnly,
        _ => NodeSignal::Unreachable,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ha_1_the_url_pg_autoctl_prints_becomes_one_url_per_node() {
        let u = NodeUrl::parse(
            "postgres://autoctl_node@127.0.0.1:5501,127.0.0.1:5502/sy?target_session_attrs=read-write&sslmode=prefer",
        )
        .expect("parses")
        .expect("multi-host");
        assert_eq!(u.hosts, ["127.0.0.1:5501", "127.0.0.1:5502"]);
        assert_eq!(
            u.urls,
            [
                "postgres://autoctl_node@127.0.0.1:5501/sy?sslmode=prefer",
                "postgres://autoctl_node@127.0.0.1:5502/sy?sslmode=prefer"
            ]
        );
        assert_eq!(u.attrs, SessionAttrs::ReadWrite);
    }

    #[test]
    fn ha_1_hosts_without_ports_ipv6_and_one_host_with_attrs() {
        let u = NodeUrl::parse("postgresql://u:p@a,[::1]:6000,b:7/db")
            .expect("parses")
            .expect("multi-host");
        assert_eq!(u.hosts, ["a:5432", "[::1]:6000", "b:7"]);
        assert_eq!(u.urls[1], "postgresql://u:p@[::1]:6000/db");
        assert_eq!(u.attrs, SessionAttrs::Any);
        let one = NodeUrl::parse("postgres://h:1/db?target_session_attrs=primary")
            .expect("parses")
            .expect("attrs make it a node URL");
        assert_eq!(one.urls, ["postgres://h:1/db"]);
        assert_eq!(
            NodeUrl::parse("postgres://u@h:5432/db?sslmode=disable"),
            Ok(None)
        );
        assert_eq!(NodeUrl::parse("postgres://h:1/db"), Ok(None));
    }

    #[test]
    fn ha_1_bad_node_urls_are_named() {
        for (url, says) in [
            ("postgres://a:1,b:x/db", "invalid port number \"x\""),
            ("postgres://a:1,:2/db", "empty host"),
            (
                "postgres://a:1,b:2/db?target_session_attrs=master",
                "master",
            ),
            ("postgres://a,[::1/db", "closing"),
        ] {
            let e = NodeUrl::parse(url).expect_err(url);
            assert!(e.contains(says), "{url}: {e}");
        }
    }
}
