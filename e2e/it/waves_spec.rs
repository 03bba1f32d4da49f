//! Waves in a canary spec: native `spec.waves` and a Flagger canary's `sluice.dev/waves`
//! annotation naming a `Waves` object load as one instance per wave; bad waves are refused
//! with file:line: field: message.

use sluice::core::waves::{Cluster, OnFailure};
use sluice::manifest::load::{load, load_text};
use sluice::manifest::model::SyncTarget;
use sluice::manifest::settings::Settings;

use crate::support::canary::{native_podinfo, podinfo, spec_errors as errors};
use crate::support::{run_sluice, run_sluice_env};

const FILE: &str = "apps/podinfo/canary.yaml";

/// A native canary whose `spec` ends with `extra` (indented by two spaces already).
fn native(extra: &str) -> String {
    native_podinfo(
        "",
        &format!("    interval: 30s\n    stepWeight: 20\n    maxWeight: 40\n{extra}"),
    )
}

const THREE: &str = "  waves:
    - name: staging
      output: clusters/staging/podinfo
      sync: {flux: {kustomization: apps}}
      cluster: {kubeContext: staging}
      metricsServer: http://prometheus.staging:9090
      analysis:
        interval: 10s
        stepWeight: 50
        maxWeight: 50
    - name: eu
      output: clusters/prod-eu/podinfo
      settle: 1m
      approval: true
      cluster: {server: https://eu.example:6443, secretRef: {name: eu-cluster}}
    - name: us
      output: clusters/prod-us/podinfo
      sync: {argocd: {application: podinfo-us}}
";

fn assert_error(text: &str, expected: &str) {
    let errs = errors(text);
    assert!(
        errs.iter()
            .any(|e| e == expected || e.starts_with(expected)),
        "expected an error starting {expected:?}, got {errs:#?}"
    );
}

#[test]
fn native_waves_load_as_one_instance_per_wave_with_their_own_folder_and_gates() {
    let loaded = load_text(FILE, &native(THREE), &Settings::default());
    assert_eq!(loaded.errors, vec![]);
    let ids: Vec<String> = loaded.canaries.iter().map(|c| c.id.to_string()).collect();
    assert_eq!(
        ids,
        ["prod/podinfo.staging", "prod/podinfo.eu", "prod/podinfo.us"]
    );
    let [staging, eu, us] = &loaded.canaries[..] else {
        panic!("three instances")
    };
    for (i, c) in loaded.canaries.iter().enumerate() {
        let wave = c.wave.as_ref().unwrap();
        assert_eq!(c.base_name().as_str(), "podinfo");
        assert_eq!(wave.index, i);
        assert_eq!(wave.waves.len(), 3);
        assert_eq!(c.file, FILE);
    }
    assert_eq!(staging.output.as_str(), "clusters/staging/podinfo");
    assert_eq!(eu.output.as_str(), "clusters/prod-eu/podinfo");
    assert_eq!(us.output.as_str(), "clusters/prod-us/podinfo");
    assert!(
        matches!(&staging.sync, Some(SyncTarget::Flux { kustomization, .. }) if kustomization.as_str() == "apps")
    );
    assert_eq!(eu.sync, None);
    assert_eq!(eu.settle, std::time::Duration::from_secs(60));
    assert!(matches!(&us.sync, Some(SyncTarget::ArgoCd { .. })));
    assert_eq!(
        staging.metrics_server.as_deref(),
        Some("http://prometheus.staging:9090")
    );
    assert_eq!(us.metrics_server, None);
    // The staging wave's own analysis; the others keep the canary's.
    assert_eq!(
        staging.analysis.interval,
        std::time::Duration::from_secs(10)
    );
    assert_eq!(us.analysis.interval, std::time::Duration::from_secs(30));
    // Approval gates the wave's start.
    assert!(eu.analysis.approvals.before_rollout);
    assert!(!us.analysis.approvals.before_rollout);
    assert_eq!(
        staging.wave.as_ref().unwrap().cluster,
        Some(Cluster::KubeContext("staging".into()))
    );
    assert!(
        matches!(&eu.wave.as_ref().unwrap().cluster, Some(Cluster::Server { server, namespace, secret }) if server == "https://eu.example:6443" && namespace.as_str() == "prod" && secret.as_str() == "eu-cluster")
    );
}

#[test]
fn a_canary_without_waves_loads_as_itself() {
    let loaded = load_text(
        FILE,
        &native("  output: clusters/prod/podinfo\n"),
        &Settings::default(),
    );
    assert_eq!(loaded.errors, vec![]);
    assert_eq!(loaded.canaries.len(), 1);
    assert_eq!(loaded.canaries[0].id.to_string(), "prod/podinfo");
    assert!(loaded.canaries[0].wave.is_none());
}

#[test]
fn duplicate_wave_names_are_refused_at_the_second() {
    let text = native(&THREE.replace("name: us", "name: eu"));
    assert_error(
        &text,
        "apps/podinfo/canary.yaml:32: spec.waves[2].name: duplicate wave name eu: already used by the wave at line 27",
    );
    assert!(load_text(FILE, &text, &Settings::default())
        .canaries
        .is_empty());
}

#[test]
fn overlapping_output_folders_are_refused() {
    let text = native(&THREE.replace("clusters/prod-us/podinfo", "clusters/staging/podinfo/us"));
    assert_error(
        &text,
        "apps/podinfo/canary.yaml:32: spec.waves[2].output: output folder clusters/staging/podinfo/us overlaps the output folder clusters/staging/podinfo of wave staging (line 18)",
    );
    let same = native(&THREE.replace("clusters/prod-us/podinfo", "clusters/prod-eu/podinfo"));
    assert_error(&same, "apps/podinfo/canary.yaml:32: spec.waves[2].output: output folder clusters/prod-eu/podinfo overlaps");
}

#[test]
fn a_wave_without_sync_or_settle_is_refused() {
    let text = native(&THREE.replace("      settle: 1m\n", ""));
    assert_error(
        &text,
        "apps/podinfo/canary.yaml:27: spec.waves[1]: expected sync (the Flux Kustomization or Argo CD Application that applies this wave's folder) or settle",
    );
}

#[test]
fn bad_wave_fields_name_their_line_and_field() {
    let cases = [
        (THREE.replace("name: eu", "name: e.u"), "apps/podinfo/canary.yaml:27: spec.waves[1].name: expected a wave name without dots"),
        (THREE.replace("cluster: {kubeContext: staging}", "cluster: {kubeContext: staging, secretRef: {name: s}}"), "apps/podinfo/canary.yaml:21: spec.waves[0].cluster: expected {kubeContext: NAME}"),
        (THREE.replace("cluster: {kubeContext: staging}", "cluster: {kubeContext: staging, tokenFile: /t}"), "apps/podinfo/canary.yaml:21: spec.waves[0].cluster.tokenFile: sluice reads no file the repo names"),
        (THREE.replace("http://prometheus.staging:9090", "prometheus:9090"), "apps/podinfo/canary.yaml:22: spec.waves[0].metricsServer: expected an http:// or https:// URL"),
        (THREE.replace("approval: true", "approval: maybe"), "apps/podinfo/canary.yaml:30: spec.waves[1].approval:"),
        (THREE.replace("      settle: 1m\n", "      settle: 1m\n      colour: blue\n"), "apps/podinfo/canary.yaml:30: spec.waves[1].colour: unknown field"),
        (THREE.replace("stepWeight: 50\n        maxWeight: 50", "iterations: 3"), "apps/podinfo/canary.yaml:23: spec.waves[0].analysis: expected a canary analysis (the canary's strategy), found a bluegreen one"),
        (format!("  onFailure: later\n{THREE}"), "apps/podinfo/canary.yaml:17: spec.onFailure: expected hold or rollback, found \"later\""),
        (format!("  onFailure: [rollback]\n{THREE}"), "apps/podinfo/canary.yaml:17: spec.onFailure:"),
        ("  waves: []\n".to_string(), "apps/podinfo/canary.yaml:17: spec.waves: expected at least one wave, found none"),
        ("  output: clusters/prod/podinfo\n  onFailure: hold\n".to_string(), "apps/podinfo/canary.yaml:18: spec.onFailure: set without spec.waves"),
    ];
    for (extra, expected) in cases {
        assert_error(&native(&extra), expected);
    }
}

/// The osm canary `prod/podinfo` whose `sluice.dev/waves` annotation is `annotation`.
fn flagger_canary(annotation: &str) -> String {
    podinfo()
        .provider("osm")
        .metadata(&format!(
            "  annotations:\n    sluice.dev/waves: {annotation}\n"
        ))
        .service("    port: 9898")
        .interval("1m")
        .threshold(None)
        .yaml("    stepWeight: 10\n    maxWeight: 20")
}

const WAVES_OBJECT: &str = "apiVersion: sluice.dev/v1alpha1
kind: Waves
metadata:
  name: fleet
  namespace: prod
spec:
  onFailure: hold
  waves:
    - name: staging
      output: clusters/staging/podinfo
      settle: 30s
    - name: prod
      output: clusters/prod/podinfo
      sync: {flux: {kustomization: apps}}
      approval: true
";

fn repo(files: &[(&str, &str)]) -> sluice::manifest::load::Loaded {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let snapshot = sluice::yaml::snapshot::Snapshot::read(dir.path());
    load(&snapshot, &Settings::default())
}

#[test]
fn a_flagger_canary_opts_in_with_an_annotation_naming_a_waves_object() {
    let loaded = repo(&[
        ("apps/podinfo/canary.yaml", &flagger_canary("fleet")),
        ("apps/podinfo/waves.yaml", WAVES_OBJECT),
    ]);
    assert_eq!(loaded.errors, vec![]);
    let ids: Vec<String> = loaded.canaries.iter().map(|c| c.id.to_string()).collect();
    assert_eq!(ids, ["prod/podinfo.staging", "prod/podinfo.prod"]);
    assert_eq!(loaded.canaries[1].output.as_str(), "clusters/prod/podinfo");
    assert!(loaded.canaries[1].analysis.approvals.before_rollout);
}

#[test]
fn on_failure_rollback_loads_on_every_wave_of_the_release() {
    let object = WAVES_OBJECT.replace("onFailure: hold", "onFailure: rollback");
    let loaded = repo(&[
        ("apps/podinfo/canary.yaml", &flagger_canary("fleet")),
        ("apps/podinfo/waves.yaml", &object),
    ]);
    assert_eq!(loaded.errors, vec![]);
    let policies: Vec<_> = loaded
        .canaries
        .iter()
        .map(|c| c.wave.as_ref().unwrap().on_failure)
        .collect();
    assert_eq!(policies, [OnFailure::Rollback, OnFailure::Rollback]);
}

#[test]
fn a_missing_or_bad_waves_object_is_refused_where_it_is() {
    let missing = repo(&[("apps/podinfo/canary.yaml", &flagger_canary("nowhere"))]);
    assert!(missing.canaries.is_empty());
    assert_eq!(
        missing.errors[0].to_string(),
        "apps/podinfo/canary.yaml:7: metadata.annotations.sluice.dev/waves: no sluice.dev/v1alpha1 Waves object named nowhere in namespace prod in the repo"
    );
    let bad = WAVES_OBJECT.replace("      settle: 30s\n", "");
    let loaded = repo(&[
        ("apps/podinfo/canary.yaml", &flagger_canary("fleet")),
        ("apps/podinfo/waves.yaml", &bad),
    ]);
    assert!(loaded.canaries.is_empty());
    assert!(
        loaded.errors[0]
            .to_string()
            .starts_with("apps/podinfo/waves.yaml:9: spec.waves[0]: expected sync"),
        "{:?}",
        loaded.errors
    );
}

#[test]
fn a_wave_folder_another_canary_writes_is_refused() {
    let other =
        native("  output: clusters/staging/podinfo\n").replace("name: podinfo", "name: other");
    let loaded = repo(&[("a.yaml", &other), ("b.yaml", &native(THREE))]);
    assert!(
        loaded.errors.iter().any(|e| e.to_string().contains(
            "output folder clusters/staging/podinfo is already written by canary prod/other"
        )),
        "{:?}",
        loaded.errors
    );
}

#[test]
fn an_unknown_kube_context_is_refused_at_its_wave_and_drops_the_whole_release() {
    let text = native(THREE);
    let mut loaded = load_text(FILE, &text, &Settings::default());
    assert_eq!(loaded.canaries.len(), 3);
    sluice::waves::contexts::reject_unknown_contexts(&mut loaded, || {
        Ok(vec!["prod-eu".to_string(), "prod-us".to_string()])
    });
    assert!(loaded.canaries.is_empty(), "no wave of the release runs");
    assert_eq!(
        loaded.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["apps/podinfo/canary.yaml:18: spec.waves[0].cluster.kubeContext: no context \"staging\" in the kubeconfig sluice is given (it has: prod-eu, prod-us)"]
    );
    let mut unreadable = load_text(FILE, &text, &Settings::default());
    sluice::waves::contexts::reject_unknown_contexts(&mut unreadable, || {
        Err("no such file".to_string())
    });
    assert!(unreadable.errors[0]
        .to_string()
        .contains("cannot be read, so context \"staging\" is unknown: no such file"));
    let mut known = load_text(FILE, &text, &Settings::default());
    sluice::waves::contexts::reject_unknown_contexts(&mut known, || {
        Ok(vec!["staging".to_string()])
    });
    assert_eq!((known.canaries.len(), known.errors.len()), (3, 0));
}

#[test]
fn sluice_validate_refuses_a_context_missing_from_the_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let canary = dir.path().join("canary.yaml");
    std::fs::write(&canary, native(THREE)).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: eu, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: prod-eu, context: {cluster: eu, user: u}}]\ncurrent-context: prod-eu\n",
    )
    .unwrap();
    let (code, out, err) = run_sluice_env(
        &["validate", &canary.display().to_string()],
        &[("KUBECONFIG", &kubeconfig.display().to_string())],
    );
    let text = format!("{out}{err}");
    assert_ne!(code, 0, "{text}");
    assert!(
        text.contains(":18: spec.waves[0].cluster.kubeContext: no context \"staging\" in the kubeconfig sluice is given (it has: prod-eu)"),
        "{text}"
    );
}

#[test]
fn sluice_plan_lists_the_waves_in_order_and_the_release_minimum_duration() {
    let dir = tempfile::tempdir().unwrap();
    let canary = dir.path().join("canary.yaml");
    std::fs::write(
        &canary,
        native(&THREE.replace("      cluster: {kubeContext: staging}\n", "")),
    )
    .unwrap();
    let (code, text, err) = run_sluice(&["plan", &canary.display().to_string()]);
    assert_eq!(code, 0, "{text}{err}");
    let release = text
        .split("prod/podinfo (release in 3 waves)\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no release section: {text}"));
    let lines: Vec<&str> = release.lines().collect();
    assert!(lines[0].starts_with("  wave 1: staging "), "{release}");
    assert!(
        lines[0].contains("canary weights 50"),
        "staging's own analysis: {release}"
    );
    assert!(
        lines[1].starts_with("  wave 2: eu ") && lines[1].ends_with(", after approval"),
        "{release}"
    );
    assert!(
        lines[2].starts_with("  wave 3: us ") && lines[2].contains("canary weights 20 -> 40"),
        "{release}"
    );
    let seconds = |line: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_suffix("s,").and_then(|n| n.parse().ok()))
            .unwrap()
    };
    let total: u64 = lines[..3].iter().map(|l| seconds(l)).sum();
    assert!(total > 0);
    assert_eq!(
        lines[3],
        format!("  minimum duration:   {total}s"),
        "{release}"
    );
    // Each wave is planned on its own too, under its instance's name.
    assert!(text.contains("prod/podinfo.eu (canary)"), "{text}");
}

#[test]
fn the_example_fleet_and_the_demo_fleet_load_as_three_waves() {
    let (code, out, err) = crate::support::run_sluice(&["validate", "examples/fleet"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("3 canaries valid"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in sluice::cli::demo::fleet_files() {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let loaded = repo_dir(dir.path());
    assert_eq!(loaded.errors, vec![]);
    let ids: Vec<String> = loaded.canaries.iter().map(|c| c.id.to_string()).collect();
    assert_eq!(
        ids,
        [
            "demo/podinfo.staging",
            "demo/podinfo.prod-eu",
            "demo/podinfo.prod-us"
        ]
    );
}

fn repo_dir(dir: &std::path::Path) -> sluice::manifest::load::Loaded {
    let snapshot = sluice::yaml::snapshot::Snapshot::read(dir);
    let settings =
        sluice::manifest::load::load_settings(Some(&dir.join(".sluice/config.yaml"))).unwrap();
    load(&snapshot, &settings)
}
