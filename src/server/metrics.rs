//! sluice's Prometheus metrics (`/metrics` in the OpenMetrics text format): what the loop
//! records after each tick, counters of errors by kind, and the pooled HTTP clients'
//! connections read at scrape time. Nothing here serves or decides.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, LabelSetEncoder,
};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

pub(super) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A canary's labels; `repo` only when the install reconciles several config repos, so a
/// single-repo install's series keep their labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct CanaryLabels {
    repo: Option<String>,
    namespace: String,
    name: String,
}

impl EncodeLabelSet for CanaryLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        labels(
            &self.repo,
            &[("namespace", &self.namespace), ("name", &self.name)],
        )
        .encode(encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct PhaseLabels {
    canary: CanaryLabels,
    phase: String,
}

impl EncodeLabelSet for PhaseLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        let c = &self.canary;
        let rest = [
            ("namespace", &c.namespace),
            ("name", &c.name),
            ("phase", &self.phase),
        ];
        labels(&c.repo, &rest).encode(encoder)
    }
}

/// `repo` (when set) then `rest`, in order.
fn labels<'a>(repo: &'a Option<String>, rest: &[(&'a str, &'a String)]) -> Vec<(&'a str, &'a str)> {
    repo.iter()
        .map(|r| ("repo", r.as_str()))
        .chain(rest.iter().map(|(k, v)| (*k, v.as_str())))
        .collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: String,
}

struct MetricsInner {
    registry: Registry,
    weight: Family<CanaryLabels, Gauge>,
    phase: Family<PhaseLabels, Gauge>,
    failed_checks: Family<CanaryLabels, Gauge>,
    analysis_seconds: Family<CanaryLabels, Gauge<f64, AtomicU64>>,
    ticks: Counter,
    push_retries: Counter,
    errors: Family<ErrorLabels, Counter>,
    /// Last phase recorded per canary, so its series can be set back to 0.
    phases: Mutex<HashMap<CanaryLabels, String>>,
}

/// sluice's Prometheus metrics; cheap to clone, shared by the loop and the server.
#[derive(Clone)]
pub struct Metrics(Arc<MetricsInner>);

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// `sluice_http_connections_opened_total{endpoint}`, read from the pooled clients at scrape time.
#[derive(Debug)]
struct HttpConnections(crate::http_client::Endpoints);

impl Collector for HttpConnections {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let opened = self.0.connections_opened();
        if opened.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "http_connections_opened",
            "Connections opened by the pooled HTTP client of each Prometheus endpoint",
            None,
            MetricType::Counter,
        )?;
        for (endpoint, count) in opened {
            let labels = [("endpoint", endpoint)];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::build(None)
    }

    /// The metrics, plus the connections `endpoints`' pooled clients opened
    /// (`sluice_http_connections_opened_total{endpoint="http://prom:9090"}`).
    pub fn with_connections(endpoints: crate::http_client::Endpoints) -> Metrics {
        Metrics::build(Some(endpoints))
    }

    fn build(endpoints: Option<crate::http_client::Endpoints>) -> Metrics {
        let mut registry = Registry::with_prefix("sluice");
        if let Some(endpoints) = endpoints {
            registry.register_collector(Box::new(HttpConnections(endpoints)));
        }
        let weight = Family::<CanaryLabels, Gauge>::default();
        let phase = Family::<PhaseLabels, Gauge>::default();
        let failed_checks = Family::<CanaryLabels, Gauge>::default();
        let analysis_seconds = Family::<CanaryLabels, Gauge<f64, AtomicU64>>::default();
        let ticks = Counter::default();
        let push_retries = Counter::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "canary_weight",
            "Traffic weight routed to the canary (percent)",
            weight.clone(),
        );
        registry.register(
            "canary_phase",
            "Canary phase: 1 for the current phase, 0 for phases it was in before",
            phase.clone(),
        );
        registry.register(
            "canary_failed_checks",
            "Failed checks counted toward the canary's threshold",
            failed_checks.clone(),
        );
        registry.register(
            "canary_analysis_seconds",
            "Time spent on the canary's current analysis (seconds)",
            analysis_seconds.clone(),
        );
        registry.register(
            "reconcile_ticks",
            "Passes of the reconcile loop over all canaries",
            ticks.clone(),
        );
        registry.register(
            "push_retries",
            "Pushes retried after the remote rejected them (non-fast-forward)",
            push_retries.clone(),
        );
        registry.register("errors", "Errors by kind", errors.clone());
        Metrics(Arc::new(MetricsInner {
            registry,
            weight,
            phase,
            failed_checks,
            analysis_seconds,
            ticks,
            push_retries,
            errors,
            phases: Mutex::new(HashMap::new()),
        }))
    }

    /// Records one canary's state after a tick.
    pub fn record_canary(
        &self,
        namespace: &str,
        name: &str,
        phase: &str,
        weight: u8,
        failed: u32,
        analysis_secs: f64,
    ) {
        let state = (phase, weight, failed, analysis_secs);
        self.record_canary_in(None, namespace, name, state);
    }

    /// [`Metrics::record_canary`] for a canary of config repo `repo` (labelled `repo` when
    /// given: the install reconciles several), its state (phase, weight, failed checks,
    /// seconds in analysis).
    pub fn record_canary_in(
        &self,
        repo: Option<&str>,
        namespace: &str,
        name: &str,
        (phase, weight, failed, analysis_secs): (&str, u8, u32, f64),
    ) {
        let m = &self.0;
        let canary = CanaryLabels {
            repo: repo.map(str::to_string),
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        m.weight.get_or_create(&canary).set(i64::from(weight));
        m.failed_checks
            .get_or_create(&canary)
            .set(i64::from(failed));
        let secs = if analysis_secs.is_finite() {
            analysis_secs
        } else {
            0.0
        };
        m.analysis_seconds.get_or_create(&canary).set(secs);
        let previous = match m.phases.lock() {
            Ok(mut phases) => phases.insert(canary.clone(), phase.to_string()),
            // A panic elsewhere while holding the lock: still record the new phase.
            Err(poisoned) => poisoned
                .into_inner()
                .insert(canary.clone(), phase.to_string()),
        };
        if let Some(previous) = previous.filter(|p| p != phase) {
            m.phase
                .get_or_create(&PhaseLabels {
                    canary: canary.clone(),
                    phase: previous,
                })
                .set(0);
        }
        m.phase
            .get_or_create(&PhaseLabels {
                canary,
                phase: phase.to_string(),
            })
            .set(1);
    }

    /// Counts one pass of the loop.
    pub fn tick(&self) {
        self.0.ticks.inc();
    }

    /// Counts `n` push retries.
    pub fn push_retry(&self, n: u32) {
        self.0.push_retries.inc_by(u64::from(n));
    }

    /// Counts one error of `kind` (e.g. `fetch`, `push`, `spec`, `metrics`, `sync`).
    pub fn error(&self, kind: &str) {
        self.0
            .errors
            .get_or_create(&ErrorLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.0.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_series_switch_to_the_current_phase() {
        let m = Metrics::new();
        m.record_canary("prod", "podinfo", "Progressing", 20, 1, 30.0);
        m.record_canary("prod", "podinfo", "Promoting", 0, 0, f64::NAN);
        let text = m.encode().unwrap();
        assert!(text.contains(
            "sluice_canary_phase{namespace=\"prod\",name=\"podinfo\",phase=\"Progressing\"} 0"
        ));
        assert!(text.contains(
            "sluice_canary_phase{namespace=\"prod\",name=\"podinfo\",phase=\"Promoting\"} 1"
        ));
        assert!(text
            .contains("sluice_canary_analysis_seconds{namespace=\"prod\",name=\"podinfo\"} 0.0"));
    }

    #[test]
    fn two_repos_keep_their_same_named_canaries_apart_by_a_repo_label() {
        let m = Metrics::new();
        m.record_canary_in(Some("shop"), "prod", "web", ("Progressing", 20, 0, 5.0));
        m.record_canary_in(Some("pay"), "prod", "web", ("Succeeded", 0, 0, 0.0));
        let text = m.encode().unwrap();
        for line in [
            "sluice_canary_weight{repo=\"shop\",namespace=\"prod\",name=\"web\"} 20",
            "sluice_canary_weight{repo=\"pay\",namespace=\"prod\",name=\"web\"} 0",
            "sluice_canary_phase{repo=\"shop\",namespace=\"prod\",name=\"web\",phase=\"Progressing\"} 1",
            "sluice_canary_phase{repo=\"pay\",namespace=\"prod\",name=\"web\",phase=\"Succeeded\"} 1",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert!(!text.contains("phase=\"Progressing\"} 0"), "{text}");
    }
}
