//! Sets of byte ranges, sorted and merged: what a file system uses, what
//! it leaves free, and the disk's used blocks the copy reads.

use std::ops::Range;

/// Disjoint, sorted, non-empty byte ranges, none touching the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extents {
    ranges: Vec<Range<u64>>,
}

impl Extents {
    pub fn new() -> Extents {
        Extents::default()
    }

    /// The ranges given, in any order, overlapping or not.
    pub fn from_ranges(mut ranges: Vec<Range<u64>>) -> Extents {
        ranges.retain(|r| r.start < r.end);
        ranges.sort_unstable_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
        for range in ranges {
            match merged.last_mut() {
                Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
                _ => merged.push(range),
            }
        }
        Extents { ranges: merged }
    }

    /// One range.
    pub fn whole(range: Range<u64>) -> Extents {
        Extents::from_ranges(vec![range])
    }

    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Bytes covered.
    pub fn bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }

    /// Bytes covered within `within`.
    pub fn bytes_within(&self, within: &Range<u64>) -> u64 {
        let first = self.ranges.partition_point(|r| r.end <= within.start);
        self.ranges[first..]
            .iter()
            .take_while(|r| r.start < within.end)
            .map(|r| r.end.min(within.end) - r.start.max(within.start))
            .sum()
    }

    /// Every range moved `by` bytes on.
    pub fn shifted(&self, by: u64) -> Extents {
        Extents {
            ranges: self
                .ranges
                .iter()
                .map(|r| r.start.saturating_add(by)..r.end.saturating_add(by))
                .collect(),
        }
    }

    /// Both sets together.
    pub fn union(&self, other: &Extents) -> Extents {
        let mut all = self.ranges.clone();
        all.extend(other.ranges.iter().cloned());
        Extents::from_ranges(all)
    }

    /// What of `within` this set does not cover.
    pub fn complement(&self, within: Range<u64>) -> Extents {
        let mut out = Vec::new();
        let mut at = within.start;
        for r in &self.ranges {
            if r.end <= at {
                continue;
            }
            if r.start >= within.end {
                break;
            }
            if r.start > at {
                out.push(at..r.start);
            }
            at = at.max(r.end);
        }
        if at < within.end {
            out.push(at..within.end);
        }
        Extents { ranges: out }
    }

    /// Each range widened to whole `block`-byte blocks, and all of it cut
    /// to `0..limit`: a block that holds any used byte is used.
    pub fn rounded_out(&self, block: u64, limit: u64) -> Extents {
        let block = block.max(1);
        Extents::from_ranges(
            self.ranges
                .iter()
                .map(|r| {
                    let start = r.start / block * block;
                    let end = r.end.div_ceil(block).saturating_mul(block).min(limit);
                    start..end
                })
                .collect(),
        )
    }

    /// Where data starts at or after `offset` (SEEK_DATA), if anywhere.
    pub fn next_data(&self, offset: u64) -> Option<u64> {
        let at = self.ranges.partition_point(|r| r.end <= offset);
        self.ranges.get(at).map(|r| r.start.max(offset))
    }

    /// Where the data at `offset` ends (SEEK_HOLE): `offset` itself when it
    /// is in no range.
    pub fn next_hole(&self, offset: u64) -> u64 {
        let at = self.ranges.partition_point(|r| r.end <= offset);
        match self.ranges.get(at) {
            Some(r) if r.start <= offset => r.end,
            _ => offset,
        }
    }
}

// The expected sets are written as slices of ranges, one range or more.
#[allow(clippy::single_range_in_vec_init)]
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_sorted_and_merged() {
        let e = Extents::from_ranges(vec![10..20, 0..5, 15..30, 30..31, 40..40]);
        assert_eq!(e.ranges(), &[0..5, 10..31]);
        assert_eq!(e.bytes(), 26);
        assert_eq!(e.bytes_within(&(3..12)), 4);
    }

    #[test]
    fn complement_and_union() {
        let e = Extents::from_ranges(vec![10..20, 30..40]);
        assert_eq!(e.complement(0..50).ranges(), &[0..10, 20..30, 40..50]);
        assert_eq!(e.complement(15..35).ranges(), &[20..30]);
        assert_eq!(e.complement(10..20).ranges(), &[] as &[Range<u64>]);
        let u = e.union(&Extents::from_ranges(vec![18..32]));
        assert_eq!(u.ranges(), &[10..40]);
    }

    #[test]
    fn rounding_out_takes_whole_blocks_within_the_limit() {
        let e = Extents::from_ranges(vec![100..200, 5000..5001, 9000..9100]);
        assert_eq!(e.rounded_out(4096, 9050).ranges(), &[0..9050]);
        assert_eq!(e.rounded_out(4096, 1 << 20).ranges(), &[0..12288]);
        let e = Extents::from_ranges(vec![100..200, 9000..9100]);
        assert_eq!(
            e.rounded_out(4096, 1 << 20).ranges(),
            &[0..4096, 8192..12288]
        );
    }

    #[test]
    fn seek_data_and_hole() {
        let e = Extents::from_ranges(vec![10..20, 30..40]);
        assert_eq!(e.next_data(0), Some(10));
        assert_eq!(e.next_data(15), Some(15));
        assert_eq!(e.next_data(20), Some(30));
        assert_eq!(e.next_data(40), None);
        assert_eq!(e.next_hole(15), 20);
        assert_eq!(e.next_hole(25), 25);
        assert_eq!(e.next_hole(30), 40);
    }
}
