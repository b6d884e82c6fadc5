//! Signalling a running ddx, which prints nothing before its handlers are
//! installed: a signal sent earlier would kill it instead.

use std::time::{Duration, Instant};

/// Wait until the child catches `signal` (seen in its /proc status), or
/// has already finished.
pub fn wait_for_handler(pid: u32, signal: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        let caught = field("SigCgt:").and_then(|mask| u64::from_str_radix(mask, 16).ok());
        let finished = field("State:").is_none_or(|state| state.starts_with('Z'));
        if finished || caught.is_some_and(|c| c & (1 << (signal - 1)) != 0) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("handler for signal {signal} never installed");
}

/// Send `signal` to our own child, which must still be there to take it.
pub fn send(pid: u32, signal: i32) {
    // SAFETY: kill(2) on our own child's pid has no memory-safety effects.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill");
}
