//! The registry: every forge, listed once in `forges!` below. From that list it builds
//! [`ForgeKind`] (what `forge.kind` selects), [`Forge`] (the provider built from the settings,
//! one variant per forge holding its client) and their dispatch, so nothing else matches on a
//! forge. An unknown `forge.kind` is an error listing the known ones.

use super::api::Api;
use super::{azure, bitbucket, forgejo, gitea, github, gitlab};
use super::{ForgeError, ForgeProvider, ForgeSettings, NewPull, PullRequest, Review};

/// Expands the forge list into [`ForgeKind`], [`Forge`] and one function per operation, so
/// adding a forge is one line and every operation dispatches to it.
macro_rules! forges {
    ($( $(#[doc = $doc:literal])* $variant:ident => $forge:ty, )+) => {
        /// The forge kinds sluice can open approval pull requests on.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ForgeKind {
            $( $(#[doc = $doc])* $variant, )+
        }

        /// The pull-request provider of the config repo, chosen once from the settings.
        #[derive(Debug)]
        pub enum Forge {
            $( $(#[doc = $doc])* $variant($forge), )+
        }

        impl ForgeKind {
            /// Every kind, in the order messages list them.
            pub const ALL: &'static [ForgeKind] = &[ $( ForgeKind::$variant, )+ ];

            /// What the forge says about itself ([`ForgeProvider::ABOUT`]).
            pub fn about(self) -> &'static About {
                match self {
                    $( ForgeKind::$variant => &<$forge as ForgeProvider>::ABOUT, )+
                }
            }

            /// Checks `forge.repository` as this forge names repositories.
            pub fn check_repository(self, text: &str) -> Result<(), String> {
                match self {
                    $( ForgeKind::$variant => <$forge as ForgeProvider>::check_repository(text), )+
                }
            }

            /// The web page of commit `sha` of `repository`, below the forge's web address.
            pub fn commit_page(self, web: &str, repository: &str, sha: &str) -> String {
                match self {
                    $( ForgeKind::$variant => {
                        <$forge as ForgeProvider>::commit_page(web, repository, sha)
                    } )+
                }
            }

            /// The web page listing the pull requests from `branch` of `repository`.
            pub fn pulls_page(self, web: &str, repository: &str, branch: &str) -> String {
                match self {
                    $( ForgeKind::$variant => {
                        <$forge as ForgeProvider>::pulls_page(web, repository, branch)
                    } )+
                }
            }
        }

        impl Forge {
            /// Builds the provider for `s` on the shared `api`.
            fn build(s: &ForgeSettings, api: Api) -> Result<Forge, ForgeError> {
                Ok(match s.kind {
                    $( ForgeKind::$variant => {
                        Forge::$variant(<$forge as ForgeProvider>::new(api, &s.repository)?)
                    } )+
                })
            }

            pub fn kind(&self) -> ForgeKind {
                match self {
                    $( Forge::$variant(_) => ForgeKind::$variant, )+
                }
            }

            #[cfg(test)]
            pub(super) fn api_mut(&mut self) -> &mut Api {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::api_mut(f), )+
                }
            }

            /// The open pull request from `head` into `base`, if there is one.
            pub async fn find_open(
                &self,
                head: &str,
                base: &str,
            ) -> Result<Option<PullRequest>, ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::find_open(f, head, base).await, )+
                }
            }

            pub(super) async fn open_new(&self, new: &NewPull<'_>) -> Result<PullRequest, ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::open(f, new).await, )+
                }
            }

            /// The pull request with this number.
            pub async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::get(f, number).await, )+
                }
            }

            /// The newest pull request (any state) whose source branch is `head` and, when
            /// `base` is given, whose target branch is `base` (as each API reports it: GitHub
            /// and Gitea `base.ref`, GitLab `target_branch`). Approvals ask with the branch
            /// sluice reconciles: a pull request from the approval branch into another base is
            /// not its approval.
            pub async fn latest_for_branch(
                &self,
                head: &str,
                base: Option<&str>,
            ) -> Result<Option<PullRequest>, ForgeError> {
                match self {
                    $( Forge::$variant(f) => {
                        ForgeProvider::latest_for_branch(f, head, base).await
                    } )+
                }
            }

            /// Adds a comment to the pull request's conversation.
            pub async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::comment(f, number, text).await, )+
                }
            }

            pub(super) async fn close_open(&self, number: u64) -> Result<(), ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::close(f, number).await, )+
                }
            }

            /// Every review of pull request `number` (all pages), oldest first.
            pub async fn reviews(&self, number: u64) -> Result<Vec<Review>, ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::reviews(f, number).await, )+
                }
            }

            /// Whether `login` is a member of `team` ("org/team-slug" on GitHub, Gitea,
            /// Forgejo; a group full path on GitLab; "project/team" on Azure DevOps).
            /// Bitbucket Cloud has no team API in 2.0: a Terminal error saying to list users
            /// instead.
            pub async fn is_member(&self, team: &str, login: &str) -> Result<bool, ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::is_member(f, team, login).await, )+
                }
            }

            /// Merges pull request `number` only if its head is still `head_sha` (every
            /// forge's "expected head" parameter; Bitbucket, which has none, is read first); a
            /// moved head is a Terminal error (409/405/422 as the forge answers).
            pub async fn merge(&self, number: u64, head_sha: &str) -> Result<(), ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::merge(f, number, head_sha).await, )+
                }
            }

            /// The forge login of the author of commit `sha`, `None` when the forge cannot
            /// link the commit to an account.
            pub async fn commit_author(&self, sha: &str) -> Result<Option<String>, ForgeError> {
                match self {
                    $( Forge::$variant(f) => ForgeProvider::commit_author(f, sha).await, )+
                }
            }
        }
    };
}

forges! {
    /// github.com or GitHub Enterprise Server (REST v3).
    GitHub => github::GitHub,
    /// gitlab.com or self-managed GitLab (API v4 merge requests).
    GitLab => gitlab::GitLab,
    /// Gitea (API v1).
    Gitea => gitea::Gitea,
    /// Forgejo or Codeberg (API v1, Gitea's calls).
    Forgejo => forgejo::Forgejo,
    /// Bitbucket Cloud (REST 2.0).
    Bitbucket => bitbucket::Bitbucket,
    /// Azure DevOps Services or Server (Git REST API 7.0).
    AzureDevOps => azure::AzureDevOps,
}

/// What one forge says about itself besides its calls ([`ForgeProvider::ABOUT`]): how
/// settings and messages name it, where its API is, how requests authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct About {
    /// The spelling in `forge.kind`.
    pub key: &'static str,
    /// The product name, for messages.
    pub title: &'static str,
    /// What the forge calls a pull request.
    pub pr_noun: &'static str,
    /// What goes before a pull request's number in messages: `#4`, `!4`.
    pub pr_sign: &'static str,
    /// The API base used when `forge.apiUrl` is absent; `None` when the forge has no public
    /// instance.
    pub default_api_url: Option<&'static str>,
    /// An API base, for the message when `forge.apiUrl` is required.
    pub api_url_sample: &'static str,
    /// The path of the API below the web address (`/api/v4`), cut off for web links.
    pub api_path: &'static str,
    /// A public instance whose API has its own host: (API host, web address).
    pub public_web: Option<(&'static str, &'static str)>,
    /// What `forge.apiUrl` looks like, for hints.
    pub api_url_example: &'static str,
    /// The token scopes sluice needs, for hints.
    pub token_scopes: &'static str,
    /// The `Accept` header of every request.
    pub accept: &'static str,
    /// Other headers of every request (lowercase names).
    pub headers: &'static [(&'static str, &'static str)],
    /// How the token goes into each request.
    pub auth: Auth,
}

/// How a forge takes the access token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// In the header named first (lowercase), after the prefix named second:
    /// `("authorization", "Bearer ")`, `("private-token", "")`.
    Header(&'static str, &'static str),
    /// HTTP basic in `Authorization`: a token holding `:` is the `user:password` pair as it is,
    /// any other token the password of an empty user (Azure DevOps personal access tokens).
    Basic,
    /// A token holding `:` is a `user:password` pair sent as HTTP basic (Bitbucket app
    /// passwords), any other token a bearer token (Bitbucket access tokens).
    BearerOrBasic,
}

impl Auth {
    /// The header name and value that carry `token`.
    pub fn header(self, token: &str) -> (&'static str, String) {
        let basic = |pair: &str| format!("Basic {}", crate::redact::base64(pair.as_bytes()));
        match self {
            Auth::Header(name, prefix) => (name, format!("{prefix}{token}")),
            Auth::Basic if token.contains(':') => ("authorization", basic(token)),
            Auth::Basic => ("authorization", basic(&format!(":{token}"))),
            Auth::BearerOrBasic if token.contains(':') => ("authorization", basic(token)),
            Auth::BearerOrBasic => ("authorization", format!("Bearer {token}")),
        }
    }
}

impl ForgeKind {
    /// The spelling in `forge.kind`.
    pub fn key(self) -> &'static str {
        self.about().key
    }

    /// The product name, for messages.
    pub fn title(self) -> &'static str {
        self.about().title
    }

    /// What the forge calls a pull request.
    pub fn pr_noun(self) -> &'static str {
        self.about().pr_noun
    }

    /// The API base used when `forge.apiUrl` is absent; Gitea and Azure DevOps have no public
    /// default.
    pub fn default_api_url(self) -> Option<&'static str> {
        self.about().default_api_url
    }

    /// Parses `forge.kind`; the error lists every kind.
    pub fn parse(text: &str) -> Result<ForgeKind, String> {
        ForgeKind::ALL
            .iter()
            .copied()
            .find(|k| k.key() == text)
            .ok_or_else(|| {
                let keys: Vec<&str> = ForgeKind::ALL.iter().map(|k| k.key()).collect();
                format!(
                    "unknown forge kind {text:?}; expected one of: {}",
                    keys.join(", ")
                )
            })
    }
}

impl std::fmt::Display for ForgeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.title())
    }
}

impl Forge {
    /// Builds the provider for `s` on the shared `client` (pooled connections and the token,
    /// built once; see `runtime::Runtime::forge_client`). Cheap: no connection is opened here.
    pub fn from_settings(
        s: &ForgeSettings,
        client: &super::ForgeClient,
    ) -> Result<Forge, ForgeError> {
        let api = Api::new(s, client)?;
        Forge::build(s, api)
    }
}
