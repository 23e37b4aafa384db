//! What a client does after a cell ended its connection (OPS-2, SEC-1, HO-S3, HO-A5).
//!
//! The cell tells a client why it closed (a close code and a stable reason word) or why it
//! refused the upgrade (an HTTP status). Some of those a later attempt can get past (a
//! handoff moved the host: resolve again; the cell is busy or stopping: retry, paced); some it
//! cannot (the credential is refused; the host is drained until an operator undrains it): a
//! client that retried those would only spin. The decision is made here, once, for the
//! desktop and the mobile alike; the adapters execute it and name the close in their report.

use super::cell::close_code;

/// The reason word of a client refused at a drained source (HO-A5: the operator's drain
/// stands until an undrain).
pub(crate) const SOURCE_DRAINING: &str = "source_draining";

/// Why a client stops instead of retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StopWhy {
    /// SEC-1: the credential was refused (4401, or HTTP 401 at the upgrade): a retry with the
    /// same credential is refused the same way; a new one is needed.
    CredentialRefused,
    /// HO-A5: the host is drained (1012 `source_draining`): nothing serves it until an
    /// operator undrains it.
    HostDrained,
}

impl StopWhy {
    /// Stable name for logs and reports.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            StopWhy::CredentialRefused => "credential_refused",
            StopWhy::HostDrained => "host_drained",
        }
    }
}

/// What the client does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AfterClose {
    /// Resolve the host again, then dial (paced): it moved or its cell is going away.
    Resolve,
    /// Dial again later (paced, with backoff): a transient refusal or failure.
    Retry,
    /// Stop: no retry can succeed.
    Stop(StopWhy),
}

/// OPS-2: a client's connection ended with close `code` (`None`: no close frame, the
/// connection broke) and `reason`.
#[must_use]
pub fn after_close(code: Option<u16>, reason: &str) -> AfterClose {
    match code {
        Some(close_code::NOT_AUTHENTICATED) => AfterClose::Stop(StopWhy::CredentialRefused),
        Some(close_code::DRAINING) if reason == SOURCE_DRAINING => {
            AfterClose::Stop(StopWhy::HostDrained)
        }
        // An attached client hard-drained (1012 `draining`): reconnect elsewhere; the next
        // attempt learns whether the host itself is drained (`source_draining`).
        Some(close_code::DRAINING | close_code::WRONG_CELL | 1001) => AfterClose::Resolve,
        _ => AfterClose::Retry,
    }
}

/// OPS-2: a WebSocket upgrade the cell answered with HTTP `status` instead of switching.
#[must_use]
pub fn after_refused_upgrade(status: u16) -> AfterClose {
    match status {
        401 | 403 => AfterClose::Stop(StopWhy::CredentialRefused),
        _ => AfterClose::Retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_2_reasons_a_retry_cannot_fix_stop_the_client() {
        assert_eq!(
            after_close(Some(4401), "expired"),
            AfterClose::Stop(StopWhy::CredentialRefused)
        );
        assert_eq!(
            after_close(Some(1012), SOURCE_DRAINING),
            AfterClose::Stop(StopWhy::HostDrained)
        );
        assert_eq!(
            after_refused_upgrade(401),
            AfterClose::Stop(StopWhy::CredentialRefused)
        );
    }

    #[test]
    fn ops_2_reasons_a_retry_can_fix_are_retried() {
        assert_eq!(after_close(Some(1012), "draining"), AfterClose::Resolve);
        assert_eq!(after_close(Some(4409), "wrong_cell"), AfterClose::Resolve);
        assert_eq!(
            after_close(Some(1001), "cell_stopping"),
            AfterClose::Resolve
        );
        assert_eq!(after_close(Some(1013), "control_gated"), AfterClose::Retry);
        assert_eq!(
            after_close(Some(4429), "too_many_clients"),
            AfterClose::Retry
        );
        assert_eq!(after_close(None, ""), AfterClose::Retry);
        assert_eq!(after_refused_upgrade(503), AfterClose::Retry);
    }
}
