//! The audit rows, measured for `cargo bench --bench audit` (`audit.rs`) and for `cargo bench
//! --bench tick` (`tick.rs`), which both include this file: `sluice audit` of a history sluice
//! made beside `git log -p` of the same branch, and audit's time per commit at C canaries
//! against the same at C/10.
//!
//! The repos are made by the real binary (`sluice reconcile`, twice) in a folder under
//! `CARGO_TARGET_TMPDIR`, on the file system the build is on (not a tmpfs `/tmp`). Times are
//! wall-clock medians; `/usr/bin/time` gives audit's peak RSS.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const EXE: &str = env!("CARGO_BIN_EXE_sluice");

/// Runs git in `dir` with a fixed identity; panics when it fails; its stdout.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "gc.auto=0"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A route-only canary `svc{n}` in namespace `team{n % 20}` at `revision`.
fn spec(n: usize, revision: &str) -> (String, String) {
    let ns = format!("team{}", n % 20);
    let text = [
        "apiVersion: sluice.dev/v1alpha1".to_string(),
        "kind: Canary".to_string(),
        format!("metadata: {{name: svc{n}, namespace: {ns}}}"),
        "spec:".to_string(),
        format!("  routeOnly: {{services: [svc{n}-a, svc{n}-b], revision: \"{revision}\"}}"),
        format!("  output: deploy/{ns}/svc{n}"),
        "  service: {port: 80}".to_string(),
        "  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}".to_string(),
        "  analysis: {interval: 1m, stepWeights: [5, 25, 50]}".to_string(),
    ]
    .join("\n");
    (format!("specs/{ns}/svc{n}.yaml"), text + "\n")
}

/// A bare repo with `canaries` canaries whose history sluice made: one reconcile that
/// initialises every canary, a human commit moving every canary to a new revision, and a
/// reconcile that starts every one (one commit per canary each time).
fn history(root: &Path, canaries: usize) -> PathBuf {
    let human = root.join("human");
    std::fs::create_dir_all(&human).unwrap();
    git(&human, &["init", "-q", "-b", "main"]);
    let write_specs = |revision: &str| {
        for n in 0..canaries {
            let (path, text) = spec(n, revision);
            let path = human.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    };
    write_specs("r1");
    std::fs::create_dir_all(human.join(".sluice")).unwrap();
    std::fs::write(
        human.join(".sluice/config.yaml"),
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\ncommits: perCanary\n",
    )
    .unwrap();
    git(&human, &["add", "-A"]);
    git(&human, &["commit", "-q", "-m", "canaries"]);
    let bare = root.join("config.git");
    let (h, b) = (human.display().to_string(), bare.display().to_string());
    git(root, &["clone", "-q", "--bare", &h, &b]);
    git(&human, &["remote", "add", "origin", &b]);
    let work = root.join("work");
    reconcile(&bare, &work);
    git(&human, &["pull", "-q", "--rebase", "origin", "main"]);
    write_specs("r2");
    git(&human, &["commit", "-q", "-am", "every canary to r2"]);
    git(&human, &["push", "-q", "origin", "main"]);
    reconcile(&bare, &work);
    bare
}

fn reconcile(bare: &Path, work: &Path) {
    let status = Command::new(EXE)
        .args(["reconcile", "--repo", &bare.display().to_string()])
        .args(["--workdir", &work.display().to_string()])
        .env("SLUICE_LOG", "error")
        .stdout(Stdio::null())
        .status()
        .expect("sluice reconcile");
    assert!(status.success(), "sluice reconcile failed");
}

/// Wall seconds and peak RSS (MiB) of `cmd` under `/usr/bin/time`, its stdout thrown away;
/// `ok` says which exit codes count as success.
fn timed(cmd: &mut Command, ok: impl Fn(i32) -> bool) -> (f64, f64) {
    let mut wrapped = Command::new("/usr/bin/time");
    wrapped
        .args(["-f", "@@usage %e %M"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped.env("SLUICE_LOG", "error");
    let started = Instant::now();
    let out = wrapped
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("/usr/bin/time runs");
    let wall = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(ok(out.status.code().unwrap_or(-1)), "{stderr}");
    let rss = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("@@usage "))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map_or(0.0, |k| k / 1024.0);
    (wall, rss)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Audit of one repo beside `git log -p`, medians of `runs` alternating runs:
/// (commits, audit seconds, `git log -p` seconds, audit peak RSS MiB).
fn measure(canaries: usize, runs: usize) -> (usize, f64, f64, f64) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let started = Instant::now();
    let bare = history(tmp.path(), canaries);
    let commits: usize = git(&bare, &["rev-list", "--count", "--first-parent", "main"])
        .trim()
        .parse()
        .unwrap();
    eprintln!(
        "{canaries} canaries: a history of {commits} commits made in {:.0?}",
        started.elapsed()
    );
    let (mut audit, mut log, mut rss) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut cmd = Command::new(EXE);
        cmd.args(["audit", "--dir", &bare.display().to_string(), "-o", "json"]);
        // A finding would mean the replay went wrong: the history is sluice's alone.
        let (wall, peak) = timed(&mut cmd, |code| code == 0);
        audit.push(wall);
        rss.push(peak);
        let mut cmd = Command::new("git");
        cmd.args(["log", "-p", "main"]).current_dir(&bare);
        log.push(timed(&mut cmd, |code| code == 0).0);
    }
    (commits, median(audit), median(log), median(rss))
}

/// One audit row, for each bench to print in its table.
pub struct AuditRow {
    pub name: String,
    pub sluice: String,
    pub baseline: String,
    pub ratio: f64,
    /// Decimals of the ratio as `audit.rs` prints it.
    pub digits: usize,
    pub goal: &'static str,
    /// The largest ratio that meets the goal.
    pub bound: f64,
    /// Audit's peak RSS, MiB.
    pub rss: Option<f64>,
}

/// The two audit rows at `canaries` canaries (per commit: against `canaries / 10`), medians of
/// `runs` runs, each handed to `row` as soon as it is measured.
pub fn rows(canaries: usize, runs: usize, mut row: impl FnMut(AuditRow)) {
    let small = (canaries / 10).max(1);
    let (commits, audit, log, rss) = measure(canaries, runs);
    row(AuditRow {
        name: format!("audit, {commits} commits, {canaries} canaries"),
        sluice: format!("{audit:.2} s"),
        baseline: format!("`git log -p` {log:.2} s"),
        ratio: audit / log.max(1e-9),
        digits: 1,
        goal: "≤ 10×",
        bound: 10.0,
        rss: Some(rss),
    });
    let (small_commits, small_audit, _, _) = measure(small, runs);
    let per = audit / commits as f64 * 1000.0;
    let small_per = small_audit / small_commits as f64 * 1000.0;
    row(AuditRow {
        name: format!("audit per commit, {canaries} vs {small} canaries"),
        sluice: format!("{per:.2} ms"),
        baseline: format!("{small_per:.2} ms ({small_commits} commits)"),
        ratio: per / small_per.max(1e-9),
        digits: 2,
        goal: "≤ 1.5×",
        bound: 1.5,
        rss: None,
    });
}
