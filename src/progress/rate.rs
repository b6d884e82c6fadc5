//! The recent rate: bytes over the last few seconds, from the samples the
//! ticker takes once a second. An average since the start hides a copy that
//! has slowed down (a full write cache, a failing disk); this does not.

use std::collections::VecDeque;

/// How far back the recent rate looks.
pub const WINDOW_NS: u64 = 5_000_000_000;

#[derive(Debug, Default)]
pub struct RateWindow {
    /// (elapsed ns, bytes), oldest first, spanning at most WINDOW_NS.
    samples: VecDeque<(u64, u64)>,
}

impl RateWindow {
    /// Record `bytes` at `elapsed_ns`; returns the rate in bytes per second
    /// over the window (the average since the start until a second sample).
    pub fn sample(&mut self, elapsed_ns: u64, bytes: u64) -> f64 {
        self.samples.push_back((elapsed_ns, bytes));
        while self
            .samples
            .get(1)
            .is_some_and(|&(t, _)| elapsed_ns.saturating_sub(t) >= WINDOW_NS)
        {
            self.samples.pop_front();
        }
        let (since, from) = match self.samples.front() {
            Some(&(t, b)) if t < elapsed_ns => (t, b),
            _ => (0, 0),
        };
        rate(bytes.saturating_sub(from), elapsed_ns.saturating_sub(since))
    }
}

/// Bytes per second; 0 before any time has passed.
pub fn rate(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 1e9 / ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn first_sample_is_the_average() {
        let mut w = RateWindow::default();
        assert_eq!(w.sample(2 * S, 200), 100.0);
    }

    #[test]
    fn a_slowdown_shows_in_the_recent_rate() {
        let mut w = RateWindow::default();
        // 100 B/s for 10 s, then stalled for 6 s.
        for s in 1..=10 {
            w.sample(s * S, s * 100);
        }
        let mut recent = 0.0;
        for s in 11..=16 {
            recent = w.sample(s * S, 1000);
        }
        assert_eq!(recent, 0.0);
        assert!(rate(1000, 16 * S) > 60.0, "the average still looks fine");
    }
}
