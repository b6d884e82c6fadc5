//! `--used-only` against the tools that own each format: disks laid out
//! by sfdisk (MBR with logical partitions, GPT), made by mkfs.ext4 (with
//! and without flex_bg, uninit_bg's crc16 and metadata_csum's crc32c, 1
//! and 4 KiB blocks), mkfs.vfat (FAT16, FAT32), mkfs.xfs and mkswap over
//! pseudo-random bytes, as a used card holds what deleted files left,
//! then filled by mkfs.ext4 -d and mtools (and each ext4 by debugfs out
//! to its last block group, so that a map missing any group's blocks
//! shows). Each is backed up to a
//! compressed image with its bmap, restored by `bmaptool copy` and by
//! ddx's `--decompress --bmap` onto a device full of other data, and
//! checked: e2fsck -fn and fsck.fat -n call the file systems clean, every
//! file reads back as it was written (ext4 mounted read-only, FAT through
//! mtools), what no file system recognises and everything outside the
//! partitions comes back byte for byte, and the map holds every block
//! partclone and e2image -ra would copy. An XFS is written through a
//! loop mount and checked by xfs_repair -n, and one whose log the kernel
//! left dirty (a shutdown) is copied whole. An NTFS made by mkntfs on
//! an MBR and a GPT disk is written through ntfs-3g, compared with
//! partclone.ntfs, checked by ntfsfix -n and read back through ntfs-3g;
//! one ntfsfix marked dirty is copied whole. The same backup goes to a
//! sparse file, an NBD export and an S3 object.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::rigs::bytes::pattern;
use crate::rigs::cmd::operand;
use crate::rigs::fixture::Ddx;
use crate::rigs::{self, have, must_run, LoopDevice, LoopOptions};

const MIB: u64 = 1 << 20;

/// Whether every tool is here; else the test skips, naming the first
/// that is not.
fn tools(list: &[&str]) -> bool {
    if let Some(missing) = list.iter().find(|tool| !have(tool)) {
        rigs::skip(&format!("{missing} is not installed"));
        return false;
    }
    true
}

/// `size` bytes of pseudo-random data (seeded) at `path`.
fn random_file(path: &Path, size: u64, seed: u64) {
    std::fs::write(path, pattern(seed, size as usize)).unwrap();
}

/// A disk of `size` bytes at `dir/name`, full of pseudo-random bytes,
/// partitioned by sfdisk from `script`, on a loop device that lists its
/// partitions; None after skipping where loop devices cannot be had.
fn disk(dir: &Path, name: &str, size: u64, seed: u64, script: &str) -> Option<LoopDevice> {
    let path = dir.join(name);
    random_file(&path, size, seed);
    let mut sfdisk = Command::new("sfdisk");
    sfdisk
        .args(["-q", "--no-reread", "--no-tell-kernel"])
        .arg(&path);
    feed(&mut sfdisk, script);
    rigs::or_skip(LoopDevice::attach(
        &path,
        LoopOptions {
            partscan: true,
            ..LoopOptions::default()
        },
    ))
}

/// Run `cmd` with `input` on its standard input; it must succeed.
fn feed(cmd: &mut Command, input: &str) {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn partition(device: &LoopDevice, number: u32) -> PathBuf {
    device
        .partition(number)
        .unwrap_or_else(|| panic!("{}p{number} did not appear", device.name()))
}

/// Files of mixed content under `dir`: random, text, a run of zeros,
/// many small ones; (path relative to `dir`, bytes).
fn content(dir: &Path, seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![
        ("random.bin".to_owned(), pattern(seed, 3_000_000)),
        (
            "text/numbers.txt".to_owned(),
            (1..150_000)
                .map(|n| format!("{n}\n"))
                .collect::<String>()
                .into_bytes(),
        ),
        ("zeros.bin".to_owned(), vec![0u8; 700_000]),
    ];
    for i in 0..40 {
        files.push((
            format!("small/{i}.dat"),
            pattern(seed + i + 1, 1000 + 97 * i as usize),
        ));
    }
    for (name, bytes) in &files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    files
}

/// A FAT on `device` made by mkfs.vfat (`args`), holding `files` copied
/// in with mtools, and a large file copied in and deleted, whose
/// clusters keep its bytes.
fn fat(device: &Path, args: &[&str], files: &[(String, Vec<u8>)], dir: &Path) {
    must_run(Command::new("mkfs.vfat").args(args).arg(device));
    let gone = dir.join("gone.bin");
    random_file(&gone, 2_000_000, 99);
    mtools("mcopy", device, &[gone.to_str().unwrap(), "::gone.bin"]);
    for (name, _) in files.iter().filter(|(name, _)| !name.contains('/')) {
        let from = dir.join("content").join(name);
        mtools(
            "mcopy",
            device,
            &[from.to_str().unwrap(), &format!("::{name}")],
        );
    }
    mtools("mmd", device, &["::small"]);
    for (name, _) in files.iter().filter(|(name, _)| name.starts_with("small/")) {
        let from = dir.join("content").join(name);
        mtools(
            "mcopy",
            device,
            &[from.to_str().unwrap(), &format!("::{name}")],
        );
    }
    mtools("mdel", device, &["::gone.bin"]);
}

fn mtools(tool: &str, device: &Path, args: &[&str]) -> Vec<u8> {
    must_run(
        Command::new(tool)
            .env("MTOOLS_SKIP_CHECK", "1")
            .arg("-i")
            .arg(device)
            .args(args),
    )
}

/// An ext4 on `device` made by mkfs.ext4 (`args`) from `dir/content`.
fn ext4(device: &Path, args: &[&str], dir: &Path) {
    must_run(
        Command::new("mkfs.ext4")
            .args(["-q", "-F", "-E", "nodiscard"])
            .args(args)
            .arg("-d")
            .arg(dir.join("content"))
            .arg(device),
    );
}

/// Fill the ext4 on `device` out to its last block group with debugfs:
/// a spacer file over the first third of its free blocks, then a file
/// over nearly all the rest, then the spacer deleted; so that the last
/// group holds a file's blocks (a map that drops any group's used blocks
/// loses some of them) and the early groups what a deleted file left.
/// That file's (name, bytes), which must come back too.
fn fill_to_the_last_group(device: &Path, dir: &Path) -> (String, Vec<u8>) {
    let header =
        String::from_utf8(must_run(Command::new("dumpe2fs").arg("-h").arg(device))).unwrap();
    let field = |name: &str| -> u64 {
        header
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name:?} in dumpe2fs -h: {header}"))
    };
    let (block, free) = (field("Block size:"), field("Free blocks:"));
    let spacer = free / 3;
    // A few blocks spare for the file's extent tree.
    let tail = pattern(93, ((free - spacer - 32) * block) as usize);
    random_file(&dir.join("spacer"), spacer * block, 92);
    std::fs::write(dir.join("tail"), &tail).unwrap();
    let script = format!(
        "write {} spacer\nwrite {} tail\nrm spacer\n",
        dir.join("spacer").display(),
        dir.join("tail").display()
    );
    feed(
        Command::new("debugfs").args(["-w", "-f", "-"]).arg(device),
        &script,
    );
    // The last group must hold data now, or the test proves nothing.
    let groups = String::from_utf8(must_run(Command::new("dumpe2fs").arg(device))).unwrap();
    let last = groups.rsplit("\nGroup ").next().unwrap();
    let span = last
        .split_once("(Blocks ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(span, _)| span.split_once('-'))
        .map(|(first, last)| last.parse::<u64>().unwrap() - first.parse::<u64>().unwrap() + 1)
        .unwrap_or_else(|| panic!("no blocks in the last group: {last}"));
    let free_there = last
        .lines()
        .find_map(|line| line.trim().split_once(" free blocks,"))
        .map(|(count, _)| count.parse::<u64>().unwrap())
        .unwrap_or_else(|| panic!("no free blocks in the last group: {last}"));
    assert!(
        free_there < span / 2,
        "the last group ({span} blocks) still has {free_there} free"
    );
    std::fs::remove_file(dir.join("spacer")).unwrap();
    std::fs::remove_file(dir.join("tail")).unwrap();
    ("tail".to_owned(), tail)
}

/// The map's ranges, in bytes.
fn mapped(map: &Path) -> Vec<Range<u64>> {
    let bmap = ddx::image::Bmap::read(map).unwrap();
    bmap.ranges
        .iter()
        .map(|r| {
            let (start, end) = bmap.byte_span(r);
            start..end
        })
        .collect()
}

fn covered(ranges: &[Range<u64>], range: &Range<u64>) -> bool {
    ranges
        .iter()
        .any(|r| r.start <= range.start && range.end <= r.end)
}

fn bytes(ranges: &[Range<u64>]) -> u64 {
    ranges.iter().map(|r| r.end - r.start).sum()
}

/// The blocks partclone copies of `device` (its domain file's '+'
/// lines), in bytes from the device's start.
fn partclone_used(tool: &str, device: &Path, dir: &Path) -> Vec<Range<u64>> {
    let domain = dir.join(format!("{tool}.domain"));
    let _ = std::fs::remove_file(&domain);
    must_run(
        Command::new(tool)
            .args(["-q", "-D", "-s"])
            .arg(device)
            .arg("-o")
            .arg(&domain),
    );
    let text = std::fs::read_to_string(&domain).unwrap();
    let hex = |field: &str| u64::from_str_radix(field.trim_start_matches("0x"), 16).unwrap();
    let used: Vec<Range<u64>> = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|fields| fields.len() == 3 && fields[2] == "+")
        .map(|fields| hex(fields[0])..hex(fields[0]) + hex(fields[1]))
        .collect();
    assert!(
        !used.is_empty(),
        "{tool} copies nothing of {device:?}: {text}"
    );
    used
}

/// The data extents of the raw image `e2image -ra` writes of `device`.
fn e2image_used(device: &Path, dir: &Path) -> Vec<Range<u64>> {
    let image = dir.join("e2image.raw");
    let _ = std::fs::remove_file(&image);
    must_run(Command::new("e2image").arg("-ra").arg(device).arg(&image));
    let file = std::fs::File::open(&image).unwrap();
    let size = file.metadata().unwrap().len();
    let mut extents = Vec::new();
    let mut at = 0;
    use rustix::fs::{seek, SeekFrom};
    while at < size {
        let Ok(data) = seek(&file, SeekFrom::Data(at)) else {
            break;
        };
        let hole = seek(&file, SeekFrom::Hole(data)).unwrap();
        extents.push(data..hole);
        at = hole;
    }
    assert!(!extents.is_empty(), "e2image copies nothing of {device:?}");
    extents
}

/// Every range of `theirs` (from `base` on the disk) lies in `ours`.
fn holds(ours: &[Range<u64>], theirs: &[Range<u64>], base: u64, what: &str) {
    for range in theirs {
        let on_disk = base + range.start..base + range.end;
        assert!(
            covered(ours, &on_disk),
            "{what} copies bytes {on_disk:?}, which the map leaves out"
        );
    }
}

/// The bytes of `path` (a file or device) in `range`.
fn read_range(path: &Path, range: Range<u64>) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; (range.end - range.start) as usize];
    file.read_exact_at(&mut buf, range.start).unwrap();
    buf
}

fn checked(tool: &str, args: &[&str], device: &Path) {
    let out = Command::new(tool).args(args).arg(device).output().unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?} {device:?} finds the restored file system unclean: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every file of `files` reads back from the ext4 on `device`, mounted
/// read-only.
fn ext4_files_match(device: &Path, files: &[(String, Vec<u8>)], dir: &Path) {
    let at = dir.join("mnt");
    std::fs::create_dir_all(&at).unwrap();
    must_run(
        Command::new("mount")
            .args(["-o", "ro"])
            .arg(device)
            .arg(&at),
    );
    let mismatch = files
        .iter()
        .find(|(name, bytes)| std::fs::read(at.join(name)).ok().as_ref() != Some(bytes))
        .map(|(name, _)| name.clone());
    must_run(Command::new("umount").arg(&at));
    assert_eq!(mismatch, None, "a file on the restored ext4 differs");
}

/// Every file of `files` that [`fat`] copied in reads back from the FAT
/// on `device` (mtools).
fn fat_files_match(device: &Path, files: &[(String, Vec<u8>)]) {
    let copied = |name: &str| !name.contains('/') || name.starts_with("small/");
    for (name, bytes) in files.iter().filter(|(name, _)| copied(name)) {
        let read = mtools("mcopy", device, &[&format!("::{name}"), "-"]);
        assert!(read == *bytes, "{name} on the restored FAT differs");
    }
}

/// A device the size of `size` full of other pseudo-random data.
fn target(dir: &Path, name: &str, size: u64, seed: u64) -> Option<LoopDevice> {
    let path = dir.join(name);
    random_file(&path, size, seed);
    rigs::or_skip(LoopDevice::attach(
        &path,
        LoopOptions {
            partscan: true,
            ..LoopOptions::default()
        },
    ))
}

/// Back `source` up into `dir/image.zst` and `dir/image.bmap`; the
/// verbose lines.
fn back_up(source: &LoopDevice, dir: &Path) -> (PathBuf, PathBuf, String) {
    let image = dir.join("image.zst");
    let map = dir.join("image.bmap");
    let ran = Ddx::new()
        .arg(operand("if", &source.path))
        .arg(operand("of", &image))
        .arg("--compress=zstd")
        .arg(format!("--bmap-create={}", map.display()))
        .args(["--used-only", "--verbose"])
        .succeeds();
    (image, map, ran.stderr)
}

/// Restore the backup onto two devices full of other data, one by
/// bmaptool, one by ddx: the two devices.
fn restore_both(
    dir: &Path,
    image: &Path,
    map: &Path,
    size: u64,
) -> Option<(LoopDevice, LoopDevice)> {
    let by_bmaptool = target(dir, "by-bmaptool", size, 7)?;
    rigs::images::bmaptool_copy(map, image, &by_bmaptool.path);
    let by_ddx = target(dir, "by-ddx", size, 8)?;
    Ddx::new()
        .arg(operand("if", image))
        .arg(operand("of", &by_ddx.path))
        .arg("--decompress")
        .arg(format!("--bmap={}", map.display()))
        .succeeds();
    for device in [&by_bmaptool, &by_ddx] {
        let _ = Command::new("partx").arg("-u").arg(&device.path).output();
    }
    Some((by_bmaptool, by_ddx))
}

/// The bytes outside the partitions `parts` are the source's.
fn same_outside(source: &LoopDevice, restored: &LoopDevice, size: u64, parts: &[Range<u64>]) {
    let mut at = 0;
    let mut sorted = parts.to_vec();
    sorted.sort_by_key(|r| r.start);
    for range in sorted.iter().chain(std::iter::once(&(size..size))) {
        if range.start > at {
            assert!(
                read_range(&source.path, at..range.start)
                    == read_range(&restored.path, at..range.start),
                "bytes {at}..{} outside the partitions differ",
                range.start
            );
        }
        at = at.max(range.end);
    }
}

#[test]
fn an_mbr_disk_with_logical_partitions_restores_clean_by_bmaptool_and_by_ddx() {
    let required = [
        "sfdisk",
        "mkfs.ext4",
        "mkfs.vfat",
        "mkswap",
        "debugfs",
        "dumpe2fs",
        "mcopy",
        "e2fsck",
        "fsck.fat",
        "bmaptool",
        "partclone.ext4",
        "partclone.fat",
        "e2image",
        "mount",
    ];
    if !tools(&required) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let files = content(&dir.join("content"), 11);
    // p1 FAT16 (32 MiB), p2 extended holding p5 ext4 (1 KiB blocks, no
    // flex_bg, uninit_bg's crc16) and p6 swap, p3 of no known kind.
    let size = 96 * MIB;
    let script = "label: dos\n\
        start=2048, size=65536, type=6\n\
        start=67584, size=98304, type=5\n\
        start=167936, size=16384, type=83\n\
        start=69632, size=65536, type=83\n\
        start=137216, size=16384, type=82\n";
    let Some(source) = disk(dir, "source", size, 5, script) else {
        return;
    };
    let (p1, p3, p5, p6) = (
        partition(&source, 1),
        partition(&source, 3),
        partition(&source, 5),
        partition(&source, 6),
    );
    fat(&p1, &["-F", "16"], &files, dir);
    ext4(
        &p5,
        &["-b", "1024", "-O", "^flex_bg,^metadata_csum,uninit_bg"],
        dir,
    );
    let mut ext4_files = files.clone();
    ext4_files.push(fill_to_the_last_group(&p5, dir));
    must_run(Command::new("mkswap").arg("-q").arg(&p6));

    let (image, map, said) = back_up(&source, dir);
    for line in [
        "--used-only: MBR partition table",
        "partition 1 (bytes 1048576-34603008, 32 MiB): FAT16, ",
        "partition 3 (bytes 85983232-94371840, 8.0 MiB): copied whole: no file system recognised",
        "partition 5 (bytes 35651584-69206016, 32 MiB): ext4, ",
        "partition 6 (bytes 70254592-78643200, 8.0 MiB): swap, 4.0 KiB used",
    ] {
        assert!(said.contains(line), "wanted {line:?} in: {said}");
    }
    assert!(!said.contains("checksum"), "{said}");
    let ours = mapped(&map);
    // Both partitions' free space and the swap area are left out.
    assert!(
        bytes(&ours) < size - 40 * MIB,
        "{} bytes mapped",
        bytes(&ours)
    );
    let part_range = |n: u64, start: u64, sectors: u64| -> (u64, Range<u64>) {
        (n, start * 512..(start + sectors) * 512)
    };
    let (_, r1) = part_range(1, 2048, 65536);
    let (_, r5) = part_range(5, 69632, 65536);
    holds(
        &ours,
        &partclone_used("partclone.fat", &p1, dir),
        r1.start,
        "partclone.fat",
    );
    holds(
        &ours,
        &partclone_used("partclone.ext4", &p5, dir),
        r5.start,
        "partclone.ext4",
    );
    holds(&ours, &e2image_used(&p5, dir), r5.start, "e2image -ra");

    let Some((by_bmaptool, by_ddx)) = restore_both(dir, &image, &map, size) else {
        return;
    };
    let partitions = [
        r1.clone(),
        r5.clone(),
        70254592..78643200,
        85983232..94371840,
    ];
    for restored in [&by_bmaptool, &by_ddx] {
        checked("e2fsck", &["-fn"], &partition(restored, 5));
        checked("fsck.fat", &["-n"], &partition(restored, 1));
        ext4_files_match(&partition(restored, 5), &ext4_files, dir);
        fat_files_match(&partition(restored, 1), &files);
        assert!(
            std::fs::read(&p3).unwrap() == std::fs::read(partition(restored, 3)).unwrap(),
            "the partition of no known kind differs"
        );
        assert_eq!(
            read_range(&p6, 0..4096),
            read_range(&partition(restored, 6), 0..4096),
            "the swap header differs"
        );
        same_outside(&source, restored, size, &partitions);
    }
}

#[test]
fn a_gpt_disk_restores_clean_and_goes_to_a_sparse_file_as_well() {
    let required = [
        "sfdisk",
        "mkfs.ext4",
        "mkfs.vfat",
        "debugfs",
        "dumpe2fs",
        "mcopy",
        "e2fsck",
        "fsck.fat",
        "bmaptool",
        "partclone.ext4",
        "partclone.fat",
        "e2image",
        "mount",
    ];
    if !tools(&required) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let files = content(&dir.join("content"), 21);
    // p1 FAT32 (40 MiB), p2 ext4 with flex_bg, meta_bg, 64bit and
    // metadata_csum in 8 MiB groups of 4 KiB blocks; both GPT headers.
    let size = 88 * MIB;
    let script = "label: gpt\n\
        start=2048, size=81920, type=EBD0A0A2-B9E5-4433-87C0-68B6B72699C7\n\
        start=83968, size=83968, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n";
    let Some(source) = disk(dir, "source", size, 6, script) else {
        return;
    };
    let (p1, p2) = (partition(&source, 1), partition(&source, 2));
    fat(&p1, &["-F", "32", "-s", "1"], &files, dir);
    ext4(
        &p2,
        &["-b", "4096", "-g", "2048", "-O", "meta_bg,^resize_inode"],
        dir,
    );
    let mut ext4_files = files.clone();
    ext4_files.push(fill_to_the_last_group(&p2, dir));
    let (image, map, said) = back_up(&source, dir);
    for line in [
        "--used-only: GPT;",
        "partition 1 (bytes 1048576-42991616, 40 MiB): FAT32, ",
        "partition 2 (bytes 42991616-85983232, 41 MiB): ext4, ",
    ] {
        assert!(said.contains(line), "wanted {line:?} in: {said}");
    }
    assert!(!said.contains("checksum"), "{said}");
    let ours = mapped(&map);
    assert!(
        bytes(&ours) < size - 40 * MIB,
        "{} bytes mapped",
        bytes(&ours)
    );
    let r1 = 2048 * 512..83968 * 512;
    let r2 = 83968 * 512..167936 * 512;
    holds(
        &ours,
        &partclone_used("partclone.fat", &p1, dir),
        r1.start,
        "partclone.fat",
    );
    holds(
        &ours,
        &partclone_used("partclone.ext4", &p2, dir),
        r2.start,
        "partclone.ext4",
    );
    holds(&ours, &e2image_used(&p2, dir), r2.start, "e2image -ra");

    let Some((by_bmaptool, by_ddx)) = restore_both(dir, &image, &map, size) else {
        return;
    };
    for restored in [&by_bmaptool, &by_ddx] {
        checked("e2fsck", &["-fn"], &partition(restored, 2));
        checked("fsck.fat", &["-n"], &partition(restored, 1));
        ext4_files_match(&partition(restored, 2), &ext4_files, dir);
        fat_files_match(&partition(restored, 1), &files);
        // Both headers and tables, and the gaps, come back.
        same_outside(&source, restored, size, &[r1.clone(), r2.clone()]);
    }

    // To a sparse file: the disk's size, the used blocks as they are,
    // the rest holes.
    let plain = dir.join("plain.img");
    Ddx::new()
        .arg(operand("if", &source.path))
        .arg(operand("of", &plain))
        .arg("--used-only")
        .succeeds();
    let meta = std::fs::metadata(&plain).unwrap();
    assert_eq!(meta.len(), size);
    use std::os::unix::fs::MetadataExt;
    assert!(
        meta.blocks() * 512 <= bytes(&ours),
        "the sparse file allocates {} bytes for {} used",
        meta.blocks() * 512,
        bytes(&ours)
    );
    let mut at = 0;
    for range in ours.iter().chain(std::iter::once(&(size..size))) {
        assert!(
            read_range(&plain, at..range.start).iter().all(|&b| b == 0),
            "bytes {at}..{} of the sparse file are not zeros",
            range.start
        );
        if range.start < range.end {
            assert!(
                read_range(&plain, range.clone()) == read_range(&source.path, range.clone()),
                "used bytes {range:?} of the sparse file differ"
            );
        }
        at = range.end;
    }
}

/// mkfs.xfs below the 300 MiB it asks for, as xfstests makes them (the
/// variables it looks for before it allows a smaller one).
fn mkfs_xfs(device: &Path, args: &[&str]) {
    must_run(
        Command::new("mkfs.xfs")
            .args(["-q", "-f", "-K"])
            .args(args)
            .arg(device)
            .env("QA_CHECK_FS", "1")
            .env("TEST_DIR", "/nonexistent")
            .env("TEST_DEV", "/nonexistent"),
    );
}

/// Mount `device` at `dir/mnt`, run `with` on the mount point, unmount.
fn mounted<T>(device: &Path, options: &str, dir: &Path, with: impl FnOnce(&Path) -> T) -> T {
    let at = dir.join("mnt");
    std::fs::create_dir_all(&at).unwrap();
    must_run(
        Command::new("mount")
            .args(["-o", options])
            .arg(device)
            .arg(&at),
    );
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| with(&at)));
    must_run(Command::new("umount").arg(&at));
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

fn kernel_has_xfs() -> bool {
    let known = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if known.lines().any(|line| line.trim_end().ends_with("\txfs")) {
        return true;
    }
    // A module not loaded yet is loaded by the first mount.
    let _ = Command::new("modprobe").arg("xfs").output();
    let known = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if known.lines().any(|line| line.trim_end().ends_with("\txfs")) {
        return true;
    }
    rigs::skip("the kernel cannot mount XFS");
    false
}

#[test]
fn an_xfs_restores_clean_and_one_with_a_dirty_log_is_copied_whole() {
    let required = [
        "sfdisk",
        "mkfs.xfs",
        "xfs_repair",
        "xfs_io",
        "bmaptool",
        "partclone.xfs",
        "mount",
    ];
    if !tools(&required) || !kernel_has_xfs() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let files = content(&dir.join("content"), 31);
    // p1 XFS (80 MiB, four allocation groups, its log inside) over random
    // bytes, p2 of no known kind.
    let size = 96 * MIB;
    let script = "label: gpt\n\
        start=2048, size=163840, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n\
        start=165888, size=16384, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n";
    let Some(source) = disk(dir, "source", size, 32, script) else {
        return;
    };
    let p1 = partition(&source, 1);
    mkfs_xfs(&p1, &["-d", "agcount=4"]);
    // The files, and a large file written and deleted, whose blocks keep
    // its bytes.
    mounted(&p1, "rw", dir, |at| {
        for (name, bytes) in &files {
            let path = at.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        random_file(&at.join("gone.bin"), 30 * MIB, 33);
        must_run(&mut Command::new("sync"));
        std::fs::remove_file(at.join("gone.bin")).unwrap();
    });
    checked("xfs_repair", &["-n"], &p1);

    let (image, map, said) = back_up(&source, dir);
    for line in [
        "--used-only: GPT;",
        "partition 1 (bytes 1048576-84934656, 80 MiB): XFS, ",
        "partition 2 (bytes 84934656-93323264, 8.0 MiB): copied whole: no file system recognised",
    ] {
        assert!(said.contains(line), "wanted {line:?} in: {said}");
    }
    assert!(!said.contains("not to be trusted"), "{said}");
    let ours = mapped(&map);
    // The deleted file's 30 MiB and the rest of the free space are left
    // out.
    assert!(
        bytes(&ours) < size - 40 * MIB,
        "{} bytes mapped",
        bytes(&ours)
    );
    let r1 = 2048 * 512..165888 * 512;
    holds(
        &ours,
        &partclone_used("partclone.xfs", &p1, dir),
        r1.start,
        "partclone.xfs",
    );
    let Some((by_bmaptool, by_ddx)) = restore_both(dir, &image, &map, size) else {
        return;
    };
    for restored in [&by_bmaptool, &by_ddx] {
        let p1 = partition(restored, 1);
        checked("xfs_repair", &["-n"], &p1);
        let mismatch = mounted(&p1, "ro,norecovery", dir, |at| {
            files
                .iter()
                .find(|(name, bytes)| std::fs::read(at.join(name)).ok().as_ref() != Some(bytes))
                .map(|(name, _)| name.clone())
        });
        assert_eq!(mismatch, None, "a file on the restored XFS differs");
        same_outside(&source, restored, size, std::slice::from_ref(&r1));
    }

    // Shut down after a sync: the log holds what was written since, and
    // no unmount record. xfs_repair -n says so; the backup copies the file
    // system whole.
    mounted(&p1, "rw", dir, |at| {
        std::fs::write(at.join("late.txt"), b"written before a shutdown\n").unwrap();
        must_run(&mut Command::new("sync"));
        must_run(
            Command::new("xfs_io")
                .args(["-x", "-c", "shutdown"])
                .arg(at),
        );
    });
    let repair = Command::new("xfs_repair")
        .arg("-n")
        .arg(&p1)
        .output()
        .unwrap();
    assert!(
        !repair.status.success(),
        "xfs_repair -n finds the log clean after a shutdown: {}",
        String::from_utf8_lossy(&repair.stderr)
    );
    let (_, map, said) = back_up(&source, dir);
    assert!(
        said.contains("partition 1 (bytes 1048576-84934656, 80 MiB): XFS, copied whole: its log holds changes"),
        "{said}"
    );
    assert!(
        covered(&mapped(&map), &r1),
        "the dirty XFS is not copied whole"
    );
}

/// Run `with` on the NTFS on `device` mounted through ntfs-3g (`options`)
/// at `dir/mnt`, then unmount it (a fuseblk mount: the unmount waits for
/// ntfs-3g to write everything out).
fn ntfs_mounted<T>(device: &Path, options: &str, dir: &Path, with: impl FnOnce(&Path) -> T) -> T {
    let at = dir.join("mnt");
    std::fs::create_dir_all(&at).unwrap();
    must_run(
        Command::new("ntfs-3g")
            .args(["-o", options])
            .arg(device)
            .arg(&at),
    );
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| with(&at)));
    must_run(Command::new("umount").arg(&at));
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// An NTFS on `device` made by mkntfs, holding `files` written through
/// ntfs-3g; before them, a file over all the free space but a MiB was
/// written and deleted, so that its clusters keep its bytes.
fn ntfs(device: &Path, files: &[(String, Vec<u8>)], dir: &Path) {
    must_run(Command::new("mkntfs").args(["-q", "-f", "-Q"]).arg(device));
    ntfs_mounted(device, "rw", dir, |at| {
        let free = rustix::fs::statvfs(at).unwrap();
        let gone = (free.f_bavail * free.f_frsize).saturating_sub(MIB);
        random_file(&at.join("gone.bin"), gone, 51);
        must_run(&mut Command::new("sync"));
        std::fs::remove_file(at.join("gone.bin")).unwrap();
        for (name, bytes) in files {
            let path = at.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    });
}

/// Bytes of `ranges` within `within`.
fn bytes_within(ranges: &[Range<u64>], within: &Range<u64>) -> u64 {
    ranges
        .iter()
        .map(|r| {
            r.end
                .min(within.end)
                .saturating_sub(r.start.max(within.start))
        })
        .sum()
}

#[test]
fn an_ntfs_on_mbr_and_gpt_restores_clean_and_a_dirty_one_is_copied_whole() {
    let required = [
        "sfdisk",
        "mkntfs",
        "ntfs-3g",
        "ntfsfix",
        "bmaptool",
        "partclone.ntfs",
    ];
    if !tools(&required) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let files = content(&dir.join("content"), 51);
    // p1 NTFS (32 MiB) over random bytes, p2 of no known kind.
    let size = 48 * MIB;
    let r1 = 2048 * 512..67584 * 512;
    let r2 = 67584 * 512..83968 * 512;
    for (label, p1_type, p2_type, table) in [
        ("dos", "7", "83", "MBR partition table"),
        (
            "gpt",
            "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7",
            "0FC63DAF-8483-4772-8E79-3D69D8477DE4",
            "GPT;",
        ),
    ] {
        let script = format!(
            "label: {label}\nstart=2048, size=65536, type={p1_type}\n\
             start=67584, size=16384, type={p2_type}\n"
        );
        let Some(source) = disk(dir, &format!("source-{label}"), size, 52, &script) else {
            return;
        };
        let (p1, p2) = (partition(&source, 1), partition(&source, 2));
        ntfs(&p1, &files, dir);
        checked("ntfsfix", &["-n"], &p1);

        let (image, map, said) = back_up(&source, dir);
        for line in [
            format!("--used-only: {table}"),
            "partition 1 (bytes 1048576-34603008, 32 MiB): NTFS, ".into(),
            "partition 2 (bytes 34603008-42991616, 8.0 MiB): copied whole: no file system \
             recognised"
                .into(),
        ] {
            assert!(said.contains(&line), "{label}: wanted {line:?} in: {said}");
        }
        let ours = mapped(&map);
        let theirs = partclone_used("partclone.ntfs", &p1, dir);
        holds(&ours, &theirs, r1.start, "partclone.ntfs");
        // Both read $Bitmap: ddx adds only what lies past the last whole
        // cluster (the backup boot sector), and the deleted file's bytes
        // are left out.
        let in_p1 = bytes_within(&ours, &r1);
        assert!(
            in_p1 <= bytes(&theirs) + 4096,
            "{label}: {in_p1} bytes mapped in the NTFS, partclone.ntfs copies {}",
            bytes(&theirs)
        );
        assert!(in_p1 < 8 * MIB, "{label}: {in_p1} bytes mapped in the NTFS");

        let Some((by_bmaptool, by_ddx)) = restore_both(dir, &image, &map, size) else {
            return;
        };
        for restored in [&by_bmaptool, &by_ddx] {
            let restored_p1 = partition(restored, 1);
            checked("ntfsfix", &["-n"], &restored_p1);
            let mismatch = ntfs_mounted(&restored_p1, "ro", dir, |at| {
                files
                    .iter()
                    .find(|(name, bytes)| std::fs::read(at.join(name)).ok().as_ref() != Some(bytes))
                    .map(|(name, _)| name.clone())
            });
            assert_eq!(
                mismatch, None,
                "{label}: a file on the restored NTFS differs"
            );
            assert!(
                std::fs::read(&p2).unwrap() == std::fs::read(partition(restored, 2)).unwrap(),
                "{label}: the partition of no known kind differs"
            );
            same_outside(&source, restored, size, &[r1.clone(), r2.clone()]);
        }
        drop((by_bmaptool, by_ddx));
        if label == "dos" {
            // Mounted read-write through ntfs-3g (fuseblk), it is refused.
            let refused = dir.join("refused.img");
            ntfs_mounted(&p1, "rw", dir, |at| {
                Ddx::new()
                    .arg(operand("if", &source.path))
                    .arg(operand("of", &refused))
                    .arg("--used-only")
                    .fails_with(&format!("p1 is mounted read-write on {}", at.display()));
            });
            assert!(!refused.exists(), "the output was created");
            continue;
        }

        // ntfsfix marks the volume dirty, for chkdsk to look at it: its
        // bitmap is not trusted, and it is copied whole.
        must_run(Command::new("ntfsfix").arg(&p1));
        let (_, map, said) = back_up(&source, dir);
        assert!(
            said.contains(
                "partition 1 (bytes 1048576-34603008, 32 MiB): NTFS, copied whole: it is marked \
                 dirty"
            ),
            "{said}"
        );
        assert!(
            covered(&mapped(&map), &r1),
            "the dirty NTFS is not copied whole"
        );
    }
}

/// Back up a whole-disk ext4 (no partition table) made over random bytes
/// to a sparse file, an NBD export and an S3 object: all three hold the
/// same image, which e2fsck calls clean, whose used blocks are the
/// disk's and the rest zeros.
#[cfg(all(feature = "nbd", feature = "object"))]
#[test]
fn the_same_backup_goes_to_a_sparse_file_an_nbd_export_and_s3() {
    use crate::rigs::cluster::bucket_or_skip;
    use crate::rigs::nbd::nbdkit;
    if !tools(&["mkfs.ext4", "e2fsck"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let files = content(&dir.join("content"), 31);
    let size = 24 * MIB;
    let disk = dir.join("disk.img");
    random_file(&disk, size, 3);
    ext4(&disk, &["-b", "4096"], dir);
    let plain = dir.join("plain.img");
    let map = dir.join("plain.bmap");
    let said = Ddx::new()
        .arg(operand("if", &disk))
        .arg(operand("of", &plain))
        .arg(format!("--bmap-create={}", map.display()))
        .args(["--used-only", "--verbose"])
        .succeeds()
        .stderr;
    assert!(said.contains("--used-only: no partition table;"), "{said}");
    assert!(
        said.contains("the whole disk (bytes 0-25165824, 24 MiB): ext4, "),
        "{said}"
    );
    let ours = mapped(&map);
    assert!(bytes(&ours) < 12 * MIB, "{} bytes mapped", bytes(&ours));
    let expected = std::fs::read(&plain).unwrap();
    let mut at = 0;
    for range in ours.iter().chain(std::iter::once(&(size..size))) {
        let (hole, data) = (
            at as usize..range.start as usize,
            range.start as usize..range.end as usize,
        );
        assert!(
            expected[hole].iter().all(|&b| b == 0),
            "a hole before {range:?} is not zeros"
        );
        assert!(
            expected[data.clone()] == read_range(&disk, range.clone())[..],
            "{range:?} differs"
        );
        at = range.end;
    }
    checked("e2fsck", &["-fn"], &plain);

    let Some(server) = nbdkit(&["memory", &format!("size={size}")]) else {
        return;
    };
    Ddx::new()
        .arg(operand("if", &disk))
        .arg(format!("of={}", server.uri()))
        .arg("--used-only")
        .succeeds();
    let from_nbd = dir.join("from-nbd.img");
    Ddx::new()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &from_nbd))
        .succeeds();
    assert!(
        std::fs::read(&from_nbd).unwrap() == expected,
        "the export's image differs"
    );

    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    Ddx::new()
        .envs(bucket.env())
        .env("HOME", "/nonexistent")
        .arg(operand("if", &disk))
        .arg(format!("of={}", bucket.url("disk.img")))
        .arg("--used-only")
        .succeeds();
    let object = bucket.object("disk.img").unwrap();
    assert!(object == expected, "the object differs");
    ext4_files_match_in_image(&plain, &files);
}

/// Every file of `files` reads back from the ext4 image file `image`,
/// through debugfs (no mount needed for a file).
fn ext4_files_match_in_image(image: &Path, files: &[(String, Vec<u8>)]) {
    for (name, bytes) in files {
        let out = Command::new("debugfs")
            .args(["-R", &format!("cat /{name}")])
            .arg(image)
            .output()
            .unwrap();
        assert!(out.stdout == *bytes, "{name} in the backup differs");
    }
}

#[test]
fn a_source_with_a_file_system_mounted_read_write_is_refused() {
    if !tools(&["sfdisk", "mkfs.ext4", "mount"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    content(&dir.join("content"), 41);
    let script = "label: gpt\nstart=2048, size=32768, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n";
    let Some(source) = disk(dir, "source", 20 * MIB, 9, script) else {
        return;
    };
    let p1 = partition(&source, 1);
    ext4(&p1, &[], dir);
    let at = dir.join("mnt");
    std::fs::create_dir_all(&at).unwrap();
    must_run(Command::new("mount").arg(&p1).arg(&at));
    let out = dir.join("out.img");
    let backup = |extra: &[&str]| {
        Ddx::new()
            .arg(operand("if", &source.path))
            .arg(operand("of", &out))
            .arg("--used-only")
            .args(extra)
    };
    let name = source
        .path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let refused = backup(&[]).fails_with(&format!("refusing to read '{}' (", source.name()));
    refused.says(&format!(
        "{name}p1 is mounted read-write on {}",
        at.display()
    ));
    refused.says("--force overrides");
    assert!(!out.exists(), "the output was created");
    // The partition itself, named as it.
    Ddx::new()
        .arg(operand("if", &p1))
        .arg(operand("of", &out))
        .arg("--used-only")
        .fails_with("it is mounted read-write on");
    // --force reads it anyway.
    backup(&["--force"]).succeeds();
    // Read-only, it holds still.
    must_run(Command::new("mount").args(["-o", "remount,ro"]).arg(&at));
    backup(&["--verbose"])
        .succeeds()
        .says("partition 1 (bytes 1048576-17825792, 16 MiB): ext4, ");
    must_run(Command::new("umount").arg(&at));
}

#[test]
fn a_pipe_or_an_image_is_refused_before_the_output_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    Ddx::new()
        .arg(operand("of", &out))
        .arg("--used-only")
        .stdin(vec![0u8; 4096])
        .fails_with(
            "--used-only reads the input by position: standard input is a pipe, which has no \
             positions",
        );
    let input = dir.path().join("in");
    std::fs::write(&input, [1u8; 4096]).unwrap();
    for (other, named) in [
        ("--decompress", "--decompress"),
        ("--bmap=x.bmap", "--bmap"),
    ] {
        Ddx::new()
            .arg(operand("if", &input))
            .arg(operand("of", &out))
            .args(["--used-only", other])
            .fails_with(&format!("--used-only cannot be combined with {named}"));
    }
    assert!(!out.exists(), "the output was created");
}

/// What `--used-only` copies whole for want of a file system it knows (a
/// partition of noise, or a disk with no table and no file system) is
/// said without `--verbose`, once, before the statistics: such a backup
/// is as large and as slow as the whole; status=none keeps it quiet.
#[test]
fn what_is_copied_whole_is_said_without_verbose() {
    if !tools(&["sfdisk"]) {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let Some(partitioned) = disk(dir, "parts", 16 * MIB, 41, "label: dos\n,8M,83\n") else {
        return;
    };
    let Some(bare) = target(dir, "bare", 4 * MIB, 42) else {
        return;
    };
    for (source, said) in [
        (
            &partitioned,
            "ddx: --used-only: partition 1 (bytes 1048576-9437184, 8.0 MiB): copied whole: no \
             file system recognised",
        ),
        (
            &bare,
            "ddx: --used-only: the whole disk (bytes 0-4194304, 4.0 MiB): copied whole: no \
             file system recognised",
        ),
    ] {
        let image = dir.join("image.zst");
        let ran = Ddx::new()
            .arg(operand("if", &source.path))
            .arg(operand("of", &image))
            .args(["--compress=zstd", "--used-only"])
            .succeeds();
        let lines: Vec<&str> = ran.stderr.lines().collect();
        assert_eq!(
            lines.iter().filter(|l| l.contains("copied whole")).count(),
            1,
            "{}",
            ran.stderr
        );
        assert_eq!(lines[0], said, "{}", ran.stderr);
        assert!(lines[1].contains(" records in"), "{}", ran.stderr);
        let quiet = Ddx::new()
            .arg(operand("if", &source.path))
            .arg(operand("of", &image))
            .args(["--compress=zstd", "--used-only", "status=none"])
            .succeeds();
        assert_eq!(quiet.stderr, "");
    }
}
