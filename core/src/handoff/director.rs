//! Director side: pure eligibility (HO-3, HO-C1), read-only candidate selection over keyset
//! pages from a persisted cursor that wraps around the host list (HO-S1, HO-S2 fairness,
//! SCALE-3), and the dispatch-failure budget that busy answers never consume (HO-S2).

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
    /// HO-L3: the end of the target cell's lease in the store (zero: never leased, a setup
    /// row). The director skips a target whose lease has lapsed.
    #[serde(default)]
    pub lease_until: MonoMs,
}

/// HO-3 / HO-C1 / HO-S1: pure eligibility. Returns the request to send (op id derived from
/// the exact authority and target) or the named reason to skip. Reserves nothing. The
/// decision is [`explain`]'s, without the numbers.
pub fn evaluate(
    now: MonoMs,
    director: &DirectorPolicy,
    candidate: &CandidateView,
    target: Option<&TargetView>,
) -> Result<HandoffRequest, Ineligible> {
    explain(now, director, candidate, target).0
}

/// EXPLAIN-1: HO-3's improvement, as the rule compares it: at least
/// [`MIN_IMPROVEMENT_MS`](policy::MIN_IMPROVEMENT_MS) ms and
/// [`MIN_IMPROVEMENT_PERCENT`](policy::MIN_IMPROVEMENT_PERCENT) % of the current RTT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Improvement {
    pub current_rtt_ms: u32,
    pub target_rtt_ms: u32,
    /// `current - target`, 0 when the target is not faster.
    pub improvement_ms: u64,
    /// `improvement_ms * 100 / current`, rounded down (below 20 exactly when the rule refuses).
    pub improvement_percent: u64,
}

impl Improvement {
    fn of(measurement: &Measurement) -> Improvement {
        let current = u64::from(measurement.current_rtt_ms);
        let gain = current.saturating_sub(u64::from(measurement.target_rtt_ms));
        Improvement {
            current_rtt_ms: measurement.current_rtt_ms,
            target_rtt_ms: measurement.target_rtt_ms,
            improvement_ms: gain,
            improvement_percent: (gain * 100).checked_div(current).unwrap_or(0),
        }
    }
}

/// EXPLAIN-1: the numbers behind one examined host's verdict: what the rule that decided
/// compared (or, for an eligible host, what every rule compared).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Evidence {
    /// The rule compares no number: the correction is off (HO-A5), there is no measurement,
    /// or the desktop did not negotiate the capability (HO-C1).
    Nothing,
    /// The cells involved: the target is the source cell, unknown, or one of them lacks the
    /// idle-handoff capability (HO-C1).
    Cells { source: CellId, target: CellId },
    /// HO-L3: the target's lease ended `lapsed_ms` ago (at `lease_until`).
    TargetLease {
        target: CellId,
        lease_until: MonoMs,
        lapsed_ms: u64,
    },
    /// HO-3: the host's cohort bucket against the configured percentage (in iff below).
    Cohort { bucket: u8, cohort_percent: u8 },
    /// HO-3: the measurement's age against the freshness window (fresh iff not above).
    Freshness { age_ms: u64, window_ms: u64 },
    /// The measurement is this far in the future.
    FromFuture { ahead_ms: u64 },
    /// HO-3: the improvement against 25 ms and 20 %.
    Improvement(Improvement),
    /// HO-3: the host moved recently; it may move again at `until`.
    Cooldown { until: MonoMs, left_ms: u64 },
    /// HO-3: the target's capacity used against its limit (room iff `load < capacity`).
    Capacity {
        target: CellId,
        load: u32,
        capacity: u32,
    },
    /// Eligible: the request goes to `target`; every rule's numbers.
    Eligible {
        target: CellId,
        bucket: u8,
        cohort_percent: u8,
        age_ms: u64,
        window_ms: u64,
        improvement: Improvement,
        load: u32,
        capacity: u32,
    },
}

/// HO-3 / HO-C1 / HO-S1 and EXPLAIN-1: the eligibility decision (the one [`evaluate`]
/// returns) together with the numbers the deciding rule compared. Pure; the checks run in the
/// order `evaluate` always applied them.
pub fn explain(
    now: MonoMs,
    director: &DirectorPolicy,
    candidate: &CandidateView,
    target: Option<&TargetView>,
) -> (Result<HandoffRequest, Ineligible>, Evidence) {
    if !director.enabled {
        return (Err(Ineligible::Disabled), Evidence::Nothing);
    }
    let Some((target_cell, measurement)) = candidate.measurement else {
        return (Err(Ineligible::NoMeasurement), Evidence::Nothing);
    };
    let cells = Evidence::Cells {
        source: candidate.authority.cell,
        target: target_cell,
    };
    if target_cell == candidate.authority.cell {
        return (Err(Ineligible::SameCell), cells);
    }
    let Some(target) = target.filter(|t| t.cell == target_cell) else {
        return (Err(Ineligible::UnknownTarget), cells);
    };
    if let Err(why) = policy::check_capabilities(
        candidate.source_cell_capable,
        target.capable,
        candidate.desktop_capable,
    ) {
        let evidence = match why {
            Ineligible::DesktopNotCapable => Evidence::Nothing,
            _ => cells,
        };
        return (Err(why), evidence);
    }
    if let Err(why) = policy::check_target_live(now, target.lease_until) {
        return (
            Err(why),
            Evidence::TargetLease {
                target: target_cell,
                lease_until: target.lease_until,
                lapsed_ms: now.since_ms(target.lease_until),
            },
        );
    }
    let host = candidate.authority.host;
    let bucket = policy::cohort_bucket(host);
    let cohort_percent = director.cohort_percent;
    if let Err(why) = policy::check_cohort(host, cohort_percent) {
        return (
            Err(why),
            Evidence::Cohort {
                bucket,
                cohort_percent,
            },
        );
    }
    let window_ms = director.policy.freshness_window_ms;
    let age_ms = now.since_ms(measurement.measured_at);
    if let Err(why) = policy::check_freshness(now, &measurement, window_ms) {
        let evidence = match why {
            Ineligible::MeasurementFromFuture => Evidence::FromFuture {
                ahead_ms: measurement.measured_at.since_ms(now),
            },
            _ => Evidence::Freshness { age_ms, window_ms },
        };
        return (Err(why), evidence);
    }
    let improvement = Improvement::of(&measurement);
    if let Err(why) =
        policy::check_improvement(measurement.current_rtt_ms, measurement.target_rtt_ms)
    {
        return (Err(why), Evidence::Improvement(improvement));
    }
    if let Err(why) = policy::check_cooldown(now, candidate.cooldown_until) {
        let until = candidate.cooldown_until.unwrap_or(now);
        return (
            Err(why),
            Evidence::Cooldown {
                until,
                left_ms: until.since_ms(now),
            },
        );
    }
    if let Err(why) = policy::check_capacity(target.load, target.capacity) {
        return (
            Err(why),
            Evidence::Capacity {
                target: target_cell,
                load: target.load,
                capacity: target.capacity,
            },
        );
    }
    (
        Ok(HandoffRequest::new(
            candidate.authority,
            target_cell,
            cohort_percent,
            measurement,
        )),
        Evidence::Eligible {
            target: target_cell,
            bucket,
            cohort_percent,
            age_ms,
            window_ms,
            improvement,
            load: target.load,
            capacity: target.capacity,
        },
    )
}

/// EXPLAIN-1: the prefix of `director --explain`'s lines (one per examined host).
pub const EXPLAIN_PREFIX: &str = "[handoff-explain]";

/// EXPLAIN-1: one examined host's line: `[handoff-explain] host=<id> ineligible
/// rule=<name> <numbers>` (the rule's stable name, as the report's `ineligible` keys; each
/// comparison as `value<limit` or `value>=limit`), or `... eligible target=<cell> <numbers>`.
#[must_use]
pub fn explain_line(decision: &Decision) -> String {
    use std::fmt::Write;
    let mut line = format!("{EXPLAIN_PREFIX} host={}", decision.host.0);
    // Writing into a String cannot fail.
    let _ = match decision.verdict {
        Err(why) => write!(line, " ineligible rule={}", why.name()),
        Ok(_) => write!(line, " eligible"),
    };
    let cmp = |value: u64, limit: u64| if value < limit { "<" } else { ">=" };
    let _ = match decision.evidence {
        Evidence::Nothing => Ok(()),
        Evidence::Cells { source, target } => {
            write!(line, " source_cell={} target_cell={}", source.0, target.0)
        }
        Evidence::TargetLease {
            target,
            lease_until,
            lapsed_ms,
        } => write!(
            line,
            " target_cell={} lease_until_ms={} lapsed_ms={lapsed_ms}",
            target.0,
            lease_until.as_ms()
        ),
        Evidence::Cohort {
            bucket,
            cohort_percent,
        } => write!(
            line,
            " cohort_bucket={bucket}{}cohort_percent={cohort_percent}",
            cmp(u64::from(bucket), u64::from(cohort_percent))
        ),
        Evidence::Freshness { age_ms, window_ms } => write!(
            line,
            " age_ms={age_ms}{}freshness_window_ms={window_ms}",
            if age_ms > window_ms { ">" } else { "<=" }
        ),
        Evidence::FromFuture { ahead_ms } => write!(line, " measured_ahead_ms={ahead_ms}"),
        Evidence::Improvement(i) => write_improvement(&mut line, &i),
        Evidence::Cooldown { until, left_ms } => {
            write!(
                line,
                " cooldown_until_ms={} left_ms={left_ms}",
                until.as_ms()
            )
        }
        Evidence::Capacity {
            target,
            load,
            capacity,
        } => write!(
            line,
            " target_cell={} capacity_used={load}/{capacity}",
            target.0
        ),
        Evidence::Eligible {
            target,
            bucket,
            cohort_percent,
            age_ms,
            window_ms,
            improvement,
            load,
            capacity,
        } => {
            let _ = write!(line, " target_cell={}", target.0);
            let _ = write_improvement(&mut line, &improvement);
            write!(
                line,
                " cohort_bucket={bucket}<cohort_percent={cohort_percent} age_ms={age_ms}<=freshness_window_ms={window_ms} capacity_used={load}/{capacity}"
            )
        }
    };
    line
}

fn write_improvement(line: &mut String, i: &Improvement) -> std::fmt::Result {
    use std::fmt::Write;
    let min_ms = u64::from(policy::MIN_IMPROVEMENT_MS);
    let min_percent = u64::from(policy::MIN_IMPROVEMENT_PERCENT);
    let cmp = |value: u64, limit: u64| if value < limit { "<" } else { ">=" };
    write!(
        line,
        " current_rtt_ms={} target_rtt_ms={} improvement_ms={}{}{min_ms} improvement_percent={}{}{min_percent}",
        i.current_rtt_ms,
        i.target_rtt_ms,
        i.improvement_ms,
        cmp(i.improvement_ms, min_ms),
        i.improvement_percent,
        cmp(i.improvement_percent, min_percent),
    )
}

/// HO-S2 / SCALE-3: the persisted position of a director's sweep over the host list (ordered
/// by host id): the last host examined, `None` for the start of the list. Each pass starts
/// just after it, so hosts that keep answering busy never hold the front of the list; being a
/// key, not an offset, the next page costs the same wherever the sweep is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct PageCursor {
    pub after: Option<HostId>,
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

/// SCALE-3: a read-only keyset page query: the rows with `after < host <= through` (`None`:
/// unbounded on that side), `ORDER BY host LIMIT limit`. No offset: the store seeks to
/// `after` through its index, so a late page costs what the first one does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageQuery {
    pub after: Option<HostId>,
    pub through: Option<HostId>,
    pub limit: u32,
}

impl PageQuery {
    /// Whether `host` lies in the query's range.
    #[must_use]
    pub fn contains(&self, host: HostId) -> bool {
        self.after.is_none_or(|a| host > a) && self.through.is_none_or(|t| host <= t)
    }
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
    /// EXPLAIN-1: the numbers the verdict rests on ([`explain_line`] prints them).
    pub evidence: Evidence,
}

/// HO-S1 / HO-S2 / SCALE-3: one read-only selection pass over keyset pages. Drive it with
/// `poll_query` / `handle_page` until `poll_query` is `None`, persisting `cursor()` after every
/// page; a page whose read failed is reported with `handle_page_failed` (the pass ends, the cursor
/// stays, so the next pass starts with that very page).
///
/// The pass reads from its starting cursor to the end of the list; a short page (fewer rows
/// than asked) is the end: the sweep is complete and the pass wraps to the start, reading on
/// `through` its starting cursor, so no host is examined twice in one pass. It ends when that
/// wrapped segment comes back short or reaches the starting cursor, or when the page budget or
/// the dispatch budget is spent. A pass that starts at the start of the list ends at its first
/// short page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SelectionPass {
    limits: ScanLimits,
    /// Where the pass began: the wrapped segment stops there.
    start: Option<HostId>,
    /// The last host examined (or the segment's start): what `cursor()` persists.
    position: Option<HostId>,
    /// Past the end of the list, reading from the start `through` `start`.
    wrapped: bool,
    over: bool,
    examined: u64,
    pages_read: u32,
    dispatched: u32,
    sweeps_completed: u32,
    rejected_rows: u32,
}

impl SelectionPass {
    /// Start just after the persisted cursor. No host count: a page coming back short is how
    /// the pass learns where the list ends.
    pub fn begin(cursor: PageCursor, limits: ScanLimits) -> Result<SelectionPass, ScanLimitsError> {
        limits.validate()?;
        Ok(SelectionPass {
            limits,
            start: cursor.after,
            position: cursor.after,
            wrapped: false,
            over: false,
            examined: 0,
            pages_read: 0,
            dispatched: 0,
            sweeps_completed: 0,
            rejected_rows: 0,
        })
    }

    /// The next page to read, or `None` when the pass is over (the sweep came back to where
    /// the pass began, a page read failed, the page budget or the dispatch budget is spent).
    #[must_use]
    pub fn poll_query(&self) -> Option<PageQuery> {
        if self.over
            || self.pages_read >= self.limits.max_pages
            || self.dispatched >= self.limits.max_dispatch
        {
            return None;
        }
        Some(PageQuery {
            after: self.position,
            through: if self.wrapped { self.start } else { None },
            limit: self.limits.page_size,
        })
    }

    /// Evaluate the rows of the page answered for `poll_query()`, in order. Stops early when
    /// the dispatch budget is spent (the rest of the page comes first next pass). Rows the
    /// store should not have returned (out of the query's range, not strictly increasing,
    /// beyond its limit) are external input gone wrong: skipped and counted
    /// (`rejected_rows`), never examined.
    pub fn handle_page(
        &mut self,
        now: MonoMs,
        director: &DirectorPolicy,
        rows: &[CandidateRow],
    ) -> Vec<Decision> {
        let Some(query) = self.poll_query() else {
            return Vec::new();
        };
        self.pages_read += 1;
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let mut last = query.after;
        let mut stopped_early = false;
        let mut decisions = Vec::new();
        for row in rows.iter().take(limit) {
            if self.dispatched >= self.limits.max_dispatch {
                stopped_early = true;
                break;
            }
            let host = row.candidate.authority.host;
            // `last` starts at `after`: in order implies in the range's lower side.
            let in_order = last.is_none_or(|l| host > l);
            if !in_order || !query.contains(host) {
                self.rejected_rows = self.rejected_rows.saturating_add(1);
                continue;
            }
            let (verdict, evidence) = explain(now, director, &row.candidate, row.target.as_ref());
            if verdict.is_ok() {
                self.dispatched += 1;
            }
            decisions.push(Decision {
                host,
                verdict,
                evidence,
            });
            crate::invariant!(last.is_none_or(|l| host > l), "keys strictly increase");
            last = Some(host);
            self.examined += 1;
        }
        let overflow = u32::try_from(rows.len().saturating_sub(limit)).unwrap_or(u32::MAX);
        self.rejected_rows = self.rejected_rows.saturating_add(overflow);
        self.position = last;
        if !stopped_early && rows.len() < limit {
            // Short: nothing more in the range (what the store had when it answered).
            if self.wrapped {
                // Everything up to the pass's start has been examined.
                self.position = query.through;
                self.over = true;
            } else {
                // The end of the list: the sweep is complete; on from the start.
                self.sweeps_completed += 1;
                self.position = None;
                if self.start.is_none() {
                    self.over = true;
                } else {
                    self.wrapped = true;
                }
            }
        } else if self.wrapped && self.position == self.start {
            // The wrapped segment reached the pass's start: no page left to read.
            self.over = true;
        }
        crate::invariant!(
            self.examined <= u64::from(self.pages_read) * u64::from(self.limits.page_size),
            "at most a page size per page"
        );
        crate::invariant!(
            !self.wrapped
                || self
                    .start
                    .is_some_and(|s| self.position.is_none_or(|p| p <= s)),
            "the wrapped segment never passes the pass's start"
        );
        decisions
    }

    /// The page answered for `poll_query()` could not be read: the pass ends here and the
    /// cursor stays where it is, so the next pass starts with this very page.
    pub fn handle_page_failed(&mut self) {
        self.over = true;
    }

    /// The position to persist now (after every page): just after the last examined host.
    #[must_use]
    pub fn cursor(&self) -> PageCursor {
        PageCursor {
            after: self.position,
        }
    }

    /// The cursor for the next pass (the same as `cursor()` once the pass is over).
    #[must_use]
    pub fn finish(&self) -> PageCursor {
        self.cursor()
    }

    #[must_use]
    pub fn dispatched(&self) -> u32 {
        self.dispatched
    }

    /// Hosts examined (each one at most once per pass).
    #[must_use]
    pub fn examined(&self) -> u64 {
        self.examined
    }

    #[must_use]
    pub fn pages_read(&self) -> u32 {
        self.pages_read
    }

    /// How many times this pass passed the end of the list (a sweep completed): 0 or 1.
    #[must_use]
    pub fn sweeps_completed(&self) -> u32 {
        self.sweeps_completed
    }

    /// Rows skipped as the store's mistake (out of range, out of order, beyond the limit).
    #[must_use]
    pub fn rejected_rows(&self) -> u32 {
        self.rejected_rows
    }
}

/// How the director classifies the answer to a dispatched request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DispatchClass {
    /// HO-S2: busy (or in progress): a deferral; the sweep reaches the host again.
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

    /// HO-S2: what the director does with one examined host's decision: send its request, or
    /// count why it is not moved. Once the failure budget is spent, an eligible host is held
    /// for a later pass (not sent, not a failure: the sweep reaches it again).
    #[must_use]
    pub fn dispatch(&self, decision: &Decision) -> Dispatch {
        match decision.verdict {
            Err(why) => Dispatch::Ineligible(why),
            Ok(_) if self.exhausted() => Dispatch::Held,
            Ok(request) => Dispatch::Send(request),
        }
    }

    /// Record one dispatch outcome; only a transport failure spends budget.
    pub fn handle_outcome(&mut self, outcome: &DispatchOutcome) -> DispatchClass {
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

/// HO-S2: the director's decision for one examined host ([`DispatchBudget::dispatch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dispatch {
    /// Send this request, then [`DispatchBudget::handle_outcome`] its outcome.
    Send(HandoffRequest),
    /// Not eligible: counted by reason, nothing sent.
    Ineligible(Ineligible),
    /// Eligible, but this pass's failure budget is spent: not sent this pass.
    Held,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::admission::QuiescenceCounters;
    use crate::handoff::ids::{Epoch, Generation, Incarnation};

    fn decision(verdict: Result<HandoffRequest, Ineligible>) -> Decision {
        Decision {
            host: HostId(7),
            verdict,
            evidence: Evidence::Nothing,
        }
    }

    /// HO-S2: the director sends an eligible host's request until the pass's failure budget
    /// is spent, then holds it for a later pass; an ineligible host is never sent; a `Busy`
    /// answer defers and spends nothing, so it never turns a send into a hold.
    #[test]
    fn ho_s2_dispatch_sends_until_failures_spend_the_budget_and_busy_never_holds() {
        let source = SourceAuthority {
            cell: CellId(1),
            host: HostId(7),
            epoch: Epoch(1),
            incarnation: Incarnation(1),
            generation: Generation(1),
        };
        let measurement = Measurement {
            measured_at: MonoMs::ZERO,
            current_rtt_ms: 120,
            target_rtt_ms: 60,
        };
        let req = HandoffRequest::new(source, CellId(2), 100, measurement);
        let eligible = decision(Ok(req));
        let ineligible = decision(Err(Ineligible::NoMeasurement));
        let mut budget = DispatchBudget::new(1);
        assert_eq!(budget.dispatch(&eligible), Dispatch::Send(req));
        assert_eq!(
            budget.dispatch(&ineligible),
            Dispatch::Ineligible(Ineligible::NoMeasurement)
        );
        let busy = DispatchOutcome::Answered(HandoffReply::Busy {
            op_id: req.op_id,
            counters: QuiescenceCounters {
                client_conns: 1,
                ..QuiescenceCounters::default()
            },
        });
        for _ in 0..3 {
            assert_eq!(budget.handle_outcome(&busy), DispatchClass::Deferred);
            assert_eq!(budget.dispatch(&eligible), Dispatch::Send(req));
        }
        assert_eq!(
            budget.handle_outcome(&DispatchOutcome::TransportFailed),
            DispatchClass::Failed
        );
        assert_eq!(budget.dispatch(&eligible), Dispatch::Held);
        assert_eq!(
            budget.dispatch(&ineligible),
            Dispatch::Ineligible(Ineligible::NoMeasurement),
            "an ineligible host is counted by reason, budget or not"
        );
    }
}
