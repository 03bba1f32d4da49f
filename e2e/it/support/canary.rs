//! The one builder of Flagger canary fixtures: `podinfo`'s Canary, written line for line in
//! the order Flagger's docs write it (so the line numbers a test asserts are those of the
//! hand-written file), with each router's parts supplied by the test; and the readers the
//! router tests share (load one canary, list its errors, render with no route state).

use sluice::manifest::load::{load_text, Loaded};
use sluice::manifest::model::Canary;
use sluice::manifest::settings::Settings;
use sluice::route::{Backends, RouteState};
use sluice::yaml::snapshot::Snapshot;

/// No session cookie, no mirroring: the route state of a canary without either.
pub(crate) const NO_STATE: RouteState<'static> = RouteState {
    session_cookie: None,
    previous_session_cookie: None,
    primary_session_cookie: None,
    mirroring: false,
    managed_step: None,
};

/// The Services Flagger makes for `podinfo`.
pub(crate) const BACKENDS: Backends<'static> = Backends {
    primary: "podinfo-primary",
    canary: "podinfo-canary",
};

/// `text`, read as the file `name`, holds exactly one canary and no errors.
pub(crate) fn load(name: &str, text: &str) -> Canary {
    let loaded = load_text(name, text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{name}: {:?}", loaded.errors);
    assert_eq!(loaded.canaries.len(), 1, "{name}");
    loaded.canaries.into_iter().next().expect("one canary")
}

/// The errors `validate` reports for `text` read as the file `file`, as
/// `file:line: field: message`.
pub(crate) fn errors_in(file: &str, text: &str) -> Vec<String> {
    load_text(file, text, &Settings::default())
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Writes `files` (repo path, text) into a fresh work tree and loads it as a tick does.
pub(crate) fn load_repo(files: &[(&str, &str)]) -> Loaded {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    sluice::manifest::load::load(&Snapshot::read(dir.path()), &Settings::default())
}

/// The one canary [`load_repo`] loads, without errors.
pub(crate) fn load_one(files: &[(&str, &str)]) -> Canary {
    only_canary(load_repo(files))
}

/// The one canary of `loaded`, which has no errors.
pub(crate) fn only_canary(loaded: Loaded) -> Canary {
    let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(loaded.canaries.len(), 1);
    loaded.canaries.into_iter().next().unwrap()
}

/// The errors [`load_repo`] reports for `files`, from which no canary loads.
pub(crate) fn repo_errors(files: &[(&str, &str)]) -> Vec<String> {
    let loaded = load_repo(files);
    assert!(loaded.canaries.is_empty(), "a canary loaded despite errors");
    loaded.errors.iter().map(ToString::to_string).collect()
}

/// For each `(text, expected)`, [`errors`] of `text` are exactly `expected`, in any order;
/// the failure lists every text that differs, with what was expected and found.
pub(crate) fn assert_errors<S: AsRef<str>>(cases: Vec<(String, Vec<S>)>) {
    let mut wrong = Vec::new();
    for (text, expected) in cases {
        let mut found = errors(&text);
        let mut expected: Vec<&str> = expected.iter().map(AsRef::as_ref).collect();
        found.sort();
        expected.sort_unstable();
        if found != expected {
            wrong.push(format!("{text}\nexpected {expected:#?}\nfound {found:#?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// [`errors_in`] a file named `c.yaml`.
pub(crate) fn errors(text: &str) -> Vec<String> {
    errors_in("c.yaml", text)
}

/// The values `canary`'s metric queries are rendered with for the target `podinfo`, a
/// one-minute interval and no variables.
pub(crate) fn podinfo_query_model(canary: &Canary) -> sluice::metrics::query_render::QueryModel {
    sluice::metrics::query_model(
        canary,
        "podinfo",
        std::time::Duration::from_secs(60),
        &Default::default(),
    )
}

/// A Flagger `Canary` of the `podinfo` Deployment, rendered by [`FlaggerCanary::yaml`].
#[derive(Clone, Debug)]
pub(crate) struct FlaggerCanary {
    namespace: String,
    /// Lines after `metadata.namespace` (annotations), each ending in a newline.
    metadata: String,
    provider: Option<String>,
    /// Lines under `spec:` before `targetRef`, each ending in a newline.
    spec: String,
    /// The `targetRef` block, each line ending in a newline.
    target: String,
    /// Lines under `spec:` after `targetRef` (other refs, deadlines), each ending in a newline.
    refs: String,
    /// The lines under `service:`, without the last newline; `None`: no `service:` at all.
    service: Option<String>,
    /// `None`: the analysis block is the caller's alone.
    interval: Option<String>,
    threshold: Option<u32>,
}

/// `podinfo` in `prod` on Flagger's default router, its Service on port 9898, analysed every
/// second with a threshold of 2: the canary of the loop tests.
pub(crate) fn podinfo() -> FlaggerCanary {
    FlaggerCanary {
        namespace: "prod".into(),
        metadata: String::new(),
        provider: None,
        spec: String::new(),
        target: "  targetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: podinfo\n"
            .into(),
        refs: String::new(),
        service: Some("    port: 9898\n    targetPort: 9898".into()),
        interval: Some("1s".into()),
        threshold: Some(2),
    }
}

/// `podinfo` in `test` as Flagger's e2e scripts write it: a 60 s progress deadline, analysed
/// every 15 s with a threshold of 15, with `service` lines.
pub(crate) fn flagger_test(service: &str) -> FlaggerCanary {
    podinfo()
        .namespace("test")
        .refs("  progressDeadlineSeconds: 60\n")
        .service(service)
        .interval("15s")
        .threshold(Some(15))
}

impl FlaggerCanary {
    pub(crate) fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Lines after `metadata.namespace`, each ending in a newline.
    pub(crate) fn metadata(mut self, lines: &str) -> Self {
        self.metadata = lines.into();
        self
    }

    pub(crate) fn provider(mut self, provider: &str) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Lines under `spec:` before `targetRef`, each ending in a newline.
    pub(crate) fn spec(mut self, lines: &str) -> Self {
        self.spec = lines.into();
        self
    }

    /// The `targetRef` block (another kind of workload), each line ending in a newline.
    pub(crate) fn target(mut self, lines: &str) -> Self {
        self.target = lines.into();
        self
    }

    /// Lines under `spec:` after `targetRef`, each ending in a newline.
    pub(crate) fn refs(mut self, lines: &str) -> Self {
        self.refs = lines.into();
        self
    }

    /// The lines under `service:`, without the last newline.
    pub(crate) fn service(mut self, lines: &str) -> Self {
        self.service = Some(lines.into());
        self
    }

    /// No `service:` block (a workload that is its own Service).
    pub(crate) fn no_service(mut self) -> Self {
        self.service = None;
        self
    }

    pub(crate) fn interval(mut self, interval: &str) -> Self {
        self.interval = Some(interval.into());
        self
    }

    /// No `interval` nor `threshold`: the analysis block holds only what
    /// [`FlaggerCanary::yaml`] is given.
    pub(crate) fn bare_analysis(mut self) -> Self {
        self.interval = None;
        self.threshold = None;
        self
    }

    pub(crate) fn threshold(mut self, threshold: Option<u32>) -> Self {
        self.threshold = threshold;
        self
    }

    /// The canary's YAML with `analysis` (lines indented by 4, after `interval` and
    /// `threshold`).
    pub(crate) fn yaml(&self, analysis: &str) -> String {
        let provider = self
            .provider
            .as_ref()
            .map(|p| format!("  provider: {p}\n"))
            .unwrap_or_default();
        let service = self
            .service
            .as_ref()
            .map(|lines| format!("  service:\n{lines}\n"))
            .unwrap_or_default();
        let interval = self
            .interval
            .as_ref()
            .map(|i| format!("    interval: {i}\n"))
            .unwrap_or_default();
        let threshold = self
            .threshold
            .map(|t| format!("    threshold: {t}\n"))
            .unwrap_or_default();
        format!(
            "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: {}
{}spec:
{provider}{}{}{}{service}  analysis:
{interval}{threshold}{analysis}
",
            self.namespace, self.metadata, self.spec, self.target, self.refs
        )
    }
}

/// A reference under `spec:` as a Flagger Canary writes one (`targetRef`, `routeRef`, ...):
/// the lines of `field` naming the `kind` `name` of `api_version`, each ending in a newline.
pub(crate) fn object_ref(field: &str, api_version: &str, kind: &str, name: &str) -> String {
    format!("  {field}:\n    apiVersion: {api_version}\n    kind: {kind}\n    name: {name}\n")
}

/// The analysis of Flagger's e2e scripts (`test/<router>/test-canary.sh`, lines indented by
/// 4): a check every `interval`, `threshold` failed checks allowed, steps of 10 up to 50, the
/// request success rate over a minute and the request duration over `duration_window`, then
/// `webhooks` (the lines under `webhooks:`, without the last newline).
pub(crate) fn flagger_e2e_analysis(
    interval: &str,
    threshold: u32,
    duration_window: &str,
    webhooks: &str,
) -> String {
    format!(
        "    interval: {interval}
    threshold: {threshold}
    maxWeight: 50
    stepWeight: 10
    metrics:
    - name: request-success-rate
      thresholdRange:
        min: 99
      interval: 1m
    - name: request-duration
      thresholdRange:
        max: 500
      interval: {duration_window}
    webhooks:
{webhooks}"
    )
}

/// An A/B analysis as Flagger's docs and e2e scripts write it (lines indented by 4, without
/// the last newline): `iterations`, then one match on the request header `header` with
/// `condition` (`exact: "insider"`, `regex: "…"`).
pub(crate) fn ab_analysis(iterations: u32, header: &str, condition: &str) -> String {
    format!(
        "    iterations: {iterations}
    match:
      - headers:
          {header}:
            {condition}"
    )
}

/// [`ab_analysis`] on `x-canary: insider`, the A/B test of Flagger's e2e scripts.
pub(crate) fn insider_ab(iterations: u32) -> String {
    ab_analysis(iterations, "x-canary", "exact: \"insider\"")
}

/// [`podinfo`] on Traefik, its Service on port 80 in front of 9898.
pub(crate) fn traefik() -> FlaggerCanary {
    podinfo()
        .provider("traefik")
        .service("    port: 80\n    targetPort: 9898")
}

/// A native canary `prod/podinfo` of `apps/podinfo/deployment.yaml` over an SMI v1alpha2
/// TrafficSplit: `after_source` are spec lines after its source (e.g. its output), `analysis`
/// the lines under `analysis:` and whatever spec lines follow.
pub(crate) fn native_podinfo(after_source: &str, analysis: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
spec:
  source: apps/podinfo/deployment.yaml
{after_source}  service:
    port: 9898
  route:
    apiVersion: split.smi-spec.io/v1alpha2
    kind: TrafficSplit
  analysis:
{analysis}"
    )
}

/// The native route-only Canary `shop/frontend` at revision v2 (Services `frontend-blue` and
/// `frontend-green`) of the router tests: `route` is the lines under `spec.route:` (indented
/// by 4, each ending in a newline; its `apiVersion` on line 14), and the analysis walks
/// `weights`, every minute, threshold 3.
pub(crate) fn native_frontend(route: &str, weights: &[u32]) -> String {
    let steps: String = weights
        .iter()
        .map(|w| format!("      - weight: {w}\n"))
        .collect();
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata:
  name: frontend
  namespace: shop
spec:
  routeOnly:
    services: [frontend-blue, frontend-green]
    revision: v2
  service:
    name: frontend
    port: 8080
  route:
{route}  analysis:
    interval: 1m
    threshold: 3
    steps:
{steps}"
    )
}

/// A route-only native Canary `namespace/name` at `revision`: Services `<name>-blue` and
/// `<name>-green` on port 8080, an SMI TrafficSplit, and `analysis` (the lines under
/// `analysis:`, indented by 4, without the last newline).
pub(crate) fn route_only_smi(
    namespace: &str,
    name: &str,
    revision: &str,
    analysis: &str,
) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  routeOnly: {{services: [{name}-blue, {name}-green], revision: \"{revision}\"}}
  service: {{port: 8080}}
  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}
  analysis:
{analysis}
"
    )
}

/// A route-only native Canary `name` in `shop` at `revision`: blue/green Services, a Gateway
/// API HTTPRoute on `infra/gw` (with `route_extra` lines, each ending in a newline), its
/// output in `clusters/shop/<name>`, and `analysis` as the content of a flow map.
pub(crate) fn shop_httproute(
    name: &str,
    revision: &str,
    route_extra: &str,
    analysis: &str,
) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata: {{name: {name}, namespace: shop}}
spec:
  routeOnly: {{services: [{name}-blue, {name}-green], revision: \"{revision}\"}}
  output: clusters/shop/{name}
  service: {{port: 8080}}
  route:
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    parentRefs: [{{name: gw, namespace: infra}}]
{route_extra}  analysis: {{{analysis}}}
"
    )
}

/// [`shop_httproute`] `web` on `web.example.com`, three steps, one-second interval,
/// threshold 2: the canary of the git transport and chaos tests.
pub(crate) fn web_httproute(revision: &str) -> String {
    shop_httproute(
        "web",
        revision,
        "    hostnames: [web.example.com]\n",
        "interval: 1s, threshold: 2, stepWeights: [10, 30, 60]",
    )
}

/// The errors loading `text` as `apps/podinfo/canary.yaml` gives, as `sluice validate` prints
/// them.
pub(crate) fn spec_errors(text: &str) -> Vec<String> {
    load_text("apps/podinfo/canary.yaml", text, &Settings::default())
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}
