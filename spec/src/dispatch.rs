//! `DispatchModel`: the director's concurrent dispatch (HO-L3, SCALE-6) with its sweep
//! (SCALE-3): the real [`SelectionPass`], [`DispatchBudget`] and [`Dispatcher`] (and, inside the
//! pass, the real [`evaluate`](switchyard_core::handoff::evaluate)), over two source cells, one
//! of which may be unreachable.
//!
//! A model of its own, not a widening of [`crate::sweep`]: the sweep model's space (pinned,
//! with its starvation bound derived for one request at a time) is about a host list that
//! changes under the pass; this one is about many requests in flight, ending in any order, to
//! cells that fail on their own. Each keeps the other's dimension fixed, so both stay small.
//!
//! The model plays the director's glue as `adapters/src/handoff/director.rs` runs it
//! (`pass_recording`, `read_page`, `launch`, `on_ended`): a pass loads the store's cursor,
//! begins a `SelectionPass` with a new `DispatchBudget`; each turn of its loop first feeds
//! back every send that ended ([`DispatchBudget::handle_outcome`], [`Dispatcher::handle_ended`]),
//! then either reads a page (while `may_read_page()` and `poll_query()` allow and no store
//! call failed: `handle_page`, each decision through `DispatchBudget::dispatch`, the requests to
//! `Dispatcher::handle_page` with the pass's `cursor()`, then `launch`) or settles (`launch`,
//! `poll_cursor()` and, if it moved, a cursor save; then the pass ends if reading is over and
//! nothing is in flight, or waits for one send to end). `launch` sends while `poll_send` says
//! `Send` and drops a `Skip`. The [`Dispatcher`] outlives a pass (the backoffs do); a restart
//! loses it, the pass and the sends in flight, and the next pass loads the saved cursor.
//!
//! The environment, as wide as the director's real inputs:
//! - the store serves every page query from its host list (`after < host <= through`, host
//!   order, `LIMIT`), or the read fails; a cursor save succeeds or fails; the cursor row at
//!   the start is any of [`DispatchParams::initial_cursors`] (a cursor an earlier run left,
//!   with other limits, is any key);
//! - every send in flight may end at any point, in any order (the environment picks which):
//!   a send to the live cell is answered; a send to the other cell is answered, or fails as
//!   [`DispatchParams::failures`] list (a timeout, a refusal, a connection that failed): the
//!   unreachable cell is the one whose sends the environment fails or leaves hanging while
//!   everything else goes on;
//! - the clock moves on by the shortest backoff (every backoff in the model begins and ends
//!   on such a step, so no instant a decision compares is skipped), at any point;
//! - the target's lease lapses (its `lease_until` is in the past when the store serves the
//!   row): the director must not send a request into it (HO-L3);
//! - the director restarts at any point, and begins a pass whenever it has none.
//!
//! The properties judge from the model's own record ([`DispatchRecord`]: the rows the store
//! served per page, the requests handed to the dispatcher and not yet ended or skipped, the
//! sends in flight, each cell's failures and probes as the environment failed them, the target
//! lease each row was served with) and the last step's facts ([`DispatchFacts`]), never from
//! the dispatcher's account (its `open` counts, its backoffs). The cursor properties read the
//! ring of host ids from the pass's starting cursor: a saved cursor `c` stands for the hosts
//! in `(start, c]` (wrapping past the end; `c == start` is no progress or, once every host was
//! served, the whole circle). Property names start with the requirement ID; the `sometimes`
//! ones are `<ID> witness: ...`.
//!
//! Abstractions (each keeps the space finite without changing what the core decides):
//! - a fixed list of four hosts, 10 and 40 on the live cell, 20 and 30 on the other, page
//!   size 2, three pages per pass: from the start of the list a pass is a whole sweep (a page
//!   of a live then a stuck request, one of a stuck then a live request, and the empty page
//!   that ends the list); from the initial cursor 30, the end of the list, then the wrapped
//!   segment, full and then short (what a page cut by the dispatch budget or a list changed
//!   under the sweep leads to at any N). List changes are the sweep model's;
//! - two sets of limits, each an initial state: 2 in flight and 1 per cell (the total binds:
//!   a live request queued behind a stuck one must still go), and 3 in flight and 2 per cell
//!   (two requests of the stuck cell may be queued when its backoff ends: only one may be a
//!   probe); 2 pages ahead, a backoff of 1 s doubling to 2 s;
//! - runs are bounded: at most [`DispatchParams::passes`] passes, and budgets of clock steps,
//!   faults (failed reads, failed saves, restarts) and lease lapses. The dispatcher's ticket
//!   and page counters grow with every send, so the graph is a bounded DAG, not a cycle; two
//!   passes cover a whole sweep and the pass after a fault or a backoff;
//! - a live cell's answer is one `Answered` (busy, a result, refused and superseded are
//!   alike to the dispatcher: any answer is `Ok`; `DispatchBudget` classifies them, the sweep
//!   model covers that); every failure kind is `Err` to the dispatcher, which keeps the reason
//!   only to report it;
//! - the pass's failure budget (`DispatchBudget`, `--max-failures`) is shared by every cell:
//!   the review bound's (8) is more than the stuck cell can fail in a run, as the director's
//!   default (64) is more than a few stuck cells' per-cell bounds and probes in one pass. A
//!   budget the stuck cell alone can spend holds the live cell's hosts for the rest of the
//!   pass, and the live-cell property reports it
//!   (`spec/tests/dispatch_model.rs::ho_l3_dispatch_model_a_failure_budget_the_stuck_cell_spends_holds_the_live_one`).
//!
//! What the model leaves out, and why:
//! - durations: a send ends "within one request timeout" by the adapter's `tokio::time::timeout`
//!   around it (tested against real sockets: `adapters/tests/ho_l3_director_dispatch.rs`,
//!   `tools/tests/ho_l3_director_stuck_cell.rs`); here a hanging send is one the environment has
//!   not ended yet, which is what the dispatcher sees;
//! - the adapter's re-sends of a lost answer (inside one send), the cell's side of a request
//!   (the handoff model), a cell the store names no address for (an immediate `NoAddress`
//!   failure: a failure the environment may pick at once), and several directors;
//! - the cells' answers reaching a restarted director: its sends are lost with it (their
//!   handoffs are the cells', idempotent by op id).
//!
//! Every step runs under `crate::caught`: a core invariant that fires is that step's
//! counterexample.

use std::fmt;

use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use switchyard_core::handoff::store::{AbortReason, TxnOutcome};
use switchyard_core::handoff::{
    Admit, CandidateRow, CandidateView, CellFailure, DirectorPolicy, Dispatch, DispatchBudget,
    DispatchLimits, DispatchNext, DispatchOutcome, DispatchTicket, Dispatcher, PageCursor,
    PageQuery, RefusalReason, ScanLimits, SelectionPass, TargetView,
};
use switchyard_core::handoff::{
    CellId, Epoch, Generation, HandoffRequest, HostId, Incarnation, OpId, SourceAuthority,
};
use switchyard_core::handoff::{HandoffReply, HandoffResult, Measurement, PolicyConfig};
use switchyard_core::MonoMs;

use crate::halt::Halt;

/// The cell that always answers, the one that may be unreachable, and the measured target.
pub const LIVE: CellId = CellId(1);
pub const DARK: CellId = CellId(2);
pub const DISPATCH_TGT: CellId = CellId(9);
/// The clock at the start.
pub const DISPATCH_T0: MonoMs = MonoMs(10_000);
/// At most this many hosts (slots of a byte-wide bit set).
pub const MAX_DISPATCH_HOSTS: usize = 8;

/// A bit set over the host slots (slot `i`: the `i`-th smallest id).
pub type Hosts = u8;

fn bit(slot: usize) -> Hosts {
    1 << slot
}

/// A one-idea bug in the director's glue (the adapter's part, played by the model), for the
/// tests that show the checker reports it. The core is never changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DispatchBug {
    /// The glue saves the pass's `cursor()` after every page it reads, as the sequential
    /// director did, instead of `poll_cursor()`: the cursor passes pages still in flight.
    SaveAfterRead,
}

/// The model's size knobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchParams {
    /// The host list: distinct ids, ascending, each with its source cell ([`LIVE`] or [`DARK`]).
    pub hosts: Vec<(u64, CellId)>,
    /// The store's cursor row at the start: one initial state each.
    pub initial_cursors: Vec<Option<u64>>,
    /// `ScanLimits` of every pass (`max_dispatch` never cuts a page here).
    pub page_size: u32,
    pub max_pages: u32,
    pub max_dispatch: u32,
    /// `DispatchBudget::new(max_failures)` of every pass.
    pub max_failures: u32,
    /// The dispatch limits: one initial state each (with each initial cursor).
    pub limits: Vec<DispatchLimits>,
    /// How a send to [`DARK`] may fail.
    pub failures: Vec<CellFailure>,
    /// Passes per run.
    pub passes: u8,
    /// Clock steps (each `limits.backoff_min_ms`) per run.
    pub clock_steps: u8,
    /// Faults per run: failed page reads, failed cursor saves, restarts (at most `faults` in
    /// all, each kind within its own budget).
    pub faults: u8,
    pub read_failures: u8,
    pub save_failures: u8,
    pub restarts: u8,
    /// Lapses of the target's lease per run.
    pub lease_lapses: u8,
    pub bug: Option<DispatchBug>,
}

impl Default for DispatchParams {
    /// The review bound: hosts 10, 40 on the live cell and 20, 30 on the other; the store's
    /// cursor at the start of the list or at 30; page size 2, three pages per pass; 2 in
    /// flight and 1 per cell, or 3 and 2; 2 pages ahead, backoff 1 s to 2 s; a failure budget
    /// the unreachable cell cannot spend in a run; two passes, two clock steps, two faults,
    /// one lease lapse; the three ways a send fails.
    fn default() -> Self {
        DispatchParams {
            hosts: vec![(10, LIVE), (20, DARK), (30, DARK), (40, LIVE)],
            initial_cursors: vec![None, Some(30)],
            page_size: 2,
            max_pages: 3,
            max_dispatch: 16,
            max_failures: 8,
            limits: vec![
                DispatchLimits {
                    max_in_flight: 2,
                    max_in_flight_per_cell: 1,
                    max_pages_ahead: 2,
                    backoff_min_ms: 1_000,
                    backoff_max_ms: 2_000,
                },
                DispatchLimits {
                    max_in_flight: 3,
                    max_in_flight_per_cell: 2,
                    max_pages_ahead: 2,
                    backoff_min_ms: 1_000,
                    backoff_max_ms: 2_000,
                },
            ],
            failures: vec![
                CellFailure::Timeout,
                CellFailure::Refused(RefusalReason::StaleTimestamp),
                CellFailure::Unreachable,
            ],
            passes: 2,
            clock_steps: 2,
            faults: 2,
            read_failures: 1,
            save_failures: 1,
            restarts: 1,
            lease_lapses: 1,
            bug: None,
        }
    }
}

impl DispatchParams {
    fn scan_limits(&self) -> ScanLimits {
        ScanLimits {
            page_size: self.page_size,
            max_pages: self.max_pages,
            max_dispatch: self.max_dispatch,
        }
    }
}

/// How a send ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    /// The cell answered (any answer).
    Answered,
    /// The send failed at its cell.
    Failed(CellFailure),
}

/// One send in flight, as the glue holds it (its `JoinSet` task) and the model records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flight {
    pub ticket: DispatchTicket,
    pub op_id: OpId,
    pub slot: u8,
    /// The page (of this pass, in read order) the request came from.
    pub page: u8,
    /// Sent to a cell the environment had failed and not answered since (a probe).
    pub probe: bool,
    /// Ended, not yet fed back (the glue joins it at its next turn).
    pub ended: Option<End>,
    /// When it ended (the order the glue joins them in).
    pub ended_seq: u8,
}

/// Where the glue's loop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// At the top of its loop: it feeds back what ended, then reads a page or settles.
    Turn,
    /// Blocked until one send ends (`join_next`).
    Waiting,
}

/// One pass: the core's pass and budget, and the glue's own state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pass {
    pub sel: SelectionPass,
    pub budget: DispatchBudget,
    pub phase: Phase,
    /// A store call failed: no page is read any more.
    pub failure: bool,
}

/// One page as the store served it, and what of it is not done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageRec {
    pub rows: Hosts,
    /// Short with no upper bound: the end of the list.
    pub end: bool,
    /// Handed to the dispatcher (queued) and not yet ended or skipped.
    pub pending: Hosts,
}

/// The environment's record of a cell it failed (until it answers again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Failing {
    /// The failure that began the episode, or the last failed probe.
    pub since: MonoMs,
    /// Failures of the episode: the first, then each failed probe.
    pub failures: u32,
    /// Probes in flight.
    pub probes: u8,
}

/// The model's own record (the properties judge from it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DispatchRecord {
    /// Where the pass began (the cursor the store held).
    pub start: Option<u64>,
    /// The pass's pages, in read order.
    pub pages: Vec<PageRec>,
    /// Hosts served in this pass while their target's lease was live.
    pub served_live: Hosts,
    /// Per cell (`[LIVE, DARK]`): the environment failed it and it has not answered since.
    pub failing: [Option<Failing>; 2],
    /// Ends so far in this pass (the order of `Flight::ended_seq`).
    pub ends: u8,
    /// A send ended before one sent earlier from its page, since the last cursor save.
    pub out_of_order: bool,
}

/// A cursor save as the glue attempted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SaveFact {
    pub start: Option<u64>,
    pub cursor: Option<u64>,
    /// Hosts handed over and not done, in every page of the pass.
    pub pending: Hosts,
    /// Rows of the pages read before the first page with pending work.
    pub finished: Hosts,
    /// Every host of the list is in `finished`.
    pub circle: bool,
}

/// What the last step did (the properties that judge a transition read it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DispatchFacts {
    pub save: Option<SaveFact>,
    /// Hosts sent in this step.
    pub sent: Hosts,
    /// A send to a cell the environment had failed: (too early for its backoff, probes in
    /// flight after it).
    pub probe: Option<(bool, u8)>,
    /// Live-cell hosts served with a live target and not handed over to the dispatcher.
    pub live_not_handed: Hosts,
    // Witness events.
    pub probe_answered: bool,
    pub out_of_order: bool,
    pub saved_after_out_of_order: bool,
    pub saved_in_wrap: bool,
    pub live_sent_past_hanging: bool,
    pub lapsed_examined: bool,
}

/// Budgets left in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DispatchBudgets {
    pub passes: u8,
    pub clock_steps: u8,
    pub faults: u8,
    pub read_failures: u8,
    pub save_failures: u8,
    pub restarts: u8,
    pub lease_lapses: u8,
}

/// The host ids of a model, ascending (slot `i` of every bit set is `ids()[i]`): the same in
/// every state of a model, so neither hashed nor compared by content. Each model's list is
/// leaked once (a few bytes), so states carry a reference and project themselves.
#[derive(Debug, Clone, Copy)]
pub struct HostIds(&'static [u64]);

impl HostIds {
    pub fn ids(self) -> &'static [u64] {
        self.0
    }
}

impl PartialEq for HostIds {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for HostIds {}

impl std::hash::Hash for HostIds {
    /// Every state of a model has the same ids: nothing to tell states apart by.
    fn hash<H: std::hash::Hasher>(&self, _state: &mut H) {}
}

/// The model's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DispatchState {
    pub hosts: HostIds,
    pub now: MonoMs,
    /// The store's cursor row.
    pub saved: Option<u64>,
    pub target_live: bool,
    /// The real dispatcher (it outlives a pass; a restart makes a new one).
    pub dispatcher: Dispatcher,
    pub pass: Option<Pass>,
    /// The sends in flight, in send order.
    pub flights: Vec<Flight>,
    pub left: DispatchBudgets,
    pub rec: DispatchRecord,
    pub last: DispatchFacts,
    pub core_panic: Option<String>,
}

/// The environment's moves and the director's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum DispatchAction {
    /// The director begins a pass at the store's cursor.
    NewPass,
    /// The glue's turn: feed back what ended, then read the next page (served or failed).
    ReadPage { fails: bool },
    /// The glue's turn: feed back what ended, launch, save the cursor if it moved (the save
    /// fails or not), then end the pass or wait.
    Settle { save_fails: bool },
    /// The send to this host ends.
    Ends { host: u64, end: End },
    /// The clock moves on by the shortest backoff.
    ClockStep,
    /// The target's lease lapses.
    LeaseLapses,
    /// The director restarts.
    Restart,
}

impl fmt::Display for DispatchAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchAction::NewPass => write!(f, "the director begins a pass"),
            DispatchAction::ReadPage { fails: false } => write!(f, "the next page is read"),
            DispatchAction::ReadPage { fails: true } => write!(f, "the next page read fails"),
            DispatchAction::Settle { save_fails: false } => {
                write!(
                    f,
                    "the director launches, saves the cursor if it moved, waits"
                )
            }
            DispatchAction::Settle { save_fails: true } => {
                write!(f, "the director launches; its cursor save fails")
            }
            DispatchAction::Ends {
                host,
                end: End::Answered,
            } => write!(f, "the send for host {host} is answered"),
            DispatchAction::Ends {
                host,
                end: End::Failed(why),
            } => write!(f, "the send for host {host} fails ({})", why.name()),
            DispatchAction::ClockStep => write!(f, "the clock moves on"),
            DispatchAction::LeaseLapses => write!(f, "the target's lease lapses"),
            DispatchAction::Restart => write!(f, "the director restarts"),
        }
    }
}

/// What a trace records after each step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchProjection {
    pub now_ms: u64,
    pub saved_cursor: Option<u64>,
    pub target_live: bool,
    pub in_pass: bool,
    pub pass_start: Option<u64>,
    /// The pass's `cursor()` and `poll_query()` (after, through, limit).
    pub pass_cursor: Option<u64>,
    pub next_query: Option<(Option<u64>, Option<u64>, u32)>,
    pub waiting: bool,
    /// Hosts in flight (ended ones not yet fed back marked by their end).
    pub in_flight: Vec<(u64, Option<End>)>,
    /// Hosts queued or in flight per page of the pass.
    pub pending: Vec<Vec<u64>>,
    /// Cells backed off (the dispatcher's), with their backoff's end.
    pub backed_off: Vec<(u32, u64)>,
}

impl DispatchState {
    /// The host ids, ascending.
    pub fn ids(&self) -> &'static [u64] {
        self.hosts.ids()
    }

    pub fn project(&self) -> DispatchProjection {
        let ids = self.ids();
        let pass = self.pass.as_ref();
        let of = |hosts: Hosts| -> Vec<u64> {
            (0..ids.len())
                .filter(|s| hosts & bit(*s) != 0)
                .map(|s| ids[s])
                .collect()
        };
        DispatchProjection {
            now_ms: self.now.as_ms(),
            saved_cursor: self.saved,
            target_live: self.target_live,
            in_pass: pass.is_some(),
            pass_start: self.rec.start,
            pass_cursor: pass.and_then(|p| key(p.sel.cursor())),
            next_query: pass
                .and_then(|p| p.sel.poll_query())
                .map(|q| (q.after.map(|h| h.0), q.through.map(|h| h.0), q.limit)),
            waiting: pass.is_some_and(|p| p.phase == Phase::Waiting),
            in_flight: self
                .flights
                .iter()
                .map(|f| (ids[usize::from(f.slot)], f.ended))
                .collect(),
            pending: self.rec.pages.iter().map(|p| of(p.pending)).collect(),
            backed_off: self
                .dispatcher
                .backoffs()
                .iter()
                .map(|(c, b)| (c.0, b.until.as_ms()))
                .collect(),
        }
    }
}

fn key(cursor: PageCursor) -> Option<u64> {
    cursor.after.map(|h| h.0)
}

#[derive(Debug, Clone)]
pub struct DispatchModel {
    pub params: DispatchParams,
    pub halt: Halt,
    ids: &'static [u64],
    /// Slots on [`LIVE`].
    live: Hosts,
}

fn cell_index(cell: CellId) -> usize {
    usize::from(cell != LIVE)
}

impl DispatchModel {
    pub fn new(params: DispatchParams) -> DispatchModel {
        let ids: Vec<u64> = params.hosts.iter().map(|(id, _)| *id).collect();
        assert!(
            !ids.is_empty() && ids.len() <= MAX_DISPATCH_HOSTS,
            "1 to {MAX_DISPATCH_HOSTS} hosts"
        );
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids ascending");
        assert!(
            params.hosts.iter().all(|(_, c)| *c == LIVE || *c == DARK),
            "hosts on LIVE or DARK"
        );
        params.scan_limits().validate().expect("valid scan limits");
        assert!(
            !params.limits.is_empty(),
            "at least one set of dispatch limits"
        );
        for limits in &params.limits {
            limits.validate().expect("valid dispatch limits");
            assert_eq!(
                limits.backoff_min_ms, params.limits[0].backoff_min_ms,
                "one clock step for every set of limits"
            );
        }
        assert!(
            u64::from(params.max_dispatch)
                >= u64::from(params.page_size) * u64::from(params.max_pages),
            "the dispatch budget never cuts a page (the cursor properties read whole pages)"
        );
        let mut live = 0;
        for (slot, (_, cell)) in params.hosts.iter().enumerate() {
            if *cell == LIVE {
                live |= bit(slot);
            }
        }
        DispatchModel {
            params,
            halt: Halt::default(),
            ids: Box::leak(ids.into_boxed_slice()),
            live,
        }
    }

    pub fn ids(&self) -> &'static [u64] {
        self.ids
    }

    fn all(&self) -> Hosts {
        u8::try_from((1u16 << self.ids.len()) - 1).unwrap_or(u8::MAX)
    }

    fn slot(&self, id: u64) -> Option<usize> {
        self.ids.iter().position(|h| *h == id)
    }

    fn cell(&self, slot: usize) -> CellId {
        self.params.hosts[slot].1
    }

    pub fn init_states_list(&self) -> Vec<DispatchState> {
        let p = &self.params;
        let mut states = Vec::new();
        for limits in &p.limits {
            for saved in &p.initial_cursors {
                states.push(DispatchState {
                    hosts: HostIds(self.ids),
                    now: DISPATCH_T0,
                    saved: *saved,
                    target_live: true,
                    dispatcher: Dispatcher::new(*limits).expect("valid dispatch limits"),
                    pass: None,
                    flights: Vec::new(),
                    left: DispatchBudgets {
                        passes: p.passes,
                        clock_steps: p.clock_steps,
                        faults: p.faults,
                        read_failures: p.read_failures,
                        save_failures: p.save_failures,
                        restarts: p.restarts,
                        lease_lapses: p.lease_lapses,
                    },
                    rec: DispatchRecord {
                        start: *saved,
                        pages: Vec::new(),
                        served_live: 0,
                        failing: [None; 2],
                        ends: 0,
                        out_of_order: false,
                    },
                    last: DispatchFacts::default(),
                    core_panic: None,
                });
            }
        }
        states
    }

    fn director_policy() -> DirectorPolicy {
        DirectorPolicy {
            enabled: true,
            cohort_percent: 100,
            policy: PolicyConfig {
                freshness_window_ms: 3_600_000,
                host_cooldown_ms: 600_000,
            },
        }
    }

    /// The store's row for a host: a fresh, better measurement for the target, whose lease is
    /// live (an hour ahead) or lapsed (it ended at 1 ms: a process took it and stopped).
    fn row(&self, slot: usize, now: MonoMs, target_live: bool) -> CandidateRow {
        CandidateRow {
            candidate: CandidateView {
                authority: SourceAuthority {
                    cell: self.cell(slot),
                    host: HostId(self.ids[slot]),
                    epoch: Epoch(1),
                    incarnation: Incarnation(1),
                    generation: Generation(1),
                },
                source_cell_capable: true,
                desktop_capable: true,
                measurement: Some((
                    DISPATCH_TGT,
                    Measurement {
                        measured_at: DISPATCH_T0,
                        current_rtt_ms: 120,
                        target_rtt_ms: 60,
                    },
                )),
                cooldown_until: None,
            },
            target: Some(TargetView {
                cell: DISPATCH_TGT,
                capable: true,
                load: 0,
                capacity: 1_000,
                lease_until: if target_live {
                    now.plus_ms(3_600_000)
                } else {
                    MonoMs(1)
                },
            }),
        }
    }

    /// The store answers a page query from its list: `after < host <= through`, in host
    /// order, at most `limit` rows.
    pub fn serve(&self, query: &PageQuery) -> Vec<usize> {
        let after = query.after.map(|h| h.0);
        let through = query.through.map(|h| h.0);
        (0..self.ids.len())
            .filter(|s| after.is_none_or(|a| self.ids[*s] > a))
            .filter(|s| through.is_none_or(|t| self.ids[*s] <= t))
            .take(usize::try_from(query.limit).unwrap_or(usize::MAX))
            .collect()
    }

    /// The hosts a cursor `c` stands for in a pass from `start`: the ring `(start, c]`
    /// (wrapping past the end of the list; `None` is the end, or the start). `c == start`:
    /// none, or every host when `circle`.
    pub fn ring(&self, start: Option<u64>, c: Option<u64>, circle: bool) -> Hosts {
        if c == start {
            return if circle { self.all() } else { 0 };
        }
        let mut hosts = 0;
        for (slot, id) in self.ids.iter().enumerate() {
            let after_start = start.is_none_or(|s| *id > s);
            let upto_c = c.is_some_and(|c| *id <= c);
            let inside = match (start, c) {
                // From the start of the list up to c.
                (None, _) => upto_c,
                // From start to the end of the list.
                (Some(_), None) => after_start,
                (Some(s), Some(c)) if c > s => after_start && upto_c,
                // Wrapped: past the end, then from the start of the list up to c.
                (Some(_), Some(_)) => after_start || upto_c,
            };
            if inside {
                hosts |= bit(slot);
            }
        }
        hosts
    }

    /// Every `always` property holds at `state` (nothing is explored past a counterexample).
    fn judged_right(&self, s: &DispatchState) -> bool {
        s.core_panic.is_none()
            && live_not_held_up(self, s)
            && backoff_respected(s)
            && cursor_after_ends(self, s)
            && cursor_never_back(self, s)
            && live_targets_only(s)
            && within_bounds(self, s)
    }

    pub fn caught_step(&self, state: &DispatchState, action: DispatchAction) -> DispatchState {
        crate::caught::caught(|| self.step(state, action)).unwrap_or_else(|message| {
            let mut next = state.clone();
            next.last = DispatchFacts::default();
            next.core_panic = Some(message);
            next
        })
    }

    pub fn step(&self, state: &DispatchState, action: DispatchAction) -> DispatchState {
        let mut s = state.clone();
        s.last = DispatchFacts::default();
        match action {
            DispatchAction::NewPass => self.new_pass(&mut s),
            DispatchAction::ReadPage { fails } => self.read_page(&mut s, fails),
            DispatchAction::Settle { save_fails } => self.settle(&mut s, save_fails),
            DispatchAction::Ends { host, end } => self.ends(&mut s, host, end),
            DispatchAction::ClockStep => {
                s.left.clock_steps -= 1;
                s.now = s.now.plus_ms(s.dispatcher.limits().backoff_min_ms);
            }
            DispatchAction::LeaseLapses => {
                s.left.lease_lapses -= 1;
                s.target_live = false;
            }
            DispatchAction::Restart => self.restart(&mut s),
        }
        s
    }

    fn new_pass(&self, s: &mut DispatchState) {
        s.left.passes -= 1;
        let cursor = PageCursor {
            after: s.saved.map(HostId),
        };
        s.pass = Some(Pass {
            sel: SelectionPass::begin(cursor, self.params.scan_limits())
                .expect("valid scan limits"),
            budget: DispatchBudget::new(self.params.max_failures),
            phase: Phase::Turn,
            failure: false,
        });
        s.rec.start = s.saved;
        s.rec.pages.clear();
        s.rec.served_live = 0;
        s.rec.ends = 0;
        s.rec.out_of_order = false;
    }

    fn restart(&self, s: &mut DispatchState) {
        s.left.restarts -= 1;
        s.left.faults -= 1;
        s.pass = None;
        s.flights.clear();
        s.dispatcher = Dispatcher::new(*s.dispatcher.limits()).expect("valid dispatch limits");
        s.rec.pages.clear();
        s.rec.failing = [None; 2];
    }

    /// The glue feeds back every send that ended, in the order they ended.
    fn feed_back(&self, s: &mut DispatchState) {
        let mut ended: Vec<(u8, usize)> = s
            .flights
            .iter()
            .enumerate()
            .filter(|(_, f)| f.ended.is_some())
            .map(|(i, f)| (f.ended_seq, i))
            .collect();
        ended.sort_unstable();
        let flights: Vec<Flight> = ended.iter().map(|(_, i)| s.flights[*i]).collect();
        s.flights.retain(|f| f.ended.is_none());
        for f in flights {
            self.on_ended(s, f);
        }
    }

    /// `Director::on_ended`: the budget classifies the outcome, the dispatcher takes the end.
    fn on_ended(&self, s: &mut DispatchState, f: Flight) {
        let Some(end) = f.ended else { return };
        let slot = usize::from(f.slot);
        let cell = self.cell(slot);
        let (outcome, result) = match end {
            // Any answer is the same to the dispatcher; a result stands for them all.
            End::Answered => (
                DispatchOutcome::Answered(HandoffReply::Result(HandoffResult {
                    op_id: f.op_id,
                    outcome: TxnOutcome::RolledBack {
                        reason: AbortReason::ConcurrencyLimited,
                    },
                })),
                Ok(()),
            ),
            End::Failed(why) => (DispatchOutcome::TransportFailed, Err(why)),
        };
        if let Some(pass) = s.pass.as_mut() {
            let _ = pass.budget.handle_outcome(&outcome);
        }
        let _ = s.dispatcher.handle_ended(s.now, f.ticket, result);
        // The model's record: the host is done; the cell's episode as the environment made it.
        if let Some(page) = s.rec.pages.get_mut(usize::from(f.page)) {
            page.pending &= !bit(slot);
        }
        let failing = &mut s.rec.failing[cell_index(cell)];
        if let Some(fl) = failing.as_mut().filter(|_| f.probe) {
            fl.probes = fl.probes.saturating_sub(1);
        }
        match (end, failing.as_mut()) {
            (End::Answered, Some(_)) => {
                s.last.probe_answered |= f.probe;
                *failing = None;
            }
            (End::Answered, None) => {}
            (End::Failed(_), None) => {
                *failing = Some(Failing {
                    since: s.now,
                    failures: 1,
                    probes: 0,
                });
            }
            (End::Failed(_), Some(fl)) => {
                // A failed probe starts a longer wait; an older send's failure changes nothing.
                if f.probe {
                    fl.failures += 1;
                    fl.since = s.now;
                }
            }
        }
    }

    /// `Director::launch`: send every request the dispatcher lets go now; a skip is dropped.
    fn launch(&self, s: &mut DispatchState) {
        while let Some(next) = s.dispatcher.poll_send(s.now) {
            match next {
                DispatchNext::Skip(req) => {
                    if let Some(slot) = self.slot(req.source.host.0) {
                        for page in &mut s.rec.pages {
                            page.pending &= !bit(slot);
                        }
                    }
                }
                DispatchNext::Send(ticket, req) => self.sent(s, ticket, &req),
            }
        }
    }

    fn sent(&self, s: &mut DispatchState, ticket: DispatchTicket, req: &HandoffRequest) {
        let Some(slot) = self.slot(req.source.host.0) else {
            return;
        };
        let cell = self.cell(slot);
        let page = s
            .rec
            .pages
            .iter()
            .rposition(|p| p.pending & bit(slot) != 0)
            .unwrap_or(0);
        s.last.sent |= bit(slot);
        let mut probe = false;
        if let Some(fl) = s.rec.failing[cell_index(cell)].as_mut() {
            probe = true;
            fl.probes += 1;
            let shift = fl.failures.saturating_sub(1).min(32);
            let limits = *s.dispatcher.limits();
            let wait = limits
                .backoff_min_ms
                .saturating_mul(1u64 << shift)
                .min(limits.backoff_max_ms);
            let early = s.now < fl.since.plus_ms(wait);
            let (was_early, most) = s.last.probe.unwrap_or((false, 0));
            s.last.probe = Some((was_early || early, most.max(fl.probes)));
        }
        if cell == LIVE
            && s.flights
                .iter()
                .any(|f| self.cell(usize::from(f.slot)) == DARK && f.ended.is_none())
        {
            s.last.live_sent_past_hanging = true;
        }
        s.flights.push(Flight {
            ticket,
            op_id: req.op_id,
            slot: u8::try_from(slot).unwrap_or(u8::MAX),
            page: u8::try_from(page).unwrap_or(u8::MAX),
            probe,
            ended: None,
            ended_seq: 0,
        });
    }

    fn read_page(&self, s: &mut DispatchState, fails: bool) {
        self.feed_back(s);
        let Some(mut pass) = s.pass.take() else {
            return;
        };
        let Some(query) = pass.sel.poll_query() else {
            s.pass = Some(pass);
            return;
        };
        if fails {
            s.left.read_failures -= 1;
            s.left.faults -= 1;
            pass.sel.handle_page_failed();
            pass.failure = true;
            s.pass = Some(pass);
            self.launch(s);
            return;
        }
        let slots = self.serve(&query);
        let rows: Vec<CandidateRow> = slots
            .iter()
            .map(|slot| self.row(*slot, s.now, s.target_live))
            .collect();
        let mut served: Hosts = 0;
        for slot in &slots {
            served |= bit(*slot);
        }
        if s.target_live {
            s.rec.served_live |= served;
        } else if served != 0 {
            s.last.lapsed_examined = true;
        }
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let end = query.through.is_none() && slots.len() < limit;
        let decisions = pass.sel.handle_page(s.now, &Self::director_policy(), &rows);
        let mut sends = Vec::new();
        let mut handed: Hosts = 0;
        for d in &decisions {
            if let Dispatch::Send(req) = pass.budget.dispatch(d) {
                sends.push(req);
                if let Some(slot) = self.slot(req.source.host.0) {
                    handed |= bit(slot);
                }
            }
        }
        let live_eligible = if s.target_live { served & self.live } else { 0 };
        s.last.live_not_handed = live_eligible & !handed;
        let cursor = pass.sel.cursor();
        let (_, admits) = s.dispatcher.handle_page(s.now, cursor, &sends);
        let mut pending: Hosts = 0;
        for (req, admit) in sends.iter().zip(&admits) {
            if *admit == Admit::Queued {
                if let Some(slot) = self.slot(req.source.host.0) {
                    pending |= bit(slot);
                }
            }
        }
        s.rec.pages.push(PageRec {
            rows: served,
            end,
            pending,
        });
        let save_now = self.params.bug == Some(DispatchBug::SaveAfterRead);
        s.pass = Some(pass);
        self.launch(s);
        if save_now {
            self.save(s, key(cursor), false);
        }
    }

    /// A cursor save, as the glue attempts it: judged (the facts), then stored unless it fails.
    fn save(&self, s: &mut DispatchState, cursor: Option<u64>, fails: bool) {
        let mut pending: Hosts = 0;
        let mut finished: Hosts = 0;
        let mut open = false;
        let mut end_finished = false;
        for page in &s.rec.pages {
            pending |= page.pending;
            open |= page.pending != 0;
            if !open {
                finished |= page.rows;
                end_finished |= page.end;
            }
        }
        s.last.save = Some(SaveFact {
            start: s.rec.start,
            cursor,
            pending,
            finished,
            circle: finished == self.all(),
        });
        if fails {
            s.left.save_failures -= 1;
            s.left.faults -= 1;
            if let Some(pass) = s.pass.as_mut() {
                pass.failure = true;
            }
            return;
        }
        s.saved = cursor;
        if s.rec.out_of_order {
            s.last.saved_after_out_of_order = true;
            s.rec.out_of_order = false;
        }
        if end_finished && s.rec.start.is_some() && cursor.is_some() {
            s.last.saved_in_wrap = true;
        }
    }

    /// The glue's turn when it reads no page: launch, save the cursor if it moved, then end
    /// the pass (reading over, nothing in flight), take another turn, or wait for an end.
    fn settle(&self, s: &mut DispatchState, save_fails: bool) {
        self.feed_back(s);
        self.launch(s);
        if let Some(c) = s.dispatcher.poll_cursor() {
            if self.params.bug != Some(DispatchBug::SaveAfterRead) {
                self.save(s, key(c), save_fails);
            }
        }
        let Some(pass) = s.pass.as_mut() else { return };
        let reading_over = pass.failure || pass.sel.poll_query().is_none();
        if s.flights.is_empty() {
            if reading_over {
                // Whatever is left queued is skipped (nothing is in flight: nothing is).
                self.launch(s);
                s.pass = None;
            }
            return;
        }
        pass.phase = Phase::Waiting;
    }

    fn ends(&self, s: &mut DispatchState, host: u64, end: End) {
        let Some(slot) = self.slot(host) else { return };
        let Some(i) = s
            .flights
            .iter()
            .position(|f| usize::from(f.slot) == slot && f.ended.is_none())
        else {
            return;
        };
        s.rec.ends = s.rec.ends.saturating_add(1);
        let f = s.flights[i];
        // Out of order: a send of the same page sent before it has not ended.
        if s.flights[..i]
            .iter()
            .any(|g| g.page == f.page && g.ended.is_none())
        {
            s.last.out_of_order = true;
            s.rec.out_of_order = true;
        }
        s.flights[i].ended = Some(end);
        s.flights[i].ended_seq = s.rec.ends;
        let waiting = s.pass.as_ref().is_some_and(|p| p.phase == Phase::Waiting);
        if waiting {
            // `join_next` returns it: fed back at once, then the loop's next turn.
            let f = s.flights.remove(i);
            self.on_ended(s, f);
            if let Some(pass) = s.pass.as_mut() {
                pass.phase = Phase::Turn;
            }
        }
    }

    /// Whether the glue's turn reads a page (else it settles).
    fn reads(s: &DispatchState, pass: &Pass) -> bool {
        !pass.failure && s.dispatcher.may_read_page() && pass.sel.poll_query().is_some()
    }

    /// Whether settling now would save a cursor (the glue's turn played on a copy).
    fn settle_saves(&self, s: &DispatchState) -> bool {
        let mut copy = s.clone();
        self.feed_back(&mut copy);
        self.launch(&mut copy);
        copy.dispatcher.poll_cursor().is_some()
    }
}

impl Model for DispatchModel {
    type State = DispatchState;
    type Action = DispatchAction;

    fn init_states(&self) -> Vec<DispatchState> {
        self.init_states_list()
    }

    fn actions(&self, s: &DispatchState, actions: &mut Vec<DispatchAction>) {
        if self.halt.is_raised() || !self.judged_right(s) {
            return;
        }
        let left = &s.left;
        let fault = left.faults > 0;
        match &s.pass {
            None if left.passes > 0 => actions.push(DispatchAction::NewPass),
            None => {}
            Some(pass) if pass.phase == Phase::Turn => {
                if Self::reads(s, pass) {
                    actions.push(DispatchAction::ReadPage { fails: false });
                    if fault && left.read_failures > 0 {
                        actions.push(DispatchAction::ReadPage { fails: true });
                    }
                } else {
                    actions.push(DispatchAction::Settle { save_fails: false });
                    if fault && left.save_failures > 0 && self.settle_saves(s) {
                        actions.push(DispatchAction::Settle { save_fails: true });
                    }
                }
            }
            Some(_) => {}
        }
        for f in s.flights.iter().filter(|f| f.ended.is_none()) {
            let slot = usize::from(f.slot);
            let host = self.ids[slot];
            actions.push(DispatchAction::Ends {
                host,
                end: End::Answered,
            });
            if self.cell(slot) == DARK {
                for why in &self.params.failures {
                    actions.push(DispatchAction::Ends {
                        host,
                        end: End::Failed(*why),
                    });
                }
            }
        }
        if left.clock_steps > 0 {
            actions.push(DispatchAction::ClockStep);
        }
        if left.lease_lapses > 0 && s.target_live {
            actions.push(DispatchAction::LeaseLapses);
        }
        if fault && left.restarts > 0 && (s.pass.is_some() || !s.dispatcher.backoffs().is_empty()) {
            actions.push(DispatchAction::Restart);
        }
    }

    fn next_state(&self, state: &DispatchState, action: DispatchAction) -> Option<DispatchState> {
        Some(self.caught_step(state, action))
    }

    fn within_boundary(&self, _state: &DispatchState) -> bool {
        !self.halt.is_raised()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        dispatch_properties()
    }
}

/// The properties, each named by its requirement ID (the `always` ones a function below
/// with its predicate beside it).
pub fn dispatch_properties() -> Vec<Property<DispatchModel>> {
    vec![
        ho_l3_live_not_held_up(),
        ho_l3_backoff_then_one_probe(),
        scale_3_cursor_after_ends(),
        scale_3_wrapped_sweep_never_back(),
        ho_l3_live_targets_only(),
        scale_6_within_bounds(),
        Property::always(crate::caught::CORE_INVARIANTS, |_, s: &DispatchState| {
            s.core_panic.is_none()
        }),
        Property::sometimes(
            "HO-L3 witness: a cell backed off, then its probe answered",
            |_, s: &DispatchState| s.last.probe_answered,
        ),
        Property::sometimes(
            "HO-L3 witness: a live host sent while the other cell's send hangs",
            |_, s: &DispatchState| s.last.live_sent_past_hanging,
        ),
        Property::sometimes(
            "HO-L3 witness: a host whose target's lease lapsed is examined",
            |_, s: &DispatchState| s.last.lapsed_examined,
        ),
        Property::sometimes(
            "SCALE-6 witness: two requests in flight at once",
            |_, s: &DispatchState| s.flights.len() >= 2,
        ),
        Property::sometimes(
            "SCALE-6 witness: a page's sends end out of order",
            |_, s: &DispatchState| s.last.out_of_order,
        ),
        Property::sometimes(
            "SCALE-3 witness: a cursor saved after an out-of-order end",
            |_, s: &DispatchState| s.last.saved_after_out_of_order,
        ),
        Property::sometimes(
            "SCALE-3 witness: a cursor saved in the wrapped segment",
            |_, s: &DispatchState| s.last.saved_in_wrap,
        ),
    ]
}

fn ho_l3_live_not_held_up() -> Property<DispatchModel> {
    Property::always(
        "HO-L3 a live cell is never held up by a stuck one",
        |m: &DispatchModel, s: &DispatchState| live_not_held_up(m, s),
    )
}

/// HO-L3: the live cell's eligible hosts are all handed to the dispatcher (the other cell's
/// failures never spend the pass's budget down to holding them), and whenever the director
/// waits (or its pass ended) no live-cell request is queued while the bounds leave it room
/// (the model's count of sends in flight, in total and to the live cell).
fn live_not_held_up(m: &DispatchModel, s: &DispatchState) -> bool {
    if s.last.live_not_handed != 0 {
        return false;
    }
    let waits = s.pass.as_ref().is_none_or(|p| p.phase == Phase::Waiting);
    if !waits {
        return true;
    }
    let flying: Hosts = s
        .flights
        .iter()
        .fold(0, |a, f| a | bit(usize::from(f.slot)));
    let pending: Hosts = s.rec.pages.iter().fold(0, |a, p| a | p.pending);
    let queued_live = pending & !flying & m.live;
    if queued_live == 0 {
        return true;
    }
    let total = s.flights.len();
    let live = s
        .flights
        .iter()
        .filter(|f| m.live & bit(usize::from(f.slot)) != 0)
        .count();
    let limits = s.dispatcher.limits();
    u32::try_from(total).is_ok_and(|t| t >= limits.max_in_flight)
        || u32::try_from(live).is_ok_and(|l| l >= limits.max_in_flight_per_cell)
}

fn ho_l3_backoff_then_one_probe() -> Property<DispatchModel> {
    Property::always(
        "HO-L3 a failed cell gets nothing until its backoff ends, then one probe at a time",
        |_, s: &DispatchState| backoff_respected(s),
    )
}

/// HO-L3: a send to a cell the environment failed (and that has not answered since) goes no
/// sooner than its backoff after the failure (the first: `backoff_min_ms`; after each failed
/// probe, doubled up to `backoff_max_ms`), and no two such probes are in flight at once.
fn backoff_respected(s: &DispatchState) -> bool {
    s.last
        .probe
        .is_none_or(|(early, probes)| !early && probes <= 1)
}

fn scale_3_cursor_after_ends() -> Property<DispatchModel> {
    Property::always(
        "SCALE-3 the cursor passes a page only after its dispatches ended",
        |m: &DispatchModel, s: &DispatchState| cursor_after_ends(m, s),
    )
}

/// SCALE-3 / HO-L3: no host whose request was handed over and has not ended (nor been skipped)
/// lies in the hosts a saved cursor passes (`(start, cursor]`, the least it can stand for).
fn cursor_after_ends(m: &DispatchModel, s: &DispatchState) -> bool {
    s.last
        .save
        .is_none_or(|f| f.pending & m.ring(f.start, f.cursor, false) == 0)
}

fn scale_3_wrapped_sweep_never_back() -> Property<DispatchModel> {
    Property::always(
        "SCALE-3 the wrapped sweep never jumps back to its start",
        |m: &DispatchModel, s: &DispatchState| cursor_never_back(m, s),
    )
}

/// SCALE-3: a saved cursor stands for every host of the pages done before the first one with
/// work pending (the most it can stand for: the whole circle when it is the pass's start):
/// the sweep never goes back over pages it completed.
fn cursor_never_back(m: &DispatchModel, s: &DispatchState) -> bool {
    s.last.save.is_none_or(|f| {
        let covers = m.ring(f.start, f.cursor, f.circle);
        f.finished & !covers == 0
    })
}

fn ho_l3_live_targets_only() -> Property<DispatchModel> {
    Property::always(
        "HO-L3 no request is sent into a target whose lease lapsed",
        |_, s: &DispatchState| live_targets_only(s),
    )
}

/// HO-L3: every host sent in this step was served, in this pass, with its target's lease live.
fn live_targets_only(s: &DispatchState) -> bool {
    s.last.sent & !s.rec.served_live == 0
}

fn scale_6_within_bounds() -> Property<DispatchModel> {
    Property::always(
        "SCALE-6 requests in flight stay within the total and per-cell bounds",
        |m: &DispatchModel, s: &DispatchState| within_bounds(m, s),
    )
}

/// SCALE-6: the model's count of sends in flight, in total and per cell, within the limits.
fn within_bounds(m: &DispatchModel, s: &DispatchState) -> bool {
    let limits = s.dispatcher.limits();
    let total = s.flights.len();
    let live = s
        .flights
        .iter()
        .filter(|f| m.live & bit(usize::from(f.slot)) != 0)
        .count();
    let dark = total - live;
    [total, live, dark]
        .iter()
        .zip([
            limits.max_in_flight,
            limits.max_in_flight_per_cell,
            limits.max_in_flight_per_cell,
        ])
        .all(|(n, max)| u32::try_from(*n).is_ok_and(|n| n <= max))
}
