//! Observations: plain data the adapters gather before each decision (source revision, metric
//! values, webhook answers, sync state). The core never fetches any of it. Human approvals are
//! not observations: an approval is a manual operation (`operate::Approve`) that moves the
//! status past its gate, committed directly or carried by the approval pull request.

use crate::model::WebhookKind;

/// What a metric query returned.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricValue {
    Value(f64),
    /// The query returned no series.
    NoData,
    /// The query failed (HTTP error, timeout, bad response); the text says why.
    Error(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetricObservation {
    pub name: String,
    pub value: MetricValue,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookObservation {
    pub name: String,
    pub kind: WebhookKind,
    /// `Ok` when the hook answered with a success status; `Err` says what happened.
    pub outcome: Result<(), String>,
}

/// Everything the core may look at for one canary at one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Observations {
    /// Revision hash of the source (or the route-only `revision` string).
    pub revision: String,
    pub metrics: Vec<MetricObservation>,
    pub webhooks: Vec<WebhookObservation>,
    /// The last commit is applied by the GitOps engine and the canary is ready. Adapters that
    /// cannot tell report `true` after a settle delay.
    pub applied: bool,
}

impl Observations {
    /// Observations of a healthy world: the given revision, applied, nothing else.
    pub fn revision(revision: impl Into<String>) -> Observations {
        Observations {
            revision: revision.into(),
            metrics: Vec::new(),
            webhooks: Vec::new(),
            applied: true,
        }
    }

    /// The answers of webhooks of one kind.
    pub fn hooks(&self, kind: WebhookKind) -> impl Iterator<Item = &WebhookObservation> {
        self.webhooks.iter().filter(move |w| w.kind == kind)
    }
}
