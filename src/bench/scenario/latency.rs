//! Latency: N small synchronous requests, one at a time, each timed. Writes
//! are O_DIRECT+O_DSYNC (every one must reach stable storage before the
//! next starts, what a database's commit waits for), sequential like fio's
//! `rw=write`; reads are O_DIRECT at random offsets, so no read-ahead in
//! the drive answers them. On a disk's generic node the same requests
//! are its commands, the writes with force unit access, which is what
//! O_DSYNC asks of the block device. Every sample is kept: percentiles
//! come from all of them, never from averages of averages.

use std::time::Instant;

use super::{transfer, Op, Outcome, Rng, NO_DIRECT};
use crate::bench::measure::{Pass, Runner, Stopwatch};
use crate::bench::results::Figure;
use crate::bench::target::Target;
use crate::bench::BenchError;
use crate::operands::IoFlags;

/// Whether `--latency-bs` fits the target: checked before anything is
/// measured, so a bad value fails in a second, not after the other tests.
pub fn check_block_size(target: &Target, bs: u64) -> Result<(), BenchError> {
    let align = target.direct_align();
    if bs % align != 0 || bs > target.len {
        return Err(BenchError::msg(format!(
            "invalid argument '{bs}' for '--latency-bs': a multiple of {align} (the target's \
             O_DIRECT alignment) no larger than the working set ({} bytes)",
            target.len
        )));
    }
    Ok(())
}

pub fn run(
    runner: &mut Runner<'_>,
    count: u32,
    bs: u64,
    out: &mut Outcome,
) -> Result<(), BenchError> {
    let target = runner.target;
    let align = target.direct_align();
    check_block_size(target, bs)?;
    let mut buf = super::data_buffer(bs)?;
    for op in [Op::Write, Op::Read] {
        let (extra, mode, pattern) = match op {
            Op::Write => (
                IoFlags::DIRECT | IoFlags::DSYNC,
                super::durable_mode(target),
                "sequential",
            ),
            Op::Read => (IoFlags::DIRECT, super::uncached_mode(target), "random"),
        };
        if op == Op::Write {
            if target.can.served {
                // What a commit waits for is a write made durable; a
                // server's write is only acknowledged (seq-write's flush
                // mode times the flush instead).
                out.skip("latency", Some(mode), super::SERVED_NO_SYNC_FLAGS)
                    .of_op("write");
                continue;
            }
            if let Some(why) = &target.read_only {
                out.skip("latency", Some(mode), format!("write: {why}"))
                    .of_op("write");
                continue;
            }
        }
        let figure = super::made_by(target, Figure::new("latency", mode, op.name(), pattern, bs));
        if out.reuse(figure) {
            continue;
        }
        let Some(mut end) = target.end(op, extra, 1)? else {
            out.skip("latency", Some(mode), NO_DIRECT).of_op(op.name());
            continue;
        };
        let mut rng = Rng::new(0x1a7e);
        let label = format!(
            "latency {} {}",
            op.name(),
            crate::text::human::size_text(bs)
        );
        let samples = runner.repeat(&label, false, |pass| {
            let n = match pass {
                Pass::WarmUp => (count / 10).max(1),
                Pass::Measured(_) => count,
            };
            let mut latencies = Vec::with_capacity(n as usize);
            let request = &mut buf.as_mut_slice()[..bs as usize];
            let watch = Stopwatch::start();
            let mut offset = 0;
            for _ in 0..n {
                let at = match op {
                    Op::Write => {
                        if offset + bs > target.len {
                            offset = 0;
                        }
                        offset
                    }
                    Op::Read => rng.offset(target.len, bs, align),
                };
                let started = Instant::now();
                transfer(target, end.as_mut(), request, op, at)?;
                latencies.push(started.elapsed().as_nanos() as u64);
                offset += bs;
            }
            let mut sample = watch.stop(n as u64 * bs, n as u64);
            sample.latencies_ns = latencies;
            Ok(sample)
        })?;
        out.push(figure, &samples);
    }
    Ok(())
}
