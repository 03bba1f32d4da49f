//! Credentials for the config repo's remote, and keeping them out of everything we write.
//!
//! Secrets come from the environment (`SLUICE_GIT_TOKEN`, `SLUICE_GIT_USERNAME`,
//! `SLUICE_GIT_PASSWORD`, `SLUICE_GIT_SSH_KEY`, `SLUICE_GIT_SSH_KEY_PASSPHRASE`, each secret also
//! as `*_FILE` naming a file that holds it) or from userinfo in the remote URL, and live only in
//! memory. The ssh host keys to trust come the same way (`SLUICE_GIT_KNOWN_HOSTS` or `_FILE`,
//! checked by [`KnownHosts`]); without them libgit2 checks `~/.ssh/known_hosts`. URL hygiene (the URL that may be written to `.git/config`, redacting URLs and libgit2
//! messages) lives in [`crate::url_credentials`], shared with the forges. This module must not log,
//! print or persist a secret.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::path::PathBuf;

use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};

use super::app_token::GitApp;
use super::error::{Error, Result};
use super::known_hosts::KnownHosts;
pub use crate::url_credentials::{redact_text, redact_url};
use crate::url_credentials::{CleanUrl, UrlUserinfo};

/// The username GitHub, Gitea and GitLab accept together with an access token.
const TOKEN_USERNAME: &str = "x-access-token";
/// The username ssh remotes get when neither the URL nor the environment names one.
const DEFAULT_SSH_USER: &str = "git";
/// How often libgit2 may ask for credentials during one operation before we stop offering.
const MAX_CREDENTIAL_CALLS: u32 = 4;

/// A secret string: never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
struct Secret(String);

impl Secret {
    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct HttpAuth {
    username: String,
    password: Secret,
    /// The username itself is a secret when it came from a URL like `https://TOKEN@host/…`.
    username_is_secret: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SshKey {
    private_key: PathBuf,
    passphrase: Option<Secret>,
}

/// How sluice authenticates to the config repo's remote. `Debug` shows no secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    http: Option<HttpAuth>,
    ssh: Option<SshKey>,
    ssh_user: Option<String>,
    /// The only ssh host keys trusted when set; `None` leaves the check to libgit2.
    known_hosts: Option<KnownHosts>,
    /// https as a GitHub App: its installation token, bought when libgit2 asks.
    app: Option<GitApp>,
}

impl Credentials {
    /// No credentials: anonymous access (local paths, `git://`, public https).
    pub fn none() -> Self {
        Self::default()
    }

    /// An access token for https remotes, sent as the password of user `x-access-token`.
    pub fn token(token: impl Into<String>) -> Self {
        Self {
            http: Some(HttpAuth {
                username: TOKEN_USERNAME.to_string(),
                password: Secret(token.into()),
                username_is_secret: false,
            }),
            ..Self::default()
        }
    }

    /// Basic auth for https remotes: what the tests expect `from_lookup` and the URL fallback to
    /// build (sluice itself builds it from the environment or the URL).
    #[cfg(test)]
    pub fn basic(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            http: Some(HttpAuth {
                username: username.into(),
                password: Secret(password.into()),
                username_is_secret: false,
            }),
            ..Self::default()
        }
    }

    /// Reads the `SLUICE_GIT_*` and `SLUICE_GITHUB_APP_*` variables from the process
    /// environment; an App's tokens expire by the wall clock.
    pub fn from_env() -> Result<Self> {
        Self::from_env_on(std::sync::Arc::new(crate::clock::Clock::Wall))
    }

    /// [`Credentials::from_env`] with `clock` (the runtime's) telling when an App's token
    /// expires.
    pub fn from_env_on(clock: std::sync::Arc<crate::clock::Clock>) -> Result<Self> {
        Self::from_lookup_on(|name: &str| std::env::var(name).ok(), clock)
    }

    /// The `SLUICE_GIT_*` and `SLUICE_GITHUB_APP_*` variables read through `lookup` (one
    /// config repo's own, when `sluice run` has several), an App's tokens expiring by `clock`.
    pub fn from_lookup_on(
        lookup: impl Fn(&str) -> Option<String>,
        clock: std::sync::Arc<crate::clock::Clock>,
    ) -> Result<Self> {
        Self::from_lookup(&lookup)?.with_app(GitApp::from_lookup(&lookup, clock)?)
    }

    /// Authenticates https as the GitHub App `app` (`SLUICE_GITHUB_APP_*`, see
    /// [`super::app_token`]); refused beside a token or password for https.
    fn with_app(mut self, app: Option<GitApp>) -> Result<Self> {
        if app.is_some() && self.http.is_some() {
            return Err(cred_err(
                super::app_token::APP_ID_VAR,
                "is set beside SLUICE_GIT_TOKEN or SLUICE_GIT_PASSWORD; git over https \
                 authenticates one way, set only one",
            ));
        }
        self.app = app;
        Ok(self)
    }

    /// Reads the `SLUICE_GIT_*` variables through `lookup` (the environment, or a map in tests).
    ///
    /// * `SLUICE_GIT_TOKEN`: https token; user `SLUICE_GIT_USERNAME` or `x-access-token`.
    /// * `SLUICE_GIT_USERNAME` + `SLUICE_GIT_PASSWORD`: https basic auth.
    /// * `SLUICE_GIT_SSH_KEY`: path of an ssh private key; `SLUICE_GIT_SSH_KEY_PASSPHRASE`;
    ///   `SLUICE_GIT_USERNAME` then names the ssh user when the URL does not.
    /// * `SLUICE_GIT_KNOWN_HOSTS`: known_hosts lines (the `known_hosts` key of a Flux git
    ///   Secret), the only ssh host keys trusted; `SLUICE_GIT_KNOWN_HOSTS_FILE` names a file.
    ///
    /// Every secret may instead be given as `NAME_FILE`, the path of a file holding it (a mounted
    /// Kubernetes secret); trailing newlines in the file are ignored.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let token = read_var(&lookup, "SLUICE_GIT_TOKEN")?;
        let username = read_var(&lookup, "SLUICE_GIT_USERNAME")?;
        let password = read_var(&lookup, "SLUICE_GIT_PASSWORD")?;
        let ssh_key = read_path_var(&lookup, "SLUICE_GIT_SSH_KEY")?;
        let passphrase = read_var(&lookup, "SLUICE_GIT_SSH_KEY_PASSPHRASE")?;
        let known_hosts = read_known_hosts(&lookup)?;

        let http =
            match (token, password) {
                (Some(_), Some(_)) => return Err(cred_err(
                    "SLUICE_GIT_TOKEN",
                    "both SLUICE_GIT_TOKEN and SLUICE_GIT_PASSWORD are set; a token replaces the \
                     password, set only one",
                )),
                (Some(token), None) => Some(HttpAuth {
                    username: username
                        .clone()
                        .map_or_else(|| TOKEN_USERNAME.to_string(), |u| u.0),
                    password: token,
                    username_is_secret: false,
                }),
                (None, Some(password)) => match username.clone() {
                    Some(user) => Some(HttpAuth {
                        username: user.0,
                        password,
                        username_is_secret: false,
                    }),
                    None => {
                        return Err(cred_err(
                            "SLUICE_GIT_PASSWORD",
                            "SLUICE_GIT_USERNAME is not set; basic auth needs both",
                        ))
                    }
                },
                (None, None) => None,
            };

        let ssh = match (ssh_key, passphrase) {
            (Some(private_key), passphrase) => Some(SshKey {
                private_key,
                passphrase,
            }),
            (None, Some(_)) => {
                return Err(cred_err(
                    "SLUICE_GIT_SSH_KEY_PASSPHRASE",
                    "is set but SLUICE_GIT_SSH_KEY is not; set the key path too",
                ))
            }
            (None, None) => None,
        };

        if http.is_none() && ssh.is_none() && username.is_some() {
            return Err(cred_err(
                "SLUICE_GIT_USERNAME",
                "is set but there is nothing to authenticate with; set SLUICE_GIT_PASSWORD, \
                 SLUICE_GIT_TOKEN or SLUICE_GIT_SSH_KEY too",
            ));
        }
        let ssh_user = if ssh.is_some() {
            username.map(|u| u.0)
        } else {
            None
        };
        Ok(Self {
            http,
            ssh,
            ssh_user,
            known_hosts,
            app: None,
        })
    }

    /// True when no credential at all is configured (known hosts are no credential).
    pub fn is_empty(&self) -> bool {
        self.http.is_none() && self.ssh.is_none() && self.app.is_none()
    }

    /// A one-line description for logs that names kinds and files but no secret.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(http) = &self.http {
            if http.username_is_secret {
                parts.push("https credentials from the URL".to_string());
            } else {
                parts.push(format!("https as user {}", http.username));
            }
        }
        if let Some(app) = &self.app {
            parts.push(app.describe());
        }
        if let Some(ssh) = &self.ssh {
            parts.push(format!("ssh key {}", ssh.private_key.display()));
        }
        let mut text = if parts.is_empty() {
            "anonymous".to_string()
        } else {
            parts.join(", ")
        };
        if let Some(hosts) = &self.known_hosts {
            text.push_str(&format!(", ssh host keys from {}", hosts.source()));
        }
        text
    }

    /// Uses credentials found in the remote URL's userinfo when none were configured for https.
    pub(crate) fn with_url_fallback(mut self, userinfo: Option<UrlUserinfo>) -> Self {
        if let Some(info) = userinfo {
            if self.http.is_none() && self.app.is_none() {
                self.http = Some(match info.password {
                    Some(password) => HttpAuth {
                        username: info.user,
                        password: Secret(password),
                        username_is_secret: false,
                    },
                    // `https://TOKEN@host/repo`: the user part is the token.
                    None => HttpAuth {
                        username: info.user,
                        password: Secret(String::new()),
                        username_is_secret: true,
                    },
                });
            }
        }
        self
    }

    /// Replaces every secret we hold with `***` in `text` (belt and braces for messages that
    /// come from libgit2 or a server).
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut secrets: Vec<&str> = Vec::new();
        if let Some(http) = &self.http {
            secrets.push(http.password.expose());
            if http.username_is_secret {
                secrets.push(&http.username);
            }
        }
        if let Some(ssh) = &self.ssh {
            if let Some(p) = &ssh.passphrase {
                secrets.push(p.expose());
            }
        }
        let mut out = redact_text(text);
        if self.app.is_some() {
            // The App's tokens and key lines, remembered when read.
            out = crate::redact::text(&out);
        }
        for secret in secrets.into_iter().filter(|s| !s.is_empty()) {
            out = out.replace(secret, "***");
        }
        out
    }

    /// Installs a credentials callback that offers each configured credential once and records
    /// why it gave up in `session`, so the caller can report an authentication error. With
    /// known hosts, also a host key check for ssh servers (`ssh_port`: the remote URL's port,
    /// which libgit2 does not pass to the check); TLS certificates keep libgit2's own check.
    pub(crate) fn install<'a>(
        &'a self,
        callbacks: &mut RemoteCallbacks<'a>,
        session: &'a AuthSession,
        ssh_port: u16,
    ) {
        callbacks.credentials(move |url, username_from_url, allowed| {
            self.offer(session, url, username_from_url, allowed)
        });
        if let Some(known_hosts) = &self.known_hosts {
            callbacks.certificate_check(move |cert, host| {
                let Some(hostkey) = cert.as_hostkey() else {
                    return Ok(CertificateCheckStatus::CertificatePassthrough);
                };
                let verdict = match hostkey.hostkey() {
                    Some(blob) => known_hosts.check(host, ssh_port, blob),
                    None => Err(format!(
                        "libgit2 did not hand over the host key of `{host}`"
                    )),
                };
                match verdict {
                    Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
                    Err(why) => {
                        // libgit2 replaces the message of an error returned here with its own
                        // "invalid or unknown remote ssh hostkey": keep ours for the report.
                        *session.host_key_failure.borrow_mut() = Some(why.clone());
                        Err(git2::Error::new(
                            git2::ErrorCode::Certificate,
                            git2::ErrorClass::Ssh,
                            why,
                        ))
                    }
                }
            });
        }
    }

    fn offer(
        &self,
        session: &AuthSession,
        url: &str,
        username_from_url: Option<&str>,
        allowed: CredentialType,
    ) -> std::result::Result<Cred, git2::Error> {
        let calls = session.calls.get() + 1;
        session.calls.set(calls);
        let give_up = |why: String| {
            *session.failure.borrow_mut() = Some(why);
            Err(git2::Error::from_str("no more credentials to offer"))
        };
        if calls > MAX_CREDENTIAL_CALLS {
            return give_up("the remote rejected every credential offered".to_string());
        }
        let ssh_user = username_from_url
            .or(self.ssh_user.as_deref())
            .unwrap_or(DEFAULT_SSH_USER);

        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
            if let Some(http) = &self.http {
                if session.tried_userpass.replace(true) {
                    return give_up(if http.username_is_secret {
                        "the remote rejected the credentials given in the URL".to_string()
                    } else {
                        format!(
                            "the remote rejected the password or token for user `{}`",
                            http.username
                        )
                    });
                }
                return Cred::userpass_plaintext(&http.username, http.password.expose());
            }
            if let Some(app) = &self.app {
                if session.tried_userpass.replace(true) {
                    return give_up(
                        "the remote rejected the GitHub App's installation token".to_string(),
                    );
                }
                return match app.token(url) {
                    Ok(token) => Cred::userpass_plaintext(TOKEN_USERNAME, &token),
                    Err(why) => give_up(why),
                };
            }
        }
        if allowed.contains(CredentialType::SSH_KEY) {
            if let Some(key) = &self.ssh {
                if session.tried_key.replace(true) {
                    return give_up(format!(
                        "the remote rejected ssh key {} for user `{ssh_user}`",
                        key.private_key.display()
                    ));
                }
                return Cred::ssh_key(
                    ssh_user,
                    None,
                    &key.private_key,
                    key.passphrase.as_ref().map(Secret::expose),
                );
            }
            if std::env::var_os("SSH_AUTH_SOCK").is_some() && !session.tried_agent.replace(true) {
                return Cred::ssh_key_from_agent(ssh_user);
            }
        }
        if allowed.contains(CredentialType::USERNAME) && !session.tried_username.replace(true) {
            return Cred::username(ssh_user);
        }
        give_up(if self.is_empty() {
            "the remote asks for credentials and none are configured".to_string()
        } else {
            "the remote asks for a kind of credential that is not configured".to_string()
        })
    }
}

/// The state of one network operation's credential callback.
#[derive(Debug, Default)]
pub(crate) struct AuthSession {
    calls: Cell<u32>,
    tried_userpass: Cell<bool>,
    tried_key: Cell<bool>,
    tried_agent: Cell<bool>,
    tried_username: Cell<bool>,
    failure: RefCell<Option<String>>,
    host_key_failure: RefCell<Option<String>>,
}

impl AuthSession {
    /// Why the callback stopped offering credentials, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    /// Why the known hosts refused the server's host key, if they did.
    pub(crate) fn host_key_failure(&self) -> Option<String> {
        self.host_key_failure.borrow().clone()
    }
}

fn cred_err(variable: &str, reason: &str) -> Error {
    Error::Credentials {
        variable: variable.to_string(),
        reason: reason.to_string(),
    }
}

/// Reads `NAME` or `NAME_FILE` (never both); trailing newlines of a file are dropped.
fn read_var(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<Secret>> {
    let file_var = format!("{name}_FILE");
    match (lookup(name), lookup(&file_var)) {
        (Some(_), Some(_)) => Err(cred_err(
            name,
            &format!("both {name} and {file_var} are set; set only one"),
        )),
        (Some(value), None) if value.is_empty() => Err(cred_err(
            name,
            "is set but empty; unset it or give it a value",
        )),
        (Some(value), None) => Ok(Some(Secret(value))),
        (None, Some(path)) => {
            let content = std::fs::read_to_string(&path).map_err(|e| {
                cred_err(&file_var, &format!("cannot read secret file {path}: {e}"))
            })?;
            let value = content.trim_end_matches(['\r', '\n']);
            if value.is_empty() {
                return Err(cred_err(&file_var, &format!("secret file {path} is empty")));
            }
            Ok(Some(Secret(value.to_string())))
        }
        (None, None) => Ok(None),
    }
}

/// `SLUICE_GIT_KNOWN_HOSTS` (the lines) or `SLUICE_GIT_KNOWN_HOSTS_FILE` (a file holding them).
fn read_known_hosts(lookup: &impl Fn(&str) -> Option<String>) -> Result<Option<KnownHosts>> {
    const NAME: &str = "SLUICE_GIT_KNOWN_HOSTS";
    const FILE_VAR: &str = "SLUICE_GIT_KNOWN_HOSTS_FILE";
    let (variable, source, text) = match (lookup(NAME), lookup(FILE_VAR)) {
        (Some(_), Some(_)) => {
            return Err(cred_err(
                NAME,
                &format!("both {NAME} and {FILE_VAR} are set; set only one"),
            ))
        }
        (Some(text), None) => (NAME, NAME.to_string(), text),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                cred_err(
                    FILE_VAR,
                    &format!("cannot read known_hosts file {path}: {e}"),
                )
            })?;
            (FILE_VAR, format!("{FILE_VAR} ({path})"), text)
        }
        (None, None) => return Ok(None),
    };
    KnownHosts::parse(&text, &source)
        .map(Some)
        .map_err(|why| cred_err(variable, &format!("{source}: {why}")))
}

/// Reads a variable holding a file path (`NAME`, with `NAME_FILE` accepted as an alias) and
/// checks that the file exists.
fn read_path_var(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<PathBuf>> {
    let file_var = format!("{name}_FILE");
    let (variable, value) = match (lookup(name), lookup(&file_var)) {
        (Some(_), Some(_)) => {
            return Err(cred_err(
                name,
                &format!("both {name} and {file_var} are set; set only one"),
            ))
        }
        (Some(v), None) => (name.to_string(), v),
        (None, Some(v)) => (file_var, v),
        (None, None) => return Ok(None),
    };
    if value.is_empty() {
        return Err(cred_err(
            &variable,
            "is set but empty; set it to the path of the private key file",
        ));
    }
    let path = PathBuf::from(value);
    if let Err(e) = std::fs::metadata(&path) {
        return Err(cred_err(
            &variable,
            &format!("cannot read key file {}: {e}", path.display()),
        ));
    }
    Ok(Some(path))
}

/// [`crate::url_credentials::strip_userinfo`] with its error as this module's [`Error::InvalidUrl`].
pub(crate) fn strip_userinfo(url: &str) -> Result<CleanUrl> {
    crate::url_credentials::strip_userinfo(url).map_err(|e| Error::InvalidUrl {
        url: e.url,
        reason: e.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn token_defaults_to_x_access_token_user() {
        let creds = Credentials::from_lookup(lookup(&[("SLUICE_GIT_TOKEN", "tok123")])).unwrap();
        assert_eq!(creds, Credentials::token("tok123"));
        assert_eq!(creds.describe(), "https as user x-access-token");
        assert!(!format!("{creds:?}").contains("tok123"));

        let creds = Credentials::from_lookup(lookup(&[
            ("SLUICE_GIT_TOKEN", "tok123"),
            ("SLUICE_GIT_USERNAME", "oauth2"),
        ]))
        .unwrap();
        assert_eq!(creds, Credentials::basic("oauth2", "tok123"));
    }

    #[test]
    fn secrets_can_come_from_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "hunter2\n").unwrap();
        let creds = Credentials::from_lookup(lookup(&[
            ("SLUICE_GIT_USERNAME", "bot"),
            ("SLUICE_GIT_PASSWORD_FILE", file.to_str().unwrap()),
        ]))
        .unwrap();
        assert_eq!(creds, Credentials::basic("bot", "hunter2"));
        assert_eq!(creds.scrub("x hunter2 y"), "x *** y");
    }

    #[test]
    fn bad_credential_settings_are_errors_naming_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
            (
                vec![("SLUICE_GIT_TOKEN", "a"), ("SLUICE_GIT_TOKEN_FILE", "/x")],
                "SLUICE_GIT_TOKEN",
            ),
            (
                vec![("SLUICE_GIT_TOKEN", "a"), ("SLUICE_GIT_PASSWORD", "b")],
                "SLUICE_GIT_TOKEN",
            ),
            (vec![("SLUICE_GIT_PASSWORD", "b")], "SLUICE_GIT_PASSWORD"),
            (vec![("SLUICE_GIT_USERNAME", "u")], "SLUICE_GIT_USERNAME"),
            (vec![("SLUICE_GIT_TOKEN", "")], "SLUICE_GIT_TOKEN"),
            (
                vec![("SLUICE_GIT_TOKEN_FILE", missing.to_str().unwrap())],
                "SLUICE_GIT_TOKEN_FILE",
            ),
            (
                vec![("SLUICE_GIT_TOKEN_FILE", empty.to_str().unwrap())],
                "SLUICE_GIT_TOKEN_FILE",
            ),
            (
                vec![("SLUICE_GIT_SSH_KEY", missing.to_str().unwrap())],
                "SLUICE_GIT_SSH_KEY",
            ),
            (
                vec![("SLUICE_GIT_SSH_KEY_PASSPHRASE", "pp")],
                "SLUICE_GIT_SSH_KEY_PASSPHRASE",
            ),
            (
                vec![
                    ("SLUICE_GIT_KNOWN_HOSTS", "h ssh-ed25519 AAAA"),
                    ("SLUICE_GIT_KNOWN_HOSTS_FILE", "/x"),
                ],
                "SLUICE_GIT_KNOWN_HOSTS",
            ),
            (
                vec![("SLUICE_GIT_KNOWN_HOSTS", "github.com ssh-ed25519 !!")],
                "SLUICE_GIT_KNOWN_HOSTS",
            ),
            (
                vec![("SLUICE_GIT_KNOWN_HOSTS_FILE", missing.to_str().unwrap())],
                "SLUICE_GIT_KNOWN_HOSTS_FILE",
            ),
            (
                vec![("SLUICE_GIT_KNOWN_HOSTS_FILE", empty.to_str().unwrap())],
                "SLUICE_GIT_KNOWN_HOSTS_FILE",
            ),
        ];
        for (vars, want_var) in cases {
            let err = Credentials::from_lookup(lookup(&vars)).unwrap_err();
            match &err {
                Error::Credentials { variable, .. } => {
                    assert_eq!(variable, want_var, "{vars:?}: {err}")
                }
                other => panic!("{vars:?}: unexpected {other}"),
            }
            assert!(!err.is_transient());
        }
    }

    #[test]
    fn ssh_key_with_username() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("id_ed25519");
        std::fs::write(&key, "not really a key").unwrap();
        let creds = Credentials::from_lookup(lookup(&[
            ("SLUICE_GIT_SSH_KEY", key.to_str().unwrap()),
            ("SLUICE_GIT_SSH_KEY_PASSPHRASE", "pp"),
            ("SLUICE_GIT_USERNAME", "deploy"),
        ]))
        .unwrap();
        assert_eq!(creds.ssh_user.as_deref(), Some("deploy"));
        assert!(creds.http.is_none());
        assert_eq!(creds.scrub("pp"), "***");
        assert!(creds.describe().starts_with("ssh key "));
    }

    #[test]
    fn url_credentials_are_only_a_fallback() {
        let info = UrlUserinfo {
            user: "u".into(),
            password: Some("p".into()),
        };
        let creds = Credentials::token("t").with_url_fallback(Some(info.clone()));
        assert_eq!(creds, Credentials::token("t"));
        let creds = Credentials::none().with_url_fallback(Some(info));
        assert_eq!(creds, Credentials::basic("u", "p"));
        let creds = Credentials::none().with_url_fallback(Some(UrlUserinfo {
            user: "tok".into(),
            password: None,
        }));
        assert_eq!(creds.scrub("tok"), "***");
        assert!(!creds.describe().contains("tok"));
    }
}
