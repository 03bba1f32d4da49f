//! docs/install.md as a newcomer runs it: every command of its `sh` blocks that can run
//! without a cluster runs here. The `kubectl kustomize` lines build; the Secret commands run
//! with `--dry-run=client` and give Secrets that validate and carry the keys the install
//! reads; the first-canary block runs in bash against a local bare remote standing in for the
//! config repo (its URL replaced), then one `sluice reconcile` stands in for the daemon's
//! tick, and the watch block shows the canary. The other lines need a cluster or the network
//! and must begin with one of the prefixes listed here, so a new command is either run or
//! named.

use std::path::Path;
use std::process::Command;

use crate::support::{read_repo_file, repo_root, repo_yaml, run_ok, seeded_remote, Schemas};

/// The config repo's URL in the page, replaced by the local remote's path.
const REPO_URL: &str = "https://github.com/example-org/fleet.git";

/// Lines that need a cluster, Flux's or Argo CD's CLI against one, or the network.
const CLUSTER_ONLY: &[&str] = &[
    "flux create secret git ",
    "flux reconcile ",
    "flux get ",
    "kubectl apply ",
    "kubectl -n sluice-system rollout status ",
    "kubectl -n sluice-system port-forward ",
    "kubectl -n sluice-system logs ",
    "cosign verify ",
];

/// The page's `sh` blocks, in order.
fn sh_blocks(page: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in page.lines() {
        match &mut current {
            None if line == "```sh" => current = Some(String::new()),
            Some(block) if line == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// A block's commands: continuation lines joined, heredoc bodies left out.
fn commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut heredoc_end: Option<&str> = None;
    for line in block.lines() {
        if let Some(end) = heredoc_end {
            if line == end {
                heredoc_end = None;
            }
            continue;
        }
        if line.contains("<<'EOF'") {
            heredoc_end = Some("EOF");
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head.trim_start());
            continue;
        }
        pending.push_str(line.trim_start());
        out.push(std::mem::take(&mut pending));
    }
    out
}

/// Runs `kubectl` with `args`; `None` when kubectl is not installed.
fn kubectl(args: &[&str]) -> Option<std::process::Output> {
    Command::new("kubectl")
        .args(args)
        .current_dir(repo_root())
        .output()
        .ok()
}

/// `bash -euo pipefail -c script` in `dir`, with this build's sluice first on PATH.
fn bash(dir: &Path, script: &str) -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice"))
        .parent()
        .expect("the binary's folder");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = run_ok(
        Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(dir)
            .env("PATH", path)
            .env("SLUICE_LOG", "error")
            .env("GIT_AUTHOR_NAME", "human")
            .env("GIT_AUTHOR_EMAIL", "human@example.com")
            .env("GIT_COMMITTER_NAME", "human")
            .env("GIT_COMMITTER_EMAIL", "human@example.com"),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The keys the install's Deployment reads from the Secret `name`.
fn keys_read_from(name: &str) -> Vec<String> {
    let d = repo_yaml("examples/install/deployment.yaml");
    let mut keys: Vec<String> = d["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter(|e| e["valueFrom"]["secretKeyRef"]["name"] == name)
        .map(|e| {
            e["valueFrom"]["secretKeyRef"]["key"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    keys.sort();
    keys
}

#[test]
fn every_command_of_the_install_page_runs_or_needs_a_cluster() {
    let page = read_repo_file("docs/install.md");
    let blocks = sh_blocks(&page);
    assert!(blocks.len() >= 8, "{blocks:#?}");
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &[("README.md", "# fleet\n")]);
    let have_kubectl = kubectl(&["version", "--client"]).is_some();
    let mut ran = Vec::new();
    let mut first_canary = false;
    for block in &blocks {
        if block.starts_with("git clone ") {
            // The first canary: written, checked, pushed; then the daemon's tick.
            let script = block.replace(REPO_URL, &bare.display().to_string());
            let out = bash(tmp.path(), &script);
            assert!(
                out.contains("podinfo"),
                "validate and plan name the canary:\n{out}"
            );
            run_ok(
                Command::new(env!("CARGO_BIN_EXE_sluice"))
                    .args(["reconcile", "--repo", &bare.display().to_string()])
                    .args(["--workdir", &tmp.path().join("w").display().to_string()])
                    .env("SLUICE_LOG", "error"),
            );
            first_canary = true;
            ran.extend(commands(block));
            continue;
        }
        if block.starts_with("git pull") {
            assert!(first_canary, "the watch block comes after the first canary");
            let out = bash(&tmp.path().join("fleet"), block);
            assert!(
                out.lines()
                    .any(|l| l.contains("podinfo") && l.contains("Initialized")),
                "{out}"
            );
            let tree = crate::support::git(&bare, &["ls-tree", "-r", "--name-only", "main"]);
            assert!(tree.contains("deploy/prod/podinfo/"), "{tree}");
            ran.extend(commands(block));
            continue;
        }
        for command in commands(block) {
            if CLUSTER_ONLY.iter().any(|p| command.starts_with(p)) {
                continue;
            }
            let words: Vec<&str> = command.split_whitespace().collect();
            match words.as_slice() {
                ["kubectl", "kustomize", dir] => {
                    if have_kubectl {
                        let out = kubectl(&["kustomize", dir]).unwrap();
                        assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
                    }
                }
                ["kubectl", "create", "namespace", "sluice-system"] => {
                    if have_kubectl {
                        let out = kubectl(&[&words[1..], &["--dry-run=client", "-o", "json"]].concat()).unwrap();
                        assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
                    }
                }
                ["kubectl", "-n", "sluice-system", "create", "secret", "generic", name, ..] => {
                    if !have_kubectl {
                        continue;
                    }
                    let out = kubectl(&[&words[1..], &["--dry-run=client", "-o", "json"]].concat()).unwrap();
                    assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
                    let mut secret: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                    // kubectl's client-side dry run writes `creationTimestamp: null`, which the
                    // API server replaces; the rest is what would be sent.
                    secret["metadata"].as_object_mut().unwrap().remove("creationTimestamp");
                    Schemas::default().assert_valid(&secret, &command);
                    let mut keys: Vec<String> = secret["data"].as_object().unwrap().keys().cloned().collect();
                    keys.sort();
                    assert_eq!(keys, keys_read_from(name), "{command}: the keys the install reads");
                }
                _ => panic!(
                    "docs/install.md: {command:?} is neither run by this test nor listed in CLUSTER_ONLY"
                ),
            }
            ran.push(command);
        }
    }
    assert!(first_canary, "the page adds a first canary");
    for must in [
        "sluice validate .",
        "sluice plan .",
        "sluice status --dir .",
        "kubectl kustomize examples/install",
    ] {
        assert!(ran.iter().any(|c| c == must), "{must} not run: {ran:#?}");
    }
}
