//! FO-X1, FO-X2, FO-X2a: the pool drained by its own cooldowns (a dead channel is left within
//! about one tick; cooldown 0 never self-locks; a failed candidate is passed over only until the
//! chain moves or its cooldown expires). Each name carries its ID; each `*_regression_*` test
//! was red on the core before its fix.

mod fo_rig;

use fo_rig::*;
use switchyard_core::failover::*;

#[test]
fn fo_x2_cooldown_zero_is_legal() {
    let t = Thresholds::from_lookup(lookup(&[(VAR_COOLDOWN_MS, "0")])).unwrap();
    assert_eq!(t.cooldown_ms, 0);
}

#[test]
fn fo_x1_dead_first_candidate_costs_one_open_not_one_tick() {
    let mut rig = Rig::production(thresholds());
    rig.current_dies();
    rig.tick();
    let decided_at = rig.now;
    rig.open_fail(A2);
    rig.open_ok(B);
    assert_eq!(rig.now, decided_at, "within the same tick");
    assert_eq!(rig.current(), Some(B));
}

#[test]
fn fo_x1_exemption_returns_within_one_tick_of_turning_unhealthy() {
    // Scene 4: the old code stayed ~300 s on the dead channel here.
    let mut rig = drained_on_b(thresholds());
    rig.advance(30_000);
    rig.backoff(1);
    let mut ticks = 0;
    while rig.opening().is_none() {
        rig.advance(2_000).tick();
        ticks += 1;
        assert!(ticks < 100);
    }
    assert!(rig.sup.is_unhealthy(rig.now));
    rig.open_ok(A1);
    // unhealthy at 15 s of backoff: the very first tick at/after it switches
    assert_eq!(ticks, 8); // 16 s after the backoff started, 2 s ticks
    assert_eq!(rig.current(), Some(A1));
}

#[test]
fn fo_x2_cooldown_zero_still_fails_over_to_the_live_host() {
    // Scene ctrl: the old code kept retrying the first failing candidate for 121 s.
    let mut rig = Rig::production(Thresholds {
        cooldown_ms: 0,
        ..thresholds()
    });
    rig.current_dies();
    for _ in 0..3 {
        rig.tick();
        if rig.opening() == Some(A2) {
            rig.open_fail(A2);
        }
        if rig.opening() == Some(B) {
            rig.open_ok(B);
        }
        rig.advance(2_000);
    }
    assert_eq!(rig.current(), Some(B));
    assert_eq!(rig.opens().iter().filter(|(u, _)| u == A2).count(), 1);
}

#[test]
fn fo_x2_cooldown_zero_keeps_cycling_through_failed_candidates_one_round_per_tick() {
    let mut rig = Rig::production(Thresholds {
        cooldown_ms: 0,
        ..thresholds()
    });
    rig.current_dies();
    for _ in 0..4 {
        rig.tick();
        while let Some(target) = rig.opening().map(str::to_owned) {
            rig.open_fail(&target);
        }
        rig.advance(2_000);
    }
    let opened: Vec<_> = rig.opens().into_iter().map(|(u, _)| u).collect();
    assert_eq!(opened.len(), 8, "one round (A2, B) per tick: {opened:?}");
    assert!(opened.chunks(2).all(|round| round == [A2, B]));
}

// Found by mutation testing (docs/ASSURANCE.md).
#[test]
fn fo_x2_the_passed_over_set_names_the_failed_candidates_until_the_chain_moves() {
    let mut rig = Rig::production(thresholds());
    rig.backoff(3);
    rig.tick();
    assert_eq!(
        rig.opening(),
        Some(A2),
        "the health path opens the next candidate"
    );
    assert!(rig.sup.tried_since_last_move().is_empty());
    rig.open_fail(A2);
    let tried = rig.sup.tried_since_last_move();
    assert!(tried.contains(&url(A2)), "{tried:?}");
    assert_eq!(rig.opening(), Some(B), "the chain moved on");
    rig.open_ok(B);
    assert!(
        rig.sup.tried_since_last_move().is_empty(),
        "the chain moved"
    );
}

/// Finding 2: a failed candidate whose cooldown expired is an ordinary clean candidate again,
/// first in directory order (FO-D3), not behind the untried ones.
#[test]
fn fo_x2a_regression_an_expired_failed_candidate_is_first_in_directory_order_again() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&[U2, U1]);
    rig.open_ok(U2);
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(U1));
    rig.open_fail(U1); // U1 cools open-failed and is passed over
    assert_eq!(rig.opening(), None);
    assert_eq!(rig.directory(&[U1, U0]), DirectoryOutcome::Refused);
    rig.clear();
    rig.advance(300_001).tick();
    assert_eq!(rig.opens(), vec![(U1.to_owned(), false)]);
}

/// FO-X2 unchanged: with cooldown 0 the failed candidate is still passed over until the chain
/// moves on.
#[test]
fn fo_x2a_with_cooldown_zero_a_failed_candidate_is_still_passed_over() {
    let mut rig = Rig::new(Thresholds {
        cooldown_ms: 0,
        ..thresholds()
    });
    rig.directory(&[U2, U1, U0]);
    rig.open_ok(U2);
    rig.current_dies();
    rig.tick();
    rig.open_fail(U1);
    assert_eq!(rig.opening(), Some(U0));
    rig.open_fail(U0);
    rig.clear();
    rig.advance(300_001).tick();
    // A new round: every clean candidate was tried, so the first in directory order.
    assert_eq!(rig.opens(), vec![(U1.to_owned(), false)]);
    rig.open_fail(U1);
    assert_eq!(rig.opening(), Some(U0), "U1 passed over within the round");
}
