//! Why a copy ends in failure before or beside its statistics: one type,
//! printed in one place (the command line), as "PROGRAM: LINE".
//!
//! What the engine meets while copying (a read error, a failed write) is
//! reported as it happens, in GNU's order relative to the statistics, so
//! it arrives here only as [`Failure::Reported`]: exit status 1, nothing
//! more to print.

use std::fmt;

use crate::diagnostic::{Diagnostic, Refusal};
use crate::ends::open::OpenError;

#[derive(Debug)]
pub enum Failure {
    /// ddx will not run this copy (the guard, an option that cannot work
    /// with these ends): one line, printed before anything was opened for
    /// writing.
    Refused(Refusal),
    /// A GNU message (an end that cannot be opened, closed, flagged),
    /// with what the end said beyond it on the same line.
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

impl From<Refusal> for Failure {
    fn from(refusal: Refusal) -> Self {
        Failure::Refused(refusal)
    }
}

impl From<OpenError> for Failure {
    fn from(error: OpenError) -> Self {
        Failure::Diagnostic(error.diagnostic)
    }
}

impl Failure {
    /// The lines left to print, each without the program name.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Failure::Refused(refusal) => vec![refusal.to_string()],
            Failure::Diagnostic(diagnostic) => vec![diagnostic.to_string()],
            Failure::Reported => Vec::new(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.lines().as_slice() {
            [] => f.write_str("(reported)"),
            lines => f.write_str(&lines.join("; ")),
        }
    }
}
