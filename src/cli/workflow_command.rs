//! GitHub Actions workflow commands (`::error file=...,title=...::message`): the escaping that
//! `sluice validate` and `sluice audit` share, as GitHub's toolkit does it. Builds no command
//! line itself; each subcommand says what its annotation holds.

/// A workflow command's message: `%`, CR and LF are percent-encoded.
pub(super) fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: as [`escape_data`], and `:` and `,` too.
pub(super) fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}
