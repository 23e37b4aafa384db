//! The mobile client WebSocket (HO-7, HO-S3, HO-A5), and the public resolve and capabilities
//! endpoints clients and desktops use.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Query, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use switchyard_core::handoff::CellWork;
use switchyard_core::handoff::HostId;
use switchyard_core::handoff::{admission_refusal_name, client_close_code, close_code};
use switchyard_core::handoff::{AdmissionRefusal, CellRecord, WorkKind, WorkOp};
use switchyard_core::handoff::{Attach, AttachClose, AttachStep, PersistFailed};
use switchyard_core::peer_limits::{Pressure, RateRefusal};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::pump::{ControlCmd, LockedCell};
use super::work::Work;
use super::{close_ws, send_json, Shared};
use crate::handoff::client_auth::{verify_client, ClientAuthError};
use crate::handoff::proto::{
    Capabilities, CellToClient, CellToDesktop, ClientFrame, RefusedAnswer, ResolveAnswer,
    Undelivered, IDLE_HANDOFF_CAPABILITY,
};
use crate::handoff::proto::{CELL_STOPPING, CLOSE_GOING_AWAY};
use crate::serve::{IdleEvent, IDLE_CLOSE_CODE, IDLE_CLOSE_REASON};

/// Bounds (SEC-3) per client socket. The bound on clients per host is the core's
/// (`MAX_CLIENTS_PER_HOST`, refused as `HostFull`).
const CLIENT_QUEUE: usize = 64;
const MAX_SPLICES_PER_CLIENT: usize = 64;
const MAX_MUTATION_ID_BYTES: usize = 256;

/// A client that cannot attach here is told why with a close code and a stable reason.
struct Refused {
    code: u16,
    reason: &'static str,
}

impl Refused {
    fn admission(refusal: AdmissionRefusal) -> Refused {
        Refused {
            code: client_close_code(refusal),
            reason: admission_refusal_name(refusal),
        }
    }

    /// HO-S3: the accept was abandoned after an await (its source retired, drained or was
    /// replaced meanwhile): the host is no longer served here, resolve again.
    const ABANDONED: Refused = Refused {
        code: close_code::WRONG_CELL,
        reason: "abandoned",
    };

    /// SEC-1: no valid credential of this host; the client never took a ticket.
    fn unauthenticated(error: ClientAuthError) -> Refused {
        Refused {
            code: close_code::NOT_AUTHENTICATED,
            reason: error.name(),
        }
    }

    async fn close(self, sh: &Shared, host: HostId, socket: WebSocket) {
        // CONF-1: the effect HO-S3 reads (a client turned away, never spliced).
        sh.locked().note(host, |_| CellRecord::ClientRefused {
            code: self.code,
            reason: self.reason.to_owned(),
        });
        match self.code {
            close_code::WRONG_CELL => sh.stats.bump(|s| s.wrong_cell_closes += 1),
            close_code::TOO_MANY_CLIENTS => sh.stats.bump(|s| s.clients_host_full += 1),
            close_code::NOT_AUTHENTICATED => sh.stats.bump(|s| s.clients_unauthenticated += 1),
            _ => {}
        }
        close_ws(socket, self.code, self.reason).await;
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct HostQuery {
    pub(super) host: u64,
    #[serde(default)]
    pub(super) caps: String,
}

impl HostQuery {
    /// SEC-4: the host id as the store holds it (SQL `BIGINT`), or a 400 naming the field.
    pub(super) fn host(&self) -> Result<HostId, (StatusCode, String)> {
        if i64::try_from(self.host).is_err() {
            return Err((
                StatusCode::BAD_REQUEST,
                format!(
                    "host={} is past the largest host id ({})",
                    self.host,
                    i64::MAX
                ),
            ));
        }
        Ok(HostId(self.host))
    }
}

/// SEC-3 (issue #27): the resolve path is unauthenticated and each answer costs a store query,
/// so every request first spends a token of its peer address's bucket (the core's
/// `PeerRateGate`, with the cell's clock); over it: 429 with the reason, counted, and one WARN
/// when refusing starts, one INFO when it ends. A host id past the store's range is answered
/// 400 without a query.
pub(super) async fn resolve(
    State(sh): State<Arc<Shared>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Query(q): Query<HostQuery>,
) -> Response {
    if let Some(Extension(ConnectInfo(peer))) = peer {
        if let Some(refused) = resolve_admit(&sh, peer.ip()) {
            return refused;
        }
    }
    let host = match q.host() {
        Ok(h) => h,
        Err(bad) => return bad.into_response(),
    };
    match sh.store.resolve(host).await {
        Ok(Some(r)) => Json(ResolveAnswer {
            host: q.host,
            cell: r.cell.0,
            epoch: r.epoch.0,
            url: r.public_url,
        })
        .into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "unknown host").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

/// `Some(the 429)` when the peer is over its bound.
fn resolve_admit(sh: &Shared, peer: IpAddr) -> Option<Response> {
    let now = sh.clock.now().0;
    let (verdict, counts, bounds) = {
        let mut gate = sh.resolve_gate.lock().unwrap_or_else(|e| e.into_inner());
        let verdict = gate.check(peer, now);
        (verdict, gate.counts(), gate.bounds())
    };
    match verdict.pressure_changed_to {
        Some(Pressure::Refusing) => {
            let refusal = verdict.outcome.err().map_or("", RateRefusal::name);
            warn!(%peer, refusal, per_second = bounds.per_second, burst = bounds.burst,
                  max_peers = bounds.max_peers,
                  "resolve rate limit reached: refusing with 429 (--resolve-rate-per-peer, --resolve-burst-per-peer, --resolve-max-peers)");
        }
        Some(Pressure::Normal) => info!(
            refused_peer_rate = counts.refused_peer_rate,
            refused_too_many_peers = counts.refused_too_many_peers,
            "resolve answering again: no refusal for a while"
        ),
        None => {}
    }
    let refusal = verdict.outcome.err()?;
    sh.stats.bump(|s| match refusal {
        RateRefusal::PeerRate => s.resolve_refused_peer_rate += 1,
        RateRefusal::TooManyPeers => s.resolve_refused_too_many_peers += 1,
    });
    debug!(%peer, refusal = refusal.name(), "resolve refused");
    Some(
        (
            StatusCode::TOO_MANY_REQUESTS,
            [(axum::http::header::RETRY_AFTER, "1")],
            Json(RefusedAnswer::new(refusal.name())),
        )
            .into_response(),
    )
}

pub(super) async fn capabilities(State(sh): State<Arc<Shared>>) -> Response {
    let mut caps = Vec::new();
    if sh.cfg.handoff_capable {
        caps.push(IDLE_HANDOFF_CAPABILITY.to_owned());
    }
    Json(Capabilities {
        cell: sh.cfg.cell.0,
        incarnation: sh.incarnation.0,
        capabilities: caps,
    })
    .into_response()
}

pub(super) async fn client_ws(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<HostQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let host = match q.host() {
        Ok(h) => h,
        Err(bad) => return bad.into_response(),
    };
    let ws = sh.server.ws(ws);
    // SEC-1: the credential is checked before anything counts: an unauthenticated socket never
    // holds an admission ticket, so it cannot keep the host busy (HO-7).
    let authorization = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    let max_lifetime_ms = super::ms(sh.cfg.client_token_max_lifetime);
    let now_ms = sh.clock.now().0;
    if let Err(e) = verify_client(
        &sh.cfg.desktop_secret,
        host.0,
        authorization,
        now_ms,
        max_lifetime_ms,
    ) {
        debug!(
            host = host.0,
            refusal = e.name(),
            "client not authenticated"
        );
        // Test seam (inert in release builds): the 4401 close is pending here.
        sh.hooks.client_refused.reached().await;
        let here = crate::machine::Here::now();
        return ws.on_upgrade(move |socket| {
            here.run(async move {
                Refused::unauthenticated(e).close(&sh, host, socket).await;
            })
        });
    }
    // HO-7: ownership before the first await that could admit this host.
    let work = Work::acquire(&sh, host, WorkKind::Accept);
    let here = crate::machine::Here::now();
    match work {
        Err(refusal) => ws.on_upgrade(move |socket| {
            here.run(async move {
                Refused::admission(refusal).close(&sh, host, socket).await;
            })
        }),
        // If the upgrade never completes, the callback (and the guard in it) is dropped.
        Ok(work) => ws.on_upgrade(move |socket| here.run(client_session(sh, host, work, socket))),
    }
}

/// HO-7: the core's accept -> persist -> attach machine, owned by this task. Dropped before
/// it attached or closed (the socket's task ends, cancellation), it releases its ticket.
struct AttachGuard {
    sh: Arc<Shared>,
    host: HostId,
    attach: Attach,
}

impl AttachGuard {
    fn poll(&mut self, attached: impl FnOnce(&mut LockedCell, CellWork)) -> AttachStep {
        let attach = &mut self.attach;
        let host = self.host;
        self.sh.input(host, |ep| {
            let before = ep.counters(host).map_or(0, |c| c.accepts);
            let step = attach.poll(&mut ep.cell);
            // CONF-1: the attach machine's work inputs, as one record per step.
            let (op, ok) = match step {
                AttachStep::Persist { .. } => (Some(WorkOp::Revalidate), true),
                AttachStep::Attached(_) => (
                    Some(WorkOp::Convert {
                        to: WorkKind::ClientConn,
                    }),
                    true,
                ),
                AttachStep::Close(_) => (
                    Some(WorkOp::Release),
                    ep.counters(host).map_or(0, |c| c.accepts) < before,
                ),
                AttachStep::Wait => (None, false),
            };
            if let Some(op) = op {
                ep.note(host, |ep| CellRecord::Work {
                    op,
                    kind: WorkKind::Accept,
                    machine: ep.cell.machine(host).map(|(m, _)| m),
                    ok,
                    refused: None,
                    after: ep.counters(host),
                });
            }
            if let AttachStep::Attached(conn) = step {
                // In the same lock as the convert: a hard drain cannot fall in between.
                attached(ep, conn);
            }
            step
        })
    }
}

impl Drop for AttachGuard {
    fn drop(&mut self) {
        if self.attach.ticket().is_some() {
            let attach = &mut self.attach;
            let host = self.host;
            let _ = self.sh.input(host, |ep| {
                let machine = attach.ticket().map(|w| w.machine);
                let report = attach.handle_cancel(&mut ep.cell);
                ep.note(host, |ep| CellRecord::Work {
                    op: WorkOp::Release,
                    kind: WorkKind::Accept,
                    machine,
                    ok: report == Some(switchyard_core::handoff::ReleaseReport::Released),
                    refused: None,
                    after: ep.counters(host),
                });
                report
            });
        }
    }
}

async fn client_session(sh: Arc<Shared>, host: HostId, work: Work, socket: WebSocket) {
    let Some(accept) = work.into_core() else {
        return Refused::ABANDONED.close(&sh, host, socket).await;
    };
    let mut attach = AttachGuard {
        sh: sh.clone(),
        host,
        attach: Attach::new(accept),
    };
    let conn = sh.next_id();
    let (tx, rx) = mpsc::channel(CLIENT_QUEUE);
    let mut tx = Some(tx);
    let mut drain_rx = None;
    let conn_work = loop {
        let step = attach.poll(|ep, conn_work| {
            if let Some(tx) = tx.take() {
                drain_rx = Some(ep.attach_client(host, conn_work.machine, conn, tx));
            }
        });
        match step {
            AttachStep::Persist { authority } => {
                sh.hooks.accept_persist.reached().await;
                // The host's activity, persisted while the Accept ticket still counts.
                let until = sh.clock.now().plus_ms(super::ms(sh.cfg.activity_lease));
                let persisted = sh
                    .store
                    .renew_activity(host, sh.cfg.cell, authority.generation, until)
                    .await
                    .map_err(|e| {
                        debug!(host = host.0, %e, "client activity not persisted");
                        PersistFailed
                    });
                attach.attach.handle_persisted(persisted);
            }
            AttachStep::Attached(conn_work) => break conn_work,
            AttachStep::Close(close) => {
                if close == AttachClose::ActivityNotPersisted {
                    sh.stats.bump(|s| s.clients_persist_failed += 1);
                }
                let refused = Refused {
                    code: close.close_code(),
                    reason: close.name(),
                };
                return refused.close(&sh, host, socket).await;
            }
            // Not reachable (each poll follows an input); closing is the safe answer.
            AttachStep::Wait => return Refused::ABANDONED.close(&sh, host, socket).await,
        }
    };
    let Some(drain_rx) = drain_rx else {
        return;
    };
    let work = Work::adopt(&sh, conn_work);
    sh.stats.bump(|s| s.clients_attached += 1);
    client_loop(&sh, host, conn, socket, rx, drain_rx).await;
    {
        let mut ep = sh.locked();
        ep.detach_client(host, conn);
        ep.note(host, |_| CellRecord::ClientLeft { conn });
    }
    drop(work);
}

async fn client_loop(
    sh: &Arc<Shared>,
    host: HostId,
    conn: u64,
    mut socket: WebSocket,
    mut rx: mpsc::Receiver<CellToClient>,
    mut drain_rx: watch::Receiver<bool>,
) {
    let mut stop = sh.shutdown.listener();
    let mut idle = sh.server.idle();
    let mut splices: BTreeMap<String, Work> = BTreeMap::new();
    let hello = CellToClient::Attached {
        cell: sh.cfg.cell.0,
    };
    if send_json(&mut socket, &hello).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            biased;
            () = stop.stopped() => {
                // OPS-1: a graceful stop says why; a crash drops the socket.
                if sh.graceful() {
                    close_ws(socket, CLOSE_GOING_AWAY, CELL_STOPPING).await;
                }
                return;
            }
            out = rx.recv() => {
                let Some(out) = out else { break };
                if let CellToClient::Ack { id } = &out {
                    splices.remove(id);
                }
                if send_json(&mut socket, &out).await.is_err() { break; }
            }
            drained = async { drain_rx.wait_for(|d| *d).await.is_ok() } => {
                if !drained {
                    // The host's state is gone (the cell stops): drop the socket as a crash
                    // would, without a close frame.
                    return;
                }
                // Hard drain, unchanged by the handoff: close within its deadline.
                let _ = tokio::time::timeout(
                    sh.cfg.hard_drain_deadline,
                    close_ws(socket, close_code::DRAINING, "draining"),
                )
                .await;
                return;
            }
            event = idle.next() => match event {
                IdleEvent::Ping => {
                    if socket.send(Message::Ping(Default::default())).await.is_err() { break; }
                }
                IdleEvent::Expired => {
                    return close_ws(socket, IDLE_CLOSE_CODE, IDLE_CLOSE_REASON).await;
                }
            },
            msg = socket.recv() => {
                let msg = match msg {
                    Some(Ok(msg)) => msg,
                    Some(Err(e)) => {
                        sh.server.note_ws_error(&e);
                        break;
                    }
                    None => break,
                };
                idle.heard();
                match msg {
                    Message::Text(t) => {
                        let answer = match serde_json::from_str::<ClientFrame>(&t) {
                            Ok(ClientFrame::Mutation { id, body }) => {
                                relay_mutation(sh, host, conn, id, body, &mut splices)
                            }
                            Err(e) => {
                                debug!(host = host.0, %e, "malformed client frame");
                                Some(Undelivered::Malformed.frame(String::new()))
                            }
                        };
                        if let Some(a) = answer {
                            if send_json(&mut socket, &a).await.is_err() { break; }
                        }
                    }
                    Message::Close(_) => break,
                    _ => {}
                }
            }
        }
    }
}

/// A mutation travels to the desktop under a Splice ticket held until its ack.
fn relay_mutation(
    sh: &Arc<Shared>,
    host: HostId,
    conn: u64,
    id: String,
    body: String,
    splices: &mut BTreeMap<String, Work>,
) -> Option<CellToClient> {
    if id.is_empty() || id.len() > MAX_MUTATION_ID_BYTES || splices.contains_key(&id) {
        return Some(Undelivered::BadId.frame(id));
    }
    if splices.len() >= MAX_SPLICES_PER_CLIENT {
        return Some(Undelivered::TooManyInFlight.frame(id));
    }
    let splice = match Work::acquire(sh, host, WorkKind::Splice) {
        Ok(w) => w,
        Err(r) => return Some(Undelivered::Refused(r).frame(id)),
    };
    let sent = {
        let ep = sh.locked();
        ep.control_of(host).is_some_and(|tx| {
            tx.try_send(ControlCmd::Frame(CellToDesktop::Relay {
                conn,
                id: id.clone(),
                body,
            }))
            .is_ok()
        })
    };
    if !sent {
        drop(splice);
        return Some(Undelivered::DesktopNotConnected.frame(id));
    }
    sh.stats.bump(|s| s.relayed += 1);
    splices.insert(id, splice);
    None
}
