//! Writes behind for a local output opened with O_DIRECT (`oflag=direct`
//! on a block device or a file): several writes in flight through
//! io_uring, where each direct write would otherwise wait for the device
//! before the next could start. It wraps the descriptor end and is used
//! only where the planner says it pays (`planner::write_behind`).
//!
//! Each aligned write is copied into one of `depth` page-aligned slots of
//! a [`Ring`] and queued at its offset; the call returns at once, and
//! with every slot busy it waits for a completion first. Completions come
//! in any order: the window keeps the requests in submission order and
//! retires them from its front only, so [`Stream::written_until`] is exactly
//! "everything before this offset is written", and a failure stays at the
//! front for good. The first failure is returned by the next write, sync,
//! settle or close. A short write is queued again for its rest.
//!
//! What is not a whole number of 512-byte units at a 512-byte offset (the
//! final partial block, for which GNU turns O_DIRECT off) and everything
//! else that is not a plain write settles first and goes to the wrapped
//! end synchronously, as without this wrapper. The slots belong to the
//! ring (see `sys::ring` for the ownership rule); nothing is finalised in
//! Drop, and the ring's Drop waits for the kernel before freeing them.

use std::collections::VecDeque;
use std::os::fd::BorrowedFd;

use crate::engine::stream::{forward_to_inner, Stream};
use crate::ends::{Kind, Whence};
use crate::sys::ring::Ring;
use crate::sys::Errno;

/// The unit below which a direct write cannot be aligned on any device:
/// anything else is left to the wrapped end, whose kernel answer (EINVAL
/// or a write through the cache) is GNU's.
const SECTOR: u64 = 512;

#[derive(Debug)]
struct Op {
    slot: usize,
    offset: u64,
    /// Bytes of the slot the request covers, and how many are written.
    len: usize,
    done: usize,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight,
    Done,
    Failed(Errno),
}

#[derive(Debug)]
pub struct WriteBehind {
    inner: Box<dyn Stream>,
    ring: Ring,
    /// Bytes per slot: the largest write the ring takes.
    request: usize,
    window: VecDeque<Op>,
    /// The position, which the wrapped end's lags behind while writes are
    /// queued (`lagging`).
    pos: Option<u64>,
    lagging: bool,
    /// The end of the last request retired from the front.
    written: Option<u64>,
    /// A failure already returned: every later write says so again.
    reported: Option<Errno>,
}

impl WriteBehind {
    /// Wrap `inner` (a descriptor end opened O_DIRECT) with `depth` slots
    /// of `request` bytes; gives `inner` back where io_uring cannot serve
    /// (missing, disabled), so the copy goes on as without it.
    pub fn new(
        inner: Box<dyn Stream>,
        depth: usize,
        request: usize,
    ) -> Result<WriteBehind, Box<dyn Stream>> {
        if inner.fd().is_none() {
            return Err(inner);
        }
        match Ring::new(depth.max(1), request) {
            Ok(ring) => Ok(WriteBehind {
                inner,
                ring,
                request,
                window: VecDeque::new(),
                pos: None,
                lagging: false,
                written: None,
                reported: None,
            }),
            Err(_) => Err(inner),
        }
    }

    /// Wait for one completion and account for it.
    fn reap_one(&mut self) -> Result<(), Errno> {
        let completion = match self.ring.wait() {
            None => return Ok(()),
            Some(Err(errno)) => return Err(errno),
            Some(Ok(completion)) => completion,
        };
        let at = self
            .window
            .iter()
            .position(|op| op.slot == completion.slot && op.state == State::InFlight)
            .expect("a completion belongs to a request in flight");
        let op = &mut self.window[at];
        match completion.result {
            Ok(0) => op.state = State::Failed(Errno::NOSPC),
            Ok(n) => {
                op.done += n;
                if op.done < op.len {
                    // A short write: the rest, at its own offset.
                    let (slot, offset, range) =
                        (op.slot, op.offset + op.done as u64, op.done..op.len);
                    let fd = self.inner.fd().expect("checked in new");
                    if let Err(errno) = self.ring.write(fd, slot, offset, range) {
                        self.window[at].state = State::Failed(errno);
                    }
                } else {
                    op.state = State::Done;
                }
            }
            Err(errno) => op.state = State::Failed(errno),
        }
        while self
            .window
            .front()
            .is_some_and(|op| op.state == State::Done)
        {
            let op = self.window.pop_front().expect("front");
            self.written = Some(op.offset + op.len as u64);
        }
        Ok(())
    }

    /// The first failure in submission order; once reported, again to
    /// every write (the end has failed) but not to a sync or close, which
    /// GNU, having written nothing since, sees succeed.
    fn failure(&mut self, again: bool) -> Result<(), Errno> {
        if let Some(errno) = self.reported {
            return if again { Err(errno) } else { Ok(()) };
        }
        let failed = self.window.iter().find_map(|op| match op.state {
            State::Failed(errno) => Some(errno),
            _ => None,
        });
        match failed {
            Some(errno) => {
                self.reported = Some(errno);
                Err(errno)
            }
            None => Ok(()),
        }
    }

    /// Wait for everything in flight, then report the first failure
    /// (`again`: also one reported before), and bring the wrapped end's
    /// position up to date.
    fn drain(&mut self, again: bool) -> Result<(), Errno> {
        while self.ring.in_flight() > 0 {
            self.reap_one()?;
        }
        if self.lagging {
            // After a failure, where GNU would stand: at the start of the
            // write that failed (which may be past the end of a device).
            let failed_at = self.window.front().map(|op| op.offset + op.done as u64);
            if let Some(pos) = failed_at.or(self.pos) {
                self.inner.seek(Whence::Start(pos))?;
                self.pos = Some(pos);
            }
            self.lagging = false;
        }
        self.failure(again)
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

    /// Queue `buf` at `offset`; false when it is not for the ring.
    fn queue(&mut self, buf: &[u8], offset: u64) -> Result<bool, Errno> {
        let len = buf.len();
        if len == 0 || len as u64 % SECTOR != 0 || offset % SECTOR != 0 || len > self.request {
            return Ok(false);
        }
        self.failure(true)?;
        while self.ring.in_flight() >= self.ring.slots() {
            self.reap_one()?;
            self.failure(true)?;
        }
        let slot = (0..self.ring.slots())
            .find(|&slot| self.ring.buffer(slot).is_some())
            .expect("a slot is idle");
        self.ring.buffer_mut(slot).expect("idle")[..len].copy_from_slice(buf);
        let fd = self.inner.fd().expect("checked in new");
        self.ring.write(fd, slot, offset, 0..len)?;
        self.window.push_back(Op {
            slot,
            offset,
            len,
            done: 0,
            state: State::InFlight,
        });
        Ok(true)
    }
}

impl Stream for WriteBehind {
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.fd()
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        self.drain(true)?;
        let n = self.inner.read(buf)?;
        self.pos = None;
        Ok(n)
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        let offset = self.position()?;
        if self.queue(buf, offset)? {
            self.pos = Some(offset + buf.len() as u64);
            self.lagging = true;
            return Ok(buf.len());
        }
        self.drain(true)?;
        let result = self.inner.write(buf);
        self.pos = None;
        result
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let to = match (to, self.pos) {
            (Whence::Current(delta), Some(pos)) => {
                Whence::Start(pos.checked_add_signed(delta).ok_or(Errno::INVAL)?)
            }
            (to, _) => {
                self.drain(true)?;
                to
            }
        };
        let pos = self.inner.seek(to)?;
        self.pos = Some(pos);
        self.lagging = false;
        Ok(pos)
    }

    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        self.drain(false)?;
        self.inner.truncate(len)
    }

    fn sync(&mut self, data_only: bool) -> Result<(), Errno> {
        self.drain(false)?;
        self.inner.sync(data_only)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        if self.queue(buf, offset)? {
            return Ok(buf.len());
        }
        self.drain(true)?;
        self.inner.write_at(buf, offset)
    }

    fn written_until(&self) -> Option<u64> {
        // A short write's first part is written too (GNU counts it).
        self.window
            .front()
            .map(|op| op.offset + op.done as u64)
            .or(self.written)
    }

    fn settle(&mut self) -> Result<(), Errno> {
        self.drain(false)
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        let settled = self.drain(false);
        let closed = self.inner.close();
        settled.and(closed)
    }

    fn close_failed(mut self: Box<Self>) -> Result<(), Errno> {
        let _ = self.drain(false);
        self.inner.close_failed()
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        self.drain(true)?;
        self.inner.read_at(buf, offset)
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

/// Wrap `output`'s end in [`WriteBehind`]; false (the end unchanged)
/// where it cannot be.
pub fn wrap(output: &mut crate::engine::stream::Output, depth: usize, request: usize) -> bool {
    let end = std::mem::replace(&mut output.stream, Box::new(Vacant));
    match WriteBehind::new(end, depth, request) {
        Ok(behind) => {
            output.stream = Box::new(behind);
            true
        }
        Err(end) => {
            output.stream = end;
            false
        }
    }
}

/// What stands in an [`super::Output`] (or an input, `engine::read_ahead`) for
/// the moment its end is being wrapped: never called.
#[derive(Debug)]
pub(super) struct Vacant;

impl Stream for Vacant {
    fn kind(&self) -> Kind {
        Kind::Other
    }
    fn seek(&mut self, _: Whence) -> Result<u64, Errno> {
        Err(Errno::BADF)
    }
    fn size(&self) -> Result<Option<u64>, Errno> {
        Err(Errno::BADF)
    }
    fn sync(&mut self, _: bool) -> Result<(), Errno> {
        Err(Errno::BADF)
    }
    fn close(self: Box<Self>) -> Result<(), Errno> {
        Ok(())
    }
}
