//! An input end over bytes in memory, as a file (positional, with a
//! size) or as a pipe (short reads, no seeking), so that the wrappers ddx
//! puts around an input (a decoder, a bmap filter) meet both kinds.

use crate::ends::{Kind, Whence};
use crate::engine::stream::Stream;
use crate::sys::Errno;

/// Most bytes one read of a pipe returns: odd, so that reads end inside
/// every structure the decoders read.
const PIPE_READ: usize = 4093;

#[derive(Debug)]
pub struct Bytes {
    data: Vec<u8>,
    at: usize,
    kind: Kind,
}

impl Bytes {
    pub fn file(data: Vec<u8>) -> Box<dyn Stream> {
        Box::new(Bytes {
            data,
            at: 0,
            kind: Kind::RegularFile,
        })
    }

    pub fn pipe(data: Vec<u8>) -> Box<dyn Stream> {
        Box::new(Bytes {
            data,
            at: 0,
            kind: Kind::Pipe,
        })
    }
}

impl Stream for Bytes {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut n = buf.len().min(self.data.len().saturating_sub(self.at));
        if self.kind == Kind::Pipe {
            n = n.min(PIPE_READ);
        }
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        if self.kind == Kind::Pipe {
            return Err(Errno::SPIPE);
        }
        let target = match to {
            Whence::Start(at) => Some(at),
            Whence::Current(delta) => (self.at as u64).checked_add_signed(delta),
            Whence::End(delta) => (self.data.len() as u64).checked_add_signed(delta),
        }
        .and_then(|at| usize::try_from(at).ok())
        .ok_or(Errno::INVAL)?;
        self.at = target;
        Ok(target as u64)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok((self.kind == Kind::RegularFile).then_some(self.data.len() as u64))
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<(), Errno> {
        Ok(())
    }
}

/// What reading an end to its end gave: the bytes, and the error that
/// stopped it, if one did, with the end's detail.
#[derive(Debug)]
pub struct Drained {
    pub data: Vec<u8>,
    pub error: Option<(Errno, Option<String>)>,
    /// Reading stopped at `limit` bytes, before the end.
    pub cut: bool,
}

/// Read `end` until it ends, fails or has given `limit` bytes, in reads
/// of `step` bytes.
pub fn drain(end: &mut dyn Stream, step: usize, limit: usize) -> Drained {
    let mut data = Vec::new();
    let mut buf = vec![0u8; step];
    loop {
        if data.len() >= limit {
            return Drained {
                data,
                error: None,
                cut: true,
            };
        }
        match end.read(&mut buf) {
            Ok(0) => {
                return Drained {
                    data,
                    error: None,
                    cut: false,
                }
            }
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(Errno::INTR) => {}
            Err(errno) => {
                let detail = end.take_detail();
                return Drained {
                    data,
                    error: Some((errno, detail)),
                    cut: false,
                };
            }
        }
    }
}
