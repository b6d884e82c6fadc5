//! [`PassthroughEnd`]: a disk reached through its passthrough node (SCSI
//! generic `/dev/sg*` or `/dev/bsg/*`, NVMe generic `/dev/ngXnY`), read
//! and written with the disk's own commands, as an [`End`] that behaves
//! as the block device of the same disk: the same bytes, the same sizes
//! and errors at its end (a read there is end of input, a write ENOSPC, a
//! seek past it EINVAL), so that GNU's records and statistics come out as
//! `dd` gives them on the block device.
//!
//! The commands go through a [`CommandQueue`] (`sys::scsi`, `sys::nvme`),
//! which keeps several in flight in buffers of its own. Reads run ahead:
//! the blocks after the one asked for are already requested, in pieces of
//! the size the copy reads (or the pipeline's chunk), up to the depth.
//! Writes run behind: a write of whole blocks is copied into a slot and
//! sent, and its outcome comes back at a later write, `settle`, `sync` or
//! `close`, with [`End::written_until`] saying how far everything is
//! stored. A write that is not whole blocks reads the blocks it touches
//! first (read-modify-write), as the page cache would.
//!
//! Where the queue's slot buffers are ddx's own (NVMe; not the sg
//! driver's mapped reserve buffers), a read of one whole piece and a
//! write of one whole command change buffers with the engine
//! ([`End::read_exchange`], [`End::write_exchange`]) instead of copying:
//! the planner sizes bulk requests to one command for that
//! (`EndFacts::command_bytes`).
//!
//! A read fails whole, as an O_DIRECT read of the block device does: a
//! record either arrives complete or not at all, so `conv=noerror,sync`
//! pads the same records GNU dd pads on the block device. The device's
//! own words go with the errno ([`End::take_detail`]), and where it named
//! the first bad block (a SCSI disk's sense data) [`End::failed_at`] says
//! where, so a copy by position reads up to it in one piece.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::path::Path;

use super::{Capabilities, End, Kind, Pipeline, Whence};
use crate::sys::buffer::AlignedBuf;
use crate::sys::nvme::NvmeQueue;
use crate::sys::passthrough::{self, CommandError, CommandQueue, Geometry, Interface, Op};
use crate::sys::scsi::ScsiQueue;
use crate::sys::Errno;

/// Commands in flight where neither `--queue-depth` nor the planner said
/// (sgp_dd's four threads keep four).
pub const DEFAULT_DEPTH: usize = 8;

/// How a passthrough end is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Commands kept in flight.
    pub depth: usize,
    /// Writes with force unit access: stored on the medium when they
    /// complete.
    pub fua: bool,
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

/// Open the passthrough node `fd` (of `interface`, at `path`) as an end.
pub fn open(
    fd: OwnedFd,
    interface: Interface,
    path: &Path,
    options: Options,
) -> Result<PassthroughEnd, CommandError> {
    let _ = path;
    let (queue, block_device) = open_queue(fd, interface, options.depth, true)?;
    Ok(PassthroughEnd::new(queue, options.fua, block_device))
}

/// The command queue of the passthrough node `fd` (of `interface`), with
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

/// Which request a slot serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Idle,
    /// A piece of the read-ahead window.
    Ahead,
    /// A read the window gave up on while it was in flight: the slot is
    /// free once its completion arrives.
    Orphan,
    /// A write in flight.
    Behind,
}

#[derive(Debug)]
enum PieceState {
    InFlight,
    Ready,
    /// Its blocks may be read again one record at a time: only the
    /// records over the bad block fail.
    Failed,
}

/// A block-aligned run of the disk requested ahead of the reader.
#[derive(Debug)]
struct Piece {
    slot: usize,
    offset: u64,
    len: u64,
    state: PieceState,
}

/// Where a read's bytes go: a slice they are copied into, or a whole
/// buffer that may change places with the read-ahead piece holding them.
enum Target<'a> {
    Slice(&'a mut [u8]),
    Exchange(&'a mut AlignedBuf),
}

impl Target<'_> {
    fn bytes(&mut self) -> &mut [u8] {
        match self {
            Target::Slice(slice) => slice,
            Target::Exchange(buf) => buf.as_mut_slice(),
        }
    }
}

/// A write sent and not yet retired.
#[derive(Debug)]
struct Sent {
    slot: usize,
    offset: u64,
    len: u64,
    outcome: Option<Result<(), CommandError>>,
}

pub struct PassthroughEnd {
    queue: Box<dyn CommandQueue>,
    geometry: Geometry,
    block: u64,
    size: u64,
    /// The block device of the same disk, for `--verbose`.
    block_device: Option<String>,
    pos: u64,
    fua: bool,
    owner: Vec<Owner>,
    /// Read-ahead: pieces in order, and where the next one would start.
    ahead: VecDeque<Piece>,
    ahead_until: Option<u64>,
    /// Bytes per read-ahead piece (whole blocks); 0 until known.
    chunk: u64,
    /// Commands kept in flight (at most the queue's slots).
    depth: usize,
    /// Writes in flight, in the order they were sent.
    behind: VecDeque<Sent>,
    /// Everything before this offset is stored, where writes went behind.
    acked_until: Option<u64>,
    /// A write failed: the first failure, reported once, and the errno
    /// every later write gives.
    write_error: Option<CommandError>,
    write_failed: Option<Errno>,
    deferred: bool,
    detail: Option<String>,
    failed_at: Option<u64>,
}

impl std::fmt::Debug for PassthroughEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PassthroughEnd({:?} at {})", self.queue, self.pos)
    }
}

impl PassthroughEnd {
    pub fn new(
        queue: Box<dyn CommandQueue>,
        fua: bool,
        block_device: Option<String>,
    ) -> PassthroughEnd {
        let geometry = queue.geometry();
        let slots = queue.slots();
        PassthroughEnd {
            block: u64::from(geometry.block_len),
            size: geometry.size(),
            geometry,
            block_device,
            pos: 0,
            fua,
            owner: vec![Owner::Idle; slots],
            ahead: VecDeque::new(),
            ahead_until: None,
            chunk: 0,
            depth: slots,
            behind: VecDeque::new(),
            acked_until: None,
            write_error: None,
            write_failed: None,
            deferred: false,
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
        self.owner.iter().position(|o| *o == Owner::Idle)
    }

    /// Wait for one completion and file it where it belongs. False when
    /// nothing was in flight.
    fn collect(&mut self) -> bool {
        let Some((slot, outcome)) = self.queue.wait() else {
            return false;
        };
        match self.owner.get(slot).copied() {
            Some(Owner::Ahead) => {
                if let Some(piece) = self.ahead.iter_mut().find(|p| p.slot == slot) {
                    piece.state = match outcome {
                        Ok(()) => PieceState::Ready,
                        Err(_) => PieceState::Failed,
                    };
                }
            }
            Some(Owner::Orphan) => self.owner[slot] = Owner::Idle,
            Some(Owner::Behind) => {
                if let Some(sent) = self.behind.iter_mut().find(|s| s.slot == slot) {
                    sent.outcome = Some(outcome);
                }
                self.retire_writes();
            }
            _ => {}
        }
        true
    }

    /// Retire the writes at the front that completed, in order; the first
    /// failure stops the stored prefix for good.
    fn retire_writes(&mut self) {
        while let Some(front) = self.behind.front() {
            match &front.outcome {
                None => break,
                Some(Ok(())) => {
                    let sent = self.behind.pop_front().expect("front");
                    self.owner[sent.slot] = Owner::Idle;
                    if self.write_failed.is_none() {
                        self.acked_until = Some(sent.offset + sent.len);
                    }
                }
                Some(Err(_)) => {
                    let sent = self.behind.pop_front().expect("front");
                    self.owner[sent.slot] = Owner::Idle;
                    if let Some(Err(error)) = sent.outcome {
                        if self.write_failed.is_none() {
                            self.write_failed = Some(error.errno);
                            self.failed_at = error.bad_block.map(|b| b * self.block);
                            self.write_error = Some(error);
                        }
                    }
                }
            }
        }
    }

    /// Give up the read-ahead window: pieces in flight become orphans.
    fn drop_window(&mut self) {
        for piece in self.ahead.drain(..) {
            self.owner[piece.slot] = match piece.state {
                PieceState::InFlight => Owner::Orphan,
                _ => Owner::Idle,
            };
        }
        self.ahead_until = None;
    }

    /// Wait for every read in flight (the window's and orphans').
    fn quiesce_reads(&mut self) {
        self.drop_window();
        while self.owner.contains(&Owner::Orphan) {
            if !self.collect() {
                break;
            }
        }
    }

    /// Wait for every write in flight; the first failure not reported
    /// yet, as an errno (its words kept for `take_detail`).
    fn settle_writes(&mut self) -> Result<(), Errno> {
        while !self.behind.is_empty() {
            if !self.collect() {
                break;
            }
        }
        self.report_write_error()
    }

    /// The first write failure, once: its errno now, its words for
    /// `take_detail`.
    fn report_write_error(&mut self) -> Result<(), Errno> {
        match self.write_error.take() {
            Some(error) => {
                self.detail = Some(error.cause);
                Err(error.errno)
            }
            None => Ok(()),
        }
    }

    /// Run one command on `slot` and wait for it (whatever else is in
    /// flight is filed as it completes).
    fn run(&mut self, slot: usize, op: Op, offset: u64, len: u64) -> Result<(), CommandError> {
        let blocks = (len / self.block) as u32;
        self.queue.submit(slot, op, offset / self.block, blocks)?;
        self.owner[slot] = Owner::Orphan;
        loop {
            let Some((done, outcome)) = self.queue.wait() else {
                return Err(CommandError::system(Errno::IO, "a command was lost"));
            };
            if done == slot {
                self.owner[slot] = Owner::Idle;
                return outcome;
            }
            // Someone else's: file it as `collect` would.
            match self.owner[done] {
                Owner::Orphan => self.owner[done] = Owner::Idle,
                Owner::Behind => {
                    if let Some(sent) = self.behind.iter_mut().find(|s| s.slot == done) {
                        sent.outcome = Some(outcome);
                    }
                    self.retire_writes();
                }
                Owner::Ahead => {
                    if let Some(piece) = self.ahead.iter_mut().find(|p| p.slot == done) {
                        piece.state = match outcome {
                            Ok(()) => PieceState::Ready,
                            Err(_) => PieceState::Failed,
                        };
                    }
                }
                Owner::Idle => {}
            }
        }
    }

    /// A free slot, waiting for one if all are taken.
    fn take_slot(&mut self) -> Result<usize, Errno> {
        loop {
            if let Some(slot) = self.free_slot() {
                return Ok(slot);
            }
            if !self.collect() {
                return Err(Errno::IO);
            }
        }
    }

    /// Read exactly `[offset, offset + buf.len())` (whole blocks of the
    /// disk around it), one command at a time, past the window: the
    /// answer for a range the window's larger piece failed on.
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

    /// Keep the window full from where it stands: pieces of `chunk` up
    /// to the depth and the disk's end.
    fn plan(&mut self) {
        let Some(mut at) = self.ahead_until else {
            return;
        };
        while self.ahead.len() < self.depth && at < self.size {
            let Some(slot) = self.free_slot() else { break };
            let len = self.chunk.min(self.size - at);
            let blocks = (len / self.block) as u32;
            if self
                .queue
                .submit(slot, Op::Read, at / self.block, blocks)
                .is_err()
            {
                break;
            }
            self.owner[slot] = Owner::Ahead;
            self.ahead.push_back(Piece {
                slot,
                offset: at,
                len,
                state: PieceState::InFlight,
            });
            at += len;
        }
        self.ahead_until = Some(at);
    }

    /// Fill `target` from `offset` (within the disk), all of it or
    /// nothing.
    fn read_into(&mut self, mut target: Target<'_>, offset: u64) -> Result<(), Errno> {
        self.settle_writes()?;
        let len = target.bytes().len() as u64;
        if self.chunk == 0 {
            let wanted = len.div_ceil(self.block) * self.block;
            self.chunk = wanted.clamp(self.block, self.max_bytes());
        }
        // Pieces behind the offset are done with; a window that does not
        // hold it starts again there.
        while let Some(front) = self.ahead.front() {
            if front.offset + front.len > offset {
                break;
            }
            let piece = self.ahead.pop_front().expect("front");
            self.owner[piece.slot] = match piece.state {
                PieceState::InFlight => Owner::Orphan,
                _ => Owner::Idle,
            };
        }
        let held = match (self.ahead.front(), self.ahead_until) {
            (Some(front), _) => front.offset <= offset,
            (None, Some(until)) => until == offset / self.block * self.block,
            (None, None) => false,
        };
        if !held {
            self.drop_window();
            self.ahead_until = Some(offset / self.block * self.block);
        }
        let mut done = 0u64;
        while done < len {
            self.plan();
            let at = offset + done;
            let Some(index) = self
                .ahead
                .iter()
                .position(|p| p.offset <= at && at < p.offset + p.len)
            else {
                // Nothing could be sent: no slot free of orphans.
                if !self.collect() {
                    return Err(Errno::IO);
                }
                continue;
            };
            debug_assert_eq!(index, 0, "the window starts at the reader");
            while matches!(self.ahead[index].state, PieceState::InFlight) {
                if !self.collect() {
                    return Err(Errno::IO);
                }
            }
            if let PieceState::Failed = self.ahead[index].state {
                // The piece may be larger than the read: ask for exactly
                // what was asked, so that a record fails only for a bad
                // block of its own, and start the window afresh after it.
                self.drop_window();
                return match self.read_exact(&mut target.bytes()[done as usize..], at) {
                    Ok(()) => {
                        self.ahead_until = Some((offset + len).div_ceil(self.block) * self.block);
                        Ok(())
                    }
                    Err(error) => {
                        self.failed_at = error.bad_block.map(|b| b * self.block);
                        self.detail = Some(error.cause);
                        Err(error.errno)
                    }
                };
            }
            let piece = &self.ahead[index];
            if let Target::Exchange(whole) = &mut target {
                // The whole piece is the whole read: its buffer goes to
                // the engine, whose buffer carries the next piece.
                let whole_piece = done == 0 && at == piece.offset && piece.len == len;
                if whole_piece && self.queue.exchange(piece.slot, whole) {
                    let piece = self.ahead.pop_front().expect("front");
                    self.owner[piece.slot] = Owner::Idle;
                    return Ok(());
                }
            }
            let from = (at - piece.offset) as usize;
            let take = ((piece.offset + piece.len - at).min(len - done)) as usize;
            let data = self.queue.buffer(piece.slot).expect("a ready slot is idle");
            target.bytes()[done as usize..done as usize + take]
                .copy_from_slice(&data[from..from + take]);
            done += take as u64;
            // A piece read to its end is done with: its slot goes on ahead.
            if offset + done == piece.offset + piece.len {
                let piece = self.ahead.pop_front().expect("front");
                self.owner[piece.slot] = Owner::Idle;
            }
        }
        Ok(())
    }

    /// Send the write of the `len` bytes `slot` holds to `at`, behind.
    fn send_behind(&mut self, slot: usize, at: u64, len: u64) -> Result<(), Errno> {
        let op = Op::Write { fua: self.fua };
        let blocks = (len / self.block) as u32;
        if let Err(error) = self.queue.submit(slot, op, at / self.block, blocks) {
            self.detail = Some(error.cause);
            return Err(error.errno);
        }
        self.owner[slot] = Owner::Behind;
        if self.acked_until.is_none() {
            self.acked_until = Some(at);
        }
        self.behind.push_back(Sent {
            slot,
            offset: at,
            len,
            outcome: None,
        });
        self.deferred = true;
        Ok(())
    }

    /// Write `data` at `offset` (within the disk): whole blocks go behind,
    /// the rest read-modify-write, synchronously.
    fn write_from(&mut self, data: &[u8], offset: u64) -> Result<(), Errno> {
        if let Some(errno) = self.write_failed {
            self.report_write_error()?;
            return Err(errno);
        }
        self.quiesce_reads();
        let len = data.len() as u64;
        if offset % self.block == 0 && len % self.block == 0 {
            let mut done = 0u64;
            while done < len {
                let take = (len - done).min(self.max_bytes());
                let slot = self.take_slot()?;
                if let Some(errno) = self.write_failed {
                    self.report_write_error()?;
                    return Err(errno);
                }
                let buffer = self.queue.buffer_mut(slot).expect("an idle slot");
                buffer[..take as usize]
                    .copy_from_slice(&data[done as usize..(done + take) as usize]);
                self.send_behind(slot, offset + done, take)?;
                done += take;
            }
            if self.depth <= 1 {
                self.settle_writes()?;
            }
            return Ok(());
        }
        self.settle_writes()?;
        // Block by block around the partial ones, each piece read first.
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
            if self.deferred {
                self.acked_until = Some(at + take as u64);
            }
            done += take as u64;
        }
        Ok(())
    }
}

impl End for PassthroughEnd {
    /// A disk, as its block device is: positional, of a fixed size.
    fn kind(&self) -> Kind {
        Kind::Passthrough
    }

    /// Its kind's, and buffers exchanged where the queue's are ddx's own
    /// (not the sg driver's mapped reserve buffers).
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            exchanges_buffers: self.queue.interface() != Interface::ScsiGeneric,
            ..Capabilities::of(Kind::Passthrough)
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    /// A read of exactly one read-ahead piece takes the piece's buffer;
    /// any other read within the disk is copied into `buf`. A read past
    /// its end is `read`'s.
    fn read_exchange(&mut self, buf: &mut AlignedBuf) -> Option<Result<usize, Errno>> {
        let len = buf.len() as u64;
        if len == 0 || self.pos.checked_add(len)? > self.size {
            return None;
        }
        self.failed_at = None;
        let at = self.pos;
        Some(self.read_into(Target::Exchange(buf), at).map(|()| {
            self.pos += len;
            len as usize
        }))
    }

    /// A whole buffer of whole blocks that one command carries is written
    /// behind from the buffer itself, and the slot's buffer takes its
    /// place. Not where each write is waited for (one slot), nor after a
    /// failure, which `write` reports.
    fn write_exchange(&mut self, buf: &mut AlignedBuf) -> Option<Result<usize, Errno>> {
        let len = buf.len() as u64;
        let whole = len > 0 && len % self.block == 0 && self.pos % self.block == 0;
        if !whole || len > self.max_bytes() || self.pos.checked_add(len)? > self.size {
            return None;
        }
        if self.depth <= 1 || self.write_failed.is_some() {
            return None;
        }
        self.quiesce_reads();
        let slot = match self.take_slot() {
            Ok(slot) => slot,
            Err(errno) => return Some(Err(errno)),
        };
        if self.write_failed.is_some() || !self.queue.exchange(slot, buf) {
            return None;
        }
        let at = self.pos;
        Some(self.send_behind(slot, at, len).map(|()| {
            self.pos += len;
            len as usize
        }))
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        let n = self.write_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        // A block device's lseek: anywhere from 0 to its size.
        let target = match to {
            Whence::Start(at) => Some(at),
            Whence::Current(by) => self.pos.checked_add_signed(by),
            Whence::End(by) => self.size.checked_add_signed(by),
        };
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
        self.settle_writes()?;
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
        self.read_into(Target::Slice(&mut buf[..n]), offset)?;
        Ok(n)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        if buf.is_empty() {
            return Ok(0);
        }
        // The end of the disk: what fits is written, then ENOSPC.
        if offset >= self.size {
            return Err(Errno::NOSPC);
        }
        let n = buf.len().min((self.size - offset) as usize);
        self.write_from(&buf[..n], offset)?;
        Ok(n)
    }

    /// The request size becomes the read-ahead's piece. The depth stays
    /// the end's own (`--queue-depth`, else [`DEFAULT_DEPTH`]): the
    /// engine's depth is how far its reader runs ahead of its writer,
    /// while these commands are in flight inside the end whatever the
    /// engine does (one record at a time with the sync backend).
    fn pipeline(&mut self, hint: Pipeline) {
        let chunk = (hint.chunk as u64).div_ceil(self.block) * self.block;
        self.chunk = chunk.clamp(self.block, self.max_bytes());
    }

    fn written_until(&self) -> Option<u64> {
        if self.deferred {
            self.acked_until
        } else {
            None
        }
    }

    fn settle(&mut self) -> Result<(), Errno> {
        self.settle_writes()
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn failed_at(&self) -> Option<u64> {
        self.failed_at
    }

    fn logical_block(&self) -> Option<u32> {
        Some(self.geometry.block_len)
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
            self.depth,
            self.block,
            crate::text::human::human(self.max_bytes(), crate::text::human::Base::Iec, 1, 1),
            if self.fua { ", writes with FUA" } else { "" }
        ))
    }

    /// The writes in flight end first; a failure among them not reported
    /// yet is close's error, as a block device's close reports the last
    /// writeback error.
    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        self.quiesce_reads();
        self.settle_writes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::buffer::AlignedBuf;

    /// A disk in memory behind the command queue interface: commands
    /// complete in the order they were sent, on `wait`; `bad` blocks fail
    /// reads with a medium error naming the first bad block.
    #[derive(Debug)]
    struct MemoryDisk {
        data: Vec<u8>,
        block: u32,
        max_blocks: u32,
        buffers: Vec<AlignedBuf>,
        busy: Vec<Option<(Op, u64, u32)>>,
        order: VecDeque<usize>,
        bad: Vec<u64>,
        commands: usize,
    }

    impl MemoryDisk {
        fn new(data: Vec<u8>, slots: usize, bad: Vec<u64>) -> MemoryDisk {
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

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 509) as u8).collect()
    }

    fn end(data: Vec<u8>, bad: Vec<u64>) -> PassthroughEnd {
        PassthroughEnd::new(Box::new(MemoryDisk::new(data, 4, bad)), false, None)
    }

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
            e.settle().unwrap();
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

    #[test]
    fn a_large_piece_that_fails_fails_only_the_records_over_the_bad_block() {
        let data = pattern(64 * 512);
        let mut e = end(data.clone(), vec![9]);
        e.pipeline(Pipeline {
            chunk: 8192,
            depth: 1,
            total: None,
        });
        let mut buf = vec![0u8; 1024];
        let mut failed = Vec::new();
        for record in 0..32 {
            match e.read(&mut buf) {
                Ok(n) => {
                    assert_eq!(n, 1024);
                    assert_eq!(buf, data[record * 1024..(record + 1) * 1024]);
                }
                Err(_) => {
                    failed.push(record);
                    e.seek(Whence::Current(1024)).unwrap();
                }
            }
        }
        assert_eq!(failed, vec![4], "only the record holding block 9");
    }

    fn whole_pieces(e: &mut PassthroughEnd) {
        e.pipeline(Pipeline {
            chunk: 8192,
            depth: 4,
            total: None,
        });
    }

    #[test]
    fn whole_pieces_change_hands_and_are_not_reused_while_held() {
        let data = pattern(64 * 512);
        let mut e = end(data.clone(), vec![]);
        whole_pieces(&mut e);
        let mut held = Vec::new();
        for piece in 0..4 {
            let mut buf = AlignedBuf::new(8192).unwrap();
            let given = buf.as_slice().as_ptr();
            assert_eq!(e.read_exchange(&mut buf), Some(Ok(8192)));
            assert_ne!(buf.as_slice().as_ptr(), given, "piece {piece}: exchanged");
            assert_eq!(buf.len(), 8192);
            held.push(buf);
        }
        assert_eq!(e.read_exchange(&mut AlignedBuf::new(8192).unwrap()), None);
        // Every piece the engine holds still has its bytes: the slots
        // read on into the buffers they were given in exchange.
        for (piece, buf) in held.iter().enumerate() {
            assert_eq!(buf.as_slice(), &data[piece * 8192..(piece + 1) * 8192]);
        }
        // A read that is not one whole piece is copied.
        e.seek(Whence::Start(100)).unwrap();
        let mut buf = AlignedBuf::new(8192).unwrap();
        let given = buf.as_slice().as_ptr();
        assert_eq!(e.read_exchange(&mut buf), Some(Ok(8192)));
        assert_eq!(buf.as_slice().as_ptr(), given, "copied, not exchanged");
        assert_eq!(buf.as_slice(), &data[100..8292]);
        // Past the disk's end: read's business.
        e.seek(Whence::Start(60 * 512)).unwrap();
        assert_eq!(e.read_exchange(&mut buf), None);
    }

    #[test]
    fn a_failed_piece_read_whole_still_fails_only_its_own_record() {
        let data = pattern(64 * 512);
        let mut e = end(data.clone(), vec![9]);
        whole_pieces(&mut e);
        let mut buf = AlignedBuf::new(8192).unwrap();
        // Blocks 0-15: the piece fails (block 9); the read of it fails
        // with the block named, as read_exact found it.
        assert_eq!(e.read_exchange(&mut buf), Some(Err(Errno::IO)));
        assert_eq!(e.failed_at(), Some(9 * 512));
        // The engine then reads the records before it one by one.
        let mut record = [0u8; 4096];
        assert_eq!(e.read_at(&mut record, 0), Ok(4096));
        assert_eq!(record[..], data[..4096]);
        assert_eq!(e.read_at(&mut record, 4096), Err(Errno::IO));
        e.seek(Whence::Start(8192)).unwrap();
        assert_eq!(e.read_exchange(&mut buf), Some(Ok(8192)));
        assert_eq!(buf.as_slice(), &data[8192..16384]);
    }

    #[test]
    fn whole_buffers_are_written_behind_from_themselves() {
        let data = pattern(64 * 512);
        let mut e = end(vec![0; data.len()], vec![]);
        whole_pieces(&mut e);
        for piece in 0..4 {
            let mut buf = AlignedBuf::new(8192).unwrap();
            buf.as_mut_slice()
                .copy_from_slice(&data[piece * 8192..(piece + 1) * 8192]);
            let given = buf.as_slice().as_ptr();
            assert_eq!(e.write_exchange(&mut buf), Some(Ok(8192)));
            assert_ne!(
                buf.as_slice().as_ptr(),
                given,
                "the slot's buffer in its place"
            );
            assert_eq!(buf.len(), 8192);
            // The engine fills what it was given for its next write: not
            // what the write behind is sent from.
            buf.as_mut_slice().fill(0xaa);
        }
        // Not whole blocks, or more than a command: written as usual.
        let mut odd = AlignedBuf::new(1000).unwrap();
        assert_eq!(e.write_exchange(&mut odd), None);
        let mut big = AlignedBuf::new(16384).unwrap();
        assert_eq!(e.write_exchange(&mut big), None);
        e.settle().unwrap();
        assert_eq!(e.written_until(), Some(4 * 8192));
        let mut back = vec![0u8; data.len()];
        assert_eq!(e.read_at(&mut back, 0), Ok(data.len()));
        assert_eq!(back, data);
    }

    #[test]
    fn a_failed_write_behind_is_reported_later_with_what_was_stored() {
        #[derive(Debug)]
        struct FailingWrites(MemoryDisk, u64);
        impl CommandQueue for FailingWrites {
            fn interface(&self) -> Interface {
                self.0.interface()
            }
            fn geometry(&self) -> Geometry {
                self.0.geometry()
            }
            fn slots(&self) -> usize {
                self.0.slots()
            }
            fn describe(&self) -> String {
                self.0.describe()
            }
            fn buffer(&self, slot: usize) -> Option<&[u8]> {
                self.0.buffer(slot)
            }
            fn buffer_mut(&mut self, slot: usize) -> Option<&mut [u8]> {
                self.0.buffer_mut(slot)
            }
            fn submit(&mut self, s: usize, op: Op, lba: u64, n: u32) -> Result<(), CommandError> {
                self.0.submit(s, op, lba, n)
            }
            fn wait(&mut self) -> Option<(usize, Result<(), CommandError>)> {
                let slot = *self.0.order.front()?;
                let (_, lba, n) = self.0.busy[slot].unwrap();
                let done = self.0.wait()?;
                if (lba..lba + u64::from(n)).contains(&self.1) {
                    return Some((
                        slot,
                        Err(CommandError {
                            errno: Errno::IO,
                            cause: format!("medium error, write error at LBA {}", self.1),
                            bad_block: Some(self.1),
                        }),
                    ));
                }
                Some(done)
            }
            fn flush(&mut self) -> Result<(), CommandError> {
                Ok(())
            }
        }
        let disk = FailingWrites(MemoryDisk::new(vec![0; 64 * 512], 4, vec![]), 40);
        let mut e = PassthroughEnd::new(Box::new(disk), false, None);
        let block = [7u8; 4096];
        // Four slots: every write is taken, the failure is still in flight.
        for _ in 0..8 {
            assert_eq!(e.write(&block), Ok(4096));
        }
        assert_eq!(e.settle(), Err(Errno::IO));
        assert_eq!(
            e.take_detail().as_deref(),
            Some("medium error, write error at LBA 40")
        );
        assert_eq!(e.written_until(), Some(5 * 4096), "blocks 0-39 are stored");
        assert_eq!(e.settle(), Ok(()), "reported once");
        assert_eq!(
            e.write_at(&block, 0),
            Err(Errno::IO),
            "and every write after fails"
        );
    }
}
