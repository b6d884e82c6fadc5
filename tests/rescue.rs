//! Failing devices: read errors against GNU dd (conv=noerror on every
//! backend) and GNU ddrescue (--rescue, --map), resume after SIGKILL, write
//! errors (ENOSPC, EIO). The devices are rigs over temp files (see
//! `rigs`); a test whose rig cannot be built here says why and passes.

mod rigs;

use std::path::Path;
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;

fn ddx() -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::cargo_bin("ddx").expect("ddx binary");
    cmd.arg0("dd").env("LC_ALL", "C");
    cmd
}

fn gnu_dd() -> Command {
    let mut cmd = Command::new("dd");
    cmd.env("LC_ALL", "C");
    cmd
}

/// stderr with the time and rate of the statistics line blurred.
fn normalised_stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|line| match line.find(" copied, ") {
            Some(at) => format!("{} copied, <time>", &line[..at]),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Deterministic bytes, different in every 512-byte sector.
fn pattern(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

const BACKENDS: &[&[&str]] = &[
    &["--backend=sync"],
    &["--backend=threads", "--queue-depth=1"],
    &["--backend=threads"],
    &[],
];

fn compare_with_gnu(test: &str, input: &Path, operands: &[&str], scratch: &Path) {
    let gnu_out = scratch.join("gnu.out");
    let gnu = gnu_dd()
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", gnu_out.display()))
        .args(operands)
        .output()
        .unwrap();
    for backend in BACKENDS {
        let ours_out = scratch.join("ddx.out");
        let _ = std::fs::remove_file(&ours_out);
        let ours = ddx()
            .args(*backend)
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", ours_out.display()))
            .args(operands)
            .output()
            .unwrap();
        let what = format!("{test}: {operands:?} {backend:?}");
        assert_eq!(
            normalised_stderr(&ours),
            normalised_stderr(&gnu),
            "stderr, {what}"
        );
        assert_eq!(ours.status.code(), gnu.status.code(), "status, {what}");
        assert!(
            std::fs::read(&ours_out).unwrap() == std::fs::read(&gnu_out).unwrap(),
            "output bytes differ, {what}"
        );
    }
}

#[test]
fn read_errors_match_gnu_dd_on_every_backend() {
    let test = "read_errors_match_gnu_dd_on_every_backend";
    let size = 1 << 20;
    let contents = pattern(size);
    // A two-sector range inside the 25th 4 KiB block, one lone sector, and
    // a range across a 64 KiB boundary.
    let bad = [(0x19000, 0x400), (0x4A000, 0x200), (0x8FE00, 0x600)];
    let device = match rigs::NbdDevice::with_bad_ranges(&contents, &bad) {
        Ok(device) => device,
        Err(reason) => return rigs::skip(test, &reason),
    };
    let scratch = tempfile::tempdir().unwrap();
    for operands in [
        &["bs=4096", "conv=noerror,sync"][..],
        &["bs=4096", "conv=noerror"],
        &["bs=4096"],
        &["bs=64k", "conv=noerror,sync"],
        &["bs=1M", "conv=noerror,sync"],
        &["bs=512", "conv=noerror,sync", "iflag=direct"],
        &["bs=512", "conv=noerror", "iflag=direct"],
        &["ibs=4096", "obs=10000", "conv=noerror,sync"],
        &["bs=4096", "conv=noerror,sync", "skip=20", "count=100"],
        &["bs=4096", "conv=noerror,sync", "status=none"],
    ] {
        compare_with_gnu(test, &device.path, operands, scratch.path());
    }
}
