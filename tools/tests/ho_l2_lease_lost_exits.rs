//! HO-L2 / OPS-1 over the real binary: a cell whose identity lease another process took (a
//! newer incarnation in its row, found at the next renewal) stops gracefully by itself and
//! exits 3, logging why at ERROR, so its supervisor notices; it never ends the new holder's
//! lease. Red before: the cell stopped serving but its process stayed alive until a signal.

mod support_bin;

use support_bin::{cell_args, Process, WAIT};
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::CellId;

/// The exit status documented for a lost lease (docs/OPERATIONS.md, docs/HANDOFF.md).
const LEASE_LOST_EXIT: i32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l2_a_cell_whose_lease_is_taken_stops_gracefully_and_exits_3() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let args = cell_args(
        &db,
        "5",
        &["--cell-lease-ms", "900", "--lease-drift-ms", "100"],
    );
    let mut first = Process::start(&args);
    let _url = first.value("url=");
    // Another process takes the cell: a start an hour ahead, when the first one's lease has
    // long run out (as after a pause longer than the lease), with a lease of its own.
    let store = SqlStore::connect(&db, StoreOptions::default())
        .await
        .expect("open the store");
    let later = Clock::default();
    later.advance(3_600_000);
    let taken = store
        .start_cell(
            CellId(5),
            10,
            true,
            "http://127.0.0.1:9",
            "http://127.0.0.1:9",
            later.now(),
            3_600_000,
        )
        .await
        .expect("the store answers")
        .expect("the cell is taken");
    let code = tokio::task::block_in_place(|| first.exit_within(WAIT));
    let log = first.log();
    assert_eq!(code, Some(LEASE_LOST_EXIT), "{log}");
    let lost = log
        .lines()
        .find(|l| l.contains("cell lease lost"))
        .unwrap_or_else(|| panic!("the reason is logged:\n{log}"));
    assert!(lost.contains("ERROR"), "{lost}");
    assert!(
        lost.contains(&format!("holder={}", taken.0)),
        "names the new holder: {lost}"
    );
    // The same stop as SIGTERM's, then the distinct status.
    assert!(log.contains("cell stopped"), "{log}");
    // The new holder's lease stands: the stopped process did not release it.
    let next = Process::start(&args);
    tokio::task::block_in_place(|| {
        let mut next = next;
        let code = next.exit_within(WAIT);
        assert_eq!(code, Some(1), "{}", next.log());
        assert!(
            next.log().contains("cell 5 is held by a live process"),
            "{}",
            next.log()
        );
    });
}
