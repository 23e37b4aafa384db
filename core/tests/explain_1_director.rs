//! EXPLAIN-1: the director's verdict on each examined host comes with the rule and the numbers
//! that decided it (`director::explain`, the decision `evaluate` returns), and
//! `explain_line` prints them on one `[handoff-explain]` line.

use switchyard_core::handoff::*;
use switchyard_core::MonoMs;

const NOW: MonoMs = MonoMs(1_000_000);

fn policy() -> DirectorPolicy {
    DirectorPolicy {
        enabled: true,
        cohort_percent: 100,
        policy: PolicyConfig {
            freshness_window_ms: 30_000,
            host_cooldown_ms: 600_000,
        },
    }
}

fn candidate(host: u64, current_rtt_ms: u32, target_rtt_ms: u32) -> CandidateView {
    CandidateView {
        authority: SourceAuthority {
            cell: CellId(1),
            host: HostId(host),
            epoch: Epoch(1),
            incarnation: Incarnation(1),
            generation: Generation(1),
        },
        source_cell_capable: true,
        desktop_capable: true,
        measurement: Some((
            CellId(2),
            Measurement {
                measured_at: MonoMs(NOW.as_ms() - 100),
                current_rtt_ms,
                target_rtt_ms,
            },
        )),
        cooldown_until: None,
    }
}

fn target() -> TargetView {
    TargetView {
        cell: CellId(2),
        capable: true,
        load: 1,
        capacity: 3,
        lease_until: MonoMs::ZERO,
    }
}

/// The verdict's rule name (or "eligible") and the line, after checking that `explain`
/// decides exactly as `evaluate`.
fn judge(
    director: &DirectorPolicy,
    c: &CandidateView,
    t: Option<&TargetView>,
) -> (&'static str, Evidence, String) {
    let (verdict, evidence) = explain(NOW, director, c, t);
    assert_eq!(verdict, evaluate(NOW, director, c, t));
    let line = explain_line(&Decision {
        host: c.authority.host,
        verdict,
        evidence,
    });
    assert!(line.starts_with(EXPLAIN_PREFIX), "{line}");
    assert!(
        line.starts_with(&format!("{EXPLAIN_PREFIX} host={} ", c.authority.host.0)),
        "{line}"
    );
    let name = match verdict {
        Ok(_) => "eligible",
        Err(why) => why.name(),
    };
    (name, evidence, line)
}

#[test]
fn explain_1_improvement_below_25_ms_names_both_numbers() {
    let (rule, evidence, line) = judge(&policy(), &candidate(7, 100, 88), Some(&target()));
    assert_eq!(rule, "improvement_below_ms");
    assert_eq!(
        evidence,
        Evidence::Improvement(Improvement {
            current_rtt_ms: 100,
            target_rtt_ms: 88,
            improvement_ms: 12,
            improvement_percent: 12,
        })
    );
    assert_eq!(
        line,
        "[handoff-explain] host=7 ineligible rule=improvement_below_ms current_rtt_ms=100 target_rtt_ms=88 improvement_ms=12<25 improvement_percent=12<20"
    );
}

#[test]
fn explain_1_improvement_below_20_percent_with_enough_ms() {
    let (rule, _, line) = judge(&policy(), &candidate(7, 200, 170), Some(&target()));
    assert_eq!(rule, "improvement_below_percent");
    assert!(
        line.ends_with("improvement_ms=30>=25 improvement_percent=15<20"),
        "{line}"
    );
    // The edges: 25 ms and exactly 20 % pass.
    let (rule, _, line) = judge(&policy(), &candidate(7, 125, 100), Some(&target()));
    assert_eq!(rule, "eligible", "{line}");
    assert!(line.contains("improvement_ms=25>=25 improvement_percent=20>=20"));
}

#[test]
fn explain_1_cohort_bucket_against_the_percent() {
    let host = (1..100)
        .find(|h| cohort_bucket(HostId(*h)) > 0)
        .expect("a host outside bucket 0");
    let bucket = cohort_bucket(HostId(host));
    let director = DirectorPolicy {
        cohort_percent: bucket,
        ..policy()
    };
    let (rule, evidence, line) = judge(&director, &candidate(host, 120, 60), Some(&target()));
    assert_eq!(rule, "not_in_cohort");
    assert_eq!(
        evidence,
        Evidence::Cohort {
            bucket,
            cohort_percent: bucket
        }
    );
    assert!(
        line.ends_with(&format!(
            "rule=not_in_cohort cohort_bucket={bucket}>=cohort_percent={bucket}"
        )),
        "{line}"
    );
    let director = DirectorPolicy {
        cohort_percent: 150,
        ..policy()
    };
    let (rule, _, line) = judge(&director, &candidate(host, 120, 60), Some(&target()));
    assert_eq!(rule, "invalid_cohort_percent");
    assert!(line.contains("cohort_percent=150"), "{line}");
}

#[test]
fn explain_1_capacity_used_against_the_limit() {
    let full = TargetView {
        load: 3,
        ..target()
    };
    let (rule, evidence, line) = judge(&policy(), &candidate(7, 120, 60), Some(&full));
    assert_eq!(rule, "target_at_capacity");
    assert_eq!(
        evidence,
        Evidence::Capacity {
            target: CellId(2),
            load: 3,
            capacity: 3
        }
    );
    assert!(
        line.ends_with("rule=target_at_capacity target_cell=2 capacity_used=3/3"),
        "{line}"
    );
}

#[test]
fn explain_1_cooldown_until_when() {
    let mut c = candidate(7, 120, 60);
    c.cooldown_until = Some(NOW.plus_ms(45_000));
    let (rule, _, line) = judge(&policy(), &c, Some(&target()));
    assert_eq!(rule, "cooling_down");
    assert!(
        line.ends_with(&format!(
            "rule=cooling_down cooldown_until_ms={} left_ms=45000",
            NOW.as_ms() + 45_000
        )),
        "{line}"
    );
}

#[test]
fn explain_1_freshness_age_against_the_window() {
    let mut c = candidate(7, 120, 60);
    if let Some((_, m)) = &mut c.measurement {
        m.measured_at = MonoMs(NOW.as_ms() - 40_000);
    }
    let (rule, _, line) = judge(&policy(), &c, Some(&target()));
    assert_eq!(rule, "stale_measurement");
    assert!(
        line.ends_with("rule=stale_measurement age_ms=40000>freshness_window_ms=30000"),
        "{line}"
    );
    if let Some((_, m)) = &mut c.measurement {
        m.measured_at = NOW.plus_ms(5);
    }
    let (rule, _, line) = judge(&policy(), &c, Some(&target()));
    assert_eq!(rule, "measurement_from_future");
    assert!(line.ends_with("measured_ahead_ms=5"), "{line}");
}

#[test]
fn explain_1_capabilities_and_cells() {
    let mut c = candidate(7, 120, 60);
    c.source_cell_capable = false;
    let (rule, _, line) = judge(&policy(), &c, Some(&target()));
    assert_eq!(rule, "source_cell_not_capable");
    assert!(line.ends_with("source_cell=1 target_cell=2"), "{line}");
    let incapable = TargetView {
        capable: false,
        ..target()
    };
    let (rule, _, _) = judge(&policy(), &candidate(7, 120, 60), Some(&incapable));
    assert_eq!(rule, "target_cell_not_capable");
    let mut c = candidate(7, 120, 60);
    c.desktop_capable = false;
    let (rule, evidence, _) = judge(&policy(), &c, Some(&target()));
    assert_eq!((rule, evidence), ("desktop_not_capable", Evidence::Nothing));
    let (rule, _, line) = judge(&policy(), &candidate(7, 120, 60), None);
    assert_eq!(rule, "unknown_target");
    assert!(line.ends_with("source_cell=1 target_cell=2"), "{line}");
    let mut c = candidate(7, 120, 60);
    c.measurement = c.measurement.map(|(_, m)| (CellId(1), m));
    let (rule, _, line) = judge(&policy(), &c, Some(&target()));
    assert_eq!(rule, "same_cell");
    assert!(line.ends_with("source_cell=1 target_cell=1"), "{line}");
    let mut c = candidate(7, 120, 60);
    c.measurement = None;
    let (rule, _, line) = judge(&policy(), &c, Some(&target()));
    assert_eq!(rule, "no_measurement");
    assert_eq!(
        line,
        "[handoff-explain] host=7 ineligible rule=no_measurement"
    );
    let off = DirectorPolicy {
        enabled: false,
        ..policy()
    };
    let (rule, _, _) = judge(&off, &candidate(7, 120, 60), Some(&target()));
    assert_eq!(rule, "disabled");
}

#[test]
fn explain_1_eligible_names_the_cell_and_every_number() {
    let (rule, _, line) = judge(&policy(), &candidate(7, 120, 60), Some(&target()));
    assert_eq!(rule, "eligible");
    let bucket = cohort_bucket(HostId(7));
    assert_eq!(
        line,
        format!(
            "[handoff-explain] host=7 eligible target_cell=2 current_rtt_ms=120 target_rtt_ms=60 improvement_ms=60>=25 improvement_percent=50>=20 cohort_bucket={bucket}<cohort_percent=100 age_ms=100<=freshness_window_ms=30000 capacity_used=1/3"
        )
    );
}

/// The selection pass hands out the same evidence with each decision.
#[test]
fn explain_1_selection_pass_decisions_carry_the_evidence() {
    let limits = ScanLimits {
        page_size: 10,
        max_pages: 1,
        max_dispatch: 10,
    };
    let mut pass = SelectionPass::begin(PageCursor::default(), limits).expect("limits");
    let rows = [
        CandidateRow {
            candidate: candidate(3, 100, 88),
            target: Some(target()),
        },
        CandidateRow {
            candidate: candidate(4, 120, 60),
            target: Some(target()),
        },
    ];
    let decisions = pass.handle_page(NOW, &policy(), &rows);
    let lines: Vec<String> = decisions.iter().map(explain_line).collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("[handoff-explain] host=3 ineligible rule=improvement_below_ms "));
    assert!(lines[1].starts_with("[handoff-explain] host=4 eligible target_cell=2 "));
}
