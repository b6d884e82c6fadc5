//! conv=block and conv=unblock: between newline-terminated lines and
//! fixed-size (cbs) records padded with spaces.
//!
//! Both keep their column across reads, so a record may span input blocks.
//! Output goes byte by byte to a caller-supplied sink (the output buffer),
//! which can fail when a full output block cannot be written.

/// conv=block: each line becomes one cbs-byte record; longer lines are
/// truncated (and counted), shorter ones padded with spaces.
#[derive(Debug)]
pub struct Blocker {
    record_size: usize,
    column: usize,
    /// Lines cut short to fit a record (GNU's "truncated records").
    pub truncated: u64,
}

impl Blocker {
    pub fn new(record_size: usize) -> Self {
        Blocker {
            record_size,
            column: 0,
            truncated: 0,
        }
    }

    pub fn push<E>(
        &mut self,
        input: &[u8],
        newline: u8,
        space: u8,
        emit: &mut impl FnMut(u8) -> Result<(), E>,
    ) -> Result<(), E> {
        for &c in input {
            if c == newline {
                for _ in self.column..self.record_size {
                    emit(space)?;
                }
                self.column = 0;
            } else {
                if self.column == self.record_size {
                    self.truncated += 1;
                } else if self.column < self.record_size {
                    emit(c)?;
                }
                self.column += 1;
            }
        }
        Ok(())
    }

    /// Pad a final line that had no newline.
    pub fn finish<E>(
        &mut self,
        space: u8,
        emit: &mut impl FnMut(u8) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.column > 0 {
            for _ in self.column..self.record_size {
                emit(space)?;
            }
        }
        Ok(())
    }
}

/// conv=unblock: each cbs-byte record becomes a line without its trailing
/// spaces.
#[derive(Debug)]
pub struct Unblocker {
    record_size: usize,
    column: usize,
    pending_spaces: usize,
}

impl Unblocker {
    pub fn new(record_size: usize) -> Self {
        Unblocker {
            record_size,
            column: 0,
            pending_spaces: 0,
        }
    }

    pub fn push<E>(
        &mut self,
        input: &[u8],
        newline: u8,
        space: u8,
        emit: &mut impl FnMut(u8) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut i = 0;
        while i < input.len() {
            let c = input[i];
            let column = self.column;
            self.column += 1;
            if column >= self.record_size {
                // End of a record: the byte starts the next one.
                self.column = 0;
                self.pending_spaces = 0;
                emit(newline)?;
                continue;
            }
            if c == space {
                self.pending_spaces += 1;
            } else {
                while self.pending_spaces > 0 {
                    emit(space)?;
                    self.pending_spaces -= 1;
                }
                emit(c)?;
            }
            i += 1;
        }
        Ok(())
    }

    /// End the last line if anything was output for it.
    pub fn finish<E>(
        &mut self,
        newline: u8,
        emit: &mut impl FnMut(u8) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.column > 0 {
            emit(newline)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    fn block(cbs: usize, chunks: &[&[u8]]) -> (Vec<u8>, u64) {
        let mut b = Blocker::new(cbs);
        let mut out = Vec::new();
        let mut emit = |c| -> Result<(), Infallible> {
            out.push(c);
            Ok(())
        };
        for c in chunks {
            b.push(c, b'\n', b' ', &mut emit).unwrap();
        }
        b.finish(b' ', &mut emit).unwrap();
        (out, b.truncated)
    }

    fn unblock(cbs: usize, chunks: &[&[u8]]) -> Vec<u8> {
        let mut u = Unblocker::new(cbs);
        let mut out = Vec::new();
        let mut emit = |c| -> Result<(), Infallible> {
            out.push(c);
            Ok(())
        };
        for c in chunks {
            u.push(c, b'\n', b' ', &mut emit).unwrap();
        }
        u.finish(b'\n', &mut emit).unwrap();
        out
    }

    #[test]
    fn block_pads_and_truncates() {
        assert_eq!(block(4, &[b"ab\nabcdef\nx"]), (b"ab  abcdx   ".to_vec(), 1));
        assert_eq!(block(3, &[b"a", b"b\nc"]), (b"ab c  ".to_vec(), 0));
    }

    #[test]
    fn unblock_strips_trailing_spaces() {
        assert_eq!(unblock(4, &[b"ab  cd e"]), b"ab\ncd e\n");
        assert_eq!(unblock(2, &[b"a ", b" b"]), b"a\n b\n");
        assert_eq!(unblock(4, &[b""]), b"");
    }
}
