//! Idle handoff (HO). See `../shared/REQUIREMENTS.md` part HO and
//! `docs/REQUIREMENTS-MAP.md` for where each requirement lives.
//!
//! The modules are private; what callers use is re-exported here (and in [`store`] and
//! [`escrow`], the two namespaces that stay):
//!
//! - `admission`: per-host quiescence tickets and the barrier at the source (HO-7, HO-8,
//!   HO-10, HO-S2, HO-S3): [`AdmissionGate`].
//! - `attach`: a client's accept -> persist -> attach (HO-7, HO-S3): [`Attach`].
//! - `attempt`: the source-led attempt machine (HO-S2..S6, HO-A1..A6): [`SourceHandoff`].
//! - `cell`: the source cell as a sans-IO endpoint: the per-host machine table, machine and
//!   session identities, control installation, drain and undrain (HO-A4, HO-A5, HO-L1):
//!   [`SourceCell`].
//! - [`store`]: the reference assignment transaction, locked reconciliation, registration and
//!   drain fence (HO-S4, HO-A1, HO-A2, HO-A4..A6), as sans-IO plans (`CommitPlan` & co.).
//! - `director` and `policy`: eligibility, cohort, read-only paged selection, dispatch
//!   budget (HO-3, HO-S1, HO-S2, HO-C1): [`SelectionPass`], [`DispatchBudget`], [`evaluate`].
//! - `dispatch`: the director's concurrent dispatch, bounded in total and per source cell,
//!   each cell backed off on its own, the cursor moved past a page only once its dispatches
//!   ended (HO-L3, SCALE-6): [`Dispatcher`].
//! - [`escrow`]: the escrowed limit shards of the SQL stores (HO-S4 at scale), pure functions.
//! - `sweep_lease`: one active director per sweep under a lease in the store, and the sweep's
//!   period against HO-3's freshness window (SCALE-6): [`SweepLease`], [`decide_sweep_lease`].
//! - `enrol` and `lifecycle`: a desktop's enrolment (SCALE-1) and the cell's identity lease and
//!   the director's start (HO-L2, OPS-1): [`LeaseKeeper`], [`StartAttempts`].
//! - `internal_auth`: whether a signed internal request is for this cell process, timely,
//!   and not a replay (SEC-2, SEC-2a).
//! - `reconnect`: what a client does after a cell closed or refused it: resolve, retry or
//!   stop (OPS-2).
//! - `ids`: exact source authority and the UUIDv5 operation id (HO-S1).
//!
//! # One face per machine
//!
//! Every machine here ([`SourceCell`], [`SourceHandoff`], [`AdmissionGate`], [`Attach`],
//! [`LeaseKeeper`], [`StartAttempts`], [`SelectionPass`], [`DispatchBudget`], the store plans)
//! has the same face, in the style of quinn-proto:
//!
//! - **inputs** are `handle_*` calls (`handle_request`, `handle_acquire`,
//!   `handle_transaction_result`, `handle_timeout`, ...), the time first where the decision
//!   reads it: `handle_x(now, ..)`. A store plan takes one input enum, `handle(input)`, its time
//!   given at `new`;
//! - **outputs** are drained with `poll*` (`poll_action`, `poll_query`, `poll`) after every
//!   input, in order;
//! - **the next deadline** is `poll_timeout()`: the caller feeds `handle_timeout(now, ..)` when
//!   it passes;
//! - **state** is read through accessors named like the field they read (`gate()`,
//!   `counters()`, `attempt()`); nothing on a machine is a public field.
//!
//! Pure decisions (`evaluate`, the `check_*` of `policy`, [`escrow`], `store`'s `decide`) stay
//! functions over their inputs.
//!
//! HO-1 / HO-2: nothing here can close an established client: the only closing output is
//! [`HandoffAction::RetireSourceDraining`], emitted only for a source whose barrier stood
//! over zero tickets. Idleness is the real ticket count at the source, never a grace timer.

mod admission;
mod attach;
mod attempt;
mod cell;
mod director;
mod director_watch;
mod dispatch;
mod enrol;
pub mod escrow;
mod ids;
mod internal_auth;
mod journal;
mod lifecycle;
mod policy;
mod reconnect;
pub mod store;
mod sweep_lease;

pub use admission::{
    AbandonReason, ActivityLease, AdmissionGate, AdmissionRefusal, Barrier, ClosedReason,
    GateState, Heartbeat, NotCounted, QuiescenceCounters, ReleaseReport, Revalidation, Ticket,
    TicketId, WorkKind, MAX_CLIENTS_PER_HOST, MAX_TICKETS_PER_HOST, WRONG_CELL_CLOSE_CODE,
};
pub use attach::{Attach, AttachClose, AttachPhase, AttachStep, PersistFailed};
pub use attempt::{
    Ambiguity, Attempt, AttemptRef, Begin, Disposition, DrainReason, DurableResult, FenceResult,
    FenceRetry, HandoffAction, HandoffRefusal, HandoffReply, HandoffResult, Ignored, PendingFence,
    Phase, QuarantineCause, RebindRefusal, RetireReason, SourceConfig, SourceHandoff,
    DEFAULT_REFUSAL_HOLD_MS, FENCE_RETRY_MAX_MS, FENCE_RETRY_MIN_MS,
};
pub use cell::{
    admission_refusal_name, answer_from_record, client_close_code, close_code, install_turn_away,
    needs_durable_record, refusal_name, register_turn_away, reply_reason, CellAction, CellWork,
    CloseReason, Fed, InstallKind, InstallRefusal, Installed, MachineId, SessionId, SourceCell,
    TurnAway, TurnAwayFrame, UndrainRefusal, STORE_UNAVAILABLE_TURN_AWAY,
};
pub use director::{
    evaluate, explain, explain_line, CandidateRow, CandidateView, Decision, DirectorPolicy,
    Dispatch, DispatchBudget, DispatchClass, DispatchOutcome, Evidence, Improvement, PageCursor,
    PageQuery, ScanLimits, ScanLimitsError, SelectionPass, TargetView, EXPLAIN_PREFIX,
    MAX_DISPATCH_PER_PASS, MAX_PAGES_PER_PASS, MAX_PAGE_SIZE,
};
pub use director_watch::{
    CellClocks, ClockChange, ClockOffset, ClockSample, PassChange, PassHealth, RefusalReason,
    StoreRefusalChange, StoreRefusals, INTERNAL_AUTH_WINDOW_MS,
};
pub use dispatch::{
    Admit, CellBackoff, CellChange, CellFailure, DispatchLimits, DispatchLimitsError, DispatchNext,
    DispatchTicket, Dispatcher, PageId, MAX_BACKOFF_MS, MAX_IN_FLIGHT, MAX_PAGES_AHEAD,
};
pub use enrol::{
    after_insert, after_register, EnrolRefusal, RegisterTry, Registered, RegistrationStep,
};
pub use ids::{
    AuthorityCheck, AuthorityField, CellId, Epoch, Generation, HostId, Incarnation, OpId,
    SourceAuthority, OP_ID_NAMESPACE,
};
pub use internal_auth::{check_claim, Claim, ClaimRefusal, Identity, NonceRefusal, ReplayCache};
pub use journal::{CellRecord, DirectorRecord, Examined, StoreAnswer, StoreCall, WorkOp};
pub use lifecycle::{
    LeaseKeeper, LeaseStep, LeaseTiming, Renewal, RetryStep, StartAttempts, StartFailure,
    StartRetry, DEFAULT_LEASE_DRIFT_MS, DIRECTOR_START_RETRY,
};
pub use policy::{
    check_cohort, check_freshness, check_improvement, check_target_live, cohort_bucket,
    HandoffRequest, Ineligible, Measurement, PolicyConfig,
};
pub use reconnect::{after_close, after_refused_upgrade, AfterClose, StopWhy};
pub use store::{AssignmentStore, StoreConfig, TxnOutcome};
pub use sweep_lease::{
    check_sweep_period, decide as decide_sweep_lease, sweep_period_ms,
    validate as validate_sweep_lease, LeaseDecision, PageGate, SweepLease, SweepLeaseError,
    SweepLeaseRow, MAX_SWEEP_LEASE_MS,
};
