//! Range queries (`GET /api/v1/query_range`) for the statistical judge: one series of values
//! over a window, through the same pooled client, credentials, headers, timeout and one retry
//! on a closed keep-alive connection as instant queries. Several series are an error (the judge
//! compares one series of the canary with one of the primary); an empty matrix is an empty
//! series (the judge calls it `Nodata`). Values are returned as Prometheus wrote them, `NaN`
//! included. This module judges nothing.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value as Json;

use super::{collapse_whitespace, error_type, Prometheus};
use crate::metrics::vendor_http;

impl Prometheus {
    /// The one series `promql` gives from `start` to `end`, one value every `step`.
    pub async fn query_range(
        &self,
        promql: &str,
        start: Timestamp,
        end: Timestamp,
        step: Duration,
    ) -> Result<Vec<f64>, String> {
        let query = collapse_whitespace(promql);
        tracing::debug!(prometheus = %self.shown, %query, "prometheus range query");
        let mut url = self.url.clone();
        let path = format!("{}_range", url.path());
        url.set_path(&path);
        let params = [
            ("query", query),
            ("start", seconds(start)),
            ("end", seconds(end)),
            ("step", format!("{}", step.as_secs_f64())),
        ];
        let request = self.get(url).query(&params);
        let shown = |reason: String| format!("Prometheus {}: {reason}", self.shown);
        let (status, body) = vendor_http::get(request, self.timeout)
            .await
            .map_err(shown)?;
        parse_range_response(status, &body).map_err(|e| {
            vendor_http::log_unusable("Prometheus", &self.shown, status, &body, &e);
            shown(e)
        })
    }
}

/// A timestamp as Prometheus takes it: Unix seconds with a fraction.
fn seconds(t: Timestamp) -> String {
    format!("{:.3}", t.as_millisecond() as f64 / 1000.0)
}

/// Reads an HTTP status and body from `/api/v1/query_range` into one series. Pure; never
/// panics. The errors are sluice's words, never the body's text.
pub fn parse_range_response(status: u16, body: &[u8]) -> Result<Vec<f64>, String> {
    let json: Option<Json> = serde_json::from_slice(body).ok();
    let kind = json.as_ref().and_then(error_type);
    if status >= 400 {
        return Err(match kind {
            Some(kind) => format!("answered HTTP {status} ({kind})"),
            None => format!("answered HTTP {status}"),
        });
    }
    let json = json
        .ok_or_else(|| format!("answered HTTP {status}: expected a JSON body, found other text"))?;
    match json.get("status").and_then(Json::as_str) {
        Some("success") => {}
        Some("error") => {
            return Err(match kind {
                Some(kind) => format!("answered status \"error\" ({kind})"),
                None => "answered status \"error\"".into(),
            })
        }
        _ => return Err("expected status \"success\" or \"error\"".into()),
    }
    let data = json.get("data").ok_or("answer has no \"data\"")?;
    if data.get("resultType").and_then(Json::as_str) != Some("matrix") {
        return Err("expected a range vector (matrix)".into());
    }
    let series = data
        .get("result")
        .and_then(Json::as_array)
        .ok_or("matrix answer has no \"result\" list")?;
    match series.as_slice() {
        [] => Ok(Vec::new()),
        [one] => samples(one),
        many => Err(format!(
            "query returned {} series; expected one",
            many.len()
        )),
    }
}

/// `{"values": [[<time>, "<value>"], ...]}` -> the values, in time order.
fn samples(series: &Json) -> Result<Vec<f64>, String> {
    let values = series
        .get("values")
        .and_then(Json::as_array)
        .ok_or("series has no \"values\" list (a native histogram?)")?;
    values
        .iter()
        .map(|sample| match sample.as_array().map(Vec::as_slice) {
            Some([_, Json::String(text)]) => text
                .parse::<f64>()
                .map_err(|_| "expected a number, found other text".to_string()),
            _ => Err(format!(
                "expected a sample [time, \"value\"], found {}",
                vendor_http::kind_of(sample)
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(result: &str) -> Vec<u8> {
        format!(r#"{{"status":"success","data":{{"resultType":"matrix","result":{result}}}}}"#)
            .into_bytes()
    }

    #[test]
    fn one_series_gives_its_values_in_order() {
        let body = ok(r#"[{"metric":{},"values":[[1,"1.5"],[2,"NaN"],[3,"3"]]}]"#);
        let v = parse_range_response(200, &body).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!((v[0], v[2]), (1.5, 3.0));
        assert!(v[1].is_nan());
    }

    #[test]
    fn no_series_is_an_empty_series_and_several_are_an_error() {
        assert_eq!(
            parse_range_response(200, &ok("[]")).unwrap(),
            Vec::<f64>::new()
        );
        let two = ok(r#"[{"values":[[1,"1"]]},{"values":[[1,"2"]]}]"#);
        assert_eq!(
            parse_range_response(200, &two).unwrap_err(),
            "query returned 2 series; expected one"
        );
    }

    #[test]
    fn errors_are_named_without_the_body() {
        let body = br#"{"status":"error","errorType":"bad_data","error":"secret text"}"#;
        assert_eq!(
            parse_range_response(400, body).unwrap_err(),
            "answered HTTP 400 (bad_data)"
        );
        let vector = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(
            parse_range_response(200, vector).unwrap_err(),
            "expected a range vector (matrix)"
        );
        assert!(parse_range_response(200, b"<html>").is_err());
        let bad = ok(r#"[{"values":[[1,2]]}]"#);
        assert!(parse_range_response(200, &bad)
            .unwrap_err()
            .starts_with("expected a sample"));
    }
}
