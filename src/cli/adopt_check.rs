//! `sluice adopt check`: reads the repo and the cluster and prints, for the switch from
//! Flagger, what holds and whether it is safe to go on (the decision is
//! [`crate::adopt::check`]'s). `sluice adopt release`: commits the removal of
//! `adoption.hold` from the repo settings, as one audited commit by a named operator.
//!
//! adopt check runs as the operator, with the operator's kubeconfig (not the install's
//! ServiceAccount): it reads Deployments, Services and Flagger's Canaries, which the install
//! does not grant sluice.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value as Json;

use crate::adopt::check::{check, CanaryObserved, LivePrimary, Observed, Scale};
use crate::cli::repo::{read_root, SourceArgs};
use crate::core::model::Target;
use crate::manifest::settings::SETTINGS_PATH;
use crate::readers::status::{settings_of, Checkout};
use crate::render::status_file;
use crate::runtime::Runtime;
use crate::yaml::snapshot::Snapshot;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Flagger's Deployment, as NAMESPACE/NAME.
    #[arg(long, default_value = "flagger-system/flagger")]
    pub flagger: String,
}

pub fn run_check(args: &CheckArgs) -> anyhow::Result<i32> {
    let (root, _kept) = read_root(&args.source)?;
    let files = Checkout(&root);
    let (settings, broken) = settings_of(&files);
    if let Some(why) = broken {
        eprintln!("{why}");
        return Ok(1);
    }
    let snapshot = Snapshot::read(&root);
    let loaded = crate::manifest::load::load(&snapshot, &settings);
    if let Some(e) = loaded.errors.first() {
        eprintln!("{e}; fix the repo first (sluice adopt check reads every canary)");
        return Ok(1);
    }
    let Some((flagger_ns, flagger_name)) = args.flagger.split_once('/') else {
        anyhow::bail!(
            "--flagger: expected NAMESPACE/NAME, found {:?}",
            args.flagger
        );
    };
    let runtime = Runtime::from_env()?;
    let observed = runtime.block_on(async {
        let Some(client) = runtime.kube_client().await else {
            anyhow::bail!("no Kubernetes client: set KUBECONFIG (or run in the cluster)");
        };
        let flagger = get(
            &client,
            ("apps", "v1", "Deployment"),
            "deployments",
            flagger_ns,
            flagger_name,
        )
        .await?
        .map(|d| Scale {
            wanted: d["spec"]["replicas"].as_i64().unwrap_or(1),
            running: d["status"]["replicas"].as_i64().unwrap_or(0),
        });
        let mut canaries = Vec::new();
        for c in &loaded.canaries {
            if matches!(c.target, Target::RouteOnly { .. }) {
                continue;
            }
            let has_status = root.join(status_file::path_for(&c.id)).is_file();
            let rendered = rendered_primary(&root.join(c.output.as_str()));
            let Some((kind, primary, template)) = rendered else {
                canaries.push(unrendered(c));
                continue;
            };
            canaries.push(observe(&client, c, (kind, primary, template), has_status).await?);
        }
        Ok(Observed {
            hold: settings.adoption_hold,
            flagger: (args.flagger.clone(), flagger),
            canaries,
        })
    })?;
    let answer = check(&observed);
    for line in &answer.lines {
        outln!("{} {}", if line.ok { "ok  " } else { "FAIL" }, line.text);
    }
    if answer.safe {
        outln!("safe to go on: {}", answer.next.what(&observed));
        Ok(0)
    } else {
        outln!(
            "not safe to go on; the next step would be: {}",
            answer.next.what(&observed)
        );
        Ok(1)
    }
}

/// A canary sluice has not rendered (no primary in its output folder).
fn unrendered(c: &crate::manifest::model::Canary) -> CanaryObserved {
    CanaryObserved {
        id: c.id.to_string(),
        primary: "its primary".into(),
        rendered: None,
        live: None,
        canary_live: true,
        owned: Vec::new(),
    }
}

/// The cluster's side of one rendered canary.
async fn observe(
    client: &kube::Client,
    c: &crate::manifest::model::Canary,
    (kind, primary, template): (String, String, Json),
    has_status: bool,
) -> anyhow::Result<CanaryObserved> {
    let ns = c.id.namespace.as_str();
    let plural = if kind == "DaemonSet" {
        "daemonsets"
    } else {
        "deployments"
    };
    let live = get(client, ("apps", "v1", kind.as_str()), plural, ns, &primary).await?;
    let canary = get(
        client,
        ("flagger.app", "v1beta1", "Canary"),
        "canaries",
        ns,
        c.id.name.as_str(),
    )
    .await?;
    let mut owned = Vec::new();
    if live.as_ref().is_some_and(owned_by_canary) {
        owned.push(format!("{kind} {primary}"));
    }
    let service = c.service.name.as_str();
    for name in [
        service.to_string(),
        format!("{service}-primary"),
        format!("{service}-canary"),
    ] {
        let found = get(client, ("", "v1", "Service"), "services", ns, &name).await?;
        if found.as_ref().is_some_and(owned_by_canary) {
            owned.push(format!("Service {name}"));
        }
    }
    Ok(CanaryObserved {
        id: c.id.to_string(),
        primary: format!("{kind} {ns}/{primary}"),
        rendered: has_status.then_some(template),
        live: live.map(|d| LivePrimary {
            available: available(&d),
            template: d["spec"]["template"].clone(),
        }),
        canary_live: canary.is_some(),
        owned,
    })
}

/// The primary workload sluice wrote in `output` (its file also holds the primary's
/// ConfigMaps and Secrets): its kind, name and pod template.
fn rendered_primary(output: &std::path::Path) -> Option<(String, String, Json)> {
    let entries = std::fs::read_dir(output).ok()?;
    let mut names: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("-primary.yaml"))
        .collect();
    names.sort();
    names.into_iter().find_map(|name| {
        let text = std::fs::read_to_string(output.join(&name)).ok()?;
        let docs: Vec<Json> = serde_saphyr::from_multiple(&text).ok()?;
        let doc = docs
            .into_iter()
            .find(|d| matches!(d["kind"].as_str(), Some("Deployment" | "DaemonSet")))?;
        let kind = doc["kind"].as_str()?.to_string();
        let name = doc["metadata"]["name"].as_str()?.to_string();
        Some((kind, name, doc["spec"]["template"].clone()))
    })
}

/// A controller ownerReference to a Flagger Canary.
fn owned_by_canary(object: &Json) -> bool {
    object["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "Canary"))
}

/// A Deployment with all its replicas available (its `Available` condition true), or a
/// DaemonSet with every scheduled pod available.
fn available(d: &Json) -> bool {
    let status = &d["status"];
    if d["kind"] == "DaemonSet" {
        let want = status["desiredNumberScheduled"].as_i64().unwrap_or(0);
        return status["numberAvailable"].as_i64().unwrap_or(0) >= want;
    }
    let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
    let condition = status["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Available" && c["status"] == "True")
    });
    condition && status["availableReplicas"].as_i64().unwrap_or(0) >= want
}

/// One object, `None` when the API server says it is not there (the kind unknown included:
/// a removed CRD has no Canaries).
async fn get(
    client: &kube::Client,
    (group, version, kind): (&str, &str, &str),
    plural: &str,
    ns: &str,
    name: &str,
) -> anyhow::Result<Option<Json>> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    match api.get_opt(name).await {
        Ok(found) => Ok(found.map(serde_json::to_value).transpose()?),
        Err(e) => anyhow::bail!("cannot read {kind} {ns}/{name}: {e}"),
    }
}

#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub repo: crate::cli::manual::OperationRepo,
    /// Why: recorded in the commit (Sluice-Reason trailer).
    #[arg(long, default_value = "the switch from Flagger is done")]
    pub reason: String,
    /// Who: "Name <email>" (default: git's user.name and user.email).
    #[arg(long = "as")]
    pub operator: Option<String>,
}

pub fn run_release(args: &ReleaseArgs) -> anyhow::Result<i32> {
    let operator = crate::cli::manual::operator(args.operator.as_deref())?;
    let mut opened = args.repo.open()?;
    let runtime = Runtime::from_env()?;
    match crate::manual::release_adoption(
        &mut opened.locked.repo,
        &runtime,
        &operator,
        &args.reason,
    ) {
        Ok(subject) => {
            outln!("{subject}");
            Ok(0)
        }
        Err(crate::manual::ReleaseError::NotHeld) => {
            eprintln!("{SETTINGS_PATH} sets no adoption.hold: nothing to release");
            Ok(1)
        }
        Err(e) => Err(e.into()),
    }
}
