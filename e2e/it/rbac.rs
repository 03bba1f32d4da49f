//! RBAC from the code: the install's ClusterRoles and Roles grant exactly the Kubernetes API
//! requests sluice makes, no fewer (a read the API server would refuse) and no more (a grant
//! nothing uses).
//!
//! One test drives every path of the code that calls the API against the HTTP-level fake
//! (`support::kube`, which records each request as the verb, group, resource and namespace
//! RBAC checks): the sync gate for Flux and Argo CD, the readiness gate for each kind of
//! workload and for each router that reads an object, the leader election's Lease, and a
//! wave cluster's reachability. The requests it saw are compared with the rules of every
//! ClusterRole and Role under examples/install (the base and its components), both ways.
//! Driving the paths here, rather than collecting what the other suites happened to send,
//! keeps the answer the same whichever tests run and in whatever order; a second test keeps
//! the list of driven paths honest: every place in src/ that builds a kube `Api`, and every
//! object a router names for readiness, must be among what the first test drove.

use std::collections::BTreeSet;

use serde_json::{json, Value as Json};
use sluice::gates::readiness::read_readiness;
use sluice::gates::sync::read_sync;
use sluice::leadership::{acquire_or_renew, LeaseConfig};
use sluice::manifest::model::{Name, SyncTarget};

use crate::support::canary::{load, podinfo};
use crate::support::kube::{ApiCall, FakeKubeApi};
use crate::support::{read_repo_file, repo_root};

/// sluice's namespace in the install: where a Role (not a ClusterRole) grants.
const NAMESPACE: &str = "sluice-system";

/// One rule's grant, flattened: (verb, group, resource), and whether a Role (namespaced to
/// sluice's namespace) or a ClusterRole gives it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    verb: String,
    group: String,
    resource: String,
    /// `Some(namespace)` for a Role, `None` for a ClusterRole.
    namespace: Option<String>,
    /// The file the rule is in, for the messages.
    file: String,
}

/// Every YAML file under `examples/install`, recursively, as (repo path, documents).
fn install_documents() -> Vec<(String, Json)> {
    let mut docs = Vec::new();
    for entry in walkdir::WalkDir::new(repo_root().join("examples/install")).sort_by_file_name() {
        let entry = entry.expect("walk examples/install");
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let rel = path
            .strip_prefix(repo_root())
            .expect("under the repo")
            .to_string_lossy()
            .into_owned();
        let text = read_repo_file(&rel);
        let parsed: Vec<Json> = serde_saphyr::from_multiple(&text).expect("YAML");
        docs.extend(parsed.into_iter().map(|d| (rel.clone(), d)));
    }
    docs
}

/// The grants of every ClusterRole and Role of the install (base and components) that a
/// binding gives sluice's ServiceAccount.
fn install_grants() -> Vec<Grant> {
    let docs = install_documents();
    let bound: BTreeSet<(String, String)> = docs
        .iter()
        .filter(|(_, d)| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
        .filter(|(_, d)| {
            d["subjects"].as_array().is_some_and(|s| {
                s.iter().any(|s| {
                    s["kind"] == "ServiceAccount"
                        && s["name"] == "sluice"
                        && s["namespace"] == NAMESPACE
                })
            })
        })
        .map(|(_, d)| {
            (
                d["roleRef"]["kind"].as_str().expect("roleRef.kind").into(),
                d["roleRef"]["name"].as_str().expect("roleRef.name").into(),
            )
        })
        .collect();
    let mut grants = Vec::new();
    for (file, role) in &docs {
        let kind = role["kind"].as_str().unwrap_or_default();
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        let name = role["metadata"]["name"].as_str().expect("a role's name");
        assert!(
            bound.contains(&(kind.to_string(), name.to_string())),
            "{file}: {kind} {name} is bound to no ServiceAccount sluice/{NAMESPACE}"
        );
        let namespace = (kind == "Role").then(|| NAMESPACE.to_string());
        for rule in role["rules"].as_array().expect("rules") {
            let strings = |field: &str| -> Vec<String> {
                rule[field]
                    .as_array()
                    .unwrap_or_else(|| panic!("{file}: {name}: a rule without {field}"))
                    .iter()
                    .map(|v| v.as_str().expect("a string").to_string())
                    .collect()
            };
            for verb in strings("verbs") {
                for group in strings("apiGroups") {
                    for resource in strings("resources") {
                        grants.push(Grant {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource,
                            namespace: namespace.clone(),
                            file: file.clone(),
                        });
                    }
                }
            }
        }
    }
    grants
}

/// Whether a grant allows `call`: the same verb, group and resource (no wildcards: the
/// install never writes one), in the Role's namespace for a Role.
fn allows(grant: &Grant, call: &ApiCall) -> bool {
    grant.verb == call.verb
        && grant.group == call.group
        && grant.resource == call.resource
        && grant
            .namespace
            .as_ref()
            .is_none_or(|ns| *ns == call.namespace)
}

/// What is wrong between `calls` and `grants`: a call no grant allows, a grant no call uses.
/// `GET /version` needs no rule: every authenticated client may read it (the bootstrap
/// ClusterRole `system:public-info-viewer`).
fn rbac_problems(calls: &BTreeSet<ApiCall>, grants: &[Grant]) -> Vec<String> {
    let mut problems = Vec::new();
    for call in calls {
        if call.verb == "get" && call.resource == "/version" {
            continue;
        }
        if !grants.iter().any(|g| allows(g, call)) {
            problems.push(format!(
                "sluice makes `{} {}.{}` in namespace {:?}, which no rule under examples/install grants",
                call.verb, call.resource, call.group, call.namespace
            ));
        }
    }
    for grant in grants {
        if !calls.iter().any(|c| allows(grant, c)) {
            problems.push(format!(
                "{}: grants `{} {}.{}`, which sluice never asks for",
                grant.file, grant.verb, grant.resource, grant.group
            ));
        }
    }
    problems
}

fn name(s: &str) -> Name {
    Name::parse(s).expect("a name")
}

/// A Deployment the API server reports rolled out, valid against its strict schema.
fn ready_deployment(name: &str, ns: &str) -> Json {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "generation": 1},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "podinfo", "image": "ghcr.io/stefanprodan/podinfo:6.0.0"}]},
            },
        },
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1},
    })
}

/// Every kube-calling path of the code, driven once against `api`; returns what it saw.
async fn drive_every_kube_path(api: &mut FakeKubeApi) -> BTreeSet<ApiCall> {
    let client = api.client();
    // The sync gate, for each engine (the objects do not exist: the request is what counts).
    for target in [
        SyncTarget::Flux {
            kustomization: name("podinfo"),
            namespace: name(SyncTarget::FLUX_DEFAULT_NAMESPACE),
        },
        SyncTarget::ArgoCd {
            application: name("podinfo"),
            namespace: name(SyncTarget::ARGOCD_DEFAULT_NAMESPACE),
        },
    ] {
        assert!(
            read_sync(&client, &target).await.is_err(),
            "{target} is missing"
        );
    }

    // The readiness gate: Deployment workloads (rolled out, so the gate goes on to the
    // HTTPRoute a Gateway API canary names), DaemonSet workloads, a Knative Revision.
    api.put(ready_deployment("podinfo-primary", "prod"));
    api.put(ready_deployment("podinfo", "prod"));
    let analysis = "    maxWeight: 50\n    stepWeight: 10\n";
    let gateway = load(
        "gateway.yaml",
        &podinfo()
            .provider("gatewayapi:v1")
            .service("    port: 9898\n    gatewayRefs:\n      - name: public-gateway\n        namespace: gateway-system")
            .yaml(analysis),
    );
    let daemonset = load(
        "daemonset.yaml",
        &podinfo()
            .target(
                "  targetRef:\n    apiVersion: apps/v1\n    kind: DaemonSet\n    name: podinfo\n",
            )
            .yaml(analysis),
    );
    let knative = crate::support::knative::with_service(
        "test/podinfo.yaml",
        crate::support::knative::DOCS_SERVICE,
    );
    // A route source of each other kind: its Gateways must accept the user's route.
    let sources: Vec<sluice::manifest::model::Canary> =
        crate::support::route_sources::other_kinds()
            .iter()
            .map(|(_, source)| {
                crate::support::route_sources::loaded_flagger("gatewayapi:v1", source)
            })
            .collect();
    for canary in [&gateway, &daemonset, &knative].into_iter().chain(&sources) {
        let readiness = read_readiness(&client, canary, "podinfo").await;
        assert!(readiness.is_ok(), "{readiness:?}");
    }

    // Leader election: take the Lease (it does not exist: create), then renew it (update),
    // in the namespace and under the name `sluice run` uses by default.
    let cli = <sluice::cli::Cli as clap::Parser>::try_parse_from([
        "sluice",
        "run",
        "--repo",
        "https://git.example.com/org/fleet.git",
    ])
    .expect("sluice run parses");
    let sluice::cli::Command::Run(run) = cli.command else {
        panic!("sluice run")
    };
    let lease = LeaseConfig {
        namespace: run.lease_namespace.clone(),
        name: run.lease_name.clone(),
        identity: "sluice-0".into(),
        duration: std::time::Duration::from_secs(15),
    };
    let now = jiff::Timestamp::from_second(1_790_000_000).expect("a time");
    for at in [now, now + jiff::SignedDuration::from_secs(5)] {
        let led = acquire_or_renew(&client, &lease, at).await;
        assert_eq!(led, Ok(sluice::leadership::Leadership::Leader));
    }
    assert!(api
        .object("leases", &lease.namespace, &lease.name)
        .is_some());

    // Shards: the member Lease and the shard Leases, listed, taken (created) and renewed
    // (replaced), under the names `sluice run --shards` uses; then `sluice status --shards`.
    let config = sluice::shards::ShardConfig {
        namespace: run.lease_namespace.clone(),
        name: run.lease_name.clone(),
        identity: "sluice-0".into(),
        count: 2,
        duration: std::time::Duration::from_secs(15),
    };
    let mut shards = sluice::shards::Shards::new(client.clone(), config.clone());
    let real = std::time::Instant::now();
    for at in [now, now + jiff::SignedDuration::from_secs(5)] {
        shards.sync(at, real).await.expect("the shard Leases sync");
    }
    assert!(api
        .object("leases", &config.namespace, &config.shard_lease(0))
        .is_some());

    // A job metric's measurement: the Job sluice committed, read back (not there yet: no data).
    let job = sluice::gates::analysis_job::read(&client, "prod", "podinfo-abc-smoke-0").await;
    assert_eq!(job, sluice::core::observe::MetricValue::NoData);

    // A wave cluster's reachability: `GET /version`.
    client.apiserver_version().await.expect("GET /version");
    api.calls().into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_grants_exactly_the_requests_sluice_makes_fake_kube_api() {
    let mut api = FakeKubeApi::start().await;
    let calls = drive_every_kube_path(&mut api).await;
    let mut seen: Vec<String> = calls
        .iter()
        .map(|c| format!("{} {}.{} {}", c.verb, c.resource, c.group, c.namespace))
        .collect();
    seen.sort();
    // What the code asks for, spelled out so that a new request shows up in review.
    assert_eq!(
        seen,
        [
            "create leases.coordination.k8s.io sluice-system",
            "get /version. ",
            "get applications.argoproj.io argocd",
            "get daemonsets.apps prod",
            "get deployments.apps prod",
            "get grpcroutes.gateway.networking.k8s.io prod",
            "get httproutes.gateway.networking.k8s.io prod",
            "get jobs.batch prod",
            "get kustomizations.kustomize.toolkit.fluxcd.io flux-system",
            "get leases.coordination.k8s.io sluice-system",
            "get revisions.serving.knative.dev test",
            "get tcproutes.gateway.networking.k8s.io prod",
            "get tlsroutes.gateway.networking.k8s.io prod",
            "list leases.coordination.k8s.io sluice-system",
            "update leases.coordination.k8s.io sluice-system",
        ]
    );
    let grants = install_grants();
    assert_eq!(rbac_problems(&calls, &grants), Vec::<String>::new());

    // The comparison sees each way of getting it wrong: a rule taken away (the DaemonSet
    // readiness of issue 40), a grant nothing uses, a Role's rule asked for elsewhere.
    let without_daemonsets: Vec<Grant> = grants
        .iter()
        .filter(|g| g.resource != "daemonsets")
        .cloned()
        .collect();
    assert_eq!(
        rbac_problems(&calls, &without_daemonsets),
        ["sluice makes `get daemonsets.apps` in namespace \"prod\", which no rule under examples/install grants"]
    );
    let mut with_list = grants.clone();
    let mut list = grants
        .iter()
        .find(|g| g.resource == "deployments")
        .expect("the deployments grant")
        .clone();
    list.verb = "list".into();
    with_list.push(list);
    assert_eq!(
        rbac_problems(&calls, &with_list),
        ["examples/install/clusterrole.yaml: grants `list deployments.apps`, which sluice never asks for"]
    );
    let mut elsewhere = calls.clone();
    elsewhere.insert(ApiCall {
        verb: "get".into(),
        group: "coordination.k8s.io".into(),
        resource: "leases".into(),
        namespace: "prod".into(),
    });
    assert_eq!(rbac_problems(&elsewhere, &grants).len(), 1);
}

/// The paths [`drive_every_kube_path`] drives are all there are: the files of src/ that build
/// a kube `Api` (or call the client's own requests) are the three it drives, and every object a
/// router names for readiness is one it read.
#[test]
fn every_kube_call_in_the_code_is_driven_by_the_rbac_test() {
    let mut building = Vec::new();
    let mut plurals = BTreeSet::new();
    for entry in walkdir::WalkDir::new(repo_root().join("src")).sort_by_file_name() {
        let entry = entry.expect("walk src");
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(repo_root())
            .expect("under the repo")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(entry.path()).expect("read");
        let calls = [
            "Api::namespaced",
            "Api::all",
            "Api::default_namespaced",
            ".apiserver_version()",
            ".request::<",
            ".request_text(",
        ];
        for call in calls {
            if text.contains(call) {
                building.push(format!("{rel}: {call}"));
            }
        }
        // The objects routers name for the readiness gate (`ReadyObject { .. plural: .. }`).
        if rel.starts_with("src/route/") {
            // A route source's kinds (`SourceShape { .. plural: .. }`) too.
            let objects = text
                .match_indices("ReadyObject {")
                .chain(text.match_indices("SourceShape {"));
            for (at, _) in objects {
                let rest = &text[at..];
                if let Some(p) = rest.find("plural: \"") {
                    let start = p + "plural: \"".len();
                    let end = rest[start..].find('"').expect("closing quote");
                    plurals.insert(rest[start..start + end].to_string());
                }
            }
        }
    }
    // `sluice adopt check` runs as the operator, with the operator's kubeconfig (the install's
    // ServiceAccount never runs it): the install grants it nothing, and
    // e2e/it/adopt_check.rs drives it against the same fake.
    building.retain(|call| call != "src/cli/adopt_check.rs: Api::namespaced");
    assert_eq!(
        building,
        [
            "src/gates/analysis_job.rs: Api::namespaced",
            "src/gates/readiness.rs: Api::namespaced",
            "src/gates/sync/read.rs: Api::namespaced",
            "src/leadership.rs: Api::namespaced",
            "src/shards.rs: Api::namespaced",
            "src/waves/clusters.rs: .apiserver_version()",
        ],
        "a new kube call: drive it in drive_every_kube_path and grant it under examples/install"
    );
    assert_eq!(
        plurals,
        BTreeSet::from(
            [
                "grpcroutes",
                "httproutes",
                "revisions",
                "tcproutes",
                "tlsroutes"
            ]
            .map(String::from)
        ),
        "a router reads a new object for readiness: drive a canary of it in \
         drive_every_kube_path and grant it in a component under examples/install"
    );
}
