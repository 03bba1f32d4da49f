//! URL hygiene shared by git and the forges: split credentials out of a remote URL before it is
//! stored, and redact URLs (and URLs inside free text) before they are shown.
//!
//! [`strip_userinfo`] gives the URL that may be written to `.git/config` and the userinfo that
//! must stay in memory; [`redact_url`] and [`redact_text`] make URLs, libgit2 messages and HTTP
//! `Location` headers safe to log. This module must not log, print or persist a secret, and
//! redaction must never fail open: it works on any text, URL or not.

use std::fmt;
use std::path::Path;

use percent_encoding::percent_decode_str;
use url::Url;

/// Which transport a remote URL uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UrlKind {
    Local,
    File,
    Git,
    Http,
    Ssh,
}

/// Userinfo taken out of a remote URL, kept in memory only.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct UrlUserinfo {
    pub(crate) user: String,
    pub(crate) password: Option<String>,
}

impl fmt::Debug for UrlUserinfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UrlUserinfo(***)")
    }
}

/// A remote URL split into what may be stored and what must stay in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CleanUrl {
    /// Safe to write to `.git/config` and to log.
    pub(crate) url: String,
    pub(crate) kind: UrlKind,
    pub(crate) userinfo: Option<UrlUserinfo>,
}

/// A remote URL that cannot be used. `url` is already redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InvalidUrl {
    pub(crate) url: String,
    pub(crate) reason: String,
}

/// Splits credentials out of a remote URL. An ssh username is no secret and stays in the URL
/// (the server needs it); everything else in userinfo is moved out. Local paths are made
/// absolute because the clone outlives the current directory. The stored URL is the text as
/// given minus its credentials (not re-serialized), so an existing clone's `.git/config` still
/// matches it.
pub(crate) fn strip_userinfo(text: &str) -> Result<CleanUrl, InvalidUrl> {
    let invalid = |reason: &str| InvalidUrl {
        url: redact_url(text),
        reason: reason.to_string(),
    };
    if text.trim().is_empty() {
        return Err(invalid("is empty; give the config repo's clone URL"));
    }
    if text.chars().any(char::is_control) {
        return Err(invalid("contains control characters"));
    }
    let Some(scheme_end) = text.find("://") else {
        // scp syntax (`git@host:path`) is not a URL, and neither is a local path: no parser
        // for either, so both are recognised by hand.
        if is_scp_like(text) {
            return Ok(CleanUrl {
                url: text.to_string(),
                kind: UrlKind::Ssh,
                userinfo: None,
            });
        }
        let path = std::path::absolute(Path::new(text))
            .map_err(|e| invalid(&format!("cannot make the local path absolute: {e}")))?;
        let Some(path) = path.to_str() else {
            return Err(invalid("local path is not valid UTF-8"));
        };
        return Ok(CleanUrl {
            url: path.to_string(),
            kind: UrlKind::Local,
            userinfo: None,
        });
    };
    let (raw_userinfo, host_and_path) = split_authority_userinfo(&text[scheme_end + 3..]);
    // A URL parser ends the authority at the first `/`, so an unencoded `/` in a password would
    // silently become host and path; refuse it before parsing.
    if raw_userinfo.is_some_and(|u| u.contains('/')) {
        return Err(invalid(
            "credentials in the URL contain `/`; percent-encode them, or better pass them \
             through SLUICE_GIT_TOKEN or SLUICE_GIT_USERNAME/SLUICE_GIT_PASSWORD",
        ));
    }
    let url = Url::parse(text).map_err(|e| invalid(&format!("not a valid URL: {e}")))?;
    let kind = match url.scheme() {
        "http" | "https" => UrlKind::Http,
        "ssh" | "git+ssh" | "ssh+git" => UrlKind::Ssh,
        "git" => UrlKind::Git,
        "file" => UrlKind::File,
        scheme => {
            let reason = format!(
                "unsupported scheme `{scheme}`; use https://, ssh://, git://, file:// or a path"
            );
            return Err(invalid(&reason));
        }
    };
    if kind == UrlKind::Http && (url.query().is_some() || url.fragment().is_some()) {
        return Err(invalid(
            "query strings and fragments are not supported; pass tokens through SLUICE_GIT_TOKEN",
        ));
    }
    let Some(raw_userinfo) = raw_userinfo else {
        return Ok(CleanUrl {
            url: text.to_string(),
            kind,
            userinfo: None,
        });
    };
    let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
    let user = decode(url.username());
    let password = url.password().map(decode);
    let prefix = &text[..scheme_end + 3];
    if kind == UrlKind::Ssh {
        // Keep the ssh user in the stored URL; move only a password out.
        let kept = raw_userinfo
            .split_once(':')
            .map_or(raw_userinfo, |(u, _)| u);
        return Ok(CleanUrl {
            url: format!("{prefix}{kept}@{host_and_path}"),
            kind,
            userinfo: password.map(|p| UrlUserinfo {
                user,
                password: Some(p),
            }),
        });
    }
    Ok(CleanUrl {
        url: format!("{prefix}{host_and_path}"),
        kind,
        userinfo: Some(UrlUserinfo { user, password }),
    })
}

/// `user@host:path` (scp syntax) rather than a local path: a `:` before any `/`, and not a
/// Windows drive letter.
fn is_scp_like(url: &str) -> bool {
    match url.find(':') {
        Some(colon) => {
            let before = &url[..colon];
            !before.contains('/') && !before.is_empty() && before.len() != 1
        }
        None => false,
    }
}

/// Splits `userinfo@host/path` after the scheme. Takes the last `@` before any query or
/// fragment, so an unencoded `/` or `@` in a password cannot leak part of it into the host.
/// Hand-written because it must also cut text no URL parser accepts (error messages, typos).
fn split_authority_userinfo(rest: &str) -> (Option<&str>, &str) {
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    }
}

fn is_ssh_scheme(scheme: &str) -> bool {
    matches!(
        scheme.to_ascii_lowercase().as_str(),
        "ssh" | "git+ssh" | "ssh+git"
    )
}

/// A URL safe to show: userinfo becomes `***` (an ssh username without password is kept, it is
/// no secret) and a query string becomes `?***`. Text that is not a URL comes back unchanged.
/// An `@` anywhere before the query counts as the end of userinfo, since a password may hold an
/// unencoded `/`: `https://host/a@b` shows as `https://***@b` (too much hidden, never too little).
///
/// ```
/// use sluice::url_credentials::redact_url;
/// assert_eq!(redact_url("https://me:s3cret@git.example.com/r.git"), "https://***@git.example.com/r.git");
/// assert_eq!(redact_url("ssh://git@git.example.com/r.git"), "ssh://git@git.example.com/r.git");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        // scp syntax cannot carry a password, but `user:pw@host:path` typos can.
        if let Some(at) = url.find('@') {
            let (userinfo, rest) = (&url[..at], &url[at..]);
            if userinfo.contains(':') && !userinfo.contains('/') {
                return format!("***{rest}");
            }
        }
        return url.to_string();
    };
    let scheme = &url[..scheme_end];
    let rest = &url[scheme_end + 3..];
    let (userinfo, host_and_path) = split_authority_userinfo(rest);
    let authority = match userinfo {
        None => String::new(),
        Some(info) if is_ssh_scheme(scheme) && !info.contains(':') && !info.contains('/') => {
            format!("{info}@")
        }
        Some(info) if is_ssh_scheme(scheme) && !info.contains('/') => {
            let user = info.split_once(':').map_or(info, |(u, _)| u);
            format!("{user}:***@")
        }
        Some(_) => "***@".to_string(),
    };
    let tail = match host_and_path.find('?') {
        Some(q) => format!("{}?***", &host_and_path[..q]),
        None => host_and_path.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// Redacts every URL (`scheme://…`) found in free text, such as a libgit2 error message.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        let start = rest[..pos]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map_or(pos, |(i, _)| i);
        let end = rest[pos..]
            .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '<' | '>' | '`'))
            .map_or(rest.len(), |e| pos + e);
        if start == pos {
            // `://` with no scheme in front: not a URL, copy it and move on.
            out.push_str(&rest[..pos + 3]);
            rest = &rest[pos + 3..];
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_hides_userinfo_and_queries() {
        let cases = [
            ("https://me:s3cret@host/r.git", "https://***@host/r.git"),
            ("https://TOKEN@host/r.git", "https://***@host/r.git"),
            (
                "http://u:p%40ss@host:8080/r.git",
                "http://***@host:8080/r.git",
            ),
            ("https://host/r.git", "https://host/r.git"),
            ("https://host/r.git?token=abc", "https://host/r.git?***"),
            ("https://u:ab/cd@host/r.git", "https://***@host/r.git"),
            ("https://u:a@b@host/r.git", "https://***@host/r.git"),
            ("ssh://git@host/r.git", "ssh://git@host/r.git"),
            ("ssh://git:pw@host/r.git", "ssh://git:***@host/r.git"),
            ("git@host:org/r.git", "git@host:org/r.git"),
            ("u:pw@host:org/r.git", "***@host:org/r.git"),
            ("git://127.0.0.1:9418/r.git", "git://127.0.0.1:9418/r.git"),
            ("/srv/git/r.git", "/srv/git/r.git"),
            ("file:///srv/git/r.git", "file:///srv/git/r.git"),
            ("", ""),
            ("://", "://"),
            ("https://", "https://"),
            ("https://@", "https://***@"),
            // Forge API URLs and `Location` headers go through the same function.
            ("https://user:pw@host/api?x", "https://***@host/api?***"),
            // Ambiguous with a password holding `/`: hide too much rather than too little.
            ("https://host/a@b", "https://***@b"),
        ];
        for (input, want) in cases {
            assert_eq!(redact_url(input), want, "redact_url({input:?})");
        }
    }

    #[test]
    fn redact_text_finds_urls_in_messages() {
        assert_eq!(
            redact_text("failed to connect to 'https://u:pw@host/r.git': refused"),
            "failed to connect to 'https://***@host/r.git': refused"
        );
        assert_eq!(
            redact_text("a https://a:b@x/y and git+ssh://c:d@z/w end"),
            "a https://***@x/y and git+ssh://c:***@z/w end"
        );
        assert_eq!(redact_text("no url :// here"), "no url :// here");
        assert_eq!(
            redact_text("ünïcode https://t@h/ü"),
            "ünïcode https://***@h/ü"
        );
    }

    #[test]
    fn strip_userinfo_moves_credentials_out_of_the_stored_url() {
        let clean = strip_userinfo("http://user:p%40ss@127.0.0.1:8080/r.git").unwrap();
        assert_eq!(clean.url, "http://127.0.0.1:8080/r.git");
        assert_eq!(clean.kind, UrlKind::Http);
        let info = clean.userinfo.unwrap();
        assert_eq!(info.user, "user");
        assert_eq!(info.password.as_deref(), Some("p@ss"));

        let clean = strip_userinfo("ssh://git:pw@host/r.git").unwrap();
        assert_eq!(clean.url, "ssh://git@host/r.git");
        assert_eq!(clean.kind, UrlKind::Ssh);

        let clean = strip_userinfo("git@host:org/r.git").unwrap();
        assert_eq!(clean.url, "git@host:org/r.git");
        assert_eq!(clean.kind, UrlKind::Ssh);

        let clean = strip_userinfo("git://127.0.0.1/r.git").unwrap();
        assert_eq!(clean.kind, UrlKind::Git);
        assert!(clean.userinfo.is_none());

        let clean = strip_userinfo("relative/dir").unwrap();
        assert_eq!(clean.kind, UrlKind::Local);
        assert!(Path::new(&clean.url).is_absolute());
    }

    #[test]
    fn strip_userinfo_decodes_credentials_and_keeps_the_rest_as_written() {
        // A token as the user, `@` kept inside the password, percent-escapes decoded.
        let clean = strip_userinfo("https://TOK%2Ben@Git.Example.com/Org/r.git").unwrap();
        assert_eq!(clean.url, "https://Git.Example.com/Org/r.git");
        let info = clean.userinfo.unwrap();
        assert_eq!((info.user.as_str(), info.password), ("TOK+en", None));
        let clean = strip_userinfo("https://u:a@b@host/r.git").unwrap();
        assert_eq!(clean.url, "https://host/r.git");
        assert_eq!(clean.userinfo.unwrap().password.as_deref(), Some("a@b"));
        // Without credentials the URL is stored exactly as given (no trailing `/` added).
        assert_eq!(
            strip_userinfo("https://host").unwrap().url,
            "https://host".to_string()
        );
    }

    #[test]
    fn strip_userinfo_rejects_bad_urls_without_echoing_secrets() {
        for bad in [
            "",
            "ftp://host/r.git",
            "https://host/r.git?access_token=s3cret",
            "https://u:s3/cret@host/r.git",
            "https://host/r\n.git",
            "https://u:s3cret@host:port/r.git",
            "https://u:s3cret@ho st/r.git",
        ] {
            let err = strip_userinfo(bad).unwrap_err();
            let shown = format!("{}: {}", err.url, err.reason);
            assert!(!shown.contains("s3cret"), "{bad:?}: {shown}");
            assert!(!shown.contains("cret@"), "{bad:?}: {shown}");
        }
        let err = strip_userinfo("https://host:port/r.git").unwrap_err();
        assert_eq!(err.reason, "not a valid URL: invalid port number");
    }
}
