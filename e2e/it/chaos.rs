//! Chaos: two real `sluice run` daemons on one remote, each SIGKILLed and restarted at random
//! moments (fixed seed) while a human pushes unrelated commits and new revisions, over a
//! local-path remote and over `git daemon`. Afterwards the whole history is checked:
//!
//! - every human commit is on main;
//! - every update of main in the bare repo's reflog is a fast-forward;
//! - at every sluice commit the route, the status file and the trailers agree;
//! - no Progressing step of a rollout is committed twice or skipped;
//! - the new revision's weight never goes down in a rollout;
//! - every rollout ends Succeeded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::support::canary::web_httproute as canary;
use crate::support::{
    first_parent_commits_of, git, git_lines, git_ok, human_clone, human_commit, seeded_remote,
    sluice_daemon, Daemon, GitDaemon, Schemas,
};

const CANARY_FILE: &str = "apps/web/canary.yaml";
const STATUS_FILE: &str = ".sluice/status/shop/web.yaml";
const ROUTE_FILE: &str = "clusters/shop/web/route.yaml";
const STEPS: u64 = 3;
/// Kill/restart cycles per test (the issue asks for at least 100).
const CYCLES: usize = 110;

/// One `sluice run` process on its own workdir `workdir`, polling every 200 ms.
fn daemon(repo: &str, workdir: PathBuf) -> Daemon {
    sluice_daemon(repo, &workdir).start()
}

/// The YAML `file` at `rev` of `bare`, if it is there and parses.
fn yaml_at(bare: &Path, rev: &str, file: &str) -> Option<Json> {
    let out = Command::new("git")
        .args(["show", &format!("{rev}:{file}")])
        .current_dir(bare)
        .output()
        .ok()?;
    out.status.success().then_some(())?;
    serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout)).ok()
}

fn status_at(bare: &Path, rev: &str) -> Option<Json> {
    yaml_at(bare, rev, STATUS_FILE)
}

fn succeeded_with(status: &Json, revision: &str) -> bool {
    status["phase"] == "Succeeded" && status["promotedRevision"] == revision
}

/// Nothing left to do for `revision`: initialized with it, or its rollout succeeded.
fn settled_at(status: &Json, revision: &str) -> bool {
    (status["phase"] == "Initialized" || status["phase"] == "Succeeded")
        && status["promotedRevision"] == revision
}

/// What one sluice commit on main says, read back from git.
#[derive(Debug)]
struct SluiceCommit {
    sha: String,
    status: Json,
    /// Route weight of each backend service.
    weights: BTreeMap<String, u64>,
    trailer_weights: String,
}

fn sluice_commits(bare: &Path, schemas: &mut Schemas) -> Vec<SluiceCommit> {
    first_parent_commits_of(bare, "shop/web")
        .into_iter()
        .map(|(sha, trailer_weights)| {
            let status = status_at(bare, &sha)
                .unwrap_or_else(|| panic!("{sha}: a sluice commit without a readable status"));
            let route_text = git(bare, &["show", &format!("{sha}:{ROUTE_FILE}")]);
            let route: Json = serde_saphyr::from_str(&route_text).expect("route is YAML");
            let errors = schemas.errors(&route);
            assert!(
                errors.is_empty(),
                "{sha}: route is not schema-valid: {errors:?}"
            );
            let weights = route["spec"]["rules"][0]["backendRefs"]
                .as_array()
                .expect("backendRefs")
                .iter()
                .map(|r| {
                    let name = r["name"].as_str().expect("backend name").to_string();
                    (name, r["weight"].as_u64().unwrap_or(1))
                })
                .collect();
            SluiceCommit {
                sha,
                status,
                weights,
                trailer_weights,
            }
        })
        .collect()
}

/// The bare repo's reflog of main as (old, new) pairs.
fn reflog_of_main(bare: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(bare.join("logs/refs/heads/main"))
        .expect("the bare repo keeps a reflog of main (core.logAllRefUpdates=always)");
    text.lines()
        .map(|l| {
            let mut fields = l.split(' ');
            let old = fields.next().expect("old").to_string();
            let new = fields.next().expect("new").to_string();
            (old, new)
        })
        .collect()
}

fn run_chaos(seed: u64, remote_of: impl FnOnce(&Path) -> (String, Option<GitDaemon>)) {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &[(CANARY_FILE, &canary("v1"))]);
    git(&bare, &["config", "core.logAllRefUpdates", "always"]);
    let (url, _git_daemon) = remote_of(&bare);
    let mut rng = fastrand::Rng::with_seed(seed);

    let mut daemons = [
        daemon(&url, tmp.path().join("a")),
        daemon(&url, tmp.path().join("b")),
    ];
    let human = human_clone(&url, &tmp.path().join("human"));
    let mut human_shas = Vec::new();
    let mut revisions = vec!["v1".to_string()];

    for cycle in 0..CYCLES {
        std::thread::sleep(Duration::from_millis(rng.u64(50..600)));
        if rng.bool() {
            human_commit(
                &human,
                &format!("notes/{cycle}.txt"),
                &format!("note {cycle}\n"),
                &format!("notes: {cycle}"),
            );
            human_shas.push(git(&human, &["rev-parse", "HEAD"]).trim().to_string());
        }
        let current = revisions.last().expect("a revision").clone();
        if status_at(&bare, "main").is_some_and(|s| settled_at(&s, &current)) {
            let next = format!("v{}", revisions.len() + 1);
            human_commit(
                &human,
                CANARY_FILE,
                &canary(&next),
                &format!("web: roll out {next}"),
            );
            human_shas.push(git(&human, &["rev-parse", "HEAD"]).trim().to_string());
            revisions.push(next);
        }
        daemons[rng.usize(0..2)].kill_and_restart();
    }

    let last = revisions.last().expect("a revision").clone();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !status_at(&bare, "main").is_some_and(|s| settled_at(&s, &last)) {
        assert!(
            Instant::now() < deadline,
            "the last rollout ({last}) did not finish; status {:?}",
            status_at(&bare, "main")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for daemon in daemons {
        assert!(daemon.sigterm().success(), "graceful shutdown on SIGTERM");
    }
    assert!(
        revisions.len() >= 3,
        "the chaos run covered too few rollouts to mean much: {revisions:?}"
    );

    for sha in &human_shas {
        assert!(
            git_ok(&bare, &["merge-base", "--is-ancestor", sha, "main"]),
            "human commit {sha} was lost"
        );
    }

    let reflog = reflog_of_main(&bare);
    assert!(!reflog.is_empty());
    for (old, new) in &reflog {
        if old.chars().all(|c| c == '0') {
            continue;
        }
        assert!(
            git_ok(&bare, &["merge-base", "--is-ancestor", old, new]),
            "main moved {old} -> {new}, not a fast-forward"
        );
    }

    let mut schemas = Schemas::default();
    let commits = sluice_commits(&bare, &mut schemas);
    for c in &commits {
        let stable = c.status["stableService"].as_str().expect("stableService");
        let other = if stable == "web-blue" {
            "web-green"
        } else {
            "web-blue"
        };
        let weight = |name: &str| c.weights.get(name).copied().unwrap_or(0);
        let (primary, canary) = (&c.status["primaryWeight"], &c.status["canaryWeight"]);
        assert_eq!(
            weight(stable),
            primary.as_u64().unwrap(),
            "{}: stable weight",
            c.sha
        );
        assert_eq!(
            weight(other),
            canary.as_u64().unwrap(),
            "{}: other weight",
            c.sha
        );
        assert_eq!(
            c.trailer_weights,
            format!("primary={primary} canary={canary}"),
            "{}: trailer and status agree",
            c.sha
        );
    }

    for revision in &revisions[1..] {
        let rollout: Vec<&SluiceCommit> = commits
            .iter()
            .skip_while(|c| c.status["canaryRevision"] != revision.as_str())
            .take_while(|c| !succeeded_with(&c.status, revision))
            .collect();
        let end = commits
            .iter()
            .find(|c| succeeded_with(&c.status, revision))
            .unwrap_or_else(|| panic!("rollout {revision} never ended Succeeded"));
        assert!(!rollout.is_empty(), "rollout {revision} left no commit");
        let steps: Vec<u64> = rollout
            .iter()
            .filter(|c| c.status["phase"] == "Progressing")
            .map(|c| c.status["step"].as_u64().expect("step"))
            .collect();
        // Step 0 is the commit that detects the new revision, then one per weight step.
        assert_eq!(
            steps,
            (0..=STEPS).collect::<Vec<_>>(),
            "rollout {revision}: every Progressing step committed exactly once"
        );
        // The new revision is the service that ends with all traffic.
        let new = end.status["stableService"].as_str().expect("stableService");
        let mut previous = 0;
        for c in rollout.iter().copied().chain([end]) {
            let weight = c.weights.get(new).copied().unwrap_or(0);
            assert!(
                weight >= previous,
                "rollout {revision}: {}: traffic to the new revision went down {previous} -> {weight}",
                c.sha
            );
            previous = weight;
        }
        assert_eq!(
            previous, 100,
            "rollout {revision} ends with all traffic on {new}"
        );
    }
}

#[test]
fn chaos_two_killed_daemons_on_a_local_path_remote_keep_every_invariant() {
    run_chaos(0x51u64 << 32 | 0xce, |bare| {
        (bare.display().to_string(), None)
    });
}

#[test]
fn chaos_two_killed_daemons_through_git_daemon_keep_every_invariant() {
    run_chaos(0x5eed, |bare| {
        let daemon = GitDaemon::start(bare.parent().expect("parent"));
        (daemon.url("config.git"), Some(daemon))
    });
}

/// Waves under chaos: a route-only canary `shop/rel` released in three waves.
mod waves {
    use super::*;

    const FILE: &str = "apps/rel/canary.yaml";
    const WAVES: [&str; 3] = ["staging", "eu", "us"];
    /// Kill/restart cycles while the releases run.
    const CYCLES: usize = 80;

    fn canary(revision: &str) -> String {
        let mut text = crate::support::canary::route_only_smi(
            "shop",
            "rel",
            revision,
            "    interval: 1s\n    threshold: 1\n    stepWeights: [50]",
        );
        text.push_str("  waves:\n");
        for wave in WAVES {
            text.push_str(&format!(
                "    - {{name: {wave}, output: clusters/{wave}/rel, settle: 1s}}\n"
            ));
        }
        text
    }

    fn wave_status(bare: &Path, rev: &str, wave: &str) -> Option<Json> {
        yaml_at(bare, rev, &format!(".sluice/status/shop/rel.{wave}.yaml"))
    }

    /// Every wave at main has nothing left to do for `revision`.
    fn released(bare: &Path, revision: &str) -> bool {
        WAVES
            .iter()
            .all(|w| wave_status(bare, "main", w).is_some_and(|s| settled_at(&s, revision)))
    }

    /// One sluice commit of the release on main's first-parent line, oldest first.
    #[derive(Debug)]
    struct WaveCommit {
        sha: String,
        wave: String,
        phase: String,
        step: String,
        revision: String,
    }

    fn wave_commits(bare: &Path) -> Vec<WaveCommit> {
        let format = "--format=%H|%(trailers:key=Sluice-Wave,valueonly,separator=)|%(trailers:key=Sluice-Phase,valueonly,separator=)|%(trailers:key=Sluice-Step,valueonly,separator=)|%(trailers:key=Sluice-Revision,valueonly,separator=)";
        git(
            bare,
            &["log", "--first-parent", "--reverse", format, "main"],
        )
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            (f.len() == 5 && !f[1].is_empty()).then(|| WaveCommit {
                sha: f[0].into(),
                wave: f[1].into(),
                phase: f[2].into(),
                step: f[3].into(),
                revision: f[4].into(),
            })
        })
        .collect()
    }

    /// The first-parent commits of main that change `folder`, as positions in `order`.
    fn touching(bare: &Path, folder: &str, order: &[String]) -> Vec<usize> {
        git(
            bare,
            &["log", "--first-parent", "--format=%H", "main", "--", folder],
        )
        .lines()
        .filter_map(|sha| order.iter().position(|s| s == sha))
        .collect()
    }

    /// For `revision`: in each wave, every Progressing step once and one promotion; wave k+1
    /// has no commit (and its folder no change) before wave k's promotion.
    fn check_release(bare: &Path, commits: &[WaveCommit], revision: &str) {
        let order = git_lines(
            bare,
            &["log", "--first-parent", "--reverse", "--format=%H", "main"],
        );
        let at = |sha: &str| order.iter().position(|s| s == sha).expect("on main");
        let start = commits
            .iter()
            .find(|c| c.revision == revision)
            .map(|c| at(&c.sha))
            .unwrap_or_else(|| panic!("release {revision} left no commit: {commits:#?}"));
        let mut promoted_at = None;
        for wave in WAVES {
            let mine: Vec<&WaveCommit> = commits
                .iter()
                .filter(|c| c.wave == wave && c.revision == revision)
                .collect();
            let steps: Vec<&str> = mine
                .iter()
                .filter(|c| c.phase == "Progressing")
                .map(|c| c.step.as_str())
                .collect();
            assert_eq!(
                steps,
                ["0/1", "1/1"],
                "{revision} in {wave}: every Progressing step exactly once: {mine:#?}"
            );
            let promotions: Vec<&&WaveCommit> =
                mine.iter().filter(|c| c.phase == "Succeeded").collect();
            assert_eq!(
                promotions.len(),
                1,
                "{revision} in {wave}: one promotion: {mine:#?}"
            );
            let first = at(&mine[0].sha);
            if let Some(previous) = promoted_at {
                assert!(
                    first > previous,
                    "{revision}: {wave} committed before the wave before it was promoted: {commits:#?}"
                );
                let early: Vec<usize> = touching(bare, &format!("clusters/{wave}/rel"), &order)
                    .into_iter()
                    .filter(|&i| i > start && i < previous)
                    .collect();
                assert!(
                    early.is_empty(),
                    "{revision}: clusters/{wave}/rel changed before the wave before it was promoted (commits {early:?})"
                );
            }
            let promotion = at(&promotions[0].sha);
            assert!(
                mine.iter().all(|c| at(&c.sha) <= promotion),
                "{revision} in {wave}: nothing after its promotion: {mine:#?}"
            );
            promoted_at = Some(promotion);
        }
    }

    #[test]
    fn chaos_a_three_wave_release_survives_killed_daemons_with_no_wave_skipped_or_repeated() {
        let tmp = tempfile::tempdir().unwrap();
        let bare = seeded_remote(tmp.path(), &[(FILE, &canary("v1"))]);
        git(&bare, &["config", "core.logAllRefUpdates", "always"]);
        let git_daemon = GitDaemon::start(tmp.path());
        let url = git_daemon.url("config.git");
        let mut rng = fastrand::Rng::with_seed(0x3a7e5);
        let mut daemons = [
            daemon(&url, tmp.path().join("a")),
            daemon(&url, tmp.path().join("b")),
        ];
        let human = human_clone(&url, &tmp.path().join("human"));
        let mut revisions = vec!["v1".to_string()];
        for _ in 0..CYCLES {
            std::thread::sleep(Duration::from_millis(rng.u64(50..600)));
            let current = revisions.last().expect("a revision").clone();
            if released(&bare, &current) {
                let next = format!("v{}", revisions.len() + 1);
                git(&human, &["pull", "-q", "origin", "main"]);
                human_commit(
                    &human,
                    FILE,
                    &canary(&next),
                    &format!("rel: release {next}"),
                );
                revisions.push(next);
            }
            daemons[rng.usize(0..2)].kill_and_restart();
        }
        let last = revisions.last().expect("a revision").clone();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !released(&bare, &last) {
            assert!(
                Instant::now() < deadline,
                "the release of {last} did not finish: {:?}",
                WAVES.map(|w| wave_status(&bare, "main", w).map(|s| s["phase"].clone()))
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        for daemon in daemons {
            assert!(daemon.sigterm().success(), "graceful shutdown on SIGTERM");
        }
        assert!(
            revisions.len() >= 2,
            "the chaos run covered no release: {revisions:?}"
        );
        for (old, new) in reflog_of_main(&bare) {
            if !old.chars().all(|c| c == '0') {
                assert!(
                    git_ok(&bare, &["merge-base", "--is-ancestor", &old, &new]),
                    "main moved {old} -> {new}, not a fast-forward"
                );
            }
        }
        let commits = wave_commits(&bare);
        for revision in &revisions[1..] {
            check_release(&bare, &commits, revision);
        }
        for wave in WAVES {
            let status = wave_status(&bare, "main", wave).expect("a status");
            assert!(
                succeeded_with(&status, &last),
                "{wave} ends Succeeded on {last}: {status:?}"
            );
        }
    }
}
