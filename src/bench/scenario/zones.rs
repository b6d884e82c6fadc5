//! Zones: O_DIRECT read throughput at evenly spaced offsets from the start
//! to the end of the target. On a spinning disk the outer tracks (low
//! offsets) pass more sectors per turn than the inner ones; a single dd at
//! offset 0 reports only the best of it. On a file the offsets are the
//! file's, which the filesystem may place anywhere.

use super::{sequential, Limit, Op, Outcome, Stream, Timing, NO_DIRECT, SEQ_BLOCK};
use crate::bench::measure::{Pass, Runner};
use crate::bench::results::Figure;
use crate::bench::BenchError;
use crate::operands::IoFlags;

/// Most bytes read at one offset per run.
const ZONE_BYTES: u64 = 16 << 20;

/// `count` offsets from 0 to `len - chunk`, each a multiple of `align`.
pub fn offsets(len: u64, chunk: u64, count: u32, align: u64) -> Vec<u64> {
    let last = len.saturating_sub(chunk);
    let steps = u64::from(count.max(2) - 1);
    (0..=steps)
        .map(|i| {
            let at = (u128::from(last) * u128::from(i) / u128::from(steps)) as u64;
            at - at % align
        })
        .collect()
}

pub fn run(runner: &mut Runner<'_>, count: u32, out: &mut Outcome) -> Result<(), BenchError> {
    let target = runner.target;
    let align = target.direct_align();
    let mode = super::uncached_mode(target);
    let Some(mut end) = target.end(Op::Read, IoFlags::DIRECT, 1)? else {
        out.skip("zones", None, NO_DIRECT);
        return Ok(());
    };
    let span = target.full_len;
    let chunk = (span / u64::from(count)).min(ZONE_BYTES);
    let bs = SEQ_BLOCK.min(chunk - chunk % align);
    if bs < align {
        out.skip("zones", None, "the target is too small for this many zones");
        return Ok(());
    }
    let chunk = chunk - chunk % bs;
    let mut buf = super::data_buffer(bs)?;
    for (i, at) in offsets(span, chunk, count, align).into_iter().enumerate() {
        let label = format!("zones {}/{count}", i + 1);
        let samples = runner.repeat(&label, false, |pass| {
            let bytes = match pass {
                Pass::WarmUp => (chunk / 4).max(bs),
                Pass::Measured(_) => chunk,
            };
            let stream = Stream {
                op: Op::Read,
                start: at,
                end: at + chunk,
                block_size: bs,
                limit: Limit::bytes(bytes - bytes % bs),
                timing: Timing::Untimed,
            };
            sequential(target, end.as_mut(), &mut buf, stream)
        })?;
        let figure = super::made_by(
            target,
            Figure::new("zones", mode, "read", "sequential", bs).at(at),
        );
        let note = if i > 0 || target.can.device {
            None
        } else if target.can.served {
            Some("offsets within the export, wherever its server keeps them")
        } else {
            Some("offsets within the file, not the disk")
        };
        out.push_noted(figure, &samples, note);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_span_the_target_evenly() {
        let at = offsets(100 << 20, 1 << 20, 5, 4096);
        assert_eq!(at.len(), 5);
        assert_eq!(at[0], 0);
        assert_eq!(*at.last().unwrap(), 99 << 20);
        assert!(at.iter().all(|a| a % 4096 == 0));
        assert!(at.windows(2).all(|w| w[0] < w[1]));
    }
}
