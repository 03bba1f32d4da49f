//! What the adoption tests share: the podinfo repo of `adopt_hold.rs` and `adopt_check.rs` (a
//! Flagger canary with its source, under `adoption.hold`), checkouts of the real fixture repos
//! and `sluice adopt` on them (`adopt.rs`, `adopt_fixture_render.rs`), and the comparison of
//! rendered objects with Flagger's (`adopt_first_render.rs`, `adopt_fixture_render.rs`).

use super::canary::podinfo;
use super::manifests::{CONFIGS, DEPLOYMENT};
use super::rollout::CANARY_FILE;
use super::{git, reconcile, repo_root, run_sluice, seeded_remote};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

pub(crate) const HOLD: &str =
    "apiVersion: sluice.dev/v1alpha1\nkind: Config\nadoption:\n  hold: true\n";
pub(crate) const STATUS: &str = ".sluice/status/prod/podinfo.yaml";
pub(crate) const SOURCE: &str = "apps/podinfo/deployment.yaml";

/// The podinfo repo under the hold in `tmp`: its bare remote, and where `reconcile` clones it.
pub(crate) fn held_world(tmp: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let canary = podinfo().yaml("    stepWeight: 20\n    maxWeight: 60");
    let bare = seeded_remote(
        tmp,
        &[
            (SOURCE, DEPLOYMENT),
            ("apps/podinfo/configs.yaml", CONFIGS),
            (CANARY_FILE, &canary),
            (".sluice/config.yaml", HOLD),
        ],
    );
    (bare, tmp.join("w"))
}

pub(crate) fn fixture(name: &str) -> PathBuf {
    repo_root()
        .join("e2e/fixtures/adopt")
        .join(name)
        .join("repo")
}

/// A checkout on `main` whose one commit holds the fixture `name`, with `edit` applied first
/// (path, new text; an empty text removes the file).
pub(crate) fn checkout(name: &str, edit: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in walkdir::WalkDir::new(fixture(name)) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(fixture(name)).unwrap();
        let to = dir.path().join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
    for (path, text) in edit {
        let at = dir.path().join(path);
        if text.is_empty() {
            std::fs::remove_file(&at).unwrap();
        } else {
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(&at, text).unwrap();
        }
    }
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "the repo as found"]);
    dir
}

pub(crate) fn adopt(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let repo = dir.display().to_string();
    let mut all = vec!["adopt", "--repo", repo.as_str()];
    all.extend_from_slice(args);
    run_sluice(&all)
}

/// sluice's first render on the adopted branch `sluice-adopt` of `dir`: a bare clone,
/// `sluice reconcile` on that branch, and a clone of the result (in `rendered` of the returned
/// directory).
pub(crate) fn render_adopted(dir: &Path) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("config.git");
    git(dir, &["clone", "-q", "--bare", ".", bare.to_str().unwrap()]);
    let env = [("SLUICE_BRANCH".to_string(), "sluice-adopt".to_string())];
    reconcile(&bare, &tmp.path().join("workdir"), &env);
    let rendered = tmp.path().join("rendered");
    git(
        dir,
        &[
            "clone",
            "-q",
            "-b",
            "sluice-adopt",
            bare.to_str().unwrap(),
            rendered.to_str().unwrap(),
        ],
    );
    tmp
}

/// Fields Flagger sets at runtime (or the API server does), not in git.
pub(crate) fn scrub(doc: &mut Json) {
    if let Some(meta) = doc["metadata"].as_object_mut() {
        for key in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "ownerReferences",
        ] {
            meta.remove(key);
        }
    }
    if let Some(doc) = doc.as_object_mut() {
        doc.remove("status");
    }
    if let Some(a) = doc["spec"]["template"]["metadata"]["annotations"].as_object_mut() {
        a.remove("flagger-id");
    }
}

/// The objects of `text` (YAML documents), scrubbed, by `Kind/name`.
pub(crate) fn objects(text: &str) -> std::collections::BTreeMap<String, Json> {
    serde_saphyr::from_multiple::<Json>(text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .map(|mut d| {
            scrub(&mut d);
            let key = format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            );
            (key, d)
        })
        .collect()
}

/// Every difference between `want` (Flagger's) and `got` (sluice's), as paths.
pub(crate) fn differences(want: &Json, got: &Json, at: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Json::Object(w), Json::Object(g)) => {
            for key in w.keys().chain(g.keys().filter(|k| !w.contains_key(*k))) {
                let (a, b) = (
                    w.get(key).unwrap_or(&Json::Null),
                    g.get(key).unwrap_or(&Json::Null),
                );
                differences(a, b, &format!("{at}.{key}"), out);
            }
        }
        (Json::Array(w), Json::Array(g)) if w.len() == g.len() => {
            for (i, (a, b)) in w.iter().zip(g).enumerate() {
                differences(a, b, &format!("{at}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{at}: Flagger {a}, sluice {b}")),
    }
}

/// `sluice adopt` on the fixture `name` with `from` replaced by `to` in its `file` (which must
/// hold it): the checkout, with the branch written, and adopt's output.
pub(crate) fn adopt_edited(
    name: &str,
    file: &str,
    from: &str,
    to: &str,
) -> (tempfile::TempDir, String) {
    let text = std::fs::read_to_string(fixture(name).join(file)).unwrap();
    let edited = text.replace(from, to);
    assert_ne!(edited, text, "{file} holds no {from:?}");
    let dir = checkout(name, &[(file, &edited)]);
    let (code, out, err) = adopt(dir.path(), &[]);
    assert_eq!(code, 0, "{out}{err}");
    (dir, out)
}

/// The driv Deployment's container line a Secret reference goes after.
pub(crate) const PULL_POLICY: &str = "          imagePullPolicy: IfNotPresent\n";
/// [`PULL_POLICY`] followed by an `envFrom` of the Secret `golang-api-token`.
pub(crate) const WITH_SECRET: &str = "          imagePullPolicy: IfNotPresent\n          envFrom:\n            - secretRef:\n                name: golang-api-token\n";
