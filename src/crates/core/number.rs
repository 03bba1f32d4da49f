//! Numbers as people write them in events, commit messages and trailers. A leaf: every module
//! that prints a metric value uses it, and it uses none of them.

/// `99`, `99.93`: at most two decimals, no trailing zeros.
pub fn fmt_num(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}
