//! Upgrades keep state. `e2e/fixtures/upgrade/format3.bundle` is a config repo written by an
//! older sluice (the binary of commit d1ecaab, the last before `Sluice-Replay` records went from
//! format 3 to 4; sluice has no release yet, so that is the previous format; `make.sh` beside it
//! says how it was made): the `web` canary initialized at v1, v2 released by a human, sluice's
//! scale-up and first step, a pause by Alice, left paused mid-rollout. This binary reads it: `sluice audit`
//! finds nothing, `sluice status` shows the canary where the old binary left it, `sluice
//! resume` and `sluice reconcile` carry the rollout on to Succeeded without repeating or
//! skipping a step, and the audit of the whole history, both formats, still finds nothing.

use std::path::Path;
use std::time::Duration;

use serde_json::Value as Json;

use crate::support::{
    commits_of, git, repo_root, run_sluice, run_sluice_env, status_at_main, Stepped,
};

const STATUS_FILE: &str = ".sluice/status/shop/web.yaml";

/// `sluice audit -o json` over `bare`: (exit code, the report).
fn audit(bare: &Path, work: &Path) -> (i32, Json) {
    let (code, out, err) = run_sluice(&[
        "audit",
        "--repo",
        &bare.display().to_string(),
        "--workdir",
        &work.display().to_string(),
        "-o",
        "json",
    ]);
    let report = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (code, report)
}

fn status(bare: &Path) -> Json {
    status_at_main(bare, STATUS_FILE).expect("the canary's status file")
}

#[test]
fn history_written_by_the_previous_format_audits_clean_and_the_rollout_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("config.git");
    let bundle = repo_root().join("e2e/fixtures/upgrade/format3.bundle");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &bundle.display().to_string(),
            &bare.display().to_string(),
        ],
    );
    let repo = bare.display().to_string();
    let messages = git(&bare, &["log", "--format=%B", "main"]);
    assert!(
        messages.contains("Sluice-Replay: {\"format\":3,") && !messages.contains("\"format\":4"),
        "the fixture is the previous format's history: {messages}"
    );
    let before = status(&bare);
    assert_eq!(before["phase"], "Progressing", "{before:?}");
    assert_eq!(before["canaryWeight"], 10, "{before:?}");

    let (code, report) = audit(&bare, &tmp.path().join("audit1"));
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["findings"], Json::Array(vec![]), "{report:#}");
    // The old records are replayed, not passed over: sluice's four commits (three decisions and
    // the pause).
    assert_eq!(report["replayed"], 4, "{report:#}");
    assert_eq!(report["notReplayable"], Json::Array(vec![]), "{report:#}");

    let work = tmp.path().join("work").display().to_string();
    let source = ["--repo", repo.as_str(), "--workdir", work.as_str()];
    let (code, out, err) = run_sluice(&[&["status"][..], &source].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("web") && out.contains("10"), "{out}");

    let clock = Stepped::default();
    let (var, value) = clock.env();
    let resume = [
        &["resume", "shop/web"][..],
        &source,
        &["--reason", "upgraded", "--as", "Alice <alice@example.com>"],
    ]
    .concat();
    let (code, out, err) = run_sluice_env(&resume, &[(&var, &value)]);
    assert_eq!(code, 0, "{out}{err}");
    for _ in 0..20 {
        if status(&bare)["phase"] == "Succeeded" {
            break;
        }
        clock.jump(Duration::from_secs(2));
        let (var, value) = clock.env();
        let (code, out, err) =
            run_sluice_env(&[&["reconcile"][..], &source].concat(), &[(&var, &value)]);
        assert_eq!(code, 0, "{out}{err}");
    }
    assert_eq!(status(&bare)["phase"], "Succeeded", "{:?}", status(&bare));
    // Each step advanced once, in order, across the two binaries.
    let subjects = git(&bare, &["log", "--reverse", "--format=%s", "main"]);
    let advances: Vec<&str> = subjects
        .lines()
        .filter(|s| s.contains("advance canary weight"))
        .collect();
    assert_eq!(
        advances,
        [
            "web: advance canary weight 0 -> 10 (step 1/3)",
            "web: advance canary weight 10 -> 30 (step 2/3)",
            "web: advance canary weight 30 -> 60 (step 3/3)",
        ],
        "{subjects}"
    );
    let mut weights: Vec<String> = commits_of(&bare, "shop/web")
        .into_iter()
        .map(|(_, w)| w)
        .collect();
    weights.dedup();
    assert_eq!(
        weights,
        [
            "primary=100 canary=0",
            "primary=90 canary=10",
            "primary=70 canary=30",
            "primary=40 canary=60",
            "primary=0 canary=100",
            "primary=100 canary=0",
        ],
        "{subjects}"
    );

    let (code, report) = audit(&bare, &tmp.path().join("audit2"));
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["findings"], Json::Array(vec![]), "{report:#}");
}
