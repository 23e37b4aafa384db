//! The failover tools: the `switchyard` subcommands (`relay`, `client`, `drill`, `keygen`,
//! `sign-directory`), the drill that runs the seed's scenes on loopback, and its timeline.

pub mod cli;
pub mod drill;
pub mod timeline;
