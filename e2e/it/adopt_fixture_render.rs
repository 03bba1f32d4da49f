//! On each real repo of `e2e/fixtures/adopt/` (their SOURCES name where they come from),
//! `sluice adopt`, then sluice's first render on the adopted branch (`sluice reconcile` with
//! the adoption hold adopt writes), held against what Flagger 1.44 has live for that very
//! canary at rest. Flagger's side is computed here from the objects Flux or Argo CD applies
//! from the repo as found (built with `kubectl kustomize` where a kustomization builds them),
//! by [`flagger_at_rest`], written from Flagger's code at
//! fluxcd/flagger@15bd6ad555e6c935da55f0ab95977be74c149bd6 with its default flags
//! (`-selector-labels app,name,app.kubernetes.io/name`, `-include-label-prefix ""`, config
//! tracking on); each field names the Flagger function it comes from. Nothing here is read
//! from sluice's renderer.
//!
//! Every object sluice renders into the canary's output folder is compared, and every object
//! Flagger has is looked for: the primary Deployment (its pod template above all), the
//! primary's ConfigMap and Secret copies and autoscaler, the target at rest, the apex,
//! primary and canary Services, and the route objects at 100/0 for the fixture's router.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Map, Value as Json};

use crate::support::adopt::{
    adopt, adopt_edited, checkout, differences, objects, render_adopted, scrub, PULL_POLICY,
    WITH_SECRET,
};
use crate::support::{kustomize_text, repo_root};

/// Flagger's `-selector-labels` default (`cmd/flagger/main.go`), in its order.
const SELECTOR_LABELS: [&str; 3] = ["app", "name", "app.kubernetes.io/name"];

/// `toolkitMarker` (pkg/canary/util.go): keys holding it never reach what Flagger generates.
const TOOLKIT: &str = "toolkit.fluxcd.io";

/// One adopted canary: its id, the folder Flux or Argo CD applies its sources from (built
/// with kustomize when it holds a kustomization.yaml, else its YAML files as they are), other
/// applied files it references (an Ingress), and the router Flagger runs it with (the
/// Canary's `provider`, else the install's `meshProvider`).
struct Case {
    fixture: &'static str,
    canary: &'static str,
    folder: &'static str,
    also: &'static [&'static str],
    router: &'static str,
    /// What `sluice adopt` is told that the repo does not say (Flagger's install outside it).
    args: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        fixture: "flux-driv",
        canary: "default/golang-api",
        folder: "clusters/my-cluster/apps/golang-api",
        also: &["clusters/my-cluster/apps/number-generator-ingress.yaml"],
        router: "nginx",
        args: &[],
    },
    Case {
        fixture: "flux-yuvmix",
        canary: "prod/webapp",
        folder: "apps/webapp",
        also: &[],
        router: "istio",
        args: &[],
    },
    Case {
        fixture: "flux-gitops-istio",
        canary: "prod/backend",
        folder: "apps/backend",
        also: &[],
        router: "istio",
        args: &[],
    },
    Case {
        fixture: "flux-gitops-istio",
        canary: "prod/frontend",
        folder: "apps/frontend",
        also: &[],
        router: "istio",
        args: &[],
    },
    Case {
        fixture: "argocd-driv",
        canary: "default/golang-api",
        folder: "apps/golang-api",
        also: &["apps/number-generator-ingress.yaml"],
        router: "nginx",
        args: &[],
    },
    Case {
        fixture: "argocd-ixxel",
        canary: "blue-green/nginx-blue-green",
        folder: "flagger-blue-green",
        also: &[],
        router: "istio",
        // Flagger was installed with helm by hand; the canary's Istio gateways say the mesh.
        args: &["--provider", "istio"],
    },
];

/// The objects the GitOps engine applies from `folder` of the repo as found at `root`, and
/// `also`.
fn applied(root: &Path, folder: &str, also: &[&str]) -> Vec<Json> {
    let at = root.join(folder);
    let mut text = String::new();
    if at.join("kustomization.yaml").exists() {
        text = kustomize_text(&at, &[]).unwrap_or_else(|| {
            panic!("kubectl kustomize is needed to build {folder} as Flux does")
        });
    } else {
        let mut files: Vec<_> = std::fs::read_dir(&at)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        for f in files {
            text.push_str(&std::fs::read_to_string(f).unwrap());
            text.push_str("\n---\n");
        }
    }
    for f in also {
        text.push_str("\n---\n");
        text.push_str(&std::fs::read_to_string(root.join(f)).unwrap());
    }
    serde_saphyr::from_multiple::<Json>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn find<'a>(all: &'a [Json], kind: &str, name: &str) -> Option<&'a Json> {
    all.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

/// A string map without the keys holding `toolkit.fluxcd.io` (`filterMetadata`).
fn filter_metadata(map: &Json) -> Map<String, Json> {
    map.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !k.contains(TOOLKIT))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// `makePrimaryLabels` (pkg/canary/util.go): the labels without toolkit keys, the selector
/// label set to `value`.
fn make_primary_labels(labels: &Json, label: &str, value: &str) -> Map<String, Json> {
    let mut out = filter_metadata(labels);
    out.insert(label.to_string(), json!(value));
    out
}

/// `metadata` holding `name` and `namespace` (labels and annotations are added after).
fn name_and_namespace(name: impl Into<Json>, ns: &str) -> Map<String, Json> {
    let mut meta = Map::new();
    meta.insert("name".into(), name.into());
    meta.insert("namespace".into(), json!(ns));
    meta
}

/// Sets `key` to `map` unless it is empty (Go's `omitempty` on a map).
fn put_map(obj: &mut Map<String, Json>, key: &str, map: Map<String, Json>) {
    if !map.is_empty() {
        obj.insert(key.to_string(), Json::Object(map));
    }
}

/// Copies `key` from `from` when it is set (a Go pointer or `omitempty` field left nil).
fn copy_field(obj: &mut Map<String, Json>, from: &Json, key: &str) {
    if !from[key].is_null() {
        obj.insert(key.to_string(), from[key].clone());
    }
}

/// `GetTargetConfigs` (pkg/canary/config_tracker.go): every ConfigMap and Secret the pod
/// template references (volumes, projected volumes, env `valueFrom`, `envFrom` of containers
/// and init containers) that exists (`getRefFromConfigMap`, `getRefFromSecret`), is not
/// annotated `flagger.app/config-tracking: disabled` (`configIsDisabled`) and, for a Secret,
/// is of type Opaque, basic-auth, ssh-auth or tls.
fn tracked(pod: &Json, all: &[Json]) -> BTreeSet<(&'static str, String)> {
    let mut refs = BTreeSet::new();
    let mut add = |kind: &'static str, name: &Json| {
        if let Some(n) = name.as_str() {
            refs.insert((kind, n.to_string()));
        }
    };
    for v in pod["volumes"].as_array().into_iter().flatten() {
        add("ConfigMap", &v["configMap"]["name"]);
        add("Secret", &v["secret"]["secretName"]);
        for s in v["projected"]["sources"].as_array().into_iter().flatten() {
            add("ConfigMap", &s["configMap"]["name"]);
            add("Secret", &s["secret"]["name"]);
        }
    }
    for list in ["containers", "initContainers"] {
        for c in pod[list].as_array().into_iter().flatten() {
            for e in c["env"].as_array().into_iter().flatten() {
                add("ConfigMap", &e["valueFrom"]["configMapKeyRef"]["name"]);
                add("Secret", &e["valueFrom"]["secretKeyRef"]["name"]);
            }
            for e in c["envFrom"].as_array().into_iter().flatten() {
                add("ConfigMap", &e["configMapRef"]["name"]);
                add("Secret", &e["secretRef"]["name"]);
            }
        }
    }
    refs.into_iter()
        .filter(|(kind, name)| {
            let Some(obj) = find(all, kind, name) else {
                return false;
            };
            if obj["metadata"]["annotations"]["flagger.app/config-tracking"] == "disabled" {
                return false;
            }
            *kind == "ConfigMap"
                || matches!(
                    obj["type"].as_str().unwrap_or("Opaque"),
                    "Opaque"
                        | "kubernetes.io/basic-auth"
                        | "kubernetes.io/ssh-auth"
                        | "kubernetes.io/tls"
                )
        })
        .collect()
}

/// `ApplyPrimaryConfigs` (pkg/canary/config_tracker.go): each tracked reference gets
/// `-primary` (volumes and projected sources; env and envFrom of containers and init
/// containers).
fn apply_primary_configs(pod: &mut Json, refs: &BTreeSet<(&'static str, String)>) {
    let rename = |kind: &'static str, name: Option<&mut Json>| {
        if let Some(name) = name {
            if let Some(n) = name.as_str() {
                if refs.contains(&(kind, n.to_string())) {
                    *name = json!(format!("{n}-primary"));
                }
            }
        }
    };
    for v in each_mut(pod, "/volumes") {
        rename("ConfigMap", v.pointer_mut("/configMap/name"));
        rename("Secret", v.pointer_mut("/secret/secretName"));
        for s in each_mut(v, "/projected/sources") {
            rename("ConfigMap", s.pointer_mut("/configMap/name"));
            rename("Secret", s.pointer_mut("/secret/name"));
        }
    }
    for list in ["/containers", "/initContainers"] {
        for c in each_mut(pod, list) {
            for e in each_mut(c, "/env") {
                rename(
                    "ConfigMap",
                    e.pointer_mut("/valueFrom/configMapKeyRef/name"),
                );
                rename("Secret", e.pointer_mut("/valueFrom/secretKeyRef/name"));
            }
            for e in each_mut(c, "/envFrom") {
                rename("ConfigMap", e.pointer_mut("/configMapRef/name"));
                rename("Secret", e.pointer_mut("/secretRef/name"));
            }
        }
    }
}

/// The items of the array at `pointer`, none when there is none (adding nothing to `doc`).
fn each_mut<'a>(doc: &'a mut Json, pointer: &str) -> impl Iterator<Item = &'a mut Json> {
    doc.pointer_mut(pointer)
        .and_then(Json::as_array_mut)
        .into_iter()
        .flatten()
}

/// `appendPrimarySuffixToValuesIfNeeded` (pkg/canary/deployment_controller.go) on a label
/// selector: a selector label whose value is the target's name gets `-primary`.
fn primary_selector(selector: &mut Json, target: &str) {
    for e in each_mut(selector, "/matchExpressions") {
        if SELECTOR_LABELS.contains(&e["key"].as_str().unwrap_or("")) {
            if let Some(v) = e
                .get_mut("values")
                .and_then(Json::as_array_mut)
                .and_then(|vs| vs.iter_mut().find(|v| *v == target))
            {
                *v = json!(format!("{target}-primary"));
            }
        }
    }
    if let Some(m) = selector
        .get_mut("matchLabels")
        .and_then(Json::as_object_mut)
    {
        for (k, v) in m.iter_mut() {
            if SELECTOR_LABELS.contains(&k.as_str()) && *v == target {
                *v = json!(format!("{target}-primary"));
            }
        }
    }
}

/// What Flagger has live for `canary` at rest (initialized, no analysis running), by
/// `Kind/name`, from the objects the GitOps engine applies (`all`).
fn flagger_at_rest(canary: &Json, all: &[Json], router: &str) -> BTreeMap<String, Json> {
    let ns = canary["metadata"]["namespace"].as_str().unwrap();
    let target_ref = &canary["spec"]["targetRef"];
    let name = target_ref["name"].as_str().unwrap();
    let target = find(all, target_ref["kind"].as_str().unwrap(), name)
        .unwrap_or_else(|| panic!("{ns}/{name}: no target applied"));
    let mut out = BTreeMap::new();

    // getSelectorLabel: the first of -selector-labels in the target's matchLabels.
    let match_labels = &target["spec"]["selector"]["matchLabels"];
    let label = *SELECTOR_LABELS
        .iter()
        .find(|l| match_labels[**l].is_string())
        .unwrap();
    let value = match_labels[label].as_str().unwrap();
    let primary_value = format!("{value}-primary");
    let template = &target["spec"]["template"];

    // createPrimaryDeployment (pkg/canary/deployment_controller.go).
    let refs = tracked(&template["spec"], all);
    let mut pod = template["spec"].clone();
    // getPrimaryDeploymentTemplateSpec: ApplyPrimaryConfigs, then the topology spread
    // constraints' and pod anti-affinity terms' selectors.
    apply_primary_configs(&mut pod, &refs);
    for c in each_mut(&mut pod, "/topologySpreadConstraints") {
        if let Some(sel) = c.get_mut("labelSelector") {
            primary_selector(sel, name);
        }
    }
    for t in each_mut(
        &mut pod,
        "/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution",
    ) {
        if let Some(sel) = t.pointer_mut("/podAffinityTerm/labelSelector") {
            primary_selector(sel, name);
        }
    }
    for t in each_mut(
        &mut pod,
        "/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution",
    ) {
        if let Some(sel) = t.get_mut("labelSelector") {
            primary_selector(sel, name);
        }
    }
    let mut pod_meta = Map::new();
    // makePrimaryLabels of the template's labels.
    put_map(
        &mut pod_meta,
        "labels",
        make_primary_labels(&template["metadata"]["labels"], label, &primary_value),
    );
    // makeAnnotations: the template's, toolkit keys dropped, plus `flagger-id` (a random id,
    // scrubbed from both sides as runtime state).
    put_map(
        &mut pod_meta,
        "annotations",
        filter_metadata(&template["metadata"]["annotations"]),
    );
    let mut spec = Map::new();
    for key in [
        "progressDeadlineSeconds",
        "minReadySeconds",
        "revisionHistoryLimit",
    ] {
        copy_field(&mut spec, &target["spec"], key);
    }
    // The target's replicas when above 0, else 1.
    let replicas = target["spec"]["replicas"].as_i64().filter(|r| *r > 0);
    spec.insert("replicas".into(), json!(replicas.unwrap_or(1)));
    copy_field(&mut spec, &target["spec"], "strategy");
    spec.insert(
        "selector".into(),
        json!({"matchLabels": {label: primary_value}}),
    );
    spec.insert(
        "template".into(),
        json!({"metadata": pod_meta, "spec": pod}),
    );
    let mut meta = name_and_namespace(format!("{name}-primary"), ns);
    // includeLabelsByPrefix with no prefix keeps no label; makePrimaryLabels adds the
    // selector label.
    put_map(
        &mut meta,
        "labels",
        make_primary_labels(&Json::Null, label, &primary_value),
    );
    put_map(
        &mut meta,
        "annotations",
        filter_metadata(&target["metadata"]["annotations"]),
    );
    out.insert(
        format!("Deployment/{name}-primary"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}),
    );

    // CreatePrimaryConfigs (pkg/canary/config_tracker.go): `<name>-primary` with the labels
    // by prefix (none) and the data; a Secret keeps its type.
    for (kind, config) in &refs {
        let source = find(all, kind, config).unwrap();
        let mut copy = json!({
            "apiVersion": "v1",
            "kind": kind,
            "metadata": {"name": format!("{config}-primary"), "namespace": ns},
        });
        let obj = copy.as_object_mut().unwrap();
        copy_field(obj, source, "data");
        if *kind == "Secret" {
            obj.insert("type".into(), source["type"].clone());
            if source["type"].is_null() {
                obj.insert("type".into(), json!("Opaque"));
            }
        }
        out.insert(format!("{kind}/{config}-primary"), copy);
    }

    // The configs the target references, as the GitOps engine applies them (sluice writes
    // them beside its canary workload).
    for (kind, config) in &refs {
        let mut found = find(all, kind, config).unwrap().clone();
        found["metadata"]["namespace"] = json!(ns);
        out.insert(format!("{kind}/{config}"), found);
    }

    // The target, scaled to zero at rest (`ScaleToZero`); Flagger changes nothing else.
    let mut at_rest = target.clone();
    at_rest["spec"]["replicas"] = json!(0);
    at_rest["metadata"]["namespace"] = json!(ns);
    out.insert(format!("Deployment/{name}"), at_rest);

    // reconcilePrimaryHpaV2 (pkg/canary/hpa_reconciler.go): `<hpa>-primary` in
    // autoscaling/v2 scaling the primary, labels by `filterMetadata` (makeObjectMeta).
    if let Some(hpa_name) = canary["spec"]["autoscalerRef"]["name"].as_str() {
        let hpa = find(all, "HorizontalPodAutoscaler", hpa_name).unwrap();
        let r = &hpa["spec"]["scaleTargetRef"];
        let mut spec = Map::new();
        spec.insert(
            "scaleTargetRef".into(),
            json!({"name": format!("{name}-primary"), "kind": r["kind"], "apiVersion": r["apiVersion"]}),
        );
        for key in ["minReplicas", "maxReplicas", "metrics", "behavior"] {
            copy_field(&mut spec, &hpa["spec"], key);
        }
        let mut meta = name_and_namespace(format!("{hpa_name}-primary"), ns);
        let labels = filter_metadata(&hpa["metadata"]["labels"]);
        put_map(&mut meta, "labels", labels);
        out.insert(
            format!("HorizontalPodAutoscaler/{hpa_name}-primary"),
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta, "spec": spec}),
        );
    }

    // GetServiceNames (pkg/apis/flagger/v1beta1/canary.go).
    let service = &canary["spec"]["service"];
    let apex = service["name"].as_str().unwrap_or(name).to_string();
    let (primary, canary_svc) = (format!("{apex}-primary"), format!("{apex}-canary"));
    // KubernetesDefaultRouter.Initialize (canary, primary) and Reconcile (apex) →
    // reconcileService (pkg/router/kubernetes_default.go).
    for (svc, selects) in [
        (&canary_svc, value.to_string()),
        (&primary, primary_value.clone()),
        (&apex, primary_value.clone()),
    ] {
        out.insert(
            format!("Service/{svc}"),
            reconcile_service(service, svc, ns, label, &selects, find(all, "Service", svc)),
        );
    }

    match router {
        "nginx" => {
            let ingress = ingress_canary(canary, &apex, all);
            let key = format!("Ingress/{}", ingress["metadata"]["name"].as_str().unwrap());
            out.insert(key, ingress);
        }
        "istio" => {
            // IstioRouter.Reconcile (pkg/router/istio.go): reconcileDestinationRule for the
            // canary and primary hosts, then reconcileVirtualService.
            for host in [&canary_svc, &primary] {
                let mut spec = json!({"host": host});
                copy_field(spec.as_object_mut().unwrap(), service, "trafficPolicy");
                out.insert(
                    format!("DestinationRule/{host}"),
                    json!({"apiVersion": "networking.istio.io/v1beta1", "kind": "DestinationRule",
                           "metadata": {"name": host, "namespace": ns}, "spec": spec}),
                );
            }
            out.insert(
                format!("VirtualService/{apex}"),
                virtual_service(canary, &apex, &primary, &canary_svc, ns),
            );
        }
        other => panic!("{other}: Flagger's route objects are not written down here"),
    }
    out
}

/// `reconcileService` (pkg/router/kubernetes_default.go): a ClusterIP Service selecting
/// `label: selects` with one port `{name: portName or http, protocol: TCP, port, targetPort
/// or port}`, labelled `app: <name>`; when the Service is already there (applied from git),
/// Flagger replaces only its ports and selector and keeps the rest.
fn reconcile_service(
    service: &Json,
    name: &str,
    ns: &str,
    label: &str,
    selects: &str,
    existing: Option<&Json>,
) -> Json {
    assert!(
        service["portDiscovery"] != true,
        "portDiscovery: getPorts is not written down here"
    );
    let port = &service["port"];
    let target_port = match &service["targetPort"] {
        Json::Null => port.clone(),
        t => t.clone(),
    };
    let mut p = json!({"name": service["portName"].as_str().unwrap_or("http"),
                       "protocol": "TCP", "port": port, "targetPort": target_port});
    if let Some(v) = service["appProtocol"].as_str() {
        p["appProtocol"] = json!(v);
    }
    let selector = json!({label: selects});
    if let Some(found) = existing {
        let mut svc = found.clone();
        svc["metadata"]["namespace"] = json!(ns);
        svc["spec"]["ports"] = json!([p]);
        svc["spec"]["selector"] = selector;
        let annotations = filter_metadata(&svc["metadata"]["annotations"]);
        let meta = svc["metadata"].as_object_mut().unwrap();
        meta.remove("annotations");
        put_map(meta, "annotations", annotations);
        return svc;
    }
    let mut spec = json!({"type": "ClusterIP", "selector": selector, "ports": [p]});
    if service["headless"] == true {
        spec["clusterIP"] = json!("None");
    }
    if let Some(v) = service["trafficDistribution"].as_str() {
        spec["trafficDistribution"] = json!(v);
    }
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": ns, "labels": {label: name}},
           "spec": spec})
}

/// `IngressRouter.Reconcile` (pkg/router/ingress.go) and `SetRoutes` at weight 0: a copy
/// `<ingress>-canary` of the Ingress `ingressRef` names, its backends of the apex Service
/// sent to `<apex>-canary`, the labels kept, the annotations through `makeAnnotations`
/// (toolkit keys and nginx's canary ones dropped, then `canary: "true"` and
/// `canary-weight: "0"`).
fn ingress_canary(canary: &Json, apex: &str, all: &[Json]) -> Json {
    let ns = canary["metadata"]["namespace"].as_str().unwrap();
    let name = canary["spec"]["ingressRef"]["name"].as_str().unwrap();
    let ingress = find(all, "Ingress", name).unwrap();
    let mut spec = ingress["spec"].clone();
    for rule in spec["rules"].as_array_mut().into_iter().flatten() {
        for path in rule["http"]["paths"].as_array_mut().into_iter().flatten() {
            if path["backend"]["service"]["name"] == apex {
                path["backend"]["service"]["name"] = json!(format!("{apex}-canary"));
            }
        }
    }
    let prefix = "nginx.ingress.kubernetes.io";
    let mut annotations: Map<String, Json> = filter_metadata(&ingress["metadata"]["annotations"])
        .into_iter()
        .filter(|(k, _)| {
            !k.contains(&format!("{prefix}/canary"))
                && !k.contains("kubectl.kubernetes.io/last-applied-configuration")
        })
        .collect();
    annotations.insert(format!("{prefix}/canary"), json!("true"));
    annotations.insert(format!("{prefix}/canary-weight"), json!("0"));
    let mut meta = name_and_namespace(format!("{name}-canary"), ns);
    meta.insert("annotations".into(), Json::Object(annotations));
    if let Some(labels) = ingress["metadata"]["labels"].as_object() {
        put_map(&mut meta, "labels", labels.clone());
    }
    json!({"apiVersion": ingress["apiVersion"], "kind": "Ingress", "metadata": meta, "spec": spec})
}

/// `reconcileVirtualService` (pkg/router/istio.go), and `SetRoutes` at 100/0: hosts the
/// service's plus the apex unless there or `*`; gateways the service's, else `mesh`; one
/// HTTP route with the service's match, rewrite, timeout, retries, CORS policy and headers,
/// to primary 100 and canary 0 (`makeDestination`, no port without `portDiscovery`); with
/// `analysis.match` (A/B) first that route with the matches `mergeMatchConditions` gives,
/// then the same to the primary alone; metadata from `service.apex`.
fn virtual_service(canary: &Json, apex: &str, primary: &str, canary_svc: &str, ns: &str) -> Json {
    let service = &canary["spec"]["service"];
    assert!(
        service["delegation"] != true
            && service["portDiscovery"] != true
            && canary["spec"]["analysis"]["sessionAffinity"].is_null()
            && canary["spec"]["analysis"]["mirror"] != true,
        "delegation, port discovery, session affinity and mirroring are not written down here"
    );
    let mut hosts: Vec<Json> = service["hosts"].as_array().cloned().unwrap_or_default();
    if !hosts.iter().any(|h| h == apex || h == "*") {
        hosts.push(json!(apex));
    }
    let mut gateways: Vec<Json> = service["gateways"].as_array().cloned().unwrap_or_default();
    if gateways.is_empty() {
        gateways.push(json!("mesh"));
    }
    let destination =
        |host: &str, weight: i64| json!({"destination": {"host": host}, "weight": weight});
    // An HTTPRoute of the service's fields (`GetIstioRewrite` is the rewrite as written).
    let route = |matches: &Json, to: Json| {
        let mut r = Map::new();
        if !matches.is_null() {
            r.insert("match".into(), matches.clone());
        }
        for key in ["rewrite", "timeout", "retries", "corsPolicy", "headers"] {
            copy_field(&mut r, service, key);
        }
        r.insert("route".into(), to);
        Json::Object(r)
    };
    let both = json!([destination(primary, 100), destination(canary_svc, 0)]);
    let http = match canary["spec"]["analysis"]["match"].as_array() {
        None => json!([route(&service["match"], both)]),
        Some(ab) => {
            // mergeMatchConditions: the canary's matches alone without service matches, else
            // each service match with the canary match's headers and sourceLabels.
            let merged: Vec<Json> = match service["match"].as_array() {
                None => ab.clone(),
                Some(defaults) => ab
                    .iter()
                    .flat_map(|c| {
                        defaults.iter().map(move |d| {
                            let mut m = d.clone();
                            for key in ["headers", "sourceLabels"] {
                                if !c[key].is_null() {
                                    m[key] = c[key].clone();
                                }
                            }
                            m
                        })
                    })
                    .collect(),
            };
            json!([
                route(&Json::Array(merged), both),
                route(&service["match"], json!([destination(primary, 100)])),
            ])
        }
    };
    let mut meta = name_and_namespace(apex, ns);
    put_map(
        &mut meta,
        "labels",
        service["apex"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    put_map(
        &mut meta,
        "annotations",
        filter_metadata(&service["apex"]["annotations"]),
    );
    json!({"apiVersion": "networking.istio.io/v1beta1", "kind": "VirtualService",
           "metadata": meta,
           "spec": {"hosts": hosts, "gateways": gateways, "http": http}})
}

/// Differences between Flagger's objects and sluice's that move no traffic and restart no
/// pod, each taken out of both sides by a named rule before the comparison; the test fails
/// when a rule finds nothing to take out on any fixture, so none outlives its difference.
fn known(
    key: &str,
    flagger: &mut Json,
    sluice: &mut Json,
    autoscaled: bool,
    used: &mut BTreeSet<&'static str>,
) {
    fn drop_label(doc: &mut Json, label: &str) -> bool {
        let Some(meta) = doc.get_mut("metadata").and_then(Json::as_object_mut) else {
            return false;
        };
        let Some(labels) = meta.get_mut("labels").and_then(Json::as_object_mut) else {
            return false;
        };
        let gone = labels.remove(label).is_some();
        if labels.is_empty() {
            meta.remove("labels");
        }
        gone
    }
    // sluice marks what it writes `app.kubernetes.io/managed-by: sluice`: a label on an
    // object's metadata selects no pod.
    if drop_label(sluice, "app.kubernetes.io/managed-by") {
        used.insert("managed-by");
    }
    // Flagger labels each Service it makes `app: <its name>` (reconcileService); the label
    // selects nothing, and an apply leaves a label it does not own in place.
    if flagger["kind"] == "Service"
        && sluice["metadata"]["labels"]["app"].is_null()
        && drop_label(flagger, "app")
    {
        used.insert("service-app-label");
    }
    // A Service from git without `type` is a ClusterIP once the API server defaults it.
    if flagger["kind"] == "Service"
        && flagger["spec"]["type"].is_null()
        && sluice["spec"]["type"] == "ClusterIP"
    {
        sluice["spec"].as_object_mut().unwrap().remove("type");
        used.insert("service-type-default");
    }
    // The target at rest is the source as Flux applied it, Flux's keys with it; sluice's
    // canary workload carries none (`ssa: IfNotPresent` would keep Flux from applying a new
    // revision to it): keys on a Deployment's own metadata restart no pod.
    if !key.ends_with("-primary") && flagger["kind"] == "Deployment" {
        let mut dropped = false;
        for field in ["labels", "annotations"] {
            let Some(meta) = flagger.get_mut("metadata").and_then(Json::as_object_mut) else {
                continue;
            };
            let Some(map) = meta.get_mut(field).and_then(Json::as_object_mut) else {
                continue;
            };
            let before = map.len();
            map.retain(|k, _| !k.contains(TOOLKIT));
            dropped |= map.len() < before;
            if map.is_empty() {
                meta.remove(field);
            }
        }
        if dropped {
            used.insert("flux-keys-off-the-target");
        }
    }
    if key.ends_with("-primary") && flagger["kind"] == "Deployment" {
        // Flagger's primary carries the selector label alone (includeLabelsByPrefix keeps
        // none); sluice keeps the target's labels, renamed: labels on a Deployment's own
        // metadata select no pod.
        if sluice["metadata"]["labels"].is_null() {
            flagger["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("labels");
            used.insert("primary-metadata-labels");
        }
        // Replicas: with an autoscaler the HPA owns them at runtime (sluice writes none);
        // without one Flagger writes 1 where the target sets none, which is what the API
        // server defaults an unset `spec.replicas` to.
        if sluice["spec"]["replicas"].is_null() {
            if autoscaled {
                used.insert("autoscaler-owns-replicas");
            } else if flagger["spec"]["replicas"] == 1 {
                used.insert("replicas-default-1");
            } else {
                return;
            }
            flagger["spec"].as_object_mut().unwrap().remove("replicas");
        }
    }
}

/// sluice's objects in the output folder `deploy/<canary>` of the rendered checkout.
fn rendered(at: &Path, canary: &str) -> BTreeMap<String, Json> {
    let folder = at.join("deploy").join(canary);
    let mut all = BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    files.sort();
    for f in files {
        all.extend(objects(&std::fs::read_to_string(f).unwrap()));
    }
    all
}

/// Every difference between Flagger's objects at rest for `case` (in a cluster that also
/// holds `cluster_only`, objects git does not hold) and sluice's first render in the
/// rendered checkout `at` of the repo as found at `root`. What derives from `cluster_only`
/// (the objects and Flagger's copies of them) stays in the cluster and is not rendered.
fn compare(
    case: &Case,
    root: &Path,
    at: &Path,
    cluster_only: &[Json],
    used: &mut BTreeSet<&'static str>,
) -> Vec<String> {
    let mut all = applied(root, case.folder, case.also);
    let (ns, name) = case.canary.split_once('/').unwrap();
    let mut canary = find(&all, "Canary", name)
        .unwrap_or_else(|| panic!("{}: no Canary {name}", case.fixture))
        .clone();
    canary["metadata"]["namespace"] = json!(ns);
    all.extend(cluster_only.iter().cloned());
    let live_only: BTreeSet<String> = cluster_only
        .iter()
        .flat_map(|o| {
            let key = format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            );
            [format!("{key}-primary"), key]
        })
        .collect();
    let want: BTreeMap<String, Json> = flagger_at_rest(&canary, &all, case.router)
        .into_iter()
        .filter(|(k, _)| !live_only.contains(k))
        .map(|(k, mut v)| {
            scrub(&mut v);
            (k, v)
        })
        .collect();
    let got = rendered(at, case.canary);
    let label = format!("{} {}", case.fixture, case.canary);
    let mut wrong = Vec::new();
    for (key, flagger) in &want {
        match got.get(key) {
            Some(sluice) => {
                let (mut flagger, mut sluice) = (flagger.clone(), sluice.clone());
                let autoscaled = canary["spec"]["autoscalerRef"].is_object();
                known(key, &mut flagger, &mut sluice, autoscaled, used);
                let mut out = Vec::new();
                differences(&flagger, &sluice, key, &mut out);
                wrong.extend(out.into_iter().map(|d| format!("{label}: {d}")));
            }
            None => wrong.push(format!(
                "{label}: {key}: Flagger has it, sluice renders none"
            )),
        }
    }
    for key in got.keys().filter(|k| !want.contains_key(*k)) {
        wrong.push(format!(
            "{label}: {key}: sluice renders it, Flagger has none"
        ));
    }
    wrong
}

#[test]
fn first_render_on_each_adopted_fixture_equals_flaggers_objects_at_rest() {
    let mut wrong = Vec::new();
    let mut used = BTreeSet::new();
    let mut renders = BTreeMap::new();
    for case in CASES {
        if !renders.contains_key(case.fixture) {
            let dir = checkout(case.fixture, &[]);
            let (code, out, err) = adopt(dir.path(), case.args);
            assert_eq!(code, 0, "{}: {out}{err}", case.fixture);
            let tmp = render_adopted(dir.path());
            renders.insert(case.fixture, (dir, tmp));
        }
        let root = repo_root()
            .join("e2e/fixtures/adopt")
            .join(case.fixture)
            .join("repo");
        let at = renders[case.fixture].1.path().join("rendered");
        wrong.extend(compare(case, &root, &at, &[], &mut used));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        [
            "autoscaler-owns-replicas",
            "flux-keys-off-the-target",
            "managed-by",
            "primary-metadata-labels",
            "replicas-default-1",
            "service-app-label",
            "service-type-default",
        ],
        "a known difference is gone: take its rule out of `known`"
    );
}

/// A Secret the target references that only the cluster holds (an ExternalSecret's, say):
/// Flagger's primary runs with its copy `<name>-primary`. Under the adoption hold sluice's
/// first render points the primary at that copy too, so its pod template is Flagger's and
/// no pod restarts; the canary keeps the Secret's own name, and sluice writes neither Secret.
#[test]
fn a_secret_only_the_cluster_holds_keeps_the_primary_on_flaggers_copy() {
    const DEPLOYMENT: &str = "clusters/my-cluster/apps/golang-api/deployment.yaml";
    let case = &CASES[0];
    assert_eq!(case.fixture, "flux-driv");
    let (dir, _) = adopt_edited("flux-driv", DEPLOYMENT, PULL_POLICY, WITH_SECRET);
    let tmp = render_adopted(dir.path());
    let at = tmp.path().join("rendered");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "golang-api-token", "namespace": "default"},
        "data": {"token": "dA=="}});
    let wrong = compare(case, dir.path(), &at, &[secret], &mut BTreeSet::new());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let primary =
        std::fs::read_to_string(at.join("deploy/default/golang-api/golang-api-primary.yaml"))
            .unwrap();
    assert!(
        primary.contains("name: golang-api-token-primary"),
        "{primary}"
    );
    let canary =
        std::fs::read_to_string(at.join("deploy/default/golang-api/golang-api-canary.yaml"))
            .unwrap();
    assert!(canary.contains("name: golang-api-token\n"), "{canary}");
}
