//! `sluice approve|promote|abort|retry|pause|resume NS/NAME`: manual operations, each one a
//! commit on the branch with the operator and reason in its trailers.

use crate::cli::repo::open;
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
    /// Config repo URL (a bare repository path works too).
    #[arg(
        long,
        env = "SLUICE_REPO",
        conflicts_with = "dir",
        required_unless_present = "dir"
    )]
    pub repo: Option<String>,
    /// A bare repository on this machine (a working checkout cannot take a push to its
    /// checked-out branch: use its remote with --repo).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    #[arg(long, default_value = "main", env = "SLUICE_BRANCH")]
    pub branch: String,
    #[arg(long, env = "SLUICE_WORKDIR")]
    pub workdir: Option<std::path::PathBuf>,
    /// Why: recorded in the commit (Sluice-Reason trailer).
    #[arg(long)]
    pub reason: String,
    /// Who: "Name <email>" (default: git's user.name and user.email).
    #[arg(long = "as")]
    pub operator: Option<String>,
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

pub fn run(op: Operation, args: &Args) -> anyhow::Result<i32> {
    if args.reason.trim().is_empty() {
        anyhow::bail!("--reason must say why (it is recorded in the commit)");
    }
    let url = match (&args.repo, &args.dir) {
        (Some(url), _) => url.clone(),
        (None, Some(dir)) => {
            let repo = git2::Repository::open(dir)?;
            if !repo.is_bare() {
                anyhow::bail!(
                    "{}: a working checkout cannot take a push to its checked-out branch; pass its remote with --repo",
                    dir.display()
                );
            }
            dir.canonicalize()?.to_string_lossy().to_string()
        }
        (None, None) => anyhow::bail!("give --repo URL or --dir PATH"),
    };
    let temp = tempfile::tempdir()?;
    let workdir = args
        .workdir
        .clone()
        .unwrap_or_else(|| temp.path().join("clone"));
    let mut locked = open(&url, &args.branch, Some(&workdir))?;
    let manual = Manual {
        canary: &args.canary,
        wave: args.wave.as_deref(),
        op,
        operator: operator(args.operator.as_deref())?,
        reason: &args.reason,
        push_attempts: 8,
    };
    let runtime = Runtime::from_env()?;
    match operate(&mut locked.repo, &runtime, &manual, runtime.clock().now()) {
        Ok(subject) => {
            outln!("{subject}");
            Ok(0)
        }
        Err(OperateError::NotApplicable(e)) => {
            eprintln!("{e}");
            Ok(1)
        }
        Err(e) => Err(e.into()),
    }
}
