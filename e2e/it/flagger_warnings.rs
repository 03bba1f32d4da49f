//! What a Flagger cluster accepts, sluice accepts too, with a warning where it reads the
//! canary differently from its text (issue 26 items 1 to 3):
//!
//! - a field the Flagger CRD does not declare is pruned by the API server, so Flagger never
//!   sees it: sluice ignores it with a warning (native canaries keep refusing it);
//! - `ingressRef.apiVersion` and `autoscalerRef.apiVersion` choose nothing: Flagger reads the
//!   Ingress by name through `networking.k8s.io/v1` (fluxcd/flagger `pkg/router/ingress.go`,
//!   `NetworkingV1().Ingresses(...).Get(..., IngressRef.Name)`) and the HPA through
//!   `autoscaling/v2` (`pkg/canary/hpa_reconciler.go`, `AutoscalingV2()...Get(...,
//!   AutoscalerRef.Name)`); the object in the repo decides, and a ref that differs from it
//!   is a warning;
//! - `provider: gatewayapi:v1alpha2` runs Flagger 1.44's v1 router (`pkg/router/factory.go`
//!   matches `gatewayapi:v1beta1…`, then any `gatewayapi:v1…`).
//!
//! `sluice validate` prints warnings (text, and `::warning` under `--output github`), exits 0
//! with only warnings and 1 under `--strict`; `sluice status` counts them per canary.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::Value as Json;
use sluice::manifest::load::load_text;
use sluice::manifest::settings::Settings;

use crate::support::canary::{flagger_test, load_repo, podinfo};
use crate::support::manifests::{nginx_canary, nginx_ingress};
use crate::support::{
    git, human_clone, human_commit, push_webhook, reconcile_ticks, sluice_daemon,
};
use crate::support::{read_repo_file, run_sluice, seeded_remote, sluice_clone};
use crate::support::{repo, validate};
use crate::support::{tick_context, Schemas};

const CANARY: &str = "apps/podinfo/canary.yaml";

/// A file of `e2e/corpus/flagger/companions/`: real files of Flagger's repository.
fn companion(name: &str) -> String {
    read_repo_file(&format!("e2e/corpus/flagger/companions/{name}"))
}

/// Flagger's `kustomize/podinfo/deployment.yaml` (no namespace: the canary's).
fn deployment() -> String {
    companion("fluxcd__flagger__kustomize__podinfo__deployment.yaml")
}

/// Flagger's `kustomize/podinfo/hpa.yaml` (`autoscaling/v2beta2` there) at `api`.
fn hpa(api: &str) -> String {
    companion("fluxcd__flagger__kustomize__podinfo__hpa.yaml").replace(
        "apiVersion: autoscaling/v2beta2",
        &format!("apiVersion: {api}"),
    )
}

/// The line of `text` that starts (after indentation) with `start`.
fn line_of(text: &str, start: &str) -> usize {
    1 + text
        .lines()
        .position(|l| l.trim_start().starts_with(start))
        .unwrap_or_else(|| panic!("no line {start:?} in {text}"))
}

/// An osm canary of podinfo whose `autoscalerRef` is at `hpa_api` and ends with `extra`
/// (lines indented by 4); `autoscalerRef.apiVersion` is on line 12, `extra` from line 15.
fn canary(hpa_api: &str, extra: &str) -> String {
    podinfo()
        .namespace("test")
        .provider("osm")
        .target("  targetRef:\n    kind: Deployment\n    name: podinfo\n")
        .refs(&format!(
            "  autoscalerRef:\n    apiVersion: {hpa_api}\n    kind: HorizontalPodAutoscaler\n    name: podinfo\n{extra}"
        ))
        .service("    port: 9898")
        .interval("30s")
        .threshold(None)
        .yaml("    maxWeight: 50\n    stepWeight: 10")
}

/// A work tree of the canary `text` beside Flagger's podinfo Deployment and its HPA at
/// `hpa_api`.
fn podinfo_repo(text: &str, hpa_api: &str) -> tempfile::TempDir {
    repo(&[
        (CANARY, text),
        ("apps/podinfo/deployment.yaml", &deployment()),
        ("apps/podinfo/hpa.yaml", &hpa(hpa_api)),
    ])
}

/// The first line of `text` that starts with `start`.
fn starting<'t>(text: &'t str, start: &str) -> &'t str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting with {start:?}: {text}"))
}

fn strings<T: ToString>(items: &[T]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

#[test]
fn a_stray_field_in_a_flagger_canary_is_pruned_with_a_warning_and_the_canary_loads() {
    let text = canary(
        "autoscaling/v2",
        "    primaryScalingSet:\n      name: primary\n",
    );
    let loaded = load_text(CANARY, &text, &Settings::default());
    assert_eq!(strings(&loaded.errors), Vec::<String>::new());
    assert_eq!(loaded.canaries.len(), 1);
    assert_eq!(
        strings(&loaded.warnings),
        [format!("{CANARY}:15: spec.autoscalerRef.primaryScalingSet: unknown field (did you mean \"primaryScalerQueries\"?); expected one of: apiVersion, kind, name, primaryScalerQueries, primaryScalerReplicas; ignored, as the Kubernetes API server prunes fields the Flagger CRD does not declare (Flagger never sees it)")]
    );
    assert_eq!(loaded.warnings_of(&loaded.canaries[0].id), 1);

    // Anywhere in the canary: the top level, metadata, spec, the analysis.
    let everywhere = text
        .replace("kind: Canary\n", "kind: Canary\nstatuz: {}\n")
        .replace(
            "  namespace: test\nspec:",
            "  namespace: test\n  labelz: {}\nspec:",
        )
        .replace(
            "  provider: osm\n",
            "  provider: osm\n  canaryAnalysis: {}\n",
        )
        .replace(
            "    stepWeight: 10\n",
            "    stepWeight: 10\n    stepWieght: 20\n",
        );
    let loaded = load_text(CANARY, &everywhere, &Settings::default());
    assert_eq!(strings(&loaded.errors), Vec::<String>::new());
    let fields: Vec<&str> = loaded
        .warnings
        .iter()
        .map(|w| w.problem.field.as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "statuz",
            "metadata.labelz",
            "spec.canaryAnalysis",
            "spec.autoscalerRef.primaryScalingSet",
            "spec.analysis.stepWieght"
        ]
    );
    // Pruned means not read: the misspelt step is not taken for the real one.
    assert_eq!(
        loaded.canaries[0].analysis,
        load_text(CANARY, &text, &Settings::default()).canaries[0].analysis
    );
}

#[test]
fn a_stray_field_in_a_native_canary_stays_an_error() {
    let native = crate::support::canary::route_only_smi(
        "shop",
        "web",
        "v1",
        "    interval: 1s\n    stepWeights: [50]\n    stepWieght: 20",
    );
    let loaded = load_text("c.yaml", &native, &Settings::default());
    assert!(loaded.canaries.is_empty());
    assert!(loaded.warnings.is_empty());
    assert!(
        strings(&loaded.errors)
            .iter()
            .any(|e| e.contains("spec.analysis.stepWieght: unknown field (did you mean")),
        "{:?}",
        loaded.errors
    );
}

#[test]
fn validate_prints_warnings_and_exits_0_and_1_under_strict() {
    let text = canary(
        "autoscaling/v2",
        "    primaryScalingSet:\n      name: primary\n",
    );
    let dir = podinfo_repo(&text, "autoscaling/v2");
    let field = "spec.autoscalerRef.primaryScalingSet";

    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "1 canary valid\n");
    let line = starting(&err, "warning: ");
    assert!(
        line.contains(&format!(
            "./{CANARY}:15: {field}: unknown field (did you mean \"primaryScalerQueries\"?)"
        )),
        "{line}"
    );
    assert!(err.contains("1 warning(s)"), "{err}");

    let (code, out, _) = validate(dir.path(), &["--output", "github", "."]);
    assert_eq!(code, 0, "{out}");
    let annotation = starting(&out, "::warning ");
    assert!(
        annotation.starts_with(&format!(
            "::warning file={CANARY},line=15,title={field}::unknown field"
        )),
        "{annotation}"
    );
    assert!(!out.contains("::error"), "{out}");

    let (code, out, err) = validate(dir.path(), &["--strict", "."]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.lines().any(
            |l| l.starts_with(&format!("./{CANARY}:15: {field}: unknown field"))
                && l.ends_with("(an error under --strict)")
        ),
        "{err}"
    );
    assert!(err.contains("1 problem found; 0 canaries valid"), "{err}");
    let (code, out, _) = validate(dir.path(), &["--strict", "-o", "github", "."]);
    assert_eq!(code, 1);
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("::error file={CANARY},line=15,title={field}::"))),
        "{out}"
    );
}

/// Flagger reads the HPA by name through autoscaling/v2 (`pkg/canary/hpa_reconciler.go`):
/// a ref written for autoscaling/v2beta1 over a v2 HPA runs; the ref's version is a warning.
#[test]
fn an_hpa_ref_with_autoscaling_v2beta1_over_a_v2_hpa_loads_with_a_warning() {
    let text = canary("autoscaling/v2beta1", "");
    let dir = podinfo_repo(&text, "autoscaling/v2");
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "1 canary valid\n");
    let hpa_line = line_of(&hpa("autoscaling/v2"), "apiVersion:");
    assert!(
        err.contains(&format!("warning: ./{CANARY}:12: spec.autoscalerRef.apiVersion: \"autoscaling/v2beta1\" is not the apiVersion of HorizontalPodAutoscaler podinfo (./apps/podinfo/hpa.yaml:{hpa_line}), which is \"autoscaling/v2\"; Flagger reads the HorizontalPodAutoscaler by name through autoscaling/v2 and ignores this field, as sluice does")),
        "{err}"
    );
    // A ref that matches its object says nothing.
    let quiet = podinfo_repo(&canary("autoscaling/v2", ""), "autoscaling/v2");
    let (code, _, err) = validate(quiet.path(), &["."]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");

    // The HPA itself of an API sluice cannot write stays an error, at its own line.
    let dir = podinfo_repo(&text, "autoscaling/v2beta1");
    let (code, _, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("./apps/podinfo/hpa.yaml:{hpa_line}: apiVersion: expected autoscaling/v2 or autoscaling/v2beta2 (sluice writes autoscaling/v2), found \"autoscaling/v2beta1\"")),
        "{err}"
    );
}

/// Flagger reads the Ingress by name through networking.k8s.io/v1 (`pkg/router/ingress.go`).
#[test]
fn an_ingress_ref_with_extensions_v1beta1_over_a_v1_ingress_loads_with_a_warning() {
    let v1 = nginx_ingress();
    let ingress_file = "apps/podinfo/ingress.yaml";
    let ingress_line = line_of(&v1, "apiVersion:");
    let steps = nginx_canary("    maxWeight: 40\n    stepWeight: 20");
    let ref_line = line_of(&steps, "apiVersion: networking.k8s.io/v1");
    for old in ["extensions/v1beta1", "networking.k8s.io/v1beta1"] {
        let text = steps.replace(
            "    apiVersion: networking.k8s.io/v1\n",
            &format!("    apiVersion: {old}\n"),
        );
        let loaded = load_repo(&[(ingress_file, &v1), (CANARY, &text)]);
        assert_eq!(strings(&loaded.errors), Vec::<String>::new(), "{old}");
        assert_eq!(loaded.canaries.len(), 1);
        assert_eq!(
            strings(&loaded.warnings),
            [format!("{CANARY}:{ref_line}: spec.ingressRef.apiVersion: \"{old}\" is not the apiVersion of Ingress podinfo ({ingress_file}:{ingress_line}), which is \"networking.k8s.io/v1\"; Flagger reads the Ingress by name through networking.k8s.io/v1 and ignores this field, as sluice does")]
        );
    }
    // The Ingress itself of an API sluice cannot write stays an error, at its own line.
    let old = v1.replace("networking.k8s.io/v1", "networking.k8s.io/v1beta1");
    let loaded = load_repo(&[(ingress_file, &old), (CANARY, &steps)]);
    assert!(loaded.canaries.is_empty());
    assert_eq!(
        strings(&loaded.errors),
        [format!("{ingress_file}:{ingress_line}: apiVersion: expected networking.k8s.io/v1 (the Ingress canary podinfo references through spec.ingressRef; Flagger reads no other Ingress API), found \"networking.k8s.io/v1beta1\"")]
    );
}

/// A Gateway API canary as Flagger's e2e scripts write it, `provider: gatewayapi:<version>`.
fn gateway_canary(version: &str) -> String {
    flagger_test("    port: 9898\n    hosts:\n    - app.example.com\n    gatewayRefs:\n    - name: gateway\n      namespace: istio-ingress")
        .provider(&format!("gatewayapi:{version}"))
        .yaml("    maxWeight: 50\n    stepWeight: 10")
}

/// `gatewayapi:v1alpha2` runs as Flagger 1.44's v1 router: validate and plan say so and
/// validate exits 0, and a tick renders a schema-valid `gateway.networking.k8s.io/v1`
/// HTTPRoute.
#[test]
fn gatewayapi_v1alpha2_runs_as_v1_and_renders_a_schema_valid_httproute() {
    let text = gateway_canary("v1alpha2");
    let deployment = deployment();
    let files = [
        (CANARY, text.as_str()),
        ("apps/podinfo/deployment.yaml", deployment.as_str()),
    ];
    let dir = repo(&files);
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 0, "{out}{err}");
    let says = "spec.provider: \"gatewayapi:v1alpha2\" runs as provider \"gatewayapi:v1\", as Flagger's router factory matches it by prefix; sluice writes gateway.networking.k8s.io/v1 HTTPRoutes";
    assert!(
        err.contains(&format!(
            "warning: ./{CANARY}:{}: {says}",
            line_of(&text, "provider:")
        )),
        "{err}"
    );
    let plan = run_sluice(&["plan", &dir.path().join(CANARY).display().to_string()]);
    assert!(plan.2.contains(says), "{plan:?}");
    // Bare `gatewayapi` stays refused: Flagger routes it with Istio.
    let bare_text = text.replace("gatewayapi:v1alpha2", "gatewayapi");
    let bare = repo(&[(CANARY, &bare_text)]);
    let (code, _, err) = validate(bare.path(), &["."]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("bare \"gatewayapi\""), "{err}");

    // One tick: the initial decision's files, the route written as gateway.networking.k8s.io/v1.
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &files);
    let mut clone = sluice_clone(&bare.display().to_string(), &tmp.path().join("w"));
    let ctx = tick_context(&sluice::observer::Offline, crate::support::runtime());
    let report = sluice::tick::tick(&mut clone, &ctx, Timestamp::now()).unwrap();
    assert!(report.spec_errors.is_empty(), "{:?}", report.spec_errors);
    let output = load_text(CANARY, &text, &Settings::default()).canaries[0]
        .output
        .as_str()
        .to_string();
    let route = git(&bare, &["show", &format!("main:{output}/route.yaml")]);
    let docs: Vec<Json> = serde_saphyr::from_multiple(&route).unwrap();
    let httproute = docs
        .iter()
        .find(|d| d["kind"] == "HTTPRoute")
        .unwrap_or_else(|| panic!("no HTTPRoute: {route}"));
    assert_eq!(httproute["apiVersion"], "gateway.networking.k8s.io/v1");
    let mut schemas = Schemas::default();
    for doc in &docs {
        schemas.assert_valid(doc, "route.yaml");
    }
}

/// `sluice status` counts each canary's warnings (JSON and the table's WARNINGS column).
#[test]
fn status_counts_warnings_per_canary() {
    let text = canary(
        "autoscaling/v2beta1",
        "    primaryScalingSet:\n      name: primary\n",
    );
    let dir = podinfo_repo(&text, "autoscaling/v2");
    let rows = sluice::cli::status::rows(dir.path(), jiff::Timestamp::now()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].warnings, 2);
    let json = serde_json::to_value(&rows).unwrap();
    assert_eq!(json[0]["warnings"], 2);
    let dir_arg = dir.path().display().to_string();
    let (code, table, err) = run_sluice(&["status", "--dir", &dir_arg]);
    assert_eq!(code, 0, "{err}");
    let header = table.lines().next().unwrap_or_default();
    assert!(header.trim_end().ends_with("WARNINGS"), "{table}");
    let row = table.lines().find(|l| l.contains("podinfo")).unwrap();
    assert!(row.trim_end().ends_with('2'), "{table}");
}

/// Sends a signed push webhook (delivery `delivery`) and waits until the daemon at `addr` has
/// run `ticks` ticks.
fn webhook_tick(addr: &str, delivery: &str, ticks: u64, deadline: Instant) {
    assert_eq!(push_webhook(addr, "s3cret", delivery), 202);
    while reconcile_ticks(addr) < ticks {
        assert!(
            Instant::now() < deadline,
            "no tick {ticks} after webhook {delivery}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The daemon logs a spec warning once per version of its file, not at every tick: three
/// ticks on one head log it once, and a human edit of the canary's file logs it again.
#[test]
fn the_daemon_logs_each_warning_once_per_version_of_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let text = gateway_canary("v1alpha2");
    let deployment = deployment();
    let bare = seeded_remote(
        tmp.path(),
        &[
            (CANARY, text.as_str()),
            ("apps/podinfo/deployment.yaml", deployment.as_str()),
        ],
    );
    let url = bare.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    // A one-minute poll: within the test, only webhooks bring ticks.
    let daemon = sluice_daemon(&url, &tmp.path().join("d"))
        .poll("60s")
        .env("SLUICE_WEBHOOK_SECRET", "s3cret")
        .start();
    let addr = daemon.main().to_string();
    daemon.wait_ready();
    while reconcile_ticks(&addr) < 1 {
        assert!(Instant::now() < deadline, "daemon never ticked");
        std::thread::sleep(Duration::from_millis(100));
    }
    let logged = || {
        daemon
            .log()
            .lines()
            .filter(|l| l.contains("Spec warning") && l.contains("gatewayapi:v1alpha2"))
            .count()
    };
    webhook_tick(&addr, "d-1", 2, deadline);
    webhook_tick(&addr, "d-2", 3, deadline);
    assert_eq!(logged(), 1, "{}", daemon.log());

    let human = human_clone(&url, &tmp.path().join("human"));
    human_commit(
        &human,
        CANARY,
        &format!("# owned by the web team\n{text}"),
        "comment",
    );
    webhook_tick(&addr, "d-3", 4, deadline);
    webhook_tick(&addr, "d-4", 5, deadline);
    assert_eq!(logged(), 2, "{}", daemon.log());
}
