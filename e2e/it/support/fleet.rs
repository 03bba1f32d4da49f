//! A fleet of route-only canaries `shop/c<i>` (three weight steps, one-second interval) rolled
//! out together by one human commit, and what their trailers must show afterwards: each
//! Progressing step of the rollout committed once, in order, ending Succeeded. Used by the
//! several-replica tests (`shards_run.rs`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use super::canary::shop_httproute;
use super::trailers::{groups, sluice_commits};
use super::{git, status_at_main};

/// The canary weights of a rollout's Progressing steps, in order: step 0 detects the new
/// revision (no traffic yet), then one per weight step.
const STEP_WEIGHTS: [u64; 4] = [0, 10, 30, 60];

/// The repo settings that put each tick's decisions in one commit (a trailer group per
/// canary), for fleets whose one commit per step would make a test slow.
pub(crate) const PER_TICK: &str =
    "apiVersion: sluice.dev/v1alpha1\nkind: Config\ncommits: perTick\n";

/// Canary `c<i>`'s spec at `revision`.
pub(crate) fn canary(i: usize, revision: &str) -> String {
    shop_httproute(
        &format!("c{i}"),
        revision,
        "",
        "interval: 1s, stepWeights: [10, 30, 60]",
    )
}

/// The spec files of canaries `c0..c<n>` at `revision`.
pub(crate) fn files(n: usize, revision: &str) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("apps/c{i}/canary.yaml"), canary(i, revision)))
        .collect()
}

/// One human commit in `clone` moving every canary to `revision`, pushed.
pub(crate) fn bump(clone: &Path, n: usize, revision: &str) {
    for (file, text) in files(n, revision) {
        std::fs::write(clone.join(file), text).expect("write spec");
    }
    git(clone, &["add", "-A"]);
    git(
        clone,
        &["commit", "-qm", &format!("fleet: roll out {revision}")],
    );
    git(clone, &["pull", "-q", "--rebase"]);
    git(clone, &["push", "-q"]);
}

/// Canary `c<i>`'s status at `bare`'s main.
pub(crate) fn status(bare: &Path, i: usize) -> Option<serde_json::Value> {
    status_at_main(bare, &format!(".sluice/status/shop/c{i}.yaml"))
}

/// How many of the `n` canaries' statuses on main satisfy `done`.
pub(crate) fn count(bare: &Path, n: usize, done: impl Fn(&serde_json::Value) -> bool) -> usize {
    (0..n)
        .filter(|&i| status(bare, i).is_some_and(|s| done(&s)))
        .count()
}

/// Waits (looking again every 100 ms, at most `limit`) until every canary satisfies `done`;
/// panics with `what` and `log()` otherwise.
pub(crate) fn wait_all(
    bare: &Path,
    n: usize,
    limit: Duration,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
    log: impl Fn() -> String,
) {
    let deadline = Instant::now() + limit;
    loop {
        let ready = count(bare, n, &done);
        if ready == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: only {ready} of {n} canaries after {limit:?}\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Succeeded on `revision`.
pub(crate) fn succeeded(revision: &str) -> impl Fn(&serde_json::Value) -> bool + '_ {
    move |s| s["phase"] == "Succeeded" && s["promotedRevision"] == revision
}

/// Every canary's trailers since the rollout of `revision` began: each Progressing weight step
/// committed once and in order, then Succeeded; panics naming the canary and its trailers.
pub(crate) fn assert_each_step_once(bare: &Path, n: usize, revision: &str) {
    let mut by_canary: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    for (_, trailers) in sluice_commits(bare) {
        for (id, group) in groups(&trailers) {
            by_canary.entry(id).or_default().push(group);
        }
    }
    for i in 0..n {
        let id = format!("shop/c{i}");
        let all = by_canary.get(&id).cloned().unwrap_or_default();
        let rollout: Vec<&BTreeMap<String, String>> = all
            .iter()
            .skip_while(|g| g.get("Sluice-Phase").map(String::as_str) != Some("Progressing"))
            .collect();
        let weights: Vec<u64> = rollout
            .iter()
            .filter(|g| g["Sluice-Phase"] == "Progressing")
            .filter_map(|g| {
                let w = g.get("Sluice-Weights")?;
                w.rsplit("canary=").next()?.parse().ok()
            })
            .collect();
        assert_eq!(
            weights, STEP_WEIGHTS,
            "{id}: every step once, in order; its trailers: {all:#?}"
        );
        let last = rollout.last().map(|g| g["Sluice-Phase"].as_str());
        assert_eq!(last, Some("Succeeded"), "{id} ({revision}): {all:#?}");
    }
}
