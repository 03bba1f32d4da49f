//! The core crate (`src/crates/core/`) must stay pure: no git, HTTP, Kubernetes, async runtime or YAML
//! crate may be reachable from it. Code in the core that names such a crate already fails to
//! compile (the crate is not a dependency); this test fails when someone adds one to
//! `src/crates/core/Cargo.toml`, directly or through another dependency.

use std::process::Command;

use crate::support::run_ok;

/// Crates whose presence in the core's dependency tree means the core does IO or parses YAML.
const FORBIDDEN: &[&str] = &[
    "git2",
    "libgit2-sys",
    "kube",
    "kube-client",
    "k8s-openapi",
    "reqwest",
    "hyper",
    "tokio",
    "serde-saphyr",
    "saphyr-parser",
    "serde_yaml",
    "yaml-rust2",
    "minijinja",
    "axum",
    "serde_json",
];

/// The normal (non-dev, non-build) dependency tree of `sluice-core`, one crate name a line.
fn core_dependencies() -> Vec<String> {
    let output = run_ok(
        Command::new(env!("CARGO"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "tree",
                "--offline",
                "--locked",
                "--package",
                "sluice-core",
                "--edges",
                "normal",
                "--prefix",
                "none",
                "--format",
                "{p}",
            ]),
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn core_reaches_no_adapter_crate() {
    let deps = core_dependencies();
    assert!(
        deps.iter().any(|d| d == "sluice-core"),
        "cargo tree listed the core itself: {deps:?}"
    );
    assert!(
        deps.iter().any(|d| d == "jiff"),
        "the tree is read: {deps:?}"
    );
    let reached: Vec<&String> = deps
        .iter()
        .filter(|d| FORBIDDEN.contains(&d.as_str()))
        .collect();
    assert!(
        reached.is_empty(),
        "src/crates/core/Cargo.toml reaches adapter crates {reached:?}; the core must stay pure (move the IO to an adapter module of the sluice crate)"
    );
}

#[test]
fn core_manifest_lists_only_pure_dependencies() {
    let manifest = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/crates/core/Cargo.toml"),
    )
    .expect("src/crates/core/Cargo.toml is readable");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("the core manifest has a [dependencies] table");
    let names: Vec<&str> = deps
        .lines()
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect();
    assert_eq!(
        names,
        ["jiff", "serde", "thiserror"],
        "a new core dependency must be pure (no IO, no YAML); extend this list only after checking that"
    );
}
