//! `spec.routeSource` (Flagger #1857: Flagger overwrites the whole HTTPRoute, so its users
//! lose their own rules, filters and matches): the canary names an HTTPRoute the user owns,
//! and sluice's copy in the output keeps every rule, match, filter, hostname and parentRef,
//! changing only the backends of the rule that sends to the apex Service.
//!
//! Through whole rollouts (the loop harness, and the real `sluice run` against a `git
//! daemon`), through a human edit of the source mid-rollout, every route schema-valid; the
//! errors with the source's file and line; `sluice validate` and `sluice plan`. The same
//! through `sluice run` for a GRPCRoute, TCPRoute and TLSRoute source, each against its own
//! strict schema.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};
use sluice::core::status::Phase;

use crate::support::canary::{load_one, podinfo, repo_errors};
use crate::support::manifests::{CONFIGS, DEPLOYMENT};
use crate::support::rollout::{
    kustomize_builds, show, sluice_commits, weights, Commit, Provider, OUTPUT, ROUTE_FILE,
    STATUS_FILE, STEPPED,
};
use crate::support::{human_clone, human_commit, run_sluice, seeded_remote, GitDaemon, Schemas};

use crate::support::route_sources::{
    grpc_source, loaded_flagger, other_kinds, tcp_source, tls_source, CANARY_FILE, SOURCE_FILE,
};

/// The user's route: an `/admin` rule to another Service with its own header filter, the
/// podinfo rule with a response header filter, and a `/legacy` redirect with no backend.
const SOURCE: &str = concat!(
    "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
",
    crate::source_metadata!(),
    "spec:
  parentRefs:
    - name: public-gateway
      namespace: gateway-system
      sectionName: https
  hostnames:
    - podinfo.example.com
    - www.podinfo.example.com
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /admin
          headers:
            - name: x-admin
              value: \"yes\"
      filters:
        - type: RequestHeaderModifier
          requestHeaderModifier:
            set:
              - name: x-forwarded-admin
                value: \"true\"
      backendRefs:
        - name: admin
          port: 8080
    - matches:
        - path:
            type: PathPrefix
            value: /
      filters:
        - type: ResponseHeaderModifier
          responseHeaderModifier:
            add:
              - name: x-served-by
                value: podinfo
      backendRefs:
        - name: podinfo
          port: 9898
    - matches:
        - path:
            type: PathPrefix
            value: /legacy
      filters:
        - type: RequestRedirect
          requestRedirect:
            hostname: legacy.example.com
            statusCode: 301
"
);

/// [`SOURCE`] as a human edits it mid-rollout: the redirect goes elsewhere and a rule for
/// `/api` to podinfo, with a timeout, is added (sluice splits it too).
fn edited_source() -> String {
    SOURCE.replace("legacy.example.com", "archive.example.com")
        + "    - matches:
        - path:
            type: PathPrefix
            value: /api
      timeouts:
        request: 10s
      backendRefs:
        - name: podinfo
          port: 9898
"
}

/// The `prod/podinfo` Flagger canary on `gatewayapi:v1` with the route source.
fn flagger_canary(analysis: &str) -> String {
    podinfo()
        .provider("gatewayapi:v1")
        .refs(&format!("  routeSource: {SOURCE_FILE}\n"))
        .yaml(analysis)
}

/// The source's rules, as JSON.
fn source_rules(text: &str) -> Vec<Json> {
    let doc: Json = serde_saphyr::from_str(text).unwrap();
    doc["spec"]["rules"].as_array().unwrap().clone()
}

/// Checks the copy of the source at one commit against the source at that commit, and
/// returns the split rules' weights (all rules that send to podinfo carry the same).
fn check_copy(doc: &Json, source: &str, what: &str) -> String {
    let original: Json = serde_saphyr::from_str(source).unwrap();
    assert_eq!(doc["apiVersion"], original["apiVersion"], "{what}");
    assert_eq!(doc["kind"], original["kind"], "{what}");
    assert_eq!(doc["metadata"]["name"], "podinfo-public", "{what}");
    assert_eq!(doc["metadata"]["namespace"], "prod", "{what}");
    assert_eq!(doc["metadata"]["labels"]["team"], "web", "{what}");
    assert_eq!(
        doc["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "sluice"
    );
    assert_eq!(
        doc["metadata"]["annotations"],
        original["metadata"]["annotations"]
    );
    assert_eq!(
        doc["spec"]["parentRefs"], original["spec"]["parentRefs"],
        "{what}"
    );
    assert_eq!(
        doc["spec"]["hostnames"], original["spec"]["hostnames"],
        "{what}"
    );
    let rules = doc["spec"]["rules"].as_array().unwrap();
    let expected = source_rules(source);
    assert_eq!(rules.len(), expected.len(), "{what}: every rule is kept");
    let mut split = Vec::new();
    for (rule, want) in rules.iter().zip(&expected) {
        if want["backendRefs"][0]["name"] != "podinfo" {
            assert_eq!(
                rule, want,
                "{what}: a rule without the apex is copied as it is"
            );
            continue;
        }
        let mut without = rule.clone();
        let refs = without
            .as_object_mut()
            .unwrap()
            .remove("backendRefs")
            .unwrap();
        let mut want = want.clone();
        want.as_object_mut().unwrap().remove("backendRefs");
        assert_eq!(without, want, "{what}: matches and filters kept");
        let names: Vec<&str> = refs
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["podinfo-primary", "podinfo-canary"], "{what}");
        for r in refs.as_array().unwrap() {
            assert_eq!(r["port"], 9898, "{what}");
            assert_eq!(r["kind"], "Service", "{what}");
        }
        split.push(weights(&refs[0]["weight"], &refs[1]["weight"]));
    }
    split.dedup();
    assert_eq!(
        split.len(),
        1,
        "{what}: every split rule has the same weights"
    );
    split.remove(0)
}

/// One commit of the loop harness: the one route document is the copy of the source at that
/// commit, and the source itself is the human's (sluice never writes it).
fn route(c: &Commit) -> String {
    assert_eq!(c.docs.len(), 1, "{}", c.sha);
    let source = show(c.bare, c.sha, SOURCE_FILE);
    let last_writer = crate::support::git(
        c.bare,
        &["log", "-1", "--format=%an", c.sha, "--", SOURCE_FILE],
    );
    assert!(
        !last_writer.contains("sluice"),
        "{}: sluice wrote the source",
        c.sha
    );
    check_copy(&c.docs[0], &source, c.sha)
}

fn files() -> Vec<(&'static str, String)> {
    vec![(SOURCE_FILE, SOURCE.to_string())]
}

const ROUTE_SOURCE: Provider = Provider {
    canary: flagger_canary,
    files,
    route,
};

#[test]
fn route_source_keeps_the_users_rules_through_a_rollout() {
    ROUTE_SOURCE.steps_and_promotes();
    ROUTE_SOURCE.bluegreen_switches();
}

#[test]
fn route_source_rolls_back_with_the_users_rules() {
    ROUTE_SOURCE.rolls_back();
}

#[test]
fn route_source_edit_mid_rollout_reaches_the_output_without_moving_the_weights() {
    let mut w = ROUTE_SOURCE.world(crate::support::rollout::STEPS);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    // Until traffic reached the canary.
    for _ in 0..40 {
        w.tick();
        let status = w.yaml_at_main(STATUS_FILE);
        if status["canaryWeight"].as_u64().unwrap_or(0) >= 20 {
            break;
        }
    }
    let before = w.yaml_at_main(STATUS_FILE);
    assert_eq!(before["canaryWeight"], 20, "{before}");
    w.human_writes(
        SOURCE_FILE,
        &edited_source(),
        "podinfo: route /api, move legacy",
    );
    w.until(Phase::Succeeded);
    let found = ROUTE_SOURCE.check_every_commit(&w.bare, false);
    assert_eq!(crate::support::rollout::distinct(found), STEPPED);
    let last = sluice_commits(&w.bare).pop().unwrap().0;
    let route = show(&w.bare, &last, ROUTE_FILE);
    assert!(route.contains("archive.example.com"), "{route}");
    assert!(route.contains("/api"), "{route}");
    // Every commit after the edit carries it, at the weights the rollout had reached.
    let edited_at = sluice_commits(&w.bare)
        .into_iter()
        .find(|(sha, _)| show(&w.bare, sha, ROUTE_FILE).contains("archive.example.com"))
        .unwrap();
    let status: Json = serde_saphyr::from_str(&show(&w.bare, &edited_at.0, STATUS_FILE)).unwrap();
    assert!(
        status["canaryWeight"].as_u64().unwrap() >= 20,
        "the edit did not restart the rollout: {status}"
    );
}

#[test]
fn route_source_edit_of_an_idle_canary_is_committed_at_the_next_tick_and_audits_clean() {
    let mut w = ROUTE_SOURCE.world(crate::support::rollout::STEPS);
    w.until(Phase::Initialized);
    let status_before = show(&w.bare, "main", STATUS_FILE);
    let commits_before = sluice_commits(&w.bare).len();
    w.human_writes(
        SOURCE_FILE,
        &edited_source(),
        "podinfo: route /api, move legacy",
    );
    let report = w.tick();
    assert_eq!(report.commits, 1, "{report:?}");
    let commits = sluice_commits(&w.bare);
    assert_eq!(commits.len(), commits_before + 1);
    let (sha, trailer) = commits.last().unwrap();
    assert_eq!(trailer, "primary=100 canary=0", "the weights stay");
    let subject = crate::support::git(&w.bare, &["log", "-1", "--format=%s", sha]);
    assert_eq!(
        subject.trim(),
        format!("podinfo: route source {SOURCE_FILE} changed")
    );
    let changed = crate::support::git(&w.bare, &["show", "--name-only", "--format=", sha]);
    assert_eq!(changed.trim(), ROUTE_FILE, "only the route changes");
    assert_eq!(show(&w.bare, "main", STATUS_FILE), status_before);
    let doc: Json = serde_saphyr::from_str(&show(&w.bare, "main", ROUTE_FILE)).unwrap();
    assert!(Schemas::default().errors(&doc).is_empty());
    assert_eq!(
        check_copy(&doc, &edited_source(), sha),
        "primary=100 canary=0"
    );
    // Nothing more to do, no drift: the copy is sluice's.
    assert_eq!(w.tick().commits, 0);
    let (code, report) = crate::support::audit::audit(&w.bare);
    assert_eq!((code, &report["findings"]), (0, &json!([])), "{report:#}");
    assert_eq!(
        report["replayed"], 2,
        "the initialization and the copy: {report:#}"
    );
    // The next rollout runs on the edited route.
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    let found = ROUTE_SOURCE.check_every_commit(&w.bare, false);
    assert_eq!(crate::support::rollout::distinct(found), STEPPED);
    crate::support::audit::clean(&w.bare);
}

#[test]
fn route_source_edit_waits_while_an_approval_carries_the_next_change() {
    let canary = native_canary().replace(
        "stepWeights: [10, 20, 30, 40, 50, 60]",
        "steps: [{weight: 20, pause: {}}, {weight: 60}]",
    );
    let mut w = crate::support::rollout::World::with_files(&canary, &[(SOURCE_FILE, SOURCE)]);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::WaitingApproval);
    let route = show(&w.bare, "main", ROUTE_FILE);
    let commits = sluice_commits(&w.bare).len();
    w.human_writes(
        SOURCE_FILE,
        &edited_source(),
        "podinfo: route /api, move legacy",
    );
    w.tick();
    assert_eq!(sluice_commits(&w.bare).len(), commits, "no commit on main");
    assert_eq!(show(&w.bare, "main", ROUTE_FILE), route);
}

/// A native canary of the podinfo Deployment with the route source, interval 1s, six steps:
/// the canary `sluice run` rolls out.
fn native_canary() -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata: {{name: podinfo, namespace: prod}}
spec:
  source: apps/podinfo/deployment.yaml
  output: {OUTPUT}
  service: {{port: 9898, targetPort: 9898}}
  routeSource: {SOURCE_FILE}
  analysis: {{interval: 1s, threshold: 2, stepWeights: [10, 20, 30, 40, 50, 60]}}
"
    )
}

/// The status file at main, once there is one.
fn status_on_remote(bare: &Path) -> Option<Json> {
    let out = std::process::Command::new("git")
        .args(["show", &format!("main:{STATUS_FILE}")])
        .current_dir(bare)
        .output()
        .ok()?;
    serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout)).ok()
}

fn wait_for(bare: &Path, what: &str, pred: impl Fn(&Json) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if status_on_remote(bare).is_some_and(|s| pred(&s)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; at {:?}",
            status_on_remote(bare)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Rolls the native canary out through `sluice run` against a `git daemon`, with `source`
/// as the route source and, once traffic reached the canary, `edit` committed by a human.
/// Every sluice commit's route is the copy of the source at that commit, carries the
/// commit's weights and passes its strict schema; the output builds with `kubectl
/// kustomize`. `edit` is the edited source and a text only its copy contains. Returns the
/// distinct canary weights in order and whether a copy of the edit was committed.
fn rollout_through_sluice_run(source: &str, edit: Option<(&str, &str)>) -> (Vec<u64>, bool) {
    let tmp = tempfile::tempdir().unwrap();
    let canary = native_canary();
    let bare = seeded_remote(
        tmp.path(),
        &[
            ("apps/podinfo/deployment.yaml", DEPLOYMENT),
            ("apps/podinfo/configs.yaml", CONFIGS),
            (CANARY_FILE, &canary),
            (SOURCE_FILE, source),
        ],
    );
    let daemon = GitDaemon::start(tmp.path());
    let url = daemon.url("config.git");
    let _sluice = crate::support::sluice_daemon(&url, &tmp.path().join("work")).start();
    wait_for(&bare, "initialization", |s| s["phase"] == "Initialized");
    let human = human_clone(&url, &tmp.path().join("human"));
    human_commit(
        &human,
        "apps/podinfo/deployment.yaml",
        &DEPLOYMENT.replace("6.7.0", "6.7.1"),
        "podinfo: 6.7.1",
    );
    if let Some((edited, _)) = edit {
        wait_for(&bare, "traffic on the canary", |s| {
            s["canaryWeight"].as_u64().is_some_and(|w| w >= 10)
        });
        crate::support::git(&human, &["pull", "-q", "origin", "main"]);
        human_commit(&human, SOURCE_FILE, edited, "podinfo: route edit");
    }
    wait_for(&bare, "success", |s| s["phase"] == "Succeeded");
    drop(_sluice);

    let mut schemas = Schemas::default();
    let mut seen = Vec::new();
    let mut edited = false;
    for (sha, trailer) in sluice_commits(&bare) {
        let text = show(&bare, &sha, ROUTE_FILE);
        let doc: Json = serde_saphyr::from_str(&text).unwrap();
        schemas.assert_valid(&doc, &sha);
        let source = show(&bare, &sha, SOURCE_FILE);
        let split = check_copy(&doc, &source, &sha);
        assert_eq!(
            split, trailer,
            "{sha}: the route carries the commit's weights"
        );
        edited |= edit.is_some_and(|(_, mark)| text.contains(mark));
        seen.push(split);
    }
    kustomize_builds(&bare, OUTPUT);
    let canary = crate::support::rollout::distinct(seen)
        .iter()
        .map(|w| w.rsplit('=').next().unwrap().parse().unwrap())
        .collect();
    (canary, edited)
}

/// The canary weights of a rollout of [`native_canary`]: up in six steps, then back to 0
/// once promoted.
const RUN_WEIGHTS: [u64; 8] = [0, 10, 20, 30, 40, 50, 60, 0];

#[test]
fn route_source_rollout_through_sluice_run_and_git_daemon_keeps_a_mid_rollout_edit() {
    let edited_source = edited_source();
    let (canary, edited) =
        rollout_through_sluice_run(SOURCE, Some((&edited_source, "archive.example.com")));
    assert!(edited, "the human edit reached the output");
    assert_eq!(canary, RUN_WEIGHTS, "the edit moved no weight");
}

#[test]
fn grpc_tcp_and_tls_route_sources_promote_step_by_step_through_sluice_run() {
    for (kind, source) in other_kinds() {
        let (canary, _) = rollout_through_sluice_run(&source, None);
        assert_eq!(canary, RUN_WEIGHTS, "{kind}");
    }
}

/// The apex port, and which canary file, for the error cases.
fn repo(canary: &str, source: &str) -> Vec<String> {
    repo_errors(&[
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        (CANARY_FILE, canary),
        (SOURCE_FILE, source),
    ])
}

#[test]
fn route_source_that_sends_nothing_to_the_apex_is_an_error_at_its_line() {
    let source = SOURCE.replace("- name: podinfo\n", "- name: other\n");
    let errors = repo(&flagger_canary("    stepWeight: 20"), &source);
    assert_eq!(
        errors,
        [format!("{SOURCE_FILE}:18: spec.rules: no rule of HTTPRoute podinfo-public sends traffic to the Service \"podinfo\" (the canary's apex Service); sluice splits the rules whose backendRef is \"podinfo\" between \"podinfo-primary\" and \"podinfo-canary\"")]
    );
}

#[test]
fn route_source_errors_name_the_file_line_and_field() {
    let analysis = "    stepWeight: 20";
    let cases: Vec<(String, String, &str)> = vec![
        (
            podinfo()
                .provider("istio")
                .refs(&format!("  routeSource: {SOURCE_FILE}\n"))
                .yaml(analysis),
            SOURCE.to_string(),
            "apps/podinfo/canary.yaml:7: spec.provider: spec.routeSource copies a Gateway API route: expected provider gatewayapi:v1 or gatewayapi:v1beta1",
        ),
        (
            podinfo()
                .provider("gatewayapi:v1beta1")
                .refs(&format!("  routeSource: {SOURCE_FILE}\n"))
                .yaml(analysis),
            SOURCE.to_string(),
            "apps/podinfo/httproute.yaml:1: apiVersion: expected gateway.networking.k8s.io/v1beta1 (the API of the canary's provider, which sluice writes), found \"gateway.networking.k8s.io/v1\"",
        ),
        (
            podinfo()
                .provider("gatewayapi:v1")
                .refs(&format!("  routeSource: {SOURCE_FILE}\n"))
                .service("    port: 9898\n    gatewayRefs: [{name: gw}]")
                .yaml(analysis),
            SOURCE.to_string(),
            "apps/podinfo/canary.yaml:15: spec.service.gatewayRefs: not used with spec.routeSource: the route's rules come from apps/podinfo/httproute.yaml; write it there",
        ),
        (
            flagger_canary("    iterations: 3\n    match:\n    - headers: {x-canary: {exact: insider}}"),
            SOURCE.to_string(),
            "apps/podinfo/canary.yaml:20: spec.analysis.match: not supported with spec.routeSource yet: sluice changes only the backends of your route's rules, and this would add rules or filters to it; remove it, or let sluice write the whole route (spec.route, or Flagger's service fields)",
        ),
        (
            flagger_canary(analysis),
            SOURCE.replace("        - name: podinfo\n          port: 9898\n", "        - name: podinfo\n          port: 9898\n        - name: podinfo-v0\n          port: 9898\n"),
            "apps/podinfo/httproute.yaml:45: spec.rules[1].backendRefs: this rule sends traffic to the apex Service \"podinfo\" and to 1 other backend(s); sluice splits only a rule whose one backend is \"podinfo\" (changing the others' share is yours to do): move \"podinfo\" to a rule of its own",
        ),
        (
            flagger_canary(analysis),
            SOURCE.replace("          port: 9898\n", "          port: 80\n"),
            "apps/podinfo/httproute.yaml:47: spec.rules[1].backendRefs[0].port: expected the canary's service.port 9898 (the port of \"podinfo\" and of the primary and canary Services sluice writes), found 80",
        ),
        (
            flagger_canary(analysis),
            SOURCE.replace("  namespace: prod\n", "  namespace: test\n"),
            "apps/podinfo/httproute.yaml:5: metadata.namespace: expected the canary's namespace \"prod\" (the copy is written there, next to its Services), found \"test\"",
        ),
        (
            flagger_canary(analysis),
            SOURCE.replace("kind: HTTPRoute", "kind: UDPRoute"),
            "apps/podinfo/canary.yaml:12: spec.routeSource: expected a Gateway API HTTPRoute, GRPCRoute, TCPRoute or TLSRoute in apps/podinfo/httproute.yaml, found UDPRoute podinfo-public",
        ),
        (
            flagger_canary(analysis).replace(SOURCE_FILE, "apps/podinfo/missing.yaml"),
            SOURCE.to_string(),
            "apps/podinfo/canary.yaml:12: spec.routeSource: apps/podinfo/missing.yaml not found among the repo's YAML files (sluice reads .yaml and .yml files outside hidden folders)",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(canary, source, expected)| {
            let errors = repo(canary, source);
            (errors != [*expected]).then(|| format!("expected {expected}\nfound {errors:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// The route of `canary` at `weight` percent to the canary, which passes its strict schema.
fn render_at(canary: &sluice::manifest::model::Canary, weight: u8) -> Json {
    let backends = sluice::route::Backends {
        primary: "podinfo-primary",
        canary: "podinfo-canary",
    };
    let rendered = sluice::route::render_route(
        canary,
        &backends,
        sluice::route::Weights::from_canary(weight).unwrap(),
        &Default::default(),
    )
    .unwrap()
    .unwrap();
    let doc: Json = serde_saphyr::from_str(&rendered.content).unwrap();
    let errors = Schemas::default().errors(&doc);
    assert!(errors.is_empty(), "{errors:?}");
    doc
}

#[test]
fn native_route_source_replaces_spec_route() {
    let both = native_canary().replace(
        "  routeSource:",
        "  route: {apiVersion: gateway.networking.k8s.io/v1, kind: HTTPRoute, parentRefs: [{name: gw}]}\n  routeSource:",
    );
    assert_eq!(
        repo(&both, SOURCE),
        ["apps/podinfo/canary.yaml:8: spec.route: expected either spec.route or spec.routeSource, found both"]
    );
    let canary = load_one(&[
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        (CANARY_FILE, &native_canary()),
        (SOURCE_FILE, SOURCE),
    ]);
    let doc = render_at(&canary, 30);
    assert_eq!(check_copy(&doc, SOURCE, "native"), "primary=70 canary=30");
    assert_eq!(
        doc["spec"]["rules"][1]["backendRefs"][1],
        json!({"group": "", "kind": "Service", "name": "podinfo-canary", "port": 9898, "weight": 30})
    );
    // The readiness gate waits for the user's route, under its own name.
    let ready = canary.route.readiness(&canary).unwrap();
    assert_eq!(ready.name, "podinfo-public");
}

#[test]
fn route_source_v1beta1_is_copied_at_v1beta1() {
    let source = SOURCE.replace(
        "gateway.networking.k8s.io/v1\n",
        "gateway.networking.k8s.io/v1beta1\n",
    );
    let canary = loaded_flagger("gatewayapi:v1beta1", &source);
    let doc = render_at(&canary, 20);
    assert_eq!(doc["apiVersion"], "gateway.networking.k8s.io/v1beta1");
    assert_eq!(check_copy(&doc, &source, "v1beta1"), "primary=80 canary=20");
    // An API the copy cannot be written at, at the source's line.
    let alpha = SOURCE.replace(
        "gateway.networking.k8s.io/v1\n",
        "gateway.networking.k8s.io/v1alpha2\n",
    );
    assert_eq!(
        repo(&native_canary(), &alpha),
        ["apps/podinfo/httproute.yaml:1: apiVersion: expected gateway.networking.k8s.io/v1 or gateway.networking.k8s.io/v1beta1 for an HTTPRoute, found \"gateway.networking.k8s.io/v1alpha2\""]
    );
}

#[test]
fn grpc_tcp_and_tls_route_sources_of_a_flagger_canary_keep_their_kind_and_api() {
    for (kind, source) in other_kinds() {
        let original: Json = serde_saphyr::from_str(&source).unwrap();
        // The provider names the HTTPRoute API Flagger writes; these kinds keep their own.
        for provider in ["gatewayapi:v1", "gatewayapi:v1beta1"] {
            let canary = loaded_flagger(provider, &source);
            let doc = render_at(&canary, 20);
            assert_eq!(
                doc["apiVersion"], original["apiVersion"],
                "{kind} {provider}"
            );
            assert_eq!(check_copy(&doc, &source, kind), "primary=80 canary=20");
            let ready = canary.route.readiness(&canary).unwrap();
            assert_eq!((ready.kind, ready.name), (kind, "podinfo-public"));
        }
    }
}

#[test]
fn route_source_refusals_of_the_other_kinds_name_the_file_line_and_field() {
    let two_backends = "        - name: podinfo\n          port: 9898\n";
    let cases: Vec<(String, &str)> = vec![
        (
            grpc_source().replace(two_backends, &format!("{two_backends}        - name: podinfo-v0\n          port: 9898\n")),
            "apps/podinfo/httproute.yaml:35: spec.rules[1].backendRefs: this rule sends traffic to the apex Service \"podinfo\" and to 1 other backend(s); sluice splits only a rule whose one backend is \"podinfo\" (changing the others' share is yours to do): move \"podinfo\" to a rule of its own",
        ),
        (
            grpc_source().replace("gateway.networking.k8s.io/v1\n", "gateway.networking.k8s.io/v1alpha2\n"),
            "apps/podinfo/httproute.yaml:1: apiVersion: expected gateway.networking.k8s.io/v1 for a GRPCRoute, found \"gateway.networking.k8s.io/v1alpha2\"",
        ),
        (
            tcp_source().replace("- name: podinfo\n          port", "- name: other\n          port"),
            "apps/podinfo/httproute.yaml:15: spec.rules: no rule of TCPRoute podinfo-public sends traffic to the Service \"podinfo\" (the canary's apex Service); sluice splits the rules whose backendRef is \"podinfo\" between \"podinfo-primary\" and \"podinfo-canary\"",
        ),
        (
            tcp_source().replace("          port: 9898\n", "          port: 9898\n          filters: []\n"),
            "apps/podinfo/httproute.yaml:24: spec.rules[1].backendRefs[0].filters: unknown field; expected one of: group, kind, name, namespace, port, weight",
        ),
        (
            tcp_source().replace("v1alpha2", "v1"),
            "apps/podinfo/httproute.yaml:15: spec.rules: expected at most 1 rule(s) (the CRD's limit for a gateway.networking.k8s.io/v1 TCPRoute), found 2",
        ),
        (
            tls_source().replace("  hostnames:\n    - podinfo.example.com\n", "").replace("v1alpha2", "v1"),
            "apps/podinfo/httproute.yaml:10: spec.hostnames: required for a gateway.networking.k8s.io/v1 TLSRoute: the CRD requires at least one hostname",
        ),
        (
            tls_source().replace("    - backendRefs:\n", "    - matches: []\n      backendRefs:\n"),
            "apps/podinfo/httproute.yaml:18: spec.rules[0].matches: unknown field; expected one of: name, backendRefs",
        ),
        (
            tcp_source().replace("  parentRefs:\n", "  hostnames: [podinfo.example.com]\n  parentRefs:\n"),
            "apps/podinfo/httproute.yaml:11: spec.hostnames: unknown field; expected one of: parentRefs, rules",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(source, expected)| {
            let errors = repo(&native_canary(), source);
            (errors != [*expected]).then(|| format!("expected {expected}\nfound {errors:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn validate_and_plan_read_a_route_source() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("apps/podinfo/deployment.yaml", DEPLOYMENT);
    write(
        CANARY_FILE,
        &flagger_canary("    stepWeight: 20\n    maxWeight: 60"),
    );
    write(SOURCE_FILE, SOURCE);
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    let apps = dir.path().join("apps");
    let (code, out, err) = run_sluice(&["validate", apps.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run_sluice(&["plan", apps.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let plans: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(plans[0]["canaryWeights"], json!([20, 40, 60]));

    write(
        SOURCE_FILE,
        &SOURCE.replace("- name: podinfo\n", "- name: other\n"),
    );
    let (code, out, err) = run_sluice(&["validate", apps.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("httproute.yaml:18: spec.rules: no rule of HTTPRoute podinfo-public sends traffic to the Service \"podinfo\""),
        "{all}"
    );
}
