//! O_DIRECT against GNU dd on real block devices: loop devices with 512-
//! and 4096-byte logical sectors, over files in a temporary directory.
//!
//! Direct I/O is where alignment matters: a request must be a multiple of
//! the device's logical block size, from an aligned buffer, and GNU turns
//! O_DIRECT off for the final partial block of a copy. ddx must give the
//! same bytes, statistics and errors with every backend. Needs root and
//! losetup; skips (`rigs::skip`) otherwise.

use std::path::Path;
use std::process::Command;

use crate::rigs;
use crate::rigs::cmd::{invoked_as, DDX};
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

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// stderr with the timing part of the last statistics line cut off.
fn comparable(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(|line| match line.find(" copied, ") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

struct Run {
    status: Option<i32>,
    stderr: String,
}

/// Runs `program`; `device` is named "DEV" in its messages, so that two
/// runs on two devices compare.
fn run(program: &str, extra: &[&str], operands: &[String], device: &Path) -> Run {
    // Both name themselves "dd" in messages, so that they compare.
    let out = invoked_as(program, "dd")
        .args(extra)
        .args(operands)
        .output()
        .expect("run");
    Run {
        status: out.status.code(),
        stderr: comparable(&out.stderr).replace(&device.display().to_string(), "DEV"),
    }
}

const BACKENDS: &[&[&str]] = &[
    &[],
    &["--backend=sync"],
    &["--backend=threads", "--queue-depth=4"],
    &["--backend=uring", "--queue-depth=4"],
];

/// Two devices with the same starting content: one for GNU dd to write,
/// one for ddx; after each case the devices must be identical again.
struct Pair {
    _dir: tempfile::TempDir,
    gnu: LoopDevice,
    ddx: LoopDevice,
    initial: Vec<u8>,
}

fn pair(sector_size: u32) -> Option<Pair> {
    let dir = tempfile::tempdir().unwrap();
    let initial = pattern(1 << 20, 7);
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

#[test]
fn direct_writes_to_block_devices_match_gnu_dd() {
    let dir = tempfile::tempdir().unwrap();
    // Not a multiple of any sector size: the last block is partial.
    let input = dir.path().join("input");
    std::fs::write(&input, pattern(300_077, 3)).unwrap();
    let input = input.display().to_string();
    for sector_size in [512u32, 4096] {
        let Some(devices) = pair(sector_size) else {
            return;
        };
        let s = sector_size as usize;
        let cases: Vec<Vec<String>> = vec![
            vec![format!("bs={s}"), "oflag=direct".into()],
            vec![format!("bs={}", s * 16), "oflag=direct".into()],
            vec![
                format!("bs={}", s * 3),
                "oflag=direct".into(),
                "seek=2".into(),
            ],
            vec![
                format!("ibs={s}"),
                format!("obs={}", s * 8),
                "oflag=direct".into(),
            ],
            // Not a multiple of the sector: GNU's EINVAL, word for word.
            vec!["bs=1000".into(), "oflag=direct".into()],
            vec![
                format!("bs={}", s * 4),
                "oflag=direct".into(),
                "count=5".into(),
            ],
        ];
        for case in &cases {
            for backend in BACKENDS {
                devices.reset();
                let with = |device: &Path| {
                    let mut operands =
                        vec![format!("if={input}"), format!("of={}", device.display())];
                    operands.extend(case.iter().cloned());
                    operands
                };
                let gnu = run("dd", &[], &with(&devices.gnu.path), &devices.gnu.path);
                let ours = run(DDX, backend, &with(&devices.ddx.path), &devices.ddx.path);
                let what = format!("sector {sector_size}, {case:?}, ddx {backend:?}");
                assert_eq!(ours.status, gnu.status, "exit status: {what}");
                assert_eq!(ours.stderr, gnu.stderr, "stderr: {what}");
                let gnu_bytes = std::fs::read(&devices.gnu.path).unwrap();
                let ddx_bytes = std::fs::read(&devices.ddx.path).unwrap();
                assert!(gnu_bytes == ddx_bytes, "device contents differ: {what}");
            }
        }
    }
}

#[test]
fn direct_reads_from_block_devices_match_gnu_dd() {
    let dir = tempfile::tempdir().unwrap();
    for sector_size in [512u32, 4096] {
        let Some(devices) = pair(sector_size) else {
            return;
        };
        let s = sector_size as usize;
        let source = devices.gnu.path.display().to_string();
        let cases: Vec<Vec<String>> = vec![
            vec![format!("bs={s}"), "iflag=direct".into()],
            vec![
                format!("bs={}", s * 32),
                "iflag=direct".into(),
                "skip=3".into(),
            ],
            vec![
                format!("bs={}", s * 2),
                "iflag=direct".into(),
                "count=9".into(),
            ],
            vec!["bs=1000".into(), "iflag=direct".into(), "count=3".into()],
            vec![
                format!("bs={}", s * 4),
                "iflag=direct".into(),
                "oflag=direct".into(),
                "count=40".into(),
            ],
        ];
        for case in &cases {
            for backend in BACKENDS {
                let gnu_out = dir.path().join("gnu.out");
                let ddx_out = dir.path().join("ddx.out");
                let with = |out: &Path| {
                    let mut operands =
                        vec![format!("if={source}"), format!("of={}", out.display())];
                    operands.extend(case.iter().cloned());
                    operands
                };
                let gnu = run("dd", &[], &with(&gnu_out), &gnu_out);
                let ours = run(DDX, backend, &with(&ddx_out), &ddx_out);
                let what = format!("sector {sector_size}, {case:?}, ddx {backend:?}");
                assert_eq!(ours.status, gnu.status, "exit status: {what}");
                assert_eq!(ours.stderr, gnu.stderr, "stderr: {what}");
                let read = |p: &Path| std::fs::read(p).unwrap_or_default();
                assert!(read(&gnu_out) == read(&ddx_out), "outputs differ: {what}");
                let _ = std::fs::remove_file(&gnu_out);
                let _ = std::fs::remove_file(&ddx_out);
            }
        }
    }
}

/// A huge bs costs nothing until it is used: buffers are mapped, not
/// touched, when allocated.
#[test]
fn a_huge_block_size_is_not_touched_until_used() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("small");
    std::fs::write(&input, pattern(10_000, 1)).unwrap();
    for backend in BACKENDS {
        // Reaped below by wait4, which also gives its peak memory.
        #[allow(clippy::zombie_processes)]
        let child = Command::new(DDX)
            .args(*backend)
            .arg(format!("if={}", input.display()))
            .args(["of=/dev/null", "bs=1G", "status=none"])
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child; both pointers are valid.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(rc, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        let max_rss_mib = usage.ru_maxrss / 1024;
        assert!(
            max_rss_mib < 64,
            "bs=1G with {backend:?} used {max_rss_mib} MiB of memory"
        );
    }
}
