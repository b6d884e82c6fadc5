//! The writer's side of drop-behind (see `engine::cache`): whether the
//! output's pages are dropped behind a large bulk copy, and the state of
//! that once it has begun.

use std::os::fd::BorrowedFd;

use crate::engine::cache::DropBehind;

pub enum Behind {
    /// Pages are left to the kernel.
    Off,
    /// Asked for; begins with the first bulk write.
    Ready,
    Active(DropBehind),
}

impl Behind {
    pub fn new(enabled: bool) -> Behind {
        if enabled {
            Behind::Ready
        } else {
            Behind::Off
        }
    }

    pub fn enabled(&self) -> bool {
        !matches!(self, Behind::Off)
    }

    /// About to write `len` bytes at `offset` through the cache.
    pub fn before(&mut self, fd: Option<BorrowedFd<'_>>, offset: u64, len: u64) {
        let Some(fd) = fd else {
            return;
        };
        if let Behind::Ready = self {
            *self = Behind::Active(DropBehind::new(true));
        }
        if let Behind::Active(behind) = self {
            behind.before(fd, offset, len);
        }
    }

    /// Whether the next write should leave dropping its pages to the
    /// kernel (RWF_DONTCACHE).
    pub fn uncached(&self) -> bool {
        matches!(self, Behind::Active(behind) if behind.wants_uncached())
    }

    /// About to write uncached.
    pub fn before_uncached(&mut self, fd: Option<BorrowedFd<'_>>) {
        if let (Behind::Active(behind), Some(fd)) = (self, fd) {
            behind.before_uncached(fd);
        }
    }

    /// The kernel refused the uncached write of `[offset, offset + len)`.
    pub fn uncached_refused(&mut self, offset: u64, len: u64) {
        if let Behind::Active(behind) = self {
            behind.uncached_refused(offset, len);
        }
    }

    /// `len` bytes were written.
    pub fn after(&mut self, fd: Option<BorrowedFd<'_>>, len: u64) {
        if let (Behind::Active(behind), Some(fd)) = (self, fd) {
            behind.after(fd, len);
        }
    }

    /// End of the copy: drop what is left.
    pub fn finish(&mut self, fd: Option<BorrowedFd<'_>>) {
        if let (Behind::Active(behind), Some(fd)) = (self, fd) {
            behind.finish(fd);
        }
    }
}
