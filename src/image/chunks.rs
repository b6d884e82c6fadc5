//! Ordered hand-over of bytes from worker threads to the one thread that
//! reads them: the plumbing under [`super::Decompressed`].
//!
//! Decoding runs on threads of its own, several for formats made of
//! independent frames, yet the reader must see the bytes in stream order.
//! So the stream is a sequence of *parts*, announced in order on one
//! bounded channel; each part is itself a bounded channel of pieces that
//! one worker fills. The reader drains part after part; workers ahead of
//! it fill their parts until the bounds stop them. Workers take parts in
//! the order they are announced, so the part the reader waits on always
//! has a worker (or is finished): no deadlock, and memory stays bounded by
//! parts in flight times their depth.
//!
//! Ownership: a piece's buffer belongs to the reader once sent; it goes
//! back to the [`BufferPool`] when consumed, so that steady-state
//! decoding allocates (and faults in) nothing. Every part ends with an
//! explicit [`Piece::Done`] and the stream with [`Part::End`]: a channel
//! that closes without them means a thread stopped early, which is an
//! error, never a quiet end of data.

use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use crate::sys::Errno;

/// Why the stream could not go on: the errno `read` returns and the
/// detail `take_detail` gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub errno: Errno,
    pub detail: String,
}

impl Fault {
    pub fn new(errno: Errno, detail: impl Into<String>) -> Fault {
        Fault {
            errno,
            detail: detail.into(),
        }
    }
}

/// What a worker sends for its part.
#[derive(Debug)]
pub enum Piece {
    Data(Vec<u8>),
    Failed(Fault),
    Done,
}

/// What the stream's channel carries, in stream order.
#[derive(Debug)]
pub enum Part {
    Next(Receiver<Piece>),
    Failed(Fault),
    End,
}

/// Buffers handed back by the reader, for the workers to fill again.
#[derive(Debug)]
pub struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
    keep: usize,
}

impl BufferPool {
    pub fn new(keep: usize) -> Arc<BufferPool> {
        Arc::new(BufferPool {
            free: Mutex::new(Vec::new()),
            keep,
        })
    }

    /// A buffer to fill, as it came back (its length and contents are
    /// the last user's: callers clear or resize it as they need, which
    /// saves zeroing memory that is about to be overwritten).
    pub fn take(&self) -> Vec<u8> {
        self.free
            .lock()
            .map(|mut free| free.pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    pub fn give(&self, buf: Vec<u8>) {
        if let Ok(mut free) = self.free.lock() {
            if free.len() < self.keep {
                free.push(buf);
            }
        }
    }
}

/// The reading side: bytes in stream order, in reads that fill the
/// caller's buffer unless the stream ends.
#[derive(Debug)]
pub struct OrderedReader {
    parts: Receiver<Part>,
    current: Option<Receiver<Piece>>,
    chunk: Vec<u8>,
    at: usize,
    pool: Arc<BufferPool>,
    state: State,
    /// Bytes handed out so far: the offset in the decompressed stream.
    pub delivered: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Flowing,
    Ended,
    /// The failure was returned once; the stream reads as ended after it
    /// (a corrupt stream cannot be resumed, and conv=noerror must not loop
    /// on the same error for ever).
    FailedAlready,
}

impl OrderedReader {
    pub fn new(parts: Receiver<Part>, pool: Arc<BufferPool>) -> OrderedReader {
        OrderedReader {
            parts,
            current: None,
            chunk: Vec::new(),
            at: 0,
            pool,
            state: State::Flowing,
            delivered: 0,
        }
    }

    /// Fill `buf` from the stream. Ok(n < buf.len()) only at its end. On a
    /// failure, the bytes already copied into `buf` by this call are given
    /// up: a short read would be taken for the end of the stream and the
    /// failure lost.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize, Fault> {
        let len = buf.len() as u64;
        self.pass(len, Some(buf)).map(|n| n as usize)
    }

    /// Pass over the next `len` bytes of the stream without copying them
    /// (see [`crate::engine::stream::Stream::discard`]); fewer only at its end. The
    /// same failures as [`OrderedReader::read`].
    pub fn discard(&mut self, len: u64) -> Result<u64, Fault> {
        self.pass(len, None)
    }

    /// Move the next `len` bytes of the stream on (fewer only at its end),
    /// copied into `out` when given.
    fn pass(&mut self, len: u64, mut out: Option<&mut [u8]>) -> Result<u64, Fault> {
        let mut passed = 0;
        while passed < len {
            if self.at < self.chunk.len() {
                let n = ((self.chunk.len() - self.at) as u64).min(len - passed) as usize;
                if let Some(out) = out.as_deref_mut() {
                    let to = passed as usize;
                    out[to..to + n].copy_from_slice(&self.chunk[self.at..self.at + n]);
                }
                self.at += n;
                passed += n as u64;
                continue;
            }
            match self.next_chunk() {
                Ok(true) => {}
                Ok(false) => break,
                Err(failure) => {
                    self.state = State::FailedAlready;
                    return Err(failure);
                }
            }
        }
        self.delivered += passed;
        Ok(passed)
    }

    /// Make the next chunk current: Ok(false) at the end of the stream.
    fn next_chunk(&mut self) -> Result<bool, Fault> {
        if self.state != State::Flowing {
            return Ok(false);
        }
        let spent = std::mem::take(&mut self.chunk);
        if spent.capacity() > 0 {
            self.pool.give(spent);
        }
        self.at = 0;
        loop {
            if let Some(part) = &self.current {
                match part.recv() {
                    Ok(Piece::Data(data)) => {
                        self.chunk = data;
                        return Ok(true);
                    }
                    Ok(Piece::Done) => self.current = None,
                    Ok(Piece::Failed(failure)) => return Err(failure),
                    Err(_) => return Err(stopped()),
                }
                continue;
            }
            match self.parts.recv() {
                Ok(Part::Next(part)) => self.current = Some(part),
                Ok(Part::Failed(failure)) => return Err(failure),
                Ok(Part::End) => {
                    self.state = State::Ended;
                    return Ok(false);
                }
                Err(_) => return Err(stopped()),
            }
        }
    }
}

fn stopped() -> Fault {
    Fault::new(
        Errno::IO,
        "the decompression thread stopped before the end of the stream",
    )
}

/// The sending side of one part, as a worker sees it. `Err(Gone)`: the
/// reader has gone away (the copy ended early): the worker stops.
#[derive(Debug)]
pub struct Gone;

pub fn send(to: &SyncSender<Piece>, piece: Piece) -> Result<(), Gone> {
    to.send(piece).map_err(|_| Gone)
}

pub fn announce(to: &SyncSender<Part>, part: Part) -> Result<(), Gone> {
    to.send(part).map_err(|_| Gone)
}

/// Why a decoding thread stopped early.
pub enum Halt {
    /// The reader has gone: nothing more to do.
    Gone,
    Failed(Fault),
}

impl From<Gone> for Halt {
    fn from(_: Gone) -> Halt {
        Halt::Gone
    }
}

/// A worker's next job from the queue it shares with the others (the
/// lock held only while it waits for one); None once the queue is closed,
/// or poisoned by a worker that panicked: either way, the worker ends.
pub fn next_job<J>(jobs: &Mutex<Receiver<J>>) -> Option<J> {
    jobs.lock().ok()?.recv().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    fn part(pieces: Vec<Piece>) -> Part {
        let (tx, rx) = sync_channel(pieces.len());
        for p in pieces {
            tx.send(p).unwrap();
        }
        Part::Next(rx)
    }

    #[test]
    fn parts_come_out_in_order_and_reads_fill_the_buffer() {
        let (tx, rx) = sync_channel(4);
        tx.send(part(vec![Piece::Data(b"abc".to_vec()), Piece::Done]))
            .unwrap();
        tx.send(part(vec![
            Piece::Data(b"de".to_vec()),
            Piece::Data(b"fgh".to_vec()),
            Piece::Done,
        ]))
        .unwrap();
        tx.send(Part::End).unwrap();
        let mut reader = OrderedReader::new(rx, BufferPool::new(4));
        let mut buf = [0u8; 5];
        assert_eq!(reader.read(&mut buf), Ok(5));
        assert_eq!(&buf, b"abcde");
        assert_eq!(reader.read(&mut buf), Ok(3));
        assert_eq!(&buf[..3], b"fgh");
        assert_eq!(reader.read(&mut buf), Ok(0));
        assert_eq!(reader.delivered, 8);
    }

    #[test]
    fn a_failure_is_returned_once_then_the_stream_reads_as_ended() {
        let (tx, rx) = sync_channel(4);
        tx.send(part(vec![
            Piece::Data(b"abc".to_vec()),
            Piece::Failed(Fault::new(Errno::BADMSG, "bad")),
        ]))
        .unwrap();
        let mut reader = OrderedReader::new(rx, BufferPool::new(4));
        let mut buf = [0u8; 2];
        assert_eq!(reader.read(&mut buf), Ok(2));
        let err = reader.read(&mut buf).unwrap_err();
        assert_eq!(err.errno, Errno::BADMSG);
        assert_eq!(reader.read(&mut buf), Ok(0));
    }

    #[test]
    fn discarded_bytes_are_passed_over_in_order_and_counted() {
        let (tx, rx) = sync_channel(4);
        tx.send(part(vec![
            Piece::Data(b"abc".to_vec()),
            Piece::Data(b"def".to_vec()),
            Piece::Done,
        ]))
        .unwrap();
        tx.send(part(vec![Piece::Data(b"ghi".to_vec()), Piece::Done]))
            .unwrap();
        tx.send(Part::End).unwrap();
        let mut reader = OrderedReader::new(rx, BufferPool::new(4));
        let mut buf = [0u8; 2];
        assert_eq!(reader.read(&mut buf), Ok(2));
        assert_eq!(reader.discard(5), Ok(5));
        assert_eq!(reader.read(&mut buf), Ok(2));
        assert_eq!(&buf, b"hi");
        assert_eq!(reader.discard(4), Ok(0));
        assert_eq!(reader.delivered, 9);
    }

    #[test]
    fn a_thread_that_vanishes_is_an_error_not_an_end() {
        let (tx, rx) = sync_channel(4);
        tx.send(part(vec![Piece::Data(b"abc".to_vec())])).unwrap();
        drop(tx);
        let mut reader = OrderedReader::new(rx, BufferPool::new(4));
        let mut buf = [0u8; 8];
        assert_eq!(reader.read(&mut buf).unwrap_err().errno, Errno::IO);
    }
}
