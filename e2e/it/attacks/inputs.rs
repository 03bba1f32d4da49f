//! See `../attacks.rs`.

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
