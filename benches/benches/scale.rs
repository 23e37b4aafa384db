//! The scale bench (SCALE-1..5): a fleet of N hosts over 100 cells in one PostgreSQL, for each
//! N of `SWITCHYARD_SCALE_SIZES` (default 10,000, 100,000 and 1,000,000), measured through the
//! store's real paths:
//!
//! 1. seeding: `SqlStore::seed_bulk` (generate_series), then `SqlStore::audit_limits` must
//!    hold (every counter agrees with the rows); then a second `seed_bulk`, which must be
//!    refused `NotEmpty` (its cost is a probe of one row, the same at every N);
//! 2. a full director sweep: page after page of `MAX_PAGE_SIZE` hosts through
//!    `SqlStore::candidate_page` and `SelectionPass::handle_page`, the director's `pass()` minus
//!    the dispatch (the seed makes nobody eligible: no measurement, or a measured target that
//!    is no better), passes chained by the persisted cursor until every host was examined;
//!    every page's time at its position is written to a CSV;
//! 3. enrolment: `ENROL` new hosts through the cell's sequence (`register_control`, unknown
//!    host, `insert_host`, `register_control`) from as many tasks as a cell's pool has
//!    connections, at N resident hosts;
//! 4. a cell restart: `start_cell` (a new incarnation), then `DENSE` desktops of that cell
//!    re-register (`register_control`) with the pool's concurrency;
//! 5. resolve: `SqlStore::resolve` of random hosts, from as many tasks;
//!
//! and once, apart from N: 6. the memory of an idle WebSocket connection, as the RSS growth of
//! a real `switchyard relay` (channels) and `switchyard cell` (desktop controls, and clients of
//! one host) over `SWITCHYARD_SCALE_CONNECTIONS` idle connections (default 1,000), measured as
//! `tools/tests/scale_5_connection_memory.rs` measures it.
//!
//! Each phase has a time bound (`SWITCHYARD_SCALE_PHASE_S`, default 300 s); a phase that
//! reaches it stops and says where. The table at the end gives every figure at each N and its
//! growth per 10x of N. Plain timing (`Instant`), no criterion: one seeding of a million hosts
//! per size, and medians / p99 over many operations.
//!
//! `benches/scale/run.sh` runs it on a durable cluster (fsync, synchronous_commit and
//! full_page_writes on) and keeps the output; by hand:
//! `SWITCHYARD_TEST_PG_DURABLE=1 cargo bench -p switchyard-benches --bench scale`.
//!
//! Environment: `SWITCHYARD_TEST_PG_URL` uses that server instead of starting one;
//! `SWITCHYARD_SCALE_OUT` (default `target/scale`) is where the CSV of every page and the
//! summary (`summary-<label>.tsv`, read by the `scale_plot` example) are written;
//! `SWITCHYARD_SCALE_LABEL` (default `run`) names them; `SWITCHYARD_BIN` is the `switchyard`
//! binary (default: `switchyard` in the target directory of this bench).
#![allow(clippy::print_stdout)] // A bench main: its report is the table on stdout.

#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::client::{spawn_desktop, DesktopConfig};
use switchyard_adapters::handoff::client_auth::mint_client_token;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::proto::CLIENT_PATH;
use switchyard_adapters::handoff::store::{BulkSeed, SeedError, SqlStore, StoreOptions};
use switchyard_core::handoff::store::{RegisterRefusal, StoreError as SetupRefusal};
use switchyard_core::handoff::PolicyConfig;
use switchyard_core::handoff::{CellId, HostId, Incarnation};
use switchyard_core::handoff::{
    DirectorPolicy, PageCursor, ScanLimits, SelectionPass, MAX_DISPATCH_PER_PASS,
    MAX_PAGES_PER_PASS, MAX_PAGE_SIZE,
};
use switchyard_core::MonoMs;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

const SIZES: &str = "10000,100000,1000000";
const CELLS: u32 = 100;
/// The restarted cell's desktops (cell 1 holds this many at every N).
const DENSE: u64 = 10_000;
/// Hosts enrolled per size.
const ENROL: u64 = 2_000;
/// Resolves per size.
const RESOLVES: u64 = 20_000;
/// Every tenth host has a measurement (the director examines its target and finds it no
/// better); the others have none.
const MEASURED_EVERY: u64 = 10;
/// The director's clock during the sweep (measurements are taken a second before).
const NOW: MonoMs = MonoMs(1_000_000_000);
const DIRECTOR: &str = "scale-bench";
/// The director's default store transaction bound (`--db-txn-timeout-ms`): a page slower than
/// this fails the director's pass. The sweep here waits longer, to see how slow pages get.
const DIRECTOR_TXN_TIMEOUT: Duration = Duration::from_secs(3);
/// The secret the relay and cell processes get (the desktops' tokens derive from it).
const SECRET: &str = "scale-bench-secret-0123456789abcdef";

/// A bench setting from the environment; a value that does not parse stops the bench with
/// the variable's name.
fn setting<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_owned());
    text.split(',')
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}={text:?}: {v:?} is not a count"))
        })
        .collect()
}

fn one<T: std::str::FromStr + Copy>(name: &str, default: &str) -> T {
    setting::<T>(name, default)
        .first()
        .copied()
        .unwrap_or_else(|| panic!("{name}: one value expected"))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (sorted.len() * p).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// A small deterministic generator (splitmix64) for the resolve phase's hosts.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

// ----- one batch of operations over concurrent tasks -----

enum Op {
    Done,
    Refused(String),
    Failed(String),
}

#[derive(Debug, Default)]
struct Batch {
    asked: usize,
    /// Latencies of the operations that completed, sorted.
    done: Vec<Duration>,
    refused: BTreeMap<String, usize>,
    failed: usize,
    first_failure: Option<String>,
    elapsed: Duration,
    timed_out: bool,
}

impl Batch {
    fn rate(&self) -> f64 {
        self.done.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn mean(&self) -> Duration {
        if self.done.is_empty() {
            return Duration::ZERO;
        }
        self.done.iter().sum::<Duration>() / u32::try_from(self.done.len()).unwrap_or(u32::MAX)
    }

    fn complete(&self) -> bool {
        self.done.len() == self.asked
    }

    /// What went other than planned, for the report line.
    fn note(&self) -> String {
        let mut parts = Vec::new();
        if self.timed_out {
            parts.push(format!(
                "timed out after {:.0} s with {}/{} done",
                self.elapsed.as_secs_f64(),
                self.done.len(),
                self.asked
            ));
        }
        for (why, n) in &self.refused {
            parts.push(format!("{n} refused ({why})"));
        }
        if self.failed > 0 {
            parts.push(format!(
                "{} failed (first: {})",
                self.failed,
                self.first_failure.as_deref().unwrap_or("?")
            ));
        }
        parts.join("; ")
    }

    fn line(&self, what: &str) -> String {
        let note = self.note();
        format!(
            "{what}: {}/{} in {:.2} s, {:.0}/s, mean {:.2} ms, p50 {:.2} ms, p99 {:.2} ms{}",
            self.done.len(),
            self.asked,
            self.elapsed.as_secs_f64(),
            self.rate(),
            ms(self.mean()),
            ms(percentile(&self.done, 50)),
            ms(percentile(&self.done, 99)),
            if note.is_empty() {
                String::new()
            } else {
                format!(" [{note}]")
            }
        )
    }
}

/// `op` over `items` from `workers` tasks; no item is started after `bound`.
async fn batch<F, Fut>(items: Vec<u64>, workers: usize, bound: Duration, op: F) -> Batch
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Op> + Send,
{
    let asked = items.len();
    let queue = Arc::new(Mutex::new(VecDeque::from(items)));
    let start = Instant::now();
    let deadline = start + bound;
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let queue = Arc::clone(&queue);
            let op = op.clone();
            tokio::spawn(async move {
                let mut out = Vec::new();
                let mut timed_out = false;
                loop {
                    if Instant::now() >= deadline {
                        timed_out = !queue.lock().expect("queue").is_empty();
                        break;
                    }
                    let next = queue.lock().expect("queue").pop_front();
                    let Some(item) = next else { break };
                    let t = Instant::now();
                    let r = op(item).await;
                    out.push((t.elapsed(), r));
                }
                (out, timed_out)
            })
        })
        .collect();
    let mut b = Batch {
        asked,
        ..Batch::default()
    };
    for task in tasks {
        let (out, timed_out) = task.await.expect("batch task");
        b.timed_out |= timed_out;
        for (latency, r) in out {
            match r {
                Op::Done => b.done.push(latency),
                Op::Refused(why) => *b.refused.entry(why).or_default() += 1,
                Op::Failed(e) => {
                    b.failed += 1;
                    b.first_failure.get_or_insert(e);
                }
            }
        }
    }
    b.elapsed = start.elapsed();
    b.done.sort_unstable();
    b
}

// ----- the phases -----

fn layout(n: u64) -> BulkSeed {
    BulkSeed {
        cells: CELLS,
        hosts: n,
        dense_hosts: DENSE.min(n),
        capacity: 4_000_000,
        measured_every: MEASURED_EVERY,
        measured_at: MonoMs(NOW.0 - 1_000),
        timeout: Duration::from_secs(1_800),
    }
}

#[derive(Debug, Clone, Copy)]
struct Page {
    pass: u32,
    position: u64,
    rows: usize,
    time: Duration,
}

#[derive(Debug, Default)]
struct Sweep {
    pages: Vec<Page>,
    examined: u64,
    distinct: u64,
    passes: u32,
    elapsed: Duration,
    stopped: Option<String>,
    reasons: BTreeMap<&'static str, u64>,
}

impl Sweep {
    fn first(&self) -> Option<Duration> {
        self.pages.first().map(|p| p.time)
    }

    fn median(&self) -> Option<Duration> {
        let mut t: Vec<Duration> = self.pages.iter().map(|p| p.time).collect();
        t.sort_unstable();
        (!t.is_empty()).then(|| percentile(&t, 50))
    }

    fn slowest(&self) -> Option<Page> {
        self.pages.iter().copied().max_by_key(|p| p.time)
    }

    fn over_director_bound(&self) -> (usize, Option<u64>) {
        let over: Vec<&Page> = self
            .pages
            .iter()
            .filter(|p| p.time > DIRECTOR_TXN_TIMEOUT)
            .collect();
        (over.len(), over.first().map(|p| p.position))
    }
}

/// The director's `pass()` without the dispatch, pass after pass from the persisted cursor,
/// until each of the hosts `0..n` was examined.
async fn sweep(store: &SqlStore, n: u64, bound: Duration) -> Sweep {
    let director = DirectorPolicy {
        enabled: true,
        cohort_percent: 100,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 3_600_000,
        },
    };
    let limits = ScanLimits {
        page_size: MAX_PAGE_SIZE,
        max_pages: MAX_PAGES_PER_PASS,
        max_dispatch: MAX_DISPATCH_PER_PASS,
    };
    let mut seen = vec![false; usize::try_from(n).expect("host count")];
    let mut s = Sweep::default();
    let start = Instant::now();
    let deadline = start + bound;
    store
        .save_cursor(DIRECTOR, PageCursor::default())
        .await
        .expect("cursor reset");
    'passes: while s.distinct < n {
        if s.passes > 2 * u32::try_from(n / u64::from(MAX_PAGE_SIZE) + 1).unwrap_or(u32::MAX) {
            s.stopped = Some(format!("no progress after {} passes", s.passes));
            break;
        }
        let cursor = match store.load_cursor(DIRECTOR).await {
            Ok(cursor) => cursor,
            Err(e) => {
                s.stopped = Some(format!("cursor read failed: {e}"));
                break;
            }
        };
        let mut pass = SelectionPass::begin(cursor, limits).expect("valid scan limits");
        while let Some(q) = pass.poll_query() {
            if Instant::now() >= deadline {
                s.stopped = Some(format!(
                    "timed out after {:.0} s at page {} (position {}) with {}/{n} hosts examined",
                    start.elapsed().as_secs_f64(),
                    s.pages.len() + 1,
                    s.examined,
                    s.distinct
                ));
                break 'passes;
            }
            let t = Instant::now();
            // The position in the sweep: the hosts examined before this page.
            let position = s.examined;
            let rows = match store.candidate_page(q).await {
                Ok(rows) => rows,
                Err(e) => {
                    s.stopped = Some(format!(
                        "page {} (position {}) failed after {:.1} s: {e}",
                        s.pages.len() + 1,
                        position,
                        t.elapsed().as_secs_f64()
                    ));
                    break 'passes;
                }
            };
            let decisions = pass.handle_page(NOW, &director, &rows);
            let time = t.elapsed();
            for d in &decisions {
                match d.verdict {
                    Ok(_) => panic!(
                        "host {} is eligible: the seed must dispatch nothing",
                        d.host.0
                    ),
                    Err(why) => *s.reasons.entry(why.name()).or_default() += 1,
                }
                s.examined += 1;
                if let Some(slot) = usize::try_from(d.host.0).ok().and_then(|h| seen.get_mut(h)) {
                    if !*slot {
                        *slot = true;
                        s.distinct += 1;
                    }
                }
            }
            s.pages.push(Page {
                pass: s.passes,
                position,
                rows: rows.len(),
                time,
            });
        }
        if let Err(e) = store.save_cursor(DIRECTOR, pass.cursor()).await {
            s.stopped = Some(format!("cursor write failed: {e}"));
            break;
        }
        s.passes += 1;
    }
    s.elapsed = start.elapsed();
    s
}

/// The cell's registration (adapters' `cell::desktop::register`): register, and on an unknown
/// host enrol it and register again.
async fn enrol(store: SqlStore, host: HostId, cell: CellId, incarnation: Incarnation) -> Op {
    let now = MonoMs(0);
    let register = || store.register_control(now, host, cell, incarnation, true);
    match register().await {
        Err(e) => return Op::Failed(e.to_string()),
        Ok(Ok(_)) => return Op::Refused("already known".into()),
        Ok(Err(RegisterRefusal::UnknownHost)) => {}
        Ok(Err(r)) => return Op::Refused(format!("register: {r:?}")),
    }
    match store.insert_host(host, cell, true).await {
        Ok(Ok(_) | Err(SetupRefusal::HostExists)) => {}
        Ok(Err(e)) => return Op::Refused(format!("enrolment: {e:?}")),
        Err(e) => return Op::Failed(e.to_string()),
    }
    match register().await {
        Ok(Ok(_)) => Op::Done,
        Ok(Err(r)) => Op::Refused(format!("register after enrolment: {r:?}")),
        Err(e) => Op::Failed(e.to_string()),
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

struct SizeReport {
    n: u64,
    seed: Duration,
    refuse: Duration,
    sweep: Sweep,
    enrol: Batch,
    rereg: Batch,
    resolve: Batch,
}

async fn size(n: u64, bound: Duration, out: &Path, label: &str) -> SizeReport {
    println!();
    println!("== N = {n} hosts over {CELLS} cells ({DENSE} on cell 1)");
    let url = support_pg::fresh_db(&format!("scale{n}")).await;
    let pool_default = StoreOptions::default();
    let store = SqlStore::connect(&url, pool_default)
        .await
        .expect("connect the store");
    store
        .put_settings(
            &switchyard_tools::handoff::cli::default_store_config(),
            true,
        )
        .await
        .expect("settings");
    let seed = layout(n);
    let t = Instant::now();
    store.seed_bulk(&seed).await.expect("bulk seed");
    let seeded = t.elapsed();
    audit(&store, "after the seed").await;
    println!(
        "seed: {n} hosts in {:.1} s (vacuumed and analysed)",
        seeded.as_secs_f64()
    );
    // A second seed into the full store is refused by a probe of one row, not a count of N.
    let t = Instant::now();
    let again = store.seed_bulk(&seed).await;
    let refused = t.elapsed();
    assert!(
        matches!(again, Err(SeedError::NotEmpty { hosts: true, .. })),
        "a second seed must be refused NotEmpty, got {again:?}"
    );
    println!("seed refused (not empty): {:.2} ms", ms(refused));

    // The sweep's store waits for a page as long as the phase may last (the director's own
    // bound is DIRECTOR_TXN_TIMEOUT; pages slower than that are counted).
    let sweep_store = SqlStore::connect(
        &url,
        StoreOptions {
            txn_timeout: bound,
            max_connections: 1,
            ..StoreOptions::default()
        },
    )
    .await
    .expect("connect the sweep's store");
    let s = sweep(&sweep_store, n, bound).await;
    sweep_store.close().await;
    write_pages(out, label, n, &s);
    let (over, first_over) = s.over_director_bound();
    println!(
        "sweep: {} pages in {} passes, {} examined ({}/{n} distinct) in {:.1} s; first page \
         {:.1} ms, median {:.1} ms, slowest {:.1} ms at position {}; {over} pages over the \
         director's {} s bound{}; verdicts {:?}{}",
        s.pages.len(),
        s.passes,
        s.examined,
        s.distinct,
        s.elapsed.as_secs_f64(),
        s.first().map_or(0.0, ms),
        s.median().map_or(0.0, ms),
        s.slowest().map_or(0.0, |p| ms(p.time)),
        s.slowest().map_or(0, |p| p.position),
        DIRECTOR_TXN_TIMEOUT.as_secs(),
        first_over.map_or(String::new(), |p| format!(" (the first at position {p})")),
        s.reasons,
        s.stopped
            .as_ref()
            .map_or(String::new(), |why| format!(" [STOPPED: {why}]"))
    );

    let workers = usize::try_from(pool_default.max_connections).expect("pool size");
    let enrolled = {
        let store = store.clone();
        batch((n..n + ENROL).collect(), workers, bound, move |h| {
            let cell = CellId(1 + u32::try_from(h % u64::from(CELLS)).unwrap_or(0));
            enrol(store.clone(), HostId(h), cell, Incarnation(1))
        })
        .await
    };
    println!("{}", enrolled.line("enrolment"));
    audit(&store, "after the enrolment").await;

    let incarnation = store
        .start_cell(
            CellId(1),
            seed.capacity,
            true,
            "ws://cell-1.invalid",
            "",
            MonoMs(unix_ms()),
            15_000,
        )
        .await
        .expect("cell start")
        .expect("cell 1 is free");
    let rereg = {
        let store = store.clone();
        batch((0..DENSE.min(n)).collect(), workers, bound, move |h| {
            let store = store.clone();
            async move {
                match store
                    .register_control(MonoMs(0), HostId(h), CellId(1), incarnation, true)
                    .await
                {
                    Ok(Ok(_)) => Op::Done,
                    Ok(Err(r)) => Op::Refused(format!("{r:?}")),
                    Err(e) => Op::Failed(e.to_string()),
                }
            }
        })
        .await
    };
    println!(
        "{}",
        rereg.line("re-registration after a restart of cell 1")
    );

    let mut mix = Mix(n);
    let hosts: Vec<u64> = (0..RESOLVES).map(|_| mix.next() % n).collect();
    let resolved = {
        let store = store.clone();
        batch(hosts, workers, bound, move |h| {
            let store = store.clone();
            async move {
                match store.resolve(HostId(h)).await {
                    Ok(Some(_)) => Op::Done,
                    Ok(None) => Op::Refused("unknown host".into()),
                    Err(e) => Op::Failed(e.to_string()),
                }
            }
        })
        .await
    };
    println!("{}", resolved.line("resolve"));
    audit(&store, "at the end").await;
    store.close().await;
    SizeReport {
        n,
        seed: seeded,
        refuse: refused,
        sweep: s,
        enrol: enrolled,
        rereg,
        resolve: resolved,
    }
}

/// The store's own invariant check: every counter agrees with the rows.
async fn audit(store: &SqlStore, when: &str) {
    match store.audit_limits().await {
        Ok(Ok(())) => {}
        Ok(Err(wrong)) => panic!("the counters disagree with the rows {when}: {wrong}"),
        Err(e) => panic!("the audit failed {when}: {e}"),
    }
}

fn write_pages(out: &Path, label: &str, n: u64, s: &Sweep) {
    let path = out.join(format!("sweep-{label}-{n}.csv"));
    let mut f =
        std::fs::File::create(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    let mut text = String::from("pass,page,position,rows,ms\n");
    for (k, p) in s.pages.iter().enumerate() {
        text.push_str(&format!(
            "{},{},{},{},{:.3}\n",
            p.pass,
            k + 1,
            p.position,
            p.rows,
            ms(p.time)
        ));
    }
    f.write_all(text.as_bytes())
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    println!("pages: {}", path.display());
}

// ----- idle connection memory (SCALE-5) -----

/// A `switchyard` process; killed on drop.
struct Server {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Server {
    fn start(bin: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "info")
            .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
            .env("SWITCHYARD_DESKTOP_SECRET", SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Server { child, lines }
    }

    /// The word after `key` in the first line that holds it.
    fn value(&self, key: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                break;
            };
            if let Some(v) = line
                .split(key)
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
            {
                return v.trim_matches('"').to_owned();
            }
        }
        panic!("the server never logged {key:?}");
    }

    /// Resident memory, KiB (`VmRSS` of `/proc/<pid>/status`).
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS in /proc status")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// As `tools/tests/scale_5_connection_memory.rs` (SCALE-5): warm-up connections first, each
/// connection proven served, the RSS read once two samples 250 ms apart agree, and a long idle
/// timeout (the held sockets are never polled, so they answer no pings).
const ROOM: [&str; 2] = ["--ws-idle-timeout-ms", "600000"];
const WARM: usize = 32;

/// One WebSocket from loopback address 127.0.0.(2 + k / 200) (the servers bound connections
/// per peer address), with `authorization` as its header; this end reads in 4 KiB chunks.
async fn open(
    addr: &str,
    path: &str,
    k: usize,
    authorization: Option<String>,
) -> Result<Socket, String> {
    let mut request = format!("ws://{addr}{path}")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    if let Some(value) = authorization {
        let value = value.parse().map_err(|e| format!("{e}"))?;
        request.headers_mut().insert("authorization", value);
    }
    let octet = u8::try_from(2 + k / 200).map_err(|_| "too many connections".to_owned())?;
    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, octet], 0)))
        .map_err(|e| e.to_string())?;
    let target: std::net::SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let stream = socket.connect(target).await.map_err(|e| e.to_string())?;
    let config = WebSocketConfig::default().read_buffer_size(4 * 1024);
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| e.to_string())?;
    Ok(ws)
}

/// The next text message (pings and pongs skipped), within 30 s.
async fn next_text(ws: &mut Socket) -> Result<String, String> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => return Ok(t.as_str().to_owned()),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            other => return Err(format!("expected a text message, got {other:?}")),
        }
    }
}

#[derive(Debug)]
struct Memory {
    what: &'static str,
    connections: usize,
    before_kib: u64,
    after_kib: u64,
}

impl Memory {
    fn per_connection_kib(&self) -> f64 {
        (self.after_kib as f64 - self.before_kib as f64) / self.connections as f64
    }
}

/// The RSS once two samples 250 ms apart agree within 64 KiB (the last sample after 10 s).
async fn settled_rss(server: &Server) -> u64 {
    let mut last = server.rss_kib();
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = server.rss_kib();
        if now.abs_diff(last) <= 64 {
            return now;
        }
        last = now;
    }
    last
}

/// RSS growth of `server` over `k` idle connections opened by `connect(i)`, after `WARM`
/// warm-up connections (all held open until the end).
async fn idle_memory<F, Fut>(what: &'static str, server: &Server, k: usize, connect: F) -> Memory
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Socket, String>>,
{
    const AT_ONCE: usize = 25;
    let mut held = Vec::with_capacity(k + WARM);
    let mut before = 0;
    while held.len() < k + WARM {
        let next = held.len();
        if next == WARM {
            before = settled_rss(server).await;
        }
        let upto = (next + AT_ONCE).min(if next < WARM { WARM } else { k + WARM });
        let opened = futures_util::future::join_all((next..upto).map(&connect)).await;
        for (i, ws) in opened.into_iter().enumerate() {
            held.push(ws.unwrap_or_else(|e| panic!("{what}: connection {}: {e}", next + i)));
        }
    }
    let after = settled_rss(server).await;
    drop(held);
    Memory {
        what,
        connections: k,
        before_kib: before,
        after_kib: after,
    }
}

fn switchyard_bin() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SWITCHYARD_BIN") {
        return Some(PathBuf::from(p));
    }
    // This bench runs from <target>/release/deps; the binary is <target>/release/switchyard.
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("switchyard");
    bin.exists().then_some(bin)
}

/// A cell on SQLite in `dir`, and the address it listens on.
fn start_cell(bin: &Path, dir: &Path) -> (Server, String) {
    let db = format!("sqlite://{}", dir.join("cell.db").display());
    let mut args = vec![
        "cell",
        "--db",
        &db,
        "--cell-id",
        "1",
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend(ROOM);
    let cell = Server::start(bin, &args);
    let url = cell.value("url=");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    (cell, addr)
}

async fn memory(k: usize) -> Vec<Memory> {
    let Some(bin) = switchyard_bin() else {
        println!(
            "idle connection memory: SKIPPED, no switchyard binary (cargo build --release -p \
             switchyard-tools --bin switchyard, or set SWITCHYARD_BIN)"
        );
        return Vec::new();
    };
    println!();
    println!(
        "== idle WebSocket connections: {k} on a relay and on a cell ({})",
        bin.display()
    );
    let mut out = Vec::new();
    let secret = Secret::new(SECRET.as_bytes(), "bench secret").expect("secret");

    // A relay channel, proven served by a heartbeat answered.
    let mut args = vec!["relay", "--listen", "127.0.0.1:0", "--path", "/r"];
    args.extend(ROOM);
    let relay = Server::start(&bin, &args);
    let addr = relay.value("local_addr=");
    let m = idle_memory("relay channel", &relay, k, |i| {
        let addr = addr.clone();
        async move {
            let mut ws = open(&addr, "/r", i, None).await?;
            ws.send(Message::text("ping"))
                .await
                .map_err(|e| e.to_string())?;
            match next_text(&mut ws).await?.as_str() {
                "pong" => Ok(ws),
                other => Err(format!("heartbeat answered {other:?}")),
            }
        }
    })
    .await;
    drop(relay);
    out.push(m);

    // A desktop control per host, proven served by the cell's `registered` frame (each one
    // enrols its host in the cell's store).
    let dir = tempfile::Builder::new()
        .prefix("switchyard-scale-cell-")
        .tempdir()
        .expect("temp dir for the cell's store");
    let (cell, addr) = start_cell(&bin, dir.path());
    let m = idle_memory("cell desktop control", &cell, k, |i| {
        let path = format!("/v1/desktop?host={i}&caps=idle-handoff");
        let token = format!("Bearer {}", secret.desktop_token(i as u64));
        let addr = addr.clone();
        async move {
            let mut ws = open(&addr, &path, i, Some(token)).await?;
            let first = next_text(&mut ws).await?;
            if first.contains("registered") {
                Ok(ws)
            } else {
                Err(format!("no registration: {first}"))
            }
        }
    })
    .await;
    drop(cell);
    out.push(m);

    // Clients of one host (its desktop registered and pinging), proven served by `attached`;
    // a host takes 1,024 clients at most, so at most 900 here.
    let dir = tempfile::Builder::new()
        .prefix("switchyard-scale-cell-")
        .tempdir()
        .expect("temp dir for the cell's store");
    let (cell, addr) = start_cell(&bin, dir.path());
    const HOST: u64 = 7;
    let mut desktop = spawn_desktop(DesktopConfig {
        resolvers: vec![format!("http://{addr}")],
        host: HOST,
        token: secret.desktop_token(HOST),
        capable: true,
        measure: None,
        pace_min: Duration::from_millis(50),
        pace_max: Duration::from_millis(400),
        ping_every: Duration::from_secs(1),
    });
    desktop
        .wait_registered(1, Duration::from_secs(30))
        .await
        .expect("the desktop registers");
    let expires_ms = Clock::default().now().0 + 24 * 3_600_000;
    let token = mint_client_token(&secret.desktop_token(HOST), HOST, expires_ms);
    let m = idle_memory("cell client", &cell, k.min(900), |i| {
        let path = format!("{CLIENT_PATH}?host={HOST}");
        let authorization = format!("Bearer {token}");
        let addr = addr.clone();
        async move {
            let mut ws = open(&addr, &path, i, Some(authorization)).await?;
            let first = next_text(&mut ws).await?;
            if first.contains("attached") {
                Ok(ws)
            } else {
                Err(format!("not attached: {first}"))
            }
        }
    })
    .await;
    desktop.stop().await;
    drop(cell);
    out.push(m);
    for m in &out {
        println!(
            "{}: RSS {} KiB -> {} KiB over {} idle connections: {:.1} KiB per connection",
            m.what,
            m.before_kib,
            m.after_kib,
            m.connections,
            m.per_connection_kib()
        );
    }
    out
}

// ----- the report -----

/// One row of the table: a value (or why none) at each N.
struct Figure {
    key: &'static str,
    name: &'static str,
    values: Vec<(u64, Option<f64>, String)>,
    /// Formats a value.
    fmt: fn(f64) -> String,
}

fn growth(values: &[(u64, Option<f64>, String)]) -> String {
    let mut out = Vec::new();
    for w in values.windows(2) {
        if let ((n1, Some(v1), _), (n2, Some(v2), _)) = (&w[0], &w[1]) {
            if *v1 > 0.0 && n2 > n1 {
                let decades = (*n2 as f64 / *n1 as f64).log10();
                out.push(format!("x{:.2}", (v2 / v1).powf(1.0 / decades)));
                continue;
            }
        }
        out.push("-".into());
    }
    out.join(", ")
}

fn figures(reports: &[SizeReport]) -> Vec<Figure> {
    let f1 = |v: f64| format!("{v:.1}");
    let f2 = |v: f64| format!("{v:.2}");
    let f0 = |v: f64| format!("{v:.0}");
    let each =
        |key, name, fmt: fn(f64) -> String, get: &dyn Fn(&SizeReport) -> (Option<f64>, String)| {
            Figure {
                key,
                name,
                values: reports
                    .iter()
                    .map(|r| {
                        let (v, note) = get(r);
                        (r.n, v, note)
                    })
                    .collect(),
                fmt,
            }
        };
    let batch_note = |b: &Batch| {
        if b.complete() {
            String::new()
        } else {
            b.note()
        }
    };
    let sweep_note = |s: &Sweep| s.stopped.clone().unwrap_or_default();
    let swept = |s: &Sweep| s.stopped.is_none();
    vec![
        each("seed_s", "seed (s)", f1, &|r| {
            (Some(r.seed.as_secs_f64()), String::new())
        }),
        each("seed_refused_ms", "second seed refused (ms)", f2, &|r| {
            (Some(ms(r.refuse)), String::new())
        }),
        each("enrol_mean_ms", "enrolment per host, mean (ms)", f2, &|r| {
            (
                (!r.enrol.done.is_empty()).then(|| ms(r.enrol.mean())),
                batch_note(&r.enrol),
            )
        }),
        each("enrol_p50_ms", "enrolment per host, p50 (ms)", f2, &|r| {
            (
                (!r.enrol.done.is_empty()).then(|| ms(percentile(&r.enrol.done, 50))),
                String::new(),
            )
        }),
        each("enrol_p99_ms", "enrolment per host, p99 (ms)", f2, &|r| {
            (
                (!r.enrol.done.is_empty()).then(|| ms(percentile(&r.enrol.done, 99))),
                String::new(),
            )
        }),
        each("enrol_per_s", "enrolments/s (8 tasks)", f0, &|r| {
            (
                (!r.enrol.done.is_empty()).then(|| r.enrol.rate()),
                String::new(),
            )
        }),
        each("page_first_ms", "sweep: first page (ms)", f1, &|r| {
            (r.sweep.first().map(ms), String::new())
        }),
        each("page_median_ms", "sweep: median page (ms)", f1, &|r| {
            (r.sweep.median().map(ms), String::new())
        }),
        each("page_slowest_ms", "sweep: slowest page (ms)", f1, &|r| {
            let p = r.sweep.slowest();
            (
                p.map(|p| ms(p.time)),
                p.map_or(String::new(), |p| format!("at position {}", p.position)),
            )
        }),
        each(
            "page_slowest_over_first",
            "sweep: slowest / first page",
            f1,
            &|r| match (r.sweep.slowest(), r.sweep.first()) {
                (Some(s), Some(f)) if !f.is_zero() => (Some(ms(s.time) / ms(f)), String::new()),
                _ => (None, String::new()),
            },
        ),
        each(
            "pages_over_3s",
            "sweep: pages over the director's 3 s",
            f0,
            &|r| (Some(r.sweep.over_director_bound().0 as f64), String::new()),
        ),
        each("sweep_total_s", "sweep: total (s)", f1, &|r| {
            (
                swept(&r.sweep).then_some(r.sweep.elapsed.as_secs_f64()),
                sweep_note(&r.sweep),
            )
        }),
        each(
            "sweep_examined",
            "sweep: hosts examined (distinct)",
            f0,
            &|r| (Some(r.sweep.distinct as f64), String::new()),
        ),
        each("rereg_per_s", "re-registration of 10,000 (/s)", f0, &|r| {
            (
                (!r.rereg.done.is_empty()).then(|| r.rereg.rate()),
                batch_note(&r.rereg),
            )
        }),
        each("rereg_p99_ms", "re-registration p99 (ms)", f1, &|r| {
            (
                (!r.rereg.done.is_empty()).then(|| ms(percentile(&r.rereg.done, 99))),
                String::new(),
            )
        }),
        each("resolve_p50_ms", "resolve p50 (ms)", f2, &|r| {
            (
                (!r.resolve.done.is_empty()).then(|| ms(percentile(&r.resolve.done, 50))),
                batch_note(&r.resolve),
            )
        }),
        each("resolve_p99_ms", "resolve p99 (ms)", f2, &|r| {
            (
                (!r.resolve.done.is_empty()).then(|| ms(percentile(&r.resolve.done, 99))),
                String::new(),
            )
        }),
        each("resolve_per_s", "resolves/s (8 tasks)", f0, &|r| {
            (
                (!r.resolve.done.is_empty()).then(|| r.resolve.rate()),
                String::new(),
            )
        }),
    ]
}

fn report(reports: &[SizeReport], mem: &[Memory], out: &Path, label: &str) {
    let figures = figures(reports);
    println!();
    let mut head = String::from("| figure                                  |");
    let mut rule = String::from("|-----------------------------------------|");
    for r in reports {
        head.push_str(&format!(" {:>12} |", format!("N = {}", r.n)));
        rule.push_str("-------------:|");
    }
    head.push_str(" per 10x of N     |");
    rule.push_str("------------------|");
    println!("{head}");
    println!("{rule}");
    let mut tsv = String::from("label\tn\tfigure\tvalue\tnote\n");
    let mut notes = Vec::new();
    for f in &figures {
        let mut line = format!("| {:<39} |", f.name);
        for (n, v, note) in &f.values {
            let text = match v {
                Some(v) => (f.fmt)(*v),
                None => "-".into(),
            };
            let mark = if note.is_empty() || note.starts_with("at position") {
                ""
            } else {
                notes.push(format!("{} at N = {n}: {note}", f.name));
                " *"
            };
            line.push_str(&format!(" {:>12} |", format!("{text}{mark}")));
            tsv.push_str(&format!(
                "{label}\t{n}\t{}\t{}\t{note}\n",
                f.key,
                v.map_or(String::new(), |v| format!("{v}"))
            ));
        }
        line.push_str(&format!(" {:<16} |", growth(&f.values)));
        println!("{line}");
    }
    for n in notes {
        println!("* {n}");
    }
    if !mem.is_empty() {
        println!();
        println!("| apart from N                            | KiB per idle connection | RSS before -> after (KiB) |");
        println!("|-----------------------------------------|------------------------:|--------------------------:|");
    }
    for m in mem {
        println!(
            "| {:<39} | {:>23.1} | {:>25} |",
            format!("{} ({} connections)", m.what, m.connections),
            m.per_connection_kib(),
            format!("{} -> {}", m.before_kib, m.after_kib)
        );
        tsv.push_str(&format!(
            "{label}\t0\tidle_kib_{}\t{}\t{} connections, RSS {} -> {} KiB\n",
            m.what,
            m.per_connection_kib(),
            m.connections,
            m.before_kib,
            m.after_kib
        ));
    }
    let path = out.join(format!("summary-{label}.tsv"));
    std::fs::write(&path, tsv).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    println!("summary: {}", path.display());
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(run());
}

async fn run() {
    let sizes: Vec<u64> = setting("SWITCHYARD_SCALE_SIZES", SIZES);
    let bound = Duration::from_secs(one("SWITCHYARD_SCALE_PHASE_S", "300"));
    let connections: usize = one("SWITCHYARD_SCALE_CONNECTIONS", "1000");
    let label = std::env::var("SWITCHYARD_SCALE_LABEL").unwrap_or_else(|_| "run".into());
    let out = std::env::var("SWITCHYARD_SCALE_OUT").map_or_else(
        |_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/scale"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("create {}: {e}", out.display()));
    println!(
        "scale: sizes {sizes:?}, {CELLS} cells, {ENROL} enrolments, {DENSE} re-registrations, \
         {RESOLVES} resolves per size, pages of {MAX_PAGE_SIZE}, every phase bounded at {} s; \
         {} cores",
        bound.as_secs(),
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    pg_settings().await;
    let mut reports = Vec::new();
    for n in sizes {
        reports.push(size(n, bound, &out, &label).await);
    }
    let mem = if connections > 0 {
        memory(connections).await
    } else {
        Vec::new()
    };
    report(&reports, &mem, &out, &label);
}

/// The server settings that matter, printed so the table says what it measured.
async fn pg_settings() {
    let admin = support_pg::admin_url();
    let pool = sqlx::PgPool::connect(&admin)
        .await
        .expect("connect to the bench PostgreSQL");
    let mut line = String::from("PostgreSQL:");
    let mut durable = true;
    for name in [
        "server_version",
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "max_connections",
        "shared_buffers",
        "work_mem",
    ] {
        let value: String = sqlx::query_scalar(&format!("SHOW {name}"))
            .fetch_one(&pool)
            .await
            .expect("SHOW setting");
        if ["fsync", "synchronous_commit", "full_page_writes"].contains(&name) && value != "on" {
            durable = false;
        }
        line.push_str(&format!(" {name}={value}"));
    }
    println!("{line}");
    if !durable {
        println!(
            "WARNING: not a durable cluster (set SWITCHYARD_TEST_PG_DURABLE=1, or use \
             benches/scale/run.sh): these are not the documented figures"
        );
    }
    pool.close().await;
}
