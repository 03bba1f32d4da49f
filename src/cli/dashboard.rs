//! `sluice dashboard --repo URL | --dir PATH [--listen ADDR]`: the read-only dashboard of any
//! config repo, for a laptop or a CI artifact (the daemon serves the same pages at `/` on its
//! `--listen`). With `--repo` the clone is fetched every `--poll`, on a thread of its own; a
//! page request never fetches. With `--dir` the branch's commit is read as it is.
//! Also the dashboard options `sluice run` shares: `--dashboard-auth-file`, `--dashboard-history`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use crate::cli::repo::SourceArgs;
use crate::clock::Clock;
use crate::dashboard::auth::Auth;
use crate::dashboard::{Dashboard, Source, DEFAULT_HISTORY};
use crate::runtime::Runtime;
use crate::server::{serve_dashboard, DashboardState};
use crate::yaml::parses::Parses;
use crate::yaml::reader::parse_duration;

/// `sluice dashboard`'s default address: loopback, next to the daemon's port.
pub const DEFAULT_DASHBOARD_LISTEN: &str = "127.0.0.1:8724";

/// The dashboard options of `sluice run` and `sluice dashboard`.
#[derive(Debug, Clone, clap::Args)]
pub struct DashboardArgs {
    /// A file whose first line is `user:password` (HTTP basic authentication) or a bearer
    /// token of 16 characters or more: the dashboard then answers 401 without it. Without
    /// it, put the dashboard behind an authenticating proxy when it leaves loopback.
    #[arg(long, env = "SLUICE_DASHBOARD_AUTH_FILE", value_name = "FILE")]
    pub dashboard_auth_file: Option<PathBuf>,
    /// Decision commits read per canary page (the weight and metric charts, the log).
    #[arg(long, default_value_t = DEFAULT_HISTORY, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub dashboard_history: u32,
}

impl DashboardArgs {
    /// The handlers' state reading `source`, the time from `clock` and file parses shared
    /// through `parses` (the runtime's); the auth file is read now, so a bad one stops the
    /// start with its name.
    pub fn state(
        &self,
        source: Source,
        clock: Arc<Clock>,
        parses: Parses,
    ) -> anyhow::Result<DashboardState> {
        let auth = match &self.dashboard_auth_file {
            Some(path) => Some(Arc::new(Auth::read(path).map_err(anyhow::Error::msg)?)),
            None => None,
        };
        Ok(DashboardState {
            dashboard: Dashboard::new(source, self.dashboard_history as usize, clock, parses),
            auth,
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Address to serve the dashboard on (port 0 picks a free port).
    #[arg(long, default_value = DEFAULT_DASHBOARD_LISTEN)]
    pub listen: SocketAddr,
    /// With --repo: how often the clone is fetched.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub poll: Duration,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
}

/// The tracking ref a clone's fetch moves (and a push of sluice's updates).
pub fn tracking_ref(branch: &str) -> String {
    format!("refs/remotes/origin/{branch}")
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    let branch = &args.source.branch;
    let (source, clone) = match (&args.source.dir, &args.source.repo) {
        (Some(dir), _) => (
            Source {
                git_dir: dir.clone(),
                reference: format!("refs/heads/{branch}"),
            },
            None,
        ),
        (None, Some(url)) => {
            let locked = crate::cli::repo::open(url, branch, args.source.workdir.as_deref())?;
            let source = Source {
                git_dir: locked.repo.root().to_path_buf(),
                reference: tracking_ref(branch),
            };
            (source, Some(locked))
        }
        (None, None) => anyhow::bail!("give --repo URL or --dir PATH"),
    };
    let runtime = Runtime::from_env()?;
    serve(
        &runtime,
        args.dashboard
            .state(source, runtime.shared_clock(), runtime.parses().clone())?,
        args.listen,
        clone,
        args.poll,
        &stop,
    )?;
    Ok(0)
}

/// Serves the dashboard of `state` on `listen` until SIGINT or SIGTERM sets `stop`
/// (registered by the caller), fetching `clone`, if any, every `poll` of `runtime`'s clock.
/// Prints the URL.
pub fn serve(
    runtime: &Runtime,
    state: DashboardState,
    listen: SocketAddr,
    clone: Option<crate::cli::repo::Locked>,
    poll: Duration,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let address = start(runtime, state, listen, stop)?;
    outln!("Dashboard: http://{address}/ (Ctrl-C ends it)");
    keep_fetching(clone, runtime.clock(), stop, poll);
    Ok(())
}

/// Starts serving the dashboard of `state` on `listen` on `runtime`'s tasks, until `stop` is
/// set, and returns the address it listens on (`listen` with port 0 picks a free one).
pub fn start(
    runtime: &Runtime,
    state: DashboardState,
    listen: SocketAddr,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<SocketAddr> {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(listen))
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}; pass another --listen"))?;
    let address = listener.local_addr()?;
    let waiting = Arc::clone(stop);
    runtime.tokio().spawn(async move {
        let until_stopped = async move {
            while !waiting.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        if let Err(e) = serve_dashboard(listener, state, until_stopped).await {
            tracing::error!(error = %e, "Dashboard server stopped");
        }
    });
    Ok(address)
}

/// Waits on `clock` until SIGINT or SIGTERM sets `stop` (registered by the caller).
pub fn wait_until_stopped(clock: &Clock, stop: &AtomicBool) {
    keep_fetching(None, clock, stop, Duration::from_secs(1));
}

/// Fetches the clone every `poll` on `clock` until stopped (with `--dir`, only waits).
fn keep_fetching(
    mut clone: Option<crate::cli::repo::Locked>,
    clock: &Clock,
    stop: &AtomicBool,
    poll: Duration,
) {
    loop {
        clock.sleep_unless_stopped(stop, poll);
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if let Some(locked) = clone.as_mut() {
            if let Err(e) = locked.repo.fetch() {
                warn!(error = %e, "Cannot fetch the config repo; the dashboard shows the last commit read");
            }
        }
    }
}
