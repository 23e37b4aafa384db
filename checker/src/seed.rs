//! `switchyard-check conform --seed-format`: the TypeScript production system's
//! `[relay-switch]` / `[relay-skip]` lines (seed 000) judged against the spec (CONF-1).
//!
//! The reading and the search are `switchyard_spec::seed_lines`; this file is the command line:
//! the flags ([`SeedArgs`], flattened into `conform`), reading the files (`-` = stdin), the
//! report (text or JSON) and the exit status (0 every file conforms, 1 a departure, 2 an
//! unreadable file or line, or bad arguments).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use switchyard_core::failover::{
    RelayUrl, Thresholds, VAR_CHECK_MS, VAR_COOLDOWN_MS, VAR_EXEMPT, VAR_GRACE_MS,
    VAR_MIN_ATTEMPTS, VAR_PROBE_MAX_MS, VAR_PROBE_MIN_MS, VAR_UP_TIMEOUT_MS,
};
use switchyard_spec::seed_lines::{self, ObsKind, ParsedLines, SeedConfig, Verdict};

/// The `--seed-format` flags of `conform`.
#[derive(Args, Debug, Clone)]
pub struct SeedArgs {
    /// Seed format: the directory list, comma-separated, in directory order (production:
    /// wss://alotbuy.com/dshs-relay,wss://relay-direct.alotbuy.com/dshs-relay,wss://106.54.21.172/dshs-relay).
    /// Every directory refresh the search places delivers this list.
    #[arg(long, value_delimiter = ',', value_name = "URL,URL,…")]
    pub candidates: Vec<String>,
    /// Seed format: the channel at the start of each file [default: the first switch line's
    /// FROM, else the first candidate].
    #[arg(long, value_name = "URL")]
    pub current: Option<String>,
    /// Seed format: RELAY_FAILOVER_COOLDOWN_MS the system ran with.
    #[arg(long, value_name = "MS", default_value = "300000")]
    pub cooldown_ms: String,
    /// Seed format: RELAY_FAILOVER_GRACE_MS.
    #[arg(long, value_name = "MS", default_value = "15000")]
    pub grace_ms: String,
    /// Seed format: RELAY_FAILOVER_MIN_ATTEMPTS.
    #[arg(long, value_name = "N", default_value = "3")]
    pub min_attempts: String,
    /// Seed format: RELAY_FAILOVER_CHECK_MS (the tick grid).
    #[arg(long, value_name = "MS", default_value = "2000")]
    pub check_ms: String,
    /// Seed format: RELAY_FAILOVER_UP_TIMEOUT_MS.
    #[arg(long, value_name = "MS", default_value = "12000")]
    pub up_timeout_ms: String,
    /// Seed format: RELAY_FAILOVER_EXEMPT (1 on, 0 off).
    #[arg(long, value_name = "0|1", default_value = "1")]
    pub exempt: String,
    /// Seed format: RELAY_FAILOVER_PROBE_MAX_MS. The TypeScript system has no probing (FO-X3 is
    /// this product's), so 0 (off) by default.
    #[arg(long, value_name = "MS", default_value = "0")]
    pub probe_max_ms: String,
    /// Seed format: RELAY_FAILOVER_PROBE_MIN_MS (with --probe-max-ms > 0).
    #[arg(long, value_name = "MS", default_value = "15000")]
    pub probe_min_ms: String,
    /// Seed format, bound: inputs searched between two lines.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_inputs: usize,
    /// Seed format, bound: states visited per line.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_states: usize,
    /// Seed format, bound: states carried from one line to the next.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_frontier: usize,
    /// Seed format: the file is an excerpt (a drill's transcript, a grep): switches and skips
    /// the spec would log may be missing from it. Without it every switch and skip the spec
    /// decides must be in the file.
    #[arg(long)]
    pub excerpt: bool,
    /// Seed format: print, per explained line, the inputs the search found.
    #[arg(long)]
    pub show_inputs: bool,
}

impl SeedArgs {
    /// The thresholds, each checked as the variable would be (FO-CFG-1).
    pub fn thresholds(&self) -> Result<Thresholds, String> {
        let mut t = Thresholds::default();
        let flags = [
            ("--cooldown-ms", VAR_COOLDOWN_MS, &self.cooldown_ms),
            ("--grace-ms", VAR_GRACE_MS, &self.grace_ms),
            ("--min-attempts", VAR_MIN_ATTEMPTS, &self.min_attempts),
            ("--check-ms", VAR_CHECK_MS, &self.check_ms),
            ("--up-timeout-ms", VAR_UP_TIMEOUT_MS, &self.up_timeout_ms),
            ("--exempt", VAR_EXEMPT, &self.exempt),
            ("--probe-min-ms", VAR_PROBE_MIN_MS, &self.probe_min_ms),
            ("--probe-max-ms", VAR_PROBE_MAX_MS, &self.probe_max_ms),
        ];
        for (flag, var, value) in flags {
            t.set(var, value).map_err(|e| format!("{flag}: {e}"))?;
        }
        t.check_probe_schedule().map_err(|e| e.to_string())?;
        Ok(t)
    }
}

#[derive(Serialize)]
struct FileReport {
    file: String,
    lines_judged: usize,
    lines_ignored: usize,
    verdict: &'static str,
    #[serde(flatten)]
    result: Verdict,
    elapsed_ms: u128,
}

#[derive(Serialize)]
struct Report {
    files: Vec<FileReport>,
    conform: usize,
    depart: usize,
}

fn read(file: &PathBuf) -> Result<String, String> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("-: (stdin) {e}"))?;
        return Ok(text);
    }
    std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))
}

/// The default channel at the start: the first switch line's FROM.
fn first_from(parsed: &ParsedLines) -> Option<String> {
    parsed.observations.iter().find_map(|o| match &o.kind {
        ObsKind::Switch(s) => Some(s.from.clone()),
        _ => None,
    })
}

/// Runs `conform --seed-format` on `files`; returns the exit status.
pub fn run(args: &SeedArgs, files: &[PathBuf], json: bool) -> u8 {
    let fail = |msg: String| {
        eprintln!("conform --seed-format: {msg}");
        2
    };
    if files.is_empty() {
        return fail("no FILE given (`-` reads stdin)".to_owned());
    }
    if args.candidates.iter().all(|c| c.trim().is_empty()) {
        return fail(
            "needs the directory list: --candidates URL,URL,… (in directory order)".to_owned(),
        );
    }
    let thresholds = match args.thresholds() {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    if args.max_inputs == 0 || args.max_states == 0 || args.max_frontier == 0 {
        return fail("--max-inputs, --max-states and --max-frontier must be at least 1".to_owned());
    }
    let candidates: Vec<RelayUrl> = args
        .candidates
        .iter()
        .map(|c| c.trim())
        .filter(|c| !c.is_empty())
        .map(RelayUrl::new)
        .collect();
    let mut report = Report {
        files: Vec::new(),
        conform: 0,
        depart: 0,
    };
    let mut status = 0;
    for file in files {
        let name = file.display().to_string();
        let text = match read(file) {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        let parsed = match seed_lines::parse(&text) {
            Ok(p) => p,
            Err(e) => return fail(format!("{name}: {e}")),
        };
        let current = args.current.clone().or_else(|| first_from(&parsed));
        let cfg = SeedConfig {
            thresholds,
            candidates: candidates.clone(),
            current: current.map(RelayUrl::new),
            max_inputs: args.max_inputs,
            max_states: args.max_states,
            max_frontier: args.max_frontier,
            excerpt: args.excerpt,
        };
        let started = Instant::now();
        let verdict = match seed_lines::judge(&cfg, &parsed) {
            Ok(v) => v,
            Err(e) => return fail(format!("{name}: {e}")),
        };
        let elapsed_ms = started.elapsed().as_millis();
        if verdict.departure.is_some() {
            report.depart += 1;
            status = 1;
        } else {
            report.conform += 1;
        }
        if !json {
            print!(
                "{}",
                seed_lines::render_text(&name, &parsed, &verdict, args.show_inputs)
            );
            println!("{name}: {elapsed_ms} ms");
        }
        report.files.push(FileReport {
            file: name,
            lines_judged: parsed.observations.len(),
            lines_ignored: parsed.ignored,
            verdict: if verdict.departure.is_some() {
                "departs"
            } else {
                "conforms"
            },
            result: verdict,
            elapsed_ms,
        });
    }
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(format!("JSON: {e}")),
        }
    } else {
        println!(
            "summary: {} file(s): {} conform, {} depart",
            report.files.len(),
            report.conform,
            report.depart
        );
    }
    status
}
