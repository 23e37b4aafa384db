//! OPS-1: how a long-running command stops. SIGTERM (what systemd and Kubernetes send) and
//! SIGINT (Ctrl-C) both start a graceful stop: the command stops accepting, finishes or hands
//! back what is in flight, logs its final counters and exits 0. The stop is bounded
//! ([`STOP_BOUND`]); past it the process exits 1 saying so. A second signal during the stop
//! exits at once (130 after SIGINT, 143 after SIGTERM, as a shell reports them).

use std::time::Duration;

use tracing::{error, info, warn};

/// Longest a graceful stop may take before the process gives up on it.
pub const STOP_BOUND: Duration = Duration::from_secs(10);

/// The signal that started a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
}

impl StopSignal {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// The exit status of a process killed by this signal (128 + its number).
    #[must_use]
    pub fn immediate_exit_code(self) -> i32 {
        match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
        }
    }
}

/// The stop signals, registered when created: create it first thing in a command, so a
/// signal that arrives while the command is still starting is not the default (fatal) action.
#[derive(Debug)]
pub struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    #[must_use]
    pub fn listen() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let (term, int) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            );
            if let Err(e) = term.as_ref().and(int.as_ref()) {
                // Without handlers the process cannot stop gracefully: say so; Ctrl-C still
                // works through tokio's own handler.
                error!(error = %e, "cannot listen for SIGTERM/SIGINT; only Ctrl-C stops this process");
            }
            Signals {
                term: term.ok(),
                int: int.ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn next(&mut self) -> StopSignal {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            if self.term.is_none() && self.int.is_none() {
                let _ = tokio::signal::ctrl_c().await;
                return StopSignal::Interrupt;
            }
            tokio::select! {
                () = recv(&mut self.term) => StopSignal::Terminate,
                () = recv(&mut self.int) => StopSignal::Interrupt,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            StopSignal::Interrupt
        }
    }

    /// Wait for the first SIGTERM or SIGINT, log it, and arm the second-signal exit.
    pub async fn stopped(mut self) -> StopSignal {
        let first = self.next().await;
        info!(
            signal = first.name(),
            bound_ms = u64::try_from(STOP_BOUND.as_millis()).unwrap_or(u64::MAX),
            "stopping gracefully (a second signal stops at once)"
        );
        // Under systemd (Type=notify): the stop has begun.
        crate::sd_notify::stopping();
        tokio::spawn(async move {
            let second = self.next().await;
            warn!(signal = second.name(), "second signal: exiting now");
            std::process::exit(second.immediate_exit_code());
        });
        first
    }

    /// [`Signals::stopped`], or `duration` passing first (`None`: no time limit). `Some` if a
    /// signal ended the wait.
    pub async fn stopped_or(self, duration: Option<Duration>) -> Option<StopSignal> {
        match duration {
            Some(d) => tokio::select! {
                () = tokio::time::sleep(d) => None,
                s = self.stopped() => Some(s),
            },
            None => Some(self.stopped().await),
        }
    }
}

/// Run a graceful stop within [`STOP_BOUND`]. `Err` (exit 1) names what did not finish.
pub async fn bounded_stop<F: std::future::Future<Output = ()>>(
    what: &str,
    stop: F,
) -> Result<(), String> {
    match tokio::time::timeout(STOP_BOUND, stop).await {
        Ok(()) => Ok(()),
        Err(_) => Err(format!(
            "{what} did not stop within {} s; exiting anyway",
            STOP_BOUND.as_secs()
        )),
    }
}
