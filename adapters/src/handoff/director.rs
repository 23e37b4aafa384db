//! The director: a periodic, read-only selection pass with the core's policy over keyset pages
//! from a persisted cursor (HO-S1, HO-S2, SCALE-3), then signed requests to the source cells.
//! It decides nothing itself: which page to read next, where the sweep wraps and what a failed
//! page does are `SelectionPass`'s, eligibility is `director::evaluate` (inside it), the op id
//! is the request's UUIDv5, and `DispatchBudget` classifies answers (busy is a deferral, never
//! a failure). A lost response is retried with the very same request (same op id).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use hyper::Method;
use serde::{Deserialize, Serialize};
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::{CellId, Incarnation, OpId};
use switchyard_core::handoff::{
    Decision, DirectorPolicy, Dispatch, DispatchBudget, DispatchClass, DispatchOutcome, ScanLimits,
    SelectionPass,
};
use switchyard_core::handoff::{RetryStep, StartAttempts, StartFailure, StartRetry};
use tracing::{debug, info, warn};

use super::auth::{self, Secret};
use super::clock::Clock;
use super::http::{self, HttpError};
use super::proto::{HandoffAnswer, HANDOFF_PATH};
use super::store::{SqlStore, StoreFailure};
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
}

impl DirectorTotals {
    fn add(&mut self, pass: &Result<PassReport, StoreFailure>) {
        self.passes += 1;
        self.last_pass_failed = pass.is_err();
        match pass {
            Ok(r) => {
                self.dispatched += u64::from(r.dispatched);
                self.committed += u64::from(r.committed);
                self.failed += u64::from(r.failed);
                self.sweeps_completed += u64::from(r.sweeps_completed);
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
    pub budget_exhausted: bool,
    /// SCALE-3: pages read, the cursor saved after the last one (the last host examined;
    /// `None`: the start of the list), and whether the pass passed the end of the list.
    pub pages: u32,
    pub cursor: Option<u64>,
    pub sweeps_completed: u32,
    /// Rows the store returned outside the page asked for (skipped by the core).
    pub rejected_rows: u32,
    pub sent: Vec<OpId>,
    pub answers: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Director {
    cfg: DirectorConfig,
    store: SqlStore,
    clock: Clock,
    /// OPS-2: what `run` has done so far (the probes read it).
    totals: Arc<Mutex<DirectorTotals>>,
    /// CONF-1: the pass journal (off unless `--journal`), under `director/<id>`.
    journal: Journal,
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
    let Ok(body) = serde_json::to_vec(req) else {
        return DispatchOutcome::TransportFailed;
    };
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
        .map_err(|detail| HttpError::Transport {
            url: base.to_owned(),
            detail,
        })?;
        let resp = http::request(
            Method::POST,
            base,
            HANDOFF_PATH,
            &headers,
            body.clone(),
            timeout,
        )
        .await?;
        if !resp.status.is_success() {
            return Err(HttpError::Transport {
                url: base.to_owned(),
                detail: format!("HTTP {}", resp.status),
            });
        }
        serde_json::from_slice::<HandoffAnswer>(&resp.body).map_err(|e| HttpError::Transport {
            url: base.to_owned(),
            detail: format!("malformed answer: {e}"),
        })
    };
    let policy = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(retries)
        .with_jitter();
    match once
        .retry(policy)
        .sleep(tokio::time::sleep)
        .notify(|e, d| debug!(error = %e, retry_in = ?d, "handoff request retried (same op id)"))
        .await
    {
        Ok(answer) => DispatchOutcome::Answered(answer.reply),
        Err(e) => {
            warn!(op = %req.op_id, error = %e, "handoff request failed");
            DispatchOutcome::TransportFailed
        }
    }
}

impl Director {
    #[must_use]
    pub fn new(cfg: DirectorConfig, store: SqlStore, clock: Clock) -> Director {
        Director {
            cfg,
            store,
            clock,
            totals: Arc::default(),
            journal: Journal::off(),
        }
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
        self.pass_recording(None).await
    }

    /// EXPLAIN-1: [`pass`](Self::pass), also handing each examined host's decision (the
    /// core's verdict and the numbers it rests on) to `examined`, in the order examined, before
    /// it is acted on; a pass that fails keeps what it examined. Bounded by the pass's scan
    /// limits (one decision per host examined). `director --once --explain` prints them.
    pub async fn pass_explained(
        &self,
        examined: &mut Vec<Decision>,
    ) -> Result<PassReport, StoreFailure> {
        self.pass_recording(Some(examined)).await
    }

    async fn pass_recording(
        &self,
        mut examined: Option<&mut Vec<Decision>>,
    ) -> Result<PassReport, StoreFailure> {
        let mut report = PassReport::default();
        self.note(|| DirectorRecord::Pass);
        let now = self.clock.now();
        let expired = self.store.expire_migrations(now).await?;
        report.expired_migrations = u32::try_from(expired.len()).unwrap_or(u32::MAX);
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
        while let Some(q) = pass.poll_query() {
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
            for d in decisions {
                self.dispatch(d, &mut budget, &mut urls, &mut report)
                    .await?;
            }
            // After the page's dispatches: a director that dies in them reads the page again
            // (its requests carry the same op ids).
            self.store.save_cursor(&self.cfg.id, pass.cursor()).await?;
            report.pages = pass.pages_read();
            report.cursor = pass.cursor().after.map(|h| h.0);
            report.sweeps_completed = pass.sweeps_completed();
            report.rejected_rows = pass.rejected_rows();
        }
        Ok(report)
    }

    /// Act on one examined host's verdict: count why it is not moved, or send its request.
    async fn dispatch(
        &self,
        d: Decision,
        budget: &mut DispatchBudget,
        urls: &mut BTreeMap<CellId, Option<(String, Incarnation)>>,
        report: &mut PassReport,
    ) -> Result<(), StoreFailure> {
        report.examined += 1;
        let dispatch = budget.dispatch(&d);
        self.note(|| DirectorRecord::Examined {
            host: d.host,
            decision: match &dispatch {
                Dispatch::Send(_) => Examined::Dispatch,
                Dispatch::Ineligible(why) => Examined::Ineligible {
                    rule: why.name().to_owned(),
                },
                Dispatch::Held => Examined::Held,
            },
        });
        let req = match dispatch {
            Dispatch::Send(req) => req,
            Dispatch::Ineligible(why) => {
                // Keyed by the stable name: reports outlive variant renames.
                *report.ineligible.entry(why.name().to_owned()).or_default() += 1;
                return Ok(());
            }
            Dispatch::Held => {
                report.budget_exhausted = true;
                return Ok(());
            }
        };
        let cell = req.source.cell;
        let url = match urls.get(&cell) {
            Some(u) => u.clone(),
            None => {
                // SEC-2a: the URL and the incarnation of the process holding the cell now.
                let u = self
                    .store
                    .cell_info(cell)
                    .await?
                    .map(|c| (c.internal_url, c.row.incarnation))
                    .filter(|(u, _)| !u.is_empty());
                urls.insert(cell, u.clone());
                u
            }
        };
        let outcome = match url {
            Some((url, incarnation)) => {
                report.dispatched += 1;
                report.sent.push(req.op_id);
                self.note(|| DirectorRecord::Sent {
                    op_id: req.op_id,
                    source: req.source,
                    target: req.target,
                });
                send_request(
                    &url,
                    &self.cfg.secret,
                    incarnation,
                    &req,
                    self.cfg.request_timeout,
                    self.cfg.retries,
                    &self.clock,
                )
                .await
            }
            None => DispatchOutcome::TransportFailed,
        };
        if let DispatchOutcome::Answered(reply) = &outcome {
            report.answers.push(answer_word(reply));
            if let HandoffReply::Result(r) = reply {
                if r.outcome.is_committed() {
                    report.committed += 1;
                }
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
        Ok(())
    }

    /// Run passes every `interval` until `stop` says stop (or its `Stop` is gone); a pass in
    /// flight finishes. Returns the totals (OPS-1: the final counters).
    pub async fn run(self, mut stop: StopListener) -> DirectorTotals {
        let mut tick = tokio::time::interval(self.cfg.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let totals = || *self.totals.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.stopped() => return totals(),
            }
            let pass = self.pass().await;
            self.totals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(&pass);
            match pass {
                Ok(r) => info!(
                    examined = r.examined,
                    dispatched = r.dispatched,
                    deferred = r.deferred,
                    committed = r.committed,
                    failed = r.failed,
                    expired = r.expired_migrations,
                    pages = r.pages,
                    cursor = ?r.cursor,
                    sweeps_completed = r.sweeps_completed,
                    rejected_rows = r.rejected_rows,
                    // Why hosts were not moved (not in the cohort, cooling down, no fresh
                    // measurement, ...): what an operator asks when nothing moves.
                    ineligible = ?r.ineligible,
                    "director pass"
                ),
                Err(e) => warn!(error = %e, "director pass failed (store)"),
            }
        }
    }
}

fn answer_word(reply: &HandoffReply) -> String {
    HandoffAnswer::of(*reply).status
}
