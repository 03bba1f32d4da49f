//! `sluice validate` checks the repo as the loop loads it: MetricTemplates and the canaries'
//! `templateRef`s to them, with the real binary (text and `--output github`), and the same
//! canaries in a running loop never start.

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use sluice::tick::tick;

use crate::support::rollout::commits_of;
use crate::support::{git, human_clone, human_commit, seeded_remote, sluice_clone, tick_context};
use crate::support::{repo, validate};

/// A route-only canary `shop/<name>` whose one metric uses the template `template`
/// (`templateRef` on line 13), or no metric when `template` is `None`.
fn canary(name: &str, template: Option<&str>, revision: &str) -> String {
    let metrics = match template {
        Some(t) => format!(
            "\n    metrics:\n      - name: errors\n        templateRef: {t}\n        thresholdRange: {{max: 1}}"
        ),
        None => String::new(),
    };
    crate::support::canary::route_only_smi(
        "shop",
        name,
        revision,
        &format!("    interval: 1s\n    stepWeights: [50]{metrics}"),
    )
}

/// A MetricTemplate `<namespace>/<name>` of provider `provider` (`type` on line 8).
fn template(name: &str, namespace: &str, provider: &str, query: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: {name}
  namespace: {namespace}
spec:
  provider:
    type: {provider}
    address: http://prometheus.monitoring:9090
  query: {query}
"
    )
}

const QUERY: &str = "sum(rate(http_requests_total{namespace=\"{{ namespace }}\"}[{{ interval }}]))";

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn validate_refuses_a_dangling_template_ref_at_its_line() {
    let dir = repo(&[
        (
            "apps/api.yaml",
            &canary("api", Some("{name: error-rate}"), "v1"),
        ),
        (
            "apps/web.yaml",
            &canary("web", Some("{name: error-rate, namespace: metrics}"), "v1"),
        ),
        (
            "metrics/templates.yaml",
            &template("error-rate", "metrics", "prometheus", QUERY),
        ),
    ]);
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{out}{err}");
    // Without a namespace the reference looks in the canary's (shop), as Flagger does.
    assert_eq!(
        lines(&err),
        [
            "./apps/api.yaml:13: spec.analysis.metrics[0].templateRef: metric template shop/error-rate not found: no flagger.app/v1beta1 MetricTemplate with that namespace and name in the repo",
            "1 problem found; 1 canary valid",
        ]
    );

    // Given one folder, references still resolve against the whole repo.
    crate::support::validates_one_canary(dir.path(), &["apps/web.yaml"]);
}

#[test]
fn validate_refuses_templates_of_providers_sluice_cannot_query_by_name() {
    let cases = [
        ("keptn", "provider type \"keptn\" is not supported: Keptn is read from the cluster's Keptn resources"),
        ("stackdriver", "provider type \"stackdriver\" is not supported: Stackdriver needs signed requests"),
        ("externalmetrics", "provider type \"externalmetrics\" is not supported: external metrics are read from the cluster's Kubernetes API"),
    ];
    for (provider, why) in cases {
        let dir = repo(&[
            ("apps/api.yaml", &canary("api", Some("{name: m}"), "v1")),
            ("apps/m.yaml", &template("m", "shop", provider, "x")),
        ]);
        let (code, out, err) = validate(dir.path(), &["."]);
        assert_eq!(code, 1, "{provider}: {out}{err}");
        let err = lines(&err);
        assert_eq!(err.len(), 3, "{provider}: {err:#?}");
        assert!(
            err[0].starts_with(&format!("./apps/m.yaml:8: spec.provider.type: {why}")),
            "{provider}: {err:#?}"
        );
        assert!(
            err[1].starts_with(&format!(
                "./apps/api.yaml:13: spec.analysis.metrics[0].templateRef: metric template shop/m is invalid: apps/m.yaml:8: spec.provider.type: {why}"
            )),
            "{provider}: {err:#?}"
        );
        assert_eq!(err[2], "2 problems found; 0 canaries valid");
    }
}

#[test]
fn a_broken_template_is_reported_and_refuses_every_canary_using_it() {
    let broken = template("error-rate", "shop", "prometheus", QUERY)
        .replace("address: http://", "adress: http://");
    let dir = repo(&[
        (
            "apps/api.yaml",
            &canary("api", Some("{name: error-rate}"), "v1"),
        ),
        (
            "apps/web.yaml",
            &canary("web", Some("{name: error-rate}"), "v1"),
        ),
        ("apps/other.yaml", &canary("other", None, "v1")),
        ("metrics/error-rate.yaml", &broken),
    ]);
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{out}{err}");
    let err = lines(&err);
    let why = "spec.provider.adress: unknown field (did you mean \"address\"?); expected one of: type, address, headers, secretRef, region, insecureSkipVerify";
    assert_eq!(
        err,
        [
            format!("./metrics/error-rate.yaml:9: {why}"),
            format!("./apps/api.yaml:13: spec.analysis.metrics[0].templateRef: metric template shop/error-rate is invalid: metrics/error-rate.yaml:9: {why}"),
            format!("./apps/web.yaml:13: spec.analysis.metrics[0].templateRef: metric template shop/error-rate is invalid: metrics/error-rate.yaml:9: {why}"),
            "3 problems found; 1 canary valid".to_string(),
        ]
    );
}

#[test]
fn github_output_annotates_each_problem_at_its_repo_relative_line() {
    let dir = repo(&[
        (
            "apps/api.yaml",
            &canary("api", Some("{name: missing}"), "v1"),
        ),
        (
            "apps/web.yaml",
            &canary("web", None, "v1").replace("stepWeights: [50]", "stepWeights: [150]"),
        ),
        ("apps/m.yaml", &template("m", "shop", "keptn", "x")),
    ]);
    // Escaped as GitHub documents: `:` and `,` in properties, `%` in the message (the
    // stepWeights message has none, so a query with one is used below).
    let expected = [
        "::error file=apps/web.yaml,line=10,title=spec.analysis.stepWeights[0]::expected 1..=100, found 150",
        "::error file=apps/m.yaml,line=8,title=spec.provider.type::provider type \"keptn\" is not supported: Keptn is read from the cluster's Keptn resources, which sluice does not read; sluice queries prometheus, datadog, newrelic, graphite, influxdb, dynatrace, splunk, cloudwatch",
        "::error file=apps/api.yaml,line=13,title=spec.analysis.metrics[0].templateRef::metric template shop/missing not found: no flagger.app/v1beta1 MetricTemplate with that namespace and name in the repo",
    ];
    // Run from the repo root, or from elsewhere with an absolute path: the same annotations.
    let root = dir.path().to_str().unwrap();
    for (cwd, arg) in [(dir.path(), "."), (Path::new("/"), root)] {
        let (code, out, err) = validate(cwd, &["--output", "github", arg]);
        assert_eq!(code, 1, "{out}{err}");
        assert_eq!(lines(&out), expected, "from {}", cwd.display());
        assert_eq!(lines(&err), ["3 problems found; 0 canaries valid"]);
    }

    // A valid repo: no annotation, exit 0; a path that is not there: exit 2.
    let good = repo(&[("apps/web.yaml", &canary("web", None, "v1"))]);
    crate::support::validates_one_canary(good.path(), &["-o", "github", "."]);
    let (code, out, err) = validate(good.path(), &["-o", "github", "nope"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.starts_with("error: cannot read nope:"), "{err}");
}

/// The loop loads specs as `validate` does: the canary whose templateRef dangles never
/// starts (no commit, no status file, the error in every tick's report), while the others
/// roll out.
#[test]
fn a_canary_with_a_dangling_template_ref_never_starts_in_the_loop() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(
        tmp.path(),
        &[
            (
                "apps/api.yaml",
                &canary("api", Some("{name: missing}"), "v1"),
            ),
            ("apps/web.yaml", &canary("web", None, "v1")),
        ],
    );
    let url = bare.display().to_string();
    let human = human_clone(&url, &tmp.path().join("human"));
    let mut repo = sluice_clone(&url, &tmp.path().join("w"));
    let observer = sluice::observer::Offline;
    let ctx = tick_context(&observer, crate::support::runtime());
    let expected = "apps/api.yaml:13: spec.analysis.metrics[0].templateRef: metric template shop/missing not found: no flagger.app/v1beta1 MetricTemplate with that namespace and name in the repo";
    let mut now = Timestamp::now();
    let mut run = |ticks: usize| {
        for _ in 0..ticks {
            let report = tick(&mut repo, &ctx, now).unwrap();
            let errors: Vec<String> = report.spec_errors.iter().map(ToString::to_string).collect();
            assert_eq!(errors, [expected]);
            assert!(
                report.outcomes.iter().all(|o| o.id != "shop/api"),
                "{:?}",
                report.outcomes
            );
            now = report
                .wake_at()
                .unwrap_or(now + Duration::from_secs(1))
                .max(now + Duration::from_secs(1));
        }
    };
    run(3);
    assert_eq!(commits_of(&bare, "shop/web").len(), 1, "web initialized");
    // Both canaries get a new revision: only web rolls out.
    git(&human, &["pull", "-q", "origin", "main"]);
    human_commit(
        &human,
        "apps/web.yaml",
        &canary("web", None, "v2"),
        "web: v2",
    );
    human_commit(
        &human,
        "apps/api.yaml",
        &canary("api", Some("{name: missing}"), "v2"),
        "api: v2",
    );
    run(10);
    let web = commits_of(&bare, "shop/web");
    assert!(web.len() >= 3, "web rolled out v2: {web:?}");
    assert!(
        web.iter().any(|(_, weights)| weights.contains("canary=50")),
        "web shifted traffic: {web:?}"
    );
    assert_eq!(
        commits_of(&bare, "shop/api"),
        Vec::<(String, String)>::new()
    );
    let tree = git(&bare, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(tree.contains(".sluice/status/shop/web.yaml"), "{tree}");
    assert!(!tree.contains(".sluice/status/shop/api.yaml"), "{tree}");
}

/// The CI example (`examples/ci/validate.yaml`) runs arguments the binary accepts, and they
/// print GitHub annotations.
#[test]
fn the_ci_example_runs_validate_with_github_annotations() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ci/validate.yaml");
    let workflow: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let steps = workflow["jobs"]["validate"]["steps"].as_array().unwrap();
    let args = steps
        .iter()
        .find_map(|s| s["with"]["args"].as_str())
        .expect("a step passes args to the sluice image");
    let args: Vec<&str> = args.split_whitespace().collect();
    assert_eq!(args[0], "validate", "{args:?}");
    let dir = repo(&[(
        "apps/api.yaml",
        &canary("api", Some("{name: missing}"), "v1"),
    )]);
    let (code, out, err) = validate(dir.path(), &args[1..]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.starts_with(
            "::error file=apps/api.yaml,line=13,title=spec.analysis.metrics[0].templateRef::"
        ),
        "{out}"
    );
}

#[test]
fn validate_reports_analysis_template_errors_at_their_lines() {
    let analysis = "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
  namespace: shop
spec:
  args:
  - name: service
  metrics:
  - name: success-rate
    successCondition: result[0] matches '^1'
    provider:
      prometheus:
        query: sum(rate(http_requests_total{service=\"{{args.service}}\"}[1m]))
  - name: errors
    provider:
      wavefront:
        query: ts(errors)
";
    let dir = repo(&[
        ("apps/api.yaml", &canary("api", None, "v1")),
        ("apps/analysis.yaml", analysis),
    ]);
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        lines(&err),
        [
            "./apps/analysis.yaml:11: spec.metrics[0].successCondition: column 11: unexpected \"matches\": \"result[0] matches '^1'\": sluice evaluates the subset of Argo's expression language AnalysisTemplates use (see docs/rollouts.md)",
            "./apps/analysis.yaml:17: spec.metrics[1].provider.wavefront: provider \"wavefront\" is not supported: sluice has no Wavefront client; sluice measures prometheus, graphite, datadog, job and web",
            "2 problems found; 1 canary valid",
        ]
    );
    // Fixed, the repo validates.
    std::fs::write(
        dir.path().join("apps/analysis.yaml"),
        analysis
            .replace(" matches '^1'", " >= 0.95")
            .replace("wavefront", "prometheus"),
    )
    .expect("write");
    crate::support::validates_one_canary(dir.path(), &["."]);
}
