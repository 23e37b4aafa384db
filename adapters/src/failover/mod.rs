//! Failover over real sockets: relay server, manager channel, signed directory, the supervisor
//! driver. The drill and the `switchyard` subcommands that run them are in `switchyard-tools`.

pub mod channel;
pub mod directory;
pub mod driver;
pub mod relay;
