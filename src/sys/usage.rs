//! CPU time the process has used, so a benchmark can say how much CPU a
//! test cost beside how fast it went (a fast copy that burns a core is not
//! the same result as one that sleeps in the kernel).

use std::time::Duration;

/// User plus system CPU time of the whole process (all threads) so far.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage struct through the pointer, which
    // points at a live, zero-initialised value of that type.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let of = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
    of(usage.ru_utime) + of(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_costs_cpu_time() {
        let before = cpu_time();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(cpu_time() - before >= Duration::from_millis(10));
    }
}
