//! Gathers [`External`] observations for the canaries of one tick: the adapters' side of the
//! core's plain data.
//!
//! The revision comes from the repo content (the workload module); metrics, webhook answers
//! and GitOps sync state come from an [`Observer`], so the loop does not care which adapters
//! are configured. `core::decide::wants` says what each canary needs, so idle canaries cost
//! no queries.

use std::collections::BTreeMap;

use futures::StreamExt;
use jiff::Timestamp;
use tracing::warn;

use crate::core::decide::{wants, Decision};
use crate::core::observe::{MetricObservation, WebhookObservation};
use crate::core::status::{Phase, Status};
use crate::gates::readiness::{read_readiness, Readiness};
use crate::gates::sync::{read_sync, SyncObservation};
use crate::gates::webhook::{call_all, WebhookPayload};
use crate::metrics::metric_templates::TemplateIndex;
use crate::metrics::{observe_metrics, target_name, DEFAULT_METRIC_INTERVAL};
use crate::runtime::Runtime;
use crate::spec::model::{Canary, WebhookKind};
use crate::spec::settings::Settings;

/// One canary to observe.
pub struct Request<'a> {
    pub canary: &'a Canary,
    pub status: Option<&'a Status>,
    pub revision: &'a str,
}

/// What the outside world says about a canary, apart from its revision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct External {
    pub metrics: Vec<MetricObservation>,
    pub webhooks: Vec<WebhookObservation>,
    /// The GitOps engine's view, when the canary has a sync target (`None`: no target).
    pub sync: Option<Result<SyncObservation, String>>,
    /// Whether the canary Deployment and HTTPRoute are ready (read with the sync target's
    /// kube access; `None` when not read).
    pub ready: Option<Result<Readiness, String>>,
}

/// Gathers external observations; implementations do the IO (HTTP, kube).
pub trait Observer: Send + Sync {
    /// Observes every request (same order), at `now`; `templates` are the tick's metric
    /// templates, read once with the rest of the repo.
    fn observe(
        &self,
        templates: &TemplateIndex,
        settings: &Settings,
        requests: &[Request<'_>],
        now: Timestamp,
    ) -> Vec<External>;

    /// Tells `event` and `post-rollout` webhooks, the repo's notification targets and the
    /// canary's Flagger alerts what a committed decision did.
    fn notify(&self, _settings: &Settings, _canary: &Canary, _decision: &Decision) {}
}

/// No metrics provider, no webhooks called, no sync awareness: declared metrics and webhooks
/// fail their checks (never a silent pass).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl Observer for Offline {
    fn observe(
        &self,
        _: &TemplateIndex,
        _: &Settings,
        requests: &[Request<'_>],
        _: Timestamp,
    ) -> Vec<External> {
        requests.iter().map(|_| External::default()).collect()
    }
}

/// The real adapters: Prometheus, webhooks, and (when a canary has a sync target) the
/// Kubernetes API, queried concurrently across canaries on the runtime context's tokio runtime.
pub struct Live<'a> {
    runtime: &'a Runtime,
    /// A Prometheus address that overrides the repo settings (the demo's embedded source).
    pub prometheus_override: Option<String>,
}

/// Canaries observed at once, at least (more when `prometheus.concurrency` is higher, so its
/// slots can fill). Metric queries are bounded per Prometheus endpoint, not here.
const CONCURRENT_CANARIES: usize = 16;

impl<'a> Live<'a> {
    pub fn new(runtime: &'a Runtime) -> Live<'a> {
        Live {
            runtime,
            prometheus_override: None,
        }
    }

    async fn observe_one(
        &self,
        r: &Request<'_>,
        templates: &TemplateIndex,
        address: Option<&str>,
        concurrency: usize,
        now: Timestamp,
    ) -> External {
        let canary = r.canary;
        let want = wants(canary, r.status, r.revision, now);
        let target = target_name(canary)
            .unwrap_or(canary.id.name.as_str())
            .to_string();
        let metrics = async {
            if want.metrics {
                observe_metrics(
                    self.runtime.prometheus(),
                    canary,
                    &target,
                    templates,
                    address,
                    DEFAULT_METRIC_INTERVAL,
                    concurrency,
                )
                .await
            } else {
                Vec::new()
            }
        };
        let hooks: Vec<_> = canary
            .analysis
            .webhooks
            .iter()
            .filter(|w| want.hooks.contains(&w.kind))
            .collect();
        let phase = r.status.map_or(Phase::Initializing, |s| s.phase);
        let body = payload(canary, phase, r.revision, BTreeMap::new());
        let webhooks = async {
            if hooks.is_empty() {
                Vec::new()
            } else {
                call_all(self.runtime.http(), &hooks, &body).await
            }
        };
        let sync = async {
            let target = canary.sync.as_ref()?;
            if !r.status.is_some_and(|s| s.phase.is_active()) {
                return None;
            }
            Some(match self.runtime.kube_client().await {
                Some(client) => read_sync(&client, target).await.map_err(|e| e.to_string()),
                None => Err(format!(
                    "cannot read {target}: no Kubernetes access (in-cluster config or KUBECONFIG)"
                )),
            })
        };
        let ready = async {
            canary.sync.as_ref()?;
            if !r.status.is_some_and(|s| s.phase.is_active()) {
                return None;
            }
            Some(match self.runtime.kube_client().await {
                Some(client) => read_readiness(&client, canary, &target).await,
                None => Err("no Kubernetes access to read readiness".to_string()),
            })
        };
        let (metrics, webhooks, sync, ready) = tokio::join!(metrics, webhooks, sync, ready);
        External {
            metrics,
            webhooks,
            sync,
            ready,
        }
    }
}

fn payload(
    canary: &Canary,
    phase: Phase,
    revision: &str,
    metadata: BTreeMap<String, String>,
) -> WebhookPayload {
    WebhookPayload {
        name: canary.id.name.to_string(),
        namespace: canary.id.namespace.to_string(),
        phase,
        checksum: revision.to_string(),
        metadata,
    }
}

impl Observer for Live<'_> {
    fn observe(
        &self,
        templates: &TemplateIndex,
        settings: &Settings,
        requests: &[Request<'_>],
        now: Timestamp,
    ) -> Vec<External> {
        let address = self
            .prometheus_override
            .clone()
            .or_else(|| settings.prometheus.clone());
        let concurrency = settings.prometheus_concurrency;
        self.runtime.block_on(async {
            // Bounded concurrency across canaries; results come back in request order.
            futures::stream::iter(requests)
                .map(|r| self.observe_one(r, templates, address.as_deref(), concurrency, now))
                .buffered(CONCURRENT_CANARIES.max(concurrency))
                .collect::<Vec<External>>()
                .await
        })
    }

    fn notify(&self, settings: &Settings, canary: &Canary, decision: &Decision) {
        if !settings.notifications.is_empty() {
            self.runtime.block_on(crate::notify::send(
                self.runtime.http().get(false),
                &settings.notifications,
                |name| self.runtime.env(name).map(str::to_string),
                canary,
                decision,
            ));
        }
        if !canary.analysis.alerts.alerts.is_empty() {
            self.runtime.block_on(crate::notify::alerts::send(
                self.runtime.http(),
                self.runtime.secrets(),
                canary,
                decision,
            ));
        }
        let status = &decision.status;
        let events = &decision.events;
        let mut kinds = vec![WebhookKind::Event];
        if matches!(status.phase, Phase::Succeeded | Phase::Failed) {
            kinds.push(WebhookKind::PostRollout);
        }
        let hooks: Vec<_> = canary
            .analysis
            .webhooks
            .iter()
            .filter(|w| kinds.contains(&w.kind))
            .collect();
        if hooks.is_empty() {
            return;
        }
        let revision = status
            .canary_revision
            .clone()
            .unwrap_or_else(|| status.promoted_revision.clone());
        let mut meta = BTreeMap::new();
        meta.insert("eventMessage".to_string(), events.join("; "));
        let kind = if status.phase == Phase::Failed {
            "Warning"
        } else {
            "Normal"
        };
        meta.insert("eventType".to_string(), kind.to_string());
        meta.insert(
            "timestamp".to_string(),
            Timestamp::now().as_millisecond().to_string(),
        );
        let body = payload(canary, status.phase, &revision, meta);
        for r in self
            .runtime
            .block_on(call_all(self.runtime.http(), &hooks, &body))
        {
            if let Err(e) = r.outcome {
                warn!(canary = %canary.id, hook = %r.name, error = %e, "Notification webhook failed");
            }
        }
    }
}
