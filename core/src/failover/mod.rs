//! Relay failover (FO): the supervisor that keeps one channel to a relay from a signed
//! candidate list. See part FO of `REQUIREMENTS.md`; each rule carries its ID here.

mod config;
mod freshness;
mod interned;
mod machine;
mod outputs;
mod render;
mod types;

pub use config::*;
pub use freshness::{check_freshness, AcceptedDirectory, FreshnessError};
pub use machine::{
    check_candidate_list, PendingOpen, ProbeSchedule, Supervisor, MAX_CANDIDATES,
    MAX_PENDING_OUTPUTS, MAX_TRACKED_URLS,
};
pub use render::{
    render, renders_with_prefix, ATTACH_PREFIX, EXEMPT_MARKER, SKIP_PREFIX, SWITCH_PREFIX,
};
pub use types::*;
