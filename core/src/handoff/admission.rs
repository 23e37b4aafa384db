//! Source-cell admission for one host: quiescence tickets (HO-7), the handoff barrier
//! (HO-S2 / HO-S3) and late-continuation re-checks.
//!
//! Every unit of relay work at the source takes a [`Ticket`] *before its first await* and
//! releases it exactly once (the adapter wraps it in an RAII guard). Idleness is "no live
//! ticket", counted from these tickets only: control-socket heartbeats (HO-8) and DB activity
//! leases (HO-10) are accepted only through `&self` methods, so they cannot change it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::{Generation, HostId, OpId};
use crate::MonoMs;

/// HO-S3: WebSocket close code for a client that reaches a gated (or moved) source. Mobiles
/// already re-resolve on it.
pub const WRONG_CELL_CLOSE_CODE: u16 = 4409;

/// Bound on live tickets for one host; beyond it new work is refused (typed, never a panic).
pub const MAX_TICKETS_PER_HOST: usize = 4096;
/// SEC-1 / SEC-3: clients one host holds (accepts in flight, attaches waiting for persistence,
/// attached clients); the next is refused with [`AdmissionRefusal::HostFull`]. Below
/// `MAX_TICKETS_PER_HOST`, so the clients' splices and the desktop's control work still fit.
pub const MAX_CLIENTS_PER_HOST: usize = 1024;

/// HO-7: the five kinds of work that make a host non-idle. HO-1: direct LAN sessions and
/// running terminal processes are not relay clients, so they have no kind here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WorkKind {
    /// An accept in flight, owned before the first async step that could admit the host.
    Accept,
    /// An active client connection, including an attach waiting for durable persistence.
    ClientConn,
    /// An active splice.
    Splice,
    /// A pending connection.
    PendingConn,
    /// A control operation that installs credentials, changes the connection basis or creates
    /// admissions (counted from the real handlers). Heartbeats are not control operations.
    ControlOp,
}

impl WorkKind {
    pub const ALL: [WorkKind; 5] = [
        WorkKind::Accept,
        WorkKind::ClientConn,
        WorkKind::Splice,
        WorkKind::PendingConn,
        WorkKind::ControlOp,
    ];

    /// Client-side work is refused with `WrongCell` at a gated source; control work is
    /// refused with a retryable `ControlGated`.
    #[must_use]
    pub fn is_client_work(self) -> bool {
        !matches!(self, WorkKind::ControlOp)
    }
}

/// HO-7: the quiescence counters. Derived from live tickets, so they cannot go negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct QuiescenceCounters {
    pub accepts: u32,
    pub client_conns: u32,
    pub splices: u32,
    pub pending_conns: u32,
    pub control_ops: u32,
}

impl QuiescenceCounters {
    #[must_use]
    pub fn get(&self, kind: WorkKind) -> u32 {
        match kind {
            WorkKind::Accept => self.accepts,
            WorkKind::ClientConn => self.client_conns,
            WorkKind::Splice => self.splices,
            WorkKind::PendingConn => self.pending_conns,
            WorkKind::ControlOp => self.control_ops,
        }
    }

    fn slot(&mut self, kind: WorkKind) -> &mut u32 {
        match kind {
            WorkKind::Accept => &mut self.accepts,
            WorkKind::ClientConn => &mut self.client_conns,
            WorkKind::Splice => &mut self.splices,
            WorkKind::PendingConn => &mut self.pending_conns,
            WorkKind::ControlOp => &mut self.control_ops,
        }
    }

    /// HO-7: idle iff every counter is zero.
    #[must_use]
    pub fn is_zero(&self) -> bool {
        WorkKind::ALL.iter().all(|k| self.get(*k) == 0)
    }

    /// HO-S2: the non-zero counters a `Busy` answer names.
    #[must_use]
    pub fn busy_kinds(&self) -> Vec<WorkKind> {
        WorkKind::ALL
            .iter()
            .copied()
            .filter(|k| self.get(*k) > 0)
            .collect()
    }

    #[must_use]
    pub fn total(&self) -> u64 {
        WorkKind::ALL.iter().map(|k| u64::from(self.get(*k))).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TicketId(pub u64);

/// HO-7: ownership of one unit of work. Ids are never reused within one gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ticket {
    pub id: TicketId,
    /// The control-session generation the work was admitted under.
    pub generation: Generation,
    pub kind: WorkKind,
}

/// Why new work is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AdmissionRefusal {
    /// HO-S3: a new client at a gated or moved source: close with [`WRONG_CELL_CLOSE_CODE`].
    WrongCell,
    /// HO-S3: a new control activation / rebind while gated: ordinary retryable error.
    ControlGated,
    /// Control work at a source retired by a handoff (or stale authority).
    SourceRetired,
    /// HO-A5: the source is being emergency-drained (hard-drain path unchanged).
    SourceDraining,
    /// Bound reached (`MAX_TICKETS_PER_HOST`).
    TooManyTickets,
    /// SEC-1: the host holds `MAX_CLIENTS_PER_HOST` clients: "too many clients", not a wrong
    /// cell (the client must not re-resolve; the host is here).
    HostFull,
}

impl AdmissionRefusal {
    /// The WebSocket close code the adapter uses for a refused client, if it is `WrongCell`.
    #[must_use]
    pub fn close_code(self) -> Option<u16> {
        match self {
            AdmissionRefusal::WrongCell => Some(WRONG_CELL_CLOSE_CODE),
            _ => None,
        }
    }
}

/// HO-7: what a release did. Anything but `Released` is a reported no-op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReleaseReport {
    Released,
    /// The ticket was already released (or abandoned by [`AdmissionGate::handle_revalidate`]).
    DoubleRelease,
    /// This gate never issued the ticket.
    UnknownTicket,
    /// The release carries a generation that does not match the ticket (an old session's or
    /// an old process's guard).
    StaleGeneration,
}

/// HO-S3: answer to "is my ticket still valid after this await?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Revalidation {
    Continue,
    /// Abandon the continuation. The gate has already released the ticket (see `release`):
    /// the adapter disarms its guard and must not admit anything.
    Abandon {
        reason: AbandonReason,
        release: ReleaseReport,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AbandonReason {
    /// HO-A4: the session the work belonged to was replaced (newer generation).
    SessionReplaced,
    /// HO-S5 / HO-S6: the source was retired by a handoff.
    SourceRetired,
    /// HO-A5: emergency drain.
    SourceDraining,
    /// The ticket is not live (released, abandoned, or never issued here).
    TicketNotLive,
}

/// HO-8: control-socket traffic that is not client work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Heartbeat {
    Ping,
    Pong,
    ActivityRenewal,
}

/// HO-10: what the adapter may observe about a DB activity lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ActivityLease {
    Missing,
    Expired { expired_at: MonoMs },
    Live { until: MonoMs },
}

/// Acknowledgement that an input was *not* counted as client work or idleness evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NotCounted {
    /// HO-8.
    NotClientWork,
    /// HO-10.
    NotIdlenessEvidence,
}

/// HO-S2 / HO-S3: the barrier of one handoff attempt, carrying its generation token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Barrier {
    op_id: OpId,
    /// Attempt sequence number within this source machine (distinguishes re-tries of one op).
    seq: u32,
    generation: Generation,
    installed_at: MonoMs,
}

impl Barrier {
    /// The op id of the attempt the barrier is for.
    #[must_use]
    pub fn op_id(&self) -> OpId {
        self.op_id
    }

    /// Attempt sequence number within this source machine.
    #[must_use]
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// The generation the barrier was installed under.
    #[must_use]
    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// When the barrier was installed.
    #[must_use]
    pub fn installed_at(&self) -> MonoMs {
        self.installed_at
    }
}

/// Why a gate is closed for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClosedReason {
    /// HO-S5: the handoff committed; the source retires through the draining path.
    Committed,
    /// HO-S6: the source authority changed under us; retire the stale source.
    StaleAuthority,
    /// HO-A5: emergency drain / auth enforcement.
    Drained,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GateState {
    /// Admitting.
    Open,
    /// HO-S3: a handoff barrier stands.
    Gated(Barrier),
    /// Never admits again (a replacement gets a new machine).
    Closed(ClosedReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct TicketRecord {
    generation: Generation,
    kind: WorkKind,
}

/// Admission gate of one host at the source cell.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AdmissionGate {
    host: HostId,
    /// Current control-session generation.
    generation: Generation,
    next_ticket: u64,
    live: BTreeMap<TicketId, TicketRecord>,
    counters: QuiescenceCounters,
    state: GateState,
    /// HO-A5: set by an emergency drain; a drained gate never reopens.
    drained: bool,
}

impl AdmissionGate {
    #[must_use]
    pub fn new(host: HostId, generation: Generation) -> AdmissionGate {
        AdmissionGate {
            host,
            generation,
            next_ticket: 0,
            live: BTreeMap::new(),
            counters: QuiescenceCounters::default(),
            state: GateState::Open,
            drained: false,
        }
    }

    #[must_use]
    pub fn host(&self) -> HostId {
        self.host
    }

    #[must_use]
    pub fn generation(&self) -> Generation {
        self.generation
    }

    #[must_use]
    pub fn state(&self) -> GateState {
        self.state
    }

    #[must_use]
    pub fn barrier(&self) -> Option<Barrier> {
        match self.state {
            GateState::Gated(b) => Some(b),
            _ => None,
        }
    }

    #[must_use]
    pub fn is_drained(&self) -> bool {
        self.drained
    }

    /// HO-7: the quiescence counters (live tickets by kind).
    #[must_use]
    pub fn counters(&self) -> QuiescenceCounters {
        self.counters
    }

    /// HO-7: the quiescence predicate. Takes nothing but the gate: no lease, no timer.
    /// HO-2: it is the source cell's real connection state at this instant (no mobile
    /// background grace timer), and the open desktop control socket is not part of it.
    #[must_use]
    pub fn is_idle(&self) -> bool {
        self.counters.is_zero()
    }

    /// SEC-1: clients the host holds now (see [`MAX_CLIENTS_PER_HOST`]).
    #[must_use]
    pub fn clients(&self) -> usize {
        let c = self.counters;
        [c.accepts, c.client_conns, c.pending_conns]
            .iter()
            .map(|&n| n as usize)
            .sum()
    }

    /// Live tickets, in id order (for checkers and diagnostics).
    pub fn live_tickets(&self) -> impl Iterator<Item = Ticket> + '_ {
        self.live.iter().map(|(id, r)| Ticket {
            id: *id,
            generation: r.generation,
            kind: r.kind,
        })
    }

    fn refusal_for(&self, kind: WorkKind) -> Option<AdmissionRefusal> {
        if self.drained {
            return Some(AdmissionRefusal::SourceDraining);
        }
        match self.state {
            GateState::Open => None,
            GateState::Gated(_) if kind.is_client_work() => Some(AdmissionRefusal::WrongCell),
            GateState::Gated(_) => Some(AdmissionRefusal::ControlGated),
            GateState::Closed(_) if kind.is_client_work() => Some(AdmissionRefusal::WrongCell),
            GateState::Closed(_) => Some(AdmissionRefusal::SourceRetired),
        }
    }

    /// HO-7 / HO-S3: take a ticket for new work under the current generation. Refused while a
    /// barrier stands (clients get `WrongCell`, control activations `ControlGated`).
    pub fn handle_acquire(&mut self, kind: WorkKind) -> Result<Ticket, AdmissionRefusal> {
        if let Some(refusal) = self.refusal_for(kind) {
            return Err(refusal);
        }
        if self.live.len() >= MAX_TICKETS_PER_HOST {
            return Err(AdmissionRefusal::TooManyTickets);
        }
        // Only a new client is refused: converting one already counted (accept -> pending ->
        // connection) takes its new ticket before releasing the old one and must not fail.
        if kind == WorkKind::Accept && self.clients() >= MAX_CLIENTS_PER_HOST {
            return Err(AdmissionRefusal::HostFull);
        }
        let ticket = Ticket {
            id: TicketId(self.next_ticket),
            generation: self.generation,
            kind,
        };
        // u64 ids cannot wrap in practice; saturating keeps the "never reused" claim honest.
        self.next_ticket = self.next_ticket.saturating_add(1);
        let previous = self.live.insert(
            ticket.id,
            TicketRecord {
                generation: ticket.generation,
                kind,
            },
        );
        crate::invariant!(previous.is_none(), "ticket id reused");
        *self.counters.slot(kind) += 1;
        self.assert_consistent();
        Ok(ticket)
    }

    /// HO-7: release a ticket exactly once. A double release, an unknown ticket or a stale
    /// generation is a reported no-op; a counter never goes negative.
    pub fn handle_release(&mut self, ticket: Ticket) -> ReleaseReport {
        if ticket.id.0 >= self.next_ticket {
            return ReleaseReport::UnknownTicket;
        }
        let report = match self.live.get(&ticket.id) {
            Some(rec) if rec.generation == ticket.generation && rec.kind == ticket.kind => {
                self.live.remove(&ticket.id);
                let slot = self.counters.slot(ticket.kind);
                assert!(*slot > 0, "counter out of step with live tickets");
                *slot -= 1;
                ReleaseReport::Released
            }
            Some(rec) if rec.generation != ticket.generation => ReleaseReport::StaleGeneration,
            Some(_) => ReleaseReport::UnknownTicket,
            None if ticket.generation < self.generation => ReleaseReport::StaleGeneration,
            None => ReleaseReport::DoubleRelease,
        };
        self.assert_consistent();
        report
    }

    /// HO-S3 / HO-A4: called by a continuation after each await. `Continue` only if the ticket
    /// is live, belongs to the current generation and the source still admits; otherwise the
    /// gate releases the ticket itself and answers `Abandon`.
    pub fn handle_revalidate(&mut self, ticket: Ticket) -> Revalidation {
        let live = self
            .live
            .get(&ticket.id)
            .is_some_and(|r| r.generation == ticket.generation && r.kind == ticket.kind);
        if !live {
            return Revalidation::Abandon {
                reason: AbandonReason::TicketNotLive,
                release: self.handle_release(ticket),
            };
        }
        // A live ticket under a barrier is impossible: the barrier needs zero tickets and
        // refuses new ones.
        crate::invariant!(!matches!(self.state, GateState::Gated(_)));
        let reason = if self.drained {
            Some(AbandonReason::SourceDraining)
        } else if matches!(self.state, GateState::Closed(_)) {
            Some(AbandonReason::SourceRetired)
        } else if ticket.generation != self.generation {
            Some(AbandonReason::SessionReplaced)
        } else {
            None
        };
        match reason {
            None => Revalidation::Continue,
            Some(reason) => Revalidation::Abandon {
                reason,
                release: self.handle_release(ticket),
            },
        }
    }

    /// HO-8: ping/pong and activity renewals of the open desktop control socket. `&self`: this
    /// provably cannot touch a counter or the barrier.
    #[must_use]
    pub fn handle_heartbeat(&self, _heartbeat: Heartbeat) -> NotCounted {
        NotCounted::NotClientWork
    }

    /// HO-10: a missing or expired DB activity lease never proves idleness (nor does a live
    /// one prove activity). `&self`: it cannot change the quiescence predicate.
    #[must_use]
    pub fn handle_activity_lease(&self, _lease: ActivityLease) -> NotCounted {
        NotCounted::NotIdlenessEvidence
    }

    /// HO-S2: one synchronous step: check every counter and install the barrier, or return the
    /// counters (holding nothing). Only an open, undrained gate can be gated.
    /// HO-1: a barrier (and so any later retire) only ever stands over zero tickets: no
    /// established client is closed to improve latency.
    pub(crate) fn try_install_barrier(
        &mut self,
        now: MonoMs,
        op_id: OpId,
        seq: u32,
    ) -> Result<Barrier, QuiescenceCounters> {
        crate::invariant!(matches!(self.state, GateState::Open) && !self.drained);
        if !self.counters.is_zero() {
            return Err(self.counters);
        }
        crate::invariant!(self.live.is_empty());
        let barrier = Barrier {
            op_id,
            seq,
            generation: self.generation,
            installed_at: now,
        };
        self.state = GateState::Gated(barrier);
        Ok(barrier)
    }

    /// HO-S6: remove the barrier of exactly this attempt (only on a terminal "not committed,
    /// authority unchanged" outcome). A drained gate never reopens.
    pub(crate) fn reopen(&mut self, op_id: OpId, seq: u32) -> bool {
        match self.state {
            GateState::Gated(b) if b.op_id == op_id && b.seq == seq && !self.drained => {
                self.state = GateState::Open;
                true
            }
            _ => false,
        }
    }

    /// Close the gate for good (HO-S5 commit, HO-S6 stale authority, HO-A5 drain).
    pub(crate) fn close(&mut self, reason: ClosedReason) {
        if !matches!(self.state, GateState::Closed(_)) {
            self.state = GateState::Closed(reason);
        }
    }

    /// HO-A5: mark drained. An open gate closes at once; a barrier stays until its attempt's
    /// terminal outcome (which then closes instead of reopening).
    pub(crate) fn mark_drained(&mut self) {
        self.drained = true;
        if matches!(self.state, GateState::Open) {
            self.state = GateState::Closed(ClosedReason::Drained);
        }
    }

    /// HO-A4: a replacement control registered; new work belongs to `generation`. Old tickets
    /// stay counted until released (their connections are real) but fail `handle_revalidate`.
    pub(crate) fn set_generation(&mut self, generation: Generation) {
        crate::invariant!(generation > self.generation);
        crate::invariant!(matches!(self.state, GateState::Open));
        self.generation = generation;
    }

    fn assert_consistent(&self) {
        crate::invariant_eq!(
            u64::try_from(self.live.len()).unwrap_or(u64::MAX),
            self.counters.total(),
            "counters must equal live tickets"
        );
        crate::invariant!(self.live.len() <= MAX_TICKETS_PER_HOST);
        crate::invariant!(
            !matches!(self.state, GateState::Gated(_)) || self.live.is_empty(),
            "a barrier stands only over zero tickets"
        );
    }
}
