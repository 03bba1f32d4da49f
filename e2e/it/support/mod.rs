//! Shared test helpers: strict JSON schemas, a real `git daemon`, git CLI calls, seeded repos.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value as Json;

pub(crate) mod adopt;
pub(crate) mod audit;
pub(crate) mod canary;
mod daemon;
pub(crate) mod dashboard;
pub(crate) mod dockerfile;
pub(crate) mod fleet;
pub(crate) mod forge;
pub(crate) mod forge_events;
pub(crate) mod git_fixture;
pub(crate) mod github_app;
pub(crate) mod judge;
pub(crate) mod knative;
pub(crate) mod kube;
pub(crate) mod manifests;
pub(crate) mod metrics;
pub(crate) mod netns;
pub(crate) mod prometheus;
pub(crate) mod remotes;
pub(crate) mod rollout;
pub(crate) mod route_case;
pub(crate) mod route_sources;
mod schemas;
pub(crate) mod standalone;
pub(crate) mod trailers;
pub(crate) mod vendors;
pub(crate) mod waves;
pub(crate) mod webdriver;
mod world;
pub(crate) use daemon::{get_status, sluice_daemon, Daemon, DaemonBuilder};
pub use schemas::Schemas;
pub(crate) use world::{Checks, SluiceCommit, Transport, World};

/// `text` as one YAML document, which passes its strict schema.
pub fn schema_valid(text: &str) -> Json {
    let doc: Json = serde_saphyr::from_str(text).unwrap();
    let errors = Schemas::default().errors(&doc);
    assert!(errors.is_empty(), "{errors:?}\n{text}");
    doc
}

/// The repo paths of `names`, sorted: a name starting with `.` as it is (a status file),
/// any other inside the output folder `out`.
pub fn output_files(out: &str, names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names
        .iter()
        .map(|n| {
            if n.starts_with('.') {
                n.to_string()
            } else {
                format!("{out}/{n}")
            }
        })
        .collect();
    v.sort();
    v
}

/// Runs git; panics with its output on failure.
/// The runtime context the tests' ticks share, built once like the daemon's. Its settings
/// cache is keyed by blob id, so repos of different tests cannot see each other's settings.
pub fn runtime() -> &'static sluice::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<sluice::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| sluice::runtime::Runtime::from_env().expect("a tokio runtime starts"))
}

/// Runs `cmd` to the end and asserts it exited 0; a failure names the command and shows its
/// stdout and stderr. Returns the output for the caller's own checks.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `git` in `dir`, as the tests' human.
fn human_git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_AUTHOR_NAME", "human")
        .env("GIT_AUTHOR_EMAIL", "human@example.com")
        .env("GIT_COMMITTER_NAME", "human")
        .env("GIT_COMMITTER_EMAIL", "human@example.com");
    cmd
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = run_ok(human_git(dir).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines [`git`] prints for `args` in `dir`.
pub fn git_lines(dir: &Path, args: &[&str]) -> Vec<String> {
    git(dir, args).lines().map(str::to_string).collect()
}

/// `file` at `rev` of the repo at `repo`.
pub fn show(repo: &Path, rev: &str, file: &str) -> String {
    git(repo, &["show", &format!("{rev}:{file}")])
}

/// Commits on main carrying `Sluice-Canary: <canary>`, oldest first: (sha, weights trailer).
pub fn commits_of(bare: &Path, canary: &str) -> Vec<(String, String)> {
    weights_log(bare, canary, &[])
}

/// [`commits_of`] in topological order: a commit after its parents even when a merged branch
/// and main committed within the same second (which date order leaves to chance).
pub fn topo_commits_of(bare: &Path, canary: &str) -> Vec<(String, String)> {
    weights_log(bare, canary, &["--topo-order"])
}

/// [`commits_of`] along main's first parents only (no commit a merge brought in).
pub fn first_parent_commits_of(bare: &Path, canary: &str) -> Vec<(String, String)> {
    weights_log(bare, canary, &["--first-parent"])
}

fn weights_log(bare: &Path, canary: &str, options: &[&str]) -> Vec<(String, String)> {
    let format = "--format=%H %(trailers:key=Sluice-Canary,valueonly,separator=)|%(trailers:key=Sluice-Weights,valueonly,separator=)";
    let mut args = vec!["log"];
    args.extend_from_slice(options);
    args.extend(["--reverse", format, "main"]);
    git(bare, &args)
        .lines()
        .filter_map(|l| {
            let (sha, rest) = l.split_once(' ')?;
            let (id, weights) = rest.split_once('|')?;
            (id.trim() == canary).then(|| (sha.to_string(), weights.trim().to_string()))
        })
        .collect()
}

/// Like [`git`], but returns whether it succeeded.
pub fn git_ok(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// GitHub's `X-Hub-Signature-256` of `body` under the webhook `secret`: `sha256=<hex HMAC>`.
pub fn github_signature(secret: &str, body: impl AsRef<[u8]>) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body.as_ref());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// The repository's root (where Cargo.toml is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, in name order, except in the folders named in `skip`.
pub fn source_files(dir: &Path, skip: &[&str], out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a source folder is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| skip.iter().any(|s| n == *s))
            {
                continue;
            }
            source_files(&path, skip, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of `rel`, a path from the repository's root.
pub fn read_repo_file(rel: &str) -> String {
    let path = repo_root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The YAML file `rel` (a path from the repository's root) as JSON.
pub fn repo_yaml(rel: &str) -> Json {
    serde_saphyr::from_str(&read_repo_file(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The tick context of the tests: `observer`, the repo settings' author, five push attempts.
pub fn tick_context<'a>(
    observer: &'a dyn sluice::observer::Observer,
    runtime: &'a sluice::runtime::Runtime,
) -> sluice::tick::Context<'a> {
    sluice::tick::Context {
        observer,
        author: None,
        push_attempts: 5,
        runtime,
        owned: sluice::holding::Holding::all(),
    }
}

/// sluice's own clone of `url`'s main in `dir`, without credentials.
pub fn sluice_clone(url: &str, dir: &Path) -> sluice::gitops::ConfigRepo {
    sluice::gitops::ConfigRepo::open_or_clone(
        url,
        "main",
        dir,
        &sluice::gitops::Credentials::none(),
    )
    .expect("sluice clones the remote")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

pub use crate::git_server::GitDaemon;
pub(crate) use crate::git_server::{Authorize, HttpGit};

/// `files` (path, text) as the borrowed pairs [`seeded_remote`] and `World` take.
pub fn str_pairs<P: AsRef<str>, T: AsRef<str>>(files: &[(P, T)]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(p, t)| (p.as_ref(), t.as_ref()))
        .collect()
}

/// A bare repo `<dir>/config.git` whose main holds `files`.
pub fn seeded_remote(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    let remote = dir.join("config.git");
    sluice::cli::demo::seed_bare_repo(
        dir,
        &remote,
        files,
        &sluice::gitops::Identity::new("human", "human@example.com"),
    )
    .expect("seed repo");
    remote
}

/// `sluice run` on a fresh remote holding some files: dropped in field order, the daemon
/// before its folder.
pub struct DaemonOnRemote {
    pub daemon: Daemon,
    /// `<tmp>/config.git`.
    pub bare: PathBuf,
    pub tmp: tempfile::TempDir,
}

impl std::ops::Deref for DaemonOnRemote {
    type Target = Daemon;

    fn deref(&self) -> &Daemon {
        &self.daemon
    }
}

/// `sluice run` as `configure` sets it up, on a fresh remote `<tmp>/config.git` whose main
/// holds `files`, its clone in `<tmp>/d`, once it answers its readiness probe.
pub fn daemon_on_remote(
    files: &[(&str, &str)],
    configure: impl FnOnce(DaemonBuilder) -> DaemonBuilder,
) -> DaemonOnRemote {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), files);
    let daemon = configure(sluice_daemon(&bare, &tmp.path().join("d"))).start();
    daemon.wait_ready();
    DaemonOnRemote { daemon, bare, tmp }
}

/// The `sluice_reconcile_ticks_total` counter, from /metrics at `addr` (0 before it shows).
pub fn reconcile_ticks(addr: &str) -> u64 {
    let (status, metrics) = http(addr, "GET", "/metrics", &[], b"");
    assert_eq!(status, 200, "{metrics}");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("sluice_reconcile_ticks_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Ticks a wait of [`until_ticks`] may take: far more than any step needs (a handful each).
const MAX_TICKS: u64 = 300;

/// A wait of [`until_ticks`] that sees no tick at all for this long has hung.
const HANG: Duration = Duration::from_secs(60);

/// Waits until `done` holds, asking every 20 ms: at most [`MAX_TICKS`] of the daemon's ticks,
/// and never [`HANG`] without one; a failed wait panics with `state()` and the daemon's log.
pub(crate) fn until_ticks(
    on: &DaemonOnRemote,
    what: &str,
    done: impl Fn() -> bool,
    state: impl Fn() -> String,
) {
    let ticks = || reconcile_ticks(on.main());
    let start = ticks();
    let (mut last, mut since) = (start, std::time::Instant::now());
    while !done() {
        let now = ticks();
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        }
        assert!(
            now - start < MAX_TICKS && since.elapsed() < HANG,
            "not {what} after {} ticks ({}):\n{}",
            now - start,
            state(),
            on.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends a signed GitHub push webhook for main (each `delivery` a distinct body) to the
/// daemon at `addr`; the answer's status.
pub fn push_webhook(addr: &str, secret: &str, delivery: &str) -> u16 {
    let body = format!(r#"{{"ref":"refs/heads/main","delivery":"{delivery}"}}"#);
    let body = body.as_bytes();
    let (status, _) = http(
        addr,
        "POST",
        "/hooks/git",
        &[
            ("X-GitHub-Event", "push"),
            ("X-GitHub-Delivery", delivery),
            ("X-Hub-Signature-256", &github_signature(secret, body)),
        ],
        body,
    );
    status
}

/// A git daemon serving `<tmp>/config.git` (see [`seeded_remote`]), its URL, and sluice's
/// clone of it in `<tmp>/work`.
pub fn served_clone(tmp: &Path) -> (GitDaemon, String, sluice::gitops::ConfigRepo) {
    let daemon = GitDaemon::start(tmp);
    let url = daemon.url("config.git");
    let repo = sluice_clone(&url, &tmp.join("work"));
    (daemon, url, repo)
}

/// A working clone of `url` for a human, in `dir`.
pub fn human_clone(url: &str, dir: &Path) -> PathBuf {
    // `--no-local`: a clone of a local path hard-links the remote's object files, and fails
    // ("hardlink different from source") when a daemon's push writes a pack there meanwhile;
    // the git transport reads a consistent view, as a human's clone over the network does.
    git(
        dir.parent().expect("parent"),
        &["clone", "-q", "--no-local", url, &dir.display().to_string()],
    );
    dir.to_path_buf()
}

/// Runs the real binary with `args` (logging errors only); returns (exit code, stdout, stderr).
/// `sluice VERB CANARY --repo BARE --reason REASON`, as the operator Ada Ops: a manual
/// operation on a bare repo.
pub fn operate_as_ada(
    bare: &Path,
    verb: &str,
    canary: &str,
    reason: &str,
) -> (i32, String, String) {
    run_sluice(&[
        verb,
        canary,
        "--repo",
        &bare.display().to_string(),
        "--reason",
        reason,
        "--as",
        "Ada Ops <ada@example.com>",
    ])
}

pub fn run_sluice(args: &[&str]) -> (i32, String, String) {
    run_sluice_env(args, &[])
}

/// [`run_sluice`] with `env` added to sluice's environment.
pub fn run_sluice_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("SLUICE_LOG", "error")
        .envs(env.iter().copied())
        .output()
        .expect("sluice runs");
    outcome(&out)
}

/// The status file `file` at `bare`'s main, when it is there and parses.
pub fn status_at_main(bare: &Path, file: &str) -> Option<Json> {
    let out = Command::new("git")
        .args(["show", &format!("main:{file}")])
        .current_dir(bare)
        .output()
        .ok()?;
    serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout)).ok()
}

/// The entries of `sluice history NS/NAME -o json` on `bare` (which must succeed).
pub fn history_json(bare: &Path, canary: &str) -> Vec<Json> {
    let (code, out, err) = run_sluice(&[
        "history",
        canary,
        "--dir",
        &bare.display().to_string(),
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<Vec<Json>>(&out).unwrap()
}

/// The entry of the rollback (phase `Failed`) in `canary`'s history on `bare`.
pub fn rollback_entry(bare: &Path, canary: &str) -> Json {
    history_json(bare, canary)
        .into_iter()
        .find(|e| e["phase"] == "Failed")
        .expect("the rollback's entry")
}

/// A finished command's (exit code, stdout, stderr); -1 when a signal ended it.
pub fn outcome(out: &Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A route-only Canary `web` in `shop` (blue/green Services, an SMI TrafficSplit) at
/// `revision`, walking `steps` (a YAML list of Sluice steps), one-second interval, threshold 2.
pub fn route_only_web(revision: &str, steps: &str) -> String {
    canary::route_only_smi(
        "shop",
        "web",
        revision,
        &format!("    interval: 1s\n    threshold: 2\n    steps: {steps}"),
    )
}

/// Merges approval branch `branch` into main in the human clone `human` and pushes, the way
/// `how` says a human on a forge would: `merge` (a merge commit), `squash`, or else a cherry-pick.
pub fn merge_approval(human: &Path, branch: &str, how: &str) {
    // A daemon may push between the pull and the push: undo the merge and merge again on
    // its new main, as a human would (a bounded number of times).
    for _ in 0..20 {
        git(human, &["pull", "-q", "origin", "main"]);
        git(human, &["fetch", "-q", "origin", branch]);
        match how {
            "merge" => git(
                human,
                &[
                    "merge",
                    "-q",
                    "--no-ff",
                    "-m",
                    "Merge approval",
                    "FETCH_HEAD",
                ],
            ),
            "squash" => {
                git(human, &["merge", "-q", "--squash", "FETCH_HEAD"]);
                git(human, &["commit", "-q", "-m", "Approve (squashed)"])
            }
            _ => git(human, &["cherry-pick", "FETCH_HEAD"]),
        };
        if git_ok(human, &["push", "-q", "origin", "HEAD:main"]) {
            return;
        }
        git(human, &["reset", "-q", "--hard", "HEAD~1"]);
    }
    panic!(
        "{}: main moved at each of 20 pushes of {branch}",
        human.display()
    );
}

/// Writes a file in a human clone, commits and pushes (pull --rebase on rejection).
pub fn human_commit(clone: &Path, file: &str, text: &str, message: &str) {
    human_commit_at(clone, file, text, message, None)
}

/// [`human_commit`] with the commit's author and committer time set to `unix_seconds` (UTC)
/// when given: a history whose decisions are spaced as a test wants them.
pub fn human_commit_at(
    clone: &Path,
    file: &str,
    text: &str,
    message: &str,
    unix_seconds: Option<i64>,
) {
    let path = clone.join(file);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    git(clone, &["add", file]);
    match unix_seconds {
        Some(t) => {
            let date = format!("{t} +0000");
            run_ok(
                human_git(clone)
                    .args(["commit", "-q", "-m", message])
                    .env("GIT_AUTHOR_DATE", &date)
                    .env("GIT_COMMITTER_DATE", &date),
            );
        }
        None => {
            git(clone, &["commit", "-q", "-m", message]);
        }
    }
    // Up to half a minute, as a human would retry: a ref lock a killed writer left in a
    // local-path remote blocks every push until sluice's next push clears it.
    let mut last = String::new();
    for _ in 0..300 {
        let push = Command::new("git")
            .args(["push", "-q", "origin", "HEAD:main"])
            .current_dir(clone)
            .output()
            .expect("git runs");
        if push.status.success() {
            return;
        }
        last = String::from_utf8_lossy(&push.stderr).into_owned();
        if last.contains("cannot lock ref") {
            std::thread::sleep(Duration::from_millis(100));
        }
        git(clone, &["pull", "-q", "--rebase", "origin", "main"]);
    }
    panic!("human push kept failing; the last attempt said: {last}");
}

/// The status code of an HTTP/1.1 answer whose head is `head`; 0 when it has none.
pub(crate) fn status_code(head: &str) -> u16 {
    head.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A minimal HTTP/1.1 request over a plain TCP connection; returns (status, body).
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).expect("write");
    stream.write_all(body).expect("write body");
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = status_code(&text);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// One `sluice reconcile` of `bare` in `workdir`, with `env` added; panics when it fails.
pub fn reconcile(
    bare: &std::path::Path,
    workdir: &std::path::Path,
    env: &[(String, String)],
) -> Output {
    run_ok(
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "reconcile",
                "--repo",
                &bare.display().to_string(),
                "--workdir",
                &workdir.display().to_string(),
            ])
            .env("SLUICE_LOG", "error")
            .envs(env.iter().map(|(k, v)| (k, v))),
    )
}

/// Every file under `dir` (its `.git` included) with its bytes, by path relative to `dir`; a
/// symbolic link by where it points. For tests that a folder was left byte for byte.
pub fn every_file_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|entry| entry.expect("walk the folder"))
        .filter(|entry| !entry.file_type().is_dir())
        .map(|entry| {
            let path = entry.path();
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            let bytes = if entry.path_is_symlink() {
                std::fs::read_link(path)
                    .unwrap()
                    .display()
                    .to_string()
                    .into_bytes()
            } else {
                std::fs::read(path).unwrap()
            };
            (name, bytes)
        })
        .collect()
}

/// `sluice demo ARGS` on a stepped clock (`SLUICE_CLOCK=stepped`): the demo's pauses (Flagger's
/// 10 s floor) are jumped over instead of waited for; logs at `error` only.
pub fn sluice_demo(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("demo")
        .args(args)
        .env("SLUICE_LOG", "error")
        .env(sluice::clock::VAR, "stepped");
    cmd
}

/// In `sluice demo`'s output: the seconds printed at the start of each line of `stdout` that contains `what`.
pub fn printed_seconds(stdout: &str, what: &str) -> Vec<f64> {
    stdout
        .lines()
        .filter(|l| l.contains(what))
        .map(|l| {
            let at = l.trim_start_matches('[').split_once("s]").unwrap().0;
            at.trim().parse::<f64>().unwrap()
        })
        .collect()
}

/// In `sluice demo`'s output: the line after each line of `stdout` that contains `what`.
pub fn line_after<'a>(stdout: &'a str, what: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = stdout.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0].contains(what))
        .map(|w| w[1])
        .collect()
}

/// A work tree (`git init`) holding `files`.
pub fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    for (path, text) in files {
        let at = dir.path().join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    }
    dir
}

/// `sluice validate <args>` run in `dir`: (exit code, stdout, stderr).
pub fn validate(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("validate")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run sluice");
    outcome(&out)
}

/// `sluice validate <args>` in `dir` passes one canary, and prints nothing else.
pub fn validates_one_canary(dir: &Path, args: &[&str]) {
    let (code, out, err) = validate(dir, args);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "1 canary valid\n", ""),
        "sluice validate {args:?}"
    );
}

/// A new unencrypted key pair of `kind` at `path` (and `path.pub`); returns the public line.
pub fn keygen(path: &Path, kind: &str) -> String {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", kind, "-N", "", "-C", "sluice", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (openssh-client) must be installed");
    assert!(status.success());
    std::fs::read_to_string(path.with_extension("pub")).unwrap()
}

/// A stepped clock for one-shot commands (`sluice reconcile`): each run starts at this clock's
/// time (`SLUICE_CLOCK=stepped@<time>`, [`Stepped::env`]), and the test moves it on with
/// [`Stepped::jump`] where it would otherwise sleep until the next due time. It starts at the
/// wall clock's time; git's commit dates stay the wall clock's.
pub struct Stepped(std::cell::Cell<jiff::Timestamp>);

impl Default for Stepped {
    fn default() -> Stepped {
        Stepped(std::cell::Cell::new(jiff::Timestamp::now()))
    }
}

impl Stepped {
    /// Moves the clock on by `by`.
    pub fn jump(&self, by: Duration) {
        let by = jiff::SignedDuration::try_from(by).expect("a short jump");
        self.0
            .set(self.0.get().checked_add(by).expect("a time in range"));
    }

    /// The variable and value that run a command at this clock's time.
    pub fn env(&self) -> (String, String) {
        (
            sluice::clock::VAR.to_string(),
            format!("stepped@{}", self.0.get()),
        )
    }

    /// `sluice reconcile` of the remote `bare` (clone in `work`) at this clock's time, which
    /// must succeed; returns its stdout and stderr (log level warn).
    pub fn reconcile(&self, bare: &Path, work: &Path) -> String {
        let (var, at) = self.env();
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["reconcile", "--repo"])
            .arg(bare)
            .arg("--workdir")
            .arg(work)
            .env(var, at)
            .env("SLUICE_LOG", "warn")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        format!("{}{stderr}", String::from_utf8_lossy(&out.stdout))
    }
}

/// `kubectl kustomize ARGS dir`, its output; `None` without kubectl, a failed build panics.
pub fn kustomize_text(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .args(args)
        .arg(dir)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}
