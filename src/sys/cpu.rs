//! How busy the CPUs are: the kernel's CPU pressure (PSI,
//! `/proc/pressure/cpu`), which the planner weighs before it gives the
//! copy a reader thread that needs a CPU of its own. What CPUs the process
//! may use at all (affinity, quota) is std's `available_parallelism`.

use std::path::Path;

/// The share of the last ten seconds in which some runnable task waited
/// for a CPU, in hundredths of a percent; None where the kernel has no
/// PSI (before 4.20, or `psi=0`).
pub fn pressure() -> Option<u32> {
    std::fs::read_to_string(Path::new("/proc/pressure/cpu"))
        .ok()
        .as_deref()
        .and_then(super::memory::parse_pressure)
}
