//! HO-A2: how a store call that did not produce an answer is read. The executor of a plan only
//! classifies what happened ([`StoreFault`]); the reading ([`durable_result_of`]) is decided
//! here, where the model and HO-A2's tests judge it. Never a rollback: a failed call is either
//! "unavailable" (nothing ran, or nothing trustworthy came back: quarantine, reconcile later)
//! or "ambiguous" (it may have committed: reconcile by op id under the lock).

use serde::{Deserialize, Serialize};

use super::rows::TxnOutcome;
use crate::handoff::attempt::{Ambiguity, DurableResult};

/// What happened to a store call that gave no answer, as its executor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StoreFault {
    /// No transaction began (no connection, BEGIN refused): nothing ran.
    Unavailable,
    /// A statement inside the transaction failed, or wrote another number of rows than its
    /// step asked for; the transaction was dropped before COMMIT.
    InTransaction,
    /// The client-side bound of the whole call fired (the server may still commit the
    /// dropped transaction until its own timeout).
    TimedOut,
    /// COMMIT was sent and its answer never came back (or a test lost it on purpose).
    CommitLost,
    /// A row or value the store returned is out of range.
    BadRow,
}

/// HO-A2: the source machine's reading of a failed store call.
#[must_use]
pub fn durable_result_of(fault: StoreFault) -> DurableResult {
    match fault {
        StoreFault::Unavailable | StoreFault::BadRow => DurableResult::StoreUnavailable,
        // The transaction did not commit as far as the client saw, but a dropped connection
        // cannot prove it: the safe reading is "unknown" (the source reconciles by op id).
        StoreFault::InTransaction => DurableResult::Ambiguous(Ambiguity::TransportError),
        StoreFault::TimedOut => DurableResult::Ambiguous(Ambiguity::Timeout),
        StoreFault::CommitLost => DurableResult::Ambiguous(Ambiguity::ResultLost),
    }
}

/// HO-A2: the reading of a locked reconciliation's answer: `None` (the fence could not be
/// written: store full) keeps the source quarantined, like an unavailable store.
#[must_use]
pub fn reconcile_result(answer: Option<TxnOutcome>) -> DurableResult {
    answer.map_or(DurableResult::StoreUnavailable, DurableResult::Done)
}
