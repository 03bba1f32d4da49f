//! Metric queries share one pooled keep-alive client per Prometheus endpoint: a tick's many
//! queries open no more connections than `prometheus.concurrency` once connections are set up
//! before the first answer (hyper may open a few more when connecting is slower than
//! answering: see `sluice::http_client`), never have more than that in flight, and `/metrics` shows
//! the connections opened.
//!
//! The fake Prometheus counts the connections it accepts and the requests in flight. It answers
//! nothing until `limit` requests are waiting, then answers them all: so the limit is reached
//! (or the queries time out) without timing anything.

use std::sync::{Arc, Mutex};

use sluice::core::observe::MetricValue;
use sluice::core::status::Status;
use sluice::http_client::HttpClients;
use sluice::manifest::settings::{parse_settings, SETTINGS_PATH};
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::metrics::prometheus::{Auth, PrometheusAccess};
use sluice::metrics::{observe_metrics, DEFAULT_METRIC_INTERVAL};
use sluice::observer::{Live, Observer, Request};
use sluice::runtime::Runtime;
use sluice::server::Metrics;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::support::metrics::flagger_canary;
use crate::support::standalone::read_request_head;

const ONE: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"99.75"]}]}}"#;

const TWO_METRICS: &str = "      - name: request-success-rate
        thresholdRange: {min: 99}
      - name: request-duration
        thresholdRange: {max: 500}
";

#[derive(Debug, Default)]
struct Counts {
    accepted: usize,
    requests: usize,
    /// Requests received and not answered yet, and the most there ever were.
    in_flight: usize,
    most_in_flight: usize,
    /// Requests waiting for their group to fill.
    waiting: usize,
    /// Bumped each time a group of requests is let through.
    released: u64,
    /// Groups let through before they were full (see [`STRAGGLER_WAIT`]).
    partial: usize,
}

/// How long a request waits for its group to fill before the group is let through as it is.
/// Only a stalled client ever waits this long (a starved or retried query leaves a group one
/// short): answering then keeps a slow machine's stall from turning into a 5 s query timeout,
/// while the counts still show what the client did.
const STRAGGLER_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A keep-alive Prometheus stand-in that answers in groups of `limit` requests (a group that
/// stays short for [`STRAGGLER_WAIT`] is answered as it is, and counted).
struct GroupServer {
    url: String,
    counts: Arc<Mutex<Counts>>,
    task: tokio::task::JoinHandle<()>,
}

impl GroupServer {
    async fn start(limit: usize) -> GroupServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let counts = Arc::new(Mutex::new(Counts::default()));
        let (release, released) = watch::channel(0u64);
        let shared = Arc::clone(&counts);
        let task = tokio::spawn(async move {
            let release = Arc::new(release);
            while let Ok((stream, _)) = listener.accept().await {
                shared.lock().expect("lock").accepted += 1;
                let counts = Arc::clone(&shared);
                let release = Arc::clone(&release);
                let released = released.clone();
                tokio::spawn(serve(stream, limit, counts, release, released));
            }
        });
        GroupServer { url, counts, task }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().expect("lock")
    }
}

impl Drop for GroupServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves requests on one connection until the client closes it.
async fn serve(
    mut stream: TcpStream,
    limit: usize,
    counts: Arc<Mutex<Counts>>,
    release: Arc<watch::Sender<u64>>,
    mut released: watch::Receiver<u64>,
) {
    let mut buf = Vec::new();
    // One GET request head (no body) at a time.
    while read_request_head(&mut stream, &mut buf).await {
        // The group this request belongs to: the next one to be let through.
        let mine = {
            let mut c = counts.lock().expect("lock");
            c.requests += 1;
            c.in_flight += 1;
            c.most_in_flight = c.most_in_flight.max(c.in_flight);
            c.waiting += 1;
            let mine = c.released + 1;
            if c.waiting == limit {
                // A full group: let it through.
                c.waiting = 0;
                c.released = mine;
                release.send_replace(mine);
            }
            mine
        };
        let full = tokio::time::timeout(STRAGGLER_WAIT, released.wait_for(|r| *r >= mine))
            .await
            .map(|answered| answered.is_ok());
        match full {
            Ok(true) => {}
            Ok(false) => return,
            Err(_) => {
                let mut c = counts.lock().expect("lock");
                if c.released < mine {
                    c.waiting = 0;
                    c.released = mine;
                    c.partial += 1;
                    release.send_replace(mine);
                }
            }
        }
        // Counted out before the answer is written: the client can send its next request
        // only after reading this one, so a client within its limit is never seen above it.
        counts.lock().expect("lock").in_flight -= 1;
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{ONE}",
            ONE.len()
        );
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The metrics of `canaries` copies of the two-metric canary, all observed at once against
/// the Prometheus at `url` with `limit` queries in flight per endpoint.
async fn observe_all(
    access: &PrometheusAccess,
    url: &str,
    canaries: usize,
    limit: usize,
) -> Vec<sluice::core::observe::MetricObservation> {
    let canary = flagger_canary("osm", "", TWO_METRICS);
    let templates = TemplateIndex::new();
    futures::future::join_all((0..canaries).map(|_| {
        observe_metrics(
            access,
            &canary,
            "podinfo",
            &templates,
            Some(url),
            DEFAULT_METRIC_INTERVAL,
            limit,
        )
    }))
    .await
    .into_iter()
    .flatten()
    .collect()
}

/// The /metrics page built on `endpoints` counts `accepted` connections opened to `url`.
fn assert_connections_shown(
    endpoints: &sluice::http_client::Endpoints,
    url: &str,
    accepted: usize,
) {
    let text = Metrics::with_connections(endpoints.clone())
        .encode()
        .expect("encode");
    let line = format!("sluice_http_connections_opened_total{{endpoint=\"{url}\"}} {accepted}\n");
    assert!(text.contains(&line), "{line:?} not in\n{text}");
}

#[tokio::test]
async fn metric_queries_reuse_at_most_concurrency_connections_per_endpoint() {
    let limit = 6;
    let canaries = 150;
    let server = GroupServer::start(limit).await;
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None);
    // Every canary at once: only the endpoint's limit holds the queries back.
    for m in observe_all(&access, &server.url, canaries, limit).await {
        assert!(matches!(m.value, MetricValue::Value(_)), "{m:?}");
    }
    let (accepted, requests, most_in_flight) = {
        let c = server.counts();
        (c.accepted, c.requests, c.most_in_flight)
    };
    assert_eq!(requests, canaries * 2);
    assert_eq!(
        most_in_flight, limit,
        "never more than the limit in flight, and the limit is used"
    );
    assert!(
        (1..=limit).contains(&accepted),
        "{requests} queries opened {accepted} connections (limit {limit})"
    );

    // The /metrics page shows the same count.
    assert_connections_shown(access.endpoints(), &server.url, accepted);
}

#[tokio::test]
async fn a_lower_concurrency_setting_lowers_the_connections_and_queries_in_flight() {
    let limit = 2;
    let server = GroupServer::start(limit).await;
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None);
    let observed = observe_all(&access, &server.url, 40, limit).await;
    assert!(observed
        .iter()
        .all(|m| matches!(m.value, MetricValue::Value(_))));
    let c = server.counts();
    assert_eq!(c.requests, 80);
    assert_eq!(c.most_in_flight, limit);
    assert!((1..=limit).contains(&c.accepted), "{c:?}");
}

/// A canary in the middle of its analysis, its step started an hour before `now`: its checks
/// are judged now, so its metrics are due.
fn progressing(now: jiff::Timestamp) -> Status {
    let started = now - jiff::SignedDuration::from_hours(1);
    serde_json::from_value(serde_json::json!({
        "phase": "Progressing",
        "step": 1,
        "canaryWeight": 10,
        "primaryWeight": 90,
        "failedChecks": 0,
        "promotedRevision": "old",
        "canaryRevision": "new",
        "phaseSince": started.to_string(),
        "stepStarted": started.to_string(),
        "message": "",
    }))
    .expect("status")
}

#[test]
fn the_observe_step_honours_prometheus_concurrency_from_the_repo_settings() {
    let runtime = Runtime::with_env(Default::default()).expect("runtime");
    let server = runtime.block_on(GroupServer::start(3));
    let config = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprometheus:\n  address: {}\n  concurrency: 3\n",
        server.url
    );
    let settings = parse_settings(SETTINGS_PATH, &config).expect("settings");
    let canary = flagger_canary("osm", "", TWO_METRICS);
    let now = jiff::Timestamp::now();
    let status = progressing(now);
    let requests: Vec<Request<'_>> = (0..60)
        .map(|_| Request {
            canary: &canary,
            status: Some(&status),
            revision: "new",
        })
        .collect();
    let observed = Live::new(&runtime).observe(&TemplateIndex::new(), &settings, &requests, now);
    assert_eq!(observed.len(), 60);
    let unanswered: Vec<_> = observed
        .iter()
        .flat_map(|e| &e.metrics)
        .filter(|m| !matches!(m.value, MetricValue::Value(_)))
        .collect();
    assert!(
        unanswered.is_empty(),
        "{unanswered:?} with {:?}",
        server.counts()
    );
    let accepted = {
        let c = server.counts();
        assert_eq!(c.requests, 120);
        assert_eq!(c.most_in_flight, 3);
        assert!((1..=3).contains(&c.accepted), "{c:?}");
        c.accepted
    };
    // The daemon's /metrics page reads the same clients.
    assert_connections_shown(runtime.prometheus().endpoints(), &server.url, accepted);
}
