//! The repo snapshot: a tick's lookups (canaries, MetricTemplates, sources and their configs)
//! all come from one read of each file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sluice::manifest::load::load;
use sluice::manifest::model::MetricQuery;
use sluice::manifest::settings::Settings;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::workload::{self, Index};
use sluice::yaml::snapshot::{read_bounded, Snapshot};

use crate::support::canary::podinfo;
use crate::support::manifests::{CONFIGS, DEPLOYMENT};

/// `podinfo` in `prod` on OSM, judged by a MetricTemplate from `istio-system`.
fn flagger_canary() -> String {
    podinfo()
        .provider("osm")
        .service("    port: 9898")
        .interval("1m")
        .yaml("    stepWeight: 10\n    maxWeight: 50\n    metrics:\n    - name: errors\n      templateRef: {name: error-rate, namespace: istio-system}\n      thresholdRange: {max: 1}")
}

const NATIVE_CANARY: &str = "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata:
  name: frontend
  namespace: prod
spec:
  source: apps/frontend/deployment.yaml
  output: clusters/prod/frontend
  service:
    port: 8080
  route:
    apiVersion: split.smi-spec.io/v1alpha2
    kind: TrafficSplit
  analysis:
    stepWeight: 20
    metrics:
    - name: latency
      templateRef: {name: latency}
      thresholdRange: {max: 500}
";

const TEMPLATES: &str = "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: error-rate
  namespace: istio-system
spec:
  provider: {type: prometheus}
  query: sum(rate(errors{ns=\"{{ namespace }}\", app=\"{{ target }}\"}[{{ interval }}]))
---
apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: latency
  namespace: prod
spec:
  provider: {type: prometheus}
  query: histogram_quantile(0.99, sum(rate(latency_bucket[{{ interval }}])) by (le))
";

/// A config repo: a real git work tree with canaries, templates, sources and configs, an
/// output folder from an earlier tick, sluice's status folder, and files that are not YAML.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::init(dir.path()).unwrap();
    let frontend = DEPLOYMENT
        .replace("podinfo", "frontend")
        .replace("frontend-env", "podinfo-env");
    for (file, text) in [
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        ("apps/podinfo/configs.yaml", CONFIGS),
        ("apps/podinfo/canary.yaml", &flagger_canary()),
        ("apps/frontend/deployment.yaml", frontend.as_str()),
        ("apps/frontend/canary.yml", NATIVE_CANARY),
        ("metrics/templates.yaml", TEMPLATES),
        // What sluice wrote is never a source: a second `podinfo` Deployment here is not a
        // duplicate of the one in apps/.
        ("clusters/prod/podinfo/podinfo-canary.yaml", DEPLOYMENT),
        ("README.md", "# config repo\n"),
        (
            ".sluice/config.yaml",
            "output: clusters/{namespace}/{name}\n",
        ),
        (".sluice/status/prod/podinfo.yaml", "phase: Initialized\n"),
    ] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn every_file(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_repo_file_is_read_once_for_specs_templates_and_sources() {
    let dir = repo();
    let root = dir.path();
    let before = every_file(root);
    let mut reads: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let snapshot = Snapshot::read_with(root, |path| {
        *reads.entry(path.to_path_buf()).or_default() += 1;
        let text = read_bounded(path);
        // Gone once read: a second walk, or a lookup that goes back to the disk, finds nothing
        // and this test fails on what it then cannot find.
        std::fs::remove_file(path).unwrap();
        text
    });

    let loaded = load(&snapshot, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let ids: Vec<String> = loaded.canaries.iter().map(|c| c.id.to_string()).collect();
    assert_eq!(ids, ["prod/frontend", "prod/podinfo"]);

    let (templates, errors) = TemplateIndex::from_snapshot(&snapshot);
    assert!(errors.is_empty(), "{errors:?}");
    let outputs: Vec<&str> = loaded.canaries.iter().map(|c| c.output.as_str()).collect();
    let index = Index::new(&snapshot, &outputs);
    for canary in &loaded.canaries {
        for metric in &canary.analysis.metrics {
            let MetricQuery::Template {
                namespace, name, ..
            } = &metric.query
            else {
                panic!("{}: expected a templateRef", metric.name);
            };
            let template = templates.get(namespace.as_str(), name.as_str()).unwrap();
            assert_eq!(template.file, "metrics/templates.yaml");
        }
        let source = workload::load_source(root, canary, &index).unwrap();
        assert_eq!(
            source.deployment.file,
            format!("apps/{}/deployment.yaml", canary.id.name)
        );
        // Both Deployments reference the ConfigMap `podinfo-env` of configs.yaml.
        assert!(
            source
                .configs
                .iter()
                .any(|c| c.name == "podinfo-env" && c.file == "apps/podinfo/configs.yaml"),
            "{:?}",
            source.configs
        );
        workload::revision(root, canary, &index).unwrap();
    }

    let expected: BTreeMap<PathBuf, usize> = before
        .iter()
        .filter(|p| {
            let rel = p.strip_prefix(root).unwrap();
            let hidden = rel
                .components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
            let yaml = rel.extension().is_some_and(|e| e == "yaml" || e == "yml");
            yaml && !hidden
        })
        .map(|p| (p.clone(), 1))
        .collect();
    assert_eq!(expected.len(), 7, "{expected:?}");
    assert_eq!(reads, expected);
}

#[test]
fn a_source_file_the_walk_leaves_out_is_reported_as_not_read() {
    let dir = repo();
    let root = dir.path();
    let native = NATIVE_CANARY.replace(
        "source: apps/frontend/deployment.yaml",
        "source: .drafts/frontend.yaml",
    );
    std::fs::write(root.join("apps/frontend/canary.yml"), native).unwrap();
    std::fs::create_dir_all(root.join(".drafts")).unwrap();
    std::fs::rename(
        root.join("apps/frontend/deployment.yaml"),
        root.join(".drafts/frontend.yaml"),
    )
    .unwrap();
    let snapshot = Snapshot::read(root);
    let loaded = load(&snapshot, &Settings::default());
    let canary = &loaded.canaries[0];
    assert_eq!(canary.id.to_string(), "prod/frontend");
    let err = workload::load_source(root, canary, &Index::new(&snapshot, &[]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        ".drafts/frontend.yaml: cannot read: sluice reads only regular .yaml and .yml files outside hidden folders"
    );
    std::fs::remove_file(root.join(".drafts/frontend.yaml")).unwrap();
    let err = workload::load_source(root, canary, &Index::new(&snapshot, &[]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "prod/frontend: source not found: expected file .drafts/frontend.yaml"
    );
}
