//! Authentication of the cell's internal endpoint (SEC-2: director requests, emergency drain and
//! undrain, stats) and of desktop control sockets.
//!
//! # Internal requests (SEC-2)
//!
//! Every internal request carries six headers: [`CELL_HEADER`] (the target cell id, decimal),
//! [`INCARNATION_HEADER`] (the target cell process's lease incarnation, decimal: SEC-2a),
//! [`TIMESTAMP_HEADER`] (Unix ms, decimal), [`NONCE_HEADER`] (32 lowercase hex digits: 128
//! random bits), [`KEY_HEADER`] (the key id: 16 lowercase hex digits) and [`SIGNATURE_HEADER`]
//! = lowercase hex HMAC-SHA256(cell key, canonical string), where the canonical string is
//!
//! ```text
//! switchyard-internal:v2 "\n" METHOD "\n" PATH "\n" CELL "\n" INCARNATION "\n" TIMESTAMP "\n" NONCE "\n" BODY
//! ```
//!
//! (METHOD upper case, PATH the request's path and query as sent, CELL, INCARNATION and
//! TIMESTAMP in decimal without leading zeros, BODY the raw bytes). No field but the last can
//! hold a newline, so the string is unambiguous. The cell verifies with the method and path it
//! actually received, its own cell id and incarnation, its own clock (within a window) and its
//! keys; then it remembers the nonce for as long as the timestamp stays inside the window. The
//! claim and nonce decisions are the core's (`switchyard_core::handoff::internal_auth`); the
//! MAC is computed here.
//!
//! The key of cell N is HMAC-SHA256(master secret, "switchyard-cell-key:v1:" N) ([`Secret::
//! cell_key`]): the director and operators hold the master; a cell may hold only its own key,
//! which cannot sign for another cell. A cell accepts at most two keys (current and previous,
//! during a roll: [`KeyRing`]); the key id, a fingerprint of the key, picks one without trying
//! both.
//!
//! # Desktop tokens
//!
//! hex HMAC-SHA256(desktop secret, "desktop-token:v1:" + host id), as a bearer token.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
pub use switchyard_core::handoff::ReplayCache;
use switchyard_core::handoff::{check_claim, Claim, ClaimRefusal, Identity, NonceRefusal};
use switchyard_core::handoff::{CellId, Incarnation};

type HmacSha256 = Hmac<Sha256>;

pub const CELL_HEADER: &str = "x-switchyard-cell";
/// SEC-2a: the incarnation of the cell process the request is for.
pub const INCARNATION_HEADER: &str = "x-switchyard-incarnation";
pub const TIMESTAMP_HEADER: &str = "x-switchyard-timestamp";
pub const NONCE_HEADER: &str = "x-switchyard-nonce";
pub const KEY_HEADER: &str = "x-switchyard-key";
pub const SIGNATURE_HEADER: &str = "x-switchyard-signature";

/// Versions the canonical string: a future form can never verify as this one (v2 added the
/// incarnation, SEC-2a; a v1 signature never verifies as v2).
const CANONICAL_TAG: &[u8] = b"switchyard-internal:v2";
/// Domain separation of cell keys from every other use of the master secret.
const CELL_KEY_LABEL: &[u8] = b"switchyard-cell-key:v1:";
const KEY_ID_LABEL: &[u8] = b"switchyard-key-id:v1";

/// Shortest accepted secret: a typo'd empty or tiny env var never becomes a key.
pub const MIN_SECRET_BYTES: usize = 16;
/// A nonce is 128 random bits in lowercase hex.
pub const NONCE_HEX_LEN: usize = 32;
/// A key id is 64 bits of the key's fingerprint in lowercase hex.
pub const KEY_ID_HEX_LEN: usize = 16;
const CELL_KEY_BYTES: usize = 32;
/// A cell verifies with at most a current and a previous key.
pub const MAX_CELL_KEYS: usize = 2;
/// Default bound of a cell's replay cache (nonces of verified requests inside the window).
pub const DEFAULT_REPLAY_CACHE_CAP: usize = 65_536;

/// A named problem with key material, found before anything starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{what} must be at least {MIN_SECRET_BYTES} bytes")]
    TooShort { what: String },
    #[error("{what} is not a cell key ({} lowercase hex digits, as `switchyard handoff cell-key` prints)", CELL_KEY_BYTES * 2)]
    BadCellKey { what: String },
    #[error("{what} holds no key")]
    NoKey { what: String },
    #[error("{what} holds more than {MAX_CELL_KEYS} keys (a current and a previous one)")]
    TooManyKeys { what: String },
    #[error("{what}: key id {id} is given twice")]
    DuplicateKey { what: String, id: String },
    /// SEC-2a / SEC-4: every key in the file is marked (by `switchyard handoff cell-key`'s
    /// comment line) as another cell's: this cell would refuse every signed request.
    #[error("{what} holds no key of cell {cell} (its keys are marked for cell {others}): run `switchyard handoff cell-key --cell {cell}` for this cell's file")]
    NotThisCell {
        what: String,
        cell: u32,
        others: String,
    },
}

/// A shared secret: a master secret of internal requests, or the desktop secret (never logged).
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Why a desktop token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing credentials")]
    Missing,
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("timestamp outside the accepted window")]
    Stale,
    #[error("bad signature or secret")]
    Bad,
}

fn hmac(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length: this cannot fail.
    match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts any key length"),
    }
}

impl Secret {
    /// At least [`MIN_SECRET_BYTES`] bytes; `what` names the flag or variable in the error.
    pub fn new(bytes: &[u8], what: &str) -> Result<Secret, KeyError> {
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(KeyError::TooShort { what: what.into() });
        }
        Ok(Secret(bytes.to_vec()))
    }

    fn mac(&self) -> HmacSha256 {
        hmac(&self.0)
    }

    /// SEC-2: the key of one cell, HMAC-SHA256(master, "switchyard-cell-key:v1:" N). A cell
    /// given only this key can verify requests for itself and sign for no other cell.
    #[must_use]
    pub fn cell_key(&self, cell: CellId) -> CellKey {
        let mut m = self.mac();
        m.update(CELL_KEY_LABEL);
        m.update(cell.0.to_string().as_bytes());
        CellKey::from_bytes(m.finalize().into_bytes().into())
    }

    /// The control-socket token of one desktop host.
    #[must_use]
    pub fn desktop_token(&self, host: u64) -> String {
        let mut m = self.mac();
        m.update(b"desktop-token:v1:");
        m.update(host.to_string().as_bytes());
        hex(&m.finalize().into_bytes())
    }

    /// Constant-time check of a desktop's `Authorization: Bearer <token>`.
    pub fn verify_desktop(&self, host: u64, authorization: Option<&str>) -> Result<(), AuthError> {
        let token = authorization
            .ok_or(AuthError::Missing)?
            .strip_prefix("Bearer ")
            .ok_or(AuthError::Malformed("authorization"))?;
        let want = self.desktop_token(host);
        if bool::from(token.trim().as_bytes().ct_eq(want.as_bytes())) {
            Ok(())
        } else {
            Err(AuthError::Bad)
        }
    }
}

/// SEC-2: the key one cell verifies internal requests with (and signers sign them with).
#[derive(Clone)]
pub struct CellKey {
    key: [u8; CELL_KEY_BYTES],
    id: String,
}

impl std::fmt::Debug for CellKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CellKey({})", self.id)
    }
}

/// What a signature covers: everything but the key.
#[derive(Debug, Clone, Copy)]
pub struct SignedParts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub cell: CellId,
    /// SEC-2a: the target cell process's incarnation.
    pub incarnation: Incarnation,
    pub timestamp_ms: u64,
    pub nonce: &'a str,
    pub body: &'a [u8],
}

impl SignedParts<'_> {
    fn feed(&self, m: &mut HmacSha256) {
        for field in [
            CANONICAL_TAG,
            self.method.as_bytes(),
            self.path.as_bytes(),
            self.cell.0.to_string().as_bytes(),
            self.incarnation.0.to_string().as_bytes(),
            self.timestamp_ms.to_string().as_bytes(),
            self.nonce.as_bytes(),
        ] {
            m.update(field);
            m.update(b"\n");
        }
        m.update(self.body);
    }
}

impl CellKey {
    fn from_bytes(key: [u8; CELL_KEY_BYTES]) -> CellKey {
        let mut m = hmac(&key);
        m.update(KEY_ID_LABEL);
        let id = hex(&m.finalize().into_bytes()[..KEY_ID_HEX_LEN / 2]);
        CellKey { key, id }
    }

    /// The form `switchyard handoff cell-key` prints: 64 lowercase hex digits.
    pub fn from_hex(text: &str, what: &str) -> Result<CellKey, KeyError> {
        let bad = || KeyError::BadCellKey { what: what.into() };
        if text.len() != CELL_KEY_BYTES * 2 || !is_lower_hex(text) {
            return Err(bad());
        }
        let bytes = unhex(text).ok_or_else(bad)?;
        let key: [u8; CELL_KEY_BYTES] = bytes.try_into().map_err(|_| bad())?;
        Ok(CellKey::from_bytes(key))
    }

    #[must_use]
    pub fn to_hex(&self) -> String {
        hex(&self.key)
    }

    /// A fingerprint of the key (not secret): the [`KEY_HEADER`] value.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Lowercase hex HMAC-SHA256 of the canonical string.
    #[must_use]
    pub fn sign(&self, parts: &SignedParts<'_>) -> String {
        let mut m = hmac(&self.key);
        parts.feed(&mut m);
        hex(&m.finalize().into_bytes())
    }

    /// The six headers of a signed internal request.
    #[must_use]
    pub fn signed_headers(&self, parts: &SignedParts<'_>) -> Vec<(&'static str, String)> {
        vec![
            (CELL_HEADER, parts.cell.0.to_string()),
            (INCARNATION_HEADER, parts.incarnation.0.to_string()),
            (TIMESTAMP_HEADER, parts.timestamp_ms.to_string()),
            (NONCE_HEADER, parts.nonce.to_owned()),
            (KEY_HEADER, self.id.clone()),
            (SIGNATURE_HEADER, self.sign(parts)),
        ]
    }

    fn verify(&self, parts: &SignedParts<'_>, signature: &[u8]) -> bool {
        let mut m = hmac(&self.key);
        parts.feed(&mut m);
        m.verify_slice(signature).is_ok()
    }
}

/// A fresh nonce: 128 bits from the OS, as [`NONCE_HEX_LEN`] lowercase hex digits.
pub fn fresh_nonce() -> Result<String, String> {
    let mut bytes = [0u8; NONCE_HEX_LEN / 2];
    crate::machine::fill_random(&mut bytes)
        .map_err(|e| format!("no randomness for a nonce: {e}"))?;
    Ok(hex(&bytes))
}

/// Sign an internal request to `cell`'s process `incarnation` with the master secret's key for
/// the cell: a fresh nonce, the given timestamp. What the director (incarnation from the store)
/// and the operator commands (incarnation from the cell's `/v1/capabilities`) send.
pub fn sign_request(
    master: &Secret,
    method: &str,
    path: &str,
    cell: CellId,
    incarnation: Incarnation,
    timestamp_ms: u64,
    body: &[u8],
) -> Result<Vec<(&'static str, String)>, String> {
    let nonce = fresh_nonce()?;
    Ok(master.cell_key(cell).signed_headers(&SignedParts {
        method,
        path,
        cell,
        incarnation,
        timestamp_ms,
        nonce: &nonce,
        body,
    }))
}

/// SEC-2: why an internal request was refused. [`RequestRefusal::name`] is the stable word the cell
/// answers (`{"refused": name}`), logs and counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestRefusal {
    /// A signature header is absent (the old bearer form lands here).
    #[error("missing {0}")]
    Missing(&'static str),
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// Signed for another cell.
    #[error("signed for another cell")]
    WrongCell,
    /// SEC-2a: signed for another process of this cell (replayed across a restart).
    #[error("signed for another incarnation of this cell")]
    WrongIncarnation,
    /// The timestamp is outside the window around the cell's clock.
    #[error("timestamp outside the accepted window")]
    Stale,
    /// No key of this cell has that id (another cell's key, or a key rolled out).
    #[error("unknown key id")]
    UnknownKey,
    /// The signature does not cover this method, path, cell, timestamp, nonce and body.
    #[error("bad signature")]
    BadSignature,
    /// The nonce was seen inside the window.
    #[error("nonce already used")]
    Replayed,
    /// The replay cache is full of live nonces: refused rather than forget one.
    #[error("replay cache full")]
    ReplayCacheFull,
}

impl RequestRefusal {
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            RequestRefusal::Missing(_) => "missing_credentials",
            RequestRefusal::Malformed(_) => "malformed_credentials",
            RequestRefusal::WrongCell => "wrong_cell",
            RequestRefusal::WrongIncarnation => "wrong_incarnation",
            RequestRefusal::Stale => "stale_timestamp",
            RequestRefusal::UnknownKey => "unknown_key",
            RequestRefusal::BadSignature => "bad_signature",
            RequestRefusal::Replayed => "replayed",
            RequestRefusal::ReplayCacheFull => "replay_cache_full",
        }
    }
}

/// One received internal request, as the cell saw it: its own method and path, the header
/// values (absent or not text: `None`), the body.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub cell: Option<&'a str>,
    pub incarnation: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub nonce: Option<&'a str>,
    pub key: Option<&'a str>,
    pub signature: Option<&'a str>,
    pub body: &'a [u8],
}

impl<'a> Received<'a> {
    /// A request as received, the six SEC-2 headers read through `header` (absent or not
    /// text: `None`).
    pub fn from_headers(
        method: &'a str,
        path: &'a str,
        body: &'a [u8],
        header: impl Fn(&'static str) -> Option<&'a str>,
    ) -> Received<'a> {
        Received {
            method,
            path,
            cell: header(CELL_HEADER),
            incarnation: header(INCARNATION_HEADER),
            timestamp: header(TIMESTAMP_HEADER),
            nonce: header(NONCE_HEADER),
            key: header(KEY_HEADER),
            signature: header(SIGNATURE_HEADER),
            body,
        }
    }
}

/// A request whose signature verified: what the replay cache records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub nonce: u128,
    /// Past this instant the timestamp is stale, so the nonce can be forgotten.
    pub expires_ms: u64,
    pub cell: CellId,
}

impl From<ClaimRefusal> for RequestRefusal {
    fn from(r: ClaimRefusal) -> RequestRefusal {
        match r {
            ClaimRefusal::WrongCell => RequestRefusal::WrongCell,
            ClaimRefusal::WrongIncarnation => RequestRefusal::WrongIncarnation,
            ClaimRefusal::Stale => RequestRefusal::Stale,
        }
    }
}

impl From<NonceRefusal> for RequestRefusal {
    fn from(r: NonceRefusal) -> RequestRefusal {
        match r {
            NonceRefusal::Replayed => RequestRefusal::Replayed,
            NonceRefusal::Full => RequestRefusal::ReplayCacheFull,
        }
    }
}

/// SEC-2: the keys one cell verifies with: a current one and, during a roll, a previous one.
#[derive(Clone, Debug)]
pub struct KeyRing {
    keys: Vec<CellKey>,
}

impl KeyRing {
    /// One key, or two during a roll (the same key twice counts once).
    #[must_use]
    pub fn new(current: CellKey, previous: Option<CellKey>) -> KeyRing {
        let mut keys = vec![current];
        if let Some(p) = previous {
            if p.id != keys[0].id {
                keys.push(p);
            }
        }
        KeyRing { keys }
    }

    /// The keys of `cell` derived from the current and (optionally) previous master secret.
    #[must_use]
    pub fn from_secrets(cell: CellId, current: &Secret, previous: Option<&Secret>) -> KeyRing {
        KeyRing::new(current.cell_key(cell), previous.map(|p| p.cell_key(cell)))
    }

    /// A keys file: one cell key per line (as `switchyard handoff cell-key` prints it), blank
    /// lines and `#` comments ignored; one or two keys.
    pub fn parse(text: &str, what: &str) -> Result<KeyRing, KeyError> {
        KeyRing::parse_file(text, what, None)
    }

    /// A keys file as cell `cell` loads it. `switchyard handoff cell-key` marks each key with a
    /// comment line `# switchyard cell key: cell N, key id ID`; a key marked for another cell
    /// is not this cell's (a file shared by two cells gives each only its own key), and a file
    /// whose keys are all marked for other cells is refused ([`KeyError::NotThisCell`]) rather
    /// than a cell started that would refuse every request `unknown_key`. An unmarked key is
    /// taken as given (nothing says whose it is).
    pub fn parse_for(text: &str, what: &str, cell: CellId) -> Result<KeyRing, KeyError> {
        KeyRing::parse_file(text, what, Some(cell))
    }

    fn parse_file(text: &str, what: &str, cell: Option<CellId>) -> Result<KeyRing, KeyError> {
        let marks: Vec<(u32, &str)> = text.lines().filter_map(key_mark).collect();
        let mut keys: Vec<CellKey> = Vec::new();
        let mut all_ids: Vec<String> = Vec::new();
        let mut others: BTreeSet<u32> = BTreeSet::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let key = CellKey::from_hex(line, &format!("{what} line {}", n + 1))?;
            if all_ids.contains(&key.id) {
                return Err(KeyError::DuplicateKey {
                    what: what.into(),
                    id: key.id,
                });
            }
            all_ids.push(key.id.clone());
            let marked: Vec<u32> = marks
                .iter()
                .filter(|(_, id)| *id == key.id)
                .map(|(c, _)| *c)
                .collect();
            if let Some(own) = cell {
                if !marked.is_empty() && !marked.contains(&own.0) {
                    others.extend(marked);
                    continue;
                }
            }
            if keys.len() == MAX_CELL_KEYS {
                return Err(KeyError::TooManyKeys { what: what.into() });
            }
            keys.push(key);
        }
        if keys.is_empty() {
            if let (Some(own), false) = (cell, others.is_empty()) {
                let others: Vec<String> = others.iter().map(u32::to_string).collect();
                return Err(KeyError::NotThisCell {
                    what: what.into(),
                    cell: own.0,
                    others: others.join(", "),
                });
            }
            return Err(KeyError::NoKey { what: what.into() });
        }
        Ok(KeyRing { keys })
    }

    /// The ids of the keys, current first (logs, diagnostics).
    #[must_use]
    pub fn ids(&self) -> Vec<String> {
        self.keys.iter().map(|k| k.id.clone()).collect()
    }

    /// Verify a request addressed to the cell process `own` at `now_ms`. Cheap checks first;
    /// the MAC last. Pure: the caller records the nonce ([`ReplayCache::admit`]) only once this
    /// returns `Ok`. Whether the claim (cell, incarnation, timestamp) is this process's and
    /// timely is the core's [`check_claim`].
    pub fn verify(
        &self,
        req: &Received<'_>,
        own: Identity,
        now_ms: u64,
        window_ms: u64,
    ) -> Result<Verified, RequestRefusal> {
        let cell = req.cell.ok_or(RequestRefusal::Missing(CELL_HEADER))?;
        let incarnation = req
            .incarnation
            .ok_or(RequestRefusal::Missing(INCARNATION_HEADER))?;
        let timestamp = req
            .timestamp
            .ok_or(RequestRefusal::Missing(TIMESTAMP_HEADER))?;
        let nonce = req.nonce.ok_or(RequestRefusal::Missing(NONCE_HEADER))?;
        let key = req.key.ok_or(RequestRefusal::Missing(KEY_HEADER))?;
        let signature = req
            .signature
            .ok_or(RequestRefusal::Missing(SIGNATURE_HEADER))?;
        let cell = CellId(parse_decimal(cell, 10).ok_or(RequestRefusal::Malformed(CELL_HEADER))?);
        let incarnation = Incarnation(
            parse_decimal(incarnation, 20).ok_or(RequestRefusal::Malformed(INCARNATION_HEADER))?,
        );
        let timestamp_ms: u64 =
            parse_decimal(timestamp, 20).ok_or(RequestRefusal::Malformed(TIMESTAMP_HEADER))?;
        if nonce.len() != NONCE_HEX_LEN || !is_lower_hex(nonce) {
            return Err(RequestRefusal::Malformed(NONCE_HEADER));
        }
        let nonce_value =
            u128::from_str_radix(nonce, 16).map_err(|_| RequestRefusal::Malformed(NONCE_HEADER))?;
        if key.len() != KEY_ID_HEX_LEN || !is_lower_hex(key) {
            return Err(RequestRefusal::Malformed(KEY_HEADER));
        }
        if signature.len() != 64 || !is_lower_hex(signature) {
            return Err(RequestRefusal::Malformed(SIGNATURE_HEADER));
        }
        let signature = unhex(signature).ok_or(RequestRefusal::Malformed(SIGNATURE_HEADER))?;
        let claim = Claim {
            cell,
            incarnation,
            timestamp_ms,
        };
        let expires_ms = check_claim(claim, own, now_ms, window_ms)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.id == key)
            .ok_or(RequestRefusal::UnknownKey)?;
        let parts = SignedParts {
            method: req.method,
            path: req.path,
            cell,
            incarnation,
            timestamp_ms,
            nonce,
            body: req.body,
        };
        if !key.verify(&parts, &signature) {
            return Err(RequestRefusal::BadSignature);
        }
        Ok(Verified {
            nonce: nonce_value,
            expires_ms,
            cell,
        })
    }
}

/// SEC-2: a cell's internal-request guard: its keys (replaceable while it runs, for a roll
/// without a restart) and its replay cache. Clones share both.
#[derive(Clone)]
pub struct InternalGuard {
    keys: Arc<RwLock<KeyRing>>,
    replay: Arc<Mutex<ReplayCache>>,
}

impl std::fmt::Debug for InternalGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InternalGuard")
            .field("keys", &self.key_ids())
            .finish_non_exhaustive()
    }
}

impl InternalGuard {
    #[must_use]
    pub fn new(keys: KeyRing, replay_cap: usize) -> InternalGuard {
        InternalGuard {
            keys: Arc::new(RwLock::new(keys)),
            replay: Arc::new(Mutex::new(ReplayCache::new(replay_cap))),
        }
    }

    /// Replace the keys (a roll); nonces already seen stay seen.
    pub fn set_keys(&self, keys: KeyRing) {
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = keys;
    }

    #[must_use]
    pub fn key_ids(&self) -> Vec<String> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).ids()
    }

    /// Verify, then record the nonce (only of a request whose signature verified, so nobody
    /// without a key can fill the cache).
    pub fn check(
        &self,
        req: &Received<'_>,
        own: Identity,
        now_ms: u64,
        window_ms: u64,
    ) -> Result<(), RequestRefusal> {
        let verified = self
            .keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .verify(req, own, now_ms, window_ms)?;
        self.replay
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(verified.nonce, verified.expires_ms, now_ms)
            .map_err(RequestRefusal::from)
    }

    /// Live nonces held (tests, diagnostics).
    #[must_use]
    pub fn replay_len(&self) -> usize {
        self.replay.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// `# switchyard cell key: cell N, key id ID` (what `switchyard handoff cell-key` prints above
/// a key): `(N, ID)`.
fn key_mark(line: &str) -> Option<(u32, &str)> {
    let rest = line.trim().strip_prefix('#')?.trim();
    let rest = rest.strip_prefix("switchyard cell key: cell ")?;
    let (cell, rest) = rest.split_once(',')?;
    let id = rest.trim().strip_prefix("key id ")?.trim();
    Some((cell.trim().parse().ok()?, id))
}

/// Digits only, no sign, no leading zero (one canonical text per value), at most `max_len`.
fn parse_decimal<T: std::str::FromStr>(s: &str, max_len: usize) -> Option<T> {
    let canonical = !s.is_empty()
        && s.len() <= max_len
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'));
    if canonical {
        s.parse().ok()
    } else {
        None
    }
}

/// Whether every byte of `s` is a lowercase hexadecimal digit (the form of keys and tokens).
pub fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 256 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: CellId = CellId(1);
    const INC: Incarnation = Incarnation(7);
    const OWN: Identity = Identity {
        cell: ME,
        incarnation: INC,
    };
    const NOW: u64 = 1_700_000_000_000;
    const WINDOW: u64 = 30_000;
    const NONCE: &str = "0123456789abcdef0123456789abcdef";

    fn master() -> Secret {
        Secret::new(b"0123456789abcdef-secret", "test").expect("secret")
    }

    fn parts() -> SignedParts<'static> {
        SignedParts {
            method: "POST",
            path: "/internal/v1/drain",
            cell: ME,
            incarnation: INC,
            timestamp_ms: NOW,
            nonce: NONCE,
            body: b"{\"host\":7}",
        }
    }

    /// The request a cell sees when `headers` arrive with `method`, `path` and `body`.
    fn received<'a>(
        headers: &'a [(&'static str, String)],
        method: &'a str,
        path: &'a str,
        body: &'a [u8],
    ) -> Received<'a> {
        let h = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.as_str())
        };
        Received::from_headers(method, path, body, h)
    }

    fn ring() -> KeyRing {
        KeyRing::from_secrets(ME, &master(), None)
    }

    fn check(
        p: &SignedParts<'_>,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<(), RequestRefusal> {
        let headers = master().cell_key(p.cell).signed_headers(p);
        ring()
            .verify(&received(&headers, method, path, body), OWN, NOW, WINDOW)
            .map(|_| ())
    }

    #[test]
    fn sec_2_a_signed_request_verifies_as_sent() {
        let p = parts();
        assert_eq!(check(&p, p.method, p.path, p.body), Ok(()));
    }

    #[test]
    fn sec_2_the_signature_binds_method_path_and_body() {
        let p = parts();
        assert_eq!(
            check(&p, "GET", p.path, p.body),
            Err(RequestRefusal::BadSignature)
        );
        assert_eq!(
            check(&p, p.method, "/internal/v1/undrain", p.body),
            Err(RequestRefusal::BadSignature)
        );
        assert_eq!(
            check(&p, p.method, p.path, b"{\"host\":8}"),
            Err(RequestRefusal::BadSignature)
        );
    }

    /// A header changed after signing (a replay with one field edited) no longer verifies.
    #[test]
    fn sec_2_the_signature_binds_cell_timestamp_and_nonce() {
        let p = parts();
        let signed = master().cell_key(ME).signed_headers(&p);
        let edit = |name: &str, value: &str| -> Result<Verified, RequestRefusal> {
            let mut h = signed.clone();
            for (k, v) in &mut h {
                if *k == name {
                    *v = value.to_owned();
                }
            }
            ring().verify(&received(&h, p.method, p.path, p.body), OWN, NOW, WINDOW)
        };
        assert_eq!(
            edit(TIMESTAMP_HEADER, &(NOW + 1).to_string()),
            Err(RequestRefusal::BadSignature)
        );
        assert_eq!(
            edit(NONCE_HEADER, "0123456789abcdef0123456789abcdee"),
            Err(RequestRefusal::BadSignature)
        );
        // Another cell id: refused before the MAC, as another cell's request.
        assert_eq!(edit(CELL_HEADER, "2"), Err(RequestRefusal::WrongCell));
        // SEC-2a: this cell's own incarnation edited in: the MAC covers it.
        let mut h = signed.clone();
        for (k, v) in &mut h {
            if *k == INCARNATION_HEADER {
                *v = "8".to_owned();
            }
        }
        let next = Identity {
            incarnation: Incarnation(8),
            ..OWN
        };
        let r = ring().verify(&received(&h, p.method, p.path, p.body), next, NOW, WINDOW);
        assert_eq!(r, Err(RequestRefusal::BadSignature));
        // Signed for cell 2 with cell 2's key and sent to cell 1: refused by id ...
        let for_2 = SignedParts {
            cell: CellId(2),
            ..p
        };
        let h2 = master().cell_key(CellId(2)).signed_headers(&for_2);
        let r = ring().verify(&received(&h2, p.method, p.path, p.body), OWN, NOW, WINDOW);
        assert_eq!(r, Err(RequestRefusal::WrongCell));
        // ... and cell 2's key cannot sign for cell 1 (its key id is not cell 1's).
        let forged = master().cell_key(CellId(2)).signed_headers(&p);
        let r = ring().verify(
            &received(&forged, p.method, p.path, p.body),
            OWN,
            NOW,
            WINDOW,
        );
        assert_eq!(r, Err(RequestRefusal::UnknownKey));
    }

    /// SEC-2a: a request signed for this cell's previous process (the incarnation before a
    /// restart) is refused by the successor, before the MAC and before any nonce is recorded.
    #[test]
    fn sec_2a_a_request_signed_for_the_previous_process_is_wrong_incarnation() {
        let p = parts();
        let signed = master().cell_key(ME).signed_headers(&p);
        let guard = InternalGuard::new(ring(), 8);
        let req = received(&signed, p.method, p.path, p.body);
        let successor = Identity {
            incarnation: Incarnation(INC.0 + 1),
            ..OWN
        };
        assert_eq!(
            guard.check(&req, successor, NOW, WINDOW),
            Err(RequestRefusal::WrongIncarnation)
        );
        assert_eq!(RequestRefusal::WrongIncarnation.name(), "wrong_incarnation");
        assert_eq!(guard.replay_len(), 0);
        // The process it was signed for takes it (once).
        assert_eq!(guard.check(&req, OWN, NOW, WINDOW), Ok(()));
        assert_eq!(
            guard.check(&req, OWN, NOW, WINDOW),
            Err(RequestRefusal::Replayed)
        );
    }

    /// SEC-2a / SEC-4: a keys file is loaded as a given cell's. Keys marked for another cell
    /// by `cell-key`'s comment are not this cell's; a file of only other cells' keys is refused.
    #[test]
    fn sec_2a_a_keys_file_gives_each_cell_only_its_marked_key() {
        let m = master();
        let line = |c: u32| {
            let k = m.cell_key(CellId(c));
            format!(
                "# switchyard cell key: cell {c}, key id {}\n{}\n",
                k.id(),
                k.to_hex()
            )
        };
        let shared = format!("{}{}", line(9), line(10));
        for c in [9, 10] {
            let ring = KeyRing::parse_for(&shared, "f", CellId(c)).expect("own key");
            assert_eq!(ring.ids(), vec![m.cell_key(CellId(c)).id().to_owned()]);
        }
        let err = KeyRing::parse_for(&line(9), "--keys-file f", CellId(10)).expect_err("refused");
        assert!(
            matches!(err, KeyError::NotThisCell { cell: 10, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("cell 9"), "{err}");
        // An unmarked key is taken as given.
        let bare = format!("{}\n", m.cell_key(CellId(9)).to_hex());
        assert!(KeyRing::parse_for(&bare, "f", CellId(10)).is_ok());
    }

    #[test]
    fn sec_2_a_timestamp_outside_the_window_is_stale() {
        for ts in [NOW - WINDOW - 1, NOW + WINDOW + 1] {
            let p = SignedParts {
                timestamp_ms: ts,
                ..parts()
            };
            assert_eq!(
                check(&p, p.method, p.path, p.body),
                Err(RequestRefusal::Stale)
            );
        }
        for ts in [NOW - WINDOW, NOW + WINDOW] {
            let p = SignedParts {
                timestamp_ms: ts,
                ..parts()
            };
            assert_eq!(check(&p, p.method, p.path, p.body), Ok(()));
        }
    }

    #[test]
    fn sec_2_missing_or_malformed_headers_are_refused_by_name() {
        let p = parts();
        let signed = master().cell_key(ME).signed_headers(&p);
        for name in [
            CELL_HEADER,
            INCARNATION_HEADER,
            TIMESTAMP_HEADER,
            NONCE_HEADER,
            KEY_HEADER,
            SIGNATURE_HEADER,
        ] {
            let h: Vec<_> = signed.iter().filter(|(k, _)| *k != name).cloned().collect();
            let r = ring().verify(&received(&h, p.method, p.path, p.body), OWN, NOW, WINDOW);
            assert_eq!(r, Err(RequestRefusal::Missing(name)));
            assert_eq!(RequestRefusal::Missing(name).name(), "missing_credentials");
        }
        for (name, bad) in [
            (CELL_HEADER, "01"),
            (CELL_HEADER, "-1"),
            (CELL_HEADER, "99999999999"),
            (INCARNATION_HEADER, "07"),
            (INCARNATION_HEADER, "99999999999999999999999"),
            (TIMESTAMP_HEADER, "+1"),
            (TIMESTAMP_HEADER, "1e9"),
            (NONCE_HEADER, "0123"),
            (NONCE_HEADER, "0123456789ABCDEF0123456789ABCDEF"),
            (KEY_HEADER, "xyz"),
            (SIGNATURE_HEADER, "00"),
        ] {
            let mut h = signed.clone();
            for (k, v) in &mut h {
                if *k == name {
                    *v = bad.to_owned();
                }
            }
            let r = ring().verify(&received(&h, p.method, p.path, p.body), OWN, NOW, WINDOW);
            assert_eq!(r, Err(RequestRefusal::Malformed(name)), "{name}: {bad}");
        }
    }

    #[test]
    fn sec_2_a_roll_accepts_the_previous_key_and_refuses_an_unknown_one() {
        let old = master();
        let new = Secret::new(b"a-new-master-secret-0123456789", "new").expect("secret");
        let p = parts();
        let by_old = old.cell_key(ME).signed_headers(&p);
        let by_new = new.cell_key(ME).signed_headers(&p);
        let verify = |ring: &KeyRing, h: &[(&'static str, String)]| {
            ring.verify(&received(h, p.method, p.path, p.body), OWN, NOW, WINDOW)
                .map(|_| ())
        };
        // Before the roll: only the old key.
        let before = KeyRing::from_secrets(ME, &old, None);
        assert_eq!(verify(&before, &by_new), Err(RequestRefusal::UnknownKey));
        // During: the new key current, the old one previous; both verify.
        let during = KeyRing::from_secrets(ME, &new, Some(&old));
        assert_eq!(during.ids().len(), 2);
        assert_eq!(verify(&during, &by_new), Ok(()));
        assert_eq!(verify(&during, &by_old), Ok(()));
        // After: the old key is refused by id.
        let after = KeyRing::from_secrets(ME, &new, None);
        assert_eq!(verify(&after, &by_old), Err(RequestRefusal::UnknownKey));
        // A key id that names the new key but a signature by the old one: bad signature.
        let mut mixed = by_old.clone();
        for (k, v) in &mut mixed {
            if *k == KEY_HEADER {
                *v = new.cell_key(ME).id().to_owned();
            }
        }
        assert_eq!(verify(&after, &mixed), Err(RequestRefusal::BadSignature));
    }

    #[test]
    fn sec_2_cell_keys_are_per_cell_and_keys_files_are_validated() {
        let m = master();
        let k1 = m.cell_key(CellId(1));
        assert_ne!(k1.to_hex(), m.cell_key(CellId(2)).to_hex());
        assert_ne!(k1.id(), m.cell_key(CellId(2)).id());
        assert_eq!(k1.id().len(), KEY_ID_HEX_LEN);
        // The printed form round-trips (same key, same id).
        let back = CellKey::from_hex(&k1.to_hex(), "k").expect("hex");
        assert_eq!((back.to_hex(), back.id()), (k1.to_hex(), k1.id()));
        let file = format!("# cell 1\n\n{}\n", k1.to_hex());
        assert_eq!(
            KeyRing::parse(&file, "f").expect("file").ids(),
            vec![k1.id()]
        );
        let k1b = Secret::new(b"another-master-0123456789", "x")
            .expect("secret")
            .cell_key(CellId(1));
        let two = format!("{}\n{}\n", k1.to_hex(), k1b.to_hex());
        assert_eq!(KeyRing::parse(&two, "f").expect("file").ids().len(), 2);
        let bad = |text: &str| KeyRing::parse(text, "f").expect_err("refused");
        assert!(matches!(bad(""), KeyError::NoKey { .. }));
        assert!(matches!(bad("# only a comment\n"), KeyError::NoKey { .. }));
        assert!(matches!(bad("not-hex"), KeyError::BadCellKey { .. }));
        assert!(matches!(
            bad(&k1.to_hex().to_uppercase()),
            KeyError::BadCellKey { .. }
        ));
        assert!(matches!(
            bad(&k1.to_hex()[..62]),
            KeyError::BadCellKey { .. }
        ));
        assert!(matches!(
            bad(&format!("{}\n{}\n", k1.to_hex(), k1.to_hex())),
            KeyError::DuplicateKey { .. }
        ));
        let k1c = Secret::new(b"a-third-master-0123456789", "x")
            .expect("secret")
            .cell_key(CellId(1));
        assert!(matches!(
            bad(&format!("{two}{}\n", k1c.to_hex())),
            KeyError::TooManyKeys { .. }
        ));
        assert_eq!(
            Secret::new(b"short", "--secret").map(|_| ()),
            Err(KeyError::TooShort {
                what: "--secret".into()
            })
        );
    }

    /// Only verified requests reach the cache: a flood of bad signatures records nothing.
    #[test]
    fn sec_2_unverified_requests_never_fill_the_replay_cache() {
        let guard = InternalGuard::new(ring(), 1);
        let p = parts();
        let mut forged = master().cell_key(ME).signed_headers(&p);
        for (k, v) in &mut forged {
            if *k == SIGNATURE_HEADER {
                *v = "0".repeat(64);
            }
        }
        for _ in 0..10 {
            let r = guard.check(
                &received(&forged, p.method, p.path, p.body),
                OWN,
                NOW,
                WINDOW,
            );
            assert_eq!(r, Err(RequestRefusal::BadSignature));
        }
        assert_eq!(guard.replay_len(), 0);
        let good = master().cell_key(ME).signed_headers(&p);
        let req = received(&good, p.method, p.path, p.body);
        assert_eq!(guard.check(&req, OWN, NOW, WINDOW), Ok(()));
        assert_eq!(
            guard.check(&req, OWN, NOW, WINDOW),
            Err(RequestRefusal::Replayed)
        );
    }

    #[test]
    fn sec_2_fresh_nonces_are_well_formed_and_differ() {
        let a = fresh_nonce().expect("nonce");
        let b = fresh_nonce().expect("nonce");
        assert_eq!(a.len(), NONCE_HEX_LEN);
        assert!(is_lower_hex(&a));
        assert_ne!(a, b);
    }

    #[test]
    fn desktop_tokens() {
        let s = master();
        let t = format!("Bearer {}", s.desktop_token(7));
        assert_eq!(s.verify_desktop(7, Some(&t)), Ok(()));
        assert_eq!(s.verify_desktop(8, Some(&t)), Err(AuthError::Bad));
        assert_eq!(s.verify_desktop(7, None), Err(AuthError::Missing));
    }
}
