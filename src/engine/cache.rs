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

use std::collections::VecDeque;
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

/// Drop-behind state for one end: what ddx streamed through, in order,
/// and which of it ddx brought into the cache (pages that were cached
/// before ddx touched them, a hot file, are left alone).
#[derive(Debug)]
pub struct DropBehind {
    writes: bool,
    /// Bytes processed so far.
    done: u64,
    /// Ranges not yet dropped: (offset, len, brought in by ddx).
    pending: VecDeque<(u64, u64, bool)>,
    pending_bytes: u64,
    /// Bytes written since writeback was last started.
    unflushed: u64,
}

impl DropBehind {
    pub fn new(writes: bool) -> Self {
        DropBehind {
            writes,
            done: 0,
            pending: VecDeque::new(),
            pending_bytes: 0,
            unflushed: 0,
        }
    }

    /// Call before reading or writing `[offset, offset + len)`: notes
    /// whether ddx is bringing it into the cache.
    pub fn before(&mut self, fd: BorrowedFd<'_>, offset: u64, len: u64) {
        let pages = len.div_ceil(PAGE);
        let already_cached = file::cached_pages(fd, offset, len).is_some_and(|c| c >= pages);
        self.pending.push_back((offset, len, !already_cached));
        self.pending_bytes += len;
    }

    /// After the range noted last has been read or written.
    pub fn after(&mut self, fd: BorrowedFd<'_>, len: u64) {
        self.done += len;
        if self.done < DROP_BEHIND_THRESHOLD {
            return;
        }
        if self.writes {
            // Start writeback early, without waiting, so that the wait a
            // window later finds it done.
            self.unflushed += len;
            if self.unflushed >= WINDOW / 4 {
                if let Some(&(offset, _, true)) = self.pending.back() {
                    let end = offset + len;
                    let begin = end.saturating_sub(self.unflushed);
                    let _ = file::start_writeback(fd, begin, end - begin);
                }
                self.unflushed = 0;
            }
        }
        while self.pending_bytes > WINDOW {
            let Some((offset, len, ours)) = self.pending.pop_front() else {
                break;
            };
            self.pending_bytes -= len;
            self.drop_range(fd, offset, len, ours);
        }
    }

    /// End of the copy: drop what is left (waiting for its writeback).
    pub fn finish(&mut self, fd: BorrowedFd<'_>) {
        if self.done < DROP_BEHIND_THRESHOLD {
            return;
        }
        while let Some((offset, len, ours)) = self.pending.pop_front() {
            self.drop_range(fd, offset, len, ours);
        }
        self.pending_bytes = 0;
    }

    fn drop_range(&self, fd: BorrowedFd<'_>, offset: u64, len: u64, ours: bool) {
        if !ours {
            return;
        }
        if self.writes {
            let _ = file::wait_writeback(fd, offset, len);
        }
        let _ = file::drop_cache(fd, offset, len);
    }
}
