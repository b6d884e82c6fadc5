//! Reads ahead for a local input opened with O_DIRECT (`iflag=direct` on
//! a block device or a file): several reads in flight through io_uring,
//! where each direct read would otherwise wait for the device before the
//! next could start (the kernel reads nothing ahead for O_DIRECT). It
//! wraps the descriptor end and is used only where the planner says it
//! pays (`planner::read_ahead`); it is the mirror of `engine::write_behind`.
//!
//! GNU's records stay GNU's: every read asks for exactly what the reader
//! asks for (ibs), at the offsets GNU's reads would reach one after the
//! other, and hands out what the kernel returned for that request: the
//! same bytes, the same short read at the end, the same error. What was
//! read past a short read or an error is given up, and the wrapped end's
//! position is brought to where GNU's would stand before anything but a
//! read of the next record uses it. A read of any other size, or at an
//! offset that is not a whole number of 512-byte units, goes to the
//! wrapped end as without this wrapper.
//!
//! The slots belong to the ring (see `sys::ring` for the ownership rule);
//! the ring's Drop waits for the kernel before freeing them.

use std::collections::VecDeque;
use std::os::fd::BorrowedFd;

use crate::engine::stream::{forward_to_inner, Stream};
use crate::ends::Whence;
use crate::sys::ring::Ring;
use crate::sys::Errno;

/// The unit below which a direct read cannot be aligned on any device.
const SECTOR: u64 = 512;

#[derive(Debug)]
struct Op {
    slot: usize,
    offset: u64,
    /// What the kernel returned; None while in flight.
    result: Option<Result<usize, Errno>>,
}

#[derive(Debug)]
pub struct ReadAhead {
    inner: Box<dyn Stream>,
    ring: Ring,
    /// Bytes per read: the records' size.
    request: usize,
    /// Reads in offset order, one request apart, from the position on.
    window: VecDeque<Op>,
    /// The position (the next byte handed out), which the wrapped end's
    /// lags behind while reads run ahead (`lagging`); None: ask it.
    pos: Option<u64>,
    lagging: bool,
    /// Where reading ahead stops: the input's size when it was opened
    /// (reads past it would only return 0).
    limit: Option<u64>,
}

impl ReadAhead {
    /// Wrap `inner` (a descriptor end opened O_DIRECT) with `depth` slots
    /// of `request` bytes; gives `inner` back where io_uring cannot serve
    /// (missing, disabled), so the copy goes on as without it.
    pub fn new(
        inner: Box<dyn Stream>,
        depth: usize,
        request: usize,
    ) -> Result<ReadAhead, Box<dyn Stream>> {
        if inner.fd().is_none() || request == 0 {
            return Err(inner);
        }
        let limit = inner.size().ok().flatten();
        match Ring::new(depth.max(1), request) {
            Ok(ring) => Ok(ReadAhead {
                inner,
                ring,
                request,
                window: VecDeque::new(),
                pos: None,
                lagging: false,
                limit,
            }),
            Err(_) => Err(inner),
        }
    }

    fn position(&mut self) -> Result<u64, Errno> {
        match self.pos {
            Some(pos) => Ok(pos),
            None => {
                let pos = self.inner.seek(Whence::Current(0))?;
                self.pos = Some(pos);
                Ok(pos)
            }
        }
    }

    /// Wait for one completion and note it at its read.
    fn reap_one(&mut self) -> Result<(), Errno> {
        let completion = match self.ring.wait() {
            None => return Ok(()),
            Some(Err(errno)) => return Err(errno),
            Some(Ok(completion)) => completion,
        };
        let op = self
            .window
            .iter_mut()
            .find(|op| op.slot == completion.slot && op.result.is_none())
            .expect("a completion belongs to a read in flight");
        op.result = Some(completion.result);
        Ok(())
    }

    /// Give up every read ahead (waiting for those in flight: their slots
    /// are the kernel's until then) and bring the wrapped end's position
    /// to the position.
    fn give_up(&mut self) -> Result<(), Errno> {
        while self.ring.in_flight() > 0 {
            self.reap_one()?;
        }
        self.window.clear();
        if self.lagging {
            if let Some(pos) = self.pos {
                self.inner.seek(Whence::Start(pos))?;
            }
            self.lagging = false;
        }
        Ok(())
    }

    /// Queue reads from the end of the window on, while slots are idle
    /// and the input has bytes there.
    fn fill(&mut self, from: u64) -> Result<(), Errno> {
        // The descriptor outlives the requests: `inner` is closed only
        // after give_up() has reaped them.
        let fd = self.inner.fd().expect("checked in new");
        let mut next = self
            .window
            .back()
            .map_or(from, |op| op.offset + self.request as u64);
        while self.window.len() < self.ring.slots() && self.limit.is_none_or(|end| next < end) {
            let slot = (0..self.ring.slots())
                .find(|&slot| self.ring.buffer(slot).is_some() && !self.holds(slot))
                .expect("a slot is idle");
            self.ring.read(fd, slot, next, 0..self.request)?;
            self.window.push_back(Op {
                slot,
                offset: next,
                result: None,
            });
            next += self.request as u64;
        }
        Ok(())
    }

    /// Whether a read in the window (done, not handed out yet) keeps
    /// `slot`'s bytes.
    fn holds(&self, slot: usize) -> bool {
        self.window.iter().any(|op| op.slot == slot)
    }

    /// The next record, from the window; None where this read is not for
    /// the window (its size or offset).
    fn take(&mut self, buf: &mut [u8]) -> Result<Option<usize>, Errno> {
        let pos = self.position()?;
        if buf.len() != self.request || pos % SECTOR != 0 {
            return Ok(None);
        }
        if self.window.front().is_some_and(|op| op.offset != pos) {
            self.give_up()?;
        }
        if self.limit.is_some_and(|end| pos >= end) && self.window.is_empty() {
            // Past the size it had: as the wrapped end reads it now.
            return Ok(None);
        }
        self.fill(pos)?;
        while self.window.front().is_some_and(|op| op.result.is_none()) {
            self.reap_one()?;
        }
        let Some(op) = self.window.pop_front() else {
            return Ok(None);
        };
        let result = op.result.expect("reaped");
        match result {
            Ok(n) => {
                let bytes = self.ring.buffer(op.slot).expect("reaped");
                buf[..n].copy_from_slice(&bytes[..n]);
                self.pos = Some(pos + n as u64);
                self.lagging = true;
                if n < self.request {
                    // A short read (the end): what was read past it is
                    // not where the next read starts.
                    self.give_up()?;
                } else {
                    self.fill(pos + n as u64)?;
                }
                Ok(Some(n))
            }
            Err(errno) => {
                // The position stays before the record, as read(2)'s.
                self.give_up()?;
                Err(errno)
            }
        }
    }
}

impl Stream for ReadAhead {
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.fd()
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        if let Some(n) = self.take(buf)? {
            return Ok(n);
        }
        self.give_up()?;
        let n = self.inner.read(buf)?;
        self.pos = self.pos.map(|pos| pos + n as u64);
        Ok(n)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let to = match (to, self.pos) {
            (Whence::Current(delta), Some(pos)) => {
                Whence::Start(pos.checked_add_signed(delta).ok_or(Errno::INVAL)?)
            }
            (to, _) => to,
        };
        self.give_up()?;
        let pos = self.inner.seek(to)?;
        self.pos = Some(pos);
        Ok(pos)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        self.give_up()?;
        self.inner.read_at(buf, offset)
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        self.give_up()?;
        self.pos = None;
        self.inner.write(buf)
    }

    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        self.give_up()?;
        self.inner.truncate(len)
    }

    fn sync(&mut self, data_only: bool) -> Result<(), Errno> {
        self.give_up()?;
        self.inner.sync(data_only)
    }

    fn settle(&mut self) -> Result<(), Errno> {
        self.give_up()?;
        self.inner.settle()
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        let settled = self.give_up();
        let closed = self.inner.close();
        settled.and(closed)
    }

    fn close_failed(mut self: Box<Self>) -> Result<(), Errno> {
        let _ = self.give_up();
        self.inner.close_failed()
    }

    forward_to_inner!(
        kind,
        capabilities,
        size,
        next_data,
        next_hole,
        take_detail,
        abandon
    );
}

/// Wrap `input`'s end in [`ReadAhead`]; false (the end unchanged) where
/// it cannot be.
pub fn wrap(input: &mut crate::engine::stream::Input, depth: usize, request: usize) -> bool {
    let end = std::mem::replace(&mut input.stream, Box::new(super::write_behind::Vacant));
    match ReadAhead::new(end, depth, request) {
        Ok(ahead) => {
            input.stream = Box::new(ahead);
            true
        }
        Err(end) => {
            input.stream = end;
            false
        }
    }
}
