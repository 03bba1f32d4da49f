//! Objects several test files put in a repo: the podinfo workload, and each router's user
//! objects as Flagger's tests apply them. One copy here, so a fixture changed for one test
//! changes for every test that shares it.

use super::canary::flagger_test;

// The managed workload (`workload.rs`, the loop tests).

/// The podinfo Deployment in `prod` (image `6.7.0`, a ConfigMap and a Secret mounted).
pub(crate) const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  namespace: prod
  labels:
    app: podinfo
spec:
  replicas: 3
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
      annotations:
        prometheus.io/scrape: \"true\"
    spec:
      containers:
      - name: podinfod
        image: ghcr.io/stefanprodan/podinfo:6.7.0
        ports:
        - containerPort: 9898
        envFrom:
        - configMapRef:
            name: podinfo-env
        env:
        - name: TOKEN
          valueFrom:
            secretKeyRef:
              name: podinfo-token
              key: token
      volumes:
      - name: config
        configMap:
          name: podinfo-files
";

/// Flagger's `test/workloads/deployment.yaml`, trimmed to what sluice reads and copies.
pub(crate) const TEST_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  namespace: test
  labels:
    app.kubernetes.io/name: podinfo
spec:
  minReadySeconds: 5
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      annotations:
        prometheus.io/scrape: \"true\"
      labels:
        app: podinfo
    spec:
      containers:
      - name: podinfod
        image: ghcr.io/stefanprodan/podinfo:6.0.0
        ports:
        - name: http
          containerPort: 9898
          protocol: TCP
        - name: http-metrics
          containerPort: 9797
          protocol: TCP
";

/// The ConfigMap [`DEPLOYMENT`] mounts.
pub(crate) const CONFIGS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: podinfo-env
  namespace: prod
data:
  PODINFO_UI_COLOR: \"#34577c\"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: podinfo-files
  namespace: prod
data:
  config.yaml: |
    level: info
";

/// A Flagger canary of [`DEPLOYMENT`].
pub(crate) const FLAGGER_CANARY: &str = "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
spec:
  provider: osm
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  service:
    port: 9898
    targetPort: 9898
  analysis:
    interval: 1s
    threshold: 2
    stepWeight: 10
    maxWeight: 50
    stepWeightPromotion: 5
";

/// The user's Ingress `name` in `test` (class `class`) sending `app.example.com` to `service`.
pub(crate) fn user_ingress(name: &str, class: &str, service: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
  namespace: test
  labels:
    app: podinfo
  annotations:
    kubernetes.io/ingress.class: \"{class}\"
spec:
  rules:
  - host: \"app.example.com\"
    http:
      paths:
      - pathType: Prefix
        path: \"/\"
        backend:
          service:
            name: {service}
            port:
              number: 80
"
    )
}

/// `test/nginx/test-canary.sh`: the user's Ingress.
pub(crate) fn nginx_ingress() -> String {
    user_ingress("podinfo", "nginx", "podinfo")
}

/// A Flagger canary of `test/nginx/test-canary.sh` with `analysis` (indented four spaces).
pub(crate) fn nginx_canary(analysis: &str) -> String {
    flagger_test("    port: 80\n    targetPort: http")
        .provider("nginx")
        .refs("  ingressRef:\n    apiVersion: networking.k8s.io/v1\n    kind: Ingress\n    name: podinfo\n  progressDeadlineSeconds: 60\n")
        .threshold(Some(5))
        .yaml(analysis)
}

/// The tutorial's first canary: the access-log annotation, its service and its steps.
pub(crate) const APPMESH_TUTORIAL_META: &str =
    "  annotations:\n    appmesh.flagger.app/accesslog: enabled";
pub(crate) const APPMESH_TUTORIAL_SERVICE: &str = "    port: 9898
    timeout: 15s
    retries:
      attempts: 3
      perTryTimeout: 5s
      retryOn: \"gateway-error,client-error,stream-error\"
    match:
      - uri:
          prefix: /
    rewrite:
      uri: /";

/// The Upstream `test/gloo/test-canary.sh` applies for the canary to copy settings from.
pub(crate) const GLOO_CONFIG_UPSTREAM: &str = "apiVersion: gloo.solo.io/v1
kind: Upstream
metadata:
  name: config-upstream
  namespace: gloo-system
spec:
  static:
    hosts:
    - addr: \"example.com\"
      port: 80
  connectionConfig:
    connectTimeout: 2s
    maxRequestsPerConnection: 51
";

/// The Knative Service a knative canary targets (image `6.7.0`) and its path in the repo.
pub(crate) const KNATIVE_SERVICE: &str = "apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: podinfo
  namespace: prod
spec:
  template:
    spec:
      containers:
        - image: ghcr.io/stefanprodan/podinfo:6.7.0
          ports:
            - containerPort: 9898
";
pub(crate) const KNATIVE_SERVICE_FILE: &str = "apps/podinfo/service.yaml";

/// The user's ApisixRoute `prod/podinfo` (one route on app.example.com) sending to the
/// Service `podinfo` on port `$port`, as a string literal (for consts).
macro_rules! apisix_route {
    ($port:literal) => {
        concat!(
            "apiVersion: apisix.apache.org/v2
kind: ApisixRoute
metadata:
  name: podinfo
  namespace: prod
spec:
  http:
    - name: method
      match:
        hosts: [app.example.com]
        paths: [/*]
      backends:
        - serviceName: podinfo
          servicePort: ",
            $port,
            "\n"
        )
    };
}
pub(crate) use apisix_route;
