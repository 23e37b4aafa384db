//! Failover over real sockets: relay server, manager channel, signed directory, the supervisor
//! driver, the drill, and the `switchyard` subcommands that run them.

pub mod channel;
pub mod cli;
pub mod directory;
pub mod drill;
pub mod driver;
pub mod relay;
pub mod timeline;

/// Resolves once `stop` says stopped (or its sender is gone). The borrow of the watched value
/// ends here, so callers can `select!` on it across awaits.
pub(crate) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}
