//! Wire formats: JSON text frames on the WebSockets, JSON bodies on the HTTP endpoints.
//! Every inbound frame is external input: parsed with serde, size-bounded, never trusted.

use serde::{Deserialize, Serialize};
use switchyard_core::handoff::attempt::{DrainReason, HandoffReply};

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
pub const STATS_PATH: &str = "/internal/v1/stats";

/// Close codes.
pub const CLOSE_NORMAL: u16 = 1000;
/// Hard drain of a client (service restart: reconnect elsewhere).
pub const CLOSE_DRAINING: u16 = 1012;
/// Ordinary retryable error (try again later).
pub const CLOSE_TRY_AGAIN: u16 = 1013;
pub const CLOSE_INTERNAL: u16 = 1011;
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
    /// Ordinary retryable error (e.g. a control operation refused under a barrier).
    Retry {
        what: String,
    },
    /// HO-S5 / HO-A5: the ordinary DRAINING / resolve-director path: resolve and reconnect.
    Draining {
        reason: String,
    },
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
    /// The mutation was not delivered (no desktop, queue full): the client decides.
    Undelivered {
        id: String,
        why: String,
    },
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

/// `POST /internal/v1/handoff` answer: the core's reply plus a plain status word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffAnswer {
    /// `result`, `busy`, `in_progress`, `superseded` or `refused`.
    pub status: String,
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
            reply,
        }
    }
}

/// `POST /internal/v1/drain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRequest {
    pub host: u64,
    pub reason: DrainReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainAnswer {
    pub applied: bool,
    pub closed_clients: u32,
}
