//! SIM-1: the world a deterministic simulation runs the drivers in (cargo feature `sim`; the
//! production build does not compile this module).
//!
//! The drivers take three things from their machine: sockets ([`crate::net`]), wall time and
//! randomness, and tasks ([`crate::machine`]). Each of those seams asks [`active`] whether the
//! calling thread runs a simulation; if it does, the world answers instead of the OS:
//!
//! - **Hosts** are IP addresses. Code runs "on" a host inside [`World::run_on`]: a tokio
//!   task-local names the host, and every task the drivers spawn through
//!   [`crate::machine::spawn`] inherits it and is recorded, so [`World::crash`] can abort a
//!   process's every task at once.
//! - **The network** ([`net`]) is in memory: a listener is a queue in the world, a connection
//!   two one-way pipes. Faults act on the pipes: a dark host or a partition holds bytes (as TCP
//!   retransmits them) until healed, a crash resets every connection of the host, a delay
//!   postpones delivery.
//! - **Time** is tokio's paused clock: the simulation runs on a current-thread runtime with
//!   `start_paused`, so when every task waits on a timer the clock jumps to the next one and an
//!   idle month costs nothing. Wall time is a fixed epoch plus the runtime's elapsed time plus
//!   the host's clock offset (a clock jump).
//! - **Randomness** comes from one seeded generator (SplitMix64).
//!
//! One runtime thread, `biased` selects in the drivers and ordered maps wherever an iteration
//! can reach an output make a run a function of its seed: the same seed and commit give the same
//! journals, byte for byte (the replay test in `tools/tests/sim_1_simulation.rs`).

pub mod net;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

use self::net::{Pipe, Queued};

thread_local! {
    static WORLD: RefCell<Option<Arc<World>>> = const { RefCell::new(None) };
}

tokio::task_local! {
    static HOST: IpAddr;
}

/// Tasks a host keeps before finished ones are pruned from its list (the list stays within
/// twice its live tasks plus this).
const PRUNE_SLACK: usize = 64;

/// The simulated world: hosts, their faults, listeners and open pipes, the clock's epoch and
/// the seeded generator.
#[derive(Debug)]
pub struct World {
    inner: Mutex<Inner>,
    /// Woken on every fault change: connects waiting for a path try again.
    changed: Notify,
    epoch_ms: u64,
    start: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    rng: u64,
    hosts: BTreeMap<IpAddr, Host>,
    /// One-way blocks: bytes from `.0` to `.1` are held.
    blocked: BTreeSet<(IpAddr, IpAddr)>,
    listeners: BTreeMap<SocketAddr, tokio::sync::mpsc::Sender<Queued>>,
    pipes: Vec<Weak<Pipe>>,
    pipes_after_prune: usize,
    next_port: u16,
}

/// One host's faults and tasks.
#[derive(Debug, Default)]
struct Host {
    /// Dark: every byte to or from it is held, connects to it wait (no RST, no answer).
    dark: bool,
    /// One-way delay added to every byte leaving or reaching this host.
    delay_ms: u64,
    /// Added to this host's wall clock (a clock that jumped).
    clock_offset_ms: i64,
    tasks: Vec<AbortHandle>,
    tasks_after_prune: usize,
    /// Crashes so far: a task started before the latest one belongs to a dead process.
    crashes: u64,
}

/// Whether this thread runs a simulation.
#[must_use]
pub fn active() -> bool {
    WORLD.with(|w| w.borrow().is_some())
}

/// This thread's world, if it runs a simulation.
#[must_use]
pub fn world() -> Option<Arc<World>> {
    WORLD.with(|w| w.borrow().clone())
}

/// The host the calling task runs on (`None` outside [`World::run_on`]).
#[must_use]
pub fn current_host() -> Option<IpAddr> {
    HOST.try_with(|h| *h).ok()
}

/// Installs the world on this thread until the guard is dropped.
#[derive(Debug)]
pub struct Installed {
    _private: (),
}

impl Drop for Installed {
    fn drop(&mut self) {
        WORLD.with(|w| w.borrow_mut().take());
    }
}

impl World {
    /// A world whose wall clock reads `epoch_ms` (Unix ms) now and whose generator starts at
    /// `seed`. Call inside the simulation's (paused, current-thread) runtime.
    #[must_use]
    pub fn new(seed: u64, epoch_ms: u64) -> Arc<World> {
        Arc::new(World {
            inner: Mutex::new(Inner {
                rng: seed,
                next_port: 40_000,
                ..Inner::default()
            }),
            changed: Notify::new(),
            epoch_ms,
            start: Instant::now(),
        })
    }

    /// Makes this world the calling thread's until the guard drops.
    #[must_use]
    pub fn install(self: &Arc<World>) -> Installed {
        WORLD.with(|w| *w.borrow_mut() = Some(self.clone()));
        Installed { _private: () }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // One thread runs the world; a poisoned lock means a panic already failed the run.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `fut` as a task on `host` (its spawned tasks stay on the host).
    pub fn run_on<F>(&self, host: IpAddr, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = tokio::spawn(HOST.scope(host, fut));
        self.track(host, handle.abort_handle());
        handle
    }

    fn track(&self, host: IpAddr, task: AbortHandle) {
        let mut inner = self.lock();
        let h = inner.hosts.entry(host).or_default();
        h.tasks.push(task);
        if h.tasks.len() > 2 * h.tasks_after_prune + PRUNE_SLACK {
            h.tasks.retain(|t| !t.is_finished());
            h.tasks_after_prune = h.tasks.len();
        }
    }

    /// Wall time on `host`, Unix ms.
    #[must_use]
    pub fn unix_ms(&self, host: Option<IpAddr>) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let base = self.epoch_ms.saturating_add(elapsed);
        let offset = host
            .and_then(|h| self.lock().hosts.get(&h).map(|h| h.clock_offset_ms))
            .unwrap_or(0);
        base.saturating_add_signed(offset)
    }

    /// The next 64 bits of the seeded generator (SplitMix64).
    pub fn next_u64(&self) -> u64 {
        let mut inner = self.lock();
        inner.rng = inner.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = inner.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fills `buf` from the seeded generator.
    pub fn fill(&self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    // ----- faults -----

    /// A dark host (`true`): bytes to and from it are held, connects to it wait. `false`
    /// heals it; held bytes are delivered.
    pub fn set_dark(&self, host: IpAddr, dark: bool) {
        self.lock().hosts.entry(host).or_default().dark = dark;
        self.wake_all();
    }

    /// Holds (`true`) or releases the bytes from `from` to `to` (one way: a partition is both).
    pub fn set_blocked(&self, from: IpAddr, to: IpAddr, blocked: bool) {
        {
            let mut inner = self.lock();
            if blocked {
                inner.blocked.insert((from, to));
            } else {
                inner.blocked.remove(&(from, to));
            }
        }
        self.wake_all();
    }

    /// Heals every partition and dark host.
    pub fn heal_all(&self) {
        {
            let mut inner = self.lock();
            inner.blocked.clear();
            for h in inner.hosts.values_mut() {
                h.dark = false;
            }
        }
        self.wake_all();
    }

    /// The one-way delay added at `host`.
    pub fn set_delay(&self, host: IpAddr, delay_ms: u64) {
        self.lock().hosts.entry(host).or_default().delay_ms = delay_ms;
    }

    /// Moves `host`'s wall clock by `offset_ms` from the world's.
    pub fn set_clock_offset(&self, host: IpAddr, offset_ms: i64) {
        self.lock().hosts.entry(host).or_default().clock_offset_ms = offset_ms;
    }

    /// The process on `host` dies: its connections are reset (the OS answers RST for it), its
    /// listeners close (connects are refused), its tasks are aborted. The host stays up.
    pub fn crash(&self, host: IpAddr) {
        let tasks = {
            let mut inner = self.lock();
            inner.listeners.retain(|addr, _| addr.ip() != host);
            for pipe in inner.pipes.iter().filter_map(Weak::upgrade) {
                if pipe.from == host || pipe.to == host {
                    pipe.reset();
                }
            }
            let h = inner.hosts.entry(host).or_default();
            h.crashes += 1;
            h.tasks_after_prune = 0;
            std::mem::take(&mut h.tasks)
        };
        for t in tasks {
            t.abort();
        }
        self.wake_all();
    }

    /// Connections open now (both ends alive or data in flight).
    #[must_use]
    pub fn open_connections(&self) -> usize {
        let mut inner = self.lock();
        inner.pipes.retain(|p| p.strong_count() > 0);
        inner.pipes_after_prune = inner.pipes.len();
        inner.pipes.len() / 2
    }

    /// How many times `host`'s process crashed.
    #[must_use]
    pub fn crash_epoch(&self, host: IpAddr) -> u64 {
        self.lock().hosts.get(&host).map_or(0, |h| h.crashes)
    }

    /// Whether bytes from `from` to `to` move now.
    pub(crate) fn passable(&self, from: IpAddr, to: IpAddr) -> bool {
        let inner = self.lock();
        let dark = |ip: &IpAddr| inner.hosts.get(ip).is_some_and(|h| h.dark);
        !dark(&from) && !dark(&to) && !inner.blocked.contains(&(from, to))
    }

    pub(crate) fn delay_ms(&self, from: IpAddr, to: IpAddr) -> u64 {
        let inner = self.lock();
        let d = |ip: &IpAddr| inner.hosts.get(ip).map_or(0, |h| h.delay_ms);
        d(&from).saturating_add(d(&to))
    }

    fn wake_all(&self) {
        let pipes: Vec<Arc<Pipe>> = {
            let mut inner = self.lock();
            inner.pipes.retain(|p| p.strong_count() > 0);
            inner.pipes_after_prune = inner.pipes.len();
            inner.pipes.iter().filter_map(Weak::upgrade).collect()
        };
        for p in pipes {
            p.wake();
        }
        self.changed.notify_waiters();
    }
}

/// Wall time (Unix ms) on the calling task's host, if this thread runs a simulation.
#[must_use]
pub fn unix_ms() -> Option<u64> {
    world().map(|w| w.unix_ms(current_host()))
}

/// Fills `buf` from the simulation's generator; `false` outside a simulation.
pub fn fill_random(buf: &mut [u8]) -> bool {
    match world() {
        Some(w) => {
            w.fill(buf);
            true
        }
        None => false,
    }
}

/// Spawns `fut` on the calling task's host (recorded for [`World::crash`]); `None` outside a
/// simulated host.
pub fn spawn_on_host<F>(fut: F) -> Result<JoinHandle<F::Output>, F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match (world(), current_host()) {
        (Some(w), Some(host)) => Ok(w.run_on(host, fut)),
        _ => Err(fut),
    }
}

/// Runs `fut` on `host` until it ends or the host crashes (its epoch moves past `epoch`);
/// a task spawned by a library (not through [`crate::machine::spawn`]) ends with its process.
pub async fn until_crash<F: Future<Output = ()>>(
    world: Arc<World>,
    host: IpAddr,
    epoch: u64,
    fut: F,
) {
    let fut = HOST.scope(host, fut);
    tokio::pin!(fut);
    std::future::poll_fn(|cx| {
        if world.crash_epoch(host) != epoch {
            return std::task::Poll::Ready(());
        }
        fut.as_mut().poll(cx)
    })
    .await;
}

/// `fut` with `host` as the calling task's host.
pub async fn scoped<F: Future>(host: IpAddr, fut: F) -> F::Output {
    HOST.scope(host, fut).await
}
