//! What is known of an export's allocation from the position on: the
//! `base:allocation` extents block status gave, merged into runs of data
//! and runs that read as zeros. Read-ahead consults it so that zero runs
//! are never transferred, and `next_data` answers from it.
//!
//! A run reads as zeros only when the server set `NBD_STATE_ZERO`: the NBD
//! protocol lets a hole without that bit read as anything, so such a hole
//! is data here. What the map says is what the server said when asked;
//! writes through this end forget it (see `NbdEnd`), writes by others to a
//! live export are not seen, as with nbdcopy.

use std::collections::VecDeque;

use super::ffi::LIBNBD_STATE_ZERO;
pub(crate) use super::handle::Extent;

/// The extents of a `base:allocation` reply to a query at `offset`: its
/// (length, flags) pairs, each extent starting where the one before
/// ended (a trailing odd entry is no pair and is dropped). A server's
/// lengths are taken as they come: [`ExtentMap::learn`] believes only a
/// gapless chain within the export, and a chain that would run past the
/// last offset stops there.
pub fn from_pairs(offset: u64, entries: &[u32]) -> Vec<Extent> {
    let mut at = offset;
    entries
        .chunks_exact(2)
        .map(|pair| {
            let len = u64::from(pair[0]);
            let extent = Extent {
                start: at,
                len,
                zero: pair[1] & LIBNBD_STATE_ZERO != 0,
            };
            at = at.saturating_add(len);
            extent
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    start: u64,
    end: u64,
    zero: bool,
}

/// Contiguous runs from `runs[0].start` to `runs.back().end`.
#[derive(Debug, Default)]
pub struct ExtentMap {
    runs: VecDeque<Run>,
}

impl ExtentMap {
    /// The run holding `offset`: where it ends and whether it reads as
    /// zeros. None: not known, ask the server.
    pub fn lookup(&self, offset: u64) -> Option<(u64, bool)> {
        let first = self.runs.front()?;
        if offset < first.start || offset >= self.runs.back()?.end {
            return None;
        }
        let at = self.runs.partition_point(|run| run.end <= offset);
        let run = self.runs[at];
        Some((run.end, run.zero))
    }

    /// Add what block status answered for a query at `offset`: extents
    /// from `offset` on. They extend the map when they start where it
    /// ends, and replace it otherwise. Nothing is kept past `limit` (the
    /// export's size). Returns whether anything was learnt about `offset`.
    pub fn learn(&mut self, offset: u64, extents: &[Extent], limit: u64) -> bool {
        let contiguous = self.runs.back().is_some_and(|run| run.end == offset);
        if !contiguous {
            self.runs.clear();
        }
        let mut at = offset;
        for extent in extents {
            // Only a gapless chain from the query's offset is believed.
            if extent.start != at || extent.len == 0 || at >= limit {
                break;
            }
            let end = at.saturating_add(extent.len).min(limit);
            match self.runs.back_mut() {
                Some(last) if last.zero == extent.zero && last.end == at => last.end = end,
                _ => self.runs.push_back(Run {
                    start: at,
                    end,
                    zero: extent.zero,
                }),
            }
            at = end;
        }
        at > offset
    }

    /// Drop what lies wholly before `offset`: the position has passed it.
    pub fn forget_before(&mut self, offset: u64) {
        while self.runs.front().is_some_and(|run| run.end <= offset) {
            self.runs.pop_front();
        }
    }

    pub fn clear(&mut self) {
        self.runs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(start: u64, len: u64, zero: bool) -> Extent {
        Extent { start, len, zero }
    }

    #[test]
    fn runs_of_one_kind_merge_and_lookups_find_their_run() {
        let mut map = ExtentMap::default();
        assert!(map.learn(
            0,
            &[ext(0, 10, false), ext(10, 5, false), ext(15, 20, true)],
            100
        ));
        assert_eq!(map.lookup(0), Some((15, false)));
        assert_eq!(map.lookup(14), Some((15, false)));
        assert_eq!(map.lookup(15), Some((35, true)));
        assert_eq!(map.lookup(35), None);
        assert!(map.learn(35, &[ext(35, 100, true)], 100));
        assert_eq!(map.lookup(50), Some((100, true)));
        assert_eq!(map.lookup(20), Some((100, true)), "merged across queries");
        map.forget_before(16);
        assert_eq!(map.lookup(3), None);
        assert_eq!(map.lookup(16), Some((100, true)));
    }

    #[test]
    fn a_query_elsewhere_replaces_the_map() {
        let mut map = ExtentMap::default();
        map.learn(0, &[ext(0, 10, false)], 100);
        map.learn(50, &[ext(50, 10, true)], 100);
        assert_eq!(map.lookup(5), None);
        assert_eq!(map.lookup(55), Some((60, true)));
    }

    #[test]
    fn gaps_and_empty_answers_teach_nothing() {
        let mut map = ExtentMap::default();
        assert!(!map.learn(0, &[], 100));
        assert!(!map.learn(0, &[ext(4, 10, false)], 100));
        assert!(!map.learn(0, &[ext(0, 0, false)], 100));
        assert_eq!(map.lookup(0), None);
        assert!(map.learn(0, &[ext(0, 10, true), ext(12, 5, false)], 100));
        assert_eq!(map.lookup(11), None, "the chain stops at the gap");
    }

    #[test]
    fn nothing_is_kept_past_the_end_of_the_export() {
        let mut map = ExtentMap::default();
        map.learn(90, &[ext(90, 64, true)], 100);
        assert_eq!(map.lookup(99), Some((100, true)));
        assert_eq!(map.lookup(100), None);
    }
}
