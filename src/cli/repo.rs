//! Options every command that works on a config repo shares, and opening the persistent clone.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use crate::gitops::{redact_url, ConfigRepo, Credentials};

#[derive(Debug, Clone, clap::Args)]
pub struct RepoArgs {
    /// Config repo URL: a local path, file://, git://, http(s):// or ssh. Credentials come from
    /// SLUICE_GIT_TOKEN, SLUICE_GIT_USERNAME/SLUICE_GIT_PASSWORD or SLUICE_GIT_SSH_KEY.
    /// `sluice run` takes it several times: one install, several config repos (see --repos).
    #[arg(long, env = "SLUICE_REPO", required = true, action = clap::ArgAction::Append)]
    pub repo: Vec<String>,
    /// Branch Flux or Argo CD applies.
    #[arg(long, default_value = "main", env = "SLUICE_BRANCH")]
    pub branch: String,
    /// Persistent clone (default: a folder per repo under the user's cache dir).
    #[arg(long, env = "SLUICE_WORKDIR")]
    pub workdir: Option<PathBuf>,
    /// Sign every commit with this SSH private key (`git verify-commit` checks it against
    /// an allowed-signers file).
    #[arg(long, env = "SLUICE_SIGNING_SSH_KEY")]
    pub signing_ssh_key: Option<PathBuf>,
    /// Longest wait for the git server to accept a connection, and then for each read or
    /// write: a remote that stops answering fails the tick instead of blocking it.
    #[arg(long, default_value = "30s", env = "SLUICE_GIT_TIMEOUT", value_parser = parse_timeout)]
    pub git_timeout: std::time::Duration,
}

impl RepoArgs {
    /// The one config repo's URL; an error when `--repo` is given several times (only
    /// `sluice run` reconciles several repos).
    pub fn url(&self) -> anyhow::Result<&str> {
        match self.repo.as_slice() {
            [one] => Ok(one),
            [] => bail!("give --repo URL"),
            many => bail!(
                "--repo is given {} times; this command works on one config repo (only `sluice \
                 run` reconciles several)",
                many.len()
            ),
        }
    }

    /// The persistent clone's folder: `--workdir`, or the default for the URL.
    pub fn workdir_path(&self) -> anyhow::Result<PathBuf> {
        match &self.workdir {
            Some(w) => Ok(w.clone()),
            None => Ok(default_workdir(self.url()?)),
        }
    }

    /// Opens (cloning on first use) the clone and fetches the branch, with the signing key applied; a key
    /// sluice cannot sign with here is refused before anything else.
    pub fn open(&self) -> anyhow::Result<Locked> {
        self.open_on(None)
    }

    /// [`RepoArgs::open`], a GitHub App's git tokens expiring by `clock` (the runtime's; the
    /// wall clock when `None`).
    pub fn open_on(
        &self,
        clock: Option<std::sync::Arc<crate::clock::Clock>>,
    ) -> anyhow::Result<Locked> {
        self.open_scoped(clock, None)
    }

    /// [`RepoArgs::open_on`] with the git credentials read from `env` (one config repo's own
    /// variables, see [`crate::cli::repos`]) instead of the process environment when given.
    pub fn open_scoped(
        &self,
        clock: Option<std::sync::Arc<crate::clock::Clock>>,
        env: Option<&std::collections::BTreeMap<String, String>>,
    ) -> anyhow::Result<Locked> {
        crate::gitops::set_network_timeout(self.git_timeout);
        let signing = self
            .signing_ssh_key
            .as_ref()
            .map(|key| crate::gitops::Signing::Ssh {
                key_path: key.clone(),
            });
        if let Some(signing) = &signing {
            signing.check_usable()?;
        }
        let mut locked = open_on(
            self.url()?,
            &self.branch,
            self.workdir.as_deref(),
            clock,
            env,
        )?;
        locked.repo.set_signing(signing);
        Ok(locked)
    }
}

/// A duration above zero (libgit2 reads zero as "wait forever").
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    let timeout = crate::yaml::reader::parse_duration(text)?;
    if timeout.is_zero() {
        return Err("must be above zero: a remote that never answers would block forever".into());
    }
    Ok(timeout)
}

/// Where to read a repo from: a remote (cloned into the work dir) or a local checkout.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Config repo URL (cloned or fetched into the work dir).
    #[arg(long, conflicts_with = "dir", required_unless_present = "dir")]
    pub repo: Option<String>,
    /// A repository on this machine, read in place (a checkout as it is; a bare repository's
    /// branch): nothing is cloned, fetched or written.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Branch to read (with --dir: of a bare repository).
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// With --repo: the persistent clone (default: a folder per repo under the user's cache dir).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
}

/// Holds the work dir's lock for as long as it lives.
pub struct Locked {
    pub repo: ConfigRepo,
    _lock: File,
}

fn default_workdir(url: &str) -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let id = git2::Oid::hash_object(git2::ObjectType::Blob, redact_url(url).as_bytes())
        .map(|o| o.to_string())
        .unwrap_or_else(|_| "repo".into());
    base.join("sluice").join(&id[..id.len().min(16)])
}

/// Opens (cloning on first use) the persistent clone and fetches the branch, holding an
/// exclusive lock on the work dir so two processes never share one clone. The lock is a file
/// beside the work dir (`<work dir>.lock`), never truncated; one this call created goes again
/// when the work dir is refused (it is not a clone sluice made).
pub fn open(url: &str, branch: &str, workdir: Option<&Path>) -> anyhow::Result<Locked> {
    open_on(url, branch, workdir, None, None)
}

/// [`open`], a GitHub App's git tokens expiring by `clock` (the wall clock when `None`), the
/// credentials read from `env` when given (else from the process environment).
fn open_on(
    url: &str,
    branch: &str,
    workdir: Option<&Path>,
    clock: Option<std::sync::Arc<crate::clock::Clock>>,
    env: Option<&std::collections::BTreeMap<String, String>>,
) -> anyhow::Result<Locked> {
    let workdir = workdir.map_or_else(|| default_workdir(url), Path::to_path_buf);
    // `.` and `..` name the folder, so the lock beside it is a file of its own.
    let workdir = crate::gitops::resolve_workdir(&workdir)?;
    if let Some(parent) = workdir.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let lock_path = workdir.with_extension("lock");
    let created = !lock_path.exists();
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .with_context(|| format!("cannot create the lock file {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        bail!(
            "work dir {} is in use by another sluice process; give this one its own --workdir",
            workdir.display()
        );
    }
    // Ours alone now: a lock file in the clone is what a killed sluice left behind.
    let opened = ConfigRepo::remove_stale_locks(&workdir).and_then(|_| {
        let clock = clock.unwrap_or_else(|| std::sync::Arc::new(crate::clock::Clock::Wall));
        let creds = match env {
            Some(env) => Credentials::from_lookup_on(|name| env.get(name).cloned(), clock)?,
            None => Credentials::from_env_on(clock)?,
        };
        ConfigRepo::open_or_clone(url, branch, &workdir, &creds)
    });
    match opened {
        Ok(repo) => Ok(Locked { repo, _lock: lock }),
        Err(e) => {
            if created && matches!(e, crate::gitops::Error::Workdir { .. }) {
                drop(lock);
                let _ = std::fs::remove_file(&lock_path);
            }
            Err(e.into())
        }
    }
}

/// What keeps the folder [`read_root`] returned readable, for as long as it lives.
pub enum Held {
    /// A local checkout, read as it is.
    Nothing,
    /// The fetched clone and its lock, and its head's YAML files read into a temporary folder
    /// (the clone has no work tree).
    Clone(Box<Locked>, tempfile::TempDir),
    /// A bare repository's branch, read into a temporary folder.
    Tree(tempfile::TempDir),
}

/// The folder to read: the local checkout, the branch of a local bare repository (it has no
/// files of its own, as `history --dir` reads its commits), or the fetched clone's branch
/// (it has no checkout either), each written into a temporary folder.
pub fn read_root(args: &SourceArgs) -> anyhow::Result<(PathBuf, Held)> {
    if let Some(dir) = &args.dir {
        return match bare_branch(dir, &args.branch)? {
            Some(tree) => Ok((tree.path().to_path_buf(), Held::Tree(tree))),
            None => Ok((dir.clone(), Held::Nothing)),
        };
    }
    let Some(url) = &args.repo else {
        bail!("give --repo URL or --dir PATH");
    };
    // `open` fetches the branch.
    let locked = open(url, &args.branch, args.workdir.as_deref())?;
    let git_dir = locked.repo.root().join(".git");
    let Some(tree) = bare_branch(&git_dir, &args.branch)? else {
        bail!("{}: cannot open the clone", git_dir.display());
    };
    Ok((
        tree.path().to_path_buf(),
        Held::Clone(Box::new(locked), tree),
    ))
}

/// The canaries the branch holds now, as `NS/NAME` (a wave's instance and its release too):
/// the local repository's (`--dir`), or the fetched `clone`'s branch. What a command that
/// names a canary compares the name with before it says "no canary".
pub fn branch_canaries(
    source: &SourceArgs,
    clone: Option<&ConfigRepo>,
) -> anyhow::Result<Vec<String>> {
    use crate::readers::status::{known_canaries, rows};
    let now = crate::runtime::Runtime::from_env()?.clock().now();
    let rows = match clone {
        None => {
            let (root, _kept) = read_root(source)?;
            rows(&root, now)?
        }
        Some(repo) => match bare_branch(&repo.root().join(".git"), repo.branch())? {
            Some(tree) => rows(tree.path(), now)?,
            None => Vec::new(),
        },
    };
    Ok(known_canaries(&rows))
}

/// When `dir` is a bare repository: the YAML files of `branch`'s tree, written into a
/// temporary folder (see [`crate::readers::tree`]).
pub fn bare_branch(dir: &Path, branch: &str) -> anyhow::Result<Option<tempfile::TempDir>> {
    let Ok(repo) = git2::Repository::open_bare(dir) else {
        return Ok(None);
    };
    let tree = repo
        .revparse_single(&format!("refs/heads/{branch}"))
        .and_then(|o| o.peel_to_tree())
        .with_context(|| format!("{}: cannot read branch {branch}", dir.display()))?;
    crate::readers::tree::write_yaml(&repo, &tree, dir, branch).map(Some)
}
