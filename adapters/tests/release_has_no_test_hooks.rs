//! The test seams (`test-hooks`) reach the tests only: no normal dependency edge of the
//! workspace turns the feature on, so `cargo build --release` compiles every seam as its inert
//! twin into the binaries, and the simulated world (`sim`, SIM-1) is not in them at all.

use std::process::Command;

fn feature_tree(edges: &str) -> String {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "--manifest-path",
            manifest,
            "--workspace",
            "-e",
            edges,
            "-i",
            "switchyard-adapters",
        ])
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn ho_test_hooks_are_enabled_by_dev_dependencies_only() {
    let normal = feature_tree("normal,features");
    assert!(
        !normal.contains("test-hooks"),
        "a normal dependency turns test-hooks on:\n{normal}"
    );
    // The check can fail: with the dev edges the feature is there.
    let with_dev = feature_tree("normal,dev,features");
    assert!(with_dev.contains("test-hooks"), "{with_dev}");
}

/// SIM-1: the simulator (`sim`: the simulated world and the seams' simulated arms) reaches the
/// tests and `switchyard-sim` only; the `switchyard` binary's tree has no edge that enables it.
#[test]
fn sim_1_the_simulator_is_enabled_by_dev_dependencies_only() {
    let normal = feature_tree("normal,features");
    assert!(
        !normal.contains("feature \"sim\""),
        "a normal dependency turns sim on:\n{normal}"
    );
    let with_dev = feature_tree("normal,dev,features");
    assert!(with_dev.contains("feature \"sim\""), "{with_dev}");
}
