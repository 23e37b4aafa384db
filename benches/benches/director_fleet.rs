//! SCALE-6 / HO-L3: the director at fleet size, on a durable PostgreSQL.
//!
//! `SWITCHYARD_FLEET_HOSTS` hosts (default 1,000,000) dealt round robin over 100 cells
//! (`SqlStore::seed_bulk`). The source cells are stand-ins in this process, one HTTP listener
//! each, that answer a handoff request with the real assignment transaction
//! (`SqlStore::run_transaction`, what a cell runs once its barrier is installed) and, after a
//! commit, the target's registration (`SqlStore::register_control`, what the target cell runs
//! when the desktop arrives), so moves never pile up awaiting registration. The director is
//! the release `switchyard director` binary (its CPU read from `/proc`), at its defaults
//! unless a phase says otherwise. Phases:
//!
//! 1. **sweep** (`SWITCHYARD_FLEET_SWEEP=1`, off by default: it takes the sweep's length):
//!    nothing is eligible; the time until the director's first full sweep
//!    (`switchyard_director_sweeps_completed_total` = 1) at the defaults.
//! 2. **store limit**: every tenth host eligible (a fresh measurement 100 ms better); the
//!    store at its default rate (6,000 moves a minute); moves a second over the phase.
//! 3. **limit raised**: the store's rate and in-flight limits raised out of reach, the
//!    director at `--max-dispatch 10000 --interval-ms 1000`; moves a second, and the CPU the
//!    director and PostgreSQL spend per move.
//! 4. **one cell dark**: as 3, with cell 7's stand-in accepting connections and never
//!    answering; moves a second among the other cells against theirs in phase 3.
//!
//! Each phase lasts `SWITCHYARD_FLEET_PHASE_S` seconds (default 120). `SWITCHYARD_BIN` names
//! the binary (default: `switchyard` beside this bench). Run: `benches/scale/fleet.sh`.
#![allow(clippy::print_stdout)] // A bench main: its report is the text on stdout.

#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchyard_adapters::handoff::proto::{HandoffAnswer, HANDOFF_PATH};
use switchyard_adapters::handoff::store::{BulkSeed, SqlStore, StoreOptions};
use switchyard_core::handoff::store::TxnOutcome;
use switchyard_core::handoff::{HandoffReply, HandoffRequest, HandoffResult, Incarnation};
use switchyard_core::MonoMs;

const CELLS: u32 = 100;
const DARK: u32 = 7;
const SECRET: &str = "fleet-bench-secret-0123456789abcdef";

fn one<T: std::str::FromStr>(name: &str, default: &str) -> T {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_owned());
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}={text:?}: not a number"))
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What the stand-in cells saw: commits by source cell, other outcomes by name.
#[derive(Debug, Default)]
struct Tally {
    committed: BTreeMap<u32, u64>,
    other: BTreeMap<String, u64>,
}

type Shared = Arc<Mutex<Tally>>;

/// A stand-in source cell: the real transaction, then the target's registration.
async fn cell(store: SqlStore, tally: Shared, dark: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    if dark {
        // Accept and hold every connection, never read or answer (a dark host's peer).
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        return url;
    }
    let app = axum::Router::new().route(
        HANDOFF_PATH,
        axum::routing::post(move |body: axum::body::Bytes| {
            let store = store.clone();
            let tally = tally.clone();
            async move {
                let Ok(req) = serde_json::from_slice::<HandoffRequest>(&body) else {
                    return Err(axum::http::StatusCode::BAD_REQUEST);
                };
                let now = MonoMs(unix_ms());
                let outcome = match store.run_transaction(now, &req).await {
                    Ok(o) => o,
                    Err(e) => {
                        *tally
                            .lock()
                            .expect("tally")
                            .other
                            .entry(format!("store: {e}").chars().take(60).collect())
                            .or_default() += 1;
                        return Err(axum::http::StatusCode::SERVICE_UNAVAILABLE);
                    }
                };
                let name = match outcome {
                    TxnOutcome::Committed { target, .. } => {
                        let _ = store
                            .register_control(now, req.source.host, target, Incarnation(1), true)
                            .await;
                        *tally
                            .lock()
                            .expect("tally")
                            .committed
                            .entry(req.source.cell.0)
                            .or_default() += 1;
                        None
                    }
                    TxnOutcome::RolledBack { reason } => Some(format!("rolled back {reason:?}")),
                    TxnOutcome::AuthorityChanged { check } => {
                        Some(format!("authority changed {check:?}"))
                    }
                };
                if let Some(n) = name {
                    *tally.lock().expect("tally").other.entry(n).or_default() += 1;
                }
                let reply = HandoffReply::Result(HandoffResult {
                    op_id: req.op_id,
                    outcome,
                });
                Ok(axum::Json(HandoffAnswer::of(reply)))
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The `switchyard director` process; killed on drop.
struct Director {
    child: Child,
    metrics: String,
}

impl Director {
    fn start(bin: &PathBuf, db: &str, extra: &[&str]) -> Director {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let metrics = format!("127.0.0.1:{port}");
        let mut child = Command::new(bin)
            .args(["director", "--db", db, "--metrics-listen", &metrics])
            .args(extra)
            .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                println!("  director: {}", line.chars().take(300).collect::<String>());
            }
        });
        Director { child, metrics }
    }

    /// User + system CPU seconds so far (`/proc/<pid>/stat`, 100 ticks a second).
    fn cpu_s(&self) -> f64 {
        cpu_of(self.child.id())
    }

    async fn metric(&self, name: &str) -> Option<f64> {
        let mut s = tokio::net::TcpStream::connect(&self.metrics).await.ok()?;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            .await
            .ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).await.ok()?;
        body.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    }
}

impl Drop for Director {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cpu_of(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The fields after the command (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the command.
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds of every `postgres` process.
fn postgres_cpu_s() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "postgres")
        })
        .map(cpu_of)
        .sum()
}

fn switchyard_bin() -> PathBuf {
    if let Ok(p) = std::env::var("SWITCHYARD_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("switchyard"))
        .expect("target dir");
    assert!(
        bin.exists(),
        "{} missing: cargo build --release -p switchyard-tools",
        bin.display()
    );
    bin
}

async fn exec(store_url: &str, sql: &str) {
    let pool = sqlx::PgPool::connect(store_url).await.expect("connect");
    sqlx::query(sql)
        .execute(&pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    pool.close().await;
}

/// Store limits: the defaults, or out of reach.
async fn limits(url: &str, raised: bool) {
    let (rate, in_flight) = if raised {
        (1_000_000_000, 1_000_000)
    } else {
        let d = switchyard_tools::handoff::cli::default_store_config();
        (d.max_commits_per_window, d.max_in_flight_migrations)
    };
    exec(
        url,
        &format!(
            "UPDATE ho_settings SET max_commits_per_window = {rate}, \
             max_in_flight_migrations = {in_flight}"
        ),
    )
    .await;
}

/// Moves committed by the stand-ins: in total and from cells other than the dark one.
fn committed(t: &Shared) -> (u64, u64) {
    let t = t.lock().expect("tally");
    let all = t.committed.values().sum();
    let live = t
        .committed
        .iter()
        .filter(|(c, _)| **c != DARK)
        .map(|(_, n)| n)
        .sum();
    (all, live)
}

struct Phase {
    moves_s: f64,
    live_moves_s: f64,
    director_cpu_ms_per_move: f64,
    pg_cpu_ms_per_move: f64,
}

async fn phase(
    name: &str,
    bin: &PathBuf,
    url: &str,
    tally: &Shared,
    extra: &[&str],
    secs: u64,
) -> Phase {
    let d = Director::start(bin, url, extra);
    // Let the first pass start before counting (the director reaches the store first).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (c0, l0) = committed(tally);
    let (dc0, pc0) = (d.cpu_s(), postgres_cpu_s());
    let t = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let el = t.elapsed().as_secs_f64();
    let (c1, l1) = committed(tally);
    let (dc1, pc1) = (d.cpu_s(), postgres_cpu_s());
    let dispatched = d
        .metric("switchyard_director_dispatched_total")
        .await
        .unwrap_or(f64::NAN);
    let stuck = d
        .metric("switchyard_director_cells_backed_off")
        .await
        .unwrap_or(f64::NAN);
    drop(d);
    let moves = (c1 - c0) as f64;
    let per = |cpu: f64| {
        if moves > 0.0 {
            cpu * 1000.0 / moves
        } else {
            f64::NAN
        }
    };
    let p = Phase {
        moves_s: moves / el,
        live_moves_s: (l1 - l0) as f64 / el,
        director_cpu_ms_per_move: per(dc1 - dc0),
        pg_cpu_ms_per_move: per(pc1 - pc0),
    };
    let other = std::mem::take(&mut tally.lock().expect("tally").other);
    println!(
        "{name}: {:.0} moves in {el:.0} s = {:.1} moves/s ({:.1}/s from cells other than {DARK}); \
         director CPU {:.0} ms ({:.3} ms/move), PostgreSQL CPU {:.0} ms ({:.2} ms/move); \
         director dispatched_total {dispatched}, cells backed off at the end {stuck}; \
         other answers {other:?}",
        moves,
        p.moves_s,
        p.live_moves_s,
        (dc1 - dc0) * 1000.0,
        p.director_cpu_ms_per_move,
        (pc1 - pc0) * 1000.0,
        p.pg_cpu_ms_per_move,
    );
    p
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(run());
}

async fn run() {
    let hosts: u64 = one("SWITCHYARD_FLEET_HOSTS", "1000000");
    let secs: u64 = one("SWITCHYARD_FLEET_PHASE_S", "120");
    let sweep: u8 = one("SWITCHYARD_FLEET_SWEEP", "0");
    let bin = switchyard_bin();
    println!(
        "director fleet: {hosts} hosts over {CELLS} cells, phases of {secs} s, {} cores, binary {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        bin.display()
    );
    let url = support_pg::fresh_db("fleet").await;
    let store = SqlStore::connect(
        &url,
        StoreOptions {
            max_connections: 32,
            ..StoreOptions::default()
        },
    )
    .await
    .expect("connect the store");
    store
        .put_settings(
            &switchyard_tools::handoff::cli::default_store_config(),
            true,
        )
        .await
        .expect("settings");
    let now = unix_ms();
    let t = Instant::now();
    store
        .seed_bulk(&BulkSeed {
            cells: CELLS,
            hosts,
            dense_hosts: 0,
            capacity: 4_000_000,
            measured_every: 10,
            measured_at: MonoMs(now),
            timeout: Duration::from_secs(1_800),
        })
        .await
        .expect("bulk seed");
    println!("seed: {hosts} hosts in {:.1} s", t.elapsed().as_secs_f64());

    let tally: Shared = Arc::default();
    for c in 1..=CELLS {
        let u = cell(store.clone(), tally.clone(), false).await;
        exec(
            &url,
            &format!(
                "UPDATE ho_cells SET internal_url = '{u}', lease_until = {} WHERE cell = {c}",
                now + 86_400_000
            ),
        )
        .await;
    }

    if sweep != 0 {
        let d = Director::start(&bin, &url, &[]);
        let t = Instant::now();
        let mut done = None;
        while t.elapsed() < Duration::from_secs(1_800) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if d.metric("switchyard_director_sweeps_completed_total")
                .await
                .is_some_and(|n| n >= 1.0)
            {
                done = Some(t.elapsed());
                break;
            }
        }
        let cpu = d.cpu_s();
        drop(d);
        match done {
            Some(e) => println!(
                "sweep at the defaults: {hosts} hosts examined in {:.0} s ({:.1} min); director CPU {cpu:.1} s",
                e.as_secs_f64(),
                e.as_secs_f64() / 60.0
            ),
            None => println!("sweep at the defaults: not complete within 30 min"),
        }
    }

    // Every tenth host (the measured ones) becomes eligible: fresh, 100 ms better.
    exec(
        &url,
        &format!(
            "UPDATE ho_measurements SET current_rtt_ms = 120, target_rtt_ms = 20, \
             measured_at_ms = {}",
            unix_ms()
        ),
    )
    .await;
    exec(&url, "DELETE FROM ho_director_cursors").await;
    exec(&url, "ANALYZE").await;

    limits(&url, false).await;
    let _ = phase("store limit (defaults)", &bin, &url, &tally, &[], secs).await;

    limits(&url, true).await;
    let raised = ["--max-dispatch", "10000", "--interval-ms", "1000"];
    let open = phase("limit raised", &bin, &url, &tally, &raised, secs).await;

    // Cell 7 goes dark: a new stand-in that never answers takes its address in the store.
    let u = cell(store.clone(), tally.clone(), true).await;
    exec(
        &url,
        &format!("UPDATE ho_cells SET internal_url = '{u}' WHERE cell = {DARK}"),
    )
    .await;
    let dark = phase(
        "limit raised, cell 7 dark",
        &bin,
        &url,
        &tally,
        &raised,
        secs,
    )
    .await;
    println!(
        "one cell dark: the other cells moved {:.1}/s against {:.1}/s with every cell live ({:.0} %)",
        dark.live_moves_s,
        open.live_moves_s,
        100.0 * dark.live_moves_s / open.live_moves_s
    );
    store.close().await;
}
