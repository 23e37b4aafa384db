//! `switchyard`: relays, clients, drills, cells, the director, and key helpers.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use switchyard_adapters::{failover, handoff};

#[derive(Parser, Debug)]
#[command(
    name = "switchyard",
    version,
    about = "Switchyard relay failover and idle handoff"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    #[command(flatten)]
    Failover(failover::cli::FailoverCommand),
    #[command(flatten)]
    Handoff(handoff::cli::HandoffCommand),
    /// Operator commands for idle-handoff cells: emergency drain and undrain of a running cell,
    /// and a cell's own internal-request key (SEC-2).
    #[command(name = "handoff", subcommand)]
    HandoffOperator(handoff::cli::OperatorCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    switchyard_adapters::telemetry::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("switchyard: cannot start the tokio runtime: {error}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Failover(command) => failover::cli::run(command).await,
            Command::Handoff(command) => handoff::cli::run(command).await,
            Command::HandoffOperator(command) => handoff::cli::run_operator(command).await,
        }
    })
}
