//! The handoff subcommands of `switchyard`.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum HandoffCommand {
    /// Run a relay cell.
    Cell,
}

pub async fn run(command: HandoffCommand) -> ExitCode {
    match command {
        HandoffCommand::Cell => ExitCode::from(2),
    }
}
