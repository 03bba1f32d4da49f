//! Benchmark: one tick in which N canaries all advance one step, against the plain git CLI
//! doing the same file writes plus one commit and push on a warm clone, measured in the same
//! run; and sluice's peak memory. Reports numbers; asserts nothing about time.
//!
//! Run: `cargo bench --bench tick` (add `-- --quick` for 100 canaries only). Each case runs
//! three times on fresh repos and reports the median of each column. A debug build (`cargo test
//! --all-targets` runs this too) does the quick cases once: its times mean nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
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

fn canary(i: usize, revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata: {{name: app{i}, namespace: bench}}
spec:
  routeOnly: {{services: [app{i}-blue, app{i}-green], revision: \"{revision}\"}}
  output: clusters/bench/app{i}
  service: {{port: 8080}}
  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}
  analysis: {{interval: 1s, stepWeights: [10, 50]}}
"
    )
}

/// Runs sluice reconcile; returns wall time and peak RSS in KiB (when /usr/bin/time exists).
fn reconcile(url: &str, workdir: &Path) -> (Duration, Option<u64>) {
    let exe = env!("CARGO_BIN_EXE_sluice");
    let timed = Path::new("/usr/bin/time").exists();
    let mut cmd = if timed {
        let mut c = Command::new("/usr/bin/time");
        c.arg("-v").arg(exe);
        c
    } else {
        Command::new(exe)
    };
    cmd.args([
        "reconcile",
        "--repo",
        url,
        "--workdir",
        &workdir.display().to_string(),
    ])
    .env("SLUICE_LOG", "error")
    .stdout(Stdio::null());
    let start = Instant::now();
    let out = cmd.output().expect("sluice runs");
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rss = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.trim().parse().ok());
    (wall, rss)
}

/// Adds `n` commits of unrelated history on main with git fast-import.
fn add_history(bare: &Path, n: usize) {
    let mut stream = String::new();
    for i in 0..n {
        let content = format!("entry {i}\n");
        stream.push_str(&format!(
            "commit refs/heads/main\ncommitter bench <bench@example.com> {} +0000\ndata {}\nhistory {i}\n{}M 100644 inline notes/log.txt\ndata {}\n{content}\n",
            1_700_000_000 + i,
            format!("history {i}\n").len(),
            if i == 0 { "from refs/heads/main^0\n" } else { "" },
            content.len()
        ));
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(bare)
        .stdin(Stdio::piped())
        .spawn()
        .expect("fast-import");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stream.as_bytes())
        .expect("write");
    assert!(child.wait().expect("wait").success());
}

struct Result {
    canaries: usize,
    history: usize,
    mode: &'static str,
    sluice: Duration,
    git: Duration,
    rss_kib: Option<u64>,
}

/// `mode` is the repo's `commits:` setting: `perCanary` (one commit per decision, the
/// default) or `perTick` (the tick's decisions in one commit).
fn run_case(canaries: usize, history: usize, mode: &'static str) -> Result {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    // Seed: the canaries at v1, committed by a human.
    let seed = root.join("seed");
    std::fs::create_dir_all(&seed).expect("mkdir");
    git(&seed, &["init", "-q", "-b", "main"]);
    for i in 0..canaries {
        let dir = seed.join(format!("apps/app{i}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("canary.yaml"), canary(i, "v1")).expect("write");
    }
    std::fs::create_dir_all(seed.join(".sluice")).expect("mkdir");
    std::fs::write(
        seed.join(".sluice/config.yaml"),
        format!("apiVersion: sluice.dev/v1alpha1\nkind: Config\ncommits: {mode}\n"),
    )
    .expect("write");
    git(&seed, &["add", "-A"]);
    git(&seed, &["commit", "-q", "-m", "seed"]);
    let bare = root.join("config.git");
    git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            &seed.display().to_string(),
            &bare.display().to_string(),
        ],
    );
    if history > 1 {
        add_history(&bare, history - 1);
    }
    let url = bare.display().to_string();
    let workdir = root.join("sluice-work");
    // Warm up: clone and initialise every canary.
    reconcile(&url, &workdir);
    // A human starts a rollout of every canary.
    let human = root.join("human");
    git(root, &["clone", "-q", &url, &human.display().to_string()]);
    for i in 0..canaries {
        std::fs::write(
            human.join(format!("apps/app{i}/canary.yaml")),
            canary(i, "v2"),
        )
        .expect("write");
    }
    git(&human, &["commit", "-q", "-am", "roll out v2"]);
    git(&human, &["push", "-q", "origin", "main"]);
    // The baseline repo starts from the same state.
    let bare2 = root.join("baseline.git");
    git(
        root,
        &["clone", "-q", "--bare", &url, &bare2.display().to_string()],
    );
    let before = git(&bare, &["rev-parse", "main"]).trim().to_string();

    // The measured tick: every canary advances one step (New revision detected).
    let (sluice, rss_kib) = reconcile(&url, &workdir);

    // The git CLI doing the same writes: the files sluice changed, one commit, one push.
    let after = git(&bare, &["rev-parse", "main"]).trim().to_string();
    let changed: Vec<(String, String)> = git(&bare, &["diff", "--name-only", &before, &after])
        .lines()
        .map(|p| {
            (
                p.to_string(),
                git(&bare, &["show", &format!("{after}:{p}")]),
            )
        })
        .collect();
    let warm = root.join("warm");
    git(
        root,
        &[
            "clone",
            "-q",
            &bare2.display().to_string(),
            &warm.display().to_string(),
        ],
    );
    git(&warm, &["status", "--short"]);
    let start = Instant::now();
    for (path, text) in &changed {
        let full: PathBuf = warm.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(full, text).expect("write");
    }
    git(&warm, &["add", "-A"]);
    git(&warm, &["commit", "-q", "-m", "baseline"]);
    git(&warm, &["push", "-q", "origin", "main"]);
    let git_time = start.elapsed();
    Result {
        canaries,
        history,
        mode,
        sluice,
        git: git_time,
        rss_kib,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let debug = cfg!(debug_assertions);
    let quick = debug || std::env::args().any(|a| a == "--quick");
    let runs = if debug { 1 } else { 3 };
    let mut cases = vec![(100, 10, "perCanary"), (100, 10, "perTick")];
    if !quick {
        cases.extend([
            (1000, 10, "perCanary"),
            (1000, 10, "perTick"),
            (100, 20_000, "perCanary"),
            (1000, 20_000, "perTick"),
        ]);
    }
    println!("| canaries | history commits | commits | sluice tick | git CLI (writes + commit + push) | ratio | sluice peak RSS |");
    println!("|---:|---:|---|---:|---:|---:|---:|");
    for (n, h, mode) in cases {
        let results: Vec<Result> = (0..runs).map(|_| run_case(n, h, mode)).collect();
        let r = &results[0];
        let sluice = median(results.iter().map(|r| r.sluice.as_secs_f64()).collect());
        let git = median(results.iter().map(|r| r.git.as_secs_f64()).collect());
        let rss: Vec<f64> = results
            .iter()
            .filter_map(|r| r.rss_kib.map(|k| k as f64 / 1024.0))
            .collect();
        println!(
            "| {} | {} | {} | {:.3} s | {:.3} s | {:.2}x | {} |",
            r.canaries,
            r.history,
            r.mode,
            sluice,
            git,
            sluice / git.max(1e-9),
            if rss.is_empty() {
                "n/a".to_string()
            } else {
                format!("{:.1} MiB", median(rss))
            }
        );
    }
}
