//! End to end against a real Prometheus (`/usr/bin/prometheus`, Debian package `prometheus`).
//!
//! The test runs an exporter in-process that serves OSM's metrics for two Deployments in
//! namespace `test` (`podinfo`: all 2xx; `faulty`: 20 % 5xx) plus noise in another namespace,
//! starts Prometheus scraping it every second, and checks the built-in OSM queries return what
//! the traffic says. Every wait is bounded; the Prometheus process is killed on drop.
//! Without Prometheus installed the test fails (CI installs it; it must not pass by skipping).

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice::core::model::ThresholdRange;
use sluice::core::observe::{MetricObservation, MetricValue};
use sluice::http_client::HttpClients;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::metrics::prometheus::{Auth, Prometheus, PrometheusAccess, PrometheusConfig};
use sluice::metrics::{observe_metrics, DEFAULT_METRIC_INTERVAL};
use sluice::spec::settings::DEFAULT_PROMETHEUS_CONCURRENCY;

use crate::support::metrics::{flagger_canary, Canned, Server};

const PROMETHEUS: &str = "/usr/bin/prometheus";
/// Upper bound of every wait in this file.
const WAIT: Duration = Duration::from_secs(30);

/// A Prometheus child process; killed and reaped on drop.
pub struct PrometheusProcess {
    child: Option<Child>,
    pub url: String,
    dir: tempfile::TempDir,
}

impl PrometheusProcess {
    pub fn start(scrape_target: &str) -> PrometheusProcess {
        assert!(
            Path::new(PROMETHEUS).is_file(),
            "{PROMETHEUS} not found: these end-to-end tests need a real Prometheus. Install it with `apt-get install -y prometheus` (CI does)."
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: canary\n    static_configs:\n      - targets: ['{scrape_target}']\n"
            ),
        )
        .expect("write config");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start prometheus");
        PrometheusProcess {
            child: Some(child),
            url: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("prometheus.log")
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrometheusProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    let l = StdListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// OSM's metrics at `t` seconds: request counters and a latency histogram whose p99 is 46 ms
/// (90 % of requests under 10 ms, the rest under 50 ms).
pub fn osm_exposition(t: f64) -> String {
    let mut out = String::from("# TYPE osm_request_total counter\n");
    let series = [
        // namespace, name, source, code, requests per second
        ("test", "podinfo", "frontend", "200", 60.0),
        ("test", "podinfo", "loadtester", "200", 40.0),
        ("test", "faulty", "frontend", "200", 80.0),
        ("test", "faulty", "frontend", "503", 20.0),
        // Noise the namespace matcher must exclude.
        ("other", "podinfo", "frontend", "500", 50.0),
    ];
    for (ns, name, source, code, rate) in series {
        out.push_str(&format!(
            "osm_request_total{{source_namespace=\"{ns}\",source_kind=\"Deployment\",source_name=\"{source}\",destination_namespace=\"{ns}\",destination_kind=\"Deployment\",destination_name=\"{name}\",response_code=\"{code}\"}} {}\n",
            rate * t
        ));
    }
    out.push_str("# TYPE osm_request_duration_ms histogram\n");
    for name in ["podinfo", "faulty"] {
        let labels = format!("destination_namespace=\"test\",destination_kind=\"Deployment\",destination_name=\"{name}\"");
        for (le, count) in [("1", 0.0), ("10", 90.0), ("50", 100.0), ("+Inf", 100.0)] {
            out.push_str(&format!(
                "osm_request_duration_ms_bucket{{{labels},le=\"{le}\"}} {}\n",
                count * t
            ));
        }
        out.push_str(&format!(
            "osm_request_duration_ms_sum{{{labels}}} {}\n",
            900.0 * t
        ));
        out.push_str(&format!(
            "osm_request_duration_ms_count{{{labels}}} {}\n",
            100.0 * t
        ));
    }
    out
}

/// Waits until Prometheus holds 10 s of samples of the exporter (job `canary`): `rate()`
/// divides by the whole window.
/// A real Prometheus scraping an HTTP exporter whose exposition `t` seconds after it started is
/// `exposition(t)`, with a client of it; ready once it holds 10 s of samples.
pub struct Scraped {
    pub exporter: Server,
    pub prom: PrometheusProcess,
    pub client: Prometheus,
}

impl Scraped {
    pub async fn start(exposition: fn(f64) -> String) -> Scraped {
        let started = Instant::now();
        let exporter = Server::start_with(move |_| {
            Canned::new(200, exposition(started.elapsed().as_secs_f64()))
                .header("Content-Type", "text/plain; version=0.0.4")
        })
        .await;
        let prom = PrometheusProcess::start(&exporter.addr.to_string());
        let client = Prometheus::new(&PrometheusConfig::new(&prom.url)).expect("client");
        wait_for_samples(&client, &prom).await;
        Scraped {
            exporter,
            prom,
            client,
        }
    }
}

impl PrometheusProcess {
    /// `.sluice/config.yaml` pointing a repo's queries at this Prometheus.
    pub fn repo_config(&self) -> String {
        format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprometheus: {{address: '{}'}}\n",
            self.url
        )
    }
}

pub async fn wait_for_samples(client: &Prometheus, prom: &PrometheusProcess) {
    wait_for("10 s of samples", prom, async || {
        match client
            .query("count_over_time(up{job=\"canary\"}[10s])")
            .await
        {
            MetricValue::Value(n) if n >= 10.0 => None,
            other => Some(format!("{other:?}")),
        }
    })
    .await;
}

pub async fn wait_for(
    what: &str,
    prom: &PrometheusProcess,
    mut check: impl AsyncFnMut() -> Option<String>,
) {
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    while Instant::now() < deadline {
        match check().await {
            None => return,
            Some(state) => last = state,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "timed out after {WAIT:?} waiting for {what}; last: {last}\nprometheus log ({}):\n{}",
        prom.log_path().display(),
        prom.log()
    );
}

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
