//! A pause point: a test seam that stops one task at a named place until released. Inert (one
//! uncontended lock) unless a test armed it.

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
