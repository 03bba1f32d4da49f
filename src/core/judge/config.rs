//! A judge's validated settings, as a canary's analysis carries them (`analysis.judge`, or
//! the `Judge` object a Flagger canary's `sluice.dev/judge` annotation names). Plain data: the
//! YAML reader is the main crate's `judge::config`.

use std::time::Duration;

use super::classify::MetricRule;
use super::score::Thresholds;
use crate::builtin_metric::BuiltinMetric;

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
    /// Where its series come from; `None` only for `sluice judge`, which reads files.
    pub query: Option<JudgeQuery>,
    pub group: String,
    pub muted: bool,
    pub rule: MetricRule,
}

/// Where a judged metric's two series come from.
#[derive(Debug, Clone, PartialEq)]
pub enum JudgeQuery {
    /// A PromQL template run on the canary's Prometheus; `{{ workload }}` is the primary's or
    /// the canary's workload name.
    Promql(String),
    /// A built-in metric, its queries those of the canary's mesh or ingress provider.
    Builtin(BuiltinMetric),
    /// A Flagger MetricTemplate, run by the provider it names; without a namespace, the
    /// canary's.
    Template {
        name: String,
        namespace: Option<String>,
    },
}

/// The group of a metric that names none.
pub const DEFAULT_GROUP: &str = "default";
