use serde::{Deserialize, Serialize};

/// A point on a monotonic clock, in milliseconds since an arbitrary origin chosen by the caller.
///
/// The core never reads a clock: every input carries one of these.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct MonoMs(pub u64);

impl MonoMs {
    pub const ZERO: MonoMs = MonoMs(0);

    /// `self + delta_ms`, saturating: a deadline far in the future is still in the future.
    #[must_use]
    pub fn plus_ms(self, delta_ms: u64) -> MonoMs {
        MonoMs(self.0.saturating_add(delta_ms))
    }

    /// Milliseconds from `earlier` to `self`; zero if `earlier` is later.
    #[must_use]
    pub fn since_ms(self, earlier: MonoMs) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    #[must_use]
    pub fn as_ms(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for MonoMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}ms", self.0)
    }
}
