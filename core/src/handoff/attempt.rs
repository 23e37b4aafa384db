//! The source-led handoff attempt of one host at its source cell (HO-S2..S6, HO-A1..A6).
//!
//! Quinn-style: `handle_request` / `handle_*(now, ..)` in, [`HandoffAction`]s out via `poll_action`,
//! deadlines via `poll_timeout` / `handle_timeout`. The adapter (or a model checker) runs
//! `RunTransaction` / `Reconcile` against the assignment store and feeds the result back with
//! the same [`AttemptRef`].
//!
//! Life of an attempt: `handle_request` (barrier installed in one synchronous step) ->
//! `InTransaction` -> terminal (committed: retire; rolled back with authority unchanged:
//! reopen; authority changed: retire stale) | ambiguous -> `Reconciling` | store unavailable
//! -> `Quarantined` (gated; reconciliation retried later). Only a terminal outcome of *this*
//! attempt removes its barrier; timers only (re)start reconciliation.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::admission::{
    ActivityLease, AdmissionGate, AdmissionRefusal, ClosedReason, GateState, Heartbeat, NotCounted,
    QuiescenceCounters, ReleaseReport, Revalidation, Ticket, WorkKind,
};
use super::ids::Generation;
use super::ids::{AuthorityCheck, AuthorityField, CellId, OpId, SourceAuthority};
use super::policy::{HandoffRequest, Ineligible};
use super::store::{fenced_authority, AbortReason, DrainWrite, TxnOutcome};
use crate::MonoMs;

/// Bound on queued actions. The adapter drains after every input; `handle_request` refuses
/// (`Backlogged`) rather than let an undrained queue grow.
pub(crate) const MAX_PENDING_ACTIONS: usize = 32;
/// Upper bound of actions one attempt can queue without being drained.
const ACTIONS_PER_ATTEMPT: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceConfig {
    /// HO-A2: the request timeout of the assignment transaction (the DB's own transaction
    /// timeout is shorter). Expiry is ambiguity, never a rollback.
    pub request_timeout_ms: u64,
    /// HO-A2: bound of one locked reconciliation request.
    pub reconcile_timeout_ms: u64,
    /// HO-A2: delay before a quarantined attempt retries reconciliation.
    pub quarantine_retry_ms: u64,
    /// HO-C1: this cell advertises the idle-handoff capability.
    pub cell_capable: bool,
    /// HO-L4: how long an op id whose attempt the store refused for a reason that clears
    /// (`AbortReason::clears`) is answered from its recorded result; a request of it after
    /// that starts a new attempt (the director asks again at a later pass).
    pub refusal_hold_ms: u64,
}

/// HO-L4: the default `SourceConfig::refusal_hold_ms`: one director pass at its default
/// interval, so a redelivery of the same pass is answered and the next pass tries anew.
pub const DEFAULT_REFUSAL_HOLD_MS: u64 = 10_000;

/// One attempt of one op id at this source (`seq` distinguishes re-tries of the same op).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AttemptRef {
    pub op_id: OpId,
    pub seq: u32,
}

/// HO-A2: ways a result can be unknown. None of them is a rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Ambiguity {
    Timeout,
    TransportError,
    ResultLost,
}

/// What the adapter learned from running a transaction or a reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DurableResult {
    /// The store answered: a definitive durable outcome.
    Done(TxnOutcome),
    /// HO-A2: the outcome is unknown (reconcile by op id).
    Ambiguous(Ambiguity),
    /// HO-A2: durable access is unavailable (quarantine; retry reconciliation later).
    StoreUnavailable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QuarantineCause {
    StoreUnavailable,
    ReconcileAmbiguous,
}

/// Phase of the attempt in flight. Every phase holds the barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// HO-S4: the assignment transaction is running.
    InTransaction { deadline: MonoMs },
    /// HO-A2: a locked reconciliation by op id is running.
    Reconciling { deadline: MonoMs },
    /// HO-A2: durable access unavailable; gated until a reconciliation succeeds.
    Quarantined {
        retry_at: MonoMs,
        cause: QuarantineCause,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Attempt {
    attempt: AttemptRef,
    request: HandoffRequest,
    phase: Phase,
}

impl Attempt {
    /// The attempt (op id and sequence number).
    #[must_use]
    pub fn attempt(&self) -> AttemptRef {
        self.attempt
    }

    /// The request the attempt serves.
    #[must_use]
    pub fn request(&self) -> HandoffRequest {
        self.request
    }

    /// Where the attempt is.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.phase
    }
}

/// Why a handoff request is refused before any barrier (holds nothing, closes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HandoffRefusal {
    /// The op id is not the UUIDv5 of the request's authority and target.
    InvalidOpId,
    /// The request names another host/cell or an authority newer than ours.
    NotOwner(AuthorityField),
    /// HO-A5: the correction is disabled here (in-flight attempts still reconcile).
    Disabled,
    /// No open control session for the host here.
    NoSession,
    /// HO-C1: this cell or the desktop lacks the idle-handoff capability.
    CapabilityMissing(Ineligible),
    SameCell,
    /// Another op's attempt holds the barrier.
    AttemptInFlight,
    /// HO-S5 / HO-S6: this source was retired.
    SourceRetired,
    /// HO-A5: emergency drain / auth enforcement.
    SourceDraining,
    /// Undrained action queue (adapter contract broken); retry later.
    Backlogged,
}

/// HO-S5: the durable operation result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HandoffResult {
    pub op_id: OpId,
    pub outcome: TxnOutcome,
}

/// The answer to the director.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HandoffReply {
    /// HO-S2: deferral (not a dispatch failure); names the non-zero counters.
    Busy {
        op_id: OpId,
        counters: QuiescenceCounters,
    },
    /// HO-A1 / HO-A3: a duplicate of the attempt in flight.
    InProgress {
        op_id: OpId,
    },
    /// HO-S1: the request is for an older epoch / incarnation / generation.
    Superseded {
        op_id: OpId,
        field: AuthorityField,
    },
    Refused {
        op_id: OpId,
        reason: HandoffRefusal,
    },
    /// HO-S5 / HO-A1: the durable result (also the answer to a duplicate after the end).
    Result(HandoffResult),
}

/// Immediate answer of `handle_request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Begin {
    /// HO-S2: barrier installed; the result comes later as `HandoffAction::Reply`.
    Started(AttemptRef),
    /// Answered at once (busy, duplicate, superseded, refused); nothing held.
    Answered(HandoffReply),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RetireReason {
    /// HO-S5: the handoff committed.
    Committed { op_id: OpId, target: CellId },
    /// HO-S6: the source authority changed: retire the stale source.
    StaleAuthority { op_id: OpId },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DrainReason {
    Emergency,
    AuthRefused,
}

/// Decisions, drained by the adapter with `poll_action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HandoffAction {
    /// HO-S4: run the bounded assignment transaction (`AssignmentStore::run_transaction`).
    RunTransaction {
        attempt: AttemptRef,
        request: HandoffRequest,
    },
    /// HO-A2: run the locked reconciliation by op id (`AssignmentStore::reconcile`).
    Reconcile {
        attempt: AttemptRef,
        request: HandoffRequest,
    },
    /// HO-A2: durable access unavailable; the source stays gated (alert).
    Quarantined {
        attempt: AttemptRef,
        cause: QuarantineCause,
    },
    /// HO-S5 / HO-S6 / HO-A6 (HO-1: only ever after a barrier over zero tickets, so it closes
    /// no client): close the empty source session and control through the ordinary
    /// DRAINING / resolve-director path and release its activity. Queued before the `Reply`,
    /// and independent of whether the reply can be delivered.
    RetireSourceDraining { reason: RetireReason },
    /// HO-S6: the barrier of this attempt is gone; admission continues on the original control.
    ReopenAdmission { attempt: AttemptRef },
    /// HO-A5: write the emergency-drain fence (`AssignmentStore::emergency_drain`) once and
    /// feed its result back ([`SourceHandoff::handle_fence_result`]); the machine retries a
    /// failed write itself (a new `FenceAuthority` when its retry timer fires). The hard drain
    /// itself runs unchanged in the adapter.
    FenceAuthority {
        authority: SourceAuthority,
        reason: DrainReason,
    },
    /// Deliver to the director (if it is still listening: HO-A3).
    Reply(HandoffReply),
    /// HO-A5: the fence write failed (`failures` in a row); it is written again at `retry_at`.
    /// `overdue` once `failures` reaches [`FenceRetry::alert_after`]: the operator's alert (the
    /// fence is never given up, and the host cannot be undrained until it is written).
    FenceFailed {
        authority: SourceAuthority,
        failures: u32,
        retry_at: MonoMs,
        overdue: bool,
    },
}

/// HO-A5: what the adapter learned from one write of the drain fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FenceResult {
    /// The store answered (fenced now, already moved, or already stale): nothing left to write.
    Written(DrainWrite),
    /// The write did not happen or its result is unknown (store unreachable, timeout). The
    /// fence is idempotent (a second write of the same claim finds it stale), so it is retried.
    Failed,
}

/// Backoff of a failed drain-fence write: `min_ms`, doubling per failure, capped at `max_ms`
/// (HO-A5). A host has at most one fence pending (one drain per machine), so a cell has at most
/// [`super::cell::MAX_CELL_HOSTS`] pending fences, each retried at most once per `max_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FenceRetry {
    pub min_ms: u64,
    pub max_ms: u64,
    /// Failures in a row after which each further failure is reported `overdue`.
    pub alert_after: u32,
}

/// HO-A5: first retry of a failed fence write (a DB blip is retried at once).
pub const FENCE_RETRY_MIN_MS: u64 = 500;
/// HO-A5: the longest wait between two writes of one fence. At the bound of a cell's hosts
/// (65,536 drained in one outage) that is at most ≈ 2,200 fence writes/s once the DB is back,
/// each one short transaction on one row.
pub const FENCE_RETRY_MAX_MS: u64 = 30_000;
/// HO-A5: failures in a row (≈ 15 s after the first, at the defaults) before each is an alert.
pub(crate) const FENCE_ALERT_AFTER: u32 = 6;

impl Default for FenceRetry {
    fn default() -> Self {
        FenceRetry {
            min_ms: FENCE_RETRY_MIN_MS,
            max_ms: FENCE_RETRY_MAX_MS,
            alert_after: FENCE_ALERT_AFTER,
        }
    }
}

impl FenceRetry {
    /// The wait after the `failures`-th failure in a row (`failures >= 1`).
    #[must_use]
    pub fn delay_ms(&self, failures: u32) -> u64 {
        let doublings = failures.saturating_sub(1).min(63);
        self.min_ms
            .saturating_mul(1u64 << doublings)
            .min(self.max_ms)
            .max(1)
    }
}

/// HO-A5: a drain fence not yet known to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PendingFence {
    authority: SourceAuthority,
    reason: DrainReason,
    /// Failed writes in a row.
    failures: u32,
    /// `None`: a write is out (its result is awaited); `Some(at)`: written again at `at`.
    retry_at: Option<MonoMs>,
}

impl PendingFence {
    /// The authority the fence is written under.
    #[must_use]
    pub fn authority(&self) -> SourceAuthority {
        self.authority
    }

    /// Why the source was drained.
    #[must_use]
    pub fn reason(&self) -> DrainReason {
        self.reason
    }

    /// Failed writes in a row.
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// `None`: a write is out (its result is awaited); `Some(at)`: written again at `at`.
    #[must_use]
    pub fn retry_at(&self) -> Option<MonoMs> {
        self.retry_at
    }
}

/// Whether an input changed anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Disposition {
    Applied,
    Ignored(Ignored),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Ignored {
    /// No attempt in flight.
    NoAttempt,
    /// HO-A4: a late callback of another attempt / op / closed session.
    OtherAttempt,
    /// A non-definitive result from a channel the attempt is not waiting on.
    NotAwaited,
    /// A "definitive" result that contradicts the request (e.g. another target).
    Inconsistent,
    /// HO-L1: an explicit rollback answered by the transaction after the source turned to
    /// reconciliation. The reconciliation it asked for may still land and fence the op id,
    /// renewing the host's authority; reopening on the older answer would leave the source
    /// holding the authority the fence replaced. Only a reconciliation (or an answer read from
    /// its record) ends such an attempt.
    AwaitingReconciliation,
    AlreadyDrained,
    /// A session event for an old generation.
    StaleSession,
}

/// Why a replacement control (rebind) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RebindRefusal {
    /// HO-S3: no rebind while a barrier stands.
    Gated,
    SourceRetired,
    SourceDraining,
    /// The caller does not hold a live control-operation ticket.
    NoControlTicket,
    /// The new authority is for another host, cell or epoch.
    WrongAuthority,
    /// The new authority is not newer than the current one.
    NotNewer,
}

/// The handoff machine of one host at its source cell: admission gate + at most one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceHandoff {
    config: SourceConfig,
    authority: SourceAuthority,
    /// The generation the open control session registered with. Equal to the authority's
    /// except after a fence renewed the authority (HO-L1) under the same session: the
    /// adapter reports that session's close by the generation it registered with.
    session_generation: Generation,
    session_open: bool,
    desktop_capable: bool,
    enabled: bool,
    gate: AdmissionGate,
    attempt: Option<Attempt>,
    next_seq: u32,
    /// HO-A1: the durable result of the last finished attempt (answers duplicates).
    last_result: Option<HandoffResult>,
    /// HO-L4: when `last_result` was decided (the start of a refusal's hold).
    last_result_at: MonoMs,
    /// HO-A5: the drain fence until its write is known to have happened.
    fence: Option<PendingFence>,
    actions: VecDeque<HandoffAction>,
}

impl SourceHandoff {
    /// A source machine for a registered control session (`authority` from
    /// `AssignmentStore::register_control`). A restart or a retired source gets a new one.
    #[must_use]
    pub fn new(
        config: SourceConfig,
        authority: SourceAuthority,
        desktop_capable: bool,
    ) -> SourceHandoff {
        SourceHandoff {
            config,
            authority,
            session_generation: authority.generation,
            session_open: true,
            desktop_capable,
            enabled: true,
            gate: AdmissionGate::new(authority.host, authority.generation),
            attempt: None,
            next_seq: 0,
            last_result: None,
            last_result_at: MonoMs::ZERO,
            fence: None,
            actions: VecDeque::new(),
        }
    }

    // ----- queries -----

    #[must_use]
    pub fn authority(&self) -> SourceAuthority {
        self.authority
    }

    #[must_use]
    pub fn gate(&self) -> &AdmissionGate {
        &self.gate
    }

    #[must_use]
    pub fn attempt(&self) -> Option<&Attempt> {
        self.attempt.as_ref()
    }

    #[must_use]
    pub fn last_result(&self) -> Option<HandoffResult> {
        self.last_result
    }

    /// HO-L4: until when the last result, a refusal that clears, answers a request of its op
    /// id; from then on such a request starts a new attempt. `None`: the last result (if any)
    /// answers its op id for good.
    #[must_use]
    pub fn refusal_hold_until(&self) -> Option<MonoMs> {
        let r = self.last_result?;
        r.outcome.refusal()?;
        Some(self.last_result_at.plus_ms(self.config.refusal_hold_ms))
    }

    /// HO-A5: the drain fence, while it is not known to be written.
    #[must_use]
    pub fn pending_fence(&self) -> Option<&PendingFence> {
        self.fence.as_ref()
    }

    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The generation the open (or last) control session registered with; a fence renewal
    /// (HO-L1) moves `authority().generation` past it without a new session.
    #[must_use]
    pub fn session_generation(&self) -> Generation {
        self.session_generation
    }

    #[must_use]
    pub fn session_open(&self) -> bool {
        self.session_open
    }

    #[must_use]
    pub fn pending_actions(&self) -> usize {
        self.actions.len()
    }

    /// Next action for the adapter.
    pub fn poll_action(&mut self) -> Option<HandoffAction> {
        self.actions.pop_front()
    }

    /// The next deadline at which `handle_timeout` has something to do: the attempt's, or the
    /// drain fence's retry.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<MonoMs> {
        let attempt = self.attempt.map(|a| match a.phase {
            Phase::InTransaction { deadline } | Phase::Reconciling { deadline } => deadline,
            Phase::Quarantined { retry_at, .. } => retry_at,
        });
        let fence = self.fence.and_then(|f| f.retry_at);
        match (attempt, fence) {
            (Some(a), Some(f)) => Some(a.min(f)),
            (a, f) => a.or(f),
        }
    }

    // ----- admission (HO-7, HO-8, HO-10, HO-S3) -----

    /// HO-7 / HO-S3: take a ticket before the first await of new work.
    pub fn handle_acquire(&mut self, kind: WorkKind) -> Result<Ticket, AdmissionRefusal> {
        self.gate.handle_acquire(kind)
    }

    /// HO-7: release exactly once (anything else is a reported no-op).
    pub fn handle_release(&mut self, ticket: Ticket) -> ReleaseReport {
        self.gate.handle_release(ticket)
    }

    /// HO-S3 / HO-A4: re-check after an await; `Abandon` means already released.
    pub fn handle_revalidate(&mut self, ticket: Ticket) -> Revalidation {
        self.gate.handle_revalidate(ticket)
    }

    /// HO-8: heartbeats never count (`&self`).
    #[must_use]
    pub fn handle_heartbeat(&self, heartbeat: Heartbeat) -> NotCounted {
        self.gate.handle_heartbeat(heartbeat)
    }

    /// HO-10: DB activity leases never prove idleness (`&self`).
    #[must_use]
    pub fn handle_activity_lease(&self, lease: ActivityLease) -> NotCounted {
        self.gate.handle_activity_lease(lease)
    }

    // ----- the attempt -----

    fn push(&mut self, action: HandoffAction) {
        let coalesce = matches!(
            action,
            HandoffAction::Reconcile { .. } | HandoffAction::Quarantined { .. }
        );
        if coalesce && self.actions.contains(&action) {
            return;
        }
        self.actions.push_back(action);
        crate::invariant!(self.actions.len() <= MAX_PENDING_ACTIONS);
    }

    /// HO-S2: validate the request and the session, then in one synchronous step check every
    /// counter and install the barrier (`Started`) or answer `Busy` holding nothing.
    /// HO-A1: a duplicate of the attempt in flight answers `InProgress`; a duplicate of the
    /// last finished one answers its recorded result, except (HO-L4) a refusal that clears,
    /// once its hold has passed: nothing was recorded for that op id, so a new attempt of it
    /// is the move tried again, not a second migration. HO-S1: an older authority answers
    /// `Superseded`. HO-A5: refused while disabled or drained.
    pub fn handle_request(&mut self, now: MonoMs, request: &HandoffRequest) -> Begin {
        let op_id = request.op_id;
        let refuse = |reason| Begin::Answered(HandoffReply::Refused { op_id, reason });
        if !request.op_id_is_consistent() {
            return refuse(HandoffRefusal::InvalidOpId);
        }
        if let Some(a) = &self.attempt {
            if a.attempt.op_id == op_id {
                return Begin::Answered(HandoffReply::InProgress { op_id });
            }
        }
        if let Some(r) = self.last_result {
            let held = self.refusal_hold_until().is_none_or(|until| now < until);
            if r.op_id == op_id && held {
                return Begin::Answered(HandoffReply::Result(r));
            }
        }
        if self.gate.is_drained() {
            return refuse(HandoffRefusal::SourceDraining);
        }
        if matches!(self.gate.state(), GateState::Closed(_)) {
            return refuse(HandoffRefusal::SourceRetired);
        }
        match request.source.check_against(&self.authority) {
            AuthorityCheck::Exact => {}
            AuthorityCheck::Superseded(field) => {
                return Begin::Answered(HandoffReply::Superseded { op_id, field });
            }
            AuthorityCheck::Mismatch(field) => return refuse(HandoffRefusal::NotOwner(field)),
        }
        if !self.enabled {
            return refuse(HandoffRefusal::Disabled);
        }
        if !self.session_open {
            return refuse(HandoffRefusal::NoSession);
        }
        if !self.config.cell_capable {
            return refuse(HandoffRefusal::CapabilityMissing(
                Ineligible::SourceCellNotCapable,
            ));
        }
        if !self.desktop_capable {
            return refuse(HandoffRefusal::CapabilityMissing(
                Ineligible::DesktopNotCapable,
            ));
        }
        if request.target == self.authority.cell {
            return refuse(HandoffRefusal::SameCell);
        }
        if self.attempt.is_some() {
            return refuse(HandoffRefusal::AttemptInFlight);
        }
        if self.actions.len() + ACTIONS_PER_ATTEMPT > MAX_PENDING_ACTIONS {
            return refuse(HandoffRefusal::Backlogged);
        }
        let seq = self.next_seq;
        match self.gate.try_install_barrier(now, op_id, seq) {
            Err(counters) => Begin::Answered(HandoffReply::Busy { op_id, counters }),
            Ok(_barrier) => {
                self.next_seq = self.next_seq.saturating_add(1);
                let attempt = AttemptRef { op_id, seq };
                self.attempt = Some(Attempt {
                    attempt,
                    request: *request,
                    phase: Phase::InTransaction {
                        deadline: now.plus_ms(self.config.request_timeout_ms),
                    },
                });
                self.push(HandoffAction::RunTransaction {
                    attempt,
                    request: *request,
                });
                Begin::Started(attempt)
            }
        }
    }

    /// HO-S4..S6 / HO-A2: the result of `RunTransaction`.
    pub fn handle_transaction_result(
        &mut self,
        now: MonoMs,
        attempt: AttemptRef,
        result: DurableResult,
    ) -> Disposition {
        self.on_result(now, attempt, result, Channel::Transaction)
    }

    /// HO-A2: the result of `Reconcile`.
    pub fn handle_reconcile_result(
        &mut self,
        now: MonoMs,
        attempt: AttemptRef,
        result: DurableResult,
    ) -> Disposition {
        self.on_result(now, attempt, result, Channel::Reconcile)
    }

    fn on_result(
        &mut self,
        now: MonoMs,
        aref: AttemptRef,
        result: DurableResult,
        channel: Channel,
    ) -> Disposition {
        let Some(current) = self.attempt else {
            return Disposition::Ignored(Ignored::NoAttempt);
        };
        // HO-A4: late callbacks of other attempts (or of a closed session) change nothing.
        if current.attempt != aref {
            return Disposition::Ignored(Ignored::OtherAttempt);
        }
        match result {
            DurableResult::Done(outcome) => {
                if let TxnOutcome::Committed { target, .. } = outcome {
                    if target != current.request.target {
                        return Disposition::Ignored(Ignored::Inconsistent);
                    }
                }
                // A commit or an authority change is final whoever reports it (a fence of a
                // recorded or stale claim renews nothing); `Fenced` is read from the fence.
                let reconciling = !matches!(current.phase, Phase::InTransaction { .. });
                let unfenced_rollback = matches!(
                    outcome,
                    TxnOutcome::RolledBack { reason } if reason != AbortReason::Fenced
                );
                if channel == Channel::Transaction && reconciling && unfenced_rollback {
                    return Disposition::Ignored(Ignored::AwaitingReconciliation);
                }
                self.finish(now, outcome);
                Disposition::Applied
            }
            DurableResult::Ambiguous(_) | DurableResult::StoreUnavailable => {
                let cause = match result {
                    DurableResult::StoreUnavailable => QuarantineCause::StoreUnavailable,
                    _ => QuarantineCause::ReconcileAmbiguous,
                };
                match (channel, current.phase) {
                    (Channel::Transaction, Phase::InTransaction { .. }) => {
                        if cause == QuarantineCause::StoreUnavailable {
                            self.enter_quarantine(now, cause);
                        } else {
                            self.enter_reconciling(now);
                        }
                        Disposition::Applied
                    }
                    (Channel::Reconcile, Phase::Reconciling { .. }) => {
                        self.enter_quarantine(now, cause);
                        Disposition::Applied
                    }
                    _ => Disposition::Ignored(Ignored::NotAwaited),
                }
            }
        }
    }

    fn enter_reconciling(&mut self, now: MonoMs) {
        let deadline = now.plus_ms(self.config.reconcile_timeout_ms);
        if let Some(a) = &mut self.attempt {
            a.phase = Phase::Reconciling { deadline };
            let action = HandoffAction::Reconcile {
                attempt: a.attempt,
                request: a.request,
            };
            self.push(action);
        }
    }

    fn enter_quarantine(&mut self, now: MonoMs, cause: QuarantineCause) {
        let retry_at = now.plus_ms(self.config.quarantine_retry_ms);
        if let Some(a) = &mut self.attempt {
            a.phase = Phase::Quarantined { retry_at, cause };
            let action = HandoffAction::Quarantined {
                attempt: a.attempt,
                cause,
            };
            self.push(action);
        }
    }

    /// HO-A2 / HO-S3: deadlines only (re)start reconciliation; no timer removes a barrier.
    /// HO-A5: a due fence retry writes the fence again.
    pub fn handle_timeout(&mut self, now: MonoMs) -> Disposition {
        let fenced = self.fence_timeout(now);
        let Some(a) = self.attempt else {
            return if fenced {
                Disposition::Applied
            } else {
                Disposition::Ignored(Ignored::NoAttempt)
            };
        };
        match a.phase {
            Phase::InTransaction { deadline } if now >= deadline => self.enter_reconciling(now),
            Phase::Reconciling { deadline } if now >= deadline => {
                self.enter_quarantine(now, QuarantineCause::ReconcileAmbiguous);
            }
            Phase::Quarantined { retry_at, .. } if now >= retry_at => self.enter_reconciling(now),
            _ if fenced => return Disposition::Applied,
            _ => return Disposition::Ignored(Ignored::NotAwaited),
        }
        crate::invariant!(self.gate.barrier().is_some(), "timeouts keep the barrier");
        Disposition::Applied
    }

    /// HO-A5: the fence's retry timer: `true` if it was due (the write goes out again).
    fn fence_timeout(&mut self, now: MonoMs) -> bool {
        let Some(fence) = &mut self.fence else {
            return false;
        };
        match fence.retry_at {
            Some(at) if now >= at => {
                fence.retry_at = None;
                let action = HandoffAction::FenceAuthority {
                    authority: fence.authority,
                    reason: fence.reason,
                };
                self.push(action);
                true
            }
            _ => false,
        }
    }

    /// HO-A5: the result of one `FenceAuthority` write. Written (whatever the store found):
    /// the fence is done. Failed: retried after [`FenceRetry::delay_ms`], never given up (the
    /// core keeps it until a write is known to have happened). A result while no write is out
    /// (a duplicate) changes nothing.
    pub fn handle_fence_result(
        &mut self,
        now: MonoMs,
        result: FenceResult,
        retry: &FenceRetry,
    ) -> Disposition {
        let Some(fence) = &mut self.fence else {
            return Disposition::Ignored(Ignored::NotAwaited);
        };
        if fence.retry_at.is_some() {
            return Disposition::Ignored(Ignored::NotAwaited);
        }
        match result {
            FenceResult::Written(_) => self.fence = None,
            FenceResult::Failed => {
                fence.failures = fence.failures.saturating_add(1);
                let retry_at = now.plus_ms(retry.delay_ms(fence.failures));
                fence.retry_at = Some(retry_at);
                let action = HandoffAction::FenceFailed {
                    authority: fence.authority,
                    failures: fence.failures,
                    retry_at,
                    overdue: fence.failures >= retry.alert_after,
                };
                self.push(action);
            }
        }
        Disposition::Applied
    }

    /// Terminal outcome of the attempt in flight: the only place a barrier leaves.
    fn finish(&mut self, now: MonoMs, outcome: TxnOutcome) {
        let Some(a) = self.attempt.take() else {
            crate::invariant!(false, "finish without an attempt");
            return;
        };
        let op_id = a.attempt.op_id;
        let drained = self.gate.is_drained();
        match outcome {
            TxnOutcome::Committed { target, .. } => {
                // HO-S5 / HO-A5: a committed handoff follows its result, drained or not.
                self.gate.close(ClosedReason::Committed);
                self.push(HandoffAction::RetireSourceDraining {
                    reason: RetireReason::Committed { op_id, target },
                });
            }
            TxnOutcome::RolledBack { reason } => {
                // HO-S6: reopen on the original control; HO-A5: a drained source never does.
                if self.gate.reopen(op_id, a.attempt.seq) {
                    if reason == AbortReason::Fenced {
                        self.adopt_fenced_authority(&a.request);
                    }
                    self.push(HandoffAction::ReopenAdmission { attempt: a.attempt });
                } else {
                    crate::invariant!(drained);
                    self.gate.close(ClosedReason::Drained);
                }
            }
            TxnOutcome::AuthorityChanged { .. } => {
                if drained {
                    // Our own drain fence changed it; the hard drain retires the source.
                    self.gate.close(ClosedReason::Drained);
                } else {
                    self.gate.close(ClosedReason::StaleAuthority);
                    self.push(HandoffAction::RetireSourceDraining {
                        reason: RetireReason::StaleAuthority { op_id },
                    });
                }
            }
        }
        crate::invariant!(self.gate.barrier().is_none());
        let result = HandoffResult { op_id, outcome };
        self.last_result = Some(result);
        self.last_result_at = now;
        // HO-A6: the reply goes last; retirement never depends on delivering it.
        self.push(HandoffAction::Reply(HandoffReply::Result(result)));
    }

    /// HO-L1: the store answered `RolledBack { Fenced }` for this source's own attempt: the
    /// locked reconciliation fenced its op id and, in the same write, renewed the host's
    /// authority to [`fenced_authority`] of the claim. Adopt it, so that the director's next
    /// pick (a new op id, derived from the store's authority) is this source's to start. The
    /// barrier stood over zero tickets and was just removed, so no ticket is orphaned by the
    /// new generation; the control session stays the one that registered.
    fn adopt_fenced_authority(&mut self, request: &HandoffRequest) {
        crate::invariant_eq!(
            request.source,
            self.authority,
            "no rebind while gated: the attempt's claim is still this source's authority"
        );
        crate::invariant!(!self.gate.is_drained(), "a drained source never reopens");
        crate::invariant_eq!(self.gate.state(), GateState::Open, "reopened just before");
        crate::invariant!(self.gate.is_idle(), "the barrier stood over zero tickets");
        self.authority = fenced_authority(self.authority);
        self.gate.set_generation(self.authority.generation);
    }

    /// HO-A5: emergency drain / auth enforcement. Local authority is invalid from now on: no
    /// new attempt, never a reopen; an attempt in flight still reconciles and a committed one
    /// follows its result. Emits the store fence; the hard drain runs unchanged.
    pub fn handle_emergency_drain(&mut self, now: MonoMs, reason: DrainReason) -> Disposition {
        let _ = now;
        if self.gate.is_drained() {
            return Disposition::Ignored(Ignored::AlreadyDrained);
        }
        self.gate.mark_drained();
        crate::invariant!(self.fence.is_none(), "one drain per machine");
        self.fence = Some(PendingFence {
            authority: self.authority,
            reason,
            failures: 0,
            retry_at: None,
        });
        self.push(HandoffAction::FenceAuthority {
            authority: self.authority,
            reason,
        });
        Disposition::Applied
    }

    /// HO-A5: the disable switch stops new attempts only.
    pub fn handle_set_enabled(&mut self, now: MonoMs, enabled: bool) -> Disposition {
        let _ = now;
        self.enabled = enabled;
        Disposition::Applied
    }

    /// HO-A4: a replacement control registered (store `register_control`) while the caller
    /// holds a live control-operation ticket. Refused while gated; old-generation tickets then
    /// fail `handle_revalidate`.
    pub fn handle_rebind(
        &mut self,
        now: MonoMs,
        ticket: Ticket,
        authority: SourceAuthority,
        desktop_capable: bool,
    ) -> Result<(), RebindRefusal> {
        let _ = now;
        if self.gate.is_drained() {
            return Err(RebindRefusal::SourceDraining);
        }
        match self.gate.state() {
            GateState::Open => {}
            GateState::Gated(_) => return Err(RebindRefusal::Gated),
            GateState::Closed(_) => return Err(RebindRefusal::SourceRetired),
        }
        let holds =
            ticket.kind == WorkKind::ControlOp && self.gate.live_tickets().any(|t| t == ticket);
        if !holds {
            return Err(RebindRefusal::NoControlTicket);
        }
        let cur = self.authority;
        if authority.host != cur.host || authority.cell != cur.cell || authority.epoch != cur.epoch
        {
            return Err(RebindRefusal::WrongAuthority);
        }
        if authority.incarnation < cur.incarnation || authority.generation <= cur.generation {
            return Err(RebindRefusal::NotNewer);
        }
        crate::invariant!(self.attempt.is_none());
        self.authority = authority;
        self.gate.set_generation(authority.generation);
        self.session_generation = authority.generation;
        self.session_open = true;
        self.desktop_capable = desktop_capable;
        Ok(())
    }

    /// The control session that registered with `generation` closed. An attempt in flight
    /// still completes (source-owned, HO-A3); new attempts are refused until a rebind.
    pub fn handle_session_closed(&mut self, now: MonoMs, generation: Generation) -> Disposition {
        let _ = now;
        if generation != self.session_generation || !self.session_open {
            return Disposition::Ignored(Ignored::StaleSession);
        }
        self.session_open = false;
        Disposition::Applied
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channel {
    Transaction,
    Reconcile,
}
