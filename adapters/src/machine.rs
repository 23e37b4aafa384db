//! What the drivers take from their machine besides sockets ([`crate::net`]): wall time,
//! randomness and tasks. Without the `sim` cargo feature these are the OS's and tokio's; with
//! it, a thread that runs a simulation gets the simulation's ([`crate::sim`]): its clock, its
//! seeded generator, and tasks recorded on their host so a crash can end them.

use std::future::Future;

use tokio::task::JoinHandle;

/// Wall time in Unix milliseconds (0 before 1970).
#[must_use]
pub fn unix_ms() -> u64 {
    #[cfg(feature = "sim")]
    if let Some(ms) = crate::sim::unix_ms() {
        return ms;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Fills `buf` with random bytes (the OS's; a simulation's seeded generator).
pub fn fill_random(buf: &mut [u8]) -> Result<(), getrandom::Error> {
    #[cfg(feature = "sim")]
    if crate::sim::fill_random(buf) {
        return Ok(());
    }
    getrandom::fill(buf)
}

/// `tokio::spawn`; in a simulation the task stays on its host (a crash aborts it).
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    #[cfg(feature = "sim")]
    let fut = match crate::sim::spawn_on_host(fut) {
        Ok(handle) => return handle,
        Err(fut) => fut,
    };
    tokio::spawn(fut)
}

/// The host the calling task runs on, carried into a task someone else spawns (axum's
/// WebSocket upgrade, a `JoinSet`): a zero-sized no-op without the `sim` feature.
#[derive(Debug, Clone, Copy)]
pub struct Here {
    #[cfg(feature = "sim")]
    at: Option<(std::net::IpAddr, u64)>,
}

impl Here {
    #[must_use]
    pub fn now() -> Here {
        Here {
            #[cfg(feature = "sim")]
            at: crate::sim::current_host()
                .and_then(|h| crate::sim::world().map(|w| (h, w.crash_epoch(h)))),
        }
    }

    /// `fut`, run on this host; in a simulation it ends (unfinished) once the host crashed.
    pub async fn run<F: Future<Output = ()>>(self, fut: F) {
        #[cfg(feature = "sim")]
        if let (Some((host, epoch)), Some(world)) = (self.at, crate::sim::world()) {
            return crate::sim::until_crash(world, host, epoch, fut).await;
        }
        fut.await;
    }

    /// `fut`, run with this host's name (its output is needed, so a crash does not cut it:
    /// the task that owns it does).
    pub async fn keep<F: Future>(self, fut: F) -> F::Output {
        #[cfg(feature = "sim")]
        if let Some((host, _)) = self.at {
            return crate::sim::scoped(host, fut).await;
        }
        fut.await
    }
}

/// `spawn_blocking`; in a simulation the call runs in place (a blocking thread would finish at
/// a moment the seed does not decide).
pub async fn blocking<F, R>(f: F) -> Result<R, tokio::task::JoinError>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    #[cfg(feature = "sim")]
    if crate::sim::active() {
        return Ok(f());
    }
    tokio::task::spawn_blocking(f).await
}

/// A seed for a retry policy's jitter (`backon`'s own generator is seeded from the OS unless
/// told): drawn from [`fill_random`], so a simulation's seed decides it.
#[must_use]
pub fn jitter_seed() -> u64 {
    let mut seed = [0u8; 8];
    if fill_random(&mut seed).is_err() {
        return unix_ms();
    }
    u64::from_le_bytes(seed)
}
