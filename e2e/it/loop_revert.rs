//! A canary spec deleted from the repo, through the loop (`loop_support`): with
//! `revertOnDeletion: true` the next tick commits what Flagger's finalizer restores (the
//! target at the primary's spec, the apex Service selecting its pods) and removes the status
//! file; without it the output is left as it is and `sluice status` / `sluice validate`
//! report it orphaned.

use std::path::Path;

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::canary::podinfo;
use crate::support::rollout::{
    kustomize_builds, show, World, CANARY_FILE, FAILING, OUTPUT, STATUS_FILE, STEPS,
};
use crate::support::{git, Schemas};

/// An SMI (osm) Flagger canary of `prod/podinfo`, with `extra` under `spec:`.
fn canary(extra: &str, analysis: &str) -> String {
    podinfo().provider("osm").spec(extra).yaml(analysis)
}

/// The files of `folder` on main, by name.
fn folder_at_main(bare: &Path, folder: &str) -> Vec<String> {
    git(bare, &["ls-tree", "--name-only", &format!("main:{folder}")])
        .lines()
        .map(str::to_string)
        .collect()
}

fn docs(text: &str) -> Vec<Json> {
    serde_saphyr::from_multiple(text).unwrap()
}

fn trailer(bare: &Path, key: &str) -> String {
    git(
        bare,
        &[
            "log",
            "-1",
            &format!("--format=%(trailers:key={key},valueonly,separator=)"),
            "main",
        ],
    )
    .trim()
    .to_string()
}

#[test]
fn deleting_a_canary_with_revert_on_deletion_restores_the_target_at_the_primarys_spec() {
    let mut w = World::with_files(&canary("  revertOnDeletion: true\n", FAILING), &[]);
    w.until(Phase::Initialized);
    let recorded = show(&w.bare, "main", STATUS_FILE);
    assert!(
        recorded.contains("revertOnDeletion: true")
            && recorded.contains(&format!("output: {OUTPUT}")),
        "the status file records what a deletion needs: {recorded}"
    );
    // 6.7.1 fails its checks and is rolled back: the source holds it, the primary 6.7.0.
    w.new_revision("6.7.1");
    w.until(Phase::Failed);
    w.human_removes(CANARY_FILE, "podinfo: no more canary");
    let report = w.tick();
    assert_eq!(report.commits, 1, "{report:?}");
    let outcome = &report.outcomes[0];
    assert_eq!(outcome.id, "prod/podinfo");
    assert_eq!(outcome.error, None);
    assert!(outcome
        .committed
        .as_deref()
        .unwrap()
        .contains("revertOnDeletion"));

    assert_eq!(
        folder_at_main(&w.bare, OUTPUT),
        ["kustomization.yaml", "podinfo.yaml", "services.yaml"],
        "primary, canary and route leave the output"
    );
    let status = git(
        &w.bare,
        &["ls-tree", "-r", "--name-only", "main", ".sluice/status"],
    );
    assert_eq!(status.trim(), "", "the status file is removed");
    assert_eq!(trailer(&w.bare, "Sluice-Canary"), "prod/podinfo");
    assert_eq!(trailer(&w.bare, "Sluice-Phase"), "Terminated");
    assert_eq!(
        trailer(&w.bare, "Sluice-Reason"),
        "spec deleted with revertOnDeletion: true"
    );
    let body = git(&w.bare, &["log", "-1", "--format=%B", "main"]);
    assert!(body.contains("never promoted"), "{body}");

    let mut schemas = Schemas::default();
    let workload = docs(&show(&w.bare, "main", &format!("{OUTPUT}/podinfo.yaml")));
    let services = docs(&show(&w.bare, "main", &format!("{OUTPUT}/services.yaml")));
    for doc in workload.iter().chain(&services) {
        let errors = schemas.errors(doc);
        assert!(errors.is_empty(), "{doc}: {errors:?}");
    }
    let names: Vec<(&str, &str)> = workload
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("Deployment", "podinfo"),
            ("ConfigMap", "podinfo-env"),
            ("ConfigMap", "podinfo-files")
        ],
        "the target and its configs, under the user's names"
    );
    let d = &workload[0];
    assert_eq!(d["spec"]["replicas"], 3, "the primary's replicas");
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "podinfo");
    assert_eq!(
        d["spec"]["template"]["metadata"]["labels"]["app"],
        "podinfo"
    );
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"], "ghcr.io/stefanprodan/podinfo:6.7.0",
        "the primary's image, not the rolled-back source's"
    );
    assert_eq!(
        pod["containers"][0]["envFrom"][0]["configMapRef"]["name"],
        "podinfo-env"
    );
    assert_eq!(pod["volumes"][0]["configMap"]["name"], "podinfo-files");
    assert_eq!(
        pod["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"], "podinfo-token",
        "a Secret sluice never copied keeps its name"
    );
    assert_eq!(services.len(), 1, "only the apex Service");
    assert_eq!(services[0]["metadata"]["name"], "podinfo");
    assert_eq!(
        services[0]["spec"]["selector"],
        serde_json::json!({"app": "podinfo"}),
        "the apex selects the target's pods"
    );
    let kustomization = show(&w.bare, "main", &format!("{OUTPUT}/kustomization.yaml"));
    assert!(
        kustomization.starts_with("# Restored by sluice"),
        "{kustomization}"
    );
    kustomize_builds(&w.bare, OUTPUT);

    // Restored files are the user's now: nothing more to do, ever.
    let again = w.tick();
    assert_eq!(again.commits, 0, "{again:?}");
    assert!(again.outcomes.is_empty(), "{again:?}");
}

#[test]
fn deleting_a_canary_without_revert_on_deletion_leaves_its_output_and_reports_it_orphaned() {
    let mut w = World::with_files(&canary("", STEPS), &[]);
    w.until(Phase::Initialized);
    let tree = |w: &World| git(&w.bare, &["rev-parse", &format!("main:{OUTPUT}")]);
    let before = tree(&w);
    w.human_removes(CANARY_FILE, "podinfo: no more canary");
    let report = w.tick();
    assert_eq!(report.commits, 0, "{report:?}");
    assert_eq!(
        tree(&w),
        before,
        "the output is left as it is, as Flagger leaves it"
    );
    assert!(show(&w.bare, "main", STATUS_FILE).contains("phase: Initialized"));

    let bare = w.bare.display().to_string();
    let out = crate::support::run_ok(
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["status", "--dir", &bare, "--output", "json"]),
    );
    let rows: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["name"], "podinfo");
    assert_eq!(rows[0]["phase"], "Orphaned");
    let message = rows[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("delete {OUTPUT} and {STATUS_FILE}")),
        "{message}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let clone = tmp.path().join("clone");
    git(
        tmp.path(),
        &["clone", "-q", &bare, &clone.display().to_string()],
    );
    // Its only canary deleted, the repo holds none: --allow-empty says that is meant.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["validate", "--allow-empty", "."])
        .current_dir(&clone)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "orphaned output is a warning: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "warning: {OUTPUT}: canary prod/podinfo is orphaned: its spec was deleted without revertOnDeletion"
        )),
        "{stderr}"
    );
}

#[test]
fn revert_on_deletion_set_at_rest_is_recorded_so_the_deletion_reverts() {
    let mut w = World::with_files(&canary("", STEPS), &[]);
    w.until(Phase::Initialized);
    w.human_writes(
        CANARY_FILE,
        &canary("  revertOnDeletion: true\n", STEPS),
        "podinfo: revert on deletion",
    );
    let report = w.tick();
    assert_eq!(report.commits, 1, "{report:?}");
    assert_eq!(
        report.outcomes[0].committed.as_deref(),
        Some("podinfo: revertOnDeletion recorded")
    );
    assert!(show(&w.bare, "main", STATUS_FILE).contains("revertOnDeletion: true"));
    assert_eq!(w.tick().commits, 0, "recorded once");
    w.human_removes(CANARY_FILE, "podinfo: no more canary");
    let report = w.tick();
    assert_eq!(report.commits, 1, "{report:?}");
    assert_eq!(
        folder_at_main(&w.bare, OUTPUT),
        ["kustomization.yaml", "podinfo.yaml", "services.yaml"]
    );
    let body = git(&w.bare, &["log", "-1", "--format=%B", "main"]);
    assert!(
        !body.contains("never promoted"),
        "nothing was under analysis: {body}"
    );
    kustomize_builds(&w.bare, OUTPUT);
}
