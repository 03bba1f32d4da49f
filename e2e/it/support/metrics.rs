//! Test helpers: a tiny HTTP/1.1 responder on 127.0.0.1 that answers with canned responses and
//! records what it received, and canary builders. The responder knows nothing about Prometheus
//! or webhooks; tests give it bodies.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice::core::observe::{MetricObservation, MetricValue};
use sluice::http_client::HttpClients;
use sluice::manifest::load::load_text;
use sluice::manifest::model::Canary;
use sluice::manifest::settings::{Settings, DEFAULT_PROMETHEUS_CONCURRENCY};
use sluice::metrics::cloudwatch::CloudwatchEnv;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::metrics::prometheus::{Auth, PrometheusAccess};
use sluice::metrics::{observe_metrics, target_name};
use sluice::secrets::Secrets;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One canned answer.
#[derive(Debug, Clone)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Wait this long before answering (for timeouts).
    pub delay: Duration,
    /// Answer only once this is released (for a backend slower than its client waits).
    pub hold: Option<Hold>,
}

/// Holds answers until the test releases them, and counts the clients that gave up waiting
/// (closed the connection) before that.
#[derive(Debug, Clone)]
pub struct Hold {
    released: Arc<tokio::sync::watch::Sender<bool>>,
    gave_up: Arc<Mutex<usize>>,
}

impl Hold {
    pub fn new() -> Hold {
        Hold {
            released: Arc::new(tokio::sync::watch::channel(false).0),
            gave_up: Arc::default(),
        }
    }

    /// Every held answer, and every later one, is sent.
    pub fn release(&self) {
        self.released.send_replace(true);
    }

    /// Clients that closed their connection while their answer was held.
    pub fn gave_up(&self) -> usize {
        *self.gave_up.lock().expect("lock")
    }

    /// Waits until released (`true`), or until the client on `stream` closes it (`false`).
    async fn answer_or_client_gone(&self, stream: &mut TcpStream) -> bool {
        let mut released = self.released.subscribe();
        let mut byte = [0u8; 1];
        tokio::select! {
            _ = released.wait_for(|r| *r) => true,
            _ = stream.read(&mut byte) => {
                *self.gave_up.lock().expect("lock") += 1;
                false
            }
        }
    }
}

impl Canned {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Canned {
        Canned {
            status,
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
            hold: None,
        }
    }

    pub fn json(status: u16, body: &str) -> Canned {
        Canned::new(status, body).header("Content-Type", "application/json")
    }

    pub fn header(mut self, name: &str, value: &str) -> Canned {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Canned {
        self.delay = delay;
        self
    }

    /// This answer, sent once `hold` is released.
    pub fn held(mut self, hold: &Hold) -> Canned {
        self.hold = Some(hold.clone());
        self
    }

    /// An answer with `status` whose body echoes everything `request` sent (request line,
    /// headers, body) after `marker`, as a backend that copies what it received into its error
    /// page does.
    pub fn echo(status: u16, marker: &str, request: &Recorded) -> Canned {
        let mut body = format!("{marker} {} {}\n", request.method, request.target);
        for (k, v) in &request.headers {
            body.push_str(&format!("{k}: {v}\n"));
        }
        body.push_str(&String::from_utf8_lossy(&request.body));
        Canned::new(status, body)
    }
}

/// What the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The decoded value of one query parameter.
    pub fn query_param(&self, name: &str) -> Option<String> {
        let query = self.target.split_once('?')?.1;
        query.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == name).then(|| percent_decode(v))
        })
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ascii");
                out.push(u8::from_str_radix(hex, 16).expect("hex"));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).expect("utf-8")
}

/// A responder: answers requests with `responses` in order, repeating the last one.
pub struct Server {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start(responses: Vec<Canned>) -> Server {
        assert!(
            !responses.is_empty(),
            "give the server at least one response"
        );
        Server::start_with(move |i| responses[i.min(responses.len() - 1)].clone()).await
    }

    /// A server whose `i`-th answer (0-based) is `respond(i)`.
    pub async fn start_with(respond: impl Fn(usize) -> Canned + Send + Sync + 'static) -> Server {
        Server::start_answering(move |i, _| respond(i)).await
    }

    /// A server that answers each request with `respond(request)`, as one endpoint serving
    /// several callers tells them apart by what they send.
    pub async fn start_routed(
        respond: impl Fn(&Recorded) -> Canned + Send + Sync + 'static,
    ) -> Server {
        Server::start_answering(move |_, r| respond(r)).await
    }

    /// A server whose answer to its `i`-th connection (0-based, in accept order), which sent
    /// `request`, is `respond(i, request)`.
    async fn start_answering(
        respond: impl Fn(usize, &Recorded) -> Canned + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        let respond = Arc::new(respond);
        let task = tokio::spawn(async move {
            let mut count = 0usize;
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let i = count;
                count += 1;
                let recorded = Arc::clone(&recorded);
                let respond = Arc::clone(&respond);
                tokio::spawn(async move {
                    let _ = serve(stream, |r| respond(i, r), recorded).await;
                });
            }
        });
        Server {
            addr,
            requests,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }

    /// The `query` parameter of each request that has one, in the order they came.
    pub fn queries(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter_map(|r| r.query_param("query"))
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut stream: TcpStream,
    respond: impl Fn(&Recorded) -> Canned,
    recorded: Arc<Mutex<Vec<Recorded>>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let request = Recorded {
        method,
        target,
        headers,
        body,
    };
    let canned = respond(&request);
    recorded.lock().expect("lock").push(request);
    tokio::time::sleep(canned.delay).await;
    if let Some(hold) = &canned.hold {
        if !hold.answer_or_client_gone(&mut stream).await {
            return Ok(());
        }
    }
    let mut response = format!(
        "HTTP/1.1 {} Canned\r\nContent-Length: {}\r\nConnection: close\r\n",
        canned.status,
        canned.body.len()
    );
    for (k, v) in &canned.headers {
        response.push_str(&format!("{k}: {v}\r\n"));
    }
    response.push_str("\r\n");
    stream.write_all(response.as_bytes()).await?;
    stream.write_all(&canned.body).await?;
    stream.shutdown().await
}

/// An address nothing listens on (bound, then released).
pub async fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}")
}

/// The files of the loop tests' apps `names`: each `apps/<name>/deployment.yaml`
/// ([`loop_deployment`] of image `<name>:1`) and `apps/<name>/canary.yaml` (`canary(name)`).
pub fn loop_apps(names: &[&str], canary: impl Fn(&str) -> String) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for name in names {
        files.push((
            format!("apps/{name}/deployment.yaml"),
            loop_deployment(name, &format!("{name}:1")),
        ));
        files.push((format!("apps/{name}/canary.yaml"), canary(name)));
    }
    files
}

/// A Deployment `name` in `test` running `image`, two replicas: the source of the loop tests.
pub fn loop_deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: test}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n      - {{name: app, image: '{image}'}}\n"
    )
}

/// The analysis interval of [`loop_canary`]: a test on a stepped clock jumps this far.
pub const LOOP_INTERVAL: Duration = Duration::from_secs(2);

/// An OSM canary of [`loop_deployment`] `name`: one 50 % step every 2 s ([`LOOP_INTERVAL`]),
/// threshold 2, judged by `metrics` (YAML list items indented six spaces).
pub fn loop_canary(name: &str, metrics: &str) -> String {
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
{metrics}"
    )
}

/// A Flagger canary `podinfo` in namespace `test`, targeting Deployment `podinfo`, with the
/// given provider, extra spec lines (indented two spaces) and analysis metrics (YAML list
/// items indented six spaces).
pub fn flagger_canary(provider: &str, spec_extra: &str, metrics: &str) -> Canary {
    let text = crate::support::canary::podinfo()
        .namespace("test")
        .provider(provider)
        .spec(spec_extra)
        .service("    port: 9898")
        .interval("30s")
        .threshold(Some(5))
        .yaml(&format!(
            "    stepWeight: 10\n    maxWeight: 50\n    metrics:\n{}",
            metrics.trim_end_matches('\n')
        ));
    let loaded = load_text("canary.yaml", &text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}\n{text}", loaded.errors);
    loaded.canaries.into_iter().next().expect("one canary")
}

/// The one metric of the canaries `observe_template` reads: template `t` in `test`, `max: 1`.
pub const ONE_METRIC: &str = "      - name: m
        templateRef: {name: t, namespace: test}
        thresholdRange: {max: 1}
        interval: 1m
";

/// The metric providers' access (no Prometheus auth) with `env` as the process environment:
/// mapped Secrets and AWS variables.
pub fn access_with_env(env: &[(&str, &str)]) -> PrometheusAccess {
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let aws = CloudwatchEnv::from_lookup(|k| env.get(k).cloned());
    PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None)
        .with_secrets(Secrets::from_vars(env))
        .with_cloudwatch(aws)
}

/// Observes [`ONE_METRIC`] of a Flagger canary with `template` (the text of MetricTemplate
/// `t` in `test`) and `env` as the process environment: mapped Secrets and AWS variables.
pub async fn observe_template(template: &str, env: &[(&str, &str)]) -> MetricValue {
    let mut templates = TemplateIndex::new();
    let errors = templates.add_text("t.yaml", template);
    assert!(errors.is_empty(), "{errors:?}");
    let access = access_with_env(env);
    let canary = flagger_canary("osm", "", ONE_METRIC);
    let obs = observe_metrics(
        &access,
        &canary,
        target_name(&canary).expect("target"),
        &templates,
        None,
        Duration::from_secs(60),
        DEFAULT_PROMETHEUS_CONCURRENCY,
    )
    .await;
    match obs.as_slice() {
        [MetricObservation { name, value }] if name == "m" => value.clone(),
        other => panic!("{other:?}"),
    }
}

/// `<phase>:<canary weight>` of canary `name` (namespace `test`) at the remote's main.
pub fn phase(bare: &std::path::Path, name: &str) -> String {
    let text = crate::support::git(
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
