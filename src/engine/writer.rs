//! The writing half of a copy: seek=, then each record as GNU dd writes it:
//! straight through (one write per read, with `bs=` and no conversion) or
//! converted and re-blocked into obs-sized writes; sparse seeks, the
//! O_DIRECT tail, the final ftruncate, fdatasync/fsync.
//!
//! It consumes the reader's [`Event`]s in order and is the only place that
//! updates the statistics counters, so statistics printed at any point of
//! the stream are those GNU dd would print there.

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use crate::ends::{End, Output, Whence};
use crate::engine::cache::{CacheDropper, DropBehind};
use crate::engine::counters::{add, bump, Counters};
use crate::engine::diagnostic::{BufferKind, Diagnostic, Events};
use crate::engine::reader::{Event, Stop};
use crate::operands::{Conv, CopyPlan, IoFlags, StatusLevel};
use crate::sys::buffer::AlignedBuf;
use crate::sys::file;
use crate::sys::Errno;
use crate::transform::{is_all_zero, Blocker, Swab, Translation, Unblocker};

/// Zeros written per request for a hole without conv=sparse.
const HOLE_WRITE: usize = 1 << 20;

/// How a finished copy went, for the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub failed: bool,
    /// The copy stopped short (GNU's quit: a failed write, a read error
    /// without noerror) rather than at the end of its input or count=.
    pub stopped_short: bool,
}

/// The result of a run, as the caller acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunResult {
    /// Print the statistics; exit 1 if `failed`.
    Finished(Outcome),
    /// Exit 1 without statistics (GNU's die).
    Died,
}

/// What handling one event led to.
pub enum Handled {
    /// Keep going; a record's buffer comes back for reuse.
    Continue(Option<AlignedBuf>),
    /// The input has ended and the output is complete.
    Done {
        failed: bool,
        late: Option<Diagnostic>,
    },
}

/// Low-level output: dd's `iwrite`, with sparse seeks and the O_DIRECT tail.
struct OutputIo {
    output_block_size: usize,
    direct: bool,
    sparse: bool,
    quiet: bool,
    final_op_was_seek: bool,
    fsync_required: bool,
    cache: CacheDropper,
    /// Output offset for cache advice; -1 when unknown.
    offset: i64,
    /// Write uncached (drop-behind by the kernel, see `cache`); cleared,
    /// and `uncached_refused` set, when the kernel cannot.
    uncached: bool,
    uncached_refused: bool,
}

impl OutputIo {
    /// Write all of `buf`; returns the bytes written and, if short, why.
    fn write(
        &mut self,
        end: &mut dyn End,
        name: &[u8],
        buf: &[u8],
        events: &dyn Events,
    ) -> (usize, Option<Errno>) {
        if self.direct && buf.len() < self.output_block_size {
            if let Err(errno) = end.fd().map_or(Ok(()), file::clear_direct) {
                if !self.quiet {
                    events.diagnostic(Diagnostic::DirectOffFailed {
                        file: name.to_vec(),
                        errno,
                    });
                }
            }
            // The tail goes through the cache: make it durable and drop it.
            self.cache.enabled = true;
            self.cache.to_eof = true;
            self.fsync_required = true;
        }
        let mut written = 0;
        let mut error = None;
        while written < buf.len() {
            self.final_op_was_seek = false;
            if self.sparse && is_all_zero(buf) {
                match end.seek(Whence::Current(buf.len() as i64)) {
                    Ok(_) => {
                        self.final_op_was_seek = true;
                        written = buf.len();
                        break;
                    }
                    // Not seekable: sparse is only advice, write instead.
                    Err(_) => self.sparse = false,
                }
            }
            let result = match end.fd() {
                Some(fd) if self.uncached => file::write_uncached(fd, &buf[written..]),
                _ => end.write(&buf[written..]),
            };
            match result {
                Err(Errno::OPNOTSUPP) if self.uncached => {
                    self.uncached = false;
                    self.uncached_refused = true;
                }
                Ok(0) => {
                    // Some drivers say 0 at the end of the device.
                    error = Some(Errno::NOSPC);
                    break;
                }
                Ok(n) => written += n,
                Err(Errno::INTR) => {}
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        if written > 0 && self.offset >= 0 {
            self.offset += written as i64;
            if let Some(fd) = end.fd() {
                self.cache.after_io(fd, self.offset, written as u64);
            }
        }
        (written, error)
    }
}

pub struct Writer<'a> {
    plan: Arc<CopyPlan>,
    output: &'a mut Output,
    counters: &'a Counters,
    events: &'a dyn Events,
    conv: Conv,
    io: OutputIo,
    output_buffer: Option<AlignedBuf>,
    output_fill: usize,
    translation: Option<Translation>,
    newline: u8,
    space: u8,
    swab: Swab,
    blocker: Blocker,
    unblocker: Unblocker,
    /// Bytes read in bulk (records in are counted from it).
    bulk_in: u64,
    /// Bytes a kernel copy (offload, io_uring) moved before bulk reading
    /// took over: the stream's bulk part starts after them.
    kernel_in: u64,
    /// Zeros to write for holes without conv=sparse.
    zeros: Option<AlignedBuf>,
    /// Writeback and drop-behind for large bulk copies; created at the
    /// first bulk write when enabled.
    drop_behind: Option<Option<DropBehind>>,
    /// `--hash`/`--verify`: every byte passed on, before conversion.
    tap: Option<crate::integrity::Tap>,
    /// A write failed: the copy ends here, short of its input's end.
    write_failed: bool,
}

impl<'a> Writer<'a> {
    pub fn new(
        plan: Arc<CopyPlan>,
        output: &'a mut Output,
        counters: &'a Counters,
        events: &'a dyn Events,
    ) -> Self {
        let translation = Translation::for_conversions(plan.conv);
        let (newline, space) = translation
            .as_ref()
            .map_or((b'\n', b' '), |t| (t.newline, t.space));
        let offset = output
            .end
            .seek(Whence::Current(0))
            .map_or(-1, |at| at.min(i64::MAX as u64) as i64);
        Writer {
            conv: plan.conv,
            io: OutputIo {
                output_block_size: plan.output_block_size,
                direct: plan.output_flags.contains(IoFlags::DIRECT),
                sparse: plan.conv.contains(Conv::SPARSE),
                quiet: plan.status == StatusLevel::None,
                final_op_was_seek: false,
                fsync_required: false,
                cache: CacheDropper::new(
                    plan.output_nocache,
                    plan.output_nocache && plan.copies_nothing(),
                ),
                offset,
                uncached: false,
                uncached_refused: false,
            },
            output_buffer: None,
            output_fill: 0,
            translation,
            newline,
            space,
            swab: Swab::default(),
            blocker: Blocker::new(plan.conversion_block_size),
            unblocker: Unblocker::new(plan.conversion_block_size),
            drop_behind: None,
            tap: None,
            write_failed: false,
            bulk_in: 0,
            kernel_in: 0,
            zeros: None,
            plan,
            output,
            counters,
            events,
        }
    }

    /// Keep large bulk copies out of the page cache (see `cache`).
    pub fn with_drop_behind(mut self, enabled: bool) -> Self {
        self.drop_behind = enabled.then_some(None);
        self
    }

    /// Feed the hasher thread (`--hash`, `--verify`).
    pub fn with_tap(mut self, tap: Option<crate::integrity::Tap>) -> Self {
        self.tap = tap;
        self
    }

    /// Whether the bytes must pass through [`Writer::handle`] (a tap).
    pub fn has_tap(&self) -> bool {
        self.tap.is_some()
    }

    pub fn drop_behind_enabled(&self) -> bool {
        self.drop_behind.is_some()
    }

    /// About to write `len` bytes in bulk at the output's offset.
    fn behind_before(&mut self, len: u64) {
        self.behind_before_at(self.io.offset.max(0) as u64, len);
    }

    /// About to write `len` bytes in bulk at `offset` (an overlapped copy
    /// writes ahead of the offset it has reported; see `uring`).
    pub fn behind_before_at(&mut self, offset: u64, len: u64) {
        let Some(slot) = &mut self.drop_behind else {
            return;
        };
        let Some(fd) = self.output.end.fd() else {
            return;
        };
        slot.get_or_insert_with(|| DropBehind::new(true))
            .before(fd, offset, len);
    }

    /// Whether the next bulk write should leave dropping its pages to the
    /// kernel (RWF_DONTCACHE).
    fn behind_uncached(&self) -> bool {
        matches!(&self.drop_behind, Some(Some(behind)) if behind.wants_uncached())
    }

    /// `len` bytes were written in bulk.
    fn behind_after(&mut self, len: u64) {
        if let (Some(Some(behind)), Some(fd)) = (&mut self.drop_behind, self.output.end.fd()) {
            behind.after(fd, len);
        }
    }

    /// Offload is about to copy `len` bytes to the output.
    pub fn offload_before(&mut self, len: u64) {
        self.behind_before(len);
    }

    /// Bytes written so far.
    pub fn bytes_out(&self) -> u64 {
        self.counters
            .bytes_out
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// status=progress: GNU prints its line between records, after a write
    /// (so a line shows what has been written, never while blocked).
    fn progress_if_due(&self) {
        if self.counters.take_progress_due() {
            self.events.progress();
        }
    }

    /// Act on one event of the reader's stream.
    pub fn handle(&mut self, event: Event) -> Result<Handled, Stop> {
        match event {
            Event::Skipped => {
                self.seek_output()?;
                if !self.plan.copies_nothing() && self.plan.two_buffers {
                    self.alloc_output()?;
                }
            }
            Event::Diagnostic(d) => self.events.diagnostic(*d),
            Event::Statistics => self.events.statistics(),
            Event::Record(record) => {
                if let Some(tap) = &mut self.tap {
                    tap.feed(&record.buf.as_slice()[..record.len]);
                }
                let handled = self.record(record.buf, record.len, record.full);
                self.progress_if_due();
                return handled;
            }
            Event::Spliced { len, full } => {
                self.spliced(len, full);
                self.progress_if_due();
            }
            Event::Bulk { buf, len } => {
                if let Some(tap) = &mut self.tap {
                    tap.feed(&buf.as_slice()[..len]);
                }
                let handled = self.bulk(buf, len);
                self.progress_if_due();
                return handled;
            }
            Event::Hole { len } => {
                if let Some(tap) = &mut self.tap {
                    tap.zeros(len);
                }
                let handled = self.hole(len);
                self.progress_if_due();
                return handled;
            }
            Event::End { failed, late } => {
                if self.bulk_in % self.plan.input_block_size as u64 != 0 {
                    bump(&self.counters.records_in_partial);
                }
                if !self.plan.copies_nothing() {
                    let failed = self.finish_output()? || failed;
                    return Ok(Handled::Done { failed, late });
                }
                return Ok(Handled::Done { failed, late });
            }
            Event::Stop(stop) => return Err(stop),
            Event::InputEof => {
                if !self.conv.contains(Conv::NOTRUNC) {
                    self.io.cache.to_eof |= self.io.cache.enabled;
                }
            }
        }
        Ok(Handled::Continue(None))
    }

    /// After the stream: conv=fdatasync/fsync and cache advice, in GNU's
    /// order, then the run's result. `stopped` is a fatal stop, if any.
    pub fn conclude(&mut self, end: Result<(bool, Option<Diagnostic>), Stop>) -> RunResult {
        if let (Some(Some(behind)), Some(fd)) = (&mut self.drop_behind, self.output.end.fd()) {
            behind.finish(fd);
        }
        match end {
            Ok((failed, late)) => {
                if self.conv.intersects(Conv::FDATASYNC | Conv::FSYNC) {
                    self.events.before_sync();
                }
                let sync_failed = self.synchronize();
                let mut cache_failed = false;
                if let Some(late) = late {
                    self.events.diagnostic(late);
                    cache_failed = true;
                }
                cache_failed |= self.drop_cache_at_end();
                RunResult::Finished(Outcome {
                    failed: failed || sync_failed || cache_failed,
                    stopped_short: self.write_failed,
                })
            }
            // GNU's quit(): a failed sync there exits before the statistics.
            Err(Stop::Quit) => {
                if self.synchronize() {
                    RunResult::Died
                } else {
                    RunResult::Finished(Outcome {
                        failed: true,
                        stopped_short: true,
                    })
                }
            }
            Err(Stop::Die) => RunResult::Died,
        }
    }

    /// The output's descriptor, where it has one (for kernel offload
    /// between the two ends).
    pub fn output_fd(&self) -> Option<BorrowedFd<'_>> {
        self.output.end.fd()
    }

    /// Offload has copied `total` bytes so far (whole units): the counts
    /// GNU would show after writing them.
    pub fn offloaded(&mut self, total: u64) {
        use std::sync::atomic::Ordering::Release;
        let before = self
            .counters
            .bytes_out
            .load(std::sync::atomic::Ordering::Relaxed);
        self.behind_after(total - before);
        if self.io.offset >= 0 {
            self.io.offset += (total - before) as i64;
        }
        let ibs = self.plan.input_block_size as u64;
        let write_block = if self.plan.two_buffers {
            self.plan.output_block_size as u64
        } else {
            ibs
        };
        self.counters.records_in_full.store(total / ibs, Release);
        self.counters
            .records_out_full
            .store(total / write_block, Release);
        self.counters.bytes_out.store(total, Release);
        self.counters.bytes_offloaded.store(total, Release);
        self.kernel_in = total;
    }

    /// Offload copied everything: `total` bytes, the last record partial
    /// if the input ended inside one.
    pub fn offloaded_end(&mut self, total: u64) {
        self.offloaded(total);
        let ibs = self.plan.input_block_size as u64;
        let write_block = if self.plan.two_buffers {
            self.plan.output_block_size as u64
        } else {
            ibs
        };
        if total % ibs != 0 {
            bump(&self.counters.records_in_partial);
        }
        if total % write_block != 0 {
            bump(&self.counters.records_out_partial);
        }
    }

    fn diag(&self, d: Diagnostic) {
        self.events.diagnostic(d);
    }

    fn alloc_output(&mut self) -> Result<(), Stop> {
        if self.output_buffer.is_none() {
            let size = self.plan.output_block_size;
            let buf = AlignedBuf::new(size).map_err(|_| {
                self.diag(Diagnostic::NoMemory {
                    buffer: BufferKind::Output,
                    size,
                });
                Stop::Die
            })?;
            self.output_buffer = Some(buf);
        }
        Ok(())
    }

    /// One record: write it as is, or convert and re-block it.
    fn record(&mut self, mut buf: AlignedBuf, len: usize, full: bool) -> Result<Handled, Stop> {
        if full {
            bump(&self.counters.records_in_full);
        } else {
            bump(&self.counters.records_in_partial);
        }
        if !self.plan.two_buffers {
            let (written, error) = self.io.write(
                self.output.end.as_mut(),
                &self.output.name,
                &buf.as_slice()[..len],
                self.events,
            );
            add(&self.counters.bytes_out, written as u64);
            if written != len {
                return self.short_write(error, false);
            }
            if len == self.plan.input_block_size {
                bump(&self.counters.records_out_full);
            } else {
                bump(&self.counters.records_out_partial);
            }
            return Ok(Handled::Continue(Some(buf)));
        }

        if let Some(t) = &self.translation {
            t.apply(&mut buf.as_mut_slice()[..len]);
        }
        let range = if self.conv.contains(Conv::SWAB) {
            self.swab.apply(buf.as_mut_slice(), len)
        } else {
            0..len
        };
        self.convert(&buf.as_slice()[range])?;
        Ok(Handled::Continue(Some(buf)))
    }

    /// A record the reader spliced to the output itself: count it as
    /// written (splice is only used without re-blocking, so a record in
    /// is a record out).
    fn spliced(&mut self, len: usize, full: bool) {
        let (records_in, records_out) = if full {
            (
                &self.counters.records_in_full,
                &self.counters.records_out_full,
            )
        } else {
            (
                &self.counters.records_in_partial,
                &self.counters.records_out_partial,
            )
        };
        bump(records_in);
        bump(records_out);
        add(&self.counters.bytes_out, len as u64);
        self.io.final_op_was_seek = false;
        if self.io.offset >= 0 {
            self.io.offset += len as i64;
        }
    }

    /// Bulk mode: whole records in one request. Counts are those of the
    /// records GNU dd would have read and written one by one.
    fn bulk(&mut self, buf: AlignedBuf, len: usize) -> Result<Handled, Stop> {
        let ibs = self.plan.input_block_size;
        self.count_bulk_input(len as u64);
        let start = self.kernel_in + self.bulk_in - len as u64;
        let data = &buf.as_slice()[..len];
        if self.plan.two_buffers {
            // Top up a partly filled output block first, as GNU would.
            let obs = self.plan.output_block_size;
            let mut data = data;
            let mut take = 0;
            if self.output_fill > 0 {
                take = (obs - self.output_fill).min(data.len());
                if let Err(stop) = self.output_slice(&data[..take]) {
                    self.records_in_at_failed_write(start + take as u64);
                    return Err(stop);
                }
                data = &data[take..];
            }
            let whole = data.len() / obs * obs;
            if whole > 0 {
                let (written, error) = self.write_blocks(&data[..whole], obs);
                add(&self.counters.records_out_full, (written / obs) as u64);
                if written != whole {
                    let failed_end = start + (take + written / obs * obs + obs) as u64;
                    self.records_in_at_failed_write(failed_end);
                    return self.short_write(error, written % obs != 0);
                }
            }
            self.output_slice(&data[whole..])?;
            return Ok(Handled::Continue(Some(buf)));
        }
        let (written, error) = self.write_blocks(data, ibs);
        add(&self.counters.records_out_full, (written / ibs) as u64);
        if written != len {
            self.records_in_at_failed_write(start + (written / ibs * ibs + ibs) as u64);
            return self.short_write(error, false);
        }
        if len % ibs != 0 {
            bump(&self.counters.records_out_partial);
        }
        Ok(Handled::Continue(Some(buf)))
    }

    /// A write of bulk data failed in the block ending at stream offset
    /// `failed_end`: GNU, reading record by record, had read only the
    /// records up to that block's end (the last one perhaps partial), not
    /// all that bulk mode read ahead.
    fn records_in_at_failed_write(&mut self, failed_end: u64) {
        let ibs = self.plan.input_block_size as u64;
        let end = failed_end
            .div_ceil(ibs)
            .saturating_mul(ibs)
            .min(self.kernel_in + self.bulk_in);
        self.counters
            .records_in_full
            .store(end / ibs, std::sync::atomic::Ordering::Release);
        if end % ibs != 0 {
            bump(&self.counters.records_in_partial);
        }
        // The End event, which would count the partial record, never comes.
    }

    /// Records in, from the bytes read in bulk so far: whole records as
    /// they complete (a hole may end inside one), a partial one at the end.
    fn count_bulk_input(&mut self, len: u64) {
        let ibs = self.plan.input_block_size as u64;
        self.bulk_in += len;
        self.counters.records_in_full.store(
            (self.kernel_in + self.bulk_in) / ibs,
            std::sync::atomic::Ordering::Release,
        );
    }

    /// A hole of the input: whole write blocks of zeros, sought over under
    /// conv=sparse (as GNU seeks over each all-zero block), else written.
    fn hole(&mut self, len: u64) -> Result<Handled, Stop> {
        self.count_bulk_input(len);
        let block = if self.plan.two_buffers {
            self.plan.output_block_size
        } else {
            self.plan.input_block_size
        };
        debug_assert_eq!(self.output_fill, 0, "holes start on block boundaries");
        if self.io.sparse && self.output.end.seek(Whence::Current(len as i64)).is_ok() {
            self.io.final_op_was_seek = true;
            if self.io.offset >= 0 {
                self.io.offset += len as i64;
            }
            add(&self.counters.bytes_out, len);
            add(&self.counters.records_out_full, len / block as u64);
            return Ok(Handled::Continue(None));
        }
        let zeros = match self.zeros.take() {
            Some(z) => z,
            None => AlignedBuf::new(HOLE_WRITE.max(block)).map_err(|_| Stop::Die)?,
        };
        let step = zeros.len() / block * block;
        let mut left = len as usize;
        let start = self.kernel_in + self.bulk_in - len;
        while left > 0 {
            let n = left.min(step);
            let (written, error) = self.write_blocks(&zeros.as_slice()[..n], block);
            add(&self.counters.records_out_full, (written / block) as u64);
            if written != n {
                self.zeros = Some(zeros);
                let done = (len as usize - left + written / block * block + block) as u64;
                self.records_in_at_failed_write(start + done);
                return self.short_write(error, written % block != 0);
            }
            left -= n;
        }
        self.zeros = Some(zeros);
        Ok(Handled::Continue(None))
    }

    /// Write whole `block`-sized pieces (the last may be short) in as few
    /// requests as possible; under conv=sparse, all-zero pieces become
    /// seeks, as GNU makes them one block at a time.
    fn write_blocks(&mut self, data: &[u8], block: usize) -> (usize, Option<Errno>) {
        let mut done = 0;
        while done < data.len() {
            let mut end = data.len();
            if self.io.sparse {
                // The run of pieces that are all zero, or all not.
                let piece = |at: usize| &data[at..(at + block).min(data.len())];
                let zero = is_all_zero(piece(done));
                end = done;
                while end < data.len() && is_all_zero(piece(end)) == zero {
                    end = (end + block).min(data.len());
                }
                if zero {
                    match self.output.end.seek(Whence::Current((end - done) as i64)) {
                        Ok(_) => {
                            self.io.final_op_was_seek = true;
                            if self.io.offset >= 0 {
                                self.io.offset += (end - done) as i64;
                            }
                            add(&self.counters.bytes_out, (end - done) as u64);
                            done = end;
                            continue;
                        }
                        Err(_) => self.io.sparse = false,
                    }
                }
            }
            let want = end - done;
            let at = self.io.offset.max(0) as u64;
            self.io.uncached = self.behind_uncached();
            if self.io.uncached {
                if let (Some(Some(behind)), Some(fd)) =
                    (&mut self.drop_behind, self.output.end.fd())
                {
                    behind.before_uncached(fd);
                }
            } else {
                self.behind_before(want as u64);
            }
            let (written, error) = self.io.write(
                self.output.end.as_mut(),
                &self.output.name,
                &data[done..end],
                self.events,
            );
            if std::mem::take(&mut self.io.uncached) {
                add(&self.counters.bytes_uncached, written as u64);
            }
            if std::mem::take(&mut self.io.uncached_refused) {
                if let Some(Some(behind)) = &mut self.drop_behind {
                    behind.uncached_refused(at, want as u64);
                }
            }
            add(&self.counters.bytes_out, written as u64);
            self.behind_after(written as u64);
            done += written;
            if written != want {
                if want - written > block && written % block == 0 && error.is_some() {
                    // A device may refuse a large request for one bad
                    // block: write on block by block to fail where GNU,
                    // writing one block at a time, would have.
                    match self.write_piecewise(&data[done..end], block) {
                        (n, None) => {
                            done += n;
                            continue;
                        }
                        (n, error) => return (done + n, error),
                    }
                }
                return (done, error);
            }
        }
        (done, None)
    }

    /// Write `data` one `block` at a time, stopping at the first failure.
    fn write_piecewise(&mut self, data: &[u8], block: usize) -> (usize, Option<Errno>) {
        let mut done = 0;
        while done < data.len() {
            let piece = &data[done..(done + block).min(data.len())];
            let (written, error) = self.io.write(
                self.output.end.as_mut(),
                &self.output.name,
                piece,
                self.events,
            );
            add(&self.counters.bytes_out, written as u64);
            self.behind_after(written as u64);
            done += written;
            if written != piece.len() {
                return (done, error);
            }
        }
        (done, None)
    }

    /// A short write of whole records: GNU says "error writing" and ends
    /// the copy normally (one write per read), or "writing to" and quits
    /// (re-blocked output); `partial` counts a partly written block.
    fn short_write(&mut self, error: Option<Errno>, partial: bool) -> Result<Handled, Stop> {
        self.write_failed = true;
        let file = self.output.name.clone();
        let errno = error.unwrap_or(Errno::IO);
        if self.plan.two_buffers {
            if partial {
                bump(&self.counters.records_out_partial);
            }
            self.diag(Diagnostic::WritingTo { file, errno });
            return Err(Stop::Quit);
        }
        self.diag(Diagnostic::ErrorWriting { file, errno });
        // GNU returns from the copy here (no quit): the output is still
        // synchronised and the statistics printed.
        Ok(Handled::Done {
            failed: true,
            late: None,
        })
    }

    /// block/unblock or plain copy into the output buffer.
    fn convert(&mut self, data: &[u8]) -> Result<(), Stop> {
        let (newline, space) = (self.newline, self.space);
        if self.conv.contains(Conv::BLOCK) {
            let mut blocker = std::mem::replace(&mut self.blocker, Blocker::new(0));
            let result = blocker.push(data, newline, space, &mut |c| self.output_byte(c));
            self.counters
                .records_truncated
                .store(blocker.truncated, std::sync::atomic::Ordering::Release);
            self.blocker = blocker;
            result
        } else if self.conv.contains(Conv::UNBLOCK) {
            let mut unblocker = std::mem::replace(&mut self.unblocker, Unblocker::new(0));
            let result = unblocker.push(data, newline, space, &mut |c| self.output_byte(c));
            self.unblocker = unblocker;
            result
        } else {
            self.output_slice(data)
        }
    }

    /// End of input: the swab byte, block padding, the final partial block,
    /// and the size of a sparse file. Ok(true) when it failed.
    fn finish_output(&mut self) -> Result<bool, Stop> {
        if self.plan.two_buffers {
            if let Some(saved) = self.swab.take_saved() {
                self.convert(&[saved])?;
            }
            if self.conv.contains(Conv::BLOCK) {
                let space = self.space;
                let mut blocker = std::mem::replace(&mut self.blocker, Blocker::new(0));
                let result = blocker.finish(space, &mut |c| self.output_byte(c));
                self.blocker = blocker;
                result?;
            }
            if self.conv.contains(Conv::UNBLOCK) {
                let newline = self.newline;
                let mut unblocker = std::mem::replace(&mut self.unblocker, Unblocker::new(0));
                let result = unblocker.finish(newline, &mut |c| self.output_byte(c));
                self.unblocker = unblocker;
                result?;
            }
        }

        if self.output_fill != 0 {
            let obuf = self.output_buffer.take().expect("output buffer allocated");
            let fill = self.output_fill;
            let (written, error) = self.io.write(
                self.output.end.as_mut(),
                &self.output.name,
                &obuf.as_slice()[..fill],
                self.events,
            );
            self.output_buffer = Some(obuf);
            add(&self.counters.bytes_out, written as u64);
            if written != 0 {
                bump(&self.counters.records_out_partial);
            }
            if written != fill {
                self.diag(Diagnostic::ErrorWriting {
                    file: self.output.name.clone(),
                    errno: error.unwrap_or(Errno::IO),
                });
                return Ok(true);
            }
        }

        if self.io.final_op_was_seek && self.extend_after_final_seek().is_err() {
            return Ok(true);
        }
        Ok(false)
    }

    /// Sparse output may end in a hole: extend the file to its full size.
    fn extend_after_final_seek(&mut self) -> Result<(), ()> {
        let size = match self.output.end.size() {
            Err(errno) => {
                self.diag(Diagnostic::CannotFstat {
                    file: self.output.name.clone(),
                    errno,
                });
                return Err(());
            }
            Ok(None) => return Ok(()),
            Ok(Some(size)) => size,
        };
        if let Ok(offset) = self.output.end.seek(Whence::Current(0)) {
            if size < offset {
                if let Err(errno) = self.output.end.truncate(offset) {
                    self.diag(Diagnostic::TruncateFailed {
                        length: offset as i64,
                        file: self.output.name.clone(),
                        errno,
                    });
                    return Err(());
                }
            }
        }
        Ok(())
    }

    /// Append one byte to the output buffer, writing it when full.
    fn output_byte(&mut self, c: u8) -> Result<(), Stop> {
        let obuf = self
            .output_buffer
            .as_mut()
            .expect("output buffer allocated");
        obuf.as_mut_slice()[self.output_fill] = c;
        self.output_fill += 1;
        if self.output_fill >= self.plan.output_block_size {
            self.write_output_block()?;
        }
        Ok(())
    }

    /// Append bytes to the output buffer, writing each block as it fills.
    fn output_slice(&mut self, mut data: &[u8]) -> Result<(), Stop> {
        let obs = self.plan.output_block_size;
        loop {
            let room = obs - self.output_fill;
            let take = room.min(data.len());
            let obuf = self
                .output_buffer
                .as_mut()
                .expect("output buffer allocated");
            obuf.as_mut_slice()[self.output_fill..self.output_fill + take]
                .copy_from_slice(&data[..take]);
            self.output_fill += take;
            data = &data[take..];
            if self.output_fill >= obs {
                self.write_output_block()?;
            }
            if data.is_empty() {
                return Ok(());
            }
        }
    }

    /// dd's `write_output`: one full obs block, or quit.
    fn write_output_block(&mut self) -> Result<(), Stop> {
        let obs = self.plan.output_block_size;
        let obuf = self.output_buffer.take().expect("output buffer allocated");
        let (written, error) = self.io.write(
            self.output.end.as_mut(),
            &self.output.name,
            &obuf.as_slice()[..obs],
            self.events,
        );
        self.output_buffer = Some(obuf);
        add(&self.counters.bytes_out, written as u64);
        if written != obs {
            self.diag(Diagnostic::WritingTo {
                file: self.output.name.clone(),
                errno: error.unwrap_or(Errno::IO),
            });
            if written != 0 {
                bump(&self.counters.records_out_partial);
            }
            return Err(Stop::Quit);
        }
        bump(&self.counters.records_out_full);
        self.output_fill = 0;
        Ok(())
    }

    /// seek=: lseek when possible; on an unseekable output, read over what
    /// is there and write zeros for the rest.
    fn seek_output(&mut self) -> Result<(), Stop> {
        if self.plan.seek.is_zero() {
            return Ok(());
        }
        let obs = self.plan.output_block_size;
        let requested = self.plan.seek.total_bytes(obs);
        let lseek_errno = match requested {
            Some(offset) => match self.output.end.seek(Whence::Current(offset as i64)) {
                Ok(_) => {
                    if self.io.offset >= 0 {
                        self.io.offset += offset as i64;
                    }
                    return Ok(());
                }
                Err(errno) => Some(errno),
            },
            None => None,
        };
        if self.output.end.seek(Whence::End(0)).is_ok() {
            self.diag(Diagnostic::CannotSeek {
                file: self.output.name.clone(),
                errno: Some(lseek_errno.unwrap_or(Errno::OVERFLOW)),
            });
            return Err(Stop::Quit);
        }

        let mut buf = AlignedBuf::new(obs).map_err(|_| {
            self.diag(Diagnostic::NoMemory {
                buffer: BufferKind::Output,
                size: obs,
            });
            Stop::Die
        })?;
        let fullblock = self.plan.input_flags.contains(IoFlags::FULLBLOCK);
        let mut left = self.plan.seek;
        let read_over = loop {
            let want = left.next_request(obs);
            match read_block(
                self.output.end.as_mut(),
                &mut buf.as_mut_slice()[..want],
                fullblock,
            ) {
                Err(_) => break Err(()),
                Ok(0) => break Ok(()),
                Ok(_) => {}
            }
            if left.complete_request() {
                break Ok(());
            }
        };
        if read_over.is_err() {
            self.diag(Diagnostic::CannotSeek {
                file: self.output.name.clone(),
                errno: lseek_errno,
            });
            return Err(Stop::Quit);
        }

        // What could not be read over is written as zeros.
        while !left.is_zero() {
            let size = left.next_request(obs);
            buf.as_mut_slice()[..size].fill(0);
            let (written, error) = self.io.write(
                self.output.end.as_mut(),
                &self.output.name,
                &buf.as_slice()[..size],
                self.events,
            );
            if written != size {
                self.diag(Diagnostic::WritingTo {
                    file: self.output.name.clone(),
                    errno: error.unwrap_or(Errno::IO),
                });
                return Err(Stop::Quit);
            }
            left.complete_request();
        }
        Ok(())
    }

    /// conv=fdatasync/fsync (and the fsync an O_DIRECT tail requires);
    /// true if it failed. A failed fdatasync falls back to fsync.
    fn synchronize(&mut self) -> bool {
        let mut failed = false;
        let mut fsync = self.conv.contains(Conv::FSYNC) || self.io.fsync_required;
        if self.conv.contains(Conv::FDATASYNC) {
            if let Err(errno) = self.output.end.sync(true) {
                if errno != Errno::NOSYS && errno != Errno::INVAL {
                    self.diag(Diagnostic::FdatasyncFailed {
                        file: self.output.name.clone(),
                        errno,
                    });
                    failed = true;
                }
                fsync = true;
            }
        }
        if fsync {
            if let Err(errno) = self.output.end.sync(false) {
                self.diag(Diagnostic::FsyncFailed {
                    file: self.output.name.clone(),
                    errno,
                });
                failed = true;
            }
        }
        self.conv.remove(Conv::FDATASYNC | Conv::FSYNC);
        self.io.fsync_required = false;
        failed
    }

    /// End-of-copy cache advice for oflag=nocache; true if it failed where
    /// GNU reports it (count=0 asks to drop a whole file's cache).
    fn drop_cache_at_end(&mut self) -> bool {
        let Some(fd) = self.output.end.fd() else {
            return false;
        };
        let offset = file::current_offset(fd).ok();
        match self.io.cache.finish(fd, offset) {
            Err(errno) if self.plan.copies_nothing() => {
                self.diag(Diagnostic::DiscardCacheFailed {
                    file: self.output.name.clone(),
                    errno,
                });
                true
            }
            _ => false,
        }
    }
}

/// A read for seek= over an unseekable output (GNU reads with the input's
/// fullblock setting here).
fn read_block(end: &mut dyn End, buf: &mut [u8], fullblock: bool) -> Result<usize, Errno> {
    let mut total = 0;
    loop {
        match end.read(&mut buf[total..]) {
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
            Ok(0) => return Ok(total),
            Ok(n) => {
                total += n;
                if !fullblock || total == buf.len() {
                    return Ok(total);
                }
            }
        }
    }
}
