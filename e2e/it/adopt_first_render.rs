//! sluice's first render of a Flagger canary equals what Flagger has live for the canary at
//! rest, for each router: the objects Flagger generates, written down from Flagger's code in
//! `e2e/fixtures/adopt/` (its README names the function each field comes from and the
//! commit), are held against sluice's first render field by field. Only what Flagger sets at
//! runtime and git cannot hold is left out: `status`, `resourceVersion`, `uid`,
//! `creationTimestamp`, `generation`, `ownerReferences` (which sluice must never write), and
//! the pod template's `flagger-id` annotation (a random id Flagger writes at each promotion;
//! a GitOps apply keeps a field it does not own, so it stays and restarts nothing).

use serde_json::Value as Json;

use sluice::core::status::Phase;

use crate::support::adopt::{differences, objects};
use crate::support::canary::podinfo;
use crate::support::read_repo_file;
use crate::support::rollout::{World, OUTPUT};

/// Routers whose canary needs nothing beyond the default one, each with its route file's
/// objects at rest in `e2e/fixtures/adopt/` (`None`: the objects are not written down yet,
/// only the workloads and Services are held).
const ROUTERS: &[(&str, Option<&str>)] = &[
    ("linkerd", Some("route-linkerd.yaml")),
    ("osm", Some("route-osm.yaml")),
    ("kubernetes", None),
    ("istio", None),
    ("kuma", None),
    ("gloo", None),
    ("contour", None),
    ("traefik", None),
    ("appmesh:v1beta2", None),
];

/// The Secret the source's `TOKEN` comes from, in the repo (a Secret only in the cluster:
/// `adopt_fixture_render::a_secret_only_the_cluster_holds_keeps_the_primary_on_flaggers_copy`).
const SECRET: &str = "apiVersion: v1
kind: Secret
metadata:
  name: podinfo-token
  namespace: prod
type: Opaque
data:
  token: c2VjcmV0
";

/// Differences between Flagger's objects and sluice's that move no traffic and restart no
/// pod, each taken out of both sides before the comparison by a named rule. Every rule must
/// find something to take out, so the list cannot outlive the difference it names.
fn known(
    flagger: &mut Json,
    sluice: &mut Json,
    used: &mut std::collections::BTreeSet<&'static str>,
) {
    // sluice marks every object it writes (`app.kubernetes.io/managed-by: sluice`); a label
    // on the Deployment's metadata, a Service's or a route's selects nothing.
    if let Some(labels) = sluice["metadata"]["labels"].as_object_mut() {
        if labels.remove("app.kubernetes.io/managed-by").is_some() {
            used.insert("managed-by");
        }
        if labels.is_empty() {
            sluice["metadata"].as_object_mut().unwrap().remove("labels");
        }
    }
    // Flagger labels each Service it makes `app: <its name>` (reconcileService); the label
    // selects nothing, and a GitOps apply leaves a label it does not own in place.
    if flagger["kind"] == "Service" && sluice["metadata"]["labels"]["app"].is_null() {
        if let Some(labels) = flagger["metadata"]["labels"].as_object_mut() {
            if labels.remove("app").is_some() {
                used.insert("service-app-label");
            }
            if labels.is_empty() {
                flagger["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("labels");
            }
        }
    }
    // SMI v1alpha1 weights are quantities: Flagger writes 100 and 0, sluice 1000m and 0m;
    // the split is the same (weights are relative), so each is compared as its share.
    if flagger["apiVersion"] == "split.smi-spec.io/v1alpha1" {
        let shares = |doc: &Json| -> Vec<f64> {
            let weights: Vec<f64> = doc["spec"]["backends"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| quantity(b["weight"].as_str().unwrap()))
                .collect();
            let total: f64 = weights.iter().sum();
            weights.iter().map(|w| w / total).collect()
        };
        assert_eq!(shares(flagger), shares(sluice), "the same split");
        for doc in [&mut *flagger, &mut *sluice] {
            for b in doc["spec"]["backends"].as_array_mut().unwrap() {
                b.as_object_mut().unwrap().remove("weight");
            }
        }
        used.insert("smi-v1alpha1-quantity");
    }
}

/// A Kubernetes quantity without a suffix or with `m`.
fn quantity(text: &str) -> f64 {
    match text.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().unwrap() / 1000.0,
        None => text.parse().unwrap(),
    }
}

/// sluice's first render of the default podinfo canary on `provider`: every object of its
/// output folder but the kustomization.
fn first_render(provider: &str) -> std::collections::BTreeMap<String, Json> {
    let canary = podinfo()
        .provider(provider)
        .service("    port: 80\n    targetPort: 9898")
        .yaml(if provider == "kubernetes" {
            "    iterations: 3"
        } else {
            "    stepWeight: 20\n    maxWeight: 60"
        });
    let mut w = World::with_files(&canary, &[("apps/podinfo/secret.yaml", SECRET)]);
    w.until(Phase::Initialized);
    let listed = crate::support::git(
        &w.bare,
        &["ls-tree", "--name-only", &format!("main:{OUTPUT}")],
    );
    let mut all = std::collections::BTreeMap::new();
    for file in listed.lines().filter(|f| *f != "kustomization.yaml") {
        all.extend(objects(&w.show("main", &format!("{OUTPUT}/{file}"))));
    }
    all
}

#[test]
fn first_render_equals_flaggers_objects_at_rest_for_every_router() {
    let workloads = objects(&read_repo_file("e2e/fixtures/adopt/workloads.yaml"));
    let mut wrong = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    for (provider, route) in ROUTERS {
        let got = first_render(provider);
        let mut want = workloads.clone();
        if let Some(route) = route {
            want.extend(objects(&read_repo_file(&format!(
                "e2e/fixtures/adopt/{route}"
            ))));
        }
        for (key, flagger) in &want {
            match got.get(key) {
                Some(sluice) => {
                    let (mut flagger, mut sluice) = (flagger.clone(), sluice.clone());
                    known(&mut flagger, &mut sluice, &mut used);
                    let mut out = Vec::new();
                    differences(&flagger, &sluice, key, &mut out);
                    wrong.extend(out.into_iter().map(|d| format!("{provider}: {d}")));
                }
                None => wrong.push(format!(
                    "{provider}: {key}: Flagger has it, sluice renders none"
                )),
            }
        }
        // Where Flagger's route objects are written down, sluice renders nothing beyond them.
        if route.is_some() {
            for key in got.keys().filter(|k| !want.contains_key(*k)) {
                wrong.push(format!(
                    "{provider}: {key}: sluice renders it, Flagger has none"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        ["managed-by", "service-app-label", "smi-v1alpha1-quantity"],
        "a known difference is gone: take its rule out of `known`"
    );
}
