//! Amazon CloudWatch metric queries, as Flagger's `cloudwatch` provider makes them: the
//! template's query is a JSON array of `MetricDataQuery`, sent to `GetMetricData` in the
//! template's `spec.provider.region` over the last ten metric intervals with `MaxDatapoints`
//! 20. The value is Flagger's: the first value of the first result (CloudWatch lists values
//! newest first); no result or no value is no data.
//!
//! The request uses CloudWatch's AWS JSON 1.0 protocol (`POST /` to
//! `https://monitoring.<region>.amazonaws.com`, `X-Amz-Target:
//! GraniteServiceVersion20100801.GetMetricData`, `Content-Type: application/x-amz-json-1.0`),
//! signed with AWS Signature Version 4 by the `aws-sigv4` crate (service `monitoring`).
//!
//! Credentials: Flagger uses the AWS SDK's default chain and no `secretRef`; sluice reads the
//! static keys of that chain's first link from its environment at start (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, optional `AWS_SESSION_TOKEN`). `SLUICE_CLOUDWATCH_ENDPOINT`
//! replaces the regional endpoint (a VPC endpoint, or a local fake in tests); Flagger has no
//! such setting and ignores `spec.provider.address` for CloudWatch. This module judges nothing.

use std::fmt;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials as AwsCredentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use serde_json::{json, Value as Json};

use crate::core::observe::MetricValue;
pub use crate::metrics::aws_env::{
    CloudwatchEnv, ACCESS_KEY_VAR, ENDPOINT_VAR, SECRET_KEY_VAR, SESSION_TOKEN_VAR,
};
use crate::metrics::provider::{
    Answer, Ask, ClientInput, MetricBackend, ProviderFields, Series, SeriesAnswer, Vendor,
    VendorClient, Window,
};
use crate::metrics::vendor_http::{self, api_url, not_json};
use crate::yaml::reader::Reader;

/// The SigV4 service name of CloudWatch.
pub const SERVICE: &str = "monitoring";
/// The JSON 1.0 target of `GetMetricData`.
pub const TARGET: &str = "GraniteServiceVersion20100801.GetMetricData";
/// Flagger queries `StartTime = now - 10 × metric interval`.
const FROM_INTERVALS: u32 = 10;
/// Flagger's `MaxDatapoints`.
const MAX_DATAPOINTS: u32 = 20;
/// The judge's `MaxDatapoints`: as many as a series keeps (`judge_series::MAX_POINTS`, which
/// a test there holds equal; named here, not used, so the two modules need not use each other).
pub const RANGE_MAX_DATAPOINTS: u32 = 1000;

/// A CloudWatch client for one region. `Debug` never prints the keys.
#[derive(Clone)]
pub struct Cloudwatch {
    url: reqwest::Url,
    shown: String,
    region: String,
    credentials: AwsCredentials,
    start_delta: Duration,
    pub timeout: Duration,
}

impl fmt::Debug for Cloudwatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Cloudwatch({}, {}, <keys redacted>)",
            self.shown, self.region
        )
    }
}

impl Cloudwatch {
    /// A client for `region` with the environment's credentials and endpoint, whose queries
    /// cover ten `interval`s back from now.
    pub fn new(
        env: &CloudwatchEnv,
        region: &str,
        interval: Duration,
    ) -> Result<Cloudwatch, String> {
        let Some((access, secret, token)) = env.credentials.clone() else {
            return Err(format!(
                "no AWS credentials: set {ACCESS_KEY_VAR} and {SECRET_KEY_VAR} (and {SESSION_TOKEN_VAR} for temporary ones) in sluice's environment"
            ));
        };
        if region.is_empty()
            || !region
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(format!("invalid region {region:?}"));
        }
        let address = env
            .endpoint
            .clone()
            .unwrap_or_else(|| format!("https://monitoring.{region}.amazonaws.com"));
        let (url, shown) = api_url(&address, "/")?;
        Ok(Cloudwatch {
            url,
            shown,
            region: region.to_string(),
            credentials: AwsCredentials::new(access, secret, token, None, "environment"),
            start_delta: interval * FROM_INTERVALS,
            timeout: vendor_http::DEFAULT_TIMEOUT,
        })
    }

    /// The endpoint URL, for the endpoint pool.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// The `GetMetricData` body for `query` (the template's JSON array) ending at `end`.
    pub fn request_body(&self, query: &str, end: SystemTime) -> Result<Vec<u8>, String> {
        let queries = metric_data_queries(query)?;
        let secs = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()
        };
        let start = end
            .checked_sub(self.start_delta)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let body = json!({
            "MetricDataQueries": queries,
            "StartTime": secs(start),
            "EndTime": secs(end),
            "MaxDatapoints": MAX_DATAPOINTS,
        });
        Ok(body.to_string().into_bytes())
    }

    /// The SigV4 headers (`authorization`, `x-amz-date`, `x-amz-security-token`) for a
    /// `GetMetricData` POST of `body` at `now`.
    pub fn signature_headers(
        &self,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Vec<(String, String)>, String> {
        let identity = self.credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SERVICE)
            .time(now)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| format!("signing: {e}"))?
            .into();
        let host = match (self.url.host_str(), self.url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => return Err("no host".into()),
        };
        let headers = [
            ("host", host.as_str()),
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", TARGET),
        ];
        let signable = SignableRequest::new(
            "POST",
            self.url.as_str(),
            headers.into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| format!("signing: {e}"))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| format!("signing: {e}"))?
            .into_parts();
        Ok(instructions
            .headers()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// Runs `query` through `client`, its window ending at `end` (the runtime clock's now).
    pub async fn query(
        &self,
        client: &reqwest::Client,
        query: &str,
        end: SystemTime,
    ) -> MetricValue {
        tracing::debug!(cloudwatch = %self.shown, region = %self.region, %query, "cloudwatch query");
        let sent = self.send(client, query, end).await;
        vendor_http::value("CloudWatch", &self.shown, sent, parse_response)
    }

    /// The `GetMetricData` body of the statistical judge's range query: `query` over the
    /// judge's window `start..end` (Unix seconds), oldest value first, every value of it.
    pub fn range_body(&self, query: &str, (start, end): (u64, u64)) -> Result<Vec<u8>, String> {
        let body = json!({
            "MetricDataQueries": metric_data_queries(query)?,
            "StartTime": start,
            "EndTime": end,
            "ScanBy": "TimestampAscending",
            "MaxDatapoints": RANGE_MAX_DATAPOINTS,
        });
        Ok(body.to_string().into_bytes())
    }

    /// The statistical judge's series: every value of `query`'s first result over `window`
    /// (Unix seconds), oldest first.
    pub async fn series(
        &self,
        client: &reqwest::Client,
        query: &str,
        window: (u64, u64),
    ) -> Result<Vec<f64>, String> {
        tracing::debug!(cloudwatch = %self.shown, region = %self.region, %query, "cloudwatch range query");
        let sent = match self.range_body(query, window) {
            Ok(body) => self.post(client, body).await,
            Err(e) => Err(e),
        };
        vendor_http::series("CloudWatch", &self.shown, sent, series_of)
    }

    async fn send(
        &self,
        client: &reqwest::Client,
        query: &str,
        end: SystemTime,
    ) -> Result<(u16, Vec<u8>), String> {
        let body = self.request_body(query, end)?;
        self.post(client, body).await
    }

    /// POSTs the signed `GetMetricData` `body`. The signature's date is the system's time,
    /// whatever the runtime's clock says: AWS refuses a request signed minutes off its own.
    async fn post(
        &self,
        client: &reqwest::Client,
        body: Vec<u8>,
    ) -> Result<(u16, Vec<u8>), String> {
        let signed = self.signature_headers(&body, SystemTime::now())?;
        let mut request = client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/x-amz-json-1.0")
            .header("X-Amz-Target", TARGET);
        for (name, value) in signed {
            request = request.header(name, value);
        }
        vendor_http::post(request.body(body), self.timeout).await
    }
}

/// The names of `MetricDataQuery` and its members, as AWS spells them. Flagger decodes the
/// template with Go's `encoding/json`, which matches keys ignoring case; the JSON protocol
/// does not, so keys are respelled here.
const MEMBERS: &[&str] = &[
    "Id",
    "MetricStat",
    "Expression",
    "Label",
    "ReturnData",
    "Period",
    "AccountId",
    "Metric",
    "Stat",
    "Unit",
    "Namespace",
    "MetricName",
    "Dimensions",
    "Name",
    "Value",
];

fn respell(v: Json) -> Json {
    match v {
        Json::Object(map) => Json::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let k = MEMBERS
                        .iter()
                        .find(|m| m.eq_ignore_ascii_case(&k))
                        .map_or(k, |m| (*m).to_string());
                    (k, respell(v))
                })
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.into_iter().map(respell).collect()),
        other => other,
    }
}

/// The template's query, checked to be a JSON array of objects (Flagger's `[]*MetricDataQuery`).
pub fn metric_data_queries(query: &str) -> Result<Json, String> {
    let json: Json = serde_json::from_str(query).map_err(|e| {
        format!("the query is not JSON ({e}); expected an array of MetricDataQuery")
    })?;
    match &json {
        Json::Array(items) if items.iter().all(Json::is_object) => Ok(respell(json)),
        _ => Err("expected a JSON array of MetricDataQuery objects".into()),
    }
}

/// Every value of the first result of a `GetMetricData` answer, in the order sent (the range
/// query asks for oldest first); no result is an empty series.
pub fn series_of(json: &Json) -> Result<Vec<f64>, String> {
    let Some(first) = json
        .get("MetricDataResults")
        .and_then(Json::as_array)
        .and_then(|r| r.first())
    else {
        return Ok(Vec::new());
    };
    match first.get("Values") {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(Json::Array(values)) => values.iter().map(vendor_http::series_value).collect(),
        Some(other) => Err(format!(
            "expected a list of Values, found {}",
            vendor_http::kind_of(other)
        )),
    }
}

/// Reads a `GetMetricData` answer into a value. Pure; never panics.
pub fn parse_response(status: u16, body: &[u8]) -> MetricValue {
    // AWS's error answers ({"__type": "...#Code", "message": "..."}) are the server's text:
    // logged by `vendor_http::value`, never part of the value's error.
    if let Some(e) = vendor_http::status_error(status) {
        return MetricValue::Error(e);
    }
    let json: Json = match serde_json::from_slice(body) {
        Ok(j) => j,
        Err(e) => return MetricValue::Error(not_json(&e)),
    };
    let Some(results) = json.get("MetricDataResults").and_then(Json::as_array) else {
        return MetricValue::NoData;
    };
    let Some(first) = results.first() else {
        return MetricValue::NoData;
    };
    let Some(value) = first
        .get("Values")
        .and_then(Json::as_array)
        .and_then(|v| v.first())
    else {
        return MetricValue::NoData;
    };
    match value.as_f64() {
        Some(v) => MetricValue::Value(v),
        None => MetricValue::Error(format!(
            "expected a number, found {}",
            vendor_http::kind_of(value)
        )),
    }
}

/// A cloudwatch template's `spec.provider`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `region`, not empty.
    pub region: String,
}

impl MetricBackend for Cloudwatch {
    type Config = Config;
    const TYPE: &'static str = "cloudwatch";
    const READS: &'static [&'static str] = &["region"];
    /// None: the keys come from sluice's environment ([`ACCESS_KEY_VAR`], [`SECRET_KEY_VAR`]).
    const SECRET_KEYS: &'static [&'static str] = &[];
    const SERIES: Series = Series::Range { rank: 3 };
    const EXAMPLE: &'static str = "    type: cloudwatch\n    region: eu-west-1\n";
    const ANSWER: (&'static str, f64) = (
        r#"{"MetricDataResults":[{"Id":"a","Values":[0.5,9],"StatusCode":"Complete"}],"Messages":[]}"#,
        0.5,
    );

    /// The region it names is required and not empty; `address` and `secretRef` are refused,
    /// as Flagger's provider ignores them.
    fn read(fields: &ProviderFields, r: &mut Reader) -> Option<Config> {
        fields.refuse(r, "address", &format!("Flagger's cloudwatch provider ignores it and queries the region's endpoint; sluice does too (the environment variable {ENDPOINT_VAR} replaces it)"));
        fields.refuse(r, "secretRef", &format!("Flagger's cloudwatch provider ignores it and uses the AWS credentials of its environment; sluice reads {ACCESS_KEY_VAR} and {SECRET_KEY_VAR} from its environment"));
        match &fields.region {
            Some(region) if !region.is_empty() => Some(Config {
                region: region.clone(),
            }),
            _ => {
                match fields.node.get("region") {
                    None => r.error(
                        fields.node.line,
                        "spec.provider.region",
                        "required field is missing: provider type \"cloudwatch\" queries the region it names",
                    ),
                    Some(n) => r.error(
                        n.line,
                        "spec.provider.region",
                        "expected an AWS region such as us-east-1, found an empty string",
                    ),
                }
                None
            }
        }
    }

    fn client(config: &Config, input: &ClientInput) -> Option<Result<Vendor, String>> {
        Some(
            Cloudwatch::new(input.aws, &config.region, input.interval)
                .map(|c| Vendor::new(c.url().clone(), false, c))
                .map_err(|e| input.at(e)),
        )
    }

    fn parse(status: u16, body: &[u8]) -> MetricValue {
        parse_response(status, body)
    }
}

impl VendorClient for Cloudwatch {
    fn instant<'a>(&'a self, ask: Ask<'a>, now: Duration) -> Answer<'a, MetricValue> {
        Box::pin(self.query(ask.http, ask.query, std::time::UNIX_EPOCH + now))
    }

    fn range<'a>(&'a self, ask: Ask<'a>, window: Window) -> SeriesAnswer<'a> {
        Box::pin(self.series(ask.http, ask.query, window.span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> CloudwatchEnv {
        CloudwatchEnv::from_lookup(|k| match k {
            ACCESS_KEY_VAR => Some("AKIDEXAMPLE".into()),
            SECRET_KEY_VAR => Some("secret".into()),
            _ => None,
        })
    }

    #[test]
    fn the_judge_asks_for_the_window_oldest_first_and_reads_every_value() {
        let c = Cloudwatch::new(&env(), "us-east-1", Duration::from_secs(60)).unwrap();
        let body: Json = serde_json::from_slice(
            &c.range_body(r#"[{"id":"a","expression":"x"}]"#, (100, 400))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(body["StartTime"], 100);
        assert_eq!(body["EndTime"], 400);
        assert_eq!(body["ScanBy"], "TimestampAscending");
        assert_eq!(body["MetricDataQueries"][0]["Id"], "a");
        let json: Json = serde_json::from_str(
            r#"{"MetricDataResults":[{"Id":"a","Values":[1.5,2,2.5]},{"Id":"b","Values":[9]}]}"#,
        )
        .unwrap();
        assert_eq!(series_of(&json), Ok(vec![1.5, 2.0, 2.5]));
        let none: Json = serde_json::from_str(r#"{"MetricDataResults":[]}"#).unwrap();
        assert_eq!(series_of(&none), Ok(Vec::new()));
    }

    #[test]
    fn the_first_value_of_the_first_result_is_the_value() {
        let body = br#"{"MetricDataResults":[{"Id":"a","Label":"l","Timestamps":[1700000060,1700000000],"Values":[0.5,9],"StatusCode":"Complete"},{"Id":"b","Values":[7]}],"Messages":[]}"#;
        assert_eq!(parse_response(200, body), MetricValue::Value(0.5));
        for empty in [
            &br#"{"MetricDataResults":[]}"#[..],
            br#"{"MetricDataResults":[{"Id":"a","Values":[]}]}"#,
            br#"{}"#,
        ] {
            assert_eq!(parse_response(200, empty), MetricValue::NoData);
        }
        match parse_response(
            400,
            br#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad Id"}"#,
        ) {
            MetricValue::Error(e) => assert_eq!(e, "answered HTTP 400"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_response(200, b"<xml/>"),
            MetricValue::Error(_)
        ));
    }

    #[test]
    fn the_body_has_flaggers_window_and_aws_spelled_keys() {
        let c = Cloudwatch::new(&env(), "us-west-2", Duration::from_secs(60)).unwrap();
        assert_eq!(
            c.url().as_str(),
            "https://monitoring.us-west-2.amazonaws.com/"
        );
        let end = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let body = c
            .request_body(
                r#"[{"id":"e1","expression":"m1/m2","returnData":true}]"#,
                end,
            )
            .unwrap();
        let j: Json = serde_json::from_slice(&body).unwrap();
        assert_eq!(j["EndTime"], 1_700_000_000);
        assert_eq!(j["StartTime"], 1_700_000_000 - 600);
        assert_eq!(j["MaxDatapoints"], 20);
        assert_eq!(j["MetricDataQueries"][0]["Id"], "e1");
        assert_eq!(j["MetricDataQueries"][0]["ReturnData"], true);
        assert!(c.request_body("{}", end).is_err());
        assert!(c.request_body("nope", end).is_err());
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn missing_credentials_or_a_bad_region_are_errors() {
        let e = Cloudwatch::new(
            &CloudwatchEnv::default(),
            "us-east-1",
            Duration::from_secs(60),
        )
        .unwrap_err();
        assert!(e.contains("AWS_ACCESS_KEY_ID"), "{e}");
        assert!(Cloudwatch::new(&env(), "us-east-1/x", Duration::from_secs(60)).is_err());
    }

    #[test]
    fn the_signature_covers_the_target_and_body() {
        let c = Cloudwatch::new(&env(), "us-east-1", Duration::from_secs(60)).unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let headers = c.signature_headers(b"{}", now).unwrap();
        let auth = &headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .unwrap()
            .1;
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-east-1/monitoring/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature="),
            "{auth}"
        );
        let other = c.signature_headers(b"{ }", now).unwrap();
        assert_ne!(headers, other, "the body is signed");
    }
}
