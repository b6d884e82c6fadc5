//! skip=: lseek where the input can, else read and discard, with GNU's
//! messages for an offset it cannot reach.

use super::{advance_offset, Closed, Event, Reader, Sink, Stop};
use crate::diagnostic::Diagnostic;
use crate::ends::Whence;
use crate::operands::{Conv, RecordsAndBytes};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

impl Reader {
    /// skip=: lseek when possible, else read and discard. The outer Err is
    /// a closed sink; the inner one a fatal stop.
    pub(super) fn skip(
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
            Some(offset) => match self.input.stream.seek(Whence::Current(offset as i64)) {
                Ok(_) => {
                    let mut advance = offset as i64;
                    records = 0;
                    let size = match self.input.stream.size() {
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
            if self.input.stream.seek(Whence::End(0)).is_ok() {
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
                self.send_read_error(sink, errno)?;
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
        if skipped_short && !self.settings.quiet {
            sink.send(Event::Diagnostic(Box::new(Diagnostic::SkipShort {
                file: self.input.name.clone(),
            })))?;
        }
        Ok(Ok(()))
    }
}
