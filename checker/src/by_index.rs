//! Property lists for wrapper models.
//!
//! stateright's `Property` holds a plain `fn(&M, &M::State) -> bool`, not a closure, so a
//! model that wraps another cannot hand on "the inner model's property i, judged my way" as a
//! capture. Instead each wrapper judges by index (`JudgedByIndex::judge`), and property i's
//! condition is the function `judged::<W, i>`, monomorphised for every index up to
//! [`MAX_PROPERTIES`].

use stateright::{Model, Property};

/// A model that judges its properties by their index in the wrapped model's list.
pub trait JudgedByIndex: Model {
    /// Property `index`'s condition on `state`, with the meaning stateright gives it (for an
    /// `always` property: true while it holds; for a `sometimes`: true where it is witnessed).
    fn judge(&self, index: usize, state: &Self::State) -> bool;
}

fn judged<W: JudgedByIndex, const I: usize>(model: &W, state: &W::State) -> bool {
    model.judge(I, state)
}

macro_rules! conditions {
    ($($i:literal)*) => {
        /// The condition that judges property `index` through `JudgedByIndex::judge`.
        fn condition<W: JudgedByIndex>(index: usize) -> Option<fn(&W, &W::State) -> bool> {
            match index {
                $($i => Some(judged::<W, $i>),)*
                _ => None,
            }
        }
        /// How many properties a wrapped model may have (the handoff model has 63).
        pub const MAX_PROPERTIES: usize = [$($i),*].len();
    };
}

conditions!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127);

/// `inner`'s properties, same names and kinds, each judged by `W::judge` with its index.
///
/// # Panics
/// If `inner` has more than [`MAX_PROPERTIES`] properties: a limit of this checker, not of its
/// input, which the tests of both models would show at once.
pub fn by_index<M: Model, W: JudgedByIndex>(inner: &[Property<M>]) -> Vec<Property<W>> {
    inner
        .iter()
        .enumerate()
        .map(|(index, p)| Property {
            expectation: p.expectation.clone(),
            name: p.name,
            condition: condition::<W>(index).unwrap_or_else(|| {
                panic!(
                    "property {index} ({}): raise MAX_PROPERTIES ({MAX_PROPERTIES}) in checker/src/by_index.rs",
                    p.name
                )
            }),
        })
        .collect()
}
