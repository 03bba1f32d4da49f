//! What the vendor providers (`datadog.rs`, `newrelic.rs`, `graphite.rs`) share: their API
//! address checked and shown without credentials, and one GET with Flagger's 5 s timeout whose
//! every failure is a message. It judges nothing and reads no secrets.

use std::time::Duration;

use crate::http;

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
        let body = http::read_body(response, MAX_RESPONSE_BYTES).await;
        Ok::<_, reqwest::Error>((status, body))
    };
    let timed_out = || format!("timed out after {}", http::human_duration(timeout));
    // reqwest's timeout covers connecting through reading the body; the outer one bounds
    // anything it might not (DNS resolution on a blocking pool).
    match tokio::time::timeout(timeout + Duration::from_secs(1), exchange).await {
        Err(_) => Err(timed_out()),
        Ok(Err(e)) if e.is_timeout() => Err(timed_out()),
        Ok(Err(e)) => Err(http::describe(&e)),
        Ok(Ok((_, Err(http::BodyError::TooLarge { limit })))) => {
            Err(format!("response body larger than {limit} bytes"))
        }
        Ok(Ok((_, Err(http::BodyError::Transfer(e))))) if e.is_timeout() => {
            Err(format!("{} while reading the response", timed_out()))
        }
        Ok(Ok((_, Err(http::BodyError::Transfer(e))))) => Err(format!(
            "reading the response failed: {}",
            http::describe(&e)
        )),
        Ok(Ok((status, Ok(body)))) => Ok((status, body)),
    }
}

/// An HTTP status that is not success, with the start of the body.
pub fn status_error(status: u16, body: &[u8]) -> Option<String> {
    if (200..300).contains(&status) {
        return None;
    }
    let detail = http::snippet(body, 200);
    Some(if detail.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {detail}")
    })
}

/// A body that is not the JSON expected.
pub fn not_json(body: &[u8], error: &serde_json::Error) -> String {
    format!(
        "expected a JSON answer ({error}), found {:?}",
        http::snippet(body, 200)
    )
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
}
