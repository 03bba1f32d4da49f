//! The vendor metric providers as tests reach them: each vendor's documented answers, the
//! AWS credentials and SigV4 signature CloudWatch requests carry, and the table of
//! [`Vendor`]s the loop runs (`metrics/vendor_loop.rs`) and the attacks reuse
//! (`attacks/providers.rs`).

use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use serde_json::Value as Json;

use super::metrics::{loop_canary, Canned, Recorded};

/// A Datadog `/api/v1/query` answer whose first (oldest) point is `value`.
pub(crate) fn datadog_answer(value: f64) -> String {
    format!(
        r#"{{"status":"ok","res_type":"time_series","query":"q","series":[{{"metric":"m","pointlist":[[1577232000000,{value}],[1577318400000,56294.46758591842]]}}]}}"#
    )
}

/// InfluxDB's annotated CSV for one table whose first `_value` is `value`.
pub(crate) fn influx_answer(value: &str) -> String {
    format!(
        "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,string,string\r
#group,false,false,true,true,false,false,true,true\r
#default,_result,,,,,,,\r
,result,table,_start,_stop,_time,_value,_field,_measurement\r
,,0,2020-02-17T22:19:49Z,2020-02-18T22:19:49Z,2020-02-18T10:34:08Z,{value},errors,http\r
,,0,2020-02-17T22:19:49Z,2020-02-18T22:19:49Z,2020-02-18T22:08:44Z,6.6,errors,http\r
\r
"
    )
}

/// A SignalFlow execute answer: the event stream Splunk documents, ending normally.
pub(crate) fn signalflow_stream(points: &[&str]) -> Canned {
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

pub(crate) const AWS_ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
    (
        "AWS_SECRET_ACCESS_KEY",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    ),
    ("AWS_SESSION_TOKEN", "session-token"),
];
pub(crate) const CW_QUERY: &str = r#"[{"Id":"e1","Expression":"m1 / m2","Label":"err"},{"Id":"m1","MetricStat":{"Metric":{"Namespace":"MyKubernetesCluster","MetricName":"ErrorCount","Dimensions":[{"Name":"app","Value":"{{ target }}"}]},"Period":60,"Stat":"Sum","Unit":"Count"},"ReturnData":false},{"Id":"m2","MetricStat":{"Metric":{"Namespace":"MyKubernetesCluster","MetricName":"RequestCount"},"Period":60,"Stat":"Sum"},"ReturnData":false}]"#;

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

/// How the operator maps a vendor's Secret into sluice.
#[derive(Clone, Copy)]
pub(crate) enum Mapped {
    /// `SLUICE_SECRET_TEST__<NAME>__<KEY>` variables.
    Env,
    /// One file per key at `$SLUICE_SECRETS_DIR/test/<name>/<key>`, as a Secret volume is.
    Files,
    /// No Secret, as Flagger's CloudWatch provider: the keys are variables of sluice's own
    /// environment, the template names only `region`, and every template of the vendor is sent
    /// to the one endpoint the variable `endpoint_var` sets. That one fake tells the canaries
    /// apart by the query each request `carries`. There is no Secret to leave unmapped.
    Environment {
        region: &'static str,
        endpoint_var: &'static str,
        carries: fn(&Recorded, rendered: &str) -> bool,
    },
}

/// One vendor provider as the loop sees it.
pub(crate) struct Vendor {
    /// `spec.provider.type`; also the mapped Secret's name and the canaries' name prefix.
    pub(crate) kind: &'static str,
    /// Appended to the fake's URL in `spec.provider.address` (a path prefix some vendors use);
    /// unused with [`Mapped::Environment`].
    pub(crate) address_path: &'static str,
    /// The MetricTemplate's query, as an operator writes it for this vendor.
    pub(crate) query: &'static str,
    /// The Secret's keys (Flagger's names) and values, in the order the provider reads them;
    /// with [`Mapped::Environment`], the environment variables and their values.
    pub(crate) keys: &'static [(&'static str, &'static str)],
    pub(crate) mapped: Mapped,
    /// The vendor's documented answer whose metric value is the argument.
    pub(crate) answer: fn(f64) -> Canned,
    /// Asserts one request carries the credentials and `rendered` (the query with this
    /// canary's variables filled in) as the vendor's API takes them.
    pub(crate) check: fn(&Recorded, rendered: &str),
}

/// The template variables every canary here renders: namespace `test`, metric interval 1m.
pub(crate) fn render(query: &str, target: &str) -> String {
    query
        .replace("{{ target }}", target)
        .replace("{{ namespace }}", "test")
        .replace("{{ interval }}", "1m")
}

pub(crate) const DATADOG: Vendor = Vendor {
    kind: "datadog",
    address_path: "",
    query: "100 - (sum:istio.mesh.request.count{reporter:destination,destination_workload:{{ target }},!response_code:5*}.as_count() / sum:istio.mesh.request.count{reporter:destination,destination_workload:{{ target }}}.as_count()) * 100\n",
    keys: &[
        ("datadog_api_key", "api-key"),
        ("datadog_application_key", "app-key"),
    ],
    mapped: Mapped::Env,
    answer: |v| Canned::json(200, &datadog_answer(v)),
    check: |r, rendered| {
        assert_eq!((r.method.as_str(), r.path()), ("GET", "/api/v1/query"));
        assert_eq!(r.header("DD-API-KEY"), Some("api-key"));
        assert_eq!(r.header("DD-APPLICATION-KEY"), Some("app-key"));
        assert_eq!(r.query_param("query").as_deref(), Some(rendered));
    },
};

pub(crate) const NEWRELIC: Vendor = Vendor {
    kind: "newrelic",
    address_path: "",
    query: "SELECT filter(sum(nginx_ingress_controller_requests), WHERE status >= '500') / sum(nginx_ingress_controller_requests) * 100 AS result FROM Metric WHERE metricName = 'nginx_ingress_controller_requests' AND ingress = '{{ target }}' AND namespace = '{{ namespace }}'\n",
    keys: &[
        ("newrelic_account_id", "2718281"),
        ("newrelic_query_key", "NRIQ-query-key"),
    ],
    mapped: Mapped::Env,
    answer: |v| Canned::json(200, &format!(r#"{{"results":[{{"result":{v}}}]}}"#)),
    check: |r, rendered| {
        assert_eq!((r.method.as_str(), r.path()), ("GET", "/v1/accounts/2718281/query"));
        assert_eq!(r.header("X-Query-Key"), Some("NRIQ-query-key"));
        // Flagger appends the metric interval (1m) to the NRQL.
        assert_eq!(
            r.query_param("nrql"),
            Some(format!("{rendered} SINCE 60 seconds ago"))
        );
    },
};

pub(crate) const GRAPHITE: Vendor = Vendor {
    kind: "graphite",
    address_path: "/graphite",
    query: "target=summarize(
  asPercent(
    sumSeries(stats.timers.httpServerRequests.app.{{ target }}.outcome.SERVER_ERROR.count),
    sumSeries(stats.timers.httpServerRequests.app.{{ target }}.outcome.*.count)
  ),
  '{{ interval }}', 'avg')
&from=-{{ interval }}
",
    keys: &[("username", "admin"), ("password", "graphite-pw")],
    mapped: Mapped::Files,
    answer: |v| {
        Canned::json(
            200,
            &format!(
                r#"[{{"target":"summarize(...)","tags":{{"aggregatedBy":"avg"}},"datapoints":[[0.25,1700000000],[{v},1700000060],[null,1700000120]]}}]"#
            ),
        )
    },
    check: |r, rendered| {
        assert_eq!((r.method.as_str(), r.path()), ("GET", "/graphite/render"));
        // admin:graphite-pw
        assert_eq!(
            r.header("Authorization"),
            Some("Basic YWRtaW46Z3JhcGhpdGUtcHc=")
        );
        // The query string of the render API, white space collapsed, `format=json` added.
        let collapsed = rendered.split_whitespace().collect::<Vec<_>>().join(" ");
        let (target, from) = collapsed
            .strip_prefix("target=")
            .and_then(|q| q.split_once(" &from="))
            .expect("the template's target and from");
        assert_eq!(
            r.query_param("target").as_deref(),
            Some(&*format!("{target} "))
        );
        assert_eq!(r.query_param("from").as_deref(), Some(from));
        assert_eq!(r.query_param("format").as_deref(), Some("json"));
    },
};

pub(crate) const INFLUXDB: Vendor = Vendor {
    kind: "influxdb",
    address_path: "",
    query: "from(bucket: \"default\")
  |> range(start: -{{ interval }})
  |> filter(fn: (r) => r[\"_measurement\"] == \"http_requests\" and r[\"app\"] == \"{{ target }}\" and r[\"namespace\"] == \"{{ namespace }}\")
  |> filter(fn: (r) => r[\"_field\"] == \"error_rate\")
  |> mean()
",
    keys: &[("token", "influx-token"), ("org", "influx-org")],
    mapped: Mapped::Files,
    answer: |v| {
        Canned::new(200, influx_answer(&v.to_string()))
            .header("Content-Type", "text/csv; charset=utf-8")
    },
    check: |r, rendered| {
        assert_eq!((r.method.as_str(), r.path()), ("POST", "/api/v2/query"));
        assert_eq!(r.query_param("org").as_deref(), Some("influx-org"));
        assert_eq!(r.header("Authorization"), Some("Token influx-token"));
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.json()["query"], rendered);
        assert_eq!(r.json()["type"], "flux");
    },
};

pub(crate) const DYNATRACE: Vendor = Vendor {
    kind: "dynatrace",
    address_path: "/e/abc12345",
    query: "builtin:service.errors.total.rate:filter(and(in(\"dt.entity.service\",entitySelector(\"type(service),entityName.equals({{ target }}.{{ namespace }})\")))):splitBy():avg\n",
    keys: &[("dynatrace_token", "dt0c01.ST2EY72KQINMH574WMNVI7YN")],
    mapped: Mapped::Env,
    answer: |v| {
        Canned::json(
            200,
            &format!(
                r#"{{"totalCount":1,"nextPageKey":null,"resolution":"Inf","result":[{{"metricId":"builtin:service.errors.total.rate:splitBy():avg","dataPointCountRatio":1.0E-6,"dimensionCountRatio":1.0E-5,"data":[{{"dimensions":[],"dimensionMap":{{}},"timestamps":[1700000000000],"values":[{v}]}}]}}]}}"#
            ),
        )
    },
    check: |r, rendered| {
        assert_eq!(
            (r.method.as_str(), r.path()),
            ("GET", "/e/abc12345/api/v2/metrics/query")
        );
        assert_eq!(
            r.header("Authorization"),
            Some("Api-Token dt0c01.ST2EY72KQINMH574WMNVI7YN")
        );
        assert_eq!(r.query_param("metricSelector").as_deref(), Some(rendered));
        assert_eq!(r.query_param("resolution").as_deref(), Some("Inf"));
    },
};

pub(crate) const SPLUNK: Vendor = Vendor {
    kind: "splunk",
    address_path: "",
    query: "data('spans.count', filter=filter('sf_environment', '{{ namespace }}') and filter('sf_service', '{{ target }}') and filter('sf_error', 'true'), rollup='rate').sum().publish('errors')\n",
    keys: &[("sf_token_key", "sf-token-0123")],
    mapped: Mapped::Env,
    answer: |v| {
        signalflow_stream(&[
            r#"{"tsId":"AAAAAKf7cZo","value":0.25}"#,
            &format!(r#"{{"tsId":"AAAAAKf7cZo","value":{v}}}"#),
            r#"{"tsId":"AAAAAKf7cZo","value":null}"#,
        ])
    },
    check: |r, rendered| check_signalflow(r, "sf-token-0123", rendered.trim_end()),
};

/// `r` is Flagger's SignalFlow execute request: a POST of the `program` as text with the
/// `token`, asking for immediate results over ten one-minute intervals.
pub(crate) fn check_signalflow(r: &Recorded, token: &str, program: &str) {
    assert_eq!(
        (r.method.as_str(), r.path()),
        ("POST", "/v2/signalflow/execute")
    );
    assert_eq!(r.header("X-SF-Token"), Some(token));
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(String::from_utf8_lossy(&r.body).trim_end(), program);
    assert_eq!(r.query_param("immediate").as_deref(), Some("true"));
    let at = |p: &str| -> u64 { r.query_param(p).expect(p).parse().expect("unix ms") };
    // Flagger: start = now - 10 × the metric's interval (1m), in milliseconds.
    assert_eq!(at("stop") - at("start"), 600_000);
}

const CLOUDWATCH_REGION: &str = "eu-west-1";

/// The `MetricDataQueries` a `GetMetricData` request carries, as JSON.
fn metric_data_queries(r: &Recorded) -> Option<Json> {
    let body: Json = serde_json::from_slice(&r.body).ok()?;
    body.get("MetricDataQueries").cloned()
}

pub(crate) const CLOUDWATCH: Vendor = Vendor {
    kind: "cloudwatch",
    address_path: "",
    query: CW_QUERY,
    keys: &AWS_ENV,
    mapped: Mapped::Environment {
        region: CLOUDWATCH_REGION,
        endpoint_var: "SLUICE_CLOUDWATCH_ENDPOINT",
        carries: |r, rendered| {
            let rendered: Json = serde_json::from_str(rendered).expect("the query is JSON");
            metric_data_queries(r) == Some(rendered)
        },
    },
    answer: |v| {
        Canned::new(
            200,
            format!(
                r#"{{"MetricDataResults":[{{"Id":"e1","Label":"err","Timestamps":[1700000600,1700000540],"Values":[{v},0.25],"StatusCode":"Complete"}}],"Messages":[]}}"#
            ),
        )
        .header("Content-Type", "application/x-amz-json-1.0")
    },
    check: |r, rendered| {
        assert_eq!((r.method.as_str(), r.target.as_str()), ("POST", "/"));
        assert_eq!(r.header("Content-Type"), Some("application/x-amz-json-1.0"));
        assert_eq!(
            r.header("X-Amz-Target"),
            Some("GraniteServiceVersion20100801.GetMetricData")
        );
        assert_eq!(r.header("X-Amz-Security-Token"), Some(AWS_ENV[2].1));
        let date = r.header("X-Amz-Date").expect("X-Amz-Date");
        let auth = r.header("Authorization").expect("Authorization");
        assert!(
            auth.starts_with(&format!(
                "AWS4-HMAC-SHA256 Credential={}/{}/{CLOUDWATCH_REGION}/monitoring/aws4_request, ",
                AWS_ENV[0].1,
                &date[..8]
            )),
            "{auth}"
        );
        // The signature, recomputed from what the fake received with the environment's keys.
        assert_eq!(auth, expected_authorization(r, CLOUDWATCH_REGION));
        let body = r.json();
        let rendered: Json = serde_json::from_str(rendered).expect("the query is JSON");
        assert_eq!(body["MetricDataQueries"], rendered);
        assert_eq!(body["MaxDatapoints"], 20);
        let secs = |k: &str| body[k].as_u64().expect(k);
        // Flagger: StartTime = now - 10 × the metric interval (1m).
        assert_eq!(secs("EndTime") - secs("StartTime"), 600);
    },
};

/// Every vendor of the table, for tests that run them all (`attacks/providers.rs`).
pub(crate) const ALL: [&Vendor; 7] = [
    &DATADOG,
    &NEWRELIC,
    &GRAPHITE,
    &INFLUXDB,
    &DYNATRACE,
    &SPLUNK,
    &CLOUDWATCH,
];

/// A canary whose one metric is the template `<name>-errors`.
pub(crate) fn canary(name: &str) -> String {
    loop_canary(
        name,
        &format!(
            "      - name: error-rate
        templateRef: {{name: {name}-errors, namespace: test}}
        thresholdRange: {{max: 1}}
        interval: 1m
"
        ),
    )
}

pub(crate) fn template(name: &str, vendor: &Vendor, address: &str, secret: &str) -> String {
    let query: String = vendor.query.lines().map(|l| format!("    {l}\n")).collect();
    let provider = match vendor.mapped {
        Mapped::Env | Mapped::Files => format!(
            "    address: {address}{path}\n    secretRef: {{name: {secret}}}\n",
            path = vendor.address_path
        ),
        Mapped::Environment { region, .. } => format!("    region: {region}\n"),
    };
    format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata: {{name: {name}-errors, namespace: test}}
spec:
  provider:
    type: {kind}
{provider}  query: |
{query}",
        kind = vendor.kind,
    )
}

/// The variable that maps key `key` of Secret `test/<name>`, spelled out (not through
/// `sluice::secrets::env_var`, so a change to the naming fails here).
pub(crate) fn env_var(name: &str, key: &str) -> String {
    format!(
        "SLUICE_SECRET_TEST__{}__{}",
        name.to_uppercase().replace('-', "_"),
        key.to_uppercase()
    )
}
