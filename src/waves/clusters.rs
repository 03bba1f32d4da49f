//! One Kubernetes client per wave cluster, built on first use and kept: a kubeconfig context
//! (`cluster: {kubeContext: NAME}`) or an API server with a token file
//! (`cluster: {server: URL, tokenFile: PATH, caFile: PATH}`). The sync and readiness gates of
//! a wave read its cluster through it; a wave without `cluster` uses sluice's own client.
//!
//! [`Clusters::reach`] asks a wave's cluster whether it answers at all (`GET /version`, which
//! every API server serves to any client), so that a wave whose cluster is down holds
//! instead of moving on what sluice cannot see (the core decides so; this only asks).

use std::collections::HashMap;

use crate::core::observe::Unreachable;
use crate::core::waves::Cluster;

/// The clients built so far, by cluster. A client that could not be built is tried again
/// next time: the cluster may come back.
#[derive(Default)]
pub struct Clusters {
    clients: tokio::sync::Mutex<HashMap<Cluster, ::kube::Client>>,
}

impl Clusters {
    /// The client for `cluster`, or why there is none.
    pub async fn client(&self, cluster: &Cluster) -> Result<::kube::Client, String> {
        let mut clients = self.clients.lock().await;
        if let Some(client) = clients.get(cluster) {
            return Ok(client.clone());
        }
        let client = build(cluster)
            .await
            .map_err(|e| format!("{cluster}: {e}"))?;
        clients.insert(cluster.clone(), client.clone());
        Ok(client)
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

async fn build(cluster: &Cluster) -> Result<::kube::Client, String> {
    let config = match cluster {
        Cluster::KubeContext(context) => {
            let kubeconfig = ::kube::config::Kubeconfig::read().map_err(|e| e.to_string())?;
            let options = ::kube::config::KubeConfigOptions {
                context: Some(context.clone()),
                ..Default::default()
            };
            ::kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| e.to_string())?
        }
        Cluster::Token {
            server,
            token_file,
            ca_file,
        } => {
            let url = server
                .parse::<hyper::Uri>()
                .map_err(|e| format!("bad server address {server:?}: {e}"))?;
            let mut config = ::kube::Config::new(url);
            config.auth_info.token_file = Some(token_file.clone());
            // Read again now and then by kube, as the token file is: a rotated CA is picked up.
            config.root_cert_file = ca_file.as_ref().map(std::path::PathBuf::from);
            config
        }
    };
    crate::kube::client_from_config(config).map_err(|e| e.to_string())
}
