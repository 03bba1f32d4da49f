//! The demo's metrics source: an in-process HTTP endpoint speaking Prometheus' instant-query
//! and range-query APIs (`GET /api/v1/query`, `GET /api/v1/query_range`) with scripted values,
//! so `sluice demo` shows metric gating and the statistical judge with no Prometheus
//! installed. Latency queries (`histogram_quantile`) answer in milliseconds; every other query
//! answers the success rate. An instant query answers the canary's value (what threshold
//! metrics measure). A range query answers the primary's series when the query names a
//! `-primary` workload, else the canary's: each value the scripted one with a little noise,
//! the same value for the same timestamp, the canary's latency `canary_latency_factor` times
//! the primary's.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::extract::Query;
use axum::routing::get;
use axum::{Json, Router};

use crate::runtime::Runtime;

/// The values the endpoint serves.
#[derive(Debug, Clone, Copy)]
pub struct Script {
    pub success_rate: f64,
    /// The primary's latency; the canary's is `canary_latency_factor` times it.
    pub latency_ms: f64,
    pub canary_latency_factor: f64,
}

impl Script {
    /// A canary as fast as its primary.
    pub fn new(success_rate: f64, latency_ms: f64) -> Script {
        Script {
            success_rate,
            latency_ms,
            canary_latency_factor: 1.0,
        }
    }

    /// The canary's latency: what an instant latency query answers.
    pub fn canary_latency_ms(&self) -> f64 {
        self.latency_ms * self.canary_latency_factor
    }
}

/// A running endpoint; stops when dropped.
pub struct ScriptedPrometheus {
    pub address: String,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedPrometheus {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The instant answer to `query` at `now` (the demo's clock).
fn answer(script: Script, query: &str, now: jiff::Timestamp) -> serde_json::Value {
    let value = if query.contains("histogram_quantile") {
        script.canary_latency_ms()
    } else {
        script.success_rate
    };
    let now = now.as_millisecond() as f64 / 1000.0;
    serde_json::json!({
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [now, value.to_string()]}]}
    })
}

/// The most values one range answer holds (Prometheus refuses more than 11,000 too).
const MAX_RANGE_POINTS: f64 = 11_000.0;

/// A number in 0..1 from `t` (milliseconds) and `seed`: splitmix64, so a timestamp always
/// gets the same noise.
fn noise(t: i64, seed: u64) -> f64 {
    let mut z = (t as u64).wrapping_add(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The value of the series `query` asks for at `t` (milliseconds): latency within ±2 % of its
/// scripted value, the success rate within ±0.02 points (at most 100).
fn range_value(script: Script, query: &str, t: i64) -> f64 {
    let primary = query.contains("-primary");
    let seed = if primary { 1 } else { 2 };
    if query.contains("histogram_quantile") {
        let base = if primary {
            script.latency_ms
        } else {
            script.canary_latency_ms()
        };
        base * (1.0 + 0.04 * (noise(t, seed) - 0.5))
    } else {
        (script.success_rate + 0.04 * (noise(t, seed + 10) - 0.5)).min(100.0)
    }
}

/// A range answer: one value every `step` seconds from `start` to `end` (Unix seconds), or
/// Prometheus' error for parameters it would refuse.
fn range_answer(script: Script, params: &HashMap<String, String>) -> serde_json::Value {
    let number = |key: &str| params.get(key).and_then(|v| v.parse::<f64>().ok());
    let query = params.get("query").map(String::as_str).unwrap_or_default();
    let (Some(start), Some(end), Some(step)) = (number("start"), number("end"), number("step"))
    else {
        return serde_json::json!({"status": "error", "errorType": "bad_data", "error": "start, end and step are required"});
    };
    if !(step > 0.0 && end >= start && (end - start) / step < MAX_RANGE_POINTS) {
        return serde_json::json!({"status": "error", "errorType": "bad_data", "error": "exceeded maximum resolution of 11,000 points per timeseries"});
    }
    let mut values = Vec::new();
    let mut t = start;
    while t <= end {
        let ms = (t * 1000.0).round() as i64;
        let v = range_value(script, query, ms);
        values.push(serde_json::json!([ms as f64 / 1000.0, v.to_string()]));
        t += step;
    }
    serde_json::json!({
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}
    })
}

/// Starts the endpoint on a free loopback port, on the runtime context's tokio runtime.
pub fn start(script: Script, runtime: &Runtime) -> std::io::Result<ScriptedPrometheus> {
    let listener = runtime.block_on(tokio::net::TcpListener::bind(SocketAddr::from((
        [127, 0, 0, 1],
        0,
    ))))?;
    let address = format!("http://{}", listener.local_addr()?);
    let clock = runtime.shared_clock();
    let app = Router::new()
        .route(
            "/api/v1/query",
            get(
                move |Query(params): Query<HashMap<String, String>>| async move {
                    let query = params.get("query").map(String::as_str).unwrap_or_default();
                    Json(answer(script, query, clock.now()))
                },
            ),
        )
        .route(
            "/api/v1/query_range",
            get(
                move |Query(params): Query<HashMap<String, String>>| async move {
                    Json(range_answer(script, &params))
                },
            ),
        );
    let server = runtime.tokio().spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(ScriptedPrometheus { address, server })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::prometheus::range::parse_range_response;

    fn range(script: Script, query: &str) -> Vec<f64> {
        let params: HashMap<String, String> = [
            ("query", query),
            ("start", "1000.5"),
            ("end", "1030.5"),
            ("step", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let body = serde_json::to_vec(&range_answer(script, &params)).unwrap();
        parse_range_response(200, &body).unwrap()
    }

    #[test]
    fn range_answers_differ_a_little_and_the_canary_by_its_factor() {
        let script = Script {
            canary_latency_factor: 1.3,
            ..Script::new(99.9, 200.0)
        };
        let q = |w: &str| format!("histogram_quantile(0.99, x{{pod=~\"{w}-.*\"}})");
        let primary = range(script, &q("podinfo-primary"));
        let canary = range(script, &q("podinfo"));
        assert_eq!(primary.len(), 31);
        assert!(
            primary.iter().all(|v| (196.0..=204.0).contains(v)),
            "{primary:?}"
        );
        assert!(
            canary.iter().all(|v| (254.8..=265.2).contains(v)),
            "{canary:?}"
        );
        assert_ne!(primary[0], primary[1], "noise");
        assert_eq!(
            primary,
            range(script, &q("podinfo-primary")),
            "same times, same values"
        );
        let rate = range(script, "sum(rate(http_requests_total[1m]))");
        assert!(rate.iter().all(|v| (99.88..=99.92).contains(v)), "{rate:?}");
    }

    #[test]
    fn range_parameters_prometheus_refuses_are_errors() {
        let params: HashMap<String, String> = [
            ("query", "x"),
            ("start", "0"),
            ("end", "1e9"),
            ("step", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let answer = range_answer(Script::new(99.0, 1.0), &params);
        assert_eq!(answer["status"], "error");
    }
}
