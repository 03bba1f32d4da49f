//! `sluice status`: one row per canary, read from the status files in the repo; a canary
//! with waves has a row per wave and a line for its whole release.

use crate::cli::repo::{read_root, SourceArgs};
use crate::cli::Output;
pub use crate::readers::status::{rows, Row};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub source: SourceArgs,
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// How the status of a wave held for an unreachable cluster starts (`core::verdict`).
const HELD_CLUSTER: &str = "Held: cluster unreachable: ";

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let (root, _held) = read_root(&args.source)?;
    let rows = rows(&root)?;
    // The table has no message column: a hold for broken settings goes to stderr too.
    if let Some(held) = rows.iter().find(|r| r.message.starts_with("held: ")) {
        eprintln!("{}", held.message);
    }
    match args.output {
        Output::Json => outln!("{}", serde_json::to_string_pretty(&rows)?),
        Output::Yaml => out!("{}", serde_saphyr::to_string(&rows)?),
        Output::Table => {
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
                "SINCE",
                "WARNINGS",
            ]);
            for r in &rows {
                table.add_row([
                    r.namespace.clone(),
                    r.name.clone(),
                    r.phase.clone(),
                    r.step.to_string(),
                    r.canary_weight.to_string(),
                    r.failed_checks.to_string(),
                    r.revision.clone(),
                    r.since.clone(),
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
            // The table has no message column: a canary held by drift says so below it.
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
            for r in &rows {
                if let Some(url) = &r.url {
                    outln!("{}/{}: {url}", r.namespace, r.name);
                }
            }
        }
    }
    Ok(0)
}
