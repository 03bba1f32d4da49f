//! The whole loop with the real binary and each vendor metric provider (datadog, newrelic,
//! graphite, influxdb, dynatrace): a table of [`Vendor`]s, one shared harness ([`run_loop`]).
//! For each vendor three canaries share one repo: one whose local fake of the vendor's API
//! answers within the threshold is promoted; one whose fake answers above it rolls back, its
//! value in the commit; and one whose Secret is not mapped never promotes and sends nothing.
//! The credentials come from the operator's mapped Secrets (environment variables for some
//! vendors, files under `SLUICE_SECRETS_DIR` for others), and every request each fake received
//! carries them and the query rendered for that canary, as the vendor documents it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::providers::{datadog_answer, influx_answer};
use super::support::{Canned, Recorded, Server};
use crate::support::{git, human_clone, human_commit, seeded_remote};

/// How the operator maps a vendor's Secret into sluice.
#[derive(Clone, Copy)]
enum Mapped {
    /// `SLUICE_SECRET_TEST__<NAME>__<KEY>` variables.
    Env,
    /// One file per key at `$SLUICE_SECRETS_DIR/test/<name>/<key>`, as a Secret volume is.
    Files,
}

/// One vendor provider as the loop sees it.
struct Vendor {
    /// `spec.provider.type`; also the mapped Secret's name and the canaries' name prefix.
    kind: &'static str,
    /// Appended to the fake's URL in `spec.provider.address` (a path prefix some vendors use).
    address_path: &'static str,
    /// The MetricTemplate's query, as an operator writes it for this vendor.
    query: &'static str,
    /// The Secret's keys (Flagger's names) and values, in the order the provider reads them.
    keys: &'static [(&'static str, &'static str)],
    mapped: Mapped,
    /// The vendor's documented answer whose metric value is the argument.
    answer: fn(f64) -> Canned,
    /// Asserts one request carries the credentials and `rendered` (the query with this
    /// canary's variables filled in) as the vendor's API takes them.
    check: fn(&Recorded, rendered: &str),
}

/// The template variables every canary here renders: namespace `test`, metric interval 1m.
fn render(query: &str, target: &str) -> String {
    query
        .replace("{{ target }}", target)
        .replace("{{ namespace }}", "test")
        .replace("{{ interval }}", "1m")
}

const DATADOG: Vendor = Vendor {
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

const NEWRELIC: Vendor = Vendor {
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

const GRAPHITE: Vendor = Vendor {
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

const INFLUXDB: Vendor = Vendor {
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

const DYNATRACE: Vendor = Vendor {
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

/// A value each healthy fake answers: within `thresholdRange: {max: 1}`.
const WITHIN: f64 = 0.5;
/// A value each faulty fake answers: above the threshold.
const ABOVE: f64 = 7.5;

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: test}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n      - {{name: app, image: '{image}'}}\n"
    )
}

/// A canary whose one metric is the template `<name>-errors`.
fn canary(name: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {{name: {name}, namespace: test}}
spec:
  provider: osm
  targetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  service: {{port: 9898}}
  analysis:
    interval: 2s
    threshold: 2
    stepWeight: 50
    maxWeight: 50
    metrics:
      - name: error-rate
        templateRef: {{name: {name}-errors, namespace: test}}
        thresholdRange: {{max: 1}}
        interval: 1m
"
    )
}

fn template(name: &str, vendor: &Vendor, address: &str, secret: &str) -> String {
    let query: String = vendor.query.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata: {{name: {name}-errors, namespace: test}}
spec:
  provider:
    type: {kind}
    address: {address}{path}
    secretRef: {{name: {secret}}}
  query: |
{query}",
        kind = vendor.kind,
        path = vendor.address_path,
    )
}

/// The variable that maps key `key` of Secret `test/<name>`, spelled out (not through
/// `sluice::secrets::env_var`, so a change to the naming fails here).
fn env_var(name: &str, key: &str) -> String {
    format!(
        "SLUICE_SECRET_TEST__{}__{}",
        name.to_uppercase().replace('-', "_"),
        key.to_uppercase()
    )
}

fn reconcile(bare: &Path, workdir: &Path, env: &[(String, String)]) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "reconcile",
            "--repo",
            &bare.display().to_string(),
            "--workdir",
            &workdir.display().to_string(),
        ])
        .env("SLUICE_LOG", "error")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("sluice reconcile");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn phase(bare: &Path, name: &str) -> String {
    let text = git(
        bare,
        &["show", &format!("main:.sluice/status/test/{name}.yaml")],
    );
    let p = text
        .lines()
        .find_map(|l| l.strip_prefix("phase: "))
        .unwrap_or_default();
    let w = text
        .lines()
        .find_map(|l| l.strip_prefix("canaryWeight: "))
        .unwrap_or_default();
    format!("{p}:{w}")
}

fn finished(p: &str) -> bool {
    p.starts_with("Succeeded") || p.starts_with("Failed")
}

/// One vendor's three canaries and their fakes.
struct Cases<'v> {
    vendor: &'v Vendor,
    /// `(canary name, fake, the Secret its template names)`: within, above, unmapped.
    canaries: [(String, Server, &'static str); 3],
}

/// Runs `vendors` through the loop in one repo (three canaries each, see the module docs) until
/// every canary has finished, then checks phases, commits and every request each fake received.
async fn run_loop(vendors: &[&Vendor]) {
    let mut cases = Vec::new();
    for &vendor in vendors {
        let k = vendor.kind;
        cases.push(Cases {
            vendor,
            canaries: [
                (
                    k.to_string(),
                    Server::start(vec![(vendor.answer)(WITHIN)]).await,
                    k,
                ),
                (
                    format!("{k}-faulty"),
                    Server::start(vec![(vendor.answer)(ABOVE)]).await,
                    k,
                ),
                (
                    format!("{k}-unmapped"),
                    Server::start(vec![(vendor.answer)(WITHIN)]).await,
                    "not-mapped",
                ),
            ],
        });
    }
    let tmp = tempfile::tempdir().unwrap();
    let secrets_dir = tmp.path().join("secrets");
    let mut env = vec![(
        "SLUICE_SECRETS_DIR".to_string(),
        secrets_dir.display().to_string(),
    )];
    for vendor in vendors {
        for (key, value) in vendor.keys {
            match vendor.mapped {
                Mapped::Env => env.push((env_var(vendor.kind, key), value.to_string())),
                Mapped::Files => {
                    let dir = secrets_dir.join("test").join(vendor.kind);
                    std::fs::create_dir_all(&dir).unwrap();
                    // As `kubectl create secret` from a file written with `echo`.
                    std::fs::write(dir.join(key), format!("{value}\n")).unwrap();
                }
            }
        }
    }
    let mut files: Vec<(String, String)> = Vec::new();
    for case in &cases {
        for (app, server, secret) in &case.canaries {
            files.push((
                format!("apps/{app}/deployment.yaml"),
                deployment(app, &format!("{app}:1")),
            ));
            files.push((format!("apps/{app}/canary.yaml"), canary(app)));
            files.push((
                format!("apps/{app}/metrics.yaml"),
                template(app, case.vendor, &server.url(), secret),
            ));
        }
    }
    let apps: Vec<&str> = cases
        .iter()
        .flat_map(|c| c.canaries.iter().map(|(app, _, _)| app.as_str()))
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
        let deadline = Instant::now() + Duration::from_secs(120);
        while !apps.iter().all(|a| finished(&phase(&bare, a))) {
            let phases: Vec<String> = apps.iter().map(|a| phase(&bare, a)).collect();
            assert!(Instant::now() < deadline, "timed out: {apps:?} {phases:?}");
            reconcile(&bare, &workdir, &env);
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let log = git(&bare, &["log", "--format=%s%n%b", "main"]);
    for case in &cases {
        let [(ok, healthy, _), (bad, faulty, _), (unmapped, silent, _)] = &case.canaries;
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
        assert_eq!(
            phase(&bare, unmapped),
            "Failed:0",
            "{k}: no credentials: never promoted"
        );
        let rollback = log
            .lines()
            .find(|l| l.starts_with(&format!("{bad}: roll back")))
            .unwrap_or_else(|| panic!("{k}: a rollback commit:\n{log}"));
        assert!(rollback.contains("error-rate 7.5 > 1"), "{k}: {rollback}");
        let first_key = env_var("not-mapped", vendor.keys[0].0);
        assert!(
            log.contains(&first_key),
            "{k}: the unmapped canary's failure says what to set ({first_key}):\n{log}"
        );
        for (_, value) in vendor.keys {
            assert!(!log.contains(value), "{k}: a Secret value in git:\n{log}");
        }
        assert!(
            silent.requests().is_empty(),
            "{k}: nothing is sent without credentials"
        );
        // Every query the fakes received carried the mapped keys and that canary's query.
        for (server, app) in [(healthy, ok), (faulty, bad)] {
            let requests = server.requests();
            assert!(!requests.is_empty(), "{app}");
            let rendered = render(vendor.query, app);
            for r in &requests {
                (vendor.check)(r, &rendered);
            }
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
