//! [`GenericNodeEnd`]: a disk reached through its generic node (SCSI
//! generic `/dev/sg*` or `/dev/bsg/*`, NVMe generic `/dev/ngXnY`), read
//! and written with the disk's own commands, as an [`End`] that behaves
//! as the block device of the same disk: the same bytes, the same sizes
//! and errors at its end (a read there is end of input, a write ENOSPC, a
//! seek past it EINVAL), so that GNU's records and statistics come out as
//! `dd` gives them on the block device.
//!
//! The commands go through a [`CommandQueue`] (`sys::scsi`, `sys::nvme`),
//! whose slots keep several in flight. As a transport the end sends each
//! request of whole blocks as one command in a slot of its own and hands
//! back its completion (`ends::transport`); it asks to be kept busy
//! whenever it is read or written in order (`Requests::least` is its
//! depth), so the engine's window reads ahead of the copy and writes
//! behind it, as a block device's queue would be kept. Where the slot
//! buffers are ddx's own (NVMe; not the sg driver's mapped reserve
//! buffers), a request's buffer changes places with the slot's instead
//! of being copied: the planner sizes bulk requests to one command for
//! that (`EndFacts::command_bytes`).
//!
//! A read or write at the position is the end's own, done before the
//! call returns: a write that is not whole blocks reads the blocks it
//! touches first (read-modify-write), as the page cache would. A read
//! fails whole, as an O_DIRECT read of the block device does: a record
//! either arrives complete or not at all, so `conv=noerror,sync` pads the
//! same records GNU dd pads on the block device. The device's own words
//! go with the errno ([`End::take_detail`]), and where it named the first
//! bad block (a SCSI disk's sense data) [`End::failed_at`] says where,
//! so a copy by position reads up to it in one piece.

use std::os::fd::OwnedFd;
use std::path::Path;

use super::transport::{Completion, Fault, Op as RequestOp, Request, Requests, Submitted};
use super::{Capabilities, End, Kind, Whence};
use crate::sys::buffer::AlignedBuf;
use crate::sys::nvme::NvmeQueue;
use crate::sys::passthrough::{self, CommandError, CommandQueue, Geometry, Interface, Op};
use crate::sys::scsi::ScsiQueue;
use crate::sys::Errno;

/// Commands in flight where neither `--queue-depth` nor the planner said
/// (sgp_dd's four threads keep four).
pub const DEFAULT_DEPTH: usize = 8;

/// How a generic-node end is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Commands kept in flight.
    pub depth: usize,
    /// Writes with force unit access: stored on the medium when they
    /// complete.
    pub fua: bool,
    /// An sg node's commands move their data in the driver's reserve
    /// buffers, mapped into ddx (the copy's way); false: in buffers of
    /// ddx's own that the driver copies, as fio's `sg` engine and sgp_dd
    /// send them (what `ddx bench` measures beside the mapped figure).
    pub mapped: bool,
}

/// The access a node of `interface` is opened with: SCSI commands go
/// through write(2) and ioctls that want write access even to read; an
/// NVMe read needs only read access. A write of part of a block reads
/// the rest first.
pub fn access(interface: Interface, writing: bool) -> rustix::fs::OFlags {
    if writing || interface != Interface::NvmeGeneric {
        rustix::fs::OFlags::RDWR
    } else {
        rustix::fs::OFlags::RDONLY
    }
}

/// Open the generic node `fd` (of `interface`, at `path`) as an end.
pub fn open(
    fd: OwnedFd,
    interface: Interface,
    path: &Path,
    options: Options,
) -> Result<GenericNodeEnd, CommandError> {
    let _ = path;
    let (queue, block_device) = open_queue(fd, interface, options.depth, options.mapped)?;
    Ok(GenericNodeEnd::new(queue, options.fua, block_device))
}

/// The command queue of the generic node `fd` (of `interface`), with
/// `depth` slots where the interface keeps that many in flight, and the
/// kernel name of the block device of the same disk (whose queue limits
/// size the commands). The end is built on it; `ddx bench` keeps its
/// commands in flight on one directly, as fio's `sg` and `io_uring_cmd`
/// engines do. With `mapped`, an sg node's commands move their data in
/// the driver's own buffers, mapped (see `sys::scsi`); without, in
/// buffers the driver copies, as fio's `sg` engine sends them.
pub fn open_queue(
    fd: OwnedFd,
    interface: Interface,
    depth: usize,
    mapped: bool,
) -> Result<(Box<dyn CommandQueue>, Option<String>), CommandError> {
    let number = rustix::fs::fstat(&fd)
        .ok()
        .map(|st| crate::sys::block::DeviceNumber::from_raw(st.st_rdev));
    let block_device = number.and_then(passthrough::block_device_of);
    let queue: Box<dyn CommandQueue> = match interface {
        Interface::ScsiGeneric | Interface::Bsg => Box::new(ScsiQueue::open(
            fd,
            interface,
            depth,
            block_device.as_deref(),
            mapped,
        )?),
        Interface::NvmeGeneric => Box::new(NvmeQueue::open(fd, depth, block_device.as_deref())?),
    };
    Ok((queue, block_device))
}

/// How the commands of `interface` are sent, in fio's names for the
/// engines that send the same ones: "sg" (the sg driver's queue),
/// "io_uring_cmd" (NVMe commands through io_uring), and "bsg" (SG_IO v4,
/// one at a time, which fio has no engine for).
fn engine(interface: Interface) -> &'static str {
    match interface {
        Interface::ScsiGeneric => "sg",
        Interface::Bsg => "bsg",
        Interface::NvmeGeneric => "io_uring_cmd",
    }
}

/// What a slot is busy with.
#[derive(Debug)]
enum Slot {
    Idle,
    /// A request of the window's: its id, what it asked, and its buffer
    /// while the command runs (for a read into the slot's own buffer, the
    /// request's, to copy into; where the buffers changed places, the
    /// slot's own, to change back).
    Request {
        id: u64,
        read: bool,
        len: u64,
        /// None for a write copied into the slot (its buffer went back).
        buf: Option<AlignedBuf>,
        exchanged: bool,
    },
    /// A command of the end's own, waited for by the call that sent it.
    Own,
}

pub struct GenericNodeEnd {
    queue: Box<dyn CommandQueue>,
    geometry: Geometry,
    block: u64,
    size: u64,
    /// The block device of the same disk, for `--verbose`.
    block_device: Option<String>,
    pos: u64,
    fua: bool,
    slots: Vec<Slot>,
    /// Completions of requests that came while a call waited for its own.
    arrived: Vec<Completion>,
    detail: Option<String>,
    failed_at: Option<u64>,
}

impl std::fmt::Debug for GenericNodeEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GenericNodeEnd({:?} at {})", self.queue, self.pos)
    }
}

impl GenericNodeEnd {
    pub fn new(
        queue: Box<dyn CommandQueue>,
        fua: bool,
        block_device: Option<String>,
    ) -> GenericNodeEnd {
        let geometry = queue.geometry();
        let slots = queue.slots();
        GenericNodeEnd {
            block: u64::from(geometry.block_len),
            size: geometry.size(),
            geometry,
            block_device,
            pos: 0,
            fua,
            slots: (0..slots).map(|_| Slot::Idle).collect(),
            arrived: Vec::new(),
            detail: None,
            failed_at: None,
            queue,
        }
    }

    /// The interface the end goes through.
    pub fn interface(&self) -> Interface {
        self.queue.interface()
    }

    fn max_bytes(&self) -> u64 {
        u64::from(self.geometry.max_blocks) * self.block
    }

    fn free_slot(&self) -> Option<usize> {
        self.slots.iter().position(|s| matches!(s, Slot::Idle))
    }

    /// The window's completion of the request in `slot`, whose command
    /// ended with `outcome`.
    fn finish(&mut self, slot: usize, outcome: Result<(), CommandError>) -> Option<Completion> {
        let Slot::Request {
            id,
            read,
            len,
            mut buf,
            exchanged,
        } = std::mem::replace(&mut self.slots[slot], Slot::Idle)
        else {
            return None;
        };
        if let Some(buf) = &mut buf {
            if exchanged {
                // The request's buffer back from the slot, the slot's own
                // in its place.
                self.queue.exchange(slot, buf);
            } else if read && outcome.is_ok() {
                let data = self.queue.buffer(slot).expect("an idle slot");
                buf.as_mut_slice()[..len as usize].copy_from_slice(&data[..len as usize]);
            }
        }
        let result = match outcome {
            Ok(()) => Ok(len),
            Err(error) => Err(Fault {
                errno: error.errno,
                at: error.bad_block.map(|b| b * self.block),
                words: Some(error.cause),
            }),
        };
        Some(Completion { id, result, buf })
    }

    /// Run one command on `slot` and wait for it; completions of
    /// requests that end meanwhile are kept for [`End::complete`].
    fn run(&mut self, slot: usize, op: Op, offset: u64, len: u64) -> Result<(), CommandError> {
        let blocks = (len / self.block) as u32;
        self.queue.submit(slot, op, offset / self.block, blocks)?;
        self.slots[slot] = Slot::Own;
        loop {
            let Some((done, outcome)) = self.queue.wait() else {
                self.slots[slot] = Slot::Idle;
                return Err(CommandError::system(Errno::IO, "a command was lost"));
            };
            if done == slot {
                self.slots[slot] = Slot::Idle;
                return outcome;
            }
            if let Some(completion) = self.finish(done, outcome) {
                self.arrived.push(completion);
            }
        }
    }

    /// A free slot, waiting for a request to end if all are taken.
    fn take_slot(&mut self) -> Result<usize, Errno> {
        loop {
            if let Some(slot) = self.free_slot() {
                return Ok(slot);
            }
            let Some((done, outcome)) = self.queue.wait() else {
                return Err(Errno::IO);
            };
            if let Some(completion) = self.finish(done, outcome) {
                self.arrived.push(completion);
            }
        }
    }

    /// Read exactly `[offset, offset + buf.len())` (whole blocks of the
    /// disk around it), one command at a time.
    fn read_exact(&mut self, buf: &mut [u8], offset: u64) -> Result<(), CommandError> {
        let mut done = 0u64;
        let len = buf.len() as u64;
        while done < len {
            let at = offset + done;
            let start = at / self.block * self.block;
            let end = (offset + len).div_ceil(self.block) * self.block;
            let end = end.min(start + self.max_bytes());
            let slot = self
                .take_slot()
                .map_err(|e| CommandError::system(e, "waiting for a command slot"))?;
            self.run(slot, Op::Read, start, end - start)?;
            let take = (end - at).min(len - done) as usize;
            let from = (at - start) as usize;
            let data = self.queue.buffer(slot).expect("an idle slot");
            buf[done as usize..done as usize + take].copy_from_slice(&data[from..from + take]);
            done += take as u64;
        }
        Ok(())
    }

    /// Write `data` at `offset` (within the disk), block by block around
    /// the partial ones, each partial piece read first.
    fn write_exact(&mut self, data: &[u8], offset: u64) -> Result<(), Errno> {
        let len = data.len() as u64;
        let mut done = 0u64;
        while done < len {
            let at = offset + done;
            let start = at / self.block * self.block;
            let end =
                ((offset + len).div_ceil(self.block) * self.block).min(start + self.max_bytes());
            let slot = self.take_slot()?;
            let covered = start >= offset && end <= offset + len;
            if !covered {
                if let Err(error) = self.run(slot, Op::Read, start, end - start) {
                    self.detail = Some(error.cause);
                    return Err(error.errno);
                }
            }
            let take = (end - at).min(len - done) as usize;
            let from = (at - start) as usize;
            let buffer = self.queue.buffer_mut(slot).expect("an idle slot");
            buffer[from..from + take].copy_from_slice(&data[done as usize..done as usize + take]);
            if let Err(error) = self.run(slot, Op::Write { fua: self.fua }, start, end - start) {
                self.failed_at = error.bad_block.map(|b| b * self.block);
                self.detail = Some(error.cause);
                return Err(error.errno);
            }
            done += take as u64;
        }
        Ok(())
    }
}

impl End for GenericNodeEnd {
    /// A disk, as its block device is: positional, of a fixed size.
    fn kind(&self) -> Kind {
        Kind::GenericNode
    }

    /// Its kind's, kept busy with as many requests as it has slots,
    /// each of whole blocks and at most one command, through buffers of
    /// its own where they are the sg driver's (mapped).
    fn capabilities(&self) -> Capabilities {
        let depth = self.slots.len().max(1);
        Capabilities {
            requests: Requests {
                most: depth,
                least: depth,
                unit: self.geometry.block_len,
                min_len: self.max_bytes() as usize,
                max_len: self.max_bytes() as usize,
                round_trip_bytes: 0,
                owns_buffers: self.queue.mapped(),
                via: engine(self.queue.interface()),
            },
            block_addressed: Some(self.geometry.block_len),
            ..Capabilities::of(Kind::GenericNode)
        }
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        // A block device's lseek: anywhere from 0 to its size.
        let target = to.from(self.pos, self.size);
        match target {
            Some(at) if at <= self.size => {
                self.pos = at;
                Ok(at)
            }
            _ => Err(Errno::INVAL),
        }
    }

    /// None, as for the block device: GNU's `usable_st_size` is a regular
    /// file's; the disk's size is where [`Whence::End`] goes.
    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(None)
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        self.queue.flush().map_err(|error| {
            let errno = error.errno;
            self.detail = Some(error.cause);
            errno
        })
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        self.failed_at = None;
        if offset >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min((self.size - offset) as usize);
        match self.read_exact(&mut buf[..n], offset) {
            Ok(()) => Ok(n),
            Err(error) => {
                self.failed_at = error.bad_block.map(|b| b * self.block);
                self.detail = Some(error.cause);
                Err(error.errno)
            }
        }
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        self.failed_at = None;
        if buf.is_empty() {
            return Ok(0);
        }
        // The end of the disk: what fits is written, then ENOSPC.
        if offset >= self.size {
            return Err(Errno::NOSPC);
        }
        let n = buf.len().min((self.size - offset) as usize);
        self.write_exact(&buf[..n], offset)?;
        Ok(n)
    }

    /// One command in a slot of its own (busy when none is free). A
    /// request past the disk's end moves nothing; one across it, what
    /// fits.
    fn submit(&mut self, mut request: Request) -> Submitted {
        let (id, offset) = (request.id, request.offset);
        if request.op == RequestOp::Zero || request.buf.is_none() {
            return super::at_once(self, request);
        }
        if offset >= self.size || request.len == 0 {
            return Submitted::Done(Completion {
                id,
                result: Ok(0),
                buf: request.buf,
            });
        }
        request.len = request.len.min(self.size - offset).min(self.max_bytes());
        let len = request.len;
        if offset % self.block != 0 || len % self.block != 0 {
            return super::at_once(self, request);
        }
        let Some(slot) = self.free_slot() else {
            return Submitted::Busy(request);
        };
        let op = request.op;
        let mut buf = request.buf.take().expect("checked above");
        let read = op == RequestOp::Read;
        buf.set_len(len as usize);
        let exchanged = self.queue.exchange(slot, &mut buf);
        if !exchanged && !read {
            let slot_buffer = self.queue.buffer_mut(slot).expect("an idle slot");
            slot_buffer[..len as usize].copy_from_slice(buf.as_slice());
        }
        let command = if read {
            Op::Read
        } else {
            Op::Write { fua: self.fua }
        };
        if let Err(error) = self.queue.submit(
            slot,
            command,
            offset / self.block,
            (len / self.block) as u32,
        ) {
            if exchanged {
                self.queue.exchange(slot, &mut buf);
            }
            return Submitted::Done(Completion {
                id,
                result: Err(Fault {
                    errno: error.errno,
                    at: None,
                    words: Some(error.cause),
                }),
                buf: Some(buf),
            });
        }
        if !exchanged && !read {
            // Copied into the slot: the request's buffer is free now.
            self.slots[slot] = Slot::Request {
                id,
                read,
                len,
                buf: None,
                exchanged,
            };
            return Submitted::Copied(buf);
        }
        self.slots[slot] = Slot::Request {
            id,
            read,
            len,
            buf: Some(buf),
            exchanged,
        };
        Submitted::InFlight
    }

    fn complete(&mut self, wait: bool) -> Option<Completion> {
        loop {
            if let Some(done) = self.arrived.pop() {
                return Some(done);
            }
            if !wait || !self.slots.iter().any(|s| matches!(s, Slot::Request { .. })) {
                return None;
            }
            let (slot, outcome) = self.queue.wait()?;
            if let Some(done) = self.finish(slot, outcome) {
                return Some(done);
            }
        }
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn failed_at(&self) -> Option<u64> {
        self.failed_at
    }

    fn describe(&self) -> Option<String> {
        let behind = match &self.block_device {
            Some(name) => format!(" (the disk of /dev/{name})"),
            None => String::new(),
        };
        Some(format!(
            "{}{behind}: {}, up to {} in flight, {}-byte blocks, {} per command{}",
            self.queue.interface().name(),
            self.queue.describe(),
            self.slots.len(),
            self.block,
            crate::text::human::human(self.max_bytes(), crate::text::human::Base::Iec, 1, 1),
            if self.fua { ", writes with FUA" } else { "" }
        ))
    }

    /// The commands in flight end first.
    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        while self.complete(true).is_some() {}
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use std::collections::VecDeque;

    /// A disk in memory behind the command queue interface: commands
    /// complete in the order they were sent, on `wait`; `bad` blocks fail
    /// reads with a medium error naming the first bad block.
    #[derive(Debug)]
    pub(crate) struct MemoryDisk {
        pub(crate) data: Vec<u8>,
        block: u32,
        max_blocks: u32,
        buffers: Vec<AlignedBuf>,
        pub(crate) busy: Vec<Option<(Op, u64, u32)>>,
        pub(crate) order: VecDeque<usize>,
        bad: Vec<u64>,
        commands: usize,
    }

    impl MemoryDisk {
        pub(crate) fn new(data: Vec<u8>, slots: usize, bad: Vec<u64>) -> MemoryDisk {
            MemoryDisk {
                data,
                block: 512,
                max_blocks: 16,
                buffers: (0..slots).map(|_| AlignedBuf::new(8192).unwrap()).collect(),
                busy: vec![None; slots],
                order: VecDeque::new(),
                bad,
                commands: 0,
            }
        }
    }

    impl CommandQueue for MemoryDisk {
        fn interface(&self) -> Interface {
            Interface::ScsiGeneric
        }
        fn geometry(&self) -> Geometry {
            Geometry {
                block_len: self.block,
                blocks: (self.data.len() / self.block as usize) as u64,
                max_blocks: self.max_blocks,
            }
        }
        fn slots(&self) -> usize {
            self.buffers.len()
        }
        fn describe(&self) -> String {
            "memory".into()
        }
        fn buffer(&self, slot: usize) -> Option<&[u8]> {
            self.busy[slot]
                .is_none()
                .then(|| self.buffers[slot].as_slice())
        }
        fn buffer_mut(&mut self, slot: usize) -> Option<&mut [u8]> {
            self.busy[slot]
                .is_none()
                .then(|| self.buffers[slot].as_mut_slice())
        }
        fn exchange(&mut self, slot: usize, buf: &mut AlignedBuf) -> bool {
            let len = self.max_blocks as usize * self.block as usize;
            self.busy[slot].is_none()
                && crate::sys::passthrough::exchange_slot(&mut self.buffers[slot], len, buf)
        }
        fn submit(
            &mut self,
            slot: usize,
            op: Op,
            lba: u64,
            blocks: u32,
        ) -> Result<(), CommandError> {
            assert!(self.busy[slot].is_none(), "slot {slot} sent twice");
            assert!(blocks >= 1 && blocks <= self.max_blocks);
            assert!(
                lba + u64::from(blocks) <= self.geometry().blocks,
                "past the end"
            );
            self.busy[slot] = Some((op, lba, blocks));
            self.order.push_back(slot);
            self.commands += 1;
            Ok(())
        }
        fn wait(&mut self) -> Option<(usize, Result<(), CommandError>)> {
            let slot = self.order.pop_front()?;
            let (op, lba, blocks) = self.busy[slot].take().unwrap();
            let b = self.block as usize;
            let range = lba as usize * b..(lba as usize + blocks as usize) * b;
            if let Some(&bad) = self
                .bad
                .iter()
                .find(|&&x| x >= lba && x < lba + u64::from(blocks))
            {
                if op == Op::Read {
                    return Some((
                        slot,
                        Err(CommandError {
                            errno: Errno::IO,
                            cause: format!("medium error, unrecovered read error at LBA {bad}"),
                            bad_block: Some(bad),
                        }),
                    ));
                }
            }
            match op {
                Op::Read => self.buffers[slot].as_mut_slice()[..range.len()]
                    .copy_from_slice(&self.data[range]),
                Op::Write { .. } => {
                    let n = range.len();
                    self.data[range].copy_from_slice(&self.buffers[slot].as_slice()[..n])
                }
            }
            Some((slot, Ok(())))
        }
        fn flush(&mut self) -> Result<(), CommandError> {
            Ok(())
        }
    }

    pub(crate) fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 509) as u8).collect()
    }

    pub(crate) fn end(data: Vec<u8>, bad: Vec<u64>) -> GenericNodeEnd {
        GenericNodeEnd::new(Box::new(MemoryDisk::new(data, 4, bad)), false, None)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{end, pattern};
    use super::*;

    #[test]
    fn reads_of_any_size_and_offset_give_the_disks_bytes() {
        let data = pattern(64 * 512);
        for size in [1usize, 100, 512, 1000, 4096, 5000, 9000] {
            let mut e = end(data.clone(), vec![]);
            e.seek(Whence::Start(77)).unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; size];
            loop {
                let n = e.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, data[77..], "reads of {size}");
        }
    }

    #[test]
    fn writes_of_any_size_land_in_place_and_the_rest_is_kept() {
        let data = pattern(64 * 512);
        for size in [1usize, 300, 512, 4096, 5000, 8192] {
            let mut e = end(vec![0xee; data.len()], vec![]);
            e.seek(Whence::Start(1000)).unwrap();
            let mut at = 1000;
            while at < data.len() {
                let n = (data.len() - at).min(size);
                assert_eq!(e.write(&data[at..at + n]).unwrap(), n);
                at += n;
            }
            e.seek(Whence::Start(0)).unwrap();
            let mut back = vec![0u8; data.len()];
            assert_eq!(e.read(&mut back).unwrap(), data.len());
            assert!(back[..1000].iter().all(|&b| b == 0xee), "writes of {size}");
            assert_eq!(back[1000..], data[1000..], "writes of {size}");
        }
    }

    #[test]
    fn the_end_of_the_disk_is_a_block_devices() {
        let mut e = end(pattern(8 * 512), vec![]);
        assert_eq!(e.seek(Whence::End(0)), Ok(4096));
        assert_eq!(e.seek(Whence::Start(4097)), Err(Errno::INVAL));
        assert_eq!(e.seek(Whence::Current(-1)), Ok(4095));
        let mut buf = [0u8; 10];
        assert_eq!(e.read(&mut buf), Ok(1));
        assert_eq!(e.read(&mut buf), Ok(0));
        assert_eq!(e.write_at(&[1; 1024], 3584), Ok(512), "what fits, then");
        assert_eq!(e.write_at(&[1; 10], 4096), Err(Errno::NOSPC));
    }

    #[test]
    fn a_failed_read_fails_whole_and_names_the_bad_block() {
        let data = pattern(64 * 512);
        let mut e = end(data.clone(), vec![20]);
        let mut buf = vec![0u8; 4096];
        // Records 0 and 1 (blocks 0-15) read, record 2 (16-23) fails.
        assert_eq!(e.read(&mut buf), Ok(4096));
        assert_eq!(e.read(&mut buf), Ok(4096));
        assert_eq!(buf, data[4096..8192]);
        assert_eq!(e.read(&mut buf), Err(Errno::IO));
        assert_eq!(e.failed_at(), Some(20 * 512));
        assert_eq!(
            e.take_detail().as_deref(),
            Some("medium error, unrecovered read error at LBA 20")
        );
        // conv=noerror: GNU seeks past the record and goes on.
        e.seek(Whence::Current(4096)).unwrap();
        assert_eq!(e.read(&mut buf), Ok(4096));
        assert_eq!(buf, data[3 * 4096..4 * 4096]);
        // Before the bad block, by position: read whole.
        let mut head = vec![0u8; 20 * 512 - 8192];
        assert_eq!(e.read_at(&mut head, 8192), Ok(head.len()));
        assert_eq!(head, data[8192..20 * 512]);
    }
}
