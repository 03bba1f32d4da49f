//! Forgejo (and Codeberg, its public instance), REST API v1.
//!
//! Forgejo is a fork of Gitea and keeps Gitea's API v1 for everything sluice calls: the same
//! paths, payloads, answers, `Authorization: token <token>` header, `limit`/`page` paging with a
//! `Link` header and `409` for a duplicate pull request. So it is Gitea's provider
//! ([`GiteaLike`]) under its own name, with these differences:
//!
//! - a public instance: `forge.apiUrl` defaults to Codeberg's `https://codeberg.org/api/v1`;
//! - `GET /repos/{owner}/{repo}/pulls/{base}/{head}` is newer than some Forgejo releases still
//!   in use; where it answers 404, the open list is read instead (as for Gitea before 1.22);
//! - Forgejo's own version endpoint is `/api/forgejo/v1/version` (sluice does not call it).

use super::gitea::{Flavor, GiteaLike};
use super::{About, Auth};

/// A Forgejo repository's pull requests.
pub type Forgejo = GiteaLike<ForgejoApi>;

/// Forgejo's [`Flavor`] of Gitea's API.
#[derive(Debug)]
pub struct ForgejoApi;

impl Flavor for ForgejoApi {
    const ABOUT: About = About {
        key: "forgejo",
        title: "Forgejo",
        pr_noun: "pull request",
        pr_sign: "#",
        default_api_url: Some("https://codeberg.org/api/v1"),
        api_url_sample: "https://codeberg.org/api/v1",
        api_path: "/api/v1",
        public_web: None,
        api_url_example: "https://codeberg.org/api/v1 or https://HOST/api/v1",
        token_scopes: "write:repository and write:issue scopes",
        accept: "application/json",
        headers: &[],
        auth: Auth::Header("authorization", "token "),
    };
}
