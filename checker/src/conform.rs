//! `switchyard-check conform FILE…`: journals judged by the spec (CONF-1, CONF-3).
//!
//! Streams every file (`-` is standard input) line by line into one
//! [`Conformance`](switchyard_spec::conform::Conformance): memory is one judge per key, never
//! the journal. Prints one verdict per key and a summary; exit 0 every key conforms, 1 some key
//! departs, 2 a file or a line could not be read (naming it).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use switchyard_spec::conform::{Conformance, Verdict, MAX_LINE_BYTES};

/// How verdicts are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum ConformFormat {
    /// One line per key, then a summary.
    #[default]
    Text,
    /// One JSON object: `{"keys":[{"key":…,"verdict":…}],"summary":{…}}`.
    Json,
}

/// What went wrong reading the input (exit 2).
#[derive(Debug)]
pub struct Unreadable(pub String);

/// The summary line's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub keys: usize,
    pub conform: usize,
    pub depart: usize,
    pub lines: u64,
    pub gaps_searched: u64,
    pub seconds: f64,
}

/// Judges `files` in order (`-`: standard input). Verdicts per key, the summary.
pub fn judge_files(files: &[PathBuf]) -> Result<(Vec<(String, Verdict)>, Summary), Unreadable> {
    let started = Instant::now();
    let mut conformance = Conformance::new();
    for file in files {
        let name = file.display().to_string();
        let reader: Box<dyn Read> = if name == "-" {
            Box::new(std::io::stdin())
        } else {
            let f = std::fs::File::open(file)
                .map_err(|e| Unreadable(format!("{name}: cannot open: {e}")))?;
            Box::new(f)
        };
        judge_stream(&mut conformance, &name, reader)?;
    }
    let lines = conformance.lines();
    let verdicts = conformance.finish();
    let depart = verdicts
        .iter()
        .filter(|(_, v)| v.departure().is_some())
        .count();
    let gaps_searched = verdicts
        .iter()
        .map(|(_, v)| match v {
            Verdict::Conforms { gaps_searched, .. } | Verdict::Departs { gaps_searched, .. } => {
                *gaps_searched
            }
        })
        .sum();
    let summary = Summary {
        keys: verdicts.len(),
        conform: verdicts.len() - depart,
        depart,
        lines,
        gaps_searched,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((verdicts, summary))
}

fn judge_stream(
    conformance: &mut Conformance,
    name: &str,
    reader: Box<dyn Read>,
) -> Result<(), Unreadable> {
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        // Bounded: a line longer than the bound is refused, not read whole.
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Unreadable(format!("{name}: line {}: {e}", line_no + 1)))?;
        if n == 0 {
            return Ok(());
        }
        line_no += 1;
        if buf.len() > MAX_LINE_BYTES {
            return Err(Unreadable(format!(
                "{name}: line {line_no}: longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        let text = std::str::from_utf8(&buf)
            .map_err(|_| Unreadable(format!("{name}: line {line_no}: not UTF-8")))?;
        conformance
            .feed_text(line_no, text)
            .map_err(|e| Unreadable(format!("{name}: {e}")))?;
    }
}

/// Prints the verdicts and returns the exit status (0 / 1).
pub fn print(
    out: &mut impl Write,
    verdicts: &[(String, Verdict)],
    summary: &Summary,
    format: ConformFormat,
) -> std::io::Result<u8> {
    match format {
        ConformFormat::Text => {
            for (key, verdict) in verdicts {
                match verdict {
                    Verdict::Conforms {
                        lines,
                        gaps_searched,
                    } => {
                        write!(out, "{key}: conforms ({lines} lines")?;
                        if *gaps_searched > 0 {
                            write!(out, "; {gaps_searched} gaps filled by search")?;
                        }
                        writeln!(out, ")")?;
                    }
                    Verdict::Departs { departure: d, .. } => writeln!(
                        out,
                        "{key}: departs at line {}: {} breaks {}: the spec allowed {}",
                        d.line, d.event, d.requirement, d.allowed
                    )?,
                }
            }
            writeln!(
                out,
                "conform: {} keys, {} conform, {} depart; {} lines in {:.2} s{}",
                summary.keys,
                summary.conform,
                summary.depart,
                summary.lines,
                summary.seconds,
                if summary.gaps_searched > 0 {
                    format!("; {} gaps filled by search", summary.gaps_searched)
                } else {
                    String::new()
                }
            )?;
        }
        ConformFormat::Json => {
            #[derive(Serialize)]
            struct Keyed<'a> {
                key: &'a str,
                #[serde(flatten)]
                verdict: &'a Verdict,
            }
            #[derive(Serialize)]
            struct Report<'a> {
                keys: Vec<Keyed<'a>>,
                summary: &'a Summary,
            }
            let report = Report {
                keys: verdicts
                    .iter()
                    .map(|(key, verdict)| Keyed { key, verdict })
                    .collect(),
                summary,
            };
            serde_json::to_writer(&mut *out, &report).map_err(std::io::Error::other)?;
            writeln!(out)?;
        }
    }
    Ok(u8::from(summary.depart > 0))
}
