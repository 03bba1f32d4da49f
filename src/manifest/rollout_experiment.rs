//! Reads a Rollout's `experiment` step (`steps[N].experiment`): its `templates` (each a
//! workload of the stable or canary pod template that runs while the rollout stands at the
//! step), its `analyses` (each one template, run as an inline analysis of the step) and how
//! long it holds (`duration`; without one, until its analyses end; without those either,
//! until approved, as Argo's Experiment then runs until the rollout is promoted).
//!
//! Reads one step; the caller places it among sluice's steps and reads the analyses' metrics
//! (`rollout_analysis`). Decides nothing.

use std::time::Duration;

use crate::core::argo_experiment::{ExperimentTemplate, SpecRef};
use crate::core::schedule::Pause;
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};

const KEYS: &[&str] = &[
    "duration",
    "templates",
    "analyses",
    "dryRun",
    "analysisRunMetadata",
];
const TEMPLATE_KEYS: &[&str] = &[
    "name", "specRef", "replicas", "metadata", "selector", "weight", "service",
];
/// The keys of one of `analyses`.
pub const ANALYSIS_KEYS: &[&str] = &[
    "name",
    "templateName",
    "clusterScope",
    "args",
    "requiredForCompletion",
];

/// An experiment step, read.
pub struct Experiment {
    pub pause: Pause,
    pub templates: Vec<ExperimentTemplate>,
    /// Each analysis's node (one of `analyses`) and where it is written.
    pub analyses: Vec<(String, Node)>,
    /// The analyses' `name`s, in order.
    pub analysis_names: Vec<String>,
}

/// The experiment step `n` at `at`; `routed`: the Rollout has trafficRouting.
pub fn read(r: &mut Reader, n: &Node, at: &str, routed: bool) -> Option<Experiment> {
    let before = r.errors.len();
    let n = r.map(n, at, KEYS)?;
    if let Some(line) = n.key_line("dryRun") {
        r.error(line, &join(at, "dryRun"), "dryRun metrics are measured without deciding; every metric sluice measures decides, so remove dryRun or the metric");
    }
    if let Some(line) = n.key_line("analysisRunMetadata") {
        r.warn(
            line,
            &join(at, "analysisRunMetadata"),
            "ignored: sluice runs no AnalysisRun object; its measurements are in its commits",
        );
    }
    let tp = join(at, "templates");
    let mut templates: Vec<ExperimentTemplate> = Vec::new();
    let list = r.required(n, at, "templates")?;
    for (i, item) in r.seq(list, &tp).unwrap_or_default().iter().enumerate() {
        let ip = index(&tp, i);
        if let Some(t) = template(r, item, &ip, routed) {
            if templates.iter().any(|o| o.name == t.name) {
                r.error(item.line, &join(&ip, "name"), format!("expected template names unique in the experiment, found {:?} twice (Argo refuses it too)", t.name));
                continue;
            }
            templates.push(t);
        }
    }
    if templates.is_empty() && r.errors.len() == before {
        r.error(list.line, &tp, "expected at least one template");
    }
    let mut analyses = Vec::new();
    let mut analysis_names = Vec::new();
    if let Some(list) = n.get("analyses") {
        let ap = join(at, "analyses");
        for (i, item) in r.seq(list, &ap).unwrap_or_default().iter().enumerate() {
            let ip = index(&ap, i);
            let Some(item) = r.map(item, &ip, ANALYSIS_KEYS) else {
                continue;
            };
            let name = r
                .required(item, &ip, "name")
                .and_then(|v| r.string(v, &join(&ip, "name")));
            let template = r
                .required(item, &ip, "templateName")
                .and_then(|v| r.string(v, &join(&ip, "templateName")));
            let (Some(name), Some(_)) = (name, template) else {
                continue;
            };
            analysis_names.push(name);
            analyses.push((ip, item.clone()));
        }
    }
    let pause = match n.get("duration") {
        Some(d) => match duration(r, d, &join(at, "duration"))? {
            d if d.is_zero() => Pause::Interval,
            d => Pause::For(d),
        },
        // Without a duration the experiment ends when its analyses do (their gates hold the
        // step); without analyses it runs until the rollout is promoted.
        None if analyses.is_empty() => Pause::Approval,
        None => Pause::Interval,
    };
    (r.errors.len() == before).then_some(Experiment {
        pause,
        templates,
        analyses,
        analysis_names,
    })
}

/// One of `templates`.
fn template(r: &mut Reader, n: &Node, at: &str, routed: bool) -> Option<ExperimentTemplate> {
    let n = r.map(n, at, TEMPLATE_KEYS)?;
    let name_node = r.required(n, at, "name")?;
    let name = r.string(name_node, &join(at, "name"))?;
    if let Err(e) = crate::core::model::Name::parse_label(&format!("experiment-{name}")) {
        r.error(name_node.line, &join(at, "name"), format!("{e}: sluice labels the template's pods experiment-<name>, a label value of at most 63 characters"));
        return None;
    }
    let spec = r.required(n, at, "specRef")?;
    let spec_ref = r.one_of(
        spec,
        &join(at, "specRef"),
        &[("stable", SpecRef::Stable), ("canary", SpecRef::Canary)],
    )?;
    let replicas = match n.get("replicas") {
        Some(c) => u32::try_from(r.int(c, &join(at, "replicas"), 0, i64::from(i32::MAX))?).ok()?,
        None => 1,
    };
    if let Some(line) = n.key_line("selector") {
        r.warn(line, &join(at, "selector"), "ignored: sluice selects the template's pods by the pod template's labels and its own role label");
    }
    // A weighted template takes traffic through the router: refused until sluice writes it.
    if let Some(w) = n.get("weight") {
        let wp = join(at, "weight");
        r.int(w, &wp, 0, 100)?;
        let line = n.key_line("weight").unwrap_or(n.line);
        if routed {
            r.error(line, &wp, "a weighted experiment template takes a share of the traffic through the router, which sluice does not write into your route yet; remove the weight (the template's pods then run beside the canary without traffic), or keep this Rollout on Argo Rollouts");
        } else {
            r.error(line, &wp, "Experiment template weight is only available for TrafficRouting (Argo refuses it too): without a router the pods split the traffic; remove the weight");
        }
        return None;
    }
    let service = match n.get("service") {
        Some(s) if s.value != Value::Null => {
            r.map(s, &join(at, "service"), &["name"])?;
            true
        }
        Some(_) => true,
        None => false,
    };
    Some(ExperimentTemplate {
        name,
        spec_ref,
        replicas,
        service,
        weight: None,
    })
}

/// `duration`: seconds as a number, or a Go duration.
fn duration(r: &mut Reader, d: &Node, at: &str) -> Option<Duration> {
    match &d.value {
        Value::Scalar { text, .. } => match text.trim().parse::<u64>() {
            Ok(s) => Some(Duration::from_secs(s)),
            Err(_) => r.duration(d, at),
        },
        _ => r.duration(d, at),
    }
}
