//! Repo settings: `.sluice/config.yaml`, committed by humans, defaults for the whole repo.
//!
//! Command-line flags override these. Later adapters (forge, sync, signing) add their blocks
//! here; every block is validated with the same file:line:field errors as canaries.

use crate::core::approval::ApprovalPolicy;
use crate::manifest::model::{RepoPath, SyncTarget};
use crate::manifest::sync::read_sync_target;
use crate::route::{parse_provider, Provider};
use crate::yaml::error::SpecError;
use crate::yaml::node::{parse_documents, Node};
use crate::yaml::reader::{index, join, name_at, namespace_at, Reader};

/// Where the settings live, relative to the repo root.
pub const SETTINGS_PATH: &str = ".sluice/config.yaml";

/// Default `prometheus.concurrency`: Prometheus's own default `--query.max-concurrency`, so
/// sluice does not queue more queries at the server than it runs at once.
pub const DEFAULT_PROMETHEUS_CONCURRENCY: usize = 20;
/// Largest `prometheus.concurrency` accepted.
pub const MAX_PROMETHEUS_CONCURRENCY: i64 = 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Route provider for Flagger canaries without `spec.provider`.
    pub provider: Option<Provider>,
    /// The provider as written (`osm`, `linkerd`, ...): it also selects built-in metric queries.
    pub provider_name: Option<String>,
    /// Output folder pattern for canaries without `spec.output`; `{namespace}` and `{name}`
    /// are replaced.
    pub output: String,
    pub author_name: String,
    pub author_email: String,
    /// Default Prometheus address for metric queries.
    pub prometheus: Option<String>,
    /// Queries in flight at once to one Prometheus endpoint, across all canaries
    /// (`prometheus.concurrency`); a tick opens about that many connections to it.
    pub prometheus_concurrency: usize,
    /// Without a sync target, a step's clock starts this long after its commit.
    pub settle: std::time::Duration,
    /// Slack, Teams, Discord or generic webhook notifications.
    pub notifications: Vec<Target>,
    /// Where approval pull requests are opened; `None` when the repo has no `forge` block.
    pub forge: Option<ForgeSettings>,
    /// What closing an approval pull request without merging does (`forge.onClose`).
    pub on_close: OnClose,
    /// Forge logins whose merge of an approval pull request approves (`forge.approvers`;
    /// compared ignoring ASCII case, as forges treat logins). Empty: anyone the forge lets
    /// merge. Logins only: a `org/team` entry is an error, teams are not resolved.
    pub approvers: Vec<String>,
    /// `approval: {required, from, forbidSelfApproval, merge}`: the repo's default approval
    /// policy (a canary's or wave's own replaces it); see [`Settings::approval_policy`].
    pub approval: Option<ApprovalPolicy>,
    /// Default GitOps object (Flux Kustomization or Argo CD Application) that applies the
    /// outputs; a native canary's `spec.sync` overrides it, Flagger canaries always use it.
    pub sync: Option<SyncTarget>,
    /// One commit per canary decision (the default), or one per tick for repos with so many
    /// canaries in one folder that per-canary commits get slow.
    pub commits: CommitMode,
    /// What a tick does when a file sluice owns was changed by someone else (`drift:`).
    pub drift: DriftPolicy,
    /// `signing: {required: true, allowedSigners: path}`: every commit must be signed by a
    /// key of the allowed-signers file (`sluice audit` checks it).
    pub signing: Option<SigningSettings>,
    /// `dashboard: {url: ...}`: where sluice's dashboard is served, so pull requests,
    /// notifications, alerts and `sluice status` link to a canary's page.
    pub dashboard_url: Option<String>,
    /// `adoption: {hold: true}`: a repo moving from Flagger. Each canary gets its first render
    /// (the primary from the source, weights 100/0, the canary at 0 replicas) and nothing
    /// more: no rollout starts until the key is removed (`sluice adopt release`).
    pub adoption_hold: bool,
    /// `maxConcurrentCanaries`, and `namespaces.<ns>.maxConcurrentCanaries`: how many
    /// canaries may progress at once; the others wait to start (`core::concurrency`).
    pub concurrency: Limits,
}

/// The limits of `maxConcurrentCanaries`, as the core weighs them.
pub use crate::core::concurrency::Limits;

/// What a tick does about drift (`drift:`); the core weighs it (see `crate::drift`).
pub use crate::core::observe::DriftPolicy;

/// The `signing` block of the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningSettings {
    pub required: bool,
    /// An allowed-signers file (`ssh-keygen` format) in the repo.
    pub allowed_signers: RepoPath,
}

/// How a tick's decisions become commits (`commits:` in the settings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CommitMode {
    /// `perCanary`: each decision is its own commit; all are pushed together.
    #[default]
    PerCanary,
    /// `perTick`: the tick's decisions share one commit whose trailers hold one group per
    /// canary (each group starts at `Sluice-Canary`).
    PerTick,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            provider: None,
            provider_name: None,
            output: "clusters/{namespace}/{name}".into(),
            author_name: "sluice".into(),
            author_email: "sluice@localhost".into(),
            prometheus: None,
            prometheus_concurrency: DEFAULT_PROMETHEUS_CONCURRENCY,
            settle: std::time::Duration::ZERO,
            notifications: Vec::new(),
            forge: None,
            on_close: OnClose::Rollback,
            approvers: Vec::new(),
            approval: None,
            sync: None,
            commits: CommitMode::PerCanary,
            signing: None,
            drift: DriftPolicy::Hold,
            dashboard_url: None,
            adoption_hold: false,
            concurrency: Limits::default(),
        }
    }
}

impl Settings {
    /// The policy of canaries that set none: `approval`, else `forge.approvers` (one of
    /// those logins approves by merging), else `None` (anyone who can merge approves).
    pub fn approval_policy(&self) -> Option<ApprovalPolicy> {
        match (&self.approval, self.approvers.is_empty()) {
            (Some(policy), _) => Some(policy.clone()),
            (None, false) => Some(ApprovalPolicy::merged_by_one_of(&self.approvers)),
            (None, true) => None,
        }
    }

    /// The canary's page on the dashboard, when `dashboard.url` is set.
    pub fn dashboard_page(&self, namespace: &str, name: &str) -> Option<String> {
        let base = self.dashboard_url.as_deref()?.trim_end_matches('/');
        Some(format!("{base}/canaries/{namespace}/{name}"))
    }

    /// The output folder for one canary, from the pattern.
    pub fn output_for(&self, namespace: &str, name: &str) -> Result<RepoPath, String> {
        RepoPath::parse(
            &self
                .output
                .replace("{namespace}", namespace)
                .replace("{name}", name),
        )
    }
}

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "provider",
    "output",
    "author",
    "prometheus",
    "settle",
    "notifications",
    "forge",
    "sync",
    "commits",
    "signing",
    "drift",
    "dashboard",
    // Written by `sluice adopt` (`adoption: {hold: true}`); the adoption hold reads it.
    "adoption",
    "maxConcurrentCanaries",
    "namespaces",
    "approval",
];

/// The largest `maxConcurrentCanaries` accepted (a limit above the fleet is no limit).
const MAX_CONCURRENT: i64 = 100_000;

/// Parses the settings file; `file` names it in errors.
pub fn parse_settings(file: &str, text: &str) -> Result<Settings, Vec<SpecError>> {
    let mut r = Reader::new(file);
    let docs = match parse_documents(text) {
        Ok(d) => d,
        Err(e) => {
            r.error(e.line, "", format!("YAML syntax error: {}", e.message));
            return Err(r.errors);
        }
    };
    let mut settings = Settings::default();
    let Some(doc) = docs.first() else {
        return Ok(settings);
    };
    if docs.len() > 1 {
        r.error(
            docs[1].root.line,
            "",
            "expected one YAML document, found several",
        );
    }
    let root = &doc.root;
    if root.value == crate::yaml::node::Value::Null {
        return Ok(settings);
    }
    if r.map(root, "", KEYS).is_some() {
        read_blocks(&mut r, root, &mut settings);
    }
    if r.errors.is_empty() {
        Ok(settings)
    } else {
        Err(r.errors)
    }
}

/// Reads each top-level key of the document into `settings`; a bad value is reported and
/// leaves the default.
fn read_blocks(r: &mut Reader, root: &Node, settings: &mut Settings) {
    expect_const(r, root, "apiVersion", "sluice.dev/v1alpha1");
    expect_const(r, root, "kind", "Config");
    if let Some(n) = root.get("provider") {
        read_provider(r, n, settings);
    }
    if let Some(n) = root.get("output") {
        if let Some(text) = r.string(n, "output") {
            match settings_output(&text) {
                Ok(()) => settings.output = text,
                Err(e) => r.error(n.line, "output", e),
            }
        }
    }
    if let Some(n) = root.get("author") {
        read_author(r, n, settings);
    }
    if let Some(n) = root.get("prometheus") {
        read_prometheus(r, n, settings);
    }
    if let Some(n) = root.get("notifications") {
        settings.notifications = read_notifications(r, n);
    }
    if let Some(n) = root.get("settle") {
        if let Some(d) = r.duration(n, "settle") {
            settings.settle = d;
        }
    }
    if let Some(n) = root.get("forge") {
        read_forge_block(r, n, settings);
    }
    if let Some(n) = root.get("sync") {
        settings.sync = read_sync_target(r, n, "sync");
    }
    if let Some(n) = root.get("commits") {
        let choices = [
            ("perCanary", CommitMode::PerCanary),
            ("perTick", CommitMode::PerTick),
        ];
        if let Some(commits) = r.one_of(n, "commits", &choices) {
            settings.commits = commits;
        }
    }
    if let Some(n) = root.get("signing") {
        settings.signing = read_signing(r, n);
    }
    if let Some(n) = root.get("drift") {
        let choices = [
            ("hold", DriftPolicy::Hold),
            ("restore", DriftPolicy::Restore),
        ];
        if let Some(drift) = r.one_of(n, "drift", &choices) {
            settings.drift = drift;
        }
    }
    if let Some(n) = root.get("dashboard") {
        settings.dashboard_url = read_dashboard(r, n);
    }
    if let Some(n) = root.get("adoption") {
        settings.adoption_hold = read_adoption(r, n);
    }
    settings.concurrency = read_concurrency(r, root);
    if let Some(n) = root.get("approval") {
        settings.approval = crate::manifest::approval_policy::read(r, n, "approval");
        if !settings.approvers.is_empty() {
            r.error(
                n.line,
                "approval",
                "set beside forge.approvers: list those logins in approval.from and remove forge.approvers",
            );
        }
    }
}

/// `maxConcurrentCanaries` and `namespaces.<ns>.maxConcurrentCanaries`.
fn read_concurrency(r: &mut Reader, root: &Node) -> Limits {
    Limits {
        repo: root
            .get("maxConcurrentCanaries")
            .and_then(|n| read_limit(r, n, "maxConcurrentCanaries")),
        namespaces: root
            .get("namespaces")
            .map(|n| read_namespaces(r, n))
            .unwrap_or_default(),
    }
}

/// A `maxConcurrentCanaries`: a whole number, at least 1 (0 would start nothing ever).
fn read_limit(r: &mut Reader, n: &Node, path: &str) -> Option<u32> {
    r.int(n, path, 1, MAX_CONCURRENT)
        .and_then(|v| u32::try_from(v).ok())
}

/// `namespaces: {<ns>: {maxConcurrentCanaries: N}}`: the per-namespace limits.
fn read_namespaces(r: &mut Reader, n: &Node) -> std::collections::BTreeMap<String, u32> {
    let mut out = std::collections::BTreeMap::new();
    let crate::yaml::node::Value::Map(entries) = &n.value else {
        r.error(
            n.line,
            "namespaces",
            format!(
                "expected a mapping of namespace to its settings, found {}",
                n.kind()
            ),
        );
        return out;
    };
    for (key, value) in entries {
        let path = join("namespaces", &key.text);
        if r.map(value, &path, &["maxConcurrentCanaries"]).is_none() {
            continue;
        }
        if let Err(e) = crate::core::model::Name::parse(&key.text) {
            r.error(key.line, &path, format!("expected a namespace name: {e}"));
            continue;
        }
        let field = join(&path, "maxConcurrentCanaries");
        if let Some(limit) = value
            .get("maxConcurrentCanaries")
            .and_then(|v| read_limit(r, v, &field))
        {
            out.insert(key.text.clone(), limit);
        }
    }
    out
}

/// `adoption: {hold: true|false}`: whether canaries hold at their first render while a repo
/// moves from Flagger. A bad value is an error (every canary then holds for the settings, so
/// a typo never starts a rollout in the middle of the switch).
fn read_adoption(r: &mut Reader, n: &Node) -> bool {
    if r.map(n, "adoption", &["hold"]).is_none() {
        return false;
    }
    n.get("hold")
        .and_then(|v| r.bool(v, "adoption.hold"))
        .unwrap_or(false)
}

/// `dashboard: {url: https://...}`: an http(s) URL without credentials, query or fragment
/// (it goes into pull requests and notifications as it is).
fn read_dashboard(r: &mut Reader, n: &Node) -> Option<String> {
    r.map(n, "dashboard", &["url"])?;
    let v = r.required(n, "dashboard", "url")?;
    let text = r.string(v, "dashboard.url")?;
    let url = match url::Url::parse(&text) {
        Ok(url) => url,
        Err(e) => {
            r.error(
                v.line,
                "dashboard.url",
                format!("expected an http(s) URL, found {text:?}: {e}"),
            );
            return None;
        }
    };
    let problem = if !matches!(url.scheme(), "http" | "https") {
        Some("expected an http or https URL")
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("expected no credentials in the URL (it is shown in pull requests)")
    } else if url.query().is_some() || url.fragment().is_some() {
        Some("expected no query or fragment")
    } else {
        None
    };
    match problem {
        Some(why) => {
            r.error(v.line, "dashboard.url", format!("{why}, found {text:?}"));
            None
        }
        None => Some(text.trim_end_matches('/').to_string()),
    }
}

/// `provider`: the route provider, kept as written too (it selects built-in queries).
fn read_provider(r: &mut Reader, n: &Node, settings: &mut Settings) {
    if let Some(text) = r.string(n, "provider") {
        match parse_provider(&text) {
            Ok(p) => {
                settings.provider = Some(p);
                settings.provider_name = Some(text.clone());
            }
            Err(e) => r.error(n.line, "provider", e),
        }
    }
}

/// `author`: the `name` and `email` of sluice's commits, each one git accepts.
fn read_author(r: &mut Reader, n: &Node, settings: &mut Settings) {
    if r.map(n, "author", &["name", "email"]).is_none() {
        return;
    }
    if let Some(v) = n.get("name").and_then(|v| r.string(v, "author.name")) {
        match identity_part(&v) {
            Ok(()) => settings.author_name = v,
            Err(e) => r.error(n.get("name").map_or(n.line, |v| v.line), "author.name", e),
        }
    }
    if let Some(v) = n.get("email").and_then(|v| r.string(v, "author.email")) {
        match identity_part(&v) {
            Ok(()) => settings.author_email = v,
            Err(e) => r.error(n.get("email").map_or(n.line, |v| v.line), "author.email", e),
        }
    }
}

/// `prometheus`: the default server's `address` and the `concurrency` limit.
fn read_prometheus(r: &mut Reader, n: &Node, settings: &mut Settings) {
    if r.map(n, "prometheus", &["address", "concurrency"])
        .is_none()
    {
        return;
    }
    // A block that only sets the limit (canaries name their own servers) is fine.
    let address = match n.get("concurrency") {
        Some(_) => n.get("address"),
        None => r.required(n, "prometheus", "address"),
    };
    if let Some(v) = address.and_then(|v| r.string(v, &join("prometheus", "address"))) {
        settings.prometheus = Some(v);
    }
    if let Some(v) = n.get("concurrency") {
        let path = join("prometheus", "concurrency");
        if let Some(limit) = r.int(v, &path, 1, MAX_PROMETHEUS_CONCURRENCY) {
            settings.prometheus_concurrency =
                usize::try_from(limit).unwrap_or(DEFAULT_PROMETHEUS_CONCURRENCY);
        }
    }
}

/// `forge`: the pull request provider, what a closed pull request does (`onClose`) and who
/// may approve (`approvers`).
fn read_forge_block(r: &mut Reader, n: &Node, settings: &mut Settings) {
    settings.forge = read_forge(r, n);
    if let Some(v) = n.get("onClose") {
        let choices = [("rollback", OnClose::Rollback), ("hold", OnClose::Hold)];
        if let Some(on_close) = r.one_of(v, "forge.onClose", &choices) {
            settings.on_close = on_close;
        }
    }
    if let Some(v) = n.get("approvers") {
        settings.approvers = read_approvers(r, v);
    }
}

fn read_signing(r: &mut Reader, n: &Node) -> Option<SigningSettings> {
    r.map(n, "signing", &["required", "allowedSigners"])?;
    let required = match n.get("required") {
        Some(v) => r.bool(v, "signing.required")?,
        None => false,
    };
    let v = r.required(n, "signing", "allowedSigners")?;
    let text = r.string(v, "signing.allowedSigners")?;
    match RepoPath::parse(&text) {
        Ok(allowed_signers) => Some(SigningSettings {
            required,
            allowed_signers,
        }),
        Err(e) => {
            r.error(v.line, "signing.allowedSigners", e);
            None
        }
    }
}

/// A commit author's name or email as git writes it (`Name <email>`): git refuses one that is
/// empty or holds `<`, `>` or a line break, so every commit would fail at runtime.
fn identity_part(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("expected a non-empty value, found an empty string".into());
    }
    if let Some(c) = text
        .chars()
        .find(|c| matches!(c, '<' | '>') || c.is_control())
    {
        return Err(format!(
            "expected no '<', '>' or control characters (git refuses them in an author), found {c:?} in {text:?}"
        ));
    }
    Ok(())
}

fn settings_output(pattern: &str) -> Result<(), String> {
    RepoPath::parse(
        &pattern
            .replace("{namespace}", "ns")
            .replace("{name}", "name"),
    )
    .map(|_| ())
}

fn expect_const(r: &mut Reader, root: &Node, key: &str, expected: &str) {
    if let Some(n) = root.get(key) {
        if let Some(text) = r.string(n, key) {
            if text != expected {
                r.error(
                    n.line,
                    key,
                    format!("expected {expected:?}, found {text:?}"),
                );
            }
        }
    }
}

pub use crate::forge::github_app::{GithubApp, SecretKeyRef};
pub use crate::forge::{ForgeKind, ForgeSettings};

/// What a pull request closed without merging does to the canary waiting on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnClose {
    /// Roll back (the default): closing the PR says no.
    #[default]
    Rollback,
    /// Keep waiting; a new PR is not opened until the canary moves on.
    Hold,
}

const FORGE_KEYS: &[&str] = &[
    "kind",
    "apiUrl",
    "repository",
    "onClose",
    "approvers",
    "githubApp",
];

const GITHUB_APP_KEYS: &[&str] = &["appId", "clientId", "installationId", "privateKeySecretRef"];

const SECRET_KEY_REF_KEYS: &[&str] = &["namespace", "name", "key"];

/// `forge.githubApp`: `appId` or `clientId`, an optional `installationId` and the
/// `privateKeySecretRef` naming the Secret, mapped into sluice, that holds the App's key.
fn read_github_app(r: &mut Reader, n: &Node) -> Option<GithubApp> {
    let at = "forge.githubApp";
    r.map(n, at, GITHUB_APP_KEYS)?;
    let issuer = match (n.get("appId"), n.get("clientId")) {
        (Some(v), None) => r
            .int(v, "forge.githubApp.appId", 1, i64::MAX)
            .map(|id| id.to_string()),
        (None, Some(v)) => r
            .string(v, "forge.githubApp.clientId")
            .and_then(|text| {
                let ok = !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
                if ok {
                    Some(text)
                } else {
                    r.error(
                        v.line,
                        "forge.githubApp.clientId",
                        format!("expected the App's client id (letters, digits and '.', such as Iv23liABC), found {text:?}"),
                    );
                    None
                }
            }),
        (Some(_), Some(v)) => {
            r.error(
                v.line,
                at,
                "set either appId or clientId, not both: either names the App",
            );
            None
        }
        (None, None) => {
            r.error(
                n.line,
                at,
                "required field is missing: set appId (the App's numeric id) or clientId (its client id)",
            );
            None
        }
    };
    // `None`: written and wrong; `Some(None)`: not written (looked up from the repository).
    let installation = match n.get("installationId") {
        Some(v) => r
            .int(v, "forge.githubApp.installationId", 1, i64::MAX)
            .map(|id| Some(id.unsigned_abs())),
        None => Some(None),
    };
    let private_key = r
        .required(n, at, "privateKeySecretRef")
        .and_then(|v| read_secret_key_ref(r, v, "forge.githubApp.privateKeySecretRef"));
    Some(GithubApp {
        issuer: issuer?,
        installation: installation?,
        private_key: private_key?,
    })
}

/// `{namespace: NS, name: NAME, key: KEY}`: one key of a Secret the operator mapped into
/// sluice (`key` defaults to `private-key.pem`). Each part becomes a path under the Secrets
/// folder, so each must be what Kubernetes allows for it.
fn read_secret_key_ref(r: &mut Reader, n: &Node, at: &str) -> Option<SecretKeyRef> {
    r.map(n, at, SECRET_KEY_REF_KEYS)?;
    let namespace = r
        .required(n, at, "namespace")
        .and_then(|v| namespace_at(r, v, &join(at, "namespace")));
    let name = r
        .required(n, at, "name")
        .and_then(|v| name_at(r, v, &join(at, "name")));
    let key = match n.get("key") {
        Some(v) => {
            r.string(v, &join(at, "key"))
                .and_then(|key| match crate::secrets::bad_key(&key) {
                    None => Some(key),
                    Some(e) => {
                        r.error(v.line, &join(at, "key"), format!("{e}, found {key:?}"));
                        None
                    }
                })
        }
        None => Some(crate::forge::github_app::DEFAULT_KEY.to_string()),
    };
    Some(SecretKeyRef {
        namespace: namespace?.to_string(),
        name: name?.to_string(),
        key: key?,
    })
}

/// `forge.approvers`: a list of forge logins. Teams (`org/team`) are refused rather than
/// silently never matching: teams are written `team:<team>` in `approval.from`.
fn read_approvers(r: &mut Reader, n: &Node) -> Vec<String> {
    let mut out = Vec::new();
    let Some(items) = r.seq(n, "forge.approvers") else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let path = index("forge.approvers", i);
        let Some(login) = r.string(item, &path) else {
            continue;
        };
        let login = login.trim().to_string();
        if login.is_empty() || login.contains(char::is_whitespace) {
            r.error(
                item.line,
                &path,
                format!("expected a forge login, found {login:?}"),
            );
        } else if login.contains('/') {
            r.error(
                item.line,
                &path,
                format!("expected a forge login, found {login:?}: for a team, set approval.from with team:<team> instead of forge.approvers"),
            );
        } else {
            out.push(login);
        }
    }
    out
}

fn read_forge(r: &mut Reader, n: &Node) -> Option<ForgeSettings> {
    r.map(n, "forge", FORGE_KEYS)?;
    let kind = r
        .required(n, "forge", "kind")
        .and_then(|v| Some((v.line, r.string(v, "forge.kind")?)))
        .and_then(|(line, text)| match ForgeKind::parse(&text) {
            Ok(k) => Some(k),
            Err(e) => {
                r.error(line, "forge.kind", e);
                None
            }
        });
    let api_url = match n.get("apiUrl") {
        Some(v) if v.value != crate::yaml::node::Value::Null => r
            .string(v, "forge.apiUrl")
            .and_then(|text| match check_api_url(&text) {
                Ok(()) => Some(text),
                Err(e) => {
                    r.error(v.line, "forge.apiUrl", e);
                    None
                }
            }),
        _ => match kind.map(|k| (k, k.default_api_url())) {
            Some((_, Some(default))) => Some(default.to_string()),
            Some((k, None)) => {
                r.error(
                    n.line,
                    "forge.apiUrl",
                    format!(
                        "required for kind {}: the API base, such as {}",
                        k.key(),
                        k.about().api_url_sample
                    ),
                );
                None
            }
            None => None,
        },
    };
    let repository = r.required(n, "forge", "repository").and_then(|v| {
        let text = r.string(v, "forge.repository")?;
        let checked = match kind {
            Some(k) => k.check_repository(&text),
            None => Ok(()),
        };
        match checked {
            Ok(()) => Some(text),
            Err(e) => {
                r.error(v.line, "forge.repository", e);
                None
            }
        }
    });
    let github_app = match n.get("githubApp") {
        Some(v) => match kind {
            Some(k) if k != ForgeKind::GitHub => {
                r.error(
                    v.line,
                    "forge.githubApp",
                    format!(
                        "a GitHub App authenticates with GitHub only, found kind {}; remove githubApp and give the token in SLUICE_FORGE_TOKEN",
                        k.key()
                    ),
                );
                return None;
            }
            _ => Some(read_github_app(r, v)?),
        },
        None => None,
    };
    Some(ForgeSettings {
        kind: kind?,
        api_url: api_url?,
        repository: repository?,
        github_app,
    })
}

/// An http(s) URL with a host and no credentials, query or fragment.
///
/// Never echoes a URL that carries userinfo: that part is probably a token.
fn check_api_url(text: &str) -> Result<(), String> {
    let lower = text.to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &text["https://".len()..]
    } else if lower.starts_with("http://") {
        &text["http://".len()..]
    } else {
        return Err(format!(
            "expected an http:// or https:// URL such as https://api.github.com, found {text:?}"
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(
            "must not contain credentials; put the token in SLUICE_FORGE_TOKEN (or \
             SLUICE_FORGE_TOKEN_FILE) instead"
                .into(),
        );
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("expected a URL without spaces, found {text:?}"));
    }
    if rest.contains(['?', '#']) {
        return Err(format!(
            "expected the API base URL without a query or fragment, found {text:?}"
        ));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => ("", None),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err(format!(
            "expected a numeric port in the URL, found {text:?}"
        ));
    }
    if host.is_empty() {
        return Err(format!("expected a host in the URL, found {text:?}"));
    }
    Ok(())
}

fn read_notifications(r: &mut Reader, node: &Node) -> Vec<Target> {
    let Some(items) = r.seq(node, "notifications") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = format!("notifications[{i}]");
        if r.map(item, &p, &["kind", "urlEnv"]).is_none() {
            continue;
        }
        let channel = r.required(item, &p, "kind").and_then(|n| {
            let text = r.string(n, &join(&p, "kind"))?;
            let found = Channel::ALL
                .iter()
                .find(|(k, _)| *k == text)
                .map(|(_, c)| *c);
            if found.is_none() {
                r.error(
                    n.line,
                    &join(&p, "kind"),
                    format!("expected one of slack, teams, discord, webhook, found {text:?}"),
                );
            }
            found
        });
        let url_env = r.required(item, &p, "urlEnv").and_then(|n| {
            let text = r.string(n, &join(&p, "urlEnv"))?;
            let valid = !text.is_empty()
                && text.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !valid {
                r.error(n.line, &join(&p, "urlEnv"), format!("expected the name of an environment variable holding the webhook URL (e.g. SLUICE_SLACK_URL), found {text:?}"));
                return None;
            }
            Some(text)
        });
        if let (Some(channel), Some(url_env)) = (channel, url_env) {
            out.push(Target { channel, url_env });
        }
    }
    out
}

/// Where notifications go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Slack,
    Teams,
    Discord,
    Webhook,
}

impl Channel {
    pub const ALL: [(&'static str, Channel); 4] = [
        ("slack", Channel::Slack),
        ("teams", Channel::Teams),
        ("discord", Channel::Discord),
        ("webhook", Channel::Webhook),
    ];
}

/// One configured notification target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub channel: Channel,
    /// The environment variable holding the webhook URL.
    pub url_env: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: sluice.dev/v1alpha1\nkind: Config\n";

    fn forge(block: &str) -> Result<Option<ForgeSettings>, Vec<String>> {
        parse_settings(SETTINGS_PATH, &format!("{HEAD}forge:\n{block}"))
            .map(|s| s.forge)
            .map_err(|errs| errs.iter().map(ToString::to_string).collect())
    }

    fn prometheus(block: &str) -> Result<(Option<String>, usize), Vec<String>> {
        parse_settings(SETTINGS_PATH, &format!("{HEAD}prometheus:\n{block}"))
            .map(|s| (s.prometheus, s.prometheus_concurrency))
            .map_err(|errs| errs.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn prometheus_concurrency_has_a_default_and_a_checked_range() {
        assert_eq!(
            prometheus("  address: http://prom:9090\n").unwrap(),
            (
                Some("http://prom:9090".into()),
                DEFAULT_PROMETHEUS_CONCURRENCY
            )
        );
        assert_eq!(
            prometheus("  address: http://prom:9090\n  concurrency: 28\n").unwrap(),
            (Some("http://prom:9090".into()), 28)
        );
        assert_eq!(prometheus("  concurrency: 4\n").unwrap(), (None, 4));
        assert_eq!(
            prometheus("  address: http://prom:9090\n  concurrency: 0\n").unwrap_err(),
            vec![".sluice/config.yaml:5: prometheus.concurrency: expected 1..=1024, found 0"]
        );
        let errs = prometheus("  concurrency: many\n").unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with(".sluice/config.yaml:4: prometheus.concurrency: "),
            "{errs:?}"
        );
        assert_eq!(
            prometheus("  {}\n").unwrap_err(),
            vec![".sluice/config.yaml:3: prometheus.address: required field is missing"]
        );
    }

    #[test]
    fn dashboard_url_links_each_canary_page_and_refuses_credentials() {
        let read = |block: &str| {
            parse_settings(SETTINGS_PATH, &format!("{HEAD}dashboard: {block}\n"))
                .map_err(|errs| errs.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        let s = read("{url: 'https://sluice.example.com/'}").unwrap();
        assert_eq!(
            s.dashboard_page("prod", "web").as_deref(),
            Some("https://sluice.example.com/canaries/prod/web")
        );
        assert_eq!(Settings::default().dashboard_page("prod", "web"), None);
        let errs = read("{url: 'https://me:pw@sluice.example.com'}").unwrap_err();
        assert!(
            errs[0].starts_with(".sluice/config.yaml:3: dashboard.url: expected no credentials"),
            "{errs:?}"
        );
        let errs = read("{url: 'javascript:alert(1)'}").unwrap_err();
        assert!(
            errs[0].contains("dashboard.url: expected an http or https URL"),
            "{errs:?}"
        );
        let errs = read("{link: 'https://x'}").unwrap_err();
        assert!(errs[0].contains("dashboard"), "{errs:?}");
    }

    #[test]
    fn no_forge_block_is_none() {
        let s = parse_settings(SETTINGS_PATH, HEAD).unwrap();
        assert_eq!(s.forge, None);
    }

    #[test]
    fn forge_blocks_parse_with_defaults() {
        assert_eq!(
            forge("  kind: github\n  repository: acme/config\n").unwrap(),
            Some(ForgeSettings {
                kind: ForgeKind::GitHub,
                api_url: "https://api.github.com".into(),
                repository: "acme/config".into(),
                github_app: None,
            })
        );
        assert_eq!(
            forge("  kind: gitlab\n  repository: platform/team/config\n")
                .unwrap()
                .unwrap()
                .api_url,
            "https://gitlab.com/api/v4"
        );
        assert_eq!(
            forge("  kind: gitlab\n  apiUrl: https://git.corp/api/v4\n  repository: \"4711\"\n")
                .unwrap()
                .unwrap()
                .repository,
            "4711"
        );
        assert_eq!(
            forge("  kind: gitea\n  apiUrl: http://127.0.0.1:3000/api/v1\n  repository: ops/cfg\n")
                .unwrap()
                .unwrap()
                .kind,
            ForgeKind::Gitea
        );
        let api_url = |text: &str| forge(text).unwrap().unwrap().api_url;
        assert_eq!(
            api_url("  kind: forgejo\n  repository: ops/cfg\n"),
            "https://codeberg.org/api/v1"
        );
        assert_eq!(
            api_url("  kind: bitbucket\n  repository: acme/config\n"),
            "https://api.bitbucket.org/2.0"
        );
        assert_eq!(
            api_url(
                "  kind: azuredevops\n  apiUrl: https://tfs.corp/tfs/DefaultCollection\n  \
                 repository: fleet/config\n"
            ),
            "https://tfs.corp/tfs/DefaultCollection"
        );
        let errs = forge("  kind: azuredevops\n  repository: fleet/config\n").unwrap_err();
        assert!(
            errs[0].contains(
                "required for kind azuredevops: the API base, such as \
                 https://dev.azure.com/ORGANIZATION"
            ),
            "{errs:?}"
        );
        assert_eq!(
            forge("  kind: github\n  apiUrl: https://ghe.corp/api/v3\n  repository: a/b\n")
                .unwrap()
                .unwrap()
                .api_url,
            "https://ghe.corp/api/v3"
        );
    }

    #[test]
    fn unknown_kind_lists_the_kinds() {
        let errs = forge("  kind: gogs\n  repository: a/b\n").unwrap_err();
        assert_eq!(
            errs,
            vec![
                ".sluice/config.yaml:4: forge.kind: unknown forge kind \"gogs\"; expected one \
                 of: github, gitlab, gitea, forgejo, bitbucket, azuredevops"
            ]
        );
    }

    #[test]
    fn api_url_must_be_http_and_carry_no_credentials() {
        let errs = forge("  kind: github\n  apiUrl: ftp://x\n  repository: a/b\n").unwrap_err();
        assert_eq!(
            errs,
            vec![
                ".sluice/config.yaml:5: forge.apiUrl: expected an http:// or https:// URL such \
                 as https://api.github.com, found \"ftp://x\""
            ]
        );
        let errs =
            forge("  kind: github\n  apiUrl: https://tok3n@ghe.corp/api/v3\n  repository: a/b\n")
                .unwrap_err();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].contains("forge.apiUrl: must not contain credentials"),
            "{errs:?}"
        );
        assert!(!errs[0].contains("tok3n"), "the token leaked: {errs:?}");
        for bad in [
            "https://",
            "https://host/api?x=1",
            "https://host:abc/api",
            "https://ho st/api",
        ] {
            let errs = forge(&format!(
                "  kind: gitea\n  apiUrl: \"{bad}\"\n  repository: a/b\n"
            ))
            .unwrap_err();
            assert_eq!(errs.len(), 1, "{bad}: {errs:?}");
            assert!(errs[0].contains(":5: forge.apiUrl: "), "{bad}: {errs:?}");
        }
        let errs = forge("  kind: gitea\n  repository: a/b\n").unwrap_err();
        assert_eq!(
            errs,
            vec![
                ".sluice/config.yaml:3: forge.apiUrl: required for kind gitea: the API base, such \
                 as https://gitea.example.com/api/v1"
            ]
        );
    }

    #[test]
    fn repository_shape_depends_on_the_kind() {
        for (kind, bad) in [
            ("github", "acme"),
            ("github", "acme/config/extra"),
            ("gitea", "/config"),
            ("gitea", "acme/.."),
            ("github", "acme/con fig"),
            ("gitlab", "project"),
            ("gitlab", "group//project"),
            ("bitbucket", "workspace"),
            ("forgejo", "a/b/c"),
            ("azuredevops", "project"),
            ("azuredevops", "project/repo/extra"),
        ] {
            let errs = forge(&format!(
                "  kind: {kind}\n  apiUrl: https://h/api\n  repository: \"{bad}\"\n"
            ))
            .unwrap_err();
            assert_eq!(errs.len(), 1, "{kind} {bad}: {errs:?}");
            assert!(
                errs[0].starts_with(".sluice/config.yaml:6: forge.repository: expected"),
                "{errs:?}"
            );
        }
        let errs = forge("  kind: github\n  repository: \"\"\n").unwrap_err();
        assert_eq!(
            errs,
            vec![".sluice/config.yaml:5: forge.repository: must not be empty"]
        );
        let errs = forge("  kind: github\n").unwrap_err();
        assert_eq!(
            errs,
            vec![".sluice/config.yaml:3: forge.repository: required field is missing"]
        );
    }

    #[test]
    fn authors_git_would_refuse_are_errors_with_their_line() {
        let author = |block: &str| {
            parse_settings(SETTINGS_PATH, &format!("{HEAD}author:\n{block}"))
                .map(|s| (s.author_name, s.author_email))
                .map_err(|errs| errs.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        assert_eq!(
            author("  name: Release Bot\n  email: bot@example.com\n").unwrap(),
            ("Release Bot".to_string(), "bot@example.com".to_string())
        );
        for (block, field, line) in [
            ("  name: \"Bot <x>\"\n", "author.name", 4),
            (
                "  name: Bot\n  email: \"<bot@example.com>\"\n",
                "author.email",
                5,
            ),
            ("  name: \"Bot\\nInjected: yes\"\n", "author.name", 4),
            ("  email: \"\"\n", "author.email", 4),
        ] {
            let errs = author(block).unwrap_err();
            assert_eq!(errs.len(), 1, "{block}: {errs:?}");
            assert!(
                errs[0].starts_with(&format!(".sluice/config.yaml:{line}: {field}: expected")),
                "{block}: {errs:?}"
            );
        }
    }

    #[test]
    fn drift_policy_defaults_to_hold_and_names_bad_values() {
        let policy = |text: &str| parse_settings(SETTINGS_PATH, &format!("{HEAD}{text}"));
        assert_eq!(policy("").unwrap().drift, DriftPolicy::Hold);
        assert_eq!(policy("drift: hold\n").unwrap().drift, DriftPolicy::Hold);
        assert_eq!(
            policy("drift: restore\n").unwrap().drift,
            DriftPolicy::Restore
        );
        for (text, want) in [
            (
                "drift: revert\n",
                ".sluice/config.yaml:3: drift: expected hold or restore, found \"revert\"",
            ),
            ("drift: [hold]\n", ".sluice/config.yaml:3: drift: expected"),
        ] {
            one_error_starting(text, want);
        }
    }

    #[test]
    fn adoption_hold_defaults_to_off_and_names_bad_values() {
        let hold = |text: &str| parse_settings(SETTINGS_PATH, &format!("{HEAD}{text}"));
        assert!(!hold("").unwrap().adoption_hold);
        assert!(hold("adoption:\n  hold: true\n").unwrap().adoption_hold);
        assert!(!hold("adoption:\n  hold: false\n").unwrap().adoption_hold);
        assert!(!hold("adoption: {}\n").unwrap().adoption_hold);
        for (text, want) in [
            (
                "adoption:\n  hold: yes\n",
                ".sluice/config.yaml:4: adoption.hold: expected true or false, found",
            ),
            (
                "adoption:\n  hold: \"true\"\n",
                ".sluice/config.yaml:4: adoption.hold: expected true or false, found",
            ),
            (
                "adoption: true\n",
                ".sluice/config.yaml:3: adoption: expected a mapping, found",
            ),
            (
                "adoption:\n  hlod: true\n",
                ".sluice/config.yaml:4: adoption.hlod: unknown field (did you mean \"hold\"?)",
            ),
        ] {
            one_error_starting(text, want);
        }
    }

    /// The settings `HEAD` + `text` give one error, which starts with `want`.
    fn one_error_starting(text: &str, want: &str) {
        let errs: Vec<String> = parse_settings(SETTINGS_PATH, &format!("{HEAD}{text}"))
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errs.len(), 1, "{text}: {errs:?}");
        assert!(errs[0].starts_with(want), "{text}: {errs:?}");
    }

    #[test]
    fn commit_mode_defaults_to_per_canary_and_names_bad_values() {
        let mode = |text: &str| parse_settings(SETTINGS_PATH, &format!("{HEAD}{text}"));
        assert_eq!(mode("").unwrap().commits, CommitMode::PerCanary);
        assert_eq!(
            mode("commits: perTick\n").unwrap().commits,
            CommitMode::PerTick
        );
        assert_eq!(
            mode("commits: perCanary\n").unwrap().commits,
            CommitMode::PerCanary
        );
        let errs: Vec<String> = mode("commits: batch\n")
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![".sluice/config.yaml:3: commits: expected perCanary or perTick, found \"batch\""]
        );
    }

    #[test]
    fn a_github_app_is_read_with_its_secret_and_its_mistakes_name_their_line() {
        let app = |text: &str| {
            forge(&format!(
                "  kind: github\n  repository: acme/config\n  githubApp:\n{text}"
            ))
        };
        let parsed = app("    appId: 12345\n    privateKeySecretRef: {namespace: sluice-system, name: github-app}\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            parsed.github_app,
            Some(GithubApp {
                issuer: "12345".into(),
                installation: None,
                private_key: SecretKeyRef {
                    namespace: "sluice-system".into(),
                    name: "github-app".into(),
                    key: "private-key.pem".into(),
                },
            })
        );
        let parsed = app("    clientId: Iv23liABC\n    installationId: 42\n    privateKeySecretRef: {namespace: ops, name: app, key: app.pem}\n")
            .unwrap()
            .unwrap()
            .github_app
            .unwrap();
        assert_eq!(
            (
                parsed.issuer.as_str(),
                parsed.installation,
                parsed.private_key.key.as_str()
            ),
            ("Iv23liABC", Some(42), "app.pem")
        );
        for (text, error) in [
            (
                "    privateKeySecretRef: {namespace: ops, name: app}\n",
                ".sluice/config.yaml:6: forge.githubApp: required field is missing: set appId (the App's numeric id) or clientId (its client id)",
            ),
            (
                "    appId: 1\n    clientId: Iv1\n    privateKeySecretRef: {namespace: ops, name: app}\n",
                ".sluice/config.yaml:8: forge.githubApp: set either appId or clientId, not both: either names the App",
            ),
            (
                "    appId: 1\n",
                ".sluice/config.yaml:6: forge.githubApp.privateKeySecretRef: required field is missing",
            ),
            (
                "    appId: 1\n    installationId: 0\n    privateKeySecretRef: {namespace: ops, name: app}\n",
                ".sluice/config.yaml:8: forge.githubApp.installationId: ",
            ),
            (
                "    appId: 1\n    privateKeySecretRef: {namespace: ops, name: ../etc}\n",
                ".sluice/config.yaml:8: forge.githubApp.privateKeySecretRef.name: ",
            ),
            (
                "    appId: 1\n    privateKeySecretRef: {namespace: ops, name: app, key: ../../x}\n",
                ".sluice/config.yaml:8: forge.githubApp.privateKeySecretRef.key: the key must be",
            ),
            (
                "    appId: 1\n    privateKeySecretRef: {name: app}\n",
                ".sluice/config.yaml:8: forge.githubApp.privateKeySecretRef.namespace: required field is missing",
            ),
            (
                "    appId: 1\n    privateKeyFile: /etc/key.pem\n",
                ".sluice/config.yaml:8: forge.githubApp.privateKeyFile: unknown field",
            ),
        ] {
            let errs = app(text).unwrap_err();
            assert!(errs.iter().any(|e| e.starts_with(error)), "{text}: {errs:?}");
        }
        let errs = forge("  kind: gitlab\n  repository: a/b\n  githubApp: {appId: 1, privateKeySecretRef: {namespace: ops, name: app}}\n").unwrap_err();
        assert!(
            errs[0].starts_with(".sluice/config.yaml:6: forge.githubApp: a GitHub App authenticates with GitHub only, found kind gitlab"),
            "{errs:?}"
        );
    }

    #[test]
    fn max_concurrent_canaries_per_repo_and_namespace_and_bad_values_name_their_line() {
        let parse = |text: &str| parse_settings(SETTINGS_PATH, &format!("{HEAD}{text}"));
        assert_eq!(parse("").unwrap().concurrency, Limits::default());
        let limits =
            parse("maxConcurrentCanaries: 2\nnamespaces:\n  prod:\n    maxConcurrentCanaries: 1\n")
                .unwrap()
                .concurrency;
        assert_eq!(limits.repo, Some(2));
        assert_eq!(limits.namespaces.get("prod"), Some(&1));
        let errs = |text: &str| -> Vec<String> {
            parse(text)
                .unwrap_err()
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            errs("maxConcurrentCanaries: 0\n"),
            vec![".sluice/config.yaml:3: maxConcurrentCanaries: expected 1..=100000, found 0"]
        );
        assert_eq!(
            errs("namespaces:\n  prod:\n    maxConcurrentCanaries: many\n"),
            vec![
                ".sluice/config.yaml:5: namespaces.prod.maxConcurrentCanaries: expected an integer in 1..=100000, found \"many\""
            ]
        );
        assert_eq!(
            errs("namespaces:\n  prod:\n    maxConcurrent: 1\n"),
            vec![
                ".sluice/config.yaml:5: namespaces.prod.maxConcurrent: unknown field (did you mean \"maxConcurrentCanaries\"?); expected one of: maxConcurrentCanaries"
            ]
        );
        assert_eq!(
            errs("namespaces: [prod]\n"),
            vec![
                ".sluice/config.yaml:3: namespaces: expected a mapping of namespace to its settings, found a list"
            ]
        );
    }

    #[test]
    fn forge_unknown_fields_get_a_hint() {
        let errs = forge("  kind: github\n  apiURL: https://x\n  repository: a/b\n").unwrap_err();
        assert_eq!(
            errs,
            vec![
                ".sluice/config.yaml:5: forge.apiURL: unknown field (did you mean \"apiUrl\"?); \
                 expected one of: kind, apiUrl, repository, onClose, approvers, githubApp"
            ]
        );
    }

    #[test]
    fn approval_policy_is_read_and_bad_values_name_their_line() {
        use crate::core::approval::{Approver, MergeBy};
        let parse = |text: &str| parse_settings(SETTINGS_PATH, &format!("{HEAD}{text}"));
        let errs = |text: &str| -> Vec<String> {
            parse(text)
                .unwrap_err()
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        let s = parse("approval:\n  required: 2\n  from: [alice, bob, team:acme/release]\n  forbidSelfApproval: true\n  merge: sluice\n").unwrap();
        let policy = s.approval_policy().unwrap();
        assert_eq!(policy.required, 2);
        assert_eq!(policy.from[2], Approver::Team("acme/release".into()));
        assert!(policy.forbid_self_approval);
        assert_eq!(policy.merge, MergeBy::Sluice);
        // Defaults: one approval from anyone, merged by a person.
        let s = parse("approval: {}\n").unwrap();
        assert_eq!(
            s.approval_policy().unwrap().to_string(),
            "1 from anyone; merge: human"
        );
        assert_eq!(parse("").unwrap().approval_policy(), None);
        assert_eq!(
            errs("approval:\n  required: 0\n"),
            vec![".sluice/config.yaml:4: approval.required: expected 1..=100, found 0"]
        );
        assert_eq!(
            errs("approval:\n  required: 3\n  from: [alice, bob]\n"),
            vec![".sluice/config.yaml:4: approval.required: expected at most 2 (from lists 2 logins), found 3: no set of approvers could meet it"]
        );
        assert_eq!(
            errs("approval:\n  from: [alice, acme/release]\n"),
            vec![".sluice/config.yaml:4: approval.from[1]: expected a forge login; write a team as team:<team>, found \"acme/release\""]
        );
        assert_eq!(
            errs("approval:\n  merge: bot\n"),
            vec![".sluice/config.yaml:4: approval.merge: expected human or sluice, found \"bot\""]
        );
        assert_eq!(
            errs("approval:\n  forbidSelf: true\n"),
            vec![".sluice/config.yaml:4: approval.forbidSelf: unknown field (did you mean \"forbidSelfApproval\"?); expected one of: required, from, forbidSelfApproval, merge"]
        );
        assert_eq!(
            errs("forge:\n  kind: github\n  repository: a/b\n  approvers: [alice]\napproval: {required: 1}\n"),
            vec![".sluice/config.yaml:7: approval: set beside forge.approvers: list those logins in approval.from and remove forge.approvers"]
        );
    }

    #[test]
    fn forge_approvers_are_logins_and_bad_entries_name_their_line() {
        let parse = |text: &str| {
            parse_settings(
                SETTINGS_PATH,
                &format!("{HEAD}forge:\n  kind: github\n  repository: a/b\n{text}"),
            )
        };
        assert_eq!(parse("").unwrap().approvers, Vec::<String>::new());
        let listed = parse("  approvers: [alice, Bob]\n").unwrap();
        assert_eq!(
            listed.approvers,
            vec!["alice".to_string(), "Bob".to_string()]
        );
        // The `from` list of a policy of one approver, who approves by merging.
        assert_eq!(
            listed.approval_policy().unwrap().to_string(),
            "1 from alice, Bob; merge: human"
        );
        let errs: Vec<String> = parse("  approvers:\n    - alice\n    - acme/release\n")
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![".sluice/config.yaml:8: forge.approvers[1]: expected a forge login, found \"acme/release\": for a team, set approval.from with team:<team> instead of forge.approvers"]
        );
        let errs: Vec<String> = parse("  approvers: alice\n")
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errs[0].starts_with(".sluice/config.yaml:6: forge.approvers: expected"),
            "{errs:?}"
        );
    }
}
