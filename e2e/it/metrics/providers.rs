//! The vendor metric providers (datadog, newrelic, dynatrace, influxdb, graphite) through `observe_metrics`,
//! against local fakes that check the request each vendor's API documents (path, parameters,
//! credential headers) and answer in its documented JSON shape. Credentials come from the
//! mapped Secrets (environment variable or mounted file), never from the repo. No data, 500s,
//! timeouts and missing credentials are each that metric's failure.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice::core::observe::MetricValue;
use sluice::http_client::HttpClients;
use sluice::metrics::datadog::Datadog;
use sluice::metrics::dynatrace::Dynatrace;
use sluice::metrics::graphite::Graphite;
use sluice::metrics::influxdb::Influxdb;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::metrics::newrelic::NewRelic;
use sluice::metrics::observe_metrics;
use sluice::metrics::prometheus::{Auth, PrometheusAccess};
use sluice::secrets::Secrets;

use crate::support::metrics::{flagger_canary, observe_template, Canned, Server, ONE_METRIC};
use crate::support::vendors::{datadog_answer, influx_answer};

fn template(name: &str, provider: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: {name}
  namespace: test
spec:
  provider:
{provider}  query: QUERY({{{{ target }}}},{{{{ namespace }}}})
---
"
    )
}

async fn observe_one(provider: &str, vars: &[(&str, &str)]) -> MetricValue {
    observe_template(&template("t", provider), vars).await
}

const DD_KEYS: [(&str, &str); 2] = [
    ("SLUICE_SECRET_TEST__DD_KEYS__DATADOG_API_KEY", "api-key"),
    (
        "SLUICE_SECRET_TEST__DD_KEYS__DATADOG_APPLICATION_KEY",
        "app-key",
    ),
];

fn datadog(url: &str) -> String {
    format!("    type: datadog\n    address: {url}\n    secretRef: {{name: dd-keys}}\n")
}

#[tokio::test]
async fn datadog_sends_both_keys_over_ten_intervals_and_reads_the_oldest_point() {
    let server = Server::start(vec![Canned::json(200, &datadog_answer(0.25))]).await;
    let value = observe_one(&datadog(&server.url()), &DD_KEYS).await;
    assert_eq!(value, MetricValue::Value(0.25));
    let requests = server.requests();
    let [r] = requests.as_slice() else {
        panic!("{requests:?}")
    };
    assert_eq!((r.method.as_str(), r.path()), ("GET", "/api/v1/query"));
    assert_eq!(
        r.query_param("query").as_deref(),
        Some("QUERY(podinfo,test)")
    );
    assert_eq!(r.header("DD-API-KEY"), Some("api-key"));
    assert_eq!(r.header("DD-APPLICATION-KEY"), Some("app-key"));
    let at = |p: &str| -> u64 { r.query_param(p).expect(p).parse().expect("unix seconds") };
    // Flagger: from = now - 10 × the metric's interval (1m).
    assert_eq!(at("to") - at("from"), 600);
}

#[tokio::test]
async fn newrelic_sends_nrql_since_the_interval_to_the_accounts_query_api() {
    let server = Server::start(vec![Canned::json(200, r#"{"results":[{"result":0.5}]}"#)]).await;
    let provider = format!(
        "    type: newrelic\n    address: {}\n    secretRef: {{name: nr}}\n",
        server.url()
    );
    let vars = [
        ("SLUICE_SECRET_TEST__NR__NEWRELIC_ACCOUNT_ID", "51312"),
        ("SLUICE_SECRET_TEST__NR__NEWRELIC_QUERY_KEY", "query-key"),
    ];
    assert_eq!(observe_one(&provider, &vars).await, MetricValue::Value(0.5));
    let requests = server.requests();
    let [r] = requests.as_slice() else {
        panic!("{requests:?}")
    };
    assert_eq!(r.path(), "/v1/accounts/51312/query");
    assert_eq!(
        r.query_param("nrql").as_deref(),
        Some("QUERY(podinfo,test) SINCE 60 seconds ago")
    );
    assert_eq!(r.header("X-Query-Key"), Some("query-key"));
}

#[tokio::test]
async fn dynatrace_sends_the_selector_over_ten_intervals_with_the_api_token() {
    let answer = r#"{"totalCount":1,"nextPageKey":null,"resolution":"Inf","result":[{"metricId":"builtin:service.errors.total.rate","dataPointCountRatio":1.0E-6,"dimensionCountRatio":1.0E-5,"data":[{"dimensions":["SERVICE-1"],"dimensionMap":{"dt.entity.service":"SERVICE-1"},"timestamps":[1700000000000],"values":[0.125]}]}]}"#;
    let server = Server::start(vec![Canned::json(200, answer)]).await;
    let provider = format!(
        "    type: dynatrace\n    address: {}/e/abc\n    secretRef: {{name: dt}}\n",
        server.url()
    );
    let vars = [("SLUICE_SECRET_TEST__DT__DYNATRACE_TOKEN", "dt0c01.token")];
    assert_eq!(
        observe_one(&provider, &vars).await,
        MetricValue::Value(0.125)
    );
    let requests = server.requests();
    let [r] = requests.as_slice() else {
        panic!("{requests:?}")
    };
    assert_eq!(r.path(), "/e/abc/api/v2/metrics/query");
    assert_eq!(
        r.query_param("metricSelector").as_deref(),
        Some("QUERY(podinfo,test)")
    );
    assert_eq!(r.query_param("resolution").as_deref(), Some("Inf"));
    assert_eq!(r.header("Authorization"), Some("Api-Token dt0c01.token"));
    let at = |p: &str| -> u64 { r.query_param(p).expect(p).parse().expect("unix ms") };
    // Flagger: from = now - 10 × the metric's interval (1m), in milliseconds.
    assert_eq!(at("to") - at("from"), 600_000);
}

#[tokio::test]
async fn influxdb_posts_flux_with_the_token_and_org_and_reads_the_first_value() {
    let server =
        Server::start(vec![Canned::new(200, influx_answer("0.4"))
            .header("Content-Type", "text/csv; charset=utf-8")])
        .await;
    let provider = format!(
        "    type: influxdb\n    address: {}\n    secretRef: {{name: influx}}\n",
        server.url()
    );
    let vars = [
        ("SLUICE_SECRET_TEST__INFLUX__TOKEN", "my-token"),
        ("SLUICE_SECRET_TEST__INFLUX__ORG", "my-org"),
    ];
    assert_eq!(observe_one(&provider, &vars).await, MetricValue::Value(0.4));
    let requests = server.requests();
    let [r] = requests.as_slice() else {
        panic!("{requests:?}")
    };
    assert_eq!((r.method.as_str(), r.path()), ("POST", "/api/v2/query"));
    assert_eq!(r.query_param("org").as_deref(), Some("my-org"));
    assert_eq!(r.header("Authorization"), Some("Token my-token"));
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(
        r.json(),
        serde_json::json!({
            "query": "QUERY(podinfo,test)",
            "type": "flux",
            "dialect": {
                "annotations": ["datatype", "group", "default"],
                "delimiter": ",",
                "header": true,
            },
        })
    );
}

#[tokio::test]
async fn graphite_renders_json_with_basic_auth_from_a_mounted_secret() {
    let answer = r#"[{"target":"a","tags":{},"datapoints":[[0.5,1700000000],[0.75,1700000060],[null,1700000120]]}]"#;
    let server = Server::start(vec![Canned::json(200, answer)]).await;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("test/graphite-auth");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::write(keys.join("username"), "admin\n").unwrap();
    std::fs::write(keys.join("password"), "pw").unwrap();
    let mut templates = TemplateIndex::new();
    let errors = templates.add_text(
        "t.yaml",
        &format!(
            "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata: {{name: t, namespace: test}}
spec:
  provider:
    type: graphite
    address: {}/graphite
    secretRef: {{name: graphite-auth}}
  query: |
    target=summarize(app.{{{{ target }}}}.errors, '{{{{ interval }}}}', 'sum')
    &from=-{{{{ interval }}}}
",
            server.url()
        ),
    );
    assert!(errors.is_empty(), "{errors:?}");
    let mut vars = BTreeMap::new();
    vars.insert(
        "SLUICE_SECRETS_DIR".to_string(),
        dir.path().display().to_string(),
    );
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None)
        .with_secrets(Secrets::from_vars(vars));
    let canary = flagger_canary("osm", "", ONE_METRIC);
    let obs = observe_metrics(
        &access,
        &canary,
        "podinfo",
        &templates,
        None,
        Duration::from_secs(60),
        1,
    )
    .await;
    assert_eq!(
        obs[0].value,
        MetricValue::Value(0.75),
        "the last non-null point"
    );
    let requests = server.requests();
    let r = &requests[0];
    assert_eq!(r.path(), "/graphite/render");
    assert_eq!(r.query_param("format").as_deref(), Some("json"));
    assert_eq!(
        r.query_param("target").as_deref(),
        Some("summarize(app.podinfo.errors, '1m', 'sum') ")
    );
    assert_eq!(r.query_param("from").as_deref(), Some("-1m"));
    // Parameters sorted by name, as Go's url.Values.Encode writes them.
    let names: Vec<&str> = r
        .target
        .split_once('?')
        .expect("query")
        .1
        .split('&')
        .filter_map(|p| p.split_once('=').map(|(k, _)| k))
        .collect();
    assert_eq!(names, ["format", "from", "target"]);
    // admin:pw
    assert_eq!(r.header("Authorization"), Some("Basic YWRtaW46cHc="));
}

/// What a case expects of the observed value.
type Check = fn(&MetricValue) -> bool;

#[tokio::test]
async fn no_data_nan_and_server_errors_are_failed_checks() {
    let cases: Vec<(String, Canned, Check)> = vec![
        (
            datadog("URL"),
            Canned::json(200, r#"{"status":"ok","series":[]}"#),
            |v| *v == MetricValue::NoData,
        ),
        (
            datadog("URL"),
            Canned::json(
                200,
                r#"{"status":"ok","series":[{"pointlist":[[1,null]]}]}"#,
            ),
            |v| *v == MetricValue::NoData,
        ),
        (
            datadog("URL"),
            Canned::json(500, r#"{"errors":["Internal Server Error"]}"#),
            |v| matches!(v, MetricValue::Error(e) if e.starts_with("Datadog http://") && e.ends_with("answered HTTP 500")),
        ),
        (
            datadog("URL"),
            Canned::json(403, r#"{"errors":["Forbidden"]}"#),
            |v| matches!(v, MetricValue::Error(e) if e.contains("HTTP 403")),
        ),
        (
            "    type: graphite\n    address: URL\n".into(),
            Canned::json(200, r#"[{"target":"a","datapoints":[[null,1],[null,2]]}]"#),
            |v| *v == MetricValue::NoData,
        ),
        (
            // The core fails NaN against any threshold (`decide`: detail "NaN").
            "    type: graphite\n    address: URL\n".into(),
            Canned::json(200, r#"[{"target":"a","datapoints":[["NaN",1]]}]"#),
            |v| matches!(v, MetricValue::Value(x) if x.is_nan()),
        ),
        (
            "    type: graphite\n    address: URL\n".into(),
            Canned::new(502, "Bad Gateway"),
            |v| matches!(v, MetricValue::Error(e) if e.ends_with("answered HTTP 502")),
        ),
        (
            "    type: newrelic\n    address: URL\n    secretRef: {name: nr}\n".into(),
            Canned::json(200, r#"{"results":[]}"#),
            |v| *v == MetricValue::NoData,
        ),
        (
            "    type: newrelic\n    address: URL\n    secretRef: {name: nr}\n".into(),
            Canned::json(200, r#"{"results":[{"result":null}]}"#),
            |v| *v == MetricValue::NoData,
        ),
        (
            "    type: newrelic\n    address: URL\n    secretRef: {name: nr}\n".into(),
            Canned::json(500, "{}"),
            |v| matches!(v, MetricValue::Error(e) if e.starts_with("New Relic http://") && e.contains("HTTP 500")),
        ),
        (
            "    type: dynatrace\n    address: URL\n    secretRef: {name: dt}\n".into(),
            Canned::json(
                200,
                r#"{"totalCount":0,"result":[{"metricId":"m","data":[]}]}"#,
            ),
            |v| *v == MetricValue::NoData,
        ),
        (
            "    type: dynatrace\n    address: URL\n    secretRef: {name: dt}\n".into(),
            Canned::json(
                200,
                r#"{"result":[{"metricId":"m","data":[{"values":[null]}]}]}"#,
            ),
            |v| *v == MetricValue::NoData,
        ),
        (
            "    type: dynatrace\n    address: URL\n    secretRef: {name: dt}\n".into(),
            Canned::json(500, r#"{"error":{"code":500,"message":"oops"}}"#),
            |v| matches!(v, MetricValue::Error(e) if e.starts_with("Dynatrace http://") && e.contains("HTTP 500")),
        ),
        (
            "    type: influxdb\n    address: URL\n".into(),
            Canned::new(200, "\r\n"),
            |v| *v == MetricValue::NoData,
        ),
        (
            "    type: influxdb\n    address: URL\n".into(),
            Canned::new(200, influx_answer("NaN")),
            |v| matches!(v, MetricValue::Value(x) if x.is_nan()),
        ),
        (
            "    type: influxdb\n    address: URL\n".into(),
            Canned::json(500, r#"{"code":"internal error","message":"boom"}"#),
            |v| matches!(v, MetricValue::Error(e) if e.starts_with("InfluxDB http://") && e.contains("HTTP 500")),
        ),
    ];
    let mut vars = DD_KEYS.to_vec();
    vars.push(("SLUICE_SECRET_TEST__DT__DYNATRACE_TOKEN", "t"));
    vars.push(("SLUICE_SECRET_TEST__NR__NEWRELIC_ACCOUNT_ID", "1"));
    vars.push(("SLUICE_SECRET_TEST__NR__NEWRELIC_QUERY_KEY", "k"));
    for (provider, answer, ok) in cases {
        let server = Server::start(vec![answer.clone()]).await;
        let value = observe_one(&provider.replace("URL", &server.url()), &vars).await;
        assert!(ok(&value), "{provider} {answer:?}: {value:?}");
        assert_eq!(server.requests().len(), 1, "{provider}");
    }
}

#[tokio::test]
async fn a_missing_secret_fails_the_metric_naming_what_to_set_and_sends_nothing() {
    let server = Server::start(vec![Canned::json(200, &datadog_answer(0.1))]).await;
    let only_api_key = [DD_KEYS[0]];
    let value = observe_one(&datadog(&server.url()), &only_api_key).await;
    let MetricValue::Error(e) = value else {
        panic!("{value:?}")
    };
    assert!(
        e.starts_with("metric template test/t (t.yaml:1): spec.provider.secretRef: Secret test/dd-keys key \"datadog_application_key\" is not mapped into sluice: set SLUICE_SECRET_TEST__DD_KEYS__DATADOG_APPLICATION_KEY or mount the Secret at "),
        "{e}"
    );
    assert!(!e.contains("api-key"), "{e}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_slow_vendor_times_out_as_a_failed_check() {
    let slow = Canned::json(200, &datadog_answer(0.1)).delay(Duration::from_secs(3));
    let server = Server::start(vec![slow]).await;
    let client = HttpClients::new().expect("clients");
    let client = client.get(false);
    let timeout = Duration::from_millis(200);
    let mut d = Datadog::new(
        &server.url(),
        "a".into(),
        "b".into(),
        Duration::from_secs(60),
    )
    .unwrap();
    d.timeout = timeout;
    let mut n = NewRelic::new(&server.url(), "1", "k".into(), Duration::from_secs(60)).unwrap();
    n.timeout = timeout;
    let mut g = Graphite::new(&server.url(), None).unwrap();
    g.timeout = timeout;
    let mut i = Influxdb::new(&server.url(), None).unwrap();
    i.timeout = timeout;
    let mut dt = Dynatrace::new(&server.url(), "t".into(), Duration::from_secs(60)).unwrap();
    dt.timeout = timeout;
    let values = [
        d.query(client, "q", 1_700_000_000).await,
        n.query(client, "q").await,
        g.query(client, "target=x").await,
        dt.query(client, "m", 1_700_000_000_000).await,
        i.query(client, "from(bucket: \"b\")").await,
    ];
    for (vendor, value) in ["Datadog", "New Relic", "Graphite", "Dynatrace", "InfluxDB"]
        .iter()
        .zip(values)
    {
        match value {
            MetricValue::Error(e) => assert!(
                e.starts_with(vendor) && e.ends_with("timed out after 200ms"),
                "{e}"
            ),
            other => panic!("{vendor}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_prometheus_templates_secret_ref_sends_its_token_or_basic_auth() {
    let answer = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.5"]}]}}"#;
    let server = Server::start(vec![Canned::json(200, answer)]).await;
    let provider = format!(
        "    type: prometheus\n    address: {}\n    secretRef: {{name: prom}}\n",
        server.url()
    );
    let token = [("SLUICE_SECRET_TEST__PROM__TOKEN", "t0k")];
    assert_eq!(
        observe_one(&provider, &token).await,
        MetricValue::Value(0.5)
    );
    let basic = [
        ("SLUICE_SECRET_TEST__PROM__USERNAME", "admin"),
        ("SLUICE_SECRET_TEST__PROM__PASSWORD", "pw"),
    ];
    assert_eq!(
        observe_one(&provider, &basic).await,
        MetricValue::Value(0.5)
    );
    let sent: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.header("Authorization").map(str::to_string))
        .collect();
    assert_eq!(
        sent,
        [Some("Bearer t0k".into()), Some("Basic YWRtaW46cHc=".into())]
    );
    let MetricValue::Error(e) = observe_one(&provider, &[]).await else {
        panic!("no credentials must fail")
    };
    assert!(
        e.contains("SLUICE_SECRET_TEST__PROM__USERNAME") && e.contains("or map key \"token\""),
        "{e}"
    );
    assert_eq!(
        server.requests().len(),
        2,
        "nothing sent without credentials"
    );
}
