//! The podinfo repo of the adoption tests (`adopt_hold.rs`, `adopt_check.rs`): a Flagger
//! canary with its source, under `adoption.hold`.

use super::canary::podinfo;
use super::manifests::{CONFIGS, DEPLOYMENT};
use super::rollout::CANARY_FILE;
use super::seeded_remote;

pub(crate) const HOLD: &str =
    "apiVersion: sluice.dev/v1alpha1\nkind: Config\nadoption:\n  hold: true\n";
pub(crate) const STATUS: &str = ".sluice/status/prod/podinfo.yaml";
pub(crate) const SOURCE: &str = "apps/podinfo/deployment.yaml";

/// The podinfo repo under the hold in `tmp`: its bare remote, and where `reconcile` clones it.
pub(crate) fn held_world(tmp: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let canary = podinfo().yaml("    stepWeight: 20\n    maxWeight: 60");
    let bare = seeded_remote(
        tmp,
        &[
            (SOURCE, DEPLOYMENT),
            ("apps/podinfo/configs.yaml", CONFIGS),
            (CANARY_FILE, &canary),
            (".sluice/config.yaml", HOLD),
        ],
    );
    (bare, tmp.join("w"))
}
