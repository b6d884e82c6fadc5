//! The tests themselves, one module each, and the I/O loops they share.
//! A scenario decides what one pass does (which flags, which requests,
//! what is timed); the runner repeats it; the figures go into an
//! [`Outcome`] (`bench::results`), which the reports show. Every request
//! goes through [`transfer`], which also notices an interruption, so a
//! Ctrl-C ends the pass at the next request.

pub mod latency;
pub mod qd;
pub mod seq;
pub mod sweep;
pub mod zones;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::fs::OFlags;
use rustix::io::Errno;

use super::measure::{Sample, Stopwatch};
use super::nbd_target::Connection;
use super::target::Target;
use super::{interrupt, BenchError};
use crate::ends::End;
use crate::sys::buffer::AlignedBuf;
use crate::sys::file;
use crate::sys::ring::Ring;

pub use super::results::Outcome;

/// Sequential tests move data in 1 MiB requests: large enough for any
/// disk to stream, and what people compare with (dd bs=1M, fio bs=1M).
pub const SEQ_BLOCK: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

/// When a pass stops: after `bytes`, or once `time` has passed and at
/// least `min_ios` requests were made (so a slow large request still
/// counts several times).
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub bytes: u64,
    pub time: Option<Duration>,
    pub min_ios: u64,
}

impl Limit {
    pub fn bytes(bytes: u64) -> Limit {
        Limit {
            bytes,
            time: None,
            min_ios: 0,
        }
    }

    fn reached(&self, done: u64, ios: u64, watch: &Stopwatch) -> bool {
        done >= self.bytes
            || self
                .time
                .is_some_and(|t| ios >= self.min_ios && watch.elapsed() >= t)
    }
}

/// Open for `op` with `extra` flags; Ok(None) when the filesystem refuses
/// O_DIRECT (tmpfs, some FUSE filesystems), so the test can be skipped
/// with a reason instead of failing the bench.
pub fn open(target: &Target, op: Op, extra: OFlags) -> Result<Option<OwnedFd>, BenchError> {
    let opened = match op {
        Op::Read => target.open_read(extra),
        Op::Write => target.open_write(extra),
    };
    match opened {
        Err(BenchError::Sys {
            errno: Errno::INVAL,
            ..
        }) if extra.contains(OFlags::DIRECT) => Ok(None),
        other => other.map(Some),
    }
}

pub const NO_DIRECT: &str = "the filesystem refuses O_DIRECT";
/// The target opened for one scenario: a descriptor, or a connection of
/// its own to an export.
pub enum Opened {
    Fd(OwnedFd),
    Nbd(Box<Connection>),
}

impl Opened {
    pub fn port(&mut self) -> Port<'_> {
        match self {
            Opened::Fd(fd) => Port::Fd(AsFd::as_fd(&*fd)),
            Opened::Nbd(conn) => Port::End(conn.end()),
        }
    }
}

/// [`open`], or for an export a connection (which has no open flags: an
/// export's requests all go to the server, as O_DIRECT's go to the disk).
pub fn open_port(target: &Target, op: Op, extra: OFlags) -> Result<Option<Opened>, BenchError> {
    if let Some(conn) = target.connect(op == Op::Write)? {
        return Ok(Some(Opened::Nbd(Box::new(conn))));
    }
    Ok(open(target, op, extra)?.map(Opened::Fd))
}

/// The mode of a test that bypasses caches: O_DIRECT on a file or device,
/// plain NBD requests on an export.
pub fn uncached_mode(target: &Target) -> &'static str {
    if target.nbd.is_some() {
        "nbd"
    } else {
        "direct"
    }
}

/// Where a pass's requests go: a descriptor (a file, a block device) or
/// an end that is reached otherwise (an NBD export, through the copy's
/// NBD end), so that one loop measures both the same way.
pub enum Port<'a> {
    Fd(BorrowedFd<'a>),
    End(&'a mut dyn End),
}

/// One request of `len` bytes at `offset`; a short transfer is completed,
/// end of file ends it early (returns what was moved). Fails with
/// [`BenchError::Interrupted`] once the bench was interrupted.
pub fn transfer(
    target: &Target,
    port: &mut Port<'_>,
    buf: &mut [u8],
    op: Op,
    offset: u64,
) -> Result<usize, BenchError> {
    interrupt::check()?;
    let mut done = 0;
    while done < buf.len() {
        let at = offset + done as u64;
        let moved = match (&mut *port, op) {
            (Port::Fd(fd), Op::Read) => file::read_at(*fd, &mut buf[done..], at),
            (Port::Fd(fd), Op::Write) => file::write_at(*fd, &buf[done..], at),
            (Port::End(end), Op::Read) => end.read_at(&mut buf[done..], at),
            (Port::End(end), Op::Write) => end.write_at(&buf[done..], at),
        };
        let n = moved.map_err(|e| {
            let detail = match port {
                Port::End(end) => end.take_detail().map(|d| format!(" ({d})")),
                Port::Fd(_) => None,
            };
            BenchError::sys(
                format!(
                    "{} {} at offset {at}{}",
                    op.name(),
                    target.path.display(),
                    detail.unwrap_or_default()
                ),
                e,
            )
        })?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// Whether [`sequential`] times each request (the block-size rule's
/// measure needs the typical request's time; the other tests do not pay
/// for a clock read per request they would not report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    Untimed,
    EachRequest,
}

/// One sequential pass: requests of `block_size` bytes from `start`,
/// wrapping at `end`, until `limit`.
#[derive(Debug, Clone, Copy)]
pub struct Stream {
    pub op: Op,
    pub start: u64,
    pub end: u64,
    pub block_size: u64,
    pub limit: Limit,
    pub timing: Timing,
}

/// Run `stream` on `port` with `buf`. Writes stamp each request with its
/// offset so no two blocks are identical (some devices deduplicate or
/// compress).
pub fn sequential(
    target: &Target,
    port: &mut Port<'_>,
    buf: &mut AlignedBuf,
    stream: Stream,
) -> Result<Sample, BenchError> {
    let Stream {
        op,
        start,
        end,
        block_size: bs,
        limit,
        timing,
    } = stream;
    let request = &mut buf.as_mut_slice()[..bs as usize];
    let mut latencies_ns = Vec::new();
    let watch = Stopwatch::start();
    let (mut offset, mut done, mut ios) = (start, 0u64, 0u64);
    while !limit.reached(done, ios, &watch) {
        if offset + bs > end {
            offset = start;
        }
        if op == Op::Write && request.len() >= 8 {
            request[..8].copy_from_slice(&offset.to_le_bytes());
        }
        let began = (timing == Timing::EachRequest).then(Instant::now);
        let n = transfer(target, port, request, op, offset)?;
        if let Some(began) = began {
            latencies_ns.push(began.elapsed().as_nanos() as u64);
        }
        if n == 0 {
            break;
        }
        done += n as u64;
        ios += 1;
        offset += n as u64;
    }
    let mut sample = watch.stop(done, ios);
    sample.latencies_ns = latencies_ns;
    Ok(sample)
}

/// Where the requests of a pass with several in flight go.
pub enum Offsets<'a> {
    /// One after another from `start`, wrapping at `end`.
    Sequential { start: u64, end: u64 },
    /// At random multiples of the request size below `end`, each drawn
    /// afresh (fio's `norandommap`).
    Random { rng: &'a mut Rng, end: u64 },
}

impl Offsets<'_> {
    fn next(&mut self, at: &mut u64, len: u64) -> u64 {
        match self {
            Offsets::Sequential { start, end } => {
                if *at + len > *end {
                    *at = *start;
                }
                let offset = *at;
                *at += len;
                offset
            }
            Offsets::Random { rng, end } => rng.offset(*end, len, len),
        }
    }
}

/// A pass with several requests in flight: `op` requests of `block_size`
/// bytes at `offsets` until `limit`.
pub struct Flight<'a> {
    pub op: Op,
    pub block_size: u64,
    pub offsets: Offsets<'a>,
    pub limit: Limit,
    pub timing: Timing,
}

/// Run `flight` keeping every slot of `ring` busy (each slot's buffer is
/// a request's; a write's is filled by [`stamp_slots`] first), then drain
/// the requests in flight. Each request is timed from its submission to
/// its completion where the flight asks. An interruption stops the
/// sending; the requests in flight are drained before it is reported, so
/// no buffer is freed under the kernel.
pub fn in_flight(
    target: &Target,
    fd: BorrowedFd<'_>,
    ring: &mut Ring,
    flight: Flight<'_>,
) -> Result<Sample, BenchError> {
    let Flight {
        op,
        block_size,
        mut offsets,
        limit,
        timing,
    } = flight;
    let failed = |what: &str, e| {
        BenchError::sys(
            format!("{what} {} through io_uring", target.path.display()),
            e,
        )
    };
    let len = block_size as usize;
    let watch = Stopwatch::start();
    let (mut cursor, mut sent, mut done, mut ios) = (0u64, 0u64, 0u64, 0u64);
    if let Offsets::Sequential { start, .. } = offsets {
        cursor = start;
    }
    let mut latencies = Vec::new();
    let mut send = |ring: &mut Ring, slot: usize, sent: &mut u64| {
        let at = offsets.next(&mut cursor, block_size);
        let queued = match op {
            Op::Read => ring.read(fd, slot, at, 0..len),
            Op::Write => {
                if let Some(buf) = ring.buffer_mut(slot) {
                    buf[..8.min(len)].copy_from_slice(&at.to_le_bytes()[..8.min(len)]);
                }
                ring.write(fd, slot, at, 0..len)
            }
        };
        *sent += block_size;
        queued.map_err(|e| failed(&format!("queueing a {} of", op.name()), e))
    };
    let more = |sent: u64, ios: u64| {
        sent < limit.bytes
            && !limit
                .time
                .is_some_and(|t| ios >= limit.min_ios && watch.elapsed() >= t)
            && !interrupt::pending()
    };
    for slot in 0..ring.slots() {
        if !more(sent, 0) {
            break;
        }
        send(ring, slot, &mut sent)?;
    }
    while let Some(completion) = ring.wait() {
        let completion = completion.map_err(|e| failed("waiting for", e))?;
        if timing == Timing::EachRequest {
            latencies.push(completion.submitted.elapsed().as_nanos() as u64);
        }
        done += completion
            .result
            .map_err(|e| failed(&format!("{}ing", op.name()), e))? as u64;
        ios += 1;
        if more(sent, ios) {
            send(ring, completion.slot, &mut sent)?;
        }
    }
    interrupt::check()?;
    let mut sample = watch.stop(done, ios);
    sample.latencies_ns = latencies;
    Ok(sample)
}

/// Fill every slot of `ring` with incompressible bytes, for writes.
pub fn stamp_slots(ring: &mut Ring) {
    let mut rng = Rng::new(0x005e_eddd);
    for slot in 0..ring.slots() {
        if let Some(buf) = ring.buffer_mut(slot) {
            for chunk in buf.chunks_mut(8) {
                let word = rng.next_u64().to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
        }
    }
}

/// A ring of `depth` slots of `block_size` bytes, or why the kernel
/// refused it, in a skip's words.
pub fn ring(depth: u32, block_size: u64) -> Result<Ring, String> {
    Ring::new(depth as usize, block_size as usize).map_err(|errno| {
        format!(
            "io_uring refused by the kernel ({}): no requests in flight",
            crate::sys::errno_text(errno)
        )
    })
}

/// A buffer of `len` bytes (page-aligned, fit for O_DIRECT) filled with
/// incompressible bytes.
pub fn data_buffer(len: u64) -> Result<AlignedBuf, BenchError> {
    let mut buf = AlignedBuf::new(len as usize)
        .map_err(|e| BenchError::sys(format!("allocating {len} bytes"), e))?;
    let mut rng = Rng::new(0x005e_eddd);
    for chunk in buf.as_mut_slice().chunks_mut(8) {
        let word = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    Ok(buf)
}

/// Write the working set of a file ddx created, so reads read real data
/// (a sparse file reads as zeros from no disk at all).
pub fn fill(target: &Target, status: &super::progress::Status) -> Result<(), BenchError> {
    status.show(&format!(
        "preparing {} of data in {}",
        crate::text::human::size_text(target.len),
        target.path.display()
    ));
    let fd = target.open_write(OFlags::empty())?;
    let bs = SEQ_BLOCK.min(target.len);
    let mut buf = data_buffer(bs)?;
    let sample = sequential(
        target,
        &mut Port::Fd(fd.as_fd()),
        &mut buf,
        Stream {
            op: Op::Write,
            start: 0,
            end: target.len,
            block_size: bs,
            limit: Limit::bytes(target.len - target.len % bs),
            timing: Timing::Untimed,
        },
    )?;
    let tail = target.len - sample.bytes;
    if tail > 0 {
        transfer(
            target,
            &mut Port::Fd(fd.as_fd()),
            &mut buf.as_mut_slice()[..tail as usize],
            Op::Write,
            sample.bytes,
        )?;
    }
    file::fdatasync(fd.as_fd())
        .map_err(|e| BenchError::sys(format!("fdatasync {}", target.path.display()), e))
}

/// xorshift64*: offsets and fill bytes only need to look random to the
/// disk, not to a statistician.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A random multiple of `align` with `at + len <= end`.
    pub fn offset(&mut self, end: u64, len: u64, align: u64) -> u64 {
        let slots = (end.saturating_sub(len) / align) + 1;
        (self.next_u64() % slots) * align
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_offsets_stay_aligned_and_inside() {
        let mut rng = Rng::new(7);
        for _ in 0..10_000 {
            let at = rng.offset(1 << 20, 4096, 4096);
            assert_eq!(at % 4096, 0);
            assert!(at + 4096 <= 1 << 20);
        }
        // One slot only.
        assert_eq!(rng.offset(4096, 4096, 4096), 0);
    }
}
