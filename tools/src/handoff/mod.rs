//! The handoff tools: the `switchyard` subcommands `cell`, `director`, the demo participants
//! `desktop` and `mobile`, the token helpers and the operator commands (`handoff drain |
//! undrain | cell-key`).

pub mod cli;
