//! Repository hygiene checks that run under `cargo test`.
//!
//! * The crate dependency graph is exactly the one ARCHITECTURE.md lists
//!   (its "Dependency edges" section), so the document cannot drift from the
//!   code and a new edge is a deliberate, documented decision.
//! * Every Rust source file starts with a `//!` module doc.
//! * README.md stays short (at most [`README_MAX_LINES`] lines; details go
//!   to `docs/`), and every workspace crate appears in ARCHITECTURE.md's
//!   code map.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The most lines README.md may have.
const README_MAX_LINES: usize = 300;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// `(from, to, dev_only)` for every dependency between workspace crates.
fn workspace_edges() -> BTreeSet<(String, String, bool)> {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut kinds: std::collections::BTreeMap<(String, String), bool> = Default::default();
    for package in packages {
        let from = package["name"].as_str().expect("name");
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let to = dep["name"].as_str().expect("dependency name");
            if !members.contains(to) {
                continue;
            }
            let dev = dep["kind"].as_str() == Some("dev");
            let entry = kinds.entry((from.to_owned(), to.to_owned())).or_insert(dev);
            *entry &= dev; // a normal edge wins over a dev edge
        }
    }
    kinds
        .into_iter()
        .map(|((from, to), dev)| (from, to, dev))
        .collect()
}

/// The edges ARCHITECTURE.md lists, as lines "- `a` → `b`" or
/// "- `a` → `b` (dev only)" under the heading "Dependency edges".
fn documented_edges() -> BTreeSet<(String, String, bool)> {
    let text =
        std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let section = text
        .split("### Dependency edges")
        .nth(1)
        .expect("ARCHITECTURE.md has a Dependency edges section");
    let section = section.split("\n#").next().unwrap_or(section);
    let mut edges = BTreeSet::new();
    for line in section.lines().filter_map(|l| l.strip_prefix("- `")) {
        let parts: Vec<&str> = line.split('`').collect();
        if parts.len() >= 3 && parts[1].trim() == "→" {
            edges.insert((
                parts[0].to_owned(),
                parts[2].to_owned(),
                line.contains("(dev only)"),
            ));
        }
    }
    edges
}

#[test]
fn dependency_edges_match_architecture_md() {
    let actual = workspace_edges();
    let documented = documented_edges();
    assert!(
        !documented.is_empty(),
        "no edges parsed from ARCHITECTURE.md"
    );
    let undocumented: Vec<_> = actual.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&actual).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "crate graph and ARCHITECTURE.md disagree.\n  in Cargo.toml, not documented: {undocumented:?}\n  documented, not in Cargo.toml: {stale:?}\nupdate ARCHITECTURE.md (and think twice about the edge)"
    );
    // The sandbox engines stay out of everything but `runtime`.
    for forbidden in ["engine", "host-api"] {
        assert!(
            !actual
                .iter()
                .any(|(from, to, _)| from == forbidden && to == "runtime"),
            "{forbidden} must not depend on runtime"
        );
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !(name.starts_with('.') || name.starts_with("target")) {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    rust_files(&root(), &mut files);
    assert!(files.len() > 10, "found only {} files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|path| {
            path.strip_prefix(root())
                .unwrap_or(path)
                .display()
                .to_string()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! module doc: {missing:?}"
    );
}

#[test]
fn readme_stays_short() {
    let text = std::fs::read_to_string(root().join("README.md")).expect("read README.md");
    let lines = text.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move details to docs/"
    );
}

#[test]
fn every_workspace_crate_is_on_the_architecture_map() {
    let text =
        std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let map = text
        .split("## Code map")
        .nth(1)
        .expect("ARCHITECTURE.md has a Code map section");
    let map = map.split("\n## ").next().unwrap_or(map);
    let crates: BTreeSet<String> = workspace_edges()
        .into_iter()
        .flat_map(|(from, to, _)| [from, to])
        .collect();
    let missing: Vec<&String> = crates
        .iter()
        .filter(|name| !map.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "crates missing from ARCHITECTURE.md's code map: {missing:?}"
    );
}

/// Every `.rs` file of the tree (but `target/` and hidden folders).
fn all_rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root(), &mut files);
    files
}

#[test]
fn every_test_the_compatibility_page_names_exists() {
    let page = std::fs::read_to_string(root().join("docs/compatibility.md"))
        .expect("read docs/compatibility.md");
    let sources: String = all_rust_files()
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .collect();
    let mut named = 0;
    let mut missing = Vec::new();
    for row in page.lines().filter(|l| l.starts_with('|')) {
        let Some(cell) = row.trim_end_matches('|').rsplit('|').next() else {
            continue;
        };
        for name in cell.split('`').skip(1).step_by(2) {
            named += 1;
            if !sources.contains(&format!("fn {name}(")) {
                missing.push(name.to_owned());
            }
        }
    }
    assert!(named > 10, "found only {named} test names in the page");
    assert!(
        missing.is_empty(),
        "docs/compatibility.md names tests that do not exist: {missing:?}"
    );
}
