//! The whole loop with the real binary and each vendor metric provider (datadog, newrelic,
//! graphite, influxdb, dynatrace, splunk, cloudwatch): a table of [`Vendor`]s, one shared
//! harness ([`run_loop`]). For each vendor the canaries share one repo: one whose local fake of
//! the vendor's API answers within the threshold is promoted; one whose fake answers above it
//! rolls back, its value in the commit; and, for vendors that read a Secret, one whose Secret
//! is not mapped never promotes and sends nothing. The credentials come from the operator's
//! mapped Secrets (environment variables for some vendors, files under `SLUICE_SECRETS_DIR` for
//! others) or, for CloudWatch, from the AWS variables of sluice's own environment; every
//! request each fake received carries them (CloudWatch's a SigV4 signature the test
//! recomputes) and the query rendered for that canary, as the vendor documents it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::providers::{datadog_answer, influx_answer};
use super::providers_signed::{expected_authorization, signalflow_stream, AWS_ENV, CW_QUERY};
use super::support::{
    loop_canary, loop_deployment as deployment, phase, Canned, Recorded, Server, LOOP_INTERVAL,
};
use crate::support::{git, human_clone, human_commit, reconcile, seeded_remote};

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
fn render(query: &str, target: &str) -> String {
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
    check: |r, rendered| {
        assert_eq!(
            (r.method.as_str(), r.path()),
            ("POST", "/v2/signalflow/execute")
        );
        assert_eq!(r.header("X-SF-Token"), Some("sf-token-0123"));
        assert_eq!(r.header("Content-Type"), Some("text/plain"));
        assert_eq!(
            String::from_utf8_lossy(&r.body).trim_end(),
            rendered.trim_end()
        );
        assert_eq!(r.query_param("immediate").as_deref(), Some("true"));
        let at = |p: &str| -> u64 { r.query_param(p).expect(p).parse().expect("unix ms") };
        // Flagger: start = now - 10 × the metric interval (1m), in milliseconds.
        assert_eq!(at("stop") - at("start"), 600_000);
    },
};

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

/// A value each healthy fake answers: within `thresholdRange: {max: 1}`.
const WITHIN: f64 = 0.5;
/// A value each faulty fake answers: above the threshold.
const ABOVE: f64 = 7.5;

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

fn finished(p: &str) -> bool {
    p.starts_with("Succeeded") || p.starts_with("Failed")
}

/// One canary of a vendor: its name, the fake its template reaches and the Secret it names.
struct Case {
    app: String,
    fake: Arc<Server>,
    secret: &'static str,
}

/// One vendor's canaries and their fakes.
struct Cases<'v> {
    vendor: &'v Vendor,
    within: Case,
    above: Case,
    /// None for [`Mapped::Environment`], which reads no Secret.
    unmapped: Option<Case>,
}

impl Cases<'_> {
    fn all(&self) -> impl Iterator<Item = &Case> {
        [&self.within, &self.above]
            .into_iter()
            .chain(&self.unmapped)
    }
}

/// Runs `vendors` through the loop in one repo (see the module docs) until every canary has
/// finished, then checks phases, commits and every request each fake received.
async fn run_loop(vendors: &[&Vendor]) {
    let mut cases = Vec::new();
    for &vendor in vendors {
        let k = vendor.kind;
        let answer = vendor.answer;
        let (within, above) = (k.to_string(), format!("{k}-faulty"));
        let (within_fake, above_fake, unmapped) = match vendor.mapped {
            Mapped::Environment { carries, .. } => {
                let (ok, bad) = (render(vendor.query, &within), render(vendor.query, &above));
                let fake = Arc::new(
                    Server::start_routed(move |r| {
                        if carries(r, &ok) {
                            answer(WITHIN)
                        } else if carries(r, &bad) {
                            answer(ABOVE)
                        } else {
                            Canned::new(400, "no canary sends this query")
                        }
                    })
                    .await,
                );
                (Arc::clone(&fake), fake, None)
            }
            Mapped::Env | Mapped::Files => (
                Arc::new(Server::start(vec![answer(WITHIN)]).await),
                Arc::new(Server::start(vec![answer(ABOVE)]).await),
                Some(Case {
                    app: format!("{k}-unmapped"),
                    fake: Arc::new(Server::start(vec![answer(WITHIN)]).await),
                    secret: "not-mapped",
                }),
            ),
        };
        cases.push(Cases {
            vendor,
            within: Case {
                app: within,
                fake: within_fake,
                secret: k,
            },
            above: Case {
                app: above,
                fake: above_fake,
                secret: k,
            },
            unmapped,
        });
    }
    let tmp = tempfile::tempdir().unwrap();
    let secrets_dir = tmp.path().join("secrets");
    let mut env = vec![(
        "SLUICE_SECRETS_DIR".to_string(),
        secrets_dir.display().to_string(),
    )];
    for case in &cases {
        let vendor = case.vendor;
        for (key, value) in vendor.keys {
            match vendor.mapped {
                Mapped::Env => env.push((env_var(vendor.kind, key), value.to_string())),
                Mapped::Files => {
                    let dir = secrets_dir.join("test").join(vendor.kind);
                    std::fs::create_dir_all(&dir).unwrap();
                    // As `kubectl create secret` from a file written with `echo`.
                    std::fs::write(dir.join(key), format!("{value}\n")).unwrap();
                }
                Mapped::Environment { .. } => env.push((key.to_string(), value.to_string())),
            }
        }
        if let Mapped::Environment { endpoint_var, .. } = vendor.mapped {
            env.push((endpoint_var.to_string(), case.within.fake.url()));
        }
    }
    let mut files: Vec<(String, String)> = Vec::new();
    for case in &cases {
        for Case { app, fake, secret } in case.all() {
            files.push((
                format!("apps/{app}/deployment.yaml"),
                deployment(app, &format!("{app}:1")),
            ));
            files.push((format!("apps/{app}/canary.yaml"), canary(app)));
            files.push((
                format!("apps/{app}/metrics.yaml"),
                template(app, case.vendor, &fake.url(), secret),
            ));
        }
    }
    let apps: Vec<&str> = cases
        .iter()
        .flat_map(|c| c.all().map(|c| c.app.as_str()))
        .collect();
    let seed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let bare = seeded_remote(tmp.path(), &seed);
    let workdir = tmp.path().join("w");
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    tokio::task::block_in_place(|| {
        reconcile(&bare, &workdir, &env);
        git(&human, &["pull", "-q", "origin", "main"]);
        for app in &apps {
            human_commit(
                &human,
                &format!("apps/{app}/deployment.yaml"),
                &deployment(app, &format!("{app}:2")),
                &format!("{app} 2"),
            );
        }
        // Each reconcile at the next check's time (the canaries' interval), without waiting.
        let clock = crate::support::Stepped::default();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !apps.iter().all(|a| finished(&phase(&bare, a))) {
            let phases: Vec<String> = apps.iter().map(|a| phase(&bare, a)).collect();
            assert!(Instant::now() < deadline, "timed out: {apps:?} {phases:?}");
            clock.jump(LOOP_INTERVAL);
            let mut at = env.clone();
            at.push(clock.env());
            reconcile(&bare, &workdir, &at);
        }
    });
    let log = git(&bare, &["log", "--format=%s%n%b", "main"]);
    for case in &cases {
        let (ok, bad) = (&case.within.app, &case.above.app);
        let vendor = case.vendor;
        let k = vendor.kind;
        assert_eq!(
            phase(&bare, ok),
            "Succeeded:0",
            "{k}: within the threshold: promoted"
        );
        assert_eq!(
            phase(&bare, bad),
            "Failed:0",
            "{k}: above the threshold: rolled back"
        );
        let rollback = log
            .lines()
            .find(|l| l.starts_with(&format!("{bad}: roll back")))
            .unwrap_or_else(|| panic!("{k}: a rollback commit:\n{log}"));
        assert!(rollback.contains("error-rate 7.5 > 1"), "{k}: {rollback}");
        for (_, value) in vendor.keys {
            assert!(!log.contains(value), "{k}: a Secret value in git:\n{log}");
        }
        if let Some(unmapped) = &case.unmapped {
            assert_eq!(
                phase(&bare, &unmapped.app),
                "Failed:0",
                "{k}: no credentials: never promoted"
            );
            let first_key = env_var(unmapped.secret, vendor.keys[0].0);
            assert!(
                log.contains(&first_key),
                "{k}: the unmapped canary's failure says what to set ({first_key}):\n{log}"
            );
            assert!(
                unmapped.fake.requests().is_empty(),
                "{k}: nothing is sent without credentials"
            );
        }
        // Every query the fakes received carried the credentials and that canary's query. A
        // fake the canaries share is asked only their queries.
        let mut carried = 0;
        for Case { app, fake, .. } in [&case.within, &case.above] {
            let rendered = render(vendor.query, app);
            let requests: Vec<Recorded> = match vendor.mapped {
                Mapped::Environment { carries, .. } => fake
                    .requests()
                    .into_iter()
                    .filter(|r| carries(r, &rendered))
                    .collect(),
                Mapped::Env | Mapped::Files => fake.requests(),
            };
            assert!(!requests.is_empty(), "{app}");
            carried += requests.len();
            for r in &requests {
                (vendor.check)(r, &rendered);
            }
        }
        if let Mapped::Environment { .. } = vendor.mapped {
            let all = case.within.fake.requests();
            assert_eq!(carried, all.len(), "{k}: a query no canary sends: {all:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datadog_canaries_promote_within_the_threshold_and_roll_back_above_it() {
    run_loop(&[&DATADOG]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newrelic_graphite_influxdb_and_dynatrace_canaries_promote_within_the_threshold_and_roll_back_above_it(
) {
    run_loop(&[&NEWRELIC, &GRAPHITE, &INFLUXDB, &DYNATRACE]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splunk_and_cloudwatch_canaries_promote_within_the_threshold_and_roll_back_above_it() {
    run_loop(&[&SPLUNK, &CLOUDWATCH]).await;
}
