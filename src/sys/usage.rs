//! CPU time used by this process (getrusage): `--verbose` and `ddx bench`
//! report it beside a rate, because a copy that keeps a core busy at a
//! given rate says more about the engine than its rate alone.

use std::time::Duration;

/// User and system CPU time of this process and its threads so far.
pub fn cpu_times() -> Option<(Duration, Duration)> {
    // SAFETY: getrusage fills the zero-initialised struct it is given and
    // keeps no pointer to it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return None;
        }
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Some((time(usage.ru_utime), time(usage.ru_stime)))
}

/// User plus system CPU time so far (zero if the kernel will not say).
pub fn cpu_time() -> Duration {
    cpu_times().map_or(Duration::ZERO, |(user, system)| user + system)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_up() {
        // Spin until the CPU time grows (on a loaded machine the wall time
        // it takes says nothing); a clock that never grows fails after
        // seconds of spinning.
        let before = cpu_time();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while cpu_time() - before < Duration::from_millis(10)
            && start.elapsed() < Duration::from_secs(10)
        {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        assert!(cpu_time() - before >= Duration::from_millis(10), "{x}");
    }
}
