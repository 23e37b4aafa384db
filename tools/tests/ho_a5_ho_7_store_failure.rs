//! Every loop closed, over the real binary on PostgreSQL (issue #25): the store failing under
//! two core decisions.
//!
//! - HO-A5: a drain fence whose write fails (the host's database refuses connections during
//!   the emergency drain) is written once the store is back: the row's generation is bumped.
//!   Red before the core kept the fence: the adapter retried five times within ≈ 2 s, logged
//!   "drain fence not written" and gave up, and the generation never moved. While the fence is
//!   unwritten the host refuses undrain (`fence_unwritten`).
//! - HO-7: a client whose activity persist fails is closed with 1013
//!   `activity_not_persisted`, and the cell's gauges show no accept and no connection left
//!   live for it. Red before the attach machine: the close said `store_unavailable` and the
//!   gauges did not exist.

mod support_bin;
#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use sqlx::{Connection, PgConnection};
use support_bin::{cell_args, Process, SECRET, WAIT};
use switchyard_adapters::handoff::auth::Secret;
use switchyard_adapters::handoff::client::{spawn_desktop, DesktopConfig, DesktopHandle};
use switchyard_adapters::handoff::client_auth::mint_client_token;
use switchyard_adapters::handoff::clock::Clock;
use switchyard_adapters::handoff::proto::{CellToClient, CLIENT_PATH};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const HOST: u64 = 7;

fn desktop(url: &str) -> DesktopHandle {
    let secret = Secret::new(SECRET.as_bytes(), "desktop").expect("secret");
    spawn_desktop(DesktopConfig {
        resolvers: vec![url.to_owned()],
        host: HOST,
        token: secret.desktop_token(HOST),
        capable: true,
        measure: None,
        pace_min: Duration::from_millis(50),
        pace_max: Duration::from_millis(200),
        ping_every: Duration::from_secs(1),
    })
}

/// A cell on its own fresh PostgreSQL database, with the host's desktop registered.
async fn cell_with_host(tag: &str) -> (String, Process, String, DesktopHandle) {
    let db = support_pg::fresh_db(tag).await;
    let cell = Process::start(&cell_args(
        &db,
        "1",
        &[
            // The outages here are shorter than the lease: the cell keeps its identity.
            "--cell-lease-ms",
            "120000",
        ],
    ));
    let url = cell.value("url=");
    let mut desk = desktop(&url);
    desk.wait_registered(1, WAIT)
        .await
        .expect("the host is enrolled and registers");
    (db, cell, url, desk)
}

async fn generation(db: &str) -> i64 {
    let mut conn = PgConnection::connect(db).await.expect("connect");
    sqlx::query_scalar("SELECT generation FROM ho_assignments WHERE host = $1")
        .bind(i64::try_from(HOST).expect("host"))
        .fetch_one(&mut conn)
        .await
        .expect("the host's row")
}

/// `switchyard handoff <verb> --host 7` against the cell: (exit 0, stdout + stderr).
async fn operator(url: &str, verb: &str) -> (bool, String) {
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["handoff", verb, "--cell-url", url, "--host", "7"])
            .env("SWITCHYARD_HANDOFF_SECRET", SECRET)
            .env("SWITCHYARD_CELL_ID", "1")
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the command ends by itself")
    .expect("run switchyard");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The cell's Prometheus sample `name` (`None`: not exported).
fn metric(url: &str, name: &str) -> Option<u64> {
    let addr: SocketAddr = url
        .trim_start_matches("http://")
        .parse()
        .expect("cell address");
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .expect("write");
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    raw.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// Dial a client of the host with a valid credential: `Ok(())` attached, `Err((code,
/// reason))` closed.
async fn dial(url: &str) -> Result<impl Sized, (u16, String)> {
    let secret = Secret::new(SECRET.as_bytes(), "desktop").expect("secret");
    let expires_ms = Clock::default().now().0 + 24 * 3_600_000;
    let token = mint_client_token(&secret.desktop_token(HOST), HOST, expires_ms);
    let ws_url = format!(
        "{}{CLIENT_PATH}?host={HOST}",
        url.replacen("http://", "ws://", 1)
    );
    let mut request = ws_url.into_client_request().expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    let (mut ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
        .await
        .expect("connect in time")
        .expect("connect");
    match tokio::time::timeout(WAIT, ws.next())
        .await
        .expect("an answer in time")
    {
        Some(Ok(Message::Text(t))) => match serde_json::from_str::<CellToClient>(&t) {
            Ok(CellToClient::Attached { .. }) => Ok(ws),
            other => panic!("unexpected first frame {other:?}"),
        },
        Some(Ok(Message::Close(Some(f)))) => Err((u16::from(f.code), f.reason.to_string())),
        other => Err((0, format!("{other:?}"))),
    }
}

async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    within: Duration,
    mut f: impl FnMut() -> F,
) {
    let deadline = Instant::now() + within;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_a5_a_drain_fence_that_fails_is_written_once_the_store_is_back() {
    let (db, cell, url, desk) = cell_with_host("hoa5_fence").await;
    let before = generation(&db).await;
    support_pg::outage_begin(&db).await;
    let (ok, out) = operator(&url, "drain").await;
    assert!(ok, "the drain itself needs no store: {out}");
    // Longer than the old five tries took (≈ 2 s): each write fails meanwhile.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (ok, out) = operator(&url, "undrain").await;
    assert!(
        !ok && out.contains("fence_unwritten"),
        "an unwritten fence refuses undrain: {out}"
    );
    support_pg::outage_end(&db).await;
    eventually("the fence is written", WAIT + WAIT, || async {
        generation(&db).await == before + 1
    })
    .await;
    let log = cell.log();
    assert!(log.contains("drain fence write failed"), "{log}");
    assert!(log.contains("drain fence retry scheduled"), "{log}");
    assert!(metric(&url, "switchyard_cell_fence_failures_total").is_some_and(|n| n >= 2));
    eventually("no fence left unwritten", WAIT, || async {
        metric(&url, "switchyard_cell_fences_unwritten") == Some(0)
    })
    .await;
    let (ok, out) = operator(&url, "undrain").await;
    assert!(ok, "written: the host may be undrained: {out}");
    desk.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ho_7_a_client_whose_activity_persist_fails_is_closed_by_name_and_holds_nothing() {
    let (db, _cell, url, desk) = cell_with_host("ho7_attach").await;
    support_pg::outage_begin(&db).await;
    let closed = dial(&url).await.err().expect("closed, not attached");
    assert_eq!(
        closed,
        (1013, "activity_not_persisted".to_owned()),
        "the persist failure is named"
    );
    assert_eq!(
        metric(&url, "switchyard_cell_clients_persist_failed_total"),
        Some(1)
    );
    assert_eq!(metric(&url, "switchyard_cell_accepts_live"), Some(0));
    assert_eq!(metric(&url, "switchyard_cell_client_conns_live"), Some(0));
    support_pg::outage_end(&db).await;
    // The gauges can say otherwise: with the store back the next client attaches.
    let deadline = Instant::now() + WAIT;
    let attached = loop {
        match dial(&url).await {
            Ok(ws) => break ws,
            Err(closed) => assert!(Instant::now() < deadline, "never attached: {closed:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(metric(&url, "switchyard_cell_client_conns_live"), Some(1));
    assert_eq!(metric(&url, "switchyard_cell_accepts_live"), Some(0));
    drop(attached);
    desk.stop().await;
}
