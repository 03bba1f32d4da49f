//! Sync-awareness: has the GitOps engine applied the commit sluice pushed?
//!
//! A step's clock starts only when Flux or Argo CD reports the pushed commit (or a descendant:
//! someone may have pushed after sluice) applied and healthy. Two halves, one per file:
//!
//! * `read.rs`: [`read_sync`] reads the engine's object (Flux `Kustomization` or Argo CD
//!   `Application`) through the Kubernetes API, read-only, as a `DynamicObject` (no typed CRD
//!   crates), and [`observe`] turns its status into a plain [`SyncObservation`];
//! * the core ([`crate::core::live`]) holds the observation's types and judges it: [`applied`]
//!   against the pushed commit (git ancestry asked through the `is_descendant` closure, so
//!   the caller decides how: git2, git CLI, a table in tests), and whether the last commit is
//!   live with readiness. They are re-exported here.
//!
//! The kube client itself comes from [`crate::kube`]. Nothing here may write to the cluster (no
//! refresh annotations, no patches): sluice's ClusterRole is get/list/watch only.

mod read;

pub use crate::core::live::{
    applied, argo_health_trusted, is_full_sha, Applied, ArgoHealth, ArgoObservation, ArgoOperation,
    ArgoSyncStatus, Condition, ConditionStatus, FluxObservation, OperationPhase, SyncObservation,
};
pub use read::{api_resource, flux_revision_sha, observe, read_sync, SyncError};
