//! Git over https as a GitHub App: the installation token (bought with the App's key by
//! [`crate::forge::github_app::AppTokens`], cached and bought again before it expires by the
//! runtime's clock) is the password of user `x-access-token` for every fetch and push.
//!
//! The App comes from the environment, since git needs credentials before the repo's settings
//! can be read: `SLUICE_GITHUB_APP_ID` (or `SLUICE_GITHUB_APP_CLIENT_ID`),
//! `SLUICE_GITHUB_APP_PRIVATE_KEY_FILE` (the PEM GitHub generated, a mounted Secret),
//! `SLUICE_GITHUB_APP_INSTALLATION_ID` (optional: otherwise found from the remote's
//! `owner/name`) and `SLUICE_GITHUB_API_URL` (GitHub Enterprise Server: `https://HOST/api/v3`).
//!
//! The key and the tokens live only in memory: the token is handed to libgit2 in the
//! credentials callback, never put in a URL, `.git/config` or a log (each token and every line
//! of the key are given to [`crate::redact`]).

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use reqwest::Url;

use super::error::{Error, Result};
use crate::clock::Clock;
use crate::forge::github_app::{AppKey, AppTokens};

pub const APP_ID_VAR: &str = "SLUICE_GITHUB_APP_ID";
pub const CLIENT_ID_VAR: &str = "SLUICE_GITHUB_APP_CLIENT_ID";
pub const INSTALLATION_VAR: &str = "SLUICE_GITHUB_APP_INSTALLATION_ID";
pub const KEY_FILE_VAR: &str = "SLUICE_GITHUB_APP_PRIVATE_KEY_FILE";
pub const API_URL_VAR: &str = "SLUICE_GITHUB_API_URL";

/// github.com's API.
const DEFAULT_API: &str = "https://api.github.com";

/// The GitHub App git authenticates as, and its tokens once the remote is known. Shared by
/// every clone of [`super::Credentials`]; compared by identity.
#[derive(Clone)]
pub(crate) struct GitApp(Arc<Inner>);

struct Inner {
    issuer: String,
    installation: Option<u64>,
    api: Url,
    key_file: PathBuf,
    /// The key's PEM, read once at start (checked then); each [`AppTokens`] parses its own.
    pem: String,
    clock: Arc<Clock>,
    /// The tokens for the remote's `owner/name`, made at the first need.
    tokens: Mutex<Option<(String, Arc<AppTokens>)>>,
    /// Runs the token requests; on a thread of its own, so a callback inside another
    /// runtime's `block_on` does not nest runtimes.
    tokio: tokio::runtime::Runtime,
}

impl fmt::Debug for GitApp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GitApp({}, key {})",
            self.0.issuer,
            self.0.key_file.display()
        )
    }
}

impl PartialEq for GitApp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for GitApp {}

fn app_err(variable: &str, reason: impl Into<String>) -> Error {
    Error::Credentials {
        variable: variable.to_string(),
        reason: reason.into(),
    }
}

impl GitApp {
    /// The App the `SLUICE_GITHUB_APP_*` variables give (through `lookup`), `None` when they
    /// give none; `clock` is the runtime's. Errors name the variable, never a secret.
    pub(crate) fn from_lookup(
        lookup: &impl Fn(&str) -> Option<String>,
        clock: Arc<Clock>,
    ) -> Result<Option<GitApp>> {
        let set = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let issuer = match (set(APP_ID_VAR), set(CLIENT_ID_VAR)) {
            (Some(_), Some(_)) => {
                return Err(app_err(
                    APP_ID_VAR,
                    format!("both {APP_ID_VAR} and {CLIENT_ID_VAR} are set; set only one"),
                ))
            }
            (Some(id), None) | (None, Some(id)) => id.trim().to_string(),
            (None, None) => {
                for other in [KEY_FILE_VAR, INSTALLATION_VAR] {
                    if set(other).is_some() {
                        return Err(app_err(
                            other,
                            format!("is set but {APP_ID_VAR} (or {CLIENT_ID_VAR}) is not; set the App's id too"),
                        ));
                    }
                }
                return Ok(None);
            }
        };
        let installation = match set(INSTALLATION_VAR) {
            None => None,
            Some(text) => Some(text.trim().parse::<u64>().map_err(|_| {
                app_err(
                    INSTALLATION_VAR,
                    format!("expected a number (the installation id), found {text:?}"),
                )
            })?),
        };
        let api_text = set(API_URL_VAR).unwrap_or_else(|| DEFAULT_API.to_string());
        let api = Url::parse(api_text.trim())
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.username().is_empty())
            .ok_or_else(|| {
                app_err(
                    API_URL_VAR,
                    format!("expected GitHub's API base (https://api.github.com, https://HOST/api/v3), found {api_text:?}"),
                )
            })?;
        let key_file = PathBuf::from(set(KEY_FILE_VAR).ok_or_else(|| {
            app_err(
                KEY_FILE_VAR,
                "is not set; give the path of the App's private key (PEM, a mounted Secret)",
            )
        })?);
        let pem = std::fs::read_to_string(&key_file).map_err(|e| {
            app_err(
                KEY_FILE_VAR,
                format!("cannot read {}: {e}", key_file.display()),
            )
        })?;
        for line in pem.lines() {
            crate::redact::remember(line);
        }
        AppKey::from_pem(&pem)
            .map_err(|e| app_err(KEY_FILE_VAR, format!("{}: {e}", key_file.display())))?;
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| app_err(APP_ID_VAR, format!("cannot start the token requests: {e}")))?;
        Ok(Some(GitApp(Arc::new(Inner {
            issuer,
            installation,
            api,
            key_file,
            pem,
            clock,
            tokens: Mutex::new(None),
            tokio,
        }))))
    }

    /// What the logs say of it: the App and the key's file, no secret.
    pub(crate) fn describe(&self) -> String {
        format!(
            "https as GitHub App {} (key {})",
            self.0.issuer,
            self.0.key_file.display()
        )
    }

    /// An installation token for the repository at `url` (`https://HOST/owner/name[.git]`),
    /// valid for a while yet by the runtime's clock. The error says why, without a secret.
    pub(crate) fn token(&self, url: &str) -> std::result::Result<String, String> {
        let tokens = self.tokens_for(url)?;
        let now = self.0.clock.now();
        let token = std::thread::scope(|scope| {
            scope
                .spawn(|| self.0.tokio.block_on(tokens.token(now)))
                .join()
        })
        .map_err(|_| "the GitHub App token request stopped unexpectedly".to_string())?
        .map_err(|e| e.to_string())?;
        Ok(token.expose().to_string())
    }

    /// The tokens for the remote at `url`, made at its first use.
    fn tokens_for(&self, url: &str) -> std::result::Result<Arc<AppTokens>, String> {
        let repository = repository_of(url).ok_or_else(|| {
            format!(
                "a GitHub App authenticates git for https://HOST/OWNER/NAME remotes; cannot \
                 read OWNER/NAME from {}",
                crate::url_credentials::redact_url(url)
            )
        })?;
        let mut kept = self.0.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((of, tokens)) = kept.as_ref() {
            if *of == repository {
                return Ok(Arc::clone(tokens));
            }
        }
        let key = AppKey::from_pem(&self.0.pem).map_err(|e| e.to_string())?;
        let http = crate::http_client::client(false)?;
        let tokens = Arc::new(AppTokens::new(
            http,
            self.0.api.clone(),
            self.0.issuer.clone(),
            repository.clone(),
            key,
            self.0.installation,
        ));
        *kept = Some((repository, Arc::clone(&tokens)));
        Ok(tokens)
    }
}

/// `owner/name` of `https://HOST/owner/name[.git]`.
fn repository_of(url: &str) -> Option<String> {
    let parsed = Url::parse(url).ok()?;
    let path = parsed.path().trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let (owner, name) = path.split_once('/')?;
    let ok = |s: &str| !s.is_empty() && !s.contains('/');
    (ok(owner) && ok(name)).then(|| format!("{owner}/{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn wall() -> Arc<Clock> {
        Arc::new(Clock::named(None).unwrap())
    }

    #[test]
    fn the_repository_is_the_remote_path() {
        assert_eq!(
            repository_of("https://github.com/acme/fleet.git").as_deref(),
            Some("acme/fleet")
        );
        assert_eq!(
            repository_of("https://ghe.example/acme/fleet/").as_deref(),
            Some("acme/fleet")
        );
        assert_eq!(repository_of("https://github.com/acme"), None);
        assert_eq!(repository_of("https://h/a/b/c.git"), None);
        assert_eq!(repository_of("/srv/git/fleet.git"), None);
    }

    #[test]
    fn no_app_variables_no_app_and_half_an_app_is_an_error() {
        assert!(GitApp::from_lookup(&lookup(&[]), wall()).unwrap().is_none());
        let err = GitApp::from_lookup(&lookup(&[(KEY_FILE_VAR, "/k.pem")]), wall()).unwrap_err();
        assert!(err.to_string().contains(APP_ID_VAR), "{err}");
        let both = [(APP_ID_VAR, "1"), (CLIENT_ID_VAR, "Iv1.x")];
        let err = GitApp::from_lookup(&lookup(&both), wall()).unwrap_err();
        assert!(err.to_string().contains("set only one"), "{err}");
        let no_key = [(APP_ID_VAR, "1")];
        let err = GitApp::from_lookup(&lookup(&no_key), wall()).unwrap_err();
        assert!(err.to_string().contains(KEY_FILE_VAR), "{err}");
        let bad_id = [
            (APP_ID_VAR, "1"),
            (INSTALLATION_VAR, "x"),
            (KEY_FILE_VAR, "/k"),
        ];
        let err = GitApp::from_lookup(&lookup(&bad_id), wall()).unwrap_err();
        assert!(err.to_string().contains(INSTALLATION_VAR), "{err}");
    }

    #[test]
    fn a_key_file_that_is_not_a_key_is_refused_without_quoting_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.pem");
        std::fs::write(&path, "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END RSA PRIVATE KEY-----\n").unwrap();
        let vars = [(APP_ID_VAR, "1"), (KEY_FILE_VAR, path.to_str().unwrap())];
        let err = GitApp::from_lookup(&lookup(&vars), wall()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(KEY_FILE_VAR), "{text}");
        assert!(!text.contains("c2VjcmV0LWtleS1ieXRlcw"), "{text}");
    }
}
