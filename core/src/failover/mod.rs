//! Relay failover (FO): the supervisor that keeps one channel to a relay from a signed
//! candidate list. See part FO of `REQUIREMENTS.md`; each rule carries its ID here.
//!
//! # The face
//!
//! One machine, [`Supervisor`], with one face in the quinn-proto style:
//!
//! - **in**: a small, uniform `handle_*(now, …)` family, one method per kind of input, `now`
//!   always first: [`handle_tick`](Supervisor::handle_tick),
//!   [`handle_directory`](Supervisor::handle_directory),
//!   [`handle_channel_state`](Supervisor::handle_channel_state),
//!   [`handle_open_succeeded`](Supervisor::handle_open_succeeded),
//!   [`handle_open_failed`](Supervisor::handle_open_failed). A family rather than one
//!   `handle(now, Input)`: the inputs borrow what they carry (a directory is a `&[RelayUrl]` the
//!   caller keeps), an owned input enum would copy the list on every refresh (the model checker
//!   feeds millions), and each method returns the one fact its caller needs (a
//!   [`DirectoryOutcome`], whether an open result was taken) with its own type. The adapter's
//!   random shortening of the next probe interval (FO-X3) is a setting, not an input:
//!   [`set_probe_jitter_ms`](Supervisor::set_probe_jitter_ms) decides nothing by itself.
//! - **out**: [`poll_output`](Supervisor::poll_output) drains the decided [`Output`]s in order
//!   ([`ChannelAction`]s to execute, [`Event`]s to log; the caller drains after every input);
//!   [`poll_timeout`](Supervisor::poll_timeout) is when the next tick is due.
//! - **read**: accessors that decide nothing ([`stats`](Supervisor::stats),
//!   [`current`](Supervisor::current), [`open_in_flight`](Supervisor::open_in_flight),
//!   [`cooldown_rows`](Supervisor::cooldown_rows), …).
//!
//! The adapter (`adapters/src/failover/driver.rs`), the model (`spec/src/failover/`) and the
//! tests call this same face.
//!
//! # Fields: accessors on state, public fields only on plain data
//!
//! A type that is the machine's state, or a view of it that holds an invariant the machine keeps
//! ([`Supervisor`], [`PendingOpen`], [`ProbeSchedule`], [`CooldownEntry`]), is read through
//! accessors named like its fields (`open.url()`, `entry.until()`); only the machine writes it.
//! A plain data value carried in or out, whose fields hold no invariant between them, keeps
//! public fields: the thresholds as a config record ([`Thresholds`]), the events and what they
//! carry ([`Event`], [`Skip`], [`SwitchRecord`], …), the snapshots handed out
//! ([`Stats`], [`FailoverCounters`], [`CooldownView`]) and the caller's record of the last
//! accepted directory ([`AcceptedDirectory`]).
//!
//! # Modules
//!
//! The submodules are private; everything a caller may name is re-exported below, so callers
//! import `switchyard_core::failover::X`.

mod config;
mod freshness;
mod interned;
mod journal;
mod machine;
mod outputs;
mod render;
mod types;

pub use config::{
    parse_digits, ConfigError, Thresholds, ALL_VARS, DEFAULT_HEARTBEAT_MS,
    DEFAULT_HEARTBEAT_TIMEOUT_MS, MAX_DURATION_MS, VAR_CHECK_MS, VAR_COOLDOWN_MS, VAR_DEADLINE_MS,
    VAR_EXEMPT, VAR_GRACE_MS, VAR_HEARTBEAT_MS, VAR_HEARTBEAT_TIMEOUT_MS, VAR_MIN_ATTEMPTS,
    VAR_PROBE_MAX_MS, VAR_PROBE_MIN_MS, VAR_UP_TIMEOUT_MS,
};
pub use freshness::{check_freshness, AcceptedDirectory, FreshnessError};
pub use journal::{FailoverEffect, FailoverInput, FailoverRecord};
pub use machine::{
    check_candidate_list, PendingOpen, ProbeSchedule, Supervisor, MAX_CANDIDATES,
    MAX_PENDING_OUTPUTS, MAX_TRACKED_URLS,
};
pub use render::{
    render, render_explained, renders_with_prefix, ATTACH_PREFIX, EXEMPT_MARKER, SKIP_PREFIX,
    SWITCH_PREFIX,
};
pub use types::{
    ChannelAction, ChannelState, CooldownEntry, CooldownKind, CooldownView, DirectoryOutcome,
    DirectoryRejection, DirectorySource, Event, Exclusion, ExclusionRule, Exclusions, Exemption,
    FailoverCounters, HealthSnapshot, OpenFailure, Origin, Output, RelayUrl, Skip, Stats,
    SwitchReason, SwitchRecord, MAX_EXPLAINED_EXCLUSIONS,
};
