//! One stop signal for graceful shutdown, after mini-redis's `Shutdown`: the owner of a task
//! keeps a [`Stop`] and calls [`Stop::stop`]; the task keeps a [`StopListener`] (cloneable, one
//! per loop or connection) and selects on [`StopListener::stopped`] between its awaits.
//!
//! A dropped `Stop` counts as a stop: when the last sending side is gone, nobody can stop the
//! task any more, so it ends (a relay whose handle was dropped closes). A task that must outlive
//! its handle keeps a clone of the `Stop` itself (the demo desktop, see
//! `handoff::client::spawn_desktop`).

use tokio::sync::watch;

/// The sending side of a stop signal. Cloneable: every clone stops the same listeners.
#[derive(Debug, Clone)]
pub struct Stop {
    tx: watch::Sender<bool>,
}

/// The receiving side of a [`Stop`]: resolves [`stopped`](Self::stopped) once the `Stop` said
/// stop or every `Stop` is gone.
#[derive(Debug, Clone)]
pub struct StopListener {
    rx: watch::Receiver<bool>,
}

impl Stop {
    /// A signal not yet given.
    #[must_use]
    pub fn new() -> Stop {
        Stop {
            tx: watch::channel(false).0,
        }
    }

    /// Stop every listener, present and future. Idempotent.
    pub fn stop(&self) {
        self.tx.send_replace(true);
    }

    /// A listener of this signal (one per task; it may be cloned).
    #[must_use]
    pub fn listener(&self) -> StopListener {
        StopListener {
            rx: self.tx.subscribe(),
        }
    }

    /// Whether [`Stop::stop`] was called.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        *self.tx.borrow()
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
        let _ = self.rx.wait_for(|stopped| *stopped).await;
    }

    /// Whether [`Stop::stop`] was called. (A `Stop` dropped without it is not counted here,
    /// though [`stopped`](Self::stopped) resolves for it.)
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        *self.rx.borrow()
    }
}
