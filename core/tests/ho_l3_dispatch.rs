//! HO-L3 / SCALE-6: the director's concurrent dispatch ([`Dispatcher`]), pure: bounded in
//! total and per source cell; one cell that never answers holds up none of the others; a cell
//! that fails is backed off on its own (exponential, bounded, one probe at a time) and each
//! change of its state is reported once (OPS-2); the cursor moves past a page only once every
//! dispatch of that page and of the pages before it has ended.

use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

const DARK: CellId = CellId(1);
const LIVE: CellId = CellId(2);
const TGT: CellId = CellId(3);

fn limits() -> DispatchLimits {
    DispatchLimits {
        max_in_flight: 4,
        max_in_flight_per_cell: 2,
        max_pages_ahead: 4,
        backoff_min_ms: 1_000,
        backoff_max_ms: 8_000,
    }
}

fn req(cell: CellId, host: u64) -> HandoffRequest {
    HandoffRequest::new(
        SourceAuthority {
            cell,
            host: HostId(host),
            epoch: Epoch(1),
            incarnation: Incarnation(1),
            generation: Generation(1),
        },
        TGT,
        100,
        Measurement {
            measured_at: MonoMs::ZERO,
            current_rtt_ms: 120,
            target_rtt_ms: 20,
        },
    )
}

fn cursor(after: u64) -> PageCursor {
    PageCursor {
        after: Some(HostId(after)),
    }
}

/// Drain every send the dispatcher allows now.
fn sends(d: &mut Dispatcher, now: MonoMs) -> (Vec<(DispatchTicket, HandoffRequest)>, Vec<u64>) {
    let mut sent = Vec::new();
    let mut skipped = Vec::new();
    while let Some(next) = d.poll_send(now) {
        match next {
            DispatchNext::Send(t, r) => sent.push((t, r)),
            DispatchNext::Skip(r) => skipped.push(r.source.host.0),
        }
    }
    (sent, skipped)
}

/// Two source cells, one of which never answers, pages of more than one request each: every
/// request of the live cell is sent and answered while the dark cell's first requests are
/// still in flight; the dark cell holds at most its per-cell bound of slots, never the total.
#[test]
fn ho_l3_scale_6_one_dark_cell_never_stalls_the_live_one() {
    let mut d = Dispatcher::new(limits()).expect("limits");
    let mut now = MonoMs(10_000);
    // Three pages, hosts alternating dark (odd) / live (even).
    for page in 0..3u64 {
        let reqs: Vec<_> = (1..=4)
            .map(|i| {
                let h = page * 4 + i;
                req(if h % 2 == 1 { DARK } else { LIVE }, h)
            })
            .collect();
        let (_, admits) = d.handle_page(now, cursor(page * 4 + 4), &reqs);
        assert!(admits.iter().all(|a| *a == Admit::Queued));
    }
    let mut dark_in_flight = Vec::new();
    let mut live_answered = Vec::new();
    // The live cell answers every request at once; the dark one never does.
    for _ in 0..10 {
        let (sent, skipped) = sends(&mut d, now);
        assert!(skipped.is_empty());
        assert!(d.in_flight() <= 4, "the total bound");
        for (t, r) in sent {
            if r.source.cell == DARK {
                dark_in_flight.push(t);
            } else {
                assert_eq!(d.handle_ended(now, t, Ok(())), None);
                live_answered.push(r.source.host.0);
            }
        }
        assert!(dark_in_flight.len() <= 2, "the per-cell bound");
    }
    live_answered.sort_unstable();
    assert_eq!(
        live_answered,
        vec![2, 4, 6, 8, 10, 12],
        "every live request went while the dark cell's first two hung"
    );
    assert_eq!(dark_in_flight.len(), 2);
    assert_eq!(
        d.poll_cursor(),
        None,
        "no page ended: the first holds dark requests in flight"
    );

    // One request timeout later the dark cell's requests fail: it is stuck, once.
    now = now.plus_ms(1_500);
    let first = d.handle_ended(now, dark_in_flight[0], Err(CellFailure::Timeout));
    assert_eq!(
        first,
        Some(CellChange::Stuck {
            cell: DARK,
            reason: CellFailure::Timeout,
            until: now.plus_ms(1_000),
        })
    );
    assert_eq!(
        d.handle_ended(now, dark_in_flight[1], Err(CellFailure::Timeout)),
        None,
        "a second failure of the same episode is no new state (OPS-2: logged once)"
    );
    assert_eq!(d.backoffs().len(), 1);
    // The rest of the dark cell's queued requests are skipped, not sent.
    let (sent, skipped) = sends(&mut d, now);
    assert!(sent.is_empty(), "{sent:?}");
    assert_eq!(skipped, vec![5, 7, 9, 11]);
    assert!(d.idle());
    assert_eq!(
        d.poll_cursor(),
        Some(cursor(12)),
        "every page ended: the cursor moves past all three"
    );
    // A new page: the dark cell's hosts are not even queued while it is backed off.
    let (_, admits) = d.handle_page(now, cursor(14), &[req(DARK, 13), req(LIVE, 14)]);
    assert_eq!(
        admits,
        vec![Admit::CellBackedOff { cell: DARK }, Admit::Queued]
    );
}

/// The cursor never moves past a page with a dispatch in flight, even when later pages have
/// ended: a director that dies then reads that page again (same op ids).
#[test]
fn ho_l3_scale_3_cursor_not_saved_before_its_page_ends() {
    let mut d = Dispatcher::new(limits()).expect("limits");
    let now = MonoMs(1);
    d.handle_page(now, cursor(2), &[req(DARK, 1), req(LIVE, 2)]);
    d.handle_page(now, cursor(4), &[req(LIVE, 4)]);
    d.handle_page(now, cursor(6), &[]);
    let (sent, _) = sends(&mut d, now);
    assert_eq!(sent.len(), 3);
    let slow = sent
        .iter()
        .find(|(_, r)| r.source.host.0 == 1)
        .map(|(t, _)| *t)
        .expect("host 1 sent");
    for (t, r) in &sent {
        if r.source.host.0 != 1 {
            d.handle_ended(now, *t, Ok(()));
        }
    }
    assert_eq!(
        d.poll_cursor(),
        None,
        "pages 2 and 3 ended, page 1 has host 1 in flight: the cursor stays"
    );
    assert!(!d.idle());
    d.handle_ended(now, slow, Ok(()));
    assert_eq!(d.poll_cursor(), Some(cursor(6)), "then past all three");
    assert_eq!(d.poll_cursor(), None, "reported once");
}

/// A backed-off cell gets one probe once its backoff ends; a failed probe doubles the backoff
/// up to its maximum; an answer ends it and is reported once.
#[test]
fn ho_l3_backoff_is_exponential_bounded_and_probes_one_at_a_time() {
    let mut d = Dispatcher::new(limits()).expect("limits");
    let mut now = MonoMs(0);
    let mut host = 0u64;
    let mut page = |d: &mut Dispatcher, now: MonoMs, n: usize| {
        let reqs: Vec<_> = (0..n)
            .map(|_| {
                host += 1;
                req(DARK, host)
            })
            .collect();
        d.handle_page(now, cursor(host), &reqs).1
    };
    page(&mut d, now, 1);
    let (sent, _) = sends(&mut d, now);
    let refused = CellFailure::Refused(RefusalReason::StaleTimestamp);
    let change = d.handle_ended(now, sent[0].0, Err(refused));
    assert!(matches!(change, Some(CellChange::Stuck { reason, .. }) if reason == refused));
    assert_eq!(
        d.backoffs()[&DARK].reason.label(),
        "refused: stale_timestamp"
    );
    let mut waits = Vec::new();
    for _ in 0..6 {
        let until = d.backoffs()[&DARK].until;
        // Before the backoff ends: nothing goes.
        let early = page(&mut d, MonoMs(until.as_ms() - 1), 2);
        assert_eq!(early, vec![Admit::CellBackedOff { cell: DARK }; 2]);
        waits.push(until.as_ms() - now.as_ms());
        now = until;
        // At its end: three queued, one probe sent, the others skipped.
        page(&mut d, now, 3);
        let (sent, skipped) = sends(&mut d, now);
        assert_eq!((sent.len(), skipped.len()), (1, 2));
        assert_eq!(
            d.handle_ended(now, sent[0].0, Err(CellFailure::Timeout)),
            None,
            "still stuck: no new state"
        );
        assert_eq!(d.backoffs()[&DARK].reason, CellFailure::Timeout);
    }
    assert_eq!(waits, vec![1_000, 2_000, 4_000, 8_000, 8_000, 8_000]);
    now = d.backoffs()[&DARK].until;
    page(&mut d, now, 1);
    let (sent, _) = sends(&mut d, now);
    assert_eq!(
        d.handle_ended(now, sent[0].0, Ok(())),
        Some(CellChange::Recovered {
            cell: DARK,
            failures: 7
        })
    );
    assert!(d.backoffs().is_empty());
    assert_eq!(page(&mut d, now, 2), vec![Admit::Queued; 2]);
}

/// Every bound is validated: zero, and past its maximum, are refused by name.
#[test]
fn scale_6_dispatch_limits_are_validated() {
    assert_eq!(limits().validate(), Ok(()));
    let bad = [
        (
            DispatchLimits {
                max_in_flight: 0,
                ..limits()
            },
            DispatchLimitsError::MaxInFlight,
        ),
        (
            DispatchLimits {
                max_in_flight_per_cell: MAX_IN_FLIGHT + 1,
                ..limits()
            },
            DispatchLimitsError::MaxInFlightPerCell,
        ),
        (
            DispatchLimits {
                max_pages_ahead: 0,
                ..limits()
            },
            DispatchLimitsError::MaxPagesAhead,
        ),
        (
            DispatchLimits {
                backoff_max_ms: 999,
                ..limits()
            },
            DispatchLimitsError::Backoff,
        ),
    ];
    for (l, e) in bad {
        assert_eq!(l.validate(), Err(e));
        assert!(Dispatcher::new(l).is_err());
    }
}

/// HO-L3 (director side): a target whose lease lapsed is skipped with a named reason and the
/// numbers; a live lease, and a setup row never leased, are not.
#[test]
fn ho_l3_director_skips_a_target_whose_lease_lapsed() {
    let now = MonoMs(100_000);
    let candidate = CandidateView {
        authority: req(LIVE, 7).source,
        source_cell_capable: true,
        desktop_capable: true,
        measurement: Some((
            TGT,
            Measurement {
                measured_at: now,
                current_rtt_ms: 120,
                target_rtt_ms: 20,
            },
        )),
        cooldown_until: None,
    };
    let policy = DirectorPolicy {
        enabled: true,
        cohort_percent: 100,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 0,
        },
    };
    let target = |lease_until: MonoMs| TargetView {
        cell: TGT,
        capable: true,
        load: 0,
        capacity: 10,
        lease_until,
    };
    let (verdict, evidence) = explain(now, &policy, &candidate, Some(&target(now)));
    assert_eq!(verdict, Err(Ineligible::TargetNotLive));
    assert_eq!(
        evidence,
        Evidence::TargetLease {
            target: TGT,
            lease_until: now,
            lapsed_ms: 0
        }
    );
    let line = explain_line(&Decision {
        host: HostId(7),
        verdict,
        evidence,
    });
    assert!(
        line.ends_with(
            "ineligible rule=target_not_live target_cell=3 lease_until_ms=100000 lapsed_ms=0"
        ),
        "{line}"
    );
    assert!(
        explain(now, &policy, &candidate, Some(&target(now.plus_ms(1))))
            .0
            .is_ok()
    );
    assert!(
        explain(now, &policy, &candidate, Some(&target(MonoMs::ZERO)))
            .0
            .is_ok(),
        "a setup row no process ever leased is not judged"
    );
}

/// HO-L3 (the transaction): the reference store refuses a move into a cell whose lease lapsed,
/// by name, writing nothing; the same move while the lease runs commits.
#[test]
fn ho_l3_reference_store_refuses_a_move_into_a_lapsed_cell() {
    let config = StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 600_000,
            host_cooldown_ms: 0,
        },
        max_in_flight_migrations: 64,
        rate_window_ms: 60_000,
        max_commits_per_window: 64,
        registration_timeout_ms: 600_000,
        bounds: store::StoreBounds::FLEET,
    };
    let mut s = AssignmentStore::new(config);
    let started = MonoMs(1_000_000);
    s.upsert_cell(
        LIVE,
        store::CellRow {
            capacity: 64,
            handoff_capable: true,
            incarnation: Incarnation(1),
        },
    )
    .expect("cell");
    s.start_cell(TGT, 64, true, started, 15_000).expect("free");
    let a = s.insert_host(HostId(7), LIVE, true).expect("host");
    let b = s.insert_host(HostId(8), LIVE, true).expect("host");
    let request = |auth: SourceAuthority, now: MonoMs| {
        HandoffRequest::new(
            auth,
            TGT,
            100,
            Measurement {
                measured_at: now,
                current_rtt_ms: 200,
                target_rtt_ms: 20,
            },
        )
    };
    let now = started.plus_ms(14_999);
    assert!(s.run_transaction(now, &request(a, now)).is_committed());
    let now = started.plus_ms(15_000);
    let before = s.snapshot();
    assert_eq!(
        s.run_transaction(now, &request(b, now)),
        TxnOutcome::RolledBack {
            reason: store::AbortReason::Policy(Ineligible::TargetNotLive)
        }
    );
    assert_eq!(s.snapshot(), before, "nothing written");
}

#[test]
fn ho_l3_ops_1_a_stop_drops_the_queue_and_the_cursor_stays_at_a_page_boundary() {
    let mut d = Dispatcher::new(DispatchLimits {
        max_in_flight: 2,
        max_in_flight_per_cell: 2,
        ..limits()
    })
    .expect("limits");
    let now = MonoMs(0);
    // Three pages of two hosts each; only page 1's two requests go (the total bound).
    for p in 0..3u64 {
        d.handle_page(
            now,
            cursor(2 * p + 2),
            &[req(LIVE, 2 * p + 1), req(LIVE, 2 * p + 2)],
        );
    }
    let (sent, _) = sends(&mut d, now);
    assert_eq!(sent.len(), 2);
    let dropped: Vec<u64> = d.handle_stop().iter().map(|r| r.source.host.0).collect();
    assert_eq!(
        dropped,
        vec![3, 4, 5, 6],
        "the queued requests are dropped unsent"
    );
    assert_eq!(d.poll_send(now), None, "nothing goes after the stop");
    assert_eq!(d.poll_cursor(), None, "page 1 still has requests in flight");
    d.handle_ended(now, sent[0].0, Ok(()));
    assert_eq!(d.poll_cursor(), None);
    d.handle_ended(now, sent[1].0, Ok(()));
    // Past page 1 (every dispatch of it ended), not past pages 2 and 3 (dropped).
    assert_eq!(d.poll_cursor(), Some(cursor(2)));
    assert_eq!(d.poll_cursor(), None);
    assert!(d.idle());
    assert_eq!(
        d.pages_open(),
        0,
        "the dropped pages are forgotten: the next pass reads them"
    );
}
