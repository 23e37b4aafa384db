//! SEC-4 fuzz targets: every parser and decoder a peer or an operator can feed, driven by
//! proptest on stable Rust with arbitrary bytes and with mutations (flips, inserts, deletes,
//! truncations) of valid inputs. Each target asserts more than "no panic": what decodes must
//! re-encode to the same value, and what verifies must be what was signed.
//!
//! CI runs a small number of cases per target; a long run (see `docs/SECURITY.md`):
//!
//! ```sh
//! SWITCHYARD_FUZZ_CASES=200000 cargo test --release -p switchyard-tools --test fuzz_parsers -- --nocapture
//! ```

use clap::Parser;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::de::DeserializeOwned;
use serde::Serialize;
use switchyard_adapters::failover::directory::{self, DirectoryPayload};
use switchyard_adapters::failover::relay::check_paths;
use switchyard_adapters::handoff::auth::{KeyRing, Received, Secret};
use switchyard_adapters::handoff::client_auth::{mint_client_token, verify_client};
use switchyard_adapters::handoff::proto::*;
use switchyard_adapters::serve::LimitArgs;
use switchyard_core::failover as fo_config;
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::Identity;
use switchyard_core::handoff::{CellId, Incarnation};
use switchyard_tools::failover::cli::{thresholds_from_env_and_flags, FailoverCommand};
use switchyard_tools::handoff::cli::HandoffCommand;

/// Cases per target: small in CI, large on request.
fn cases() -> u32 {
    std::env::var("SWITCHYARD_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

fn run<S: Strategy>(target: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let cases = cases();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("fuzz target {target}: {e}");
    }
    eprintln!("fuzz target {target}: {cases} inputs, no failure");
}

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(
        prop_oneof![
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
            any::<usize>().prop_map(Edit::Delete),
            any::<usize>().prop_map(Edit::Truncate),
        ],
        0..6,
    )
}

fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for e in edits {
        let n = v.len().max(1);
        match *e {
            Edit::Flip(i, b) if !v.is_empty() => v[i % n] ^= b | 1,
            Edit::Insert(i, b) => v.insert(i % (v.len() + 1), b),
            Edit::Delete(i) if !v.is_empty() => {
                v.remove(i % n);
            }
            Edit::Truncate(i) => v.truncate(i % (v.len() + 1)),
            _ => {}
        }
    }
    v
}

/// Either a mutation of one of `seeds` or arbitrary bytes.
fn input(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = seeds.len();
    prop_oneof![
        3 => (0..n, edits()).prop_map(move |(i, e)| apply(&seeds[i], &e)),
        1 => prop::collection::vec(any::<u8>(), 0..512),
    ]
}

#[test]
fn sec_4_fuzz_signed_directory_file() {
    let (secret, public) = directory::generate_key_pair().expect("keys");
    let secret = directory::parse_secret_key("fuzz", &secret).expect("secret key");
    let public = directory::parse_public_key("fuzz", &public).expect("public key");
    let payload = DirectoryPayload {
        relays: vec!["wss://a.example/r".into(), "wss://b.example/r".into()],
        refresh_after_seconds: 60,
        sequence: 7,
        expires_at_unix_s: 4_000_000_000,
    };
    let signed = directory::sign(&secret, &payload);
    let seed = serde_json::to_vec(&signed).expect("json");
    let signed_payload = signed.payload.clone();
    run("directory file", input(vec![seed]), |bytes| {
        if directory::verify("fuzz", &bytes, &public).is_ok() {
            // Ed25519: only the signed payload verifies, whatever else changed around it.
            let doc: serde_json::Value = serde_json::from_slice(&bytes).expect("it parsed");
            prop_assert_eq!(doc["payload"].as_str(), Some(signed_payload.as_str()));
        }
        Ok(())
    });
}

/// Decode; what decodes re-encodes to a value that decodes to the same thing.
fn round_trip<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    if let Ok(v) = serde_json::from_slice::<T>(bytes) {
        let again: T = serde_json::from_slice(&serde_json::to_vec(&v).expect("encode"))
            .map_err(|e| TestCaseError::fail(format!("re-decode: {e}")))?;
        prop_assert_eq!(again, v);
    }
    Ok(())
}

#[test]
fn sec_4_fuzz_client_and_desktop_frames() {
    let seeds: Vec<Vec<u8>> = [
        serde_json::to_vec(&ClientFrame::Mutation {
            id: "m-1".into(),
            body: "x".into(),
        }),
        serde_json::to_vec(&DesktopFrame::Measure {
            target: 2,
            current_rtt_ms: 120,
            target_rtt_ms: 60,
        }),
        serde_json::to_vec(&DesktopFrame::Credential { seq: 3 }),
        serde_json::to_vec(&DesktopFrame::Ack {
            conn: 4,
            id: "m-1".into(),
        }),
        serde_json::to_vec(&CellToClient::Undelivered {
            id: "m".into(),
            why: "bad_id".into(),
        }),
        serde_json::to_vec(&CellToDesktop::Registered {
            cell: 1,
            epoch: 2,
            incarnation: 3,
            generation: 4,
            capable: true,
        }),
        serde_json::to_vec(&CellToDesktop::retry(
            "credential",
            Some(2),
            "control_gated",
        )),
    ]
    .into_iter()
    .map(|r| r.expect("json"))
    .collect();
    run("client and desktop frames", input(seeds), |bytes| {
        round_trip::<ClientFrame>(&bytes)?;
        round_trip::<DesktopFrame>(&bytes)?;
        round_trip::<CellToClient>(&bytes)?;
        round_trip::<CellToDesktop>(&bytes)
    });
}

#[test]
fn sec_4_fuzz_internal_request_bodies_and_answers() {
    let request = r#"{"op_id":"00000000-0000-0000-0000-000000000001","source":{"host":7,"cell":1,"epoch":1,"incarnation":1,"generation":1},"target":2,"cohort_percent":100,"measurement":{"measured_at":1,"current_rtt_ms":120,"target_rtt_ms":60}}"#;
    let seeds = vec![
        request.as_bytes().to_vec(),
        br#"{"host":7,"reason":"auth_refused"}"#.to_vec(),
        br#"{"host":7}"#.to_vec(),
        br#"{"applied":true,"closed_clients":3,"state":"drained"}"#.to_vec(),
        br#"{"host":7,"cell":1,"epoch":2,"url":"http://c"}"#.to_vec(),
    ];
    run("internal request bodies", input(seeds), |bytes| {
        round_trip::<HandoffRequest>(&bytes)?;
        round_trip::<DrainRequest>(&bytes)?;
        round_trip::<UndrainRequest>(&bytes)?;
        round_trip::<DrainAnswer>(&bytes)?;
        round_trip::<ResolveAnswer>(&bytes)?;
        round_trip::<HandoffAnswer>(&bytes)
    });
}

/// SEC-2: a signed internal request as lines (method, path, then the six headers, then the
/// body); mutated, parsed back and verified. Only the request as signed verifies.
#[test]
fn sec_4_fuzz_internal_request_signature() {
    let master = Secret::new(b"internal-master-for-fuzzing-01", "fuzz").expect("secret");
    let cell = CellId(1);
    let ring = KeyRing::from_secrets(cell, &master, None);
    let now_ms = 1_700_000_000_000;
    let body = br#"{"host":7,"reason":"emergency"}"#;
    let headers = switchyard_adapters::handoff::auth::sign_request(
        &master,
        "POST",
        DRAIN_PATH,
        cell,
        Incarnation(3),
        now_ms,
        body,
    )
    .expect("signed");
    let mut lines = vec!["POST".to_owned(), DRAIN_PATH.to_owned()];
    lines.extend(headers.iter().map(|(_, v)| v.clone()));
    let mut seed = lines.join("\n").into_bytes();
    seed.push(b'\n');
    seed.extend_from_slice(body);
    let original = seed.clone();
    run("internal request signature", input(vec![seed]), |bytes| {
        let text = String::from_utf8_lossy(&bytes);
        let mut parts = text.splitn(9, '\n');
        let method = parts.next().unwrap_or("");
        let path = parts.next().unwrap_or("");
        let (c, inc, t, n, k, sig) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        );
        let received_body = parts.next().unwrap_or("");
        let received = Received {
            method,
            path,
            cell: c,
            incarnation: inc,
            timestamp: t,
            nonce: n,
            key: k,
            signature: sig,
            body: received_body.as_bytes(),
        };
        let own = Identity {
            cell,
            incarnation: Incarnation(3),
        };
        if ring.verify(&received, own, now_ms, 30_000).is_ok() {
            prop_assert_eq!(bytes, original.clone(), "a changed request verified");
        }
        Ok(())
    });
}

#[test]
fn sec_4_fuzz_client_credentials() {
    let desktop = Secret::new(b"desktop-secret-for-fuzzing-0123", "fuzz").expect("secret");
    let now_ms = 1_000_000;
    let token = mint_client_token(&desktop.desktop_token(7), 7, now_ms + 60_000);
    let seed = format!("Bearer {token}").into_bytes();
    run("client credentials", input(vec![seed]), |bytes| {
        let header = String::from_utf8_lossy(&bytes);
        if verify_client(&desktop, 7, Some(&header), now_ms, 86_400_000).is_ok() {
            // HMAC: only the minted token passes (the header may differ in spacing).
            let got = header.strip_prefix("Bearer ").map(str::trim);
            prop_assert_eq!(got, Some(token.as_str()));
        }
        Ok(())
    });
}

#[derive(Parser, Debug)]
#[command(name = "switchyard")]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(clap::Subcommand, Debug)]
enum Commands {
    #[command(flatten)]
    Failover(FailoverCommand),
    #[command(flatten)]
    Handoff(HandoffCommand),
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,25}",
        "-?[0-9]{1,20}",
        "[ -~]{0,40}",
        any::<String>(),
        Just("/{x}".to_owned()),
        Just("18446744073709551616".to_owned()),
    ]
}

#[test]
fn sec_4_fuzz_config_values() {
    let flags = [
        ("cell", "--cell-id"),
        ("cell", "--cell-lease-ms"),
        ("cell", "--public-url"),
        ("cell", "--max-connections"),
        ("cell", "--ws-idle-timeout-ms"),
        ("mobile", "--host"),
        ("client-token", "--ttl-ms"),
        ("relay", "--path"),
        ("relay", "--max-connections-per-peer"),
        ("relay", "--ws-max-message-bytes"),
        ("client", "--cooldown-ms"),
    ];
    let vars = [
        fo_config::VAR_COOLDOWN_MS,
        fo_config::VAR_DEADLINE_MS,
        fo_config::VAR_GRACE_MS,
        fo_config::VAR_MIN_ATTEMPTS,
        fo_config::VAR_CHECK_MS,
        fo_config::VAR_EXEMPT,
        fo_config::VAR_PROBE_MIN_MS,
        fo_config::VAR_PROBE_MAX_MS,
    ];
    let strategy = (0..flags.len(), text(), 0..vars.len(), text(), text());
    run(
        "config values",
        strategy,
        |(f, value, v, env_value, path)| {
            // Flags: clap and the value parsers answer, never panic.
            let (command, flag) = flags[f];
            let _ = Cli::try_parse_from(["switchyard", command, flag, value.as_str()]);
            // Environment: the failover thresholds read strictly.
            let var = vars[v];
            let _ =
                thresholds_from_env_and_flags(|name| (name == var).then(|| env_value.clone()), &[]);
            // Relay paths: a path accepted is a literal path.
            if check_paths(std::slice::from_ref(&path)).is_ok() {
                prop_assert!(path.starts_with('/'));
                let pattern = path.contains(['{', '}', ':', '*']);
                prop_assert!(!pattern, "a route pattern was accepted: {:?}", path);
            }
            // Limits: checked values only.
            let n = value.parse::<usize>().ok();
            let limits = LimitArgs {
                max_connections: n,
                ws_max_message_bytes: n,
                ..LimitArgs::default()
            }
            .limits(switchyard_adapters::serve::DEFAULT_LIMITS);
            if let Ok(l) = limits {
                prop_assert!(l.max_connections >= 1 && l.ws_max_message_bytes >= 1);
            }
            Ok(())
        },
    );
}
