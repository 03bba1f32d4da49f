//! End to end against a real Prometheus (`/usr/bin/prometheus`, Debian package `prometheus`).
//!
//! The test runs an exporter in-process that serves OSM's metrics for two Deployments in
//! namespace `test` (`podinfo`: all 2xx; `faulty`: 20 % 5xx) plus noise in another namespace,
//! starts Prometheus scraping it every second, and checks the built-in OSM queries return what
//! the traffic says. Every wait is bounded; the Prometheus process is killed on drop.
//! Without Prometheus installed the test fails (CI installs it; it must not pass by skipping).

use std::time::Instant;

use sluice::core::model::ThresholdRange;
use sluice::core::observe::{MetricObservation, MetricValue};
use sluice::http_client::HttpClients;
use sluice::manifest::settings::DEFAULT_PROMETHEUS_CONCURRENCY;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::metrics::prometheus::{Auth, Prometheus, PrometheusAccess, PrometheusConfig};
use sluice::metrics::{observe_metrics, DEFAULT_METRIC_INTERVAL};

use crate::support::metrics::{flagger_canary, Canned, Server};
use crate::support::prometheus::{osm_exposition, wait_for, wait_for_samples, PrometheusProcess};

fn value(obs: &[MetricObservation], name: &str) -> f64 {
    match obs.iter().find(|o| o.name == name).map(|o| &o.value) {
        Some(MetricValue::Value(v)) => *v,
        other => panic!("{name}: expected a value, found {other:?}"),
    }
}

const METRICS: &str = "      - name: request-success-rate
        thresholdRange: {min: 99}
        interval: 10s
      - name: request-duration
        thresholdRange: {max: 500}
        interval: 10s
      - name: error-rate
        templateRef: {name: error-rate, namespace: test}
        thresholdRange: {max: 1}
        interval: 10s
";

const TEMPLATE: &str = "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: error-rate
  namespace: test
spec:
  provider:
    type: prometheus
  query: |
    sum(rate(osm_request_total{destination_namespace=\"{{ namespace }}\", destination_name=\"{{ target }}\", response_code=~\"5..\"}[{{ interval }}]))
    or vector(0)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_osm_metrics_against_real_prometheus() {
    let started = Instant::now();
    let exporter = Server::start_with(move |_| {
        let t = started.elapsed().as_secs_f64();
        Canned::new(200, osm_exposition(t)).header("Content-Type", "text/plain; version=0.0.4")
    })
    .await;
    let mut prom = PrometheusProcess::start(&exporter.addr.to_string());
    let client = Prometheus::new(&PrometheusConfig::new(&prom.url)).expect("client");

    wait_for("the exporter target to be up", &prom, async || match client
        .query("up{job=\"canary\"}")
        .await
    {
        MetricValue::Value(1.0) => None,
        other => Some(format!("{other:?}")),
    })
    .await;

    // rate() divides by the whole window: wait until 10 s of samples fill it.
    wait_for_samples(&client, &prom).await;

    let canary = flagger_canary("osm", "", METRICS);
    let mut templates = TemplateIndex::new();
    assert!(templates.add_text("metrics.yaml", TEMPLATE).is_empty());
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None);
    let observe = async |target: &str| {
        observe_metrics(
            &access,
            &canary,
            target,
            &templates,
            Some(&prom.url),
            DEFAULT_METRIC_INTERVAL,
            DEFAULT_PROMETHEUS_CONCURRENCY,
        )
        .await
    };

    let healthy = observe("podinfo").await;
    let rate = value(&healthy, "request-success-rate");
    assert!((rate - 100.0).abs() < 1e-6, "healthy success rate {rate}");
    let p99 = value(&healthy, "request-duration");
    assert!(
        (40.0..=50.0).contains(&p99),
        "p99 {p99} ms; expected about 46"
    );
    assert_eq!(p99, p99.trunc(), "durations are whole milliseconds");
    assert_eq!(value(&healthy, "error-rate"), 0.0);

    let faulty = observe("faulty").await;
    let rate = value(&faulty, "request-success-rate");
    assert!(
        (rate - 80.0).abs() < 0.5,
        "faulty success rate {rate}; expected about 80"
    );
    let errors = value(&faulty, "error-rate");
    assert!(
        (errors - 20.0).abs() < 2.0,
        "faulty 5xx per second {errors}; expected about 20"
    );

    // A target with no traffic: the success rate is 0/0 (no series), not a pass.
    let idle = observe("idle").await;
    assert_eq!(idle[0].value, MetricValue::NoData, "{idle:?}");

    // A division by zero is +Inf or -Inf (NaN for 0/0) in the real server's answer, and no
    // threshold admits it: a min bound is not passed by +Inf, a max bound not by -Inf.
    for (query, range) in [
        (
            "vector(1) / vector(0)",
            ThresholdRange {
                min: Some(99.0),
                max: None,
            },
        ),
        (
            "vector(-1) / vector(0)",
            ThresholdRange {
                min: None,
                max: Some(500.0),
            },
        ),
        (
            "vector(0) / vector(0)",
            ThresholdRange {
                min: Some(99.0),
                max: None,
            },
        ),
    ] {
        match client.query(query).await {
            MetricValue::Value(v) => {
                assert!(!v.is_finite(), "{query}: {v}");
                assert!(!range.admits(v), "{query}: {v} passes {range:?}");
            }
            other => panic!("{query}: expected a value, got {other:?}"),
        }
    }

    // Several series and range vectors are refused by the real server's answers too.
    match client.query("osm_request_total").await {
        MetricValue::Error(e) => assert!(e.contains("series; expected one"), "{e}"),
        other => panic!("expected an error, got {other:?}"),
    }
    match client.query("osm_request_total[10s]").await {
        MetricValue::Error(e) => assert!(e.contains("range vector"), "{e}"),
        other => panic!("expected an error, got {other:?}"),
    }
    match client.query("sum(rate(osm_request_total[10s])").await {
        MetricValue::Error(e) => assert!(e.contains("answered HTTP 400 (bad_data)"), "{e}"),
        other => panic!("expected an error, got {other:?}"),
    }

    let url = prom.url.clone();
    prom.stop();
    let stopped = observe_metrics(
        &access,
        &canary,
        "podinfo",
        &templates,
        Some(&url),
        DEFAULT_METRIC_INTERVAL,
        DEFAULT_PROMETHEUS_CONCURRENCY,
    )
    .await;
    for o in &stopped {
        match &o.value {
            MetricValue::Error(e) => assert!(e.contains("cannot connect"), "{}: {e}", o.name),
            other => panic!(
                "{}: expected an error with Prometheus stopped, got {other:?}",
                o.name
            ),
        }
    }
}
