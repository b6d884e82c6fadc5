//! A rescue (`--rescue`), in GNU ddrescue's four phases (its manual,
//! "Algorithm"), so that the good data comes off a failing disk first and
//! a bad area is read as few times as it can be:
//!
//! 1. Copying: the non-tried areas ('?') in requests of ibs. Pass 1 goes
//!    forwards and, after a failed request, skips ahead (64 KiB or a
//!    hundred-thousandth of the input, doubling with each failure in a
//!    row up to a hundredth, back to the start after a good read) instead
//!    of grinding through the bad area; pass 2 reads what pass 1 skipped
//!    backwards, leaving the rest of an area at its first failure, so the
//!    far edge of each bad area is found from the good side; pass 3 reads
//!    what is left forwards without skipping. A failed request's unread
//!    part is non-trimmed ('*').
//! 2. Trimming: each non-trimmed area is read sector by sector from its
//!    leading edge up to the first bad sector, then from its trailing edge
//!    back to the first bad sector; the bad sectors become '-', the middle
//!    non-scraped ('/'). An edge next to a known bad sector is left.
//! 3. Scraping: each non-scraped area, sector by sector, forwards.
//! 4. Retrying (`--retry-passes=N`): every bad sector once per pass, the
//!    direction reversed after each pass (the first forwards).
//!
//! Each sector is so read at most twice before retrying: once in a
//! request, once alone. The map's statuses are ddrescue's for each of
//! these states, and its status line names the phase and pass (`?` with
//! the copying pass, `*`, `/`, `-` with the retry pass), so ddrescue
//! continues a ddx rescue and ddx a ddrescue one. ddrescue's other
//! copying passes (areas skipped for being slow, not failing) have no
//! counterpart: ddx does not time its reads.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use super::copier::{Copier, Got, OnError};
use super::mapfile::{Block, BlockStatus};
use super::Ended;

/// The first skip after a failed request, at least.
const MIN_SKIP: u64 = 64 << 10;

/// Which phase of a rescue runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the non-tried areas in requests (pass 1 to 3).
    Copying {
        pass: u32,
    },
    Trimming,
    Scraping,
    /// Reading the bad sectors again: pass `pass` of `of`.
    Retrying {
        pass: u32,
        of: u32,
    },
}

/// The copying passes.
const COPYING_PASSES: u32 = 3;

impl Phase {
    /// The map's current_status while this phase runs, as ddrescue writes it.
    pub fn map_status(self) -> char {
        match self {
            Phase::Copying { .. } => '?',
            Phase::Trimming => '*',
            Phase::Scraping => '/',
            Phase::Retrying { .. } => '-',
        }
    }

    fn pass(self) -> u32 {
        match self {
            Phase::Copying { pass } | Phase::Retrying { pass, .. } => pass,
            Phase::Trimming | Phase::Scraping => 1,
        }
    }

    /// The blocks this phase reads.
    fn reads(self) -> BlockStatus {
        match self {
            Phase::Copying { .. } => BlockStatus::NonTried,
            Phase::Trimming => BlockStatus::NonTrimmed,
            Phase::Scraping => BlockStatus::NonScraped,
            Phase::Retrying { .. } => BlockStatus::BadSector,
        }
    }

    /// How it goes, for `--verbose`.
    fn how(self) -> &'static str {
        match self {
            Phase::Copying { pass: 1 } => "forwards, skipping ahead after each failed request",
            Phase::Copying { pass: 2 } => "backwards over what pass 1 skipped",
            Phase::Copying { .. } => "forwards over what is left, without skipping",
            Phase::Trimming => "the edges of each failed area, sector by sector",
            Phase::Scraping => "the rest of each failed area, sector by sector",
            Phase::Retrying { pass, .. } if pass % 2 == 1 => "each bad sector again, forwards",
            Phase::Retrying { .. } => "each bad sector again, backwards",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Copying { pass } => write!(f, "copying, pass {pass}"),
            Phase::Trimming => f.write_str("trimming"),
            Phase::Scraping => f.write_str("scraping"),
            Phase::Retrying { pass, of } => write!(f, "retrying, pass {pass} of {of}"),
        }
    }
}

/// A phase starting, as `--verbose` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseStart {
    pub phase: Phase,
    /// Bytes this phase is to read.
    pub to_read: u64,
    /// Bytes read and failed so far, not recovered.
    pub failed: u64,
}

impl fmt::Display for PhaseStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--rescue: {} ({}): {} bytes to read, {} bytes bad so far",
            self.phase,
            self.phase.how(),
            self.to_read,
            self.failed
        )
    }
}

/// Where a rescue stands, shared with the thread that draws the progress
/// line: the phase and the bytes read and failed, not recovered yet.
#[derive(Debug, Default)]
pub struct Standing {
    /// The phase, packed by [`Standing::pack`]; 0 before and after.
    phase: AtomicU64,
    failed: AtomicU64,
}

impl Standing {
    fn pack(phase: Option<Phase>) -> u64 {
        let (kind, pass, of) = match phase {
            None => (0, 0, 0),
            Some(Phase::Copying { pass }) => (1, pass, 0),
            Some(Phase::Trimming) => (2, 0, 0),
            Some(Phase::Scraping) => (3, 0, 0),
            Some(Phase::Retrying { pass, of }) => (4, pass, of),
        };
        kind | u64::from(pass) << 8 | u64::from(of) << 36
    }

    fn unpack(packed: u64) -> Option<Phase> {
        let pass = ((packed >> 8) & 0xFFF_FFFF) as u32;
        let of = (packed >> 36) as u32;
        match packed & 0xFF {
            1 => Some(Phase::Copying { pass }),
            2 => Some(Phase::Trimming),
            3 => Some(Phase::Scraping),
            4 => Some(Phase::Retrying { pass, of }),
            _ => None,
        }
    }

    pub fn set_phase(&self, phase: Option<Phase>) {
        self.phase.store(Self::pack(phase), Ordering::Relaxed);
    }

    pub fn set_failed(&self, bytes: u64) {
        self.failed.store(bytes, Ordering::Relaxed);
    }

    /// The phase running, if a rescue runs.
    pub fn phase(&self) -> Option<Phase> {
        Self::unpack(self.phase.load(Ordering::Relaxed))
    }

    /// Bytes read and failed, not recovered yet.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// The skips of the first copying pass, ddrescue's defaults in whole
/// requests: `initial` after a good read, doubling up to `max`.
struct Skips {
    initial: u64,
    max: u64,
}

impl Skips {
    fn new(domain: u64, chunk: u64) -> Skips {
        let whole = |bytes: u64| bytes.div_ceil(chunk).max(1) * chunk;
        let initial = whole(MIN_SKIP.max(domain / 100_000));
        Skips {
            initial,
            max: initial.max(whole(domain / 100)),
        }
    }
}

impl Copier<'_, '_> {
    /// The four phases over what the map has not finished.
    pub(super) fn rescue(&mut self) -> Result<(), Ended> {
        let map = &self.job.map;
        // A map saved during copying names its pass: resume there (its
        // first pass from where it stood). ddrescue's passes 3 to 5 are
        // all "what is left", ddx's third.
        let (first_pass, from) = match (map.current_status, map.current_pass) {
            ('?', 0 | 1) => (1, map.current_pos),
            ('?', pass) => (pass.min(COPYING_PASSES), self.job.start),
            _ => (1, self.job.start),
        };
        for pass in first_pass..=COPYING_PASSES {
            if !self.enter(Phase::Copying { pass }) {
                continue;
            }
            match pass {
                1 => self.copy_forwards(from, true)?,
                2 => self.copy_backwards()?,
                _ => self.copy_forwards(self.job.start, false)?,
            }
        }
        if self.enter(Phase::Trimming) {
            for block in self.job.map.with_status(BlockStatus::NonTrimmed) {
                self.trim(block)?;
            }
        }
        if self.enter(Phase::Scraping) {
            for block in self.job.map.with_status(BlockStatus::NonScraped) {
                for (pos, len) in self.sectors(block.pos, block.end(), true) {
                    self.read_again(pos, len, BlockStatus::BadSector)?;
                    self.step(pos);
                }
            }
        }
        let of = self.job.retry_passes;
        for pass in 1..=of {
            if !self.enter(Phase::Retrying { pass, of }) {
                break;
            }
            let forwards = pass % 2 == 1;
            let mut bad = self.job.map.with_status(BlockStatus::BadSector);
            if !forwards {
                bad.reverse();
            }
            for block in bad {
                for (pos, len) in self.sectors(block.pos, block.end(), forwards) {
                    self.read_again(pos, len, BlockStatus::BadSector)?;
                    self.step(pos);
                }
            }
        }
        Ok(())
    }

    /// Start `phase` if the map holds anything for it to read; whether it
    /// started.
    fn enter(&mut self, phase: Phase) -> bool {
        let to_read = self.job.map.bytes_with(phase.reads());
        if to_read == 0 {
            return false;
        }
        let map = &mut self.job.map;
        map.current_status = phase.map_status();
        map.current_pass = phase.pass();
        self.standing.set_phase(Some(phase));
        self.phases.push(phase);
        if let Some(tell) = self.job.on_phase {
            tell(&PhaseStart {
                phase,
                to_read,
                failed: self.job.map.failed_bytes(),
            });
        }
        true
    }

    /// Copying forwards from input position `from`; with `skipping`,
    /// jumping ahead after each failed request.
    fn copy_forwards(&mut self, from: u64, skipping: bool) -> Result<(), Ended> {
        let chunk = self.job.chunk as u64;
        let skips = Skips::new(self.job.end - self.job.start, chunk);
        let mut skip = skips.initial;
        let mut next = from;
        for block in self.job.map.with_status(BlockStatus::NonTried) {
            let mut pos = block.pos.max(next);
            while pos < block.end().min(self.job.end) {
                let end = self.request_end(pos).min(block.end());
                match self.request(
                    pos,
                    (end - pos) as usize,
                    OnError::Fill(BlockStatus::NonTrimmed),
                )? {
                    Got::Whole => {
                        skip = skips.initial;
                        pos = end;
                    }
                    Got::EndOfInput => return Ok(()),
                    Got::Failed if skipping => {
                        pos = end + skip;
                        skip = (skip * 2).min(skips.max);
                    }
                    Got::Failed => pos = end,
                }
                self.step(end);
            }
            next = pos;
        }
        Ok(())
    }

    /// Copying backwards over each non-tried area, up to its first failed
    /// request.
    fn copy_backwards(&mut self) -> Result<(), Ended> {
        let mut blocks = self.job.map.with_status(BlockStatus::NonTried);
        blocks.reverse();
        for block in blocks {
            let mut end = block.end().min(self.job.end);
            while end > block.pos {
                let pos = self.request_start(end).max(block.pos);
                let got = self.request(
                    pos,
                    (end - pos) as usize,
                    OnError::Fill(BlockStatus::NonTrimmed),
                )?;
                self.step(pos);
                match got {
                    Got::Whole | Got::EndOfInput => end = pos,
                    Got::Failed => break,
                }
            }
        }
        Ok(())
    }

    /// Trim one non-trimmed area: from each edge inwards to its first bad
    /// sector (an edge next to a bad sector is trimmed already); what is
    /// between becomes non-scraped.
    fn trim(&mut self, block: Block) -> Result<(), Ended> {
        let (mut low, mut high) = (block.pos, block.end());
        let bad_before =
            block.pos > 0 && self.job.map.status_at(block.pos - 1) == Some(BlockStatus::BadSector);
        if !bad_before {
            for (pos, len) in self.sectors(low, high, true) {
                let read = self.read_again(pos, len, BlockStatus::BadSector)?;
                low = pos + len as u64;
                self.step(low);
                if !read {
                    break;
                }
            }
        }
        let bad_after = self.job.map.status_at(high) == Some(BlockStatus::BadSector);
        if !bad_after {
            for (pos, len) in self.sectors(low, high, false) {
                let read = self.read_again(pos, len, BlockStatus::BadSector)?;
                high = pos;
                self.step(pos);
                if !read {
                    break;
                }
            }
        }
        self.job.map.mark(low, high - low, BlockStatus::NonScraped);
        Ok(())
    }

    /// The sectors of `[low, high)` (pieces at its edges), in the order
    /// asked.
    fn sectors(&self, low: u64, high: u64, forwards: bool) -> Sectors {
        Sectors {
            low,
            high,
            sector: self.job.sector as u64,
            forwards,
        }
    }
}

/// The sectors of `[low, high)`, as (position, length) pieces cut at
/// sector boundaries, from either end. An iterator, not a list: a bad
/// area may hold millions of sectors.
struct Sectors {
    low: u64,
    high: u64,
    sector: u64,
    forwards: bool,
}

impl Iterator for Sectors {
    type Item = (u64, usize);

    fn next(&mut self) -> Option<(u64, usize)> {
        if self.low >= self.high {
            return None;
        }
        if self.forwards {
            let pos = self.low;
            self.low = ((pos / self.sector + 1) * self.sector).min(self.high);
            Some((pos, (self.low - pos) as usize))
        } else {
            let end = self.high;
            self.high = ((end - 1) / self.sector * self.sector).max(self.low);
            Some((self.high, (end - self.high) as usize))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standing_round_trips_every_phase() {
        let standing = Standing::default();
        assert_eq!(standing.phase(), None);
        for phase in [
            Phase::Copying { pass: 1 },
            Phase::Copying { pass: 3 },
            Phase::Trimming,
            Phase::Scraping,
            Phase::Retrying {
                pass: 7,
                of: 1_000_000,
            },
        ] {
            standing.set_phase(Some(phase));
            assert_eq!(standing.phase(), Some(phase));
        }
        standing.set_phase(None);
        assert_eq!(standing.phase(), None);
    }

    #[test]
    fn sectors_are_cut_at_sector_boundaries_from_either_end() {
        let pieces = |low, high, forwards| {
            Sectors {
                low,
                high,
                sector: 512,
                forwards,
            }
            .collect::<Vec<_>>()
        };
        assert_eq!(
            pieces(100, 1200, true),
            [(100, 412), (512, 512), (1024, 176)]
        );
        assert_eq!(
            pieces(100, 1200, false),
            [(1024, 176), (512, 512), (100, 412)]
        );
        assert_eq!(pieces(512, 1024, false), [(512, 512)]);
        assert!(pieces(7, 7, true).is_empty());
    }

    #[test]
    fn skips_are_whole_requests_from_64_kib_to_a_hundredth() {
        let small = Skips::new(1 << 20, 4096);
        assert_eq!((small.initial, small.max), (64 << 10, 64 << 10));
        let large = Skips::new(1 << 40, 1 << 20);
        assert_eq!(large.initial, 11 << 20); // 1 TiB / 100000, in MiB
        assert_eq!(
            large.max,
            (1u64 << 40) / 100 / (1 << 20) * (1 << 20) + (1 << 20)
        );
        let odd = Skips::new(1 << 20, 3000);
        assert_eq!(odd.initial % 3000, 0);
        assert!(odd.initial >= 64 << 10);
    }
}
