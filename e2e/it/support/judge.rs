//! The judge's loop tests' shared parts: a judged canary and one rollout under `sluice run`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::metrics::{loop_canary, loop_deployment as deployment, phase};
use super::{git, human_clone, human_commit, sluice_daemon};

/// The loop tests' canary `name` without metrics, judged by the Judge `judge` of namespace
/// `test`.
pub(crate) fn judged_canary(name: &str, judge: &str) -> String {
    loop_canary(name, "").replace("    metrics:\n", "").replace(
        "namespace: test}",
        &format!("namespace: test, annotations: {{sluice.dev/judge: {judge}}}}}"),
    )
}

/// A `Judge` object: `metadata` (its lines, each ending in a newline), `spec.thresholds` (a
/// flow mapping), then `rest` (the lines after the thresholds, each ending in a newline).
pub(crate) fn judge_object(metadata: &str, thresholds: &str, rest: &str) -> String {
    format!("apiVersion: sluice.dev/v1alpha1\nkind: Judge\nmetadata:\n{metadata}spec:\n  thresholds: {thresholds}\n{rest}")
}

pub(crate) fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether the canary's status file is on the remote yet (`phase` needs it).
pub(crate) fn has_status(bare: &Path, name: &str) -> bool {
    Command::new("git")
        .args([
            "cat-file",
            "-e",
            &format!("main:.sluice/status/test/{name}.yaml"),
        ])
        .current_dir(bare)
        .status()
        .is_ok_and(|s| s.success())
}

/// Under `sluice run` (polling every 200 ms, its clone in `dir/w`): the canaries `names` of
/// `bare` initialized, then a human (`dir/human`) bumps each one's image to `:2`, and each
/// rollout runs to its end.
pub(crate) fn rolled_out(bare: &Path, dir: &Path, names: &[&str]) {
    let remote = bare.display().to_string();
    let _daemon = sluice_daemon(&remote, &dir.join("w")).start();
    wait_until("every canary initialized", || {
        names
            .iter()
            .all(|n| has_status(bare, n) && phase(bare, n).starts_with("Initialized"))
    });
    let human = human_clone(&remote, &dir.join("human"));
    bump_images(&human, names);
    wait_until("every rollout to finish", || {
        names.iter().all(|n| ended(bare, n))
    });
}

pub(crate) fn ended(bare: &Path, name: &str) -> bool {
    let p = phase(bare, name);
    p.starts_with("Succeeded") || p.starts_with("Failed")
}

/// The `key` trailers of the newest commit whose subject matches `grep`.
pub(crate) fn trailers(bare: &Path, key: &str, grep: &str) -> String {
    git(
        bare,
        &[
            "log",
            "-1",
            &format!("--format=%(trailers:key={key},valueonly)"),
            &format!("--grep={grep}"),
            "main",
        ],
    )
}

/// The `key` trailers of every commit on main, newest first, without the commits that have none.
pub(crate) fn all_trailers(bare: &Path, key: &str) -> Vec<String> {
    trailers_of_commits(bare, key, None)
}

/// The `key` trailers of the commits on main whose message matches `grep` (every commit
/// without one), newest first, without the commits that have none.
pub(crate) fn trailers_of_commits(bare: &Path, key: &str, grep: Option<&str>) -> Vec<String> {
    let format = format!("--format=%(trailers:key={key},valueonly)");
    let grep = grep.map(|g| format!("--grep={g}"));
    let mut args = vec!["log", format.as_str()];
    args.extend(grep.as_deref());
    args.push("main");
    git(bare, &args)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// A human (working in `human`) bumps the image of each of the canaries `names` to `:2`, one
/// pushed commit each.
pub(crate) fn bump_images(human: &Path, names: &[&str]) {
    for name in names {
        git(human, &["pull", "-q", "--rebase", "origin", "main"]);
        human_commit(
            human,
            &format!("apps/{name}/deployment.yaml"),
            &deployment(name, &format!("{name}:2")),
            &format!("{name} 2"),
        );
    }
}

/// A Judge `test/<name>` of the loop tests: pass 95, `marginal`, over 10 s at 1 s needing 10
/// values per series, with `metrics` (each from [`increase`]).
pub(crate) fn loop_judge(name: &str, marginal: u32, metrics: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Judge
metadata: {{name: {name}, namespace: test}}
spec:
  thresholds: {{pass: 95, marginal: {marginal}}}
  window: 10s
  step: 1s
  minSamples: 10
  metrics:
{metrics}"
    )
}

/// A judge metric entry `name` of PromQL `query` that fails the canary when it increases.
pub(crate) fn increase(name: &str, query: &str) -> String {
    format!("    - name: {name}\n      query: '{query}'\n      direction: increase\n")
}
