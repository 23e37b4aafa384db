//! HO-7: RAII ownership of one ticket of one machine. Taken in the caller's synchronous section
//! (before its first await); released through the core `SourceCell::handle_release` on drop, so on
//! every exit path, errors and cancellation included. The core fences the ticket to its
//! machine: releasing or revalidating a ticket of a replaced machine is a no-op there.

use std::sync::Arc;

use switchyard_core::handoff::CellWork;
use switchyard_core::handoff::HostId;
use switchyard_core::handoff::{AdmissionRefusal, CellRecord, ReleaseReport, WorkKind, WorkOp};
use tracing::debug;

use super::Shared;

pub(super) struct Work {
    sh: Arc<Shared>,
    /// `None` once released, abandoned, or handed to the core (`into_core`).
    work: Option<CellWork>,
}

impl Work {
    /// Take a ticket for new work (the caller holds no cell lock).
    pub(super) fn acquire(
        sh: &Arc<Shared>,
        host: HostId,
        kind: WorkKind,
    ) -> Result<Work, AdmissionRefusal> {
        let work = sh.input(host, |ep| {
            let work = ep.cell.handle_acquire(host, kind);
            ep.note(host, |ep| CellRecord::Work {
                op: WorkOp::Acquire,
                kind,
                machine: work.as_ref().ok().map(|w| w.machine),
                ok: work.is_ok(),
                refused: work.as_ref().err().copied(),
                after: ep.counters(host),
            });
            work
        })?;
        Ok(Work::adopt(sh, work))
    }

    /// Own a ticket the core already handed out (under a lock the caller has let go of).
    pub(super) fn adopt(sh: &Arc<Shared>, work: CellWork) -> Work {
        Work {
            sh: sh.clone(),
            work: Some(work),
        }
    }

    /// Hand the ticket to a core input that consumes it (`handle_install_control` releases it
    /// whatever happens): the guard no longer releases it.
    pub(super) fn into_core(mut self) -> Option<CellWork> {
        self.work.take()
    }

    /// HO-S3: re-check after an await. `false`: abandon the continuation; the core already
    /// released the ticket (or its machine is gone), so the guard lets it go.
    pub(super) fn revalidate(&mut self) -> bool {
        let Some(work) = self.work else {
            return false;
        };
        let live = self.sh.input(work.host, |ep| {
            let live = ep.cell.handle_revalidate(&work);
            ep.note(work.host, |ep| CellRecord::Work {
                op: WorkOp::Revalidate,
                kind: work.ticket.kind,
                machine: Some(work.machine),
                ok: live,
                refused: None,
                after: ep.counters(work.host),
            });
            live
        });
        if !live {
            debug!(host = work.host.0, "continuation abandoned");
            self.work = None;
        }
        live
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        let report = self.sh.input(work.host, |ep| release(ep, &work));
        if report != Some(ReleaseReport::Released) {
            debug!(host = work.host.0, ?report, "release was a no-op");
        }
    }
}

/// HO-7: release `work` in the core, journaled (CONF-1).
pub(super) fn release(ep: &mut super::pump::LockedCell, work: &CellWork) -> Option<ReleaseReport> {
    let report = ep.cell.handle_release(work);
    ep.note(work.host, |ep| CellRecord::Work {
        op: WorkOp::Release,
        kind: work.ticket.kind,
        machine: Some(work.machine),
        ok: report == Some(ReleaseReport::Released),
        refused: None,
        after: ep.counters(work.host),
    });
    report
}
