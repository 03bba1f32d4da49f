//! What the wave tests (`waves`, `waves_run`) share: a human's release, and what they read
//! back from the remote: each wave's status file at main, sluice's wave commits, the outputs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value as Json;
use sluice::core::status::Status;

use super::rollout::kustomize_builds;
use super::{git, human_commit, show, Schemas};

/// The waves of the test canary `shop/web`, in order.
pub const WAVES: [&str; 3] = ["staging", "eu", "us"];

/// The canary's file in the repo.
pub const FILE: &str = "apps/web/canary.yaml";

/// The canary `shop/web` at `revision`: route-only over an SMI TrafficSplit, one 50% step
/// judged by `error-rate`; `after_route` are spec lines after the route, `after_analysis`
/// those after the analysis (the waves).
pub fn wave_canary(revision: &str, after_route: &str, after_analysis: &str) -> String {
    format!(
        "{}{after_route}  analysis:
    interval: 1s
    threshold: 1
    stepWeights: [50]
    metrics:
      - name: error-rate
        query: sum(rate(errors[1m]))
        thresholdRange: {{max: 1}}
{after_analysis}",
        web_head(revision)
    )
}

pub use super::standalone::web_head;

/// `waves:` entries of `names`, each writing `clusters/<name>/web` and settling 1s.
pub fn settled_waves(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("    - name: {n}\n      output: clusters/{n}/web\n      settle: 1s\n"))
        .collect()
}

/// The status file of a wave at main, when it has one.
pub fn status(bare: &Path, wave: &str) -> Option<Status> {
    let out = Command::new("git")
        .args(["show", &format!("main:.sluice/status/shop/web.{wave}.yaml")])
        .current_dir(bare)
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| sluice::render::status_file::parse(&String::from_utf8_lossy(&out.stdout)).unwrap())
}

/// Each wave's `PHASE REVISION`, `-` before its first commit.
pub fn phases(bare: &Path) -> Vec<String> {
    WAVES
        .iter()
        .map(|w| match status(bare, w) {
            Some(s) => format!(
                "{} {}",
                s.phase,
                s.canary_revision.unwrap_or(s.promoted_revision)
            ),
            None => "-".into(),
        })
        .collect()
}

/// sluice's commits on main, oldest first: (Sluice-Wave, Sluice-Phase, Sluice-Revision).
pub fn wave_log(bare: &Path) -> Vec<(String, String, String)> {
    let format = "--format=%(trailers:key=Sluice-Wave,valueonly,separator=)|%(trailers:key=Sluice-Phase,valueonly,separator=)|%(trailers:key=Sluice-Revision,valueonly,separator=)";
    git(bare, &["log", "--reverse", format, "main"])
        .lines()
        .filter_map(|l| {
            let mut parts = l.split('|').map(str::trim);
            let (wave, phase, revision) = (parts.next()?, parts.next()?, parts.next()?);
            (!wave.is_empty()).then(|| (wave.into(), phase.into(), revision.into()))
        })
        .collect()
}

/// A human pulls main and commits `text` as the canary of `revision`.
pub fn release(human: &Path, revision: &str, text: &str) {
    git(human, &["pull", "-q", "origin", "main"]);
    human_commit(human, FILE, text, &format!("web: release {revision}"));
}

/// Every commit's route documents pass their schemas; each wave's folder builds at main.
pub fn check_outputs(bare: &Path) {
    let mut schemas = Schemas(BTreeMap::new());
    for wave in WAVES {
        let folder = format!("clusters/{wave}/web");
        let route = format!("{folder}/route.yaml");
        let commits = git(bare, &["log", "--format=%H", "main", "--", &route]);
        for sha in commits.lines() {
            let text = show(bare, sha, &route);
            for doc in serde_saphyr::from_multiple::<Json>(&text).unwrap() {
                schemas.assert_valid(&doc, &format!("{sha}:{route}"));
            }
        }
        kustomize_builds(bare, &folder);
    }
}
