//! Executing the `SourceCell`'s decisions. Every input to the core `SourceCell` goes through
//! [`Shared::input`]: under the cell lock ([`LockedCell`]), the input, then every queued `CellAction`
//! executed in order, then the touched hosts' deadline timers re-armed. Nothing here chooses:
//! a store result is fed back to the machine the action named (a replaced machine's result is
//! the core's `Fed::Late`), a control is closed because the core said so, and so on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use switchyard_core::handoff::store::reconcile_result;
use switchyard_core::handoff::{AttemptRef, HostId, OpId};
use switchyard_core::handoff::{
    CellAction, CloseReason, Fed, Installed, MachineId, SessionId, SourceCell,
};
use switchyard_core::handoff::{CellRecord, QuiescenceCounters, StoreAnswer, StoreCall};
use switchyard_core::handoff::{
    DurableResult, FenceResult, HandoffAction, HandoffReply, RetireReason,
};
use switchyard_core::journal::JournalRecord;
use switchyard_core::MonoMs;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, error, info, warn};

use super::Shared;
use crate::handoff::clock::Clock;
use crate::handoff::proto::{CellToClient, CellToDesktop};
use crate::journal::Journal;

/// Bounds of the waiting directors.
const MAX_WAITERS: usize = 4096;
const MAX_WAITERS_PER_OP: usize = 16;

/// What the desktop session task is asked to do.
pub(super) enum ControlCmd {
    Frame(CellToDesktop),
    /// Send the DRAINING frame, then close the control socket (the core's `CloseControl`).
    Close(CloseReason),
}

/// One open control session's link to its socket task.
struct ControlLink {
    host: HostId,
    tx: mpsc::Sender<ControlCmd>,
}

/// A host's deadline timer, for one deadline of one machine.
struct Armed {
    machine: MachineId,
    at: MonoMs,
    task: tokio::task::AbortHandle,
}

/// Adapter-only state of one host: sockets and timers, no decisions.
struct HostLocal {
    /// The machine the drain watch belongs to.
    machine: MachineId,
    clients: BTreeMap<u64, mpsc::Sender<CellToClient>>,
    /// HO-A5: set by the core's `HardDrain`; every attached client closes on it.
    drain: watch::Sender<bool>,
    timer: Option<Armed>,
    /// OPS-2 / HO-L4: what this host's log already said in the episode going on (a store
    /// outage repeats the same retry every few seconds: said once, then DEBUG).
    said: Said,
}

/// OPS-2: the last state of a host that was logged at WARN or ERROR.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Said {
    /// The attempt whose quarantine was logged.
    quarantined: Option<AttemptRef>,
    /// The generation whose fence failure was logged, and whether as overdue.
    fence_failed: Option<(u64, bool)>,
}

impl HostLocal {
    fn new(machine: MachineId) -> HostLocal {
        HostLocal {
            machine,
            clients: BTreeMap::new(),
            drain: watch::channel(false).0,
            timer: None,
            said: Said::default(),
        }
    }
}

/// What the cell's one lock guards: the core `SourceCell` and the adapter's per-host state
/// (sockets, drain watches, timers), behind `Shared::locked`.
pub(super) struct LockedCell {
    pub(super) cell: SourceCell,
    hosts: BTreeMap<HostId, HostLocal>,
    controls: BTreeMap<SessionId, ControlLink>,
    /// CONF-1: the cell's journal (off unless `--journal`), written under this lock so a
    /// host's lines are in the order its machine saw them; `clock` stamps them.
    journal: Journal,
    clock: Clock,
}

/// CONF-1: the journal key of one host of one cell process: `cell/<cell>/<incarnation>/host/<host>`
/// (a restarted cell is a new incarnation, so a new key: its machines start afresh).
#[must_use]
pub fn host_key(
    cell: switchyard_core::handoff::CellId,
    incarnation: switchyard_core::handoff::Incarnation,
    host: HostId,
) -> String {
    format!("cell/{}/{}/host/{}", cell.0, incarnation.0, host.0)
}

impl LockedCell {
    pub(super) fn new(cell: SourceCell, journal: Journal, clock: Clock) -> LockedCell {
        LockedCell {
            cell,
            hosts: BTreeMap::new(),
            controls: BTreeMap::new(),
            journal,
            clock,
        }
    }

    /// CONF-1: journal `rec` for `host` (built only when the journal is on).
    pub(super) fn note(&self, host: HostId, rec: impl FnOnce(&LockedCell) -> CellRecord) {
        if !self.journal.is_on() {
            return;
        }
        let key = host_key(self.cell.cell_id(), self.cell.incarnation(), host);
        self.journal
            .record(&key, self.clock.now(), || JournalRecord::Cell(rec(self)));
    }

    /// The counters of the host's machine (a journal record's `after`).
    pub(super) fn counters(&self, host: HostId) -> Option<QuiescenceCounters> {
        self.cell.machine(host).map(|(_, m)| m.gate().counters())
    }

    /// The host's local state for `machine`. A drain watch belongs to one machine: a new
    /// machine (the core replaced a retired one) starts undrained.
    fn local(&mut self, host: HostId, machine: MachineId) -> &mut HostLocal {
        let local = self
            .hosts
            .entry(host)
            .or_insert_with(|| HostLocal::new(machine));
        if local.machine != machine {
            local.machine = machine;
            local.drain = watch::channel(false).0;
        }
        local
    }

    pub(super) fn clients(&self, host: HostId) -> usize {
        self.hosts.get(&host).map_or(0, |l| l.clients.len())
    }

    /// OPS-1: client sockets and control sessions still open (a graceful stop waits for 0).
    pub(super) fn open_sessions(&self) -> usize {
        self.hosts.values().map(|l| l.clients.len()).sum::<usize>() + self.controls.len()
    }

    /// Attach a client socket of `machine`; the receiver closes it on a hard drain.
    pub(super) fn attach_client(
        &mut self,
        host: HostId,
        machine: MachineId,
        conn: u64,
        tx: mpsc::Sender<CellToClient>,
    ) -> watch::Receiver<bool> {
        let local = self.local(host, machine);
        local.clients.insert(conn, tx);
        let drain = local.drain.subscribe();
        // CONF-1: the effect HO-S3 reads, where the socket is spliced in.
        self.note(host, |_| CellRecord::ClientAdmitted { conn });
        drain
    }

    pub(super) fn detach_client(&mut self, host: HostId, conn: u64) {
        if let Some(local) = self.hosts.get_mut(&host) {
            local.clients.remove(&conn);
        }
    }

    pub(super) fn client(&self, host: HostId, conn: u64) -> Option<&mpsc::Sender<CellToClient>> {
        self.hosts.get(&host).and_then(|l| l.clients.get(&conn))
    }

    /// Link the session the core just installed to its socket task.
    pub(super) fn link_control(
        &mut self,
        host: HostId,
        installed: Installed,
        tx: mpsc::Sender<ControlCmd>,
    ) {
        let _ = self.local(host, installed.machine);
        self.controls
            .insert(installed.session, ControlLink { host, tx });
    }

    pub(super) fn unlink_control(&mut self, session: SessionId) {
        self.controls.remove(&session);
    }

    /// The host's open control session (the core's answer), if its socket is still linked.
    pub(super) fn control_of(&self, host: HostId) -> Option<&mpsc::Sender<ControlCmd>> {
        let session = self.cell.control(host)?;
        self.controls.get(&session).map(|l| &l.tx)
    }

    /// Drop every socket and timer (the cell stops): client and control tasks see their
    /// channels end.
    pub(super) fn clear(&mut self) {
        for local in self.hosts.values_mut() {
            if let Some(t) = local.timer.take() {
                t.task.abort();
            }
        }
        self.hosts.clear();
        self.controls.clear();
    }

    /// The timer of (`machine`, `at`) fired: a re-arm for the same deadline starts a new one.
    fn fired(&mut self, host: HostId, machine: MachineId, at: MonoMs) {
        if let Some(local) = self.hosts.get_mut(&host) {
            if local
                .timer
                .as_ref()
                .is_some_and(|t| t.machine == machine && t.at == at)
            {
                local.timer = None;
            }
        }
    }
}

impl Shared {
    /// One input to the `SourceCell`: `f` under the cell lock, then every decision it queued
    /// executed ([`pump`]). `host` is the host the input is about (its timer is re-armed).
    pub(super) fn input<R>(
        self: &Arc<Self>,
        host: HostId,
        f: impl FnOnce(&mut LockedCell) -> R,
    ) -> R {
        let mut ep = self.locked();
        let r = f(&mut ep);
        pump(self, &mut ep, host);
        r
    }
}

/// Drain the `SourceCell`'s actions and execute them in order; re-arm the deadline timer of every
/// host they touched. A stopped cell still drains (the core's queue is bounded by draining
/// after every input) but executes nothing, as a crashed process would.
fn pump(sh: &Arc<Shared>, ep: &mut LockedCell, host: HostId) {
    let alive = sh.alive();
    let mut touched = vec![host];
    while let Some(action) = ep.cell.poll_action() {
        if !alive {
            continue;
        }
        let of = match action {
            CellAction::Machine { host, .. }
            | CellAction::CloseControl { host, .. }
            | CellAction::HardDrain { host }
            | CellAction::Forget { host } => host,
        };
        if !touched.contains(&of) {
            touched.push(of);
        }
        ep.note(of, |_| CellRecord::Action(action));
        execute(sh, ep, action);
    }
    if alive {
        for h in touched {
            rearm(sh, ep, h);
        }
    }
}

fn execute(sh: &Arc<Shared>, ep: &mut LockedCell, action: CellAction) {
    match action {
        CellAction::Machine {
            host,
            machine,
            action,
        } => {
            let said = ep.hosts.get_mut(&host).map(|l| &mut l.said);
            execute_machine(sh, host, machine, action, said);
        }
        CellAction::CloseControl {
            host,
            session,
            reason,
        } => {
            info!(
                host = host.0,
                session = session.0,
                reason = reason.name(),
                "closing control"
            );
            // Unlinked here: dropping the sender ends the session even if the frame does not
            // fit the queue.
            if let Some(link) = ep.controls.remove(&session) {
                let _ = link.tx.try_send(ControlCmd::Close(reason));
            }
        }
        CellAction::HardDrain { host } => {
            // Stored even with no client subscribed yet: a client attaching later sees it.
            if let Some(local) = ep.hosts.get(&host) {
                let _ = local.drain.send_replace(true);
            }
        }
        CellAction::Forget { host } => {
            if let Some(local) = ep.hosts.remove(&host) {
                if let Some(t) = local.timer {
                    t.task.abort();
                }
            }
            ep.controls.retain(|_, link| link.host != host);
        }
    }
}

/// Keep one timer per host on the core's next deadline (`poll_timeout`). An unchanged
/// deadline keeps its timer; a fired one is replaced.
fn rearm(sh: &Arc<Shared>, ep: &mut LockedCell, host: HostId) {
    let want = ep.cell.poll_timeout(host);
    let local = match want {
        Some((machine, _)) => ep.local(host, machine),
        None => match ep.hosts.get_mut(&host) {
            Some(local) => local,
            None => return,
        },
    };
    let same = match (&local.timer, want) {
        (Some(t), Some((machine, at))) => t.machine == machine && t.at == at,
        (None, None) => true,
        _ => false,
    };
    if same {
        return;
    }
    if let Some(t) = local.timer.take() {
        t.task.abort();
    }
    let Some((machine, at)) = want else {
        return;
    };
    let delay = Duration::from_millis(at.since_ms(sh.clock.now()));
    let sh2 = sh.clone();
    let task = crate::machine::spawn(async move {
        tokio::time::sleep(delay).await;
        let now = sh2.clock.now();
        // HO-A2 / HO-S3: a deadline only (re)starts reconciliation; the core keeps the barrier.
        feed(&sh2, host, |ep| {
            ep.fired(host, machine, at);
            let fed = ep.cell.handle_timeout(now, host, machine);
            ep.note(host, |_| CellRecord::Timeout { machine, fed });
            fed
        });
    });
    local.timer = Some(Armed {
        machine,
        at,
        task: task.abort_handle(),
    });
}

/// Feed a result or deadline to the machine it names; a replaced machine's is ignored (late).
fn feed(sh: &Arc<Shared>, host: HostId, f: impl FnOnce(&mut LockedCell) -> Fed) {
    if !sh.alive() {
        return;
    }
    if sh.input(host, f) == Fed::Late {
        sh.stats.bump(|s| s.late_results_ignored += 1);
    }
}

fn execute_machine(
    sh: &Arc<Shared>,
    host: HostId,
    machine: MachineId,
    action: HandoffAction,
    said: Option<&mut Said>,
) {
    let mut fallback = Said::default();
    let said = said.unwrap_or(&mut fallback);
    match action {
        HandoffAction::RunTransaction { attempt, request } => {
            sh.stats.bump(|s| s.transactions_run += 1);
            let sh = sh.clone();
            crate::machine::spawn(async move {
                if !sh.alive() {
                    return;
                }
                let answered = sh.store.run_transaction(sh.clock.now(), &request).await;
                let result = match &answered {
                    Ok(outcome) => DurableResult::Done(*outcome),
                    Err(failure) => {
                        warn!(host = host.0, op = %request.op_id, %failure, "assignment transaction");
                        sh.stats.bump(|s| s.store_failures += 1);
                        failure.durable_result()
                    }
                };
                let now = sh.clock.now();
                feed(&sh, host, |ep| {
                    // CONF-1: the store's answer as it came, then the reading fed to the core.
                    ep.note(host, |_| CellRecord::StoreAnswered {
                        call: StoreCall::Transaction,
                        answer: match &answered {
                            Ok(outcome) => StoreAnswer::Outcome(*outcome),
                            Err(failure) => StoreAnswer::Fault(failure.fault()),
                        },
                    });
                    let fed = ep
                        .cell
                        .handle_transaction_result(now, host, machine, attempt, result);
                    ep.note(host, |_| CellRecord::TransactionResult {
                        machine,
                        attempt,
                        result,
                        fed,
                    });
                    fed
                });
            });
        }
        HandoffAction::Reconcile { attempt, request } => {
            sh.stats.bump(|s| s.reconciliations_run += 1);
            let sh = sh.clone();
            crate::machine::spawn(async move {
                if !sh.alive() {
                    return;
                }
                let answered = sh.store.reconcile(sh.clock.now(), &request).await;
                let result = match &answered {
                    // HO-A2: the core reads the answer (a fence that could not be written
                    // keeps the source quarantined).
                    Ok(answer) => reconcile_result(*answer),
                    Err(failure) => {
                        warn!(host = host.0, op = %request.op_id, %failure, "reconciliation");
                        sh.stats.bump(|s| s.store_failures += 1);
                        failure.durable_result()
                    }
                };
                let now = sh.clock.now();
                feed(&sh, host, |ep| {
                    ep.note(host, |_| CellRecord::StoreAnswered {
                        call: StoreCall::Reconcile,
                        answer: match &answered {
                            Ok(Some(outcome)) => StoreAnswer::Outcome(*outcome),
                            Ok(None) => StoreAnswer::NoFence,
                            Err(failure) => StoreAnswer::Fault(failure.fault()),
                        },
                    });
                    let fed = ep
                        .cell
                        .handle_reconcile_result(now, host, machine, attempt, result);
                    ep.note(host, |_| CellRecord::ReconcileResult {
                        machine,
                        attempt,
                        result,
                        fed,
                    });
                    fed
                });
            });
        }
        HandoffAction::Quarantined { attempt, cause } => {
            sh.stats.bump(|s| s.quarantined += 1);
            // OPS-2: once per attempt; each retry of the same attempt is DEBUG (the gauge
            // `switchyard_cell_hosts_quarantined` says how many are stuck now).
            if said.quarantined == Some(attempt) {
                debug!(host = host.0, op = %attempt.op_id, ?cause, "handoff still quarantined");
            } else {
                said.quarantined = Some(attempt);
                warn!(host = host.0, op = %attempt.op_id, ?cause,
                    "handoff quarantined: source stays gated until a locked reconciliation succeeds; retried every --quarantine-retry-ms (said once per attempt)");
            }
        }
        HandoffAction::RetireSourceDraining { reason } => {
            sh.stats.bump(|s| match reason {
                RetireReason::Committed { .. } => s.retired_committed += 1,
                RetireReason::StaleAuthority { .. } => s.retired_stale += 1,
            });
            info!(host = host.0, ?reason, "source retired through DRAINING");
            let sh = sh.clone();
            crate::machine::spawn(async move {
                let cell = sh.cfg.cell;
                let r = (|| sh.store.release_activity(host, cell))
                    .retry(backoff(3))
                    .sleep(tokio::time::sleep)
                    .await;
                if let Err(e) = r {
                    warn!(host = host.0, %e, "activity not released (expires on its own)");
                }
            });
        }
        HandoffAction::ReopenAdmission { attempt } => {
            sh.stats.bump(|s| s.reopened += 1);
            // OPS-2: one line per attempt is too many when the store refuses every move; the
            // refusals are logged per episode (`note_move_result`) and counted by reason.
            debug!(host = host.0, op = %attempt.op_id, "handoff not committed: admission reopened");
        }
        // HO-A5: one write per action; the core decides the retry (`FenceFailed`, then a new
        // `FenceAuthority` when its timer fires).
        HandoffAction::FenceAuthority { authority, reason } => {
            let sh = sh.clone();
            crate::machine::spawn(async move {
                if !sh.alive() {
                    return;
                }
                let result = match sh.store.emergency_drain(&authority).await {
                    Ok(w) => {
                        sh.stats.bump(|s| s.fences_written += 1);
                        info!(host = host.0, ?reason, write = ?w, "drain fence written");
                        FenceResult::Written(w)
                    }
                    Err(e) => {
                        warn!(host = host.0, %e, "drain fence write failed");
                        sh.stats.bump(|s| s.store_failures += 1);
                        FenceResult::Failed
                    }
                };
                let now = sh.clock.now();
                feed(&sh, host, |ep| {
                    let fed = ep.cell.handle_fence_result(now, host, machine, result);
                    ep.note(host, |_| CellRecord::FenceResult {
                        machine,
                        result,
                        fed,
                    });
                    fed
                });
            });
        }
        HandoffAction::FenceFailed {
            authority,
            failures,
            retry_at,
            overdue,
        } => {
            sh.stats.bump(|s| s.fence_failures += 1);
            let retry_in_ms = retry_at.since_ms(sh.clock.now());
            let generation = authority.generation.0;
            // OPS-2: once when the fence first fails and once when it becomes overdue; the
            // retries between are DEBUG (`switchyard_cell_fences_unwritten` counts them now).
            let state = (generation, overdue);
            let repeat = said.fence_failed == Some(state);
            said.fence_failed = Some(state);
            if repeat {
                debug!(
                    host = host.0,
                    generation, failures, retry_in_ms, overdue, "drain fence retry scheduled"
                );
            } else if overdue {
                error!(host = host.0, generation, failures, retry_in_ms,
                    "drain fence still unwritten: the host stays drained and refuses undrain until the store takes it");
            } else {
                warn!(
                    host = host.0,
                    generation, failures, retry_in_ms, "drain fence retry scheduled"
                );
            }
        }
        HandoffAction::Reply(reply) => {
            // HO-L4: each attempt's result once (duplicates are answered, not replied here).
            if let HandoffReply::Result(r) = &reply {
                sh.note_move_result(sh.clock.now(), host, &r.outcome);
            }
            deliver(sh, reply);
        }
    }
}

fn backoff(times: usize) -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(times)
        .with_jitter()
        .with_jitter_seed(crate::machine::jitter_seed())
}

/// HO-A3: hand the reply to whoever still waits; nobody waiting changes nothing.
fn deliver(sh: &Shared, reply: HandoffReply) {
    let waiters = sh
        .waiters
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&reply.op_id())
        .unwrap_or_default();
    if waiters.is_empty() {
        sh.stats.bump(|s| s.replies_unheard += 1);
    }
    for w in waiters {
        if w.send(reply).is_ok() {
            sh.stats.bump(|s| s.replies_delivered += 1);
        }
    }
}

/// Wait for the reply of `op` (registered before the input that may produce it). `None`:
/// too many waiters; the caller answers `in_progress`.
pub(super) fn wait_for(sh: &Shared, op: OpId) -> Option<oneshot::Receiver<HandoffReply>> {
    let mut w = sh.waiters.lock().unwrap_or_else(|e| e.into_inner());
    let total: usize = w.values().map(Vec::len).sum();
    let list = w.entry(op).or_default();
    if total >= MAX_WAITERS || list.len() >= MAX_WAITERS_PER_OP {
        return None;
    }
    let (tx, rx) = oneshot::channel();
    list.push(tx);
    Some(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_machine_gets_an_undrained_watch() {
        let local = HostLocal::new(MachineId(1));
        local.drain.send_replace(true);
        let mut ep = LockedCell {
            cell: SourceCell::new(
                switchyard_core::handoff::SourceConfig {
                    request_timeout_ms: 1,
                    reconcile_timeout_ms: 1,
                    quarantine_retry_ms: 1,
                    cell_capable: true,
                    refusal_hold_ms: 1,
                },
                switchyard_core::handoff::CellId(1),
                switchyard_core::handoff::Incarnation(1),
            ),
            hosts: BTreeMap::from([(HostId(7), local)]),
            controls: BTreeMap::new(),
            journal: Journal::off(),
            clock: Clock::default(),
        };
        assert!(*ep.local(HostId(7), MachineId(1)).drain.borrow());
        assert!(!*ep.local(HostId(7), MachineId(2)).drain.borrow());
    }
}
