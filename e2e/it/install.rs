//! Shipping: the install manifests, the Flux and Argo CD examples, the Dockerfile and the
//! release workflow. Manifests with an upstream schema are validated against the strict copy in
//! e2e/schemas; RBAC and wiring (probes, ports, Secret keys, volumes) are checked field by
//! field; `kubectl kustomize` runs when kubectl is installed.

use std::path::Path;
use std::process::Command;

use sluice::cli::run::{DEFAULT_LISTEN, DEFAULT_PORT, DEFAULT_PROBE_LISTEN};

use crate::support::{read_repo_file as read, repo_root as root, repo_yaml as yaml};

use crate::support::{kustomize_text, run_ok, Schemas};

fn yaml_files(dir: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
        .collect();
    files.sort();
    files
}

#[test]
fn manifests_validate_against_the_strict_schemas() {
    let mut schemas = Schemas::default();
    let mut checked = Vec::new();
    for file in [
        "examples/install/deployment.yaml",
        "examples/install/service.yaml",
        "examples/flux/gitrepository.yaml",
        "examples/flux/kustomization-podinfo.yaml",
        "examples/argocd/application-podinfo.yaml",
    ] {
        let doc = yaml(file);
        let errors = schemas.errors(&doc);
        assert!(errors.is_empty(), "{file}:\n{}", errors.join("\n"));
        checked.push(Schemas::file_for(&doc));
    }
    assert_eq!(
        checked,
        [
            "deployment.apps_v1-strict.json",
            "service.core_v1-strict.json",
            "gitrepository.source.toolkit.fluxcd.io_v1-strict.json",
            "kustomization.kustomize.toolkit.fluxcd.io_v1-strict.json",
            "application.argoproj.io_v1alpha1-strict.json",
        ]
    );
}

#[test]
fn the_strict_schemas_catch_a_misspelt_field() {
    // Guards the test above: a strict schema must reject what the API server would prune.
    let mut schemas = Schemas::default();
    let mut doc = yaml("examples/install/deployment.yaml");
    doc["spec"]["template"]["spec"]["containers"][0]["readinesProbe"]["httpget"] =
        doc["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"].clone();
    assert!(!schemas.errors(&doc).is_empty());
}

#[test]
fn kustomization_lists_every_install_manifest() {
    let k = yaml("examples/install/kustomization.yaml");
    assert_eq!(k["apiVersion"], "kustomize.config.k8s.io/v1beta1");
    assert_eq!(k["namespace"], "sluice-system");
    let mut listed: Vec<String> = k["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("string").to_string())
        .collect();
    for file in &listed {
        assert!(
            root().join("examples/install").join(file).is_file(),
            "{file} is listed but missing"
        );
    }
    listed.sort();
    let mut present = yaml_files("examples/install");
    present.retain(|f| f != "kustomization.yaml");
    assert_eq!(
        listed, present,
        "every manifest in the folder is listed, and only those"
    );
}

#[test]
fn kubectl_kustomize_builds_the_install_when_kubectl_is_present() {
    let Some(text) = kustomize_text(&root().join("examples/install"), &[]) else {
        eprintln!("kubectl not installed: checked the resource list only");
        return;
    };
    for kind in [
        "kind: Namespace",
        "kind: ServiceAccount",
        "kind: ClusterRole",
        "kind: ClusterRoleBinding",
        "kind: Deployment",
        "kind: Service",
        "kind: NetworkPolicy",
    ] {
        assert!(text.contains(kind), "{kind} missing from\n{text}");
    }
    // The name the release workflow publishes, at the version this tree builds.
    assert!(
        text.contains(&format!(
            "image: ghcr.io/sluice-dev/sluice:{}",
            sluice::cli::version::VERSION
        )),
        "{text}"
    );
}

/// The port of sluice's default probe address; the manifests use the same one.
fn probe_port() -> u16 {
    DEFAULT_PROBE_LISTEN
        .parse::<std::net::SocketAddr>()
        .expect("an address")
        .port()
}

/// What a pod outside the allowed namespaces can reach of the install `manifests` (the
/// documents of `kubectl kustomize`'s output, or of the files): every listener sluice's own
/// argument parser and placement rule put on a non-loopback address, by what it serves, and the
/// NetworkPolicy's rules. Returns the problems found.
fn exposure_problems(manifests: &[serde_json::Value]) -> Vec<String> {
    use sluice::cli::run::{placement, Placement};
    use sluice::cli::{Cli, Command};
    let kind = |k: &str| {
        manifests
            .iter()
            .find(|d| d["kind"] == k)
            .unwrap_or_else(|| panic!("no {k} in the install"))
    };
    let (deployment, service, policy) =
        (kind("Deployment"), kind("Service"), kind("NetworkPolicy"));
    let container = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == "sluice")
        .expect("the sluice container");
    let mut argv = vec!["sluice".to_string()];
    argv.extend(
        container["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("a string argument").to_string()),
    );
    let cli =
        <Cli as clap::Parser>::try_parse_from(&argv).expect("sluice parses the install's args");
    let Command::Run(run) = cli.command else {
        panic!("the install runs `sluice run`: {argv:?}")
    };
    let mut problems = Vec::new();
    // The dashboard: off, or on loopback only (its own listener or the main one).
    let dashboard_at = match placement(run.dashboard_listen, run.listen) {
        Placement::Off => None,
        Placement::Main => Some(run.listen),
        Placement::Own(addr) => Some(addr),
    };
    if let Some(addr) = dashboard_at {
        if !addr.ip().is_loopback() {
            problems.push(format!(
                "the dashboard is served on {addr}, which other pods reach"
            ));
        }
    }
    // The container ports a Service or the policy can name (of every container: the
    // oauth2-proxy patch adds one), with their container, and what each serves.
    let named: Vec<(String, u16, String)> = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .flat_map(|c| {
            let owner = c["name"].as_str().expect("a container name").to_string();
            c["ports"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |p| {
                    let port =
                        u16::try_from(p["containerPort"].as_u64().expect("a port")).expect("u16");
                    let name = p["name"].as_str().expect("a named port").to_string();
                    (name, port, owner.clone())
                })
        })
        .collect();
    let serves = |(port, owner): (u16, &str)| -> Vec<String> {
        if owner != "sluice" {
            // Another container's port: what it is (the patch's authenticating proxy).
            return vec![owner.to_string()];
        }
        let mut what = Vec::new();
        if run.listen.port() == port && !run.listen.ip().is_loopback() {
            what.push("webhooks");
            if !matches!(placement(run.metrics_listen, run.listen), Placement::Own(_)) {
                what.push("metrics");
            }
        }
        if run
            .metrics_listen
            .is_some_and(|a| a.port() == port && !a.ip().is_loopback())
        {
            what.push("metrics");
        }
        if run.probe_listen.port() == port && !run.probe_listen.ip().is_loopback() {
            what.push("probes");
        }
        if dashboard_at.is_some_and(|a| a.port() == port && !a.ip().is_loopback()) {
            what.push("dashboard");
        }
        what.into_iter().map(str::to_string).collect()
    };
    let port_of = |p: &serde_json::Value| -> (u16, &str) {
        match p {
            serde_json::Value::String(name) => named
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, p, owner)| (*p, owner.as_str()))
                .unwrap_or_else(|| panic!("no container port named {name}")),
            other => (
                u16::try_from(other.as_u64().expect("a port")).expect("u16"),
                "sluice",
            ),
        }
    };
    for p in service["spec"]["ports"].as_array().expect("Service ports") {
        let what = serves(port_of(&p["targetPort"]));
        if what.is_empty() || what.iter().any(|w| w == "dashboard" || w == "probes") {
            problems.push(format!("the Service's port {} reaches {what:?}", p["name"]));
        }
    }
    // Every rule of the policy names its peers; webhooks only from the ingress namespace,
    // metrics only from the monitoring namespace.
    for rule in policy["spec"]["ingress"].as_array().expect("ingress rules") {
        let from = list(&rule["from"]);
        if from.is_empty() {
            problems.push(format!("the policy's rule {rule} admits every pod"));
        }
        let namespaces: Vec<&str> = from
            .iter()
            .map(|peer| {
                peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                    .as_str()
                    .unwrap_or("(another selector)")
            })
            .collect();
        let ports = list(&rule["ports"]);
        if ports.is_empty() {
            problems.push(format!("the policy's rule {rule} opens every port"));
        }
        for p in ports {
            let what = serves(port_of(&p["port"]));
            let what: Vec<&str> = what.iter().map(String::as_str).collect();
            let allowed = match what.as_slice() {
                ["webhooks"] | ["oauth2-proxy"] => namespaces == ["ingress-nginx"],
                ["metrics"] => namespaces == ["monitoring"],
                _ => false,
            };
            if !allowed {
                problems.push(format!(
                    "the policy admits {namespaces:?} to port {} serving {what:?}",
                    p["port"]
                ));
            }
        }
    }
    problems
}

/// No NetworkPolicy schema is among the strict schemas, so the policy is checked field by
/// field: it selects the daemon's pods, restricts ingress only; what it and the Service open
/// is checked by [`exposure_problems`].
#[test]
fn network_policy_selects_the_daemon_and_restricts_ingress() {
    let policy = yaml("examples/install/networkpolicy.yaml");
    assert_eq!(policy["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(policy["kind"], "NetworkPolicy");
    let keys: Vec<&String> = policy["spec"].as_object().expect("spec").keys().collect();
    assert_eq!(keys, ["ingress", "podSelector", "policyTypes"]);
    let pods = &yaml("examples/install/deployment.yaml")["spec"]["template"]["metadata"]["labels"];
    assert_eq!(&policy["spec"]["podSelector"]["matchLabels"], pods);
    assert_eq!(
        policy["spec"]["policyTypes"],
        serde_json::json!(["Ingress"])
    );
}

/// The install serves no dashboard byte to a pod outside the allowed namespaces: the listener
/// flags (parsed by sluice's own parser, placed by its own rule), the Service's ports and the
/// NetworkPolicy's rules, for the install and for its oauth2-proxy patch (which puts the
/// dashboard behind a login on the `http` port).
#[test]
fn the_install_serves_no_dashboard_to_other_pods() {
    let manifests: Vec<serde_json::Value> = [
        "examples/install/deployment.yaml",
        "examples/install/service.yaml",
        "examples/install/networkpolicy.yaml",
    ]
    .into_iter()
    .map(yaml)
    .collect();
    assert_eq!(exposure_problems(&manifests), Vec::<String>::new());

    // The check sees each way of exposing it: the dashboard on the webhook listener, on a
    // listener of its own on every address, a Service port to it, an open policy rule.
    let args = |manifests: &mut [serde_json::Value], from: &str, to: &str| {
        let list = manifests[0]["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array_mut()
            .expect("args");
        let at = list.iter().position(|a| a == from).expect(from);
        list[at] = serde_json::json!(to);
    };
    let mut on_webhooks = manifests.clone();
    args(&mut on_webhooks, "127.0.0.1:8724", "0.0.0.0:8723");
    assert!(!exposure_problems(&on_webhooks).is_empty());
    let mut everywhere = manifests.clone();
    args(&mut everywhere, "127.0.0.1:8724", "0.0.0.0:8724");
    assert!(!exposure_problems(&everywhere).is_empty());
    let mut open = manifests.clone();
    open[2]["spec"]["ingress"][0]
        .as_object_mut()
        .expect("rule")
        .remove("from");
    assert!(!exposure_problems(&open).is_empty());
    let mut metrics_from_anyone = manifests.clone();
    metrics_from_anyone[2]["spec"]["ingress"][1]["from"][0]["namespaceSelector"]["matchLabels"]
        ["kubernetes.io/metadata.name"] = serde_json::json!("default");
    assert!(!exposure_problems(&metrics_from_anyone).is_empty());

    // The oauth2-proxy patch, as kustomize builds it.
    let restrictor = ["--load-restrictor", "LoadRestrictionsNone"];
    let Some(text) = kustomize_text(oauth2_overlay().path(), &restrictor) else {
        eprintln!("kubectl not installed: checked the install's own files only");
        return;
    };
    let built: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).expect("kustomize's output");
    assert_eq!(exposure_problems(&built), Vec::<String>::new());
}

/// An overlay of the install with the oauth2-proxy patch, as its header tells users to write
/// it: a folder beside examples/install (kustomize takes relative paths only).
fn oauth2_overlay() -> tempfile::TempDir {
    overlay(
        "resources: [../install]\n\
         patches: [{path: ../install/dashboard-oauth2-proxy/oauth2-proxy.yaml}]\n",
    )
}

/// A user's overlay of the install: a folder beside examples/install holding a
/// kustomization.yaml of `body` (after its apiVersion and kind).
fn overlay(body: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("install-overlay-test-")
        .tempdir_in(root().join("examples"))
        .expect("temp dir beside examples/install");
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n{body}"),
    )
    .expect("write the overlay");
    dir
}

#[test]
fn deployment_runs_the_daemon_as_documented() {
    let d = yaml("examples/install/deployment.yaml");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "sluice");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    let c = &pod["containers"][0];
    assert_eq!(
        c["args"],
        serde_json::json!([
            "run",
            "--repo",
            "$(SLUICE_REPO)",
            "--listen",
            format!("0.0.0.0:{DEFAULT_PORT}"),
            "--metrics-listen",
            "0.0.0.0:8725",
            "--probe-listen",
            format!("0.0.0.0:{}", probe_port()),
            "--dashboard-listen",
            "127.0.0.1:8724",
        ])
    );
    assert_eq!(c["ports"][0]["containerPort"], DEFAULT_PORT);
    assert_eq!(c["ports"][0]["name"], "http");
    assert_eq!(c["ports"][1]["containerPort"], 8725);
    assert_eq!(c["ports"][1]["name"], "metrics");
    assert_eq!(c["ports"][2]["containerPort"], probe_port());
    assert_eq!(c["ports"][2]["name"], "probes");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The kubelet probes the listener of its own, which a flood of the webhook port cannot
    // take.
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], "probes");
    }
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);

    let env = c["env"].as_array().expect("env");
    let var = |name: &str| {
        env.iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{name} not set"))
    };
    // $(SLUICE_REPO) in args expands only from a variable the container defines.
    assert!(var("SLUICE_REPO")["value"].is_string());
    assert_eq!(var("SLUICE_WORKDIR")["value"], "/var/cache/sluice/repo");
    for secret in [
        "SLUICE_GIT_TOKEN",
        "SLUICE_FORGE_TOKEN",
        "SLUICE_WEBHOOK_SECRET",
    ] {
        let r = &var(secret)["valueFrom"]["secretKeyRef"];
        assert_eq!(r["name"], "sluice-credentials", "{secret}");
        assert_eq!(r["key"], secret);
    }
    assert_eq!(
        sluice::server::WEBHOOK_SECRET_ENV,
        "SLUICE_WEBHOOK_SECRET",
        "the manifest and the server agree on the variable"
    );

    let mounts = c["volumeMounts"].as_array().expect("mounts");
    // No credential is required: an https remote, every Secret key optional, no Secret
    // volume in the base (components/git-ssh adds the ssh remote's).
    assert!(var("SLUICE_REPO")["value"]
        .as_str()
        .unwrap()
        .starts_with("https://"));
    for e in env {
        if let Some(r) = e["valueFrom"].get("secretKeyRef") {
            assert_eq!(r["optional"], true, "{e}");
        }
    }
    assert!(pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .all(|v| v.get("secret").is_none() && v.get("projected").is_none()));

    // The work dir is writable (an emptyDir) although the root filesystem is not.
    let workdir = mounts
        .iter()
        .find(|m| m["mountPath"] == "/var/cache/sluice")
        .expect("work dir mounted");
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == workdir["name"])
        .expect("work dir volume");
    assert!(volume["emptyDir"].is_object(), "{volume}");

    let svc = yaml("examples/install/service.yaml");
    assert_eq!(svc["spec"]["ports"][0]["port"], DEFAULT_PORT);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(
        svc["spec"]["selector"],
        d["spec"]["template"]["metadata"]["labels"]
    );
}

#[test]
fn flux_and_argocd_apply_the_same_sluice_output_folder() {
    let k = yaml("examples/flux/kustomization-podinfo.yaml");
    let git = yaml("examples/flux/gitrepository.yaml");
    let app = yaml("examples/argocd/application-podinfo.yaml");
    assert_eq!(k["spec"]["path"], "./clusters/prod/podinfo");
    assert_eq!(k["spec"]["sourceRef"]["kind"], "GitRepository");
    assert_eq!(k["spec"]["sourceRef"]["name"], git["metadata"]["name"]);
    assert_eq!(app["spec"]["source"]["path"], "clusters/prod/podinfo");
    assert_eq!(app["spec"]["source"]["repoURL"], git["spec"]["url"]);
    // The folder is where sluice writes prod/podinfo by default.
    let settings = sluice::manifest::settings::Settings::default();
    assert_eq!(
        settings.output_for("prod", "podinfo").unwrap().as_str(),
        "clusters/prod/podinfo"
    );
}

#[test]
fn dockerfile_builds_locked_and_runs_unprivileged() {
    let text = read("Dockerfile");
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let from: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(
        from,
        [
            &"FROM rust:1-bookworm AS build",
            &"FROM debian:bookworm-slim"
        ]
    );
    assert!(text.contains("cargo build --release --locked"));
    assert!(text.contains("ca-certificates"));
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("install") && l.split_whitespace().any(|w| w == "git")),
        "the runtime needs no git (libgit2 is vendored)"
    );
    assert!(lines.contains(&"USER 65532:65532"));
    // The daemon's default port, and the probe port the install manifest binds.
    let expose = format!("EXPOSE {DEFAULT_PORT} 8725 8081");
    assert!(
        lines.contains(&expose.as_str()),
        "the daemon's default port, the metrics port and the probe port"
    );
    assert!(lines.contains(&r#"ENTRYPOINT ["/usr/local/bin/sluice"]"#));
    assert!(lines.contains(&r#"CMD ["run"]"#));
    assert_eq!(lines.last(), Some(&r#"CMD ["run"]"#));
    // Cargo.lock is what --locked builds from; it must be committed, not ignored.
    assert!(Path::new(&root().join("Cargo.lock")).is_file());
    let ignored = read(".dockerignore");
    assert!(!ignored.lines().any(|l| l.trim() == "Cargo.lock"));
}

#[test]
fn release_workflow_pushes_the_image_on_version_tags() {
    let wf = yaml(".github/workflows/release.yml");
    // serde-saphyr reads the key `on` as a string key (YAML 1.2 core schema).
    assert_eq!(wf["on"]["push"]["tags"], serde_json::json!(["v*"]));
    assert_eq!(wf["permissions"]["packages"], "write");
    let steps = wf["jobs"]["image"]["steps"].as_array().expect("steps");
    let build = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("docker/build-push-action@"))
        })
        .expect("build-push-action step");
    assert_eq!(build["with"]["push"], true);
    let login = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("docker/login-action@"))
        })
        .expect("login step");
    assert_eq!(login["with"]["registry"], "ghcr.io");
}

/// A sluice next to a local Prometheus, Flagger, Grafana or an exporter starts: the default
/// port is none of theirs, and the clap default, the Dockerfile and the manifests agree.
#[test]
fn the_default_listen_port_is_no_common_neighbours() {
    let addr: std::net::SocketAddr = DEFAULT_LISTEN.parse().expect("an address");
    assert!(addr.ip().is_loopback(), "listens on loopback unless told");
    assert_eq!(addr.port(), DEFAULT_PORT);
    let taken: &[(u16, &str)] = &[
        (3000, "Grafana"),
        (8080, "Flagger's metrics, most web apps"),
        (8081, "kube-state-metrics telemetry"),
        (9090, "Prometheus"),
        (9091, "Pushgateway"),
        (9093, "Alertmanager"),
        (9094, "Alertmanager cluster"),
        (9440, "controller-runtime health probes"),
        (9443, "admission webhooks"),
        (9901, "Envoy admin"),
        (10250, "kubelet"),
    ];
    for (port, who) in taken {
        assert_ne!(DEFAULT_PORT, *port, "{who} uses {port}");
    }
    assert!(
        !(9100..=9999).contains(&DEFAULT_PORT),
        "9100-9999 is Prometheus's allocated exporter range"
    );
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--help"])
        .output()
        .expect("sluice run --help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains(&format!("[default: {DEFAULT_LISTEN}]")),
        "{help}"
    );
    // The probe listener too stays on loopback unless told (the manifest tells it).
    let probes: std::net::SocketAddr = DEFAULT_PROBE_LISTEN.parse().expect("an address");
    assert!(probes.ip().is_loopback());
    assert!(
        help.contains(&format!("[default: {DEFAULT_PROBE_LISTEN}]")),
        "{help}"
    );
}

/// The components under examples/install/components, by folder name.
fn components() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("examples/install/components"))
        .expect("components/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The items of the array `value`; none when it is missing or not an array.
fn list(value: &serde_json::Value) -> &[serde_json::Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// `kubectl kustomize` of `dir`, its documents; `None` without kubectl.
fn kustomize(dir: &Path) -> Option<Vec<serde_json::Value>> {
    kustomize_text(dir, &[]).map(|text| serde_saphyr::from_multiple(&text).expect("YAML"))
}

/// `doc` read into the k8s-openapi type `T` and written back loses nothing: every field is one
/// the API knows, of the right type (for the kinds the strict schemas do not cover).
fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(
    doc: &serde_json::Value,
) -> Vec<String> {
    match serde_json::from_value::<T>(doc.clone()) {
        Err(e) => vec![format!("{}: {e}", doc["kind"])],
        Ok(typed) => {
            let back = serde_json::to_value(&typed).expect("serializes");
            if &back == doc {
                Vec::new()
            } else {
                vec![format!(
                    "{}: fields the API does not know:\n{doc:#}\nread as\n{back:#}",
                    doc["kind"]
                )]
            }
        }
    }
}

/// Every problem of one object of the install: against its strict schema when one exists,
/// through the k8s-openapi type for the other built-in kinds, field by field for the
/// Prometheus Operator's two kinds.
fn object_problems(schemas: &mut Schemas, doc: &serde_json::Value) -> Vec<String> {
    use k8s_openapi::api::{core, networking, policy, rbac};
    let file = Schemas::file_for(doc);
    if root().join("e2e/schemas").join(&file).is_file() {
        return schemas.errors(doc);
    }
    match (
        doc["apiVersion"].as_str().unwrap_or(""),
        doc["kind"].as_str().unwrap_or(""),
    ) {
        ("v1", "Namespace") => round_trips::<core::v1::Namespace>(doc),
        ("v1", "ServiceAccount") => round_trips::<core::v1::ServiceAccount>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            round_trips::<rbac::v1::ClusterRole>(doc)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            round_trips::<rbac::v1::ClusterRoleBinding>(doc)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => round_trips::<rbac::v1::Role>(doc),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            round_trips::<rbac::v1::RoleBinding>(doc)
        }
        ("networking.k8s.io/v1", "NetworkPolicy") => {
            round_trips::<networking::v1::NetworkPolicy>(doc)
        }
        ("policy/v1", "PodDisruptionBudget") => round_trips::<policy::v1::PodDisruptionBudget>(doc),
        ("monitoring.coreos.com/v1", kind @ ("ServiceMonitor" | "PodMonitor")) => {
            let endpoints = if kind == "ServiceMonitor" {
                "endpoints"
            } else {
                "podMetricsEndpoints"
            };
            let mut problems = Vec::new();
            let keys: Vec<&String> = doc["spec"].as_object().expect("spec").keys().collect();
            if keys != [endpoints, "selector"] {
                problems.push(format!("{kind}: spec has {keys:?}"));
            }
            for e in doc["spec"][endpoints].as_array().expect("endpoints") {
                let keys: Vec<&String> = e.as_object().expect("endpoint").keys().collect();
                if keys != ["interval", "path", "port"] || e["port"] != "metrics" {
                    problems.push(format!("{kind}: endpoint {e}"));
                }
            }
            if doc["spec"]["selector"]["matchLabels"]
                != serde_json::json!({"app.kubernetes.io/name": "sluice"})
            {
                problems.push(format!("{kind}: selects {}", doc["spec"]["selector"]));
            }
            problems
        }
        (api, kind) => vec![format!(
            "{api} {kind}: no schema and no check for this kind"
        )],
    }
}

/// Each component on its own, and all at once, builds with `kubectl kustomize` from a user's
/// overlay (as docs/install.md writes one), and every object of every build validates.
#[test]
fn every_component_builds_and_every_object_validates() {
    let mut schemas = Schemas::default();
    // The four engine and router components are in the install's own list already.
    let listed = ["argocd", "flux", "gateway-api", "knative"];
    let switched: Vec<String> = components()
        .into_iter()
        .filter(|c| !listed.contains(&c.as_str()))
        .collect();
    let mut builds = vec![("the install".to_string(), String::new())];
    for c in &switched {
        builds.push((
            c.clone(),
            format!("components: [../install/components/{c}]\n"),
        ));
    }
    // `shards` and `leader-election` exclude each other (sluice refuses both): every other
    // component goes with each of them.
    for (one, not) in [("leader-election", "shards"), ("shards", "leader-election")] {
        let every: Vec<String> = switched
            .iter()
            .filter(|c| c.as_str() != not)
            .map(|c| format!("../install/components/{c}"))
            .collect();
        builds.push((
            format!("every component with {one}"),
            format!("components: [{}]\n", every.join(", ")),
        ));
    }
    let mut kinds = std::collections::BTreeSet::new();
    for (what, components) in builds {
        let dir = overlay(&format!("resources: [../install]\n{components}"));
        let Some(docs) = kustomize(dir.path()) else {
            eprintln!("kubectl not installed: builds not checked");
            return;
        };
        for doc in &docs {
            let problems = object_problems(&mut schemas, doc);
            assert!(problems.is_empty(), "{what}: {problems:#?}");
            kinds.insert(format!(
                "{} {}",
                doc["apiVersion"].as_str().unwrap(),
                doc["kind"].as_str().unwrap()
            ));
        }
        // Every build keeps the hardening and the dashboard off other pods.
        assert_eq!(exposure_problems(&docs), Vec::<String>::new(), "{what}");
        let deployment = docs
            .iter()
            .find(|d| d["kind"] == "Deployment")
            .expect("a Deployment");
        assert_eq!(
            hardening_problems(deployment),
            Vec::<String>::new(),
            "{what}"
        );
    }
    // The install without any of the four engine and router components still builds.
    let bare = overlay("resources: [../install/namespace.yaml, ../install/serviceaccount.yaml, ../install/clusterrole.yaml, ../install/clusterrolebinding.yaml, ../install/deployment.yaml, ../install/service.yaml, ../install/networkpolicy.yaml]\n");
    run_ok(
        Command::new("kubectl")
            .args(["kustomize", "--load-restrictor", "LoadRestrictionsNone"])
            .arg(bare.path()),
    );
    assert!(kinds.contains("policy/v1 PodDisruptionBudget"), "{kinds:?}");
    assert!(
        kinds.contains("monitoring.coreos.com/v1 ServiceMonitor"),
        "{kinds:?}"
    );
    assert!(
        kinds.contains("monitoring.coreos.com/v1 PodMonitor"),
        "{kinds:?}"
    );
    assert!(
        kinds.contains("rbac.authorization.k8s.io/v1 Role"),
        "{kinds:?}"
    );
}

/// The checks of [`object_problems`] catch a misspelt field of a kind without a schema.
#[test]
fn the_round_trip_catches_a_misspelt_field() {
    let mut schemas = Schemas::default();
    let mut pdb = yaml("examples/install/components/leader-election/poddisruptionbudget.yaml");
    assert_eq!(object_problems(&mut schemas, &pdb), Vec::<String>::new());
    pdb["spec"]["minAvaliable"] = serde_json::json!(1);
    assert!(!object_problems(&mut schemas, &pdb).is_empty());
    let mut role = yaml("examples/install/clusterrole.yaml");
    role["rules"][0]["verb"] = serde_json::json!(["get"]);
    assert!(!object_problems(&mut schemas, &role).is_empty());
}

/// What the hardened pod lacks: non-root 65532, a read-only root, every capability dropped,
/// no privilege escalation, seccomp RuntimeDefault (pod and container), resources set.
fn hardening_problems(deployment: &serde_json::Value) -> Vec<String> {
    let pod = &deployment["spec"]["template"]["spec"];
    let c = pod["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == "sluice")
        .expect("the sluice container");
    let sc = &c["securityContext"];
    let mut problems = Vec::new();
    for (what, value, want) in [
        (
            "pod runAsNonRoot",
            &pod["securityContext"]["runAsNonRoot"],
            serde_json::json!(true),
        ),
        (
            "pod runAsUser",
            &pod["securityContext"]["runAsUser"],
            serde_json::json!(65532),
        ),
        (
            "pod seccomp",
            &pod["securityContext"]["seccompProfile"]["type"],
            serde_json::json!("RuntimeDefault"),
        ),
        ("runAsNonRoot", &sc["runAsNonRoot"], serde_json::json!(true)),
        ("runAsUser", &sc["runAsUser"], serde_json::json!(65532)),
        ("runAsGroup", &sc["runAsGroup"], serde_json::json!(65532)),
        (
            "readOnlyRootFilesystem",
            &sc["readOnlyRootFilesystem"],
            serde_json::json!(true),
        ),
        (
            "allowPrivilegeEscalation",
            &sc["allowPrivilegeEscalation"],
            serde_json::json!(false),
        ),
        (
            "capabilities",
            &sc["capabilities"],
            serde_json::json!({"drop": ["ALL"]}),
        ),
        (
            "seccomp",
            &sc["seccompProfile"]["type"],
            serde_json::json!("RuntimeDefault"),
        ),
    ] {
        if *value != want {
            problems.push(format!("{what}: expected {want}, found {value}"));
        }
    }
    if !c["resources"]["requests"]["memory"].is_string()
        || !c["resources"]["limits"]["memory"].is_string()
    {
        problems.push("no memory request and limit".into());
    }
    problems
}

#[test]
fn the_pod_runs_hardened() {
    let d = yaml("examples/install/deployment.yaml");
    assert_eq!(hardening_problems(&d), Vec::<String>::new());
    let mut root_user = d.clone();
    root_user["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsUser"] =
        serde_json::json!(0);
    assert_eq!(hardening_problems(&root_user).len(), 1);
}

/// `NNN.N MiB` amounts in `text`.
fn mib_amounts(text: &str) -> Vec<f64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[1].trim_end_matches([',', ';', ')', '.']) == "MiB")
        .filter_map(|w| w[0].trim_start_matches('(').parse().ok())
        .collect()
}

/// `128Mi` as MiB.
fn quantity_mib(q: &serde_json::Value) -> f64 {
    q.as_str()
        .and_then(|q| q.strip_suffix("Mi"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a quantity in Mi: {q}"))
}

/// The memory request and limit come from the benchmark's measured RSS at 1,000 canaries
/// (docs/performance.md), cited beside them: each cited amount is one the page reports, the
/// request covers the idle daemon and the limit leaves headroom over the highest peak.
#[test]
fn resources_come_from_the_measured_rss() {
    let text = read("examples/install/deployment.yaml");
    let comment: String = text
        .lines()
        .skip_while(|l| !l.contains("From docs/performance.md"))
        .take_while(|l| l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let cited = mib_amounts(&comment);
    assert!(cited.len() >= 3, "{comment}");
    let page = read("docs/performance.md");
    let measured: Vec<f64> = page
        .lines()
        .skip_while(|l| !l.starts_with("| row (1,000 canaries)"))
        .take_while(|l| l.starts_with('|'))
        .flat_map(mib_amounts)
        .collect();
    for amount in &cited {
        assert!(
            measured.contains(amount),
            "{amount} MiB is not in docs/performance.md's table"
        );
    }
    let d = yaml("examples/install/deployment.yaml");
    let r = &d["spec"]["template"]["spec"]["containers"][0]["resources"];
    let (request, limit) = (
        quantity_mib(&r["requests"]["memory"]),
        quantity_mib(&r["limits"]["memory"]),
    );
    let peak = cited.iter().copied().fold(0.0, f64::max);
    let idle = cited[0];
    assert!(
        request >= idle,
        "request {request} Mi below the idle RSS {idle} MiB"
    );
    assert!(
        limit >= 1.5 * peak,
        "limit {limit} Mi: less than 1.5x the peak {peak} MiB"
    );
}

/// components/git-ssh: the ssh remote's key and known hosts from the Flux-style git Secret's
/// files, at the paths the variables name.
#[test]
fn the_git_ssh_component_mounts_the_flux_style_secret() {
    let patch = yaml("examples/install/components/git-ssh/deployment-patch.yaml");
    let pod = &patch["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let mount = &c["volumeMounts"][0];
    assert_eq!(mount["name"], "git-ssh");
    assert_eq!(mount["readOnly"], true);
    let folder = mount["mountPath"].as_str().unwrap();
    let env = c["env"].as_array().expect("env");
    for (variable, key) in [
        ("SLUICE_GIT_SSH_KEY_FILE", "identity"),
        ("SLUICE_GIT_KNOWN_HOSTS_FILE", "known_hosts"),
    ] {
        let e = env.iter().find(|e| e["name"] == variable).expect(variable);
        assert_eq!(e["value"], format!("{folder}/{key}"), "{variable}");
    }
    assert_eq!(pod["volumes"][0]["name"], "git-ssh");
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "sluice-git-ssh");
}

/// Whether `text` matches the regular expression `re` (ECMA 262, as Go's RE2 reads these
/// simple anchors and escapes), through a JSON Schema `pattern`.
fn matches(re: &str, text: &str) -> bool {
    jsonschema::validator_for(&serde_json::json!({"type": "string", "pattern": re}))
        .expect("a regex")
        .is_valid(&serde_json::json!(text))
}

/// The step of `steps` whose `run` or `uses` contains `needle`, and its index.
fn step<'a>(steps: &'a [serde_json::Value], needle: &str) -> (usize, &'a serde_json::Value) {
    steps
        .iter()
        .enumerate()
        .find(|(_, s)| {
            s["run"].as_str().is_some_and(|r| r.contains(needle))
                || s["uses"].as_str().is_some_and(|u| u.starts_with(needle))
        })
        .unwrap_or_else(|| panic!("no step with {needle:?}"))
}

/// The release publishes the install as an OCI artifact next to the image, pinned to the
/// image's digest, and signs it keyless as it signs the image.
#[test]
fn release_publishes_the_install_signed_with_the_image_pinned_by_digest() {
    let wf = yaml(".github/workflows/release.yml");
    let image = &wf["jobs"]["image"];
    assert_eq!(
        image["outputs"]["digest"],
        "${{ steps.build.outputs.digest }}"
    );
    assert_eq!(image["outputs"]["name"], "${{ steps.image.outputs.name }}");
    let image_steps = image["steps"].as_array().expect("steps");
    let (_, build) = step(image_steps, "docker/build-push-action@");
    let args = build["with"]["build-args"].as_str().expect("build-args");
    assert!(
        args.contains("SLUICE_GIT_COMMIT=${{ github.sha }}"),
        "{args}"
    );
    assert!(args.contains("SOURCE_DATE_EPOCH="), "{args}");
    let (_, sign_image) = step(image_steps, "cosign sign");
    assert!(sign_image["run"]
        .as_str()
        .unwrap()
        .contains("\"${IMAGE}@${DIGEST}\""));

    let job = &wf["jobs"]["manifests"];
    assert_eq!(job["needs"], "image");
    let steps = job["steps"].as_array().expect("steps");
    let (pin_at, pin) = step(steps, "kustomize edit set image");
    assert_eq!(pin["working-directory"], "examples/install");
    assert_eq!(pin["env"]["DIGEST"], "${{ needs.image.outputs.digest }}");
    assert_eq!(pin["env"]["IMAGE"], "${{ needs.image.outputs.name }}");
    assert!(pin["run"]
        .as_str()
        .unwrap()
        .contains(r#"kustomize edit set image "sluice=${IMAGE}@${DIGEST}""#));
    let (push_at, push) = step(steps, "flux push artifact");
    let run = push["run"].as_str().unwrap();
    assert!(
        run.contains(r#""oci://${IMAGE}-manifests:${version}""#),
        "{run}"
    );
    assert!(run.contains("--path=examples/install"), "{run}");
    assert!(run.contains("--output=json"), "{run}");
    assert_eq!(push["id"], "push");
    let (sign_at, sign) = step(steps, "cosign sign");
    assert_eq!(sign["env"]["DIGEST"], "${{ steps.push.outputs.digest }}");
    assert!(sign["run"]
        .as_str()
        .unwrap()
        .contains(r#"cosign sign --yes "${IMAGE}-manifests@${DIGEST}""#));
    assert!(
        pin_at < push_at && push_at < sign_at,
        "pin, push, then sign"
    );
    step(steps, "fluxcd/flux2/action@");
    step(steps, "sigstore/cosign-installer@");
    assert_eq!(wf["permissions"]["id-token"], "write");
}

/// The install with its image pinned by a digest, as the release's `kustomize edit set image`
/// leaves it, builds and names the image by digest alone.
#[test]
fn the_install_pinned_by_digest_builds() {
    let copy = tempfile::Builder::new()
        .prefix("install-pinned-test-")
        .tempdir_in(root().join("examples"))
        .expect("temp dir");
    let install = copy.path().join("install");
    let status = Command::new("cp")
        .args(["-r"])
        .arg(root().join("examples/install"))
        .arg(&install)
        .status()
        .expect("cp");
    assert!(status.success());
    let file = install.join("kustomization.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let digest = format!("sha256:{}", "ab".repeat(32));
    let pinned = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("newTag:"))
        .map(|l| {
            if l.trim_start().starts_with("newName:") {
                format!("{l}\n    digest: {digest}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&file, pinned).unwrap();
    let Some(docs) = kustomize(&install) else {
        eprintln!("kubectl not installed: not built");
        return;
    };
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("ghcr.io/sluice-dev/sluice@{digest}")
    );
}

/// The published install's address: the image's name plus `-manifests`, as the release
/// pushes it.
fn artifact_repository() -> String {
    let k = yaml("examples/install/kustomization.yaml");
    let image = k["images"][0]["newName"].as_str().expect("the image name");
    format!("{image}-manifests")
}

/// examples/install/flux: an OCIRepository that verifies the release workflow's keyless
/// signature, and a Kustomization (strict schema) of components that exist; built as Flux
/// builds it, the patch sets the config repo.
#[test]
fn the_flux_install_verifies_the_artifact_and_builds() {
    let source = yaml("examples/install/flux/ocirepository.yaml");
    // No strict schema of OCIRepository is among e2e/schemas: its fields one by one.
    assert_eq!(source["apiVersion"], "source.toolkit.fluxcd.io/v1");
    assert_eq!(source["kind"], "OCIRepository");
    let spec = &source["spec"];
    let keys: Vec<&String> = spec.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["interval", "ref", "url", "verify"]);
    assert_eq!(spec["url"], format!("oci://{}", artifact_repository()));
    assert!(spec["ref"]["semver"].is_string());
    assert_eq!(spec["verify"]["provider"], "cosign");
    let identity = &spec["verify"]["matchOIDCIdentity"][0];
    let (issuer, subject) = (
        identity["issuer"].as_str().unwrap(),
        identity["subject"].as_str().unwrap(),
    );
    assert!(matches(
        issuer,
        "https://token.actions.githubusercontent.com"
    ));
    assert!(!matches(
        issuer,
        "https://token.actions.githubusercontent.com.evil.example"
    ));
    let workflow = "https://github.com/sluice-dev/sluice/.github/workflows/release.yml";
    assert!(matches(subject, &format!("{workflow}@refs/tags/v0.1.0")));
    assert!(!matches(subject, &format!("{workflow}@refs/heads/main")));
    assert!(!matches(
        subject,
        "https://github.com/someone/sluice/.github/workflows/release.yml@refs/tags/v0.1.0"
    ));

    let mut schemas = Schemas::default();
    let k = yaml("examples/install/flux/kustomization-sluice.yaml");
    schemas.assert_valid(&k, "examples/install/flux/kustomization-sluice.yaml");
    assert_eq!(k["spec"]["sourceRef"]["kind"], "OCIRepository");
    assert_eq!(k["spec"]["sourceRef"]["name"], source["metadata"]["name"]);
    built_as_an_engine_builds(&k["spec"]["components"], &k["spec"]["patches"]);
}

/// examples/install/argocd: an Application (strict schema) of the same artifact.
#[test]
fn the_argocd_install_points_at_the_artifact_and_builds() {
    let mut schemas = Schemas::default();
    let app = yaml("examples/install/argocd/application-sluice.yaml");
    schemas.assert_valid(&app, "examples/install/argocd/application-sluice.yaml");
    let source = &app["spec"]["source"];
    assert_eq!(
        source["repoURL"],
        format!("oci://{}", artifact_repository())
    );
    assert_eq!(source["targetRevision"], sluice::cli::version::VERSION);
    assert_eq!(app["spec"]["destination"]["namespace"], "sluice-system");
    built_as_an_engine_builds(
        &source["kustomize"]["components"],
        &source["kustomize"]["patches"],
    );
}

/// The install with `components` and `patches` as Flux's or Argo CD's kustomize applies
/// them: it builds, the components exist, and SLUICE_REPO is the patched one.
fn built_as_an_engine_builds(components: &serde_json::Value, patches: &serde_json::Value) {
    let components: Vec<String> = components
        .as_array()
        .expect("components")
        .iter()
        .map(|c| format!("../install/{}", c.as_str().unwrap()))
        .collect();
    let patch = &patches[0];
    let dir = overlay(&format!(
        "resources: [../install]\ncomponents: [{}]\npatches: [{}]\n",
        components.join(", "),
        serde_json::to_string(patch).unwrap()
    ));
    let Some(docs) = kustomize(dir.path()) else {
        eprintln!("kubectl not installed: not built");
        return;
    };
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    let repo = env.iter().find(|e| e["name"] == "SLUICE_REPO").unwrap();
    assert_eq!(repo["value"], "https://github.com/example-org/fleet.git");
    assert_eq!(deployment["spec"]["replicas"], 2);
}
