//! The signed relay directory: an ed25519-signed JSON document with the ordered relay list, a
//! refresh interval, a sequence number and an expiry (FO-S1).
//!
//! On disk:
//! ```json
//! {"payload": "<the payload JSON, as a string>", "signature": "<base64 ed25519 over payload>"}
//! ```
//! The payload is signed as the exact bytes of that string, so no canonical JSON is needed:
//! `{"relays": ["wss://…", …], "refresh_after_seconds": 600, "sequence": 1767225600,
//! "expires_at_unix_s": 1767830400}`. `sequence` and `expires_at_unix_s` are required (a payload
//! without them is refused by name, never defaulted); unknown payload fields are ignored (older
//! clients keep working); known fields of the wrong type are errors.
//!
//! Freshness (FO-S1) is decided by `switchyard_core::failover::check_freshness`; this module
//! reads the wall clock and keeps the last accepted sequence and list in memory (no on-disk
//! cache: the last good list lives in the supervisor).
//!
//! The file is read with a byte bound whatever it is (SEC-4): it is opened non-blocking, a
//! regular file is read through `take(MAX_DIRECTORY_BYTES + 1)`, a FIFO through tokio's pipe
//! receiver with the same bound and `FIFO_READ_TIMEOUT`, and anything else (a device, a
//! directory, a socket) is refused by its type before a byte is read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use switchyard_core::failover::{
    check_candidate_list, check_freshness, AcceptedDirectory, DirectoryRejection, DirectorySource,
    FreshnessError, RelayUrl,
};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::http::Uri;

/// The document on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedDirectory {
    pub payload: String,
    pub signature: String,
}

/// What the signature covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryPayload {
    pub relays: Vec<String>,
    pub refresh_after_seconds: u64,
    /// FO-S1: higher for every newer list; a client refuses one lower than it accepted, and an
    /// equal one that signs a different list.
    pub sequence: u64,
    /// FO-S1: the list is valid while the client's wall clock is before this (Unix seconds).
    pub expires_at_unix_s: u64,
}

/// The payload as parsed: the FO-S1 fields are optional here only so that a missing one is a
/// named error (`MissingField`) instead of serde's generic message or a silent default.
#[derive(Debug, Deserialize)]
struct ParsedPayload {
    relays: Vec<String>,
    refresh_after_seconds: u64,
    sequence: Option<u64>,
    expires_at_unix_s: Option<u64>,
}

/// A verified, validated directory (not yet checked for freshness: see [`check_fresh`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directory {
    pub relays: Vec<RelayUrl>,
    pub refresh_after: Duration,
    pub sequence: u64,
    pub expires_at_unix_s: u64,
}

/// Bounds on the refresh interval: not a busy loop, not "never".
pub const MIN_REFRESH_SECONDS: u64 = 1;
pub const MAX_REFRESH_SECONDS: u64 = 7 * 24 * 3600;
/// A directory file larger than this is refused before parsing; at most this + 1 bytes are
/// ever read, whatever the file is.
pub const MAX_DIRECTORY_BYTES: u64 = 4 * 1024 * 1024;
/// How long a FIFO may take to deliver a whole document (a writer that stalls must not hold
/// the refresh, and the read is cancelled at once on shutdown anyway).
pub const FIFO_READ_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DirectoryError {
    #[error("directory {path}: cannot read: {reason}")]
    Read { path: String, reason: String },
    #[error("directory {path}: cannot read: larger than {max} bytes")]
    TooLarge { path: String, max: u64 },
    #[error("directory {path}: cannot read: is a {kind} (only a regular file or a FIFO is read)")]
    NotAFile { path: String, kind: &'static str },
    #[error(
        "directory {path}: cannot read: the FIFO gave no complete document within {timeout_ms} ms"
    )]
    ReadTimedOut { path: String, timeout_ms: u64 },
    #[error("directory {path}: malformed JSON: {reason}")]
    Malformed { path: String, reason: String },
    #[error("directory {path}: signature is not valid base64 of 64 bytes")]
    SignatureEncoding { path: String },
    #[error("directory {path}: bad signature (not signed by the configured key)")]
    BadSignature { path: String },
    #[error("directory {path}: payload: {reason}")]
    Payload { path: String, reason: String },
    #[error("directory {path}: the relay list is empty")]
    Empty { path: String },
    #[error("directory {path}: {count} relays, at most {max}")]
    TooMany {
        path: String,
        count: usize,
        max: usize,
    },
    #[error("directory {path}: relay {url:?} is not a ws:// or wss:// URL with a host")]
    NotWebSocketUrl { path: String, url: String },
    #[error("directory {path}: refresh_after_seconds={value} out of range {MIN_REFRESH_SECONDS}..={MAX_REFRESH_SECONDS}")]
    Refresh { path: String, value: u64 },
    #[error("directory {path}: payload has no {field} (required; sign it again with `switchyard sign-directory`)")]
    MissingField { path: String, field: &'static str },
    /// FO-S1: signed and valid, but replayed, a reused sequence with another list, or expired.
    #[error("directory {path}: {source}")]
    Stale {
        path: String,
        source: FreshnessError,
    },
    #[error("directory {path}: cannot check its expiry: the system clock is before 1970")]
    Clock { path: String },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("{what}: not valid base64 of 32 bytes")]
    Encoding { what: String },
    #[error("{what}: not a valid ed25519 public key")]
    NotAKey { what: String },
}

pub fn parse_public_key(what: &str, text: &str) -> Result<VerifyingKey, KeyError> {
    let bytes = decode_32(what, text)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::NotAKey {
        what: what.to_owned(),
    })
}

pub fn parse_secret_key(what: &str, text: &str) -> Result<SigningKey, KeyError> {
    Ok(SigningKey::from_bytes(&decode_32(what, text)?))
}

fn decode_32(what: &str, text: &str) -> Result<[u8; 32], KeyError> {
    let encoding = || KeyError::Encoding {
        what: what.to_owned(),
    };
    let bytes = BASE64.decode(text.trim()).map_err(|_| encoding())?;
    bytes.try_into().map_err(|_| encoding())
}

/// The base64 public key of a secret key (what `keygen` wrote beside it).
#[must_use]
pub fn public_key_of(key: &SigningKey) -> String {
    BASE64.encode(key.verifying_key().to_bytes())
}

/// A fresh key pair as base64 `(secret, public)`.
pub fn generate_key_pair() -> Result<(String, String), getrandom::Error> {
    let mut seed = [0u8; 32];
    crate::machine::fill_random(&mut seed)?;
    let key = SigningKey::from_bytes(&seed);
    Ok((
        BASE64.encode(key.to_bytes()),
        BASE64.encode(key.verifying_key().to_bytes()),
    ))
}

/// Signs `payload` into the on-disk document.
pub fn sign(key: &SigningKey, payload: &DirectoryPayload) -> SignedDirectory {
    let payload = serde_json::to_string(payload).unwrap_or_default();
    let signature = key.sign(payload.as_bytes());
    SignedDirectory {
        payload,
        signature: BASE64.encode(signature.to_bytes()),
    }
}

/// Verifies and validates a document's bytes. `path` only names the input in errors.
pub fn verify(path: &str, bytes: &[u8], key: &VerifyingKey) -> Result<Directory, DirectoryError> {
    let path = path.to_owned();
    let doc: SignedDirectory =
        serde_json::from_slice(bytes).map_err(|e| DirectoryError::Malformed {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    let signature = BASE64
        .decode(doc.signature.trim())
        .ok()
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
        .ok_or_else(|| DirectoryError::SignatureEncoding { path: path.clone() })?;
    key.verify(doc.payload.as_bytes(), &Signature::from_bytes(&signature))
        .map_err(|_| DirectoryError::BadSignature { path: path.clone() })?;
    let payload: ParsedPayload =
        serde_json::from_str(&doc.payload).map_err(|e| DirectoryError::Payload {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    validate(&path, payload)
}

fn validate(path: &str, payload: ParsedPayload) -> Result<Directory, DirectoryError> {
    let path = path.to_owned();
    let missing = |field| DirectoryError::MissingField {
        path: path.clone(),
        field,
    };
    let sequence = payload.sequence.ok_or_else(|| missing("sequence"))?;
    let expires_at_unix_s = payload
        .expires_at_unix_s
        .ok_or_else(|| missing("expires_at_unix_s"))?;
    let relays: Vec<RelayUrl> = payload.relays.iter().map(RelayUrl::new).collect();
    // The list rule (empty, too long) is the core's, decided there once; this names the file.
    check_candidate_list(&relays).map_err(|why| match why {
        DirectoryRejection::Empty => DirectoryError::Empty { path: path.clone() },
        DirectoryRejection::TooMany { count, max } => DirectoryError::TooMany {
            path: path.clone(),
            count,
            max,
        },
    })?;
    if let Some(url) = payload.relays.iter().find(|url| !is_ws_url(url)) {
        return Err(DirectoryError::NotWebSocketUrl {
            path: path.clone(),
            url: url.clone(),
        });
    }
    let seconds = payload.refresh_after_seconds;
    if !(MIN_REFRESH_SECONDS..=MAX_REFRESH_SECONDS).contains(&seconds) {
        return Err(DirectoryError::Refresh {
            path,
            value: seconds,
        });
    }
    Ok(Directory {
        relays,
        refresh_after: Duration::from_secs(seconds),
        sequence,
        expires_at_unix_s,
    })
}

/// FO-S1 for a verified directory: the decision is the core's, this only names the file.
pub fn check_fresh(
    path: &str,
    directory: &Directory,
    last_accepted: Option<&AcceptedDirectory>,
    now_unix_s: u64,
) -> Result<(), DirectoryError> {
    check_freshness(
        last_accepted,
        directory.sequence,
        &directory.relays,
        directory.expires_at_unix_s,
        now_unix_s,
    )
    .map_err(|source| DirectoryError::Stale {
        path: path.to_owned(),
        source,
    })
}

/// The wall clock in Unix seconds, or `None` if it is before 1970.
pub fn wall_clock_unix_s() -> Option<u64> {
    Some(crate::machine::unix_ms() / 1000).filter(|&s| s > 0)
}

/// A relay URL must be `ws://` or `wss://` with a host.
pub fn is_ws_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<Uri>() else {
        return false;
    };
    matches!(uri.scheme_str(), Some("ws") | Some("wss"))
        && uri.host().is_some_and(|h| !h.is_empty())
}

/// Reads and verifies the file at `path` (not the freshness: see [`check_fresh`]).
pub async fn load(path: &Path, key: &VerifyingKey) -> Result<Directory, DirectoryError> {
    let bytes = read_bounded(path).await?;
    verify(&path.display().to_string(), &bytes, key)
}

/// Reads at most `MAX_DIRECTORY_BYTES` from `path` without ever blocking on it (SEC-4): the
/// size in the metadata is not trusted (a device or `/proc` file says 0), so the bound is on
/// the bytes read.
pub async fn read_bounded(path: &Path) -> Result<Vec<u8>, DirectoryError> {
    let name = path.display().to_string();
    let owned = path.to_owned();
    let blocking_name = name.clone();
    // Opening and reading a regular file are blocking calls; neither can wait on a peer, as
    // the open is non-blocking (a FIFO swapped in is not waited on).
    let opened = crate::machine::blocking(move || open_directory(&owned, &blocking_name))
        .await
        .map_err(|e| DirectoryError::Read {
            path: name.clone(),
            reason: e.to_string(),
        })??;
    match opened {
        Opened::Bytes(bytes) => Ok(bytes),
        #[cfg(unix)]
        Opened::Fifo(file) => read_fifo(&name, file).await,
    }
}

enum Opened {
    Bytes(Vec<u8>),
    #[cfg(unix)]
    Fifo(std::fs::File),
}

fn read_error(name: &str, error: &std::io::Error) -> DirectoryError {
    DirectoryError::Read {
        path: name.to_owned(),
        reason: error.to_string(),
    }
}

/// Whether `bytes` (read through `take(MAX + 1)`) went over the bound.
fn bounded(name: &str, bytes: Vec<u8>) -> Result<Vec<u8>, DirectoryError> {
    if u64::try_from(bytes.len()).map_or(true, |n| n > MAX_DIRECTORY_BYTES) {
        return Err(DirectoryError::TooLarge {
            path: name.to_owned(),
            max: MAX_DIRECTORY_BYTES,
        });
    }
    Ok(bytes)
}

fn open_directory(path: &Path, name: &str) -> Result<Opened, DirectoryError> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Non-blocking: opening a FIFO does not wait for a writer; no controlling terminal.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOCTTY,
    );
    let file = options.open(path).map_err(|e| read_error(name, &e))?;
    // The type of what was opened, not of what the path named a moment earlier.
    let kind = file
        .metadata()
        .map_err(|e| read_error(name, &e))?
        .file_type();
    if kind.is_file() {
        let mut bytes = Vec::new();
        file.take(MAX_DIRECTORY_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| read_error(name, &e))?;
        return bounded(name, bytes).map(Opened::Bytes);
    }
    #[cfg(unix)]
    if std::os::unix::fs::FileTypeExt::is_fifo(&kind) {
        return Ok(Opened::Fifo(file));
    }
    Err(DirectoryError::NotAFile {
        path: name.to_owned(),
        kind: describe(kind),
    })
}

fn describe(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        return "directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() {
            return "character device";
        }
        if kind.is_block_device() {
            return "block device";
        }
        if kind.is_socket() {
            return "socket";
        }
    }
    "special file"
}

/// A FIFO through tokio's pipe receiver: the read waits in the runtime (cancelled with the
/// task on shutdown, no blocking thread held), is bounded in bytes and in time.
#[cfg(unix)]
async fn read_fifo(name: &str, file: std::fs::File) -> Result<Vec<u8>, DirectoryError> {
    use tokio::io::AsyncReadExt;
    let receiver =
        tokio::net::unix::pipe::Receiver::from_file(file).map_err(|e| read_error(name, &e))?;
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(
        FIFO_READ_TIMEOUT,
        receiver
            .take(MAX_DIRECTORY_BYTES + 1)
            .read_to_end(&mut bytes),
    )
    .await;
    match read {
        Err(_) => Err(DirectoryError::ReadTimedOut {
            path: name.to_owned(),
            timeout_ms: u64::try_from(FIFO_READ_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
        }),
        Ok(Err(e)) => Err(read_error(name, &e)),
        Ok(Ok(0)) => Err(DirectoryError::Read {
            path: name.to_owned(),
            reason: "the FIFO was closed without data".to_owned(),
        }),
        Ok(Ok(_)) => bounded(name, bytes),
    }
}

/// A directory update for the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryUpdate {
    pub relays: Vec<RelayUrl>,
    pub source: DirectorySource,
}

/// Where the candidate list comes from.
#[derive(Debug, Clone)]
pub enum DirectoryConfig {
    /// `DSHS_RELAY_URL` / `--url`: one pinned candidate, no refresh.
    Pinned(RelayUrl),
    /// A signed file, re-read every `refresh_after_seconds` of the last good document.
    Signed { path: PathBuf, key: VerifyingKey },
}

/// Feeds `updates` until it closes: the pinned URL once, or the signed file now and at every
/// refresh. A bad document is logged and the last good list stays (nothing is sent).
pub async fn run_directory(config: DirectoryConfig, updates: mpsc::Sender<DirectoryUpdate>) {
    match config {
        DirectoryConfig::Pinned(url) => {
            let _ = updates
                .send(DirectoryUpdate {
                    relays: vec![url],
                    source: DirectorySource::Env,
                })
                .await;
        }
        DirectoryConfig::Signed { path, key } => {
            // Until a good document arrives, retry at the shortest interval.
            let mut refresh_after = Duration::from_secs(MIN_REFRESH_SECONDS);
            // FO-S1: in memory only; a refused document never changes it.
            let mut last_accepted: Option<AcceptedDirectory> = None;
            let name = path.display().to_string();
            // OPS-2: an error is logged when it changes, not at every retry.
            let mut last_error: Option<String> = None;
            loop {
                let loaded = load(&path, &key).await.and_then(|directory| {
                    let now = wall_clock_unix_s()
                        .ok_or_else(|| DirectoryError::Clock { path: name.clone() })?;
                    check_fresh(&name, &directory, last_accepted.as_ref(), now)?;
                    Ok(directory)
                });
                match loaded {
                    Ok(directory) => {
                        if last_error.take().is_some() {
                            tracing::info!(path = %name, sequence = directory.sequence, "directory accepted again");
                        }
                        last_accepted = Some(AcceptedDirectory {
                            sequence: directory.sequence,
                            relays: directory.relays.clone(),
                            expires_at_unix_s: directory.expires_at_unix_s,
                        });
                        refresh_after = directory.refresh_after;
                        let update = DirectoryUpdate {
                            relays: directory.relays,
                            source: DirectorySource::Signed,
                        };
                        if updates.send(update).await.is_err() {
                            return;
                        }
                    }
                    Err(error) => {
                        let text = error.to_string();
                        if last_error.as_deref() != Some(text.as_str()) {
                            if last_accepted.is_some() {
                                tracing::error!(%error, "directory refresh rejected; keeping the last good list");
                            } else {
                                tracing::error!(%error, "directory rejected and none accepted yet: the client has no relay to use; retrying");
                            }
                        }
                        last_error = Some(text);
                    }
                }
                tokio::select! {
                    biased;
                    () = updates.closed() => return,
                    () = tokio::time::sleep(refresh_after) => {}
                }
            }
        }
    }
}
