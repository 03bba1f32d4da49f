//! Gathers [`Observations`] for one canary: the adapters' side of the core's plain data.
//!
//! The revision comes from the repo content (the workload module); metrics, webhooks,
//! approvals and sync state come from an [`Observer`] so the loop does not care which
//! adapters are configured.

use crate::core::observe::{MetricObservation, WebhookObservation};
use crate::core::status::Status;
use crate::spec::model::Canary;

/// What the outside world says about a canary, apart from its revision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct External {
    pub metrics: Vec<MetricObservation>,
    pub webhooks: Vec<WebhookObservation>,
    pub approved: bool,
    pub applied: bool,
}

/// Gathers external observations; implementations do the IO (HTTP, kube).
pub trait Observer: Send + Sync {
    fn observe(&self, canary: &Canary, status: Option<&Status>) -> External;
}

/// No metrics provider, no webhooks called, no sync awareness: every change counts as applied
/// at once, and declared metrics or webhooks fail their checks (never a silent pass).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl Observer for Offline {
    fn observe(&self, _canary: &Canary, _status: Option<&Status>) -> External {
        External {
            applied: true,
            ..External::default()
        }
    }
}
