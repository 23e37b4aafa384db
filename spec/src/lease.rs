//! `LeaseModel`: a cell process's identity lease against a successor's (HO-L5, HO-L2): the
//! core's [`LeaseKeeper`] fed what the cell's renewal loop feeds it, over the store's lease
//! decisions ([`cell_lease_renewal`] for the running process, [`cell_lease`] for a successor
//! that starts), with two clocks: the running cell's, and the successor's, off by up to the
//! drift the cell allows for (`-drift`, `0` or `+drift`, fixed per run).
//!
//! The environment: the running process sends a renewal whenever none is in flight (more
//! often than the adapter's every third of the lease, so every schedule of the adapter is
//! among these); the store applies it at the send (writing the lease from the time sent) or is
//! cut off (the renewal fails); the answer arrives or is lost (then the keeper hears
//! `Unreachable` though the store wrote it); the cut-off starts and ends; a successor tries to
//! take the cell at any step, by its own clock; time advances to the next instant anything is
//! due (a renewal period, the keeper's timer, the lease's end as the successor sees it), and
//! never past the keeper's timer while the cell serves (the adapter's timer races the renewal
//! call: it fires at its time, whatever is in flight).
//!
//! The property judges from the model's record, not the keeper's: the successor holds the
//! cell (the store's lease row names its incarnation) while the old process still serves
//! (the adapter's glue has not stopped it). Left out: the graceful stop's own duration (the
//! cell stops serving at once: new work is refused, sockets close after), and a renewal the
//! store applies after the send (it writes the same end, from the send time).

use std::fmt;

use serde::{Deserialize, Serialize};
use stateright::{Model, Property};
use switchyard_core::handoff::store::{cell_lease, cell_lease_renewal, CellLease};
use switchyard_core::handoff::{Incarnation, LeaseKeeper, LeaseStep, LeaseTiming, Renewal};
use switchyard_core::MonoMs;

use crate::halt::Halt;

/// The running process's incarnation (the successor takes the next).
const OLD: Incarnation = Incarnation(1);
const START: MonoMs = MonoMs(100_000);

/// A one-line bug in the cell's glue around the keeper, for the tests that show the checker
/// reports it. The core is never changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeededBug {
    /// The glue gives the keeper no drift (the successor's clock may still run ahead).
    NoDrift,
    /// The glue waits for the renewal's answer before it looks at the keeper's timer (a call
    /// hanging on a dark store holds the stop back).
    TimerWaitsForTheCall,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseParams {
    pub lease_ms: u64,
    pub drift_ms: u64,
    /// Renewals the running process sends in one run.
    pub renewals: u8,
    /// Times the clock advances in one run.
    pub time_advances: u8,
    /// Times the cut-off starts or ends.
    pub cut_flips: u8,
    pub bug: Option<SeededBug>,
}

impl Default for LeaseParams {
    /// The review bound: the default lease and drift, four renewals, twelve clock steps, a
    /// cut-off that may start and end and start again.
    fn default() -> LeaseParams {
        LeaseParams {
            lease_ms: 15_000,
            drift_ms: 1_000,
            renewals: 4,
            time_advances: 12,
            cut_flips: 3,
            bug: None,
        }
    }
}

/// A renewal on its way: when it was sent, and what the store answered (`None`: cut off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InFlight {
    pub sent_at: MonoMs,
    pub answer: Option<bool>,
}

/// What the last step did (the witnesses read it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseFacts {
    pub stopped_lapsing: bool,
    pub taken: bool,
    pub kept_through_a_failure: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseState {
    /// The running process's clock.
    pub now: MonoMs,
    /// The successor's clock minus the running process's.
    pub offset: i64,
    /// The store's lease row of the cell.
    pub row: (Incarnation, MonoMs),
    pub keeper: LeaseKeeper,
    /// The adapter's glue: the process serves its hosts.
    pub serving: bool,
    pub in_flight: Option<InFlight>,
    /// The running process is cut off from the store.
    pub cut: bool,
    /// A successor process holds the cell.
    pub successor: bool,
    /// A renewal failed while the process kept serving.
    pub failed_once: bool,
    pub renewals_left: u8,
    pub advances_left: u8,
    pub flips_left: u8,
    pub last: LeaseFacts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LeaseAction {
    SendRenewal,
    AnswerArrives { lost: bool },
    TimerFires,
    CutOffFlips,
    SuccessorTries,
    TimeAdvances,
}

impl fmt::Display for LeaseAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseAction::SendRenewal => write!(f, "the cell sends a renewal"),
            LeaseAction::AnswerArrives { lost: false } => write!(f, "the renewal's answer arrives"),
            LeaseAction::AnswerArrives { lost: true } => write!(f, "the renewal's answer is lost"),
            LeaseAction::TimerFires => write!(f, "the keeper's timer fires"),
            LeaseAction::CutOffFlips => write!(f, "the cut-off starts or ends"),
            LeaseAction::SuccessorTries => write!(f, "a successor tries to take the cell"),
            LeaseAction::TimeAdvances => write!(f, "time advances"),
        }
    }
}

/// What a trace records of a state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseProjection {
    pub now_ms: u64,
    pub successor_offset_ms: i64,
    pub lease_until_ms: u64,
    pub holder: u64,
    pub serving: bool,
    pub serving_until_ms: Option<u64>,
    pub renewal_in_flight: bool,
    pub cut_off: bool,
    pub successor_holds: bool,
}

impl LeaseState {
    pub fn project(&self) -> LeaseProjection {
        LeaseProjection {
            now_ms: self.now.as_ms(),
            successor_offset_ms: self.offset,
            lease_until_ms: self.row.1.as_ms(),
            holder: self.row.0 .0,
            serving: self.serving,
            serving_until_ms: self.keeper.poll_timeout().map(MonoMs::as_ms),
            renewal_in_flight: self.in_flight.is_some(),
            cut_off: self.cut,
            successor_holds: self.successor,
        }
    }

    pub fn summary(&self) -> String {
        let p = self.project();
        format!(
            "t={}ms successor_clock={:+}ms lease=(inc {}, until {}) serving={} until={:?} in_flight={} cut={} successor={}",
            p.now_ms,
            p.successor_offset_ms,
            p.holder,
            p.lease_until_ms,
            p.serving,
            p.serving_until_ms,
            p.renewal_in_flight,
            p.cut_off,
            p.successor_holds
        )
    }

    fn successor_now(&self) -> MonoMs {
        MonoMs(self.now.as_ms().saturating_add_signed(self.offset))
    }
}

#[derive(Debug, Clone)]
pub struct LeaseModel {
    pub params: LeaseParams,
    pub halt: Halt,
}

impl LeaseModel {
    pub fn new(params: LeaseParams) -> LeaseModel {
        LeaseModel {
            params,
            halt: Halt::default(),
        }
    }

    fn timing(&self) -> LeaseTiming {
        LeaseTiming {
            lease_ms: self.params.lease_ms,
            drift_ms: if self.params.bug == Some(SeededBug::NoDrift) {
                0
            } else {
                self.params.drift_ms
            },
        }
    }

    fn period_ms(&self) -> u64 {
        LeaseKeeper::period_ms(self.params.lease_ms)
    }

    /// The glue: a keeper's step that ends serving.
    fn apply(s: &mut LeaseState, step: LeaseStep) {
        match step {
            LeaseStep::Keep { .. } | LeaseStep::Failing { .. } => {}
            LeaseStep::Stop(_) => s.serving = false,
            LeaseStep::Lapsing { .. } => {
                s.serving = false;
                s.last.stopped_lapsing = true;
            }
        }
    }

    /// The instants anything is due after `now`: a renewal period, the keeper's timer, the
    /// lease's end as the successor sees it.
    fn next_instant(&self, s: &LeaseState) -> Option<MonoMs> {
        let lapse_seen = MonoMs(s.row.1.as_ms().saturating_add_signed(-s.offset));
        [
            Some(s.now.plus_ms(self.period_ms())),
            s.keeper.poll_timeout(),
            Some(lapse_seen),
        ]
        .into_iter()
        .flatten()
        .filter(|t| *t > s.now)
        .min()
    }

    fn timer_due(&self, s: &LeaseState) -> bool {
        s.serving && s.keeper.poll_timeout().is_some_and(|t| t <= s.now)
    }

    pub fn step(&self, before: &LeaseState, action: LeaseAction) -> LeaseState {
        let mut s = before.clone();
        s.last = LeaseFacts::default();
        match action {
            LeaseAction::SendRenewal => {
                s.renewals_left -= 1;
                let answer = (!s.cut).then(|| {
                    match cell_lease_renewal(Some(s.row), OLD, s.now, self.params.lease_ms) {
                        Ok(until) => {
                            s.row = (OLD, until);
                            true
                        }
                        Err(_) => false,
                    }
                });
                s.in_flight = Some(InFlight {
                    sent_at: s.now,
                    answer,
                });
            }
            LeaseAction::AnswerArrives { lost } => {
                if let Some(f) = s.in_flight.take() {
                    let renewal = match (f.answer, lost) {
                        (Some(true), false) => Renewal::Renewed,
                        (Some(false), false) => {
                            Renewal::Lost(switchyard_core::handoff::store::LeaseLost {
                                holder: Some(s.row.0),
                            })
                        }
                        _ => Renewal::Unreachable,
                    };
                    let step = s.keeper.handle_renewal_at(f.sent_at, renewal);
                    if matches!(step, LeaseStep::Failing { .. }) && s.serving {
                        s.failed_once = true;
                    }
                    if matches!(step, LeaseStep::Keep { recovered: true }) && s.serving {
                        s.last.kept_through_a_failure = true;
                    }
                    Self::apply(&mut s, step);
                }
            }
            LeaseAction::TimerFires => {
                if let Some(step) = s.keeper.handle_timeout(s.now) {
                    Self::apply(&mut s, step);
                }
            }
            LeaseAction::CutOffFlips => {
                s.flips_left -= 1;
                s.cut = !s.cut;
            }
            LeaseAction::SuccessorTries => {
                if let CellLease::Take { incarnation, until } =
                    cell_lease(Some(s.row), s.successor_now(), self.params.lease_ms)
                {
                    s.row = (incarnation, until);
                    s.successor = true;
                    s.last.taken = true;
                }
            }
            LeaseAction::TimeAdvances => {
                s.advances_left -= 1;
                if let Some(t) = self.next_instant(&s) {
                    s.now = t;
                }
            }
        }
        s
    }
}

impl Model for LeaseModel {
    type State = LeaseState;
    type Action = LeaseAction;

    fn init_states(&self) -> Vec<LeaseState> {
        let d = i64::try_from(self.params.drift_ms).unwrap_or(i64::MAX);
        [-d, 0, d]
            .into_iter()
            .map(|offset| LeaseState {
                now: START,
                offset,
                row: (OLD, START.plus_ms(self.params.lease_ms)),
                keeper: LeaseKeeper::with_timing(self.timing(), START),
                serving: true,
                in_flight: None,
                cut: false,
                successor: false,
                failed_once: false,
                renewals_left: self.params.renewals,
                advances_left: self.params.time_advances,
                flips_left: self.params.cut_flips,
                last: LeaseFacts::default(),
            })
            .collect()
    }

    fn actions(&self, s: &LeaseState, actions: &mut Vec<LeaseAction>) {
        if self.halt.is_raised() {
            return;
        }
        let timer_due = self.timer_due(s);
        let waits_for_call =
            self.params.bug == Some(SeededBug::TimerWaitsForTheCall) && s.in_flight.is_some();
        if timer_due && !waits_for_call {
            actions.push(LeaseAction::TimerFires);
        }
        if s.serving && s.in_flight.is_none() && s.renewals_left > 0 {
            actions.push(LeaseAction::SendRenewal);
        }
        if s.in_flight.is_some() {
            actions.push(LeaseAction::AnswerArrives { lost: false });
            actions.push(LeaseAction::AnswerArrives { lost: true });
        }
        if s.flips_left > 0 {
            actions.push(LeaseAction::CutOffFlips);
        }
        if !s.successor {
            actions.push(LeaseAction::SuccessorTries);
        }
        // The adapter's timer fires at its time: the clock never passes it while serving
        // (the seeded bug lets a hanging call hold it back).
        if s.advances_left > 0 && (!timer_due || waits_for_call) {
            actions.push(LeaseAction::TimeAdvances);
        }
    }

    fn next_state(&self, s: &LeaseState, action: LeaseAction) -> Option<LeaseState> {
        Some(self.step(s, action))
    }

    fn within_boundary(&self, _state: &LeaseState) -> bool {
        !self.halt.is_raised()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        lease_properties()
    }
}

/// The properties, each named by its requirement ID, in the order the checker reports them.
pub fn lease_properties() -> Vec<Property<LeaseModel>> {
    vec![
        Property::always(
            "HO-L5 a cell never serves while a successor holds its lease",
            |_, s: &LeaseState| !(s.successor && s.serving),
        ),
        Property::always(
            "HO-L2 the lease names one process: the successor holds it only after the running process's lease ended by the successor's clock",
            |_, s: &LeaseState| !s.successor || s.row.0 != OLD,
        ),
        Property::sometimes(
            "HO-L5 witness: a cut-off cell stops serving, then a successor takes the cell",
            |_, s: &LeaseState| s.last.taken && !s.serving,
        ),
        Property::sometimes(
            "HO-L5 witness: the keeper's timer stops a cell whose renewals fail",
            |_, s: &LeaseState| s.last.stopped_lapsing,
        ),
        Property::sometimes(
            "HO-L5 witness: a renewal fails and the next one keeps the cell serving",
            |_, s: &LeaseState| s.last.kept_through_a_failure,
        ),
    ]
}
