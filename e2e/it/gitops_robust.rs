//! The clone under stress: a push racing another writer on a local-path remote, locks a
//! killed process left behind, a remote that never answers, and a damaged clone. Real git
//! repos, the git CLI as witness, real TCP listeners; no mocks.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sluice::gitops::{Identity, PushOutcome};

use crate::gitops::{git, route_change, step_message, time, Fixture};

/// Every value `refs/heads/main` of the bare repo ever had, oldest first.
fn branch_history(bare: &Path) -> Vec<String> {
    let log = git(bare, &["reflog", "show", "--format=%H", "refs/heads/main"]);
    log.lines().rev().map(str::to_string).collect()
}

/// The updates of the bare repo's main that were not fast-forwards, as (from, to).
fn rewinds(bare: &Path) -> Vec<(String, String)> {
    branch_history(bare)
        .windows(2)
        .filter(|w| {
            !std::process::Command::new("git")
                .args(["merge-base", "--is-ancestor", &w[0], &w[1]])
                .current_dir(bare)
                .status()
                .unwrap()
                .success()
        })
        .map(|w| (w[0].clone(), w[1].clone()))
        .collect()
}

/// A human commit lands on a local-path remote after sluice's push read the remote head and
/// before it updated it: the push must lose the race (rejected, like on `git daemon`), never
/// overwrite the human's commit.
fn push_racing_a_human(url: &str, fx: &Fixture) {
    let mut repo = fx.open(url, "work");
    let human = fx.cli_clone(&fx.bare_url(), "human");
    let fired = Arc::new(AtomicBool::new(false));
    let (hook_fired, hook_human) = (fired.clone(), human.clone());
    repo.before_push_update(move || {
        if !hook_fired.swap(true, Ordering::SeqCst) {
            std::fs::write(hook_human.join("README.md"), "human change\n").unwrap();
            git(&hook_human, &["commit", "-q", "-am", "Human edits README"]);
            git(&hook_human, &["push", "-q", "origin", "main"]);
        }
    });
    repo.commit_files(
        &route_change(10),
        &step_message(10),
        &Identity::default(),
        time(10),
    )
    .unwrap()
    .unwrap();
    let outcome = repo.push_attempt(1, 3).unwrap();
    assert!(fired.load(Ordering::SeqCst), "the race was run");
    let human_head = git(&human, &["rev-parse", "HEAD"]).trim().to_string();
    let remote_head = git(&fx.bare(), &["rev-parse", "refs/heads/main"])
        .trim()
        .to_string();
    assert_eq!(
        outcome,
        PushOutcome::Rejected,
        "the push lost the race; remote now at {remote_head}, human at {human_head}"
    );
    assert_eq!(remote_head, human_head, "the human commit stays on main");
    assert_eq!(rewinds(&fx.bare()), vec![], "no non-fast-forward update");

    // Like any rejection: fetch, redo, push again; both changes land.
    repo.fetch().unwrap();
    repo.commit_files(
        &route_change(10),
        &step_message(10),
        &Identity::default(),
        time(11),
    )
    .unwrap()
    .unwrap();
    assert!(matches!(
        repo.push_attempt(2, 3).unwrap(),
        PushOutcome::Pushed(_)
    ));
    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    assert_eq!(
        git(&witness, &["show", "HEAD:README.md"]).trim(),
        "human change"
    );
    assert_eq!(
        git(&witness, &["show", "HEAD:apps/podinfo/route.yaml"]).trim(),
        "weight: 10"
    );
    let history = branch_history(&fx.bare());
    assert_eq!(
        history.last().map(String::as_str),
        Some(git(&fx.bare(), &["rev-parse", "refs/heads/main"]).as_str()),
        "the reflog records sluice's update too"
    );
    assert_eq!(history.len(), 3, "seed, human, sluice: {history:?}");
    assert_eq!(rewinds(&fx.bare()), vec![], "no non-fast-forward update");
}

#[test]
fn local_path_push_racing_a_human_is_rejected_not_overwriting() {
    let fx = Fixture::new();
    push_racing_a_human(&fx.bare_url(), &fx);
}

#[test]
fn file_url_push_racing_a_human_is_rejected_not_overwriting() {
    let fx = Fixture::new();
    push_racing_a_human(&format!("file://{}", fx.bare_url()), &fx);
}

/// Runs the real binary; returns (success, stderr).
fn sluice(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("SLUICE_LOG", "info")
        .output()
        .expect("run sluice");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn lock_files_a_killed_sluice_left_do_not_stop_the_next_start() {
    let fx = Fixture::new();
    let work = fx.path("work");
    let args = [
        "reconcile",
        "--repo",
        &fx.bare_url(),
        "--workdir",
        work.to_str().unwrap(),
    ];
    let (ok, err) = sluice(&args);
    assert!(ok, "first start: {err}");
    for lock in [
        "index.lock",
        "HEAD.lock",
        "refs/heads/main.lock",
        "refs/remotes/origin/main.lock",
    ] {
        // What a kill -9 in the middle of an update leaves: the lock, with partial content.
        let path = work.join(".git").join(lock);
        std::fs::write(&path, "0000").unwrap();
        // Someone else pushed meanwhile, so the next start must update every ref again.
        let human = fx.path(&format!("human-{}", lock.replace('/', "-")));
        git(
            fx.dir.path(),
            &["clone", "-q", &fx.bare_url(), human.to_str().unwrap()],
        );
        std::fs::write(human.join("README.md"), format!("{lock}\n")).unwrap();
        git(&human, &["commit", "-q", "-am", "Human edits README"]);
        git(&human, &["push", "-q", "origin", "main"]);

        let (ok, err) = sluice(&args);
        assert!(ok, "start with a stale {lock}: {err}");
        assert!(
            err.contains("removed a stale git lock file") && err.contains(lock),
            "the removal is logged: {err}"
        );
        assert!(!path.exists(), "{lock} removed");
        assert_eq!(
            std::fs::read_to_string(work.join("README.md")).unwrap(),
            format!("{lock}\n"),
            "the clone caught up with the remote"
        );
    }
}
