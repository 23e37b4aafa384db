//! The assignment store: the bounded assignment transaction (HO-S4), locked reconciliation by
//! op id (HO-A1 / HO-A2), registration (HO-A4), enrolment (SCALE-1 / SCALE-2), the
//! emergency-drain fence (HO-A5), bounded migration recovery (HO-A6) and the cell identity
//! lease (HO-L2).
//!
//! Split by concern:
//! - `rows`: the row types, settings, bounds, errors and answers every store shares;
//! - `decide`: the pure decisions, each a function over the rows a store read under its
//!   locks, returning the rows to write or the answer;
//! - `plan`: the store operations as sans-IO plans (commit, reconcile, register, enrol,
//!   fence): each asks for the IO it needs as a step, takes the result back, decides with
//!   `decide` (and `super::escrow` for the limit shards), and ends with the answer. The
//!   sequence of reads, checks, savepoint and writes exists here only;
//! - `reference`: the in-memory [`AssignmentStore`], an executor of the plans over its maps
//!   (and the store the model checker runs); its [`StoreSnapshot`] is the one dump of the
//!   tables the SQL stores compare against;
//! - `node`: HA-1, which database node of a highly available PostgreSQL the SQL store uses
//!   (the walk over a multi-host URL, when to walk again), the connection budget and the
//!   distance rule of the transaction timeout;
//! - `result`: HO-A2's reading of a failed store call ([`StoreFault`] → `DurableResult`).
//!
//! The SQL stores (`switchyard_adapters::handoff::store`) execute the same plans, so the model
//! checks the order production runs. The modules are private: every item is re-exported here.

mod decide;
mod node;
mod plan;
mod reference;
mod result;
mod rows;

pub use decide::*;
pub use node::*;
pub use plan::*;
pub use reference::*;
pub use result::*;
pub use rows::*;
