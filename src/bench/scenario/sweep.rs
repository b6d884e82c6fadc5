//! The block-size sweep: O_DIRECT sequential throughput from the smallest
//! request the device takes (its logical sector) to 16 MiB, for reads and
//! writes, and from it the recommended block size (see `recommend`). Each
//! run is bounded by time as well as bytes, so 512-byte requests on a slow
//! disk do not take minutes; the sizes are measured in rounds (all sizes,
//! then all again, [`ROUNDS_PER_RUN`] times `--runs`) so a passing
//! disturbance cannot bend one part of the curve. Every request is timed:
//! a figure here is the block size over a run's median request time (the
//! block-size rule's measure, `results::Measure::MedianRequest`), so the
//! table prints the figures the rule was applied to.

use super::{sequential, Limit, Op, Outcome, Stream, Timing, NO_DIRECT};
use crate::bench::measure::Runner;
use crate::bench::results::Measure;
use crate::bench::BenchError;
use crate::operands::IoFlags;
use crate::text::human::size_text;

pub const LARGEST: u64 = 16 << 20;

/// Measured rounds per `--runs`: the recommendation compares sizes a few
/// percent apart, and on a shared disk three rounds do not resolve that
/// (three benches in a row disagreed); twice as many halve the variance
/// and keep the default bench near a minute.
pub const ROUNDS_PER_RUN: u32 = 2;

/// Doubling block sizes from `smallest` to 16 MiB, none beyond `len`.
pub fn block_sizes(smallest: u64, len: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut bs = smallest.max(512);
    while bs <= LARGEST.min(len) {
        sizes.push(bs);
        bs *= 2;
    }
    sizes
}

pub fn run(runner: &mut Runner<'_>, out: &mut Outcome) -> Result<(), BenchError> {
    let (target, time_per_run) = (runner.target, runner.time_per_run);
    let sizes = block_sizes(target.direct_align(), target.len);
    let Some(&largest) = sizes.last() else {
        out.skip(
            "bs-sweep",
            None,
            "the working set is smaller than one sector",
        );
        return Ok(());
    };
    let mut buf = super::data_buffer(largest)?;
    for op in [Op::Read, Op::Write] {
        if op == Op::Write {
            if let Some(why) = &target.read_only {
                out.skip(
                    "bs-sweep",
                    Some(super::uncached_mode(target)),
                    format!("write: {why}"),
                )
                .of_op("write");
                continue;
            }
        }
        let mode = super::uncached_mode(target);
        let Some(mut end) = target.end(op, IoFlags::DIRECT, 1)? else {
            out.skip("bs-sweep", Some("direct"), NO_DIRECT);
            return Ok(());
        };
        let per_point = runner.rounds(
            |i| format!("bs-sweep {} {}", op.name(), size_text(sizes[i])),
            sizes.len(),
            runner.runs * ROUNDS_PER_RUN,
            |pass, i| {
                let bs = sizes[i];
                let time = pass.time(time_per_run);
                let stop = target.len - target.len % bs;
                let stream = Stream {
                    op,
                    start: 0,
                    end: stop,
                    block_size: bs,
                    limit: Limit {
                        bytes: stop,
                        time: Some(time),
                        min_ios: 4,
                    },
                    timing: Timing::EachRequest,
                };
                sequential(target, end.as_mut(), &mut buf, stream)
            },
        )?;
        for (&bs, samples) in sizes.iter().zip(&per_point) {
            let figure =
                super::seq::figure("bs-sweep", mode, op, bs).measured_as(Measure::MedianRequest);
            let figure = super::made_by(target, figure);
            // Every request was timed for the rule (each run's median is
            // kept in its record) and summarised in latency_ns; tens of
            // thousands of raw latencies per figure would swamp the JSON.
            if let Some(result) = out.push(figure, samples) {
                result.latency_samples_ns = Vec::new();
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_double_from_the_sector_to_16_mib() {
        let sizes = block_sizes(512, 1 << 30);
        assert_eq!(sizes.first(), Some(&512));
        assert_eq!(sizes.last(), Some(&(16 << 20)));
        assert_eq!(sizes.len(), 16);
        assert_eq!(block_sizes(4096, 1 << 20).len(), 9);
        assert!(block_sizes(4096, 1024).is_empty());
    }
}
