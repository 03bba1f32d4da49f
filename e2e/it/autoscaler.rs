//! Autoscalers (`spec.autoscalerRef`): the primary's and the canary's HorizontalPodAutoscaler
//! or KEDA ScaledObject as Flagger makes them, the errors of a reference sluice cannot
//! resolve, and the rule that no sluice commit fights an autoscaler over `spec.replicas`
//! (checked by applying every commit of whole rollouts the way Flux's server-side apply does).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{json, Value as Json};
use sluice::core::decide::{decide, Decision};
use sluice::core::observe::Observations;
use sluice::core::status::Phase;
use sluice::manifest::load::load_text;
use sluice::manifest::model::Canary;
use sluice::manifest::settings::Settings;
use sluice::workload::autoscaler::rewrite_query;
use sluice::workload::{self, Index};
use sluice::yaml::snapshot::Snapshot;

use crate::support::manifests::{CONFIGS, DEPLOYMENT, FLAGGER_CANARY};
use crate::support::{git, git_lines, Checks, Schemas, Transport, World};

/// Flagger's `test/kubernetes/test-hpa.sh` HPA, in the canary's namespace.
pub const HPA: &str = "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: podinfo
  namespace: prod
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  minReplicas: 2
  maxReplicas: 4
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 99
";

/// Flagger's `test/keda/test-scaledobject.sh` ScaledObject, in the canary's namespace.
pub const SCALED_OBJECT: &str = "apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: podinfo-so
  namespace: prod
spec:
  scaleTargetRef:
    name: podinfo
  pollingInterval: 10
  cooldownPeriod: 20
  minReplicaCount: 1
  maxReplicaCount: 3
  triggers:
  - type: prometheus
    metricType: AverageValue
    metadata:
      serverAddress: http://flagger-prometheus.flagger-system:9090
      metricName: http_requests_total
      query: sum(rate(http_requests_total{ app=\"podinfo\" }[30s]))
      threshold: '5'
";

const HPA_REF: &str = "  autoscalerRef:
    apiVersion: autoscaling/v2
    kind: HorizontalPodAutoscaler
    name: podinfo
";

const SO_REF: &str = "  autoscalerRef:
    apiVersion: keda.sh/v1alpha1
    kind: ScaledObject
    name: podinfo-so
";

/// The seed canary with `reference` (an `autoscalerRef` block) after its targetRef.
fn with_ref(reference: &str) -> String {
    FLAGGER_CANARY.replace("  service:\n", &format!("{reference}  service:\n"))
}

const CANARY_FILE: &str = "apps/podinfo/canary.yaml";
const OUT: &str = "clusters/prod/podinfo";

fn write(root: &Path, file: &str, text: &str) {
    let path = root.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A work tree with the source, its configs, `scaler` and the canary naming it.
fn setup(scaler: &str, canary_text: &str) -> (tempfile::TempDir, Canary) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "apps/podinfo/deployment.yaml", DEPLOYMENT);
    write(dir.path(), "apps/podinfo/configs.yaml", CONFIGS);
    write(dir.path(), "apps/podinfo/autoscaler.yaml", scaler);
    write(dir.path(), CANARY_FILE, canary_text);
    let loaded = load_text(CANARY_FILE, canary_text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    (dir, loaded.canaries.into_iter().next().unwrap())
}

/// The files of the initialization commit (idle canary) and of the commit that scales the
/// canary up for a new revision (analysis running).
fn idle_and_active(root: &Path, canary: &Canary) -> [(Decision, Vec<(String, String)>); 2] {
    let snapshot = Snapshot::read(root);
    let outputs = [canary.output.as_str()];
    let index = Index::new(&snapshot, &outputs);
    let rev = workload::revision(root, canary, &index).unwrap();
    let t0 = Timestamp::UNIX_EPOCH;
    let init = decide(canary, None, &Observations::revision(rev), t0);
    let scale_up = decide(
        canary,
        Some(&init.status),
        &Observations::revision("a-new-revision"),
        t0 + Duration::from_secs(1),
    );
    assert!(!init.status.phase.is_active());
    assert!(scale_up.status.phase.is_active(), "{:?}", scale_up.status);
    let files = |d: &Decision| workload::render(root, canary, d, &index).unwrap();
    let a = files(&init);
    let b = files(&scale_up);
    [(init, a), (scale_up, b)]
}

fn docs(text: &str) -> Vec<Json> {
    serde_saphyr::from_multiple(text).unwrap()
}

fn find(files: &[(String, String)], file: &str) -> Vec<Json> {
    let text = &files.iter().find(|(n, _)| n == file).unwrap().1;
    docs(text)
}

fn kind<'a>(docs: &'a [Json], kind: &str) -> Option<&'a Json> {
    docs.iter().find(|d| d["kind"] == kind)
}

/// Every rendered Deployment, HPA and ScaledObject validates against its strict schema.
fn validate(files: &[(String, String)], schemas: &mut Schemas) {
    for (name, text) in files {
        for doc in docs(text) {
            if [
                "Deployment",
                "Service",
                "HorizontalPodAutoscaler",
                "ScaledObject",
            ]
            .contains(&doc["kind"].as_str().unwrap())
            {
                let errors = schemas.errors(&doc);
                assert!(errors.is_empty(), "{name}: {errors:?}\n{text}");
            }
        }
    }
}

#[test]
fn hpa_canary_writes_flaggers_primary_hpa_and_leaves_replicas_to_it() {
    let (dir, canary) = setup(HPA, &with_ref(HPA_REF));
    let [(_, idle), (_, active)] = idle_and_active(dir.path(), &canary);
    let mut schemas = Schemas::default();
    validate(&idle, &mut schemas);
    validate(&active, &mut schemas);
    assert!(schemas
        .0
        .contains_key("horizontalpodautoscaler.autoscaling_v2-strict.json"));

    let primary = find(&idle, "podinfo-primary.yaml");
    let hpa = kind(&primary, "HorizontalPodAutoscaler").expect("the primary's HPA");
    assert_eq!(
        hpa,
        &json!({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "podinfo-primary", "namespace": "prod"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "podinfo-primary"},
                "minReplicas": 2,
                "maxReplicas": 4,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 99}}}]
            }
        }),
        "Flagger's reconcilePrimaryHpaV2: the user's spec, retargeted at the primary"
    );
    let primary_dep = kind(&primary, "Deployment").unwrap();
    assert!(
        primary_dep["spec"].get("replicas").is_none(),
        "the source's replicas: 3 is left to the primary's HPA"
    );

    let idle_canary = find(&idle, "podinfo-canary.yaml");
    assert_eq!(
        kind(&idle_canary, "Deployment").unwrap()["spec"]["replicas"],
        0
    );
    assert!(
        kind(&idle_canary, "HorizontalPodAutoscaler").is_none(),
        "no canary HPA while idle"
    );
    let active_canary = find(&active, "podinfo-canary.yaml");
    assert!(kind(&active_canary, "Deployment").unwrap()["spec"]
        .get("replicas")
        .is_none());
    let canary_hpa = kind(&active_canary, "HorizontalPodAutoscaler").unwrap();
    assert_eq!(canary_hpa["metadata"]["name"], "podinfo");
    assert_eq!(canary_hpa["spec"]["scaleTargetRef"]["name"], "podinfo");

    for (phase, files) in [("idle", &idle), ("active", &active)] {
        // The primary does not change when an analysis starts: one snapshot of it.
        let snapshotted = |n: &str| {
            n == "podinfo-canary.yaml" || (phase == "idle" && n == "podinfo-primary.yaml")
        };
        for (name, text) in files.iter().filter(|(n, _)| snapshotted(n)) {
            insta::assert_snapshot!(format!("autoscaler-hpa-{phase}-{name}"), text);
        }
    }
}

#[test]
fn hpa_v2beta2_input_is_written_as_v2_and_primary_bounds_come_from_primary_scaler_replicas() {
    let reference = format!(
        "{HPA_REF}    primaryScalerReplicas:\n      minReplicas: 3\n      maxReplicas: 9\n"
    )
    .replace("autoscaling/v2", "autoscaling/v2beta2");
    let (dir, canary) = setup(
        &HPA.replace("autoscaling/v2", "autoscaling/v2beta2"),
        &with_ref(&reference),
    );
    let [(_, idle), (_, active)] = idle_and_active(dir.path(), &canary);
    let mut schemas = Schemas::default();
    validate(&idle, &mut schemas);
    validate(&active, &mut schemas);
    let primary = find(&idle, "podinfo-primary.yaml");
    let hpa = kind(&primary, "HorizontalPodAutoscaler").unwrap();
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(
        (
            hpa["spec"]["minReplicas"].clone(),
            hpa["spec"]["maxReplicas"].clone()
        ),
        (json!(3), json!(9))
    );
    let canary_hpa = kind(
        &find(&active, "podinfo-canary.yaml"),
        "HorizontalPodAutoscaler",
    )
    .cloned()
    .unwrap();
    assert_eq!(canary_hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(
        (
            canary_hpa["spec"]["minReplicas"].clone(),
            canary_hpa["spec"]["maxReplicas"].clone()
        ),
        (json!(2), json!(4)),
        "the canary keeps the user's bounds"
    );
}

#[test]
fn keda_canary_writes_flaggers_primary_scaled_object_and_pauses_the_idle_canary() {
    let (dir, canary) = setup(SCALED_OBJECT, &with_ref(SO_REF));
    let [(_, idle), (_, active)] = idle_and_active(dir.path(), &canary);
    let mut schemas = Schemas::default();
    validate(&idle, &mut schemas);
    validate(&active, &mut schemas);
    assert!(schemas
        .0
        .contains_key("scaledobject.keda.sh_v1alpha1-strict.json"));

    let primary = find(&idle, "podinfo-primary.yaml");
    let so = kind(&primary, "ScaledObject").expect("the primary's ScaledObject");
    assert_eq!(
        so,
        &json!({
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"name": "podinfo-so-primary", "namespace": "prod"},
            "spec": {
                "scaleTargetRef": {"name": "podinfo-primary"},
                "pollingInterval": 10,
                "cooldownPeriod": 20,
                "minReplicaCount": 1,
                "maxReplicaCount": 3,
                "advanced": {"horizontalPodAutoscalerConfig": {}},
                "triggers": [{
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": "http://flagger-prometheus.flagger-system:9090",
                        "metricName": "http_requests_total",
                        // Flagger's e2e test expects exactly this query.
                        "query": "sum(rate(http_requests_total{ app=\"podinfo-primary\" }[30s]))",
                        "threshold": "5"
                    }
                }]
            }
        })
    );
    for file in [&idle, &active] {
        let dep = kind(&find(file, "podinfo-canary.yaml"), "Deployment")
            .cloned()
            .unwrap();
        assert!(
            dep["spec"].get("replicas").is_none(),
            "KEDA owns the canary's replicas"
        );
        let dep = kind(&find(file, "podinfo-primary.yaml"), "Deployment")
            .cloned()
            .unwrap();
        assert!(dep["spec"].get("replicas").is_none());
    }
    let idle_so = kind(&find(&idle, "podinfo-canary.yaml"), "ScaledObject")
        .cloned()
        .unwrap();
    assert_eq!(
        idle_so["metadata"]["annotations"]["autoscaling.keda.sh/paused-replicas"],
        "0"
    );
    assert_eq!(idle_so["spec"]["scaleTargetRef"]["name"], "podinfo");
    let active_so = kind(&find(&active, "podinfo-canary.yaml"), "ScaledObject")
        .cloned()
        .unwrap();
    assert!(active_so["metadata"]
        .get("annotations")
        .and_then(|a| a.get("autoscaling.keda.sh/paused-replicas"))
        .is_none());

    for (phase, files) in [("idle", &idle), ("active", &active)] {
        // The primary does not change when an analysis starts: one snapshot of it.
        let snapshotted = |n: &str| {
            n == "podinfo-canary.yaml" || (phase == "idle" && n == "podinfo-primary.yaml")
        };
        for (name, text) in files.iter().filter(|(n, _)| snapshotted(n)) {
            insta::assert_snapshot!(format!("autoscaler-keda-{phase}-{name}"), text);
        }
    }
}

#[test]
fn keda_primary_queries_and_hpa_config_name_follow_flagger() {
    let scaler = SCALED_OBJECT
        .replace("  triggers:\n  - type: prometheus\n", "  advanced:\n    horizontalPodAutoscalerConfig:\n      name: podinfo-hpa\n  triggers:\n  - type: prometheus\n    name: rps\n")
        + "  - type: prometheus\n    name: other\n    metadata:\n      serverAddress: http://prom:9090\n      query: sum(up{app=\"podinfo-canary\"})\n      threshold: '1'\n";
    let reference = format!(
        "{SO_REF}    primaryScalerQueries:\n      rps: sum(rate(http_requests_total{{ app=\"podinfo-primary\", code=\"200\" }}[30s]))\n    primaryScalerReplicas:\n      minReplicas: 2\n"
    );
    let (dir, canary) = setup(&scaler, &with_ref(&reference));
    let [(_, idle), _] = idle_and_active(dir.path(), &canary);
    validate(&idle, &mut Schemas::default());
    let primary = find(&idle, "podinfo-primary.yaml");
    let so = kind(&primary, "ScaledObject").unwrap();
    assert_eq!(
        so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"],
        "podinfo-hpa-primary"
    );
    assert_eq!(so["spec"]["minReplicaCount"], 2);
    assert_eq!(
        so["spec"]["triggers"][0]["metadata"]["query"],
        "sum(rate(http_requests_total{ app=\"podinfo-primary\", code=\"200\" }[30s]))"
    );
    assert_eq!(
        so["spec"]["triggers"][1]["metadata"]["query"], "sum(up{app=\"podinfo-canary\"})",
        "with primaryScalerQueries set, Flagger leaves an unnamed trigger's query as written"
    );
}

#[test]
fn query_rewrite_targets_the_primary_without_doubling_suffixes() {
    assert_eq!(
        rewrite_query("a{app=\"podinfo\"} + b{app=\"podinfo-canary\"}", "podinfo"),
        "a{app=\"podinfo-primary\"} + b{app=\"podinfo-primary\"}"
    );
    assert_eq!(
        rewrite_query("up{job=\"other\"}", "podinfo"),
        "up{job=\"other\"}"
    );
}

/// `sluice validate` on a folder: the problems printed, one per line.
fn validate_errors(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    for (f, t) in files {
        write(dir.path(), f, t);
    }
    std::fs::create_dir_all(dir.path().join(".sluice")).unwrap();
    std::fs::write(dir.path().join(".sluice/config.yaml"), "").unwrap();
    let (_, loaded) = sluice::cli::validate::load(
        &[dir.path().to_path_buf()],
        Some(&dir.path().join(".sluice/config.yaml")),
    );
    let root = format!("{}/", dir.path().display());
    loaded
        .errors
        .iter()
        .map(|e| e.to_string().replace(&root, ""))
        .collect()
}

#[test]
fn unresolved_or_uncopyable_autoscaler_is_a_validate_error_with_file_line_and_field() {
    let canary = with_ref(HPA_REF);
    let base = [
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        (CANARY_FILE, canary.as_str()),
    ];
    let errors = validate_errors(&base);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].ends_with("canary.yaml:15: spec.autoscalerRef.name: HorizontalPodAutoscaler prod/podinfo not found in the repo's YAML files (sluice's output folders are not searched)"),
        "{errors:?}"
    );

    let v1 = HPA.replace("autoscaling/v2", "autoscaling/v1");
    let wrong_target = HPA.replace(
        "    name: podinfo\n  minReplicas",
        "    name: other\n  minReplicas",
    );
    let so_extra = SCALED_OBJECT.replace(
        "  pollingInterval: 10\n",
        "  pollingInterval: 10\n  initialCooldownPeriod: 5\n",
    );
    let so_canary = with_ref(SO_REF);
    let cases: [(&str, &str, &str); 3] = [
        (&v1, &canary, "autoscaler.yaml:1: apiVersion: expected autoscaling/v2 or autoscaling/v2beta2 (sluice writes autoscaling/v2), found \"autoscaling/v1\""),
        (&wrong_target, &canary, "autoscaler.yaml:10: spec.scaleTargetRef.name: expected \"podinfo\""),
        (&so_extra, &so_canary, "autoscaler.yaml:10: spec.initialCooldownPeriod: Flagger does not copy this field to the primary's ScaledObject"),
    ];
    for (scaler, canary, expected) in cases {
        let errors = validate_errors(&[
            ("apps/podinfo/deployment.yaml", DEPLOYMENT),
            ("apps/podinfo/autoscaler.yaml", scaler),
            (CANARY_FILE, canary),
        ]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains(expected),
            "{errors:?} should contain {expected}"
        );
    }
    // And the reference itself.
    let errors = validate_errors(&[(
        CANARY_FILE,
        &with_ref("  autoscalerRef:\n    kind: VerticalPodAutoscaler\n    name: podinfo\n"),
    )]);
    assert!(
        errors[0].contains("canary.yaml:13: spec.autoscalerRef.kind: expected HorizontalPodAutoscaler or ScaledObject"),
        "{errors:?}"
    );
    let errors = validate_errors(&[(
        CANARY_FILE,
        &with_ref(&format!(
            "{HPA_REF}    primaryScalerQueries:\n      rps: up\n"
        )),
    )]);
    assert!(
        errors[0].contains("spec.autoscalerRef.primaryScalerQueries: only a ScaledObject"),
        "{errors:?}"
    );
    // A valid one passes.
    let errors = validate_errors(&[
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        ("apps/podinfo/autoscaler.yaml", HPA),
        (CANARY_FILE, &canary),
    ]);
    assert!(errors.is_empty(), "{errors:?}");
}

// ---------------------------------------------------------------------------------------
// A fake of Flux's server-side apply, and whole rollouts through the loop.

/// A field's path: map keys from the object's root.
type FieldPath = Vec<String>;

/// One object as the API server keeps it: its fields and, per field, the managers that own
/// it (`metadata.managedFields`).
#[derive(Debug, Clone, PartialEq)]
struct Live {
    object: Json,
    owners: BTreeMap<FieldPath, BTreeSet<String>>,
}

/// The leaf fields of a manifest. Assumption: lists are atomic (one field), as
/// `x-kubernetes-list-type: atomic`; the objects here differ only in scalar fields.
fn leaves(v: &Json, prefix: &mut FieldPath, out: &mut BTreeMap<FieldPath, Json>) {
    match v {
        Json::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                prefix.push(k.clone());
                leaves(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone(), v.clone());
        }
    }
}

fn at<'a>(v: &'a Json, path: &[String]) -> Option<&'a Json> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn set_at(v: &mut Json, path: &[String], value: Json) {
    let (last, parents) = path.split_last().expect("a field path");
    let mut cur = v;
    for k in parents {
        if !cur.get(k).is_some_and(Json::is_object) {
            cur[k.as_str()] = json!({});
        }
        cur = &mut cur[k.as_str()];
    }
    cur[last.as_str()] = value;
}

fn remove_at(v: &mut Json, path: &[String]) {
    let (last, parents) = path.split_last().expect("a field path");
    let mut cur = v;
    for k in parents {
        match cur.get_mut(k) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

/// The API server's defaults this test relies on: a Deployment without `spec.replicas` gets 1.
fn defaults(object: &mut Json) {
    if object["kind"] == "Deployment" && at(object, &["spec".into(), "replicas".into()]).is_none() {
        object["spec"]["replicas"] = json!(1);
    }
}

/// Server-side apply of `manifest` by `manager` with `force: true`, as Flux's
/// kustomize-controller applies. What it assumes of the API server:
/// - a field in the manifest takes the manifest's value; when another manager had set a
///   different value, force moves ownership to `manager` (a conflict is overridden);
/// - a field the manager owned and the manifest no longer has is released: when another
///   manager still owns it, the value stays; when nobody does, the field is removed and the
///   API server's default applies (`spec.replicas` -> 1);
/// - lists are atomic (see [`leaves`]).
fn apply(live: Option<&Live>, manager: &str, manifest: &Json) -> Live {
    let mut next = live.cloned().unwrap_or(Live {
        object: json!({}),
        owners: BTreeMap::new(),
    });
    let mut fields = BTreeMap::new();
    leaves(manifest, &mut Vec::new(), &mut fields);
    for (path, value) in &fields {
        let owners = next.owners.entry(path.clone()).or_default();
        if at(&next.object, path) != Some(value) {
            owners.clear();
        }
        owners.insert(manager.to_string());
        set_at(&mut next.object, path, value.clone());
    }
    let released: Vec<FieldPath> = next
        .owners
        .iter()
        .filter(|(p, o)| o.contains(manager) && !fields.contains_key(*p))
        .map(|(p, _)| p.clone())
        .collect();
    for path in released {
        let owners = next.owners.get_mut(&path).expect("listed above");
        owners.remove(manager);
        if owners.is_empty() {
            next.owners.remove(&path);
            remove_at(&mut next.object, &path);
        }
    }
    defaults(&mut next.object);
    next
}

/// An Update by `manager` (an autoscaler writing the scale subresource): the value changes
/// and the updater becomes the field's only owner.
fn update(live: &Live, manager: &str, path: &[&str], value: Json) -> Live {
    let path: FieldPath = path.iter().map(|s| s.to_string()).collect();
    let mut next = live.clone();
    if at(&next.object, &path) != Some(&value) {
        next.owners
            .insert(path.clone(), BTreeSet::from([manager.to_string()]));
        set_at(&mut next.object, &path, value);
    }
    next
}

#[test]
fn fake_server_side_apply_releases_removed_fields_and_forces_conflicts() {
    let replicas = ["spec", "replicas"];
    let dep = |r: Option<i64>| match r {
        Some(r) => json!({"kind": "Deployment", "spec": {"replicas": r, "x": 1}}),
        None => json!({"kind": "Deployment", "spec": {"x": 1}}),
    };
    // Owned by nobody else: removed, then defaulted.
    let a = apply(None, "flux", &dep(Some(0)));
    assert_eq!(
        apply(Some(&a), "flux", &dep(None)).object["spec"]["replicas"],
        1
    );
    // Set by an autoscaler: a manifest without the field keeps its value...
    let scaled = update(&a, "hpa", &replicas, json!(7));
    assert_eq!(
        apply(Some(&scaled), "flux", &dep(None)).object["spec"]["replicas"],
        7
    );
    // ...and one with the field takes it back (the fight).
    assert_eq!(
        apply(Some(&scaled), "flux", &dep(Some(3))).object["spec"]["replicas"],
        3
    );
}

/// An autoscaler as the fake cluster runs it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scaler {
    /// An HPA: cannot scale up from 0 (Kubernetes disables it, `ScalingDisabled`).
    Hpa,
    /// A KEDA ScaledObject: scales from 0 itself; paused at a count by its annotation.
    Keda { paused: Option<i64> },
}

/// Which Deployments the autoscalers of `objects` target, by kind/name.
fn scaled_targets(objects: &BTreeMap<String, Live>) -> BTreeMap<String, Scaler> {
    let mut out = BTreeMap::new();
    for live in objects.values() {
        let o = &live.object;
        let scaler = match o["kind"].as_str() {
            Some("HorizontalPodAutoscaler") => Scaler::Hpa,
            Some("ScaledObject") => Scaler::Keda {
                paused: o["metadata"]["annotations"]["autoscaling.keda.sh/paused-replicas"]
                    .as_str()
                    .map(|p| p.parse::<i64>().unwrap()),
            },
            _ => continue,
        };
        let target = o["spec"]["scaleTargetRef"]["name"].as_str().unwrap();
        out.insert(format!("Deployment/{target}"), scaler);
    }
    out
}

/// The Kubernetes objects of one commit's output folder, by kind/name.
fn commit_objects(bare: &Path, sha: &str) -> BTreeMap<String, Json> {
    let mut out = BTreeMap::new();
    for file in git(bare, &["ls-tree", "--name-only", sha, &format!("{OUT}/")]).lines() {
        if file.ends_with("kustomization.yaml") {
            continue;
        }
        for doc in docs(&git(bare, &["show", &format!("{sha}:{file}")])) {
            let key = format!(
                "{}/{}",
                doc["kind"].as_str().unwrap(),
                doc["metadata"]["name"].as_str().unwrap()
            );
            out.insert(key, doc);
        }
    }
    out
}

/// Flux's apply of a whole commit (prune: true): every object applied, objects no longer in
/// the commit deleted.
fn apply_commit(
    cluster: &BTreeMap<String, Live>,
    commit: &BTreeMap<String, Json>,
) -> BTreeMap<String, Live> {
    commit
        .iter()
        .map(|(k, doc)| {
            (
                k.clone(),
                apply(cluster.get(k), "kustomize-controller", doc),
            )
        })
        .collect()
}

/// The autoscalers act: an HPA scales a Deployment it targets unless it is at 0 (Kubernetes
/// disables an HPA whose target has 0 replicas); KEDA sets a paused target to the paused count.
fn autoscale(cluster: &BTreeMap<String, Live>, to: i64) -> BTreeMap<String, Live> {
    let targets = scaled_targets(cluster);
    cluster
        .iter()
        .map(|(k, live)| {
            let replicas = ["spec", "replicas"];
            let next = match targets.get(k) {
                Some(Scaler::Keda { paused: Some(p) }) => {
                    update(live, "keda-operator", &replicas, json!(p))
                }
                Some(Scaler::Keda { paused: None }) => {
                    update(live, "keda-operator", &replicas, json!(to))
                }
                Some(Scaler::Hpa) if live.object["spec"]["replicas"] != 0 => {
                    update(live, "kube-controller-manager", &replicas, json!(to))
                }
                _ => live.clone(),
            };
            (k.clone(), next)
        })
        .collect()
}

/// The rule, over every commit of a history: after the autoscalers changed replicas (state
/// after commit `i`), applying any later commit `j` leaves the replicas of every Deployment an
/// autoscaler of commit `j` targets as they were. Also: a canary under an HPA is never left
/// at 0 while its HPA is there (an HPA cannot scale up from 0).
/// Returns how many (commit, later commit, Deployment) triples it checked.
fn check_no_replicas_fight(bare: &Path) -> usize {
    let shas = git_lines(
        bare,
        &["log", "--reverse", "--format=%H", "--author=sluice", "main"],
    );
    let commits: Vec<_> = shas.iter().map(|s| commit_objects(bare, s)).collect();
    let mut cluster = BTreeMap::new();
    let mut states = Vec::new();
    for (i, commit) in commits.iter().enumerate() {
        cluster = apply_commit(&cluster, commit);
        for (name, scaler) in scaled_targets(&cluster) {
            let replicas = &cluster[&name].object["spec"]["replicas"];
            if scaler == Scaler::Hpa {
                assert_ne!(
                    replicas,
                    &json!(0),
                    "commit {i} ({}): {name} is at 0 under an HPA that cannot scale it up",
                    shas[i]
                );
            }
        }
        cluster = autoscale(&cluster, 5 + i as i64);
        states.push(cluster.clone());
    }
    let mut checked = 0;
    for (i, state) in states.iter().enumerate() {
        for (j, commit) in commits.iter().enumerate().skip(i + 1) {
            let after = apply_commit(state, commit);
            for name in scaled_targets(&after).keys() {
                let owned_by_autoscaler = state.get(name).is_some_and(|l| {
                    l.owners
                        .get(&vec!["spec".to_string(), "replicas".to_string()])
                        .is_some_and(|o| o.iter().any(|m| m != "kustomize-controller"))
                });
                if owned_by_autoscaler {
                    assert_eq!(
                        after[name].object["spec"]["replicas"],
                        state[name].object["spec"]["replicas"],
                        "applying commit {j} ({}) after commit {i} changed {name}'s replicas",
                        shas[j]
                    );
                    checked += 1;
                }
            }
        }
    }
    checked
}

/// A config repo on a real `git daemon` with the source, an autoscaler and a canary naming
/// it; no tick may report an error.
fn world(scaler: &str, canary: &str) -> World {
    World::new(
        &[
            ("apps/podinfo/deployment.yaml", DEPLOYMENT),
            ("apps/podinfo/configs.yaml", CONFIGS),
            ("apps/podinfo/autoscaler.yaml", scaler),
            (CANARY_FILE, canary),
        ],
        Transport::Daemon,
        Checks::SpecsAndOutcomes,
    )
}

/// Init, a promoted rollout with a restart in the middle, then a rolled-back one; every
/// commit's documents validate and no commit fights the autoscaler over replicas.
fn whole_rollouts(scaler: &str, reference: &str) -> World {
    let canary = with_ref(reference);
    let mut w = world(scaler, &canary);
    w.until(Phase::Initialized);
    w.human_bumps_podinfo();
    for _ in 0..6 {
        w.tick();
    }
    assert_eq!(
        w.yaml_at_main(".sluice/status/prod/podinfo.yaml")["phase"],
        "Progressing"
    );
    w.restart();
    w.until(Phase::Succeeded);
    // Offline observer: a declared metric is never observed, so the next analysis fails.
    let failing = canary.replace(
        "    stepWeightPromotion: 5\n",
        "    stepWeightPromotion: 5\n    metrics:\n      - name: request-success-rate\n        thresholdRange: {min: 99}\n",
    );
    w.human_writes(CANARY_FILE, &failing, "podinfo: require success rate");
    w.human_writes(
        "apps/podinfo/deployment.yaml",
        &DEPLOYMENT.replace("6.7.0", "6.7.2"),
        "podinfo: 6.7.2",
    );
    w.until(Phase::Failed);

    let mut schemas = Schemas::default();
    let shas = git(&w.bare, &["log", "--format=%H", "--author=sluice", "main"]);
    for sha in shas.lines() {
        for (name, doc) in commit_objects(&w.bare, sha) {
            if name.starts_with("Deployment/")
                || name.starts_with("Service/")
                || name.starts_with("HorizontalPodAutoscaler/")
                || name.starts_with("ScaledObject/")
            {
                let errors = schemas.errors(&doc);
                assert!(errors.is_empty(), "{sha} {name}: {errors:?}");
            }
        }
    }
    let checked = check_no_replicas_fight(&w.bare);
    assert!(checked > 100, "the rule was checked only {checked} times");
    w
}

#[test]
fn hpa_rollouts_through_git_daemon_never_fight_the_autoscaler_over_replicas() {
    let w = whole_rollouts(HPA, HPA_REF);
    let main = commit_objects(&w.bare, "main");
    assert!(main.contains_key("HorizontalPodAutoscaler/podinfo-primary"));
    assert!(
        !main.contains_key("HorizontalPodAutoscaler/podinfo"),
        "rolled back: the canary's HPA is gone"
    );
    assert_eq!(main["Deployment/podinfo"]["spec"]["replicas"], 0);
    let primary = git(
        &w.bare,
        &["show", &format!("main:{OUT}/podinfo-primary.yaml")],
    );
    assert!(
        primary.contains("podinfo:6.7.1"),
        "the promoted image stays after the rollback"
    );
}

#[test]
fn keda_rollouts_through_git_daemon_never_fight_the_autoscaler_over_replicas() {
    let w = whole_rollouts(SCALED_OBJECT, SO_REF);
    let main = commit_objects(&w.bare, "main");
    assert!(main.contains_key("ScaledObject/podinfo-so-primary"));
    assert_eq!(
        main["ScaledObject/podinfo-so"]["metadata"]["annotations"]
            ["autoscaling.keda.sh/paused-replicas"],
        "0",
        "rolled back: the canary's ScaledObject is paused at 0"
    );
}

#[test]
fn adding_an_autoscaler_hands_the_primarys_replicas_over_at_the_next_commit() {
    let mut w = world(HPA, FLAGGER_CANARY);
    w.until(Phase::Initialized);
    let before = commit_objects(&w.bare, "main");
    assert_eq!(before["Deployment/podinfo-primary"]["spec"]["replicas"], 3);
    w.human_writes(
        CANARY_FILE,
        &with_ref(HPA_REF),
        "podinfo: scale with an HPA",
    );
    // Nothing to decide, so nothing is committed yet (sluice commits only decisions).
    assert!(w.tick().outcomes.iter().all(|o| o.committed.is_none()));
    w.human_bumps_podinfo();
    let report = w.tick();
    assert!(
        report.outcomes.iter().any(|o| o.committed.is_some()),
        "{report:?}"
    );
    let after = commit_objects(&w.bare, "main");
    let primary = &after["Deployment/podinfo-primary"];
    assert!(primary["spec"].get("replicas").is_none(), "{primary}");
    assert!(
        primary.to_string().contains("podinfo:6.7.0"),
        "the kept primary is still the promoted revision"
    );
    assert_eq!(
        after["HorizontalPodAutoscaler/podinfo-primary"]["spec"]["scaleTargetRef"]["name"],
        "podinfo-primary"
    );
    assert_eq!(
        after["HorizontalPodAutoscaler/podinfo"]["spec"]["scaleTargetRef"]["name"],
        "podinfo"
    );
    check_no_replicas_fight(&w.bare);
}
