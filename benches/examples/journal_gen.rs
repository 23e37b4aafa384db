//! CONF-3: writes a generated failover journal (the core driven by a seeded environment,
//! journaled as the driver journals) for `switchyard-check conform` to judge:
//!
//! ```text
//! cargo run --release -p switchyard-benches --example journal_gen -- 1000000 1000 > /tmp/j.jsonl
//! /usr/bin/time -v target/release/switchyard-check conform /tmp/j.jsonl
//! ```
//!
//! Arguments: lines (default 1,000,000), clients (default 1,000), seed (default 1).
#![allow(clippy::print_stdout)]

use std::io::Write;

use switchyard_spec::conform::generate::generate;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut arg = |name: &str, default: u64| -> u64 {
        match args.next() {
            None => default,
            Some(text) => text.parse().unwrap_or_else(|_| {
                eprintln!("journal_gen: {name} {text:?} is not a number");
                std::process::exit(2)
            }),
        }
    };
    let lines = arg("lines", 1_000_000);
    let clients = u32::try_from(arg("clients", 1_000)).unwrap_or(u32::MAX);
    let seed = arg("seed", 1);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed = false;
    generate(lines, clients, seed, |line| {
        if failed {
            return;
        }
        match serde_json::to_string(line) {
            Ok(text) => failed = writeln!(out, "{text}").is_err(),
            Err(_) => failed = true,
        }
    });
    if failed || out.flush().is_err() {
        eprintln!("journal_gen: writing to standard output failed");
        std::process::exit(1);
    }
}
