//! OPS-1 over the real binary: SIGTERM and SIGINT stop every long-running command gracefully
//! within the bound, with its final counters in the log, exit 0. A relay closes its channels
//! with a reason; a cell releases its identity lease (a successor starts at once).

mod support_bin;

use std::time::Duration;

use futures_util::StreamExt;
use support_bin::{cell_args, Process, WAIT};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_1_sigterm_stops_a_relay_gracefully_closing_its_channels_with_a_reason() {
    let mut relay = Process::start(&["relay", "--listen", "127.0.0.1:0", "--path", "/r"]);
    let addr = relay.value("local_addr=");
    let (mut channel, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/r"))
        .await
        .expect("channel");
    // The channel is served (a heartbeat answered) before the signal.
    futures_util::SinkExt::send(&mut channel, Message::text("ping"))
        .await
        .expect("ping");
    let pong = tokio::time::timeout(WAIT, channel.next())
        .await
        .expect("pong in time");
    assert!(
        matches!(pong, Some(Ok(Message::Text(ref t))) if t.as_str() == "pong"),
        "{pong:?}"
    );
    relay.signal("TERM");
    let close = tokio::time::timeout(WAIT, async {
        loop {
            match channel.next().await {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => {}
                other => panic!("channel ended without a close frame: {other:?}"),
            }
        }
    })
    .await
    .expect("closed in time")
    .expect("a close frame");
    assert_eq!(u16::from(close.code), 1001);
    assert_eq!(close.reason.as_str(), "relay_stopping");
    assert_eq!(relay.exit_within(WAIT), Some(0), "{}", relay.log());
    let log = relay.log();
    assert!(
        log.contains("stopping gracefully") && log.contains("SIGTERM"),
        "{log}"
    );
    assert!(
        log.contains("relay stopped") && log.contains("accepted_total=1"),
        "{log}"
    );
}

#[test]
fn ops_1_sigterm_stops_a_cell_and_releases_its_lease_for_a_successor() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("cell.db").display());
    let args = cell_args(&db, "3", &["--cell-lease-ms", "60000"]);
    let mut cell = Process::start(&args);
    let _url = cell.value("url=");
    cell.signal("TERM");
    assert_eq!(cell.exit_within(WAIT), Some(0), "{}", cell.log());
    let log = cell.log();
    assert!(log.contains("cell stopped"), "{log}");
    assert!(log.contains("its lease is released"), "{log}");
    // The lease (a minute) was released: a successor starts at once.
    let successor = Process::start(&args);
    let _ = successor.value("url=");
    assert!(
        !successor.log().contains("held by a live process"),
        "{}",
        successor.log()
    );
}

#[test]
fn ops_1_sigint_stops_a_director_with_its_totals() {
    let dir = tempfile::tempdir().expect("dir");
    let db = format!("sqlite://{}", dir.path().join("d.db").display());
    let mut director = Process::start(&[
        "director",
        "--db",
        db.as_str(),
        "--interval-ms",
        "100",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let _ = director.value("examined=");
    director.signal("INT");
    assert_eq!(director.exit_within(WAIT), Some(0), "{}", director.log());
    let log = director.log();
    assert!(
        log.contains("director stopped") && log.contains("passes="),
        "{log}"
    );
}

#[path = "../../adapters/tests/handoff_rig/mod.rs"]
mod handoff_rig;

/// OPS-1 in process: a graceful cell stop closes its clients with 1001 `cell_stopping` (a crash
/// drops them without a close frame) and returns the final counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_1_a_graceful_cell_stop_closes_clients_with_a_reason() {
    use handoff_rig::*;
    let mut rig = Rig::new(Backend::Sqlite, "ops_1_cell").await;
    rig.start(SRC).await;
    let desk = rig.desktop_at(7, SRC).await;
    let (client, arrival) = RawClient::dial(&rig.cell(SRC).url, 7).await;
    assert_eq!(arrival, Arrival::Attached(SRC.0));
    let stats = rig.cell(SRC).shutdown(Duration::from_secs(2)).await;
    assert_eq!(stats.clients_attached, 1);
    assert_eq!(client.expect("client").closed(WAIT).await, Some(1001));
    desk.stop().await;
}

/// OPS-1: the drill (a minute at `--scene 5`) stops on SIGTERM between two lines, exit 0, its
/// last line saying the run was cut and has no verdict.
#[test]
fn ops_1_sigterm_interrupts_a_drill_with_a_last_line_saying_so() {
    use std::io::Read;
    let mut drill = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["drill", "--scene", "5"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("drill");
    std::thread::sleep(Duration::from_secs(2));
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &drill.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = drill.try_wait().expect("wait") {
            break s;
        }
        assert!(started.elapsed() < WAIT, "the drill did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    drill
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(
        out.trim_end()
            .ends_with("== drill INTERRUPTED by SIGTERM (no verdict) =="),
        "{out}"
    );
}
