//! The first discovery of each property, not the last.
//!
//! stateright 0.31 keeps judging a property after its first discovery and overwrites the
//! recorded path with every later one, so an exhaustive search reports the path to the *last*
//! violating or witnessing state it visited: in a breadth-first search, the deepest (witnesses
//! of 27–53 steps where 10-step ones exist). `FirstHits` wraps a model and reports each
//! property once, at the first state that discovers it, and never again, so the recorded path
//! is the first one found. A single-threaded breadth-first search visits states in order of
//! depth, so there that path is a shortest one; every state before it on the path was visited
//! (and judged) earlier, so no earlier state on it discovers the property either.

use std::sync::atomic::{AtomicBool, Ordering};

use stateright::{Expectation, Model, Property};

use crate::by_index::{by_index, JudgedByIndex};

pub struct FirstHits<M: Model> {
    pub inner: M,
    /// Report each property at its first discovery only; false: judge as the inner model does
    /// (stateright then keeps the last discovery).
    pub first_only: bool,
    properties: Vec<Property<M>>,
    /// Property i has been reported (by any thread).
    reported: Vec<AtomicBool>,
}

impl<M: Model> FirstHits<M> {
    pub fn new(inner: M, first_only: bool) -> FirstHits<M> {
        let properties = inner.properties();
        let reported = properties.iter().map(|_| AtomicBool::new(false)).collect();
        FirstHits {
            inner,
            first_only,
            properties,
            reported,
        }
    }

    /// True the first time it is called for `index`, whichever thread calls it.
    fn first_report(&self, index: usize) -> bool {
        self.reported
            .get(index)
            .is_some_and(|flag| !flag.swap(true, Ordering::SeqCst))
    }

    /// Property `index` has been reported (a cheap read; `first_report` decides the race).
    fn was_reported(&self, index: usize) -> bool {
        self.reported
            .get(index)
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }
}

impl<M: Model> JudgedByIndex for FirstHits<M> {
    fn judge(&self, index: usize, state: &M::State) -> bool {
        let Some(property) = self.properties.get(index) else {
            return false;
        };
        if !self.first_only {
            return (property.condition)(&self.inner, state);
        }
        // Reported already (by any thread): the answer below no longer depends on the
        // condition, so it is not evaluated (54 witnesses, most found in the first few depths,
        // were otherwise judged at every state to the end of the search).
        if property.expectation != Expectation::Eventually && self.was_reported(index) {
            return property.expectation == Expectation::Always;
        }
        let condition = (property.condition)(&self.inner, state);
        match property.expectation {
            // Reported as violated once; afterwards read as holding, so the first path stays.
            Expectation::Always => condition || !self.first_report(index),
            Expectation::Sometimes => condition && self.first_report(index),
            // stateright records an `eventually` discovery at a terminal state, not through the
            // condition: nothing to keep here.
            Expectation::Eventually => condition,
        }
    }
}

impl<M: Model> Model for FirstHits<M> {
    type State = M::State;
    type Action = M::Action;

    fn init_states(&self) -> Vec<M::State> {
        self.inner.init_states()
    }

    fn actions(&self, state: &M::State, actions: &mut Vec<M::Action>) {
        self.inner.actions(state, actions);
    }

    fn next_state(&self, state: &M::State, action: M::Action) -> Option<M::State> {
        self.inner.next_state(state, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        by_index(&self.properties)
    }

    fn within_boundary(&self, state: &M::State) -> bool {
        self.inner.within_boundary(state)
    }
}

impl<M: Model> std::fmt::Debug for FirstHits<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reported: Vec<&str> = self
            .properties
            .iter()
            .zip(&self.reported)
            .filter(|(_, flag)| flag.load(Ordering::SeqCst))
            .map(|(p, _)| p.name)
            .collect();
        f.debug_struct("FirstHits")
            .field("reported", &reported)
            .finish_non_exhaustive()
    }
}
