//! What `sluice adopt` writes into `.sluice/config.yaml` (Flagger's provider and metrics
//! server, the outputs' sync target, the adoption hold) and the runbook it prints: the switch
//! from Flagger in order, each step an exact command. Pure text.

use crate::adopt::change::{Change, KEEP_ARGOCD, KEEP_FLUX, OUTPUTS, OUTPUTS_APPLIER};
use crate::adopt::discover::{Discovery, Engine};

/// What the operator tells adopt about a Flagger install the repo does not hold (installed
/// with `helm install` or by another repo): its `meshProvider` and `metricsServer`.
#[derive(Debug, Default, Clone)]
pub struct Given {
    pub provider: Option<String>,
    pub metrics_server: Option<String>,
    /// The `forge:` line to write (`forge: {kind: ..., repository: ...}`), already checked.
    pub forge: Option<String>,
}

/// The settings file, and notes on what it could not take from Flagger's install. What the
/// operator `gave` (`--provider`, `--metrics-server`) wins over the install's values.
pub fn settings(found: &Discovery, gave: &Given) -> (String, Vec<String>) {
    let mut notes = Vec::new();
    let mut out = String::from("# Written by `sluice adopt`");
    match &found.flagger {
        Some(f) => out.push_str(&format!(
            " from Flagger's install, {} {} ({}:{}).\n",
            f.kind, f.name, f.file, f.line
        )),
        None => out.push_str(".\n"),
    }
    out.push_str("apiVersion: sluice.dev/v1alpha1\nkind: Config\n");
    let provider = match (&gave.provider, &found.flagger) {
        (Some(p), f) => {
            if let Some((f, theirs)) = f
                .as_ref()
                .and_then(|f| f.mesh_provider.as_ref().map(|m| (f, m)))
                .filter(|(_, m)| *m != p)
            {
                notes.push(format!(
                    "provider: {p} from --provider, not {theirs}, the meshProvider of {}:{}",
                    f.file, f.line
                ));
            }
            Some(p.clone())
        }
        (None, Some(f)) => Some(f.mesh_provider.clone().unwrap_or_else(|| {
            notes.push(format!(
                "provider: istio, Flagger's default: {}:{} sets no meshProvider",
                f.file, f.line
            ));
            "istio".into()
        })),
        (None, None) => {
            notes.push("provider: not written: no HelmRelease or Application of the flagger chart in the repo; canaries without spec.provider need `provider` in .sluice/config.yaml: pass Flagger's meshProvider as --provider".into());
            None
        }
    };
    if let Some(p) = provider {
        match crate::route::parse_provider(&p) {
            Ok(_) => out.push_str(&format!("provider: {}\n", crate::adopt::text::scalar(&p))),
            Err(e) => notes.push(format!(
                "provider: {p} (Flagger's meshProvider) not written: {e}"
            )),
        }
    }
    out.push_str(&format!("output: {OUTPUTS}/{{namespace}}/{{name}}\n"));
    if let Some(forge) = &gave.forge {
        out.push_str(forge);
    }
    if let Some(address) = metrics_address(found, gave, &mut notes) {
        out.push_str(&format!(
            "prometheus:\n  address: {}\n",
            crate::adopt::text::scalar(&address)
        ));
    }
    let namespace = found
        .canaries
        .first()
        .map_or("flux-system", |c| c.applier.namespace.as_str());
    match found.engine {
        Engine::Flux => out.push_str(&format!(
            "sync: {{flux: {{kustomization: {OUTPUTS_APPLIER}, namespace: {namespace}}}}}\n"
        )),
        Engine::ArgoCd => out.push_str(&format!(
            "sync: {{argocd: {{application: {OUTPUTS_APPLIER}, namespace: {namespace}}}}}\n"
        )),
    }
    out.push_str("# Until `sluice adopt release`: sluice commits only its first render of each canary,\n# what Flagger has live at rest, and moves no traffic (docs/adopt.md).\nadoption:\n  hold: true\n");
    (out, notes)
}

/// Flagger's metrics server: `metricsServer`, else the chart's own Prometheus, else the
/// chart's default.
fn metrics_address(found: &Discovery, gave: &Given, notes: &mut Vec<String>) -> Option<String> {
    if let Some(m) = &gave.metrics_server {
        return Some(m.clone());
    }
    let f = found.flagger.as_ref()?;
    if let Some(m) = &f.metrics_server {
        return Some(m.clone());
    }
    let ns = f.namespace.as_deref().unwrap_or("default");
    if f.bundled_prometheus {
        let address = format!("http://{}-prometheus.{ns}:9090", f.deployment);
        notes.push(format!("prometheus.address: {address}, the Prometheus Flagger's chart installs (prometheus.install: true): it goes when Flagger is removed. Install a Prometheus of your own and change the address before step 6"));
        return Some(address);
    }
    let address = format!("http://prometheus.{ns}:9090");
    notes.push(format!("prometheus.address: {address}, the chart's default metricsServer (http://prometheus:9090 in Flagger's namespace): check it"));
    Some(address)
}

/// The steps from Flagger to sluice, in order, with the exact commands.
pub fn runbook(found: &Discovery, change: &Change, branch: &str, repo_url: &str) -> String {
    let engine = match found.engine {
        Engine::Flux => "Flux",
        Engine::ArgoCd => "Argo CD",
    };
    let mut out = format!(
        "Runbook: from Flagger to sluice without moving traffic. `sluice adopt check --repo {repo_url}`\ntells at each step whether it is safe to go on.\n\n"
    );
    let (keep, applied) = match found.engine {
        Engine::Flux => (
            KEEP_FLUX,
            "flux get kustomizations shows its revision applied",
        ),
        Engine::ArgoCd => (KEEP_ARGOCD, "argocd app get shows it synced"),
    };
    out.push_str(&format!(
        "1. Merge the branch's first commit alone (git merge {branch}~1) and wait until {engine} has\n   applied it ({applied}). It only annotates the sources' objects\n   ({}: {}), so the next merge, which takes their files away, does not delete\n   them: a deleted Canary would take its <name>-primary and Services with it.\n",
        keep.0, keep.1
    ));
    out.push_str(&format!(
        "2. With sluice running on the repo (`sluice run --repo {repo_url}`), merge the branch {branch}.\n   The hold (adoption.hold in .sluice/config.yaml) lets sluice commit only its first render of each\n   canary, what Flagger has live at rest (weights 100/0); {engine} then applies the outputs through\n   {OUTPUTS_APPLIER} ({}) and no longer the sources.\n",
        change.outputs_file
    ));
    out.push_str(&format!("3. sluice adopt check --repo {repo_url}\n"));
    match &found.flagger {
        Some(f) => out.push_str(&format!(
            "4. kubectl -n {} scale deploy/{} --replicas=0\n",
            f.namespace.as_deref().unwrap_or("default"),
            f.deployment
        )),
        None => out.push_str("4. Scale Flagger to 0 where it runs (its install is not in the repo): kubectl -n <flagger-namespace> scale deploy/flagger --replicas=0\n"),
    }
    out.push_str("5. Delete each Canary without its objects (Flagger owns <name>-primary and its Services; a plain\n   delete would take them down while they serve):\n");
    for c in &found.canaries {
        out.push_str(&format!(
            "   kubectl -n {} delete canary {} --cascade=orphan\n",
            c.namespace, c.name
        ));
    }
    match &found.flagger {
        Some(f) => out.push_str(&format!(
            "6. Remove Flagger: delete its {} {} ({}:{}) from the repo, commit and push; {engine} uninstalls it.\n",
            f.kind, f.name, f.file, f.line
        )),
        None => out.push_str("6. Remove Flagger the way it was installed.\n"),
    }
    out.push_str(&format!("7. sluice adopt release --repo {repo_url}\n"));
    out
}
