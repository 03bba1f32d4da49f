//! Reads a Rollout's `strategy.blueGreen`, as Argo Rollouts runs it (`rollout/bluegreen.go`,
//! `rollout/service.go`), into sluice's blue/green strategy with one iteration:
//!
//! - the new pod template runs as the canary workload (`<rollout>-canary`, Argo's preview
//!   ReplicaSet) with `previewReplicaCount` pods (all of `replicas` without it), selected by
//!   the `previewService`; the `activeService` keeps selecting the stable workload;
//! - `prePromotionAnalysis` gates the switch (measured while the preview runs: the first step);
//! - `autoPromotionEnabled: false` waits for approval before the switch (sluice's approval
//!   pull request, `sluice promote`); `autoPromotionSeconds` holds the preview that long
//!   (sluice's check interval for this Rollout); without either, the preview holds one
//!   check interval (`rollout::STEP_INTERVAL`, passed in);
//! - the switch (the `activeService` selects the canary workload, now at full scale) is the
//!   second step, which `postPromotionAnalysis` gates: a failure there aborts, and the
//!   `activeService` selects the stable workload again, which still runs the old pods;
//! - then the stable workload takes the new template and, once it is ready, the
//!   `activeService` selects it again and the canary workload scales to zero.
//!
//! The `activeService` and `previewService` selectors are rendered by `workload::rollout`.
//! Reads; decides nothing.

use std::time::Duration;

use crate::core::model::ArgoGate;
use crate::manifest::model::{Approvals, Name};
use crate::manifest::rollout_analysis::{read_gates, Found};
use crate::manifest::rollout_lookup::{named_service, refuse_and_ignore, Lookup};
use crate::yaml::node::Node;
use crate::yaml::reader::{join, Reader};

const AT: &str = "spec.strategy.blueGreen";

const KEYS: &[&str] = &[
    "activeService",
    "previewService",
    "previewReplicaCount",
    "autoPromotionEnabled",
    "autoPromotionSeconds",
    "maxUnavailable",
    "scaleDownDelaySeconds",
    "scaleDownDelayRevisionLimit",
    "abortScaleDownDelaySeconds",
    "antiAffinity",
    "prePromotionAnalysis",
    "postPromotionAnalysis",
    "previewMetadata",
    "activeMetadata",
];

/// blueGreen fields refused, and why.
const REFUSED: &[(&str, &str)] = &[
    ("antiAffinity", "anti-affinity between the preview and the active pods is not in this build; remove it, or keep this Rollout on Argo Rollouts for now"),
];

/// blueGreen fields that change nothing sluice writes, and why they are ignored.
const IGNORED: &[(&str, &str)] = &[
    ("scaleDownDelaySeconds", "ignored: git cannot time a scale-down after the switch; the old pods keep running (the stable workload) until the promotion's rolling update replaces them, at least one check interval after the switch, and an abort after the switch selects them again"),
    ("scaleDownDelayRevisionLimit", "ignored: no old ReplicaSets are kept (see scaleDownDelaySeconds)"),
    ("abortScaleDownDelaySeconds", "ignored: on abort sluice scales the preview (canary) workload to zero in the rollback commit"),
    ("maxUnavailable", "ignored: the stable workload is a Deployment, whose own rolling update (maxUnavailable 25 %) applies when it takes the promoted template"),
];

/// Argo's ephemeral pod metadata, rendered into the pod templates.
const METADATA: [(&str, &str); 2] = [
    ("previewMetadata", "the canary (preview) workload's"),
    ("activeMetadata", "the stable (active) workload's"),
];

/// What `strategy.blueGreen` says, read.
pub struct BlueGreen {
    pub active: Name,
    pub preview: Option<Name>,
    /// The active Service's first port.
    pub port: u16,
    pub approvals: Approvals,
    /// How long the preview holds before the switch (and sluice's check interval).
    pub interval: Duration,
    pub gates: Vec<ArgoGate>,
}

/// Reads `strategy.blueGreen` (`bg`) of the Rollout `root`.
pub fn read(
    r: &mut Reader,
    root: &Node,
    bg: &Node,
    lookup: Lookup,
    step_interval: Duration,
) -> Option<BlueGreen> {
    r.map(bg, AT, KEYS)?;
    refuse_and_ignore(r, bg, AT, REFUSED, IGNORED);
    for (key, whose) in METADATA {
        if let Some(n) = bg.get(key) {
            let at = join(AT, key);
            if r.map(n, &at, &["labels", "annotations"]).is_some() {
                r.warn(n.line, &at, format!("Argo sets these on the pods at run time; sluice writes them into {whose} pod template, so a change to them restarts its pods, and the preview pods keep previewMetadata after the switch until the promotion ends"));
            }
        }
    }
    let active = r
        .required(bg, AT, "activeService")
        .and_then(|n| named_service(r, n, &join(AT, "activeService"), lookup));
    let preview = bg
        .get("previewService")
        .map(|n| (n, named_service(r, n, &join(AT, "previewService"), lookup)));
    if let (Some((a, _)), Some((n, Some((p, _))))) = (&active, &preview) {
        if a == p {
            r.error(
                n.line,
                &join(AT, "previewService"),
                format!("expected a Service other than the activeService, found {a} twice (Argo refuses it too: Preview service and Active service cannot be the same)"),
            );
        }
    }
    if let Some(n) = bg.get("previewReplicaCount") {
        r.int(n, &join(AT, "previewReplicaCount"), 1, i64::from(i32::MAX));
    }
    let auto = bg
        .get("autoPromotionEnabled")
        .and_then(|n| r.bool(n, &join(AT, "autoPromotionEnabled")))
        .unwrap_or(true);
    let mut interval = step_interval;
    if let Some(n) = bg.get("autoPromotionSeconds") {
        let at = join(AT, "autoPromotionSeconds");
        let seconds = r.int(n, &at, 0, i64::from(i32::MAX));
        if !auto {
            r.warn(n.line, &at, "ignored with autoPromotionEnabled: false (as Argo ignores it): the switch waits for approval");
        } else if let Some(s) = seconds.and_then(|s| u64::try_from(s).ok()) {
            if s > 0 {
                interval = Duration::from_secs(s);
            }
        }
    }
    let mut found = Vec::new();
    for (key, step) in [("prePromotionAnalysis", 0), ("postPromotionAnalysis", 1)] {
        if let Some(n) = bg.get(key) {
            found.push(Found {
                at: join(AT, key),
                node: n.clone(),
                step,
                inline: true,
                experiment: false,
            });
        }
    }
    let gates = read_gates(r, root, lookup.namespace, lookup.snapshot, &found);
    let (active, port) = active?;
    let preview = match preview {
        Some((_, found)) => Some(found?.0),
        None => None,
    };
    Some(BlueGreen {
        active,
        preview,
        port,
        approvals: Approvals {
            before_promotion: !auto,
            ..Approvals::default()
        },
        interval,
        gates,
    })
}
