//! quickcheck: FO-CFG-1, the threshold parser accepts exactly the digit strings that fit.

use quickcheck::{quickcheck, TestResult};
use switchyard_core::failover::{
    parse_digits, ConfigError, Thresholds, VAR_COOLDOWN_MS, VAR_MIN_ATTEMPTS,
};

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
