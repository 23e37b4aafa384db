//! The failover tools: the `switchyard` subcommands (`relay`, `client`, `drill`, `keygen`,
//! `sign-directory`), the drill that runs the seed's scenes on loopback, its timeline, and the
//! forwarder that makes a drill host go dark (FO-X4).

pub mod cli;
pub mod drill;
pub mod proxy;
pub mod timeline;
