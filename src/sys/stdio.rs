//! Standard descriptors 0, 1 and 2 must be taken before anything is opened.
//!
//! Called from a constructor that runs before Rust's runtime: it must not
//! allocate or use std's I/O.
//!
//! If ddx starts with one of them closed (`2>&-`), the next open(2) would
//! return that number, and the statistics could land in the output file.
//! A closed descriptor is replaced by /dev/null opened in the direction that
//! makes its normal use fail with EBADF, exactly as the closed descriptor
//! would have: dd's status still reports the failure.

use std::sync::atomic::{AtomicU8, Ordering};

use rustix::fs::{Mode, OFlags};
use rustix::io::{fcntl_getfd, Errno};

/// Bit n set: descriptor n was closed at startup and holds a placeholder.
static PLACEHOLDERS: AtomicU8 = AtomicU8::new(0);

/// Whether standard descriptor `fd` was closed when ddx started (closing
/// it must then fail with EBADF, as it would have).
pub fn was_closed_at_start(fd: i32) -> bool {
    (0..3).contains(&fd) && PLACEHOLDERS.load(Ordering::Relaxed) & (1 << fd) != 0
}

pub fn guard_standard_descriptors() {
    for fd in 0..3 {
        // SAFETY: the descriptor is only probed with F_GETFD, never closed
        // or kept; the borrow ends with the call.
        let probe = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        if fcntl_getfd(probe) != Err(Errno::BADF) {
            continue;
        }
        // Reading stdin or writing stdout/stderr must fail as before.
        let direction = if fd == 0 {
            OFlags::WRONLY
        } else {
            OFlags::RDONLY
        };
        if let Ok(placeholder) = rustix::fs::open(c"/dev/null", direction, Mode::empty()) {
            // The lowest free number is `fd`, since lower ones are open;
            // keep it open for the life of the process.
            std::mem::forget(placeholder);
            PLACEHOLDERS.fetch_or(1 << fd, Ordering::Relaxed);
        }
    }
}
