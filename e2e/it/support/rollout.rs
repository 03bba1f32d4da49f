//! The rollout harness of the loop tests (`loop_*.rs`, the APISIX loop in `route_apisix.rs`):
//! the whole-rollout scenarios every router runs (steps and promotion, blue/green, A/B,
//! rollback) on the podinfo [`World`] (`World::with_files`), and the readers of its history.
//!
//! A provider's loop test supplies a [`Provider`]: its canary, the objects the canary
//! references, and how to read the weights its route sends. The harness checks the rest at
//! every sluice commit: each document of `route.yaml` passes its strict schema, the route's
//! weights are the status file's (all matching requests to the canary during an A/B
//! analysis), and the `Sluice-Weights` trailer agrees. After every phase the loop waits for,
//! `kubectl kustomize` builds the output folder at main ([`kustomize_builds`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::observer::Offline;
use sluice::tick::Context;

use crate::support::route_sources::route_head;
pub(crate) use crate::support::{commits_of, show, World};
use crate::support::{git, str_pairs, Checks, Schemas, SluiceCommit, Transport};

pub(crate) const CANARY_FILE: &str = "apps/podinfo/canary.yaml";
pub(crate) const STATUS_FILE: &str = ".sluice/status/prod/podinfo.yaml";
/// The output folder of the `prod/podinfo` canary every loop test runs.
pub(crate) const OUTPUT: &str = "clusters/prod/podinfo";
pub(crate) const ROUTE_FILE: &str = "clusters/prod/podinfo/route.yaml";
pub(crate) const PRIMARY_FILE: &str = "clusters/prod/podinfo/podinfo-primary.yaml";
/// An Argo Rollout's source and the files sluice writes for it.
pub(crate) const ROLLOUT_FILE: &str = "apps/podinfo/rollout.yaml";
pub(crate) const STABLE_FILE: &str = "clusters/prod/podinfo/podinfo-stable.yaml";
pub(crate) const CANARY_WORKLOAD: &str = "clusters/prod/podinfo/podinfo-canary.yaml";
pub(crate) const SERVICES_FILE: &str = "clusters/prod/podinfo/services.yaml";

/// Analysis blocks (indented under `analysis:`), one per scenario.
pub(crate) const STEPS: &str = "    stepWeight: 20\n    maxWeight: 60";
pub(crate) const BLUE_GREEN: &str = "    iterations: 3";
/// The offline observer never observes a metric, so every check fails.
pub(crate) const FAILING: &str = "    stepWeight: 20
    maxWeight: 60
    metrics:
      - name: request-success-rate
        thresholdRange: {min: 99}";

/// The distinct weights of a stepped rollout: initialization, 20, 40, 60, promotion.
pub(crate) const STEPPED: [&str; 5] = [
    "primary=100 canary=0",
    "primary=80 canary=20",
    "primary=60 canary=40",
    "primary=40 canary=60",
    "primary=100 canary=0",
];
/// The distinct weights of blue/green and A/B: initialization, all to the canary (all
/// matching requests, for A/B), promotion.
pub(crate) const SWITCHED: [&str; 3] = [
    "primary=100 canary=0",
    "primary=0 canary=100",
    "primary=100 canary=0",
];

/// Sluice commits of `prod/podinfo` on main, oldest first: (sha, Sluice-Weights trailer).
/// The weights sluice commits for one rollout of a route-only canary stepping 10, 30, 60
/// (`support::canary::web_httproute`), in order.
pub(crate) const ROUTE_ONLY_WEIGHTS: [&str; 8] = [
    "primary=100 canary=0", // initialization
    "primary=100 canary=0", // new revision detected
    "primary=90 canary=10",
    "primary=70 canary=30",
    "primary=40 canary=60",
    "primary=40 canary=60", // promote
    "primary=0 canary=100", // all traffic to the promoted revision, still on the green service
    "primary=100 canary=0", // promotion completed: green is the stable service
];

pub(crate) fn sluice_commits(bare: &Path) -> Vec<(String, String)> {
    commits_of(bare, "prod/podinfo")
}

/// Whether a missing kubectl fails the kustomize checks: on CI, or when asked.
fn kubectl_required() -> bool {
    ["CI", "SLUICE_REQUIRE_KUBECTL"]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()))
}

/// `kubectl kustomize` on a folder: its documents, or `None` (with a printed note) when
/// kubectl is not installed and not required ([`kubectl_required`]). Panics with kubectl's
/// output when the build fails.
pub(crate) fn kubectl_kustomize(dir: &Path) -> Option<Vec<Json>> {
    let built = match Command::new("kubectl").arg("kustomize").arg(dir).output() {
        Ok(built) => built,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !kubectl_required() => {
            eprintln!(
                "note: kubectl not installed, kustomize build of {} not checked (set CI or SLUICE_REQUIRE_KUBECTL to fail instead)",
                dir.display()
            );
            return None;
        }
        Err(e) => panic!(
            "kubectl kustomize {}: {e} (CI or SLUICE_REQUIRE_KUBECTL is set: kubectl must be installed)",
            dir.display()
        ),
    };
    let stdout = String::from_utf8_lossy(&built.stdout);
    assert!(
        built.status.success(),
        "kubectl kustomize {} failed: {}{stdout}",
        dir.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    Some(serde_saphyr::from_multiple(&stdout).expect("kustomize prints YAML"))
}

/// `(kind, namespace, name)` of each document, sorted.
pub(crate) fn identities(docs: &[Json]) -> Vec<String> {
    let mut ids: Vec<String> = docs
        .iter()
        .map(|d| {
            format!(
                "{} {}/{}",
                d["kind"].as_str().unwrap_or("?"),
                d["metadata"]["namespace"].as_str().unwrap_or(""),
                d["metadata"]["name"].as_str().unwrap_or("?")
            )
        })
        .collect();
    ids.sort();
    ids
}

/// `kubectl kustomize` builds `folder` as a local directory holds it, and the build holds
/// exactly the objects of the folder's other YAML files (the kustomization lists them all,
/// and nothing else).
pub(crate) fn kustomize_builds_dir(folder: &Path) {
    let mut written = Vec::new();
    for entry in walk(folder) {
        let is_yaml = entry.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if is_yaml && entry.file_name().is_some_and(|n| n != "kustomization.yaml") {
            let text = std::fs::read_to_string(&entry).unwrap();
            let docs: Vec<Json> = serde_saphyr::from_multiple(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", entry.display()));
            written.extend(docs);
        }
    }
    if let Some(built) = kubectl_kustomize(folder) {
        assert_eq!(
            identities(&built),
            identities(&written),
            "kubectl kustomize {} builds what the folder holds",
            folder.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// `kubectl kustomize` builds `folder` of the remote's main (see [`kustomize_builds_dir`]).
pub(crate) fn kustomize_builds(bare: &Path, folder: &str) {
    kustomize_builds_at(bare, "main", folder);
}

/// `kubectl kustomize` builds `folder` of the remote's commit `rev`.
pub(crate) fn kustomize_builds_at(bare: &Path, rev: &str, folder: &str) {
    let dir = tempfile::tempdir().unwrap();
    let files = git(
        bare,
        &["ls-tree", "-r", "--name-only", rev, &format!("{folder}/")],
    );
    assert!(!files.trim().is_empty(), "{rev} has no {folder}/");
    let out = dir.path().join("out");
    for file in files.lines() {
        let relative = Path::new(file).strip_prefix(folder).unwrap();
        let path = out.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, show(bare, rev, file)).unwrap();
    }
    kustomize_builds_dir(&out);
}

/// One sluice commit, as a provider's [`Provider::route`] sees it.
pub(crate) struct Commit<'a> {
    pub(crate) bare: &'a Path,
    pub(crate) sha: &'a str,
    /// The documents of `route.yaml`, each already checked against its strict schema.
    pub(crate) docs: &'a [Json],
    /// Whether the canary is an A/B one.
    pub(crate) ab: bool,
}

impl Commit<'_> {
    /// The commit's one route document, which is a `kind` named `podinfo`.
    pub(crate) fn only_doc(&self, kind: &str) -> &Json {
        assert_eq!(self.docs.len(), 1, "{}", self.sha);
        let doc = &self.docs[0];
        assert_eq!(doc["kind"], kind, "{}", self.sha);
        assert_eq!(doc["metadata"]["name"], "podinfo", "{}", self.sha);
        doc
    }
}

/// Weights as the harness compares them: `primary=.. canary=..`.
pub(crate) fn weights(primary: &Json, canary: &Json) -> String {
    format!("primary={primary} canary={canary}")
}

/// What a provider's loop test supplies.
pub(crate) struct Provider {
    /// The `prod/podinfo` canary with an analysis block (indented under `analysis:`).
    pub(crate) canary: fn(&str) -> String,
    /// Objects the canary references, seeded in the repo beside it.
    pub(crate) files: fn() -> Vec<(&'static str, String)>,
    /// Checks the provider's shape of one commit's route and returns the weights the
    /// requests it routes take, as `primary=.. canary=..` (for A/B, the matching requests).
    pub(crate) route: fn(&Commit) -> String,
}

impl Provider {
    /// A provider whose canary references no other object.
    pub(crate) const fn without_files(
        canary: fn(&str) -> String,
        route: fn(&Commit) -> String,
    ) -> Self {
        Provider {
            canary,
            files: no_files,
            route,
        }
    }

    pub(crate) fn world(&self, analysis: &str) -> World {
        let files = (self.files)();
        World::with_files(&(self.canary)(analysis), &str_pairs(&files))
    }

    /// Every sluice commit: each route document schema-valid, the route's weights the status
    /// file's (all matching requests to the canary while an A/B analysis runs), the trailer
    /// the status file's. Returns the route's weights, in order.
    pub(crate) fn check_every_commit(&self, bare: &Path, ab: bool) -> Vec<String> {
        let mut schemas = Schemas::default();
        let mut found = Vec::new();
        let commits = sluice_commits(bare);
        assert!(!commits.is_empty(), "sluice committed nothing");
        for (sha, trailer) in commits {
            let status: Json = serde_saphyr::from_str(&show(bare, &sha, STATUS_FILE)).unwrap();
            let docs: Vec<Json> =
                serde_saphyr::from_multiple(&show(bare, &sha, ROUTE_FILE)).unwrap();
            assert!(!docs.is_empty(), "{sha}: an empty route");
            for doc in &docs {
                let errors = schemas.errors(doc);
                assert!(errors.is_empty(), "{sha}: {errors:?}");
            }
            let status_weights = format!(
                "primary={} canary={}",
                status["primaryWeight"], status["canaryWeight"]
            );
            let phase = status["phase"].as_str().unwrap();
            let expected = if ab && ["Progressing", "WaitingApproval"].contains(&phase) {
                "primary=0 canary=100".to_string()
            } else {
                status_weights.clone()
            };
            let commit = Commit {
                bare,
                sha: &sha,
                docs: &docs,
                ab,
            };
            let weights = (self.route)(&commit);
            assert_eq!(weights, expected, "{sha} in phase {phase}");
            assert_eq!(trailer, status_weights, "{sha}: trailer and status agree");
            found.push(weights);
        }
        let shas: Vec<String> = sluice_commits(bare).into_iter().map(|(s, _)| s).collect();
        crate::support::rollout::every_commit_drawn_by_sluice(bare, &shas);
        found
    }

    /// A rollout with `analysis` (`ab`: an A/B one) of a new revision to success, its
    /// distinct weights `expected`.
    fn promotes(&self, analysis: &str, ab: bool, expected: &[&str]) -> World {
        let mut w = self.world(analysis);
        w.until(Phase::Initialized);
        w.new_revision("6.7.1");
        w.until(Phase::Succeeded);
        assert_eq!(distinct(self.check_every_commit(&w.bare, ab)), expected);
        w
    }

    /// A stepped canary goes 20, 40, 60 and promotes the new version.
    pub(crate) fn steps_and_promotes(&self) -> World {
        let w = self.promotes(STEPS, false, &STEPPED);
        let last = sluice_commits(&w.bare).pop().unwrap().0;
        let primary = show(&w.bare, &last, PRIMARY_FILE);
        assert!(primary.contains("6.7.1"), "promoted: {primary}");
        w
    }

    /// Blue/green: after its iterations all traffic switches, then the new version promotes.
    pub(crate) fn bluegreen_switches(&self) -> World {
        self.promotes(BLUE_GREEN, false, &SWITCHED)
    }

    /// A/B with `analysis` (iterations and `match`): the matching requests go to the canary,
    /// then the new version promotes.
    pub(crate) fn ab_routes_and_promotes(&self, analysis: &str) -> World {
        self.promotes(analysis, true, &SWITCHED)
    }

    /// Failing checks roll back after traffic reached the canary: everything back to the
    /// primary, which keeps the old version.
    pub(crate) fn rolls_back(&self) -> World {
        let mut w = self.world(FAILING);
        w.until(Phase::Initialized);
        let primary_before = show(&w.bare, "main", PRIMARY_FILE);
        w.new_revision("6.7.1");
        w.until(Phase::Failed);
        let weights = self.check_every_commit(&w.bare, false);
        assert_rolled_back(&weights, "primary=80 canary=20", "primary=100 canary=0");
        assert_eq!(
            show(&w.bare, "main", PRIMARY_FILE),
            primary_before,
            "the primary keeps the old version"
        );
        w
    }
}

/// The `weights` of a rollout's commits show traffic reached the canary (`stepped`) before
/// the last commit routed it all `back` to the primary.
pub(crate) fn assert_rolled_back(weights: &[String], stepped: &str, back: &str) {
    assert!(
        weights.iter().any(|t| t == stepped),
        "traffic reached the canary before the rollback: {weights:?}"
    );
    assert_eq!(weights.last().map(String::as_str), Some(back));
}

/// `weights` without consecutive repeats.
pub(crate) fn distinct(mut weights: Vec<String>) -> Vec<String> {
    weights.dedup();
    weights
}

/// No referenced objects.
pub(crate) fn no_files() -> Vec<(&'static str, String)> {
    Vec::new()
}

/// Asserts that the drift check takes every commit of `shas` (on the remote `bare`) for
/// sluice's: its output folder is what sluice renders for its status file, drawn from its
/// parent. Hold commits (`Sluice-Drift`) are left out: they write the status only, over a
/// folder a human changed. Every loop test runs this over its rollout
/// (`rollout::Provider::check_every_commit`), so a render the check cannot reproduce
/// (which would turn a canary's own commits into drift) fails there, router by router.
pub(crate) fn every_commit_drawn_by_sluice(bare: &Path, shas: &[String]) {
    let tmp = tempfile::tempdir().unwrap();
    let head = tmp.path().join("head");
    git(
        tmp.path(),
        &["clone", "-q", &bare.display().to_string(), "head"],
    );
    let snapshot = sluice::yaml::snapshot::Snapshot::read(&head);
    let (settings, problems) =
        sluice::manifest::load::settings_in(&head, sluice::yaml::snapshot::read_bounded);
    assert!(problems.is_empty(), "{problems:?}");
    let loaded = sluice::manifest::load::load(&snapshot, &settings);
    let mut verifier = sluice::drift::Verifier::new(&head, &Default::default());
    for sha in shas {
        let trailers = git(&head, &["log", "-1", "--format=%(trailers:only)", sha]);
        if trailers.contains("Sluice-Drift:") {
            continue;
        }
        let parent = git(&head, &["rev-parse", &format!("{sha}^")]);
        let files = git2::Oid::from_str(sha).unwrap();
        let base = git2::Oid::from_str(parent.trim()).unwrap();
        for canary in &loaded.canaries {
            let id = canary.id.to_string();
            if !trailers.contains(&format!("Sluice-Canary: {id}")) {
                continue;
            }
            let status = show(
                &head,
                sha,
                &sluice::render::status_file::path_for(&canary.id),
            );
            let differ = verifier.differing(canary, &status, files, base).unwrap();
            assert!(
                differ.is_empty(),
                "{sha} ({id}): not what sluice renders for its status: {differ:?}"
            );
        }
    }
}

/// The canary's route with the weights changed by hand.
pub(crate) fn hand_edited(route: &str) -> String {
    let edited = route
        .replace("weight: 80", "weight: 50")
        .replace("weight: 20", "weight: 50");
    assert_ne!(edited, route, "the edit changes the weights: {route}");
    edited
}

/// The loop tests' tick context: offline, twenty push attempts (a human may race each one).
pub(crate) fn loop_context(observer: &Offline) -> Context<'_> {
    Context {
        observer,
        author: None,
        push_attempts: 20,
        runtime: crate::support::runtime(),
        owned: sluice::holding::Holding::all(),
    }
}

/// A `git daemon` remote holding `files`; no tick may report an error.
pub(crate) fn world(files: &[(&str, &str)]) -> World {
    World::new(files, Transport::Daemon, Checks::SpecsAndOutcomes)
}

/// A [`world`] holding the workload `source` at `<app>/<file>` and `canary` at
/// `<app>/canary.yaml`, initialized, then a human bumps the image from 6.0.0 to 6.0.1
/// (message `<name>: 6.0.1`): a new revision to roll out.
pub(crate) fn bumped_world(app: &str, file: &str, source: &str, canary: &str, name: &str) -> World {
    let source_path = format!("{app}/{file}");
    let mut w = world(&[
        (&source_path, source),
        (&format!("{app}/canary.yaml"), canary),
    ]);
    w.until(Phase::Initialized);
    w.human_writes(
        &source_path,
        &source.replace("6.0.0", "6.0.1"),
        &format!("{name}: 6.0.1"),
    );
    w
}

/// At every sluice commit: the output folder holds exactly what its kustomization lists
/// (no route file), and every listed document is valid against the strict schemas.
/// Returns the kinds seen.
pub(crate) fn check_every_commit(w: &World, out: &str, expected: &[&str]) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut kinds = Vec::new();
    for SluiceCommit { sha, .. } in w.commits() {
        let tree = git(
            &w.bare,
            &["ls-tree", "--name-only", &format!("{sha}:{out}")],
        );
        let mut present: Vec<&str> = tree.lines().collect();
        present.sort_unstable();
        assert_eq!(present, expected, "{sha}: the output folder");
        let kustomization: Json =
            serde_saphyr::from_str(&w.show(&sha, &format!("{out}/kustomization.yaml"))).unwrap();
        let listed: Vec<&str> = kustomization["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let files: Vec<&str> = present
            .iter()
            .copied()
            .filter(|f| *f != "kustomization.yaml")
            .collect();
        assert_eq!(listed, files, "{sha}: the kustomization lists every file");
        for f in files {
            let docs: Vec<Json> =
                serde_saphyr::from_multiple(&w.show(&sha, &format!("{out}/{f}"))).unwrap();
            for doc in docs.iter().filter(|d| d["kind"] != "ConfigMap") {
                let errors = schemas.errors(doc);
                assert!(errors.is_empty(), "{sha} {f}: {errors:?}");
                let kind = doc["kind"].as_str().unwrap().to_string();
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
        }
    }
    let shas: Vec<String> = w.commits().into_iter().map(|c| c.sha).collect();
    every_commit_drawn_by_sluice(&w.bare, &shas);
    kinds
}

/// The AnalysisTemplate `canary-up` the Rollout loop tests name: the exporter's `up` (1), filtered by the arguments
/// (no series has those labels, so `!=` keeps it), judged by `condition`, twice.
pub(crate) fn analysis_template(condition: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: canary-up
  namespace: prod
spec:
  args:
    - name: role
    - name: namespace
  metrics:
    - name: canary-up
      interval: 10s
      count: 2
      successCondition: {condition}
      provider:
        prometheus:
          query: sum(up{{job=\"canary\", role!=\"{{{{args.role}}}}\", ns!=\"{{{{args.namespace}}}}\"}})
"
    )
}

/// The two Services a Rollout names (`prod`, selecting `app: podinfo`, port 9898); Argo adds
/// the pod template hash to their selectors at run time, sluice the role label in git.
pub(crate) fn rollout_services(names: [&str; 2]) -> String {
    podinfo_services(&names)
}

/// An Argo Rollouts `Rollout` `prod/podinfo` as the loop tests write one: 5 replicas, the
/// podinfo pod template at `version`, and `canary`: the lines under `strategy.canary`
/// (indented six spaces, each ending in a newline).
pub(crate) fn podinfo_rollout(version: &str, canary: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: podinfo
  namespace: prod
spec:
  replicas: 5
  revisionHistoryLimit: 2
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
    spec:
      containers:
        - name: podinfo
          image: ghcr.io/stefanprodan/podinfo:{version}
          ports:
            - name: http
              containerPort: 9898
  strategy:
    canary:
{canary}"
    )
}

/// Services `names` in `prod`, each selecting every podinfo pod on port 9898 (the loop
/// tests' Rollouts name some of them; sluice adds the role to the copies' selectors).
pub(crate) fn podinfo_services(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| {
            format!(
                "apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: prod
spec:
  selector:
    app: podinfo
  ports:
    - name: http
      port: 9898
      targetPort: http
"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The YAML documents of `file` at `sha` in `bare`.
pub(crate) fn docs_at(bare: &Path, sha: &str, file: &str) -> Vec<Json> {
    serde_saphyr::from_multiple(&show(bare, sha, file)).unwrap()
}
/// Steps that promote without a human: a timed pause, then two more weights.
pub(crate) const TIMED: &str = "        - setWeight: 20
        - pause: {duration: 30s}
        - setWeight: 50
        - pause: {duration: 1m}
        - setWeight: 80";

/// The weights [`TIMED`] steps through, from the stable to the promoted stable.
pub(crate) const TIMED_WEIGHTS: [&str; 5] = [
    "primary=100 canary=0",
    "primary=80 canary=20",
    "primary=50 canary=50",
    "primary=20 canary=80",
    "primary=100 canary=0",
];

/// A `pause: {}` after the first weight: wait for approval.
pub(crate) const APPROVAL: &str = "        - setWeight: 20
        - pause: {}
        - setWeight: 60";

/// The Rollout, as Argo's Gateway API plugin examples write one: 5 replicas, the podinfo
/// pod template at `version`, the plugin naming the route `route_key: podinfo-public`.
pub(crate) fn rollout(version: &str, route_key: &str, steps: &str) -> String {
    podinfo_rollout(
        version,
        &format!(
            "      canaryService: podinfo-canary
      stableService: podinfo-stable
      trafficRouting:
        plugins:
          argoproj-labs/gatewayAPI:
            {route_key}: podinfo-public
            namespace: prod
      steps:
{steps}
"
        ),
    )
}

/// The two Services the Rollout names; Argo adds the pod template hash to their selectors
/// at run time, sluice the role label in git.
pub(crate) fn services() -> String {
    podinfo_services(&["podinfo-stable", "podinfo-canary"])
}

/// Steps with an inline analysis after the first weight, its args from the pod template
/// hash (the canary's role label value) and a field of the Rollout.
pub(crate) const ANALYSED: &str = "        - setWeight: 20
        - analysis:
            templates:
              - templateName: canary-up
            args:
              - name: role
                valueFrom: {podTemplateHashValue: Latest}
              - name: namespace
                valueFrom:
                  fieldRef: {fieldPath: metadata.namespace}
        - setWeight: 60";

/// The `Sluice-Check` trailers of every commit on main whose message has `grep`, newest first.
pub(crate) fn checks(bare: &std::path::Path, grep: &str) -> Vec<String> {
    crate::support::judge::trailers_of_commits(bare, "Sluice-Check", Some(grep))
}

/// The Gateway API plugin's block in [`rollout`], which the other routers' Rollouts replace
/// ([`routed`]).
pub(crate) const GATEWAY_PLUGIN: &str = "        plugins:
          argoproj-labs/gatewayAPI:
            httpRoute: podinfo-public
            namespace: prod
";

/// [`rollout`] routed by `routing` (a `trafficRouting` block indented eight spaces) instead
/// of the Gateway API plugin.
pub(crate) fn routed(routing: &str, version: &str, steps: &str) -> String {
    let text = rollout(version, "httpRoute", steps);
    assert!(text.contains(GATEWAY_PLUGIN), "the plugin block to replace");
    text.replace(GATEWAY_PLUGIN, routing)
}

/// The end of a Gateway API rule sending to both Services, as the plugin's docs write it.
const BOTH_BACKENDS: &str = "      backendRefs:
        - name: podinfo-stable
          port: 9898
          weight: 100
        - name: podinfo-canary
          port: 9898
          weight: 0
";

/// The user's HTTPRoute `prod/podinfo-public`: an admin rule sluice leaves alone, and a rule
/// with a filter sending to both Services.
pub(crate) fn http_route() -> String {
    route_head("v1", "HTTPRoute", "https")
        + "  hostnames: [podinfo.example.com]
  rules:
    - matches:
        - path: {type: PathPrefix, value: /admin}
      backendRefs:
        - name: admin
          port: 8080
    - matches:
        - path: {type: PathPrefix, value: /}
      filters:
        - type: ResponseHeaderModifier
          responseHeaderModifier:
            add:
              - name: x-served-by
                value: podinfo
" + BOTH_BACKENDS
}

/// The user's GRPCRoute `prod/podinfo-public`.
pub(crate) fn grpc_route() -> String {
    route_head("v1", "GRPCRoute", "grpc")
        + "  hostnames: [grpc.podinfo.example.com]
  rules:
    - matches:
        - method: {service: podinfo.Echo}
" + BOTH_BACKENDS
}

/// The user's TCPRoute `prod/podinfo-public`.
pub(crate) fn tcp_route() -> String {
    route_head("v1alpha2", "TCPRoute", "tcp") + "  rules:\n    - name: podinfo\n" + BOTH_BACKENDS
}

/// The user's TLSRoute `prod/podinfo-public`.
pub(crate) fn tls_route() -> String {
    route_head("v1alpha2", "TLSRoute", "tls-passthrough")
        + "  hostnames: [podinfo.example.com]
  rules:
" + &BOTH_BACKENDS.replacen("      backendRefs", "    - backendRefs", 1)
}

/// A destination of the VirtualService: `target` is `host` or `host` + `subset`.
fn destination(target: &str, weight: u32) -> String {
    format!("        - destination:\n            {target}\n            port: {{number: 9898}}\n          weight: {weight}\n")
}

/// The user's VirtualService `prod/podinfo-vsvc`: an admin route sluice leaves alone, the
/// `primary` route and a TCP route on port 3000, each with the `stable` destination at 100
/// and the `canary` at 0.
pub(crate) fn virtual_service(stable: &str, canary: &str) -> String {
    let both = destination(stable, 100) + &destination(canary, 0);
    format!(
        "apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata:
  name: podinfo-vsvc
  namespace: prod
  labels:
    team: web
spec:
  hosts: [podinfo.example.com]
  gateways: [prod/public]
  http:
    - name: admin
      match:
        - uri: {{prefix: /admin}}
      route:
        - destination:
            host: admin
            port: {{number: 8080}}
    - name: primary
      retries: {{attempts: 3, perTryTimeout: 2s}}
      route:
{both}  tcp:
    - match:
        - port: 3000
      route:
{both}"
    )
}

/// Host-level Istio routing of [`virtual_service`]'s `primary` and TCP routes.
pub(crate) const ISTIO_ROUTING: &str = "        istio:
          virtualService:
            name: podinfo-vsvc
            routes: [primary]
            tcpRoutes: [{port: 3000}]
";

/// SMI: the TrafficSplit `podinfo-split` sluice writes.
pub(crate) const SMI_ROUTING: &str = "        smi:
          trafficSplitName: podinfo-split
";

/// NGINX: the canary Ingress beside the user's [`INGRESS`], with one more annotation.
pub(crate) const NGINX_ROUTING: &str = "        nginx:
          stableIngress: podinfo
          additionalIngressAnnotations:
            canary-by-header: X-Canary
";

/// Traefik: the user's [`TRAEFIK_SERVICE`].
pub(crate) const TRAEFIK_ROUTING: &str = "        traefik:
          weightedTraefikServiceName: podinfo
";

/// APISIX: the `main` rule of the user's [`APISIX_ROUTE`].
pub(crate) const APISIX_ROUTING: &str = "        apisix:
          route:
            name: podinfo
            rules: [main]
";

/// The user's stable Ingress `prod/podinfo`, with a rule for another Service.
pub(crate) const INGRESS: &str = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: podinfo
  namespace: prod
  annotations:
    kubernetes.io/ingress.class: nginx
    example.com/owner: web
spec:
  ingressClassName: nginx
  rules:
    - host: podinfo.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: podinfo-stable
                port:
                  number: 9898
    - host: other.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: other
                port:
                  number: 80
";

/// The user's weighted TraefikService `prod/podinfo`.
pub(crate) const TRAEFIK_SERVICE: &str = "apiVersion: traefik.io/v1alpha1
kind: TraefikService
metadata:
  name: podinfo
  namespace: prod
spec:
  weighted:
    services:
      - name: podinfo-stable
        port: 9898
        weight: 100
      - name: podinfo-canary
        port: 9898
        weight: 0
";

/// The user's ApisixRoute `prod/podinfo`.
pub(crate) const APISIX_ROUTE: &str = "apiVersion: apisix.apache.org/v2
kind: ApisixRoute
metadata:
  name: podinfo
  namespace: prod
spec:
  http:
    - name: main
      match:
        hosts: [podinfo.example.com]
        paths: [/*]
      backends:
        - serviceName: podinfo-stable
          servicePort: 9898
          weight: 100
        - serviceName: podinfo-canary
          servicePort: 9898
          weight: 0
";

/// A replica-based Rollout as Argo's getting-started example writes one: 5 replicas, no
/// trafficRouting, only a `canaryService` (for testing the canary pods alone).
pub(crate) fn replica_rollout(version: &str, steps: &str) -> String {
    podinfo_rollout(
        version,
        &format!("      canaryService: podinfo-canary\n      steps:\n{steps}\n"),
    )
}

/// The user's Service selecting every podinfo pod (Argo's replica split is its share of
/// the pods), and the canary one [`replica_rollout`] names.
pub(crate) fn replica_services() -> String {
    podinfo_services(&["podinfo", "podinfo-canary"])
}

/// The analysis of both blue/green promotion gates: the `canary-up` template, its `role`
/// argument the preview's pod template hash (the canary's role label value in git).
pub(crate) const BLUE_GREEN_ANALYSES: &str = "    prePromotionAnalysis:
      templates: [{templateName: canary-up}]
      args:
        - name: role
          valueFrom: {podTemplateHashValue: Latest}
        - name: namespace
          value: prod
    postPromotionAnalysis:
      templates: [{templateName: canary-up}]
      args:
        - name: role
          valueFrom: {podTemplateHashValue: Latest}
        - name: namespace
          value: prod
";

/// A blue/green Rollout as Argo's `examples/rollout-bluegreen.yaml` writes one, with 5
/// replicas, 2 of them in the preview, the podinfo template at `version`, and `extra` lines
/// of `strategy.blueGreen` (indented six spaces).
pub(crate) fn blue_green_rollout(version: &str, extra: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: podinfo
  namespace: prod
spec:
  replicas: 5
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
    spec:
      containers:
        - name: podinfo
          image: ghcr.io/stefanprodan/podinfo:{version}
          ports:
            - name: http
              containerPort: 9898
  strategy:
    blueGreen:
      activeService: podinfo-active
      previewService: podinfo-preview
      previewReplicaCount: 2
      scaleDownDelaySeconds: 30
{extra}"
    )
}

/// `strategy.blueGreen` lines (indented four spaces) indented under it.
pub(crate) fn indented(lines: &str) -> String {
    lines
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect::<String>()
}
