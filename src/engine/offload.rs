//! Kernel offload: copy_file_range(2) between two regular files, so the
//! data never crosses into user space (and a filesystem that can share
//! extents, or copy on the server, does even less).
//!
//! Offload is tried only where bulk requests are allowed (see `shape`) and
//! no conversion needs the bytes. "Not supported here" is a value, not an
//! error: the caller then copies the ordinary way from where offload
//! stopped, which is also how a real error is met with GNU's semantics.

use std::os::fd::BorrowedFd;

use crate::sys::Errno;

/// How far offload got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offloaded {
    /// The kernel cannot do it for these files; nothing was copied.
    Unsupported,
    /// `bytes` copied, and the input ended (or the limit was reached).
    Complete { bytes: u64 },
    /// `bytes` copied (whole records), then the kernel refused to go on.
    Stopped { bytes: u64 },
}

/// The errors that mean "not for these files" rather than a failed copy.
fn means_unsupported(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::XDEV | Errno::NOSYS | Errno::OPNOTSUPP | Errno::INVAL | Errno::BADF | Errno::PERM
    )
}

/// Told about each request: before it (bytes copied so far, bytes asked
/// for) and after it (the running total).
pub trait Observer {
    fn before(&mut self, copied: u64, want: u64);
    fn after(&mut self, copied: u64);
}

/// Copy up to `limit` bytes from the inputs's offset to the output's (both
/// advance, as with read/write), in requests of `chunk` bytes that are whole
/// `record`s.
pub fn copy_range(
    input: BorrowedFd<'_>,
    output: BorrowedFd<'_>,
    limit: u64,
    chunk: usize,
    record: usize,
    observer: &mut dyn Observer,
) -> Offloaded {
    let mut copied = 0u64;
    while copied < limit {
        let want = (chunk as u64).min(limit - copied) as usize;
        observer.before(copied, want as u64);
        match rustix::fs::copy_file_range(input, None, output, None, want) {
            Ok(0) => return Offloaded::Complete { bytes: copied },
            Ok(n) => {
                copied += n as u64;
                observer.after(copied);
            }
            Err(Errno::INTR) => {}
            Err(errno) if copied == 0 && means_unsupported(errno) => return Offloaded::Unsupported,
            Err(_) => {
                // Let the ordinary path meet the error at a record boundary.
                return match finish_record(input, output, &mut copied, record, limit) {
                    true => Offloaded::Complete { bytes: copied },
                    false => Offloaded::Stopped { bytes: copied },
                };
            }
        }
    }
    Offloaded::Complete { bytes: copied }
}

/// After a failed request, complete the current record if the kernel
/// stopped inside one; true if the input ended meanwhile.
fn finish_record(
    input: BorrowedFd<'_>,
    output: BorrowedFd<'_>,
    copied: &mut u64,
    record: usize,
    limit: u64,
) -> bool {
    while *copied % record as u64 != 0 && *copied < limit {
        let want = (record as u64 - *copied % record as u64).min(limit - *copied) as usize;
        match rustix::fs::copy_file_range(input, None, output, None, want) {
            Ok(0) => return true,
            Ok(n) => *copied += n as u64,
            Err(Errno::INTR) => {}
            Err(_) => {
                // Rewind both ends to the record boundary: the ordinary
                // path re-reads the record and meets the error itself.
                let back = (*copied % record as u64) as i64;
                let _ = crate::sys::file::seek_relative(input, -back);
                let _ = crate::sys::file::seek_relative(output, -back);
                *copied -= back as u64;
                return false;
            }
        }
    }
    false
}
