//! The Knative router: `route.yaml` holds the user's Knative Service with a named revision
//! template and `spec.traffic` between the primary and canary revisions. Pinned by insta
//! snapshots of Flagger's own Knative canary (fluxcd/flagger `test/knative/test-canary.sh`,
//! the same as `docs/gitbook/tutorials/knative-progressive-delivery.md`, whose Knative
//! Service it targets), checked against the strict Knative Service schema at every weight,
//! and run through the loop against a `git daemon`: initialization, every step, promotion and
//! rollback, with `kubectl kustomize` building the output folder.

use std::path::Path;

use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::manifest::model::Canary;
use sluice::route::{render_route, Backends, Route, RouteState, Weights};

use crate::support::canary::{load_one, podinfo_query_model, repo_errors as errors};
use crate::support::canary::{object_ref, podinfo};
use crate::support::knative::{e2e_analysis, e2e_canary, with_service, DOCS_SERVICE};
use crate::support::manifests::{KNATIVE_SERVICE, KNATIVE_SERVICE_FILE};
use crate::support::rollout::{assert_rolled_back, show, sluice_commits, World, STEPS};
use crate::support::schema_valid;
use crate::support::{git, human_clone, human_commit, str_pairs, Schemas};

/// A Knative Service with every part the router copies: labels and annotations, a spec field
/// beside the template, template labels and annotations, and template spec fields.
const FULL_SERVICE: &str = "apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: podinfo
  labels:
    app: podinfo
    networking.knative.dev/visibility: cluster-local
  annotations:
    example.com/owner: team-a
spec:
  template:
    metadata:
      labels:
        app: podinfo
      annotations:
        autoscaling.knative.dev/min-scale: \"1\"
    spec:
      containerConcurrency: 50
      timeoutSeconds: 30
      containers:
        - image: ghcr.io/stefanprodan/podinfo:6.0.0
          ports:
            - containerPort: 9898
";

/// The revision the router named the canary's template.
fn revision(canary: &Canary) -> String {
    match &canary.route {
        Route::Knative(config) => config.revision.clone(),
        other => panic!("expected a Knative route, found {other:?}"),
    }
}

fn render(canary: &Canary, primary: &str, canary_revision: &str, canary_weight: u8) -> String {
    render_route(
        canary,
        &Backends {
            primary,
            canary: canary_revision,
        },
        Weights::from_canary(canary_weight).unwrap(),
        &RouteState::default(),
    )
    .unwrap()
    .expect("a Knative Service")
    .content
}

/// An older revision of podinfo, as the status file would hold it.
const OLD: &str = "podinfo-0123456789";

#[test]
fn knative_e2e_canary_splits_traffic_between_named_revisions() {
    let canary = with_service("test/service.yaml", DOCS_SERVICE);
    let new = revision(&canary);
    assert_eq!(
        new, "podinfo-83579d86c4",
        "revision names must not change between sluice versions"
    );
    let initial = render(&canary, &new, &new, 0);
    insta::assert_snapshot!("knative-e2e-initial", initial.replace(&new, "<revision>"));
    let doc = schema_valid(&initial);
    assert_eq!(doc["spec"]["template"]["metadata"]["name"], new.as_str());
    assert_eq!(
        doc["spec"]["traffic"],
        serde_json::json!([{"revisionName": new, "percent": 100}])
    );
    let step = render(&canary, OLD, &new, 10);
    insta::assert_snapshot!("knative-e2e-weight-10", step.replace(&new, "<revision>"));
    let doc = schema_valid(&step);
    assert_eq!(
        doc["spec"]["traffic"],
        serde_json::json!([
            {"revisionName": new, "percent": 10},
            {"revisionName": OLD, "percent": 90},
        ]),
        "the canary revision first, then the primary (Flagger's order)"
    );
    assert_eq!(
        doc["metadata"]["annotations"]["flagger.app/primary-revision"],
        OLD
    );
    for weight in 0..=100 {
        schema_valid(&render(&canary, OLD, &new, weight));
    }
    // The same revision twice carries everything: a canary weight there is a bug upstream.
    let same = render_route(
        &canary,
        &Backends {
            primary: &new,
            canary: &new,
        },
        Weights::from_canary(10).unwrap(),
        &RouteState::default(),
    );
    assert!(same.is_err(), "{same:?}");
}

#[test]
fn knative_copies_the_users_service_and_template() {
    let canary = with_service("apps/podinfo/service.yaml", FULL_SERVICE);
    let new = revision(&canary);
    let text = render(&canary, OLD, &new, 30);
    insta::assert_snapshot!("knative-all-fields", text.replace(&new, "<revision>"));
    let doc = schema_valid(&text);
    let metadata = &doc["metadata"];
    assert_eq!(metadata["namespace"], "test", "the canary's namespace");
    assert_eq!(metadata["labels"]["app"], "podinfo");
    assert_eq!(
        metadata["labels"]["networking.knative.dev/visibility"],
        "cluster-local"
    );
    assert_eq!(metadata["labels"]["app.kubernetes.io/managed-by"], "sluice");
    assert_eq!(metadata["annotations"]["example.com/owner"], "team-a");
    let template = &doc["spec"]["template"];
    assert_eq!(template["metadata"]["name"], new.as_str());
    assert_eq!(
        template["metadata"]["annotations"]["autoscaling.knative.dev/min-scale"],
        "1"
    );
    assert_eq!(template["spec"]["containerConcurrency"], 50);
    assert_eq!(template["spec"]["timeoutSeconds"], 30);
}

/// Knative names revisions itself; sluice names them from the template, so the same template
/// is the same revision whatever its key order, and another template another revision.
#[test]
fn knative_revision_names_follow_the_template() {
    let canary = |service: &str| with_service("test/service.yaml", service);
    let base = revision(&canary(DOCS_SERVICE));
    assert_eq!(base, revision(&canary(DOCS_SERVICE)));
    let reordered = DOCS_SERVICE.replace(
        "          ports:\n            - containerPort: 9898\n              protocol: TCP\n",
        "          ports:\n            - protocol: TCP\n              containerPort: 9898\n",
    );
    assert_ne!(reordered, DOCS_SERVICE);
    assert_eq!(base, revision(&canary(&reordered)));
    let bumped = DOCS_SERVICE.replace("6.0.0", "6.0.1");
    assert_ne!(base, revision(&canary(&bumped)));
    // A metadata change outside the template is not a new revision.
    let relabelled = DOCS_SERVICE.replace(
        "  namespace: test\n",
        "  namespace: test\n  labels: {team: a}\n",
    );
    assert_eq!(base, revision(&canary(&relabelled)));
    // A revision the user names is kept.
    let named = DOCS_SERVICE.replace(
        "  template:\n    spec:\n",
        "  template:\n    metadata:\n      name: podinfo-v2\n    spec:\n",
    );
    assert_eq!(revision(&canary(&named)), "podinfo-v2");
}

#[test]
fn knative_metric_queries_name_the_canary_revision() {
    let canary = with_service("test/service.yaml", DOCS_SERVICE);
    let model = podinfo_query_model(&canary);
    assert_eq!(
        model.route,
        revision(&canary),
        "Flagger sets {{{{ route }}}} to the Service's latestCreatedRevisionName"
    );
}

/// Repo files: path and text.
type Files = Vec<(&'static str, String)>;

/// `(files, expected errors)`: each refused input is reported at its file, line and field.
#[test]
fn knative_refuses_what_it_cannot_render() {
    let with = |from: &str, to: &str| e2e_canary(&e2e_analysis()).replace(from, to);
    let cases: Vec<(Files, Vec<&str>)> = vec![
        (
            vec![("test/canary.yaml", e2e_canary("    interval: 15s\n    threshold: 5\n    iterations: 10"))],
            vec!["test/canary.yaml:16: spec.analysis.iterations: Flagger supports only canary releases with provider knative (the traffic block shifts weights between revisions); replace iterations with stepWeight and maxWeight"],
        ),
        (
            vec![("test/canary.yaml", e2e_canary("    interval: 15s\n    threshold: 5\n    iterations: 10\n    match:\n      - headers:\n          x-canary:\n            exact: insider"))],
            vec!["test/canary.yaml:17: spec.analysis.match: Flagger supports only canary releases with provider knative: a Knative Service's traffic block splits by percent and cannot send matching requests to the canary revision; remove analysis.match and set stepWeight and maxWeight"],
        ),
        (
            vec![("test/canary.yaml", with("    stepWeight: 10\n", "    stepWeight: 10\n    sessionAffinity:\n      cookieName: canary\n"))],
            vec!["test/canary.yaml:18: spec.analysis.sessionAffinity: Flagger's Knative router ignores it and a Knative Service's traffic block cannot express it; remove it"],
        ),
        (
            vec![("test/canary.yaml", with("  progressDeadlineSeconds: 60\n", "  progressDeadlineSeconds: 60\n  autoscalerRef:\n    apiVersion: autoscaling/v2\n    kind: HorizontalPodAutoscaler\n    name: podinfo\n"))],
            vec!["test/canary.yaml:13: spec.autoscalerRef: can't use an autoscaler with a Knative Service (Flagger refuses it: Knative scales each revision itself); remove it"],
        ),
        (
            vec![("test/canary.yaml", with("    apiVersion: serving.knative.dev/v1\n    kind: Service\n", "    apiVersion: apps/v1\n    kind: Deployment\n"))],
            vec!["test/canary.yaml:10: spec.targetRef.kind: provider knative rolls out a Knative Service: expected apiVersion serving.knative.dev/v1 and kind Service, found \"apps/v1\" and \"Deployment\" (Flagger: can't use it as target if provider is set to knative)"],
        ),
        (
            vec![("test/canary.yaml", with("  provider: knative\n", "  provider: istio\n  service:\n    port: 80\n"))],
            vec!["test/canary.yaml:7: spec.provider: a Knative Service target is rolled out with provider knative (Flagger: can't use another provider with a Knative Service as target)"],
        ),
        (
            vec![("test/canary.yaml", with("    apiVersion: serving.knative.dev/v1\n", "    apiVersion: v1\n"))],
            vec!["test/canary.yaml:10: spec.targetRef.kind: provider knative rolls out a Knative Service: expected apiVersion serving.knative.dev/v1 and kind Service, found \"v1\" and \"Service\" (Flagger: can't use it as target if provider is set to knative)"],
        ),
        (
            vec![("test/canary.yaml", e2e_canary(&e2e_analysis()))],
            vec!["test/canary.yaml:11: spec.targetRef.name: Knative Service (serving.knative.dev/v1) test/podinfo not found in the repo's YAML files"],
        ),
        (
            vec![
                ("test/a.yaml", DOCS_SERVICE.to_string()),
                ("test/b.yaml", DOCS_SERVICE.to_string()),
                ("test/canary.yaml", e2e_canary(&e2e_analysis())),
            ],
            vec!["test/b.yaml:1: metadata.name: Knative Service test/podinfo is defined twice (also at test/a.yaml:1)"],
        ),
        (
            vec![
                ("test/service.yaml", format!("{DOCS_SERVICE}  traffic:\n    - latestRevision: true\n      percent: 100\n")),
                ("test/canary.yaml", e2e_canary(&e2e_analysis())),
            ],
            vec!["test/service.yaml:23: spec.traffic: sluice writes the traffic split between the primary and canary revisions (Flagger overwrites it too); remove spec.traffic"],
        ),
        (
            vec![
                ("test/service.yaml", DOCS_SERVICE.replace("  template:\n    spec:\n", "  template:\n    metadata:\n      name: v2\n    spec:\n")),
                ("test/canary.yaml", e2e_canary(&e2e_analysis())),
            ],
            vec!["test/service.yaml:9: spec.template.metadata.name: expected a revision name starting with \"podinfo-\" (Knative's rule), a DNS label of at most 63 lowercase letters, digits and '-', found \"v2\""],
        ),
        (
            vec![
                ("test/service.yaml", DOCS_SERVICE.replace("  namespace: test\n", "  namespace: test\n  finalizers: [x]\n")),
                ("test/canary.yaml", e2e_canary(&e2e_analysis())),
            ],
            vec!["test/service.yaml:6: metadata.finalizers: sluice copies a Knative Service's name, namespace, labels and annotations; remove \"finalizers\", or move it to the template"],
        ),
    ];
    for (mut files, expected) in cases {
        let not_found = expected[0].contains("not found");
        if !not_found
            && !files
                .iter()
                .any(|(_, t)| t.contains("kind: Service\nmetadata"))
        {
            files.push(("test/service.yaml", DOCS_SERVICE.to_string()));
        }
        assert_eq!(errors(&str_pairs(&files)), expected, "{files:?}");
    }
}

// The loop: a Knative Service in the repo, the canary, and a human bumping its image.

const STATUS_FILE: &str = ".sluice/status/prod/podinfo.yaml";
const OUTPUT: &str = "clusters/prod/podinfo";

fn loop_canary(metrics: &str) -> String {
    podinfo()
        .provider("knative")
        .target(&object_ref(
            "targetRef",
            "serving.knative.dev/v1",
            "Service",
            "podinfo",
        ))
        .no_service()
        .yaml(&format!("{STEPS}\n{metrics}"))
}

/// A human bumps the Knative Service's image and pushes.
fn bump(w: &World, version: &str) {
    let dir = tempfile::tempdir().unwrap();
    let clone = human_clone(&w.bare.display().to_string(), &dir.path().join("h"));
    human_commit(
        &clone,
        KNATIVE_SERVICE_FILE,
        &KNATIVE_SERVICE.replace("6.7.0", version),
        &format!("podinfo: {version}"),
    );
}

/// Every sluice commit: the output folder holds `route.yaml` (one schema-valid Knative
/// Service whose traffic names the status file's revisions with its weights) and the
/// kustomization, nothing else; the user's file is never edited. Returns the traffic of each
/// commit as `revision=percent` lists.
fn check_every_commit(bare: &Path) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut found = Vec::new();
    let commits = sluice_commits(bare);
    assert!(!commits.is_empty());
    for (sha, trailer) in commits {
        let files = git(
            bare,
            &["ls-tree", "--name-only", &sha, &format!("{OUTPUT}/")],
        );
        assert_eq!(
            files.lines().collect::<Vec<_>>(),
            [
                format!("{OUTPUT}/kustomization.yaml"),
                format!("{OUTPUT}/route.yaml")
            ],
            "{sha}: no primary/canary workload or Service"
        );
        let touched = git(
            bare,
            &["diff-tree", "--no-commit-id", "-r", "--name-only", &sha],
        );
        assert!(
            !touched.lines().any(|f| f == KNATIVE_SERVICE_FILE),
            "{sha} edited the user's Service"
        );
        let status: Json = serde_saphyr::from_str(&show(bare, &sha, STATUS_FILE)).unwrap();
        let docs: Vec<Json> =
            serde_saphyr::from_multiple(&show(bare, &sha, &format!("{OUTPUT}/route.yaml")))
                .unwrap();
        assert_eq!(docs.len(), 1, "{sha}");
        let service = &docs[0];
        let errors = schemas.errors(service);
        assert!(errors.is_empty(), "{sha}: {errors:?}");
        assert_eq!(service["kind"], "Service");
        assert_eq!(service["metadata"]["name"], "podinfo");
        let primary = status["promotedRevision"].as_str().unwrap();
        let canary = status["canaryRevision"].as_str().unwrap_or(primary);
        assert_eq!(
            service["metadata"]["annotations"]["flagger.app/primary-revision"],
            primary
        );
        let traffic = service["spec"]["traffic"].as_array().unwrap();
        let expected = if primary == canary {
            serde_json::json!([{"revisionName": primary, "percent": 100}])
        } else {
            serde_json::json!([
                {"revisionName": canary, "percent": status["canaryWeight"]},
                {"revisionName": primary, "percent": status["primaryWeight"]},
            ])
        };
        assert_eq!(service["spec"]["traffic"], expected, "{sha}");
        assert_eq!(
            trailer,
            format!(
                "primary={} canary={}",
                status["primaryWeight"], status["canaryWeight"]
            ),
            "{sha}"
        );
        found.push(
            traffic
                .iter()
                .map(|t| {
                    let name = t["revisionName"].as_str().unwrap();
                    let who = if name == primary { "primary" } else { "canary" };
                    format!("{who}={}", t["percent"])
                })
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    let shas: Vec<String> = sluice_commits(bare).into_iter().map(|(s, _)| s).collect();
    crate::support::rollout::every_commit_drawn_by_sluice(bare, &shas);
    found
}

/// The template revision in the output at `rev`.
fn template_revision(bare: &Path, rev: &str) -> String {
    let doc: Json =
        serde_saphyr::from_str(&show(bare, rev, &format!("{OUTPUT}/route.yaml"))).unwrap();
    doc["spec"]["template"]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn knative_canary_steps_and_promotes_through_git_daemon() {
    let mut w = World::with_files(&loop_canary(""), &[(KNATIVE_SERVICE_FILE, KNATIVE_SERVICE)]);
    w.until(Phase::Initialized);
    let first = template_revision(&w.bare, "main");
    bump(&w, "6.7.1");
    w.until(Phase::Succeeded);
    let second = template_revision(&w.bare, "main");
    assert_ne!(first, second);
    let mut steps = check_every_commit(&w.bare);
    steps.dedup();
    assert_eq!(
        steps,
        [
            "primary=100",
            "canary=0 primary=100",
            "canary=20 primary=80",
            "canary=40 primary=60",
            "canary=60 primary=40",
            "primary=100",
        ]
    );
    let status: Json = serde_saphyr::from_str(&show(&w.bare, "main", STATUS_FILE)).unwrap();
    assert_eq!(status["promotedRevision"], second.as_str());
    let last: Json =
        serde_saphyr::from_str(&show(&w.bare, "main", &format!("{OUTPUT}/route.yaml"))).unwrap();
    assert_eq!(
        last["spec"]["traffic"],
        serde_json::json!([{"revisionName": second, "percent": 100}])
    );
    assert!(last["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .ends_with("6.7.1"));
    kustomize_builds_the_output(&w.bare);
}

/// Knative revision names start with the service's name: cut to 7 characters, as content
/// hashes are, every rollout's subject and `Sluice-Revision` trailer would say "podinfo".
#[test]
fn knative_commits_name_the_whole_revision_not_its_first_seven_characters() {
    let mut w = World::with_files(&loop_canary(""), &[(KNATIVE_SERVICE_FILE, KNATIVE_SERVICE)]);
    w.until(Phase::Initialized);
    bump(&w, "6.7.1");
    w.until(Phase::Progressing);
    let revision = template_revision(&w.bare, "main");
    let subject = git(&w.bare, &["log", "-1", "--format=%s", "main"]);
    let trailer = git(
        &w.bare,
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Sluice-Revision,valueonly)",
            "main",
        ],
    );
    assert!(
        subject.contains(&format!("new revision {revision} detected")),
        "{subject}"
    );
    assert_eq!(trailer.trim(), revision);
}

#[test]
fn knative_rollback_routes_everything_back_to_the_primary_revision() {
    // The offline observer never observes a metric, so every check fails.
    let metrics =
        "    metrics:\n      - name: request-success-rate\n        thresholdRange: {min: 99}";
    let mut w = World::with_files(
        &loop_canary(metrics),
        &[(KNATIVE_SERVICE_FILE, KNATIVE_SERVICE)],
    );
    w.until(Phase::Initialized);
    let first = template_revision(&w.bare, "main");
    bump(&w, "6.7.1");
    w.until(Phase::Failed);
    let steps = check_every_commit(&w.bare);
    assert_rolled_back(&steps, "canary=20 primary=80", "canary=0 primary=100");
    let last: Json =
        serde_saphyr::from_str(&show(&w.bare, "main", &format!("{OUTPUT}/route.yaml"))).unwrap();
    assert_eq!(
        last["metadata"]["annotations"]["flagger.app/primary-revision"],
        first.as_str()
    );
    assert_eq!(last["spec"]["traffic"][1]["revisionName"], first.as_str());
    kustomize_builds_the_output(&w.bare);
}

/// `kubectl kustomize` builds the output folder at main with the Knative Service in it (when
/// kubectl is installed, as `install.rs` does).
fn kustomize_builds_the_output(bare: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let files = git(
        bare,
        &["ls-tree", "--name-only", "main", &format!("{OUTPUT}/")],
    );
    for file in files.lines() {
        let name = Path::new(file).file_name().unwrap();
        std::fs::write(out.join(name), show(bare, "main", file)).unwrap();
    }
    let Ok(built) = std::process::Command::new("kubectl")
        .args(["kustomize"])
        .arg(&out)
        .output()
    else {
        eprintln!("kubectl not installed: kustomize build not checked");
        return;
    };
    let stdout = String::from_utf8_lossy(&built.stdout);
    assert!(
        built.status.success(),
        "{}{stdout}",
        String::from_utf8_lossy(&built.stderr)
    );
    let docs: Vec<Json> = serde_saphyr::from_multiple(&stdout).unwrap();
    assert_eq!(docs.len(), 1, "{stdout}");
    assert_eq!(docs[0]["apiVersion"], "serving.knative.dev/v1");
    assert_eq!(docs[0]["metadata"]["name"], "podinfo");
}
