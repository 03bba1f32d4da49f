//! Keeps credentials out of what sluice writes for people to read: its logs.
//!
//! Every credential value sluice reads (each Secret key a `secretRef` names, the Prometheus and
//! AWS variables of its environment) is [remembered](remember) here when it is read, with the
//! forms it travels in: as it is, base64 (how HTTP basic auth and many echoed headers carry
//! it), base64 of the whole `Bearer <value>` header value, URL-encoded (as a query parameter or
//! form field carries it), hex, and for basic auth the `user:password` pair
//! ([`remember_basic`]). [`text`] replaces each of them with `[redacted]`, whatever the case of
//! its letters (an upper-cased echo, `%2F` or `%2f`, hex in either case) and across line
//! breaks (a body wrapped, or a value split by `\n`, raw or escaped); [`answer`] is the start of a backend's answer as it may be
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

/// Characters a URL encoder may leave as they are (RFC 3986's unreserved ones): every other
/// byte of a value is `%XX` in a query parameter.
const URL_KEEPS: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Remembers `value` (a credential just read) and the forms it travels in.
pub fn remember(value: &str) {
    let value = value.trim();
    if value.chars().count() < MIN_CHARS {
        return;
    }
    let bearer = format!("Bearer {value}");
    let forms = [
        value.to_string(),
        base64(value.as_bytes()),
        encode(value.as_bytes(), URL_SAFE),
        base64(bearer.as_bytes()),
        encode(bearer.as_bytes(), URL_SAFE),
        percent_encoding::utf8_percent_encode(value, URL_KEEPS).to_string(),
        percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
            .to_string(),
        url::form_urlencoded::byte_serialize(value.as_bytes()).collect(),
        hex::encode(value.as_bytes()),
    ];
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    for form in forms {
        // Unpadded too: a form inside a longer text may have lost its `=`.
        let bare = form.trim_end_matches('=');
        for form in [bare, form.as_str()] {
            // Kept as [`text`] compares: ASCII letters in lower case, no line breaks.
            let (folded, _) = fold(form);
            if folded.chars().count() >= MIN_CHARS {
                known.insert(folded);
            }
        }
    }
}

/// `text` as [`text`] compares it, and where each of its bytes came from: line breaks left
/// out (raw, or escaped as `\n` and `\r`, as a debug-formatted string shows them), ASCII
/// letters in lower case. Only ASCII bytes are left out or changed, so the result is UTF-8.
fn fold(text: &str) -> (String, Vec<usize>) {
    let bytes = text.as_bytes();
    let mut folded = Vec::with_capacity(bytes.len());
    let mut from = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'\n' | b'\r', _) => i += 1,
            (b'\\', Some(b'n' | b'r')) => i += 2,
            (b, _) => {
                folded.push(b.to_ascii_lowercase());
                from.push(i);
                i += 1;
            }
        }
    }
    (String::from_utf8_lossy(&folded).into_owned(), from)
}

/// Remembers HTTP basic-auth credentials: the password, and the `user:password` pair in the
/// base64 form the `Authorization` header carries.
pub fn remember_basic(username: &str, password: &str) {
    remember(username);
    remember(password);
    remember(&format!("{username}:{password}"));
}

/// `text` with every place a remembered credential stands replaced by [`REDACTED`]: matched
/// without regard to the case of ASCII letters and across line breaks ([`fold`]); places that
/// overlap (a base64 form that contains a value) become one.
pub fn text(text: &str) -> String {
    let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
    if known.is_empty() {
        return text.to_string();
    }
    let (folded, from) = fold(text);
    // Byte ranges of `text` to replace.
    let mut places: Vec<(usize, usize)> = Vec::new();
    for form in known.iter() {
        for (at, _) in folded.match_indices(form.as_str()) {
            let (Some(&start), Some(&last)) = (from.get(at), from.get(at + form.len() - 1)) else {
                continue;
            };
            places.push((start, last + 1));
        }
    }
    if places.is_empty() {
        return text.to_string();
    }
    places.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (start, end) in places {
        if start > done {
            out.push_str(&text[done..start]);
        }
        if end > done {
            if start >= done {
                out.push_str(REDACTED);
            }
            done = end;
        }
    }
    out.push_str(&text[done..]);
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

    /// The forms a backend echoes a credential in besides the plain one (issue 38): URL-encoded
    /// (either case of escape), hex, upper case, split by a raw or escaped line break, and
    /// base64 of the whole `Authorization` header value.
    #[test]
    fn echoed_forms_of_a_credential_are_redacted() {
        let token = "redact-test/Tok+en=9f3";
        remember(token);
        let echoes = [
            "token=redact-test%2FTok%2Ben%3D9f3".to_string(),
            "token=redact-test%2fTok%2ben%3d9f3".to_string(),
            "token=redact%2Dtest%2FTok%2Ben%3D9f3".to_string(),
            format!("hex={}", hex::encode(token)),
            format!("HEX={}", hex::encode_upper(token)),
            format!("upper={}", token.to_uppercase()),
            "split=redact-test/To\nk+en=9f3".to_string(),
            "split=redact-test/To\r\nk+en=9f3".to_string(),
            "escaped=redact-test/To\\nk+en=9f3".to_string(),
            format!("header={}", base64(format!("Bearer {token}").as_bytes())),
        ];
        for echo in echoes {
            let shown = text(&echo);
            assert!(shown.ends_with(REDACTED), "{echo} -> {shown}");
            assert!(!shown.contains("9f3"), "{echo} -> {shown}");
        }
        // Text around the places stays, and overlapping places become one.
        assert_eq!(
            text("a redact-test/Tok+en=9f3 b REDACT-TEST/TOK+EN=9F3 c"),
            "a [redacted] b [redacted] c"
        );
        assert_eq!(text("nothing here\nat all"), "nothing here\nat all");
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
