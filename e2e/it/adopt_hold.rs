//! `adoption.hold` in `.sluice/config.yaml`, through `sluice reconcile` on a stepped clock: a
//! canary gets its first render at rest (primary from the source, weights 100/0, the canary
//! scaled to 0) and nothing else, whatever its source does, until the hold is released.

use std::time::Duration;

use crate::support::adopt::{held_world, SOURCE, STATUS};
use crate::support::manifests::DEPLOYMENT;
use crate::support::rollout::OUTPUT;
use crate::support::{
    commits_of, human_clone, human_commit, run_sluice, show, status_at_main, Stepped,
};

fn phase(bare: &std::path::Path) -> String {
    status_at_main(bare, STATUS).expect("a status file")["phase"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn adoption_hold_commits_the_first_render_only_until_released() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, work) = held_world(tmp.path());
    let clock = Stepped::default();
    clock.reconcile(&bare, &work);
    let first = commits_of(&bare, "prod/podinfo");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(phase(&bare), "Initialized");
    let primary = show(&bare, "main", &format!("{OUTPUT}/podinfo-primary.yaml"));
    assert!(primary.contains("podinfo:6.7.0"), "{primary}");
    let canary = show(&bare, "main", &format!("{OUTPUT}/podinfo-canary.yaml"));
    assert!(canary.contains("replicas: 0"), "{canary}");
    let status = run_sluice(&["status", "--dir", &bare.display().to_string()]);
    assert_eq!(status.0, 0, "{status:?}");
    assert!(
        status
            .1
            .contains("prod/podinfo HELD (adoption, .sluice/config.yaml adoption.hold)"),
        "{status:?}"
    );

    // A new revision: held, tick after tick, past every interval the canary has.
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    let bumped = DEPLOYMENT.replace("6.7.0", "6.7.1");
    human_commit(&human, SOURCE, &bumped, "podinfo: 6.7.1");
    for _ in 0..6 {
        clock.jump(Duration::from_millis(1100));
        clock.reconcile(&bare, &work);
    }
    assert_eq!(commits_of(&bare, "prod/podinfo"), first);
    assert_eq!(phase(&bare), "Initialized");
    assert_eq!(
        show(&bare, "main", &format!("{OUTPUT}/podinfo-primary.yaml")),
        primary
    );

    // Released: the next tick starts the rollout of 6.7.1.
    human_commit(
        &human,
        ".sluice/config.yaml",
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n",
        "sluice: release the adoption hold",
    );
    clock.jump(Duration::from_millis(1100));
    clock.reconcile(&bare, &work);
    assert_eq!(phase(&bare), "Progressing");
}
