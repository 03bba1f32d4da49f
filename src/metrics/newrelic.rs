//! New Relic metric queries, as Flagger's `newrelic` provider makes them: `GET
//! <address>/v1/accounts/<account id>/query?nrql=<query> SINCE <interval seconds> seconds ago`
//! with the `X-Query-Key` header (Secret keys `newrelic_account_id`, `newrelic_query_key`).
//! The answer must hold exactly one result; a missing or null `result` is no data. This module
//! judges nothing.

use std::fmt;
use std::time::Duration;

use serde_json::Value as Json;

use crate::core::observe::MetricValue;
use crate::metrics::provider::{
    Answer, Ask, ClientInput, MetricBackend, ProviderFields, SecretConfig, Series, SeriesAnswer,
    Vendor, VendorClient, Window,
};
use crate::metrics::vendor_http::{self, api_url, kind_of};
use crate::yaml::reader::Reader;

/// The Secret key of the account id (a path segment of the query URL).
pub const ACCOUNT_ID: &str = "newrelic_account_id";
/// The Secret key of the Insights query key.
pub const QUERY_KEY: &str = "newrelic_query_key";

/// A New Relic Insights query client for one account. `Debug` never prints the key.
#[derive(Clone)]
pub struct NewRelic {
    url: reqwest::Url,
    shown: String,
    query_key: String,
    since_secs: u64,
    pub timeout: Duration,
}

impl fmt::Debug for NewRelic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NewRelic({}, <key redacted>)", self.shown)
    }
}

impl NewRelic {
    /// A client for `account_id` at `address`, whose queries cover the last `interval`.
    pub fn new(
        address: &str,
        account_id: &str,
        query_key: String,
        interval: Duration,
    ) -> Result<NewRelic, String> {
        let (mut url, shown) = api_url(address, "")?;
        url.path_segments_mut()
            .map_err(|()| format!("invalid address {address:?}: cannot hold a path"))?
            .pop_if_empty()
            .extend(["v1", "accounts", account_id, "query"]);
        Ok(NewRelic {
            url,
            shown,
            query_key,
            since_secs: interval.as_secs(),
            timeout: vendor_http::DEFAULT_TIMEOUT,
        })
    }

    /// The query URL, for the endpoint pool.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Runs the NRQL `query` through `client`.
    pub async fn query(&self, client: &reqwest::Client, query: &str) -> MetricValue {
        let nrql = format!("{query} SINCE {} seconds ago", self.since_secs);
        tracing::debug!(newrelic = %self.shown, %nrql, "newrelic query");
        let request = client
            .get(self.url.clone())
            .query(&[("nrql", nrql.as_str())])
            .header("X-Query-Key", &self.query_key);
        let (vendor, timeout) = ("New Relic", self.timeout);
        vendor_http::get_value(vendor, &self.shown, request, timeout, parse_response).await
    }
}

impl NewRelic {
    /// The statistical judge's NRQL: `query` over the window `from..to` (Unix seconds) in
    /// buckets of `step` seconds (NRQL takes epoch milliseconds, and at most 366 buckets).
    pub fn range_nrql(query: &str, (from, to): (u64, u64), step: u64) -> String {
        let bucket = step
            .max((to.saturating_sub(from)).div_ceil(MAX_BUCKETS))
            .max(1);
        format!(
            "{query} SINCE {} UNTIL {} TIMESERIES {bucket} seconds",
            from.saturating_mul(1000),
            to.saturating_mul(1000)
        )
    }

    /// The statistical judge's series: `query`'s `result` in every bucket of the window.
    pub async fn series(
        &self,
        client: &reqwest::Client,
        query: &str,
        window: (u64, u64),
        step: u64,
    ) -> Result<Vec<f64>, String> {
        let nrql = NewRelic::range_nrql(query, window, step);
        tracing::debug!(newrelic = %self.shown, %nrql, "newrelic range query");
        let request = client
            .get(self.url.clone())
            .query(&[("nrql", nrql.as_str())])
            .header("X-Query-Key", &self.query_key);
        let sent = vendor_http::get(request, self.timeout).await;
        vendor_http::series("New Relic", &self.shown, sent, series_of)
    }
}

/// NRQL's most `TIMESERIES` buckets.
const MAX_BUCKETS: u64 = 366;

/// The `result` of each bucket of a `TIMESERIES` answer, oldest first (a missing one: NaN).
pub fn series_of(json: &Json) -> Result<Vec<f64>, String> {
    let buckets = json
        .get("timeSeries")
        .and_then(Json::as_array)
        .ok_or("answer has no \"timeSeries\" list (does the query end in TIMESERIES?)")?;
    buckets
        .iter()
        .map(|bucket| {
            let results = bucket
                .get("results")
                .and_then(Json::as_array)
                .ok_or("bucket has no \"results\" list")?;
            match results.as_slice() {
                [] => Ok(f64::NAN),
                [one] => vendor_http::series_value(one.get("result").unwrap_or(&Json::Null)),
                many => Err(format!("bucket has {} results; expected one", many.len())),
            }
        })
        .collect()
}

/// Reads an Insights query answer into a value. Pure; never panics.
pub fn parse_response(status: u16, body: &[u8]) -> MetricValue {
    vendor_http::parse_json(status, body, value_of)
}

/// The `result` of the one result of an answer.
fn value_of(json: &Json) -> MetricValue {
    let Some(results) = json.get("results").and_then(Json::as_array) else {
        return MetricValue::Error("answer has no \"results\" list".into());
    };
    match results.as_slice() {
        [] => MetricValue::NoData,
        [one] => match one.get("result") {
            None | Some(Json::Null) => MetricValue::NoData,
            Some(v) => match v.as_f64() {
                Some(v) => MetricValue::Value(v),
                None => MetricValue::Error(format!("expected a number, found {}", kind_of(v))),
            },
        },
        many => MetricValue::Error(format!(
            "query returned {} results; expected one",
            many.len()
        )),
    }
}

/// Flagger's default New Relic Insights API address.
pub const DEFAULT_ADDRESS: &str = "https://insights-api.newrelic.com";

impl MetricBackend for NewRelic {
    type Config = SecretConfig;
    const TYPE: &'static str = "newrelic";
    const READS: &'static [&'static str] = &[];
    const SECRET_KEYS: &'static [&'static str] = &[ACCOUNT_ID, QUERY_KEY];
    const SERIES: Series = Series::Range { rank: 4 };
    const EXAMPLE: &'static str = "    type: newrelic\n    secretRef: {name: newrelic}\n";
    const ANSWER: (&'static str, f64) = (r#"{"results":[{"result": 1.5}]}"#, 1.5);

    fn read(fields: &ProviderFields, r: &mut Reader) -> Option<SecretConfig> {
        SecretConfig::read(fields, r, Self::SECRET_KEYS, Some(DEFAULT_ADDRESS))
    }

    fn client(config: &SecretConfig, input: &ClientInput) -> Option<Result<Vendor, String>> {
        Some((|| {
            let account = input.key(&config.secret_ref, ACCOUNT_ID)?;
            let query_key = input.key(&config.secret_ref, QUERY_KEY)?;
            let client = NewRelic::new(&config.address, &account, query_key, input.interval)?;
            Ok(Vendor::new(client.url().clone(), false, client))
        })())
    }

    fn parse(status: u16, body: &[u8]) -> MetricValue {
        parse_response(status, body)
    }
}

impl VendorClient for NewRelic {
    fn instant<'a>(&'a self, ask: Ask<'a>, _now: Duration) -> Answer<'a, MetricValue> {
        Box::pin(self.query(ask.http, ask.query))
    }

    fn range<'a>(&'a self, ask: Ask<'a>, window: Window) -> SeriesAnswer<'a> {
        Box::pin(self.series(ask.http, ask.query, window.span, window.step.as_secs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_asks_for_buckets_of_the_window_and_reads_each_result() {
        assert_eq!(
            NewRelic::range_nrql("SELECT x as result FROM T", (100, 400), 30),
            "SELECT x as result FROM T SINCE 100000 UNTIL 400000 TIMESERIES 30 seconds"
        );
        // At most 366 buckets: a day at 1 s is 237 s buckets.
        assert!(NewRelic::range_nrql("q", (0, 86_400), 1).ends_with("TIMESERIES 237 seconds"));
        let json: Json = serde_json::from_str(
            r#"{"timeSeries":[{"results":[{"result":1.5}],"beginTimeSeconds":100},{"results":[{"result":null}]},{"results":[{"result":2}]}]}"#,
        )
        .unwrap();
        let s = series_of(&json).unwrap();
        assert_eq!((s[0], s[2], s.len()), (1.5, 2.0, 3));
        assert!(s[1].is_nan());
        let flat: Json = serde_json::from_str(r#"{"results":[{"result":1}]}"#).unwrap();
        assert!(series_of(&flat).unwrap_err().contains("TIMESERIES"));
    }

    #[test]
    fn the_one_result_is_the_value() {
        assert_eq!(
            parse_response(200, br#"{"results":[{"result": 1.11111}]}"#),
            MetricValue::Value(1.11111)
        );
        for body in [
            &br#"{"results":[]}"#[..],
            br#"{"results":[{"result":null}]}"#,
            br#"{"results":[{"average":1}]}"#,
        ] {
            assert_eq!(parse_response(200, body), MetricValue::NoData);
        }
        let cases: &[(u16, &[u8], &str)] = &[
            (401, br#"{"error":"bad key"}"#, "HTTP 401"),
            (
                200,
                br#"{"results":[{"result":1},{"result":2}]}"#,
                "2 results; expected one",
            ),
            (200, br#"{}"#, "no \"results\""),
            (200, br#"{"results":[{"result":"x"}]}"#, "expected a number"),
            (200, b"nope", "expected a JSON answer"),
        ];
        vendor_http::assert_errors(parse_response, cases);
    }

    #[test]
    fn the_account_id_is_a_path_segment() {
        let n = NewRelic::new(
            "https://insights-api.newrelic.com",
            "51312",
            "k".into(),
            Duration::from_secs(100),
        )
        .unwrap();
        assert_eq!(
            n.url().as_str(),
            "https://insights-api.newrelic.com/v1/accounts/51312/query"
        );
        let n =
            NewRelic::new("http://nr/base/", "a/b", "k".into(), Duration::from_secs(1)).unwrap();
        assert_eq!(n.url().as_str(), "http://nr/base/v1/accounts/a%2Fb/query");
        assert!(!format!("{n:?}").contains("\"k\""));
    }
}
