//! Test seams: pause points that stop one task at a named place until released, and the
//! store's injected faults. They can be armed only with the `test-hooks` cargo feature, which
//! the tests and benches turn on; without it (every release binary) each seam is an inert
//! zero-sized twin whose checks compile to nothing: no lock, no atomic.

#[cfg(feature = "test-hooks")]
pub use armed::*;
#[cfg(not(feature = "test-hooks"))]
pub use inert::*;

#[cfg(feature = "test-hooks")]
mod armed {
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;

    use tokio::sync::oneshot;

    /// Longest a paused task waits for its release (a forgotten release cannot hang a task).
    const MAX_PAUSE: Duration = Duration::from_secs(30);

    #[derive(Debug, Default)]
    pub struct PausePoint {
        armed: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
    }

    /// An armed pause: `reached` resolves once a task waits there; send on (or drop) `resume`.
    #[derive(Debug)]
    pub struct Pause {
        pub reached: oneshot::Receiver<()>,
        pub resume: oneshot::Sender<()>,
    }

    impl PausePoint {
        /// Arm for the next task that passes.
        pub fn arm(&self) -> Pause {
            let (reached_tx, reached) = oneshot::channel();
            let (resume, resume_rx) = oneshot::channel();
            *self.armed.lock().unwrap_or_else(|e| e.into_inner()) = Some((reached_tx, resume_rx));
            Pause { reached, resume }
        }

        /// Called by the task at the pause point.
        pub async fn reached(&self) {
            let armed = self.armed.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some((reached, resume)) = armed {
                let _ = reached.send(());
                let _ = tokio::time::timeout(MAX_PAUSE, resume).await;
            }
        }
    }

    /// HO-S4 test seam: faults a test arms on a live store (inert unless armed). Every injected
    /// fault is counted, so a test run can report injected / survived.
    #[derive(Debug, Default)]
    pub struct Faults {
        /// `run_transaction` / `reconcile` fail to begin this many times (DB unavailable).
        fail_begins: AtomicU32,
        /// The next `run_transaction` commits, then its result is lost.
        lose_next_commit_result: AtomicBool,
        /// The next `run_transaction` stops after taking the host lock until released.
        pause_after_lock: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
        /// The next `run_transaction` stops before it begins (holds nothing).
        pub before_begin: PausePoint,
        /// SCALE-3: the director's page read this many reads from now fails (0: disarmed).
        fail_page_read_in: AtomicU32,
        /// HO-L5: every transaction of this store (lease renewals included) fails to begin, as
        /// when the process's host is cut off from the database; other processes' connections
        /// are untouched.
        cut_off: AtomicBool,
        injected: AtomicU64,
    }

    /// A transaction stopped by [`Faults::arm_pause_after_lock`].
    #[derive(Debug)]
    pub struct Paused {
        /// Resolves once a transaction holds the host lock and waits.
        pub reached: oneshot::Receiver<()>,
        /// Send (or drop) to let it go on.
        pub resume: oneshot::Sender<()>,
    }

    impl Faults {
        /// HO-L5: cut this store off (`true`) or reconnect it.
        pub fn cut_off(&self, cut: bool) {
            self.cut_off.store(cut, Ordering::SeqCst);
        }

        pub(crate) fn is_cut_off(&self) -> bool {
            let cut = self.cut_off.load(Ordering::SeqCst);
            if cut {
                self.injected.fetch_add(1, Ordering::SeqCst);
            }
            cut
        }

        pub fn fail_next_begins(&self, n: u32) {
            self.fail_begins.store(n, Ordering::SeqCst);
        }

        pub fn lose_next_commit_result(&self) {
            self.lose_next_commit_result.store(true, Ordering::SeqCst);
        }

        pub fn arm_pause_after_lock(&self) -> Paused {
            let (reached_tx, reached) = oneshot::channel();
            let (resume, resume_rx) = oneshot::channel();
            if let Ok(mut slot) = self.pause_after_lock.lock() {
                *slot = Some((reached_tx, resume_rx));
            }
            Paused { reached, resume }
        }

        /// SCALE-3: let `n - 1` candidate page reads through, fail the `n`-th (once); `0`
        /// disarms.
        pub fn fail_nth_page_read(&self, n: u32) {
            self.fail_page_read_in.store(n, Ordering::SeqCst);
        }

        /// Faults that actually fired.
        #[must_use]
        pub fn injected(&self) -> u64 {
            self.injected.load(Ordering::SeqCst)
        }

        pub(crate) fn take_begin_failure(&self) -> bool {
            let took = self
                .fail_begins
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if took {
                self.injected.fetch_add(1, Ordering::SeqCst);
            }
            took
        }

        pub(crate) fn take_lost_result(&self) -> bool {
            let took = self.lose_next_commit_result.swap(false, Ordering::SeqCst);
            if took {
                self.injected.fetch_add(1, Ordering::SeqCst);
            }
            took
        }

        pub(crate) fn take_page_read_failure(&self) -> bool {
            let before =
                self.fail_page_read_in
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            let took = before == Ok(1);
            if took {
                self.injected.fetch_add(1, Ordering::SeqCst);
            }
            took
        }

        pub(crate) fn take_pause(&self) -> Option<(oneshot::Sender<()>, oneshot::Receiver<()>)> {
            let taken = self.pause_after_lock.lock().ok().and_then(|mut s| s.take());
            if taken.is_some() {
                self.injected.fetch_add(1, Ordering::SeqCst);
            }
            taken
        }
    }
}

#[cfg(not(feature = "test-hooks"))]
mod inert {
    use tokio::sync::oneshot;

    /// Inert: there is no way to arm it.
    #[derive(Debug, Default)]
    pub struct PausePoint;

    impl PausePoint {
        pub async fn reached(&self) {}
    }

    /// Inert: no fault can be injected.
    #[derive(Debug, Default)]
    pub struct Faults {
        pub before_begin: PausePoint,
    }

    impl Faults {
        pub(crate) fn take_begin_failure(&self) -> bool {
            false
        }

        pub(crate) fn is_cut_off(&self) -> bool {
            false
        }

        pub(crate) fn take_lost_result(&self) -> bool {
            false
        }

        pub(crate) fn take_page_read_failure(&self) -> bool {
            false
        }

        pub(crate) fn take_pause(&self) -> Option<(oneshot::Sender<()>, oneshot::Receiver<()>)> {
            None
        }
    }
}
