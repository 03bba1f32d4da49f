//! Datadog metric queries, as Flagger's `datadog` provider makes them: `GET
//! <address>/api/v1/query?query=…&from=…&to=…` with the `DD-API-KEY` and `DD-APPLICATION-KEY`
//! headers (Secret keys `datadog_api_key`, `datadog_application_key`), over the last ten metric
//! intervals. The value is the first point of the first series: the oldest, since the newest
//! bucket is usually incomplete. No series, no points or a null point is no data. This module
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

/// The Secret key of the API key.
pub const API_KEY: &str = "datadog_api_key";
/// The Secret key of the application key.
pub const APPLICATION_KEY: &str = "datadog_application_key";
/// Flagger queries `from = now - 10 × metric interval`.
const FROM_INTERVALS: u64 = 10;

/// A Datadog query client for one address and key pair. `Debug` never prints the keys.
#[derive(Clone)]
pub struct Datadog {
    url: reqwest::Url,
    shown: String,
    api_key: String,
    application_key: String,
    from_delta_secs: u64,
    pub timeout: Duration,
}

impl fmt::Debug for Datadog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Datadog({}, <keys redacted>)", self.shown)
    }
}

impl Datadog {
    /// A client for `address`, whose queries cover ten `interval`s back from now.
    pub fn new(
        address: &str,
        api_key: String,
        application_key: String,
        interval: Duration,
    ) -> Result<Datadog, String> {
        let (url, shown) = api_url(address, "/api/v1/query")?;
        Ok(Datadog {
            url,
            shown,
            api_key,
            application_key,
            from_delta_secs: FROM_INTERVALS * interval.as_secs(),
            timeout: vendor_http::DEFAULT_TIMEOUT,
        })
    }

    /// The query URL, for the endpoint pool.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Runs `query` through `client`, ending at `now` (Unix seconds).
    pub async fn query(&self, client: &reqwest::Client, query: &str, now: u64) -> MetricValue {
        tracing::debug!(datadog = %self.shown, %query, "datadog query");
        let (from, to) = vendor_http::window(now, self.from_delta_secs);
        let request = client
            .get(self.url.clone())
            .query(&[("query", query), ("from", &from), ("to", &to)])
            .header("DD-API-KEY", &self.api_key)
            .header("DD-APPLICATION-KEY", &self.application_key);
        let (vendor, timeout) = ("Datadog", self.timeout);
        vendor_http::get_value(vendor, &self.shown, request, timeout, parse_response).await
    }
}

impl Datadog {
    /// The statistical judge's series: every point of `query`'s first series from `from` to
    /// `to` (Unix seconds), the same `/api/v1/query` call over the judge's window.
    pub async fn series(
        &self,
        client: &reqwest::Client,
        query: &str,
        (from, to): (u64, u64),
    ) -> Result<Vec<f64>, String> {
        tracing::debug!(datadog = %self.shown, %query, "datadog range query");
        let request = client
            .get(self.url.clone())
            .query(&[
                ("query", query),
                ("from", &from.to_string()),
                ("to", &to.to_string()),
            ])
            .header("DD-API-KEY", &self.api_key)
            .header("DD-APPLICATION-KEY", &self.application_key);
        let sent = vendor_http::get(request, self.timeout).await;
        vendor_http::series("Datadog", &self.shown, sent, series_of)
    }
}

/// Every point of the first series of an answer, oldest first; no series is an empty one.
pub fn series_of(json: &Json) -> Result<Vec<f64>, String> {
    if json.get("error").and_then(Json::as_str).is_some() {
        return Err("answered with an error".into());
    }
    let series = json
        .get("series")
        .and_then(Json::as_array)
        .ok_or("answer has no \"series\" list")?;
    let Some(first) = series.first() else {
        return Ok(Vec::new());
    };
    let points = first
        .get("pointlist")
        .and_then(Json::as_array)
        .ok_or("series has no \"pointlist\"")?;
    points
        .iter()
        .map(|point| match point.as_array().map(Vec::as_slice) {
            Some([_, v]) => vendor_http::series_value(v),
            _ => Err(format!(
                "expected a point [time, value], found {}",
                kind_of(point)
            )),
        })
        .collect()
}

/// Reads the answer of `/api/v1/query` into a value. Pure; never panics.
pub fn parse_response(status: u16, body: &[u8]) -> MetricValue {
    vendor_http::parse_json(status, body, value_of)
}

/// The first point of the first series of an answer.
fn value_of(json: &Json) -> MetricValue {
    if json.get("error").and_then(Json::as_str).is_some() {
        return MetricValue::Error("answered with an error".into());
    }
    let Some(series) = json.get("series").and_then(Json::as_array) else {
        return MetricValue::Error("answer has no \"series\" list".into());
    };
    let Some(first) = series.first() else {
        return MetricValue::NoData;
    };
    let Some(points) = first.get("pointlist").and_then(Json::as_array) else {
        return MetricValue::Error("series has no \"pointlist\"".into());
    };
    let Some(point) = points.first() else {
        return MetricValue::NoData;
    };
    match point.as_array().map(Vec::as_slice) {
        Some([_, Json::Null]) => MetricValue::NoData,
        Some([_, v]) => match v.as_f64() {
            Some(v) => MetricValue::Value(v),
            None => MetricValue::Error(format!("expected a number, found {}", kind_of(v))),
        },
        _ => MetricValue::Error(format!(
            "expected a point [time, value], found {}",
            kind_of(point)
        )),
    }
}

/// Flagger's default Datadog API address.
pub const DEFAULT_ADDRESS: &str = "https://api.datadoghq.com";

impl MetricBackend for Datadog {
    type Config = SecretConfig;
    const TYPE: &'static str = "datadog";
    const READS: &'static [&'static str] = &[];
    const SECRET_KEYS: &'static [&'static str] = &[API_KEY, APPLICATION_KEY];
    const SERIES: Series = Series::Range { rank: 1 };
    const EXAMPLE: &'static str = "    type: datadog\n    secretRef: {name: datadog}\n";
    const ANSWER: (&'static str, f64) = (
        r#"{"status":"ok","series":[{"pointlist":[[1577232000000,1.5],[1577318400000,9]]}]}"#,
        1.5,
    );

    fn read(fields: &ProviderFields, r: &mut Reader) -> Option<SecretConfig> {
        SecretConfig::read(fields, r, Self::SECRET_KEYS, Some(DEFAULT_ADDRESS))
    }

    fn client(config: &SecretConfig, input: &ClientInput) -> Option<Result<Vendor, String>> {
        Some((|| {
            let api = input.key(&config.secret_ref, API_KEY)?;
            let app = input.key(&config.secret_ref, APPLICATION_KEY)?;
            let client = Datadog::new(&config.address, api, app, input.interval)?;
            Ok(Vendor::new(client.url().clone(), false, client))
        })())
    }

    fn parse(status: u16, body: &[u8]) -> MetricValue {
        parse_response(status, body)
    }
}

impl VendorClient for Datadog {
    fn instant<'a>(&'a self, ask: Ask<'a>, now: Duration) -> Answer<'a, MetricValue> {
        Box::pin(self.query(ask.http, ask.query, now.as_secs()))
    }

    fn range<'a>(&'a self, ask: Ask<'a>, window: Window) -> SeriesAnswer<'a> {
        Box::pin(self.series(ask.http, ask.query, window.span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_reads_every_point_of_the_first_series() {
        let json: Json = serde_json::from_str(
            r#"{"status":"ok","series":[{"pointlist":[[1,1.5],[2,null],[3,2.5]]},{"pointlist":[[1,9]]}]}"#,
        )
        .unwrap();
        let s = series_of(&json).unwrap();
        assert_eq!((s[0], s[2], s.len()), (1.5, 2.5, 3));
        assert!(s[1].is_nan());
        let none: Json = serde_json::from_str(r#"{"series":[]}"#).unwrap();
        assert_eq!(series_of(&none), Ok(Vec::new()));
        let bad: Json = serde_json::from_str(r#"{"series":[{"pointlist":[[1,"x"]]}]}"#).unwrap();
        assert_eq!(
            series_of(&bad),
            Err("expected a number, found a string".into())
        );
    }

    #[test]
    fn the_first_point_of_the_first_series_is_the_value() {
        let body = br#"{"status":"ok","series":[{"pointlist":[[1577232000000,1.11111],[1577318400000,56294.4]]},{"pointlist":[[1,9]]}]}"#;
        assert_eq!(parse_response(200, body), MetricValue::Value(1.11111));
    }

    #[test]
    fn empty_answers_are_no_data_and_bad_ones_errors() {
        for body in [
            &br#"{"series":[]}"#[..],
            br#"{"series":[{"pointlist":[]}]}"#,
            br#"{"series":[{"pointlist":[[1,null]]}]}"#,
        ] {
            assert_eq!(parse_response(200, body), MetricValue::NoData);
        }
        let cases: &[(u16, &[u8], &str)] = &[
            (403, br#"{"errors":["Forbidden"]}"#, "answered HTTP 403"),
            (500, b"", "HTTP 500"),
            (200, b"<html>", "expected a JSON answer"),
            (
                200,
                br#"{"status":"error","error":"Error parsing query"}"#,
                "answered with an error",
            ),
            (200, br#"{"status":"ok"}"#, "no \"series\""),
            (200, br#"{"series":[{}]}"#, "no \"pointlist\""),
            (
                200,
                br#"{"series":[{"pointlist":[[1]]}]}"#,
                "expected a point",
            ),
            (
                200,
                br#"{"series":[{"pointlist":[[1,"x"]]}]}"#,
                "expected a number",
            ),
        ];
        vendor_http::assert_errors(parse_response, cases);
    }

    #[test]
    fn keys_never_print() {
        let d = Datadog::new(
            "https://dd",
            "api-secret".into(),
            "app-secret".into(),
            Duration::from_secs(60),
        )
        .unwrap();
        let shown = format!("{d:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert_eq!(d.from_delta_secs, 600);
    }
}
