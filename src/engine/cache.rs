//! posix_fadvise(DONTNEED) bookkeeping for iflag=nocache / oflag=nocache.
//!
//! Advice is given in 128 KiB steps, as GNU dd does, to keep the number of
//! system calls low; the end of the copy drops what is left, or the whole
//! rest of the file when dd's rules ask for it.

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
