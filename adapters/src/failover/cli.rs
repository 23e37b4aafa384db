//! The failover subcommands of `switchyard`.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum FailoverCommand {
    /// Run a relay server.
    Relay,
}

pub async fn run(command: FailoverCommand) -> ExitCode {
    match command {
        FailoverCommand::Relay => ExitCode::from(2),
    }
}
