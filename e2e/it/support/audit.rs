//! `sluice audit` in the tests: its report, a history it finds clean, and the `shop/web` world
//! the audit tests edit by hand.

use std::path::Path;

use serde_json::Value as Json;

use super::rollout::World;
use super::{git, route_only_web, run_sluice};

/// `sluice audit --dir <repo> -o json`: (exit code, report).
pub(crate) fn audit(repo: &Path) -> (i32, Json) {
    let (code, out, err) =
        run_sluice(&["audit", "--dir", &repo.display().to_string(), "-o", "json"]);
    let report = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (code, report)
}

/// The audit of a history that has nothing to report: exit 0, every commit replayed.
pub(crate) fn clean(repo: &Path) -> Json {
    let (code, report) = audit(repo);
    let graph = git(repo, &["log", "--graph", "--format=%H %s", "main"]);
    assert_eq!(
        report["findings"],
        Json::Array(vec![]),
        "{report:#}\n{graph}"
    );
    assert_eq!(code, 0);
    assert_eq!(
        report["notReplayable"],
        Json::Array(vec![]),
        "every commit is written in the replay format"
    );
    assert!(report["replayed"].as_u64().unwrap() > 2, "{report:#}");
    report
}

/// A human rewrites the message of `commit` (a `sed` expression `edit`) in their clone
/// `human`, rebasing main's later commits onto it, and force-pushes main to `bare`.
pub(crate) fn rewrite_message(human: &Path, bare: &Path, commit: &str, edit: &str) {
    git(human, &["pull", "-q", "--rebase", "origin", "main"]);
    let filter = format!("if [ \"$GIT_COMMIT\" = {commit} ]; then sed '{edit}'; else cat; fi");
    let edited = std::process::Command::new("git")
        .args(["filter-branch", "-f", "--msg-filter", &filter])
        .arg(format!("{commit}^..main"))
        .env("FILTER_BRANCH_SQUELCH_WARNING", "1")
        .current_dir(human)
        .output()
        .unwrap();
    assert!(edited.status.success(), "{edited:?}");
    git(
        human,
        &["push", "-q", "-f", &bare.display().to_string(), "HEAD:main"],
    );
}

/// The commits the findings name, deduplicated.
pub(crate) fn found_commits(report: &Json) -> Vec<String> {
    let mut commits: Vec<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["commit"].as_str().unwrap().to_string())
        .collect();
    commits.dedup();
    commits
}

/// Commits on main's first-parent line, oldest first: (sha, full message).
pub(crate) fn line(repo: &Path) -> Vec<(String, String)> {
    git(repo, &["rev-list", "--first-parent", "--reverse", "main"])
        .lines()
        .map(|sha| {
            let message = git(repo, &["log", "-1", "--format=%B", sha]);
            (sha.to_string(), message)
        })
        .collect()
}

pub(crate) const FILE: &str = "apps/web/canary.yaml";

pub(crate) const WEB_STATUS: &str = ".sluice/status/shop/web.yaml";

pub(crate) fn phase(w: &World) -> Json {
    w.yaml_at_main(WEB_STATUS)["phase"].clone()
}

pub(crate) const WEB_STEPS: &str = "[{weight: 20}, {weight: 40}, {weight: 60}, {weight: 80}]";

/// `shop/web` in the middle of a rollout, audited clean.
pub(crate) fn running() -> World {
    let mut w = World::local(&[(FILE, &route_only_web("v1", WEB_STEPS))]);
    w.ticks(1);
    w.human_writes(FILE, &route_only_web("v2", WEB_STEPS), "web: v2");
    w.ticks(3);
    assert_eq!(phase(&w), "Progressing");
    clean(&w.bare);
    w
}

/// The route file sluice writes for `shop/web`.
pub(crate) fn web_route(w: &World) -> String {
    git(&w.bare, &["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .find(|f| f.ends_with("/route.yaml") && f.contains("web"))
        .expect("a route file for shop/web")
        .to_string()
}
