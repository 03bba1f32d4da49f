//! Gathers [`External`] observations for the canaries of one tick: the adapters' side of the
//! core's plain data.
//!
//! The revision comes from the repo content (the workload module); metrics, webhook answers
//! and GitOps sync state come from an [`Observer`], so the loop does not care which adapters
//! are configured. `core::decide::wants` says what each canary needs, so idle canaries cost
//! no queries.
//!
//! A provider's timeout bounds only its own canaries. The daemon's observer
//! ([`Live::deciding_without_waiting`]) waits at most [`PATIENCE`] for a canary's metric
//! answers; a canary whose answers are not in by then is [`External::metrics_pending`]: the
//! tick decides the others and leaves it alone. Its queries go on (each to its own timeout),
//! the answers are kept for the next tick that asks for the same canary and revision, and
//! their arrival wakes the daemon. One-shot commands ([`Live::new`]) wait for every answer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use tracing::{info, warn};

use crate::core::decide::{wants, Decision};
use crate::core::observe::{MetricObservation, MetricValue, WebhookObservation};
use crate::core::status::{Phase, Status};
use crate::gates::readiness::{read_readiness, Readiness};
use crate::gates::sync::{read_sync, SyncObservation};
use crate::gates::webhook::{call_all, WebhookPayload};
use crate::manifest::model::{Canary, WebhookKind};
use crate::manifest::settings::Settings;
use crate::metrics::metric_templates::TemplateIndex;
use crate::metrics::{
    finished, metric_names, start_metrics, target_name, InFlight, DEFAULT_METRIC_INTERVAL,
};
use crate::runtime::Runtime;

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
    /// The metric answers are not in yet: the canary is not decided this tick (nothing else
    /// was observed for it).
    pub metrics_pending: bool,
    /// The statistical judge's series, for a judged canary whose metrics were observed.
    pub judge: Option<crate::core::judged::JudgeObservation>,
    /// Whether the wave's cluster answered, asked when the wave is about to act (`None`: not
    /// asked). When it did not, nothing else was observed.
    pub cluster: Option<Result<(), crate::core::observe::Unreachable>>,
    /// Why the canary cannot be observed as its spec asks (a job metric without Kubernetes
    /// access, `file:line: field: ...`): it holds; nothing else was observed.
    pub held: Option<String>,
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
    /// How long a tick waits for a canary's metric answers; `None`: until they are all in.
    patience: Option<Duration>,
    /// Metric queries a tick stopped waiting for, by canary and revision, for the next tick.
    in_flight: Mutex<BTreeMap<String, Deferred>>,
    /// Told when deferred answers arrive (the daemon's wake-up).
    wake: Option<Arc<tokio::sync::Notify>>,
}

/// Metric queries left running when a tick stopped waiting for them.
struct Deferred {
    queries: InFlight,
    /// Set once a tick has deferred them: their arrival then wakes the daemon.
    deferred: Arc<AtomicBool>,
}

/// How long the daemon's tick waits for a canary's metric answers before it decides the other
/// canaries without them. Long enough for a healthy provider (answers take milliseconds),
/// short next to the providers' timeouts (5 s, InfluxDB's 15 s).
pub const PATIENCE: Duration = Duration::from_secs(1);

/// Canaries observed at once, at least (more when `prometheus.concurrency` is higher, so its
/// slots can fill). Metric queries are bounded per Prometheus endpoint, not here.
const CONCURRENT_CANARIES: usize = 16;

impl<'a> Live<'a> {
    pub fn new(runtime: &'a Runtime) -> Live<'a> {
        Live {
            runtime,
            prometheus_override: None,
            patience: None,
            in_flight: Mutex::new(BTreeMap::new()),
            wake: None,
        }
    }

    /// This observer waiting at most [`PATIENCE`] for a canary's metric answers (see the
    /// module docs); `wake` is told when answers a tick deferred arrive.
    pub fn deciding_without_waiting(mut self, wake: Arc<tokio::sync::Notify>) -> Live<'a> {
        self.patience = Some(PATIENCE);
        self.wake = Some(wake);
        self
    }

    /// The metric observations of request `r`: from `carried` (queries an earlier tick left
    /// running) or new queries; `None` when they are not in within the patience, the queries
    /// then kept for the next tick.
    async fn metrics(
        &self,
        r: &Request<'_>,
        carried: Option<Deferred>,
        tick: &Tick<'_>,
    ) -> Option<Vec<MetricObservation>> {
        let canary = r.canary;
        let mut running = carried.unwrap_or_else(|| {
            let target = target_name(canary).unwrap_or(canary.base_name().as_str());
            let queries = start_metrics(
                self.runtime.prometheus(),
                canary,
                target,
                tick.templates,
                tick.address,
                DEFAULT_METRIC_INTERVAL,
                tick.concurrency,
            );
            self.watched(queries, metric_names(canary))
        });
        let Some(patience) = self.patience else {
            return Some(finished((&mut running.queries).await, metric_names(canary)));
        };
        match tokio::time::timeout(patience, &mut running.queries).await {
            Ok(joined) => Some(finished(joined, metric_names(canary))),
            Err(_) => {
                info!(canary = %canary.id, "Metric answers not in yet; deciding the other canaries");
                running.deferred.store(true, Ordering::SeqCst);
                // Answers that came in between the timeout and the flag wake nothing: wake now.
                if running.queries.is_finished() {
                    if let Some(wake) = &self.wake {
                        wake.notify_one();
                    }
                }
                let key = in_flight_key(r);
                lock(&self.in_flight).insert(key, running);
                None
            }
        }
    }

    /// `queries` (of the metrics `names`), wrapped so that their end wakes the daemon once a
    /// tick has deferred them.
    fn watched(&self, queries: InFlight, names: Vec<String>) -> Deferred {
        let deferred = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&deferred);
        let wake = self.wake.clone();
        let queries = tokio::spawn(async move {
            let answers = queries.await;
            if flag.load(Ordering::SeqCst) {
                if let Some(wake) = wake {
                    wake.notify_one();
                }
            }
            finished(answers, names)
        });
        Deferred { queries, deferred }
    }

    async fn observe_one(
        &self,
        r: &Request<'_>,
        carried: Option<Deferred>,
        tick: &Tick<'_>,
    ) -> External {
        let canary = r.canary;
        let reached = self.reach(r).await;
        if let Some(Err(_)) = &reached {
            return External {
                cluster: reached,
                ..External::default()
            };
        }
        let want = wants(canary, r.status, r.revision, tick.now);
        let target = target_name(canary)
            .unwrap_or(canary.base_name().as_str())
            .to_string();
        // Metrics first: a canary whose answers are not in calls no hook this tick.
        let metrics = if want.metrics {
            let observed = self.metrics(r, carried, tick).await;
            match observed {
                Some(m) => m,
                None => {
                    return External {
                        metrics_pending: true,
                        ..External::default()
                    }
                }
            }
        } else {
            Vec::new()
        };
        let mut metrics = metrics;
        if want.metrics {
            match self.analysis(r, tick).await {
                Ok(analysis) => metrics.extend(analysis),
                Err(held) => {
                    warn!(canary = %canary.id, reason = %held, "Holding: a job metric cannot be read");
                    return External {
                        held: Some(held),
                        ..External::default()
                    };
                }
            }
        }
        let hooks: Vec<_> = canary
            .analysis
            .webhooks
            .iter()
            .filter(|w| want.hooks.contains(&w.kind))
            .collect();
        let phase = r.status.map_or(Phase::Initializing, |s| s.phase);
        let body = payload(canary, phase, r.revision, BTreeMap::new());
        let clock = self.runtime.shared_clock();
        let webhooks = async {
            if hooks.is_empty() {
                Vec::new()
            } else {
                call_all(self.runtime.http(), &hooks, &body, &clock).await
            }
        };
        // A wave's gates read its own cluster.
        let cluster = canary.wave.as_ref().and_then(|w| w.cluster.as_ref());
        let sync = async {
            let target = canary.sync.as_ref()?;
            if !r.status.is_some_and(|s| s.phase.is_active()) {
                return None;
            }
            Some(match self.runtime.cluster_client(cluster).await {
                Ok(client) => read_sync(&client, target).await.map_err(|e| e.to_string()),
                Err(e) => Err(format!("cannot read {target}: {e}")),
            })
        };
        let ready = async {
            canary.sync.as_ref()?;
            if !r.status.is_some_and(|s| s.phase.is_active()) {
                return None;
            }
            Some(match self.runtime.cluster_client(cluster).await {
                Ok(client) => read_readiness(&client, canary, &target).await,
                Err(e) => Err(format!("cannot read readiness: {e}")),
            })
        };
        let judge = async {
            let spec = canary.analysis.judge.as_ref().filter(|_| want.metrics)?;
            let fetch = crate::metrics::judge_series::Fetch {
                access: self.runtime.prometheus(),
                templates: tick.templates,
                default_address: tick.address,
                now: tick.now,
                concurrency: tick.concurrency,
            };
            Some(crate::metrics::judge_series::observe(&fetch, canary, spec, &target).await)
        };
        let (webhooks, sync, ready, judge) = tokio::join!(webhooks, sync, ready, judge);
        External {
            metrics,
            webhooks,
            sync,
            ready,
            metrics_pending: false,
            judge,
            cluster: reached,
            held: None,
        }
    }

    /// A Rollout's analysis metrics that measure at the canary's step, each queried through
    /// its run's templates and arguments (the ones its Rollout was read with); a job metric's
    /// measurement is its committed Job read back. `Err`: a job metric measures and sluice has
    /// no Kubernetes access to read its Job (where the metric is written, and why).
    async fn analysis(
        &self,
        r: &Request<'_>,
        tick: &Tick<'_>,
    ) -> Result<Vec<MetricObservation>, String> {
        let step = r.status.map_or(0, |s| s.step);
        let namespace = r.canary.id.namespace.as_str();
        let input = crate::metrics::analysis_run::MeasureInput {
            access: self.runtime.prometheus(),
            default_address: tick.address,
            namespace,
        };
        let mut out = Vec::new();
        for gate in r
            .canary
            .analysis
            .argo
            .iter()
            .filter(|g| g.measures_at(step))
        {
            let refs: Vec<_> = gate
                .templates
                .iter()
                .map(
                    |(name, cluster)| crate::metrics::analysis_templates::TemplateRef {
                        name: name.clone(),
                        cluster: *cluster,
                    },
                )
                .collect();
            let value = match tick.templates.analysis.run(namespace, &refs, &gate.args) {
                Ok(run) => match run.metrics.iter().find(|m| m.name == gate.name) {
                    Some(metric) if gate.job.is_some() => self.job(r, gate, metric).await?,
                    Some(metric) => {
                        crate::metrics::analysis_run::observe(&run, metric, &input).await
                    }
                    None => MetricValue::Error(format!(
                        "metric {} is no longer in its templates",
                        gate.name
                    )),
                },
                Err(e) => MetricValue::Error(e.to_string()),
            };
            out.push(MetricObservation {
                name: gate.metric.clone(),
                value,
            });
        }
        Ok(out)
    }

    /// A job metric's measurement: the Job committed for the measurement the status is at,
    /// read from the canary's cluster (no data when no Job is committed for it now).
    async fn job(
        &self,
        r: &Request<'_>,
        gate: &crate::core::argo_analysis::ArgoGate,
        metric: &crate::metrics::analysis_templates::AnalysisMetric,
    ) -> Result<MetricValue, String> {
        use crate::render::analysis_job;
        let Some(status) = r.status else {
            return Ok(MetricValue::NoData);
        };
        let Some(index) = analysis_job::measuring(gate, status) else {
            return Ok(MetricValue::NoData);
        };
        let cluster = r.canary.wave.as_ref().and_then(|w| w.cluster.as_ref());
        let client = self.runtime.cluster_client(cluster).await.map_err(|e| {
            format!(
                "{}:{}: provider.job: metric {} needs Kubernetes read access to Jobs (get on jobs.batch in {}) to read its Job's result: {e}",
                metric.file, metric.line, gate.metric, r.canary.id.namespace
            )
        })?;
        let revision = status.canary_revision.as_deref().unwrap_or_default();
        let name = analysis_job::job_name(r.canary.id.name.as_str(), revision, &gate.metric, index);
        Ok(crate::gates::analysis_job::read(&client, r.canary.id.namespace.as_str(), &name).await)
    }

    /// Whether a wave's own cluster (`cluster:`) answers, asked only when the wave is about
    /// to act: under analysis, or with a revision it has not taken yet.
    async fn reach(
        &self,
        r: &Request<'_>,
    ) -> Option<Result<(), crate::core::observe::Unreachable>> {
        let cluster = r.canary.wave.as_ref()?.cluster.as_ref()?;
        let status = r.status?;
        let taken = status.promoted_revision == r.revision
            || status.canary_revision.as_deref() == Some(r.revision);
        if !status.phase.is_active() && taken {
            return None;
        }
        Some(self.runtime.cluster_reach(cluster).await)
    }
}

/// What every canary of one `observe` call shares.
struct Tick<'t> {
    templates: &'t TemplateIndex,
    /// The Prometheus address of the repo settings (or the override).
    address: Option<&'t str>,
    /// `prometheus.concurrency`.
    concurrency: usize,
    now: Timestamp,
}

/// Which queries a request can take over from an earlier tick: the same canary at the same
/// revision.
fn in_flight_key(r: &Request<'_>) -> String {
    format!("{}@{}", r.canary.id, r.revision)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock left a map that is still whole.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn payload(
    canary: &Canary,
    phase: Phase,
    revision: &str,
    metadata: BTreeMap<String, String>,
) -> WebhookPayload {
    WebhookPayload {
        name: canary.base_name().to_string(),
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
        // Queries an earlier tick deferred: taken by the canaries that still want them; the
        // others (a new revision, a canary that moved on) are stopped.
        let mut previous = std::mem::take(&mut *lock(&self.in_flight));
        let carried: Vec<Option<Deferred>> = requests
            .iter()
            .map(|r| previous.remove(&in_flight_key(r)))
            .collect();
        for stale in previous.into_values() {
            stale.queries.abort();
        }
        let tick = Tick {
            templates,
            address: address.as_deref(),
            concurrency,
            now,
        };
        self.runtime.block_on(async {
            // Bounded concurrency across canaries; results come back in request order.
            futures::stream::iter(requests.iter().zip(carried))
                .map(|(r, carried)| self.observe_one(r, carried, &tick))
                .buffered(CONCURRENT_CANARIES.max(concurrency))
                .collect::<Vec<External>>()
                .await
        })
    }

    fn notify(&self, settings: &Settings, canary: &Canary, decision: &Decision) {
        let page = settings.dashboard_page(canary.id.namespace.as_str(), canary.id.name.as_str());
        if !settings.notifications.is_empty() {
            self.runtime.block_on(crate::notify::send(
                self.runtime.http().get(false),
                &settings.notifications,
                |name| self.runtime.env(name).map(str::to_string),
                canary,
                decision,
                page.as_deref(),
            ));
        }
        if !canary.analysis.alerts.alerts.is_empty() {
            self.runtime.block_on(crate::notify::alerts::send(
                self.runtime.http(),
                self.runtime.secrets(),
                canary,
                decision,
                page.as_deref(),
            ));
        }
        let status = &decision.status;
        let events = &decision.events;
        let mut kinds = vec![WebhookKind::Event];
        if decision.ends_rollout() {
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
            self.runtime.clock().now().as_millisecond().to_string(),
        );
        let body = payload(canary, status.phase, &revision, meta);
        for r in self.runtime.block_on(call_all(
            self.runtime.http(),
            &hooks,
            &body,
            &self.runtime.shared_clock(),
        )) {
            if let Err(e) = r.outcome {
                warn!(canary = %canary.id, hook = %r.name, error = %e, "Notification webhook failed");
            }
        }
    }
}
