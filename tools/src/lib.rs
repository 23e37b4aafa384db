//! The tools around the drivers: the `switchyard` binary's subcommands (CLI wiring), the failover
//! drill and its timeline, and the demo desktop and mobile commands. They run what
//! `switchyard-adapters` drives; nothing here decides (the decisions are `switchyard-core`'s).

pub mod conform_online;
pub mod failover;
pub mod handoff;
#[cfg(feature = "sim")]
pub mod sim;
