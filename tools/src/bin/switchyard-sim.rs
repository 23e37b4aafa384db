//! `switchyard-sim`: runs the SIM-1 simulation for one seed or a range of seeds and prints
//! what each found; exits 1 if any seed failed (each failure prints the command that replays
//! it). Built only with the `sim` feature:
//!
//! `cargo run --release -p switchyard-tools --features sim --bin switchyard-sim -- --seeds 0..20 --hours 24`
//!
//! A failing seed prints the line that replays it (the same seed and commit give the same run).

// The reports are this command's output.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use clap::Parser;
use switchyard_tools::sim::{run, SimConfig};

/// Run the deterministic simulation of a small fleet (SIM-1) for some seeds.
#[derive(Debug, Parser)]
#[command(name = "switchyard-sim", version)]
struct Args {
    /// One seed (replays a run).
    #[arg(long, env = "SWITCHYARD_SIM_SEED", conflicts_with = "seeds")]
    seed: Option<u64>,
    /// A range of seeds, `A..B` (B excluded).
    #[arg(long, env = "SWITCHYARD_SIM_SEEDS", value_parser = parse_range, default_value = "0..4")]
    seeds: std::ops::Range<u64>,
    /// Simulated hours per seed (30 days: 720).
    #[arg(long, env = "SWITCHYARD_SIM_HOURS", default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..=24 * 366), conflicts_with = "minutes")]
    hours: u64,
    /// Simulated minutes per seed, instead of hours (the replay line of a short run).
    #[arg(long, env = "SWITCHYARD_SIM_MINUTES", value_parser = clap::value_parser!(u64).range(1..=60 * 24 * 366))]
    minutes: Option<u64>,
    /// Also print every fault injected.
    #[arg(long)]
    faults: bool,
    /// Write each seed's journals (clients, cells, directors) to `DIR/seed-N.jsonl` (the folder
    /// is made if missing).
    #[arg(long, env = "SWITCHYARD_SIM_JOURNALS", value_name = "DIR")]
    journals: Option<std::path::PathBuf>,
}

fn parse_range(text: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("{text:?}: expected A..B, for example 0..20"))?;
    let a: u64 = a.parse().map_err(|e| format!("{a:?}: {e}"))?;
    let b: u64 = b.parse().map_err(|e| format!("{b:?}: {e}"))?;
    if a >= b {
        return Err(format!("{text:?}: the range is empty"));
    }
    Ok(a..b)
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The drivers' logs, when RUST_LOG asks for them (off by default: a day is many lines).
    if std::env::var_os("RUST_LOG").is_some() {
        if let Err(e) =
            switchyard_adapters::telemetry::init(switchyard_adapters::telemetry::LogFormat::Text)
        {
            eprintln!("switchyard-sim: {e}");
            return ExitCode::from(2);
        }
    }
    // Inclusive: `--seed 18446744073709551615` is a seed too.
    let seeds = match args.seed {
        Some(s) => s..=s,
        None => args.seeds.start..=args.seeds.end.saturating_sub(1),
    };
    // A folder that cannot be written is refused before a day is simulated, not after.
    if let Some(dir) = &args.journals {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!(
                "switchyard-sim: --journals: cannot make {}: {e}",
                dir.display()
            );
            return ExitCode::from(2);
        }
    }
    let mut failed = 0u64;
    for seed in seeds {
        let started = std::time::Instant::now();
        let report = run(SimConfig {
            seed,
            minutes: args.minutes.unwrap_or(args.hours * 60),
            keep_journals: args.journals.is_some(),
        });
        println!(
            "{} (in {:.1} s)",
            report.summary(),
            started.elapsed().as_secs_f64()
        );
        if args.faults {
            for (at, what) in &report.faults {
                println!("  fault at {at} ms: {what}");
            }
        }
        if let Some(dir) = &args.journals {
            let path = dir.join(format!("seed-{seed}.jsonl"));
            if let Err(e) = std::fs::write(&path, &report.journals) {
                eprintln!(
                    "switchyard-sim: --journals: cannot write {}: {e}",
                    path.display()
                );
                return ExitCode::from(2);
            }
        }
        if !report.passed() {
            failed += 1;
        }
    }
    if failed > 0 {
        eprintln!("switchyard-sim: {failed} seed(s) failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
