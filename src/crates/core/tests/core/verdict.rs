//! The tick's facts weighed before the rollout rules: drift, approval pull requests closed or
//! merged (and merged by a commit the signing policy does not allow), deleted specs. Every one
//! of these decisions is made in the core; the tick only renders them.

use sluice_core::decide::{decide, Action, DriftStep};
use sluice_core::observe::{
    Deletion, DriftFact, DriftPolicy, Facts, MergedApproval, Observations, Unreachable,
};
use sluice_core::status::{Gate, Phase, Status};
use sluice_core::verdict::{deleted, redrawn, verdict, Basis, DeletedVerdict, Verdict};

use crate::builders::{canary, t, waiting_for_rollout};

/// A canary mid-analysis at step 1 (weight 10), decided by the rules.
fn progressing() -> (sluice_core::model::Canary<()>, Status) {
    let c = canary().step_weight(10).max_weight(50).build();
    let initialized = decide(&c, None, &Observations::revision("r0"), t(0)).status;
    let started = decide(&c, Some(&initialized), &Observations::revision("r1"), t(10)).status;
    let stepped = decide(&c, Some(&started), &Observations::revision("r1"), t(100)).status;
    assert_eq!(stepped.phase, Phase::Progressing, "{stepped:?}");
    (c, stepped)
}

fn drift(files: &[&str], policy: DriftPolicy, sluice_status: &Status) -> Facts {
    Facts {
        drift: Some(DriftFact {
            files: files.iter().map(|f| f.to_string()).collect(),
            by: "abc1234 by Eve <eve@example.com>: edit".to_string(),
            output_from: "0123456789abcdef0123456789abcdef01234567".to_string(),
            sluice_status: sluice_status.clone(),
            policy,
            beyond: None,
        }),
        ..Facts::default()
    }
}

#[test]
fn without_facts_the_verdict_is_the_rules_decision() {
    let (c, status) = progressing();
    let obs = Observations::revision("r1");
    let v = verdict(&c, Some(&status), &obs, &Facts::default(), t(200));
    assert_eq!(v.basis, Basis::Rules);
    assert_eq!(v.decision, decide(&c, Some(&status), &obs, t(200)));
    assert!(v.warnings.is_empty());
}

#[test]
fn drift_holds_once_then_holds_without_a_commit() {
    let (c, status) = progressing();
    let obs = Observations::revision("r1");
    let facts = drift(
        &["clusters/prod/podinfo/route.yaml"],
        DriftPolicy::Hold,
        &status,
    );
    let first = verdict(&c, Some(&status), &obs, &facts, t(200));
    assert_eq!(first.basis, Basis::Drift);
    assert_eq!(
        first.decision.action,
        Action::Drift(DriftStep::Hold {
            files: vec!["clusters/prod/podinfo/route.yaml".to_string()]
        })
    );
    assert_eq!(
        first.decision.status.drift,
        vec!["clusters/prod/podinfo/route.yaml"]
    );
    assert!(first.decision.events[0]
        .starts_with("Held: clusters/prod/podinfo/route.yaml changed outside sluice by abc1234"));
    assert_eq!(first.decision.status.message, first.decision.events[0]);
    // The next tick finds the same files changed: said once already, nothing to commit.
    let held = first.decision.status;
    let again = verdict(&c, Some(&held), &obs, &facts, t(300));
    assert_eq!(again.decision.action, Action::Hold);
    assert!(!again.decision.commits());
    assert_eq!(again.decision.status, held);
}

#[test]
fn drift_restore_writes_back_sluices_status_and_names_the_commit() {
    let (c, status) = progressing();
    let mut edited = status.clone();
    edited.canary_weight = 90;
    let facts = drift(&["a.yaml", "b.yaml"], DriftPolicy::Restore, &status);
    let v = verdict(
        &c,
        Some(&edited),
        &Observations::revision("r1"),
        &facts,
        t(200),
    );
    assert_eq!(
        v.decision.action,
        Action::Drift(DriftStep::Restore {
            files: vec!["a.yaml".to_string(), "b.yaml".to_string()],
            from: "0123456789abcdef0123456789abcdef01234567".to_string(),
        })
    );
    assert_eq!(v.decision.status.canary_weight, status.canary_weight);
    assert!(v.decision.status.drift.is_empty());
    assert!(v.decision.events[0].ends_with("written back as sluice committed them in 0123456"));
}

#[test]
fn drift_past_the_look_back_holds_even_under_restore_and_says_why() {
    let (c, status) = progressing();
    for policy in [DriftPolicy::Hold, DriftPolicy::Restore] {
        let mut facts = drift(&["route.yaml"], policy, &status);
        if let Some(d) = facts.drift.as_mut() {
            d.beyond = Some(500);
        }
        let v = on_r1(&c, &status, &facts, 200);
        assert_eq!(
            v.decision.action,
            Action::Drift(DriftStep::Hold {
                files: vec!["route.yaml".to_string()]
            }),
            "{policy:?}"
        );
        assert_eq!(v.decision.status.drift, vec!["route.yaml"]);
        let event = &v.decision.events[0];
        assert!(
            event.starts_with("Held: route.yaml changed outside sluice by abc1234 by Eve <eve@example.com>: edit: not what sluice renders for the canary's status, and no commit of sluice's for it is within the last 500 commits;"),
            "{event}"
        );
        // Said once: the next tick holds without a commit.
        let again = on_r1(&c, &v.decision.status, &facts, 300);
        assert!(!again.decision.commits(), "{policy:?}");
    }
}

#[test]
fn redrawn_moves_nothing_and_draws_the_primary_only_when_asked() {
    let (_, status) = progressing();
    let kept = redrawn(&status, false);
    assert_eq!(kept.status, status);
    assert!(!kept.commits());
    assert_eq!(redrawn(&status, true).action, Action::Promote);
    assert_eq!(redrawn(&status, true).status, status);
}

#[test]
fn a_drift_hold_resumes_when_the_files_are_sluices_again() {
    let (c, mut status) = progressing();
    status.drift = vec!["route.yaml".to_string()];
    let v = verdict(
        &c,
        Some(&status),
        &Observations::revision("r1"),
        &Facts::default(),
        t(200),
    );
    assert_eq!(v.basis, Basis::Drift);
    assert_eq!(v.decision.action, Action::Drift(DriftStep::Resolved));
    assert!(v.decision.status.drift.is_empty());
    assert_eq!(
        v.decision.events,
        vec!["Resumed: route.yaml is sluice's again"]
    );
}

fn waiting_for_approval() -> (sluice_core::model::Canary<()>, Status) {
    let (c, waiting) = waiting_for_rollout();
    assert_eq!(waiting.phase, Phase::Waiting);
    (c, waiting)
}

/// A merged approval's fact.
fn merged(fact: MergedApproval) -> Facts {
    Facts {
        merged: Some(fact),
        ..Facts::default()
    }
}

/// The verdict on revision `r1` at `t(at)`.
fn on_r1(c: &sluice_core::model::Canary<()>, status: &Status, facts: &Facts, at: i64) -> Verdict {
    verdict(c, Some(status), &Observations::revision("r1"), facts, t(at))
}

#[test]
fn an_approval_closed_unmerged_rolls_the_canary_back_as_an_abort() {
    let (c, waiting) = waiting_for_approval();
    let facts = Facts {
        rejected: Some("approval pull request #7 was closed without merging".to_string()),
        ..Facts::default()
    };
    let v = verdict(
        &c,
        Some(&waiting),
        &Observations::revision("r1"),
        &facts,
        t(20),
    );
    assert!(
        matches!(v.decision.action, Action::Rollback { .. }),
        "{:?}",
        v.decision.action
    );
    assert_eq!(v.decision.status.phase, Phase::Failed);
    assert_eq!(
        v.basis,
        Basis::Rejected {
            reason: "approval pull request #7 was closed without merging".to_string()
        }
    );
}

#[test]
fn a_rejection_that_cannot_roll_back_is_a_warning_and_the_rules_decide() {
    let (c, status) = progressing();
    let mut done = status.clone();
    done.phase = Phase::Succeeded;
    let facts = Facts {
        rejected: Some("closed".to_string()),
        ..Facts::default()
    };
    let obs = Observations::revision("r1");
    let v = verdict(&c, Some(&done), &obs, &facts, t(20));
    assert_eq!(v.basis, Basis::Rules);
    assert_eq!(v.decision, decide(&c, Some(&done), &obs, t(20)));
    assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
}

#[test]
fn an_approval_merged_by_an_unknown_login_changes_nothing() {
    let (c, status) = progressing();
    let facts = merged(MergedApproval::MergerUnknown("forge down".to_string()));
    let v = on_r1(&c, &status, &facts, 20);
    assert_eq!(v.basis, Basis::MergerUnknown);
    assert_eq!(v.decision.action, Action::Hold);
    assert_eq!(v.decision.status, status);
    assert_eq!(v.decision.events, vec!["forge down"]);
}

#[test]
fn an_approval_merged_by_a_commit_the_signing_policy_does_not_allow_changes_nothing() {
    let (c, status) = progressing();
    let facts = Facts {
        unsigned: Some("the approval merged in abc1234 is not signed: unsigned".to_string()),
        ..merged(MergedApproval::Approved {
            by: Some("eve".to_string()),
            source: "https://forge/pr/1".to_string(),
            policy: None,
        })
    };
    let v = on_r1(&c, &status, &facts, 20);
    assert_eq!(
        v.basis,
        Basis::Unsigned {
            reason: "the approval merged in abc1234 is not signed: unsigned".to_string()
        }
    );
    assert_eq!(v.decision.action, Action::Hold);
    assert_eq!(v.decision.status, status);
    let event = &v.decision.events[0];
    assert!(
        event.starts_with("Held: the approval merged in abc1234 is not signed: unsigned;"),
        "{event}"
    );
    assert_eq!(v.warnings, v.decision.events);
}

#[test]
fn an_approval_merged_by_a_login_not_allowed_puts_the_waiting_state_back() {
    let (c, waiting) = waiting_for_approval();
    let (_, progressing) = progressing();
    let refused = |waiting: &Status, reason: &str| {
        merged(MergedApproval::Refused {
            waiting: Box::new(waiting.clone()),
            reason: reason.to_string(),
        })
    };
    let v = on_r1(
        &c,
        &progressing,
        &refused(&waiting, "mallory may not approve"),
        20,
    );
    assert_eq!(v.decision.action, Action::WaitRollout);
    assert_eq!(v.decision.status.phase, Phase::Waiting);
    assert_eq!(
        v.decision.events,
        vec!["Approval of podinfo.prod refused: mallory may not approve"]
    );
    let mut at_step = waiting.clone();
    at_step.phase = Phase::WaitingApproval;
    at_step.waiting_for = Some(Gate::Promotion);
    let v = on_r1(&c, &progressing, &refused(&at_step, "no"), 20);
    assert_eq!(v.decision.action, Action::WaitApproval(Gate::Promotion));
}

#[test]
fn an_approved_merge_is_decided_by_the_rules_and_remembers_who_merged() {
    let (c, status) = progressing();
    let facts = merged(MergedApproval::Approved {
        by: Some("alice".to_string()),
        source: "https://forge/pr/1".to_string(),
        policy: None,
    });
    let obs = Observations::revision("r1");
    let v = on_r1(&c, &status, &facts, 200);
    assert_eq!(v.decision, decide(&c, Some(&status), &obs, t(200)));
    assert_eq!(
        v.basis,
        Basis::Approved {
            by: Some("alice".to_string()),
            source: "https://forge/pr/1".to_string(),
            policy: None,
        }
    );
}

#[test]
fn drift_comes_before_every_approval_fact() {
    let (c, status) = progressing();
    let mut facts = drift(&["route.yaml"], DriftPolicy::Hold, &status);
    facts.rejected = Some("closed".to_string());
    facts.merged = Some(MergedApproval::MergerUnknown("x".to_string()));
    let v = verdict(
        &c,
        Some(&status),
        &Observations::revision("r1"),
        &facts,
        t(200),
    );
    assert_eq!(v.basis, Basis::Drift);
}

#[test]
fn a_deleted_spec_reverts_only_when_recorded_and_every_spec_loads() {
    let d = |reverts, unloadable: Option<&str>, spec_errors| {
        deleted(&Deletion {
            reverts,
            unloadable: unloadable.map(str::to_string),
            spec_errors,
        })
    };
    assert_eq!(d(false, Some("x.yaml"), true), DeletedVerdict::Orphaned);
    assert_eq!(d(true, None, false), DeletedVerdict::Revert);
    let held = |v: DeletedVerdict| match v {
        DeletedVerdict::Held(why) => why,
        other => panic!("expected a hold, got {other:?}"),
    };
    assert!(held(d(true, Some("apps/x.yaml"), false)).contains("apps/x.yaml does not load"));
    assert!(held(d(true, None, true)).contains("a canary spec does not load"));
}

#[test]
fn an_unreachable_cluster_holds_the_wave_says_so_once_and_never_moves_it() {
    let (c, status) = progressing();
    let fact = Unreachable {
        cluster: "API server https://eu.example:6443".to_string(),
        error: "connection refused".to_string(),
    };
    let facts = Facts {
        unreachable: Some(fact.clone()),
        ..Facts::default()
    };
    let obs = Observations::revision("r1");
    // Long past the step's pause: the rules alone would move the canary on.
    assert!(decide(&c, Some(&status), &obs, t(10_000)).commits());
    let first = verdict(&c, Some(&status), &obs, &facts, t(10_000));
    assert_eq!(first.decision.action, Action::Unreachable);
    assert_eq!(first.basis, Basis::Unreachable(fact));
    let held = &first.decision.status;
    assert!(
        held.message.starts_with(
            "Held: cluster unreachable: API server https://eu.example:6443: connection refused"
        ),
        "{}",
        held.message
    );
    let mut unchanged = held.clone();
    unchanged.message = status.message.clone();
    assert_eq!(unchanged, status, "only the message changes");
    assert!(
        first.decision.wake_at > Some(t(10_000)),
        "asked again later"
    );

    // Later ticks of the same outage commit nothing, and still hold.
    let again = verdict(&c, Some(held), &obs, &facts, t(10_060));
    assert_eq!(again.decision.action, Action::Hold);
    assert_eq!(&again.decision.status, held);
    assert!(again.decision.wake_at > Some(t(10_060)));

    // The cluster answers again: the rules decide.
    let back = verdict(&c, Some(held), &obs, &Facts::default(), t(10_060));
    assert_eq!(back.basis, Basis::Rules);
    assert_eq!(back.decision, decide(&c, Some(held), &obs, t(10_060)));
}

/// Under `adoption.hold` a canary without a status gets its first render (initialized at
/// rest, weights 100/0, as without the hold), and a new revision, a step due or an approval
/// merged moves nothing; without the hold the same status starts the rollout.
#[test]
fn adoption_hold_initializes_then_never_moves() {
    let c = canary().step_weight(10).max_weight(50).build();
    let held = Facts {
        adoption_hold: true,
        ..Facts::default()
    };
    let first = verdict(&c, None, &Observations::revision("r0"), &held, t(0));
    assert_eq!(first.basis, Basis::Rules);
    assert_eq!(
        first.decision,
        decide(&c, None, &Observations::revision("r0"), t(0))
    );
    let at_rest = first.decision.status;
    assert_eq!(at_rest.phase, Phase::Initialized);
    assert_eq!((at_rest.primary_weight, at_rest.canary_weight), (100, 0));
    let changed = Observations::revision("r1");
    for at in [10, 100, 10_000] {
        let v = verdict(&c, Some(&at_rest), &changed, &held, t(at));
        assert_eq!(v.decision.action, Action::Hold, "at {at}: {v:?}");
        assert!(!v.decision.commits(), "at {at}: {v:?}");
        assert_eq!(v.decision.status, at_rest);
        assert!(
            v.decision.events[0].starts_with("held: adoption: podinfo.prod keeps its first render"),
            "{:?}",
            v.decision.events
        );
    }
    let (c2, mid) = progressing();
    let v = verdict(
        &c2,
        Some(&mid),
        &Observations::revision("r1"),
        &held,
        t(10_000),
    );
    assert_eq!(v.decision.action, Action::Hold, "{v:?}");
    let released = verdict(&c, Some(&at_rest), &changed, &Facts::default(), t(10));
    assert_eq!(
        released.decision.status.phase,
        Phase::Progressing,
        "{released:?}"
    );
}
