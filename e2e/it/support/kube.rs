//! An HTTP-level fake of the Kubernetes API (`sync.rs`, and the waves' clusters in
//! `waves_run.rs`): an axum server on 127.0.0.1 answering the two GET paths sluice uses exactly
//! as the API server does, the object JSON (with the metadata the server fills in) or a
//! `Status` document for 404/403. Every object it serves is first validated against the CRD's
//! strict schema (e2e/schemas), so the fake cannot answer what a real cluster would reject.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value as Json};
use sluice::kube::client_from_config;

use super::Schemas;

const FLUX_GROUP: &str = "kustomize.toolkit.fluxcd.io";
const ARGO_GROUP: &str = "argoproj.io";

type Key = (String, String, String); // (plural, namespace, name)

#[derive(Default)]
struct Cluster {
    objects: BTreeMap<Key, Json>,
    forbidden: HashSet<Key>,
    requests: Vec<String>,
}

/// An in-process fake of the API paths sluice reads (also the waves' clusters in
/// `waves_run.rs`, which stops and starts it again as a cluster going down and coming back).
pub(crate) struct FakeKubeApi {
    pub(crate) url: String,
    addr: std::net::SocketAddr,
    cluster: Arc<Mutex<Cluster>>,
    schemas: Schemas,
    resource_version: u64,
    /// Stops the server gracefully (idle keep-alive connections closed too); `None` while
    /// stopped.
    shutdown: Option<(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    )>,
}

impl FakeKubeApi {
    pub(crate) async fn start() -> FakeKubeApi {
        let cluster = Arc::new(Mutex::new(Cluster::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = Some(serve(listener, Arc::clone(&cluster)));
        FakeKubeApi {
            url: format!("http://{addr}"),
            addr,
            cluster,
            schemas: Schemas::default(),
            resource_version: 1000,
            shutdown,
        }
    }

    /// The API server goes down: connections to it are refused until [`Self::restart`].
    pub(crate) async fn stop(&mut self) {
        if let Some((stop, served)) = self.shutdown.take() {
            let _ = stop.send(());
            served.await.expect("fake API stops");
        }
    }

    /// The API server comes back on its address, with the objects it held.
    pub(crate) async fn restart(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .expect("bind the same address again");
        self.shutdown = Some(serve(listener, Arc::clone(&self.cluster)));
    }
}

/// Serves the fake's routes on `listener` until told to stop.
fn serve(
    listener: tokio::net::TcpListener,
    cluster: Arc<Mutex<Cluster>>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = Router::new()
        .route("/version", get(version))
        .route(
            "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{ns}/kustomizations/{name}",
            get(kustomization),
        )
        .route(
            "/apis/argoproj.io/v1alpha1/namespaces/{ns}/applications/{name}",
            get(application),
        )
        .route(
            "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
            get(deployment_route),
        )
        .route(
            "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/httproutes/{name}",
            get(httproute_route),
        )
        .fallback(not_a_path)
        .with_state(cluster);
    let served = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
            .expect("fake API serves");
    });
    (stop, served)
}

impl FakeKubeApi {
    pub(crate) fn client(&self) -> kube::Client {
        client_from_config(kube::Config::new(self.url.parse().expect("url"))).expect("client")
    }

    /// Stores `object` as the API server would return it: metadata filled in, validated.
    pub(crate) fn put(&mut self, mut object: Json) {
        let errors = self.schemas.errors(&object);
        assert!(
            errors.is_empty(),
            "the fake would serve an invalid object: {errors:#?}"
        );
        self.resource_version += 1;
        let meta = object["metadata"].as_object_mut().expect("metadata");
        meta.entry("uid")
            .or_insert_with(|| json!("6f1c2f3e-58d5-4c4b-9a1e-0b2d4c6e8a10"));
        meta.entry("generation").or_insert(json!(1));
        meta.entry("creationTimestamp")
            .or_insert(json!("2026-01-01T00:00:00Z"));
        meta.insert(
            "resourceVersion".into(),
            json!(self.resource_version.to_string()),
        );
        let errors = self.schemas.errors(&object);
        assert!(errors.is_empty(), "{errors:#?}");
        let plural = match object["kind"].as_str() {
            Some("Kustomization") => "kustomizations",
            Some("Application") => "applications",
            Some("Deployment") => "deployments",
            Some("HTTPRoute") => "httproutes",
            other => panic!("unexpected kind {other:?}"),
        };
        let key = (
            plural.to_string(),
            object["metadata"]["namespace"]
                .as_str()
                .expect("ns")
                .to_string(),
            object["metadata"]["name"]
                .as_str()
                .expect("name")
                .to_string(),
        );
        self.cluster
            .lock()
            .expect("lock")
            .objects
            .insert(key, object);
    }

    pub(crate) fn forbid(&self, plural: &str, ns: &str, name: &str) {
        self.cluster.lock().expect("lock").forbidden.insert((
            plural.into(),
            ns.into(),
            name.into(),
        ));
    }

    pub(crate) fn requests(&self) -> Vec<String> {
        self.cluster.lock().expect("lock").requests.clone()
    }
}

fn json_response(code: StatusCode, body: &Json) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The `Status` document the API server sends with a 404 or 403.
fn status(code: u16, reason: &str, message: String, group: &str, plural: &str, name: &str) -> Json {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {"name": name, "group": group, "kind": plural},
        "code": code,
    })
}

fn answer(
    cluster: &Mutex<Cluster>,
    group: &str,
    plural: &str,
    ns: String,
    name: String,
) -> Response {
    let mut c = cluster.lock().expect("lock");
    c.requests.push(format!(
        "GET /apis/{group}/.../namespaces/{ns}/{plural}/{name}"
    ));
    let key = (plural.to_string(), ns.clone(), name.clone());
    if c.forbidden.contains(&key) {
        let message = format!(
            "{plural}.{group} \"{name}\" is forbidden: User \"system:serviceaccount:sluice-system:sluice\" cannot get resource \"{plural}\" in API group \"{group}\" in the namespace \"{ns}\""
        );
        return json_response(
            StatusCode::FORBIDDEN,
            &status(403, "Forbidden", message, group, plural, &name),
        );
    }
    match c.objects.get(&key) {
        Some(object) => json_response(StatusCode::OK, object),
        None => json_response(
            StatusCode::NOT_FOUND,
            &status(
                404,
                "NotFound",
                format!("{plural}.{group} \"{name}\" not found"),
                group,
                plural,
                &name,
            ),
        ),
    }
}

async fn kustomization(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    answer(&cluster, FLUX_GROUP, "kustomizations", ns, name)
}

async fn application(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    answer(&cluster, ARGO_GROUP, "applications", ns, name)
}

async fn deployment_route(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    answer(&cluster, "apps", "deployments", ns, name)
}

async fn httproute_route(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    answer(
        &cluster,
        "gateway.networking.k8s.io",
        "httproutes",
        ns,
        name,
    )
}

/// `GET /version`, the `version.Info` every API server serves to any client.
async fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": "31",
            "gitVersion": "v1.31.0",
            "gitCommit": "9edcffcde5595e8a5b1a35f88c421764e575afce",
            "gitTreeState": "clean",
            "buildDate": "2024-08-13T07:28:49Z",
            "goVersion": "go1.22.5",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}

async fn not_a_path() -> Response {
    // What the API server answers for a path no installed API serves.
    (StatusCode::NOT_FOUND, "404 page not found\n").into_response()
}

/// The Kustomization of the shared example (schemas/examples), with this status.
pub(crate) fn kustomization_object(generation: i64, revision: &str, ready: Json) -> Json {
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "podinfo", "namespace": "flux-system", "generation": generation},
        "spec": {
            "interval": "5m",
            "path": "./clusters/prod/podinfo",
            "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "fleet"},
            "targetNamespace": "prod",
        },
        "status": {
            "observedGeneration": generation,
            "lastAppliedRevision": revision,
            "lastAttemptedRevision": revision,
            "conditions": [ready],
        },
    })
}

/// A `Ready=True` condition of `generation` that applied `revision`.
pub(crate) fn ready_true(generation: i64, revision: &str) -> Json {
    json!({
        "type": "Ready",
        "status": "True",
        "reason": "ReconciliationSucceeded",
        "message": format!("Applied revision: {revision}"),
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": generation,
    })
}
