//! `sluice history NS/NAME`: the canary's timeline, read back from commit trailers.

use crate::cli::repo::{open, SourceArgs};
use crate::cli::Output;
use crate::gitops::local_history;
pub use crate::readers::history::{entries, Check, Entry};
use crate::render::message::CANARY;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The canary, as NAMESPACE/NAME.
    pub canary: String,
    /// For a canary with waves: that wave's timeline (its commits carry `Sluice-Wave`).
    #[arg(long)]
    pub wave: Option<String>,
    #[command(flatten)]
    pub source: SourceArgs,
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Most recent entries to show.
    #[arg(long, default_value_t = 500)]
    pub limit: usize,
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    if !args.canary.contains('/') {
        anyhow::bail!("expected NAMESPACE/NAME, found {:?}", args.canary);
    }
    // A wave's instance is the canary `NS/NAME.WAVE`.
    let canary = match &args.wave {
        Some(wave) => format!("{}.{wave}", args.canary),
        None => args.canary.clone(),
    };
    let filter = Some((CANARY, canary.as_str()));
    let history = match (&args.source.dir, &args.source.repo) {
        (Some(dir), _) => local_history(dir, &args.source.branch, filter, args.limit)?,
        (None, Some(url)) => {
            // `open` fetches the branch.
            let locked = open(url, &args.source.branch, args.source.workdir.as_deref())?;
            locked.repo.history(filter, args.limit)?
        }
        (None, None) => anyhow::bail!("give --repo URL or --dir PATH"),
    };
    let list = entries(&history, &canary);
    match args.output {
        Output::Json => outln!("{}", serde_json::to_string_pretty(&list)?),
        Output::Yaml => out!("{}", serde_saphyr::to_string(&list)?),
        Output::Table => {
            let mut table = comfy_table::Table::new();
            table.load_style(comfy_table::presets::NOTHING);
            table.set_header(["TIME", "COMMIT", "BY", "PHASE", "STEP", "WEIGHTS", "REASON"]);
            for e in &list {
                table.add_row([
                    e.time.clone(),
                    e.commit.clone(),
                    // The approver of an approval, else who operated, else the commit's author.
                    e.approved_by
                        .clone()
                        .or_else(|| e.operator.clone())
                        .unwrap_or_else(|| e.author.clone()),
                    e.phase.clone(),
                    e.step.clone(),
                    e.weights.clone(),
                    e.reason.clone(),
                ]);
            }
            outln!("{table}");
        }
    }
    Ok(0)
}
