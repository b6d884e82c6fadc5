//! The compressed input as the decoders see it: an [`End`] read as
//! `std::io::Read`, counting what it gives for the progress line, and
//! keeping the input's own error apart from the decoder's.
//!
//! The decoders' crates speak `io::Read`; an error they return may be the
//! input's (EIO from the disk, a server's message) or their own verdict
//! on the data. The input's is kept here, errno and detail, so that the
//! reader reports it as the input's error and not as corrupt data.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::engine::stream::Stream;
use crate::sys::Errno;

/// How far decompression has got through the compressed input: what the
/// live progress line shows beside the bytes written, and what the ETA is
/// computed from. Shared with the progress reporter; updated by the
/// decoding thread.
#[derive(Debug)]
pub struct InputProgress {
    consumed: AtomicU64,
    /// The compressed input's size, where the input has one.
    pub total: Option<u64>,
}

impl InputProgress {
    pub fn new(total: Option<u64>) -> Arc<InputProgress> {
        Arc::new(InputProgress {
            consumed: AtomicU64::new(0),
            total,
        })
    }

    /// Compressed bytes read so far.
    pub fn consumed(&self) -> u64 {
        self.consumed.load(Ordering::Relaxed)
    }

    fn add(&self, n: u64) {
        self.consumed.fetch_add(n, Ordering::Relaxed);
    }
}

/// The input's own failure, kept when it happened.
#[derive(Debug, Clone)]
pub struct InputFailure {
    pub errno: Errno,
    pub detail: Option<String>,
    /// Offset in the compressed input of the read that failed.
    pub offset: u64,
}

#[derive(Debug)]
pub struct Source {
    end: Box<dyn Stream>,
    progress: Arc<InputProgress>,
    /// Bytes replayed before the end's own (the head read to recognise
    /// the format).
    head: Vec<u8>,
    head_at: usize,
    offset: u64,
    pub eof: bool,
    pub failure: Option<InputFailure>,
}

impl Source {
    pub fn new(end: Box<dyn Stream>, head: Vec<u8>, progress: Arc<InputProgress>) -> Source {
        Source {
            end,
            progress,
            head,
            head_at: 0,
            offset: 0,
            eof: false,
            failure: None,
        }
    }

    /// Compressed bytes given to the decoder so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn into_end(self) -> Box<dyn Stream> {
        self.end
    }

    /// As `io::Read::read`, in the input's own terms.
    pub fn read_errno(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.head_at < self.head.len() {
            let n = (self.head.len() - self.head_at).min(buf.len());
            buf[..n].copy_from_slice(&self.head[self.head_at..self.head_at + n]);
            self.head_at += n;
            if self.head_at == self.head.len() {
                self.head = Vec::new();
                self.head_at = 0;
            }
            self.count(n);
            return Ok(n);
        }
        loop {
            match self.end.read(buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => {
                    self.count(n);
                    return Ok(n);
                }
                Err(Errno::INTR) => {}
                Err(errno) => {
                    self.failure = Some(InputFailure {
                        errno,
                        detail: self.end.take_detail(),
                        offset: self.offset,
                    });
                    return Err(errno);
                }
            }
        }
    }

    /// Read until `buf` is full or the input ends.
    pub fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.read_errno(&mut buf[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        Ok(filled)
    }

    fn count(&mut self, n: usize) {
        self.offset += n as u64;
        self.progress.add(n as u64);
    }
}

impl io::Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_errno(buf)
            .map_err(|e| io::Error::from_raw_os_error(e.raw_os_error()))
    }
}
