//! `sluice reconcile`: one tick over all canaries, then exit (for cron or a CI schedule).
//! Exit 0 when the tick ran (canary failures are states); non-zero on operational errors.

use crate::cli::repo::RepoArgs;
use crate::observer::Live;
use crate::runtime::Runtime;
use crate::tick::{tick_fetched, Context, TickReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Push attempts before giving up when others keep pushing.
    #[arg(long, default_value_t = 8)]
    pub push_attempts: u32,
}

/// The tick context of `sluice reconcile` and `sluice run`: live observations, the repo
/// settings' author, and `push_attempts` pushes at most per commit.
pub fn context<'a>(observer: &'a Live, push_attempts: u32, runtime: &'a Runtime) -> Context<'a> {
    Context {
        observer,
        author: None,
        push_attempts,
        runtime,
        owned: crate::holding::Holding::all(),
    }
}

/// One line per canary: the subject of its commit, or why nothing changed; errors on stderr.
pub fn print_report(report: &TickReport) {
    for e in &report.spec_errors {
        eprintln!("{e}");
    }
    for o in &report.outcomes {
        match (&o.committed, &o.error) {
            (_, Some(e)) => eprintln!("{}: error: {e}", o.id),
            (Some(subject), None) => outln!("{subject}"),
            (None, None) => outln!("{}", unchanged(o)),
        }
    }
}

/// A canary the tick left as it was: its phase (and pause), and why, in the words of the
/// decision's last event, else of its status.
fn unchanged(o: &crate::outcome::CanaryOutcome) -> String {
    let phase = match (&o.status, o.phase) {
        (Some(s), _) if s.paused => format!("{}, paused", s.phase),
        (_, Some(phase)) => phase.to_string(),
        (_, None) => "no status".to_string(),
    };
    let why = o
        .events
        .last()
        .cloned()
        .or_else(|| o.status.as_ref().map(|s| s.message.clone()))
        .filter(|why| !why.is_empty());
    match why {
        Some(why) => format!("{}: no change ({phase}): {why}", o.id),
        None => format!("{}: no change ({phase})", o.id),
    }
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    // The settings of the process first: a bad one stops before the work dir is touched.
    let runtime = Runtime::from_env()?;
    let mut locked = args.repo.open()?;
    let observer = Live::new(&runtime);
    let ctx = context(&observer, args.push_attempts, &runtime);
    // `open` fetched the branch a moment ago; a second fetch would only ask the remote again.
    let report = tick_fetched(&mut locked.repo, &ctx, runtime.clock().now())?;
    print_report(&report);
    Ok(0)
}
