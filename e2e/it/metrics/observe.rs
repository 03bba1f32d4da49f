//! `observe_metrics`: which query goes to which address, and every way a metric can fail.

use std::time::Duration;

use sluice::core::observe::{MetricObservation, MetricValue};
use sluice::http_client::HttpClients;
use sluice::manifest::load::load_text;
use sluice::manifest::model::Canary;
use sluice::manifest::settings::Settings;
use sluice::manifest::settings::DEFAULT_PROMETHEUS_CONCURRENCY;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::metrics::prometheus::{Auth, PrometheusAccess};
use sluice::metrics::{observe_metrics, target_name, DEFAULT_METRIC_INTERVAL, NO_ADDRESS};

use crate::support::canary::podinfo;
use crate::support::metrics::{flagger_canary, Canned, Server};

const ONE: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"99.75"]}]}}"#;

const BUILTINS: &str = "      - name: request-success-rate
        thresholdRange: {min: 99}
        interval: 2m
      - name: request-duration
        thresholdRange: {max: 500}
";

async fn observe(
    canary: &Canary,
    templates: &TemplateIndex,
    default: Option<&str>,
) -> Vec<MetricObservation> {
    let target = target_name(canary).expect("targetRef canary");
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None);
    observe_metrics(
        &access,
        canary,
        target,
        templates,
        default,
        DEFAULT_METRIC_INTERVAL,
        DEFAULT_PROMETHEUS_CONCURRENCY,
    )
    .await
}

#[tokio::test]
async fn builtin_osm_metrics_query_the_repo_default_address() {
    let server = Server::start(vec![Canned::json(200, ONE)]).await;
    let canary = flagger_canary("osm", "", BUILTINS);
    let obs = observe(&canary, &TemplateIndex::new(), Some(&server.url())).await;
    assert_eq!(
        obs,
        vec![
            MetricObservation {
                name: "request-success-rate".into(),
                value: MetricValue::Value(99.75),
            },
            // Durations are whole milliseconds, as Flagger compares them.
            MetricObservation {
                name: "request-duration".into(),
                value: MetricValue::Value(99.0),
            },
        ]
    );
    let mut queries = server.queries();
    queries.sort();
    assert_eq!(queries.len(), 2);
    assert!(queries[0].starts_with("histogram_quantile(0.99, sum(rate(osm_request_duration_ms_bucket{destination_namespace=\"test\", destination_kind=\"Deployment\", destination_name=\"podinfo\"}[1m]))"), "{}", queries[0]);
    assert!(
        queries[1].starts_with("sum(rate(osm_request_total{"),
        "{}",
        queries[1]
    );
    assert_eq!(
        queries[1].matches("[2m]").count(),
        2,
        "the metric's own interval: {}",
        queries[1]
    );
}

#[tokio::test]
async fn no_address_anywhere_fails_every_metric() {
    let canary = flagger_canary("osm", "", BUILTINS);
    let obs = observe(&canary, &TemplateIndex::new(), None).await;
    assert_eq!(obs.len(), 2);
    for o in obs {
        assert_eq!(o.value, MetricValue::Error(NO_ADDRESS.into()), "{}", o.name);
    }
}

#[tokio::test]
async fn address_precedence_is_template_then_metrics_server_then_default() {
    let default = Server::start(vec![Canned::json(200, ONE)]).await;
    let canary_server = Server::start(vec![Canned::json(200, ONE)]).await;
    let template_server = Server::start(vec![Canned::json(200, ONE)]).await;
    let mut templates = TemplateIndex::new();
    let text = format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: with-address
  namespace: test
spec:
  provider:
    type: prometheus
    address: {}
  query: sum(rate(x{{ns=\"{{{{ namespace }}}}\"}}[{{{{ interval }}}}]))
---
apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: without-address
  namespace: test
spec:
  provider:
    type: prometheus
  query: sum(y{{target=\"{{{{ target }}}}\", v=\"{{{{ variables.v }}}}\"}})
",
        template_server.url()
    );
    assert!(templates.add_text("metrics.yaml", &text).is_empty());
    let metrics = "      - name: a
        templateRef: {name: with-address, namespace: test}
        thresholdRange: {max: 1}
      - name: b
        templateRef: {name: without-address, namespace: test}
        templateVariables: {v: x1}
        thresholdRange: {max: 1}
      - name: request-success-rate
        thresholdRange: {min: 99}
";
    let extra = format!("  metricsServer: {}\n", canary_server.url());
    let canary = flagger_canary("osm", &extra, metrics);
    let obs = observe(&canary, &templates, Some(&default.url())).await;
    assert!(
        obs.iter().all(|o| o.value == MetricValue::Value(99.75)),
        "{obs:?}"
    );
    assert!(default.requests().is_empty());
    let t = template_server.requests();
    assert_eq!(t.len(), 1);
    assert_eq!(
        t[0].query_param("query").as_deref(),
        Some("sum(rate(x{ns=\"test\"}[1m]))")
    );
    let mut c = canary_server.queries();
    c.sort();
    assert_eq!(c.len(), 2);
    assert!(c[0].starts_with("sum(rate(osm_request_total"), "{}", c[0]);
    assert_eq!(c[1], "sum(y{target=\"podinfo\", v=\"x1\"})");

    // Without metricsServer, the repo default answers the last two.
    let canary = flagger_canary("osm", "", metrics);
    observe(&canary, &templates, Some(&default.url())).await;
    assert_eq!(default.requests().len(), 2);
}

#[tokio::test]
async fn template_problems_fail_only_their_metric() {
    let server = Server::start(vec![Canned::json(200, ONE)]).await;
    let mut templates = TemplateIndex::new();
    let errors = templates.add_text(
        "t.yaml",
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: keptn
  namespace: test
spec:
  provider:
    type: keptn
  query: avg:x
---
apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: needs-var
  namespace: test
spec:
  provider:
    type: prometheus
  query: x{a=\"{{ variables.missing }}\"}
",
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    let metrics = "      - name: missing
        templateRef: {name: nope, namespace: test}
        thresholdRange: {max: 1}
      - name: unsupported
        templateRef: {name: keptn, namespace: test}
        thresholdRange: {max: 1}
      - name: novar
        templateRef: {name: needs-var, namespace: test}
        thresholdRange: {max: 1}
      - name: inline
        query: sum(z{ns=\"{{ namespace }}\"})
        thresholdRange: {max: 1}
";
    let canary = flagger_canary("osm", "", metrics);
    let obs = observe(&canary, &templates, Some(&server.url())).await;
    let value = |name: &str| {
        obs.iter()
            .find(|o| o.name == name)
            .map(|o| o.value.clone())
            .expect("observed")
    };
    let err = |name: &str| match value(name) {
        MetricValue::Error(e) => e,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(
        err("missing"),
        "metric template test/nope not found: no flagger.app/v1beta1 MetricTemplate with that namespace and name in the repo"
    );
    assert!(err("unsupported").contains("provider type \"keptn\" is not supported: "));
    assert_eq!(
        err("novar"),
        "metric template test/needs-var (t.yaml:11): spec.query: {{ variables.missing }} is used but templateVariables has no key \"missing\""
    );
    assert_eq!(value("inline"), MetricValue::Value(99.75));
    let sent = server.queries();
    assert_eq!(sent, vec!["sum(z{ns=\"test\"})".to_string()]);
}

#[tokio::test]
async fn providers_without_builtin_queries_are_errors_not_istio() {
    let server = Server::start(vec![Canned::json(200, ONE)]).await;
    let canary = flagger_canary("smi:v1alpha1", "", BUILTINS);
    let obs = observe(&canary, &TemplateIndex::new(), Some(&server.url())).await;
    for o in &obs {
        match &o.value {
            MetricValue::Error(e) => assert!(e.contains("does not say which mesh"), "{e}"),
            other => panic!("{}: {other:?}", o.name),
        }
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn gateway_api_canaries_query_the_application_histogram() {
    let server = Server::start(vec![Canned::json(200, ONE)]).await;
    let text = podinfo()
        .namespace("test")
        .provider("gatewayapi:v1")
        .target("  targetRef: {apiVersion: apps/v1, kind: Deployment, name: podinfo}\n")
        .service("    port: 9898\n    gatewayRefs: [{name: gw, namespace: gateway-system}]")
        .interval("30s")
        .threshold(Some(5))
        .yaml("    stepWeight: 10\n    maxWeight: 50\n    metrics:\n      - name: request-duration\n        thresholdRange: {max: 500}");
    let loaded = load_text("canary.yaml", &text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let obs = observe(
        &loaded.canaries[0],
        &TemplateIndex::new(),
        Some(&server.url()),
    )
    .await;
    assert_eq!(obs[0].value, MetricValue::Value(99.0));
    let q = server.requests()[0]
        .query_param("query")
        .unwrap_or_default();
    assert!(q.contains("http_request_duration_seconds_bucket{kubernetes_namespace=\"test\", kubernetes_pod_name=~\"podinfo-"), "{q}");
    assert!(q.ends_with("* 1000"), "{q}");
}

#[tokio::test]
async fn many_metrics_come_back_in_spec_order() {
    let server = Server::start(vec![Canned::json(200, ONE).delay(Duration::from_millis(50))]).await;
    let mut metrics = String::new();
    for i in 0..10 {
        metrics.push_str(&format!(
            "      - name: m{i}\n        query: vector({i})\n        thresholdRange: {{max: 1}}\n"
        ));
    }
    let canary = flagger_canary("osm", "", &metrics);
    let obs = observe(&canary, &TemplateIndex::new(), Some(&server.url())).await;
    let names: Vec<&str> = obs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, (0..10).map(|i| format!("m{i}")).collect::<Vec<_>>());
    assert_eq!(server.requests().len(), 10);
}
