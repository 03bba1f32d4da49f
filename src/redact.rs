//! Keeps credentials out of what sluice writes for people to read: its logs.
//!
//! Every credential value sluice reads (each Secret key a `secretRef` names, the Prometheus and
//! AWS variables of its environment) is [remembered](remember) here when it is read, with the
//! forms it travels in: as it is, base64 (how HTTP basic auth and many echoed headers carry
//! it), and for basic auth the `user:password` pair ([`remember_basic`]). [`text`] replaces
//! each of them with `[redacted]`; [`answer`] is the start of a backend's answer as it may be
//! logged: cut to [`ANSWER_CHARS`] characters, then redacted. [`LogWriter`] passes every log
//! line through [`text`], so a credential that reaches a log message by another path is
//! redacted too.
//!
//! What goes into commits never comes from here: providers and webhooks write their own
//! message there (`Prometheus http://prom:9090: answered HTTP 401`), never a backend's body.
//!
//! The set is process-wide because log lines come from anywhere; it only grows (a rotated
//! Secret adds its new value). Values shorter than [`MIN_CHARS`] are not remembered: blanking
//! every `abc` in the logs would hide more than it protects.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{PoisonError, RwLock};

/// What a credential is replaced with.
pub const REDACTED: &str = "[redacted]";
/// Characters of a backend's answer kept in a log line.
pub const ANSWER_CHARS: usize = 300;
/// The shortest value remembered.
pub const MIN_CHARS: usize = 4;
/// Bytes of an answer looked at: more than is shown, so a credential cut at the end of the
/// shown part is still whole when it is redacted.
const ANSWER_BYTES: usize = 16 * 1024;

static KNOWN: RwLock<BTreeSet<String>> = RwLock::new(BTreeSet::new());

/// Remembers `value` (a credential just read) and its base64 forms.
pub fn remember(value: &str) {
    let value = value.trim();
    if value.chars().count() < MIN_CHARS {
        return;
    }
    let forms = [
        value.to_string(),
        base64(value.as_bytes()),
        encode(value.as_bytes(), URL_SAFE),
    ];
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    for form in forms {
        // Unpadded too: a form inside a longer text may have lost its `=`.
        let bare = form.trim_end_matches('=').to_string();
        if bare.chars().count() >= MIN_CHARS {
            known.insert(bare);
        }
        known.insert(form);
    }
}

/// Remembers HTTP basic-auth credentials: the password, and the `user:password` pair in the
/// base64 form the `Authorization` header carries.
pub fn remember_basic(username: &str, password: &str) {
    remember(username);
    remember(password);
    remember(&format!("{username}:{password}"));
}

/// `text` with every remembered credential replaced by [`REDACTED`], longest first (so a
/// base64 form is not half-replaced by a value it happens to contain).
pub fn text(text: &str) -> String {
    let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
    if known.is_empty() {
        return text.to_string();
    }
    let mut forms: Vec<&String> = known.iter().collect();
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let mut out = text.to_string();
    for form in forms {
        if out.contains(form.as_str()) {
            out = out.replace(form.as_str(), REDACTED);
        }
    }
    out
}

/// The start of a backend's answer `body` as a log line may show it: printable, at most
/// [`ANSWER_CHARS`] characters, every remembered credential redacted.
pub fn answer(body: &[u8]) -> String {
    let head = &body[..body.len().min(ANSWER_BYTES)];
    let redacted = text(&String::from_utf8_lossy(head));
    crate::http_client::snippet(redacted.as_bytes(), ANSWER_CHARS)
}

/// A log writer that redacts each line it is given ([`text`]) before writing it to stderr;
/// `tracing_subscriber` formats one event into one write.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = text(&String::from_utf8_lossy(buf));
        std::io::stderr().write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        LogWriter
    }
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `bytes` in standard base64 (RFC 4648), padded with `=`: the form of HTTP basic auth.
pub fn base64(bytes: &[u8]) -> String {
    encode(bytes, STANDARD)
}

/// `bytes` in base64 with `alphabet`, padded with `=`.
fn encode(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                let index = (n >> (18 - 6 * i)) & 63;
                out.push(char::from(alphabet[index as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_examples() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
            ("user:secret", "dXNlcjpzZWNyZXQ="),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
        }
        assert_eq!(encode(&[0xfb, 0xff], URL_SAFE), "-_8=");
    }

    #[test]
    fn remembered_values_and_their_base64_forms_are_redacted() {
        remember("redact-test-token-8d1");
        remember_basic("redact-test-user", "redact-test-pw-9c2");
        remember("ab");
        let pair = base64(b"redact-test-user:redact-test-pw-9c2");
        let token64 = base64(b"redact-test-token-8d1");
        let line =
            format!("Authorization: Basic {pair}\nX-Token: redact-test-token-8d1 ({token64}) ab");
        assert_eq!(
            text(&line),
            "Authorization: Basic [redacted]\nX-Token: [redacted] ([redacted]) ab"
        );
    }

    #[test]
    fn answers_are_cut_and_redacted_even_across_the_cut() {
        remember("redact-test-secret-at-the-cut");
        let mut body = "x".repeat(ANSWER_CHARS - 5).into_bytes();
        body.extend_from_slice(b"redact-test-secret-at-the-cut and more");
        let shown = answer(&body);
        assert!(!shown.contains("redact-test"), "{shown}");
        assert!(shown.ends_with("..."), "{shown}");
        assert!(shown.chars().count() <= ANSWER_CHARS + 3, "{shown}");
    }
}
