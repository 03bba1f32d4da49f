//! Links from the dashboard to the forge's web pages (a commit, the pull requests of an
//! approval branch), derived from the repo's `forge` settings: the API URL without its API
//! path is the web URL. Without a forge, there are no links and the pages show short hashes.

use crate::manifest::settings::{ForgeKind, ForgeSettings};

/// The forge's web address and repository, when one is configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    forge: Option<(ForgeKind, String, String)>,
}

impl Links {
    pub fn new(forge: Option<&ForgeSettings>) -> Links {
        Links {
            forge: forge.and_then(|f| {
                web_base(f.kind, &f.api_url).map(|base| (f.kind, base, f.repository.clone()))
            }),
        }
    }

    /// The commit's page on the forge.
    pub fn commit(&self, sha: &str) -> Option<String> {
        let (kind, base, repo) = self.forge.as_ref()?;
        Some(kind.commit_page(base, repo, sha))
    }

    /// The forge's list of pull requests from `branch`.
    pub fn pull_requests(&self, branch: &str) -> Option<String> {
        let (kind, base, repo) = self.forge.as_ref()?;
        Some(kind.pulls_page(base, repo, branch))
    }
}

/// The web address of a forge from its API URL: `https://api.github.com` is github.com,
/// an Enterprise `/api/v3`, GitLab's `/api/v4` and Gitea's `/api/v1` are cut off. Only
/// http(s) addresses; anything else gives no links.
fn web_base(kind: ForgeKind, api_url: &str) -> Option<String> {
    let url = url::Url::parse(api_url).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    if let Some((api_host, web)) = kind.about().public_web {
        if url.host_str() == Some(api_host) {
            return Some(web.into());
        }
    }
    let text = api_url.trim_end_matches('/');
    // Any forge's API path: a forge served below another's path is still cut.
    let cut = ForgeKind::ALL
        .iter()
        .filter(|k| !k.about().api_path.is_empty())
        .find_map(|k| text.strip_suffix(k.about().api_path))
        .unwrap_or(text);
    Some(cut.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forge(kind: ForgeKind, api: &str) -> Links {
        Links::new(Some(&ForgeSettings {
            kind,
            api_url: api.into(),
            repository: "acme/config".into(),
        }))
    }

    #[test]
    fn forge_web_links_follow_the_api_url() {
        let gh = forge(ForgeKind::GitHub, "https://api.github.com");
        assert_eq!(
            gh.commit("abc").as_deref(),
            Some("https://github.com/acme/config/commit/abc")
        );
        let gl = forge(ForgeKind::GitLab, "https://gitlab.example.com/api/v4");
        assert_eq!(
            gl.commit("abc").as_deref(),
            Some("https://gitlab.example.com/acme/config/-/commit/abc")
        );
        assert_eq!(
            gl.pull_requests("sluice/prod/web/step-2-abc").as_deref(),
            Some("https://gitlab.example.com/acme/config/-/merge_requests?source_branch=sluice%2Fprod%2Fweb%2Fstep%2D2%2Dabc")
        );
        let bb = forge(ForgeKind::Bitbucket, "https://api.bitbucket.org/2.0");
        assert_eq!(
            bb.commit("abc").as_deref(),
            Some("https://bitbucket.org/acme/config/commits/abc")
        );
        // Azure DevOps: the settings name the collection, the web pages sit below it.
        let az = forge(ForgeKind::AzureDevOps, "https://tfs.corp/tfs/Main/");
        assert_eq!(
            az.commit("abc").as_deref(),
            Some("https://tfs.corp/tfs/Main/acme/_git/config/commit/abc")
        );
        let fj = forge(ForgeKind::Forgejo, "https://codeberg.org/api/v1");
        assert_eq!(
            fj.commit("abc").as_deref(),
            Some("https://codeberg.org/acme/config/commit/abc")
        );
        assert_eq!(Links::new(None).commit("abc"), None);
        assert_eq!(
            forge(ForgeKind::Gitea, "javascript:alert(1)").commit("a"),
            None
        );
    }
}
