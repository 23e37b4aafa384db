//! Idle handoff (HO). See `../shared/REQUIREMENTS.md` part HO and
//! `docs/REQUIREMENTS-MAP-HO.md` for where each requirement lives.
//!
//! - [`admission`]: per-host quiescence tickets and the barrier at the source (HO-7, HO-8,
//!   HO-10, HO-S2, HO-S3).
//! - [`attach`]: a client's accept -> persist -> attach (HO-7, HO-S3).
//! - [`attempt`]: the source-led attempt machine (HO-S2..S6, HO-A1..A6).
//! - [`cell`]: the source cell as a sans-IO endpoint: the per-host machine table, machine and
//!   session identities, control installation, drain and undrain (HO-A4, HO-A5, HO-L1).
//! - [`store`]: the reference assignment transaction, locked reconciliation, registration and
//!   drain fence (HO-S4, HO-A1, HO-A2, HO-A4..A6).
//! - [`director`] and [`policy`]: eligibility, cohort, read-only paged selection, dispatch
//!   budget (HO-3, HO-S1, HO-S2, HO-C1).
//! - [`internal_auth`]: whether a signed internal request is for this cell process, timely,
//!   and not a replay (SEC-2, SEC-2a).
//! - [`reconnect`]: what a client does after a cell closed or refused it: resolve, retry or
//!   stop (OPS-2).
//! - [`ids`]: exact source authority and the UUIDv5 operation id (HO-S1).
//!
//! HO-1 / HO-2: nothing here can close an established client: the only closing output is
//! [`attempt::Action::RetireSourceDraining`], emitted only for a source whose barrier stood
//! over zero tickets. Idleness is the real ticket count at the source, never a grace timer.

pub mod admission;
pub mod attach;
pub mod attempt;
pub mod cell;
pub mod director;
pub mod enrol;
pub mod escrow;
pub mod ids;
pub mod internal_auth;
pub mod lifecycle;
pub mod policy;
pub mod reconnect;
pub mod store;

pub use admission::{
    AdmissionGate, AdmissionRefusal, Counters, ReleaseReport, Revalidation, Ticket, WorkKind,
    MAX_TICKETS_PER_HOST, WRONG_CELL_CLOSE_CODE,
};
pub use attempt::{
    Action, AttemptRef, Begin, DurableResult, HandoffReply, HandoffResult, SourceConfig,
    SourceHandoff,
};
pub use cell::{CellAction, Fed, MachineId, SessionId, SourceCell, Work};
pub use ids::{
    CellId, Epoch, Generation, HostId, Incarnation, OpId, SourceAuthority, OP_ID_NAMESPACE,
};
pub use policy::{HandoffRequest, Ineligible, Measurement, PolicyConfig};
pub use store::{AssignmentStore, StoreConfig, TxnOutcome};
