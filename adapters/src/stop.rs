//! One stop signal for graceful shutdown, after mini-redis's `Shutdown`: the owner of a task
//! keeps a [`Stop`] and calls [`Stop::stop`]; the task keeps a [`StopListener`] (cloneable, one
//! per loop or connection) and selects on [`StopListener::stopped`] between its awaits.
//!
//! A dropped `Stop` counts as a stop: when the last sending side is gone, nobody can stop the
//! task any more, so it ends (a relay whose handle was dropped closes). A task that must outlive
//! its handle keeps a clone of the `Stop` itself (the demo desktop, see
//! `handoff::client::spawn_desktop`).
//!
//! A flag and a `Notify` rather than a `watch`: tokio's `watch` spreads its waiters over shards
//! chosen by the runtime's unseeded generator, so the order in which many stopped tasks wake
//! would differ between two runs of one simulation seed (SIM-1); `Notify` wakes them in the
//! order they began to wait.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Signal {
    stopped: AtomicBool,
    /// Live [`Stop`]s; at 0 nobody can stop the listeners any more, which counts as a stop.
    senders: AtomicUsize,
    notify: Notify,
}

impl Signal {
    fn ended(&self) -> bool {
        self.stopped.load(Ordering::SeqCst) || self.senders.load(Ordering::SeqCst) == 0
    }
}

/// The sending side of a stop signal. Cloneable: every clone stops the same listeners.
#[derive(Debug)]
pub struct Stop {
    sig: Arc<Signal>,
}

/// The receiving side of a [`Stop`]: resolves [`stopped`](Self::stopped) once the `Stop` said
/// stop or every `Stop` is gone.
#[derive(Debug, Clone)]
pub struct StopListener {
    sig: Arc<Signal>,
}

impl Stop {
    /// A signal not yet given.
    #[must_use]
    pub fn new() -> Stop {
        let sig = Arc::new(Signal::default());
        sig.senders.store(1, Ordering::SeqCst);
        Stop { sig }
    }

    /// Stop every listener, present and future. Idempotent.
    pub fn stop(&self) {
        self.sig.stopped.store(true, Ordering::SeqCst);
        self.sig.notify.notify_waiters();
    }

    /// A listener of this signal (one per task; it may be cloned).
    #[must_use]
    pub fn listener(&self) -> StopListener {
        StopListener {
            sig: self.sig.clone(),
        }
    }

    /// Whether [`Stop::stop`] was called.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.sig.stopped.load(Ordering::SeqCst)
    }
}

impl Clone for Stop {
    fn clone(&self) -> Stop {
        self.sig.senders.fetch_add(1, Ordering::SeqCst);
        Stop {
            sig: self.sig.clone(),
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        if self.sig.senders.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.sig.notify.notify_waiters();
        }
    }
}

impl Default for Stop {
    fn default() -> Stop {
        Stop::new()
    }
}

impl StopListener {
    /// Resolves once stopped (at once if already) or once every [`Stop`] is gone. Cancel-safe:
    /// select on it across awaits.
    pub async fn stopped(&mut self) {
        loop {
            let notified = self.sig.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a stop between the two is not missed.
            notified.as_mut().enable();
            if self.sig.ended() {
                return;
            }
            notified.await;
        }
    }

    /// Whether [`Stop::stop`] was called. (A `Stop` dropped without it is not counted here,
    /// though [`stopped`](Self::stopped) resolves for it.)
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.sig.stopped.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sim_1_a_stop_or_the_last_dropped_stop_ends_every_listener() {
        let stop = Stop::new();
        let mut a = stop.listener();
        let second = stop.clone();
        drop(stop);
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(20), a.stopped());
        assert!(waiting.await.is_err(), "one Stop is still alive");
        second.stop();
        a.stopped().await;
        assert!(a.is_stopped());
        let other = Stop::new();
        let mut b = other.listener();
        drop(other);
        b.stopped().await;
        assert!(!b.is_stopped(), "dropped, not stopped");
    }
}
