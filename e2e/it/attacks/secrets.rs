//! A MetricTemplate's `secretRef.name` becomes a path under `SLUICE_SECRETS_DIR`
//! (`<dir>/<namespace>/<name>/<key>`). A name that leaves that folder (`../..`, an absolute
//! path) would let anyone who can push a template read a file off the host (in a pod: the
//! service-account token, the mounted git Secret) and send it to the template's `address`.
//! Such names are refused where they stand, by `validate` and the loop, and nothing is read.

use std::path::Path;
use std::process::Command;

use crate::support::{canary::route_only_smi, git};

/// A canary `shop/web` whose one metric uses the template `shop/leak` (line 13), and that
/// template with `secretRef.name: <name>` (line 10) pointing at `address`.
fn files(name: &str, address: &str) -> [(String, String); 2] {
    let canary = route_only_smi(
        "shop",
        "web",
        "v1",
        "    interval: 1s\n    stepWeights: [50]\n    metrics:\n      - name: errors\n        templateRef: {name: leak}\n        thresholdRange: {max: 1}",
    );
    let template = format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: leak
  namespace: shop
spec:
  provider:
    type: prometheus
    address: {address}
    secretRef: {{name: {name:?}}}
  query: up
"
    );
    [
        ("apps/web.yaml".to_string(), canary),
        ("metrics/leak.yaml".to_string(), template),
    ]
}

fn validate(dir: &Path, secrets: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["validate", "."])
        .current_dir(dir)
        .env("SLUICE_SECRETS_DIR", secrets)
        .output()
        .expect("run sluice");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_secret_ref_that_leaves_the_secrets_folder_is_refused_at_its_line() {
    let host = tempfile::tempdir().unwrap();
    // What an attacker would be after: a token readable by the daemon, outside the secrets folder.
    let stolen = host.path().join("stolen");
    std::fs::create_dir_all(&stolen).unwrap();
    std::fs::write(stolen.join("token"), "service-account-token").unwrap();
    let secrets = host.path().join("secrets");
    std::fs::create_dir_all(secrets.join("shop")).unwrap();
    let names = [
        "../../stolen".to_string(),
        "../stolen".to_string(),
        stolen.display().to_string(),
        "Stolen_Token".to_string(),
    ];
    for name in names {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        for (path, text) in files(&name, "http://prometheus.monitoring:9090") {
            let at = dir.path().join(path);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, text).unwrap();
        }
        let (code, out) = validate(dir.path(), &secrets);
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
