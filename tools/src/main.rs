//! `switchyard`: relays, clients, drills, cells, the director, and key helpers.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use switchyard_adapters::telemetry::LogFormat;
use switchyard_tools::{failover, handoff};

#[derive(Parser, Debug)]
#[command(
    name = "switchyard",
    version,
    about = "Switchyard relay failover and idle handoff"
)]
struct Cli {
    /// OPS-2: log lines as plain text (colour only on a terminal) or one JSON object a line.
    #[arg(long, global = true, value_enum, env = "SWITCHYARD_LOG_FORMAT", default_value_t = LogFormat::Text)]
    log_format: LogFormat,
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
    if let Err(message) = switchyard_adapters::telemetry::init(cli.log_format) {
        eprintln!("switchyard: {message}");
        return ExitCode::from(2);
    }
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
