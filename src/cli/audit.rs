//! `sluice audit [NS/NAME] --repo URL | --dir PATH [-o table|json|github]
//! [--allowed-signers FILE [--require-signed]] [--since REV]`: replays every decision of the
//! branch from git (see [`crate::audit`]), or those after REV; exit code 1 on any finding.

use std::path::PathBuf;

use crate::audit::{audit_since, open, since, Report};
use crate::cli::repo::{branch_canaries, SourceArgs};
use crate::cli::workflow_command::{escape_data, escape_property};
use crate::readers::status::no_canary;
use crate::signatures::policy::Outside;

#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum AuditOutput {
    Table,
    Json,
    /// GitHub Actions workflow commands (`::error file=...::...`), one per finding.
    Github,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this canary's commits, as NAMESPACE/NAME.
    pub canary: Option<String>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = AuditOutput::Table)]
    pub output: AuditOutput,
    /// An allowed-signers file (ssh-keygen format) kept outside the repo: commits are checked
    /// against its keys instead of the repo's `signing.allowedSigners` file.
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
    /// Every commit must be signed by a key of --allowed-signers, whatever the repo's
    /// `signing` settings say.
    #[arg(long, requires = "allowed_signers")]
    pub require_signed: bool,
    /// Check only the commits after REV (a commit id or a ref in the branch's history), e.g.
    /// the `resumeSince` of the last `-o json` audit: for CI on every push.
    #[arg(long, value_name = "REV")]
    pub since: Option<String>,
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    if let Some(c) = &args.canary {
        if !c.contains('/') {
            anyhow::bail!("expected NAMESPACE/NAME, found {c:?}");
        }
    }
    let only = args.canary.as_deref();
    let signing = Outside::read(args.allowed_signers.as_deref(), args.require_signed)
        .map_err(anyhow::Error::msg)?;
    // The clone `--repo` fetched, kept to read the branch's canaries from.
    let mut clone = None;
    let report = match (&args.source.dir, &args.source.repo) {
        (Some(dir), _) => {
            let repo = open(dir)?;
            // The ref's id only: looking the commit up would read its message whole.
            let head = repo
                .refname_to_id(&format!("refs/heads/{}", args.source.branch))
                .map_err(|e| {
                    anyhow::anyhow!(
                        "{}: cannot find the branch {}: {}",
                        dir.display(),
                        args.source.branch,
                        e.message()
                    )
                })?;
            let since = resolve(&repo, head, args.since.as_deref())?;
            audit_since(&repo, head, since, only, &signing)?
        }
        (None, Some(url)) => {
            // `open` fetches the branch.
            let locked =
                crate::cli::repo::open(url, &args.source.branch, args.source.workdir.as_deref())?;
            let head = locked.repo.head();
            let repo = open(locked.repo.root())?;
            let since = resolve(&repo, head, args.since.as_deref())?;
            let report = audit_since(&repo, head, since, only, &signing)?;
            clone = Some(locked);
            report
        }
        (None, None) => anyhow::bail!("give --repo URL or --dir PATH"),
    };
    // Nothing of it in the history and no such canary on the branch: a typo, not a clean audit.
    if let Some(canary) = only {
        let untouched =
            report.replayed == 0 && report.findings.is_empty() && report.not_replayable.is_empty();
        if untouched {
            let known = branch_canaries(&args.source, clone.as_ref().map(|l| &l.repo))?;
            if !known.iter().any(|k| k == canary) {
                eprintln!("{}", no_canary(canary, &known));
                return Ok(1);
            }
        }
    }
    print(&report, args.output)?;
    Ok(if report.findings.is_empty() { 0 } else { 1 })
}

/// The commit `--since` names, checked to be in the branch's history.
fn resolve(
    repo: &git2::Repository,
    head: git2::Oid,
    rev: Option<&str>,
) -> anyhow::Result<Option<git2::Oid>> {
    Ok(rev.map(|r| since::resolve(repo, head, r)).transpose()?)
}

fn print(report: &Report, output: AuditOutput) -> anyhow::Result<()> {
    match output {
        AuditOutput::Json => outln!("{}", serde_json::to_string_pretty(report)?),
        AuditOutput::Github => {
            for f in &report.findings {
                let file = if f.file.contains('/') {
                    format!(" file={},", escape_property(&f.file))
                } else {
                    " ".to_string()
                };
                outln!(
                    "::error{file}title=sluice audit::{} {}: {}{}",
                    short(&f.commit),
                    f.canary,
                    if f.file.contains('/') {
                        String::new()
                    } else {
                        format!("{}: ", f.file)
                    },
                    escape_data(&f.message)
                );
            }
            outln!("{}", summary(report));
        }
        AuditOutput::Table => {
            if !report.findings.is_empty() {
                let mut table = comfy_table::Table::new();
                table.load_style(comfy_table::presets::NOTHING);
                table.set_header(["COMMIT", "CANARY", "KIND", "FILE", "FINDING"]);
                for f in &report.findings {
                    table.add_row([
                        short(&f.commit).to_string(),
                        f.canary.clone(),
                        serde_json::to_value(f.kind)?
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        f.file.clone(),
                        f.message.clone(),
                    ]);
                }
                outln!("{table}");
            }
            outln!("{}", summary(report));
        }
    }
    Ok(())
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

fn summary(r: &Report) -> String {
    let format1 = if r.not_replayable.is_empty() {
        String::new()
    } else {
        format!(
            ", {} not replayable (written before replay records existed)",
            r.not_replayable.len()
        )
    };
    format!(
        "{}, {} replayed{format1}, {}",
        counted(r.commits, "commit"),
        counted(r.replayed, "decision"),
        counted(r.findings.len(), "finding")
    )
}

/// `n` and `noun`, plural unless `n` is one: "1 finding", "2 findings".
fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_one_finding_not_one_findings() {
        let mut report = Report {
            commits: 1,
            replayed: 1,
            ..Report::default()
        };
        assert_eq!(
            summary(&report),
            "1 commit, 1 decision replayed, 0 findings"
        );
        report.commits = 13;
        report.replayed = 10;
        report.findings = vec![crate::audit::Finding {
            commit: "c0ffee".into(),
            kind: crate::audit::Kind::Foreign,
            file: "clusters/demo/podinfo/route.yaml".into(),
            canary: "demo/podinfo".into(),
            message: "changed outside sluice".into(),
        }];
        assert_eq!(
            summary(&report),
            "13 commits, 10 decisions replayed, 1 finding"
        );
    }
}
