//! OpenFunction `Function`s with canary steps (`spec.rolloutStrategy.canary.steps`, or the
//! first shape `spec.canarySteps`): `sluice validate` (the real binary) and the loop refuse
//! each at its steps' line and print the equivalent native canary, which validates once
//! committed next to the Services it names. A Function without steps is not mentioned.

use std::time::Duration;

use jiff::Timestamp;
use sluice::tick::tick;

use crate::support::{repo, validate};
use crate::support::{seeded_remote, sluice_clone, tick_context};

/// OpenFunction's proposal (OpenFunction/OpenFunction#487): steps under the rollout strategy,
/// pauses in seconds (line 7 holds `steps`).
const ROLLOUT_STRATEGY: &str = "apiVersion: core.openfunction.io/v1beta2
kind: Function
metadata:
  name: hello
  namespace: fn
spec:
  rolloutStrategy:
    canary:
      steps:
      - weight: 20
        pause:
          duration: 60
      - weight: 80
        pause:
          duration: 1m30s
  image: registry.example.com/hello:v2
  route:
    gatewayRef: {name: edge, namespace: gateways}
    hostnames: [hello.example.com]
  serving:
    template:
      containers:
      - name: function
  version: v2.0.0
  workloadRuntime: OCIContainer
";

/// The pull request's first shape (OpenFunction/OpenFunction#490): `spec.canarySteps`, with
/// an approval pause (line 6 holds `canarySteps`).
const CANARY_STEPS: &str = "apiVersion: core.openfunction.io/v1beta1
kind: Function
metadata:
  name: greeter
spec:
  canarySteps:
  - weight: 10
    pause: {duration: 30}
  - weight: 50
    pause: {}
  image: registry.example.com/greeter:v7
  port: 9000
";

const PLAIN_FUNCTION: &str = "apiVersion: core.openfunction.io/v1beta2
kind: Function
metadata:
  name: plain
  namespace: fn
spec:
  image: registry.example.com/plain:v1
  serving:
    template:
      containers:
      - name: function
";

/// A Service of the user's, named in the printed canary.
fn service(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {namespace}
spec:
  selector: {{app: {name}}}
  ports:
  - port: 8080
"
    )
}

/// The native canary `validate` printed after the error line.
fn printed_canary(stdout: &str) -> String {
    let start = stdout
        .find("apiVersion: sluice.dev/v1alpha1")
        .unwrap_or_else(|| panic!("no canary printed: {stdout}"));
    let mut canary = String::new();
    for line in stdout[start..].lines() {
        let top_level = ["apiVersion:", "kind:", "metadata:", "spec:"]
            .iter()
            .any(|k| line.starts_with(k));
        if !line.starts_with(' ') && !top_level {
            break;
        }
        canary.push_str(line);
        canary.push('\n');
    }
    canary
}

fn refused_with_its_canary(file: &str, text: &str, at: &str, expected_canary: &str) {
    let dir = repo(&[(file, text), ("apps/plain/function.yaml", PLAIN_FUNCTION)]);
    let (code, stdout, stderr) = validate(dir.path(), &["."]);
    let all = format!("{stdout}{stderr}");
    assert_eq!(code, 1, "{all}");
    assert!(
        all.contains(&format!("{file}:{at}: an OpenFunction Function with canary steps cannot be rolled out by sluice: OpenFunction names the Function's servings (and their Knative Services) at run time, so no name to route to is in git")),
        "{all}"
    );
    assert!(
        !all.contains("apps/plain"),
        "a Function without steps is not mentioned: {all}"
    );
    let canary = printed_canary(&all);
    assert_eq!(canary, expected_canary);

    // Committed next to the Services it names, the printed canary validates.
    let namespace = if file.contains("greeter") {
        "default"
    } else {
        "fn"
    };
    let stem = if file.contains("greeter") {
        "greeter"
    } else {
        "hello"
    };
    let stable = service(&format!("{stem}-stable"), namespace);
    let canary_service = service(&format!("{stem}-canary"), namespace);
    let dir = repo(&[
        ("apps/fn/canary.yaml", &canary),
        ("apps/fn/stable.yaml", &stable),
        ("apps/fn/canary-service.yaml", &canary_service),
    ]);
    let (code, stdout, stderr) = validate(dir.path(), &["."]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("1 canary valid"), "{stdout}");
}

#[test]
fn a_function_with_rollout_strategy_steps_is_refused_with_its_native_canary() {
    refused_with_its_canary(
        "apps/hello/function.yaml",
        ROLLOUT_STRATEGY,
        "9: spec.rolloutStrategy.canary.steps",
        r#"apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata:
  name: "hello"
  namespace: "fn"
spec:
  routeOnly:
    services: ["hello-stable", "hello-canary"]
    revision: "registry.example.com/hello:v2"
  service:
    name: "hello"
    port: 8080
  route:
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    parentRefs:
      - name: "edge"
        namespace: "gateways"
    hostnames: ["hello.example.com"]
  analysis:
    steps:
      - weight: 20
        pause: {duration: "60s"}
      - weight: 80
        pause: {duration: "1m30s"}
"#,
    );
}

#[test]
fn a_function_with_canary_steps_is_refused_with_its_native_canary() {
    refused_with_its_canary(
        "apps/greeter/function.yaml",
        CANARY_STEPS,
        "6: spec.canarySteps",
        r#"apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata:
  name: "greeter"
  namespace: "default"
spec:
  routeOnly:
    services: ["greeter-stable", "greeter-canary"]
    revision: "registry.example.com/greeter:v7"
  service:
    name: "greeter"
    port: 9000
  route:
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    parentRefs:
      - name: "openfunction"
        namespace: "openfunction"
  analysis:
    steps:
      - weight: 10
        pause: {duration: "30s"}
      - weight: 50
        pause: {}
"#,
    );
}

#[test]
fn a_function_without_steps_is_not_mentioned() {
    let dir = repo(&[("apps/plain/function.yaml", PLAIN_FUNCTION)]);
    let (code, stdout, stderr) = validate(dir.path(), &["--allow-empty", "."]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        !format!("{stdout}{stderr}").contains("plain"),
        "{stdout}{stderr}"
    );
}

#[test]
fn a_step_the_native_canary_cannot_take_is_named_at_its_line() {
    let text = CANARY_STEPS.replace("weight: 50", "weight: 150");
    let dir = repo(&[("apps/greeter/function.yaml", &text)]);
    let (code, stdout, stderr) = validate(dir.path(), &["."]);
    let all = format!("{stdout}{stderr}");
    assert_eq!(code, 1, "{all}");
    assert!(
        all.contains("apps/greeter/function.yaml:9: spec.canarySteps[1].weight: expected a whole-number weight from 1 to 100"),
        "{all}"
    );
    assert!(
        all.contains("apps/greeter/function.yaml:6: spec.canarySteps: an OpenFunction Function"),
        "{all}"
    );
}

/// The loop reports the same error every tick and commits nothing for the Function.
#[test]
fn the_loop_refuses_a_function_with_canary_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(
        tmp.path(),
        &[("apps/hello/function.yaml", ROLLOUT_STRATEGY)],
    );
    let url = bare.display().to_string();
    let mut repo = sluice_clone(&url, &tmp.path().join("w"));
    let observer = sluice::observer::Offline;
    let ctx = tick_context(&observer, crate::support::runtime());
    let mut now = Timestamp::now();
    for _ in 0..2 {
        let report = tick(&mut repo, &ctx, now).unwrap();
        let errors: Vec<String> = report.spec_errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("apps/hello/function.yaml:9: spec.rolloutStrategy.canary.steps: an OpenFunction Function with canary steps"),
            "{errors:?}"
        );
        assert!(
            errors[0].contains("apiVersion: sluice.dev/v1alpha1"),
            "{errors:?}"
        );
        assert_eq!(report.commits, 0);
        now += Duration::from_secs(1);
    }
}

/// A Function of `version` whose steps sit under `spec` or (`serving`) `spec.serving`,
/// with `route` after it; `steps` is on line 11.
fn function_of(version: &str, serving: bool, route: &str) -> String {
    let (strategy, indent) = if serving {
        ("  serving:\n    rolloutStrategy:\n", "      ")
    } else {
        (
            "  image: registry.example.com/hello:v3\n  rolloutStrategy:\n",
            "    ",
        )
    };
    let image = if serving {
        "  image: registry.example.com/hello:v3\n"
    } else {
        ""
    };
    format!(
        "apiVersion: core.openfunction.io/{version}
kind: Function
metadata:
  name: hello
  namespace: fn
spec:
  version: v3.0.0
{strategy}{indent}canary:
{indent}  steps:
{indent}  - weight: 30
{indent}    pause: {{duration: 60}}
{image}{route}"
    )
}

/// Both shapes (`spec.rolloutStrategy`, `spec.serving.rolloutStrategy`) in every version that
/// has Functions are answered at their steps' line, never passed as "0 canaries".
#[test]
fn both_rollout_strategy_shapes_in_every_version_are_answered_at_their_line() {
    for version in ["v1alpha2", "v1beta1", "v1beta2"] {
        for (serving, line, field) in [
            (false, 11, "spec.rolloutStrategy.canary.steps"),
            (true, 11, "spec.serving.rolloutStrategy.canary.steps"),
        ] {
            let text = function_of(version, serving, "");
            let dir = repo(&[("apps/hello/function.yaml", &text)]);
            let (code, out, err) = validate(dir.path(), &["."]);
            assert_eq!(code, 1, "{version} {field}: {out}{err}");
            assert!(
                err.contains(&format!("./apps/hello/function.yaml:{line}: {field}: an OpenFunction Function with canary steps cannot be rolled out by sluice")),
                "{version} {field}:\n{text}\n{err}"
            );
        }
    }
}

/// v1beta2 keeps the route under `spec.serving.triggers.http`: the printed canary carries its
/// gateway and hostnames; a route with path rules it would drop is not printed at all.
#[test]
fn a_v1beta2_functions_printed_canary_carries_its_gateway_and_hostnames() {
    let route = "  serving:\n    triggers:\n      http:\n        route:\n          gatewayRef: {name: edge, namespace: gateways}\n          hostnames: [hello.example.com]\n";
    let text = function_of("v1beta2", false, route);
    let dir = repo(&[("apps/hello/function.yaml", &text)]);
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{out}{err}");
    let canary = printed_canary(&format!("{out}{err}"));
    assert!(
        canary.contains("    parentRefs:\n      - name: \"edge\"\n        namespace: \"gateways\"\n    hostnames: [\"hello.example.com\"]\n"),
        "{canary}"
    );

    let with_rules = format!("{route}          rules:\n            - matches:\n                - path: {{type: PathPrefix, value: /hello}}\n");
    let text = function_of("v1beta2", false, &with_rules);
    let dir = repo(&[("apps/hello/function.yaml", &text)]);
    let (code, out, err) = validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("(no native canary printed: the Function's route has path rules (line 20), which the printed canary would not carry exactly; write the canary with its route by hand)"),
        "{err}"
    );
    assert!(!err.contains("apiVersion: sluice.dev"), "{err}");
}
