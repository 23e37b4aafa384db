//! `switchyard sign-directory` over the real binary (issue #26): a list longer than a client
//! accepts (MAX_CANDIDATES) is refused by name with exit 2 instead of written, and the default
//! `--sequence` is strictly increasing across signings into the same file (FO-S1), even two in
//! one millisecond or after a higher explicit one.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use switchyard_adapters::failover::directory;
use switchyard_core::failover::MAX_CANDIDATES;

const EXE: &str = env!("CARGO_BIN_EXE_switchyard");

fn run(args: &[String]) -> (i32, String) {
    let out = Command::new(EXE)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run switchyard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn now_unix_ms() -> u64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis();
    u64::try_from(ms).expect("fits")
}

/// A key pair in `dir`: the secret key's path and the public key.
fn keygen(dir: &Path) -> (String, String) {
    let key = dir.join("directory.key");
    let key_arg = key.to_str().expect("utf-8 path").to_owned();
    let (code, err) = run(&["keygen".into(), "--secret-key".into(), key_arg.clone()]);
    assert_eq!(code, 0, "{err}");
    let public = std::fs::read_to_string(dir.join("directory.key.pub")).expect("public key");
    (key_arg, public.trim().to_owned())
}

fn sign(key: &str, out: &Path, relays: usize, extra: &[&str]) -> (i32, String) {
    let mut args: Vec<String> = vec![
        "sign-directory".into(),
        "--secret-key".into(),
        key.into(),
        "--out".into(),
        out.to_str().expect("utf-8 path").into(),
    ];
    for i in 0..relays {
        args.push("--relay".into());
        args.push(format!("wss://r{i}.example/relay"));
    }
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    run(&args)
}

/// The sequence of the list at `out`, as a client with `public` reads it.
fn sequence(out: &Path, public: &str) -> u64 {
    let key = directory::parse_public_key("test", public).expect("public key");
    let bytes = std::fs::read(out).expect("read --out");
    directory::verify("out", &bytes, &key)
        .expect("a client accepts it")
        .sequence
}

#[test]
fn fo_s1_sec_4_sign_directory_refuses_more_relays_than_a_client_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (key, public) = keygen(dir.path());
    let out = dir.path().join("directory.json");

    let (code, err) = sign(&key, &out, MAX_CANDIDATES + 1, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "--relay: {} relays given, at most {MAX_CANDIDATES}",
            MAX_CANDIDATES + 1
        )),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written");

    // The largest list a client takes is signed, and a client accepts it.
    let (code, err) = sign(&key, &out, MAX_CANDIDATES, &[]);
    assert_eq!(code, 0, "{err}");
    let key = directory::parse_public_key("test", &public).expect("public key");
    let accepted = directory::verify("out", &std::fs::read(&out).expect("read"), &key)
        .expect("a client accepts the longest list");
    assert_eq!(accepted.relays.len(), MAX_CANDIDATES);
}

#[test]
fn fo_s1_sign_directory_default_sequence_is_unix_milliseconds_and_strictly_increasing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (key, public) = keygen(dir.path());
    let out = dir.path().join("directory.json");

    // No file yet: the Unix time in milliseconds.
    let before = now_unix_ms();
    let (code, err) = sign(&key, &out, 1, &[]);
    assert_eq!(code, 0, "{err}");
    let first = sequence(&out, &public);
    assert!(
        (before..=now_unix_ms()).contains(&first),
        "{first} not in ms since {before}"
    );

    // Signings in a row into the same file: each strictly above the one before, however
    // quickly they follow each other.
    let mut last = first;
    for _ in 0..5 {
        let (code, err) = sign(&key, &out, 1, &[]);
        assert_eq!(code, 0, "{err}");
        let next = sequence(&out, &public);
        assert!(next > last, "{next} after {last}");
        last = next;
    }

    // A file holding a sequence above the clock (an explicit --sequence, a clock set back):
    // the default is that + 1, never an equal or lower number.
    let ahead = now_unix_ms() + 10_000_000_000;
    let (code, err) = sign(&key, &out, 1, &["--sequence", &ahead.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(sequence(&out, &public), ahead);
    let (code, err) = sign(&key, &out, 1, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(sequence(&out, &public), ahead + 1);

    // At the top of the range there is no higher number: refused by name.
    let (code, err) = sign(&key, &out, 1, &["--sequence", &u64::MAX.to_string()]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = sign(&key, &out, 1, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--out") && err.contains("--sequence"), "{err}");
    assert_eq!(
        sequence(&out, &public),
        u64::MAX,
        "the file is left as it was"
    );
}

#[test]
fn fo_s1_sign_directory_refuses_to_guess_a_sequence_over_a_file_it_cannot_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (key, _public) = keygen(dir.path());
    let out = dir.path().join("directory.json");
    std::fs::write(&out, "not a directory").expect("write");
    let (code, err) = sign(&key, &out, 1, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "--out {}: holds no signed directory",
            out.display()
        )),
        "{err}"
    );
    assert!(err.contains("pass --sequence"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // With an explicit sequence the file is simply replaced.
    let (code, err) = sign(&key, &out, 1, &["--sequence", "7"]);
    assert_eq!(code, 0, "{err}");
}
