//! A client's accept → persist → attach at the source (HO-7, HO-S3), as a small machine that
//! the cell adapter (`cell/clients.rs`) and the model checker (`switchyard-spec`) both drive.
//!
//! Order, and why: the client's `Accept` ticket is taken before the first await
//! ([`SourceCell::handle_acquire`]) and stays counted until the client is attached as a `ClientConn`
//! ([`SourceCell::convert`], one synchronous swap) or closed. In between, the host's activity
//! is persisted (the store's `renew_activity`) while the accept still counts, so the barrier can
//! never install over a client that is half attached (HO-7: "attaches waiting for durable
//! persistence" count). Every await is followed by a re-check (HO-S3: a source retired, drained
//! or replaced meanwhile abandons the continuation). A persist that fails releases the accept
//! and closes the client with a named reason ([`AttachClose::ActivityNotPersisted`]).
//!
//! ```text
//! new(accept) -> poll: revalidate -> Persist{authority} -> handle_persisted(ok | failed)
//!   -> poll: ok: revalidate, convert -> Attached(conn) | Close(abandoned | refused)
//!            failed: release -> Close(activity_not_persisted)
//! ```
//!
//! The machine owns the ticket until it hands it out (`Attached`) or releases it; the adapter's
//! guard calls [`Attach::handle_cancel`] if its task ends in between (socket gone, cancellation).

use serde::{Deserialize, Serialize};

use super::admission::{AdmissionRefusal, ReleaseReport, WorkKind};
use super::cell::{admission_refusal_name, client_close_code, close_code, CellWork, SourceCell};
use super::ids::SourceAuthority;

/// Where the attach is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AttachPhase {
    /// The accept ticket is held; nothing awaited since.
    Accepted,
    /// The activity write is out (the accept still counts).
    Persisting,
    /// The activity is durable: re-check, then attach.
    Persisted,
    /// The activity write failed: release and close.
    PersistFailed,
    /// Attached or closed: the machine holds nothing.
    Done,
}

/// Why a client that was accepted is closed before it attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttachClose {
    /// HO-S3: the source retired, drained or was replaced during an await (the ticket is
    /// already released by the gate): the host is not served here now, resolve again.
    Abandoned,
    /// The attach itself was refused (e.g. the host is full).
    Refused(AdmissionRefusal),
    /// The host's activity could not be persisted (store unreachable or timed out): the accept
    /// is released; the client retries.
    ActivityNotPersisted,
}

impl AttachClose {
    /// The WebSocket close code the client gets.
    #[must_use]
    pub fn close_code(self) -> u16 {
        match self {
            AttachClose::Abandoned => close_code::WRONG_CELL,
            AttachClose::Refused(r) => client_close_code(r),
            AttachClose::ActivityNotPersisted => close_code::TRY_AGAIN,
        }
    }

    /// Stable name (the close frame's reason and logs).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            AttachClose::Abandoned => "abandoned",
            AttachClose::Refused(r) => admission_refusal_name(r),
            AttachClose::ActivityNotPersisted => "activity_not_persisted",
        }
    }
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttachStep {
    /// Persist the host's activity under this authority (the store's `renew_activity`), then
    /// [`Attach::handle_persisted`] and [`Attach::poll`] again.
    Persist { authority: SourceAuthority },
    /// The persist is out: nothing to do until its result.
    Wait,
    /// Close the client with this reason. Nothing is held any more.
    Close(AttachClose),
    /// Attached: the client connection's ticket, the caller's from now on (released when the
    /// client leaves).
    Attached(CellWork),
}

/// The persist of the activity did not happen (or its result is unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PersistFailed;

/// One accepted client on its way to attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Attach {
    /// The accept ticket while held.
    work: Option<CellWork>,
    phase: AttachPhase,
}

impl Attach {
    /// Own the `Accept` ticket [`SourceCell::handle_acquire`] just handed out.
    #[must_use]
    pub fn new(accept: CellWork) -> Attach {
        crate::invariant_eq!(accept.ticket.kind, WorkKind::Accept);
        Attach {
            work: Some(accept),
            phase: AttachPhase::Accepted,
        }
    }

    #[must_use]
    pub fn phase(&self) -> AttachPhase {
        self.phase
    }

    /// The accept ticket, while the machine holds it.
    #[must_use]
    pub fn ticket(&self) -> Option<CellWork> {
        self.work
    }

    /// The next step, after every input (the first call follows the socket upgrade's await).
    pub fn poll(&mut self, cell: &mut SourceCell) -> AttachStep {
        let Some(work) = self.work else {
            self.phase = AttachPhase::Done;
            return AttachStep::Wait;
        };
        let step = match self.phase {
            AttachPhase::Accepted => match cell.authority(work.host) {
                Some(authority) if cell.handle_revalidate(&work) => {
                    self.phase = AttachPhase::Persisting;
                    return AttachStep::Persist { authority };
                }
                _ => self.abandoned(),
            },
            AttachPhase::Persisting | AttachPhase::Done => return AttachStep::Wait,
            AttachPhase::PersistFailed => {
                let _ = cell.handle_release(&work);
                AttachStep::Close(AttachClose::ActivityNotPersisted)
            }
            AttachPhase::Persisted => {
                if !cell.handle_revalidate(&work) {
                    self.abandoned()
                } else {
                    match cell.handle_convert(&work, WorkKind::ClientConn) {
                        Ok(conn) => AttachStep::Attached(conn),
                        Err(refusal) => {
                            let _ = cell.handle_release(&work);
                            AttachStep::Close(AttachClose::Refused(refusal))
                        }
                    }
                }
            }
        };
        self.work = None;
        self.phase = AttachPhase::Done;
        step
    }

    /// HO-S3: the re-check failed: the gate has released the ticket already.
    fn abandoned(&self) -> AttachStep {
        AttachStep::Close(AttachClose::Abandoned)
    }

    /// The activity write's result. `false`: no write was out (ignored).
    pub fn handle_persisted(&mut self, result: Result<(), PersistFailed>) -> bool {
        if self.phase != AttachPhase::Persisting {
            return false;
        }
        self.phase = match result {
            Ok(()) => AttachPhase::Persisted,
            Err(PersistFailed) => AttachPhase::PersistFailed,
        };
        true
    }

    /// HO-7: the driver's task ended before the attach did (socket gone, cancelled): release
    /// the ticket still held. `None`: nothing was held.
    pub fn handle_cancel(&mut self, cell: &mut SourceCell) -> Option<ReleaseReport> {
        let work = self.work.take()?;
        self.phase = AttachPhase::Done;
        cell.handle_release(&work)
    }
}
