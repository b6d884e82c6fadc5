//! io_uring: a bulk copy with many reads and writes in flight at once.
//!
//! The threads backend overlaps one read with one write. A device with a
//! deep queue (an SSD, a network block device, a RAID) is only fully busy
//! with several requests outstanding, so here up to the queue depth of
//! chunk-sized reads are in flight, and each chunk's positional write
//! follows as soon as it is read and its turn has come. This runs only where records are decoupled
//! from requests (see `shape`): the caller then counts records from the
//! bytes, exactly as for kernel offload, and takes over the ordinary way
//! (at a record boundary) when anything fails, so an error is met and
//! reported as GNU dd meets it.
//!
//! Ordering rules, which keep the output what GNU's would be:
//! - reads run ahead freely (reading is harmless), but a chunk is written
//!   only once every chunk before it has been read in full, so a read error
//!   or end of input never leaves data beyond it in the output;
//! - one write is in flight at a time, in order: with several, the chunks
//!   after a write that fails (EIO at some offset) could already be on the
//!   device, where GNU dd would have written nothing past the failure;
//! - the copy is reported done up to the first chunk not yet written, so the
//!   counters and the file offsets handed back never claim a gap.
//!
//! The buffers are the ring's (`sys::ring`, which keeps the ownership
//! rule); this module only decides which chunk goes into which slot and
//! when it may be written.

use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;

use crate::engine::offload::Offloaded;
use crate::sys::ring::Ring;
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

/// What the copy knows of one slot of the ring.
#[derive(Debug, Clone, Copy)]
struct Slot {
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
    Ring::new(1, 4096).is_ok()
}

/// Copy `job`. `Unsupported` when no ring can be had (nothing copied);
/// `Stopped` at the first chunk that failed, with every chunk before it
/// copied; `Complete` at end of input or the limit. The file offsets are
/// left where a read(2)/write(2) copy of the same bytes would leave them.
pub fn copy(job: Job<'_>, observer: &mut dyn Observer) -> Offloaded {
    let depth = job.queue_depth.clamp(1, (MAX_IN_FLIGHT / job.chunk).max(1));
    let Ok(mut ring) = Ring::new(depth, job.chunk) else {
        return Offloaded::Unsupported;
    };
    let mut copy = Copy {
        job,
        slots: vec![
            Slot {
                phase: Phase::Free,
                index: 0,
                want: 0,
                progress: 0,
            };
            ring.slots()
        ],
        next_read: 0,
        next_write: 0,
        input_end: None,
        failed: None,
        written: BTreeMap::new(),
        copied_chunks: 0,
        copied: 0,
    };
    if copy.run(&mut ring, observer).is_err() {
        // The ring's Drop waits for what is in flight, or leaks its
        // buffers where it cannot.
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
    slots: Vec<Slot>,
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
}

impl Copy<'_> {
    /// Err when the ring itself failed with requests still in flight.
    fn run(&mut self, ring: &mut Ring, observer: &mut dyn Observer) -> Result<(), Abandoned> {
        loop {
            if self.failed.is_none() {
                self.queue_reads(ring, observer);
            }
            self.queue_writes(ring, observer);
            match ring.wait() {
                None => return Ok(()),
                Some(Ok(done)) => self.complete(ring, done.slot, done.result, observer),
                Some(Err(_)) => return Err(Abandoned),
            }
        }
    }

    fn chunk_offset(&self, index: u64) -> u64 {
        index * self.job.chunk as u64
    }

    fn queue_reads(&mut self, ring: &mut Ring, observer: &mut dyn Observer) {
        while self.input_end.is_none() && self.chunk_offset(self.next_read) < self.job.limit {
            let Some(free) = self.slots.iter().position(|s| s.phase == Phase::Free) else {
                return;
            };
            let offset = self.chunk_offset(self.next_read);
            let want = (self.job.chunk as u64).min(self.job.limit - offset) as usize;
            observer.before_read(offset, want as u64);
            self.slots[free] = Slot {
                phase: Phase::Reading,
                index: self.next_read,
                want,
                progress: 0,
            };
            self.next_read += 1;
            self.push_read(ring, free);
        }
    }

    fn queue_writes(&mut self, ring: &mut Ring, observer: &mut dyn Observer) {
        if self.slots.iter().any(|s| s.phase == Phase::Writing) {
            return;
        }
        if let Some(ready) = self.slots.iter().position(|s| {
            s.phase == Phase::Read
                && s.index == self.next_write
                && self.failed.is_none_or(|failed| s.index < failed)
        }) {
            let slot = &mut self.slots[ready];
            slot.phase = Phase::Writing;
            slot.progress = 0;
            let (index, want) = (slot.index, slot.want);
            let offset = self.chunk_offset(index);
            observer.before_write(offset, want as u64);
            self.next_write += 1;
            self.push_write(ring, ready);
        }
    }

    fn push_read(&mut self, ring: &mut Ring, at: usize) {
        let slot = self.slots[at];
        let offset = self.job.input_start + self.chunk_offset(slot.index) + slot.progress as u64;
        if let Err(errno) = ring.read(self.job.input, at, offset, slot.progress..slot.want) {
            self.refused(at, errno);
        }
    }

    fn push_write(&mut self, ring: &mut Ring, at: usize) {
        let slot = self.slots[at];
        let offset = self.job.output_start + self.chunk_offset(slot.index) + slot.progress as u64;
        if let Err(errno) = ring.write(self.job.output, at, offset, slot.progress..slot.want) {
            self.refused(at, errno);
        }
    }

    /// The ring would not take a request: the chunk fails, and the copy
    /// stops there as at any failed request.
    fn refused(&mut self, at: usize, _errno: Errno) {
        let index = self.slots[at].index;
        self.failed = Some(self.failed.map_or(index, |f| f.min(index)));
        self.slots[at].phase = Phase::Free;
    }

    fn complete(
        &mut self,
        ring: &mut Ring,
        at: usize,
        result: Result<usize, Errno>,
        observer: &mut dyn Observer,
    ) {
        let phase = self.slots[at].phase;
        let index = self.slots[at].index;
        if matches!(result, Err(Errno::INTR | Errno::AGAIN)) && self.failed.is_none() {
            match phase {
                Phase::Reading => self.push_read(ring, at),
                _ => self.push_write(ring, at),
            }
            return;
        }
        let moved = match result {
            Ok(0) if phase == Phase::Writing => None,
            Ok(n) => Some(n),
            Err(_) => None,
        };
        let Some(moved) = moved else {
            self.failed = Some(self.failed.map_or(index, |f| f.min(index)));
            self.slots[at].phase = Phase::Free;
            return;
        };
        let slot = &mut self.slots[at];
        slot.progress += moved;
        match phase {
            Phase::Reading if moved == 0 => {
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
            Phase::Reading if slot.progress < slot.want => self.push_read(ring, at),
            Phase::Reading => slot.phase = Phase::Read,
            Phase::Writing if slot.progress < slot.want => self.push_write(ring, at),
            Phase::Writing => {
                slot.phase = Phase::Free;
                self.written.insert(index, slot.want);
            }
            Phase::Free | Phase::Read => unreachable!("a completion for a slot not in flight"),
        }
        // Chunks past the end of input were read as empty: free them.
        if let Some(end) = self.input_end {
            for slot in self.slots.iter_mut() {
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

    /// A temporary directory with `in` (the pattern) and an empty `out`,
    /// both open.
    struct Files {
        dir: tempfile::TempDir,
        data: Vec<u8>,
        input: std::fs::File,
        output: std::fs::File,
    }

    impl Files {
        /// None, said on stderr, where the kernel has no io_uring.
        fn new(len: usize) -> Option<Files> {
            if !available() {
                crate::sys::skips::skip("io_uring is not available here");
                return None;
            }
            let dir = tempfile::tempdir().unwrap();
            let data = pattern(len);
            std::fs::write(dir.path().join("in"), &data).unwrap();
            let input = std::fs::File::open(dir.path().join("in")).unwrap();
            let output = std::fs::File::create(dir.path().join("out")).unwrap();
            Some(Files {
                dir,
                data,
                input,
                output,
            })
        }

        /// The whole input to the start of the output, 4 KiB at a time,
        /// four in flight: each test changes what it is about.
        fn job(&self) -> Job<'_> {
            Job {
                input: self.input.as_fd(),
                output: self.output.as_fd(),
                input_start: 0,
                output_start: 0,
                limit: u64::MAX,
                chunk: 4096,
                queue_depth: 4,
            }
        }

        fn out(&self) -> Vec<u8> {
            std::fs::read(self.dir.path().join("out")).unwrap()
        }
    }

    #[test]
    fn copies_to_end_of_input_in_order() {
        let Some(files) = Files::new(10 * 4096 + 123) else {
            return;
        };
        let mut trace = Trace::default();
        let job = Job {
            input_start: 100,
            output_start: 7,
            ..files.job()
        };
        let done = copy(job, &mut trace);
        let data = &files.data;
        let expected = (data.len() - 100) as u64;
        assert_eq!(done, Offloaded::Complete { bytes: expected });
        let out = files.out();
        assert_eq!(&out[7..], &data[100..]);
        assert!(out[..7].iter().all(|&b| b == 0));
        assert_eq!(trace.progress.last(), Some(&expected));
        assert!(trace.progress.windows(2).all(|w| w[0] < w[1]));
        let offsets: Vec<u64> = trace.writes.iter().map(|w| w.0).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "writes in order");
        assert_eq!(
            crate::sys::file::current_offset(files.output.as_fd()).unwrap() as u64,
            7 + expected
        );
        assert_eq!(
            crate::sys::file::current_offset(files.input.as_fd()).unwrap() as u64,
            100 + expected
        );
    }

    #[test]
    fn stops_at_the_limit() {
        let Some(files) = Files::new(64 * 1024) else {
            return;
        };
        let job = Job {
            limit: 5000,
            chunk: 1024,
            queue_depth: 8,
            ..files.job()
        };
        let done = copy(job, &mut Trace::default());
        assert_eq!(done, Offloaded::Complete { bytes: 5000 });
        assert_eq!(files.out(), files.data[..5000]);
    }

    #[test]
    fn a_failing_output_stops_with_nothing_claimed_beyond() {
        let Some(files) = Files::new(16 * 1024) else {
            return;
        };
        // Opened for reading only: every write fails with EBADF.
        let read_only = std::fs::File::open(files.dir.path().join("in")).unwrap();
        let job = Job {
            output: read_only.as_fd(),
            ..files.job()
        };
        assert_eq!(
            copy(job, &mut Trace::default()),
            Offloaded::Stopped { bytes: 0 }
        );
    }
}
