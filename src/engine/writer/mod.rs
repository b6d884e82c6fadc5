//! The writing half of a copy: seek=, then each record as GNU dd writes it:
//! straight through (one write per read, with `bs=` and no conversion) or
//! converted and re-blocked into obs-sized writes ([`records`]); bulk data
//! and holes, counted as GNU's records ([`tally`]); sparse seeks, `--trim`'s
//! discards and the O_DIRECT tail ([`raw`]); drop-behind on every path
//! that writes through the page cache ([`drop_behind`]); the final ftruncate
//! and fdatasync/fsync.
//!
//! It consumes the reader's [`Event`]s in order and is the only place that
//! updates the statistics counters, so statistics printed at any point of
//! the stream are those GNU dd would print there.

mod drop_behind;
mod raw;
mod records;
mod tally;

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use crate::diagnostic::{BufferKind, Diagnostic, Events};
use crate::ends::Whence;
use crate::engine::cache::CachePolicy;
use crate::engine::counters::{add, bump, Counters};
use crate::engine::reader::{Event, Stop};
use crate::engine::stream::Output;
use crate::engine::stream::Stream;
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;
use crate::transform::is_all_zero;

use drop_behind::Dropping;
use raw::{RawOutput, Written};
use records::Reblocker;
use tally::Tally;

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

/// How the event stream ended: done (whether it failed, and a message to
/// print once the output is synced), or a fatal stop.
pub type StreamEnd = Result<(bool, Option<Diagnostic>), Stop>;

/// The output side: the end, how bytes reach it, and who hears of it.
struct Out<'a> {
    output: &'a mut Output,
    raw: RawOutput,
    /// The output offset of the stream's first byte (after seek=), where
    /// the output can tell.
    base: Option<u64>,
    behind: Dropping,
    /// Whole records are handed to the output as their buffers (see
    /// [`Writer::whole_record`]) until it once declines one.
    exchanging: bool,
    counters: &'a Counters,
    events: &'a dyn Events,
}

pub struct Writer<'a> {
    plan: Arc<CopyPlan>,
    out: Out<'a>,
    reblocker: Reblocker,
    tally: Tally,
    /// Records went to the end one write per record (not in bulk): a
    /// failure found behind is counted by records.
    wrote_records: bool,
    /// Zeros to write for holes without conv=sparse.
    zeros: Option<AlignedBuf>,
    /// `--hash`/`--verify`: every byte passed on, before conversion.
    tap: Option<crate::integrity::Tap>,
    /// conv=fdatasync/fsync not done yet (GNU syncs once, even when a
    /// failed write ends the copy first).
    sync_pending: Conv,
    /// A write failed: the copy ends here, short of its input's end.
    write_failed: bool,
    /// The input's holes are a block map's (`--bmap`): sought over, never
    /// written, wherever they fall, and the records out counted from the
    /// bytes, as GNU would count them writing the whole image.
    mapped_holes: bool,
}

impl<'a> Writer<'a> {
    pub fn new(
        plan: Arc<CopyPlan>,
        output: &'a mut Output,
        counters: &'a Counters,
        events: &'a dyn Events,
    ) -> Self {
        let offset = output.stream.seek(Whence::Current(0)).ok();
        Writer {
            out: Out {
                raw: RawOutput::new(&plan, offset),
                base: None,
                behind: Dropping::Off,
                exchanging: true,
                output,
                counters,
                events,
            },
            reblocker: Reblocker::new(&plan),
            tally: Tally::new(&plan),
            wrote_records: false,
            zeros: None,
            tap: None,
            sync_pending: plan.conv & (Conv::FDATASYNC | Conv::FSYNC),
            write_failed: false,
            mapped_holes: false,
            plan,
        }
    }

    /// The input's holes are a block map's unmapped blocks: leave them
    /// unwritten (see `BulkShape::mapped_holes`).
    pub fn with_mapped_holes(mut self, mapped: bool) -> Self {
        self.mapped_holes = mapped;
        self
    }

    /// `--trim`: discard the output's zero blocks and the input's holes
    /// instead of writing them (see `RawOutput::discard_over`).
    pub fn with_trim(mut self, trim: bool) -> Self {
        self.out.raw.set_trim(trim);
        self
    }

    /// What to do with the output's pages (see `engine::cache`).
    pub fn with_cache(mut self, policy: CachePolicy) -> Self {
        self.out.behind = Dropping::new(policy);
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

    /// Bytes of the copy whose pages are left to the kernel before they
    /// are dropped behind it; None: they all are.
    pub fn drops_after(&self) -> Option<u64> {
        self.out.behind.drops_after()
    }

    /// About to write `len` bytes in bulk at `offset` (an overlapped copy
    /// writes ahead of the offset it has reported; see `uring`).
    pub fn behind_before_at(&mut self, offset: u64, len: u64) {
        self.out
            .behind
            .before(self.out.output.stream.fd(), offset, len);
    }

    /// The kernel is about to copy `len` bytes to the output.
    pub fn offload_before(&mut self, len: u64) {
        self.out.behind_before(len);
    }

    /// Bytes written so far.
    pub fn bytes_out(&self) -> u64 {
        self.out
            .counters
            .bytes_out
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The output's descriptor, where it has one (for kernel offload
    /// between the two ends).
    pub fn output_fd(&self) -> Option<BorrowedFd<'_>> {
        self.out.output.stream.fd()
    }

    /// status=progress: GNU prints its line between records, after a write
    /// (so a line shows what has been written, never while blocked).
    fn progress_if_due(&self) {
        if self.out.counters.take_progress_due() {
            self.out.events.progress();
        }
    }

    /// Act on one event of the reader's stream.
    pub fn handle(&mut self, event: Event) -> Result<Handled, Stop> {
        match event {
            Event::Skipped => {
                self.seek_output()?;
                self.out.base = self.out.raw.offset;
                let offset = self.out.raw.offset.unwrap_or(0);
                self.out.behind.start(self.out.output.stream.fd(), offset);
                if !self.plan.copies_nothing() && self.plan.two_buffers {
                    self.reblocker.allocate().map_err(|size| {
                        self.out.diag(Diagnostic::NoMemory {
                            buffer: BufferKind::Output,
                            size,
                        });
                        Stop::Die
                    })?;
                }
            }
            Event::Diagnostic(d) => self.out.events.diagnostic(*d),
            Event::Statistics => self.out.events.statistics(),
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
                self.tally.end_of_bulk(self.out.counters);
                if self.mapped_holes
                    && self
                        .out
                        .counters
                        .bytes_out
                        .load(std::sync::atomic::Ordering::Relaxed)
                        % self.tally.write_block() as u64
                        != 0
                {
                    bump(&self.out.counters.records_out_partial);
                }
                if !self.plan.copies_nothing() {
                    let failed = self.finish_output()? || failed;
                    return Ok(Handled::Done { failed, late });
                }
                return Ok(Handled::Done { failed, late });
            }
            Event::Stop(stop) => return Err(stop),
            Event::InputEof => {
                if !self.plan.conv.contains(Conv::NOTRUNC) {
                    let cache = &mut self.out.raw.cache;
                    cache.to_eof |= cache.enabled;
                }
            }
        }
        Ok(Handled::Continue(None))
    }

    /// After the stream: conv=fdatasync/fsync and cache advice, in GNU's
    /// order, then the run's result.
    pub fn conclude(&mut self, end: StreamEnd) -> RunResult {
        self.out.behind.finish(self.out.output.stream.fd());
        let discards = self.out.raw.discards;
        let counters = self.out.counters;
        counters
            .bytes_discarded
            .store(discards.discarded, std::sync::atomic::Ordering::Release);
        counters
            .bytes_discard_refused
            .store(discards.written, std::sync::atomic::Ordering::Release);
        match end {
            Ok((failed, late)) => {
                // A write error already said (one write per read: GNU's
                // "error writing" ends the copy) is not said again for the
                // end's writes behind it.
                let failed = if self.write_failed {
                    let _ = self.out.output.stream.settle();
                    true
                } else {
                    self.settle() || failed
                };
                if !self.sync_pending.is_empty() {
                    self.out.events.before_sync();
                }
                let sync_failed = self.synchronize();
                let mut cache_failed = false;
                if let Some(late) = late {
                    self.out.events.diagnostic(late);
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

    /// A kernel copy (offload, io_uring) has moved `total` bytes so far
    /// (whole units): the counts GNU would show after writing them.
    pub fn offloaded(&mut self, total: u64) {
        let new = self.tally.kernel_copied(self.out.counters, total);
        self.out.kernel_wrote(new);
    }

    /// The kernel copied everything: `total` bytes, the last record
    /// partial if the input ended inside one.
    pub fn offloaded_end(&mut self, total: u64) {
        let new = self.tally.kernel_copied_all(self.out.counters, total);
        self.out.kernel_wrote(new);
    }

    /// One record: write it as is, or convert and re-block it.
    fn record(&mut self, mut buf: AlignedBuf, len: usize, full: bool) -> Result<Handled, Stop> {
        if !self.plan.two_buffers {
            return match self.whole_record(&mut buf, len, full)? {
                Handled::Continue(_) => Ok(Handled::Continue(Some(buf))),
                done => Ok(done),
            };
        }
        bump(if full {
            &self.out.counters.records_in_full
        } else {
            &self.out.counters.records_in_partial
        });
        let result = self.reblocker.record(&mut buf, len, &mut |block| {
            self.out.write_output_block(block)
        });
        self.note_truncated();
        result?;
        Ok(Handled::Continue(Some(buf)))
    }

    /// A record handed over without an event by the reference loop
    /// (see `Sink::write_now`), when it needs nothing but writing: no
    /// conversion or re-blocking, no digest. None: send it as an event.
    #[inline(always)]
    pub fn record_now(
        &mut self,
        buf: &mut AlignedBuf,
        len: usize,
        full: bool,
    ) -> Option<Result<Handled, Stop>> {
        if self.plan.two_buffers || self.tap.is_some() {
            return None;
        }
        let handled = self.whole_record(buf, len, full);
        self.progress_if_due();
        Some(handled)
    }

    /// One record written as it is, in one piece (one buffer: a record
    /// in is a record out): the first `len` bytes of `buf`. An output
    /// whose window writes behind takes a whole buffer as it is, and `buf`
    /// comes back another of the same length; otherwise, and for a record
    /// that does not fill its buffer, the bytes are copied. (Copied, an
    /// SCSI generic node's record was copied twice, into the window's
    /// buffer and then into the driver's: ddx writing /dev/sg0 from
    /// /dev/zero in the emulated machine took twice the user CPU it took
    /// before the window.)
    #[inline(always)]
    fn whole_record(
        &mut self,
        buf: &mut AlignedBuf,
        len: usize,
        full: bool,
    ) -> Result<Handled, Stop> {
        let counters = self.out.counters;
        bump(if full {
            &counters.records_in_full
        } else {
            &counters.records_in_partial
        });
        self.wrote_records = true;
        let at = self.out.raw.offset;
        let exchanged = match (self.out.exchanging, len == buf.len()) {
            (true, true) => {
                let exchanged = self.out.write_exchange(buf);
                self.out.exchanging = exchanged.is_some();
                exchanged
            }
            _ => None,
        };
        let written = match exchanged {
            Some((bytes, error)) => Written {
                bytes,
                error,
                uncached_refused: false,
            },
            None => {
                let written = self.out.write_tracked(&buf.as_slice()[..len]);
                add(&counters.bytes_out, written.bytes as u64);
                written
            }
        };
        if written.bytes != len {
            if let Some(stored) = self.out.failed_before(at) {
                return self.failed_behind_record(stored, written.error);
            }
            return self.short_write(written.error, false);
        }
        bump(if len == self.plan.input_block_size {
            &counters.records_out_full
        } else {
            &counters.records_out_partial
        });
        Ok(Handled::Continue(None))
    }

    /// conv=block's truncated lines, for the statistics.
    fn note_truncated(&self) {
        if self.plan.conv.contains(Conv::BLOCK) {
            self.out.counters.records_truncated.store(
                self.reblocker.truncated(),
                std::sync::atomic::Ordering::Release,
            );
        }
    }

    /// A record the reader spliced to the output itself: count it as
    /// written (splice is only used without re-blocking, so a record in
    /// is a record out).
    fn spliced(&mut self, len: usize, full: bool) {
        let counters = self.out.counters;
        let (records_in, records_out) = if full {
            (&counters.records_in_full, &counters.records_out_full)
        } else {
            (&counters.records_in_partial, &counters.records_out_partial)
        };
        bump(records_in);
        bump(records_out);
        add(&counters.bytes_out, len as u64);
        self.out.raw.ended_in_seek = false;
        let fd = self.out.output.stream.fd();
        if let Some(at) = self.out.raw.offset {
            self.out.behind.before(fd, at, len as u64);
            self.out.behind.after(fd, len as u64);
        }
        self.out.raw.advance(len as u64);
    }

    /// Bulk mode: whole records in one request. Counts are those of the
    /// records GNU dd would have read and written one by one.
    fn bulk(&mut self, mut buf: AlignedBuf, len: usize) -> Result<Handled, Stop> {
        let ibs = self.plan.input_block_size;
        let counters = self.out.counters;
        self.tally.bulk_read(counters, len as u64);
        let start = self.tally.read() - len as u64;
        let data = &buf.as_slice()[..len];
        if self.plan.two_buffers {
            // Top up a partly filled output block first, as GNU would.
            let obs = self.plan.output_block_size;
            let mut data = data;
            let mut take = 0;
            if self.reblocker.fill() > 0 {
                take = (obs - self.reblocker.fill()).min(data.len());
                let topped = self.reblocker.append(&data[..take], &mut |block| {
                    self.out.write_output_block(block)
                });
                if let Err(stop) = topped {
                    self.tally
                        .read_at_failed_write(counters, start + take as u64);
                    return Err(stop);
                }
                data = &data[take..];
            }
            let whole = data.len() / obs * obs;
            if whole > 0 {
                let at = self.out.raw.offset;
                let (written, error) = self.out.write_blocks(&data[..whole], obs);
                add(&counters.records_out_full, (written / obs) as u64);
                if written != whole {
                    if let Some(stored) = self.out.failed_before(at) {
                        return self.failed_behind(stored, error);
                    }
                    let failed_end = start + (take + written / obs * obs + obs) as u64;
                    self.tally.read_at_failed_write(counters, failed_end);
                    return self.short_write(error, written % obs != 0);
                }
            }
            self.reblocker.append(&data[whole..], &mut |block| {
                self.out.write_output_block(block)
            })?;
            if self.mapped_holes {
                self.count_out_from_bytes();
            }
            return Ok(Handled::Continue(Some(buf)));
        }
        let at = self.out.raw.offset;
        let exchanged = if len == buf.len() {
            self.out.write_exchange(&mut buf)
        } else {
            None
        };
        let (written, error) = match exchanged {
            Some(written) => written,
            None => self.out.write_blocks(&buf.as_slice()[..len], ibs),
        };
        add(&counters.records_out_full, (written / ibs) as u64);
        if written != len {
            if let Some(stored) = self.out.failed_before(at) {
                return self.failed_behind(stored, error);
            }
            self.tally
                .read_at_failed_write(counters, start + (written / ibs * ibs + ibs) as u64);
            return self.short_write(error, false);
        }
        if self.mapped_holes {
            self.count_out_from_bytes();
        } else if len % ibs != 0 {
            bump(&counters.records_out_partial);
        }
        Ok(Handled::Continue(Some(buf)))
    }

    /// Under `--bmap` data and holes meet anywhere inside a record: the
    /// whole records out are those the bytes so far make up (the last,
    /// partial one is counted at the end).
    fn count_out_from_bytes(&self) {
        let counters = self.out.counters;
        let block = self.tally.write_block() as u64;
        counters.records_out_full.store(
            counters
                .bytes_out
                .load(std::sync::atomic::Ordering::Relaxed)
                / block,
            std::sync::atomic::Ordering::Release,
        );
    }

    /// A hole of the input: whole write blocks of zeros, sought over under
    /// conv=sparse (as GNU seeks over each all-zero block), else written.
    fn hole(&mut self, len: u64) -> Result<Handled, Stop> {
        let counters = self.out.counters;
        self.tally.bulk_read(counters, len);
        let block = self.tally.write_block();
        debug_assert_eq!(self.reblocker.fill(), 0, "holes start on block boundaries");
        if self.mapped_holes
            && !self.out.raw.trims()
            && self.out.raw.skip_over(self.out.output.stream.as_mut(), len)
        {
            add(&counters.bytes_out, len);
            self.count_out_from_bytes();
            return Ok(Handled::Continue(None));
        }
        // A stream cannot seek over the hole, but may take its zeros
        // without being sent them (a compressed stream writes a frame of
        // zeros it compressed once).
        if self.mapped_holes
            && !self.out.raw.trims()
            && self
                .out
                .raw
                .zeroes_over(self.out.output.stream.as_mut(), len)
        {
            add(&counters.bytes_out, len);
            self.count_out_from_bytes();
            return Ok(Handled::Continue(None));
        }
        // --trim: the hole discarded whole where the output can, counted
        // as conv=sparse counts a seek over it; else written as zeros.
        if self
            .out
            .raw
            .discard_over(self.out.output.stream.as_mut(), len)
        {
            add(&counters.bytes_out, len);
            if self.mapped_holes {
                self.count_out_from_bytes();
            } else {
                add(&counters.records_out_full, len / block as u64);
            }
            return Ok(Handled::Continue(None));
        }
        let mut sought = 0;
        if self.out.raw.sparse() {
            sought = (self.out.raw).seek_over(self.out.output.stream.as_mut(), len, block as u64);
            add(&counters.bytes_out, sought);
            add(&counters.records_out_full, sought / block as u64);
            if sought == len {
                return Ok(Handled::Continue(None));
            }
        }
        let zeros = match self.zeros.take() {
            Some(z) => z,
            None => AlignedBuf::new(HOLE_WRITE.max(block)).map_err(|_| Stop::Die)?,
        };
        let step = zeros.len() / block * block;
        let mut left = (len - sought) as usize;
        let start = self.tally.read() - len;
        while left > 0 {
            let n = left.min(step);
            let at = self.out.raw.offset;
            let (written, error) = self.out.write_blocks(&zeros.as_slice()[..n], block);
            add(&counters.records_out_full, (written / block) as u64);
            if written != n {
                self.zeros = Some(zeros);
                if let Some(stored) = self.out.failed_before(at) {
                    return self.failed_behind(stored, error);
                }
                let done = (len as usize - left + written / block * block + block) as u64;
                self.tally.read_at_failed_write(counters, start + done);
                return self.short_write(error, written % block != 0);
            }
            left -= n;
        }
        self.zeros = Some(zeros);
        if self.mapped_holes {
            self.count_out_from_bytes();
        }
        Ok(Handled::Continue(None))
    }

    /// A short write of whole records: GNU says "error writing" and ends
    /// the copy normally (one write per read), or "writing to" and quits
    /// (re-blocked output); `partial` counts a partly written block.
    fn short_write(&mut self, error: Option<Errno>, partial: bool) -> Result<Handled, Stop> {
        self.write_failed = true;
        let file = self.out.output.name.clone();
        let errno = error.unwrap_or(Errno::IO);
        if self.plan.two_buffers {
            if partial {
                bump(&self.out.counters.records_out_partial);
            }
            self.out.write_error(Diagnostic::WritingTo { file, errno });
            return Err(Stop::Quit);
        }
        self.out
            .write_error(Diagnostic::ErrorWriting { file, errno });
        // GNU returns from the copy here (no quit): the output is still
        // synchronised and the statistics printed.
        Ok(Handled::Done {
            failed: true,
            late: None,
        })
    }

    /// A write the end had taken earlier failed (write-behind): GNU would
    /// have stopped at that write.
    fn failed_behind(&mut self, stored: u64, error: Option<Errno>) -> Result<Handled, Stop> {
        self.count_stored(stored);
        self.out.raw.offset = self.out.base.map(|base| base + stored);
        let block = self.tally.write_block() as u64;
        self.short_write(error, stored % block != 0)
    }

    /// A record written behind (direct writes in flight, see
    /// `ends::write_behind`) failed: GNU, one record at a time, would have read
    /// the records up to it, all full (the partial last one is written
    /// only once everything before it is), and written those before it.
    fn failed_behind_record(&mut self, stored: u64, error: Option<Errno>) -> Result<Handled, Stop> {
        self.count_stored_records(stored);
        self.out.raw.offset = self.out.base.map(|base| base + stored);
        self.short_write(error, false)
    }

    /// The counts GNU would show, reading and writing one record at a
    /// time, had its write of the record at `stored` failed.
    fn count_stored_records(&self, stored: u64) {
        use std::sync::atomic::Ordering::Release;
        let counters = self.out.counters;
        let ibs = self.plan.input_block_size as u64;
        counters.bytes_out.store(stored, Release);
        counters.records_out_full.store(stored / ibs, Release);
        counters.records_out_partial.store(0, Release);
        counters.records_in_full.store(stored / ibs + 1, Release);
        counters.records_in_partial.store(0, Release);
    }

    /// The counts GNU would show having written the `stored` bytes before
    /// a failed write: blocks out, and the records read up to the failed
    /// block.
    fn count_stored(&mut self, stored: u64) {
        use std::sync::atomic::Ordering::Release;
        let counters = self.out.counters;
        let block = self.tally.write_block() as u64;
        counters.bytes_out.store(stored, Release);
        counters.records_out_full.store(stored / block, Release);
        counters.records_out_partial.store(0, Release);
        counters.records_in_partial.store(0, Release);
        self.tally.read_at_failed_write(counters, stored + block);
    }

    /// The end of the stream for an end that writes behind: every write is
    /// acknowledged, or the first that failed is reported now, with the
    /// counts of what was stored before it. True when one failed.
    fn settle(&mut self) -> bool {
        let Err(errno) = self.out.output.stream.settle() else {
            return false;
        };
        if let Some(stored) = self.out.failed_before(None) {
            if self.wrote_records {
                self.count_stored_records(stored);
            } else {
                self.count_stored(stored);
            }
        }
        self.write_failed = true;
        self.out.write_error(Diagnostic::ErrorWriting {
            file: self.out.output.name.clone(),
            errno,
        });
        true
    }

    /// End of input: what the conversions hold back, the final partial
    /// block, and the size of a sparse file. Ok(true) when it failed.
    fn finish_output(&mut self) -> Result<bool, Stop> {
        if self.plan.two_buffers {
            let result = self
                .reblocker
                .finish(&mut |block| self.out.write_output_block(block));
            self.note_truncated();
            result?;
        }
        let tail = self.reblocker.partial();
        if !tail.is_empty() {
            let fill = tail.len();
            let written = self.out.raw.write(
                self.out.output.stream.as_mut(),
                &self.out.output.name,
                tail,
                false,
                self.out.events,
            );
            add(&self.out.counters.bytes_out, written.bytes as u64);
            if written.bytes != 0 {
                bump(&self.out.counters.records_out_partial);
            }
            if written.bytes != fill {
                self.out.write_error(Diagnostic::ErrorWriting {
                    file: self.out.output.name.clone(),
                    errno: written.error.unwrap_or(Errno::IO),
                });
                return Ok(true);
            }
        }
        if self.out.raw.ended_in_seek && self.extend_after_final_seek().is_err() {
            return Ok(true);
        }
        Ok(false)
    }

    /// Sparse output may end in a hole: extend the file to its full size.
    fn extend_after_final_seek(&mut self) -> Result<(), ()> {
        let end = self.out.output.stream.as_mut();
        let size = match end.size() {
            Err(errno) => {
                self.out.diag(Diagnostic::CannotFstat {
                    file: self.out.output.name.clone(),
                    errno,
                });
                return Err(());
            }
            Ok(None) => return Ok(()),
            Ok(Some(size)) => size,
        };
        if let Ok(offset) = end.seek(Whence::Current(0)) {
            if size < offset {
                if let Err(errno) = end.truncate(offset) {
                    self.out.diag(Diagnostic::TruncateFailed {
                        length: offset as i64,
                        file: self.out.output.name.clone(),
                        errno,
                    });
                    return Err(());
                }
            }
        }
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
            Some(offset) => match self.out.output.stream.seek(Whence::Current(offset as i64)) {
                Ok(_) => {
                    self.out.raw.advance(offset);
                    return Ok(());
                }
                Err(errno) => Some(errno),
            },
            None => None,
        };
        if self.out.output.stream.seek(Whence::End(0)).is_ok() {
            self.out.diag(Diagnostic::CannotSeek {
                file: self.out.output.name.clone(),
                errno: Some(lseek_errno.unwrap_or(Errno::OVERFLOW)),
            });
            return Err(Stop::Quit);
        }

        let mut buf = AlignedBuf::new(obs).map_err(|_| {
            self.out.diag(Diagnostic::NoMemory {
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
                self.out.output.stream.as_mut(),
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
            self.out.diag(Diagnostic::CannotSeek {
                file: self.out.output.name.clone(),
                errno: lseek_errno,
            });
            return Err(Stop::Quit);
        }

        // What could not be read over is written as zeros.
        while !left.is_zero() {
            let size = left.next_request(obs);
            buf.as_mut_slice()[..size].fill(0);
            let written = self.out.write(&buf.as_slice()[..size], false);
            if written.bytes != size {
                self.out.diag(Diagnostic::WritingTo {
                    file: self.out.output.name.clone(),
                    errno: written.error.unwrap_or(Errno::IO),
                });
                return Err(Stop::Quit);
            }
            left.complete_request();
        }
        Ok(())
    }

    /// conv=fdatasync/fsync (and the fsync an O_DIRECT tail requires);
    /// true if it failed. A failed fdatasync falls back to fsync. Done
    /// once.
    fn synchronize(&mut self) -> bool {
        let mut failed = false;
        let mut fsync = self.sync_pending.contains(Conv::FSYNC) || self.out.raw.fsync_required;
        if self.sync_pending.contains(Conv::FDATASYNC) {
            if let Err(errno) = self.out.output.stream.sync(true) {
                if errno != Errno::NOSYS && errno != Errno::INVAL {
                    self.out.diag(Diagnostic::FdatasyncFailed {
                        file: self.out.output.name.clone(),
                        errno,
                    });
                    failed = true;
                }
                fsync = true;
            }
        }
        if fsync {
            if let Err(errno) = self.out.output.stream.sync(false) {
                self.out.diag(Diagnostic::FsyncFailed {
                    file: self.out.output.name.clone(),
                    errno,
                });
                failed = true;
            }
        }
        self.sync_pending = Conv::empty();
        self.out.raw.fsync_required = false;
        failed
    }

    /// End-of-copy cache advice for oflag=nocache; true if it failed where
    /// GNU reports it (count=0 asks to drop a whole file's cache).
    fn drop_cache_at_end(&mut self) -> bool {
        let Some(fd) = self.out.output.stream.fd() else {
            return false;
        };
        let offset = crate::sys::file::current_offset(fd).ok();
        match self.out.raw.cache.finish(fd, offset) {
            Err(errno) if self.plan.copies_nothing() => {
                self.out.diag(Diagnostic::DiscardCacheFailed {
                    file: self.out.output.name.clone(),
                    errno,
                });
                true
            }
            _ => false,
        }
    }
}

impl Out<'_> {
    fn diag(&self, d: Diagnostic) {
        self.events.diagnostic(d);
    }

    /// GNU's message for a failed write, with what the end knows beyond
    /// its errno.
    fn write_error(&mut self, d: Diagnostic) {
        let detail = self.output.stream.take_detail();
        self.diag(d.explained(detail));
    }

    /// After a failed write to an end that writes behind (an NBD export):
    /// when the request that failed is one the end took before `at` (the
    /// output offset the failing call began at), the stream offset before
    /// which everything is stored. None: the failure is this call's own.
    fn failed_before(&mut self, at: Option<u64>) -> Option<u64> {
        // Every request still in flight ends first, so that what is
        // acknowledged is known exactly.
        let _ = self.output.stream.settle();
        let stored_until = self.output.stream.written_until()?;
        if at.is_some_and(|at| stored_until >= at) {
            return None;
        }
        // A stream that cannot tell its offset (a compressor's) counts
        // what it stored from its own first byte.
        let base = match (self.base, at) {
            (Some(base), _) => base,
            (None, None) => 0,
            (None, Some(_)) => return None,
        };
        Some(stored_until.saturating_sub(base))
    }

    /// Write `buf` whole, through the raw layer.
    #[inline(always)]
    fn write(&mut self, buf: &[u8], uncached: bool) -> Written {
        self.raw.write(
            self.output.stream.as_mut(),
            &self.output.name,
            buf,
            uncached,
            self.events,
        )
    }

    /// About to write `len` bytes in bulk at the output's offset.
    fn behind_before(&mut self, len: u64) {
        let offset = self.raw.offset.unwrap_or(0);
        self.behind.before(self.output.stream.fd(), offset, len);
    }

    /// A kernel copy wrote `len` more bytes past the writer.
    fn kernel_wrote(&mut self, len: u64) {
        self.behind.after(self.output.stream.fd(), len);
        self.raw.advance(len);
    }

    /// Write `data` whole, as [`Out::write`], keeping drop-behind's
    /// books: uncached where the copy has begun to drop and the kernel
    /// can, else noted for dropping.
    #[inline(always)]
    fn write_tracked(&mut self, data: &[u8]) -> Written {
        // An output that cannot say where it is (a pipe) has no pages to
        // drop, nor has a copy that leaves them to the kernel: one write,
        // without asking the end for its descriptor on every record.
        let (Some(at), false) = (self.raw.offset, matches!(self.behind, Dropping::Off)) else {
            return self.write(data, false);
        };
        let want = data.len() as u64;
        let uncached = self.behind.uncached(at, data.len());
        if uncached {
            self.behind.before_uncached(self.output.stream.fd());
        } else {
            self.behind_before(want);
        }
        let written = self.write(data, uncached);
        if uncached && !written.uncached_refused {
            add(&self.counters.bytes_uncached, written.bytes as u64);
        }
        if written.uncached_refused {
            self.behind.uncached_refused(at, want);
        }
        self.behind
            .after(self.output.stream.fd(), written.bytes as u64);
        written
    }

    /// dd's `write_output`: one full obs block, or quit.
    fn write_output_block(&mut self, block: &[u8]) -> Result<(), Stop> {
        let written = self.write_tracked(block);
        add(&self.counters.bytes_out, written.bytes as u64);
        if written.bytes != block.len() {
            self.write_error(Diagnostic::WritingTo {
                file: self.output.name.clone(),
                errno: written.error.unwrap_or(Errno::IO),
            });
            if written.bytes != 0 {
                bump(&self.counters.records_out_partial);
            }
            return Err(Stop::Quit);
        }
        bump(&self.counters.records_out_full);
        Ok(())
    }

    /// Write whole `block`-sized pieces (the last may be short) in as few
    /// requests as possible; under conv=sparse, all-zero pieces become
    /// seeks, as GNU makes them one block at a time.
    fn write_blocks(&mut self, data: &[u8], block: usize) -> (usize, Option<Errno>) {
        let mut done = 0;
        while done < data.len() {
            let mut end = data.len();
            if self.raw.zero_runs() {
                // The run of pieces that are all zero, or all not.
                let piece = |at: usize| &data[at..(at + block).min(data.len())];
                let zero = is_all_zero(piece(done));
                end = done;
                while end < data.len() && is_all_zero(piece(end)) == zero {
                    end = (end + block).min(data.len());
                }
                if zero && self.raw.trims() {
                    // Refused: written below, where the raw layer counts
                    // the zeros it had to write.
                    let run = (end - done) as u64;
                    if self.raw.discard_over(self.output.stream.as_mut(), run) {
                        add(&self.counters.bytes_out, run);
                        done = end;
                        continue;
                    }
                } else if zero {
                    let run = (end - done) as u64;
                    let sought =
                        (self.raw).seek_over(self.output.stream.as_mut(), run, block as u64)
                            as usize;
                    add(&self.counters.bytes_out, sought as u64);
                    done += sought;
                    if done == end {
                        continue;
                    }
                }
            }
            let want = end - done;
            let written = self.write_tracked(&data[done..end]);
            add(&self.counters.bytes_out, written.bytes as u64);
            done += written.bytes;
            if written.bytes != want {
                if want - written.bytes > block
                    && written.bytes % block == 0
                    && written.error.is_some()
                {
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
                return (done, written.error);
            }
        }
        (done, None)
    }

    /// Write the whole of `buf` as [`Out::write_blocks`] would, by handing
    /// the buffer to the end (see [`RawOutput::write_exchange`]); None
    /// where that does not apply, and nothing was written.
    fn write_exchange(&mut self, buf: &mut AlignedBuf) -> Option<(usize, Option<Errno>)> {
        if self.raw.offset.is_some() && !matches!(self.behind, Dropping::Off) {
            // Drop-behind keeps books of every write (write_tracked).
            return None;
        }
        let written = self.raw.write_exchange(self.output.stream.as_mut(), buf)?;
        add(&self.counters.bytes_out, written.bytes as u64);
        Some((written.bytes, written.error))
    }

    /// Write `data` one `block` at a time, stopping at the first failure.
    fn write_piecewise(&mut self, data: &[u8], block: usize) -> (usize, Option<Errno>) {
        let mut done = 0;
        while done < data.len() {
            let piece = &data[done..(done + block).min(data.len())];
            let written = self.write_tracked(piece);
            add(&self.counters.bytes_out, written.bytes as u64);
            done += written.bytes;
            if written.bytes != piece.len() {
                return (done, written.error);
            }
        }
        (done, None)
    }
}

/// A read for seek= over an unseekable output (GNU reads with the input's
/// fullblock setting here).
fn read_block(end: &mut dyn Stream, buf: &mut [u8], fullblock: bool) -> Result<usize, Errno> {
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
