//! An Argo Rollouts `experiment` step, as sluice runs it in git: while the rollout stands at
//! the step, one workload per template (the stable or the canary pod template, the template's
//! replicas) runs beside the stable and canary workloads; the step's analyses gate it as an
//! inline analysis does; once the rollout leaves the step (the next step, a promotion, an
//! abort) the workloads are gone.
//!
//! Which experiment runs at a status is decided here; the adapters render its workloads and
//! remove those of an experiment that no longer runs. Nothing here reads YAML or writes files.

use crate::status::{Phase, Status};

/// The pod template an experiment template runs (`specRef`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecRef {
    Stable,
    Canary,
}

impl SpecRef {
    /// Argo's word for it.
    pub fn word(self) -> &'static str {
        match self {
            SpecRef::Stable => "stable",
            SpecRef::Canary => "canary",
        }
    }
}

/// One template of an experiment: a workload of `spec_ref`'s pod template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentTemplate {
    /// The template's `name`, unique in the step (a DNS label: it names the workload).
    pub name: String,
    pub spec_ref: SpecRef,
    pub replicas: u32,
    /// The share of traffic Argo routes to the template's Service; `None` when it takes none.
    pub weight: Option<u8>,
    /// Whether the template runs a Service of its own (`service`, or a `weight`).
    pub service: bool,
}

/// One `experiment` step: the sluice step (1-based, as `Status::step`) it runs at, its
/// templates, and the names of its analyses (for the plan's words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentStep {
    pub step: u32,
    pub templates: Vec<ExperimentTemplate>,
    /// The analyses' `name`s, in order.
    pub analyses: Vec<String>,
}

impl ExperimentStep {
    /// The step in `sluice plan`'s words: `experiment baseline:stable,canary:canary@20
    /// analyses load-test`.
    pub fn words(&self) -> String {
        let templates: Vec<String> = self
            .templates
            .iter()
            .map(|t| match t.weight {
                Some(w) => format!("{}:{}@{w}", t.name, t.spec_ref.word()),
                None => format!("{}:{}", t.name, t.spec_ref.word()),
            })
            .collect();
        let mut out = format!("experiment {}", templates.join(","));
        if !self.analyses.is_empty() {
            out.push_str(" analyses ");
            out.push_str(&self.analyses.join(" + "));
        }
        out
    }
}

/// The experiment whose workloads run at `status`: the one at the rollout's current step
/// while the rollout is in progress at it (holding, measuring, or waiting for approval to go
/// on). Anything else (before it, after it, promoted, rolled back) runs none, so an abort
/// removes them with the rollback, as Argo terminates the Experiment when it aborts.
pub fn running_at<'a>(steps: &'a [ExperimentStep], status: &Status) -> Option<&'a ExperimentStep> {
    let in_progress = match status.phase {
        Phase::Progressing | Phase::WaitingApproval => true,
        Phase::Initializing
        | Phase::Initialized
        | Phase::Waiting
        | Phase::Promoting
        | Phase::Finalising
        | Phase::Succeeded
        | Phase::Failed => false,
    };
    if !in_progress {
        return None;
    }
    steps.iter().find(|e| e.step == status.step)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn experiment(step: u32) -> ExperimentStep {
        ExperimentStep {
            step,
            templates: vec![
                ExperimentTemplate {
                    name: "baseline".into(),
                    spec_ref: SpecRef::Stable,
                    replicas: 1,
                    weight: None,
                    service: false,
                },
                ExperimentTemplate {
                    name: "canary".into(),
                    spec_ref: SpecRef::Canary,
                    replicas: 2,
                    weight: Some(20),
                    service: true,
                },
            ],
            analyses: vec!["load-test".into(), "errors".into()],
        }
    }

    fn at(phase: Phase, step: u32) -> Status {
        Status {
            phase,
            step,
            canary_weight: 20,
            primary_weight: 80,
            failed_checks: 0,
            iterations: 0,
            promoted_revision: "a".into(),
            canary_revision: Some("b".into()),
            stable_service: None,
            waiting_for: None,
            phase_since: jiff::Timestamp::UNIX_EPOCH,
            step_started: jiff::Timestamp::UNIX_EPOCH,
            last_failed_check: None,
            checks: Vec::new(),
            message: String::new(),
            paused: false,
            clock_from_merge: false,
            session_cookie: None,
            previous_session_cookie: None,
            primary_session_cookie: None,
            mirroring: false,
            drift: Vec::new(),
            waiting_since: None,
            analysis: Vec::new(),
            rolled_out: Vec::new(),
        }
    }

    #[test]
    fn the_experiment_runs_only_while_the_rollout_stands_at_its_step() {
        let steps = [experiment(2)];
        for (phase, step, runs) in [
            (Phase::Progressing, 1, false),
            (Phase::Progressing, 2, true),
            (Phase::WaitingApproval, 2, true),
            (Phase::Progressing, 3, false),
            (Phase::Promoting, 2, false),
            (Phase::Finalising, 2, false),
            (Phase::Succeeded, 2, false),
            (Phase::Failed, 2, false),
            (Phase::Initialized, 2, false),
            (Phase::Waiting, 2, false),
        ] {
            assert_eq!(
                running_at(&steps, &at(phase, step)).is_some(),
                runs,
                "{phase:?} at step {step}"
            );
        }
    }

    #[test]
    fn each_experiment_runs_at_its_own_step() {
        let steps = [experiment(2), experiment(4)];
        let found = running_at(&steps, &at(Phase::Progressing, 4)).map(|e| e.step);
        assert_eq!(found, Some(4));
        assert!(running_at(&[], &at(Phase::Progressing, 2)).is_none());
    }

    #[test]
    fn words_name_each_template_its_spec_its_weight_and_the_analyses() {
        assert_eq!(
            experiment(1).words(),
            "experiment baseline:stable,canary:canary@20 analyses load-test + errors"
        );
        let mut bare = experiment(1);
        bare.analyses.clear();
        bare.templates.truncate(1);
        assert_eq!(bare.words(), "experiment baseline:stable");
    }
}
