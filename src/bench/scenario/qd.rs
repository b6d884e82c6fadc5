//! Queue depth: random 4 KiB O_DIRECT reads with 1, 4, 16, 32 and 64
//! requests in flight through io_uring. A single dd-style reader only ever
//! shows the first figure; an SSD's rated IOPS live in the last ones.
//! Where the kernel refuses io_uring, queue depth 1 is measured with pread
//! and the report says why the rest is missing.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::fs::OFlags;

use super::{open, transfer, Op, Outcome, Port, Rng, NO_DIRECT};
use crate::bench::interrupt;
use crate::bench::measure::{Pass, Runner, Sample, Stopwatch};
use crate::bench::nbd_target::Connection;
use crate::bench::results::{Figure, Measure};
use crate::bench::BenchError;
use crate::sys::ring::Ring;

pub const DEPTHS: [u32; 5] = [1, 4, 16, 32, 64];
const REQUEST: u64 = 4096;

pub fn run(runner: &mut Runner<'_>, out: &mut Outcome) -> Result<(), BenchError> {
    let (target, time_per_run) = (runner.target, runner.time_per_run);
    let request = REQUEST.max(target.direct_align());
    if target.nbd.is_some() {
        return run_export(runner, out, request);
    }
    let Some(fd) = open(target, Op::Read, OFlags::DIRECT)? else {
        out.skip("qd-sweep", None, NO_DIRECT);
        return Ok(());
    };
    let figure = |qd| figure("direct", request, qd);
    let time_for = |pass: Pass| pass.time(time_per_run);

    for qd in DEPTHS {
        let mut ring = match Ring::new(qd as usize, request as usize) {
            Ok(ring) => ring,
            Err(errno) => {
                let reason = format!(
                    "io_uring refused by the kernel ({}); queue depth 1 measured with pread instead",
                    crate::sys::errno_text(errno)
                );
                let mut buf = super::data_buffer(request)?;
                let mut rng = Rng::new(0x9d);
                let samples = runner.repeat("qd-sweep depth 1 (pread)", false, |pass| {
                    let time = time_for(pass);
                    let watch = Stopwatch::start();
                    let mut latencies = Vec::new();
                    while watch.elapsed() < time || latencies.len() < 4 {
                        let at = rng.offset(target.len, request, request);
                        let started = Instant::now();
                        let mut port = Port::Fd(fd.as_fd());
                        transfer(target, &mut port, buf.as_mut_slice(), Op::Read, at)?;
                        latencies.push(started.elapsed().as_nanos() as u64);
                    }
                    let ios = latencies.len() as u64;
                    let mut sample = watch.stop(ios * request, ios);
                    sample.latencies_ns = latencies;
                    Ok(sample)
                })?;
                out.push_noted(figure(1), &samples, Some(reason.clone()));
                out.skip("qd-sweep", Some("direct"), reason);
                return Ok(());
            }
        };
        let mut rng = Rng::new(0x9d ^ u64::from(qd));
        let samples = runner.repeat(&format!("qd-sweep depth {qd}"), false, |pass| {
            in_flight(target, &fd, &mut ring, &mut rng, request, time_for(pass))
        })?;
        out.push(figure(qd), &samples);
    }
    Ok(())
}

fn figure(mode: &'static str, request: u64, qd: u32) -> Figure {
    Figure {
        test: "qd-sweep",
        mode,
        op: "read",
        pattern: "random",
        block_size: request,
        queue_depth: qd,
        offset: None,
        measure: Measure::Run,
    }
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
        let mut rng = Rng::new(0x9d ^ u64::from(qd));
        let samples = runner.repeat(&format!("qd-sweep depth {qd}"), false, |pass| {
            export_in_flight(
                target,
                &mut conn,
                &mut rng,
                qd,
                request,
                pass.time(time_per_run),
            )
        })?;
        out.push(figure("nbd", request, qd), &samples);
    }
    Ok(())
}

/// Keep `depth` random reads in flight on `conn` for `time`, then drain;
/// each latency is from sending a read to its completion. An
/// interruption stops the sending; the reads in flight are drained first
/// (the connection owns their buffers until then).
fn export_in_flight(
    target: &crate::bench::target::Target,
    conn: &mut Connection,
    rng: &mut Rng,
    depth: u32,
    request: u64,
    time: Duration,
) -> Result<Sample, BenchError> {
    let watch = Stopwatch::start();
    let mut sent = std::collections::HashMap::with_capacity(depth as usize);
    for _ in 0..depth {
        let at = rng.offset(target.len, request, request);
        sent.insert(conn.start_read(request as usize, at)?, Instant::now());
    }
    let mut latencies = Vec::new();
    while !sent.is_empty() {
        let done = conn.next_read()?;
        let started = sent.remove(&done).unwrap_or_else(Instant::now);
        latencies.push(started.elapsed().as_nanos() as u64);
        if watch.elapsed() < time && !interrupt::pending() {
            let at = rng.offset(target.len, request, request);
            sent.insert(conn.start_read(request as usize, at)?, Instant::now());
        }
    }
    interrupt::check()?;
    let ios = latencies.len() as u64;
    let mut sample = watch.stop(ios * request, ios);
    sample.latencies_ns = latencies;
    Ok(sample)
}

/// Keep every slot of `ring` busy with random reads for `time`, then
/// drain; each request's latency is submission to completion. An
/// interruption stops the submitting; the reads in flight are drained
/// before it is reported, so no buffer is freed under the kernel.
fn in_flight(
    target: &crate::bench::target::Target,
    fd: &std::os::fd::OwnedFd,
    ring: &mut Ring,
    rng: &mut Rng,
    request: u64,
    time: Duration,
) -> Result<Sample, BenchError> {
    let failed = |what: &str, e| BenchError::sys(format!("{what} {}", target.path.display()), e);
    let watch = Stopwatch::start();
    for slot in 0..ring.slots() {
        let at = rng.offset(target.len, request, request);
        ring.read(fd.as_fd(), slot, at, 0..request as usize)
            .map_err(|e| failed("io_uring read of", e))?;
    }
    let mut latencies = Vec::new();
    let mut bytes = 0u64;
    while let Some(done) = ring.wait() {
        let done = done.map_err(|e| failed("waiting for io_uring reads of", e))?;
        latencies.push(done.submitted.elapsed().as_nanos() as u64);
        bytes += done.result.map_err(|e| failed("reading", e))? as u64;
        if watch.elapsed() < time && !interrupt::pending() {
            let at = rng.offset(target.len, request, request);
            ring.read(fd.as_fd(), done.slot, at, 0..request as usize)
                .map_err(|e| failed("io_uring read of", e))?;
        }
    }
    interrupt::check()?;
    let ios = latencies.len() as u64;
    let mut sample = watch.stop(bytes, ios);
    sample.latencies_ns = latencies;
    Ok(sample)
}
