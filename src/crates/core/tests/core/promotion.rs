//! The end of a rollout as Flagger 1.44 has it: which decisions end a rollout (and so run the
//! `post-rollout` webhooks, fluxcd/flagger#1918), and a promotion whose primary does not get
//! ready (fluxcd/flagger#1931: the canary keeps the traffic instead of a rollback); and the
//! promotions of Argo Rollouts without a rollout: no steps, and the fast rollback of
//! `rollbackWindow`.

use std::time::Duration;

use sluice_core::decide::{decide, Action};
use sluice_core::model::Canary;
use sluice_core::observe::Observations;
use sluice_core::operate::{operate, Operation};
use sluice_core::schedule::Pause;
use sluice_core::status::{Phase, Status};

use crate::builders::{canary, t, walk_until};

fn initialized(c: &Canary<()>) -> Status {
    decide(c, None, &Observations::revision("r0"), t(0)).status
}

/// fluxcd/flagger#1918 (commit f33cae54, "Run post-rollout hooks when skipAnalysis is
/// true"): the promotion that skips the analysis ends the rollout, so the post-rollout
/// webhooks run.
#[test]
fn skipping_the_analysis_ends_the_rollout_and_runs_post_rollout_hooks() {
    let c = canary().skip_analysis(true).build();
    let d = decide(
        &c,
        Some(&initialized(&c)),
        &Observations::revision("r1"),
        t(10),
    );
    assert_eq!(d.action, Action::Promote);
    assert_eq!(d.status.phase, Phase::Succeeded);
    assert!(d.ends_rollout());
}

/// A rollout ends once: at its promotion, rollback or failed promotion, never at the steps
/// between or at a later commit about the same idle canary (today a pause of a succeeded
/// canary ran the post-rollout webhooks again).
#[test]
fn only_the_last_decision_of_a_rollout_ends_it() {
    let c = canary().step_weight(20).max_weight(40).build();
    let rollout = walk_until(&c, &initialized(&c), "r1", 10, Phase::Succeeded);
    let ends: Vec<(Action, bool)> = rollout
        .iter()
        .map(|d| (d.action.clone(), d.ends_rollout()))
        .collect();
    assert_eq!(ends.last(), Some(&(Action::Finalise, true)), "{ends:?}");
    assert!(
        ends[..ends.len() - 1].iter().all(|(_, end)| !end),
        "{ends:?}"
    );

    let done = &rollout.last().unwrap().status;
    let paused = operate(&c, Some(done), Operation::Pause, "test", t(9_000)).unwrap();
    assert!(paused.commits());
    assert_eq!(paused.status.phase, Phase::Succeeded);
    assert!(!paused.ends_rollout());

    let midway = walk_until(&c, &initialized(&c), "r1", 10, Phase::Progressing)
        .pop()
        .unwrap()
        .status;
    let aborted = operate(&c, Some(&midway), Operation::Abort, "test", t(9_000)).unwrap();
    assert!(matches!(aborted.action, Action::Rollback { .. }));
    assert!(aborted.ends_rollout());
}

/// fluxcd/flagger#1931 (commits 8eaa0408 "Keep canary alive when primary promotion fails"
/// and e461dd9b "Route traffic to canary on promotion failure"): while the promotion's
/// change is not live the promotion holds (no traffic shifted to the primary, the canary not
/// scaled down); past the progress deadline it fails with all traffic on the canary, and
/// the post-rollout webhooks run. It is not a rollback to the primary.
#[test]
fn a_promotion_whose_primary_is_not_ready_fails_with_the_traffic_on_the_canary() {
    let c = canary()
        .step_weight(20)
        .max_weight(40)
        .sync(true)
        .progress_deadline(Duration::from_secs(600))
        .build();
    for phase in [Phase::Promoting, Phase::Finalising] {
        let rollout = walk_until(&c, &initialized(&c), "r1", 10, phase);
        let at = rollout.last().unwrap().status.clone();
        assert_eq!(at.phase, phase);
        let not_live = Observations {
            applied: false,
            ..Observations::revision("r1")
        };
        let started = at.step_started.as_second();
        // Within the deadline: a hold, whatever the interval says.
        let held = decide(&c, Some(&at), &not_live, t(started - 1_700_000_000 + 300));
        assert_eq!(held.action, Action::Hold, "{phase:?}");
        assert_eq!(
            held.events,
            vec!["podinfo.prod promotion waits until the last change is applied and the primary is ready"]
        );
        // Past it: failed, all traffic to the canary.
        let failed = decide(&c, Some(&at), &not_live, t(started - 1_700_000_000 + 600));
        assert_eq!(
            failed.action,
            Action::PromotionFailed {
                reason: "the last change was not applied, or the primary not ready, within 600s"
                    .into()
            },
            "{phase:?}"
        );
        assert_eq!(failed.status.phase, Phase::Failed);
        assert_eq!(
            (failed.status.primary_weight, failed.status.canary_weight),
            (0, 100)
        );
        assert_eq!(
            failed.events,
            vec!["Promotion of podinfo.prod failed, primary not ready: the last change was not applied, or the primary not ready, within 600s"]
        );
        assert!(failed.ends_rollout());
        // Then the canary keeps the traffic until a new revision.
        let after = decide(
            &c,
            Some(&failed.status),
            &Observations::revision("r1"),
            t(5_000),
        );
        assert_eq!(after.action, Action::Hold);
        let next = decide(
            &c,
            Some(&failed.status),
            &Observations::revision("r2"),
            t(5_000),
        );
        assert_eq!(next.action, Action::StartRollout);
        assert_eq!(
            (next.status.primary_weight, next.status.canary_weight),
            (100, 0)
        );
    }
}

/// Without a sync target the change counts as live after the settle delay: a promotion moves
/// on its interval alone, as before.
#[test]
fn a_live_promotion_moves_on_its_interval() {
    let c = canary().step_weight(20).max_weight(40).build();
    let rollout = walk_until(&c, &initialized(&c), "r1", 10, Phase::Succeeded);
    let actions: Vec<&Action> = rollout.iter().map(|d| &d.action).collect();
    assert!(matches!(
        actions[actions.len() - 3..],
        [
            Action::Promote,
            Action::AdvancePrimary { weight: 100 },
            Action::Finalise
        ]
    ));
}

/// A new revision behind `confirm-rollout` gets no traffic before its approval. After a
/// failed promotion the canary carried all of it, and the canary workload is rendered from the
/// new source: waiting kept 100 % on the unapproved revision, and its approval then dropped it
/// to 0 (the core's random walks found it).
#[test]
fn a_new_revision_waiting_for_rollout_approval_gets_no_traffic() {
    let (c, waiting) = crate::builders::waiting_for_rollout();
    let failed_promotion = Status {
        phase: Phase::Failed,
        canary_weight: 100,
        primary_weight: 0,
        canary_revision: Some("r1".into()),
        promoted_revision: "r1".into(),
        waiting_for: None,
        ..waiting
    };
    let d = decide(
        &c,
        Some(&failed_promotion),
        &Observations::revision("r2"),
        t(5_000),
    );
    assert_eq!(d.action, Action::WaitRollout);
    assert_eq!(d.status.canary_revision.as_deref(), Some("r2"));
    assert_eq!((d.status.primary_weight, d.status.canary_weight), (100, 0));
}

/// The revisions r0 (initial), r1 and r2 each rolled out through their steps and promoted.
fn promoted_twice(c: &Canary<()>) -> Status {
    let mut status = initialized(c);
    for (i, r) in ["r1", "r2"].into_iter().enumerate() {
        let start = 10 + 10_000 * i as i64;
        let walk = walk_until(c, &status, r, start, Phase::Succeeded);
        assert!(
            walk.iter()
                .any(|d| matches!(d.action, Action::AdvanceCanary { .. })),
            "{r} rolled out through its steps: {walk:?}"
        );
        status = walk.last().unwrap().status.clone();
        assert_eq!(status.promoted_revision, r);
    }
    status
}

/// Argo's `rollbackWindow`: going back to a revision rolled out before the stable one, with
/// fewer than `revisions` between them, promotes it at once, skipping the steps.
#[test]
fn a_rollback_within_the_window_is_promoted_at_once() {
    let c = canary()
        .steps(&[(20, Pause::Interval), (50, Pause::Interval)])
        .rollback_window(1)
        .build();
    let stable_r2 = promoted_twice(&c);
    assert_eq!(stable_r2.rolled_out, ["r0", "r1", "r2"]);

    let d = decide(
        &c,
        Some(&stable_r2),
        &Observations::revision("r1"),
        t(50_000),
    );
    assert_eq!(d.action, Action::Promote, "{d:?}");
    assert_eq!(d.status.phase, Phase::Succeeded);
    assert_eq!(d.status.promoted_revision, "r1");
    assert_eq!((d.status.canary_weight, d.status.primary_weight), (0, 100));
    assert!(d.events[0].contains("Rollback within the window"), "{d:?}");
    // r1 keeps its place: r2 is now the one rolled out after the stable revision.
    assert_eq!(d.status.rolled_out, ["r0", "r1", "r2"]);

    // r0 has r1 between it and the stable r2: outside a window of 1, it runs its steps.
    let d = decide(
        &c,
        Some(&stable_r2),
        &Observations::revision("r0"),
        t(50_000),
    );
    assert_eq!(d.action, Action::StartRollout, "{d:?}");
    let wide = canary()
        .steps(&[(20, Pause::Interval), (50, Pause::Interval)])
        .rollback_window(2)
        .build();
    let d = decide(
        &wide,
        Some(&stable_r2),
        &Observations::revision("r0"),
        t(50_000),
    );
    assert_eq!(d.action, Action::Promote, "{d:?}");
}

/// Without `rollbackWindow` a rollback runs its steps, and the status records no revisions.
#[test]
fn without_a_window_a_rollback_runs_its_steps() {
    let c = canary()
        .steps(&[(20, Pause::Interval), (50, Pause::Interval)])
        .build();
    let stable_r2 = promoted_twice(&c);
    assert!(stable_r2.rolled_out.is_empty());
    let d = decide(
        &c,
        Some(&stable_r2),
        &Observations::revision("r1"),
        t(50_000),
    );
    assert_eq!(d.action, Action::StartRollout, "{d:?}");
}

/// A Rollout without steps (or without a setWeight): Argo promotes the new revision at
/// once, as a rolling update; its first analysis tick promotes.
#[test]
fn a_canary_without_steps_is_promoted_on_its_first_tick() {
    let c = canary().steps(&[]).build();
    let walk = walk_until(&c, &initialized(&c), "r1", 10, Phase::Succeeded);
    let actions: Vec<&Action> = walk.iter().map(|d| &d.action).collect();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::AdvanceCanary { .. })),
        "{actions:?}"
    );
    assert!(actions.contains(&&Action::Promote), "{actions:?}");
    assert_eq!(walk.last().unwrap().status.promoted_revision, "r1");
}
