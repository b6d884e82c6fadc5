//! The statistics every measurement in ddx goes through, in one leaf that
//! depends on nothing else in ddx: medians of repeated runs (a cron job
//! landing in one run must not move the answer), min and max beside them,
//! outliers flagged by median absolute deviation, latency percentiles taken
//! from every sample rather than averaged, and the block-size rule with the
//! estimates it rests on ([`recommend`]). `ddx bench`, `bs=auto` and the
//! rule all take their medians from here, so they cannot disagree on what
//! "the median" of an even count is.

pub mod recommend;

use serde::Serialize;

/// Median of `values` (mean of the middle two for an even count); None
/// when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// The modified z-score above which a run counts as an outlier
/// (Iglewicz and Hoaglin's usual cut-off).
pub const OUTLIER_Z: f64 = 3.5;

/// Indices of the values whose modified z-score, 0.6745·|x − median| / MAD,
/// exceeds [`OUTLIER_Z`]. With a MAD of zero (most values identical) only
/// values away from the median are flagged.
pub fn outliers(values: &[f64]) -> Vec<usize> {
    let Some(center) = median(values) else {
        return Vec::new();
    };
    let deviations: Vec<f64> = values.iter().map(|v| (v - center).abs()).collect();
    let mad = median(&deviations).unwrap_or(0.0);
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| {
            let deviation = (*v - center).abs();
            if mad == 0.0 {
                deviation > f64::EPSILON * center.abs().max(1.0)
            } else {
                0.6745 * deviation / mad > OUTLIER_Z
            }
        })
        .map(|(i, _)| i)
        .collect()
}

/// The `p`-th percentile (0 < p ≤ 100) of ascending `sorted` samples by
/// the nearest-rank rule: the smallest sample with at least p% of all
/// samples at or below it. Always an observed value, never interpolated.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    // The epsilon keeps float noise (99.9% of 1000 = 999.0000000000001)
    // from moving the rank up by one.
    let rank = (p / 100.0 * sorted.len() as f64 - 1e-9).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `values` as an observed value (the nearest-rank 50th
/// percentile: the lower middle one of an even count), for request times:
/// a time some request really took. None when empty.
pub fn observed_median(values: &[u64]) -> Option<u64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    percentile(&sorted, 50.0)
}

/// Latency figures in nanoseconds, computed from every sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub samples: usize,
}

impl Latency {
    pub fn of(samples_ns: &[u64]) -> Option<Latency> {
        let mut sorted = samples_ns.to_vec();
        sorted.sort_unstable();
        let at = |p| percentile(&sorted, p);
        Some(Latency {
            min: *sorted.first()?,
            mean: sorted.iter().map(|&s| s as f64).sum::<f64>() / sorted.len() as f64,
            p50: at(50.0)?,
            p90: at(90.0)?,
            p99: at(99.0)?,
            p999: at(99.9)?,
            max: *sorted.last()?,
            samples: sorted.len(),
        })
    }
}

/// Median, min and max of one figure over the measured runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        Some(Spread {
            median: median(values)?,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn nearest_rank_percentiles_by_hand() {
        // 1..=10: p50 is the 5th value, p90 the 9th, p99 and p99.9 the 10th.
        let s: Vec<u64> = (1..=10).collect();
        assert_eq!(percentile(&s, 50.0), Some(5));
        assert_eq!(percentile(&s, 90.0), Some(9));
        assert_eq!(percentile(&s, 91.0), Some(10));
        assert_eq!(percentile(&s, 99.9), Some(10));
        // 1000 samples 1..=1000: p99.9 is the 999th, p99 the 990th.
        let s: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&s, 99.9), Some(999));
        assert_eq!(percentile(&s, 99.0), Some(990));
        assert_eq!(percentile(&s, 100.0), Some(1000));
        assert_eq!(percentile(&[7], 50.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn latency_summary_of_unsorted_samples() {
        let l = Latency::of(&[40, 10, 30, 20]).unwrap();
        assert_eq!((l.min, l.p50, l.p90, l.max), (10, 20, 40, 40));
        assert_eq!(l.mean, 25.0);
        assert_eq!(l.samples, 4);
        assert!(Latency::of(&[]).is_none());
    }

    #[test]
    fn a_run_disturbed_by_a_cron_job_is_an_outlier() {
        // median 100, deviations 0,1,1,2,60 → MAD 1; 0.6745·60 > 3.5.
        let runs = [100.0, 101.0, 99.0, 40.0, 102.0];
        assert_eq!(outliers(&runs), vec![3]);
        // Ordinary noise flags nothing.
        assert!(outliers(&[100.0, 103.0, 98.0, 101.0]).is_empty());
        // Identical runs but one: that one.
        assert_eq!(outliers(&[5.0, 5.0, 5.0, 9.0]), vec![3]);
        assert!(outliers(&[]).is_empty());
    }

    #[test]
    fn spread_keeps_min_and_max() {
        let s = Spread::of(&[3.0, 9.0, 1.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 9.0));
    }
}
