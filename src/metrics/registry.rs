//! The registry: every metric provider, listed once in `metric_providers!` below. From that
//! list it builds [`MetricProvider`] (a template's validated `spec.provider`, one variant per
//! provider holding its config) and the lookups the template reader and the judge ask: which
//! types sluice queries, what each reads, which give a series.

use crate::metrics::provider::{ClientInput, MetricBackend, ProviderFields, Series, Vendor};
use crate::metrics::{
    cloudwatch, datadog, dynatrace, graphite, influxdb, newrelic, prometheus, splunk,
};
use crate::yaml::reader::Reader;

/// Expands the provider list into [`MetricProvider`], its methods and the table the lookups
/// walk, so adding a provider is one line and every operation reaches it.
macro_rules! metric_providers {
    ($( $(#[doc = $doc:literal])* $variant:ident => $provider:ty, )+) => {
        /// `spec.provider` of a MetricTemplate, one variant per provider type sluice queries,
        /// each with only the fields Flagger's provider reads. A field a provider does not use
        /// is refused at parse, never ignored. A `secretRef` names a Secret in the template's
        /// namespace; its keys are read through [`crate::secrets::Secrets`].
        #[derive(Debug, Clone, PartialEq)]
        pub enum MetricProvider {
            $( $(#[doc = $doc])* $variant(<$provider as MetricBackend>::Config), )+
        }

        impl MetricProvider {
            /// Its `spec.provider.type`.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( MetricProvider::$variant(_) => <$provider as MetricBackend>::TYPE, )+
                }
            }

            /// The client for a template of this provider, credentials read; `None` for a
            /// Prometheus template ([`MetricBackend::client`]).
            pub(crate) fn client(
                &self,
                input: &ClientInput,
            ) -> Option<Result<Vendor, String>> {
                match self {
                    $( MetricProvider::$variant(config) => {
                        <$provider as MetricBackend>::client(config, input)
                    } )+
                }
            }
        }

        /// Every provider, in the order messages list them.
        pub(crate) const PROVIDERS: &[Registered] = &[
            $( Registered {
                kind: <$provider as MetricBackend>::TYPE,
                reads: <$provider as MetricBackend>::READS,
                ignores: <$provider as MetricBackend>::IGNORES,
                websocket_address: <$provider as MetricBackend>::WEBSOCKET_ADDRESS,
                series: <$provider as MetricBackend>::SERIES,
                read: |fields, r| {
                    <$provider as MetricBackend>::read(fields, r).map(MetricProvider::$variant)
                },
            }, )+
        ];

        /// What each provider gives its registry test, in registry order.
        #[cfg(test)]
        pub(crate) const PROVIDED: &[Provided] = &[
            $( Provided {
                secret_keys: <$provider as MetricBackend>::SECRET_KEYS,
                example: <$provider as MetricBackend>::EXAMPLE,
                answer: <$provider as MetricBackend>::ANSWER,
                parse: <$provider as MetricBackend>::parse,
            }, )+
        ];
    };
}

metric_providers! {
    /// `GET <address>/api/v1/query`, the template's or the canary's Prometheus.
    Prometheus => prometheus::Prometheus,
    /// `GET <address>/api/v1/query` with `DD-API-KEY` / `DD-APPLICATION-KEY`.
    Datadog => datadog::Datadog,
    /// `GET <address>/v1/accounts/<account id>/query?nrql=` with `X-Query-Key`.
    NewRelic => newrelic::NewRelic,
    /// `GET <address>/render?<query>&format=json`, basic auth when `secret_ref` is set.
    Graphite => graphite::Graphite,
    /// `POST <address>/api/v2/query?org=` (Flux), `Authorization: Token` with a `secretRef`.
    Influxdb => influxdb::Influxdb,
    /// `GET <address>/api/v2/metrics/query` with `Authorization: Api-Token`.
    Dynatrace => dynatrace::Dynatrace,
    /// `POST <stream address>/v2/signalflow/execute` with `X-SF-Token`.
    Splunk => splunk::Splunk,
    /// `GetMetricData` in the template's region, signed with the environment's AWS keys.
    Cloudwatch => cloudwatch::Cloudwatch,
}

/// One provider's registry entry, built by `metric_providers!` from its [`MetricBackend`].
pub(crate) struct Registered {
    pub(crate) kind: &'static str,
    pub(crate) reads: &'static [&'static str],
    pub(crate) ignores: &'static [&'static str],
    pub(crate) websocket_address: bool,
    pub(crate) series: Series,
    pub(crate) read: fn(&ProviderFields, &mut Reader) -> Option<MetricProvider>,
}

/// What a provider gives the registry test besides its entry.
#[cfg(test)]
pub(crate) struct Provided {
    pub(crate) secret_keys: &'static [&'static str],
    pub(crate) example: &'static str,
    pub(crate) answer: (&'static str, f64),
    pub(crate) parse: fn(u16, &[u8]) -> crate::core::observe::MetricValue,
}

impl Registered {
    /// Whether it reads or ignores the optional field `key` (see [`MetricBackend::READS`]).
    pub(crate) fn accepts(&self, key: &str) -> bool {
        self.reads.contains(&key) || self.ignores.contains(&key)
    }
}

/// The optional `spec.provider` fields only some providers read, in the order the reader
/// refuses them.
pub(crate) const OPTIONAL_FIELDS: [&str; 3] = ["headers", "insecureSkipVerify", "region"];

/// The provider of type `kind`, if sluice queries it.
pub(crate) fn provider(kind: &str) -> Option<&'static Registered> {
    PROVIDERS.iter().find(|e| e.kind == kind)
}

/// Every type sluice queries, in registry order.
pub fn provider_types() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|e| e.kind)
}

/// The types that read the optional field `key`: `prometheus and graphite`.
pub(crate) fn readers_of(key: &str) -> String {
    let names: Vec<&str> = PROVIDERS
        .iter()
        .filter(|e| e.reads.contains(&key))
        .map(|e| e.kind)
        .collect();
    match names.as_slice() {
        [init @ .., last] if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => names.join(""),
    }
}

/// The types whose APIs answer the judge's range query with a series, in the order messages
/// list them ([`Series::Range`]'s rank).
pub fn range_providers() -> Vec<&'static str> {
    let mut ranked: Vec<(u8, &str)> = PROVIDERS
        .iter()
        .filter_map(|e| match e.series {
            Series::Range { rank } => Some((rank, e.kind)),
            Series::OneValue => None,
        })
        .collect();
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, kind)| kind).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_readers_and_range_providers_read_as_messages_list_them() {
        assert_eq!(readers_of("headers"), "prometheus");
        assert_eq!(readers_of("insecureSkipVerify"), "prometheus and graphite");
        assert_eq!(readers_of("region"), "cloudwatch");
        assert_eq!(
            range_providers(),
            [
                "prometheus",
                "datadog",
                "graphite",
                "cloudwatch",
                "newrelic",
                "dynatrace"
            ]
        );
    }
}
