//! Authentication of the cell's internal endpoint (director requests, emergency drain) and of
//! desktop control sockets.
//!
//! Internal endpoint: either `x-switchyard-timestamp` (Unix ms) plus `x-switchyard-signature`
//! = hex HMAC-SHA256(secret, timestamp + "\n" + body), accepted within a time window, or
//! `Authorization: Bearer <secret>` compared in constant time. Desktop tokens are
//! hex HMAC-SHA256(desktop secret, "desktop-token:v1:" + host id).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

pub const TIMESTAMP_HEADER: &str = "x-switchyard-timestamp";
pub const SIGNATURE_HEADER: &str = "x-switchyard-signature";

/// A shared secret (never logged).
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

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

impl Secret {
    /// At least 16 bytes, so a typo'd empty env var cannot become a secret.
    pub fn new(bytes: &[u8], what: &str) -> Result<Secret, String> {
        if bytes.len() < 16 {
            return Err(format!("{what} must be at least 16 bytes"));
        }
        Ok(Secret(bytes.to_vec()))
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length: this cannot fail.
        match HmacSha256::new_from_slice(&self.0) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC accepts any key length"),
        }
    }

    /// hex HMAC-SHA256(secret, timestamp "\n" body).
    #[must_use]
    pub fn sign(&self, timestamp_ms: u64, body: &[u8]) -> String {
        let mut m = self.mac();
        m.update(timestamp_ms.to_string().as_bytes());
        m.update(b"\n");
        m.update(body);
        hex(&m.finalize().into_bytes())
    }

    /// The headers of a signed internal request (what the cell's `verify_request` checks):
    /// the timestamp and the signature of `timestamp "\n" body`.
    #[must_use]
    pub fn signed_headers(&self, timestamp_ms: u64, body: &[u8]) -> [(&'static str, String); 2] {
        [
            (TIMESTAMP_HEADER, timestamp_ms.to_string()),
            (SIGNATURE_HEADER, self.sign(timestamp_ms, body)),
        ]
    }

    /// Verify an internal request: a signature within `window_ms` of `now_ms`, or the bearer
    /// secret. Constant-time comparisons only.
    pub fn verify_request(
        &self,
        authorization: Option<&str>,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now_ms: u64,
        window_ms: u64,
    ) -> Result<(), AuthError> {
        if let (Some(ts), Some(sig)) = (timestamp, signature) {
            let ts: u64 = ts
                .trim()
                .parse()
                .map_err(|_| AuthError::Malformed(TIMESTAMP_HEADER))?;
            if ts.abs_diff(now_ms) > window_ms {
                return Err(AuthError::Stale);
            }
            let sig = unhex(sig.trim()).ok_or(AuthError::Malformed(SIGNATURE_HEADER))?;
            let mut m = self.mac();
            m.update(ts.to_string().as_bytes());
            m.update(b"\n");
            m.update(body);
            return m.verify_slice(&sig).map_err(|_| AuthError::Bad);
        }
        match authorization {
            Some(a) => {
                let token = a
                    .strip_prefix("Bearer ")
                    .ok_or(AuthError::Malformed("authorization"))?;
                if bool::from(token.as_bytes().ct_eq(&self.0)) {
                    Ok(())
                } else {
                    Err(AuthError::Bad)
                }
            }
            None => Err(AuthError::Missing),
        }
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

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
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

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef-secret", "test").expect("secret")
    }

    #[test]
    fn signature_round_trip_and_window() {
        let s = secret();
        let sig = s.sign(1_000, b"{}");
        assert_eq!(
            s.verify_request(None, Some("1000"), Some(&sig), b"{}", 1_500, 1_000),
            Ok(())
        );
        assert_eq!(
            s.verify_request(None, Some("1000"), Some(&sig), b"{ }", 1_500, 1_000),
            Err(AuthError::Bad)
        );
        assert_eq!(
            s.verify_request(None, Some("1000"), Some(&sig), b"{}", 5_000, 1_000),
            Err(AuthError::Stale)
        );
        assert_eq!(
            s.verify_request(None, Some("x"), Some(&sig), b"{}", 1_000, 1_000),
            Err(AuthError::Malformed(TIMESTAMP_HEADER))
        );
    }

    #[test]
    fn bearer_and_desktop_tokens() {
        let s = secret();
        assert_eq!(
            s.verify_request(
                Some("Bearer 0123456789abcdef-secret"),
                None,
                None,
                b"",
                0,
                0
            ),
            Ok(())
        );
        assert_eq!(
            s.verify_request(Some("Bearer nope"), None, None, b"", 0, 0),
            Err(AuthError::Bad)
        );
        assert_eq!(
            s.verify_request(None, None, None, b"", 0, 0),
            Err(AuthError::Missing)
        );
        let t = format!("Bearer {}", s.desktop_token(7));
        assert_eq!(s.verify_desktop(7, Some(&t)), Ok(()));
        assert_eq!(s.verify_desktop(8, Some(&t)), Err(AuthError::Bad));
        assert!(Secret::new(b"short", "x").is_err());
    }
}
