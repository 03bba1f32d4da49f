//! A MetricTemplate's `secretRef.name` becomes a path under `SLUICE_SECRETS_DIR`
//! (`<dir>/<namespace>/<name>/<key>`). A name that leaves that folder (`../..`, an absolute
//! path) would let anyone who can push a template read a file off the host (in a pod: the
//! service-account token, the mounted git Secret) and send it to the template's `address`.
//! Such names are refused where they stand, by `validate` and the loop, and nothing is read.

use crate::support::{canary::route_only_smi, git, run_sluice};

/// A MetricTemplate `shop/leak` whose `secretRef.name` (line 10) is `NAME`.
const TEMPLATE: &str = "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: leak
  namespace: shop
spec:
  provider:
    type: prometheus
    address: http://prometheus.monitoring:9090
    secretRef: {name: NAME}
  query: up
";

/// A repo holding a canary `shop/web` whose one metric uses `shop/leak`, and that template
/// with the secret name `name`.
fn repo_with(name: &str) -> tempfile::TempDir {
    let canary = route_only_smi(
        "shop",
        "web",
        "v1",
        "    interval: 1s\n    stepWeights: [50]\n    metrics:\n      - name: errors\n        templateRef: {name: leak}\n        thresholdRange: {max: 1}",
    );
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    for (path, text) in [
        ("apps/web.yaml", canary),
        (
            "metrics/leak.yaml",
            TEMPLATE.replace("NAME", &format!("{name:?}")),
        ),
    ] {
        let at = dir.path().join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    }
    dir
}

#[test]
fn a_secret_ref_that_leaves_the_secrets_folder_is_refused_at_its_line() {
    let host = tempfile::tempdir().unwrap();
    // What an attacker would be after: a token readable by the daemon, outside the secrets folder.
    let stolen = host.path().join("stolen");
    std::fs::create_dir_all(&stolen).unwrap();
    std::fs::write(stolen.join("token"), "service-account-token").unwrap();
    let names = [
        "../../stolen".to_string(),
        "../stolen".to_string(),
        stolen.display().to_string(),
        "Stolen_Token".to_string(),
    ];
    for name in names {
        let dir = repo_with(&name);
        let (code, out, err) = run_sluice(&["validate", &dir.path().display().to_string()]);
        let out = format!("{out}{err}");
        assert_eq!(code, 1, "{name}: {out}");
        assert!(
            out.contains("metrics/leak.yaml:10: spec.provider.secretRef.name"),
            "{name}: the refusal names the template's file, line and field: {out}"
        );
        assert!(
            !out.contains("service-account-token"),
            "{name}: the stolen file is never read: {out}"
        );
    }
}
