//! The reading half of a copy: skip=, then one read per record, exactly as
//! GNU dd reads (sizes, fullblock, count=, noerror and conv=sync padding).
//!
//! The reader prints nothing and writes nothing: it turns what happens into
//! a stream of [`Event`]s for the writing half. Backends differ only in how
//! the stream travels (a direct call, or a channel between two threads),
//! so every backend reads the same bytes in the same requests.
//!
//! Buffer ownership: a buffer handed out by the [`Sink`] belongs to the
//! reader until it is sent inside an `Event::Record`; from then on it
//! belongs to the writer, which gives it back to the sink when done.

mod bulk;
mod iread;
mod records;
mod skip;

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use crate::diagnostic::{BufferKind, Diagnostic};
use crate::engine::cache::CacheDropper;
use crate::engine::shape::BulkShape;
use crate::engine::stream::Input;
use crate::operands::{CopyPlan, IoFlags, StatusLevel};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// A fatal stop: dd's `quit(EXIT_FAILURE)` or `die`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Print the statistics and exit 1.
    Quit,
    /// Exit 1 without statistics (dd's `die`, e.g. no memory).
    Die,
}

/// One record as read (after conv=sync padding).
#[derive(Debug)]
pub struct Record {
    pub buf: AlignedBuf,
    /// Bytes of `buf` to pass on.
    pub len: usize,
    /// A full ibs-sized read (GNU's "N" in "N+M records in").
    pub full: bool,
}

/// What the reader tells the writer, in the order it must be acted upon.
#[derive(Debug)]
pub enum Event {
    /// skip= is done: the writer may now apply seek=.
    Skipped,
    /// A message to print at this point of the stream.
    /// (Boxed: messages are rare, records are not, and every event moves.)
    Diagnostic(Box<Diagnostic>),
    /// conv=noerror: print the statistics now.
    Statistics,
    Record(Record),
    /// `len` bytes of one record moved by splice(2) straight to the
    /// output: the writer only counts them.
    Spliced {
        len: usize,
        full: bool,
    },
    /// Bulk mode: `len` bytes of whole records, as one request.
    Bulk {
        buf: AlignedBuf,
        len: usize,
    },
    /// Bulk mode: `len` bytes of a hole in the input (zeros, never read),
    /// starting and ending on write-block boundaries of the stream.
    Hole {
        len: u64,
    },
    /// Input finished. `failed`: a read error ended it (without noerror).
    /// `late`: a message to print after the output is synchronised.
    End {
        failed: bool,
        late: Option<Diagnostic>,
    },
    Stop(Stop),
    /// A read met end of file (GNU then advises the output's cache to
    /// end of file too, under oflag=nocache without notrunc).
    InputEof,
}

/// The writer has gone away: the reader stops.
#[derive(Debug)]
pub struct Closed;

/// Where the reader's events go, and where its buffers come from.
pub trait Sink {
    fn send(&mut self, event: Event) -> Result<(), Closed>;
    /// Write a record (the first `len` bytes of `buf`) at once, where the
    /// sink is the writer itself and the record needs nothing but
    /// writing: the reader keeps a buffer of the same length for the next
    /// read (`buf`, or one the output gave for it), and no event is made
    /// (GNU's loop at its cost per record). None: send the record as an
    /// event.
    fn write_now(
        &mut self,
        _buf: &mut AlignedBuf,
        _len: usize,
        _full: bool,
    ) -> Option<Result<(), Closed>> {
        None
    }
    /// A free buffer of `len` bytes: a recycled one, or a new one while the
    /// backend's queue depth allows. Err(None) when allocation failed.
    fn buffer(&mut self, len: usize) -> Result<AlignedBuf, Option<Closed>>;
}

/// How the reader reads, fixed for the copy.
#[derive(Debug, Clone, Copy)]
struct Settings {
    fullblock: bool,
    direct: bool,
    quiet: bool,
    /// Read in large requests (see `planner::bulk_shape`).
    bulk: Option<BulkShape>,
    /// Drop the input's pages behind bulk reads once this many bytes have
    /// been read (see `engine::cache`); None: leave them to the kernel.
    drop_after: Option<u64>,
    /// A pipe returns what it holds: one splice per record.
    input_is_pipe: bool,
}

pub struct Reader {
    plan: Arc<CopyPlan>,
    input: Input,
    settings: Settings,
    /// GNU warns once about a short read, then no more.
    warn_partial_read: bool,
    /// The previous read's result (GNU's prev_nread): -1 error, else bytes.
    previous: isize,
    cache: CacheDropper,
    records_read: u64,
    /// Bytes already copied by offload before bulk reading took over.
    bulk_done: u64,
    skipped: bool,
    /// The buffer skip= read into, reused for the first record.
    scratch: Option<AlignedBuf>,
    /// The output, when records move by splice (see `planner::splice_fits`).
    splice_to: Option<std::os::fd::OwnedFd>,
}

impl Reader {
    pub fn new(plan: Arc<CopyPlan>, input: Input) -> Self {
        Reader {
            settings: Settings {
                fullblock: plan.input_flags.contains(IoFlags::FULLBLOCK),
                direct: plan.input_flags.contains(IoFlags::DIRECT),
                quiet: plan.status == StatusLevel::None,
                bulk: None,
                drop_after: None,
                input_is_pipe: false,
            },
            warn_partial_read: plan.warn_partial_read,
            previous: 0,
            cache: CacheDropper::new(
                plan.input_nocache,
                plan.input_nocache && plan.copies_nothing(),
            ),
            records_read: 0,
            bulk_done: 0,
            skipped: false,
            scratch: None,
            splice_to: None,
            input,
            plan,
        }
    }

    /// Read in large requests (see `shape`); records are then counted by
    /// the writer from the bytes. Their pages are dropped behind the
    /// reads after `drop_after` bytes, if given.
    pub fn with_bulk(mut self, shape: Option<BulkShape>, drop_after: Option<u64>) -> Self {
        self.settings.bulk = shape;
        self.settings.drop_after = drop_after;
        self
    }

    /// Move records with splice(2) into `output` (a descriptor of the
    /// writer's output) rather than reading them. Only for a backend where
    /// the writer acts on each event before the next read (seek= must have
    /// happened before anything is spliced).
    pub fn with_splice(mut self, output: Option<std::os::fd::OwnedFd>) -> Self {
        self.settings.input_is_pipe = self.input.stream.capabilities().splices;
        self.splice_to = output;
        self
    }

    /// Read everything, sending events to `sink`; gives the input back.
    pub fn run<S: Sink>(mut self, sink: &mut S) -> Input {
        if self.skip_phase(sink).unwrap_or(false) {
            let _ = self.copy_phase(sink);
        }
        self.input
    }

    /// skip=, then `Event::Skipped`. Returns whether copying goes on
    /// (false after a fatal stop, a closed sink, or count=0, whose End has
    /// then been sent). Does nothing the second time.
    pub fn skip_phase(&mut self, sink: &mut dyn Sink) -> Result<bool, Closed> {
        if self.skipped {
            return Ok(!self.plan.copies_nothing());
        }
        self.skipped = true;
        if !self.plan.skip.is_zero() {
            let mut scratch = self.scratch_slot();
            let skipped = self.skip(sink, &mut scratch)?;
            self.scratch = scratch;
            if let Err(stop) = skipped {
                sink.send(Event::Stop(stop))?;
                return Ok(false);
            }
        }
        sink.send(Event::Skipped)?;
        if self.plan.copies_nothing() {
            let late = self.finish_cache();
            sink.send(Event::End {
                failed: false,
                late,
            })?;
            return Ok(false);
        }
        Ok(true)
    }

    fn scratch_slot(&mut self) -> Option<AlignedBuf> {
        self.scratch.take()
    }

    /// The reads after skip=, in bulk or one per record.
    pub fn copy_phase<S: Sink>(&mut self, sink: &mut S) -> Result<(), Closed> {
        let scratch = self.scratch.take();
        match self.settings.bulk {
            Some(shape) => self.run_bulk(sink, shape, scratch),
            None => self.run_records(sink, scratch),
        }
    }

    /// The input's descriptor, where it has one (for kernel offload
    /// between the two ends, and cache advice).
    pub fn input_fd(&self) -> Option<BorrowedFd<'_>> {
        self.input.stream.fd()
    }

    /// Offload copied `bytes` (whole records) from the input's position:
    /// account for them so that reading goes on from there.
    pub fn resume_after_offload(&mut self, bytes: u64) {
        advance_offset(&mut self.input.offset, bytes);
        self.records_read = bytes / self.plan.input_block_size as u64;
        self.bulk_done = bytes;
    }

    /// Whether the input can seek: then a read(2) returns without waiting
    /// on anyone (a file, a disk), unlike one on a pipe or a terminal.
    pub fn input_seekable(&self) -> bool {
        self.input.seekable
    }

    /// The input is a descriptor (not an end that makes its own
    /// connections as it goes, such as an object's HTTP client).
    pub fn input_has_descriptor(&self) -> bool {
        self.input.stream.fd().is_some()
    }

    pub fn into_input(self) -> Input {
        self.input
    }

    /// End-of-input messages for an offloaded copy (cache advice).
    pub fn end_of_offload(&mut self) -> Option<Diagnostic> {
        self.finish_cache()
    }

    /// GNU's "error reading", and what the end knows beyond the errno.
    fn send_read_error<S: Sink + ?Sized>(
        &mut self,
        sink: &mut S,
        errno: Errno,
    ) -> Result<(), Closed> {
        let detail = self.input.stream.take_detail();
        let diagnostic = Diagnostic::ReadError {
            file: self.input.name.clone(),
            errno,
        };
        sink.send(Event::Diagnostic(Box::new(diagnostic.explained(detail))))?;
        Ok(())
    }

    fn no_memory<S: Sink + ?Sized>(&mut self, sink: &mut S, size: usize) -> Result<(), Closed> {
        sink.send(Event::Diagnostic(Box::new(Diagnostic::NoMemory {
            buffer: BufferKind::Input,
            size,
        })))?;
        sink.send(Event::Stop(Stop::Die))
    }

    /// End-of-input cache advice; an error matters only for count=0, where
    /// GNU reports it (after the output is synchronised).
    fn finish_cache(&mut self) -> Option<Diagnostic> {
        let offset = self.input.seekable.then_some(self.input.offset);
        let fd = self.input.stream.fd()?;
        let result = self.cache.finish(fd, offset);
        match result {
            Err(errno) if self.plan.copies_nothing() => Some(Diagnostic::DiscardCacheFailed {
                file: self.input.name.clone(),
                errno,
            }),
            _ => None,
        }
    }
}

/// Add to GNU's input offset, which turns negative for good on overflow.
pub fn advance_offset(offset: &mut i64, n: u64) {
    if *offset >= 0 {
        *offset = i64::try_from(n)
            .ok()
            .and_then(|n| offset.checked_add(n))
            .unwrap_or(-1);
    }
}
