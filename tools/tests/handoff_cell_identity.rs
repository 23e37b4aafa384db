//! HO-L2 over the real binary: one live process per cell id. A second `switchyard cell` with a
//! live cell's id is refused by name and changes no routing row; once the first one is gone
//! (killed: its lease runs out; stopped: it releases the lease) a successor takes over.

use std::process::Stdio;
use std::time::Duration;

use switchyard_adapters::handoff::store::{SqlStore, StoreOptions};
use switchyard_core::handoff::CellId;
use tokio::process::{Child, Command};

const SECRET: &str = "0123456789abcdef0123456789abcdef";
const LEASE_MS: u64 = 600;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn cell(db: &str, port: u16) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command
        .args(["cell", "--db", db, "--cell-id", "2"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--cell-lease-ms", &LEASE_MS.to_string()])
        .args(["--lease-drift-ms", "100"])
        .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
        .env("SWITCHYARD_DESKTOP_SECRET", SECRET)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

async fn public_url(store: &SqlStore) -> Option<String> {
    let info = store.cell_info(CellId(2)).await.expect("read the cell");
    info.map(|i| i.public_url)
}

/// Waits until the cell's row names `port`: the process has started and leased the cell.
async fn wait_registered(store: &SqlStore, port: u16) {
    let want = format!("http://127.0.0.1:{port}");
    let mut seen = None;
    for _ in 0..200 {
        seen = public_url(store).await;
        if seen.as_deref() == Some(want.as_str()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("cell on port {port} never registered (the row says {seen:?})");
}

async fn expect_refused(db: &str, port: u16) {
    let out = tokio::time::timeout(Duration::from_secs(10), cell(db, port).output())
        .await
        .expect("the second process ends by itself")
        .expect("run switchyard cell");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "a second cell 2 started:\n{text}");
    assert!(
        text.contains("cell 2 is held by a live process"),
        "refused without naming why:\n{text}"
    );
}

async fn spawn(db: &str, store: &SqlStore, port: u16) -> Child {
    let child = cell(db, port).spawn().expect("spawn switchyard cell");
    wait_registered(store, port).await;
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_l2_a_second_process_with_a_live_cell_id_is_refused_and_changes_no_routing_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("sqlite://{}", dir.path().join("store.db").display());
    // The schema exists before any cell starts, and one handle reads the rows throughout.
    let store = SqlStore::connect(&db, StoreOptions::default())
        .await
        .expect("open the store");
    let (first_port, second_port, third_port) = (free_port(), free_port(), free_port());
    let mut first = spawn(&db, &store, first_port).await;
    // Well past several renewals: the lease is kept alive, not merely young.
    tokio::time::sleep(Duration::from_millis(3 * LEASE_MS)).await;
    expect_refused(&db, second_port).await;
    assert_eq!(
        public_url(&store).await,
        Some(format!("http://127.0.0.1:{first_port}")),
        "the refused process changed the routing row"
    );
    // A crash: nothing renews the lease; while it lasts the cell stays refused, once it ends a
    // successor takes the cell.
    first.kill().await.expect("kill the first cell");
    expect_refused(&db, second_port).await;
    tokio::time::sleep(Duration::from_millis(LEASE_MS + 100)).await;
    let successor = spawn(&db, &store, third_port).await;
    // A graceful stop (SIGINT) releases the lease: the next process starts at once.
    let pid = successor.id().expect("a running successor").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("send SIGINT");
    assert!(sent.success());
    let stopped = tokio::time::timeout(Duration::from_secs(5), successor.wait_with_output())
        .await
        .expect("the successor stops on SIGINT")
        .expect("its output");
    let log = String::from_utf8_lossy(&stopped.stdout).into_owned()
        + &String::from_utf8_lossy(&stopped.stderr);
    assert!(log.contains("its lease is released"), "{log}");
    let mut next = spawn(&db, &store, first_port).await;
    next.kill().await.expect("kill the last cell");
}
