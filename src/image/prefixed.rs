//! An input end whose first bytes were read already, given them back.
//!
//! Recognising a compression format reads the input's first bytes. A file
//! seeks back over them; a pipe, a socket or any other end that cannot
//! seek gets them replayed by this wrapper, under `--decompress=auto`
//! when the input turns out not to be compressed.
//!
//! The wrapper has no descriptor to offer ([`Stream::fd`] is None): a splice
//! or copy_file_range from the inner descriptor would skip the replayed
//! bytes.

use crate::ends::{Capabilities, Kind, Whence};
use crate::engine::stream::{forward_to_inner, Stream};
use crate::sys::Errno;

#[derive(Debug)]
pub struct Prefixed {
    head: Vec<u8>,
    at: usize,
    inner: Box<dyn Stream>,
}

impl Prefixed {
    pub fn new(head: Vec<u8>, inner: Box<dyn Stream>) -> Prefixed {
        Prefixed { head, at: 0, inner }
    }
}

impl Stream for Prefixed {
    fn kind(&self) -> Kind {
        self.inner.kind().in_order()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities().in_order()
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        if self.at == self.head.len() {
            return self.inner.read(buf);
        }
        let mut n = (self.head.len() - self.at).min(buf.len());
        buf[..n].copy_from_slice(&self.head[self.at..self.at + n]);
        self.at += n;
        // An input that reads whole must still read whole through here.
        if n < buf.len() && self.inner.capabilities().reads_whole {
            while n < buf.len() {
                match self.inner.read(&mut buf[n..]) {
                    Ok(0) => break,
                    Ok(got) => n += got,
                    Err(Errno::INTR) => {}
                    // A short read would be taken for the end of input:
                    // the error wins (the copy fails there anyway).
                    Err(errno) => return Err(errno),
                }
            }
        }
        Ok(n)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        if self.at < self.head.len() {
            return Err(Errno::SPIPE);
        }
        self.inner.seek(to)
    }

    forward_to_inner!(
        size,
        sync,
        pipeline,
        settle,
        take_detail,
        close,
        close_failed,
        abandon
    );
}
