//! `sluice audit` (the real binary) over the histories the loop makes: a stepped rollout, a
//! rollback, A/B, approvals (CLI and approval branches merged every way), manual operations
//! and `commits: perTick` replay without a finding. The same histories with one hand edit
//! each (route weights, a status file, a trailer, an approval stripped of its trailers) are
//! reported at exactly the edited commit. Signing, when the settings require it, is checked
//! (the policy attacks are in `attacks/signing.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value as Json};
use sluice::core::status::Phase;

use crate::support::audit::{audit, clean, found_commits, line, phase, FILE};
use crate::support::canary::podinfo;
use crate::support::rollout::{World, BLUE_GREEN, FAILING, ROUTE_FILE, STATUS_FILE, STEPS};
use crate::support::{git, human_commit, merge_approval, route_only_web, run_sluice, show};

/// The audit of a history with one hand edit at `commit`: exit 1, findings there only.
fn reports_exactly(repo: &Path, commit: &str, kind: &str) -> Json {
    let (code, report) = audit(repo);
    assert_eq!(
        found_commits(&report),
        vec![commit.to_string()],
        "{report:#}"
    );
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == kind),
        "a {kind} finding: {report:#}"
    );
    assert_eq!(code, 1);
    report
}

/// A copy of `bare` whose commit `sha` is replaced by `edit(files, message)`; every later
/// commit of the first-parent line keeps its tree and message on the new parent. Returns the
/// copy and the edited commit's id.
fn hand_edit(
    bare: &Path,
    dir: &Path,
    sha: &str,
    files: &[(&str, Option<&str>)],
    message: impl FnOnce(&str) -> String,
) -> (PathBuf, String) {
    let n = (0..)
        .find(|n| !dir.join(format!("edited-{n}.git")).exists())
        .unwrap();
    let copy = dir.join(format!("edited-{n}.git"));
    git(
        dir,
        &[
            "clone",
            "-q",
            "--bare",
            &bare.display().to_string(),
            &copy.display().to_string(),
        ],
    );
    let index = dir.join(format!("index-{n}"));
    let with_index = |args: &[&str]| -> String {
        let out = crate::support::run_ok(
            Command::new("git")
                .args(args)
                .current_dir(&copy)
                .env("GIT_INDEX_FILE", &index),
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    with_index(&["read-tree", sha]);
    for (path, content) in files {
        match content {
            Some(text) => {
                let file = dir.join("blob");
                std::fs::write(&file, text).unwrap();
                let blob = with_index(&["hash-object", "-w", &file.display().to_string()]);
                with_index(&[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{blob},{path}"),
                ]);
            }
            None => {
                with_index(&["update-index", "--force-remove", path]);
            }
        }
    }
    let tree = with_index(&["write-tree"]);
    let commits = line(&copy);
    let at = commits.iter().position(|(s, _)| s == sha).unwrap();
    let (_, original) = &commits[at];
    let mut parent = recommit(&copy, dir, sha, &tree, &message(original), None);
    let edited = parent.clone();
    for (later, text) in &commits[at + 1..] {
        let tree = git(&copy, &["rev-parse", &format!("{later}^{{tree}}")]);
        parent = recommit(&copy, dir, later, tree.trim(), text, Some(&parent));
    }
    git(&copy, &["update-ref", "refs/heads/main", &parent]);
    (copy, edited)
}

/// `sha` again with `tree` and `message`, its first parent replaced by `parent` when given;
/// author, committer and dates kept.
fn recommit(
    repo: &Path,
    dir: &Path,
    sha: &str,
    tree: &str,
    message: &str,
    parent: Option<&str>,
) -> String {
    let who = git(
        repo,
        &[
            "log",
            "-1",
            "--format=%an%n%ae%n%aI%n%cn%n%ce%n%cI%n%P",
            sha,
        ],
    );
    let w: Vec<&str> = who.lines().collect();
    let mut parents: Vec<String> = w
        .get(6)
        .unwrap_or(&"")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if let Some(p) = parent {
        parents[0] = p.to_string();
    }
    let file = dir.join("message");
    std::fs::write(&file, message).unwrap();
    let mut args = vec!["commit-tree".to_string(), tree.to_string()];
    for p in &parents {
        args.extend(["-p".to_string(), p.clone()]);
    }
    args.extend(["-F".to_string(), file.display().to_string()]);
    let mut cmd = Command::new("git");
    cmd.args(&args)
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", w[0])
        .env("GIT_AUTHOR_EMAIL", w[1])
        .env("GIT_AUTHOR_DATE", w[2])
        .env("GIT_COMMITTER_NAME", w[3])
        .env("GIT_COMMITTER_EMAIL", w[4])
        .env("GIT_COMMITTER_DATE", w[5]);
    let out = crate::support::run_ok(&mut cmd);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The message without its trailer paragraph.
fn without_trailers(message: &str) -> String {
    let trimmed = message.trim_end();
    let cut = trimmed.rfind("\n\n").unwrap();
    format!("{}\n", &trimmed[..cut])
}

/// The latest commit whose subject contains `text`.
pub(crate) fn commit_saying(repo: &Path, text: &str) -> String {
    line(repo)
        .into_iter()
        .rev()
        .find(|(_, m)| m.lines().next().unwrap_or("").contains(text))
        .unwrap_or_else(|| panic!("no commit says {text:?}"))
        .0
}

/// A Flagger canary on Istio (Flagger's default provider).
fn istio(analysis: &str) -> String {
    podinfo()
        .service("    port: 9898\n    hosts: [app.example.com]")
        .yaml(analysis)
}

const AB: &str = "    iterations: 3
    match:
      - headers:
          x-canary:
            exact: \"insider\"";

/// A whole rollout through the loop with `analysis`, ending in `end`.
fn rollout(analysis: &str, end: Phase) -> World {
    let mut w = World::with_files(&istio(analysis), &[]);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(end);
    w
}

/// A copy of `bare` (in `dir`) where a human amended the commit `sha` to hold `text` in
/// `file`, which audit reports exactly, for that file: the copy and the amended commit.
fn one_file_amended(
    bare: &Path,
    dir: &Path,
    sha: &str,
    file: &str,
    text: &str,
) -> (PathBuf, String) {
    let (copy, amended) = hand_edit(bare, dir, sha, &[(file, Some(text))], str::to_string);
    let report = reports_exactly(&copy, &amended, "files");
    assert_eq!(report["findings"][0]["file"], file, "{report:#}");
    (copy, amended)
}

#[test]
fn audit_replays_a_stepped_rollout_and_reports_a_weight_edited_by_hand_at_its_commit() {
    let w = rollout(STEPS, Phase::Succeeded);
    clean(&w.bare);
    let tmp = tempfile::tempdir().unwrap();
    // A sluice commit whose route a human amended: 80/20 became 50/50.
    let step = commit_saying(&w.bare, "advance canary weight 0 -> 20");
    let route = show(&w.bare, &step, ROUTE_FILE);
    let edited_route =
        route
            .replacen("weight: 80", "weight: 50", 1)
            .replacen("weight: 20", "weight: 50", 1);
    assert_ne!(route, edited_route, "{route}");
    let (copy, edited) = one_file_amended(&w.bare, tmp.path(), &step, ROUTE_FILE, &edited_route);
    // The other outputs say the same, and the same history always gives the same verdict.
    let dir = copy.display().to_string();
    let (code, github, _) = run_sluice(&["audit", "prod/podinfo", "--dir", &dir, "-o", "github"]);
    assert_eq!(code, 1);
    assert!(
        github.starts_with(&format!(
            "::error file={ROUTE_FILE},title=sluice audit::{} prod/podinfo: ",
            &edited[..12]
        )),
        "{github}"
    );
    let (code, table, _) = run_sluice(&["audit", "--dir", &dir]);
    assert_eq!(code, 1);
    assert!(
        table.contains("COMMIT") && table.contains(&edited[..12]),
        "{table}"
    );
    assert_eq!(run_sluice(&["audit", "--dir", &dir]).1, table);
    // A canary the branch never held is a typo: named as such, and this canary's finding is
    // not reported under it.
    let (code, other, err) = run_sluice(&["audit", "prod/other", "--dir", &dir, "-o", "json"]);
    assert_eq!(code, 1, "{other}{err}");
    assert_eq!(other, "");
    assert!(err.starts_with("no canary prod/other ("), "{err}");
    // A human commit on top that edits the weights: not sluice's, and it changes its file.
    w.human_writes(ROUTE_FILE, &edited_route, "more traffic to the canary");
    let top = line(&w.bare).pop().unwrap().0;
    let report = reports_exactly(&w.bare, &top, "foreign");
    assert_eq!(report["findings"][0]["file"], ROUTE_FILE);
}

#[test]
fn audit_replays_a_rollback_and_reports_a_status_file_edited_by_hand() {
    let w = rollout(FAILING, Phase::Failed);
    let report = clean(&w.bare);
    assert!(report["replayed"].as_u64().unwrap() >= 5, "{report:#}");
    let tmp = tempfile::tempdir().unwrap();
    let last = line(&w.bare).pop().unwrap().0;
    let status = show(&w.bare, &last, STATUS_FILE);
    let edited = status.replace("failedChecks: 2", "failedChecks: 0");
    assert_ne!(status, edited, "{status}");
    one_file_amended(&w.bare, tmp.path(), &last, STATUS_FILE, &edited);
    // A commit without its replay record after commits with one is unverifiable: a history
    // does not go back to the format before replay records.
    let strip = |m: &str| -> String {
        m.lines()
            .filter(|l| !l.starts_with("Sluice-Replay: "))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let (copy, sha) = hand_edit(&w.bare, tmp.path(), &last, &[], strip);
    reports_exactly(&copy, &sha, "unverifiable");
    // The first sluice commit without one was written before replay records existed (format
    // 1): listed as not replayable, not reported.
    let first = line(&w.bare)
        .into_iter()
        .find(|(_, m)| m.contains("Sluice-Replay: "))
        .unwrap()
        .0;
    let (copy, sha) = hand_edit(&w.bare, tmp.path(), &first, &[], strip);
    let (code, report) = audit(&copy);
    assert_eq!(report["findings"], Json::Array(vec![]), "{report:#}");
    assert_eq!(
        report["notReplayable"][0]["commit"],
        sha.as_str(),
        "{report:#}"
    );
    assert!(
        report["notReplayable"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("written before replay records existed"),
        "{report:#}"
    );
    assert_eq!(code, 0);
}

#[test]
fn audit_replays_blue_green_and_a_b_and_reports_a_rewritten_trailer() {
    clean(&rollout(BLUE_GREEN, Phase::Succeeded).bare);
    let w = rollout(AB, Phase::Succeeded);
    clean(&w.bare);
    let tmp = tempfile::tempdir().unwrap();
    let switched = commit_saying(&w.bare, "analysis iteration 1/3 passed");
    let (copy, sha) = hand_edit(&w.bare, tmp.path(), &switched, &[], |m| {
        let at = m.find("Sluice-Weights: ").unwrap();
        let end = at + m[at..].find('\n').unwrap();
        format!(
            "{}Sluice-Weights: primary=1 canary=99{}",
            &m[..at],
            &m[end..]
        )
    });
    let report = reports_exactly(&copy, &sha, "trailers");
    assert_eq!(
        report["findings"][0]["file"], "Sluice-Weights",
        "{report:#}"
    );
}

/// A manual operation by `sluice VERB shop/web`, which must succeed.
fn op(w: &World, verb: &str, reason: &str) {
    let (code, out, err) = run_sluice(&[
        verb,
        "shop/web",
        "--repo",
        &w.bare.display().to_string(),
        "--reason",
        reason,
        "--as",
        "Ada Ops <ada@example.com>",
    ]);
    assert_eq!(code, 0, "{verb}: {out}{err}");
}

#[test]
fn audit_replays_manual_operations_and_reports_an_approval_stripped_of_its_trailers() {
    let steps = "[{weight: 20, pause: {}}, {weight: 60}]";
    let mut w = World::local(&[(FILE, &route_only_web("v1", steps))]);
    w.ticks(1);
    w.human_writes(FILE, &route_only_web("v2", steps), "web: v2");
    w.ticks(4);
    assert_eq!(phase(&w), "WaitingApproval");
    op(&w, "pause", "looking at dashboards");
    op(&w, "resume", "dashboards fine");
    op(&w, "approve", "go on");
    op(&w, "abort", "changed my mind");
    op(&w, "retry", "try again");
    w.ticks(3);
    op(&w, "promote", "ship it");
    w.ticks(6);
    assert_eq!(phase(&w), "Succeeded");
    clean(&w.bare);
    let approval = commit_saying(&w.bare, "advance canary weight 20 -> 60");
    let message = line(&w.bare)
        .into_iter()
        .find(|(s, _)| *s == approval)
        .unwrap()
        .1;
    assert!(
        message.contains("Sluice-Operator: Ada Ops <ada@example.com>"),
        "{message}"
    );
    let (copy, sha) = hand_edit(&w.bare, w.dir(), &approval, &[], without_trailers);
    reports_exactly(&copy, &sha, "foreign");
    assert!(
        message.contains("Sluice-Approved-By: Ada Ops <ada@example.com>"),
        "{message}"
    );
    // From format 3 on (the approver trailers), an approval must name its approver.
    let (copy, sha) = hand_edit(&w.bare, w.dir(), &approval, &[], |m| {
        m.lines()
            .filter(|l| !l.starts_with("Sluice-Approved-By:"))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    let report = reports_exactly(&copy, &sha, "approver");
    assert_eq!(
        report["findings"].as_array().unwrap().len(),
        1,
        "{report:#}"
    );
}

#[test]
fn audit_replays_approval_branches_merged_every_way() {
    for how in ["merge", "squash", "cherry-pick"] {
        let steps = "[{weight: 20, pause: {}}, {weight: 60}]";
        let mut w = World::local(&[(FILE, &route_only_web("v1", steps))]);
        w.ticks(1);
        w.human_writes(FILE, &route_only_web("v2", steps), "web: v2");
        w.ticks(4);
        assert_eq!(phase(&w), "WaitingApproval", "{how}");
        let branch = w.approval_branch();
        merge_approval(w.human(), &branch, how);
        w.ticks(8);
        assert_eq!(phase(&w), "Succeeded", "{how}");
        clean(&w.bare);
    }
}

#[test]
fn audit_replays_per_tick_commits_and_reports_one_canary_s_edited_trailer() {
    let config = "apiVersion: sluice.dev/v1alpha1\nkind: Config\ncommits: perTick\n";
    let steps = "[{weight: 30}, {weight: 60}]";
    let canary = |name: &str, rev: &str| {
        route_only_web(rev, steps)
            .replace("name: web", &format!("name: {name}"))
            .replace("web-", &format!("{name}-"))
    };
    let mut w = World::local(&[
        (".sluice/config.yaml", config),
        ("apps/a/canary.yaml", &canary("a", "v1")),
        ("apps/b/canary.yaml", &canary("b", "v1")),
    ]);
    w.ticks(1);
    git(w.human(), &["pull", "-q", "origin", "main"]);
    std::fs::write(w.human().join("apps/a/canary.yaml"), canary("a", "v2")).unwrap();
    human_commit(
        w.human(),
        "apps/b/canary.yaml",
        &canary("b", "v2"),
        "a and b: v2",
    );
    w.ticks(10);
    let report = clean(&w.bare);
    let folded = commit_saying(&w.bare, "2 canary decisions");
    assert!(report["replayed"].as_u64().unwrap() >= 8, "{report:#}");
    let (copy, sha) = hand_edit(&w.bare, w.dir(), &folded, &[], |m| {
        // The second group's step only: the first is left as it was.
        let at = m.rfind("Sluice-Step: ").unwrap();
        let end = at + m[at..].find('\n').unwrap();
        format!("{}Sluice-Step: 9/9{}", &m[..at], &m[end..])
    });
    let report = reports_exactly(&copy, &sha, "trailers");
    assert_eq!(report["findings"][0]["file"], "Sluice-Step", "{report:#}");
}

#[test]
fn audit_reports_commits_the_settings_require_signed_but_are_not() {
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("key");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "sluice", "-f"])
        .arg(&key)
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("note: ssh-keygen not installed; signing audit not checked");
        return;
    }
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let config = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nsigning: {required: true, allowedSigners: .sluice/allowed_signers}\n";
    let steps = "[{weight: 50}]";
    let w = World::local(&[
        (".sluice/config.yaml", config),
        (
            ".sluice/allowed_signers",
            &format!("sluice@localhost {public}"),
        ),
        (FILE, &route_only_web("v1", steps)),
    ]);
    // Sluice signs its commits with the key.
    let url = w.bare.display().to_string();
    let (code, out, err) = run_sluice(&[
        "reconcile",
        "--repo",
        &url,
        "--workdir",
        &w.dir().join("signed").display().to_string(),
        "--signing-ssh-key",
        &key.display().to_string(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    // The seed commit brings the policy (no policy is in force before it, so it is not
    // judged); the signed sluice commit passes.
    let (code, report) = audit(&w.bare);
    assert_eq!(report["findings"], Json::Array(vec![]), "{report:#}");
    assert_eq!(code, 0);
    // An unsigned human commit on top is reported.
    w.human_writes("README.md", "hello\n", "readme");
    let top = line(&w.bare).pop().unwrap().0;
    let (code, report) = audit(&w.bare);
    assert_eq!(found_commits(&report), vec![top.clone()], "{report:#}");
    assert_eq!(report["findings"][0]["kind"], "signature", "{report:#}");
    assert_eq!(code, 1);
    // Required from outside the repo, the seed commit is judged too.
    let trusted = w.dir().join("trusted_signers");
    std::fs::write(&trusted, format!("sluice@localhost {public}")).unwrap();
    let (_, out, err) = run_sluice(&[
        "audit",
        "--dir",
        &w.bare.display().to_string(),
        "-o",
        "json",
        "--allowed-signers",
        &trusted.display().to_string(),
        "--require-signed",
    ]);
    let report: Json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let seed = line(&w.bare)[0].0.clone();
    assert_eq!(found_commits(&report), vec![seed, top], "{report:#}");
}

/// `sluice audit --dir <repo> -o json` with `TMPDIR` a fresh empty folder: (exit code, report,
/// whether the folder stayed untouched: still empty, and its modification time unchanged, so
/// nothing was made in it even briefly).
fn audit_watching_tmpdir(repo: &Path, extra: &[&str]) -> (i32, Json, bool) {
    let watch = tempfile::tempdir().unwrap();
    let tmpdir = watch.path().join("tmp");
    std::fs::create_dir(&tmpdir).unwrap();
    let before = std::fs::metadata(&tmpdir).unwrap().modified().unwrap();
    let mut args = vec!["audit", "--dir", repo.to_str().unwrap(), "-o", "json"];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(&args)
        .env("SLUICE_LOG", "error")
        .env("TMPDIR", &tmpdir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    let entries = std::fs::read_dir(&tmpdir).unwrap().count();
    let after = std::fs::metadata(&tmpdir).unwrap().modified().unwrap();
    (
        out.status.code().unwrap_or(-1),
        report,
        entries == 0 && before == after,
    )
}

/// Audit reads git objects only: replaying a whole rollout, hand edits and a drift hold
/// included, creates nothing under `TMPDIR` (it used to write each parent's tree there).
#[test]
fn audit_replays_from_git_objects_and_writes_nothing_under_tmpdir() {
    let w = drifted_rollout();
    let (code, report, untouched) = audit_watching_tmpdir(&w.bare, &[]);
    assert_eq!(code, 1, "the hand edits are found: {report:#}");
    assert!(report["replayed"].as_u64().unwrap() > 5, "{report:#}");
    assert!(untouched, "audit created files under TMPDIR");
    let middle = line(&w.bare)[3].0.clone();
    let (_, _, untouched) = audit_watching_tmpdir(&w.bare, &["--since", &middle]);
    assert!(untouched, "audit --since created files under TMPDIR");
}

/// A rollout with a drift hold in it: a human edits the route while the canary progresses
/// (sluice holds), puts it back (sluice resumes), and the rollout ends. The full audit reports
/// the two human edits.
fn drifted_rollout() -> World {
    let mut w = World::with_files(&istio(STEPS), &[]);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Progressing);
    let route = show(&w.bare, "main", ROUTE_FILE);
    w.human_writes(
        ROUTE_FILE,
        &format!("{route}# edited by hand\n"),
        "podinfo: a hand edit of the route",
    );
    w.ticks(1);
    w.human_writes(ROUTE_FILE, &route, "podinfo: put the route back");
    w.until(Phase::Succeeded);
    w
}

/// `--since REV` reports exactly the findings of the whole audit that are after REV, for
/// every REV of the line: the commits before it give later replays what they need (the drift
/// hold's verified commits, the newest format) without being checked again.
#[test]
fn audit_since_each_commit_reports_the_full_audit_s_findings_after_it() {
    let w = drifted_rollout();
    let (code, full) = audit(&w.bare);
    assert_eq!(code, 1, "{full:#}");
    let commits = line(&w.bare);
    let head = &commits.last().unwrap().0;
    assert_eq!(full["resumeSince"], head.as_str(), "{full:#}");
    assert_eq!(full["commits"], commits.len());
    assert_eq!(found_commits(&full).len(), 2, "{full:#}");
    let dir = w.bare.display().to_string();
    for (i, (sha, _)) in commits.iter().enumerate() {
        let (code, out, err) = run_sluice(&["audit", "--dir", &dir, "-o", "json", "--since", sha]);
        let report: Json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        let later: Vec<&String> = commits[i + 1..].iter().map(|(s, _)| s).collect();
        let expected: Vec<&Json> = full["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| later.iter().any(|s| f["commit"] == s.as_str()))
            .collect();
        let got: Vec<&Json> = report["findings"].as_array().unwrap().iter().collect();
        assert_eq!(
            got,
            expected,
            "--since commit {i} of {}: {report:#}",
            commits.len()
        );
        assert_eq!(code, i32::from(!expected.is_empty()), "{report:#}");
        assert_eq!(report["commits"], later.len());
        assert_eq!(report["resumeSince"], head.as_str());
    }
    // A ref works as well as an id; the resume point of an audit is the next one's --since.
    let (code, out, _) = run_sluice(&["audit", "--dir", &dir, "-o", "json", "--since", "main"]);
    assert_eq!(code, 0, "{out}");
    let report: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (report["commits"].as_u64(), report["replayed"].as_u64()),
        (Some(0), Some(0))
    );
}

/// A REV that is not in the branch's history, or names nothing, is an error that says so.
#[test]
fn audit_since_a_commit_outside_the_branch_is_an_error() {
    let mut w = World::with_files(&istio(STEPS), &[]);
    w.until(Phase::Initialized);
    let dir = w.bare.display().to_string();
    let tree = git(&w.bare, &["rev-parse", "main^{tree}"]);
    let stray = crate::support::run_ok(
        Command::new("git")
            .args(["commit-tree", tree.trim(), "-m", "a root of its own"])
            .current_dir(&w.bare)
            .env("GIT_AUTHOR_NAME", "h")
            .env("GIT_AUTHOR_EMAIL", "h@example.com")
            .env("GIT_COMMITTER_NAME", "h")
            .env("GIT_COMMITTER_EMAIL", "h@example.com"),
    );
    let stray = String::from_utf8_lossy(&stray.stdout).trim().to_string();
    let (code, out, err) = run_sluice(&["audit", "--dir", &dir, "--since", &stray]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&format!(
            "--since {stray}: commit {stray} is not an ancestor of the branch's head"
        )),
        "{err}"
    );
    let (code, _, err) = run_sluice(&["audit", "--dir", &dir, "--since", "no-such-ref"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--since no-such-ref: no such commit or ref in the repository"),
        "{err}"
    );
}

/// A copy of `bare` in which every commit from `from` on holds `file` as a sluice that copied
/// the source's Flux keys rendered it (`marked` applied to its text), its records written in
/// `format`.
fn with_flux_keys(
    bare: &Path,
    dir: &Path,
    from: &str,
    file: &str,
    marked: (&str, &str),
    format: u32,
) -> PathBuf {
    let start = line(bare).iter().position(|(s, _)| s == from).unwrap();
    let count = line(bare).len();
    let mut repo = bare.to_path_buf();
    for at in start..count {
        let (sha, _) = line(&repo)[at].clone();
        let text = show(&repo, &sha, file);
        let copied = text.replacen(marked.0, marked.1, 1);
        let files: Vec<(&str, Option<&str>)> = if text.is_empty() || copied == text {
            Vec::new()
        } else {
            vec![(file, Some(copied.as_str()))]
        };
        let older = |m: &str| m.replace("{\"format\":5,", &format!("{{\"format\":{format},"));
        repo = hand_edit(&repo, dir, &sha, &files, older).0;
    }
    repo
}

/// A history written before format 5, whose renders carried the source's Flux keys
/// (`kustomize.toolkit.fluxcd.io/ssa: IfNotPresent` on the canary Deployment, as sluice copied
/// them then): the commit is what the rules of its time rendered, and audit finds nothing. The
/// same file in a format-5 commit is a hand edit, reported.
#[test]
fn audit_replays_renders_that_carried_flux_keys_before_format_5() {
    use crate::support::manifests::{CONFIGS, DEPLOYMENT};
    use crate::support::rollout::{CANARY_FILE, OUTPUT};
    const MARKED: (&str, &str) = (
        "  labels:\n    app: podinfo\nspec:",
        "  labels:\n    app: podinfo\n  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\nspec:",
    );
    let deployment = DEPLOYMENT.replacen(MARKED.0, MARKED.1, 1);
    assert_ne!(deployment, DEPLOYMENT);
    let canary = istio(STEPS);
    let mut w = World::served(&[
        ("apps/podinfo/deployment.yaml", deployment.as_str()),
        ("apps/podinfo/configs.yaml", CONFIGS),
        (CANARY_FILE, canary.as_str()),
    ])
    .building(OUTPUT);
    w.until(Phase::Initialized);
    w.human_writes(
        "apps/podinfo/deployment.yaml",
        &deployment.replace("6.7.0", "6.7.1"),
        "podinfo: 6.7.1",
    );
    w.until(Phase::Succeeded);
    clean(&w.bare);
    let init = commit_saying(&w.bare, "initialization done");
    let file = format!("{OUTPUT}/podinfo-canary.yaml");
    let rendered = show(&w.bare, &init, &file);
    assert!(!rendered.contains("toolkit.fluxcd.io"), "{rendered}");
    let tmp = tempfile::tempdir().unwrap();
    let older = with_flux_keys(&w.bare, tmp.path(), &init, &file, MARKED, 4);
    let messages = git(&older, &["log", "--format=%B", "main"]);
    assert!(
        messages.contains("{\"format\":4,") && !messages.contains("{\"format\":5,"),
        "{messages}"
    );
    assert!(show(&older, "main", &file).contains(MARKED.1), "{file}");
    clean(&older);
    // In format 5 the same files are hand edits, each reported at its commit.
    let current = with_flux_keys(&w.bare, tmp.path(), &init, &file, MARKED, 5);
    let (code, report) = crate::support::audit::audit(&current);
    assert_eq!(code, 1, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "{report:#}");
    for f in findings {
        assert_eq!(
            (&f["kind"], &f["file"]),
            (&json!("files"), &json!(file)),
            "{report:#}"
        );
    }
}
