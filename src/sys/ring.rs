//! A small io_uring of positional reads into buffers the ring owns, for
//! measuring a device at a chosen queue depth.
//!
//! Ownership rule: each slot's buffer belongs to the kernel from
//! [`ReadRing::submit`] until its completion comes back from
//! [`ReadRing::wait`]. The ring refuses to submit into a busy slot, and its
//! Drop waits for every read still in flight before the buffers are
//! unmapped, so no completion can ever land in freed memory.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Instant;

use io_uring::{opcode, types, IoUring};
use rustix::io::Errno;

use super::buffer::AlignedBuf;

/// One finished read: which slot, when it was submitted, and what the
/// kernel returned (bytes read, or the error).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub slot: usize,
    pub submitted: Instant,
    pub result: Result<usize, Errno>,
}

pub struct ReadRing {
    ring: IoUring,
    buffers: Vec<AlignedBuf>,
    /// Submission time of each slot's read in flight; None when idle.
    busy: Vec<Option<Instant>>,
    in_flight: usize,
}

impl std::fmt::Debug for ReadRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ReadRing({} slots, {} in flight)",
            self.busy.len(),
            self.in_flight
        )
    }
}

impl ReadRing {
    /// A ring with `slots` buffers of `buffer_len` bytes (page-aligned, so
    /// fit for O_DIRECT). Fails with the kernel's errno where io_uring is
    /// missing or disabled (ENOSYS, EPERM under io_uring_disabled).
    pub fn new(slots: usize, buffer_len: usize) -> Result<ReadRing, Errno> {
        let entries = slots.next_power_of_two().max(1) as u32;
        let ring = IoUring::new(entries).map_err(|e| errno_of(&e))?;
        let buffers = (0..slots)
            .map(|_| AlignedBuf::new(buffer_len))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ReadRing {
            ring,
            buffers,
            busy: vec![None; slots],
            in_flight: 0,
        })
    }

    pub fn slots(&self) -> usize {
        self.busy.len()
    }

    /// Start a read of `len` bytes (at most the buffer's length) at
    /// `offset` into slot `slot`, which must be idle. `fd` must stay open
    /// until the completion is reaped (the kernel holds its own reference
    /// to the file once submitted, so this is about meaning, not memory).
    pub fn submit(
        &mut self,
        fd: BorrowedFd<'_>,
        slot: usize,
        offset: u64,
        len: usize,
    ) -> Result<(), Errno> {
        if slot >= self.busy.len() || self.busy[slot].is_some() {
            return Err(Errno::BUSY);
        }
        let buffer = &mut self.buffers[slot];
        let len = len.min(buffer.len());
        let entry = opcode::Read::new(
            types::Fd(fd.as_raw_fd()),
            buffer.as_mut_slice().as_mut_ptr(),
            len as u32,
        )
        .offset(offset)
        .build()
        .user_data(slot as u64);
        // SAFETY: the entry points into slot `slot`'s buffer, which is idle
        // (checked above) and is neither touched nor freed until its
        // completion is reaped in wait() or drained in Drop.
        unsafe {
            self.ring
                .submission()
                .push(&entry)
                .map_err(|_| Errno::AGAIN)?;
        }
        self.busy[slot] = Some(Instant::now());
        self.in_flight += 1;
        loop {
            match self.ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if errno_of(&e) == Errno::INTR => continue,
                // The entry stays queued and counted in flight: the next
                // wait (or Drop) submits it again and reaps it, so the
                // buffer is never reused while the kernel may hold it.
                Err(e) => return Err(errno_of(&e)),
            }
        }
    }

    /// Wait for the next completion; None when nothing is in flight.
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
                Err(e) if errno_of(&e) == Errno::INTR => {}
                Err(e) => return Some(Err(errno_of(&e))),
            }
        }
    }

    /// The data a completed read brought in.
    pub fn buffer(&self, slot: usize) -> &[u8] {
        self.buffers[slot].as_slice()
    }
}

impl Drop for ReadRing {
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

    #[test]
    fn reads_land_in_their_slots() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("data");
        let mut f = std::fs::File::create(&path).unwrap();
        let data: Vec<u8> = (0..16384u32).map(|i| (i / 4096) as u8 + 1).collect();
        f.write_all(&data).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let mut ring = match ReadRing::new(4, 4096) {
            Ok(ring) => ring,
            Err(e) => {
                eprintln!("skipped: io_uring unavailable here ({e})");
                return;
            }
        };
        for slot in 0..4 {
            ring.submit(f.as_fd(), slot, (3 - slot as u64) * 4096, 4096)
                .unwrap();
        }
        assert_eq!(ring.submit(f.as_fd(), 0, 0, 4096), Err(Errno::BUSY));
        let mut seen = 0;
        while let Some(done) = ring.wait() {
            let done = done.unwrap();
            assert_eq!(done.result, Ok(4096));
            assert!(ring.buffer(done.slot)[..4096]
                .iter()
                .all(|&b| b == 4 - done.slot as u8));
            seen += 1;
        }
        assert_eq!(seen, 4);
    }
}
