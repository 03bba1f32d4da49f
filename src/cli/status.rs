//! `sluice status`: one row per canary, read from the status files in the repo; a canary
//! with waves has a row per wave and a line for its whole release.

use crate::cli::repo::{read_root, Held as Kept, SourceArgs};
use crate::cli::Output;
use crate::gitops::{local_history, HistoryEntry};
use crate::readers::history::pauser;
use crate::readers::status::{known_canaries, no_canary, HELD_CLUSTER, HELD_SETTINGS, PAUSED_BY};
pub use crate::readers::status::{rows, Row};
use crate::render::message::CANARY;
use crate::runtime::Runtime;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this canary, as NAMESPACE/NAME (a canary with waves: all its waves).
    pub canary: Option<String>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Also show which replica holds each of this many shards (`sluice run --shards N`), read
    /// from the shard Leases (needs Kubernetes access: in-cluster config or KUBECONFIG).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: Option<u32>,
    /// Namespace of the shard Leases.
    #[arg(long, env = "POD_NAMESPACE", default_value = "sluice-system")]
    pub lease_namespace: String,
    /// The prefix of the shard Leases' names (`<name>-shard-<i>`), as `sluice run --lease-name`.
    #[arg(long, default_value = "sluice")]
    pub lease_name: String,
}

/// Commits of one canary read to find who paused it: its pause is among its last ones.
const PAUSE_SEARCH: usize = 200;

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let runtime = Runtime::from_env()?;
    let now = runtime.clock().now();
    let (root, kept) = read_root(&args.source)?;
    let mut rows = rows(&root, now)?;
    if let Some(wanted) = &args.canary {
        let id = |r: &Row| format!("{}/{}", r.namespace, r.name);
        let of = |r: &Row| {
            let name = id(r);
            name == *wanted
                || (r.wave.is_some()
                    && name
                        .strip_prefix(wanted.as_str())
                        .is_some_and(|w| w.starts_with('.')))
        };
        if !rows.iter().any(of) {
            eprintln!("{}", no_canary(wanted, &known_canaries(&rows)));
            return Ok(1);
        }
        rows.retain(of);
    }
    name_pausers(&mut rows, args, &kept);
    // The table has no message column: a hold for broken settings goes to stderr too.
    if let Some(held) = rows.iter().find(|r| r.message.starts_with(HELD_SETTINGS)) {
        eprintln!("{}", held.message);
    }
    match args.output {
        Output::Json => outln!("{}", serde_json::to_string_pretty(&rows)?),
        Output::Yaml => out!("{}", serde_saphyr::to_string(&rows)?),
        Output::Table => print_table(&rows),
    }
    if let Some(count) = args.shards {
        let lines = shard_lines(&runtime, args, count);
        // The table is for people: the holders follow it. JSON and YAML stay one document.
        for line in lines {
            match args.output {
                Output::Table => outln!("{line}"),
                Output::Json | Output::Yaml => eprintln!("{line}"),
            }
        }
    }
    Ok(0)
}

/// Who holds each shard, from the Leases; or why that cannot be known.
fn shard_lines(runtime: &Runtime, args: &Args, count: u32) -> Vec<String> {
    let read = runtime.block_on(async {
        let client = crate::kube::infer_client().await.map_err(|e| {
            format!(
                "which replica holds which shard cannot be known without Kubernetes access \
                 (in-cluster config or KUBECONFIG): {e}"
            )
        })?;
        crate::shards::read_holders(
            &client,
            &args.lease_namespace,
            &args.lease_name,
            count,
            runtime.clock().now(),
        )
        .await
    });
    match read {
        Ok(lines) => lines,
        Err(e) => vec![format!("shards: {e}")],
    }
}

/// A paused canary's hold names who paused it and why, read from its `sluice pause` commit.
fn name_pausers(rows: &mut [Row], args: &Args, kept: &Kept) {
    for row in rows.iter_mut() {
        let Some(held) = row.held.as_mut().filter(|h| h.kind == "pause") else {
            continue;
        };
        let canary = format!("{}/{}", row.namespace, row.name);
        let history: Vec<HistoryEntry> = match (kept, &args.source.dir) {
            (Kept::Clone(locked, _), _) => locked
                .repo
                .history(Some((CANARY, &canary)), PAUSE_SEARCH)
                .unwrap_or_default(),
            (_, Some(dir)) => local_history(
                dir,
                &args.source.branch,
                Some((CANARY, &canary)),
                PAUSE_SEARCH,
            )
            .unwrap_or_default(),
            (_, None) => Vec::new(),
        };
        if let Some((who, why)) = pauser(&history, &canary, &row.name) {
            held.by = who;
            held.why = why;
        }
    }
}

/// The images of a row as one cell: the primary's, and `-> ` the canary's where they differ.
fn images_cell(r: &Row) -> String {
    let images = &r.images;
    if images.is_empty() {
        return "-".into();
    }
    let mut names: Vec<&String> = images.canary.keys().chain(images.primary.keys()).collect();
    names.sort();
    names.dedup();
    names
        .iter()
        .map(|n| match (images.primary.get(*n), images.canary.get(*n)) {
            (Some(p), Some(c)) if p != c => format!("{p} -> {c}"),
            (Some(p), _) => p.clone(),
            (None, Some(c)) => c.clone(),
            (None, None) => String::new(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_table(rows: &[Row]) {
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::NOTHING);
    table.set_header([
        "NAMESPACE",
        "NAME",
        "PHASE",
        "STEP",
        "WEIGHT",
        "FAILED",
        "REVISION",
        "IMAGES",
        "AGE",
        "WARNINGS",
    ]);
    for r in rows {
        let phase = if r.paused {
            format!("{} (paused)", r.phase)
        } else {
            r.phase.clone()
        };
        table.add_row([
            r.namespace.clone(),
            r.name.clone(),
            phase,
            r.step.to_string(),
            r.canary_weight.to_string(),
            r.failed_checks.to_string(),
            r.revision.clone(),
            images_cell(r),
            r.age.clone(),
            r.warnings.to_string(),
        ]);
    }
    outln!("{table}");
    // A canary with waves: one row per wave above, and its release in one line.
    let mut releases: Vec<&crate::readers::status::Release> =
        rows.iter().filter_map(|r| r.release.as_ref()).collect();
    releases.dedup_by(|a, b| a.canary == b.canary);
    for release in releases {
        outln!("RELEASE {release}");
    }
    // The table has no message column: why a canary failed or holds is said below it.
    for r in rows {
        if let Some(reason) = &r.reason {
            outln!("{}/{} FAILED: {reason}", r.namespace, r.name);
        }
    }
    for r in rows {
        let Some(held) = &r.held else { continue };
        let id = format!("{}/{}", r.namespace, r.name);
        match held.kind {
            "pause" if held.by == PAUSED_BY => outln!(
                "{id} PAUSED by `sluice pause`: {} (`sluice resume {id}` continues it)",
                held.why
            ),
            "pause" => outln!(
                "{id} PAUSED by {} with `sluice pause`: {} (`sluice resume {id}` continues it)",
                held.by,
                held.why
            ),
            "suspend" => outln!("{id} HELD (spec.suspend): {}", held.why),
            "adoption" => outln!("{id} HELD (adoption, {}): {}", held.by, held.why),
            _ => {}
        }
    }
    // A canary held by drift says so, whatever else holds it.
    for r in rows.iter().filter(|r| !r.drift.is_empty()) {
        outln!("{}/{} HELD (drift): {}", r.namespace, r.name, r.message);
    }
    // A wave whose cluster did not answer says why, naming the cluster.
    for r in rows.iter().filter(|r| r.message.starts_with(HELD_CLUSTER)) {
        outln!("{}/{} HELD (cluster): {}", r.namespace, r.name, r.message);
    }
    if rows.iter().any(|r| r.warnings > 0) {
        outln!("WARNINGS: run `sluice validate` on the repo to read them");
    }
    // With `dashboard.url` in the settings: each canary's page.
    for r in rows {
        if let Some(url) = &r.url {
            outln!("{}/{}: {url}", r.namespace, r.name);
        }
    }
}
