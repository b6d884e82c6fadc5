//! `bs=auto`: the smallest block size that gives almost all the speed.
//!
//! Too small a block costs a request per few bytes; too large a block buys
//! nothing but memory and, with synchronous I/O, idle devices. The knee
//! differs per device, so ddx measures it: it reads the input at a few
//! block sizes (positional reads of distinct regions just past skip=, which
//! the copy reads next anyway, so nothing is wasted and nothing written),
//! in three short rounds over all sizes so the rule can tell the sizes'
//! differences from the disk's own drift, each round's figure in the rule's
//! measure (the block size over the median request time), and takes the
//! answer of the rule `ddx bench` recommends by ([`judge`]: the smallest
//! size whose figure reaches the bar, 95% of the median of the three
//! highest less the noise).
//! `--verbose` prints the figures, the best and the bar the rule was
//! applied to, so the answer can be checked by reading them. What cannot
//! be probed (a pipe, a character
//! device, an input too small to measure) gets 128 KiB, the size
//! coreutils settled on for cp and cat by measuring many systems. Device
//! hints set a floor: under O_DIRECT, the logical sector of every direct
//! end; for a block device written, its physical sector (a smaller write
//! would make the device read, modify and write a whole one).

use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use crate::ends::Capabilities;
use crate::stats::recommend::{self, judge, Judgement, NEAR_BEST};
use crate::sys::buffer::AlignedBuf;
use crate::sys::device::device_info;
use crate::sys::file;

/// The block size when nothing can be measured.
pub const UNMEASURED: usize = 128 * 1024;

/// The sizes tried, smallest first.
const CANDIDATES: [usize; 6] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];

/// Bytes read per candidate (at least a few requests of it).
const PROBE_BYTES: u64 = 4 << 20;
const PROBE_REQUESTS: u64 = 4;

/// Every candidate is read in this many rounds (all candidates, then all
/// again), so the block-size rule can tell a difference between sizes
/// from a moment when the disk was busy with something else.
const ROUNDS: u64 = 3;

/// Time spent on one candidate at most (over all rounds; each round
/// makes at least two requests).
const PROBE_TIME: Duration = Duration::from_millis(60);

/// One end of the copy as the choice sees it.
#[derive(Debug, Clone, Copy)]
pub struct ProbeEnd<'a> {
    pub fd: BorrowedFd<'a>,
    pub direct: bool,
    /// What the end can do: a local file or device is probed, a device's
    /// sectors raise the floor.
    pub can: Capabilities,
}

/// The block size chosen, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub block_size: usize,
    /// (block size, bytes per second in each round) for each size
    /// probed; empty if none.
    pub measured: Vec<(usize, Vec<f64>)>,
    /// What the rule made of them.
    pub judgement: Option<Judgement>,
    /// The floor the devices set, if any, and why.
    pub floor: Option<(usize, &'static str)>,
    /// Why nothing was probed, if it was not.
    pub unprobed: Option<&'static str>,
}

impl Choice {
    /// One line for `--verbose`: the choice, and the figures, best and
    /// bar the rule was applied to.
    pub fn describe(&self) -> String {
        let size = |n: u64| crate::text::human::size_text(n);
        let percent = |f: f64| format!("{:.1}%", f * 100.0);
        let mut text = format!(
            "bs=auto chose {} ({} bytes)",
            size(self.block_size as u64),
            self.block_size
        );
        if let Some(judgement) = &self.judgement {
            let rounds = self.measured.iter().map(|m| m.1.len()).max().unwrap_or(0);
            let points: Vec<String> = judgement
                .figures
                .iter()
                .map(|&(bs, figure)| {
                    format!(
                        "{} {} ({})",
                        size(bs),
                        crate::text::human::rate_text(figure),
                        percent(judgement.share(figure))
                    )
                })
                .collect();
            text.push_str(&format!(
                ": {} is the smallest size whose read throughput reaches the bar of {} of \
                 the best ({}, the highest; the bar is {:.0}% of {} ({}), less the noise \
                 between rounds, never below {:.0}% of the best); throughput is the block size \
                 over a round's median request time, the median of {rounds} rounds: {}",
                size(judgement.block_size),
                percent(judgement.bar),
                crate::text::human::rate_text(judgement.best_bytes_per_sec),
                NEAR_BEST * 100.0,
                crate::text::human::rate_text(judgement.reference_bytes_per_sec),
                judgement.reference.text(),
                recommend::FLOOR * 100.0,
                points.join(", ")
            ));
        }
        if let Some(reason) = self.unprobed {
            text.push_str(&format!(" ({reason})"));
        }
        if let Some((floor, why)) = self.floor {
            text.push_str(&format!("; at least {} ({why})", size(floor as u64)));
        }
        text
    }
}

/// Choose the block size for a copy from `input` (read from `start`) to
/// `output`.
pub fn choose(input: ProbeEnd<'_>, output: ProbeEnd<'_>, start: u64) -> Choice {
    let floor = floor(input, output);
    let minimum = floor.map_or(1, |(f, _)| f);
    let candidates: Vec<usize> =
        CANDIDATES
            .iter()
            .map(|&c| round_up(c, minimum))
            .fold(Vec::new(), |mut list, c| {
                if list.last() != Some(&c) {
                    list.push(c);
                }
                list
            });
    let (measured, unprobed) = match probe(input, start, &candidates) {
        Ok(points) => (points, None),
        Err(reason) => (Vec::new(), Some(reason)),
    };
    let points: Vec<(u64, Vec<f64>)> = measured
        .iter()
        .map(|(bs, rounds)| (*bs as u64, rounds.clone()))
        .collect();
    let judgement = judge(&points, NEAR_BEST);
    let chosen = judgement
        .as_ref()
        .map_or(UNMEASURED, |j| j.block_size as usize)
        .max(minimum);
    Choice {
        block_size: round_up(chosen, minimum),
        measured,
        judgement,
        floor,
        unprobed,
    }
}

fn round_up(value: usize, unit: usize) -> usize {
    value.div_ceil(unit.max(1)) * unit.max(1)
}

/// What the devices require of every request, and why.
fn floor(input: ProbeEnd<'_>, output: ProbeEnd<'_>) -> Option<(usize, &'static str)> {
    let mut floor: Option<(usize, &'static str)> = None;
    let mut raise = |size: Option<u32>, why: &'static str| {
        if let Some(size) = size.filter(|&s| s > 1) {
            if floor.is_none_or(|(f, _)| (size as usize) > f) {
                floor = Some((size as usize, why));
            }
        }
    };
    for (end, name) in [(input, "input"), (output, "output")] {
        if !end.direct {
            continue;
        }
        let info = device_info(end.fd);
        let sector = info
            .dio_offset_align
            .filter(|&a| a > 0)
            .or(info.logical_sector);
        raise(
            sector,
            if name == "input" {
                "the input's direct I/O alignment"
            } else {
                "the output's direct I/O alignment"
            },
        );
    }
    if output.can.device {
        raise(
            device_info(output.fd).physical_sector,
            "the output device's physical sector",
        );
    }
    floor
}

/// Read throughput at each candidate size, one figure per round in the
/// rule's measure ([`recommend::request_rate`]: the size over the median
/// request's time, so a stall behind other I/O slows a request, not the
/// figure), or why it was not measured.
fn probe(
    input: ProbeEnd<'_>,
    start: u64,
    candidates: &[usize],
) -> Result<Vec<(usize, Vec<f64>)>, &'static str> {
    if !input.can.local_storage {
        return Err("the input is not a file or block device, so it was not probed");
    }
    let size = file::usable_size(input.fd)
        .ok()
        .flatten()
        .ok_or("the input's size is unknown")?;
    // Each round of a candidate reads its own region, in whole requests.
    let per_round = |c: usize| {
        let c = c as u64;
        (PROBE_BYTES / ROUNDS)
            .max(PROBE_REQUESTS * c / ROUNDS)
            .div_ceil(c)
            * c
    };
    let needed: u64 = candidates.iter().map(|&c| ROUNDS * per_round(c)).sum();
    if (size.max(0) as u64).saturating_sub(start) < needed {
        return Err("the input is too small to be worth probing");
    }
    // The device, not the page cache, is what the sizes are tried on:
    // part of the input may be cached and would flatter some sizes.
    let direct = match input.direct {
        true => None,
        false => file::reopen_direct(input.fd).ok(),
    };
    let fd = direct.as_ref().map_or(input.fd, |d| d.as_fd());
    let largest = candidates.iter().copied().max().unwrap_or(UNMEASURED);
    let mut buf = AlignedBuf::new(largest).map_err(|_| "no memory to probe the input")?;
    let mut points: Vec<(usize, Vec<f64>)> = candidates.iter().map(|&c| (c, Vec::new())).collect();
    let round_time = PROBE_TIME / ROUNDS as u32;
    let mut offset = start;
    for _ in 0..ROUNDS {
        for (candidate, rounds) in points.iter_mut() {
            let candidate = *candidate;
            let region_end = offset + per_round(candidate);
            let began = Instant::now();
            let mut at = offset;
            let mut latencies = Vec::new();
            while at + candidate as u64 <= region_end {
                let chunk = &mut buf.as_mut_slice()[..candidate];
                let request = Instant::now();
                match file::read_at(fd, chunk, at) {
                    Ok(n) if n == candidate => at += n as u64,
                    // A short read means the input ended early: no figure.
                    Ok(_) => break,
                    Err(_) => return Err("the input could not be read at every size"),
                }
                latencies.push(request.elapsed().as_nanos() as u64);
                if latencies.len() >= 2 && began.elapsed() > round_time {
                    break;
                }
            }
            if let Some(rate) = recommend::request_rate(candidate as u64, &latencies) {
                rounds.push(rate);
            }
            offset = region_end;
        }
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::Kind;
    use std::os::fd::AsFd;

    #[test]
    fn a_pipe_gets_the_unmeasured_size() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let choice = choose(
            ProbeEnd {
                fd: r.as_fd(),
                direct: false,
                can: Kind::Pipe.capabilities(),
            },
            ProbeEnd {
                fd: w.as_fd(),
                direct: false,
                can: Kind::Pipe.capabilities(),
            },
            0,
        );
        assert_eq!(choice.block_size, UNMEASURED);
        assert!(choice.measured.is_empty());
        assert!(choice.describe().contains("not probed"));
    }

    #[test]
    fn a_large_file_is_probed_at_every_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        let data: Vec<u8> = (0..64 << 20).map(|i: u32| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let input = std::fs::File::open(&path).unwrap();
        let output = std::fs::File::create(dir.path().join("out")).unwrap();
        let choice = choose(
            ProbeEnd {
                fd: input.as_fd(),
                direct: false,
                can: Kind::RegularFile.capabilities(),
            },
            ProbeEnd {
                fd: output.as_fd(),
                direct: false,
                can: Kind::RegularFile.capabilities(),
            },
            0,
        );
        let sizes: Vec<usize> = choice.measured.iter().map(|p| p.0).collect();
        assert_eq!(sizes, CANDIDATES);
        assert!(CANDIDATES.contains(&choice.block_size));
        assert!(choice
            .measured
            .iter()
            .all(|(_, rounds)| rounds.len() == ROUNDS as usize && rounds.iter().all(|&r| r > 0.0)));
        // The rule, applied to what was measured.
        let points: Vec<(u64, Vec<f64>)> = choice
            .measured
            .iter()
            .map(|(bs, rounds)| (*bs as u64, rounds.clone()))
            .collect();
        assert_eq!(
            recommend::smallest_near_best(&points, NEAR_BEST),
            Some(choice.block_size as u64)
        );
        assert_eq!(choice.judgement, judge(&points, NEAR_BEST));
    }

    #[test]
    fn sizes_round_up_to_the_floor() {
        assert_eq!(round_up(4096, 4096), 4096);
        assert_eq!(round_up(5000, 4096), 8192);
        assert_eq!(round_up(1000, 1), 1000);
    }
}
