//! The config repos of one `sluice run` when it reconciles several (`--repo` given more than
//! once, or `--repos FILE`): each repo's name, URL, branch and clone, and the environment each
//! one's runtime sees.
//!
//! A repo's credentials are its own: the variables that hold git, forge and Secret values
//! (`SLUICE_GIT_*`, `SLUICE_GITHUB_APP_*`, `SLUICE_GITHUB_API_URL`, `SLUICE_FORGE_TOKEN*`,
//! `SLUICE_SECRET_*`, `SLUICE_SECRETS_DIR`) are never read unscoped when there are several
//! repos; repo `team-a` reads them as `SLUICE_REPO_TEAM_A_<rest>` (`SLUICE_REPO_TEAM_A_GIT_TOKEN`
//! is its `SLUICE_GIT_TOKEN`). So a token configured for one repo can only ever be presented
//! to that repo's remote and forge, and a `secretRef` in one repo cannot name another's
//! Secret. Its Secret volumes are looked up under `<SLUICE_SECRETS_DIR>/<name>/` unless it has
//! a `SLUICE_REPO_<NAME>_SECRETS_DIR` of its own. Everything else (Prometheus access, the
//! clock, wave clusters) is the install's, shared.
//!
//! Only reads and checks; the daemon ([`crate::cli::run`]) opens and ticks each repo.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

/// The variables (and prefixes of variables) that belong to one config repo.
pub const SCOPED: &[&str] = &[
    "SLUICE_GIT_",
    "SLUICE_GITHUB_APP_",
    "SLUICE_GITHUB_API_URL",
    "SLUICE_FORGE_TOKEN",
    "SLUICE_SECRET_",
    crate::secrets::DIR_VAR,
];

/// One config repo of the install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// Its name: lower-case letters, digits and `-`; in status lines, metrics labels, shards
    /// and its credential variables.
    pub name: String,
    pub url: String,
    pub branch: String,
    /// Its persistent clone (`None`: a folder per URL under the user's cache dir).
    pub workdir: Option<PathBuf>,
}

impl Repo {
    /// The options to open this repo with: `shared`'s (signing key, git timeout) and its own
    /// URL, branch and clone.
    pub fn args(&self, shared: &crate::cli::repo::RepoArgs) -> crate::cli::repo::RepoArgs {
        crate::cli::repo::RepoArgs {
            repo: vec![self.url.clone()],
            branch: self.branch.clone(),
            workdir: self.workdir.clone(),
            ..shared.clone()
        }
    }
}

/// `--repos FILE` as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    repos: Vec<RawRepo>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepo {
    name: String,
    url: String,
    branch: Option<String>,
    workdir: Option<PathBuf>,
}

/// The repos of `--repo URL` given several times: each named after its URL's last path
/// segment (`.git` cut), on `branch`, cloned into `<workdir>/<name>` when `--workdir` is given.
pub fn from_urls(
    urls: &[String],
    branch: &str,
    workdir: Option<&Path>,
) -> anyhow::Result<Vec<Repo>> {
    let repos = urls
        .iter()
        .map(|url| {
            let name = name_of_url(url);
            Repo {
                workdir: workdir.map(|w| w.join(&name)),
                name,
                url: url.clone(),
                branch: branch.to_string(),
            }
        })
        .collect::<Vec<_>>();
    check(&repos, "--repo").map(|()| repos)
}

/// The repos of `--repos FILE` (`repos: [{name, url, branch?, workdir?}]`); `branch` and
/// `workdir` (`<workdir>/<name>`) default to `--branch` and `--workdir`.
pub fn from_file(path: &Path, branch: &str, workdir: Option<&Path>) -> anyhow::Result<Vec<Repo>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--repos {}: cannot read it", path.display()))?;
    let raw: RawFile = serde_saphyr::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--repos {}: {e}; expected `repos:` and a list of {{name, url, branch, workdir}}",
            path.display()
        )
    })?;
    let repos = raw
        .repos
        .into_iter()
        .map(|r| Repo {
            workdir: r.workdir.or_else(|| workdir.map(|w| w.join(&r.name))),
            branch: r.branch.unwrap_or_else(|| branch.to_string()),
            name: r.name,
            url: r.url,
        })
        .collect::<Vec<_>>();
    check(&repos, &format!("--repos {}", path.display())).map(|()| repos)
}

/// A name from the URL's last path segment: lower case, anything but letters and digits `-`.
fn name_of_url(url: &str) -> String {
    let last = url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or(url);
    let last = last.strip_suffix(".git").unwrap_or(last);
    last.chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string()
}

/// Names are valid and distinct (also as variable names), and no two repos share a clone.
fn check(repos: &[Repo], source: &str) -> anyhow::Result<()> {
    if repos.is_empty() {
        bail!("{source}: no repos listed");
    }
    let mut vars = BTreeSet::new();
    let mut workdirs = BTreeSet::new();
    for repo in repos {
        let valid = !repo.name.is_empty()
            && repo.name.len() <= 63
            && repo
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !repo.name.starts_with('-')
            && !repo.name.ends_with('-');
        if !valid {
            bail!(
                "{source}: repo {:?} ({}): expected a name of lower-case letters, digits and `-` \
                 (at most 63), found {:?}; name the repos in a --repos file",
                repo.name,
                crate::gitops::redact_url(&repo.url),
                repo.name
            );
        }
        if !vars.insert(var_name(&repo.name)) {
            bail!(
                "{source}: two repos are named {:?} (or differ only in `-`/`_`); give each its \
                 own name (with --repo several times the name is the URL's last segment: list \
                 them in a --repos file with names instead)",
                repo.name
            );
        }
        if let Some(w) = &repo.workdir {
            if !workdirs.insert(w.clone()) {
                bail!(
                    "{source}: repos share the work dir {}; give each its own",
                    w.display()
                );
            }
        }
    }
    Ok(())
}

/// `team-a` → `TEAM_A`: the name in its variables.
pub fn var_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' => c.to_ascii_uppercase(),
            'A'..='Z' | '0'..='9' => c,
            _ => '_',
        })
        .collect()
}

/// Whether `name` is one of the variables that belong to one repo ([`SCOPED`]).
fn scoped(name: &str) -> bool {
    SCOPED.iter().any(|p| name.starts_with(p))
}

/// The environment the runtime of repo `name` sees: `process` without any repo's credential
/// variables (unscoped, or any repo's `SLUICE_REPO_*`), plus this repo's own (`SLUICE_REPO_<NAME>_<rest>` as `SLUICE_<rest>`), and its
/// Secret folder `<SLUICE_SECRETS_DIR or the default>/<name>` unless it names its own.
pub fn repo_env(process: &BTreeMap<String, String>, name: &str) -> BTreeMap<String, String> {
    let prefix = format!("SLUICE_REPO_{}_", var_name(name));
    let mut env: BTreeMap<String, String> = process
        .iter()
        .filter(|(k, _)| !scoped(k) && !k.starts_with("SLUICE_REPO_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let secrets_base = process
        .get(crate::secrets::DIR_VAR)
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(crate::secrets::DEFAULT_DIR), PathBuf::from);
    env.insert(
        crate::secrets::DIR_VAR.to_string(),
        secrets_base.join(name).to_string_lossy().into_owned(),
    );
    for (k, v) in process {
        let Some(rest) = k.strip_prefix(&prefix) else {
            continue;
        };
        let unscoped = format!("SLUICE_{rest}");
        if scoped(&unscoped) {
            env.insert(unscoped, v.clone());
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_repo_sees_its_own_credentials_and_never_another_repos_or_the_unscoped_ones() {
        let process = env(&[
            ("SLUICE_GIT_TOKEN", "install-wide"),
            ("SLUICE_FORGE_TOKEN", "install-forge"),
            ("SLUICE_SECRET_PROD__PROM__TOKEN", "install-secret"),
            ("SLUICE_REPO_TEAM_A_GIT_TOKEN", "a-token"),
            ("SLUICE_REPO_TEAM_A_FORGE_TOKEN", "a-forge"),
            ("SLUICE_REPO_TEAM_A_SECRET_PROD__PROM__TOKEN", "a-secret"),
            ("SLUICE_REPO_TEAM_B_GIT_USERNAME", "b-user"),
            ("SLUICE_REPO_TEAM_A_POLL", "not a credential"),
            ("SLUICE_PROMETHEUS_ORIGINS", "http://prom:9090"),
            ("HOME", "/home/sluice"),
        ]);
        let a = repo_env(&process, "team-a");
        assert_eq!(
            a.get("SLUICE_GIT_TOKEN").map(String::as_str),
            Some("a-token")
        );
        assert_eq!(
            a.get("SLUICE_FORGE_TOKEN").map(String::as_str),
            Some("a-forge")
        );
        assert_eq!(
            a.get("SLUICE_SECRET_PROD__PROM__TOKEN").map(String::as_str),
            Some("a-secret")
        );
        assert_eq!(a.get("SLUICE_GIT_USERNAME"), None);
        assert_eq!(a.get("SLUICE_POLL"), None);
        assert_eq!(a.get("HOME").map(String::as_str), Some("/home/sluice"));
        assert_eq!(
            a.get("SLUICE_PROMETHEUS_ORIGINS").map(String::as_str),
            Some("http://prom:9090")
        );
        assert_eq!(
            a.get(crate::secrets::DIR_VAR).map(String::as_str),
            Some("/var/run/sluice/secrets/team-a")
        );
        let b = repo_env(&process, "team-b");
        assert_eq!(
            b.get("SLUICE_GIT_USERNAME").map(String::as_str),
            Some("b-user")
        );
        for value in [
            "a-token",
            "a-forge",
            "a-secret",
            "install-wide",
            "install-forge",
        ] {
            assert!(
                !b.values().any(|v| v == value),
                "repo team-b sees {value}: {b:?}"
            );
        }
    }

    #[test]
    fn urls_name_their_repos_and_names_must_differ() {
        let urls = vec![
            "https://git.example/org/Team-A.git".to_string(),
            "git@git.example:org/team-b".to_string(),
            "/srv/git/team-c/".to_string(),
        ];
        let repos = from_urls(&urls, "main", Some(Path::new("/var/lib/sluice"))).unwrap();
        let names: Vec<_> = repos.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["team-a", "team-b", "team-c"]);
        assert_eq!(
            repos[1].workdir.as_deref(),
            Some(Path::new("/var/lib/sluice/team-b"))
        );
        let same = vec![
            "https://one.example/x/config.git".to_string(),
            "https://two.example/y/config".to_string(),
        ];
        let err = from_urls(&same, "main", None).unwrap_err().to_string();
        assert!(err.contains("two repos are named \"config\""), "{err}");
        assert!(err.contains("--repos file"), "{err}");
    }

    #[test]
    fn a_repos_file_names_each_repo_and_defaults_its_branch_and_clone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("repos.yaml");
        std::fs::write(
            &path,
            "repos:\n  - name: shop\n    url: /srv/git/shop\n  - name: pay\n    url: /srv/git/p\n    branch: live\n    workdir: /w/pay\n",
        )
        .unwrap();
        let repos = from_file(&path, "main", Some(Path::new("/w/all"))).unwrap();
        assert_eq!(
            repos,
            vec![
                Repo {
                    name: "shop".into(),
                    url: "/srv/git/shop".into(),
                    branch: "main".into(),
                    workdir: Some(PathBuf::from("/w/all/shop")),
                },
                Repo {
                    name: "pay".into(),
                    url: "/srv/git/p".into(),
                    branch: "live".into(),
                    workdir: Some(PathBuf::from("/w/pay")),
                },
            ]
        );
        std::fs::write(&path, "repos:\n  - name: Shop\n    url: /x\n").unwrap();
        let err = from_file(&path, "main", None).unwrap_err().to_string();
        assert!(
            err.contains("expected a name of lower-case letters"),
            "{err}"
        );
        std::fs::write(&path, "repos:\n  - name: shop\n    uri: /x\n").unwrap();
        let err = from_file(&path, "main", None).unwrap_err().to_string();
        assert!(err.contains("uri"), "{err}");
    }
}
