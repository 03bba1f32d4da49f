//! Sync-awareness against an HTTP-level fake of the Kubernetes API.
//!
//! No API server can run here, so `FakeKubeApi` is an axum server on 127.0.0.1 answering the
//! two GET paths sluice uses, exactly as the API server does: the object JSON (with the
//! metadata the server fills in), or a `Status` document for 404/403. Every object it serves is
//! first validated against the CRD's strict schema (e2e/schemas), so the fake cannot answer
//! what a real cluster would reject. The client is the real kube client, built from
//! `kube::Config::new(url)`. Ancestry ("is this commit a descendant of the pushed one?") comes
//! from a real git repo through the git CLI.

use std::path::Path;

use serde_json::{json, Value as Json};
use sluice::gates::sync::{applied, read_sync, Applied, SyncError, SyncObservation};
use sluice::kube::client_from_config;
use sluice::manifest::model::{Name, SyncTarget};

use crate::support::kube::{kustomization_object, ready_true, FakeKubeApi};
use crate::support::{git, git_ok, Schemas};

fn flux_target(name: &str) -> SyncTarget {
    SyncTarget::Flux {
        kustomization: Name::parse(name).unwrap(),
        namespace: Name::parse("flux-system").unwrap(),
    }
}

fn argo_target(name: &str) -> SyncTarget {
    SyncTarget::ArgoCd {
        application: Name::parse(name).unwrap(),
        namespace: Name::parse("argocd").unwrap(),
    }
}

/// The Application of the shared example (schemas/examples), with this status.
fn application_object(status: Json) -> Json {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "podinfo", "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {
                "repoURL": "https://git.example.com/org/fleet.git",
                "targetRevision": "main",
                "path": "clusters/prod/podinfo",
            },
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "prod"},
            "syncPolicy": {"automated": {"prune": true, "selfHeal": true}},
        },
        "status": status,
    })
}

/// An Argo CD status after an automated sync of `revision` that finished at 00:00:55.
fn argo_status(revision: &str, sync: &str, health: &str, reconciled_at: &str) -> Json {
    json!({
        "sync": {
            "status": sync,
            "revision": revision,
            "comparedTo": {
                "source": {
                    "repoURL": "https://git.example.com/org/fleet.git",
                    "targetRevision": "main",
                    "path": "clusters/prod/podinfo",
                },
                "destination": {"server": "https://kubernetes.default.svc", "namespace": "prod"},
            },
        },
        "health": {"status": health, "lastTransitionTime": "2025-12-31T12:00:00Z"},
        "reconciledAt": reconciled_at,
        "operationState": {
            "operation": {
                "sync": {"revision": revision, "prune": true},
                "initiatedBy": {"automated": true},
                "retry": {"limit": 5},
            },
            "phase": "Succeeded",
            "message": "successfully synced (all tasks run)",
            "startedAt": "2026-01-01T00:00:50Z",
            "finishedAt": "2026-01-01T00:00:55Z",
            "syncResult": {
                "revision": revision,
                "source": {
                    "repoURL": "https://git.example.com/org/fleet.git",
                    "targetRevision": "main",
                    "path": "clusters/prod/podinfo",
                },
            },
        },
        "sourceType": "Directory",
        "summary": {"images": ["ghcr.io/stefanprodan/podinfo:6.7.0"]},
    })
}

/// A config repo with history `a <- pushed <- later`, plus `sibling` branched from `a` (not a
/// descendant of `pushed`). Fixed dates so ids are stable.
struct History {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    a: String,
    pushed: String,
    later: String,
    sibling: String,
}

fn commit(dir: &Path, file: &str, message: &str, date: &str) -> String {
    std::fs::write(dir.join(file), message).unwrap();
    git(dir, &["add", file]);
    let out = std::process::Command::new("git")
        .args(["commit", "-q", "-m", message])
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "human")
        .env("GIT_AUTHOR_EMAIL", "human@example.com")
        .env("GIT_COMMITTER_NAME", "human")
        .env("GIT_COMMITTER_EMAIL", "human@example.com")
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    git(dir, &["rev-parse", "HEAD"]).trim().to_string()
}

fn history() -> History {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    git(&path, &["init", "-q", "-b", "main"]);
    let a = commit(&path, "a", "a", "2026-01-01T00:00:00Z");
    let pushed = commit(
        &path,
        "route.yaml",
        "sluice: weight 20",
        "2026-01-01T00:01:00Z",
    );
    let later = commit(&path, "human", "human edit", "2026-01-01T00:02:00Z");
    git(&path, &["checkout", "-q", "-b", "other", &a]);
    let sibling = commit(&path, "s", "unrelated", "2026-01-01T00:03:00Z");
    History {
        _dir: dir,
        path,
        a,
        pushed,
        later,
        sibling,
    }
}

impl History {
    /// `git merge-base --is-ancestor pushed applied`: applied descends from pushed.
    fn is_descendant(&self) -> impl Fn(&str, &str) -> bool + '_ {
        |applied, pushed| {
            git_ok(
                &self.path,
                &["merge-base", "--is-ancestor", pushed, applied],
            )
        }
    }
}

async fn judge(api: &FakeKubeApi, target: &SyncTarget, h: &History) -> Applied {
    let obs = read_sync(&api.client(), target).await.expect("read_sync");
    applied(&obs, &h.pushed, h.is_descendant())
}

fn reason(a: Applied) -> String {
    match a {
        Applied::NotYet { reason } | Applied::Failed { reason } => reason,
        Applied::Yes => panic!("expected not applied"),
    }
}

#[tokio::test]
async fn flux_not_applied_until_fake_kube_api_reports_pushed_or_descendant() {
    let h = history();
    let mut api = FakeKubeApi::start().await;
    let target = flux_target("podinfo");
    let served = |rev: &str| kustomization_object(3, rev, ready_true(3, rev));

    api.put(served(&format!("main@sha1:{}", h.a)));
    let r = reason(judge(&api, &target, &h).await);
    assert!(
        r.starts_with("Kustomization flux-system/podinfo applied ")
            && r.contains(&format!("not yet {}", &h.pushed[..12])),
        "{r}"
    );

    // A commit on another line of history is not ours, however new.
    api.put(served(&format!("main@sha1:{}", h.sibling)));
    assert!(matches!(
        judge(&api, &target, &h).await,
        Applied::NotYet { .. }
    ));

    api.put(served(&format!("main@sha1:{}", h.pushed)));
    assert_eq!(judge(&api, &target, &h).await, Applied::Yes);

    // Someone pushed after sluice: their commit contains ours.
    api.put(served(&format!("main@sha1:{}", h.later)));
    assert_eq!(judge(&api, &target, &h).await, Applied::Yes);

    // Flux before 2.0 wrote `<branch>/<sha>`.
    api.put(served(&format!("main/{}", h.later)));
    assert_eq!(judge(&api, &target, &h).await, Applied::Yes);

    let obs = read_sync(&api.client(), &target).await.unwrap();
    let SyncObservation::Flux(flux) = obs else {
        panic!("expected a Flux observation")
    };
    assert_eq!(flux.applied_sha.as_deref(), Some(h.later.as_str()));
    assert_eq!(flux.generation, Some(3));
    assert!(api
        .calls()
        .iter()
        .all(|c| c.verb == "get" && c.group == "kustomize.toolkit.fluxcd.io"));
}

#[tokio::test]
async fn flux_ready_false_fake_kube_api_is_not_yet_with_the_message() {
    let h = history();
    let mut api = FakeKubeApi::start().await;
    let rev = format!("main@sha1:{}", h.pushed);
    let message = "Deployment/prod/podinfo-canary status: 'InProgress'";
    api.put(kustomization_object(
        3,
        &rev,
        json!({
            "type": "Ready",
            "status": "False",
            "reason": "HealthCheckFailed",
            "message": message,
            "lastTransitionTime": "2026-01-01T00:01:30Z",
            "observedGeneration": 3,
        }),
    ));
    let r = reason(judge(&api, &flux_target("podinfo"), &h).await);
    assert!(
        r.contains("is not Ready: HealthCheckFailed: Deployment/prod/podinfo-canary status"),
        "{r}"
    );

    // Ready=True, but for an older generation of the spec: not yet.
    api.put(kustomization_object(4, &rev, ready_true(3, &rev)));
    let r = reason(judge(&api, &flux_target("podinfo"), &h).await);
    assert!(
        r.contains("generation 3, the object is at generation 4"),
        "{r}"
    );
}

/// Serves the Argo CD Application `argocd/podinfo` with `argo_status(revision, sync, health,
/// reconciled_at)` and judges whether the pushed commit of `h` is applied.
async fn judge_argo(
    api: &mut FakeKubeApi,
    h: &History,
    (revision, sync, health, reconciled_at): (&str, &str, &str, &str),
) -> Applied {
    api.put(application_object(argo_status(
        revision,
        sync,
        health,
        reconciled_at,
    )));
    judge(api, &argo_target("podinfo"), h).await
}

#[tokio::test]
async fn argo_stale_health_fake_kube_api_is_not_trusted() {
    let h = history();
    let mut api = FakeKubeApi::start().await;
    // Synced to the pushed commit and "Healthy", but the app controller last assessed health
    // before the sync finished (00:00:55): that Healthy describes the old ReplicaSet.
    let (before, after) = ("2026-01-01T00:00:40Z", "2026-01-01T00:01:10Z");
    let r = reason(judge_argo(&mut api, &h, (&h.pushed, "Synced", "Healthy", before)).await);
    assert!(r.contains("not trusted"), "{r}");

    // Reassessed after the sync: trusted.
    let fresh = judge_argo(&mut api, &h, (&h.pushed, "Synced", "Healthy", after)).await;
    assert_eq!(fresh, Applied::Yes);

    // Argo CD synced a later commit that contains ours.
    let later = judge_argo(&mut api, &h, (&h.later, "Synced", "Healthy", after)).await;
    assert_eq!(later, Applied::Yes);
}

#[tokio::test]
async fn argo_out_of_sync_and_degraded_fake_kube_api() {
    let h = history();
    let mut api = FakeKubeApi::start().await;
    let target = argo_target("podinfo");
    let at = "2026-01-01T00:01:10Z";
    let r = reason(judge_argo(&mut api, &h, (&h.a, "OutOfSync", "Healthy", at)).await);
    assert!(r.contains("(OutOfSync), not yet"), "{r}");

    let r = reason(judge_argo(&mut api, &h, (&h.pushed, "OutOfSync", "Healthy", at)).await);
    assert!(r.contains("is OutOfSync at"), "{r}");

    assert!(matches!(
        judge_argo(&mut api, &h, (&h.pushed, "Synced", "Progressing", at)).await,
        Applied::NotYet { reason } if reason.contains("health is Progressing")
    ));

    assert!(matches!(
        judge_argo(&mut api, &h, (&h.pushed, "Synced", "Degraded", at)).await,
        Applied::Failed { reason } if reason.contains("Application argocd/podinfo is Degraded")
    ));

    // The sync of the pushed commit itself failed.
    let mut failed = argo_status(&h.a, "OutOfSync", "Healthy", "2026-01-01T00:01:10Z");
    failed["operationState"]["phase"] = json!("Failed");
    failed["operationState"]["message"] =
        json!("one or more objects failed to apply, reason: admission webhook denied");
    failed["operationState"]["syncResult"]["revision"] = json!(h.pushed);
    api.put(application_object(failed));
    assert!(matches!(
        judge(&api, &target, &h).await,
        Applied::Failed { reason } if reason.contains("ended Failed: one or more objects failed")
    ));
}

#[tokio::test]
async fn missing_objects_fake_kube_api_name_kind_namespace_and_what_to_check() {
    let api = FakeKubeApi::start().await;
    let client = api.client();

    let err = read_sync(&client, &flux_target("nope")).await.unwrap_err();
    assert!(matches!(err, SyncError::NotFound { .. }), "{err:?}");
    assert!(!err.is_transient());
    let text = err.to_string();
    for part in [
        "Kustomization flux-system/nope not found",
        "sync.flux.kustomization/namespace",
        "kustomize.toolkit.fluxcd.io/v1 CRD is installed",
        "get on kustomizations.kustomize.toolkit.fluxcd.io",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }

    let err = read_sync(&client, &argo_target("nope")).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("Application argocd/nope not found")
            && text.contains("sync.argocd.application/namespace")
            && text.contains("applications.argoproj.io"),
        "{text}"
    );

    api.forbid("applications", "argocd", "secret-app");
    let err = read_sync(&client, &argo_target("secret-app"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, SyncError::Forbidden { code: 403, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("may not read Application argocd/secret-app")
            && text.contains("grant get, list and watch on applications.argoproj.io"),
        "{text}"
    );
}

#[tokio::test]
async fn unreachable_api_is_a_transient_error() {
    let port = crate::support::free_port();
    let client = client_from_config(kube::Config::new(
        format!("http://127.0.0.1:{port}").parse().unwrap(),
    ))
    .unwrap();
    let err = read_sync(&client, &flux_target("podinfo"))
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("reading Kustomization flux-system/podinfo: "),
        "{err}"
    );
}

#[test]
fn served_examples_match_the_shared_examples() {
    // The fake's objects extend /work/shared/schemas/examples; both must stay schema-valid.
    let mut schemas = Schemas::default();
    let rev = "main@sha1:0123456789abcdef0123456789abcdef01234567";
    for object in [
        kustomization_object(3, rev, ready_true(3, rev)),
        application_object(argo_status(
            "0123456789abcdef0123456789abcdef01234567",
            "Synced",
            "Healthy",
            "2026-01-01T00:01:00Z",
        )),
    ] {
        let errors = schemas.errors(&object);
        assert!(errors.is_empty(), "{errors:#?}");
    }
}

// ---- The loop with the real binary: a step's clock waits for the GitOps engine. ----

fn synced_canary(revision: &str, sync: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  sync: {sync}\n  analysis: {{interval: 1s, stepWeights: [10, 50]}}\n"
    )
}

struct Loop {
    _tmp: tempfile::TempDir,
    bare: std::path::PathBuf,
    human: std::path::PathBuf,
    kubeconfig: std::path::PathBuf,
    workdir: std::path::PathBuf,
    /// Each reconcile runs at this clock's time; a test jumps it past the canary's interval
    /// where it would sleep.
    clock: crate::support::Stepped,
}

/// A little more than the canaries' `analysis.interval` (1 s): one jump makes the next check due.
const INTERVAL: std::time::Duration = std::time::Duration::from_millis(1100);

impl Loop {
    fn new(api_url: &str, sync: &str) -> Loop {
        Loop::with_files(api_url, &[("apps/web.yaml", &synced_canary("v1", sync))])
    }

    fn with_files(api_url: &str, files: &[(&str, &str)]) -> Loop {
        let tmp = tempfile::tempdir().expect("tmp");
        let bare = crate::support::seeded_remote(tmp.path(), files);
        let human =
            crate::support::human_clone(&bare.display().to_string(), &tmp.path().join("human"));
        let kubeconfig = crate::support::kube::kubeconfig(api_url, tmp.path());
        let workdir = tmp.path().join("w");
        Loop {
            _tmp: tmp,
            bare,
            human,
            kubeconfig,
            workdir,
            clock: crate::support::Stepped::default(),
        }
    }

    /// One `sluice reconcile`; returns how many commits it added.
    fn reconcile(&self) -> usize {
        let before = self.commits();
        let (clock, at) = self.clock.env();
        crate::support::run_ok(
            std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args([
                    "reconcile",
                    "--repo",
                    &self.bare.display().to_string(),
                    "--workdir",
                    &self.workdir.display().to_string(),
                ])
                .env(clock, at)
                .env("KUBECONFIG", &self.kubeconfig)
                .env_remove("KUBERNETES_SERVICE_HOST")
                .env("SLUICE_LOG", "error"),
        );
        self.commits() - before
    }

    fn commits(&self) -> usize {
        git(&self.bare, &["rev-list", "--count", "main"])
            .trim()
            .parse()
            .expect("count")
    }

    fn head(&self) -> String {
        git(&self.bare, &["rev-parse", "main"]).trim().to_string()
    }

    fn weight(&self) -> String {
        let s = git(&self.bare, &["show", "main:.sluice/status/shop/web.yaml"]);
        s.lines()
            .find(|l| l.starts_with("canaryWeight:"))
            .unwrap_or_default()
            .to_string()
    }

    fn human(&self, file: &str, text: &str) {
        git(&self.human, &["pull", "-q", "origin", "main"]);
        crate::support::human_commit(&self.human, file, text, "human change");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_waits_for_flux_to_apply_the_pushed_commit_or_a_descendant_fake_kube_api() {
    let mut api = FakeKubeApi::start().await;
    let l = Loop::new(
        &api.url,
        "{flux: {kustomization: podinfo, namespace: flux-system}}",
    );
    let ready = |rev: &str| {
        kustomization_object(
            1,
            &format!("main@sha1:{rev}"),
            ready_true(1, &format!("main@sha1:{rev}")),
        )
    };
    tokio::task::block_in_place(|| {
        assert_eq!(l.reconcile(), 1, "initialization");
        l.human(
            "apps/web.yaml",
            &synced_canary(
                "v2",
                "{flux: {kustomization: podinfo, namespace: flux-system}}",
            ),
        );
        let human_commit = l.head();
        assert_eq!(l.reconcile(), 1, "new revision detected");
        l.clock.jump(INTERVAL);
        // Flux still runs the human's commit: the step does not start.
        api.put(ready(&human_commit));
        assert_eq!(l.reconcile(), 0, "not applied yet: no step");
        assert_eq!(l.weight(), "canaryWeight: 0");
        // Flux applied sluice's push: the step goes on.
        api.put(ready(&l.head()));
        assert_eq!(l.reconcile(), 1);
        assert_eq!(l.weight(), "canaryWeight: 10");
        l.clock.jump(INTERVAL);
        assert_eq!(l.reconcile(), 0, "the new step is not applied yet");
        // Someone pushed after sluice; Flux applied that descendant: it counts.
        l.human("notes.txt", "unrelated\n");
        api.put(ready(&l.head()));
        assert_eq!(l.reconcile(), 1);
        assert_eq!(l.weight(), "canaryWeight: 50");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_does_not_trust_stale_argo_health_fake_kube_api() {
    let mut api = FakeKubeApi::start().await;
    let sync = "{argocd: {application: podinfo, namespace: argocd}}";
    let l = Loop::new(&api.url, sync);
    tokio::task::block_in_place(|| {
        l.reconcile();
        l.human("apps/web.yaml", &synced_canary("v2", sync));
        assert_eq!(l.reconcile(), 1, "new revision detected");
        l.clock.jump(INTERVAL);
        // Synced to sluice's push, but health was assessed before the sync finished.
        api.put(application_object(argo_status(
            &l.head(),
            "Synced",
            "Healthy",
            "2026-01-01T00:00:40Z",
        )));
        assert_eq!(l.reconcile(), 0, "stale health is not trusted");
        api.put(application_object(argo_status(
            &l.head(),
            "Synced",
            "Healthy",
            "2026-01-01T00:01:00Z",
        )));
        assert_eq!(
            l.reconcile(),
            1,
            "fresh health after the sync: the step goes on"
        );
        assert_eq!(l.weight(), "canaryWeight: 10");
    });
}

fn cluster_deployment(ready: bool) -> Json {
    cluster_workload("web", if ready { 2 } else { 1 })
}

/// Deployment `name` in `shop`, rolled out to 2 updated replicas of which `available` are
/// available.
fn cluster_workload(name: &str, available: i64) -> Json {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop", "generation": 2},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "app", "image": "web:2"}]}},
        },
        "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": available, "readyReplicas": available},
    })
}

fn cluster_route(accepted: bool) -> Json {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop", "generation": 3},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "web-primary", "port": 80}]}]},
        "status": {"parents": [{
            "parentRef": {"name": "gw"},
            "controllerName": "example.com/gateway",
            "conditions": [{
                "type": "Accepted",
                "status": if accepted { "True" } else { "False" },
                "reason": if accepted { "Accepted" } else { "Pending" },
                "message": "",
                "observedGeneration": 3,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }],
        }]},
    })
}

/// The source `shop/web` of the readiness loops, running `image`.
fn web_source(image: &str) -> String {
    format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: shop}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: app, image: '{image}'}}]}}\n")
}

/// A canary of [`web_source`] on an HTTPRoute, waiting for Flux's `flux-system/podinfo`, with
/// `thresholds` appended to its analysis flow map.
fn web_canary(thresholds: &str) -> String {
    let sync = "{flux: {kustomization: podinfo, namespace: flux-system}}";
    format!("apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  source: apps/web/deployment.yaml\n  service: {{port: 80}}\n  route: {{apiVersion: gateway.networking.k8s.io/v1, kind: HTTPRoute, parentRefs: [{{name: gw}}]}}\n  sync: {sync}\n  analysis: {{interval: 1s, stepWeights: [10, 50]{thresholds}}}\n")
}

/// Initializes, has a human bump the image to `web:2`, and (a second on) serves a
/// Kustomization that applied the new head: what each readiness check then waits on.
fn new_revision_applied(l: &Loop, api: &mut FakeKubeApi) {
    assert_eq!(l.reconcile(), 1, "initialization");
    l.human("apps/web/deployment.yaml", &web_source("web:2"));
    assert_eq!(l.reconcile(), 1, "new revision detected");
    l.clock.jump(INTERVAL);
    let head = l.head();
    api.put(kustomization_object(
        1,
        &format!("main@sha1:{head}"),
        ready_true(1, &format!("main@sha1:{head}")),
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_waits_for_the_canary_deployment_and_route_to_be_ready_fake_kube_api() {
    let mut api = FakeKubeApi::start().await;
    let l = Loop::with_files(
        &api.url,
        &[
            ("apps/web/deployment.yaml", &web_source("web:1")),
            ("apps/web/canary.yaml", &web_canary("")),
        ],
    );
    tokio::task::block_in_place(|| {
        new_revision_applied(&l, &mut api);
        api.put(cluster_deployment(true));
        api.put(cluster_route(true));
        assert_eq!(
            l.reconcile(),
            0,
            "applied, but the primary Deployment does not exist yet"
        );
        api.put(cluster_workload("web-primary", 2));
        api.put(cluster_deployment(false));
        assert_eq!(
            l.reconcile(),
            0,
            "applied, but the canary Deployment is not available"
        );
        api.put(cluster_deployment(true));
        api.put(cluster_route(false));
        assert_eq!(l.reconcile(), 0, "the Gateway has not accepted the route");
        api.put(cluster_route(true));
        assert_eq!(l.reconcile(), 1, "ready: the step goes on");
        assert_eq!(l.weight(), "canaryWeight: 10");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_steps_when_the_ready_threshold_share_of_pods_is_available_fake_kube_api() {
    let mut api = FakeKubeApi::start().await;
    let canary = web_canary;
    let l = Loop::with_files(
        &api.url,
        &[
            ("apps/web/deployment.yaml", &web_source("web:1")),
            (
                "apps/web/canary.yaml",
                &canary(", canaryReadyThreshold: 50"),
            ),
        ],
    );
    tokio::task::block_in_place(|| {
        new_revision_applied(&l, &mut api);
        api.put(cluster_route(true));
        // One of two pods available in each: half the canary's is enough (threshold 50),
        // not the primary's (default 100, as Flagger's `primaryReadyThreshold`).
        api.put(cluster_workload("web", 1));
        api.put(cluster_workload("web-primary", 1));
        assert_eq!(
            l.reconcile(),
            0,
            "the primary needs every updated replica available"
        );
        l.human(
            "apps/web/canary.yaml",
            &canary(", canaryReadyThreshold: 50, primaryReadyThreshold: 50"),
        );
        let head = l.head();
        api.put(kustomization_object(
            2,
            &format!("main@sha1:{head}"),
            ready_true(2, &format!("main@sha1:{head}")),
        ));
        assert_eq!(
            l.reconcile(),
            1,
            "half of each workload's pods available: the step goes on"
        );
        assert_eq!(l.weight(), "canaryWeight: 10");
        api.put(cluster_workload("web", 0));
        l.clock.jump(INTERVAL);
        let head = l.head();
        api.put(kustomization_object(
            3,
            &format!("main@sha1:{head}"),
            ready_true(3, &format!("main@sha1:{head}")),
        ));
        assert_eq!(l.reconcile(), 0, "no canary pod available: below 50 %");
    });
}
