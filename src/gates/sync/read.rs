//! Reading the engine's object: one GET through the Kubernetes API, then a pure conversion of
//! the `DynamicObject` into a [`SyncObservation`]. Judging it is the core's job
//! ([`crate::core::live`]).

use jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject};
use serde::Deserialize;
use tracing::instrument;

use super::{
    is_full_sha, ArgoHealth, ArgoObservation, ArgoOperation, ArgoSyncStatus, Condition,
    ConditionStatus, FluxObservation, OperationPhase, SyncObservation,
};
use crate::manifest::model::SyncTarget;

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
            | SyncError::Malformed { .. } => false,
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
    match target {
        SyncTarget::Flux { .. } => observe_flux(target, object),
        SyncTarget::ArgoCd { .. } => observe_argo(target, object),
    }
}

/// The object's `key` (`spec`, `status`), null when it has none.
fn part(object: &DynamicObject, key: &str) -> serde_json::Value {
    object.data.get(key).cloned().unwrap_or_default()
}

fn malformed(target: &SyncTarget, field: &'static str, message: String) -> SyncError {
    SyncError::Malformed {
        target: target.clone(),
        field,
        message,
    }
}

/// A Flux Kustomization: suspension, the applied and attempted revisions, `Ready`.
fn observe_flux(target: &SyncTarget, object: &DynamicObject) -> Result<SyncObservation, SyncError> {
    let spec: RawFluxSpec = from_part(part(object, "spec"))
        .map_err(|e| malformed(target, "spec", format!("unexpected shape: {e}")))?;
    let status: RawFluxStatus = from_part(part(object, "status"))
        .map_err(|e| malformed(target, "status", format!("unexpected shape: {e}")))?;
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
        namespace: target.namespace().to_string(),
        name: target.name().to_string(),
        generation: object.metadata.generation,
        suspended: spec.suspend.unwrap_or(false),
        last_applied_revision: status.last_applied_revision,
        applied_sha,
        last_attempted_revision: status.last_attempted_revision,
        observed_generation: status.observed_generation,
        ready,
    }))
}

/// An Argo CD Application: sync status and revisions, health, the last operation, and the
/// conditions that report errors.
fn observe_argo(target: &SyncTarget, object: &DynamicObject) -> Result<SyncObservation, SyncError> {
    let status: RawArgoStatus = from_part(part(object, "status"))
        .map_err(|e| malformed(target, "status", format!("unexpected shape: {e}")))?;
    let sync = status.sync.unwrap_or_default();
    let health = status.health.unwrap_or_default();
    let operation = match status.operation_state {
        None => None,
        Some(op) => Some(argo_operation(target, op)?),
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
        health_last_transition: argo_time(
            target,
            "status.health.lastTransitionTime",
            health.last_transition_time,
        )?,
        reconciled_at: argo_time(target, "status.reconciledAt", status.reconciled_at)?,
        operation,
        operation_requested: object.data.get("operation").is_some_and(|o| !o.is_null()),
        error_conditions,
        namespace: target.namespace().to_string(),
        name: target.name().to_string(),
    }))
}

/// An Application's `status.operationState`: its phase, and the revisions it synced (its
/// result's, else the ones it was asked for).
fn argo_operation(target: &SyncTarget, op: RawOperationState) -> Result<ArgoOperation, SyncError> {
    let mut revisions = Vec::new();
    if let Some(result) = op.sync_result {
        revisions = revisions_of(result.revision, result.revisions);
    }
    if revisions.is_empty() {
        if let Some(sync) = op.operation.and_then(|o| o.sync) {
            revisions = revisions_of(sync.revision, sync.revisions);
        }
    }
    Ok(ArgoOperation {
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
        started_at: argo_time(target, "status.operationState.startedAt", op.started_at)?,
        finished_at: argo_time(target, "status.operationState.finishedAt", op.finished_at)?,
    })
}

/// An RFC 3339 time of the Application at `field`; empty or missing is `None`.
fn argo_time(
    target: &SyncTarget,
    field: &'static str,
    value: Option<String>,
) -> Result<Option<Timestamp>, SyncError> {
    value
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<Timestamp>().map_err(|e| {
                malformed(
                    target,
                    field,
                    format!("expected an RFC 3339 time, found {v:?}: {e}"),
                )
            })
        })
        .transpose()
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
    use crate::gates::sync::{applied, Applied};

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const C: &str = "3333333333333333333333333333333333333333";

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
    fn observe_reads_dynamic_objects_and_rejects_bad_shapes() {
        let target = SyncTarget::ArgoCd {
            application: crate::manifest::model::Name::parse("podinfo").unwrap(),
            namespace: crate::manifest::model::Name::parse("argocd").unwrap(),
        };
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "podinfo", "namespace": "argocd"},
            "status": {"sync": {"status": "Synced", "revision": B}, "health": {"status": "Healthy"}}
        }))
        .unwrap();
        assert_eq!(
            applied(&observe(&target, &object).unwrap(), B, |_, _| false),
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
