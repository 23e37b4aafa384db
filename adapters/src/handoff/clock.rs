//! Wall-clock milliseconds as the core's `MonoMs`. Cells and directors on several machines
//! share one store, so the timestamps it keeps (cooldowns, rate window, reservation expiry,
//! measurements) are Unix milliseconds. Tests shift the clock forward with [`Clock::advance`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use switchyard_core::MonoMs;

#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicU64>,
}

impl Clock {
    #[must_use]
    pub fn now(&self) -> MonoMs {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        MonoMs(unix.saturating_add(self.offset_ms.load(Ordering::SeqCst)))
    }

    /// Sleep until this clock reads `at` or later; a step forward (a test's `advance`) is seen
    /// within a quarter of a second.
    pub async fn sleep_until(&self, at: MonoMs) {
        loop {
            let now = self.now();
            if now >= at {
                return;
            }
            let left = at.since_ms(now).min(250);
            tokio::time::sleep(std::time::Duration::from_millis(left)).await;
        }
    }

    /// Move this clock (and every clone of it) forward.
    pub fn advance(&self, ms: u64) {
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}
