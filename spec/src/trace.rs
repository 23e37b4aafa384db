//! Traces: a model's parameters, its actions, and the projected state after each step, as JSON.
//! The checker writes them (witnesses and counterexamples); a replayer re-drives a system under
//! test through them and asserts the same projections.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// One exported run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "P: Serialize, A: Serialize, S: Serialize",
    deserialize = "P: DeserializeOwned, A: DeserializeOwned, S: DeserializeOwned"
))]
pub struct Trace<P, A, S> {
    /// `failover` or `handoff`.
    pub model: String,
    /// The property this run witnesses or violates.
    pub property: String,
    /// `witness` (a `sometimes` example) or `counterexample` (an `always` violation).
    pub kind: TraceKind,
    pub params: P,
    /// Which initial state (index into the model's `init_states`).
    pub init: usize,
    pub initial: S,
    pub steps: Vec<TraceStep<A, S>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceKind {
    Witness,
    Counterexample,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceStep<A, S> {
    pub action: A,
    pub after: S,
}

/// A system that can be driven through a trace: the core itself, or an adapter over real
/// sockets and a real database.
pub trait Replayer {
    type Params;
    type Action;
    type Projection: PartialEq + std::fmt::Debug;

    fn init(params: &Self::Params, init: usize) -> Self;
    fn step(&mut self, action: &Self::Action);
    fn project(&self) -> Self::Projection;
}

/// Where a replay diverged from its trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence<S> {
    /// 0 is the initial state; `n` is after the `n`-th action.
    pub step: usize,
    pub expected: S,
    pub actual: S,
}

/// Drives `R` through `trace`, comparing the projection after every step.
pub fn replay<R>(
    trace: &Trace<R::Params, R::Action, R::Projection>,
) -> Result<(), Box<Divergence<R::Projection>>>
where
    R: Replayer,
    R::Projection: Clone,
{
    let mut system = R::init(&trace.params, trace.init);
    let check = |step: usize, expected: &R::Projection, actual: R::Projection| {
        if *expected == actual {
            Ok(())
        } else {
            Err(Box::new(Divergence {
                step,
                expected: expected.clone(),
                actual,
            }))
        }
    };
    check(0, &trace.initial, system.project())?;
    for (index, step) in trace.steps.iter().enumerate() {
        system.step(&step.action);
        check(index + 1, &step.after, system.project())?;
    }
    Ok(())
}
