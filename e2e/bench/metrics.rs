//! Benchmark: the metric queries of one tick (N canaries x 2 metrics) against a fake
//! Prometheus that answers after a fixed latency, through sluice's pooled per-endpoint client
//! at `prometheus.concurrency` C, beside curl fetching the same URLs with keep-alive at the same
//! parallelism (`curl --parallel --parallel-max C`), measured in the same run. Prints the time
//! and the connections the server accepted for each. Reports numbers; asserts only that every
//! query got its answer.
//!
//! Run: `cargo bench --bench metrics` (add `-- --quick` for 100 canaries only). Each case runs
//! three times and reports the median. A debug build (`cargo test --all-targets` runs this too)
//! does the quick case once: its times mean nothing.

// A benchmark is test code (built without `cfg(test)`, as `harness = false`): it may unwrap.
// The workspace lints (Cargo.toml) reject unwrap() and expect() only in production code.
// Long functions here are YAML fixtures and scenario tables: the one-screen limit of
// clippy.toml is for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::core::observe::MetricValue;
use sluice::http_client::HttpClients;
use sluice::manifest::load::load_text;
use sluice::manifest::settings::Settings;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::metrics::prometheus::{Auth, PrometheusAccess};
use sluice::metrics::{observe_metrics, DEFAULT_METRIC_INTERVAL};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

#[path = "../it/support/standalone.rs"]
#[allow(dead_code)] // the bench serves request heads only
mod standalone;
use standalone::read_request_head;

const ONE: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"99.75"]}]}}"#;

/// A keep-alive fake Prometheus answering every request after `latency`.
struct FakePrometheus {
    url: String,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl FakePrometheus {
    async fn start(latency: Duration) -> FakePrometheus {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(stream, latency));
            }
        });
        FakePrometheus {
            url,
            accepted,
            task,
        }
    }

    /// Connections accepted since the last call.
    fn take_accepted(&self) -> usize {
        self.accepted.swap(0, Ordering::Relaxed)
    }
}

impl Drop for FakePrometheus {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, latency: Duration) {
    let mut buf = Vec::new();
    while read_request_head(&mut stream, &mut buf).await {
        tokio::time::sleep(latency).await;
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{ONE}",
            ONE.len()
        );
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn canary(i: usize) -> sluice::manifest::model::Canary {
    let text = format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {{name: app{i}, namespace: bench}}
spec:
  provider: osm
  targetRef: {{apiVersion: apps/v1, kind: Deployment, name: app{i}}}
  service: {{port: 9898}}
  analysis:
    interval: 30s
    threshold: 5
    stepWeight: 10
    maxWeight: 50
    metrics:
      - name: request-success-rate
        thresholdRange: {{min: 99}}
      - name: request-duration
        thresholdRange: {{max: 500}}
"
    );
    let loaded = load_text("canary.yaml", &text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.canaries.into_iter().next().expect("one canary")
}

/// sluice: every canary's metrics through one `PrometheusAccess` (what a tick does).
async fn sluice_queries(
    url: &str,
    canaries: &[sluice::manifest::model::Canary],
    concurrency: usize,
) -> Duration {
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None);
    let templates = TemplateIndex::new();
    let start = Instant::now();
    let observed = futures::future::join_all(canaries.iter().map(|c| {
        observe_metrics(
            &access,
            c,
            c.id.name.as_str(),
            &templates,
            Some(url),
            DEFAULT_METRIC_INTERVAL,
            concurrency,
        )
    }))
    .await;
    let took = start.elapsed();
    for m in observed.iter().flatten() {
        assert!(matches!(m.value, MetricValue::Value(_)), "{m:?}");
    }
    took
}

/// curl: the same number of queries with keep-alive, `concurrency` at a time.
fn curl_queries(url: &str, queries: usize, concurrency: usize) -> Duration {
    let mut config = tempfile::NamedTempFile::new().expect("temp file");
    for i in 0..queries {
        writeln!(
            config,
            "url = \"{url}/api/v1/query?query=up&n={i}\"\noutput = \"/dev/null\""
        )
        .expect("write");
    }
    let start = Instant::now();
    let status = Command::new("curl")
        .args(["--silent", "--no-progress-meter", "--fail", "--globoff"])
        .args(["--parallel", "--parallel-max"])
        .arg(concurrency.to_string())
        .arg("--config")
        .arg(config.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("curl runs");
    let took = start.elapsed();
    assert!(status.success(), "curl: {status}");
    took
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let debug = cfg!(debug_assertions);
    let quick = debug || std::env::args().any(|a| a == "--quick");
    let runs = if debug { 1 } else { 3 };
    // (canaries, concurrency, latency)
    let mut cases = vec![(100, 20, Duration::from_millis(5))];
    if !quick {
        cases.extend([
            (1000, 20, Duration::from_millis(50)),
            (1000, 28, Duration::from_millis(50)),
        ]);
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    println!("| canaries x metrics | concurrency | latency | sluice | connections | curl (keep-alive, same parallelism) | connections | ratio |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (n, concurrency, latency) in cases {
        let canaries: Vec<_> = (0..n).map(canary).collect();
        let mut sluice = Vec::new();
        let mut curl = Vec::new();
        let (mut sluice_conns, mut curl_conns) = (0, 0);
        for _ in 0..runs {
            let server = tokio.block_on(FakePrometheus::start(latency));
            sluice.push(
                tokio
                    .block_on(sluice_queries(&server.url, &canaries, concurrency))
                    .as_secs_f64(),
            );
            sluice_conns = server.take_accepted();
            curl.push(curl_queries(&server.url, n * 2, concurrency).as_secs_f64());
            curl_conns = server.take_accepted();
            drop(server);
        }
        let (s, c) = (median(sluice), median(curl));
        println!(
            "| {n} x 2 | {concurrency} | {} ms | {s:.3} s | {sluice_conns} | {c:.3} s | {curl_conns} | {:.2}x |",
            latency.as_millis(),
            s / c.max(1e-9)
        );
    }
}
