//! Argo Rollouts' `web` metric provider against a real local HTTP server, which is what it
//! talks to in production: the request as the template writes it (method, headers, JSON body,
//! a header whose value is an argument read from a Secret the operator mapped), the result the
//! JSON value its `jsonPath` selects (an object, a string) judged by member access and string
//! comparison; an unmapped Secret, a non-2xx answer and a path that selects nothing are
//! measurement errors that say where; what Argo refuses is refused at its line.

use std::collections::BTreeMap;

use sluice::core::argo_analysis::{replay, Phase};
use sluice::core::observe::MetricValue;
use sluice::http_client::HttpClients;
use sluice::metrics::analysis_run::{measure, observe, MeasureInput};
use sluice::metrics::analysis_templates::{AnalysisIndex, TemplateRef};
use sluice::metrics::prometheus::{Auth, PrometheusAccess};
use sluice::secrets::{env_var, Secrets};

use crate::support::metrics::{Canned, Server};

fn template(url: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: web, namespace: test}}
spec:
  args:
  - name: service
  - name: token
    valueFrom:
      secretKeyRef: {{name: web-token, key: token}}
  metrics:
  - name: version
    successCondition: result.major == '1' && result['minor'] == \"31\"
    provider:
      web:
        url: {url}/version?service={{{{args.service}}}}
        method: POST
        timeoutSeconds: 5
        headers:
        - key: Authorization
          value: Bearer {{{{args.token}}}}
        jsonBody:
          service: \"{{{{args.service}}}}\"
          window: 5
        jsonPath: \"{{$.data}}\"
  - name: message
    successCondition: result == 'It worked!'
    failureCondition: result != 'It worked!'
    provider:
      web:
        url: {url}/message
        jsonPath: \"{{$.message}}\"
"
    )
}

fn access_with(vars: &[(String, String)]) -> PrometheusAccess {
    PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None).with_secrets(
        Secrets::from_vars(vars.iter().cloned().collect::<BTreeMap<_, _>>()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_metric_sends_the_mapped_secret_header_and_judges_the_selected_json() {
    let server = Server::start_routed(|r| match r.path() {
        "/version" => Canned::json(200, r#"{"data":{"major":"1","minor":"31"},"other":1}"#),
        _ => Canned::json(200, r#"{"message":"It worked!"}"#),
    })
    .await;
    let url = format!("http://{}", server.addr);
    let mut index = AnalysisIndex::default();
    assert_eq!(index.add_text("web.yaml", &template(&url)), vec![]);
    let reference = TemplateRef {
        name: "web".into(),
        cluster: false,
    };
    let run = index
        .run("test", &[reference], &[("service".into(), "api".into())])
        .expect("run");
    let access = access_with(&[(env_var("test", "web-token", "token"), "s3cret".into())]);
    let input = MeasureInput {
        access: &access,
        default_address: None,
        namespace: "test",
    };
    let [version, message] = &run.metrics[..] else {
        panic!("{:?}", run.metrics)
    };

    let m = measure(&run, version, &input).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(m.value, r#"{"major": "1", "minor": "31"}"#);
    assert_eq!(replay(&version.rules, &m), Some(Phase::Successful));
    let requests = server.requests();
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.target.as_str()),
        ("POST", "/version?service=api")
    );
    assert_eq!(r.header("Authorization"), Some("Bearer s3cret"));
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.json(), serde_json::json!({"service": "api", "window": 5}));

    // What the loop records for the replay is the selected object itself.
    match observe(&run, version, &input).await {
        MetricValue::Structured(v) => assert_eq!(v.to_string(), m.value),
        other => panic!("{other:?}"),
    }

    let m = measure(&run, message, &input).await;
    assert_eq!(
        (m.phase, m.value.as_str()),
        (Phase::Successful, "\"It worked!\""),
        "{m:?}"
    );
    assert_eq!(server.requests()[2].method, "GET");

    // The Secret the header names is not mapped: an error at the metric's line, nothing sent.
    let sent = server.requests().len();
    let bare = access_with(&[]);
    let input = MeasureInput {
        access: &bare,
        ..input
    };
    let e = measure(&run, version, &input).await;
    assert_eq!(e.phase, Phase::Error);
    assert!(
        e.message.starts_with("metric version (web.yaml:11): args.token: valueFrom.secretKeyRef: Secret test/web-token key \"token\" is not mapped into sluice"),
        "{e:?}"
    );
    assert!(!e.message.contains("s3cret"));
    assert_eq!(
        server.requests().len(),
        sent,
        "nothing sent without the Secret"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_metric_errors_and_plain_text_as_argo_takes_them() {
    let server = Server::start(vec![
        Canned::json(503, r#"{"message":"down"}"#),
        Canned::json(200, r#"{"other":"x"}"#),
        Canned::new(200, "It worked!"),
        Canned::json(200, r#"{"message":"nope"}"#),
    ])
    .await;
    let url = format!("http://{}", server.addr);
    let text = template(&url);
    let mut index = AnalysisIndex::default();
    assert_eq!(index.add_text("web.yaml", &text), vec![]);
    let reference = TemplateRef {
        name: "web".into(),
        cluster: false,
    };
    let run = index
        .run("test", &[reference], &[("service".into(), "api".into())])
        .expect("run");
    let access = access_with(&[(env_var("test", "web-token", "token"), "t".into())]);
    let input = MeasureInput {
        access: &access,
        default_address: None,
        namespace: "test",
    };
    let message = &run.metrics[1];
    let first = measure(&run, message, &input).await;
    assert_eq!(first.phase, Phase::Error);
    assert!(
        first
            .message
            .contains("received non 2xx response code: 503"),
        "{first:?}"
    );
    let second = measure(&run, message, &input).await;
    assert_eq!(second.phase, Phase::Error);
    assert!(
        second.message.contains("jsonPath: message is not found"),
        "{second:?}"
    );
    // A body that is not JSON is the result as it is.
    let third = measure(&run, message, &input).await;
    assert_eq!(third.phase, Phase::Successful, "{third:?}");
    let fourth = measure(&run, message, &input).await;
    assert_eq!(
        (fourth.phase, fourth.value.as_str()),
        (Phase::Failed, "\"nope\"")
    );
    assert_eq!(replay(&message.rules, &fourth), Some(Phase::Failed));
}

#[test]
fn web_fields_argo_refuses_or_sluice_does_not_read_are_refused_at_their_line() {
    let text = "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: web, namespace: test}
spec:
  metrics:
  - name: a
    provider:
      web:
        url: http://status.example/x
        headers:
        - key: Authorization
          valueFrom: {secretKeyRef: {name: s, key: k}}
  - name: b
    provider:
      web:
        url: http://status.example/x
        body: '{}'
        jsonPath: '{$.items[*].status}'
  - name: c
    provider:
      web:
        url: ftp://status.example/x
        authentication: {oauth2: {tokenUrl: http://t}}
";
    let mut index = AnalysisIndex::default();
    let errors: Vec<String> = index
        .add_text("web.yaml", text)
        .iter()
        .map(ToString::to_string)
        .collect();
    for want in [
        "web.yaml:12: spec.metrics[0].provider.web.headers[0].valueFrom: Argo's web headers take a value only",
        "web.yaml:17: spec.metrics[1].provider.web.body: a body is sent only with method POST or PUT",
        "web.yaml:18: spec.metrics[1].provider.web.jsonPath: \"{$.items[*].status}\": [*] selects several values",
        "web.yaml:22: spec.metrics[2].provider.web.url: expected an http:// or https:// URL",
        "web.yaml:23: spec.metrics[2].provider.web.authentication: sluice does not make OAuth2 requests",
    ] {
        assert!(errors.iter().any(|e| e.starts_with(want)), "{want}\n{errors:#?}");
    }
}
