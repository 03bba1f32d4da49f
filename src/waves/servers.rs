//! The API servers waves name (`cluster: {server: URL, secretRef: ...}`), checked against
//! what the operator allows: `https://` always, `http://` only when the operator sets
//! [`ALLOW_HTTP_VAR`] (a test cluster, `kubectl proxy`). The repo cannot allow it: a bearer
//! token sent over plain http is readable by anyone on the path. A wave whose server is
//! refused is refused with its file, line and field, as any bad spec is, and nothing is sent.

use crate::core::waves::Cluster;
use crate::manifest::load::Loaded;
use crate::yaml::error::SpecError;

/// The environment variable with which the operator lets waves name `http://` API servers:
/// `true` or `1`.
pub const ALLOW_HTTP_VAR: &str = "SLUICE_ALLOW_HTTP_CLUSTERS";

/// Whether `value` (of [`ALLOW_HTTP_VAR`]) allows `http://` API servers.
pub fn allows_http(value: Option<&str>) -> bool {
    matches!(value.map(str::trim), Some("true" | "1"))
}

/// Whether `server` may be asked, given what the operator allows.
pub fn server_allowed(server: &str, allow_http: bool) -> bool {
    server.starts_with("https://") || (allow_http && server.starts_with("http://"))
}

/// Drops every canary instance whose wave names an API server the operator does not allow
/// (every instance of that canary: a release with a missing wave cannot run in order), each
/// with an error at the wave's `cluster.server`.
pub fn reject_plain_http(loaded: &mut Loaded, allow_http: bool) {
    let mut refused = Vec::new();
    for canary in &loaded.canaries {
        let Some(wave) = &canary.wave else { continue };
        let Some(Cluster::Server { server, .. }) = &wave.cluster else {
            continue;
        };
        if server_allowed(server, allow_http) {
            continue;
        }
        loaded.errors.push(SpecError {
            file: wave.file.clone(),
            line: wave.cluster_line,
            field: format!("{}.cluster.server", wave.field),
            message: format!(
                "expected an https:// API server, found {server:?}: a bearer token over plain http is readable on the way; the operator (never the repo) may allow http with {ALLOW_HTTP_VAR}=true"
            ),
        });
        refused.push((canary.id.namespace.clone(), canary.base_name().clone()));
    }
    loaded.canaries.retain(|c| {
        c.wave.is_none() || !refused.contains(&(c.id.namespace.clone(), c.base_name().clone()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_unless_the_operator_allows_http() {
        assert!(server_allowed("https://k8s.example:6443", false));
        assert!(!server_allowed("http://k8s.example:6443", false));
        assert!(server_allowed("http://k8s.example:6443", true));
        assert!(!server_allowed("file:///etc/shadow", true));
        assert!(allows_http(Some("true")) && allows_http(Some("1")));
        assert!(!allows_http(None) && !allows_http(Some("yes")) && !allows_http(Some("")));
    }
}
