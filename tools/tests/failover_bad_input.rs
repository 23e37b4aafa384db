//! External input never panics the client: bad directories keep the last good list, bad
//! thresholds are named, a relay that never completes the handshake times out, a relay that
//! sends garbage is survived.

mod support_directory;

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::SinkExt;
use support_directory::sign_raw;
use switchyard_adapters::failover::channel::{self, Channel, ChannelReport};
use switchyard_adapters::failover::directory::DirectoryConfig;
use switchyard_adapters::failover::directory::{
    self, DirectoryError, DirectoryPayload, SignedDirectory,
};
use switchyard_adapters::failover::driver::{ClientConfig, ClientHandle};
use switchyard_adapters::failover::relay::{RelayConfig, RelayHandle};
use switchyard_core::failover::{
    ChannelState, RelayUrl, VAR_CHECK_MS, VAR_COOLDOWN_MS, VAR_EXEMPT,
};
use switchyard_tools::failover::cli::thresholds_from_env_and_flags;
use switchyard_tools::failover::drill::{drill_channel, drill_reconnect, drill_thresholds};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

fn keys() -> (ed25519_dalek::SigningKey, ed25519_dalek::VerifyingKey) {
    let (secret, public) = directory::generate_key_pair().expect("randomness");
    (
        directory::parse_secret_key("test", &secret).expect("secret key"),
        directory::parse_public_key("test", &public).expect("public key"),
    )
}

/// A valid sequence/expiry pair (FO-S1) for documents that test something else.
const SEQ_AND_EXPIRY: &str = r#""sequence": 1, "expires_at_unix_s": 99999999999"#;

fn payload(relays: &[&str]) -> DirectoryPayload {
    DirectoryPayload {
        relays: relays.iter().map(|s| (*s).to_owned()).collect(),
        refresh_after_seconds: 1,
        sequence: 1,
        expires_at_unix_s: directory::wall_clock_unix_s().expect("clock after 1970") + 3600,
    }
}

#[test]
fn fo_r5_directory_good_document_verifies() {
    let (secret, public) = keys();
    let doc = directory::sign(
        &secret,
        &payload(&["wss://a.example/r", "ws://127.0.0.1:1/r"]),
    );
    let bytes = serde_json::to_vec(&doc).unwrap();
    let dir = directory::verify("d.json", &bytes, &public).unwrap();
    assert_eq!(dir.relays.len(), 2);
    assert_eq!(dir.refresh_after, Duration::from_secs(1));
}

#[test]
fn fo_r5_directory_bad_documents_are_rejected_with_a_named_reason() {
    let (secret, public) = keys();
    let (other, _) = keys();
    let good = directory::sign(&secret, &payload(&["wss://a.example/r"]));
    let verify = |bytes: Vec<u8>| directory::verify("d.json", &bytes, &public).unwrap_err();

    // a signature by another key
    let forged = directory::sign(&other, &payload(&["wss://evil.example/r"]));
    assert!(matches!(
        verify(serde_json::to_vec(&forged).unwrap()),
        DirectoryError::BadSignature { .. }
    ));
    // a payload altered after signing
    let mut altered = good.clone();
    altered.payload = altered.payload.replace("a.example", "evil.example");
    assert!(matches!(
        verify(serde_json::to_vec(&altered).unwrap()),
        DirectoryError::BadSignature { .. }
    ));
    // malformed JSON, and a document with a field of the wrong type
    assert!(matches!(
        verify(b"{\"payload\": ".to_vec()),
        DirectoryError::Malformed { .. }
    ));
    assert!(matches!(
        verify(br#"{"payload": 5, "signature": "x"}"#.to_vec()),
        DirectoryError::Malformed { .. }
    ));
    let not_base64 = SignedDirectory {
        payload: good.payload.clone(),
        signature: "!!".into(),
    };
    assert!(matches!(
        verify(serde_json::to_vec(&not_base64).unwrap()),
        DirectoryError::SignatureEncoding { .. }
    ));
    // signed but semantically bad payloads
    let wrong_type = sign_raw(
        &secret,
        r#"{"relays": "wss://a.example/r", "refresh_after_seconds": 1}"#,
    );
    assert!(matches!(verify(wrong_type), DirectoryError::Payload { .. }));
    let refresh_type = sign_raw(
        &secret,
        r#"{"relays": ["wss://a.example/r"], "refresh_after_seconds": "soon"}"#,
    );
    assert!(matches!(
        verify(refresh_type),
        DirectoryError::Payload { .. }
    ));
    let empty = serde_json::to_vec(&directory::sign(&secret, &payload(&[]))).unwrap();
    assert!(matches!(verify(empty), DirectoryError::Empty { .. }));
    for url in [
        "https://a.example/r",
        "a.example/r",
        "ws:///nohost",
        "wss://",
    ] {
        let bad = serde_json::to_vec(&directory::sign(&secret, &payload(&[url]))).unwrap();
        match verify(bad) {
            DirectoryError::NotWebSocketUrl { url: named, .. } => assert_eq!(named, url),
            other => panic!("{url}: {other}"),
        }
    }
    let zero = sign_raw(
        &secret,
        &format!(
            r#"{{"relays": ["wss://a.example/r"], "refresh_after_seconds": 0, {SEQ_AND_EXPIRY}}}"#
        ),
    );
    assert!(matches!(verify(zero), DirectoryError::Refresh { .. }));
    // unknown payload fields are ignored (forward compatible)
    let extra = sign_raw(
        &secret,
        &format!(
            r#"{{"relays": ["wss://a.example/r"], "refresh_after_seconds": 5, "note": 1, {SEQ_AND_EXPIRY}}}"#
        ),
    );
    assert!(directory::verify("d.json", &extra, &public).is_ok());
    // every message names the file
    assert!(verify(b"[]".to_vec()).to_string().contains("d.json"));
}

#[test]
fn fo_cfg_1_bad_environment_values_are_named_and_flags_follow_the_same_rules() {
    let env = |name: &str| match name {
        "RELAY_FAILOVER_COOLDOWN_MS" => Some("20000 (drill)".to_owned()),
        "RELAY_FAILOVER_CHECK_MS" => Some("0".to_owned()),
        _ => None,
    };
    let error = thresholds_from_env_and_flags(env, &[]).unwrap_err();
    assert!(
        error.contains(VAR_COOLDOWN_MS) && error.contains("20000 (drill)"),
        "{error}"
    );
    assert!(
        error.contains(VAR_CHECK_MS) && error.contains("busy loop"),
        "{error}"
    );
    let flag = "2".to_owned();
    let error = thresholds_from_env_and_flags(|_| None, &[(VAR_EXEMPT, Some(&flag))]).unwrap_err();
    assert!(error.contains(VAR_EXEMPT), "{error}");
    let ok = "0".to_owned();
    let t = thresholds_from_env_and_flags(
        |_| Some("7".to_owned()).filter(|_| false),
        &[(VAR_EXEMPT, Some(&ok))],
    )
    .unwrap();
    assert!(!t.exempt);
}

#[tokio::test]
async fn fo_h_1_open_times_out_on_a_relay_that_never_completes_the_handshake() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accept TCP, read nothing, answer nothing.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let started = tokio::time::Instant::now();
    let url = RelayUrl::new(format!("ws://{addr}/dshs-relay"));
    let result = channel::open(&url, Duration::from_millis(300)).await;
    assert!(
        matches!(
            result,
            Err(channel::OpenError::TimedOut { timeout_ms: 300 })
        ),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2), "the open hung");
    holder.abort();
}

#[tokio::test]
async fn fo_h_1_garbage_frames_do_not_kill_the_channel_and_a_broken_peer_means_backoff() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    // A "relay" that completes the handshake, then sends junk frames, then raw garbage bytes.
    let server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(socket).await.unwrap();
        for junk in ["\u{0}\u{1}", "not json", "pong?"] {
            ws.send(tokio_tungstenite::tungstenite::Message::Text(junk.into()))
                .await
                .unwrap();
        }
        ws.send(tokio_tungstenite::tungstenite::Message::Binary(
            vec![0xff; 64].into(),
        ))
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut raw = ws.into_inner();
        tokio::io::AsyncWriteExt::write_all(&mut raw, &[0x8f, 0xff, 0x00, 0x13, 0x37])
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let url = RelayUrl::new(format!("ws://{addr}/dshs-relay"));
    let stream = channel::open(&url, Duration::from_secs(2)).await.unwrap();
    let (tx, mut rx) = mpsc::channel::<ChannelReport>(16);
    let channel = Channel::spawn(url.clone(), stream, drill_channel(), tx);
    let first = rx.recv().await.unwrap();
    assert_eq!(first.state, ChannelState::Healthy);
    // the junk frames are ignored; the invalid raw bytes end the connection: backoff, no panic
    let next = tokio::time::timeout(Duration::from_secs(3), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.state, ChannelState::Backoff { attempts: 0 });
    let retry = tokio::time::timeout(Duration::from_secs(3), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(retry.state, ChannelState::Backoff { attempts: 1 }));
    channel.close();
    server.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_r5_a_bad_directory_refresh_keeps_the_last_good_list() {
    let relay = RelayHandle::start(RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec!["/r".into()],
    ))
    .await
    .unwrap();
    let url = format!("ws://{}/r", relay.local_addr());
    let (secret, public) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("directory.json");
    let good = directory::sign(&secret, &payload(&[url.as_str()]));
    std::fs::write(&path, serde_json::to_vec(&good).unwrap()).unwrap();
    let client = ClientHandle::start(ClientConfig {
        thresholds: drill_thresholds(),
        reconnect: drill_reconnect(),
        directory: DirectoryConfig::Signed {
            path: path.clone(),
            key: public,
        },
        journal: Default::default(),
    });
    let mut attached = false;
    for _ in 0..100 {
        if client.stats().current.as_ref().map(RelayUrl::as_str) == Some(url.as_str()) {
            attached = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(attached);
    // Replace the file with a forged list; the refresh (every second) must not take it.
    let (other, _) = keys();
    let forged = directory::sign(&other, &payload(&["ws://127.0.0.1:9/evil"]));
    std::fs::write(&path, serde_json::to_vec(&forged).unwrap()).unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let stats = client.stats();
    assert_eq!(
        stats.current.as_ref().map(RelayUrl::as_str),
        Some(url.as_str())
    );
    assert_eq!(
        stats.counters.open_failed, 0,
        "nothing from the forged list was opened"
    );
    client.stop().await;
    relay.stop().await;
}

#[test]
fn fo_s1_directory_without_sequence_or_expiry_is_refused_by_name() {
    let (secret, public) = keys();
    let verify = |bytes: Vec<u8>| directory::verify("d.json", &bytes, &public).unwrap_err();
    for (payload, field) in [
        (
            r#"{"relays": ["wss://a.example/r"], "refresh_after_seconds": 5}"#,
            "sequence",
        ),
        (
            r#"{"relays": ["wss://a.example/r"], "refresh_after_seconds": 5, "expires_at_unix_s": 99999999999}"#,
            "sequence",
        ),
        (
            r#"{"relays": ["wss://a.example/r"], "refresh_after_seconds": 5, "sequence": 3}"#,
            "expires_at_unix_s",
        ),
        (
            r#"{"relays": ["wss://a.example/r"], "refresh_after_seconds": 5, "sequence": null, "expires_at_unix_s": 9}"#,
            "sequence",
        ),
    ] {
        let error = verify(sign_raw(&secret, payload));
        assert_eq!(
            error,
            DirectoryError::MissingField {
                path: "d.json".into(),
                field
            },
            "{payload}"
        );
        assert!(error.to_string().contains(field), "{error}");
    }
    // wrong types are still payload errors, not silently defaulted
    let negative = sign_raw(
        &secret,
        r#"{"relays": ["wss://a.example/r"], "refresh_after_seconds": 5, "sequence": -1, "expires_at_unix_s": 9}"#,
    );
    assert!(matches!(verify(negative), DirectoryError::Payload { .. }));
    // both fields are covered by the signature
    let good = directory::sign(&secret, &payload(&["wss://a.example/r"]));
    let mut bumped = good.clone();
    bumped.payload = bumped.payload.replace("\"sequence\":1", "\"sequence\":2");
    assert_ne!(bumped.payload, good.payload);
    assert!(matches!(
        verify(serde_json::to_vec(&bumped).unwrap()),
        DirectoryError::BadSignature { .. }
    ));
    let dir = directory::verify("d.json", &serde_json::to_vec(&good).unwrap(), &public).unwrap();
    assert_eq!(dir.sequence, 1);
}

#[tokio::test]
async fn sec_4_directory_read_is_bounded_in_bytes_and_refuses_non_files() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let max = usize::try_from(directory::MAX_DIRECTORY_BYTES).unwrap();
    std::fs::write(&big, vec![b' '; max + 1]).unwrap();
    let error = directory::read_bounded(&big).await.unwrap_err();
    assert!(matches!(error, DirectoryError::TooLarge { .. }), "{error}");
    assert!(error.to_string().contains("big.json"), "{error}");
    let exact = dir.path().join("exact.json");
    std::fs::write(&exact, vec![b' '; max]).unwrap();
    assert_eq!(directory::read_bounded(&exact).await.unwrap().len(), max);
    let error = directory::read_bounded(dir.path()).await.unwrap_err();
    assert!(
        matches!(
            error,
            DirectoryError::NotAFile {
                kind: "directory",
                ..
            }
        ),
        "{error}"
    );
    let error = directory::read_bounded(std::path::Path::new("/dev/zero"))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "directory /dev/zero: cannot read: is a character device (only a regular file or a FIFO is read)");
    let error = directory::read_bounded(&dir.path().join("missing.json"))
        .await
        .unwrap_err();
    assert!(matches!(error, DirectoryError::Read { .. }), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fo_s1_a_replayed_or_expired_refresh_keeps_the_last_good_list() {
    let (secret, public) = keys();
    let now = directory::wall_clock_unix_s().unwrap();
    let good = directory::verify(
        "d.json",
        &serde_json::to_vec(&directory::sign(
            &secret,
            &DirectoryPayload {
                sequence: 7,
                ..payload(&["wss://a.example/r"])
            },
        ))
        .unwrap(),
        &public,
    )
    .unwrap();
    let accepted = |sequence| switchyard_core::failover::AcceptedDirectory {
        sequence,
        relays: good.relays.clone(),
        expires_at_unix_s: good.expires_at_unix_s,
    };
    assert_eq!(
        directory::check_fresh("d.json", &good, Some(&accepted(7)), now),
        Ok(())
    );
    assert_eq!(
        directory::check_fresh("d.json", &good, Some(&accepted(6)), now),
        Ok(())
    );
    assert!(matches!(
        directory::check_fresh("d.json", &good, Some(&accepted(8)), now),
        Err(DirectoryError::Stale {
            source: switchyard_core::failover::FreshnessError::Replayed {
                sequence: 7,
                last_accepted: 8
            },
            ..
        })
    ));
    assert!(matches!(
        directory::check_fresh("d.json", &good, None, good.expires_at_unix_s),
        Err(DirectoryError::Stale {
            source: switchyard_core::failover::FreshnessError::Expired { .. },
            ..
        })
    ));
}
