//! The built-in metrics every provider with a query set renders (Flagger's names): a leaf, so
//! the threshold checks ([`crate::model`]) and the judge ([`crate::judge`]) both name them
//! without using each other.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BuiltinMetric {
    #[serde(rename = "request-success-rate")]
    RequestSuccessRate,
    #[serde(rename = "request-duration")]
    RequestDuration,
}
