//! What a copy has to say: GNU dd's warnings and errors as values. A leaf
//! below the ends (which fail to open in GNU's words) and the engine
//! (which reads, writes and syncs them), so that neither imports the
//! other for its messages.
//!
//! The engine prints nothing; it hands these to an [`Events`] sink, whose
//! owner decides where they go. `Display` gives GNU's exact text (without
//! the program name), so stderr stays identical to dd's.

use std::fmt;

use crate::sys::{errno_text, Errno};
use crate::text::quote::{quote_file, quote_file_if_needed};

/// Which buffer could not be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferKind {
    Input,
    Output,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diagnostic {
    OpenFailed {
        file: Vec<u8>,
        errno: Errno,
    },
    SettingFlags {
        file: Vec<u8>,
        errno: Errno,
    },
    ReadError {
        file: Vec<u8>,
        errno: Errno,
    },
    /// A short write in the final or per-record write.
    ErrorWriting {
        file: Vec<u8>,
        errno: Errno,
    },
    /// A short write of a full output block (GNU words it differently).
    WritingTo {
        file: Vec<u8>,
        errno: Errno,
    },
    CannotSkip {
        file: Vec<u8>,
        errno: Errno,
    },
    /// No errno when the seek was never attempted (offset too large).
    CannotSeek {
        file: Vec<u8>,
        errno: Option<Errno>,
    },
    SkipShort {
        file: Vec<u8>,
    },
    PartialRead {
        bytes: u64,
    },
    CannotFstat {
        file: Vec<u8>,
        errno: Errno,
    },
    TruncateFailed {
        length: i64,
        file: Vec<u8>,
        errno: Errno,
    },
    FdatasyncFailed {
        file: Vec<u8>,
        errno: Errno,
    },
    FsyncFailed {
        file: Vec<u8>,
        errno: Errno,
    },
    ClosingInput {
        file: Vec<u8>,
        errno: Errno,
    },
    ClosingOutput {
        file: Vec<u8>,
        errno: Errno,
    },
    DiscardCacheFailed {
        file: Vec<u8>,
        errno: Errno,
    },
    DirectOffFailed {
        file: Vec<u8>,
        errno: Errno,
    },
    OffsetOverflow {
        file: Vec<u8>,
    },
    InvalidOffsetAfterRead,
    NoMemory {
        buffer: BufferKind,
        size: usize,
    },
    /// GNU's message and what the end knows beyond its errno (a server's
    /// answer, a checksum that did not match), on the same line: "GNU'S
    /// MESSAGE; DETAIL". Only ends GNU dd cannot have (a remote end, a
    /// stream ddx decodes) say more, so dd's own lines stay GNU's.
    Explained {
        diagnostic: Box<Diagnostic>,
        detail: String,
    },
}

impl Diagnostic {
    /// This message, with `detail` after it where there is one.
    pub fn explained(self, detail: Option<String>) -> Diagnostic {
        match detail {
            Some(detail) => Diagnostic::Explained {
                diagnostic: Box::new(self),
                detail: one_line(&detail),
            },
            None => self,
        }
    }
}

/// `text` on one line: a message is one line, whatever a server or a
/// library put in its words.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Diagnostic::*;
        // Most of GNU's messages are "WHAT FILE: STRERROR" with the name
        // quoted one of two ways; the arms below say only what differs.
        match self {
            OpenFailed { file, errno } => failed(f, "failed to open", quote_file(file), errno),
            SettingFlags { file, errno } => failed(f, "setting flags for", quote_file(file), errno),
            ReadError { file, errno } => failed(f, "error reading", quote_file(file), errno),
            ErrorWriting { file, errno } => failed(f, "error writing", quote_file(file), errno),
            WritingTo { file, errno } => failed(f, "writing to", quote_file(file), errno),
            CannotSkip { file, errno } => {
                write!(
                    f,
                    "{}: cannot skip: {}",
                    quote_file_if_needed(file),
                    errno_text(*errno)
                )
            }
            CannotSeek { file, errno } => {
                write!(f, "{}: cannot seek", quote_file_if_needed(file))?;
                match errno {
                    Some(errno) => write!(f, ": {}", errno_text(*errno)),
                    None => Ok(()),
                }
            }
            SkipShort { file } => {
                write!(
                    f,
                    "{}: cannot skip to specified offset",
                    quote_file_if_needed(file)
                )
            }
            PartialRead { bytes } => write!(
                f,
                "warning: partial read ({bytes} byte{}); suggest iflag=fullblock",
                if *bytes == 1 { "" } else { "s" }
            ),
            CannotFstat { file, errno } => failed(f, "cannot fstat", quote_file(file), errno),
            TruncateFailed {
                length,
                file,
                errno,
            } => {
                let what = format!("failed to truncate to {length} bytes in output file");
                failed(f, &what, quote_file(file), errno)
            }
            FdatasyncFailed { file, errno } => {
                failed(f, "fdatasync failed for", quote_file(file), errno)
            }
            FsyncFailed { file, errno } => failed(f, "fsync failed for", quote_file(file), errno),
            ClosingInput { file, errno } => {
                failed(f, "closing input file", quote_file(file), errno)
            }
            ClosingOutput { file, errno } => {
                failed(f, "closing output file", quote_file(file), errno)
            }
            DiscardCacheFailed { file, errno } => failed(
                f,
                "failed to discard cache for:",
                quote_file_if_needed(file),
                errno,
            ),
            DirectOffFailed { file, errno } => failed(
                f,
                "failed to turn off O_DIRECT:",
                quote_file_if_needed(file),
                errno,
            ),
            OffsetOverflow { file } => {
                write!(f, "offset overflow while reading file {}", quote_file(file))
            }
            InvalidOffsetAfterRead => f.write_str("warning: invalid file offset after failed read"),
            Explained { diagnostic, detail } => write!(f, "{diagnostic}; {detail}"),
            NoMemory { buffer, size } => {
                let which = match buffer {
                    BufferKind::Input => "input",
                    BufferKind::Output => "output",
                };
                let human =
                    crate::text::human::human(*size as u64, crate::text::human::Base::Iec, 1, 1);
                write!(
                    f,
                    "memory exhausted by {which} buffer of size {size} bytes ({human})"
                )
            }
        }
    }
}

/// "WHAT NAME: STRERROR", the shape of most of GNU's failure messages.
fn failed(f: &mut fmt::Formatter<'_>, what: &str, name: String, errno: &Errno) -> fmt::Result {
    write!(f, "{what} {name}: {}", errno_text(*errno))
}

/// Where the engine's diagnostics go, and its request for interim
/// statistics (conv=noerror prints them after each read error).
pub trait Events {
    fn diagnostic(&self, diagnostic: Diagnostic);
    fn statistics(&self);
    /// status=progress: a tick has passed; print the progress line.
    fn progress(&self);
    /// About to fdatasync/fsync, which can take long (GNU prints a last
    /// progress line first).
    fn before_sync(&self);
}

/// Why ddx will not run a copy: one line, without the program name, made
/// where the decision is (the option table, the guard, a map that cannot
/// serve, a person's "no"), printed before anything is opened for writing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);
