//! proptest: random input sequences against the failover machine, invariants after every step
//! (FO-D1, FO-D2, FO-D3, FO-D4, FO-D7, FO-R5, one open in flight, counters monotone).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use switchyard_core::failover::*;
use switchyard_core::MonoMs;

const URLS: [&str; 5] = [
    "wss://a.example/relay",
    "wss://a-direct.example/relay",
    "wss://b.example/relay",
    "wss://c.example/relay",
    "wss://d.example/relay",
];

#[derive(Debug, Clone)]
enum Input {
    Advance(u64),
    Tick,
    Flip(usize),
    ReportChannel,
    Directory(Vec<usize>),
    ResolveOpen {
        spurious_failure: bool,
        timed_out: bool,
    },
    StaleOpenResult(usize),
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        3 => (0u64..40_000).prop_map(Input::Advance),
        4 => Just(Input::Tick),
        2 => (0usize..URLS.len()).prop_map(Input::Flip),
        3 => Just(Input::ReportChannel),
        1 => proptest::sample::subsequence((0..URLS.len()).collect::<Vec<_>>(), 0..=URLS.len())
            .prop_shuffle()
            .prop_map(Input::Directory),
        4 => (any::<bool>(), any::<bool>()).prop_map(|(s, t)| Input::ResolveOpen {
            spurious_failure: s,
            timed_out: t
        }),
        1 => (0usize..URLS.len()).prop_map(Input::StaleOpenResult),
    ]
}

fn thresholds() -> impl Strategy<Value = Thresholds> {
    (
        prop::sample::select(vec![0u64, 5_000, 20_000, 300_000]),
        prop::sample::select(vec![0u64, 3_000, 15_000]),
        prop::sample::select(vec![0u32, 1, 3]),
        any::<bool>(),
        prop::sample::select(vec![1_000u64, 2_000]),
        prop::sample::select(vec![(15_000u64, 0u64), (3_000, 12_000), (15_000, 60_000)]),
    )
        .prop_map(
            |(
                cooldown_ms,
                grace_ms,
                min_attempts,
                exempt,
                check_ms,
                (probe_min_ms, probe_max_ms),
            )| {
                Thresholds {
                    cooldown_ms,
                    grace_ms,
                    min_attempts,
                    exempt,
                    check_ms,
                    probe_min_ms,
                    probe_max_ms,
                    ..Thresholds::default()
                }
            },
        )
}

struct World {
    sup: Supervisor,
    now: MonoMs,
    live: [bool; URLS.len()],
    attempts: u32,
    switch_lines: u64,
    /// FO-D4's oracle, kept outside the core: the exemptions granted, by URL and cycle.
    exemptions: BTreeSet<(RelayUrl, u64)>,
    /// Per URL, which cooldown cycle it is in. A cycle starts when the URL is cooled while it
    /// was not cooling (never cooled, current, or expired). A failed exempt open re-cools a
    /// URL that is still cooling: the same cycle. (Not `since`: two cycles can start at the
    /// same instant.)
    cycles: BTreeMap<RelayUrl, u64>,
}

fn idx(url: &RelayUrl) -> usize {
    URLS.iter()
        .position(|u| *u == url.as_str())
        .expect("a known url")
}

impl World {
    fn new(thresholds: Thresholds) -> World {
        let mut world = World {
            sup: Supervisor::new(thresholds, MonoMs::ZERO),
            now: MonoMs::ZERO,
            live: [true; URLS.len()],
            attempts: 0,
            switch_lines: 0,
            exemptions: BTreeSet::new(),
            cycles: BTreeMap::new(),
        };
        let first: Vec<RelayUrl> = URLS[..3].iter().map(|u| RelayUrl::new(*u)).collect();
        world
            .sup
            .handle_directory(MonoMs::ZERO, &first, DirectorySource::Signed);
        while world.sup.poll_output().is_some() {}
        world
    }

    fn apply(&mut self, input: &Input) {
        let now = self.now;
        match input {
            Input::Advance(ms) => self.now = self.now.plus_ms(*ms),
            Input::Tick => self.sup.handle_tick(now),
            Input::Flip(i) => self.live[*i] = !self.live[*i],
            Input::ReportChannel => {
                if let Some(current) = self.sup.current().cloned() {
                    let state = if self.live[idx(&current)] {
                        self.attempts = 0;
                        ChannelState::Healthy
                    } else {
                        self.attempts += 1;
                        ChannelState::Backoff {
                            attempts: self.attempts,
                        }
                    };
                    self.sup.handle_channel_state(now, &current, state);
                }
            }
            Input::Directory(order) => {
                let urls: Vec<RelayUrl> = order.iter().map(|i| RelayUrl::new(URLS[*i])).collect();
                self.sup
                    .handle_directory(now, &urls, DirectorySource::Signed);
            }
            Input::ResolveOpen {
                spurious_failure,
                timed_out,
            } => {
                if let Some(open) = self.sup.open_in_flight().cloned() {
                    if self.live[idx(open.url())] && !spurious_failure {
                        self.attempts = 0;
                        self.sup.handle_open_succeeded(now, open.url());
                    } else {
                        let failure = if *timed_out {
                            OpenFailure::TimedOut
                        } else {
                            OpenFailure::Failed
                        };
                        self.sup.handle_open_failed(now, open.url(), failure);
                    }
                }
            }
            Input::StaleOpenResult(i) => {
                let url = RelayUrl::new(URLS[*i]);
                if self.sup.open_in_flight().map(|o| o.url()) != Some(&url) {
                    assert!(!self.sup.handle_open_succeeded(now, &url));
                    assert!(!self.sup.handle_open_failed(now, &url, OpenFailure::Failed));
                }
            }
        }
    }

    fn step(&mut self, input: &Input) -> Result<(), TestCaseError> {
        let before = self.sup.clone();
        let before_now = self.now;
        self.apply(input);
        let now = self.now;
        for url in self.sup.cooldown_table().keys() {
            let was_cooling = before
                .cooldown_entry(url)
                .is_some_and(|e| e.is_cooling(before_now));
            if !was_cooling && before.cooldown_entry(url) != self.sup.cooldown_entry(url) {
                *self.cycles.entry(url.clone()).or_default() += 1;
            }
        }
        let mut opens = Vec::new();
        while let Some(output) = self.sup.poll_output() {
            match output {
                Output::Action(ChannelAction::Open {
                    url, exempt, probe, ..
                }) => opens.push((url, exempt, probe)),
                Output::Action(ChannelAction::Close { .. }) => {}
                Output::Event(event) => {
                    let line = render(&event);
                    if line.starts_with(SWITCH_PREFIX) {
                        self.switch_lines += 1;
                    }
                    // FO-D7: the model checker counts lines with the allocation-free check.
                    for prefix in prefixes_of(&line) {
                        prop_assert_eq!(
                            renders_with_prefix(&event, &prefix),
                            line.starts_with(prefix.as_str()),
                            "prefix {:?} of {:?}",
                            prefix,
                            line
                        );
                    }
                }
            }
        }
        prop_assert!(opens.len() <= 1, "one open per input: {opens:?}");
        if let Some((url, exempt, probe)) = opens.pop() {
            let pending = self.sup.open_in_flight().expect("an open was started");
            prop_assert_eq!(pending.url(), &url);
            // FO-R5: the target is listed.
            prop_assert!(
                self.sup.candidates().contains(&url),
                "FO-R5: {url} not listed"
            );
            let entry = self.sup.cooldown_entry(&url).copied();
            let cooling = entry.is_some_and(|e| e.is_cooling(now));
            match pending.origin() {
                // FO-D1: the directory path never opens a cooling URL.
                Origin::Directory => prop_assert!(!cooling && !exempt, "FO-D1: {url}"),
                // A cooling target on the health path is an exemption or (FO-X3) a probe.
                Origin::Health => prop_assert_eq!(cooling, exempt || probe),
            }
            prop_assert!(!(exempt && probe), "a probe is never an exemption");
            if exempt {
                let entry = entry.expect("an exempt target is cooling");
                prop_assert!(self.sup.thresholds().exempt, "FO-D6-OFF");
                // FO-D3: the exemption only when no clean candidate exists.
                let clean: Vec<_> = self
                    .sup
                    .candidates()
                    .iter()
                    .filter(|u| self.sup.is_clean(u, now))
                    .collect();
                prop_assert!(clean.is_empty(), "FO-D3: exempted with clean {clean:?}");
                // FO-D4: at most one exemption per URL per cooldown cycle.
                let cycle = self.cycles.get(&url).copied().unwrap_or_default();
                prop_assert!(
                    self.exemptions.insert((url.clone(), cycle)),
                    "FO-D4: second exemption of {} in its cycle {} (since {})",
                    url,
                    cycle,
                    entry.since()
                );
            }
        }
        // One open in flight, and only a result or nothing-in-flight can start a new one.
        if before.open_in_flight().is_some() && self.sup.open_in_flight().is_some() {
            let same = before.open_in_flight() == self.sup.open_in_flight();
            let resolved = matches!(input, Input::ResolveOpen { .. });
            prop_assert!(same || resolved, "a second open while one was in flight");
        }
        // FO-D2: one well-formed entry per URL.
        for entry in self.sup.cooldown_table().values() {
            prop_assert!(entry.since() <= entry.until());
            prop_assert_eq!(
                entry.until().since_ms(entry.since()),
                self.sup.thresholds().cooldown_ms
            );
        }
        // Counters monotone; FO-D7 switch lines == switches.
        let (b, a) = (before.counters(), self.sup.counters());
        prop_assert!(a.switches >= b.switches && a.exempt_switches >= b.exempt_switches);
        prop_assert!(
            a.open_failed >= b.open_failed && a.no_candidate_checks >= b.no_candidate_checks
        );
        prop_assert!(a.exempt_switches <= a.switches);
        prop_assert_eq!(self.switch_lines, a.switches, "FO-D7");
        // FO-H-2: supervisor off never switches on the health path.
        if !self.sup.thresholds().supervisor_enabled() {
            prop_assert_eq!(a.no_candidate_checks, 0);
        }
        Ok(())
    }
}

/// Prefixes to ask of a rendered line: the four markers, the empty one, the whole line and
/// the line one byte longer, and a cut of it at every char boundary with its last char changed.
fn prefixes_of(line: &str) -> Vec<String> {
    let mut out: Vec<String> = [SWITCH_PREFIX, SKIP_PREFIX, ATTACH_PREFIX, EXEMPT_MARKER, ""]
        .iter()
        .map(|p| p.to_string())
        .collect();
    out.push(line.to_owned());
    out.push(format!("{line} "));
    for (cut, c) in line.char_indices().step_by(7) {
        out.push(line[..cut + c.len_utf8()].to_owned());
        out.push(format!("{}~", &line[..cut]));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn fo_d1_d2_d3_d4_d7_r5_invariants_hold_on_random_inputs(
        thresholds in thresholds(),
        inputs in prop::collection::vec(input(), 1..200),
    ) {
        let mut world = World::new(thresholds);
        for input in &inputs {
            world.step(input)?;
        }
    }
}

/// FO-D4, found by the property above: an exempt switch to a URL succeeds, the directory
/// switches away from it at the same instant (a new cooldown cycle that starts at the same
/// `since`), and the pool drains again: the URL may be exempted once more in its new cycle.
#[test]
fn fo_d4_a_new_cycle_starting_at_the_same_instant_allows_a_new_exemption() {
    use Input::*;
    let thresholds = Thresholds {
        cooldown_ms: 300_000,
        grace_ms: 0,
        min_attempts: 1,
        exempt: true,
        ..Thresholds::default()
    };
    let ok = ResolveOpen {
        spurious_failure: false,
        timed_out: false,
    };
    let inputs = [
        ResolveOpen {
            spurious_failure: true,
            timed_out: false,
        },
        Tick,
        ok.clone(),
        Directory(vec![2, 1]),
        ok.clone(),
        Flip(2),
        ReportChannel,
        Tick,
        ok.clone(),
        Directory(vec![4, 1]),
        ok.clone(),
        Flip(4),
        ReportChannel,
        Tick,
    ];
    let mut world = World::new(thresholds);
    for input in &inputs {
        world.step(input).expect("invariants hold");
    }
    let a_direct = RelayUrl::new(URLS[1]);
    assert_eq!(world.sup.counters().exempt_switches, 1);
    let open = world.sup.open_in_flight().expect("the second exempt open");
    assert_eq!(open.url(), &a_direct);
    assert!(open.exemption().is_some());
    assert_eq!(
        world.now,
        MonoMs::ZERO,
        "both cycles start at the same instant"
    );
    assert_eq!(world.cycles.get(&a_direct), Some(&2));
}
