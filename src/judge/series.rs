//! Series files for `sluice judge`: one number per line (blank lines and `#` comments skipped,
//! `NaN` allowed), or one JSON array of numbers (`null` for a missing value). A bad value is an
//! error naming the file and line.

use std::path::Path;

/// A series file that cannot be read, or a value in it that is not a number.
#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    #[error("{file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}:{line}: expected a number (or NaN), found {found:?}")]
    NotANumber {
        file: String,
        line: usize,
        found: String,
    },
    #[error("{file}:{line}: expected a JSON array of numbers: {message}")]
    Json {
        file: String,
        line: usize,
        message: String,
    },
}

/// The series in `path`.
pub fn read_series(path: &Path) -> Result<Vec<f64>, SeriesError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SeriesError::Read {
        file: file.clone(),
        source,
    })?;
    parse_series(&file, &text)
}

/// The series in `text`, read from `file` (named in errors).
pub fn parse_series(file: &str, text: &str) -> Result<Vec<f64>, SeriesError> {
    if text.trim_start().starts_with('[') {
        return parse_json(file, text);
    }
    let mut values = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let value = line.split('#').next().unwrap_or("").trim();
        if value.is_empty() {
            continue;
        }
        values.push(number(value).ok_or_else(|| SeriesError::NotANumber {
            file: file.to_string(),
            line: i + 1,
            found: value.to_string(),
        })?);
    }
    Ok(values)
}

/// A finite number or NaN (`NaN`, `nan`, as Prometheus and R print it); never an infinity.
fn number(text: &str) -> Option<f64> {
    if text.eq_ignore_ascii_case("nan") {
        return Some(f64::NAN);
    }
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn parse_json(file: &str, text: &str) -> Result<Vec<f64>, SeriesError> {
    let values: Vec<Option<f64>> = serde_json::from_str(text).map_err(|e| SeriesError::Json {
        file: file.to_string(),
        line: e.line(),
        message: e.to_string(),
    })?;
    Ok(values.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_with_comments_blanks_and_nan() {
        let v = parse_series("a", "# latency\n1.5\n\n2 # second\nNaN\n").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(&v[..2], &[1.5, 2.0]);
        assert!(v[2].is_nan());
    }

    #[test]
    fn a_bad_line_names_file_and_line() {
        let e = parse_series("m.canary", "1\n2\nfast\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.canary:3: expected a number (or NaN), found \"fast\""
        );
        let e = parse_series("m.canary", "1\ninf\n").unwrap_err();
        assert!(e.to_string().starts_with("m.canary:2:"), "{e}");
    }

    #[test]
    fn json_arrays_with_null() {
        let v = parse_series("a", "[1, 2.5,\n null]").unwrap();
        assert_eq!(&v[..2], &[1.0, 2.5]);
        assert!(v[2].is_nan());
        let e = parse_series("b.json", "[1,\n \"x\"]").unwrap_err();
        assert!(e.to_string().starts_with("b.json:2: "), "{e}");
    }
}
