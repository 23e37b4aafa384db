//! Shared rig of the adapters' handoff tests: a store (SQLite file or a fresh PostgreSQL
//! database), cells on 127.0.0.1:0, desktops and mobiles over real TCP WebSockets, signed
//! requests to the internal endpoint, and a fault ledger (injected / survived / ops lost).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use hyper::Method;
use switchyard_adapters::handoff::auth::{sign_request, KeyRing, Secret};
use switchyard_adapters::handoff::cell::{start_cell, CellConfig, CellError, CellHandle, HostView};
use switchyard_adapters::handoff::client::{spawn_desktop, DesktopConfig, DesktopHandle};
use switchyard_adapters::handoff::client_auth::mint_client_token;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::http;
use switchyard_adapters::handoff::proto::*;
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_adapters::journal::{Journal, JournalConfig, MAX_LINES_PER_SECOND};
use switchyard_core::handoff::store::{StoreConfig, TxnOutcome};
use switchyard_core::handoff::GateState;
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::{CellId, HostId, Incarnation, OpId};
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_spec::conform::{Conformance, Verdict};
use tokio_tungstenite::tungstenite::Message;

#[path = "../support_pg/mod.rs"]
pub mod support_pg;

pub const SRC: CellId = CellId(1);
pub const TGT: CellId = CellId(2);
pub const INTERNAL_SECRET: &[u8] = b"internal-secret-for-tests-0123456789";
pub const DESKTOP_SECRET: &[u8] = b"desktop-secret-for-tests-0123456789";
pub const WAIT: Duration = Duration::from_secs(15);

/// SEC-1: the credential the desktop of `host` issues to its clients (valid six days: the
/// rig's clocks move forward by hours at most, and cells accept a week).
pub fn client_token(host: u64) -> String {
    let desktop = Secret::new(DESKTOP_SECRET, "desktop").expect("secret");
    let expires_ms = Clock::default().now().0 + 6 * 24 * 3_600_000;
    mint_client_token(&desktop.desktop_token(host), host, expires_ms)
}

/// Faults injected and survived, ops lost, across the tests of one binary.
pub static FAULTS_INJECTED: AtomicU64 = AtomicU64::new(0);
pub static FAULTS_SURVIVED: AtomicU64 = AtomicU64::new(0);

pub fn fault_injected() {
    FAULTS_INJECTED.fetch_add(1, Ordering::SeqCst);
}
pub fn fault_survived() {
    FAULTS_SURVIVED.fetch_add(1, Ordering::SeqCst);
}
pub fn ledger(test: &str, lost_ops: usize) {
    eprintln!(
        "[fault-ledger] {test}: injected={} survived={} ops_lost={lost_ops}",
        FAULTS_INJECTED.load(Ordering::SeqCst),
        FAULTS_SURVIVED.load(Ordering::SeqCst)
    );
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub fn store_config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 3_600_000,
        },
        max_in_flight_migrations: 8,
        rate_window_ms: 60_000,
        max_commits_per_window: 50,
        registration_timeout_ms: 30_000,
        bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
    }
}

pub struct Rig {
    pub backend: Backend,
    pub url: String,
    pub store: SqlStore,
    pub clock: Clock,
    pub cells: BTreeMap<u32, CellHandle>,
    _tmp: Option<tempfile::TempDir>,
    /// CONF-1: every cell (and a director given [`Rig::journal`]) journals into
    /// `journal_dir/journal.jsonl`; when the rig is dropped the journal is judged by the spec's
    /// `Conformance` and every key must conform (the test fails otherwise).
    pub journal: Journal,
    pub journal_dir: tempfile::TempDir,
    /// Set by a test that means its journal to depart (and checks that itself).
    pub skip_conformance: bool,
}

impl Rig {
    /// The file the rig's journal is written to.
    pub fn journal_path(&self) -> std::path::PathBuf {
        self.journal_dir.path().join("journal.jsonl")
    }

    /// CONF-1: stops the cells, flushes the journal and judges it: every key's verdict, and
    /// the journal's text.
    pub fn judge_journal(&mut self) -> (Vec<(String, Verdict)>, String) {
        for cell in self.cells.values() {
            cell.kill();
        }
        self.journal.flush();
        let text = std::fs::read_to_string(self.journal_path()).unwrap_or_default();
        (judge_text(&text), text)
    }

    /// CONF-1: the journal conforms, every key (the check every rig test gets on drop).
    pub fn assert_conforms(&mut self) -> usize {
        let (verdicts, text) = self.judge_journal();
        let departed: Vec<String> = verdicts
            .iter()
            .filter_map(|(key, v)| v.departure().map(|d| format!("{key}: {d:?}")))
            .collect();
        if !departed.is_empty() {
            let kept = std::env::temp_dir().join(format!(
                "switchyard-departed-journal-{}.jsonl",
                std::process::id()
            ));
            let _ = std::fs::write(&kept, &text);
            panic!(
                "CONF-1: the journal departs from the spec (kept at {}):\n{}",
                kept.display(),
                departed.join("\n")
            );
        }
        eprintln!(
            "CONF-1: {} journal keys conform ({} lines)",
            verdicts.len(),
            text.lines().count()
        );
        verdicts.len()
    }
}

/// CONF-1: judges a journal's text with the spec's `Conformance`; a line that does not read
/// fails the test (the writer wrote it).
pub fn judge_text(text: &str) -> Vec<(String, Verdict)> {
    let mut conformance = Conformance::new();
    for (i, line) in text.lines().enumerate() {
        conformance
            .feed_text(i as u64 + 1, line)
            .unwrap_or_else(|e| panic!("journal line {}: {e}", i + 1));
    }
    conformance.finish()
}

impl Drop for Rig {
    fn drop(&mut self) {
        if self.skip_conformance {
            return;
        }
        if std::thread::panicking() {
            // The test failed already: say what the journal shows too, never panic again.
            for cell in self.cells.values() {
                cell.kill();
            }
            self.journal.flush();
            let text = std::fs::read_to_string(self.journal_path()).unwrap_or_default();
            let mut conformance = Conformance::new();
            for (i, line) in text.lines().enumerate() {
                if conformance.feed_text(i as u64 + 1, line).is_err() {
                    eprintln!("CONF-1: journal line {} does not read", i + 1);
                }
            }
            for (key, verdict) in conformance.finish() {
                if let Some(d) = verdict.departure() {
                    eprintln!("CONF-1: {key}: {d:?}");
                }
            }
            return;
        }
        self.assert_conforms();
    }
}

impl Rig {
    pub async fn new(backend: Backend, tag: &str) -> Rig {
        let (url, tmp) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("ho.db").display());
                (url, Some(dir))
            }
            Backend::Postgres => (support_pg::fresh_db(tag).await, None),
        };
        Rig::at_url(backend, url, tmp).await
    }

    /// A rig on the store at `url` (HA-1: a multi-host URL of a formation).
    pub async fn at_url(backend: Backend, url: String, tmp: Option<tempfile::TempDir>) -> Rig {
        let opts = StoreOptions {
            txn_timeout: Duration::from_millis(1_000),
            acquire_timeout: Duration::from_millis(500),
            ..StoreOptions::default()
        };
        // Up to five tries: the tests of a binary start their stores at once (13 SQLite files
        // and 13 PostgreSQL databases migrating together on two cores), and the 500 ms acquire
        // bound the tests keep can pass before the first connection opens (one CI run:
        // `PoolTimedOut` at connect). Connecting is not what any test here checks.
        let mut tries = 0;
        let store = loop {
            tries += 1;
            match SqlStore::connect(&url, opts).await {
                Ok(store) => break store,
                Err(e) if tries < 5 => {
                    eprintln!("rig: store connect try {tries} failed ({e}); again");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("store: {e:?}"),
            }
        };
        store
            .put_settings(&store_config(), true)
            .await
            .expect("settings");
        let journal_dir = tempfile::tempdir().expect("journal dir");
        let journal = Journal::open(
            &JournalConfig {
                path: Some(journal_dir.path().join("journal.jsonl")),
                to_log: false,
                max_lines_per_second: MAX_LINES_PER_SECOND,
            },
            Vec::new(),
        )
        .expect("journal");
        Rig {
            backend,
            url,
            store,
            clock: Clock::default(),
            cells: BTreeMap::new(),
            _tmp: tmp,
            journal,
            journal_dir,
            skip_conformance: false,
        }
    }

    /// The usual shape: a store, the source and the target cell started.
    pub async fn two_cells(backend: Backend, tag: &str) -> Rig {
        let mut rig = Rig::new(backend, tag).await;
        rig.start(SRC).await;
        rig.start(TGT).await;
        rig
    }

    /// [`Rig::two_cells`] and a desktop of `host` registered at the source.
    pub async fn two_cells_and_desktop(
        backend: Backend,
        tag: &str,
        host: u64,
    ) -> (Rig, DesktopHandle) {
        let rig = Rig::two_cells(backend, tag).await;
        let desk = rig.desktop_at(host, SRC).await;
        (rig, desk)
    }

    /// How many attempt rows the store holds for `op` (a handoff is never run twice: 1).
    pub async fn attempts_for(&self, op: OpId) -> usize {
        self.store
            .rows()
            .await
            .expect("rows")
            .attempts
            .keys()
            .filter(|k| **k == op)
            .count()
    }

    /// The master secret of internal requests (what the director holds).
    pub fn internal_secret() -> Secret {
        Secret::new(INTERNAL_SECRET, "internal").expect("secret")
    }

    pub fn cell_config(&self, cell: CellId, capable: bool) -> CellConfig {
        let mut cfg = CellConfig::new(
            cell,
            "127.0.0.1:0".parse().expect("addr"),
            KeyRing::from_secrets(cell, &Self::internal_secret(), None),
            Secret::new(DESKTOP_SECRET, "desktop").expect("secret"),
        );
        cfg.handoff_capable = capable;
        cfg.request_timeout = Duration::from_millis(1_500);
        cfg.reconcile_timeout = Duration::from_millis(1_200);
        cfg.quarantine_retry = Duration::from_millis(300);
        cfg.result_wait = Duration::from_millis(4_000);
        cfg.hard_drain_deadline = Duration::from_millis(500);
        // HO-L2: short, so a restart after a kill (a crash) waits only briefly for the lease;
        // HO-L5: longer than the rig's store outages (a cell whose renewals are not confirmed
        // for the lease stops serving).
        cfg.cell_lease = Duration::from_millis(3_000);
        cfg.lease_drift = Duration::from_millis(100);
        cfg.journal = self.journal.clone();
        cfg
    }

    pub async fn start(&mut self, cell: CellId) -> &CellHandle {
        self.start_with(self.cell_config(cell, true)).await
    }

    pub async fn start_with(&mut self, mut cfg: CellConfig) -> &CellHandle {
        if !cfg.journal.is_on() {
            cfg.journal = self.journal.clone();
        }
        let id = cfg.cell.0;
        // A restart after a kill waits for the dead process's lease to run out (HO-L2).
        let give_up = std::time::Instant::now() + cfg.cell_lease * 4;
        let handle = loop {
            match start_cell(cfg.clone(), self.store.clone(), self.clock.clone()).await {
                Err(CellError::Held(_)) if std::time::Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                started => break started.expect("cell starts"),
            }
        };
        self.cells.insert(id, handle);
        &self.cells[&id]
    }

    pub fn cell(&self, cell: CellId) -> &CellHandle {
        &self.cells[&cell.0]
    }

    pub fn kill(&mut self, cell: CellId) {
        if let Some(c) = self.cells.remove(&cell.0) {
            c.kill();
        }
    }

    pub fn resolvers(&self) -> Vec<String> {
        self.cells.values().map(|c| c.url.clone()).collect()
    }

    pub fn desktop_token(host: u64) -> String {
        Secret::new(DESKTOP_SECRET, "desktop")
            .expect("secret")
            .desktop_token(host)
    }

    pub fn desktop(&self, host: u64) -> DesktopHandle {
        spawn_desktop(DesktopConfig {
            resolvers: self.resolvers(),
            host,
            token: Self::desktop_token(host),
            capable: true,
            measure: Some((TGT.0, 120, 60)),
            pace_min: Duration::from_millis(50),
            pace_max: Duration::from_millis(400),
            ping_every: Duration::from_millis(200),
        })
    }

    /// Start a desktop and wait until it is registered at `cell`.
    pub async fn desktop_at(&self, host: u64, cell: CellId) -> DesktopHandle {
        let mut d = self.desktop(host);
        d.wait_registered(cell.0, WAIT).await.expect("registered");
        d
    }

    /// The director's request for the host's current authority, to `target`.
    pub async fn request(&self, host: u64, target: CellId) -> HandoffRequest {
        let auth = self
            .store
            .authority(HostId(host))
            .await
            .expect("store")
            .expect("host known");
        HandoffRequest::new(
            auth,
            target,
            100,
            Measurement {
                measured_at: self.clock.now(),
                current_rtt_ms: 120,
                target_rtt_ms: 60,
            },
        )
    }

    /// Send a signed request to `cell`'s internal endpoint (timeout: `within`).
    pub async fn send(
        &self,
        cell: CellId,
        req: &HandoffRequest,
        within: Duration,
    ) -> Result<HandoffAnswer, String> {
        let body = serde_json::to_vec(req).expect("json");
        let resp = self.post(cell, HANDOFF_PATH, body, true, within).await?;
        if !resp.status.is_success() {
            return Err(format!("HTTP {}", resp.status));
        }
        serde_json::from_slice(&resp.body).map_err(|e| e.to_string())
    }

    pub async fn post(
        &self,
        cell: CellId,
        path: &str,
        body: Vec<u8>,
        signed: bool,
        within: Duration,
    ) -> Result<http::HttpResponse, String> {
        let headers = if signed {
            self.signed_headers(cell, "POST", path, self.clock.now().0, &body)
        } else {
            Vec::new()
        };
        http::request(
            Method::POST,
            &self.cell(cell).url,
            path,
            &headers,
            body,
            within,
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// SEC-2: the headers of a request to `path` signed for `cell` at `timestamp_ms`, so an
    /// abuse test can replay them to another cell, path or time.
    pub fn signed_headers(
        &self,
        cell: CellId,
        method: &str,
        path: &str,
        timestamp_ms: u64,
        body: &[u8],
    ) -> Vec<(&'static str, String)> {
        sign_request(
            &Self::internal_secret(),
            method,
            path,
            cell,
            self.incarnation_of(cell),
            timestamp_ms,
            body,
        )
        .expect("nonce")
    }

    /// SEC-2a: the incarnation a signer reads for `cell` (its process's, when the rig runs it;
    /// else the first one, for requests aimed at a cell that is not there).
    pub fn incarnation_of(&self, cell: CellId) -> Incarnation {
        self.cells
            .get(&cell.0)
            .map_or(Incarnation(1), |c| c.incarnation)
    }

    /// POST `body` with exactly `headers` to `to`'s `path`.
    pub async fn post_raw(
        &self,
        to: CellId,
        path: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> http::HttpResponse {
        http::request(Method::POST, &self.cell(to).url, path, headers, body, WAIT)
            .await
            .expect("answered")
    }

    pub async fn drain(&self, cell: CellId, host: u64) -> DrainAnswer {
        let body = serde_json::to_vec(&DrainRequest::new(
            host,
            switchyard_core::handoff::DrainReason::Emergency,
        ))
        .expect("json");
        let resp = self
            .post(cell, DRAIN_PATH, body, true, WAIT)
            .await
            .expect("drain answered");
        serde_json::from_slice(&resp.body).expect("drain answer")
    }

    pub fn view(&self, cell: CellId, host: u64) -> Option<HostView> {
        self.cell(cell).host(HostId(host))
    }

    pub fn gated(&self, cell: CellId, host: u64) -> bool {
        self.view(cell, host)
            .is_some_and(|v| matches!(v.gate, GateState::Gated(_)))
    }

    pub fn open(&self, cell: CellId, host: u64) -> bool {
        self.view(cell, host)
            .is_some_and(|v| matches!(v.gate, GateState::Open))
    }

    pub async fn assigned(&self, host: u64) -> CellId {
        self.store
            .authority(HostId(host))
            .await
            .expect("store")
            .expect("host")
            .cell
    }
}

/// Poll `f` until true (bounded).
/// The transaction outcome of a handoff answer (`None`: no durable result yet).
pub fn outcome(a: &HandoffAnswer) -> Option<TxnOutcome> {
    match a.reply {
        HandoffReply::Result(r) => Some(r.outcome),
        _ => None,
    }
}

/// Whether a handoff answer is a committed result.
pub fn committed(a: &HandoffAnswer) -> bool {
    outcome(a).is_some_and(|o| o.is_committed())
}

pub async fn eventually(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A raw mobile client socket, for fine-grained admission tests.
pub struct RawClient {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    Attached(u32),
    Closed(Option<u16>),
}

impl RawClient {
    /// Dial `cell` for `host` with a credential its desktop issued, and read the first
    /// answer: attached, or closed (with its code).
    pub async fn dial(url: &str, host: u64) -> (Option<RawClient>, Arrival) {
        let token = client_token(host);
        Self::dial_with(url, host, Some(&format!("Bearer {token}"))).await
    }

    /// Dial with this `Authorization` header (or none).
    pub async fn dial_with(
        url: &str,
        host: u64,
        authorization: Option<&str>,
    ) -> (Option<RawClient>, Arrival) {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let ws_url = format!(
            "{}{CLIENT_PATH}?host={host}",
            url.replacen("http://", "ws://", 1)
        );
        let mut request = ws_url.into_client_request().expect("request");
        if let Some(a) = authorization {
            request
                .headers_mut()
                .insert("authorization", a.parse().expect("header value"));
        }
        let (mut ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
            .await
            .expect("connect in time")
            .expect("connect");
        let first = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("answer in time");
        match first {
            Some(Ok(Message::Text(t))) => match serde_json::from_str::<CellToClient>(&t) {
                Ok(CellToClient::Attached { cell }) => {
                    (Some(RawClient { ws }), Arrival::Attached(cell))
                }
                other => panic!("unexpected first frame {other:?}"),
            },
            Some(Ok(Message::Close(f))) => (None, Arrival::Closed(f.map(|f| u16::from(f.code)))),
            other => (None, Arrival::Closed(other.and(None))),
        }
    }

    /// Send a mutation and wait for its ack.
    pub async fn mutate(&mut self, id: &str) -> Result<(), String> {
        use futures_util::SinkExt;
        let frame = serde_json::to_string(&ClientFrame::Mutation {
            id: id.to_owned(),
            body: String::new(),
        })
        .expect("json");
        self.ws
            .send(Message::text(frame))
            .await
            .map_err(|e| e.to_string())?;
        loop {
            match tokio::time::timeout(WAIT, self.ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => match serde_json::from_str::<CellToClient>(&t) {
                    Ok(CellToClient::Ack { id: got }) if got == id => return Ok(()),
                    Ok(CellToClient::Undelivered { why, .. }) => return Err(why),
                    _ => {}
                },
                Ok(Some(Ok(Message::Close(f)))) => return Err(format!("closed {f:?}")),
                Ok(Some(Ok(_))) => {}
                other => return Err(format!("{other:?}")),
            }
        }
    }

    /// Wait for the socket to be closed by the cell; returns the close code.
    pub async fn closed(mut self, within: Duration) -> Option<u16> {
        loop {
            match tokio::time::timeout(within, self.ws.next()).await {
                Ok(Some(Ok(Message::Close(f)))) => return f.map(|f| u16::from(f.code)),
                Ok(Some(Ok(_))) => {}
                Ok(_) => return None,
                Err(_) => panic!("socket still open after {within:?}"),
            }
        }
    }

    pub async fn leave(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// Instantiate a test body for both stores.
#[macro_export]
macro_rules! both_stores {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $body(Backend::Sqlite, stringify!($name)).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $body(Backend::Postgres, stringify!($name)).await;
            }
        }
    };
}
