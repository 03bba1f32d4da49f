//! Integration tests of the git adapter against real git: bare repos in temp dirs, the git CLI
//! as the independent witness, a `git daemon` process and `git http-backend` behind a tiny
//! HTTP server as real remotes. No mocks.
//!
//! Needs the `git` CLI (Debian's `git` package ships `git daemon` and `git http-backend`) and,
//! for the signing test, `ssh-keygen` (`openssh-client`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use sluice::gitops::{
    CommitMessage, ConfigRepo, Credentials, Error, FileChange, Identity, PushOutcome, Signing, Time,
};

use crate::support::{GitDaemon, HttpGit};
// Re-exported: the git tests' fixture lived here, and tests written against
// `crate::gitops::{Fixture, git, ...}` keep working.
pub(crate) use crate::support::git_fixture::{
    assert_good_signature, commit_step, git, git_cmd, git_ok, human_pushes, oid, old_sluice_clone,
    old_sluice_commit, pack_files, route_change, step_message, time, Fixture, ROUTE,
};

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// tests

#[test]
fn clone_commit_push_is_seen_by_git_cli() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    assert_eq!(repo.head(), fx.remote_head());
    assert_eq!(
        repo.read_file_at_head(ROUTE).unwrap().as_deref(),
        Some("weight: 0\n")
    );
    assert_eq!(repo.read_file_at_head("missing.yaml").unwrap(), None);
    assert_eq!(repo.read_file_at_head("apps").unwrap(), None, "a directory");

    let mut changes = route_change(10);
    changes.push(FileChange::write(
        "apps/podinfo/new/canary.yaml",
        "new: file\n",
    ));
    changes.push(FileChange::delete("README.md"));
    let commit = repo
        .commit_files(&changes, &step_message(10), &Identity::default(), time(100))
        .unwrap()
        .expect("a commit");
    assert_eq!(repo.head(), commit);
    assert_eq!(
        repo.read_file_at_head(ROUTE).unwrap().as_deref(),
        Some("weight: 10\n")
    );
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(commit));
    assert_eq!(fx.remote_head(), commit);

    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    assert_eq!(git(&witness, &["rev-parse", "HEAD"]), commit.to_string());
    assert_eq!(
        git(&witness, &["show", &format!("HEAD:{ROUTE}")]),
        "weight: 10"
    );
    assert_eq!(
        git(&witness, &["show", "HEAD:apps/podinfo/new/canary.yaml"]),
        "new: file"
    );
    assert!(!witness.join("README.md").exists());
    assert_eq!(
        git(
            &witness,
            &["log", "-1", "--format=%an <%ae>|%cn <%ce>|%at|%ct"]
        ),
        "sluice <sluice@localhost>|sluice <sluice@localhost>|1700000100|1700000100"
    );
    assert_eq!(git(&witness, &["status", "--porcelain"]), "");
    // sluice left nothing checked out behind.
    assert_eq!(checked_out(repo.root()), Vec::<String>::new());
    git(&witness, &["fsck", "--strict"]);
    fx.assert_never_rewound();
}

#[test]
fn commit_hash_is_stable_and_identical_to_git_cli() {
    // The same change with fixed dates gives the same hash in two independent runs, and the
    // same hash as git itself makes for that commit: the object is byte-for-byte what git writes.
    let run = || {
        let fx = Fixture::new();
        let mut repo = fx.open(&fx.bare_url(), "work");
        let commit = repo
            .commit_files(
                &route_change(20),
                &step_message(20),
                &Identity::new("sluice", "sluice@localhost"),
                time(200),
            )
            .unwrap()
            .unwrap();
        (fx, commit)
    };
    let (fx, first) = run();
    let (_fx2, second) = run();
    assert_eq!(first, second);

    let cli = fx.cli_clone(&fx.bare_url(), "cli");
    std::fs::write(cli.join(ROUTE), "weight: 20\n").unwrap();
    std::fs::write(fx.path("msg"), step_message(20).render().unwrap()).unwrap();
    git(&cli, &["add", ROUTE]);
    let status = git_cmd(&cli)
        .args(["commit", "-q", "--cleanup=verbatim", "-F"])
        .arg(fx.path("msg"))
        .env("GIT_AUTHOR_NAME", "sluice")
        .env("GIT_AUTHOR_EMAIL", "sluice@localhost")
        .env("GIT_COMMITTER_NAME", "sluice")
        .env("GIT_COMMITTER_EMAIL", "sluice@localhost")
        .env("GIT_AUTHOR_DATE", "1700000200 +0000")
        .env("GIT_COMMITTER_DATE", "1700000200 +0000")
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(git(&cli, &["rev-parse", "HEAD"]), first.to_string());
}

#[test]
fn file_url_remote_works() {
    let fx = Fixture::new();
    let url = format!("file://{}", fx.bare().display());
    let mut repo = fx.open(&url, "work");
    let commit = commit_step(&mut repo, 5, time(1)).unwrap().unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(commit));
    assert_eq!(fx.remote_head(), commit);
}

#[test]
fn git_daemon_remote_clone_push() {
    let fx = Fixture::new();
    let (_daemon, url) = fx.served();
    let mut repo = fx.open(&url, "work");
    assert_eq!(repo.head(), fx.remote_head());
    let commit = commit_step(&mut repo, 30, time(30)).unwrap().unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(commit));

    let witness = fx.cli_clone(&url, "witness");
    assert_eq!(git(&witness, &["rev-parse", "HEAD"]), commit.to_string());
    assert_eq!(
        git(&witness, &["show", &format!("HEAD:{ROUTE}")]),
        "weight: 30"
    );
    assert_eq!(git(repo.root(), &["config", "remote.origin.url"]), url);

    // Re-opening the same work dir reuses the clone and sees new remote commits.
    human_pushes(&witness, "README.md", "edited by a human\n", "human edit");
    drop(repo);
    let repo = fx.open(&url, "work");
    assert_eq!(repo.head(), fx.remote_head());
    assert_eq!(
        repo.read_file_at_head("README.md").unwrap().as_deref(),
        Some("edited by a human\n")
    );
    fx.assert_never_rewound();
}

#[test]
fn push_conflict_keeps_human_commit() {
    let fx = Fixture::new();
    let (_daemon, url) = fx.served();
    let mut repo = fx.open(&url, "work");

    // A human pushes while sluice holds a stale head.
    let human = fx.cli_clone(&url, "human");
    human_pushes(&human, "README.md", "human change\n", "Human edits README");
    let human_commit = git(&human, &["rev-parse", "HEAD"]);

    commit_step(&mut repo, 10, time(10)).unwrap().unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Rejected);
    assert_eq!(
        fx.remote_head(),
        oid(&human_commit),
        "rejected push changed nothing"
    );

    let mut redos = 0;
    let pushed = repo
        .push_with_retry(5, |repo: &mut ConfigRepo| {
            redos += 1;
            // The caller re-reads the new head and re-applies its change.
            let current = repo.read_file_at_head("README.md").unwrap();
            assert_eq!(
                current.as_deref(),
                Some("human change\n"),
                "redo sees the human's commit"
            );
            commit_step(repo, 10, time(11))?;
            Ok::<(), Error>(())
        })
        .unwrap();
    assert_eq!(redos, 1);
    assert_eq!(pushed, repo.head());
    assert_eq!(fx.remote_head(), pushed);

    let witness = fx.cli_clone(&url, "witness");
    assert!(git_ok(
        &witness,
        &["merge-base", "--is-ancestor", &human_commit, "HEAD"]
    ));
    assert_eq!(git(&witness, &["show", "HEAD:README.md"]), "human change");
    assert_eq!(
        git(&witness, &["show", &format!("HEAD:{ROUTE}")]),
        "weight: 10"
    );
    assert_eq!(
        git(&witness, &["rev-list", "--count", "HEAD"]),
        "3",
        "seed, human, sluice: the first sluice commit was dropped, not pushed"
    );
    fx.assert_never_rewound();
}

#[test]
fn concurrent_sluice_writers_both_land() {
    let fx = Fixture::new();
    let (_daemon, url) = fx.served();
    let writers: Vec<_> = (0..2)
        .map(|i| {
            let repo = fx.open(&url, &format!("work{i}"));
            std::thread::spawn(move || {
                let mut repo = repo;
                let path = format!("apps/app{i}/route.yaml");
                let commit = |repo: &mut ConfigRepo| {
                    repo.commit_files(
                        &[FileChange::write(&path, format!("writer: {i}\n"))],
                        &CommitMessage::new(format!("writer {i}")),
                        &Identity::default(),
                        None,
                    )
                    .map(|_| ())
                };
                commit(&mut repo).unwrap();
                repo.push_with_retry(10, commit).unwrap()
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let witness = fx.cli_clone(&url, "witness");
    assert_eq!(
        git(&witness, &["show", "HEAD:apps/app0/route.yaml"]),
        "writer: 0"
    );
    assert_eq!(
        git(&witness, &["show", "HEAD:apps/app1/route.yaml"]),
        "writer: 1"
    );
    fx.assert_never_rewound();
}

#[test]
fn push_with_retry_gives_up_when_the_branch_keeps_moving() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let human = fx.cli_clone(&fx.bare_url(), "human");
    let mut n = 0;
    let mut human_push = || {
        n += 1;
        human_pushes(
            &human,
            "README.md",
            &format!("edit {n}\n"),
            &format!("edit {n}"),
        );
    };
    human_push();
    commit_step(&mut repo, 1, None).unwrap();
    let err = repo
        .push_with_retry(3, |repo: &mut ConfigRepo| {
            commit_step(repo, 1, None)?;
            human_push(); // the human wins every race
            Ok::<(), Error>(())
        })
        .unwrap_err();
    assert!(
        matches!(err, Error::PushRetriesExhausted { attempts: 3, .. }),
        "{err}"
    );
    assert!(err.is_transient());
    fx.assert_never_rewound();
    // Nothing of ours landed; the human's commits all did.
    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    assert_eq!(
        git(&witness, &["show", &format!("HEAD:{ROUTE}")]),
        "weight: 0"
    );
}

#[test]
fn push_refused_by_server_hook_is_terminal() {
    let fx = Fixture::new();
    let hook = fx.bare().join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'branch is protected' >&2\nexit 1\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let daemon = GitDaemon::start(fx.dir.path());
    let mut repo = fx.open(&daemon.url("remote.git"), "work");
    commit_step(&mut repo, 1, None).unwrap();
    let err = repo.push().unwrap_err();
    assert!(matches!(err, Error::PushRefused { .. }), "{err}");
    assert!(!err.is_transient());
    let err = repo
        .push_with_retry(3, |_: &mut ConfigRepo| -> Result<(), Error> {
            panic!("a refused push is not retried")
        })
        .unwrap_err();
    assert!(matches!(err, Error::PushRefused { .. }), "{err}");
}

#[test]
fn no_commit_when_nothing_changed() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let head = repo.head();
    let same = commit_step(&mut repo, 0, None).unwrap();
    assert_eq!(same, None);
    let gone = repo
        .commit_files(
            &[FileChange::delete("never/existed.yaml")],
            &CommitMessage::new("delete nothing"),
            &Identity::default(),
            None,
        )
        .unwrap();
    assert_eq!(gone, None);
    let empty = repo
        .commit_files(
            &[],
            &CommitMessage::new("nothing"),
            &Identity::default(),
            None,
        )
        .unwrap();
    assert_eq!(empty, None);
    assert_eq!(repo.head(), head);
    assert_eq!(checked_out(repo.root()), Vec::<String>::new());
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(head));
    assert_eq!(fx.remote_head(), head);
}

#[test]
fn trailers_round_trip_through_git_log() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    for (i, weight) in [10, 20].into_iter().enumerate() {
        commit_step(&mut repo, weight, time(i as i64))
            .unwrap()
            .unwrap();
    }
    // A commit for another canary, and one with no trailers.
    repo.commit_files(
        &[FileChange::write("apps/other/route.yaml", "weight: 5\n")],
        &CommitMessage::new("Advance other.prod canary weight 5")
            .trailer("Sluice-Canary", "prod/other"),
        &Identity::default(),
        time(3),
    )
    .unwrap()
    .unwrap();
    repo.push().unwrap();

    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    assert_eq!(
        git(
            &witness,
            &[
                "log",
                "--format=%(trailers:key=Sluice-Canary,valueonly,separator=)"
            ]
        ),
        "prod/other\nprod/podinfo\nprod/podinfo"
    );
    assert_eq!(
        git(&witness, &["log", "-1", "--skip=1", "--format=%(trailers)"]),
        "Sluice-Canary: prod/podinfo\nSluice-Weight: 20"
    );
    let body = git(&witness, &["log", "-1", "--skip=1", "--format=%B"]);
    let parsed = git_cmd(&witness)
        .args(["interpret-trailers", "--parse"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(body.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(
        String::from_utf8(parsed.stdout).unwrap(),
        "Sluice-Canary: prod/podinfo\nSluice-Weight: 20\n"
    );
    assert_eq!(
        git(&witness, &["log", "-1", "--skip=1", "--format=%s"]),
        "Advance podinfo.prod canary weight 20"
    );

    // sluice reads the same back.
    let all = repo.history(None, 100).unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(all[3].subject, "seed");
    assert!(all[3].trailers.is_empty());
    let podinfo = repo
        .history(Some(("sluice-canary", "prod/podinfo")), 10)
        .unwrap();
    assert_eq!(podinfo.len(), 2);
    assert_eq!(podinfo[0].subject, "Advance podinfo.prod canary weight 20");
    assert_eq!(
        podinfo[0].trailers,
        vec![
            ("Sluice-Canary".to_string(), "prod/podinfo".to_string()),
            ("Sluice-Weight".to_string(), "20".to_string()),
        ]
    );
    assert_eq!(podinfo[0].author, Identity::default());
    assert_eq!(podinfo[0].time, Time::new(1_700_000_001, 0));
    assert_eq!(
        podinfo[0].oid.to_string(),
        git(&witness, &["rev-parse", "HEAD~1"])
    );
    assert_eq!(
        repo.history(Some(("Sluice-Canary", "prod/podinfo")), 1)
            .unwrap()
            .len(),
        1
    );
    assert!(repo.history(None, 0).unwrap().is_empty());
}

#[test]
fn http_credentials_are_used_but_never_written_to_disk() {
    let fx = Fixture::new();
    let server = HttpGit::start(fx.dir.path(), "user", "s3cr3t-pw");
    let url = server.url("user:s3cr3t-pw@", "remote.git");
    let mut repo = fx.open(&url, "work");
    assert!(server.authorized_requests() > 0);
    assert_eq!(repo.remote_url(), server.url("", "remote.git"));
    assert!(!format!("{repo:?}").contains("s3cr3t"));
    let commit = commit_step(&mut repo, 40, None).unwrap().unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(commit));
    assert_eq!(fx.remote_head(), commit);
    repo.fetch().unwrap();

    let config = std::fs::read_to_string(repo.root().join(".git/config")).unwrap();
    assert!(config.contains(&server.url("", "remote.git")), "{config}");
    assert_eq!(
        files_containing(&repo.root().join(".git"), b"s3cr3t"),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        git(repo.root(), &["log", "--format=%B"])
            .matches("s3cr3t")
            .count(),
        0
    );

    // Credentials from SLUICE_GIT_* work the same way, against the clean URL.
    drop(repo);
    let creds = Credentials::from_lookup(|name| match name {
        "SLUICE_GIT_USERNAME" => Some("user".to_string()),
        "SLUICE_GIT_PASSWORD" => Some("s3cr3t-pw".to_string()),
        _ => None,
    })
    .unwrap();
    let repo = ConfigRepo::open_or_clone(
        &server.url("", "remote.git"),
        "main",
        &fx.path("work2"),
        &creds,
    )
    .unwrap();
    assert_eq!(repo.head(), commit);
}

#[test]
fn wrong_or_missing_http_credentials_are_terminal_auth_errors() {
    let fx = Fixture::new();
    let server = HttpGit::start(fx.dir.path(), "user", "right-password");
    for (url, creds) in [
        (
            server.url("user:wr0ng-pw@", "remote.git"),
            Credentials::none(),
        ),
        (
            server.url("", "remote.git"),
            Credentials::token("wr0ng-token"),
        ),
        (server.url("", "remote.git"), Credentials::none()),
    ] {
        let work = fx.path("work");
        let err = ConfigRepo::open_or_clone(&url, "main", &work, &creds).unwrap_err();
        assert!(matches!(err, Error::Auth { .. }), "{url}: {err}");
        assert!(!err.is_transient());
        let text = format!("{err} {err:?}");
        assert!(!text.contains("wr0ng"), "{text}");
        assert!(text.contains("SLUICE_GIT_TOKEN"), "{text}");
        assert_eq!(files_containing(&work, b"wr0ng"), Vec::<PathBuf>::new());
        std::fs::remove_dir_all(&work).unwrap();
    }
}

#[test]
fn stored_url_with_credentials_is_cleaned_on_open() {
    let fx = Fixture::new();
    let server = HttpGit::start(fx.dir.path(), "user", "pw-in-config");
    let url = server.url("user:pw-in-config@", "remote.git");
    // A clone an older sluice made, whose stored URL still has the password in it.
    drop(old_sluice_clone(&fx.bare_url(), &fx.path("work")));
    git(&fx.path("work"), &["remote", "set-url", "origin", &url]);
    assert!(!files_containing(&fx.path("work/.git"), b"pw-in-config").is_empty());
    let repo = fx.open(&url, "work");
    assert_eq!(repo.remote_url(), server.url("", "remote.git"));
    let config = std::fs::read_to_string(fx.path("work/.git/config")).unwrap();
    assert!(!config.contains("pw-in-config"), "{config}");
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let head = repo.head();
    for path in [
        "../escape.yaml",
        "apps/../../x",
        "/etc/passwd",
        ".git/config",
        "a//b",
        "",
    ] {
        let err = repo
            .commit_files(
                &[
                    FileChange::write("apps/ok.yaml", "ok\n"),
                    FileChange::write(path, "x\n"),
                ],
                &CommitMessage::new("bad"),
                &Identity::default(),
                None,
            )
            .unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{path:?}: {err}");
        assert_eq!(
            repo.read_file_at_head("apps/ok.yaml").unwrap(),
            None,
            "nothing committed"
        );
        assert_eq!(
            checked_out(repo.root()),
            Vec::<String>::new(),
            "nothing written"
        );
        assert!(matches!(
            repo.read_file_at_head(path),
            Err(Error::InvalidPath { .. })
        ));
    }
    assert!(!fx.path("escape.yaml").exists());
    let dup = repo.commit_files(
        &[FileChange::write("a", "1"), FileChange::delete("a")],
        &CommitMessage::new("dup"),
        &Identity::default(),
        None,
    );
    assert!(matches!(dup, Err(Error::InvalidPath { .. })));
    let bad_msg = repo.commit_files(
        &route_change(1),
        &CommitMessage::new("two\nlines"),
        &Identity::default(),
        None,
    );
    assert!(matches!(bad_msg, Err(Error::InvalidMessage { .. })));
    let bad_id = repo.commit_files(
        &route_change(1),
        &CommitMessage::new("s"),
        &Identity::new("x", ""),
        None,
    );
    assert!(matches!(bad_id, Err(Error::InvalidIdentity { .. })));
    assert_eq!(repo.head(), head);
    assert_eq!(checked_out(repo.root()), Vec::<String>::new());

    let none = Credentials::none();
    let open = |url: &str, branch: &str, work: &str| {
        ConfigRepo::open_or_clone(url, branch, &fx.path(work), &none)
    };
    assert!(matches!(
        open(&fx.bare_url(), "bad..branch", "w1"),
        Err(Error::InvalidBranch { .. })
    ));
    assert!(matches!(
        open(&fx.bare_url(), "", "w1"),
        Err(Error::InvalidBranch { .. })
    ));
    assert!(matches!(
        open("ftp://example.com/r.git", "main", "w1"),
        Err(Error::InvalidUrl { .. })
    ));
    let err = open(&fx.bare_url(), "no-such-branch", "w2").unwrap_err();
    assert!(matches!(err, Error::BranchNotFound { .. }), "{err}");
    assert!(!err.is_transient());
    // The seed clone is a non-empty directory that is a clone of another remote.
    let err = open(&fx.bare_url(), "main", "seed").unwrap_err();
    assert!(matches!(err, Error::Workdir { .. }), "{err}");
    std::fs::create_dir_all(fx.path("junk")).unwrap();
    std::fs::write(fx.path("junk/file"), "x").unwrap();
    let err = open(&fx.bare_url(), "main", "junk").unwrap_err();
    assert!(matches!(err, Error::Workdir { .. }), "{err}");
    let err = open(&fx.path("missing.git").display().to_string(), "main", "w3").unwrap_err();
    assert!(matches!(err, Error::NoSuchPath { .. }), "{err}");
    assert!(!err.is_transient());
}

#[test]
fn unreachable_remote_is_transient() {
    let fx = Fixture::new();
    let port = crate::support::free_port(); // nothing listens there
    let url = format!("git://127.0.0.1:{port}/remote.git");
    let err = ConfigRepo::open_or_clone(&url, "main", &fx.path("work"), &Credentials::none())
        .unwrap_err();
    assert!(matches!(err, Error::Network { .. }), "{err}");
    assert!(err.is_transient());
    assert_eq!(err.kind(), "network");
}

#[test]
fn missing_repo_on_git_daemon_is_terminal() {
    let fx = Fixture::new();
    let daemon = GitDaemon::start(fx.dir.path());
    let err = ConfigRepo::open_or_clone(
        &daemon.url("nope.git"),
        "main",
        &fx.path("work"),
        &Credentials::none(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Remote { .. }), "{err}");
    assert!(!err.is_transient());
}

#[test]
fn interrupted_clone_resumes_in_the_same_work_dir() {
    let fx = Fixture::new();
    let port = crate::support::free_port();
    let url = format!("git://127.0.0.1:{port}/remote.git");
    let work = fx.path("work");
    assert!(ConfigRepo::open_or_clone(&url, "main", &work, &Credentials::none()).is_err());
    assert!(work.join(".git").exists());
    // Serve the same URL now (same port) and retry with the same work dir.
    let daemon = GitDaemon::serve(fx.dir.path(), port).expect("git daemon on the same port");
    let repo = ConfigRepo::open_or_clone(&url, "main", &work, &Credentials::none()).unwrap();
    assert_eq!(repo.head(), fx.remote_head());
    drop(daemon);
}

#[test]
fn fetch_drops_local_changes_and_unpushed_commits() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let remote = fx.remote_head();
    let mut changes = route_change(50);
    changes.push(FileChange::write("apps/new/file.yaml", "new\n"));
    let unpushed = repo
        .commit_files(&changes, &step_message(50), &Identity::default(), None)
        .unwrap()
        .unwrap();
    // The remote did not move but our local head did: fetch moves back to the remote head.
    assert_eq!(repo.fetch().unwrap(), remote);
    assert_eq!(repo.head(), remote);
    assert_eq!(
        repo.read_file_at_head(ROUTE).unwrap().as_deref(),
        Some("weight: 0\n")
    );
    assert_eq!(repo.read_file_at_head("apps/new/file.yaml").unwrap(), None);
    assert_ne!(
        git(repo.root(), &["rev-parse", "refs/heads/main"]),
        unpushed.to_string()
    );
    assert_eq!(checked_out(repo.root()), Vec::<String>::new());
    // Re-opening moves back too (the state of a crashed process is not trusted); a file
    // someone dropped in the work dir meanwhile is not sluice's: it is left as it is.
    std::fs::write(repo.root().join("stray.txt"), "someone's notes\n").unwrap();
    drop(repo);
    let repo = fx.open(&fx.bare_url(), "work");
    assert_eq!(repo.head(), remote);
    assert_eq!(
        repo.read_file_at_head("README.md").unwrap().as_deref(),
        Some("config repo\n")
    );
    assert_eq!(checked_out(repo.root()), vec!["stray.txt".to_string()]);
    assert_eq!(
        std::fs::read(repo.root().join("stray.txt")).unwrap(),
        b"someone's notes\n"
    );
}

#[cfg(unix)]
#[test]
fn symlinks_in_the_config_repo_are_not_followed() {
    let fx = Fixture::new();
    let outside = fx.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let seed = fx.path("seed");
    std::os::unix::fs::symlink(&outside, seed.join("linked")).unwrap();
    std::os::unix::fs::symlink(outside.join("target.yaml"), seed.join("file-link.yaml")).unwrap();
    git(&seed, &["add", "."]);
    git(&seed, &["commit", "-q", "-m", "symlinks"]);
    git(&seed, &["push", "-q", fx.bare().to_str().unwrap(), "main"]);

    let mut repo = fx.open(&fx.bare_url(), "work");
    for path in ["linked/x.yaml", "file-link.yaml"] {
        let err = repo
            .commit_files(
                &[FileChange::write(path, "x\n")],
                &CommitMessage::new("through a symlink"),
                &Identity::default(),
                None,
            )
            .unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{path}: {err}");
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

#[test]
fn signed_commits_verify_with_git() {
    let fx = Fixture::new();
    let (key, allowed) = fx.signing_key();
    let mut repo = fx.open(&fx.bare_url(), "work");
    repo.set_signing(Some(Signing::Ssh {
        key_path: key.clone(),
    }));
    let commit = commit_step(&mut repo, 60, time(60)).unwrap().unwrap();
    repo.push().unwrap();

    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    assert_good_signature(&witness, &allowed, &commit.to_string(), "signed commit");
    assert_eq!(
        git(&witness, &["log", "-1", "--format=%G?"]),
        "G",
        "git sees a good signature"
    );
    // Trailers still parse on a signed commit.
    assert_eq!(
        git(
            &witness,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Sluice-Weight,valueonly)"
            ]
        ),
        "60"
    );

    // A key that cannot sign is a terminal signing error, and nothing is committed.
    repo.set_signing(Some(Signing::Ssh {
        key_path: fx.path("no-such-key"),
    }));
    let head = repo.head();
    let err = commit_step(&mut repo, 70, None).unwrap_err();
    assert!(matches!(err, Error::Signing { .. }), "{err}");
    assert_eq!(repo.head(), head);
}

#[test]
fn a_failed_commit_leaves_nothing_behind() {
    let fx = Fixture::new();
    let work = fx.path("work");
    let mut repo = fx.open(&fx.bare_url(), "work");
    let head = repo.head();
    // The first change is fine, the second is not: `apps` is a folder, and deleting a folder
    // is not a file change. Refused before anything is written.
    for (bad, what) in [
        (FileChange::delete("apps"), "is a folder"),
        (FileChange::write("apps/podinfo", "x\n"), "is a folder"),
        (FileChange::write("README.md/x.yaml", "x\n"), "below a file"),
    ] {
        let err = repo
            .commit_files(
                &[FileChange::write("apps/half.yaml", "half\n"), bad.clone()],
                &CommitMessage::new("fails halfway"),
                &Identity::default(),
                None,
            )
            .unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
        assert!(err.to_string().contains(what), "{bad:?}: {err}");
        assert!(!err.is_transient());
        assert_eq!(repo.head(), head, "{bad:?}");
    }
    assert_eq!(
        checked_out(&work),
        Vec::<String>::new(),
        "nothing written to disk"
    );
    assert_eq!(
        git(&work, &["rev-parse", "refs/heads/main"]),
        head.to_string()
    );
    assert_eq!(repo.fetch().unwrap(), head);
    let next = commit_step(&mut repo, 10, time(10)).unwrap().unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(next));
    assert_eq!(
        git(&fx.bare(), &["ls-tree", "--name-only", "-r", "main"]),
        "README.md\napps/podinfo/route.yaml",
        "the half-made commit's file is in no commit"
    );
}

#[test]
fn fetch_moves_the_branch_and_checks_nothing_out() {
    let fx = Fixture::new();
    let work = fx.path("work");
    let mut repo = fx.open(&fx.bare_url(), "work");
    let before = repo.head();
    assert_eq!(repo.fetch().unwrap(), before, "nothing moved");
    let human = fx.cli_clone(&fx.bare_url(), "human");
    human_pushes(&human, "README.md", "moved\n", "move");
    assert_eq!(repo.fetch().unwrap(), fx.remote_head());
    assert_eq!(repo.head(), fx.remote_head());
    assert_eq!(
        git(&work, &["rev-parse", "refs/heads/main"]),
        fx.remote_head().to_string(),
        "the local branch follows"
    );
    assert_eq!(
        repo.read_file_at_head("README.md").unwrap().as_deref(),
        Some("moved\n")
    );
    assert_eq!(
        checked_out(&work),
        Vec::<String>::new(),
        "nothing checked out"
    );
}

/// Loose object files under `.git/objects/xx/` of a clone.
fn loose_objects(work: &Path) -> usize {
    std::fs::read_dir(work.join(".git/objects"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().len() == 2)
        .map(|e| std::fs::read_dir(e.path()).unwrap().count())
        .sum()
}

#[test]
fn commits_made_with_memory_objects_are_stored_as_one_pack_and_push_intact() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let loose_before = loose_objects(repo.root());
    let packs_before = std::fs::read_dir(repo.root().join(".git/objects/pack"))
        .unwrap()
        .count();
    let many: Vec<FileChange> = (0..100)
        .map(|i| FileChange::write(format!("apps/app{i}/route.yaml"), format!("weight: {i}\n")))
        .chain([FileChange::delete("README.md")])
        .collect();
    let (first, second) = repo
        .with_memory_objects(|repo| {
            let first = repo
                .commit_files(&many, &step_message(10), &Identity::default(), time(100))?
                .expect("a commit");
            // The second commit reads the first one's trees out of memory.
            let second = commit_step(repo, 20, time(200))?.expect("a commit");
            assert_eq!(
                repo.read_file_at_head("apps/app42/route.yaml")?.as_deref(),
                Some("weight: 42\n")
            );
            assert_eq!(repo.history(None, 10)?.len(), 3, "two commits on the seed");
            Ok::<_, sluice::gitops::Error>((first, second))
        })
        .unwrap();
    assert_eq!(
        loose_objects(repo.root()),
        loose_before,
        "blobs, trees and commits went into a pack, not loose files"
    );
    assert_eq!(
        std::fs::read_dir(repo.root().join(".git/objects/pack"))
            .unwrap()
            .count(),
        packs_before + 2,
        "one more pack and its index"
    );
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(second));
    git(repo.root(), &["fsck", "--strict"]);
    git(&fx.bare(), &["fsck", "--strict"]);
    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    assert_eq!(git(&witness, &["rev-parse", "HEAD~1"]), first.to_string());
    assert_eq!(
        git(&witness, &["show", "HEAD:apps/app99/route.yaml"]),
        "weight: 99"
    );
    assert!(!witness.join("README.md").exists());
    assert_eq!(checked_out(repo.root()), Vec::<String>::new());
}

#[test]
fn past_its_budget_a_tick_stores_what_it_has_as_a_pack_and_starts_a_new_one() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let loose_before = loose_objects(repo.root());
    let packs = |work: &Path| pack_files(work, "pack").len();
    let packs_before = packs(repo.root());
    let big = "x".repeat(9 << 20);
    let head = repo
        .with_memory_objects(|repo| {
            repo.commit_files(
                &[FileChange::write("big.txt", big.as_str())],
                &step_message(1),
                &Identity::default(),
                None,
            )?;
            assert_eq!(
                packs(repo.root()),
                packs_before + 1,
                "past the budget, the first commit is stored as a pack at once"
            );
            let second = commit_step(repo, 2, None)?;
            Ok::<_, sluice::gitops::Error>(second.expect("a commit"))
        })
        .unwrap();
    assert_eq!(
        loose_objects(repo.root()),
        loose_before,
        "the second commit went to memory again, not loose"
    );
    assert_eq!(
        packs(repo.root()),
        packs_before + 2,
        "then into a pack of its own"
    );
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(head));
    git(repo.root(), &["fsck", "--strict"]);
    git(&fx.bare(), &["fsck", "--strict"]);
}

#[test]
fn a_failure_inside_memory_objects_still_stores_what_was_committed() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let result: Result<(), sluice::gitops::Error> = repo.with_memory_objects(|repo| {
        commit_step(repo, 30, None)?;
        repo.commit_files(
            &[FileChange::write("../outside", "x")],
            &step_message(31),
            &Identity::default(),
            None,
        )?;
        Ok(())
    });
    assert!(result.is_err());
    let head = repo.head();
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(head));
    git(&fx.bare(), &["fsck", "--strict"]);
    assert_eq!(
        git(&fx.bare(), &["show", &format!("main:{ROUTE}")]),
        "weight: 30"
    );
}

#[test]
fn local_history_reads_a_checkout_or_a_bare_repo_in_place() {
    let fx = Fixture::new();
    let clone = fx.cli_clone(&fx.bare_url(), "human");
    std::fs::write(clone.join(ROUTE), "weight: 5\n").unwrap();
    git(
        &clone,
        &[
            "commit",
            "-q",
            "-am",
            "podinfo: step\n\nSluice-Canary: prod/podinfo\nSluice-Step: 1/3",
        ],
    );
    let filter = Some(("Sluice-Canary", "prod/podinfo"));
    let in_checkout = sluice::gitops::local_history(&clone, "main", filter, 10).unwrap();
    assert_eq!(in_checkout.len(), 1);
    assert_eq!(in_checkout[0].subject, "podinfo: step");
    assert!(
        sluice::gitops::local_history(&fx.bare(), "main", filter, 10)
            .unwrap()
            .is_empty(),
        "the commit is not pushed"
    );
    assert_eq!(
        sluice::gitops::local_history(&fx.bare(), "main", None, 10)
            .unwrap()
            .len(),
        1
    );
    let err = sluice::gitops::local_history(&clone, "nope", None, 10)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("{}: git find the branch failed", clone.display())),
        "{err}"
    );
}

/// The `.pack` files of the clone in `work`, biggest first.
fn packs_by_size(work: &Path) -> Vec<PathBuf> {
    let mut packs: Vec<(u64, PathBuf)> = pack_files(work, "pack")
        .into_iter()
        .map(|p| (std::fs::metadata(&p).unwrap().len(), p))
        .collect();
    packs.sort();
    packs.reverse();
    packs.into_iter().map(|(_, p)| p).collect()
}

#[test]
fn merging_packs_never_rewrites_the_biggest_pack_and_drops_commits_that_lost_a_push() {
    let fx = Fixture::new();
    // A history far bigger than what the ticks below add: the clone's first pack.
    let human = fx.cli_clone(&fx.bare_url(), "human");
    std::fs::create_dir_all(human.join("history")).unwrap();
    for i in 0..1000 {
        std::fs::write(human.join(format!("history/{i}.txt")), format!("{i}\n")).unwrap();
    }
    git(&human, &["add", "-A"]);
    git(&human, &["commit", "-q", "-m", "history"]);
    git(&human, &["push", "-q", "origin", "main"]);
    let mut repo = fx.open(&fx.bare_url(), "work");
    let work = fx.path("work");
    let biggest = packs_by_size(&work)[0].clone();
    // A sluice commit that loses to a human push.
    human_pushes(&human, "README.md", "edit\n", "Human edit");
    let lost = repo
        .with_memory_objects(|repo| commit_step(repo, 10, time(10)))
        .unwrap()
        .unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Rejected);
    repo.fetch().unwrap();
    git(&work, &["cat-file", "-e", &lost.to_string()]);
    for weight in 20..75 {
        repo.with_memory_objects(|repo| commit_step(repo, weight, None))
            .unwrap();
        assert!(matches!(repo.push().unwrap(), PushOutcome::Pushed(_)));
    }
    assert!(packs_by_size(&work).len() > 50);
    repo.fetch().unwrap();
    let packs = packs_by_size(&work);
    // The history's pack, untouched, and one pack of everything the ticks wrote.
    assert_eq!(packs.len(), 2, "{packs:?}");
    assert_eq!(packs[0], biggest);
    let out = git_cmd(&work)
        .args(["cat-file", "-e", &lost.to_string()])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the lost commit {lost} is still stored"
    );
    git(&work, &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(repo.history(None, 100).unwrap().len(), 58);
    git(&fx.bare(), &["fsck", "--strict"]);
}

#[test]
fn a_clone_with_too_many_packs_is_merged_into_at_most_two_on_fetch() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let work = repo.root().to_path_buf();
    let packs = |work: &Path| pack_files(work, "pack").len();
    for weight in 0..55 {
        repo.with_memory_objects(|repo| commit_step(repo, weight, None))
            .unwrap();
        assert!(matches!(repo.push().unwrap(), PushOutcome::Pushed(_)));
        if weight == 5 {
            // A loose object too: it must survive in the new pack.
            repo.commit_files(
                &[FileChange::write("loose.txt", "loose\n")],
                &step_message(100),
                &Identity::default(),
                None,
            )
            .unwrap();
            repo.push().unwrap();
        }
    }
    assert!(packs(&work) > 50, "{}", packs(&work));
    // A commit only a side branch reaches (like an approval branch) must survive too. The git
    // CLI must not run its own (background) auto gc on these 50+ packs meanwhile.
    git(repo.root(), &["config", "gc.auto", "0"]);
    git(repo.root(), &["config", "maintenance.auto", "false"]);
    // The clone has no work tree: the side commit is made with git's plumbing and an index
    // of its own.
    std::fs::write(fx.path("side.txt"), "side\n").unwrap();
    let blob = git(
        repo.root(),
        &["hash-object", "-w", fx.path("side.txt").to_str().unwrap()],
    );
    let index = fx.path("side.index");
    let with_index = |args: &[&str]| {
        let out = git_cmd(repo.root())
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    with_index(&["read-tree", "main"]);
    with_index(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("100644,{blob},side.txt"),
    ]);
    let tree = with_index(&["write-tree"]);
    let side = git(
        repo.root(),
        &["commit-tree", "-p", "main", "-m", "side", &tree],
    );
    git(
        repo.root(),
        &["update-ref", "refs/heads/sluice/side", &side],
    );
    repo.fetch().unwrap();
    // The biggest pack (the clone's first) is kept; every other is merged into one.
    assert!(packs(&work) <= 2, "{}", packs(&work));
    assert_eq!(loose_objects(repo.root()), 0);
    git(repo.root(), &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(
        git(repo.root(), &["show", &format!("{side}:side.txt")]),
        "side"
    );
    // The seed, 54 weight changes (weight 0 is the seed's) and the loose commit.
    assert_eq!(repo.history(None, 100).unwrap().len(), 56);
    assert_eq!(
        repo.read_file_at_head("loose.txt").unwrap().as_deref(),
        Some("loose\n")
    );
    // The clone keeps working after the repack.
    let next = commit_step(&mut repo, 99, None).unwrap().expect("a commit");
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(next));
    git(&fx.bare(), &["fsck", "--strict"]);
}

/// Loose object ids of a clone.
fn loose_object_ids(work: &Path) -> std::collections::BTreeSet<String> {
    let mut ids = std::collections::BTreeSet::new();
    for dir in std::fs::read_dir(work.join(".git/objects")).unwrap() {
        let dir = dir.unwrap();
        let prefix = dir.file_name().to_string_lossy().to_string();
        if prefix.len() != 2 {
            continue;
        }
        for file in std::fs::read_dir(dir.path()).unwrap() {
            ids.insert(format!(
                "{prefix}{}",
                file.unwrap().file_name().to_string_lossy()
            ));
        }
    }
    ids
}

/// The objects a commit must write when it changes `path`: the commit, the file's blob and
/// every folder from the root down to the file's.
fn objects_on_path(work: &Path, commit: &str, path: &str) -> std::collections::BTreeSet<String> {
    let mut ids = std::collections::BTreeSet::from([
        git(work, &["rev-parse", commit]),
        git(work, &["rev-parse", &format!("{commit}^{{tree}}")]),
        git(work, &["rev-parse", &format!("{commit}:{path}")]),
    ]);
    let mut folder = path;
    while let Some((parent, _)) = folder.rsplit_once('/') {
        ids.insert(git(work, &["rev-parse", &format!("{commit}:{parent}")]));
        folder = parent;
    }
    ids
}

/// 1,000 files in one folder, committed in one commit.
fn big_folder(repo: &mut ConfigRepo) {
    let files: Vec<FileChange> = (0..1000)
        .map(|i| {
            FileChange::write(
                format!("clusters/ns0/app{i}.yaml"),
                format!("weight: {i}\n"),
            )
        })
        .collect();
    repo.commit_files(&files, &step_message(0), &Identity::default(), time(1))
        .unwrap()
        .expect("a commit");
}

#[test]
fn a_commit_to_one_file_of_a_big_folder_writes_exactly_the_trees_on_its_path() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    big_folder(&mut repo);
    for i in [500, 0, 999] {
        let before = loose_object_ids(repo.root());
        let path = format!("clusters/ns0/app{i}.yaml");
        let head = repo
            .commit_files(
                &[FileChange::write(&path, format!("changed: {i}\n"))],
                &step_message(i),
                &Identity::default(),
                time(i64::from(i) + 10),
            )
            .unwrap()
            .expect("a commit");
        let new: std::collections::BTreeSet<String> = loose_object_ids(repo.root())
            .difference(&before)
            .cloned()
            .collect();
        assert_eq!(
            new,
            objects_on_path(repo.root(), &head.to_string(), &path),
            "commit, blob, root, clusters, clusters/ns0: nothing else"
        );
    }
    git(repo.root(), &["fsck", "--strict"]);
}

#[test]
fn a_tick_of_commits_in_a_big_folder_packs_exactly_the_objects_they_wrote() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    big_folder(&mut repo);
    let packs = |work: &Path| -> std::collections::BTreeSet<PathBuf> {
        pack_files(work, "idx").into_iter().collect()
    };
    let before = packs(repo.root());
    let steps = [3, 700, 3, 41, 999, 0, 512, 88, 700, 250];
    let mut expected = std::collections::BTreeSet::new();
    let heads = repo
        .with_memory_objects(|repo| {
            let mut heads = Vec::new();
            for (n, i) in steps.iter().enumerate() {
                let path = format!("clusters/ns0/app{i}.yaml");
                let head = repo.commit_files(
                    &[FileChange::write(&path, format!("step: {n}\n"))],
                    &step_message(*i),
                    &Identity::default(),
                    time(100 + n as i64),
                )?;
                heads.push((head.expect("a commit").to_string(), path));
            }
            Ok::<_, sluice::gitops::Error>(heads)
        })
        .unwrap();
    for (head, path) in &heads {
        expected.extend(objects_on_path(repo.root(), head, path));
    }
    let new: Vec<PathBuf> = packs(repo.root()).difference(&before).cloned().collect();
    assert_eq!(new.len(), 1, "one pack for the tick");
    let index = std::fs::File::open(&new[0]).unwrap();
    let listed = git_cmd(repo.root())
        .args(["show-index"])
        .stdin(index)
        .output()
        .unwrap();
    let packed: std::collections::BTreeSet<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect();
    assert_eq!(
        packed, expected,
        "each commit's blob and the trees on its path, nothing else"
    );
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(oid(&heads[9].0)));
    git(repo.root(), &["fsck", "--strict"]);
    git(&fx.bare(), &["fsck", "--strict"]);
}

/// `changed_paths` compares trees by hand (the drift check runs it over hundreds of commits a
/// tick); it must name exactly the files `git diff-tree -r` names, for every kind of change.
#[test]
fn changed_paths_names_what_git_diff_tree_names() {
    let fx = Fixture::new();
    let human = fx.cli_clone(&fx.bare_url(), "human");
    let write = |path: &str, text: &str| {
        let file = human.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    let remove = |path: &str| {
        let file = human.join(path);
        if file.is_dir() {
            std::fs::remove_dir_all(file).unwrap();
        } else {
            std::fs::remove_file(file).unwrap();
        }
    };
    type Step<'a> = Box<dyn Fn() + 'a>;
    let steps: Vec<(&str, Step)> = vec![
        (
            "a new deep folder",
            Box::new(|| write("a/b/c/d.yaml", "1\n")),
        ),
        (
            "a change deep down, beside an unchanged sibling",
            Box::new(|| {
                write("a/b/e.yaml", "1\n");
                write("a/b/c/d.yaml", "2\n");
            }),
        ),
        (
            "files whose names sort around a folder's",
            Box::new(|| {
                write("a/b.yaml", "x\n");
                write("a/b-c", "x\n");
                write("a/b0", "x\n");
                write("a/b/c/d.yaml", "3\n");
            }),
        ),
        (
            "a file turned into a folder",
            Box::new(|| {
                remove("a/b0");
                write("a/b0/inner.yaml", "x\n");
            }),
        ),
        (
            "a folder turned into a file",
            Box::new(|| {
                remove("a/b");
                write("a/b", "now a file\n");
            }),
        ),
        ("a whole folder removed", Box::new(|| remove("a"))),
        (
            "the same content at a new path",
            Box::new(|| {
                write("x/one.yaml", "same\n");
                write("y/one.yaml", "same\n");
            }),
        ),
    ];
    let mut repo = fx.open(&fx.bare_url(), "work");
    for (what, step) in &steps {
        step();
        git(&human, &["add", "-A"]);
        git(&human, &["commit", "-q", "-m", what]);
        git(&human, &["push", "-q", "origin", "main"]);
        let head = repo.fetch().unwrap();
        let parent = git(&human, &["rev-parse", "HEAD~1"]);
        let mut ours = repo.changed_paths(head, Some(oid(&parent))).unwrap();
        ours.sort();
        let theirs: Vec<String> = git(
            &human,
            &[
                "diff-tree",
                "-r",
                "--no-renames",
                "--name-only",
                &parent,
                "HEAD",
            ],
        )
        .lines()
        .map(str::to_string)
        .collect();
        assert_eq!(ours, theirs, "{what}");
    }
    // A mode change alone is a change, as git says.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let file = human.join("x/one.yaml");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        git(&human, &["commit", "-q", "-am", "exec bit"]);
        git(&human, &["push", "-q", "origin", "main"]);
        let head = repo.fetch().unwrap();
        let parent = oid(&git(&human, &["rev-parse", "HEAD~1"]));
        assert_eq!(
            repo.changed_paths(head, Some(parent)).unwrap(),
            vec!["x/one.yaml".to_string()]
        );
    }
    // The root commit: every file.
    let root = oid(&git(&human, &["rev-list", "--max-parents=0", "HEAD"]));
    let mut all = repo.changed_paths(root, None).unwrap();
    all.sort();
    assert_eq!(all, vec!["README.md".to_string(), ROUTE.to_string()]);
}

/// What the work dir holds besides `.git`, sorted: nothing once the clone has no work tree.
fn checked_out(work: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(work)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".git")
        .collect();
    names.sort();
    names
}

/// The clone never checks out: after a clone, commits, a push, a human's push and a fetch,
/// the work dir holds only `.git`, marked bare, with no index; git reads it as sluice wrote it.
#[test]
fn the_clone_has_no_work_tree_no_index_and_no_checked_out_files() {
    let fx = Fixture::new();
    let work = fx.path("work");
    let mut repo = fx.open(&fx.bare_url(), "work");
    assert_eq!(checked_out(&work), Vec::<String>::new(), "after the clone");
    commit_step(&mut repo, 10, time(10)).unwrap().unwrap();
    let mut changes = route_change(20);
    changes.push(FileChange::write("apps/podinfo/new.yaml", "a: 1\n"));
    changes.push(FileChange::delete("README.md"));
    repo.commit_files(&changes, &step_message(20), &Identity::default(), time(20))
        .unwrap()
        .unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(repo.head()));
    let human = fx.cli_clone(&fx.bare_url(), "human");
    human_pushes(&human, ROUTE, "weight: 30\n", "Human sets the weight");
    assert_eq!(repo.fetch().unwrap(), fx.remote_head());
    assert_eq!(
        repo.read_file_at_head(ROUTE).unwrap().as_deref(),
        Some("weight: 30\n")
    );
    assert_eq!(
        checked_out(&work),
        Vec::<String>::new(),
        "after commits, a push and a fetch"
    );
    assert!(!work.join(".git/index").exists(), "no index");
    assert_eq!(git(&work, &["config", "core.bare"]), "true");
    assert_eq!(
        git(&work, &["rev-parse", "refs/heads/main"]),
        fx.remote_head().to_string()
    );
    assert_eq!(git(&work, &["show", "HEAD:apps/podinfo/new.yaml"]), "a: 1");
    git(&work, &["fsck", "--strict"]);
    fx.assert_never_rewound();
}

/// A committed symbolic link cannot redirect a write: a path through it, or onto it, is
/// refused from the tree alone (nothing is on disk to follow), and nothing is committed.
#[test]
fn a_link_in_the_tree_refuses_a_write_through_it_or_onto_it() {
    let fx = Fixture::new();
    let human = fx.cli_clone(&fx.bare_url(), "human");
    std::os::unix::fs::symlink("/tmp", human.join("apps/out")).unwrap();
    std::os::unix::fs::symlink("../README.md", human.join("apps/readme.yaml")).unwrap();
    git(&human, &["add", "."]);
    git(&human, &["commit", "-q", "-m", "links"]);
    git(&human, &["push", "-q", "origin", "main"]);
    let mut repo = fx.open(&fx.bare_url(), "work");
    let head = repo.head();
    for (path, link) in [
        ("apps/out/x.yaml", "apps/out"),
        ("apps/readme.yaml", "apps/readme.yaml"),
    ] {
        let err = repo
            .commit_files(
                &[FileChange::write(path, "x: 1\n")],
                &step_message(1),
                &Identity::default(),
                time(1),
            )
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("symlink") && text.contains(link),
            "{path}: {text}"
        );
        assert_eq!(repo.head(), head, "{path}: nothing committed");
    }
}

/// A clone an older sluice made (a checkout and an index) with a local commit it never
/// pushed: opening it pushes the commit (fast-forward), then leaves only a bare `.git`.
#[test]
fn an_old_clone_with_a_work_tree_is_migrated_and_its_unpushed_commit_pushed() {
    let fx = Fixture::new();
    let work = fx.path("work");
    let old = old_sluice_clone(&fx.bare_url(), &work);
    let unpushed = old_sluice_commit(&old, ROUTE, "weight: 40\n");
    drop(old);
    std::fs::write(work.join("stray.txt"), "a failed attempt's leftover\n").unwrap();
    assert!(work.join(".git/index").exists());

    let mut repo = fx.open(&fx.bare_url(), "work");
    assert_eq!(fx.remote_head(), unpushed, "the unpushed commit is pushed");
    assert_eq!(repo.head(), unpushed);
    assert!(
        !git_ok(
            &work,
            &["rev-parse", "--verify", "-q", "refs/sluice/unpushed/main"]
        ),
        "once pushed, the commit is not kept aside"
    );
    assert_eq!(
        checked_out(&work),
        Vec::<String>::new(),
        "checked-out files deleted"
    );
    assert!(!work.join(".git/index").exists(), "no index");
    assert_eq!(git(&work, &["config", "core.bare"]), "true");
    // The migrated clone works as a new one.
    let next = commit_step(&mut repo, 50, time(50)).unwrap().unwrap();
    assert_eq!(repo.push().unwrap(), PushOutcome::Pushed(next));
    assert_eq!(
        git(&fx.bare(), &["show", &format!("main:{ROUTE}")]),
        "weight: 50"
    );
    assert_eq!(checked_out(&work), Vec::<String>::new());
    fx.assert_never_rewound();
}

/// The same when the remote moved since: the old commit cannot be pushed without rewinding
/// anyone, so it is kept under `refs/sluice/unpushed/main`, and the clone follows the remote.
#[test]
fn an_old_clones_commit_the_remote_moved_past_is_kept_under_a_ref() {
    let fx = Fixture::new();
    let work = fx.path("work");
    let old = old_sluice_clone(&fx.bare_url(), &work);
    let unpushed = old_sluice_commit(&old, ROUTE, "weight: 40\n");
    drop(old);
    let human = fx.cli_clone(&fx.bare_url(), "human");
    human_pushes(&human, "README.md", "moved\n", "Human moves main");
    let moved = fx.remote_head();

    let repo = fx.open(&fx.bare_url(), "work");
    assert_eq!(repo.head(), moved);
    assert_eq!(
        fx.remote_head(),
        moved,
        "nothing pushed over the human's commit"
    );
    assert_eq!(
        oid(&git(&work, &["rev-parse", "refs/sluice/unpushed/main"])),
        unpushed,
        "the old commit is kept"
    );
    assert_eq!(checked_out(&work), Vec::<String>::new());
    fx.assert_never_rewound();
}
