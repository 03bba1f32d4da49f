//! The real `sluice` binary: `validate` and `plan` as a user runs them.

use std::process::Command;

fn sluice(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run sluice");
    crate::support::outcome(&out)
}

#[test]
fn validate_accepts_the_examples() {
    let (code, out, err) = sluice(&["validate", "examples"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn validate_reports_every_error_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: podinfo}\nspec:\n  provider: cilium\n  targetRef: {kind: Deployment, name: podinfo}\n  service: {port: 9898}\n  analysis:\n    stepWeight: 120\n",
    )
    .unwrap();
    let (code, _, err) = sluice(&["validate", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("bad.yaml:5: spec.provider:"), "{err}");
    assert!(
        err.contains("bad.yaml:9: spec.analysis.stepWeight: expected 1..=100, found 120"),
        "{err}"
    );
}

#[test]
fn plan_json_reproduces_flagger_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("stepWeight: 20\n    maxWeight: 50", vec![20, 40, 60]),
        ("stepWeight: 50\n    maxWeight: 100", vec![50, 100]),
        ("stepWeights: [1, 2, 10, 80]", vec![1, 2, 10, 80]),
        ("stepWeights: [1, 2, 10, 200]", vec![1, 2, 10, 100]),
    ];
    for (i, (schedule, expected)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("c{i}.yaml"));
        std::fs::write(
            &file,
            format!("apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {{name: podinfo}}\nspec:\n  provider: osm\n  targetRef: {{kind: Deployment, name: podinfo}}\n  service: {{port: 9898}}\n  analysis:\n    interval: 1m\n    stepWeightPromotion: 5\n    {schedule}\n"),
        )
        .unwrap();
        let (code, out, err) = sluice(&["plan", file.to_str().unwrap(), "--output", "json"]);
        assert_eq!(code, 0, "{err}");
        let plans: serde_json::Value = serde_json::from_str(&out).unwrap();
        let weights: Vec<u64> = plans[0]["canaryWeights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let expected: Vec<u64> = expected.iter().map(|&w| w as u64).collect();
        assert_eq!(weights, expected, "{schedule}");
        assert_eq!(plans[0]["strategy"], "canary");
        let last = *expected.last().unwrap();
        let promo: Vec<u64> = plans[0]["promotionPrimaryWeights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let mut want = Vec::new();
        let mut p = 100 - last;
        while p < 100 {
            p = (p + 5).min(100);
            want.push(p);
        }
        assert_eq!(promo, want);
    }
}

#[test]
fn plan_shows_native_rules_and_approvals() {
    let (code, out, err) = sluice(&["plan", "examples/native/canary.yaml", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let plans: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plans[0]["canaryWeights"], serde_json::json!([20, 50, 80]));
    assert_eq!(
        plans[0]["approvals"],
        serde_json::json!(["before promotion"])
    );
    // 30 s to start + 60 s + 90 s pauses + one interval before promotion + 2 promotion
    // steps (route-only: the new service goes 80 -> 90 -> 100) + finalisation, at 30 s each.
    assert_eq!(
        plans[0]["minDurationSeconds"],
        30 + 60 + 90 + 30 + 2 * 30 + 30
    );
    assert_eq!(
        plans[0]["promotionPrimaryWeights"],
        serde_json::json!([90, 100])
    );
}

#[test]
fn native_step_weight_never_exceeds_max() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web}\nspec:\n  routeOnly: {services: [a, b], revision: '1'}\n  service: {port: 80}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {stepWeight: 20, maxWeight: 50}\n").unwrap();
    let (code, out, err) = sluice(&["plan", file.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let plans: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plans[0]["canaryWeights"], serde_json::json!([20, 40, 50]));
}

#[test]
fn logs_written_to_a_file_carry_no_colour_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = crate::support::seeded_remote(
        tmp.path(),
        &[(
            "apps/web.yaml",
            "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [web-blue, web-green], revision: v1}\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n",
        )],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "reconcile",
            "--repo",
            &bare.display().to_string(),
            "--workdir",
            &tmp.path().join("w").display().to_string(),
        ])
        .env("SLUICE_LOG", "info")
        .output()
        .expect("run sluice");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Initialization done"),
        "the tick logged: {err}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "escape codes in a log file: {err:?}"
    );
}

const ROUTE_ONLY_WEB: &str = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [web-blue, web-green], revision: v1}\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n";

/// `sluice reconcile` once against a fresh bare remote holding the route-only canary.
fn reconciled_remote(tmp: &std::path::Path) -> std::path::PathBuf {
    let bare = crate::support::seeded_remote(tmp, &[("apps/web.yaml", ROUTE_ONLY_WEB)]);
    crate::support::run_ok(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["reconcile", "--repo", &bare.display().to_string()])
            .args(["--workdir", &tmp.join("w").display().to_string()])
            .env("SLUICE_LOG", "error"),
    );
    bare
}

#[test]
fn status_of_a_bare_repo_reads_the_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = reconciled_remote(tmp.path());
    let dir = bare.display().to_string();
    let (code, out, err) = sluice(&["status", "--dir", &dir, "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows[0]["namespace"], "shop", "{out}");
    assert_eq!(rows[0]["name"], "web");
    assert_eq!(rows[0]["phase"], "Initialized");
    let (code, table, err) = sluice(&["status", "--dir", &dir]);
    assert_eq!(code, 0, "{err}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("web") && l.contains("Initialized")),
        "{table}"
    );
    let (code, _, err) = sluice(&["status", "--dir", &dir, "--branch", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read branch nope"), "{err}");
}

/// `--config` names the settings file read: its errors name that file, not the repo's
/// `.sluice/config.yaml`.
#[test]
fn validate_with_config_names_the_file_it_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".sluice")).unwrap();
    std::fs::write(
        dir.path().join(".sluice/config.yaml"),
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprovider: osm\n",
    )
    .unwrap();
    let other = dir.path().join("other.yaml");
    std::fs::write(
        &other,
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprovider: cilium\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    std::fs::write(
        dir.path().join("apps/c.yaml"),
        "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: podinfo}\nspec:\n  targetRef: {kind: Deployment, name: podinfo}\n  service: {port: 9898}\n  analysis: {stepWeight: 10}\n",
    )
    .unwrap();
    let (code, _, err) = sluice(&[
        "validate",
        "--config",
        other.to_str().unwrap(),
        dir.path().join("apps").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("other.yaml:3: provider: sluice does not route provider \"cilium\""),
        "{err}"
    );
    assert!(!err.contains("config.yaml"), "{err}");
}

/// A broken settings file: exit 1, its error first, and no "N canaries valid" line, since the
/// canaries were only checked against default settings, not the ones the loop will read.
#[test]
fn validate_with_a_broken_config_claims_no_canary_valid() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("broken.yaml");
    std::fs::write(
        &config,
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprovider: [osm\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    std::fs::write(
        dir.path().join("apps/c.yaml"),
        "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: podinfo}\nspec:\n  provider: osm\n  targetRef: {kind: Deployment, name: podinfo}\n  service: {port: 9898}\n  analysis: {stepWeight: 10}\n",
    )
    .unwrap();
    let (code, out, err) = sluice(&[
        "validate",
        "--config",
        config.to_str().unwrap(),
        dir.path().join("apps").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(first.contains("broken.yaml:"), "{err}");
    assert!(
        !out.contains("valid") && !err.contains("canaries valid"),
        "{out}{err}"
    );
    assert!(
        err.contains("checked against default settings only and none is reported valid"),
        "{err}"
    );
}

#[test]
fn validate_refuses_what_would_fail_at_runtime() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".sluice")).unwrap();
    std::fs::write(
        dir.path().join(".sluice/config.yaml"),
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nauthor:\n  name: \"Release <Bot>\"\n  email: bot@example.com\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    std::fs::write(
        dir.path().join("apps/web.yaml"),
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [web-blue, web-green], revision: v1}\n  output: .git/hooks\n  service: {port: 8080}\n  route:\n    apiVersion: gateway.networking.k8s.io/v1\n    kind: HTTPRoute\n    parentRefs: [{name: gw}]\n    hostnames: [\"web.example.com\\r\\nx-injected: 1\"]\n  analysis: {interval: 1s, stepWeights: [50]}\n",
    )
    .unwrap();
    let (code, _, err) = sluice(&["validate", dir.path().join("apps").to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("config.yaml:4: author.name: expected no '<', '>'"),
        "{err}"
    );
    assert!(
        err.contains("web.yaml:6: spec.output: expected a path git can track"),
        "{err}"
    );
    assert!(
        err.contains("web.yaml:12: spec.route.hostnames[0]: expected a lowercase DNS name"),
        "{err}"
    );
}

/// Every command that prints ends quietly when its reader went away (`sluice reconcile |
/// head -1`): exit code 0 and nothing on stderr, never a panic.
#[test]
fn commands_exit_quietly_when_stdout_is_a_closed_pipe() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = crate::support::seeded_remote(tmp.path(), &[("apps/web.yaml", ROUTE_ONLY_WEB)]);
    let repo = bare.display().to_string();
    let workdir = tmp.path().join("w").display().to_string();
    let examples = format!("{}/examples", env!("CARGO_MANIFEST_DIR"));
    let commands: [&[&str]; 4] = [
        &["reconcile", "--repo", &repo, "--workdir", &workdir],
        &["validate", &examples],
        &["plan", &examples],
        &["status", "--dir", &repo],
    ];
    for args in commands {
        // The reading end is closed before the command starts: its first write fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .env("SLUICE_LOG", "error")
            .stdout(writer)
            .output()
            .expect("run sluice");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

/// `git` in the repo this binary was built from, its trimmed output.
fn git_here(args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("TZ", "UTC")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `sluice version` names the release, the commit and its date (build.rs reads them from git
/// in a checkout, as here, unless the builder sets SLUICE_GIT_COMMIT/SOURCE_DATE_EPOCH);
/// `--version` says the same on one line.
#[test]
fn version_prints_the_release_commit_and_build_date() {
    let (code, out, err) = sluice(&["version"]);
    assert_eq!(code, 0, "{err}");
    let cargo =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let release = cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the package version");
    let (commit, date) = match std::env::var("SLUICE_GIT_COMMIT") {
        Ok(commit) if !commit.is_empty() => (commit, None),
        _ => (
            git_here(&["rev-parse", "HEAD"]),
            Some(git_here(&[
                "log",
                "-1",
                "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
                "--format=%cd",
            ])),
        ),
    };
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("sluice {release}"), "{out}");
    assert_eq!(lines[1], format!("commit: {commit}"), "{out}");
    let built = lines[2].strip_prefix("built: ").expect("a build date line");
    if let Some(date) = &date {
        assert_eq!(built, date, "the commit's date, in UTC");
    }
    assert_eq!(lines.len(), 3, "{out}");

    let (code, one, err) = sluice(&["--version"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        one.trim_end(),
        format!("sluice {release} (commit {commit}, built {built})")
    );
}
