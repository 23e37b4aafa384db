//! Director side: pure eligibility (HO-3, HO-C1), read-only candidate selection over pages
//! with a rotating offset (HO-S1, HO-S2 fairness), and the dispatch-failure budget that busy
//! answers never consume (HO-S2).

use serde::{Deserialize, Serialize};

use super::attempt::HandoffReply;
use super::ids::{CellId, HostId, SourceAuthority};
use super::policy::{self, HandoffRequest, Ineligible, Measurement, PolicyConfig};
use crate::MonoMs;

/// Bounds of one selection pass.
pub const MAX_PAGE_SIZE: u32 = 1_000;
pub const MAX_PAGES_PER_PASS: u32 = 1_000;
pub const MAX_DISPATCH_PER_PASS: u32 = 10_000;

/// The director's configuration (carried into each command where the cell needs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DirectorPolicy {
    /// HO-3 / HO-A5: the enable switch.
    pub enabled: bool,
    /// HO-3: configured cohort percentage (`0..=100`), carried in the command.
    pub cohort_percent: u8,
    pub policy: PolicyConfig,
}

/// What the director reads (read-only) about a candidate host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CandidateView {
    pub authority: SourceAuthority,
    /// HO-C1: the source cell advertises the idle-handoff capability.
    pub source_cell_capable: bool,
    /// HO-C1: the desktop negotiated the idle-handoff capability.
    pub desktop_capable: bool,
    /// HO-3: the desktop's latest measurement, for its best target cell.
    pub measurement: Option<(CellId, Measurement)>,
    pub cooldown_until: Option<MonoMs>,
}

/// What the director reads about the measured target cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TargetView {
    pub cell: CellId,
    /// HO-C1.
    pub capable: bool,
    pub load: u32,
    pub capacity: u32,
}

/// HO-3 / HO-C1 / HO-S1: pure eligibility. Returns the request to send (op id derived from
/// the exact authority and target) or the named reason to skip. Reserves nothing.
pub fn evaluate(
    now: MonoMs,
    director: &DirectorPolicy,
    candidate: &CandidateView,
    target: Option<&TargetView>,
) -> Result<HandoffRequest, Ineligible> {
    if !director.enabled {
        return Err(Ineligible::Disabled);
    }
    let Some((target_cell, measurement)) = candidate.measurement else {
        return Err(Ineligible::NoMeasurement);
    };
    if target_cell == candidate.authority.cell {
        return Err(Ineligible::SameCell);
    }
    let Some(target) = target.filter(|t| t.cell == target_cell) else {
        return Err(Ineligible::UnknownTarget);
    };
    policy::check_capabilities(
        candidate.source_cell_capable,
        target.capable,
        candidate.desktop_capable,
    )?;
    policy::check_cohort(candidate.authority.host, director.cohort_percent)?;
    policy::check_freshness(now, &measurement, director.policy.freshness_window_ms)?;
    policy::check_improvement(measurement.current_rtt_ms, measurement.target_rtt_ms)?;
    policy::check_cooldown(now, candidate.cooldown_until)?;
    policy::check_capacity(target.load, target.capacity)?;
    Ok(HandoffRequest::new(
        candidate.authority,
        target_cell,
        director.cohort_percent,
        measurement,
    ))
}

/// HO-S2: persisted rotating position in the host list (ordered by host id). Each pass
/// starts where the previous one stopped, so hosts that keep answering busy never hold the
/// front of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct PageCursor {
    pub offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScanLimits {
    pub page_size: u32,
    pub max_pages: u32,
    /// Requests one pass may send.
    pub max_dispatch: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScanLimitsError {
    PageSize,
    MaxPages,
    MaxDispatch,
}

impl ScanLimits {
    pub fn validate(&self) -> Result<(), ScanLimitsError> {
        if self.page_size == 0 || self.page_size > MAX_PAGE_SIZE {
            return Err(ScanLimitsError::PageSize);
        }
        if self.max_pages == 0 || self.max_pages > MAX_PAGES_PER_PASS {
            return Err(ScanLimitsError::MaxPages);
        }
        if self.max_dispatch == 0 || self.max_dispatch > MAX_DISPATCH_PER_PASS {
            return Err(ScanLimitsError::MaxDispatch);
        }
        Ok(())
    }
}

/// A read-only page query: `ORDER BY host LIMIT limit OFFSET offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageQuery {
    pub offset: u64,
    pub limit: u32,
}

/// One row of a page: the candidate and its measured target (if known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CandidateRow {
    pub candidate: CandidateView,
    pub target: Option<TargetView>,
}

/// The verdict on one examined host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Decision {
    pub host: HostId,
    pub verdict: Result<HandoffRequest, Ineligible>,
}

/// HO-S1 / HO-S2: one read-only selection pass. Drive it with `next_query` / `take_page`
/// until `next_query` is `None`, then persist `finish()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SelectionPass {
    limits: ScanLimits,
    total: u64,
    position: u64,
    examined: u64,
    pages_read: u32,
    dispatched: u32,
}

impl SelectionPass {
    /// Start at the persisted cursor (taken modulo the current list length).
    pub fn begin(
        cursor: PageCursor,
        total_hosts: u64,
        limits: ScanLimits,
    ) -> Result<SelectionPass, ScanLimitsError> {
        limits.validate()?;
        let position = if total_hosts == 0 {
            0
        } else {
            cursor.offset % total_hosts
        };
        Ok(SelectionPass {
            limits,
            total: total_hosts,
            position,
            examined: 0,
            pages_read: 0,
            dispatched: 0,
        })
    }

    /// The next page to read, or `None` when the pass is over (whole list seen, page budget
    /// or dispatch budget spent). A page never crosses the end of the list; the next one
    /// wraps to offset 0 within the same pass.
    #[must_use]
    pub fn next_query(&self) -> Option<PageQuery> {
        if self.examined >= self.total
            || self.pages_read >= self.limits.max_pages
            || self.dispatched >= self.limits.max_dispatch
        {
            return None;
        }
        let room = (self.total - self.position).min(self.total - self.examined);
        let limit = u64::from(self.limits.page_size).min(room);
        debug_assert!(limit > 0);
        Some(PageQuery {
            offset: self.position,
            limit: u32::try_from(limit).unwrap_or(self.limits.page_size),
        })
    }

    /// Evaluate the rows of the page answered for `next_query()`, in order. Stops early when
    /// the dispatch budget is spent (the rest of the page comes first next pass).
    pub fn take_page(
        &mut self,
        now: MonoMs,
        director: &DirectorPolicy,
        rows: &[CandidateRow],
    ) -> Vec<Decision> {
        let Some(query) = self.next_query() else {
            return Vec::new();
        };
        self.pages_read += 1;
        let expected = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let mut decisions = Vec::new();
        for row in rows.iter().take(expected) {
            if self.dispatched >= self.limits.max_dispatch {
                break;
            }
            let verdict = evaluate(now, director, &row.candidate, row.target.as_ref());
            if verdict.is_ok() {
                self.dispatched += 1;
            }
            decisions.push(Decision {
                host: row.candidate.authority.host,
                verdict,
            });
            self.examined += 1;
            self.position = (self.position + 1) % self.total;
        }
        if rows.len() < expected {
            // The list shrank under us: what we saw is all there is up to here.
            self.total = query.offset + rows.len() as u64;
            self.position = 0;
            self.examined = self.examined.min(self.total);
        }
        debug_assert!(self.examined <= self.total.max(1));
        decisions
    }

    /// The cursor for the next pass: just after the last examined host.
    #[must_use]
    pub fn finish(&self) -> PageCursor {
        PageCursor {
            offset: self.position,
        }
    }

    #[must_use]
    pub fn dispatched(&self) -> u32 {
        self.dispatched
    }
}

/// How the director classifies the answer to a dispatched request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DispatchClass {
    /// HO-S2: busy (or in progress): a deferral; the rotation reaches the host again.
    Deferred,
    /// A durable result arrived.
    Finished,
    /// Superseded or refused: refresh the view, no failure.
    Skipped,
    /// Transport failure: consumes the dispatch-failure budget (retry uses the same op id).
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DispatchOutcome {
    Answered(HandoffReply),
    TransportFailed,
}

/// HO-S2: the dispatch-failure budget. `Busy` never consumes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DispatchBudget {
    failures_left: u32,
}

impl DispatchBudget {
    #[must_use]
    pub fn new(max_failures: u32) -> DispatchBudget {
        DispatchBudget {
            failures_left: max_failures,
        }
    }

    #[must_use]
    pub fn failures_left(&self) -> u32 {
        self.failures_left
    }

    #[must_use]
    pub fn exhausted(&self) -> bool {
        self.failures_left == 0
    }

    /// Record one dispatch outcome; only a transport failure spends budget.
    pub fn record(&mut self, outcome: &DispatchOutcome) -> DispatchClass {
        let class = match outcome {
            DispatchOutcome::TransportFailed => DispatchClass::Failed,
            DispatchOutcome::Answered(reply) => match reply {
                HandoffReply::Busy { .. } | HandoffReply::InProgress { .. } => {
                    DispatchClass::Deferred
                }
                HandoffReply::Result(_) => DispatchClass::Finished,
                HandoffReply::Superseded { .. } | HandoffReply::Refused { .. } => {
                    DispatchClass::Skipped
                }
            },
        };
        if class == DispatchClass::Failed {
            self.failures_left = self.failures_left.saturating_sub(1);
        }
        class
    }
}
