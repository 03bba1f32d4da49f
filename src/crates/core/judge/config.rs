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
    /// The values each series must hold (after NaN and outlier handling) before its metric
    /// may pass: a shorter series fails it (see [`crate::judge::judge`]).
    pub min_samples: usize,
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

/// The values per series a judge needs by default (`minSamples`): Spinnaker's canary best
/// practices ask for "at least 50 pieces of time series data per metric for the statistical
/// analysis to produce accurate results" (spinnaker.io/docs/guides/user/canary/best-practices,
/// "Run the canary for enough time"); 50 is also where R's `wilcox.test` stops computing the
/// exact distribution and trusts the normal approximation that Kayenta's `MannWhitney.scala`
/// (and this judge) always use.
pub const DEFAULT_MIN_SAMPLES: usize = 50;

/// The most values a series holds in the loop: the replay record keeps them all, so the step
/// is never finer than the window over this. A `minSamples` above it could never be met.
pub const MAX_POINTS: u32 = 1000;

/// The finest step the judge chooses itself (a `step` set in the settings may be finer).
const FLOOR_STEP: Duration = Duration::from_secs(1);

/// The range query's resolution over `window`: `step` when set, else the window over
/// `max(60, 1.2 × min_samples)` (so that a series holds `min_samples` values with room for a
/// few missed scrapes), at least 1 s; never finer than the window over [`MAX_POINTS`].
pub fn step_for(window: Duration, step: Option<Duration>, min_samples: usize) -> Duration {
    let wanted = min_samples.saturating_add(min_samples / 5).max(60);
    let points = u32::try_from(wanted).unwrap_or(MAX_POINTS).min(MAX_POINTS);
    step.unwrap_or_else(|| (window / points).max(FLOOR_STEP))
        .max(window / MAX_POINTS)
}

/// The most values a range query over `window` at `step` gives: one at each end and one per
/// step between (`None` for a zero step).
pub fn most_values(window: Duration, step: Duration) -> Option<u128> {
    if step.is_zero() {
        return None;
    }
    Some(window.as_nanos() / step.as_nanos() + 1)
}
