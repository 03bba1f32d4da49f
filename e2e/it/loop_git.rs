//! The loop against real git: a `git daemon` remote, human commits racing sluice's, the real
//! binary as a daemon (two at once, and killed mid-rollout).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::served_clone;
use jiff::Timestamp;
use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::gitops::ConfigRepo;
use sluice::observer::Offline;
use sluice::tick::tick;

use crate::support::canary::web_httproute as canary;
use crate::support::rollout::{
    kustomize_builds, loop_context, ROUTE_ONLY_WEIGHTS as EXPECTED_WEIGHTS,
};
use crate::support::{
    commits_of, git, git_ok, human_clone, human_commit, run_sluice, seeded_remote, show,
    sluice_daemon, Daemon, GitDaemon, Schemas,
};

const CANARY_FILE: &str = "apps/web/canary.yaml";
const STATUS_FILE: &str = ".sluice/status/shop/web.yaml";
const OUTPUT: &str = "clusters/shop/web";
const ROUTE_FILE: &str = "clusters/shop/web/route.yaml";

/// The `web` canary at v1 on a bare remote in `tmp`, served by a `git daemon`: (the bare
/// remote, the daemon, its URL).
fn served_web(tmp: &Path) -> (PathBuf, GitDaemon, String) {
    let bare = seeded_remote(tmp, &[(CANARY_FILE, &canary("v1"))]);
    let daemon = GitDaemon::start(tmp);
    let url = daemon.url("config.git");
    (bare, daemon, url)
}

/// [`served_web`] and sluice's clone of it in `<tmp>/work`: (the bare remote, the daemon, its
/// URL, the clone).
fn served_web_clone(tmp: &Path) -> (PathBuf, GitDaemon, String, ConfigRepo) {
    let bare = seeded_remote(tmp, &[(CANARY_FILE, &canary("v1"))]);
    let (daemon, url, repo) = served_clone(tmp);
    (bare, daemon, url, repo)
}

/// Commits on main carrying `Sluice-Canary: shop/web`, oldest first: (sha, weights trailer).
fn sluice_commits(bare: &Path) -> Vec<(String, String)> {
    commits_of(bare, "shop/web")
}

/// At every sluice commit the route is schema-valid and carries the status file's weights.
fn check_every_commit(bare: &Path) {
    let mut schemas = Schemas::default();
    for (sha, trailer) in sluice_commits(bare) {
        let status: Json = serde_saphyr::from_str(&show(bare, &sha, STATUS_FILE)).unwrap();
        let route_text = show(bare, &sha, ROUTE_FILE);
        let route: Json = serde_saphyr::from_str(&route_text).unwrap();
        assert!(
            schemas.errors(&route).is_empty(),
            "{sha}: {:?}",
            schemas.errors(&route)
        );
        let stable = status["stableService"].as_str().unwrap();
        let refs = route["spec"]["rules"][0]["backendRefs"].as_array().unwrap();
        let weight_of = |name: &str| {
            refs.iter()
                .find(|r| r["name"] == name)
                .and_then(|r| r["weight"].as_u64())
                .unwrap()
        };
        let other = if stable == "web-blue" {
            "web-green"
        } else {
            "web-blue"
        };
        assert_eq!(
            weight_of(stable),
            status["primaryWeight"].as_u64().unwrap(),
            "{sha}"
        );
        assert_eq!(
            weight_of(other),
            status["canaryWeight"].as_u64().unwrap(),
            "{sha}"
        );
        assert_eq!(
            trailer,
            format!(
                "primary={} canary={}",
                status["primaryWeight"], status["canaryWeight"]
            ),
            "{sha}: trailer and status agree"
        );
    }
}

/// The weight each committed route gives `service`, oldest first, from the commit that
/// started the rollout; it never goes down, and ends at 100.
fn assert_new_revision_traffic_never_goes_down(bare: &Path, service: &str) {
    let mut weights = Vec::new();
    let mut started = false;
    for (sha, _) in sluice_commits(bare) {
        let subject = git(bare, &["log", "-1", "--format=%s", &sha]);
        started |= subject.contains("detected");
        if !started {
            continue;
        }
        let route: Json = serde_saphyr::from_str(&show(bare, &sha, ROUTE_FILE)).unwrap();
        let weight = route["spec"]["rules"][0]["backendRefs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == service)
            .and_then(|r| r["weight"].as_u64())
            .unwrap();
        weights.push((subject.trim().to_string(), weight));
    }
    assert!(
        weights.windows(2).all(|w| w[1].1 >= w[0].1),
        "{service} runs the new revision; its traffic went down: {weights:#?}"
    );
    assert_eq!(weights.last().map(|w| w.1), Some(100), "{weights:#?}");
}

fn phase_on_remote(bare: &Path) -> Option<String> {
    let status = crate::support::status_at_main(bare, STATUS_FILE)?;
    Some(format!("{}:{}", status["phase"].as_str()?, status["step"]))
}

#[test]
fn route_only_canary_runs_to_succeeded_through_git_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, _daemon, url, mut repo) = served_web_clone(tmp.path());
    let ctx = loop_context(&Offline);
    let t0 = Timestamp::now();
    let first = tick(&mut repo, &ctx, t0).unwrap();
    assert_eq!(first.commits, 1, "{first:?}");
    kustomize_builds(&bare, OUTPUT);

    let human = human_clone(&url, &tmp.path().join("human"));
    human_commit(&human, CANARY_FILE, &canary("v2"), "web: roll out v2");

    // Simulated clock: each tick happens at the time the previous one asked to be woken.
    let mut now = t0 + Duration::from_secs(1);
    for _ in 0..50 {
        let report = tick(&mut repo, &ctx, now).unwrap();
        assert!(report.spec_errors.is_empty(), "{:?}", report.spec_errors);
        let done = report.outcomes[0].phase == Some(Phase::Succeeded) && report.commits == 1;
        if done {
            break;
        }
        now = report.wake_at().unwrap_or(now + Duration::from_secs(1));
    }
    let weights: Vec<String> = sluice_commits(&bare).into_iter().map(|(_, w)| w).collect();
    assert_eq!(weights, EXPECTED_WEIGHTS, "one commit per step");
    check_every_commit(&bare);
    kustomize_builds(&bare, OUTPUT);
    assert_new_revision_traffic_never_goes_down(&bare, "web-green");
    let subjects = git(&bare, &["log", "--reverse", "--format=%s", "main"]);
    assert!(
        subjects.contains("web: advance canary weight 10 -> 30 (step 2/3)"),
        "{subjects}"
    );
    assert!(
        subjects.contains("web: route 100% to web-green (promotion)"),
        "the promotion routes to the service that runs the new revision: {subjects}"
    );
    assert!(
        subjects.contains("web: roll out v2"),
        "the human commit is kept"
    );
    let status: Json = serde_saphyr::from_str(&show(&bare, "main", STATUS_FILE)).unwrap();
    assert_eq!(
        status["stableService"], "web-green",
        "success makes the other service stable"
    );
    // A tick with nothing to do commits nothing.
    let idle = tick(&mut repo, &ctx, now + Duration::from_secs(60)).unwrap();
    assert_eq!(idle.commits, 0);
}

/// `reconcile`, `status`, `history` and `audit` open the clone, which fetches; each fetched a
/// second time right after, a wasted round trip to the remote on every run.
#[test]
fn one_shot_commands_fetch_the_remote_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, daemon, url) = served_web(tmp.path());
    let work = tmp.path().join("work").display().to_string();
    let source = ["--repo", url.as_str(), "--workdir", work.as_str()];
    let runs: [&[&str]; 5] = [
        &["reconcile"],
        &["reconcile"],
        &["status"],
        &["history", "shop/web"],
        &["audit"],
    ];
    for (n, command) in runs.into_iter().enumerate() {
        let args: Vec<&str> = command.iter().chain(&source).copied().collect();
        let (code, _, stderr) = run_sluice(&args);
        assert_eq!(code, 0, "sluice {command:?}: {stderr}");
        assert_eq!(
            daemon.fetches("config.git"),
            n + 1,
            "sluice {command:?} fetches once (the first clones)"
        );
    }
}

#[test]
fn concurrent_writer_loses_no_commit_and_sluice_never_forces() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, _daemon, url, mut repo) = served_web_clone(tmp.path());
    let ctx = loop_context(&Offline);
    tick(&mut repo, &ctx, Timestamp::now()).unwrap();
    let human = human_clone(&url, &tmp.path().join("human"));
    human_commit(&human, CANARY_FILE, &canary("v2"), "web: roll out v2");

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        let clone = human_clone(&url, &tmp.path().join("writer"));
        std::thread::spawn(move || {
            let mut written = Vec::new();
            let mut i = 0;
            // At least five commits, however slow the machine: under load the rollout can
            // finish before the writer's git processes have run that often.
            while (!stop.load(Ordering::SeqCst) || i < 5) && i < 200 {
                let msg = format!("notes: entry {i}");
                human_commit(&clone, &format!("notes/{i}.txt"), &msg, &msg);
                written.push(msg);
                i += 1;
                std::thread::sleep(Duration::from_millis(250));
            }
            written
        })
    };

    let mut heads = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let report = tick(&mut repo, &ctx, Timestamp::now()).unwrap();
        heads.push(git(&bare, &["rev-parse", "main"]).trim().to_string());
        if report.outcomes[0].phase == Some(Phase::Succeeded) && report.commits == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "rollout did not finish");
        std::thread::sleep(sluice::cli::run::sleep_for(
            report.wake_at(),
            Timestamp::now(),
            Duration::from_millis(300),
        ));
    }
    stop.store(true, Ordering::SeqCst);
    let written = writer.join().unwrap();
    heads.push(git(&bare, &["rev-parse", "main"]).trim().to_string());

    let log = git(&bare, &["log", "--format=%s", "main"]);
    for msg in &written {
        assert!(log.lines().any(|l| l == msg), "lost human commit {msg:?}");
    }
    for pair in heads.windows(2) {
        assert!(
            git_ok(&bare, &["merge-base", "--is-ancestor", &pair[0], &pair[1]]),
            "remote head {} is not an ancestor of {}: a force push happened",
            pair[0],
            pair[1]
        );
    }
    let weights: Vec<String> = sluice_commits(&bare).into_iter().map(|(_, w)| w).collect();
    assert_eq!(weights, EXPECTED_WEIGHTS, "no step skipped or repeated");
    check_every_commit(&bare);
}

/// `sluice run` on `url` polling every 200 ms, its clone in `workdir`.
fn daemon(url: &str, workdir: &Path) -> Daemon {
    sluice_daemon(url, workdir).start()
}

fn wait_for(bare: &Path, what: &str, pred: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(p) = phase_on_remote(bare) {
            if pred(&p) {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; at {:?}",
            phase_on_remote(bare)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn two_daemons_never_advance_a_canary_twice_in_one_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, _daemon, url) = served_web(tmp.path());
    let a = daemon(&url, &tmp.path().join("a"));
    let b = daemon(&url, &tmp.path().join("b"));
    wait_for(&bare, "initialization", |p| p.starts_with("Initialized"));
    let human = human_clone(&url, &tmp.path().join("human"));
    human_commit(&human, CANARY_FILE, &canary("v2"), "web: roll out v2");
    wait_for(&bare, "success", |p| p.starts_with("Succeeded"));
    assert!(a.sigterm().success(), "graceful shutdown on SIGTERM");
    assert!(b.sigterm().success());

    let commits = sluice_commits(&bare);
    let weights: Vec<String> = commits.iter().map(|(_, w)| w.clone()).collect();
    assert_eq!(
        weights, EXPECTED_WEIGHTS,
        "each step committed exactly once"
    );
    // Consecutive steps are at least one interval apart (stepStarted is in the status).
    let started: Vec<Timestamp> = commits
        .iter()
        .map(|(sha, _)| {
            let s: Json = serde_saphyr::from_str(&show(&bare, sha, STATUS_FILE)).unwrap();
            s["stepStarted"].as_str().unwrap().parse().unwrap()
        })
        .collect();
    for i in 2..started.len() {
        let gap = started[i].duration_since(started[i - 1]);
        assert!(
            gap >= jiff::SignedDuration::from_millis(999),
            "steps {} and {i} only {gap:?} apart",
            i - 1
        );
    }
    check_every_commit(&bare);
}

#[test]
fn sigkill_mid_rollout_resumes_without_skipping_or_repeating_a_step() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, _daemon, url) = served_web(tmp.path());
    let workdir = tmp.path().join("work");
    let first = daemon(&url, &workdir);
    wait_for(&bare, "initialization", |p| p.starts_with("Initialized"));
    let human = human_clone(&url, &tmp.path().join("human"));
    human_commit(&human, CANARY_FILE, &canary("v2"), "web: roll out v2");
    wait_for(&bare, "step 2", |p| p == "Progressing:2");
    first.sigkill();
    let second = daemon(&url, &workdir);
    wait_for(&bare, "success", |p| p.starts_with("Succeeded"));
    assert!(second.sigterm().success());
    let weights: Vec<String> = sluice_commits(&bare).into_iter().map(|(_, w)| w).collect();
    assert_eq!(weights, EXPECTED_WEIGHTS);
    check_every_commit(&bare);
}

/// `sluice demo` with `args` succeeds and prints each of `expected`; its stdout.
fn demo_prints(args: &[&str], expected: &[&str]) -> String {
    let out = crate::support::run_ok(&mut crate::support::sluice_demo(args));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in expected {
        assert!(stdout.contains(line), "{line:?} not in {stdout}");
    }
    stdout
}

#[test]
fn demo_runs_from_the_binary() {
    let out = demo_prints(
        &[],
        &[
            "canary demo/podinfo ended Succeeded",
            "podinfo: promotion completed, canary scaled down",
            // The real spacing, and why.
            "one step every 10 s (analysis.interval 10s): 10 s is Flagger's floor, it raises any shorter interval to 10 s",
            // The path printed is deleted at the end: how to keep it.
            "(a temporary folder, deleted when the demo ends: `--keep DIR` keeps the repos)",
            "is deleted now; run the demo with `--keep DIR` to keep the repos",
        ],
    );
    assert!(!out.contains("interval 1s"), "{out}");
    // The steps are as far apart as the header says.
    // Initialization, then from the new revision to the end, a decision every 10 s.
    let decisions = crate::support::printed_seconds(&out, "] podinfo: ");
    assert_eq!(decisions.len(), 10, "{out}");
    assert!(
        decisions[1..].windows(2).all(|w| w[1] - w[0] == 10.0),
        "{decisions:?} in {out}"
    );
    // Each judged step prints the values it was judged on, under its line.
    // The steps as they happen (`] `), not in the `git log` printed at the end.
    for step in [
        "] podinfo: advance canary weight 25 -> 50",
        "] podinfo: advance canary weight 50 -> 75",
        "] podinfo: promote revision",
    ] {
        assert_eq!(
            crate::support::line_after(&out, step),
            ["          checks: request-success-rate 99.93 (min 99) pass, request-duration 212 (max 500) pass"],
            "{step} in {out}"
        );
    }
}

#[test]
fn demo_fail_rolls_back_and_names_the_metric() {
    let out = demo_prints(
        &["--fail"],
        &[
            "canary demo/podinfo ended Failed",
            "request-success-rate 87.31 < 99",
        ],
    );
    // The failed check is named, with its value and bound, where it fails.
    assert_eq!(
        crate::support::line_after(&out, "] podinfo: failed check 1/2"),
        ["          checks: request-success-rate 87.31 (min 99) FAIL, request-duration 212 (max 500) pass"],
        "{out}"
    );
}

#[test]
fn demo_keep_does_not_say_the_repos_are_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let keep = tmp.path().join("demo");
    let out = crate::support::run_ok(crate::support::sluice_demo(&["--keep"]).arg(&keep));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("repos kept in {}", keep.display())),
        "{stdout}"
    );
    assert!(!stdout.contains("deleted"), "{stdout}");
    assert!(keep.join("config-repo.git").is_dir());
}
