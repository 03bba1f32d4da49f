//! The splunk and cloudwatch metric providers through `observe_metrics`, against local fakes of
//! their documented APIs: SignalFlow's HTTP execute endpoint answering a server-sent event
//! stream, and CloudWatch's `GetMetricData` over AWS JSON 1.0 whose SigV4 signature the fake
//! recomputes from what it received. No data, error answers, timeouts and missing
//! credentials are each that metric's failure.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice::core::observe::MetricValue;
use sluice::http_client::HttpClients;
use sluice::metrics::cloudwatch::{Cloudwatch, CloudwatchEnv};
use sluice::metrics::splunk::Splunk;

use crate::support::metrics::{observe_template, Canned, Server};
use crate::support::vendors::{
    check_signalflow, expected_authorization, signalflow_stream, AWS_ENV, CW_QUERY,
};

fn template(provider: &str, query: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: t
  namespace: test
spec:
  provider:
{provider}  query: |
    {query}
"
    )
}

/// Observes the one metric of a canary whose template is `provider` + `query`, with `env` as
/// the process environment (Secrets and AWS variables).
async fn observe_one(provider: &str, query: &str, env: &[(&str, &str)]) -> MetricValue {
    observe_template(&template(provider, query), env).await
}

const SF_TOKEN: (&str, &str) = ("SLUICE_SECRET_TEST__SF__SF_TOKEN_KEY", "sf-token");
const PROGRAM: &str = "data('requests', filter=filter('service', '{{ target }}')).sum().publish()";

fn splunk(url: &str) -> String {
    format!("    type: splunk\n    address: {url}\n    secretRef: {{name: sf}}\n")
}

#[tokio::test]
async fn splunk_posts_the_program_over_ten_intervals_with_the_token_and_reads_the_last_point() {
    let server = Server::start(vec![signalflow_stream(&[
        r#"{"tsId":"AAAAAKf7cZo","value":0.25}"#,
        r#"{"tsId":"AAAAAKf7cZo","value":0.5}"#,
        r#"{"tsId":"AAAAAKf7cZo","value":null}"#,
    ])])
    .await;
    let value = observe_one(&splunk(&server.url()), PROGRAM, &[SF_TOKEN]).await;
    assert_eq!(value, MetricValue::Value(0.5));
    let requests = server.requests();
    let [r] = requests.as_slice() else {
        panic!("{requests:?}")
    };
    check_signalflow(
        r,
        "sf-token",
        "data('requests', filter=filter('service', 'podinfo')).sum().publish()",
    );
}

#[tokio::test]
async fn splunk_no_points_errors_and_several_series_are_failed_checks() {
    type Check = fn(&MetricValue) -> bool;
    let cases: Vec<(Canned, Check)> = vec![
        (signalflow_stream(&[]), |v| *v == MetricValue::NoData),
        (
            signalflow_stream(&[r#"{"tsId":"A","value":null}"#]),
            |v| *v == MetricValue::NoData,
        ),
        (
            signalflow_stream(&[r#"{"tsId":"A","value":1},{"tsId":"B","value":2}"#]),
            |v| matches!(v, MetricValue::Error(e) if e.contains("more than one time series")),
        ),
        (
            Canned::json(401, r#"{"message":"Unauthorized","errorType":"UNAUTHORIZED"}"#),
            |v| matches!(v, MetricValue::Error(e) if e.starts_with("Splunk http://") && e.contains("HTTP 401")),
        ),
        (
            Canned::new(
                200,
                "event: error\ndata: {\"errors\":[{\"code\":\"ANALYTICS_PROGRAM_NAME_ERROR\"}]}\n\n",
            )
            .header("Content-Type", "text/event-stream"),
            // The code is SignalFlow's text: logged, not part of the committed error.
            |v| matches!(v, MetricValue::Error(e) if e.ends_with("answered with a SignalFlow error")),
        ),
    ];
    for (answer, ok) in cases {
        let server = Server::start(vec![answer.clone()]).await;
        let value = observe_one(&splunk(&server.url()), PROGRAM, &[SF_TOKEN]).await;
        assert!(ok(&value), "{answer:?}: {value:?}");
        assert_eq!(server.requests().len(), 1);
    }
    // Without the token nothing is sent.
    let server = Server::start(vec![signalflow_stream(&[])]).await;
    let value = observe_one(&splunk(&server.url()), PROGRAM, &[]).await;
    assert!(
        matches!(&value, MetricValue::Error(e) if e.contains("SLUICE_SECRET_TEST__SF__SF_TOKEN_KEY")),
        "{value:?}"
    );
    assert!(server.requests().is_empty());
}

fn cloudwatch_env(url: &str) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&str, String)> = AWS_ENV.iter().map(|(k, v)| (*k, v.to_string())).collect();
    env.push(("SLUICE_CLOUDWATCH_ENDPOINT", url.to_string()));
    env
}

#[tokio::test]
async fn cloudwatch_sends_a_sigv4_signed_get_metric_data_and_reads_the_first_value() {
    let answer = r#"{"MetricDataResults":[{"Id":"e1","Label":"err","Timestamps":[1700000600,1700000540],"Values":[0.125,0.5],"StatusCode":"Complete"}],"Messages":[]}"#;
    let server = Server::start(vec![
        Canned::new(200, answer).header("Content-Type", "application/x-amz-json-1.0")
    ])
    .await;
    let env = cloudwatch_env(&server.url());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let provider = "    type: cloudwatch\n    region: ap-northeast-1\n";
    let value = observe_one(provider, CW_QUERY, &env).await;
    assert_eq!(value, MetricValue::Value(0.125));
    let requests = server.requests();
    let [r] = requests.as_slice() else {
        panic!("{requests:?}")
    };
    assert_eq!((r.method.as_str(), r.target.as_str()), ("POST", "/"));
    assert_eq!(r.header("Content-Type"), Some("application/x-amz-json-1.0"));
    assert_eq!(
        r.header("X-Amz-Target"),
        Some("GraniteServiceVersion20100801.GetMetricData")
    );
    assert_eq!(r.header("X-Amz-Security-Token"), Some("session-token"));
    let auth = r.header("Authorization").expect("Authorization");
    let date = r.header("X-Amz-Date").expect("X-Amz-Date");
    assert!(
        auth.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/ap-northeast-1/monitoring/aws4_request, SignedHeaders=",
            &date[..8]
        )),
        "{auth}"
    );
    assert_eq!(auth, expected_authorization(r, "ap-northeast-1"));
    assert!(!auth.contains(AWS_ENV[1].1));
    let body = r.json();
    let queries = body["MetricDataQueries"].as_array().expect("queries");
    assert_eq!(queries.len(), 3);
    assert_eq!(
        queries[1]["MetricStat"]["Metric"]["Dimensions"][0]["Value"],
        "podinfo"
    );
    assert_eq!(body["MaxDatapoints"], 20);
    let secs = |k: &str| body[k].as_u64().expect(k);
    // Flagger: StartTime = now - 10 × the metric's interval (1m).
    assert_eq!(secs("EndTime") - secs("StartTime"), 600);
}

#[tokio::test]
async fn cloudwatch_no_values_errors_bad_queries_and_missing_keys_are_failed_checks() {
    type Check = fn(&MetricValue) -> bool;
    let cases: Vec<(Canned, Check)> = vec![
        (
            Canned::new(200, r#"{"MetricDataResults":[],"Messages":[]}"#),
            |v| *v == MetricValue::NoData,
        ),
        (
            Canned::new(
                200,
                r#"{"MetricDataResults":[{"Id":"e1","Timestamps":[],"Values":[],"StatusCode":"Complete"}]}"#,
            ),
            |v| *v == MetricValue::NoData,
        ),
        (
            Canned::new(
                403,
                r#"{"__type":"com.amazon.coral.service#AccessDeniedException","message":"not authorized to perform: cloudwatch:GetMetricData"}"#,
            ),
            |v| matches!(v, MetricValue::Error(e) if e.starts_with("CloudWatch http://") && e.ends_with("answered HTTP 403")),
        ),
        (
            Canned::new(500, "oops"),
            |v| matches!(v, MetricValue::Error(e) if e.ends_with("answered HTTP 500")),
        ),
    ];
    let provider = "    type: cloudwatch\n    region: us-east-1\n";
    for (answer, ok) in cases {
        let server = Server::start(vec![answer.clone()]).await;
        let env = cloudwatch_env(&server.url());
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let value = observe_one(provider, CW_QUERY, &env).await;
        assert!(ok(&value), "{answer:?}: {value:?}");
        assert_eq!(server.requests().len(), 1);
    }
    let server = Server::start(vec![Canned::new(200, "{}")]).await;
    let env = cloudwatch_env(&server.url());
    // A query that is not a JSON array of MetricDataQuery is never sent.
    let with_keys: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let value = observe_one(provider, r#"{"Id":"m1"}"#, &with_keys).await;
    assert!(
        matches!(&value, MetricValue::Error(e) if e.contains("expected a JSON array of MetricDataQuery")),
        "{value:?}"
    );
    // Without AWS keys in the environment nothing is sent.
    let endpoint_only = [("SLUICE_CLOUDWATCH_ENDPOINT", env[3].1.as_str())];
    let value = observe_one(provider, CW_QUERY, &endpoint_only).await;
    assert!(
        matches!(&value, MetricValue::Error(e) if e.starts_with("metric template test/t (t.yaml:1): no AWS credentials: set AWS_ACCESS_KEY_ID")),
        "{value:?}"
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn slow_splunk_and_cloudwatch_time_out_as_failed_checks() {
    let server = Server::start(vec![signalflow_stream(&[]).delay(Duration::from_secs(3))]).await;
    let client = HttpClients::new().expect("clients");
    let client = client.get(false);
    let timeout = Duration::from_millis(200);
    let mut s = Splunk::new(&server.url(), "t".into(), Duration::from_secs(60)).unwrap();
    s.timeout = timeout;
    let aws: BTreeMap<&str, String> = cloudwatch_env(&server.url()).into_iter().collect();
    let env = CloudwatchEnv::from_lookup(|k| aws.get(k).cloned());
    let mut c = Cloudwatch::new(&env, "us-east-1", Duration::from_secs(60)).unwrap();
    c.timeout = timeout;
    let values = [
        (
            "Splunk",
            s.query(client, "data('x').publish()", 1_700_000_000_000)
                .await,
        ),
        (
            "CloudWatch",
            c.query(client, CW_QUERY, std::time::SystemTime::now())
                .await,
        ),
    ];
    for (vendor, value) in values {
        match value {
            MetricValue::Error(e) => assert!(
                e.starts_with(vendor) && e.ends_with("timed out after 200ms"),
                "{e}"
            ),
            other => panic!("{vendor}: {other:?}"),
        }
    }
}
