//! Leader election against an HTTP-level fake of the Kubernetes API's Lease endpoints
//! (get, create, replace with resourceVersion compare-and-swap, as the API server does).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use jiff::Timestamp;
use serde_json::{json, Value as Json_};
use sluice::kube::client_from_config;
use sluice::leadership::{acquire_or_renew, Leadership, LeaseConfig};

#[derive(Default)]
struct Store {
    lease: Option<Json_>,
    version: u64,
}

type Shared = Arc<Mutex<Store>>;

fn status(code: u16, reason: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": reason, "message": reason, "code": code});
    (StatusCode::from_u16(code).unwrap(), Json(body)).into_response()
}

async fn get_lease(State(s): State<Shared>) -> Response {
    match &s.lock().unwrap().lease {
        Some(l) => Json(l.clone()).into_response(),
        None => status(404, "NotFound"),
    }
}

async fn create(State(s): State<Shared>, Json(mut body): Json<Json_>) -> Response {
    let mut s = s.lock().unwrap();
    if s.lease.is_some() {
        return status(409, "AlreadyExists");
    }
    s.version += 1;
    body["metadata"]["resourceVersion"] = json!(s.version.to_string());
    s.lease = Some(body.clone());
    (StatusCode::CREATED, Json(body)).into_response()
}

async fn replace(
    State(s): State<Shared>,
    UrlPath((_ns, _name)): UrlPath<(String, String)>,
    Json(mut body): Json<Json_>,
) -> Response {
    let mut s = s.lock().unwrap();
    let current = s
        .lease
        .as_ref()
        .map(|l| l["metadata"]["resourceVersion"].clone());
    if current != Some(body["metadata"]["resourceVersion"].clone()) {
        return status(409, "Conflict");
    }
    s.version += 1;
    body["metadata"]["resourceVersion"] = json!(s.version.to_string());
    s.lease = Some(body.clone());
    Json(body).into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_replica_leads_and_an_expired_lease_changes_hands_fake_kube_api() {
    let store: Shared = Arc::default();
    let app = Router::new()
        .route(
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            axum::routing::post(create),
        )
        .route(
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}",
            get(get_lease).put(replace),
        )
        .with_state(Arc::clone(&store));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let client = client_from_config(kube::Config::new(url.parse().unwrap())).unwrap();
    let cfg = |who: &str| LeaseConfig {
        namespace: "sluice-system".into(),
        name: "sluice".into(),
        identity: who.into(),
        duration: Duration::from_secs(15),
    };
    let t0 = Timestamp::now();
    assert_eq!(
        acquire_or_renew(&client, &cfg("a"), t0).await,
        Ok(Leadership::Leader)
    );
    assert_eq!(
        acquire_or_renew(&client, &cfg("b"), t0 + Duration::from_secs(1)).await,
        Ok(Leadership::Follower { holder: "a".into() })
    );
    assert_eq!(
        acquire_or_renew(&client, &cfg("a"), t0 + Duration::from_secs(5)).await,
        Ok(Leadership::Leader),
        "renewed"
    );
    // a stops renewing; after the lease duration b takes over.
    assert_eq!(
        acquire_or_renew(&client, &cfg("b"), t0 + Duration::from_secs(30)).await,
        Ok(Leadership::Leader)
    );
    assert_eq!(
        acquire_or_renew(&client, &cfg("a"), t0 + Duration::from_secs(31)).await,
        Ok(Leadership::Follower { holder: "b".into() })
    );
    let lease = store.lock().unwrap().lease.clone().unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
}
