//! `sluice demo`: a whole canary against a temporary local repo, no cluster, no network.
//!
//! Seeds a bare repo from the embedded `examples/demo` config repo, lets sluice initialise the
//! canary, pushes a new image tag as a human would, runs ticks until the canary is promoted,
//! and prints the story from `git log`. With `--judge` the statistical judge compares the
//! canary with its primary too (`demo_judge.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::cli::demo_judge;
use crate::cli::demo_prometheus::{self, Script};
use crate::cli::run::sleep_for;
use crate::clock::Clock;
use crate::core::judge::JudgeSpec;
use crate::core::status::Phase;
use crate::gitops::{CommitMessage, ConfigRepo, Credentials, FileChange, Identity};
use crate::manifest::analysis::FLAGGER_MIN_ANALYSIS_INTERVAL;
use crate::observer::Live;
use crate::runtime::Runtime;
use crate::tick::{tick, Context, TickReport};

/// The demo config repo, embedded so the binary alone can run the demo.
pub const DEMO_FILES: [(&str, &str); 4] = [
    (
        ".sluice/config.yaml",
        include_str!("../../examples/demo/.sluice/config.yaml"),
    ),
    (
        "apps/podinfo/deployment.yaml",
        include_str!("../../examples/demo/apps/podinfo/deployment.yaml"),
    ),
    (
        "apps/podinfo/configmap.yaml",
        include_str!("../../examples/demo/apps/podinfo/configmap.yaml"),
    ),
    (
        "apps/podinfo/canary.yaml",
        include_str!("../../examples/demo/apps/podinfo/canary.yaml"),
    ),
];

const CANARY: &str = "demo/podinfo";

/// The demo's waves, in release order.
const WAVES: [&str; 3] = ["staging", "prod-eu", "prod-us"];

/// The wave that waits for a person before the release enters it, as in `examples/fleet`.
const APPROVED_WAVE: &str = "prod-eu";

/// `--waves`: the example fleet (`examples/fleet`), its waves settled by time instead of read
/// from clusters (the demo has none); prod-eu waits for an approval, which the demo gives
/// from the CLI (`sluice approve`), so one command runs the release.
pub fn fleet_files() -> Vec<(&'static str, String)> {
    let mut waves = String::from(
        "apiVersion: sluice.dev/v1alpha1\nkind: Waves\nmetadata: {name: fleet, namespace: demo}\nspec:\n  onFailure: hold\n  waves:\n",
    );
    for wave in WAVES {
        waves.push_str(&DEMO_WAVE.replace("WAVE", wave));
        if wave == APPROVED_WAVE {
            waves.push_str("      approval: true\n");
        }
    }
    vec![
        (
            ".sluice/config.yaml",
            include_str!("../../examples/fleet/.sluice/config.yaml").to_string(),
        ),
        (
            "apps/podinfo/deployment.yaml",
            include_str!("../../examples/fleet/apps/podinfo/deployment.yaml").to_string(),
        ),
        (
            "apps/podinfo/configmap.yaml",
            include_str!("../../examples/fleet/apps/podinfo/configmap.yaml").to_string(),
        ),
        (
            "apps/podinfo/canary.yaml",
            include_str!("../../examples/fleet/apps/podinfo/canary.yaml").to_string(),
        ),
        ("apps/podinfo/waves.yaml", waves),
    ]
}

/// How long each demo cluster takes to apply a commit (`settle` in [`DEMO_WAVE`]).
const DEMO_SETTLE_SECONDS: u64 = 1;

/// One of the demo's three clusters: a folder, one second to apply a commit, one step of
/// 50 % (the canary's three steps, in every wave, would take minutes). The interval is
/// Flagger's floor, the shortest a Flagger canary steps at.
const DEMO_WAVE: &str = "    - name: WAVE
      output: deploy/WAVE/podinfo
      settle: 1s
      analysis:
        interval: 10s
        threshold: 2
        stepWeight: 50
        maxWeight: 50
        metrics:
          - {name: request-success-rate, thresholdRange: {min: 99}, interval: 1m}
          - {name: request-duration, thresholdRange: {max: 500}, interval: 1m}
";

/// The canaries the demo waits for: the canary, or with `--waves` each wave's instance.
fn watched(waves: bool) -> Vec<String> {
    if waves {
        WAVES.iter().map(|w| format!("{CANARY}.{w}")).collect()
    } else {
        vec![CANARY.to_string()]
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep the demo repos in this folder instead of a temporary one.
    #[arg(long)]
    pub keep: Option<std::path::PathBuf>,
    /// Give up after this many seconds (per wave with --waves).
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Make the canary unhealthy (87 % success rate) to watch sluice roll it back.
    #[arg(long)]
    pub fail: bool,
    /// Serve a dashboard of the demo's repo from the start (its URL is printed first), so the
    /// canary is seen moving; it stays open after the demo ends (Ctrl-C ends it).
    #[arg(long)]
    pub dashboard: bool,
    /// Address of the demo's dashboard (port 0 picks a free port).
    #[arg(long, default_value = crate::cli::dashboard::DEFAULT_DASHBOARD_LISTEN, requires = "dashboard")]
    pub dashboard_listen: std::net::SocketAddr,
    /// Roll the release out in three waves (staging, prod-eu, prod-us), cluster after cluster.
    #[arg(long)]
    pub waves: bool,
    /// Judge the canary against its primary with the statistical judge as well; with --fail,
    /// the canary is 30 % slower than the primary yet under the 500 ms threshold.
    #[arg(long, conflicts_with = "waves")]
    pub judge: bool,
}

/// Creates a bare repo at `remote` whose `main` holds `files`, committed as `author`.
pub fn seed_bare_repo(
    dir: &Path,
    remote: &Path,
    files: &[(&str, &str)],
    author: &Identity,
) -> anyhow::Result<()> {
    let seed_dir = dir.join("seed");
    let seed = git2::Repository::init(&seed_dir).context("cannot create the seed repo")?;
    let mut index = seed.index()?;
    for (path, text) in files {
        let full = seed_dir.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&full, text)?;
        index.add_path(Path::new(path))?;
    }
    index.write()?;
    let tree = seed.find_tree(index.write_tree()?)?;
    let sig = git2::Signature::now(&author.name, &author.email)?;
    seed.commit(
        Some("refs/heads/main"),
        &sig,
        &sig,
        "Add the podinfo app and its canary",
        &tree,
        &[],
    )?;
    git2::build::RepoBuilder::new()
        .bare(true)
        .branch("main")
        .clone(&seed_dir.to_string_lossy(), remote)
        .context("cannot create the demo remote")?;
    Ok(())
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let temp = tempfile::tempdir()?;
    let dir = args
        .keep
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let remote = dir.join("config-repo.git");
    let url = remote.to_string_lossy().to_string();
    let alice = Identity::new("alice", "alice@example.com");
    let fleet = fleet_files();
    let fleet: Vec<(&str, &str)> = fleet.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let judged = demo_judge::files(&DEMO_FILES);
    let judged: Vec<(&str, &str)> = judged.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let files: &[(&str, &str)] = match (args.waves, args.judge) {
        (true, _) => &fleet,
        (false, true) => &judged,
        (false, false) => &DEMO_FILES,
    };
    let runtime = Runtime::from_env()?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dashboard = args
        .dashboard
        .then(|| start_dashboard(&runtime, &remote, args.dashboard_listen, &stop))
        .transpose()?;
    seed_bare_repo(&dir, &remote, files, &alice)?;
    outln!("sluice demo: config repo {url}");
    if args.keep.is_none() {
        outln!("  (a temporary folder, deleted when the demo ends: `--keep DIR` keeps the repos)");
    }
    for line in header(args.waves) {
        outln!("  {line}");
    }
    let judge = args.judge.then(demo_judge::spec).transpose()?;

    let creds = Credentials::none();
    let mut sluice = ConfigRepo::open_or_clone(&url, "main", &dir.join("sluice-workdir"), &creds)?;
    let script = if args.judge {
        demo_judge::script(args.fail)
    } else {
        Script::new(if args.fail { 87.31 } else { 99.93 }, 212.0)
    };
    let prometheus = demo_prometheus::start(script, &runtime)?;
    if args.judge {
        demo_judge::describe(&prometheus.address, script, args.fail);
    } else {
        outln!(
            "  metrics: an embedded Prometheus query endpoint at {} answers success rate {}% and p99 latency {} ms{}\n",
            prometheus.address,
            script.success_rate,
            script.latency_ms,
            if args.fail { " (--fail: unhealthy)" } else { "" }
        );
    }
    let mut observer = Live::new(&runtime);
    observer.prometheus_override = Some(prometheus.address.clone());
    let ctx = Context {
        observer: &observer,
        author: None,
        push_attempts: 8,
        runtime: &runtime,
        owned: crate::holding::Holding::all(),
    };
    let clock = runtime.clock();
    let start = clock.now();
    let report = tick(&mut sluice, &ctx, clock.now())?;
    show(&report, clock, start);

    // A human bumps the image, as they would in a pull request.
    let mut human = ConfigRepo::open_or_clone(&url, "main", &dir.join("alice-workdir"), &creds)?;
    bump_image(&mut human, &alice)?;
    outln!(
        "[{:>5.1}s] alice: podinfo: bump image to 6.7.1",
        since(clock, start)
    );

    let watched = watched(args.waves);
    let timeout = Duration::from_secs(args.timeout).saturating_mul(watched.len() as u32);
    let end = tick_until_done(
        (&mut sluice, &mut human),
        &ctx,
        &watched,
        (start, timeout),
        judge.as_ref(),
    )?;
    if let (true, Some(failed)) = (args.waves, end.failed.as_deref()) {
        after_failed_wave(&mut sluice, &ctx, failed)?;
    }
    if judge.is_some() {
        for line in demo_judge::verdict(&sluice, CANARY)? {
            outln!("{line}");
        }
    }

    outln!("\ngit log of {url} (oldest first):");
    print_history(&sluice, args.waves)?;
    if args.keep.is_some() {
        outln!("\nrepos kept in {}", dir.display());
    } else {
        outln!("\n{} is deleted now; run the demo with `--keep DIR` to keep the repos and read them with `sluice status --dir` and `sluice history --dir`", dir.display());
    }
    if let Some(address) = dashboard {
        drop(prometheus);
        keep_serving(&runtime, address, &stop)?;
    }
    Ok(0)
}

/// After the demo: the dashboard at `address` serves on until Ctrl-C (which only now stops
/// the dashboard rather than the demo) sets `stop`.
fn keep_serving(
    runtime: &Runtime,
    address: std::net::SocketAddr,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<()> {
    signal_hook::flag::register(signal_hook::consts::SIGTERM, std::sync::Arc::clone(stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, std::sync::Arc::clone(stop))?;
    outln!("\nDashboard: http://{address}/ (Ctrl-C ends it)");
    crate::cli::dashboard::wait_until_stopped(runtime.clock(), stop);
    Ok(())
}

/// Starts the dashboard of the demo's remote on `listen`, on the demo's runtime and clock,
/// until `stop` is set, and prints its URL: the address it listens on. It listens before the
/// repo exists (it says "not read yet" until then) and shows each decision as the demo
/// pushes it.
fn start_dashboard(
    runtime: &Runtime,
    remote: &Path,
    listen: std::net::SocketAddr,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<std::net::SocketAddr> {
    use crate::cli::dashboard::{start, DashboardArgs};
    let state = DashboardArgs {
        dashboard_auth_file: None,
        dashboard_history: crate::dashboard::DEFAULT_HISTORY,
    }
    .state(
        crate::dashboard::Source {
            git_dir: remote.to_path_buf(),
            reference: "refs/heads/main".into(),
        },
        runtime.shared_clock(),
        runtime.parses().clone(),
    )?;
    let address = start(runtime, state, listen, stop)?;
    outln!("Dashboard: http://{address}/ (live: the canary moves on it as the demo runs)");
    Ok(address)
}

/// Prints what a tick committed and what went wrong, with the seconds since `start`.
fn show(report: &TickReport, clock: &Clock, start: jiff::Timestamp) {
    for e in &report.spec_errors {
        outln!("  spec error: {e}");
    }
    for o in &report.outcomes {
        if let Some(subject) = &o.committed {
            outln!("[{:>5.1}s] {subject}", since(clock, start));
        }
        if let Some(e) = &o.error {
            outln!("[{:>5.1}s] {}: error: {e}", since(clock, start), o.id);
        }
    }
}

/// Seconds on `clock` since `start`.
fn since(clock: &Clock, start: jiff::Timestamp) -> f64 {
    clock.now().duration_since(start).as_secs_f64()
}

/// Commits and pushes a new image tag in the human's clone, as a pull request would.
fn bump_image(human: &mut ConfigRepo, alice: &Identity) -> anyhow::Result<()> {
    human.fetch()?;
    let bumped = DEMO_FILES[1].1.replace("podinfo:6.7.0", "podinfo:6.7.1");
    human.commit_files(
        &[FileChange::write("apps/podinfo/deployment.yaml", bumped)],
        &CommitMessage::new("podinfo: bump image to 6.7.1"),
        alice,
        None,
    )?;
    human.push()?;
    Ok(())
}

/// The lines that say what the demo's canary does and when (and with `waves`, where).
fn header(waves: bool) -> Vec<String> {
    let floor = FLAGGER_MIN_ANALYSIS_INTERVAL.as_secs();
    let mut lines = vec![
        "apps/podinfo/ holds a Deployment and a Flagger Canary: canary weights 25, 50, 75, then the primary takes over by 25 (stepWeight 25, maxWeight 75, stepWeightPromotion 25)".to_string(),
        format!("one step every {floor} s (analysis.interval {floor}s): {floor} s is Flagger's floor, it raises any shorter interval to {floor} s, and sluice steps as Flagger does"),
        "each step is judged on the metrics the canary served at the weight before it (the first step, at 0 %, has none to judge)".to_string(),
    ];
    if waves {
        lines.push(format!(
            "apps/podinfo/waves.yaml rolls each release out in three waves, one after the other: {}",
            WAVES.map(|w| format!("deploy/{w}")).join(", ")
        ));
        lines.push(format!("in each wave the canary takes one step of 50 %, then the primary takes over (each wave's analysis replaces the canary's, to keep the demo short); steps are {} s apart: {floor} s, plus the {DEMO_SETTLE_SECONDS} s each cluster takes to apply a commit (settle: {DEMO_SETTLE_SECONDS}s)", floor + DEMO_SETTLE_SECONDS));
        lines.push(format!("{APPROVED_WAVE} waits for a person's approval before the release enters it; alice gives it with `sluice approve`"));
        lines.push("onFailure: hold: a wave that fails rolls back in its own folder, the waves after it never take the failed revision".to_string());
    }
    lines
}

/// How the demo's rollout ended: the canary (or wave instance) that failed, if one did.
struct End {
    failed: Option<String>,
}

/// Ticks until the `watched` canaries are promoted, or one is rolled back, sleeping on the
/// runtime's clock until each next due time; an error after `timeout` of wall time. Prints
/// the checks each decision judged, with a `judge` its table; a wave waiting for approval is
/// approved from the CLI by the `human`.
fn tick_until_done(
    (sluice, human): (&mut ConfigRepo, &mut ConfigRepo),
    ctx: &Context,
    watched: &[String],
    (start, timeout): (jiff::Timestamp, Duration),
    judge: Option<&JudgeSpec>,
) -> anyhow::Result<End> {
    let deadline = Instant::now() + timeout;
    let clock = ctx.runtime.clock();
    let waves = watched.len() > 1;
    loop {
        let report = tick(sluice, ctx, clock.now())?;
        show(&report, clock, start);
        if report.commits > 0 {
            demo_judge::show(sluice, report.commits, (CANARY, waves), judge)?;
        }
        let outcomes: Vec<Option<&crate::outcome::CanaryOutcome>> = watched
            .iter()
            .map(|id| report.outcomes.iter().find(|o| &o.id == id))
            .collect();
        let waiting = outcomes.iter().flatten().find(|o| {
            o.status
                .as_ref()
                .is_some_and(crate::core::status::Status::is_waiting)
        });
        if let (true, Some(waiting)) = (waves, waiting) {
            approve(human, ctx, &waiting.id, start)?;
            continue;
        }
        let phases: Vec<Option<Phase>> = outcomes.iter().map(|o| o.and_then(|o| o.phase)).collect();
        let failed = watched
            .iter()
            .zip(&phases)
            .find(|(_, p)| **p == Some(Phase::Failed))
            .map(|(id, _)| id.clone());
        let done = phases.iter().all(|p| *p == Some(Phase::Succeeded));
        if (failed.is_some() || done) && report.commits > 0 {
            let ended = if failed.is_some() {
                Phase::Failed
            } else {
                Phase::Succeeded
            };
            outln!("\ncanary {CANARY} ended {ended}");
            return Ok(End { failed });
        }
        if Instant::now() > deadline {
            bail!("the demo did not finish within {} s", timeout.as_secs());
        }
        clock.sleep(sleep_for(
            report.wake_at(),
            clock.now(),
            Duration::from_secs(1),
        ));
    }
}

/// `instance` (`NS/NAME.WAVE`) waits for approval: alice approves it from the CLI, as
/// `sluice approve NS/NAME --wave WAVE` does (one commit on the branch, with her reason).
fn approve(
    human: &mut ConfigRepo,
    ctx: &Context,
    instance: &str,
    start: jiff::Timestamp,
) -> anyhow::Result<()> {
    let clock = ctx.runtime.clock();
    let wave = instance.rsplit_once('.').map_or(instance, |(_, w)| w);
    let reason = "the waves before it run the release";
    outln!(
        "[{:>5.1}s] {instance} waits for approval; alice: sluice approve {CANARY} --wave {wave} --reason \"{reason}\"",
        since(clock, start)
    );
    human.fetch()?;
    let manual = crate::manual::Manual {
        canary: CANARY,
        wave: Some(wave),
        op: crate::core::operate::Operation::Approve,
        operator: Identity::new("alice", "alice@example.com"),
        reason,
        push_attempts: 8,
    };
    let subject = crate::manual::operate(human, ctx.runtime, &manual, clock.now())?;
    outln!("[{:>5.1}s] alice: {subject}", since(clock, start));
    Ok(())
}

/// After wave `failed` failed, one more tick: each later wave says why it holds, and the
/// demo says what that means for the release.
fn after_failed_wave(sluice: &mut ConfigRepo, ctx: &Context, failed: &str) -> anyhow::Result<()> {
    let clock = ctx.runtime.clock();
    let report = tick(sluice, ctx, clock.now())?;
    let wave = |id: &str| {
        id.rsplit_once('.')
            .map_or(id.to_string(), |(_, w)| w.to_string())
    };
    let later: Vec<String> = watched(true)
        .into_iter()
        .skip_while(|id| id != failed)
        .skip(1)
        .collect();
    for id in &later {
        let held = report
            .outcomes
            .iter()
            .find(|o| &o.id == id)
            .and_then(|o| o.events.iter().find(|e| e.starts_with("held: ")));
        if let Some(held) = held {
            outln!("  wave {} {held}", wave(id));
        }
    }
    let names: Vec<String> = later.iter().map(|id| wave(id)).collect();
    if names.is_empty() {
        outln!(
            "wave {} was the last one: the release stops there",
            wave(failed)
        );
    } else {
        outln!(
            "onFailure: hold: wave {} rolled back in its own folder; {} never take the failed revision and keep running podinfo:6.7.0 until a new revision passes wave {} (onFailure: rollback would put the earlier waves back too)",
            wave(failed),
            names.join(" and "),
            wave(failed)
        );
    }
    Ok(())
}

/// Prints the repo's history, oldest first: author, phase, weights and subject per commit.
fn print_history(sluice: &ConfigRepo, waves: bool) -> anyhow::Result<()> {
    let mut entries = sluice.history(None, 200)?;
    entries.reverse();
    for e in entries {
        let trailer = |k: &str| {
            e.trailers
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        // With waves, which cluster each commit went to.
        let wave = if waves {
            format!("{:<8} ", trailer("Sluice-Wave"))
        } else {
            String::new()
        };
        // With the judge, what it scored.
        let judged = trailer(crate::judge::trailers::JUDGE);
        let judged = if judged.is_empty() {
            judged
        } else {
            format!(" [judge {judged}]")
        };
        outln!(
            "  {} {:<8} {wave}{:<15} {:<24} {}{judged}",
            &e.oid.to_string()[..7],
            e.author.name,
            trailer("Sluice-Phase"),
            trailer("Sluice-Weights"),
            e.subject
        );
    }
    Ok(())
}
