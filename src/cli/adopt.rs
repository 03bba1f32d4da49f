//! `sluice adopt --repo PATH [--branch sluice-adopt] [--push]`: reads the repo's checked-out
//! commit (HEAD), asks [`crate::adopt`] for the change from Flagger to sluice, and writes it as
//! one commit on a new branch: the work tree, the index and every existing branch are left as
//! they are (the commit is built from git objects, never checked out). Nothing is pushed
//! unless `--push` (then `git push origin <branch>`, with the user's own git and credentials);
//! with `--forge` the pushed branch's pull request is opened there with the runbook as its
//! body (the token from the operator's `SLUICE_FORGE_TOKEN`, as `sluice run` reads it).
//! Exit 0 with the runbook on stdout; 1 with every refusal as `file:line: message` on stderr
//! and nothing written; 2 when the repo cannot be read or written.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context as _};

use crate::forge::{Forge, ForgeSettings};
use crate::manifest::settings::{parse_settings, SETTINGS_PATH};
use crate::runtime::Runtime;

/// Largest file read from the commit; adopt reads manifests, not artifacts.
const MAX_FILE: usize = 4 * 1024 * 1024;

/// `sluice adopt --repo PATH` writes the change; `sluice adopt check` and `sluice adopt
/// release` are the runbook's check and its last step.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Command {
    #[command(subcommand)]
    pub step: Option<Step>,
    #[command(flatten)]
    pub write: Option<Args>,
}

#[derive(Debug, clap::Subcommand)]
pub enum Step {
    /// During the switch: whether it is safe to go on with the runbook's next step (reads the
    /// repo and the cluster); exit 0 safe, 1 not, naming what is wrong.
    Check(crate::cli::adopt_check::CheckArgs),
    /// End the switch: commit the removal of `adoption.hold` from `.sluice/config.yaml`.
    Release(crate::cli::adopt_check::ReleaseArgs),
}

pub fn run_command(command: &Command) -> anyhow::Result<i32> {
    match (&command.step, &command.write) {
        (Some(Step::Check(args)), _) => crate::cli::adopt_check::run_check(args),
        (Some(Step::Release(args)), _) => crate::cli::adopt_check::run_release(args),
        (None, Some(args)) => run(args),
        (None, None) => {
            eprintln!("sluice adopt: give --repo PATH (write the change), or a step: `sluice adopt check`, `sluice adopt release` (see --help)");
            Ok(2)
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config repo on this machine: a checkout, or a bare repository. Its HEAD commit is
    /// read; the change is written on a new branch of it.
    #[arg(long)]
    pub repo: PathBuf,
    /// The branch to write the change on (it must not exist).
    #[arg(long, default_value = "sluice-adopt")]
    pub branch: String,
    /// Push the new branch to the `origin` remote (`git push origin <branch>`).
    #[arg(long)]
    pub push: bool,
    /// Flagger's meshProvider, when its install is not in the repo (or to override it):
    /// written as `provider` in .sluice/config.yaml.
    #[arg(long, value_name = "PROVIDER")]
    pub provider: Option<String>,
    /// Flagger's metricsServer, when its install is not in the repo (or to override it):
    /// written as `prometheus.address` in .sluice/config.yaml.
    #[arg(long, value_name = "URL")]
    pub metrics_server: Option<String>,
    /// Open a pull request of the pushed branch on this forge (github, gitlab, gitea, forgejo,
    /// bitbucket, azuredevops; needs --push, --forge-repository and SLUICE_FORGE_TOKEN), and
    /// write the same `forge` into .sluice/config.yaml for sluice's approval PRs.
    #[arg(long, value_name = "KIND", requires = "forge_repository")]
    pub forge: Option<String>,
    /// The repository on the forge, as `forge.repository` names it (`owner/name`).
    #[arg(long, value_name = "REPOSITORY", requires = "forge")]
    pub forge_repository: Option<String>,
    /// The forge's API base, when not the kind's public one (GitHub Enterprise, self-hosted).
    #[arg(long, value_name = "URL", requires = "forge")]
    pub forge_api_url: Option<String>,
}

/// The `forge:` line of `args` and the settings it parses to, or why it cannot be used (the
/// settings parser's own messages, naming the flags).
fn forge_of(args: &Args) -> Result<Option<(String, ForgeSettings)>, String> {
    let (Some(kind), Some(repository)) = (&args.forge, &args.forge_repository) else {
        return Ok(None);
    };
    if !args.push {
        return Err("--forge opens a pull request of the pushed branch: add --push".into());
    }
    let scalar = crate::adopt::text::scalar;
    let api = args
        .forge_api_url
        .as_deref()
        .map(|u| format!(", apiUrl: {}", scalar(u)))
        .unwrap_or_default();
    let line = format!(
        "forge: {{kind: {}{api}, repository: {}}}\n",
        scalar(kind),
        scalar(repository)
    );
    let text = format!("apiVersion: sluice.dev/v1alpha1\nkind: Config\n{line}");
    match parse_settings(SETTINGS_PATH, &text) {
        Ok(s) => match s.forge {
            Some(forge) => Ok(Some((line, forge))),
            None => Err("--forge: no forge read".into()),
        },
        Err(errors) => Err(errors
            .iter()
            .map(|e| {
                format!(
                    "--forge {kind} --forge-repository {repository}: {}",
                    e.message
                )
            })
            .collect::<Vec<_>>()
            .join("\n")),
    }
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let repo = git2::Repository::open(&args.repo)
        .with_context(|| format!("{}: cannot open the git repository", args.repo.display()))?;
    let branch_ref = format!("refs/heads/{}", args.branch);
    if !git2::Reference::is_valid_name(&branch_ref) {
        bail!("--branch {}: not a valid branch name", args.branch);
    }
    if repo.find_reference(&branch_ref).is_ok() {
        eprintln!(
            "{}: branch {} exists: adopt writes a new branch and never moves one; delete it or pass --branch NAME",
            args.repo.display(),
            args.branch
        );
        return Ok(1);
    }
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .with_context(|| format!("{}: no commit at HEAD", args.repo.display()))?;
    let files = read_tree(&repo, &head.tree()?)?;
    let url = repo
        .find_remote("origin")
        .ok()
        .and_then(|r| r.url().map(crate::gitops::redact_url).ok())
        .unwrap_or_else(|| "<repo URL>".to_string());
    if let Some(p) = &args.provider {
        if let Err(e) = crate::route::parse_provider(p) {
            eprintln!("--provider {p}: {e}");
            return Ok(2);
        }
    }
    let forge = match forge_of(args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return Ok(2);
        }
    };
    let gave = crate::adopt::runbook::Given {
        provider: args.provider.clone(),
        metrics_server: args.metrics_server.clone(),
        forge: forge.as_ref().map(|(line, _)| line.clone()),
    };
    let adoption = match crate::adopt::adopt(&files, &args.branch, &url, &gave) {
        Ok(a) => a,
        Err(refusals) => {
            for r in &refusals {
                eprintln!("{r}");
            }
            let n = refusals.len();
            eprintln!(
                "{n} {} found; nothing written",
                if n == 1 { "problem" } else { "problems" }
            );
            return Ok(1);
        }
    };
    let problems = validate_after(
        &crate::adopt::after(&files, &adoption.change),
        &adoption.change,
    )?;
    if !problems.is_empty() {
        eprintln!("after the change `sluice validate` would refuse the repo:");
        for p in &problems {
            eprintln!("{p}");
        }
        let n = problems.len();
        eprintln!(
            "{n} {} found; nothing written: fix {} in the repo, then run adopt again",
            if n == 1 { "problem" } else { "problems" },
            if n == 1 { "it" } else { "them" }
        );
        return Ok(1);
    }
    let oid = commit(&repo, &head, &adoption.change, &branch_ref)?;
    let on = repo
        .head()
        .ok()
        .and_then(|h| h.shorthand().map(str::to_string).ok())
        .unwrap_or_else(|| "HEAD".into());
    outln!(
        "sluice adopt: wrote branch {} (commit {}) from {on} at {}; {on} is untouched",
        args.branch,
        &oid.to_string()[..12],
        &head.id().to_string()[..12]
    );
    print_change(&adoption);
    if args.push {
        push(&args.repo, &args.branch)?;
        outln!("pushed {} to origin", args.branch);
    }
    if let Some((_, settings)) = &forge {
        let pr = open_pull_request(settings, &args.branch, &on, &adoption.runbook)?;
        outln!("opened {pr}");
    }
    outln!();
    out!("{}", adoption.runbook);
    Ok(0)
}

/// Opens (or finds, when one is open already) the pull request of `branch` into `base` on the
/// forge of `settings`, its body the runbook; the pull request's number and page.
fn open_pull_request(
    settings: &ForgeSettings,
    branch: &str,
    base: &str,
    runbook: &str,
) -> anyhow::Result<String> {
    let runtime = Runtime::from_env()?;
    let fail = |e: String| {
        anyhow::anyhow!("{e}; the branch {branch} is pushed: open its pull request by hand")
    };
    let client = runtime.forge_client_for(settings).map_err(fail)?;
    let forge = Forge::from_settings(settings, &client).map_err(|e| fail(e.to_string()))?;
    let body = format!("Written by `sluice adopt`. Merge it in the order of the runbook below: first `{branch}~1` alone, then the branch.\n\n```\n{runbook}```\n");
    let title = "Adopt the Flagger canaries: sources out of every applied path, outputs applied by sluice-outputs";
    let pr = runtime
        .block_on(forge.ensure_open(branch, base, title, &body))
        .map_err(|e| fail(e.to_string()))?;
    Ok(format!(
        "{} {} {}",
        settings.kind.pr_noun(),
        pr.number,
        pr.url
    ))
}

/// What moved and what was written, then the notes.
fn print_change(adoption: &crate::adopt::Adoption) {
    let change = &adoption.change;
    for c in &adoption.found.canaries {
        outln!(
            "  canary {}/{}: applied by {} ({}:{}), output {}",
            c.namespace,
            c.name,
            c.applier.title(),
            c.applier.file,
            c.applier.line,
            change
                .outputs
                .get(&format!("{}/{}", c.namespace, c.name))
                .map_or("", String::as_str)
        );
    }
    for (from, to) in &change.moves {
        outln!("  moved {from} -> {to}");
    }
    let moved: Vec<&String> = change.moves.iter().map(|(_, to)| to).collect();
    for path in change.write.keys().filter(|p| !moved.contains(p)) {
        outln!("  wrote {path}");
    }
    for s in &adoption.found.skipped {
        outln!("  skipped {s}: no Kustomization or Application of the repo applies it");
    }
    for n in &change.notes {
        outln!("  note: {n}");
    }
}

/// What `sluice validate` says of the repo after the change (written to a temporary folder
/// and read as `validate` reads a checkout): `file:line: field: message` lines, a moved file
/// named with where it came from.
fn validate_after(
    files: &BTreeMap<String, String>,
    change: &crate::adopt::change::Change,
) -> anyhow::Result<Vec<String>> {
    let dir = tempfile::tempdir().context("cannot make a temporary folder")?;
    std::fs::create_dir(dir.path().join(".git"))?;
    for (path, text) in files {
        let at = dir.path().join(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&at, text)?;
    }
    let (_, loaded) = crate::cli::validate::load(&[dir.path().to_path_buf()], None);
    let prefix = format!("{}/", dir.path().display());
    Ok(loaded
        .errors
        .into_iter()
        .map(|mut e| {
            e.file = e.file.strip_prefix(&prefix).unwrap_or(&e.file).to_string();
            match change.moves.iter().find(|(_, to)| *to == e.file) {
                Some((from, _)) => format!("{e} (moved from {from})"),
                None => e.to_string(),
            }
        })
        .collect())
}

/// Every UTF-8 file of `tree` up to [`MAX_FILE`], by repo-relative path.
fn read_tree(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    let mut failed = None;
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() != Some(git2::ObjectType::Blob) || entry.filemode() == 0o120000 {
            return git2::TreeWalkResult::Ok;
        }
        let path = format!("{dir}{}", entry.name().unwrap_or(""));
        match repo.find_blob(entry.id()) {
            Ok(blob) if blob.size() <= MAX_FILE => {
                if let Ok(text) = std::str::from_utf8(blob.content()) {
                    files.insert(path, text.to_string());
                }
            }
            Ok(_) => {}
            Err(e) => {
                failed = Some(e);
                return git2::TreeWalkResult::Abort;
            }
        }
        git2::TreeWalkResult::Ok
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    Ok(files)
}

/// The two commits of the branch `branch_ref` on `head`: the sources marked to be kept in the
/// cluster (where they are), then the change itself (from `head`'s files).
fn commit(
    repo: &git2::Repository,
    head: &git2::Commit<'_>,
    change: &crate::adopt::change::Change,
    branch_ref: &str,
) -> anyhow::Result<git2::Oid> {
    let signature = repo
        .signature()
        .or_else(|_| git2::Signature::now("sluice", "sluice@localhost"))?;
    let mut message = String::from(
        "Mark the Flagger canaries' sources to stay in the cluster when their files move\n\nWritten by `sluice adopt`. Merge this commit and let it be applied before the next one:\nthen the engine leaves each object in place when the next commit moves its file.\n\n",
    );
    for path in change.prepare.keys() {
        message.push_str(&format!("{path}\n"));
    }
    let prepared = tree(repo, head, &change.prepare, &Default::default())?;
    let first = repo.commit(None, &signature, &signature, &message, &prepared, &[head])?;
    let first = repo.find_commit(first)?;
    let mut message = String::from(
        "Adopt the Flagger canaries: sources out of every applied path, outputs applied by sluice-outputs\n\nWritten by `sluice adopt`; .sluice/config.yaml holds the adoption hold until `sluice adopt release`.\n\n",
    );
    for (from, to) in &change.moves {
        message.push_str(&format!("{from} -> {to}\n"));
    }
    let adopted = tree(repo, head, &change.write, &change.remove)?;
    let oid = repo.commit(
        Some(branch_ref),
        &signature,
        &signature,
        &message,
        &adopted,
        &[&first],
    )?;
    Ok(oid)
}

/// `base`'s tree with `write` written and `remove` removed.
fn tree<'r>(
    repo: &'r git2::Repository,
    base: &git2::Commit<'_>,
    write: &BTreeMap<String, String>,
    remove: &std::collections::BTreeSet<String>,
) -> anyhow::Result<git2::Tree<'r>> {
    let mut index = git2::Index::new()?;
    index.read_tree(&base.tree()?)?;
    for path in remove {
        index.remove_path(std::path::Path::new(path))?;
    }
    for (path, text) in write {
        let id = repo.blob(text.as_bytes())?;
        index.add(&crate::gitops::index_entry(path, id, 0o100_644))?;
    }
    Ok(repo.find_tree(index.write_tree_to(repo)?)?)
}

/// `git push origin <branch>` in the repo, with the user's own git configuration.
fn push(repo: &std::path::Path, branch: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "push",
            "origin",
            &format!("refs/heads/{branch}:refs/heads/{branch}"),
        ])
        .status()
        .with_context(|| {
            format!("cannot run git push (install git); the branch {branch} is written: push it by hand")
        })?;
    if !status.success() {
        bail!("git push origin {branch} failed ({status}); the branch is written: push it by hand");
    }
    Ok(())
}
