//! The data of Argo Rollouts' analysis that the model and the status hold: a metric's rules,
//! a measurement, a metric's measurements so far, and the gate a Rollout's analysis metric is
//! of its steps. A leaf: the rules that use them are in [`crate::argo_analysis`].

use serde::{Deserialize, Serialize};

use crate::argo_expr::Condition;

/// A measurement's or a metric's phase, as Argo names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Pending,
    Running,
    Successful,
    Inconclusive,
    Error,
    Failed,
}

impl Phase {
    /// Argo's `analysisStatusOrder`, best to worst.
    pub(crate) fn rank(self) -> u8 {
        match self {
            Phase::Successful => 0,
            Phase::Running => 1,
            Phase::Pending => 2,
            Phase::Inconclusive => 3,
            Phase::Error => 4,
            Phase::Failed => 5,
        }
    }

    /// Whether the metric or run is over.
    pub fn completed(self) -> bool {
        !matches!(self, Phase::Pending | Phase::Running)
    }
}

/// The rules of one metric, validated (the template reader builds it).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRules {
    pub success: Option<Condition>,
    pub failure: Option<Condition>,
    /// `count`; `None` (or 0) with an interval runs until the run is stopped, without one
    /// it is 1 (Argo's `EffectiveCount`).
    pub count: Option<u32>,
    /// Whether `interval` is set.
    pub has_interval: bool,
    /// `failureLimit`, default 0; negative: not applicable.
    pub failure_limit: i64,
    /// `inconclusiveLimit`, default 0.
    pub inconclusive_limit: u32,
    /// `consecutiveErrorLimit`, default [`DEFAULT_CONSECUTIVE_ERROR_LIMIT`].
    pub consecutive_error_limit: u32,
    /// `consecutiveSuccessLimit`, 0 when unset.
    pub consecutive_success_limit: u32,
    /// `interval`: the time from one measurement to the next (none: each judgement).
    pub interval: Option<std::time::Duration>,
    /// `initialDelay`: the time from the run's start to its first measurement.
    pub initial_delay: Option<std::time::Duration>,
}

impl MetricRules {
    /// Argo's `EffectiveCount`.
    pub fn effective_count(&self) -> Option<u32> {
        match self.count {
            Some(n) if n > 0 => Some(n),
            _ if self.has_interval => None,
            _ => Some(1),
        }
    }
}

/// One measurement: what the provider answered and what the conditions made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    pub phase: Phase,
    /// The value as the conditions saw it (`[0.97]`), or the provider's error.
    pub value: String,
    /// Why it is an error, when it is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// One metric's measurements so far, as the status keeps them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricHistory {
    pub metric: String,
    pub measurements: Vec<Measurement>,
    /// When its run started (the step it is measured from began): `initialDelay` counts from
    /// here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<jiff::Timestamp>,
    /// When it was last measured: `interval` counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<jiff::Timestamp>,
}

impl MetricHistory {
    /// When the next measurement is due by `rules`' `initialDelay` and `interval` (`None`:
    /// at the next judgement).
    pub fn due(&self, rules: &MetricRules) -> Option<jiff::Timestamp> {
        let (from, wait) = match (self.last, self.started) {
            (Some(last), _) => (last, rules.interval?),
            (None, Some(started)) => (started, rules.initial_delay?),
            (None, None) => return None,
        };
        let wait = jiff::SignedDuration::try_from(wait).unwrap_or(jiff::SignedDuration::MAX);
        Some(from.checked_add(wait).unwrap_or(jiff::Timestamp::MAX))
    }
}

/// One metric of an Argo Rollouts analysis run, and the steps it gates.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgoGate {
    /// The gate's key (unique in the canary): the metric's name, or [`step_key`] for an
    /// analysis step's metric that the background analysis measures under the same name (Argo
    /// runs the two as separate AnalysisRuns). Its observation, history and check trailer have
    /// this name.
    pub metric: String,
    /// The metric's name in its templates (what the adapters look its query up by).
    pub name: String,
    pub rules: MetricRules,
    /// The provider answers a list (Prometheus: the vector's values) rather than one value
    /// (Graphite), as Argo's provider shapes `result`.
    pub list: bool,
    /// The first sluice step (1-based) it is measured at.
    pub from_step: u32,
    /// The templates of its run (`templateName`, `clusterScope`) and the run's arguments,
    /// resolved to their text when the Rollout was read; the adapters find the metric's
    /// query through them, as a Flagger metric's `templateRef`.
    pub templates: Vec<(String, bool)>,
    pub args: Vec<(String, String)>,
    /// An inline `analysis` step: the step cannot end before the run is Successful. A
    /// background analysis (`strategy.canary.analysis`) runs from `from_step` to the
    /// promotion and only stops the rollout.
    pub inline: bool,
    /// A job metric (`provider.job`): the Job's `metadata` and `spec` as JSON, arguments
    /// substituted. Its measurement is a Job sluice commits and reads back: `1` Complete, `0`
    /// Failed, no data while it runs (no measurement is taken then).
    pub job: Option<String>,
}

/// The key of the metric `name` of the analysis step at sluice step `step` when the
/// background analysis measures a metric of that name too: `name@stepN`, which keeps the two
/// runs' observations, histories and `Sluice-Check` trailers apart (a trailer's name holds no
/// space or `=`, and Argo's metric names hold no `@`).
pub fn step_key(name: &str, step: u32) -> String {
    format!("{name}@step{step}")
}

impl ArgoGate {
    /// Whether the gate is measured at `step`.
    pub fn measures_at(&self, step: u32) -> bool {
        if self.inline {
            step == self.from_step
        } else {
            step >= self.from_step
        }
    }
}
