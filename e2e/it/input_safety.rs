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
