//! dd's `iread`: one read (or, with iflag=fullblock, reads until the
//! buffer is full), the partial-read warning GNU gives once, O_DIRECT's
//! EINVAL at the end of a file, and one record moved by splice(2).

use std::os::fd::AsFd;

use super::Reader;
use crate::diagnostic::Diagnostic;
use crate::sys::file;
use crate::sys::Errno;

/// A read's result, and the warning it gave, if any.
pub(super) type ReadOutcome = (Result<usize, Errno>, Option<Box<Diagnostic>>);

impl Reader {
    /// One record by splice: what a read of `want` bytes would have
    /// returned (a pipe input: one splice; a file: until full or end of
    /// file, as its read would be). None when splice fails before moving
    /// anything: splicing stops, and this record and the rest are read and
    /// written, which meets a real error, on whichever end, as GNU does.
    pub(super) fn splice_record(&mut self, want: usize) -> Option<ReadOutcome> {
        let output = self.splice_to.take()?;
        let input = self.input.stream.fd()?;
        let mut moved = 0;
        while moved < want {
            match file::splice(input, output.as_fd(), want - moved) {
                Ok(0) => break,
                Ok(n) => {
                    moved += n;
                    if self.settings.input_is_pipe {
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
    #[inline(always)]
    fn read_once(&mut self, buf: &mut [u8]) -> ReadOutcome {
        let size = buf.len() as isize;
        let result = loop {
            let read = match self.input.stream.plain_fd() {
                Some(fd) => file::read(fd, buf),
                None => self.input.stream.read(buf),
            };
            match read {
                Err(Errno::INTR) => continue,
                // O_DIRECT's last read of a file not a multiple of the
                // block size fails with EINVAL: that is end of file.
                Err(Errno::INVAL)
                    if self.settings.direct && 0 < self.previous && self.previous < size =>
                {
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
            if !self.settings.quiet {
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
    #[inline(always)]
    pub(super) fn read(
        &mut self,
        buf: &mut [u8],
    ) -> (Result<usize, Errno>, Option<Box<Diagnostic>>) {
        if !self.settings.fullblock {
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
}
