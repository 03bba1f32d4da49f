//! Approval policies: how many people, and which, must approve an approval pull request
//! before its merge approves the canary's next change. [`check`] weighs the reviews the forge
//! reported against an [`ApprovalPolicy`] and says whether it is met (and by whom) or what is
//! missing, in words a pull request comment can carry.
//!
//! Pure: the forge's answers (reviews, the revision's author, who merged, team memberships)
//! are read by the adapter and passed in; nothing here asks for them.

use std::collections::BTreeSet;
use std::fmt;

/// `approval: {required, from, forbidSelfApproval, merge}` of a canary, a wave or the repo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// Distinct approvers needed (at least 1).
    pub required: u32,
    /// Who may approve; empty: anyone the forge lets review (or merge).
    pub from: Vec<Approver>,
    /// The revision's author cannot approve their own release.
    pub forbid_self_approval: bool,
    /// Who merges the pull request.
    pub merge: MergeBy,
}

impl ApprovalPolicy {
    /// `forge.approvers` as a policy: one of these logins (anyone when empty) approves by
    /// merging.
    pub fn merged_by_one_of(logins: &[String]) -> ApprovalPolicy {
        ApprovalPolicy {
            required: 1,
            from: logins.iter().map(|l| Approver::Login(l.clone())).collect(),
            forbid_self_approval: false,
            merge: MergeBy::Human,
        }
    }

    /// The team entries of `from`.
    pub fn teams(&self) -> impl Iterator<Item = &str> {
        self.from.iter().filter_map(|a| match a {
            Approver::Team(t) => Some(t.as_str()),
            Approver::Login(_) => None,
        })
    }

    /// Whether `login` is named in `from` as a login (not through a team).
    fn lists(&self, login: &str) -> bool {
        self.from
            .iter()
            .any(|a| matches!(a, Approver::Login(l) if l.eq_ignore_ascii_case(login)))
    }
}

/// The policy in one line, as the `Sluice-Approval-Policy` trailer and pull request comments
/// say it: `2 from alice, bob, team:acme/release; self-approval forbidden; merge: human`.
impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.required)?;
        if self.from.is_empty() {
            write!(f, " from anyone")?;
        } else {
            write!(
                f,
                " from {}",
                list(self.from.iter().map(ToString::to_string))
            )?;
        }
        if self.forbid_self_approval {
            write!(f, "; self-approval forbidden")?;
        }
        write!(f, "; merge: {}", self.merge.as_str())
    }
}

/// One entry of `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approver {
    /// A forge login, compared ignoring ASCII case (as forges treat logins).
    Login(String),
    /// `team:<team>`: any member of the forge team or group.
    Team(String),
}

/// The prefix of a team entry in `from`.
pub const TEAM_PREFIX: &str = "team:";

impl Approver {
    /// An entry as written: `team:<team>` or a login; the text of the error otherwise.
    pub fn parse(text: &str) -> Result<Approver, String> {
        let text = text.trim();
        let bad = |what: &str| Err(format!("expected {what}, found {text:?}"));
        if let Some(team) = text.strip_prefix(TEAM_PREFIX) {
            let team = team.trim();
            if team.is_empty() || team.contains(char::is_whitespace) {
                return bad("team:<team> with a team name (org/team on GitHub, Gitea and Forgejo, the group path on GitLab, project/team on Azure DevOps)");
            }
            return Ok(Approver::Team(team.to_string()));
        }
        if text.is_empty() || text.contains(char::is_whitespace) || text.contains(':') {
            return bad("a forge login or team:<team>");
        }
        if text.contains('/') {
            return bad("a forge login; write a team as team:<team>");
        }
        Ok(Approver::Login(text.to_string()))
    }
}

impl fmt::Display for Approver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Approver::Login(l) => write!(f, "{l}"),
            Approver::Team(t) => write!(f, "{TEAM_PREFIX}{t}"),
        }
    }
}

/// Who merges the approval pull request once the policy holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MergeBy {
    /// A person merges (the merger's merge counts as their approval).
    #[default]
    Human,
    /// sluice merges it itself once the reviews meet the policy: reviewers only approve.
    Sluice,
}

impl MergeBy {
    pub const ALL: [(&'static str, MergeBy); 2] =
        [("human", MergeBy::Human), ("sluice", MergeBy::Sluice)];

    pub fn as_str(self) -> &'static str {
        match self {
            MergeBy::Human => "human",
            MergeBy::Sluice => "sluice",
        }
    }
}

/// A review's state as the forge reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    Commented,
    Dismissed,
    Pending,
}

/// One review, oldest first in the list [`check`] is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub login: String,
    pub state: ReviewState,
    /// The head commit it was given on, when the forge says.
    pub commit: Option<String>,
    /// The forge marks it stale or dismissed.
    pub stale: bool,
}

/// What the forge said about one approval pull request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// Every review, oldest first.
    pub reviews: Vec<Review>,
    /// The pull request's head commit (reviews on another one do not count); `None` when
    /// the forge does not say.
    pub head: Option<String>,
    /// The forge login of the revision's author; `None` when the forge cannot link the
    /// commit to an account.
    pub author: Option<String>,
    /// Who merged the pull request, when it is merged and the forge says.
    pub merger: Option<String>,
    /// `(team, login)` pairs the forge confirmed: `login` is a member of `team`. Pairs not
    /// listed are not members.
    pub members: BTreeSet<(String, String)>,
}

/// One approver the policy counted, and the `from` entry that let them approve (`None`:
/// listed by login, or `from` is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub login: String,
    pub team: Option<String>,
}

/// Whether the policy holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It holds: these approvers (in the order they approved) count.
    Met(Vec<Approval>),
    /// It does not: what is missing, in words.
    Missing(String),
}

/// The logins whose approval counts before eligibility: the latest decisive review of each
/// login (comments and pending reviews do not change an earlier one, as on GitHub) is an
/// approval that is not stale, not dismissed and given on `head` (when both are known); and
/// with `merge: human` the merger, whose merge is their approval. In the order they approved.
pub fn approving(policy: &ApprovalPolicy, evidence: &Evidence) -> Vec<String> {
    let mut latest: Vec<(String, &Review)> = Vec::new();
    for review in &evidence.reviews {
        if matches!(review.state, ReviewState::Commented | ReviewState::Pending) {
            continue;
        }
        let key = review.login.to_ascii_lowercase();
        latest.retain(|(k, _)| *k != key);
        latest.push((key, review));
    }
    // A forge that gives short hashes (Bitbucket's 12 characters) names the same commit by
    // a prefix of the other's.
    let on_head = |r: &Review| match (&r.commit, &evidence.head) {
        (Some(c), Some(h)) => same_commit(c, h),
        _ => true,
    };
    let mut out: Vec<String> = latest
        .iter()
        .filter(|(_, r)| r.state == ReviewState::Approved && !r.stale && on_head(r))
        .map(|(_, r)| r.login.clone())
        .collect();
    if let (MergeBy::Human, Some(merger)) = (policy.merge, &evidence.merger) {
        if !out.iter().any(|l| l.eq_ignore_ascii_case(merger)) {
            out.push(merger.clone());
        }
    }
    out
}

/// The `(team, login)` pairs whose membership decides [`check`]: each team of `from` with
/// each approving login not listed by name. The adapter asks the forge about these only.
pub fn memberships_needed(policy: &ApprovalPolicy, evidence: &Evidence) -> Vec<(String, String)> {
    let logins = approving(policy, evidence);
    let mut out = Vec::new();
    for login in logins.iter().filter(|l| !policy.lists(l)) {
        for team in policy.teams() {
            out.push((team.to_string(), login.clone()));
        }
    }
    out
}

/// Whether `evidence` meets `policy`; see [`approving`] for which approvals count. An
/// approver must be in `from` (by login or a team the forge confirmed), and under
/// `forbidSelfApproval` must not be the revision's author, who must be known.
pub fn check(policy: &ApprovalPolicy, evidence: &Evidence) -> Outcome {
    let mut counted = Vec::new();
    let mut not_allowed = Vec::new();
    let mut author_approved = false;
    for login in approving(policy, evidence) {
        let is_author = evidence
            .author
            .as_deref()
            .is_some_and(|a| a.eq_ignore_ascii_case(&login));
        if policy.forbid_self_approval && is_author {
            author_approved = true;
            continue;
        }
        match eligible(policy, evidence, &login) {
            Some(approval) => counted.push(approval),
            None => not_allowed.push(login),
        }
    }
    let unknown_author = policy.forbid_self_approval && evidence.author.is_none();
    let required = usize::try_from(policy.required).unwrap_or(usize::MAX);
    if counted.len() >= required && !unknown_author {
        return Outcome::Met(counted);
    }
    let mut text = format!(
        "needs {} approval{} from {}; has {}",
        policy.required,
        if policy.required == 1 { "" } else { "s" },
        if policy.from.is_empty() {
            "anyone".to_string()
        } else {
            list(policy.from.iter().map(ToString::to_string))
        },
        counted.len()
    );
    if !counted.is_empty() {
        text.push_str(&format!(
            " ({})",
            list(counted.iter().map(|a| a.login.clone()))
        ));
    }
    if author_approved {
        if let Some(author) = &evidence.author {
            text.push_str(&format!("; the author {author} cannot approve"));
        }
    }
    if !not_allowed.is_empty() {
        text.push_str(&format!(
            "; {} may not approve",
            list(not_allowed.into_iter())
        ));
    }
    if unknown_author {
        text.push_str("; the forge does not link the revision's commit to an account, so self-approval cannot be ruled out");
    }
    Outcome::Missing(text)
}

/// The approval of `login` when `from` lets them approve (by login, through a team the forge
/// confirmed, or because `from` is empty); `None` otherwise.
fn eligible(policy: &ApprovalPolicy, evidence: &Evidence, login: &str) -> Option<Approval> {
    let approval = |team: Option<&str>| Approval {
        login: login.to_string(),
        team: team.map(str::to_string),
    };
    if policy.from.is_empty() || policy.lists(login) {
        return Some(approval(None));
    }
    policy
        .teams()
        .find(|team| {
            evidence
                .members
                .iter()
                .any(|(t, l)| t == team && l.eq_ignore_ascii_case(login))
        })
        .map(|team| approval(Some(team)))
}

/// Whether two commit ids, either possibly abbreviated (7 characters at least), name the same
/// commit.
fn same_commit(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= 7 && long.starts_with(short)
}

fn list(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

/// A policy that held, and what it held on: recorded in the approval's commit (trailers and
/// replay record) so `sluice audit` can weigh it again ([`recheck`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Met {
    /// The policy in force when it was checked.
    pub policy: ApprovalPolicy,
    /// The approvers it counted, in the order they approved.
    pub approvals: Vec<Approval>,
    /// The revision's author, as the forge linked it.
    pub author: Option<String>,
    /// Who merged the pull request, as the forge said.
    pub merger: Option<String>,
}

/// Weighs recorded approvals (an approval commit's) against `policy`, the policy in force at
/// the commit before the merge: each recorded approver counts as an approval on the head,
/// each recorded team as a confirmed membership.
pub fn recheck(policy: &ApprovalPolicy, approvals: &[Approval], author: Option<&str>) -> Outcome {
    let evidence = Evidence {
        reviews: approvals
            .iter()
            .map(|a| Review {
                login: a.login.clone(),
                state: ReviewState::Approved,
                commit: None,
                stale: false,
            })
            .collect(),
        head: None,
        author: author.map(str::to_string),
        merger: None,
        members: approvals
            .iter()
            .filter_map(|a| Some((a.team.clone()?, a.login.clone())))
            .collect(),
    };
    check(policy, &evidence)
}
