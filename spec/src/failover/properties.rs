//! The properties, each named by its requirement ID, each read as one predicate beside its
//! name (the table below, in the order the checker reports them). A predicate reads the state
//! or the facts of the step that led to it ([`StepFacts`], `s.last`). Unless an entry says
//! otherwise, those facts are recorded by `FailoverModel::judge` (`step.rs`), which compares
//! what the core did in the step with the spec's record; `s.last.open` is the open the step
//! started, read through [`open_ok`].

use super::*;

/// The open the step started, if any, passes `check`.
fn open_ok(state: &FoState, check: fn(&OpenFact) -> bool) -> bool {
    state.last.open.as_ref().is_none_or(check)
}

/// The properties, each named by its requirement ID.
pub fn failover_properties() -> Vec<Property<FailoverModel>> {
    let mut properties = failover_properties_before_caught();
    properties.push(Property::always(
        crate::caught::CORE_INVARIANTS,
        |_, s: &FoState| s.core_panic.is_none(),
    ));
    properties
}

fn failover_properties_before_caught() -> Vec<Property<FailoverModel>> {
    vec![
        Property::always(
            "FO-D1 the directory path never opens a cooling URL",
            |_, s: &FoState| {
                open_ok(s, |o| {
                    o.origin != Origin::Directory || !o.target_was_cooling
                })
            },
        ),
        Property::always(
            "FO-R5 every open targets a URL of the current list",
            |_, s: &FoState| open_ok(s, |o| o.listed),
        ),
        Property::always(
            "FO-D2 one cooldown entry per URL, until = since + cooldown",
            |_, s: &FoState| {
                let cooldown_ms = s.variant.thresholds().cooldown_ms;
                s.sup
                    .cooldown_rows()
                    .all(|(_, e)| e.until().since_ms(e.since()) == cooldown_ms)
            },
        ),
        // Recorded by `judge`'s cooldown comparison (FO-D2a / FO-D4).
        Property::always(
            "FO-D2a cooldown keyed by URL: what cools is the spec's record, list changes included",
            |_, s: &FoState| !s.last.cooldown_record_differs,
        ),
        Property::always(
            "FO-D3 no exemption while a clean candidate exists",
            |_, s: &FoState| open_ok(s, |o| !(o.exempt || o.probe) || !o.clean_candidate_existed),
        ),
        Property::always(
            "FO-D4 at most one exemption per URL per cooldown cycle",
            |_, s: &FoState| open_ok(s, |o| !o.exempt || !o.target_was_exempted_this_cycle),
        ),
        Property::always(
            "FO-D5 exemption order: switched-away, then earliest until",
            |_, s: &FoState| open_ok(s, |o| o.expected_exempt_target),
        ),
        Property::always(
            "FO-D6 only the health path exempts or probes, only a cooling URL",
            |_, s: &FoState| {
                open_ok(s, |o| {
                    (o.exempt || o.probe) == (o.origin == Origin::Health && o.target_was_cooling)
                        && !(o.exempt && o.probe)
                })
            },
        ),
        Property::always(
            "FO-D6-OFF no exempt open and no probe with EXEMPT=0",
            |_, s: &FoState| s.variant.thresholds().exempt || open_ok(s, |o| !o.exempt && !o.probe),
        ),
        Property::always(
            "FO-D6 no-candidate line at most once per GRACE_MS",
            |_, s: &FoState| !s.last.skip_line_too_soon,
        ),
        Property::always(
            "FO-D7 [relay-switch] lines == switches == tally; counters == tally, monotone",
            |_, s: &FoState| {
                s.switch_lines == s.sup.counters().switches
                    && s.switch_lines == u64::from(s.tally.switches)
                    && !s.last.counters_differ
                    && !s.last.counters_regressed
            },
        ),
        Property::always(
            "FO-H-1 the health path acts only when due and unhealthy",
            |_, s: &FoState| !s.last.health_acted_out_of_turn,
        ),
        Property::always(
            "FO-H-1 a tick acts when the channel is due and unhealthy",
            |_, s: &FoState| !s.last.health_failed_to_act,
        ),
        // Recorded by `step`'s `OpenSucceeds` (the open's URL left the list meanwhile).
        Property::always(
            "FO-R5a an open is adopted only while its URL is listed",
            |_, s: &FoState| !s.last.adopted_unlisted,
        ),
        Property::always(
            "FO-H-2 MIN_ATTEMPTS=0: the health path never acts",
            |_, s: &FoState| {
                s.variant.thresholds().min_attempts != 0
                    || (!s.last.health_opened
                        && !s.last.no_candidate_line
                        && s.tally.no_candidate_checks == 0
                        && s.sup.counters().no_candidate_checks == 0)
            },
        ),
        Property::always(
            "FO-X1 a live non-exempted candidate is reached within one tick of turning unhealthy",
            |_, s: &FoState| s.variant.thresholds().cooldown_ms == 0 || s.stall_ticks <= 1,
        ),
        Property::always(
            "FO-X1 at most 3(N-1)+2 opens at one instant",
            |m: &FailoverModel, s: &FoState| s.opens_this_instant <= m.instant_open_cap(),
        ),
        Property::always(
            "FO-X2 cooldown 0 never self-locks (same bound)",
            |_, s: &FoState| s.variant.thresholds().cooldown_ms != 0 || s.stall_ticks <= 1,
        ),
        Property::always(
            "FO-X2 at most 2(N-1)+1 opens per tick's chain and cooldown cycle",
            |m: &FailoverModel, s: &FoState| s.opens_this_tick <= m.chain_open_cap(s),
        ),
        Property::always(
            "FO-X2a with cooldown > 0 a clean open takes the first clean URL in chain order",
            |_, s: &FoState| {
                s.variant.thresholds().cooldown_ms == 0
                    || open_ok(s, |o| o.origin != Origin::Health || o.first_clean_in_chain_order)
            },
        ),
        Property::always(
            "FO-X4 a failing host's URL is never opened while another host's clean URL exists",
            |_, s: &FoState| {
                s.variant.thresholds().cooldown_ms == 0
                    || open_ok(s, |o| {
                        o.origin != Origin::Health || !o.suspect_host_before_other_host
                    })
            },
        ),
        Property::always(
            "FO-X4 on another host's live URL within GRACE + CHECK of a dark host's channel loss",
            |m: &FailoverModel, s: &FoState| {
                s.dark_since
                    .is_none_or(|since| s.now.since_ms(since) <= m.dark_bound_ms(s.variant))
            },
        ),
        Property::always(
            "FO-X3a bounded recovery: live within PROBE_MAX + CHECK + (k+1) UP_TIMEOUT of a relay coming up",
            |m: &FailoverModel, s: &FoState| {
                s.recovery_wait_since.is_none_or(|since| {
                    s.now.since_ms(since) <= m.recovery_bound_ms(s.recovery_timeouts)
                })
            },
        ),
        Property::always(
            "FO-X3 a probe only after the URL's exemption of this cycle is spent",
            |_, s: &FoState| open_ok(s, |o| !o.probe_of_unspent_exemption),
        ),
        Property::always(
            "FO-D5 probe order: a probe takes the first probeable URL in exemption order",
            |_, s: &FoState| open_ok(s, |o| o.expected_probe_target),
        ),
        Property::always(
            "FO-X3 no probe storm: a URL is probed at most once per PROBE_MIN_MS (less jitter)",
            |_, s: &FoState| {
                open_ok(s, |o| {
                    o.since_previous_probe_ms
                        .is_none_or(|gap| gap >= MODEL_PROBE_MIN_MS - MODEL_PROBE_MIN_MS / 4)
                })
            },
        ),
        // Recorded by `step`'s `SignedDirectory` and `Directory` arms.
        Property::always(
            "FO-S1 a signed directory is taken only when fresh: higher sequence, or equal with the same list; unexpired",
            |_, s: &FoState| !s.last.freshness_wrong,
        ),
        Property::always(
            "FO-X3a a probe never re-opens a URL that failed in the same tick's chain",
            |_, s: &FoState| open_ok(s, |o| !o.probe_of_url_failed_in_chain),
        ),
        Property::always(
            "FO-X3 the probe interval doubles from PROBE_MIN_MS up to PROBE_MAX_MS",
            |_, s: &FoState| !s.last.probe_interval_wrong,
        ),
        // Recorded by `FoState::feed` (`state.rs`), which hands every input to both.
        Property::always(
            "FO-ORACLE the core decides as the naive transcription of the FO rules",
            |_, s: &FoState| !s.last.oracle_differs,
        ),
        // Also: the core's channel and open in flight are the ones the spec saw (no switch, no
        // cancelled open, no open the spec did not see start). `record_differs` is recorded by
        // `judge` and by `record_success` / `record_failure` (the spec's record of an open's end).
        Property::always("one open in flight; make-before-break", |_, s: &FoState| {
            s.last.opens_started <= 1 && !s.last.closed_without_switch && !s.last.record_differs
        }),
        Property::sometimes("witness: exempt switch (FO-D6)", |_, s: &FoState| {
            s.last.exempt_switch
        }),
        // Recorded by `step`'s open failure arms (`OpenFails`, `OpenTimesOut`).
        Property::sometimes("witness: failed exemption (FO-D4)", |_, s: &FoState| {
            s.last.exempt_open_failed
        }),
        Property::sometimes(
            "witness: no-candidate skip line (FO-D6)",
            |_, s: &FoState| s.last.no_candidate_line,
        ),
        Property::sometimes(
            "witness: directory refused by cooldown (FO-D1)",
            |_, s: &FoState| s.last.directory_refused_by_cooldown,
        ),
        Property::sometimes("witness: directory switch (FO-D1)", |_, s: &FoState| {
            s.last.directory_switch
        }),
        // Recorded by `step`'s `Directory` arm.
        Property::sometimes(
            "witness: a URL left the list while cooling (FO-D2a)",
            |_, s: &FoState| s.last.unlisted_cooling_kept,
        ),
        // Recorded by `step`'s `SignedDirectory` arm.
        Property::sometimes(
            "witness: a stale signed directory refused (FO-S1)",
            |_, s: &FoState| s.last.stale_directory_refused,
        ),
        // Recorded by `step`'s `OpenSucceeds`.
        Property::sometimes(
            "witness: an unlisted open closed, never adopted (FO-R5a)",
            |_, s: &FoState| s.last.unlisted_open_closed,
        ),
        Property::sometimes("witness: probe switch (FO-X3)", |_, s: &FoState| {
            s.last.probe_switch
        }),
        Property::sometimes("witness: failed probe round (FO-X3)", |_, s: &FoState| {
            s.last.probe_round_failed
        }),
        Property::sometimes("witness: cooldown-0 failover (FO-X2)", |_, s: &FoState| {
            s.variant == Variant::CooldownZero && s.tally.switches > 0
        }),
        Property::sometimes(
            "witness: second cooldown cycle reached",
            |m: &FailoverModel, s: &FoState| {
                s.now.as_ms() >= m.params.horizon().as_ms() && s.tally.switches >= 2
            },
        ),
    ]
}

/// The FO-X2a witness, in the property list only when the horizon spans two cooldown cycles
/// (`--cycles 2`): a URL whose open failed earlier in a chain, passed over since, is opened
/// again as a clean candidate once its cooldown has expired, and (by the FO-X2a property) as
/// the first clean one in directory order. One cycle cannot reach it: the chain would have to
/// outlast the cooldown inside the horizon.
pub fn fo_x2a_expired_failed_candidate_witness() -> Property<FailoverModel> {
    Property::sometimes(
        "witness: a failed candidate whose cooldown expired is opened again (FO-X2a)",
        |_, s: &FoState| {
            s.last
                .open
                .as_ref()
                .is_some_and(|o| o.clean_reopen_after_expiry)
        },
    )
}
