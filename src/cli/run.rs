//! `sluice run`: the daemon. Ticks, then sleeps until the earliest due time of any canary, the
//! next poll, or a signed git webhook (`/hooks/git`) waking it; serves the webhook and
//! `/metrics` on `--listen` (or `/metrics` on `--metrics-listen`), `/healthz` and `/readyz`
//! (not ready until a tick succeeds, and again after a failed one) on `--probe-listen`, a
//! listener of their own, and the dashboard only on `--dashboard-listen` (off by default);
//! SIGTERM/SIGINT end it between ticks, or at most 5 s later if a git operation is still
//! running. A remote that cannot be reached at start is retried every poll interval. A poll that
//! finds the head unchanged, every canary at rest and no webhook since does nothing beyond the
//! fetch (`tick::Idle`).
//!
//! Time is read from the runtime's clock ([`crate::clock`]). On a stepped clock (tests) the
//! loop still waits a few milliseconds of real time per sleep, [`crate::clock::STEPPED_PAUSE`], so that a
//! push or a webhook can arrive and the CPU is not burnt, then moves the clock on by the rest
//! of the sleep; a webhook or a stop request still ends the sleep at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, error, info};

use crate::cli::repo::RepoArgs;
use crate::clock::Clock;
use crate::core::shards::Owned;
use crate::gitops::ConfigRepo;
use crate::holding::Holding;
use crate::leadership::{Leadership, LeaseConfig};
use crate::lease_timing::Renewal;
use crate::observer::Live;
use crate::runtime::Runtime;
use crate::server::{
    serve, serve_dashboard_counted, serve_metrics, serve_probes, DashboardState, Metrics,
    ServerState,
};
use crate::shards::{ShardConfig, Shards};
use crate::tick::{poll, Context, Idle, Polled, TickReport};
use crate::yaml::reader::parse_duration;

/// The daemon's default address. Its port is no common neighbour's: not Prometheus (9090),
/// Alertmanager or the Pushgateway (9091-9094), the exporters' range (9100-9999), Flagger or
/// most web apps (8080), Grafana (3000), Envoy's admin (9901) or the kubelet (10250).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8723";
/// The port of [`DEFAULT_LISTEN`], which the Dockerfile and the install manifests use too.
pub const DEFAULT_PORT: u16 = 8723;
/// The probe listener's default address: loopback, like [`DEFAULT_LISTEN`]. Port 8081 is the
/// health port kubebuilder-made operators use; in a pod it has no neighbour, and a daemon
/// started next to another user of it is told to pass another `--probe-listen`.
pub const DEFAULT_PROBE_LISTEN: &str = "127.0.0.1:8081";

#[derive(Debug, clap::Args)]
#[command(mut_arg("repo", |a| a.required(false).required_unless_present("repos_file")))]
pub struct Args {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// The config repos this install reconciles, instead of --repo: a YAML file
    /// `repos: [{name, url, branch, workdir}]` (branch and workdir default to --branch and
    /// `<--workdir>/<name>`). Each repo has its own clone and credentials
    /// (`SLUICE_REPO_<NAME>_GIT_TOKEN`, ...); one that fails holds only its own canaries.
    #[arg(
        long = "repos",
        value_name = "FILE",
        env = "SLUICE_REPOS",
        conflicts_with = "repo"
    )]
    pub repos_file: Option<std::path::PathBuf>,
    /// Longest sleep between ticks (new commits are seen at the latest after this).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub poll: Duration,
    /// Push attempts before giving up when others keep pushing.
    #[arg(long, default_value_t = 8)]
    pub push_attempts: u32,
    /// Address of /hooks/git, and of /metrics unless --metrics-listen is given (port 0 picks
    /// a free port). /healthz and /readyz answer here too, but share this listener's
    /// connections with every client: probe --probe-listen instead. The dashboard is never
    /// served here unless --dashboard-listen names this same address.
    #[arg(long, default_value = DEFAULT_LISTEN, env = "SLUICE_LISTEN")]
    pub listen: SocketAddr,
    /// Address of /metrics alone, so that scrapes and webhooks can be admitted from different
    /// peers (port 0 picks a free port). Without it, /metrics is served on --listen.
    #[arg(long, env = "SLUICE_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Address of the read-only dashboard (`/`, `/canaries/...`, `/api/v1/...`; port 0 picks a
    /// free port). Without it no dashboard is served. Keep it on loopback and reach it with
    /// `kubectl port-forward`, or put it behind an authenticating proxy or
    /// --dashboard-auth-file; naming --listen's address serves it on that listener.
    #[arg(long, env = "SLUICE_DASHBOARD_LISTEN", value_name = "ADDR")]
    pub dashboard_listen: Option<SocketAddr>,
    /// Address of /healthz and /readyz alone, for the kubelet's probes: a listener with
    /// connections of its own, which a flood on --listen cannot take (port 0 picks a free
    /// port).
    #[arg(long, default_value = DEFAULT_PROBE_LISTEN, env = "SLUICE_PROBE_LISTEN")]
    pub probe_listen: SocketAddr,
    /// Run with several replicas: only the holder of a Kubernetes Lease ticks.
    #[arg(long, env = "SLUICE_LEADER_ELECTION")]
    pub leader_election: bool,
    /// Namespace of the Lease (default: the pod's, from POD_NAMESPACE).
    #[arg(long, env = "POD_NAMESPACE", default_value = "sluice-system")]
    pub lease_namespace: String,
    /// Name of the Lease the replicas compete for; with --shards, the prefix of the member
    /// Leases (`<name>-member-<identity>`) and shard Leases (`<name>-shard-<i>`).
    #[arg(long, default_value = "sluice")]
    pub lease_name: String,
    /// Spread the canaries over the live replicas in this many shards, each a Kubernetes Lease
    /// (1: one replica does all the work, as without this option). Needs Kubernetes access.
    #[arg(long, env = "SLUICE_SHARDS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
    /// How long a shard Lease (or a replica's member Lease) lives without renewal before
    /// another replica takes it over (--shards); a task of its own renews them every fifth of
    /// it, and a replica that cannot renew stops acting for its shards at two thirds of it.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    #[command(flatten)]
    pub dashboard: crate::cli::dashboard::DashboardArgs,
}

/// How long to sleep: until the earliest wake time, bounded by the poll interval.
pub fn sleep_for(
    wake_at: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
    poll: Duration,
) -> Duration {
    let until_wake = wake_at
        .map(|w| Duration::try_from(w.duration_since(now)).unwrap_or(Duration::ZERO))
        .unwrap_or(poll);
    until_wake.min(poll).max(Duration::from_millis(50))
}

/// Binds `addr` on the runtime context's tokio runtime; `flag` names the option to change.
fn bind(
    runtime: &Runtime,
    addr: SocketAddr,
    flag: &str,
) -> anyhow::Result<tokio::net::TcpListener> {
    runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}; pass another {flag}"))
}

/// Where each of the daemon's optional endpoints is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Not served at all.
    Off,
    /// On the main listener (`--listen`), because the operator gave its address.
    Main,
    /// On a listener of its own at this address.
    Own(SocketAddr),
}

/// Where an endpoint given `asked` is served, next to the main listener at `main`: an
/// address equal to the main one (with a fixed port: port 0 means "a free port" each time it
/// is bound) puts it on the main listener.
pub fn placement(asked: Option<SocketAddr>, main: SocketAddr) -> Placement {
    match asked {
        None => Placement::Off,
        Some(addr) if addr == main && addr.port() != 0 => Placement::Main,
        Some(addr) => Placement::Own(addr),
    }
}

/// Starts the HTTP servers on the runtime context's tokio runtime: the main listener, the
/// probe listener, and the metrics and dashboard listeners when they have their own
/// addresses; webhook wake-ups arrive on the channel.
fn start_server(
    runtime: &Runtime,
    args: &Args,
    state: ServerState,
    dashboard: Option<DashboardState>,
    wake: mpsc::SyncSender<()>,
) -> anyhow::Result<()> {
    let metrics_at = match placement(args.metrics_listen, args.listen) {
        Placement::Own(addr) => Some(bind(runtime, addr, "--metrics-listen")?),
        Placement::Off | Placement::Main => None,
    };
    let (state, dashboard) = match (placement(args.dashboard_listen, args.listen), dashboard) {
        (Placement::Main, Some(d)) => (state.with_dashboard(d), None),
        (Placement::Own(addr), Some(d)) => {
            (state, Some((bind(runtime, addr, "--dashboard-listen")?, d)))
        }
        (_, _) => (state, None),
    };
    let state = if metrics_at.is_some() {
        state.without_metrics_on_main()
    } else {
        state
    };
    let listener = bind(runtime, args.listen, "--listen")?;
    let probes = bind(runtime, args.probe_listen, "--probe-listen")?;
    info!(
        address = %listener.local_addr()?,
        metrics = metrics_at.is_none(),
        dashboard = placement(args.dashboard_listen, args.listen) == Placement::Main,
        "Serving /hooks/git"
    );
    info!(address = %probes.local_addr()?, "Serving probes /healthz /readyz");
    let tokio = runtime.tokio();
    if let Some(listener) = metrics_at {
        info!(address = %listener.local_addr()?, "Serving /metrics");
        let state = state.clone();
        tokio.spawn(async move {
            if let Err(e) = serve_metrics(listener, state, std::future::pending()).await {
                error!(error = %e, "Metrics server stopped");
            }
        });
    }
    if let Some((listener, dashboard)) = dashboard {
        info!(address = %listener.local_addr()?, "Serving the dashboard at /");
        let metrics = state.metrics().clone();
        tokio.spawn(async move {
            let served =
                serve_dashboard_counted(listener, dashboard, metrics, std::future::pending());
            if let Err(e) = served.await {
                error!(error = %e, "Dashboard server stopped");
            }
        });
    }
    let waker = state.clone();
    tokio.spawn(async move {
        loop {
            waker.woken().await;
            // One pending wake-up is enough: while the loop has not taken it, more deliveries
            // coalesce into it instead of queueing one tick each.
            if let Err(mpsc::TrySendError::Disconnected(())) = wake.try_send(()) {
                break;
            }
        }
    });
    let probe_state = state.clone();
    tokio.spawn(async move {
        if let Err(e) = serve_probes(probes, probe_state, std::future::pending()).await {
            error!(error = %e, "Probe server stopped");
        }
    });
    tokio.spawn(async move {
        if let Err(e) = serve(listener, state, std::future::pending()).await {
            error!(error = %e, "HTTP server stopped");
        }
    });
    Ok(())
}

fn record(metrics: &Metrics, report: &TickReport, now: jiff::Timestamp, repo: Option<&str>) {
    metrics.tick();
    metrics.push_retry(report.push_retries);
    for o in &report.outcomes {
        if let Some(s) = &o.status {
            let (ns, name) = o.id.split_once('/').unwrap_or(("", o.id.as_str()));
            let analysis = if s.phase.is_active() {
                now.duration_since(s.phase_since).as_secs_f64().max(0.0)
            } else {
                0.0
            };
            let state = (s.phase.as_str(), s.canary_weight, s.failed_checks, analysis);
            metrics.record_canary_in(repo, ns, name, state);
        }
        if o.error.is_some() {
            metrics.error("canary");
        }
    }
    if !report.spec_errors.is_empty() {
        metrics.error("spec");
    }
}

/// The daemon reports what a tick committed through tracing, like everything else it does
/// (`sluice reconcile` prints the same to stdout, as a command's answer).
fn log_report(report: &TickReport, repo: Option<&str>) {
    for o in &report.outcomes {
        let id = qualified(repo, &o.id);
        match (&o.committed, &o.error) {
            (_, Some(e)) => error!(canary = %id, error = %e, "Canary not reconciled"),
            (Some(subject), None) => info!(canary = %id, "Committed: {subject}"),
            (None, None) => {}
        }
    }
}

/// A canary's `NS/NAME`, as `REPO:NS/NAME` when the install reconciles several repos.
fn qualified(repo: Option<&str>, id: &str) -> String {
    match repo {
        Some(repo) => format!("{repo}:{id}"),
        None => id.to_string(),
    }
}

/// The waves a tick held because their cluster does not answer, as `/readyz` details.
fn unreachable_clusters(report: &TickReport, repo: Option<&str>) -> Vec<String> {
    report
        .outcomes
        .iter()
        .flat_map(|o| {
            o.events
                .iter()
                .filter(|e| e.starts_with("Held: cluster unreachable"))
                .map(move |e| format!("{}: {e}", qualified(repo, &o.id)))
        })
        .collect()
}

/// How long a stop request waits for the tick to finish before the process exits anyway.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Ends the process [`STOP_GRACE`] after a stop request if the loop has not ended by then: a
/// git operation on a slow remote can take up to the git timeout per read, and SIGTERM must not
/// wait for it. Exiting mid-operation is safe: the next start removes the clone's stale lock
/// files and fetches again, and a push is all-or-nothing on the remote.
fn exit_if_stop_hangs(stop: Arc<AtomicBool>, stopped: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        error!(
            grace_s = STOP_GRACE.as_secs(),
            "sluice stopped in the middle of a git operation that did not finish in time; the \
             next start resumes"
        );
        std::process::exit(0);
    });
}

/// Opens the clone, retrying while the remote cannot be reached (the daemon is then alive but
/// not ready). Errors that retrying cannot fix (bad URL, credentials, work dir) end the daemon.
fn open_with_retry(
    args: &Args,
    runtime: &Runtime,
    stop: &AtomicBool,
    metrics: &Metrics,
) -> anyhow::Result<Option<crate::cli::repo::Locked>> {
    let clock = runtime.clock();
    loop {
        match args.repo.open_on(Some(runtime.shared_clock())) {
            Ok(locked) => return Ok(Some(locked)),
            Err(e) => {
                let transient = e
                    .downcast_ref::<crate::gitops::Error>()
                    .filter(|g| g.is_transient());
                let Some(git) = transient else {
                    return Err(e);
                };
                error!(error = %git, retry_in_s = args.poll.as_secs_f64(), "Cannot open the config repo; will retry");
                metrics.error(git.kind());
            }
        }
        clock.sleep_unless_stopped(stop, args.poll);
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
    }
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    let stopped = Arc::new(AtomicBool::new(false));
    exit_if_stop_hangs(Arc::clone(&stop), Arc::clone(&stopped));
    let runtime = Runtime::from_env()?;
    let several = several_repos(args)?;
    // Before anything is served or cloned: without Kubernetes access --shards cannot start.
    let mut sharding = sharding(args, &runtime)?;
    let metrics = Metrics::with_connections(runtime.prometheus().endpoints().clone());
    let state = ServerState::new(
        metrics.clone(),
        runtime
            .env(crate::server::WEBHOOK_SECRET_ENV)
            .map(str::to_string),
        runtime.shared_clock(),
    );
    let dashboard = dashboard(args, &runtime, several.is_some())?;
    let (wake_tx, wake_rx) = mpsc::sync_channel(1);
    start_server(&runtime, args, state.clone(), dashboard, wake_tx)?;
    let clock = runtime.clock();
    // Each repo of several has a runtime of its own: its credentials, its caches.
    let process: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let repo_runtimes = match &several {
        Some(repos) => repos
            .iter()
            .map(|r| runtime.for_repo(crate::cli::repos::repo_env(&process, &r.name)))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let runtimes: Vec<&Runtime> = match &several {
        Some(_) => repo_runtimes.iter().collect(),
        None => vec![&runtime],
    };
    let observers: Vec<Live> = runtimes
        .iter()
        .map(|rt| Live::new(rt).deciding_without_waiting(state.wake_handle()))
        .collect();
    let mut slots = match &several {
        Some(repos) => {
            info!(repos = repos.len(), "sluice started");
            named_slots(args, repos, &process, &observers, &runtimes)
        }
        None => {
            let Some(locked) = open_with_retry(args, &runtime, &stop, &metrics)? else {
                stopped.store(true, Ordering::SeqCst);
                info!("sluice stopped");
                return Ok(0);
            };
            info!(branch = %args.repo.branch, "sluice started");
            let observer = observers
                .first()
                .ok_or_else(|| anyhow::anyhow!("no observer"))?;
            vec![Slot {
                name: None,
                args: args.repo.clone(),
                env: None,
                ctx: super::reconcile::context(observer, args.push_attempts, &runtime),
                locked: Some(locked),
                idle: Idle::default(),
                last: None,
            }]
        }
    };
    // What this replica holds, kept by the Lease renewal task (`--leader-election`,
    // `--shards`); each repo's canaries are hashed with its name.
    let election = start_election(args, &runtime, &state, &metrics)?;
    let leases = election.is_some() || sharding.is_some();
    let holding = match (election, sharding.take()) {
        (Some(holding), _) => holding,
        (None, Some(shards)) => start_sharding(shards, &runtime, &state, &metrics),
        (None, None) => Holding::all(),
    };
    let retry = Renewal::new(if args.leader_election {
        LEADER_LEASE
    } else {
        args.lease_duration
    })
    .retry_period();
    let mut owned = Owned::All;
    while !stop.load(Ordering::SeqCst) {
        let now_owned = holding.now();
        if now_owned != owned {
            info!(shards = ?now_owned, "What this replica holds changed");
            // Another replica may have ticked these canaries meanwhile: a full tick.
            slots.iter_mut().for_each(|s| s.idle.forget());
            owned = now_owned;
        }
        if owned == Owned::Nothing {
            // Another replica leads (or the Lease could not be renewed): wait for the task.
            clock.sleep_unless_stopped(&stop, retry.min(args.poll));
            continue;
        }
        let wait = poll_all(&mut slots, &holding, &state, &metrics, args.poll);
        // What the renewal task takes or loses is seen within a retry period.
        let wait = if leases { wait.min(retry) } else { wait };
        if sleep_until_woken(clock, &stop, &wake_rx, wait) {
            // Whatever it announces, the next poll ticks in full.
            slots.iter_mut().for_each(|s| s.idle.forget());
        }
    }
    stopped.store(true, Ordering::SeqCst);
    info!("sluice stopped");
    Ok(0)
}

/// The dashboard's state when `--dashboard-listen` is given (one repo only).
fn dashboard(
    args: &Args,
    runtime: &Runtime,
    several: bool,
) -> anyhow::Result<Option<DashboardState>> {
    match (args.dashboard_listen, several) {
        (Some(_), true) => anyhow::bail!(
            "--dashboard-listen shows one config repo: with several repos, run `sluice \
             dashboard --repo URL` for each"
        ),
        (Some(_), false) => Ok(Some(args.dashboard.state(
            crate::dashboard::Source {
                git_dir: args.repo.workdir_path()?,
                reference: crate::cli::dashboard::tracking_ref(&args.repo.branch),
            },
            runtime.shared_clock(),
            runtime.parses().clone(),
        )?)),
        (None, _) => Ok(None),
    }
}

/// The repos of `--repos FILE` or of `--repo` given several times; `None` for the one repo
/// of `--repo URL` (the daemon as it always was: no repo names anywhere).
fn several_repos(args: &Args) -> anyhow::Result<Option<Vec<crate::cli::repos::Repo>>> {
    use crate::cli::repos::{from_file, from_urls};
    let workdir = args.repo.workdir.as_deref();
    match (&args.repos_file, args.repo.repo.len()) {
        (Some(file), _) => from_file(file, &args.repo.branch, workdir).map(Some),
        (None, 0 | 1) => Ok(None),
        (None, _) => from_urls(&args.repo.repo, &args.repo.branch, workdir).map(Some),
    }
}

/// The slots of several repos, none opened yet (the loop opens each, and retries).
fn named_slots<'a>(
    args: &Args,
    repos: &[crate::cli::repos::Repo],
    process: &std::collections::BTreeMap<String, String>,
    observers: &'a [Live<'a>],
    runtimes: &[&'a Runtime],
) -> Vec<Slot<'a>> {
    repos
        .iter()
        .zip(observers)
        .zip(runtimes)
        .map(|((repo, observer), rt)| Slot {
            name: Some(repo.name.clone()),
            args: repo.args(&args.repo),
            env: Some(crate::cli::repos::repo_env(process, &repo.name)),
            ctx: super::reconcile::context(observer, args.push_attempts, rt),
            locked: None,
            idle: Idle::default(),
            last: None,
        })
        .collect()
}

/// One config repo of the daemon: its options, clone (once opened), tick context, and what
/// its last poll found.
struct Slot<'a> {
    /// Its name when the install has several repos; `None` for the one repo.
    name: Option<String>,
    args: RepoArgs,
    /// Its own environment (credentials) when the install has several repos.
    env: Option<std::collections::BTreeMap<String, String>>,
    ctx: Context<'a>,
    /// `None` until opened (several repos: retried every poll while it fails).
    locked: Option<crate::cli::repo::Locked>,
    idle: Idle,
    /// The last poll that did something: its `/readyz` details and forge repository, or why
    /// this repo's canaries hold.
    last: Option<Result<Ticked, String>>,
}

/// What a tick reported for `/readyz` and the webhook.
struct Ticked {
    details: Vec<String>,
    forge_repository: Option<String>,
}

impl Slot<'_> {
    /// Opens the clone if needed, then polls once; how long to sleep, and whether `last`
    /// changed. A repo that cannot be opened holds (only its own canaries) until it can.
    fn poll(&mut self, metrics: &Metrics, poll_interval: Duration) -> (Duration, bool) {
        let name = self.name.as_deref();
        if self.locked.is_none() {
            let clock = self.ctx.runtime.shared_clock();
            match self.args.open_scoped(Some(clock), self.env.as_ref()) {
                Ok(locked) => {
                    info!(repo = name.unwrap_or(""), "Config repo opened");
                    self.locked = Some(locked);
                }
                Err(e) => {
                    let kind = e
                        .downcast_ref::<crate::gitops::Error>()
                        .map_or("repo", |g| g.kind());
                    error!(repo = name.unwrap_or(""), error = %e, retry_in_s = poll_interval.as_secs_f64(), "Cannot open the config repo; its canaries hold; will retry");
                    metrics.error(kind);
                    self.last = Some(Err(format!("cannot open the config repo: {e}")));
                    return (poll_interval, true);
                }
            }
        }
        let Some(locked) = &mut self.locked else {
            return (poll_interval, false);
        };
        let (wait, polled) = poll_once(
            &mut locked.repo,
            &self.ctx,
            &mut self.idle,
            metrics,
            poll_interval,
            name,
        );
        match polled {
            None => (wait, false),
            Some(last) => {
                self.last = Some(last);
                (wait, true)
            }
        }
    }
}

/// Polls every repo once (its canaries of the shards `owned`) and publishes what changed;
/// how long to sleep.
fn poll_all(
    slots: &mut [Slot],
    owned: &Holding,
    state: &ServerState,
    metrics: &Metrics,
    poll: Duration,
) -> Duration {
    let mut wait = poll;
    let mut changed = false;
    for slot in slots.iter_mut() {
        slot.ctx.owned = owned.in_repo(slot.name.as_deref().unwrap_or(""));
        let (slot_wait, slot_changed) = slot.poll(metrics, poll);
        wait = wait.min(slot_wait);
        changed |= slot_changed;
    }
    if changed {
        publish(slots, state);
    }
    wait
}

/// Sets `/readyz` from what each repo's last poll found. One repo: ready after a tick, not
/// after a failed one, as always. Several: ready while any repo ticks (a restart would not
/// bring a remote back, and the others' webhooks must keep arriving); each held repo is a
/// detail `repo NAME: held: why`.
fn publish(slots: &[Slot], state: &ServerState) {
    if let [Slot {
        name: None, last, ..
    }] = slots
    {
        match last {
            Some(Ok(t)) => {
                state.set_ready();
                state.set_details(t.details.clone());
                state.set_forge_repositories(t.forge_repository.iter().cloned().collect());
            }
            Some(Err(_)) => state.set_not_ready(),
            None => {}
        }
        return;
    }
    let mut details = Vec::new();
    let mut forges: Vec<String> = Vec::new();
    let mut any_ready = false;
    for slot in slots {
        let name = slot.name.as_deref().unwrap_or("");
        match &slot.last {
            Some(Ok(t)) => {
                any_ready = true;
                details.extend(t.details.iter().cloned());
                forges.extend(t.forge_repository.iter().cloned());
            }
            Some(Err(why)) => details.push(format!("repo {name}: held: {why}")),
            None => details.push(format!("repo {name}: not ticked yet")),
        }
    }
    if any_ready {
        state.set_ready();
    } else {
        state.set_not_ready();
    }
    state.set_details(details);
    state.set_forge_repositories(forges);
}

/// `--leader-election`: renews the Lease this replica competes for on a task of its own
/// ([`crate::renewal`]); the holding says whether it leads now.
fn start_election(
    args: &Args,
    runtime: &Runtime,
    state: &ServerState,
    metrics: &Metrics,
) -> anyhow::Result<Option<Holding>> {
    if !args.leader_election {
        return Ok(None);
    }
    let identity = identity(runtime);
    let client = runtime
        .block_on(crate::kube::infer_client())
        .map_err(|e| anyhow::anyhow!("--leader-election needs Kubernetes access: {e}"))?;
    let config = LeaseConfig {
        namespace: args.lease_namespace.clone(),
        name: args.lease_name.clone(),
        identity,
        duration: LEADER_LEASE,
    };
    let holding = Holding::leader(Renewal::new(config.duration));
    let lease = config.name.clone();
    let (state, metrics) = (state.clone(), metrics.clone());
    let mut leading = false;
    let report = move |led: Result<Leadership, String>| match led {
        Ok(Leadership::Leader) => {
            if !leading {
                info!(lease = %lease, "Leading: this replica reconciles");
            }
            leading = true;
        }
        Ok(Leadership::Follower { holder }) => {
            if leading {
                info!(holder = %holder, "Standing by: another replica leads");
            }
            leading = false;
            state.set_ready();
        }
        Err(e) => {
            error!(error = %e, "Leader election failed; reconciling only until the renew deadline");
            metrics.error("lease");
        }
    };
    let clock = runtime.shared_clock();
    crate::renewal::spawn_leader(
        runtime.tokio(),
        client,
        config,
        clock,
        holding.clone(),
        report,
    );
    Ok(Some(holding))
}

/// How long the `--leader-election` Lease lives without renewal.
const LEADER_LEASE: Duration = Duration::from_secs(15);

/// This replica's name in the Leases: `POD_NAME`, or the host name and process id.
fn identity(runtime: &Runtime) -> String {
    match runtime.env("POD_NAME") {
        Some(pod) => pod.to_string(),
        None => format!(
            "{}-{}",
            runtime.env("HOSTNAME").unwrap_or("sluice"),
            std::process::id()
        ),
    }
}

/// `--shards N` (N > 1): a client for the shard Leases this replica takes, renews and
/// releases, checked before anything is served or cloned; `None` with one shard.
fn sharding(args: &Args, runtime: &Runtime) -> anyhow::Result<Option<Shards>> {
    if args.shards <= 1 {
        return Ok(None);
    }
    if args.leader_election {
        anyhow::bail!(
            "--shards {} and --leader-election both coordinate replicas by Leases: pass one \
             (--shards spreads the canaries over every live replica; --leader-election has \
             one replica do all the work)",
            args.shards
        );
    }
    if args.lease_duration < Duration::from_secs(1) {
        anyhow::bail!(
            "--lease-duration {:?}: a Lease's duration is whole seconds, at least 1s",
            args.lease_duration
        );
    }
    let client = runtime.block_on(crate::kube::infer_client()).map_err(|e| {
        anyhow::anyhow!(
            "--shards {} needs Kubernetes access to hold its Leases (in-cluster config or \
             KUBECONFIG): {e}; without it, run one replica without --shards",
            args.shards
        )
    })?;
    let config = ShardConfig {
        namespace: args.lease_namespace.clone(),
        name: args.lease_name.clone(),
        identity: identity(runtime),
        count: args.shards,
        duration: args.lease_duration,
    };
    info!(shards = config.count, identity = %config.identity, "Sharding by Kubernetes Leases");
    Ok(Some(Shards::new(client, config)))
}

/// Starts renewing the shard Leases on a task of their own ([`crate::renewal`]); the holding
/// says which shards this replica holds now. When the Leases cannot be reached, the shards
/// renewed within the renew deadline stay this replica's; the others are let go.
fn start_sharding(
    shards: Shards,
    runtime: &Runtime,
    state: &ServerState,
    metrics: &Metrics,
) -> Holding {
    let config = shards.config().clone();
    let holding = Holding::shards(config.count, Renewal::new(config.duration));
    let (state, metrics) = (state.clone(), metrics.clone());
    let report = move |synced: Result<crate::shards::Holders, String>| match synced {
        Ok(holders) => state.set_shards(holders.lines(&config.name)),
        Err(e) => {
            error!(error = %e, "Cannot renew the shard Leases; keeping only shards renewed within the renew deadline");
            metrics.error("lease");
            state.set_shards(vec![format!("shards unknown: {e}")]);
        }
    };
    let clock = runtime.shared_clock();
    crate::renewal::spawn_shards(runtime.tokio(), shards, clock, holding.clone(), report);
    holding
}

/// Polls once (a tick when anything is new or due), reports it, and returns how long to
/// sleep before the next poll, and what the tick found for `/readyz` (`None`: nothing new).
fn poll_once(
    repo: &mut ConfigRepo,
    ctx: &Context,
    idle: &mut Idle,
    metrics: &Metrics,
    poll_interval: Duration,
    name: Option<&str>,
) -> (Duration, Option<Result<Ticked, String>>) {
    let clock = ctx.runtime.clock();
    match poll(repo, ctx, clock.now(), idle) {
        Ok(Polled::Idle) => {
            debug!(
                repo = name.unwrap_or(""),
                "Nothing new and nothing due: no tick"
            );
            (sleep_for(idle.wake_at(), clock.now(), poll_interval), None)
        }
        Ok(Polled::Ticked(report)) => {
            let ticked = Ticked {
                details: unreachable_clusters(&report, name),
                forge_repository: report.forge_repository.clone(),
            };
            record(metrics, &report, clock.now(), name);
            log_report(&report, name);
            // What the tick allocated is freed; glibc would keep it mapped, and the daemon at
            // rest would stay at its busiest tick's size.
            sluice_malloc_trim::release_free_memory();
            let wait = sleep_for(report.wake_at(), clock.now(), poll_interval);
            (wait, Some(Ok(ticked)))
        }
        Err(e) => {
            error!(repo = name.unwrap_or(""), error = %e, retry_in_s = poll_interval.as_secs_f64(), "Tick failed; will retry");
            metrics.error(e.kind());
            (poll_interval, Some(Err(format!("tick failed: {e}"))))
        }
    }
}

/// Sleeps `wait` on `clock`, or less when a stop is requested or a git webhook wakes the loop
/// (then a stepped clock does not move); true when a webhook woke it, and the caller then
/// ticks every repo in full.
fn sleep_until_woken(
    clock: &Clock,
    stop: &AtomicBool,
    wake_rx: &mpsc::Receiver<()>,
    wait: Duration,
) -> bool {
    let woken = wait_until_woken(stop, wake_rx, clock.real_wait(wait));
    if !woken {
        clock.step_unless_stopped(stop, wait);
    }
    woken
}

/// Waits `wait` of real time, or less when a stop is requested or a git webhook wakes the
/// loop; true when a webhook woke it.
fn wait_until_woken(stop: &AtomicBool, wake_rx: &mpsc::Receiver<()>, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    while !stop.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match wake_rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(()) => {
                info!("Woken by a git webhook");
                return true;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(left.min(Duration::from_millis(100)))
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stepped() -> Clock {
        Clock::named(Some("stepped")).unwrap()
    }

    /// [`sleep_until_woken`] for `wait` on `clock`, stopped or not, waking on `rx`.
    fn sleep(clock: &Clock, stopped: bool, rx: &mpsc::Receiver<()>, wait: Duration) {
        let stop = AtomicBool::new(stopped);
        sleep_until_woken(clock, &stop, rx, wait);
    }

    #[test]
    fn a_stepped_sleep_waits_a_moment_and_jumps_the_rest() {
        let clock = stepped();
        let (_tx, rx) = mpsc::sync_channel(1);
        let start = clock.now();
        let real = Instant::now();
        sleep(&clock, false, &rx, Duration::from_secs(60));
        assert!(
            real.elapsed() < Duration::from_secs(5),
            "{:?}",
            real.elapsed()
        );
        assert!(
            real.elapsed() >= crate::clock::STEPPED_PAUSE,
            "{:?}",
            real.elapsed()
        );
        assert_eq!(
            clock.now().duration_since(start),
            jiff::SignedDuration::from_secs(60)
        );
        clock.sleep_unless_stopped(&AtomicBool::new(false), Duration::from_secs(5));
        assert_eq!(
            clock.now().duration_since(start),
            jiff::SignedDuration::from_secs(65)
        );
    }

    #[test]
    fn a_webhook_or_a_stop_ends_a_stepped_sleep_without_moving_the_clock() {
        let clock = stepped();
        let (tx, rx) = mpsc::sync_channel(1);
        let start = clock.now();
        tx.send(()).unwrap();
        sleep(&clock, false, &rx, Duration::from_secs(60));
        assert_eq!(
            clock.now(),
            start,
            "woken: the time it did not sleep is not jumped"
        );
        let stop = AtomicBool::new(true);
        sleep(&clock, true, &rx, Duration::from_secs(60));
        clock.sleep_unless_stopped(&stop, Duration::from_secs(60));
        assert_eq!(clock.now(), start, "stopping: no jump");
    }

    #[test]
    fn a_wall_sleep_waits_its_whole_time_unless_woken() {
        let clock = Clock::Wall;
        let (tx, rx) = mpsc::sync_channel(1);
        let real = Instant::now();
        sleep(&clock, false, &rx, Duration::from_millis(150));
        assert!(
            real.elapsed() >= Duration::from_millis(150),
            "{:?}",
            real.elapsed()
        );
        tx.send(()).unwrap();
        let real = Instant::now();
        sleep(&clock, false, &rx, Duration::from_secs(60));
        assert!(
            real.elapsed() < Duration::from_secs(5),
            "{:?}",
            real.elapsed()
        );
    }
}
