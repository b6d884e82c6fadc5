//! Reads that fill a buffer: read(2) and pread(2) may return fewer bytes
//! than asked (a signal, a pipe, a device's own unit) or EINTR, and a
//! caller that wants a whole chunk must ask again for the rest. This
//! module owns that loop, so that each caller keeps only what differs:
//! what it reads from, and what it does with a short read or an error.
//!
//! The record loop's reads (engine/reader/iread.rs) keep their own loop:
//! GNU's iread semantics differ (a short read is a record), and that loop
//! is shaped for the hot path.

use rustix::io::Errno;

/// How far a filling read got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filled {
    /// Bytes placed at the buffer's start.
    pub len: usize,
    /// The error that stopped it short; None when the buffer is full or
    /// the input ended (a read of 0 bytes).
    pub error: Option<Errno>,
}

impl Filled {
    /// The bytes read, or the error for callers that cannot use part of
    /// a chunk.
    pub fn all_or_error(self) -> Result<usize, Errno> {
        match self.error {
            Some(errno) => Err(errno),
            None => Ok(self.len),
        }
    }
}

/// Reads into `buf` until it is full, the input ends, or a read fails
/// with an error other than EINTR. `read(rest, done)` reads into the part
/// of `buf` not yet filled, `done` bytes in (a positional read adds `done`
/// to its offset).
#[inline]
pub fn fill(
    buf: &mut [u8],
    mut read: impl FnMut(&mut [u8], u64) -> Result<usize, Errno>,
) -> Filled {
    let mut len = 0;
    while len < buf.len() {
        match read(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(Errno::INTR) => {}
            Err(errno) => {
                return Filled {
                    len,
                    error: Some(errno),
                }
            }
        }
    }
    Filled { len, error: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that hands out `pieces` in turn (Ok(n) as n bytes of 7).
    fn reads(
        pieces: Vec<Result<usize, Errno>>,
    ) -> impl FnMut(&mut [u8], u64) -> Result<usize, Errno> {
        let mut pieces = pieces.into_iter();
        move |rest, _| {
            let piece = pieces.next().unwrap_or(Ok(0))?;
            let n = piece.min(rest.len());
            rest[..n].fill(7);
            Ok(n)
        }
    }

    #[test]
    fn short_reads_and_eintr_are_asked_again() {
        let mut buf = [0u8; 10];
        let filled = fill(&mut buf, reads(vec![Ok(3), Err(Errno::INTR), Ok(4), Ok(9)]));
        assert_eq!(
            filled,
            Filled {
                len: 10,
                error: None
            }
        );
        assert_eq!(buf, [7; 10]);
    }

    #[test]
    fn the_end_of_input_stops_it_short_without_an_error() {
        let mut buf = [0u8; 10];
        let filled = fill(&mut buf, reads(vec![Ok(4), Ok(0), Ok(6)]));
        assert_eq!(
            filled,
            Filled {
                len: 4,
                error: None
            }
        );
        assert_eq!(filled.all_or_error(), Ok(4));
    }

    #[test]
    fn an_error_keeps_what_came_before_it() {
        let mut buf = [0u8; 10];
        let filled = fill(&mut buf, reads(vec![Ok(5), Err(Errno::IO), Ok(5)]));
        assert_eq!(
            filled,
            Filled {
                len: 5,
                error: Some(Errno::IO)
            }
        );
        assert_eq!(filled.all_or_error(), Err(Errno::IO));
    }

    #[test]
    fn a_positional_read_is_told_how_far_it_got() {
        let data: Vec<u8> = (0..20).collect();
        let mut buf = [0u8; 8];
        // Two bytes at a time from offset 5, as pread at 5 + done.
        let filled = fill(&mut buf, |rest, done| {
            let at = 5 + done as usize;
            let n = rest.len().min(2);
            rest[..n].copy_from_slice(&data[at..at + n]);
            Ok(n)
        });
        assert_eq!(filled.len, 8);
        assert_eq!(buf, [5, 6, 7, 8, 9, 10, 11, 12]);
    }
}
