//! Spec errors: one per problem, each naming the file, line and field.

use std::fmt;

/// One problem found in an input file: `path:line: field: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    pub file: String,
    pub line: usize,
    /// Dotted field path (`spec.analysis.stepWeight`); empty for file-level problems.
    pub field: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(
                f,
                "{}:{}: {}: {}",
                self.file, self.line, self.field, self.message
            )
        }
    }
}

/// Every problem found while loading; a non-empty list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// The first of `errors`, and how many more there are, for a one-line message.
pub fn first(errors: &[SpecError]) -> String {
    match errors {
        [] => "unknown problem".into(),
        [one] => one.to_string(),
        [one, rest @ ..] => format!("{one} (and {} more)", rest.len()),
    }
}
