//! Logging (OPS-2): `tracing` to stderr, filtered by `RUST_LOG` (default `info`), plain text
//! (colour only on a terminal) or one JSON object a line (`--log-format json`).

use std::io::IsTerminal;

/// How log lines are written.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines; ANSI colour only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object per line (for log shippers).
    Json,
}

/// What every process filters when `RUST_LOG` is not set. PostgreSQL's notices (for example
/// "relation already exists, skipping" from an idempotent migration at every start) are
/// informational for the database, not for an operator.
pub const DEFAULT_FILTER: &str = "info,sqlx::postgres::notice=warn";

/// Install the subscriber once. A `RUST_LOG` that does not parse is an error naming it (not a
/// silent fall-back to `info`).
pub fn init(format: LogFormat) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(value) if !value.trim().is_empty() => tracing_subscriber::EnvFilter::builder()
            .parse(&value)
            .map_err(|e| format!("RUST_LOG={value:?} is not a log filter: {e}"))?,
        Ok(_) | Err(std::env::VarError::NotPresent) => {
            tracing_subscriber::EnvFilter::new(DEFAULT_FILTER)
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err("RUST_LOG is not valid UTF-8".to_owned())
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    // A second call (tests) finds a subscriber installed: nothing to do.
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}
