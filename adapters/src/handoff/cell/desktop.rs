//! The desktop control WebSocket (HO-S3, HO-A4, HO-A5, HO-8): registration in the store, the
//! core's installation of the control, and the session's frames.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use switchyard_core::handoff::store::RegisterRefusal;
use switchyard_core::handoff::Measurement;
use switchyard_core::handoff::{
    admission_refusal_name, close_code, install_turn_away, register_turn_away, TurnAway,
    TurnAwayFrame, STORE_UNAVAILABLE_TURN_AWAY,
};
use switchyard_core::handoff::{
    after_insert, after_register, EnrolRefusal, RegisterTry, Registered, RegistrationStep,
};
use switchyard_core::handoff::{CellId, HostId, SourceAuthority};
use switchyard_core::handoff::{CellRecord, Heartbeat, WorkKind, WorkOp};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::clients::HostQuery;
use super::pump::ControlCmd;
use super::work::Work;
use super::{close_ws, ms, send_json, Shared};
use crate::handoff::proto::{CellToClient, CellToDesktop, DesktopFrame, IDLE_HANDOFF_CAPABILITY};
use crate::handoff::proto::{CELL_STOPPING, CLOSE_GOING_AWAY};
use crate::serve::{IdleEvent, IDLE_CLOSE_CODE, IDLE_CLOSE_REASON};

const CONTROL_QUEUE: usize = 256;

pub(super) async fn desktop_ws(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<HostQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let host = match q.host() {
        Ok(h) => h,
        Err(bad) => return bad.into_response(),
    };
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
    if let Err(e) = sh.cfg.desktop_secret.verify_desktop(q.host, auth) {
        sh.stats.bump(|s| s.control_refused += 1);
        return (StatusCode::UNAUTHORIZED, e.to_string()).into_response();
    }
    let capable = q
        .caps
        .split(',')
        .any(|c| c.trim() == IDLE_HANDOFF_CAPABILITY);
    // HO-S3 / HO-A4: at a live machine the activation is a counted control operation, owned
    // before the first await; refused (retryable) under a barrier. HO-A5: a drained host is
    // refused before the store is written.
    let begun = sh.input(host, |ep| match ep.cell.control_refusal(host) {
        Some(refusal) => Err(refusal.name()),
        None => {
            let begun = ep.cell.handle_begin_control(host);
            // CONF-1: at a live machine the activation is a ControlOp acquire.
            if !matches!(begun, Ok(None)) {
                ep.note(host, |ep| CellRecord::Work {
                    op: WorkOp::Acquire,
                    kind: WorkKind::ControlOp,
                    machine: begun.ok().flatten().map(|w| w.machine),
                    ok: begun.is_ok(),
                    refused: begun.err(),
                    after: ep.counters(host),
                });
            }
            begun.map_err(admission_refusal_name)
        }
    });
    let op = match begun {
        Ok(op) => op.map(|w| Work::adopt(&sh, w)),
        Err(name) => {
            sh.stats.bump(|s| s.control_refused += 1);
            return (StatusCode::SERVICE_UNAVAILABLE, name).into_response();
        }
    };
    let here = crate::machine::Here::now();
    sh.server
        .ws(ws)
        .on_upgrade(move |socket| here.run(desktop_session(sh, host, capable, op, socket)))
}

/// Register in the store (HO-A4: under the host lock there). An unknown host is enrolled here
/// or refused as the core decides (`enrol::after_register` / `after_insert`, behind the
/// cell's `--enrol-unknown-hosts`); this runs the store calls it asks for. `Err`: the store
/// could not be reached, or its answer is unknown.
async fn register(sh: &Shared, host: HostId, capable: bool) -> Result<Registered, String> {
    let cell = sh.cfg.cell;
    let enrol = sh.cfg.enroll_unknown_hosts;
    let mut attempt = RegisterTry::First;
    loop {
        let answer = sh
            .store
            .register_control(sh.clock.now(), host, cell, sh.incarnation, capable)
            .await
            .map_err(|e| e.to_string())?;
        let mut step = after_register(enrol, attempt, answer);
        if step == RegistrationStep::InsertHost {
            let inserted = sh
                .store
                .insert_host(host, cell, capable)
                .await
                .map_err(|e| e.to_string())?;
            step = after_insert(inserted);
        }
        match step {
            RegistrationStep::Done(end) => return Ok(end),
            RegistrationStep::RegisterAgain => attempt = RegisterTry::AfterEnrolment,
            // The core asks for an insert only after a first registration.
            RegistrationStep::InsertHost => {
                return Ok(Registered::Refused(RegisterRefusal::UnknownHost))
            }
        }
    }
}

/// Turn a control away as the core decided: its frame, then its close code.
async fn turn_away(mut socket: WebSocket, t: TurnAway, what: &str) {
    let frame = match t.frame {
        TurnAwayFrame::Draining => Some(CellToDesktop::Draining {
            reason: t.name.to_owned(),
        }),
        TurnAwayFrame::Retry => Some(CellToDesktop::retry(what, None, t.name)),
        TurnAwayFrame::None => None,
    };
    if let Some(frame) = frame {
        let _ = send_json(&mut socket, &frame).await;
    }
    close_ws(socket, t.close_code, t.name).await;
}

async fn desktop_session(
    sh: Arc<Shared>,
    host: HostId,
    capable: bool,
    op: Option<Work>,
    socket: WebSocket,
) {
    sh.stats.bump(|s| s.control_registrations += 1);
    let authority = match register(&sh, host, capable).await {
        Ok(Registered::Yes(a)) => a,
        Ok(Registered::Refused(refusal)) => {
            // HO-A4: e.g. a committed handoff won: the old ownership is refused.
            drop(op);
            return turn_away(socket, register_turn_away(refusal), "register").await;
        }
        Ok(Registered::NotEnrolled(refusal)) => {
            // SCALE-1: a bound or the cell's policy, named as such (the database is fine).
            let t = refusal.turn_away();
            let mut first = false;
            sh.stats.bump(|s| {
                let kind = match refusal {
                    EnrolRefusal::Disabled => &mut s.enrolments_disabled,
                    EnrolRefusal::Store(_) => &mut s.enrolments_full,
                };
                first = *kind == 0;
                *kind += 1;
                s.enrolments_refused += 1;
            });
            // OPS-2: once when each cause is first met, not per desktop retry.
            if first {
                match refusal {
                    EnrolRefusal::Disabled => warn!(host = host.0, refusal = t.name, "enrolment refused: the store does not know this host and this cell does not enrol unknown hosts (--enrol-unknown-hosts false); provision the host, or let a cell enrol it"),
                    EnrolRefusal::Store(_) => warn!(host = host.0, refusal = t.name, "enrolment refused by the store (a store bound is reached; raise it with the cell's flags)"),
                }
            } else {
                debug!(host = host.0, refusal = t.name, "enrolment refused");
            }
            drop(op);
            return turn_away(socket, t, "enrol").await;
        }
        Err(e) => {
            warn!(host = host.0, error = %e, "control registration failed");
            drop(op);
            return turn_away(socket, STORE_UNAVAILABLE_TURN_AWAY, "register").await;
        }
    };
    let (tx, rx) = mpsc::channel(CONTROL_QUEUE);
    let now = sh.clock.now();
    // The activation's ticket goes to the core, which releases it whatever it decides.
    let op = op.and_then(Work::into_core);
    let installed = sh.input(host, |ep| {
        let installed = ep.cell.handle_install_control(now, authority, capable, op);
        ep.note(host, |ep| CellRecord::Install {
            result: installed,
            after: ep.counters(host),
        });
        if let Ok(i) = installed {
            // Linked before the decisions run: a replaced session's close is for another link.
            ep.link_control(host, i, tx);
        }
        installed
    });
    let installed = match installed {
        Ok(i) => i,
        Err(refusal) => {
            sh.stats.bump(|s| s.control_refused += 1);
            debug!(
                host = host.0,
                refusal = refusal.name(),
                "control not installed"
            );
            return turn_away(socket, install_turn_away(refusal), "control").await;
        }
    };
    let until = now.plus_ms(ms(sh.cfg.activity_lease));
    let _ = sh
        .store
        .renew_activity(host, sh.cfg.cell, authority.generation, until)
        .await;
    let hello = CellToDesktop::Registered {
        cell: authority.cell.0,
        epoch: authority.epoch.0,
        incarnation: authority.incarnation.0,
        generation: authority.generation.0,
        capable,
    };
    let mut socket = socket;
    if send_json(&mut socket, &hello).await.is_ok() {
        control_loop(&sh, host, authority, socket, rx).await;
    }
    // The session ended: the core decides whether it still mattered (a session it replaced or
    // closed itself is ignored there).
    let now = sh.clock.now();
    sh.input(host, |ep| {
        ep.unlink_control(installed.session);
        let told = ep.cell.handle_control_closed(now, host, installed.session);
        ep.note(host, |_| CellRecord::ControlClosed {
            session: installed.session,
            told,
        });
        told
    });
}

async fn control_loop(
    sh: &Arc<Shared>,
    host: HostId,
    authority: SourceAuthority,
    mut socket: WebSocket,
    mut rx: mpsc::Receiver<ControlCmd>,
) {
    let mut stop = sh.shutdown.listener();
    let mut idle = sh.server.idle();
    loop {
        tokio::select! {
            biased;
            () = stop.stopped() => {
                // OPS-1: the desktop resolves and reconnects (here once the cell is back).
                if sh.graceful() {
                    let frame = CellToDesktop::Draining { reason: CELL_STOPPING.to_owned() };
                    let _ = send_json(&mut socket, &frame).await;
                    close_ws(socket, CLOSE_GOING_AWAY, CELL_STOPPING).await;
                }
                return;
            }
            cmd = rx.recv() => match cmd {
                Some(ControlCmd::Frame(f)) => {
                    if send_json(&mut socket, &f).await.is_err() { return; }
                }
                Some(ControlCmd::Close(reason)) => {
                    let frame = CellToDesktop::Draining { reason: reason.name().to_owned() };
                    let _ = send_json(&mut socket, &frame).await;
                    return close_ws(socket, close_code::NORMAL, reason.name()).await;
                }
                None => return close_ws(socket, close_code::NORMAL, "closed").await,
            },
            event = idle.next() => match event {
                IdleEvent::Ping => {
                    if socket.send(Message::Ping(Default::default())).await.is_err() { return; }
                }
                IdleEvent::Expired => return close_ws(socket, IDLE_CLOSE_CODE, IDLE_CLOSE_REASON).await,
            },
            msg = socket.recv() => {
                let msg = match msg {
                    Some(Ok(msg)) => msg,
                    Some(Err(e)) => return sh.server.note_ws_error(&e),
                    None => return,
                };
                idle.heard();
                match msg {
                    Message::Text(t) => match serde_json::from_str::<DesktopFrame>(&t) {
                        Ok(f) => {
                            if let Some(reply) = on_desktop_frame(sh, host, authority, f).await {
                                if send_json(&mut socket, &reply).await.is_err() { return; }
                            }
                        }
                        Err(e) => debug!(host = host.0, %e, "malformed desktop frame"),
                    },
                    Message::Ping(_) | Message::Pong(_) => {
                        // HO-8: heartbeats are not client work (the core's `&self` input).
                        let _ = sh.locked().cell.handle_heartbeat(host, Heartbeat::Ping);
                    }
                    Message::Close(_) => return,
                    Message::Binary(_) => {}
                }
            }
        }
    }
}

async fn on_desktop_frame(
    sh: &Arc<Shared>,
    host: HostId,
    authority: SourceAuthority,
    frame: DesktopFrame,
) -> Option<CellToDesktop> {
    match frame {
        DesktopFrame::Measure {
            target,
            current_rtt_ms,
            target_rtt_ms,
        } => {
            let m = Measurement {
                measured_at: sh.clock.now(),
                current_rtt_ms,
                target_rtt_ms,
            };
            if let Err(e) = sh.store.put_measurement(host, CellId(target), &m).await {
                debug!(host = host.0, %e, "measurement not stored");
            }
            None
        }
        DesktopFrame::Activity => {
            let _ = sh
                .locked()
                .cell
                .handle_heartbeat(host, Heartbeat::ActivityRenewal);
            let until = sh.clock.now().plus_ms(ms(sh.cfg.activity_lease));
            let _ = sh
                .store
                .renew_activity(host, sh.cfg.cell, authority.generation, until)
                .await;
            None
        }
        DesktopFrame::Credential { seq } => {
            // A counted control operation: refused (retryable) under a barrier.
            let mut work = match Work::acquire(sh, host, WorkKind::ControlOp) {
                Ok(w) => w,
                Err(r) => {
                    return Some(CellToDesktop::retry(
                        "credential",
                        Some(seq),
                        admission_refusal_name(r),
                    ))
                }
            };
            sh.hooks.credential_persist.reached().await;
            let until = sh.clock.now().plus_ms(ms(sh.cfg.activity_lease));
            let persisted = sh
                .store
                .renew_activity(host, sh.cfg.cell, authority.generation, until)
                .await;
            if persisted.is_err() {
                return Some(CellToDesktop::retry(
                    "credential",
                    Some(seq),
                    STORE_UNAVAILABLE_TURN_AWAY.name,
                ));
            }
            if !work.revalidate() {
                return Some(CellToDesktop::retry("credential", Some(seq), "abandoned"));
            }
            drop(work);
            Some(CellToDesktop::CredentialDone { seq })
        }
        DesktopFrame::Ack { conn, id } => {
            let ep = sh.locked();
            if let Some(c) = ep.client(host, conn) {
                let _ = c.try_send(CellToClient::Ack { id });
            }
            None
        }
    }
}
