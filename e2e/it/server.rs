//! The daemon's HTTP endpoints, served on 127.0.0.1:0 and requested with reqwest: probes (on
//! the main listener and on their own), /metrics parsed as the OpenMetrics text format, signed
//! webhooks waking the loop once per body, and the per-peer connection limit.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice::server::{serve, serve_probes, serve_with, Limits, Metrics, ServerState};
use tokio::sync::oneshot;

use crate::support::github_signature;

struct Running {
    base: String,
    state: ServerState,
    client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Which listener a test serves.
enum Serve {
    Main,
    MainWithin(Limits),
    Probes,
}

async fn start(secret: Option<&str>) -> Running {
    start_serving(secret, Serve::Main).await
}

async fn start_serving(secret: Option<&str>, which: Serve) -> Running {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let state = ServerState::new(
        Metrics::new(),
        secret.map(str::to_string),
        std::sync::Arc::new(sluice::clock::Clock::Wall),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let task = match which {
        Serve::Main => tokio::spawn(serve(listener, state.clone(), shutdown)),
        Serve::MainWithin(limits) => {
            tokio::spawn(serve_with(listener, state.clone(), limits, shutdown))
        }
        Serve::Probes => tokio::spawn(serve_probes(listener, state.clone(), shutdown)),
    };
    Running {
        base,
        state,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client"),
        stop: Some(stop),
        task,
    }
}

impl Running {
    async fn get(&self, path: &str) -> (u16, String, String) {
        let res = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        let code = res.status().as_u16();
        let ctype = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        (code, ctype, res.text().await.expect("body"))
    }

    async fn hook(&self, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut req = self
            .client
            .post(format!("{}/hooks/git", self.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let res = req.send().await.expect("request");
        (res.status().as_u16(), res.text().await.expect("body"))
    }

    /// Whether the loop would be woken within `wait`.
    async fn woken_within(&self, wait: Duration) -> bool {
        tokio::time::timeout(wait, self.state.woken()).await.is_ok()
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("server stops on shutdown")
            .expect("task");
        assert!(result.is_ok(), "{result:?}");
    }
}

/// One sample of the OpenMetrics text format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A strict line check of the OpenMetrics text exposition: `# HELP`/`# TYPE`/`# UNIT`
/// metadata, samples `name{l="v",...} value` belonging to a declared family, and `# EOF` as
/// the last line. Panics with the offending line.
fn parse_openmetrics(text: &str) -> Vec<Sample> {
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.last(), Some(&""), "text must end with a newline");
    let lines = &lines[..lines.len() - 1];
    assert_eq!(lines.last(), Some(&"# EOF"), "last line must be # EOF");
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (what, name, arg) = (parts.next(), parts.next(), parts.next());
            let name = name.unwrap_or_else(|| panic!("bad metadata line {line:?}"));
            assert!(valid_name(name), "bad metric name in {line:?}");
            match what {
                Some("TYPE") => {
                    let kind = arg.unwrap_or_else(|| panic!("no type in {line:?}"));
                    assert!(
                        [
                            "counter",
                            "gauge",
                            "histogram",
                            "summary",
                            "info",
                            "stateset",
                            "gaugehistogram",
                            "unknown"
                        ]
                        .contains(&kind),
                        "bad type in {line:?}"
                    );
                    families.insert(name.to_string(), kind.to_string());
                }
                Some("HELP") | Some("UNIT") => {}
                _ => panic!("unknown metadata line {line:?}"),
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample line {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("unclosed labels in {line:?}"));
                let mut labels = BTreeMap::new();
                for pair in body.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair
                        .split_once('=')
                        .unwrap_or_else(|| panic!("bad label in {line:?}"));
                    assert!(valid_name(k), "bad label name in {line:?}");
                    let v = v
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or_else(|| panic!("unquoted label value in {line:?}"));
                    assert!(labels.insert(k.to_string(), v.to_string()).is_none());
                }
                (name, labels)
            }
        };
        assert!(valid_name(name), "bad sample name in {line:?}");
        let family = families
            .iter()
            .find(|(f, kind)| match kind.as_str() {
                "counter" => name == format!("{f}_total") || name == format!("{f}_created"),
                _ => name == f.as_str(),
            })
            .unwrap_or_else(|| panic!("sample {name} has no # TYPE before it"));
        let _ = family;
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    samples
}

fn find<'s>(samples: &'s [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'s Sample> {
    samples.iter().find(|s| {
        s.name == name
            && s.labels.len() == labels.len()
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

#[tokio::test]
async fn probes_report_liveness_and_readiness_after_the_first_fetch() {
    let server = start(None).await;
    assert_eq!(server.get("/healthz").await.0, 200);
    let (code, _, body) = server.get("/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("not been fetched yet"), "{body}");
    server.state.set_ready();
    assert_eq!(server.get("/readyz").await.0, 200);
    assert_eq!(server.get("/healthz").await.0, 200);
    assert_eq!(server.get("/nope").await.0, 404);
    server.stop().await;
}

#[tokio::test]
async fn metrics_expose_canary_series_in_openmetrics_text() {
    let server = start(None).await;
    let m = server.state.metrics();
    m.record_canary("prod", "podinfo", "Progressing", 20, 1, 42.5);
    m.record_canary("prod", "podinfo", "Progressing", 40, 2, 72.5);
    m.record_canary("test", "web", "Succeeded", 0, 0, 0.0);
    m.tick();
    m.tick();
    m.tick();
    m.push_retry(2);
    m.error("fetch");
    m.error("fetch");
    m.error("push");

    let (code, ctype, body) = server.get("/metrics").await;
    assert_eq!(code, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    let samples = parse_openmetrics(&body);
    let podinfo = [("namespace", "prod"), ("name", "podinfo")];
    let value = |name: &str, labels: &[(&str, &str)]| {
        find(&samples, name, labels)
            .unwrap_or_else(|| panic!("{name}{labels:?} missing in\n{body}"))
            .value
    };
    assert_eq!(value("sluice_canary_weight", &podinfo), 40.0);
    assert_eq!(
        value(
            "sluice_canary_weight",
            &[("namespace", "test"), ("name", "web")]
        ),
        0.0
    );
    assert_eq!(value("sluice_canary_failed_checks", &podinfo), 2.0);
    assert_eq!(value("sluice_canary_analysis_seconds", &podinfo), 72.5);
    assert_eq!(
        value(
            "sluice_canary_phase",
            &[
                ("namespace", "prod"),
                ("name", "podinfo"),
                ("phase", "Progressing")
            ]
        ),
        1.0
    );
    assert_eq!(value("sluice_reconcile_ticks_total", &[]), 3.0);
    assert_eq!(value("sluice_push_retries_total", &[]), 2.0);
    assert_eq!(value("sluice_errors_total", &[("kind", "fetch")]), 2.0);
    assert_eq!(value("sluice_errors_total", &[("kind", "push")]), 1.0);
    server.stop().await;
}

#[tokio::test]
async fn webhooks_without_a_secret_are_refused_with_how_to_set_one() {
    let server = start(None).await;
    let body = r#"{"ref":"refs/heads/main"}"#;
    let (code, text) = server
        .hook(
            &[
                ("x-github-event", "push"),
                ("x-hub-signature-256", &github_signature("", body)),
            ],
            body,
        )
        .await;
    assert_eq!(code, 503);
    assert!(text.contains("SLUICE_WEBHOOK_SECRET"), "{text}");
    assert!(!server.woken_within(Duration::from_millis(200)).await);
    server.stop().await;
}

#[tokio::test]
async fn github_push_with_a_bad_or_missing_signature_is_401_and_wakes_nothing() {
    let server = start(Some("s3cret")).await;
    let body = r#"{"ref":"refs/heads/main","after":"0123456789abcdef0123456789abcdef01234567"}"#;
    for headers in [
        vec![("x-github-event", "push")],
        vec![
            ("x-github-event", "push"),
            ("x-hub-signature-256", "sha256=00"),
        ],
        vec![
            ("x-github-event", "push"),
            (
                "x-hub-signature-256",
                github_signature("wrong", body).as_str(),
            ),
        ],
        vec![
            ("x-github-event", "push"),
            ("x-hub-signature-256", "not-a-signature"),
        ],
    ] {
        let (code, text) = server.hook(&headers, body).await;
        assert_eq!(code, 401, "{headers:?}: {text}");
    }
    // Signed for another body (a replayed signature on a tampered payload).
    let sig = github_signature("s3cret", r#"{"ref":"refs/heads/other"}"#);
    let (code, _) = server
        .hook(
            &[("x-github-event", "push"), ("x-hub-signature-256", &sig)],
            body,
        )
        .await;
    assert_eq!(code, 401);
    assert!(!server.woken_within(Duration::from_millis(300)).await);
    server.stop().await;
}

#[tokio::test]
async fn github_push_and_pull_request_with_a_valid_signature_wake_the_loop() {
    let server = start(Some("s3cret")).await;
    for (event, body) in [
        (
            "push",
            r#"{"ref":"refs/heads/main","after":"0123456789abcdef0123456789abcdef01234567"}"#,
        ),
        (
            "pull_request",
            r#"{"action":"closed","pull_request":{"merged":true}}"#,
        ),
    ] {
        let sig = github_signature("s3cret", body);
        let (code, text) = server
            .hook(
                &[("x-github-event", event), ("x-hub-signature-256", &sig)],
                body,
            )
            .await;
        assert_eq!(code, 202, "{event}: {text}");
        assert!(
            server.woken_within(Duration::from_secs(5)).await,
            "{event} did not wake the loop"
        );
    }
    // GitHub's ping when the hook is created: answered, no wake-up.
    let sig = github_signature("s3cret", "{}");
    let (code, _) = server
        .hook(
            &[("x-github-event", "ping"), ("x-hub-signature-256", &sig)],
            "{}",
        )
        .await;
    assert_eq!(code, 200);
    assert!(!server.woken_within(Duration::from_millis(200)).await);
    server.stop().await;
}

#[tokio::test]
async fn gitlab_token_must_match() {
    let server = start(Some("gl-token")).await;
    let body = r#"{"object_kind":"push","ref":"refs/heads/main"}"#;
    let (code, _) = server
        .hook(
            &[
                ("x-gitlab-event", "Push Hook"),
                ("x-gitlab-token", "gl-tokeN"),
            ],
            body,
        )
        .await;
    assert_eq!(code, 401);
    assert!(!server.woken_within(Duration::from_millis(200)).await);
    let (code, _) = server
        .hook(
            &[
                ("x-gitlab-event", "Merge Request Hook"),
                ("x-gitlab-token", "gl-token"),
            ],
            body,
        )
        .await;
    assert_eq!(code, 202);
    assert!(server.woken_within(Duration::from_secs(5)).await);
    server.stop().await;
}

#[tokio::test]
async fn the_probe_listener_serves_the_probes_and_nothing_else() {
    let server = start_serving(Some("s3cret"), Serve::Probes).await;
    assert_eq!(server.get("/healthz").await.0, 200);
    let (code, _, body) = server.get("/readyz").await;
    assert_eq!(code, 503, "{body}");
    server.state.set_ready();
    assert_eq!(server.get("/readyz").await.0, 200);
    assert_eq!(server.get("/metrics").await.0, 404);
    let body = r#"{"ref":"refs/heads/main"}"#;
    let sig = github_signature("s3cret", body);
    let (code, _) = server
        .hook(
            &[("x-github-event", "push"), ("x-hub-signature-256", &sig)],
            body,
        )
        .await;
    assert_eq!(code, 404, "webhooks go to the main listener only");
    assert!(!server.woken_within(Duration::from_millis(200)).await);
    server.stop().await;
}

#[tokio::test]
async fn the_same_signed_body_wakes_once_whatever_its_delivery_id() {
    let server = start(Some("s3cret")).await;
    let body = r#"{"ref":"refs/heads/main","after":"0123456789abcdef0123456789abcdef01234567"}"#;
    let sig = github_signature("s3cret", body);
    let send = |delivery: &'static str, body: &'static str, sig: String| {
        let server = &server;
        async move {
            server
                .hook(
                    &[
                        ("x-github-event", "push"),
                        ("x-github-delivery", delivery),
                        ("x-hub-signature-256", &sig),
                    ],
                    body,
                )
                .await
        }
    };
    let (code, _) = send("d-1", body, sig.clone()).await;
    assert_eq!(code, 202);
    assert!(server.woken_within(Duration::from_secs(5)).await);
    for delivery in ["d-1", "d-2", "d-3"] {
        let (code, text) = send(delivery, body, sig.clone()).await;
        assert_eq!(code, 200, "{delivery}: {text}");
        assert!(text.contains("already received"), "{text}");
    }
    assert!(!server.woken_within(Duration::from_millis(300)).await);
    // Another body (the next push) wakes again.
    let other = r#"{"ref":"refs/heads/main","after":"89abcdef0123456789abcdef0123456789abcdef"}"#;
    let (code, _) = send("d-4", other, github_signature("s3cret", other)).await;
    assert_eq!(code, 202);
    assert!(server.woken_within(Duration::from_secs(5)).await);
    server.stop().await;
}

/// Opens a connection to `base` (`http://ip:port`) from the loopback address `from`.
async fn connect_from(from: &str, base: &str) -> tokio::net::TcpStream {
    let target: std::net::SocketAddr = base.trim_start_matches("http://").parse().expect("addr");
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("from"))
        .expect("bind");
    socket.connect(target).await.expect("connect")
}

/// Whether the server closes `stream` before answering anything within `wait`.
async fn closed_within(stream: &mut tokio::net::TcpStream, wait: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(wait, stream.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test]
async fn one_peer_holds_at_most_its_share_of_connections() {
    let limits = Limits {
        max_per_peer: 3,
        header_timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let server = start_serving(None, Serve::MainWithin(limits)).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from("127.0.0.1", &server.base).await);
    }
    // Each is served: the server reads from them until the header timeout.
    for stream in &mut held {
        assert!(!closed_within(stream, Duration::from_millis(200)).await);
    }
    let mut one_more = connect_from("127.0.0.1", &server.base).await;
    assert!(
        closed_within(&mut one_more, Duration::from_secs(5)).await,
        "a fourth connection from the same peer is closed at once"
    );
    // Another peer is served meanwhile.
    let mut other = connect_from("127.0.0.2", &server.base).await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    other
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), other.read_to_string(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A place given back is taken again.
    held.pop();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = connect_from("127.0.0.1", &server.base).await;
        if !closed_within(&mut again, Duration::from_millis(200)).await {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the place never came back"
        );
    }
    drop(held);
    server.stop().await;
}
