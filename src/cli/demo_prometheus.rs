//! The demo's metrics source: an in-process HTTP endpoint speaking Prometheus' instant-query
//! API (`GET /api/v1/query`) with scripted values, so `sluice demo` shows metric gating with
//! no Prometheus installed. Latency queries (`histogram_quantile`) answer in milliseconds;
//! every other query answers the success rate.

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
    pub latency_ms: f64,
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

fn answer(script: Script, query: &str) -> serde_json::Value {
    let value = if query.contains("histogram_quantile") {
        script.latency_ms
    } else {
        script.success_rate
    };
    let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
    serde_json::json!({
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [now, value.to_string()]}]}
    })
}

/// Starts the endpoint on a free loopback port, on the runtime context's tokio runtime.
pub fn start(script: Script, runtime: &Runtime) -> std::io::Result<ScriptedPrometheus> {
    let listener = runtime.block_on(tokio::net::TcpListener::bind(SocketAddr::from((
        [127, 0, 0, 1],
        0,
    ))))?;
    let address = format!("http://{}", listener.local_addr()?);
    let app = Router::new().route(
        "/api/v1/query",
        get(
            move |Query(params): Query<HashMap<String, String>>| async move {
                let query = params.get("query").map(String::as_str).unwrap_or_default();
                Json(answer(script, query))
            },
        ),
    );
    let server = runtime.tokio().spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(ScriptedPrometheus { address, server })
}
