//! Builds the Kubernetes client, and nothing else: the gates that read the cluster
//! ([`crate::gates::sync`], [`crate::gates::readiness`], [`crate::leadership`]) take the client
//! as a value.
//!
//! kube's TLS stack is rustls with ring, and rustls panics on first use without a process-wide
//! crypto provider, so both constructors install it first (see [`crate::http_client`]).

/// Why no client could be built (no in-cluster config and no usable kubeconfig, a bad
/// kubeconfig, a TLS setup failure). Terminal: it needs a change of environment.
#[derive(Debug, thiserror::Error)]
#[error("building the Kubernetes client: {message}")]
pub struct ClientError {
    pub message: String,
}

/// Builds a client from `config`. Must run inside a tokio runtime.
pub fn client_from_config(config: ::kube::Config) -> Result<::kube::Client, ClientError> {
    crate::http_client::install_crypto_provider();
    ::kube::Client::try_from(config).map_err(|e| ClientError {
        message: e.to_string(),
    })
}

/// A client for the cluster sluice runs in (in-cluster ServiceAccount) or the local kubeconfig
/// (`KUBECONFIG`, `~/.kube/config`), as kube's `Config::infer` finds them.
pub async fn infer_client() -> Result<::kube::Client, ClientError> {
    crate::http_client::install_crypto_provider();
    let config = ::kube::Config::infer().await.map_err(|e| ClientError {
        message: e.to_string(),
    })?;
    client_from_config(config)
}
