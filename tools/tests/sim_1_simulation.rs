//! SIM-1: the fleet under deterministic simulation (`switchyard_tools::sim`). CI runs these
//! fixed seeds (three hours each, and a 20-minute replay); `switchyard-sim` runs more (docs/ASSURANCE.md).
//! Each run is judged by CONF-1 (every journal by `conform`), FO-X4, HO-L1, HO-L3, HO-L4 and
//! HO-L5, with no panic; a failure names the seed and the command that replays it.

use switchyard_tools::sim::{run, SimConfig};

/// The seeds every CI run simulates, three hours each (about a second of CPU per simulated
/// hour in the test profile).
const CI_SEEDS: [u64; 4] = [1, 2, 3, 4];

#[test]
fn sim_1_fixed_seeds_pass_every_check() {
    for seed in CI_SEEDS {
        let report = run(SimConfig {
            seed,
            minutes: 180,
            keep_journals: false,
        });
        eprintln!("{}", report.summary());
        assert!(report.passed(), "{}", report.summary());
        assert!(
            report.faults.len() >= 5,
            "the seed injected faults: {:?}",
            report.faults
        );
        assert!(report.journal_lines > 1_000, "journals were judged");
        assert!(
            report.moves_by_hour.iter().all(|&m| m > 0),
            "moves every hour: {:?}",
            report.moves_by_hour
        );
    }
}

/// The same seed and commit give the same run, byte for byte; another seed does not.
#[test]
fn sim_1_a_seed_replays_byte_for_byte() {
    let first = run(SimConfig {
        seed: 7,
        minutes: 20,
        keep_journals: true,
    });
    let again = run(SimConfig {
        seed: 7,
        minutes: 20,
        keep_journals: true,
    });
    assert!(!first.journals.is_empty());
    assert_eq!(
        first.faults, again.faults,
        "the same faults at the same instants"
    );
    assert!(
        first.journals == again.journals,
        "the journals differ between two runs of seed 7 (first {} bytes, then {})",
        first.journals.len(),
        again.journals.len()
    );
    let other = run(SimConfig {
        seed: 8,
        minutes: 20,
        keep_journals: true,
    });
    assert_ne!(first.faults, other.faults, "another seed, other faults");
}
