//! Switchyard core: pure, deterministic state machines.
//!
//! Nothing in this crate reads a clock, spawns, prints, or touches a socket or file. Time comes
//! in as [`MonoMs`]; decisions go out as data, drained by the caller (in the style of
//! quinn-proto: `handle_*(now, ..)` in, `poll_*` out).

#![forbid(unsafe_code)]

pub mod failover;
pub mod handoff;
pub mod limits;
mod time;

pub use time::MonoMs;
