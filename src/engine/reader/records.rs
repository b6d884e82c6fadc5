//! GNU's loop, one read per record: sizes, fullblock, count=, splice
//! where records move inside the kernel, and read errors: the end of the
//! copy, or under conv=noerror the statistics, the offset moved past the
//! bad block and, under conv=sync, padding in its place.

use super::{advance_offset, Closed, Event, Reader, Record, Sink};
use crate::diagnostic::Diagnostic;
use crate::ends::Whence;
use crate::operands::Conv;
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// What the loop carries from one record to the next.
struct Turns {
    /// Bytes of the last short read (GNU's partread): a read error then
    /// loses only the rest of that record.
    partial_read: usize,
    /// A read error could not be passed over cleanly.
    failed: bool,
    /// A buffer to read the next record into (skip='s, one whose read
    /// failed, or the one the sink wrote from at once).
    next_buffer: Option<AlignedBuf>,
}

/// What one turn of the loop led to.
enum Turn {
    Next,
    /// End of input: the loop ends and sends End.
    InputEnded,
    /// The stream has ended already (End or Stop sent).
    StreamEnded,
}

/// After a read error under conv=noerror.
enum AfterError {
    /// Not under noerror: End sent.
    Ended,
    /// conv=sync: a whole block of padding stands for the lost one.
    Padding,
    /// The next record is read into the same buffer.
    Skipped,
}

impl Reader {
    /// GNU's loop: one read per record.
    pub(super) fn run_records<S: Sink + ?Sized>(
        &mut self,
        sink: &mut S,
        scratch: Option<AlignedBuf>,
    ) -> Result<(), Closed> {
        let mut turns = Turns {
            partial_read: 0,
            failed: false,
            next_buffer: scratch,
        };
        if self.splice_to.is_some() && turns.next_buffer.is_none() {
            // GNU allocates its buffer before the first read, and a bs too
            // large for memory is an error then: splicing needs none, but
            // the same bs must fail the same way (the mapping is lazy, so
            // an unused buffer costs nothing).
            turns.next_buffer = match sink.buffer(self.record_buffer_len()) {
                Ok(buf) => Some(buf),
                Err(Some(closed)) => return Err(closed),
                Err(None) => return self.no_memory(sink, self.plan.input_block_size),
            };
        }
        let count = self.plan.count;
        let limit = count.records.saturating_add(u64::from(count.bytes != 0));
        while self.records_read < limit {
            let turn = match self.splice_turn(sink)? {
                Some(turn) => turn,
                None => self.read_turn(sink, &mut turns)?,
            };
            match turn {
                Turn::Next => {}
                Turn::InputEnded => break,
                Turn::StreamEnded => return Ok(()),
            }
        }
        let late = self.finish_cache();
        sink.send(Event::End {
            failed: turns.failed,
            late,
        })
    }

    /// ibs, and the byte conv=swab may carry over.
    fn record_buffer_len(&self) -> usize {
        self.plan.input_block_size + usize::from(self.plan.conv.contains(Conv::SWAB))
    }

    /// The size of the next read: a record, or count='s extra bytes last.
    fn next_want(&self) -> usize {
        if self.records_read >= self.plan.count.records {
            self.plan.count.bytes as usize
        } else {
            self.plan.input_block_size
        }
    }

    /// One record by splice, where records move that way; None when
    /// splicing is not (or no longer) possible: the record is read.
    fn splice_turn<S: Sink + ?Sized>(&mut self, sink: &mut S) -> Result<Option<Turn>, Closed> {
        if self.splice_to.is_none() {
            return Ok(None);
        }
        let Some((result, warning)) = self.splice_record(self.next_want()) else {
            return Ok(None);
        };
        if let Some(w) = warning {
            sink.send(Event::Diagnostic(w))?;
        }
        let len = result.unwrap_or(0);
        if len == 0 {
            sink.send(Event::InputEof)?;
            return Ok(Some(Turn::InputEnded));
        }
        advance_offset(&mut self.input.offset, len as u64);
        self.records_read += 1;
        sink.send(Event::Spliced {
            len,
            full: len >= self.plan.input_block_size,
        })?;
        Ok(Some(Turn::Next))
    }

    /// One read, as GNU's loop makes it: the record sent on (padded under
    /// conv=sync), the end of input, or a read error dealt with.
    ///
    /// Inlined into the loop, with the reads and writes under it, so that
    /// the read and write system calls of a record return into the loop's
    /// own function: on kernels that clear the return predictor on every
    /// exit to user space (AMD's SRSO and Retbleed mitigations), each
    /// function that returns across a system call mispredicts, and at
    /// /dev/zero-to-/dev/null speed two such returns per call cost more
    /// per record than all of GNU dd's own code (measured: a read/write
    /// loop with each call in a function of its own took 1.38x the CPU
    /// time of the same loop with the calls inline).
    #[inline(always)]
    fn read_turn<S: Sink + ?Sized>(
        &mut self,
        sink: &mut S,
        turns: &mut Turns,
    ) -> Result<Turn, Closed> {
        let ibs = self.plan.input_block_size;
        let sync = self.plan.conv.contains(Conv::SYNC);
        let noerror = self.plan.conv.contains(Conv::NOERROR);
        let pad = if self.plan.conv.intersects(Conv::BLOCK | Conv::UNBLOCK) {
            b' '
        } else {
            0
        };
        let mut buf = match turns.next_buffer.take() {
            Some(buf) => buf,
            None => match sink.buffer(self.record_buffer_len()) {
                Ok(buf) => buf,
                Err(Some(closed)) => return Err(closed),
                Err(None) => {
                    self.no_memory(sink, ibs)?;
                    return Ok(Turn::StreamEnded);
                }
            },
        };
        if sync && noerror {
            buf.as_mut_slice()[..ibs].fill(pad);
        }
        let want = self.next_want();
        let (result, warning) = self.read(&mut buf.as_mut_slice()[..want]);
        if let Some(w) = warning {
            sink.send(Event::Diagnostic(w))?;
        }
        let mut len = match result {
            Ok(0) => {
                self.cache.to_eof |= self.cache.enabled;
                sink.send(Event::InputEof)?;
                return Ok(Turn::InputEnded);
            }
            Ok(n) => {
                advance_offset(&mut self.input.offset, n as u64);
                let offset = self.input.offset;
                if self.cache.enabled {
                    if let Some(fd) = self.input.stream.fd() {
                        self.cache.after_io(fd, offset, n as u64);
                    }
                }
                n
            }
            Err(errno) => match self.read_failed(sink, errno, turns)? {
                AfterError::Ended => return Ok(Turn::StreamEnded),
                AfterError::Padding => 0,
                AfterError::Skipped => {
                    turns.next_buffer = Some(buf);
                    return Ok(Turn::Next);
                }
            },
        };
        let full = len >= ibs;
        if full {
            turns.partial_read = 0;
        } else {
            turns.partial_read = len;
            if sync {
                if !noerror {
                    buf.as_mut_slice()[len..ibs].fill(pad);
                }
                len = ibs;
            }
        }
        self.records_read += 1;
        if let Some(written) = sink.write_now(&mut buf, len, full) {
            turns.next_buffer = Some(buf);
            written?;
            return Ok(Turn::Next);
        }
        sink.send(Event::Record(Record { buf, len, full }))?;
        Ok(Turn::Next)
    }

    /// A read failed: GNU's message, then the end of the copy, or under
    /// conv=noerror the statistics, the offset moved past the bad block
    /// and, under conv=sync, a block of padding in its place.
    fn read_failed<S: Sink + ?Sized>(
        &mut self,
        sink: &mut S,
        errno: Errno,
        turns: &mut Turns,
    ) -> Result<AfterError, Closed> {
        let noerror = self.plan.conv.contains(Conv::NOERROR);
        if !noerror || !self.settings.quiet {
            self.send_read_error(sink, errno)?;
        }
        if !noerror {
            let late = self.finish_cache();
            sink.send(Event::End { failed: true, late })?;
            return Ok(AfterError::Ended);
        }
        sink.send(Event::Statistics)?;
        let bad_portion = (self.plan.input_block_size - turns.partial_read) as u64;
        let (recovered, diagnostics) = self.advance_after_read_error(bad_portion);
        for diagnostic in diagnostics {
            sink.send(Event::Diagnostic(Box::new(diagnostic)))?;
        }
        if !recovered {
            // Reported as a failure at the end; no more seeking.
            turns.failed = true;
            self.input.seekable = false;
            self.input.seek_errno = Some(Errno::SPIPE);
        }
        if self.plan.conv.contains(Conv::SYNC) && turns.partial_read == 0 {
            // The lost block becomes a full block of padding.
            Ok(AfterError::Padding)
        } else {
            Ok(AfterError::Skipped)
        }
    }

    /// After a read error under noerror, put the input offset just past the
    /// bad block, whatever the kernel did with it. Returns whether that
    /// worked, and the messages to print (in order).
    pub(super) fn advance_after_read_error(&mut self, bad_bytes: u64) -> (bool, Vec<Diagnostic>) {
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
        match self.input.stream.seek(Whence::Current(0)) {
            Ok(offset) if offset as i64 == self.input.offset => (true, said),
            Ok(offset) => {
                let diff = self.input.offset - offset as i64;
                let plausible = (0..=bad_bytes as i64).contains(&diff);
                if !plausible && !self.settings.quiet {
                    said.push(Diagnostic::InvalidOffsetAfterRead);
                }
                match self.input.stream.seek(Whence::Current(diff)) {
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
}
