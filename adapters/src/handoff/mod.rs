//! Idle handoff over real sockets and a real database.

pub mod cli;
