//! DaemonSet targets: primary and canary DaemonSets, the idle canary kept off every node with
//! Flagger's `flagger.app/scale-to-zero` node selector, snapshots, schemas, and a rollout
//! through the loop against a real `git daemon`.

use jiff::Timestamp;
use serde_json::Value as Json;
use sluice::core::decide::decide;
use sluice::core::observe::Observations;
use sluice::core::status::Phase;
use sluice::manifest::load::load_text;
use sluice::manifest::settings::Settings;
use sluice::workload::{self, Index};
use sluice::yaml::snapshot::Snapshot;

use crate::support::rollout::{bumped_world, check_every_commit};
use crate::support::Schemas;
use crate::support::SluiceCommit;

/// The Canary of Flagger's e2e test `test/kubernetes/test-daemonset.sh` (webhooks left out).
const CANARY: &str = "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo-ds
  namespace: test
spec:
  provider: kubernetes
  targetRef:
    apiVersion: apps/v1
    kind: DaemonSet
    name: podinfo-ds
  progressDeadlineSeconds: 60
  service:
    port: 80
    targetPort: 9898
    name: podinfo-ds
  analysis:
    interval: 15s
    threshold: 10
    iterations: 5
";

/// Flagger's `test/workloads/daemonset.yaml` (probes and resources left out), plus a node
/// selector of the user's that the idle canary must keep.
const DAEMONSET: &str = "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: podinfo-ds
  labels:
    app.kubernetes.io/name: podinfo-ds
spec:
  minReadySeconds: 5
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      app.kubernetes.io/name: podinfo-ds
  template:
    metadata:
      annotations:
        prometheus.io/scrape: \"true\"
        prometheus.io/port: \"9797\"
      labels:
        app.kubernetes.io/name: podinfo-ds
    spec:
      nodeSelector:
        kubernetes.io/os: linux
      containers:
      - name: podinfod
        image: ghcr.io/stefanprodan/podinfo:6.0.0
        imagePullPolicy: IfNotPresent
        ports:
          - name: http
            containerPort: 9898
            protocol: TCP
          - name: http-metrics
            containerPort: 9797
            protocol: TCP
";

const OUT: &str = "clusters/test/podinfo-ds";

/// The workload files for `daemonset` at the first decision (initialization: canary idle).
fn rendered(daemonset: &str) -> Result<Vec<(String, String)>, String> {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in [
        ("apps/podinfo-ds/daemonset.yaml", daemonset),
        ("apps/podinfo-ds/canary.yaml", CANARY),
    ] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let loaded = load_text("apps/podinfo-ds/canary.yaml", CANARY, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let canary = &loaded.canaries[0];
    let snapshot = Snapshot::read(dir.path());
    let index = Index::new(&snapshot, &[]);
    let rev = workload::revision(dir.path(), canary, &index).map_err(|e| e.to_string())?;
    let d = decide(
        canary,
        None,
        &Observations::revision(rev),
        Timestamp::UNIX_EPOCH,
    );
    workload::render(dir.path(), canary, &d, &index).map_err(|e| e.to_string())
}

fn node_selector(text: &str) -> Json {
    let docs: Vec<Json> = serde_saphyr::from_multiple(text).unwrap();
    docs[0]["spec"]["template"]["spec"]["nodeSelector"].clone()
}

#[test]
fn daemonset_workload_files_snapshot() {
    for (name, text) in rendered(DAEMONSET).unwrap() {
        insta::assert_snapshot!(format!("daemonset-{name}"), text);
    }
}

#[test]
fn idle_canary_daemonset_runs_on_no_node_and_the_primary_everywhere_it_may() {
    let files = rendered(DAEMONSET).unwrap();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "podinfo-ds-primary.yaml",
            "podinfo-ds-canary.yaml",
            "services.yaml"
        ]
    );
    assert_eq!(
        node_selector(&files[1].1),
        serde_json::json!({"kubernetes.io/os": "linux", "flagger.app/scale-to-zero": "true"}),
        "the idle canary keeps the user's selector and adds Flagger's"
    );
    assert_eq!(
        node_selector(&files[0].1),
        serde_json::json!({"kubernetes.io/os": "linux"})
    );
    assert!(
        !files[1].1.contains("replicas"),
        "a DaemonSet has no replicas"
    );
    let mut schemas = Schemas::default();
    for (name, text) in &files {
        let docs: Vec<Json> = serde_saphyr::from_multiple(text).unwrap();
        for doc in &docs {
            let errors = schemas.errors(doc);
            assert!(errors.is_empty(), "{name}: {errors:?}");
        }
    }
    assert!(schemas.0.contains_key("daemonset.apps_v1-strict.json"));
    // The DaemonSet schema bites: replicas is no DaemonSet field.
    let mut bad: Json = serde_saphyr::from_str(&files[1].1).unwrap();
    bad["spec"]["replicas"] = Json::from(0);
    assert!(!schemas.errors(&bad).is_empty());
}

#[test]
fn daemonset_without_rolling_update_is_refused_like_flagger() {
    let on_delete = DAEMONSET.replace(
        "  minReadySeconds: 5\n",
        "  minReadySeconds: 5\n  updateStrategy:\n    type: OnDelete\n",
    );
    let err = rendered(&on_delete).unwrap_err();
    assert_eq!(
        err,
        "apps/podinfo-ds/daemonset.yaml:1: spec.updateStrategy.type: expected RollingUpdate (a DaemonSet canary is promoted by a rolling update, as in Flagger), found \"OnDelete\""
    );
    let rolling = on_delete.replace("OnDelete", "RollingUpdate");
    assert!(rendered(&rolling).is_ok());
}

#[test]
fn other_target_kinds_are_refused_naming_both_workloads() {
    let sts = CANARY.replace("kind: DaemonSet", "kind: StatefulSet");
    let errors = crate::support::canary::errors_in("c.yaml", &sts);
    assert_eq!(
        errors,
        ["c.yaml:10: spec.targetRef.kind: expected Deployment or DaemonSet (the workloads sluice manages), found \"StatefulSet\""]
    );
}

#[test]
fn daemonset_blue_green_rolls_out_through_git_daemon() {
    let mut w = bumped_world(
        "apps/podinfo-ds",
        "daemonset.yaml",
        DAEMONSET,
        CANARY,
        "podinfo-ds",
    );
    w.until_restarting(Phase::Succeeded, |_, i| i == 3);
    let kinds = check_every_commit(
        &w,
        OUT,
        &[
            "kustomization.yaml",
            "podinfo-ds-canary.yaml",
            "podinfo-ds-primary.yaml",
            "services.yaml",
        ],
    );
    assert_eq!(kinds, ["DaemonSet", "Service"]);
    // The canary runs on nodes exactly while its analysis runs.
    let status_file = ".sluice/status/test/podinfo-ds.yaml";
    let mut phases = Vec::new();
    for SluiceCommit { sha, events, .. } in w.commits() {
        let status: Json = serde_saphyr::from_str(&w.show(&sha, status_file)).unwrap();
        let phase = status["phase"].as_str().unwrap().to_string();
        let canary = w.show(&sha, &format!("{OUT}/podinfo-ds-canary.yaml"));
        let idle = node_selector(&canary)["flagger.app/scale-to-zero"] == "true";
        let active = matches!(phase.as_str(), "Progressing" | "Promoting" | "Finalising");
        assert_eq!(idle, !active, "{sha} {phase} {events:?}");
        let primary = w.show(&sha, &format!("{OUT}/podinfo-ds-primary.yaml"));
        assert!(node_selector(&primary)["flagger.app/scale-to-zero"].is_null());
        phases.push(phase);
    }
    assert!(phases.iter().any(|p| p == "Progressing"), "{phases:?}");
    assert_eq!(phases.last().map(String::as_str), Some("Succeeded"));
    assert!(w
        .show("main", &format!("{OUT}/podinfo-ds-primary.yaml"))
        .contains("podinfo:6.0.1"));
}
