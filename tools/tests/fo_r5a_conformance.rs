//! FO-R5a and CONF-1 end to end: the real `switchyard client`, journaling, on real sockets. Its
//! relay A dies, the health path opens B, and while B's handshake is held back the signed
//! directory drops B. B's open then succeeds: the core closes it and never adopts it (FO-R5a),
//! and the client's journal, judged by the spec, conforms. A driver that adopted B anyway (a
//! one-line bug in `adapters/src/failover/driver.rs`, core untouched) makes this test fail with
//! `breaks FO-R5a` (docs/ASSURANCE.md, "Conformance", says how that was checked).

mod support_bin;
mod support_directory;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support_bin::Process;
use support_directory::sign_raw;
use switchyard_adapters::failover::directory;
use switchyard_adapters::failover::relay::{RelayConfig, RelayHandle};
use switchyard_spec::conform::{judge_text, Verdict};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

fn payload(relays: &[&str], sequence: u64) -> String {
    let expires = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
        + 3600;
    serde_json::json!({
        "relays": relays,
        "refresh_after_seconds": 1,
        "sequence": sequence,
        "expires_at_unix_s": expires,
    })
    .to_string()
}

fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).expect("write directory");
    std::fs::rename(&tmp, path).expect("rename directory");
}

/// A relay whose WebSocket handshake waits for `release`; `accepted` says when a connection
/// arrived (the client's open is then in flight).
async fn held_relay(
    accepted: mpsc::Sender<()>,
    release: oneshot::Receiver<()>,
) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let _ = accepted.send(()).await;
        let _ = release.await;
        if let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await {
            use futures_util::StreamExt;
            while let Some(Ok(_)) = ws.next().await {}
        }
    });
    addr
}

fn wait_log(client: &Process, within: Duration, what: &str) {
    let until = Instant::now() + within;
    while !client.log().contains(what) {
        assert!(
            Instant::now() < until,
            "never logged {what:?}:\n{}",
            client.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn fo_r5a_conf_1_an_open_whose_url_left_the_list_is_never_adopted_and_the_journal_conforms() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let a = runtime
        .block_on(RelayHandle::start(RelayConfig::new(
            "127.0.0.1:0".parse().expect("loopback"),
            vec!["/r".into()],
        )))
        .expect("relay A");
    let (accepted_tx, mut accepted) = mpsc::channel(1);
    let (release, held) = oneshot::channel();
    let b_addr = runtime.block_on(held_relay(accepted_tx, held));
    let url_a = format!("ws://{}/r", a.local_addr());
    let url_b = format!("ws://{b_addr}/r");

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("directory.json");
    let journal = dir.path().join("client.journal.jsonl");
    let (secret, public) = directory::generate_key_pair().expect("randomness");
    let secret = directory::parse_secret_key("test", &secret).expect("secret key");
    write_atomically(&path, &sign_raw(&secret, &payload(&[&url_a, &url_b], 10)));
    let (path_arg, journal_arg) = (path.display().to_string(), journal.display().to_string());
    let mut client = Process::start(&[
        "client",
        "--directory",
        &path_arg,
        "--public-key",
        &public,
        "--check-ms",
        "100",
        "--grace-ms",
        "300",
        "--min-attempts",
        "1",
        "--up-timeout-ms",
        "20000",
        "--journal",
        &journal_arg,
    ]);
    wait_log(
        &client,
        Duration::from_secs(10),
        &format!("[relay-attach] {url_a}"),
    );

    // A dies; the health path opens B, whose handshake is held.
    runtime.block_on(a.stop());
    let arrived = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(15), accepted.recv()).await });
    assert!(
        matches!(arrived, Ok(Some(()))),
        "B's open never started:\n{}",
        client.log()
    );
    // The signed list drops B while its open is in flight; the client re-reads it every second.
    write_atomically(&path, &sign_raw(&secret, &payload(&[&url_a], 11)));
    std::thread::sleep(Duration::from_millis(2_500));
    let _ = release.send(());
    wait_log(
        &client,
        Duration::from_secs(10),
        &format!("{url_b} left the signed candidate list while its open was in flight"),
    );
    assert!(
        !client.log().contains("[relay-switch]"),
        "B must never be adopted:\n{}",
        client.log()
    );
    client.signal("TERM");
    assert_eq!(client.exit_within(Duration::from_secs(10)), Some(0));

    let text = std::fs::read_to_string(&journal).expect("the journal was written");
    let (_, verdicts) = judge_text(&text).expect("every line reads");
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    match &verdicts[0].1 {
        Verdict::Conforms { .. } => {}
        Verdict::Departs { departure: d, .. } => panic!(
            "the client's journal departs at line {}: {} breaks {}: the spec allowed {}\n{text}",
            d.line, d.event, d.requirement, d.allowed
        ),
    }
    assert!(
        text.contains("\"not-in-list\""),
        "the journal holds the core's refusal:\n{text}"
    );
}
