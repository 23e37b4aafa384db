//! What each action does: the environment's step, and the spec's judgement of the core's
//! decisions in it.

use super::*;

/// The spec's own reading of the configuration it gave the core (never the core's answer):
/// FO-H-2, the supervisor is off when `MIN_ATTEMPTS` is 0.
fn spec_supervisor_on(t: &Thresholds) -> bool {
    t.min_attempts != 0
}

/// FO-X3 / FO-D6-OFF: probing needs the exemption on and `PROBE_MAX_MS` other than 0.
fn spec_probing_on(t: &Thresholds) -> bool {
    t.exempt && t.probe_max_ms != 0
}

impl FailoverModel {
    pub fn new(params: FailoverParams) -> FailoverModel {
        assert!(!params.urls_per_host.is_empty() && params.urls_per_host.len() <= MAX_MODEL_HOSTS);
        let urls = params.urls();
        assert!(
            urls.len() <= MAX_MODEL_URLS,
            "at most {MAX_MODEL_URLS} URLs"
        );
        let indices = params.directory_lists();
        let whole: Vec<u8> = (0..urls.len() as u8).collect();
        let full_list = indices
            .iter()
            .position(|l| *l == whole)
            .expect("the whole universe is one of the lists") as u16;
        let lists = indices
            .iter()
            .map(|list| {
                list.iter()
                    .map(|i| urls[usize::from(*i)].0.clone())
                    .collect()
            })
            .collect();
        FailoverModel {
            params,
            urls,
            lists,
            list_ids: indices,
            halt: Halt::default(),
            full_list,
        }
    }

    /// The actions enabled in `state` (the model's `actions`, for walks outside the checker).
    pub fn enabled_actions(&self, state: &FoState) -> Vec<FoAction> {
        let mut actions = Vec::new();
        self.actions(state, &mut actions);
        actions
    }

    /// The URLs of list `list` of [`FailoverParams::directory_lists`].
    pub fn directory_list(&self, list: u16) -> &[RelayUrl] {
        &self.lists[usize::from(list)]
    }

    /// The spec's own record of the candidate list.
    pub fn spec_list(&self, state: &FoState) -> &[RelayUrl] {
        self.directory_list(state.list)
    }

    /// The spec's own record of the candidate list, as URL indices.
    fn spec_list_ids(&self, state: &FoState) -> &[u8] {
        &self.list_ids[usize::from(state.list)]
    }

    /// The spec's own record of the current URL.
    pub fn spec_current(&self, state: &FoState) -> &RelayUrl {
        &self.urls[usize::from(state.current)].0
    }

    fn url_index(&self, url: &RelayUrl) -> u8 {
        self.url_index_of(url)
            .expect("every model URL is in the universe")
    }

    /// The index of `url` in the universe, if it is one of its URLs. (The core hands back the
    /// `Arc`s it was given, so `==` is mostly a pointer compare.)
    fn url_index_of(&self, url: &RelayUrl) -> Option<u8> {
        self.urls
            .iter()
            .position(|(u, _)| u == url)
            .map(|i| i as u8)
    }

    pub(super) fn is_live(&self, state: &FoState, url: &RelayUrl) -> bool {
        self.is_live_id(state, self.url_index(url))
    }

    pub(super) fn is_live_id(&self, state: &FoState, url: u8) -> bool {
        state.host_up.is_up(self.urls[usize::from(url)].1)
    }

    /// FO-X2: a tick's chain opens each other candidate at most once (a clean or an exempt
    /// open: the failed one is passed over until the chain moves on, FO-D4 allows one
    /// exemption per cycle), plus at most one probe round over the other candidates (FO-X3:
    /// a URL at most once per interval; a round that ends schedules the next one at least
    /// `PROBE_MIN_MS` less jitter later), plus one directory-path open (the environment acts
    /// once per tick, and a directory update starts at most one open): `2 (N - 1) + 1` for a
    /// universe of `N` URLs (the current one is never opened).
    pub fn tick_open_cap(&self) -> u8 {
        let others = self.urls.len() as u8 - 1;
        2 * others + 1
    }

    /// FO-X1 / FO-X2 at one instant: at most two chains touch an instant (the one whose open
    /// fails or times out at it, and the tick at it: `CHECK_MS > 0`, so one tick per
    /// instant), each opening every other candidate at most once; one probe per URL (the probe
    /// interval is > 0); one directory-path open on each side of the tick. `3 (N - 1) + 2`.
    /// A chain stuck re-opening failed candidates at one instant exceeds it; the model stops
    /// there (`actions`) instead of searching without end.
    pub fn instant_open_cap(&self) -> u8 {
        let others = self.urls.len() as u8 - 1;
        3 * others + 2
    }

    /// FO-X2 counted per cooldown cycle: a chain whose opens time out can outlast a cooldown,
    /// and a URL whose cycle ended in it is a clean candidate again (FO-X2a), so the chain may
    /// open each candidate once more per cycle it spans. The cap of a chain that began at the
    /// last tick (the core's next tick less `CHECK_MS`) and has run `elapsed` ms is
    /// [`Self::tick_open_cap`] × (1 + `elapsed` / `COOLDOWN_MS`); with cooldown 0 (or the
    /// supervisor off) it is the tick's cap.
    pub fn chain_open_cap(&self, state: &FoState) -> u8 {
        let t = state.variant.thresholds();
        let cap = self.tick_open_cap();
        let Some(next_tick) = state.sup.poll_timeout() else {
            return cap;
        };
        if t.cooldown_ms == 0 {
            return cap;
        }
        let began = MonoMs(next_tick.as_ms().saturating_sub(t.check_ms));
        let cycles = 1 + state.now.since_ms(began) / t.cooldown_ms;
        u8::try_from(u64::from(cap).saturating_mul(cycles)).unwrap_or(u8::MAX)
    }

    pub(super) fn over_open_caps(&self, state: &FoState) -> bool {
        state.opens_this_tick > self.chain_open_cap(state)
            || state.opens_this_instant > self.instant_open_cap()
    }

    /// The spec's record: is URL `url` (an index) cooling at `at`?
    fn spec_cooling(state: &FoState, url: u8, at: MonoMs) -> bool {
        state.cycles[usize::from(url)].is_some_and(|c| c.until > at)
    }

    /// FO-H-1 as the spec states it, from the reports it fed and the configuration it gave:
    /// unhealthy only in backoff, and only once `MIN_ATTEMPTS` attempts were made or the
    /// channel has been in backoff for `GRACE_MS` since it left healthy. FO-H-2: never with
    /// `MIN_ATTEMPTS=0`.
    pub fn spec_unhealthy(state: &FoState) -> bool {
        let t = state.variant.thresholds();
        spec_supervisor_on(&t)
            && state.attempts > 0
            && (state.attempts >= t.min_attempts
                || state
                    .backoff_since
                    .is_some_and(|since| state.now.since_ms(since) >= t.grace_ms))
    }

    /// A live candidate the health path may still use: clean, or exemptable. From the spec's
    /// own list, current URL and configuration.
    pub fn live_eligible_exists(&self, state: &FoState) -> bool {
        let exempt_on = state.variant.thresholds().exempt;
        self.spec_list_ids(state).iter().any(|&url| {
            if !self.is_live_id(state, url) || state.current == url {
                return false;
            }
            match state.cycles[usize::from(url)] {
                Some(cycle) if cycle.until > state.now => exempt_on && !cycle.exempted,
                _ => true,
            }
        })
    }

    /// FO-D5 as the spec states it, from its own record: among the listed, cooling,
    /// not-yet-exempted URLs other than the current one (and, within a tick's chain, other than
    /// those it already tried, a bit per URL index), switched-away before open-failed, then
    /// earliest `until`, then directory order. The URL index of the winner.
    fn expected_exempt_target(&self, state: &FoState, now: MonoMs, tried: u8) -> Option<u8> {
        self.first_in_fo_d5_order(state, now, tried, false)
    }

    /// FO-D5's order over the spec's own record: among the listed, cooling URLs other than the
    /// current one and those in `skip` (a bit per URL index) whose cycle's exemption is spent
    /// (`spent`) or not, switched-away before open-failed, then earliest `until`, then
    /// directory order. The URL index of the winner.
    fn first_in_fo_d5_order(
        &self,
        state: &FoState,
        now: MonoMs,
        skip: u8,
        spent: bool,
    ) -> Option<u8> {
        let mut best: Option<((u8, MonoMs, usize), u8)> = None;
        for (index, &url) in self.spec_list_ids(state).iter().enumerate() {
            if state.current == url || skip & (1 << url) != 0 {
                continue;
            }
            let Some(cycle) = state.cycles[usize::from(url)] else {
                continue;
            };
            if cycle.until <= now || cycle.exempted != spent {
                continue;
            }
            let rank = match cycle.kind {
                CooldownKind::SwitchedAway => 0,
                CooldownKind::OpenFailed => 1,
            };
            let key = (rank, cycle.until, index);
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, url));
            }
        }
        best.map(|(_, url)| url)
    }

    /// A bit per URL index of `urls` (URLs outside the universe are left out).
    fn url_bits(&self, urls: &[RelayUrl]) -> u8 {
        urls.iter()
            .filter_map(|url| self.url_index_of(url))
            .fold(0, |bits, url| bits | 1 << url)
    }

    /// FO-X4 as the spec states it, from its own universe (which host serves each URL), its
    /// current URL and record: a URL's host is suspect when the current channel is on it, or
    /// a listed URL on it that still cools is passed over (its open failed since the chain
    /// last moved; `passed`, a bit per URL index).
    fn suspect_host(&self, state: &FoState, url: u8, at: MonoMs, passed: u8) -> bool {
        let host = self.urls[usize::from(url)].1;
        host == self.urls[usize::from(state.current)].1
            || self.spec_list_ids(state).iter().any(|&other| {
                passed & (1 << other) != 0
                    && Self::spec_cooling(state, other, at)
                    && self.urls[usize::from(other)].1 == host
            })
    }

    /// FO-D3 / FO-X2a / FO-X4: the clean candidate the health chain must open, from the spec's
    /// own list, record and universe: the first clean URL (listed, not current, not cooling)
    /// on a host that is not suspect, else the first clean one; and whether a clean URL on a
    /// host that is not suspect exists. (With `COOLDOWN_MS > 0` no clean URL is passed over:
    /// its failure made it cool.)
    fn first_clean_in_chain_order(
        &self,
        state: &FoState,
        at: MonoMs,
        passed: u8,
    ) -> (Option<u8>, bool) {
        let clean: Vec<u8> = self
            .spec_list_ids(state)
            .iter()
            .copied()
            .filter(|&u| state.current != u && !Self::spec_cooling(state, u, at))
            .collect();
        let other_host = clean
            .iter()
            .copied()
            .find(|&u| !self.suspect_host(state, u, at, passed));
        (other_host.or(clean.first().copied()), other_host.is_some())
    }

    /// FO-X3 / FO-D5 as the spec states it: the probe the round must open: among the listed,
    /// cooling URLs other than the current one whose exemption of this cycle is spent (the
    /// spec's record), not probed in the round under way (`probed`) and, within a tick's
    /// chain, not failed in it (`in_chain`): switched-away before open-failed, then earliest
    /// `until`, then directory order.
    fn expected_probe_target(
        &self,
        state: &FoState,
        now: MonoMs,
        probed: u8,
        in_chain: u8,
    ) -> Option<u8> {
        self.first_in_fo_d5_order(state, now, probed | in_chain, true)
    }

    /// Time advances to `to` (or stays): the per-instant open count starts over.
    fn advance(state: &mut FoState, to: MonoMs) {
        if to != state.now {
            state.opens_this_instant = 0;
            state.now = to;
        }
    }

    /// The spec's record of the channel it reports about (FO-H-1): healthy, or in backoff
    /// since the report that took it out of healthy.
    fn note_report(state: &mut FoState, report: ChannelState) {
        match report {
            ChannelState::Healthy => {
                state.attempts = 0;
                state.backoff_since = None;
            }
            ChannelState::Backoff { attempts } => {
                if state.attempts == 0 {
                    state.backoff_since = Some(state.now);
                }
                state.attempts = attempts;
            }
        }
    }

    /// The step function: the real core, fed the action, outputs drained and judged.
    pub fn step(&self, before: &FoState, action: FoAction) -> FoState {
        let mut state = before.clone();
        state.last = StepFacts::default();
        let sup_before = &before.sup;
        // What a chain continuing after a failed open has already tried (a tick starts afresh):
        // the passed-over set of the spec's own transcription (FO-X2), not the core's.
        let mut tried = 0u8;
        // FO-X4 / FO-D5: the passed-over and probed sets before this step, as the spec's own
        // transcription (the oracle) holds them; a bit per URL index.
        let passed_before = self.url_bits(before.oracle.passed_over());
        let probed_before = self.url_bits(before.oracle.probed());
        let mut timed_out = false;
        // FO-X4: an open started before the dark host's loss was reported ended (one open in
        // flight: its timeout is not the chain's choice).
        let mut earlier_open_ended = false;
        let mut failed_origin = None;
        let mut transient = false;
        let mut outputs = Vec::new();
        // Who may open in this step, as the spec reads the rules: the directory path only on a
        // directory update; the health path only on a tick that finds the channel unhealthy
        // with no open in flight, or right after its own open failed while still unhealthy.
        let mut origin = Origin::Health;
        let mut health_may_act = false;
        let mut tick_ran_health = false;
        match action {
            FoAction::Tick | FoAction::LateTick => {
                // The environment's own need: when the core asked to be woken (or, a bounded
                // number of times per run, half a tick after that).
                let next = state
                    .sup
                    .poll_timeout()
                    .unwrap_or(state.now.plus_ms(MODEL_CHECK_MS));
                let lateness = if action == FoAction::LateTick {
                    state.budget.late_ticks -= 1;
                    MODEL_TICK_LATENESS_MS
                } else {
                    0
                };
                let to = next.plus_ms(lateness).max(state.now);
                Self::advance(&mut state, to);
                state.env_acted_this_tick = false;
                state.opens_this_tick = 0;
                state.chain_failed = 0;
                outputs.extend(self.report_channel(&mut state));
                self.expire_records(&mut state);
                tick_ran_health = state.opening.is_none() && Self::spec_unhealthy(&state);
                health_may_act = tick_ran_health;
                outputs.extend(state.feed(Input::Tick));
            }
            FoAction::HostDown { host } | FoAction::HostUp { host } => {
                state
                    .host_up
                    .set(usize::from(host), matches!(action, FoAction::HostUp { .. }));
                state.budget.host_events -= 1;
                state.env_acted_this_tick = true;
            }
            FoAction::OpenSucceeds => {
                // The environment answers the open the core has in flight.
                let url = state.sup.open_in_flight().expect("enabled").url().clone();
                let listed = self.spec_list(&state).contains(&url);
                let current_before = state.sup.current().cloned();
                outputs.extend(state.feed(Input::OpenSucceeded(&url)));
                // FO-R5a, judged from the spec's own list at the moment of adoption.
                let current_after = state.sup.current();
                state.last.adopted_unlisted = current_after != current_before.as_ref()
                    && current_after.is_some_and(|c| !self.spec_list(&state).contains(c));
                state.last.unlisted_open_closed =
                    !listed && current_after == current_before.as_ref();
                self.record_success(&mut state, &url);
            }
            FoAction::OpenFails | FoAction::OpenTimesOut => {
                let pending = state.sup.open_in_flight().expect("enabled").clone();
                if self.is_live(&state, pending.url()) {
                    transient = true;
                    state.budget.transient_failures -= 1;
                    state.env_acted_this_tick = true;
                }
                timed_out = action == FoAction::OpenTimesOut;
                earlier_open_ended = before
                    .dark_since
                    .is_some_and(|since| pending.started_at() < since);
                let failure = if action == FoAction::OpenTimesOut {
                    let at = pending
                        .started_at()
                        .plus_ms(MODEL_UP_TIMEOUT_MS)
                        .max(state.now);
                    Self::advance(&mut state, at);
                    OpenFailure::TimedOut
                } else {
                    OpenFailure::Failed
                };
                self.expire_records(&mut state);
                tried = before
                    .oracle
                    .passed_over()
                    .iter()
                    .chain([pending.url()])
                    .filter_map(|url| self.url_index_of(url))
                    .fold(0, |bits, url| bits | 1 << url);
                if let Some(u) = self.url_index_of(pending.url()) {
                    state.chain_failed |= 1 << u;
                }
                outputs.extend(state.feed(Input::OpenFailed(pending.url(), failure)));
                let failed = self.record_failure(&mut state, pending.url());
                failed_origin = failed.map(|open| open.origin);
                state.last.exempt_open_failed = failed.is_some_and(|open| open.exempt);
                health_may_act =
                    failed_origin == Some(Origin::Health) && Self::spec_unhealthy(&state);
            }
            FoAction::SignedDirectory { list, signing } => {
                // A refused update changes nothing but the step's facts: it spends no budget
                // (the environment still acts once per tick), so it adds a state per state,
                // not a copy of the run after it.
                state.env_acted_this_tick = true;
                origin = Origin::Directory;
                let urls = self.directory_list(list).to_vec();
                let now_unix_s = MODEL_EPOCH_UNIX_S + state.now.as_ms() / 1_000;
                let last = u64::from(state.sequence);
                let (sequence, expires_at_unix_s) = match signing {
                    Signing::SameSequence => (last, MODEL_FRESH_EXPIRY_UNIX_S),
                    Signing::Replayed => (last - 1, MODEL_FRESH_EXPIRY_UNIX_S + 3_600),
                    Signing::Expired => (last + 1, now_unix_s),
                };
                // FO-S1 as the spec reads it: an equal sequence only for the same list; a
                // lower one never, whatever its expiry; an expired one never.
                let spec_takes = signing == Signing::SameSequence && list == state.list;
                let taken = self.freshness_takes(&state, sequence, &urls, expires_at_unix_s);
                state.last.freshness_wrong = taken != spec_takes;
                state.last.stale_directory_refused = !taken && !spec_takes;
                if taken {
                    state.budget.directory_updates -= 1;
                    if !urls.is_empty() {
                        state.list = list;
                    }
                    state.sequence = u8::try_from(sequence).unwrap_or(u8::MAX);
                    outputs.extend(state.feed(Input::Directory(&urls)));
                }
            }
            FoAction::Directory { list } => {
                state.env_acted_this_tick = true;
                state.budget.directory_updates -= 1;
                origin = Origin::Directory;
                let urls = self.directory_list(list).to_vec();
                // FO-S1: the next sequence, unexpired: the spec takes it (the empty list is
                // refused by the list rule before freshness, as the adapter does).
                if !urls.is_empty() {
                    let sequence = u64::from(state.sequence) + 1;
                    let taken =
                        self.freshness_takes(&state, sequence, &urls, MODEL_FRESH_EXPIRY_UNIX_S);
                    state.last.freshness_wrong = !taken;
                    state.sequence = state.sequence.saturating_add(1);
                }
                // An empty list is rejected: the last list stays.
                if !urls.is_empty() {
                    state.list = list;
                }
                outputs.extend(state.feed(Input::Directory(&urls)));
                let given = &self.list_ids[usize::from(list)];
                state.last.unlisted_cooling_kept =
                    state.cycles.iter().zip(0u8..).any(|(cycle, url)| {
                        cycle.is_some_and(|c| c.until > state.now) && !given.contains(&url)
                    });
            }
            FoAction::ChannelReport { report } => {
                state.env_acted_this_tick = true;
                state.budget.channel_reports -= 1;
                let current = self.spec_current(&state).clone();
                let (report, _) = report.channel_state();
                Self::note_report(&mut state, report);
                outputs.extend(state.feed(Input::Channel(&current, report)));
            }
            FoAction::OddTime { offset_ms } => {
                state.budget.odd_time_steps -= 1;
                let at = self.odd_instant(&state, offset_ms).expect("enabled");
                Self::advance(&mut state, at);
                self.expire_records(&mut state);
            }
        }
        self.judge(
            sup_before,
            &mut state,
            outputs,
            Judged {
                origin,
                health_may_act,
                tick_ran_health,
                passed_before,
                probed_before,
            },
            tried,
        );
        self.update_stall(action, failed_origin, transient, &mut state);
        self.update_recovery(transient, timed_out, &mut state);
        // A directory-path open (FO-D1: the refresh knows nothing of health) that ends also
        // restarts the clock: a refresh putting the dark host's other URL first costs its
        // `UP_TIMEOUT_MS` (written down in docs/ASSURANCE.md).
        let directory_open_ended = failed_origin == Some(Origin::Directory);
        self.update_dark(
            transient || earlier_open_ended || directory_open_ended,
            &mut state,
        );
        state
    }

    /// Whether a tick [`MODEL_TICK_LATENESS_MS`] late could decide otherwise than the tick on
    /// time: a threshold of the core lies in (due, due + lateness].
    pub(super) fn late_tick_matters(&self, state: &FoState) -> bool {
        let Some(due) = state.sup.poll_timeout() else {
            return false;
        };
        let due = due.max(state.now);
        state
            .sup
            .next_change_at(due)
            .is_some_and(|at| at <= due.plus_ms(MODEL_TICK_LATENESS_MS))
    }

    /// FO-S1: whether the core's freshness rule takes a signed directory, given the last
    /// accepted one as the adapter keeps it (the spec's list and sequence).
    fn freshness_takes(
        &self,
        state: &FoState,
        sequence: u64,
        urls: &[RelayUrl],
        expires_at_unix_s: u64,
    ) -> bool {
        let accepted = AcceptedDirectory {
            sequence: u64::from(state.sequence),
            relays: self.spec_list(state).to_vec(),
            expires_at_unix_s: MODEL_FRESH_EXPIRY_UNIX_S,
        };
        let now_unix_s = MODEL_EPOCH_UNIX_S + state.now.as_ms() / 1_000;
        check_candidate_list(urls).is_ok()
            && check_freshness(
                Some(&accepted),
                sequence,
                urls,
                expires_at_unix_s,
                now_unix_s,
            )
            .is_ok()
    }

    /// A success the environment gave: the channel the spec saw current is left (a new
    /// switched-away cycle for it, one more switch), the target's cycle ends, and the target
    /// is current, on a fresh (healthy) channel.
    fn record_success(&self, state: &mut FoState, url: &RelayUrl) {
        let Some(open) = state.opening.take() else {
            state.last.record_differs = true;
            return;
        };
        if usize::from(open.url) >= self.urls.len() || &self.urls[usize::from(open.url)].0 != url {
            state.last.record_differs = true;
        }
        // FO-R5a, the spec's own reading: an open whose URL is not in the list the spec last
        // fed is closed when it comes up; the channel, the cycles and the tallies stay.
        if !self.spec_list_ids(state).contains(&open.url) {
            return;
        }
        let cooldown_ms = state.variant.thresholds().cooldown_ms;
        state.cycles[usize::from(state.current)] = Some(CycleRecord {
            kind: CooldownKind::SwitchedAway,
            until: state.now.plus_ms(cooldown_ms),
            exempted: false,
        });
        state.cycles[usize::from(open.url)] = None;
        state.current = open.url;
        let t = &mut state.tally;
        t.switches = t.switches.saturating_add(1);
        t.exempt_switches = t.exempt_switches.saturating_add(u8::from(open.exempt));
        t.probe_switches = t.probe_switches.saturating_add(u8::from(open.probe));
        Self::note_report(state, ChannelState::Healthy);
    }

    /// A failure the environment gave: one more failed open; a failed non-probe open starts an
    /// open-failed cycle at the failure instant (FO-D2), and a failed exempt open has spent
    /// the exemption of that new cycle (FO-D4: "the URL's cooldown restarts and it gets no
    /// further exemption in that cycle"); a failed probe changes no cycle (FO-X3).
    fn record_failure(&self, state: &mut FoState, url: &RelayUrl) -> Option<SpecOpen> {
        let Some(open) = state.opening.take() else {
            state.last.record_differs = true;
            return None;
        };
        if &self.urls[usize::from(open.url)].0 != url {
            state.last.record_differs = true;
        }
        state.tally.open_failed = state.tally.open_failed.saturating_add(1);
        if !open.probe {
            let cooldown_ms = state.variant.thresholds().cooldown_ms;
            state.cycles[usize::from(open.url)] = Some(CycleRecord {
                kind: CooldownKind::OpenFailed,
                until: state.now.plus_ms(cooldown_ms),
                exempted: open.exempt,
            });
        }
        Some(open)
    }

    /// The instant `offset_ms` around the core's next threshold, if it lies strictly between
    /// now and the next tick.
    pub(super) fn odd_instant(&self, state: &FoState, offset_ms: i8) -> Option<MonoMs> {
        let threshold = state.sup.next_change_at(state.now)?;
        let at = MonoMs(threshold.as_ms().checked_add_signed(i64::from(offset_ms))?);
        let next_tick = state.sup.poll_timeout()?;
        (at > state.now && at < next_tick).then_some(at)
    }

    /// The channel's report before a tick, about the channel the spec saw current.
    fn report_channel(&self, state: &mut FoState) -> Vec<Output> {
        let current = self.spec_current(state).clone();
        if self.is_live_id(state, state.current) {
            if state.attempts > 0 {
                Self::note_report(state, ChannelState::Healthy);
                return state.feed(Input::Channel(&current, ChannelState::Healthy));
            }
            Vec::new()
        } else {
            // Attempts grow past MIN_ATTEMPTS by one, so "above" is explored too.
            let cap = state.variant.thresholds().min_attempts.max(1) + 1;
            let report = ChannelState::Backoff {
                attempts: (state.attempts + 1).min(cap),
            };
            Self::note_report(state, report);
            state.feed(Input::Channel(&current, report))
        }
    }

    /// A cycle ends when its cooldown does.
    fn expire_records(&self, state: &mut FoState) {
        let now = state.now;
        for cycle in &mut state.cycles {
            if cycle.is_some_and(|c| c.until <= now) {
                *cycle = None;
            }
        }
    }

    fn judge(
        &self,
        sup_before: &Supervisor,
        state: &mut FoState,
        outputs: Vec<Output>,
        judged: Judged,
        tried: u8,
    ) {
        let at = state.now;
        let t = state.variant.thresholds();
        let mut switched = false;
        for output in outputs {
            match output {
                Output::Action(ChannelAction::Open {
                    url, exempt, probe, ..
                }) => {
                    state.last.opens_started += 1;
                    state.opens_this_tick = state.opens_this_tick.saturating_add(1);
                    state.opens_this_instant = state.opens_this_instant.saturating_add(1);
                    if probe {
                        state.tally.probe_opens = state.tally.probe_opens.saturating_add(1);
                    }
                    let origin = judged.origin;
                    if origin == Origin::Health {
                        state.last.health_opened = true;
                        if !judged.health_may_act {
                            state.last.health_acted_out_of_turn = true;
                        }
                    }
                    // FO-X3a: the in-tick continuation skips the URLs that failed in this
                    // tick's chain (the exemption step and the probe step alike).
                    let in_chain = state.chain_failed;
                    let expected = self.expected_exempt_target(state, at, in_chain);
                    let first_clean = self
                        .spec_list_ids(state)
                        .iter()
                        .copied()
                        .find(|&u| state.current != u && !Self::spec_cooling(state, u, at));
                    let (chain_first_clean, other_host_clean) =
                        self.first_clean_in_chain_order(state, at, judged.passed_before | tried);
                    let expected_probe =
                        self.expected_probe_target(state, at, judged.probed_before, in_chain);
                    // `None`: a URL outside the universe (FO-R5 and the record report it).
                    let url_id = self.url_index_of(&url);
                    let cycle = url_id.and_then(|u| state.cycles[usize::from(u)]);
                    let target_was_cooling = cycle.is_some_and(|c| c.until > at);
                    let listed = self.spec_list(state).contains(&url);
                    state.last.open = Some(OpenFact {
                        origin,
                        exempt,
                        probe,
                        listed,
                        target_was_cooling,
                        target_was_exempted_this_cycle: exempt && cycle.is_some_and(|c| c.exempted),
                        clean_candidate_existed: first_clean.is_some(),
                        expected_exempt_target: !exempt || (url_id.is_some() && expected == url_id),
                        first_clean_in_chain_order: exempt
                            || probe
                            || (url_id.is_some() && chain_first_clean == url_id),
                        suspect_host_before_other_host: !exempt
                            && !probe
                            && other_host_clean
                            && url_id.is_some_and(|u| {
                                self.suspect_host(state, u, at, judged.passed_before | tried)
                            }),
                        probe_of_unspent_exemption: probe && !cycle.is_some_and(|c| c.exempted),
                        expected_probe_target: !probe
                            || (url_id.is_some() && expected_probe == url_id),
                        since_previous_probe_ms: if probe {
                            url_id
                                .and_then(|u| state.last_probe_at[usize::from(u)])
                                .map(|t| at.since_ms(t))
                        } else {
                            None
                        },
                        probe_of_url_failed_in_chain: probe
                            && url_id.is_some_and(|u| state.chain_failed & (1 << u) != 0),
                        clean_reopen_after_expiry: t.cooldown_ms > 0
                            && origin == Origin::Health
                            && !exempt
                            && !probe
                            && url_id.is_some_and(|u| tried & (1 << u) != 0),
                    });
                    if let Some(u) = url_id.map(usize::from) {
                        if probe {
                            state.last_probe_at[u] = Some(at);
                        }
                        if exempt {
                            if let Some(cycle) = &mut state.cycles[u] {
                                cycle.exempted = true;
                            }
                        }
                    }
                    if listed {
                        state.opening = Some(SpecOpen {
                            url: self.url_index(&url),
                            origin,
                            exempt,
                            probe,
                        });
                    } else {
                        // FO-R5 reports it; the record cannot name a URL outside the universe.
                        state.last.record_differs = true;
                    }
                }
                // FO-R5a: closing the unlisted channel that just came up is not a switch.
                Output::Action(ChannelAction::Close { url })
                    if state.last.unlisted_open_closed && !self.spec_list(state).contains(&url) => {
                }
                Output::Action(ChannelAction::Close { .. }) => switched = true,
                Output::Event(event) => {
                    match &event {
                        // Witnesses only: the spec's record follows the actions, not events.
                        Event::Switched(record) => {
                            state.last.exempt_switch = record.exemption.is_some();
                            state.last.probe_switch = record.probe;
                            state.last.directory_switch = record.origin == Origin::Directory;
                        }
                        Event::Skipped(Skip::StillCooling {
                            origin: Origin::Directory,
                            ..
                        }) => state.last.directory_refused_by_cooldown = true,
                        Event::Skipped(Skip::NoCandidate { .. }) => {
                            state.last.no_candidate_line = true;
                            // FO-D6: the line only on a no-candidate check of the health path,
                            // at most once per GRACE_MS.
                            if !judged.tick_ran_health {
                                state.last.health_acted_out_of_turn = true;
                            }
                            if state
                                .skip_line_at
                                .is_some_and(|last| at.since_ms(last) < t.grace_ms)
                            {
                                state.last.skip_line_too_soon = true;
                            }
                            state.skip_line_at = Some(at);
                        }
                        Event::Skipped(Skip::ProbeRoundFailed { interval_ms, .. }) => {
                            state.last.probe_round_failed = true;
                            // FO-X3: the interval grows from the requirement text, computed by
                            // the oracle (never by the core's helper); the oracle has counted
                            // this round already.
                            let base = state.oracle.text_interval_ms(state.oracle.rounds_failed());
                            let cut = if state.variant == Variant::ProbeJitter {
                                base / 4
                            } else {
                                0
                            };
                            if *interval_ms != base - cut {
                                state.last.probe_interval_wrong = true;
                            }
                        }
                        _ => {}
                    }
                    if renders_with_prefix(&event, SWITCH_PREFIX) {
                        state.switch_lines += 1;
                    }
                }
            }
        }
        // FO-D7: a tick that ran the health path and started no open is a no-candidate check.
        if judged.tick_ran_health && state.last.opens_started == 0 {
            state.tally.no_candidate_checks = state.tally.no_candidate_checks.saturating_add(1);
            // FO-H-1, the other direction: due and unhealthy, the tick must act (open, or
            // count the check).
            if state.sup.counters().no_candidate_checks == sup_before.counters().no_candidate_checks
            {
                state.last.health_failed_to_act = true;
            }
        }
        self.expire_records(state);
        // Only the probes of the last PROBE_MIN_MS matter to the storm bound.
        for probed_at in &mut state.last_probe_at {
            if probed_at.is_some_and(|t| at.since_ms(t) >= MODEL_PROBE_MIN_MS) {
                *probed_at = None;
            }
        }
        // The skip line's throttle matters for GRACE_MS only.
        if state
            .skip_line_at
            .is_some_and(|last| at.since_ms(last) >= t.grace_ms)
        {
            state.skip_line_at = None;
        }
        // FO-D2a / FO-D4: what cools in the core (kind, until, exemption spent) is exactly what
        // the spec's record says cools.
        // As sets of (url, kind, until, exempted): every cooling core row is one spec record
        // (a URL once), and there are as many records.
        let now = state.now;
        let mut matched = 0u8;
        let mut differs = false;
        for (url, e) in state.sup.cooldown_rows() {
            if !e.is_cooling(now) {
                continue;
            }
            let row = CycleRecord {
                kind: e.kind(),
                until: e.until(),
                exempted: e.exempted_this_cycle(),
            };
            match self.url_index_of(url) {
                Some(u) if matched & (1 << u) == 0 && state.cycles[usize::from(u)] == Some(row) => {
                    matched |= 1 << u;
                }
                _ => differs = true,
            }
        }
        let records = state.cycles.iter().filter(|c| c.is_some()).count();
        state.last.cooldown_record_differs = differs || records != matched.count_ones() as usize;
        // Make-before-break: the core's channel and open in flight are those the spec saw.
        let spec_open = state.opening.map(|o| {
            (
                &self.urls[usize::from(o.url)].0,
                o.origin,
                o.exempt,
                o.probe,
            )
        });
        let core_open = state
            .sup
            .open_in_flight()
            .map(|o| (o.url(), o.origin(), o.exemption().is_some(), o.probe()));
        if state.sup.current() != Some(self.spec_current(state)) || core_open != spec_open {
            state.last.record_differs = true;
        }
        let (b, a) = (sup_before.counters(), state.sup.counters());
        state.last.counters_differ = !state.tally.matches(&a);
        state.last.counters_regressed = a.switches < b.switches
            || a.exempt_switches < b.exempt_switches
            || a.open_failed < b.open_failed
            || a.no_candidate_checks < b.no_candidate_checks
            || a.probe_opens < b.probe_opens
            || a.probe_switches < b.probe_switches;
        state.last.closed_without_switch = switched && a.switches == b.switches;
    }

    /// FO-X1/FO-X2 bookkeeping: a tick whose chain (the tick plus the health-path opens it
    /// leads to) ends unhealthy, with no open in flight, while a live eligible candidate exists,
    /// is a stalled tick. Directory-path opens are not part of a tick's chain. A transient
    /// failure of a live relay restarts the count: that relay was not reachable. All from the
    /// spec's own records (health, open in flight, list, current).
    fn update_stall(
        &self,
        action: FoAction,
        failed_origin: Option<Origin>,
        transient: bool,
        state: &mut FoState,
    ) {
        let chain_step = match action {
            FoAction::Tick => true,
            FoAction::OpenFails | FoAction::OpenTimesOut => failed_origin == Some(Origin::Health),
            FoAction::OpenSucceeds => {
                state.stall_ticks = 0;
                return;
            }
            _ => false,
        };
        if transient {
            state.stall_ticks = 0;
            return;
        }
        if !chain_step || state.opening.is_some() {
            return;
        }
        if Self::spec_unhealthy(state) && self.live_eligible_exists(state) {
            if action == FoAction::Tick || state.stall_ticks == 0 {
                state.stall_ticks = state.stall_ticks.saturating_add(1);
            }
        } else {
            state.stall_ticks = 0;
        }
    }

    /// FO-X4 bookkeeping, from the spec's own record: since when the current channel's host
    /// has been down after the channel reported its loss (the spec's `backoff_since`), while a
    /// listed URL on another host is live and clean. Started anew by a transient failure of a
    /// live open (the environment's, not the client's time) or by the end of an open started
    /// before it (one open in flight), ended when the condition breaks.
    fn update_dark(&self, transient: bool, state: &mut FoState) {
        let t = state.variant.thresholds();
        let current_host = self.urls[usize::from(state.current)].1;
        // At the requirement's thresholds: with `COOLDOWN_MS=0` FO-X2's passed-over rule comes
        // first (a clean URL that failed earlier waits for the chain to move on).
        let dark = spec_supervisor_on(&t)
            && t.cooldown_ms > 0
            && !state.host_up.is_up(current_host)
            && state.backoff_since.is_some()
            && self.spec_list_ids(state).iter().any(|&url| {
                self.urls[usize::from(url)].1 != current_host
                    && self.is_live_id(state, url)
                    && !Self::spec_cooling(state, url, state.now)
            });
        state.dark_since = match (dark, state.dark_since) {
            (false, _) => None,
            (true, _) if transient => Some(state.now),
            (true, None) => Some(state.now),
            (true, Some(since)) => Some(since),
        };
    }

    /// FO-X4's bound in this model, from the requirement's thresholds: the channel turning
    /// unhealthy after its loss (`GRACE_MS`), the tick that runs the chain (`CHECK_MS`), and the
    /// late ticks' lateness. The live relay's open succeeds at once here; a timed-out open of
    /// the dark host's other URL first would cost `UP_TIMEOUT_MS` and break it.
    pub fn dark_bound_ms(&self, variant: Variant) -> u64 {
        let t = variant.thresholds();
        t.grace_ms + t.check_ms + u64::from(self.params.max_late_ticks) * MODEL_TICK_LATENESS_MS
    }

    /// FO-X3 bookkeeping: the client is off a live channel while some listed relay is up.
    /// Measured only where probing is on and cooldown can drain the pool (the spec's own
    /// configuration, list and current URL).
    fn update_recovery(&self, transient: bool, timed_out: bool, state: &mut FoState) {
        let t = state.variant.thresholds();
        let on_live = self.is_live_id(state, state.current);
        let live_listed = self
            .spec_list_ids(state)
            .iter()
            .any(|&url| state.current != url && self.is_live_id(state, url));
        // FO-X3a counts from the moment a listed relay is reachable while the client is off
        // a live channel and (FO-H-1) its channel is unhealthy: the grace before that is
        // FO-H-1's, not the recovery's.
        let waiting = spec_probing_on(&t)
            && spec_supervisor_on(&t)
            && t.cooldown_ms > 0
            && !on_live
            && live_listed
            && Self::spec_unhealthy(state);
        (state.recovery_wait_since, state.recovery_timeouts) =
            match (waiting, state.recovery_wait_since) {
                (false, _) => (None, 0),
                (true, _) if transient => (Some(state.now), 0),
                (true, None) => (Some(state.now), 0),
                (true, Some(since)) => (
                    Some(since),
                    state.recovery_timeouts.saturating_add(u8::from(timed_out)),
                ),
            };
    }

    /// FO-X3's bound in this model: the channel turning unhealthy (`GRACE_MS`), the exemption
    /// chain over the other candidates and each of the directory-path opens timing out, one
    /// probe interval at most (`PROBE_MAX_MS`) plus the tick that starts the round, and the
    /// probes of the dead candidates ahead of the live one timing out.
    /// Per variant: the directory-path opens counted are the ones that variant's runs may make
    /// ([`FailoverParams::directory_updates`]).
    pub fn recovery_bound_ms(&self, timeouts: u8) -> u64 {
        MODEL_PROBE_MAX_MS
            + MODEL_CHECK_MS
            + (u64::from(timeouts) + 1) * MODEL_UP_TIMEOUT_MS
            + u64::from(self.params.max_late_ticks) * MODEL_TICK_LATENESS_MS
    }

    pub fn init_state(&self, variant: Variant) -> FoState {
        let mut sup = Supervisor::new(variant.thresholds(), MonoMs::ZERO);
        let list: Vec<RelayUrl> = self.urls.iter().map(|(u, _)| u.clone()).collect();
        sup.handle_directory(MonoMs::ZERO, &list, DirectorySource::Signed);
        sup.handle_open_succeeded(MonoMs::ZERO, &list[0]);
        while sup.poll_output().is_some() {}
        let mut oracle = FoOracle::new(variant.thresholds(), MonoMs::ZERO);
        oracle.directory(MonoMs::ZERO, &list);
        oracle.open_succeeded(MonoMs::ZERO, &list[0]);
        if variant == Variant::ProbeJitter {
            sup.set_probe_jitter_ms(u64::MAX);
            oracle.set_probe_jitter_ms(u64::MAX);
        }
        let p = &self.params;
        FoState {
            variant,
            sup,
            now: MonoMs::ZERO,
            host_up: HostsUp::all(p.urls_per_host.len()),
            attempts: 0,
            backoff_since: None,
            switch_lines: 0,
            stall_ticks: 0,
            opens_this_tick: 0,
            opens_this_instant: 0,
            env_acted_this_tick: false,
            budget: Budget {
                host_events: p.max_host_events,
                directory_updates: p.directory_updates(variant),
                channel_reports: p.max_channel_reports,
                odd_time_steps: p.max_odd_time_steps,
                transient_failures: p.max_transient_failures,
                late_ticks: p.max_late_ticks,
            },
            list: self.full_list,
            current: 0,
            opening: None,
            tally: Tally::default(),
            skip_line_at: None,
            cycles: [None; MAX_MODEL_URLS],
            last_probe_at: [None; MAX_MODEL_URLS],
            recovery_wait_since: None,
            recovery_timeouts: 0,
            dark_since: None,
            chain_failed: 0,
            sequence: 1,
            oracle,
            last: StepFacts::default(),
            core_panic: None,
        }
    }

    /// [`Self::step`] under [`crate::caught::caught`]: a core invariant that fires in the step
    /// leads to the state before it with the message recorded, which the property
    /// [`crate::caught::CORE_INVARIANTS`] reports.
    pub fn caught_step(&self, state: &FoState, action: FoAction) -> FoState {
        crate::caught::caught(|| self.step(state, action)).unwrap_or_else(|message| {
            let mut next = state.clone();
            next.last = StepFacts::default();
            next.core_panic = Some(message);
            next
        })
    }
}

/// What `judge` needs to know about the step, as the spec reads the rules.
#[derive(Debug, Clone, Copy)]
struct Judged {
    /// The origin of any open this step starts.
    origin: Origin,
    /// The health path may act in this step (FO-H-1).
    health_may_act: bool,
    /// A tick ran the health path: if it opens nothing, that is a no-candidate check (FO-D7).
    tick_ran_health: bool,
    /// The passed-over set before the step (FO-X2, FO-X4), a bit per URL index.
    passed_before: u8,
    /// The URLs probed in the round under way before the step (FO-X3, FO-D5).
    probed_before: u8,
}
