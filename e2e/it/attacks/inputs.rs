//! Inputs sluice reads from the repo that an attacker sizes or shapes. See `../attacks.rs`.

// Commit messages (the audit helper's): a 60 MB message at the tip of a canary's history.

use std::path::Path;
use std::process::Command;

use serde_json::Value as Json;

use crate::support::audit::{running, web_route};
use crate::support::{git, show};

/// `sluice audit --dir <repo> -o json` under `/usr/bin/time -v`: (exit code, report, peak
/// resident set in KiB).
fn audit_measured(repo: &Path) -> (i32, Json, u64) {
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(env!("CARGO_BIN_EXE_sluice"))
        .args(["audit", "--dir", &repo.display().to_string(), "-o", "json"])
        .env("SLUICE_LOG", "error")
        .output()
        .expect("/usr/bin/time runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    let peak = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {stderr}"));
    (out.status.code().unwrap_or(-1), report, peak)
}

#[test]
fn a_60_mb_commit_message_is_not_read_by_tick_or_audit() {
    let mut w = running();
    let (code, _, baseline) = audit_measured(&w.bare);
    assert_eq!(code, 0);
    // A commit that edits the route and claims to be sluice's at the end of 60 MB.
    let route = web_route(&w);
    let human = w.human();
    git(human, &["pull", "-q", "origin", "main"]);
    let text = format!("{}# edited by hand\n", show(&w.bare, "main", &route));
    std::fs::write(human.join(&route), text).unwrap();
    git(human, &["add", &route]);
    let mut message = String::from("web: more traffic\n\n");
    let filler = "all traffic to the canary, trust this commit's trailers\n";
    while message.len() < 60 << 20 {
        message.push_str(filler);
    }
    message.push_str("\nSluice-Canary: shop/web\n");
    let file = w.dir().join("huge-message");
    std::fs::write(&file, &message).unwrap();
    drop(message);
    git(human, &["commit", "-q", "-F", &file.display().to_string()]);
    git(human, &["push", "-q", "origin", "HEAD:main"]);
    let huge = git(&w.bare, &["rev-parse", "main"]).trim().to_string();
    // The tick finishes: the commit is not sluice's, so the edit is drift and holds.
    let report = w.tick();
    let outcome = &report.outcomes[0];
    assert_eq!(outcome.error, None, "{report:?}");
    assert!(
        outcome.events.iter().any(|e| e.starts_with("Held:")),
        "{report:?}"
    );
    // Audit finishes and reports it without reading it.
    let (code, report, peak) = audit_measured(&w.bare);
    assert_eq!(code, 1, "{report:#}");
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["commit"] == huge.as_str())
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(finding["kind"], "unverifiable", "{report:#}");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .starts_with("message larger than 1 MiB"),
        "{report:#}"
    );
    // 60 MB read once would be 61,440 KiB above the baseline.
    assert!(
        peak < baseline + 20 * 1024,
        "audit peaked at {peak} KiB, {baseline} KiB without the commit"
    );
}

// Odd output folders and a work dir that is someone else's checkout.

mod outputs_and_workdir {
    use std::path::Path;
    use std::process::Command;

    use crate::support::{git, human_clone, seeded_remote};

    /// A route-only canary `name`, its `spec.output` on line 5 when given.
    fn canary(name: &str, output: Option<&str>) -> String {
        let output = output.map_or(String::new(), |o| format!("  output: {o}\n"));
        format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n{output}  routeOnly: {{services: [web-blue, web-green], revision: v1}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1s, stepWeights: [50]}}\n"
        )
    }

    /// stdout and stderr of `cmd`, with its exit code.
    fn output(cmd: &mut Command) -> (i32, String) {
        let out = cmd.output().expect("sluice runs");
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// A remote holding `files`; then `sluice validate apps` in a human's clone of it, and one
    /// `sluice reconcile` of it. Returns the remote (in `tmp`) and both answers.
    fn validate_and_reconcile(
        tmp: &Path,
        files: &[(&str, String)],
    ) -> (std::path::PathBuf, [(i32, String); 2]) {
        let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
        let bare = seeded_remote(tmp, &files);
        let human = human_clone(&bare.display().to_string(), &tmp.join("human"));
        let validate = output(
            Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args(["validate", "apps"])
                .current_dir(&human),
        );
        let reconcile = output(
            Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args(["reconcile", "--repo"])
                .arg(&bare)
                .arg("--workdir")
                .arg(tmp.join("w"))
                .env("SLUICE_LOG", "warn"),
        );
        (bare, [validate, reconcile])
    }

    fn status_files(bare: &Path) -> Vec<String> {
        git(bare, &["ls-tree", "-r", "--name-only", "main"])
            .lines()
            .filter(|f| f.starts_with(".sluice/status/"))
            .map(str::to_string)
            .collect()
    }

    /// An output that names a file (one that is there, one below a file, or a `.yaml` name)
    /// is refused where the output is written, by `validate` and by the loop; the others run.
    #[test]
    fn an_output_that_is_a_file_path_is_refused_at_its_line() {
        let tmp = tempfile::tempdir().unwrap();
        let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\nspec: {}\n";
        let files = [
            ("apps/a.yaml", canary("a", Some("manifests/api.yaml"))),
            ("apps/b.yaml", canary("b", Some("notes.txt/b"))),
            ("apps/c.yaml", canary("c", Some("clusters/c/route.yaml"))),
            ("apps/ok.yaml", canary("ok", Some("clusters/ok"))),
            ("manifests/api.yaml", deployment.to_string()),
            ("notes.txt", "a human's notes\n".to_string()),
        ];
        let (bare, [(checked, text), (reconciled, log)]) =
            validate_and_reconcile(tmp.path(), &files);
        assert_eq!(checked, 1, "{text}");
        assert_eq!(reconciled, 0, "the other canary goes on: {log}");
        for text in [&text, &log] {
            for expected in [
                "apps/a.yaml:5: spec.output: output folder manifests/api.yaml is a file path: manifests/api.yaml is a file",
                "apps/b.yaml:5: spec.output: output folder notes.txt/b is a file path: notes.txt is a file",
                "apps/c.yaml:5: spec.output: output folder clusters/c/route.yaml is a file name",
            ] {
                assert!(text.contains(expected), "{expected}\nin\n{text}");
            }
        }
        assert_eq!(
            status_files(&bare),
            [".sluice/status/shop/ok.yaml"],
            "{log}"
        );
        let api = git(&bare, &["show", "main:manifests/api.yaml"]);
        assert_eq!(api, deployment, "the human's file is untouched");
    }

    /// sluice owns an output folder: a human file in it that is not YAML is named, with what
    /// to do, on the line of the output (or of the canary, when the folder comes from the
    /// settings' pattern). Hidden files are not manifests and pass.
    #[test]
    fn an_output_folder_holding_files_that_are_not_yaml_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let files = [
            ("apps/d.yaml", canary("d", Some("clusters/d"))),
            (
                "clusters/d/README.md",
                "# what this folder is\n".to_string(),
            ),
            // The default folder of a canary without spec.output: clusters/<ns>/<name>.
            ("apps/e.yaml", canary("e", None)),
            ("clusters/shop/e/sub/run.sh", "#!/bin/sh\n".to_string()),
            ("apps/g.yaml", canary("g", Some("clusters/g"))),
            ("clusters/g/.gitkeep", String::new()),
        ];
        let (bare, [(checked, text), (_, log)]) = validate_and_reconcile(tmp.path(), &files);
        assert_eq!(checked, 1, "{text}");
        for text in [&text, &log] {
            for expected in [
                "apps/d.yaml:5: spec.output: output folder clusters/d holds clusters/d/README.md, which is not YAML; sluice owns this folder and writes only its own manifests there. Move clusters/d/README.md out of it",
                "apps/e.yaml:1: spec.output: output folder clusters/shop/e holds clusters/shop/e/sub/run.sh, which is not YAML",
            ] {
                assert!(text.contains(expected), "{expected}\nin\n{text}");
            }
            assert!(!text.contains("apps/g.yaml"), "{text}");
        }
        assert_eq!(status_files(&bare), [".sluice/status/shop/g.yaml"], "{log}");
        let readme = git(&bare, &["show", "main:clusters/d/README.md"]);
        assert_eq!(readme, "# what this folder is\n");
    }

    /// A work dir that is a `git worktree` checkout (its `.git` is a file pointing to another
    /// repository) is refused in one clear sentence, and nothing in it is touched.
    #[test]
    fn a_workdir_whose_git_is_a_file_is_refused_once_and_clearly() {
        let tmp = tempfile::tempdir().unwrap();
        let bare = seeded_remote(tmp.path(), &[("apps/ok.yaml", &canary("ok", None))]);
        let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
        let checkout = tmp.path().join("checkout");
        git(
            &human,
            &["worktree", "add", "-q", &checkout.display().to_string()],
        );
        std::fs::write(checkout.join("work-in-progress.txt"), "not pushed\n").unwrap();
        let before = git(&checkout, &["status", "--porcelain"]);
        for command in ["reconcile", "run"] {
            let (code, text) = output(
                Command::new(env!("CARGO_BIN_EXE_sluice"))
                    .args([command, "--repo"])
                    .arg(&bare)
                    .arg("--workdir")
                    .arg(&checkout)
                    .args(if command == "run" {
                        &["--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0"][..]
                    } else {
                        &[][..]
                    })
                    .env("SLUICE_LOG", "error"),
            );
            assert_ne!(code, 0, "{command}: {text}");
            assert!(
                text.contains("its .git is a file pointing to")
                    && text.contains("this is the checkout of a git worktree or a submodule")
                    && text
                        .contains("pass --workdir (or SLUICE_WORKDIR) an empty or missing folder"),
                "{command}: {text}"
            );
            assert!(!text.contains("os error"), "{command}: {text}");
            assert_eq!(text.matches("its .git is").count(), 1, "said once: {text}");
        }
        assert_eq!(git(&checkout, &["status", "--porcelain"]), before);
        assert!(checkout.join("work-in-progress.txt").exists());
    }
}
