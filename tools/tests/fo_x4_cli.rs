//! FO-X4 / FO-CFG-1 on the command line: the heartbeat flags follow the variables' rules, and
//! a client whose thresholds cannot meet `DEADLINE_MS` for a dark host is refused at start,
//! naming the sum, whether the values came from the environment, from flags or from both.

mod support_bin;

use support_bin::{Process, WAIT};
use switchyard_core::failover::{
    VAR_DEADLINE_MS, VAR_GRACE_MS, VAR_HEARTBEAT_MS, VAR_HEARTBEAT_TIMEOUT_MS,
};
use switchyard_tools::failover::cli::thresholds_from_env_and_flags;

fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

#[test]
fn fo_x4_flags_set_the_heartbeat_and_the_dark_host_sum_is_checked_after_them() {
    let (hb, timeout) = ("1000".to_owned(), "2000".to_owned());
    let t = thresholds_from_env_and_flags(
        |_| None,
        &[
            (VAR_HEARTBEAT_MS, Some(&hb)),
            (VAR_HEARTBEAT_TIMEOUT_MS, Some(&timeout)),
        ],
    )
    .expect("valid");
    assert_eq!((t.heartbeat_ms, t.heartbeat_timeout_ms), (1_000, 2_000));

    // The environment alone cannot meet the deadline; a flag that shortens the grace can.
    let pairs = [(VAR_DEADLINE_MS, "20000")];
    let error = thresholds_from_env_and_flags(env(&pairs), &[]).unwrap_err();
    assert!(
        error.contains("= 26000 ms exceeds RELAY_FAILOVER_DEADLINE_MS (20000)"),
        "{error}"
    );
    let grace = "5000".to_owned();
    let t = thresholds_from_env_and_flags(env(&pairs), &[(VAR_GRACE_MS, Some(&grace))])
        .expect("9000 + 5000 + 2000 <= 20000");
    assert_eq!(t.grace_ms, 5_000);

    // A flag can cross it too.
    let long = "30000".to_owned();
    let error = thresholds_from_env_and_flags(|_| None, &[(VAR_HEARTBEAT_TIMEOUT_MS, Some(&long))])
        .unwrap_err();
    assert!(
        error.contains("RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS (30000) + RELAY_FAILOVER_GRACE_MS (15000) + RELAY_FAILOVER_CHECK_MS (2000) = 47000 ms exceeds RELAY_FAILOVER_DEADLINE_MS (30000)"),
        "{error}"
    );

    // FO-CFG-1 on the flags.
    for bad in [
        "20000 (drill)",
        "-1",
        "1e4",
        "",
        "99999999999999999999",
        "0",
    ] {
        let value = bad.to_owned();
        for var in [VAR_HEARTBEAT_MS, VAR_HEARTBEAT_TIMEOUT_MS] {
            let error =
                thresholds_from_env_and_flags(|_| None, &[(var, Some(&value))]).unwrap_err();
            assert!(
                error.contains(var) && error.contains(&format!("{bad:?}")),
                "{var}={bad:?}: {error}"
            );
        }
    }
}

#[test]
fn fo_x4_a_client_whose_thresholds_cannot_meet_the_deadline_for_a_dark_host_is_refused_at_start() {
    let mut client = Process::start(&[
        "client",
        "--url",
        "ws://127.0.0.1:9/r",
        "--deadline-ms",
        "25000",
    ]);
    assert_eq!(client.exit_within(WAIT), Some(2), "{}", client.log());
    let log = client.log();
    assert!(
        log.contains(
            "RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS (9000) + RELAY_FAILOVER_GRACE_MS (15000) + \
             RELAY_FAILOVER_CHECK_MS (2000) = 26000 ms exceeds RELAY_FAILOVER_DEADLINE_MS \
             (25000): a relay host that goes dark could not be left within the deadline"
        ),
        "{log}"
    );
}
