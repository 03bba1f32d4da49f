//! What one metric provider (a MetricTemplate's `spec.provider.type`) is: the [`MetricBackend`]
//! trait each provider's module implements, and the [`VendorClient`] its queries run through.
//! The registry (`registry.rs`) lists each provider once; nothing else names one, except that a
//! Prometheus template's query goes to the canary's Prometheus path (`metrics::plan`).
//!
//! Adding a provider: a module `metrics/<type>.rs` with a unit-like type implementing
//! [`MetricBackend`] (its client implementing [`VendorClient`]), its row in the provider table
//! of `docs/operations.md` (a registry test checks it names the Secret keys), and one line in
//! `registry.rs`'s `metric_providers!` list. Its items have no defaults where a provider must
//! say something, so the compiler asks for each.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::core::observe::MetricValue;
use crate::metrics::aws_env::CloudwatchEnv;
use crate::secrets::Secrets;
use crate::yaml::node::Node;
use crate::yaml::reader::{join, Reader};

/// The fields of `spec.provider` as written, before they are checked against its type; a
/// provider's [`MetricBackend::read`](crate::metrics::provider::MetricBackend::read) takes
/// the ones it reads. The template reader (`metric_templates.rs`) fills it in.
pub struct ProviderFields<'n> {
    /// The `spec.provider` node, for lines.
    pub node: &'n Node,
    /// `type`.
    pub kind: String,
    pub address: Option<String>,
    pub headers: Vec<(String, String)>,
    pub secret_ref: Option<String>,
    pub region: Option<String>,
    pub insecure_skip_verify: bool,
}

impl ProviderFields<'_> {
    /// Reports `key` when it is set: this type does not use it, for the reason `why`.
    pub fn refuse(&self, r: &mut Reader, key: &str, why: &str) {
        let kind = &self.kind;
        if let Some(n) = self.node.get(key) {
            r.error(
                n.line,
                &join("spec.provider", key),
                format!("provider type {kind:?} does not use {key}: {why}"),
            );
        }
    }

    /// The secretRef, reported as missing when this type reads `keys` from a Secret.
    pub fn needs_secret(&self, r: &mut Reader, keys: &[&str]) -> Option<String> {
        let kind = &self.kind;
        // A secretRef that is there but unreadable was reported where it stands.
        if self.secret_ref.is_none() && self.node.get("secretRef").is_none() {
            r.error(
                self.node.line,
                "spec.provider.secretRef",
                format!(
                    "required field is missing: provider type {kind:?} reads {} from a Secret",
                    keys.join(" and ")
                ),
            );
        }
        self.secret_ref.clone()
    }

    /// The address, reported as missing when this type has no default.
    pub fn needs_address(&self, r: &mut Reader) -> Option<String> {
        let kind = &self.kind;
        // A present but invalid address was reported where it was read.
        if self.address.is_none() && self.node.get("address").is_none() {
            r.error(
                self.node.line,
                "spec.provider.address",
                format!("required field is missing: provider type {kind:?} has no default address"),
            );
        }
        self.address.clone()
    }
}

/// One MetricTemplate provider type. Implemented by the provider's client type in its module;
/// the registry dispatches on [`MetricProvider`](super::metric_templates::MetricProvider),
/// whose variants hold this trait's [`Config`](MetricBackend::Config).
pub trait MetricBackend {
    /// The validated `spec.provider`: only the fields Flagger's provider reads
    /// (`pkg/metrics/providers/`), with its defaults filled in.
    type Config: Clone + fmt::Debug + PartialEq;

    /// `spec.provider.type`, as Flagger's CRD spells it. Unique across providers.
    const TYPE: &'static str;
    /// The optional fields it reads among `headers`, `insecureSkipVerify` and `region`; the
    /// template reader refuses the others when set, naming the types that read them.
    /// (`address` and `secretRef` it reads, requires or refuses itself in [`read`](Self::read).)
    const READS: &'static [&'static str];
    /// Fields among those three it accepts without reading them (the reader has always let
    /// them pass), so they are neither refused nor listed as read.
    const IGNORES: &'static [&'static str] = &[];
    /// The keys it reads from the Secret `secretRef` names, as Flagger names them (`&[]`: it
    /// reads none). Messages and `docs/operations.md` list them.
    const SECRET_KEYS: &'static [&'static str];
    /// Whether `address` may also be a `ws://` or `wss://` URL (Splunk's stream address).
    const WEBSOCKET_ADDRESS: bool = false;
    /// Whether its API answers the statistical judge's range query with a series.
    const SERIES: Series;
    /// The lines of a `spec.provider` of this type that load (two-space indented), for the
    /// registry test and the docs.
    const EXAMPLE: &'static str;
    /// A recorded answer body and the value [`parse`](Self::parse) reads from it.
    const ANSWER: (&'static str, f64);

    /// Reads the provider's fields (`fields.kind` is [`TYPE`](Self::TYPE)) into its config,
    /// reporting what is missing or refused through `r`; `None` when anything was.
    fn read(fields: &ProviderFields, r: &mut Reader) -> Option<Self::Config>;

    /// Its client for one template, credentials read, or why there is none. `None` only for
    /// `prometheus`, whose templates are queried on the canary's Prometheus path.
    fn client(config: &Self::Config, input: &ClientInput) -> Option<Result<Vendor, String>>;

    /// The value of one answer (`status`, `body`), as Flagger's provider reads it.
    fn parse(status: u16, body: &[u8]) -> MetricValue;
}

/// Whether a provider's API gives the statistical judge a series ([`MetricBackend::SERIES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    /// A range query answers with a series. `rank` is its place in the list messages give
    /// (the order support arrived in, as messages have always listed them); unique.
    Range { rank: u8 },
    /// One value per query: the judge refuses its templates.
    OneValue,
}

/// What a provider's [`client`](MetricBackend::client) is built from.
pub struct ClientInput<'a> {
    /// The template's namespace, where its Secret is.
    pub namespace: &'a str,
    /// The template and where it is, for messages: `metric template ns/name (file:line)`.
    pub place: String,
    /// The metric's window.
    pub interval: Duration,
    /// What the operator mapped in, for `secretRef`.
    pub secrets: &'a Secrets,
    /// The AWS credentials sluice started with (CloudWatch).
    pub aws: &'a CloudwatchEnv,
}

impl ClientInput<'_> {
    /// Key `key` of the Secret `name` in the template's namespace; a missing one is an error
    /// naming the template and its `secretRef`.
    pub fn key(&self, name: &str, key: &str) -> Result<String, String> {
        self.secrets
            .require(self.namespace, name, key)
            .map_err(|e| self.at(format!("spec.provider.secretRef: {e}")))
    }

    /// `message`, prefixed with the template and where it is.
    pub fn at(&self, message: impl fmt::Display) -> String {
        format!("{}: {message}", self.place)
    }
}

/// The `spec.provider` of a provider that reads an address and a Secret (datadog, newrelic,
/// dynatrace, splunk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretConfig {
    /// `address`, else the provider's default.
    pub address: String,
    /// The Secret holding the provider's [`SECRET_KEYS`](MetricBackend::SECRET_KEYS).
    pub secret_ref: String,
}

impl SecretConfig {
    /// Reads the required `secretRef` (holding `keys`) and `address`, which is required
    /// without a `default`.
    pub fn read(
        fields: &ProviderFields,
        r: &mut Reader,
        keys: &[&str],
        default: Option<&str>,
    ) -> Option<SecretConfig> {
        let secret_ref = fields.needs_secret(r, keys);
        let address = match default {
            Some(address) => fields.address.clone().unwrap_or_else(|| address.into()),
            None => fields.needs_address(r)?,
        };
        Some(SecretConfig {
            address,
            secret_ref: secret_ref?,
        })
    }
}

/// A future a [`VendorClient`] returns.
pub type Answer<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A series, or why there is none.
pub type SeriesAnswer<'a> = Answer<'a, Result<Vec<f64>, String>>;

/// One query a [`VendorClient`] runs, on the endpoint pool's client for its URL.
#[derive(Clone, Copy)]
pub struct Ask<'a> {
    pub http: &'a reqwest::Client,
    pub query: &'a str,
}

/// The statistical judge's window: Unix seconds `span.0..span.1` at `step`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub span: (u64, u64),
    pub step: Duration,
}

/// The client of one non-Prometheus template, its credentials read.
pub trait VendorClient: fmt::Debug + Send + Sync {
    /// Runs the query once, its window ending `now` (since the Unix epoch, the runtime
    /// clock's).
    fn instant<'a>(&'a self, ask: Ask<'a>, now: Duration) -> Answer<'a, MetricValue>;
    /// The statistical judge's series of the query over `window`, or why there is none (a
    /// [`Series::OneValue`] provider says so).
    fn range<'a>(&'a self, ask: Ask<'a>, window: Window) -> SeriesAnswer<'a>;
}

/// A template's client and where its queries go, for the endpoint pool.
#[derive(Debug)]
pub struct Vendor {
    pub url: reqwest::Url,
    /// Whether the pool's client for it skips TLS verification (`insecureSkipVerify`).
    pub insecure_skip_verify: bool,
    pub client: Box<dyn VendorClient>,
}

impl Vendor {
    /// `client`, whose queries go to `url`.
    pub fn new(
        url: reqwest::Url,
        insecure_skip_verify: bool,
        client: impl VendorClient + 'static,
    ) -> Vendor {
        Vendor {
            url,
            insecure_skip_verify,
            client: Box::new(client),
        }
    }
}

/// `now` (since the Unix epoch) in milliseconds, saturating.
pub(crate) fn unix_ms(now: Duration) -> u64 {
    u64::try_from(now.as_millis()).unwrap_or(u64::MAX)
}
