//! `sluice history NS/NAME`: the canary's timeline, read back from commit trailers; for a
//! canary with waves, one wave's (`--wave`) or the whole release's, wave by wave.

use crate::cli::repo::{branch_canaries, open, SourceArgs};
use crate::cli::Output;
use crate::gitops::local_history;
pub use crate::readers::history::{entries, release_entries, Check, Entry};
use crate::readers::status::no_canary;
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
    /// Output format (JSON and YAML carry each entry's full author and operator identities).
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
    let source = Source::open(args)?;
    let history = source.history(Some((CANARY, canary.as_str())), args.limit)?;
    let mut list = entries(&history, &canary);
    // A canary with waves commits only as its waves' instances: without --wave, its whole
    // release, every wave's commits with their wave.
    if list.is_empty() && args.wave.is_none() {
        list = release_entries(&source.history(None, usize::MAX)?, &canary);
        list.drain(..list.len().saturating_sub(args.limit));
    }
    // No commit of it: a canary the branch does not hold is a typo, not an empty story.
    if list.is_empty() {
        let known = source.canaries(args)?;
        if !known.contains(&canary) {
            eprintln!("{}", no_canary(&canary, &known));
            return Ok(1);
        }
    }
    match args.output {
        Output::Json => outln!("{}", serde_json::to_string_pretty(&list)?),
        Output::Yaml => out!("{}", serde_saphyr::to_string(&list)?),
        Output::Table => print_table(&list),
    }
    Ok(0)
}

/// Where the history is read: a local repository in place, or a clone fetched once.
enum Source {
    Dir(std::path::PathBuf, String),
    Clone(Box<crate::cli::repo::Locked>),
}

impl Source {
    fn open(args: &Args) -> anyhow::Result<Source> {
        match (&args.source.dir, &args.source.repo) {
            (Some(dir), _) => Ok(Source::Dir(dir.clone(), args.source.branch.clone())),
            // `open` fetches the branch.
            (None, Some(url)) => Ok(Source::Clone(Box::new(open(
                url,
                &args.source.branch,
                args.source.workdir.as_deref(),
            )?))),
            (None, None) => anyhow::bail!("give --repo URL or --dir PATH"),
        }
    }

    /// The canaries the branch holds now (`NS/NAME`).
    fn canaries(&self, args: &Args) -> anyhow::Result<Vec<String>> {
        let clone = match self {
            Source::Dir(..) => None,
            Source::Clone(locked) => Some(&locked.repo),
        };
        branch_canaries(&args.source, clone)
    }

    fn history(
        &self,
        filter: Option<(&str, &str)>,
        limit: usize,
    ) -> anyhow::Result<Vec<crate::gitops::HistoryEntry>> {
        Ok(match self {
            Source::Dir(dir, branch) => local_history(dir, branch, filter, limit)?,
            Source::Clone(locked) => locked.repo.history(filter, limit)?,
        })
    }
}

/// `Name <email>` as its name (the e-mail's local part when the name is empty); a login or
/// a bare name as it is.
pub fn short_identity(who: &str) -> String {
    match who.split_once('<') {
        Some((name, _)) if !name.trim().is_empty() => name.trim().to_string(),
        Some((_, email)) => email
            .trim_end_matches('>')
            .split('@')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string(),
        None => who.trim().to_string(),
    }
}

/// The entries as a table; a whole release's has a WAVE column.
fn print_table(list: &[Entry]) {
    let release = list.iter().any(|e| e.wave.is_some());
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::NOTHING);
    let mut header = vec!["TIME", "COMMIT", "BY", "PHASE", "STEP", "WEIGHTS", "REASON"];
    if release {
        header.insert(2, "WAVE");
    }
    table.set_header(header);
    for e in list {
        let mut row = vec![
            e.time.clone(),
            e.commit.clone(),
            // The approver of an approval, else who operated, else the commit's author: by
            // name or login (`-o json` has the whole identity).
            short_identity(
                e.approved_by
                    .as_deref()
                    .or(e.operator.as_deref())
                    .unwrap_or(&e.author),
            ),
            e.phase.clone(),
            e.step.clone(),
            e.weights.clone(),
            e.reason.clone(),
        ];
        if release {
            row.insert(2, e.wave.clone().unwrap_or_default());
        }
        table.add_row(row);
    }
    outln!("{table}");
}
