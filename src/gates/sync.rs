//! Sync-awareness: has the GitOps engine applied the commit sluice pushed?
//!
//! A step's clock starts only when Flux or Argo CD reports the pushed commit (or a descendant:
//! someone may have pushed after sluice) applied and healthy. This module does two things:
//!
//! * [`read_sync`] reads the engine's object (Flux `Kustomization` or Argo CD `Application`)
//!   through the Kubernetes API, read-only, as a `DynamicObject` (no typed CRD crates), and
//!   turns its status into a plain [`SyncObservation`];
//! * [`applied`] judges an observation against the pushed commit. It is pure: git ancestry is
//!   asked through the `is_descendant` closure, so the caller decides how (git2, git CLI, a
//!   table in tests).
//!
//! It must not write to the cluster (no refresh annotations, no patches): sluice's ClusterRole
//! is get/list/watch only.

use std::fmt;

use jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject};
use serde::Deserialize;
use tracing::instrument;

use crate::spec::model::SyncTarget;

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

/// Why the engine's object could not be read. `target` names the object (kind, namespace,
/// name); the messages say which setting or permission to check.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(
        "{target} not found ({message}): check that {} (in .sluice/config.yaml or the canary's \
         spec.sync) names an existing object, that the {}/{} CRD is installed, and that \
         sluice's ClusterRole grants get on {}",
        kind_of(.target).setting,
        kind_of(.target).group,
        kind_of(.target).version,
        resource_name(.target)
    )]
    NotFound { target: SyncTarget, message: String },
    #[error(
        "sluice may not read {target} (HTTP {code}: {message}): grant get, list and watch on {} \
         to sluice's ServiceAccount (see examples/install/clusterrole.yaml) and check its \
         credentials",
        resource_name(.target)
    )]
    Forbidden {
        target: SyncTarget,
        code: u16,
        message: String,
    },
    #[error("reading {target}: the API server answered HTTP {code}: {message}")]
    Api {
        target: SyncTarget,
        code: u16,
        message: String,
    },
    #[error("reading {target}: {source}")]
    Transport {
        target: SyncTarget,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("{target}: {field}: {message}")]
    Malformed {
        target: SyncTarget,
        field: &'static str,
        message: String,
    },
    #[error("building the Kubernetes client: {message}")]
    Client { message: String },
}

impl SyncError {
    /// Worth retrying on the next tick as is (network, 5xx, 429); the others need a change of
    /// settings, RBAC or cluster before they can succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            SyncError::Transport { .. } => true,
            SyncError::Api { code, .. } => *code >= 500 || *code == 429 || *code == 408,
            SyncError::NotFound { .. }
            | SyncError::Forbidden { .. }
            | SyncError::Malformed { .. }
            | SyncError::Client { .. } => false,
        }
    }
}

/// `kustomizations.kustomize.toolkit.fluxcd.io`: the name RBAC rules use.
fn resource_name(target: &SyncTarget) -> String {
    let k = kind_of(target);
    format!("{}.{}", k.plural, k.group)
}

/// Facts about each engine's object type.
struct Kind {
    kind: &'static str,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    setting: &'static str,
}

const FLUX: Kind = Kind {
    kind: "Kustomization",
    group: "kustomize.toolkit.fluxcd.io",
    version: "v1",
    plural: "kustomizations",
    setting: "sync.flux.kustomization/namespace",
};

const ARGOCD: Kind = Kind {
    kind: "Application",
    group: "argoproj.io",
    version: "v1alpha1",
    plural: "applications",
    setting: "sync.argocd.application/namespace",
};

fn kind_of(target: &SyncTarget) -> &'static Kind {
    match target {
        SyncTarget::Flux { .. } => &FLUX,
        SyncTarget::ArgoCd { .. } => &ARGOCD,
    }
}

/// The API resource sluice reads for `target`: `kustomize.toolkit.fluxcd.io/v1`
/// `kustomizations` or `argoproj.io/v1alpha1` `applications`.
pub fn api_resource(target: &SyncTarget) -> ApiResource {
    let k = kind_of(target);
    ApiResource {
        group: k.group.into(),
        version: k.version.into(),
        api_version: format!("{}/{}", k.group, k.version),
        kind: k.kind.into(),
        plural: k.plural.into(),
    }
}

/// Builds a client from `config`. Installs rustls' ring provider first (kube's TLS stack is
/// rustls with ring; without a process-wide provider rustls panics on first use). Must run
/// inside a tokio runtime.
pub fn client_from_config(config: kube::Config) -> Result<kube::Client, SyncError> {
    crate::http::install_crypto_provider();
    kube::Client::try_from(config).map_err(|e| SyncError::Client {
        message: e.to_string(),
    })
}

/// A client for the cluster sluice runs in (in-cluster ServiceAccount) or the local kubeconfig.
pub async fn infer_client() -> Result<kube::Client, SyncError> {
    crate::http::install_crypto_provider();
    let config = kube::Config::infer().await.map_err(|e| SyncError::Client {
        message: e.to_string(),
    })?;
    client_from_config(config)
}

/// Reads the engine's object for `target` (one GET) and returns its state as plain data.
#[instrument(skip(client), fields(target = %target))]
pub async fn read_sync(
    client: &kube::Client,
    target: &SyncTarget,
) -> Result<SyncObservation, SyncError> {
    let resource = api_resource(target);
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), target.namespace().as_str(), &resource);
    let object = api
        .get(target.name().as_str())
        .await
        .map_err(|e| api_error(target, e))?;
    observe(target, &object)
}

fn api_error(target: &SyncTarget, error: kube::Error) -> SyncError {
    let target = target.clone();
    match error {
        kube::Error::Api(status) => {
            let message = if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            };
            match status.code {
                404 => SyncError::NotFound { target, message },
                401 | 403 => SyncError::Forbidden {
                    target,
                    code: status.code,
                    message,
                },
                code => SyncError::Api {
                    target,
                    code,
                    message,
                },
            }
        }
        other => SyncError::Transport {
            target,
            source: Box::new(other),
        },
    }
}

/// Turns an object the API server returned into an observation (pure; used by [`read_sync`]).
pub fn observe(target: &SyncTarget, object: &DynamicObject) -> Result<SyncObservation, SyncError> {
    let namespace = target.namespace().to_string();
    let name = target.name().to_string();
    let malformed = |field: &'static str, message: String| SyncError::Malformed {
        target: target.clone(),
        field,
        message,
    };
    let part = |key: &str| object.data.get(key).cloned().unwrap_or_default();
    match target {
        SyncTarget::Flux { .. } => {
            let spec: RawFluxSpec = from_part(part("spec"))
                .map_err(|e| malformed("spec", format!("unexpected shape: {e}")))?;
            let status: RawFluxStatus = from_part(part("status"))
                .map_err(|e| malformed("status", format!("unexpected shape: {e}")))?;
            let ready = status
                .conditions
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| Condition {
                    status: match c.status.as_str() {
                        "True" => ConditionStatus::True,
                        "False" => ConditionStatus::False,
                        _ => ConditionStatus::Unknown,
                    },
                    reason: c.reason.unwrap_or_default(),
                    message: c.message.unwrap_or_default(),
                    observed_generation: c.observed_generation,
                });
            let applied_sha = status
                .last_applied_revision
                .as_deref()
                .and_then(flux_revision_sha);
            Ok(SyncObservation::Flux(FluxObservation {
                namespace,
                name,
                generation: object.metadata.generation,
                suspended: spec.suspend.unwrap_or(false),
                last_applied_revision: status.last_applied_revision,
                applied_sha,
                last_attempted_revision: status.last_attempted_revision,
                observed_generation: status.observed_generation,
                ready,
            }))
        }
        SyncTarget::ArgoCd { .. } => {
            let status: RawArgoStatus = from_part(part("status"))
                .map_err(|e| malformed("status", format!("unexpected shape: {e}")))?;
            let time = |field: &'static str, value: Option<String>| {
                value
                    .filter(|v| !v.is_empty())
                    .map(|v| {
                        v.parse::<Timestamp>().map_err(|e| {
                            malformed(
                                field,
                                format!("expected an RFC 3339 time, found {v:?}: {e}"),
                            )
                        })
                    })
                    .transpose()
            };
            let sync = status.sync.unwrap_or_default();
            let health = status.health.unwrap_or_default();
            let operation = match status.operation_state {
                None => None,
                Some(op) => {
                    let mut revisions = Vec::new();
                    if let Some(result) = op.sync_result {
                        revisions = revisions_of(result.revision, result.revisions);
                    }
                    if revisions.is_empty() {
                        if let Some(sync) = op.operation.and_then(|o| o.sync) {
                            revisions = revisions_of(sync.revision, sync.revisions);
                        }
                    }
                    Some(ArgoOperation {
                        phase: match op.phase.as_deref().unwrap_or("") {
                            "Running" => OperationPhase::Running,
                            "Terminating" => OperationPhase::Terminating,
                            "Failed" => OperationPhase::Failed,
                            "Error" => OperationPhase::Error,
                            "Succeeded" => OperationPhase::Succeeded,
                            other => OperationPhase::Other(other.to_string()),
                        },
                        message: op.message.unwrap_or_default(),
                        revisions,
                        started_at: time("status.operationState.startedAt", op.started_at)?,
                        finished_at: time("status.operationState.finishedAt", op.finished_at)?,
                    })
                }
            };
            let error_conditions = status
                .conditions
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c.type_ == "ComparisonError" || c.type_ == "InvalidSpecError")
                .map(|c| format!("{}: {}", c.type_, c.message.unwrap_or_default()))
                .collect();
            Ok(SyncObservation::ArgoCd(ArgoObservation {
                sync_revisions: revisions_of(sync.revision, sync.revisions),
                sync_status: match sync.status.as_deref().unwrap_or("Unknown") {
                    "Synced" => ArgoSyncStatus::Synced,
                    "OutOfSync" => ArgoSyncStatus::OutOfSync,
                    "Unknown" | "" => ArgoSyncStatus::Unknown,
                    other => ArgoSyncStatus::Other(other.to_string()),
                },
                health: match health.status.as_deref().unwrap_or("Unknown") {
                    "Healthy" => ArgoHealth::Healthy,
                    "Progressing" => ArgoHealth::Progressing,
                    "Degraded" => ArgoHealth::Degraded,
                    "Suspended" => ArgoHealth::Suspended,
                    "Missing" => ArgoHealth::Missing,
                    "Unknown" | "" => ArgoHealth::Unknown,
                    other => ArgoHealth::Other(other.to_string()),
                },
                health_last_transition: time(
                    "status.health.lastTransitionTime",
                    health.last_transition_time,
                )?,
                reconciled_at: time("status.reconciledAt", status.reconciled_at)?,
                operation,
                operation_requested: object.data.get("operation").is_some_and(|o| !o.is_null()),
                error_conditions,
                namespace,
                name,
            }))
        }
    }
}

fn from_part<T: for<'de> Deserialize<'de> + Default>(
    value: serde_json::Value,
) -> Result<T, serde_json::Error> {
    if value.is_null() {
        Ok(T::default())
    } else {
        serde_json::from_value(value)
    }
}

fn revisions_of(one: Option<String>, many: Option<Vec<String>>) -> Vec<String> {
    match (one.filter(|r| !r.is_empty()), many) {
        (Some(r), _) => vec![r],
        (None, Some(many)) => many.into_iter().filter(|r| !r.is_empty()).collect(),
        (None, None) => Vec::new(),
    }
}

/// The git commit a Flux revision names: `main@sha1:<sha>` (Flux 2.0+, also `sha1:<sha>` and
/// `refs/heads/main@sha1:<sha>`), or the older `main/<sha>`. `None` for anything else (an OCI
/// digest, a truncated or empty value).
pub fn flux_revision_sha(revision: &str) -> Option<String> {
    let revision = revision.trim();
    let candidate = match revision.rsplit_once('@') {
        Some((_, digest)) => digest.strip_prefix("sha1:")?,
        None => match revision.strip_prefix("sha1:") {
            Some(sha) => sha,
            None => revision.rsplit('/').next().unwrap_or(revision),
        },
    };
    is_full_sha(candidate).then(|| candidate.to_ascii_lowercase())
}

fn is_full_sha(text: &str) -> bool {
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

// Raw shapes of the fields sluice reads; everything else in the objects is ignored.

#[derive(Debug, Default, Deserialize)]
struct RawFluxSpec {
    suspend: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawFluxStatus {
    last_applied_revision: Option<String>,
    last_attempted_revision: Option<String>,
    observed_generation: Option<i64>,
    conditions: Option<Vec<RawCondition>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCondition {
    #[serde(rename = "type")]
    type_: String,
    #[serde(default)]
    status: String,
    reason: Option<String>,
    message: Option<String>,
    observed_generation: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawArgoStatus {
    sync: Option<RawArgoSync>,
    health: Option<RawArgoHealth>,
    reconciled_at: Option<String>,
    operation_state: Option<RawOperationState>,
    conditions: Option<Vec<RawCondition>>,
}

#[derive(Debug, Default, Deserialize)]
struct RawArgoSync {
    status: Option<String>,
    revision: Option<String>,
    revisions: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawArgoHealth {
    status: Option<String>,
    last_transition_time: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawOperationState {
    phase: Option<String>,
    message: Option<String>,
    started_at: Option<String>,
    finished_at: Option<String>,
    sync_result: Option<RawRevisions>,
    operation: Option<RawOperation>,
}

#[derive(Debug, Default, Deserialize)]
struct RawOperation {
    sync: Option<RawRevisions>,
}

#[derive(Debug, Default, Deserialize)]
struct RawRevisions {
    revision: Option<String>,
    revisions: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn flux_revisions_new_and_old_forms() {
        assert_eq!(
            flux_revision_sha(&format!("main@sha1:{A}")).as_deref(),
            Some(A)
        );
        assert_eq!(
            flux_revision_sha(&format!("refs/heads/main@sha1:{}", A.to_uppercase())).as_deref(),
            Some(A)
        );
        assert_eq!(flux_revision_sha(&format!("sha1:{B}")).as_deref(), Some(B));
        assert_eq!(flux_revision_sha(&format!("main/{B}")).as_deref(), Some(B));
        assert_eq!(
            flux_revision_sha(&format!("feature/x/{C}")).as_deref(),
            Some(C)
        );
        for bad in [
            "",
            "main",
            "main@sha1:1234",
            "latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "main@sha1:zz11111111111111111111111111111111111111",
            "main@",
        ] {
            assert_eq!(flux_revision_sha(bad), None, "{bad:?}");
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

    #[test]
    fn observe_reads_dynamic_objects_and_rejects_bad_shapes() {
        let target = SyncTarget::ArgoCd {
            application: crate::spec::model::Name::parse("podinfo").unwrap(),
            namespace: crate::spec::model::Name::parse("argocd").unwrap(),
        };
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "podinfo", "namespace": "argocd"},
            "status": {"sync": {"status": "Synced", "revision": B}, "health": {"status": "Healthy"}}
        }))
        .unwrap();
        assert_eq!(
            applied(&observe(&target, &object).unwrap(), B, linear),
            Applied::Yes
        );
        let bad: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "podinfo", "namespace": "argocd"},
            "status": {"sync": {"status": "Synced", "revision": 7}, "reconciledAt": "yesterday"}
        }))
        .unwrap();
        let err = observe(&target, &bad).unwrap_err().to_string();
        assert!(
            err.starts_with("Application argocd/podinfo: status: unexpected shape"),
            "{err}"
        );
        let bad_time: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "podinfo", "namespace": "argocd"},
            "status": {"reconciledAt": "yesterday"}
        }))
        .unwrap();
        let err = observe(&target, &bad_time).unwrap_err().to_string();
        assert!(
            err.contains("status.reconciledAt: expected an RFC 3339 time"),
            "{err}"
        );
    }
}
