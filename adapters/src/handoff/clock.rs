//! Wall-clock milliseconds as the core's `MonoMs`. Cells and directors on several machines
//! share one store, so the timestamps it keeps (cooldowns, rate window, reservation expiry,
//! measurements) are Unix milliseconds. Tests shift the clock forward with [`Clock::advance`].
//!
//! With the `test-hooks` feature a test may instead run a clock on tokio's time
//! ([`Clock::on_tokio_time`]): a fixed Unix start plus the tokio `Instant` elapsed since the
//! clock was made, so under `#[tokio::test(start_paused = true)]` the runtime's auto-advance
//! moves it, and a simulated month passes in seconds (SIM-1, HO-L4's long-horizon test).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use switchyard_core::MonoMs;

#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicU64>,
    /// Test seam: (Unix start in ms, the tokio instant it stands for).
    #[cfg(feature = "test-hooks")]
    tokio_base: Option<(u64, tokio::time::Instant)>,
}

impl Clock {
    /// Test seam (`test-hooks`): a clock that reads `start` now and then moves with tokio's
    /// time (paused and auto-advanced in a `start_paused` test). Every clone shares the start.
    #[cfg(feature = "test-hooks")]
    #[must_use]
    pub fn on_tokio_time(start: MonoMs) -> Clock {
        Clock {
            offset_ms: Arc::default(),
            tokio_base: Some((start.0, tokio::time::Instant::now())),
        }
    }

    /// Whether this clock follows tokio's time (a test seam) rather than the wall.
    fn on_tokio(&self) -> bool {
        // A simulation's wall clock is tokio's paused time too (SIM-1).
        #[cfg(feature = "sim")]
        if crate::sim::active() {
            return true;
        }
        #[cfg(feature = "test-hooks")]
        return self.tokio_base.is_some();
        #[cfg(not(feature = "test-hooks"))]
        false
    }

    fn base_ms(&self) -> u64 {
        #[cfg(feature = "test-hooks")]
        if let Some((start, at)) = self.tokio_base {
            let elapsed = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
            return start.saturating_add(elapsed);
        }
        crate::machine::unix_ms()
    }

    #[must_use]
    pub fn now(&self) -> MonoMs {
        MonoMs(
            self.base_ms()
                .saturating_add(self.offset_ms.load(Ordering::SeqCst)),
        )
    }

    /// Sleep until this clock reads `at` or later; a step forward (a test's `advance`) is seen
    /// within a quarter of a second. On tokio's time it sleeps the whole remainder at once (an
    /// `advance` is then seen when that sleep ends), so a paused runtime jumps straight there.
    pub async fn sleep_until(&self, at: MonoMs) {
        loop {
            let now = self.now();
            if now >= at {
                return;
            }
            let left = at.since_ms(now);
            let step = if self.on_tokio() { left } else { left.min(250) };
            tokio::time::sleep(std::time::Duration::from_millis(step)).await;
        }
    }

    /// Move this clock (and every clone of it) forward.
    pub fn advance(&self, ms: u64) {
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}
