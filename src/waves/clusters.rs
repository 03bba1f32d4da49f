//! One Kubernetes client per wave cluster, built on first use and kept: a kubeconfig context
//! (`cluster: {kubeContext: NAME}`) or an API server with a token file
//! (`cluster: {server: URL, tokenFile: PATH, caFile: PATH}`). The sync and readiness gates of
//! a wave read its cluster through it; a wave without `cluster` uses sluice's own client.

use std::collections::HashMap;

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
