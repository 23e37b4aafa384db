//! A core invariant (`switchyard_core::invariant!`, on in the checker's build) that fires
//! inside a model step is a counterexample, not a crash: the models run each step through
//! [`caught`] and record the message in the state the step leads to, where the property
//! [`CORE_INVARIANTS`] fails (the path to it is the counterexample). Exploration stops there.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The property every model judges with the message [`caught`] recorded.
pub const CORE_INVARIANTS: &str =
    "core invariants hold in every step (an invariant that fires is reported, with its message)";

/// Run one model step; a panic inside it (a core invariant, or the model's own `expect`)
/// comes back as its message. The step's half-done state is dropped with it: the caller keeps
/// the state before the step.
pub fn caught<T>(step: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(step)).map_err(|payload| message(payload.as_ref()))
}

fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_invariant_that_fires_comes_back_as_its_message() {
        // An impossible input: the exact totals of no limit shard at all.
        let fired = caught(|| switchyard_core::handoff::escrow::exact_limits(&[], 0));
        let message = fired.expect_err("the invariant fires in a test build");
        assert!(
            message.contains("a store has at least one limit shard"),
            "{message}"
        );
        assert_eq!(caught(|| 7), Ok(7));
    }
}
