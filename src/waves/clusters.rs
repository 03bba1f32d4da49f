//! One Kubernetes client per wave cluster, built on first use and kept: a kubeconfig context
//! (`cluster: {kubeContext: NAME}`) or an API server and the Secret with its credentials
//! (`cluster: {server: URL, secretRef: {name: NAME}}`: key `token`, optional `ca.crt`, read
//! through [`crate::secrets`] as every `secretRef`, so from inside the folder the operator
//! mounted, size-bounded). The sync and readiness gates of a wave read its cluster through
//! it; a wave without `cluster` uses sluice's own client.
//!
//! The repo names no file here, and a server the operator does not allow (`http://` without
//! [`crate::waves::servers::ALLOW_HTTP_VAR`]) gets no client, so no token is sent to it even
//! if a spec slipped past the loader's check.
//!
//! [`Clusters::reach`] asks a wave's cluster whether it answers at all (`GET /version`, which
//! every API server serves to any client), so that a wave whose cluster is down holds
//! instead of moving on what sluice cannot see (the core decides so; this only asks).

use std::collections::HashMap;

use crate::core::observe::Unreachable;
use crate::core::waves::Cluster;
use crate::secrets::Secrets;

/// The Secret key holding an API server's bearer token.
pub const TOKEN_KEY: &str = "token";
/// The Secret key holding an API server's CA bundle (PEM), optional.
pub const CA_KEY: &str = "ca.crt";

/// The credentials a client was built with: a rotated Secret builds a new client.
type Credentials = Option<(String, Option<String>)>;

/// The clients built so far, by cluster, with the credentials each was built with. A client
/// that could not be built is tried again next time: the cluster may come back.
pub struct Clusters {
    clients: tokio::sync::Mutex<HashMap<Cluster, (Credentials, ::kube::Client)>>,
    secrets: Secrets,
    allow_http: bool,
}

impl Clusters {
    /// Clients whose credentials come from `secrets`; `allow_http`: the operator allows
    /// `http://` API servers.
    pub fn new(secrets: Secrets, allow_http: bool) -> Clusters {
        Clusters {
            clients: tokio::sync::Mutex::new(HashMap::new()),
            secrets,
            allow_http,
        }
    }

    /// The client for `cluster`, or why there is none.
    pub async fn client(&self, cluster: &Cluster) -> Result<::kube::Client, String> {
        let credentials = self
            .credentials(cluster)
            .map_err(|e| format!("{cluster}: {e}"))?;
        let mut clients = self.clients.lock().await;
        if let Some((built_with, client)) = clients.get(cluster) {
            if *built_with == credentials {
                return Ok(client.clone());
            }
        }
        let client = build(cluster, credentials.as_ref())
            .await
            .map_err(|e| format!("{cluster}: {e}"))?;
        clients.insert(cluster.clone(), (credentials, client.clone()));
        Ok(client)
    }

    /// The token and CA bundle of `cluster`'s Secret, read now (a rotated Secret is picked up);
    /// `None` for a kube context. Refuses a server the operator does not allow.
    fn credentials(&self, cluster: &Cluster) -> Result<Credentials, String> {
        let Cluster::Server {
            server,
            namespace,
            secret,
        } = cluster
        else {
            return Ok(None);
        };
        if !crate::waves::servers::server_allowed(server, self.allow_http) {
            return Err(format!(
                "not asked: only https:// API servers are (the operator may allow http with {}=true)",
                crate::waves::servers::ALLOW_HTTP_VAR
            ));
        }
        let (ns, name) = (namespace.as_str(), secret.as_str());
        let token = self
            .secrets
            .require(ns, name, TOKEN_KEY)
            .map_err(|e| e.to_string())?;
        let ca = self
            .secrets
            .get(ns, name, CA_KEY)
            .map_err(|e| e.to_string())?;
        Ok(Some((token, ca)))
    }
}

/// How long a cluster has to answer `GET /version` before it counts as unreachable.
pub const REACH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Clusters {
    /// `Ok` when `cluster` answers `GET /version` within [`REACH_TIMEOUT`]; otherwise the
    /// cluster (`API server <address>`, `kube context <name>`) and what asking it gave.
    pub async fn reach(&self, cluster: &Cluster) -> Result<(), Unreachable> {
        let unreachable = |error: String| Unreachable {
            cluster: cluster.to_string(),
            error,
        };
        let client = self.client(cluster).await.map_err(unreachable)?;
        match tokio::time::timeout(REACH_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(unreachable(chain(&e))),
            Err(_) => Err(unreachable(format!(
                "no answer to GET /version within {} s",
                REACH_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// An error and its causes, `: `-separated (kube's own text stops at "client error").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text
}

async fn build(
    cluster: &Cluster,
    credentials: Option<&(String, Option<String>)>,
) -> Result<::kube::Client, String> {
    let kubeconfig = match (cluster, credentials) {
        (Cluster::KubeContext(_), _) => {
            ::kube::config::Kubeconfig::read().map_err(|e| e.to_string())?
        }
        (Cluster::Server { server, .. }, Some((token, ca))) => {
            server_kubeconfig(server, token, ca.as_deref())?
        }
        (Cluster::Server { .. }, None) => return Err("no credentials were read".into()),
    };
    let context = match cluster {
        Cluster::KubeContext(context) => context.clone(),
        Cluster::Server { .. } => WAVE.to_string(),
    };
    let options = ::kube::config::KubeConfigOptions {
        context: Some(context),
        ..Default::default()
    };
    let config = ::kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| e.to_string())?;
    crate::kube::client_from_config(config).map_err(|e| e.to_string())
}

/// The one cluster, user and context of an in-memory kubeconfig.
const WAVE: &str = "wave";

/// A kubeconfig (in memory, never written) for `server` with the bearer `token` and, when
/// given, the PEM CA bundle `ca`: kube parses the bundle as it does a kubeconfig's.
fn server_kubeconfig(
    server: &str,
    token: &str,
    ca: Option<&str>,
) -> Result<::kube::config::Kubeconfig, String> {
    let mut cluster = serde_json::json!({ "server": server });
    if let Some(ca) = ca {
        cluster["certificate-authority-data"] =
            serde_json::Value::String(crate::redact::base64(ca.as_bytes()));
    }
    serde_json::from_value(serde_json::json!({
        "clusters": [{ "name": WAVE, "cluster": cluster }],
        "users": [{ "name": WAVE, "user": { "token": token } }],
        "contexts": [{ "name": WAVE, "context": { "cluster": WAVE, "user": WAVE } }],
        "current-context": WAVE,
    }))
    .map_err(|e| format!("building the client's configuration: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::Name;

    fn server(url: &str) -> Cluster {
        Cluster::Server {
            server: url.into(),
            namespace: Name::parse("shop").unwrap(),
            secret: Name::parse("eu-cluster").unwrap(),
        }
    }

    fn clusters(dir: &std::path::Path, allow_http: bool) -> Clusters {
        let vars = [(
            crate::secrets::DIR_VAR.to_string(),
            dir.display().to_string(),
        )];
        Clusters::new(Secrets::from_vars(vars.into_iter().collect()), allow_http)
    }

    #[test]
    fn the_token_and_ca_come_from_the_mapped_secret_and_are_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("shop/eu-cluster");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::write(mount.join("token"), "t1\n").unwrap();
        let c = clusters(dir.path(), false);
        let cluster = server("https://eu.example:6443");
        assert_eq!(c.credentials(&cluster).unwrap(), Some(("t1".into(), None)));
        std::fs::write(mount.join("token"), "t2").unwrap();
        std::fs::write(mount.join("ca.crt"), "PEM").unwrap();
        assert_eq!(
            c.credentials(&cluster).unwrap(),
            Some(("t2".into(), Some("PEM".into())))
        );
    }

    #[test]
    fn an_unmapped_secret_or_a_plain_http_server_gets_no_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let c = clusters(dir.path(), false);
        let err = c
            .credentials(&server("https://eu.example:6443"))
            .unwrap_err();
        assert!(
            err.contains("SLUICE_SECRET_SHOP__EU_CLUSTER__TOKEN"),
            "{err}"
        );
        let mount = dir.path().join("shop/eu-cluster");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::write(mount.join("token"), "t").unwrap();
        let err = c
            .credentials(&server("http://eu.example:8080"))
            .unwrap_err();
        assert!(err.contains("SLUICE_ALLOW_HTTP_CLUSTERS"), "{err}");
        let allowed = clusters(dir.path(), true);
        assert!(allowed
            .credentials(&server("http://eu.example:8080"))
            .is_ok());
    }

    #[test]
    fn the_in_memory_kubeconfig_carries_the_server_token_and_ca() {
        let config = server_kubeconfig("https://eu.example:6443", "t\"ok", Some("PEM")).unwrap();
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://eu.example:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("UEVN"));
        assert!(config.auth_infos[0]
            .auth_info
            .as_ref()
            .unwrap()
            .token
            .is_some());
        assert_eq!(config.current_context.as_deref(), Some(WAVE));
    }
}
