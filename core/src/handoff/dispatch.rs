//! HO-L3 / SCALE-6: the director's concurrent dispatch, as pure decisions. The director reads
//! keyset pages ([`super::director::SelectionPass`]) and hands each page's requests to a
//! [`Dispatcher`], which decides which request is sent next (bounded in total and per source
//! cell), which source cell is backed off after it timed out or refused (exponential, bounded,
//! on its own: the other cells go on), and when the pass's cursor may move: past a page only
//! once every dispatch of that page and of every page before it has ended. The adapter runs
//! the sends and feeds each one's end back; it decides nothing.
//!
//! A backed-off cell gets no request until its backoff ends; then one request (a probe) is
//! sent and the others still skip it until that probe answers. A probe that fails doubles the
//! backoff (up to the maximum); any answer ends the backoff. A skipped host is not a failure:
//! the sweep reaches it again (its request keeps its op id). [`CellChange`] reports each change
//! of a cell's state once (OPS-2: one WARN when it becomes stuck, one INFO when it recovers).
//! A graceful stop ([`Dispatcher::handle_stop`]) drops what is queued and lets what is in
//! flight end; the cursor never moves past a page with a dropped request (OPS-1).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::director::PageCursor;
use super::director_watch::RefusalReason;
use super::ids::CellId;
use super::policy::HandoffRequest;
use crate::MonoMs;

/// The highest accepted `max_in_flight` (and per-cell bound).
pub const MAX_IN_FLIGHT: u32 = 10_000;
/// The most pages read ahead of the cursor's page.
pub const MAX_PAGES_AHEAD: u32 = 1_000;
/// The longest accepted backoff of a cell (one day).
pub const MAX_BACKOFF_MS: u64 = 86_400_000;

/// SCALE-6 / HO-L3: the bounds of concurrent dispatch (each a director flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DispatchLimits {
    /// Requests in flight at once, all cells together.
    pub max_in_flight: u32,
    /// Requests in flight at once to one source cell.
    pub max_in_flight_per_cell: u32,
    /// Pages read whose dispatches have not all ended (the cursor's page included).
    pub max_pages_ahead: u32,
    /// A cell's first backoff; each failed probe doubles it.
    pub backoff_min_ms: u64,
    /// The longest backoff.
    pub backoff_max_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DispatchLimitsError {
    MaxInFlight,
    MaxInFlightPerCell,
    MaxPagesAhead,
    Backoff,
}

impl DispatchLimits {
    /// The director's defaults (its flags'): 64 requests in flight, 4 per source cell, 4 pages
    /// ahead, a stuck cell backed off for 1 s doubling to 60 s.
    pub const DEFAULT: DispatchLimits = DispatchLimits {
        max_in_flight: 64,
        max_in_flight_per_cell: 4,
        max_pages_ahead: 4,
        backoff_min_ms: 1_000,
        backoff_max_ms: 60_000,
    };

    /// One request at a time, one page at a time (what the director did before HO-L3).
    pub const SEQUENTIAL: DispatchLimits = DispatchLimits {
        max_in_flight: 1,
        max_in_flight_per_cell: 1,
        max_pages_ahead: 1,
        ..DispatchLimits::DEFAULT
    };

    pub fn validate(&self) -> Result<(), DispatchLimitsError> {
        if self.max_in_flight == 0 || self.max_in_flight > MAX_IN_FLIGHT {
            return Err(DispatchLimitsError::MaxInFlight);
        }
        if self.max_in_flight_per_cell == 0 || self.max_in_flight_per_cell > MAX_IN_FLIGHT {
            return Err(DispatchLimitsError::MaxInFlightPerCell);
        }
        if self.max_pages_ahead == 0 || self.max_pages_ahead > MAX_PAGES_AHEAD {
            return Err(DispatchLimitsError::MaxPagesAhead);
        }
        if self.backoff_min_ms == 0
            || self.backoff_max_ms < self.backoff_min_ms
            || self.backoff_max_ms > MAX_BACKOFF_MS
        {
            return Err(DispatchLimitsError::Backoff);
        }
        Ok(())
    }
}

/// Why a dispatch to a source cell failed (what the cell's backoff is for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CellFailure {
    /// No answer within the request timeout.
    Timeout,
    /// The cell answered with a refusal (an HTTP error status: a signature, key or clock
    /// refusal, an overload), and why (the cell's word, bounded).
    Refused(RefusalReason),
    /// The connection failed, or the answer was unreadable.
    Unreachable,
    /// The store names no address (or no process) for the cell.
    NoAddress,
}

impl CellFailure {
    /// Stable snake_case name (metrics labels, logs).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            CellFailure::Timeout => "timeout",
            CellFailure::Refused(_) => "refused",
            CellFailure::Unreachable => "unreachable",
            CellFailure::NoAddress => "no_address",
        }
    }

    /// A refusal's reason (the cell's word), if this is one.
    #[must_use]
    pub fn refusal(self) -> Option<RefusalReason> {
        match self {
            CellFailure::Refused(why) => Some(why),
            _ => None,
        }
    }

    /// `refused: stale_timestamp`, `timeout`, ...: the name and the refusal's reason.
    #[must_use]
    pub fn label(self) -> String {
        match self {
            CellFailure::Refused(why) => format!("refused: {}", why.name()),
            other => other.name().to_owned(),
        }
    }
}

/// A change of a source cell's state (OPS-2: each reported once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CellChange {
    /// The cell failed: backed off until `until`, the others go on.
    Stuck {
        cell: CellId,
        reason: CellFailure,
        until: MonoMs,
    },
    /// A request to the stuck cell was answered: it is dispatched to again.
    Recovered { cell: CellId, failures: u32 },
}

/// A backed-off source cell, as the director shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CellBackoff {
    /// When the cell first failed (this episode).
    pub since: MonoMs,
    /// No request before this; then one probe.
    pub until: MonoMs,
    /// Failures of this episode: the first, then each failed probe.
    pub failures: u32,
    /// The last failure's reason.
    pub reason: CellFailure,
}

/// Identifies one page handed to the dispatcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PageId(pub u64);

/// Identifies one sent request until its end is fed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DispatchTicket(pub u64);

/// What [`Dispatcher::handle_page`] did with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Admit {
    /// Queued: [`Dispatcher::poll_send`] sends it.
    Queued,
    /// Its source cell is backed off: not sent this pass (the sweep reaches the host again).
    CellBackedOff { cell: CellId },
}

/// What the adapter does next ([`Dispatcher::poll_send`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DispatchNext {
    /// Send this request; feed its end to [`Dispatcher::handle_ended`] with the ticket.
    Send(DispatchTicket, HandoffRequest),
    /// Queued before its source cell was backed off: not sent this pass.
    Skip(HandoffRequest),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Page {
    id: PageId,
    /// What the cursor becomes once this page and every page before it have ended.
    cursor: PageCursor,
    /// Requests queued or in flight.
    open: u32,
    /// A request of it was dropped unsent ([`Dispatcher::handle_stop`]): the cursor never
    /// moves past it (the next pass reads it again).
    abandoned: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Flight {
    cell: CellId,
    page: PageId,
    /// Sent to a backed-off cell after its backoff ended.
    probe: bool,
}

/// HO-L3 / SCALE-6: the director's dispatch state across passes (the backoffs outlive a pass;
/// a pass ends with the dispatcher [`idle`](Self::idle)).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dispatcher {
    limits: DispatchLimits,
    queue: VecDeque<(PageId, HandoffRequest)>,
    flights: BTreeMap<DispatchTicket, Flight>,
    per_cell: BTreeMap<CellId, u32>,
    backoffs: BTreeMap<CellId, CellBackoff>,
    pages: VecDeque<Page>,
    next_page: u64,
    next_ticket: u64,
}

impl Dispatcher {
    pub fn new(limits: DispatchLimits) -> Result<Dispatcher, DispatchLimitsError> {
        limits.validate()?;
        Ok(Dispatcher {
            limits,
            queue: VecDeque::new(),
            flights: BTreeMap::new(),
            per_cell: BTreeMap::new(),
            backoffs: BTreeMap::new(),
            pages: VecDeque::new(),
            next_page: 0,
            next_ticket: 0,
        })
    }

    #[must_use]
    pub fn limits(&self) -> &DispatchLimits {
        &self.limits
    }

    /// Whether another page may be read now: fewer than `max_pages_ahead` pages have
    /// dispatches that did not all end.
    #[must_use]
    pub fn may_read_page(&self) -> bool {
        self.pages.len() < usize::try_from(self.limits.max_pages_ahead).unwrap_or(usize::MAX)
    }

    /// Whether nothing is queued or in flight (a pass may end).
    #[must_use]
    pub fn idle(&self) -> bool {
        self.queue.is_empty() && self.flights.is_empty()
    }

    #[must_use]
    pub fn in_flight(&self) -> u32 {
        u32::try_from(self.flights.len()).unwrap_or(u32::MAX)
    }

    /// The backed-off cells.
    #[must_use]
    pub fn backoffs(&self) -> &BTreeMap<CellId, CellBackoff> {
        &self.backoffs
    }

    /// A request to `cell` must not be sent now: it is backed off and either its backoff
    /// runs or its probe is in flight.
    fn holds_back(&self, now: MonoMs, cell: CellId) -> bool {
        self.backoffs
            .get(&cell)
            .is_some_and(|b| now < b.until || self.per_cell.get(&cell).copied().unwrap_or(0) > 0)
    }

    /// A page read: its requests (in the order examined) and the cursor it ends at. The
    /// cursor moves there once every request of this page and of the pages before it has
    /// ended ([`poll_cursor`](Self::poll_cursor)).
    pub fn handle_page(
        &mut self,
        now: MonoMs,
        cursor: PageCursor,
        requests: &[HandoffRequest],
    ) -> (PageId, Vec<Admit>) {
        let id = PageId(self.next_page);
        self.next_page += 1;
        let mut open = 0u32;
        let mut admits = Vec::with_capacity(requests.len());
        for req in requests {
            let cell = req.source.cell;
            if self.holds_back(now, cell) {
                admits.push(Admit::CellBackedOff { cell });
            } else {
                self.queue.push_back((id, *req));
                open += 1;
                admits.push(Admit::Queued);
            }
        }
        self.pages.push_back(Page {
            id,
            cursor,
            open,
            abandoned: false,
        });
        (id, admits)
    }

    /// The next request to send (the first queued one whose cell has room, while the total
    /// has room), or a queued request whose cell was backed off since (skipped); `None` when
    /// nothing can go now.
    pub fn poll_send(&mut self, now: MonoMs) -> Option<DispatchNext> {
        let total_room =
            self.flights.len() < usize::try_from(self.limits.max_in_flight).unwrap_or(usize::MAX);
        let mut pick = None;
        for (i, (_, req)) in self.queue.iter().enumerate() {
            let cell = req.source.cell;
            if self.holds_back(now, cell) {
                pick = Some((i, false));
                break;
            }
            let busy = self.per_cell.get(&cell).copied().unwrap_or(0);
            if total_room && busy < self.limits.max_in_flight_per_cell {
                pick = Some((i, true));
                break;
            }
        }
        let (i, send) = pick?;
        let (page, req) = self.queue.remove(i)?;
        if !send {
            self.close(page);
            return Some(DispatchNext::Skip(req));
        }
        let cell = req.source.cell;
        let ticket = DispatchTicket(self.next_ticket);
        self.next_ticket += 1;
        let probe = self.backoffs.contains_key(&cell);
        self.flights.insert(ticket, Flight { cell, page, probe });
        *self.per_cell.entry(cell).or_default() += 1;
        crate::invariant!(
            self.per_cell.get(&cell).copied().unwrap_or(0) <= self.limits.max_in_flight_per_cell
        );
        Some(DispatchNext::Send(ticket, req))
    }

    fn close(&mut self, page: PageId) {
        if let Some(p) = self.pages.iter_mut().find(|p| p.id == page) {
            p.open = p.open.saturating_sub(1);
        } else {
            crate::invariant!(false, "a request of an unknown page ended");
        }
    }

    /// A sent request ended: answered (`Ok`), or failed at its cell. Returns the cell's change
    /// of state, if any. A failure backs the cell off (the first for `backoff_min_ms`; a failed
    /// probe doubles it, up to `backoff_max_ms`); a failure of a request sent before the
    /// backoff began changes nothing more. An answer ends the cell's backoff.
    pub fn handle_ended(
        &mut self,
        now: MonoMs,
        ticket: DispatchTicket,
        result: Result<(), CellFailure>,
    ) -> Option<CellChange> {
        let Some(flight) = self.flights.remove(&ticket) else {
            crate::invariant!(false, "an unknown ticket ended");
            return None;
        };
        let cell = flight.cell;
        if let Some(n) = self.per_cell.get_mut(&cell) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_cell.remove(&cell);
            }
        }
        self.close(flight.page);
        match result {
            Ok(()) => self.backoffs.remove(&cell).map(|b| CellChange::Recovered {
                cell,
                failures: b.failures,
            }),
            Err(reason) => match self.backoffs.get_mut(&cell) {
                None => {
                    let until = now.plus_ms(self.limits.backoff_min_ms);
                    self.backoffs.insert(
                        cell,
                        CellBackoff {
                            since: now,
                            until,
                            failures: 1,
                            reason,
                        },
                    );
                    Some(CellChange::Stuck {
                        cell,
                        reason,
                        until,
                    })
                }
                Some(b) if flight.probe => {
                    b.failures = b.failures.saturating_add(1);
                    let shift = b.failures.saturating_sub(1).min(32);
                    let delay = self
                        .limits
                        .backoff_min_ms
                        .saturating_mul(1u64 << shift)
                        .min(self.limits.backoff_max_ms);
                    b.until = now.plus_ms(delay);
                    b.reason = reason;
                    None
                }
                Some(_) => None,
            },
        }
    }

    /// The cursor to save now, if it moved: the cursor of the last page that ended with every
    /// page before it (those pages are done with). `None`: no page completed since the last
    /// call.
    pub fn poll_cursor(&mut self) -> Option<PageCursor> {
        let mut cursor = None;
        while self
            .pages
            .front()
            .is_some_and(|p| p.open == 0 && !p.abandoned)
        {
            cursor = self.pages.pop_front().map(|p| p.cursor);
        }
        // A page whose requests were dropped unsent never completes: once nothing is in flight
        // it and every page after it are forgotten (the next pass reads them again).
        if self.flights.is_empty() && self.pages.front().is_some_and(|p| p.abandoned) {
            self.pages.clear();
        }
        cursor
    }

    /// The graceful stop: the queued requests are dropped unsent (returned); the requests in
    /// flight still end. The cursor then moves past the pages that completed before the first
    /// page with a dropped request, never past it: a stop ends a pass at a page boundary.
    pub fn handle_stop(&mut self) -> Vec<HandoffRequest> {
        let dropped: Vec<(PageId, HandoffRequest)> = self.queue.drain(..).collect();
        for (page, _) in &dropped {
            if let Some(p) = self.pages.iter_mut().find(|p| p.id == *page) {
                p.open = p.open.saturating_sub(1);
                p.abandoned = true;
            }
        }
        dropped.into_iter().map(|(_, r)| r).collect()
    }

    /// Pages read whose dispatches have not all ended.
    #[must_use]
    pub fn pages_open(&self) -> usize {
        self.pages.len()
    }
}
