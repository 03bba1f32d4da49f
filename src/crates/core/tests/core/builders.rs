//! Builders for `Canary<()>` (the core never looks at the route, so tests leave it `()`):
//! `canary().step_weight(10).max_weight(50).build()`. Schedules go through the same weight
//! arithmetic the spec readers use, so a built canary is one the loader could produce.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use sluice_core::decide::{decide, Decision};
use sluice_core::judge::JudgeSpec;
use sluice_core::model::{
    Alerts, Analysis, Approvals, ArgoGate, Canary, CanaryId, Format, MetricQuery, MetricSpec, Name,
    RepoPath, ServiceSpec, SessionAffinity, Strategy, SyncTarget, Target, ThresholdRange,
    WebhookKind, WebhookSpec,
};
use sluice_core::observe::Observations;
use sluice_core::schedule::{
    flagger_step_weight, flagger_step_weights, native_step_weight, Pause, Step,
};
use sluice_core::status::{Phase, Status};

/// A fixed clock: `t(0)` is 2023-11-14T22:13:20Z.
pub fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("a test time in range")
}

fn name(text: &str) -> Name {
    Name::parse(text).expect("a valid test name")
}

/// How the rollout walks, as a spec writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// `stepWeight` / `maxWeight`.
    StepWeight { step: u8, max: u8 },
    /// `stepWeights: [...]`.
    StepWeights(Vec<u8>),
    /// Native `steps:` with pauses.
    Steps(Vec<Step>),
    /// `iterations` without `match`.
    BlueGreen(u32),
    /// `iterations` with `match`.
    AB(u32),
}

#[derive(Debug, Clone)]
pub struct CanaryBuilder {
    format: Format,
    route_only: bool,
    schedule: Schedule,
    interval: Duration,
    threshold: u32,
    step_weight_promotion: Option<u8>,
    metrics: Vec<MetricSpec>,
    webhooks: Vec<WebhookSpec>,
    approvals: Approvals,
    skip_analysis: bool,
    rollback_window: u32,
    progress_deadline: Duration,
    settle: Duration,
    sync: bool,
    mirror: bool,
    session_cookie: Option<String>,
    primary_cookie: Option<String>,
    judge: Option<JudgeSpec>,
    argo: Vec<ArgoGate>,
}

/// A Flagger canary `podinfo.prod` walking 10, 20, ... 50 every 30 s, no checks, no gates.
pub fn canary() -> CanaryBuilder {
    CanaryBuilder {
        format: Format::Flagger,
        route_only: false,
        schedule: Schedule::StepWeight { step: 10, max: 50 },
        interval: Duration::from_secs(30),
        threshold: 2,
        step_weight_promotion: None,
        metrics: Vec::new(),
        webhooks: Vec::new(),
        approvals: Approvals::default(),
        skip_analysis: false,
        rollback_window: 0,
        progress_deadline: Duration::from_secs(600),
        settle: Duration::ZERO,
        sync: false,
        mirror: false,
        session_cookie: None,
        primary_cookie: None,
        judge: None,
        argo: Vec::new(),
    }
}

impl CanaryBuilder {
    /// A Rollout's analysis metric (inline step or background).
    pub fn argo(mut self, gate: ArgoGate) -> Self {
        self.argo.push(gate);
        self
    }

    /// `analysis.judge`: the statistical judge.
    pub fn judge(mut self, judge: JudgeSpec) -> Self {
        self.judge = Some(judge);
        self
    }

    /// `analysis.mirror: true`.
    pub fn mirror(mut self) -> Self {
        self.mirror = true;
        self
    }

    /// `analysis.sessionAffinity.cookieName`.
    pub fn session_affinity(mut self, cookie_name: &str) -> Self {
        self.session_cookie = Some(cookie_name.to_string());
        self
    }

    /// `analysis.sessionAffinity.primaryCookieName` (with `session_affinity`).
    pub fn primary_cookie(mut self, cookie_name: &str) -> Self {
        self.primary_cookie = Some(cookie_name.to_string());
        self
    }

    /// A native (`sluice.dev/v1alpha1`) canary: native weight arithmetic.
    pub fn native(mut self) -> Self {
        self.format = Format::Native;
        self
    }
    /// Route-only mode: the user owns both services; sluice swaps which one is stable.
    pub fn route_only(mut self) -> Self {
        self.route_only = true;
        self
    }
    pub fn step_weight(mut self, step: u8) -> Self {
        let max = match self.schedule {
            Schedule::StepWeight { max, .. } => max,
            _ => 100,
        };
        self.schedule = Schedule::StepWeight { step, max };
        self
    }
    pub fn max_weight(mut self, max: u8) -> Self {
        let step = match self.schedule {
            Schedule::StepWeight { step, .. } => step,
            _ => max,
        };
        self.schedule = Schedule::StepWeight { step, max };
        self
    }
    pub fn step_weights(mut self, weights: &[u8]) -> Self {
        self.schedule = Schedule::StepWeights(weights.to_vec());
        self
    }
    /// Native steps; `(weight, pause)` pairs with increasing weights.
    pub fn steps(mut self, steps: &[(u8, Pause)]) -> Self {
        self.schedule = Schedule::Steps(
            steps
                .iter()
                .map(|&(weight, pause)| Step { weight, pause })
                .collect(),
        );
        self
    }
    pub fn blue_green(mut self, iterations: u32) -> Self {
        self.schedule = Schedule::BlueGreen(iterations);
        self
    }
    pub fn ab(mut self, iterations: u32) -> Self {
        self.schedule = Schedule::AB(iterations);
        self
    }
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
    pub fn threshold(mut self, threshold: u32) -> Self {
        self.threshold = threshold;
        self
    }
    pub fn step_weight_promotion(mut self, step: Option<u8>) -> Self {
        self.step_weight_promotion = step;
        self
    }
    /// A metric judged against `range` (an inline query; the core never reads it).
    pub fn metric(mut self, metric: &str, range: ThresholdRange) -> Self {
        self.metrics.push(MetricSpec {
            name: metric.to_string(),
            query: MetricQuery::Query(format!("sum(rate({metric}[1m]))")),
            interval: None,
            range,
        });
        self
    }
    pub fn webhook(mut self, hook: &str, kind: WebhookKind) -> Self {
        self.webhooks.push(WebhookSpec {
            name: hook.to_string(),
            kind,
            url: format!("http://hooks.test/{hook}"),
            timeout: Duration::from_secs(10),
            retries: 0,
            metadata: BTreeMap::new(),
            disable_tls: false,
        });
        self
    }
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }
    /// `spec.rollbackWindow.revisions` of a Rollout.
    pub fn rollback_window(mut self, revisions: u32) -> Self {
        self.rollback_window = revisions;
        self
    }

    pub fn skip_analysis(mut self, skip: bool) -> Self {
        self.skip_analysis = skip;
        self
    }
    pub fn progress_deadline(mut self, deadline: Duration) -> Self {
        self.progress_deadline = deadline;
        self
    }
    pub fn settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }
    /// A Flux Kustomization reports when a commit is applied (no settle delay).
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    pub fn build(self) -> Canary<()> {
        let weights_to_steps = |weights: Vec<u8>| -> Vec<Step> {
            weights
                .into_iter()
                .map(|weight| Step {
                    weight,
                    pause: Pause::Interval,
                })
                .collect()
        };
        let strategy = match self.schedule {
            Schedule::StepWeight { step, max } => Strategy::Canary {
                steps: weights_to_steps(match self.format {
                    Format::Flagger => flagger_step_weight(step, max),
                    Format::Native => native_step_weight(step, max),
                }),
            },
            Schedule::StepWeights(weights) => {
                let capped: Vec<u8> = weights.iter().map(|w| (*w).min(100)).collect();
                Strategy::Canary {
                    steps: weights_to_steps(match self.format {
                        Format::Flagger => flagger_step_weights(&capped),
                        Format::Native => capped,
                    }),
                }
            }
            Schedule::Steps(steps) => Strategy::Canary { steps },
            Schedule::BlueGreen(iterations) => Strategy::BlueGreen { iterations },
            Schedule::AB(iterations) => Strategy::AB { iterations },
        };
        let target = if self.route_only {
            Target::RouteOnly {
                services: [name("podinfo-blue"), name("podinfo-green")],
                revision: "r0".to_string(),
            }
        } else {
            Target::TargetRef {
                kind: "Deployment".to_string(),
                name: name("podinfo"),
            }
        };
        Canary {
            id: CanaryId {
                namespace: name("prod"),
                name: name("podinfo"),
            },
            file: "apps/podinfo/canary.yaml".to_string(),
            line: 1,
            format: self.format,
            target,
            output: RepoPath::parse("clusters/prod/podinfo").expect("a valid test path"),
            service: ServiceSpec::new(name("podinfo"), 9898),
            route: (),
            analysis: Analysis {
                interval: self.interval,
                threshold: self.threshold,
                strategy,
                step_weight_promotion: self.step_weight_promotion,
                metrics: self.metrics,
                webhooks: self.webhooks,
                approvals: self.approvals,
                mirror: self.mirror,
                session_affinity: self.session_cookie.map(|cookie_name| SessionAffinity {
                    cookie_name,
                    primary_cookie_name: self.primary_cookie,
                }),
                alerts: Alerts::default(),
                primary_ready_threshold: 100,
                canary_ready_threshold: 100,
                judge: self.judge,
                argo: self.argo,
            },
            skip_analysis: self.skip_analysis,
            rollback_window: self.rollback_window,
            suspend: false,
            progress_deadline: self.progress_deadline,
            provider: None,
            metrics_server: None,
            settle: self.settle,
            sync: self.sync.then(|| SyncTarget::Flux {
                kustomization: name("apps"),
                namespace: name("flux-system"),
            }),
            autoscaler: None,
            revert_on_deletion: false,
            priority: 0,
            approval: None,
            adoption_hold: false,
            wave: None,
        }
    }
}

/// A canary that waits for approval before its rollout (`confirm-rollout`): initialized on
/// revision `r0` at `t(0)`, then waiting for `r1` from `t(10)`.
pub fn waiting_for_rollout() -> (Canary<()>, Status) {
    let c = canary()
        .approvals(Approvals {
            before_rollout: true,
            ..Approvals::default()
        })
        .build();
    let initialized = decide(&c, None, &Observations::revision("r0"), t(0)).status;
    let waiting = decide(&c, Some(&initialized), &Observations::revision("r1"), t(10)).status;
    (c, waiting)
}

/// Every committed decision of `revision`'s rollout from `status` at `start`, in a healthy
/// world, until the canary reaches `until` or is idle again (succeeded or failed); each
/// decision is taken at the time the last one asked.
pub fn walk_until(
    c: &Canary<()>,
    status: &Status,
    revision: &str,
    start: i64,
    until: Phase,
) -> Vec<Decision> {
    let obs = Observations::revision(revision);
    let mut status = status.clone();
    let mut now = t(start);
    let mut out = Vec::new();
    for _ in 0..200 {
        let d = decide(c, Some(&status), &obs, now);
        now = d.wake_at.unwrap_or(now).max(now);
        if d.commits() {
            status = d.status.clone();
            out.push(d);
            if status.phase == until || matches!(status.phase, Phase::Succeeded | Phase::Failed) {
                return out;
            }
        } else if d.wake_at.is_none() {
            return out;
        }
    }
    panic!("the rollout of {revision} did not reach {until:?}: {status:?}");
}
