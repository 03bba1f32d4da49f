//! Whether a canary's last commit is live: applied by the GitOps engine (Flux or Argo CD)
//! and its workload and route ready. The adapters read the engine's object and the cluster
//! (`gates::sync`, `gates::readiness`) into the plain data here; the verdicts are made here:
//! [`applied`] judges an engine's observation against the commit sluice pushed, [`live`]
//! weighs it with readiness into the core's `Observations::applied`.
//!
//! Pure: no IO, no clock. Git ancestry is an observation too ([`Synced::descendants`], or
//! the `is_descendant` closure [`applied`] asks).

use std::fmt;

use jiff::Timestamp;

/// What the engine's object says, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncObservation {
    Flux(FluxObservation),
    ArgoCd(ArgoObservation),
}

/// A Flux `Kustomization`'s state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxObservation {
    pub namespace: String,
    pub name: String,
    /// `metadata.generation`: bumped by the API server on every spec change.
    pub generation: Option<i64>,
    /// `spec.suspend`: a suspended Kustomization applies nothing.
    pub suspended: bool,
    /// `status.lastAppliedRevision` as written (`main@sha1:<sha>`, or `main/<sha>` before
    /// Flux 2.0).
    pub last_applied_revision: Option<String>,
    /// The commit parsed from `last_applied_revision` (lowercase hex), when it names one.
    pub applied_sha: Option<String>,
    /// `status.lastAttemptedRevision`: what the controller last tried, applied or not.
    pub last_attempted_revision: Option<String>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// The `Ready` condition.
    pub ready: Option<Condition>,
}

/// A Kubernetes status condition (`metav1.Condition`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: ConditionStatus,
    pub reason: String,
    pub message: String,
    pub observed_generation: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// An Argo CD `Application`'s state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgoObservation {
    pub namespace: String,
    pub name: String,
    /// `status.sync.revision`, or `status.sync.revisions` for a multi-source Application.
    pub sync_revisions: Vec<String>,
    /// `status.sync.status`.
    pub sync_status: ArgoSyncStatus,
    /// `status.health.status`.
    pub health: ArgoHealth,
    /// `status.health.lastTransitionTime` (deprecated upstream; absent on older and newer
    /// Argo CD versions).
    pub health_last_transition: Option<Timestamp>,
    /// `status.reconciledAt`: when the app controller last compared and assessed health.
    pub reconciled_at: Option<Timestamp>,
    /// `status.operationState`: the last (or current) operation.
    pub operation: Option<ArgoOperation>,
    /// Top-level `operation` is set: a sync was requested and has not finished.
    pub operation_requested: bool,
    /// `ComparisonError` / `InvalidSpecError` conditions as `Type: message`; while present,
    /// sync and health status cannot be trusted.
    pub error_conditions: Vec<String>,
}

/// `status.operationState` of an Application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgoOperation {
    pub phase: OperationPhase,
    pub message: String,
    /// `syncResult.revision(s)`, else `operation.sync.revision(s)`: what the operation synced to.
    pub revisions: Vec<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
}

/// Argo CD's `SyncStatusCode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgoSyncStatus {
    Synced,
    OutOfSync,
    /// `Unknown`, or the field is missing.
    Unknown,
    Other(String),
}

/// Argo CD's health status codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgoHealth {
    Healthy,
    Progressing,
    Degraded,
    Suspended,
    Missing,
    /// `Unknown`, or the field is missing.
    Unknown,
    Other(String),
}

/// Argo CD's `OperationPhase`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationPhase {
    Running,
    Terminating,
    Failed,
    Error,
    Succeeded,
    Other(String),
}

/// Whether the pushed commit is live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The engine applied the pushed commit or a descendant, and reports it healthy.
    Yes,
    /// Not yet (still syncing, another revision, health not yet assessed, ...).
    NotYet { reason: String },
    /// The engine tried the pushed commit (or a descendant) and failed, or it is degraded.
    Failed { reason: String },
}

/// A full 40-hex-digit commit id.
pub fn is_full_sha(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

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

/// Whether the canary's workload and route are ready, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    NotReady(String),
}

/// What the tick observed of whether a canary's last commit is live. Nothing observed (the
/// default: no sync target, readiness not read, or not asked at all) is live.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Liveness {
    /// The GitOps engine's view, when the canary has a sync target, or why it cannot be read.
    pub sync: Option<Result<Synced, String>>,
    /// Whether the canary's workload and route are ready, when read, or why it cannot be.
    pub ready: Option<Result<Readiness, String>>,
}

/// The GitOps engine's object, and the commit it is judged against.
#[derive(Debug, Clone, PartialEq)]
pub struct Synced {
    pub observation: SyncObservation,
    /// The last commit sluice pushed for the canary (full id); `None`: none yet.
    pub pushed: Option<String>,
    /// The revisions the observation names ([`revisions`]) that git says are `pushed` or
    /// descend from it.
    pub descendants: Vec<String>,
}

/// Every revision an observation names, whose ancestry [`applied`] may ask about: the
/// adapters ask git about these ([`Synced::descendants`]).
pub fn revisions(obs: &SyncObservation) -> Vec<&str> {
    match obs {
        SyncObservation::Flux(flux) => flux.applied_sha.iter().map(String::as_str).collect(),
        SyncObservation::ArgoCd(argo) => argo
            .sync_revisions
            .iter()
            .chain(argo.operation.iter().flat_map(|op| op.revisions.iter()))
            .map(String::as_str)
            .collect(),
    }
}

/// Why a canary's last commit is not live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotLive {
    /// The engine's object cannot be read: whether it applied the commit cannot be told.
    SyncUnknown(String),
    /// The engine has not applied the commit (or a later one), or failed to.
    NotApplied(String),
    /// The workload or route is not ready.
    NotReady(String),
    /// Whether the workload and route are ready cannot be told.
    ReadyUnknown(String),
}

/// The verdict on `liveness`: every reason the last commit is not live, in order (sync,
/// then readiness); empty when it is live.
pub fn live(liveness: &Liveness) -> Vec<NotLive> {
    let mut not = Vec::new();
    match &liveness.sync {
        None => {}
        Some(Err(e)) => not.push(NotLive::SyncUnknown(e.clone())),
        Some(Ok(synced)) => {
            if let Some(pushed) = &synced.pushed {
                let is_descendant = |applied: &str, _: &str| {
                    synced
                        .descendants
                        .iter()
                        .any(|d| d.eq_ignore_ascii_case(applied))
                };
                match applied(&synced.observation, pushed, is_descendant) {
                    Applied::Yes => {}
                    Applied::NotYet { reason } | Applied::Failed { reason } => {
                        not.push(NotLive::NotApplied(reason));
                    }
                }
            }
        }
    }
    match &liveness.ready {
        None | Some(Ok(Readiness::Ready)) => {}
        Some(Ok(Readiness::NotReady(why))) => not.push(NotLive::NotReady(why.clone())),
        Some(Err(e)) => not.push(NotLive::ReadyUnknown(e.clone())),
    }
    not
}
