//! The judge's metric sources beyond a PromQL template: a `builtin` (the canary's mesh or
//! ingress queries, rendered for the canary and for the primary) and a `templateRef` to a
//! Flagger MetricTemplate whose provider answers with a series (Prometheus, Datadog,
//! Graphite, CloudWatch, New Relic, Dynatrace). `sluice validate` refuses a builtin on a provider without judge built-ins and a
//! template of a provider that gives one value, at the field's file and line. The range
//! queries run against HTTP fakes of the documented APIs (`*_api_fake`), the fakes of
//! `e2e/it/metrics/`.

use std::time::Duration;

use sluice::core::judge::{Direction, JudgeMetric, JudgeQuery, JudgeSpec, MetricRule, Thresholds};
use sluice::core::judged::JudgeObservation;
use sluice::core::model::BuiltinMetric;
use sluice::metrics::judge_series::{observe, Fetch};
use sluice::metrics::metric_templates::TemplateIndex;

use crate::support::canary::{load_one, native_frontend, podinfo, repo_errors};
use crate::support::judge::judge_object;
use crate::support::metrics::{
    access_with_env, flagger_canary, Canned, Recorded, Server, ONE_METRIC,
};
use crate::support::vendors::{expected_authorization, AWS_ENV, CW_QUERY};

/// The 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{needle:?} not in\n{text}"))
}

/// A native route-only canary (namespace `shop`) with `provider` and a judge of `metrics`.
fn native(provider: &str, metrics: &str) -> String {
    native_frontend(
        "    apiVersion: projectcontour.io/v1\n    kind: HTTPProxy\n",
        &[10, 50],
    )
    .replace("spec:\n", &format!("spec:\n  provider: {provider}\n"))
    .replace(
        "    steps:\n",
        &format!("    judge:\n      thresholds: {{pass: 90, marginal: 50}}\n      metrics:\n{metrics}    steps:\n"),
    )
}

const BUILTINS: &str = "        - name: errors
          builtin: request-success-rate
        - name: latency
          builtin: request-duration
";

#[test]
fn a_builtin_judge_metric_loads_on_a_provider_with_judge_builtins_with_its_direction() {
    let canary = load_one(&[("canary.yaml", &native("istio", BUILTINS))]);
    let judge = canary.analysis.judge.expect("analysis.judge");
    let sources: Vec<_> = judge
        .metrics
        .iter()
        .map(|m| (m.query.clone(), m.rule.direction))
        .collect();
    assert_eq!(
        sources,
        [
            (
                Some(JudgeQuery::Builtin(BuiltinMetric::RequestSuccessRate)),
                Direction::Decrease
            ),
            (
                Some(JudgeQuery::Builtin(BuiltinMetric::RequestDuration)),
                Direction::Increase
            ),
        ]
    );
    // A direction given is kept.
    let either = BUILTINS.replace(
        "builtin: request-duration\n",
        "builtin: request-duration\n          direction: either\n",
    );
    let canary = load_one(&[("canary.yaml", &native("linkerd", &either))]);
    assert_eq!(
        canary.analysis.judge.unwrap().metrics[1].rule.direction,
        Direction::Either
    );
}

#[test]
fn validate_refuses_a_builtin_judge_metric_on_a_provider_without_judge_builtins() {
    let supported = sluice::metrics::judge_builtin::supported().join(", ");
    for provider in ["knative", "apisix", "skipper"] {
        let text = native(provider, BUILTINS);
        let mut errors = repo_errors(&[("canary.yaml", &text)]);
        errors.sort();
        let line = line_of(&text, "builtin: request-success-rate");
        assert_eq!(errors.len(), 2, "{errors:?}");
        let expected = format!(
            "canary.yaml:{line}: spec.analysis.judge.metrics[0].builtin: built-in judge metric request-success-rate: "
        );
        assert!(errors[0].starts_with(&expected), "{errors:?}");
        assert!(
            errors[0].ends_with(&format!(
                "built-in judge metrics exist for providers {supported}"
            )),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with(&format!(
                "canary.yaml:{}: spec.analysis.judge.metrics[1].builtin: built-in judge metric request-duration: ",
                line + 2
            )),
            "{errors:?}"
        );
    }
    let text = native("istio", &BUILTINS.replace("request-duration", "p99"));
    let errors = repo_errors(&[("canary.yaml", &text)]);
    assert_eq!(
        errors,
        [format!(
            "canary.yaml:{}: spec.analysis.judge.metrics[1].builtin: expected request-success-rate or request-duration, found \"p99\"",
            line_of(&text, "builtin: p99")
        )]
    );
    let both = native(
        "istio",
        "        - name: errors\n          builtin: request-success-rate\n          query: up\n",
    );
    let errors = repo_errors(&[("canary.yaml", &both)]);
    assert_eq!(
        errors,
        [format!(
            "canary.yaml:{}: spec.analysis.judge.metrics[0].builtin: expected one of query, builtin and templateRef, found query and builtin",
            line_of(&both, "builtin: request-success-rate")
        )]
    );
}

/// A MetricTemplate `prod/<name>` of `provider`, with what that provider needs.
fn template(name: &str, provider: &str) -> String {
    let connection = match provider {
        "cloudwatch" => "    region: us-east-1\n",
        "prometheus" | "graphite" | "influxdb" => "    address: http://127.0.0.1:1\n",
        _ => "    address: http://127.0.0.1:1\n    secretRef: {name: keys}\n",
    };
    format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: {name}
  namespace: prod
spec:
  provider:
    type: {provider}
{connection}  query: QUERY({{{{ target }}}})
"
    )
}

/// The Judge `prod/latency`: a templated metric and a built-in one.
fn judge() -> String {
    judge_object(
        "  name: latency\n  namespace: prod\n",
        "{pass: 95, marginal: 75}",
        "  metrics:
    - name: p99
      templateRef: {name: nr}
    - name: errors
      builtin: request-success-rate
",
    )
}

fn flagger(provider: &str) -> String {
    podinfo()
        .provider(provider)
        .metadata("  annotations:\n    sluice.dev/judge: latency\n")
        .yaml("    stepWeight: 10\n    maxWeight: 30")
}

#[test]
fn validate_refuses_a_judge_template_whose_provider_gives_one_value_at_the_judges_field() {
    for refused in ["influxdb", "splunk"] {
        let errors = repo_errors(&[
            ("canary.yaml", &flagger("istio")),
            ("judge.yaml", &judge()),
            ("templates.yaml", &template("nr", refused)),
        ]);
        assert_eq!(
            errors,
            [format!(
                "judge.yaml:10: spec.metrics[0].templateRef: MetricTemplate prod/nr (templates.yaml:1): the judge needs a series; {refused} gives one value; use prometheus, datadog, graphite, cloudwatch, newrelic, dynatrace (judging canary prod/podinfo, canary.yaml:1)"
            )],
        );
    }
    for accepted in [
        "prometheus",
        "datadog",
        "graphite",
        "cloudwatch",
        "newrelic",
        "dynatrace",
    ] {
        let canary = load_one(&[
            ("canary.yaml", &flagger("istio")),
            ("judge.yaml", &judge()),
            ("templates.yaml", &template("nr", accepted)),
        ]);
        let judge = canary.analysis.judge.expect("the annotation's judge");
        assert_eq!(
            judge.metrics[0].query,
            Some(JudgeQuery::Template {
                name: "nr".into(),
                namespace: None
            })
        );
    }
    // The Judge's builtin is checked against the canary's provider, and a missing template
    // is named.
    let errors = repo_errors(&[
        ("canary.yaml", &flagger("istio")),
        ("judge.yaml", &judge().replace("{name: nr}", "{name: gone}")),
    ]);
    assert_eq!(
        errors,
        ["judge.yaml:10: spec.metrics[0].templateRef: no MetricTemplate prod/gone in the repo (judging canary prod/podinfo, canary.yaml:1)"]
    );
}

fn spec(query: JudgeQuery) -> JudgeSpec {
    JudgeSpec {
        metrics: vec![JudgeMetric {
            name: "m".into(),
            query: Some(query),
            group: "default".into(),
            muted: false,
            rule: MetricRule::default(),
        }],
        group_weights: Vec::new(),
        thresholds: Thresholds {
            pass: 95.0,
            marginal: 75.0,
        },
        window: Some(Duration::from_secs(300)),
        step: Some(Duration::from_secs(30)),
        min_samples: sluice::core::judge::config::DEFAULT_MIN_SAMPLES,
    }
}

/// Fetches `spec`'s series for a Flagger canary of `provider` (target `podinfo`, namespace
/// `test`), with `templates` and the Prometheus at `prometheus`.
async fn fetch(
    provider: &str,
    spec: &JudgeSpec,
    templates: &TemplateIndex,
    env: &[(&str, &str)],
    prometheus: Option<&str>,
) -> JudgeObservation {
    let access = access_with_env(env);
    let canary = flagger_canary(provider, "", ONE_METRIC);
    let fetch = Fetch {
        access: &access,
        templates,
        default_address: prometheus,
        now: jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        concurrency: 2,
    };
    observe(&fetch, &canary, spec, "podinfo").await
}

/// The series of the one metric of an observation: (canary, primary).
fn pair(observed: JudgeObservation) -> (Vec<f64>, Vec<f64>) {
    match observed {
        JudgeObservation::Series(s) => (s[0].canary.clone(), s[0].baseline.clone()),
        other => panic!("{other:?}"),
    }
}

/// A Prometheus `query_range` answer of one series.
fn matrix(values: &[f64]) -> String {
    let points: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("[{}, \"{v}\"]", 1_699_999_700 + 30 * i))
        .collect();
    format!(
        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{}},"values":[{}]}}]}}}}"#,
        points.join(",")
    )
}

fn is_primary(r: &Recorded, param: &str) -> bool {
    r.query_param(param).unwrap_or_default().contains("primary")
}

/// A fake vendor API that answers `answer(primary)` to a request whose `param` names the
/// primary and `answer(canary)` to the canary's.
async fn split_server(
    param: &'static str,
    canary: &'static str,
    primary: &'static str,
    answer: impl Fn(&str) -> Canned + Send + Sync + 'static,
) -> Server {
    Server::start_routed(move |r| {
        answer(if is_primary(r, param) {
            primary
        } else {
            canary
        })
    })
    .await
}

/// The requests `server` received, the canary's (no `primary` in `param`) first.
fn canary_first(server: &Server, param: &str) -> Vec<Recorded> {
    let mut requests = server.requests();
    requests.sort_by_key(|r| is_primary(r, param));
    requests
}

/// Asserts `series` is `[first, NaN, last]`: the answer's null is a missing value.
fn assert_gap(series: &[f64], first: f64, last: f64) {
    assert_eq!((series[0], series[2], series.len()), (first, last, 3));
    assert!(series[1].is_nan(), "null is a missing value");
}

/// The (query, from, to) of each request `server` received, canary first: `params` names
/// those three query parameters; `check` asserts what every request carries.
fn sent_windows(
    server: &Server,
    params: [&str; 3],
    check: impl Fn(&Recorded),
) -> Vec<(String, String, String)> {
    canary_first(server, params[0])
        .iter()
        .map(|r| {
            check(r);
            let [query, from, to] = params.map(|p| r.query_param(p).unwrap());
            (query, from, to)
        })
        .collect()
}

/// A query with the judge's window (from, to) in seconds.
fn in_window(query: &str) -> (String, String, String) {
    (
        query.to_string(),
        "1699999700".to_string(),
        "1700000000".to_string(),
    )
}

#[tokio::test]
async fn a_builtin_judge_metric_queries_the_canary_and_the_primary_prometheus_api_fake() {
    let server = Server::start_routed(|r| {
        let values: &[f64] = if is_primary(r, "query") {
            &[100.0, 101.0]
        } else {
            &[130.0, 131.0, 132.0]
        };
        Canned::json(200, &matrix(values))
    })
    .await;
    let spec = spec(JudgeQuery::Builtin(BuiltinMetric::RequestDuration));
    let url = server.url();
    let observed = fetch("linkerd", &spec, &TemplateIndex::new(), &[], Some(&url)).await;
    assert_eq!(
        pair(observed),
        (vec![130.0, 131.0, 132.0], vec![100.0, 101.0])
    );
    let queries: Vec<String> = canary_first(&server, "query")
        .iter()
        .map(|r| {
            assert_eq!(r.path(), "/api/v1/query_range");
            assert_eq!(r.query_param("start").as_deref(), Some("1699999700.000"));
            assert_eq!(r.query_param("end").as_deref(), Some("1700000000.000"));
            assert_eq!(r.query_param("step").as_deref(), Some("30"));
            r.query_param("query").unwrap()
        })
        .collect();
    assert_eq!(
        queries,
        [
            r#"histogram_quantile(0.99, sum(rate(response_latency_ms_bucket{namespace="test", deployment=~"podinfo", direction="inbound"}[1m])) by (le))"#,
            r#"histogram_quantile(0.99, sum(rate(response_latency_ms_bucket{namespace="test", deployment=~"podinfo-primary", direction="inbound"}[1m])) by (le))"#,
        ]
    );
    // A provider without judge built-ins fails the observation, naming why.
    let observed = fetch(
        "smi:v1alpha3",
        &spec,
        &TemplateIndex::new(),
        &[],
        Some(&url),
    )
    .await;
    match observed {
        JudgeObservation::Error(e) => {
            assert!(e.contains("built-in judge metric request-duration"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

fn templates(text: &str) -> TemplateIndex {
    let mut templates = TemplateIndex::new();
    let errors = templates.add_text("t.yaml", text);
    assert!(errors.is_empty(), "{errors:?}");
    templates
}

/// The series of MetricTemplate `t` (of `namespace`, else the canary's) of `text`, for a
/// Flagger istio canary with `env`: (canary, primary).
async fn template_series(
    text: &str,
    namespace: Option<&str>,
    env: &[(&str, &str)],
) -> (Vec<f64>, Vec<f64>) {
    let spec = spec(JudgeQuery::Template {
        name: "t".into(),
        namespace: namespace.map(Into::into),
    });
    pair(fetch("istio", &spec, &templates(text), env, None).await)
}

/// The `provider:` lines of a MetricTemplate of `kind` at `server`, keyed by Secret `secret`.
fn keyed_provider(kind: &str, server: &Server, secret: &str) -> String {
    format!(
        "    type: {kind}\n    address: {}\n    secretRef: {{name: {secret}}}\n",
        server.url()
    )
}

/// Asserts template `t` of `text` gives the primary `[1.0, 1.25]` and the canary
/// `[2.0, NaN, 2.5]`, the answers of the cloudwatch, newrelic and dynatrace fakes below.
async fn assert_series_of_two_and_three(text: &str, env: &[(&str, &str)]) {
    let (canary, primary) = template_series(text, None, env).await;
    assert_eq!(primary, [1.0, 1.25]);
    assert_gap(&canary, 2.0, 2.5);
}

/// A MetricTemplate `test/t` of `provider` whose query is `query`.
fn template_of(provider: &str, query: &str) -> String {
    vendor_template(provider).replace("QUERY({{ target }})", query)
}

fn vendor_template(provider: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata: {{name: t, namespace: test}}
spec:
  provider:
{provider}  query: QUERY({{{{ target }}}})
"
    )
}

#[tokio::test]
async fn a_datadog_template_gives_the_judge_every_point_of_the_window_datadog_api_fake() {
    let server = split_server("query", "[[1,2.0],[2,2.5]]", "[[1,1.0],[2,null],[3,1.5]]", |points| {
        Canned::json(
            200,
            &format!(r#"{{"status":"ok","res_type":"time_series","series":[{{"metric":"m","pointlist":{points}}}]}}"#),
        )
    })
    .await;
    let provider = keyed_provider("datadog", &server, "dd-keys");
    let env = [
        ("SLUICE_SECRET_TEST__DD_KEYS__DATADOG_API_KEY", "api-key"),
        (
            "SLUICE_SECRET_TEST__DD_KEYS__DATADOG_APPLICATION_KEY",
            "app-key",
        ),
    ];
    let (canary, primary) = template_series(&vendor_template(&provider), None, &env).await;
    assert_eq!(canary, [2.0, 2.5]);
    assert_gap(&primary, 1.0, 1.5);
    let sent = sent_windows(&server, ["query", "from", "to"], |r| {
        assert_eq!(r.path(), "/api/v1/query");
        assert_eq!(r.header("DD-API-KEY"), Some("api-key"));
        assert_eq!(r.header("DD-APPLICATION-KEY"), Some("app-key"));
    });
    assert_eq!(
        sent,
        [
            in_window("QUERY(podinfo)"),
            in_window("QUERY(podinfo-primary)")
        ]
    );
}

#[tokio::test]
async fn a_graphite_template_gives_the_judge_the_first_target_over_the_window_graphite_api_fake() {
    let server = split_server(
        "target",
        "[[3.0,1],[null,2],[\"3.5\",3]]",
        "[[1.0,1],[1.25,2]]",
        |points| {
            Canned::json(
                200,
                &format!(r#"[{{"target":"a","tags":{{}},"datapoints":{points}}}]"#),
            )
        },
    )
    .await;
    let provider = format!("    type: graphite\n    address: {}\n", server.url());
    let query_template = template_of(&provider, "target=app.{{ target }}.latency&from=-10min");
    let (canary, primary) = template_series(&query_template, Some("test"), &[]).await;
    assert_eq!(primary, [1.0, 1.25]);
    assert_gap(&canary, 3.0, 3.5);
    let sent = sent_windows(&server, ["target", "from", "until"], |r| {
        assert_eq!(r.path(), "/render");
        assert_eq!(r.query_param("format").as_deref(), Some("json"));
    });
    assert_eq!(
        sent,
        [
            in_window("app.podinfo.latency"),
            in_window("app.podinfo-primary.latency")
        ],
        "the judge's window replaces the query's from"
    );
}

#[tokio::test]
async fn a_cloudwatch_template_gives_the_judge_every_value_oldest_first_cloudwatch_api_fake() {
    let server = Server::start_routed(|r| {
        let values = if r.json().to_string().contains("podinfo-primary") {
            "[1.0,1.25]"
        } else {
            "[2.0,null,2.5]"
        };
        Canned::new(
            200,
            format!(r#"{{"MetricDataResults":[{{"Id":"e1","Label":"err","Values":{values},"StatusCode":"Complete"}}],"Messages":[]}}"#),
        )
        .header("Content-Type", "application/x-amz-json-1.0")
    })
    .await;
    let url = server.url();
    let mut env: Vec<(&str, &str)> = AWS_ENV.to_vec();
    env.push(("SLUICE_CLOUDWATCH_ENDPOINT", &url));
    let text = template_of(
        "    type: cloudwatch\n    region: eu-west-1\n",
        &format!("'{CW_QUERY}'"),
    );
    assert_series_of_two_and_three(&text, &env).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!((r.method.as_str(), r.target.as_str()), ("POST", "/"));
        assert_eq!(
            r.header("X-Amz-Target"),
            Some("GraniteServiceVersion20100801.GetMetricData")
        );
        assert_eq!(
            r.header("Authorization"),
            Some(expected_authorization(r, "eu-west-1").as_str())
        );
        let body = r.json();
        assert_eq!(body["StartTime"], 1_699_999_700);
        assert_eq!(body["EndTime"], 1_700_000_000);
        assert_eq!(body["ScanBy"], "TimestampAscending");
    }
}

#[tokio::test]
async fn a_newrelic_template_gives_the_judge_one_value_per_bucket_newrelic_api_fake() {
    let server = split_server("nrql", r#"[{"results":[{"result":2.0}]},{"results":[{"result":null}]},{"results":[{"result":2.5}]}]"#, r#"[{"results":[{"result":1.0}]},{"results":[{"result":1.25}]}]"#, |results| {
        Canned::json(200, &format!(r#"{{"timeSeries":{results},"metadata":{{}}}}"#))
    })
    .await;
    let provider = keyed_provider("newrelic", &server, "nr");
    let env = [
        ("SLUICE_SECRET_TEST__NR__NEWRELIC_ACCOUNT_ID", "51312"),
        ("SLUICE_SECRET_TEST__NR__NEWRELIC_QUERY_KEY", "query-key"),
    ];
    let text = template_of(
        &provider,
        "\"SELECT average(duration) as result FROM Transaction WHERE appName = '{{ target }}'\"",
    );
    assert_series_of_two_and_three(&text, &env).await;
    let sent: Vec<String> = canary_first(&server, "nrql")
        .iter()
        .map(|r| {
            assert_eq!(r.path(), "/v1/accounts/51312/query");
            assert_eq!(r.header("X-Query-Key"), Some("query-key"));
            r.query_param("nrql").unwrap()
        })
        .collect();
    let nrql = |app: &str| {
        format!("SELECT average(duration) as result FROM Transaction WHERE appName = '{app}' SINCE 1699999700000 UNTIL 1700000000000 TIMESERIES 30 seconds")
    };
    assert_eq!(sent, [nrql("podinfo"), nrql("podinfo-primary")]);
}

#[tokio::test]
async fn a_dynatrace_template_gives_the_judge_its_last_series_at_the_step_dynatrace_api_fake() {
    let server = split_server("metricSelector", "[2.0,null,2.5]", "[1.0,1.25]", |values| {
        Canned::json(
            200,
            &format!(r#"{{"totalCount":1,"nextPageKey":null,"resolution":"1m","result":[{{"metricId":"m","data":[{{"dimensions":[],"dimensionMap":{{}},"timestamps":[1,2,3],"values":{values}}}]}}]}}"#),
        )
    })
    .await;
    let provider = keyed_provider("dynatrace", &server, "dt");
    let env = [("SLUICE_SECRET_TEST__DT__DYNATRACE_TOKEN", "dt-token")];
    let text = template_of(
        &provider,
        "'builtin:service.response.time:filter(eq(\"dt.entity.service.name\",\"{{ target }}\"))'",
    );
    assert_series_of_two_and_three(&text, &env).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.path(), "/api/v2/metrics/query");
        assert_eq!(r.header("Authorization"), Some("Api-Token dt-token"));
        // A 30 s step is Dynatrace's finest resolution, one minute.
        assert_eq!(r.query_param("resolution").as_deref(), Some("1m"));
        assert_eq!(r.query_param("from").as_deref(), Some("1699999700000"));
        assert_eq!(r.query_param("to").as_deref(), Some("1700000000000"));
    }
}
