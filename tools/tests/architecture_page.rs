//! Issue #28: `docs/ARCHITECTURE.md` stays true. Every Rust source file of the workspace's
//! crates (`src/` and `examples/` of core, spec, checker, adapters, tools, benches) is named on
//! the page by its path from the repository root, and every such path the page names exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The crates whose sources the page maps.
const CRATES: [&str; 6] = ["core", "spec", "checker", "adapters", "tools", "benches"];
/// The folders of a crate whose `.rs` files the page must name.
const SOURCE_DIRS: [&str; 2] = ["src", "examples"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn page() -> String {
    let path = root().join("docs/ARCHITECTURE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every `.rs` file under `dir`, as a path from the repository root with `/` separators.
fn rust_files(dir: &Path, found: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(root()).expect("under the root");
            let name = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            found.insert(name);
        }
    }
}

fn source_files() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for krate in CRATES {
        for dir in SOURCE_DIRS {
            rust_files(&root().join(krate).join(dir), &mut found);
        }
    }
    found
}

/// The `.rs` paths the page names under one of the crates (`core/src/time.rs`,
/// `adapters/tests/support_pg/mod.rs`, …): words made of path characters, ending in `.rs`.
fn named_paths(page: &str) -> BTreeSet<String> {
    page.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.' | '-')))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| word.ends_with(".rs"))
        .filter(|word| {
            CRATES
                .iter()
                .any(|krate| word.strip_prefix(krate).is_some_and(|r| r.starts_with('/')))
        })
        .map(str::to_owned)
        .collect()
}

/// A name on the page followed by a character that continues a path (`core/src/a.rs` inside
/// `core/src/a.rsx` is not a mention).
fn mentions(page: &str, path: &str) -> bool {
    page.match_indices(path).any(|(at, _)| {
        let before = page[..at].chars().next_back();
        let after = page[at + path.len()..].chars().next();
        let continues = |c: Option<char>| {
            c.is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '-'))
        };
        !continues(before) && !continues(after)
    })
}

#[test]
fn architecture_page_names_every_source_file() {
    let page = page();
    let missing: Vec<String> = source_files()
        .into_iter()
        .filter(|file| !mentions(&page, file))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md does not name these source files (by their path from the \
         repository root): {missing:#?}"
    );
}

#[test]
fn architecture_page_names_no_file_that_does_not_exist() {
    let page = page();
    let named = named_paths(&page);
    assert!(
        named.len() > 50,
        "the page names few paths ({}): is the check reading it?",
        named.len()
    );
    let gone: Vec<&String> = named
        .iter()
        .filter(|path| !root().join(path).is_file())
        .collect();
    assert!(
        gone.is_empty(),
        "docs/ARCHITECTURE.md names files that do not exist: {gone:#?}"
    );
}

#[test]
fn the_page_check_sees_a_missing_and_a_stale_name() {
    let page = "- `core/src/time.rs` and `core/src/gone.rs`; `core/src/time.rsx`.";
    assert!(mentions(page, "core/src/time.rs"));
    assert!(!mentions(page, "core/src/lib.rs"));
    assert!(!mentions("`xcore/src/lib.rs`", "core/src/lib.rs"));
    let named = named_paths(page);
    assert!(named.contains("core/src/gone.rs"), "{named:?}");
    assert!(!named.contains("core/src/time.rsx"), "{named:?}");
}
