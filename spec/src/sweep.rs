//! `SweepModel`: the director's real keyset [`SelectionPass`], its real [`DispatchBudget`] and
//! (inside the pass) the real [`evaluate`](switchyard_core::handoff::evaluate), over a
//! small host list that changes under them (SCALE-3, HO-S2).
//!
//! The model plays the director's glue as the adapter runs it: a pass begins at the
//! director's cursor with a new failure budget; it reads `poll_query()`, hands the rows to
//! `handle_page`, dispatches each decision in order as `DispatchBudget::dispatch` says (send the
//! request; an ineligible host, or any once the failure budget is spent, is not sent: the
//! decision is the core's, as in the adapter), records each answer in the budget
//! (`DispatchBudget::handle_outcome`: a `Busy` is a deferral, only a transport failure spends it),
//! then saves `cursor()`; the
//! pass ends when `poll_query()` is `None`, when a page read fails (`handle_page_failed`) or when a
//! cursor save fails (a store error ends the adapter's pass); between passes the director
//! keeps its cursor in memory, and a restart loses the pass and reloads the last cursor
//! saved (which also stands for an adapter that reloads the cursor at every pass).
//!
//! The environment, as wide as the director's real inputs:
//! - the store answers every page query from its own list (`after < host <= through`, host
//!   order, `LIMIT`: [`SweepModel::serve`]), or the read fails; a cursor save succeeds or
//!   fails;
//! - hosts are enrolled (at ids between the others, or past the end of the list) and removed
//!   between pages; an eligible host's cell turns busy or idle;
//! - the cell answers a request `Busy` (a busy host), with its result (an idle host; an
//!   explicit abort, so the host stays where it is, eligible), or the request fails in
//!   transport;
//! - the director restarts at any point, and begins a new pass whenever it has none.
//!
//! The properties judge from the spec's own record ([`SweepRecord`]: the hosts the store
//! served in this pass and in this sweep, the hosts present when the sweep began, the cursor it
//! saw saved, the start of the page that failed, the answers it gave) and the last step's
//! facts ([`SweepFacts`]), never from the pass's own account of them: a sweep ends when the
//! store served a short page with no upper bound (the end of the list) and every row of it
//! was decided; "examined" is served and decided. A restart takes the sweep's record back to
//! what it was when the reloaded cursor was saved (the director will read those pages
//! again). Property names start with the requirement ID; the `sometimes` ones are
//! `<ID> witness: ...`.
//!
//! How these pages relate to the real ones (page size 1,000 over 1,000,000 hosts): the pass
//! never counts hosts. A query is two keys and a limit, and what the pass does with a page
//! depends only on the rows' keys and order, on whether the page came back short, and on its
//! dispatch and page counts; `N` only decides how many pages a sweep takes. Every case that
//! arithmetic has at any `N` is here: a full page; the short page that ends the list; an
//! empty one (the last host examined was the last in the list); the wrapped segment from the
//! start through the pass's own starting cursor, full or short; a page cut by the dispatch
//! budget; a cursor whose host was removed (a key that is no longer a row); a host enrolled
//! ahead of the cursor, behind it, or past the end. With page size 2, two pages per pass and
//! four or five hosts, a sweep is three page reads and spans passes, as 1,000 pages do over a
//! million hosts. The contract pins one choice: once a pass has read past the end of the list,
//! its cursor is the start of the list (`None`); a cursor left at the last host would make the
//! next pass read the end again and count a sweep that examined nothing, which the sweep
//! properties report.
//!
//! Abstractions (each keeps the space finite without changing what the pass sees):
//! - one initial host list (busy, ineligible, idle, busy); flips make the other mixes;
//! - at most `max_faults` faults (failed reads, failed saves, restarts, transport failures) and
//!   `max_changes` list changes per run, each kind within its own budget ([`SweepParams`]);
//!   passes repeat without bound (every counter in the state is bounded, so the graph has
//!   cycles, not depth);
//! - the list changes only between pages, not while a page's requests or its cursor save are
//!   pending: the director reads nothing in between, and the cell answers as the host is when
//!   it answers, so a change there is the same as one just after;
//! - a removed id is never enrolled again (ids are keys: a new host at an old id is an
//!   enrolment at that position), so "present throughout the sweep" is "present when it
//!   began and now";
//! - the clock does not move: no measurement goes stale and no cooldown ends (HO-3's
//!   arithmetic, `core/tests/ho_when.rs::ho_3_*`); one refusal
//!   (`NoMeasurement`) stands for every `Ineligible` reason, as the pass treats them alike.
//!
//! What the model leaves out, and why:
//! - SCALE-3's cost clause (a page costs the same at any position: no `OFFSET`, no per-row
//!   subquery): a property of the SQL store's page query and its plan, not of the pass; it is
//!   checked where that query is (the adapters' store);
//! - the handoff behind a request (the cell's machine, the store's transaction: the handoff
//!   model), and the answers `InProgress` (classified as `Busy` is), `Superseded` and
//!   `Refused` (skipped: neither spends the budget nor defers, as a result does), whose
//!   classification `DispatchBudget::handle_outcome` makes alike for the pass
//!   (`core/tests/ho_request_and_barrier.rs`); the adapter's re-sends of a lost answer with the
//!   same op id are inside one `TransportFailed`;
//! - the adapter's other work in a pass (expiring migrations, looking up a cell's URL: a
//!   missing URL is a transport failure) and several directors (each has its own cursor row).
//!
//! Every step runs under `crate::caught`: a core invariant that fires (the pass's own, on in
//! the checker's build) is that step's counterexample.

use std::collections::BTreeSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use switchyard_core::handoff::store::{AbortReason, TxnOutcome};
use switchyard_core::handoff::QuiescenceCounters;
use switchyard_core::handoff::{
    CandidateRow, CandidateView, Decision, DirectorPolicy, Dispatch, DispatchBudget, DispatchClass,
    DispatchOutcome, PageCursor, PageQuery, ScanLimits, SelectionPass, TargetView,
};
use switchyard_core::handoff::{CellId, Epoch, Generation, HostId, Incarnation, SourceAuthority};
use switchyard_core::handoff::{HandoffReply, HandoffResult};
use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
use switchyard_core::MonoMs;

use crate::halt::Halt;

/// The hosts' cell and the measured target.
pub const SWEEP_SRC: CellId = CellId(1);
pub const SWEEP_TGT: CellId = CellId(2);
/// The model's clock never moves: every measurement stays fresh, no cooldown runs out.
pub const SWEEP_NOW: MonoMs = MonoMs(1_000);
/// Host ids (the initial hosts and the ids an enrolment may take) are slots of one byte-wide
/// bit set.
pub const MAX_SWEEP_SLOTS: usize = 8;

/// What a host is to the director and to its cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKind {
    /// Eligible (`evaluate` builds a request) and idle: its cell starts the handoff.
    Idle,
    /// Eligible, but its cell answers `Busy` (client work): the director cannot tell it from an
    /// idle host before it asks (HO-S2).
    Busy,
    /// `evaluate` refuses it (no measurement): examined, never dispatched.
    Ineligible,
}

/// A one-line bug in the director's glue around the core (the adapter's part, played by the
/// model), for the tests that show the checker reports it. The core is never changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeededBug {
    /// After a failed page the next pass starts at the failed pass's own starting cursor, not
    /// at `cursor()` (the pages the failed pass completed are read again).
    ResumeFromPassStart,
    /// A `Busy` answer is recorded in the budget as a transport failure.
    BusySpendsBudget,
    /// Once a request of the pass was answered `Busy`, the cursor saved (and kept for the
    /// next pass) is the one the pass began at: the rotation does not move past busy hosts.
    BusyHoldsTheCursor,
}

/// The model's size knobs: the host list, the director's limits, and how many times each
/// environment event may happen in one run. Passes themselves are not bounded: the state
/// space is finite because every counter in the state is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepParams {
    /// The hosts at the start: distinct ids, ascending, with what each is.
    pub hosts: Vec<(u64, HostKind)>,
    /// Ids an enrolment may insert (each at most once; an enrolled host is idle-eligible).
    pub spare: Vec<u64>,
    /// `ScanLimits` of every pass.
    pub page_size: u32,
    pub max_pages: u32,
    pub max_dispatch: u32,
    /// `DispatchBudget::new(max_failures)` of every pass.
    pub max_failures: u32,
    /// Environment events per run.
    pub enrolments: u8,
    pub removals: u8,
    /// Busy/idle flips of eligible hosts.
    pub flips: u8,
    pub page_failures: u8,
    pub save_failures: u8,
    pub restarts: u8,
    pub transport_failures: u8,
    /// At most this many faults (failed page reads, failed cursor saves, restarts, transport
    /// failures) in one run, and this many list changes (enrolments, removals, flips): every
    /// combination of that many kinds, in every order and at every point they can matter.
    pub max_faults: u8,
    pub max_changes: u8,
    /// A seeded bug in the director's glue (`None`: the director as the adapter runs it).
    pub bug: Option<SeededBug>,
}

impl Default for SweepParams {
    /// The review bound: four hosts (busy, ineligible, idle, busy) with gaps between their ids,
    /// enrolment of one more either inside the list (25) or past its end (45), page size 2
    /// (a sweep is three page reads: two full pages and the short one that ends it), two pages
    /// and one dispatch per pass, one failure per pass; one of each fault, two flips.
    fn default() -> Self {
        SweepParams {
            hosts: vec![
                (10, HostKind::Busy),
                (20, HostKind::Ineligible),
                (30, HostKind::Idle),
                (40, HostKind::Busy),
            ],
            spare: vec![25, 45],
            page_size: 2,
            max_pages: 2,
            max_dispatch: 1,
            max_failures: 1,
            enrolments: 1,
            removals: 1,
            flips: 2,
            page_failures: 1,
            save_failures: 1,
            restarts: 1,
            transport_failures: 1,
            max_faults: 2,
            max_changes: 2,
            bug: None,
        }
    }
}

impl SweepParams {
    /// Every id the model knows, ascending: slot `i` of every bit set is `universe()[i]`.
    pub fn universe(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.hosts.iter().map(|(id, _)| *id).collect();
        ids.extend(&self.spare);
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    pub fn limits(&self) -> ScanLimits {
        ScanLimits {
            page_size: self.page_size,
            max_pages: self.max_pages,
            max_dispatch: self.max_dispatch,
        }
    }

    /// The most eligible hosts ever present at once (the initial ones and every enrolment;
    /// flips do not change eligibility), and the ineligible ones.
    pub fn max_eligible_and_ineligible(&self) -> (u32, u32) {
        let ineligible = self
            .hosts
            .iter()
            .filter(|(_, kind)| *kind == HostKind::Ineligible)
            .count();
        let enrolled = usize::from(self.enrolments.min(self.max_changes)).min(self.spare.len());
        let eligible = self.hosts.len() - ineligible + enrolled;
        (
            u32::try_from(eligible).unwrap_or(u32::MAX),
            u32::try_from(ineligible).unwrap_or(u32::MAX),
        )
    }

    /// HO-S2: how many passes may begin, counted from the first one after an idle eligible
    /// host became so, until a request is sent to it, whatever the busy hosts answer.
    ///
    /// A pass reads in ring order from the cursor (wrapping at the end of the list); call
    /// "ahead" the hosts between the cursor and the waiting host H: at most `E - 1` eligible
    /// and `I` ineligible ones (`E`, `I`: [`Self::max_eligible_and_ineligible`]; each
    /// enrolment is in `E`). A pass without a fault, before it reaches H, either sends a
    /// request (the dispatch budget is at least one) to an eligible host ahead, which is
    /// then behind the cursor, or sends none and reads all its `max_pages` pages, examining
    /// at least `r = page_size * (max_pages - 1)` ineligible hosts ahead (only the page at the
    /// end of the list can come back short, and the page after it reads from the start; a
    /// wrapped segment that comes back short has gone round to H). With `max_pages == 1`, `r`
    /// is `page_size` and one pass per round may read only the empty page at the end (+1).
    /// When a pass examines H, `evaluate` builds its request and it is sent: the dispatch
    /// budget is not spent at a page's start and a pass's fresh failure budget is not
    /// exhausted before its first send (with `max_dispatch == 1` that is every send). So
    /// the round is `E - 1 + ceil(I / r) + 1` passes.
    ///
    /// Faults, at most `F = min(max_faults, page_failures + save_failures + restarts)`: a
    /// failed page read or cursor save ends its pass early (one pass each); a restart loses
    /// its pass (one), and the page in flight, redone by the next pass, is the work the lost
    /// pass would have done; but after a failed save the store's cursor lags by that page
    /// too, which a restart re-reads: one pass more per (failed save, restart) pair, `p =
    /// min(save_failures, restarts, F / 2)`. With `max_dispatch > 1` a transport failure can
    /// exhaust the failure budget and H, examined after it in that pass, is passed over
    /// without a request: another round per transport failure.
    pub fn starvation_bound(&self) -> u32 {
        let (eligible, ineligible) = self.max_eligible_and_ineligible();
        let rows = self
            .page_size
            .saturating_mul(self.max_pages.max(2) - 1)
            .max(1);
        let round = eligible.saturating_sub(1) + ineligible.div_ceil(rows) + 1;
        let faults = u32::from(self.max_faults).min(
            u32::from(self.page_failures)
                + u32::from(self.save_failures)
                + u32::from(self.restarts),
        );
        let pairs = u32::from(self.save_failures)
            .min(u32::from(self.restarts))
            .min(faults / 2);
        let mut bound = round + u32::from(self.max_pages == 1) + faults + pairs;
        if self.max_dispatch > 1 {
            let skips = u32::from(self.transport_failures.min(self.max_faults));
            bound += skips * (round + u32::from(self.max_pages == 1));
        }
        bound
    }
}

/// A bit set over the universe's slots.
pub type Hosts = u8;

/// The ids of the slots, ascending: the same in every state of a model, so it is neither
/// hashed nor compared by content twice (a state's fingerprint is its own record). Each
/// distinct list is kept for the life of the process (leaked once), so states carry a
/// reference and project themselves.
#[derive(Debug, Clone, Copy)]
pub struct Universe(&'static [u64]);

impl Universe {
    fn new(ids: Vec<u64>) -> Universe {
        static LISTS: OnceLock<Mutex<BTreeSet<&'static [u64]>>> = OnceLock::new();
        let mut lists = LISTS
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(known) = lists.get(ids.as_slice()) {
            return Universe(known);
        }
        let leaked: &'static [u64] = Box::leak(ids.into_boxed_slice());
        lists.insert(leaked);
        Universe(leaked)
    }

    pub fn ids(self) -> &'static [u64] {
        self.0
    }

    fn slot(self, id: u64) -> Option<usize> {
        self.0.iter().position(|h| *h == id)
    }

    fn of(self, hosts: Hosts) -> Vec<u64> {
        (0..self.0.len())
            .filter(|s| hosts & bit(*s) != 0)
            .map(|s| self.0[s])
            .collect()
    }
}

impl PartialEq for Universe {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Universe {}

impl Hash for Universe {
    /// Every state of a model has the same universe: nothing to tell states apart by.
    fn hash<H: Hasher>(&self, _state: &mut H) {}
}

fn bit(slot: usize) -> Hosts {
    1 << slot
}

/// One pass of the director: the core's pass and budget, and the glue's own state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pass {
    /// The real selection pass.
    pub sel: SelectionPass,
    /// The real failure budget (a new one per pass, as the adapter does).
    pub budget: DispatchBudget,
    /// The last page's decisions still to dispatch, in order (slot, decision): once
    /// `send_next` has run, the first is a request in flight.
    pub outbox: Vec<(u8, Decision)>,
    /// The last page was taken and its cursor is not saved yet.
    pub unsaved: bool,
    /// The cursor the pass began at, and whether a request was answered `Busy`: kept only
    /// for a [`SeededBug`] that reads them.
    pub began_at: Option<u64>,
    pub busy_seen: bool,
}

/// The event budget left in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SweepBudgets {
    pub enrolments: u8,
    pub removals: u8,
    pub flips: u8,
    pub page_failures: u8,
    pub save_failures: u8,
    pub restarts: u8,
    pub transport_failures: u8,
    pub faults: u8,
    pub changes: u8,
}

/// The spec's own record: what the environment served, saw saved and answered. The
/// properties judge from it (and from the core's state only what they judge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SweepRecord {
    /// Hosts served in pages of the current pass.
    pub pass_served: Hosts,
    /// A page of this pass has been read (served or failed).
    pub pass_read: bool,
    /// This pass read past the end of the list (a short page with no upper bound).
    pub pass_passed_end: bool,
    /// Transport failures the environment answered in this pass.
    pub pass_transport_failures: u8,
    /// The current sweep (from the start of the list to its end): the hosts served and
    /// decided in it, and the hosts present when it began.
    pub sweep_examined: Hosts,
    pub sweep_start: Hosts,
    /// The same two when the last cursor was saved: a restart goes back to that cursor, so
    /// the sweep goes back to what had been examined then.
    pub saved_examined: Hosts,
    pub saved_start: Hosts,
    /// Where the next pass's first page must start (`after`): after a failed page, that
    /// page's own start; after a failed cursor save, the cursor it carried; after a restart
    /// or a pass that ended normally, the last cursor saved.
    pub expected_start: Option<u64>,
    /// HO-S2: passes begun since each idle eligible host became so (or was last dispatched);
    /// `None`: not waiting.
    pub waiting: [Option<u8>; MAX_SWEEP_SLOTS],
    /// Witness trackers: a page failed in this sweep; a host enrolled mid-sweep (slot, sweep
    /// ends since); pages read since the last busy answer; a restart went back behind a
    /// failed save.
    pub failed_in_sweep: bool,
    pub enrolled: Option<(u8, u8)>,
    pub pages_since_busy: Option<u8>,
    pub restarted_behind: bool,
    /// The last cursor save failed (the store's cursor lags the director's).
    pub save_failed: bool,
}

/// What the last step did, for the properties that judge a transition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SweepFacts {
    /// The first page of a pass: (where it had to start, where it started).
    pub first_page: Option<(Option<u64>, Option<u64>)>,
    /// A page served: (hosts served in this pass before it, its rows).
    pub page: Option<(Hosts, Hosts)>,
    /// The list's end was read (a short page with no upper bound, every row decided):
    /// (hosts present when the sweep began, hosts served and decided in it).
    pub sweep_end: Option<(Hosts, Hosts)>,
    /// A page served: (how much the pass's `sweeps_completed()` grew, whether the
    /// environment served the list's end).
    pub sweeps_counted: Option<(u32, bool)>,
    /// A busy answer's class.
    pub busy_class: Option<DispatchClass>,
    // Witness events.
    pub completed_after_failure: bool,
    pub wrapped_in_pass: bool,
    pub enrolled_examined: bool,
    pub idle_after_busy_across_pages: bool,
    pub resumed_behind_failed_save: bool,
}

/// The model's state: the store (host list, saved cursor), the director (its pass or its
/// cursor between passes), the event budget, the spec's record and the last step's facts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SweepState {
    /// The ids of the slots.
    pub universe: Universe,
    /// The store's host list (bit `i`: slot `i` is present).
    pub present: Hosts,
    /// Eligible hosts whose cell answers busy.
    pub busy: Hosts,
    /// Slots enrolled or removed once: never enrolled again.
    pub used: Hosts,
    /// The store's cursor row.
    pub saved: Option<u64>,
    /// The director's cursor between passes (its pass's `cursor()` when the pass ended).
    pub cursor: Option<u64>,
    pub pass: Option<Pass>,
    pub left: SweepBudgets,
    pub rec: SweepRecord,
    pub last: SweepFacts,
    /// A core invariant (or another panic) fired in the step that led here: its message
    /// (`crate::caught`). Nothing is explored from such a state.
    pub core_panic: Option<String>,
}

impl SweepState {
    /// The director's position: its pass's cursor, or its cursor between passes.
    pub fn position(&self) -> Option<u64> {
        self.pass
            .as_ref()
            .map_or(self.cursor, |p| key(p.sel.cursor()))
    }

    pub fn project(&self) -> SweepProjection {
        let state = self;
        let u = self.universe;
        let pass = state.pass.as_ref();
        SweepProjection {
            hosts: u.of(state.present),
            busy: u.of(state.busy & state.present),
            saved_cursor: state.saved,
            director_cursor: state.position(),
            in_pass: pass.is_some(),
            next_query: pass
                .and_then(|p| p.sel.poll_query())
                .map(|q| (q.after.map(|h| h.0), q.through.map(|h| h.0), q.limit)),
            sweeps_completed: pass.map_or(0, |p| p.sel.sweeps_completed()),
            dispatched: pass.map_or(0, |p| p.sel.dispatched()),
            failures_left: pass.map(|p| p.budget.failures_left()),
            in_flight: pass
                .and_then(|p| p.outbox.first())
                .map(|(slot, _)| u.ids()[usize::from(*slot)]),
            sweep_examined: u.of(state.rec.sweep_examined),
            waiting: (0..u.ids().len())
                .filter_map(|s| state.rec.waiting[s].map(|n| (u.ids()[s], n)))
                .collect(),
        }
    }

    /// A one-line summary for counterexamples.
    pub fn summary(&self) -> String {
        let p = self.project();
        format!(
            "hosts={:?} busy={:?} saved={:?} director={:?} next={:?} in_flight={:?} sweep_examined={:?} waiting={:?}",
            p.hosts,
            p.busy,
            p.saved_cursor,
            p.director_cursor,
            p.next_query,
            p.in_flight,
            p.sweep_examined,
            p.waiting
        )
    }
}

/// How a page read ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageRead {
    /// The store answers the query from its host list.
    Served,
    /// The read fails: `handle_page_failed`, the pass ends.
    Fails,
}

/// The cell's answer to a dispatched request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// A busy host's cell: `Busy` (a deferral).
    Busy,
    /// An idle host's cell: the durable result (an explicit abort: the host stays, eligible).
    Result,
    /// The request or its answer is lost.
    TransportFailed,
}

/// The environment's moves and the director's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum SweepAction {
    /// The director begins a pass at its cursor (`SelectionPass::begin`), with a new
    /// `DispatchBudget`.
    NewPass,
    /// The director reads `poll_query()`; served: `handle_page` and a request per eligible
    /// decision (unless the failure budget is exhausted).
    ReadPage { read: PageRead },
    /// The cell answers the request in flight (`DispatchBudget::handle_outcome`).
    Answers { answer: Answer },
    /// The director saves `cursor()` after the page's requests; a failed save ends the pass
    /// (the adapter's store error), the director keeps its cursor in memory.
    SaveCursor { fails: bool },
    /// The director restarts: it loses its pass and reloads the last cursor saved.
    Restart,
    /// A host is enrolled (inserted into the list, idle-eligible).
    Enrol { host: u64 },
    /// A host is removed from the list.
    Remove { host: u64 },
    /// An eligible host's cell turns busy, or idle.
    Flip { host: u64 },
}

impl fmt::Display for SweepAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SweepAction::NewPass => write!(f, "the director begins a pass"),
            SweepAction::ReadPage {
                read: PageRead::Served,
            } => write!(f, "the next page is read"),
            SweepAction::ReadPage {
                read: PageRead::Fails,
            } => write!(f, "the next page read fails"),
            SweepAction::Answers { answer } => match answer {
                Answer::Busy => write!(f, "the cell answers busy"),
                Answer::Result => write!(f, "the cell answers with the result"),
                Answer::TransportFailed => write!(f, "the request fails in transport"),
            },
            SweepAction::SaveCursor { fails: false } => write!(f, "the cursor is saved"),
            SweepAction::SaveCursor { fails: true } => write!(f, "the cursor save fails"),
            SweepAction::Restart => write!(f, "the director restarts"),
            SweepAction::Enrol { host } => write!(f, "host {host} is enrolled"),
            SweepAction::Remove { host } => write!(f, "host {host} is removed"),
            SweepAction::Flip { host } => write!(f, "host {host} flips busy/idle"),
        }
    }
}

/// What a trace records after each step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepProjection {
    pub hosts: Vec<u64>,
    pub busy: Vec<u64>,
    pub saved_cursor: Option<u64>,
    /// The director's position: its pass's `cursor()`, or its cursor between passes.
    pub director_cursor: Option<u64>,
    pub in_pass: bool,
    /// The pass's `poll_query()`: (after, through, limit).
    pub next_query: Option<(Option<u64>, Option<u64>, u32)>,
    pub sweeps_completed: u32,
    pub dispatched: u32,
    pub failures_left: Option<u32>,
    /// The host whose request is in flight.
    pub in_flight: Option<u64>,
    pub sweep_examined: Vec<u64>,
    /// Idle eligible hosts and the passes each has waited.
    pub waiting: Vec<(u64, u8)>,
}

#[derive(Debug, Clone)]
pub struct SweepModel {
    pub params: SweepParams,
    /// Raised by the checker when its memory budget is reached.
    pub halt: Halt,
    universe: Universe,
    /// Slots that are eligible (not `Ineligible`).
    eligible: Hosts,
    bound: u32,
}

fn cursor_of(after: Option<u64>) -> PageCursor {
    PageCursor {
        after: after.map(HostId),
    }
}

fn key(cursor: PageCursor) -> Option<u64> {
    cursor.after.map(|h| h.0)
}

impl SweepModel {
    pub fn new(params: SweepParams) -> SweepModel {
        let universe = Universe::new(params.universe());
        assert!(
            universe.ids().len() <= MAX_SWEEP_SLOTS,
            "at most {MAX_SWEEP_SLOTS} host ids"
        );
        assert!(
            params.hosts.len() + params.spare.len() == universe.ids().len(),
            "host and spare ids are distinct"
        );
        assert!(params.max_failures >= 1, "a failure budget of at least one");
        params.limits().validate().expect("valid scan limits");
        let mut eligible = 0;
        for (slot, id) in universe.ids().iter().enumerate() {
            let kind = params.hosts.iter().find(|(h, _)| h == id).map(|(_, k)| *k);
            if kind != Some(HostKind::Ineligible) {
                eligible |= bit(slot);
            }
        }
        let bound = params.starvation_bound();
        assert!(
            bound < u32::from(u8::MAX),
            "starvation bound fits the counters"
        );
        SweepModel {
            params,
            halt: Halt::default(),
            universe,
            eligible,
            bound,
        }
    }

    pub fn universe(&self) -> &'static [u64] {
        self.universe.ids()
    }

    pub fn starvation_bound(&self) -> u32 {
        self.bound
    }

    fn slot(&self, id: u64) -> Option<usize> {
        self.universe.slot(id)
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

    /// The store's row for a host: eligible hosts have a fresh, better measurement for the
    /// target; ineligible ones none.
    fn row(&self, slot: usize) -> CandidateRow {
        let host = HostId(self.universe.ids()[slot]);
        let measurement = (self.eligible & bit(slot) != 0).then_some((
            SWEEP_TGT,
            Measurement {
                measured_at: MonoMs::ZERO,
                current_rtt_ms: 120,
                target_rtt_ms: 60,
            },
        ));
        CandidateRow {
            candidate: CandidateView {
                authority: SourceAuthority {
                    cell: SWEEP_SRC,
                    host,
                    epoch: Epoch(1),
                    incarnation: Incarnation(1),
                    generation: Generation(1),
                },
                source_cell_capable: true,
                desktop_capable: true,
                measurement,
                cooldown_until: None,
            },
            target: Some(TargetView {
                cell: SWEEP_TGT,
                capable: true,
                load: 0,
                capacity: 1_000,
                lease_until: MonoMs::ZERO,
            }),
        }
    }

    /// The store answers a page query from its own list: `after < host <= through`, in host
    /// order, at most `limit` rows.
    pub fn serve(&self, present: Hosts, query: &PageQuery) -> Vec<usize> {
        let after = query.after.map(|h| h.0);
        let through = query.through.map(|h| h.0);
        let ids = self.universe.ids();
        (0..ids.len())
            .filter(|s| present & bit(*s) != 0)
            .filter(|s| after.is_none_or(|a| ids[*s] > a))
            .filter(|s| through.is_none_or(|t| ids[*s] <= t))
            .take(usize::try_from(query.limit).unwrap_or(usize::MAX))
            .collect()
    }

    pub fn init_state(&self) -> SweepState {
        let mut present = 0;
        let mut busy = 0;
        let mut waiting = [None; MAX_SWEEP_SLOTS];
        for (id, kind) in &self.params.hosts {
            let slot = self.slot(*id).expect("a known id");
            present |= bit(slot);
            match kind {
                HostKind::Busy => busy |= bit(slot),
                HostKind::Idle => waiting[slot] = Some(0),
                HostKind::Ineligible => {}
            }
        }
        let p = &self.params;
        SweepState {
            universe: self.universe,
            present,
            busy,
            used: 0,
            saved: None,
            cursor: None,
            pass: None,
            left: SweepBudgets {
                enrolments: p.enrolments,
                removals: p.removals,
                flips: p.flips,
                page_failures: p.page_failures,
                save_failures: p.save_failures,
                restarts: p.restarts,
                transport_failures: p.transport_failures,
                faults: p.max_faults,
                changes: p.max_changes,
            },
            rec: SweepRecord {
                pass_served: 0,
                pass_read: false,
                pass_passed_end: false,
                pass_transport_failures: 0,
                sweep_examined: 0,
                sweep_start: present,
                saved_examined: 0,
                saved_start: present,
                expected_start: None,
                waiting,
                failed_in_sweep: false,
                enrolled: None,
                pages_since_busy: None,
                restarted_behind: false,
                save_failed: false,
            },
            last: SweepFacts::default(),
            core_panic: None,
        }
    }

    /// Every `always` property holds at `state` (exploration stops where one does not: the
    /// state is a counterexample already).
    fn judged_right(&self, state: &SweepState) -> bool {
        state.core_panic.is_none()
            && resumed_at_own_start(state)
            && sweep_covered(state)
            && no_host_twice(state)
            && sweeps_counted(state)
            && busy_spends_nothing(self, state)
            && no_starvation(self, state)
    }

    /// [`Self::step`] under [`crate::caught::caught`]: a core invariant that fires in the step
    /// leads to the state before it with the message recorded, which the property
    /// [`crate::caught::CORE_INVARIANTS`] reports.
    pub fn caught_step(&self, state: &SweepState, action: SweepAction) -> SweepState {
        crate::caught::caught(|| self.step(state, action)).unwrap_or_else(|message| {
            let mut next = state.clone();
            next.last = SweepFacts::default();
            next.core_panic = Some(message);
            next
        })
    }

    /// One step: the director's or the environment's.
    pub fn step(&self, state: &SweepState, action: SweepAction) -> SweepState {
        let mut s = state.clone();
        s.last = SweepFacts::default();
        match action {
            SweepAction::NewPass => self.new_pass(&mut s),
            SweepAction::ReadPage { read } => self.read_page(&mut s, read),
            SweepAction::Answers { answer } => self.answer(&mut s, answer),
            SweepAction::SaveCursor { fails } => self.save_cursor(&mut s, fails),
            SweepAction::Restart => self.restart(&mut s),
            SweepAction::Enrol { host } => self.enrol(&mut s, host),
            SweepAction::Remove { host } => self.remove(&mut s, host),
            SweepAction::Flip { host } => self.flip(&mut s, host),
        }
        s
    }

    fn new_pass(&self, s: &mut SweepState) {
        let sel = SelectionPass::begin(cursor_of(s.cursor), self.params.limits())
            .expect("valid scan limits");
        let began_at = self.params.bug.and(s.cursor);
        s.pass = Some(Pass {
            sel,
            budget: DispatchBudget::new(self.params.max_failures),
            outbox: Vec::new(),
            unsaved: false,
            began_at,
            busy_seen: false,
        });
        let cap = u8::try_from(self.bound + 1).unwrap_or(u8::MAX);
        for n in s.rec.waiting.iter_mut().flatten() {
            *n = n.saturating_add(1).min(cap);
        }
    }

    /// The pass ends; the director keeps `cursor` for its next pass.
    fn end_pass(s: &mut SweepState, cursor: Option<u64>) {
        s.pass = None;
        s.cursor = cursor;
        s.rec.pass_served = 0;
        s.rec.pass_read = false;
        s.rec.pass_passed_end = false;
        s.rec.pass_transport_failures = 0;
    }

    fn first_read(s: &mut SweepState, query: &PageQuery) {
        if !s.rec.pass_read {
            s.last.first_page = Some((s.rec.expected_start, query.after.map(|h| h.0)));
            if s.rec.restarted_behind {
                s.last.resumed_behind_failed_save = true;
                s.rec.restarted_behind = false;
            }
        }
        s.rec.pass_read = true;
    }

    fn read_page(&self, s: &mut SweepState, read: PageRead) {
        let Some(mut pass) = s.pass.take() else {
            return;
        };
        let Some(query) = pass.sel.poll_query() else {
            s.pass = Some(pass);
            return;
        };
        Self::first_read(s, &query);
        if read == PageRead::Fails {
            s.left.page_failures -= 1;
            s.left.faults -= 1;
            pass.sel.handle_page_failed();
            s.rec.expected_start = query.after.map(|h| h.0);
            s.rec.failed_in_sweep = true;
            let cursor = match self.params.bug {
                Some(SeededBug::ResumeFromPassStart) => pass.began_at,
                _ => key(pass.sel.cursor()),
            };
            Self::end_pass(s, cursor);
            return;
        }
        let slots = self.serve(s.present, &query);
        let rows: Vec<CandidateRow> = slots.iter().map(|slot| self.row(*slot)).collect();
        let mut served: Hosts = 0;
        for slot in &slots {
            served |= bit(*slot);
        }
        let before = pass.sel.sweeps_completed();
        let decisions = pass
            .sel
            .handle_page(SWEEP_NOW, &Self::director_policy(), &rows);
        let counted = pass.sel.sweeps_completed().saturating_sub(before);
        // Served and decided: the rows the pass returned a decision for.
        let mut examined: Hosts = 0;
        for d in &decisions {
            if let Some(slot) = self.slot(d.host.0).filter(|slot| served & bit(*slot) != 0) {
                examined |= bit(slot);
            }
        }
        s.last.page = Some((s.rec.pass_served, served));
        s.rec.pass_served |= served;
        s.rec.sweep_examined |= examined;
        if s.rec.pass_passed_end {
            s.last.wrapped_in_pass = true;
        }
        if let Some((slot, ends)) = s.rec.enrolled {
            if examined & bit(usize::from(slot)) != 0 {
                s.last.enrolled_examined = ends <= 1;
                s.rec.enrolled = None;
            }
        }
        if let Some(n) = s.rec.pages_since_busy {
            s.rec.pages_since_busy = Some(n.saturating_add(1).min(2));
        }
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let end = query.through.is_none() && slots.len() < limit && examined == served;
        s.last.sweeps_counted = Some((counted, end));
        if end {
            s.last.sweep_end = Some((s.rec.sweep_start, s.rec.sweep_examined));
            s.last.completed_after_failure = s.rec.failed_in_sweep;
            s.rec.sweep_examined = 0;
            s.rec.sweep_start = s.present;
            s.rec.failed_in_sweep = false;
            s.rec.pass_passed_end = true;
            s.rec.enrolled = match s.rec.enrolled {
                Some((slot, 0)) => Some((slot, 1)),
                _ => None,
            };
        }
        pass.outbox = decisions
            .iter()
            .filter_map(|d| Some((u8::try_from(self.slot(d.host.0)?).ok()?, *d)))
            .collect();
        pass.unsaved = true;
        self.send_next(s, &mut pass);
        s.pass = Some(pass);
    }

    /// The glue dispatches the page's decisions in order as the core's
    /// `DispatchBudget::dispatch` says: an ineligible host or one held (the failure budget is
    /// spent) is dropped, as the adapter does; the first request to send stays in flight.
    fn send_next(&self, s: &mut SweepState, pass: &mut Pass) {
        while let Some(&(slot, decision)) = pass.outbox.first() {
            if !matches!(pass.budget.dispatch(&decision), Dispatch::Send(_)) {
                pass.outbox.remove(0);
                continue;
            }
            // Sent: an idle host's wait ends here.
            let slot = usize::from(slot);
            if s.rec.waiting[slot].is_some() {
                if s.rec.pages_since_busy.is_some_and(|n| n >= 1) {
                    s.last.idle_after_busy_across_pages = true;
                    s.rec.pages_since_busy = None;
                }
                s.rec.waiting[slot] = None;
            }
            return;
        }
    }

    fn answer(&self, s: &mut SweepState, answer: Answer) {
        let Some(mut pass) = s.pass.take() else {
            return;
        };
        if pass.outbox.is_empty() {
            s.pass = Some(pass);
            return;
        }
        let (_, decision) = pass.outbox.remove(0);
        let Ok(HandoffRequest { op_id, .. }) = decision.verdict else {
            // `send_next` leaves only a request to send first.
            s.pass = Some(pass);
            return;
        };
        let outcome = match answer {
            Answer::Busy => DispatchOutcome::Answered(HandoffReply::Busy {
                op_id,
                counters: QuiescenceCounters {
                    client_conns: 1,
                    ..QuiescenceCounters::default()
                },
            }),
            Answer::Result => DispatchOutcome::Answered(HandoffReply::Result(HandoffResult {
                op_id,
                outcome: TxnOutcome::RolledBack {
                    reason: AbortReason::ConcurrencyLimited,
                },
            })),
            Answer::TransportFailed => DispatchOutcome::TransportFailed,
        };
        let recorded = match (answer, self.params.bug) {
            (Answer::Busy, Some(SeededBug::BusySpendsBudget)) => DispatchOutcome::TransportFailed,
            _ => outcome,
        };
        let class = pass.budget.handle_outcome(&recorded);
        match answer {
            Answer::Busy => {
                pass.busy_seen = self.params.bug == Some(SeededBug::BusyHoldsTheCursor);
                s.last.busy_class = Some(class);
                s.rec.pages_since_busy = Some(0);
            }
            Answer::TransportFailed => {
                s.left.transport_failures -= 1;
                s.left.faults -= 1;
                s.rec.pass_transport_failures += 1;
            }
            Answer::Result => {}
        }
        self.send_next(s, &mut pass);
        s.pass = Some(pass);
    }

    fn save_cursor(&self, s: &mut SweepState, fails: bool) {
        let Some(mut pass) = s.pass.take() else {
            return;
        };
        let cursor = if pass.busy_seen {
            pass.began_at
        } else {
            key(pass.sel.cursor())
        };
        if fails {
            s.left.save_failures -= 1;
            s.left.faults -= 1;
            s.rec.save_failed = true;
            s.rec.expected_start = cursor;
            Self::end_pass(s, cursor);
            return;
        }
        s.saved = cursor;
        s.rec.save_failed = false;
        s.rec.saved_examined = s.rec.sweep_examined;
        s.rec.saved_start = s.rec.sweep_start;
        pass.unsaved = false;
        if pass.sel.poll_query().is_none() {
            s.rec.expected_start = cursor;
            Self::end_pass(s, cursor);
        } else {
            s.pass = Some(pass);
        }
    }

    fn restart(&self, s: &mut SweepState) {
        s.left.restarts -= 1;
        s.left.faults -= 1;
        s.rec.restarted_behind = s.rec.save_failed && s.position() != s.saved;
        s.rec.expected_start = s.saved;
        s.rec.sweep_examined = s.rec.saved_examined;
        s.rec.sweep_start = s.rec.saved_start;
        let saved = s.saved;
        Self::end_pass(s, saved);
    }

    fn enrol(&self, s: &mut SweepState, host: u64) {
        let Some(slot) = self.slot(host) else { return };
        s.left.enrolments -= 1;
        s.left.changes -= 1;
        s.present |= bit(slot);
        s.used |= bit(slot);
        s.rec.waiting[slot] = Some(0);
        if s.rec.sweep_examined != 0 {
            s.rec.enrolled = u8::try_from(slot).ok().map(|slot| (slot, 0));
        }
    }

    fn remove(&self, s: &mut SweepState, host: u64) {
        let Some(slot) = self.slot(host) else { return };
        s.left.removals -= 1;
        s.left.changes -= 1;
        s.present &= !bit(slot);
        s.busy &= !bit(slot);
        s.used |= bit(slot);
        s.rec.waiting[slot] = None;
        if s.rec.enrolled.is_some_and(|(e, _)| usize::from(e) == slot) {
            s.rec.enrolled = None;
        }
    }

    fn flip(&self, s: &mut SweepState, host: u64) {
        let Some(slot) = self.slot(host) else { return };
        s.left.flips -= 1;
        s.left.changes -= 1;
        s.busy ^= bit(slot);
        s.rec.waiting[slot] = (s.busy & bit(slot) == 0).then_some(0);
    }
}

impl Model for SweepModel {
    type State = SweepState;
    type Action = SweepAction;

    fn init_states(&self) -> Vec<SweepState> {
        vec![self.init_state()]
    }

    fn actions(&self, state: &SweepState, actions: &mut Vec<SweepAction>) {
        if self.halt.is_raised() || !self.judged_right(state) {
            return;
        }
        let left = &state.left;
        let fault = left.faults > 0;
        // The list changes between pages: not while a page's requests or its cursor save are
        // pending (the cell answers as the host is when it answers, and the director reads
        // nothing in between, so a change there is the same as one just after).
        let change = left.changes > 0
            && state
                .pass
                .as_ref()
                .is_none_or(|p| p.outbox.is_empty() && !p.unsaved);
        match &state.pass {
            None => actions.push(SweepAction::NewPass),
            Some(pass) => {
                if let Some(&(slot, _)) = pass.outbox.first() {
                    let slot = usize::from(slot);
                    // The cell answers as the host is now (a removed host's cell still answers).
                    actions.push(SweepAction::Answers {
                        answer: if state.busy & bit(slot) != 0 {
                            Answer::Busy
                        } else {
                            Answer::Result
                        },
                    });
                    if fault && left.transport_failures > 0 {
                        actions.push(SweepAction::Answers {
                            answer: Answer::TransportFailed,
                        });
                    }
                } else if pass.unsaved {
                    actions.push(SweepAction::SaveCursor { fails: false });
                    if fault && left.save_failures > 0 {
                        actions.push(SweepAction::SaveCursor { fails: true });
                    }
                } else if pass.sel.poll_query().is_some() {
                    actions.push(SweepAction::ReadPage {
                        read: PageRead::Served,
                    });
                    if fault && left.page_failures > 0 {
                        actions.push(SweepAction::ReadPage {
                            read: PageRead::Fails,
                        });
                    }
                }
            }
        }
        // A restart between passes at the saved cursor changes nothing but its budget.
        if fault && left.restarts > 0 && (state.pass.is_some() || state.cursor != state.saved) {
            actions.push(SweepAction::Restart);
        }
        for (slot, id) in self.universe.ids().iter().enumerate() {
            let here = state.present & bit(slot) != 0;
            if change && here && left.removals > 0 {
                actions.push(SweepAction::Remove { host: *id });
            }
            if change && here && left.flips > 0 && self.eligible & bit(slot) != 0 {
                actions.push(SweepAction::Flip { host: *id });
            }
            let spare = self.params.spare.contains(id);
            if spare && !here && state.used & bit(slot) == 0 && change && left.enrolments > 0 {
                actions.push(SweepAction::Enrol { host: *id });
            }
        }
    }

    fn next_state(&self, state: &SweepState, action: SweepAction) -> Option<SweepState> {
        Some(self.caught_step(state, action))
    }

    fn within_boundary(&self, _state: &SweepState) -> bool {
        // Every counter in the state is bounded (the event budgets, the waiting counters at
        // the starvation bound plus one); passes repeat, so the graph has cycles, not depth.
        !self.halt.is_raised()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        sweep_properties()
    }
}

/// The properties, each named by its requirement ID, in the order the checker reports them:
/// each `always` property is a function below holding its name, with its predicate beside it
/// (a predicate of its own: [`SweepModel`]'s `judged_right` asks them all, to explore nothing
/// past a counterexample). They read the state and the step's facts ([`SweepFacts`], recorded
/// by the steps named at each).
pub fn sweep_properties() -> Vec<Property<SweepModel>> {
    vec![
        scale_3_every_host_examined(),
        scale_3_failed_page_resumes(),
        scale_3_no_host_twice(),
        scale_3_sweep_counted(),
        ho_s2_busy_spends_nothing(),
        ho_s2_no_starvation(),
        Property::always(crate::caught::CORE_INVARIANTS, |_, s: &SweepState| {
            s.core_panic.is_none()
        }),
        Property::sometimes(
            "SCALE-3 witness: a failed page, then the resumed sweep completes",
            |_, s: &SweepState| s.last.completed_after_failure,
        ),
        Property::sometimes(
            "SCALE-3 witness: a pass wraps past the end of the list",
            |_, s: &SweepState| s.last.wrapped_in_pass,
        ),
        Property::sometimes(
            "SCALE-3 witness: a host enrolled mid-sweep is examined in the same or the next sweep",
            |_, s: &SweepState| s.last.enrolled_examined,
        ),
        Property::sometimes(
            "SCALE-3 witness: a restart behind a failed cursor save resumes at the saved cursor",
            |_, s: &SweepState| s.last.resumed_behind_failed_save,
        ),
        Property::sometimes(
            "HO-S2 witness: a busy deferral, then an idle host dispatched from a later page",
            |_, s: &SweepState| s.last.idle_after_busy_across_pages,
        ),
    ]
}

fn scale_3_every_host_examined() -> Property<SweepModel> {
    Property::always(
        "SCALE-3 every host examined once per sweep",
        |_, s: &SweepState| sweep_covered(s),
    )
}

/// SCALE-3: at the end of a sweep, every host present when it began and still present was
/// served and decided in it (`sweep_end`, recorded by `read_page` when it reads the list's end).
fn sweep_covered(s: &SweepState) -> bool {
    s.last
        .sweep_end
        .is_none_or(|(start, examined)| start & s.present & !examined == 0)
}

fn scale_3_failed_page_resumes() -> Property<SweepModel> {
    Property::always(
        "SCALE-3 a failed page resumes at its own start",
        |_, s: &SweepState| resumed_at_own_start(s),
    )
}

/// SCALE-3: the first page of a pass starts where the environment says it must
/// (`first_page`, recorded by `first_read`).
fn resumed_at_own_start(s: &SweepState) -> bool {
    s.last
        .first_page
        .is_none_or(|(expected, actual)| expected == actual)
}

fn scale_3_no_host_twice() -> Property<SweepModel> {
    Property::always("SCALE-3 no host twice in one pass", |_, s: &SweepState| {
        no_host_twice(s)
    })
}

/// SCALE-3: a page serves no host the pass served before it (`page`, recorded by
/// `read_page`).
fn no_host_twice(s: &SweepState) -> bool {
    s.last.page.is_none_or(|(before, rows)| before & rows == 0)
}

fn scale_3_sweep_counted() -> Property<SweepModel> {
    Property::always(
        "SCALE-3 a sweep is counted when the list's end is read",
        |_, s: &SweepState| sweeps_counted(s),
    )
}

/// SCALE-3: a page grows the pass's `sweeps_completed()` by one exactly when the environment
/// served the list's end (`sweeps_counted`, recorded by `read_page`).
fn sweeps_counted(s: &SweepState) -> bool {
    s.last
        .sweeps_counted
        .is_none_or(|(counted, end)| counted == u32::from(end))
}

fn ho_s2_busy_spends_nothing() -> Property<SweepModel> {
    Property::always("HO-S2 busy never spends the budget", |m, s: &SweepState| {
        busy_spends_nothing(m, s)
    })
}

/// HO-S2: the budget has spent exactly the transport failures the environment answered in
/// this pass (busy answers none), and a busy answer is a deferral (`busy_class`, recorded by
/// `answer`).
fn busy_spends_nothing(model: &SweepModel, s: &SweepState) -> bool {
    let spent = s.pass.as_ref().is_none_or(|p| {
        p.budget.failures_left()
            == model
                .params
                .max_failures
                .saturating_sub(u32::from(s.rec.pass_transport_failures))
    });
    spent
        && s.last
            .busy_class
            .is_none_or(|class| class == DispatchClass::Deferred)
}

fn ho_s2_no_starvation() -> Property<SweepModel> {
    Property::always(
        "HO-S2 busy hosts never starve idle ones",
        |m: &SweepModel, s: &SweepState| no_starvation(m, s),
    )
}

/// HO-S2: no idle eligible host has waited more passes than the model's starvation bound
/// (`rec.waiting`, counted by `new_pass`).
fn no_starvation(model: &SweepModel, state: &SweepState) -> bool {
    state
        .rec
        .waiting
        .iter()
        .flatten()
        .all(|n| u32::from(*n) <= model.bound)
}
