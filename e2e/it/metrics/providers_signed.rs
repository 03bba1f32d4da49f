//! The splunk and cloudwatch metric providers through `observe_metrics`, against local fakes of
//! their documented APIs: SignalFlow's HTTP execute endpoint answering a server-sent event
//! stream, and CloudWatch's `GetMetricData` over AWS JSON 1.0 whose SigV4 signature the fake
//! recomputes from what it received. No data, error answers, timeouts and missing
//! credentials are each that metric's failure.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use sluice::core::observe::MetricValue;
use sluice::http_client::HttpClients;
use sluice::metrics::cloudwatch::{Cloudwatch, CloudwatchEnv};
use sluice::metrics::splunk::Splunk;

use super::support::{observe_template, Canned, Recorded, Server};

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

/// A SignalFlow execute answer: the event stream Splunk documents, ending normally.
pub(super) fn signalflow_stream(points: &[&str]) -> Canned {
    let mut s = String::from(
        "event: control-message\ndata: {\"event\":\"STREAM_START\",\"timestampMs\":1700000000000}\n\n\
         event: control-message\ndata: {\"event\":\"JOB_START\",\"handle\":\"AAAA\",\"timestampMs\":1700000000001}\n\n\
         event: metadata\ndata: {\"tsId\":\"AAAAAKf7cZo\",\"properties\":{\"sf_metric\":\"requests\"}}\n\n",
    );
    for (i, p) in points.iter().enumerate() {
        s.push_str(&format!(
            "event: data\ndata: {{\"logicalTimestampMs\":{},\"data\":[{p}]}}\n\n",
            1_700_000_000_000u64 + i as u64 * 60_000
        ));
    }
    s.push_str("event: control-message\ndata: {\"event\":\"END_OF_CHANNEL\",\"timestampMs\":1700000600000}\n\n");
    Canned::new(200, s).header("Content-Type", "text/event-stream")
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
    assert_eq!(
        (r.method.as_str(), r.path()),
        ("POST", "/v2/signalflow/execute")
    );
    assert_eq!(r.header("X-SF-Token"), Some("sf-token"));
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(
        String::from_utf8_lossy(&r.body).trim_end(),
        "data('requests', filter=filter('service', 'podinfo')).sum().publish()"
    );
    assert_eq!(r.query_param("immediate").as_deref(), Some("true"));
    let at = |p: &str| -> u64 { r.query_param(p).expect(p).parse().expect("unix ms") };
    // Flagger: start = now - 10 × the metric's interval (1m), in milliseconds.
    assert_eq!(at("stop") - at("start"), 600_000);
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

pub(crate) const AWS_ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
    (
        "AWS_SECRET_ACCESS_KEY",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    ),
    ("AWS_SESSION_TOKEN", "session-token"),
];
pub(crate) const CW_QUERY: &str = r#"[{"Id":"e1","Expression":"m1 / m2","Label":"err"},{"Id":"m1","MetricStat":{"Metric":{"Namespace":"MyKubernetesCluster","MetricName":"ErrorCount","Dimensions":[{"Name":"app","Value":"{{ target }}"}]},"Period":60,"Stat":"Sum","Unit":"Count"},"ReturnData":false},{"Id":"m2","MetricStat":{"Metric":{"Namespace":"MyKubernetesCluster","MetricName":"RequestCount"},"Period":60,"Stat":"Sum"},"ReturnData":false}]"#;

fn cloudwatch_env(url: &str) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&str, String)> = AWS_ENV.iter().map(|(k, v)| (*k, v.to_string())).collect();
    env.push(("SLUICE_CLOUDWATCH_ENDPOINT", url.to_string()));
    env
}

/// The SigV4 `Authorization` header for what the fake received, computed by the crate from the
/// recorded method, host, path, signed headers, body and `X-Amz-Date`.
pub(crate) fn expected_authorization(r: &Recorded, region: &str) -> String {
    let date = r.header("X-Amz-Date").expect("X-Amz-Date");
    let at: jiff::Timestamp = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", date)
        .expect("X-Amz-Date is YYYYMMDDTHHMMSSZ")
        .to_zoned(jiff::tz::TimeZone::UTC)
        .expect("utc")
        .timestamp();
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(at.as_second() as u64);
    let identity = aws_credential_types::Credentials::new(
        AWS_ENV[0].1,
        AWS_ENV[1].1,
        Some(AWS_ENV[2].1.to_string()),
        None,
        "test",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("monitoring")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .expect("params")
        .into();
    let host = r.header("Host").expect("Host");
    let url = format!("http://{host}{}", r.target);
    let headers = [
        ("host", host),
        (
            "content-type",
            r.header("Content-Type").expect("Content-Type"),
        ),
        (
            "x-amz-target",
            r.header("X-Amz-Target").expect("X-Amz-Target"),
        ),
    ];
    let signable = SignableRequest::new(
        &r.method,
        url,
        headers.into_iter(),
        SignableBody::Bytes(&r.body),
    )
    .expect("signable");
    let (instructions, _) = sign(signable, &params).expect("sign").into_parts();
    let authorization = instructions
        .headers()
        .find(|(k, _)| *k == "authorization")
        .map(|(_, v)| v.to_string())
        .expect("authorization");
    authorization
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
