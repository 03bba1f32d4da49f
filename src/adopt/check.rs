//! `sluice adopt check`: whether it is safe to go on with the switch from Flagger, decided
//! over facts observed beforehand (the repo and the cluster). Pure: no IO; the CLI
//! (`crate::cli::adopt_check`) gathers the facts and prints what this returns.
//!
//! The runbook, in order: 1. merge the adoption change with sluice running and holding
//! (`adoption.hold`), 2. scale Flagger to 0, 3. delete each Canary with `--cascade=orphan`,
//! 4. remove Flagger, 5. release the hold. Each step is safe only on what the earlier ones
//! left: sluice's first render committed and live (the primary Deployment has sluice's pod
//! template and is available) before Flagger stops, Flagger stopped before a Canary is
//! deleted, every primary left in place with no owner reference to a Canary before Flagger
//! (and its CRD, whose deletion would collect what a Canary still owns) goes.

use serde_json::Value as Json;

/// Everything the check looks at.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// `adoption.hold` is set in the repo settings at the branch's head.
    pub hold: bool,
    /// Flagger's Deployment, as named (`NS/NAME`), and what the cluster has of it.
    pub flagger: (String, Option<Scale>),
    pub canaries: Vec<CanaryObserved>,
}

/// A Deployment's replicas: wanted (`spec.replicas`) and running (`status.replicas`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub wanted: i64,
    pub running: i64,
}

/// One canary of the repo, its first render and what the cluster has.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryObserved {
    /// `NS/NAME`.
    pub id: String,
    /// The primary Deployment's name (`<target>-primary`).
    pub primary: String,
    /// The pod template of the primary sluice committed (its output folder), `None` when
    /// sluice has committed no first render for the canary yet.
    pub rendered: Option<Json>,
    /// The primary Deployment in the cluster, `None` when there is none.
    pub live: Option<LivePrimary>,
    /// The Flagger Canary object still exists in the cluster.
    pub canary_live: bool,
    /// Objects of the canary (the primary and its Services) whose ownerReferences still name
    /// a Canary, as `Kind NAME`.
    pub owned: Vec<String>,
}

/// The live primary Deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct LivePrimary {
    pub template: Json,
    /// `status.availableReplicas >= spec.replicas` and the `Available` condition is `True`.
    pub available: bool,
}

/// A step of the runbook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    Merge,
    ScaleFlagger,
    DeleteCanaries,
    RemoveFlagger,
    Release,
    Done,
}

impl Step {
    /// What the operator does at this step, with the commands for what `o` names.
    pub fn what(self, o: &Observed) -> String {
        match self {
            Step::Merge => "merge the adoption change with sluice running (it holds at the first render) and wait for the GitOps engine to apply it".into(),
            Step::ScaleFlagger => {
                let (ns, name) = o.flagger.0.split_once('/').unwrap_or(("flagger-system", "flagger"));
                format!("scale Flagger to 0: kubectl -n {ns} scale deployment {name} --replicas=0")
            }
            Step::DeleteCanaries => {
                let commands: Vec<String> = o
                    .canaries
                    .iter()
                    .filter(|c| c.canary_live)
                    .map(|c| {
                        let (ns, name) = c.id.split_once('/').unwrap_or(("default", &c.id));
                        format!("kubectl -n {ns} delete canary {name} --cascade=orphan")
                    })
                    .collect();
                format!("delete each Canary, leaving its objects: {}", commands.join("; "))
            }
            Step::RemoveFlagger => "remove Flagger (its Deployment, then its CRDs)".into(),
            Step::Release => "release the hold: sluice adopt release".into(),
            Step::Done => "nothing: the switch is done".into(),
        }
    }
}

/// One line of the answer: what was checked, whether it holds, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub ok: bool,
    pub text: String,
}

/// The answer: every line checked, the next step, and whether it is safe to take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub lines: Vec<Line>,
    pub next: Step,
    pub safe: bool,
}

/// Decides whether it is safe to go on, and with which step.
pub fn check(o: &Observed) -> Answer {
    let mut lines = Vec::new();
    let mut line = |ok: bool, text: String| {
        lines.push(Line { ok, text });
        ok
    };
    let hold = line(
        o.hold,
        if o.hold {
            "adoption.hold is set: sluice keeps each canary at its first render".into()
        } else {
            "adoption.hold is not set in .sluice/config.yaml: sluice may start a rollout while Flagger still acts; set it again (or, if the switch is done, there is nothing to check)".into()
        },
    );
    let mut rendered = true;
    let mut live = true;
    let mut deleted = true;
    let mut kept = true;
    for c in &o.canaries {
        let id = &c.id;
        let Some(template) = &c.rendered else {
            rendered = line(
                false,
                format!("{id}: no first render committed yet: merge the adoption change and let sluice run"),
            ) && rendered;
            live = false;
            continue;
        };
        line(true, format!("{id}: first render committed"));
        live = primary_lines(c, template, &mut line) && live;
        if c.canary_live {
            deleted = false;
            line(
                true,
                format!("{id}: Flagger's Canary is still in the cluster"),
            );
        } else {
            let present = c.live.is_some();
            let orphaned = c.owned.is_empty();
            line(
                present && orphaned,
                match (present, orphaned) {
                    (true, true) => format!("{id}: Canary deleted, {} left in place with no owner", c.primary),
                    (false, _) => format!("{id}: Canary deleted and {} is gone: it was not deleted with --cascade=orphan; apply sluice's output again before going on", c.primary),
                    (true, false) => format!("{id}: Canary deleted but {} still owned by it: the garbage collector will delete them; delete Canaries with --cascade=orphan", c.owned.join(", ")),
                },
            );
            kept = kept && present && orphaned;
        }
    }
    let (flagger, scale) = &o.flagger;
    let stopped = match scale {
        None => line(true, format!("Flagger {flagger}: not in the cluster (removed; give --flagger NS/NAME if it runs elsewhere)")),
        Some(s) => {
            let stopped = s.wanted == 0 && s.running == 0;
            // Running is what the first steps expect: only a switch past them needs it stopped.
            let expected = stopped || (rendered && live && deleted);
            line(
                !expected || stopped,
                format!("Flagger {flagger}: {} wanted, {} running", s.wanted, s.running),
            );
            stopped
        }
    };
    let all_deleted = deleted && !o.canaries.is_empty();
    let next = if !rendered || !live {
        Step::Merge
    } else if !stopped {
        Step::ScaleFlagger
    } else if !all_deleted {
        Step::DeleteCanaries
    } else if scale.is_some() {
        Step::RemoveFlagger
    } else if o.hold {
        Step::Release
    } else {
        Step::Done
    };
    // Nothing is safe before the first render is live everywhere, and a Canary deleted out of
    // order must have left its objects.
    let safe = (hold || next == Step::Done) && rendered && live && kept && !o.canaries.is_empty();
    Answer { lines, next, safe }
}

/// The lines about `c`'s live primary against sluice's `template`; true when it runs the
/// template and is available.
fn primary_lines(
    c: &CanaryObserved,
    template: &Json,
    line: &mut impl FnMut(bool, String) -> bool,
) -> bool {
    let id = &c.id;
    let Some(p) = &c.live else {
        return line(false, format!("{id}: {} is not in the cluster", c.primary));
    };
    let differs = differences(template, &p.template, "spec.template");
    let same = line(
        differs.is_empty(),
        if differs.is_empty() {
            format!("{id}: {} runs sluice's pod template", c.primary)
        } else {
            format!(
                "{id}: {} does not run sluice's pod template yet (wait for the GitOps engine to apply it; if it stays, sluice's render would restart the pods): {}",
                c.primary,
                differs.join("; ")
            )
        },
    );
    let state = if p.available {
        "available"
    } else {
        "not available"
    };
    let available = line(p.available, format!("{id}: {} is {state}", c.primary));
    same && available
}

/// Where `live` differs from `rendered`: every field sluice renders must be there with the
/// same value (lists element by element, of the same length); fields the API server defaults
/// (`imagePullPolicy`, `terminationMessagePath`, ...) and annotations Flagger adds at runtime
/// (`flagger-id`) may be there beyond them: a GitOps apply keeps fields it does not own.
pub fn differences(rendered: &Json, live: &Json, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    walk(rendered, live, at, &mut out);
    out
}

fn walk(rendered: &Json, live: &Json, at: &str, out: &mut Vec<String>) {
    match (rendered, live) {
        (Json::Object(r), Json::Object(l)) => {
            for (key, value) in r {
                let here = format!("{at}.{key}");
                match l.get(key) {
                    Some(found) => walk(value, found, &here, out),
                    None if is_empty(value) => {}
                    None => out.push(format!(
                        "{here}: sluice renders {value}, the cluster has none"
                    )),
                }
            }
        }
        (Json::Array(r), Json::Array(l)) if r.len() == l.len() => {
            for (i, (a, b)) in r.iter().zip(l).enumerate() {
                walk(a, b, &format!("{at}[{i}]"), out);
            }
        }
        (Json::Array(r), Json::Array(l)) => out.push(format!(
            "{at}: sluice renders {} items, the cluster has {}",
            r.len(),
            l.len()
        )),
        (a, b) if same_scalar(a, b) => {}
        (a, b) => out.push(format!("{at}: sluice renders {a}, the cluster has {b}")),
    }
}

/// `{}`, `[]` and null: what an API server leaves out.
fn is_empty(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Object(m) => m.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Bool(_) | Json::Number(_) | Json::String(_) => false,
    }
}

/// Equal, or the same number written as text (`"9898"` beside `9898` in a port) is not:
/// only exact JSON equality counts, but integers compare by value (`1` and `1.0`).
fn same_scalar(a: &Json, b: &Json) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(image: &str) -> Json {
        json!({"metadata": {"labels": {"app": "podinfo-primary"}},
               "spec": {"containers": [{"name": "podinfod", "image": image, "ports": [{"containerPort": 9898}]}]}})
    }

    fn live(image: &str) -> Json {
        json!({"metadata": {"labels": {"app": "podinfo-primary"}, "annotations": {"flagger-id": "x"}},
               "spec": {"containers": [{"name": "podinfod", "image": image, "imagePullPolicy": "IfNotPresent",
                                        "ports": [{"containerPort": 9898, "protocol": "TCP"}]}],
                        "restartPolicy": "Always"}})
    }

    fn canary(
        rendered: bool,
        primary: Option<&str>,
        canary_live: bool,
        owned: &[&str],
    ) -> CanaryObserved {
        CanaryObserved {
            id: "prod/podinfo".into(),
            primary: "podinfo-primary".into(),
            rendered: rendered.then(|| template("podinfo:6.7.0")),
            live: primary.map(|image| LivePrimary {
                template: live(image),
                available: true,
            }),
            canary_live,
            owned: owned.iter().map(ToString::to_string).collect(),
        }
    }

    fn observed(hold: bool, flagger: Option<(i64, i64)>, c: CanaryObserved) -> Observed {
        Observed {
            hold,
            flagger: (
                "flagger-system/flagger".into(),
                flagger.map(|(wanted, running)| Scale { wanted, running }),
            ),
            canaries: vec![c],
        }
    }

    #[test]
    fn defaults_and_runtime_annotations_are_not_differences() {
        assert!(differences(&template("a"), &live("a"), "t").is_empty());
        assert_eq!(
            differences(&template("a"), &live("b"), "t"),
            ["t.spec.containers[0].image: sluice renders \"a\", the cluster has \"b\""]
        );
    }

    #[test]
    fn each_step_in_order() {
        let owned = ["Deployment podinfo-primary"];
        let cases = [
            (
                observed(
                    true,
                    Some((1, 1)),
                    canary(false, Some("podinfo:6.7.0"), true, &owned),
                ),
                Step::Merge,
                false,
            ),
            (
                observed(
                    true,
                    Some((1, 1)),
                    canary(true, Some("podinfo:6.6.0"), true, &owned),
                ),
                Step::Merge,
                false,
            ),
            (
                observed(
                    true,
                    Some((1, 1)),
                    canary(true, Some("podinfo:6.7.0"), true, &owned),
                ),
                Step::ScaleFlagger,
                true,
            ),
            (
                observed(
                    true,
                    Some((0, 1)),
                    canary(true, Some("podinfo:6.7.0"), true, &owned),
                ),
                Step::ScaleFlagger,
                true,
            ),
            (
                observed(
                    true,
                    Some((0, 0)),
                    canary(true, Some("podinfo:6.7.0"), true, &owned),
                ),
                Step::DeleteCanaries,
                true,
            ),
            (
                observed(
                    true,
                    Some((0, 0)),
                    canary(true, Some("podinfo:6.7.0"), false, &owned),
                ),
                Step::RemoveFlagger,
                false,
            ),
            (
                observed(true, Some((0, 0)), canary(true, None, false, &[])),
                Step::Merge,
                false,
            ),
            (
                observed(
                    true,
                    Some((0, 0)),
                    canary(true, Some("podinfo:6.7.0"), false, &[]),
                ),
                Step::RemoveFlagger,
                true,
            ),
            (
                observed(true, None, canary(true, Some("podinfo:6.7.0"), false, &[])),
                Step::Release,
                true,
            ),
            (
                observed(false, None, canary(true, Some("podinfo:6.7.0"), false, &[])),
                Step::Done,
                true,
            ),
            (
                observed(
                    false,
                    Some((1, 1)),
                    canary(true, Some("podinfo:6.7.0"), true, &owned),
                ),
                Step::ScaleFlagger,
                false,
            ),
        ];
        for (i, (o, next, safe)) in cases.into_iter().enumerate() {
            let a = check(&o);
            assert_eq!((a.next, a.safe), (next, safe), "case {i}: {a:#?}");
            if !safe {
                assert!(
                    a.lines.iter().any(|l| !l.ok),
                    "case {i}: nothing named: {a:#?}"
                );
            }
        }
    }
}
