//! Input from the config repo stays inside the repo and bounded, with the real binary: a
//! committed symbolic link to a token file, to a Deployment outside the repo or to `/dev/zero`
//! is refused with an error naming the file, never read.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{git, human_clone, seeded_remote};

const TOKEN: &str = "ghp_the-token-that-must-not-leak";
const SECRET_ENV: &str = "the-secret-env-value-that-must-not-leak";

fn route_only() -> &'static str {
    "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [web-blue, web-green], revision: v1}\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n"
}

/// Commits a symbolic link `file` -> `target` from a human clone and pushes it.
fn commit_link(clone: &Path, file: &str, target: &Path) {
    let path = clone.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, &path).unwrap();
    git(clone, &["add", file]);
    git(clone, &["commit", "-q", "-m", &format!("link {file}")]);
    git(clone, &["push", "-q", "origin", "HEAD:main"]);
}

/// Runs `sluice reconcile` once on `bare`; a read that never ends fails the test instead of
/// hanging it. Returns (exit code, stdout + stderr).
fn reconcile(bare: &Path, workdir: &Path) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["reconcile", "--repo"])
        .arg(bare)
        .arg("--workdir")
        .arg(workdir)
        .env("SLUICE_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sluice");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("reconcile did not finish: a read did not stop");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Every file content of every commit on main of `bare`.
fn everything_committed(bare: &Path) -> String {
    git(bare, &["log", "-p", "--all", "--format=%H"])
}

#[test]
fn a_settings_file_linked_to_a_token_is_refused_and_the_token_never_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let bare = seeded_remote(tmp.path(), &[("apps/web.yaml", route_only())]);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    commit_link(&human, ".sluice/config.yaml", &token_file);

    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("validate")
        .arg(&human)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(TOKEN), "validate printed the token: {text}");
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(".sluice/config.yaml") && text.contains("symbolic link"),
        "{text}"
    );

    let (_, log) = reconcile(&bare, &tmp.path().join("w"));
    assert!(!log.contains(TOKEN), "the log printed the token: {log}");
    assert!(
        log.contains(".sluice/config.yaml") && log.contains("symbolic link"),
        "{log}"
    );
}

#[test]
fn a_source_linked_out_of_the_repo_is_refused_and_nothing_of_it_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside.yaml");
    std::fs::write(
        &outside,
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: web\n        image: web:1\n        env:\n        - {{name: API_KEY, value: {SECRET_ENV}}}\n"),
    )
    .unwrap();
    let canary = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  source: apps/web/deployment.yaml\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n";
    let bare = seeded_remote(tmp.path(), &[("apps/web/canary.yaml", canary)]);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    commit_link(&human, "apps/web/deployment.yaml", &outside);

    let (_, log) = reconcile(&bare, &tmp.path().join("w"));
    assert!(
        !everything_committed(&bare).contains(SECRET_ENV),
        "the secret was committed: {log}"
    );
    assert!(!log.contains(SECRET_ENV), "{log}");
    assert!(
        log.contains("apps/web/deployment.yaml") && log.contains("symbolic link"),
        "{log}"
    );
}

#[test]
fn a_status_file_or_route_linked_to_dev_zero_is_refused_not_read_forever() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &[("apps/web.yaml", route_only())]);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    commit_link(
        &human,
        ".sluice/status/shop/web.yaml",
        Path::new("/dev/zero"),
    );
    commit_link(&human, "apps/web/route.yaml", Path::new("/dev/zero"));

    let (_, log) = reconcile(&bare, &tmp.path().join("w"));
    assert!(
        log.contains(".sluice/status/shop/web.yaml") && log.contains("symbolic link"),
        "{log}"
    );
    assert!(
        log.contains("apps/web/route.yaml") && log.contains("symbolic link"),
        "{log}"
    );
}

fn route_only_at(name: &str, revision: &str, output: Option<&str>) -> String {
    let output = output.map_or(String::new(), |o| format!("  output: {o}\n"));
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n{output}  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1s, stepWeights: [50]}}\n"
    )
}

/// `sluice validate apps` run in the work tree `dir`, so files are named repo-relative.
fn validate(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["validate", "apps"])
        .current_dir(dir)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A running canary keeps its name and its output folder: a file added later that sorts first
/// and claims either is the one refused (at load and by `validate`), and the owner goes on.
#[test]
fn a_newcomer_sorting_first_cannot_take_a_running_canarys_name_or_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(
        tmp.path(),
        &[("apps/web.yaml", &route_only_at("web", "v1", None))],
    );
    let work = tmp.path().join("w");
    let (code, log) = reconcile(&bare, &work);
    assert_eq!(code, 0, "{log}");
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    assert!(human.join(".sluice/status/shop/web.yaml").is_file());
    // The owner changes revision (so it has something to do); two newcomers sort before it.
    std::fs::write(
        human.join("apps/web.yaml"),
        route_only_at("web", "v2", None),
    )
    .unwrap();
    std::fs::write(
        human.join("apps/a-same-name.yaml"),
        route_only_at("web", "v9", Some("clusters/other")),
    )
    .unwrap();
    std::fs::write(
        human.join("apps/a-same-folder.yaml"),
        route_only_at("intruder", "v9", Some("clusters/shop/web")),
    )
    .unwrap();
    git(&human, &["add", "."]);
    git(&human, &["commit", "-q", "-m", "newcomers"]);
    git(&human, &["push", "-q", "origin", "HEAD:main"]);

    let checked = validate(&human);
    let (code, log) = reconcile(&bare, &work);
    for text in [&checked, &log] {
        assert!(
            text.contains("apps/a-same-name.yaml:1: metadata.name: duplicate canary shop/web: already defined at apps/web.yaml:1"),
            "{text}"
        );
        assert!(
            text.contains("apps/a-same-folder.yaml:1: spec.output: output folder clusters/shop/web is already written by canary shop/web (apps/web.yaml:1)"),
            "{text}"
        );
        assert!(
            !text.contains("apps/web.yaml:1: "),
            "the owner is blamed: {text}"
        );
    }
    assert_eq!(code, 0, "{log}");
    // The owner went on with its new revision.
    let status = git(&bare, &["show", "main:.sluice/status/shop/web.yaml"]);
    assert!(status.contains("canaryRevision: v2"), "{status}\n{log}");
}

/// Output folders sluice may not write: git's and sluice's own folders, a folder inside or
/// around another canary's, and a folder that already holds a human's manifests (the
/// kustomization sluice writes there would drop them from the cluster).
#[test]
fn output_folders_that_are_not_sluices_to_write_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let deployment =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\nspec: {}\n";
    let files = [
        ("apps/a.yaml", route_only_at("a", "v1", Some(".sluice/out"))),
        (
            "apps/b.yaml",
            route_only_at("b", "v1", Some(".github/workflows")),
        ),
        (
            "apps/c.yaml",
            route_only_at("c", "v1", Some("deploy/.git/hooks")),
        ),
        (
            "apps/d.yaml",
            route_only_at("d", "v1", Some("clusters/shop")),
        ),
        (
            "apps/e.yaml",
            route_only_at("e", "v1", Some("clusters/shop/e")),
        ),
        (
            "apps/f.yaml",
            route_only_at("f", "v1", Some("manifests/api")),
        ),
        ("manifests/api/deployment.yaml", deployment.to_string()),
        ("apps/g.yaml", route_only_at("g", "v1", Some("clusters/g"))),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let bare = seeded_remote(tmp.path(), &files);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    let checked = validate(&human);
    let (_, log) = reconcile(&bare, &tmp.path().join("w"));
    for text in [&checked, &log] {
        for expected in [
            "apps/a.yaml:1: spec.output: output folder .sluice/out is inside .sluice/",
            "apps/b.yaml:1: spec.output: output folder .github/workflows is inside .github/",
            "apps/c.yaml:1: spec.output: output folder deploy/.git/hooks is inside .git/",
            "apps/e.yaml:1: spec.output: output folder clusters/shop/e is inside the output folder clusters/shop of canary shop/d (apps/d.yaml:1)",
            "apps/f.yaml:1: spec.output: output folder manifests/api already holds manifests/api/deployment.yaml, which sluice did not generate",
        ] {
            assert!(text.contains(expected), "{expected}\nin\n{text}");
        }
    }
    // Only the canaries with a folder of their own ran.
    let tree = git(&bare, &["ls-tree", "-r", "--name-only", "main"]);
    let written: Vec<&str> = tree
        .lines()
        .filter(|f| f.starts_with(".sluice/status/"))
        .collect();
    assert_eq!(
        written,
        [".sluice/status/shop/d.yaml", ".sluice/status/shop/g.yaml"],
        "{log}"
    );
    assert!(!tree.contains(".github/") && !tree.contains("manifests/api/kustomization.yaml"));
}
