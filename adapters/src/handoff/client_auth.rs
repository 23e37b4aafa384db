//! SEC-1: client credentials. A host's desktop mints them for the clients it pairs with; any
//! cell checks them without state, so a client keeps working after its host is handed off.
//!
//! A token is `v1.<expires_unix_ms>.<hex HMAC-SHA256(key, "client-token:v1:<host>:<expires>")>`
//! where the key is the host's desktop token (what the desktop already holds, derived from the
//! cells' desktop secret). So a token names one host and one expiry: it cannot be moved to
//! another host or stretched, and minting one needs that host's desktop token. The cell also
//! refuses a token that lives longer than its bound ahead of now, so a leaked desktop token
//! cannot mint credentials that outlast a secret rotation.
//!
//! It travels as `Authorization: Bearer <token>` on the WebSocket upgrade (never in the query
//! string, which proxies log).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::auth::{hex, is_lower_hex, unhex, Secret};

type HmacSha256 = Hmac<Sha256>;

const VERSION: &str = "v1";
/// Longest token accepted (the version, 20 digits, 64 hex digits and the dots fit easily).
const MAX_TOKEN_BYTES: usize = 128;

/// Why a client was not authenticated: the close reason it is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClientAuthError {
    #[error("no client credential (Authorization: Bearer <token>)")]
    Missing,
    #[error("malformed client credential")]
    Malformed,
    #[error("client credential expired")]
    Expired,
    #[error("client credential lives longer than this cell accepts")]
    TooLongLived,
    #[error("client credential is not this host's")]
    Bad,
}

impl ClientAuthError {
    /// Stable name (the WebSocket close reason, logs, counters).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ClientAuthError::Missing => "credential_missing",
            ClientAuthError::Malformed => "credential_malformed",
            ClientAuthError::Expired => "credential_expired",
            ClientAuthError::TooLongLived => "credential_too_long_lived",
            ClientAuthError::Bad => "credential_bad",
        }
    }
}

fn mac(desktop_token: &str, host: u64, expires_ms: u64) -> HmacSha256 {
    // HMAC accepts keys of any length: this cannot fail.
    let mut m = match HmacSha256::new_from_slice(desktop_token.as_bytes()) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts any key length"),
    };
    m.update(format!("client-token:{VERSION}:{host}:{expires_ms}").as_bytes());
    m
}

/// What a desktop does to pair a client: a token for `host` valid until `expires_ms` (Unix ms).
#[must_use]
pub fn mint_client_token(desktop_token: &str, host: u64, expires_ms: u64) -> String {
    let tag = mac(desktop_token, host, expires_ms).finalize().into_bytes();
    format!("{VERSION}.{expires_ms}.{}", hex(&tag))
}

/// The cell's check of a client's `Authorization` header for `host` at `now_ms`: a token of
/// this host, not expired, expiring at most `max_lifetime_ms` from now. Constant-time tag
/// comparison.
pub fn verify_client(
    desktop_secret: &Secret,
    host: u64,
    authorization: Option<&str>,
    now_ms: u64,
    max_lifetime_ms: u64,
) -> Result<(), ClientAuthError> {
    let header = authorization.ok_or(ClientAuthError::Missing)?;
    let token = header
        .strip_prefix("Bearer ")
        .ok_or(ClientAuthError::Malformed)?
        .trim();
    if token.len() > MAX_TOKEN_BYTES {
        return Err(ClientAuthError::Malformed);
    }
    let mut parts = token.split('.');
    let (Some(VERSION), Some(expires), Some(tag), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ClientAuthError::Malformed);
    };
    // One spelling per token: digits only, no leading zero (the long fuzz run found `01…`
    // accepted as a second spelling of the same expiry).
    if expires.is_empty()
        || !expires.bytes().all(|b| b.is_ascii_digit())
        || (expires.len() > 1 && expires.starts_with('0'))
    {
        return Err(ClientAuthError::Malformed);
    }
    let expires_ms: u64 = expires.parse().map_err(|_| ClientAuthError::Malformed)?;
    let tag = tag_bytes(tag).ok_or(ClientAuthError::Malformed)?;
    mac(&desktop_secret.desktop_token(host), host, expires_ms)
        .verify_slice(&tag)
        .map_err(|_| ClientAuthError::Bad)?;
    // Judged after the tag, so the answer says nothing about a token the caller could not mint.
    if expires_ms <= now_ms {
        return Err(ClientAuthError::Expired);
    }
    if expires_ms - now_ms > max_lifetime_ms {
        return Err(ClientAuthError::TooLongLived);
    }
    Ok(())
}

/// Exactly 64 lowercase hex digits: one spelling per token (the fuzz target found that
/// `u8::from_str_radix` also takes upper case, a second spelling of the same credential).
fn tag_bytes(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 || !is_lower_hex(s) {
        return None;
    }
    unhex(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DAY_MS: u64 = 86_400_000;

    fn secret() -> Secret {
        Secret::new(b"desktop-secret-0123456789abcdef", "test").expect("secret")
    }

    fn bearer(token: &str) -> String {
        format!("Bearer {token}")
    }

    #[test]
    fn sec_1_a_token_minted_from_the_hosts_desktop_token_is_accepted() {
        let s = secret();
        let token = mint_client_token(&s.desktop_token(7), 7, 2 * DAY_MS);
        assert_eq!(
            verify_client(&s, 7, Some(&bearer(&token)), DAY_MS, 7 * DAY_MS),
            Ok(())
        );
    }

    #[test]
    fn sec_1_another_hosts_stretched_expired_or_missing_token_is_refused() {
        let s = secret();
        let now = DAY_MS;
        let token = mint_client_token(&s.desktop_token(7), 7, 2 * DAY_MS);
        let check = |host, header: Option<&str>| verify_client(&s, host, header, now, 7 * DAY_MS);
        assert_eq!(check(8, Some(&bearer(&token))), Err(ClientAuthError::Bad));
        let stretched = token.replacen(&(2 * DAY_MS).to_string(), &(3 * DAY_MS).to_string(), 1);
        assert_eq!(
            check(7, Some(&bearer(&stretched))),
            Err(ClientAuthError::Bad)
        );
        let expired = mint_client_token(&s.desktop_token(7), 7, now);
        assert_eq!(
            check(7, Some(&bearer(&expired))),
            Err(ClientAuthError::Expired)
        );
        let forever = mint_client_token(&s.desktop_token(7), 7, u64::MAX);
        assert_eq!(
            check(7, Some(&bearer(&forever))),
            Err(ClientAuthError::TooLongLived)
        );
        let other_secret = Secret::new(b"another-desktop-secret-0123456", "t").expect("secret");
        let foreign = mint_client_token(&other_secret.desktop_token(7), 7, 2 * DAY_MS);
        assert_eq!(check(7, Some(&bearer(&foreign))), Err(ClientAuthError::Bad));
        assert_eq!(check(7, None), Err(ClientAuthError::Missing));
        assert_eq!(check(7, Some(&token)), Err(ClientAuthError::Malformed));
        let (prefix, tag) = token.rsplit_once('.').expect("a tag");
        let upper = format!("{prefix}.{}", tag.to_uppercase());
        assert_eq!(
            check(7, Some(&bearer(&upper))),
            Err(ClientAuthError::Malformed)
        );
        let zero_padded = token.replacen("v1.", "v1.0", 1);
        assert_eq!(
            check(7, Some(&bearer(&zero_padded))),
            Err(ClientAuthError::Malformed)
        );
        for malformed in [
            "",
            "v1",
            "v2.1.00",
            "v1..00",
            "v1.-1.00",
            "v1.1.zz",
            "v1.1.00.00",
        ] {
            assert_eq!(
                check(7, Some(&bearer(malformed))),
                Err(ClientAuthError::Malformed),
                "{malformed:?}"
            );
        }
    }

    proptest! {
        /// SEC-4 fuzz: any header is an answer, never a panic; only a minted token passes.
        #[test]
        fn sec_4_fuzz_client_credentials_never_panic(header in ".{0,200}", bytes in prop::collection::vec(any::<u8>(), 0..160)) {
            let s = secret();
            prop_assert!(verify_client(&s, 7, Some(&header), DAY_MS, 7 * DAY_MS).is_err());
            let lossy = String::from_utf8_lossy(&bytes).into_owned();
            prop_assert!(verify_client(&s, 7, Some(&bearer(&lossy)), DAY_MS, 7 * DAY_MS).is_err());
        }
    }
}
