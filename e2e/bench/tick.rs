//! Benchmark: the rows of docs/performance.md's table, each beside its baseline measured in
//! the same process on the same repos, so the ratios hold on a loaded machine where the times
//! do not. Reports numbers; asserts nothing about time.
//!
//! | row | sluice | baseline |
//! |---|---|---|
//! | idle | CPU of `sluice run --poll 1s` over P polls, C canaries at rest | CPU of P `git fetch` (the loop a watcher runs) |
//! | perCanary, 50 namespaces | one tick: every canary advances one step, one commit each | a `git pull` of the rollout (the tick fetches it too), `git fast-import` of the same commits, then one push (the ratio's baseline, as issue 27 sets it); also without the pull |
//! | perCanary, 1 namespace | the same, every output folder in one namespace | the same |
//! | perTick | the same tick as one commit | the git CLI: the same writes, one commit, one push |
//! | repack tick | a tick whose fetch finds more packs than the clone keeps | the ordinary ticks around it |
//! | idle RSS | the same daemon's resident set after those polls (`VmRSS`) | the `git fetch` loop's peak RSS |
//! | one changed spec | a warm daemon's tick after a human changes one spec: from the fetch that finds it to the commit pushed, at C canaries | the same at 10 canaries |
//! | webhook → commit | a daemon polling hourly, woken by a GitLab push webhook after a human pushes one changed spec: from sending it to the remote's `main` moving past the human's commit, at C canaries | the same at 1 canary; the git CLI's reaction: `git fetch` + one file + `git commit` + `git push` in a warm clone at C |
//! | cold start | empty work dir → first commit (clone, tick, push) on an H-commit repo served by `git daemon` | `git clone` from it |
//! | audit | `sluice audit` of C canaries' history (every canary initialised, then started on a new revision: 2C commits), as `cargo bench --bench audit` | `git log -p` of the same branch |
//! | audit per commit | audit's wall time per commit at C canaries | the same at C/10 canaries |
//! | dashboard overview | `GET /` of `sluice dashboard --dir` over C initialized canaries: the first (reads the commit, builds the model) and a cached one | `sluice status --dir -o json` on the same repo |
//! | dashboard after a 4 MiB × 200 push | the daemon's first `GET /` after a human pushed one 4 MiB YAML blob under 200 names (and its tick ran), at C canaries; the RSS that request adds; `sluice dashboard --dir`'s first `/` on the same repo | the daemon's idle RSS after the push's tick |
//!
//! CPU is user + system time of the process and the children it waited for (`/proc/<pid>/stat`
//! for the daemon, `/usr/bin/time` for one-shot commands), never wall-clock; ticks are
//! wall-clock (that is what a tick's latency is). Peak RSS is `/usr/bin/time`'s maximum
//! resident set size of the one process.
//!
//! Run: `cargo bench --bench tick`. Scale with `SLUICE_BENCH_CANARIES` (default 1000),
//! `SLUICE_BENCH_HISTORY` (history commits of the repack and cold-start repo, default 20000),
//! `SLUICE_BENCH_POLLS` (default 20) and `SLUICE_BENCH_RUNS` (median of, default 3); `-- --quick`
//! is 100 canaries, 2000 commits, 5 polls, one run (the audit rows: 100 vs 10 canaries).
//! `SLUICE_BENCH_ONLY=idle,onespec,webhook,percanary,percanary1,pertick,dashboard,bigpush,audit,repack,cold`
//! picks rows.
//!
//! The fleet rows repeat idle (CPU and RSS), one changed spec, webhook → commit, perCanary,
//! audit and cold start at `SLUICE_BENCH_FLEET` canaries (default 10,000) over a twentieth as
//! many namespaces (500), the one-changed-spec row against a hundredth of the fleet (100) and
//! the webhook row against 1 canary; pick them with `fleet-idle`, `fleet-onespec`, ... or
//! `fleet` for all. `-- --quick` runs them at 200 canaries over 10 namespaces. The audit rows make their histories under `CARGO_TARGET_TMPDIR`, the others in
//! the temporary directory. A debug build (`cargo test --all-targets` runs this too) does the
//! quick cases: its numbers mean nothing.

// A benchmark is test code (built without `cfg(test)`, as `harness = false`): it may unwrap.
// The workspace lints (Cargo.toml) reject unwrap() and expect() only in production code.
// Long functions here are YAML fixtures and scenario tables: the one-screen limit of
// clippy.toml is for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "../git_server.rs"]
#[allow(dead_code)] // the bench serves over `git daemon` only
mod git_server;
use git_server::GitDaemon;

#[path = "../it/support/standalone.rs"]
#[allow(dead_code)] // the bench needs only the big ConfigMap
mod standalone;
use standalone::big_config_map;

#[path = "audit_rows.rs"]
#[allow(dead_code)] // audit.rs prints the rows with its own digits and goal check
mod audit_rows;

const EXE: &str = env!("CARGO_BIN_EXE_sluice");

fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir, args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(["-c", "gc.auto=0", "-c", "maintenance.auto=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com");
    cmd
}

/// What `/usr/bin/time -f` measured of one command: wall, CPU (user + system, the command and
/// its children) and peak RSS.
#[derive(Clone, Copy, Default)]
struct Usage {
    wall: f64,
    cpu: f64,
    rss_mib: f64,
}

/// Runs `cmd` under `/usr/bin/time`; panics when it fails.
fn timed(cmd: Command) -> Usage {
    let mut wrapped = Command::new("/usr/bin/time");
    wrapped
        .args(["-f", "@@usage %e %U %S %M"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    let out = wrapped
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("/usr/bin/time runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", cmd.get_program());
    let line = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("@@usage "))
        .expect("/usr/bin/time's line");
    let v: Vec<f64> = line
        .split_whitespace()
        .map(|x| x.parse().expect("a number"))
        .collect();
    Usage {
        wall: v[0],
        cpu: v[1] + v[2],
        rss_mib: v[3] / 1024.0,
    }
}

fn sluice(args: &[&str]) -> Command {
    let mut cmd = Command::new(EXE);
    cmd.args(args).env("SLUICE_LOG", "error");
    cmd
}

fn reconcile(url: &str, workdir: &Path) -> Usage {
    timed(sluice(&[
        "reconcile",
        "--repo",
        url,
        "--workdir",
        &workdir.display().to_string(),
    ]))
}

/// Where canary `i` of `namespaces` lives.
fn namespace(i: usize, namespaces: usize) -> String {
    format!("ns{}", i % namespaces)
}

fn canary(i: usize, namespaces: usize, revision: &str) -> String {
    let ns = namespace(i, namespaces);
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata: {{name: app{i}, namespace: {ns}}}
spec:
  routeOnly: {{services: [app{i}-blue, app{i}-green], revision: \"{revision}\"}}
  output: clusters/{ns}/app{i}
  service: {{port: 8080}}
  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}
  analysis: {{interval: 1s, stepWeights: [10, 50]}}
"
    )
}

fn spec_path(i: usize, namespaces: usize) -> String {
    format!("apps/{}/app{i}/canary.yaml", namespace(i, namespaces))
}

/// A bare remote with `canaries` canaries at v1 over `namespaces` namespaces, `commits:
/// mode`, and `history` commits of unrelated history, each rewriting one of `canaries` note
/// files in one folder (the tree shape perCanary commits leave behind).
fn remote(root: &Path, canaries: usize, namespaces: usize, mode: &str, history: usize) -> PathBuf {
    let seed = root.join("seed");
    std::fs::create_dir_all(&seed).expect("mkdir");
    git(&seed, &["init", "-q", "-b", "main"]);
    for i in 0..canaries {
        let path = seed.join(spec_path(i, namespaces));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, canary(i, namespaces, "v1")).expect("write");
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
    std::fs::remove_dir_all(&seed).expect("rm seed");
    if history > 0 {
        let mut stream = String::new();
        for i in 0..history {
            let content = format!("entry {i}\n");
            let message = format!("history {i}\n");
            stream.push_str(&format!(
                "commit refs/heads/main\ncommitter bench <bench@example.com> {} +0000\ndata {}\n{message}{}M 100644 inline notes/app{}.txt\ndata {}\n{content}\n",
                1_700_000_000 + i,
                message.len(),
                if i == 0 { "from refs/heads/main^0\n" } else { "" },
                i % canaries.max(1),
                content.len()
            ));
        }
        fast_import(&bare, stream.as_bytes());
        git(&bare, &["repack", "-adq"]);
    }
    bare
}

fn fast_import(repo: &Path, stream: &[u8]) {
    let mut child = git_cmd(repo, &["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("fast-import");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stream)
        .expect("write");
    assert!(child.wait().expect("wait").success());
}

/// A human clone of `bare` in `root/name`.
fn human(root: &Path, bare: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    git(
        root,
        &[
            "clone",
            "-q",
            &bare.display().to_string(),
            &dir.display().to_string(),
        ],
    );
    dir
}

fn copy_bare(from: &Path, to: &Path) {
    git(
        from.parent().expect("parent"),
        &[
            "clone",
            "-q",
            "--bare",
            "--no-local",
            &from.display().to_string(),
            &to.display().to_string(),
        ],
    );
}

/// A row of the table.
struct Row {
    name: String,
    sluice: String,
    baseline: String,
    ratio: f64,
    goal: &'static str,
    rss: Option<f64>,
}

/// Whether `row` meets its goal: every `≤ N×` part holds for the ratio, every `≤ N s` part for
/// the seconds it reports, every `≤ N MiB` part for the peak RSS (or, for a row of memory, for
/// the number it reports); `None` for a goal that is only measured.
fn met(row: &Row) -> Option<bool> {
    let mut checked = None;
    for part in row.goal.split(", ") {
        let Some(bound) = part.strip_prefix("≤ ") else {
            continue;
        };
        let ok = if let Some(x) = bound.strip_suffix('×') {
            x.parse::<f64>().ok().map(|x| row.ratio <= x)
        } else if let Some(secs) = bound.strip_suffix(" s") {
            let took = row
                .sluice
                .strip_suffix(" s")
                .and_then(|v| v.parse::<f64>().ok());
            secs.parse::<f64>()
                .ok()
                .and_then(|secs| took.map(|t| t <= secs))
        } else if let Some(mib) = bound.strip_suffix(" MiB") {
            let rss = row
                .rss
                .or_else(|| row.sluice.strip_suffix(" MiB").and_then(|v| v.parse().ok()));
            mib.parse::<f64>()
                .ok()
                .and_then(|mib| rss.map(|r| r <= mib))
        } else {
            None
        };
        if let Some(ok) = ok {
            checked = Some(checked.unwrap_or(true) && ok);
        }
    }
    checked
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

struct Scale {
    canaries: usize,
    /// The namespaces the canaries are spread over (50 at 1,000, 500 at 10,000).
    namespaces: usize,
    /// The fleet the one-changed-spec row compares with (10 beside 1,000, 100 beside 10,000).
    small: usize,
    /// The idle RSS goal at this size.
    idle_rss_goal: &'static str,
    /// The perCanary row's goal over the scale's namespaces (set at 1,000 canaries only).
    percanary_goal: &'static str,
    history: usize,
    polls: usize,
    runs: usize,
    /// How long the bench waits for any one log line of a daemon before it gives up.
    deadline: Duration,
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) `pid` has used so far.
fn cpu_of(pid: u32, tick: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect(")") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    ticks / tick
}

fn clock_tick() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// Lines of a daemon's log a failed wait shows.
const LAST_LINES: usize = 30;

/// A daemon's stderr, read line by line on a thread of its own, so that a wait for a line that
/// never comes (the daemon's wording changed, or it stopped) ends in a panic that names the
/// text and shows the last lines read, instead of a bench that hangs.
struct Log {
    lines: mpsc::Receiver<(Instant, String)>,
    last: VecDeque<String>,
    deadline: Duration,
}

impl Log {
    /// Reads `child`'s piped stderr; each wait gives up after `deadline`.
    fn of(child: &mut Child, deadline: Duration) -> Log {
        let stderr = child.stderr.take().expect("the daemon's stderr is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                // Stamped when read, not when the bench gets to it.
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Log {
            lines,
            last: VecDeque::with_capacity(LAST_LINES),
            deadline,
        }
    }

    /// The next line that contains `text`, and when it was read. Panics, naming `text` and
    /// showing the last lines read, when none comes within the deadline, when the log ends
    /// first, or on an `ERROR` line.
    fn wait_for(&mut self, text: &str) -> (Instant, String) {
        let until = Instant::now() + self.deadline;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.fail(&format!(
                    "no log line containing {text:?} within {:?}",
                    self.deadline
                ));
            }
            match self.lines.recv_timeout(left) {
                Ok((at, line)) => {
                    self.remember(&line);
                    if line.contains("ERROR") {
                        self.fail(&format!(
                            "the daemon logged an error while the bench waited for {text:?}"
                        ));
                    }
                    if line.contains(text) {
                        return (at, line);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => self.fail(&format!(
                    "the daemon's log ended before a line containing {text:?}"
                )),
            }
        }
    }

    /// The lines read so far but not yet waited through, into the last lines.
    fn drain(&mut self) {
        while let Ok((_, line)) = self.lines.try_recv() {
            self.remember(&line);
        }
    }

    fn remember(&mut self, line: &str) {
        if self.last.len() == LAST_LINES {
            self.last.pop_front();
        }
        self.last.push_back(line.to_string());
    }

    /// Panics with `why` and the last lines of the log.
    fn fail(&mut self, why: &str) -> ! {
        self.drain();
        let mut lines = String::new();
        for line in &self.last {
            lines.push_str("\n    ");
            lines.push_str(line);
        }
        panic!("{why}; the last {} lines read:{lines}", self.last.len())
    }
}

/// A `sluice run` the bench started, with its log; killed when dropped, also when the bench
/// panics, so that no daemon outlives the bench.
struct Daemon {
    child: Child,
    log: Log,
}

impl Daemon {
    /// Starts `cmd` with its stderr piped into a [`Log`] whose waits give up after `deadline`.
    fn start(cmd: &mut Command, deadline: Duration) -> Daemon {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sluice run");
        let log = Log::of(&mut child, deadline);
        Daemon { child, log }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Idle: the daemon's CPU over `polls` polls with every canary at rest and the remote not
/// moving, against `polls` runs of `git fetch` in a clone of the same remote.
fn idle(scale: &Scale) -> [Row; 2] {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let bare = remote(root, scale.canaries, scale.namespaces, "perCanary", 0);
    let url = bare.display().to_string();
    let work = root.join("work");
    // Every canary initialised and at rest.
    reconcile(&url, &work);
    let tick = clock_tick();
    let mut sluice_cpu = Vec::new();
    let mut git_cpu = Vec::new();
    let mut sluice_rss = Vec::new();
    let mut git_rss = Vec::new();
    for _ in 0..scale.runs {
        let mut daemon = Daemon::start(
            Command::new(EXE)
                .args([
                    "run",
                    "--repo",
                    &url,
                    "--workdir",
                    &work.display().to_string(),
                ])
                .args(["--poll", "1s", "--listen", "127.0.0.1:0"])
                .args(["--probe-listen", "127.0.0.1:0"])
                .env("SLUICE_LOG", "error,sluice::cli::run=debug"),
            scale.deadline,
        );
        let pid = daemon.child.id();
        // The first idle poll ends the start-up tick; measure the polls after it.
        daemon.log.wait_for("Nothing new and nothing due");
        let start = cpu_of(pid, tick);
        for _ in 0..scale.polls {
            daemon.log.wait_for("Nothing new and nothing due");
        }
        let used = cpu_of(pid, tick) - start;
        sluice_rss.push(rss_of(pid));
        drop(daemon);
        sluice_cpu.push(used);
        // The watcher's loop: one `git fetch` per poll.
        let clone = root.join("watcher");
        let _ = std::fs::remove_dir_all(&clone);
        git(root, &["clone", "-q", &url, &clone.display().to_string()]);
        // One process for the whole loop: a fetch takes a few milliseconds of CPU, under the
        // 10 ms resolution `/usr/bin/time` prints for a single command.
        let script = format!(
            "for i in $(seq {}); do git -c gc.auto=0 fetch -q origin || exit 1; done",
            scale.polls
        );
        let mut watcher = Command::new("sh");
        watcher.args(["-c", &script]).current_dir(&clone);
        let watched = timed(watcher);
        git_cpu.push(watched.cpu);
        git_rss.push(watched.rss_mib);
    }
    let (s, g) = (median(sluice_cpu), median(git_cpu));
    let (sr, gr) = (median(sluice_rss), median(git_rss));
    [
        Row {
            name: format!(
                "idle: {} canaries at rest, {} polls",
                scale.canaries, scale.polls
            ),
            sluice: format!("{s:.2} CPU-s"),
            baseline: format!("`git fetch` loop: {g:.2} CPU-s"),
            ratio: s / g.max(1e-9),
            goal: "≤ 2×",
            rss: None,
        },
        Row {
            name: format!(
                "idle daemon RSS: {} canaries at rest, after {} polls",
                scale.canaries, scale.polls
            ),
            sluice: format!("{sr:.1} MiB"),
            baseline: format!("`git fetch` loop peak: {gr:.1} MiB"),
            ratio: sr / gr.max(1e-9),
            goal: scale.idle_rss_goal,
            rss: None,
        },
    ]
}

/// The resident set size of `pid` now (`VmRSS`), in MiB.
fn rss_of(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .expect("VmRSS")
        / 1024.0
}

/// A remote of `canaries` perCanary canaries over `namespaces`, every one initialized by a
/// `sluice reconcile` into the work dir, and a human clone: the temporary folder holding them,
/// the bare remote, the work dir, the clone.
fn initialized(
    canaries: usize,
    namespaces: usize,
) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let bare = remote(root, canaries, namespaces, "perCanary", 0);
    let work = root.join("work");
    reconcile(&bare.display().to_string(), &work);
    let human = human(root, &bare, "human");
    (tmp, bare, work, human)
}

/// One changed spec: a daemon at rest over `canaries` canaries, warm (it has ticked and
/// polled idle); a human pushes a new revision of one canary; the wall time from the poll
/// that finds the new head (its fetch done) to the tick's commit pushed. One canary each run,
/// each waited for until it is at rest again.
fn one_spec_tick(scale: &Scale, canaries: usize) -> f64 {
    let namespaces = canaries.min(scale.namespaces);
    // `_tmp` (not `_`): the folder lives until the end of the run.
    let (_tmp, bare, work, human) = initialized(canaries, namespaces);
    let url = bare.display().to_string();
    let mut daemon = Daemon::start(
        Command::new(EXE)
            .args(["run", "--repo", &url, "--workdir"])
            .arg(&work)
            .args(["--poll", "1s", "--listen", "127.0.0.1:0"])
            .args(["--probe-listen", "127.0.0.1:0"])
            .env(
                "SLUICE_LOG",
                "error,sluice::cli::run=debug,sluice::gitops::repo=info",
            ),
        scale.deadline,
    );
    let mut walls = Vec::new();
    for run in 0..scale.runs {
        daemon.log.wait_for("Nothing new and nothing due");
        // The rollout before this one ran to its end (steps of 1 s): its commits first.
        git(&human, &["pull", "-q", "--ff-only", "origin", "main"]);
        let i = (run * 7) % canaries;
        std::fs::write(
            human.join(spec_path(i, namespaces)),
            canary(i, namespaces, &format!("v{}", run + 2)),
        )
        .expect("write");
        git(&human, &["commit", "-q", "-am", "roll out one"]);
        git(&human, &["push", "-q", "origin", "main"]);
        let (fetched, _) = daemon.log.wait_for("moved the branch to the remote head");
        let (committed, _) = daemon.log.wait_for("Committed:");
        walls.push((committed - fetched).as_secs_f64());
    }
    drop(daemon);
    median(walls)
}

/// The tick after one changed spec, at `canaries` canaries against the same at 10: its cost
/// follows what changed, not the repo's size.
fn one_spec(scale: &Scale) -> Row {
    let small = one_spec_tick(scale, scale.small);
    let large = one_spec_tick(scale, scale.canaries);
    Row {
        name: format!(
            "one changed spec: the daemon's tick at {} canaries",
            scale.canaries
        ),
        sluice: format!("{large:.3} s"),
        baseline: format!("the same at {} canaries: {small:.3} s", scale.small),
        ratio: large / small.max(1e-9),
        goal: "≤ 2×",
        rss: None,
    }
}

/// The commit `main` of the bare repo `bare` points at, read from its ref files rather than by
/// a git process, so that it can be polled every millisecond: the loose ref, else packed-refs.
fn main_of(bare: &Path) -> String {
    if let Ok(id) = std::fs::read_to_string(bare.join("refs/heads/main")) {
        let id = id.trim();
        if !id.is_empty() {
            return id.to_string();
        }
    }
    std::fs::read_to_string(bare.join("packed-refs"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_suffix(" refs/heads/main"))
        .expect("refs/heads/main, loose or packed")
        .to_string()
}

/// One HTTP/1.1 request (`head` without its `Host` and `Connection` lines) to `addr`; the
/// whole answer.
fn http(addr: &str, head: &str, body: &str) -> String {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "{head}\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

/// The value of `field=` in a log line.
fn log_field(line: &str, field: &str) -> String {
    let prefix = format!("{field}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {field}= in {line:?}"))
        .to_string()
}

/// Webhook → commit: a daemon at rest over `canaries` canaries that polls once an hour, so that
/// only the webhook wakes it. Each run a human pushes a new revision of one canary (another
/// one each run) and the bench posts a GitLab push event to `/hooks/git`; the wall time from
/// sending it to the remote's `main` moving past the human's commit. Each rollout is waited
/// for to its end (its `promotion completed` commit) before the next run. With `git_cli`,
/// also the git CLI's reaction to the same kind of push afterwards, on the same remote: in a
/// warm clone, `git fetch` (and the fast-forward a push needs), one file written, `git
/// commit`, `git push`. Medians of the runs.
fn webhook_commit(scale: &Scale, canaries: usize, git_cli: bool) -> (f64, Option<f64>) {
    let namespaces = canaries.min(scale.namespaces);
    let (tmp, bare, work, human) = initialized(canaries, namespaces);
    let (root, url) = (tmp.path(), bare.display().to_string());
    let mut daemon = Daemon::start(
        Command::new(EXE)
            .args(["run", "--repo", &url, "--workdir"])
            .arg(&work)
            .args(["--poll", "1h", "--listen", "127.0.0.1:0"])
            .args(["--probe-listen", "127.0.0.1:0"])
            .env("SLUICE_WEBHOOK_SECRET", "s")
            .env("SLUICE_LOG", "error,sluice::cli::run=info"),
        scale.deadline,
    );
    let (_, line) = daemon.log.wait_for("Serving /hooks/git");
    let addr = log_field(&line, "address");
    let (_, line) = daemon.log.wait_for("Serving probes /healthz /readyz");
    let probes = log_field(&line, "address");
    // Ready once the start-up tick is done: a push before it would be found without the webhook.
    let started = Instant::now();
    while !http(&probes, "GET /readyz HTTP/1.1", "").starts_with("HTTP/1.1 200") {
        if started.elapsed() > scale.deadline {
            daemon.log.fail(&format!(
                "the daemon was not ready within {:?}",
                scale.deadline
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut walls = Vec::new();
    for run in 0..scale.runs {
        // The rollout before this one ran to its end: its commits first.
        git(&human, &["pull", "-q", "--ff-only", "origin", "main"]);
        let i = (run * 7) % canaries;
        std::fs::write(
            human.join(spec_path(i, namespaces)),
            canary(i, namespaces, &format!("v{}", run + 2)),
        )
        .expect("write");
        git(&human, &["commit", "-q", "-am", "roll out one"]);
        git(&human, &["push", "-q", "origin", "main"]);
        let pushed = main_of(&bare);
        // Identical bodies are refused as replays: each names its commit and run.
        let body = format!(
            r#"{{"object_kind":"push","ref":"refs/heads/main","after":"{pushed}","run":{run}}}"#
        );
        let sent = Instant::now();
        let answer = http(
            &addr,
            "POST /hooks/git HTTP/1.1\r\nX-Gitlab-Token: s\r\nX-Gitlab-Event: Push Hook\r\nContent-Type: application/json",
            &body,
        );
        assert!(
            answer.starts_with("HTTP/1.1 202"),
            "{}",
            &answer[..answer.len().min(300)]
        );
        while main_of(&bare) == pushed {
            if sent.elapsed() > scale.deadline {
                daemon.log.fail(&format!(
                    "main did not move past {pushed} within {:?} of the webhook",
                    scale.deadline
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        walls.push(sent.elapsed().as_secs_f64());
        daemon
            .log
            .wait_for(&format!("Committed: app{i}: promotion completed"));
    }
    drop(daemon);
    let cli = git_cli.then(|| {
        let warm = human_clone_of(root, &bare);
        let mut cli = Vec::new();
        for run in 0..scale.runs {
            git(&human, &["pull", "-q", "--ff-only", "origin", "main"]);
            let i = (run * 7 + 3) % canaries;
            std::fs::write(
                human.join(spec_path(i, namespaces)),
                canary(i, namespaces, &format!("v{}", scale.runs + run + 2)),
            )
            .expect("write");
            git(&human, &["commit", "-q", "-am", "roll out one"]);
            git(&human, &["push", "-q", "origin", "main"]);
            let start = Instant::now();
            git(&warm, &["fetch", "-q", "origin"]);
            git(&warm, &["merge", "-q", "--ff-only", "origin/main"]);
            let file = format!("clusters/{}/app{i}/reaction.txt", namespace(i, namespaces));
            let path = warm.join(&file);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, format!("run {run}\n")).expect("write");
            git(&warm, &["add", "--", &file]);
            git(&warm, &["commit", "-q", "-m", "react"]);
            git(&warm, &["push", "-q", "origin", "main"]);
            cli.push(start.elapsed().as_secs_f64());
        }
        median(cli)
    });
    (median(walls), cli)
}

/// Webhook → commit at `canaries` canaries against the same at 1: the reaction to a webhook
/// should follow what changed, not the repo's size; the git CLI's reaction beside it.
fn webhook(scale: &Scale) -> Row {
    let (small, _) = webhook_commit(scale, 1, false);
    let (large, cli) = webhook_commit(scale, scale.canaries, true);
    let cli = cli.expect("the git CLI's reaction");
    Row {
        name: format!(
            "webhook → commit: the daemon at {} canaries",
            scale.canaries
        ),
        sluice: format!("{large:.3} s"),
        baseline: format!(
            "the same at 1 canary: {small:.3} s; git CLI fetch + commit + push: {cli:.3} s ({:.2}x)",
            large / cli.max(1e-9)
        ),
        ratio: large / small.max(1e-9),
        goal: "≤ 2×",
        rss: None,
    }
}

/// One tick in which every canary advances one step, against `git fast-import` writing the
/// same commits then one push (`perCanary`), or the git CLI writing the same files as one
/// commit and pushing (`perTick`).
fn step_tick(scale: &Scale, namespaces: usize, mode: &str) -> Row {
    let mut sluice_wall = Vec::new();
    let mut base_wall = Vec::new();
    // perCanary only: the baseline plus the `git pull` that brings in the rollout, which sluice's
    // tick does too (fetch and check out the changed specs) and the issue's baseline leaves out.
    let mut pull_wall = Vec::new();
    let mut rss = Vec::new();
    let mut commits = 0;
    for _ in 0..scale.runs {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let bare = remote(root, scale.canaries, namespaces, mode, 0);
        let url = bare.display().to_string();
        let work = root.join("work");
        reconcile(&url, &work);
        let human = human(root, &bare, "human");
        for i in 0..scale.canaries {
            std::fs::write(
                human.join(spec_path(i, namespaces)),
                canary(i, namespaces, "v2"),
            )
            .expect("write");
        }
        git(&human, &["commit", "-q", "-am", "roll out v2"]);
        git(&human, &["push", "-q", "origin", "main"]);
        // The baseline's remote starts from the same state.
        let base_remote = root.join("baseline.git");
        copy_bare(&bare, &base_remote);
        let pull_remote = root.join("baseline-pull.git");
        copy_bare(&bare, &pull_remote);
        let before = git(&bare, &["rev-parse", "main"]).trim().to_string();
        let usage = reconcile(&url, &work);
        sluice_wall.push(usage.wall);
        rss.push(usage.rss_mib);
        let after = git(&bare, &["rev-parse", "main"]).trim().to_string();
        let range = format!("{before}..{after}");
        commits = git(&bare, &["rev-list", "--count", &range])
            .trim()
            .parse()
            .expect("count");
        let warm = human_clone_of(root, &base_remote);
        let wall = if mode == "perCanary" {
            // The same commits, as a stream fast-import reads; made before the clock starts.
            let stream = git_cmd(
                &bare,
                &["fast-export", "--reference-excluded-parents", &range, "--"],
            )
            .output()
            .expect("fast-export")
            .stdout;
            let start = Instant::now();
            fast_import(&warm, &stream);
            git(&warm, &["push", "-q", "origin", "main"]);
            let wall = start.elapsed();
            // A clone from before the rollout commit, warm, as a user's checkout.
            let pulled = crate::human(root, &pull_remote, "pulled");
            git(&pulled, &["reset", "-q", "--hard", "HEAD~1"]);
            git(&pulled, &["status", "--short"]);
            let start = Instant::now();
            git(&pulled, &["pull", "-q", "--ff-only", "origin", "main"]);
            fast_import(&pulled, &stream);
            git(&pulled, &["push", "-q", "origin", "main"]);
            pull_wall.push(start.elapsed().as_secs_f64());
            wall
        } else {
            let changed: Vec<(String, String)> =
                git(&bare, &["diff", "--name-only", &before, &after])
                    .lines()
                    .map(|p| {
                        (
                            p.to_string(),
                            git(&bare, &["show", &format!("{after}:{p}")]),
                        )
                    })
                    .collect();
            let start = Instant::now();
            for (path, text) in &changed {
                let full = warm.join(path);
                std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
                std::fs::write(full, text).expect("write");
            }
            git(&warm, &["add", "-A"]);
            git(&warm, &["commit", "-q", "-m", "baseline"]);
            git(&warm, &["push", "-q", "origin", "main"]);
            start.elapsed()
        };
        base_wall.push(wall.as_secs_f64());
    }
    let (s, b) = (median(sluice_wall), median(base_wall));
    // perCanary: issue 27's baseline is `git pull` + `fast-import` + push (the tick fetches
    // the rollout too); the ratio is against it, the one without the pull shown beside it.
    let (name, baseline, goal, against) = if mode == "perCanary" {
        let p = median(pull_wall);
        (
            format!(
                "perCanary tick: {} canaries over {namespaces} namespace{}, {commits} commits",
                scale.canaries,
                if namespaces == 1 { "" } else { "s" }
            ),
            format!(
                "`git pull` + `git fast-import` + push: {p:.2} s (without the pull: {b:.2} s, {:.2}x)",
                s / b.max(1e-9)
            ),
            if namespaces == 1 {
                "≤ 2×, ≤ 96 MiB"
            } else {
                scale.percanary_goal
            },
            p,
        )
    } else {
        (
            format!(
                "perTick tick: {} canaries, {commits} commit",
                scale.canaries
            ),
            format!("git CLI writes + commit + push: {b:.2} s"),
            "≤ 1×",
            b,
        )
    };
    Row {
        name,
        sluice: format!("{s:.2} s"),
        baseline,
        ratio: s / against.max(1e-9),
        goal,
        rss: Some(median(rss)),
    }
}

/// A non-bare clone of `bare` with a warm index, as a git CLI user has.
fn human_clone_of(root: &Path, bare: &Path) -> PathBuf {
    let dir = human(root, bare, "warm");
    git(&dir, &["status", "--short"]);
    dir
}

/// Packs the clone holds before the measured ticks: one per fetch of a long-running clone.
const PACKS: usize = 45;

fn packs(work: &Path) -> usize {
    std::fs::read_dir(work.join(".git/objects/pack"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .count()
        })
        .unwrap_or(0)
}

/// The ticks around the clone's maintenance: a remote of `history` commits; many fetches, each
/// its own pack, made with the git CLI; then ticks (a human commit, a full tick) until one of
/// them consolidates packs. Its time against the median of the ordinary ones.
fn repack(template: &Path, scale: &Scale) -> Row {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let bare = root.join("config.git");
    copy_bare(template, &bare);
    let url = bare.display().to_string();
    let work = root.join("work");
    reconcile(&url, &work);
    let human = human(root, &bare, "human");
    let mut n = 0;
    let mut push = |human: &Path| {
        n += 1;
        std::fs::write(human.join("notes/human.txt"), format!("edit {n}\n")).expect("write");
        git(human, &["add", "-A"]);
        git(human, &["commit", "-q", "-m", &format!("human {n}")]);
        git(human, &["push", "-q", "origin", "main"]);
    };
    // Packs as a long-running clone collects them: one per fetch.
    while packs(&work) < PACKS {
        push(&human);
        git(
            &work,
            &["-c", "fetch.unpackLimit=1", "fetch", "-q", "origin"],
        );
    }
    let mut ordinary = Vec::new();
    let mut repacking = Vec::new();
    let mut rss: Vec<f64> = Vec::new();
    for _ in 0..12 {
        push(&human);
        let before = packs(&work);
        let usage = reconcile(&url, &work);
        rss.push(usage.rss_mib);
        if packs(&work) < before {
            repacking.push(usage.wall);
        } else {
            ordinary.push(usage.wall);
        }
        if !repacking.is_empty() && ordinary.len() >= 3 {
            break;
        }
    }
    let o = median(ordinary);
    let r = repacking.iter().copied().fold(0.0, f64::max);
    let peak = rss.iter().copied().fold(0.0, f64::max);
    Row {
        name: format!(
            "repack tick: {} canaries, {} history commits, {} packs",
            scale.canaries, scale.history, PACKS
        ),
        sluice: format!("{r:.2} s"),
        baseline: format!("ordinary tick: {o:.2} s"),
        ratio: r / o.max(1e-9),
        goal: "≤ 2×, ≤ 64 MiB",
        rss: Some(peak),
    }
}

/// Cold start: an empty work dir to the first commit (clone, a full tick, one commit, push),
/// against `git clone` of the same remote, both from a `git daemon`. Ratios of time and of peak
/// RSS; and the same start from the repo's local path, where libgit2 packs in-process.
fn cold_start(template: &Path, scale: &Scale) -> [Row; 3] {
    let mut s_wall = Vec::new();
    let mut g_wall = Vec::new();
    let mut s_rss = Vec::new();
    let mut g_rss = Vec::new();
    let mut l_wall = Vec::new();
    let mut l_rss = Vec::new();
    for _ in 0..scale.runs {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let bare = root.join("config.git");
        copy_bare(template, &bare);
        let path = bare.display().to_string();
        // Every canary initialised by an earlier replica; then one rollout starts.
        reconcile(&path, &root.join("earlier"));
        let human = human(root, &bare, "human");
        std::fs::write(
            human.join(spec_path(0, scale.namespaces)),
            canary(0, scale.namespaces, "v2"),
        )
        .expect("write");
        git(&human, &["commit", "-q", "-am", "roll out v2"]);
        git(&human, &["push", "-q", "origin", "main"]);
        let before = git(&bare, &["rev-parse", "main"]);
        let pristine = root.join("pristine.git");
        copy_bare(&bare, &pristine);
        let daemon = GitDaemon::start(root);
        let s = reconcile(&daemon.url("config.git"), &root.join("work"));
        assert_ne!(before, git(&bare, &["rev-parse", "main"]), "a first commit");
        let g = timed(git_cmd(
            root,
            &[
                "clone",
                "-q",
                &daemon.url("config.git"),
                &root.join("cli").display().to_string(),
            ],
        ));
        drop(daemon);
        let l = reconcile(&pristine.display().to_string(), &root.join("local"));
        s_wall.push(s.wall);
        g_wall.push(g.wall);
        s_rss.push(s.rss_mib);
        g_rss.push(g.rss_mib);
        l_wall.push(l.wall);
        l_rss.push(l.rss_mib);
    }
    let (sw, gw, sr, gr) = (median(s_wall), median(g_wall), median(s_rss), median(g_rss));
    let (lw, lr) = (median(l_wall), median(l_rss));
    [
        Row {
            name: format!(
                "cold start → first commit, from `git daemon`: {} commits, {} canaries",
                scale.history, scale.canaries
            ),
            sluice: format!("{sw:.2} s"),
            baseline: format!("`git clone`: {gw:.2} s"),
            ratio: sw / gw.max(1e-9),
            goal: "measured",
            rss: Some(sr),
        },
        Row {
            name: "cold start peak RSS, from `git daemon`".to_string(),
            sluice: format!("{sr:.1} MiB"),
            baseline: format!("`git clone`: {gr:.1} MiB"),
            ratio: sr / gr.max(1e-9),
            goal: "≤ 1.5×",
            rss: None,
        },
        Row {
            name: "cold start from the repo's local path (libgit2 packs in-process)".to_string(),
            sluice: format!("{lw:.2} s"),
            baseline: format!("the same from `git daemon`: {sw:.2} s"),
            ratio: lw / sw.max(1e-9),
            goal: "measured",
            rss: Some(lr),
        },
    ]
}

/// Wall-clock seconds of one `GET path` answered 200 by `addr`.
fn get_seconds(addr: &str, path: &str) -> f64 {
    use std::io::Read;
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read");
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer[..answer.len().min(300)])
    );
    elapsed
}

/// The dashboard's overview over every canary against `sluice status -o json` on the same
/// (bare) repo, after one tick initialized them all.
fn dashboard(scale: &Scale) -> Row {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bare = remote(tmp.path(), scale.canaries, 50, "perCanary", 0);
    let dir = bare.display().to_string();
    reconcile(&dir, &tmp.path().join("work"));
    let status: Vec<f64> = (0..scale.runs)
        .map(|_| timed(sluice(&["status", "--dir", &dir, "-o", "json"])).wall)
        .collect();
    let status = median(status);
    let mut first = Vec::new();
    let mut cached = Vec::new();
    for _ in 0..scale.runs {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let mut server = sluice(&["dashboard", "--dir", &dir, "--listen", &addr])
            .stdout(Stdio::null())
            .spawn()
            .expect("sluice dashboard starts");
        while std::net::TcpStream::connect(&addr).is_err() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        first.push(get_seconds(&addr, "/"));
        cached.push(get_seconds(&addr, "/"));
        let _ = server.kill();
        let _ = server.wait();
    }
    let (first, cached) = (median(first), median(cached));
    Row {
        name: format!(
            "dashboard overview: {} canaries (first request; cached {cached:.3} s)",
            scale.canaries
        ),
        sluice: format!("{first:.2} s"),
        baseline: format!("`sluice status -o json`: {status:.2} s"),
        ratio: first / status.max(1e-9),
        goal: "measured",
        rss: None,
    }
}

/// Pushes from `human` one blob of just under the loader's 4 MiB limit, committed under
/// `names` names (the copies are not written to the work tree: one blob, many index entries).
fn push_one_blob_many_names(human: &Path, names: usize) {
    let mut hash = git_cmd(human, &["hash-object", "-w", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("hash-object");
    hash.stdin
        .take()
        .expect("stdin")
        .write_all(big_config_map("ns0", 4 * 1024 * 1024 - 100).as_bytes())
        .expect("write");
    let out = hash.wait_with_output().expect("hash-object");
    let blob = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut index = git_cmd(human, &["update-index", "--index-info"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("update-index");
    let lines: String = (0..names)
        .map(|i| format!("100644 {blob}\tblobs/copy-{i:03}.yaml\n"))
        .collect();
    index
        .stdin
        .take()
        .expect("stdin")
        .write_all(lines.as_bytes())
        .expect("write");
    assert!(index.wait().expect("update-index").success());
    git(human, &["commit", "-q", "-m", "one blob, many names"]);
    git(human, &["push", "-q", "origin", "HEAD:main"]);
}

/// A free loopback address.
fn free_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    format!("127.0.0.1:{port}")
}

/// The 4 MiB × 200 push: a daemon at rest over C canaries; a human pushes one 4 MiB YAML blob
/// under 200 names; once the daemon's tick has read it, the first `GET /` (and the RSS it
/// adds to the daemon's idle RSS), then `sluice dashboard --dir`'s first `/` on the same repo.
fn big_push(scale: &Scale) -> [Row; 3] {
    let namespaces = scale.canaries.min(50);
    let (_tmp, bare, work, human) = initialized(scale.canaries, namespaces);
    let url = bare.display().to_string();
    let addr = free_addr();
    let mut daemon = Daemon::start(
        Command::new(EXE)
            .args(["run", "--repo", &url, "--workdir"])
            .arg(&work)
            .args(["--poll", "1s", "--listen", &addr])
            // The dashboard on the main listener, as the oauth2-proxy patch serves it.
            .args(["--dashboard-listen", &addr])
            .args(["--probe-listen", "127.0.0.1:0"])
            .env(
                "SLUICE_LOG",
                "error,sluice::cli::run=debug,sluice::gitops::repo=info",
            ),
        scale.deadline,
    );
    let pid = daemon.child.id();
    daemon.log.wait_for("Nothing new and nothing due");
    let before = rss_of(pid);
    push_one_blob_many_names(&human, 200);
    daemon.log.wait_for("moved the branch to the remote head");
    daemon.log.wait_for("Nothing new and nothing due");
    let idle = rss_of(pid);
    let first = get_seconds(&addr, "/");
    let after = rss_of(pid);
    let cached = get_seconds(&addr, "/");
    drop(daemon);
    let dir_addr = free_addr();
    let mut server = sluice(&["dashboard", "--dir", &url, "--listen", &dir_addr])
        .stdout(Stdio::null())
        .spawn()
        .expect("sluice dashboard starts");
    while std::net::TcpStream::connect(&dir_addr).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir_first = get_seconds(&dir_addr, "/");
    let dir_rss = rss_of(server.id());
    let _ = server.kill();
    let _ = server.wait();
    let c = scale.canaries;
    [
        Row {
            name: format!("dashboard `/` after a 4 MiB × 200 push: the daemon's first, {c} canaries (cached {cached:.3} s)"),
            sluice: format!("{first:.3} s"),
            baseline: format!("idle RSS after the push's tick: {idle:.1} MiB (before the push {before:.1} MiB)"),
            ratio: first,
            goal: "≤ 1 s",
            rss: None,
        },
        Row {
            name: format!("dashboard `/` after a 4 MiB × 200 push: RSS the daemon's first `/` adds, {c} canaries"),
            sluice: format!("{:.1} MiB", after - idle),
            baseline: format!("idle RSS after the push's tick: {idle:.1} MiB; after `/`: {after:.1} MiB"),
            ratio: after / idle.max(1e-9),
            goal: "≤ 64 MiB",
            rss: None,
        },
        Row {
            name: format!("dashboard `/` after a 4 MiB × 200 push: `sluice dashboard --dir`'s first, {c} canaries"),
            sluice: format!("{dir_first:.3} s"),
            baseline: format!("its RSS after: {dir_rss:.1} MiB"),
            ratio: dir_first,
            goal: "≤ 1 s",
            rss: Some(dir_rss),
        },
    ]
}

fn main() {
    let debug = cfg!(debug_assertions);
    let quick = debug || std::env::args().any(|a| a == "--quick");
    let (scale, fleet) = if quick {
        let scale = Scale {
            canaries: 100,
            namespaces: 50,
            small: 10,
            idle_rss_goal: "≤ 32 MiB",
            percanary_goal: "≤ 2×, ≤ 64 MiB",
            history: 2000,
            polls: 5,
            runs: 1,
            deadline: Duration::from_secs(120),
        };
        // The fleet rows' quick case: twice the canaries over a tenth as many namespaces.
        let fleet = Scale {
            canaries: 200,
            namespaces: 10,
            small: 20,
            idle_rss_goal: "≤ 128 MiB",
            percanary_goal: "measured",
            ..scale
        };
        (scale, fleet)
    } else {
        let scale = Scale {
            canaries: env_or("SLUICE_BENCH_CANARIES", 1000),
            namespaces: 50,
            small: 10,
            idle_rss_goal: "≤ 32 MiB",
            percanary_goal: "≤ 2×, ≤ 64 MiB",
            history: env_or("SLUICE_BENCH_HISTORY", 20_000),
            polls: env_or("SLUICE_BENCH_POLLS", 20),
            runs: env_or("SLUICE_BENCH_RUNS", 3).max(1),
            deadline: Duration::from_secs(600),
        };
        let canaries = env_or("SLUICE_BENCH_FLEET", 10_000);
        let fleet = Scale {
            canaries,
            // 500 namespaces at 10,000: 20 canaries each, three files each (spec, output,
            // status), about 30,000 files.
            namespaces: (canaries / 20).max(1),
            small: (canaries / 100).max(1),
            idle_rss_goal: "≤ 128 MiB",
            percanary_goal: "measured",
            deadline: Duration::from_secs(3600),
            ..scale
        };
        (scale, fleet)
    };
    let only = std::env::var("SLUICE_BENCH_ONLY").unwrap_or_default();
    let wanted = |row: &str| only.is_empty() || only.split(',').any(|o| o == row);
    println!("| row | sluice | baseline (same run) | ratio | goal | met | sluice peak RSS |");
    println!("|---|---:|---:|---:|---|---|---:|");
    let print = |row: Row| {
        let met = match met(&row) {
            Some(true) => "met",
            Some(false) => "not met",
            None => "—",
        };
        println!(
            "| {} | {} | {} | {:.2}× | {} | {met} | {} |",
            row.name,
            row.sluice,
            row.baseline,
            row.ratio,
            row.goal,
            row.rss.map_or("".to_string(), |r| format!("{r:.1} MiB"))
        );
    };
    rows(&scale, &|row| wanted(row), &print, false);
    // The fleet rows (`fleet-idle`, ..., or `fleet` for all of them).
    let fleet_wanted = |row: &str| {
        only.is_empty()
            || only
                .split(',')
                .any(|o| o == "fleet" || o == format!("fleet-{row}"))
    };
    rows(&fleet, &fleet_wanted, &print, true);
}

/// The rows `wanted` picks at `scale`; at a `fleet` scale only those the fleet rows repeat
/// (idle, one changed spec, webhook, perCanary over the scale's namespaces, audit, cold start).
fn rows(scale: &Scale, wanted: &dyn Fn(&str) -> bool, print: &dyn Fn(Row), fleet: bool) {
    if wanted("idle") {
        for row in idle(scale) {
            print(row);
        }
    }
    if wanted("onespec") {
        print(one_spec(scale));
    }
    if wanted("webhook") {
        print(webhook(scale));
    }
    if wanted("percanary") {
        print(step_tick(scale, scale.namespaces, "perCanary"));
    }
    if !fleet && wanted("percanary1") {
        print(step_tick(scale, 1, "perCanary"));
    }
    if !fleet && wanted("pertick") {
        print(step_tick(scale, scale.namespaces, "perTick"));
    }
    if !fleet && wanted("dashboard") {
        print(dashboard(scale));
    }
    if !fleet && wanted("bigpush") {
        for row in big_push(scale) {
            print(row);
        }
    }
    if wanted("audit") {
        // On the file system the build is on (`CARGO_TARGET_TMPDIR`), as `cargo bench --bench
        // audit` measures them.
        audit_rows::rows(scale.canaries, scale.runs, |row| {
            print(Row {
                name: row.name,
                sluice: row.sluice,
                baseline: row.baseline,
                ratio: row.ratio,
                goal: if fleet { "measured" } else { row.goal },
                rss: row.rss,
            });
        });
    }
    let repack_wanted = !fleet && wanted("repack");
    if repack_wanted || wanted("cold") {
        let tmp = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let template = remote(
            tmp.path(),
            scale.canaries,
            scale.namespaces,
            "perCanary",
            scale.history,
        );
        eprintln!(
            "history repo of {} commits made in {:.0?}",
            scale.history,
            started.elapsed()
        );
        if repack_wanted {
            print(repack(&template, scale));
        }
        if wanted("cold") {
            for row in cold_start(&template, scale) {
                print(row);
            }
        }
    }
}
