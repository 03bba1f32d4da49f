//! `sluice adopt check` against the HTTP-level fake of the Kubernetes API (`support::kube`):
//! each unsafe state of the switch from Flagger exits 1 naming what is wrong, each safe one
//! exits 0 naming the next step. `sluice adopt release` then commits the end of the hold.

use serde_json::{json, Value as Json};

use crate::support::adopt::{held_world, STATUS};
use crate::support::kube::{kubeconfig, FakeKubeApi};
use crate::support::rollout::OUTPUT;
use crate::support::{
    commits_of, human_clone, human_commit, run_sluice_env, show, status_at_main, Stepped,
};

const FLAGGER_UID: &str = "0b7c9a52-4f0e-4c7e-9a55-3f1d2c4b6a70";

fn owner() -> Json {
    json!([{"apiVersion": "flagger.app/v1beta1", "kind": "Canary", "name": "podinfo",
            "uid": FLAGGER_UID, "controller": true, "blockOwnerDeletion": true}])
}

/// The primary Flagger made, as the API server returns it: `image` in sluice's pod template
/// (rendered at `bare`'s main), Flagger's `flagger-id`, the server's defaults, available.
fn live_primary(bare: &std::path::Path, image: &str, owned: bool) -> Json {
    let text = show(bare, "main", &format!("{OUTPUT}/podinfo-primary.yaml"));
    let docs: Vec<Json> = serde_saphyr::from_multiple(&text).unwrap();
    let mut d = docs
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    let template = &mut d["spec"]["template"];
    template["metadata"]["annotations"]["flagger-id"] =
        json!("5d3c0e7a-1b2f-4a9e-8c6d-7f0a1b2c3d4e");
    let container = &mut template["spec"]["containers"][0];
    container["image"] = json!(image);
    container["imagePullPolicy"] = json!("IfNotPresent");
    container["terminationMessagePath"] = json!("/dev/termination-log");
    template["spec"]["restartPolicy"] = json!("Always");
    if owned {
        d["metadata"]["ownerReferences"] = owner();
    }
    d["status"] = json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3,
        "readyReplicas": 3, "availableReplicas": 3,
        "conditions": [{"type": "Available", "status": "True"}]});
    d
}

fn flagger(replicas: i64) -> Json {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "flagger", "namespace": "flagger-system"},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app.kubernetes.io/name": "flagger"}},
                    "template": {"metadata": {"labels": {"app.kubernetes.io/name": "flagger"}},
                                 "spec": {"containers": [{"name": "flagger", "image": "ghcr.io/fluxcd/flagger:1.44.0"}]}}},
           "status": {"replicas": replicas, "availableReplicas": replicas}})
}

fn service(name: &str, owned: bool) -> Json {
    let selector = name.strip_suffix("-canary").unwrap_or(name);
    let mut s = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "prod"},
        "spec": {"selector": {"app": selector}, "ports": [{"name": "http", "port": 9898, "targetPort": 9898}]}});
    if owned {
        s["metadata"]["ownerReferences"] = owner();
    }
    s
}

fn services(api: &mut FakeKubeApi, owned: bool) {
    for name in ["podinfo", "podinfo-primary", "podinfo-canary"] {
        api.put(service(name, owned));
    }
}

fn flagger_canary() -> Json {
    json!({"apiVersion": "flagger.app/v1beta1", "kind": "Canary",
           "metadata": {"name": "podinfo", "namespace": "prod", "uid": FLAGGER_UID},
           "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "podinfo"},
                    "service": {"port": 9898},
                    "analysis": {"interval": "1s", "threshold": 2, "stepWeight": 20, "maxWeight": 60}}})
}

/// [`check`] from inside the async test: the binary runs off the runtime serving the fake.
async fn checked(bare: &std::path::Path, config: &std::path::Path) -> (i32, String) {
    let (bare, config) = (bare.to_path_buf(), config.to_path_buf());
    tokio::task::spawn_blocking(move || check(&bare, &config))
        .await
        .unwrap()
}

/// `sluice adopt check` of `bare` on the fake: its exit code and stdout.
fn check(bare: &std::path::Path, config: &std::path::Path) -> (i32, String) {
    let (code, out, err) = run_sluice_env(
        &["adopt", "check", "--dir", &bare.display().to_string()],
        &[("KUBECONFIG", &config.display().to_string())],
    );
    assert!(err.is_empty() || code == 1, "{err}");
    (code, format!("{out}{err}"))
}

#[track_caller]
fn expect(got: (i32, String), code: i32, says: &[&str]) {
    assert_eq!(got.0, code, "{}", got.1);
    for s in says {
        assert!(got.1.contains(s), "expected {s:?} in:\n{}", got.1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_check_walks_the_runbook_fake_kube_api() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, work) = held_world(tmp.path());
    let mut api = FakeKubeApi::start().await;
    let config = kubeconfig(&api.url, tmp.path());
    // Before the merge: no first render.
    let got = checked(&bare, &config).await;
    expect(
        got,
        1,
        &["FAIL prod/podinfo: no first render committed yet"],
    );
    // Merged, with sluice running: the first render. (Multi-threaded: a blocking call leaves
    // a worker to serve the fake.)
    Stepped::default().reconcile(&bare, &work);
    assert!(status_at_main(&bare, STATUS).is_some());
    api.put(flagger(1));
    api.put(flagger_canary());
    services(&mut api, true);

    // Flagger's primary still runs another template: not yet.
    api.put(live_primary(
        &bare,
        "ghcr.io/stefanprodan/podinfo:6.6.0",
        true,
    ));
    let got = checked(&bare, &config).await;
    expect(got, 1, &["does not run sluice's pod template yet", "spec.template.spec.containers[0].image: sluice renders \"ghcr.io/stefanprodan/podinfo:6.7.0\", the cluster has \"ghcr.io/stefanprodan/podinfo:6.6.0\""]);

    // Applied: safe to scale Flagger to 0.
    api.put(live_primary(
        &bare,
        "ghcr.io/stefanprodan/podinfo:6.7.0",
        true,
    ));
    let got = checked(&bare, &config).await;
    expect(got, 0, &["ok   prod/podinfo: Deployment prod/podinfo-primary runs sluice's pod template", "safe to go on: scale Flagger to 0: kubectl -n flagger-system scale deployment flagger --replicas=0"]);

    // Scaled to 0: safe to delete the Canaries.
    api.put(flagger(0));
    let got = checked(&bare, &config).await;
    expect(got, 0, &["safe to go on: delete each Canary, leaving its objects: kubectl -n prod delete canary podinfo --cascade=orphan"]);

    // Deleted without --cascade=orphan: the primary is still owned, the collector will take it.
    api.remove("canaries", "prod", "podinfo");
    let got = checked(&bare, &config).await;
    expect(got, 1, &["FAIL prod/podinfo: Canary deleted but Deployment podinfo-primary, Service podinfo, Service podinfo-primary, Service podinfo-canary still owned by it"]);

    // ... and collected: the primary is gone.
    api.remove("deployments", "prod", "podinfo-primary");
    let got = checked(&bare, &config).await;
    expect(
        got,
        1,
        &["is gone: it was not deleted with --cascade=orphan"],
    );

    // Orphaned as the runbook says: safe to remove Flagger, then to release.
    api.put(live_primary(
        &bare,
        "ghcr.io/stefanprodan/podinfo:6.7.0",
        false,
    ));
    services(&mut api, false);
    let got = checked(&bare, &config).await;
    expect(got, 0, &["ok   prod/podinfo: Canary deleted, Deployment prod/podinfo-primary left in place with no owner", "safe to go on: remove Flagger"]);
    api.remove("deployments", "flagger-system", "flagger");
    let got = checked(&bare, &config).await;
    expect(got, 0, &["safe to go on: release the hold"]);

    // The hold taken off by hand before the switch is done: not safe.
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    human_commit(
        &human,
        ".sluice/config.yaml",
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n",
        "no hold",
    );
    api.put(flagger(1));
    let got = checked(&bare, &config).await;
    expect(got, 1, &["FAIL adoption.hold is not set"]);
}

#[test]
fn adopt_release_commits_the_end_of_the_hold_and_the_rollout_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, work) = held_world(tmp.path());
    let clock = Stepped::default();
    clock.reconcile(&bare, &work);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    let source = "apps/podinfo/deployment.yaml";
    let bumped = show(&bare, "main", source).replace("6.7.0", "6.7.1");
    human_commit(&human, source, &bumped, "podinfo: 6.7.1");
    clock.jump(std::time::Duration::from_millis(1100));
    clock.reconcile(&bare, &work);
    assert_eq!(commits_of(&bare, "prod/podinfo").len(), 1);
    let bare_arg = bare.display().to_string();
    let release = [
        "adopt",
        "release",
        "--repo",
        &bare_arg,
        "--as",
        "Ada Ops <ada@example.com>",
    ];
    let (code, out, err) = run_sluice_env(&release, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "sluice: release the adoption hold\n");
    assert_eq!(
        show(&bare, "main", ".sluice/config.yaml"),
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n"
    );
    let trailers = crate::support::git(
        &bare,
        &["log", "-1", "--format=%an <%ae>%n%(trailers)", "main"],
    );
    assert_eq!(
        trailers,
        "Ada Ops <ada@example.com>\nSluice-Operator: Ada Ops <ada@example.com>\nSluice-Reason: the switch from Flagger is done\n\n"
    );
    // Nothing left to release: exit 1, no commit.
    let (code, _, err) = run_sluice_env(&release, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(".sluice/config.yaml sets no adoption.hold: nothing to release"),
        "{err}"
    );
    clock.jump(std::time::Duration::from_millis(1100));
    clock.reconcile(&bare, &work);
    assert_eq!(
        status_at_main(&bare, STATUS).unwrap()["phase"].as_str(),
        Some("Progressing")
    );
}
