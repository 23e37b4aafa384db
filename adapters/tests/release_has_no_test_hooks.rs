//! The test seams (`test-hooks`) reach the tests only: no normal dependency edge of the
//! workspace turns the feature on, so `cargo build --release` compiles every seam as its inert
//! twin into the binaries.

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
