//! The Prometheus client against canned HTTP answers: how each kind of answer is read, and
//! what the request looks like. Real Prometheus semantics are tested in `prometheus_e2e.rs`.

use std::time::Duration;

use sluice::core::observe::MetricValue;
use sluice::metrics::prometheus::{Auth, Prometheus, PrometheusConfig};

use crate::support::metrics::{closed_port_url, Canned, Server};

const ONE: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"app":"podinfo"},"value":[1700000000.1,"99.25"]}]}}"#;

async fn answer(canned: Canned) -> MetricValue {
    let server = Server::start(vec![canned]).await;
    let prom = Prometheus::new(&PrometheusConfig::new(server.url())).unwrap();
    prom.query("sum(x)").await
}

fn error_of(value: MetricValue) -> String {
    match value {
        MetricValue::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn one_sample_is_a_value_canned_http_vector() {
    assert_eq!(
        answer(Canned::json(200, ONE)).await,
        MetricValue::Value(99.25)
    );
}

#[tokio::test]
async fn scalar_is_a_value_canned_http_scalar() {
    let body = r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"42"]}}"#;
    assert_eq!(
        answer(Canned::json(200, body)).await,
        MetricValue::Value(42.0)
    );
}

#[tokio::test]
async fn empty_vector_is_no_data_canned_http_empty() {
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    assert_eq!(answer(Canned::json(200, body)).await, MetricValue::NoData);
}

#[tokio::test]
async fn nan_is_returned_for_the_core_to_fail_canned_http_nan() {
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#;
    assert!(matches!(answer(Canned::json(200, body)).await, MetricValue::Value(v) if v.is_nan()));
}

#[tokio::test]
async fn two_series_are_an_error_canned_http_multiple_series() {
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1,"1"]},{"metric":{"pod":"b"},"value":[1,"2"]}]}}"#;
    assert_eq!(
        answer(Canned::json(200, body)).await,
        MetricValue::Error("query returned 2 series; expected one".into())
    );
}

#[tokio::test]
async fn matrix_is_an_error_canned_http_matrix() {
    let body = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"2"]]}]}}"#;
    let e = error_of(answer(Canned::json(200, body)).await);
    assert!(e.contains("range vector"), "{e}");
}

#[tokio::test]
async fn http_errors_carry_the_status_and_a_documented_error_type_canned_http_status() {
    let server = Server::start(vec![Canned::json(
        400,
        r#"{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected \")\""}"#,
    )])
    .await;
    let prom = Prometheus::new(&PrometheusConfig::new(server.url())).unwrap();
    let e = error_of(prom.query("sum(x))").await);
    assert_eq!(
        e,
        format!("Prometheus {}: answered HTTP 400 (bad_data)", server.url())
    );

    let e = error_of(answer(Canned::new(502, "<html>Bad Gateway</html>")).await);
    assert!(e.ends_with("answered HTTP 502"), "{e}");
    let e = error_of(answer(Canned::new(401, "")).await);
    assert!(e.ends_with("answered HTTP 401"), "{e}");
}

#[tokio::test]
async fn status_error_with_200_is_an_error_canned_http_status_error() {
    let body = r#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#;
    let e = error_of(answer(Canned::json(200, body)).await);
    assert_eq!(e, "answered status \"error\" (timeout)");
}

#[tokio::test]
async fn bad_bodies_are_errors_canned_http_bad_body() {
    for body in [
        &b"not json"[..],
        b"{\"status\":\"success\"}",
        b"\xff\xfe\x00",
        b"",
    ] {
        let e = error_of(answer(Canned::new(200, body.to_vec())).await);
        assert!(!e.is_empty());
    }
}

#[tokio::test]
async fn slow_answers_time_out_canned_http_timeout() {
    let server = Server::start(vec![Canned::json(200, ONE).delay(Duration::from_secs(5))]).await;
    let mut config = PrometheusConfig::new(server.url());
    config.timeout = Duration::from_millis(300);
    let prom = Prometheus::new(&config).unwrap();
    let e = error_of(prom.query("sum(x)").await);
    assert_eq!(
        e,
        format!("Prometheus {}: timed out after 300ms", server.url())
    );
}

#[tokio::test]
async fn refused_connection_is_an_error() {
    let url = closed_port_url().await;
    let prom = Prometheus::new(&PrometheusConfig::new(&url)).unwrap();
    let e = error_of(prom.query("vector(1)").await);
    assert!(
        e.starts_with(&format!("Prometheus {url}: cannot connect")),
        "{e}"
    );
}

#[tokio::test]
async fn request_is_a_get_with_the_collapsed_query_canned_http_request_shape() {
    let server = Server::start(vec![Canned::json(200, ONE)]).await;
    let prom = Prometheus::new(&PrometheusConfig::new(format!("{}/prom/", server.url()))).unwrap();
    let value = prom
        .query("sum(\n  rate(x{a=\"b c\", d=~\"5.*\"}[1m])\n) * 100")
        .await;
    assert_eq!(value, MetricValue::Value(99.25));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.method, "GET");
    assert_eq!(r.path(), "/prom/api/v1/query");
    assert_eq!(
        r.query_param("query").as_deref(),
        Some("sum( rate(x{a=\"b c\", d=~\"5.*\"}[1m]) ) * 100")
    );
    assert_eq!(r.header("authorization"), None);
}

#[tokio::test]
async fn credentials_and_headers_are_sent_canned_http_auth() {
    let server = Server::start(vec![Canned::json(200, ONE)]).await;
    let mut config = PrometheusConfig::new(server.url());
    config.auth = Auth::Bearer("s3cret".into());
    config.headers = vec![
        ("X-Scope-OrgID".into(), "tenant-a".into()),
        ("X-Extra".into(), "1".into()),
    ];
    Prometheus::new(&config).unwrap().query("up").await;
    config.auth = Auth::Basic {
        username: "grafana".into(),
        password: "pw".into(),
    };
    config.headers.clear();
    Prometheus::new(&config).unwrap().query("up").await;
    let requests = server.requests();
    assert_eq!(requests[0].header("authorization"), Some("Bearer s3cret"));
    assert_eq!(requests[0].header("x-scope-orgid"), Some("tenant-a"));
    assert_eq!(requests[0].header("x-extra"), Some("1"));
    // base64("grafana:pw")
    assert_eq!(
        requests[1].header("authorization"),
        Some("Basic Z3JhZmFuYTpwdw==")
    );
}

#[tokio::test]
async fn huge_bodies_are_refused_not_buffered_canned_http_huge_body() {
    let body = vec![b' '; 5 * 1024 * 1024];
    let e = error_of(answer(Canned::new(200, body)).await);
    assert!(e.contains("larger than"), "{e}");
}

/// A server that answers the first request of its first connection, then reads the second
/// request on that same kept-alive connection and hangs up without answering (as a restarted
/// or idle-timed-out Prometheus does to a pooled connection); later connections are answered.
fn hang_up_on_the_second_request() -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let read_request = |reader: &mut BufReader<std::net::TcpStream>| -> bool {
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => return false,
                    Ok(_) if line == "\r\n" => return true,
                    Ok(_) => {}
                }
            }
        };
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{ONE}",
            ONE.len()
        );
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            if !read_request(&mut reader) {
                continue;
            }
            writer.write_all(reply.as_bytes()).unwrap();
            if n == 0 {
                // The same connection's next request: read it, then hang up unanswered.
                read_request(&mut reader);
                drop(writer);
                continue;
            }
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_retried_on_a_fresh_one() {
    let url = hang_up_on_the_second_request();
    let http = sluice::http_client::client(false).unwrap();
    let prom = Prometheus::with_client(http, &PrometheusConfig::new(url)).unwrap();
    assert_eq!(prom.query("sum(x)").await, MetricValue::Value(99.25));
    assert_eq!(
        prom.query("sum(x)").await,
        MetricValue::Value(99.25),
        "the second query reused the pooled connection the server hung up on"
    );
}
