//! The modules of the git adapter (`src/gitops/`) import one way: no module imports one that
//! imports it back, directly or through others. This reads the `use super::…` lines of each
//! file and fails on a cycle, naming it.

use std::collections::BTreeMap;
use std::path::Path;

/// Each module of `src/gitops/` (without `mod.rs`) and the sibling modules it imports.
fn imports() -> BTreeMap<String, Vec<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gitops");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if name == "mod" || path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // Test modules (`use super::*` of their own file) are not part of the graph.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let mut used: Vec<String> = Vec::new();
        for statement in code.split("use super::").skip(1) {
            let statement = statement.split(';').next().unwrap_or_default().trim();
            // `use super::{a::X, b}` names several modules; `use super::a::X` one.
            let items = match statement.strip_prefix('{') {
                Some(group) => group.trim_end_matches('}').split(',').collect(),
                None => vec![statement],
            };
            for item in items {
                let first = item.trim().split("::").next().unwrap_or_default();
                if !first.is_empty() {
                    used.push(first.to_string());
                }
            }
        }
        used.sort();
        used.dedup();
        graph.insert(name.to_string(), used);
    }
    graph
}

/// A cycle through `start`, if any, as the path of modules.
fn cycle_from(
    graph: &BTreeMap<String, Vec<String>>,
    start: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    for next in graph.get(path.last()?.as_str()).into_iter().flatten() {
        if next == start {
            let mut cycle = path.clone();
            cycle.push(next.clone());
            return Some(cycle);
        }
        if path.contains(next) {
            continue;
        }
        path.push(next.clone());
        if let Some(cycle) = cycle_from(graph, start, path) {
            return Some(cycle);
        }
        path.pop();
    }
    None
}

#[test]
fn gitops_modules_import_one_way() {
    let graph = imports();
    for required in ["repo", "commit", "remote", "branch", "error"] {
        assert!(graph.contains_key(required), "no src/gitops/{required}.rs");
    }
    for module in graph.keys() {
        for used in &graph[module] {
            assert!(
                graph.contains_key(used),
                "{module}.rs imports super::{used}, which is not a module file: \
                 import from the module that defines it"
            );
        }
        let mut path = vec![module.clone()];
        if let Some(cycle) = cycle_from(&graph, module, &mut path) {
            panic!(
                "src/gitops modules import each other: {}",
                cycle.join(" -> ")
            );
        }
    }
}
