//! FO-D1, FO-D2, FO-D2a, FO-D10, FO-R5, FO-R5a: the cooldown table (keyed by URL, in memory
//! only) and the directory path (never into cooldown, targets only from the current list).
//! Each name carries its ID; each `*_regression_*` test was red on the core before its fix.

mod fo_rig;

use fo_rig::*;
use switchyard_core::failover::*;

#[test]
fn fo_d1_f12_directory_path_never_switches_into_cooldown() {
    let mut rig = drained_on_b(thresholds()); // A1 switched-away, A2 open-failed
    rig.advance(60_000);
    // The refresh keeps asking for A1 (first candidate) while it cools: refused every time.
    for _ in 0..3 {
        assert_eq!(rig.directory(&[A1, A2, B]), DirectoryOutcome::Refused);
        rig.advance(10_000);
    }
    assert_eq!(rig.current(), Some(B));
    assert_eq!(rig.counters().switches, 1);
    assert!(rig.opens().is_empty());
    let line = &rig.skip_lines()[0];
    assert!(line.contains("directory path"), "{line}");
    assert!(
        line.contains(&format!("{A1} still cooling, 240000 ms left of 300000 ms")),
        "{line}"
    );
    let entry = rig.sup.cooldown_entry(&url(A1)).unwrap();
    assert_eq!(entry.kind(), CooldownKind::SwitchedAway);
    assert!(
        !entry.exempted_this_cycle(),
        "the directory path spends no exemption"
    );
}

#[test]
fn fo_d1_directory_path_switches_once_the_cooldown_is_over() {
    let mut rig = drained_on_b(thresholds());
    rig.advance(300_000);
    assert_eq!(rig.directory(&[A1, A2, B]), DirectoryOutcome::Opening);
    assert_eq!(rig.opens(), vec![(A1.to_owned(), false)]);
    rig.open_ok(A1);
    assert_eq!(rig.current(), Some(A1));
    assert!(rig
        .lines
        .last()
        .unwrap()
        .contains("directory address changed (source=signed)"));
}

#[test]
fn fo_d1_directory_path_has_no_exemption_even_when_current_is_dead() {
    let mut rig = drained_on_b(thresholds());
    rig.current_dies(); // B dead too, A cooling
    assert_eq!(rig.directory(&[A1, A2, B]), DirectoryOutcome::Refused);
    assert!(rig.opens().is_empty());
}

#[test]
fn fo_r5_targets_come_only_from_the_current_list() {
    let mut rig = drained_on_b(thresholds());
    // A new list without A1: the exemption must not reach A1 any more.
    rig.directory(&[A2, B]);
    rig.clear();
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opens(), vec![(A2.to_owned(), true)]);
    rig.open_fail(A2);
    rig.advance(2_000).tick();
    assert!(rig.opens().iter().all(|(u, _)| u != A1));
    assert_eq!(rig.sup.candidates(), &[url(A2), url(B)]);
}

#[test]
fn fo_r5_env_pinned_single_candidate_never_leaves_it() {
    let mut rig = Rig::new(thresholds());
    rig.sup
        .handle_directory(rig.now, &[url(B)], DirectorySource::Env);
    while rig.sup.poll_output().is_some() {}
    rig.open_ok(B);
    rig.current_dies();
    for _ in 0..10 {
        rig.advance(2_000).tick();
    }
    assert!(rig.opens().is_empty());
    assert!(rig.counters().no_candidate_checks >= 10);
}

#[test]
fn fo_d2_cooldown_is_keyed_by_url_and_kind_is_a_field() {
    let mut rig = drained_on_b(thresholds());
    let a1 = rig.sup.cooldown_entry(&url(A1)).copied().unwrap();
    assert_eq!(a1.kind(), CooldownKind::SwitchedAway);
    assert_eq!(a1.until().since_ms(a1.since()), 300_000);
    assert_eq!(
        rig.sup.cooldown_entry(&url(A2)).unwrap().kind(),
        CooldownKind::OpenFailed
    );
    // A1 is now exempted and fails: the same single entry changes kind, no second row.
    rig.current_dies();
    rig.advance(1_000).tick();
    assert_eq!(rig.opens(), vec![(A1.to_owned(), true)]);
    rig.open_fail(A1);
    let table = rig.sup.cooldown_table();
    assert_eq!(table.keys().filter(|u| u.as_str() == A1).count(), 1);
    assert_eq!(table[&url(A1)].kind(), CooldownKind::OpenFailed);
    let stats = rig.sup.stats(rig.now);
    assert_eq!(stats.cooldown.len(), 2);
    assert!(stats.cooldown.iter().any(|v| v.url.as_str() == A1
        && v.kind == CooldownKind::OpenFailed
        && v.left_ms == 300_000));
}

#[test]
fn fo_d10_a_restart_clears_the_cooldown_table() {
    let rig = drained_on_b(thresholds());
    assert!(!rig.sup.cooldown_table().is_empty());
    let restarted = Supervisor::new(*rig.sup.thresholds(), rig.now);
    assert!(restarted.cooldown_table().is_empty());
    assert_eq!(restarted.counters(), FailoverCounters::default());
}

// One open in flight / make-before-break / stale results.

#[test]
fn fo_d1_a_directory_switch_while_an_open_is_in_flight_is_refused() {
    let mut rig = Rig::production(thresholds());
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(A2));
    rig.clear();
    assert_eq!(rig.directory(&[B, A1, A2]), DirectoryOutcome::Refused);
    assert!(rig.opens().is_empty());
    assert!(rig.lines[0].contains("refused: an open of wss://a-direct.example/relay is in flight"));
    // the tick while in flight does nothing either
    rig.advance(2_000).tick();
    assert!(rig.opens().is_empty());
    assert_eq!(rig.opening(), Some(A2));
}

// One open in flight / make-before-break / stale results.
#[test]
fn fo_r5_empty_directory_keeps_the_last_good_list() {
    let mut rig = Rig::production(thresholds());
    assert_eq!(rig.directory(&[]), DirectoryOutcome::Rejected);
    assert_eq!(rig.sup.candidates().len(), 3);
    assert!(rig.lines[0].contains("empty list"));
}

// Found by mutation testing (docs/ASSURANCE.md).

#[test]
fn fo_r5_a_directory_of_exactly_max_candidates_is_taken_and_one_more_is_rejected() {
    let urls: Vec<String> = (0..=MAX_CANDIDATES)
        .map(|i| format!("wss://r{i}.example/relay"))
        .collect();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut rig = Rig::new(thresholds());
    assert_eq!(
        rig.directory(&refs),
        DirectoryOutcome::Rejected,
        "one too many"
    );
    assert_ne!(
        rig.directory(&refs[..MAX_CANDIDATES]),
        DirectoryOutcome::Rejected,
        "the maximum itself"
    );
    assert_eq!(rig.sup.candidates().len(), MAX_CANDIDATES);
}

// Found by mutation testing (docs/ASSURANCE.md).
#[test]
fn fo_d2_a_supervisor_equals_its_clone_whatever_its_caches_hold() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&["wss://a.example/relay", "wss://b.example/relay"]);
    let first = rig.opening().expect("opening").to_owned();
    rig.open_ok(&first);
    let copy = rig.sup.clone();
    assert_eq!(copy, rig.sup);
    // Outputs not yet drained are part of the state: a copy with one pending differs.
    let mut pending = rig.sup.clone();
    pending.handle_directory(
        rig.now,
        &[url("wss://c.example/relay")],
        DirectorySource::Signed,
    );
    let mut drained = pending.clone();
    while drained.poll_output().is_some() {}
    assert_ne!(pending, drained);
    let hash = |sup: &Supervisor| {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        sup.hash(&mut hasher);
        hasher.finish()
    };
    assert_ne!(hash(&pending), hash(&drained));
}

/// Finding 1, directory path (the seed's 11:43:26 incident reached through a list change):
/// a URL that leaves the list and comes back inside its cycle is still cooling.
#[test]
fn fo_d2a_regression_a_url_leaving_the_list_keeps_its_cooldown_on_the_directory_path() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&[A1, B]);
    rig.open_ok(A1);
    assert_eq!(rig.directory(&[B, A1]), DirectoryOutcome::Opening);
    rig.open_ok(B);
    assert_eq!(rig.current(), Some(B));
    rig.clear();
    rig.advance(2_000);
    assert_eq!(rig.directory(&[B]), DirectoryOutcome::Unchanged);
    rig.advance(2_000);
    // 4 s into A1's 300 s switched-away cycle: FO-D1 refuses.
    assert_eq!(rig.directory(&[A1, B]), DirectoryOutcome::Refused);
    assert!(rig.opens().is_empty(), "flap through the directory path");
    assert_eq!(rig.counters().switches, 1);
    let line = rig
        .skip_lines()
        .pop()
        .expect("a still-cooling line")
        .clone();
    assert!(
        line.contains("still cooling, 296000 ms left of 300000 ms"),
        "{line}"
    );
    let entry = rig
        .sup
        .cooldown_entry(&url(A1))
        .expect("kept while unlisted");
    assert_eq!(entry.kind(), CooldownKind::SwitchedAway);
}

/// Finding 1, health path: an exemption spent in a cycle stays spent when the URL leaves the
/// list and comes back (FO-D4's once-per-cycle bound).
#[test]
fn fo_d2a_regression_a_spent_exemption_stays_spent_when_the_url_leaves_and_returns() {
    let mut rig = Rig::new(Thresholds {
        probe_max_ms: 0,
        ..thresholds()
    });
    rig.directory(&[A1, B]);
    rig.open_ok(A1);
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(B));
    rig.open_ok(B); // A1 cools switched-away
    rig.current_dies(); // B dead too
    rig.advance(2_000).tick();
    assert_eq!(rig.opens().last(), Some(&(A1.to_owned(), true)));
    rig.open_fail(A1); // the exemption is spent, A1's cycle restarts
    rig.clear();
    rig.advance(2_000);
    rig.directory(&[B]);
    rig.advance(2_000);
    rig.directory(&[B, A1]);
    rig.advance(2_000).tick();
    assert!(
        rig.opens().is_empty(),
        "A1 opened again in its cycle: {:?}",
        rig.opens()
    );
    assert_eq!(rig.counters().no_candidate_checks, 1);
    assert!(rig
        .sup
        .cooldown_entry(&url(A1))
        .is_some_and(|e| e.exempted_this_cycle()));
}

/// FO-D2a's bound: the table holds at most `MAX_TRACKED_URLS` URLs; when full, the unlisted
/// entry that expires first makes room, and listed entries are never dropped.
#[test]
fn fo_d2a_the_table_is_bounded_and_drops_the_earliest_expiring_unlisted_entry_first() {
    let mut rig = Rig::new(Thresholds {
        cooldown_ms: 3_600_000,
        ..thresholds()
    });
    let lists: Vec<Vec<String>> = (0..3)
        .map(|list| {
            (0..MAX_CANDIDATES)
                .map(|i| format!("wss://l{list}-{i}.example/relay"))
                .collect()
        })
        .collect();
    // Every URL of a list fails once (a no-channel chain), one list after the other, so the
    // first list's URLs expire first.
    for list in &lists {
        let refs: Vec<&str> = list.iter().map(String::as_str).collect();
        rig.directory(&refs);
        while let Some(target) = rig.opening().map(str::to_owned) {
            rig.sup
                .handle_open_failed(rig.now, &url(&target), OpenFailure::Failed);
            while rig.sup.poll_output().is_some() {}
        }
        rig.advance(1_000).tick();
        while let Some(target) = rig.opening().map(str::to_owned) {
            rig.sup
                .handle_open_failed(rig.now, &url(&target), OpenFailure::Failed);
            while rig.sup.poll_output().is_some() {}
        }
        rig.advance(1_000);
    }
    let table = rig.sup.cooldown_table();
    assert!(table.len() <= MAX_TRACKED_URLS, "bounded: {}", table.len());
    for listed in &lists[2] {
        assert!(table.contains_key(&url(listed)), "listed {listed} dropped");
    }
    for evicted in &lists[0] {
        assert!(
            !table.contains_key(&url(evicted)),
            "{evicted} expires first"
        );
    }
    for kept in &lists[1] {
        assert!(table.contains_key(&url(kept)), "{kept} dropped too early");
    }
}

/// Issue 26, bug 1: `U1` is being opened (health path), a directory update makes the list
/// `[U0]`, `U1`'s open succeeds. Before the fix the core switched to the unlisted `U1`.
#[test]
fn fo_r5a_regression_an_open_whose_url_left_the_list_is_closed_never_adopted() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&[U0, U1]);
    rig.open_ok(U0);
    rig.current_dies();
    rig.advance(2_000).tick();
    assert_eq!(rig.opening(), Some(U1));
    assert_eq!(rig.directory(&[U0]), DirectoryOutcome::Unchanged);
    let counters = rig.counters();
    let table = rig.sup.cooldown_table();
    rig.clear();
    assert!(!rig.open_ok(U1), "an unlisted open is not adopted");
    assert_eq!(rig.current(), Some(U0), "the current channel stays");
    assert_eq!(rig.opening(), None);
    assert_eq!(
        rig.actions,
        vec![ChannelAction::Close { url: url(U1) }],
        "the unlisted channel is closed, nothing else"
    );
    assert_eq!(rig.counters(), counters, "no counter changes");
    assert_eq!(rig.sup.cooldown_table(), table, "no cooldown entry changes");
    assert_eq!(rig.switch_lines(), 0);
    assert!(
        rig.skip_lines()
            .iter()
            .any(|l| l.contains(U1) && l.contains("never adopted")),
        "{:?}",
        rig.lines
    );
    // The next decision chooses among the listed URLs: U0 is the only one, so nothing opens.
    rig.clear();
    rig.advance(2_000).tick();
    assert!(rig.opens().is_empty(), "{:?}", rig.opens());
    assert_eq!(rig.current(), Some(U0));
}

/// Issue 26, bug 1 (second shape): `U1` is being opened on the directory path; the update
/// `[U2, U0]` is refused ("an open of U1 is in flight"), then `U1` comes up. Before the fix
/// the client stayed on the unlisted `U1`; now `U1` is closed, the client stays on `U0`, and
/// the next refresh of `[U2, U0]` opens `U2`.
#[test]
fn fo_r5a_regression_the_in_flight_refusal_never_pins_the_client_to_an_unlisted_url() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&[U0]);
    rig.open_ok(U0);
    assert_eq!(rig.directory(&[U1, U0]), DirectoryOutcome::Opening);
    assert_eq!(rig.opening(), Some(U1));
    assert_eq!(rig.directory(&[U2, U0]), DirectoryOutcome::Refused);
    assert!(rig
        .skip_lines()
        .iter()
        .any(|l| l.contains("an open of") && l.contains("in flight")));
    rig.clear();
    assert!(!rig.open_ok(U1));
    assert_eq!(rig.current(), Some(U0));
    assert_eq!(rig.actions, vec![ChannelAction::Close { url: url(U1) }]);
    assert_eq!(rig.counters().switches, 0);
    assert!(rig.sup.cooldown_entry(&url(U1)).is_none());
    assert!(rig.sup.cooldown_entry(&url(U0)).is_none());
    // Not pinned: a tick on a healthy U0 does nothing, the next refresh proceeds to U2.
    rig.clear();
    rig.advance(2_000).tick();
    assert!(rig.opens().is_empty());
    assert_eq!(rig.directory(&[U2, U0]), DirectoryOutcome::Opening);
    assert_eq!(rig.opening(), Some(U2));
    assert!(rig.open_ok(U2));
    assert_eq!(rig.current(), Some(U2));
}

/// FO-R5a before the first channel: an unlisted open is closed and the client has none yet;
/// the next tick opens a listed URL.
#[test]
fn fo_r5a_an_unlisted_first_open_is_closed_and_the_next_tick_opens_a_listed_url() {
    let mut rig = Rig::new(thresholds());
    rig.directory(&[U1]);
    assert_eq!(rig.opening(), Some(U1));
    rig.directory(&[U0]);
    rig.clear();
    assert!(!rig.open_ok(U1));
    assert_eq!(rig.current(), None);
    assert_eq!(rig.actions, vec![ChannelAction::Close { url: url(U1) }]);
    assert!(rig
        .events
        .iter()
        .all(|e| !matches!(e, Event::Attached { .. })));
    rig.clear();
    rig.advance(2_000).tick();
    assert_eq!(rig.opens(), vec![(U0.to_owned(), false)]);
}
