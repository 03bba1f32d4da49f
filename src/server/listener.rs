//! Accepting connections within [`Limits`], so no client can starve the others or the loop.
//!
//! A listener holds at most [`Limits::max_connections`] connections (more are closed at once,
//! so a flood of idle sockets cannot use up the file descriptors that git and the tick need),
//! and one peer address at most [`Limits::max_per_peer`] of them (so one client, or one pod in
//! the cluster, cannot take every slot from the others). A client gets
//! [`Limits::header_timeout`] to send a request's headers (half-open and idle connections go)
//! and [`Limits::request_timeout`] for the whole request. This module knows sockets and
//! limits; the routes are given to it.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{watch, Semaphore};
use tracing::{debug, info, warn};

use super::Metrics;

/// What clients may hold of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is closed as soon as it is accepted. Probes,
    /// scrapes and webhooks need a handful; this keeps the server's file descriptors far
    /// below a process's usual limit of 1024.
    pub max_connections: usize,
    /// Connections one peer address holds at once; one more from it is closed as soon as it
    /// is accepted, leaving the other slots to other peers.
    pub max_per_peer: usize,
    /// Time to send a request's headers, from the connection's start or the previous
    /// response: a connection that sends nothing, or half a request line, is closed.
    pub header_timeout: Duration,
    /// Time to read a request's body and answer it.
    pub request_timeout: Duration,
}

impl Default for Limits {
    /// The main listener's: webhooks arrive through a Service or an ingress (one peer address
    /// for all of them then), scrapes from Prometheus.
    fn default() -> Self {
        Limits {
            max_connections: 128,
            max_per_peer: 32,
            header_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

impl Limits {
    /// The probe listener's: the kubelet opens one connection per probe and sends its request
    /// at once, so a peer needs very few, and a slow one is not the kubelet.
    pub fn probes() -> Limits {
        Limits {
            max_connections: 64,
            max_per_peer: 4,
            header_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
        }
    }
}

/// Connections held per peer address.
struct Peers {
    held: Mutex<HashMap<IpAddr, usize>>,
    max: usize,
}

/// One connection's place in its peer's count, given back when dropped.
struct PeerSlot {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Peers {
    fn new(max: usize) -> Arc<Peers> {
        Arc::new(Peers {
            held: Mutex::new(HashMap::new()),
            max,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        match self.held.lock() {
            Ok(held) => held,
            // The map is whole after any panic: counts change in single statements.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A place for one more connection from `ip`, or `None` when it holds its share.
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<PeerSlot> {
        // An IPv4 client of a dual-stack socket is one peer however it is written.
        let ip = ip.to_canonical();
        let mut held = self.lock();
        let count = held.entry(ip).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.peers.lock();
        if let Some(count) = held.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then finishes the
/// requests in flight (each within the request timeout) and closes idle connections.
/// Connections refused by a limit are counted in `metrics` (`http_connection_limit`,
/// `http_peer_limit`).
pub(super) async fn serve_app(
    listener: tokio::net::TcpListener,
    app: Router,
    metrics: Metrics,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "HTTP server listening");
    }
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Peers::new(limits.max_per_peer);
    let (closing, closed) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            // Out of file descriptors or a connection reset before it was accepted: the
            // listener itself is fine; wait a little rather than spin.
            Err(e) => {
                warn!(error = %e, "Cannot accept an HTTP connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(peer_slot) = peers.take(peer.ip()) else {
            debug!(peer = %peer.ip(), "HTTP connection limit per peer reached; closing a new connection");
            metrics.error("http_peer_limit");
            continue;
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            debug!("HTTP connection limit reached; closing a new connection");
            metrics.error("http_connection_limit");
            continue;
        };
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        let connection =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let _slots = (slot, peer_slot);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        debug!(error = %e, "HTTP connection ended");
                    }
                }
                _ = closed.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    let _ = closing.send(true);
    // Every slot back: each connection finished its request (bounded by the timeouts).
    let _ = slots.acquire_many(limits.max_connections as u32).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_its_share_and_gets_it_back() {
        let peers = Peers::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = peers.take(a).unwrap();
        let _second = peers.take(mapped).unwrap();
        assert!(peers.take(a).is_none(), "a third from the same address");
        assert!(peers.take(b).is_some(), "another peer is not affected");
        drop(first);
        assert!(peers.take(a).is_some(), "a place freed is taken again");
    }

    #[test]
    fn peers_that_left_are_forgotten() {
        let peers = Peers::new(1);
        for i in 0..100u8 {
            drop(peers.take(IpAddr::from([10, 0, 0, i])).unwrap());
        }
        assert!(peers.lock().is_empty());
    }
}
