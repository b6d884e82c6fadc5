//! Queue depth: random 4 KiB O_DIRECT reads, then writes, with 1, 4, 16,
//! 32 and 64 requests in flight. A single dd-style reader only ever shows
//! the first figure; an SSD's rated IOPS live in the last ones. Depth 1 is
//! one request at a time through pread and pwrite, as dd and fio's `psync`
//! make them; the deeper ones keep the requests in flight through the
//! engine's load, which a file or block device opened with O_DIRECT
//! carries through io_uring, as fio's `io_uring` engine does. Where the
//! end keeps fewer in flight (the kernel refused io_uring), depth 1 is
//! still measured and the report says why the rest is missing. Depths 32
//! and 1 are the summary's RND4K rows.
//!
//! On an end that is no descriptor's storage every depth, 1 included,
//! is kept in flight by the load, as fio's engine for it keeps its
//! iodepth: an export's reads over one connection (libnbd, fio's `nbd`),
//! a disk's commands on its generic node (fio's `sg` and `io_uring_cmd`),
//! up to what the node keeps (the sg driver's 16, one on bsg).

use std::time::Duration;

use crate::operands::IoFlags;

use super::{
    buffers_note, in_flight, load, one_by_call, opened, owns_buffers, transfer, uncached_mode,
    Flight, Limit, Offsets, Op, Outcome, Rng, Timing, COPIED, NO_DIRECT,
};
use crate::bench::measure::{Runner, Sample, Stopwatch};
use crate::bench::results::Figure;
use crate::bench::target::Target;
use crate::bench::BenchError;
use crate::ends::End;
use crate::sys::buffer::AlignedBuf;

pub const DEPTHS: [u32; 5] = [1, 4, 16, 32, 64];
/// The depths the summary's RND rows show.
const SUMMARY_DEPTHS: [u32; 2] = [32, 1];
const REQUEST: u64 = 4096;

/// Why an end on a server has no random writes here.
const SERVED_WRITES_ONE_AT_A_TIME: &str =
    "the bench's NBD connection sends one write at a time (seq-write measures them)";

pub fn run(runner: &mut Runner<'_>, out: &mut Outcome) -> Result<(), BenchError> {
    let target = runner.target;
    let mode = uncached_mode(target);
    let deepest = DEPTHS[DEPTHS.len() - 1];
    for op in [Op::Read, Op::Write] {
        if op == Op::Write {
            if target.can.served {
                out.skip("qd-sweep", Some(mode), SERVED_WRITES_ONE_AT_A_TIME)
                    .of_op("write");
                continue;
            }
            if let Some(why) = &target.read_only {
                out.skip("qd-sweep", Some(mode), why.clone()).of_op("write");
                continue;
            }
        }
        let Some(mut end) = target.end(op, IoFlags::DIRECT, deepest as usize)? else {
            out.skip("qd-sweep", Some(mode), NO_DIRECT).of_op(op.name());
            continue;
        };
        for qd in DEPTHS {
            depth(runner, out, (end.as_mut(), mode), op, qd)?;
        }
        // The summary's depths again with the driver copying each buffer,
        // where the end maps its own (fio's sg engine's way).
        if owns_buffers(end.as_ref()) {
            drop(end);
            let mut end = opened(target.end_copied(op, IoFlags::DIRECT, deepest as usize)?);
            for qd in DEPTHS.into_iter().filter(|qd| SUMMARY_DEPTHS.contains(qd)) {
                depth(runner, out, (end.as_mut(), COPIED), op, qd)?;
            }
        }
    }
    Ok(())
}

/// Random `op` requests with `qd` in flight on `end`, pushed as a
/// figure of `mode`; skipped with the reason where the end keeps fewer.
fn depth(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    (end, mode): (&mut dyn End, &'static str),
    op: Op,
    qd: u32,
) -> Result<(), BenchError> {
    let (target, time_per_run) = (runner.target, runner.time_per_run);
    let request = REQUEST.max(target.direct_align());
    let engine = end.capabilities().requests.via;
    let figure = Figure::new("qd-sweep", mode, op.name(), "random", request);
    let by_call = qd == 1 && one_by_call(target);
    let figure = match by_call {
        true => figure,
        false => figure.in_flight(qd, engine),
    };
    if out.reuse(figure) {
        return Ok(());
    }
    if !by_call {
        if let Some(why) = super::fewer_in_flight(target, end, qd) {
            out.skip("qd-sweep", Some(mode), why)
                .of_op(op.name())
                .at_depth(qd);
            return Ok(());
        }
    }
    let mut rng = Rng::new(0x9d ^ u64::from(qd) ^ (u64::from(op == Op::Write) << 8));
    let label = format!("qd-sweep {} depth {qd}", op.name());
    let samples = if by_call {
        let mut buf = super::data_buffer(request)?;
        runner.repeat(&label, false, |pass| {
            let time = pass.time(time_per_run);
            one_at_a_time(target, end, &mut buf, op, &mut rng, time)
        })?
    } else {
        let mut load = load(target, end, op, request, qd)?;
        runner.repeat(&label, false, |pass| {
            let flight = Flight {
                op,
                offsets: Offsets::Random {
                    rng: &mut rng,
                    end: target.len,
                },
                limit: timed(pass.time(time_per_run)),
                timing: Timing::EachRequest,
            };
            in_flight(target, &mut load, flight, request)
        })?
    };
    let note = match mode {
        COPIED => Some(buffers_note(end, mode).trim_start_matches(", ").to_owned()),
        _ => None,
    };
    out.push_noted(figure, &samples, note);
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

/// Depth 1 on a descriptor: one random request at a time for `time`,
/// each timed.
fn one_at_a_time(
    target: &Target,
    end: &mut dyn End,
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
        let started = std::time::Instant::now();
        transfer(target, end, buf.as_mut_slice(), op, at)?;
        latencies.push(started.elapsed().as_nanos() as u64);
    }
    let ios = latencies.len() as u64;
    let mut sample = watch.stop(ios * request, ios);
    sample.latencies_ns = latencies;
    Ok(sample)
}
