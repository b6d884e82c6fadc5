//! The reference copy loop: GNU dd's record semantics, one read then one
//! write at a time.
//!
//! Every other backend is checked against this one. It follows dd.c's
//! control flow closely on purpose (skip/seek, partial records, conv=sync
//! padding, re-blocking into obs, noerror, sparse seeks, the O_DIRECT tail),
//! because those details are what scripts depend on.

use std::os::fd::{AsFd, BorrowedFd};

use crate::engine::counters::{add, bump, Counters};
use crate::engine::diagnostic::{BufferKind, Diagnostic, Events};
use crate::engine::endpoints::{Input, Output};
use crate::operands::{Conv, CopyPlan, IoFlags, StatusLevel, UNLIMITED_RECORDS};
use crate::sys::buffer::AlignedBuf;
use crate::sys::file;
use crate::sys::Errno;
use crate::transform::{is_all_zero, Blocker, Swab, Translation, Unblocker};

/// How the copy ended, for the finishing steps and the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub failed: bool,
    /// An O_DIRECT tail was written through the cache: GNU then fsyncs.
    pub fsync_required: bool,
}

/// Posix_fadvise(DONTNEED) bookkeeping for iflag/oflag=nocache.
///
/// Advice is given in 128 KiB steps, as GNU does, to keep the number of
/// system calls low.
#[derive(Debug, Default)]
struct CacheDropper {
    enabled: bool,
    /// Drop everything up to end of file when finishing.
    to_eof: bool,
    pending: u64,
}

const CACHE_STEP: u64 = 128 * 1024;

impl CacheDropper {
    fn after_io(&mut self, fd: BorrowedFd<'_>, offset_after: i64, len: u64) {
        if !self.enabled || offset_after < 0 {
            return;
        }
        self.pending += len;
        if self.pending >= CACHE_STEP {
            let start = offset_after as u64 - self.pending;
            let _ = file::drop_cache(fd, start, self.pending);
            self.pending = 0;
        }
    }

    /// Drop what is still pending, or everything from the current offset
    /// to end of file when `to_eof`.
    fn finish(&mut self, fd: BorrowedFd<'_>, offset: Option<i64>) -> Result<(), Errno> {
        let offset = offset.ok_or(Errno::SPIPE)?;
        let result = if self.to_eof {
            let page = 4096;
            let start = (offset as u64).saturating_sub(self.pending);
            file::drop_cache(fd, start - start % page, 0)
        } else if self.pending > 0 {
            file::drop_cache(fd, offset as u64 - self.pending, self.pending)
        } else {
            Ok(())
        };
        self.pending = 0;
        result
    }
}

/// The reading half: dd's `iread`/`iread_fullblock`.
struct Reader {
    fullblock: bool,
    direct: bool,
    warn_partial_read: bool,
    quiet: bool,
    previous: isize,
}

impl Reader {
    fn read_once(
        &mut self,
        fd: BorrowedFd<'_>,
        buf: &mut [u8],
        events: &dyn Events,
    ) -> Result<usize, Errno> {
        let size = buf.len() as isize;
        let result = loop {
            match file::read(fd, buf) {
                Err(Errno::INTR) => continue,
                // O_DIRECT's last read of a file not a multiple of the
                // block size fails with EINVAL: that is end of file.
                Err(Errno::INVAL) if self.direct && 0 < self.previous && self.previous < size => {
                    break Ok(0)
                }
                other => break other,
            }
        };
        let n = match result {
            Ok(n) => n as isize,
            Err(_) => -1,
        };
        if 0 < n && self.warn_partial_read && 0 < self.previous && self.previous < size {
            if !self.quiet {
                events.diagnostic(Diagnostic::PartialRead {
                    bytes: self.previous as u64,
                });
            }
            self.warn_partial_read = false;
        }
        self.previous = n;
        result
    }

    fn read(
        &mut self,
        fd: BorrowedFd<'_>,
        buf: &mut [u8],
        events: &dyn Events,
    ) -> Result<usize, Errno> {
        if !self.fullblock {
            return self.read_once(fd, buf, events);
        }
        let mut total = 0;
        while total < buf.len() {
            match self.read_once(fd, &mut buf[total..], events)? {
                0 => break,
                n => total += n,
            }
        }
        Ok(total)
    }
}

/// The writing half: dd's `iwrite`, with sparse seeks and the O_DIRECT tail.
struct Writer {
    output_block_size: usize,
    direct: bool,
    sparse: bool,
    quiet: bool,
    final_op_was_seek: bool,
    fsync_required: bool,
    cache: CacheDropper,
    /// Output offset for cache advice; -1 when unknown.
    offset: i64,
}

impl Writer {
    /// Write all of `buf`; returns the bytes written and, if short, why.
    fn write(
        &mut self,
        fd: BorrowedFd<'_>,
        name: &[u8],
        buf: &[u8],
        events: &dyn Events,
    ) -> (usize, Option<Errno>) {
        if self.direct && buf.len() < self.output_block_size {
            if let Err(errno) = file::clear_direct(fd) {
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
                match file::seek_relative(fd, buf.len() as i64) {
                    Ok(_) => {
                        self.final_op_was_seek = true;
                        written = buf.len();
                        break;
                    }
                    // Not seekable: sparse is only advice, write instead.
                    Err(_) => self.sparse = false,
                }
            }
            match file::write(fd, &buf[written..]) {
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
            self.cache.after_io(fd, self.offset, written as u64);
        }
        (written, error)
    }
}

/// The copy's mutable state, mirroring dd.c's globals.
pub struct SyncCopy<'a> {
    plan: &'a CopyPlan,
    input: &'a mut Input,
    output: &'a mut Output,
    counters: &'a Counters,
    events: &'a dyn Events,
    conv: Conv,
    reader: Reader,
    writer: Writer,
    input_cache: CacheDropper,
    input_buffer: Option<AlignedBuf>,
    output_buffer: Option<AlignedBuf>,
    output_fill: usize,
    translation: Option<Translation>,
    newline: u8,
    space: u8,
}

/// A fatal stop: dd's `quit(EXIT_FAILURE)` or `die`.
#[derive(Debug)]
enum Stop {
    /// Print the statistics and exit 1.
    Quit,
    /// Exit 1 without statistics (dd's `die`, e.g. no memory).
    Die,
}

/// The result of a run, as the caller acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunResult {
    Finished(Outcome),
    /// Failed in a way that prints statistics (GNU's quit).
    Quit(Outcome),
    /// Failed before copying, without statistics (GNU's die).
    Died,
}

impl<'a> SyncCopy<'a> {
    pub fn new(
        plan: &'a CopyPlan,
        input: &'a mut Input,
        output: &'a mut Output,
        counters: &'a Counters,
        events: &'a dyn Events,
    ) -> Self {
        let translation = Translation::for_conversions(plan.conv);
        let (newline, space) = translation
            .as_ref()
            .map_or((b'\n', b' '), |t| (t.newline, t.space));
        let quiet = plan.status == StatusLevel::None;
        let output_offset = file::current_offset(output.handle.as_fd()).unwrap_or(-1);
        let nothing_to_count = plan.copies_nothing();
        SyncCopy {
            plan,
            input,
            output,
            counters,
            events,
            conv: plan.conv,
            reader: Reader {
                fullblock: plan.input_flags.contains(IoFlags::FULLBLOCK),
                direct: plan.input_flags.contains(IoFlags::DIRECT),
                warn_partial_read: plan.warn_partial_read,
                quiet,
                previous: 0,
            },
            writer: Writer {
                output_block_size: plan.output_block_size,
                direct: plan.output_flags.contains(IoFlags::DIRECT),
                sparse: plan.conv.contains(Conv::SPARSE),
                quiet,
                final_op_was_seek: false,
                fsync_required: false,
                cache: CacheDropper {
                    enabled: plan.output_nocache,
                    to_eof: plan.output_nocache && nothing_to_count,
                    pending: 0,
                },
                offset: output_offset,
            },
            input_cache: CacheDropper {
                enabled: plan.input_nocache,
                to_eof: plan.input_nocache && nothing_to_count,
                pending: 0,
            },
            input_buffer: None,
            output_buffer: None,
            output_fill: 0,
            translation,
            newline,
            space,
        }
    }

    pub fn run(mut self) -> RunResult {
        let result = self.copy();
        let outcome = |failed, this: &Self| Outcome {
            failed,
            fsync_required: this.writer.fsync_required,
        };
        match result {
            Ok(failed) => {
                if self.conv.intersects(Conv::FDATASYNC | Conv::FSYNC) {
                    self.events.before_sync();
                }
                let sync_failed = self.synchronize();
                let cache_failed = self.drop_caches_at_end();
                RunResult::Finished(outcome(failed || sync_failed || cache_failed, &self))
            }
            // GNU's quit(): a failed sync there exits before the statistics.
            Err(Stop::Quit) => match self.synchronize() {
                true => RunResult::Died,
                false => RunResult::Quit(outcome(true, &self)),
            },
            Err(Stop::Die) => RunResult::Died,
        }
    }

    /// conv=fdatasync/fsync (and the fsync an O_DIRECT tail requires);
    /// true if it failed. A failed fdatasync falls back to fsync.
    fn synchronize(&mut self) -> bool {
        let fd = self.output.handle.as_fd();
        let mut failed = false;
        let mut fsync = self.conv.contains(Conv::FSYNC) || self.writer.fsync_required;
        if self.conv.contains(Conv::FDATASYNC) {
            if let Err(errno) = file::fdatasync(fd) {
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
            if let Err(errno) = file::fsync(fd) {
                self.diag(Diagnostic::FsyncFailed {
                    file: self.output.name.clone(),
                    errno,
                });
                failed = true;
            }
        }
        self.conv.remove(Conv::FDATASYNC | Conv::FSYNC);
        self.writer.fsync_required = false;
        failed
    }

    fn diag(&self, d: Diagnostic) {
        self.events.diagnostic(d);
    }

    fn quiet(&self) -> bool {
        self.plan.status == StatusLevel::None
    }

    fn input_fd(&self) -> BorrowedFd<'_> {
        self.input.handle.as_fd()
    }

    fn alloc_input(&mut self) -> Result<(), Stop> {
        if self.input_buffer.is_none() {
            let extra = usize::from(self.conv.contains(Conv::SWAB));
            let size = self.plan.input_block_size;
            let buf = size
                .checked_add(extra)
                .and_then(|len| AlignedBuf::new(len).ok())
                .ok_or_else(|| {
                    self.diag(Diagnostic::NoMemory {
                        buffer: BufferKind::Input,
                        size,
                    });
                    Stop::Die
                })?;
            self.input_buffer = Some(buf);
        }
        Ok(())
    }

    fn alloc_output(&mut self) -> Result<(), Stop> {
        if !self.plan.two_buffers {
            return self.alloc_input();
        }
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

    fn advance_input_offset(&mut self, n: u64) {
        advance_offset(&mut self.input.offset, n);
    }

    /// dd's main loop; Ok(true) when it ended with a failure to report.
    fn copy(&mut self) -> Result<bool, Stop> {
        let plan = self.plan;
        if !plan.skip.is_zero() {
            self.skip_input()?;
        }
        if !plan.seek.is_zero() {
            self.seek_output()?;
        }
        if plan.copies_nothing() {
            return Ok(false);
        }
        self.alloc_input()?;
        self.alloc_output()?;

        let ibs = plan.input_block_size;
        let max_records = plan.count.records;
        let max_bytes = plan.count.bytes;
        let sync = self.conv.contains(Conv::SYNC);
        let noerror = self.conv.contains(Conv::NOERROR);
        let pad = if self.conv.intersects(Conv::BLOCK | Conv::UNBLOCK) {
            b' '
        } else {
            0
        };
        let mut partial_read = 0usize;
        let mut failed = false;
        let mut swab = Swab::default();
        let mut blocker = Blocker::new(plan.conversion_block_size);
        let mut unblocker = Unblocker::new(plan.conversion_block_size);

        loop {
            if self.counters.take_progress_due() {
                self.events.progress();
            }
            let records_in = self.counters.records_in();
            if records_in >= max_records.saturating_add(u64::from(max_bytes != 0)) {
                break;
            }
            let mut ibuf = self.input_buffer.take().expect("input buffer allocated");
            if sync && noerror {
                ibuf.as_mut_slice()[..ibs].fill(pad);
            }
            let want = if records_in >= max_records {
                max_bytes as usize
            } else {
                ibs
            };
            let fd = self.input.handle.as_fd();
            let result = self
                .reader
                .read(fd, &mut ibuf.as_mut_slice()[..want], self.events);
            let mut nread = match result {
                Ok(0) => {
                    self.input_buffer = Some(ibuf);
                    self.input_cache.to_eof |= self.input_cache.enabled;
                    if !self.conv.contains(Conv::NOTRUNC) {
                        self.writer.cache.to_eof |= self.writer.cache.enabled;
                    }
                    break;
                }
                Ok(n) => {
                    self.advance_input_offset(n as u64);
                    let offset = self.input.offset;
                    self.input_cache
                        .after_io(self.input.handle.as_fd(), offset, n as u64);
                    n
                }
                Err(errno) => {
                    if !noerror || !self.quiet() {
                        self.diag(Diagnostic::ReadError {
                            file: self.input.name.clone(),
                            errno,
                        });
                    }
                    if !noerror {
                        self.input_buffer = Some(ibuf);
                        failed = true;
                        break;
                    }
                    self.events.statistics();
                    let bad_portion = ibs - partial_read;
                    if !self.advance_input_after_read_error(bad_portion as u64) {
                        failed = true;
                        self.input.seekable = false;
                        self.input.seek_errno = Some(Errno::SPIPE);
                    }
                    if sync && partial_read == 0 {
                        // The lost block becomes a full block of padding.
                        0
                    } else {
                        self.input_buffer = Some(ibuf);
                        continue;
                    }
                }
            };

            if nread < ibs {
                bump(&self.counters.records_in_partial);
                partial_read = nread;
                if sync {
                    if !noerror {
                        ibuf.as_mut_slice()[nread..ibs].fill(pad);
                    }
                    nread = ibs;
                }
            } else {
                bump(&self.counters.records_in_full);
                partial_read = 0;
            }

            if !plan.two_buffers {
                let fd = self.output.handle.as_fd();
                let (written, error) = self.writer.write(
                    fd,
                    &self.output.name,
                    &ibuf.as_slice()[..nread],
                    self.events,
                );
                self.input_buffer = Some(ibuf);
                add(&self.counters.bytes_out, written as u64);
                if written != nread {
                    self.diag(Diagnostic::ErrorWriting {
                        file: self.output.name.clone(),
                        errno: error.unwrap_or(Errno::IO),
                    });
                    return Ok(true);
                }
                if nread == ibs {
                    bump(&self.counters.records_out_full);
                } else {
                    bump(&self.counters.records_out_partial);
                }
                continue;
            }

            if let Some(t) = &self.translation {
                t.apply(&mut ibuf.as_mut_slice()[..nread]);
            }
            let range = if self.conv.contains(Conv::SWAB) {
                swab.apply(ibuf.as_mut_slice(), nread)
            } else {
                0..nread
            };
            let data = &ibuf.as_slice()[range];
            let result = if self.conv.contains(Conv::BLOCK) {
                let (newline, space) = (self.newline, self.space);
                let r = blocker.push(data, newline, space, &mut |c| self.output_byte(c));
                self.counters
                    .records_truncated
                    .store(blocker.truncated, std::sync::atomic::Ordering::Release);
                r
            } else if self.conv.contains(Conv::UNBLOCK) {
                let (newline, space) = (self.newline, self.space);
                unblocker.push(data, newline, space, &mut |c| self.output_byte(c))
            } else {
                self.output_slice(data)
            };
            self.input_buffer = Some(ibuf);
            result?;
        }

        if let Some(saved) = swab.take_saved() {
            let (newline, space) = (self.newline, self.space);
            if self.conv.contains(Conv::BLOCK) {
                blocker.push(&[saved], newline, space, &mut |c| self.output_byte(c))?;
                self.counters
                    .records_truncated
                    .store(blocker.truncated, std::sync::atomic::Ordering::Release);
            } else if self.conv.contains(Conv::UNBLOCK) {
                unblocker.push(&[saved], newline, space, &mut |c| self.output_byte(c))?;
            } else {
                self.output_byte(saved)?;
            }
        }
        if self.conv.contains(Conv::BLOCK) {
            let space = self.space;
            blocker.finish(space, &mut |c| self.output_byte(c))?;
        }
        if self.conv.contains(Conv::UNBLOCK) {
            let newline = self.newline;
            unblocker.finish(newline, &mut |c| self.output_byte(c))?;
        }

        if self.output_fill != 0 {
            let obuf = self.output_buffer.take().expect("output buffer allocated");
            let fill = self.output_fill;
            let fd = self.output.handle.as_fd();
            let (written, error) =
                self.writer
                    .write(fd, &self.output.name, &obuf.as_slice()[..fill], self.events);
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

        if self.writer.final_op_was_seek && self.extend_after_final_seek().is_err() {
            return Ok(true);
        }
        Ok(failed)
    }

    /// Sparse output may end in a hole: extend the file to its full size.
    fn extend_after_final_seek(&mut self) -> Result<(), ()> {
        let fd = self.output.handle.as_fd();
        let size = match file::usable_size(fd) {
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
        if let Ok(offset) = file::current_offset(fd) {
            if size < offset {
                if let Err(errno) = file::truncate(fd, offset as u64) {
                    self.diag(Diagnostic::TruncateFailed {
                        length: offset,
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
        let fd = self.output.handle.as_fd();
        let (written, error) =
            self.writer
                .write(fd, &self.output.name, &obuf.as_slice()[..obs], self.events);
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

    /// skip=: lseek when possible, else read and discard.
    fn skip_input(&mut self) -> Result<(), Stop> {
        let plan = self.plan;
        let ibs = plan.input_block_size;
        let requested = plan.skip.total_bytes(ibs);
        let offset_before = self.input.offset;
        let mut records = plan.skip.records;
        let mut bytes = plan.skip.bytes;
        let fd = self.input.handle.as_fd();

        // Err(None): the offset does not fit an off_t, so no lseek was tried.
        let seek_result: Result<(), Option<Errno>> = match requested {
            Some(offset) => match file::seek_relative(fd, offset as i64) {
                Ok(_) => {
                    let mut advance = offset as i64;
                    records = 0;
                    let size = file::usable_size(fd).map_err(|errno| {
                        self.diag(Diagnostic::CannotFstat {
                            file: self.input.name.clone(),
                            errno,
                        });
                        Stop::Die
                    })?;
                    if let Some(size) = size {
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
            if file::seek_to_end(fd).is_ok() {
                // Seekable, but not to there: GNU gives up.
                self.diag(Diagnostic::CannotSkip {
                    file: self.input.name.clone(),
                    errno: lseek_errno.unwrap_or(Errno::OVERFLOW),
                });
                return Err(Stop::Quit);
            }
            self.alloc_input()?;
            let mut ibuf = self.input_buffer.take().expect("input buffer allocated");
            let noerror = self.conv.contains(Conv::NOERROR);
            let result = loop {
                let want = if records != 0 { ibs } else { bytes as usize };
                let fd = self.input.handle.as_fd();
                match self
                    .reader
                    .read(fd, &mut ibuf.as_mut_slice()[..want], self.events)
                {
                    Err(errno) => break Err(errno),
                    Ok(0) => break Ok(()),
                    Ok(n) => self.advance_input_offset(n as u64),
                }
                if records != 0 {
                    records -= 1;
                } else {
                    bytes = 0;
                }
                if records == 0 && bytes == 0 {
                    break Ok(());
                }
            };
            self.input_buffer = Some(ibuf);
            if let Err(errno) = result {
                self.diag(Diagnostic::ReadError {
                    file: self.input.name.clone(),
                    errno,
                });
                if noerror {
                    self.events.statistics();
                }
                return Err(Stop::Quit);
            }
        }

        let skipped_short = records != 0
            || (self.input.offset >= 0
                && match requested {
                    None => true,
                    Some(r) => r as i64 != self.input.offset - offset_before,
                });
        if skipped_short && !self.quiet() {
            self.diag(Diagnostic::SkipShort {
                file: self.input.name.clone(),
            });
        }
        Ok(())
    }

    /// seek=: lseek when possible; on an unseekable output, read over what
    /// is there and write zeros for the rest.
    fn seek_output(&mut self) -> Result<(), Stop> {
        let plan = self.plan;
        let obs = plan.output_block_size;
        let fd = self.output.handle.as_fd();
        let requested = plan.seek.total_bytes(obs);
        let lseek_errno = match requested {
            Some(offset) => match file::seek_relative(fd, offset as i64) {
                Ok(_) => {
                    if self.writer.offset >= 0 {
                        self.writer.offset += offset as i64;
                    }
                    return Ok(());
                }
                Err(errno) => Some(errno),
            },
            None => None,
        };
        if file::seek_to_end(fd).is_ok() {
            self.diag(Diagnostic::CannotSeek {
                file: self.output.name.clone(),
                errno: Some(lseek_errno.unwrap_or(Errno::OVERFLOW)),
            });
            return Err(Stop::Quit);
        }

        self.alloc_output()?;
        let mut records = plan.seek.records;
        let mut bytes = plan.seek.bytes;
        let mut buf = self.take_output_buffer();
        let result = loop {
            let want = if records != 0 { obs } else { bytes as usize };
            let fd = self.output.handle.as_fd();
            match self
                .reader
                .read(fd, &mut buf.as_mut_slice()[..want], self.events)
            {
                Err(_) => break Err(()),
                Ok(0) => break Ok(()),
                Ok(_) => {}
            }
            if records != 0 {
                records -= 1;
            } else {
                bytes = 0;
            }
            if records == 0 && bytes == 0 {
                break Ok(());
            }
        };
        if result.is_err() {
            self.put_output_buffer(buf);
            self.diag(Diagnostic::CannotSeek {
                file: self.output.name.clone(),
                errno: lseek_errno,
            });
            return Err(Stop::Quit);
        }

        // What could not be read over is written as zeros.
        while records != 0 || bytes != 0 {
            let size = if records != 0 { obs } else { bytes as usize };
            buf.as_mut_slice()[..size].fill(0);
            let fd = self.output.handle.as_fd();
            let (written, error) =
                self.writer
                    .write(fd, &self.output.name, &buf.as_slice()[..size], self.events);
            if written != size {
                self.put_output_buffer(buf);
                self.diag(Diagnostic::WritingTo {
                    file: self.output.name.clone(),
                    errno: error.unwrap_or(Errno::IO),
                });
                return Err(Stop::Quit);
            }
            if records != 0 {
                records -= 1;
            } else {
                bytes = 0;
            }
        }
        self.put_output_buffer(buf);
        Ok(())
    }

    fn take_output_buffer(&mut self) -> AlignedBuf {
        if self.plan.two_buffers {
            self.output_buffer.take()
        } else {
            self.input_buffer.take()
        }
        .expect("buffer allocated")
    }

    fn put_output_buffer(&mut self, buf: AlignedBuf) {
        if self.plan.two_buffers {
            self.output_buffer = Some(buf);
        } else {
            self.input_buffer = Some(buf);
        }
    }

    /// After a read error under noerror, put the input offset just past
    /// the bad block, whatever the kernel did with it.
    fn advance_input_after_read_error(&mut self, bad_bytes: u64) -> bool {
        if !self.input.seekable {
            if self.input.seek_errno == Some(Errno::SPIPE) {
                return true;
            }
            let errno = self.input.seek_errno.unwrap_or(Errno::SPIPE);
            self.diag(Diagnostic::CannotSeek {
                file: self.input.name.clone(),
                errno: Some(errno),
            });
            return false;
        }
        self.advance_input_offset(bad_bytes);
        if self.input.offset < 0 {
            self.diag(Diagnostic::OffsetOverflow {
                file: self.input.name.clone(),
            });
            return false;
        }
        let fd = self.input_fd();
        match file::current_offset(fd) {
            Ok(offset) => {
                if offset == self.input.offset {
                    return true;
                }
                let diff = self.input.offset - offset;
                let plausible = (0..=bad_bytes as i64).contains(&diff);
                if !plausible && !self.quiet() {
                    self.diag(Diagnostic::InvalidOffsetAfterRead);
                }
                match file::seek_relative(self.input_fd(), diff) {
                    Ok(_) => true,
                    Err(errno) => {
                        self.diag(Diagnostic::CannotSeek {
                            file: self.input.name.clone(),
                            errno: Some(errno),
                        });
                        false
                    }
                }
            }
            Err(errno) => {
                self.diag(Diagnostic::CannotSeek {
                    file: self.input.name.clone(),
                    errno: Some(errno),
                });
                false
            }
        }
    }

    /// End-of-copy cache advice for nocache; true if it failed where GNU
    /// reports it (count=0 asks to drop a whole file's cache).
    fn drop_caches_at_end(&mut self) -> bool {
        let mut failed = false;
        let strict = self.plan.copies_nothing();
        if self.input_cache.enabled {
            let offset = self.input.seekable.then_some(self.input.offset);
            let fd = self.input.handle.as_fd();
            if let Err(errno) = self.input_cache.finish(fd, offset) {
                if strict {
                    self.events.diagnostic(Diagnostic::DiscardCacheFailed {
                        file: self.input.name.clone(),
                        errno,
                    });
                    failed = true;
                }
            }
        }
        if self.writer.cache.enabled {
            let fd = self.output.handle.as_fd();
            let offset = file::current_offset(fd).ok();
            if let Err(errno) = self.writer.cache.finish(fd, offset) {
                if strict {
                    self.events.diagnostic(Diagnostic::DiscardCacheFailed {
                        file: self.output.name.clone(),
                        errno,
                    });
                    failed = true;
                }
            }
        }
        failed
    }
}

/// Add to GNU's input offset, which turns negative for good on overflow.
fn advance_offset(offset: &mut i64, n: u64) {
    if *offset >= 0 {
        *offset = i64::try_from(n)
            .ok()
            .and_then(|n| offset.checked_add(n))
            .unwrap_or(-1);
    }
}

/// `max_records == UNLIMITED_RECORDS` never ends the loop on its own.
const _: () = assert!(UNLIMITED_RECORDS < u64::MAX);
