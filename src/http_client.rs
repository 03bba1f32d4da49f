//! The one place sluice builds HTTP clients, plus helpers to read answers safely.
//!
//! Every outgoing HTTP call (Prometheus queries, webhooks) goes through a client built by
//! [`client`], usually one of the two pooled [`HttpClients`] built once at start. [`client`]
//! installs the ring crypto provider first: reqwest is built with `rustls-no-provider`, and a
//! client built without a process-wide provider panics. Installing it here rather than only in
//! `main` keeps tests and library users that never run `main` working.
//!
//! Metric queries go through [`Endpoints`]: one pooled keep-alive client per endpoint
//! (`scheme://host:port`), with at most `concurrency` requests in flight to it. A request holds
//! its slot until its body is read to the end, and hyper puts the connection back in the pool
//! before it reports the end of a body, so the next request finds it idle: an endpoint has
//! about `concurrency` connections open. It can be a few more: hyper races a new connection
//! against the pool, and when a connection frees up while another request's connection is
//! still being set up, that request takes the free one and the new one joins the pool (seen
//! in the first wave of a tick, when connecting is slow next to answering). Each client counts
//! the connections it opens (a connector layer), for the `/metrics` page.
//!
//! Bodies are read with a size limit and turned into short, printable snippets, so a huge or
//! binary answer can neither exhaust memory nor flood a log line. Nothing here panics on any
//! answer a server can give.

use std::collections::BTreeMap;
use std::error::Error as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long connecting (TCP and TLS) may take, for every client.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an unused pooled connection is kept open.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Builds an HTTP client. `insecure_skip_verify` turns off TLS certificate checks (Flagger's
/// `insecureSkipVerify`); use it only where the user asked for it.
pub fn client(insecure_skip_verify: bool) -> Result<reqwest::Client, String> {
    builder(insecure_skip_verify)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {}", describe(&e)))
}

/// A client that sends every request through the HTTP proxy at `proxy` (an alert provider's
/// `proxy`, as Flagger's notifier sets it). Not pooled across calls: Flagger, too, builds one
/// per message, and alerts are rare.
pub fn proxied_client(proxy: &str) -> Result<reqwest::Client, String> {
    let proxy = reqwest::Proxy::all(proxy)
        .map_err(|e| format!("cannot use the proxy {proxy:?}: {}", describe(&e)))?;
    builder(false)
        .proxy(proxy)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {}", describe(&e)))
}

/// The settings every client shares: user agent, TLS checks, connect and idle timeouts.
fn builder(insecure_skip_verify: bool) -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
        .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
        .tls_danger_accept_invalid_certs(insecure_skip_verify)
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_idle_timeout(IDLE_TIMEOUT)
}

/// A client whose new connections are counted in `opened`.
fn counting_client(
    insecure_skip_verify: bool,
    opened: Arc<AtomicU64>,
) -> Result<reqwest::Client, String> {
    builder(insecure_skip_verify)
        .connector_layer(tower::util::MapResponseLayer::new(move |conn| {
            opened.fetch_add(1, Ordering::Relaxed);
            conn
        }))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {}", describe(&e)))
}

/// One pooled client per endpoint with a bound on requests in flight to it, built on first use
/// and kept for the life of the process. Cloning is cheap and shares the pools.
#[derive(Debug, Clone, Default)]
pub struct Endpoints(Arc<Mutex<BTreeMap<String, Arc<EndpointState>>>>);

#[derive(Debug)]
struct EndpointState {
    verified: OnceLock<reqwest::Client>,
    unverified: OnceLock<reqwest::Client>,
    opened: Arc<AtomicU64>,
    /// The limit the semaphore was built for, and the semaphore.
    limit: Mutex<(usize, Arc<Semaphore>)>,
}

/// One endpoint's pooled client and its bound on requests in flight.
#[derive(Debug, Clone)]
pub struct Endpoint {
    client: reqwest::Client,
    slots: Arc<Semaphore>,
}

impl Endpoint {
    /// The pooled client for this endpoint.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Waits for a free slot; hold it until the answer's body is read to the end.
    pub async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        // The semaphore is never closed, so this is always `Some`.
        Arc::clone(&self.slots).acquire_owned().await.ok()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock left a value that is still whole.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `scheme://host:port` of a URL, without credentials or path: what a pool is kept for.
pub fn endpoint_of(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

impl Endpoints {
    pub fn new() -> Endpoints {
        Endpoints::default()
    }

    /// The pooled client for `url`'s endpoint, allowing `concurrency` requests in flight (at
    /// least 1). A changed limit applies to requests that start after the change.
    pub fn get(
        &self,
        url: &reqwest::Url,
        insecure_skip_verify: bool,
        concurrency: usize,
    ) -> Result<Endpoint, String> {
        let concurrency = concurrency.max(1);
        let state = {
            let mut map = lock(&self.0);
            Arc::clone(map.entry(endpoint_of(url)).or_insert_with(|| {
                Arc::new(EndpointState {
                    verified: OnceLock::new(),
                    unverified: OnceLock::new(),
                    opened: Arc::default(),
                    limit: Mutex::new((concurrency, Arc::new(Semaphore::new(concurrency)))),
                })
            }))
        };
        let cell = if insecure_skip_verify {
            &state.unverified
        } else {
            &state.verified
        };
        let client = match cell.get() {
            Some(c) => c.clone(),
            None => {
                let built = counting_client(insecure_skip_verify, Arc::clone(&state.opened))?;
                cell.get_or_init(|| built).clone()
            }
        };
        let slots = {
            let mut limit = lock(&state.limit);
            if limit.0 != concurrency {
                *limit = (concurrency, Arc::new(Semaphore::new(concurrency)));
            }
            Arc::clone(&limit.1)
        };
        Ok(Endpoint { client, slots })
    }

    /// Connections opened so far, per endpoint (`scheme://host:port`), in endpoint order.
    pub fn connections_opened(&self) -> Vec<(String, u64)> {
        lock(&self.0)
            .iter()
            .map(|(name, state)| (name.clone(), state.opened.load(Ordering::Relaxed)))
            .collect()
    }
}

/// The pooled clients outgoing calls share (Prometheus queries, webhooks): one that checks TLS
/// certificates, and one that does not for the hooks and metric templates that ask for it
/// (Flagger's `disableTLS` / `insecureSkipVerify`). Build it once at start and pass it on:
/// cloning is cheap (a `reqwest::Client` is a handle on its connection pool).
#[derive(Debug, Clone)]
pub struct HttpClients {
    verified: reqwest::Client,
    unverified: reqwest::Client,
}

impl HttpClients {
    /// Builds both clients.
    pub fn new() -> Result<HttpClients, String> {
        Ok(HttpClients {
            verified: client(false)?,
            unverified: client(true)?,
        })
    }

    /// The client for a call that checks certificates unless `insecure_skip_verify`.
    pub fn get(&self, insecure_skip_verify: bool) -> &reqwest::Client {
        if insecure_skip_verify {
            &self.unverified
        } else {
            &self.verified
        }
    }
}

/// Installs the ring crypto provider for rustls unless one is installed already: reqwest is
/// built with `rustls-no-provider`, and building a client without a provider panics. Call it
/// before building any `reqwest::Client`.
pub fn install_crypto_provider() {
    // Err means a provider is already installed (by us or by the host program): fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum BodyError {
    /// The body is larger than the limit.
    TooLarge { limit: usize },
    /// The transfer failed (reset, timeout, ...).
    Transfer(reqwest::Error),
}

/// Reads at most `limit` bytes of a response body.
pub async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transfer)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A transport error as one line: the innermost causes ("connection refused", "timed out"),
/// without the URL (which may carry credentials).
pub fn describe(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    let head = if error.is_timeout() {
        "timed out".to_string()
    } else if error.is_connect() {
        "cannot connect".to_string()
    } else if error.is_redirect() {
        "too many redirects".to_string()
    } else if error.is_body() || error.is_decode() {
        "broken answer".to_string()
    } else {
        "request failed".to_string()
    };
    if parts.is_empty() {
        head
    } else {
        format!("{head}: {}", parts.join(": "))
    }
}

/// The start of a body as printable text: at most `max` characters, whitespace collapsed,
/// control characters dropped, `...` when cut.
pub fn snippet(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = String::new();
    let mut count = 0;
    let mut last_space = true;
    for c in text.chars() {
        let c = if c.is_whitespace() { ' ' } else { c };
        if c.is_control() || (c == ' ' && last_space) {
            continue;
        }
        if count == max {
            out.push_str("...");
            return out.trim_end().to_string();
        }
        last_space = c == ' ';
        out.push(c);
        count += 1;
    }
    out.trim_end().to_string()
}

/// `5s`, `1.5s`, `250ms`: a timeout as people write it.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms >= 1000 {
        format!("{}s", d.as_secs_f64())
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_short_printable_and_marked_when_cut() {
        assert_eq!(
            snippet(b"  boom\n\n  went\tthe  hook ", 100),
            "boom went the hook"
        );
        assert_eq!(snippet(b"abcdef", 3), "abc...");
        assert_eq!(snippet(b"\x00\x01ok\xff", 10), "ok\u{fffd}");
        assert_eq!(snippet(b"", 10), "");
    }

    #[test]
    fn durations_read_like_config() {
        assert_eq!(human_duration(Duration::from_secs(5)), "5s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn clients_build_without_a_provider_installed_by_main() {
        assert!(client(false).is_ok());
        assert!(client(true).is_ok());
    }
}
