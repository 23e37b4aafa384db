//! What stateright's Explorer (`switchyard-check check … --explore ADDR`) shows.
//!
//! The Explorer prints a state as its `{:#?}` dump (60 lines of core internals for one failover
//! state) and labels each initial state "Init 0", "Init 1", … with no way for a model to name
//! it. `Explorable` wraps one or more models of a kind so that a state prints as its
//! `CheckedModel::card` (a few lines an operator reads), and the walk starts at one synthetic
//! state whose actions are the named initial states: the failover model's variants
//! ("production", "cooldown-zero", …) or the handoff model's scenarios ("review",
//! "work-kinds"), so the first click names what it picks. Everything after that first step is
//! the wrapped model's own step.

use std::fmt::{self, Debug, Display};
use std::hash::{Hash, Hasher};

use stateright::{Expectation, Model, Property};

use crate::by_index::{by_index, JudgedByIndex};
use crate::CheckedModel;

/// A state of the Explorer's walk: the synthetic start, or a state of model `model`.
pub struct Shown<M: CheckedModel> {
    pub at: Option<(usize, M::State)>,
}

impl<M: CheckedModel> Clone for Shown<M>
where
    M::State: Clone,
{
    fn clone(&self) -> Self {
        Shown {
            at: self.at.clone(),
        }
    }
}

impl<M: CheckedModel> PartialEq for Shown<M>
where
    M::State: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl<M: CheckedModel> Eq for Shown<M> where M::State: Eq {}

impl<M: CheckedModel> Hash for Shown<M>
where
    M::State: Hash,
{
    fn hash<H: Hasher>(&self, hasher: &mut H) {
        self.at.hash(hasher);
    }
}

/// The Explorer prints states with `{:#?}`: this is what it shows.
impl<M: CheckedModel> Debug for Shown<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.at {
            None => f.write_str("start: pick an initial state"),
            Some((_, state)) => f.write_str(&M::card(state)),
        }
    }
}

/// An Explorer step: pick initial state `Begin(i)` (named), or the wrapped model's action.
#[derive(Clone, Debug, PartialEq)]
pub enum ShownAction<A> {
    Begin(usize),
    Step(A),
}

/// One or more models of a kind behind one named start.
pub struct Explorable<M: CheckedModel> {
    models: Vec<M>,
    /// Each initial state the start offers: its model, the state, its name.
    entries: Vec<(usize, M::State, String)>,
    properties: Vec<Vec<Property<M>>>,
}

impl<M: CheckedModel> Explorable<M> {
    /// `None` if `models` is empty.
    pub fn new(models: Vec<M>) -> Option<Explorable<M>> {
        if models.is_empty() {
            return None;
        }
        let mut entries = Vec::new();
        for (index, model) in models.iter().enumerate() {
            for state in model.init_states() {
                let name = model.init_name(&state);
                entries.push((index, state, name));
            }
        }
        let properties = models.iter().map(Model::properties).collect();
        Some(Explorable {
            models,
            entries,
            properties,
        })
    }

    /// The names the start offers, in order.
    pub fn entry_names(&self) -> Vec<&str> {
        self.entries.iter().map(|(_, _, n)| n.as_str()).collect()
    }
}

impl<M: CheckedModel> JudgedByIndex for Explorable<M>
where
    M::State: Clone,
    M::Action: Display,
{
    fn judge(&self, index: usize, state: &Shown<M>) -> bool {
        match &state.at {
            // The start is no state of any model: it violates and witnesses nothing.
            None => self.properties[0]
                .get(index)
                .is_some_and(|p| p.expectation != Expectation::Sometimes),
            Some((model, state)) => self.properties[*model]
                .get(index)
                .is_some_and(|p| (p.condition)(&self.models[*model], state)),
        }
    }
}

impl<M: CheckedModel> Model for Explorable<M>
where
    M::State: Clone,
    M::Action: Display,
{
    type State = Shown<M>;
    type Action = ShownAction<M::Action>;

    fn init_states(&self) -> Vec<Shown<M>> {
        vec![Shown { at: None }]
    }

    fn actions(&self, state: &Shown<M>, actions: &mut Vec<Self::Action>) {
        match &state.at {
            None => actions.extend((0..self.entries.len()).map(ShownAction::Begin)),
            Some((model, state)) => {
                let mut inner = Vec::new();
                self.models[*model].actions(state, &mut inner);
                actions.extend(inner.into_iter().map(ShownAction::Step));
            }
        }
    }

    fn next_state(&self, state: &Shown<M>, action: Self::Action) -> Option<Shown<M>> {
        match (&state.at, action) {
            (None, ShownAction::Begin(entry)) => {
                let (model, init, _) = self.entries.get(entry)?;
                Some(Shown {
                    at: Some((*model, init.clone())),
                })
            }
            (Some((model, state)), ShownAction::Step(action)) => {
                let next = self.models[*model].next_state(state, action)?;
                Some(Shown {
                    at: Some((*model, next)),
                })
            }
            _ => None,
        }
    }

    fn format_action(&self, action: &Self::Action) -> String {
        match action {
            ShownAction::Begin(entry) => self
                .entries
                .get(*entry)
                .map_or_else(|| format!("initial state {entry}"), |e| e.2.clone()),
            ShownAction::Step(action) => action.to_string(),
        }
    }

    fn properties(&self) -> Vec<Property<Self>> {
        by_index(&self.properties[0])
    }

    fn within_boundary(&self, state: &Shown<M>) -> bool {
        match &state.at {
            None => true,
            Some((model, state)) => self.models[*model].within_boundary(state),
        }
    }
}

impl<M: CheckedModel> Debug for Explorable<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Explorable")
            .field("initial states", &self.entry_names())
            .finish_non_exhaustive()
    }
}
