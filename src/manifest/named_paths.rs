//! Every field of every kind sluice reads from the repo that names a file, a folder, a URL, a
//! host, a Secret or another object, with the one rule it is held to. The repo may never name
//! a path on the host: what it names is a path inside the repo, a Kubernetes name (of a Secret
//! the operator mapped into sluice, or of an object in the repo), a URL with what is checked
//! of it, a value sluice only copies into what it renders, or a name the operator's own setup
//! resolves.
//!
//! The table is the list docs/threat-model.md shows, row for row. A test reads the field
//! lists the spec readers pass to their unknown-field checks (`r.map(node, path, &[...])`) and
//! fails when one of them holds a path-like field (a name ending in `File`, `Path`, `Dir`,
//! `Ref`, `Url`, `Address`, `Server`, `Source`, `Host`, `Output`, ...) without a row here.
//! Data only: nothing here reads anything.

/// How a field that names something outside its own file is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A Kubernetes name of a Secret the operator mapped into sluice (`crate::secrets`): an
    /// environment variable, or a file resolved inside `SLUICE_SECRETS_DIR/<namespace>/<name>/`
    /// (links out of it refused, regular files only, at most 1 MiB). Never a path.
    Secret,
    /// A path inside the repo (`RepoPath`: relative, no `..`, no `.git`), read from the
    /// commit's tree, never from the host.
    RepoPath,
    /// The Kubernetes name of another object, looked up among the repo's own files.
    RepoObject,
    /// A URL the repo may name; the text says what is checked and what is sent to it.
    Url(&'static str),
    /// Copied into a manifest sluice renders; sluice itself never opens or asks it.
    Rendered,
    /// Compared with the values of an object in the repo to pick a part of it; never opened.
    Matched,
    /// A name the operator's own setup resolves (the text says which); the repo cannot widen it.
    Operator(&'static str),
    /// Refused at its line: it named a host path once.
    Refused,
    /// A field path of the object that passes it (an Argo Rollout's analysis args), read from
    /// that object's own document in git.
    OwnField,
    /// A path into the JSON a metric's URL answered, selecting its result; never a file.
    Answer,
    /// One of a fixed set of words (the text lists them); it names nothing outside the file.
    Choice(&'static str),
}

impl Rule {
    /// One line for the threat model.
    pub fn describe(self) -> String {
        match self {
            Rule::Secret => "a Secret's Kubernetes name, resolved inside the secrets folder the operator mounted (or `SLUICE_SECRET_*`); regular files of at most 1 MiB, no links out".into(),
            Rule::RepoPath => "a path inside the repo (relative, no `..`, no `.git`), read from git, never the host".into(),
            Rule::RepoObject => "the Kubernetes name of an object in the repo".into(),
            Rule::Url(checked) => format!("a URL: {checked}"),
            Rule::Rendered => "copied into rendered manifests; sluice never opens it".into(),
            Rule::Matched => "compared with the named object's own values to pick its route; sluice never opens or resolves it".into(),
            Rule::Operator(what) => format!("resolved by the operator's setup: {what}"),
            Rule::Refused => "refused at its line (it named a host path); name a Secret instead".into(),
            Rule::Answer => "a path into the JSON the metric's URL answered (one value: no wildcards, filters or `..`); never opened as a file or address".into(),
            Rule::OwnField => "a field path of the Rollout that passes the argument, read from its document in git (`status` refused); refused inside a template".into(),
            Rule::Choice(words) => format!("one of {words}; names no object, file or path"),
        }
    }
}

/// One field: the kind of object it is read from, its path, and its rule.
#[derive(Debug, Clone, Copy)]
pub struct NamedField {
    pub kind: &'static str,
    pub field: &'static str,
    pub rule: Rule,
}

const fn row(kind: &'static str, field: &'static str, rule: Rule) -> NamedField {
    NamedField { kind, field, rule }
}

const PROMETHEUS: &str = "http(s); queried with the template's or wave's `secretRef`, else with the operator's `SLUICE_PROMETHEUS_*` credentials, only at an origin `SLUICE_PROMETHEUS_ORIGINS` lists";

/// Every field sluice reads that names a file, folder, URL, host, Secret or object.
pub const FIELDS: &[NamedField] = &[
    row("Canary", "spec.source", Rule::RepoPath),
    row("Canary", "spec.routeSource", Rule::RepoPath),
    row("Canary", "spec.output", Rule::RepoPath),
    row("Canary", "spec.metricsServer", Rule::Url(PROMETHEUS)),
    row("Canary (Flagger)", "spec.targetRef", Rule::RepoObject),
    row("Canary (Flagger)", "spec.autoscalerRef", Rule::RepoObject),
    row("Canary (Flagger)", "spec.ingressRef", Rule::RepoObject),
    row("Canary (Flagger)", "spec.routeRef", Rule::RepoObject),
    row("Canary (Flagger)", "spec.upstreamRef", Rule::RepoObject),
    row("Rollout", "spec.workloadRef", Rule::RepoObject),
    row("Rollout", "spec.strategy.canary.stableService", Rule::RepoObject),
    row(
        "Rollout",
        "spec.strategy.canary.steps[].experiment.templates[].specRef",
        Rule::Choice("`stable` and `canary` (the pod template the experiment's workload runs)"),
    ),
    row("Rollout", "spec.strategy.canary.canaryService", Rule::RepoObject),
    row("Rollout", "spec.strategy.canary.trafficRouting.plugins.argoproj-labs/gatewayAPI.httpRoute", Rule::RepoObject),
    row("Rollout", "spec.strategy.canary.trafficRouting.plugins.argoproj-labs/gatewayAPI.grpcRoute", Rule::RepoObject),
    row("Rollout", "spec.strategy.canary.trafficRouting.plugins.argoproj-labs/gatewayAPI.tcpRoute", Rule::RepoObject),
    row("Rollout", "spec.strategy.canary.trafficRouting.plugins.argoproj-labs/gatewayAPI.tlsRoute", Rule::RepoObject),
    row("Rollout", "spec.strategy.canary.trafficRouting.istio.virtualService.name", Rule::RepoObject),
    row("Rollout", "spec.strategy.canary.trafficRouting.istio.virtualServices[].name", Rule::RepoObject),
    row("Rollout", "spec.strategy.canary.trafficRouting.istio.virtualService.tlsRoutes[].sniHosts", Rule::Matched),
    row("Rollout", "spec.strategy.canary.trafficRouting.istio.destinationRule.name", Rule::RepoObject),
    row("Canary (Flagger)", "spec.service.gatewayRefs", Rule::Rendered),
    row("Canary (Flagger)", "spec.service.hosts", Rule::Rendered),
    row("Canary (Flagger)", "spec.service.match[].uri", Rule::Rendered),
    row("Canary (Flagger)", "spec.service.mirror[].backendRef", Rule::Rendered),
    row("Canary", "spec.analysis.sessionAffinity.path", Rule::Rendered),
    row("Canary", "spec.analysis.metrics[].templateRef", Rule::RepoObject),
    row(
        "Canary",
        "spec.analysis.webhooks[].url",
        Rule::Url("http(s), or sluice's git-approval address; called with the hook's metadata, no credential"),
    ),
    row("Canary (Flagger)", "spec.analysis.alerts[].providerRef", Rule::RepoObject),
    row("HTTPRoute", "spec.parentRefs", Rule::Rendered),
    row("HTTPRoute", "spec.rules[].backendRefs", Rule::Rendered),
    row("Waves", "spec.waves[].output", Rule::RepoPath),
    row("Waves", "spec.waves[].metricsServer", Rule::Url(PROMETHEUS)),
    row("Waves", "spec.waves[].metricsSecretRef", Rule::Secret),
    row(
        "Waves",
        "spec.waves[].cluster.kubeContext",
        Rule::Operator("a context of the kubeconfig the operator gives sluice"),
    ),
    row(
        "Waves",
        "spec.waves[].cluster.server",
        Rule::Url("https:// (http:// only with the operator's `SLUICE_ALLOW_HTTP_CLUSTERS=true`), no credentials, query or fragment; sent the token of `cluster.secretRef`"),
    ),
    row("Waves", "spec.waves[].cluster.secretRef", Rule::Secret),
    row("Waves", "spec.waves[].cluster.tokenFile", Rule::Refused),
    row("Waves", "spec.waves[].cluster.caFile", Rule::Refused),
    row(
        "MetricTemplate",
        "spec.provider.address",
        Rule::Url("http(s) (wss for splunk); sent the template's `secretRef` credentials, else (prometheus) the operator's `SLUICE_PROMETHEUS_*` ones, only at an origin `SLUICE_PROMETHEUS_ORIGINS` lists"),
    ),
    row("MetricTemplate", "spec.provider.secretRef", Rule::Secret),
    row(
        "AnalysisTemplate",
        "spec.metrics[].provider.{prometheus,graphite}.address",
        Rule::Url("http(s); prometheus: sent the operator's `SLUICE_PROMETHEUS_*` credentials only at an origin `SLUICE_PROMETHEUS_ORIGINS` lists; graphite: no credential"),
    ),
    row(
        "AnalysisTemplate",
        "spec.metrics[].provider.web.url",
        Rule::Url("http(s), checked again once Secret-valued arguments are filled in; sent the metric's method, headers and body, which carry a Secret's value only through an argument with `valueFrom.secretKeyRef` (a Secret the operator mapped into the Rollout's namespace), never the operator's credentials"),
    ),
    row(
        "AnalysisTemplate",
        "spec.metrics[].provider.web.jsonPath",
        Rule::Answer,
    ),
    row("AnalysisTemplate", "spec.args[].valueFrom.secretKeyRef", Rule::Secret),
    row("AnalysisTemplate", "spec.args[].valueFrom.fieldRef", Rule::OwnField),
    row(
        "Rollout",
        "spec.strategy.canary.{steps[].analysis,analysis}.args[].valueFrom.fieldRef.fieldPath",
        Rule::OwnField,
    ),
    row(
        "AlertProvider",
        "spec.address",
        Rule::Url("http(s); posted the alert, no credential"),
    ),
    row("AlertProvider", "spec.proxy", Rule::Url("http(s); the proxy alerts go through")),
    row("AlertProvider", "spec.secretRef", Rule::Secret),
    row("Judge", "spec.metrics[].templateRef", Rule::RepoObject),
    row("Config", "output", Rule::RepoPath),
    row(
        "Config",
        "dashboard.url",
        Rule::Url("http(s), no credentials, query or fragment; written into pull requests and notifications, never fetched"),
    ),
    row("Config", "prometheus.address", Rule::Url(PROMETHEUS)),
    row(
        "Config",
        "forge.apiUrl",
        Rule::Url("http(s) without credentials; sent the operator's `SLUICE_FORGE_TOKEN`, or the GitHub App's JWT and installation tokens"),
    ),
    row("Config", "forge.githubApp.privateKeySecretRef", Rule::Secret),
    row("Config", "signing.allowedSigners", Rule::RepoPath),
    row(
        "Config",
        "notifications[].urlEnv",
        Rule::Operator("the name (A-Z, 0-9, `_`) of an environment variable of sluice's holding the webhook URL"),
    ),
];

/// Whether a field named `name` names a file, folder, URL, host, Secret or object, by how its
/// name ends (`tokenFile`, `secretRef`, `apiUrl`, `metricsServer`, `routeSource`, `hosts`, ...).
pub fn path_like(name: &str) -> bool {
    const ENDINGS: &[&str] = &[
        "file",
        "files",
        "path",
        "paths",
        "dir",
        "dirs",
        "folder",
        "ref",
        "refs",
        "url",
        "urls",
        "uri",
        "address",
        "server",
        "servers",
        "source",
        "sources",
        "host",
        "hosts",
        "endpoint",
        "output",
        "outputs",
        "signers",
        "context",
        "kubeconfig",
        "env",
        "secret",
        "proxy",
    ];
    let lower = name.to_ascii_lowercase();
    ENDINGS.iter().any(|e| lower.ends_with(e))
}

/// The field name a row is about: its path's last part (`spec.waves[].cluster.server`: `server`).
pub fn last_part(field: &str) -> &str {
    let last = field.rsplit('.').next().unwrap_or(field);
    last.trim_end_matches("[]")
}

#[cfg(test)]
mod tests;
