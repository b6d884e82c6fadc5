//! A tiny seeded pseudo-random generator for the case generator.
//!
//! The crate has no `rand` dev-dependency, and we want the case list to be a
//! pure function of `(seed, case index)` forever: a library generator may
//! change its algorithm between versions, which would silently renumber every
//! reproduction command printed in old logs. SplitMix64 is ten lines, passes
//! the statistical tests that matter for test generation, and is what
//! xoshiro's authors recommend for seeding.

pub struct Rng {
    state: u64,
}

impl Rng {
    /// Each case gets its own stream, so a case can be regenerated alone
    /// (`DDX_DIFF_ONLY`) and workers can generate cases in any order.
    pub fn for_case(seed: u64, index: u64) -> Rng {
        let mut rng = Rng {
            state: seed ^ index.wrapping_mul(0xD134_2543_DE82_EF95),
        };
        // Discard one output so neighbouring indices do not start correlated.
        rng.next_u64();
        rng
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`. The modulo bias is irrelevant at test scale.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        assert!(lo <= hi, "empty range {lo}..={hi}");
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.next_u64() % 100 < u64::from(percent)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() - 1)]
    }

    /// Index into `weights`, chosen proportionally to the weights.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut roll = (self.next_u64() % u64::from(total)) as u32;
        for (index, weight) in weights.iter().enumerate() {
            if roll < *weight {
                return index;
            }
            roll -= weight;
        }
        unreachable!("roll is below the total weight")
    }

    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.range(0, i);
            items.swap(i, j);
        }
    }
}
