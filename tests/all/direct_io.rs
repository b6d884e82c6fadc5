//! O_DIRECT against GNU dd on real block devices: loop devices with 512-
//! and 4096-byte logical sectors, over files in a temporary directory.
//!
//! Direct I/O is where alignment matters: a request must be a multiple of
//! the device's logical block size, from an aligned buffer, and GNU turns
//! O_DIRECT off for the final partial block of a copy. ddx must give the
//! same bytes, statistics and errors with every backend. Needs root and
//! losetup; skips (`rigs::skip`) otherwise.

use std::path::Path;

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::{invoked_as, DDX};
use crate::rigs::fixture::{Compare, BACKENDS};
use crate::rigs::{LoopDevice, LoopOptions};

/// A loop device with `sector_size`-byte sectors; None, after skipping,
/// where one cannot be attached here.
fn attach(backing: &Path, sector_size: u32) -> Option<LoopDevice> {
    let options = LoopOptions {
        sector_size: Some(sector_size),
        ..LoopOptions::default()
    };
    rigs::or_skip(LoopDevice::attach(backing, options))
}

/// Two devices with the same starting content: one for GNU dd to write,
/// one for ddx; after each run they must be identical again.
struct Pair {
    _dir: tempfile::TempDir,
    gnu: LoopDevice,
    ddx: LoopDevice,
    initial: Vec<u8>,
}

fn pair(sector_size: u32) -> Option<Pair> {
    let dir = tempfile::tempdir().unwrap();
    let initial = pattern(7, 1 << 20);
    let gnu_backing = dir.path().join("gnu.img");
    let ddx_backing = dir.path().join("ddx.img");
    std::fs::write(&gnu_backing, &initial).unwrap();
    std::fs::write(&ddx_backing, &initial).unwrap();
    let gnu = attach(&gnu_backing, sector_size)?;
    let ddx = attach(&ddx_backing, sector_size)?;
    Some(Pair {
        _dir: dir,
        gnu,
        ddx,
        initial,
    })
}

impl Pair {
    fn reset(&self) {
        for device in [&self.gnu.path, &self.ddx.path] {
            std::fs::write(device, &self.initial).unwrap();
        }
    }
}

/// A case's operands, with `NS` read as N sectors in bytes ("bs=16S" is
/// "bs=8192" on 512-byte sectors).
fn in_sectors(case: &str, sector_size: u32) -> Vec<String> {
    case.split(' ')
        .map(|operand| match operand.split_once('=') {
            Some((key, sectors)) if sectors.ends_with('S') => {
                let n: u32 = sectors.trim_end_matches('S').parse().unwrap();
                format!("{key}={}", n * sector_size)
            }
            _ => operand.to_owned(),
        })
        .collect()
}

/// For each logical sector size, a pair of devices and, for each case, a
/// comparison on every backend with the case's operands (in bytes), for
/// `check` to finish and run.
fn on_each_sector_size(cases: &[&str], check: impl Fn(&Pair, Compare)) {
    for sector_size in [512, 4096] {
        let Some(devices) = pair(sector_size) else {
            return;
        };
        for case in cases {
            let compare = Compare::new()
                .args(in_sectors(case, sector_size))
                .backends(BACKENDS)
                .context(format!("sector {sector_size}"));
            check(&devices, compare);
        }
    }
}

/// Each case copies a file of `input` onto a pair of devices (each
/// sector size, every backend): ddx's device must then hold GNU's bytes.
fn writes_match_gnu(cases: &[&str], input: &[u8]) {
    let (_dir, path) = rigs::bytes::file_with("input", input);
    on_each_sector_size(cases, |devices, compare| {
        compare
            .input_path(&path)
            .outputs(&devices.gnu.path, &devices.ddx.path)
            .before_each(|| devices.reset())
            .run();
    });
}

#[test]
fn direct_writes_to_block_devices_match_gnu_dd() {
    let cases = [
        "bs=1S oflag=direct",
        "bs=16S oflag=direct",
        "bs=3S oflag=direct seek=2",
        "ibs=1S obs=8S oflag=direct",
        // Not a multiple of the sector: GNU's EINVAL, word for word.
        "bs=1000 oflag=direct",
        "bs=4S oflag=direct count=5",
    ];
    // Not a multiple of any sector size: the last block is partial.
    writes_match_gnu(&cases, &pattern(3, 300_077));
}

/// With a queue depth above 1 (`BACKENDS` has threads and io_uring at
/// depth 4, and auto takes the device's), direct writes of large records go several
/// at once (`ends::write_behind`); the bytes, the statistics and the final
/// partial block (O_DIRECT turned off for it) stay GNU's, including where
/// the device ends before the input and a write in flight fails.
#[test]
fn direct_writes_in_flight_match_gnu_dd() {
    let cases = [
        "bs=8S oflag=direct",
        "bs=64S oflag=direct",
        "bs=32S oflag=direct seek=1",
        "bs=64S oflag=direct count=7",
        "bs=16S oflag=direct conv=fsync",
        // Not a divisor of the device: the write that overflows is short.
        "bs=96S oflag=direct",
    ];
    // Shorter than the 1 MiB devices, with a partial last block.
    writes_match_gnu(&cases, &pattern(5, 900_001));
    // Longer than the devices: a write fails with ENOSPC mid-copy.
    writes_match_gnu(&cases, &pattern(6, 1_500_000));
}

/// `--verbose` says when writes go several at once.
#[test]
fn verbose_says_how_many_direct_writes_are_in_flight() {
    let Some(devices) = pair(4096) else {
        return;
    };
    let (_dir, input) = rigs::bytes::file_with("input", pattern(2, 500_000));
    let ran = crate::rigs::cmd::ddx()
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", devices.ddx.path.display()))
        .args([
            "bs=64K",
            "oflag=direct",
            "--backend=threads",
            "--queue-depth=6",
            "--verbose",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "{stderr}");
    assert!(stderr.contains("writes: 6 in flight"), "{stderr}");
    let written = std::fs::read(&devices.ddx.path).unwrap();
    assert_eq!(&written[..500_000], &pattern(2, 500_000)[..]);
}

#[test]
fn direct_reads_from_block_devices_match_gnu_dd() {
    let cases = [
        "bs=1S iflag=direct",
        "bs=32S iflag=direct skip=3",
        "bs=2S iflag=direct count=9",
        "bs=1000 iflag=direct count=3",
        "bs=4S iflag=direct oflag=direct count=40",
    ];
    on_each_sector_size(&cases, |devices, compare| {
        compare.input_path(&devices.gnu.path).output_file().run();
    });
}

/// With a queue depth above 1 (`BACKENDS` asks for 4), direct reads go
/// several at once (`ends::read_ahead`): GNU's records, bytes and statistics,
/// from a device and from a file whose last block is partial (O_DIRECT's
/// EINVAL there is its end), with skip= and count=, and where the input
/// is read again after a short read.
#[test]
fn direct_reads_in_flight_match_gnu_dd() {
    let cases = [
        "bs=8S iflag=direct",
        "bs=64S iflag=direct skip=1",
        "bs=16S iflag=direct count=7",
        "bs=16S iflag=direct oflag=direct",
        "bs=96S iflag=direct",
    ];
    on_each_sector_size(&cases, |devices, compare| {
        compare.input_path(&devices.gnu.path).output_file().run();
    });
    let (_dir, input) = rigs::bytes::file_with("input", pattern(4, 300_077));
    for case in ["bs=4096 iflag=direct", "bs=65536 iflag=direct skip=2"] {
        Compare::new()
            .args(case.split(' '))
            .input_path(&input)
            .output_file()
            .backends(BACKENDS)
            .run();
    }
}

/// `--verbose` says when reads go several at once.
#[test]
fn verbose_says_how_many_direct_reads_are_in_flight() {
    let Some(devices) = pair(4096) else {
        return;
    };
    let ran = crate::rigs::cmd::ddx()
        .arg(format!("if={}", devices.ddx.path.display()))
        .args([
            "of=/dev/null",
            "bs=64K",
            "iflag=direct",
            "--queue-depth=5",
            "--verbose",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "{stderr}");
    assert!(stderr.contains("reads: 5 in flight"), "{stderr}");
}

/// A huge bs costs nothing until it is used: buffers are mapped, not
/// touched, when allocated. GNU time measures the peak: a child of this
/// binary would be charged the binary's own peak too (exec records the
/// peak of the memory it replaces, the parent's after a vfork), which the
/// tests running beside this one make large.
#[test]
fn a_huge_block_size_is_not_touched_until_used() {
    const TIME: &str = "/usr/bin/time";
    if !Path::new(TIME).exists() {
        return rigs::skip("GNU time is not installed (package time)");
    }
    let (_dir, input) = rigs::bytes::file_with("small", pattern(1, 10_000));
    for backend in BACKENDS {
        let out = invoked_as(TIME, TIME)
            .args(["-f", "%M", DDX])
            .args(*backend)
            .arg(format!("if={}", input.display()))
            .args(["of=/dev/null", "bs=1G", "status=none"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend:?}: {stderr}");
        let max_rss_kib: u64 = stderr.trim().parse().expect("GNU time's %M");
        let max_rss_mib = max_rss_kib / 1024;
        assert!(
            max_rss_mib < 64,
            "bs=1G with {backend:?} used {max_rss_mib} MiB of memory"
        );
    }
}
