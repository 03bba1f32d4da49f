//! `sluice adopt` on real config repos that run Flagger (`e2e/fixtures/adopt/<name>/repo`, each
//! with the SOURCES it was taken from): the real binary writes one commit on a new branch of a
//! real git checkout; on that branch `sluice validate` passes with its layout checks, no
//! Kustomization or Application applies a source, each output folder is applied by exactly
//! one, sluice's first render there builds with `kubectl kustomize`, and the user's branch and
//! work tree are as they were. What adopt cannot carry over is refused at its line, with
//! nothing written.

use std::collections::BTreeMap;
use std::path::Path;

use sluice::manifest::applied_by;
use sluice::yaml::snapshot::Snapshot;

use crate::support::adopt::{
    adopt, adopt_edited, checkout, fixture, render_adopted, PULL_POLICY, WITH_SECRET,
};
use crate::support::forge::{ForgeFake, Kind};
use crate::support::{every_file_bytes, git, git_lines, kustomize_text, run_sluice_env, show};

/// The work tree without `.git`.
fn work_tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    every_file_bytes(dir)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(".git/"))
        .collect()
}

/// What an adopted fixture must show; returns the checkout of the new branch.
fn adopted(name: &str, canaries: &[&str]) -> (tempfile::TempDir, tempfile::TempDir) {
    adopted_with(name, canaries, &[])
}

/// [`adopted`], telling adopt `args`.
fn adopted_with(
    name: &str,
    canaries: &[&str],
    args: &[&str],
) -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = checkout(name, &[]);
    let main = git(dir.path(), &["rev-parse", "main"]);
    let before = work_tree(dir.path());
    let (code, out, err) = adopt(dir.path(), args);
    assert_eq!(code, 0, "{name}: {out}{err}");
    assert!(
        out.starts_with("sluice adopt: wrote branch sluice-adopt"),
        "{out}"
    );
    for step in [
        "sluice adopt check --repo",
        "scale deploy/flagger --replicas=0",
        "--cascade=orphan",
        "sluice adopt release --repo",
    ] {
        assert!(out.contains(step), "{name}: runbook lacks {step}:\n{out}");
    }

    // The user's branch, HEAD and work tree are untouched; the change is one commit on top.
    assert_eq!(git(dir.path(), &["rev-parse", "main"]), main, "{name}");
    assert_eq!(
        git(dir.path(), &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/main"
    );
    assert_eq!(
        work_tree(dir.path()),
        before,
        "{name}: the work tree changed"
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "", "{name}");
    assert_eq!(
        git(dir.path(), &["rev-parse", "sluice-adopt~2"]),
        main,
        "{name}: two commits on top of main"
    );
    // The first only marks the sources, where they are, to stay in the cluster.
    let first = git_lines(
        dir.path(),
        &["diff", "--name-only", "main", "sluice-adopt~1"],
    );
    assert!(!first.is_empty(), "{name}");
    let keep = if name.starts_with("argocd") {
        "argocd.argoproj.io/sync-options: Prune=false"
    } else {
        "kustomize.toolkit.fluxcd.io/prune: disabled"
    };
    for file in &first {
        let text = git(dir.path(), &["show", &format!("sluice-adopt~1:{file}")]);
        assert!(text.contains(keep), "{name}: {file}: {text}");
    }
    assert!(out.contains("git merge sluice-adopt~1"), "{out}");

    let branch = tempfile::tempdir().unwrap();
    let at = branch.path().join("repo");
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            "-b",
            "sluice-adopt",
            ".",
            at.to_str().unwrap(),
        ],
    );
    let (code, vout, verr) = validate_at(&at);
    assert_eq!(
        (code, vout.trim()),
        (
            0,
            format!(
                "{} canar{} valid",
                canaries.len(),
                if canaries.len() == 1 { "y" } else { "ies" }
            )
            .as_str()
        ),
        "{name}: validate on the adopted branch: {verr}"
    );
    assert_layout(&at, canaries);
    (dir, branch)
}

fn validate_at(dir: &Path) -> (i32, String, String) {
    crate::support::validate(dir, &["."])
}

/// No applier applies a file under `sources/`; each canary's `deploy/<ns>/<name>` is applied by
/// exactly one, `sluice-outputs`.
fn assert_layout(dir: &Path, canaries: &[&str]) {
    let snapshot = Snapshot::read(dir);
    let mut ignore = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(dir.join(".sourceignore")) {
        ignore.insert(String::new(), text);
    }
    let appliers = applied_by::appliers(&snapshot, &ignore);
    let sources: Vec<String> = snapshot
        .files()
        .iter()
        .map(|f| f.name.clone())
        .filter(|n| n.starts_with("sources/"))
        .collect();
    assert!(!sources.is_empty(), "{}", dir.display());
    for s in &sources {
        let by: Vec<String> = appliers
            .iter()
            .filter(|a| a.applies_file(s))
            .map(|a| a.title())
            .collect();
        assert!(by.is_empty(), "{s} is applied by {by:?}");
    }
    for c in canaries {
        let folder = format!("deploy/{c}");
        let by: Vec<String> = appliers
            .iter()
            .filter(|a| a.applies_folder(&folder))
            .map(|a| a.title())
            .collect();
        assert_eq!(by.len(), 1, "{folder} is applied by {by:?}");
        assert!(by[0].ends_with("/sluice-outputs"), "{by:?}");
    }
}

/// A kustomization adopt edited still builds (when kubectl is installed).
fn builds(folder: &Path) {
    if kustomize_text(folder, &[]).is_none() {
        eprintln!("kubectl not installed: {} not built", folder.display());
    }
}

/// sluice's first render on the adopted branch ([`render_adopted`]), then
/// `kubectl kustomize` of `folders` in it, and `validate` once more.
fn first_render(dir: &Path, folders: &[&str], canaries: usize) {
    let tmp = render_adopted(dir);
    let rendered = tmp.path().join("rendered");
    let initialized = git_lines(&rendered, &["log", "--format=%s", "sluice-adopt"])
        .iter()
        .filter(|s| s.ends_with("initialization done, all traffic on the primary"))
        .count();
    assert_eq!(initialized, canaries, "one first render per canary");
    for folder in folders {
        let Some(text) = kustomize_text(&rendered.join(folder), &[]) else {
            eprintln!("kubectl not installed: {folder} not built");
            continue;
        };
        assert!(text.contains("kind: Deployment"), "{folder}: {text}");
        assert!(text.contains("-primary"), "{folder}: {text}");
    }
    let (code, out, err) = validate_at(&rendered);
    assert_eq!(code, 0, "after the first render: {out}{err}");
    assert!(out.contains(&format!("{canaries} canar")), "{out}");
}

#[test]
fn adopts_gitops_istio_writing_the_kustomize_image_into_the_moved_deployment() {
    let (dir, branch) = adopted("flux-gitops-istio", &["prod/backend", "prod/frontend"]);
    let at = branch.path().join("repo");
    // kustomize's images entry is now in the file sluice reads.
    let deployment =
        std::fs::read_to_string(at.join("sources/prod/backend/deployment.yaml")).unwrap();
    assert!(
        deployment.contains("image: ghcr.io/stefanprodan/podinfo:6.1.0"),
        "{deployment}"
    );
    let kustomization =
        std::fs::read_to_string(at.join("apps/backend/kustomization.yaml")).unwrap();
    assert!(
        !kustomization.contains("deployment.yaml"),
        "{kustomization}"
    );
    builds(&at.join("apps/backend"));
    let settings = std::fs::read_to_string(at.join(".sluice/config.yaml")).unwrap();
    for line in [
        "provider: istio",
        "output: deploy/{namespace}/{name}",
        "  address: http://flagger-prometheus.istio-system:9090",
        "sync: {flux: {kustomization: sluice-outputs, namespace: flux-system}}",
        "adoption:\n  hold: true",
    ] {
        assert!(settings.contains(line), "{line}: {settings}");
    }
    first_render(
        dir.path(),
        &["deploy/prod/backend", "deploy/prod/frontend"],
        2,
    );
}

#[test]
fn adopts_driv_adding_the_outputs_to_the_flux_system_kustomization() {
    let (dir, branch) = adopted("flux-driv", &["default/golang-api"]);
    let at = branch.path().join("repo");
    let k = std::fs::read_to_string(
        at.join("clusters/my-cluster/infrastructure/flux-system/kustomization.yaml"),
    )
    .unwrap();
    assert!(
        k.ends_with("- gotk-sync.yaml\n- sluice-outputs.yaml\n"),
        "{k}"
    );
    let settings = std::fs::read_to_string(at.join(".sluice/config.yaml")).unwrap();
    assert!(settings.contains("provider: nginx\n"), "{settings}");
    assert!(
        settings.contains("address: http://flagger-prometheus.ingress-nginx:9090"),
        "{settings}"
    );
    first_render(dir.path(), &["deploy/default/golang-api"], 1);
}

#[test]
fn adopts_yuvmix_writing_the_kustomize_namespace_into_the_moved_files() {
    let (dir, branch) = adopted("flux-yuvmix", &["prod/webapp"]);
    let at = branch.path().join("repo");
    let canary = std::fs::read_to_string(at.join("sources/prod/webapp/canary.yaml")).unwrap();
    assert!(
        canary.contains("  name: webapp\n  namespace: prod\n"),
        "{canary}"
    );
    // What sluice's output writes too (the Service webapp, which it makes select
    // webapp-primary, and the ConfigMap it copies) moves with the sources: Flux's apps
    // Kustomization applying its own copy of the Service would select the canary pods (none
    // at rest) whenever its apply wins. What sluice does not write stays where Flux applies it.
    let k = std::fs::read_to_string(at.join("apps/webapp/kustomization.yaml")).unwrap();
    assert_eq!(
        k.lines().take(2).collect::<Vec<_>>(),
        ["resources:", "  - serviceaccount.yaml"],
        "{k}"
    );
    for moved in ["service.yaml", "cm.yaml"] {
        assert!(!at.join("apps/webapp").join(moved).exists(), "{moved}");
        let text = std::fs::read_to_string(at.join("sources/prod/webapp").join(moved)).unwrap();
        assert!(text.contains("  namespace: prod\n"), "{moved}: {text}");
    }
    builds(&at.join("apps/webapp"));
    first_render(dir.path(), &["deploy/prod/webapp"], 1);
}

/// The layout `sluice adopt` used to leave on yuvmix: Flux's apps Kustomization still applies
/// apps/webapp/service.yaml and cm.yaml, whose objects (Service prod/webapp, ConfigMap
/// prod/vault-agent-config) sluice's output writes too. `validate` names each copy at its
/// line, and the Kustomization that applies it at its own.
#[test]
fn validate_refuses_an_object_the_output_writes_that_a_kustomization_applies_too() {
    let (_dir, branch) = adopted("flux-yuvmix", &["prod/webapp"]);
    let at = branch.path().join("repo");
    let app = at.join("apps/webapp");
    for file in ["service.yaml", "cm.yaml"] {
        let found =
            std::fs::read_to_string(fixture("flux-yuvmix").join("apps/webapp").join(file)).unwrap();
        std::fs::write(app.join(file), found).unwrap();
    }
    let k = std::fs::read_to_string(app.join("kustomization.yaml")).unwrap();
    let listed = if k.contains("- service.yaml") {
        k
    } else {
        k.replacen(
            "resources:\n",
            "resources:\n  - cm.yaml\n  - service.yaml\n",
            1,
        )
    };
    std::fs::write(app.join("kustomization.yaml"), listed).unwrap();
    let (code, out, err) = validate_at(&at);
    assert_eq!(code, 1, "{out}{err}");
    let applier = "Kustomization flux-system/apps (clusters/my-cluster/apps.yaml:15)";
    for (at_line, object) in [
        ("apps/webapp/service.yaml:1: ", "Service prod/webapp "),
        (
            "apps/webapp/cm.yaml:1: ",
            "ConfigMap prod/vault-agent-config ",
        ),
    ] {
        let line = err
            .lines()
            .find(|l| l.contains(at_line))
            .unwrap_or_else(|| panic!("no error at {at_line}: {out}{err}"));
        assert!(
            line.contains(&format!("{object}is applied from this file by {applier}"))
                && line.contains(
                    "the output of canary prod/webapp (deploy/prod/webapp) writes it too"
                ),
            "{line}"
        );
    }
}

#[test]
fn adopts_an_argocd_app_of_apps_with_one_outputs_application() {
    let (dir, branch) = adopted("argocd-driv", &["default/golang-api"]);
    let at = branch.path().join("repo");
    let app = std::fs::read_to_string(at.join("argocd/sluice-outputs.yaml")).unwrap();
    assert!(app.contains("kind: Application\n"), "{app}");
    assert!(app.contains("    path: deploy\n"), "{app}");
    let settings = std::fs::read_to_string(at.join(".sluice/config.yaml")).unwrap();
    assert!(
        settings.contains("sync: {argocd: {application: sluice-outputs, namespace: argocd}}"),
        "{settings}"
    );
    assert!(settings.contains("provider: nginx\n"), "{settings}");
    first_render(dir.path(), &["deploy"], 1);
}

/// A real repo that runs Flagger under Argo CD (its README gives the Application; Flagger was
/// installed by hand, so `--provider` says the mesh): the Application's destination namespace
/// is the canary's, and the runbook deletes the Canary there without its objects.
#[test]
fn adopts_a_real_argocd_repo_whose_flagger_install_is_outside_it() {
    let (dir, branch) = adopted_with(
        "argocd-ixxel",
        &["blue-green/nginx-blue-green"],
        &["--provider", "istio"],
    );
    let at = branch.path().join("repo");
    let settings = std::fs::read_to_string(at.join(".sluice/config.yaml")).unwrap();
    assert!(settings.contains("provider: istio\n"), "{settings}");
    assert!(
        settings.contains("sync: {argocd: {application: sluice-outputs, namespace: argocd}}"),
        "{settings}"
    );
    assert!(!settings.contains("prometheus:"), "{settings}");
    let (code, out, err) = adopt(checkout("argocd-ixxel", &[]).path(), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("pass Flagger's meshProvider as --provider"),
        "{out}"
    );
    assert!(
        out.contains("kubectl -n blue-green delete canary nginx-blue-green --cascade=orphan"),
        "{out}"
    );
    first_render(dir.path(), &["deploy"], 1);
}

/// With `--push --forge`, adopt opens the pushed branch's pull request with the runbook as its
/// body, and writes the same forge into the settings (GitHub's API faked at the HTTP level).
#[test]
fn adopt_opens_the_pull_request_of_the_pushed_branch_fake_github() {
    let fake = ForgeFake::start(Kind::GitHub);
    let dir = checkout("argocd-ixxel", &[]);
    let origin = tempfile::tempdir().unwrap();
    git(origin.path(), &["init", "-q", "--bare"]);
    git(
        dir.path(),
        &["remote", "add", "origin", origin.path().to_str().unwrap()],
    );
    let repo = dir.path().display().to_string();
    let api = fake.api_url();
    let mut args = vec![
        "adopt",
        "--repo",
        repo.as_str(),
        "--provider",
        "istio",
        "--forge",
        "github",
        "--forge-repository",
        "acme/fleet",
        "--forge-api-url",
        api.as_str(),
    ];
    let token = [("SLUICE_FORGE_TOKEN", "t0ken")];

    // Without --push there is no branch on the forge to open a pull request of.
    let (code, out, err) = run_sluice_env(&args, &token);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(
        err.trim(),
        "--forge opens a pull request of the pushed branch: add --push"
    );
    assert_eq!(git(dir.path(), &["branch", "--list", "sluice-adopt"]), "");
    assert_eq!(fake.count(), 0);

    args.push("--push");
    let (code, out, err) = run_sluice_env(&args, &token);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("pushed sluice-adopt to origin\n"), "{out}");
    assert!(out.contains("opened pull request 1 "), "{out}");
    assert_eq!(fake.count(), 1);
    let pr = fake.first();
    assert_eq!(
        (pr.head.as_str(), pr.base.as_str()),
        ("sluice-adopt", "main")
    );
    assert!(
        pr.body
            .contains("kubectl -n blue-green delete canary nginx-blue-green --cascade=orphan"),
        "{}",
        pr.body
    );
    let settings = git(origin.path(), &["show", "sluice-adopt:.sluice/config.yaml"]);
    assert!(
        settings.contains("\nforge: {kind: github, apiUrl: ")
            && settings.contains(&api)
            && settings.contains(", repository: acme/fleet}\n"),
        "{settings}"
    );

    // A bad repository name is the settings parser's refusal, naming the flags.
    let bad = checkout("argocd-ixxel", &[]);
    let repo = bad.path().display().to_string();
    let (code, _, err) = run_sluice_env(
        &[
            "adopt",
            "--repo",
            repo.as_str(),
            "--push",
            "--forge",
            "github",
            "--forge-repository",
            "fleet",
        ],
        &token,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with("--forge github --forge-repository fleet: "),
        "{err}"
    );
}

/// Runs adopt on `dir` and checks it refused with `first` as its first line, wrote nothing.
fn refused(dir: &Path, first: &str) -> String {
    let main = git(dir, &["rev-parse", "main"]);
    let (code, out, err) = adopt(dir, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(err.lines().next(), Some(first), "{err}");
    assert!(
        err.trim_end().ends_with("nothing written") || err.contains("nothing written: fix"),
        "{err}"
    );
    assert_eq!(git(dir, &["branch", "--list", "sluice-adopt"]), "");
    assert_eq!(git(dir, &["rev-parse", "main"]), main);
    err
}

#[test]
fn a_kustomize_patch_on_the_sources_is_refused_at_its_line() {
    let dir = checkout("refuse-gitops-istio-patches", &[]);
    refused(dir.path(), "apps/backend/kustomization.yaml:11: patchesJson6902: kustomize changes what it builds (apps/backend/canary.yaml among them) before it is applied, and sluice reads the files as written. Write the result into the file by hand (kubectl kustomize apps/backend shows it) and remove patchesJson6902, then run adopt again");
}

#[test]
fn sources_outside_the_repo_are_refused_naming_the_kustomization_that_applies_them() {
    let dir = checkout("refuse-gitops-linkerd-outside", &[]);
    let err = refused(dir.path(), "apps/backend/podinfo-canary.yaml:8: spec.targetRef: Deployment backend/podinfo is not in the repo: Kustomization backend/podinfo (apps/backend/podinfo-sync.yaml:15) applies it from https://github.com/stefanprodan/podinfo, outside this repo, and sluice reads its sources from this repo. Copy the workload's manifests into the repo (and stop that Kustomization applying them), then run adopt again");
    assert!(
        err.contains(
            "apps/frontend/podinfo-abtest.yaml:8: spec.targetRef: Deployment frontend/podinfo"
        ),
        "{err}"
    );
}

#[test]
fn a_change_validate_would_refuse_is_not_written() {
    let dir = checkout("refuse-xnok-validate", &[]);
    let err = refused(
        dir.path(),
        "after the change `sluice validate` would refuse the repo:",
    );
    assert!(
        err.contains(
            "sources/podinfo/backend/hpa.yaml:10: spec.scaleTargetRef.name: expected \"backend\""
        ),
        "{err}"
    );
    assert!(
        err.contains("(moved from apps/podinfo/backend/hpa.yaml)"),
        "{err}"
    );
}

const DRIV_APP: &str = "clusters/my-cluster/apps/golang-api";

#[test]
fn a_workload_from_a_helmrelease_chart_is_refused_naming_the_release() {
    let release = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: golang-api\n  namespace: default\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/golang-api\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n";
    let deployment = format!("{DRIV_APP}/deployment.yaml");
    let dir = checkout(
        "flux-driv",
        &[
            (&deployment, ""),
            ("clusters/my-cluster/apps/golang-api/release.yaml", release),
        ],
    );
    refused(dir.path(), "clusters/my-cluster/apps/golang-api/canary.yaml:10: spec.targetRef: Deployment default/golang-api is not in the repo: HelmRelease default/golang-api (clusters/my-cluster/apps/golang-api/release.yaml:1) installs a chart into default, and sluice reads sources from files, not charts. Render the chart into files (helm template) and commit them in place of the HelmRelease, or keep Flagger for this canary");
}

#[test]
fn a_remote_kustomize_base_is_refused_at_its_line() {
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - canary.yaml\n  - deployment.yaml\n  - https://github.com/example/base//deploy?ref=v1\n";
    let dir = checkout(
        "flux-driv",
        &[("clusters/my-cluster/apps/golang-api/kustomization.yaml", k)],
    );
    refused(dir.path(), "clusters/my-cluster/apps/golang-api/kustomization.yaml:6: resources: https://github.com/example/base//deploy?ref=v1 is a remote base of the kustomization that builds clusters/my-cluster/apps/golang-api/canary.yaml: adopt cannot move what it does not hold. Copy the base into the repo, then run adopt again");
}

#[test]
fn generated_names_are_refused_at_their_line() {
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: prod-\nresources:\n  - canary.yaml\n  - deployment.yaml\n";
    let dir = checkout(
        "flux-driv",
        &[("clusters/my-cluster/apps/golang-api/kustomization.yaml", k)],
    );
    refused(dir.path(), "clusters/my-cluster/apps/golang-api/kustomization.yaml:3: namePrefix: kustomize generates the names of what it builds (clusters/my-cluster/apps/golang-api/canary.yaml among them), and sluice reads names as written. Remove namePrefix and write the names into the files by hand (kubectl kustomize clusters/my-cluster/apps/golang-api shows them), then run adopt again");
}

#[test]
fn an_existing_branch_is_never_moved_and_push_sends_the_new_one_to_origin() {
    let dir = checkout("flux-driv", &[]);
    let (code, _, err) = adopt(dir.path(), &["--branch", "to-sluice"]);
    assert_eq!(code, 0, "{err}");
    let written = git(dir.path(), &["rev-parse", "to-sluice"]);
    let (code, _, err) = adopt(dir.path(), &["--branch", "to-sluice"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("branch to-sluice exists: adopt writes a new branch and never moves one"),
        "{err}"
    );
    assert_eq!(git(dir.path(), &["rev-parse", "to-sluice"]), written);

    let origin = tempfile::tempdir().unwrap();
    git(origin.path(), &["init", "-q", "--bare"]);
    git(
        dir.path(),
        &["remote", "add", "origin", origin.path().to_str().unwrap()],
    );
    let (code, out, err) = adopt(dir.path(), &["--push"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pushed sluice-adopt to origin"), "{out}");
    assert!(
        out.contains(&format!(
            "sluice adopt check --repo {}",
            origin.path().display()
        )),
        "{out}"
    );
    assert_eq!(
        git(origin.path(), &["rev-parse", "sluice-adopt"]),
        git(dir.path(), &["rev-parse", "sluice-adopt"])
    );
}

/// A Secret the target's pod template references but git does not hold: Flagger's primary
/// runs with its `-primary` copy, sluice's first render would keep the original name and
/// restart the primary, so adopt says so before anything is merged; with the Secret in the
/// repo there is nothing to say.
#[test]
fn a_secret_the_repo_does_not_hold_is_named_before_the_switch_restarts_the_primary() {
    const DEPLOYMENT: &str = "clusters/my-cluster/apps/golang-api/deployment.yaml";
    let note = "clusters/my-cluster/apps/golang-api/deployment.yaml:1: Secret golang-api-token is referenced by Deployment golang-api's pod template but is not in the repo: Flagger's primary uses its copy golang-api-token-primary";
    let (_, out) = adopt_edited("flux-driv", DEPLOYMENT, PULL_POLICY, WITH_SECRET);
    assert!(out.contains(note), "{out}");
    let text = std::fs::read_to_string(fixture("flux-driv").join(DEPLOYMENT)).unwrap();
    let with_secret = text.replace(PULL_POLICY, WITH_SECRET);
    let secret = "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: golang-api-token\n  namespace: default\nstringData:\n  token: t\n";
    let dir = checkout(
        "flux-driv",
        &[(DEPLOYMENT, &format!("{with_secret}{secret}"))],
    );
    let (code, out, err) = adopt(dir.path(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("golang-api-token is referenced"), "{out}");
}

/// Flux's instructions on a source (`kustomize.toolkit.fluxcd.io/ssa: IfNotPresent` on the
/// driv Deployment and here on its Ingress; the `prune: disabled` adopt's first commit adds)
/// reach nothing sluice renders from it: with `ssa: IfNotPresent` on the canary Deployment or the canary
/// Ingress Flux would never apply a new revision or weight, and with `prune: disabled` the
/// applier of the outputs could not delete what sluice stops writing.
#[test]
fn no_flux_instruction_on_a_source_reaches_what_sluice_renders() {
    let (dir, _) = adopt_edited(
        "flux-driv",
        "clusters/my-cluster/apps/number-generator-ingress.yaml",
        "  annotations:\n",
        "  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\n",
    );
    for (rev, file, key) in [
        (
            "sluice-adopt",
            "sources/default/golang-api/deployment.yaml",
            "kustomize.toolkit.fluxcd.io/ssa: IfNotPresent",
        ),
        (
            "sluice-adopt~1",
            "clusters/my-cluster/apps/golang-api/deployment.yaml",
            "kustomize.toolkit.fluxcd.io/prune: disabled",
        ),
    ] {
        let text = show(dir.path(), rev, file);
        assert!(text.contains(key), "{rev}:{file}: {text}");
    }
    let tmp = render_adopted(dir.path());
    let folder = tmp.path().join("rendered/deploy/default/golang-api");
    let files = every_file_bytes(&folder);
    assert!(files.len() >= 4, "{files:?}");
    for (name, bytes) in files {
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            !text.contains("toolkit.fluxcd.io"),
            "{name} carries a Flux key:\n{text}"
        );
    }
}
