//! An HTTP-level fake of the Kubernetes API (`sync.rs`, the waves' clusters in `waves_run.rs`,
//! and `rbac.rs`): an axum server on 127.0.0.1 answering any namespaced object's path as the
//! API server does (GET: the object JSON with the metadata the server fills in, or a `Status`
//! document for 404/403; a collection's GET lists it; POST creates (409 AlreadyExists when the
//! name is taken), PUT replaces with the resourceVersion compare-and-swap (409 Conflict on a
//! stale one), which is what Leases need: `lease.rs`, `shards.rs`).
//! Every object a test puts is first validated against the CRD's strict schema (e2e/schemas),
//! so the fake cannot answer what a real cluster would reject. It records every request as
//! the verb, API group, resource and namespace RBAC would check ([`ApiCall`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::Method;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value as Json};
use sluice::kube::client_from_config;

use super::Schemas;

type Key = (String, String, String); // (plural, namespace, name)

/// One request as RBAC authorizes it: the verb, the API group (`""` for the core group), the
/// resource and the namespace; a path that names no resource is `verb: "unknown"` with the
/// path as `resource` (a non-resource URL such as `/version` is `resource: "/version"`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ApiCall {
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) namespace: String,
}

#[derive(Default)]
struct Cluster {
    objects: BTreeMap<Key, Json>,
    forbidden: HashSet<Key>,
    calls: Vec<ApiCall>,
    resource_version: u64,
}

/// An in-process fake of the API paths sluice reads (also the waves' clusters in
/// `waves_run.rs`, which stops and starts it again as a cluster going down and coming back).
pub(crate) struct FakeKubeApi {
    pub(crate) url: String,
    addr: std::net::SocketAddr,
    cluster: Arc<Mutex<Cluster>>,
    schemas: Schemas,
    /// Stops the server gracefully (idle keep-alive connections closed too); `None` while
    /// stopped.
    shutdown: Option<(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    )>,
}

impl FakeKubeApi {
    pub(crate) async fn start() -> FakeKubeApi {
        FakeKubeApi::start_on("127.0.0.1:0").await
    }

    /// The fake on `addr` (`0.0.0.0:0`: every address of the host, for replicas in network
    /// namespaces); [`FakeKubeApi::url`] still names loopback.
    pub(crate) async fn start_on(addr: &str) -> FakeKubeApi {
        let cluster = Arc::new(Mutex::new(Cluster {
            resource_version: 1000,
            ..Cluster::default()
        }));
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = Some(serve(listener, Arc::clone(&cluster)));
        FakeKubeApi {
            url: format!("http://127.0.0.1:{}", addr.port()),
            addr,
            cluster,
            schemas: Schemas::default(),
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

    /// The port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// One more door to the same objects, on a free loopback port of its own: a replica given
    /// this URL is cut off from the API when the door is [closed](Door::close), the others not.
    pub(crate) async fn door(&self) -> Door {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        Door {
            url,
            shutdown: Some(serve(listener, Arc::clone(&self.cluster))),
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

/// A listener of its own onto a [`FakeKubeApi`]'s objects ([`FakeKubeApi::door`]).
pub(crate) struct Door {
    pub(crate) url: String,
    shutdown: Option<(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    )>,
}

impl Door {
    /// Refuses every further connection through this door.
    pub(crate) fn close(&mut self) {
        if let Some((stop, _served)) = self.shutdown.take() {
            // The listener closes at once (new connections refused); open connections end
            // after their request in flight.
            let _ = stop.send(());
        }
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
            "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}",
            get(get_object).put(replace_object),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{ns}/{plural}",
            get(list_objects).post(create_object),
        )
        .route(
            "/api/{version}/namespaces/{ns}/{plural}/{name}",
            get(get_core_object),
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

/// A kubeconfig in `dir` whose one context is the API server at `api_url`, without
/// credentials; returns its path (for `KUBECONFIG`).
pub(crate) fn kubeconfig(api_url: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!("apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{server: '{api_url}'}}}}]\nusers: [{{name: u, user: {{}}}}]\ncontexts: [{{name: c, context: {{cluster: fake, user: u}}}}]\ncurrent-context: c\n"),
    )
    .expect("kubeconfig");
    path
}

impl FakeKubeApi {
    /// Deletes the object stored under `plural`, `ns`, `name` (as `kubectl delete` would).
    pub(crate) fn remove(&self, plural: &str, ns: &str, name: &str) {
        let key = (plural.to_string(), ns.to_string(), name.to_string());
        self.cluster.lock().expect("lock").objects.remove(&key);
    }

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
        let resource_version = {
            let mut c = self.cluster.lock().expect("lock");
            c.resource_version += 1;
            c.resource_version
        };
        let meta = object["metadata"].as_object_mut().expect("metadata");
        meta.entry("uid")
            .or_insert_with(|| json!("6f1c2f3e-58d5-4c4b-9a1e-0b2d4c6e8a10"));
        meta.entry("generation").or_insert(json!(1));
        meta.entry("creationTimestamp")
            .or_insert(json!("2026-01-01T00:00:00Z"));
        meta.insert(
            "resourceVersion".into(),
            json!(resource_version.to_string()),
        );
        let errors = self.schemas.errors(&object);
        assert!(errors.is_empty(), "{errors:#?}");
        let plural = match object["kind"].as_str() {
            Some("Kustomization") => "kustomizations",
            Some("Application") => "applications",
            Some("Deployment") => "deployments",
            Some("DaemonSet") => "daemonsets",
            Some("HTTPRoute") => "httproutes",
            Some("Service") => "services",
            Some("Canary") => "canaries",
            Some("Job") => "jobs",
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

    /// Applies the `batch/v1` Job `job` (as Flux or Argo CD would from git) with the status
    /// the Job controller would give it: `condition` (`Complete` or `Failed`) True, or none
    /// (`None`: still running).
    pub(crate) fn apply_job(&mut self, mut job: Json, condition: Option<&str>) {
        let conditions = match condition {
            Some(kind) => json!([{
                "type": kind,
                "status": "True",
                "lastProbeTime": "2026-01-01T00:01:00Z",
                "lastTransitionTime": "2026-01-01T00:01:00Z",
                "reason": if kind == "Complete" { "Completed" } else { "BackoffLimitExceeded" },
            }]),
            None => json!([]),
        };
        let done = condition.map_or(json!({"active": 1}), |kind| match kind {
            "Complete" => json!({"succeeded": 1}),
            _ => json!({"failed": 1}),
        });
        let mut status = json!({"startTime": "2026-01-01T00:00:00Z", "conditions": conditions});
        if let (Some(s), Some(d)) = (status.as_object_mut(), done.as_object()) {
            s.extend(d.clone());
        }
        job["status"] = status;
        self.put(job);
    }

    pub(crate) fn forbid(&self, plural: &str, ns: &str, name: &str) {
        self.cluster.lock().expect("lock").forbidden.insert((
            plural.into(),
            ns.into(),
            name.into(),
        ));
    }

    /// Every request served so far, in order.
    pub(crate) fn calls(&self) -> Vec<ApiCall> {
        self.cluster.lock().expect("lock").calls.clone()
    }

    /// Each of shards `0..shards`' holder, from the Leases `<name>-shard-<i>` in `ns` (a shard
    /// nobody holds is left out).
    pub(crate) fn shard_holders(&self, ns: &str, name: &str, shards: u32) -> BTreeMap<u32, String> {
        (0..shards)
            .filter_map(|i| {
                let lease = self.object("leases", ns, &format!("{name}-shard-{i}"))?;
                Some((i, lease["spec"]["holderIdentity"].as_str()?.to_string()))
            })
            .collect()
    }

    /// The object stored under `plural`, `ns`, `name` (one sluice created or replaced).
    pub(crate) fn object(&self, plural: &str, ns: &str, name: &str) -> Option<Json> {
        let key = (plural.to_string(), ns.to_string(), name.to_string());
        self.cluster
            .lock()
            .expect("lock")
            .objects
            .get(&key)
            .cloned()
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

/// The path parameters of a namespaced object (`name` empty for the collection).
type ObjectPath = (String, String, String, String, String); // group, version, ns, plural, name

fn record(c: &mut Cluster, verb: &str, group: &str, resource: &str, ns: &str) {
    c.calls.push(ApiCall {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        namespace: ns.into(),
    });
}

/// The 403 of a request the test forbade, as the API server words it.
fn forbidden(verb: &str, group: &str, plural: &str, ns: &str, name: &str) -> Response {
    let message = format!(
        "{plural}.{group} \"{name}\" is forbidden: User \"system:serviceaccount:sluice-system:sluice\" cannot {verb} resource \"{plural}\" in API group \"{group}\" in the namespace \"{ns}\""
    );
    json_response(
        StatusCode::FORBIDDEN,
        &status(403, "Forbidden", message, group, plural, name),
    )
}

async fn get_object(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    UrlPath((group, _version, ns, plural, name)): UrlPath<ObjectPath>,
) -> Response {
    let mut c = cluster.lock().expect("lock");
    record(&mut c, "get", &group, &plural, &ns);
    let key = (plural.clone(), ns.clone(), name.clone());
    if c.forbidden.contains(&key) {
        return forbidden("get", &group, &plural, &ns, &name);
    }
    match c.objects.get(&key) {
        Some(object) => json_response(StatusCode::OK, object),
        None => not_found(&group, &plural, &name),
    }
}

/// `GET` of a core-group object (`/api/v1/...`: Services).
async fn get_core_object(
    state: State<Arc<Mutex<Cluster>>>,
    UrlPath((version, ns, plural, name)): UrlPath<(String, String, String, String)>,
) -> Response {
    get_object(state, UrlPath((String::new(), version, ns, plural, name))).await
}

fn not_found(group: &str, plural: &str, name: &str) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &status(
            404,
            "NotFound",
            format!("{plural}.{group} \"{name}\" not found"),
            group,
            plural,
            name,
        ),
    )
}

/// `GET` of a collection: its objects in the namespace, as a `<Kind>List` (the kind taken from
/// the stored objects; Leases when there are none).
async fn list_objects(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    UrlPath((group, version, ns, plural)): UrlPath<(String, String, String, String)>,
) -> Response {
    let mut c = cluster.lock().expect("lock");
    record(&mut c, "list", &group, &plural, &ns);
    let items: Vec<Json> = c
        .objects
        .iter()
        .filter(|((p, n, _), _)| *p == plural && *n == ns)
        .map(|(_, o)| o.clone())
        .collect();
    let kind = items
        .first()
        .and_then(|o| o["kind"].as_str())
        .unwrap_or("Lease")
        .to_string();
    let list = json!({
        "apiVersion": format!("{group}/{version}"),
        "kind": format!("{kind}List"),
        "metadata": {"resourceVersion": c.resource_version.to_string()},
        "items": items,
    });
    json_response(StatusCode::OK, &list)
}

/// `POST` of a new object: stored with a resourceVersion, 409 if the name is taken.
async fn create_object(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    UrlPath((group, _version, ns, plural)): UrlPath<(String, String, String, String)>,
    axum::Json(mut object): axum::Json<Json>,
) -> Response {
    let mut c = cluster.lock().expect("lock");
    record(&mut c, "create", &group, &plural, &ns);
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let key = (plural.clone(), ns.clone(), name.clone());
    if c.objects.contains_key(&key) {
        let message = format!("{plural}.{group} \"{name}\" already exists");
        return conflict("AlreadyExists", message, &key, &group);
    }
    store(&mut c, key, &mut object);
    json_response(StatusCode::CREATED, &object)
}

/// The 409 of a create or replace that lost.
fn conflict(reason: &str, message: String, (plural, _, name): &Key, group: &str) -> Response {
    json_response(
        StatusCode::CONFLICT,
        &status(409, reason, message, group, plural, name),
    )
}

/// Stores `object` under `key` with the next resourceVersion.
fn store(c: &mut Cluster, key: Key, object: &mut Json) {
    c.resource_version += 1;
    object["metadata"]["resourceVersion"] = json!(c.resource_version.to_string());
    c.objects.insert(key, object.clone());
}

/// `PUT` of an object: replaced only at the resourceVersion stored (409 otherwise).
async fn replace_object(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    UrlPath((group, _version, ns, plural, name)): UrlPath<ObjectPath>,
    axum::Json(mut object): axum::Json<Json>,
) -> Response {
    let mut c = cluster.lock().expect("lock");
    record(&mut c, "update", &group, &plural, &ns);
    let key = (plural.clone(), ns.clone(), name.clone());
    let Some(stored) = c.objects.get(&key) else {
        return not_found(&group, &plural, &name);
    };
    if stored["metadata"]["resourceVersion"] != object["metadata"]["resourceVersion"] {
        let message = format!("Operation cannot be fulfilled on {plural}.{group} \"{name}\": the object has been modified");
        return conflict("Conflict", message, &key, &group);
    }
    store(&mut c, key, &mut object);
    json_response(StatusCode::OK, &object)
}

/// `GET /version`, the `version.Info` every API server serves to any client.
async fn version(State(cluster): State<Arc<Mutex<Cluster>>>) -> Response {
    record(
        &mut cluster.lock().expect("lock"),
        "get",
        "",
        "/version",
        "",
    );
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

async fn not_a_path(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    method: Method,
    uri: axum::http::Uri,
) -> Response {
    record(
        &mut cluster.lock().expect("lock"),
        "unknown",
        method.as_str(),
        uri.path(),
        "",
    );
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
