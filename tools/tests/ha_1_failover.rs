//! HA-1: the store on a real highly available PostgreSQL (pg_auto_failover 2.0, a monitor and
//! two nodes, synchronous replication; `support_paf`), under two cells, a director and six
//! moving desktops, with the URL `pg_autoctl show uri` prints, verbatim, and no proxy.
//!
//! The fleet moves hosts continuously (host cooldown 0: every host is measured better at the
//! other cell before every director pass). On the same formation, in turn:
//!
//! 1. a planned switchover (`pg_autoctl perform switchover`);
//! 2. a frozen standby under synchronous replication (SIGSTOP for 6 s: commits wait until the
//!    monitor takes the standby out of the synchronous set);
//! 3. a crash of the primary (SIGKILL of its keeper and every Postgres process).
//!
//! After each, commits resume within 5 s of the (new) primary accepting writes (measured by a
//! probe write on that node). At the end, once the fleet settles: every host is assigned to
//! one cell and open at that cell only, no reservation is left, no op id committed twice, and
//! the journal of both cells and the director conforms (the rig judges it when dropped).
//! The figures (stalls, promotion to first commit, ambiguous outcomes and their
//! reconciliations) are printed for docs/PERFORMANCE.md.
//!
//! The proxy recipe runs too: the same fleet on one URL through haproxy whose external check
//! tests `transaction_read_only` (the check docs/HA-POSTGRES.md gives), through a crash of the
//! primary.

#[path = "../../adapters/tests/handoff_rig/mod.rs"]
mod handoff_rig;
mod support_paf;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use handoff_rig::{Backend, Rig};
use sqlx::Connection;
use support_paf::Formation;
use switchyard_adapters::handoff::director::{Director, DirectorConfig};
use switchyard_adapters::handoff::store::Store;
use switchyard_core::handoff::store::{AttemptOutcome, StoreBounds, StoreConfig};
use switchyard_core::handoff::{
    CellId, DirectorPolicy, DispatchLimits, HostId, Measurement, PolicyConfig, ScanLimits,
};

const CELLS: [CellId; 2] = [CellId(1), CellId(2)];
const HOSTS: u64 = 6;
/// HA-1's bound: commits resume within this long after the primary accepts writes.
const RESUME: Duration = Duration::from_secs(5);

fn config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 0,
        },
        max_in_flight_migrations: 64,
        rate_window_ms: 60_000,
        max_commits_per_window: 6_000,
        registration_timeout_ms: 120_000,
        bounds: StoreBounds::FLEET,
    }
}

fn director_config() -> DirectorConfig {
    DirectorConfig {
        id: "d-ha-1".into(),
        policy: DirectorPolicy {
            enabled: true,
            cohort_percent: 100,
            policy: config().policy,
        },
        limits: ScanLimits {
            page_size: 100,
            max_pages: 10,
            max_dispatch: 100,
        },
        max_failures: 100,
        request_timeout: Duration::from_secs(3),
        retries: 0,
        secret: Rig::internal_secret(),
        interval: Duration::from_millis(100),
        dispatch: DispatchLimits::DEFAULT,
    }
}

/// One director pass: when it ended and how many moves it committed (`None`: the pass
/// failed, e.g. the store was unreachable).
#[derive(Debug, Clone)]
struct Pass {
    at: Instant,
    committed: Option<u32>,
    /// What the pass saw go wrong (for the failure message).
    trouble: Option<(u32, u32)>,
}

#[derive(Debug, Default)]
struct Log {
    passes: Vec<Pass>,
    committed: u64,
}

impl Log {
    fn first_commit_after(&self, t: Instant) -> Option<Instant> {
        self.passes
            .iter()
            .find(|p| p.at > t && p.committed.is_some_and(|c| c > 0))
            .map(|p| p.at)
    }

    /// The longest time without a commit between `from` and `to` (the stall a fault caused).
    fn longest_gap(&self, from: Instant, to: Instant) -> Duration {
        let mut last = self
            .passes
            .iter()
            .rev()
            .find(|p| p.at <= from && p.committed.is_some_and(|c| c > 0))
            .map_or(from, |p| p.at);
        let mut gap = Duration::ZERO;
        for p in self.passes.iter().filter(|p| p.at > from && p.at <= to) {
            if p.committed.is_some_and(|c| c > 0) {
                gap = gap.max(p.at - last);
                last = p.at;
            }
        }
        gap
    }
}

/// The weather and the director, until `stop`: every host measured better at the other cell,
/// then a pass.
async fn drive(store: Store, director: Director, log: Arc<Mutex<Log>>, stop: Arc<AtomicBool>) {
    let clock = switchyard_adapters::handoff::clock::Clock::default();
    while !stop.load(Ordering::SeqCst) {
        for h in 1..=HOSTS {
            if let Ok(Some(a)) = store.authority(HostId(h)).await {
                let other = if a.cell == CELLS[0] {
                    CELLS[1]
                } else {
                    CELLS[0]
                };
                let m = Measurement {
                    measured_at: clock.now(),
                    current_rtt_ms: 120,
                    target_rtt_ms: 20,
                };
                let _ = store.put_measurement(HostId(h), other, &m).await;
            }
        }
        let report = director.pass().await.ok();
        let committed = report.as_ref().map(|r| r.committed);
        let trouble = report.as_ref().map(|r| (r.failed, r.dispatched));
        if let Ok(mut l) = log.lock() {
            l.committed += u64::from(committed.unwrap_or(0));
            l.passes.push(Pass {
                at: Instant::now(),
                committed,
                trouble,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (bounded) for the first commit after `writable`; returns it.
async fn resumed(log: &Arc<Mutex<Log>>, writable: Instant, what: &str, f: &Formation) -> Instant {
    let deadline = writable + RESUME + Duration::from_secs(10);
    loop {
        if let Some(t) = log.lock().expect("log").first_commit_after(writable) {
            return t;
        }
        if Instant::now() >= deadline {
            let l = log.lock().expect("log");
            let recent: Vec<String> = l
                .passes
                .iter()
                .filter(|p| p.at + Duration::from_secs(20) > writable)
                .map(|p| {
                    format!(
                        "{:+.2}s committed={:?} (failed, dispatched)={:?}",
                        p.at.saturating_duration_since(writable).as_secs_f64()
                            - writable.saturating_duration_since(p.at).as_secs_f64(),
                        p.committed,
                        p.trouble
                    )
                })
                .collect();
            panic!(
                "HA-1 {what}: no commit within {:?} of the primary accepting writes\nmonitor: \
                 {}\npasses:\n{}",
                deadline - writable,
                f.state_text(),
                recent.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The fleet of a test: the rig (store, two cells, journal), six desktops and the driver.
struct Fleet {
    rig: Rig,
    desktops: Vec<switchyard_adapters::handoff::client::DesktopHandle>,
    log: Arc<Mutex<Log>>,
    stop: Arc<AtomicBool>,
    driver: tokio::task::JoinHandle<()>,
}

/// Two cells, six desktops and a director on the store at `url`, moving hosts.
async fn fleet(url: String) -> Fleet {
    let mut rig = Rig::at_url(Backend::Postgres, url, None).await;
    rig.store
        .put_settings(&config(), true)
        .await
        .expect("settings");
    for cell in CELLS {
        let mut cfg = rig.cell_config(cell, true);
        // The binary's default lease (15 s): the cells outlive the store's failover
        // (HO-L5 would stop a cell whose renewals go unconfirmed for a lease).
        cfg.cell_lease = Duration::from_secs(15);
        rig.start_with(cfg).await;
    }
    let mut desktops = Vec::new();
    for h in 1..=HOSTS {
        let home = CELLS[usize::try_from(h).expect("host") % CELLS.len()];
        rig.store
            .insert_host(HostId(h), home, true)
            .await
            .expect("store")
            .expect("host");
        desktops.push(rig.desktop_at(h, home).await);
    }
    let director = Director::new(director_config(), rig.store.clone(), rig.clock.clone())
        .with_journal(rig.journal.clone());
    let log = Arc::new(Mutex::new(Log::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let driver = tokio::spawn(drive(
        Store::from(rig.store.clone()),
        director,
        Arc::clone(&log),
        Arc::clone(&stop),
    ));
    Fleet {
        rig,
        desktops,
        log,
        stop,
        driver,
    }
}

/// Stop the fleet, let it settle, and check what HA-1 promises; print the figures.
async fn finish(fleet: Fleet, figures: &[(&str, Instant, Instant, Instant)]) {
    let Fleet {
        mut rig,
        desktops,
        log,
        stop,
        driver,
    } = fleet;
    stop.store(true, Ordering::SeqCst);
    driver.await.expect("driver");

    // Settle: every ambiguous outcome reconciled, no reservation left.
    let deadline = Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let rows = rig.store.rows().await.expect("rows");
        let quarantined: u64 = CELLS
            .iter()
            .map(|c| {
                (1..=HOSTS)
                    .filter(|h| {
                        rig.cell(*c)
                            .host(HostId(*h))
                            .is_some_and(|v| v.phase.is_some())
                    })
                    .count() as u64
            })
            .sum();
        if rows.reservations.is_empty() && quarantined == 0 {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "HA-1: the fleet did not settle: reservations {:?}, hosts mid-handoff {quarantined}",
            rows.reservations
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // Nothing lost, nothing at two cells.
    for h in 1..=HOSTS {
        let a = rows
            .assignments
            .get(&HostId(h))
            .unwrap_or_else(|| panic!("HA-1: host {h} lost its assignment"));
        let open: Vec<CellId> = CELLS.iter().copied().filter(|c| rig.open(*c, h)).collect();
        assert!(
            open.len() <= 1 && open.iter().all(|c| *c == a.cell),
            "HA-1: host {h} assigned to {:?} is open at {open:?}",
            a.cell
        );
    }
    // No op id committed twice: each committed attempt is one row keyed by its op id,
    // and the hosts' generations account for every commit the director counted.
    let committed_ops: BTreeSet<_> = rows
        .attempts
        .iter()
        .filter(|(_, a)| matches!(a.outcome, AttemptOutcome::Committed { .. }))
        .map(|(op, _)| *op)
        .collect();
    let total = log.lock().expect("log").committed;
    assert!(
        committed_ops.len() as u64 >= total,
        "the director counted {total} commits, the store holds {} committed attempts",
        committed_ops.len()
    );

    let mut stats = BTreeMap::new();
    for c in CELLS {
        let s = rig.cell(c).stats();
        stats.insert(
            c.0,
            (
                s.transactions_run,
                s.store_failures,
                s.reconciliations_run,
                s.quarantined,
            ),
        );
    }
    for (what, began, writable, first) in figures {
        let stall = log.lock().expect("log").longest_gap(*began, *first);
        eprintln!(
            "HA-1 {what}: primary writable {:.2} s after the fault began, first commit \
             {:.2} s after that; longest time without a commit {:.2} s",
            (*writable - *began).as_secs_f64(),
            first.saturating_duration_since(*writable).as_secs_f64(),
            stall.as_secs_f64()
        );
        assert!(
            *first - *writable <= RESUME,
            "HA-1 {what}: commits resumed {:?} after the primary accepted writes",
            *first - *writable
        );
    }
    eprintln!(
        "HA-1 fleet: {total} moves committed, {} committed attempts in the store; per cell \
         (transactions, store failures, reconciliations, quarantined): {stats:?}",
        committed_ops.len()
    );
    for d in desktops {
        d.stop().await;
    }
    rig.assert_conforms();
    rig.skip_conformance = true;
}

#[test]
fn ha_1_failover_switchover_and_frozen_standby_under_a_moving_fleet() {
    // The cells' and the store's WARN lines (a walk, a stuck host) go with a failure.
    let _ = switchyard_adapters::telemetry::init(switchyard_adapters::telemetry::LogFormat::Text);
    let mut f = Formation::start("ha1fleet").unwrap_or_else(|e| panic!("formation: {e}"));
    let uri = f.uri();
    assert!(
        uri.contains(',') && uri.contains("target_session_attrs=read-write"),
        "the URL pg_autoctl prints: {uri}"
    );
    runtime().block_on(async {
        let fleet = fleet(uri.clone()).await;
        let log = Arc::clone(&fleet.log);
        tokio::time::sleep(Duration::from_secs(4)).await;
        let warm = log.lock().expect("log").committed;
        assert!(warm > 0, "the fleet moves before any fault");
        let mut figures = Vec::new();

        // 1. A planned switchover.
        let before = f.primary().expect("a primary");
        let began = Instant::now();
        f.switchover().unwrap_or_else(|e| panic!("switchover: {e}"));
        let after = f.primary().expect("a primary after the switchover");
        assert_ne!(before, after, "the switchover moved the primary");
        let writable = f
            .wait_writable(after, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
        let first = resumed(&log, writable, "switchover", &f).await;
        figures.push(("switchover", began, writable, first));

        // 2. The standby frozen under synchronous replication.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let primary = f.primary().expect("a primary");
        let standby = 1 - primary;
        let began = Instant::now();
        f.freeze_node(standby);
        let writable = f
            .wait_writable(primary, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
        let first = resumed(&log, writable, "frozen standby", &f).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        f.thaw_node(standby);
        figures.push(("frozen standby", began, writable, first));
        f.wait_states(
            &[("primary", "primary"), ("secondary", "secondary")],
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("the standby rejoins: {e}"));

        // 3. The primary crashes.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let primary = f.primary().expect("a primary");
        let began = Instant::now();
        f.kill_node(primary);
        let writable = f
            .wait_writable(1 - primary, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        let first = resumed(&log, writable, "primary killed", &f).await;
        figures.push(("primary killed", began, writable, first));
        tokio::time::sleep(Duration::from_secs(3)).await;

        finish(fleet, &figures).await;
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// haproxy in front of the formation's two nodes with the check docs/HA-POSTGRES.md gives: a
/// node is up only when `transaction_read_only` is off and it is not in recovery.
struct Haproxy {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_haproxy(nodes: [u16; 2], user: &str) -> Haproxy {
    let bin = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or_else(|| {
            panic!(
                "haproxy not found (/usr/sbin/haproxy): install Debian's `haproxy` package \
                 (.ci/run does); HA-1's proxy recipe is never skipped"
            )
        });
    let dir = tempfile::Builder::new()
        .prefix("switchyard-haproxy-")
        .tempdir()
        .expect("temp dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let check = dir.path().join("pg-rw-check");
    std::fs::write(
        &check,
        format!(
            "#!/bin/sh\n# haproxy's external check: $3 is the server's address, $4 its port.\n\
             out=$(psql \"host=$3 port=$4 dbname=sy user={user} connect_timeout=1\" -XtAc \
             \"SELECT current_setting('transaction_read_only') = 'off' AND NOT pg_is_in_recovery()\" \
             2>/dev/null)\n[ \"$out\" = t ]\n"
        ),
    )
    .expect("check script");
    let mut perms = std::fs::metadata(&check).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&check, perms).expect("chmod");
    let cfg = dir.path().join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n  external-check\n  insecure-fork-wanted\n\
             defaults\n  mode tcp\n  timeout connect 1s\n  timeout client 1h\n  timeout server 1h\n\
             listen pg\n  bind 127.0.0.1:{port}\n  option external-check\n\
             \x20 external-check path \"/usr/bin:/bin\"\n  external-check command {}\n\
             \x20 default-server inter 500ms fall 1 rise 1 on-marked-down shutdown-sessions\n\
             \x20 server n1 127.0.0.1:{} check\n  server n2 127.0.0.1:{} check\n",
            check.display(),
            nodes[0],
            nodes[1]
        ),
    )
    .expect("haproxy.cfg");
    let child = std::process::Command::new(bin)
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start haproxy");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "haproxy did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Haproxy {
        child,
        port,
        _dir: dir,
    }
}

/// HA-1's proxy recipe: the store on one URL through haproxy, whose check tests
/// `transaction_read_only` (docs/HA-POSTGRES.md). The primary crashes; commits resume within
/// 5 s of the new primary accepting writes (haproxy checks every 500 ms), nothing lost or
/// stranded, the journal conforms.
#[test]
fn ha_1_haproxy_with_the_documented_check_follows_a_killed_primary() {
    let _ = switchyard_adapters::telemetry::init(switchyard_adapters::telemetry::LogFormat::Text);
    let mut f = Formation::start("ha1proxy").unwrap_or_else(|e| panic!("formation: {e}"));
    let proxy = start_haproxy(f.node_ports(), &f.user());
    let url = format!("postgres://{}@127.0.0.1:{}/sy", f.user(), proxy.port);
    runtime().block_on(async {
        // haproxy takes a server for up until its first check says otherwise: wait until it
        // routes only to the writable node (eight fresh connections in a row).
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut in_a_row = 0;
        while in_a_row < 8 {
            assert!(
                Instant::now() < deadline,
                "haproxy never settled on the primary"
            );
            let writable = match sqlx::PgConnection::connect(&url).await {
                Ok(mut c) => {
                    let ro: Result<String, _> =
                        sqlx::query_scalar("SELECT current_setting('transaction_read_only')")
                            .fetch_one(&mut c)
                            .await;
                    let _ = c.close().await;
                    ro.is_ok_and(|v| v == "off")
                }
                Err(_) => false,
            };
            in_a_row = if writable { in_a_row + 1 } else { 0 };
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let fleet = fleet(url).await;
        let log = Arc::clone(&fleet.log);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            log.lock().expect("log").committed > 0,
            "the fleet moves through haproxy before any fault"
        );
        let primary = f.primary().expect("a primary");
        let began = Instant::now();
        f.kill_node(primary);
        let writable = f
            .wait_writable(1 - primary, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        let first = resumed(&log, writable, "primary killed, through haproxy", &f).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        finish(
            fleet,
            &[("primary killed, through haproxy", began, writable, first)],
        )
        .await;
    });
}
