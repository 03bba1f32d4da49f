//! OpenFunction `Function`s that ask for a canary: recognised and refused, with the native
//! canary that does what they ask.
//!
//! OpenFunction's canary proposal (OpenFunction/OpenFunction#487, and the first shape of its
//! pull request #490) put weight-and-pause steps on the `Function`, as
//! `spec.rolloutStrategy.canary.steps` (under `spec.serving` in v1beta2's layout) or
//! `spec.canarySteps`; sluice's native steps follow
//! the same proposal. OpenFunction's controller never merged it, and it names each serving
//! (and its Knative Service) at run time, so no name sluice could route to is in git. A
//! Function holding such steps would otherwise load as nothing at all: `validate` would say
//! "0 canaries" and exit 0 while nothing ever happens.
//!
//! So each such Function is an error at its steps' line whose message explains why and prints
//! the equivalent native canary: route-only (the user names the two Services), the same
//! steps and pauses, an HTTPRoute on the Function's gateway and hostnames (its route:
//! `spec.serving.triggers.http.route` in v1beta2, `spec.route` before; OpenFunction's default
//! gateway `openfunction/openfunction` when it names none). A route with path `rules` is not
//! printed, since the printed canary would drop them. A Function without steps is not a
//! canary and is not mentioned.
//!
//! Reads one document; must not read other files or decide anything.

use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, parse_duration, Reader};

/// The API group of OpenFunction's `Function`, and the versions that carry these fields.
const VERSIONS: [&str; 3] = [
    "core.openfunction.io/v1beta2",
    "core.openfunction.io/v1beta1",
    "core.openfunction.io/v1alpha2",
];

/// The gateway OpenFunction's install creates and its Functions' routes attach to by default.
const DEFAULT_GATEWAY: (&str, &str) = ("openfunction", "openfunction");

/// The port OpenFunction's function servings listen on unless `spec.port` says otherwise.
const DEFAULT_PORT: &str = "8080";

/// Reports a `Function` document (`root`) whose spec asks for canary steps; any other document
/// passes without a word.
pub fn refuse_canary_steps(r: &mut Reader, root: &Node) {
    let api = root.get("apiVersion").and_then(Node::as_str);
    let kind = root.get("kind").and_then(Node::as_str);
    if kind != Some("Function") || !api.is_some_and(|a| VERSIONS.contains(&a)) {
        return;
    }
    let Some(spec) = root.get("spec") else { return };
    let found = canary_steps(spec.get("rolloutStrategy"))
        .map(|n| (n, "spec.rolloutStrategy.canary.steps"))
        .or_else(|| {
            canary_steps(spec.get("serving").and_then(|s| s.get("rolloutStrategy")))
                .map(|n| (n, "spec.serving.rolloutStrategy.canary.steps"))
        })
        .or_else(|| spec.get("canarySteps").map(|n| (n, "spec.canarySteps")));
    let Some((steps, field)) = found else { return };
    let route = function_route(spec);
    let rules = route.and_then(|r| r.get("rules"));
    let canary = match native_steps(steps, field) {
        Ok(_) if rules.is_some() => format!(
            "(no native canary printed: the Function's route has path rules (line {}), which the printed canary would not carry exactly; write the canary with its route by hand)",
            rules.map_or(0, |n| n.line)
        ),
        Ok(steps) => native_canary(root, spec, route, &steps),
        Err((line, at, message)) => {
            r.error(line, &at, message);
            "(the steps above must be fixed first)".to_string()
        }
    };
    r.error(steps.line, field, format!("an OpenFunction Function with canary steps cannot be rolled out by sluice: OpenFunction names the Function's servings (and their Knative Services) at run time, so no name to route to is in git, and OpenFunction's controller never ran these steps either. Deploy the two versions under Services you name (the placeholders below), then commit this native canary next to them: it routes between them with the same steps and pauses\n{canary}"));
}

/// `canary.steps` of a `rolloutStrategy`.
fn canary_steps(strategy: Option<&Node>) -> Option<&Node> {
    strategy?.get("canary")?.get("steps")
}

/// A step problem: line, field, message.
type StepError = (usize, String, String);

/// The steps as native `steps:` lines (`      - weight: 20` ...), each translated from the
/// Function's `{weight, pause: {duration}}` (seconds as a number, or a duration).
fn native_steps(steps: &Node, field: &str) -> Result<Vec<String>, StepError> {
    let Value::Seq(items) = &steps.value else {
        return Err((steps.line, field.into(), "expected a list of steps".into()));
    };
    if items.is_empty() {
        let message = "expected at least one step, found an empty list";
        return Err((steps.line, field.into(), message.into()));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(field, i);
        let weight = item
            .get("weight")
            .and_then(whole_number)
            .filter(|w| (1..=100).contains(w));
        let Some(weight) = weight else {
            let line = item.get("weight").map_or(item.line, |n| n.line);
            let message = "expected a whole-number weight from 1 to 100";
            return Err((line, join(&at, "weight"), message.into()));
        };
        let pause = match item.get("pause") {
            None => String::new(),
            Some(p) => format!("\n        pause: {}", native_pause(p, &join(&at, "pause"))?),
        };
        out.push(format!("      - weight: {weight}{pause}"));
    }
    Ok(out)
}

/// A native `pause`: `{}` (wait for an approval) when the Function's pause has no duration.
fn native_pause(pause: &Node, field: &str) -> Result<String, StepError> {
    let Some(d) = pause.get("duration") else {
        return Ok("{}".into());
    };
    let at = join(field, "duration");
    let text = match (&d.value, whole_number(d)) {
        (_, Some(seconds)) if seconds > 0 => format!("{seconds}s"),
        (Value::Scalar { text, .. }, None) if parse_duration(text).is_ok_and(|p| !p.is_zero()) => {
            text.clone()
        }
        _ => {
            let message = "expected a positive duration (seconds, or like 90s or 1m30s)";
            return Err((d.line, at, message.into()));
        }
    };
    Ok(format!("{{duration: {}}}", quoted(&text)))
}

fn whole_number(n: &Node) -> Option<u64> {
    match &n.value {
        Value::Scalar {
            text,
            quoted: false,
        } => text.parse().ok(),
        _ => None,
    }
}

/// A YAML double-quoted scalar (JSON's string syntax, which YAML reads unchanged).
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// A plain scalar of the document, or `default`.
fn text_or<'a>(n: Option<&'a Node>, default: &'a str) -> &'a str {
    n.and_then(Node::as_str).unwrap_or(default)
}

/// The Function's route: `spec.serving.triggers.http.route` (v1beta2), else `spec.route`
/// (v1alpha2, v1beta1).
fn function_route(spec: &Node) -> Option<&Node> {
    spec.get("serving")
        .and_then(|s| s.get("triggers"))
        .and_then(|t| t.get("http"))
        .and_then(|h| h.get("route"))
        .or_else(|| spec.get("route"))
}

/// The native canary of the same name, namespace, gateway, hostnames and steps.
fn native_canary(root: &Node, spec: &Node, route: Option<&Node>, steps: &[String]) -> String {
    let metadata = root.get("metadata");
    let name = text_or(metadata.and_then(|m| m.get("name")), "my-function");
    let namespace = text_or(metadata.and_then(|m| m.get("namespace")), "default");
    let revision = text_or(spec.get("image"), "1");
    let port = spec
        .get("port")
        .and_then(whole_number)
        .map_or_else(|| DEFAULT_PORT.to_string(), |p| p.to_string());
    let gateway = route.and_then(|r| r.get("gatewayRef"));
    let gateway_name = text_or(gateway.and_then(|g| g.get("name")), DEFAULT_GATEWAY.0);
    let gateway_ns = text_or(gateway.and_then(|g| g.get("namespace")), DEFAULT_GATEWAY.1);
    let hostnames: Vec<String> = match route.and_then(|r| r.get("hostnames")).map(|n| &n.value) {
        Some(Value::Seq(items)) => items.iter().filter_map(Node::as_str).map(quoted).collect(),
        _ => Vec::new(),
    };
    let hostnames = if hostnames.is_empty() {
        String::new()
    } else {
        format!("\n    hostnames: [{}]", hostnames.join(", "))
    };
    let (name_q, ns_q) = (quoted(name), quoted(namespace));
    let services = [format!("{name}-stable"), format!("{name}-canary")].map(|s| quoted(&s));
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata:
  name: {name_q}
  namespace: {ns_q}
spec:
  routeOnly:
    services: [{}, {}]
    revision: {}
  service:
    name: {name_q}
    port: {port}
  route:
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    parentRefs:
      - name: {}
        namespace: {}{hostnames}
  analysis:
    steps:
{}",
        services[0],
        services[1],
        quoted(revision),
        quoted(gateway_name),
        quoted(gateway_ns),
        steps.join("\n")
    )
}
