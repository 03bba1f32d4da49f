//! Dynatrace metric queries, as Flagger's `dynatrace` provider makes them: `GET
//! <address>/api/v2/metrics/query?metricSelector=…&resolution=Inf&from=…&to=…` (Unix
//! milliseconds, over the last ten metric intervals) with `Authorization: Api-Token <token>`
//! (Secret key `dynatrace_token`). The value is the first value of the last data series of
//! the first result; no result, no series, no value or a null value is no data. This module
//! judges nothing.

use std::fmt;
use std::time::Duration;

use serde_json::Value as Json;

use crate::core::observe::MetricValue;
use crate::metrics::provider::unix_ms;
use crate::metrics::provider::{
    Answer, Ask, ClientInput, MetricBackend, ProviderFields, SecretConfig, Series, SeriesAnswer,
    Vendor, VendorClient, Window,
};
use crate::metrics::vendor_http::{self, api_url, kind_of};
use crate::yaml::reader::Reader;

/// The Secret key of the API token.
pub const TOKEN: &str = "dynatrace_token";
/// Flagger queries `from = now - 10 × metric interval`.
const FROM_INTERVALS: u64 = 10;

/// A Dynatrace metrics-API client. `Debug` never prints the token.
#[derive(Clone)]
pub struct Dynatrace {
    url: reqwest::Url,
    shown: String,
    token: String,
    from_delta_ms: u64,
    pub timeout: Duration,
}

impl fmt::Debug for Dynatrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dynatrace({}, <token redacted>)", self.shown)
    }
}

impl Dynatrace {
    /// A client for the environment at `address`, whose queries cover ten `interval`s.
    pub fn new(address: &str, token: String, interval: Duration) -> Result<Dynatrace, String> {
        let (url, shown) = api_url(address, "/api/v2/metrics/query")?;
        let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        Ok(Dynatrace {
            url,
            shown,
            token,
            from_delta_ms: ms.saturating_mul(FROM_INTERVALS),
            timeout: vendor_http::DEFAULT_TIMEOUT,
        })
    }

    /// The query URL, for the endpoint pool.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Runs the metric selector `query` through `client`, ending at `now_ms` (Unix ms).
    pub async fn query(&self, client: &reqwest::Client, query: &str, now_ms: u64) -> MetricValue {
        tracing::debug!(dynatrace = %self.shown, %query, "dynatrace query");
        let (from, to) = vendor_http::window(now_ms, self.from_delta_ms);
        let request = client
            .get(self.url.clone())
            .query(&[
                ("metricSelector", query),
                ("resolution", "Inf"),
                ("from", &from),
                ("to", &to),
            ])
            .header("Authorization", format!("Api-Token {}", self.token));
        let (vendor, timeout) = ("Dynatrace", self.timeout);
        vendor_http::get_value(vendor, &self.shown, request, timeout, parse_response).await
    }
}

impl Dynatrace {
    /// The statistical judge's series: the same query with `from`/`to` the window (Unix
    /// seconds) and a resolution of `step` in whole minutes (Dynatrace's finest is 1m).
    pub async fn series(
        &self,
        client: &reqwest::Client,
        query: &str,
        (from, to): (u64, u64),
        step: Duration,
    ) -> Result<Vec<f64>, String> {
        tracing::debug!(dynatrace = %self.shown, %query, "dynatrace range query");
        let request = client
            .get(self.url.clone())
            .query(&[
                ("metricSelector", query),
                ("resolution", &resolution(step)),
                ("from", &from.saturating_mul(1000).to_string()),
                ("to", &to.saturating_mul(1000).to_string()),
            ])
            .header("Authorization", format!("Api-Token {}", self.token));
        let sent = vendor_http::get(request, self.timeout).await;
        vendor_http::series("Dynatrace", &self.shown, sent, series_of)
    }
}

/// A range query's `resolution`: `step` in whole minutes, at least `1m`.
pub fn resolution(step: Duration) -> String {
    format!("{}m", (step.as_secs() / 60).max(1))
}

/// Every value of the last data series of the first result (the series Flagger reads);
/// no result or no series is an empty series.
pub fn series_of(json: &Json) -> Result<Vec<f64>, String> {
    if json.get("error").is_some() {
        return Err("answered with an error".into());
    }
    let results = json
        .get("result")
        .and_then(Json::as_array)
        .ok_or("answer has no \"result\" list")?;
    let Some(first) = results.first() else {
        return Ok(Vec::new());
    };
    let data = first
        .get("data")
        .and_then(Json::as_array)
        .ok_or("result has no \"data\" list")?;
    let Some(series) = data.last() else {
        return Ok(Vec::new());
    };
    series
        .get("values")
        .and_then(Json::as_array)
        .ok_or("series has no \"values\" list")?
        .iter()
        .map(vendor_http::series_value)
        .collect()
}

/// Reads a `/api/v2/metrics/query` answer into a value. Pure; never panics.
pub fn parse_response(status: u16, body: &[u8]) -> MetricValue {
    vendor_http::parse_json(status, body, value_of)
}

/// The first value of the last data series of the first result of an answer.
fn value_of(json: &Json) -> MetricValue {
    if json.get("error").is_some() {
        return MetricValue::Error("answered with an error".into());
    }
    let Some(results) = json.get("result").and_then(Json::as_array) else {
        return MetricValue::Error("answer has no \"result\" list".into());
    };
    let Some(first) = results.first() else {
        return MetricValue::NoData;
    };
    let Some(data) = first.get("data").and_then(Json::as_array) else {
        return MetricValue::Error("result has no \"data\" list".into());
    };
    let Some(series) = data.last() else {
        return MetricValue::NoData;
    };
    let Some(values) = series.get("values").and_then(Json::as_array) else {
        return MetricValue::Error("series has no \"values\" list".into());
    };
    match values.first() {
        None | Some(Json::Null) => MetricValue::NoData,
        Some(v) => match v.as_f64() {
            Some(v) => MetricValue::Value(v),
            None => MetricValue::Error(format!("expected a number, found {}", kind_of(v))),
        },
    }
}

impl MetricBackend for Dynatrace {
    type Config = SecretConfig;
    const TYPE: &'static str = "dynatrace";
    const READS: &'static [&'static str] = &[];
    const SECRET_KEYS: &'static [&'static str] = &[TOKEN];
    const SERIES: Series = Series::Range { rank: 5 };
    const EXAMPLE: &'static str =
        "    type: dynatrace\n    address: https://abc.live.dynatrace.com\n    secretRef: {name: dynatrace}\n";
    const ANSWER: (&'static str, f64) = (
        r#"{"totalCount":1,"resolution":"Inf","result":[{"metricId":"m","data":[{"dimensions":[],"timestamps":[1],"values":[1.25]}]}]}"#,
        1.25,
    );

    fn read(fields: &ProviderFields, r: &mut Reader) -> Option<SecretConfig> {
        SecretConfig::read(fields, r, Self::SECRET_KEYS, None)
    }

    fn client(config: &SecretConfig, input: &ClientInput) -> Option<Result<Vendor, String>> {
        Some((|| {
            let token = input.key(&config.secret_ref, TOKEN)?;
            let client = Dynatrace::new(&config.address, token, input.interval)?;
            Ok(Vendor::new(client.url().clone(), false, client))
        })())
    }

    fn parse(status: u16, body: &[u8]) -> MetricValue {
        parse_response(status, body)
    }
}

impl VendorClient for Dynatrace {
    fn instant<'a>(&'a self, ask: Ask<'a>, now: Duration) -> Answer<'a, MetricValue> {
        Box::pin(self.query(ask.http, ask.query, unix_ms(now)))
    }

    fn range<'a>(&'a self, ask: Ask<'a>, window: Window) -> SeriesAnswer<'a> {
        Box::pin(self.series(ask.http, ask.query, window.span, window.step))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_reads_every_value_of_the_last_series_at_a_minute_resolution() {
        let json: Json = serde_json::from_str(
            r#"{"result":[{"data":[{"values":[9]},{"values":[1.5,null,2]}]}]}"#,
        )
        .unwrap();
        let s = series_of(&json).unwrap();
        assert_eq!((s[0], s[2], s.len()), (1.5, 2.0, 3));
        assert!(s[1].is_nan());
        assert_eq!(
            series_of(&serde_json::json!({"result": []})),
            Ok(Vec::new())
        );
        assert_eq!(resolution(Duration::from_secs(10)), "1m");
        assert_eq!(resolution(Duration::from_secs(300)), "5m");
    }

    #[test]
    fn the_first_value_of_the_last_series_is_the_value() {
        let body = br#"{"totalCount":2,"nextPageKey":null,"resolution":"Inf","result":[{"metricId":"builtin:service.response.time","dataPointCountRatio":0.1,"dimensionCountRatio":0.1,"data":[{"dimensions":["a"],"dimensionMap":{},"timestamps":[1],"values":[9.5]},{"dimensions":["b"],"dimensionMap":{},"timestamps":[1],"values":[1.25]}]}]}"#;
        assert_eq!(parse_response(200, body), MetricValue::Value(1.25));
        for body in [
            &br#"{"result":[]}"#[..],
            br#"{"result":[{"data":[]}]}"#,
            br#"{"result":[{"data":[{"values":[]}]}]}"#,
            br#"{"result":[{"data":[{"values":[null]}]}]}"#,
        ] {
            assert_eq!(parse_response(200, body), MetricValue::NoData);
        }
        let cases: &[(u16, &[u8], &str)] = &[
            (
                401,
                br#"{"error":{"code":401,"message":"Token Authentication failed"}}"#,
                "HTTP 401",
            ),
            (
                200,
                br#"{"error":{"code":400,"message":"bad selector"}}"#,
                "answered with an error",
            ),
            (200, br#"{}"#, "no \"result\""),
            (200, br#"{"result":[{}]}"#, "no \"data\""),
            (
                200,
                br#"{"result":[{"data":[{"values":["x"]}]}]}"#,
                "expected a number",
            ),
        ];
        vendor_http::assert_errors(parse_response, cases);
    }

    #[test]
    fn queries_cover_ten_intervals_in_milliseconds_and_the_token_never_prints() {
        let d = Dynatrace::new(
            "https://env.live.dynatrace.com",
            "secret-token".into(),
            Duration::from_secs(100),
        )
        .unwrap();
        assert_eq!(
            d.url().as_str(),
            "https://env.live.dynatrace.com/api/v2/metrics/query"
        );
        assert_eq!(d.from_delta_ms, 1_000_000);
        assert!(!format!("{d:?}").contains("secret"));
    }
}
