//! Failover over real sockets.

pub mod cli;
