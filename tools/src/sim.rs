//! SIM-1: the deployment under deterministic simulation (cargo feature `sim`; the `switchyard`
//! binary does not link it). A seed builds a small fleet of the real drivers — relays and
//! failover clients over a signed directory, cells, two directors (one standing by), desktops
//! and mobiles that come and go, over the in-memory store — inside one simulated world ([`switchyard_adapters::sim`]): one current-thread tokio
//! runtime on paused time, an in-memory network, a seeded generator. The seed then decides
//! every fault, one at a time with a quiet gap between: a relay goes dark, crashes (and is
//! restarted), is cut off from one client both ways or one way, or slows down; a cell crashes
//! (and restarts once its lease allows), goes dark, or is cut off from the store; the
//! director crashes and restarts; the store is unreachable for everyone; a commit's answer is
//! lost; a cell's clock jumps forward. Whatever the faults, hosts are measured better elsewhere
//! (the weather) and mobiles come and go once a simulated minute.
//!
//! Judged, each check named by its requirement:
//! - **CONF-1**: every journal (clients, cells, director) by the spec's `conform`;
//! - **FO-X4**: after a relay fault, every client whose live channel was on it is on another
//!   relay within its deadline;
//! - **HO-L5**: a cell cut off from the store keeps no desktop past its lease;
//! - **HO-L3**: moves keep flowing: every simulated hour commits moves, and moves between the
//!   other cells go on, at least one a minute, while one is dark for three minutes or more; no
//!   host is moved into a cell whose lease in the store had lapsed;
//! - **HO-L4**: no move refused `store_full`, the attempt history under its bound (after
//!   every fault);
//! - **HO-L2**: a crashed cell starts again within a minute of its lease allowing it;
//! - **HO-L1**: at the end, faults healed and a quiet period later, every desktop is connected
//!   to the cell the store assigns its host, and only there;
//! - no panic, and no unbounded growth (the store's rows, the world's open connections).
//!
//! The same seed and commit give the same run, byte for byte: [`SimReport::journals`] is
//! compared by the replay test. What is not simulated: the SQL stores (the memory store stands
//! in; the differential tests tie them), TLS, DNS, the OS's TCP timers (a held connection waits
//! for the heal, however long), signed directory updates (the list is fixed), the disk (the
//! journals are real files, never full), threads (one runtime thread: the interleavings are
//! the tasks' on one thread, one per seed), signals and the process supervisor (a crashed
//! process is restarted by the simulator).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_adapters::failover::channel::ReconnectConfig;
use switchyard_adapters::failover::directory::{self, DirectoryConfig, DirectoryPayload};
use switchyard_adapters::failover::driver::{ClientConfig, ClientHandle, ClientJournal};
use switchyard_adapters::failover::relay::{RelayConfig, RelayHandle};
use switchyard_adapters::handoff::auth::{KeyRing, Secret};
use switchyard_adapters::handoff::cell::{start_cell, CellConfig, CellHandle};
use switchyard_adapters::handoff::client::{
    run_mobile, spawn_desktop, DesktopConfig, DesktopHandle, MobileConfig,
};
use switchyard_adapters::handoff::client_auth::mint_client_token;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::director::{Director, DirectorConfig};
use switchyard_adapters::handoff::store::{MemoryStore, Store};
use switchyard_adapters::journal::{Journal, JournalConfig, MAX_LINES_PER_SECOND};
use switchyard_adapters::sim::World;
use switchyard_adapters::stop::Stop;
use switchyard_core::failover::{RelayUrl, Thresholds};
use switchyard_core::handoff::store::{StoreBounds, StoreConfig};
use switchyard_core::handoff::{
    CellId, DirectorPolicy, DispatchLimits, HostId, Measurement, PolicyConfig, ScanLimits,
};
use switchyard_core::MonoMs;
use switchyard_spec::conform::Conformance;

/// 2027-01-15 in Unix ms: every simulation's first instant.
const EPOCH_MS: u64 = 1_800_000_000_000;
const HOUR_MS: u64 = 3_600_000;
const RELAYS: u8 = 3;
const CLIENTS: u8 = 8;
const CELLS: u32 = 4;
/// Directors under one id, at most: a seed runs one (odd seeds: two, one standing by, SCALE-6).
const DIRECTORS: u8 = 2;
const DESKTOPS: u64 = 50;
/// Mobiles attached at once, at most (each comes, sends, stays a while and goes).
const MOBILES: usize = 6;
const RELAY_PORT: u16 = 443;
const CELL_PORT: u16 = 8080;
/// The store's attempt bound in the simulation: about two days of this fleet's moves (some
/// 7,000 a day), so the director's 24 h retention keeps the history under it and a history
/// never reaped reaches it on the third day.
const MAX_ATTEMPT_ROWS: u64 = 16_000;
/// A host's cooldown between moves: shorter than the weather's period (ten minutes a host),
/// so a host is eligible again by its next measurement and moves stay spread over time (about
/// five a minute) even after an outage held many back at once; HO-L3's check around a dark
/// cell relies on it.
const HOST_COOLDOWN_MS: u64 = 60_000;
/// The cells' identity lease (HO-L2/L5), the binary's default.
const CELL_LEASE: Duration = Duration::from_secs(15);
const DESKTOP_SECRET: &[u8] = b"sim-desktop-secret-0123456789abcdef";
const INTERNAL_SECRET: &[u8] = b"sim-internal-secret-0123456789abcdef";

/// The failures of one requirement a summary prints (the rest are counted).
const SHOWN_PER_ID: usize = 5;

/// What to simulate.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    pub seed: u64,
    /// Simulated time, minutes (the binary takes hours).
    pub minutes: u64,
    /// Keep every journal's text in [`SimReport::journals`] (the replay test, `--journals`);
    /// otherwise only their digest is kept (a month's journals are gigabytes).
    pub keep_journals: bool,
}

/// One failed check, named by its requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub id: &'static str,
    pub at_ms: u64,
    pub detail: String,
}

/// What a run did and found.
#[derive(Debug, Default)]
pub struct SimReport {
    pub seed: u64,
    pub minutes: u64,
    /// Every fault injected, `(at ms since the start, what)`.
    pub faults: Vec<(u64, String)>,
    pub failures: Vec<Failure>,
    /// Moves committed per simulated hour.
    pub moves_by_hour: Vec<u64>,
    /// Journal lines judged; a digest of every journal's bytes (clients, cells, directors) and,
    /// if asked for, the text itself.
    pub journal_lines: u64,
    pub journal_digest: u64,
    pub journals: String,
    /// Directors run under one id (1 or 2, by the seed).
    pub directors: u8,
    /// Mobiles run, and the most simultaneous connections the world held at a fault's end.
    pub mobiles: u64,
    pub peak_connections: usize,
    /// FO-X4: the slowest switch after a relay fault, ms.
    pub slowest_switch_ms: u64,
}

impl SimReport {
    /// A run that could not start (no runtime, no folder for its journals): a SIM-1 failure.
    fn not_started(seed: u64, detail: String) -> SimReport {
        SimReport {
            seed,
            failures: vec![Failure {
                id: "SIM-1",
                at_ms: 0,
                detail,
            }],
            ..SimReport::default()
        }
    }

    #[must_use]
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The command that replays this run.
    #[must_use]
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p switchyard-tools --features sim --bin switchyard-sim -- --seed {} --minutes {}",
            self.seed, self.minutes
        )
    }

    /// A one-paragraph summary.
    #[must_use]
    pub fn summary(&self) -> String {
        let moves: u64 = self.moves_by_hour.iter().sum();
        let mut s = format!(
            "seed {}: {} min simulated, {} director(s), {} faults, {} moves, {} mobiles, {} journal lines (digest {:016x}), peak {} connections, slowest relay switch {} ms: {}",
            self.seed,
            self.minutes,
            self.directors,
            self.faults.len(),
            moves,
            self.mobiles,
            self.journal_lines,
            self.journal_digest,
            self.peak_connections,
            self.slowest_switch_ms,
            if self.passed() { "passed" } else { "FAILED" }
        );
        // The first few of each requirement: one bug can fail a check hundreds of times.
        let mut shown: BTreeMap<&str, usize> = BTreeMap::new();
        for f in &self.failures {
            let n = shown.entry(f.id).or_default();
            *n += 1;
            if *n <= SHOWN_PER_ID {
                let _ = write!(s, "\n  {} at {} ms: {}", f.id, f.at_ms, f.detail);
            }
        }
        for (id, n) in shown {
            if n > SHOWN_PER_ID {
                let _ = write!(s, "\n  {id}: {} more failures", n - SHOWN_PER_ID);
            }
        }
        if !self.passed() {
            let _ = write!(s, "\n  replay: {}", self.replay_command());
        }
        s
    }
}

/// Runs one simulation on a fresh current-thread runtime (paused time) on this thread.
#[must_use]
pub fn run(config: SimConfig) -> SimReport {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return SimReport::not_started(config.seed, format!("no runtime: {e}")),
    };
    let panics = Panics::install();
    let mut report = rt.block_on(simulate(config));
    drop(rt);
    for p in panics.take() {
        report.failures.push(Failure {
            id: "SIM-1",
            at_ms: 0,
            detail: format!("a task panicked: {p}"),
        });
    }
    report
}

/// Panics on this thread, recorded by a hook (the hook of other threads is left as it was).
struct Panics {
    seen: Arc<Mutex<Vec<String>>>,
}

thread_local! {
    static PANICS: std::cell::RefCell<Option<Arc<Mutex<Vec<String>>>>> = const { std::cell::RefCell::new(None) };
}

impl Panics {
    fn install() -> Panics {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let recorded = PANICS.with(|p| {
                    p.borrow().as_ref().map(|seen| {
                        if let Ok(mut v) = seen.lock() {
                            v.push(info.to_string());
                        }
                    })
                });
                if recorded.is_none() {
                    previous(info);
                }
            }));
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        PANICS.with(|p| *p.borrow_mut() = Some(seen.clone()));
        Panics { seen }
    }

    fn take(self) -> Vec<String> {
        PANICS.with(|p| p.borrow_mut().take());
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

fn ip(net: u8, n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, net, 0, n))
}

fn relay_ip(i: u8) -> IpAddr {
    ip(1, i + 1)
}
fn cell_ip(c: u32) -> IpAddr {
    ip(2, u8::try_from(c).unwrap_or(u8::MAX))
}
fn director_ip(d: u8) -> IpAddr {
    ip(3, d + 1)
}
fn mobile_ip(m: usize) -> IpAddr {
    ip(6, u8::try_from(m + 1).unwrap_or(u8::MAX))
}
fn client_ip(i: u8) -> IpAddr {
    ip(4, i + 1)
}
fn desktop_ip(h: u64) -> IpAddr {
    ip(5, u8::try_from(h).unwrap_or(u8::MAX))
}

/// One relay fault's FO-X4 watch: clients on `relay` when it failed.
struct Watch {
    relay: IpAddr,
    since_ms: u64,
    clients: Vec<usize>,
}

/// What the store held at one supervisor step, for HO-L3's "never moved into a lapsed cell".
struct LeaseWatch {
    now: MonoMs,
    assigned: BTreeMap<u64, u32>,
    leases: BTreeMap<u32, MonoMs>,
}

struct Fleet {
    world: Arc<World>,
    store: MemoryStore,
    journal_dir: tempfile::TempDir,
    /// Each process's journal file: the clients', the cells', then one per director (two
    /// directors under one id are two processes: a judge reads each file on its own).
    journals: Vec<(String, Journal)>,
    relays: Vec<Option<RelayHandle>>,
    clients: Vec<ClientHandle>,
    cells: BTreeMap<u32, Option<CellHandle>>,
    cell_stores: BTreeMap<u32, MemoryStore>,
    desktops: Vec<DesktopHandle>,
    directors: Vec<Option<(Stop, tokio::task::JoinHandle<()>)>>,
    director_stores: Vec<MemoryStore>,
    mobiles: Vec<Option<tokio::task::JoinHandle<()>>>,
    /// Cells a fault holds down (the supervisor leaves them stopped).
    held_down: std::collections::BTreeSet<u32>,
    keep_journals: bool,
    /// The last simulated minute [`Fleet::environment`] ran in.
    last_minute: Option<u64>,
    /// The end: no weather, no new mobile (the fleet settles for HO-L1).
    calm: bool,
    /// Measurements the weather wrote so far.
    measured: u64,
    /// HO-L3's lease check: the store's time, assignments and cell leases at the last step.
    lease_watch: Option<LeaseWatch>,
    thresholds: Thresholds,
    start: tokio::time::Instant,
    report: SimReport,
}

impl Fleet {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn fail(&mut self, id: &'static str, detail: String) {
        let at_ms = self.now_ms();
        self.report.failures.push(Failure { id, at_ms, detail });
    }

    fn fault(&mut self, what: String) {
        let at = self.now_ms();
        self.report.faults.push((at, what));
    }

    fn pick(&self, n: u64) -> u64 {
        self.world.next_u64() % n.max(1)
    }

    async fn start_relay(&mut self, i: u8) {
        let addr = SocketAddr::new(relay_ip(i), RELAY_PORT);
        let cfg = RelayConfig::new(addr, vec!["/relay".to_owned()]);
        let started = self
            .world
            .run_on(relay_ip(i), async move { RelayHandle::start(cfg).await })
            .await;
        match started {
            Ok(Ok(handle)) => self.relays[usize::from(i)] = Some(handle),
            other => {
                let detail = format!("relay {i} did not start: {other:?}");
                self.fail("SIM-1", detail);
            }
        }
    }

    async fn start_cell(&mut self, c: u32) -> bool {
        let mut cfg = CellConfig::new(
            CellId(c),
            SocketAddr::new(cell_ip(c), CELL_PORT),
            KeyRing::from_secrets(CellId(c), &internal_secret(), None),
            desktop_secret(),
        );
        cfg.cell_lease = CELL_LEASE;
        cfg.journal = self.journals[1].1.clone();
        let store = self.cell_stores[&c].clone();
        let started = self
            .world
            .run_on(cell_ip(c), async move {
                start_cell(cfg, Store::Memory(store), Clock::default()).await
            })
            .await;
        match started {
            Ok(Ok(handle)) => {
                self.cells.insert(c, Some(handle));
                true
            }
            _ => false,
        }
    }

    fn start_director(&mut self, d: u8) {
        let stop = Stop::new();
        let listener = stop.listener();
        let store = self.director_stores[usize::from(d)].clone();
        let journal = self.journals[2 + usize::from(d)].1.clone();
        let task = self.world.run_on(director_ip(d), async move {
            let director = Director::new(director_config(), Store::Memory(store), Clock::default())
                .with_journal(journal);
            director.run(listener).await;
        });
        self.directors[usize::from(d)] = Some((stop, task));
    }

    /// Mobiles come and go: a free slot takes a mobile for a random host, which sends a few
    /// mutations, stays attached a while (the host is in use: no move) and leaves.
    fn mobiles_come_and_go(&mut self) {
        for m in 0..MOBILES {
            let free = self.mobiles[m]
                .as_ref()
                .is_none_or(tokio::task::JoinHandle::is_finished);
            if !free || self.pick(4) != 0 {
                continue;
            }
            let host = 1 + self.pick(DESKTOPS);
            let hold = Duration::from_millis(10_000 + self.pick(170_000));
            let n = self.report.mobiles;
            self.report.mobiles += 1;
            let expires_ms = EPOCH_MS + 400 * 24 * HOUR_MS;
            let token = mint_client_token(&desktop_secret().desktop_token(host), host, expires_ms);
            let mut cfg = MobileConfig::new(
                resolvers(),
                host,
                token,
                (0..3).map(|i| format!("m{n}-{i}")).collect(),
            );
            cfg.hold = hold;
            let stop = Stop::new();
            let listener = stop.listener();
            self.mobiles[m] = Some(self.world.run_on(mobile_ip(m), async move {
                let _keep = stop;
                run_mobile(cfg, listener).await;
            }));
        }
    }

    /// The client indices whose live channel is on `relay` now.
    fn clients_on(&self, relay: IpAddr) -> Vec<usize> {
        self.clients
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.readiness()
                    .live
                    .is_some_and(|u| url_ip(&u) == Some(relay))
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// FO-X4: every client of `watch` is live on another relay by the deadline (looked at
    /// every 100 ms, so the slowest switch is measured).
    async fn judge_switch(&mut self, watch: &Watch) {
        let mut pending = watch.clients.clone();
        let deadline = self.thresholds.deadline_ms;
        let mut waited = 0;
        while !pending.is_empty() && waited <= deadline {
            pending.retain(|&i| {
                let live = self.clients[i].readiness().live;
                !matches!(live.as_ref().and_then(url_ip), Some(at) if at != watch.relay)
            });
            if pending.is_empty() {
                break;
            }
            Self::idle(100).await;
            waited += 100;
        }
        let took = self.now_ms().saturating_sub(watch.since_ms);
        if !watch.clients.is_empty() {
            self.report.slowest_switch_ms = self.report.slowest_switch_ms.max(took);
        }
        for i in pending {
            let live = self.clients[i].readiness().live;
            let detail = format!(
                "client {i} is not on another relay {deadline} ms after relay {} failed (live: {live:?})",
                watch.relay
            );
            self.fail("FO-X4", detail);
        }
        // The rest of the deadline passes either way, so every run's timing is the same.
        Self::idle(deadline.saturating_sub(waited)).await;
    }

    /// Waits `ms` of simulated time.
    async fn idle(ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    /// Waits `ms` of simulated time as the cells' supervisor: every 5 s, a cell that stopped
    /// (its lease lost or lapsed: it exits, HO-L2/L5) is started again, as systemd restarts
    /// it, unless a fault holds it down.
    async fn wait(&mut self, ms: u64) {
        let mut left = ms;
        while left > 0 {
            let step = left.min(5_000);
            Self::idle(step).await;
            left -= step;
            self.supervise().await;
            self.environment();
            self.check_targets_live();
        }
    }

    /// HO-L3: a host is never moved into a cell whose lease has lapsed. Judged from the
    /// store's own rows between two steps: a host assigned to another cell now, whose new
    /// cell's lease did not change since the last step and had already ended then, was moved
    /// while that lease was lapsed (sound whatever happened between the steps).
    fn check_targets_live(&mut self) {
        let now = Clock::default().now();
        let assigned = self.assignments();
        let leases: BTreeMap<u32, MonoMs> = (1..=CELLS)
            .filter_map(|c| Some((c, self.store.cell_lease(CellId(c)).ok()??)))
            .collect();
        let last = self.lease_watch.replace(LeaseWatch {
            now,
            assigned,
            leases,
        });
        let (Some(last), Some(watch)) = (last, self.lease_watch.as_ref()) else {
            return;
        };
        let mut moved_in = Vec::new();
        for (h, c) in &watch.assigned {
            if last.assigned.get(h) == Some(c) {
                continue;
            }
            let until = watch.leases.get(c).copied();
            let lapsed = until.is_some_and(|u| u != MonoMs::ZERO && u <= last.now);
            if lapsed && last.leases.get(c).copied() == until {
                moved_in.push((*h, *c, until.map_or(0, MonoMs::as_ms)));
            }
        }
        for (h, c, until) in moved_in {
            let detail = format!(
                "host {h} moved into cell {c}, whose lease had ended at store time {until} ms"
            );
            self.fail("HO-L3", detail);
        }
    }

    /// What goes on whatever the faults do, once a simulated minute: the weather, and mobiles
    /// coming and going.
    fn environment(&mut self) {
        let minute = self.now_ms() / 60_000;
        if self.last_minute == Some(minute) {
            return;
        }
        self.last_minute = Some(minute);
        if self.calm {
            return;
        }
        self.weather();
        self.mobiles_come_and_go();
    }

    async fn supervise(&mut self) {
        for c in 1..=CELLS {
            if self.held_down.contains(&c) {
                continue;
            }
            let stopped = match self.cells.get(&c) {
                Some(Some(cell)) => cell.lease_lapsed(),
                _ => true,
            };
            if stopped {
                if let Some(Some(cell)) = self.cells.insert(c, None) {
                    cell.kill();
                    self.world.crash(cell_ip(c));
                }
                self.start_cell(c).await;
            }
        }
    }

    /// One relay fault, judged by FO-X4, then healed.
    async fn relay_fault(&mut self) {
        let i = u8::try_from(self.pick(u64::from(RELAYS))).unwrap_or(0);
        let relay = relay_ip(i);
        let kind = self.pick(5);
        let on = self.clients_on(relay);
        let watch = Watch {
            relay,
            since_ms: self.now_ms(),
            clients: on.clone(),
        };
        let hold_ms = 20_000 + self.pick(100_000);
        match kind {
            0 => {
                self.fault(format!("relay {relay} dark for {hold_ms} ms"));
                self.world.set_dark(relay, true);
                self.judge_switch(&watch).await;
                self.wait(hold_ms).await;
                self.world.set_dark(relay, false);
            }
            1 => {
                self.fault(format!(
                    "relay {relay} crashed, restarted after {hold_ms} ms"
                ));
                self.world.crash(relay);
                self.relays[usize::from(i)] = None;
                self.judge_switch(&watch).await;
                self.wait(hold_ms).await;
                self.start_relay(i).await;
            }
            2 | 3 => {
                // One client (on the relay if any) loses the relay: both ways or the relay's
                // answers only.
                let both = kind == 2;
                let c = on.first().copied().unwrap_or(0);
                let client = client_ip(u8::try_from(c).unwrap_or(0));
                self.fault(format!(
                    "{} between client {client} and relay {relay} for {hold_ms} ms",
                    if both {
                        "partition"
                    } else {
                        "one-way loss (relay to client)"
                    }
                ));
                self.world.set_blocked(relay, client, true);
                if both {
                    self.world.set_blocked(client, relay, true);
                }
                let watch = Watch {
                    clients: on.into_iter().filter(|&x| x == c).collect(),
                    ..watch
                };
                self.judge_switch(&watch).await;
                self.wait(hold_ms).await;
                self.world.set_blocked(relay, client, false);
                self.world.set_blocked(client, relay, false);
            }
            _ => {
                let delay = 50 + self.pick(400);
                self.fault(format!(
                    "relay {relay} delayed {delay} ms one way for {hold_ms} ms"
                ));
                self.world.set_delay(relay, delay);
                self.wait(hold_ms).await;
                self.world.set_delay(relay, 0);
            }
        }
    }

    /// One cell, director or store fault, then healed.
    async fn handoff_fault(&mut self) {
        let c = 1 + u32::try_from(self.pick(u64::from(CELLS))).unwrap_or(0);
        let hold_ms = 30_000 + self.pick(240_000);
        match self.pick(7) {
            6 => {
                let out_ms = 5_000 + self.pick(55_000);
                self.fault(format!(
                    "the store is unreachable for every process for {out_ms} ms"
                ));
                let handles: Vec<MemoryStore> = self
                    .cell_stores
                    .values()
                    .chain(self.director_stores.iter())
                    .cloned()
                    .collect();
                for h in &handles {
                    h.faults().cut_off(true);
                }
                self.wait(out_ms).await;
                for h in &handles {
                    h.faults().cut_off(false);
                }
            }
            0 => {
                self.fault(format!("cell {c} crashed, restarted after {hold_ms} ms"));
                self.world.crash(cell_ip(c));
                self.cells.insert(c, None);
                self.held_down.insert(c);
                self.wait(hold_ms).await;
                self.held_down.remove(&c);
                // Restarted by the supervisor every 5 s until the old lease lapsed.
                self.wait(60_000).await;
                if self.cells.get(&c).is_none_or(Option::is_none) {
                    self.fail(
                        "HO-L2",
                        format!("cell {c} did not start again within a minute"),
                    );
                }
            }
            1 => {
                self.fault(format!("cell {c} dark for {hold_ms} ms"));
                let before = self.assignments();
                let measured = self.measured;
                self.world.set_dark(cell_ip(c), true);
                self.wait(hold_ms).await;
                self.world.set_dark(cell_ip(c), false);
                // HO-L3: moves between the other cells went on around the stuck one.
                let around = self
                    .assignments()
                    .iter()
                    .filter(|(h, to)| {
                        let from = before.get(h).copied();
                        from.is_some_and(|f| f != **to && f != c) && **to != c
                    })
                    .count();
                self.fault(format!(
                    "cell {c} light again: {around} moves between the other cells while dark"
                ));
                // The weather moves about two and a half hosts a minute between the other
                // cells (the lowest seen over darks of three minutes or more in a day of four
                // seeds: 2.0 a minute; over shorter ones, in a month, 0.85); a director held up
                // by the dark cell moves only what its stuck pass had sent (0.5 to 0.8). At
                // least one a minute, for darks of three minutes or more.
                if hold_ms >= 180_000 && (around as u64) * 60_000 < hold_ms {
                    let moved = self
                        .assignments()
                        .iter()
                        .filter(|(h, to)| before.get(h) != Some(to))
                        .count();
                    let detail = format!(
                        "{around} moves between the other cells during the {hold_ms} ms cell {c} was dark, fewer than one a minute ({moved} moves in all, {} measurements)",
                        self.measured - measured
                    );
                    self.fail("HO-L3", detail);
                }
            }
            2 => {
                self.fault(format!("cell {c} cut off from the store for {hold_ms} ms"));
                self.cell_stores[&c].faults().cut_off(true);
                let lease_ms = u64::try_from(CELL_LEASE.as_millis()).unwrap_or(u64::MAX);
                // HO-L5: past the lease (and a renewal's bound) no desktop is kept there.
                Self::idle(lease_ms + 5_000).await;
                if let Some(Some(cell)) = self.cells.get(&c) {
                    let kept: Vec<u64> = (1..=DESKTOPS)
                        .filter(|&h| cell.host(HostId(h)).is_some_and(|v| v.control_connected))
                        .collect();
                    if !kept.is_empty() {
                        let detail = format!(
                            "cell {c} cut off from the store {} ms ago still keeps desktops {kept:?}",
                            lease_ms + 5_000
                        );
                        self.fail("HO-L5", detail);
                    }
                }
                self.wait(hold_ms.saturating_sub(lease_ms + 5_000)).await;
                self.cell_stores[&c].faults().cut_off(false);
            }
            3 => {
                let n = self.directors.len() as u64;
                let d = u8::try_from(self.pick(n)).unwrap_or(0);
                self.fault(format!(
                    "director {d} crashed, restarted after {hold_ms} ms"
                ));
                self.world.crash(director_ip(d));
                self.directors[usize::from(d)] = None;
                self.wait(hold_ms).await;
                self.start_director(d);
            }
            4 => {
                self.fault(format!("cell {c}'s next commit answer is lost"));
                self.cell_stores[&c].faults().lose_next_commit_result();
                self.wait(hold_ms).await;
            }
            _ => {
                let jump = 1_000 + self.pick(5_000);
                self.fault(format!("cell {c}'s clock jumps {jump} ms forward"));
                self.world
                    .set_clock_offset(cell_ip(c), i64::try_from(jump).unwrap_or(0));
                self.wait(hold_ms).await;
            }
        }
    }

    /// The weather: hosts measured better at the next cell, as their desktops would report; a
    /// host every tenth minute, staggered by host, so moves spread over time (about five hosts
    /// a minute) instead of coming in waves.
    fn weather(&mut self) {
        let now = Clock::default().now();
        let minute = self.now_ms() / 60_000;
        for h in 1..=DESKTOPS {
            if (minute + h) % 10 != 0 {
                continue;
            }
            let Ok(Some(auth)) = self.store.authority(HostId(h)) else {
                continue;
            };
            let next = CellId(auth.cell.0 % CELLS + 1);
            let m = Measurement {
                measured_at: now,
                current_rtt_ms: 120,
                target_rtt_ms: 40,
            };
            if self.store.put_measurement(HostId(h), next, &m).is_ok() {
                self.measured += 1;
            }
        }
    }

    fn assignments(&self) -> BTreeMap<u64, u32> {
        (1..=DESKTOPS)
            .filter_map(|h| {
                let a = self.store.authority(HostId(h)).ok()??;
                Some((h, a.cell.0))
            })
            .collect()
    }
}

fn url_ip(url: &RelayUrl) -> Option<IpAddr> {
    let rest = url.as_str().strip_prefix("ws://")?;
    let hostport = rest.split('/').next()?;
    hostport.parse::<SocketAddr>().ok().map(|a| a.ip())
}

fn desktop_secret() -> Secret {
    Secret::new(DESKTOP_SECRET, "desktop").unwrap_or_else(|_| unreachable!("a fixed secret"))
}

fn internal_secret() -> Secret {
    Secret::new(INTERNAL_SECRET, "internal").unwrap_or_else(|_| unreachable!("a fixed secret"))
}

fn store_config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: HOST_COOLDOWN_MS,
        },
        max_in_flight_migrations: 1_024,
        rate_window_ms: 60_000,
        max_commits_per_window: 6_000,
        registration_timeout_ms: 120_000,
        bounds: StoreBounds {
            max_attempt_rows: MAX_ATTEMPT_ROWS,
            ..StoreBounds::FLEET
        },
    }
}

fn resolvers() -> Vec<String> {
    (1..=CELLS)
        .map(|c| format!("http://{}:{CELL_PORT}", cell_ip(c)))
        .collect()
}

/// Both directors have one id: one holds the sweep, the other stands by (SCALE-6) and takes
/// over when the first crashes.
fn director_config() -> DirectorConfig {
    DirectorConfig {
        id: "sim-director".into(),
        policy: DirectorPolicy {
            enabled: true,
            cohort_percent: 100,
            policy: store_config().policy,
        },
        limits: ScanLimits {
            page_size: 100,
            max_pages: 10,
            max_dispatch: 100,
        },
        max_failures: 100,
        request_timeout: Duration::from_secs(5),
        retries: 0,
        secret: internal_secret(),
        interval: Duration::from_secs(30),
        dispatch: DispatchLimits::DEFAULT,
    }
}

fn open_journal(dir: &std::path::Path, name: &str) -> Journal {
    Journal::open(
        &JournalConfig {
            path: Some(dir.join(name)),
            to_log: false,
            max_lines_per_second: MAX_LINES_PER_SECOND,
        },
        Vec::new(),
    )
    .unwrap_or_else(|_| Journal::off())
}

async fn simulate(config: SimConfig) -> SimReport {
    let world = World::new(config.seed, EPOCH_MS);
    let _installed = world.install();
    let journal_dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            let detail = format!("no folder for the journals: {e}");
            return SimReport::not_started(config.seed, detail);
        }
    };
    let directors = 1 + u8::try_from(config.seed % u64::from(DIRECTORS)).unwrap_or(0);
    let mut names = vec!["clients.jsonl".to_owned(), "cells.jsonl".to_owned()];
    names.extend((0..directors).map(|d| format!("director-{d}.jsonl")));
    let journals = names
        .into_iter()
        .map(|name| {
            let journal = open_journal(journal_dir.path(), &name);
            (name, journal)
        })
        .collect();
    let store = MemoryStore::new(store_config());
    let mut fleet = Fleet {
        world: world.clone(),
        director_stores: (0..directors).map(|_| store.connection()).collect(),
        directors: (0..directors).map(|_| None).collect(),
        mobiles: (0..MOBILES).map(|_| None).collect(),
        cell_stores: (1..=CELLS).map(|c| (c, store.connection())).collect(),
        store,
        journal_dir,
        journals,
        relays: (0..RELAYS).map(|_| None).collect(),
        clients: Vec::new(),
        cells: BTreeMap::new(),
        desktops: Vec::new(),
        held_down: std::collections::BTreeSet::new(),
        keep_journals: config.keep_journals,
        last_minute: None,
        calm: false,
        measured: 0,
        lease_watch: None,
        thresholds: Thresholds::default(),
        start: tokio::time::Instant::now(),
        report: SimReport {
            seed: config.seed,
            minutes: config.minutes,
            directors,
            ..SimReport::default()
        },
    };
    setup(&mut fleet).await;
    let end_ms = config.minutes * 60_000;
    let mut hour_start = fleet.assignments();
    let mut next_hour = HOUR_MS;
    let mut moves_this_hour = 0u64;
    while fleet.now_ms() < end_ms && fleet.report.failures.is_empty() {
        fleet.environment();
        if fleet.pick(2) == 0 {
            fleet.relay_fault().await;
        } else {
            fleet.handoff_fault().await;
        }
        // A quiet gap between faults.
        let gap = 60_000 + fleet.pick(240_000);
        fleet.wait(gap).await;
        let now = fleet.assignments();
        moves_this_hour += now
            .iter()
            .filter(|(h, c)| hour_start.get(h) != Some(c))
            .count() as u64;
        hour_start = now;
        check_growth(&mut fleet);
        if fleet.now_ms() >= next_hour {
            fleet.report.moves_by_hour.push(moves_this_hour);
            if moves_this_hour == 0 {
                fleet.fail(
                    "HO-L3",
                    "no move committed in the last simulated hour".into(),
                );
            }
            moves_this_hour = 0;
            next_hour += HOUR_MS;
        }
    }
    finish(&mut fleet).await;
    fleet.report
}

async fn setup(fleet: &mut Fleet) {
    for i in 0..RELAYS {
        fleet.start_relay(i).await;
    }
    // The signed directory every client reads (a real file: read once, never changed).
    let urls: Vec<String> = (0..RELAYS)
        .map(|i| format!("ws://{}:{RELAY_PORT}/relay", relay_ip(i)))
        .collect();
    let (secret, public) = match directory::generate_key_pair() {
        Ok(k) => k,
        Err(e) => return fleet.fail("SIM-1", format!("no directory key: {e}")),
    };
    let (Ok(key), Ok(public)) = (
        directory::parse_secret_key("sim key", &secret),
        directory::parse_public_key("sim key", &public),
    ) else {
        return fleet.fail("SIM-1", "directory keys unreadable".into());
    };
    let signed = directory::sign(
        &key,
        &DirectoryPayload {
            relays: urls,
            refresh_after_seconds: 3_600,
            sequence: 1,
            expires_at_unix_s: EPOCH_MS / 1000 + 400 * 24 * 3600,
        },
    );
    let path = fleet.journal_dir.path().join("directory.json");
    let written = serde_json::to_vec(&signed)
        .map_err(|e| e.to_string())
        .and_then(|json| std::fs::write(&path, json).map_err(|e| e.to_string()));
    if let Err(e) = written {
        return fleet.fail("SIM-1", format!("directory not written: {e}"));
    }
    for i in 0..CLIENTS {
        let cfg = ClientConfig {
            thresholds: fleet.thresholds,
            reconnect: ReconnectConfig::default(),
            directory: DirectoryConfig::Signed {
                path: path.clone(),
                key: public,
            },
            journal: ClientJournal {
                journal: fleet.journals[0].1.clone(),
                key: format!("client-{i}"),
            },
        };
        let handle = fleet
            .world
            .run_on(client_ip(i), async move { ClientHandle::start(cfg) })
            .await;
        match handle {
            Ok(h) => fleet.clients.push(h),
            Err(e) => return fleet.fail("SIM-1", format!("client {i} did not start: {e}")),
        }
    }
    for c in 1..=CELLS {
        if !fleet.start_cell(c).await {
            return fleet.fail("SIM-1", format!("cell {c} did not start"));
        }
    }
    let resolvers = resolvers();
    for h in 1..=DESKTOPS {
        let home = CellId(u32::try_from(h % u64::from(CELLS)).unwrap_or(0) + 1);
        if !matches!(fleet.store.insert_host(HostId(h), home, true), Ok(Ok(_))) {
            return fleet.fail("SIM-1", format!("host {h} not enrolled"));
        }
        let cfg = DesktopConfig {
            resolvers: resolvers.clone(),
            host: h,
            token: desktop_secret().desktop_token(h),
            capable: true,
            measure: None,
            pace_min: Duration::from_millis(50),
            pace_max: Duration::from_millis(400),
            ping_every: Duration::from_secs(30),
        };
        match fleet
            .world
            .run_on(desktop_ip(h), async move { spawn_desktop(cfg) })
            .await
        {
            Ok(d) => fleet.desktops.push(d),
            Err(e) => return fleet.fail("SIM-1", format!("desktop {h} did not start: {e}")),
        }
    }
    for d in 0..u8::try_from(fleet.directors.len()).unwrap_or(0) {
        fleet.start_director(d);
    }
    // Every client attached, every desktop registered.
    Fleet::idle(60_000).await;
    for (i, c) in fleet.clients.iter().enumerate() {
        if c.readiness().live.is_none() {
            let detail = format!("client {i} has no live channel a minute after the start");
            fleet.report.failures.push(Failure {
                id: "FO-X4",
                at_ms: 60_000,
                detail,
            });
        }
    }
}

/// No unbounded growth: the store's history under its bound, the world's connections within a
/// multiple of the fleet.
fn check_growth(fleet: &mut Fleet) {
    // Each client, desktop and mobile holds a few connections; a leak grows past any multiple.
    let open = fleet.world.open_connections();
    fleet.report.peak_connections = fleet.report.peak_connections.max(open);
    let bound = 4 * (usize::from(CLIENTS) + usize::try_from(DESKTOPS).unwrap_or(0) + MOBILES) + 64;
    if open > bound {
        fleet.fail(
            "SIM-1",
            format!("{open} connections open (a leak: the fleet needs under {bound})"),
        );
    }
    let attempts = fleet.store.attempt_rows() as u64;
    if attempts >= MAX_ATTEMPT_ROWS {
        fleet.fail(
            "HO-L4",
            format!("the attempt history reached its bound ({attempts} rows)"),
        );
    }
    let full: Vec<(u32, u64)> = fleet
        .cells
        .iter()
        .filter_map(|(c, cell)| {
            let n = cell.as_ref()?.moves_refused().get("store_full").copied()?;
            (n > 0).then_some((*c, n))
        })
        .collect();
    for (c, n) in full {
        fleet.fail("HO-L4", format!("cell {c}: {n} moves refused store_full"));
    }
}

async fn finish(fleet: &mut Fleet) {
    // Heal everything, let the fleet settle, then HO-L1: every desktop at its assigned cell.
    fleet.calm = true;
    fleet.world.heal_all();
    for i in 0..RELAYS {
        if fleet.relays[usize::from(i)].is_none() {
            fleet.start_relay(i).await;
        }
    }
    for c in 1..=CELLS {
        fleet.cell_stores[&c].faults().cut_off(false);
        if fleet.cells.get(&c).is_none_or(Option::is_none) {
            for _ in 0..60 {
                if fleet.start_cell(c).await {
                    break;
                }
                Fleet::idle(5_000).await;
            }
        }
    }
    for d in 0..fleet.directors.len() {
        if fleet.directors[d].is_none() {
            fleet.start_director(u8::try_from(d).unwrap_or(0));
        }
    }
    // Moves stop: no new measurement for longer than the freshness window.
    fleet.wait(900_000).await;
    let assigned = fleet.assignments();
    for h in 1..=DESKTOPS {
        let at = assigned.get(&h).copied();
        let connected: Vec<u32> = fleet
            .cells
            .iter()
            .filter_map(|(c, handle)| {
                let v = handle.as_ref()?.host(HostId(h))?;
                v.control_connected.then_some(*c)
            })
            .collect();
        if at.is_none() || connected != at.into_iter().collect::<Vec<_>>() {
            let detail = format!(
                "host {h}: assigned to cell {at:?}, its desktop connected at {connected:?}"
            );
            fleet.fail("HO-L1", detail);
        }
    }
    for (stop, task) in fleet.directors.iter_mut().filter_map(Option::take) {
        stop.stop();
        let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    }
    for m in fleet.mobiles.iter_mut().filter_map(Option::take) {
        m.abort();
    }
    for c in fleet.clients.drain(..) {
        c.stop().await;
    }
    for d in fleet.desktops.drain(..) {
        d.stop().await;
    }
    for cell in fleet.cells.values().flatten() {
        cell.kill();
    }
    for (_, j) in &fleet.journals {
        j.flush();
    }
    // CONF-1: every journal judged by the spec, line by line (a month's do not fit in memory).
    let mut digest = std::hash::DefaultHasher::new();
    let mut all = String::new();
    let names: Vec<String> = fleet.journals.iter().map(|(n, _)| n.clone()).collect();
    for name in &names {
        let path = fleet.journal_dir.path().join(name);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => return fleet.fail("CONF-1", format!("{name} unreadable: {e}")),
        };
        let mut judge = Conformance::new();
        let mut line_no = 0;
        for line in std::io::BufRead::lines(std::io::BufReader::new(file)) {
            let Ok(line) = line else {
                return fleet.fail("CONF-1", format!("{name}: a line is not UTF-8"));
            };
            line_no += 1;
            std::hash::Hash::hash(&line, &mut digest);
            if fleet.keep_journals {
                all.push_str(&line);
                all.push('\n');
            }
            if let Err(e) = judge.feed_text(line_no, &line) {
                return fleet.fail("CONF-1", format!("{name} line {line_no}: {e}"));
            }
        }
        fleet.report.journal_lines += judge.lines();
        for (key, verdict) in judge.finish() {
            if let Some(d) = verdict.departure() {
                let detail = format!("{name} key {key} departs: {d:?}");
                fleet.fail("CONF-1", detail);
            }
        }
    }
    fleet.report.journal_digest = std::hash::Hasher::finish(&digest);
    fleet.report.journals = all;
}
