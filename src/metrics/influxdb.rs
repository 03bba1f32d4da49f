//! InfluxDB metric queries, as Flagger's `influxdb` provider makes them through the InfluxDB 2
//! Go client: the template's query is Flux, sent as `POST <address>/api/v2/query?org=<org>`
//! with the JSON body `{"query": …, "type": "flux", "dialect": {annotations datatype, group,
//! default; header; ","}}` and, when the template has a `secretRef`, `Authorization: Token
//! <token>` (Secret keys `token`, `org`). The answer is annotated CSV; the value is `_value`
//! of the first record, which must be a `double`. An empty value is no data. Flagger reads an
//! answer without records as 0; here it is no data, so an empty bucket never passes a `max`
//! threshold. This module judges nothing.

use std::fmt;
use std::time::Duration;

use crate::core::observe::MetricValue;
use crate::metrics::provider::{
    Answer, Ask, ClientInput, MetricBackend, ProviderFields, Series, SeriesAnswer, Vendor,
    VendorClient, Window,
};
use crate::metrics::vendor_http::{self, api_url, status_error};
use crate::yaml::reader::Reader;

/// The Secret key of the API token.
pub const TOKEN: &str = "token";
/// The Secret key of the organisation.
pub const ORG: &str = "org";
/// The Go client's query timeout in Flagger.
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// An InfluxDB 2 Flux query client. `Debug` never prints the token.
#[derive(Clone)]
pub struct Influxdb {
    url: reqwest::Url,
    shown: String,
    token: Option<String>,
    pub timeout: Duration,
}

impl fmt::Debug for Influxdb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Influxdb({}, <token redacted>)", self.shown)
    }
}

impl Influxdb {
    /// A client for `address`; `credentials` are the token and organisation, if any.
    pub fn new(address: &str, credentials: Option<(String, String)>) -> Result<Influxdb, String> {
        let (mut url, shown) = api_url(address, "/api/v2/query")?;
        let (token, org) = match credentials {
            Some((token, org)) => (Some(token), org),
            None => (None, String::new()),
        };
        url.query_pairs_mut().append_pair("org", &org);
        Ok(Influxdb {
            url,
            shown,
            token,
            timeout: TIMEOUT,
        })
    }

    /// The query URL, for the endpoint pool.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Runs the Flux `query` through `client`.
    pub async fn query(&self, client: &reqwest::Client, query: &str) -> MetricValue {
        tracing::debug!(influxdb = %self.shown, %query, "influxdb query");
        let body = serde_json::json!({
            "query": query,
            "type": "flux",
            "dialect": {
                "annotations": ["datatype", "group", "default"],
                "delimiter": ",",
                "header": true,
            },
        });
        let mut request = client.post(self.url.clone()).json(&body);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Token {token}"));
        }
        let sent = vendor_http::post(request, self.timeout).await;
        vendor_http::value("InfluxDB", &self.shown, sent, parse_response)
    }
}

/// Reads an annotated-CSV answer into a value. Pure; never panics.
pub fn parse_response(status: u16, body: &[u8]) -> MetricValue {
    if let Some(e) = status_error(status) {
        return MetricValue::Error(e);
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return MetricValue::Error("expected UTF-8 annotated CSV".into());
    };
    let mut datatypes: Option<Vec<String>> = None;
    let mut defaults: Vec<String> = Vec::new();
    let mut names: Option<Vec<String>> = None;
    for row in csv_rows(text) {
        if row.len() <= 1 {
            // A blank line separates tables: annotations follow.
            names = None;
            continue;
        }
        match row[0].as_str() {
            "#datatype" => {
                datatypes = Some(row[1..].to_vec());
                names = None;
                continue;
            }
            "#default" => {
                defaults = row[1..].to_vec();
                continue;
            }
            first if first.starts_with('#') => continue,
            _ => {}
        }
        let Some(types) = &datatypes else {
            return MetricValue::Error(
                "expected annotated CSV (a #datatype row first), found other text".into(),
            );
        };
        let Some(header) = &names else {
            // The header row after the annotations (`,result,table,…` or `,error,reference`).
            names = Some(row[1..].to_vec());
            continue;
        };
        let cells = &row[1..];
        if header.first().map(String::as_str) == Some("error") {
            return MetricValue::Error("answered with a query error".into());
        }
        let Some(i) = header.iter().position(|n| n == "_value") else {
            return MetricValue::Error("the answer has no _value column".into());
        };
        let cell = cells
            .get(i)
            .filter(|c| !c.is_empty())
            .or_else(|| defaults.get(i + 1).filter(|c| !c.is_empty()));
        let Some(cell) = cell else {
            return MetricValue::NoData;
        };
        return match types.get(i).map(String::as_str) {
            Some("double") => match cell.parse::<f64>() {
                Ok(v) => MetricValue::Value(v),
                Err(_) => MetricValue::Error("expected a double, found other text".into()),
            },
            Some(_) => {
                MetricValue::Error("expected _value of type double, found another type".into())
            }
            None => MetricValue::Error("expected _value of type double, found no type".into()),
        };
    }
    MetricValue::NoData
}

/// The rows of a CSV text (RFC 4180: quoted fields may hold commas, quotes and line breaks).
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// An influxdb template's `spec.provider`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `address` (no default).
    pub address: String,
    /// The Secret holding [`TOKEN`] and [`ORG`], if any.
    pub secret_ref: Option<String>,
}

impl MetricBackend for Influxdb {
    type Config = Config;
    const TYPE: &'static str = "influxdb";
    const READS: &'static [&'static str] = &[];
    const SECRET_KEYS: &'static [&'static str] = &[TOKEN, ORG];
    const SERIES: Series = Series::OneValue;
    const EXAMPLE: &'static str = "    type: influxdb\n    address: http://influxdb:8086\n";
    const ANSWER: (&'static str, f64) = (
        "#datatype,string,long,dateTime:RFC3339,double,string\n#group,false,false,false,false,true\n#default,_result,,,,\n,result,table,_time,_value,_field\n,,0,2020-02-18T10:34:08Z,1.4,f\n",
        1.4,
    );

    fn read(fields: &ProviderFields, r: &mut Reader) -> Option<Config> {
        Some(Config {
            address: fields.needs_address(r)?,
            secret_ref: fields.secret_ref.clone(),
        })
    }

    fn client(config: &Config, input: &ClientInput) -> Option<Result<Vendor, String>> {
        Some((|| {
            let credentials = match &config.secret_ref {
                Some(name) => Some((input.key(name, TOKEN)?, input.key(name, ORG)?)),
                None => None,
            };
            let client = Influxdb::new(&config.address, credentials)?;
            Ok(Vendor::new(client.url().clone(), false, client))
        })())
    }

    fn parse(status: u16, body: &[u8]) -> MetricValue {
        parse_response(status, body)
    }
}

impl VendorClient for Influxdb {
    fn instant<'a>(&'a self, ask: Ask<'a>, _now: Duration) -> Answer<'a, MetricValue> {
        Box::pin(self.query(ask.http, ask.query))
    }

    /// A Flux query answers one table per query: no series for the judge.
    fn range<'a>(&'a self, _ask: Ask<'a>, _window: Window) -> SeriesAnswer<'a> {
        let refusal = crate::metrics::judge_series::refusal(Self::TYPE);
        Box::pin(std::future::ready(Err(refusal)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer in Flagger's `influxdb_test.go` (InfluxDB's documented annotated CSV).
    const TABLE: &str = "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,string,string,string,string
#group,false,false,true,true,false,false,true,true,true,true
#default,_result,,,,,,,,,
,result,table,_start,_stop,_time,_value,_field,_measurement,a,b
,,0,2020-02-17T22:19:49.747562847Z,2020-02-18T22:19:49.747562847Z,2020-02-18T10:34:08.135814545Z,1.4,f,test,1,adsfasdf
,,0,2020-02-17T22:19:49.747562847Z,2020-02-18T22:19:49.747562847Z,2020-02-18T22:08:44.850214724Z,6.6,f,test,1,adsfasdf
";

    #[test]
    fn the_first_records_value_is_the_value() {
        assert_eq!(
            parse_response(200, TABLE.as_bytes()),
            MetricValue::Value(1.4)
        );
        let crlf = TABLE.replace('\n', "\r\n");
        assert_eq!(
            parse_response(200, crlf.as_bytes()),
            MetricValue::Value(1.4)
        );
    }

    #[test]
    fn empty_answers_are_no_data_and_bad_ones_errors() {
        assert_eq!(parse_response(200, b""), MetricValue::NoData);
        assert_eq!(parse_response(200, b"\r\n"), MetricValue::NoData);
        let empty_value = "#datatype,string,long,double\n#group,false,false,false\n#default,_result,,\n,result,table,_value\n,,0,\n";
        assert_eq!(
            parse_response(200, empty_value.as_bytes()),
            MetricValue::NoData
        );
        let cases: &[(u16, &str, &str)] = &[
            (401, r#"{"code":"unauthorized","message":"unauthorized access"}"#, "HTTP 401"),
            (200, "#datatype,string,string\n#group,true,true\n#default,,\n,error,reference\n,\"failed to parse: \"\"x\"\"\",897\n", "answered with a query error"),
            (200, "#datatype,string,long,long\n#group,false,false,false\n#default,_result,,\n,result,table,_value\n,,0,42\n", "expected _value of type double, found another type"),
            (200, "#datatype,string,long,double\n#group,false,false,false\n#default,_result,,\n,result,table,other\n,,0,1\n", "no _value column"),
            (200, ",result,table,_value\n,,0,1\n", "expected annotated CSV"),
        ];
        for (status, body, expected) in cases {
            match parse_response(*status, body.as_bytes()) {
                MetricValue::Error(e) => {
                    assert!(e.contains(expected), "{e}");
                    assert!(!e.contains("unauthorized") && !e.contains("parse"), "{e}");
                }
                other => panic!("{expected}: {other:?}"),
            }
        }
    }
}
