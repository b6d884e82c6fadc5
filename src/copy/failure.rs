//! Why a copy ends in failure before or beside its statistics: one type,
//! printed in one place (the command line), as "PROGRAM: LINE".
//!
//! What the engine meets while copying (a read error, a failed write) is
//! reported as it happens, in GNU's order relative to the statistics, so
//! it arrives here only as [`Failure::Reported`]: exit status 1, nothing
//! more to print.

use std::fmt;

use crate::engine::Diagnostic;

#[derive(Debug)]
pub enum Failure {
    /// ddx will not run this copy (the guard, an option that cannot work
    /// with these ends): one line, printed before anything was opened for
    /// writing.
    Refused(String),
    /// A GNU message (an end that cannot be opened, closed, flagged).
    Diagnostic(Diagnostic),
    /// Already said, at the moment it happened; only the exit status is
    /// left.
    Reported,
}

impl From<Diagnostic> for Failure {
    fn from(diagnostic: Diagnostic) -> Self {
        Failure::Diagnostic(diagnostic)
    }
}

impl Failure {
    /// The line to print, if any is left to print.
    pub fn line(&self) -> Option<String> {
        match self {
            Failure::Refused(text) => Some(text.clone()),
            Failure::Diagnostic(diagnostic) => Some(diagnostic.to_string()),
            Failure::Reported => None,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line() {
            Some(line) => f.write_str(&line),
            None => f.write_str("(reported)"),
        }
    }
}
