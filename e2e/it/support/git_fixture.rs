//! The git adapter's test fixture: a bare remote seeded with one commit, the git CLI (isolated
//! from the machine's config, fixed identities and dates) as the independent witness, and the
//! few moves the git tests (`gitops*.rs`) all make: sluice commits a weight step, a human edits a
//! file and pushes, an SSH signing key that git can verify.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::GitDaemon;
use sluice::gitops::{
    CommitMessage, ConfigRepo, Credentials, Error, FileChange, Identity, Oid, Time,
};

/// The file each of sluice's test steps writes.
pub(crate) const ROUTE: &str = "apps/podinfo/route.yaml";
const SEED_DATE: &str = "1700000000 +0000";

/// Runs the git CLI isolated from the machine's and user's config, with fixed identities and
/// dates so commit hashes are stable.
pub(crate) fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Human")
        .env("GIT_AUTHOR_EMAIL", "human@example.com")
        .env("GIT_COMMITTER_NAME", "Human")
        .env("GIT_COMMITTER_EMAIL", "human@example.com")
        .env("GIT_AUTHOR_DATE", SEED_DATE)
        .env("GIT_COMMITTER_DATE", SEED_DATE)
        .env("GIT_TERMINAL_PROMPT", "0");
    cmd
}

/// [`git_cmd`] with `args`, asserted to succeed; its stdout without the trailing newline.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

/// Whether [`git_cmd`] with `args` succeeds.
pub(crate) fn git_ok(dir: &Path, args: &[&str]) -> bool {
    git_cmd(dir).args(args).status().unwrap().success()
}

/// The fixed commit time `offset` seconds after the seed's.
pub(crate) fn time(offset: i64) -> Option<Time> {
    Some(Time::new(1_700_000_000 + offset, 0))
}

pub(crate) fn oid(s: &str) -> Oid {
    Oid::from_str(s).unwrap()
}

/// A temp dir with `remote.git` (bare, seeded with one commit on `main`) and room for clones.
pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("remote.git");
        git(
            dir.path(),
            &["init", "-q", "--bare", "-b", "main", "remote.git"],
        );
        // A reflog on the remote lets tests check that no update ever rewound the branch.
        git(&bare, &["config", "core.logAllRefUpdates", "always"]);
        let seed = dir.path().join("seed");
        git(dir.path(), &["init", "-q", "-b", "main", "seed"]);
        std::fs::create_dir_all(seed.join("apps/podinfo")).unwrap();
        std::fs::write(seed.join(ROUTE), "weight: 0\n").unwrap();
        std::fs::write(seed.join("README.md"), "config repo\n").unwrap();
        git(&seed, &["add", "."]);
        git(&seed, &["commit", "-q", "-m", "seed"]);
        git(&seed, &["push", "-q", bare.to_str().unwrap(), "main"]);
        Fixture { dir }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn bare(&self) -> PathBuf {
        self.path("remote.git")
    }

    pub(crate) fn bare_url(&self) -> String {
        self.bare().to_str().unwrap().to_string()
    }

    /// A `git daemon` serving the fixture's remote, and the remote's `git://` URL.
    pub(crate) fn served(&self) -> (GitDaemon, String) {
        let daemon = GitDaemon::start(self.dir.path());
        let url = daemon.url("remote.git");
        (daemon, url)
    }

    /// Where the remote's main is now.
    pub(crate) fn remote_head(&self) -> Oid {
        oid(&git(&self.bare(), &["rev-parse", "refs/heads/main"]))
    }

    /// A fresh CLI clone, the independent witness of what the remote holds.
    pub(crate) fn cli_clone(&self, url: &str, name: &str) -> PathBuf {
        git(self.dir.path(), &["clone", "-q", "-b", "main", url, name]);
        self.path(name)
    }

    /// Every value the remote branch ever had, oldest first, from the remote's reflog.
    pub(crate) fn remote_branch_history(&self) -> Vec<String> {
        let log = git(
            &self.bare(),
            &["reflog", "show", "--format=%H", "refs/heads/main"],
        );
        log.lines().rev().map(str::to_string).collect()
    }

    /// The updates of the remote's main that were not fast-forwards, as (from, to).
    pub(crate) fn rewinds(&self) -> Vec<(String, String)> {
        self.remote_branch_history()
            .windows(2)
            .filter(|w| !git_ok(&self.bare(), &["merge-base", "--is-ancestor", &w[0], &w[1]]))
            .map(|w| (w[0].clone(), w[1].clone()))
            .collect()
    }

    /// Asserts the remote branch only ever moved forward (no force push).
    pub(crate) fn assert_never_rewound(&self) {
        assert!(!self.remote_branch_history().is_empty());
        assert_eq!(self.rewinds(), vec![], "remote branch rewound");
    }

    pub(crate) fn open(&self, url: &str, work: &str) -> ConfigRepo {
        ConfigRepo::open_or_clone(url, "main", &self.path(work), &Credentials::none())
            .unwrap_or_else(|e| panic!("open_or_clone {url}: {e}"))
    }

    /// A fresh ed25519 key made by `ssh-keygen` and an allowed-signers file that trusts it
    /// for `sluice@localhost`: (key, allowed signers).
    pub(crate) fn signing_key(&self) -> (PathBuf, PathBuf) {
        let key = self.keygen("signing_key", &["-t", "ed25519", "-N", ""]);
        let allowed = self.allowed_signers(&key, "allowed_signers");
        (key, allowed)
    }

    /// A key made by `ssh-keygen` with `args` (its type, passphrase, format), at `name`.
    pub(crate) fn keygen(&self, name: &str, args: &[&str]) -> PathBuf {
        let key = self.path(name);
        let status = Command::new("ssh-keygen")
            .args(["-q", "-C", "sluice", "-f"])
            .arg(&key)
            .args(args)
            .status()
            .expect("ssh-keygen (openssh-client) must be installed");
        assert!(status.success(), "ssh-keygen {args:?}");
        key
    }

    /// An allowed-signers file `name` that trusts the public half of `key` for
    /// `sluice@localhost`.
    pub(crate) fn allowed_signers(&self, key: &Path, name: &str) -> PathBuf {
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        let allowed = self.path(name);
        std::fs::write(&allowed, format!("sluice@localhost {public}")).unwrap();
        allowed
    }
}

/// The change of one of sluice's test steps: the route at `weight`.
pub(crate) fn route_change(weight: u32) -> Vec<FileChange> {
    vec![FileChange::write(ROUTE, format!("weight: {weight}\n"))]
}

/// The message of one of sluice's test steps, with its trailers.
pub(crate) fn step_message(weight: u32) -> CommitMessage {
    CommitMessage::new(format!("Advance podinfo.prod canary weight {weight}"))
        .body("Analysis passed: request-success-rate 99.9% >= 99%.")
        .trailer("Sluice-Canary", "prod/podinfo")
        .trailer("Sluice-Weight", weight.to_string())
}

/// sluice commits the step to `weight` ([`route_change`], [`step_message`], the default
/// identity) at `at`; `Ok(None)` when it changes nothing.
pub(crate) fn commit_step(
    repo: &mut ConfigRepo,
    weight: u32,
    at: Option<Time>,
) -> Result<Option<Oid>, Error> {
    repo.commit_files(
        &route_change(weight),
        &step_message(weight),
        &Identity::default(),
        at,
    )
}

/// A human writes `text` to `file` (tracked already) in the CLI clone `clone`, commits it as
/// `message` and pushes it to the remote's main.
pub(crate) fn human_pushes(clone: &Path, file: &str, text: &str, message: &str) {
    std::fs::write(clone.join(file), text).unwrap();
    git(clone, &["commit", "-q", "-am", message]);
    git(clone, &["push", "-q", "origin", "main"]);
}

/// The files of the clone in `work`'s pack folder whose extension is `ext` (`pack`, `idx`).
pub(crate) fn pack_files(work: &Path, ext: &str) -> Vec<PathBuf> {
    std::fs::read_dir(work.join(".git/objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect()
}

/// Asserts that `git verify-commit` of `commit` in `clone`, trusting `allowed`, finds a good
/// signature by `sluice@localhost`; `what` names the case in a failure.
pub(crate) fn assert_good_signature(clone: &Path, allowed: &Path, commit: &str, what: &str) {
    git(clone, &["config", "gpg.format", "ssh"]);
    git(
        clone,
        &[
            "config",
            "gpg.ssh.allowedSignersFile",
            allowed.to_str().unwrap(),
        ],
    );
    let out = git_cmd(clone)
        .args(["verify-commit", "-v", commit])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: verify-commit: {stderr}");
    assert!(
        stderr.contains("Good \"git\" signature for sluice@localhost"),
        "{what}: {stderr}"
    );
}

/// A clone of `url`'s main in `work` laid out as sluice made it before its clone was bare
/// (the code before commit 69087ad, `ConfigRepo::open_or_clone` and `reset_to`): the same
/// libgit2 calls with the same reflog messages. A repository initialised with a work tree,
/// remote `origin`, the branch fetched (`sluice: fetch`), the local branch created at the
/// remote head (`sluice: reset to remote head`) and checked out by force, untracked files
/// removed, the index reset to it.
pub(crate) fn old_sluice_clone(url: &str, work: &Path) -> git2::Repository {
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main").no_reinit(true);
    let repo = git2::Repository::init_opts(work, &opts).unwrap();
    repo.remote("origin", url).unwrap();
    repo.find_remote("origin")
        .unwrap()
        .fetch(
            &["+refs/heads/main:refs/remotes/origin/main"],
            None,
            Some("sluice: fetch"),
        )
        .unwrap();
    let head = repo.refname_to_id("refs/remotes/origin/main").unwrap();
    repo.reference(
        "refs/heads/main",
        head,
        true,
        "sluice: reset to remote head",
    )
    .unwrap();
    repo.set_head("refs/heads/main").unwrap();
    {
        let target = repo.find_object(head, None).unwrap();
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout
            .force()
            .remove_untracked(true)
            .disable_filters(true);
        repo.checkout_tree(&target, Some(&mut checkout)).unwrap();
        repo.reset(&target, git2::ResetType::Mixed, None).unwrap();
    }
    repo
}

/// A commit the old sluice of [`old_sluice_clone`] made in `repo` and did not push: `text`
/// written to `path` in the work tree, the index and the local branch moved to the commit
/// (`commit (sluice)`, as its `sync_branch` did before a push). Returns the commit.
pub(crate) fn old_sluice_commit(repo: &git2::Repository, path: &str, text: &str) -> Oid {
    let work = repo.workdir().unwrap();
    std::fs::write(work.join(path), text).unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new(path)).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let parent = repo.head().unwrap().peel_to_commit().unwrap();
    let signature = git2::Signature::new(
        "sluice",
        "sluice@localhost",
        &git2::Time::new(1_700_000_100, 0),
    )
    .unwrap();
    let commit = repo
        .commit(
            None,
            &signature,
            &signature,
            "podinfo: advance canary weight 0 -> 40",
            &tree,
            &[&parent],
        )
        .unwrap();
    repo.reference("refs/heads/main", commit, true, "commit (sluice)")
        .unwrap();
    commit
}
