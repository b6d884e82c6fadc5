//! Queue depth: random 4 KiB O_DIRECT reads, then writes, with 1, 4, 16,
//! 32 and 64 requests in flight. A single dd-style reader only ever shows
//! the first figure; an SSD's rated IOPS live in the last ones. Depth 1 is
//! one request at a time through pread and pwrite, as dd and fio's `psync`
//! make them; the deeper ones keep the requests in flight through
//! io_uring, as fio's `io_uring` engine does. Where the kernel refuses
//! io_uring, depth 1 is still measured and the report says why the rest
//! is missing. Depths 32 and 1 are the summary's RND4K rows.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::fs::OFlags;

use super::{
    in_flight, open, ring, stamp_slots, transfer, Flight, Limit, Offsets, Op, Outcome, Port, Rng,
    Timing, NO_DIRECT,
};
use crate::bench::interrupt;
use crate::bench::measure::{Runner, Sample, Stopwatch};
use crate::bench::nbd_target::Connection;
use crate::bench::results::Figure;
use crate::bench::target::Target;
use crate::bench::BenchError;
use crate::sys::buffer::AlignedBuf;

pub const DEPTHS: [u32; 5] = [1, 4, 16, 32, 64];
const REQUEST: u64 = 4096;

/// Why an export's writes are not measured with several in flight.
const NBD_WRITES_ONE_AT_A_TIME: &str =
    "the bench's NBD connection sends one write at a time (seq-write measures them)";

pub fn run(runner: &mut Runner<'_>, out: &mut Outcome) -> Result<(), BenchError> {
    let (target, time_per_run) = (runner.target, runner.time_per_run);
    let request = REQUEST.max(target.direct_align());
    if target.nbd.is_some() {
        return run_export(runner, out, request);
    }
    for op in [Op::Read, Op::Write] {
        if op == Op::Write {
            if let Some(why) = &target.read_only {
                out.skip("qd-sweep", Some("direct"), why.clone())
                    .of_op("write");
                continue;
            }
        }
        let Some(fd) = open(target, op, OFlags::DIRECT)? else {
            out.skip("qd-sweep", Some("direct"), NO_DIRECT)
                .of_op(op.name());
            continue;
        };
        let mut buf = super::data_buffer(request)?;
        for qd in DEPTHS {
            let figure = Figure::new("qd-sweep", "direct", op.name(), "random", request);
            let figure = match qd {
                1 => figure,
                _ => figure.in_flight(qd, "io_uring"),
            };
            if out.reuse(figure) {
                continue;
            }
            let mut rng = Rng::new(0x9d ^ u64::from(qd) ^ (u64::from(op == Op::Write) << 8));
            let label = format!("qd-sweep {} depth {qd}", op.name());
            let samples = if qd == 1 {
                runner.repeat(&label, false, |pass| {
                    let time = pass.time(time_per_run);
                    one_at_a_time(target, &fd, &mut buf, op, &mut rng, time)
                })?
            } else {
                let mut ring = match ring(qd, request) {
                    Ok(ring) => ring,
                    Err(reason) => {
                        out.skip("qd-sweep", Some("direct"), reason)
                            .of_op(op.name());
                        break;
                    }
                };
                if op == Op::Write {
                    stamp_slots(&mut ring);
                }
                runner.repeat(&label, false, |pass| {
                    let flight = Flight {
                        op,
                        block_size: request,
                        offsets: Offsets::Random {
                            rng: &mut rng,
                            end: target.len,
                        },
                        limit: timed(pass.time(time_per_run)),
                        timing: Timing::EachRequest,
                    };
                    in_flight(target, fd.as_fd(), &mut ring, flight)
                })?
            };
            out.push(figure, &samples);
        }
    }
    Ok(())
}

/// A pass bounded by time alone.
fn timed(time: Duration) -> Limit {
    Limit {
        bytes: u64::MAX,
        time: Some(time),
        min_ios: 4,
    }
}

/// Depth 1: one random request at a time for `time`, each timed.
fn one_at_a_time(
    target: &Target,
    fd: &std::os::fd::OwnedFd,
    buf: &mut AlignedBuf,
    op: Op,
    rng: &mut Rng,
    time: Duration,
) -> Result<Sample, BenchError> {
    let request = buf.as_slice().len() as u64;
    let watch = Stopwatch::start();
    let mut latencies = Vec::new();
    while watch.elapsed() < time || latencies.len() < 4 {
        let at = rng.offset(target.len, request, request);
        if op == Op::Write && request >= 8 {
            buf.as_mut_slice()[..8].copy_from_slice(&at.to_le_bytes());
        }
        let started = Instant::now();
        let mut port = Port::Fd(fd.as_fd());
        transfer(target, &mut port, buf.as_mut_slice(), op, at)?;
        latencies.push(started.elapsed().as_nanos() as u64);
    }
    let ios = latencies.len() as u64;
    let mut sample = watch.stop(ios * request, ios);
    sample.latencies_ns = latencies;
    Ok(sample)
}

/// The sweep on an export: the depths kept in flight on one connection
/// through libnbd's asynchronous reads (the copy's NBD end), as fio's
/// `nbd` engine keeps its iodepth.
fn run_export(runner: &mut Runner<'_>, out: &mut Outcome, request: u64) -> Result<(), BenchError> {
    let (target, time_per_run) = (runner.target, runner.time_per_run);
    let Some(mut conn) = target.connect(false)? else {
        return Ok(());
    };
    for qd in DEPTHS {
        let figure = Figure::new("qd-sweep", "nbd", "read", "random", request);
        let figure = figure.in_flight(qd, "libnbd");
        if out.reuse(figure) {
            continue;
        }
        let mut rng = Rng::new(0x9d ^ u64::from(qd));
        let samples = runner.repeat(&format!("qd-sweep depth {qd}"), false, |pass| {
            let offsets = Offsets::Random {
                rng: &mut rng,
                end: target.len,
            };
            let limit = timed(pass.time(time_per_run));
            export_in_flight(&mut conn, qd, request, offsets, limit)
        })?;
        out.push(figure, &samples);
    }
    out.skip("qd-sweep", Some("nbd"), NBD_WRITES_ONE_AT_A_TIME)
        .of_op("write");
    Ok(())
}

/// Keep `depth` reads of `request` bytes in flight on `conn` at
/// `offsets` until `limit`, then drain; each latency is from sending a
/// read to its completion. An interruption stops the sending; the reads
/// in flight are drained first (the connection owns their buffers until
/// then).
pub fn export_in_flight(
    conn: &mut Connection,
    depth: u32,
    request: u64,
    mut offsets: Offsets<'_>,
    limit: Limit,
) -> Result<Sample, BenchError> {
    let watch = Stopwatch::start();
    let mut cursor = match offsets {
        Offsets::Sequential { start, .. } => start,
        Offsets::Random { .. } => 0,
    };
    let mut sent_bytes = 0u64;
    let mut latencies: Vec<u64> = Vec::new();
    let more = |sent: u64, ios: usize| {
        sent < limit.bytes
            && !limit
                .time
                .is_some_and(|t| ios as u64 >= limit.min_ios && watch.elapsed() >= t)
            && !interrupt::pending()
    };
    let mut sent = std::collections::HashMap::with_capacity(depth as usize);
    for _ in 0..depth {
        if !more(sent_bytes, 0) {
            break;
        }
        let at = offsets.next(&mut cursor, request);
        sent.insert(conn.start_read(request as usize, at)?, Instant::now());
        sent_bytes += request;
    }
    while !sent.is_empty() {
        let done = conn.next_read()?;
        let started = sent.remove(&done).unwrap_or_else(Instant::now);
        latencies.push(started.elapsed().as_nanos() as u64);
        if more(sent_bytes, latencies.len()) {
            let at = offsets.next(&mut cursor, request);
            sent.insert(conn.start_read(request as usize, at)?, Instant::now());
            sent_bytes += request;
        }
    }
    interrupt::check()?;
    let ios = latencies.len() as u64;
    let mut sample = watch.stop(ios * request, ios);
    sample.latencies_ns = latencies;
    Ok(sample)
}
