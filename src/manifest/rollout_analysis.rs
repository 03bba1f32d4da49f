//! A Rollout's analysis, read into the core's [`ArgoGate`]s: each inline `analysis` step (its
//! `templates` and `args`) gates the step it follows, and `strategy.canary.analysis` (background
//! analysis, from `startingStep`) every step from there to the promotion.
//!
//! The templates are resolved here, once, through the repo's [`AnalysisIndex`] (a missing or
//! invalid template, or an argument without a value, is an error at the analysis's line), and
//! the arguments that git knows are resolved to their text: `value`,
//! `valueFrom.podTemplateHashValue` (the `sluice.dev/rollout-role` label value of the stable
//! or the canary workload) and `valueFrom.fieldRef` (a field of the Rollout). The observer runs
//! the same templates with the same arguments to query each metric. Decides nothing.

use crate::core::argo_analysis::step_key;
use crate::core::model::ArgoGate;
use crate::metrics::analysis_run::{field_ref_arg, pod_template_hash_arg, PodTemplateHash};
use crate::metrics::analysis_templates::{AnalysisIndex, MetricSource, TemplateRef};
use crate::yaml::node::Node;
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Snapshot;

/// An analysis of the Rollout, found where the steps are read.
pub struct Found {
    /// Where it is written (`spec.strategy.canary.steps[2].analysis`).
    pub at: String,
    pub node: Node,
    /// The sluice step (1-based) it gates, or (background) starts at.
    pub step: u32,
    pub inline: bool,
    /// One of an experiment step's `analyses`: one template (`templateName`,
    /// `clusterScope`) and its `args`.
    pub experiment: bool,
}

const INLINE_KEYS: &[&str] = &[
    "templates",
    "args",
    "dryRun",
    "measurementRetention",
    "analysisRunMetadata",
];
const BACKGROUND_KEYS: &[&str] = &[
    "templates",
    "args",
    "dryRun",
    "measurementRetention",
    "analysisRunMetadata",
    "startingStep",
];

/// The gates of the Rollout `root` in `namespace`, from its analyses `found`.
pub fn read_gates(
    r: &mut Reader,
    root: &Node,
    namespace: &str,
    snapshot: &Snapshot,
    found: &[Found],
) -> Vec<ArgoGate> {
    if found.is_empty() {
        return Vec::new();
    }
    // Template errors are reported where a run uses the template (validate reports them all).
    let (index, _) = AnalysisIndex::from_snapshot(snapshot);
    let mut gates: Vec<ArgoGate> = Vec::new();
    for f in found {
        let keys = match (f.experiment, f.inline) {
            (true, _) => crate::manifest::rollout_experiment::ANALYSIS_KEYS,
            (false, true) => INLINE_KEYS,
            (false, false) => BACKGROUND_KEYS,
        };
        if r.map(&f.node, &f.at, keys).is_none() {
            continue;
        }
        if let Some(line) = f.node.key_line("dryRun") {
            r.error(
                line,
                &join(&f.at, "dryRun"),
                "dryRun metrics are measured without deciding; every metric sluice measures decides, so remove dryRun or the metric",
            );
        }
        for key in ["measurementRetention", "analysisRunMetadata"] {
            if let Some(line) = f.node.key_line(key) {
                r.warn(
                    line,
                    &join(&f.at, key),
                    "ignored: sluice keeps every measurement in its commits' trailers, and runs no AnalysisRun object",
                );
            }
        }
        let templates = match f.experiment {
            true => experiment_template(r, &f.node, &f.at),
            false => read_templates(r, &f.node, &f.at),
        };
        let Some(templates) = templates else {
            continue;
        };
        let Some(args) = read_args(r, root, namespace, &f.node, &f.at) else {
            continue;
        };
        let refs: Vec<TemplateRef> = templates
            .iter()
            .map(|(name, cluster)| TemplateRef {
                name: name.clone(),
                cluster: *cluster,
            })
            .collect();
        let run = match index.run(namespace, &refs, &args) {
            Ok(run) => run,
            Err(e) => {
                let line = f.node.key_line("templates").unwrap_or(f.node.line);
                r.error(line, &join(&f.at, "templates"), e.to_string());
                continue;
            }
        };
        for m in run.metrics {
            if f.inline && m.rules.effective_count().is_none() {
                // Argo's validation: an analysis step must end, so each metric needs a count.
                r.error(
                    f.node.key_line("templates").unwrap_or(f.node.line),
                    &join(&f.at, "templates"),
                    format!("metric {:?} ({}:{}) runs indefinitely (an interval without a count), which Argo refuses in an analysis step: give it a count, or run it as background analysis", m.name, m.file, m.line),
                );
                continue;
            }
            let (rules, job) = match &m.source {
                // Argo judges a job metric by its Job's end alone, not by its conditions.
                MetricSource::Job { template } => (
                    crate::metrics::analysis_templates::job_rules(&m.rules),
                    Some(template.to_string()),
                ),
                _ => (m.rules.clone(), None),
            };
            let mut gate = ArgoGate {
                metric: m.name.clone(),
                name: m.name.clone(),
                rules,
                job,
                list: matches!(m.source, MetricSource::Prometheus { .. }),
                from_step: f.step,
                inline: f.inline,
                templates: templates.clone(),
                args: args.clone(),
            };
            key_apart(&mut gates, &mut gate);
            let clash = gates.iter().any(|g| {
                g.metric == gate.metric
                    && (g.measures_at(gate.from_step) || gate.measures_at(g.from_step))
            });
            if clash {
                r.error(
                    f.node.line,
                    &join(&f.at, "templates"),
                    format!("metric {:?} is measured twice at one step (by this analysis and another one): give one of them another name", m.name),
                );
                continue;
            }
            gates.push(gate);
        }
    }
    gates
}

/// Argo runs the background analysis and each analysis step as separate AnalysisRuns: an
/// analysis step's metric that the background run measures too is keyed apart
/// ([`step_key`]), whichever of the two is read first. Within one run a name stays unique,
/// as Argo's validation has it.
fn key_apart(gates: &mut [ArgoGate], gate: &mut ArgoGate) {
    if gate.inline {
        if gates
            .iter()
            .any(|g| !g.inline && g.metric == gate.name && g.measures_at(gate.from_step))
        {
            gate.metric = step_key(&gate.name, gate.from_step);
        }
        return;
    }
    for g in gates
        .iter_mut()
        .filter(|g| g.inline && g.metric == g.name && g.name == gate.name)
        .filter(|g| gate.measures_at(g.from_step))
    {
        g.metric = step_key(&g.name, g.from_step);
    }
}

/// `templates`: each `templateName`, and whether it is a ClusterAnalysisTemplate.
fn read_templates(r: &mut Reader, node: &Node, at: &str) -> Option<Vec<(String, bool)>> {
    let p = join(at, "templates");
    let list = r.required(node, at, "templates")?;
    let items = r.seq(list, &p)?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ip = index(&p, i);
        let item = r.map(item, &ip, &["templateName", "clusterScope"])?;
        let name_node = r.required(item, &ip, "templateName")?;
        let name = r.string(name_node, &join(&ip, "templateName"))?;
        let cluster = match item.get("clusterScope") {
            Some(c) => r.bool(c, &join(&ip, "clusterScope"))?,
            None => false,
        };
        out.push((name, cluster));
    }
    if out.is_empty() {
        r.error(node.line, &p, "expected at least one template");
        return None;
    }
    Some(out)
}

/// An experiment analysis's one template: `templateName`, and whether it is a
/// ClusterAnalysisTemplate (`clusterScope`).
fn experiment_template(r: &mut Reader, node: &Node, at: &str) -> Option<Vec<(String, bool)>> {
    let name_node = r.required(node, at, "templateName")?;
    let name = r.string(name_node, &join(at, "templateName"))?;
    let cluster = match node.get("clusterScope") {
        Some(c) => r.bool(c, &join(at, "clusterScope"))?,
        None => false,
    };
    Some(vec![(name, cluster)])
}

/// `args`, each resolved to its text.
fn read_args(
    r: &mut Reader,
    root: &Node,
    namespace: &str,
    node: &Node,
    at: &str,
) -> Option<Vec<(String, String)>> {
    let Some(args) = node.get("args") else {
        return Some(Vec::new());
    };
    let p = join(at, "args");
    let items = r.seq(args, &p)?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ip = index(&p, i);
        let item = r.map(item, &ip, &["name", "value", "valueFrom"])?;
        let name_node = r.required(item, &ip, "name")?;
        let name = r.string(name_node, &join(&ip, "name"))?;
        let value = match (item.get("value"), item.get("valueFrom")) {
            (Some(v), None) => r.string(v, &join(&ip, "value"))?,
            (None, Some(from)) => {
                read_value_from(r, root, namespace, from, &join(&ip, "valueFrom"))?
            }
            _ => {
                r.error(
                    item.line,
                    &ip,
                    "expected exactly one of value and valueFrom",
                );
                return None;
            }
        };
        out.push((name, value));
    }
    Some(out)
}

/// `valueFrom`: `podTemplateHashValue` or `fieldRef.fieldPath`. `metadata.namespace` is the
/// namespace sluice runs the Rollout in (`namespace`): its `metadata.namespace`, or `default`
/// when the file leaves it to the folder it is applied to, as every object sluice writes for
/// it is (a Rollout in the cluster always has one, so Argo always finds it).
fn read_value_from(
    r: &mut Reader,
    root: &Node,
    namespace: &str,
    from: &Node,
    at: &str,
) -> Option<String> {
    let from = r.map(from, at, &["podTemplateHashValue", "fieldRef"])?;
    match (from.get("podTemplateHashValue"), from.get("fieldRef")) {
        (Some(h), None) => {
            let hp = join(at, "podTemplateHashValue");
            let text = r.string(h, &hp)?;
            match PodTemplateHash::parse(&text) {
                Ok(which) => Some(pod_template_hash_arg(which, "stable", "canary").to_string()),
                Err(e) => {
                    r.error(h.line, &hp, e);
                    None
                }
            }
        }
        (None, Some(f)) => {
            let fp = join(at, "fieldRef");
            let f = r.map(f, &fp, &["fieldPath"])?;
            let path_node = r.required(f, &fp, "fieldPath")?;
            let path = r.string(path_node, &join(&fp, "fieldPath"))?;
            let value = match path.as_str() {
                "metadata.namespace" => Ok(namespace.to_string()),
                _ => field_ref_arg(root, &path),
            };
            match value {
                Ok(v) => Some(v),
                Err(e) => {
                    r.error(path_node.line, &join(&fp, "fieldPath"), e);
                    None
                }
            }
        }
        _ => {
            r.error(
                from.line,
                at,
                "expected exactly one of podTemplateHashValue and fieldRef (secretKeyRef belongs in the template's args)",
            );
            None
        }
    }
}
