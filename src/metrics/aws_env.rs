//! What sluice's environment says about AWS, for CloudWatch templates (`cloudwatch.rs`): read
//! once at start and handed to every provider's client (`provider::ClientInput`).

use std::fmt;

/// The access key variable of the environment.
pub const ACCESS_KEY_VAR: &str = "AWS_ACCESS_KEY_ID";
/// The secret key variable of the environment.
pub const SECRET_KEY_VAR: &str = "AWS_SECRET_ACCESS_KEY";
/// The optional session token variable of the environment.
pub const SESSION_TOKEN_VAR: &str = "AWS_SESSION_TOKEN";
/// Replaces `https://monitoring.<region>.amazonaws.com` (sluice's own setting).
pub const ENDPOINT_VAR: &str = "SLUICE_CLOUDWATCH_ENDPOINT";

/// What the environment says about CloudWatch, read once at start. `Debug` never prints keys.
#[derive(Clone, Default)]
pub struct CloudwatchEnv {
    pub(crate) credentials: Option<(String, String, Option<String>)>,
    pub(crate) endpoint: Option<String>,
}

impl fmt::Debug for CloudwatchEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CloudwatchEnv(credentials: {}, endpoint: {:?})",
            if self.credentials.is_some() {
                "<set>"
            } else {
                "none"
            },
            self.endpoint
        )
    }
}

impl CloudwatchEnv {
    /// Reads the variables through `var` (empty values are unset).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> CloudwatchEnv {
        for name in [ACCESS_KEY_VAR, SECRET_KEY_VAR, SESSION_TOKEN_VAR] {
            if let Some(value) = var(name) {
                crate::redact::remember(&value);
            }
        }
        let credentials = match (var(ACCESS_KEY_VAR), var(SECRET_KEY_VAR)) {
            (Some(a), Some(s)) => Some((a, s, var(SESSION_TOKEN_VAR))),
            _ => None,
        };
        CloudwatchEnv {
            credentials,
            endpoint: var(ENDPOINT_VAR),
        }
    }
}
