//! What the filesystem and the disk under a copy change, on real
//! filesystems made on loop devices (rigs::MountedFs):
//! - XFS shares extents: the kernel's copy (copy_file_range) reflinks;
//! - ext4 can only copy the data: on more than one CPU ddx copies with its
//!   own overlapped reader and writer, and `--offload` forces the kernel's;
//! - within one rotating disk, a copy whose source must come from the disk
//!   runs in turn, in large requests;
//! - between two tmpfs files there is no cache to keep clean.
//!
//! Every copy is compared with GNU dd's: same bytes, same statistics.
//! Needs root, losetup and mkfs.ext4/mkfs.xfs/mkfs.btrfs; skips
//! (`rigs::skip`) where they are missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::rigs;
use crate::rigs::cmd::operand as arg;
use crate::rigs::fixture::{Compare, Compared, Ddx};
use crate::rigs::pages::{cached_fraction, drop_from_cache, sync};
use crate::rigs::MountedFs;

const MIB: u64 = 1 << 20;

/// ddx (with its `options`) and GNU dd copy with `operands` to files
/// under `dir` (on the filesystem under test): both succeed, with the same
/// statistics and bytes. ddx runs first, so that it meets the source as
/// the test left it (not cached by GNU's read).
fn copy_like_gnu(dir: &Path, options: &[&str], operands: &[&str]) -> Compared {
    Compare::new()
        .dir(dir)
        .ddx_args(options)
        .args(operands)
        .output_file()
        .statistics_only()
        .succeeds()
}

/// ddx alone, with `args`; it succeeds.
fn ddx(args: &[&str]) {
    Ddx::new().args(args).succeeds();
}

/// `dir/src`, `len` bytes of rigs' pattern (no zeros to elide) on the
/// disk, and the operand that reads it.
fn source(dir: &Path, len: u64) -> (PathBuf, String) {
    let src = dir.join("src");
    std::fs::write(&src, rigs::bytes::pattern(1, len as usize)).unwrap();
    sync();
    let if_src = arg("if", &src);
    (src, if_src)
}

/// A `kind` filesystem of `size` bytes (see `MountedFs`) holding a
/// [`source`] of `len` bytes; None after skipping where it cannot be made.
fn source_on(kind: &str, size: u64, len: u64) -> Option<(MountedFs, PathBuf, String)> {
    let fs = rigs::or_skip(MountedFs::new(kind, size))?;
    let (src, if_src) = source(&fs.root, len);
    Some((fs, src, if_src))
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn xfs_copies_share_extents() {
    if !rigs::have("filefrag") {
        return rigs::skip("filefrag (e2fsprogs) is not installed");
    }
    let Some((fs, _, if_src)) = source_on("xfs", 512 * MIB, 16 * MIB) else {
        return;
    };
    for (name, operands) in [
        ("whole", vec![if_src.as_str(), "bs=1M"]),
        (
            "part",
            vec![if_src.as_str(), "bs=64k", "skip=3", "seek=5", "count=100"],
        ),
    ] {
        let compared = copy_like_gnu(&fs.root, &["--verbose"], &operands);
        let ours = compared.ddx();
        assert!(
            ours.stderr.contains("offload: copy_file_range copied"),
            "{name}: {}",
            ours.stderr
        );
        let extents = Command::new("filefrag")
            .arg("-v")
            .arg(ours.output_path())
            .output()
            .unwrap();
        let extents = String::from_utf8_lossy(&extents.stdout);
        assert!(
            extents.contains("shared"),
            "{name}: the copy's extents are not shared with the source:\n{extents}"
        );
    }
}

#[test]
fn ext4_copies_through_ddx_and_offload_can_be_forced() {
    if cpus() < 2 {
        return rigs::skip("one CPU, where the kernel's copy is ddx's choice");
    }
    let Some((fs, _, if_src)) = source_on("ext4", 256 * MIB, 16 * MIB + 12345) else {
        return;
    };
    let operands = [if_src.as_str(), "bs=1M"];
    let stderr = |options| {
        copy_like_gnu(&fs.root, options, &operands)
            .ddx()
            .stderr
            .clone()
    };
    let auto = stderr(&["--verbose"]);
    if auto.contains("the CPUs are taken") {
        // Other tasks keep the CPUs busy (a loaded machine): the copy
        // from memory runs in turn, reading then writing, as on one CPU.
        assert!(auto.contains("backend: sequential"), "{auto}");
    } else {
        assert!(auto.contains("backend: threads"), "{auto}");
    }
    // ext4 can only copy the bytes: ddx's own copy either way.
    assert!(auto.contains("offload: not used"), "{auto}");
    let forced = stderr(&["--verbose", "--offload"]);
    assert!(
        forced.contains("offload: copy_file_range copied"),
        "{forced}"
    );
    // The last of --offload and --no-offload wins.
    let never = stderr(&["--verbose", "--offload", "--no-offload"]);
    assert!(never.contains("offload: not used"), "{never}");
}

#[test]
fn within_one_rotating_disk_a_copy_from_the_disk_runs_in_turn() {
    let Some((fs, src, if_src)) = source_on("ext4", 256 * MIB, 24 * MIB) else {
        return;
    };
    let rotational = PathBuf::from(format!(
        "/sys/block/{}/queue/rotational",
        fs.device().path.file_name().unwrap().to_string_lossy()
    ));
    let set_rotational = |value: &str| std::fs::write(&rotational, value).is_ok();
    if !set_rotational("1") {
        return rigs::skip(&format!("cannot set {rotational:?}"));
    }
    let operands = [if_src.as_str(), "bs=1M"];
    // The backend ddx chose and why, copying `src` as GNU dd does.
    let backend = || -> String {
        let compared = copy_like_gnu(&fs.root, &["--verbose"], &operands);
        compared
            .ddx()
            .stderr
            .lines()
            .find_map(|l| l.split("backend: ").nth(1))
            .unwrap_or_default()
            .to_owned()
    };

    drop_from_cache(&src);
    let uncached = backend();
    assert!(
        uncached.starts_with("sequential") && uncached.contains("both ends on one disk"),
        "{uncached}"
    );

    std::fs::read(&src).unwrap();
    let cached = backend();
    // On a loaded machine (CPU pressure) a copy from memory runs in turn
    // too, for another reason, which --verbose names.
    if !cached.contains("the CPUs are taken") {
        assert!(cached.starts_with("threads"), "a cached source: {cached}");
    }

    assert!(set_rotational("0"));
    drop_from_cache(&src);
    let solid = backend();
    assert!(solid.starts_with("threads"), "a solid-state disk: {solid}");
}

#[test]
fn between_tmpfs_files_the_cache_is_left_alone() {
    let Some(tmpfs) = rigs::or_skip(rigs::SmallTmpfs::new(256 * MIB)) else {
        return;
    };
    let (_, if_src) = source(tmpfs.path(), 80 * MIB);
    let compared = copy_like_gnu(tmpfs.path(), &["--verbose"], &[&if_src, "bs=1M"]);
    let stderr = &compared.ddx().stderr;
    assert!(stderr.contains("cache: left to the kernel"), "{stderr}");
}

#[test]
fn where_the_kernel_cannot_write_uncached_ddx_drops_the_pages_itself() {
    // Btrfs takes no RWF_DONTCACHE writes (Linux 6.18): ddx's flusher
    // thread waits for the writeback and drops, before ddx exits (what
    // a copy too large for the memory ddx may use does; forced here).
    let Some((fs, src, if_src)) = source_on("btrfs", 1024 * MIB, 160 * MIB) else {
        return;
    };
    drop_from_cache(&src);
    // Not the kernel's copy: Btrfs would share the extents.
    let compared = copy_like_gnu(
        &fs.root,
        &["--verbose", "--no-offload", "--drop-cache"],
        &[&if_src, "bs=1M"],
    );
    let stderr = &compared.ddx().stderr;
    assert!(stderr.contains("offload: not used"), "{stderr}");
    // GNU's copy read the source again: measure ddx's alone.
    drop(compared);
    drop_from_cache(&src);
    ddx(&[
        "--no-offload",
        "--drop-cache",
        &if_src,
        "bs=1M",
        &arg("of", &fs.root.join("ddx2")),
    ]);
    let (source, copy) = (
        cached_fraction(&src),
        cached_fraction(&fs.root.join("ddx2")),
    );
    assert!(
        source < 0.1 && copy < 0.1,
        "ddx left {:.0}% of the source and {:.0}% of the copy cached",
        source * 100.0,
        copy * 100.0
    );
}
