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

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use crate::ends::{Input, Kind, Whence};
use crate::engine::backend::BulkShape;
use crate::engine::cache::{CacheDropper, DropBehind};
use crate::engine::diagnostic::{BufferKind, Diagnostic};
use crate::operands::{Conv, CopyPlan, IoFlags, RecordsAndBytes, StatusLevel};
use crate::sys::buffer::AlignedBuf;
use crate::sys::file;
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

/// A read's result, and the warning it gave, if any.
type ReadOutcome = (Result<usize, Errno>, Option<Box<Diagnostic>>);

/// The writer has gone away: the reader stops.
#[derive(Debug)]
pub struct Closed;

/// Where the reader's events go, and where its buffers come from.
pub trait Sink {
    fn send(&mut self, event: Event) -> Result<(), Closed>;
    /// A free buffer of `len` bytes: a recycled one, or a new one while the
    /// backend's queue depth allows. Err(None) when allocation failed.
    fn buffer(&mut self, len: usize) -> Result<AlignedBuf, Option<Closed>>;
}

pub struct Reader {
    plan: Arc<CopyPlan>,
    input: Input,
    fullblock: bool,
    direct: bool,
    warn_partial_read: bool,
    quiet: bool,
    /// The previous read's result (GNU's prev_nread): -1 error, else bytes.
    previous: isize,
    cache: CacheDropper,
    records_read: u64,
    bulk: Option<BulkShape>,
    /// Bytes already copied by offload before bulk reading took over.
    bulk_done: u64,
    skipped: bool,
    /// The buffer skip= read into, reused for the first record.
    scratch: Option<AlignedBuf>,
    /// Drop the input's pages behind bulk reads (large copies).
    drop_behind: bool,
    /// The output, when records move by splice (see `planner::splice_fits`).
    splice_to: Option<std::os::fd::OwnedFd>,
    input_is_pipe: bool,
}

impl Reader {
    pub fn new(plan: Arc<CopyPlan>, input: Input) -> Self {
        Reader {
            fullblock: plan.input_flags.contains(IoFlags::FULLBLOCK),
            direct: plan.input_flags.contains(IoFlags::DIRECT),
            warn_partial_read: plan.warn_partial_read,
            quiet: plan.status == StatusLevel::None,
            previous: 0,
            cache: CacheDropper::new(
                plan.input_nocache,
                plan.input_nocache && plan.copies_nothing(),
            ),
            records_read: 0,
            bulk: None,
            bulk_done: 0,
            skipped: false,
            scratch: None,
            drop_behind: false,
            splice_to: None,
            input_is_pipe: false,
            input,
            plan,
        }
    }

    /// Read in large requests (see `shape`); records are then counted by
    /// the writer from the bytes.
    pub fn with_bulk(mut self, shape: Option<BulkShape>, drop_behind: bool) -> Self {
        self.bulk = shape;
        self.drop_behind = drop_behind;
        self
    }

    /// Move records with splice(2) into `output` (a descriptor of the
    /// writer's output) rather than reading them. Only for a backend where
    /// the writer acts on each event before the next read (seek= must have
    /// happened before anything is spliced).
    pub fn with_splice(mut self, output: Option<std::os::fd::OwnedFd>) -> Self {
        self.input_is_pipe = self.input.end.kind() == Kind::Pipe;
        self.splice_to = output;
        self
    }

    /// Read everything, sending events to `sink`; gives the input back.
    pub fn run(mut self, sink: &mut dyn Sink) -> Input {
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
    pub fn copy_phase(&mut self, sink: &mut dyn Sink) -> Result<(), Closed> {
        let scratch = self.scratch.take();
        match self.bulk {
            Some(shape) => self.run_bulk(sink, shape, scratch),
            None => self.run_records(sink, scratch),
        }
    }

    /// The input's descriptor, where it has one (for kernel offload
    /// between the two ends, and cache advice).
    pub fn input_fd(&self) -> Option<BorrowedFd<'_>> {
        self.input.end.fd()
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

    pub fn into_input(self) -> Input {
        self.input
    }

    /// End-of-input messages for an offloaded copy (cache advice).
    pub fn end_of_offload(&mut self) -> Option<Diagnostic> {
        self.finish_cache()
    }

    /// GNU's loop: one read per record.
    fn run_records(
        &mut self,
        sink: &mut dyn Sink,
        scratch: Option<AlignedBuf>,
    ) -> Result<(), Closed> {
        let ibs = self.plan.input_block_size;
        let buffer_len = ibs + usize::from(self.plan.conv.contains(Conv::SWAB));
        let max_records = self.plan.count.records;
        let max_bytes = self.plan.count.bytes;
        let sync = self.plan.conv.contains(Conv::SYNC);
        let noerror = self.plan.conv.contains(Conv::NOERROR);
        let pad = if self.plan.conv.intersects(Conv::BLOCK | Conv::UNBLOCK) {
            b' '
        } else {
            0
        };
        let mut partial_read = 0usize;
        let mut failed = false;
        let mut next_buffer = scratch;
        if self.splice_to.is_some() && next_buffer.is_none() {
            // GNU allocates its buffer before the first read, and a bs too
            // large for memory is an error then: splicing needs none, but
            // the same bs must fail the same way (the mapping is lazy, so
            // an unused buffer costs nothing).
            next_buffer = match sink.buffer(buffer_len) {
                Ok(buf) => Some(buf),
                Err(Some(closed)) => return Err(closed),
                Err(None) => return self.no_memory(sink, ibs),
            };
        }

        loop {
            if self.records_read >= max_records.saturating_add(u64::from(max_bytes != 0)) {
                break;
            }
            if self.splice_to.is_some() {
                let want = if self.records_read >= max_records {
                    max_bytes as usize
                } else {
                    ibs
                };
                if let Some((result, warning)) = self.splice_record(want) {
                    if let Some(w) = warning {
                        sink.send(Event::Diagnostic(w))?;
                    }
                    let len = result.unwrap_or(0);
                    if len == 0 {
                        sink.send(Event::InputEof)?;
                        break;
                    }
                    advance_offset(&mut self.input.offset, len as u64);
                    self.records_read += 1;
                    sink.send(Event::Spliced {
                        len,
                        full: len >= ibs,
                    })?;
                    continue;
                }
            }
            let mut buf = match next_buffer.take() {
                Some(buf) => buf,
                None => match sink.buffer(buffer_len) {
                    Ok(buf) => buf,
                    Err(Some(closed)) => return Err(closed),
                    Err(None) => return self.no_memory(sink, ibs),
                },
            };
            if sync && noerror {
                buf.as_mut_slice()[..ibs].fill(pad);
            }
            let want = if self.records_read >= max_records {
                max_bytes as usize
            } else {
                ibs
            };
            let (result, warning) = self.read(&mut buf.as_mut_slice()[..want]);
            if let Some(w) = warning {
                sink.send(Event::Diagnostic(w))?;
            }
            let mut len = match result {
                Ok(0) => {
                    self.cache.to_eof |= self.cache.enabled;
                    sink.send(Event::InputEof)?;
                    break;
                }
                Ok(n) => {
                    advance_offset(&mut self.input.offset, n as u64);
                    let offset = self.input.offset;
                    if let Some(fd) = self.input.end.fd() {
                        self.cache.after_io(fd, offset, n as u64);
                    }
                    n
                }
                Err(errno) => {
                    if !noerror || !self.quiet {
                        sink.send(Event::Diagnostic(Box::new(Diagnostic::ReadError {
                            file: self.input.name.clone(),
                            errno,
                        })))?;
                    }
                    if !noerror {
                        let late = self.finish_cache();
                        return sink.send(Event::End { failed: true, late });
                    }
                    sink.send(Event::Statistics)?;
                    let bad_portion = (ibs - partial_read) as u64;
                    let (recovered, diagnostics) = self.advance_after_read_error(bad_portion);
                    for diagnostic in diagnostics {
                        sink.send(Event::Diagnostic(Box::new(diagnostic)))?;
                    }
                    if !recovered {
                        // Reported as a failure at the end; no more seeking.
                        failed = true;
                        self.input.seekable = false;
                        self.input.seek_errno = Some(Errno::SPIPE);
                    }
                    if sync && partial_read == 0 {
                        // The lost block becomes a full block of padding.
                        0
                    } else {
                        next_buffer = Some(buf);
                        continue;
                    }
                }
            };

            let full = len >= ibs;
            if full {
                partial_read = 0;
            } else {
                partial_read = len;
                if sync {
                    if !noerror {
                        buf.as_mut_slice()[len..ibs].fill(pad);
                    }
                    len = ibs;
                }
            }
            self.records_read += 1;
            sink.send(Event::Record(Record { buf, len, full }))?;
        }
        let late = self.finish_cache();
        sink.send(Event::End { failed, late })
    }

    /// Bulk reads: whole chunks up to count= (in bytes), then End.
    fn run_bulk(
        &mut self,
        sink: &mut dyn Sink,
        shape: BulkShape,
        scratch: Option<AlignedBuf>,
    ) -> Result<(), Closed> {
        let ibs = self.plan.input_block_size as u64;
        let mut remaining = if self.plan.has_count() {
            self.plan
                .count
                .records
                .saturating_mul(ibs)
                .saturating_add(self.plan.count.bytes)
                .saturating_sub(self.bulk_done)
        } else {
            u64::MAX
        };
        let mut next_buffer = scratch.filter(|b| b.len() >= shape.chunk);
        let mut copied = self.bulk_done;
        let mut behind = self.drop_behind.then(|| DropBehind::new(false));
        let result = self.bulk_loop(
            sink,
            shape,
            &mut remaining,
            &mut copied,
            &mut next_buffer,
            &mut behind,
        );
        if let (Some(behind), Some(fd)) = (&mut behind, self.input.end.fd()) {
            behind.finish(fd);
        }
        match result {
            Ok(true) => {}
            other => return other.map(|_| ()),
        }
        let late = self.finish_cache();
        sink.send(Event::End {
            failed: false,
            late,
        })
    }

    /// The bulk reads; Ok(false) when the stream has been handed over or
    /// ended already.
    fn bulk_loop(
        &mut self,
        sink: &mut dyn Sink,
        shape: BulkShape,
        remaining: &mut u64,
        copied: &mut u64,
        next_buffer: &mut Option<AlignedBuf>,
        behind: &mut Option<DropBehind>,
    ) -> Result<bool, Closed> {
        let ibs = self.plan.input_block_size as u64;
        while *remaining > 0 {
            let mut buf = match next_buffer.take() {
                Some(buf) => buf,
                None => match sink.buffer(shape.chunk) {
                    Ok(buf) => buf,
                    Err(Some(closed)) => return Err(closed),
                    Err(None) => return self.no_memory(sink, shape.chunk).map(|()| false),
                },
            };
            if let Some(hole) = self.whole_pieces_of_hole(shape, *copied, *remaining) {
                advance_offset(&mut self.input.offset, hole);
                *remaining -= hole;
                *copied += hole;
                // The buffer goes round again: it belongs to the pool.
                *next_buffer = Some(buf);
                sink.send(Event::Hole { len: hole })?;
                continue;
            }
            let want = (shape.chunk as u64).min(*remaining) as usize;
            if let (Some(behind), Some(fd)) = (behind.as_mut(), self.input.end.fd()) {
                let offset = self.input.offset.max(0) as u64;
                behind.before(fd, offset, want as u64);
            }
            let mut len = 0;
            let mut error = None;
            // A regular file returns short only at end of file; loop anyway
            // so that a signal-shortened read changes nothing.
            while len < want {
                match self.input.end.read(&mut buf.as_mut_slice()[len..want]) {
                    Ok(0) => break,
                    Ok(n) => len += n,
                    Err(Errno::INTR) => {}
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            if error.is_some() {
                // Hand over to the per-record loop at the record that
                // failed, so that the error is met exactly as GNU meets it.
                let good = len / ibs as usize * ibs as usize;
                let rewind = (len - good) as i64;
                if rewind > 0 && self.input.end.seek(Whence::Current(-rewind)).is_err() {
                    sink.send(Event::End {
                        failed: true,
                        late: None,
                    })?;
                    return Ok(false);
                }
                advance_offset(&mut self.input.offset, good as u64);
                *copied += good as u64;
                if good > 0 {
                    sink.send(Event::Bulk { buf, len: good })?;
                }
                self.records_read = *copied / ibs;
                self.run_records(sink, None)?;
                return Ok(false);
            }
            advance_offset(&mut self.input.offset, len as u64);
            *remaining -= len as u64;
            *copied += len as u64;
            if let (Some(behind), Some(fd)) = (behind.as_mut(), self.input.end.fd()) {
                behind.after(fd, len as u64);
            }
            if len > 0 {
                sink.send(Event::Bulk { buf, len })?;
            }
            if len < want {
                break;
            }
        }
        Ok(true)
    }

    /// If the input's next bytes are a hole (SEEK_DATA) spanning whole write
    /// blocks of the stream, skip over them and return their length: they
    /// need not be read (nor written, under conv=sparse). Bytes of the hole
    /// before the first block boundary are read as usual.
    fn whole_pieces_of_hole(
        &mut self,
        shape: BulkShape,
        copied: u64,
        remaining: u64,
    ) -> Option<u64> {
        const MAX_HOLE_EVENT: u64 = 1 << 30;
        if !shape.sparse_input || self.input.offset < 0 {
            return None;
        }
        let offset = self.input.offset as u64;
        let data = match self.input.end.next_data(offset) {
            Ok(Some(data)) => data,
            Ok(None) => self.input.end.size().ok().flatten().unwrap_or(offset),
            Err(_) => offset,
        };
        let piece = shape.write_block as u64;
        let hole = (data.saturating_sub(offset))
            .min(remaining)
            .min(MAX_HOLE_EVENT);
        // Whole pieces only, counted from the stream's start.
        let whole = if copied % piece == 0 {
            hole / piece * piece
        } else {
            0
        };
        let resume_at = offset + whole;
        if self.input.end.seek(Whence::Start(resume_at)).is_err() {
            return None;
        }
        (whole > 0).then_some(whole)
    }

    /// After a read error under noerror, put the input offset just past the
    /// bad block, whatever the kernel did with it. Returns whether that
    /// worked, and the messages to print (in order).
    fn advance_after_read_error(&mut self, bad_bytes: u64) -> (bool, Vec<Diagnostic>) {
        let name = || self.input.name.clone();
        let mut said = Vec::new();
        if !self.input.seekable {
            if self.input.seek_errno == Some(Errno::SPIPE) {
                return (true, said);
            }
            said.push(Diagnostic::CannotSeek {
                file: name(),
                errno: self.input.seek_errno,
            });
            return (false, said);
        }
        advance_offset(&mut self.input.offset, bad_bytes);
        if self.input.offset < 0 {
            said.push(Diagnostic::OffsetOverflow { file: name() });
            return (false, said);
        }
        match self.input.end.seek(Whence::Current(0)) {
            Ok(offset) if offset as i64 == self.input.offset => (true, said),
            Ok(offset) => {
                let diff = self.input.offset - offset as i64;
                let plausible = (0..=bad_bytes as i64).contains(&diff);
                if !plausible && !self.quiet {
                    said.push(Diagnostic::InvalidOffsetAfterRead);
                }
                match self.input.end.seek(Whence::Current(diff)) {
                    Ok(_) => (true, said),
                    Err(errno) => {
                        said.push(Diagnostic::CannotSeek {
                            file: name(),
                            errno: Some(errno),
                        });
                        (false, said)
                    }
                }
            }
            Err(errno) => {
                said.push(Diagnostic::CannotSeek {
                    file: name(),
                    errno: Some(errno),
                });
                (false, said)
            }
        }
    }

    fn no_memory(&mut self, sink: &mut dyn Sink, size: usize) -> Result<(), Closed> {
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
        let fd = self.input.end.fd()?;
        let result = self.cache.finish(fd, offset);
        match result {
            Err(errno) if self.plan.copies_nothing() => Some(Diagnostic::DiscardCacheFailed {
                file: self.input.name.clone(),
                errno,
            }),
            _ => None,
        }
    }

    /// One record by splice: what a read of `want` bytes would have
    /// returned (a pipe input: one splice; a file: until full or end of
    /// file, as its read would be). None when splice fails before moving
    /// anything: splicing stops, and this record and the rest are read and
    /// written, which meets a real error, on whichever end, as GNU does.
    fn splice_record(&mut self, want: usize) -> Option<ReadOutcome> {
        let output = self.splice_to.take()?;
        let input = self.input.end.fd()?;
        let mut moved = 0;
        while moved < want {
            match file::splice(input, output.as_fd(), want - moved) {
                Ok(0) => break,
                Ok(n) => {
                    moved += n;
                    if self.input_is_pipe {
                        break;
                    }
                }
                Err(Errno::INTR) => {}
                Err(_) if moved == 0 => return None,
                // The next record meets the error again, then by read.
                Err(_) => break,
            }
        }
        self.splice_to = Some(output);
        Some(self.note_read(Ok(moved), want as isize))
    }

    /// One `iread`, with the partial-read warning GNU gives once.
    fn read_once(&mut self, buf: &mut [u8]) -> ReadOutcome {
        let size = buf.len() as isize;
        let result = loop {
            match self.input.end.read(buf) {
                Err(Errno::INTR) => continue,
                // O_DIRECT's last read of a file not a multiple of the
                // block size fails with EINVAL: that is end of file.
                Err(Errno::INVAL) if self.direct && 0 < self.previous && self.previous < size => {
                    break Ok(0)
                }
                other => break other,
            }
        };
        self.note_read(result, size)
    }

    /// After a read of up to `size` bytes: GNU's partial-read warning
    /// (once) and its memory of the previous read.
    fn note_read(&mut self, result: Result<usize, Errno>, size: isize) -> ReadOutcome {
        let n = result.map_or(-1, |n| n as isize);
        let mut warning = None;
        if 0 < n && self.warn_partial_read && 0 < self.previous && self.previous < size {
            if !self.quiet {
                warning = Some(Box::new(Diagnostic::PartialRead {
                    bytes: self.previous as u64,
                }));
            }
            self.warn_partial_read = false;
        }
        self.previous = n;
        (result, warning)
    }

    /// dd's `iread_fnc`: one read, or reads until full with fullblock.
    fn read(&mut self, buf: &mut [u8]) -> (Result<usize, Errno>, Option<Box<Diagnostic>>) {
        if !self.fullblock {
            return self.read_once(buf);
        }
        let mut total = 0;
        let mut first_warning = None;
        while total < buf.len() {
            let (result, warning) = self.read_once(&mut buf[total..]);
            first_warning = first_warning.or(warning);
            match result {
                Err(e) => return (Err(e), first_warning),
                Ok(0) => break,
                Ok(n) => total += n,
            }
        }
        (Ok(total), first_warning)
    }

    /// skip=: lseek when possible, else read and discard. The outer Err is
    /// a closed sink; the inner one a fatal stop.
    fn skip(
        &mut self,
        sink: &mut dyn Sink,
        scratch: &mut Option<AlignedBuf>,
    ) -> Result<Result<(), Stop>, Closed> {
        let ibs = self.plan.input_block_size;
        let requested = self.plan.skip.total_bytes(ibs);
        let offset_before = self.input.offset;
        let mut records = self.plan.skip.records;
        let bytes = self.plan.skip.bytes;

        // Err(None): the offset does not fit an off_t, so no lseek was tried.
        let seek_result: Result<(), Option<Errno>> = match requested {
            Some(offset) => match self.input.end.seek(Whence::Current(offset as i64)) {
                Ok(_) => {
                    let mut advance = offset as i64;
                    records = 0;
                    let size = match self.input.end.size() {
                        Ok(size) => size,
                        Err(errno) => {
                            let name = self.input.name.clone();
                            sink.send(Event::Diagnostic(Box::new(Diagnostic::CannotFstat {
                                file: name,
                                errno,
                            })))?;
                            return Ok(Err(Stop::Die));
                        }
                    };
                    if let Some(size) = size.map(|s| s.min(i64::MAX as u64) as i64) {
                        if self.input.offset >= 0 && size - self.input.offset < advance {
                            // Past end of file: report the whole records not skipped.
                            records = ((advance - size) / ibs as i64) as u64;
                            advance = size - self.input.offset;
                        }
                    }
                    advance_offset(&mut self.input.offset, advance as u64);
                    Ok(())
                }
                Err(errno) => Err(Some(errno)),
            },
            None => Err(None),
        };

        if let Err(lseek_errno) = seek_result {
            if self.input.end.seek(Whence::End(0)).is_ok() {
                // Seekable, but not to there: GNU gives up.
                sink.send(Event::Diagnostic(Box::new(Diagnostic::CannotSkip {
                    file: self.input.name.clone(),
                    errno: lseek_errno.unwrap_or(Errno::OVERFLOW),
                })))?;
                return Ok(Err(Stop::Quit));
            }
            let buffer_len = ibs + usize::from(self.plan.conv.contains(Conv::SWAB));
            let mut buf = match sink.buffer(buffer_len) {
                Ok(buf) => buf,
                Err(Some(closed)) => return Err(closed),
                Err(None) => {
                    self.no_memory(sink, ibs)?;
                    return Ok(Err(Stop::Die));
                }
            };
            let mut left = RecordsAndBytes { records, bytes };
            let result = loop {
                let want = left.next_request(ibs);
                let (result, warning) = self.read(&mut buf.as_mut_slice()[..want]);
                if let Some(w) = warning {
                    sink.send(Event::Diagnostic(w))?;
                }
                match result {
                    Err(errno) => break Err(errno),
                    Ok(0) => break Ok(()),
                    Ok(n) => advance_offset(&mut self.input.offset, n as u64),
                }
                if left.complete_request() {
                    break Ok(());
                }
            };
            records = left.records;
            *scratch = Some(buf);
            if let Err(errno) = result {
                sink.send(Event::Diagnostic(Box::new(Diagnostic::ReadError {
                    file: self.input.name.clone(),
                    errno,
                })))?;
                if self.plan.conv.contains(Conv::NOERROR) {
                    sink.send(Event::Statistics)?;
                }
                return Ok(Err(Stop::Quit));
            }
        }

        let skipped_short = records != 0
            || (self.input.offset >= 0
                && match requested {
                    None => true,
                    Some(r) => r as i64 != self.input.offset - offset_before,
                });
        if skipped_short && !self.quiet {
            sink.send(Event::Diagnostic(Box::new(Diagnostic::SkipShort {
                file: self.input.name.clone(),
            })))?;
        }
        Ok(Ok(()))
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
