//! Every bad input is reported as file:line: field: message, and no input panics.

use crate::support::canary::podinfo;
use crate::support::canary::{errors_in, native_podinfo};
use proptest::prelude::*;
use sluice::manifest::load::load_text;
use sluice::manifest::settings::{parse_settings, Settings};

fn errors(text: &str) -> Vec<String> {
    errors_in("apps/podinfo/canary.yaml", text)
}

fn native(analysis: &str) -> String {
    native_podinfo(
        "  output: clusters/prod/podinfo\n",
        &analysis
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>(),
    )
}

fn flagger(spec_extra: &str, analysis: &str) -> String {
    let indented =
        |lines: &str, by: &str| -> String { lines.lines().map(|l| format!("{by}{l}\n")).collect() };
    let analysis = indented(analysis, "    ");
    podinfo()
        .spec(&indented(spec_extra, "  "))
        .service("    port: 9898")
        .bare_analysis()
        .yaml(analysis.strip_suffix('\n').unwrap_or_default())
}

fn assert_has(errs: &[String], expected: &str) {
    assert!(
        errs.iter().any(|e| e.contains(expected)),
        "expected an error containing {expected:?}, got {errs:#?}"
    );
}

#[test]
fn valid_native_and_flagger_load() {
    assert_eq!(
        errors(&native("interval: 30s\nstepWeight: 20\nmaxWeight: 50")),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&flagger("provider: osm\n", "interval: 1m\nstepWeight: 10")),
        Vec::<String>::new()
    );
}

#[test]
fn weight_out_of_range_names_file_line_and_field() {
    let errs = errors(&native("interval: 30s\nstepWeight: 120"));
    assert_eq!(
        errs,
        vec!["apps/podinfo/canary.yaml:16: spec.analysis.stepWeight: expected 1..=100, found 120"]
    );
}

#[test]
fn step_weights_must_increase() {
    let errs = errors(&native("stepWeights: [10, 30, 20]"));
    assert_has(
        &errs,
        "spec.analysis.stepWeights[2]: expected strictly increasing weights, found 20 after 30",
    );
    let errs = errors(&flagger("provider: osm\n", "stepWeights: [10, 10]"));
    assert_has(&errs, "stepWeights[1]: expected strictly increasing");
    let errs = errors(&native("steps:\n- weight: 50\n- weight: 40"));
    assert_has(
        &errs,
        "spec.analysis.steps[1].weight: expected strictly increasing weights, found 40 after 50",
    );
}

#[test]
fn step_weight_above_max_weight() {
    let errs = errors(&native("stepWeight: 60\nmaxWeight: 50"));
    assert_has(
        &errs,
        ":15: spec.analysis.stepWeight: expected at most maxWeight 50, found 60",
    );
}

#[test]
fn native_rejects_two_schedules_and_no_schedule() {
    let errs = errors(&native("stepWeight: 10\nstepWeights: [10, 20]"));
    assert_has(
        &errs,
        "expected only one of stepWeight, stepWeights and steps, found stepWeight and stepWeights",
    );
    let errs = errors(&native("interval: 30s"));
    assert_has(&errs, "spec.analysis: no schedule");
}

#[test]
fn interval_threshold_and_durations() {
    let errs = errors(&native("interval: 0s\nthreshold: 0\nstepWeight: 10"));
    assert_has(
        &errs,
        ":15: spec.analysis.interval: expected a positive duration, found 0",
    );
    assert_has(
        &errs,
        ":16: spec.analysis.threshold: expected 1..=4294967295, found 0",
    );
    let errs = errors(&native("interval: -5s\nthreshold: -1\nstepWeight: 10"));
    assert_has(&errs, "spec.analysis.interval: expected a duration");
    assert_has(&errs, "spec.analysis.threshold: expected 1..=");
    let errs = errors(&native(
        "interval: soon\nsteps:\n- weight: 10\n  pause: {duration: 1x}",
    ));
    assert_has(
        &errs,
        "spec.analysis.interval: expected a duration such as \"30s\"",
    );
    assert_has(
        &errs,
        "spec.analysis.steps[0].pause.duration: expected a duration",
    );
}

#[test]
fn open_function_steps_accept_integer_seconds_and_strings() {
    let errs = errors(&native("steps:\n- weight: 20\n  pause: {duration: 60}\n- weight: 40\n  pause: {duration: 1m30s}\n- weight: 80\n  pause: {}"));
    assert_eq!(errs, Vec::<String>::new());
}

#[test]
fn invalid_kubernetes_names() {
    let text = native("stepWeight: 10").replace("name: podinfo", "name: Podinfo_App");
    assert_has(
        &errors(&text),
        ":4: metadata.name: expected a DNS-1123 name",
    );
    let text = native("stepWeight: 10").replace("namespace: prod", "namespace: -prod");
    assert_has(
        &errors(&text),
        "metadata.namespace: expected a DNS-1123 name",
    );
}

#[test]
fn paths_must_stay_inside_the_repo() {
    let text =
        native("stepWeight: 10").replace("output: clusters/prod/podinfo", "output: /etc/sluice");
    assert_has(&errors(&text), ":8: spec.output: expected a path relative to the repo root, found the absolute path \"/etc/sluice\"");
    let text = native("stepWeight: 10").replace(
        "source: apps/podinfo/deployment.yaml",
        "source: ../other/deployment.yaml",
    );
    assert_has(
        &errors(&text),
        ":7: spec.source: expected a path inside the repo",
    );
}

#[test]
fn duplicate_canaries_in_one_namespace() {
    let one = native("stepWeight: 10");
    let text = format!("{one}---\n{one}");
    let mut loaded = load_text("c.yaml", &text, &Settings::default());
    sluice::manifest::load::reject_duplicates(&mut loaded);
    assert_eq!(loaded.canaries.len(), 1);
    assert!(
        loaded.errors[0]
            .to_string()
            .contains("duplicate canary prod/podinfo: already defined at c.yaml:1"),
        "{:?}",
        loaded.errors
    );
}

#[test]
fn yaml_syntax_errors_have_a_line() {
    let errs = errors("apiVersion: sluice.dev/v1alpha1\nkind: Canary\nspec: [unclosed\n");
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with("apps/podinfo/canary.yaml:"), "{errs:?}");
    assert!(errs[0].contains("YAML syntax error"), "{errs:?}");
}

#[test]
fn alias_expansion_is_bounded() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    assert_has(&errors(&text), "anchors and aliases are bounded");
}

#[test]
fn unknown_fields_get_did_you_mean() {
    let errs = errors(&native("stepWieght: 10"));
    assert_has(
        &errs,
        ":15: spec.analysis.stepWieght: unknown field (did you mean \"stepWeight\"?)",
    );
}

#[test]
fn every_problem_in_a_file_is_reported() {
    let text =
        native("interval: 0s\nthreshold: 0\nstepWeight: 120").replace("port: 9898", "port: 99999");
    let errs = errors(&text);
    assert!(errs.len() >= 4, "{errs:#?}");
}

#[test]
fn flagger_providers_sluice_cannot_route_are_errors() {
    assert_has(
        &errors(&flagger("provider: cilium\n", "stepWeight: 10")),
        ":7: spec.provider: sluice does not route provider \"cilium\"",
    );
    assert_has(
        &errors(&flagger("provider: gatewayapi\n", "stepWeight: 10")),
        "bare \"gatewayapi\"",
    );
    let gw = flagger("provider: gatewayapi:v1\n", "stepWeight: 10");
    assert_has(
        &errors(&gw),
        "spec.service.gatewayRefs: required for a Gateway API provider",
    );
}

/// Flagger's default provider is Istio: a Canary that names none anywhere is an Istio canary.
#[test]
fn flagger_input_without_any_provider_is_istio() {
    let loaded = load_text(
        "c.yaml",
        &flagger("", "stepWeight: 10"),
        &Settings::default(),
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.canaries[0].provider.as_deref(), Some("istio"));
    assert!(matches!(
        loaded.canaries[0].route,
        sluice::route::Route::Istio(_)
    ));
}

#[test]
fn repo_default_provider_applies_to_flagger_input() {
    let settings = parse_settings(
        ".sluice/config.yaml",
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprovider: linkerd\n",
    )
    .unwrap();
    let loaded = load_text("c.yaml", &flagger("", "stepWeight: 10"), &settings);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let bad = parse_settings(".sluice/config.yaml", "provider: cilium\noutpt: x\n").unwrap_err();
    let text: Vec<String> = bad.iter().map(ToString::to_string).collect();
    assert_has(
        &text,
        ".sluice/config.yaml:1: provider: sluice does not route provider \"cilium\"",
    );
    assert_has(
        &text,
        ".sluice/config.yaml:2: outpt: unknown field (did you mean \"output\"?)",
    );
}

#[test]
fn non_canary_documents_are_ignored() {
    let text = format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: x}}\nspec: {{replicas: 120}}\n---\n{}", native("stepWeight: 10"));
    let loaded = load_text("c.yaml", &text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.canaries.len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let _ = load_text("fuzz.yaml", &text, &Settings::default());
    }

    #[test]
    fn mutated_canaries_never_panic(cut in 0usize..600, insert in "[ -~\\n]{0,12}") {
        let base = flagger("provider: osm\n", "interval: 30s\nstepWeights: [1, 2, 10, 80]\nstepWeightPromotion: 5\nmetrics:\n- name: request-success-rate\n  thresholdRange: {min: 99}\nwebhooks:\n- name: a\n  type: pre-rollout\n  url: http://x/\n");
        let mut at = cut.min(base.len());
        while !base.is_char_boundary(at) { at -= 1; }
        let text = format!("{}{}{}", &base[..at], insert, &base[at..]);
        let loaded = load_text("fuzz.yaml", &text, &Settings::default());
        for canary in &loaded.canaries {
            let _ = sluice::core::simulate::simulate(canary);
        }
    }
}

#[test]
fn sync_target_comes_from_spec_sync_or_the_repo_default() {
    let settings = parse_settings(
        ".sluice/config.yaml",
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprovider: linkerd\nsync:\n  flux:\n    kustomization: apps\n",
    )
    .unwrap();
    let default = settings.sync.as_ref().map(ToString::to_string);
    assert_eq!(default.as_deref(), Some("Kustomization flux-system/apps"));

    // Flagger canaries have no spec.sync: they use the repo default.
    let loaded = load_text("c.yaml", &flagger("", "stepWeight: 10"), &settings);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.canaries[0].sync, settings.sync);

    // Native without spec.sync: the repo default; with it: its own.
    let loaded = load_text("c.yaml", &native("stepWeight: 10"), &settings);
    assert_eq!(loaded.canaries[0].sync, settings.sync);
    let own = native("stepWeight: 10").replace(
        "  service:\n",
        "  sync: {argocd: {application: podinfo, namespace: gitops}}\n  service:\n",
    );
    let loaded = load_text("c.yaml", &own, &settings);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let target = loaded.canaries[0].sync.as_ref().map(ToString::to_string);
    assert_eq!(target.as_deref(), Some("Application gitops/podinfo"));

    // No default and no spec.sync: no sync target (the clock starts at push + settle delay).
    let loaded = load_text("c.yaml", &native("stepWeight: 10"), &Settings::default());
    assert_eq!(loaded.canaries[0].sync, None);
}

#[test]
fn bad_sync_blocks_name_file_line_and_field() {
    let bad = parse_settings(
        ".sluice/config.yaml",
        "sync:\n  flux:\n    kustomization: Apps\n    namespce: flux-system\n",
    )
    .unwrap_err();
    let text: Vec<String> = bad.iter().map(ToString::to_string).collect();
    assert_has(
        &text,
        ".sluice/config.yaml:3: sync.flux.kustomization: expected a DNS-1123 name",
    );
    assert_has(
        &text,
        ".sluice/config.yaml:4: sync.flux.namespce: unknown field (did you mean \"namespace\"?)",
    );

    let both = native("stepWeight: 10").replace(
        "  service:\n",
        "  sync:\n    argocd: {application: podinfo}\n    flux: {kustomization: podinfo}\n  service:\n",
    );
    assert_has(
        &errors(&both),
        "apps/podinfo/canary.yaml:11: spec.sync.flux: expected one engine (flux or argocd), found both",
    );
    let neither = native("stepWeight: 10").replace("  service:\n", "  sync: {}\n  service:\n");
    assert_has(
        &errors(&neither),
        "apps/podinfo/canary.yaml:9: spec.sync: expected `flux: {kustomization: NAME, namespace: NS}` or `argocd: {application: NAME, namespace: NS}`, found neither",
    );
    // A bad sync block does not hide the canary's other problems.
    let more = neither.replace("stepWeight: 10", "stepWeight: 120");
    assert_has(&errors(&more), "analysis.stepWeight");
    // Flagger's schema has no spec.sync: it is an unknown field there.
    // The API server prunes it from a Flagger Canary: a warning, and the canary loads.
    let loaded = load_text(
        "c.yaml",
        &flagger("sync: {flux: {kustomization: podinfo}}\n", "stepWeight: 10"),
        &Settings::default(),
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.canaries[0].sync, Settings::default().sync);
    let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert_has(&warnings, "spec.sync: unknown field");
}

#[test]
fn flagger_defaults_template_namespace_provider_name_and_webhook_timeout() {
    use sluice::manifest::model::MetricQuery;
    let settings = parse_settings(".sluice/config.yaml", "provider: osm\n").unwrap();
    let text = flagger(
        "",
        "stepWeight: 10\nmetrics:\n- name: errors\n  templateRef: {name: error-rate}\n  thresholdRange: {max: 1}\nwebhooks:\n- {name: smoke, type: pre-rollout, url: 'http://t/'}",
    );
    let loaded = load_text("c.yaml", &text, &settings);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let c = &loaded.canaries[0];
    assert_eq!(
        c.provider.as_deref(),
        Some("osm"),
        "the provider as written selects built-in queries"
    );
    match &c.analysis.metrics[0].query {
        MetricQuery::Template { namespace, .. } => assert_eq!(
            namespace.as_str(),
            "prod",
            "Flagger looks in the canary's namespace"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        c.analysis.webhooks[0].timeout,
        std::time::Duration::from_secs(10),
        "Flagger's default timeout"
    );
}

/// Every default sluice fills in for a Flagger canary equals Flagger's own, from the `Get*`
/// methods of `pkg/apis/flagger/v1beta1/canary.go` and the controller's fallbacks. Each row
/// loads a Flagger canary without the field and compares sluice's value with Flagger's.
#[test]
fn flagger_canary_defaults_equal_flaggers() {
    use sluice::metrics::DEFAULT_METRIC_INTERVAL;
    use std::time::Duration;
    let settings = parse_settings(".sluice/config.yaml", "provider: osm\n").unwrap();
    let load = |analysis: &str| {
        let loaded = load_text("c.yaml", &flagger("", analysis), &settings);
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        loaded.canaries.into_iter().next().unwrap()
    };
    let hook = "stepWeight: 10\nmetrics:\n- name: request-success-rate\n  thresholdRange: {min: 99}\nwebhooks:\n- {name: smoke, type: pre-rollout, url: 'http://t/'}";
    type Row = (
        &'static str,
        &'static str,
        fn(&sluice::manifest::model::Canary) -> u64,
        u64,
    );
    let rows: &[Row] = &[
        // GetAnalysisThreshold: `Threshold > 0` or 1.
        (
            "analysis.threshold",
            "stepWeight: 10",
            |c| c.analysis.threshold.into(),
            1,
        ),
        // GetAnalysisThreshold: 0 is not > 0, so 1.
        (
            "analysis.threshold: 0",
            "stepWeight: 10\nthreshold: 0",
            |c| c.analysis.threshold.into(),
            1,
        ),
        // GetAnalysisInterval: AnalysisInterval = 60 * time.Second.
        (
            "analysis.interval",
            "stepWeight: 10",
            |c| c.analysis.interval.as_secs(),
            60,
        ),
        // GetProgressDeadlineSeconds: ProgressDeadlineSeconds = 600.
        (
            "spec.progressDeadlineSeconds",
            "stepWeight: 10",
            |c| c.progress_deadline.as_secs(),
            600,
        ),
        // scheduler.go maxWeight(): no MaxWeight, no StepWeights -> totalWeight() = 100.
        (
            "analysis.maxWeight",
            "stepWeight: 30",
            |c| last_weight(c),
            100,
        ),
        // scheduler.go: StepWeightPromotion == 0 routes all traffic to primary in one go
        // (sluice: None; 0 here stands for "all at once").
        (
            "analysis.stepWeightPromotion",
            "stepWeight: 10",
            |c| c.analysis.step_weight_promotion.map_or(0, u64::from),
            0,
        ),
        // GetMetricInterval: MetricInterval = "1m" (a metric without `interval`).
        (
            "analysis.metrics[].interval",
            hook,
            |c| {
                c.analysis.metrics[0]
                    .interval
                    .unwrap_or(DEFAULT_METRIC_INTERVAL)
                    .as_secs()
            },
            60,
        ),
        // webhook.go callWebhook: `if timeout == "" { timeout = "10s" }`.
        (
            "analysis.webhooks[].timeout",
            hook,
            |c| c.analysis.webhooks[0].timeout.as_secs(),
            10,
        ),
        // webhook.go newHTTPClient: `httpClient.RetryMax = retries` (0 when unset).
        (
            "analysis.webhooks[].retries",
            hook,
            |c| c.analysis.webhooks[0].retries.into(),
            0,
        ),
        // GetAnalysisInterval: `if interval < 10*time.Second { return time.Second * 10 }`.
        (
            "analysis.interval: 5s",
            "interval: 5s\nstepWeight: 10",
            |c| c.analysis.interval.as_secs(),
            10,
        ),
        // GetAnalysisInterval: 0s is under 10 s too.
        (
            "analysis.interval: 0s",
            "interval: 0s\nstepWeight: 10",
            |c| c.analysis.interval.as_secs(),
            10,
        ),
        // GetAnalysisInterval: 10 s and more are kept.
        (
            "analysis.interval: 15s",
            "interval: 15s\nstepWeight: 10",
            |c| c.analysis.interval.as_secs(),
            15,
        ),
        // GetServiceNames: `apexName = c.Spec.TargetRef.Name` unless service.name is set.
        (
            "service.name",
            "stepWeight: 10",
            |c| u64::from(c.service.name.as_str() == "podinfo"),
            1,
        ),
        // CRD/canary.go CanaryService.PortName: "Defaults to http".
        (
            "service.portName",
            "stepWeight: 10",
            |c| u64::from(c.service.port_name == "http"),
            1,
        ),
        // scheduler.go: StepWeightPromotion unset promotes in one step; skipAnalysis false.
        (
            "spec.skipAnalysis",
            "stepWeight: 10",
            |c| u64::from(c.skip_analysis),
            0,
        ),
    ];
    for (field, analysis, value, flaggers) in rows {
        let c = load(analysis);
        assert_eq!(
            value(&c),
            *flaggers,
            "default of {field} differs from Flagger's"
        );
    }
    assert_eq!(DEFAULT_METRIC_INTERVAL, Duration::from_secs(60));
    // canary.go `PrimaryReadyThreshold = 100`, `CanaryReadyThreshold = 100`.
    assert_eq!(
        sluice::manifest::analysis::FLAGGER_READY_THRESHOLD_PERCENT,
        100
    );
    // SessionAffinity.GetMaxAge: `if s.MaxAge == 0 { return 86400 }`.
    assert_eq!(
        sluice::route::gateway_api::CookieAttributes::DEFAULT_MAX_AGE,
        86_400
    );
}

/// The weight of the last step of a weight schedule.
fn last_weight(c: &sluice::manifest::model::Canary) -> u64 {
    use sluice::manifest::model::Strategy;
    match &c.analysis.strategy {
        Strategy::Canary { steps } => steps.last().map_or(0, |s| u64::from(s.weight)),
        other => panic!("expected a weight schedule, found {other:?}"),
    }
}

/// An error about a mapping- or list-valued field, and a required field missing inside one,
/// name the line of the field's own key, not the line of its first child.
#[test]
fn errors_on_mapping_and_list_fields_name_the_keys_line() {
    // Line 8: targetRef; line 11: autoscalerRef; line 17: stepWeights.
    let text = podinfo()
        .provider("osm")
        .target("  targetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n")
        .refs(
            "  autoscalerRef:\n    apiVersion: autoscaling/v2\n    kind: HorizontalPodAutoscaler\n",
        )
        .service("    port: 9898")
        .bare_analysis()
        .yaml("    stepWeights:\n      first: 10");
    let errs = errors(&text);
    for expected in [
        "apps/podinfo/canary.yaml:8: spec.targetRef.name: required field is missing",
        "apps/podinfo/canary.yaml:11: spec.autoscalerRef.name: required field is missing",
        "apps/podinfo/canary.yaml:17: spec.analysis.stepWeights: expected a list, found a mapping",
    ] {
        assert!(
            errs.iter().any(|e| e == expected),
            "expected {expected:?} in {errs:#?}"
        );
    }
}

#[test]
fn confirm_hooks_pointing_at_git_become_approval_gates() {
    let text = flagger(
        "provider: osm\n",
        "stepWeight: 10\nwebhooks:\n- {name: ask, type: confirm-promotion, url: 'sluice:approval'}\n- {name: bad, type: rollout, url: 'sluice:approval'}",
    );
    let errs = errors(&text);
    assert_has(&errs, "spec.analysis.webhooks[1].url: sluice:approval is only for confirm-rollout, confirm-traffic-increase and confirm-promotion hooks");
    let ok = flagger(
        "provider: osm\n",
        "stepWeight: 10\nwebhooks:\n- {name: ask, type: confirm-promotion, url: 'sluice:approval'}",
    );
    let loaded = load_text("c.yaml", &ok, &Settings::default());
    let c = &loaded.canaries[0];
    assert!(c.analysis.approvals.before_promotion);
    assert!(
        c.analysis.webhooks.is_empty(),
        "no HTTP call for a git approval"
    );
}

#[test]
fn settings_settle_delay_reaches_every_canary() {
    let settings = parse_settings(".sluice/config.yaml", "settle: 30s\n").unwrap();
    let loaded = load_text("c.yaml", &native("stepWeight: 10"), &settings);
    assert_eq!(
        loaded.canaries[0].settle,
        std::time::Duration::from_secs(30)
    );
    let bad = parse_settings(".sluice/config.yaml", "settle: soon\n").unwrap_err();
    assert!(
        bad[0]
            .to_string()
            .contains(".sluice/config.yaml:1: settle: expected a duration"),
        "{bad:?}"
    );
}

#[test]
fn notification_settings_are_validated() {
    let bad = parse_settings(".sluice/config.yaml", "notifications:\n  - {kind: pager, urlEnv: X}\n  - {kind: slack, urlEnv: 'https://hooks.slack.com/x'}\n").unwrap_err();
    let text: Vec<String> = bad.iter().map(ToString::to_string).collect();
    assert_has(&text, ".sluice/config.yaml:2: notifications[0].kind: expected one of slack, teams, discord, webhook, found \"pager\"");
    assert_has(&text, ".sluice/config.yaml:3: notifications[1].urlEnv: expected the name of an environment variable");
}

#[test]
fn two_canaries_cannot_share_an_output_folder() {
    let dir = tempfile::tempdir().unwrap();
    let a = native("stepWeight: 10");
    let b = a.replace("name: podinfo", "name: other");
    std::fs::write(dir.path().join("a.yaml"), a).unwrap();
    std::fs::write(dir.path().join("b.yaml"), b).unwrap();
    let snapshot = sluice::yaml::snapshot::Snapshot::read(dir.path());
    let loaded = sluice::manifest::load::load(&snapshot, &Settings::default());
    assert_eq!(loaded.canaries.len(), 1);
    assert!(
        loaded.errors[0].to_string().starts_with("b.yaml:1: spec.output: output folder clusters/prod/podinfo is already written by canary prod/podinfo (a.yaml:1)"),
        "{:?}",
        loaded.errors
    );
}

#[test]
fn gateway_api_fields_sluice_cannot_render_are_errors_not_silently_dropped() {
    let text = flagger(
        "provider: gatewayapi:v1\n",
        "stepWeight: 10\nmirror: true\nmirrorWeight: 50\nsessionAffinity: {cookieName: flagger}",
    )
    .replace(
        "  service:\n    port: 9898\n",
        "  service:\n    port: 9898\n    gatewayRefs: [{name: gw}]\n    retries: {attempts: 3}\n",
    );
    assert_eq!(
        errors(&text),
        [
            "apps/podinfo/canary.yaml:18: spec.analysis.mirror: Gateway API routes mirror only during a blue/green analysis (iterations without match), as Flagger's router does; with stepWeight(s) Flagger would hold the canary at weight 0 and with A/B it ignores mirror. Remove mirror, or use iterations without match",
            "apps/podinfo/canary.yaml:15: spec.service.retries: not supported for Gateway API routes: Flagger's Gateway API router ignores it and the standard HTTPRoute has no retry field; remove it",
        ]
    );
    // With an SMI provider Flagger ignores them all; sluice refuses each on its own line.
    let smi = text.replace("provider: gatewayapi:v1", "provider: osm");
    let errs = errors(&smi);
    for at in [
        ":14: spec.service.gatewayRefs: not supported with provider osm",
        ":15: spec.service.retries: not supported with provider osm",
        ":18: spec.analysis.mirror: not supported with provider osm",
        ":19: spec.analysis.mirrorWeight: not supported with provider osm",
        ":20: spec.analysis.sessionAffinity: not supported with provider osm",
    ] {
        assert_has(&errs, at);
    }
    assert_eq!(errs.len(), 5, "{errs:#?}");
}

/// A gatewayapi:v1 canary with `service` extra lines (indented by 4, from line 15) and
/// `analysis`, whose first field is on line 16 plus the service lines.
fn gateway(service: &str, analysis: &str) -> String {
    flagger("provider: gatewayapi:v1\n", analysis).replace(
        "  service:\n    port: 9898\n",
        &format!("  service:\n    port: 9898\n    gatewayRefs: [{{name: gw}}]\n{service}"),
    )
}

#[test]
fn session_affinity_and_blue_green_mirror_load_on_gateway_api() {
    let affinity = "sessionAffinity:\n  cookieName: flagger-cookie\n  maxAge: 3600\n  domain: example.com\n  path: /\n  sameSite: Lax\n  httpOnly: true\n  secure: true\n  partitioned: false";
    assert_eq!(
        errors(&gateway("", &format!("stepWeight: 10\n{affinity}"))),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&gateway(
            "",
            &format!("iterations: 5\nmirror: true\nmirrorWeight: 25\n{affinity}")
        )),
        Vec::<String>::new()
    );
    // mirror: false is Flagger's default and changes nothing.
    assert_eq!(
        errors(&gateway("", "stepWeight: 10\nmirror: false")),
        Vec::<String>::new()
    );
}

#[test]
fn bad_session_affinity_and_mirror_fields_name_file_line_and_field() {
    let file = "apps/podinfo/canary.yaml";
    let cases: &[(&str, &str, &str)] = &[
        (
            "",
            "stepWeight: 10\nsessionAffinity: {maxAge: 60}",
            "17: spec.analysis.sessionAffinity.cookieName: required field is missing",
        ),
        (
            "",
            "stepWeight: 10\nsessionAffinity: {cookieName: \"a|b\"}",
            "17: spec.analysis.sessionAffinity.cookieName: expected a cookie name of letters, digits, '-' and '_' (routes match it in a regular expression), found \"a|b\"",
        ),
        (
            "",
            "stepWeight: 10\nsessionAffinity: {cookieName: c, maxAge: -1}",
            "17: spec.analysis.sessionAffinity.maxAge: expected 0..=2147483647, found -1",
        ),
        (
            "",
            "stepWeight: 10\nsessionAffinity: {cookieName: c, sameSite: lax}",
            "17: spec.analysis.sessionAffinity.sameSite: expected Strict, Lax or None, found \"lax\"",
        ),
        (
            "",
            "stepWeight: 10\nsessionAffinity: {cookieName: c, domain: \"a; Secure\"}",
            "17: spec.analysis.sessionAffinity.domain: expected a cookie attribute value (not empty, no ';' or control characters), found \"a; Secure\"",
        ),
        (
            "",
            "stepWeight: 10\nsessionAffinity: {cookieName: c, primaryCookieName: c}",
            "17: spec.analysis.sessionAffinity.primaryCookieName: expected another name than cookieName \"c\": the primary's cookie and the canary's must differ (Flagger refuses the same name too)",
        ),
        (
            "",
            "stepWeight: 10\nsessionAffinity: {cookieName: c, primaryCookieName: \"p;q\"}",
            "17: spec.analysis.sessionAffinity.primaryCookieName: expected a cookie name of letters, digits, '-' and '_' (routes match it in a regular expression), found \"p;q\"",
        ),
        (
            "",
            "iterations: 3\nmatch: [{headers: {x: {exact: y}}}]\nsessionAffinity: {cookieName: c}",
            "18: spec.analysis.sessionAffinity: not supported with A/B testing (analysis.match) on Gateway API routes: Flagger's router puts the A/B matches in place of the cookie match, so neither works; use sessionAffinity with stepWeight(s) or iterations without match",
        ),
        (
            "    headers:\n      response:\n        set: {x-a: b}\n",
            "stepWeight: 10\nsessionAffinity: {cookieName: c}",
            "16: spec.service.headers.response: cannot be combined with analysis.sessionAffinity on Gateway API routes: the rule that expires the session cookie would carry two ResponseHeaderModifier filters, which the HTTPRoute CRD forbids",
        ),
        (
            "    match:\n      - headers: {x-a: {exact: b}}\n",
            "stepWeight: 10\nsessionAffinity: {cookieName: c}",
            "16: spec.service.match[0].headers: cannot be combined with analysis.sessionAffinity on Gateway API routes: Flagger's cookie rule replaces these headers with the cookie match, so sticky requests would skip them",
        ),
        (
            "",
            "iterations: 3\nmirrorWeight: 20",
            "17: spec.analysis.mirrorWeight: applies only with analysis.mirror: true; remove it, or set mirror: true",
        ),
        (
            "",
            "iterations: 3\nmirror: true\nmirrorWeight: 120",
            "18: spec.analysis.mirrorWeight: expected 0..=100, found 120",
        ),
        (
            "",
            "iterations: 3\nmirror: yes",
            "17: spec.analysis.mirror: expected true or false, found \"yes\"",
        ),
        (
            "",
            "iterations: 3\nmatch: [{headers: {x: {exact: y}}}]\nmirror: true",
            "18: spec.analysis.mirror: Gateway API routes mirror only during a blue/green analysis (iterations without match), as Flagger's router does; with stepWeight(s) Flagger would hold the canary at weight 0 and with A/B it ignores mirror. Remove mirror, or use iterations without match",
        ),
    ];
    for (service, analysis, expected) in cases {
        assert_eq!(
            errors(&gateway(service, analysis)),
            [format!("{file}:{expected}")],
            "{analysis}"
        );
    }
    // A misspelt key is pruned, as the API server prunes it from a Flagger Canary.
    let loaded = load_text(
        file,
        &gateway(
            "",
            "stepWeight: 10\nsessionAffinity: {cookieName: c, cookiename: d}",
        ),
        &Settings::default(),
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings, [format!("{file}:17: spec.analysis.sessionAffinity.cookiename: unknown field (did you mean \"cookieName\"?); expected one of: cookieName, primaryCookieName, domain, httpOnly, maxAge, partitioned, path, sameSite, secure; ignored, as the Kubernetes API server prunes fields the Flagger CRD does not declare (Flagger never sees it)")]);
}

/// A Flagger canary on gatewayapi:v1 whose `spec.service` ends with `service` (indented by
/// 4) and whose analysis is `analysis` (indented by 4); `spec.service` starts on line 11.
fn gateway_canary(service: &str, analysis: &str) -> String {
    let indented = |lines: &str| {
        lines
            .lines()
            .map(|l| format!("\n    {l}"))
            .collect::<String>()
    };
    podinfo()
        .provider("gatewayapi:v1")
        .target("  targetRef:\n    kind: Deployment\n    name: podinfo\n")
        .service(&format!(
            "    port: 9898\n    gatewayRefs: [{{name: gw}}]{}",
            indented(service)
        ))
        .interval("30s")
        .threshold(None)
        .yaml(indented(analysis).trim_start_matches('\n'))
}

#[test]
fn gateway_api_service_fields_load_for_gatewayapi_v1() {
    let text = gateway_canary(
        "match: [{uri: {prefix: /api}}]\nheaders: {request: {set: {x-env: prod}}}\nrewrite: {uri: /v2}\ncorsPolicy: {allowOrigin: [https://example.com]}\ntimeout: 30s\nbackendTimeout: 10s",
        "stepWeight: 10",
    );
    assert_eq!(errors(&text), Vec::<String>::new());
}

#[test]
fn service_mirrors_load_for_both_gateway_api_versions() {
    let text = gateway_canary(
        "mirror:\n  - backendRef: {name: podinfo-shadow, port: 9898}\n  - backendRef: {kind: Recorder, group: example.io, name: replay}",
        "stepWeight: 10",
    );
    assert_eq!(errors(&text), Vec::<String>::new());
    let v1beta1 = text.replace("gatewayapi:v1", "gatewayapi:v1beta1");
    assert_eq!(errors(&v1beta1), Vec::<String>::new());
}

#[test]
fn service_mirror_errors_name_file_line_and_field() {
    let text = gateway_canary(
        "mirror:\n  - backendRef: {name: podinfo-shadow}\n    percent: 50\n  - backendRef: {name: replay, namespace: Observability, port: 80}",
        "stepWeight: 10",
    );
    assert_eq!(
        errors(&text),
        [
            "apps/podinfo/canary.yaml:16: spec.service.mirror[0].percent: Flagger's Canary has no percent or fraction for a mirror (each entry holds only backendRef), so Flagger mirrors every request; remove it, or mirror every request",
            "apps/podinfo/canary.yaml:15: spec.service.mirror[0].backendRef.port: required field is missing: a mirror to a Service needs the Service port (a CEL rule of the HTTPRoute CRD)",
            "apps/podinfo/canary.yaml:17: spec.service.mirror[1].backendRef.namespace: expected a namespace: a lowercase DNS label of at most 63 characters, found \"Observability\"",
        ]
    );
}

#[test]
fn gateway_api_service_field_errors_name_file_line_and_field() {
    let text = gateway_canary(
        "timeout: 1.5s\nheaders:\n  request:\n    set: {x canary: a}",
        "stepWeight: 10",
    );
    assert_eq!(
        errors(&text),
        [
            "apps/podinfo/canary.yaml:17: spec.service.headers.request.set.x canary: expected a header name (letters, digits and !#$%&'*+-.^_`|~, at most 256), found \"x canary\"",
            "apps/podinfo/canary.yaml:14: spec.service.timeout: expected a Gateway API duration (1 to 4 groups of up to 5 digits and a unit h, m, s or ms, such as 30s or 1m30s), found \"1.5s\"",
        ]
    );
}

#[test]
fn ab_matches_that_flaggers_merge_would_drop_are_errors() {
    let text = gateway_canary(
        "match:\n  - uri: {prefix: /api}\n    headers: {x-tenant: {exact: acme}}",
        "iterations: 5\nmatch:\n  - uri: {prefix: /beta}\n    method: {exact: GET}\n  - headers: {x-canary: {exact: insider}}\n    queryParams: {canary: {exact: 'true'}}",
    );
    assert_eq!(
        errors(&text),
        [
            "apps/podinfo/canary.yaml:21: spec.analysis.match[0].uri: with spec.service.match set, Flagger merges each A/B match into the service matches keeping only its headers and queryParams, so this condition would be dropped; move it into spec.service.match or remove it",
            "apps/podinfo/canary.yaml:22: spec.analysis.match[0].method: with spec.service.match set, Flagger merges each A/B match into the service matches keeping only its headers and queryParams, so this condition would be dropped; move it into spec.service.match or remove it",
            "apps/podinfo/canary.yaml:23: spec.analysis.match[1].headers: Flagger's merge replaces the headers of spec.service.match[0] with these, dropping that match's headers conditions; keep headers conditions in only one of the two lists",
        ]
    );
    // Without service matches the A/B matches are used as they are.
    let alone = gateway_canary(
        "timeout: 30s",
        "iterations: 5\nmatch:\n  - uri: {prefix: /beta}\n    method: {exact: GET}",
    );
    assert_eq!(errors(&alone), Vec::<String>::new());
}

#[test]
fn ab_matches_sluice_cannot_convert_are_load_errors() {
    let text = gateway_canary(
        "timeout: 30s",
        "iterations: 5\nmatch:\n  - headers: {x-canary: {exact: insider}}\n  - sourceLabels: {app: frontend}",
    );
    assert_eq!(
        errors(&text),
        ["apps/podinfo/canary.yaml:20: spec.analysis.match[1].sourceLabels: HTTPRoute has no equivalent of the Istio match field \"sourceLabels\"; sluice converts uri, method, headers and queryParams"]
    );
}

#[test]
fn native_ab_matches_on_an_httproute_are_converted_at_load() {
    let text = native("iterations: 5\nmatch:\n  - sourceLabels: {app: frontend}").replace(
        "    apiVersion: split.smi-spec.io/v1alpha2\n    kind: TrafficSplit\n",
        "    apiVersion: gateway.networking.k8s.io/v1\n    kind: HTTPRoute\n    parentRefs: [{name: gw}]\n",
    );
    assert_eq!(
        errors(&text),
        ["apps/podinfo/canary.yaml:18: spec.analysis.match[0].sourceLabels: HTTPRoute has no equivalent of the Istio match field \"sourceLabels\"; sluice converts uri, method, headers and queryParams"]
    );
    let fixed = text.replace(
        "sourceLabels: {app: frontend}",
        "headers: {x-canary: {exact: insider}}",
    );
    assert_eq!(errors(&fixed), Vec::<String>::new());
}

#[test]
fn ab_rules_too_big_or_breaking_the_prefix_rewrite_rule_are_errors() {
    let service: String = (0..9)
        .map(|i| format!("  - uri: {{prefix: /s{i}}}\n"))
        .collect();
    let ab: String = (0..8)
        .map(|i| format!("  - headers: {{x-{i}: {{exact: a}}}}\n"))
        .collect();
    let text = gateway_canary(
        &format!("match:\n{service}"),
        &format!("iterations: 5\nmatch:\n{ab}"),
    );
    assert_eq!(
        errors(&text),
        ["apps/podinfo/canary.yaml:28: spec.analysis.match: the A/B rule would hold 72 matches (8 A/B matches × 9 service matches) and the route 81 in all; an HTTPRoute rule holds at most 64 and a route at most 128"]
    );

    let two_ab = gateway_canary(
        "rewrite: {uri: /, type: ReplacePrefixMatch}",
        "iterations: 5\nmatch:\n  - headers: {x-a: {exact: a}}\n  - headers: {x-b: {exact: b}}",
    );
    assert_eq!(
        errors(&two_ab),
        ["apps/podinfo/canary.yaml:14: spec.service.rewrite.type: rewrite type ReplacePrefixMatch needs exactly one PathPrefix match in each HTTPRoute rule (a CEL rule of the HTTPRoute CRD); the A/B rule would hold 2 matches"]
    );

    let exact_ab = gateway_canary(
        "rewrite: {uri: /, type: ReplacePrefixMatch}",
        "iterations: 5\nmatch:\n  - uri: {exact: /beta}",
    );
    assert_eq!(
        errors(&exact_ab),
        ["apps/podinfo/canary.yaml:19: spec.analysis.match[0].uri: rewrite type ReplacePrefixMatch needs exactly one PathPrefix match in each HTTPRoute rule (a CEL rule of the HTTPRoute CRD); expected a uri prefix match here"]
    );

    let prefix_ab = gateway_canary(
        "rewrite: {uri: /, type: ReplacePrefixMatch}",
        "iterations: 5\nmatch:\n  - uri: {prefix: /beta}\n    headers: {x-a: {exact: a}}",
    );
    assert_eq!(errors(&prefix_ab), Vec::<String>::new());
}

/// Flagger's SMI router ignores the route fields of `spec.service`; sluice refuses each, naming
/// the providers that render it, instead of ignoring them too.
#[test]
fn smi_canaries_refuse_the_route_fields_a_traffic_split_cannot_hold() {
    let text = gateway_canary(
        "timeout: soon\nrewrite: {}\ncorsPolicy: {}\nmatch: [{sourceLabels: {app: x}}]",
        "stepWeight: 10",
    )
    .replace("provider: gatewayapi:v1", "provider: osm")
    .replace("    gatewayRefs: [{name: gw}]\n", "");
    let errs = errors(&text);
    assert_has(&errs, ": spec.service.timeout: not supported with provider osm: Flagger's router ignores this field (the route's request timeout) and sluice refuses it rather than ignore it too; remove it, or use a provider that renders it (istio, gatewayapi, contour, appmesh)");
    for field in ["rewrite", "corsPolicy", "match"] {
        assert_has(
            &errs,
            &format!(": spec.service.{field}: not supported with provider osm"),
        );
    }
    assert_eq!(errs.len(), 4, "{errs:#?}");
}

#[test]
fn webhook_disable_tls_is_kept() {
    let ok = flagger("provider: osm\n", "stepWeight: 10\nwebhooks:\n- {name: a, type: pre-rollout, url: 'https://t/', disableTLS: true}");
    let loaded = load_text("c.yaml", &ok, &Settings::default());
    assert!(loaded.canaries[0].analysis.webhooks[0].disable_tls);
    let bad = flagger(
        "provider: osm\n",
        "stepWeight: 10\nwebhooks:\n- {name: a, url: 'https://t/', disableTLS: maybe}",
    );
    assert_has(
        &errors(&bad),
        "spec.analysis.webhooks[0].disableTLS: expected true or false, found \"maybe\"",
    );
}

#[test]
fn ready_thresholds_load_with_flaggers_default_and_refuse_what_is_not_a_percent() {
    let settings = parse_settings(".sluice/config.yaml", "provider: osm\n").unwrap();
    let load = |analysis: &str| load_text("c.yaml", &flagger("", analysis), &settings);
    let unset = load("stepWeight: 10");
    assert!(unset.errors.is_empty(), "{:?}", unset.errors);
    let a = &unset.canaries[0].analysis;
    // canary.go: PrimaryReadyThreshold = 100, CanaryReadyThreshold = 100.
    assert_eq!(
        (a.primary_ready_threshold, a.canary_ready_threshold),
        (100, 100)
    );
    let set = load("stepWeight: 10\nprimaryReadyThreshold: 60\ncanaryReadyThreshold: 0");
    assert!(set.errors.is_empty(), "{:?}", set.errors);
    let a = &set.canaries[0].analysis;
    assert_eq!(
        (a.primary_ready_threshold, a.canary_ready_threshold),
        (60, 0)
    );
    let errs = errors(&flagger(
        "provider: osm\n",
        "stepWeight: 10\nprimaryReadyThreshold: 150\ncanaryReadyThreshold: -1",
    ));
    assert_has(
        &errs,
        "apps/podinfo/canary.yaml:16: spec.analysis.primaryReadyThreshold: expected 0..=100, found 150",
    );
    assert_has(
        &errs,
        "apps/podinfo/canary.yaml:17: spec.analysis.canaryReadyThreshold: expected 0..=100, found -1",
    );
}
