//! Command-line interface: one file per subcommand. `main.rs` only parses and dispatches.

use clap::{Parser, Subcommand, ValueEnum};

use crate::core::operate::Operation;

/// `print!` for a command's answer on stdout; see [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` for a command's answer on stdout; see [`write_stdout`].
macro_rules! outln {
    () => {
        $crate::cli::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes a command's answer to stdout. A reader that went away (`sluice reconcile | head -1`)
/// ends the command quietly with exit code 0, as a closed pipe ends `git log`: `println!`
/// would panic, since Rust ignores SIGPIPE. Any other write error ends it with exit code 2.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            std::process::exit(2);
        }
    }
}

pub mod adopt;
pub mod adopt_check;
pub mod audit;
pub mod dashboard;
pub mod demo;
pub mod demo_judge;
pub mod demo_prometheus;
pub mod history;
pub mod judge;
pub mod manual;
pub mod plan;
pub mod reconcile;
pub mod repo;
pub mod repos;
pub mod run;
pub mod status;
pub mod validate;
pub mod version;
mod workflow_command;

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version = version::LONG,
    about = "GitOps progressive delivery: canaries run by committing to the config repo"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check the repo as the loop loads it (canaries, settings, MetricTemplates and the
    /// templateRefs to them); every problem is printed as file:line: field: message.
    Validate(validate::Args),
    /// Show each canary's weight sequence, promotion, approvals and minimum duration.
    Plan(plan::Args),
    /// Run a whole canary against a temporary local repo (no cluster, no network).
    Demo(demo::Args),
    /// One tick over all canaries of the config repo, then exit.
    Reconcile(reconcile::Args),
    /// The daemon: tick, sleep until the next due time or poll, repeat; stops on SIGTERM/SIGINT.
    Run(run::Args),
    /// One row per canary: phase, step, weight, failed checks, revision.
    Status(status::Args),
    /// A canary's timeline, read from commit trailers.
    History(history::Args),
    /// Replay every decision of the branch from git; exit 1 on any commit the rules did not make.
    Audit(audit::Args),
    /// Judge a canary's series against the baseline's offline (Mann-Whitney, as Kayenta);
    /// exit 0 pass, 1 fail, 3 marginal.
    Judge(judge::Args),
    /// Serve the read-only dashboard of a config repo (as `sluice run` does at `/`).
    Dashboard(dashboard::Args),
    /// Approve the change a canary waits for (rollout start, next step, promotion).
    Approve(manual::Args),
    /// Skip the remaining steps and promote now.
    Promote(manual::Args),
    /// Roll back now.
    Abort(manual::Args),
    /// Re-run the analysis of a failed revision.
    Retry(manual::Args),
    /// Hold a canary where it is.
    Pause(manual::Args),
    /// Continue a paused canary.
    Resume(manual::Args),
    /// Print the version, the git commit and the build date of this binary.
    Version(version::Args),
    /// Move a repo that runs Flagger under Flux or Argo CD to sluice: one change on a new
    /// branch and the runbook of the switch; `adopt check` says whether the runbook's next step
    /// is safe, `adopt release` ends the switch.
    Adopt(adopt::Command),
}

/// Runs a parsed command; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    // Before any repository is opened: libgit2 reads the bound whenever it caches an object.
    crate::gitops::limit_object_cache();
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Reconcile(args) => reconcile::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Status(args) => status::run(&args),
        Command::History(args) => history::run(&args),
        Command::Audit(args) => audit::run(&args),
        Command::Judge(args) => judge::run(&args),
        Command::Dashboard(args) => dashboard::run(&args),
        Command::Approve(args) => manual::run(Operation::Approve, &args),
        Command::Promote(args) => manual::run(Operation::Promote, &args),
        Command::Abort(args) => manual::run(Operation::Abort, &args),
        Command::Retry(args) => manual::run(Operation::Retry, &args),
        Command::Pause(args) => manual::run(Operation::Pause, &args),
        Command::Resume(args) => manual::run(Operation::Resume, &args),
        Command::Version(args) => version::run(&args),
        Command::Adopt(args) => adopt::run_command(&args),
    }
}

/// The text `main` prints for a command's error: the error and its causes, as `{:#}` joins
/// them, leaving out a cause the text before it already says (an error that puts its source
/// in its own message would otherwise print it twice: `...: Not a directory (os error 20):
/// Not a directory (os error 20)`).
pub fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_the_message_already_says_is_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotADirectory);
        let said = io.to_string();
        let error = anyhow::Error::new(crate::gitops::Error::Io {
            path: "w/.git".into(),
            op: "read it",
            source: io,
        });
        assert_eq!(
            error_text(&error),
            format!("w/.git: cannot read it: {said}")
        );
        let error = anyhow::Error::new(std::io::Error::other("disk full")).context("cannot save");
        assert_eq!(error_text(&error), "cannot save: disk full");
    }
}
