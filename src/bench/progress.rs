//! The one-line status a person watches while the bench runs ("seq-read
//! direct: run 2/3"). Only on a terminal: a script reading stderr gets
//! nothing but real errors.

use std::io::{IsTerminal, Write};

/// Fits the narrowest terminal people use.
const STATUS_WIDTH: usize = 79;

#[derive(Debug, Clone, Copy)]
pub struct Status {
    terminal: bool,
}

impl Status {
    pub fn for_stderr() -> Status {
        Status {
            terminal: std::io::stderr().is_terminal(),
        }
    }

    pub fn show(&self, text: &str) {
        if self.terminal {
            // A line that wraps could not be erased by the next one.
            let text: String = text.chars().take(STATUS_WIDTH).collect();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{text}");
            let _ = err.flush();
        }
    }

    pub fn clear(&self) {
        self.show("");
    }
}
