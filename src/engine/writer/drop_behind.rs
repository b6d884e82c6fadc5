//! The writer's side of drop-behind (see `engine::cache`): whether the
//! output's pages are dropped behind the copy, from which byte on, and the
//! state of that once the copy has begun.

use std::os::fd::BorrowedFd;

use crate::engine::cache::{CachePolicy, DropBehind};

/// Writes smaller than this, or not on page boundaries, go through the
/// cache even where writes are uncached: an uncached page written in part
/// leaves the cache once on the device, and the next record's write to it
/// would read it back first.
const UNCACHED_MIN: usize = 64 * 1024;
const PAGE: u64 = 4096;

pub enum Dropping {
    /// Pages are left to the kernel.
    Off,
    /// Asked for; begins once the output is positioned (seek=).
    Ready {
        after: u64,
    },
    Active(DropBehind),
}

impl Dropping {
    pub fn new(policy: CachePolicy) -> Dropping {
        match policy.drops_after() {
            Some(after) => Dropping::Ready { after },
            None => Dropping::Off,
        }
    }

    /// Bytes left to the kernel before dropping begins; None: no dropping.
    pub fn drops_after(&self) -> Option<u64> {
        match self {
            Dropping::Off => None,
            Dropping::Ready { after } => Some(*after),
            Dropping::Active(behind) => Some(behind.kept()),
        }
    }

    /// The output is positioned at `offset` and nothing is written yet:
    /// judge now whether its pages were cached before the copy (a record
    /// moved by splice is only heard of once written).
    pub fn start(&mut self, fd: Option<BorrowedFd<'_>>, offset: u64) {
        let (Dropping::Ready { after }, Some(fd)) = (&*self, fd) else {
            return;
        };
        let mut behind = DropBehind::new(true, *after);
        behind.judge(fd, offset);
        *self = Dropping::Active(behind);
    }

    /// About to write `len` bytes at `offset` through the cache.
    pub fn before(&mut self, fd: Option<BorrowedFd<'_>>, offset: u64, len: u64) {
        let Some(fd) = fd else {
            return;
        };
        if let Dropping::Ready { after } = self {
            *self = Dropping::Active(DropBehind::new(true, *after));
        }
        if let Dropping::Active(behind) = self {
            behind.before(fd, offset, len);
        }
    }

    /// Whether a write of `len` bytes at `offset` should leave dropping
    /// its pages to the kernel (RWF_DONTCACHE).
    pub fn uncached(&self, offset: u64, len: usize) -> bool {
        matches!(self, Dropping::Active(behind) if behind.wants_uncached())
            && len >= UNCACHED_MIN
            && offset % PAGE == 0
            && len as u64 % PAGE == 0
    }

    /// About to write uncached.
    pub fn before_uncached(&mut self, fd: Option<BorrowedFd<'_>>) {
        if let (Dropping::Active(behind), Some(fd)) = (self, fd) {
            behind.before_uncached(fd);
        }
    }

    /// The kernel refused the uncached write of `[offset, offset + len)`.
    pub fn uncached_refused(&mut self, offset: u64, len: u64) {
        if let Dropping::Active(behind) = self {
            behind.uncached_refused(offset, len);
        }
    }

    /// `len` bytes were written.
    pub fn after(&mut self, fd: Option<BorrowedFd<'_>>, len: u64) {
        if let (Dropping::Active(behind), Some(fd)) = (self, fd) {
            behind.after(fd, len);
        }
    }

    /// End of the copy: drop what is left.
    pub fn finish(&mut self, fd: Option<BorrowedFd<'_>>) {
        if let (Dropping::Active(behind), Some(fd)) = (self, fd) {
            behind.finish(fd);
        }
    }
}
