//! A real Prometheus (`/usr/bin/prometheus`, Debian package `prometheus`) for the tests that
//! query one: the process (killed and reaped on drop), an in-process exporter it scrapes every
//! second ([`Scraped`]), OSM's metrics as that exporter serves them, and bounded waits. Without
//! Prometheus installed these tests fail (CI installs it; they must not pass by skipping).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice::core::observe::MetricValue;
use sluice::metrics::prometheus::{Prometheus, PrometheusConfig};

use super::free_port;
use super::metrics::{Canned, Server};

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
    /// Prometheus scraping `exposition`, once it holds 10 s of samples (range queries over
    /// the last 10 s see full windows).
    pub async fn start(exposition: fn(f64) -> String) -> Scraped {
        let scraped = Scraped::scraping(exposition).await;
        wait_for_samples(&scraped.client, &scraped.prom).await;
        scraped
    }

    /// Prometheus scraping `exposition`, once its first scrape is in: enough for instant
    /// queries (`sum(up{...})`, the Rollout loop tests' AnalysisTemplate), 9 s sooner.
    pub async fn start_instant(exposition: fn(f64) -> String) -> Scraped {
        let scraped = Scraped::scraping(exposition).await;
        wait_for("the first scrape", &scraped.prom, async || {
            match scraped.client.query("sum(up{job=\"canary\"})").await {
                MetricValue::Value(n) if n >= 1.0 => None,
                other => Some(format!("{other:?}")),
            }
        })
        .await;
        scraped
    }

    async fn scraping(exposition: fn(f64) -> String) -> Scraped {
        let started = Instant::now();
        let exporter = Server::start_with(move |_| {
            Canned::new(200, exposition(started.elapsed().as_secs_f64()))
                .header("Content-Type", "text/plain; version=0.0.4")
        })
        .await;
        let prom = PrometheusProcess::start(&exporter.addr.to_string());
        let client = Prometheus::new(&PrometheusConfig::new(&prom.url)).expect("client");
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
