//! Data flows one way (cli -> tick -> load, observe, decide, render, gitops): no module of the
//! `sluice` crate may use one that uses it back. Checked on the source text, at two levels:
//! the top-level modules (`crate::tick`, `crate::manifest`, ...) and the files inside each of them
//! (`gitops/commit.rs` and `gitops/repo.rs` may not use each other).
//!
//! A reference is any `crate::a::b` or `super::b` path outside comments, so a `use` and a
//! fully qualified call count the same.
//!
//! The pure core (`src/crates/core/`) is its own crate, checked the same way from its own root: its
//! files (`decide.rs`, `trailer.rs`, ...) are its top-level modules.
//!
//! The integration tests (`e2e/it/`, this binary) are read the same way, with a stricter rule:
//! a test file uses only `support/`, never another test file, and `support/` uses no test file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The module path of a file: `src/gitops/commit.rs` -> `["gitops", "commit"]`,
/// `src/render/mod.rs` -> `["render"]`, `src/lib.rs` -> `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src/");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    parts
}

/// Code without `//` comments (doc comments name other modules in prose) and string literals.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let line = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        let mut in_string = false;
        let mut prev = ' ';
        for c in line.chars() {
            if c == '"' && prev != '\\' {
                in_string = !in_string;
            } else if !in_string {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// The paths a file refers to: `crate::a::b::c` and `super::x`, as module paths (the items at
/// their ends are trimmed later against the modules that exist).
fn references(module: &[String], is_mod_file: bool, text: &str) -> Vec<Vec<String>> {
    let text = code(text);
    let mut refs = Vec::new();
    let ident = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty())
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        if i > 0 && text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        refs.push(ident(&text[i + "crate::".len()..]));
    }
    for (i, _) in text.match_indices("super::") {
        if i > 0 && text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        // `super` of a file module is its parent; of a `mod.rs`, the parent's parent.
        let up = if is_mod_file { 1 } else { 0 };
        let mut base: Vec<String> = module.to_vec();
        base.pop();
        for _ in 0..up {
            base.pop();
        }
        base.extend(ident(&text[i + "super::".len()..]));
        refs.push(base);
    }
    refs
}

/// Strongly connected components with more than one node (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// The folder under `src/` that holds the workspace's other crates (the pure core, the
/// libgit2 options, malloc_trim): each is checked from its own root.
const OTHER_CRATES: &[&str] = &["crates"];

/// (top-level module graph, file graph) of the crate rooted at `src`, each
/// `module path -> module paths it refers to`.
fn graphs(
    src: &Path,
    skip: &[&str],
) -> (
    BTreeMap<String, BTreeSet<String>>,
    BTreeMap<String, BTreeSet<String>>,
) {
    let mut files = Vec::new();
    crate::support::source_files(src, skip, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut top = BTreeMap::<String, BTreeSet<String>>::new();
    let mut by_file = BTreeMap::<String, BTreeSet<String>>::new();
    for file in &files {
        let module = module_of(src, file);
        if module.is_empty() {
            continue; // lib.rs and main.rs only declare and dispatch
        }
        let is_mod_file = file.file_name().is_some_and(|n| n == "mod.rs");
        let text = std::fs::read_to_string(file).expect("a source file is readable");
        let from = module.join("::");
        for mut target in references(&module, is_mod_file, &text) {
            // Trim items (types, functions) off the end until a module remains.
            while !target.is_empty() && !modules.contains(&target) {
                target.pop();
            }
            if target.is_empty() || target == module {
                continue;
            }
            // A module's own children and its parent are one unit: `mod.rs` declares them.
            if target.starts_with(&module) || module.starts_with(&target) {
                continue;
            }
            if target[0] != module[0] {
                top.entry(module[0].clone())
                    .or_default()
                    .insert(target[0].clone());
            } else {
                by_file
                    .entry(from.clone())
                    .or_default()
                    .insert(target.join("::"));
            }
        }
    }
    (top, by_file)
}

/// Fails, saying `what` the cycles are, when `graph` has any.
fn assert_no_cycles(graph: &BTreeMap<String, BTreeSet<String>>, what: &str) {
    assert_eq!(cycles(graph), Vec::<Vec<String>>::new(), "{what}");
}

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (top, files) = graphs(&src, OTHER_CRATES);
    assert!(top.contains_key("tick"), "the graph was read: {top:?}");
    assert_no_cycles(&files, "files of one module that use each other");
    assert_no_cycles(&top, "top-level modules that use each other (make one of them a leaf, or move the shared part down)");
}

/// The top-level modules `from` reaches through `graph`, itself included.
fn reached(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::from([from.to_string()]);
    let mut next = vec![from.to_string()];
    while let Some(module) = next.pop() {
        for used in graph.get(&module).into_iter().flatten() {
            if seen.insert(used.clone()) {
                next.push(used.clone());
            }
        }
    }
    seen
}

/// The modules a part of `src/lib.rs`'s docs links to (`` [`name`] `` or
/// `` [`name::item`] ``), between the heading `from` and the heading `to`.
fn linked(lib: &str, from: &str, to: &str) -> BTreeSet<String> {
    let start = lib.find(from).expect("the heading is in src/lib.rs");
    let end = lib[start..].find(to).expect("the next heading follows") + start;
    lib[start..end]
        .split("[`")
        .skip(1)
        .filter_map(|link| link.split_once("`]"))
        .map(|(name, _)| name.split("::").next().unwrap_or(name).to_string())
        .collect()
}

#[test]
fn the_walk_in_lib_rs_names_every_module_a_tick_reaches_and_no_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (top, _) = graphs(&root.join("src"), OTHER_CRATES);
    let reached = reached(&top, "tick");
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let walk = linked(&lib, "# One tick, one canary: the walk", "Beside the tick");
    // `cli` calls the tick and `core` is another crate: both stand in the walk, neither is
    // reached from the tick in this crate's graph.
    let unnamed: Vec<_> = reached.difference(&walk).collect();
    assert!(
        unnamed.is_empty(),
        "a tick reaches {unnamed:?}, which src/lib.rs's walk does not name: say where the walk enters it"
    );
    let unreached: Vec<_> = walk
        .difference(&reached)
        .filter(|m| *m != "cli" && *m != "core")
        .collect();
    assert!(
        unreached.is_empty(),
        "src/lib.rs's walk names {unreached:?}, which a tick does not reach: move it beside the tick"
    );
}

#[test]
fn every_module_of_the_crate_has_a_row_in_the_module_map() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let rows = linked(&lib, "# Module map", "#![forbid(unsafe_code)]");
    let missing: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .filter(|m| !rows.contains(*m))
        .collect();
    assert!(
        missing.is_empty(),
        "src/lib.rs's module map has no row for {missing:?}"
    );
}

#[test]
fn no_module_of_the_core_uses_one_that_uses_it_back() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/crates/core");
    let (top, files) = graphs(&core, &["tests"]);
    assert!(
        top.get("decide").is_some_and(|uses| uses.contains("model")),
        "the core's graph was read: {top:?}"
    );
    assert_no_cycles(&files, "files of one core module that use each other");
    assert_no_cycles(
        &top,
        "core modules that use each other (move the shared part into a leaf module)",
    );
}

/// The edges of the integration tests' graphs that break "a test file uses only `support/`":
/// a test module using another, a file using a sibling file of its own folder (outside
/// `support/`), or `support/` using a test module.
fn test_files_using_test_files(
    top: &BTreeMap<String, BTreeSet<String>>,
    files: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut found = Vec::new();
    for (from, uses) in top {
        for to in uses {
            if to != "support" {
                found.push(format!("{from} uses {to}"));
            }
        }
    }
    for (from, uses) in files {
        if from.split("::").next() == Some("support") {
            continue; // support's files share with each other; the cycle check guards them
        }
        for to in uses {
            found.push(format!("{from} uses {to}"));
        }
    }
    found
}

#[test]
fn no_test_file_uses_another_and_the_tests_have_no_circle() {
    let it = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/it");
    let (top, files) = graphs(&it, &["snapshots"]);
    assert!(
        top.get("loop_git")
            .is_some_and(|uses| uses.contains("support")),
        "the tests' graph was read: {top:?}"
    );
    assert_eq!(
        test_files_using_test_files(&top, &files),
        Vec::<String>::new(),
        "test files that use another test file (move what they share into support/)"
    );
    assert_no_cycles(&files, "files of one test folder that use each other");
    assert_no_cycles(&top, "test modules that use each other");
}

#[test]
fn the_test_file_rule_finds_a_test_file_using_another() {
    let graph = |edges: &[(&str, &str)]| -> BTreeMap<String, BTreeSet<String>> {
        let mut g = BTreeMap::<String, BTreeSet<String>>::new();
        for (from, to) in edges {
            g.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
        g
    };
    let top = graph(&[
        ("drift", "support"),
        ("drift", "loop_git"),
        ("support", "workload"),
    ]);
    let files = graph(&[
        ("metrics::vendor_loop", "metrics::providers"),
        ("support::world", "support::git_fixture"),
    ]);
    assert_eq!(
        test_files_using_test_files(&top, &files),
        vec![
            "drift uses loop_git",
            "support uses workload",
            "metrics::vendor_loop uses metrics::providers",
        ]
    );
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
}
