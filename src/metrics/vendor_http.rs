//! What the vendor providers (`datadog.rs`, `newrelic.rs`, `graphite.rs`, `influxdb.rs`,
//! `dynatrace.rs`, `splunk.rs`, `cloudwatch.rs`) share: their API address checked and shown
//! without credentials, one GET or POST with Flagger's 5 s timeout whose every failure is a
//! message, the head of reading a JSON answer, and the vendor's name and address in front of
//! every error. Each provider keeps its request and how its answer reduces to one value. It
//! judges nothing and reads no secrets. `prometheus.rs` sends its query through [`get`] too.
//!
//! An error is sluice's own words: the HTTP status (`answered HTTP 401`) or what was wrong
//! with the answer's shape, never text the backend sent. Errors become commit messages and
//! status files, and a backend may echo the credentials it received. The answer itself goes
//! only to the log, cut short and redacted ([`log_unusable`], through [`crate::redact`]).

use std::time::Duration;

use serde_json::Value as Json;

use crate::core::observe::MetricValue;
use crate::http_client;

/// Flagger's query timeout for every vendor provider.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read; one query's answer is a few kilobytes.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// `address` (`http(s)://host[:port][/path]`) with `path` appended, and the address as shown in
/// messages (without user info or a trailing slash).
pub fn api_url(address: &str, path: &str) -> Result<(reqwest::Url, String), String> {
    let bad = |reason: &str| format!("invalid address {address:?}: {reason}");
    let url = reqwest::Url::parse(address).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("expected an http:// or https:// URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("expected no query or fragment"));
    }
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    let shown = shown.as_str().trim_end_matches('/').to_string();
    let mut full = url;
    let base = full.path().trim_end_matches('/').to_string();
    full.set_path(&format!("{base}{path}"));
    Ok((full, shown))
}

/// Sends `request` (a GET) and reads the answer: the status and body, or why there is none.
/// A pooled keep-alive connection the server closed is retried once on a fresh one.
pub async fn get(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    exchange(request, timeout, true).await
}

/// Sends the GET `request` within `timeout` ([`get`]) and reads its answer with `parse`
/// ([`value`]: errors name `vendor` and its `shown` address).
pub async fn get_value(
    vendor: &str,
    shown: &str,
    request: reqwest::RequestBuilder,
    timeout: Duration,
    parse: impl FnOnce(u16, &[u8]) -> MetricValue,
) -> MetricValue {
    let sent = get(request, timeout).await;
    value(vendor, shown, sent, parse)
}

/// The `from` and `to` query values of the window of `span` ending at `now` (both in the unit
/// the vendor counts time in), as Flagger's Datadog and Dynatrace providers ask for.
pub fn window(now: u64, span: u64) -> (String, String) {
    (now.saturating_sub(span).to_string(), now.to_string())
}

/// Sends `request` (a POST: a query that reads, but never sent twice) and reads the answer.
pub async fn post(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    exchange(request, timeout, false).await
}

async fn exchange(
    request: reqwest::RequestBuilder,
    timeout: Duration,
    retry: bool,
) -> Result<(u16, Vec<u8>), String> {
    let request = request.timeout(timeout);
    let exchange = async {
        let again = if retry { request.try_clone() } else { None };
        let response = match request.send().await {
            Err(e) if e.is_request() && !e.is_timeout() => match again {
                Some(again) => again.send().await?,
                None => return Err(e),
            },
            sent => sent?,
        };
        let status = response.status().as_u16();
        let body = http_client::read_body(response, MAX_RESPONSE_BYTES).await;
        Ok::<_, reqwest::Error>((status, body))
    };
    let timed_out = || format!("timed out after {}", http_client::human_duration(timeout));
    // reqwest's timeout covers connecting through reading the body; the outer one bounds
    // anything it might not (DNS resolution on a blocking pool).
    match tokio::time::timeout(timeout + Duration::from_secs(1), exchange).await {
        Err(_) => Err(timed_out()),
        Ok(Err(e)) if e.is_timeout() => Err(timed_out()),
        Ok(Err(e)) => Err(http_client::describe(&e)),
        Ok(Ok((_, Err(http_client::BodyError::TooLarge { limit })))) => {
            Err(format!("response body larger than {limit} bytes"))
        }
        Ok(Ok((_, Err(http_client::BodyError::Transfer(e))))) if e.is_timeout() => {
            Err(format!("{} while reading the response", timed_out()))
        }
        Ok(Ok((_, Err(http_client::BodyError::Transfer(e))))) => Err(format!(
            "reading the response failed: {}",
            http_client::describe(&e)
        )),
        Ok(Ok((status, Ok(body)))) => Ok((status, body)),
    }
}

/// An HTTP status that is not success, in sluice's words (the body is only logged).
pub fn status_error(status: u16) -> Option<String> {
    if (200..300).contains(&status) {
        return None;
    }
    Some(format!("answered HTTP {status}"))
}

/// What kind of JSON value `value` is, for an error that must not quote it.
pub fn kind_of(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "true or false",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

/// Logs an answer of `vendor` at `shown` that gave no value (`reason`): its status and the
/// start of its body, cut short and with every credential redacted.
pub fn log_unusable(vendor: &str, shown: &str, status: u16, body: &[u8], reason: &str) {
    tracing::warn!(
        provider = vendor,
        address = shown,
        status,
        answer = %crate::redact::answer(body),
        reason = %crate::redact::text(reason),
        "Metric provider answer not usable"
    );
}

/// The value of one exchange `sent` (what [`get`] or [`post`] gave): its answer read by
/// `parse`, and every error, the exchange's or the answer's, prefixed with the vendor's name and
/// shown address (`Datadog https://dd.example: HTTP 403`).
pub fn value(
    vendor: &str,
    shown: &str,
    sent: Result<(u16, Vec<u8>), String>,
    parse: impl FnOnce(u16, &[u8]) -> MetricValue,
) -> MetricValue {
    let value = match sent {
        Ok((status, body)) => {
            let value = parse(status, &body);
            if let MetricValue::Error(e) = &value {
                log_unusable(vendor, shown, status, &body, e);
            }
            value
        }
        Err(e) => MetricValue::Error(e),
    };
    match value {
        MetricValue::Error(e) => MetricValue::Error(format!("{vendor} {shown}: {e}")),
        other => other,
    }
}

/// Reads a JSON answer: a status that is not success ([`status_error`]) or a body that is not
/// JSON ([`not_json`]) is an error; otherwise `reduce` turns the document into the value.
pub fn parse_json(
    status: u16,
    body: &[u8],
    reduce: impl FnOnce(&Json) -> MetricValue,
) -> MetricValue {
    if let Some(e) = status_error(status) {
        return MetricValue::Error(e);
    }
    match serde_json::from_slice(body) {
        Ok(json) => reduce(&json),
        Err(e) => MetricValue::Error(not_json(&e)),
    }
}

/// The series of one exchange `sent`, for the statistical judge: as [`value`], its JSON
/// answer read by `reduce` into every value of the window, every error prefixed with the
/// vendor's name and shown address.
pub fn series(
    vendor: &str,
    shown: &str,
    sent: Result<(u16, Vec<u8>), String>,
    reduce: impl FnOnce(&Json) -> Result<Vec<f64>, String>,
) -> Result<Vec<f64>, String> {
    let (status, body) = sent.map_err(|e| format!("{vendor} {shown}: {e}"))?;
    let read = match status_error(status) {
        Some(e) => Err(e),
        None => serde_json::from_slice(&body)
            .map_err(|e| not_json(&e))
            .and_then(|json| reduce(&json)),
    };
    read.map_err(|e| {
        log_unusable(vendor, shown, status, &body, &e);
        format!("{vendor} {shown}: {e}")
    })
}

/// A JSON value of a series: a number, or `null` (a missing value: NaN, which the judge's
/// `nanStrategy` removes or replaces).
pub fn series_value(value: &Json) -> Result<f64, String> {
    match value {
        Json::Null => Ok(f64::NAN),
        Json::Number(n) => n
            .as_f64()
            .ok_or_else(|| "expected a number, found a number out of range".to_string()),
        other => Err(format!("expected a number, found {}", kind_of(other))),
    }
}

/// A body that is not the JSON expected (`error` says where, never what was there).
pub fn not_json(error: &serde_json::Error) -> String {
    format!("expected a JSON answer ({error})")
}

/// Asserts that `parse` reads each `(status, body)` of `cases` as an error containing its text
/// and not quoting the body.
#[cfg(test)]
pub(crate) fn assert_errors(parse: fn(u16, &[u8]) -> MetricValue, cases: &[(u16, &[u8], &str)]) {
    for (status, body, expected) in cases {
        match parse(*status, body) {
            MetricValue::Error(e) => {
                assert!(e.contains(expected), "{e}");
                let text = String::from_utf8_lossy(body);
                assert!(text.len() < 4 || !e.contains(text.as_ref()), "{e}");
            }
            other => panic!("{expected}: {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_urls_append_the_path_and_hide_credentials() {
        let (url, shown) = api_url("https://u:p@dd.example/base/", "/api/v1/query").unwrap();
        assert_eq!(url.as_str(), "https://u:p@dd.example/base/api/v1/query");
        assert_eq!(shown, "https://dd.example/base");
        for bad in ["dd.example", "ftp://x", "http://x/?a=1", ""] {
            assert!(api_url(bad, "/q").is_err(), "{bad}");
        }
    }

    #[test]
    fn every_error_names_the_vendor_and_address_and_values_pass_through() {
        let parse = |status: u16, body: &[u8]| {
            parse_json(status, body, |j| {
                MetricValue::Value(j.as_f64().unwrap_or(-1.0))
            })
        };
        let shown = "https://v.example";
        let cases = [
            (
                Err("timed out after 5s".to_string()),
                "V https://v.example: timed out after 5s",
            ),
            (
                Ok((503, b"down".to_vec())),
                "V https://v.example: answered HTTP 503",
            ),
            (
                Ok((200, b"<html>".to_vec())),
                "V https://v.example: expected a JSON answer",
            ),
        ];
        for (sent, expected) in cases {
            match value("V", shown, sent, parse) {
                MetricValue::Error(e) => {
                    assert!(e.starts_with(expected), "{e}");
                    assert!(!e.contains("down") && !e.contains("html"), "{e}");
                }
                other => panic!("{expected}: {other:?}"),
            }
        }
        assert_eq!(
            value("V", shown, Ok((200, b"2.5".to_vec())), parse),
            MetricValue::Value(2.5)
        );
        assert_eq!(
            value("V", shown, Ok((204, Vec::new())), |_, _| {
                MetricValue::NoData
            }),
            MetricValue::NoData
        );
    }
}
