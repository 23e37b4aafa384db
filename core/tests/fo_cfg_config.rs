//! FO-CFG: the thresholds (FO-CFG-1: digits only, errors name the variable and the value;
//! FO-CFG-2: `EXEMPT=0` and `MIN_ATTEMPTS=0` are two switches). Each name carries its ID.
//!
//! The quickcheck properties (`quickcheck!` below) cover the parser's whole input space.

mod fo_rig;

use fo_rig::*;
use quickcheck::{quickcheck, TestResult};
use switchyard_core::failover::*;

#[test]
fn fo_cfg_1_unset_variables_keep_the_production_defaults() {
    let t = Thresholds::from_lookup(|_| None).unwrap();
    assert_eq!(t.cooldown_ms, 300_000);
    assert_eq!(t.deadline_ms, 30_000);
    assert_eq!(t.grace_ms, 15_000);
    assert_eq!(t.min_attempts, 3);
    assert_eq!(t.check_ms, 2_000);
    assert_eq!(t.up_timeout_ms, 12_000);
    assert!(t.exempt);
}

#[test]
fn fo_cfg_1_digits_are_taken() {
    let t = Thresholds::from_lookup(lookup(&[
        (VAR_COOLDOWN_MS, "20000"),
        (VAR_MIN_ATTEMPTS, "5"),
        (VAR_EXEMPT, "0"),
        (VAR_CHECK_MS, "0250"),
    ]))
    .unwrap();
    assert_eq!(t.cooldown_ms, 20_000);
    assert_eq!(t.min_attempts, 5);
    assert!(!t.exempt);
    assert_eq!(t.check_ms, 250);
}

#[test]
fn fo_cfg_1_bad_values_are_rejected_naming_variable_and_value() {
    let bad = [
        "20000 (drill)",
        "-1",
        "1e4",
        "",
        " ",
        " 20000",
        "20000 ",
        "99999999999999999999",
        "+5",
        "0x10",
        "12.5",
        "２０００", // full-width digits are not ASCII digits
    ];
    for value in bad {
        for var in ALL_VARS {
            let errors = Thresholds::from_lookup(lookup(&[(var, value)])).unwrap_err();
            assert_eq!(errors.len(), 1, "{var}={value:?}");
            assert_eq!(errors[0].var(), var);
            let message = errors[0].to_string();
            assert!(message.contains(var), "{message}");
            assert!(message.contains(&format!("{value:?}")), "{message}");
        }
    }
}

#[test]
fn fo_cfg_1_semantic_checks_reject_busy_loop_and_impossible_values() {
    for (var, value) in [
        (VAR_CHECK_MS, "0"),
        (VAR_UP_TIMEOUT_MS, "0"),
        (VAR_DEADLINE_MS, "0"),
        (VAR_EXEMPT, "2"),
        (VAR_MIN_ATTEMPTS, "4294967296"),
        (VAR_COOLDOWN_MS, "1000000000001"),
    ] {
        let errors = Thresholds::from_lookup(lookup(&[(var, value)])).unwrap_err();
        assert_eq!(errors[0].var(), var, "{var}={value}");
    }
}

#[test]
fn fo_cfg_1_every_bad_variable_is_reported_at_once() {
    let errors =
        Thresholds::from_lookup(lookup(&[(VAR_GRACE_MS, "15s"), (VAR_CHECK_MS, "0")])).unwrap_err();
    let vars: Vec<_> = errors.iter().map(ConfigError::var).collect();
    assert_eq!(vars, vec![VAR_GRACE_MS, VAR_CHECK_MS]);
}

#[test]
fn fo_cfg_2_exempt_off_and_supervisor_off_are_different_switches() {
    let exempt_off = Thresholds::from_lookup(lookup(&[(VAR_EXEMPT, "0")])).unwrap();
    assert!(exempt_off.supervisor_enabled());
    assert!(!exempt_off.exempt);
    let supervisor_off = Thresholds::from_lookup(lookup(&[(VAR_MIN_ATTEMPTS, "0")])).unwrap();
    assert!(!supervisor_off.supervisor_enabled());
    assert!(supervisor_off.exempt);

    // EXEMPT=0 still switches to a clean candidate; MIN_ATTEMPTS=0 switches nothing.
    let mut rig = Rig::production(exempt_off);
    rig.current_dies();
    rig.tick();
    assert_eq!(rig.opening(), Some(A2));
    let mut rig = Rig::production(supervisor_off);
    rig.backoff(100);
    rig.advance(1_000_000).tick();
    assert_eq!(rig.opening(), None);
}

// ---- quickcheck: the threshold parser accepts exactly the digit strings that fit ----------

fn reference(text: &str, max: u64) -> Option<u64> {
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // u128 holds any 38-digit string; longer digit strings are surely too large.
    let value = if text.trim_start_matches('0').len() > 38 {
        return None;
    } else {
        text.parse::<u128>().ok()?
    };
    (value <= u128::from(max)).then_some(value as u64)
}

quickcheck! {
    fn fo_cfg_1_parser_accepts_exactly_digit_strings_that_fit(text: String) -> bool {
        parse_digits("X", &text, u64::MAX).ok() == reference(&text, u64::MAX)
    }

    fn fo_cfg_1_any_u64_rendered_in_decimal_round_trips(value: u64, zeros: u8) -> bool {
        let text = format!("{}{value}", "0".repeat(usize::from(zeros % 8)));
        parse_digits("X", &text, u64::MAX) == Ok(value)
    }

    fn fo_cfg_1_min_attempts_accepts_exactly_what_fits_in_u32(value: u64) -> TestResult {
        let mut t = Thresholds::default();
        let result = t.set(VAR_MIN_ATTEMPTS, &value.to_string());
        TestResult::from_bool(match u32::try_from(value) {
            Ok(v) => result.is_ok() && t.min_attempts == v,
            Err(_) => matches!(result, Err(ConfigError::TooLarge { var: VAR_MIN_ATTEMPTS, .. })),
        })
    }

    fn fo_cfg_1_a_non_digit_anywhere_is_rejected(digits: u32, junk: char, at: usize) -> TestResult {
        if junk.is_ascii_digit() {
            return TestResult::discard();
        }
        let mut text = digits.to_string();
        let at = at % (text.len() + 1);
        text.insert(at, junk);
        TestResult::from_bool(matches!(
            parse_digits(VAR_COOLDOWN_MS, &text, u64::MAX),
            Err(ConfigError::NotDigits { .. })
        ))
    }
}
