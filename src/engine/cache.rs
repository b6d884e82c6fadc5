//! Page-cache hygiene.
//!
//! [`CacheDropper`]: posix_fadvise(DONTNEED) bookkeeping for GNU's
//! iflag=nocache / oflag=nocache, in 128 KiB steps as GNU gives it.
//!
//! [`DropBehind`]: ddx's default for large copies. A copy streamed through
//! the page cache evicts everything the machine had cached (the "system
//! lethargy" of the seeds) and piles up dirty pages. Past a threshold, ddx
//! starts writeback of what it wrote at once, waits for it a window later,
//! and drops both files' pages behind it, so a copy of any size leaves at
//! most about a window of its data in the cache.

use std::os::fd::BorrowedFd;

use crate::sys::file;
use crate::sys::Errno;

const STEP: u64 = 128 * 1024;
const PAGE: u64 = 4096;

#[derive(Debug, Default)]
pub struct CacheDropper {
    pub enabled: bool,
    /// Drop everything up to end of file when finishing.
    pub to_eof: bool,
    pending: u64,
}

impl CacheDropper {
    pub fn new(enabled: bool, to_eof: bool) -> Self {
        CacheDropper {
            enabled,
            to_eof,
            pending: 0,
        }
    }

    /// `len` bytes ending at `offset_after` went through the cache.
    pub fn after_io(&mut self, fd: BorrowedFd<'_>, offset_after: i64, len: u64) {
        if !self.enabled || offset_after < 0 {
            return;
        }
        self.pending += len;
        if self.pending >= STEP {
            let start = (offset_after as u64).saturating_sub(self.pending);
            let _ = file::drop_cache(fd, start, self.pending);
            self.pending = 0;
        }
    }

    /// Drop what is still pending, or everything from the current offset to
    /// end of file when `to_eof`. `offset` is None for an unseekable file.
    pub fn finish(&mut self, fd: BorrowedFd<'_>, offset: Option<i64>) -> Result<(), Errno> {
        if !self.enabled {
            return Ok(());
        }
        let offset = offset.ok_or(Errno::SPIPE)?;
        let result = if self.to_eof {
            let start = (offset as u64).saturating_sub(self.pending);
            file::drop_cache(fd, start - start % PAGE, 0)
        } else if self.pending > 0 {
            file::drop_cache(
                fd,
                (offset as u64).saturating_sub(self.pending),
                self.pending,
            )
        } else {
            Ok(())
        };
        self.pending = 0;
        result
    }
}

/// Bytes copied before drop-behind starts: small copies stay cached (they
/// are often read again right away).
pub const DROP_BEHIND_THRESHOLD: u64 = 64 << 20;
/// How far behind the copy writeback is waited for and pages dropped.
const WINDOW: u64 = 32 << 20;

/// Drop-behind state for one end: `done` bytes processed since `start`.
#[derive(Debug)]
pub struct DropBehind {
    start: u64,
    done: u64,
    /// Bytes from `start` already dropped.
    dropped: u64,
    /// Bytes from `start` whose writeback was started.
    flushing: u64,
    writes: bool,
}

impl DropBehind {
    /// For an end at file offset `start`; `writes` for the output.
    pub fn new(start: u64, writes: bool) -> Self {
        DropBehind {
            start,
            done: 0,
            dropped: 0,
            flushing: 0,
            writes,
        }
    }

    /// `len` more bytes were read or written, in order.
    pub fn advance(&mut self, fd: BorrowedFd<'_>, len: u64) {
        self.done += len;
        if self.done < DROP_BEHIND_THRESHOLD {
            return;
        }
        if self.writes && self.done - self.flushing >= WINDOW / 4 {
            let _ =
                file::start_writeback(fd, self.start + self.flushing, self.done - self.flushing);
            self.flushing = self.done;
        }
        if self.done - self.dropped >= 2 * WINDOW {
            let upto = self.done - WINDOW;
            self.drop_range(fd, upto);
        }
    }

    /// End of the copy: drop what is left (waiting for its writeback).
    pub fn finish(&mut self, fd: BorrowedFd<'_>) {
        if self.done >= DROP_BEHIND_THRESHOLD {
            let done = self.done;
            self.drop_range(fd, done);
        }
    }

    fn drop_range(&mut self, fd: BorrowedFd<'_>, upto: u64) {
        let (offset, len) = (self.start + self.dropped, upto - self.dropped);
        if self.writes {
            let _ = file::wait_writeback(fd, offset, len);
        }
        let _ = file::drop_cache(fd, offset, len);
        self.dropped = upto;
    }
}
