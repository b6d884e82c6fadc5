//! The block-size rule: the smallest block size that reaches a fraction
//! (95%) of the best throughput measured. Bigger blocks past that point
//! buy nothing but memory and coarser progress; smaller ones cost speed.
//! `ddx bench` reports it and a copy's `bs=auto` uses the same function,
//! so the two can never disagree.

/// The fraction of the best throughput `ddx bench` recommends against.
pub const NEAR_BEST: f64 = 0.95;

/// The smallest block size among `points` (block size, throughput) whose
/// throughput is at least `fraction` of the best one. None when there is
/// no point with a positive, finite throughput.
pub fn smallest_near_best(points: &[(u64, f64)], fraction: f64) -> Option<u64> {
    let valid = || {
        points
            .iter()
            .filter(|(_, throughput)| throughput.is_finite() && *throughput > 0.0)
    };
    let best = valid().map(|&(_, t)| t).fold(f64::NAN, f64::max);
    if best.is_nan() {
        return None;
    }
    valid()
        .filter(|&&(_, t)| t >= fraction * best)
        .map(|&(bs, _)| bs)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_knee_of_the_curve_wins() {
        let points = [
            (4096, 100.0),
            (65536, 800.0),
            (MIB, 960.0),
            (4 * MIB, 1000.0),
            (16 * MIB, 990.0),
        ];
        assert_eq!(smallest_near_best(&points, 0.95), Some(MIB));
        // A stricter rule moves to the best point itself.
        assert_eq!(smallest_near_best(&points, 1.0), Some(4 * MIB));
        assert_eq!(smallest_near_best(&points, 0.5), Some(65536));
    }

    #[test]
    fn exactly_at_the_threshold_counts() {
        let points = [(512, 95.0), (1024, 100.0)];
        assert_eq!(smallest_near_best(&points, 0.95), Some(512));
    }

    #[test]
    fn order_does_not_matter_and_bad_points_are_ignored() {
        let points = [
            (16 * MIB, 1000.0),
            (512, f64::NAN),
            (MIB, 970.0),
            (4096, f64::INFINITY),
            (8192, 0.0),
        ];
        assert_eq!(smallest_near_best(&points, 0.95), Some(MIB));
        assert_eq!(smallest_near_best(&[], 0.95), None);
        assert_eq!(smallest_near_best(&[(512, 0.0)], 0.95), None);
    }
}
