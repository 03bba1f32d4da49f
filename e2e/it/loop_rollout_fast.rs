//! Argo Rollouts promoted without a rollout, through the loop: a canary without steps is
//! promoted at once (Argo's rolling update: the canary never takes a share), and with
//! `spec.rollbackWindow` going back to a revision rolled out before the stable one is
//! promoted at once, skipping the steps (Argo's fast rollback), while a new revision still
//! runs them. Each sluice commit's status is read back from the bare remote.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::rollout::{
    podinfo_rollout, replica_rollout, replica_services, show, sluice_commits, OUTPUT, ROLLOUT_FILE,
    STABLE_FILE, STATUS_FILE,
};
use crate::support::World;

/// Two timed steps of a replica-based canary.
const STEPS: &str = "        - setWeight: 20
        - pause: {duration: 30s}
        - setWeight: 50
        - pause: {duration: 30s}";

fn world(rollout: String) -> World {
    let files = [
        (ROLLOUT_FILE, rollout),
        ("apps/podinfo/services.yaml", replica_services()),
    ];
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    World::served(&pairs).building(OUTPUT)
}

/// The canary weight of each sluice commit's status, in order (from commit `from` on).
fn canary_weights(w: &World, from: usize) -> Vec<u64> {
    sluice_commits(&w.bare)
        .iter()
        .skip(from)
        .map(|(sha, _)| {
            let status: Json = serde_saphyr::from_str(&show(&w.bare, sha, STATUS_FILE)).unwrap();
            status["canaryWeight"].as_u64().unwrap()
        })
        .collect()
}

/// A Rollout without steps (`canary: {}` but for its canaryService): the stable workload
/// rolls to the new revision at once, the canary never taking a share.
#[test]
fn rollout_without_steps_promotes_at_once() {
    let bare = |v: &str| podinfo_rollout(v, "      canaryService: podinfo-canary\n");
    let mut w = world(bare("6.7.0"));
    w.until(Phase::Initialized);
    w.human_writes(ROLLOUT_FILE, &bare("6.7.1"), "podinfo: 6.7.1");
    w.until(Phase::Succeeded);
    let weights = canary_weights(&w, 0);
    assert!(weights.iter().all(|w| *w == 0), "{weights:?}");
    let stable = show(&w.bare, "main", STABLE_FILE);
    assert!(stable.contains("podinfo:6.7.1"), "promoted: {stable}");
}

/// `rollbackWindow: {revisions: 1}`: 6.7.1 runs its steps; going back to 6.7.0 (the one
/// rolled out before the stable 6.7.1) is promoted at once; 6.7.2, new, runs its steps.
#[test]
fn rollback_within_the_window_skips_the_steps() {
    let windowed = |v: &str| {
        replica_rollout(v, STEPS).replace(
            "  revisionHistoryLimit: 2\n",
            "  revisionHistoryLimit: 2\n  rollbackWindow:\n    revisions: 1\n",
        )
    };
    let mut w = world(windowed("6.7.0"));
    w.until(Phase::Initialized);
    w.human_writes(ROLLOUT_FILE, &windowed("6.7.1"), "podinfo: 6.7.1");
    w.until(Phase::Succeeded);
    let weights = canary_weights(&w, 0);
    assert!(weights.contains(&50), "6.7.1 ran its steps: {weights:?}");
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));

    let before = sluice_commits(&w.bare).len();
    w.human_writes(ROLLOUT_FILE, &windowed("6.7.0"), "podinfo: back to 6.7.0");
    w.until(Phase::Succeeded);
    let weights = canary_weights(&w, before);
    assert!(
        !weights.is_empty() && weights.iter().all(|w| *w == 0),
        "{weights:?}"
    );
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
    let status = w.yaml_at_main(STATUS_FILE);
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("Rollback within the window")),
        "{status:?}"
    );

    let before = sluice_commits(&w.bare).len();
    w.human_writes(ROLLOUT_FILE, &windowed("6.7.2"), "podinfo: 6.7.2");
    w.until(Phase::Succeeded);
    let weights = canary_weights(&w, before);
    assert!(weights.contains(&50), "6.7.2 ran its steps: {weights:?}");
}
