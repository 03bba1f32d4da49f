//! Flagger's Knative canary (`test/knative/test-canary.sh`) and the Knative Service of its
//! tutorial, shared by the Knative router's tests and the RBAC test's readiness walk.

use sluice::manifest::model::Canary;

use super::canary::{flagger_e2e_analysis, flagger_test, load_one};

/// `docs/gitbook/tutorials/knative-progressive-delivery.md`: the Knative Service.
pub(crate) const DOCS_SERVICE: &str = "apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: podinfo
  namespace: test
spec:
  template:
    spec:
      containers:
        - image: ghcr.io/stefanprodan/podinfo:6.0.0
          ports:
            - containerPort: 9898
              protocol: TCP
          command:
            - ./podinfo
            - --port=9898
            - --port-metrics=9797
            - --grpc-port=9999
            - --grpc-service-name=podinfo
            - --level=info
            - --random-delay=false
            - --random-error=false
";

/// `test/knative/test-canary.sh`: its Canary, unchanged but for `analysis` (the script's
/// two canaries differ only in the load test's URL).
pub(crate) fn e2e_canary(analysis: &str) -> String {
    flagger_test("")
        .no_service()
        .provider("knative")
        .target("  targetRef:\n    apiVersion: serving.knative.dev/v1\n    kind: Service\n    name: podinfo\n")
        .bare_analysis()
        .yaml(analysis)
}

/// The analysis of the script's Canary.
pub(crate) fn e2e_analysis() -> String {
    flagger_e2e_analysis(
        "15s",
        15,
        "1m",
        "      - name: load-test
        url: http://flagger-loadtester.test/
        timeout: 5s
        metadata:
          type: cmd
          cmd: \"hey -z 1m -q 5 -c 2 http://podinfo.test\"
          logCmdOutput: \"true\"",
    )
}

/// The e2e canary, loaded beside the Knative Service `service` in the file `path`.
pub(crate) fn with_service(path: &str, service: &str) -> Canary {
    load_one(&[
        (path, service),
        ("test/canary.yaml", &e2e_canary(&e2e_analysis())),
    ])
}
