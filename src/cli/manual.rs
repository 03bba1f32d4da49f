//! `sluice approve|promote|abort|retry|pause|resume NS/NAME`: manual operations, each one a
//! commit on the branch with the operator and reason in its trailers.

use crate::cli::repo::{open, Locked};
use crate::core::operate::Operation;
use crate::gitops::Identity;
use crate::manual::{operate, Manual, OperateError};
use crate::runtime::Runtime;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The canary, as NAMESPACE/NAME.
    pub canary: String,
    /// For a canary with waves: the wave to act on (default: the wave in progress).
    #[arg(long)]
    pub wave: Option<String>,
    #[command(flatten)]
    pub repo: OperationRepo,
    /// Why: recorded in the commit (Sluice-Reason trailer).
    #[arg(long)]
    pub reason: String,
    /// Who: "Name <email>" (default: git's user.name and user.email).
    #[arg(long = "as")]
    pub operator: Option<String>,
}

/// The repository a manual operation commits to: cloned into a work dir, pushed back.
#[derive(Debug, clap::Args)]
pub struct OperationRepo {
    /// Config repo URL, or the path of a bare repository on this machine (a working checkout
    /// cannot take a push to its checked-out branch: give its remote).
    #[arg(
        long,
        env = "SLUICE_REPO",
        conflicts_with = "dir",
        required_unless_present = "dir"
    )]
    pub repo: Option<String>,
    /// Deprecated spelling of `--repo PATH` (elsewhere `--dir` reads a repository in place);
    /// prints a warning.
    #[arg(long, hide = true)]
    pub dir: Option<std::path::PathBuf>,
    /// Branch to commit the operation on.
    #[arg(long, default_value = "main", env = "SLUICE_BRANCH")]
    pub branch: String,
    /// Where to clone the repo for the commit (default: a temporary folder).
    #[arg(long, env = "SLUICE_WORKDIR")]
    pub workdir: Option<std::path::PathBuf>,
}

/// The clone an operation commits in, with the temporary folder it may live in.
pub struct Opened {
    pub locked: Locked,
    _temp: tempfile::TempDir,
}

impl OperationRepo {
    /// Clones (or fetches) the repo for one operation's commit; refuses a working checkout,
    /// which cannot take a push to its checked-out branch.
    pub fn open(&self) -> anyhow::Result<Opened> {
        let url = match (&self.repo, &self.dir) {
            (Some(url), _) => url.clone(),
            (None, Some(dir)) => {
                eprintln!("{DIR_DEPRECATED}");
                dir.to_string_lossy().to_string()
            }
            (None, None) => anyhow::bail!("give --repo URL-or-PATH"),
        };
        refuse_checkout(&url)?;
        let temp = tempfile::tempdir()?;
        let workdir = self
            .workdir
            .clone()
            .unwrap_or_else(|| temp.path().join("clone"));
        let locked = open(&url, &self.branch, Some(&workdir))?;
        Ok(Opened {
            locked,
            _temp: temp,
        })
    }
}

/// The operator's identity: --as, else git config, else $USER@localhost.
pub fn operator(given: Option<&str>) -> anyhow::Result<Identity> {
    if let Some(text) = given {
        let (name, rest) = text
            .split_once('<')
            .ok_or_else(|| anyhow::anyhow!("--as: expected \"Name <email>\", found {text:?}"))?;
        let email = rest
            .strip_suffix('>')
            .ok_or_else(|| anyhow::anyhow!("--as: expected \"Name <email>\", found {text:?}"))?;
        return Ok(Identity::new(name.trim(), email.trim()));
    }
    if let Ok(config) = git2::Config::open_default() {
        if let (Ok(name), Ok(email)) = (
            config.get_string("user.name"),
            config.get_string("user.email"),
        ) {
            return Ok(Identity::new(name, email));
        }
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "operator".into());
    Ok(Identity::new(user.clone(), format!("{user}@localhost")))
}

/// What `--dir` of a manual operation prints: one meaning of `--dir` across the commands.
pub const DIR_DEPRECATED: &str = "warning: --dir is deprecated for manual operations: give the bare repository as --repo PATH (--dir of status, history, audit and dashboard reads a repository in place)";

/// A local path that is a working checkout cannot take a push to its checked-out branch.
fn refuse_checkout(url: &str) -> anyhow::Result<()> {
    let path = std::path::Path::new(url);
    if !path.is_dir() {
        return Ok(());
    }
    if let Ok(repo) = git2::Repository::open(path) {
        if !repo.is_bare() {
            anyhow::bail!(
                "{url}: a working checkout cannot take a push to its checked-out branch; pass its remote with --repo"
            );
        }
    }
    Ok(())
}

pub fn run(op: Operation, args: &Args) -> anyhow::Result<i32> {
    if args.reason.trim().is_empty() {
        anyhow::bail!("--reason must say why (it is recorded in the commit)");
    }
    let mut opened = args.repo.open()?;
    let manual = Manual {
        canary: &args.canary,
        wave: args.wave.as_deref(),
        op,
        operator: operator(args.operator.as_deref())?,
        reason: &args.reason,
        push_attempts: 8,
    };
    let runtime = Runtime::from_env()?;
    match operate(
        &mut opened.locked.repo,
        &runtime,
        &manual,
        runtime.clock().now(),
    ) {
        Ok(subject) => {
            outln!("{subject}");
            Ok(0)
        }
        Err(OperateError::NotApplicable(e)) => {
            eprintln!("{e}");
            Ok(1)
        }
        Err(OperateError::NotFound(e)) => {
            eprintln!("{e}");
            Ok(1)
        }
        Err(e) => Err(e.into()),
    }
}
