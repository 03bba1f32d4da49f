//! `sluice judge`: the statistical judge on two series from files, offline, to tune a judge
//! against yesterday's data. `--baseline FILE --canary FILE` judges one metric; a folder of
//! `<metric>.baseline` and `<metric>.canary` files judges each metric in it. `--config` reads
//! the metrics' settings, weights and thresholds from a `Judge` object; without it every metric
//! has Kayenta's defaults, the thresholds are pass 95, marginal 75, and each series needs 50
//! values to pass (`minSamples`'s default).
//!
//! Exit code 0 on pass, 1 on fail, 3 on marginal, 2 on bad input (each error names its file
//! and line). A metric the test cannot compute (`Error`) or with too few values fails, so it
//! never exits 0.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use sluice_core::judge::config::DEFAULT_MIN_SAMPLES;
use sluice_core::judge::{judge, MetricInput, MetricRule, Outcome, Thresholds};

use crate::judge::config::{read_object, JudgeMetric, JudgeSpec, DEFAULT_GROUP};
use crate::judge::report::{report, table};
use crate::judge::series::read_series;
use crate::yaml::error::SpecErrors;
use crate::yaml::node::parse_documents;
use crate::yaml::reader::Reader;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A folder of `<metric>.baseline` and `<metric>.canary` files, one metric per pair.
    #[arg(conflicts_with_all = ["baseline", "canary"], required_unless_present_all = ["baseline", "canary"])]
    pub folder: Option<PathBuf>,
    /// The baseline's (primary's) series: one number per line, or a JSON array.
    #[arg(long, requires = "canary")]
    pub baseline: Option<PathBuf>,
    /// The canary's series, in the same form.
    #[arg(long, requires = "baseline")]
    pub canary: Option<PathBuf>,
    /// A `sluice.dev/v1alpha1` `Judge` object: metric settings, group weights, thresholds.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// The thresholds without `--config`: Kayenta's usual pass 95, marginal 75.
const DEFAULT_THRESHOLDS: Thresholds = Thresholds {
    pass: 95.0,
    marginal: 75.0,
};

/// One metric's files, read.
struct Pair {
    name: String,
    canary: Vec<f64>,
    baseline: Vec<f64>,
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let spec = match &args.config {
        Some(path) => Some(read_config(path)?),
        None => None,
    };
    let pairs = match (&args.folder, &args.baseline, &args.canary) {
        (Some(folder), _, _) => read_folder(folder)?,
        (None, Some(baseline), Some(canary)) => vec![read_pair(baseline, canary, spec.as_ref())?],
        _ => bail!("give a folder, or both --baseline and --canary"),
    };
    let metrics = settings_for(&pairs, spec.as_ref())?;
    let inputs: Vec<MetricInput<'_>> = pairs
        .iter()
        .zip(&metrics)
        .map(|(pair, m)| MetricInput {
            name: &pair.name,
            group: &m.group,
            muted: m.muted,
            rule: m.rule,
            canary: &pair.canary,
            baseline: &pair.baseline,
        })
        .collect();
    let (weights, thresholds, min_samples) = match &spec {
        Some(s) => (s.group_weights.clone(), s.thresholds, s.min_samples),
        None => (Vec::new(), DEFAULT_THRESHOLDS, DEFAULT_MIN_SAMPLES),
    };
    let judgement = judge(&inputs, &weights, thresholds, min_samples);
    let measures: Vec<_> = metrics.iter().map(|m| m.rule.effect_size.measure).collect();
    let report = report(&judgement, &measures);
    match args.output {
        Format::Table => out!("{}", table(&report)),
        Format::Json => outln!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(match judgement.score.outcome {
        Outcome::Pass => 0,
        Outcome::Fail => 1,
        Outcome::Marginal => 3,
    })
}

fn read_config(path: &Path) -> anyhow::Result<JudgeSpec> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("{file}: cannot read"))?;
    let docs =
        parse_documents(&text).map_err(|e| anyhow::anyhow!("{file}:{}: {}", e.line, e.message))?;
    let [doc] = docs.as_slice() else {
        bail!(
            "{file}:1: expected one Judge document, found {}",
            docs.len()
        );
    };
    let mut r = Reader::new(file.clone());
    let read = read_object(&mut r, &doc.root);
    if let Some(kind) = doc.root.get("kind") {
        if kind.as_str() != Some(crate::judge::config::KIND) {
            r.error(kind.line, "kind", "expected Judge");
        }
    }
    match read {
        Some((_, spec)) if r.errors.is_empty() => Ok(spec),
        _ => Err(SpecErrors(r.errors).into()),
    }
}

fn read_pair(baseline: &Path, canary: &Path, spec: Option<&JudgeSpec>) -> anyhow::Result<Pair> {
    // One metric: the config's only metric names it, else the canary file's name does.
    let name = match spec.map(|s| s.metrics.as_slice()) {
        Some([only]) => only.name.clone(),
        Some(many) if !many.is_empty() => {
            bail!("--config names {} metrics; judge them from a folder of <metric>.baseline and <metric>.canary files", many.len())
        }
        _ => stem(canary),
    };
    Ok(Pair {
        name,
        canary: read_series(canary)?,
        baseline: read_series(baseline)?,
    })
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "metric".to_string())
}

/// Every `<metric>.canary` in `folder` with its `<metric>.baseline`, by metric name.
fn read_folder(folder: &Path) -> anyhow::Result<Vec<Pair>> {
    let entries = std::fs::read_dir(folder)
        .with_context(|| format!("{}: cannot read the folder", folder.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let ext = path.extension().and_then(|e| e.to_str());
        if matches!(ext, Some("canary" | "baseline")) {
            let name = stem(&path);
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names.sort();
    if names.is_empty() {
        bail!(
            "{}: no <metric>.baseline and <metric>.canary files",
            folder.display()
        );
    }
    names
        .into_iter()
        .map(|name| {
            let canary = folder.join(format!("{name}.canary"));
            let baseline = folder.join(format!("{name}.baseline"));
            for path in [&canary, &baseline] {
                if !path.is_file() {
                    bail!(
                        "{}: missing (metric {name:?} needs both .baseline and .canary)",
                        path.display()
                    );
                }
            }
            Ok(Pair {
                canary: read_series(&canary)?,
                baseline: read_series(&baseline)?,
                name,
            })
        })
        .collect()
}

/// Each pair's settings: the config's metric of that name, or Kayenta's defaults without a
/// config. A configured metric without files, or files without a configured metric, is an error.
fn settings_for(pairs: &[Pair], spec: Option<&JudgeSpec>) -> anyhow::Result<Vec<JudgeMetric>> {
    let Some(spec) = spec else {
        return Ok(pairs
            .iter()
            .map(|p| JudgeMetric {
                name: p.name.clone(),
                query: None,
                group: DEFAULT_GROUP.to_string(),
                muted: false,
                rule: MetricRule::default(),
            })
            .collect());
    };
    if let Some(m) = spec
        .metrics
        .iter()
        .find(|m| !pairs.iter().any(|p| p.name == m.name))
    {
        bail!("metric {:?} of --config has no series files", m.name);
    }
    pairs
        .iter()
        .map(|p| {
            spec.metrics
                .iter()
                .find(|m| m.name == p.name)
                .cloned()
                .with_context(|| format!("metric {:?} is not in --config", p.name))
        })
        .collect()
}
