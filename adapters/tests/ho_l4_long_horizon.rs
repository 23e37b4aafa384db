//! HO-L4 (runs for months), issue #40: a director, three cells and six desktops run for 30
//! simulated days on the in-memory store (`MemoryStore`, the core's reference store: SIM-1's
//! store interface) and a clock on tokio's paused time (`Clock::on_tokio_time`), over real
//! 127.0.0.1 sockets; nothing waits on wall time, so the month takes seconds.
//!
//! The store has the `switchyard` binary's default settings (`default_store_config` and the
//! `StoreLimitArgs` defaults: 6,000 commits a minute, 1,024 moves in flight, a 1 h host
//! cooldown, 10 min freshness, 2 min registration timeout) except its attempt bound
//! (`max_attempt_rows`), set to [`MAX_ATTEMPT_ROWS`]: about three days of this fleet's moves.
//! The director keeps the default retention (`--attempt-retention-ms`, 24 h) and reap batch.
//! Every host is measured better at the next cell once a director interval ("the weather":
//! the test writes the measurement a desktop would report), so each host moves about once
//! an hour, its cooldown: 144 moves a day. Without reaping the bound is reached on the
//! third day and every move after that is refused `store_full`
//! ([`ho_l4_without_reaping_the_bound_is_reached_within_days`] checks that the bound is sized
//! so); with reaping the history holds about a day of moves and the bound is never reached.
//!
//! Asserted over the 30 days: moves in every simulated day (moves never stop), no
//! `store_full` refusal (no bound reached, at the director or at any cell), every refusal
//! the director saw carries a named reason (`AbortReason::name`, the director's
//! `PassReport::refused`), the history stays under the bound.
//!
//! Lengthened intervals (the defaults would spend the run on heartbeats, not moves): the
//! director's interval is 60 s (default 10 s; a host's move waits at most one interval past
//! its cooldown either way), the cells' identity lease 10 min (default 15 s; renewed every
//! third of it), the cells' WebSocket idle timeout 30 min (default 90 s) and the desktops'
//! ping 9 min (the cell never needs to ping them). Rates and bounds are the defaults; only
//! the heartbeat traffic shrinks. Both tests of this file took 11 s on a 2-core machine
//! (2026-12-04; 43,200 passes and 4,320 moves for the month).

mod handoff_rig;

use std::collections::BTreeMap;
use std::time::Duration;

use handoff_rig::{Rig, DESKTOP_SECRET};
use switchyard_adapters::handoff::auth::{KeyRing, Secret};
use switchyard_adapters::handoff::cell::{start_cell, CellConfig, CellHandle};
use switchyard_adapters::handoff::client::{spawn_desktop, DesktopConfig, DesktopHandle};
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::director::{Director, DirectorConfig, PassReport};
use switchyard_adapters::handoff::store::MemoryStore;
use switchyard_core::handoff::store::{
    Retention, StoreBounds, StoreConfig, DEFAULT_ATTEMPT_RETENTION_MS, MAX_ATTEMPT_RETENTION_MS,
};
use switchyard_core::handoff::{
    CellId, DirectorPolicy, DispatchLimits, HostId, Measurement, PolicyConfig, ScanLimits,
};
use switchyard_core::MonoMs;

const DAY_MS: u64 = 86_400_000;
const DAYS: u64 = 30;
/// 2027-01-15 in Unix ms: the simulated month's first instant.
const START: MonoMs = MonoMs(1_800_000_000_000);
const CELLS: [CellId; 3] = [CellId(1), CellId(2), CellId(3)];
const HOSTS: u64 = 6;
/// About three days of this fleet's moves (6 hosts × 24 a day × 3 = 432): reached on the
/// third day without reaping, never with the 24 h retention (a day's moves, 144, stay).
const MAX_ATTEMPT_ROWS: u64 = 400;
/// The director's interval, lengthened from the 10 s default (see the module doc).
const INTERVAL: Duration = Duration::from_secs(60);

/// The `switchyard` binary's defaults for a fresh store (`tools::handoff::cli`:
/// `default_store_config`, `DEFAULT_MAX_IN_FLIGHT_MIGRATIONS`, `DEFAULT_RATE_WINDOW_MS`,
/// `DEFAULT_MAX_COMMITS_PER_WINDOW`), with the attempt bound lowered.
fn store_config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 3_600_000,
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

fn cell_config(cell: CellId) -> CellConfig {
    let mut cfg = CellConfig::new(
        cell,
        "127.0.0.1:0".parse().expect("addr"),
        KeyRing::from_secrets(cell, &Rig::internal_secret(), None),
        Secret::new(DESKTOP_SECRET, "desktop").expect("secret"),
    );
    cfg.cell_lease = Duration::from_secs(600);
    cfg.limits.ws_idle_timeout = Duration::from_secs(1_800);
    cfg
}

fn director_config() -> DirectorConfig {
    DirectorConfig {
        id: "d-long-horizon".into(),
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
        secret: Rig::internal_secret(),
        interval: INTERVAL,
        dispatch: DispatchLimits::DEFAULT,
    }
}

/// The cell after `cell` in [`CELLS`], round.
fn next_cell(cell: CellId) -> CellId {
    let at = CELLS.iter().position(|c| *c == cell).unwrap_or(0);
    CELLS[(at + 1) % CELLS.len()]
}

/// What the month showed.
#[derive(Debug, Default)]
struct Month {
    /// Committed moves per simulated day.
    moves_by_day: BTreeMap<u64, u32>,
    /// The store's refusals the director saw, by reason.
    refused: BTreeMap<String, u32>,
    /// The day of the first `store_full` refusal, if any.
    first_store_full_day: Option<u64>,
    /// The most attempt records the store held after a pass.
    peak_attempt_rows: usize,
    reaped: u64,
    passes: u64,
    failed_sends: u32,
    /// The cells' own count of moves the store refused `store_full`.
    cells_store_full: u64,
}

impl Month {
    /// Take one pass's report, checking every refusal is named.
    fn take(&mut self, day: u64, r: &PassReport) {
        self.passes += 1;
        *self.moves_by_day.entry(day).or_default() += r.committed;
        self.reaped += u64::from(r.attempts_reaped);
        self.failed_sends += r.failed;
        for (reason, n) in &r.refused {
            assert!(
                !reason.is_empty() && reason.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "day {day}: a refusal without a named reason: {reason:?} in {r:?}"
            );
            *self.refused.entry(reason.clone()).or_default() += n;
            if reason == "store_full" && self.first_store_full_day.is_none() {
                self.first_store_full_day = Some(day);
            }
        }
        for why in r.refused_hosts.values() {
            assert!(
                why.starts_with("moved=no why=") && why.len() > "moved=no why=".len(),
                "day {day}: a refused host without a named reason: {why:?}"
            );
        }
    }
}

/// The fleet on the memory store and a paused clock: cells, desktops registered at their
/// hosts' cells, the director with `retention`. Runs passes every [`INTERVAL`] for `days`
/// simulated days, or until the first `store_full` refusal when `stop_at_store_full`.
async fn run_month(retention: Retention, days: u64, stop_at_store_full: bool) -> Month {
    let clock = Clock::on_tokio_time(START);
    let store = MemoryStore::new(store_config());
    let mut cells: BTreeMap<u32, CellHandle> = BTreeMap::new();
    for cell in CELLS {
        let handle = start_cell(cell_config(cell), store.clone(), clock.clone())
            .await
            .expect("cell starts");
        cells.insert(cell.0, handle);
    }
    let resolvers: Vec<String> = cells.values().map(|c| c.url.clone()).collect();
    let mut desktops: Vec<DesktopHandle> = Vec::new();
    for h in 1..=HOSTS {
        let home = CELLS[usize::try_from(h).expect("host") % CELLS.len()];
        store
            .insert_host(HostId(h), home, true)
            .expect("store")
            .expect("host enrolled");
        let mut desk = spawn_desktop(DesktopConfig {
            resolvers: resolvers.clone(),
            host: h,
            token: Rig::desktop_token(h),
            capable: true,
            measure: None,
            pace_min: Duration::from_millis(50),
            pace_max: Duration::from_millis(400),
            ping_every: Duration::from_secs(540),
        });
        desk.wait_registered(home.0, Duration::from_secs(30))
            .await
            .expect("the desktop registers at its host's cell");
        desktops.push(desk);
    }
    let director = Director::new(director_config(), store.clone(), clock.clone())
        .with_retention(retention)
        .with_sweep_lease_ms(3 * 60_000);
    let end = START.plus_ms(days * DAY_MS);
    let mut month = Month::default();
    while clock.now() < end {
        // The weather: every host is measured better at the next cell (what its desktop
        // would report), stamped now.
        let now = clock.now();
        for h in 1..=HOSTS {
            let at = store
                .authority(HostId(h))
                .expect("store")
                .expect("host")
                .cell;
            let m = Measurement {
                measured_at: now,
                current_rtt_ms: 120,
                target_rtt_ms: 40,
            };
            store
                .put_measurement(HostId(h), next_cell(at), &m)
                .expect("measurement");
        }
        let day = now.since_ms(START) / DAY_MS;
        let report = director.pass().await.expect("the pass reads the store");
        month.take(day, &report);
        let rows = store.rows().expect("rows").attempts.len();
        month.peak_attempt_rows = month.peak_attempt_rows.max(rows);
        if stop_at_store_full && month.first_store_full_day.is_some() {
            break;
        }
        tokio::time::sleep(INTERVAL).await;
    }
    for (id, cell) in &cells {
        let refused = cell.moves_refused();
        month.cells_store_full += refused.get("store_full").copied().unwrap_or(0);
        assert!(
            refused
                .keys()
                .all(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
            "cell {id}: a refusal without a named reason: {refused:?}"
        );
    }
    for desk in desktops {
        desk.stop().await;
    }
    for cell in cells.values() {
        cell.kill();
    }
    eprintln!(
        "HO-L4 long horizon: {} passes, {} moves ({:?} a day), peak {} attempt rows (bound \
         {MAX_ATTEMPT_ROWS}), {} reaped, refused {:?}, failed sends {}, first store_full on day \
         {:?}, cells' store_full refusals {}",
        month.passes,
        month
            .moves_by_day
            .values()
            .map(|n| u64::from(*n))
            .sum::<u64>(),
        month.moves_by_day.values().collect::<Vec<_>>(),
        month.peak_attempt_rows,
        month.reaped,
        month.refused,
        month.failed_sends,
        month.first_store_full_day,
        month.cells_store_full
    );
    month
}

#[tokio::test(start_paused = true)]
async fn ho_l4_thirty_days_moves_never_stop_no_bound_reached() {
    let month = run_month(Retention::DEFAULT, DAYS, false).await;
    assert_eq!(
        Retention::DEFAULT.attempt_retention_ms,
        DEFAULT_ATTEMPT_RETENTION_MS,
        "the default retention (24 h)"
    );
    for day in 0..DAYS {
        let moves = month.moves_by_day.get(&day).copied().unwrap_or(0);
        assert!(
            moves > 0,
            "HO-L4: no move on simulated day {day}: {:?}",
            month.moves_by_day
        );
    }
    assert_eq!(
        (month.first_store_full_day, month.cells_store_full),
        (None, 0),
        "HO-L4: the attempt bound was reached (first day, the cells' refusals): {:?}",
        month.refused
    );
    assert!(
        month.peak_attempt_rows < usize::try_from(MAX_ATTEMPT_ROWS).expect("bound"),
        "the history stayed under the bound ({} rows)",
        month.peak_attempt_rows
    );
    assert!(month.reaped > 0, "the retention removed records");
}

/// The control: with the history kept (a retention longer than the run: nothing is ever old
/// enough to reap) the same fleet reaches [`MAX_ATTEMPT_ROWS`] within days, so the bound of
/// [`ho_l4_thirty_days_moves_never_stop_no_bound_reached`] is one only reaping keeps it under.
/// Stops at the first `store_full`.
#[tokio::test(start_paused = true)]
async fn ho_l4_without_reaping_the_bound_is_reached_within_days() {
    let kept = Retention {
        attempt_retention_ms: MAX_ATTEMPT_RETENTION_MS,
        ..Retention::DEFAULT
    };
    let month = run_month(kept, DAYS, true).await;
    let day = month
        .first_store_full_day
        .expect("without reaping the attempt bound is reached");
    assert!(
        day < 5,
        "reached on day {day}: the bound is about three days of moves"
    );
    assert_eq!(month.reaped, 0, "nothing was reaped");
}
