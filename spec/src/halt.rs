//! A stop signal the checker can raise while a search runs.
//!
//! stateright fixes its limits (state count, depth, timeout) when a search is spawned; a memory
//! budget is only known to be reached while the search runs. A model holding a [`Halt`] stops
//! offering actions and treats every state as outside its boundary once the signal is raised, so
//! the search drains its queue (judging what it already holds) and ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Shared by every clone of a model: raising it on one clone stops them all.
#[derive(Debug, Clone, Default)]
pub struct Halt(Arc<AtomicBool>);

impl Halt {
    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn lower(&self) {
        self.0.store(false, Ordering::Relaxed);
    }

    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::Halt;

    #[test]
    fn a_raised_halt_is_seen_by_every_clone_until_lowered() {
        let halt = Halt::default();
        let clone = halt.clone();
        assert!(!clone.is_raised());
        halt.raise();
        assert!(clone.is_raised());
        clone.lower();
        assert!(!halt.is_raised());
    }
}
