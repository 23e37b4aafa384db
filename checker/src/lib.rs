//! The checker behind `switchyard-check`: runs a model, judges every property, renders the
//! report table and counterexamples, and exports traces as JSON.

use std::fmt::{Debug, Display, Write as _};
use std::hash::Hash;
use std::io::{IsTerminal, Write};
use std::path::{Path as FsPath, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use stateright::{Checker, Expectation, HasDiscoveries, Model, Property, UniformChooser};
use switchyard_spec::dispatch::{DispatchModel, DispatchParams, DispatchProjection, DispatchState};
use switchyard_spec::enrol::{EnrolModel, EnrolParams, EnrolProjection, EnrolState};
use switchyard_spec::failover::{
    FailoverModel, FailoverParams, FoAction, FoProjection, FoState, Variant,
};
use switchyard_spec::halt::Halt;
use switchyard_spec::handoff::{HandoffModel, HandoffParams, HoAction, HoProjection, HoState};
use switchyard_spec::lease::{LeaseModel, LeaseParams, LeaseProjection, LeaseState};
use switchyard_spec::store_race::{RaceProjection, RaceState, StoreRaceModel, StoreRaceParams};
use switchyard_spec::sweep::{SweepAction, SweepModel, SweepParams, SweepProjection, SweepState};
use switchyard_spec::trace::{Trace, TraceKind, TraceStep};

pub mod by_index;
pub mod conform;
pub mod explorer;
pub mod first_hit;
pub mod seed;

use first_hit::FirstHits;

/// A model the checker can run: names, parameters and the projection its traces record.
pub trait CheckedModel: Model + Send + Sync + Sized + 'static {
    const NAME: &'static str;
    type Params: Serialize + Clone;
    type Projection: Serialize + Debug;

    fn params(&self) -> Self::Params;
    /// The name of this run in reports and trace file names (a model's scenario, if any).
    fn label(&self) -> String {
        Self::NAME.to_owned()
    }
    fn project(state: &Self::State) -> Self::Projection;
    /// One readable line for a counterexample step.
    fn summary(state: &Self::State) -> String;
    /// A few short lines for the Explorer's state pane: what an operator looks at first.
    fn card(state: &Self::State) -> String;
    /// The name of an initial state of this model (what the Explorer's first step offers).
    fn init_name(&self, state: &Self::State) -> String;
    /// The signal that stops a search in flight (the memory budget raises it).
    fn halt(&self) -> &Halt;
}

impl CheckedModel for FailoverModel {
    const NAME: &'static str = "failover";
    type Params = FailoverParams;
    type Projection = FoProjection;

    fn params(&self) -> FailoverParams {
        self.params.clone()
    }

    fn project(state: &FoState) -> FoProjection {
        state.project()
    }

    fn halt(&self) -> &Halt {
        &self.halt
    }

    fn init_name(&self, state: &FoState) -> String {
        format!("variant {}", variant_name(state.variant))
    }

    fn card(state: &FoState) -> String {
        let p = state.project();
        // Hosts are named a, b, … as the model's actions name them ("host a goes down").
        let hosts: Vec<String> = p
            .host_up
            .iter()
            .zip('a'..='z')
            .map(|(up, name)| format!("{name} {}", if *up { "up" } else { "DOWN" }))
            .collect();
        let list: Vec<&str> = state.sup.candidates().iter().map(|u| u.as_str()).collect();
        let mut card = format!(
            "{} at t={}ms, hosts {}\nlist {}\ncurrent {}",
            variant_name(state.variant),
            p.now_ms,
            hosts.join(", "),
            list.join(" "),
            p.current.as_deref().unwrap_or("-")
        );
        if let Some(open) = state.sup.open_in_flight() {
            let kind = open_kind(open);
            let _ = write!(card, ", opening {}{kind}", open.url());
        }
        let cooling: Vec<String> = p
            .cooldown
            .iter()
            .map(|(url, kind, until)| format!("{url} {} until {until}", kind.as_str()))
            .collect();
        let _ = write!(
            card,
            "\ncooling {}",
            if cooling.is_empty() {
                "-".to_owned()
            } else {
                cooling.join(", ")
            }
        );
        let c = p.counters;
        let _ = write!(
            card,
            "\nswitches {} (exempt {}, probe {}), open failed {}, no-candidate {}, probe opens {}",
            c.switches,
            c.exempt_switches,
            c.probe_switches,
            c.open_failed,
            c.no_candidate_checks,
            c.probe_opens
        );
        card
    }

    fn summary(state: &FoState) -> String {
        let p = state.project();
        let list: Vec<&str> = state.sup.candidates().iter().map(|u| u.as_str()).collect();
        let mut line = format!(
            "t={}ms variant={:?} hosts_up={:?} list={list:?} current={} ",
            p.now_ms,
            state.variant,
            p.host_up,
            p.current.as_deref().unwrap_or("-")
        );
        if let Some(open) = state.sup.open_in_flight() {
            let kind = open_kind(open);
            let _ = write!(line, "opening={}{kind} ", open.url());
        }
        let c = p.counters;
        let _ = write!(
            line,
            "switches={} exempt={} open_failed={} no_candidate={} probe_opens={} probe_switches={} ",
            c.switches,
            c.exempt_switches,
            c.open_failed,
            c.no_candidate_checks,
            c.probe_opens,
            c.probe_switches
        );
        let t = state.tally;
        let _ = write!(
            line,
            "spec_tally=[{} {} {} {} {} {}] stall_ticks={} opens_tick={} opens_instant={} cooldown=[",
            t.switches,
            t.exempt_switches,
            t.open_failed,
            t.no_candidate_checks,
            t.probe_opens,
            t.probe_switches,
            state.stall_ticks,
            state.opens_this_tick,
            state.opens_this_instant
        );
        for (i, (url, kind, until)) in p.cooldown.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(line, "{sep}{url} {} until {until}", kind.as_str());
        }
        line.push(']');
        with_core_panic(line, state.core_panic.as_deref())
    }
}

impl CheckedModel for HandoffModel {
    const NAME: &'static str = "handoff";
    type Params = HandoffParams;
    type Projection = HoProjection;

    fn params(&self) -> HandoffParams {
        self.params.clone()
    }

    fn label(&self) -> String {
        match self.scenario {
            None => Self::NAME.to_owned(),
            Some(s) => format!("{}-{}", Self::NAME, s.name()),
        }
    }

    fn project(state: &HoState) -> HoProjection {
        state.project()
    }

    fn halt(&self) -> &Halt {
        &self.halt
    }

    fn init_name(&self, _state: &HoState) -> String {
        match self.scenario {
            None => "handoff".to_owned(),
            Some(s) => format!("scenario {}", s.name()),
        }
    }

    fn card(state: &HoState) -> String {
        let p = state.project();
        let mut card = format!(
            "t={}ms, host on cell {} (epoch {}, incarnation {}, generation {}), db {}",
            p.now_ms,
            p.assigned_cell,
            p.epoch,
            p.incarnation,
            p.generation,
            if p.db_up { "up" } else { "DOWN" }
        );
        for (label, source) in [("source", &p.source), ("old source", &p.old_source)] {
            if let Some(s) = source {
                let _ = write!(
                    card,
                    "\n{label}: gate {:?}{}{}, phase {}, last outcome {}",
                    s.gate,
                    if s.drained { ", drained" } else { "" },
                    if s.enabled { "" } else { ", disabled" },
                    s.phase.map_or("-".to_owned(), |k| format!("{k:?}")),
                    s.last_outcome.map_or("-".to_owned(), |k| format!("{k:?}")),
                );
            }
        }
        let _ = write!(
            card,
            "\nclients {:?}, splices {}, pending connection {}",
            p.clients, p.splices, p.pending_conn
        );
        let _ = write!(
            card,
            "\ndirector holds a request {}, control op in flight {}",
            p.director_holds_request, p.control_op_in_flight
        );
        let _ = write!(
            card,
            "\nstore: reservations {}, committed {}, fenced {}, db jobs {:?}",
            p.reservations, p.committed_ops, p.fenced_ops, p.db_jobs
        );
        card
    }

    fn summary(state: &HoState) -> String {
        let p = state.project();
        let mut line = format!(
            "t={}ms host on cell {} (epoch {} incarnation {} generation {}) reservations={} committed={} fenced={} db={}",
            p.now_ms,
            p.assigned_cell,
            p.epoch,
            p.incarnation,
            p.generation,
            p.reservations,
            p.committed_ops,
            p.fenced_ops,
            if p.db_up { "up" } else { "DOWN" }
        );
        if let Some(source) = &p.source {
            let _ = write!(line, " source={source:?}");
        }
        if let Some(old) = &p.old_source {
            let _ = write!(line, " old_source={old:?}");
        }
        let _ = write!(
            line,
            " clients={:?} splices={} pending_conn={} control_op={} director_holds={} db_jobs={:?}",
            p.clients,
            p.splices,
            p.pending_conn,
            p.control_op_in_flight,
            p.director_holds_request,
            p.db_jobs
        );
        with_core_panic(line, state.core_panic.as_deref())
    }
}

impl CheckedModel for SweepModel {
    const NAME: &'static str = "sweep";
    type Params = SweepParams;
    type Projection = SweepProjection;

    fn params(&self) -> SweepParams {
        self.params.clone()
    }

    fn project(state: &SweepState) -> SweepProjection {
        state.project()
    }

    fn halt(&self) -> &Halt {
        &self.halt
    }

    fn init_name(&self, _state: &SweepState) -> String {
        "sweep".to_owned()
    }

    fn card(state: &SweepState) -> String {
        let p = state.project();
        let mut card = format!(
            "hosts {:?} (busy {:?}), saved cursor {:?}",
            p.hosts, p.busy, p.saved_cursor
        );
        match p.next_query {
            Some((after, through, limit)) => {
                let _ = write!(
                    card,
                    "\npass at {:?}: next page after {after:?} through {through:?} limit {limit}, sweeps completed {}, dispatched {}",
                    p.director_cursor, p.sweeps_completed, p.dispatched
                );
            }
            None if p.in_pass => {
                let _ = write!(card, "\npass at {:?}: no page left", p.director_cursor);
            }
            None => {
                let _ = write!(card, "\nbetween passes, cursor {:?}", p.director_cursor);
            }
        }
        if let Some(host) = p.in_flight {
            let _ = write!(card, ", request to {host} in flight");
        }
        let _ = write!(
            card,
            "\nthis sweep examined {:?}; idle hosts waiting (passes) {:?}",
            p.sweep_examined, p.waiting
        );
        card
    }

    fn summary(state: &SweepState) -> String {
        with_core_panic(state.summary(), state.core_panic.as_deref())
    }
}

impl CheckedModel for DispatchModel {
    const NAME: &'static str = "dispatch";
    type Params = DispatchParams;
    type Projection = DispatchProjection;

    fn params(&self) -> DispatchParams {
        self.params.clone()
    }

    fn project(state: &DispatchState) -> DispatchProjection {
        state.project()
    }

    fn halt(&self) -> &Halt {
        &self.halt
    }

    fn init_name(&self, state: &DispatchState) -> String {
        let l = state.dispatcher.limits();
        format!(
            "{} in flight, {} per cell, cursor {:?}",
            l.max_in_flight, l.max_in_flight_per_cell, state.saved
        )
    }

    fn card(state: &DispatchState) -> String {
        let p = Self::project(state);
        let mut card = format!(
            "t={}ms, saved cursor {:?}, target lease {}",
            p.now_ms,
            p.saved_cursor,
            if p.target_live { "live" } else { "LAPSED" }
        );
        if p.in_pass {
            let _ = write!(
                card,
                "\npass from {:?} at {:?}, next page {:?}{}",
                p.pass_start,
                p.pass_cursor,
                p.next_query,
                if p.waiting {
                    ", waiting for a send"
                } else {
                    ""
                }
            );
        } else {
            let _ = write!(card, "\nbetween passes");
        }
        let _ = write!(
            card,
            "\nin flight {:?}; pending per page {:?}; backed off {:?}",
            p.in_flight, p.pending, p.backed_off
        );
        card
    }

    fn summary(state: &DispatchState) -> String {
        let p = Self::project(state);
        let line = format!(
            "t={}ms saved={:?} target_live={} in_pass={} start={:?} pass_cursor={:?} next={:?} waiting={} in_flight={:?} pending={:?} backed_off={:?}",
            p.now_ms,
            p.saved_cursor,
            p.target_live,
            p.in_pass,
            p.pass_start,
            p.pass_cursor,
            p.next_query,
            p.waiting,
            p.in_flight,
            p.pending,
            p.backed_off
        );
        with_core_panic(line, state.core_panic.as_deref())
    }
}

impl CheckedModel for EnrolModel {
    const NAME: &'static str = "enrol";
    type Params = EnrolParams;
    type Projection = EnrolProjection;

    fn params(&self) -> EnrolParams {
        self.params.clone()
    }

    fn project(state: &EnrolState) -> EnrolProjection {
        state.project()
    }

    fn halt(&self) -> &Halt {
        &self.halt
    }

    fn init_name(&self, state: &EnrolState) -> String {
        let l = state.layout;
        format!(
            "{} cell(s), enrol {:?}, max_hosts {}",
            if l.two_cells { 2 } else { 1 },
            l.enrol,
            l.max_hosts
        )
    }

    fn card(state: &EnrolState) -> String {
        let p = state.project();
        format!(
            "host row {:?} (cell, epoch, generation), {} rows of at most {}\ndesktops {:?}",
            p.host_row, p.rows, p.layout.max_hosts, p.desktops
        )
    }

    fn summary(state: &EnrolState) -> String {
        state.summary()
    }
}

impl CheckedModel for LeaseModel {
    const NAME: &'static str = "lease";
    type Params = LeaseParams;
    type Projection = LeaseProjection;

    fn params(&self) -> LeaseParams {
        self.params.clone()
    }

    fn project(state: &LeaseState) -> LeaseProjection {
        state.project()
    }

    fn halt(&self) -> &Halt {
        &self.halt
    }

    fn init_name(&self, state: &LeaseState) -> String {
        format!("successor clock {:+} ms", state.offset)
    }

    fn card(state: &LeaseState) -> String {
        let p = state.project();
        format!(
            "lease (inc {}, until {}), serving {} until {:?}\ncut off {}, successor {}",
            p.holder, p.lease_until_ms, p.serving, p.serving_until_ms, p.cut_off, p.successor_holds
        )
    }

    fn summary(state: &LeaseState) -> String {
        state.summary()
    }
}

impl CheckedModel for StoreRaceModel {
    const NAME: &'static str = "store";
    type Params = StoreRaceParams;
    type Projection = RaceProjection;

    fn params(&self) -> StoreRaceParams {
        self.params.clone()
    }

    fn project(state: &RaceState) -> RaceProjection {
        state.project()
    }

    fn halt(&self) -> &Halt {
        &self.halt
    }

    fn init_name(&self, state: &RaceState) -> String {
        format!("scenario {:?}", state.scenario)
    }

    fn card(state: &RaceState) -> String {
        let p = state.project();
        format!(
            "{}\nhosts at the target {}, commits {:?}, read as {:?}",
            p.actors.join("\n"),
            p.hosts_at_target,
            p.commits,
            p.said
        )
    }

    fn summary(state: &RaceState) -> String {
        state.summary()
    }
}

/// A state a core invariant led to says so, with the invariant's message (`switchyard_spec::caught`).
fn with_core_panic(mut line: String, message: Option<&str>) -> String {
    if let Some(message) = message {
        let _ = write!(line, " CORE INVARIANT FIRED: {message}");
    }
    line
}

/// How an open in flight is marked in a state's card and summary.
fn open_kind(open: &switchyard_core::failover::PendingOpen) -> &'static str {
    if open.exemption().is_some() {
        " (exempt)"
    } else if open.probe() {
        " (probe)"
    } else {
        ""
    }
}

/// A failover variant as the command line spells it (`--variants`).
pub fn variant_name(variant: Variant) -> &'static str {
    match variant {
        Variant::Production => "production",
        Variant::ExemptOff => "exempt-off",
        Variant::CooldownZero => "cooldown-zero",
        Variant::SupervisorOff => "supervisor-off",
        Variant::ProbeJitter => "probe-jitter",
    }
}

/// How to explore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Bfs,
    Dfs,
    Simulate { seed: u64 },
}

impl Strategy {
    fn describe(self) -> &'static str {
        match self {
            Strategy::Bfs => "breadth-first",
            Strategy::Dfs => "depth-first",
            Strategy::Simulate { .. } => "simulation",
        }
    }
}

/// A limit on the resident memory one search adds to the process. Reaching it stops the search:
/// a breadth-first search that found no violation by then is retried depth-first (which holds
/// a path, not a frontier); a search that still reaches it ends with an incomplete verdict.
/// Each search counts from the memory the process holds when it starts: the allocator may not
/// yet have returned what the search before it freed, and reuses it.
#[derive(Debug, Clone, Copy)]
pub struct MemoryBudget {
    pub limit_bytes: u64,
    /// The process's resident memory now; `None` where it cannot be read (no budget then).
    pub measure: fn() -> Option<u64>,
}

impl MemoryBudget {
    pub fn resident(limit_bytes: u64) -> MemoryBudget {
        MemoryBudget {
            limit_bytes,
            measure: resident_bytes,
        }
    }

    fn reached(&self, baseline_bytes: u64) -> Option<u64> {
        (self.measure)().filter(|rss| rss.saturating_sub(baseline_bytes) >= self.limit_bytes)
    }
}

/// The process's resident memory.
pub fn resident_bytes() -> Option<u64> {
    memory_stats::memory_stats().map(|stats| stats.physical_mem as u64)
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub strategy: Strategy,
    pub threads: usize,
    pub max_depth: Option<usize>,
    /// Stop after this long (simulation runs until stopped).
    pub timeout: Option<Duration>,
    pub memory_budget: Option<MemoryBudget>,
    /// Print a progress line to stderr every second.
    pub progress: bool,
    /// Stop as soon as each of these properties has a discovery (`None`: explore everything).
    /// The checker keeps the *last* violating state it visits for a property, so a run that
    /// goes on past the first one reports a long path; stopping at the first gives the short
    /// one (breadth-first).
    pub stop_when_found: Option<std::collections::BTreeSet<&'static str>>,
    /// Stop once an `always` property is violated (`switchyard-check check`): a core that
    /// leaks could otherwise grow the explored space until memory runs out.
    pub stop_at_first_violation: bool,
    /// Keep stateright's own choice of path, the one to the *last* state that discovers each
    /// property (cut at its first discovering state), instead of the first found: only the
    /// trace corpus wants it (see `corpus_options`).
    pub keep_last_discovery: bool,
}

/// The verdict on one property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Holds,
    Violated,
    Witnessed,
    /// A `sometimes` that no explored state reached: the model may be vacuous.
    NotReached,
    /// The search stopped before it could say (at the first violation, or at the memory budget).
    NotJudged,
}

impl Verdict {
    pub fn is_failure(self) -> bool {
        matches!(self, Verdict::Violated | Verdict::NotReached)
    }

    fn as_str(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Violated => "VIOLATED",
            Verdict::Witnessed => "witnessed",
            Verdict::NotReached => "NOT REACHED",
            Verdict::NotJudged => "not judged",
        }
    }
}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every state within the bounds was explored.
    Exhausted,
    /// An `always` property was violated: the search stops there rather than explore the rest.
    Violation,
    /// The run was limited on request (simulation, depth cap or timeout).
    Limited,
    /// The memory budget was reached with no violation found: the verdict is open.
    MemoryBudget { resident_bytes: u64 },
}

/// A breadth-first search that reached the memory budget before the search that replaced it.
#[derive(Debug, Clone, Copy)]
pub struct Fallback {
    pub unique_states: usize,
    pub max_depth: usize,
    pub resident_bytes: u64,
}

/// A run as a list of `(state, action that leaves it)`; the last action is `None`.
pub type Steps<M> = Vec<(<M as Model>::State, Option<<M as Model>::Action>)>;

pub struct PropertyResult<M: Model> {
    pub name: &'static str,
    pub expectation: Expectation,
    pub verdict: Verdict,
    pub path: Option<Steps<M>>,
    /// `path` is a shortest path to a state that discovers the property (found by a
    /// single-threaded breadth-first search, where states are visited in order of depth).
    pub shortest: bool,
}

impl<M: Model> Debug for PropertyResult<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PropertyResult")
            .field("name", &self.name)
            .field("verdict", &self.verdict)
            .field(
                "steps",
                &self.path.as_ref().map(|p| p.len().saturating_sub(1)),
            )
            .field("shortest", &self.shortest)
            .finish()
    }
}

#[derive(Debug)]
pub struct ModelReport<M: Model> {
    pub model: String,
    pub strategy: Strategy,
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// Exhaustive runs cover the whole bounded space; a simulation or depth-capped run does not.
    pub exhaustive: bool,
    pub ending: Ending,
    pub memory_budget_bytes: Option<u64>,
    /// Set when this report is the depth-first retry of a breadth-first search.
    pub fallback: Option<Fallback>,
    pub properties: Vec<PropertyResult<M>>,
}

impl<M: Model> ModelReport<M> {
    pub fn failed(&self) -> bool {
        self.properties.iter().any(|p| p.verdict.is_failure())
    }

    /// No violation found, but the search ended at the memory budget: neither pass nor fail.
    pub fn incomplete(&self) -> bool {
        !self.failed() && matches!(self.ending, Ending::MemoryBudget { .. })
    }

    pub fn unique_states_per_second(&self) -> f64 {
        self.unique_states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs `model` to completion (or to the timeout, or to the memory budget) and judges every
/// property. A breadth-first search that reaches the memory budget without a violation is
/// retried depth-first within the same budget.
pub fn run<M>(model: M, options: &RunOptions) -> ModelReport<M>
where
    M: CheckedModel + Clone,
    M::State: Clone + Debug + Hash + Eq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let first = run_once(model.clone(), options);
    let (Strategy::Bfs, Ending::MemoryBudget { resident_bytes }) = (first.strategy, first.ending)
    else {
        return first;
    };
    if options.progress {
        eprintln!(
            "{}: breadth-first search reached the memory budget after {} unique states; retrying depth-first",
            M::NAME,
            first.unique_states
        );
    }
    let depth_first = RunOptions {
        strategy: Strategy::Dfs,
        ..options.clone()
    };
    let mut report = run_once(model, &depth_first);
    report.fallback = Some(Fallback {
        unique_states: first.unique_states,
        max_depth: first.max_depth,
        resident_bytes,
    });
    report.elapsed += first.elapsed;
    report
}

/// Makes every discovery of an exhaustive `report` a shortest one. A depth-first search finds
/// a path, not a short one, and a search on several threads is breadth-first only roughly
/// (each thread works through its own share of the frontier), so its first discoveries may be
/// a few steps longer than need be; a second search on one thread, breadth-first, bounded by
/// the deepest discovery the first one found and stopping as soon as each discovered property
/// is found again, visits states strictly in order of depth, so each path it keeps is a
/// shortest one. It holds a frontier only as deep as the deepest shortest discovery (the
/// review bounds' are all within ten steps). Simulated reports are left as they are and stay
/// marked not shortest, and so does a path the re-check did not re-find within the memory
/// budget. Returns what the re-check cost, if one ran.
pub fn shorten_discoveries<M>(
    model: &M,
    options: &RunOptions,
    report: &mut ModelReport<M>,
) -> Option<Recheck>
where
    M: CheckedModel + Clone,
    M::State: Clone + Debug + Hash + Eq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    if !matches!(report.strategy, Strategy::Bfs | Strategy::Dfs) || options.keep_last_discovery {
        return None;
    }
    let pending: std::collections::BTreeSet<&'static str> = report
        .properties
        .iter()
        .filter(|p| p.path.is_some() && !p.shortest)
        .map(|p| p.name)
        .collect();
    // A path of n states ends at depth n; the search must still judge states at that depth.
    let deepest = report
        .properties
        .iter()
        .filter(|p| pending.contains(p.name))
        .filter_map(|p| p.path.as_ref().map(Vec::len))
        .max()?;
    let single = RunOptions {
        strategy: Strategy::Bfs,
        threads: 1,
        max_depth: Some(deepest + 1),
        timeout: None,
        stop_when_found: Some(pending.clone()),
        ..options.clone()
    };
    let again = run_once(model.clone(), &single);
    for found in again.properties {
        if let (true, Some(path)) = (pending.contains(found.name), found.path) {
            if let Some(p) = report.properties.iter_mut().find(|p| p.name == found.name) {
                p.path = Some(path);
                p.shortest = true;
            }
        }
    }
    Some(Recheck {
        elapsed: again.elapsed,
        depth_bound: deepest,
        depth_reached: again.max_depth,
        unique_states: again.unique_states,
    })
}

/// The single-threaded re-check behind shortest paths: what it cost.
#[derive(Debug, Clone, Copy)]
pub struct Recheck {
    pub elapsed: Duration,
    /// It judged states up to this depth (the deepest discovery of the first search).
    pub depth_bound: usize,
    /// The depth it got to before it had re-found every discovery.
    pub depth_reached: usize,
    pub unique_states: usize,
}

/// What one model's run found, without its paths: what the final line of a check is made of.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub model: String,
    pub ending: Ending,
    pub memory_budget_bytes: Option<u64>,
    pub properties: Vec<(&'static str, Expectation, Verdict)>,
}

impl<M: Model> ModelReport<M> {
    pub fn summary(&self) -> RunSummary {
        RunSummary {
            model: self.model.clone(),
            ending: self.ending,
            memory_budget_bytes: self.memory_budget_bytes,
            properties: self
                .properties
                .iter()
                .map(|p| (p.name, p.expectation.clone(), p.verdict))
                .collect(),
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The exit status of a check over `runs` and the last line it prints, which says why:
/// 0 every property holds and every witness is reached; 1 a property is violated or a witness
/// is not reached; 3 no violation found but a search ended at its memory budget (no verdict).
pub fn exit_line(runs: &[RunSummary]) -> (u8, String) {
    let named = |verdict: Verdict| -> Vec<String> {
        runs.iter()
            .flat_map(|r| {
                r.properties
                    .iter()
                    .filter(move |p| p.2 == verdict)
                    .map(move |p| format!("\"{}\" ({})", p.0, r.model))
            })
            .collect()
    };
    let violated = named(Verdict::Violated);
    let unreached = named(Verdict::NotReached);
    let incomplete: Vec<String> = runs
        .iter()
        .filter_map(|r| match r.ending {
            Ending::MemoryBudget { .. } if !r.properties.iter().any(|p| p.2.is_failure()) => {
                Some(format!(
                    "{} (memory budget of {} MiB reached)",
                    r.model,
                    r.memory_budget_bytes.unwrap_or(0) >> 20
                ))
            }
            _ => None,
        })
        .collect();
    let not_judged: usize = runs
        .iter()
        .filter(|r| r.ending == Ending::Violation)
        .map(|r| {
            r.properties
                .iter()
                .filter(|p| p.2 == Verdict::NotJudged)
                .count()
        })
        .sum();
    let models: Vec<&str> = runs.iter().map(|r| r.model.as_str()).collect();
    let mut reasons = Vec::new();
    if !violated.is_empty() {
        reasons.push(format!(
            "{} violated: {}",
            plural(violated.len(), "property", "properties"),
            violated.join(", ")
        ));
    }
    if !unreached.is_empty() {
        reasons.push(format!(
            "{} never reached: {}",
            plural(unreached.len(), "witness", "witnesses"),
            unreached.join(", ")
        ));
    }
    if !reasons.is_empty() {
        if not_judged > 0 {
            reasons.push(format!(
                "{} not judged (a search stops at its first violation)",
                plural(not_judged, "property", "properties")
            ));
        }
        if !incomplete.is_empty() {
            reasons.push(format!("no verdict for {}", incomplete.join(", ")));
        }
        return (1, format!("exit 1: {}", reasons.join("; ")));
    }
    if !incomplete.is_empty() {
        return (
            3,
            format!(
                "exit 3: INCOMPLETE: no violation found, but no verdict for {}: raise --memory-budget-mib or lower the bounds",
                incomplete.join(", ")
            ),
        );
    }
    let count = |expectation: Expectation| -> usize {
        runs.iter()
            .flat_map(|r| r.properties.iter())
            .filter(|p| p.1 == expectation)
            .count()
    };
    let (always, sometimes) = (count(Expectation::Always), count(Expectation::Sometimes));
    let mut line = if always == 1 {
        "exit 0: 1 property holds".to_owned()
    } else {
        format!("exit 0: all {always} properties hold")
    };
    match sometimes {
        0 => {}
        1 => line.push_str(" and 1 witness is reached"),
        n => {
            let _ = write!(line, " and all {n} witnesses are reached");
        }
    }
    let _ = write!(line, " in {}", models.join(", "));
    let limited: Vec<&str> = runs
        .iter()
        .filter(|r| r.ending == Ending::Limited)
        .map(|r| r.model.as_str())
        .collect();
    if !limited.is_empty() {
        let _ = write!(
            line,
            ", but the search of {} was NOT exhaustive (simulation, depth cap or timeout)",
            limited.join(", ")
        );
    }
    (0, line)
}

fn run_once<M>(model: M, options: &RunOptions) -> ModelReport<M>
where
    M: CheckedModel,
    M::State: Clone + Debug + Hash + Eq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let properties = model.properties();
    let model_label = model.label();
    let halt = model.halt().clone();
    halt.lower();
    let threads = options.threads.max(1);
    // Each property reported at its first discovery, so the path kept is the first found.
    let mut builder = FirstHits::new(model, !options.keep_last_discovery)
        .checker()
        .threads(threads);
    if let Some(depth) = options.max_depth {
        builder = builder.target_max_depth(depth);
    }
    if let Some(timeout) = options.timeout {
        builder = builder.timeout(timeout);
    }
    // A violation ends the search: the rest of the space cannot change the verdict, and a
    // violation found late must not be lost to memory.
    if let Some(names) = &options.stop_when_found {
        builder = builder.finish_when(HasDiscoveries::AllOf(names.clone()));
    } else if options.stop_at_first_violation {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    let started = Instant::now();
    let limited = options.max_depth.is_some()
        || options.timeout.is_some()
        || matches!(options.strategy, Strategy::Simulate { .. });
    let searched = match options.strategy {
        Strategy::Bfs => finish::<M, _>(builder.spawn_bfs(), options, &halt, started),
        Strategy::Dfs => finish::<M, _>(builder.spawn_dfs(), options, &halt, started),
        Strategy::Simulate { seed } => finish::<M, _>(
            builder.spawn_simulation(seed, UniformChooser),
            options,
            &halt,
            started,
        ),
    };
    halt.lower();
    let elapsed = started.elapsed();
    let violated = properties.iter().any(|p| {
        p.expectation != Expectation::Sometimes
            && searched.discoveries.iter().any(|(name, _)| *name == p.name)
    });
    let stopped_early =
        violated && (options.stop_at_first_violation || options.stop_when_found.is_some());
    let ending = match (stopped_early, searched.budget_reached) {
        (true, _) => Ending::Violation,
        (false, Some(resident_bytes)) => Ending::MemoryBudget { resident_bytes },
        (false, None) if limited => Ending::Limited,
        (false, None) => Ending::Exhausted,
    };
    let open = matches!(ending, Ending::Violation | Ending::MemoryBudget { .. });
    let properties = properties
        .into_iter()
        .map(|property| {
            let path = searched
                .discoveries
                .iter()
                .find(|(name, _)| *name == property.name)
                .map(|(_, path)| path.clone());
            let verdict = match (&property.expectation, path.is_some()) {
                (Expectation::Sometimes, true) => Verdict::Witnessed,
                (_, true) => Verdict::Violated,
                (_, false) if open => Verdict::NotJudged,
                (Expectation::Sometimes, false) => Verdict::NotReached,
                (_, false) => Verdict::Holds,
            };
            PropertyResult {
                name: property.name,
                expectation: property.expectation,
                verdict,
                shortest: path.is_some()
                    && options.strategy == Strategy::Bfs
                    && threads == 1
                    && !options.keep_last_discovery,
                path,
            }
        })
        .collect();
    ModelReport {
        model: model_label,
        strategy: options.strategy,
        states: searched.states,
        unique_states: searched.unique_states,
        max_depth: searched.max_depth,
        elapsed,
        exhaustive: ending == Ending::Exhausted,
        ending,
        memory_budget_bytes: options.memory_budget.map(|b| b.limit_bytes),
        fallback: None,
        properties,
    }
}

/// Only for `RunOptions::keep_last_discovery` (the trace corpus).
/// stateright 0.31 keeps evaluating an `always` or `sometimes` property after its first
/// discovery and overwrites the path with each later one, so the path it returns ends at the
/// last violating (or witnessing) state it visited, not the first: a reviewer would read a
/// long run whose violation happened many steps earlier. The path is cut at its first state
/// where the property is violated (or witnessed); the cut path is still a real run.
fn first_discovery_on<M: Model>(
    model: &M,
    property: &Property<M>,
    mut path: Vec<(M::State, Option<M::Action>)>,
) -> Vec<(M::State, Option<M::Action>)> {
    let hit = |state: &M::State| match property.expectation {
        Expectation::Always => !(property.condition)(model, state),
        Expectation::Sometimes => (property.condition)(model, state),
        Expectation::Eventually => false,
    };
    if let Some(first) = path.iter().position(|(state, _)| hit(state)) {
        path.truncate(first + 1);
        if let Some(last) = path.last_mut() {
            last.1 = None;
        }
    }
    path
}

type Found<M> = Vec<(
    &'static str,
    Vec<(<M as Model>::State, Option<<M as Model>::Action>)>,
)>;

struct Searched<M: Model> {
    states: usize,
    unique_states: usize,
    max_depth: usize,
    discoveries: Found<M>,
    /// The resident memory at which the budget stopped the search.
    budget_reached: Option<u64>,
}

fn finish<M, C>(checker: C, options: &RunOptions, halt: &Halt, started: Instant) -> Searched<M>
where
    M: CheckedModel,
    M::State: Clone + Debug + Hash + PartialEq,
    M::Action: Clone + Debug + PartialEq,
    C: Checker<FirstHits<M>>,
{
    let mut last_print = Instant::now();
    let on_terminal = progress_on_terminal();
    let mut budget_reached = None;
    let baseline_bytes = options
        .memory_budget
        .and_then(|b| (b.measure)())
        .unwrap_or(0);
    while !checker.is_done() {
        std::thread::sleep(Duration::from_millis(50));
        if budget_reached.is_none() {
            budget_reached = options
                .memory_budget
                .and_then(|b| b.reached(baseline_bytes));
            if budget_reached.is_some() {
                // The search drains what it holds (judging it) and ends.
                halt.raise();
            }
        }
        if options.progress && last_print.elapsed() >= progress_every(on_terminal) {
            last_print = Instant::now();
            let line = format!(
                "{}: {} states generated, {} unique, depth {}, {:.1} s{}",
                M::NAME,
                checker.state_count(),
                checker.unique_state_count(),
                checker.max_depth(),
                started.elapsed().as_secs_f64(),
                resident_bytes()
                    .map(|rss| format!(", {} MiB resident", rss >> 20))
                    .unwrap_or_default()
            );
            progress_line(on_terminal, &line);
        }
    }
    let checker = checker.join();
    // Paths are rebuilt by replaying the model's actions, which a raised halt hides.
    halt.lower();
    if options.progress {
        progress_done(on_terminal);
    }
    // `FirstHits` kept each property's first discovery: no later state on the path discovers it
    // again, and no earlier one does (it would have been visited, and reported, first). Only a
    // run that keeps the last discovery needs its path cut.
    let wrapped = checker.model();
    let properties = wrapped.inner.properties();
    let discoveries = checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| {
            let path = path.into_vec();
            let path = match properties.iter().find(|p| p.name == name) {
                Some(property) if !wrapped.first_only => {
                    first_discovery_on(&wrapped.inner, property, path)
                }
                _ => path,
            };
            (name, path)
        })
        .collect();
    Searched {
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        discoveries,
        budget_reached,
    }
}

fn kind_name(expectation: &Expectation) -> &'static str {
    match expectation {
        Expectation::Always => "always",
        Expectation::Sometimes => "sometimes",
        Expectation::Eventually => "eventually",
    }
}

/// The report table of one model.
pub fn render_table<M: Model>(report: &ModelReport<M>) -> String {
    let mut out = String::new();
    let ending = match report.ending {
        Ending::Exhausted => "exhaustive".to_owned(),
        Ending::Violation => "stopped at the first violation".to_owned(),
        Ending::Limited => "NOT exhaustive (simulation, depth cap or timeout)".to_owned(),
        Ending::MemoryBudget { resident_bytes } => format!(
            "INCOMPLETE: memory budget of {} MiB reached ({} MiB resident) with no violation found",
            report.memory_budget_bytes.unwrap_or(0) >> 20,
            resident_bytes >> 20
        ),
    };
    // Two lines: the counts, then the time and how the search ended.
    let header = format!(
        "model {}: {} search, {} states generated, {} unique, max depth {},",
        report.model,
        report.strategy.describe(),
        report.states,
        report.unique_states,
        report.max_depth,
    );
    out.push_str(&wrap(&header, "", "  "));
    let timing = format!(
        "  {:.2} s ({:.0} unique states/s), {ending}",
        report.elapsed.as_secs_f64(),
        report.unique_states_per_second(),
    );
    out.push_str(&wrap(&timing, "", "  "));
    if let Some(fallback) = report.fallback {
        let line = format!(
            "  breadth-first search reached the memory budget ({} MiB resident) after {} unique states at depth {}; this is the depth-first retry (its counterexamples are not the shortest)",
            fallback.resident_bytes >> 20,
            fallback.unique_states,
            fallback.max_depth
        );
        out.push_str(&wrap(&line, "", "    "));
    }
    // OPS-2: rows fit TABLE_WIDTH columns: a long property name wraps within its column.
    let width = report
        .properties
        .iter()
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, NAME_WIDTH);
    let _ = writeln!(out, "  {:width$}  {:9}  verdict", "property", "kind");
    for p in &report.properties {
        let steps = p
            .path
            .as_ref()
            .map(|_| format!(" ({})", steps_of(p)))
            .unwrap_or_default();
        let mut name = wrap_words(p.name, width).into_iter();
        let _ = writeln!(
            out,
            "  {:width$}  {:9}  {}{}",
            name.next().unwrap_or_default(),
            kind_name(&p.expectation),
            p.verdict.as_str(),
            steps
        );
        for rest in name {
            let _ = writeln!(out, "  {rest}");
        }
    }
    out
}

/// OPS-2: the widest line of the table (a 120-column terminal or log viewer).
pub const TABLE_WIDTH: usize = 120;
/// The property column's width: with the kind and the longest verdict
/// (`VIOLATED (1234 steps, not the shortest)`) a row stays within [`TABLE_WIDTH`].
const NAME_WIDTH: usize = 66;

/// `text` as words greedily filled into lines of at most `width` characters (a longer word
/// is cut).
#[must_use]
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > width {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..width).collect());
        }
        let word: String = word.into_iter().collect();
        let need = if line.is_empty() {
            0
        } else {
            line.chars().count() + 1
        };
        if need + word.chars().count() > width && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// One logical line as lines of at most [`TABLE_WIDTH`] characters, each ending in `\n`:
/// the first after `first` (its indent), the rest after `rest`.
#[must_use]
pub fn wrap(text: &str, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let indent = text.len() - text.trim_start().len();
    let (lead, body) = text.split_at(indent);
    let first = format!("{first}{lead}");
    let mut pieces = wrap_words(
        body,
        TABLE_WIDTH - first.chars().count().max(rest.chars().count()),
    );
    if pieces.len() > 1 {
        // Refill the continuation with its own indent's width.
        let head = pieces.remove(0);
        let tail = pieces.join(" ");
        pieces = vec![head];
        pieces.extend(wrap_words(&tail, TABLE_WIDTH - rest.chars().count()));
    }
    for (i, piece) in pieces.iter().enumerate() {
        out.push_str(if i == 0 { &first } else { rest });
        out.push_str(piece);
        out.push('\n');
    }
    out
}

/// OPS-2: progress overwrites one line (`\r`) on a terminal, and is whole lines, fewer of
/// them, anywhere else (a log file, a pipe), so a log holds lines and not one huge one.
#[must_use]
pub fn progress_on_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// How often progress is printed: every second on a terminal, every ten seconds elsewhere.
#[must_use]
pub fn progress_every(on_terminal: bool) -> Duration {
    if on_terminal {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    }
}

/// Print one progress line (overwriting the last on a terminal).
pub fn progress_line(on_terminal: bool, line: &str) {
    if on_terminal {
        eprint!("\r{line}   ");
        let _ = std::io::stderr().flush();
    } else {
        eprintln!("{line}");
    }
}

/// Clear the progress line (a terminal only: elsewhere every progress line stays).
pub fn progress_done(on_terminal: bool) {
    if on_terminal {
        eprint!("\r{:100}\r", "");
        let _ = std::io::stderr().flush();
    }
}

/// A discovery's length: "3 steps, shortest", or "27 steps, not the shortest" after a
/// depth-first search or a simulation.
pub fn steps_of<M: Model>(p: &PropertyResult<M>) -> String {
    let steps = p
        .path
        .as_ref()
        .map_or(0, |path| path.len().saturating_sub(1));
    let steps = plural(steps, "step", "steps");
    if p.shortest {
        format!("{steps}, shortest")
    } else {
        format!("{steps}, not the shortest")
    }
}

/// A numbered, readable counterexample.
pub fn render_path<M>(steps: &Steps<M>) -> String
where
    M: CheckedModel,
    M::Action: Display,
{
    let mut out = String::new();
    for (index, (state, action)) in steps.iter().enumerate() {
        if index == 0 {
            let _ = writeln!(out, "   0. initial            {}", M::summary(state));
        }
        if let Some(action) = action {
            let next = &steps[index + 1].0;
            let _ = writeln!(out, "  {:>2}. {action}", index + 1);
            let _ = writeln!(out, "      -> {}", M::summary(next));
        }
    }
    out
}

/// The trace of a discovery, as the JSON the replay harness reads.
pub fn to_trace<M>(
    model: &M,
    property: &str,
    kind: TraceKind,
    steps: &Steps<M>,
) -> Trace<M::Params, M::Action, M::Projection>
where
    M: CheckedModel,
    M::State: PartialEq,
    M::Action: Clone,
{
    let initial = &steps[0].0;
    let init = model
        .init_states()
        .iter()
        .position(|s| s == initial)
        .unwrap_or(0);
    let mut trace_steps = Vec::new();
    for (index, (_, action)) in steps.iter().enumerate() {
        if let Some(action) = action {
            trace_steps.push(TraceStep {
                action: action.clone(),
                after: M::project(&steps[index + 1].0),
            });
        }
    }
    Trace {
        model: M::NAME.to_owned(),
        property: property.to_owned(),
        kind,
        params: model.params(),
        init,
        initial: M::project(initial),
        steps: trace_steps,
    }
}

/// A file name for a property: its ID and words, lower-case, dashes.
pub fn trace_file_name(model: &str, kind: TraceKind, property: &str) -> String {
    let mut slug = String::new();
    for c in property.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_matches('-');
    let slug = slug.strip_prefix("witness-").unwrap_or(slug);
    let kind = match kind {
        TraceKind::Witness => "witness",
        TraceKind::Counterexample => "counterexample",
    };
    format!("{model}.{kind}.{slug}.json")
}

/// Writes every discovery of `report` as a trace into `dir`: witnesses only if `witnesses`.
pub fn write_traces<M>(
    model: &M,
    report: &ModelReport<M>,
    dir: &FsPath,
    witnesses: bool,
) -> std::io::Result<Vec<PathBuf>>
where
    M: CheckedModel,
    M::State: PartialEq,
    M::Action: Clone + Serialize,
{
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for p in &report.properties {
        let Some(path) = &p.path else { continue };
        let kind = match p.expectation {
            Expectation::Sometimes if witnesses => TraceKind::Witness,
            Expectation::Sometimes => continue,
            _ => TraceKind::Counterexample,
        };
        let trace = to_trace(model, p.name, kind, path);
        let file = dir.join(trace_file_name(&model.label(), kind, p.name));
        let json = serde_json::to_string_pretty(&trace).map_err(std::io::Error::other)?;
        std::fs::write(&file, json + "\n")?;
        written.push(file);
    }
    Ok(written)
}

/// The bounds at which the committed trace corpus (`checker/tests/traces/`) is generated:
/// single-threaded BFS, so the shortest witness is found and the corpus is reproducible.
pub fn corpus_failover_params() -> FailoverParams {
    FailoverParams::small()
}

/// The handoff corpus bound: the pinned small bound of `spec/tests/handoff_model.rs`.
pub fn corpus_handoff_params() -> HandoffParams {
    HandoffParams::small()
}

/// The sweep corpus bound: the review bound (197,080 states, a second on one thread).
pub fn corpus_sweep_params() -> SweepParams {
    SweepParams::default()
}

/// Options for corpus generation: deterministic (one thread). The corpus keeps the last
/// discovery of each witness, not the shortest: its traces are replayed against real relays
/// and both SQL stores (`adapters/tests/failover_replay.rs`, `handoff_store_diff.rs`), where a
/// 15–25-step run exercises far more of an adapter than the 2–11-step shortest one.
pub fn corpus_options() -> RunOptions {
    RunOptions {
        strategy: Strategy::Bfs,
        threads: 1,
        max_depth: None,
        timeout: None,
        memory_budget: None,
        progress: false,
        stop_when_found: None,
        stop_at_first_violation: false,
        keep_last_discovery: true,
    }
}

/// The core replayed through a failover trace: the real `Supervisor`, driven by the model's
/// step function (the same inputs an adapter feeds).
#[derive(Debug)]
pub struct FailoverCoreReplayer {
    model: FailoverModel,
    state: FoState,
}

impl switchyard_spec::trace::Replayer for FailoverCoreReplayer {
    type Params = FailoverParams;
    type Action = FoAction;
    type Projection = FoProjection;

    fn init(params: &FailoverParams, init: usize) -> Self {
        assert!(
            init < params.variants.len(),
            "trace init {init} out of range"
        );
        let model = FailoverModel::new(params.clone());
        let variant = params.variants[init];
        let state = model.init_state(variant);
        FailoverCoreReplayer { model, state }
    }

    fn step(&mut self, action: &FoAction) {
        self.state = self.model.step(&self.state, *action);
    }

    fn project(&self) -> FoProjection {
        self.state.project()
    }
}

/// The core replayed through a handoff trace: the real admission gate, attempt machine and
/// reference store, driven by the model's step function.
#[derive(Debug)]
pub struct HandoffCoreReplayer {
    model: HandoffModel,
    state: HoState,
}

impl switchyard_spec::trace::Replayer for HandoffCoreReplayer {
    type Params = HandoffParams;
    type Action = HoAction;
    type Projection = HoProjection;

    fn init(params: &HandoffParams, init: usize) -> Self {
        assert_eq!(init, 0, "the handoff model has one initial state");
        let model = HandoffModel::new(params.clone());
        let state = model.init_state();
        HandoffCoreReplayer { model, state }
    }

    fn step(&mut self, action: &HoAction) {
        self.state = self.model.step(&self.state, *action);
    }

    fn project(&self) -> HoProjection {
        self.state.project()
    }
}

/// The core replayed through a sweep trace: the real `SelectionPass` and `DispatchBudget`,
/// driven by the model's step function.
#[derive(Debug)]
pub struct SweepCoreReplayer {
    model: SweepModel,
    state: SweepState,
}

impl switchyard_spec::trace::Replayer for SweepCoreReplayer {
    type Params = SweepParams;
    type Action = SweepAction;
    type Projection = SweepProjection;

    fn init(params: &SweepParams, init: usize) -> Self {
        assert_eq!(init, 0, "the sweep model has one initial state");
        let model = SweepModel::new(params.clone());
        let state = model.init_state();
        SweepCoreReplayer { model, state }
    }

    fn step(&mut self, action: &SweepAction) {
        self.state = self.model.step(&self.state, *action);
    }

    fn project(&self) -> SweepProjection {
        self.state.project()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(
        model: &str,
        ending: Ending,
        properties: &[(&'static str, Expectation, Verdict)],
    ) -> RunSummary {
        RunSummary {
            model: model.to_owned(),
            ending,
            memory_budget_bytes: Some(1 << 20),
            properties: properties.to_vec(),
        }
    }

    #[test]
    fn exit_line_names_violations_unreached_witnesses_and_what_was_not_judged() {
        let failover = summary(
            "failover",
            Ending::Violation,
            &[
                ("FO-D4 x", Expectation::Always, Verdict::Violated),
                ("FO-D5 y", Expectation::Always, Verdict::NotJudged),
                ("witness: z", Expectation::Sometimes, Verdict::NotJudged),
            ],
        );
        let handoff = summary(
            "handoff-review",
            Ending::Exhausted,
            &[
                ("HO-1 a", Expectation::Always, Verdict::Holds),
                (
                    "HO-1 witness: b",
                    Expectation::Sometimes,
                    Verdict::NotReached,
                ),
            ],
        );
        let (code, line) = exit_line(&[failover, handoff]);
        assert_eq!(code, 1);
        assert_eq!(
            line,
            "exit 1: 1 property violated: \"FO-D4 x\" (failover); 1 witness never reached: \"HO-1 witness: b\" (handoff-review); 2 properties not judged (a search stops at its first violation)"
        );
    }

    #[test]
    fn exit_line_passes_only_an_exhaustive_clean_run_without_a_caveat() {
        let clean = [
            ("FO-D4 x", Expectation::Always, Verdict::Holds),
            ("witness: z", Expectation::Sometimes, Verdict::Witnessed),
        ];
        let (code, line) = exit_line(&[summary("failover", Ending::Exhausted, &clean)]);
        assert_eq!(
            (code, line.as_str()),
            (
                0,
                "exit 0: 1 property holds and 1 witness is reached in failover"
            )
        );
        let (code, line) = exit_line(&[summary("failover", Ending::Limited, &clean)]);
        assert_eq!(code, 0);
        assert!(
            line.ends_with(
                "but the search of failover was NOT exhaustive (simulation, depth cap or timeout)"
            ),
            "{line}"
        );
    }
}
