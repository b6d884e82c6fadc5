//! The tests themselves, one module each, and the I/O loops they share.
//! A scenario decides what one pass does (which flags, which requests,
//! what is timed); the runner repeats it; the figures go into an
//! [`Outcome`] (`bench::results`), which the reports show.
//!
//! Every pass goes through the target's end, opened as the copy opens it
//! (`Target::end`), and what it does is decided by what that end says
//! it can do: O_DIRECT and the page cache where it is a descriptor's
//! storage, flushes and force unit access where it takes them, requests
//! in flight as many as it keeps. One request at a time is the end's own
//! call ([`transfer`]: pread and pwrite on a descriptor); several in
//! flight, or one on an end that carries requests otherwise (a server, a
//! disk's command queue), are kept by the engine's load
//! (`engine::load::Load`, [`in_flight`]), never by a queue of the
//! bench's own. Both notice an interruption, so a Ctrl-C ends the pass at
//! the next request.

pub mod latency;
pub mod qd;
pub mod seq;
pub mod sweep;
pub mod zones;

use std::time::{Duration, Instant};

use super::measure::{Sample, Stopwatch};
use super::results::Figure;
use super::target::Target;
use super::{interrupt, BenchError};
use crate::ends::transport;
use crate::ends::End;
use crate::engine::load::{Load, LoadError, Tally};
use crate::operands::IoFlags;
use crate::sys::buffer::AlignedBuf;

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

    /// The request an end is handed for it.
    pub fn request(self) -> transport::Op {
        match self {
            Op::Read => transport::Op::Read,
            Op::Write => transport::Op::Write,
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

pub const NO_DIRECT: &str = "the filesystem refuses O_DIRECT";

/// Why an end that is no descriptor's storage has no cached figure.
pub fn no_cache(target: &Target) -> &'static str {
    if target.can.served {
        "an NBD export has no page cache of ddx's: its reads all go to the server"
    } else {
        "a generic node's commands go to the disk: there is no page cache to read from"
    }
}

/// Why an end on a server has no O_DIRECT figure.
pub const SERVED_NO_DIRECT: &str =
    "O_DIRECT has no meaning over NBD (every request goes to the server)";

/// Why an end on a server has no buffered or synced write figures, nor
/// durable latency writes.
pub const SERVED_NO_SYNC_FLAGS: &str =
    "the page cache, O_DSYNC, O_SYNC and O_DIRECT have no meaning over NBD; the 'flush' mode \
     times an NBD flush after the writes";

/// The mode of a test that bypasses caches: O_DIRECT on a descriptor's
/// storage, plain requests on an end on a server, the disk's own
/// commands on an end that sends them.
pub fn uncached_mode(target: &Target) -> &'static str {
    if target.can.local_storage {
        "direct"
    } else if target.can.served {
        "nbd"
    } else {
        "passthrough"
    }
}

/// The mode of a figure measured again where the copy's end moves the
/// bytes through buffers of its own that fio cannot use (an sg node's
/// reserve buffers, mapped into ddx): the same requests in ddx's
/// buffers, which the driver copies, as fio's `sg` engine has it do. The
/// summary shows it beside its cell as the figure fio's options
/// reproduce.
pub const COPIED: &str = "passthrough+copied";

/// Whether `end` moves a request's bytes through buffers of its own
/// (`Requests::owns_buffers`: an sg node's mapped reserve buffers), so
/// that a [`COPIED`] figure is measured beside its figure.
pub fn owns_buffers(end: &dyn End) -> bool {
    end.capabilities().requests.owns_buffers
}

/// The end's buffers in a figure's note: mapped from the driver, or,
/// in [`COPIED`] mode, copied by it.
pub fn buffers_note(end: &dyn End, mode: &str) -> String {
    if mode == COPIED {
        ", in ddx's buffers, which the sg driver copies through pages it allocates for each \
         command (fio's sg engine's way)"
            .to_owned()
    } else if owns_buffers(end) {
        ", in the sg driver's reserve buffers mapped into ddx, one descriptor per command \
         (the way ddx copies: no copy in the kernel)"
            .to_owned()
    } else {
        String::new()
    }
}

/// The mode of a write that is durable when it completes: where the
/// end's commands carry force unit access, FUA; else O_DIRECT with
/// O_DSYNC.
pub fn durable_mode(target: &Target) -> &'static str {
    if target.can.fua {
        "passthrough+fua"
    } else {
        "direct+dsync"
    }
}

/// Whether one request at a time is the end's own call (pread and
/// pwrite on a descriptor, as dd and fio's `psync` make them), or one
/// request kept in flight by the load, as fio's engine for an end reached
/// otherwise (a server, a disk's commands) keeps its iodepth of 1.
pub fn one_by_call(target: &Target) -> bool {
    target.can.local_storage
}

/// `figure` as the target's requests one at a time make it: by the end's
/// own engine where it is no descriptor's (its commands rather than pread
/// and pwrite).
pub fn made_by(target: &Target, figure: Figure) -> Figure {
    match target.can.requests.via {
        "" => figure,
        _ if one_by_call(target) => figure,
        via => figure.by(via),
    }
}

/// Why `end` cannot keep `depth` requests in flight, where it keeps
/// fewer (the skip's words), from what it says of itself.
pub fn fewer_in_flight(target: &Target, end: &dyn End, depth: u32) -> Option<String> {
    let requests = end.capabilities().requests;
    if requests.most >= depth as usize {
        return None;
    }
    use crate::sys::passthrough::Interface;
    Some(match (target.interface, requests.via) {
        (Some(Interface::Bsg), _) => {
            "a bsg node runs one command at a time (SG_IO v4 waits for each)".to_owned()
        }
        (Some(Interface::ScsiGeneric), _) => format!(
            "the sg driver keeps at most {} commands in flight on one open node",
            requests.most
        ),
        (Some(_), _) => format!(
            "the node's command queue took only {} commands in flight",
            requests.most
        ),
        (None, "") => "io_uring refused by the kernel: no requests in flight".to_owned(),
        (None, via) => format!("{via} keeps at most {} requests in flight", requests.most),
    })
}

/// One request of `len` bytes at `offset` through the end's own call; a
/// short transfer is completed, end of file ends it early (returns what
/// was moved). Fails with [`BenchError::Interrupted`] once the bench was
/// interrupted.
pub fn transfer(
    target: &Target,
    end: &mut dyn End,
    buf: &mut [u8],
    op: Op,
    offset: u64,
) -> Result<usize, BenchError> {
    interrupt::check()?;
    let mut done = 0;
    while done < buf.len() {
        let at = offset + done as u64;
        let moved = match op {
            Op::Read => end.read_at(&mut buf[done..], at),
            Op::Write => end.write_at(&buf[done..], at),
        };
        let n = moved.map_err(|e| {
            let detail = end.take_detail().map(|d| format!(" ({d})"));
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

/// Run `stream` on `end`, one request at a time through its own calls,
/// with `buf`. Writes stamp each request with its offset so no two blocks
/// are identical (some devices deduplicate or compress).
pub fn sequential(
    target: &Target,
    end: &mut dyn End,
    buf: &mut AlignedBuf,
    stream: Stream,
) -> Result<Sample, BenchError> {
    let Stream {
        op,
        start,
        end: stop,
        block_size: bs,
        limit,
        timing,
    } = stream;
    let request = &mut buf.as_mut_slice()[..bs as usize];
    let mut latencies_ns = Vec::new();
    let watch = Stopwatch::start();
    let (mut offset, mut done, mut ios) = (start, 0u64, 0u64);
    while !limit.reached(done, ios, &watch) {
        if offset + bs > stop {
            offset = start;
        }
        if op == Op::Write && request.len() >= 8 {
            request[..8].copy_from_slice(&offset.to_le_bytes());
        }
        let began = (timing == Timing::EachRequest).then(Instant::now);
        let n = transfer(target, end, request, op, offset)?;
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

/// A pass with requests kept in flight: requests of the load's size at
/// `offsets` until `limit`.
pub struct Flight<'a> {
    pub op: Op,
    pub offsets: Offsets<'a>,
    pub limit: Limit,
    pub timing: Timing,
}

/// The engine's load of `op` requests of `block_size` bytes, `depth` in
/// flight, on `end`; a writer's buffers filled with incompressible bytes
/// ([`stamp_buffers`]).
pub fn load<'e>(
    target: &Target,
    end: &'e mut dyn End,
    op: Op,
    block_size: u64,
    depth: u32,
) -> Result<Load<'e>, BenchError> {
    let mut load = Load::new(end, op.request(), block_size as usize, depth as usize)
        .map_err(|fault| failed(target, op, None, fault))?;
    if op == Op::Write {
        stamp_buffers(&mut load);
    }
    Ok(load)
}

/// Run `flight` keeping the load's depth of requests in flight, then
/// wait for those still in flight. Each request is timed from its
/// submission to its completion where the flight asks. An interruption
/// stops the sending; the requests in flight are waited for before it is
/// reported, so no buffer is freed under the end.
pub fn in_flight(
    target: &Target,
    load: &mut Load<'_>,
    flight: Flight<'_>,
    block_size: u64,
) -> Result<Sample, BenchError> {
    let Flight {
        op,
        mut offsets,
        limit,
        timing,
    } = flight;
    let watch = Stopwatch::start();
    let mut cursor = match offsets {
        Offsets::Sequential { start, .. } => start,
        Offsets::Random { .. } => 0,
    };
    let stamp = 8.min(block_size as usize);
    let more = |tally: &Tally| {
        tally.sent * block_size < limit.bytes
            && !limit
                .time
                .is_some_and(|t| tally.done >= limit.min_ios && watch.elapsed() >= t)
            && !interrupt::pending()
    };
    let mut latencies = Vec::new();
    let ran = load.run(
        |tally, buf| {
            if !more(tally) {
                return None;
            }
            let at = offsets.next(&mut cursor, block_size);
            if op == Op::Write {
                buf[..stamp].copy_from_slice(&at.to_le_bytes()[..stamp]);
            }
            Some(at)
        },
        |done| {
            if timing == Timing::EachRequest {
                latencies.push(done.took.as_nanos() as u64);
            }
        },
    );
    let tally = ran.map_err(|LoadError { offset, fault, .. }| failed(target, op, offset, fault))?;
    interrupt::check()?;
    let mut sample = watch.stop(tally.bytes, tally.done);
    sample.latencies_ns = latencies;
    Ok(sample)
}

/// A request that failed, or a load that could not be made: where, and
/// the end's own words.
fn failed(target: &Target, op: Op, offset: Option<u64>, fault: transport::Fault) -> BenchError {
    let at = offset
        .map(|at| format!(" at offset {at}"))
        .unwrap_or_default();
    let context = format!("{} {}{at}", op.name(), target.path.display());
    match fault.words {
        Some(words) => BenchError::msg(format!(
            "{context}: {} ({words})",
            crate::sys::errno_text(fault.errno)
        )),
        None => BenchError::sys(context, fault.errno),
    }
}

/// Fill the load's buffers with incompressible bytes, one after another
/// from one seed, for writes.
pub fn stamp_buffers(load: &mut Load<'_>) {
    let mut rng = Rng::new(0x005e_eddd);
    for buf in load.buffers_mut() {
        for chunk in buf.chunks_mut(8) {
            let word = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
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
    let mut end = opened(target.end(Op::Write, IoFlags::empty(), 1)?);
    let bs = SEQ_BLOCK.min(target.len);
    let mut buf = data_buffer(bs)?;
    let sample = sequential(
        target,
        end.as_mut(),
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
            end.as_mut(),
            &mut buf.as_mut_slice()[..tail as usize],
            Op::Write,
            sample.bytes,
        )?;
    }
    end.sync(true)
        .map_err(|e| BenchError::sys(format!("fdatasync {}", target.path.display()), e))?;
    end.close()
        .map_err(|e| BenchError::sys(format!("close {}", target.path.display()), e))
}

/// An end opened without O_DIRECT, which nothing refuses.
fn opened(end: Option<Box<dyn End>>) -> Box<dyn End> {
    end.expect("O_DIRECT alone is refused")
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
