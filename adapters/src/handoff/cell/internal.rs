//! The signed internal endpoints: idle-handoff requests (HO-S1, HO-S2, HO-A1), emergency
//! drain (HO-A5) and its recovery path, undrain (HO-L1), and the counters.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use switchyard_core::handoff::HandoffRequest;
use switchyard_core::handoff::HostId;
use switchyard_core::handoff::Identity;
use switchyard_core::handoff::{answer_from_record, needs_durable_record};
use switchyard_core::handoff::{Begin, CellRecord, HandoffReply};
use tracing::{debug, info};

use super::pump::wait_for;
use super::Shared;
use crate::handoff::auth::{Received, RequestRefusal, CELL_HEADER, INCARNATION_HEADER, KEY_HEADER};
use crate::handoff::proto::{
    DrainAnswer, DrainRequest, HandoffAnswer, RefusedAnswer, UndrainAnswer, UndrainRequest,
};

/// SEC-2: `Some(refusal)` unless the request is signed for this cell, this method and path,
/// inside the window, with a key of this cell and a nonce not seen inside the window (nothing
/// else happens then). The method and path are the ones received, never a header's claim.
/// There is no bearer form: a bearer secret is the same on every request, so a captured one
/// replays to any cell and path for as long as the secret lives.
fn authenticate(
    sh: &Shared,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<Response> {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let received = Received::from_headers(method.as_str(), path, body, h);
    let window = super::ms(sh.cfg.auth_window);
    // SEC-2a: the request must be for this process (its lease incarnation), not only this
    // cell id: a request captured before a restart is refused by the successor.
    let own = Identity {
        cell: sh.cfg.cell,
        incarnation: sh.incarnation,
    };
    let verdict = sh
        .cfg
        .internal_auth
        .check(&received, own, sh.clock.now().0, window);
    let refusal = verdict.err()?;
    sh.stats.bump(|s| {
        s.internal_refused += 1;
        match refusal {
            RequestRefusal::Replayed => s.internal_replayed += 1,
            RequestRefusal::WrongCell => s.internal_wrong_cell += 1,
            RequestRefusal::WrongIncarnation => s.internal_wrong_incarnation += 1,
            RequestRefusal::Stale => s.internal_stale += 1,
            RequestRefusal::BadSignature | RequestRefusal::UnknownKey => {
                s.internal_bad_signature += 1
            }
            RequestRefusal::ReplayCacheFull => s.internal_replay_cache_full += 1,
            RequestRefusal::Missing(_) | RequestRefusal::Malformed(_) => {}
        }
    });
    // Debug, not warn: anyone who can reach the port can make these, and the counters above
    // are what an alert watches.
    debug!(
        reason = refusal.name(),
        detail = %refusal,
        %method,
        path,
        cell = h(CELL_HEADER),
        incarnation = h(INCARNATION_HEADER),
        key = h(KEY_HEADER),
        "internal request refused"
    );
    // A full cache is not the caller's fault: 503 says "retry later", like any overload.
    let status = match refusal {
        RequestRefusal::ReplayCacheFull => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::UNAUTHORIZED,
    };
    Some((status, Json(RefusedAnswer::new(refusal.name()))).into_response())
}

/// HO-L3: every internal answer's `Date` is this cell's clock, the one it judges a signed
/// request's timestamp by (hyper's would be the machine's), so a director measures the offset
/// that makes the cell refuse it.
pub(super) async fn own_date(State(sh): State<Arc<Shared>>, mut resp: Response) -> Response {
    // Up to the end of year 9999 (what an HTTP date can say).
    const LAST_HTTP_DATE_MS: u64 = 253_402_300_799_000;
    let ms = sh.clock.now().as_ms().min(LAST_HTTP_DATE_MS);
    let at = std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(ms));
    if let Some(v) = at.and_then(|at| HeaderValue::from_str(&httpdate::fmt_http_date(at)).ok()) {
        resp.headers_mut().insert(header::DATE, v);
    }
    resp
}

fn bad_request(what: &str, e: impl std::fmt::Display) -> Response {
    (StatusCode::BAD_REQUEST, format!("malformed {what}: {e}")).into_response()
}

/// HO-S1 / HO-S2: an idle-handoff request. Answers the durable result, `busy`,
/// `superseded`, `refused`, or `in_progress` if the result is not there within `result_wait`.
pub(super) async fn handoff(
    State(sh): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = authenticate(&sh, &method, &uri, &headers, &body) {
        return refused;
    }
    let req: HandoffRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("handoff request", e),
    };
    let host = req.source.host;
    let now = sh.clock.now();
    // The waiter is registered under the same lock as the input, so the reply (which needs a
    // later input) cannot be delivered before it.
    let (immediate, waiter) = sh.input(host, |ep| {
        let begin = ep.cell.handle_request(now, &req);
        ep.note(host, |_| CellRecord::Request {
            request: req,
            begin,
        });
        answer(&sh, host, &req, begin)
    });
    let mut reply = match (immediate, waiter) {
        (Some(r), _) => r,
        (None, Some(rx)) => match tokio::time::timeout(sh.cfg.result_wait, rx).await {
            Ok(Ok(r)) => r,
            _ => HandoffReply::InProgress { op_id: req.op_id },
        },
        (None, None) => HandoffReply::InProgress { op_id: req.op_id },
    };
    // HO-A1: a duplicate that reaches a source whose machine no longer holds the attempt
    // (retired, restarted) answers the durable record, read-only; the core decides both
    // whether to look and what the record means.
    if needs_durable_record(&reply) {
        match sh.store.recorded_attempt(req.op_id).await {
            Ok(row) => reply = answer_from_record(reply, row.as_ref()),
            Err(e) => debug!(op = %req.op_id, error = %e, "durable record not read"),
        }
    }
    Json(HandoffAnswer::of(reply)).into_response()
}

/// What the handler does with the core's immediate answer: an answer now, or a waiter for the
/// result (registered under the input's lock).
fn answer(
    sh: &Shared,
    host: HostId,
    req: &HandoffRequest,
    begin: Begin,
) -> (
    Option<HandoffReply>,
    Option<tokio::sync::oneshot::Receiver<HandoffReply>>,
) {
    match begin {
        Begin::Started(a) => {
            sh.stats.bump(|s| s.attempts_started += 1);
            debug!(host = host.0, op = %a.op_id, "barrier installed");
            (None, wait_for(sh, req.op_id))
        }
        Begin::Answered(HandoffReply::InProgress { op_id }) => (None, wait_for(sh, op_id)),
        Begin::Answered(r) => {
            if let HandoffReply::Busy { counters, .. } = &r {
                sh.stats.bump(|s| s.busy_answers += 1);
                // OPS-2: the answer that keeps a host home, visible in the cell's log.
                info!(host = host.0, busy = ?counters.busy_kinds(), "handoff answered busy");
            }
            (Some(r), None)
        }
    }
}

/// HO-A5: emergency drain / auth enforcement of one host at this cell.
pub(super) async fn drain(
    State(sh): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = authenticate(&sh, &method, &uri, &headers, &body) {
        return refused;
    }
    let req: DrainRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("drain request", e),
    };
    let host = HostId(req.host);
    let now = sh.clock.now();
    // The hard drain itself (every client and the control closed) runs as the core's
    // `HardDrain` / `CloseControl`, whether or not the machine was drained already.
    let (applied, clients) = sh.input(host, |ep| {
        let applied = ep.cell.handle_emergency_drain(now, host, req.reason.into());
        ep.note(host, |_| CellRecord::EmergencyDrain {
            reason: req.reason.into(),
            applied,
        });
        (applied, ep.clients(host))
    });
    if applied == Some(true) {
        sh.stats.bump(|s| s.drains += 1);
        info!(host = host.0, reason = ?req.reason, "host drained");
    }
    Json(DrainAnswer::new(applied, clients)).into_response()
}

/// HO-L1: the drain's recovery path. 200 `{"undrained":true}`, or 409 with the core's stable
/// refusal name (unknown host, not drained, attempt in flight, still closing).
pub(super) async fn undrain(
    State(sh): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = authenticate(&sh, &method, &uri, &headers, &body) {
        return refused;
    }
    let req: UndrainRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("undrain request", e),
    };
    let host = HostId(req.host);
    let undrained = sh.input(host, |ep| {
        let undrained = ep.cell.handle_undrain(host);
        ep.note(host, |_| CellRecord::Undrain {
            refused: undrained.err().map(|r| r.name().to_owned()),
        });
        undrained
    });
    match undrained {
        Ok(()) => {
            sh.stats.bump(|s| s.undrains += 1);
            info!(
                host = host.0,
                "host undrained: its next registration gets a fresh machine"
            );
            Json(UndrainAnswer { undrained: true }).into_response()
        }
        Err(refusal) => {
            debug!(host = host.0, refusal = refusal.name(), "undrain refused");
            (
                StatusCode::CONFLICT,
                Json(RefusedAnswer::new(refusal.name())),
            )
                .into_response()
        }
    }
}

pub(super) async fn stats(
    State(sh): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = authenticate(&sh, &method, &uri, &headers, b"") {
        return refused;
    }
    Json(sh.stats()).into_response()
}
