//! The cell's and the director's journals judged (CONF-1): the spec's record of each host's
//! barrier, counters and attempt outcome, rebuilt from the journal, and the handoff properties'
//! predicates judged on it.
//!
//! A cell journals one key per host of one cell process (`cell/<cell>/<incarnation>/host/<host>`,
//! and the process's `Start` under `cell/<cell>/<incarnation>`). [`CellJudge`] rebuilds, per key:
//! - the counters of the host's machine (HO-7), re-derived from every work input (an acquire
//!   adds one of its kind, a release or an abandon takes one, a convert moves one) and compared
//!   with the counters the cell read after the input;
//! - the gate: no machine, open, a barrier standing for one op id, retired, drained;
//! - the standing attempt's terminal outcome (a transaction or reconciliation result the
//!   machine applied).
//!
//! and judges, transcribing the rules of `spec/src/handoff/properties.rs` (each named by its ID):
//! - HO-S3: nothing admitted while a barrier stands: no ticket granted, no rebind installed, no
//!   client spliced in;
//! - HO-7 / HO-S2: a barrier (`Started`) only over zero counters; `Busy` only over live work,
//!   naming exactly the live counters (so `Busy` iff live work);
//! - HO-A2 / HO-S6: a barrier reopened (`ReopenAdmission`) only after the machine applied an
//!   explicit rollback of that attempt: reopened with no terminal outcome departs HO-A2, after
//!   a commit HO-S5, after an authority change HO-S6; a drained source never reopens (HO-A5);
//! - HO-S5: a commit retires the source (a `RetireSourceDraining` as committed needs the
//!   committed outcome), and a retired machine admits nothing again;
//! - HO-1: a source retires only with zero counters (no client is closed by a handoff); a
//!   client spliced in holds a counted connection;
//! - HO-A2: a store call's answer (`StoreAnswered`, the line before the result fed) read as the
//!   requirement reads it: an outcome as the store gave it, and no answer (a timeout, a fault,
//!   a fence not written) never as an outcome, so a driver that reads a timeout as an abort
//!   and reopens departs.
//!
//! Gaps ([`JournalRecord::Gap`]): a cell key re-synchronises. After a gap the counters are
//! unknown until the next record that carries them (`after` of a work or install record), and
//! the gate is unknown until the next record that fixes it (a `Started` answer, a reopen, a
//! retirement, a drain, a new machine installed, an undrain or forget); the checks that read an
//! unknown part are skipped meanwhile. No search is needed: every record that changes the
//! counters carries them. [`DirectorJudge`] keeps nothing across requests that a gap could
//! hide except the request in flight, which it forgets. Both count their gaps in
//! `gaps_searched`.
//!
//! The director's key (`director/<id>`) is judged for HO-S1 (every op id sent is the UUIDv5 of
//! its exact source authority and target, so the same for the same authority and target across
//! retries and restarts; an answer names the op id sent) and HO-S2 (an answer is classified as
//! the dispatch budget must: busy and in progress are deferrals, never failures).

use switchyard_core::handoff::{
    Begin, CellAction, CellRecord, DirectorRecord, DispatchClass, DispatchOutcome, Disposition,
    DurableResult, Fed, HandoffAction, HandoffReply, InstallKind, MachineId, OpId,
    QuiescenceCounters, RetireReason, StoreAnswer, StoreCall, TxnOutcome, WorkKind, WorkOp,
};
use switchyard_core::journal::{JournalLine, JournalRecord};

use super::{Departure, Judge, Judged};

/// The gate of a host's machine as the journal shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Not known (after a gap): the checks that read it are skipped.
    Unknown,
    /// No machine for the host here.
    Absent,
    Open,
    /// A barrier stands for this op id.
    Gated(OpId),
    /// Closed for good (committed or stale authority).
    Retired,
}

/// One cell key's judge.
#[derive(Debug)]
pub struct CellJudge {
    gaps: u64,
    machine: Option<MachineId>,
    /// `None`: unknown (after a gap, until a record carries them).
    counters: Option<QuiescenceCounters>,
    gate: Gate,
    /// HO-A5: drained (nothing admitted, nothing reopened) until undrained.
    drained: bool,
    /// The terminal outcome the machine applied for the standing barrier's attempt.
    outcome: Option<TxnOutcome>,
    /// HO-1: clients spliced in and not yet gone (`None`: unknown, after a gap).
    clients: Option<u32>,
    /// HO-A2: the store's answer on the line before, unread (only the next line reads it).
    answer: Option<(StoreCall, StoreAnswer)>,
}

impl Default for CellJudge {
    fn default() -> CellJudge {
        CellJudge {
            gaps: 0,
            machine: None,
            counters: Some(QuiescenceCounters::default()),
            gate: Gate::Absent,
            drained: false,
            outcome: None,
            clients: Some(0),
            answer: None,
        }
    }
}

impl CellJudge {
    #[must_use]
    pub fn new() -> CellJudge {
        CellJudge::default()
    }

    fn cell(
        &mut self,
        line: u64,
        rec: &CellRecord,
        answered: Option<(StoreCall, StoreAnswer)>,
    ) -> Judged {
        let depart = |requirement: &'static str, event: String, allowed: &str| {
            Departure::new(line, requirement, event, allowed)
        };
        match rec {
            CellRecord::Start
            | CellRecord::ControlClosed { .. }
            | CellRecord::Timeout { .. }
            | CellRecord::FenceResult { .. }
            | CellRecord::SetEnabled { .. }
            | CellRecord::ClientRefused { .. } => Ok(()),
            CellRecord::ClientLeft { .. } => {
                self.clients = self.clients.map(|n| n.saturating_sub(1));
                Ok(())
            }
            CellRecord::Work {
                op,
                kind,
                machine,
                ok,
                refused: _,
                after,
            } => self.work(line, *op, *kind, *machine, *ok, *after),
            CellRecord::Install { result, after } => {
                if let Ok(installed) = result {
                    match installed.how {
                        InstallKind::NewMachine | InstallKind::OverRetired => {
                            if installed.how == InstallKind::OverRetired
                                && matches!(self.gate, Gate::Gated(_) | Gate::Open)
                            {
                                return Err(depart(
                                    "HO-A4",
                                    format!("a fresh machine installed over a live one ({:?})", self.gate),
                                    "a fresh machine only over a retired one; a live one is rebound",
                                ));
                            }
                            self.machine = Some(installed.machine);
                            self.gate = Gate::Open;
                            self.drained = false;
                            self.outcome = None;
                        }
                        InstallKind::Rebound => {
                            if let Gate::Gated(op) = self.gate {
                                return Err(depart(
                                    "HO-S3",
                                    format!(
                                        "a control rebound while the barrier of op {op} stands"
                                    ),
                                    "no rebind while a barrier stands (refused, retryable)",
                                ));
                            }
                            self.machine = Some(installed.machine);
                        }
                    }
                }
                self.counters = *after;
                Ok(())
            }
            CellRecord::Request { request, begin } => {
                match begin {
                    Begin::Started(attempt) => {
                        if let Some(n @ 1..) = self.clients {
                            return Err(depart(
                            "HO-1",
                            format!("barrier installed for op {} while {n} client(s) are spliced in", attempt.op_id),
                            "a handoff only while no client uses the source: `Busy`",
                        ));
                        }
                        if let Some(c) = self.counters {
                            if !c.is_zero() {
                                return Err(depart(
                                "HO-7",
                                format!("barrier installed for op {} over live work {c:?}", attempt.op_id),
                                "a barrier only over zero counters: `Busy` naming the live work",
                            ));
                            }
                        }
                        match self.gate {
                            Gate::Gated(op) => {
                                return Err(depart(
                                "HO-S2",
                                format!("a second barrier (op {}) while op {op}'s stands", attempt.op_id),
                                "in progress (a duplicate) or refused while an attempt is in flight",
                            ));
                            }
                            Gate::Retired | Gate::Absent => {
                                return Err(depart(
                                    "HO-S5",
                                    format!(
                                        "barrier installed for op {} at a {:?} source",
                                        attempt.op_id, self.gate
                                    ),
                                    "refused: no session / source retired",
                                ));
                            }
                            Gate::Open | Gate::Unknown => {}
                        }
                        if self.drained {
                            return Err(depart(
                                "HO-A5",
                                format!(
                                    "barrier installed for op {} at a drained source",
                                    attempt.op_id
                                ),
                                "refused source_draining",
                            ));
                        }
                        self.gate = Gate::Gated(attempt.op_id);
                        self.outcome = None;
                        let _ = request;
                        Ok(())
                    }
                    Begin::Answered(HandoffReply::Busy { op_id, counters }) => {
                        if counters.is_zero() {
                            return Err(depart(
                                "HO-S2",
                                format!("busy for op {op_id} naming no live work"),
                                "busy only over live work",
                            ));
                        }
                        if let Some(c) = self.counters {
                            if c != *counters {
                                return Err(depart(
                                    "HO-S2",
                                    format!("busy for op {op_id} naming {counters:?}"),
                                    &format!("busy naming exactly the live counters {c:?}"),
                                ));
                            }
                        }
                        Ok(())
                    }
                    Begin::Answered(_) => Ok(()),
                }
            }
            CellRecord::StoreAnswered { call, answer } => {
                self.answer = Some((*call, *answer));
                Ok(())
            }
            CellRecord::TransactionResult {
                attempt,
                result,
                fed,
                ..
            }
            | CellRecord::ReconcileResult {
                attempt,
                result,
                fed,
                ..
            } => {
                let call = if matches!(rec, CellRecord::TransactionResult { .. }) {
                    StoreCall::Transaction
                } else {
                    StoreCall::Reconcile
                };
                if let Some(answered) = answered {
                    read_as_the_spec_reads(line, call, answered, result)?;
                }
                if let (Fed::Applied(Disposition::Applied), DurableResult::Done(outcome)) =
                    (fed, result)
                {
                    if self.gate == Gate::Gated(attempt.op_id) || self.gate == Gate::Unknown {
                        self.outcome = Some(*outcome);
                    }
                }
                Ok(())
            }
            CellRecord::EmergencyDrain { applied, .. } => {
                if applied.is_some() {
                    self.drained = true;
                }
                Ok(())
            }
            CellRecord::Undrain { refused } => {
                if refused.is_none() {
                    self.forget();
                }
                Ok(())
            }
            CellRecord::Action(action) => self.action(line, action),
            CellRecord::ClientAdmitted { conn } => {
                let event = format!("client {conn} admitted");
                match self.gate {
                    Gate::Gated(op) => return Err(depart(
                        "HO-S3",
                        format!("{event} while the barrier of op {op} stands"),
                        "no new client while a barrier stands: refused (close 4409, resolve again)",
                    )),
                    Gate::Retired => {
                        return Err(depart(
                            "HO-S5",
                            format!("{event} at a retired source"),
                            "a retired source admits nothing (close 4409)",
                        ))
                    }
                    Gate::Absent => {
                        return Err(depart(
                            "HO-S3",
                            format!("{event} at a cell without the host's machine"),
                            "refused wrong_cell (close 4409)",
                        ))
                    }
                    Gate::Open | Gate::Unknown => {}
                }
                if self.drained {
                    return Err(depart(
                        "HO-A5",
                        format!("{event} at a drained source"),
                        "refused source_draining (close 1012)",
                    ));
                }
                self.clients = self.clients.map(|n| n.saturating_add(1));
                if let Some(c) = self.counters {
                    if c.client_conns == 0 {
                        return Err(depart(
                            "HO-7",
                            format!("{event} holding no counted connection"),
                            "a spliced client holds a ClientConn ticket",
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    fn forget(&mut self) {
        self.machine = None;
        self.gate = Gate::Absent;
        self.drained = false;
        self.outcome = None;
        self.counters = Some(QuiescenceCounters::default());
        self.clients = Some(0);
    }

    fn action(&mut self, line: u64, action: &CellAction) -> Judged {
        let depart = |requirement: &'static str, event: String, allowed: String| {
            Departure::new(line, requirement, event, allowed)
        };
        match action {
            CellAction::Forget { .. } => {
                self.forget();
                Ok(())
            }
            CellAction::HardDrain { .. } => {
                self.drained = true;
                Ok(())
            }
            CellAction::CloseControl { .. } => Ok(()),
            CellAction::Machine {
                machine, action, ..
            } => {
                if self.machine.is_some_and(|m| m != *machine) && self.gate != Gate::Unknown {
                    return Err(depart(
                        "HO-A4",
                        format!("an action of machine {} ({action:?})", machine.0),
                        format!(
                            "actions of the host's machine {} only",
                            self.machine.map_or(0, |m| m.0)
                        ),
                    ));
                }
                match action {
                    HandoffAction::ReopenAdmission { attempt } => {
                        let event = format!("barrier of op {} reopened", attempt.op_id);
                        match self.gate {
                            Gate::Unknown => {}
                            Gate::Gated(op) if op == attempt.op_id => {
                                if self.drained {
                                    return Err(depart(
                                        "HO-A5",
                                        format!("{event} at a drained source"),
                                        "a drained source's attempt ends closed".to_owned(),
                                    ));
                                }
                                match self.outcome {
                                    Some(TxnOutcome::RolledBack { .. }) => {}
                                    Some(TxnOutcome::Committed { .. }) => {
                                        return Err(depart(
                                            "HO-S5",
                                            format!("{event} after its commit"),
                                            "a commit retires the source (never reopens)"
                                                .to_owned(),
                                        ))
                                    }
                                    Some(TxnOutcome::AuthorityChanged { .. }) => {
                                        return Err(depart(
                                            "HO-S6",
                                            format!("{event} after the authority changed"),
                                            "the stale source retires".to_owned(),
                                        ))
                                    }
                                    None => {
                                        return Err(depart(
                                            "HO-A2",
                                            format!("{event} without a terminal outcome"),
                                            "the barrier stays until an explicit rollback or a reconciled outcome of that attempt".to_owned(),
                                        ))
                                    }
                                }
                            }
                            other => {
                                return Err(depart(
                                    "HO-A2",
                                    format!("{event} while the gate is {other:?}"),
                                    "a reopen only of the standing barrier, after its rollback"
                                        .to_owned(),
                                ))
                            }
                        }
                        self.gate = Gate::Open;
                        self.outcome = None;
                        Ok(())
                    }
                    HandoffAction::RetireSourceDraining { reason } => {
                        if let Some(n @ 1..) = self.clients {
                            return Err(depart(
                                "HO-1",
                                format!("source retired ({reason:?}) while {n} client(s) are spliced in"),
                                "a retirement closes no client".to_owned(),
                            ));
                        }
                        if let Some(c) = self.counters {
                            if !c.is_zero() {
                                return Err(depart(
                                    "HO-1",
                                    format!("source retired ({reason:?}) over live work {c:?}"),
                                    "a retirement only after a barrier over zero tickets"
                                        .to_owned(),
                                ));
                            }
                        }
                        if let RetireReason::Committed { op_id, .. } = reason {
                            let known = matches!(self.gate, Gate::Gated(_));
                            if known && !matches!(self.outcome, Some(TxnOutcome::Committed { .. }))
                            {
                                return Err(depart(
                                    "HO-S5",
                                    format!("source retired as committed by op {op_id}"),
                                    format!(
                                        "a retirement as committed only after the commit (outcome: {:?})",
                                        self.outcome
                                    ),
                                ));
                            }
                        }
                        self.gate = Gate::Retired;
                        self.outcome = None;
                        Ok(())
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    fn work(
        &mut self,
        line: u64,
        op: WorkOp,
        kind: WorkKind,
        machine: Option<MachineId>,
        ok: bool,
        after: Option<QuiescenceCounters>,
    ) -> Judged {
        let event = format!("{op:?} of {kind:?} (ok: {ok})");
        if op == WorkOp::Acquire && ok {
            let refusal = match self.gate {
                Gate::Gated(op_id) => Some((
                    "HO-S3",
                    format!("{event} while the barrier of op {op_id} stands"),
                )),
                Gate::Retired if machine == self.machine => {
                    Some(("HO-S5", format!("{event} at a retired source")))
                }
                _ if self.drained && machine == self.machine => {
                    Some(("HO-A5", format!("{event} at a drained source")))
                }
                _ => None,
            };
            if let Some((requirement, event)) = refusal {
                return Err(Departure::new(
                    line,
                    requirement,
                    event,
                    "refused: no new work while a barrier stands, after a retirement or a drain",
                ));
            }
        }
        let same_machine = machine.is_some() && machine == self.machine;
        if let (Some(before), Some(after), true) = (self.counters, after, same_machine) {
            let allowed = allowed_after(before, op, kind, ok);
            if !allowed.contains(&after) {
                return Err(Departure::new(
                    line,
                    "HO-7",
                    format!("{event}: the gate's counters became {after:?}"),
                    format!("from {before:?}, one of {allowed:?}"),
                ));
            }
        }
        if op == WorkOp::Acquire && ok && machine.is_some() {
            self.machine = machine;
        }
        self.counters = after.or(self.counters);
        Ok(())
    }
}

fn add(c: QuiescenceCounters, kind: WorkKind, delta: i64) -> Option<QuiescenceCounters> {
    let mut c = c;
    let slot = match kind {
        WorkKind::Accept => &mut c.accepts,
        WorkKind::ClientConn => &mut c.client_conns,
        WorkKind::Splice => &mut c.splices,
        WorkKind::PendingConn => &mut c.pending_conns,
        WorkKind::ControlOp => &mut c.control_ops,
    };
    *slot = u32::try_from(i64::from(*slot) + delta).ok()?;
    Some(c)
}

/// HO-7: the counters a work input may leave, from `before`.
fn allowed_after(
    before: QuiescenceCounters,
    op: WorkOp,
    kind: WorkKind,
    ok: bool,
) -> Vec<QuiescenceCounters> {
    let mut out = Vec::with_capacity(2);
    match (op, ok) {
        (WorkOp::Acquire, true) => out.extend(add(before, kind, 1)),
        (WorkOp::Acquire, false) | (WorkOp::Revalidate, true) => out.push(before),
        (WorkOp::Convert { to }, true) => {
            out.extend(add(before, kind, -1).and_then(|c| add(c, to, 1)))
        }
        (WorkOp::Release, true) => out.extend(add(before, kind, -1)),
        // Abandoned or refused: the core released the ticket if it was live.
        (WorkOp::Revalidate | WorkOp::Convert { .. } | WorkOp::Release, false) => {
            out.push(before);
            out.extend(add(before, kind, -1));
        }
    }
    out
}

/// HO-A2, transcribed from the requirement ("never reopen on timeout alone"): the reading fed to
/// the machine after a store call. An outcome is fed as the store gave it; no answer (a fault:
/// unavailable, a timeout, an error inside the transaction, a lost commit, a bad row; or a
/// reconciliation that could not write its fence) is never fed as an outcome: the barrier stays
/// until a locked reconciliation establishes one. Owes the core's `durable_result_of` nothing.
fn read_as_the_spec_reads(
    line: u64,
    call: StoreCall,
    (answered_call, answer): (StoreCall, StoreAnswer),
    result: &DurableResult,
) -> Judged {
    let depart = |event: String, allowed: String| Departure::new(line, "HO-A2", event, allowed);
    if answered_call != call {
        return Err(depart(
            format!("the {call:?} fed after the store answered a {answered_call:?} ({answer:?})"),
            "each store call's answer read by its own result".to_owned(),
        ));
    }
    match (answer, result) {
        (StoreAnswer::Outcome(got), DurableResult::Done(fed)) if got == *fed => Ok(()),
        (StoreAnswer::Outcome(got), fed) => Err(depart(
            format!("the store answered {got:?} and the driver fed {fed:?}"),
            format!("the store's outcome as it came: Done({got:?})"),
        )),
        (StoreAnswer::Fault(_) | StoreAnswer::NoFence, DurableResult::Done(fed)) => Err(depart(
            format!("the store gave no answer ({answer:?}) and the driver fed the outcome {fed:?}"),
            "no outcome without an answer: ambiguous (reconcile by op id under the lock) or unavailable (quarantined); never reopened on a timeout alone".to_owned(),
        )),
        (StoreAnswer::Fault(_) | StoreAnswer::NoFence, _) => Ok(()),
    }
}

impl Judge for CellJudge {
    fn judge(&mut self, line: u64, journal: &JournalLine) -> Judged {
        let answered = self.answer.take();
        match &journal.rec {
            JournalRecord::Cell(rec) => self.cell(line, rec, answered),
            JournalRecord::Gap { .. } => {
                self.gaps += 1;
                self.counters = None;
                self.clients = None;
                if self.gate != Gate::Absent {
                    self.gate = Gate::Unknown;
                }
                self.outcome = None;
                Ok(())
            }
            other => Err(mixed(line, other)),
        }
    }

    fn finish(&mut self, _line: u64) -> Judged {
        Ok(())
    }

    fn gaps_searched(&self) -> u64 {
        self.gaps
    }
}

/// One director key's judge.
#[derive(Debug, Default)]
pub struct DirectorJudge {
    gaps: u64,
    /// The requests sent and not yet answered (SCALE-6: the director has several in flight
    /// at once, their answers in any order).
    pending: std::collections::BTreeSet<OpId>,
}

impl DirectorJudge {
    #[must_use]
    pub fn new() -> DirectorJudge {
        DirectorJudge::default()
    }
}

/// HO-S2: the class the dispatch budget must give an outcome (busy never a failure).
fn class_of(outcome: &DispatchOutcome) -> DispatchClass {
    match outcome {
        DispatchOutcome::TransportFailed => DispatchClass::Failed,
        DispatchOutcome::Answered(HandoffReply::Busy { .. } | HandoffReply::InProgress { .. }) => {
            DispatchClass::Deferred
        }
        DispatchOutcome::Answered(HandoffReply::Result(_)) => DispatchClass::Finished,
        DispatchOutcome::Answered(
            HandoffReply::Superseded { .. } | HandoffReply::Refused { .. },
        ) => DispatchClass::Skipped,
    }
}

impl Judge for DirectorJudge {
    fn judge(&mut self, line: u64, journal: &JournalLine) -> Judged {
        match &journal.rec {
            JournalRecord::Director(rec) => match rec {
                DirectorRecord::Start | DirectorRecord::Pass | DirectorRecord::Examined { .. } => {
                    Ok(())
                }
                DirectorRecord::Sent {
                    op_id,
                    source,
                    target,
                } => {
                    let derived = OpId::derive(source, *target);
                    if *op_id != derived {
                        return Err(Departure::new(
                            line,
                            "HO-S1",
                            format!(
                                "request sent with op {op_id} for host {} to cell {}",
                                source.host.0, target.0
                            ),
                            format!(
                                "op {derived}: the UUIDv5 of the exact source authority and target (the same on every retry)"
                            ),
                        ));
                    }
                    self.pending.insert(*op_id);
                    Ok(())
                }
                DirectorRecord::Answer {
                    op_id,
                    outcome,
                    class,
                } => {
                    if !self.pending.is_empty() && !self.pending.contains(op_id) {
                        return Err(Departure::new(
                            line,
                            "HO-S1",
                            format!("an answer for op {op_id}"),
                            format!(
                                "the answer to an op sent and not yet answered ({} of them)",
                                self.pending.len()
                            ),
                        ));
                    }
                    if let DispatchOutcome::Answered(reply) = outcome {
                        if reply.op_id() != *op_id {
                            return Err(Departure::new(
                                line,
                                "HO-S1",
                                format!("op {op_id} answered for op {}", reply.op_id()),
                                format!("an answer naming op {op_id}"),
                            ));
                        }
                    }
                    let must = class_of(outcome);
                    if must != *class {
                        return Err(Departure::new(
                            line,
                            "HO-S2",
                            format!("answer {outcome:?} counted as {class:?}"),
                            format!(
                                "{must:?} (busy and in progress are deferrals, never failures)"
                            ),
                        ));
                    }
                    self.pending.remove(op_id);
                    Ok(())
                }
            },
            JournalRecord::Gap { .. } => {
                self.gaps += 1;
                self.pending.clear();
                Ok(())
            }
            other => Err(mixed(line, other)),
        }
    }

    fn finish(&mut self, _line: u64) -> Judged {
        Ok(())
    }

    fn gaps_searched(&self) -> u64 {
        self.gaps
    }
}

/// A key whose lines come from two kinds of journal: two writers share a key.
pub(crate) fn mixed(line: u64, rec: &JournalRecord) -> Departure {
    Departure::new(
        line,
        "CONF-1",
        format!("{rec:?}"),
        "lines of one kind of journal per key (two writers share this key)",
    )
}

/// CONF-3: a generated cell journal of `hosts` hosts, `rounds` handoff rounds each (a client
/// attaches and leaves, a busy answer, a barrier, a rollback, a reopen; the last round
/// commits and retires): what the rate measurement and the tests judge. About 14 lines per
/// round and host.
#[must_use]
pub fn generated_cell_journal(hosts: u64, rounds: u64) -> Vec<JournalLine> {
    use switchyard_core::handoff::store::AbortReason;
    use switchyard_core::handoff::{
        AttemptRef, CellId, Epoch, Generation, HandoffRequest, HostId, Incarnation, Installed,
        Measurement, SessionId, SourceAuthority,
    };
    use switchyard_core::MonoMs;
    let mut out = Vec::new();
    let mut at = 0u64;
    for h in 0..hosts {
        let key = format!("cell/1/1/host/{h}");
        let host = HostId(h);
        let machine = MachineId(1);
        let mut seq = 0u64;
        let mut push = |rec: CellRecord, out: &mut Vec<JournalLine>| {
            at += 1;
            out.push(JournalLine {
                key: key.clone(),
                seq,
                at_ms: at,
                rec: JournalRecord::Cell(rec),
            });
            seq += 1;
        };
        let zero = QuiescenceCounters::default();
        let with = |kind: WorkKind| add(zero, kind, 1);
        push(
            CellRecord::Install {
                result: Ok(Installed {
                    machine,
                    session: SessionId(2),
                    how: InstallKind::NewMachine,
                }),
                after: Some(zero),
            },
            &mut out,
        );
        let source = SourceAuthority {
            cell: CellId(1),
            host,
            epoch: Epoch(1),
            incarnation: Incarnation(1),
            generation: Generation(1),
        };
        let request = HandoffRequest::new(
            source,
            CellId(2),
            100,
            Measurement {
                measured_at: MonoMs(0),
                current_rtt_ms: 80,
                target_rtt_ms: 20,
            },
        );
        let work =
            |op: WorkOp, kind: WorkKind, after: Option<QuiescenceCounters>| CellRecord::Work {
                op,
                kind,
                machine: Some(machine),
                ok: true,
                refused: None,
                after,
            };
        for round in 0..rounds {
            let last = round + 1 == rounds;
            push(
                work(WorkOp::Acquire, WorkKind::Accept, with(WorkKind::Accept)),
                &mut out,
            );
            push(
                work(WorkOp::Revalidate, WorkKind::Accept, with(WorkKind::Accept)),
                &mut out,
            );
            push(
                work(
                    WorkOp::Convert {
                        to: WorkKind::ClientConn,
                    },
                    WorkKind::Accept,
                    with(WorkKind::ClientConn),
                ),
                &mut out,
            );
            push(CellRecord::ClientAdmitted { conn: round }, &mut out);
            let busy = with(WorkKind::ClientConn).unwrap_or(zero);
            push(
                CellRecord::Request {
                    request,
                    begin: Begin::Answered(HandoffReply::Busy {
                        op_id: request.op_id,
                        counters: busy,
                    }),
                },
                &mut out,
            );
            push(CellRecord::ClientLeft { conn: round }, &mut out);
            push(
                work(WorkOp::Release, WorkKind::ClientConn, Some(zero)),
                &mut out,
            );
            let attempt = AttemptRef {
                op_id: request.op_id,
                seq: u32::try_from(round).unwrap_or(u32::MAX),
            };
            push(
                CellRecord::Request {
                    request,
                    begin: Begin::Started(attempt),
                },
                &mut out,
            );
            push(
                CellRecord::Action(CellAction::Machine {
                    host,
                    machine,
                    action: HandoffAction::RunTransaction { attempt, request },
                }),
                &mut out,
            );
            push(
                CellRecord::Work {
                    op: WorkOp::Acquire,
                    kind: WorkKind::Accept,
                    machine: Some(machine),
                    ok: false,
                    refused: Some(switchyard_core::handoff::AdmissionRefusal::WrongCell),
                    after: Some(zero),
                },
                &mut out,
            );
            push(
                CellRecord::ClientRefused {
                    code: 4409,
                    reason: "wrong_cell".to_owned(),
                },
                &mut out,
            );
            let outcome = if last {
                TxnOutcome::Committed {
                    target: CellId(2),
                    new_epoch: Epoch(2),
                }
            } else {
                TxnOutcome::RolledBack {
                    reason: AbortReason::RateLimited,
                }
            };
            push(
                CellRecord::StoreAnswered {
                    call: StoreCall::Transaction,
                    answer: StoreAnswer::Outcome(outcome),
                },
                &mut out,
            );
            push(
                CellRecord::TransactionResult {
                    machine,
                    attempt,
                    result: DurableResult::Done(outcome),
                    fed: Fed::Applied(Disposition::Applied),
                },
                &mut out,
            );
            let action = if last {
                HandoffAction::RetireSourceDraining {
                    reason: RetireReason::Committed {
                        op_id: request.op_id,
                        target: CellId(2),
                    },
                }
            } else {
                HandoffAction::ReopenAdmission { attempt }
            };
            push(
                CellRecord::Action(CellAction::Machine {
                    host,
                    machine,
                    action,
                }),
                &mut out,
            );
            push(
                CellRecord::Action(CellAction::Machine {
                    host,
                    machine,
                    action: HandoffAction::Reply(HandoffReply::Result(
                        switchyard_core::handoff::HandoffResult {
                            op_id: request.op_id,
                            outcome,
                        },
                    )),
                }),
                &mut out,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Conformance;
    use super::*;
    use switchyard_core::handoff::{AttemptRef, CellId, Epoch, HostId, SourceAuthority};

    fn judge(lines: &[JournalLine]) -> Option<Departure> {
        let mut c = Conformance::new();
        for (i, l) in lines.iter().enumerate() {
            c.feed(i as u64 + 1, l).expect("a journal line");
        }
        c.finish()
            .into_iter()
            .find_map(|(_, v)| v.departure().cloned())
    }

    fn find(lines: &[JournalLine], f: impl Fn(&CellRecord) -> bool) -> usize {
        lines
            .iter()
            .position(|l| matches!(&l.rec, JournalRecord::Cell(r) if f(r)))
            .expect("the record")
    }

    #[test]
    fn conf_1_a_generated_correct_journal_conforms() {
        assert_eq!(judge(&generated_cell_journal(3, 4)), None);
    }

    #[test]
    fn conf_1_ho_s3_a_client_admitted_under_a_barrier_departs() {
        let mut lines = generated_cell_journal(1, 1);
        let at = find(&lines, |r| {
            matches!(
                r,
                CellRecord::Request {
                    begin: Begin::Started(_),
                    ..
                }
            )
        });
        let mut extra = lines[at].clone();
        extra.rec = JournalRecord::Cell(CellRecord::ClientAdmitted { conn: 7 });
        lines.insert(at + 1, extra);
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 2, "HO-S3"));
    }

    #[test]
    fn conf_1_ho_s3_a_ticket_granted_under_a_barrier_departs() {
        let mut lines = generated_cell_journal(1, 1);
        let at = find(&lines, |r| {
            matches!(
                r,
                CellRecord::Work {
                    ok: false,
                    op: WorkOp::Acquire,
                    ..
                }
            )
        });
        if let JournalRecord::Cell(CellRecord::Work {
            ok, refused, after, ..
        }) = &mut lines[at].rec
        {
            *ok = true;
            *refused = None;
            *after = add(QuiescenceCounters::default(), WorkKind::Accept, 1);
        }
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 1, "HO-S3"));
    }

    #[test]
    fn conf_1_ho_a2_a_barrier_reopened_without_a_terminal_outcome_departs() {
        let mut lines = generated_cell_journal(1, 2);
        // The first round's rollback removed: its reopen has no outcome to stand on.
        let at = find(&lines, |r| {
            matches!(r, CellRecord::TransactionResult { .. })
        });
        lines.remove(at);
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 1, "HO-A2"));
    }

    /// The generated journal's first `StoreAnswered` replaced by `answer`.
    fn with_first_answer(answer: StoreAnswer) -> (Vec<JournalLine>, usize) {
        let mut lines = generated_cell_journal(1, 2);
        let at = find(&lines, |r| matches!(r, CellRecord::StoreAnswered { .. }));
        if let JournalRecord::Cell(CellRecord::StoreAnswered { answer: a, .. }) = &mut lines[at].rec
        {
            *a = answer;
        }
        (lines, at)
    }

    #[test]
    fn conf_1_ho_a2_a_store_timeout_fed_as_a_rollback_departs_at_the_result() {
        use switchyard_core::handoff::store::StoreFault;
        for fault in [
            StoreFault::TimedOut,
            StoreFault::CommitLost,
            StoreFault::InTransaction,
            StoreFault::Unavailable,
        ] {
            // The driver read the fault as the round's rollback (and reopened).
            let (lines, at) = with_first_answer(StoreAnswer::Fault(fault));
            let d = judge(&lines).expect("departs");
            assert_eq!(
                (d.line, d.requirement),
                (at as u64 + 2, "HO-A2"),
                "{fault:?}"
            );
            assert!(d.event.contains("no answer"), "{}", d.event);
        }
        // A fence not written fed as an outcome departs the same way.
        let (lines, at) = with_first_answer(StoreAnswer::NoFence);
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 2, "HO-A2"));
    }

    #[test]
    fn conf_1_ho_a2_an_outcome_the_driver_changed_departs() {
        let (lines, at) = with_first_answer(StoreAnswer::Outcome(TxnOutcome::Committed {
            target: CellId(2),
            new_epoch: Epoch(2),
        }));
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 2, "HO-A2"));
    }

    #[test]
    fn conf_1_ho_a2_a_timeout_fed_as_ambiguous_conforms() {
        use switchyard_core::handoff::store::StoreFault;
        use switchyard_core::handoff::Ambiguity;
        let (mut lines, at) = with_first_answer(StoreAnswer::Fault(StoreFault::TimedOut));
        if let JournalRecord::Cell(CellRecord::TransactionResult { result, .. }) =
            &mut lines[at + 1].rec
        {
            *result = DurableResult::Ambiguous(Ambiguity::Timeout);
        }
        // The journal ends there: the barrier stands, waiting for its reconciliation.
        lines.truncate(at + 2);
        assert_eq!(judge(&lines), None);
        // A result whose call is not the one answered departs.
        let JournalRecord::Cell(CellRecord::TransactionResult {
            machine,
            attempt,
            result,
            fed,
        }) = lines[at + 1].rec.clone()
        else {
            unreachable!()
        };
        lines[at + 1].rec = JournalRecord::Cell(CellRecord::ReconcileResult {
            machine,
            attempt,
            result,
            fed,
        });
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 2, "HO-A2"));
    }

    #[test]
    fn conf_1_ho_s5_a_commit_that_reopens_departs() {
        let mut lines = generated_cell_journal(1, 1);
        let at = find(&lines, |r| {
            matches!(
                r,
                CellRecord::Action(CellAction::Machine {
                    action: HandoffAction::RetireSourceDraining { .. },
                    ..
                })
            )
        });
        let JournalRecord::Cell(CellRecord::Request {
            begin: Begin::Started(attempt),
            ..
        }) = lines[find(&lines, |r| {
            matches!(
                r,
                CellRecord::Request {
                    begin: Begin::Started(_),
                    ..
                }
            )
        })]
        .rec
        else {
            unreachable!()
        };
        if let JournalRecord::Cell(CellRecord::Action(CellAction::Machine { action, .. })) =
            &mut lines[at].rec
        {
            *action = HandoffAction::ReopenAdmission { attempt };
        }
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 1, "HO-S5"));
    }

    #[test]
    fn conf_1_ho_7_a_barrier_over_live_work_and_a_busy_without_it_depart() {
        let mut lines = generated_cell_journal(1, 1);
        let release = find(&lines, |r| {
            matches!(
                r,
                CellRecord::Work {
                    op: WorkOp::Release,
                    ..
                }
            )
        });
        lines.remove(release);
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (release as u64 + 1, "HO-7"));

        let mut lines = generated_cell_journal(1, 1);
        let busy = find(&lines, |r| {
            matches!(
                r,
                CellRecord::Request {
                    begin: Begin::Answered(HandoffReply::Busy { .. }),
                    ..
                }
            )
        });
        let moved = lines.remove(busy);
        lines.insert(release, moved);
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (release as u64 + 1, "HO-S2"));
    }

    #[test]
    fn conf_1_ho_1_a_barrier_while_a_client_is_spliced_in_departs() {
        let mut lines = generated_cell_journal(1, 1);
        let left = find(&lines, |r| matches!(r, CellRecord::ClientLeft { .. }));
        lines.remove(left);
        let started = find(&lines, |r| {
            matches!(
                r,
                CellRecord::Request {
                    begin: Begin::Started(_),
                    ..
                }
            )
        });
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (started as u64 + 1, "HO-1"));
    }

    #[test]
    fn conf_1_ho_7_counters_that_move_against_the_input_depart() {
        let mut lines = generated_cell_journal(1, 1);
        let at = find(&lines, |r| {
            matches!(
                r,
                CellRecord::Work {
                    op: WorkOp::Revalidate,
                    ..
                }
            )
        });
        if let JournalRecord::Cell(CellRecord::Work { after, .. }) = &mut lines[at].rec {
            *after = Some(QuiescenceCounters::default());
        }
        let d = judge(&lines).expect("departs");
        assert_eq!((d.line, d.requirement), (at as u64 + 1, "HO-7"));
    }

    #[test]
    fn conf_1_ho_7_a_refused_acquire_that_moves_a_counter_departs() {
        let mut lines = generated_cell_journal(1, 1);
        let at = find(&lines, |r| {
            matches!(r, CellRecord::TransactionResult { .. })
        });
        let mut extra = lines[at].clone();
        extra.rec = JournalRecord::Cell(CellRecord::Work {
            op: WorkOp::Acquire,
            kind: WorkKind::Splice,
            machine: Some(MachineId(1)),
            ok: false,
            refused: None,
            after: add(QuiescenceCounters::default(), WorkKind::Splice, 1),
        });
        lines.insert(at + 1, extra);
        let d = judge(&lines).expect("departs");
        assert_eq!(
            d.requirement, "HO-7",
            "a counter moved by a refused acquire"
        );
    }

    #[test]
    fn conf_1_a_gap_resynchronises_at_the_next_record_that_fixes_the_state() {
        let mut lines = generated_cell_journal(1, 2);
        // Lose everything from the first barrier to its reopen: the gate is unknown until the
        // next `Started`, the counters until the next work record.
        let from = find(&lines, |r| {
            matches!(
                r,
                CellRecord::Request {
                    begin: Begin::Started(_),
                    ..
                }
            )
        });
        let to = from
            + find(&lines[from..], |r| {
                matches!(
                    r,
                    CellRecord::Action(CellAction::Machine {
                        action: HandoffAction::ReopenAdmission { .. },
                        ..
                    })
                )
            });
        let key = lines[from].key.clone();
        lines.drain(from..=to);
        lines.insert(
            from,
            JournalLine {
                key,
                seq: 0,
                at_ms: 0,
                rec: JournalRecord::Gap { dropped: 5 },
            },
        );
        let mut c = Conformance::new();
        for (i, l) in lines.iter().enumerate() {
            c.feed(i as u64 + 1, l).expect("a journal line");
        }
        let verdicts = c.finish();
        assert!(
            verdicts.iter().all(|(_, v)| v.departure().is_none()),
            "{verdicts:?}"
        );
        assert!(matches!(
            verdicts[0].1,
            super::super::Verdict::Conforms {
                gaps_searched: 1,
                ..
            }
        ));
    }

    fn director(rec: DirectorRecord) -> JournalLine {
        JournalLine {
            key: "director/d".to_owned(),
            seq: 0,
            at_ms: 0,
            rec: JournalRecord::Director(rec),
        }
    }

    #[test]
    fn conf_1_ho_s1_an_op_id_not_derived_from_its_authority_and_target_departs() {
        let source = SourceAuthority {
            cell: CellId(1),
            host: HostId(7),
            epoch: Epoch(1),
            incarnation: switchyard_core::handoff::Incarnation(1),
            generation: switchyard_core::handoff::Generation(3),
        };
        let op_id = OpId::derive(&source, CellId(2));
        let busy = HandoffReply::Busy {
            op_id,
            counters: add(QuiescenceCounters::default(), WorkKind::Splice, 1).unwrap_or_default(),
        };
        let good = vec![
            director(DirectorRecord::Start),
            director(DirectorRecord::Sent {
                op_id,
                source,
                target: CellId(2),
            }),
            director(DirectorRecord::Answer {
                op_id,
                outcome: DispatchOutcome::Answered(busy),
                class: DispatchClass::Deferred,
            }),
            director(DirectorRecord::Sent {
                op_id,
                source,
                target: CellId(2),
            }),
        ];
        assert_eq!(judge(&good), None);
        let mut bad = good.clone();
        bad[3] = director(DirectorRecord::Sent {
            op_id: OpId::derive(&source, CellId(3)),
            source,
            target: CellId(2),
        });
        assert_eq!(
            judge(&bad).map(|d| (d.line, d.requirement)),
            Some((4, "HO-S1"))
        );
        // HO-S2: busy is a deferral, never a failure.
        let mut bad = good;
        bad[2] = director(DirectorRecord::Answer {
            op_id,
            outcome: DispatchOutcome::Answered(busy),
            class: DispatchClass::Failed,
        });
        assert_eq!(
            judge(&bad).map(|d| (d.line, d.requirement)),
            Some((3, "HO-S2"))
        );
        let _ = AttemptRef { op_id, seq: 0 };
    }

    /// SCALE-6 / HO-L3: the director has several requests in flight; their answers come in
    /// any order, each for an op sent and not yet answered (HO-S1 otherwise).
    #[test]
    fn scale_6_director_journal_with_requests_in_flight_answered_in_any_order() {
        let source = |host: u64| SourceAuthority {
            cell: CellId(1),
            host: HostId(host),
            epoch: Epoch(1),
            incarnation: switchyard_core::handoff::Incarnation(1),
            generation: switchyard_core::handoff::Generation(1),
        };
        let (a, b) = (source(7), source(8));
        let (op_a, op_b) = (OpId::derive(&a, CellId(2)), OpId::derive(&b, CellId(2)));
        let sent = |op_id, source| {
            director(DirectorRecord::Sent {
                op_id,
                source,
                target: CellId(2),
            })
        };
        let failed = |op_id| {
            director(DirectorRecord::Answer {
                op_id,
                outcome: DispatchOutcome::TransportFailed,
                class: DispatchClass::Failed,
            })
        };
        let good = vec![
            director(DirectorRecord::Start),
            sent(op_a, a),
            sent(op_b, b),
            failed(op_b),
            failed(op_a),
        ];
        assert_eq!(judge(&good), None);
        let mut bad = good;
        bad[4] = failed(op_b);
        assert_eq!(
            judge(&bad).map(|d| (d.line, d.requirement)),
            Some((5, "HO-S1")),
            "an op answered twice while another is pending"
        );
    }

    /// CONF-3: the judge's rate on a generated journal of 1,000,000 cell lines (run it in
    /// release: `cargo test -p switchyard-spec --release conf_3_handoff -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement: run in release"]
    fn conf_3_handoff_judge_rate_on_a_million_lines() {
        let lines = generated_cell_journal(5_000, 14);
        let text: Vec<String> = lines
            .iter()
            .map(|l| serde_json::to_string(l).expect("json"))
            .collect();
        let started = std::time::Instant::now();
        let mut c = Conformance::new();
        for (i, l) in text.iter().enumerate() {
            c.feed_text(i as u64 + 1, l).expect("a journal line");
        }
        let verdicts = c.finish();
        let secs = started.elapsed().as_secs_f64();
        assert!(verdicts.iter().all(|(_, v)| v.departure().is_none()));
        eprintln!(
            "CONF-3 handoff judge: {} lines ({} keys) in {secs:.2} s: {:.0} lines/s (parse + judge, one core)",
            text.len(),
            verdicts.len(),
            text.len() as f64 / secs
        );
    }
}
