//! Signing as the container image runs sluice: the real binary with a `PATH` that holds only
//! `git` (the runtime stage has no `ssh-keygen`) and an empty `HOME` (an emptyDir).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{git, keygen, seeded_remote};

const ROUTE_ONLY_WEB: &str = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [web-blue, web-green], revision: v1}\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n";

/// `sluice reconcile` once over `bare`, signing with `key`, as the image runs it.
fn reconcile_as_in_the_image(tmp: &Path, bare: &Path, key: &Path) -> Output {
    let bin = tmp.join("bin");
    let home = tmp.join("home");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let git_path = which("git");
    let _ = std::os::unix::fs::symlink(git_path, bin.join("git"));
    assert!(
        !bin.join("ssh-keygen").exists(),
        "the image PATH must not hold ssh-keygen"
    );
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["reconcile", "--repo", &bare.display().to_string()])
        .args(["--workdir", &tmp.join("w").display().to_string()])
        .arg("--signing-ssh-key")
        .arg(key)
        .env_clear()
        .env("PATH", &bin)
        .env("HOME", &home)
        .env("SLUICE_LOG", "error")
        .output()
        .expect("run sluice")
}

fn which(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

/// Under `root`: a remote holding the route-only web canary, its main before any tick, and a new
/// `key_type` key in the file `name` with its public key.
fn remote_and_key(root: &Path, name: &str, key_type: &str) -> (PathBuf, String, PathBuf, String) {
    let bare = seeded_remote(root, &[("apps/web.yaml", ROUTE_ONLY_WEB)]);
    let before = git(&bare, &["rev-parse", "main"]);
    let key = root.join(name);
    let public = keygen(&key, key_type);
    (bare, before, key, public)
}

#[test]
fn image_signs_commits_in_process_that_git_verify_commit_accepts() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, before, key, public) = remote_and_key(tmp.path(), "signing_key", "ed25519");
    let out = reconcile_as_in_the_image(tmp.path(), &bare, &key);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = git(&bare, &["rev-parse", "main"]);
    assert_ne!(head.trim(), before.trim(), "the tick committed");

    let allowed = tmp.path().join("allowed_signers");
    std::fs::write(&allowed, format!("sluice@localhost {public}")).unwrap();
    let verify = Command::new("git")
        .current_dir(&bare)
        .args(["-c", "gpg.format=ssh", "-c"])
        .arg(format!("gpg.ssh.allowedSignersFile={}", allowed.display()))
        .args(["verify-commit", "-v", "main"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "verify-commit: {stderr}");
    assert!(stderr.contains("Good \"git\" signature"), "{stderr}");
}

#[test]
fn image_refuses_at_start_a_signing_key_that_needs_the_missing_ssh_keygen() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, before, key, _) = remote_and_key(tmp.path(), "rsa_key", "rsa");
    let out = reconcile_as_in_the_image(tmp.path(), &bare, &key);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("signing with {}", key.display()))
            && stderr.contains("key type ssh-rsa")
            && stderr.contains("ssh-keygen, which signs other keys, is not on PATH"),
        "{stderr}"
    );
    assert_eq!(
        git(&bare, &["rev-parse", "main"]),
        before,
        "nothing committed"
    );
    assert!(!tmp.path().join("w").exists(), "refused before cloning");
}
