//! Thin tokio adapters around `switchyard-core`. They execute what the core decides — open and
//! close sockets, run transactions, log events — and decide nothing themselves.

pub mod failover;
pub mod files;
pub mod handoff;
pub mod journal;
pub mod lifecycle;
pub mod machine;
pub mod net;
pub mod probes;
pub mod sd_notify;
pub mod serve;
#[cfg(feature = "sim")]
pub mod sim;
pub mod stop;
pub mod telemetry;
