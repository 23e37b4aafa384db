//! `EnrolModel`: enrolment of an unknown host (HO-A4, SCALE-1) as the cell runs it: the core's
//! decision ([`after_register`], [`after_insert`]) over the reference store's
//! `register_control` and `insert_host`, each store call one step, so two desktops of one
//! unknown host registering at once (at one cell, or one at each of two cells) interleave
//! every way the store's calls can. The cells' `--enrol-unknown-hosts` flags are on or off
//! (each cell its own), and the store's host bound is either already reached (`max_hosts` 1:
//! another host fills it) or leaves room for exactly one more (`max_hosts` 2), so the second
//! insert at the bound meets the host the first one wrote, not the bound.
//!
//! The properties judge from the store as it was before each step and the step's facts
//! ([`EnrolFacts`]), never from the core's own account: the host has at most one assignment and
//! an enrolment never replaces it; a cell that does not enrol never writes a row; the bound
//! is never passed; every turned-away desktop is turned away by the name of what the store
//! held (`enrolment_disabled`, `too_many_hosts`, `assigned_elsewhere`, never anything else);
//! a registered desktop is at the host's cell; where a cell enrols and the store has room,
//! the host ends enrolled and registered. The witnesses show every path is reached.
//!
//! Left out: the store failing (the cell turns the desktop away `store_unavailable`, a paced
//! retry; nothing is decided on it), desktops retrying after a refusal (each retry is a new
//! registration, the same three calls), handoffs (the handoff model), and the SQL stores'
//! insert (the token and exact paths give the reference's answers: `handoff_store_diff.rs`,
//! `scale_store.rs`).

use std::fmt;

use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use switchyard_core::handoff::store::{
    AssignmentStore, LimitSettings, RegisterRefusal, StoreBounds, StoreError,
};
use switchyard_core::handoff::{
    after_insert, after_register, EnrolRefusal, RegisterTry, Registered, RegistrationStep,
};
use switchyard_core::handoff::{CellId, HostId, Incarnation};
use switchyard_core::MonoMs;

use crate::halt::Halt;

/// The unknown host whose two desktops register.
pub const ENROL_HOST: HostId = HostId(7);
/// A host already in the store (it fills a bound of one).
pub const ENROL_OTHER: HostId = HostId(3);
/// The cells: desktop `i` registers at `ENROL_CELLS[i]` in the two-cell layout, both at the
/// first in the one-cell layout.
pub const ENROL_CELLS: [CellId; 2] = [CellId(1), CellId(2)];
const NOW: MonoMs = MonoMs(1_000);
const LEASE_MS: u64 = 60_000;

/// A one-line bug in the cell's glue around the core (the model plays the glue), for the tests
/// that show the checker reports it. The core is never changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeededBug {
    /// The cell hands the core `true` whatever its flag says.
    IgnoresTheFlag,
    /// The cell reports an insert that found the host as the bound reached.
    ExistingReportedFull,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnrolParams {
    pub bug: Option<SeededBug>,
}

/// One initial world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layout {
    /// One desktop at each cell (else both at the first).
    pub two_cells: bool,
    /// Each cell's `--enrol-unknown-hosts`.
    pub enrol: [bool; 2],
    /// The store's host bound (1: reached already; 2: room for one more).
    pub max_hosts: u64,
}

/// The store call a desktop's registration runs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Call {
    Register(RegisterTry),
    InsertHost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Desktop {
    /// Index into `ENROL_CELLS`.
    pub cell: u8,
    /// `None` once ended.
    pub next: Option<Call>,
    pub end: Option<Registered>,
}

/// What the last step read and did (the properties' evidence).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnrolFacts {
    /// The desktop that stepped, and its call.
    pub step: Option<(u8, Call)>,
    /// The host's cell before the step (`None`: unknown).
    pub assigned_before: Option<CellId>,
    /// The store had room for one more host before the step.
    pub room_before: bool,
    /// The step ended the desktop's registration so.
    pub ended: Option<Registered>,
    /// An insert found the host (written by the other desktop).
    pub insert_found_host: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EnrolState {
    pub layout: Layout,
    pub store: AssignmentStore,
    pub desktops: [Desktop; 2],
    pub last: EnrolFacts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EnrolAction {
    /// Desktop `desktop` runs its next store call; the core decides what follows.
    Step { desktop: u8 },
}

impl fmt::Display for EnrolAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnrolAction::Step { desktop } => {
                write!(f, "desktop {desktop} runs its next store call")
            }
        }
    }
}

/// What a trace records of a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrolProjection {
    pub layout: Layout,
    /// The host's (cell, epoch, generation).
    pub host_row: Option<(u32, u64, u64)>,
    pub rows: u64,
    /// Each desktop's next call or how it ended.
    pub desktops: Vec<String>,
}

impl EnrolState {
    fn rows(&self) -> u64 {
        [ENROL_OTHER, ENROL_HOST]
            .iter()
            .filter(|h| self.store.assignment(**h).is_some())
            .count() as u64
    }

    fn host_cell(&self) -> Option<CellId> {
        self.store.assignment(ENROL_HOST).map(|r| r.cell)
    }

    fn cell_enrols(&self, cell: CellId) -> bool {
        ENROL_CELLS
            .iter()
            .position(|c| *c == cell)
            .is_some_and(|i| self.layout.enrol[i])
    }

    pub fn project(&self) -> EnrolProjection {
        EnrolProjection {
            layout: self.layout,
            host_row: self
                .store
                .assignment(ENROL_HOST)
                .map(|r| (r.cell.0, r.epoch.0, r.generation.0)),
            rows: self.rows(),
            desktops: self
                .desktops
                .iter()
                .map(|d| match (d.next, d.end) {
                    (Some(call), _) => format!(
                        "at cell {}: next {call:?}",
                        ENROL_CELLS[usize::from(d.cell)].0
                    ),
                    (None, Some(end)) => format!(
                        "at cell {}: {}",
                        ENROL_CELLS[usize::from(d.cell)].0,
                        end.turn_away().map_or("registered", |t| t.name)
                    ),
                    (None, None) => "-".to_owned(),
                })
                .collect(),
        }
    }

    pub fn summary(&self) -> String {
        let p = self.project();
        format!(
            "two_cells={} enrol={:?} max_hosts={} host_row={:?} rows={} desktops={:?}",
            p.layout.two_cells, p.layout.enrol, p.layout.max_hosts, p.host_row, p.rows, p.desktops
        )
    }
}

#[derive(Debug, Clone)]
pub struct EnrolModel {
    pub params: EnrolParams,
    /// Raised by the checker when its memory budget is reached.
    pub halt: Halt,
}

impl EnrolModel {
    pub fn new(params: EnrolParams) -> EnrolModel {
        EnrolModel {
            params,
            halt: Halt::default(),
        }
    }

    /// Every initial world: one or two cells, each cell's flag, the bound reached or not.
    pub fn layouts() -> Vec<Layout> {
        let mut out = Vec::new();
        for two_cells in [false, true] {
            let flags: &[[bool; 2]] = if two_cells {
                &[[false, false], [true, true], [true, false], [false, true]]
            } else {
                &[[false, false], [true, true]]
            };
            for enrol in flags {
                for max_hosts in [1, 2] {
                    out.push(Layout {
                        two_cells,
                        enrol: *enrol,
                        max_hosts,
                    });
                }
            }
        }
        out
    }

    fn init(&self, layout: Layout) -> EnrolState {
        let mut store = AssignmentStore::new(crate_config());
        store.set_limits(&LimitSettings {
            bounds: StoreBounds {
                max_hosts: layout.max_hosts,
                ..StoreBounds::FLEET
            },
            ..limits_of(store.config())
        });
        for cell in ENROL_CELLS {
            let started = store.start_cell(cell, 10, true, NOW, LEASE_MS);
            assert_eq!(started, Ok(Incarnation(1)), "the cells start");
        }
        let other = store.insert_host(ENROL_OTHER, ENROL_CELLS[0], true);
        assert!(other.is_ok(), "the other host is in the store");
        let desktop = |cell| Desktop {
            cell,
            next: Some(Call::Register(RegisterTry::First)),
            end: None,
        };
        EnrolState {
            layout,
            store,
            desktops: [desktop(0), desktop(u8::from(layout.two_cells))],
            last: EnrolFacts::default(),
        }
    }

    /// Run desktop `i`'s next call against the store and hand the answer to the core.
    pub fn step(&self, state: &EnrolState, i: u8) -> EnrolState {
        let mut s = state.clone();
        let d = s.desktops[usize::from(i)];
        let Some(call) = d.next else {
            return s;
        };
        let cell = ENROL_CELLS[usize::from(d.cell)];
        let enrol = s.layout.enrol[usize::from(d.cell)]
            || self.params.bug == Some(SeededBug::IgnoresTheFlag);
        let mut facts = EnrolFacts {
            step: Some((i, call)),
            assigned_before: state.host_cell(),
            room_before: state.rows() < state.layout.max_hosts,
            ..EnrolFacts::default()
        };
        let next = match call {
            Call::Register(attempt) => {
                let answer = s
                    .store
                    .register_control(NOW, ENROL_HOST, cell, Incarnation(1), true);
                after_register(enrol, attempt, answer)
            }
            Call::InsertHost => {
                let mut answer = s.store.insert_host(ENROL_HOST, cell, true);
                facts.insert_found_host = answer == Err(StoreError::HostExists);
                if facts.insert_found_host
                    && self.params.bug == Some(SeededBug::ExistingReportedFull)
                {
                    answer = Err(StoreError::TooManyHosts);
                }
                after_insert(answer)
            }
        };
        let desk = &mut s.desktops[usize::from(i)];
        match next {
            RegistrationStep::InsertHost => desk.next = Some(Call::InsertHost),
            RegistrationStep::RegisterAgain => {
                desk.next = Some(Call::Register(RegisterTry::AfterEnrolment));
            }
            RegistrationStep::Done(end) => {
                desk.next = None;
                desk.end = Some(end);
                facts.ended = Some(end);
            }
        }
        s.last = facts;
        s
    }
}

fn crate_config() -> switchyard_core::handoff::store::StoreConfig {
    switchyard_core::handoff::store::StoreConfig {
        enabled: true,
        policy: switchyard_core::handoff::PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 3_600_000,
        },
        max_in_flight_migrations: 1,
        rate_window_ms: 60_000,
        max_commits_per_window: 1,
        registration_timeout_ms: 120_000,
        bounds: StoreBounds::FLEET,
    }
}

fn limits_of(c: &switchyard_core::handoff::store::StoreConfig) -> LimitSettings {
    LimitSettings {
        host_cooldown_ms: c.policy.host_cooldown_ms,
        max_in_flight_migrations: c.max_in_flight_migrations,
        rate_window_ms: c.rate_window_ms,
        max_commits_per_window: c.max_commits_per_window,
        bounds: c.bounds,
    }
}

impl Model for EnrolModel {
    type State = EnrolState;
    type Action = EnrolAction;

    fn init_states(&self) -> Vec<EnrolState> {
        EnrolModel::layouts()
            .into_iter()
            .map(|l| self.init(l))
            .collect()
    }

    fn actions(&self, state: &EnrolState, actions: &mut Vec<EnrolAction>) {
        if self.halt.is_raised() {
            return;
        }
        for (i, d) in state.desktops.iter().enumerate() {
            if d.next.is_some() {
                actions.push(EnrolAction::Step { desktop: i as u8 });
            }
        }
    }

    fn next_state(&self, state: &EnrolState, action: EnrolAction) -> Option<EnrolState> {
        match action {
            EnrolAction::Step { desktop } => Some(self.step(state, desktop)),
        }
    }

    fn within_boundary(&self, _state: &EnrolState) -> bool {
        !self.halt.is_raised()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        enrol_properties()
    }
}

/// The properties, each named by its requirement ID, in the order the checker reports them:
/// each `always` property is a function below holding its name and its predicate; the
/// witnesses read the step's facts ([`EnrolFacts`], recorded by [`EnrolModel::step`]).
pub fn enrol_properties() -> Vec<Property<EnrolModel>> {
    vec![
        ho_a4_one_row_never_replaced(),
        scale_1_off_never_writes(),
        scale_1_bound_kept(),
        scale_1_refusal_named_by_cause(),
        ho_a4_registered_at_the_hosts_cell(),
        scale_1_enrolled_where_allowed(),
        Property::sometimes(
            "SCALE-1 witness: an unknown host is enrolled and its desktop registers",
            |_, s: &EnrolState| {
                s.last
                    .step
                    .is_some_and(|(_, c)| c == Call::Register(RegisterTry::AfterEnrolment))
                    && matches!(s.last.ended, Some(Registered::Yes(_)))
            },
        ),
        Property::sometimes(
            "SCALE-1 witness: an insert at the bound finds the host the other desktop enrolled",
            |_, s: &EnrolState| s.last.insert_found_host && !s.last.room_before,
        ),
        Property::sometimes(
            "HO-A4 witness: the desktop at the other cell is sent to the host's cell",
            |_, s: &EnrolState| {
                matches!(
                    s.last.ended,
                    Some(Registered::Refused(RegisterRefusal::NotAssignedHere { .. }))
                )
            },
        ),
        Property::sometimes(
            "SCALE-1 witness: an enrolment past the host bound is refused too_many_hosts",
            |_, s: &EnrolState| {
                matches!(
                    s.last.ended,
                    Some(Registered::NotEnrolled(EnrolRefusal::Store(
                        StoreError::TooManyHosts
                    )))
                )
            },
        ),
        Property::sometimes(
            "SCALE-1 witness: a cell that does not enrol refuses an unknown host",
            |_, s: &EnrolState| {
                matches!(
                    s.last.ended,
                    Some(Registered::NotEnrolled(EnrolRefusal::Disabled))
                )
            },
        ),
    ]
}

/// HO-A4 / SCALE-1: the host's one row, once written, stays as written: this world has no
/// handoff, so its cell never changes and its epoch stays 1 (an enrolment never replaces it).
fn ho_a4_one_row_never_replaced() -> Property<EnrolModel> {
    Property::always(
        "HO-A4 one assignment row per host: an enrolment never replaces it",
        |_, s: &EnrolState| {
            let kept = s
                .last
                .assigned_before
                .is_none_or(|before| s.host_cell() == Some(before));
            let epoch_one = s
                .store
                .assignment(ENROL_HOST)
                .is_none_or(|r| r.epoch.0 == 1);
            kept && epoch_one && s.store.check_invariants().is_ok()
        },
    )
}

/// SCALE-1: a row is written only at a cell that enrols, and only by an insert.
fn scale_1_off_never_writes() -> Property<EnrolModel> {
    Property::always(
        "SCALE-1 a cell that does not enrol never writes a row",
        |_, s: &EnrolState| {
            let at_enrolling_cell = s.host_cell().is_none_or(|c| s.cell_enrols(c));
            let written_by_insert = match (s.last.assigned_before, s.host_cell(), s.last.step) {
                (None, Some(_), Some((_, call))) => call == Call::InsertHost,
                _ => true,
            };
            at_enrolling_cell && written_by_insert
        },
    )
}

/// SCALE-1: the store never holds more rows than its host bound.
fn scale_1_bound_kept() -> Property<EnrolModel> {
    Property::always(
        "SCALE-1 the host bound is never exceeded",
        |_, s: &EnrolState| s.rows() <= s.layout.max_hosts,
    )
}

/// SCALE-1 / HO-A4: a desktop turned away is told the name of what the store held when its
/// registration ended: its cell does not enrol and the host was unknown
/// (`enrolment_disabled`); the host was unknown and the store full (`too_many_hosts`); the
/// host is at the other cell (`assigned_elsewhere`). Nothing else turns a desktop away here.
fn scale_1_refusal_named_by_cause() -> Property<EnrolModel> {
    Property::always(
        "SCALE-1 a refused enrolment is named by its cause",
        |_, s: &EnrolState| {
            let (Some(end), Some((i, _))) = (s.last.ended, s.last.step) else {
                return true;
            };
            let own = ENROL_CELLS[usize::from(s.desktops[usize::from(i)].cell)];
            let before = s.last.assigned_before;
            let named = |want: &str| end.turn_away().is_some_and(|t| t.name == want);
            match end {
                Registered::Yes(_) => true,
                Registered::NotEnrolled(EnrolRefusal::Disabled) => {
                    before.is_none() && !s.cell_enrols(own) && named("enrolment_disabled")
                }
                Registered::NotEnrolled(EnrolRefusal::Store(StoreError::TooManyHosts)) => {
                    before.is_none() && !s.last.room_before && named("too_many_hosts")
                }
                Registered::Refused(RegisterRefusal::NotAssignedHere { assigned }) => {
                    before == Some(assigned) && assigned != own && named("assigned_elsewhere")
                }
                Registered::NotEnrolled(_) | Registered::Refused(_) => false,
            }
        },
    )
}

/// HO-A4: a registered desktop holds the host's current authority at its own cell.
fn ho_a4_registered_at_the_hosts_cell() -> Property<EnrolModel> {
    Property::always(
        "HO-A4 a registered desktop is at the host's cell",
        |_, s: &EnrolState| {
            s.desktops.iter().all(|d| match d.end {
                Some(Registered::Yes(a)) => {
                    let own = ENROL_CELLS[usize::from(d.cell)];
                    a.cell == own && a.host == ENROL_HOST && s.host_cell() == Some(own)
                }
                _ => true,
            })
        },
    )
}

/// SCALE-1: once both registrations ended, a host whose desktop met an enrolling cell while
/// the store had room is enrolled, and one of its desktops registered.
fn scale_1_enrolled_where_allowed() -> Property<EnrolModel> {
    Property::always(
        "SCALE-1 an enrolling cell with room enrols the host",
        |_, s: &EnrolState| {
            if s.desktops.iter().any(|d| d.next.is_some()) {
                return true;
            }
            let allowed = s.layout.max_hosts > 1
                && s.desktops
                    .iter()
                    .any(|d| s.layout.enrol[usize::from(d.cell)]);
            !allowed
                || (s.host_cell().is_some()
                    && s.desktops
                        .iter()
                        .any(|d| matches!(d.end, Some(Registered::Yes(_)))))
        },
    )
}
