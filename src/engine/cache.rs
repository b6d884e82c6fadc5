//! Page-cache hygiene.
//!
//! [`CacheDropper`]: posix_fadvise(DONTNEED) bookkeeping for GNU's
//! iflag=nocache / oflag=nocache, in 128 KiB steps as GNU gives it.
//!
//! [`DropBehind`]: what ddx does where the planner decided that a copy
//! would not fit comfortably in the memory it may use
//! ([`CachePolicy::DropBehind`], see `planner::cache`). A copy streamed
//! through the page cache evicts what the machine had cached (the
//! sluggish system users of dd know) and piles up dirty pages. Once the copy has
//! moved the bytes the planner lets stay cached (`after`):
//! - pages ddx read into the cache are dropped behind it (they are clean);
//! - written pages go uncached where the kernel can (RWF_DONTCACHE, Linux
//!   6.14, ext4/XFS/Btrfs): the kernel starts their writeback at once and
//!   drops each page when it is on the device. The copy never waits for the
//!   disk, so it ends when `cp` would, and its pages leave the cache as
//!   fast as the disk takes them;
//! - elsewhere ddx does the same by hand: it starts writeback of what it
//!   wrote, and a flusher thread waits for it and drops the pages, the copy
//!   going on meanwhile unless the disk falls more than [`FLUSH_LAG`]
//!   behind. Such a copy leaves none of its data in the cache at the end.
//!
//! A file that was in the cache before ddx touched it (a hot file) stays.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};

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

/// What a copy does with the pages it brings into the page cache; the
/// planner decides (`planner::cache`), the reader and writer do it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CachePolicy {
    /// Leave them to the kernel, as cp and dd do.
    #[default]
    Keep,
    /// Leave the first `after` bytes of the copy to the kernel, then drop
    /// what follows behind the copy (see the module header).
    DropBehind { after: u64 },
}

impl CachePolicy {
    /// Bytes that stay cached before dropping begins; None: never.
    pub fn drops_after(self) -> Option<u64> {
        match self {
            CachePolicy::Keep => None,
            CachePolicy::DropBehind { after } => Some(after),
        }
    }
}

/// How far behind the copy writeback is waited for and pages dropped.
const WINDOW: u64 = 32 << 20;
/// Pages are dropped in pieces of at least this much, so that a copy in
/// small records makes a few calls per piece, not one per record.
const DROP_STEP: u64 = WINDOW / 4;
/// Data extents walked to tell a sparse file's data from its holes (past
/// them, the rest of the range counts as data).
const EXTENTS_WALKED: usize = 1024;

/// Written bytes the flusher may have yet to see to the device before the
/// copy waits for it: bounds the dirty data a copy keeps in memory.
pub const FLUSH_LAG: u64 = 256 << 20;

/// The flusher thread's stack: it only makes two system calls in a loop.
const FLUSHER_STACK: usize = 64 * 1024;

/// Whether most (90%) of what a copy is about to read or overwrite from
/// `offset` on is already cached, judged on the next [`HOT_HORIZON`] of it
/// (nothing, for a new file): counting a whole large file's pages would
/// cost more than the judgement is worth.
fn was_hot(fd: BorrowedFd<'_>, offset: u64) -> bool {
    mostly_cached(fd, offset, HOT_HORIZON)
}

/// Whether 90% of the data in the next `horizon` bytes of a file from
/// `offset` (to its end at most; `horizon` of a device, whose size fstat
/// does not give) is in the page cache: not all, since reclaim (memory
/// pressure, DAMON) takes a page here and there from a file in use. Only
/// data counts: a sparse image's holes are never cached (nothing reads
/// them), and counting them would call its cached data cold. False for
/// nothing to judge.
pub fn mostly_cached(fd: BorrowedFd<'_>, offset: u64, horizon: u64) -> bool {
    let len = match file::usable_size(fd) {
        Ok(Some(size)) => (size.max(0) as u64).saturating_sub(offset).min(horizon),
        _ => horizon,
    };
    let data = file::data_in_range(fd, offset, len, EXTENTS_WALKED).unwrap_or(len);
    let pages = data.div_ceil(PAGE);
    pages > 0 && file::cached_pages(fd, offset, len).is_some_and(|c| c * 10 >= pages * 9)
}

/// How far before a range to drop also: the page cache holds a file in
/// folios of up to 2 MiB (large folios: ext4 since Linux 6.16, XFS), and
/// DONTNEED drops only folios wholly inside its range, so ranges dropped
/// one request at a time would each leave the folio they share behind.
/// The range before was dropped already (in order), so reaching back
/// into it costs nothing but frees the shared folio.
const FOLIO_REACH: u64 = 2 << 20;

/// Drop `[offset, offset + len)` and what a folio shares with the range
/// before it.
fn drop_pages(fd: BorrowedFd<'_>, offset: u64, len: u64) {
    let start = offset.saturating_sub(FOLIO_REACH);
    let _ = file::drop_cache(fd, start, len + (offset - start));
}

/// How far ahead a file is looked at to tell whether it is hot.
const HOT_HORIZON: u64 = 256 << 20;

/// Ranges written, waiting for their writeback and then dropped, by a
/// thread of their own (see the module header).
#[derive(Debug)]
struct Flusher {
    shared: std::sync::Arc<FlushQueue>,
    thread: std::thread::JoinHandle<()>,
}

#[derive(Debug, Default)]
struct FlushQueue {
    state: std::sync::Mutex<FlushState>,
    changed: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct FlushState {
    ranges: VecDeque<(u64, u64)>,
    /// Bytes queued or being flushed.
    outstanding: u64,
    closed: bool,
}

impl Flusher {
    fn start(fd: BorrowedFd<'_>) -> Option<Flusher> {
        let fd = fd.try_clone_to_owned().ok()?;
        let shared = std::sync::Arc::new(FlushQueue::default());
        let queue = std::sync::Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("ddx-flusher".into())
            .stack_size(FLUSHER_STACK)
            .spawn(move || queue.serve(fd.as_fd()))
            .ok()?;
        Some(Flusher { shared, thread })
    }

    /// Queue a written range; waits while the flusher is too far behind.
    fn push(&self, offset: u64, len: u64) {
        let Ok(mut state) = self.shared.state.lock() else {
            return;
        };
        while state.outstanding > 0 && state.outstanding + len > FLUSH_LAG {
            state = match self.shared.changed.wait(state) {
                Ok(state) => state,
                Err(_) => return,
            };
        }
        state.ranges.push_back((offset, len));
        state.outstanding += len;
        self.shared.changed.notify_all();
    }

    /// Flush everything queued, then stop the thread.
    fn finish(self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.closed = true;
            self.shared.changed.notify_all();
        }
        let _ = self.thread.join();
    }
}

impl FlushQueue {
    fn serve(&self, fd: BorrowedFd<'_>) {
        loop {
            let next = {
                let Ok(mut state) = self.state.lock() else {
                    return;
                };
                loop {
                    if let Some(range) = state.ranges.pop_front() {
                        break Some(range);
                    }
                    if state.closed {
                        break None;
                    }
                    state = match self.changed.wait(state) {
                        Ok(state) => state,
                        Err(_) => return,
                    };
                }
            };
            let Some((offset, len)) = next else {
                return;
            };
            let _ = file::wait_writeback(fd, offset, len);
            drop_pages(fd, offset, len);
            if let Ok(mut state) = self.state.lock() {
                state.outstanding -= len;
                self.changed.notify_all();
            }
        }
    }
}

/// Drop-behind state for one end: what ddx streamed through, in order,
/// and which of it ddx brought into the cache (pages that were cached
/// before ddx touched them, a hot file, are left alone).
#[derive(Debug)]
pub struct DropBehind {
    writes: bool,
    /// Bytes of the copy left to the kernel before dropping begins.
    after: u64,
    /// Bytes processed so far.
    done: u64,
    /// Ranges not yet dropped, contiguous ones merged.
    pending: VecDeque<Pending>,
    pending_bytes: u64,
    /// Bytes written since writeback was last started.
    unflushed: u64,
    /// Waits for writeback and drops written pages, off the copy's thread;
    /// None until the first written range is dropped (or if no thread).
    flusher: Option<Flusher>,
    /// The file was in the cache before the copy (its pages are then left
    /// there); decided at the first request.
    was_hot: Option<bool>,
    /// The range written last went uncached: the kernel drops it.
    last_uncached: bool,
    /// The kernel refused an uncached write (RWF_DONTCACHE): ddx drops
    /// written pages itself.
    uncached_refused: bool,
    /// Writeback was started for what was written through the cache
    /// before the first uncached write.
    early_flushed: bool,
}

/// A range of the file waiting to be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    offset: u64,
    len: u64,
    /// ddx brought it into the cache (else it was there before: kept).
    ours: bool,
}

impl DropBehind {
    /// For an input (`writes` false) or an output, dropping what comes
    /// after the first `after` bytes.
    pub fn new(writes: bool, after: u64) -> Self {
        DropBehind {
            writes,
            after,
            done: 0,
            pending: VecDeque::new(),
            pending_bytes: 0,
            unflushed: 0,
            flusher: None,
            was_hot: None,
            last_uncached: false,
            uncached_refused: false,
            early_flushed: false,
        }
    }

    /// Bytes of the copy left to the kernel before dropping begins.
    pub fn kept(&self) -> u64 {
        self.after
    }

    /// Judge now, before anything is read or written at `offset`, whether
    /// the file was in the cache before the copy.
    pub fn judge(&mut self, fd: BorrowedFd<'_>, offset: u64) {
        self.was_hot.get_or_insert_with(|| was_hot(fd, offset));
    }

    /// Past the bytes left to the kernel.
    fn dropping(&self) -> bool {
        self.done >= self.after
    }

    /// Call before an uncached write (see [`DropBehind::wants_uncached`]):
    /// the kernel drops its pages, ddx only starts the writeback of what
    /// went through the cache before.
    pub fn before_uncached(&mut self, fd: BorrowedFd<'_>) {
        self.last_uncached = true;
        if !self.early_flushed {
            self.early_flushed = true;
            for range in self.pending.iter().filter(|r| r.ours) {
                let _ = file::start_writeback(fd, range.offset, range.len);
            }
        }
    }

    /// Whether writes should now go uncached (RWF_DONTCACHE): once
    /// dropping has begun, the kernel then writes each page back at once
    /// and drops it when it is on the device, and the copy never waits for
    /// the disk (a copy ends as soon as `cp` would, with nothing of it left
    /// in the cache once the device has it). Not for a hot file, whose
    /// pages stay.
    pub fn wants_uncached(&self) -> bool {
        self.writes && self.dropping() && !self.uncached_refused && self.was_hot == Some(false)
    }

    /// The kernel cannot write uncached here: `[offset, offset + len)`
    /// was written the ordinary way, and ddx drops from now on.
    pub fn uncached_refused(&mut self, offset: u64, len: u64) {
        self.uncached_refused = true;
        self.last_uncached = false;
        self.push(offset, len, true);
    }

    /// Call before reading or writing `[offset, offset + len)`: notes
    /// whether ddx is bringing it into the cache.
    pub fn before(&mut self, fd: BorrowedFd<'_>, offset: u64, len: u64) {
        self.last_uncached = false;
        // Judged once, from what was cached before ddx touched the file:
        // range by range, a read would find the kernel's readahead for
        // ddx's previous read, and pages reclaimed here and there (memory
        // pressure, DAMON) would make a hot file look cold.
        let ours = !*self.was_hot.get_or_insert_with(|| was_hot(fd, offset));
        // The bytes left to the kernel are not tracked at all.
        if self.done.saturating_add(len) > self.after {
            self.push(offset, len, ours);
        }
    }

    fn push(&mut self, offset: u64, len: u64, ours: bool) {
        self.pending_bytes += len;
        if let Some(last) = self.pending.back_mut() {
            if last.ours == ours && last.offset + last.len == offset {
                last.len += len;
                return;
            }
        }
        self.pending.push_back(Pending { offset, len, ours });
    }

    /// After the range noted last has been read or written.
    pub fn after(&mut self, fd: BorrowedFd<'_>, len: u64) {
        self.done += len;
        if !self.dropping() {
            return;
        }
        if self.writes && !self.last_uncached {
            // Start writeback early, without waiting, so that the wait a
            // window later finds it done.
            self.unflushed += len;
            if self.unflushed >= DROP_STEP {
                if let Some(last) = self.pending.back().filter(|r| r.ours) {
                    let end = last.offset + last.len;
                    let begin = end.saturating_sub(self.unflushed).max(last.offset);
                    let _ = file::start_writeback(fd, begin, end - begin);
                }
                self.unflushed = 0;
            }
        }
        if self.pending_bytes >= WINDOW + DROP_STEP {
            self.drop_front(fd, self.pending_bytes - WINDOW);
        }
    }

    /// Drop the oldest `bytes` of what is pending.
    fn drop_front(&mut self, fd: BorrowedFd<'_>, mut bytes: u64) {
        while bytes > 0 {
            let Some(front) = self.pending.front_mut() else {
                break;
            };
            let take = front.len.min(bytes);
            let piece = Pending {
                len: take,
                ..*front
            };
            front.offset += take;
            front.len -= take;
            if front.len == 0 {
                self.pending.pop_front();
            }
            self.pending_bytes -= take;
            bytes -= take;
            self.drop_range(fd, piece);
        }
    }

    /// End of the copy: drop what is left (waiting for its writeback).
    pub fn finish(&mut self, fd: BorrowedFd<'_>) {
        self.drop_front(fd, self.pending_bytes);
        if let Some(flusher) = self.flusher.take() {
            flusher.finish();
        }
    }

    fn drop_range(&mut self, fd: BorrowedFd<'_>, range: Pending) {
        let Pending { offset, len, ours } = range;
        if !ours {
            return;
        }
        if self.writes {
            if self.flusher.is_none() {
                self.flusher = Flusher::start(fd);
            }
            if let Some(flusher) = &self.flusher {
                flusher.push(offset, len);
                return;
            }
            let _ = file::wait_writeback(fd, offset, len);
        }
        drop_pages(fd, offset, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn only_what_follows_the_kept_bytes_is_tracked_in_merged_ranges() {
        // /dev/null: nothing is cached or dropped, the bookkeeping is all.
        let null = std::fs::File::open("/dev/null").unwrap();
        let fd = null.as_fd();
        let mut behind = DropBehind::new(false, 4 * MIB);
        for i in 0..100 {
            behind.before(fd, i * MIB, MIB);
            behind.after(fd, MIB);
            assert!(behind.pending.len() <= 1, "contiguous ranges merge");
            if i < 4 {
                assert_eq!(behind.pending_bytes, 0, "the first 4 MiB stay");
            }
            assert!(behind.pending_bytes < WINDOW + DROP_STEP);
        }
        let front = behind.pending[0];
        assert_eq!(front.offset + front.len, 100 * MIB);
        assert!(front.len >= WINDOW, "a window's worth is kept pending");
        behind.finish(fd);
        assert!(behind.pending.is_empty() && behind.pending_bytes == 0);
    }
}
