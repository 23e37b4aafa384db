//! HO requirement group "When" (`REQUIREMENTS.md` part HO): HO-1, HO-2, HO-3: move a host only
//! while no relay client uses its source; the real connection state; the policy.
//! Each test name carries its requirement ID (`ho_s3_…` for HO-S3); shared setup is in
//! `handoff_rig`.

mod handoff_rig;

use handoff_rig::*;
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

// ---- HO-1 -----------------------------------------------------------------------------------

#[test]
fn ho_1_a_persistent_client_defers_the_move_forever() {
    let mut w = World::new();
    let _client = w.src.handle_acquire(WorkKind::ClientConn).expect("client");
    for _ in 0..200 {
        w.advance(3_600_000);
        let req = w.request();
        assert!(matches!(
            w.begin(&req),
            Begin::Answered(HandoffReply::Busy { .. })
        ));
    }
    assert!(w.open());
    assert!(
        w.seen.log.is_empty(),
        "no action: nothing closed, nothing run"
    );
}

#[test]
fn ho_1_retire_only_happens_over_zero_tickets() {
    // The only closing output follows a barrier, which only stands over zero tickets.
    let mut w = World::new();
    let t = w.src.handle_acquire(WorkKind::Splice).expect("splice");
    let req = w.request();
    let _ = w.begin(&req);
    assert!(w.seen.retired.is_empty());
    assert_eq!(w.src.handle_release(t), ReleaseReport::Released);
    w.start();
    assert_eq!(w.src.gate().counters().total(), 0);
    w.run_txn();
    assert_eq!(w.seen.retired.len(), 1);
}

// ---- HO-2 -----------------------------------------------------------------------------------

#[test]
fn ho_2_open_desktop_control_is_no_reason_to_wait() {
    let mut w = World::new();
    assert!(w.src.session_open(), "desktop control stays open");
    let last = w.src.handle_acquire(WorkKind::ClientConn).expect("phone");
    let _ = w.src.handle_heartbeat(Heartbeat::Ping);
    assert_eq!(w.src.handle_release(last), ReleaseReport::Released);
    // 1 ms after the last client left (no 30 s background grace): the move may start.
    w.advance(1);
    assert!(matches!(w.begin(&w.request()), Begin::Started(_)));
}

#[test]
fn ho_2_idleness_is_the_real_connection_state_at_the_same_instant() {
    let mut w = World::new();
    let c = w.src.handle_acquire(WorkKind::ClientConn).expect("client");
    assert!(!w.src.gate().is_idle());
    assert_eq!(w.src.handle_release(c), ReleaseReport::Released);
    assert!(
        w.src.gate().is_idle(),
        "no timer between release and idleness"
    );
}

// ---- HO-3 -----------------------------------------------------------------------------------

#[test]
fn ho_3_improvement_needs_25_ms_and_20_percent() {
    assert_eq!(
        check_improvement(125, 100),
        Ok(()),
        "25 ms and exactly 20 %"
    );
    assert_eq!(
        check_improvement(120, 96),
        Err(Ineligible::ImprovementBelowMs)
    );
    assert_eq!(
        check_improvement(200, 170),
        Err(Ineligible::ImprovementBelowPercent),
        "30 ms but 15 %"
    );
    assert_eq!(
        check_improvement(126, 101),
        Err(Ineligible::ImprovementBelowPercent)
    );
    assert_eq!(
        check_improvement(60, 120),
        Err(Ineligible::ImprovementBelowMs)
    );
    let now = MonoMs(10_000);
    let (mut c, t) = view(now);
    c.measurement = Some((
        TGT,
        Measurement {
            measured_at: now,
            current_rtt_ms: 200,
            target_rtt_ms: 170,
        },
    ));
    assert_eq!(eval(now, &c, &t), Err(Ineligible::ImprovementBelowPercent));
}

#[test]
fn ho_3_measurement_must_be_fresh() {
    let now = MonoMs(1_000_000);
    let (mut c, t) = view(now);
    c.measurement = Some((
        TGT,
        Measurement {
            measured_at: MonoMs(now.0 - FRESHNESS_MS),
            ..good_measurement(now)
        },
    ));
    assert!(eval(now, &c, &t).is_ok(), "exactly at the window is fresh");
    c.measurement = Some((
        TGT,
        Measurement {
            measured_at: MonoMs(now.0 - FRESHNESS_MS - 1),
            ..good_measurement(now)
        },
    ));
    assert_eq!(eval(now, &c, &t), Err(Ineligible::StaleMeasurement));
    c.measurement = None;
    assert_eq!(eval(now, &c, &t), Err(Ineligible::NoMeasurement));
}

#[test]
fn ho_3_cohort_bucket_and_percentage_from_the_command() {
    let inside = host_with_bucket(|b| b < 50);
    let outside = host_with_bucket(|b| b >= 50);
    assert_eq!(check_cohort(inside, 50), Ok(()));
    assert_eq!(check_cohort(outside, 50), Err(Ineligible::NotInCohort));
    assert_eq!(check_cohort(inside, 0), Err(Ineligible::NotInCohort));
    assert_eq!(check_cohort(outside, 100), Ok(()));
    assert_eq!(
        check_cohort(inside, 101),
        Err(Ineligible::InvalidCohortPercent)
    );
    // Buckets are deterministic and spread over 0..100.
    let buckets: std::collections::BTreeSet<u8> =
        (0..2_000).map(|h| cohort_bucket(HostId(h))).collect();
    assert_eq!(buckets.len(), 100);
    assert_eq!(cohort_bucket(HostId(42)), cohort_bucket(HostId(42)));
    // The store transaction re-checks with the percentage carried in the command.
    let mut w = World::new();
    let pct = cohort_bucket(HOST); // HOST's bucket is not < its own value
    let req = HandoffRequest::new(w.src.authority(), TGT, pct, good_measurement(w.now));
    w.begin(&req);
    assert_eq!(
        w.run_txn(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::NotInCohort)
        }
    );
}

#[test]
fn ho_3_switch_capacity_cooldown_each_name_their_reason() {
    let now = MonoMs(1_000_000);
    let (c, t) = view(now);
    assert!(eval(now, &c, &t).is_ok());
    let off = DirectorPolicy {
        enabled: false,
        ..director()
    };
    assert_eq!(evaluate(now, &off, &c, Some(&t)), Err(Ineligible::Disabled));
    let full = TargetView { load: 10, ..t };
    assert_eq!(eval(now, &c, &full), Err(Ineligible::TargetAtCapacity));
    let cooling = CandidateView {
        cooldown_until: Some(now.plus_ms(1)),
        ..c
    };
    assert_eq!(eval(now, &cooling, &t), Err(Ineligible::CoolingDown));
    let cooled = CandidateView {
        cooldown_until: Some(now),
        ..c
    };
    assert!(eval(now, &cooled, &t).is_ok());
    let same = CandidateView {
        measurement: Some((SRC, good_measurement(now))),
        ..c
    };
    assert_eq!(eval(now, &same, &t), Err(Ineligible::SameCell));
    assert_eq!(
        evaluate(now, &director(), &c, None),
        Err(Ineligible::UnknownTarget)
    );
}

#[test]
fn ho_3_store_transaction_rechecks_the_policy() {
    let mut w = World::new();
    let mut req = w.request();
    req.measurement.measured_at = MonoMs(w.now.0 - FRESHNESS_MS - 1);
    w.begin(&req);
    assert_eq!(
        w.run_txn(),
        TxnOutcome::RolledBack {
            reason: AbortReason::Policy(Ineligible::StaleMeasurement)
        }
    );
    assert!(w.open());
}

/// HO-3: the cohort bucket is a contract with the SQL stores (they re-check it): splitmix64's
/// first output for the host id as seed, mod 100. 0xE220A8397B1DCDAF and 0x910A2DEC89025CC1 are
/// splitmix64's published first outputs for seeds 0 and 1.
#[test]
fn ho_3_cohort_bucket_is_splitmix64_of_the_host_id_mod_100() {
    assert_eq!(
        cohort_bucket(HostId(0)),
        (0xE220_A839_7B1D_CDAF_u64 % 100) as u8
    );
    assert_eq!(
        cohort_bucket(HostId(1)),
        (0x910A_2DEC_8902_5CC1_u64 % 100) as u8
    );
}
