//! CPU time used by this process (getrusage), for `--verbose`: a copy
//! that keeps a core busy at a given rate says more about the engine than
//! its rate alone.

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

#[cfg(test)]
mod tests {
    #[test]
    fn busy_work_shows_up() {
        let before = super::cpu_times().unwrap();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let after = super::cpu_times().unwrap();
        assert!(after.0 + after.1 > before.0 + before.1, "{x}");
    }
}
