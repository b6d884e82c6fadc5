//! io_uring with buffers the ring owns: positional reads and writes from
//! numbered slots, several in flight at once. The one io_uring layer of
//! ddx: the overlapped copy (`engine::uring`) and the benchmark's queue
//! depth sweep both go through it, and neither holds an `unsafe` block.
//!
//! Ownership rule: each slot's buffer belongs to the kernel from the
//! moment a read or write of it is queued ([`Ring::read`],
//! [`Ring::write`]) until its completion comes back from [`Ring::wait`].
//! The ring refuses a request on a busy slot and hands out a slot's
//! buffer only while it is idle, and its Drop waits for every request
//! still in flight before the buffers are unmapped; where the kernel can
//! no longer be waited on, the buffers are leaked rather than freed, so
//! no completion can ever land in freed memory.

use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Instant;

use io_uring::{opcode, squeue, types, IoUring};
use rustix::io::Errno;

use super::buffer::AlignedBuf;

/// One finished request: which slot, when it was queued, and what the
/// kernel returned (bytes moved, or the error).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub slot: usize,
    pub submitted: Instant,
    pub result: Result<usize, Errno>,
}

pub struct Ring {
    ring: IoUring,
    buffers: Vec<AlignedBuf>,
    /// When each slot's request in flight was queued; None when idle.
    busy: Vec<Option<Instant>>,
    in_flight: usize,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Ring({} slots, {} in flight)",
            self.busy.len(),
            self.in_flight
        )
    }
}

impl Ring {
    /// A ring with `slots` buffers of `buffer_len` bytes (page-aligned, so
    /// fit for O_DIRECT). Fails with the kernel's errno where io_uring is
    /// missing or disabled (ENOSYS, EPERM under io_uring_disabled, a
    /// seccomp filter), or EOPNOTSUPP where it cannot read and write.
    pub fn new(slots: usize, buffer_len: usize) -> Result<Ring, Errno> {
        let entries = slots.next_power_of_two().max(1) as u32;
        let ring = IoUring::new(entries).map_err(|e| errno_of(&e))?;
        let mut probe = io_uring::Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| errno_of(&e))?;
        if !(probe.is_supported(opcode::Read::CODE) && probe.is_supported(opcode::Write::CODE)) {
            return Err(Errno::OPNOTSUPP);
        }
        let buffers = (0..slots)
            .map(|_| AlignedBuf::new(buffer_len))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Ring {
            ring,
            buffers,
            busy: vec![None; slots],
            in_flight: 0,
        })
    }

    pub fn slots(&self) -> usize {
        self.busy.len()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queue a read into `range` of slot `slot`'s buffer from `offset` of
    /// `fd`. `fd` must stay open until the completion is reaped (the
    /// kernel holds its own reference to the file, so this is about
    /// meaning, not memory).
    pub fn read(
        &mut self,
        fd: BorrowedFd<'_>,
        slot: usize,
        offset: u64,
        range: Range<usize>,
    ) -> Result<(), Errno> {
        let buffer = self.idle(slot, &range)?;
        let target = &mut buffer.as_mut_slice()[range];
        let entry = opcode::Read::new(
            types::Fd(fd.as_raw_fd()),
            target.as_mut_ptr(),
            target.len() as u32,
        )
        .offset(offset)
        .build()
        .user_data(slot as u64);
        self.queue(slot, &entry)
    }

    /// Queue a write of `range` of slot `slot`'s buffer at `offset` of
    /// `fd`.
    pub fn write(
        &mut self,
        fd: BorrowedFd<'_>,
        slot: usize,
        offset: u64,
        range: Range<usize>,
    ) -> Result<(), Errno> {
        let buffer = self.idle(slot, &range)?;
        let source = &buffer.as_slice()[range];
        let entry = opcode::Write::new(
            types::Fd(fd.as_raw_fd()),
            source.as_ptr(),
            source.len() as u32,
        )
        .offset(offset)
        .build()
        .user_data(slot as u64);
        self.queue(slot, &entry)
    }

    /// Submit what is queued and wait for the next completion; None when
    /// nothing is in flight.
    pub fn wait(&mut self) -> Option<Result<Completion, Errno>> {
        if self.in_flight == 0 {
            return None;
        }
        loop {
            if let Some(cqe) = self.ring.completion().next() {
                let slot = cqe.user_data() as usize;
                let submitted = self.busy[slot].take().unwrap_or_else(Instant::now);
                self.in_flight -= 1;
                let result = if cqe.result() < 0 {
                    Err(Errno::from_raw_os_error(-cqe.result()))
                } else {
                    Ok(cqe.result() as usize)
                };
                return Some(Ok(Completion {
                    slot,
                    submitted,
                    result,
                }));
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if matches!(errno_of(&e), Errno::INTR | Errno::AGAIN | Errno::BUSY) => {}
                Err(e) => return Some(Err(errno_of(&e))),
            }
        }
    }

    /// An idle slot's buffer.
    pub fn buffer(&self, slot: usize) -> Option<&[u8]> {
        match self.busy.get(slot) {
            Some(None) => Some(self.buffers[slot].as_slice()),
            _ => None,
        }
    }

    /// An idle slot's buffer, to fill before a write of it.
    pub fn buffer_mut(&mut self, slot: usize) -> Option<&mut [u8]> {
        match self.busy.get(slot) {
            Some(None) => Some(self.buffers[slot].as_mut_slice()),
            _ => None,
        }
    }

    /// The buffer of `slot` for a request over `range`, if the slot is
    /// idle and the range fits.
    fn idle(&mut self, slot: usize, range: &Range<usize>) -> Result<&mut AlignedBuf, Errno> {
        match self.busy.get(slot) {
            Some(None) => {}
            Some(Some(_)) => return Err(Errno::BUSY),
            None => return Err(Errno::INVAL),
        }
        let buffer = &mut self.buffers[slot];
        if range.start > range.end || range.end > buffer.len() {
            return Err(Errno::INVAL);
        }
        Ok(buffer)
    }

    fn queue(&mut self, slot: usize, entry: &squeue::Entry) -> Result<(), Errno> {
        loop {
            // SAFETY: the entry points into slot `slot`'s buffer, which was
            // idle (checked by `idle`) and is marked busy below; a busy
            // slot's buffer is neither handed out nor freed until its
            // completion is reaped in wait() or drained in Drop.
            let pushed = unsafe { self.ring.submission().push(entry) };
            if pushed.is_ok() {
                break;
            }
            // The submission queue is full: hand it to the kernel first.
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if matches!(errno_of(&e), Errno::INTR | Errno::AGAIN | Errno::BUSY) => {}
                Err(e) => return Err(errno_of(&e)),
            }
        }
        self.busy[slot] = Some(Instant::now());
        self.in_flight += 1;
        Ok(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // Buffers may be unmapped only once the kernel is done with them.
        while self.in_flight > 0 {
            match self.wait() {
                Some(Ok(_)) => {}
                // The ring cannot be waited on: leak the buffers rather
                // than let a late completion write into freed memory.
                Some(Err(_)) | None => {
                    std::mem::forget(std::mem::take(&mut self.buffers));
                    return;
                }
            }
        }
    }
}

/// io_uring for requests that bring their own buffers: a buffer moves
/// into the queue with its request and comes back with its completion
/// (the ownership rule above, with the buffer's owner changing hands
/// rather than a slot's state). What an end keeps in flight on a
/// descriptor goes through it; the requests carry the caller's tag.
pub struct Queue {
    ring: IoUring,
    /// The request in flight in each slot: its tag and its buffer, which
    /// the kernel may be reading or writing until the completion.
    slots: Vec<Option<(u64, AlignedBuf)>>,
    free: Vec<usize>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Queue({} slots, {} in flight)",
            self.slots.len(),
            self.in_flight()
        )
    }
}

/// A request the queue finished: its tag, what the kernel returned, and
/// its buffer back.
#[derive(Debug)]
pub struct Finished {
    pub tag: u64,
    pub result: Result<usize, Errno>,
    pub buf: AlignedBuf,
}

impl Queue {
    /// A queue of `slots` requests in flight at most. Fails as
    /// [`Ring::new`] does where io_uring cannot read and write.
    pub fn new(slots: usize) -> Result<Queue, Errno> {
        let slots = slots.max(1);
        let entries = slots.next_power_of_two() as u32;
        let ring = IoUring::new(entries).map_err(|e| errno_of(&e))?;
        let mut probe = io_uring::Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| errno_of(&e))?;
        if !(probe.is_supported(opcode::Read::CODE) && probe.is_supported(opcode::Write::CODE)) {
            return Err(Errno::OPNOTSUPP);
        }
        Ok(Queue {
            ring,
            slots: (0..slots).map(|_| None).collect(),
            free: (0..slots).rev().collect(),
        })
    }

    pub fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Queue a read of `buf`'s length from `offset` of `fd` into `buf`.
    /// Err gives the buffer back: EBUSY when every slot is in flight.
    pub fn read(
        &mut self,
        fd: BorrowedFd<'_>,
        tag: u64,
        mut buf: AlignedBuf,
        offset: u64,
    ) -> Result<(), (Errno, AlignedBuf)> {
        let target = buf.as_mut_slice();
        let entry = opcode::Read::new(
            types::Fd(fd.as_raw_fd()),
            target.as_mut_ptr(),
            target.len() as u32,
        )
        .offset(offset);
        self.queue(entry.build(), tag, buf)
    }

    /// Queue a write of `buf` at `offset` of `fd`. Err gives the buffer
    /// back: EBUSY when every slot is in flight.
    pub fn write(
        &mut self,
        fd: BorrowedFd<'_>,
        tag: u64,
        buf: AlignedBuf,
        offset: u64,
    ) -> Result<(), (Errno, AlignedBuf)> {
        let source = buf.as_slice();
        let entry = opcode::Write::new(
            types::Fd(fd.as_raw_fd()),
            source.as_ptr(),
            source.len() as u32,
        )
        .offset(offset);
        self.queue(entry.build(), tag, buf)
    }

    fn queue(
        &mut self,
        entry: squeue::Entry,
        tag: u64,
        buf: AlignedBuf,
    ) -> Result<(), (Errno, AlignedBuf)> {
        let Some(slot) = self.free.pop() else {
            return Err((Errno::BUSY, buf));
        };
        let entry = entry.user_data(slot as u64);
        loop {
            // SAFETY: the entry points into `buf`'s mapping, which moves
            // into slot `slot` below and stays there (neither handed out
            // nor freed) until the completion of user_data `slot` is
            // reaped in wait() or drained in Drop; moving the AlignedBuf
            // value does not move its mapping.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                break;
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if matches!(errno_of(&e), Errno::INTR | Errno::AGAIN | Errno::BUSY) => {}
                Err(e) => {
                    self.free.push(slot);
                    return Err((errno_of(&e), buf));
                }
            }
        }
        self.slots[slot] = Some((tag, buf));
        Ok(())
    }

    /// Submit what is queued and take the next completion: waiting for
    /// one when `wait`, else only one that is there. None when nothing is
    /// in flight (or, without `wait`, nothing has finished); Err when the
    /// ring cannot be waited on.
    pub fn finished(&mut self, wait: bool) -> Option<Result<Finished, Errno>> {
        if self.in_flight() == 0 {
            return None;
        }
        loop {
            if let Some(cqe) = self.ring.completion().next() {
                let slot = cqe.user_data() as usize;
                let Some((tag, buf)) = self.slots.get_mut(slot).and_then(Option::take) else {
                    continue;
                };
                self.free.push(slot);
                let result = if cqe.result() < 0 {
                    Err(Errno::from_raw_os_error(-cqe.result()))
                } else {
                    Ok(cqe.result() as usize)
                };
                return Some(Ok(Finished { tag, result, buf }));
            }
            let waited = if wait {
                self.ring.submit_and_wait(1)
            } else {
                self.ring.submit()
            };
            match waited {
                Ok(_) if !wait && self.ring.completion().is_empty() => return None,
                Ok(_) => {}
                Err(e) if matches!(errno_of(&e), Errno::INTR | Errno::AGAIN | Errno::BUSY) => {}
                Err(e) => return Some(Err(errno_of(&e))),
            }
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Buffers may be unmapped only once the kernel is done with them.
        while self.in_flight() > 0 {
            match self.finished(true) {
                Some(Ok(_)) => {}
                // The ring cannot be waited on: leak the buffers rather
                // than let a late completion write into freed memory.
                Some(Err(_)) | None => {
                    std::mem::forget(std::mem::take(&mut self.slots));
                    return;
                }
            }
        }
    }
}

fn errno_of(error: &std::io::Error) -> Errno {
    error
        .raw_os_error()
        .map_or(Errno::IO, Errno::from_raw_os_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    fn ring(slots: usize, len: usize) -> Option<Ring> {
        Ring::new(slots, len)
            .map_err(|e| crate::sys::skips::skip(&format!("io_uring unavailable here ({e})")))
            .ok()
    }

    #[test]
    fn reads_land_in_their_slots() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("data");
        let mut f = std::fs::File::create(&path).unwrap();
        let data: Vec<u8> = (0..16384u32).map(|i| (i / 4096) as u8 + 1).collect();
        f.write_all(&data).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let Some(mut ring) = ring(4, 4096) else {
            return;
        };
        for slot in 0..4 {
            ring.read(f.as_fd(), slot, (3 - slot as u64) * 4096, 0..4096)
                .unwrap();
        }
        assert_eq!(ring.read(f.as_fd(), 0, 0, 0..4096), Err(Errno::BUSY));
        assert!(
            ring.buffer(0).is_none(),
            "a busy slot's buffer is the kernel's"
        );
        let mut seen = 0;
        while let Some(done) = ring.wait() {
            let done = done.unwrap();
            assert_eq!(done.result, Ok(4096));
            assert!(ring.buffer(done.slot).unwrap()[..4096]
                .iter()
                .all(|&b| b == 4 - done.slot as u8));
            seen += 1;
        }
        assert_eq!(seen, 4);
    }

    #[test]
    fn a_slot_read_then_written_copies_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("in"), &data).unwrap();
        let input = std::fs::File::open(dir.path().join("in")).unwrap();
        let output = std::fs::File::create(dir.path().join("out")).unwrap();
        let Some(mut ring) = ring(2, 4096) else {
            return;
        };
        ring.read(input.as_fd(), 1, 4096, 0..4096).unwrap();
        assert_eq!(ring.wait().unwrap().unwrap().result, Ok(4096));
        // Half of the slot, at another offset.
        ring.write(output.as_fd(), 1, 100, 2048..4096).unwrap();
        assert_eq!(ring.wait().unwrap().unwrap().result, Ok(2048));
        assert!(ring.wait().is_none());
        let out = std::fs::read(dir.path().join("out")).unwrap();
        assert_eq!(&out[100..], &data[4096 + 2048..]);
        assert_eq!(ring.read(input.as_fd(), 0, 0, 0..8192), Err(Errno::INVAL));
    }

    #[test]
    fn a_queue_gives_each_buffer_back_with_its_tag() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..16384u32).map(|i| (i / 4096) as u8 + 1).collect();
        std::fs::write(dir.path().join("in"), &data).unwrap();
        let input = std::fs::File::open(dir.path().join("in")).unwrap();
        let Ok(mut queue) = Queue::new(2)
            .map_err(|e| crate::sys::skips::skip(&format!("io_uring unavailable here ({e})")))
        else {
            return;
        };
        for tag in [7u64, 9] {
            let buf = AlignedBuf::new(4096).unwrap();
            queue
                .read(input.as_fd(), tag, buf, (tag - 6) * 4096)
                .unwrap();
        }
        let third = AlignedBuf::new(4096).unwrap();
        let (errno, _) = queue.read(input.as_fd(), 1, third, 0).unwrap_err();
        assert_eq!(errno, Errno::BUSY, "two slots, both in flight");
        let mut seen = Vec::new();
        while let Some(done) = queue.finished(true) {
            let done = done.unwrap();
            assert_eq!(done.result, Ok(4096));
            let block = (done.tag - 6) as u8 + 1;
            assert!(
                done.buf.as_slice().iter().all(|&b| b == block),
                "{}",
                done.tag
            );
            seen.push(done.tag);
        }
        seen.sort_unstable();
        assert_eq!(seen, [7, 9]);
        assert!(queue.finished(false).is_none());
    }
}
