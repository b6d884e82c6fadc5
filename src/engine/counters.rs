//! The copy's running totals, shared with the reporter thread.
//!
//! The engine is the only writer, so it bumps each counter with a plain
//! load and store (no locked read-modify-write in the hot loop); readers on
//! other threads see a value at most one operation old, which is all a
//! progress line or an interrupted copy's statistics need.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Counters {
    /// Set by the reporter once a second under status=progress; the copy
    /// loop then asks for a progress line between two records, as GNU dd
    /// prints it (never while blocked, always with fresh counts).
    pub progress_due: AtomicBool,
    pub records_in_full: AtomicU64,
    pub records_in_partial: AtomicU64,
    pub records_out_full: AtomicU64,
    pub records_out_partial: AtomicU64,
    pub records_truncated: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Of bytes_out, those the kernel copied (copy_file_range), for
    /// --verbose.
    pub bytes_offloaded: AtomicU64,
    /// Of bytes_out, those written uncached (RWF_DONTCACHE), for --verbose.
    pub bytes_uncached: AtomicU64,
    /// `--trim`: bytes of zeros the output discarded, and bytes it
    /// refused to (written as zeros instead), for --verbose. Set once,
    /// when the copy is over.
    pub bytes_discarded: AtomicU64,
    pub bytes_discard_refused: AtomicU64,
    /// The io_uring backend: bytes its ring copied (of bytes_offloaded),
    /// and whether it was to copy and no ring could be set up (threads
    /// copied instead), for --verbose. Set once, when the ring is done.
    pub bytes_by_uring: AtomicU64,
    pub uring_unavailable: AtomicBool,
}

/// A consistent-enough copy of the counters for printing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub records_in_full: u64,
    pub records_in_partial: u64,
    pub records_out_full: u64,
    pub records_out_partial: u64,
    pub records_truncated: u64,
    pub bytes_out: u64,
}

impl Counters {
    pub fn snapshot(&self) -> Snapshot {
        // Release stores in `bump`/`add` pair with these acquire loads, so
        // bytes_out is never behind the records counted before it.
        Snapshot {
            bytes_out: self.bytes_out.load(Ordering::Acquire),
            records_in_full: self.records_in_full.load(Ordering::Acquire),
            records_in_partial: self.records_in_partial.load(Ordering::Acquire),
            records_out_full: self.records_out_full.load(Ordering::Acquire),
            records_out_partial: self.records_out_partial.load(Ordering::Acquire),
            records_truncated: self.records_truncated.load(Ordering::Acquire),
        }
    }
}

impl Counters {
    /// True once per tick: the caller should emit a progress line now.
    #[inline]
    pub fn take_progress_due(&self) -> bool {
        // A plain load first: the flag is almost always false, and a swap
        // would be a locked instruction on every record.
        self.progress_due.load(Ordering::Relaxed)
            && self.progress_due.swap(false, Ordering::Relaxed)
    }
}

/// Single-writer increment: see the module comment.
#[inline]
pub fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

#[inline]
pub fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Release);
}
