//! The wrong-device guard against real block devices: loop devices over
//! files in a temporary directory (never a disk of this machine), with a
//! mounted ext4 filesystem, a mounted partition, active swap and a
//! device-mapper holder; and copies of a file onto itself.
//!
//! Device tests need root, losetup and mkfs.ext4 (and swapon, dmsetup for
//! theirs); without them they skip (`rigs::skip`). The device-mapper
//! test is the one skip allowed even where every rig is required, and only
//! on a kernel without device-mapper (this project's VM). Every device is
//! unmounted and detached by a Drop guard, whatever happens.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::rigs;
use crate::rigs::bytes::sha256;
use crate::rigs::cmd::{gnu_dd, shell, DDX};
use crate::rigs::fixture::{Compare, Ddx};
use crate::rigs::{have, run_tool, LoopDevice, LoopOptions};

fn tool(program: &str, args: &[&str]) -> Result<Output, String> {
    run_tool(
        Command::new(program).args(args),
        &format!("{program} {args:?}"),
    )
}

/// Why device tests cannot run here, if they cannot.
fn missing_facility() -> Option<String> {
    if let Some(why) = LoopDevice::unavailable() {
        return Some(why);
    }
    for program in ["mkfs.ext4", "mount", "umount", "sha256sum"] {
        if !have(program) {
            return Some(format!("{program} not installed"));
        }
    }
    None
}

/// [`Loop::new`], or None after skipping where device tests cannot run
/// here.
fn device_or_skip(size: u64, image: Option<&[u8]>) -> Option<Loop> {
    if let Some(why) = missing_facility() {
        rigs::skip(&why);
        return None;
    }
    rigs::or_skip(Loop::new(size, image))
}

/// A loop device over a file in a temporary directory; unmounts what it
/// mounted and undoes its `cleanups` when dropped, before the rig detaches
/// the device.
struct Loop {
    // Dropped first: detached before its backing file is removed.
    loop_device: LoopDevice,
    dir: tempfile::TempDir,
    mounts: Vec<PathBuf>,
    cleanups: Vec<Vec<String>>,
}

impl Loop {
    /// `size` bytes of `image` (written first if given), attached with
    /// partition scanning.
    fn new(size: u64, image: Option<&[u8]>) -> Result<Loop, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let backing = dir.path().join("disk.img");
        std::fs::write(&backing, image.unwrap_or(&[])).map_err(|e| e.to_string())?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&backing)
            .map_err(|e| e.to_string())?;
        f.set_len(size).map_err(|e| e.to_string())?;
        drop(f);
        let options = LoopOptions {
            partscan: true,
            ..LoopOptions::default()
        };
        Ok(Loop {
            loop_device: LoopDevice::attach(&backing, options)?,
            dir,
            mounts: Vec::new(),
            cleanups: Vec::new(),
        })
    }

    /// The device node, as an operand takes it.
    fn device(&self) -> String {
        self.loop_device.name()
    }

    fn mkfs_and_mount(&mut self, device: &str) -> Result<PathBuf, String> {
        // Eager init: no background writes that would change the hash.
        tool(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                device,
            ],
        )?;
        let mount_point = self.dir.path().join(format!("mnt{}", self.mounts.len()));
        std::fs::create_dir(&mount_point).map_err(|e| e.to_string())?;
        tool("mount", &[device, &mount_point.to_string_lossy()])?;
        self.mounts.push(mount_point.clone());
        std::fs::write(mount_point.join("precious.txt"), b"do not destroy\n")
            .map_err(|e| e.to_string())?;
        tool("sync", &[])?;
        Ok(mount_point)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        for cleanup in self.cleanups.iter().rev() {
            let _ = Command::new(&cleanup[0]).args(&cleanup[1..]).output();
        }
        for mount_point in self.mounts.iter().rev() {
            let _ = Command::new("umount").arg(mount_point).output();
        }
    }
}

/// A DOS partition table with one Linux partition from sector 2048 on.
fn mbr_with_one_partition(sectors: u32) -> Vec<u8> {
    let mut mbr = vec![0u8; 512];
    let entry = &mut mbr[446..462];
    entry[4] = 0x83;
    entry[8..12].copy_from_slice(&2048u32.to_le_bytes());
    entry[12..16].copy_from_slice(&(sectors - 2048).to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xAA;
    mbr
}

/// ddx (run with no terminal on stdin, so that it never asks) refuses, in
/// one line that names the override and each of `wants`.
#[track_caller]
fn assert_refused(ddx: Ddx, wants: &[&str]) {
    let err = ddx.fails().stderr;
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("ddx: refusing to "), "{err}");
    assert!(err.contains("--force"), "names the override: {err}");
    for want in wants {
        assert!(err.contains(want), "lacks {want:?}: {err}");
    }
}

#[test]
fn a_mounted_device_is_refused_intact_and_force_overrides() {
    let Some(mut lo) = device_or_skip(32 << 20, None) else {
        return;
    };
    let device = lo.device();
    let mount_point = lo.mkfs_and_mount(&device).expect("mount");
    let before = sha256(&device);

    assert_refused(
        Ddx::new().args([
            "if=/dev/zero",
            &format!("of={device}"),
            "bs=64k",
            "count=16",
        ]),
        &[
            &format!("'{device}'"),
            "32 MiB",
            "loop device over",
            &format!("mounted on {}", mount_point.display()),
        ],
    );
    assert_eq!(sha256(&device), before, "the device was written");
    assert_eq!(
        std::fs::read(mount_point.join("precious.txt")).unwrap(),
        b"do not destroy\n"
    );

    // --force writes (the last 4 KiB, which a fresh ext4 leaves unused).
    let err = Ddx::new()
        .args([
            "if=/dev/zero",
            &format!("of={device}"),
            "bs=4k",
            "count=1",
            &format!("seek={}", (32 << 20) / 4096 - 1),
            "--force",
        ])
        .succeeds()
        .stderr;
    assert!(
        err.starts_with("1+0 records in\n1+0 records out\n"),
        "{err}"
    );
}

#[test]
fn a_disk_whose_partition_is_mounted_is_refused() {
    let size: u64 = 48 << 20;
    let mbr = mbr_with_one_partition((size / 512) as u32);
    let Some(mut lo) = device_or_skip(size, Some(&mbr)) else {
        return;
    };
    let Some(partition) = lo.loop_device.partition(1) else {
        return rigs::skip(&format!(
            "no partition node {}p1 (no partition scanning here)",
            lo.device()
        ));
    };
    let partition = partition.display().to_string();
    let mount_point = lo.mkfs_and_mount(&partition).expect("mount");
    let before = sha256(lo.device());
    let name = Path::new(&partition).file_name().unwrap().to_string_lossy();
    assert_refused(
        Ddx::new().args(["if=/dev/zero", &format!("of={}", lo.device()), "count=1"]),
        &[&format!(
            "its partition {name} is mounted on {}",
            mount_point.display()
        )],
    );
    assert_eq!(sha256(lo.device()), before);
    // The partition itself is refused too.
    assert_refused(
        Ddx::new().args(["if=/dev/zero", &format!("of={partition}"), "count=1"]),
        &["it is mounted on"],
    );
}

#[test]
fn active_swap_is_refused() {
    if !have("mkswap") || !have("swapon") {
        return rigs::skip("mkswap/swapon not installed");
    }
    let Some(mut lo) = device_or_skip(16 << 20, None) else {
        return;
    };
    let device = lo.device();
    tool("mkswap", &[&device]).expect("mkswap");
    if let Err(why) = tool("swapon", &[&device]) {
        return rigs::skip(&format!("cannot enable swap here: {why}"));
    }
    lo.cleanups.push(vec!["swapoff".into(), device.clone()]);
    assert_refused(
        Ddx::new().args(["if=/dev/zero", &format!("of={device}"), "count=1"]),
        &["it is active swap"],
    );
}

#[test]
fn a_device_held_by_device_mapper_is_refused() {
    // The allowance last: only device-mapper may be missing.
    let Some(mut lo) = device_or_skip(16 << 20, None) else {
        return;
    };
    if !have("dmsetup") {
        return rigs::skip("dmsetup not installed");
    }
    if rigs::skip_if_no_device_mapper() {
        return;
    }
    let device = lo.device();
    let name = format!("ddx-guard-test-{}", std::process::id());
    let table = format!("0 {} linear {device} 0", (16 << 20) / 512);
    if let Err(why) = tool("dmsetup", &["create", &name, "--table", &table]) {
        return rigs::skip(&format!("cannot create a device-mapper device: {why}"));
    }
    lo.cleanups
        .push(vec!["dmsetup".into(), "remove".into(), name.clone()]);
    assert_refused(
        Ddx::new().args(["if=/dev/zero", &format!("of={device}"), "count=1"]),
        &["is held by dm-", &name],
    );
}

#[test]
fn a_free_device_is_written_without_a_word() {
    let Some(lo) = device_or_skip(1 << 20, None) else {
        return;
    };
    let ran = Ddx::new()
        .args([
            "if=/dev/zero",
            &format!("of={}", lo.device()),
            "bs=4k",
            "count=2",
            "status=noxfer",
        ])
        .succeeds();
    assert_eq!(ran.stderr, "2+0 records in\n2+0 records out\n");
}

/// The same-file rule against GNU dd: what ddx lets through gives GNU's
/// result; what it refuses leaves the file as it was.
#[test]
fn copies_onto_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let original = rigs::bytes::pattern(5000, 5000);
    let allowed: &[&[&str]] = &[
        &["conv=notrunc,ucase"],
        &["bs=512", "skip=1", "conv=notrunc"],
        &["bs=512", "skip=2", "seek=1", "conv=notrunc"],
        &["bs=512", "count=2", "seek=2", "conv=notrunc"],
        &["bs=512", "count=1", "seek=1"],
        &["bs=100", "count=1", "seek=50B", "conv=notrunc"],
    ];
    for operands in allowed {
        Compare::new()
            .file("out", original.clone())
            .args(["if=out", "status=none"])
            .args(*operands)
            .output_file()
            .run();
    }
    let refused: &[(&[&str], &str)] = &[
        (&[], "truncates it at byte 0"),
        (
            &["bs=512", "seek=1", "conv=notrunc"],
            "writing from byte 512",
        ),
        (
            &["bs=512", "skip=1", "seek=2", "conv=notrunc"],
            "writing from byte 1024",
        ),
        (
            &["bs=512", "count=3", "seek=1", "conv=notrunc"],
            "writing from byte 512",
        ),
        (&["oflag=append", "conv=notrunc"], "writing from byte 5000"),
        (&["bs=512", "skip=1", "seek=1B"], "truncates it at byte 0"),
    ];
    let f = dir.path().join("f");
    for (operands, what) in refused {
        std::fs::write(&f, &original).unwrap();
        assert_refused(
            Ddx::new()
                .current_dir(dir.path())
                .args(["if=f", "of=f"])
                .args(*operands),
            &["onto itself", what],
        );
        assert!(std::fs::read(&f).unwrap() == original, "{operands:?} wrote");
        // --force gives GNU dd's result.
        Compare::new()
            .file("out", original.clone())
            .args(["if=out", "count=20", "status=none"])
            .args(operands.iter().filter(|o| !o.starts_with("count=")))
            .ddx_args(["--force"])
            .output_file()
            .succeeds();
    }
    // Through the shell's redirections: same file on stdin and stdout.
    std::fs::write(&f, &original).unwrap();
    let out = shell(&format!("{DDX} bs=512 seek=1 conv=notrunc <f 1<>f"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("onto itself"));
    assert!(std::fs::read(&f).unwrap() == original);
}

#[test]
fn a_device_name_that_does_not_exist_is_not_created_in_dev() {
    // GNU dd creates /dev/NAME as a regular file in memory and reports the
    // copy done: a mistyped device name (`of=/dev/sdz`) seems to work.
    let name = format!("/dev/ddx-test-no-such-device-{}", std::process::id());
    let gnu = gnu_dd()
        .args(["if=/dev/zero", &format!("of={name}"), "bs=1", "count=1"])
        .stderr(Stdio::null())
        .status()
        .expect("GNU dd");
    let gnu_created = Path::new(&name).exists();
    let _ = std::fs::remove_file(&name);
    if !gnu.success() || !gnu_created {
        return rigs::skip("cannot create files in /dev here (not root?)");
    }
    assert_refused(
        Ddx::new().args(["if=/dev/zero", &format!("of={name}"), "bs=1", "count=1"]),
        &["refusing to create", &name, "no such device"],
    );
    assert!(!Path::new(&name).exists(), "ddx created {name}");

    // The same name relative to /dev.
    let relative = name.trim_start_matches("/dev/");
    assert_refused(
        Ddx::new().current_dir("/dev").args([
            "if=/dev/zero",
            &format!("of={relative}"),
            "bs=1",
            "count=1",
        ]),
        &["refusing to create", relative],
    );
    assert!(!Path::new(&name).exists());

    // --force does as GNU does.
    let ran = Ddx::new()
        .args([
            "--force",
            "if=/dev/zero",
            &format!("of={name}"),
            "bs=1",
            "count=1",
        ])
        .run();
    let created = Path::new(&name).exists();
    let _ = std::fs::remove_file(&name);
    assert!(ran.status.success(), "{}", ran.stderr);
    assert!(created);

    // A file in /dev/shm is a file like any other.
    let shm = format!("/dev/shm/ddx-test-{}", std::process::id());
    if Path::new("/dev/shm").is_dir() {
        let ran = Ddx::new()
            .args(["if=/dev/zero", &format!("of={shm}"), "bs=1", "count=1"])
            .run();
        let created = Path::new(&shm).exists();
        let _ = std::fs::remove_file(&shm);
        assert!(ran.status.success(), "{}", ran.stderr);
        assert!(created);
    }
}
