//! Signing commits with an SSH key, as git does with `gpg.format=ssh`.
//!
//! A leaf next to `error.rs`: it turns the bytes of a commit into a signature and knows nothing
//! of repositories.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::error::{Error, Result};

/// How to sign commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    /// `ssh-keygen -Y sign -n git -f KEY` (git's `gpg.format=ssh`). The key must not need a
    /// passphrase prompt: an unencrypted key, or a public key whose private half is in the agent.
    Ssh { key_path: PathBuf },
}

impl Signing {
    pub(super) fn sign(&self, content: &str) -> Result<String> {
        match self {
            Signing::Ssh { key_path } => sign_ssh(key_path, content),
        }
    }
}

fn sign_ssh(key_path: &Path, content: &str) -> Result<String> {
    let fail = |reason: String| Error::Signing {
        key_path: key_path.to_path_buf(),
        reason,
    };
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", "git", "-f"])
        .arg(key_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            fail(format!(
                "cannot run ssh-keygen (install openssh-client): {e}"
            ))
        })?;
    // ssh-keygen reads all of stdin before it writes, so writing first cannot deadlock.
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(content.as_bytes())
            .map_err(|e| fail(format!("cannot write to ssh-keygen: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| fail(format!("ssh-keygen did not finish: {e}")))?;
    if !output.status.success() {
        return Err(fail(format!(
            "ssh-keygen failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    String::from_utf8(output.stdout).map_err(|_| fail("ssh-keygen printed non-UTF-8".to_string()))
}
