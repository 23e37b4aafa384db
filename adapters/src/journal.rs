//! Journals (CONF-1): the writer. A binary asked for one (`--journal FILE`, or `--journal-log`
//! for the JSON log) records every input it gives its core, every output the core decides and
//! every effect its driver carries out, one JSON [`JournalLine`] a line. Off by default: a
//! [`Journal::off`] costs a branch per call site (the record is built only when it is on).
//!
//! Bounded: at most `--journal-max-lines-per-second` lines are written per second (all keys
//! together); the rest are dropped and counted, and the next line written for a key is preceded
//! by a [`JournalRecord::Gap`] saying how many of its lines were lost. `conform` fills a gap by
//! search and says so. Observers (the online judge, CONF-2) see every line, dropped or not:
//! the bound protects the disk and the log shipper, not the judge.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use switchyard_core::journal::{JournalLine, JournalRecord};
use switchyard_core::MonoMs;

/// The default of `--journal-max-lines-per-second`. A failover client decides a handful of
/// lines per tick (every 2 s) and a few dozen in a failover; a cell a few per client attach and
/// per handoff. 2,000 lines of about 200 bytes is 400 KB/s at most.
pub const DEFAULT_MAX_LINES_PER_SECOND: u32 = 2_000;
/// The largest value the flag accepts (about 20 MB/s of journal).
pub const MAX_LINES_PER_SECOND: u32 = 100_000;
/// Keys whose line count and drop count are tracked at once (a cell journals one key per host
/// it serves; ≈ 100 bytes each). Beyond it a key's lines are still written, but a gap in it is
/// not reported.
pub const MAX_TRACKED_KEYS: usize = 100_000;
/// How often the file is flushed while lines come.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Where a journal goes and how much of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalConfig {
    /// Append the lines to this file.
    pub path: Option<PathBuf>,
    /// Write each line into the log as well (the `journal` field of an INFO event of target
    /// `switchyard::journal`; with `--log-format json` a log shipper carries it).
    pub to_log: bool,
    /// Lines written per second, at most (0 means [`DEFAULT_MAX_LINES_PER_SECOND`]).
    pub max_lines_per_second: u32,
}

impl JournalConfig {
    /// Whether anything is to be written.
    #[must_use]
    pub fn writes(&self) -> bool {
        self.path.is_some() || self.to_log
    }
}

/// The journal flags every long-running binary takes (`client`, `cell`, `director`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct JournalArgs {
    /// CONF-1: append a journal (every input the core is given with its instant, every output it
    /// decides, every effect the driver carries out; one JSON object a line) to FILE, for
    /// `switchyard-check conform`. Off by default.
    #[arg(long, env = "SWITCHYARD_JOURNAL", value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// CONF-1: write the journal into the log too (the `journal` field of INFO events of target
    /// `switchyard::journal`; use with `--log-format json`).
    #[arg(long, env = "SWITCHYARD_JOURNAL_LOG")]
    pub journal_log: bool,
    /// CONF-1: journal lines written per second at most (all keys together; ≈ 200 bytes each);
    /// the rest are dropped and the next line of their key records the gap.
    #[arg(long, env = "SWITCHYARD_JOURNAL_MAX_LINES_PER_SECOND", default_value_t = DEFAULT_MAX_LINES_PER_SECOND, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_LINES_PER_SECOND)))]
    pub journal_max_lines_per_second: u32,
    /// CONF-2: judge the journal against the spec as it is written (whether or not it is also
    /// written): a departure is logged once at ERROR with its requirement ID and counted in
    /// `switchyard_conformance_departures_total{requirement}`. Off by default.
    #[arg(long, env = "SWITCHYARD_CONFORM")]
    pub conform: bool,
}

impl JournalArgs {
    /// What to write.
    #[must_use]
    pub fn config(&self) -> JournalConfig {
        JournalConfig {
            path: self.journal.clone(),
            to_log: self.journal_log,
            max_lines_per_second: self.journal_max_lines_per_second,
        }
    }
}

/// Why a journal could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("--journal {path}: cannot open for appending: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("--journal-max-lines-per-second {value}: at most {MAX_LINES_PER_SECOND}")]
    TooManyLines { value: u32 },
}

/// Something that sees every journal line as it is decided (the online judge, CONF-2).
pub type JournalObserver = Box<dyn FnMut(&JournalLine) + Send>;

/// A journal handle; clones write to the same journal.
#[derive(Clone, Default)]
pub struct Journal {
    inner: Option<Arc<Mutex<Writer>>>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("on", &self.is_on())
            .finish()
    }
}

struct Writer {
    file: Option<(String, BufWriter<File>)>,
    to_log: bool,
    max_lines_per_second: u32,
    window_started: Instant,
    written_in_window: u32,
    last_flush: Instant,
    keys: BTreeMap<String, KeyCounts>,
    observers: Vec<JournalObserver>,
    /// Whether a failed write was logged (once: the journal then loses lines, counted as gaps).
    write_failed: bool,
}

#[derive(Default)]
struct KeyCounts {
    next_seq: u64,
    dropped: u64,
}

impl Journal {
    /// No journal: every call is a no-op.
    #[must_use]
    pub fn off() -> Journal {
        Journal { inner: None }
    }

    /// A journal as configured, with `observers` (may be empty). Off when the config writes
    /// nothing and there is no observer.
    pub fn open(
        config: &JournalConfig,
        observers: Vec<JournalObserver>,
    ) -> Result<Journal, JournalError> {
        if !config.writes() && observers.is_empty() {
            return Ok(Journal::off());
        }
        if config.max_lines_per_second > MAX_LINES_PER_SECOND {
            return Err(JournalError::TooManyLines {
                value: config.max_lines_per_second,
            });
        }
        let file = match &config.path {
            None => None,
            Some(path) => Some((path.display().to_string(), open_append(path)?)),
        };
        let now = Instant::now();
        Ok(Journal {
            inner: Some(Arc::new(Mutex::new(Writer {
                file,
                to_log: config.to_log,
                max_lines_per_second: if config.max_lines_per_second == 0 {
                    DEFAULT_MAX_LINES_PER_SECOND
                } else {
                    config.max_lines_per_second
                },
                window_started: now,
                written_in_window: 0,
                last_flush: now,
                keys: BTreeMap::new(),
                observers,
                write_failed: false,
            }))),
        })
    }

    /// Whether lines are recorded at all.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Records what `record` builds (called only when the journal is on), for `key`, at `at`.
    pub fn record(&self, key: &str, at: MonoMs, record: impl FnOnce() -> JournalRecord) {
        let Some(inner) = &self.inner else {
            return;
        };
        let mut writer = inner.lock().unwrap_or_else(PoisonError::into_inner);
        writer.record(key, at, record());
    }

    /// Writes what is buffered to the file (at shutdown; lines are also flushed every second).
    pub fn flush(&self) {
        if let Some(inner) = &self.inner {
            inner.lock().unwrap_or_else(PoisonError::into_inner).flush();
        }
    }
}

fn open_append(path: &Path) -> Result<BufWriter<File>, JournalError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(BufWriter::new)
        .map_err(|source| JournalError::Open {
            path: path.display().to_string(),
            source,
        })
}

impl Writer {
    fn record(&mut self, key: &str, at: MonoMs, rec: JournalRecord) {
        let seq = self.next_seq(key);
        let line = JournalLine {
            key: key.to_owned(),
            seq,
            at_ms: at.0,
            rec,
        };
        for observer in &mut self.observers {
            observer(&line);
        }
        if self.file.is_none() && !self.to_log {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.window_started) >= Duration::from_secs(1) {
            self.window_started = now;
            self.written_in_window = 0;
        }
        if self.written_in_window >= self.max_lines_per_second {
            if let Some(counts) = self.keys.get_mut(key) {
                counts.dropped += 1;
            }
            return;
        }
        let dropped = self
            .keys
            .get_mut(key)
            .map_or(0, |c| std::mem::take(&mut c.dropped));
        if dropped > 0 {
            self.write(&JournalLine {
                key: key.to_owned(),
                seq,
                at_ms: at.0,
                rec: JournalRecord::Gap { dropped },
            });
        }
        self.write(&line);
        if now.duration_since(self.last_flush) >= FLUSH_EVERY {
            self.flush();
        }
    }

    fn next_seq(&mut self, key: &str) -> u64 {
        if let Some(counts) = self.keys.get_mut(key) {
            counts.next_seq += 1;
            return counts.next_seq - 1;
        }
        if self.keys.len() < MAX_TRACKED_KEYS {
            self.keys.insert(
                key.to_owned(),
                KeyCounts {
                    next_seq: 1,
                    dropped: 0,
                },
            );
        }
        0
    }

    fn write(&mut self, line: &JournalLine) {
        self.written_in_window += 1;
        let Ok(text) = serde_json::to_string(line) else {
            return;
        };
        if self.to_log {
            tracing::info!(target: "switchyard::journal", journal = %text);
        }
        if let Some((path, file)) = &mut self.file {
            if let Err(error) = writeln!(file, "{text}") {
                if !self.write_failed {
                    self.write_failed = true;
                    tracing::error!(path = %path, %error, "journal write failed: lines are lost from here (conform reports the gap)");
                }
                if let Some(counts) = self.keys.get_mut(&line.key) {
                    counts.dropped += 1;
                }
            }
        }
    }

    fn flush(&mut self) {
        self.last_flush = Instant::now();
        if let Some((path, file)) = &mut self.file {
            if let Err(error) = file.flush() {
                if !self.write_failed {
                    self.write_failed = true;
                    tracing::error!(path = %path, %error, "journal flush failed");
                }
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::failover::{FailoverInput, FailoverRecord};

    fn tick() -> JournalRecord {
        JournalRecord::Failover(FailoverRecord::Input(FailoverInput::Tick { jitter_ms: 0 }))
    }

    #[test]
    fn conf_1_lines_over_the_bound_are_dropped_and_the_next_line_says_how_many() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("j.jsonl");
        let journal = Journal::open(
            &JournalConfig {
                path: Some(path.clone()),
                to_log: false,
                max_lines_per_second: 3,
            },
            Vec::new(),
        )
        .expect("open");
        for i in 0..5 {
            journal.record("c", MonoMs(i), tick);
        }
        // A new window: the next line is written after a gap line.
        if let Some(inner) = &journal.inner {
            let mut w = inner.lock().expect("lock");
            w.window_started -= Duration::from_secs(2);
        }
        journal.record("c", MonoMs(9), tick);
        journal.flush();
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<JournalLine> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a journal line"))
            .collect();
        let seqs: Vec<u64> = lines.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, vec![0, 1, 2, 5, 5]);
        assert_eq!(lines[3].rec, JournalRecord::Gap { dropped: 2 });
        assert_eq!(lines[4].rec, tick());
    }

    #[test]
    fn conf_2_observers_see_every_line_even_the_dropped_ones() {
        let seen = Arc::new(Mutex::new(0u32));
        let counter = Arc::clone(&seen);
        let journal = Journal::open(
            &JournalConfig {
                path: None,
                to_log: false,
                max_lines_per_second: 1,
            },
            vec![Box::new(move |_line: &JournalLine| {
                *counter.lock().expect("lock") += 1;
            })],
        )
        .expect("open");
        for i in 0..4 {
            journal.record("c", MonoMs(i), tick);
        }
        assert_eq!(*seen.lock().expect("lock"), 4);
    }

    #[test]
    fn conf_1_off_builds_nothing() {
        let journal = Journal::off();
        journal.record("c", MonoMs(0), || {
            unreachable!("an off journal builds no record")
        });
        assert!(!journal.is_on());
    }
}
