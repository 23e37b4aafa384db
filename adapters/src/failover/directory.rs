//! The signed relay directory: an ed25519-signed JSON document with the ordered relay list and
//! a refresh interval.
//!
//! On disk:
//! ```json
//! {"payload": "<the payload JSON, as a string>", "signature": "<base64 ed25519 over payload>"}
//! ```
//! The payload is signed as the exact bytes of that string, so no canonical JSON is needed:
//! `{"relays": ["wss://…", …], "refresh_after_seconds": 600}`. Unknown payload fields are
//! ignored (older clients keep working); known fields of the wrong type are errors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use switchyard_core::failover::{DirectorySource, RelayUrl, MAX_CANDIDATES};
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
}

/// A verified, validated directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directory {
    pub relays: Vec<RelayUrl>,
    pub refresh_after: Duration,
}

/// Bounds on the refresh interval: not a busy loop, not "never".
pub const MIN_REFRESH_SECONDS: u64 = 1;
pub const MAX_REFRESH_SECONDS: u64 = 7 * 24 * 3600;
/// A directory file larger than this is refused before parsing.
pub const MAX_DIRECTORY_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DirectoryError {
    #[error("directory {path}: cannot read: {reason}")]
    Read { path: String, reason: String },
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

/// A fresh key pair as base64 `(secret, public)`.
pub fn generate_key_pair() -> Result<(String, String), getrandom::Error> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)?;
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
    let payload: DirectoryPayload =
        serde_json::from_str(&doc.payload).map_err(|e| DirectoryError::Payload {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    validate(&path, payload)
}

fn validate(path: &str, payload: DirectoryPayload) -> Result<Directory, DirectoryError> {
    let path = path.to_owned();
    if payload.relays.is_empty() {
        return Err(DirectoryError::Empty { path });
    }
    if payload.relays.len() > MAX_CANDIDATES {
        return Err(DirectoryError::TooMany {
            path,
            count: payload.relays.len(),
            max: MAX_CANDIDATES,
        });
    }
    let mut relays = Vec::with_capacity(payload.relays.len());
    for url in &payload.relays {
        if !is_ws_url(url) {
            return Err(DirectoryError::NotWebSocketUrl {
                path: path.clone(),
                url: url.clone(),
            });
        }
        relays.push(RelayUrl::new(url));
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
    })
}

/// A relay URL must be `ws://` or `wss://` with a host.
pub fn is_ws_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<Uri>() else {
        return false;
    };
    matches!(uri.scheme_str(), Some("ws") | Some("wss"))
        && uri.host().is_some_and(|h| !h.is_empty())
}

/// Reads and verifies the file at `path`.
pub async fn load(path: &Path, key: &VerifyingKey) -> Result<Directory, DirectoryError> {
    let name = path.display().to_string();
    let read_error = |reason: String| DirectoryError::Read {
        path: name.clone(),
        reason,
    };
    let metadata = tokio::fs::metadata(path)
        .await
        .map_err(|e| read_error(e.to_string()))?;
    if metadata.len() > MAX_DIRECTORY_BYTES {
        return Err(read_error(format!(
            "{} bytes, at most {MAX_DIRECTORY_BYTES}",
            metadata.len()
        )));
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| read_error(e.to_string()))?;
    verify(&name, &bytes, key)
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
            loop {
                match load(&path, &key).await {
                    Ok(directory) => {
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
                        tracing::error!(%error, "directory refresh rejected; keeping the last good list")
                    }
                }
                tokio::select! {
                    () = updates.closed() => return,
                    () = tokio::time::sleep(refresh_after) => {}
                }
            }
        }
    }
}
