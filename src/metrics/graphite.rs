//! Graphite metric queries, as Flagger's `graphite` provider makes them: the template's query
//! is the query string of the render API (`target=…&from=…`), runs of white space collapsed to
//! one space, sent as `GET <address>/render?<query>&format=json` with its parameters sorted by
//! name (Go's `url.Values.Encode`), with basic auth when the template has a `secretRef` (Secret
//! keys `username`, `password`). The value is the last non-null datapoint of all returned
//! targets; none is no data. This module judges nothing.

use std::fmt;
use std::time::Duration;

use serde_json::Value as Json;

use crate::core::observe::MetricValue;
use crate::metrics::provider::{
    Answer, Ask, ClientInput, MetricBackend, ProviderFields, Series, SeriesAnswer, Vendor,
    VendorClient, Window,
};
use crate::metrics::vendor_http::{self, api_url, kind_of};
use crate::yaml::reader::Reader;

/// The Secret key of the basic-auth user name.
pub const USERNAME: &str = "username";
/// The Secret key of the basic-auth password.
pub const PASSWORD: &str = "password";

/// A Graphite render-API client. `Debug` never prints the password.
#[derive(Clone)]
pub struct Graphite {
    url: reqwest::Url,
    shown: String,
    basic: Option<(String, String)>,
    insecure_skip_verify: bool,
    pub timeout: Duration,
}

impl fmt::Debug for Graphite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Graphite({}", self.shown)?;
        if let Some((user, _)) = &self.basic {
            write!(f, ", {user}, <password redacted>")?;
        }
        f.write_str(")")
    }
}

impl Graphite {
    /// A client for `address`; `basic` is the user name and password, if any.
    pub fn new(address: &str, basic: Option<(String, String)>) -> Result<Graphite, String> {
        let (url, shown) = api_url(address, "/render")?;
        Ok(Graphite {
            url,
            shown,
            // Flagger sends basic auth only when both are set.
            basic: basic.filter(|(u, p)| !u.is_empty() && !p.is_empty()),
            insecure_skip_verify: false,
            timeout: vendor_http::DEFAULT_TIMEOUT,
        })
    }

    /// The same client, its endpoint pooled on a client that skips TLS verification when
    /// `insecure` (the template's `insecureSkipVerify`).
    pub fn with_insecure_skip_verify(mut self, insecure: bool) -> Graphite {
        self.insecure_skip_verify = insecure;
        self
    }

    /// The render URL, for the endpoint pool.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// The URL `query` is sent to.
    pub fn request_url(&self, query: &str) -> reqwest::Url {
        let collapsed = query.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut pairs: Vec<(String, String)> = url::form_urlencoded::parse(collapsed.as_bytes())
            .filter(|(k, _)| k != "format")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        pairs.push(("format".into(), "json".into()));
        // Stable: values of one name keep their order, as in Go.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut url = self.url.clone();
        url.query_pairs_mut().clear().extend_pairs(&pairs);
        url
    }

    /// The URL of the statistical judge's range query: `query`'s parameters with `from` and
    /// `until` set to the judge's window (Unix seconds), whatever the query says.
    pub fn range_url(&self, query: &str, (from, until): (u64, u64)) -> reqwest::Url {
        let url = self.request_url(query);
        let mut pairs: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(k, _)| k != "from" && k != "until")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        pairs.push(("from".into(), from.to_string()));
        pairs.push(("until".into(), until.to_string()));
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut url = url;
        url.query_pairs_mut().clear().extend_pairs(&pairs);
        url
    }

    /// The statistical judge's series: every datapoint of `query`'s first target over the
    /// window `from`..`until` (Unix seconds), oldest first, `null` as NaN.
    pub async fn series(
        &self,
        client: &reqwest::Client,
        query: &str,
        window: (u64, u64),
    ) -> Result<Vec<f64>, String> {
        let url = self.range_url(query, window);
        tracing::debug!(graphite = %self.shown, query = url.query().unwrap_or_default(), "graphite range query");
        let mut request = client.get(url);
        if let Some((user, password)) = &self.basic {
            request = request.basic_auth(user, Some(password));
        }
        let sent = vendor_http::get(request, self.timeout).await;
        vendor_http::series("Graphite", &self.shown, sent, series_of)
    }

    /// Runs `query` (render API parameters) through `client`.
    pub async fn query(&self, client: &reqwest::Client, query: &str) -> MetricValue {
        let url = self.request_url(query);
        tracing::debug!(graphite = %self.shown, query = url.query().unwrap_or_default(), "graphite query");
        let mut request = client.get(url);
        if let Some((user, password)) = &self.basic {
            request = request.basic_auth(user, Some(password));
        }
        let (vendor, timeout) = ("Graphite", self.timeout);
        vendor_http::get_value(vendor, &self.shown, request, timeout, parse_response).await
    }
}

/// Reads a `format=json` render answer into a value. Pure; never panics.
pub fn parse_response(status: u16, body: &[u8]) -> MetricValue {
    vendor_http::parse_json(status, body, value_of)
}

/// Every datapoint of the first target of an answer (a string number read as Graphite's
/// JSON may spell it); no target is an empty series.
pub fn series_of(json: &Json) -> Result<Vec<f64>, String> {
    let targets = json.as_array().ok_or("expected a list of targets")?;
    let Some(target) = targets.first() else {
        return Ok(Vec::new());
    };
    let points = target
        .get("datapoints")
        .and_then(Json::as_array)
        .ok_or("target has no \"datapoints\" list")?;
    points
        .iter()
        .map(|point| match point.as_array().map(Vec::as_slice) {
            Some([Json::String(s), _]) => s
                .parse::<f64>()
                .map_err(|_| "expected a number, found a string".to_string()),
            Some([v, _]) => vendor_http::series_value(v),
            _ => Err(format!(
                "expected a datapoint [value, time], found {}",
                kind_of(point)
            )),
        })
        .collect()
}

/// The last non-null datapoint of all the targets of an answer.
fn value_of(json: &Json) -> MetricValue {
    let Some(targets) = json.as_array() else {
        return MetricValue::Error("expected a list of targets".into());
    };
    let mut last = None;
    for target in targets {
        let Some(points) = target.get("datapoints").and_then(Json::as_array) else {
            return MetricValue::Error("target has no \"datapoints\" list".into());
        };
        for point in points {
            let value = match point.as_array().map(Vec::as_slice) {
                Some([v, _]) => v,
                _ => {
                    return MetricValue::Error(format!(
                        "expected a datapoint [value, time], found {}",
                        kind_of(point)
                    ))
                }
            };
            match value {
                Json::Null => {}
                Json::Number(n) => last = n.as_f64(),
                Json::String(s) => match s.parse::<f64>() {
                    Ok(v) => last = Some(v),
                    Err(_) => {
                        return MetricValue::Error("expected a number, found a string".into())
                    }
                },
                other => {
                    return MetricValue::Error(format!(
                        "expected a number, found {}",
                        kind_of(other)
                    ))
                }
            }
        }
    }
    last.map_or(MetricValue::NoData, MetricValue::Value)
}

/// A graphite template's `spec.provider`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `address` (no default).
    pub address: String,
    /// The Secret holding [`USERNAME`] and [`PASSWORD`], if any.
    pub secret_ref: Option<String>,
    pub insecure_skip_verify: bool,
}

impl MetricBackend for Graphite {
    type Config = Config;
    const TYPE: &'static str = "graphite";
    const READS: &'static [&'static str] = &["insecureSkipVerify"];
    const SECRET_KEYS: &'static [&'static str] = &[USERNAME, PASSWORD];
    const SERIES: Series = Series::Range { rank: 2 };
    const EXAMPLE: &'static str = "    type: graphite\n    address: http://graphite:8080\n";
    const ANSWER: (&'static str, f64) = (
        r#"[{"target":"a","datapoints":[[1.5,1],[7.25,2],[null,3]]}]"#,
        7.25,
    );

    fn read(fields: &ProviderFields, r: &mut Reader) -> Option<Config> {
        Some(Config {
            address: fields.needs_address(r)?,
            secret_ref: fields.secret_ref.clone(),
            insecure_skip_verify: fields.insecure_skip_verify,
        })
    }

    fn client(config: &Config, input: &ClientInput) -> Option<Result<Vendor, String>> {
        Some((|| {
            let basic = match &config.secret_ref {
                Some(name) => {
                    let username = input.key(name, USERNAME)?;
                    let password = input.key(name, PASSWORD)?;
                    crate::redact::remember_basic(&username, &password);
                    Some((username, password))
                }
                None => None,
            };
            let client = Graphite::new(&config.address, basic)?;
            let insecure = config.insecure_skip_verify;
            let client = client.with_insecure_skip_verify(insecure);
            Ok(Vendor::new(client.url().clone(), insecure, client))
        })())
    }

    fn parse(status: u16, body: &[u8]) -> MetricValue {
        parse_response(status, body)
    }
}

impl VendorClient for Graphite {
    fn instant<'a>(&'a self, ask: Ask<'a>, _now: Duration) -> Answer<'a, MetricValue> {
        Box::pin(self.query(ask.http, ask.query))
    }

    fn range<'a>(&'a self, ask: Ask<'a>, window: Window) -> SeriesAnswer<'a> {
        Box::pin(self.series(ask.http, ask.query, window.span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_reads_every_datapoint_and_sets_the_window() {
        let json: Json =
            serde_json::from_str(r#"[{"target":"a","datapoints":[[1.5,10],[null,20],["2",30]]},{"target":"b","datapoints":[[9,10]]}]"#)
                .unwrap();
        let s = series_of(&json).unwrap();
        assert_eq!((s[0], s[2], s.len()), (1.5, 2.0, 3));
        assert!(s[1].is_nan());
        let g = Graphite::new("http://g.example", None).unwrap();
        let url = g.range_url("target=sum(a.b)&from=-5min&until=now", (100, 400));
        assert_eq!(
            url.query(),
            Some("format=json&from=100&target=sum%28a.b%29&until=400")
        );
    }

    #[test]
    fn the_last_non_null_datapoint_is_the_value() {
        let body = br#"[{"target":"a","datapoints":[[1.5,1],[null,2]]},{"target":"b","datapoints":[["7.25",3],[null,4]]}]"#;
        assert_eq!(parse_response(200, body), MetricValue::Value(7.25));
        for body in [&b"[]"[..], br#"[{"target":"a","datapoints":[[null,1]]}]"#] {
            assert_eq!(parse_response(200, body), MetricValue::NoData);
        }
        let cases: &[(u16, &[u8], &str)] = &[
            (500, b"boom", "answered HTTP 500"),
            (200, br#"{}"#, "list of targets"),
            (200, br#"[{"target":"a"}]"#, "no \"datapoints\""),
            (200, br#"[{"datapoints":[[1]]}]"#, "expected a datapoint"),
            (200, br#"[{"datapoints":[["x",1]]}]"#, "expected a number"),
        ];
        vendor_http::assert_errors(parse_response, cases);
    }

    #[test]
    fn queries_become_sorted_render_parameters_with_format_json() {
        let g = Graphite::new(
            "http://graphite:8080/base/",
            Some(("u".into(), "secret".into())),
        )
        .unwrap();
        let url = g.request_url("target=sumSeries(app.{{a,b}}.requests)\n  &from=-1min&format=raw");
        assert_eq!(url.path(), "/base/render");
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("format".into(), "json".into()),
                ("from".into(), "-1min".into()),
                ("target".into(), "sumSeries(app.{{a,b}}.requests) ".into()),
            ]
        );
        assert!(!format!("{g:?}").contains("secret"));
    }
}
