//! Metric adapters: turn a canary's metric specs into `MetricObservation`s by querying
//! Prometheus. The core judges the values against the thresholds; nothing here decides.

pub mod builtin;
pub mod prometheus;
pub mod template;
