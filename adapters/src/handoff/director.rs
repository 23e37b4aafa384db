//! The director: a periodic, read-only selection pass with the core's policy over keyset pages
//! from a persisted cursor (HO-S1, HO-S2, SCALE-3), then signed requests to the source cells.
//! It decides nothing itself: which page to read next, where the sweep wraps and what a failed
//! page does are `SelectionPass`'s, eligibility is `director::evaluate` (inside it), the op id
//! is the request's UUIDv5, and `DispatchBudget` classifies answers (busy is a deferral, never
//! a failure). A lost response is retried with the very same request (same op id).
//!
//! HO-L3 / SCALE-6: requests run concurrently. The core's `Dispatcher` decides which request
//! goes next (bounded in total and per source cell), which source cell is backed off after it
//! timed out or refused (on its own: the others go on) and when the cursor may move (past a
//! page only once every dispatch of it, and of every page before it, has ended); this loop
//! reads pages, runs the sends (each within one request timeout) and feeds their ends back.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use hyper::Method;
use serde::{Deserialize, Serialize};
use switchyard_core::handoff::store::{Retention, RetentionError, TxnOutcome};
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::{
    check_sweep_period, decide_sweep_lease, LeaseDecision, PageGate, SweepLease, SweepLeaseRow,
};
use switchyard_core::handoff::{
    Admit, CellChange, CellFailure, DispatchLimits, DispatchNext, DispatchTicket, Dispatcher,
};
use switchyard_core::handoff::{
    CellClocks, ClockChange, ClockSample, PassChange, PassHealth, RefusalReason,
    StoreRefusalChange, StoreRefusals, INTERNAL_AUTH_WINDOW_MS,
};
use switchyard_core::handoff::{CellId, HostId, Incarnation, OpId};
use switchyard_core::handoff::{
    Decision, DirectorPolicy, Dispatch, DispatchBudget, DispatchClass, DispatchOutcome, ScanLimits,
    SelectionPass,
};
use switchyard_core::handoff::{RetryStep, StartAttempts, StartFailure, StartRetry};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use super::auth::{self, Secret};
use super::clock::Clock;
use super::http::{self, HttpError};
use super::proto::{HandoffAnswer, RefusedAnswer, HANDOFF_PATH};
use super::store::{SqlStore, Store, StoreFailure};
use crate::journal::Journal;
use crate::stop::StopListener;
use switchyard_core::handoff::{DirectorRecord, Examined};
use switchyard_core::journal::JournalRecord;

#[derive(Debug, Clone)]
pub struct DirectorConfig {
    /// Names this director's persisted page cursor.
    pub id: String,
    pub policy: DirectorPolicy,
    pub limits: ScanLimits,
    /// Transport failures one pass may spend before it stops dispatching.
    pub max_failures: u32,
    /// Bound of one request (the cell waits up to its `result_wait` for the durable result).
    pub request_timeout: Duration,
    /// Re-sends of the same request after a lost response.
    pub retries: usize,
    /// SEC-2: the current master secret; each request is signed with the target cell's key
    /// derived from it.
    pub secret: Secret,
    pub interval: Duration,
    /// HO-L3 / SCALE-6: requests in flight in total and per source cell, pages read ahead of
    /// the cursor, and the backoff of a cell that timed out or refused.
    pub dispatch: DispatchLimits,
}

/// HO-L3 / OPS-2: the source cells as the director's dispatch sees them (the probes read it).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CellHealth {
    /// Backed-off ("stuck") cells: the last failure's reason and the failures of the episode.
    pub stuck: BTreeMap<CellId, (CellFailure, u32)>,
    /// Dispatch failures since start, by source cell and reason (a refusal with the cell's
    /// word).
    pub failures: BTreeMap<(CellId, CellFailure), u64>,
    /// HO-L3: each cell's clock minus the director's (ms, the middle of the measured
    /// interval), and whether it is past half the cell's timestamp window.
    pub clock_offsets: BTreeMap<CellId, (i64, bool)>,
    /// HO-L4: moves the store refused since start, by reason (`AbortReason::name`).
    pub refused: BTreeMap<&'static str, u64>,
    /// HO-L4 / OPS-2: the store's refusal episodes (logged when one begins and when it clears).
    pub refusals: StoreRefusals,
}

/// OPS-1 / OPS-2: how the director's start is reaching its store (the probes read it).
#[derive(Debug, Default)]
pub struct StoreStart {
    failed: AtomicU32,
    reached: AtomicBool,
}

impl StoreStart {
    /// Attempts to reach the store that failed so far.
    #[must_use]
    pub fn failed(&self) -> u32 {
        self.failed.load(Ordering::SeqCst)
    }

    /// The store answered: the director runs.
    #[must_use]
    pub fn reached(&self) -> bool {
        self.reached.load(Ordering::SeqCst)
    }
}

/// OPS-1: open the store, retrying as the core's `StartAttempts` says (a capped doubling
/// delay; give up only where told: a refused store, or the attempts spent). OPS-2: the first
/// failure, and a failure with another cause, at WARN; the others at INFO; each with the next
/// delay. `Err`: the last cause (a single attempt's as it was).
pub async fn open_store_with_retry<F, Fut>(
    schedule: StartRetry,
    status: &StoreStart,
    mut open: F,
) -> Result<SqlStore, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<SqlStore, (StartFailure, String)>>,
{
    let mut attempts = StartAttempts::new(schedule);
    let mut last_cause: Option<String> = None;
    loop {
        let (failure, cause) = match open().await {
            Ok(store) => {
                if attempts.failed() > 0 {
                    info!(
                        failed_attempts = attempts.failed(),
                        "store reachable: the director starts its passes"
                    );
                }
                status.reached.store(true, Ordering::SeqCst);
                return Ok(store);
            }
            Err(e) => e,
        };
        let step = attempts.handle_failure(failure);
        status.failed.store(attempts.failed(), Ordering::SeqCst);
        match step {
            RetryStep::GiveUp { attempts: 1 } => return Err(cause),
            RetryStep::GiveUp { attempts } => {
                return Err(format!("{cause} (gave up after {attempts} attempts)"));
            }
            RetryStep::RetryIn { attempt, delay_ms } => {
                if last_cause.as_deref() != Some(cause.as_str()) {
                    warn!(store_unreachable_attempt = attempt, retry_in_ms = delay_ms, error = %cause, "the director cannot reach the store; retrying (not ready meanwhile)");
                } else {
                    info!(
                        store_unreachable_attempt = attempt,
                        retry_in_ms = delay_ms,
                        "the director still cannot reach the store; retrying"
                    );
                }
                last_cause = Some(cause);
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            }
        }
    }
}

/// OPS-1: what a running director did, summed over its passes (logged when it stops).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DirectorTotals {
    pub passes: u64,
    /// The last pass failed on the store (not ready).
    pub last_pass_failed: bool,
    /// Passes the store failed.
    pub failed_passes: u64,
    pub dispatched: u64,
    pub committed: u64,
    pub failed: u64,
    /// SCALE-3: times a pass reached the end of the host list (a sweep completed).
    pub sweeps_completed: u64,
    /// SCALE-6: passes not run because another director holds the sweep's lease.
    pub standby_passes: u64,
    /// SCALE-6: this director held the sweep's lease at its last pass.
    pub active: bool,
    /// HO-L4: attempt records removed past the retention.
    pub attempts_reaped: u64,
}

impl DirectorTotals {
    fn add(&mut self, pass: &Result<PassReport, StoreFailure>) {
        self.passes += 1;
        self.last_pass_failed = pass.is_err();
        match pass {
            Ok(r) => {
                self.active = r.standby.is_none() && !r.lease_lost;
                self.standby_passes += u64::from(r.standby.is_some());
                self.dispatched += u64::from(r.dispatched);
                self.committed += u64::from(r.committed);
                self.failed += u64::from(r.failed);
                self.sweeps_completed += u64::from(r.sweeps_completed);
                self.attempts_reaped += u64::from(r.attempts_reaped);
            }
            Err(_) => self.failed_passes += 1,
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassReport {
    pub examined: u32,
    pub dispatched: u32,
    pub deferred: u32,
    pub finished: u32,
    pub committed: u32,
    pub skipped: u32,
    pub failed: u32,
    pub ineligible: BTreeMap<String, u32>,
    pub expired_migrations: u32,
    /// HO-L4: attempt records removed past the retention this pass (at most `--reap-batch`).
    #[serde(default)]
    pub attempts_reaped: u32,
    /// HO-L4: the store refused the retention (shorter than its registration timeout):
    /// nothing was removed; why.
    #[serde(default)]
    pub reap_refused: Option<String>,
    pub budget_exhausted: bool,
    /// SCALE-3: pages read, the cursor saved after the last one (the last host examined;
    /// `None`: the start of the list), and whether the pass passed the end of the list.
    pub pages: u32,
    pub cursor: Option<u64>,
    pub sweeps_completed: u32,
    /// Rows the store returned outside the page asked for (skipped by the core).
    pub rejected_rows: u32,
    /// HO-L3: eligible hosts not sent because their source cell is backed off (the sweep
    /// reaches them again).
    pub cell_backed_off: u32,
    /// HO-L3: the source cells backed off when the pass ended.
    pub cells_stuck: Vec<u32>,
    pub sent: Vec<OpId>,
    pub answers: Vec<String>,
    /// SCALE-6: the director holding the sweep's lease when this one stood by (no pass ran).
    #[serde(default)]
    pub standby: Option<String>,
    /// SCALE-6: the lease epoch this pass ran under.
    #[serde(default)]
    pub lease_epoch: Option<u64>,
    /// SCALE-6: the lease ended during the pass (lapsed, or another director took it over):
    /// no page was read after that and the cursor was not moved by this director.
    #[serde(default)]
    pub lease_lost: bool,
    /// EXPLAIN-1 / HO-L3: hosts whose send failed, and how (`send=refused why=stale_timestamp`).
    #[serde(default)]
    pub send_failed: BTreeMap<u64, String>,
    /// HO-L4: moves the store refused in this pass, by reason (`rate_limited`, `store_full`,
    /// ...); each host is tried again at a later pass, with a new attempt.
    #[serde(default)]
    pub refused: BTreeMap<String, u32>,
    /// EXPLAIN-1 / HO-L4: the hosts whose move the store refused, and why
    /// (`moved=no why=store_full`).
    #[serde(default)]
    pub refused_hosts: BTreeMap<u64, String>,
    /// OPS-1: the pass ended early on a stop (at a page boundary); requests queued then were
    /// not sent.
    #[serde(default)]
    pub stopped: bool,
    #[serde(default)]
    pub dropped_at_stop: u32,
}

#[derive(Debug, Clone)]
pub struct Director {
    cfg: DirectorConfig,
    store: Store,
    clock: Clock,
    /// OPS-2: what `run` has done so far (the probes read it).
    totals: Arc<Mutex<DirectorTotals>>,
    /// CONF-1: the pass journal (off unless `--journal`), under `director/<id>`.
    journal: Journal,
    /// HO-L3 / SCALE-6: the dispatch state across passes (the cells' backoffs outlive a pass).
    /// `None`: the configured limits are invalid (every pass fails, naming them).
    dispatcher: Arc<Mutex<Option<Dispatcher>>>,
    /// OPS-2: the cells' health, for the probes.
    health: Arc<Mutex<CellHealth>>,
    /// HO-L3: the cells' clock offsets (the core decides when one is reported).
    clocks: Arc<Mutex<CellClocks>>,
    /// OPS-2: whether passes fail (the core decides when that is logged).
    passes: Arc<Mutex<PassHealth>>,
    /// SCALE-6: this process's claim on the sweep's lease.
    lease: Arc<LeaseSlot>,
    /// HO-L4: the history's retention and the per-pass bounds of the upkeep.
    retention: Retention,
    /// HO-L4: the store's last refusal of the retention (logged once per change).
    reap_refusal: Arc<Mutex<Option<RetentionError>>>,
}

/// SCALE-6: who this director is to the sweep's lease, and what it last held.
#[derive(Debug)]
struct LeaseSlot {
    /// Drawn at start (below 2^63: the store keeps it as a signed 64-bit integer).
    holder: u64,
    /// Shown to operators and to the standbys: `director <id> on <host> pid <pid>`.
    name: String,
    lease_ms: u64,
    /// The row this director last held (released on a graceful stop), and its last role
    /// (OPS-2: a change of role is logged once).
    held: Mutex<(Option<SweepLeaseRow>, Role)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Unknown,
    Active { epoch: u64 },
    Standby { holder: String },
}

/// SCALE-6: the default sweep lease (`--sweep-lease-ms`): a standby takes over within this plus
/// one pass interval of the holder's last renewal.
pub const DEFAULT_SWEEP_LEASE_MS: u64 = 30_000;

fn draw_holder() -> u64 {
    let mut bytes = [0u8; 8];
    // No entropy at all is not worth stopping a director for: the pid and the clock still
    // tell two processes apart.
    if crate::machine::fill_random(&mut bytes).is_err() {
        let t = crate::machine::unix_ms();
        bytes = (t ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
    }
    u64::from_le_bytes(bytes) >> 1
}

/// Why one send failed, and how (HO-L3: the cell's backoff reason, logged once per change).
type SendFailure = (CellFailure, String);

/// One ended send: its ticket, request, outcome, (if it failed) why, and (if the cell
/// answered with a `Date`) the clock sample.
type Ended = (
    DispatchTicket,
    HandoffRequest,
    DispatchOutcome,
    Option<SendFailure>,
    Option<ClockSample>,
);

/// The sends in flight, each task's ticket and request kept aside, so a task that panicked
/// still ends its ticket (as a failed send) and the pass never waits for it forever.
#[derive(Default)]
struct Flights {
    set: JoinSet<Ended>,
    sent: std::collections::HashMap<tokio::task::Id, (DispatchTicket, HandoffRequest)>,
}

impl Flights {
    fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    async fn join_next_with_id(
        &mut self,
    ) -> Option<Result<(tokio::task::Id, Ended), tokio::task::JoinError>> {
        self.set.join_next_with_id().await
    }

    fn try_join_next_with_id(
        &mut self,
    ) -> Option<Result<(tokio::task::Id, Ended), tokio::task::JoinError>> {
        self.set.try_join_next_with_id()
    }

    /// `None` only for a task this set never spawned (it cannot happen: each id is kept at
    /// spawn, before any join).
    fn ended(
        &mut self,
        done: Result<(tokio::task::Id, Ended), tokio::task::JoinError>,
    ) -> Option<Ended> {
        match done {
            Ok((id, ended)) => {
                self.sent.remove(&id);
                Some(ended)
            }
            Err(e) => self.sent.remove(&e.id()).map(|(ticket, req)| {
                (
                    ticket,
                    req,
                    DispatchOutcome::TransportFailed,
                    Some((
                        CellFailure::Unreachable,
                        format!("the send task ended: {e}"),
                    )),
                    None,
                )
            }),
        }
    }
}

enum SendError {
    Http(HttpError),
    /// The cell answered with an error status: its reason (the cell's word, bounded by the
    /// core), and the status and body (bounded) for the log.
    Refused(RefusalReason, String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Http(e) => write!(f, "{e}"),
            SendError::Refused(_, why) => write!(f, "refused: {why}"),
        }
    }
}

/// HO-L3: the cell's reason of a refusal answered with `status` and `body`: its word when it
/// answered `{"refused": word}`, a known word only (the core bounds it).
fn refusal_reason(status: u16, body: &[u8]) -> RefusalReason {
    let answer = serde_json::from_slice::<RefusedAnswer>(body).ok();
    RefusalReason::of_answer(status, answer.as_ref().map(|a| a.refused.as_str()))
}

/// HO-L3: the clock sample of an answer: its `Date` (the cell's clock, to the second) against
/// the director's clock at send and at answer. `None` without a readable `Date`.
fn clock_sample(headers: &hyper::HeaderMap, sent_ms: u64, received_ms: u64) -> Option<ClockSample> {
    let date = headers.get(hyper::header::DATE)?.to_str().ok()?;
    let at = httpdate::parse_http_date(date).ok()?;
    let date_s = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    Some(ClockSample {
        sent_ms,
        received_ms,
        date_s,
    })
}

/// Send one signed request; transport failures (lost responses) are retried with the same
/// body, so the same op id, at most `retries` times (each send signed with a fresh nonce).
pub async fn send_request(
    base: &str,
    secret: &Secret,
    incarnation: Incarnation,
    req: &HandoffRequest,
    timeout: Duration,
    retries: usize,
    clock: &Clock,
) -> DispatchOutcome {
    send_classified(base, secret, incarnation, req, timeout, retries, clock)
        .await
        .0
}

/// What one send came to: its outcome, why it failed (if it did), and the clock sample of the
/// last answer (if the cell answered with a `Date`).
type Sent = (DispatchOutcome, Option<SendFailure>, Option<ClockSample>);

/// [`send_request`], also saying why it failed (HO-L3: the cell's backoff reason). A timeout
/// or a refusal is not retried (the cell is backed off; the sweep reaches the host again with
/// the same op id); a connection that failed is, within `retries`.
async fn send_classified(
    base: &str,
    secret: &Secret,
    incarnation: Incarnation,
    req: &HandoffRequest,
    timeout: Duration,
    retries: usize,
    clock: &Clock,
) -> Sent {
    let Ok(body) = serde_json::to_vec(req) else {
        return (
            DispatchOutcome::TransportFailed,
            Some((CellFailure::Unreachable, "unencodable request".into())),
            None,
        );
    };
    // HO-L3: the last answer's clock sample (any status: a refusal's `Date` tells too).
    let sample: Mutex<Option<ClockSample>> = Mutex::new(None);
    let once = || async {
        // SEC-2: each send (a retry included) is signed anew for the source cell and this
        // path, with a fresh nonce: the cell refuses a nonce it has seen, so a resent copy of
        // the same signed bytes would be refused as a replay. The op id in the body is what
        // makes the retry the same request. SEC-2a: signed for the cell process the store
        // names (its incarnation), so a copy replayed after the cell restarts is refused.
        let cell = req.source.cell;
        let headers = auth::sign_request(
            secret,
            Method::POST.as_str(),
            HANDOFF_PATH,
            cell,
            incarnation,
            clock.now().0,
            &body,
        )
        .map_err(|detail| {
            SendError::Http(HttpError::Transport {
                url: base.to_owned(),
                detail,
            })
        })?;
        let sent_ms = clock.now().as_ms();
        let resp = http::request(
            Method::POST,
            base,
            HANDOFF_PATH,
            &headers,
            body.clone(),
            timeout,
        )
        .await
        .map_err(SendError::Http)?;
        if let Some(s) = clock_sample(&resp.headers, sent_ms, clock.now().as_ms()) {
            *sample.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
        }
        if !resp.status.is_success() {
            // The cell's reason (its word, bounded by the core), and its body (bounded,
            // printable only) for the log.
            let why = refusal_reason(resp.status.as_u16(), &resp.body);
            let text = String::from_utf8_lossy(&resp.body);
            let body: String = text
                .trim()
                .chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect();
            return Err(SendError::Refused(
                why,
                format!("HTTP {} {body}", resp.status),
            ));
        }
        serde_json::from_slice::<HandoffAnswer>(&resp.body).map_err(|e| {
            SendError::Http(HttpError::Transport {
                url: base.to_owned(),
                detail: format!("malformed answer: {e}"),
            })
        })
    };
    let policy = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(retries)
        .with_jitter()
        .with_jitter_seed(crate::machine::jitter_seed());
    let sent = once
        .retry(policy)
        .sleep(tokio::time::sleep)
        .when(|e| matches!(e, SendError::Http(HttpError::Transport { .. })))
        .notify(|e, d| debug!(error = %e, retry_in = ?d, "handoff request retried (same op id)"));
    // Each request, its retries included, ends within one request timeout.
    let ended = tokio::time::timeout(timeout, sent).await;
    let sample = *sample.lock().unwrap_or_else(|e| e.into_inner());
    match ended {
        Ok(Ok(answer)) => (DispatchOutcome::Answered(answer.reply), None, sample),
        Ok(Err(e)) => {
            // OPS-2: logged at WARN once per change of the cell's state, by the director.
            debug!(op = %req.op_id, error = %e, "handoff request failed");
            let why = match e {
                SendError::Http(HttpError::Timeout(_)) => CellFailure::Timeout,
                SendError::Refused(why, _) => CellFailure::Refused(why),
                SendError::Http(_) => CellFailure::Unreachable,
            };
            (
                DispatchOutcome::TransportFailed,
                Some((why, e.to_string())),
                sample,
            )
        }
        Err(_) => (
            DispatchOutcome::TransportFailed,
            Some((
                CellFailure::Timeout,
                format!("no answer from {base} within {timeout:?}"),
            )),
            sample,
        ),
    }
}

impl Director {
    #[must_use]
    pub fn new(cfg: DirectorConfig, store: impl Into<Store>, clock: Clock) -> Director {
        let store = store.into();
        let dispatcher = Dispatcher::new(cfg.dispatch).ok();
        // HO-L4: a refusal episode clears at a commit a pass or more after its last refusal.
        let quiet_ms = u64::try_from(cfg.interval.as_millis()).unwrap_or(u64::MAX);
        Director {
            cfg,
            store,
            clock,
            totals: Arc::default(),
            journal: Journal::off(),
            dispatcher: Arc::new(Mutex::new(dispatcher)),
            health: Arc::new(Mutex::new(CellHealth {
                refusals: StoreRefusals::new(quiet_ms),
                ..CellHealth::default()
            })),
            clocks: Arc::new(Mutex::new(CellClocks::new(INTERNAL_AUTH_WINDOW_MS))),
            passes: Arc::default(),
            lease: Arc::new(LeaseSlot {
                holder: draw_holder(),
                name: String::new(),
                lease_ms: DEFAULT_SWEEP_LEASE_MS,
                held: Mutex::new((None, Role::Unknown)),
            }),
            retention: Retention::DEFAULT,
            reap_refusal: Arc::default(),
        }
        .named_holder(None)
    }

    /// HO-L4: the attempt retention, the reap batch and the expiries per pass (the caller
    /// validated them with `Retention::validate`; the store re-checks the retention against
    /// its registration timeout at every reap).
    #[must_use]
    pub fn with_retention(mut self, retention: Retention) -> Director {
        self.retention = retention;
        self
    }

    /// HO-L4: the store's answer to a reap, its refusal logged once per change.
    fn note_reap(&self, answer: Result<u32, RetentionError>, report: &mut PassReport) {
        let refusal = answer.err();
        match answer {
            Ok(n) => report.attempts_reaped = n,
            Err(e) => report.reap_refused = Some(e.to_string()),
        }
        let mut last = self.reap_refusal.lock().unwrap_or_else(|e| e.into_inner());
        if *last != refusal {
            match &refusal {
                Some(e) => warn!(error = %e, "attempt records are not removed (HO-L4)"),
                None => info!("attempt records are removed past the retention again (HO-L4)"),
            }
            *last = refusal;
        }
    }

    /// SCALE-6: this director's sweep lease (`--sweep-lease-ms`; the caller validated it with
    /// `validate_sweep_lease` against the store's transaction bound).
    #[must_use]
    pub fn with_sweep_lease_ms(mut self, lease_ms: u64) -> Director {
        let slot = LeaseSlot {
            holder: self.lease.holder,
            name: self.lease.name.clone(),
            lease_ms,
            held: Mutex::new((None, Role::Unknown)),
        };
        self.lease = Arc::new(slot);
        self
    }

    /// The name the lease row shows for this process (`host`: the machine's name, if known).
    #[must_use]
    pub fn named_holder(mut self, host: Option<&str>) -> Director {
        let name = format!(
            "director {} on {} pid {}",
            self.cfg.id,
            host.unwrap_or("?"),
            std::process::id()
        );
        let slot = LeaseSlot {
            holder: self.lease.holder,
            name: name.chars().take(200).collect(),
            lease_ms: self.lease.lease_ms,
            held: Mutex::new((None, Role::Unknown)),
        };
        self.lease = Arc::new(slot);
        self
    }

    /// SCALE-6: claim or renew the sweep's lease before a pass (the core decides); `None`:
    /// another director holds it (the report says which), no pass runs.
    async fn claim_lease(
        &self,
        report: &mut PassReport,
    ) -> Result<Option<SweepLease>, StoreFailure> {
        let now = self.clock.now().0;
        let seen = self.store.load_sweep_lease(&self.cfg.id).await?;
        let (seen_row, seen_name) = match seen {
            Some((row, name)) => (Some(row), name),
            None => (None, String::new()),
        };
        let page_bound = u64::try_from(self.store.txn_timeout().as_millis()).unwrap_or(u64::MAX);
        let held = match decide_sweep_lease(self.lease.holder, now, seen_row, self.lease.lease_ms) {
            LeaseDecision::Standby { .. } => None,
            LeaseDecision::Claim {
                seen,
                new,
                takeover,
            } => {
                let won = self
                    .store
                    .claim_sweep_lease(&self.cfg.id, seen, new, &self.lease.name)
                    .await?;
                if won && takeover {
                    info!(sweep = %self.cfg.id, from = %seen_name, epoch = new.epoch, "sweep lease taken over: the previous director's lease lapsed");
                }
                won.then(|| SweepLease::held(new, self.lease.lease_ms, page_bound))
            }
        };
        let role = match &held {
            Some(l) => Role::Active {
                epoch: l.row().epoch,
            },
            None => {
                let holder = if seen_name.is_empty() {
                    "another director".to_owned()
                } else {
                    seen_name
                };
                report.standby = Some(holder.clone());
                Role::Standby { holder }
            }
        };
        report.lease_epoch = held.map(|l| l.row().epoch);
        self.set_role(role, held.map(|l| l.row()));
        Ok(held)
    }

    /// OPS-2: one line per change of this director's role in the sweep.
    fn set_role(&self, role: Role, row: Option<SweepLeaseRow>) {
        let mut held = self.lease.held.lock().unwrap_or_else(|e| e.into_inner());
        if row.is_some() || !matches!(role, Role::Active { .. }) {
            held.0 = row;
        }
        if held.1 == role {
            return;
        }
        match &role {
            Role::Active { epoch } => {
                info!(sweep = %self.cfg.id, epoch, holder = %self.lease.name, "this director holds the sweep: it runs the passes")
            }
            Role::Standby { holder } => {
                info!(sweep = %self.cfg.id, holder = %holder, "standing by: another director holds the sweep (this one takes over once its lease lapses)")
            }
            Role::Unknown => {}
        }
        held.1 = role;
    }

    /// SCALE-6: give the sweep's lease up (a graceful stop, the end of `--once`), so a standby
    /// takes over at its next pass instead of after the lease.
    pub async fn release_lease(&self) {
        let row = self.lease.held.lock().unwrap_or_else(|e| e.into_inner()).0;
        let Some(row) = row else { return };
        let now = self.clock.now().0;
        let released = SweepLeaseRow {
            until_ms: now.min(row.until_ms),
            ..row
        };
        match self
            .store
            .claim_sweep_lease(&self.cfg.id, Some(row), released, &self.lease.name)
            .await
        {
            Ok(true) => info!(sweep = %self.cfg.id, "sweep lease released"),
            Ok(false) => {}
            Err(e) => {
                debug!(error = %e, "sweep lease not released (it lapses on its own)");
            }
        }
        self.lease.held.lock().unwrap_or_else(|e| e.into_inner()).0 = None;
    }

    /// SCALE-6 / HO-3: how long a sweep of the store's hosts takes at these limits, against
    /// the freshness window (logged at start; WARN when a measurement can go stale unseen).
    pub async fn check_sweep_period(&self) -> Result<u64, StoreFailure> {
        let hosts = self.store.host_count().await?;
        let interval = u64::try_from(self.cfg.interval.as_millis()).unwrap_or(u64::MAX);
        let window = self.cfg.policy.policy.freshness_window_ms;
        match check_sweep_period(hosts, &self.cfg.limits, interval, window) {
            Ok(period) => {
                info!(
                    hosts,
                    sweep_period_ms = period,
                    freshness_window_ms = window,
                    "sweep period within the freshness window"
                );
                Ok(period)
            }
            Err(period) => {
                warn!(hosts, sweep_period_ms = period, freshness_window_ms = window, "a sweep takes longer than the freshness window: measurements can go stale before the director sees them; raise --page-size/--max-pages or lower --interval-ms");
                Ok(period)
            }
        }
    }

    /// HO-L3 / OPS-2: the source cells' health as the dispatch sees it, for the probes.
    #[must_use]
    pub fn health(&self) -> Arc<Mutex<CellHealth>> {
        self.health.clone()
    }

    /// Run `f` on the dispatcher (`None`: invalid limits).
    fn with_dispatcher<T>(&self, f: impl FnOnce(&mut Dispatcher) -> T) -> Option<T> {
        self.dispatcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .map(f)
    }

    /// CONF-1: this director journaling its passes to `journal` (a `Start` line first).
    #[must_use]
    pub fn with_journal(mut self, journal: Journal) -> Director {
        self.journal = journal;
        self.note(|| DirectorRecord::Start);
        self
    }

    fn note(&self, rec: impl FnOnce() -> DirectorRecord) {
        if self.journal.is_on() {
            let key = format!("director/{}", self.cfg.id);
            self.journal
                .record(&key, self.clock.now(), || JournalRecord::Director(rec()));
        }
    }

    /// CONF-1: writes what the journal buffered (at the end of a run).
    pub fn flush_journal(&self) {
        self.journal.flush();
    }

    /// OPS-2: the running totals, for the probes.
    #[must_use]
    pub fn totals(&self) -> Arc<Mutex<DirectorTotals>> {
        self.totals.clone()
    }

    /// One pass: HO-A6 recovery of expired migrations, then the read-only selection over
    /// keyset pages from the persisted cursor, dispatching each eligible request. SCALE-3: the
    /// cursor is saved after every page, so a pass that fails (a page read, a save, a store
    /// read while dispatching) leaves the cursor after the last page it completed and the
    /// next pass starts with the page that failed.
    pub async fn pass(&self) -> Result<PassReport, StoreFailure> {
        self.pass_recording(None, None).await
    }

    /// OPS-1: [`pass`](Self::pass) that ends early, at a page boundary, once `stop` says
    /// stop: no page is read after it, the requests queued then are not sent (their hosts are
    /// examined again by the next pass, same op ids), the requests in flight end (each within
    /// one request timeout), and the cursor is saved past the pages whose dispatches all
    /// ended, never past a page with a request not sent.
    pub async fn pass_until(&self, stop: &StopListener) -> Result<PassReport, StoreFailure> {
        self.pass_recording(None, Some(stop)).await
    }

    /// EXPLAIN-1: [`pass`](Self::pass), also handing each examined host's decision (the
    /// core's verdict and the numbers it rests on) to `examined`, in the order examined, before
    /// it is acted on; a pass that fails keeps what it examined. Bounded by the pass's scan
    /// limits (one decision per host examined). `director --once --explain` prints them.
    pub async fn pass_explained(
        &self,
        examined: &mut Vec<Decision>,
    ) -> Result<PassReport, StoreFailure> {
        self.pass_recording(Some(examined), None).await
    }

    async fn pass_recording(
        &self,
        mut examined: Option<&mut Vec<Decision>>,
        stop: Option<&StopListener>,
    ) -> Result<PassReport, StoreFailure> {
        let mut report = PassReport::default();
        self.note(|| DirectorRecord::Pass);
        let Some(idle) = self.with_dispatcher(|d| d.idle()) else {
            return Err(StoreFailure::BadRow(format!(
                "invalid dispatch limits: {:?}",
                self.cfg.dispatch.validate()
            )));
        };
        debug_assert!(idle, "a pass starts with nothing in flight");
        // SCALE-6: one director per sweep: the others stand by (no pass, nothing written).
        let Some(mut lease) = self.claim_lease(&mut report).await? else {
            return Ok(report);
        };
        let now = self.clock.now();
        // HO-L4: in-flight slots freed at the rate they fill, then the history kept bounded.
        let max_expired =
            usize::try_from(self.retention.max_expired_per_pass).unwrap_or(usize::MAX);
        let expired = self.store.expire_migrations_up_to(now, max_expired).await?;
        report.expired_migrations = u32::try_from(expired.len()).unwrap_or(u32::MAX);
        let reaped = self
            .store
            .reap_attempts(
                now,
                self.retention.attempt_retention_ms,
                self.retention.reap_batch,
            )
            .await?;
        self.note_reap(reaped, &mut report);
        let cursor = self.store.load_cursor(&self.cfg.id).await?;
        report.cursor = cursor.after.map(|h| h.0);
        let mut pass = match SelectionPass::begin(cursor, self.cfg.limits) {
            Ok(p) => p,
            Err(e) => {
                return Err(StoreFailure::BadRow(format!("invalid scan limits: {e:?}")));
            }
        };
        let mut budget = DispatchBudget::new(self.cfg.max_failures);
        let mut urls: BTreeMap<CellId, Option<(String, Incarnation)>> = BTreeMap::new();
        let mut flights = Flights::default();
        // The first store failure: no page is read after it; the sends in flight end, the
        // cursor moves past the pages they complete, then the pass fails with it.
        let mut failure: Option<StoreFailure> = None;
        // SCALE-6: the lease may no longer cover a page read (or another director took it
        // over): no page is read after that; the sends in flight still end.
        let mut lease_over = false;
        // OPS-1: once a stop is asked, nothing queued is sent and no page is read.
        let mut stopping = false;
        loop {
            while let Some(done) = flights.try_join_next_with_id() {
                if let Some(done) = flights.ended(done) {
                    self.on_ended(done, &mut budget, &mut report);
                }
            }
            self.check_stop(stop, &mut stopping, &mut report);
            let mut may_read = failure.is_none()
                && !lease_over
                && !stopping
                && self.with_dispatcher(|d| d.may_read_page()).unwrap_or(false);
            if may_read && pass.poll_query().is_some() {
                match lease.gate(self.clock.now().0) {
                    PageGate::Read => {}
                    PageGate::Renew => {
                        let row = lease.row();
                        let renewal = lease.renewal(self.clock.now().0);
                        match self
                            .store
                            .claim_sweep_lease(&self.cfg.id, Some(row), renewal, &self.lease.name)
                            .await
                        {
                            Ok(true) => {
                                lease.handle_renewed(renewal);
                                self.set_role(
                                    Role::Active {
                                        epoch: renewal.epoch,
                                    },
                                    Some(renewal),
                                );
                            }
                            Ok(false) => {
                                report.lease_lost = true;
                                lease_over = true;
                            }
                            Err(e) => {
                                failure = Some(e);
                            }
                        }
                        continue;
                    }
                    PageGate::Stop => {
                        lease_over = true;
                        may_read = false;
                    }
                }
            }
            if let Some(q) = pass.poll_query().filter(|_| may_read) {
                if let Err(e) = self
                    .read_page(
                        q,
                        &mut pass,
                        &mut budget,
                        &mut urls,
                        &mut report,
                        &mut examined,
                    )
                    .await
                {
                    failure = Some(e);
                }
                // The page's requests go now, while the next page is read.
                self.check_stop(stop, &mut stopping, &mut report);
                self.launch(&mut flights, &urls, &mut budget, &mut report);
                continue;
            }
            self.launch(&mut flights, &urls, &mut budget, &mut report);
            if let Some(c) = self.with_dispatcher(Dispatcher::poll_cursor).flatten() {
                // SCALE-3 / HO-L3: only past pages whose every dispatch ended.
                // SCALE-6: only while this director still holds the sweep.
                match self
                    .store
                    .save_cursor_held(&self.cfg.id, c, lease.row(), self.clock.now().0)
                    .await
                {
                    Ok(true) => report.cursor = c.after.map(|h| h.0),
                    Ok(false) => {
                        if !report.lease_lost {
                            warn!(sweep = %self.cfg.id, "sweep lease lost during a pass (lapsed or taken over): this director reads no more pages and leaves the cursor to the holder");
                        }
                        report.lease_lost = true;
                        lease_over = true;
                    }
                    Err(e) => {
                        failure.get_or_insert(e);
                    }
                }
            }
            let reading_over =
                failure.is_some() || lease_over || stopping || pass.poll_query().is_none();
            if flights.is_empty() {
                if reading_over {
                    break;
                }
                continue;
            }
            if reading_over || !may_read {
                if let Some(done) = flights.join_next_with_id().await {
                    if let Some(done) = flights.ended(done) {
                        self.on_ended(done, &mut budget, &mut report);
                    }
                }
            }
        }
        // Nothing is in flight any more: whatever is left queued is skipped.
        self.launch(&mut flights, &urls, &mut budget, &mut report);
        report.cells_stuck = self
            .with_dispatcher(|d| d.backoffs().keys().map(|c| c.0).collect())
            .unwrap_or_default();
        match failure {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    /// OPS-1: the first time `stop` says stop, the dispatcher drops what is queued (the core
    /// keeps the cursor before those pages).
    fn check_stop(
        &self,
        stop: Option<&StopListener>,
        stopping: &mut bool,
        report: &mut PassReport,
    ) {
        if *stopping || !stop.is_some_and(StopListener::is_stopped) {
            return;
        }
        *stopping = true;
        let dropped = self
            .with_dispatcher(Dispatcher::handle_stop)
            .unwrap_or_default();
        report.stopped = true;
        report.dropped_at_stop = u32::try_from(dropped.len()).unwrap_or(u32::MAX);
        info!(
            not_sent = dropped.len(),
            "director stopping: no page is read, queued requests are not sent, the requests in flight end"
        );
    }

    /// Read one page, decide on its hosts (the core), and hand its requests to the dispatcher.
    #[allow(clippy::too_many_arguments)]
    async fn read_page(
        &self,
        q: switchyard_core::handoff::PageQuery,
        pass: &mut SelectionPass,
        budget: &mut DispatchBudget,
        urls: &mut BTreeMap<CellId, Option<(String, Incarnation)>>,
        report: &mut PassReport,
        examined: &mut Option<&mut Vec<Decision>>,
    ) -> Result<(), StoreFailure> {
        let rows = match self.store.candidate_page(q).await {
            Ok(rows) => rows,
            Err(e) => {
                pass.handle_page_failed();
                return Err(e);
            }
        };
        let decisions = pass.handle_page(self.clock.now(), &self.cfg.policy, &rows);
        if let Some(examined) = examined.as_deref_mut() {
            examined.extend_from_slice(&decisions);
        }
        report.pages = pass.pages_read();
        report.sweeps_completed = pass.sweeps_completed();
        report.rejected_rows = pass.rejected_rows();
        let dispatches: Vec<Dispatch> = decisions.iter().map(|d| budget.dispatch(d)).collect();
        // SEC-2a: the URL and the incarnation of the process holding each source cell now,
        // read before any of the page's requests is handed over (a failed read fails the
        // pass with nothing of this page queued: the cursor stays before it).
        for d in &dispatches {
            if let Dispatch::Send(req) = d {
                let cell = req.source.cell;
                if let std::collections::btree_map::Entry::Vacant(slot) = urls.entry(cell) {
                    let u = self
                        .store
                        .cell_info(cell)
                        .await?
                        .map(|c| (c.internal_url, c.row.incarnation))
                        .filter(|(u, _)| !u.is_empty());
                    slot.insert(u);
                }
            }
        }
        let sends: Vec<HandoffRequest> = dispatches
            .iter()
            .filter_map(|d| match d {
                Dispatch::Send(req) => Some(*req),
                _ => None,
            })
            .collect();
        let now = self.clock.now();
        let admits = self
            .with_dispatcher(|d| d.handle_page(now, pass.cursor(), &sends).1)
            .unwrap_or_default();
        let mut admits = admits.into_iter();
        for (decision, dispatch) in decisions.iter().zip(dispatches) {
            report.examined += 1;
            let admit = match dispatch {
                Dispatch::Send(_) => admits.next(),
                _ => None,
            };
            self.note(|| DirectorRecord::Examined {
                host: decision.host,
                decision: match (&dispatch, admit) {
                    (Dispatch::Send(_), Some(Admit::Queued)) => Examined::Dispatch,
                    (Dispatch::Ineligible(why), _) => Examined::Ineligible {
                        rule: why.name().to_owned(),
                    },
                    _ => Examined::Held,
                },
            });
            match (dispatch, admit) {
                (Dispatch::Ineligible(why), _) => {
                    // Keyed by the stable name: reports outlive variant renames.
                    *report.ineligible.entry(why.name().to_owned()).or_default() += 1;
                }
                (Dispatch::Held, _) => report.budget_exhausted = true,
                (Dispatch::Send(_), Some(Admit::CellBackedOff { .. })) => {
                    report.cell_backed_off += 1;
                }
                (Dispatch::Send(_), _) => {}
            }
        }
        Ok(())
    }

    /// Send every request the dispatcher lets go now, each in its own task bounded by one
    /// request timeout.
    fn launch(
        &self,
        flights: &mut Flights,
        urls: &BTreeMap<CellId, Option<(String, Incarnation)>>,
        budget: &mut DispatchBudget,
        report: &mut PassReport,
    ) {
        loop {
            let now = self.clock.now();
            let Some(next) = self.with_dispatcher(|d| d.poll_send(now)).flatten() else {
                return;
            };
            let (ticket, req) = match next {
                DispatchNext::Send(ticket, req) => (ticket, req),
                DispatchNext::Skip(_) => {
                    report.cell_backed_off += 1;
                    continue;
                }
            };
            let Some((url, incarnation)) = urls.get(&req.source.cell).cloned().flatten() else {
                let why = (
                    CellFailure::NoAddress,
                    format!("the store names no address for cell {}", req.source.cell.0),
                );
                self.on_ended(
                    (
                        ticket,
                        req,
                        DispatchOutcome::TransportFailed,
                        Some(why),
                        None,
                    ),
                    budget,
                    report,
                );
                continue;
            };
            report.dispatched += 1;
            report.sent.push(req.op_id);
            self.note(|| DirectorRecord::Sent {
                op_id: req.op_id,
                source: req.source,
                target: req.target,
            });
            let secret = self.cfg.secret.clone();
            let clock = self.clock.clone();
            let timeout = self.cfg.request_timeout;
            let retries = self.cfg.retries;
            let id = flights
                .set
                .spawn(crate::machine::Here::now().keep(async move {
                    let (outcome, why, sample) =
                        send_classified(&url, &secret, incarnation, &req, timeout, retries, &clock)
                            .await;
                    (ticket, req, outcome, why, sample)
                }))
                .id();
            flights.sent.insert(id, (ticket, req));
        }
    }

    /// HO-L4: a move ended with `outcome`: a refusal is named in the pass's report, counted by
    /// reason, and its episode logged when it begins and when it clears (OPS-2).
    fn on_move_result(&self, host: HostId, outcome: &TxnOutcome, report: &mut PassReport) {
        if let Some(reason) = outcome.refusal() {
            let why = reason.name();
            *report.refused.entry(why.to_owned()).or_default() += 1;
            report
                .refused_hosts
                .insert(host.0, format!("moved=no why={why}"));
        }
        let now = self.clock.now();
        let changes = {
            let mut health = self.health.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(reason) = outcome.refusal() {
                *health.refused.entry(reason.name()).or_default() += 1;
            }
            health.refusals.handle_result(now, outcome)
        };
        for change in changes {
            match change {
                StoreRefusalChange::Refusing { reason } => warn!(
                    reason,
                    host = host.0,
                    "the store refuses moves ({reason}): refused hosts are tried again at later \
                     passes (switchyard_director_moves_refused_total)"
                ),
                StoreRefusalChange::Cleared { reason, refused } => info!(
                    reason,
                    refused, "the store no longer refuses moves ({reason}): a move committed"
                ),
            }
        }
    }

    /// One send ended: count it (the budget classifies), feed it to the dispatcher, and log
    /// the source cell's change of state once (OPS-2).
    fn on_ended(&self, ended: Ended, budget: &mut DispatchBudget, report: &mut PassReport) {
        let (ticket, req, outcome, why, sample) = ended;
        if let DispatchOutcome::Answered(reply) = &outcome {
            report.answers.push(answer_word(reply));
            if let HandoffReply::Result(r) = reply {
                if r.outcome.is_committed() {
                    report.committed += 1;
                }
                self.on_move_result(req.source.host, &r.outcome, report);
            }
        }
        let class = budget.handle_outcome(&outcome);
        self.note(|| DirectorRecord::Answer {
            op_id: req.op_id,
            outcome,
            class,
        });
        match class {
            DispatchClass::Deferred => report.deferred += 1,
            DispatchClass::Finished => report.finished += 1,
            DispatchClass::Skipped => report.skipped += 1,
            DispatchClass::Failed => report.failed += 1,
        }
        let cell = req.source.cell;
        if let Some(sample) = sample {
            self.on_clock(cell, sample);
        }
        if let Some((failure, _)) = &why {
            report
                .send_failed
                .insert(req.source.host.0, send_failed_word(*failure));
        }
        let result = match (&outcome, &why) {
            (DispatchOutcome::Answered(_), _) => Ok(()),
            (DispatchOutcome::TransportFailed, Some((reason, _))) => Err(*reason),
            (DispatchOutcome::TransportFailed, None) => Err(CellFailure::Unreachable),
        };
        let now = self.clock.now();
        let (change, stuck) = self
            .with_dispatcher(|d| {
                let change = d.handle_ended(now, ticket, result);
                let stuck: BTreeMap<CellId, (CellFailure, u32)> = d
                    .backoffs()
                    .iter()
                    .map(|(c, b)| (*c, (b.reason, b.failures)))
                    .collect();
                (change, stuck)
            })
            .unwrap_or_default();
        {
            let mut health = self.health.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(reason) = result {
                *health.failures.entry((cell, reason)).or_default() += 1;
            }
            health.stuck = stuck;
        }
        match change {
            Some(CellChange::Stuck {
                cell,
                reason,
                until,
            }) => {
                let detail = why.map(|(_, d)| d).unwrap_or_default();
                let refusal = reason.refusal();
                let offset = self
                    .health
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clock_offsets
                    .get(&cell)
                    .map(|(ms, _)| *ms);
                warn!(
                    cell = cell.0,
                    reason = reason.name(),
                    // HO-L3: the cell's own word for a refusal, and what to check.
                    why = refusal.map(RefusalReason::name),
                    hint = refusal.map(RefusalReason::hint),
                    clock_offset_ms = offset,
                    error = %detail,
                    retry_in_ms = until.since_ms(now),
                    "handoff source cell stuck: backed off, its hosts wait; the other cells go on"
                );
            }
            Some(CellChange::Recovered { cell, failures }) => info!(
                cell = cell.0,
                failures, "handoff source cell answers again: dispatching to it resumes"
            ),
            None => {}
        }
    }

    /// HO-L3: a cell answered with a `Date`: its clock offset, and its change reported once
    /// (the core decides).
    fn on_clock(&self, cell: CellId, sample: ClockSample) {
        let (change, offsets) = {
            let mut clocks = self.clocks.lock().unwrap_or_else(|e| e.into_inner());
            let change = clocks.handle_answer(cell, sample);
            let offsets: BTreeMap<CellId, (i64, bool)> = clocks
                .offsets()
                .iter()
                .map(|(c, (o, skewed))| (*c, (o.estimate_ms(), *skewed)))
                .collect();
            (change, offsets)
        };
        self.health
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clock_offsets = offsets;
        match change {
            Some(ClockChange::Skewed {
                cell,
                offset,
                warn_ms,
                window_ms,
            }) => warn!(
                cell = cell.0,
                clock_offset_ms = offset.estimate_ms(),
                offset_min_ms = offset.min_ms,
                offset_max_ms = offset.max_ms,
                warn_ms,
                window_ms,
                "the cell's clock is off the director's by more than half the cell's timestamp \
                 window (cell minus director): past the window the cell refuses every request \
                 (stale_timestamp); a cell ahead stamps measurements this director reads as \
                 from the future (measurement_from_future); check both machines' time sync"
            ),
            Some(ClockChange::Agrees { cell, offset }) => info!(
                cell = cell.0,
                clock_offset_ms = offset.estimate_ms(),
                "the cell's clock agrees with the director's again (within half its timestamp window)"
            ),
            None => {}
        }
    }

    /// OPS-2: a pass ended: the report at INFO; a failure at WARN once per change (the first,
    /// or another cause), later ones at INFO; the recovery once at INFO (the core decides).
    fn log_pass(&self, pass: &Result<PassReport, StoreFailure>) {
        let change = self
            .passes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .handle_pass(pass.as_ref().map(|_| ()).map_err(StoreFailure::fault));
        if let Some(PassChange::Recovered { failed_passes }) = change {
            info!(
                failed_passes,
                "director passes succeed again after {failed_passes} failed passes"
            );
        }
        match pass {
            // SCALE-6: said once at the change of role (`set_role`).
            Ok(r) if r.standby.is_some() => {
                debug!(holder = ?r.standby, "standing by: another director holds the sweep");
            }
            Ok(r) => info!(
                examined = r.examined,
                dispatched = r.dispatched,
                deferred = r.deferred,
                committed = r.committed,
                failed = r.failed,
                // HO-L4: moves the store refused, by reason (tried again at later passes).
                refused = ?r.refused,
                expired = r.expired_migrations,
                attempts_reaped = r.attempts_reaped,
                pages = r.pages,
                cursor = ?r.cursor,
                sweeps_completed = r.sweeps_completed,
                rejected_rows = r.rejected_rows,
                // HO-L3: hosts held back because their source cell is backed off, and
                // the cells backed off as the pass ended.
                cell_backed_off = r.cell_backed_off,
                cells_stuck = ?r.cells_stuck,
                // Why hosts were not moved (not in the cohort, cooling down, no fresh
                // measurement, ...): what an operator asks when nothing moves.
                ineligible = ?r.ineligible,
                stopped = r.stopped,
                "director pass"
            ),
            Err(e) => match change {
                Some(PassChange::Failing { failed_before, .. }) => warn!(
                    error = %e,
                    failed_before,
                    "director pass failed (store): not ready, no host is moved until a pass succeeds"
                ),
                _ => info!(
                    error = %e,
                    failed_passes = self.passes.lock().unwrap_or_else(|e| e.into_inner()).failed(),
                    "director pass failed again (store, same cause)"
                ),
            },
        }
    }

    /// Run passes every `interval` until `stop` says stop (or its `Stop` is gone); a pass in
    /// flight ends at its next page boundary (OPS-1). Returns the totals (OPS-1: the final
    /// counters).
    pub async fn run(self, mut stop: StopListener) -> DirectorTotals {
        let mut tick = tokio::time::interval(self.cfg.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let totals = || *self.totals.lock().unwrap_or_else(|e| e.into_inner());
        // SCALE-6 / HO-3: say at start how long a sweep takes against the freshness window.
        if let Err(e) = self.check_sweep_period().await {
            debug!(error = %e, "sweep period not checked (the store did not answer)");
        }
        loop {
            // A stop asked during a pass ends the loop here, before another tick's pass.
            tokio::select! {
                biased;
                () = stop.stopped() => {
                    // SCALE-6: a standby takes over at its next pass, not after the lease.
                    self.release_lease().await;
                    return totals();
                }
                _ = tick.tick() => {}
            }
            let pass = self.pass_until(&stop).await;
            self.totals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(&pass);
            self.log_pass(&pass);
        }
    }
}

fn answer_word(reply: &HandoffReply) -> String {
    HandoffAnswer::of(*reply).status
}

/// EXPLAIN-1: how a host's send failed, as `--explain` prints it.
fn send_failed_word(failure: CellFailure) -> String {
    match failure.refusal() {
        Some(why) => format!("send=refused why={}", why.name()),
        None => format!("send={}", failure.name()),
    }
}
