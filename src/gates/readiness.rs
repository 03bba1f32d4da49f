//! Readiness: before a step counts, the canary Deployment or DaemonSet has rolled out (as Flagger's
//! `IsCanaryReady` checks), and the object the canary's router names for readiness
//! ([`crate::route::Router::readiness`]) is ready: for a Knative Service its canary revision
//! (Flagger's `KnativeController.IsCanaryReady`), for an HTTPRoute every parent Gateway has
//! accepted the route at its current generation. Read-only kube access; the judging functions
//! are pure.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value as Json;

use crate::manifest::model::{Canary, Target};
use crate::route::{ReadyCondition, Revisions};

/// Whether the canary's workload and route are ready, and why not (the core's type: it
/// weighs readiness into whether the last commit is live).
pub use crate::core::live::Readiness;

fn int(v: &Json) -> Option<i64> {
    v.as_i64()
}

/// The number of pods a ready threshold asks for, computed as Flagger computes it
/// (`isDeploymentReady`, `isDaemonSetReady`): `int32(float32(pods) * float32(threshold)/100)`,
/// single-precision and truncated toward zero, so 50 % of 3 pods is 1 and 70 % of 10 is 7.
pub fn ready_count(pods: i64, threshold_percent: u8) -> i64 {
    let ratio = f32::from(threshold_percent) / 100.0;
    // Pod counts are far below f32's exact-integer range; `as` truncates like Go's int32().
    (pods as f32 * ratio) as i64
}

/// Judges a Deployment object (as JSON) the way Flagger's `isDeploymentReady` does before
/// advancing: observed, every wanted replica updated, no old replica left, and at least
/// `threshold_percent` % of the updated replicas available (`primaryReadyThreshold` or
/// `canaryReadyThreshold`, 100 by default).
pub fn deployment_ready(obj: &Json, threshold_percent: u8) -> Readiness {
    let name = obj["metadata"]["name"].as_str().unwrap_or("deployment");
    let generation = int(&obj["metadata"]["generation"]).unwrap_or(0);
    let status = &obj["status"];
    let observed = int(&status["observedGeneration"]).unwrap_or(0);
    if observed < generation {
        return Readiness::NotReady(format!("{name}: waiting for the rollout to be observed (generation {generation}, observed {observed})"));
    }
    let wanted = int(&obj["spec"]["replicas"]).unwrap_or(1);
    let updated = int(&status["updatedReplicas"]).unwrap_or(0);
    let available = int(&status["availableReplicas"]).unwrap_or(0);
    let total = int(&status["replicas"]).unwrap_or(0);
    if updated < wanted {
        return Readiness::NotReady(format!(
            "{name}: {updated} of {wanted} new replicas updated"
        ));
    }
    if total > updated {
        return Readiness::NotReady(format!(
            "{name}: {} old replicas pending termination",
            total - updated
        ));
    }
    let needed = ready_count(updated, threshold_percent);
    if available < needed {
        return Readiness::NotReady(format!(
            "{name}: {available} of {needed} updated replicas available (readyThreshold {threshold_percent}%)"
        ));
    }
    Readiness::Ready
}

/// Judges a DaemonSet object (as JSON) the way Flagger's `isDaemonSetReady` does: observed,
/// every scheduled pod updated, and at least `threshold_percent` % of the scheduled pods
/// available.
pub fn daemonset_ready(obj: &Json, threshold_percent: u8) -> Readiness {
    let name = obj["metadata"]["name"].as_str().unwrap_or("daemonset");
    let generation = int(&obj["metadata"]["generation"]).unwrap_or(0);
    let status = &obj["status"];
    let observed = int(&status["observedGeneration"]).unwrap_or(0);
    if observed < generation {
        return Readiness::NotReady(format!("{name}: waiting for the rollout to be observed (generation {generation}, observed {observed})"));
    }
    let desired = int(&status["desiredNumberScheduled"]).unwrap_or(0);
    let updated = int(&status["updatedNumberScheduled"]).unwrap_or(0);
    let available = int(&status["numberAvailable"]).unwrap_or(0);
    if updated < desired {
        return Readiness::NotReady(format!("{name}: {updated} of {desired} new pods updated"));
    }
    let needed = ready_count(desired, threshold_percent);
    if available < needed {
        return Readiness::NotReady(format!(
            "{name}: {available} of {needed} updated pods available (readyThreshold {threshold_percent}%)"
        ));
    }
    Readiness::Ready
}

/// Judges a Knative Revision the way Flagger's `revision.IsReady()` does: its `Ready`
/// condition is `True`.
pub fn revision_ready(obj: &Json) -> Readiness {
    let name = obj["metadata"]["name"].as_str().unwrap_or("revision");
    let ready = obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    match ready {
        Some(c) if c["status"] == "True" => Readiness::Ready,
        Some(c) => Readiness::NotReady(format!(
            "Knative Revision {name} is not ready ({}: {})",
            c["reason"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        )),
        None => Readiness::NotReady(format!(
            "Knative Revision {name} reports no Ready condition yet"
        )),
    }
}

/// Judges an HTTPRoute: every parent reports `Accepted=True` for the current generation.
pub fn route_accepted(obj: &Json) -> Readiness {
    let name = obj["metadata"]["name"].as_str().unwrap_or("httproute");
    let generation = int(&obj["metadata"]["generation"]).unwrap_or(0);
    let parents = obj["status"]["parents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if parents.is_empty() {
        return Readiness::NotReady(format!("{name}: no Gateway reported on the route yet"));
    }
    for p in &parents {
        let gw = p["parentRef"]["name"].as_str().unwrap_or("gateway");
        let accepted = p["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Accepted"));
        match accepted {
            Some(c)
                if c["status"] == "True"
                    && int(&c["observedGeneration"]).unwrap_or(generation) >= generation => {}
            Some(c) => {
                return Readiness::NotReady(format!(
                    "{name}: Gateway {gw} has not accepted generation {generation} ({}: {})",
                    c["reason"].as_str().unwrap_or(""),
                    c["message"].as_str().unwrap_or("")
                ))
            }
            None => {
                return Readiness::NotReady(format!(
                    "{name}: Gateway {gw} reports no Accepted condition"
                ))
            }
        }
    }
    Readiness::Ready
}

async fn get(
    client: &kube::Client,
    gvk: GroupVersionKind,
    plural: &str,
    ns: &str,
    name: &str,
) -> Result<Option<Json>, String> {
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    match api.get_opt(name).await {
        Ok(Some(o)) => serde_json::to_value(o).map(Some).map_err(|e| e.to_string()),
        Ok(None) => Ok(None),
        Err(e) => Err(format!(
            "cannot read {} {ns}/{name}: {e}; sluice needs get on {plural}.{}",
            gvk.kind, gvk.group
        )),
    }
}

/// Reads the primary and canary workloads (managed canaries, Deployments or DaemonSets) and the
/// object the router names (an HTTPRoute, a Knative Revision) and judges them, in Flagger's
/// order: the primary with `primaryReadyThreshold` (`IsPrimaryReady`), then the canary with
/// `canaryReadyThreshold` (`IsCanaryReady`), then the router's object. A workload or object
/// that does not exist yet is not ready.
pub async fn read_readiness(
    client: &kube::Client,
    canary: &Canary,
    workload: &str,
) -> Result<Readiness, String> {
    let ns = canary.id.namespace.as_str();
    // Revisions in the route (a Knative Service) have no workloads of their own.
    let workloads = !matches!(canary.target, Target::RouteOnly { .. })
        && matches!(canary.route.revisions(), Revisions::Workloads);
    if workloads {
        if let Readiness::NotReady(why) = read_workloads(client, canary, workload).await? {
            return Ok(Readiness::NotReady(why));
        }
    }
    let Some(object) = canary.route.readiness(canary) else {
        return Ok(Readiness::Ready);
    };
    let gvk = GroupVersionKind::gvk(object.group, object.version, object.kind);
    let name = object.name;
    Ok(match get(client, gvk, object.plural, ns, name).await? {
        Some(found) => match object.condition {
            ReadyCondition::Ready => revision_ready(&found),
            ReadyCondition::ParentsAccepted => route_accepted(&found),
        },
        None => Readiness::NotReady(format!("{} {ns}/{name} does not exist yet", object.what)),
    })
}

/// The primary, then the canary workload.
async fn read_workloads(
    client: &kube::Client,
    canary: &Canary,
    workload: &str,
) -> Result<Readiness, String> {
    let ns = canary.id.namespace.as_str();
    let daemonset = matches!(&canary.target, Target::TargetRef { kind, .. } if kind == "DaemonSet");
    let (kind, plural, judge): (_, _, fn(&Json, u8) -> Readiness) = if daemonset {
        ("DaemonSet", "daemonsets", daemonset_ready)
    } else {
        ("Deployment", "deployments", deployment_ready)
    };
    // A Rollout's workloads are `<rollout>-stable` and `<rollout>-canary`
    // (`workload::rollout`).
    let (primary, canary_workload) = match &canary.target {
        Target::Rollout { name, .. } => (format!("{name}-stable"), format!("{name}-canary")),
        Target::Source { .. } | Target::TargetRef { .. } | Target::RouteOnly { .. } => {
            (format!("{workload}-primary"), workload.to_string())
        }
    };
    let analysis = &canary.analysis;
    for (name, threshold) in [
        (primary.as_str(), analysis.primary_ready_threshold),
        (canary_workload.as_str(), analysis.canary_ready_threshold),
    ] {
        let gvk = GroupVersionKind::gvk("apps", "v1", kind);
        match get(client, gvk, plural, ns, name).await? {
            Some(d) => {
                if let Readiness::NotReady(why) = judge(&d, threshold) {
                    return Ok(Readiness::NotReady(why));
                }
            }
            None => {
                return Ok(Readiness::NotReady(format!(
                    "{kind} {ns}/{name} does not exist yet"
                )))
            }
        }
    }
    Ok(Readiness::Ready)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(
        generation: i64,
        observed: i64,
        replicas: i64,
        updated: i64,
        available: i64,
        total: i64,
    ) -> Json {
        json!({"metadata": {"name": "podinfo", "generation": generation}, "spec": {"replicas": replicas},
               "status": {"observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": available, "replicas": total}})
    }

    #[test]
    fn daemonsets_are_ready_only_when_every_scheduled_pod_is_updated_and_available() {
        let ds = |generation: i64, observed: i64, desired: i64, updated: i64, available: i64| {
            json!({"metadata": {"name": "podinfo-ds", "generation": generation},
                   "status": {"observedGeneration": observed, "desiredNumberScheduled": desired,
                              "updatedNumberScheduled": updated, "numberAvailable": available}})
        };
        assert_eq!(daemonset_ready(&ds(2, 2, 3, 3, 3), 100), Readiness::Ready);
        assert_eq!(
            daemonset_ready(&ds(0, 0, 0, 0, 0), 100),
            Readiness::Ready,
            "an idle canary on no node is rolled out"
        );
        for (obj, why) in [
            (ds(3, 2, 3, 3, 3), "observed"),
            (ds(2, 2, 3, 2, 3), "2 of 3 new pods updated"),
            (ds(2, 2, 3, 3, 1), "1 of 3 updated pods available"),
        ] {
            match daemonset_ready(&obj, 100) {
                Readiness::NotReady(m) => assert!(m.contains(why), "{m}"),
                Readiness::Ready => panic!("{obj} is not ready"),
            }
        }
    }

    #[test]
    fn knative_revisions_are_ready_when_their_ready_condition_is_true() {
        let revision = |conditions: Json| json!({"metadata": {"name": "podinfo-83579d86c4"}, "status": {"conditions": conditions}});
        assert_eq!(
            revision_ready(&revision(
                json!([{"type": "Active", "status": "False"}, {"type": "Ready", "status": "True"}])
            )),
            Readiness::Ready
        );
        for (obj, why) in [
            (
                revision(
                    json!([{"type": "Ready", "status": "False", "reason": "ContainerMissing", "message": "no image"}]),
                ),
                "not ready (ContainerMissing: no image)",
            ),
            (
                revision(
                    json!([{"type": "Ready", "status": "Unknown", "reason": "Deploying", "message": ""}]),
                ),
                "not ready (Deploying: )",
            ),
            (revision(Json::Null), "no Ready condition"),
        ] {
            match revision_ready(&obj) {
                Readiness::NotReady(m) => assert!(m.contains(why), "{m}"),
                Readiness::Ready => panic!("{obj} is not ready"),
            }
        }
    }

    #[test]
    fn deployments_are_ready_only_when_fully_rolled_out() {
        assert_eq!(
            deployment_ready(&deployment(2, 2, 3, 3, 3, 3), 100),
            Readiness::Ready
        );
        for (d, why) in [
            (deployment(3, 2, 3, 3, 3, 3), "observed"),
            (deployment(2, 2, 3, 1, 1, 3), "1 of 3 new replicas updated"),
            (
                deployment(2, 2, 3, 3, 3, 5),
                "2 old replicas pending termination",
            ),
            (
                deployment(2, 2, 3, 3, 2, 3),
                "2 of 3 updated replicas available",
            ),
        ] {
            match deployment_ready(&d, 100) {
                Readiness::NotReady(text) => assert!(text.contains(why), "{text}"),
                Readiness::Ready => panic!("{d} is not ready"),
            }
        }
    }

    #[test]
    fn ready_counts_truncate_in_single_precision_as_flagger() {
        // int32(float32(pods) * float32(threshold)/100) in Flagger's *_ready.go.
        for (pods, threshold, count) in [
            (3, 100, 3),
            (3, 50, 1),
            (3, 67, 2),
            (10, 70, 7),
            (10, 29, 2),
            // f64 would give 28 (0.29 * 100 = 28.999...); Flagger's float32 gives 29.
            (100, 29, 29),
            (7, 0, 0),
            (0, 100, 0),
            (1, 99, 0),
        ] {
            assert_eq!(
                ready_count(pods, threshold),
                count,
                "{threshold}% of {pods}"
            );
        }
    }

    #[test]
    fn ready_thresholds_let_a_share_of_updated_replicas_be_unavailable() {
        // 4 updated, 2 available: ready up to 74 % (int(4 * 0.74) = 2), not at 75 %.
        let d = deployment(2, 2, 4, 4, 2, 4);
        assert_eq!(deployment_ready(&d, 50), Readiness::Ready);
        assert_eq!(
            deployment_ready(&d, 74),
            Readiness::Ready,
            "int(4 * 0.74) = 2"
        );
        match deployment_ready(&d, 75) {
            Readiness::NotReady(m) => assert!(
                m.contains("2 of 3 updated replicas available (readyThreshold 75%)"),
                "{m}"
            ),
            Readiness::Ready => panic!("75 % of 4 is 3 pods"),
        }
        // A threshold never excuses a replica that is not updated or an old one left.
        assert!(matches!(
            deployment_ready(&deployment(2, 2, 4, 3, 3, 4), 0),
            Readiness::NotReady(_)
        ));
        assert!(matches!(
            deployment_ready(&deployment(2, 2, 4, 4, 4, 5), 0),
            Readiness::NotReady(_)
        ));
        let ds = json!({"metadata": {"name": "agent", "generation": 1},
               "status": {"observedGeneration": 1, "desiredNumberScheduled": 10,
                          "updatedNumberScheduled": 10, "numberAvailable": 6}});
        assert_eq!(
            daemonset_ready(&ds, 69),
            Readiness::Ready,
            "int(10 * 0.69) = 6"
        );
        match daemonset_ready(&ds, 70) {
            Readiness::NotReady(m) => assert!(
                m.contains("6 of 7 updated pods available (readyThreshold 70%)"),
                "{m}"
            ),
            Readiness::Ready => panic!("70 % of 10 is 7 pods"),
        }
    }

    #[test]
    fn routes_need_every_parent_to_accept_the_current_generation() {
        let route = |status: &str, observed: i64| {
            json!({"metadata": {"name": "web", "generation": 4},
            "status": {"parents": [{"parentRef": {"name": "gw"}, "controllerName": "x",
                "conditions": [{"type": "Accepted", "status": status, "observedGeneration": observed, "reason": "R", "message": "m"}]}]}})
        };
        assert_eq!(route_accepted(&route("True", 4)), Readiness::Ready);
        assert!(matches!(
            route_accepted(&route("True", 3)),
            Readiness::NotReady(_)
        ));
        assert!(matches!(
            route_accepted(&route("False", 4)),
            Readiness::NotReady(_)
        ));
        assert!(matches!(
            route_accepted(&json!({"metadata": {"name": "web"}})),
            Readiness::NotReady(_)
        ));
    }
}
