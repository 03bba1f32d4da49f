//! Splunk Observability (SignalFx) metric queries, as Flagger's `splunk` provider makes them:
//! the template's query is a SignalFlow program, run over the last ten metric intervals with
//! the `X-SF-Token` header (Secret key `sf_token_key`). Flagger speaks SignalFlow over a
//! WebSocket; sluice uses SignalFlow's documented HTTP transport (the one Splunk's own Python
//! client calls `SSETransport`): `POST <stream endpoint>/v2/signalflow/execute?start=&stop=&
//! immediate=true` with the program as a `text/plain` body, answered with a server-sent event
//! stream of `data` messages (`{"data": [{"tsId", "value"}]}`) that ends with an
//! `END_OF_CHANNEL` control message. The stream endpoint is derived from `address` as Flagger
//! derives it (`https://api.<realm>.signalfx.com` → `https://stream.<realm>.signalfx.com`).
//!
//! The value is Flagger's: the last non-null data point; none is no data, and points of more
//! than one time series are an error. This module judges nothing.

use std::fmt;
use std::time::Duration;

use serde_json::Value as Json;

use crate::core::observe::MetricValue;
use crate::metrics::provider::unix_ms;
use crate::metrics::provider::{
    Answer, Ask, ClientInput, MetricBackend, ProviderFields, SecretConfig, Series, SeriesAnswer,
    Vendor, VendorClient, Window,
};
use crate::metrics::vendor_http::{self, api_url, status_error};
use crate::yaml::reader::Reader;

/// The Secret key of the access token.
pub const TOKEN: &str = "sf_token_key";
/// Flagger queries `start = now - 10 × metric interval`.
const FROM_INTERVALS: u64 = 10;

/// A SignalFlow client for one realm and token. `Debug` never prints the token.
#[derive(Clone)]
pub struct Splunk {
    url: reqwest::Url,
    shown: String,
    token: String,
    from_delta_ms: u64,
    pub timeout: Duration,
}

impl fmt::Debug for Splunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Splunk({}, <token redacted>)", self.shown)
    }
}

/// The SignalFlow stream address for `address`, as Flagger's: `ws`/`wss` become `http`/
/// `https` (sluice uses the HTTP transport), and the first `api` of the host becomes `stream`
/// (`api.us1.signalfx.com` → `stream.us1.signalfx.com`); a stream address stays as it is.
pub fn stream_address(address: &str) -> String {
    let (scheme, rest) = match address.split_once("://") {
        Some(("wss", rest)) => ("https", rest),
        Some(("ws", rest)) => ("http", rest),
        Some((scheme, rest)) => (scheme, rest),
        None => return address.to_string(),
    };
    let host_end = rest.find('/').unwrap_or(rest.len());
    let (host, path) = rest.split_at(host_end);
    let host = host.replacen("api", "stream", 1);
    format!("{scheme}://{host}{path}")
}

impl Splunk {
    /// A client for `address` (the API or stream address of a realm), whose programs cover ten
    /// `interval`s back from now.
    pub fn new(address: &str, token: String, interval: Duration) -> Result<Splunk, String> {
        let (url, shown) = api_url(&stream_address(address), "/v2/signalflow/execute")?;
        Ok(Splunk {
            url,
            shown,
            token,
            from_delta_ms: FROM_INTERVALS * u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            timeout: vendor_http::DEFAULT_TIMEOUT,
        })
    }

    /// The execute URL, for the endpoint pool.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Runs `program` through `client`, ending at `now_ms` (Unix milliseconds).
    pub async fn query(&self, client: &reqwest::Client, program: &str, now_ms: u64) -> MetricValue {
        tracing::debug!(splunk = %self.shown, %program, "signalflow execute");
        let start = now_ms.saturating_sub(self.from_delta_ms).to_string();
        let stop = now_ms.to_string();
        let request = client
            .post(self.url.clone())
            .query(&[
                ("start", start.as_str()),
                ("stop", &stop),
                ("immediate", "true"),
            ])
            .header("X-SF-Token", &self.token)
            .header(reqwest::header::CONTENT_TYPE, "text/plain")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(program.to_string());
        let sent = vendor_http::post(request, self.timeout).await;
        vendor_http::value("Splunk", &self.shown, sent, parse_response)
    }
}

/// One server-sent event: its `event:` name and joined `data:` lines.
fn events(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (mut event, mut data): (String, Vec<&str>) = (String::new(), Vec::new());
    for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.is_empty() {
            if !data.is_empty() {
                let name = if event.is_empty() {
                    "message".into()
                } else {
                    event.clone()
                };
                out.push((name, data.join("\n")));
            }
            event.clear();
            data.clear();
        } else if let Some(v) = line.strip_prefix("event:") {
            event = v.trim_start().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v));
        }
        // Comments (`:`), `id:` and `retry:` lines carry nothing a query needs.
    }
    if !data.is_empty() {
        out.push((
            if event.is_empty() {
                "message".into()
            } else {
                event
            },
            data.join("\n"),
        ));
    }
    out
}

/// Reads the event stream of `/v2/signalflow/execute` into a value. Pure; never panics.
pub fn parse_response(status: u16, body: &[u8]) -> MetricValue {
    if let Some(e) = status_error(status) {
        return MetricValue::Error(e);
    }
    let text = String::from_utf8_lossy(body);
    let mut points: Vec<(Json, f64)> = Vec::new();
    let mut ended = false;
    for (event, data) in events(&text) {
        let json: Json = match serde_json::from_str(&data) {
            Ok(j) => j,
            Err(e) => {
                return MetricValue::Error(format!("a message of the stream is not JSON ({e})"))
            }
        };
        match event.as_str() {
            "data" => {
                let Some(list) = json.get("data").and_then(Json::as_array) else {
                    return MetricValue::Error("data message has no \"data\" list".into());
                };
                for point in list {
                    match point.get("value") {
                        None | Some(Json::Null) => {}
                        Some(v) => match v.as_f64() {
                            Some(v) => {
                                points.push((point.get("tsId").cloned().unwrap_or(Json::Null), v))
                            }
                            None => {
                                return MetricValue::Error(format!(
                                    "expected a number, found {}",
                                    vendor_http::kind_of(v)
                                ))
                            }
                        },
                    }
                }
            }
            "error" => return MetricValue::Error("answered with a SignalFlow error".into()),
            "control-message" => match json.get("event").and_then(Json::as_str) {
                Some("END_OF_CHANNEL") => ended = true,
                Some("CHANNEL_ABORT") => {
                    return MetricValue::Error("the computation was aborted".into())
                }
                _ => {}
            },
            _ => {}
        }
    }
    if !ended {
        return MetricValue::Error("the stream ended before END_OF_CHANNEL".into());
    }
    let Some((first_ts, _)) = points.first() else {
        return MetricValue::NoData;
    };
    if points.iter().any(|(ts, _)| ts != first_ts) {
        return MetricValue::Error(
            "the program returned more than one time series; publish one (e.g. with .sum())".into(),
        );
    }
    match points.last() {
        Some((_, v)) => MetricValue::Value(*v),
        None => MetricValue::NoData,
    }
}

impl MetricBackend for Splunk {
    type Config = SecretConfig;
    const TYPE: &'static str = "splunk";
    const READS: &'static [&'static str] = &[];
    const SECRET_KEYS: &'static [&'static str] = &[TOKEN];
    /// Flagger's splunk provider also takes the realm's wss:// stream address.
    const WEBSOCKET_ADDRESS: bool = true;
    const SERIES: Series = Series::OneValue;
    const EXAMPLE: &'static str =
        "    type: splunk\n    address: wss://stream.us1.signalfx.com\n    secretRef: {name: splunk}\n";
    const ANSWER: (&'static str, f64) = (
        "event: metadata\ndata: {\"tsId\":\"AAA\",\"properties\":{\"sf_metric\":\"m\"}}\n\nevent: data\ndata: {\"logicalTimestampMs\":1,\"data\":[{\"tsId\":\"AAA\",\"value\":2.5}]}\n\nevent: control-message\ndata: {\"event\":\"END_OF_CHANNEL\",\"timestampMs\":3}\n\n",
        2.5,
    );

    fn read(fields: &ProviderFields, r: &mut Reader) -> Option<SecretConfig> {
        SecretConfig::read(fields, r, Self::SECRET_KEYS, None)
    }

    fn client(config: &SecretConfig, input: &ClientInput) -> Option<Result<Vendor, String>> {
        Some((|| {
            let token = input.key(&config.secret_ref, TOKEN)?;
            let client = Splunk::new(&config.address, token, input.interval)?;
            Ok(Vendor::new(client.url().clone(), false, client))
        })())
    }

    fn parse(status: u16, body: &[u8]) -> MetricValue {
        parse_response(status, body)
    }
}

impl VendorClient for Splunk {
    fn instant<'a>(&'a self, ask: Ask<'a>, now: Duration) -> Answer<'a, MetricValue> {
        Box::pin(self.query(ask.http, ask.query, unix_ms(now)))
    }

    /// SignalFlow's execute call streams one computation: no series for the judge.
    fn range<'a>(&'a self, _ask: Ask<'a>, _window: Window) -> SeriesAnswer<'a> {
        let refusal = crate::metrics::judge_series::refusal(Self::TYPE);
        Box::pin(std::future::ready(Err(refusal)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(events: &[(&str, &str)]) -> Vec<u8> {
        let mut s = String::new();
        for (e, d) in events {
            s.push_str(&format!("event: {e}\ndata: {d}\n\n"));
        }
        s.into_bytes()
    }

    const END: (&str, &str) = (
        "control-message",
        r#"{"event":"END_OF_CHANNEL","timestampMs":3}"#,
    );

    #[test]
    fn stream_addresses_follow_flaggers_realm_mapping() {
        assert_eq!(
            stream_address("https://api.us1.signalfx.com"),
            "https://stream.us1.signalfx.com"
        );
        assert_eq!(
            stream_address("wss://stream.us1.signalfx.com"),
            "https://stream.us1.signalfx.com"
        );
        assert_eq!(
            stream_address("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            stream_address("https://api.eu0.signalfx.com/api"),
            "https://stream.eu0.signalfx.com/api"
        );
        let s = Splunk::new(
            "https://api.us1.signalfx.com",
            "s3cr3t".into(),
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(
            s.url().as_str(),
            "https://stream.us1.signalfx.com/v2/signalflow/execute"
        );
        assert_eq!(s.from_delta_ms, 600_000);
        assert!(!format!("{s:?}").contains("s3cr3t"));
    }

    #[test]
    fn the_last_non_null_point_of_one_time_series_is_the_value() {
        let body = stream(&[
            (
                "control-message",
                r#"{"event":"STREAM_START","timestampMs":1}"#,
            ),
            (
                "metadata",
                r#"{"tsId":"AAA","properties":{"sf_metric":"m"}}"#,
            ),
            (
                "data",
                r#"{"logicalTimestampMs":1,"data":[{"tsId":"AAA","value":1.5}]}"#,
            ),
            (
                "data",
                r#"{"logicalTimestampMs":2,"data":[{"tsId":"AAA","value":2}]}"#,
            ),
            (
                "data",
                r#"{"logicalTimestampMs":3,"data":[{"tsId":"AAA","value":null}]}"#,
            ),
            END,
        ]);
        assert_eq!(parse_response(200, &body), MetricValue::Value(2.0));
    }

    #[test]
    fn no_points_are_no_data_and_bad_streams_errors() {
        assert_eq!(parse_response(200, &stream(&[END])), MetricValue::NoData);
        assert_eq!(
            parse_response(
                200,
                &stream(&[("data", r#"{"data":[{"tsId":"A","value":null}]}"#), END])
            ),
            MetricValue::NoData
        );
        let cases: Vec<(u16, Vec<u8>, &str)> = vec![
            (401, br#"{"message":"unauthorized"}"#.to_vec(), "HTTP 401"),
            (
                200,
                stream(&[("data", r#"{"data":[{"tsId":"A","value":1}]}"#)]),
                "before END_OF_CHANNEL",
            ),
            (
                200,
                stream(&[
                    (
                        "data",
                        r#"{"data":[{"tsId":"A","value":1},{"tsId":"B","value":2}]}"#,
                    ),
                    END,
                ]),
                "more than one time series",
            ),
            (
                200,
                stream(&[(
                    "error",
                    r#"{"errors":[{"code":"ANALYTICS_PROGRAM_NAME_ERROR"}]}"#,
                )]),
                "answered with a SignalFlow error",
            ),
            (
                200,
                stream(&[(
                    "control-message",
                    r#"{"event":"CHANNEL_ABORT","abortInfo":{"sf_job_abortReason":"x"}}"#,
                )]),
                "aborted",
            ),
            (200, stream(&[("data", "{not json"), END]), "not JSON"),
            (
                200,
                stream(&[("data", r#"{"data":[{"tsId":"A","value":"x"}]}"#), END]),
                "expected a number",
            ),
        ];
        for (status, body, expected) in cases {
            match parse_response(status, &body) {
                MetricValue::Error(e) => {
                    assert!(e.contains(expected), "{expected}: {e}");
                    assert!(!e.contains("ANALYTICS") && !e.contains("sf_job"), "{e}");
                }
                other => panic!("{expected}: {other:?}"),
            }
        }
    }

    #[test]
    fn events_join_data_lines_and_accept_crlf() {
        let got = events("event: data\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: comment\n\ndata: x\n");
        assert_eq!(
            got,
            vec![
                ("data".to_string(), "{\"a\":\n1}".to_string()),
                ("message".to_string(), "x".to_string())
            ]
        );
    }
}
