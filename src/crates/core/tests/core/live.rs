//! The GitOps engine's observations judged: is the pushed commit live?

use jiff::Timestamp;
use sluice_core::live::*;

/// The commit the test's Flux revisions (`main@sha1:<sha>`, `main/<sha>`) name.
fn flux_revision_sha(revision: &str) -> Option<String> {
    let sha = revision.rsplit([':', '/']).next()?;
    is_full_sha(sha).then(|| sha.to_string())
}

const A: &str = "1111111111111111111111111111111111111111";
const B: &str = "2222222222222222222222222222222222222222";
const C: &str = "3333333333333333333333333333333333333333";

/// History A <- B <- C: each later commit descends from the earlier ones.
fn linear(applied: &str, pushed: &str) -> bool {
    let order = [A, B, C];
    let pos = |s: &str| order.iter().position(|x| *x == s);
    matches!((pos(applied), pos(pushed)), (Some(a), Some(p)) if a >= p)
}

fn t(s: &str) -> Option<Timestamp> {
    Some(s.parse().unwrap())
}

fn flux(rev: &str, ready: ConditionStatus, gen: i64, cond_gen: i64) -> SyncObservation {
    SyncObservation::Flux(FluxObservation {
        namespace: "flux-system".into(),
        name: "podinfo".into(),
        generation: Some(gen),
        suspended: false,
        last_applied_revision: Some(rev.into()),
        applied_sha: flux_revision_sha(rev),
        last_attempted_revision: Some(rev.into()),
        observed_generation: Some(cond_gen),
        ready: Some(Condition {
            status: ready,
            reason: "ReconciliationFailed".into(),
            message: "kustomize build failed: accumulating resources".into(),
            observed_generation: Some(cond_gen),
        }),
    })
}

fn argo(rev: &str, sync: ArgoSyncStatus, health: ArgoHealth) -> ArgoObservation {
    ArgoObservation {
        namespace: "argocd".into(),
        name: "podinfo".into(),
        sync_revisions: vec![rev.into()],
        sync_status: sync,
        health,
        health_last_transition: None,
        reconciled_at: t("2026-01-01T00:01:00Z"),
        operation: Some(ArgoOperation {
            phase: OperationPhase::Succeeded,
            message: "successfully synced (all tasks run)".into(),
            revisions: vec![rev.into()],
            started_at: t("2026-01-01T00:00:50Z"),
            finished_at: t("2026-01-01T00:00:55Z"),
        }),
        operation_requested: false,
        error_conditions: Vec::new(),
    }
}

fn not_yet_reason(a: Applied) -> String {
    match a {
        Applied::NotYet { reason } => reason,
        other => panic!("expected NotYet, got {other:?}"),
    }
}

#[test]
fn flux_pushed_or_descendant_and_ready_at_generation() {
    let ok = |rev: &str| flux(rev, ConditionStatus::True, 3, 3);
    assert_eq!(
        applied(&ok(&format!("main@sha1:{B}")), B, linear),
        Applied::Yes
    );
    assert_eq!(
        applied(&ok(&format!("main@sha1:{C}")), B, linear),
        Applied::Yes
    );
    assert_eq!(applied(&ok(&format!("main/{C}")), B, linear), Applied::Yes);
    let reason = not_yet_reason(applied(&ok(&format!("main@sha1:{A}")), B, linear));
    assert!(
        reason.contains("applied 111111111111, not yet 222222222222"),
        "{reason}"
    );
    // Stale Ready condition: the spec changed after it was written.
    let reason = not_yet_reason(applied(
        &flux(&format!("main@sha1:{B}"), ConditionStatus::True, 4, 3),
        B,
        linear,
    ));
    assert!(
        reason.contains("generation 3, the object is at generation 4"),
        "{reason}"
    );
}

#[test]
fn flux_not_ready_is_not_yet_with_the_message() {
    let obs = flux(&format!("main@sha1:{B}"), ConditionStatus::False, 3, 3);
    let reason = not_yet_reason(applied(&obs, B, linear));
    assert!(
        reason.contains("ReconciliationFailed: kustomize build failed"),
        "{reason}"
    );
    // Still on the old revision and failing on the new one: the message is kept too.
    let obs = flux(&format!("main@sha1:{A}"), ConditionStatus::False, 3, 3);
    let reason = not_yet_reason(applied(&obs, B, linear));
    assert!(
        reason.contains("Ready=False, ReconciliationFailed"),
        "{reason}"
    );
}

#[test]
fn flux_suspended_and_never_applied() {
    let SyncObservation::Flux(mut f) = flux(&format!("main@sha1:{B}"), ConditionStatus::True, 1, 1)
    else {
        unreachable!()
    };
    f.suspended = true;
    let reason = not_yet_reason(applied(&SyncObservation::Flux(f.clone()), B, linear));
    assert!(reason.contains("suspended"), "{reason}");
    f.suspended = false;
    f.last_applied_revision = None;
    f.applied_sha = None;
    let reason = not_yet_reason(applied(&SyncObservation::Flux(f), B, linear));
    assert!(
        reason.contains("has not applied any revision yet"),
        "{reason}"
    );
}

#[test]
fn argo_synced_healthy_descendant_is_applied() {
    let obs =
        |rev: &str| SyncObservation::ArgoCd(argo(rev, ArgoSyncStatus::Synced, ArgoHealth::Healthy));
    assert_eq!(applied(&obs(B), B, linear), Applied::Yes);
    assert_eq!(applied(&obs(C), B, linear), Applied::Yes);
    assert_eq!(
        applied(&obs(&B.to_uppercase()), B, |_, _| false),
        Applied::Yes
    );
    let reason = not_yet_reason(applied(&obs(A), B, linear));
    assert!(reason.contains("not yet 222222222222"), "{reason}");
}

#[test]
fn argo_out_of_sync_progressing_and_degraded() {
    let reason = not_yet_reason(applied(
        &SyncObservation::ArgoCd(argo(B, ArgoSyncStatus::OutOfSync, ArgoHealth::Healthy)),
        B,
        linear,
    ));
    assert!(reason.contains("is OutOfSync at 222222222222"), "{reason}");
    let reason = not_yet_reason(applied(
        &SyncObservation::ArgoCd(argo(B, ArgoSyncStatus::Synced, ArgoHealth::Progressing)),
        B,
        linear,
    ));
    assert!(reason.contains("health is Progressing"), "{reason}");
    assert!(matches!(
        applied(
            &SyncObservation::ArgoCd(argo(B, ArgoSyncStatus::Synced, ArgoHealth::Degraded)),
            B,
            linear
        ),
        Applied::Failed { reason } if reason.contains("Degraded")
    ));
}

#[test]
fn argo_health_older_than_the_operation_is_not_trusted() {
    let mut a = argo(B, ArgoSyncStatus::Synced, ArgoHealth::Healthy);
    a.reconciled_at = t("2026-01-01T00:00:54Z");
    let reason = not_yet_reason(applied(&SyncObservation::ArgoCd(a.clone()), B, linear));
    assert!(reason.contains("not trusted"), "{reason}");
    // Equal timestamps are trusted (Argo CD refreshes after setting finishedAt).
    a.reconciled_at = t("2026-01-01T00:00:55Z");
    assert_eq!(
        applied(&SyncObservation::ArgoCd(a.clone()), B, linear),
        Applied::Yes
    );
    // No reconciledAt: a health transition after the operation proves a fresh assessment...
    a.reconciled_at = None;
    a.health_last_transition = t("2026-01-01T00:00:58Z");
    assert_eq!(
        applied(&SyncObservation::ArgoCd(a.clone()), B, linear),
        Applied::Yes
    );
    // ...an older one does not.
    a.health_last_transition = t("2025-12-31T00:00:00Z");
    assert!(matches!(
        applied(&SyncObservation::ArgoCd(a), B, linear),
        Applied::NotYet { .. }
    ));
}

#[test]
fn argo_running_and_failed_operations() {
    let mut a = argo(A, ArgoSyncStatus::OutOfSync, ArgoHealth::Healthy);
    a.operation_requested = true;
    let reason = not_yet_reason(applied(&SyncObservation::ArgoCd(a.clone()), B, linear));
    assert!(reason.contains("sync operation in progress"), "{reason}");
    a.operation_requested = false;
    let op = a.operation.as_mut().unwrap();
    op.phase = OperationPhase::Failed;
    op.revisions = vec![B.into()];
    op.message = "one or more objects failed to apply".into();
    assert!(matches!(
        applied(&SyncObservation::ArgoCd(a.clone()), B, linear),
        Applied::Failed { reason } if reason.contains("ended Failed: one or more objects")
    ));
    // A failure of an older revision is not a failure of ours.
    a.operation.as_mut().unwrap().revisions = vec![A.into()];
    assert!(matches!(
        applied(&SyncObservation::ArgoCd(a), B, linear),
        Applied::NotYet { .. }
    ));
}

#[test]
fn argo_comparison_errors_hold_the_step() {
    let mut a = argo(B, ArgoSyncStatus::Synced, ArgoHealth::Healthy);
    a.error_conditions = vec!["ComparisonError: rpc error: repository not accessible".into()];
    let reason = not_yet_reason(applied(&SyncObservation::ArgoCd(a), B, linear));
    assert!(reason.contains("ComparisonError"), "{reason}");
}

#[test]
fn is_descendant_is_only_asked_about_full_shas() {
    let a = argo("HEAD", ArgoSyncStatus::Synced, ArgoHealth::Healthy);
    let asked = std::cell::Cell::new(false);
    let r = applied(&SyncObservation::ArgoCd(a), B, |_, _| {
        asked.set(true);
        true
    });
    assert!(matches!(r, Applied::NotYet { .. }));
    assert!(!asked.get());
}

#[test]
fn live_names_every_reason_the_last_commit_is_not_live_sync_first() {
    let synced = |applied: &str, pushed: Option<&str>, descendants: &[&str]| Synced {
        observation: flux(&format!("main@sha1:{applied}"), ConditionStatus::True, 1, 1),
        pushed: pushed.map(str::to_string),
        descendants: descendants.iter().map(|d| d.to_string()).collect(),
    };
    let not_ready = || Some(Ok(Readiness::NotReady("podinfo-canary: 0/2 ready".into())));
    let at = |sync, ready| Liveness { sync, ready };
    // Nothing observed (no sync target, readiness not read) is live.
    assert_eq!(live(&Liveness::default()), vec![]);
    // Nothing pushed yet: the engine's revision is not judged.
    assert_eq!(live(&at(Some(Ok(synced(A, None, &[]))), None)), vec![]);
    // The engine applied a descendant of the pushed commit, and it is ready.
    let descendant = synced(C, Some(B), &[C]);
    let ready = Some(Ok(Readiness::Ready));
    assert_eq!(live(&at(Some(Ok(descendant)), ready)), vec![]);
    // The engine applied C, but git did not say C descends from the pushed B.
    let elsewhere = synced(C, Some(B), &[]);
    let not = live(&at(Some(Ok(elsewhere)), not_ready()));
    assert_eq!(not.len(), 2, "{not:?}");
    assert!(
        matches!(&not[0], NotLive::NotApplied(r) if r.contains("not yet 222222222222")),
        "{not:?}"
    );
    assert_eq!(
        not[1],
        NotLive::NotReady("podinfo-canary: 0/2 ready".into())
    );
    // Neither can be read.
    let unknown = at(Some(Err("forbidden".into())), Some(Err("timed out".into())));
    assert_eq!(
        live(&unknown),
        vec![
            NotLive::SyncUnknown("forbidden".into()),
            NotLive::ReadyUnknown("timed out".into())
        ]
    );
}
