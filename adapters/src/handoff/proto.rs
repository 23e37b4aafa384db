//! Wire formats: JSON text frames on the WebSockets, JSON bodies on the HTTP endpoints.
//! Every inbound frame is external input: parsed with serde, size-bounded, never trusted.

use serde::{Deserialize, Serialize};
use switchyard_core::handoff::AdmissionRefusal;
use switchyard_core::handoff::{admission_refusal_name, reply_reason};
use switchyard_core::handoff::{DrainReason, HandoffReply};

/// HO-C1: the idle-handoff capability token (cells advertise it, desktops send it).
pub const IDLE_HANDOFF_CAPABILITY: &str = "idle-handoff-v1";

/// Largest WebSocket frame / HTTP body accepted.
pub const MAX_FRAME_BYTES: usize = 64 * 1024;

/// WebSocket paths and HTTP endpoints of a cell.
pub const DESKTOP_PATH: &str = "/v1/desktop";
pub const CLIENT_PATH: &str = "/v1/client";
pub const RESOLVE_PATH: &str = "/v1/resolve";
pub const CAPABILITIES_PATH: &str = "/v1/capabilities";
pub const HANDOFF_PATH: &str = "/internal/v1/handoff";
pub const DRAIN_PATH: &str = "/internal/v1/drain";
/// HO-L1: the drain's recovery path.
pub const UNDRAIN_PATH: &str = "/internal/v1/undrain";
pub const STATS_PATH: &str = "/internal/v1/stats";

/// Close codes. The cell's own decisions use the core's `cell::close_code`; these name the
/// same numbers for clients and tests.
pub const CLOSE_NORMAL: u16 = switchyard_core::handoff::close_code::NORMAL;
/// Hard drain of a client (service restart: reconnect elsewhere).
pub const CLOSE_DRAINING: u16 = switchyard_core::handoff::close_code::DRAINING;
/// Ordinary retryable error (try again later).
pub const CLOSE_TRY_AGAIN: u16 = switchyard_core::handoff::close_code::TRY_AGAIN;
pub const CLOSE_INTERNAL: u16 = 1011;
/// OPS-1: the cell stops on purpose (close code 1001 "going away", and the reason below).
pub const CLOSE_GOING_AWAY: u16 = 1001;
pub const CELL_STOPPING: &str = "cell_stopping";
pub const CLOSE_POLICY: u16 = 1008;

/// Desktop -> cell (control socket).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum DesktopFrame {
    /// HO-3: a fresh measurement of the current region and the best target.
    Measure {
        target: u32,
        current_rtt_ms: u32,
        target_rtt_ms: u32,
    },
    /// HO-8: activity renewal (never client work).
    Activity,
    /// A credential installation: a counted control operation.
    Credential { seq: u64 },
    /// The desktop applied a relayed mutation.
    Ack { conn: u64, id: String },
}

/// Cell -> desktop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum CellToDesktop {
    Registered {
        cell: u32,
        epoch: u64,
        incarnation: u64,
        generation: u64,
        capable: bool,
    },
    Relay {
        conn: u64,
        id: String,
        body: String,
    },
    CredentialDone {
        seq: u64,
    },
    /// Ordinary retryable error (e.g. a control operation refused under a barrier): `what`
    /// was refused (`register`, `control`, `credential` with its `seq`), `reason` is a stable
    /// snake_case name.
    Retry {
        what: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        reason: String,
    },
    /// HO-S5 / HO-A5: the ordinary DRAINING / resolve-director path: resolve and reconnect.
    /// `reason` is a stable snake_case name (the core's `CloseReason::name`, or why the
    /// registration was refused).
    Draining {
        reason: String,
    },
}

impl CellToDesktop {
    #[must_use]
    pub fn retry(what: &str, seq: Option<u64>, reason: &str) -> CellToDesktop {
        CellToDesktop::Retry {
            what: what.to_owned(),
            seq,
            reason: reason.to_owned(),
        }
    }
}

/// Mobile client -> cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ClientFrame {
    Mutation { id: String, body: String },
}

/// Cell -> mobile client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum CellToClient {
    Attached {
        cell: u32,
    },
    Ack {
        id: String,
    },
    /// The mutation was not delivered (no desktop, queue full): the client decides. `why`
    /// is [`Undelivered::name`].
    Undelivered {
        id: String,
        why: String,
    },
}

/// Why a client's mutation was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undelivered {
    /// Empty, too long, or already in flight on this socket.
    BadId,
    TooManyInFlight,
    /// The host refused the splice (the core's admission).
    Refused(AdmissionRefusal),
    DesktopNotConnected,
    /// Not a frame this cell understands.
    Malformed,
}

impl Undelivered {
    /// Stable name on the wire.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Undelivered::BadId => "bad_id",
            Undelivered::TooManyInFlight => "too_many_in_flight",
            Undelivered::Refused(r) => admission_refusal_name(r),
            Undelivered::DesktopNotConnected => "desktop_not_connected",
            Undelivered::Malformed => "malformed",
        }
    }

    #[must_use]
    pub fn frame(self, id: String) -> CellToClient {
        CellToClient::Undelivered {
            id,
            why: self.name().to_owned(),
        }
    }
}

/// `GET /v1/resolve?host=H`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolveAnswer {
    pub host: u64,
    pub cell: u32,
    pub epoch: u64,
    pub url: String,
}

/// `GET /v1/capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub cell: u32,
    pub incarnation: u64,
    pub capabilities: Vec<String>,
}

/// `POST /internal/v1/handoff` answer: the core's reply plus a plain status word and, for a
/// refusal or a superseded request, the stable reason word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffAnswer {
    /// `result`, `busy`, `in_progress`, `superseded` or `refused`.
    pub status: String,
    /// The core's `reply_reason`: the refusal (`no_session`, `source_draining`, ...) or the
    /// authority field a superseded request was older in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub reply: HandoffReply,
}

impl HandoffAnswer {
    #[must_use]
    pub fn of(reply: HandoffReply) -> HandoffAnswer {
        let status = match reply {
            HandoffReply::Busy { .. } => "busy",
            HandoffReply::InProgress { .. } => "in_progress",
            HandoffReply::Superseded { .. } => "superseded",
            HandoffReply::Refused { .. } => "refused",
            HandoffReply::Result(_) => "result",
        };
        HandoffAnswer {
            status: status.to_owned(),
            reason: reply_reason(&reply).map(str::to_owned),
            reply,
        }
    }
}

/// `POST /internal/v1/drain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRequest {
    pub host: u64,
    /// Default: `emergency`.
    #[serde(default)]
    pub reason: DrainCause,
}

impl DrainRequest {
    #[must_use]
    pub fn new(host: u64, reason: DrainReason) -> DrainRequest {
        DrainRequest {
            host,
            reason: reason.into(),
        }
    }
}

/// The core's `DrainReason` under stable snake_case names on the wire.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainCause {
    #[default]
    Emergency,
    AuthRefused,
}

impl From<DrainReason> for DrainCause {
    fn from(r: DrainReason) -> DrainCause {
        match r {
            DrainReason::Emergency => DrainCause::Emergency,
            DrainReason::AuthRefused => DrainCause::AuthRefused,
        }
    }
}

impl From<DrainCause> for DrainReason {
    fn from(c: DrainCause) -> DrainReason {
        match c {
            DrainCause::Emergency => DrainReason::Emergency,
            DrainCause::AuthRefused => DrainReason::AuthRefused,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainAnswer {
    /// The drain was applied now (not already drained, and the host is known here).
    pub applied: bool,
    /// Clients the hard drain closes.
    pub closed_clients: u32,
    pub state: DrainState,
}

/// What a drain request found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainState {
    Drained,
    /// Drained before (the hard drain ran again).
    AlreadyDrained,
    /// No machine for the host here (nothing drained).
    UnknownHost,
}

impl DrainAnswer {
    /// From the core's `SourceCell::handle_emergency_drain` answer.
    #[must_use]
    pub fn new(applied: Option<bool>, clients: usize) -> DrainAnswer {
        let state = match applied {
            Some(true) => DrainState::Drained,
            Some(false) => DrainState::AlreadyDrained,
            None => DrainState::UnknownHost,
        };
        DrainAnswer {
            applied: applied == Some(true),
            closed_clients: u32::try_from(clients).unwrap_or(u32::MAX),
            state,
        }
    }
}

impl DrainState {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            DrainState::Drained => "drained",
            DrainState::AlreadyDrained => "already_drained",
            DrainState::UnknownHost => "unknown_host",
        }
    }
}

/// `POST /internal/v1/undrain` (HO-L1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndrainRequest {
    pub host: u64,
}

/// 200 answer of an undrain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndrainAnswer {
    pub undrained: bool,
}

/// A refusal answer (409): the core's stable refusal name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedAnswer {
    pub refused: String,
}

impl RefusedAnswer {
    #[must_use]
    pub fn new(name: &str) -> RefusedAnswer {
        RefusedAnswer {
            refused: name.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::handoff::{CellId, OpId};
    use switchyard_core::handoff::{CloseReason, UndrainRefusal};
    use switchyard_core::handoff::{HandoffRefusal, RetireReason};

    fn json<T: Serialize>(v: &T) -> String {
        serde_json::to_string(v).expect("json")
    }

    /// The names operators, dashboards and clients see. Renaming a Rust variant must not
    /// change any of them.
    #[test]
    fn wire_names_are_pinned() {
        let op_id = OpId(uuid::Uuid::nil());
        let draining = |r: CloseReason| CellToDesktop::Draining {
            reason: r.name().to_owned(),
        };
        assert_eq!(
            json(&draining(CloseReason::Drained(DrainReason::Emergency))),
            r#"{"t":"draining","reason":"emergency_drain"}"#
        );
        assert_eq!(
            json(&draining(CloseReason::Retired(RetireReason::Committed {
                op_id,
                target: CellId(2)
            }))),
            r#"{"t":"draining","reason":"committed"}"#
        );
        assert_eq!(
            json(&draining(CloseReason::Replaced)),
            r#"{"t":"draining","reason":"replaced"}"#
        );
        assert_eq!(
            json(&CellToDesktop::retry(
                "credential",
                Some(2),
                admission_refusal_name(AdmissionRefusal::ControlGated)
            )),
            r#"{"t":"retry","what":"credential","seq":2,"reason":"control_gated"}"#
        );
        assert_eq!(
            json(&CellToDesktop::retry("control", None, "source_draining")),
            r#"{"t":"retry","what":"control","reason":"source_draining"}"#
        );
        let undelivered = [
            (Undelivered::BadId, "bad_id"),
            (Undelivered::TooManyInFlight, "too_many_in_flight"),
            (
                Undelivered::Refused(AdmissionRefusal::WrongCell),
                "wrong_cell",
            ),
            (
                Undelivered::Refused(AdmissionRefusal::SourceDraining),
                "source_draining",
            ),
            (Undelivered::DesktopNotConnected, "desktop_not_connected"),
            (Undelivered::Malformed, "malformed"),
        ];
        for (u, name) in undelivered {
            assert_eq!(
                json(&u.frame("m-1".into())),
                format!(r#"{{"t":"undelivered","id":"m-1","why":"{name}"}}"#)
            );
        }
        let refused = HandoffAnswer::of(HandoffReply::Refused {
            op_id,
            reason: HandoffRefusal::NoSession,
        });
        assert_eq!(refused.status, "refused");
        assert_eq!(refused.reason.as_deref(), Some("no_session"));
        assert!(json(&refused).contains(r#""reason":"no_session""#));
        let busy = HandoffAnswer::of(HandoffReply::InProgress { op_id });
        assert_eq!((busy.status.as_str(), busy.reason), ("in_progress", None));
        assert_eq!(
            json(&DrainAnswer::new(None, 0)),
            r#"{"applied":false,"closed_clients":0,"state":"unknown_host"}"#
        );
        assert_eq!(
            json(&DrainAnswer::new(Some(true), 3)),
            r#"{"applied":true,"closed_clients":3,"state":"drained"}"#
        );
        assert_eq!(DrainState::AlreadyDrained.name(), "already_drained");
        assert_eq!(
            json(&DrainAnswer::new(Some(false), 0).state),
            r#""already_drained""#
        );
        assert_eq!(
            json(&UndrainAnswer { undrained: true }),
            r#"{"undrained":true}"#
        );
        assert_eq!(
            json(&RefusedAnswer::new(UndrainRefusal::StillClosing.name())),
            r#"{"refused":"still_closing"}"#
        );
        assert_eq!(
            json(&DrainRequest::new(7, DrainReason::AuthRefused)),
            r#"{"host":7,"reason":"auth_refused"}"#
        );
        let defaulted: DrainRequest = serde_json::from_str(r#"{"host":7}"#).expect("json");
        assert_eq!(defaulted, DrainRequest::new(7, DrainReason::Emergency));
        for r in [DrainReason::Emergency, DrainReason::AuthRefused] {
            assert_eq!(DrainReason::from(DrainCause::from(r)), r);
        }
    }
}
