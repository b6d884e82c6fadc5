//! io_uring: a bulk copy with many reads and writes in flight at once.
//!
//! The threads backend overlaps one read with one write. A device with a
//! deep queue (an SSD, a network block device, a RAID) is only fully busy
//! with several requests outstanding, so here up to the queue depth of
//! chunk-sized reads are in flight, each followed by its positional write
//! as soon as it is complete. This runs only where records are decoupled
//! from requests (see `shape`): the caller then counts records from the
//! bytes, exactly as for kernel offload, and takes over the ordinary way
//! (at a record boundary) when anything fails, so an error is met and
//! reported as GNU dd meets it.
//!
//! Ordering rules, which keep the output what GNU's would be:
//! - reads run ahead freely (reading is harmless), but a chunk is written
//!   only once every chunk before it has been read in full, so a read error
//!   or end of input never leaves data beyond it in the output;
//! - the copy is reported done up to the first chunk not yet written, so the
//!   counters and the file offsets handed back never claim a gap.
//!
//! Ownership rule for the buffers (the one `unsafe` contract here): a
//! slot's buffer belongs to the kernel from the moment its request is
//! pushed until its completion is reaped; the loop never touches a slot in
//! flight, and never returns (dropping the buffers) while any request is
//! in flight: every exit path first waits for all completions.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, BorrowedFd};

use io_uring::{opcode, types, IoUring};

use crate::engine::offload::Offloaded;
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// Told about each request, in the order of the copy: before a chunk is
/// read, before it is written (offsets relative to the copy's start), and
/// each time the prefix that is both read and written grows.
pub trait Observer {
    fn before_read(&mut self, offset: u64, len: u64);
    fn before_write(&mut self, offset: u64, len: u64);
    fn after(&mut self, copied: u64);
}

/// One copy: `limit` bytes (or to end of input) from `input` at
/// `input_start` to `output` at `output_start`.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    pub input: BorrowedFd<'a>,
    pub output: BorrowedFd<'a>,
    pub input_start: u64,
    pub output_start: u64,
    pub limit: u64,
    /// Bytes per request: whole records.
    pub chunk: usize,
    pub queue_depth: usize,
}

/// Bytes in flight at most: a deeper queue of large chunks gains nothing
/// and would hold more memory (and more unflushed cache) than is useful.
const MAX_IN_FLIGHT: usize = 32 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Free,
    Reading,
    /// Read in full (or to end of input), waiting for its turn to be written.
    Read,
    Writing,
}

struct Slot {
    buf: AlignedBuf,
    phase: Phase,
    /// Which chunk of the copy.
    index: u64,
    /// Bytes asked for (reading), then bytes held (once read).
    want: usize,
    /// Bytes read so far; then bytes written so far.
    progress: usize,
}

/// Whether this kernel lets ddx use io_uring for reads and writes (it may
/// be compiled out, disabled by `kernel.io_uring_disabled`, or refused by a
/// seccomp filter in a container).
pub fn available() -> bool {
    ring(2).is_some()
}

fn ring(entries: u32) -> Option<IoUring> {
    let ring = IoUring::new(entries).ok()?;
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe).ok()?;
    (probe.is_supported(opcode::Read::CODE) && probe.is_supported(opcode::Write::CODE))
        .then_some(ring)
}

/// Copy `job`. `Unsupported` when no ring can be had (nothing copied);
/// `Stopped` at the first chunk that failed, with every chunk before it
/// copied; `Complete` at end of input or the limit. The file offsets are
/// left where a read(2)/write(2) copy of the same bytes would leave them.
pub fn copy(job: Job<'_>, observer: &mut dyn Observer) -> Offloaded {
    let depth = job.queue_depth.clamp(1, (MAX_IN_FLIGHT / job.chunk).max(1));
    let Some(mut ring) = ring(depth.next_power_of_two() as u32) else {
        return Offloaded::Unsupported;
    };
    let mut slots = Vec::with_capacity(depth);
    for _ in 0..depth {
        let Ok(buf) = AlignedBuf::new(job.chunk) else {
            break;
        };
        slots.push(Slot {
            buf,
            phase: Phase::Free,
            index: 0,
            want: 0,
            progress: 0,
        });
    }
    if slots.is_empty() {
        return Offloaded::Unsupported;
    }
    let mut copy = Copy {
        job,
        next_read: 0,
        next_write: 0,
        input_end: None,
        failed: None,
        written: BTreeMap::new(),
        copied_chunks: 0,
        copied: 0,
        in_flight: 0,
    };
    if copy.run(&mut ring, &mut slots, observer).is_err() {
        // The kernel may still write into the buffers: they must outlive
        // it, so they are leaked rather than freed (this cannot happen
        // short of a broken kernel, and the process ends soon after).
        std::mem::forget(slots);
        std::mem::forget(ring);
        copy.failed = Some(copy.copied_chunks);
    }
    let done = copy.copied;
    let positioned = crate::sys::file::seek_to(job.input, job.input_start + done)
        .and_then(|()| crate::sys::file::seek_to(job.output, job.output_start + done));
    match (copy.failed, positioned) {
        (None, Ok(())) => Offloaded::Complete { bytes: done },
        _ => Offloaded::Stopped { bytes: done },
    }
}

/// The ring failed while requests were in flight.
struct Abandoned;

struct Copy<'a> {
    job: Job<'a>,
    /// The next chunk to read, and the next to write (in order).
    next_read: u64,
    next_write: u64,
    /// The chunk in which the input ended, once known.
    input_end: Option<u64>,
    /// The first chunk that failed.
    failed: Option<u64>,
    /// Chunks written, not yet part of the copied prefix: index → bytes.
    written: BTreeMap<u64, usize>,
    copied_chunks: u64,
    copied: u64,
    in_flight: usize,
}

impl Copy<'_> {
    /// Err when the ring itself failed with requests still in flight.
    fn run(
        &mut self,
        ring: &mut IoUring,
        slots: &mut [Slot],
        observer: &mut dyn Observer,
    ) -> Result<(), Abandoned> {
        loop {
            if self.failed.is_none() {
                self.queue_reads(ring, slots, observer);
            }
            self.queue_writes(ring, slots, observer);
            if self.in_flight == 0 {
                return Ok(());
            }
            if let Err(error) = ring.submit_and_wait(1) {
                let transient = matches!(
                    error.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                );
                if !transient {
                    return Err(Abandoned);
                }
            }
            let completions: Vec<(u64, i32)> = ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (slot, result) in completions {
                self.in_flight -= 1;
                self.complete(ring, slots, slot as usize, result, observer);
            }
        }
    }

    fn chunk_offset(&self, index: u64) -> u64 {
        index * self.job.chunk as u64
    }

    fn queue_reads(&mut self, ring: &mut IoUring, slots: &mut [Slot], observer: &mut dyn Observer) {
        while self.input_end.is_none() && self.chunk_offset(self.next_read) < self.job.limit {
            let Some(free) = slots.iter().position(|s| s.phase == Phase::Free) else {
                return;
            };
            let offset = self.chunk_offset(self.next_read);
            let want = (self.job.chunk as u64).min(self.job.limit - offset) as usize;
            observer.before_read(offset, want as u64);
            let slot = &mut slots[free];
            slot.phase = Phase::Reading;
            slot.index = self.next_read;
            slot.want = want;
            slot.progress = 0;
            self.next_read += 1;
            self.push_read(ring, slots, free);
        }
    }

    fn queue_writes(
        &mut self,
        ring: &mut IoUring,
        slots: &mut [Slot],
        observer: &mut dyn Observer,
    ) {
        while let Some(ready) = slots.iter().position(|s| {
            s.phase == Phase::Read
                && s.index == self.next_write
                && self.failed.is_none_or(|failed| s.index < failed)
        }) {
            let slot = &mut slots[ready];
            slot.phase = Phase::Writing;
            slot.progress = 0;
            observer.before_write(self.chunk_offset(slot.index), slot.want as u64);
            self.next_write += 1;
            self.push_write(ring, slots, ready);
        }
    }

    fn push_read(&mut self, ring: &mut IoUring, slots: &mut [Slot], at: usize) {
        let slot = &mut slots[at];
        let offset = self.job.input_start + self.chunk_offset(slot.index) + slot.progress as u64;
        let rest = &mut slot.buf.as_mut_slice()[slot.progress..slot.want];
        let entry = opcode::Read::new(
            types::Fd(self.job.input.as_raw_fd()),
            rest.as_mut_ptr(),
            rest.len() as u32,
        )
        .offset(offset)
        .build()
        .user_data(at as u64);
        self.push(ring, &entry);
    }

    fn push_write(&mut self, ring: &mut IoUring, slots: &mut [Slot], at: usize) {
        let slot = &mut slots[at];
        let offset = self.job.output_start + self.chunk_offset(slot.index) + slot.progress as u64;
        let rest = &slot.buf.as_slice()[slot.progress..slot.want];
        let entry = opcode::Write::new(
            types::Fd(self.job.output.as_raw_fd()),
            rest.as_ptr(),
            rest.len() as u32,
        )
        .offset(offset)
        .build()
        .user_data(at as u64);
        self.push(ring, &entry);
    }

    fn push(&mut self, ring: &mut IoUring, entry: &io_uring::squeue::Entry) {
        loop {
            // SAFETY: the entry points into a slot buffer that lives in
            // `slots` until `run` returns, and `run` returns only once
            // every request is complete (in_flight == 0); the slot is
            // marked in flight, so nothing else touches the buffer.
            let pushed = unsafe { ring.submission().push(entry) };
            if pushed.is_ok() {
                self.in_flight += 1;
                return;
            }
            // The queue is full: hand it to the kernel and try again.
            let _ = ring.submit();
        }
    }

    fn complete(
        &mut self,
        ring: &mut IoUring,
        slots: &mut [Slot],
        at: usize,
        result: i32,
        observer: &mut dyn Observer,
    ) {
        let retry = |r: i32| r == -Errno::INTR.raw_os_error() || r == -Errno::AGAIN.raw_os_error();
        let phase = slots[at].phase;
        let index = slots[at].index;
        if retry(result) && self.failed.is_none() {
            match phase {
                Phase::Reading => self.push_read(ring, slots, at),
                _ => self.push_write(ring, slots, at),
            }
            return;
        }
        if result < 0 || (phase == Phase::Writing && result == 0) {
            self.failed = Some(self.failed.map_or(index, |f| f.min(index)));
            slots[at].phase = Phase::Free;
            return;
        }
        let slot = &mut slots[at];
        slot.progress += result as usize;
        match phase {
            Phase::Reading if result == 0 => {
                // End of input inside this chunk: nothing after it counts.
                slot.want = slot.progress;
                self.input_end = Some(self.input_end.map_or(index, |e| e.min(index)));
                slot.phase = if slot.want > 0 {
                    Phase::Read
                } else {
                    Phase::Free
                };
                if slot.want == 0 {
                    self.written.insert(index, 0);
                }
            }
            Phase::Reading if slot.progress < slot.want => self.push_read(ring, slots, at),
            Phase::Reading => slot.phase = Phase::Read,
            Phase::Writing if slot.progress < slot.want => self.push_write(ring, slots, at),
            Phase::Writing => {
                slot.phase = Phase::Free;
                self.written.insert(index, slot.want);
            }
            Phase::Free | Phase::Read => unreachable!("a completion for a slot not in flight"),
        }
        // Chunks past the end of input were read as empty: free them.
        if let Some(end) = self.input_end {
            for slot in slots.iter_mut() {
                if slot.phase == Phase::Read && slot.index > end {
                    slot.phase = Phase::Free;
                }
            }
        }
        let before = self.copied;
        while let Some(bytes) = self.written.remove(&self.copied_chunks) {
            self.copied += bytes as u64;
            self.copied_chunks += 1;
            if self.input_end.is_some_and(|end| self.copied_chunks > end) {
                self.written.clear();
                break;
            }
        }
        if self.copied > before {
            observer.after(self.copied);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[derive(Default)]
    struct Trace {
        reads: Vec<(u64, u64)>,
        writes: Vec<(u64, u64)>,
        progress: Vec<u64>,
    }

    impl Observer for Trace {
        fn before_read(&mut self, offset: u64, len: u64) {
            self.reads.push((offset, len));
        }
        fn before_write(&mut self, offset: u64, len: u64) {
            self.writes.push((offset, len));
        }
        fn after(&mut self, copied: u64) {
            self.progress.push(copied);
        }
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    #[test]
    fn copies_to_end_of_input_in_order() {
        if !available() {
            eprintln!("skipped: io_uring is not available here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let data = pattern(10 * 4096 + 123);
        let mut input = std::fs::File::create(dir.path().join("in")).unwrap();
        input.write_all(&data).unwrap();
        let input = std::fs::File::open(dir.path().join("in")).unwrap();
        let output = std::fs::File::create(dir.path().join("out")).unwrap();
        let mut trace = Trace::default();
        let job = Job {
            input: input.as_fd(),
            output: output.as_fd(),
            input_start: 100,
            output_start: 7,
            limit: u64::MAX,
            chunk: 4096,
            queue_depth: 4,
        };
        let done = copy(job, &mut trace);
        let expected = (data.len() - 100) as u64;
        assert_eq!(done, Offloaded::Complete { bytes: expected });
        let out = std::fs::read(dir.path().join("out")).unwrap();
        assert_eq!(&out[7..], &data[100..]);
        assert!(out[..7].iter().all(|&b| b == 0));
        assert_eq!(trace.progress.last(), Some(&expected));
        assert!(trace.progress.windows(2).all(|w| w[0] < w[1]));
        let offsets: Vec<u64> = trace.writes.iter().map(|w| w.0).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "writes in order");
        assert_eq!(
            crate::sys::file::current_offset(output.as_fd()).unwrap() as u64,
            7 + expected
        );
        assert_eq!(
            crate::sys::file::current_offset(input.as_fd()).unwrap() as u64,
            100 + expected
        );
    }

    #[test]
    fn stops_at_the_limit() {
        if !available() {
            eprintln!("skipped: io_uring is not available here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in"), pattern(64 * 1024)).unwrap();
        let input = std::fs::File::open(dir.path().join("in")).unwrap();
        let output = std::fs::File::create(dir.path().join("out")).unwrap();
        let job = Job {
            input: input.as_fd(),
            output: output.as_fd(),
            input_start: 0,
            output_start: 0,
            limit: 5000,
            chunk: 1024,
            queue_depth: 8,
        };
        let done = copy(job, &mut Trace::default());
        assert_eq!(done, Offloaded::Complete { bytes: 5000 });
        let out = std::fs::read(dir.path().join("out")).unwrap();
        assert_eq!(out, pattern(64 * 1024)[..5000]);
    }

    #[test]
    fn a_failing_output_stops_with_nothing_claimed_beyond() {
        if !available() {
            eprintln!("skipped: io_uring is not available here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in"), pattern(16 * 1024)).unwrap();
        let input = std::fs::File::open(dir.path().join("in")).unwrap();
        // Opened for reading only: every write fails with EBADF.
        let output = std::fs::File::open(dir.path().join("in")).unwrap();
        let job = Job {
            input: input.as_fd(),
            output: output.as_fd(),
            input_start: 0,
            output_start: 0,
            limit: u64::MAX,
            chunk: 4096,
            queue_depth: 4,
        };
        assert_eq!(
            copy(job, &mut Trace::default()),
            Offloaded::Stopped { bytes: 0 }
        );
    }
}
