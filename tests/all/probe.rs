//! The probe of a disk's parallelism (planner::facts): on a device that
//! serves one request at a time and on one that serves them all at once,
//! both slow enough that no CPU hides the difference (nbdkit's delay
//! filter, with and without its noparallel filter, as the slow-device
//! lab's two kinds, exposed as files by nbdfuse), `--verbose` says what
//! was measured, the first is judged serial and keeps one direct read in
//! flight, the second is judged parallel and keeps several.

use crate::rigs;
use crate::rigs::cmd::{ddx, operand};

/// Past the probe's least size (256 MiB); a sparse image, so nothing of
/// it is on any disk.
const SIZE: u64 = 512 << 20;

/// ddx's `--verbose` lines for 4 MiB read with O_DIRECT from `device`.
fn verbose_direct_read(device: &rigs::NbdDevice) -> String {
    let out = ddx()
        .args([operand("if", &device.path), "of=/dev/null".into()])
        .args(["bs=1M", "count=4", "iflag=direct", "--verbose"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

fn line<'a>(stderr: &'a str, what: &str) -> &'a str {
    stderr
        .lines()
        .find_map(|l| l.split(&format!("{what}: ")).nth(1))
        .unwrap_or_else(|| panic!("no {what} line in {stderr}"))
}

#[test]
fn a_device_that_serves_one_request_at_a_time_is_measured_serial() {
    let Some(device) = rigs::or_skip(rigs::NbdDevice::latency(SIZE, 3, true)) else {
        return;
    };
    let stderr = verbose_direct_read(&device);
    let devices = line(&stderr, "devices");
    assert!(
        devices.contains("reads took") && devices.ends_with("serves one request at a time"),
        "{devices}"
    );
    assert!(!line(&stderr, "requests").contains("in flight"), "{stderr}");
}

#[test]
fn a_device_that_serves_requests_in_parallel_is_measured_parallel() {
    let Some(device) = rigs::or_skip(rigs::NbdDevice::latency(SIZE, 3, false)) else {
        return;
    };
    let stderr = verbose_direct_read(&device);
    let devices = line(&stderr, "devices");
    assert!(
        devices.contains("reads took") && devices.ends_with("serves requests in parallel"),
        "{devices}"
    );
    assert!(
        line(&stderr, "requests").contains("reads: "),
        "reads in flight: {stderr}"
    );
}
