//! Seeded bugs: a one-line bug in the director's glue around the core (a `SeededBug` of the
//! sweep model; the core is unchanged) is reported by the checker as `switchyard-check check`
//! runs it: the property violated in the table, a counterexample through the bug, and the
//! property named on the exit line.

use switchyard_checker::*;
use switchyard_spec::sweep::{SeededBug, SweepModel, SweepParams};

/// `switchyard-check check`'s options (depth-first, two threads, stop at the first
/// violation), then its shortest-path re-check.
fn check(bug: SeededBug) -> (String, String, (u8, String)) {
    let model = SweepModel::new(SweepParams {
        bug: Some(bug),
        ..SweepParams::default()
    });
    let options = RunOptions {
        strategy: Strategy::Dfs,
        threads: 2,
        max_depth: None,
        timeout: None,
        memory_budget: None,
        progress: false,
        stop_when_found: None,
        stop_at_first_violation: true,
        keep_last_discovery: false,
    };
    let mut report = run(model.clone(), &options);
    shorten_discoveries(&model, &options, &mut report);
    let table = render_table(&report);
    let path = report
        .properties
        .iter()
        .find(|p| p.verdict == Verdict::Violated)
        .and_then(|p| p.path.as_ref())
        .map(render_path::<SweepModel>)
        .unwrap_or_default();
    (table, path, exit_line(&[report.summary()]))
}

fn verdict_line<'a>(table: &'a str, property: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.trim_start().starts_with(property))
        .unwrap_or_else(|| panic!("{property} not in the table:\n{table}"))
}

#[test]
fn ho_s2_checker_reports_busy_spending_the_budget() {
    let property = "HO-S2 busy never spends the budget";
    let (table, path, (code, last)) = check(SeededBug::BusySpendsBudget);
    assert!(
        verdict_line(&table, property).contains("VIOLATED"),
        "{table}"
    );
    assert!(table.contains("stopped at the first violation"), "{table}");
    assert!(path.contains("the cell answers busy"), "{path}");
    assert_eq!(code, 1);
    assert!(
        last.starts_with(&format!(
            "exit 1: 1 property violated: \"{property}\" (sweep)"
        )),
        "{last}"
    );
}

#[test]
fn scale_3_checker_reports_a_failed_pass_resumed_from_its_start() {
    let property = "SCALE-3 a failed page resumes at its own start";
    let (table, path, (code, last)) = check(SeededBug::ResumeFromPassStart);
    assert!(
        verdict_line(&table, property).contains("VIOLATED"),
        "{table}"
    );
    assert!(path.contains("the next page read fails"), "{path}");
    assert_eq!(code, 1);
    assert!(last.contains(&format!("\"{property}\" (sweep)")), "{last}");
}

#[test]
fn ho_s2_checker_reports_a_rotation_held_at_busy_hosts_as_starvation() {
    let property = "HO-S2 busy hosts never starve idle ones";
    let (table, path, (code, last)) = check(SeededBug::BusyHoldsTheCursor);
    assert!(
        verdict_line(&table, property).contains("VIOLATED"),
        "{table}"
    );
    assert!(path.contains("the cell answers busy"), "{path}");
    assert_eq!(code, 1);
    assert!(last.contains(&format!("\"{property}\" (sweep)")), "{last}");
}

/// SCALE-3 / HO-L3: a director glue that saves its pass's cursor after every page read (not
/// the dispatcher's `poll_cursor()`) is reported on the dispatch model's cursor property,
/// with a counterexample through the page read.
#[test]
fn scale_3_checker_reports_a_cursor_saved_before_its_page_ended() {
    use switchyard_spec::dispatch::{DispatchBug, DispatchModel, DispatchParams};
    let property = "SCALE-3 the cursor passes a page only after its dispatches ended";
    let model = DispatchModel::new(DispatchParams {
        bug: Some(DispatchBug::SaveAfterRead),
        ..DispatchParams::default()
    });
    let options = RunOptions {
        strategy: Strategy::Dfs,
        threads: 2,
        max_depth: None,
        timeout: None,
        memory_budget: None,
        progress: false,
        stop_when_found: None,
        stop_at_first_violation: true,
        keep_last_discovery: false,
    };
    let mut report = run(model.clone(), &options);
    shorten_discoveries(&model, &options, &mut report);
    let table = render_table(&report);
    assert!(
        verdict_line(&table, property).contains("VIOLATED"),
        "{table}"
    );
    let path = report
        .properties
        .iter()
        .find(|p| p.verdict == Verdict::Violated)
        .and_then(|p| p.path.as_ref())
        .map(render_path::<DispatchModel>)
        .unwrap_or_default();
    assert!(path.contains("the next page is read"), "{path}");
    let (code, last) = exit_line(&[report.summary()]);
    assert_eq!(code, 1);
    assert!(
        last.starts_with(&format!(
            "exit 1: 1 property violated: \"{property}\" (dispatch)"
        )),
        "{last}"
    );
}
