//! Benchmark: several replicas of `sluice run --shards S`, as processes, each in a network
//! namespace of its own with its own address (`ip netns`; where that is not available, on
//! loopback), against an HTTP-level fake of the Kubernetes API that serves Leases with real
//! resourceVersion semantics (`e2e/it/support/kube.rs`) and one git remote served by `git
//! daemon`. Reports numbers; asserts nothing about time.
//!
//! | row | measured | goal |
//! |---|---|---|
//! | R replicas vs 1 | C canaries at rest, P of them rolled out by one human commit: step commits per second of the rollout, R replicas against 1; how late each step commit lands after it is due (the previous step's decision time + the interval; the first step: the human's push), by the remote's post-receive hook; non-fast-forward pushes decided again, per commit | step commits land within one poll interval of being due; non-FF retries ≤ 1 per commit on average |
//! | replica cut off | the same R replicas, one cut off (its link down) mid-rollout: from the cut until every shard is held by the others (from the Leases); each progressing canary's trailers: every step once, in order, then Succeeded | taken over within lease duration + one poll; no step repeated or skipped |
//!
//! Run: `cargo bench --bench replicas` (10,000 canaries, 1,000 progressing, 4 replicas, 16
//! shards); scale with `SLUICE_BENCH_CANARIES`, `SLUICE_BENCH_PROGRESSING`,
//! `SLUICE_BENCH_REPLICAS`. `-- --quick`, and a debug build (`cargo test --all-targets` runs it
//! too), is 60 canaries, 8 progressing, 4 shards: its numbers mean nothing.

// A benchmark is test code (built without `cfg(test)`, as `harness = false`): it may unwrap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "../git_server.rs"]
#[allow(dead_code)] // the bench serves over `git daemon` only
mod git_server;
use git_server::GitDaemon;

#[path = "audit_rows.rs"]
#[allow(dead_code)] // the bench runs git with its fixed identity only
mod audit_rows;
use audit_rows::git;

#[path = "../it/support/daemon.rs"]
#[allow(dead_code)] // the bench starts, reads and stops daemons only
mod daemon;
use daemon::{sluice_daemon, Daemon, DaemonBuilder};

// The fake Kubernetes API and what it needs, shared with the `it` tests by path.
#[path = "../it/support/kube.rs"]
#[allow(dead_code)] // the bench serves Leases only
mod kube;
#[path = "../it/support/netns.rs"]
mod netns;
#[path = "../it/support/schemas.rs"]
#[allow(dead_code)] // the fake validates the objects it is given; Leases are not
mod schemas;
use kube::{kubeconfig, Door, FakeKubeApi};
use netns::Host;
use schemas::Schemas;

const LEASE_NS: &str = "sluice-system";
/// Each canary's steps: the new revision detected (weight 0), then these weights.
const STEP_WEIGHTS: [u64; 4] = [0, 10, 30, 60];
const NAMESPACES: usize = 50;

struct Scale {
    canaries: usize,
    progressing: usize,
    replicas: usize,
    shards: u32,
    /// `--poll`, seconds.
    poll: u64,
    /// The canaries' `analysis.interval`, seconds.
    interval: u64,
    /// `--lease-duration`, seconds.
    lease: u64,
    /// How long any one wait may take before the bench gives up.
    limit: Duration,
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Canary `i`'s namespace, name and spec file.
fn id(i: usize) -> (String, String, String) {
    let ns = format!("ns{}", i % NAMESPACES);
    let name = format!("c{i}");
    let file = format!("apps/{ns}/{name}/canary.yaml");
    (ns, name, file)
}

/// A route-only canary: three weight steps every `interval` seconds.
fn spec(i: usize, revision: &str, interval: u64) -> String {
    let (ns, name, _) = id(i);
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata: {{name: {name}, namespace: {ns}}}
spec:
  routeOnly: {{services: [{name}-blue, {name}-green], revision: \"{revision}\"}}
  output: clusters/{ns}/{name}
  service: {{port: 8080}}
  route:
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    parentRefs: [{{name: gw, namespace: infra}}]
  analysis: {{interval: {interval}s, stepWeights: [10, 30, 60]}}
"
    )
}

/// Writes canaries `range` at `revision` into `clone`.
fn write_specs(clone: &Path, range: std::ops::Range<usize>, revision: &str, interval: u64) {
    for i in range {
        let path = clone.join(id(i).2);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, spec(i, revision, interval)).unwrap();
    }
}

/// A post-receive hook that appends `<time> <sha>` for every commit a push lands on main.
const HOOK: &str = r#"#!/bin/sh
t=$(date +%s.%N)
while read old new ref; do
  [ "$ref" = refs/heads/main ] || continue
  if [ "$old" = 0000000000000000000000000000000000000000 ]; then
    git rev-list "$new"
  else
    git rev-list "$old..$new"
  fi | sed "s/^/$t /" >> landed.log
done
"#;

/// The remote `<root>/served/config.git` with every canary at `v1`, and a human's clone of it.
fn remote(root: &Path, scale: &Scale) -> (PathBuf, PathBuf) {
    let served = root.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let bare = served.join("config.git");
    git(
        root,
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    let human = root.join("human");
    git(
        root,
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            human.to_str().unwrap(),
        ],
    );
    git(&human, &["checkout", "-q", "-b", "main"]);
    write_specs(&human, 0..scale.canaries, "v1", scale.interval);
    git(&human, &["add", "-A"]);
    git(&human, &["commit", "-qm", "fleet at v1"]);
    git(&human, &["push", "-q", "origin", "main"]);
    (bare, human)
}

/// Every canary's status on `bare`'s main (`None`: none yet), read by one `git cat-file`.
fn phases(bare: &Path, canaries: usize) -> Vec<Option<(String, String)>> {
    let mut child = Command::new("git")
        .args(["cat-file", "--batch"])
        .current_dir(bare)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let asks: String = (0..canaries)
        .map(|i| {
            let (ns, name, _) = id(i);
            format!("main:.sluice/status/{ns}/{name}.yaml\n")
        })
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(asks.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    // Each answer: `<sha> blob <size>\n<content>\n`, or `<ask> missing\n`.
    let bytes = &out.stdout;
    let mut at = 0;
    let mut found = Vec::with_capacity(canaries);
    while let Some(end) = bytes[at..].iter().position(|&b| b == b'\n') {
        let head = String::from_utf8_lossy(&bytes[at..at + end]).into_owned();
        at += end + 1;
        if head.ends_with(" missing") {
            found.push(None);
            continue;
        }
        let size: usize = head.rsplit(' ').next().unwrap().parse().unwrap();
        let text = String::from_utf8_lossy(&bytes[at..at + size]);
        at += size + 1;
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_default()
                .to_string()
        };
        found.push(Some((field("phase: "), field("promotedRevision: "))));
    }
    found
}

/// Waits (every 100 ms, at most `limit`) until `done` holds for canaries `0..n`.
fn wait_phases(
    bare: &Path,
    n: usize,
    limit: Duration,
    what: &str,
    done: impl Fn(&str, &str) -> bool,
    logs: impl Fn() -> String,
) {
    let until = Instant::now() + limit;
    loop {
        let all = phases(bare, n);
        let ready = all
            .iter()
            .filter(|s| s.as_ref().is_some_and(|(p, r)| done(p, r)))
            .count();
        if ready == n {
            return;
        }
        assert!(
            Instant::now() < until,
            "{what}: {ready} of {n} after {limit:?}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where the replicas run: a network namespace each, or loopback with a door each to the API.
enum Hosts {
    Namespaces(Vec<Host>, GitDaemon),
    Loopback(Vec<Door>, GitDaemon),
}

impl Hosts {
    fn cut(&mut self, r: usize) {
        match self {
            Hosts::Namespaces(hosts, _) => hosts[r].cut(),
            Hosts::Loopback(doors, _) => doors[r].close(),
        }
    }
}

/// One run: `replicas` replicas on a fresh copy of `template`, the first `progressing`
/// canaries rolled out; `cut` cuts replica 1 off once the rollout has begun.
struct Run {
    replicas: usize,
    cut: bool,
}

/// What one run measured.
struct Measured {
    /// Step commits (every canary's Progressing commits of the rollout).
    steps: usize,
    /// From the human's push landing to the last step commit landing, seconds.
    span: f64,
    /// How late each step commit landed after it was due, seconds.
    late: Vec<f64>,
    /// Pushes rejected as non-fast-forward, over all replicas.
    retries: usize,
    /// Sluice commits that landed during the rollout.
    commits: usize,
    /// From the cut until the others held every shard (cut runs only).
    taken_over: Option<f64>,
    /// Canaries whose trailers do not show every step once, in order, then Succeeded.
    wrong: Vec<String>,
    namespaces: bool,
}

fn holders(api: &FakeKubeApi, shards: u32) -> BTreeMap<u32, String> {
    api.shard_holders(LEASE_NS, "sluice", shards)
}

fn run(rt: &tokio::runtime::Runtime, template: &Path, scale: &Scale, how: &Run) -> Measured {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let bare = served.join("config.git");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            "--no-local",
            template.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let hook = bare.join("hooks/post-receive");
    std::fs::write(&hook, HOOK).unwrap();
    Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    let namespaces = netns::available();
    let api = rt.block_on(FakeKubeApi::start_on(if namespaces {
        "0.0.0.0:0"
    } else {
        "127.0.0.1:0"
    }));
    let mut hosts = if namespaces {
        let hosts: Vec<Host> = (0..how.replicas).map(|_| Host::new()).collect();
        let gateways: Vec<String> = hosts.iter().map(|h| h.gateway.clone()).collect();
        let git = GitDaemon::start_on(&served, &gateways);
        Hosts::Namespaces(hosts, git)
    } else {
        let doors = (0..how.replicas).map(|_| rt.block_on(api.door())).collect();
        Hosts::Loopback(doors, GitDaemon::start(&served))
    };
    let daemons: Vec<Daemon> = (0..how.replicas)
        .map(|r| {
            let who = format!("r{r}");
            let dir = tmp.path().join(format!("k-{who}"));
            std::fs::create_dir_all(&dir).unwrap();
            let work = tmp.path().join(format!("w-{who}"));
            let builder: DaemonBuilder = match &hosts {
                Hosts::Namespaces(hosts, git) => {
                    let host = &hosts[r];
                    let url = format!("http://{}:{}", host.gateway, api.port());
                    let mut argv = host.wrapper();
                    argv.push(env!("CARGO_BIN_EXE_sluice").to_string());
                    sluice_daemon(git.url_at(&host.gateway, "config.git"), &work)
                        .wrapped(argv)
                        .listen(&format!("{}:0", host.address))
                        .env("PATH", std::env::var("PATH").unwrap_or_default())
                        .env("KUBECONFIG", kubeconfig(&url, &dir))
                }
                Hosts::Loopback(doors, git) => sluice_daemon(git.url("config.git"), &work)
                    .env("KUBECONFIG", kubeconfig(&doors[r].url, &dir)),
            };
            builder
                .poll(&format!("{}s", scale.poll))
                .args([
                    "--shards",
                    &scale.shards.to_string(),
                    "--lease-duration",
                    &format!("{}s", scale.lease),
                ])
                .env("POD_NAME", &who)
                .env("HOME", "/nonexistent")
                .start()
        })
        .collect();
    let logs = || {
        let all: Vec<String> = daemons.iter().map(Daemon::log).collect();
        all.join("\n----\n")
    };
    // Ready: every shard held, each replica holding some, every replica's first tick done.
    let until = Instant::now() + scale.limit;
    loop {
        let now = holders(&api, scale.shards);
        let per = |who: &str| now.values().filter(|h| *h == who).count();
        let spread = now.len() == scale.shards as usize
            && (0..how.replicas).all(|r| per(&format!("r{r}")) > 0);
        let ready = daemons
            .iter()
            .all(|d| daemon::get_status(d.main(), "/readyz") == Some(200));
        if spread && ready {
            break;
        }
        assert!(
            Instant::now() < until,
            "the shards never spread: {now:?}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The tick that follows a change of shards is a full one: let it pass.
    std::thread::sleep(Duration::from_secs(2 * scale.poll));
    let retries_before: usize = daemons
        .iter()
        .map(|d| d.log().matches("Push rejected").count())
        .sum();
    let base = git(&bare, &["rev-parse", "main"]).trim().to_string();

    let human = tmp.path().join("human");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            human.to_str().unwrap(),
        ],
    );
    write_specs(&human, 0..scale.progressing, "v2", scale.interval);
    git(&human, &["add", "-A"]);
    git(&human, &["commit", "-qm", "fleet: roll out v2"]);
    git(&human, &["push", "-q", "origin", "main"]);
    let bump = git(&human, &["rev-parse", "HEAD"]).trim().to_string();

    let mut taken_over = None;
    if how.cut {
        // Once the rollout has begun: some canary Progressing.
        let until = Instant::now() + scale.limit;
        while !phases(&bare, scale.progressing)
            .iter()
            .flatten()
            .any(|(p, _)| p == "Progressing")
        {
            assert!(Instant::now() < until, "no rollout started\n{}", logs());
            std::thread::sleep(Duration::from_millis(20));
        }
        let lost: Vec<u32> = holders(&api, scale.shards)
            .into_iter()
            .filter(|(_, h)| h == "r1")
            .map(|(i, _)| i)
            .collect();
        hosts.cut(1);
        let cut_at = Instant::now();
        let until = cut_at + scale.limit;
        loop {
            let now = holders(&api, scale.shards);
            if lost.iter().all(|i| now.get(i).is_some_and(|h| h != "r1")) {
                taken_over = Some(cut_at.elapsed().as_secs_f64());
                break;
            }
            assert!(
                Instant::now() < until,
                "the cut replica's shards {lost:?} were never taken over: {now:?}\n{}",
                logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    wait_phases(
        &bare,
        scale.progressing,
        scale.limit,
        "rolled out",
        |p, r| p == "Succeeded" && r == "v2",
        logs,
    );
    let retries = daemons
        .iter()
        .map(|d| d.log().matches("Push rejected").count())
        .sum::<usize>()
        - retries_before;
    let mut measured = measure(&bare, &base, &bump, scale);
    measured.retries = retries;
    measured.taken_over = taken_over;
    measured.namespaces = namespaces;
    drop(daemons);
    measured
}

/// When each commit landed on the remote, from the post-receive hook's log.
fn landed(bare: &Path) -> HashMap<String, f64> {
    let log = std::fs::read_to_string(bare.join("landed.log")).unwrap_or_default();
    log.lines()
        .filter_map(|l| {
            let (t, sha) = l.split_once(' ')?;
            Some((sha.to_string(), t.parse().ok()?))
        })
        .collect()
}

/// Seconds since the epoch of an RFC 3339 time.
fn seconds(rfc3339: &str) -> Option<f64> {
    let t: jiff::Timestamp = rfc3339.parse().ok()?;
    Some(t.as_nanosecond() as f64 / 1e9)
}

/// One canary's trailer group in a commit: phase, canary weight, decided at (its
/// `Sluice-Replay` time), landed at (the hook's stamp), in seconds since the epoch.
type Group = (String, Option<u64>, f64, f64);

/// The rollout's commits after `bump`, read from their trailers: step commits, how late each
/// landed, and the canaries whose steps are not each once, in order, then Succeeded.
fn measure(bare: &Path, base: &str, bump: &str, scale: &Scale) -> Measured {
    // The hook stamps a push after its ref moved: wait for the stamps of the last ones.
    let shas = git(bare, &["rev-list", &format!("{base}..main")]);
    let until = Instant::now() + scale.limit;
    let landed = loop {
        let landed = landed(bare);
        if shas.lines().all(|sha| landed.contains_key(sha)) {
            break landed;
        }
        assert!(
            Instant::now() < until,
            "the hook never stamped every commit"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let human_at = landed[bump];
    let log = git(
        bare,
        &[
            "log",
            "--reverse",
            "--format=%H%n%(trailers:only,unfold)%x01",
            &format!("{base}..main"),
        ],
    );
    let mut by_canary: BTreeMap<String, Vec<Group>> = BTreeMap::new();
    let mut commits = 0;
    let mut last_landed = human_at;
    for chunk in log.split('\u{1}') {
        let mut lines = chunk.trim().lines();
        let Some(sha) = lines.next() else { continue };
        let Some(&at) = landed.get(sha) else { continue };
        if sha == bump {
            continue;
        }
        commits += 1;
        let mut current: Option<(String, String, Option<u64>, f64)> = None;
        let mut groups = Vec::new();
        for line in lines {
            let Some((k, v)) = line.split_once(": ") else {
                continue;
            };
            match k {
                "Sluice-Canary" => {
                    groups.extend(current.take());
                    current = Some((v.to_string(), String::new(), None, 0.0));
                }
                "Sluice-Phase" => {
                    if let Some(c) = &mut current {
                        c.1 = v.to_string();
                    }
                }
                "Sluice-Weights" => {
                    if let Some(c) = &mut current {
                        c.2 = v.rsplit("canary=").next().and_then(|w| w.parse().ok());
                    }
                }
                "Sluice-Replay" => {
                    let replay: serde_json::Value = serde_json::from_str(v).unwrap_or_default();
                    if let Some(c) = &mut current {
                        c.3 = replay["now"].as_str().and_then(seconds).unwrap_or(0.0);
                    }
                }
                _ => {}
            }
        }
        groups.extend(current.take());
        for (canary, phase, weight, decided) in groups {
            last_landed = last_landed.max(at);
            by_canary
                .entry(canary)
                .or_default()
                .push((phase, weight, decided, at));
        }
    }
    let (mut steps, mut late, mut wrong) = (0, Vec::new(), Vec::new());
    for i in 0..scale.progressing {
        let (ns, name, _) = id(i);
        let canary = format!("{ns}/{name}");
        let groups = by_canary.get(&canary).cloned().unwrap_or_default();
        let progressing: Vec<&Group> = groups.iter().filter(|g| g.0 == "Progressing").collect();
        let weights: Vec<u64> = progressing.iter().filter_map(|g| g.1).collect();
        if weights != STEP_WEIGHTS || groups.last().map(|g| g.0.as_str()) != Some("Succeeded") {
            let seen: Vec<String> = groups
                .iter()
                .map(|g| format!("{} {:?} at {:.3}", g.0, g.1, g.3))
                .collect();
            wrong.push(format!("{canary}: {seen:?}"));
        }
        let mut due = human_at;
        for g in &progressing {
            steps += 1;
            late.push(g.3 - due);
            due = g.2 + scale.interval as f64;
        }
    }
    Measured {
        steps,
        span: last_landed - human_at,
        late,
        retries: 0,
        commits,
        taken_over: None,
        wrong,
        namespaces: false,
    }
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// The template remote: every canary at `v1`, Initialized by one replica.
fn template(root: &Path, scale: &Scale) -> PathBuf {
    let (bare, _) = remote(root, scale);
    let started = Instant::now();
    let init = sluice_daemon(&bare, &root.join("w-init"))
        .poll(&format!("{}s", scale.poll))
        .start();
    wait_phases(
        &bare,
        scale.canaries,
        scale.limit,
        "initialized",
        |p, _| p == "Initialized",
        || init.log(),
    );
    drop(init);
    eprintln!(
        "{} canaries initialized in {:.1?}",
        scale.canaries,
        started.elapsed()
    );
    bare
}

fn main() {
    let quick = cfg!(debug_assertions) || std::env::args().any(|a| a == "--quick");
    let scale = if quick {
        Scale {
            canaries: 60,
            progressing: 8,
            replicas: 4,
            shards: 4,
            poll: 1,
            interval: 1,
            lease: 2,
            limit: Duration::from_secs(240),
        }
    } else {
        Scale {
            canaries: env_or("SLUICE_BENCH_CANARIES", 10_000),
            progressing: env_or("SLUICE_BENCH_PROGRESSING", 1000),
            replicas: env_or("SLUICE_BENCH_REPLICAS", 4).max(2),
            shards: 16,
            poll: 2,
            interval: 10,
            lease: 15,
            limit: Duration::from_secs(1800),
        }
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let template = template(tmp.path(), &scale);
    let one = run(
        &rt,
        &template,
        &scale,
        &Run {
            replicas: 1,
            cut: false,
        },
    );
    let many = run(
        &rt,
        &template,
        &scale,
        &Run {
            replicas: scale.replicas,
            cut: false,
        },
    );
    let cut = run(
        &rt,
        &template,
        &scale,
        &Run {
            replicas: scale.replicas,
            cut: true,
        },
    );
    let poll = scale.poll as f64;
    let (c, p, r) = (scale.canaries, scale.progressing, scale.replicas);
    eprintln!(
        "replicas {}: {} step commits, {} commits",
        if many.namespaces {
            "each in a network namespace"
        } else {
            "on loopback (ip netns not available)"
        },
        many.steps,
        many.commits
    );
    println!("| row | sluice | baseline (same run) | ratio | goal | met |");
    println!("|---|---:|---:|---:|---|---|");
    let rate = |m: &Measured| m.steps as f64 / m.span.max(1e-9);
    let per_commit = |m: &Measured| m.retries as f64 / (m.commits.max(1) as f64);
    let met_many = percentile(&many.late, 1.0) <= poll && per_commit(&many) <= 1.0;
    println!(
        "| {r} replicas vs 1, {c} canaries, {p} progressing | {:.1} step commits/s; late p50 {:.2} s, p99 {:.2} s, max {:.2} s (poll {poll} s); {:.2} non-FF retries per commit ({} of {}) | 1 replica: {:.1} step commits/s; late max {:.2} s; {:.2} retries per commit | {:.2}× | step commits land within one poll interval of being due; non-FF retries ≤ 1 per commit on average | {} |",
        rate(&many),
        percentile(&many.late, 0.5),
        percentile(&many.late, 0.99),
        percentile(&many.late, 1.0),
        per_commit(&many),
        many.retries,
        many.commits,
        rate(&one),
        percentile(&one.late, 1.0),
        per_commit(&one),
        rate(&many) / rate(&one).max(1e-9),
        if met_many && many.wrong.is_empty() { "met" } else { "not met" },
    );
    let bound = (scale.lease + scale.poll) as f64;
    let taken = cut.taken_over.unwrap_or(f64::NAN);
    let met_cut = taken <= bound && cut.wrong.is_empty();
    println!(
        "| replica cut off (network namespace down), {r} replicas, {c} canaries, {p} progressing | shards taken over {taken:.2} s after the cut (lease {} s + poll {poll} s = {bound} s); {} of {p} canaries with a step repeated or skipped | — | — | its shards taken over within lease duration + one poll; no step repeated or skipped (from the trailers) | {} |",
        scale.lease,
        cut.wrong.len(),
        if met_cut { "met" } else { "not met" },
    );
    for (m, what) in [
        (&one, "1 replica"),
        (&many, "replicas"),
        (&cut, "one cut off"),
    ] {
        assert!(
            m.wrong.is_empty(),
            "{what}: canaries whose trailers do not show every step once, in order, then \
             Succeeded: {:#?}",
            m.wrong
        );
    }
}
