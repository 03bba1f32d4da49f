//! `sluice plan FILE...`: per canary, the weights it walks, the promotion, where approvals wait
//! and the minimum duration, computed by the decision engine on a simulated clock; for a
//! canary with waves, each wave, then the release's waves in order and its minimum duration
//! (in JSON and YAML, on each wave's plan as its `release`).

use std::path::PathBuf;

use crate::cli::Output;
use crate::core::simulate::{simulate, Simulation};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders holding canaries.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Repo settings file (default: .sluice/config.yaml found above the first path).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let (_, loaded) = crate::cli::validate::load(&args.paths, args.config.as_deref());
    for e in &loaded.errors {
        eprintln!("{e}");
    }
    // Warnings refuse nothing; they say what sluice reads differently from the text (the
    // router a provider prefix selects, a pruned field).
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let plans: Vec<Simulation> = loaded.canaries.iter().map(simulate).collect();
    match args.output {
        Output::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&with_releases(&loaded.canaries, &plans)?)?
        ),
        Output::Yaml => out!(
            "{}",
            serde_saphyr::to_string(&with_releases(&loaded.canaries, &plans)?)?
        ),
        Output::Table => {
            for (c, p) in loaded.canaries.iter().zip(&plans) {
                print_plan(p, &rollout_steps(c), &replica_counts(c));
            }
            for r in crate::core::waves::plan(&loaded.canaries) {
                print_release(&r);
            }
        }
    }
    Ok(if loaded.errors.is_empty() { 0 } else { 1 })
}

/// Each canary's plan; a wave's instance also carries its `wave` and its `release`: the
/// waves in order, each's schedule, and the release's minimum duration (what the table's
/// release section prints).
fn with_releases(
    canaries: &[crate::manifest::model::Canary],
    plans: &[Simulation],
) -> anyhow::Result<Vec<serde_json::Value>> {
    let releases = crate::core::waves::plan(canaries);
    let mut out = Vec::with_capacity(plans.len());
    for (canary, plan) in canaries.iter().zip(plans) {
        let mut value = serde_json::to_value(plan)?;
        let steps = rollout_steps(canary);
        if let (false, Some(fields)) = (steps.is_empty(), value.as_object_mut()) {
            fields.insert("rolloutSteps".into(), steps.into());
        }
        let split = replica_counts(canary);
        if let (false, Some(fields)) = (split.is_empty(), value.as_object_mut()) {
            let split: Vec<_> = split
                .iter()
                .map(|(w, c, s)| serde_json::json!({"weight": w, "canary": c, "stable": s}))
                .collect();
            fields.insert("replicaSplit".into(), split.into());
        }
        if let (Some(wave), Some(fields)) = (&canary.wave, value.as_object_mut()) {
            fields.insert("wave".into(), wave.name.to_string().into());
            let release = releases.iter().find(|r| {
                r.namespace == canary.id.namespace.as_str() && r.name == wave.canary.as_str()
            });
            if let Some(release) = release {
                fields.insert("release".into(), serde_json::to_value(release)?);
            }
        }
        out.push(value);
    }
    Ok(out)
}

fn list(weights: &[u8]) -> String {
    if weights.is_empty() {
        return "-".into();
    }
    weights
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// A canary with waves: its waves in order (each planned above as `NAME.WAVE`), and the
/// release's minimum duration.
fn print_release(r: &crate::core::waves::ReleasePlan) {
    outln!(
        "{}/{} (release in {} waves)",
        r.namespace,
        r.name,
        r.waves.len()
    );
    for (i, w) in r.waves.iter().enumerate() {
        let approval = if w.approval { ", after approval" } else { "" };
        outln!(
            "  wave {}: {:<12} {}s, canary weights {}{approval}",
            i + 1,
            w.wave,
            w.min_duration_seconds,
            list(&w.canary_weights)
        );
    }
    outln!("  minimum duration:   {}s", r.min_duration_seconds);
}

/// An Argo Rollout's steps as sluice runs them, in Argo's words (`setWeight 20`,
/// `analysis success-rate`, `pause 60s`, `pause until approved`; a background analysis where
/// it starts); empty for other canaries.
pub fn rollout_steps(canary: &crate::manifest::model::Canary) -> Vec<String> {
    use crate::manifest::model::{Strategy, Target};
    let Target::Rollout {
        stable_service,
        canary_service,
        scale,
        managed_routes,
        experiments,
        set_weight_zero,
        ..
    } = &canary.target
    else {
        return Vec::new();
    };
    let scales = scale.as_ref().map_or(&[][..], |s| s.set.as_slice());
    // The setCanaryScale steps at sluice step `step`, before or after its setWeight.
    let scale_words = |step: u32, after_weight: bool| {
        scales
            .iter()
            .filter(move |s| s.step == step && s.after_weight == after_weight)
            .map(|s| scale_word(s.scale))
    };
    let mut out: Vec<String> = scale_words(0, false).collect();
    if canary.analysis.approvals.before_rollout {
        out.push("pause until approved".to_string());
    }
    // Each analysis by its templates, once however many metrics they hold.
    let templates = |inline: bool, step: u32| {
        let mut names: Vec<&str> = Vec::new();
        for g in &canary.analysis.argo {
            if g.inline == inline && g.from_step == step {
                for (name, _) in &g.templates {
                    if !names.contains(&name.as_str()) {
                        names.push(name);
                    }
                }
            }
        }
        names.join(" + ")
    };
    let steps = match &canary.analysis.strategy {
        Strategy::Canary { steps } => steps,
        Strategy::BlueGreen { .. } => {
            // Argo's blue/green: preview, its analysis, the wait, the switch, its analysis.
            if canary_service != stable_service {
                out.push(format!("preview {canary_service}"));
            } else {
                out.push("preview".to_string());
            }
            let pre = templates(true, 0);
            if !pre.is_empty() {
                out.push(format!("prePromotionAnalysis {pre}"));
            }
            out.push(if canary.analysis.approvals.before_promotion {
                "pause until approved".to_string()
            } else {
                format!("pause {}s", canary.analysis.interval.as_secs())
            });
            out.push(format!("switch {stable_service}"));
            let post = templates(true, 1);
            if !post.is_empty() {
                out.push(format!("postPromotionAnalysis {post}"));
            }
            return out;
        }
        Strategy::AB { .. } => return Vec::new(),
    };
    let mut weight = 0;
    let mut last = 0;
    for (i, step) in (1u32..).zip(steps) {
        last = i;
        out.extend(scale_words(i, false));
        // A step at the weight of the one before holds an analysis or a pause that Argo runs
        // after it: no setWeight of its own (nor one at weight 0 holding what Argo runs before
        // its first setWeight, unless that is `setWeight: 0`).
        if step.weight != weight || (i == 1 && *set_weight_zero) {
            out.push(format!("setWeight {}", step.weight));
            weight = step.weight;
        }
        out.extend(scale_words(i, true));
        let background = templates(false, i);
        if !background.is_empty() {
            out.push(format!("background analysis {background}"));
        }
        out.extend(
            managed_routes
                .iter()
                .filter(|m| m.step == i)
                .map(|m| m.words.clone()),
        );
        // An experiment's analyses and duration are its own: its words hold them.
        if let Some(e) = experiments.iter().find(|e| e.step == i) {
            out.push(e.words());
            continue;
        }
        let inline = templates(true, i);
        if !inline.is_empty() {
            out.push(format!("analysis {inline}"));
        }
        out.extend(pause_word(step.pause));
    }
    // A setCanaryScale after the last step's pause: Argo applies it on its way to promotion.
    out.extend(
        scales
            .iter()
            .filter(|s| s.step > last)
            .map(|s| scale_word(s.scale)),
    );
    out
}

/// A step's pause in plan words; `None` for one check interval (no pause step of Argo's).
fn pause_word(pause: crate::core::schedule::Pause) -> Option<String> {
    use crate::core::schedule::Pause;
    match pause {
        Pause::Interval => None,
        Pause::For(d) => Some(format!("pause {}s", d.as_secs())),
        Pause::Approval => Some("pause until approved".to_string()),
    }
}

/// A `setCanaryScale` step in plan words.
fn scale_word(scale: crate::core::argo_replicas::CanaryScale) -> String {
    use crate::core::argo_replicas::CanaryScale;
    match scale {
        CanaryScale::Weight(w) => format!("setCanaryScale weight {w}"),
        CanaryScale::Replicas(n) => format!("setCanaryScale replicas {n}"),
        CanaryScale::MatchTrafficWeight => "setCanaryScale matchTrafficWeight".to_string(),
    }
}

/// A Rollout without trafficRouting: for each `setWeight`, the `(weight, canary, stable)`
/// pod counts its workloads run (Argo's split); empty for other canaries.
pub fn rollout_replicas(canary: &crate::manifest::model::Canary) -> Vec<(u8, u32, u32)> {
    use crate::manifest::model::{Strategy, Target};
    let (
        Target::Rollout {
            replica_canary: Some(replica),
            set_weight_zero,
            ..
        },
        Strategy::Canary { steps },
    ) = (&canary.target, &canary.analysis.strategy)
    else {
        return Vec::new();
    };
    // A step at the weight of the one before (a pause or analysis Argo runs after it) has
    // the same split: one entry per setWeight, as Argo scales. Steps at weight 0 before the
    // first setWeight (unless it is `setWeight: 0`) run before any.
    let mut out: Vec<(u8, u32, u32)> = Vec::new();
    for s in steps {
        let before_first = out.is_empty() && s.weight == 0 && !*set_weight_zero;
        if before_first || out.last().is_some_and(|(w, _, _)| *w == s.weight) {
            continue;
        }
        let (c, st) = replica.split.at(s.weight);
        out.push((s.weight, c, st));
    }
    out
}

/// A routed Rollout with `setCanaryScale` steps or `dynamicStableScale`: for each step, the
/// `(weight, canary, stable)` pod counts its workloads run there (one entry where the counts
/// change); empty for other canaries.
pub fn rollout_scale(canary: &crate::manifest::model::Canary) -> Vec<(u8, u32, u32)> {
    use crate::manifest::model::{Strategy, Target};
    let (
        Target::Rollout {
            scale: Some(scale), ..
        },
        Strategy::Canary { steps },
    ) = (&canary.target, &canary.analysis.strategy)
    else {
        return Vec::new();
    };
    let replicas = i64::from(scale.replicas);
    let mut out: Vec<(u8, u32, u32)> = Vec::new();
    for (i, s) in (1u32..).zip(steps) {
        let at_weight = crate::workload::rollout::canary_replicas(replicas, s.weight, true);
        let canary = scale
            .canary(i)
            .unwrap_or(u32::try_from(at_weight).unwrap_or(0));
        let counts = (s.weight, canary, scale.stable(i, s.weight));
        if out.last() != Some(&counts) {
            out.push(counts);
        }
    }
    out
}

/// The replica counts `sluice plan` shows: the replica-based split, or a routed Rollout's
/// scale.
fn replica_counts(canary: &crate::manifest::model::Canary) -> Vec<(u8, u32, u32)> {
    let split = rollout_replicas(canary);
    if split.is_empty() {
        rollout_scale(canary)
    } else {
        split
    }
}

fn print_plan(p: &Simulation, rollout_steps: &[String], replicas: &[(u8, u32, u32)]) {
    outln!("{}/{} ({})", p.namespace, p.name, p.strategy);
    if !rollout_steps.is_empty() {
        outln!("  rollout steps:      {}", rollout_steps.join(", "));
    }
    if !replicas.is_empty() {
        let split: Vec<String> = replicas
            .iter()
            .map(|(w, c, s)| format!("{w}%: {c} canary + {s} stable"))
            .collect();
        outln!("  replica split:      {}", split.join(", "));
    }
    if let Some(i) = p.iterations {
        outln!("  iterations:         {i}");
    }
    outln!("  canary weights:     {}", list(&p.canary_weights));
    outln!(
        "  promotion (primary): {}",
        list(&p.promotion_primary_weights)
    );
    if p.approvals.is_empty() {
        outln!("  approvals:          none");
    } else {
        outln!("  approvals:          {}", p.approvals.join(", "));
    }
    outln!("  minimum duration:   {}s", p.min_duration_seconds);
    outln!("  events:");
    for e in &p.events {
        outln!("    {e}");
    }
}

#[cfg(test)]
mod tests {
    //! How the Rollout reader places `setWeight: 0` and the steps before the first
    //! `setWeight`, and the plan's words for them.

    use crate::core::schedule::Pause;
    use crate::manifest::model::Strategy;

    /// A Rollout without trafficRouting (4 pods), with `steps` (indented eight spaces).
    fn read(steps: &str) -> crate::manifest::load::Loaded {
        let text = format!(
            "apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {{name: web, namespace: prod}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: web:1}}]
  strategy:
    canary:
      steps:
{steps}"
        );
        let settings = crate::manifest::settings::Settings::default();
        crate::manifest::load::load_text("apps/web.yaml", &text, &settings)
    }

    /// The schedule's `(weight, pause)` steps.
    fn schedule(loaded: &crate::manifest::load::Loaded) -> Vec<(u8, Pause)> {
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        let Strategy::Canary { steps } = &loaded.canaries[0].analysis.strategy else {
            panic!("a canary strategy");
        };
        steps.iter().map(|s| (s.weight, s.pause)).collect()
    }

    /// Argo's `setWeight: 0` first (istio-host-split-update-in-middle): a step at weight 0 that
    /// the plan names, with its pause and its replica split (no canary pods).
    #[test]
    fn a_first_set_weight_zero_is_a_step_at_weight_zero() {
        let loaded = read("        - setWeight: 0\n        - pause: {}\n        - setWeight: 50\n");
        assert_eq!(
            schedule(&loaded),
            [(0, Pause::Approval), (50, Pause::Interval)]
        );
        let canary = &loaded.canaries[0];
        assert_eq!(
            super::rollout_steps(canary),
            ["setWeight 0", "pause until approved", "setWeight 50"]
        );
        assert_eq!(super::rollout_replicas(canary), [(0, 0, 4), (50, 2, 2)]);
    }

    /// An experiment before the first `setWeight` is a step of its own at weight 0, where Argo
    /// runs it; the plan has no `setWeight 0` for it, nor a replica split. A `setWeight: 0`
    /// after a step at weight 0 is refused, as weights must increase.
    #[test]
    fn steps_before_the_first_set_weight_stand_at_weight_zero_without_a_set_weight() {
        let loaded = read("        - experiment:\n            duration: 30s\n            templates: [{name: preview, specRef: canary}]\n        - setWeight: 50\n");
        assert_eq!(
            schedule(&loaded),
            [
                (0, Pause::For(std::time::Duration::from_secs(30))),
                (50, Pause::Interval)
            ]
        );
        let canary = &loaded.canaries[0];
        assert_eq!(
            super::rollout_steps(canary),
            ["experiment preview:canary", "setWeight 50"]
        );
        assert_eq!(super::rollout_replicas(canary), [(50, 2, 2)]);
        let loaded = read("        - setWeight: 0\n        - pause: {}\n        - setWeight: 0\n");
        assert!(
            loaded.errors.iter().any(|e| e
                .to_string()
                .contains("expected a weight above the previous step's 0, found 0")),
            "{:?}",
            loaded.errors
        );
        let loaded = read("        - setWeight: 20\n        - setWeight: 0\n");
        assert!(
            !loaded.errors.is_empty(),
            "a weight going back to 0 is refused"
        );
    }
}
