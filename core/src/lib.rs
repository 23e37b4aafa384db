//! Switchyard core: pure, deterministic state machines.
//!
//! Nothing in this crate reads a clock, spawns, prints, or touches a socket or file. Time comes
//! in as [`MonoMs`]; decisions go out as data, drained by the caller (in the style of
//! quinn-proto: `handle_*(now, ..)` in, `poll_*` out).

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

/// A core invariant: checked in debug builds (every test) and, in a release build, when the
/// `invariants` feature is on (the checker enables it, so the review check runs with every
/// invariant). A production build without the feature compiles it out, as `crate::invariant!`.
#[macro_export]
macro_rules! invariant {
    ($($arg:tt)*) => {
        if $crate::INVARIANTS_ON {
            assert!($($arg)*);
        }
    };
}

/// Whether [`invariant!`] checks: read from core's own build (a `cfg!` inside the macro would
/// read the features of the crate that expands it).
#[doc(hidden)]
pub const INVARIANTS_ON: bool = cfg!(any(debug_assertions, feature = "invariants"));

/// [`invariant!`] for an equality (`assert_eq!` under the same switch).
#[macro_export]
macro_rules! invariant_eq {
    ($($arg:tt)*) => {
        if $crate::INVARIANTS_ON {
            assert_eq!($($arg)*);
        }
    };
}

pub mod failover;
pub mod handoff;
pub mod journal;
pub mod peer_limits;
mod time;

pub use time::MonoMs;
