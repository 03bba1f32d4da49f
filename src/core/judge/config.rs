//! A judge's validated settings, as a canary's analysis carries them (`analysis.judge`, or
//! the `Judge` object a Flagger canary's `sluice.dev/judge` annotation names). Plain data: the
//! YAML reader is the main crate's `judge::config`.

use std::time::Duration;

use super::classify::MetricRule;
use super::score::Thresholds;

/// A judge's validated settings.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeSpec {
    pub metrics: Vec<JudgeMetric>,
    pub group_weights: Vec<(String, f64)>,
    pub thresholds: Thresholds,
    pub window: Option<Duration>,
    pub step: Option<Duration>,
}

/// One judged metric.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeMetric {
    pub name: String,
    /// The query template; `{{ workload }}` is the primary's or the canary's workload name.
    pub query: Option<String>,
    pub group: String,
    pub muted: bool,
    pub rule: MetricRule,
}

/// The group of a metric that names none.
pub const DEFAULT_GROUP: &str = "default";
