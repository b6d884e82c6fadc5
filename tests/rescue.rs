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

/// The '-' blocks of a mapfile, as (pos, size).
fn bad_blocks(map: &str) -> Vec<(u64, u64)> {
    let mut lines = map
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    lines.next(); // the status line
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"-")).then(|| {
                let n = |t: &str| u64::from_str_radix(t.trim_start_matches("0x"), 16).unwrap();
                (n(f[0]), n(f[1]))
            })
        })
        .collect()
}

fn have_tool(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn rescue_recovers_what_gnu_ddrescue_recovers() {
    let test = "rescue_recovers_what_gnu_ddrescue_recovers";
    if !have_tool("ddrescue") {
        return rigs::skip(test, "ddrescue is not installed (package gddrescue)");
    }
    let size = 1 << 20;
    let contents = pattern(size);
    let bad = [
        (0x19000, 0x400),
        (0x4A000, 0x200),
        (0x8FE00, 0x600),
        (0xFFE00, 0x200),
    ];
    let device = match rigs::NbdDevice::with_bad_ranges(&contents, &bad) {
        Ok(device) => device,
        Err(reason) => return rigs::skip(test, &reason),
    };
    let scratch = tempfile::tempdir().unwrap();
    let theirs = scratch.path().join("ddrescue.img");
    let their_map = scratch.path().join("ddrescue.map");
    let status = Command::new("ddrescue")
        .args(["-q", "-d", "-b512"])
        .arg(&device.path)
        .arg(&theirs)
        .arg(&their_map)
        .status()
        .unwrap();
    assert!(status.success());
    let mut expected = contents.clone();
    for &(pos, len) in &bad {
        expected[pos as usize..(pos + len) as usize].fill(0);
    }
    // ddrescue leaves a bad last sector unwritten: the image is shorter.
    let mut their_bytes = std::fs::read(&theirs).unwrap();
    their_bytes.resize(size, 0);
    assert!(
        their_bytes == expected,
        "ddrescue itself read the rig wrong"
    );
    assert_eq!(
        bad_blocks(&std::fs::read_to_string(&their_map).unwrap()),
        bad
    );

    for bs in ["bs=4096", "bs=64k", "bs=1M", "bs=512", "ibs=3000"] {
        let ours = scratch.path().join("ddx.img");
        let our_map = scratch.path().join("ddx.map");
        let _ = std::fs::remove_file(&our_map);
        let out = ddx()
            .arg("--rescue")
            .arg(format!("--map={}", our_map.display()))
            .arg(format!("if={}", device.path.display()))
            .arg(format!("of={}", ours.display()))
            .arg(bs)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{bs}: bad sectors exit 1");
        assert!(std::fs::read(&ours).unwrap() == expected, "{bs}: output");
        assert_eq!(
            bad_blocks(&std::fs::read_to_string(&our_map).unwrap()),
            bad,
            "{bs}: map"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reported: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("bad range at offset"))
            .collect();
        let wanted: Vec<String> = bad
            .iter()
            .map(|(pos, len)| {
                format!(
                    "dd: '{}': bad range at offset {pos}, {len} bytes (zeros in the output)",
                    device.path.display()
                )
            })
            .collect();
        assert_eq!(reported, wanted, "{bs}: report");
        // ddrescue can continue from our map: nothing left but bad sectors.
        let status = Command::new("ddrescue")
            .args(["-q", "-d", "-b512"])
            .arg(&device.path)
            .arg(&ours)
            .arg(&our_map)
            .status()
            .unwrap();
        assert!(status.success(), "{bs}: ddrescue reads our map");
    }
}

/// A small xorshift, seeded from the clock (the seed is printed).
struct Random(u64);

impl Random {
    fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        eprintln!("random seed {seed}");
        Random(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn resume_after_sigkill_gives_the_uninterrupted_copy() {
    let test = "resume_after_sigkill_gives_the_uninterrupted_copy";
    let size = 2 << 20;
    let contents = pattern(size);
    // About 21 ms per 16 KiB request: a whole copy takes ~2.7 s.
    let device = match rigs::NbdDevice::slow(&contents, 20) {
        Ok(device) => device,
        Err(reason) => return rigs::skip(test, &reason),
    };
    let scratch = tempfile::tempdir().unwrap();
    let output = scratch.path().join("copy.img");
    let checkpoint = scratch.path().join("copy.img.ddx-map");
    let run = || {
        ddx()
            .arg("--resume")
            .arg(format!("if={}", device.path.display()))
            .arg(format!("of={}", output.display()))
            .args(["bs=16k", "iflag=direct", "status=none"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut random = Random::new();
    let (mut kills, mut resumed_from_partial_map, mut completed) = (0, 0, 0);
    while kills < 20 {
        let had_map = checkpoint.exists();
        let mut child = run();
        std::thread::sleep(std::time::Duration::from_millis(20 + random.below(1500)));
        if child.try_wait().unwrap().is_some() {
            // Finished before the kill: the checkpoint is gone; go again
            // (a fresh copy over the finished one).
            completed += 1;
            assert!(
                !checkpoint.exists(),
                "a complete copy removes its checkpoint"
            );
            assert!(std::fs::read(&output).unwrap() == contents);
            continue;
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
        child.wait().unwrap();
        kills += 1;
        if had_map {
            resumed_from_partial_map += 1;
        }
    }
    let status = run().wait().unwrap();
    assert!(status.success(), "the last resume completes");
    assert!(
        std::fs::read(&output).unwrap() == contents,
        "resumed output equals the input"
    );
    assert!(!checkpoint.exists());
    eprintln!(
        "{kills} kills, {resumed_from_partial_map} runs resumed a checkpoint, \
         {completed} completed before their kill"
    );
    assert!(
        resumed_from_partial_map >= 5,
        "too few kills landed after a checkpoint was saved"
    );
}
