//! Judging an observation: is the pushed commit live? Pure: no IO, no clock; git ancestry comes
//! in as a closure.

use std::fmt;

use super::{
    is_full_sha, Applied, ArgoHealth, ArgoObservation, ArgoSyncStatus, ConditionStatus,
    FluxObservation, OperationPhase, SyncObservation,
};

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Judges an observation: is `pushed` (a full commit id) live?
///
/// The engine's revision must be `pushed` or a descendant of it (`is_descendant(applied,
/// pushed)`: a human or another sluice may have pushed after us, and their commit contains
/// ours). Flux additionally needs `Ready=True` for the current `metadata.generation`. Argo CD
/// additionally needs `Synced`, `Healthy`, no sync operation running, and health assessed after
/// the last operation finished (see [`argo_health_trusted`]).
pub fn applied(
    obs: &SyncObservation,
    pushed: &str,
    is_descendant: impl Fn(&str, &str) -> bool,
) -> Applied {
    let pushed = pushed.trim().to_ascii_lowercase();
    let reaches = |revision: &str| {
        let revision = revision.trim().to_ascii_lowercase();
        revision == pushed || (is_full_sha(&revision) && is_descendant(&revision, &pushed))
    };
    match obs {
        SyncObservation::Flux(flux) => flux_applied(flux, &pushed, &reaches),
        SyncObservation::ArgoCd(argo) => argo_applied(argo, &pushed, &reaches),
    }
}

fn not_yet(reason: String) -> Applied {
    Applied::NotYet { reason }
}

fn flux_applied(flux: &FluxObservation, pushed: &str, reaches: &dyn Fn(&str) -> bool) -> Applied {
    let who = format!("Kustomization {}/{}", flux.namespace, flux.name);
    if flux.suspended {
        return not_yet(format!(
            "{who} is suspended (spec.suspend: true); resume it with `flux resume kustomization {} -n {}`",
            flux.name, flux.namespace
        ));
    }
    let not_ready = match &flux.ready {
        Some(c) if c.status == ConditionStatus::False => {
            format!("; Ready=False, {}: {}", c.reason, c.message)
        }
        _ => String::new(),
    };
    match (&flux.applied_sha, &flux.last_applied_revision) {
        (Some(sha), _) if reaches(sha) => {}
        (Some(sha), _) => {
            return not_yet(format!(
                "{who} applied {}, not yet {} or a later commit{not_ready}",
                short(sha),
                short(pushed)
            ))
        }
        (None, Some(raw)) if !raw.is_empty() => {
            return not_yet(format!(
                "{who} applied revision {raw:?}, which names no git commit{not_ready}"
            ))
        }
        (None, _) => return not_yet(format!("{who} has not applied any revision yet{not_ready}")),
    }
    let Some(ready) = &flux.ready else {
        return not_yet(format!("{who} has no Ready condition yet"));
    };
    let condition_generation = ready.observed_generation.or(flux.observed_generation);
    if let Some(generation) = flux.generation {
        if condition_generation != Some(generation) {
            return not_yet(format!(
                "{who} Ready condition describes generation {}, the object is at generation {generation}",
                condition_generation.map_or_else(|| "(none)".to_string(), |g| g.to_string())
            ));
        }
    }
    match ready.status {
        ConditionStatus::True => Applied::Yes,
        ConditionStatus::False => not_yet(format!(
            "{who} is not Ready: {}: {}",
            ready.reason, ready.message
        )),
        ConditionStatus::Unknown => not_yet(format!(
            "{who} is reconciling: {}: {}",
            ready.reason, ready.message
        )),
    }
}

/// Whether an Application's health status was assessed after its last operation finished.
///
/// Argo CD runs operations (sync) and health assessment in separate loops, so right after a
/// sync the health status can still describe the state *before* it (Kargo issue #2196). Kargo's
/// rule (`pkg/health/checker/builtin/argocd.go`, PR #5995): health is trusted only when
/// `status.reconciledAt` is at or after `status.operationState.finishedAt` (equal is fine: Argo
/// CD enqueues the refresh after setting finishedAt). sluice also accepts a
/// `status.health.lastTransitionTime` at or after finishedAt, since a transition then proves a
/// post-operation assessment; an *older* lastTransitionTime proves nothing (it only moves when
/// the status changes, so a Healthy→Healthy sync keeps the old time), and is not used to reject.
/// Without a finished operation there is nothing for health to be stale against.
pub fn argo_health_trusted(argo: &ArgoObservation) -> bool {
    let Some(finished) = argo.operation.as_ref().and_then(|op| op.finished_at) else {
        return true;
    };
    argo.reconciled_at.is_some_and(|r| r >= finished)
        || argo.health_last_transition.is_some_and(|t| t >= finished)
}

fn argo_applied(argo: &ArgoObservation, pushed: &str, reaches: &dyn Fn(&str) -> bool) -> Applied {
    let who = format!("Application {}/{}", argo.namespace, argo.name);
    if !argo.error_conditions.is_empty() {
        return not_yet(format!("{who} has {}", argo.error_conditions.join("; ")));
    }
    let op = argo.operation.as_ref();
    let running = op.is_some_and(|op| {
        matches!(
            op.phase,
            OperationPhase::Running | OperationPhase::Terminating
        )
    });
    if argo.operation_requested || running {
        return not_yet(format!("{who} has a sync operation in progress"));
    }
    if let Some(op) = op {
        let failed = matches!(op.phase, OperationPhase::Failed | OperationPhase::Error);
        if failed && op.revisions.iter().any(|r| reaches(r)) {
            return Applied::Failed {
                reason: format!(
                    "{who} sync to {} ended {}: {}",
                    op.revisions
                        .iter()
                        .map(|r| short(r))
                        .collect::<Vec<_>>()
                        .join(", "),
                    phase_name(&op.phase),
                    op.message
                ),
            };
        }
    }
    let revisions = if argo.sync_revisions.is_empty() {
        "no revision".to_string()
    } else {
        argo.sync_revisions
            .iter()
            .map(|r| short(r))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !argo.sync_revisions.iter().any(|r| reaches(r)) {
        return not_yet(format!(
            "{who} is at {revisions} ({}), not yet {} or a later commit",
            sync_name(&argo.sync_status),
            short(pushed)
        ));
    }
    if argo.sync_status != ArgoSyncStatus::Synced {
        return not_yet(format!(
            "{who} is {} at {revisions}",
            sync_name(&argo.sync_status)
        ));
    }
    if !argo_health_trusted(argo) {
        let finished = argo
            .operation
            .as_ref()
            .and_then(|op| op.finished_at)
            .map_or_else(String::new, |t| t.to_string());
        let reconciled = argo
            .reconciled_at
            .map_or_else(|| "never".to_string(), |t| t.to_string());
        return not_yet(format!(
            "{who} health ({}) was assessed before its last sync finished at {finished} (reconciledAt {reconciled}); not trusted yet",
            health_name(&argo.health)
        ));
    }
    match &argo.health {
        ArgoHealth::Healthy => Applied::Yes,
        ArgoHealth::Degraded => Applied::Failed {
            reason: format!("{who} is Degraded at {revisions}"),
        },
        other => not_yet(format!("{who} health is {}", health_name(other))),
    }
}

fn phase_name(phase: &OperationPhase) -> &str {
    match phase {
        OperationPhase::Running => "Running",
        OperationPhase::Terminating => "Terminating",
        OperationPhase::Failed => "Failed",
        OperationPhase::Error => "Error",
        OperationPhase::Succeeded => "Succeeded",
        OperationPhase::Other(s) => s,
    }
}

fn sync_name(status: &ArgoSyncStatus) -> &str {
    match status {
        ArgoSyncStatus::Synced => "Synced",
        ArgoSyncStatus::OutOfSync => "OutOfSync",
        ArgoSyncStatus::Unknown => "Unknown",
        ArgoSyncStatus::Other(s) => s,
    }
}

fn health_name(health: &ArgoHealth) -> &str {
    match health {
        ArgoHealth::Healthy => "Healthy",
        ArgoHealth::Progressing => "Progressing",
        ArgoHealth::Degraded => "Degraded",
        ArgoHealth::Suspended => "Suspended",
        ArgoHealth::Missing => "Missing",
        ArgoHealth::Unknown => "Unknown",
        ArgoHealth::Other(s) => s,
    }
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Applied::Yes => f.write_str("applied"),
            Applied::NotYet { reason } => write!(f, "not yet applied: {reason}"),
            Applied::Failed { reason } => write!(f, "failed: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::sync::{flux_revision_sha, ArgoOperation, Condition};
    use jiff::Timestamp;

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
        let SyncObservation::Flux(mut f) =
            flux(&format!("main@sha1:{B}"), ConditionStatus::True, 1, 1)
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
        let obs = |rev: &str| {
            SyncObservation::ArgoCd(argo(rev, ArgoSyncStatus::Synced, ArgoHealth::Healthy))
        };
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
}
