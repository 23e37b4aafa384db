//! HO-L5 over real sockets, on both SQL stores: a cell cut off from the store (every store
//! call of its process fails, as when its host is partitioned from the database) stops
//! serving its desktops with a retry reason before a successor process can take its lease,
//! and reports why; the successor, started against the store it can reach, takes the cell once
//! the lease has lapsed.

mod handoff_rig;

use std::time::{Duration, Instant};

use handoff_rig::{Backend, Rig, SRC};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::store::StartRefusal;

const LEASE: Duration = Duration::from_millis(3_000);
const DRIFT: Duration = Duration::from_millis(300);

async fn a_cut_off_cell_stops_serving_before_its_successor_takes_the_lease(backend: Backend) {
    let mut rig = Rig::new(backend, "l5-lapse").await;
    let mut cfg = rig.cell_config(SRC, true);
    cfg.cell_lease = LEASE;
    cfg.lease_drift = DRIFT;
    rig.start_with(cfg).await;
    let desk = rig.desktop_at(7, SRC).await;
    let cell = rig.cell(SRC);
    let url = cell.url.clone();
    // The successor's own connection: the cut-off is the old process's alone.
    let successor = SqlStore::connect(&rig.url, StoreOptions::default())
        .await
        .expect("successor store");
    let cut_at = Instant::now();
    rig.store.faults().cut_off(true);
    // The successor tries to take the cell every 20 ms; the desktop's drain is watched too.
    let mut closed_at = None;
    let taken_at = loop {
        if closed_at.is_none() && desk.state().drainings.iter().any(|d| d == "cell_stopping") {
            closed_at = Some(Instant::now());
        }
        let now = rig.clock.now();
        match successor
            .start_cell(SRC, 1_000, true, &url, &url, now, 60_000)
            .await
            .expect("successor reaches the store")
        {
            Ok(_) => break Instant::now(),
            Err(StartRefusal::Held(_)) => {}
            Err(other) => panic!("{other:?}"),
        }
        assert!(
            cut_at.elapsed() < LEASE * 3,
            "the successor never took the cell"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let closed_at = closed_at.expect("the desktop was told cell_stopping before the takeover");
    assert!(
        closed_at < taken_at,
        "the cut-off cell kept its desktop until the successor held the lease"
    );
    // Not before two renewals could have failed: the stop comes from the lease, not the first
    // failed call (a third of the lease each).
    assert!(
        closed_at.duration_since(cut_at) >= LEASE * 2 / 3 - Duration::from_millis(50),
        "stopped after {:?}",
        closed_at.duration_since(cut_at)
    );
    let cell = rig.cell(SRC);
    assert!(cell.lease_lapsed(), "the cell says why it stopped");
    let lost = tokio::time::timeout(Duration::from_secs(1), cell.lease_lost())
        .await
        .expect("the process is told to end");
    assert_eq!(lost.holder, None);
    rig.store.faults().cut_off(false);
    desk.stop().await;
    successor.close().await;
}

#[tokio::test]
async fn ho_l5_a_cut_off_cell_stops_serving_before_its_successor_takes_the_lease_sqlite() {
    a_cut_off_cell_stops_serving_before_its_successor_takes_the_lease(Backend::Sqlite).await;
}

#[tokio::test]
async fn ho_l5_a_cut_off_cell_stops_serving_before_its_successor_takes_the_lease_postgres() {
    a_cut_off_cell_stops_serving_before_its_successor_takes_the_lease(Backend::Postgres).await;
}
