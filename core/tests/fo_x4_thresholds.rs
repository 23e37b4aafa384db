//! FO-X4 / FO-CFG-1: dead-peer detection as thresholds. The heartbeat interval and its timeout
//! are `RELAY_FAILOVER_*` variables in the FO-CFG-1 form, and the thresholds are checked
//! together at start: a set that cannot meet `DEADLINE_MS` for a host that goes dark is refused,
//! naming the sum that exceeds it.

mod fo_rig;

use fo_rig::lookup;
use switchyard_core::failover::*;

#[test]
fn fo_x4_heartbeat_defaults_meet_the_deadline_for_a_dark_host() {
    let t = Thresholds::from_lookup(|_| None).expect("the defaults pass");
    assert_eq!(t.heartbeat_ms, 3_000);
    assert_eq!(t.heartbeat_timeout_ms, 9_000);
    assert_eq!(t, Thresholds::default());
    // 9000 + 15000 + 2000 = 26000 <= 30000: 4 s left for the open of the live relay.
    assert_eq!(t.dark_host_sum_ms(), 26_000);
    assert!(t.check_dark_host_deadline().is_ok());
    assert!(t.check_together().is_empty());
}

#[test]
fn fo_x4_fo_cfg_1_heartbeat_variables_are_taken_and_listed() {
    assert!(ALL_VARS.contains(&VAR_HEARTBEAT_MS));
    assert!(ALL_VARS.contains(&VAR_HEARTBEAT_TIMEOUT_MS));
    assert_eq!(VAR_HEARTBEAT_MS, "RELAY_FAILOVER_HEARTBEAT_MS");
    assert_eq!(
        VAR_HEARTBEAT_TIMEOUT_MS,
        "RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS"
    );
    let t = Thresholds::from_lookup(lookup(&[
        (VAR_HEARTBEAT_MS, "1000"),
        (VAR_HEARTBEAT_TIMEOUT_MS, "05000"),
    ]))
    .expect("valid");
    assert_eq!((t.heartbeat_ms, t.heartbeat_timeout_ms), (1_000, 5_000));
}

#[test]
fn fo_x4_fo_cfg_1_each_heartbeat_variable_rejects_bad_values_by_name() {
    for var in [VAR_HEARTBEAT_MS, VAR_HEARTBEAT_TIMEOUT_MS] {
        for value in [
            "20000 (drill)",
            "-1",
            "1e4",
            "",
            "99999999999999999999",
            "0",
        ] {
            let errors = Thresholds::from_lookup(lookup(&[(var, value)])).unwrap_err();
            assert_eq!(errors.len(), 1, "{var}={value:?}: {errors:?}");
            assert_eq!(errors[0].var(), var, "{var}={value:?}");
            let message = errors[0].to_string();
            assert!(message.contains(var), "{message}");
            assert!(message.contains(&format!("{value:?}")), "{message}");
        }
        // Overflow of the duration cap is "too large", not a wrap.
        let errors = Thresholds::from_lookup(lookup(&[(var, "1000000000001")])).unwrap_err();
        assert!(
            matches!(errors[0], ConfigError::TooLarge { .. }),
            "{errors:?}"
        );
        // Zero is named as such.
        let errors = Thresholds::from_lookup(lookup(&[(var, "0")])).unwrap_err();
        assert!(
            errors[0].to_string().contains("at least 1"),
            "{}",
            errors[0]
        );
    }
}

#[test]
fn fo_x4_heartbeat_timeout_must_be_at_least_twice_the_interval() {
    let errors = Thresholds::from_lookup(lookup(&[
        (VAR_HEARTBEAT_MS, "3000"),
        (VAR_HEARTBEAT_TIMEOUT_MS, "5999"),
    ]))
    .unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let message = errors[0].to_string();
    assert_eq!(errors[0].var(), VAR_HEARTBEAT_TIMEOUT_MS);
    assert!(
        message.contains("5999")
            && message.contains("RELAY_FAILOVER_HEARTBEAT_MS=3000")
            && message.contains("twice"),
        "{message}"
    );
    // Exactly twice is enough.
    Thresholds::from_lookup(lookup(&[
        (VAR_HEARTBEAT_MS, "3000"),
        (VAR_HEARTBEAT_TIMEOUT_MS, "6000"),
    ]))
    .expect("2 x HEARTBEAT_MS");
}

#[test]
fn fo_x4_thresholds_that_cannot_meet_the_deadline_for_a_dark_host_are_refused_naming_the_sum() {
    let errors = Thresholds::from_lookup(lookup(&[(VAR_DEADLINE_MS, "25000")])).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0].to_string(),
        "RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS (9000) + RELAY_FAILOVER_GRACE_MS (15000) + \
         RELAY_FAILOVER_CHECK_MS (2000) = 26000 ms exceeds RELAY_FAILOVER_DEADLINE_MS (25000): \
         a relay host that goes dark could not be left within the deadline"
    );
    assert_eq!(errors[0].var(), VAR_DEADLINE_MS);
    // Each term counts: one more millisecond of any of them crosses an exact fit.
    let exact = [
        (VAR_HEARTBEAT_TIMEOUT_MS, "9000"),
        (VAR_GRACE_MS, "15000"),
        (VAR_CHECK_MS, "2000"),
        (VAR_DEADLINE_MS, "26000"),
    ];
    Thresholds::from_lookup(lookup(&exact)).expect("an exact fit passes");
    for (i, (var, value)) in exact.iter().take(3).enumerate() {
        let mut pairs = exact.to_vec();
        let more = (value.parse::<u64>().expect("digits") + 1).to_string();
        pairs[i] = (var, more.as_str());
        let errors = Thresholds::from_lookup(lookup(&pairs)).unwrap_err();
        assert!(
            matches!(
                errors[0],
                ConfigError::DarkHostDeadline {
                    sum_ms: 26_001,
                    deadline_ms: 26_000,
                    ..
                }
            ),
            "{var}+1: {errors:?}"
        );
    }
    // The pub check is the one `from_lookup` runs (the command line runs it after its flags).
    let t = Thresholds {
        deadline_ms: 25_000,
        ..Thresholds::default()
    };
    assert!(t.check_dark_host_deadline().is_err());
}

#[test]
fn fo_x4_a_journal_start_record_from_before_the_heartbeat_thresholds_still_parses() {
    // A `start` record as journals wrote it before FO-X4: no heartbeat fields.
    let old = r#"{"start":{"thresholds":{"cooldown_ms":300000,"deadline_ms":30000,"grace_ms":15000,"min_attempts":3,"check_ms":2000,"up_timeout_ms":12000,"exempt":true,"probe_min_ms":15000,"probe_max_ms":60000}}}"#;
    let record: FailoverRecord = serde_json::from_str(old).expect("an old start record parses");
    assert_eq!(
        record,
        FailoverRecord::Start {
            thresholds: Thresholds::default()
        }
    );
    // And a new one round-trips with them.
    let t = Thresholds {
        heartbeat_ms: 500,
        heartbeat_timeout_ms: 1_500,
        ..Thresholds::default()
    };
    let text = serde_json::to_string(&FailoverRecord::Start { thresholds: t }).expect("json");
    assert!(text.contains("\"heartbeat_timeout_ms\":1500"), "{text}");
    let back: FailoverRecord = serde_json::from_str(&text).expect("parses");
    assert_eq!(back, FailoverRecord::Start { thresholds: t });
}
