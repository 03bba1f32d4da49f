//! The inputs of a commit: which files change ([`FileChange`]), who commits ([`Identity`]) and
//! the message with its trailers ([`CommitMessage`]), each checked before anything is written.
//!
//! A leaf next to `error.rs`: plain values, no repository.

use git2::{Signature, Time};

use super::error::{Error, Result};

/// One file to write (`content: Some`) or delete (`content: None`) in a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Repo-relative, `/`-separated (`apps/podinfo/route.yaml`).
    pub path: String,
    /// The new content; `None` deletes the file.
    pub content: Option<String>,
}

impl FileChange {
    /// Write `content` to `path`.
    pub fn write(path: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            content: Some(content.into()),
        }
    }

    /// Delete `path`.
    pub fn delete(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            content: None,
        }
    }
}

/// Who sluice commits as (author and committer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Identity {
    pub fn new(name: impl Into<String>, email: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            email: email.into(),
        }
    }

    pub(super) fn signature(&self, time: Option<Time>) -> Result<Signature<'static>> {
        let invalid = |reason: &str| Error::InvalidIdentity {
            name: self.name.clone(),
            email: self.email.clone(),
            reason: reason.to_string(),
        };
        if self.name.trim().is_empty() || self.email.trim().is_empty() {
            return Err(invalid("name and email must not be empty"));
        }
        if format!("{}{}", self.name, self.email).contains(['<', '>', '\n', '\r', '\0']) {
            return Err(invalid(
                "name and email must not contain `<`, `>`, newlines or NUL",
            ));
        }
        let sig = match time {
            Some(time) => Signature::new(&self.name, &self.email, &time),
            None => Signature::now(&self.name, &self.email),
        };
        sig.map_err(|e| invalid(e.message()))
    }
}

impl Default for Identity {
    /// `sluice <sluice@localhost>`
    fn default() -> Self {
        Self::new("sluice", "sluice@localhost")
    }
}

/// A commit message: subject, blank line, body, blank line, `Key: value` trailers that
/// `git interpret-trailers --parse` and `git log --format=%(trailers)` read back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitMessage {
    pub subject: String,
    pub body: String,
    pub trailers: Vec<(String, String)>,
}

impl CommitMessage {
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            ..Self::default()
        }
    }

    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }

    pub fn trailer(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.trailers.push((key.into(), value.into()));
        self
    }

    /// The message text, or an error if git would not read it back as written (multi-line
    /// subject, trailer keys with spaces, multi-line trailer values).
    pub fn render(&self) -> Result<String> {
        let invalid = |reason: String| Error::InvalidMessage { reason };
        let subject = self.subject.trim();
        if subject.is_empty() {
            return Err(invalid("the subject is empty".to_string()));
        }
        if subject.contains(['\n', '\r']) {
            return Err(invalid(format!(
                "the subject must be one line, found `{}`",
                subject.escape_debug()
            )));
        }
        let mut out = String::from(subject);
        out.push('\n');
        let body = self.body.trim();
        if !body.is_empty() {
            out.push('\n');
            out.push_str(body);
            out.push('\n');
        }
        if !self.trailers.is_empty() {
            out.push('\n');
            for (key, value) in &self.trailers {
                let valid_key = !key.is_empty()
                    && !key.starts_with('-')
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
                if !valid_key {
                    return Err(invalid(format!(
                        "trailer key `{}`: expected letters, digits and `-` (like `Sluice-Canary`)",
                        key.escape_debug()
                    )));
                }
                let value = value.trim();
                if value.is_empty() || value.contains(['\n', '\r']) {
                    return Err(invalid(format!(
                        "trailer `{key}`: expected a non-empty one-line value, found `{}`",
                        value.escape_debug()
                    )));
                }
                out.push_str(&format!("{key}: {value}\n"));
            }
        }
        if out.contains('\0') {
            return Err(invalid("contains a NUL byte".to_string()));
        }
        Ok(out)
    }
}

/// Checks that `path` is a plain repo-relative path: `/`-separated, not absolute, no empty,
/// `.` or `..` components, nothing inside `.git`.
pub(super) fn validate_path(path: &str) -> Result<()> {
    let invalid = |reason: &str| Error::InvalidPath {
        path: path.escape_debug().to_string(),
        reason: reason.to_string(),
    };
    if path.is_empty() {
        return Err(invalid("is empty"));
    }
    if path.contains('\0') {
        return Err(invalid("contains a NUL byte"));
    }
    if path.contains('\\') {
        return Err(invalid("contains `\\`; use `/` as the separator"));
    }
    let bytes = path.as_bytes();
    if path.starts_with('/')
        || (bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
    {
        return Err(invalid(
            "is absolute; give a path relative to the repo root",
        ));
    }
    for component in path.split('/') {
        match component {
            "" => return Err(invalid("has an empty component (`//` or a trailing `/`)")),
            "." => return Err(invalid("contains `.`; give a normalized path")),
            ".." => return Err(invalid("contains `..`; paths must stay inside the repo")),
            c if c.trim_end_matches(['.', ' ']).eq_ignore_ascii_case(".git") => {
                return Err(invalid("points into `.git`"))
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside_the_repo() {
        for good in [
            "a.yaml",
            "apps/podinfo/route.yaml",
            ".github/x",
            "a..b",
            "..a",
            ".gitignore",
        ] {
            assert!(validate_path(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "C:/x",
            "../x",
            "a/../../x",
            "a/..",
            "./a",
            "a//b",
            "a/",
            ".git/config",
            ".GIT/hooks/pre-commit",
            "sub/.git/x",
            ".git",
            ".git./x",
            "a\\b",
            "a\0b",
        ] {
            let err = validate_path(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}");
            assert!(!err.is_transient());
        }
    }

    #[test]
    fn message_renders_subject_body_trailers() {
        let msg = CommitMessage::new("Advance podinfo.prod canary weight 20")
            .body("Step 2 of 5.\n\nMetrics ok.")
            .trailer("Sluice-Canary", "prod/podinfo")
            .trailer("Sluice-Weight", "20");
        assert_eq!(
            msg.render().unwrap(),
            "Advance podinfo.prod canary weight 20\n\nStep 2 of 5.\n\nMetrics ok.\n\n\
             Sluice-Canary: prod/podinfo\nSluice-Weight: 20\n"
        );
        assert_eq!(CommitMessage::new("s").render().unwrap(), "s\n");
        assert_eq!(
            CommitMessage::new("s").trailer("K", "v").render().unwrap(),
            "s\n\nK: v\n"
        );
    }

    #[test]
    fn bad_messages_are_errors() {
        for msg in [
            CommitMessage::new(""),
            CommitMessage::new("two\nlines"),
            CommitMessage::new("s").trailer("Has Space", "v"),
            CommitMessage::new("s").trailer("", "v"),
            CommitMessage::new("s").trailer("K:", "v"),
            CommitMessage::new("s").trailer("K", ""),
            CommitMessage::new("s").trailer("K", "a\nb"),
        ] {
            assert!(
                matches!(msg.render(), Err(Error::InvalidMessage { .. })),
                "{msg:?}"
            );
        }
    }

    #[test]
    fn bad_identities_are_errors() {
        for id in [
            Identity::new("", "a@b"),
            Identity::new("a", ""),
            Identity::new("a <x>", "a@b"),
            Identity::new("a", "a@b>\n"),
        ] {
            assert!(
                matches!(id.signature(None), Err(Error::InvalidIdentity { .. })),
                "{id:?}"
            );
        }
        assert!(Identity::default().signature(None).is_ok());
    }
}
