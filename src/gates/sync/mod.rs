//! Sync-awareness: has the GitOps engine applied the commit sluice pushed?
//!
//! A step's clock starts only when Flux or Argo CD reports the pushed commit (or a descendant:
//! someone may have pushed after sluice) applied and healthy. Two halves, one per file:
//!
//! * `read.rs`: [`read_sync`] reads the engine's object (Flux `Kustomization` or Argo CD
//!   `Application`) through the Kubernetes API, read-only, as a `DynamicObject` (no typed CRD
//!   crates), and [`observe`] turns its status into a plain [`SyncObservation`];
//! * `judge.rs`: [`applied`] judges an observation against the pushed commit. It is pure: git
//!   ancestry is asked through the `is_descendant` closure, so the caller decides how (git2,
//!   git CLI, a table in tests).
//!
//! The kube client itself comes from [`crate::kube`]. Nothing here may write to the cluster (no
//! refresh annotations, no patches): sluice's ClusterRole is get/list/watch only.

mod judge;
mod read;

use jiff::Timestamp;

pub use judge::{applied, argo_health_trusted};
pub use read::{api_resource, flux_revision_sha, observe, read_sync, SyncError};

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
pub(super) fn is_full_sha(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}
