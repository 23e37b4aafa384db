//! SCALE-3 (director sweep): the keyset selection pass over a host list that changes between
//! pages, with page reads that fail and directors that restart from the cursor saved after
//! every page (as the adapter does). Every host present throughout a sweep is examined at least
//! once in it; a failed page is read again from its own start, never from the start of the
//! failed pass; no host is examined twice in one pass; busy answers never spend the failure
//! budget, and an idle host behind any number of busy ones is dispatched within a bound of
//! passes (HO-S2 across page boundaries). Rows the store should not have returned are
//! skipped and counted, never a panic.

use std::collections::BTreeSet;
use std::ops::Bound;

use proptest::prelude::*;
use switchyard_core::handoff::HandoffReply;
use switchyard_core::handoff::QuiescenceCounters;
use switchyard_core::handoff::*;
use switchyard_core::handoff::{Measurement, PolicyConfig};
use switchyard_core::MonoMs;

const SRC: CellId = CellId(1);
const TGT: CellId = CellId(2);
const NOW: MonoMs = MonoMs(1_000_000);
/// Host ids are drawn from `0..ID_SPACE`.
const ID_SPACE: u64 = 40;

fn director() -> DirectorPolicy {
    DirectorPolicy {
        enabled: true,
        cohort_percent: 100,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 60_000,
        },
    }
}

/// An eligible candidate (or one cooling down, so ineligible).
fn row(host: u64, cooling: bool) -> CandidateRow {
    CandidateRow {
        candidate: CandidateView {
            authority: SourceAuthority {
                cell: SRC,
                host: HostId(host),
                epoch: Epoch(1),
                incarnation: Incarnation(1),
                generation: Generation(1),
            },
            source_cell_capable: true,
            desktop_capable: true,
            measurement: Some((
                TGT,
                Measurement {
                    measured_at: NOW,
                    current_rtt_ms: 120,
                    target_rtt_ms: 20,
                },
            )),
            cooldown_until: cooling.then_some(NOW.plus_ms(60_000)),
        },
        target: Some(TargetView {
            cell: TGT,
            capable: true,
            load: 0,
            capacity: u32::MAX,
            lease_until: MonoMs::ZERO,
        }),
    }
}

/// What an honest store answers: `after < host <= through`, by host, at most `limit` rows.
fn answer(hosts: &BTreeSet<u64>, q: PageQuery, cooling: &BTreeSet<u64>) -> Vec<CandidateRow> {
    let lo = q.after.map_or(Bound::Unbounded, |a| Bound::Excluded(a.0));
    let hi = q.through.map_or(Bound::Unbounded, |t| Bound::Included(t.0));
    if let (Some(a), Some(t)) = (q.after, q.through) {
        if a >= t {
            return Vec::new();
        }
    }
    hosts
        .range((lo, hi))
        .take(usize::try_from(q.limit).expect("limit"))
        .map(|h| row(*h, cooling.contains(h)))
        .collect()
}

fn busy(op_id: OpId) -> DispatchOutcome {
    DispatchOutcome::Answered(HandoffReply::Busy {
        op_id,
        counters: QuiescenceCounters {
            client_conns: 1,
            ..QuiescenceCounters::default()
        },
    })
}

fn limits_strategy() -> impl Strategy<Value = ScanLimits> {
    (1u32..8, 1u32..5, 1u32..12).prop_map(|(page_size, max_pages, max_dispatch)| ScanLimits {
        page_size,
        max_pages,
        max_dispatch,
    })
}

/// One thing that happens to the director or its world.
#[derive(Debug, Clone)]
enum Step {
    /// Read and take the next page (a new pass first, from the saved cursor, if none runs).
    Page,
    /// The next page's read fails.
    FailPage,
    /// The director process restarts: the pass in flight is gone, the saved cursor stays.
    Restart,
    Insert(u64),
    Remove(u64),
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => Just(Step::Page),
        2 => Just(Step::FailPage),
        1 => Just(Step::Restart),
        2 => (0..ID_SPACE).prop_map(Step::Insert),
        2 => (0..ID_SPACE).prop_map(Step::Remove),
    ]
}

/// What a run of steps showed.
#[derive(Debug, Default)]
struct Run {
    sweeps: u32,
    pages_ok: u32,
    failures: u32,
}

/// Drive a director through `steps` as the adapter does: the cursor saved after every page, a
/// failed page ends its pass with the cursor left alone, every eligible host answers busy.
fn drive(initial: &BTreeSet<u64>, limits: ScanLimits, steps: &[Step]) -> Result<Run, String> {
    let director = director();
    let mut hosts = initial.clone();
    let mut saved = PageCursor::default();
    let mut pass: Option<SelectionPass> = None;
    let mut in_pass: BTreeSet<u64> = BTreeSet::new();
    // The sweep in progress: hosts present since it began (and never removed), and the hosts
    // it has examined.
    let mut present_throughout = hosts.clone();
    let mut examined_in_sweep: BTreeSet<u64> = BTreeSet::new();
    let mut failed_at: Option<PageCursor> = None;
    let mut budget = DispatchBudget::new(3);
    let mut run = Run::default();
    let nobody_cooling = BTreeSet::new();
    for step in steps {
        match step {
            Step::Insert(h) => {
                hosts.insert(*h);
            }
            Step::Remove(h) => {
                hosts.remove(h);
                present_throughout.remove(h);
            }
            Step::Restart => pass = None,
            Step::Page | Step::FailPage => {
                if pass.as_ref().is_none_or(|p| p.poll_query().is_none()) {
                    let fresh =
                        SelectionPass::begin(saved, limits).map_err(|e| format!("{e:?}"))?;
                    let first = fresh.poll_query().ok_or("a new pass reads a page")?;
                    if first.after != saved.after || first.through.is_some() {
                        return Err(format!("a pass began at {first:?}, saved {saved:?}"));
                    }
                    if let Some(f) = failed_at.take() {
                        // SCALE-3: the very page that failed, not the failed pass's start.
                        if first.after != f.after {
                            return Err(format!(
                                "after a failed page at {f:?} the next pass read {first:?}"
                            ));
                        }
                    }
                    pass = Some(fresh);
                    in_pass.clear();
                }
                let p = pass.as_mut().ok_or("a pass")?;
                let q = p.poll_query().ok_or("a page to read")?;
                if matches!(step, Step::FailPage) {
                    p.handle_page_failed();
                    run.failures += 1;
                    if p.cursor() != saved || p.poll_query().is_some() {
                        return Err("a failed page moved the cursor or let the pass go on".into());
                    }
                    failed_at = Some(saved);
                    continue;
                }
                let before = p.sweeps_completed();
                let rows = answer(&hosts, q, &nobody_cooling);
                for d in p.handle_page(NOW, &director, &rows) {
                    if !q.contains(d.host) {
                        return Err(format!("{:?} examined outside {q:?}", d.host));
                    }
                    if !in_pass.insert(d.host.0) {
                        return Err(format!("{:?} examined twice in one pass", d.host));
                    }
                    examined_in_sweep.insert(d.host.0);
                    if let Ok(req) = d.verdict {
                        // HO-S2: busy is a deferral and never spends the failure budget.
                        if budget.handle_outcome(&busy(req.op_id)) != DispatchClass::Deferred {
                            return Err("busy was not a deferral".into());
                        }
                    }
                }
                if p.rejected_rows() != 0 {
                    return Err("an honest store's rows were rejected".into());
                }
                if p.sweeps_completed() > before {
                    run.sweeps += 1;
                    let missed: Vec<_> =
                        present_throughout.difference(&examined_in_sweep).collect();
                    if !missed.is_empty() {
                        return Err(format!("sweep {} missed {missed:?}", run.sweeps));
                    }
                    present_throughout = hosts.clone();
                    examined_in_sweep.clear();
                }
                run.pages_ok += 1;
                saved = p.cursor();
            }
        }
    }
    if budget.failures_left() != 3 {
        return Err("busy spent the failure budget".into());
    }
    Ok(run)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// SCALE-3: over a changing host list, page failures and restarts, every host present
    /// throughout a sweep is examined in it, a failed page is read again from its own start,
    /// no host twice in a pass, busy spends nothing; and sweeps do complete.
    #[test]
    fn scale_3_props_every_sweep_examines_every_host_and_failed_pages_resume_at_their_start(
        initial in prop::collection::btree_set(0..ID_SPACE, 0..30),
        limits in limits_strategy(),
        steps in prop::collection::vec(step_strategy(), 1..300),
    ) {
        let run = drive(&initial, limits, &steps).map_err(TestCaseError::fail)?;
        // Liveness: every successful page examines a host (the position moves on within the
        // id space) or wraps, bar at most one empty page that closes a pass's wrapped
        // segment, so a sweep completes at least every ID_SPACE + 2 successful pages.
        let per_sweep = u32::try_from(ID_SPACE).expect("small") + 2;
        prop_assert!(
            run.sweeps >= run.pages_ok / (per_sweep + 1),
            "{} sweeps in {} pages", run.sweeps, run.pages_ok
        );
    }

    /// SCALE-3 / HO-S2 across page boundaries: from any saved cursor, an idle eligible host
    /// behind any number of busy ones (any host ids, pages of any size, a few failed pages)
    /// is dispatched within a bound of passes; busy spends no failure budget.
    #[test]
    fn scale_3_props_an_idle_host_behind_busy_ones_is_reached_within_a_bound_of_passes(
        hosts in prop::collection::btree_set(0..1_000u64, 1..60),
        idle_pick in any::<prop::sample::Index>(),
        start in proptest::option::of(0..1_000u64),
        limits in limits_strategy(),
        failing_passes in prop::collection::btree_set(0..30usize, 0..4),
    ) {
        let list: Vec<u64> = hosts.iter().copied().collect();
        let idle = list[idle_pick.index(list.len())];
        let director = director();
        let per_pass = usize::try_from(limits.max_dispatch.min(limits.page_size * limits.max_pages))
            .expect("small");
        // Each two passes move the cursor on by `per_pass` hosts (one short page at the end
        // of the list at most per pass); a failed page costs its pass.
        let bound = 2 * list.len().div_ceil(per_pass) + 2 + failing_passes.len();
        let mut saved = PageCursor { after: start.map(HostId) };
        let mut budget = DispatchBudget::new(1);
        let mut reached_at = None;
        let none = BTreeSet::new();
        'passes: for pass_no in 0..bound {
            let mut pass = SelectionPass::begin(saved, limits).expect("limits");
            let mut page_no = 0;
            while let Some(q) = pass.poll_query() {
                if failing_passes.contains(&pass_no) && page_no == 1 {
                    pass.handle_page_failed();
                    break;
                }
                page_no += 1;
                for d in pass.handle_page(NOW, &director, &answer(&hosts, q, &none)) {
                    let Ok(req) = d.verdict else { continue };
                    if d.host.0 == idle {
                        reached_at = Some(pass_no);
                        break 'passes;
                    }
                    prop_assert_eq!(budget.handle_outcome(&busy(req.op_id)), DispatchClass::Deferred);
                }
                saved = pass.cursor();
            }
        }
        prop_assert!(reached_at.is_some(), "idle host {} starved for {} passes", idle, bound);
        prop_assert_eq!(budget.failures_left(), 1);
    }

    /// SCALE-3: rows the store should not have returned (out of the query's range, repeated,
    /// out of order, beyond the limit) are skipped and counted, deterministically; what is
    /// examined is strictly increasing and inside the range; never a panic.
    #[test]
    fn scale_3_props_rows_out_of_range_or_order_are_skipped_and_counted(
        start in proptest::option::of(0..50u64),
        wrap in any::<bool>(),
        garbage in prop::collection::vec(0..60u64, 0..20),
        limits in limits_strategy(),
    ) {
        let director = director();
        // Nobody eligible (all cooling down), so the dispatch budget never cuts a page short.
        let rows: Vec<CandidateRow> = garbage.iter().map(|h| row(*h, true)).collect();
        let mut pass = SelectionPass::begin(PageCursor { after: start.map(HostId) }, limits)
            .expect("limits");
        if wrap && start.is_some() {
            // An empty first page is the end of the list: on to the wrapped segment, whose
            // query has both bounds.
            pass.handle_page(NOW, &director, &[]);
        }
        if let Some(q) = pass.poll_query() {
            let mut again = pass;
            let decisions = pass.handle_page(NOW, &director, &rows);
            prop_assert_eq!(&decisions, &again.handle_page(NOW, &director, &rows), "deterministic");
            prop_assert_eq!(pass, again);
            let hosts: Vec<HostId> = decisions.iter().map(|d| d.host).collect();
            prop_assert!(hosts.windows(2).all(|w| w[0] < w[1]), "strictly increasing: {:?}", hosts);
            prop_assert!(hosts.iter().all(|h| q.contains(*h)), "inside {:?}: {:?}", q, hosts);
            prop_assert_eq!(
                u64::from(pass.rejected_rows()) + pass.examined(),
                rows.len() as u64,
                "every row examined or counted"
            );
        }
    }
}

/// SCALE-3: a pass from the middle reads to the end, wraps and reads from the start through
/// where it began, so it examines every host once and ends where it started.
#[test]
fn scale_3_a_pass_from_the_middle_wraps_through_its_start_and_examines_each_host_once() {
    let hosts: BTreeSet<u64> = (1..=10).collect();
    let limits = ScanLimits {
        page_size: 3,
        max_pages: 10,
        max_dispatch: 100,
    };
    let mut pass = SelectionPass::begin(
        PageCursor {
            after: Some(HostId(6)),
        },
        limits,
    )
    .expect("limits");
    let mut queries = Vec::new();
    let mut examined = Vec::new();
    let none = BTreeSet::new();
    while let Some(q) = pass.poll_query() {
        queries.push((q.after.map(|h| h.0), q.through.map(|h| h.0)));
        for d in pass.handle_page(NOW, &director(), &answer(&hosts, q, &none)) {
            examined.push(d.host.0);
        }
    }
    assert_eq!(
        queries,
        vec![
            (Some(6), None),
            (Some(9), None),
            (None, Some(6)),
            (Some(3), Some(6))
        ],
        "to the end, then from the start through the pass's start; no empty page after it"
    );
    assert_eq!(examined, vec![7, 8, 9, 10, 1, 2, 3, 4, 5, 6]);
    assert_eq!(pass.sweeps_completed(), 1);
    assert_eq!(
        pass.cursor(),
        PageCursor {
            after: Some(HostId(6))
        }
    );
    assert_eq!(pass.pages_read(), 4);
}

/// SCALE-3: the cursor moves with every page, so a director that stops after any page (or
/// whose next page fails) goes on from there; a failed page leaves the cursor where it was.
#[test]
fn scale_3_the_cursor_moves_after_every_page_and_a_failed_page_leaves_it() {
    let hosts: BTreeSet<u64> = (1..=10).collect();
    let limits = ScanLimits {
        page_size: 3,
        max_pages: 10,
        max_dispatch: 100,
    };
    let none = BTreeSet::new();
    let mut pass = SelectionPass::begin(PageCursor::default(), limits).expect("limits");
    let q = pass.poll_query().expect("page 1");
    pass.handle_page(NOW, &director(), &answer(&hosts, q, &none));
    assert_eq!(
        pass.cursor(),
        PageCursor {
            after: Some(HostId(3))
        }
    );
    let q = pass.poll_query().expect("page 2");
    assert_eq!(q.after, Some(HostId(3)));
    pass.handle_page_failed();
    assert_eq!(pass.poll_query(), None, "a failed page ends the pass");
    assert_eq!(
        pass.cursor(),
        PageCursor {
            after: Some(HostId(3))
        }
    );
    let next = SelectionPass::begin(pass.cursor(), limits).expect("limits");
    assert_eq!(
        next.poll_query().map(|q| q.after),
        Some(Some(HostId(3))),
        "the next pass starts with the page that failed"
    );
}

/// SCALE-3: when the dispatch budget runs out inside a page, the rest of that page comes first
/// next pass (the cursor is the last host examined, not the end of the page).
#[test]
fn scale_3_a_spent_dispatch_budget_leaves_the_rest_of_the_page_for_the_next_pass() {
    let hosts: BTreeSet<u64> = (1..=10).collect();
    let limits = ScanLimits {
        page_size: 5,
        max_pages: 10,
        max_dispatch: 2,
    };
    let none = BTreeSet::new();
    let mut pass = SelectionPass::begin(PageCursor::default(), limits).expect("limits");
    let q = pass.poll_query().expect("page");
    let decisions = pass.handle_page(NOW, &director(), &answer(&hosts, q, &none));
    assert_eq!(
        decisions.iter().map(|d| d.host.0).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(pass.poll_query(), None);
    assert_eq!(
        pass.cursor(),
        PageCursor {
            after: Some(HostId(2))
        }
    );
    assert_eq!(
        pass.sweeps_completed(),
        0,
        "a page cut short by the budget is not the end"
    );
}

/// The sweep property is not vacuous: a director that saves its cursor only at the end of a
/// pass (as before SCALE-3) reads a failed pass's pages again from that pass's start.
#[test]
fn scale_3_saving_only_at_the_end_of_a_pass_would_restart_the_failed_pass() {
    let hosts: BTreeSet<u64> = (1..=20).collect();
    let limits = ScanLimits {
        page_size: 3,
        max_pages: 3,
        max_dispatch: 100,
    };
    let none = BTreeSet::new();
    let read = |saved: PageCursor, fail_page: Option<usize>, per_page: bool| {
        let mut pass = SelectionPass::begin(saved, limits).expect("limits");
        let mut seen = Vec::new();
        let mut saved = saved;
        let mut n = 0;
        while let Some(q) = pass.poll_query() {
            if Some(n) == fail_page {
                pass.handle_page_failed();
                return (seen, saved);
            }
            n += 1;
            seen.extend(
                pass.handle_page(NOW, &director(), &answer(&hosts, q, &none))
                    .iter()
                    .map(|d| d.host.0),
            );
            if per_page {
                saved = pass.cursor();
            }
        }
        (seen, pass.cursor())
    };
    for per_page in [true, false] {
        let (_, saved) = read(PageCursor::default(), None, per_page);
        let (failed, saved) = read(saved, Some(1), per_page);
        assert_eq!(failed, vec![10, 11, 12]);
        let (next, _) = read(saved, None, per_page);
        let resumed = next.first().copied();
        if per_page {
            assert_eq!(resumed, Some(13), "per page: after the last completed page");
        } else {
            assert_eq!(resumed, Some(10), "per pass: the failed pass again");
        }
    }
}

/// The examined-once-per-pass check is not vacuous: feeding a wrapped segment's page without
/// its `through` bound would read past the pass's start; the pass skips such rows.
#[test]
fn scale_3_rows_past_the_pass_start_in_the_wrapped_segment_are_rejected() {
    let hosts: BTreeSet<u64> = (1..=6).collect();
    let limits = ScanLimits {
        page_size: 4,
        max_pages: 10,
        max_dispatch: 100,
    };
    let none = BTreeSet::new();
    let mut pass = SelectionPass::begin(
        PageCursor {
            after: Some(HostId(3)),
        },
        limits,
    )
    .expect("limits");
    let q = pass.poll_query().expect("to the end");
    assert_eq!(
        pass.handle_page(NOW, &director(), &answer(&hosts, q, &none))
            .len(),
        3
    );
    let q = pass.poll_query().expect("wrapped");
    assert_eq!(q.through, Some(HostId(3)));
    let unbounded = PageQuery { through: None, ..q };
    let decisions = pass.handle_page(NOW, &director(), &answer(&hosts, unbounded, &none));
    assert_eq!(
        decisions.iter().map(|d| d.host.0).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(
        pass.rejected_rows(),
        1,
        "host 4 was examined earlier in this pass"
    );
}
