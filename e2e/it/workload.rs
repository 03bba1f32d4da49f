//! Managed workloads: source lookup, revision hashing and the generated manifests.

use std::path::Path;

use sluice::core::decide::decide;
use sluice::core::observe::Observations;
use sluice::spec::load::load_text;
use sluice::spec::model::Canary;
use sluice::spec::settings::Settings;
use sluice::workload::{self, Index};
use sluice::yaml::snapshot::Snapshot;

pub const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  namespace: prod
  labels:
    app: podinfo
spec:
  replicas: 3
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
      annotations:
        prometheus.io/scrape: \"true\"
    spec:
      containers:
      - name: podinfod
        image: ghcr.io/stefanprodan/podinfo:6.7.0
        ports:
        - containerPort: 9898
        envFrom:
        - configMapRef:
            name: podinfo-env
        env:
        - name: TOKEN
          valueFrom:
            secretKeyRef:
              name: podinfo-token
              key: token
      volumes:
      - name: config
        configMap:
          name: podinfo-files
";

pub const CONFIGS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: podinfo-env
  namespace: prod
data:
  PODINFO_UI_COLOR: \"#34577c\"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: podinfo-files
  namespace: prod
data:
  config.yaml: |
    level: info
";

pub const FLAGGER_CANARY: &str = "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
spec:
  provider: osm
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  service:
    port: 9898
    targetPort: 9898
  analysis:
    interval: 1s
    threshold: 2
    stepWeight: 10
    maxWeight: 50
    stepWeightPromotion: 5
";

fn write(root: &Path, file: &str, text: &str) {
    let path = root.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn setup() -> (tempfile::TempDir, Canary) {
    setup_with(DEPLOYMENT, FLAGGER_CANARY)
}

/// A temp repo holding `deployment`, [`CONFIGS`] and the Flagger `canary_text`, and its canary.
fn setup_with(deployment: &str, canary_text: &str) -> (tempfile::TempDir, Canary) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "apps/podinfo/deployment.yaml", deployment);
    write(dir.path(), "apps/podinfo/configs.yaml", CONFIGS);
    write(dir.path(), "apps/podinfo/canary.yaml", canary_text);
    let loaded = load_text(
        "apps/podinfo/canary.yaml",
        canary_text,
        &Settings::default(),
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    (dir, loaded.canaries.into_iter().next().unwrap())
}

/// The files `workload::render` writes for the first decision on the repo at `root`.
fn rendered(root: &Path, canary: &Canary) -> Vec<(String, String)> {
    let snapshot = Snapshot::read(root);
    let index = Index::new(&snapshot, &[]);
    let rev = workload::revision(root, canary, &index).unwrap();
    let d = decide(
        canary,
        None,
        &Observations::revision(rev),
        jiff::Timestamp::UNIX_EPOCH,
    );
    workload::render(root, canary, &d, &index).unwrap()
}

/// The error `workload::revision` returns for the repo at `root`.
fn revision_error(root: &Path, canary: &Canary) -> String {
    let snapshot = Snapshot::read(root);
    let index = Index::new(&snapshot, &[]);
    workload::revision(root, canary, &index)
        .unwrap_err()
        .to_string()
}

fn revision(root: &Path, canary: &Canary) -> String {
    let snapshot = Snapshot::read(root);
    let outputs = [canary.output.as_str()];
    let index = Index::new(&snapshot, &outputs);
    workload::revision(root, canary, &index).unwrap()
}

#[test]
fn revision_ignores_replicas_and_key_order_but_not_configs() {
    let (dir, canary) = setup();
    let base = revision(dir.path(), &canary);
    write(
        dir.path(),
        "apps/podinfo/deployment.yaml",
        &DEPLOYMENT.replace("replicas: 3", "replicas: 5"),
    );
    assert_eq!(
        revision(dir.path(), &canary),
        base,
        "replicas are not part of the revision"
    );
    write(
        dir.path(),
        "apps/podinfo/configs.yaml",
        &CONFIGS.replace("level: info", "level: debug"),
    );
    let changed = revision(dir.path(), &canary);
    assert_ne!(changed, base, "a ConfigMap change alone is a new revision");
    write(dir.path(), "apps/podinfo/configs.yaml", CONFIGS);
    assert_eq!(
        revision(dir.path(), &canary),
        base,
        "going back restores the revision"
    );
    write(
        dir.path(),
        "apps/podinfo/deployment.yaml",
        &DEPLOYMENT.replace("6.7.0", "6.7.1"),
    );
    assert_ne!(revision(dir.path(), &canary), base);
}

#[test]
fn primary_and_canary_manifests_keep_the_source_and_rename_what_they_must() {
    let (dir, canary) = setup();
    let files = rendered(dir.path(), &canary);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "podinfo-primary.yaml",
            "podinfo-canary.yaml",
            "services.yaml"
        ]
    );
    let primary = &files[0].1;
    assert!(primary.starts_with("# Generated by sluice"), "{primary}");
    assert!(primary.contains("name: podinfo-primary"));
    assert!(primary.contains("app: podinfo-primary"));
    assert!(primary.contains("name: podinfo-env-primary"), "{primary}");
    assert!(primary.contains("name: podinfo-files-primary"), "{primary}");
    assert!(
        primary.contains("prometheus.io/scrape: \"true\""),
        "annotations kept: {primary}"
    );
    assert!(primary.contains("replicas: 3"));
    // key order of the source is kept: metadata before spec, selector before template
    let meta = primary.find("metadata:").unwrap();
    let spec = primary.find("\nspec:").unwrap();
    assert!(meta < spec);
    let canary_file = &files[1].1;
    assert!(
        canary_file.contains("replicas: 0"),
        "idle canary is scaled to zero: {canary_file}"
    );
    assert!(canary_file.contains("name: podinfo-env\n"), "{canary_file}");
    let services = &files[2].1;
    for svc in [
        "name: podinfo\n",
        "name: podinfo-primary\n",
        "name: podinfo-canary\n",
    ] {
        assert!(services.contains(svc), "{services}");
    }
}

/// Flagger 1.44 (#1931): a promotion whose primary does not get ready fails with all traffic
/// on the canary, so the canary Deployment keeps its replicas; a rollback scales it to zero.
#[test]
fn a_failed_promotion_keeps_the_canary_running() {
    let (dir, canary) = setup();
    let snapshot = Snapshot::read(dir.path());
    let index = Index::new(&snapshot, &[]);
    let rev = workload::revision(dir.path(), &canary, &index).unwrap();
    let mut now = jiff::Timestamp::UNIX_EPOCH;
    let mut status = decide(&canary, None, &Observations::revision("old"), now).status;
    // The new revision rolls out until the primary takes it.
    let live = Observations::revision(rev.clone());
    for _ in 0..100 {
        if status.phase == sluice::core::status::Phase::Promoting {
            break;
        }
        let d = decide(&canary, Some(&status), &live, now);
        now = d.wake_at.unwrap_or(now).max(now) + std::time::Duration::from_secs(1);
        status = d.status;
    }
    assert_eq!(status.phase, sluice::core::status::Phase::Promoting);
    let not_ready = Observations {
        applied: false,
        ..Observations::revision(rev)
    };
    let failed = decide(
        &canary,
        Some(&status),
        &not_ready,
        now + std::time::Duration::from_secs(3600),
    );
    assert_eq!(
        (failed.status.primary_weight, failed.status.canary_weight),
        (0, 100),
        "{:?}",
        failed.action
    );
    let files = workload::render(dir.path(), &canary, &failed, &index).unwrap();
    let canary_file = &files
        .iter()
        .find(|(n, _)| n == "podinfo-canary.yaml")
        .unwrap()
        .1;
    assert!(canary_file.contains("replicas: 3"), "{canary_file}");
}

#[test]
fn missing_source_or_wrong_kind_or_no_selector_is_a_clear_error() {
    let (dir, canary) = setup();
    std::fs::remove_file(dir.path().join("apps/podinfo/deployment.yaml")).unwrap();
    let err = revision_error(dir.path(), &canary);
    assert!(
        err.contains("source not found: expected Deployment prod/podinfo"),
        "{err}"
    );

    let (dir, canary) = setup();
    write(
        dir.path(),
        "apps/podinfo/deployment.yaml",
        &DEPLOYMENT
            .replace("app: podinfo\n  template", "tier: web\n  template")
            .replace(
                "    matchLabels:\n      app: podinfo",
                "    matchLabels:\n      tier: web",
            ),
    );
    let err = revision_error(dir.path(), &canary);
    assert!(
        err.contains("spec.selector.matchLabels: expected one of the labels app"),
        "{err}"
    );
    assert!(err.contains("found tier"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "apps/web/deployment.yaml",
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\n",
    );
    let native = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web}\nspec:\n  source: apps/web/deployment.yaml\n  service: {port: 80}\n  route: {apiVersion: split.smi-spec.io/v1alpha2, kind: TrafficSplit}\n  analysis: {stepWeight: 50}\n";
    let canary = load_text("c.yaml", native, &Settings::default())
        .canaries
        .remove(0);
    let err = revision_error(dir.path(), &canary);
    assert!(
        err.contains("spec.source must name a Deployment manifest, found kind StatefulSet"),
        "{err}"
    );
}

#[test]
fn generated_deployments_and_services_match_strict_schemas() {
    let (dir, canary) = setup();
    let mut schemas = crate::support::Schemas::default();
    for (name, text) in rendered(dir.path(), &canary) {
        // ConfigMaps have no schema in the set; validate Deployments and Services.
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        for doc in docs
            .iter()
            .filter(|d| d["kind"] == "Deployment" || d["kind"] == "Service")
        {
            let errors = schemas.errors(doc);
            assert!(errors.is_empty(), "{name}: {errors:?}\n{text}");
        }
    }
    assert_eq!(
        schemas.0.len(),
        2,
        "both the Deployment and the Service schema were used"
    );
    // The checker bites: a misspelt field fails.
    let bad: serde_json::Value = serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"prots": []}});
    assert!(!schemas.errors(&bad).is_empty());
}

#[test]
fn generated_workload_files_snapshot() {
    let (dir, canary) = setup();
    for (name, text) in rendered(dir.path(), &canary) {
        insta::assert_snapshot!(format!("workload-{name}"), text);
    }
}

/// Flagger's `service.trafficDistribution` on the apex, primary and canary Services, as
/// Flagger's `KubernetesDefaultRouter.reconcileService` sets it on each (it was refused).
#[test]
fn traffic_distribution_goes_on_the_three_services() {
    let canary_text = FLAGGER_CANARY.replace(
        "    targetPort: 9898\n",
        "    targetPort: 9898\n    trafficDistribution: PreferSameZone\n",
    );
    let (dir, canary) = setup_with(DEPLOYMENT, &canary_text);
    let files = rendered(dir.path(), &canary);
    let services = &files.iter().find(|(n, _)| n == "services.yaml").unwrap().1;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(services).unwrap();
    let mut schemas = crate::support::Schemas::default();
    let mut names = Vec::new();
    for doc in &docs {
        assert_eq!(schemas.errors(doc), Vec::<String>::new(), "{doc}");
        assert_eq!(
            doc["spec"]["trafficDistribution"], "PreferSameZone",
            "{doc}"
        );
        names.push(doc["metadata"]["name"].as_str().unwrap().to_string());
    }
    assert_eq!(names, ["podinfo", "podinfo-primary", "podinfo-canary"]);
    // Without it, no Service carries one.
    let (dir, canary) = setup_with(DEPLOYMENT, FLAGGER_CANARY);
    let files = rendered(dir.path(), &canary);
    let services = &files.iter().find(|(n, _)| n == "services.yaml").unwrap().1;
    assert!(!services.contains("trafficDistribution"), "{services}");
}

/// Flagger's `service` fields on the three Services: `portName`, `appProtocol`, `headless`,
/// the `apex`/`primary`/`canary` labels and annotations, and `portDiscovery` exposing the pod
/// template's other container ports (mesh proxies and the target port left out), as Flagger's
/// `KubernetesDefaultRouter` and `getPorts` write them.
#[test]
fn service_fields_render_as_flagger_writes_them() {
    let deployment = DEPLOYMENT.replace(
        "        ports:\n        - containerPort: 9898\n",
        "        ports:\n        - containerPort: 9898\n        - name: grpc\n          containerPort: 9999\n        - containerPort: 8080\n      - name: istio-proxy\n        image: istio/proxyv2\n        ports:\n        - containerPort: 15090\n          name: http-envoy-prom\n",
    );
    let canary_text = FLAGGER_CANARY.replace(
        "    targetPort: 9898\n",
        "    targetPort: 9898\n    portName: http-web\n    appProtocol: http\n    headless: true\n    portDiscovery: true\n    apex:\n      labels: {tier: web}\n      annotations: {team/owner: payments}\n    primary:\n      labels: {track: stable}\n    canary:\n      annotations: {track: canary}\n",
    );
    let (dir, canary) = setup_with(&deployment, &canary_text);
    let files = rendered(dir.path(), &canary);
    let services = &files.iter().find(|(n, _)| n == "services.yaml").unwrap().1;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(services).unwrap();
    let mut schemas = crate::support::Schemas::default();
    for doc in &docs {
        assert_eq!(schemas.errors(doc), Vec::<String>::new(), "{doc}");
    }
    let by_name = |name: &str| {
        docs.iter()
            .find(|d| d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Service {name}: {services}"))
    };
    for svc in ["podinfo", "podinfo-primary", "podinfo-canary"] {
        let doc = by_name(svc);
        assert_eq!(doc["spec"]["clusterIP"], "None", "headless: {doc}");
        assert_eq!(
            doc["spec"]["ports"],
            serde_json::json!([
                {"name": "http-web", "port": 9898, "protocol": "TCP", "targetPort": 9898, "appProtocol": "http"},
                {"name": "tcp-podinfod-2", "port": 8080, "protocol": "TCP", "targetPort": 8080},
                {"name": "grpc", "port": 9999, "protocol": "TCP", "targetPort": 9999},
            ]),
            "{svc}: the target port once, discovered ports after it, no proxy port"
        );
    }
    assert_eq!(by_name("podinfo")["metadata"]["labels"]["tier"], "web");
    assert_eq!(
        by_name("podinfo")["metadata"]["annotations"]["team/owner"],
        "payments"
    );
    assert_eq!(
        by_name("podinfo-primary")["metadata"]["labels"]["track"],
        "stable"
    );
    assert_eq!(
        by_name("podinfo-canary")["metadata"]["annotations"]["track"],
        "canary"
    );
    assert!(
        by_name("podinfo-canary")["metadata"]["labels"]
            .get("tier")
            .is_none(),
        "apex labels stay on the apex Service"
    );
}
