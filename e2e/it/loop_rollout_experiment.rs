//! An Argo Rollouts `experiment` step through the loop: at the step sluice commits one
//! workload per template (`<rollout>-experiment-<template>.yaml`: a Deployment of the stable
//! or the canary pod template with the template's replicas, and a Service when the template
//! asks for one), every document schema-valid and the folder built by `kubectl kustomize`;
//! the experiment's analysis runs on a real Prometheus as the step's gate; the commit that
//! leaves the step removes the files. A failing analysis aborts the rollout, and the rollback
//! commit removes them too.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::rollout::{
    checks, docs_at, kustomize_builds_at, replica_rollout, replica_services, show, sluice_commits,
    OUTPUT, ROLLOUT_FILE, STABLE_FILE, STATUS_FILE,
};
use crate::support::{Schemas, World};

/// 20 %, then an experiment of a baseline (the stable spec) and a preview (the canary spec,
/// 2 pods, with a Service) for 30 s with an analysis, then 50 %.
const EXPERIMENT: &str = "        - setWeight: 20
        - experiment:
            duration: 30s
            templates:
              - name: baseline
                specRef: stable
              - name: preview
                specRef: canary
                replicas: 2
                metadata:
                  labels: {experiment: preview}
                service: {}
            analyses:
              - name: preview-up
                templateName: podinfo-up
        - setWeight: 50";

/// The same experiment before the first `setWeight`: Argo runs it while the canary takes no
/// traffic, a step of its own at weight 0; then 20 % and 50 %.
const EXPERIMENT_FIRST: &str = "        - experiment:
            duration: 30s
            templates:
              - name: baseline
                specRef: stable
              - name: preview
                specRef: canary
                replicas: 2
                metadata:
                  labels: {experiment: preview}
                service: {}
            analyses:
              - name: preview-up
                templateName: podinfo-up
        - setWeight: 20
        - setWeight: 50";

const BASELINE: &str = "clusters/prod/podinfo/podinfo-experiment-baseline.yaml";
const PREVIEW: &str = "clusters/prod/podinfo/podinfo-experiment-preview.yaml";

/// The template the experiment's analysis names: the scrape target's `up` (1), judged by
/// `condition`, twice.
fn template(condition: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: podinfo-up
  namespace: prod
spec:
  metrics:
    - name: podinfo-up
      interval: 10s
      count: 2
      successCondition: {condition}
      provider:
        prometheus:
          query: sum(up{{job=\"canary\"}})
"
    )
}

/// What one sluice commit holds: its status's phase and step, and whether the experiment's
/// files are in the output folder.
struct Seen {
    phase: String,
    step: u64,
    weight: u64,
    files: bool,
}

/// Every sluice commit, oldest first; at each, the experiment's files are there exactly
/// while the rollout stands at its step (1: it holds the 20 % step, or the step of its own at
/// weight 0 before the first `setWeight`), schema-valid, with the template's pod specs.
fn check_every_commit(w: &World) -> Vec<Seen> {
    let mut schemas = Schemas::default();
    let mut seen = Vec::new();
    for (sha, _) in sluice_commits(&w.bare) {
        let status: Json = serde_saphyr::from_str(&show(&w.bare, &sha, STATUS_FILE)).unwrap();
        let phase = status["phase"].as_str().unwrap().to_string();
        let step = status["step"].as_u64().unwrap();
        let listed = crate::support::git(
            &w.bare,
            &["ls-tree", "-r", "--name-only", &sha, "--", OUTPUT],
        );
        let files = [BASELINE, PREVIEW].map(|f| listed.lines().any(|l| l == f));
        let running = step == 1 && ["Progressing", "WaitingApproval"].contains(&phase.as_str());
        assert_eq!(files, [running, running], "{sha} {phase} step {step}");
        let kustomization = show(&w.bare, &sha, &format!("{OUTPUT}/kustomization.yaml"));
        assert_eq!(
            kustomization.contains("podinfo-experiment-preview.yaml"),
            running,
            "{sha}: {kustomization}"
        );
        if running {
            check_experiment(&w.bare, &sha, &mut schemas);
        }
        seen.push(Seen {
            phase,
            step,
            weight: status["canaryWeight"].as_u64().unwrap(),
            files: running,
        });
    }
    seen
}

/// The experiment's files at `sha`: the baseline runs the stable spec (6.7.0), the preview
/// the canary's (6.7.1) with 2 pods, its pod labels and a Service selecting its pods only.
fn check_experiment(bare: &std::path::Path, sha: &str, schemas: &mut Schemas) {
    let baseline = docs_at(bare, sha, BASELINE);
    let preview = docs_at(bare, sha, PREVIEW);
    for doc in baseline.iter().chain(&preview) {
        schemas.assert_valid(doc, &format!("{sha} experiment"));
    }
    assert_eq!(baseline.len(), 1, "{sha}: the baseline has no Service");
    let image = |d: &Json| d["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(
        baseline[0]["metadata"]["name"],
        "podinfo-experiment-baseline"
    );
    assert_eq!(image(&baseline[0]), "ghcr.io/stefanprodan/podinfo:6.7.0");
    assert_eq!(baseline[0]["spec"]["replicas"], 1);
    let (deployment, service) = (&preview[0], &preview[1]);
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(image(deployment), "ghcr.io/stefanprodan/podinfo:6.7.1");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let role =
        serde_json::json!({"app": "podinfo", "sluice.dev/rollout-role": "experiment-preview"});
    assert_eq!(deployment["spec"]["selector"]["matchLabels"], role, "{sha}");
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["labels"]["experiment"],
        "preview"
    );
    assert_eq!(service["kind"], "Service");
    assert_eq!(service["metadata"]["name"], "podinfo-experiment-preview");
    assert_eq!(service["spec"]["selector"], role);
    assert_eq!(service["spec"]["ports"][0]["port"], 9898);
    kustomize_builds_at(bare, sha, OUTPUT);
}

/// The Rollout with `steps` (an experiment at sluice's step 1) on a real Prometheus
/// (`condition` judging `up`), from 6.7.0 to 6.7.1 until the canary reaches `phase`; `check`
/// sees the world and its commits.
fn experimented(steps: &str, condition: &str, phase: Phase, check: impl FnOnce(&World, Vec<Seen>)) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scraped = rt.block_on(crate::support::prometheus::Scraped::start_instant(
        crate::support::prometheus::osm_exposition,
    ));
    let files = [
        (ROLLOUT_FILE, replica_rollout("6.7.0", steps)),
        ("apps/podinfo/services.yaml", replica_services()),
        (".sluice/config.yaml", scraped.prom.repo_config()),
        ("apps/podinfo/analysis.yaml", template(condition)),
    ];
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let mut w = World::served(&pairs).building(OUTPUT);
    let runtime = crate::support::runtime();
    let live = sluice::observer::Live::new(runtime);
    w.until_with(&live, runtime, Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &replica_rollout("6.7.1", steps),
        "podinfo: 6.7.1",
    );
    w.until_with(&live, runtime, phase);
    let seen = check_every_commit(&w);
    crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
    check(&w, seen);
    drop(scraped);
}

#[test]
fn experiment_step_commits_its_workloads_analyses_them_and_removes_them_before_the_next_step() {
    experimented(EXPERIMENT, "result[0] >= 1", Phase::Succeeded, |w, seen| {
        let first = seen
            .iter()
            .position(|s| s.files)
            .expect("the experiment ran");
        let last = seen.iter().rposition(|s| s.files).unwrap();
        assert!(seen[first..=last].iter().all(|s| s.files), "ran once");
        // The experiment's analysis measured at its step (count 2, the first recorded).
        assert_eq!(
            checks(&w.bare, "analysis running at step 1"),
            ["podinfo-up=1 pass"]
        );
        // The commit after the experiment goes to 50 % with the files removed.
        let after = &seen[last + 1];
        assert_eq!((after.step, after.weight, after.files), (2, 50, false));
        assert_eq!(seen.last().unwrap().phase, "Succeeded");
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
        crate::support::audit::clean(&w.bare);
    });
}

#[test]
fn experiment_whose_analysis_fails_rolls_back_and_removes_its_workloads() {
    experimented(EXPERIMENT, "result[0] >= 2", Phase::Failed, |w, seen| {
        assert!(seen.iter().any(|s| s.files), "the experiment ran");
        assert!(seen.iter().all(|s| s.weight < 50), "never went past it");
        let last = seen.last().unwrap();
        assert_eq!((last.phase.as_str(), last.files), ("Failed", false));
        assert_eq!(checks(&w.bare, "roll back"), ["podinfo-up=1 fail"]);
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
    });
}

#[test]
fn experiment_before_the_first_weight_runs_at_weight_zero_and_is_removed_at_the_next_step() {
    experimented(
        EXPERIMENT_FIRST,
        "result[0] >= 1",
        Phase::Succeeded,
        |w, seen| {
            let first = seen
                .iter()
                .position(|s| s.files)
                .expect("the experiment ran");
            let last = seen.iter().rposition(|s| s.files).unwrap();
            // Committed at weight 0, while the canary takes no traffic, once.
            assert!(
                seen[first..=last].iter().all(|s| s.files && s.weight == 0),
                "ran once at weight 0"
            );
            assert_eq!(
                checks(&w.bare, "analysis running at step 1"),
                ["podinfo-up=1 pass"]
            );
            // The commit after the experiment goes to 20 % with the files removed.
            let after = &seen[last + 1];
            assert_eq!((after.step, after.weight, after.files), (2, 20, false));
            assert!(seen.iter().any(|s| (s.step, s.weight) == (3, 50)));
            assert_eq!(seen.last().unwrap().phase, "Succeeded");
            assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
            crate::support::audit::clean(&w.bare);
        },
    );
}
