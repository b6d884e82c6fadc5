//! The block-size rule: the smallest block size whose throughput reaches
//! a share (95%) of the best throughput measured. Bigger blocks past that
//! point buy nothing but memory and coarser progress; smaller ones cost
//! speed. `ddx bench` reports it and a copy's `bs=auto` uses the same
//! function, so the two can never disagree.
//!
//! The rule is simple; estimating "the best throughput" and "reaching it"
//! from noisy runs is not. On a disk whose curve is flat from some size
//! on, the largest of many noisy per-size figures is the luckiest one,
//! not the plateau, and a 5% margin is smaller than the noise between
//! runs on a shared machine, so the naive reading of the rule (smallest
//! median within 95% of the largest median) wandered along the plateau
//! from run to run. [`judge`] therefore works on figures a reader can
//! check, and puts the estimating into two numbers it reports:
//!
//! 1. each size's **figure** is the median of its samples (one per
//!    round), by [`super::median`]: the figure a report prints;
//! 2. the **reference** the bar is a share of is the median of the three
//!    highest figures (the plateau), not the highest, so one lucky size
//!    does not raise the bar; a figure above the plateau by more than the
//!    noise margin (below) is a real peak, and the reference is then that
//!    figure less the margin;
//! 3. the **bar** is 95% of the reference, less what the measurement
//!    cannot resolve ([`Z`] standard errors of a median, from the scatter
//!    between rounds), never below [`FLOOR`] of the best; the answer is
//!    the smallest size whose figure reaches the bar.
//!
//! A report states every share as a share of the **best**, the highest
//! figure, so that no size is ever "above 100% of the best" (two of the
//! three highest figures are above their median); the bar is stated both
//! as a throughput and as a share of the best, and the floor is a share
//! of the best too, so the floor a report states and the bar it prints
//! can be compared as they stand.
//!
//! The noise is measured within rounds: each sample is divided by its
//! round's plateau, so a round that was slow as a whole (another job woke
//! up) does not count as scatter between sizes. Without noise (identical
//! rounds), or with one sample per size (no scatter to measure), the bar
//! is 95% of the plateau: the plain rule.
//!
//! No rule makes one run's answer the next run's where a size measures
//! within the noise of its bar: the verdict is then the noise's, and a
//! disk whose curve rises gently past its knee (most do) has a size near
//! the line more often than not. A disk whose speed changes between runs
//! (a shared or throttled volume) moves its knee with it: where it levels
//! off lower, smaller sizes reach 95% of it. So [`judge`] says how firmly
//! it decided: the neighbouring sizes close enough to the bar that
//! another run may answer them ([`CLOSE`]), and whether the best
//! throughput held still between rounds ([`UNSTEADY`]).
//!
//! What one sample is, is the caller's: both callers time every request
//! and take the block size over a round's median request time
//! ([`request_rate`]), so a stall behind another process's I/O slows a
//! few requests, not the figure.

use super::median;

/// The fraction of the best throughput `ddx bench` recommends against.
pub const NEAR_BEST: f64 = 0.95;

/// How many standard errors below the 95% line a size may measure and
/// still count as reaching it (about a one-sided 98% confidence).
pub const Z: f64 = 2.0;

/// However noisy the runs, a size measured below this fraction of the
/// best (the highest figure, not the reference) is not recommended: the
/// tolerance can bridge noise, not a real shortfall. Of the best, so that
/// the floor a report states and the bar it prints, a share of the best
/// like every share it prints, are in one denominator.
pub const FLOOR: f64 = 0.85;

/// How many of the highest figures the plateau is the median of.
const PLATEAU_OF: usize = 3;

/// Past this spread between the highest and the lowest round's plateau,
/// the target did not hold still while it was measured: its speed, not
/// the noise around it, changed between rounds (a shared or throttled
/// volume), and the knee moves with the speed it levels off at.
pub const UNSTEADY: f64 = 1.25;

/// Within how many standard errors of the bar a size's verdict counts
/// as a close call. A repeat run measures afresh, so its figure and this
/// one differ by sqrt(2) standard errors typically; 1.8 of them is a
/// one-in-ten chance that the next run lands on the other side.
pub const CLOSE: f64 = 1.8;

/// The one measure of a round at one block size: the block size over the
/// round's median request time (an observed request's, see
/// [`super::observed_median`]), in bytes per second. None when no request
/// was timed.
pub fn request_rate(block_size: u64, latencies_ns: &[u64]) -> Option<f64> {
    let median_ns = super::observed_median(latencies_ns)?;
    Some(block_size as f64 * 1e9 / median_ns.max(1) as f64)
}

/// The median of the highest [`PLATEAU_OF`] of `values`; None when empty.
fn plateau(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut all: Vec<f64> = values.collect();
    all.sort_by(|a, b| b.total_cmp(a));
    all.truncate(PLATEAU_OF);
    median(&all)
}

/// What the rule decided from one set of rounds, and how firmly: the
/// answer alone cannot tell a user whether the next run will give it too.
/// Every share is of `best_bytes_per_sec`, the highest figure (so none is
/// above 1), and every figure it compares is a size's median, so a report
/// that prints those medians, the best and the bar can be checked by
/// reading it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Judgement {
    /// The recommended block size.
    pub block_size: u64,
    /// Its figure (median throughput) as a fraction of the best.
    pub of_best: f64,
    /// The best: the highest figure, and the size that measured it.
    pub best_bytes_per_sec: f64,
    pub best_block_size: u64,
    /// The bar a figure had to reach, as a fraction of the best and in
    /// bytes per second.
    pub bar: f64,
    pub bar_bytes_per_sec: f64,
    /// What the bar is a share of, and how it was found.
    pub reference: Reference,
    pub reference_bytes_per_sec: f64,
    /// The bar as a fraction of the reference: [`NEAR_BEST`] less the
    /// noise margin, or more where the floor sets the bar.
    pub bar_of_reference: f64,
    /// Whether the floor ([`FLOOR`] of the best) set the bar, above the
    /// noise's line.
    pub at_floor: bool,
    /// The neighbouring sizes a run with other noise could recommend
    /// instead (within [`CLOSE`] standard errors of the bar): the next
    /// smaller one when it fell short of the bar by little; when the
    /// answer itself cleared it by little, the next one that cleared it.
    pub close_calls: Vec<Neighbour>,
    /// The lowest and highest plateau of a round (bytes per second): how
    /// far the target's speed moved while it was measured.
    pub plateau_low: f64,
    pub plateau_high: f64,
    /// Whether the plateau stayed within [`UNSTEADY`] between rounds.
    pub steady: bool,
    /// Each size's figure (the median of its samples), smallest size
    /// first: what the shares above are shares of.
    #[serde(skip)]
    pub figures: Vec<(u64, f64)>,
}

/// What the bar is a share of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reference {
    /// The median of the three highest figures.
    Plateau,
    /// A figure above the plateau by more than the noise, less the noise.
    Peak,
}

impl Reference {
    /// What the reference is, in a report's words.
    pub fn text(self) -> &'static str {
        match self {
            Reference::Plateau => "the median of the three highest",
            Reference::Peak => "a peak above the rest, less the noise",
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Neighbour {
    pub block_size: u64,
    pub of_best: f64,
}

impl Judgement {
    /// `figure` as a fraction of the best.
    pub fn share(&self, figure: f64) -> f64 {
        figure / self.best_bytes_per_sec
    }
}

/// The smallest block size in `points` that reaches `fraction` of the
/// best throughput; see [`judge`].
pub fn smallest_near_best(points: &[(u64, Vec<f64>)], fraction: f64) -> Option<u64> {
    judge(points, fraction).map(|j| j.block_size)
}

/// The rule, with how firmly it was decided. Each point is a block size
/// and its throughput samples, one per round, in round order (sample `r`
/// of every size was measured in the same round); a size may have fewer
/// samples than others. Samples that are not positive and finite are
/// ignored; None when no sample is left.
pub fn judge(points: &[(u64, Vec<f64>)], fraction: f64) -> Option<Judgement> {
    let valid = |t: &f64| t.is_finite() && *t > 0.0;
    // 1. The figures, and the plateau of them.
    let mut figures: Vec<(u64, f64)> = points
        .iter()
        .filter_map(|(bs, samples)| {
            let kept: Vec<f64> = samples.iter().copied().filter(valid).collect();
            Some((*bs, median(&kept)?))
        })
        .collect();
    figures.sort_by_key(|(bs, _)| *bs);
    let plateau_of_figures = plateau(figures.iter().map(|f| f.1))?;
    // The noise, from samples divided by their round's plateau (in logs).
    let rounds = points.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); points.len()];
    let mut round_plateaus = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let of_round = || {
            points
                .iter()
                .map(move |(_, s)| s.get(round).copied().filter(valid))
        };
        let Some(reference) = plateau(of_round().flatten().map(f64::ln)) else {
            continue;
        };
        round_plateaus.push(reference.exp());
        for (sample, out) in of_round().zip(ratios.iter_mut()) {
            if let Some(t) = sample {
                out.push(t.ln() - reference);
            }
        }
    }
    // One noise figure for the whole curve: every size has too few samples
    // to estimate its own, and the scatter is the disk's and the
    // machine's, much the same at every size. Differences between two
    // rounds of one size, not deviations from its median: with three
    // samples one deviation is always zero and the median of them would
    // understate the noise.
    let differences: Vec<f64> = ratios
        .iter()
        .flat_map(|r| {
            r.iter()
                .enumerate()
                .flat_map(move |(i, a)| r[i + 1..].iter().map(move |b| (a - b).abs()))
        })
        .collect();
    // The difference of two samples has sqrt(2) times their standard
    // deviation, and 0.6745 of a standard deviation is the median of its
    // absolute value.
    let sigma = median(&differences).unwrap_or(0.0) / (0.6745 * std::f64::consts::SQRT_2);
    // 1.2533 = sqrt(pi/2): the standard error of a median is that much
    // larger than a mean's. One standard error for all sizes, from the
    // most rounds any size has, so that one bar serves the whole curve.
    let samples = points
        .iter()
        .map(|(_, s)| s.iter().filter(|t| valid(t)).count())
        .max()
        .unwrap_or(1);
    let standard_error = 1.2533 * sigma / (samples as f64).sqrt();
    let margin = (Z * standard_error).exp();
    // 2. The reference: the plateau, or a figure above it by more than the
    // noise (a real peak), less the noise.
    let (best_block_size, best) =
        figures
            .iter()
            .copied()
            .fold((0, 0.0), |top, f| if f.1 > top.1 { f } else { top });
    let (reference, reference_kind) = if best / margin > plateau_of_figures {
        (best / margin, Reference::Peak)
    } else {
        (plateau_of_figures, Reference::Plateau)
    };
    // 3. The bar, and the smallest size that reaches it: the noise's line,
    // or the floor, a share of the best (the denominator of every share
    // a report prints), where that is higher. The epsilon: 95 over 100
    // can round below 0.95.
    let noise_line = fraction / margin * reference;
    let floor_line = FLOOR.min(fraction) * best;
    let at_floor = floor_line > noise_line;
    let line = noise_line.max(floor_line);
    let bar_of_reference = line / reference;
    let reaches = |figure: f64| figure >= line * (1.0 - 1e-12);
    let chosen = figures.iter().position(|f| reaches(f.1))?;
    let neighbour = |i: usize| Neighbour {
        block_size: figures[i].0,
        of_best: figures[i].1 / best,
    };
    // Another run may decide differently where a size measured close to
    // the bar: the size before the answer a little short of it (a run that
    // measures it a little higher takes it), the answer a little over (a
    // run that measures it a little lower passes it over for the next).
    let close_to_bar = |i: usize| (figures[i].1.ln() - line.ln()).abs() < CLOSE * standard_error;
    let mut close_calls = Vec::new();
    if let Some(below) = chosen.checked_sub(1).filter(|&b| close_to_bar(b)) {
        close_calls.push(neighbour(below));
    }
    if close_to_bar(chosen) {
        // Passed over, the answer would be the next size that reaches the
        // bar, which need not be the next size.
        let next = (chosen + 1..figures.len()).find(|&i| reaches(figures[i].1));
        close_calls.extend(next.map(neighbour));
    }
    let plateau_low = round_plateaus.iter().copied().fold(f64::INFINITY, f64::min);
    let plateau_high = round_plateaus.iter().copied().fold(0.0, f64::max);
    Some(Judgement {
        block_size: figures[chosen].0,
        of_best: figures[chosen].1 / best,
        best_bytes_per_sec: best,
        best_block_size,
        bar: line / best,
        bar_bytes_per_sec: line,
        reference: reference_kind,
        reference_bytes_per_sec: reference,
        bar_of_reference,
        at_floor,
        close_calls,
        plateau_low,
        plateau_high,
        steady: plateau_high <= plateau_low * UNSTEADY,
        figures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Single samples: no scatter to measure, so the plain rule.
    fn one_each(points: &[(u64, f64)]) -> Vec<(u64, Vec<f64>)> {
        points.iter().map(|&(bs, t)| (bs, vec![t])).collect()
    }

    #[test]
    fn the_knee_of_the_curve_wins() {
        let points = one_each(&[
            (4096, 100.0),
            (65536, 800.0),
            (MIB, 960.0),
            (4 * MIB, 1000.0),
            (16 * MIB, 990.0),
        ]);
        assert_eq!(smallest_near_best(&points, 0.95), Some(MIB));
        assert_eq!(smallest_near_best(&points, 0.99), Some(4 * MIB));
        assert_eq!(smallest_near_best(&points, 0.5), Some(65536));
    }

    #[test]
    fn exactly_at_the_threshold_counts() {
        let points = one_each(&[(512, 95.0), (1024, 100.0), (2048, 100.0), (4096, 100.0)]);
        assert_eq!(smallest_near_best(&points, 0.95), Some(512));
        let below = one_each(&[(512, 94.0), (1024, 100.0), (2048, 100.0), (4096, 100.0)]);
        assert_eq!(smallest_near_best(&below, 0.95), Some(1024));
    }

    #[test]
    fn order_does_not_matter_and_bad_points_are_ignored() {
        let points = one_each(&[
            (16 * MIB, 1000.0),
            (512, f64::NAN),
            (MIB, 970.0),
            (4096, f64::INFINITY),
            (8192, 0.0),
        ]);
        assert_eq!(smallest_near_best(&points, 0.95), Some(MIB));
        assert_eq!(smallest_near_best(&[], 0.95), None);
        assert_eq!(smallest_near_best(&one_each(&[(512, 0.0)]), 0.95), None);
        assert_eq!(smallest_near_best(&[(512, vec![])], 0.95), None);
    }

    #[test]
    fn a_round_that_was_slow_throughout_moves_nothing() {
        // Round 2 ran at half speed for every size (another job woke up).
        let points = vec![
            (256 << 10, vec![700.0, 350.0, 700.0]),
            (512 << 10, vec![960.0, 480.0, 960.0]),
            (MIB, vec![1000.0, 500.0, 1000.0]),
            (2 * MIB, vec![1000.0, 500.0, 1000.0]),
        ];
        assert_eq!(smallest_near_best(&points, 0.95), Some(512 << 10));
    }

    /// A small deterministic generator (xorshift64*), so the noisy curves
    /// below are the same on every machine.
    struct Noise(u64);

    impl Noise {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
        }

        /// Normally distributed, by Box-Muller.
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform().max(1e-300), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    /// `rounds` rounds over doubling sizes from 4 KiB to 16 MiB of `curve`
    /// (fraction of the plateau at each size), each sample scaled by a
    /// round factor and its own factor, both log-normal.
    fn measure(
        curve: impl Fn(u64) -> f64,
        seed: u64,
        rounds: usize,
        noise: f64,
    ) -> Vec<(u64, Vec<f64>)> {
        let mut rng = Noise(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let sizes: Vec<u64> = (12..=24).map(|k| 1u64 << k).collect();
        let mut points: Vec<(u64, Vec<f64>)> = sizes.iter().map(|&bs| (bs, vec![])).collect();
        for _ in 0..rounds {
            let round = (noise * rng.normal()).exp();
            for (bs, samples) in points.iter_mut() {
                let own = (noise * rng.normal()).exp();
                samples.push(1e9 * curve(*bs) * round * own);
            }
        }
        points
    }

    /// Three rounds of `curve` measured with `noise` answer `expected`
    /// for every one of `seeds` seeds.
    fn always_answers(curve: impl Fn(u64) -> f64, seeds: u64, noise: f64, expected: u64) {
        for seed in 0..seeds {
            let points = measure(&curve, seed, 3, noise);
            let answer = smallest_near_best(&points, NEAR_BEST);
            assert_eq!(answer, Some(expected), "seed {seed}: {points:?}");
        }
    }

    /// What a report prints is enough to check the answer: each figure is
    /// its size's median, the best is the highest of them, the reference
    /// the median of the three highest (or a peak above it less the
    /// margin), the answer is the smallest size at or over the bar, and
    /// every share is the figure over the best, so none is above 1.
    #[test]
    fn the_answer_can_be_checked_on_the_figures() {
        let mut peaks = 0;
        for (seed, noise) in (0..200).zip([0.0, 0.02, 0.05, 0.15].into_iter().cycle()) {
            let points = measure(just_short_at_512k, seed, 6, noise);
            let j = judge(&points, NEAR_BEST).unwrap();
            let medians: Vec<(u64, f64)> = points
                .iter()
                .map(|(bs, s)| (*bs, median(s).unwrap()))
                .collect();
            assert_eq!(j.figures, medians, "seed {seed}");
            let mut highest: Vec<f64> = medians.iter().map(|m| m.1).collect();
            highest.sort_by(|a, b| b.total_cmp(a));
            assert_eq!(j.best_bytes_per_sec, highest[0], "seed {seed}");
            let best_at = medians.iter().find(|m| m.1 == highest[0]).unwrap().0;
            assert_eq!(j.best_block_size, best_at, "seed {seed}");
            let plateau = median(&highest[..3]).unwrap();
            match j.reference {
                Reference::Plateau => assert_eq!(j.reference_bytes_per_sec, plateau),
                Reference::Peak => {
                    peaks += 1;
                    assert!(j.reference_bytes_per_sec > plateau, "seed {seed}");
                    assert!(j.reference_bytes_per_sec < highest[0], "seed {seed}");
                }
            }
            // Never below the floor, a share of the best; above 95% of
            // the reference only where the floor set it.
            assert!(j.bar >= FLOOR * (1.0 - 1e-12), "seed {seed}: {j:?}");
            if j.at_floor {
                assert!((j.bar - FLOOR).abs() < 1e-12, "seed {seed}: {j:?}");
            } else {
                assert!(j.bar_of_reference <= NEAR_BEST, "seed {seed}: {j:?}");
            }
            let line = j.bar_of_reference * j.reference_bytes_per_sec;
            assert!((j.bar_bytes_per_sec - line).abs() <= 1e-9 * line);
            assert!((j.bar - line / highest[0]).abs() < 1e-12);
            assert!(j.bar <= j.bar_of_reference, "seed {seed}");
            let chosen = medians.iter().position(|m| m.1 >= line * (1.0 - 1e-12));
            assert_eq!(Some(medians[chosen.unwrap()].0), Some(j.block_size));
            assert_eq!(j.of_best, j.share(medians[chosen.unwrap()].1));
            assert!(j.of_best <= 1.0 && j.of_best >= j.bar * (1.0 - 1e-12));
            for &(_, figure) in &medians {
                assert!(j.share(figure) <= 1.0, "seed {seed}");
            }
            for call in &j.close_calls {
                let figure = medians.iter().find(|m| m.0 == call.block_size).unwrap().1;
                assert_eq!(call.of_best, j.share(figure), "seed {seed}");
            }
        }
        // The noisy seeds include real peaks: both references are checked.
        assert!(peaks > 0 && peaks < 200, "{peaks} peaks");
    }

    /// Flat from 1 MiB; 512 KiB clearly short of it.
    fn flat_from_1mib(bs: u64) -> f64 {
        match bs {
            b if b >= MIB => 1.0,
            b if b == MIB / 2 => 0.75,
            b => 0.75 * b as f64 / (MIB / 2) as f64,
        }
    }

    /// Flat from 1 MiB; 512 KiB at 93%, just short of the line.
    fn just_short_at_512k(bs: u64) -> f64 {
        match bs {
            b if b >= MIB => 1.0,
            b if b == MIB / 2 => 0.93,
            b => 0.6 * b as f64 / (MIB / 4) as f64,
        }
    }

    /// What the rule used to be: the smallest per-size median within
    /// `fraction` of the largest median.
    fn old_rule(points: &[(u64, Vec<f64>)], fraction: f64) -> Option<u64> {
        let medians: Vec<(u64, f64)> = points
            .iter()
            .map(|(bs, s)| (*bs, median(s).unwrap()))
            .collect();
        let best = medians.iter().map(|m| m.1).fold(f64::NAN, f64::max);
        medians
            .iter()
            .filter(|m| m.1 >= fraction * best)
            .map(|m| m.0)
            .min()
    }

    #[test]
    fn a_flat_curve_gives_the_same_answer_whatever_the_noise() {
        let mut old_answers = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let points = measure(flat_from_1mib, seed, 3, 0.05);
            assert_eq!(
                smallest_near_best(&points, NEAR_BEST),
                Some(MIB),
                "seed {seed}: {points:?}"
            );
            old_answers.insert(old_rule(&points, NEAR_BEST));
        }
        // The old rule wandered along the plateau on the same data.
        assert!(old_answers.len() >= 3, "{old_answers:?}");
    }

    #[test]
    fn a_curve_that_keeps_rising_moves_the_answer_up() {
        // The same noise as the flat curve, but the plateau starts at
        // 4 MiB: 2 MiB is still 25% short of it.
        let rising = |bs: u64| flat_from_1mib(bs / 4);
        always_answers(rising, 200, 0.05, 4 * MIB);
        // Heavy noise may blur the 95% line, but a size far short of the
        // plateau (256 KiB at 38%) is never recommended.
        for seed in 0..200 {
            let points = measure(flat_from_1mib, seed, 3, 0.3);
            let answer = smallest_near_best(&points, NEAR_BEST).unwrap();
            assert!(answer >= MIB / 2, "seed {seed}: {answer}");
        }
    }

    #[test]
    fn a_size_short_of_the_line_by_less_than_the_noise_is_not_ruled_out() {
        // 512 KiB sits at 93%, closer to the line than 3 rounds with 5%
        // noise can resolve. The old rule, against a noise-inflated best,
        // almost never took it; the new one mostly does (a size this
        // close to the line still flips now and then: that is the price
        // of a sharp 95%).
        let curve = just_short_at_512k;
        let (mut new, mut old) = (0, 0);
        for seed in 0..200 {
            let points = measure(curve, seed, 3, 0.05);
            new += usize::from(smallest_near_best(&points, NEAR_BEST) == Some(MIB / 2));
            old += usize::from(old_rule(&points, NEAR_BEST) == Some(MIB / 2));
        }
        assert!(new >= 140, "new rule: {new} of 200");
        assert!(old <= 30, "old rule: {old} of 200");
        // Measured without noise, 93% is short of 95%.
        let exact = measure(curve, 1, 3, 0.0);
        assert_eq!(smallest_near_best(&exact, NEAR_BEST), Some(MIB));
    }

    #[test]
    fn a_clear_knee_is_no_close_call() {
        // 512 KiB at 75% is never in doubt. Now and then 1 MiB itself
        // measures a few percent low (its median against the three
        // highest), close enough to its bar that 2 MiB is named.
        let mut named = 0;
        for seed in 0..200 {
            let points = measure(flat_from_1mib, seed, 6, 0.05);
            let judgement = judge(&points, NEAR_BEST).unwrap();
            assert_eq!(judgement.block_size, MIB, "seed {seed}");
            for close in &judgement.close_calls {
                assert_eq!(close.block_size, 2 * MIB, "seed {seed}: {judgement:?}");
                named += 1;
            }
        }
        assert!(named <= 30, "named 2 MiB in {named} of 200");
        // Measured without noise: the answer's share of the best, exactly.
        let exact = judge(&measure(flat_from_1mib, 1, 3, 0.0), NEAR_BEST).unwrap();
        assert!((exact.of_best - 1.0).abs() < 1e-9, "{exact:?}");
        assert!(exact.steady);
        assert!((exact.plateau_low - 1e9).abs() < 1.0, "{exact:?}");
    }

    #[test]
    fn a_neighbour_within_the_noise_is_named() {
        // 512 KiB at 93%: whichever of 512 KiB and 1 MiB a run answers,
        // it names the other as what another run may answer.
        let curve = just_short_at_512k;
        let mut named = 0;
        for seed in 0..200 {
            let judgement = judge(&measure(curve, seed, 6, 0.05), NEAR_BEST).unwrap();
            let other = match judgement.block_size {
                MIB => MIB / 2,
                b if b == MIB / 2 => MIB,
                b => panic!("seed {seed}: answered {b}"),
            };
            let sizes: Vec<u64> = judgement.close_calls.iter().map(|c| c.block_size).collect();
            if sizes.contains(&other) {
                named += 1;
            }
            assert!(
                sizes.iter().all(|&b| b == other || b == 2 * MIB),
                "seed {seed}: {judgement:?}"
            );
        }
        // Silent only where 512 KiB measured far from its bar.
        assert!(named >= 120, "named the neighbour in {named} of 200");
        // Without noise there is nothing to be unsure about.
        let exact = judge(&measure(curve, 1, 6, 0.0), NEAR_BEST).unwrap();
        assert_eq!((exact.block_size, exact.close_calls), (MIB, vec![]));
        assert!((exact.of_best - 1.0).abs() < 1e-9);
    }

    #[test]
    fn passed_over_the_answer_would_be_the_next_size_that_clears() {
        // 512 KiB right at the line, 1 MiB in a notch below the floor:
        // were 512 KiB passed over, 2 MiB would be the answer, so 2 MiB is
        // what a close call names, never 1 MiB.
        let notched = |bs: u64| match bs {
            b if b >= 2 * MIB => 1.0,
            b if b == MIB => 0.8,
            b if b == MIB / 2 => 0.95,
            b => 0.5 * b as f64 / (MIB / 4) as f64,
        };
        let mut named = 0;
        for seed in 0..200 {
            let judgement = judge(&measure(notched, seed, 6, 0.03), NEAR_BEST).unwrap();
            if judgement.block_size != MIB / 2 {
                continue;
            }
            for close in &judgement.close_calls {
                assert_eq!(close.block_size, 2 * MIB, "seed {seed}: {judgement:?}");
                named += 1;
            }
        }
        assert!(named >= 50, "named 2 MiB in {named} of 200");
    }

    #[test]
    fn a_target_whose_speed_moved_is_unsteady() {
        // Rounds 1-3 at full speed, rounds 4-6 at 60% (a throttled
        // volume's burst ran out): the answer still comes from the ratios,
        // but the judgement says the target did not hold still.
        let mut points = measure(flat_from_1mib, 7, 6, 0.0);
        for (_, samples) in points.iter_mut() {
            for t in samples.iter_mut().skip(3) {
                *t *= 0.6;
            }
        }
        let judgement = judge(&points, NEAR_BEST).unwrap();
        assert_eq!(judgement.block_size, MIB);
        assert!(!judgement.steady, "{judgement:?}");
        assert!((judgement.plateau_high / judgement.plateau_low - 1.0 / 0.6).abs() < 1e-6);
        // Noise of 3% per round and per size is not a moving target.
        for seed in 0..50 {
            let judgement = judge(&measure(flat_from_1mib, seed, 6, 0.03), NEAR_BEST).unwrap();
            assert!(judgement.steady, "seed {seed}: {judgement:?}");
        }
    }

    /// Where the noise would lower the bar below the floor, the floor
    /// sets it, as a share of the best: the bar a report prints (of the
    /// best) is then never below the floor it states (of the best).
    #[test]
    fn heavy_noise_stops_at_the_floor_of_the_best() {
        let mut floored = 0;
        for seed in 0..100 {
            let j = judge(&measure(flat_from_1mib, seed, 3, 0.3), NEAR_BEST).unwrap();
            assert!(j.bar >= FLOOR * (1.0 - 1e-12), "seed {seed}: {j:?}");
            assert!(j.of_best >= FLOOR * (1.0 - 1e-12), "seed {seed}: {j:?}");
            if j.at_floor {
                floored += 1;
                assert!((j.bar_bytes_per_sec - FLOOR * j.best_bytes_per_sec).abs() < 1e-3);
            }
        }
        // Noise this heavy puts the noise's line below the floor mostly.
        assert!(floored >= 50, "{floored} of 100 at the floor");
    }

    #[test]
    fn a_real_peak_sets_the_bar() {
        // Quiet rounds: 1 MiB is 25% faster than the sizes around it, far
        // more than the noise, so the bar is 95% of it, which the plateau
        // at 0.8 does not reach.
        let peaked = |bs: u64| match bs {
            b if b == MIB => 1.0,
            b if b > MIB / 4 => 0.8,
            b => 0.8 * b as f64 / (MIB / 4) as f64,
        };
        always_answers(peaked, 50, 0.01, MIB);
    }
}
