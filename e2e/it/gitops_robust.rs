//! The clone under stress: a push racing another writer on a local-path remote, locks a
//! killed process left behind, a remote that never answers, and a damaged clone. Real git
//! repos, the git CLI as witness, real TCP listeners; no mocks.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sluice::gitops::{ConfigRepo, Credentials, PushOutcome};

use crate::support::git_fixture::{
    commit_step, git, git_cmd, human_pushes, pack_files, time, Fixture, ROUTE,
};

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
            human_pushes(
                &hook_human,
                "README.md",
                "human change\n",
                "Human edits README",
            );
        }
    });
    commit_step(&mut repo, 10, time(10)).unwrap().unwrap();
    let outcome = repo.push_attempt(1, 3).unwrap();
    assert!(fired.load(Ordering::SeqCst), "the race was run");
    let human_head = git(&human, &["rev-parse", "HEAD"]).trim().to_string();
    let remote_head = fx.remote_head().to_string();
    assert_eq!(
        outcome,
        PushOutcome::Rejected,
        "the push lost the race; remote now at {remote_head}, human at {human_head}"
    );
    assert_eq!(remote_head, human_head, "the human commit stays on main");
    assert_eq!(fx.rewinds(), vec![], "no non-fast-forward update");

    // Like any rejection: fetch, redo, push again; both changes land.
    repo.fetch().unwrap();
    commit_step(&mut repo, 10, time(11)).unwrap().unwrap();
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
        git(&witness, &["show", &format!("HEAD:{ROUTE}")]).trim(),
        "weight: 10"
    );
    let history = fx.remote_branch_history();
    assert_eq!(
        history.last().map(String::as_str),
        Some(fx.remote_head().to_string().as_str()),
        "the reflog records sluice's update too"
    );
    assert_eq!(history.len(), 3, "seed, human, sluice: {history:?}");
    assert_eq!(fx.rewinds(), vec![], "no non-fast-forward update");
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
        let human = fx.cli_clone(&fx.bare_url(), &format!("human-{}", lock.replace('/', "-")));
        human_pushes(
            &human,
            "README.md",
            &format!("{lock}\n"),
            "Human edits README",
        );

        let (ok, err) = sluice(&args);
        assert!(ok, "start with a stale {lock}: {err}");
        assert!(
            err.contains("removed a stale git lock file") && err.contains(lock),
            "the removal is logged: {err}"
        );
        assert!(!path.exists(), "{lock} removed");
        assert_eq!(
            git(&work, &["show", "main:README.md"]),
            lock,
            "the clone caught up with the remote"
        );
    }
}

/// A TCP listener that accepts connections and never answers them (a hung server), until
/// told to forward new connections to `backend` (the server came back).
struct Stalling {
    port: u16,
    forward_to: Arc<std::sync::Mutex<Option<u16>>>,
    stop: Arc<AtomicBool>,
    /// Connections accepted so far.
    accepted: Arc<std::sync::atomic::AtomicUsize>,
}

impl Stalling {
    fn start() -> Stalling {
        Stalling::start_on(0)
    }

    fn start_on(port: u16) -> Stalling {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let forward_to = Arc::new(std::sync::Mutex::new(None::<u16>));
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (forward, stopping, count) = (forward_to.clone(), stop.clone(), accepted.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = stream else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let backend = *forward.lock().unwrap();
                match backend {
                    // Accepted, never read from or written to, kept open.
                    None => held.push(client),
                    Some(backend) => {
                        let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", backend))
                        else {
                            continue;
                        };
                        let pipe = |mut from: std::net::TcpStream, mut to: std::net::TcpStream| {
                            std::thread::spawn(move || {
                                let _ = std::io::copy(&mut from, &mut to);
                                let _ = to.shutdown(std::net::Shutdown::Write);
                            });
                        };
                        pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                        pipe(server, client);
                    }
                }
            }
        });
        Stalling {
            port,
            forward_to,
            stop,
            accepted,
        }
    }

    fn forward_to(&self, port: u16) {
        *self.forward_to.lock().unwrap() = Some(port);
    }
}

impl Drop for Stalling {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Runs `cmd` to its end, or kills it and panics after a generous guard (the bug this file
/// tests is a process that never returns).
fn finish_within_guard(mut cmd: std::process::Command, what: &str) -> std::process::Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run sluice");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(out) => out.expect("wait for sluice"),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            panic!("{what}: sluice never returned");
        }
    }
}

#[test]
fn a_remote_that_never_answers_fails_the_command_with_a_timeout() {
    let fx = Fixture::new();
    let hung = Stalling::start();
    for scheme in ["git", "http", "https"] {
        let url = format!("{scheme}://127.0.0.1:{}/remote.git", hung.port);
        let work = fx.path(&format!("work-{scheme}"));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(["reconcile", "--repo", &url, "--git-timeout", "1s"])
            .arg("--workdir")
            .arg(&work)
            .env("SLUICE_LOG", "info");
        let out = finish_within_guard(cmd, scheme);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{scheme}: {err}");
        assert!(
            err.contains("cannot reach the remote") && err.contains("timed out"),
            "{scheme}: a clear timeout error: {err}"
        );
    }
}

fn readyz(addr: &str) -> Option<u16> {
    std::net::TcpStream::connect(addr).ok()?;
    Some(crate::support::http(addr, "GET", "/readyz", &[], b"").0)
}

/// Polls `check` every 50 ms until it holds; panics after a generous guard.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The log the daemon wrote to `path` so far.
fn log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn daemon_with_a_hung_remote_is_not_ready_logs_it_and_recovers_when_it_answers() {
    let fx = Fixture::new();
    let hung = Stalling::start();
    let url = format!("git://127.0.0.1:{}/remote.git", hung.port);
    let port = crate::support::free_port();
    let addr = format!("127.0.0.1:{port}");
    let log_path = fx.path("daemon.log");
    let (mut daemon, guard) = start_daemon(
        &fx,
        &["--repo", &url, "--poll", "200ms", "--git-timeout", "1s"],
        &addr,
        &log_path,
    );

    eventually("the stalled clone is logged as a timeout", || {
        log(&log_path).contains("timed out")
    });
    assert_eq!(daemon.try_wait().unwrap(), None, "{}", log(&log_path));
    assert_eq!(readyz(&addr), Some(503), "not ready while the remote hangs");
    eventually("a second attempt", || {
        log(&log_path).matches("timed out").count() >= 2
    });
    assert_eq!(
        daemon.try_wait().unwrap(),
        None,
        "still running: it retries"
    );

    // The server answers again.
    let git_daemon = crate::support::GitDaemon::start(fx.dir.path());
    hung.forward_to(git_daemon.port);
    eventually("ready once the remote answers", || {
        readyz(&addr) == Some(200)
    });

    // And it stops on SIGTERM.
    std::process::Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status()
        .unwrap();
    let status = daemon.wait().unwrap();
    drop(guard);
    assert!(status.success(), "{}", log(&log_path));
}

#[test]
fn sigterm_stops_the_daemon_while_a_fetch_hangs() {
    let fx = Fixture::new();
    let hung = Stalling::start();
    let url = format!("git://127.0.0.1:{}/remote.git", hung.port);
    let log_path = fx.path("daemon.log");
    // A git timeout far longer than the test's guard: only the stop itself can end it.
    let (child, _guard) = start_daemon(
        &fx,
        &["--repo", &url, "--git-timeout", "1h"],
        "127.0.0.1:0",
        &log_path,
    );
    let pid = child.id();
    eventually("the daemon's clone is waiting on the hung remote", || {
        hung.accepted.load(Ordering::SeqCst) > 0
    });
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut child = child;
        let _ = tx.send(child.wait());
    });
    let status = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("SIGTERM ignored: {}", log(&log_path)))
        .unwrap();
    assert!(status.success(), "{}", log(&log_path));
    assert!(
        log(&log_path).contains("stopped"),
        "the stop is logged: {}",
        log(&log_path)
    );
}

/// The real binary's daemon (`sluice run` with `args`) listening on `listen`, with the fixture's
/// `work` dir, logging to `log_path`; the guard kills it when dropped.
fn start_daemon(
    fx: &Fixture,
    args: &[&str],
    listen: &str,
    log_path: &Path,
) -> (std::process::Child, KillOnDrop) {
    let daemon = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .args(args)
        .args(["--listen", listen, "--probe-listen", "127.0.0.1:0"])
        .arg("--workdir")
        .arg(fx.path("work"))
        .env("SLUICE_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log_path).unwrap())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(daemon.id());
    (daemon, guard)
}

/// Kills a process by id when dropped (a failed assertion must not leave a daemon running).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &self.0.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

#[test]
fn daemon_started_while_the_remote_is_down_keeps_retrying_until_it_is_up() {
    let fx = Fixture::new();
    let remote_port = crate::support::free_port(); // nothing listens there yet
    let url = format!("git://127.0.0.1:{remote_port}/remote.git");
    let addr = format!("127.0.0.1:{}", crate::support::free_port());
    let log_path = fx.path("daemon.log");
    let (mut daemon, _guard) =
        start_daemon(&fx, &["--repo", &url, "--poll", "200ms"], &addr, &log_path);
    eventually("two failed attempts", || {
        log(&log_path).matches("will retry").count() >= 2
    });
    assert_eq!(
        daemon.try_wait().unwrap(),
        None,
        "it said it would retry, so it must still run: {}",
        log(&log_path)
    );
    assert_eq!(
        readyz(&addr),
        Some(503),
        "not ready while the remote is down"
    );

    let git_daemon = crate::support::GitDaemon::start(fx.dir.path());
    let up = Stalling::start_on(remote_port);
    up.forward_to(git_daemon.port);
    eventually("ready once the remote is up", || readyz(&addr) == Some(200));
    assert_eq!(
        git(&fx.path("work"), &["show", "main:apps/podinfo/route.yaml"]),
        "weight: 0",
        "cloned"
    );
}

/// The `.pack` files of the clone in `work`.
fn packs(work: &Path) -> usize {
    pack_files(work, "pack").len()
}

#[test]
fn repacking_expires_reflogs_so_fsck_stays_clean() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let work = fx.path("work");
    let human = fx.cli_clone(&fx.bare_url(), "human");
    let human_push = |n: usize| {
        human_pushes(
            &human,
            "README.md",
            &format!("edit {n}\n"),
            &format!("Human edit {n}"),
        );
    };
    // A sluice commit that loses to a human push: after the fetch it is reachable only from
    // the clone's reflogs.
    human_push(0);
    commit_step(&mut repo, 10, time(10)).unwrap().unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Rejected);
    repo.fetch().unwrap();
    // One pack per fetch, until the clone is repacked.
    let mut n = 1;
    let mut most = packs(&work);
    loop {
        human_push(n);
        repo.fetch().unwrap();
        let now = packs(&work);
        if now < most {
            break;
        }
        most = now;
        n += 1;
        assert!(n < 200, "the clone was never repacked ({most} packs)");
    }
    // A failure here is `git fsck --strict` after a repack.
    crate::support::run_ok(git_cmd(&work).args(["fsck", "--strict", "--no-progress"]));
    // The clone still works.
    human_push(n + 1);
    assert_eq!(repo.fetch().unwrap(), fx.remote_head());
}

/// Ways a clone gets damaged (a disk, a kill at the wrong moment, a human in the work dir).
fn damage(work: &Path, how: &str) {
    let git_dir = work.join(".git");
    let pack_files = |ext: &str| pack_files(work, ext);
    match how {
        "deleted packs" => {
            for p in pack_files("pack").into_iter().chain(pack_files("idx")) {
                std::fs::remove_file(p).unwrap();
            }
        }
        "truncated pack" => {
            for p in pack_files("pack") {
                let len = std::fs::metadata(&p).unwrap().len();
                let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
                f.set_len(len / 2).unwrap();
            }
        }
        "flipped bytes in a pack" => {
            for p in pack_files("pack") {
                let mut bytes = std::fs::read(&p).unwrap();
                // Past the 12-byte header, inside the objects, up to the 20-byte trailer.
                let end = bytes.len() - 20;
                for b in bytes[12..end].iter_mut() {
                    *b ^= 0x5a;
                }
                let mut perms = std::fs::metadata(&p).unwrap().permissions();
                #[allow(clippy::permissions_set_readonly_false)]
                perms.set_readonly(false);
                std::fs::set_permissions(&p, perms).unwrap();
                std::fs::write(&p, bytes).unwrap();
            }
        }
        "garbage index" => std::fs::write(git_dir.join("index"), "garbage\n").unwrap(),
        "garbage HEAD" => std::fs::write(git_dir.join("HEAD"), "garbage\n").unwrap(),
        other => panic!("no damage {other}"),
    }
}

const DAMAGES: [&str; 5] = [
    "deleted packs",
    "truncated pack",
    "flipped bytes in a pack",
    "garbage index",
    "garbage HEAD",
];

#[test]
fn a_damaged_clone_is_cloned_afresh_at_start() {
    assert_eq!(
        not_recovered_from(reopen_after),
        Vec::<String>::new(),
        "not recovered from"
    );
}

/// The [`DAMAGES`] that `recovers` panics on (each case runs whatever the others did).
fn not_recovered_from(recovers: fn(&str)) -> Vec<String> {
    DAMAGES
        .into_iter()
        .filter(|how| std::panic::catch_unwind(|| recovers(how)).is_err())
        .map(str::to_string)
        .collect()
}

/// A human clone of the fixture's remote pushes an edit of README.md, so the damaged clone
/// has something new to fetch.
fn human_pushes_readme(fx: &Fixture) {
    let human = fx.cli_clone(&fx.bare_url(), "human");
    human_pushes(&human, "README.md", "human change\n", "Human edits README");
}

fn reopen_after(how: &str) {
    {
        let fx = Fixture::new();
        let work = fx.path("work");
        drop(fx.open(&fx.bare_url(), "work"));
        damage(&work, how);
        human_pushes_readme(&fx);

        let repo = ConfigRepo::open_or_clone(&fx.bare_url(), "main", &work, &Credentials::none())
            .unwrap_or_else(|e| panic!("{how}: {e}"));
        assert_eq!(repo.head(), fx.remote_head(), "{how}");
        assert_eq!(
            git(&work, &["show", "main:README.md"]),
            "human change",
            "{how}"
        );
        if how == "garbage index" {
            // The clone has no work tree: an index (an older sluice's) is only removed.
            assert!(
                !work.join(".git/index").exists(),
                "{how}: the index is removed"
            );
        } else {
            assert!(
                fx.path("work.damaged").join(".git").exists(),
                "{how}: the damaged clone is kept aside"
            );
        }
        let fsck = git_cmd(&work)
            .args(["fsck", "--strict", "--no-progress"])
            .status()
            .unwrap();
        assert!(fsck.success(), "{how}: the new clone is whole");
    }
}

#[test]
fn a_clone_damaged_while_running_is_cloned_afresh_by_the_next_fetch() {
    assert_eq!(
        not_recovered_from(fetch_after),
        Vec::<String>::new(),
        "not recovered from"
    );
}

fn fetch_after(how: &str) {
    {
        let fx = Fixture::new();
        let work = fx.path("work");
        let mut repo = fx.open(&fx.bare_url(), "work");
        damage(&work, how);
        human_pushes_readme(&fx);

        let head = repo.fetch().unwrap_or_else(|e| panic!("{how}: {e}"));
        assert_eq!(head, fx.remote_head(), "{how}");
        // And it writes and pushes again. Damage the fetch did not need to read shows when the
        // commit reads the parent's trees or the push packs the objects: that step fails,
        // saying the clone is damaged, and the next fetch (the next tick) clones afresh, as the
        // tick redoes its change on every fetch.
        let commit_and_push =
            |repo: &mut ConfigRepo| -> Result<PushOutcome, sluice::gitops::Error> {
                commit_step(repo, 20, time(20))?.expect("a change to commit");
                repo.push()
            };
        match commit_and_push(&mut repo) {
            Ok(outcome) => assert!(matches!(outcome, PushOutcome::Pushed(_)), "{how}"),
            Err(e) => {
                assert_eq!(e.kind(), "damaged", "{how}: {e}");
                assert!(e.to_string().contains("is damaged"), "{how}: {e}");
                repo.fetch().unwrap_or_else(|e| panic!("{how}: {e}"));
                assert!(
                    matches!(commit_and_push(&mut repo), Ok(PushOutcome::Pushed(_))),
                    "{how}: the fresh clone commits and pushes"
                );
                assert!(
                    fx.path("work.damaged").join(".git").exists(),
                    "{how}: the damaged clone is kept aside"
                );
            }
        }
        assert_eq!(
            git(&fx.bare(), &["show", &format!("refs/heads/main:{ROUTE}")]),
            "weight: 20",
            "{how}"
        );
    }
}

/// What a writer killed mid-update leaves in a local-path remote: the branch's lock file.
fn leave_ref_lock(bare: &Path, age: std::time::Duration) -> std::path::PathBuf {
    let lock = bare.join("refs/heads/main.lock");
    std::fs::write(&lock, "0000").unwrap();
    let file = std::fs::File::options().write(true).open(&lock).unwrap();
    file.set_modified(std::time::SystemTime::now() - age)
        .unwrap();
    lock
}

#[test]
fn a_ref_lock_a_killed_writer_left_in_a_local_remote_does_not_block_pushes_forever() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let lock = leave_ref_lock(
        &fx.bare(),
        sluice::gitops::STALE_REF_LOCK + std::time::Duration::from_secs(5),
    );
    commit_step(&mut repo, 10, time(10)).unwrap().unwrap();
    assert!(matches!(
        repo.push_attempt(1, 3).unwrap(),
        PushOutcome::Pushed(_)
    ));
    assert!(!lock.exists(), "the stale lock is removed");
    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    assert_eq!(
        git(&witness, &["show", &format!("HEAD:{ROUTE}")]).trim(),
        "weight: 10"
    );
}

#[test]
fn a_fresh_ref_lock_in_a_local_remote_is_someone_elses_update_and_stays() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let lock = leave_ref_lock(&fx.bare(), std::time::Duration::ZERO);
    commit_step(&mut repo, 10, time(10)).unwrap().unwrap();
    assert_eq!(repo.push_attempt(1, 3).unwrap(), PushOutcome::Rejected);
    assert!(lock.exists(), "an update in flight is not broken into");
}

#[test]
fn reconcile_against_a_remote_that_is_down_fails_without_promising_a_retry() {
    let fx = Fixture::new();
    let port = crate::support::free_port(); // nothing listens there any more
    let url = format!("git://127.0.0.1:{port}/config.git");
    let work = fx.path("work");
    let (ok, err) = sluice(&[
        "reconcile",
        "--repo",
        &url,
        "--workdir",
        work.to_str().unwrap(),
    ]);
    assert!(!ok, "a one-shot reconcile that reached nothing fails");
    assert!(err.contains("cannot reach the remote"), "{err}");
    assert!(
        !err.contains("will retry"),
        "a one-shot command retries nothing, so it must not say it will: {err}"
    );
}

/// A daemon SIGKILLed while its first clone was creating the repository leaves a `.git`
/// libgit2 cannot open and whose config names no remote yet (the chaos test of waves hit it:
/// the restarted daemon refused to start, as a crash-looping pod would forever). It is set
/// aside and cloned afresh; a folder with anything else in it is still refused.
#[test]
fn a_clone_killed_while_creating_its_repository_is_cloned_afresh_at_start() {
    let fx = Fixture::new();
    let work = fx.path("work");
    std::fs::create_dir_all(work.join(".git/objects")).unwrap();
    let repo = ConfigRepo::open_or_clone(&fx.bare_url(), "main", &work, &Credentials::none())
        .unwrap_or_else(|e| panic!("the interrupted clone is not recovered: {e}"));
    assert_eq!(repo.head(), fx.remote_head());
    assert!(fx.path("work.damaged").join(".git").exists(), "kept aside");

    let other = fx.path("other");
    std::fs::create_dir_all(other.join(".git/objects")).unwrap();
    std::fs::write(other.join("notes.txt"), "someone's file\n").unwrap();
    let refused = ConfigRepo::open_or_clone(&fx.bare_url(), "main", &other, &Credentials::none());
    assert!(
        refused.is_err(),
        "a folder with other files is not taken over"
    );
    assert!(other.join("notes.txt").exists());
}
