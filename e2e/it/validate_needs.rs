//! `sluice validate` refuses what can never run: metrics with no Prometheus to ask, a folder
//! with no canary; and says what sluice runs instead of an `interval` under Flagger's floor
//! (at `validate` and at `plan`). The real binary on the demo's own repo.

use sluice::cli::demo::DEMO_FILES;

use crate::support::{repo, validate, validates_one_canary};

const CANARY: &str = "apps/podinfo/canary.yaml";

/// The demo's repo, each file passed through `edit(path, text)`.
fn demo_repo(edit: impl Fn(&str, &str) -> String) -> tempfile::TempDir {
    let files: Vec<(&str, String)> = DEMO_FILES
        .iter()
        .map(|(path, text)| (*path, edit(path, text)))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    repo(&files)
}

/// The demo's settings without `prometheus.address`.
fn without_address(path: &str, text: &str) -> String {
    if path != ".sluice/config.yaml" {
        return text.to_string();
    }
    let settings: String = text
        .lines()
        .filter(|l| !l.starts_with("prometheus:") && !l.starts_with("  address:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!settings.contains("address"), "{settings}");
    settings
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn the_demo_repo_validates_with_its_prometheus_address() {
    let dir = demo_repo(|_, text| text.to_string());
    validates_one_canary(dir.path(), &["."]);
}

#[test]
fn built_in_metrics_without_a_prometheus_address_are_refused_at_their_line() {
    let dir = demo_repo(without_address);
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{out}{err}");
    let fix = "asks Prometheus, and no address is set: add `prometheus: {address: http://...}` to .sluice/config.yaml (or spec.metricsServer on this canary); validate --offline skips this check";
    assert_eq!(
        lines(&err),
        [
            format!("./{CANARY}:28: spec.analysis.metrics[0]: built-in metric request-success-rate {fix}"),
            format!("./{CANARY}:32: spec.analysis.metrics[1]: built-in metric request-duration {fix}"),
            "2 problems found; 0 canaries valid".to_string(),
        ]
    );
    assert_eq!(out, "");

    // --offline checks the spec alone.
    validates_one_canary(dir.path(), &["--offline", "."]);

    // The canary's own metricsServer is an address too.
    let with_server = demo_repo(|path, text| {
        let text = without_address(path, text);
        match path {
            CANARY => text.replace(
                "  provider: gatewayapi:v1\n",
                "  provider: gatewayapi:v1\n  metricsServer: http://prometheus.monitoring:9090\n",
            ),
            _ => text,
        }
    });
    validates_one_canary(with_server.path(), &["."]);
}

/// A MetricTemplate of type prometheus: its own `provider.address`, else the canary's or the
/// repo's; with none, the metric that uses it is refused, naming the template.
#[test]
fn a_prometheus_template_without_an_address_is_refused_at_the_metric_using_it() {
    let template = |address: &str| {
        format!(
            "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: error-rate
  namespace: demo
spec:
  provider:
    type: prometheus{address}
  query: sum(rate(http_requests_total{{namespace=\"{{{{ namespace }}}}\",status=~\"5..\"}}[{{{{ interval }}}}]))
"
        )
    };
    let metrics = "    metrics:\n      - name: errors\n        templateRef: {name: error-rate}\n        thresholdRange: {max: 1}\n";
    let canary_with_template = |text: &str| {
        let at = text
            .find("    metrics:\n")
            .expect("the demo canary has metrics");
        format!("{}{metrics}", &text[..at])
    };
    for (address, code) in [
        ("", 1),
        ("\n    address: http://prometheus.monitoring:9090", 0),
    ] {
        let dir = demo_repo(|path, text| match path {
            CANARY => canary_with_template(text),
            _ => without_address(path, text),
        });
        std::fs::write(
            dir.path().join("apps/podinfo/errors.yaml"),
            template(address),
        )
        .unwrap();
        let (got, out, err) = validate(dir.path(), &["."]);
        assert_eq!(got, code, "{address:?}: {out}{err}");
        if code == 1 {
            assert_eq!(
                lines(&err),
                [
                    format!("./{CANARY}:28: spec.analysis.metrics[0]: metric errors (MetricTemplate demo/error-rate, apps/podinfo/errors.yaml:1, type prometheus with no spec.provider.address) asks Prometheus, and no address is set: add `prometheus: {{address: http://...}}` to .sluice/config.yaml (or spec.metricsServer on this canary, or spec.provider.address on the template); validate --offline skips this check"),
                    "1 problem found; 0 canaries valid".to_string(),
                ]
            );
        } else {
            assert_eq!((out.as_str(), err.as_str()), ("1 canary valid\n", ""));
        }
    }
}

#[test]
fn a_folder_without_canaries_fails_unless_allowed_empty() {
    let dir = repo(&[("apps/podinfo/deployment.yaml", DEMO_FILES[1].1)]);
    let (code, out, err) = validate(dir.path(), &["apps"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            1,
            "",
            "no canary found in apps: check the path (validate --allow-empty accepts a folder without canaries)\n"
        )
    );
    let (code, out, err) = validate(dir.path(), &["--allow-empty", "apps"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "0 canaries valid\n", "")
    );
}

/// Flagger runs an analysis at most every 10 s; a shorter `interval` loads (as in Flagger) and
/// says what runs instead, at `validate` and at `plan`.
#[test]
fn an_interval_under_flaggers_floor_is_a_warning_naming_what_runs() {
    let dir = demo_repo(|path, text| match path {
        CANARY => text.replace("    interval: 10s\n", "    interval: 2s\n"),
        _ => text.to_string(),
    });
    let warning = format!("warning: ./{CANARY}:22: spec.analysis.interval: 2s is below Flagger's 10s floor (GetAnalysisInterval): sluice analyses and steps every 10s, as Flagger does; write `interval: 10s` to say so");
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!((code, out.as_str()), (0, "1 canary valid\n"), "{err}");
    assert_eq!(
        lines(&err),
        [
            warning.as_str(),
            "1 warning(s): a Flagger cluster accepts these canaries, and so does sluice (validate --strict refuses them)",
        ]
    );
    let (code, _, err) = validate(dir.path(), &["--strict", "."]);
    assert_eq!(code, 1, "{err}");

    let (code, out, err) = crate::support::run_sluice(&[
        "plan",
        dir.path().join("apps").to_str().unwrap(),
        "--config",
        dir.path().join(".sluice/config.yaml").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let file = dir.path().join(CANARY).display().to_string();
    assert_eq!(
        lines(&err),
        [warning.replace(&format!("./{CANARY}"), &file)],
        "{out}"
    );
}
