//! `--dashboard-auth-file`: who may read the dashboard. The file's first non-empty line is
//! either `user:password` (HTTP basic authentication, which browsers ask for) or a bearer
//! token (for scripts: `Authorization: Bearer <token>`). Compared in constant time. Without
//! the flag the dashboard is open to whoever reaches the listener (loopback by default; put
//! it behind the cluster's auth proxy otherwise).

use std::path::Path;

use subtle::ConstantTimeEq;

/// The credentials the dashboard accepts.
#[derive(Clone)]
pub enum Auth {
    Basic { user: String, password: String },
    Bearer(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself, not even in a debug log.
        match self {
            Auth::Basic { user, .. } => write!(f, "Basic({user}, <redacted>)"),
            Auth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

impl Auth {
    /// Reads the auth file; errors name the file (never its content).
    pub fn read(path: &Path) -> Result<Auth, String> {
        let file = path.display();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{file}: cannot read: {e}"))?;
        Auth::parse(&text).map_err(|e| format!("{file}:1: dashboard auth: {e}"))
    }

    pub fn parse(text: &str) -> Result<Auth, String> {
        let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
            return Err("expected `user:password` or a bearer token, found an empty file".into());
        };
        if line.chars().any(char::is_whitespace) {
            return Err(
                "expected `user:password` or a bearer token, found whitespace inside".into(),
            );
        }
        match line.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() => Ok(Auth::Basic {
                user: user.to_string(),
                password: password.to_string(),
            }),
            Some(_) => Err("expected `user:password` with both parts non-empty".into()),
            None if line.len() < 16 => {
                Err("expected a bearer token of at least 16 characters".into())
            }
            None => Ok(Auth::Bearer(line.to_string())),
        }
    }

    /// Whether an `Authorization` header value carries these credentials.
    pub fn admits(&self, header: Option<&str>) -> bool {
        let Some(header) = header else {
            return false;
        };
        let (scheme, value) = header.trim().split_once(' ').unwrap_or((header, ""));
        let value = value.trim();
        match self {
            Auth::Bearer(token) => {
                scheme.eq_ignore_ascii_case("bearer") && equal(value.as_bytes(), token.as_bytes())
            }
            Auth::Basic { user, password } => {
                // Browsers send standard base64 with padding, which has one spelling.
                let expected = crate::redact::base64(format!("{user}:{password}").as_bytes());
                scheme.eq_ignore_ascii_case("basic") && equal(value.as_bytes(), expected.as_bytes())
            }
        }
    }

    /// The `WWW-Authenticate` challenge a 401 carries.
    pub fn challenge(&self) -> &'static str {
        match self {
            Auth::Basic { .. } => "Basic realm=\"sluice dashboard\", charset=\"UTF-8\"",
            Auth::Bearer(_) => "Bearer realm=\"sluice dashboard\"",
        }
    }
}

fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_and_bearer_credentials_are_checked() {
        let basic = Auth::parse("admin:s3cret\n").unwrap();
        // "admin:s3cret" in base64.
        assert!(basic.admits(Some("Basic YWRtaW46czNjcmV0")));
        assert!(!basic.admits(Some("Basic YWRtaW46czNjcmVU")));
        assert!(!basic.admits(None));
        let bearer = Auth::parse("0123456789abcdef0123").unwrap();
        assert!(bearer.admits(Some("Bearer 0123456789abcdef0123")));
        assert!(!bearer.admits(Some("Bearer 0123456789abcdef012")));
        assert!(!bearer.admits(Some("Basic 0123456789abcdef0123")));
        assert!(Auth::parse("").is_err());
        assert!(Auth::parse("short").is_err());
        assert!(Auth::parse(":x").is_err());
        assert!(!format!("{basic:?}").contains("s3cret"));
    }
}
