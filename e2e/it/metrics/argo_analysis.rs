//! Argo Rollouts AnalysisTemplates measured against a real Prometheus (`/usr/bin/prometheus`):
//! a template read unchanged, its arguments substituted, each metric measured through
//! `sluice::metrics::analysis_run::measure` and judged by its conditions; the measurements
//! decide the metric's phase with `count` and `failureLimit` as Argo does, and each reads back
//! as a `Sluice-Check` trailer and replays to the same phase.

use std::collections::BTreeMap;

use sluice::core::argo_analysis::{assess, judged, replay, run_phase, Phase};
use sluice::core::trailer::check_trailer;
use sluice::http_client::HttpClients;
use sluice::metrics::analysis_run::{measure, MeasureInput};
use sluice::metrics::analysis_templates::{AnalysisIndex, TemplateRef};
use sluice::metrics::prometheus::{Auth, PrometheusAccess};
use sluice::secrets::{env_var, Secrets};

use crate::support::prometheus::{osm_exposition, Scraped};

const TEMPLATE: &str = "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: canary-health
  namespace: test
spec:
  args:
  - name: job
  - name: token
    valueFrom:
      secretKeyRef: {name: prom, key: job}
  metrics:
  - name: up
    interval: 10s
    count: 2
    successCondition: len(result) > 0 && result[0] == 1
    provider:
      prometheus:
        query: up{job=\"{{args.job}}\"}
  - name: too-many-up
    failureCondition: result[0] >= 1
    provider:
      prometheus:
        query: sum(up{job=\"{{args.token}}\"})
  - name: absent
    successCondition: result[0] == 1
    provider:
      prometheus:
        query: up{job=\"no-such-job\"}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analysis_template_passes_and_fails_on_real_prometheus() {
    let scraped = Scraped::start(osm_exposition).await;
    let mut index = AnalysisIndex::default();
    assert_eq!(index.add_text("analysis.yaml", TEMPLATE), vec![]);
    let reference = TemplateRef {
        name: "canary-health".into(),
        cluster: false,
    };
    let run = index
        .run("test", &[reference], &[("job".into(), "canary".into())])
        .expect("run");
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None)
        .with_secrets(Secrets::from_vars(BTreeMap::from([(
            env_var("test", "prom", "job"),
            "canary".to_string(),
        )])));
    let input = MeasureInput {
        access: &access,
        default_address: Some(&scraped.prom.url),
        namespace: "test",
    };
    let [up, failing, absent] = &run.metrics[..] else {
        panic!("{:?}", run.metrics)
    };

    let first = measure(&run, up, &input).await;
    assert_eq!(first.phase, Phase::Successful, "{first:?}");
    assert_eq!(
        assess(&up.rules, std::slice::from_ref(&first), false),
        Phase::Running
    );
    let second = measure(&run, up, &input).await;
    let ups = [first, second];
    assert_eq!(assess(&up.rules, &ups, false), Phase::Successful);
    assert_eq!(check_trailer(&judged("up", &ups[1])), "up=1 pass");
    assert_eq!(replay(&up.rules, &ups[1]), Some(Phase::Successful));

    let failed = measure(&run, failing, &input).await;
    assert_eq!(failed.phase, Phase::Failed, "{failed:?}");
    assert_eq!(
        assess(&failing.rules, std::slice::from_ref(&failed), false),
        Phase::Failed
    );
    assert_eq!(
        check_trailer(&judged("too-many-up", &failed)),
        "too-many-up=1 fail"
    );
    assert_eq!(replay(&failing.rules, &failed), Some(Phase::Failed));
    assert_eq!(
        run_phase(&[Phase::Successful, Phase::Failed]),
        Phase::Failed
    );

    // No series: result[0] cannot be evaluated, an Error (as Argo says it).
    let empty = measure(&run, absent, &input).await;
    assert_eq!(empty.phase, Phase::Error, "{empty:?}");
    assert!(
        empty.message.contains("no data returned"),
        "{}",
        empty.message
    );
    assert_eq!(assess(&absent.rules, &[empty], false), Phase::Running);
}

/// An AnalysisTemplate's datadog metric, measured against a fake Datadog at HTTP level that
/// answers `/api/v1/query` as Datadog documents it: Argo's v1 request (the query over the
/// metric's `interval` back from now, the keys as `DD-API-KEY` and `DD-APPLICATION-KEY`, read
/// from the Secret `datadog` mapped into sluice) and Argo's result (the last point of the
/// first series; `nil` without series).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datadog_metric_of_an_analysis_template_fake_datadog() {
    use crate::support::metrics::{Canned, Server};
    let body = r#"{"status":"ok","res_type":"time_series","query":"q","series":[{"metric":"m","pointlist":[[1577232000000,0.5],[1577318400000,0.99]]}]}"#;
    let empty = r#"{"status":"ok","res_type":"time_series","query":"q","series":[]}"#;
    let server = Server::start(vec![Canned::json(200, body), Canned::json(200, empty)]).await;
    let template = "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: dd, namespace: test}
spec:
  args: [{name: service}]
  metrics:
  - name: success
    successCondition: default(result, 0) >= 0.95
    provider:
      datadog:
        apiVersion: v1
        interval: 2m
        query: avg:requests.ok{service:{{args.service}}}
";
    let mut index = AnalysisIndex::default();
    assert_eq!(index.add_text("dd.yaml", template), vec![]);
    let reference = TemplateRef {
        name: "dd".into(),
        cluster: false,
    };
    let run = index
        .run("test", &[reference], &[("service".into(), "web".into())])
        .expect("run");
    let vars = BTreeMap::from([
        (
            env_var("test", "datadog", "address"),
            format!("http://{}", server.addr),
        ),
        (env_var("test", "datadog", "api-key"), "the-api-key".into()),
        (env_var("test", "datadog", "app-key"), "the-app-key".into()),
    ]);
    let clock = sluice::clock::Clock::named(Some("stepped@2026-01-01T00:00:00Z")).expect("clock");
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None)
        .with_secrets(Secrets::from_vars(vars))
        .with_clock(std::sync::Arc::new(clock));
    let input = MeasureInput {
        access: &access,
        default_address: None,
        namespace: "test",
    };
    let metric = &run.metrics[0];
    let m = measure(&run, metric, &input).await;
    assert_eq!(
        (m.phase, m.value.as_str()),
        (Phase::Successful, "0.99"),
        "{m:?}"
    );
    assert_eq!(check_trailer(&judged("success", &m)), "success=0.99 pass");
    assert_eq!(replay(&metric.rules, &m), Some(Phase::Successful));
    let requests = server.requests();
    let r = &requests[0];
    assert_eq!((r.method.as_str(), r.path()), ("GET", "/api/v1/query"));
    assert_eq!(r.header("DD-API-KEY"), Some("the-api-key"));
    assert_eq!(r.header("DD-APPLICATION-KEY"), Some("the-app-key"));
    assert_eq!(
        r.query_param("query").as_deref(),
        Some("avg:requests.ok{service:web}")
    );
    let now = 1_767_225_600u64;
    assert_eq!(r.query_param("to"), Some(now.to_string()));
    assert_eq!(r.query_param("from"), Some((now - 120).to_string()));

    // No series: Argo's result is nil, which default() turns into 0.
    let none = measure(&run, metric, &input).await;
    assert_eq!(
        (none.phase, none.value.as_str()),
        (Phase::Failed, "nil"),
        "{none:?}"
    );

    // Without the keys mapped, the measurement is an Error that says which to map.
    let bare = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None);
    let input = MeasureInput {
        access: &bare,
        ..input
    };
    let err = measure(&run, metric, &input).await;
    assert_eq!(err.phase, Phase::Error);
    assert!(
        err.message
            .contains("api-key and app-key of the Secret test/datadog"),
        "{err:?}"
    );
}

const DATADOG_V2_AND_WAVEFRONT: &str = "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: dd, namespace: test}
spec:
  metrics:
  - name: v2
    provider:
      datadog:
        apiVersion: v2
        queries: {a: 'avg:x{*}'}
        formula: a
  - name: wf
    provider:
      wavefront: {query: ts(x)}
";

/// Argo's datadog v2 fields are refused at their line, as are the providers sluice has no
/// client for, by name.
#[test]
fn datadog_v2_and_providers_without_a_client_are_refused_at_their_line() {
    let template = DATADOG_V2_AND_WAVEFRONT;
    let mut index = AnalysisIndex::default();
    let errors: Vec<String> = index
        .add_text("dd.yaml", template)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        errors.iter().any(|e| e
            .starts_with("dd.yaml:9: spec.metrics[0].provider.datadog.apiVersion: expected v1")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("dd.yaml:10: spec.metrics[0].provider.datadog.queries")),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.starts_with("dd.yaml:14: spec.metrics[1].provider.wavefront: provider \"wavefront\" is not supported")), "{errors:?}");
}
