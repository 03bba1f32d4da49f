//! What a tick reports: one [`CanaryOutcome`] per canary in a [`TickReport`], and the errors
//! that stop one canary ([`CanaryError`]) or the whole tick ([`TickError`]). Shared by the
//! tick's steps (facts, plan, execute); it decides nothing.

use jiff::Timestamp;
use tracing::warn;

use crate::core::status::{Phase, Status};
use crate::manifest::model::Canary;
use crate::yaml::error::SpecError;

/// What happened to one canary in a tick.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryOutcome {
    pub id: String,
    pub phase: Option<Phase>,
    /// The canary's status after the decision (for metrics and status listings).
    pub status: Option<Status>,
    /// The commit subject, when the decision committed.
    pub committed: Option<String>,
    pub events: Vec<String>,
    pub wake_at: Option<Timestamp>,
    pub error: Option<String>,
}

impl CanaryOutcome {
    /// A canary the tick could not decide, with the reason (logged).
    pub fn failed(canary: &Canary, e: &CanaryError) -> CanaryOutcome {
        warn!(canary = %canary.id, error = %e, "Canary skipped");
        CanaryOutcome::of(canary.id.to_string(), None, Some(e.to_string()))
    }

    /// An outcome with no decision: `status` when there is one, `error` when it failed.
    pub fn of(id: String, status: Option<Status>, error: Option<String>) -> CanaryOutcome {
        CanaryOutcome {
            id,
            phase: status.as_ref().map(|s| s.phase),
            status,
            committed: None,
            events: Vec::new(),
            wake_at: None,
            error,
        }
    }
}

/// The result of one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickReport {
    pub outcomes: Vec<CanaryOutcome>,
    pub spec_errors: Vec<SpecError>,
    pub commits: usize,
    /// Push attempts that were rejected because the remote moved.
    pub push_retries: u32,
    /// The `forge.repository` of the settings the tick read (`None` without a forge): the
    /// pull-request webhooks ignore events about other repositories.
    pub forge_repository: Option<String>,
}

impl TickReport {
    /// The earliest time any canary may change.
    pub fn wake_at(&self) -> Option<Timestamp> {
        self.outcomes.iter().filter_map(|o| o.wake_at).min()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TickError {
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
}

impl TickError {
    /// A short label for the errors-by-kind metric.
    pub fn kind(&self) -> &'static str {
        match self {
            TickError::Git(e) => e.kind(),
        }
    }
}

/// A problem with one canary; the tick goes on with the others.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// The repo settings do not load: defaults would drop their gates (`sync:`, approvals),
    /// so every canary holds until the file is fixed.
    #[error("held: {problems}; every canary holds until {file} loads (sluice never falls back to default settings)")]
    Settings { file: String, problems: String },
    #[error("{path}: cannot read the status file: {message}; fix or delete it (history keeps the old state)")]
    Status { path: String, message: String },
    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),
    #[error(transparent)]
    Render(#[from] crate::render::RenderError),
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
    #[error(transparent)]
    Drift(crate::drift::DriftError),
    /// The canary cannot be observed as its spec asks (a job metric without Kubernetes
    /// access): it holds, the others go on.
    #[error("held: {0}")]
    Held(String),
}

impl From<crate::drift::DriftError> for CanaryError {
    fn from(e: crate::drift::DriftError) -> Self {
        match e {
            crate::drift::DriftError::Git(e) => CanaryError::Git(e),
            e => CanaryError::Drift(e),
        }
    }
}

impl CanaryError {
    /// The error, unless it is a git error retrying the tick may fix: that one stops the whole
    /// tick (`Err`, and the daemon retries) rather than failing only the canary.
    pub fn unless_transient(self) -> Result<CanaryError, crate::gitops::Error> {
        match self {
            CanaryError::Git(e) if e.is_transient() => Err(e),
            e => Ok(e),
        }
    }
}
